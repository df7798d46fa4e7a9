//! The store: device directories, their segments, the RAM index over all
//! of them, and the put / get / delete / compact / move operations.
//!
//! This file holds [`Store`], whose methods are the API, and [`Inner`],
//! the state they share; each job's code is a module of its own, mostly
//! methods of [`Inner`] that the API calls:
//!
//! - [`open`]: opening a store: the directories checked and locked, the
//!   segment files found, the index built, the background thread started.
//!   Under it, [`load`] loads one segment (its checkpoint, a scan of the
//!   needles past it), [`torn`] tells a torn tail from damage, [`damage`]
//!   notes damage before a repair and sets unreadable files aside, and
//!   [`settle`] settles identities two segments both claim.
//! - [`write`](mod@write): batches of puts, deletes and the flags they
//!   write in place, the active segment's seal and its successor;
//!   [`prepared`]: the zeros written ahead of an active segment's needles,
//!   and the O_DIRECT batches into them.
//! - [`read`](mod@read): GETs, prefixes, the page-cache-only mode,
//!   liveness, the needles of a segment in file order.
//! - [`checkpoints`]: the segments' index checkpoints.
//! - [`merge`]: the recent map merged into a new run.
//! - [`rewrite`]: a sealed segment rewritten as its next generation, by a
//!   compaction or a move; [`moves`]: the room a move needs first.
//! - [`background`]: the thread that writes checkpoints, merges and
//!   compacts.
//!
//! What they share, and which uses none of them: [`handle`] (a segment as
//! the store holds it: its file, its needles' offsets, its prepared tail),
//! [`node_index`] (the node-wide index), [`report`] (the API's values and
//! the counters) and [`locks`].

mod background;
mod checkpoints;
mod damage;
mod handle;
mod load;
mod locks;
mod merge;
mod moves;
mod node_index;
mod open;
mod prepared;
mod read;
mod report;
mod rewrite;
mod settle;
mod torn;
mod write;

use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::superblock::Tier;
use handle::{FdBudget, Segment};
use locks::{lock, read, write};
use node_index::NodeIndex;
use report::CounterCells;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;

pub use damage::{DAMAGE_NOTE, QUARANTINE_DIR};
pub use moves::move_headroom;
pub use open::LOCK_FILE;
pub use read::{cached_only, NeedleIter};
pub use report::{
    Counters, MemoryUsage, Object, OpenReport, Prefix, PutItem, Quarantined, RewriteProgress,
    RewriteReport, SegmentInfo, StoredNeedle,
};

// The offline check (`crate::verify`) tells torn tails apart as the open does.
pub(crate) use torn::{all_zero, torn_by_power_loss};

struct Device {
    path: PathBuf,
    tier: Tier,
    /// The device's active segment; held while appending.
    writer: Mutex<Arc<Segment>>,
}

struct Inner {
    cfg: StoreConfig,
    devices: Vec<Device>,
    idx: RwLock<NodeIndex>,
    next_id: AtomicU64,
    rr: AtomicUsize,
    fds: Arc<FdBudget>,
    counters: CounterCells,
    /// Serialises index updates that flag needles on disk first (puts that
    /// overwrite, deletes), so that two writers of one identity cannot
    /// both leave their needle unflagged.
    update: Mutex<()>,
    /// One compaction, move or merge at a time.
    maintenance: Mutex<()>,
    /// One writer of active segments' checkpoints at a time.
    checkpointing: Mutex<()>,
    /// Segments holding superseded flags written but not yet synced (only
    /// with a [`StoreConfig::version_order`]): synced by the background
    /// thread, before any delete and at close.
    flags_pending: Mutex<Vec<Arc<Segment>>>,
    stop: AtomicBool,
    /// Exclusive advisory locks on each directory's lock file, held while
    /// the store is open (released by the kernel if the process dies).
    _locks: Vec<File>,
}

/// A segment store over one or more device directories.
///
/// `Store` is `Send + Sync`: share it (e.g. in an `Arc`) between threads;
/// reads run concurrently, writes to one device are serialised. Dropping it
/// stops the background thread and writes the index checkpoints.
pub struct Store {
    inner: Arc<Inner>,
    bg: Option<JoinHandle<()>>,
    report: OpenReport,
}

impl Store {
    /// Opens (and recovers) a store: loads the run file and every segment's
    /// index checkpoint, scans the needles past them (orphans), cuts torn
    /// tails, settles identities found live in two segments, and starts the
    /// background thread that writes checkpoints, merges and compacts.
    pub fn open(cfg: StoreConfig) -> Result<Store> {
        open::open(cfg)
    }

    /// What the open found and repaired.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
    }

    /// Says that what the open reported as possibly lost
    /// ([`OpenReport::may_lack_records`]) has been made good — a replica
    /// caught up from the others: removes the [`DAMAGE_NOTE`] (durably), so
    /// that the next open no longer reports it. The report of this open is
    /// unchanged.
    pub fn damage_dealt_with(&self) -> Result<()> {
        let p = self.inner.cfg.devices[0].path.join(DAMAGE_NOTE);
        match strata_fs::remove_file_durable(&p) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(StoreError::io("removing", &p)(e)),
        }
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &StoreConfig {
        &self.inner.cfg
    }

    /// Writes one object to a device of `tier`; returns once it is durable.
    pub fn put(&self, tier: Tier, key: u64, alt_key: u32, cookie: u32, data: &[u8]) -> Result<()> {
        self.put_batch(
            tier,
            &[PutItem {
                head: &[],
                key,
                alt_key,
                cookie,
                data,
            }],
        )
    }

    /// Writes a batch of objects to one device of `tier` (round robin among
    /// that tier's devices) with a single fdatasync; returns once all are
    /// durable. A later item with the same identity wins. Nothing of a batch
    /// that fails is visible, and the store stays consistent.
    pub fn put_batch(&self, tier: Tier, items: &[PutItem<'_>]) -> Result<()> {
        let devs: Vec<usize> = (0..self.inner.devices.len())
            .filter(|&i| self.inner.devices[i].tier == tier)
            .collect();
        if devs.is_empty() {
            return Err(StoreError::NoDeviceForTier(tier));
        }
        let d = devs[self.inner.rr.fetch_add(1, Ordering::Relaxed) % devs.len()];
        self.put_batch_on(d, items)
    }

    /// Like [`Store::put_batch`], on the device with index `device`.
    pub fn put_batch_on(&self, device: usize, items: &[PutItem<'_>]) -> Result<()> {
        self.inner.put_batch_on(device, items)
    }

    /// Reads an object: one positioned read of its whole needle, checked for
    /// magics, cookie and checksum. `Ok(None)` when the object is absent,
    /// deleted or the cookie is wrong (indistinguishable on purpose);
    /// [`StoreError::Corrupt`] when the bytes on disk are damaged.
    pub fn get(&self, key: u64, alt_key: u32, cookie: u32) -> Result<Option<Object>> {
        self.inner.get(key, alt_key, Some(cookie))
    }

    /// Reads an object without checking a cookie (the caller gets the
    /// needle's cookie in [`Object::cookie`]). For servers whose clients may
    /// omit the cookie; everything else as [`Store::get`].
    pub fn get_unchecked(&self, key: u64, alt_key: u32) -> Result<Option<Object>> {
        self.inner.get(key, alt_key, None)
    }

    /// The first `n` bytes of an object's data without reading the rest
    /// (no cookie checked): a caller that needs only what the data starts
    /// with (a version stamp) does not read megabytes for it. A needle whose
    /// whole fits in `n` bytes of data is read whole and checked as by
    /// [`Store::get`]; a longer one is read up to `n` bytes of its data,
    /// its header checked (magics, header checksum, identity, flags) but
    /// not its data's checksum: [`Prefix::verified`] says which.
    pub fn get_prefix(&self, key: u64, alt_key: u32, n: usize) -> Result<Option<Prefix>> {
        Ok(self
            .inner
            .read(key, alt_key, None, Some(n))?
            .map(|(o, size, verified)| Prefix {
                data: o.data,
                size,
                verified,
                tier: o.tier,
                segment: o.segment,
            }))
    }

    /// Whether a live object with this identity exists (reads its needle).
    pub fn contains(&self, key: u64, alt_key: u32) -> Result<bool> {
        Ok(self.inner.get(key, alt_key, None)?.is_some())
    }

    /// Deletes an object: sets the deleted flag in its needle on disk,
    /// synchronously, then drops it from the index. Returns whether a live
    /// object was deleted.
    pub fn delete(&self, key: u64, alt_key: u32) -> Result<bool> {
        Ok(self.inner.delete_batch(&[(key, alt_key)])?[0])
    }

    /// Deletes a batch of objects (identities as (key, alternate key)): the
    /// deleted flags are written in place and made durable with one
    /// fdatasync per segment file the batch touches (not one per delete),
    /// before the call returns. Returns, for each identity, whether a live
    /// object was deleted (an identity given twice is deleted once).
    pub fn delete_batch(&self, ids: &[(u64, u32)]) -> Result<Vec<bool>> {
        self.inner.delete_batch(ids)
    }

    /// Every segment with its tier, size, garbage ratio and creation time,
    /// newest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let mut v: Vec<SegmentInfo> = self
            .inner
            .all_segments()
            .iter()
            .map(|s| SegmentInfo {
                id: s.id,
                generation: s.generation,
                device: s.device,
                tier: s.tier,
                path: s.path.clone(),
                size: s.len.load(Ordering::Relaxed),
                needles: s.needle_count(),
                active: s.is_active(),
                garbage_ratio: s.garbage_ratio(),
                created_unix_ns: s.created_unix_ns,
            })
            .collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.id));
        v
    }

    /// Compacts a sealed segment online: copies its live needles to a new
    /// generation while reads and writes go on, then swaps it in atomically.
    /// `progress` is called as the source is scanned.
    pub fn compact(
        &self,
        segment: u64,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        self.inner.rewrite(segment, None, progress)
    }

    /// Compacts every segment whose garbage ratio is at least
    /// `min_garbage_ratio`; returns the reports. An active segment that
    /// qualifies is sealed first (a new one takes its writes), so that
    /// deleted space is reclaimed whatever the segment size, also in a
    /// workload whose only segment never fills.
    pub fn compact_all(
        &self,
        min_garbage_ratio: f64,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<Vec<RewriteReport>> {
        for s in self.segments() {
            if s.active && s.garbage_ratio >= min_garbage_ratio {
                self.inner.seal_if_active(s.device, s.id)?;
            }
        }
        let ids: Vec<u64> = self
            .segments()
            .into_iter()
            .filter(|s| !s.active && s.garbage_ratio >= min_garbage_ratio)
            .map(|s| s.id)
            .collect();
        let mut out = Vec::new();
        for id in ids {
            match self.compact(id, progress) {
                Ok(r) => out.push(r),
                Err(StoreError::NoSuchSegment(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Moves a sealed segment whole to another device directory (e.g. from
    /// flash to disk), crash-safely: copy, fsync, rename, switch handles,
    /// unlink. Reads go on throughout.
    ///
    /// A move starts only when the destination's file system has room for
    /// the segment and still keeps [`move_headroom`] free for client
    /// writes; otherwise it answers [`StoreError::NoRoom`] having written
    /// nothing. (A copy that ran into ENOSPC half way would take the last
    /// free bytes from client writes, which would then fail while the
    /// copy lasts, and a mover retrying it would do so again and again.)
    pub fn move_segment(
        &self,
        segment: u64,
        device: usize,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        self.inner.move_segment(segment, device, progress)
    }

    /// Seals the active segment of `device` now (a new one is started).
    pub fn seal_active(&self, device: usize) -> Result<()> {
        let dev = self
            .inner
            .devices
            .get(device)
            .ok_or(StoreError::NoSuchDevice(device))?;
        let mut w = lock(&dev.writer);
        if w.needle_count() == 0 {
            return Ok(());
        }
        self.inner.seal(device, &mut w)
    }

    /// Merges the recent map's entries of sealed segments into a new run
    /// (written to the run file before it replaces the old one). The store
    /// does this by itself in the background once the recent map has grown
    /// by an eighth of the run (at least 65,536 entries); returns the
    /// identities the new run holds.
    pub fn merge_index(&self) -> Result<u64> {
        self.inner.merge()
    }

    /// The needles of a segment in file order (for recovery streaming and
    /// re-appending hot needles). Damaged needles are reported as
    /// [`StoreError::Corrupt`] items and skipped.
    pub fn needles(&self, segment: u64) -> Result<NeedleIter> {
        self.inner.needles(segment)
    }

    /// Whether the needle at `offset` in `segment` is the live version of its
    /// identity (not deleted, not overwritten).
    pub fn is_live(&self, segment: u64, offset: u64, key: u64, alt_key: u32) -> Result<bool> {
        self.inner.is_live(segment, offset, key, alt_key)
    }

    /// Counters since open.
    pub fn counters(&self) -> Counters {
        let c = &self.inner.counters;
        Counters {
            preads: c.preads.load(Ordering::Relaxed),
            bytes_read: c.bytes_read.load(Ordering::Relaxed),
            bytes_written_flash: c.written[0].load(Ordering::Relaxed),
            bytes_written_disk: c.written[1].load(Ordering::Relaxed),
            fdatasyncs: c.fdatasyncs.load(Ordering::Relaxed),
            compactions: c.compactions.load(Ordering::Relaxed),
            bytes_reclaimed: c.reclaimed.load(Ordering::Relaxed),
            index_probes: c.probes.load(Ordering::Relaxed),
            index_lookups: c.gets.load(Ordering::Relaxed),
            merges: c.merges.load(Ordering::Relaxed),
            header_checks: c.header_checks.load(Ordering::Relaxed),
        }
    }

    /// How many segment files this store keeps open at most
    /// (`StoreConfig::max_open_files`, or half the process's soft limit on
    /// open files when that is 0). A store with more sealed segments than
    /// this reopens files on GETs.
    pub fn open_files_budget(&self) -> usize {
        self.inner.fds.cap
    }

    /// RAM used by the index.
    pub fn memory(&self) -> MemoryUsage {
        let mut m = MemoryUsage::default();
        let ix = read(&self.inner.idx);
        for s in ix.table.iter().flatten() {
            if s.is_active() {
                m.active_bytes += s.heap_bytes();
            } else {
                m.sealed_bytes += s.heap_bytes();
            }
        }
        if let Some(r) = &ix.run {
            m.sealed_bytes += r.heap_bytes() as u64;
            m.sealed_objects = r.entry_count();
            m.run_partitions = r.parts().len() as u64;
        }
        m.sealed_bytes += ix.table.capacity() as u64 * 8;
        m.active_bytes += ix.recent_heap_bytes();
        m.active_objects = ix.recent_len() as u64;
        m
    }

    /// Writes every dirty index checkpoint now.
    pub fn checkpoint(&self) -> Result<()> {
        self.inner.write_checkpoints()
    }

    /// Drops the store's segment files from the page cache (after writing
    /// back dirty pages), so that following GETs read the device. For
    /// benchmarks of cold reads.
    pub fn drop_page_cache(&self) -> Result<()> {
        for s in self.inner.all_segments() {
            let f = s.file()?;
            strata_fs::sync_data(&f).map_err(StoreError::io("syncing", &s.path))?;
            rustix::fs::fadvise(&*f, 0, None, rustix::fs::Advice::DontNeed)
                .map_err(|e| StoreError::io("dropping cached pages of", &s.path)(e.into()))?;
            if !s.is_active() {
                s.file.close();
            }
        }
        Ok(())
    }

    /// Closes the store: stops the background thread and writes checkpoints.
    pub fn close(mut self) -> Result<()> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<()> {
        self.inner.stop.store(true, Ordering::Relaxed);
        if let Some(bg) = self.bg.take() {
            let _ = bg.join();
        }
        // A closed store's active segments end at their last needle.
        let mut first_err = None;
        for dev in &self.inner.devices {
            let w = lock(&dev.writer);
            let res = w
                .file()
                .and_then(|f| w.tail.finish(&f, w.len.load(Ordering::Acquire), &w.path));
            if let Err(e) = res {
                first_err.get_or_insert(e);
            }
        }
        if let Err(e) = self.inner.sync_pending_flags() {
            first_err.get_or_insert(e);
        }
        let ck = self.inner.write_checkpoints();
        match first_err {
            Some(e) => Err(e),
            None => ck,
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

impl Inner {
    fn all_segments(&self) -> Vec<Arc<Segment>> {
        read(&self.idx).table.iter().flatten().cloned().collect()
    }

    fn find(&self, id: u64) -> Result<Arc<Segment>> {
        read(&self.idx)
            .table
            .iter()
            .flatten()
            .find(|s| s.id == id)
            .cloned()
            .ok_or(StoreError::NoSuchSegment(id))
    }

    /// Closes sealed segments' files not used lately once more are open
    /// than the budget allows (a clock sweep over the segment table).
    fn trim_fds(&self) {
        let b = &self.fds;
        if b.open.load(Ordering::Relaxed) <= b.cap {
            return;
        }
        let ix = read(&self.idx);
        let n = ix.table.len().max(1);
        let target = b.cap - b.cap / 8;
        let mut steps = 0;
        while b.open.load(Ordering::Relaxed) > target && steps < 2 * n {
            steps += 1;
            let i = b.hand.fetch_add(1, Ordering::Relaxed) % n;
            let Some(s) = ix.table.get(i).and_then(|s| s.as_ref()) else {
                continue;
            };
            if s.is_active() || s.file.used.swap(false, Ordering::Relaxed) {
                continue;
            }
            let mut h = write(&s.file.handle);
            if !s.retired.load(Ordering::Acquire) && h.take().is_some() {
                b.open.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }

    /// Reserves a place in the segment table.
    fn reserve_slot(&self) -> u32 {
        let mut ix = write(&self.idx);
        ix.table.push(None);
        (ix.table.len() - 1) as u32
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Store>();
}
