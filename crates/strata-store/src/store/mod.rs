//! The store: device directories, their segments, the RAM index over all
//! of them, and the put / get / delete / compact / move operations.

mod damage;
mod handle;
mod load;
mod locks;
mod node_index;
mod open;
mod prepared;
mod read;
mod report;
mod settle;
mod torn;
mod write;

use crate::bits::bits_for;
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::needle::{self, NeedleHeader, FLAGS_OFFSET, FLAG_DELETED, FLAG_SUPERSEDED};
use crate::format::run as run_file;
use crate::format::superblock::{self, Superblock, Tier, SUPERBLOCK_LEN};
use crate::index::{
    part_hash, part_of, part_start, ActiveIndex, Part, Run, SealedSegment, SegList,
};
use crate::segment::{
    self, index_file_name, pread_exact, segment_file_name, sync_dir, write_file_atomic,
    write_file_atomic_with, ScanItem, Scanner,
};
use crate::spill::Spill;
use std::collections::HashMap;
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use handle::{advise_random, ActiveSeg, Body, Entry, FdBudget, SegFile, Segment, Tail};
use locks::{lock, read, write};
use node_index::{Loc, NodeIndex, TOMB};
use report::CounterCells;
// The offline check (`crate::verify`) tells torn tails apart as the open does.
pub use damage::{DAMAGE_NOTE, QUARANTINE_DIR};
pub use open::LOCK_FILE;
pub use read::{cached_only, NeedleIter};
pub use report::{
    Counters, MemoryUsage, Object, OpenReport, Prefix, PutItem, Quarantined, RewriteProgress,
    RewriteReport, SegmentInfo, StoredNeedle,
};
pub(crate) use torn::{all_zero, torn_by_power_loss};

/// What [`Inner::live_entries_of`] needs of an active segment, copied so
/// that its lock is not held meanwhile.
struct IdsSnapshot {
    ids_base: usize,
    /// Byte offset of needle `ids_base`.
    base_offset: u64,
    below: usize,
    ids: Vec<Entry>,
}

impl IdsSnapshot {
    fn of(a: &ActiveSeg, below: usize) -> IdsSnapshot {
        IdsSnapshot {
            ids_base: a.ids_base,
            base_offset: a.needle(a.ids_base as u32).map_or(a.end(), |x| x.0),
            below,
            ids: a
                .ids
                .iter()
                .filter(|e| (e.2 as usize) < below)
                .copied()
                .collect(),
        }
    }
}

/// The background compaction seals an active segment for compaction once
/// it holds at least this much garbage (and its garbage ratio passes
/// `compaction_garbage_ratio`).
const ACTIVE_RECLAIM_MIN_BYTES: u64 = 1 << 20;

/// The recent map grows by at least this many entries between merges.
const MERGE_MIN_ENTRIES: usize = 1 << 16;
/// At most this many hash partitions in a run (2^16 × the default 2^20
/// identities per partition is far past any node).
const MAX_RUN_PARTITIONS: usize = 1 << 16;
/// A merge's spill files (temporary: an open removes `*.tmp` files).
const SPILL_TAKEN: &str = "strata.merge-taken.tmp";
const SPILL_OLD: &str = "strata.merge-old.tmp";

/// What [`Inner::merge_parts`] builds from.
struct MergePlan<'a> {
    old_run: Option<Arc<Run>>,
    segs: &'a Arc<SegList>,
    pos: &'a HashMap<u32, u32>,
    table: &'a [Option<Arc<Segment>>],
    taken: &'a Spill,
    nparts: u64,
    generation: u64,
    fp_bits: u32,
}

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
        let Some(dev) = self.inner.devices.get(device) else {
            return Err(StoreError::NoSuchDevice(device));
        };
        let size = self.inner.find(segment)?.len.load(Ordering::Acquire);
        if let Ok(st) = rustix::fs::statvfs(&dev.path) {
            let available = st.f_bavail.saturating_mul(st.f_frsize);
            let needed = size + move_headroom(st.f_blocks.saturating_mul(st.f_frsize));
            if available < needed {
                return Err(StoreError::NoRoom {
                    dir: dev.path.clone(),
                    segment,
                    available,
                    needed,
                });
            }
        }
        self.inner.rewrite(segment, Some(device), progress)
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

/// Bytes a segment move leaves free on its destination, of a file system of
/// `fs_bytes`: 1/32 of it, at least 1 MiB.
pub fn move_headroom(fs_bytes: u64) -> u64 {
    (fs_bytes / 32).max(1 << 20)
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

fn background(weak: Weak<Inner>) {
    let mut last_ck = Instant::now();
    let mut last_compact = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let Some(inner) = weak.upgrade() else { return };
        if inner.stop.load(Ordering::Relaxed) {
            return;
        }
        if last_ck.elapsed() >= inner.cfg.checkpoint_interval {
            last_ck = Instant::now();
            // Errors here are retried on the next round; the segments
            // themselves stay authoritative.
            let _ = inner.write_checkpoints();
            let _ = inner.sync_pending_flags();
            if inner.merge_due() {
                let _ = inner.merge();
            }
        }
        if inner.cfg.auto_compaction && last_compact.elapsed() >= inner.cfg.checkpoint_interval {
            last_compact = Instant::now();
            let ratio = inner.cfg.compaction_garbage_ratio;
            let all = inner.all_segments();
            // The segment with the fewest live bytes first: the cheapest
            // to rewrite, and on a nearly full volume the one whose new
            // generation fits in the space left.
            let candidate = all
                .iter()
                .filter(|s| !s.is_active() && s.garbage_ratio() >= ratio)
                .min_by_key(|s| {
                    s.len
                        .load(Ordering::Relaxed)
                        .saturating_sub(s.garbage.load(Ordering::Relaxed))
                })
                .map(|s| s.id);
            if let Some(id) = candidate {
                let _ = inner.rewrite(id, None, &mut |_| {});
            } else if let Some(s) = all.iter().find(|s| {
                // An active segment that may never fill (large segments,
                // a small workload) is sealed once its garbage is worth a
                // rewrite, and compacted on the next round.
                s.is_active()
                    && s.garbage_ratio() >= ratio
                    && s.garbage.load(Ordering::Relaxed) >= ACTIVE_RECLAIM_MIN_BYTES
            }) {
                let _ = inner.seal_if_active(s.device, s.id);
            }
        }
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

    fn write_checkpoints(&self) -> Result<()> {
        for s in self.all_segments() {
            if !s.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let res = self.write_checkpoint(&s);
            if res.is_err() {
                s.dirty.store(true, Ordering::Relaxed);
            }
            res?;
        }
        Ok(())
    }

    fn write_checkpoint(&self, s: &Segment) -> Result<()> {
        match &s.body {
            Body::Active(a) => {
                // One writer at a time: the identities RAM drops below rely
                // on the newest checkpoint being the one on disk.
                let _c = lock(&self.checkpointing);
                if s.retired.load(Ordering::Acquire) {
                    // Sealed since the caller took this handle: its entries
                    // are the sealed segment's to write (from `pending`),
                    // and the recent table may no longer hold them.
                    return Ok(());
                }
                let (bytes, covered) = {
                    // A snapshot: the segment's lock is not held while the
                    // index is read (a put holding the index may read a
                    // header of this segment).
                    let (offsets, snap, covered) = {
                        let a = read(a);
                        (
                            a.offsets[..=a.installed].to_vec(),
                            IdsSnapshot::of(&a, a.installed),
                            a.installed,
                        )
                    };
                    let mut idx = ActiveIndex::new(0);
                    idx.offsets = offsets;
                    let entries = self.live_entries_of(s, snap)?;
                    idx.map.reserve(entries.len());
                    for (k, alt, o) in entries {
                        idx.map.insert((k, alt), o);
                    }
                    (checkpoint::encode_active(s.id, s.generation, &idx), covered)
                };
                write_file_atomic(&s.index_path(), &bytes)?;
                // The identities below `covered` are on disk now.
                let mut a = write(a);
                if covered > a.ids_base {
                    a.ids_base = covered;
                    a.ids.retain(|e| e.2 as usize >= covered);
                    if a.ids.capacity() > 2 * a.ids.len() + 256 {
                        a.ids.shrink_to_fit();
                    }
                }
                Ok(())
            }
            Body::Sealed(sealed) => {
                let mut pending = lock(&s.pending);
                let entries = match pending.as_ref() {
                    Some(e) => e.clone(),
                    None => {
                        // Entries never change once sealed: take them from
                        // the checkpoint on disk, with the new deleted bits.
                        let Some(old) = std::fs::read(s.index_path()).ok() else {
                            return Ok(());
                        };
                        let Ok((h, body)) = checkpoint::parse(&old) else {
                            return Ok(());
                        };
                        let Ok((idx, _)) = checkpoint::decode_sealed(&h, body) else {
                            return Ok(());
                        };
                        idx.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect()
                    }
                };
                let mut idx = ActiveIndex::new(0);
                idx.offsets = sealed.units();
                idx.map.reserve(entries.len());
                for &(k, a, o) in &entries {
                    idx.map.insert((k, a), o);
                }
                let bytes =
                    checkpoint::encode_sealed(s.id, s.generation, &idx, &sealed.deleted_words());
                write_file_atomic(&s.index_path(), &bytes)?;
                *pending = None;
                Ok(())
            }
        }
    }

    /// (key, alt, ordinal) of the needles of active segment `seg` below
    /// `below` that the recent table places there (its live needles), in
    /// ordinal order: those below `a.ids_base` from the checkpoint on disk
    /// (or, if it cannot be read, the needles' headers), the others from
    /// RAM. An entry is kept if the table holds exactly (its hash, its
    /// location): a location holds one needle, so no header is read.
    fn live_entries_of(&self, seg: &Segment, a: IdsSnapshot) -> Result<Vec<Entry>> {
        let below = a.below;
        let mut src: Vec<Entry> = Vec::new();
        if a.ids_base > 0 {
            let from_ck = std::fs::read(seg.index_path()).ok().and_then(|b| {
                let (h, body) = checkpoint::parse(&b).ok()?;
                (h.segment == seg.id
                    && h.generation == seg.generation
                    && h.needles >= a.ids_base as u64)
                    .then_some(())?;
                checkpoint::decode_parts_of_any_kind(&h, body, true)
                    .ok()
                    .map(|p| p.entries)
            });
            src = match from_ck {
                Some(e) => e,
                None => self.scan_identities(seg, a.base_offset)?,
            };
            src.retain(|e| (e.2 as usize) < a.ids_base);
        }
        src.extend(a.ids);
        let ix = read(&self.idx);
        src.retain(|&(k, al, o)| {
            (o as usize) < below
                && ix.recent.contains(
                    ix.hid(k, al),
                    Loc {
                        slot: seg.slot,
                        ord: o,
                    },
                )
        });
        src.sort_unstable_by_key(|e| e.2);
        Ok(src)
    }

    /// (key, alt, ordinal) of every needle of `seg` below byte `end`, from
    /// the needle headers.
    fn scan_identities(&self, seg: &Segment, end: u64) -> Result<Vec<Entry>> {
        let mut sc = seg.scanner(SUPERBLOCK_LEN as u64, end, false)?;
        let mut out = Vec::new();
        let mut ord = 0u32;
        while let Some(item) = sc.next() {
            if let ScanItem::Needle { header, .. } = item? {
                out.push((header.key, header.alt_key, ord));
            }
            ord += 1;
        }
        Ok(out)
    }

    /// Whether needle `ord` of `seg` (with header `h`) is the live version of
    /// its identity.
    fn needle_is_live(&self, seg: &Segment, ord: u32, h: &NeedleHeader) -> bool {
        h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0
            && !seg.is_deleted(ord)
            && read(&self.idx).current(h.key, h.alt_key, &self.counters)
                == Some(Loc {
                    slot: seg.slot,
                    ord,
                })
    }

    /// (key, alt key, ordinal) of the needles of a sealed segment that may
    /// be live: its checkpoint's entries, or every needle's header if the
    /// checkpoint cannot be read.
    fn segment_identities(&self, seg: &Segment) -> Result<Vec<Entry>> {
        let from_ck = std::fs::read(seg.index_path()).ok().and_then(|b| {
            let (h, body) = checkpoint::parse(&b).ok()?;
            (h.segment == seg.id && h.generation == seg.generation).then_some(())?;
            checkpoint::decode_sealed_parts(&h, body)
                .ok()
                .map(|p| p.entries)
        });
        if let Some(e) = from_ck {
            return Ok(e);
        }
        let end = seg.len.load(Ordering::Acquire);
        let mut sc = seg.scanner(SUPERBLOCK_LEN as u64, end, false)?;
        let mut out = Vec::new();
        let mut ord = 0u32;
        while let Some(item) = sc.next() {
            if let ScanItem::Needle { header, .. } = item? {
                out.push((header.key, header.alt_key, ord));
            }
            ord += 1;
        }
        Ok(out)
    }

    fn merge_due(&self) -> bool {
        let ix = read(&self.idx);
        let run = ix.run.as_ref().map_or(0, |r| r.entry_count() as usize);
        ix.recent_len() >= ix.recent_floor + MERGE_MIN_ENTRIES.max(run / 8)
    }

    /// Builds a new run from the current run and the recent map's entries
    /// of sealed segments, one hash partition at a time: each partition is
    /// built from its share of the recent entries (spilled to a temporary
    /// file first) and of the old run (streamed from the run file), written
    /// to the new run file, and swapped into the index in place of the old
    /// partitions that covered its hashes. The file is renamed into place at
    /// the end (a crash before leaves the old one, which the restart uses);
    /// only then are the recent entries it took dropped (unless they changed
    /// meanwhile), so that RAM never forgets what the disk does not hold
    /// yet. The transient state is one partition's, whatever the run's size.
    fn merge(&self) -> Result<u64> {
        let _m = lock(&self.maintenance);
        let (old_run, tombs, sealed, table, recent_len) = {
            let ix = read(&self.idx);
            let tombs: Vec<(u64, u32)> = ix.tombs.iter().copied().collect();
            // The sealed segments with recent entries (a flag per table
            // place, not a place per entry: the recent part can hold an
            // eighth of the run).
            let mut has = vec![false; ix.table.len()];
            for l in ix.recent.locs() {
                if let Some(h) = has.get_mut(l.slot as usize) {
                    *h = true;
                }
            }
            let sealed: Vec<u32> = (0..ix.table.len() as u32)
                .filter(|&s| has[s as usize] && ix.seg(s).is_some_and(|s| !s.is_active()))
                .collect();
            (
                ix.run.clone(),
                tombs,
                sealed,
                ix.table.clone(),
                ix.recent.len(),
            )
        };
        let seg_of = |slot: u32| table.get(slot as usize).and_then(|s| s.as_ref());
        // The segments of the new run: those the old run still numbers and
        // the sealed ones with recent entries. One needle numbering for
        // every partition this merge builds.
        let mut places: Vec<u32> = sealed.clone();
        if let Some(r) = &old_run {
            for l in r.seg_lists() {
                places.extend((0..l.segments().len()).filter_map(|i| l.place(i)));
            }
        }
        places.retain(|&p| seg_of(p).is_some());
        places.sort_unstable();
        places.dedup();
        let segs = SegList::new(
            places
                .iter()
                .map(|&p| seg_of(p).map_or((0, 0), |s| (s.id, s.needle_count())))
                .collect(),
        )
        .ok_or_else(|| StoreError::Config("could not build the node index".into()))?;
        for (i, &p) in places.iter().enumerate() {
            segs.set_place(i, Some(p));
        }
        let segs = Arc::new(segs);
        let pos: HashMap<u32, u32> = places
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, i as u32))
            .collect();
        let held_before = old_run.as_ref().map_or(0, |r| r.entry_count());
        let estimate = held_before as usize + recent_len + tombs.len();
        let nparts = estimate
            .div_ceil(self.cfg.run_partition_size.max(1))
            .clamp(1, MAX_RUN_PARTITIONS) as u64;
        let dir = &self.devices[0].path;
        // The recent part this merge takes: tombstones, and the recent
        // entries of sealed segments with their identities (which the
        // table does not keep): each segment's identities that the table
        // holds exactly where that segment has them.
        let mut taken = Spill::create(dir.join(SPILL_TAKEN), nparts)?;
        for (k, a) in tombs {
            taken.push((k, a, TOMB.slot, TOMB.ord))?;
        }
        for &slot in &sealed {
            let Some(seg) = seg_of(slot) else { continue };
            let pending = lock(&seg.pending).clone();
            let ids = match pending {
                Some(e) => e,
                None => self.segment_identities(seg)?,
            };
            let mut mine = Vec::new();
            {
                let ix = read(&self.idx);
                for (k, a, ord) in ids {
                    if ix.recent.contains(ix.hid(k, a), Loc { slot, ord }) {
                        mine.push((k, a, slot, ord));
                    }
                }
            }
            for r in mine {
                taken.push(r)?;
            }
        }
        taken.flush()?;
        let generation = old_run.as_ref().map_or(1, |r| r.generation() + 1);
        let ref_bits = bits_for(segs.total()).max(1);
        let fp_bits = self.cfg.fingerprint_bits.clamp(1, 64 - ref_bits);
        let run_path = dir.join(run_file::FILE_NAME);
        let mut failed: Option<StoreError> = None;
        let mut held = 0u64;
        write_file_atomic_with(&run_path, |f| {
            let mut w = run_file::Writer::new(f, generation, places.len(), nparts as u32);
            let r = self.merge_parts(
                &mut w,
                MergePlan {
                    old_run,
                    segs: &segs,
                    pos: &pos,
                    table: &table,
                    taken: &taken,
                    nparts,
                    generation,
                    fp_bits,
                },
            );
            match r.and_then(|h| {
                held = h;
                w.finish(&segs, fp_bits, ref_bits)
                    .map_err(StoreError::io("writing", &run_path))
            }) {
                Ok(()) => Ok(()),
                Err(e) => {
                    failed = Some(e);
                    Err(std::io::Error::other("the merge failed"))
                }
            }
        })
        .map_err(|e| failed.take().unwrap_or(e))?;
        // The run file on disk holds what the merge took: the recent
        // entries and tombstones go now (unless they changed meanwhile: an
        // entry is removed only where it still is).
        for q in 0..nparts {
            let taken_q = taken.read(q)?;
            let mut ix = write(&self.idx);
            for (k, a, slot, ord) in taken_q {
                let l = Loc { slot, ord };
                if l == TOMB {
                    ix.tombs.remove(&(k, a));
                } else {
                    let h = ix.hid(k, a);
                    ix.recent.remove(h, l);
                }
            }
        }
        drop(taken);
        {
            let mut ix = write(&self.idx);
            // Give back what the merge emptied when the table is mostly
            // empty now, so that RAM at rest holds the run and the active
            // segments, not the peak.
            ix.shrink_recent(&self.counters);
            ix.recent_floor = ix.recent_len();
        }
        self.counters.merges.fetch_add(1, Ordering::Relaxed);
        Ok(held)
    }

    /// The partitions of a merge, built, written and swapped in one by one
    /// (see [`Inner::merge`]); returns the identities held.
    fn merge_parts(&self, w: &mut run_file::Writer<'_>, plan: MergePlan<'_>) -> Result<u64> {
        let MergePlan {
            old_run,
            segs,
            pos,
            table,
            taken,
            nparts,
            generation,
            fp_bits,
        } = plan;
        let seg_of = |slot: u32| table.get(slot as usize).and_then(|s| s.as_ref());
        let dir = &self.devices[0].path;
        let run_path = dir.join(run_file::FILE_NAME);
        // The old run's partitions, each dropped as soon as no partition
        // left to build overlaps it (the index drops its own reference when
        // the new partitions covering it are swapped in).
        let (mut old_parts, old_bounds): (Vec<Option<Arc<Part>>>, Vec<u64>) = match &old_run {
            Some(r) => (
                r.parts().iter().cloned().map(Some).collect(),
                r.bounds().to_vec(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        drop(old_run);
        let old_file = File::open(&run_path).ok();
        // Set when the old run's keys cannot be read: its identities then
        // come from its segments' checkpoints, spilled by partition.
        let mut fallback: Option<Spill> = None;
        let mut new_parts: Vec<Arc<Part>> = Vec::with_capacity(nparts as usize);
        let mut new_bounds: Vec<u64> = Vec::with_capacity(nparts as usize);
        let mut held = 0u64;
        for q in 0..nparts {
            let lo = part_start(q, nparts);
            let hi = (q + 1 < nparts).then(|| part_start(q + 1, nparts));
            let taken_q = taken.read(q)?;
            // (key, alt, segment index in `segs`, ordinal) of every identity
            // of the new partition.
            let mut entries: Vec<(u64, u32, u32, u32)> = Vec::new();
            for &(k, a, slot, ord) in &taken_q {
                let l = Loc { slot, ord };
                if l == TOMB || seg_of(slot).is_none_or(|s| s.is_deleted(ord)) {
                    continue;
                }
                if let Some(&i) = pos.get(&slot) {
                    entries.push((k, a, i, ord));
                }
            }
            let n_taken = entries.len();
            // The old partitions overlapping [lo, hi).
            let overlapping: Vec<usize> = (0..old_parts.len())
                .filter(|&j| {
                    hi.is_none_or(|h| old_bounds[j] < h)
                        && old_bounds.get(j + 1).is_none_or(|&e| e > lo)
                })
                .collect();
            if fallback.is_none() {
                let mut ok = true;
                for &j in &overlapping {
                    let Some(part) = old_parts[j].clone() else {
                        continue;
                    };
                    let Some(f) = &old_file else {
                        ok = false;
                        break;
                    };
                    let r = run_file::for_each_key(f, &part, |first, keys| {
                        let ix = read(&self.idx);
                        for (jj, &(k, a)) in keys.iter().enumerate() {
                            let Some((i, ord)) = part.slot(first + jj) else {
                                continue;
                            };
                            if part_of(part_hash(k, a), nparts) != q
                                || ix.recent_has(k, a, &self.counters)
                            {
                                continue; // another partition's, or a newer answer
                            }
                            let Some(slot) = part.segs().place(i) else {
                                continue;
                            };
                            if seg_of(slot).is_none_or(|s| s.is_deleted(ord)) {
                                continue;
                            }
                            if let Some(&si) = pos.get(&slot) {
                                entries.push((k, a, si, ord));
                            }
                        }
                    });
                    if r.is_err() {
                        ok = false;
                        break;
                    }
                }
                if !ok {
                    entries.truncate(n_taken);
                    fallback = Some(self.spill_old_identities(&old_parts, nparts, q, table)?);
                }
            }
            if let Some(fb) = &fallback {
                let ix = read(&self.idx);
                for (k, a, slot, ord) in fb.read(q)? {
                    if ix.recent_has(k, a, &self.counters)
                        || seg_of(slot).is_none_or(|s| s.is_deleted(ord))
                    {
                        continue;
                    }
                    if let Some(&si) = pos.get(&slot) {
                        entries.push((k, a, si, ord));
                    }
                }
            }
            entries.sort_unstable_by_key(|e| (e.0, e.1));
            entries.dedup_by_key(|e| (e.0, e.1));
            let seed = generation ^ 0x5275_6e5f_7365_6564 ^ q.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut part = Part::build(segs.clone(), &entries, fp_bits, seed)
                .map_err(|_| StoreError::Config("could not build the node index".into()))?;
            // The keys in slot order, streamed to the file: each record's
            // slot replaces its (segment, ordinal), which the partition now
            // holds.
            for e in entries.iter_mut() {
                let s = part.slot_of(e.0, e.1) as u64;
                e.2 = s as u32;
                e.3 = (s >> 32) as u32;
            }
            entries.sort_unstable_by_key(|e| (e.3, e.2));
            let slot_of =
                |e: &(u64, u32, u32, u32)| (u64::from(e.3) << 32 | u64::from(e.2)) as usize;
            let mut it = entries.iter().peekable();
            let keys = (0..part.slot_count()).map(|s| match it.next_if(|e| slot_of(e) == s) {
                Some(e) => (e.0, e.1),
                None => (0, 0),
            });
            w.part(&mut part, keys)
                .map_err(StoreError::io("writing", &run_path))?;
            drop(entries);
            held += part.entry_count();
            new_parts.push(Arc::new(part));
            new_bounds.push(lo);
            {
                // Swapped in: the new partitions cover [0, hi), the old
                // ones (or, before the first merge, an empty run) the rest;
                // then the recent entries it took go.
                let mut ix = write(&self.idx);
                let mut parts = new_parts.clone();
                let mut bounds = new_bounds.clone();
                if let Some(hi) = hi {
                    let cur = match &ix.run {
                        Some(r) => r.clone(),
                        None => {
                            Arc::new(Run::build(0, Vec::new(), &[], fp_bits).map_err(|_| {
                                StoreError::Config("could not build the node index".into())
                            })?)
                        }
                    };
                    for (i, p) in cur.parts().iter().enumerate() {
                        if cur.bounds().get(i + 1).is_none_or(|&e| e > hi) {
                            parts.push(p.clone());
                            bounds.push(cur.bounds()[i].max(hi));
                        }
                    }
                }
                let run = Run::from_parts(generation, parts, bounds).ok_or_else(|| {
                    StoreError::Config("could not assemble the node index".into())
                })?;
                ix.run = Some(Arc::new(run));
                // The recent entries q took stay until the run file is on
                // disk (`merge` drops them after the rename): they answer
                // as q does meanwhile, and nothing derived from the recent
                // table (a checkpoint) can miss them before the disk has
                // them.
            }
            // Old partitions entirely below the next partition are done.
            for (j, p) in old_parts.iter_mut().enumerate() {
                if hi.is_some_and(|hi| old_bounds.get(j + 1).is_some_and(|&e| e <= hi)) {
                    *p = None;
                }
            }
        }
        Ok(held)
    }

    /// The identities the old run holds at or past partition `from` (of
    /// `nparts`), from its segments' checkpoints (or needle headers), for
    /// when its run file's keys cannot be read: each kept if the run still
    /// answers for it with that needle.
    fn spill_old_identities(
        &self,
        old_parts: &[Option<Arc<Part>>],
        nparts: u64,
        from: u64,
        table: &[Option<Arc<Segment>>],
    ) -> Result<Spill> {
        let mut out = Spill::create(self.devices[0].path.join(SPILL_OLD), nparts)?;
        let mut places: Vec<u32> = Vec::new();
        for p in old_parts.iter().flatten() {
            let l = p.segs();
            places.extend((0..l.segments().len()).filter_map(|i| l.place(i)));
        }
        places.sort_unstable();
        places.dedup();
        for slot in places {
            let Some(seg) = table.get(slot as usize).and_then(|s| s.as_ref()) else {
                continue;
            };
            let ids = self.segment_identities(seg)?;
            let mut mine = Vec::new();
            {
                let ix = read(&self.idx);
                for (k, a, ord) in ids {
                    if part_of(part_hash(k, a), nparts) >= from
                        && ix.run_hit(k, a) == Some(Loc { slot, ord })
                    {
                        mine.push((k, a, slot, ord));
                    }
                }
            }
            for r in mine {
                out.push(r)?;
            }
        }
        out.flush()?;
        Ok(out)
    }

    /// Compaction (`dest` = None: same device, drop garbage) or move
    /// (`dest` = Some(device): copy everything to that device).
    fn rewrite(
        &self,
        id: u64,
        dest: Option<usize>,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        let _m = lock(&self.maintenance);
        let t0 = Instant::now();
        let src = self.find(id)?;
        let Body::Sealed(src_index) = &src.body else {
            return Err(StoreError::SegmentActive(id));
        };
        let compacting = dest.is_none();
        let dev_i = dest.unwrap_or(src.device);
        let dev = &self.devices[dev_i];
        let generation = src.generation + 1;
        let final_path = dev.path.join(segment_file_name(id, generation));
        let tmp_path = dev
            .path
            .join(format!("{}.tmp", segment_file_name(id, generation)));
        let sb = Superblock {
            version: superblock::VERSION,
            tier: dev.tier,
            id,
            generation,
            created_unix_ns: src.created_unix_ns,
        };
        let out = strata_fs::create(&tmp_path).map_err(StoreError::io("creating", &tmp_path))?;
        let wr = |bytes: &[u8], at: u64| {
            strata_fs::write_all_at(&out, bytes, at).map_err(StoreError::io("writing", &tmp_path))
        };
        if let Err(e) = wr(&sb.encode(), 0) {
            // Not even the superblock fits (a full device): leave no file.
            let _ = strata_fs::remove_file(&tmp_path);
            return Err(e);
        }
        let total = src.len.load(Ordering::Acquire);
        let mut new_idx = ActiveIndex::new(SUPERBLOCK_LEN as u64);
        // (source ordinal, new ordinal, new offset, identity) of every
        // needle kept.
        let mut kept: Vec<(u32, u32, u64, u64, u32)> = Vec::new();
        // (ordinal, key, alt) of every needle a compaction drops.
        let mut dropped: Vec<(u32, u64, u32)> = Vec::new();
        let mut pending: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut pending_at = SUPERBLOCK_LEN as u64;
        // Held to the end: readers and flag writes that find the source
        // retired still use this handle after its file is unlinked.
        let src_file = src.file()?;
        let mut sc = Scanner::new(
            src_file.clone(),
            &src.path,
            SUPERBLOCK_LEN as u64,
            total,
            true,
            src.flag_code(),
        );
        // The new file is of this version (its superblock above).
        let code = needle::FlagCode::of_version(superblock::VERSION);
        let mut ord: u32 = 0;
        let mut last_report = 0u64;
        let rate = self.cfg.compaction_bytes_per_s;
        let mut io_bytes = 0u64;
        let result: Result<()> = (|| {
            while let Some(item) = sc.next() {
                let item = item?;
                let this = ord;
                ord += 1;
                // A mended needle (one header bit corrected) is written
                // anew here, its header as it was written.
                if let ScanItem::Needle {
                    offset,
                    header,
                    data,
                    ..
                } = &item
                {
                    if src_index.needle(this).map(|x| x.0) != Some(*offset) {
                        return Err(src.corrupt(*offset, "needle offsets disagree with the index"));
                    }
                    let keep = !compacting || self.needle_is_live(&src, this, header);
                    if keep {
                        let before = pending.len();
                        needle::encode(
                            &mut pending,
                            header.cookie,
                            header.key,
                            header.alt_key,
                            code.word(header.flags),
                            data.as_deref().unwrap_or_default(),
                        );
                        let len = (pending.len() - before) as u64;
                        let new_off = new_idx.end();
                        let (new_ord, _) = new_idx.push(header.key, header.alt_key, len);
                        kept.push((this, new_ord, new_off, header.key, header.alt_key));
                    } else {
                        dropped.push((this, header.key, header.alt_key));
                    }
                } else if !compacting {
                    // A move keeps damaged regions byte for byte.
                    let (o, l) = (item.offset(), item.len());
                    let mut raw = vec![0u8; l as usize];
                    pread_exact(&src_file, &mut raw, o)
                        .map_err(StoreError::io("reading", &src.path))?;
                    pending.extend_from_slice(&raw);
                    new_idx.offsets.push(((new_idx.end() + l) / 8) as u32);
                }
                if pending.len() >= 1 << 20 {
                    wr(&pending, pending_at)?;
                    pending_at += pending.len() as u64;
                    io_bytes += pending.len() as u64;
                    pending.clear();
                }
                let done = sc.position();
                if done - last_report >= 1 << 20 {
                    last_report = done;
                    progress(RewriteProgress {
                        segment: id,
                        done,
                        total,
                    });
                    if let Some(r) = rate {
                        let budget = Duration::from_secs_f64((done + io_bytes) as f64 / r as f64);
                        let spent = t0.elapsed();
                        if budget > spent {
                            std::thread::sleep(budget - spent);
                        }
                    }
                }
            }
            wr(&pending, pending_at)?;
            strata_fs::sync_data(&out).map_err(StoreError::io("syncing", &tmp_path))?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = strata_fs::remove_file(&tmp_path);
            return Err(e);
        }
        progress(RewriteProgress {
            segment: id,
            done: total,
            total,
        });
        let new_len = new_idx.end();
        let new_slot = if compacting {
            self.reserve_slot()
        } else {
            src.slot
        };
        // Swap, with in-place flag writes to the source blocked.
        let _g = lock(&src.lock);
        let swap: Result<Arc<Segment>> = (|| {
            // Flags that reached the source during the copy.
            let mut flagged = false;
            for &(src_ord, _, new_off, _, _) in &kept {
                if src_index.is_deleted(src_ord) {
                    let Some((so, _)) = src_index.needle(src_ord) else {
                        continue;
                    };
                    let mut fl = [0u8; 4];
                    pread_exact(&src_file, &mut fl, so + FLAGS_OFFSET)
                        .map_err(StoreError::io("reading", &src.path))?;
                    // In the new file's code; a word beyond correction is
                    // still a dead needle's (the index says so): both flags.
                    let flags = src
                        .flag_code()
                        .flags(u32::from_le_bytes(fl))
                        .unwrap_or(FLAG_DELETED | FLAG_SUPERSEDED);
                    wr(&code.word(flags).to_le_bytes(), new_off + FLAGS_OFFSET)?;
                    flagged = true;
                }
            }
            if flagged {
                strata_fs::sync_data(&out).map_err(StoreError::io("syncing", &tmp_path))?;
            }
            let mut deleted = vec![0u64; (new_idx.needle_count() as usize).div_ceil(64)];
            let mut map = vec![u32::MAX; src_index.needle_count() as usize];
            new_idx.map.clear();
            {
                let ix = read(&self.idx);
                for &(src_ord, new_ord, _, k, a) in &kept {
                    map[src_ord as usize] = new_ord;
                    if src_index.is_deleted(src_ord) {
                        deleted[new_ord as usize / 64] |= 1 << (new_ord % 64);
                    } else if ix.current(k, a, &self.counters)
                        == Some(Loc {
                            slot: src.slot,
                            ord: src_ord,
                        })
                    {
                        new_idx.map.insert((k, a), new_ord);
                    }
                }
            }
            let body = SealedSegment::new(&new_idx.offsets, &deleted)
                .ok_or_else(|| StoreError::Config("could not build a segment index".into()))?;
            write_file_atomic(
                &dev.path.join(index_file_name(id, generation)),
                &checkpoint::encode_sealed(id, generation, &new_idx, &deleted),
            )?;
            strata_fs::rename(&tmp_path, &final_path)
                .map_err(StoreError::io("renaming", &tmp_path))?;
            sync_dir(&dev.path)?;
            let file = segment::open_rw(&final_path)?;
            if self.cfg.random_access_advice {
                advise_random(&file);
            }
            let file = SegFile::new(Some(Arc::new(file)), &src.file.budget);
            let live: u64 = new_idx
                .map
                .values()
                .filter_map(|&o| new_idx.needle(o))
                .map(|x| x.1)
                .sum();
            let seg = Arc::new(Segment {
                id,
                generation,
                device: dev_i,
                tier: dev.tier,
                path: final_path.clone(),
                file,
                created_unix_ns: src.created_unix_ns,
                slot: new_slot,
                body: Body::Sealed(body),
                len: AtomicU64::new(new_len),
                garbage: AtomicU64::new(new_len.saturating_sub(SUPERBLOCK_LEN as u64 + live)),
                lock: Mutex::new(()),
                retired: AtomicBool::new(false),
                version: AtomicU32::new(superblock::VERSION),
                tail: Tail::at(new_len),
                moved_to: OnceLock::new(),
                dirty: AtomicBool::new(false),
                pending: Mutex::new(None),
            });
            {
                let mut ix = write(&self.idx);
                ix.table[new_slot as usize] = Some(seg.clone());
                if compacting {
                    // Needles renumbered: the live ones move to the recent
                    // map, and the run forgets the old generation.
                    for &(src_ord, new_ord, _, k, a) in &kept {
                        let here = Loc {
                            slot: src.slot,
                            ord: src_ord,
                        };
                        if src_index.is_deleted(src_ord) {
                            continue;
                        }
                        // Live here: the recent table's entry (exact, by
                        // location), or the run's answer if nothing newer.
                        let live = ix.recent.contains(ix.hid(k, a), here)
                            || (!ix.recent_has(k, a, &self.counters)
                                && ix.run_hit(k, a) == Some(here));
                        if live {
                            let to = Loc {
                                slot: new_slot,
                                ord: new_ord,
                            };
                            ix.set(k, a, to, Some(here), &self.counters)?;
                        }
                    }
                    // A dropped needle's recent entry, if it still has one
                    // (an open that trusted a checkpoint older than the
                    // needle's delete enters it; the read path fixes that
                    // only when the needle is read): once the old slot is
                    // gone the entry could no longer be read, and a lookup
                    // of another identity whose hash remainder it shares
                    // took it for that identity's newest version, so that
                    // a compaction dropped that live needle too (found by
                    // tests/model.rs with colliding hashes).
                    for &(ord, k, a) in &dropped {
                        let h = ix.hid(k, a);
                        ix.recent.remove(
                            h,
                            Loc {
                                slot: src.slot,
                                ord,
                            },
                        );
                    }
                    ix.table[src.slot as usize] = None;
                    if let Some(run) = &ix.run {
                        for list in run.seg_lists() {
                            list.invalidate(src.slot);
                        }
                    }
                }
            }
            let _ = src.moved_to.set((seg.clone(), compacting.then_some(map)));
            src.retired.store(true, Ordering::Release);
            // A retired handle's file is never closed (its name is about to
            // be unlinked): make sure it has one.
            let mut h = write(&src.file.handle);
            if h.is_none() {
                *h = Some(src_file.clone());
                src.file.budget.open.fetch_add(1, Ordering::Relaxed);
            }
            Ok(seg)
        })();
        drop(_g);
        let seg = match swap {
            Ok(s) => s,
            Err(e) => {
                let _ = strata_fs::remove_file(&tmp_path);
                return Err(e);
            }
        };
        // The old generation is no longer referenced by name.
        let old_idx = src.index_path();
        let _ = strata_fs::remove_file(&src.path);
        let _ = strata_fs::remove_file(&old_idx);
        if let Some(d) = src.path.parent() {
            sync_dir(d)?;
        }
        self.trim_fds();
        if compacting {
            self.counters.compactions.fetch_add(1, Ordering::Relaxed);
            self.counters
                .reclaimed
                .fetch_add(total.saturating_sub(new_len), Ordering::Relaxed);
        }
        Ok(RewriteReport {
            segment: id,
            bytes_before: total,
            bytes_after: new_len,
            needles_before: src_index.needle_count(),
            needles_after: seg.needle_count(),
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Store>();
}

#[cfg(test)]
// The tests write and damage files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// The interleaving of docs/reliability.md finding 12, step by step:
    /// the background thread takes the active segment for a checkpoint;
    /// the writer seals it and a merge takes its identities out of the
    /// recent table; the checkpoint then goes ahead. The disk is then
    /// copied as a kill -9 leaves it before the sealed segment's own
    /// checkpoint, without the run file (a merge killed before its rename
    /// left the old one, before the fix that defers the recent table's
    /// removals to after the rename; or a run file lost or damaged, which
    /// the open rebuilds from the checkpoints): every object must still be
    /// found on the reopen.
    #[test]
    fn a_checkpoint_of_a_segment_sealed_meanwhile_keeps_its_identities() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::new(dir.path(), Tier::Flash);
        // The background thread writes no checkpoint and compacts nothing
        // during the test: the test plays its part.
        cfg.checkpoint_interval = Duration::from_secs(3600);
        cfg.auto_compaction = false;
        let store = Store::open(cfg).unwrap();
        let n = 200u64;
        for k in 0..n {
            let data = k.to_le_bytes().repeat(1 + (k % 5) as usize);
            store.put(Tier::Flash, k, 0, k as u32 + 1, &data).unwrap();
        }
        store.checkpoint().unwrap();
        // The background thread's list of segments holds the active one.
        let active = lock(&store.inner.devices[0].writer).clone();
        store.seal_active(0).unwrap();
        store.merge_index().unwrap();
        // Its checkpoint of that segment runs now.
        store.inner.write_checkpoint(&active).unwrap();
        // The disk at a kill -9 now, less the run file: every segment and
        // checkpoint.
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".seg") || name.ends_with(".idx") {
                std::fs::copy(e.path(), copy.path().join(&name)).unwrap();
            }
        }
        let reopened = Store::open(StoreConfig::new(copy.path(), Tier::Flash)).unwrap();
        for k in 0..n {
            let got = reopened.get(k, 0, k as u32 + 1).unwrap();
            assert!(
                got.is_some_and(|o| o.data == k.to_le_bytes().repeat(1 + (k % 5) as usize)),
                "object {k} lost on the reopen"
            );
        }
        drop(reopened);
        drop(store);
    }
}
