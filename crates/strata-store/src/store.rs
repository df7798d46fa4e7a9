//! The store: device directories, their segments, the RAM index over all
//! of them, and the put / get / delete / compact / move operations.

use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::needle::{
    self, NeedleHeader, FLAGS_OFFSET, FLAG_DELETED, FLAG_SUPERSEDED, HEADER_LEN,
};
use crate::format::superblock::{Superblock, Tier, SUPERBLOCK_LEN};
use crate::hash::mix64;
use crate::index::{ActiveIndex, SealedIndex};
use crate::segment::{
    self, index_file_name, parse_file_name, pread_exact, segment_file_name, sync_dir,
    write_file_atomic, ScanItem, Scanner,
};
use std::collections::BTreeMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock, RwLockReadGuard, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// One object to write.
#[derive(Clone, Copy, Debug)]
pub struct PutItem<'a> {
    /// 64-bit key.
    pub key: u64,
    /// 32-bit alternate key.
    pub alt_key: u32,
    /// Random cookie, checked on every read.
    pub cookie: u32,
    /// The object's bytes.
    pub data: &'a [u8],
}

/// An object read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// The object's bytes (checksum verified).
    pub data: Vec<u8>,
    /// Tier of the device it was read from.
    pub tier: Tier,
    /// Segment it was read from.
    pub segment: u64,
    /// Index of the device (in [`StoreConfig::devices`]) it was read from.
    pub device: usize,
    /// The needle's cookie (lets a caller that read without a cookie, e.g.
    /// the HTTP node in its default mode, hand the cookie back).
    pub cookie: u32,
}

/// A segment as [`Store::segments`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentInfo {
    /// Segment id (the probe order: higher ids are newer).
    pub id: u64,
    /// Generation (bumped by each compaction or move).
    pub generation: u64,
    /// Device index.
    pub device: usize,
    /// Tier of its device.
    pub tier: Tier,
    /// Segment file.
    pub path: PathBuf,
    /// Bytes in the file.
    pub size: u64,
    /// Needles in the file.
    pub needles: u64,
    /// True for a device's active (appendable) segment.
    pub active: bool,
    /// Estimated fraction of the bytes that are garbage (deleted or
    /// overwritten needles).
    pub garbage_ratio: f64,
    /// Creation time, ns since the Unix epoch.
    pub created_unix_ns: u64,
}

/// Counters since the store was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `pread` calls on segment files by GETs, deletes and liveness checks
    /// (a GET of a live needle costs exactly one).
    pub preads: u64,
    /// Bytes those preads returned.
    pub bytes_read: u64,
    /// Needle bytes written to flash devices.
    pub bytes_written_flash: u64,
    /// Needle bytes written to disk devices.
    pub bytes_written_disk: u64,
    /// fdatasync calls on segment files.
    pub fdatasyncs: u64,
    /// Completed compactions.
    pub compactions: u64,
    /// Bytes reclaimed by compactions.
    pub bytes_reclaimed: u64,
}

/// RAM used by the index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes of the compact indexes of sealed segments.
    pub sealed_bytes: u64,
    /// Objects indexed in sealed segments.
    pub sealed_objects: u64,
    /// Bytes of the active segments' hash maps and offset lists.
    pub active_bytes: u64,
    /// Objects indexed in active segments.
    pub active_objects: u64,
}

impl MemoryUsage {
    /// Index bytes per object in sealed segments.
    pub fn sealed_bytes_per_object(&self) -> f64 {
        self.sealed_bytes as f64 / self.sealed_objects.max(1) as f64
    }
    /// Index bytes per object in active segments.
    pub fn active_bytes_per_object(&self) -> f64 {
        self.active_bytes as f64 / self.active_objects.max(1) as f64
    }
}

/// Progress of a compaction or move, as given to its callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RewriteProgress {
    /// Segment being rewritten.
    pub segment: u64,
    /// Bytes of the source scanned so far.
    pub done: u64,
    /// Bytes of the source.
    pub total: u64,
}

/// What a compaction or move did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RewriteReport {
    /// Segment id.
    pub segment: u64,
    /// Size before.
    pub bytes_before: u64,
    /// Size after.
    pub bytes_after: u64,
    /// Needles before.
    pub needles_before: u64,
    /// Needles kept.
    pub needles_after: u64,
    /// Wall time.
    pub seconds: f64,
}

/// One needle of a sealed segment, as [`Store::needles`] yields it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredNeedle {
    /// Byte offset in the segment.
    pub offset: u64,
    /// Key.
    pub key: u64,
    /// Alternate key.
    pub alt_key: u32,
    /// Cookie.
    pub cookie: u32,
    /// Flag bits as on disk.
    pub flags: u32,
    /// The data.
    pub data: Vec<u8>,
}

/// What an open found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Segments loaded.
    pub segments: usize,
    /// Segments whose checkpoint was missing or stale and were scanned.
    pub scanned_segments: usize,
    /// Needles found past the checkpoints (orphans).
    pub orphan_needles: u64,
    /// Torn tails cut off: (segment id, offset cut at, bytes removed).
    pub torn_tails: Vec<(u64, u64, u64)>,
    /// Damaged regions kept in place (not at a tail): (segment id, offset).
    pub corrupt_regions: Vec<(u64, u64)>,
}

enum SegIndex {
    Active(RwLock<ActiveIndex>),
    Sealed(SealedIndex),
}

struct Segment {
    id: u64,
    generation: u64,
    device: usize,
    tier: Tier,
    path: PathBuf,
    file: Arc<File>,
    created_unix_ns: u64,
    index: SegIndex,
    len: AtomicU64,
    garbage: AtomicU64,
    /// Serialises in-place flag writes with the swap of a compaction, move
    /// or seal.
    lock: Mutex<()>,
    /// Set once a newer handle replaced this one (seal, compaction, move).
    retired: AtomicBool,
    /// The on-disk checkpoint is behind.
    dirty: AtomicBool,
}

/// A located needle: its segment, ordinal, offset and length.
struct Cand {
    seg: Arc<Segment>,
    ord: u32,
    offset: u64,
    len: u64,
}

impl Segment {
    fn locate(&self, key: u64, alt: u32) -> Option<(u32, u64, u64)> {
        match &self.index {
            SegIndex::Active(a) => {
                let a = read(a);
                let ord = *a.map.get(&(key, alt))?;
                let (o, l) = a.needle(ord)?;
                Some((ord, o, l))
            }
            SegIndex::Sealed(s) => {
                let ord = s.lookup(key, alt)?;
                if s.is_deleted(ord) {
                    return None;
                }
                let (o, l) = s.needle(ord)?;
                Some((ord, o, l))
            }
        }
    }

    /// Drops the index entry of needle `ord` of identity (key, alt).
    fn mark_dead(&self, key: u64, alt: u32, ord: u32) -> bool {
        match &self.index {
            SegIndex::Active(a) => {
                let mut a = write(a);
                if a.map.get(&(key, alt)) == Some(&ord) {
                    a.map.remove(&(key, alt));
                    true
                } else {
                    false
                }
            }
            SegIndex::Sealed(s) => s.set_deleted(ord),
        }
    }

    fn is_active(&self) -> bool {
        matches!(self.index, SegIndex::Active(_))
    }

    fn needle_count(&self) -> u64 {
        match &self.index {
            SegIndex::Active(a) => read(a).needle_count(),
            SegIndex::Sealed(s) => s.needle_count(),
        }
    }

    fn pread(&self, offset: u64, len: u64, counters: &CounterCells) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len as usize];
        let calls = pread_exact(&self.file, &mut buf, offset)
            .map_err(StoreError::io("reading", &self.path))?;
        counters.preads.fetch_add(calls, Ordering::Relaxed);
        counters.bytes_read.fetch_add(len, Ordering::Relaxed);
        Ok(buf)
    }

    fn corrupt(&self, offset: u64, reason: impl ToString) -> StoreError {
        StoreError::Corrupt {
            segment: self.id,
            path: self.path.clone(),
            offset,
            reason: reason.to_string(),
        }
    }

    fn index_path(&self) -> PathBuf {
        self.path
            .with_file_name(index_file_name(self.id, self.generation))
    }

    fn checkpoint_bytes(&self) -> Vec<u8> {
        match &self.index {
            SegIndex::Active(a) => checkpoint::encode_active(self.id, self.generation, &read(a)),
            SegIndex::Sealed(s) => checkpoint::encode_sealed(self.id, self.generation, s),
        }
    }

    fn garbage_ratio(&self) -> f64 {
        let len = self.len.load(Ordering::Relaxed).max(1);
        (self.garbage.load(Ordering::Relaxed) as f64 / len as f64).min(1.0)
    }
}

#[derive(Default)]
struct CounterCells {
    preads: AtomicU64,
    bytes_read: AtomicU64,
    written: [AtomicU64; 2],
    fdatasyncs: AtomicU64,
    compactions: AtomicU64,
    reclaimed: AtomicU64,
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
    /// Every segment, sorted by id, highest (newest) first.
    segs: RwLock<Vec<Arc<Segment>>>,
    next_id: AtomicU64,
    rr: AtomicUsize,
    counters: CounterCells,
    /// One compaction or move at a time.
    maintenance: Mutex<()>,
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

fn read<T>(l: &RwLock<T>) -> RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}
fn write<T>(l: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
}
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn seed_of(id: u64, generation: u64) -> u64 {
    mix64(id ^ generation.rotate_left(32) ^ 0x7374_7261_7461)
}

fn advise_random(file: &File) {
    // Advice only: failure changes performance, never correctness.
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random);
}

impl Store {
    /// Opens (and recovers) a store: loads every segment's index checkpoint,
    /// scans the needles past it (orphans), cuts torn tails, and starts the
    /// background thread that writes checkpoints and compacts.
    pub fn open(cfg: StoreConfig) -> Result<Store> {
        if cfg.devices.is_empty() {
            return Err(StoreError::Config("no device directory given".into()));
        }
        if cfg.segment_size < 4096 || cfg.segment_size > 16 << 30 {
            return Err(StoreError::Config(format!(
                "segment size {} is outside 4 KiB ..= 16 GiB",
                cfg.segment_size
            )));
        }
        if cfg.max_object_size == 0 || cfg.max_object_size > u64::from(needle::MAX_DATA_LEN) {
            return Err(StoreError::Config(format!(
                "maximum object size {} is outside 1 ..= {}",
                cfg.max_object_size,
                needle::MAX_DATA_LEN
            )));
        }
        if !(8..=40).contains(&cfg.fingerprint_bits) {
            return Err(StoreError::Config("fingerprint bits must be 8..=40".into()));
        }
        for d in &cfg.devices {
            match std::fs::metadata(&d.path) {
                Ok(m) if m.is_dir() => {}
                Ok(_) => return Err(StoreError::NotADirectory(d.path.clone())),
                Err(_) if cfg.create_dirs => std::fs::create_dir_all(&d.path)
                    .map_err(StoreError::io("creating directory", &d.path))?,
                Err(_) => return Err(StoreError::MissingDirectory(d.path.clone())),
            }
        }
        let mut locks = Vec::new();
        for d in &cfg.devices {
            locks.push(lock_dir(&d.path)?);
        }
        let mut report = OpenReport::default();
        let found = discover(&cfg)?;
        let max_id = found.keys().next_back().copied();
        let next_id = AtomicU64::new(max_id.map_or(1, |m| m + 1));
        let counters = CounterCells::default();
        let mut segs: Vec<Arc<Segment>> = Vec::new();
        // The highest id of each device is its active segment candidate.
        let mut last_of_device: Vec<Option<u64>> = vec![None; cfg.devices.len()];
        for (&id, f) in &found {
            last_of_device[f.device] = Some(id);
        }
        for (&id, f) in &found {
            let is_last = last_of_device[f.device] == Some(id);
            let seg = load_segment(&cfg, f, is_last, &mut report)?;
            segs.push(Arc::new(seg));
        }
        report.segments = segs.len();
        segs.sort_by_key(|s| std::cmp::Reverse(s.id));
        let mut devices = Vec::new();
        for (i, d) in cfg.devices.iter().enumerate() {
            let active = segs
                .iter()
                .find(|s| s.device == i && s.is_active())
                .cloned();
            let active = match active {
                Some(a) => a,
                None => {
                    let s = Arc::new(new_active(
                        &cfg,
                        i,
                        next_id.fetch_add(1, Ordering::Relaxed),
                    )?);
                    segs.push(s.clone());
                    s
                }
            };
            devices.push(Device {
                path: d.path.clone(),
                tier: d.tier,
                writer: Mutex::new(active),
            });
        }
        segs.sort_by_key(|s| std::cmp::Reverse(s.id));
        if cfg.random_access_advice {
            for s in &segs {
                advise_random(&s.file);
            }
        }
        let inner = Arc::new(Inner {
            cfg,
            devices,
            segs: RwLock::new(segs),
            next_id,
            rr: AtomicUsize::new(0),
            counters,
            maintenance: Mutex::new(()),
            stop: AtomicBool::new(false),
            _locks: locks,
        });
        // Scanned or re-sealed segments get their checkpoints now, so that
        // the next open is fast even if this process is killed soon.
        inner.write_checkpoints()?;
        let weak = Arc::downgrade(&inner);
        let bg = std::thread::Builder::new()
            .name("strata-store-bg".into())
            .spawn(move || background(weak))
            .map_err(StoreError::io(
                "starting background thread",
                "strata-store-bg",
            ))?;
        Ok(Store {
            inner,
            bg: Some(bg),
            report,
        })
    }

    /// What the open found and repaired.
    pub fn open_report(&self) -> &OpenReport {
        &self.report
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

    /// Whether a live object with this identity exists (reads its needle).
    pub fn contains(&self, key: u64, alt_key: u32) -> Result<bool> {
        Ok(self.inner.get(key, alt_key, None)?.is_some())
    }

    /// Deletes an object: sets the deleted flag in its needle (and in any
    /// older needle of the same identity) on disk, synchronously, then drops
    /// it from the index. Returns whether a live object was deleted.
    pub fn delete(&self, key: u64, alt_key: u32) -> Result<bool> {
        self.inner.delete(key, alt_key)
    }

    /// Every segment with its tier, size, garbage ratio and creation time,
    /// newest first.
    pub fn segments(&self) -> Vec<SegmentInfo> {
        let inner = &self.inner;
        read(&inner.segs)
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
            .collect()
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

    /// Compacts every sealed segment whose garbage ratio is at least
    /// `min_garbage_ratio`; returns the reports.
    pub fn compact_all(
        &self,
        min_garbage_ratio: f64,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<Vec<RewriteReport>> {
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
    pub fn move_segment(
        &self,
        segment: u64,
        device: usize,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        if device >= self.inner.devices.len() {
            return Err(StoreError::NoSuchDevice(device));
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

    /// The needles of a segment in file order (for recovery streaming and
    /// re-appending hot needles). Damaged needles are reported as
    /// [`StoreError::Corrupt`] items and skipped.
    pub fn needles(&self, segment: u64) -> Result<NeedleIter> {
        let seg = self.inner.find(segment)?;
        let end = seg.len.load(Ordering::Relaxed);
        let scanner = Scanner::new(
            seg.file.clone(),
            &seg.path,
            SUPERBLOCK_LEN as u64,
            end,
            true,
        );
        Ok(NeedleIter { seg, scanner })
    }

    /// Whether the needle at `offset` in `segment` is the live version of its
    /// identity (not deleted, not overwritten).
    pub fn is_live(&self, segment: u64, offset: u64, key: u64, alt_key: u32) -> Result<bool> {
        let seg = self.inner.find(segment)?;
        Ok(
            matches!(self.inner.next_candidate(key, alt_key, u64::MAX)?, Some(c) if c.seg.id == seg.id && c.offset == offset),
        )
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
        }
    }

    /// RAM used by the index.
    pub fn memory(&self) -> MemoryUsage {
        let mut m = MemoryUsage::default();
        for s in read(&self.inner.segs).iter() {
            let own = std::mem::size_of::<Segment>() as u64 + s.path.as_os_str().len() as u64;
            match &s.index {
                SegIndex::Active(a) => {
                    let a = read(a);
                    m.active_bytes += a.heap_bytes() as u64 + own;
                    m.active_objects += a.map.len() as u64;
                }
                SegIndex::Sealed(x) => {
                    m.sealed_bytes += x.heap_bytes() as u64 + own;
                    m.sealed_objects += x.entry_count();
                }
            }
        }
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
        for s in read(&self.inner.segs).iter() {
            s.file
                .sync_data()
                .map_err(StoreError::io("syncing", &s.path))?;
            rustix::fs::fadvise(&*s.file, 0, None, rustix::fs::Advice::DontNeed)
                .map_err(|e| StoreError::io("dropping cached pages of", &s.path)(e.into()))?;
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
        self.inner.write_checkpoints()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let _ = self.shutdown();
    }
}

/// Iterator over the needles of a segment (see [`Store::needles`]).
pub struct NeedleIter {
    seg: Arc<Segment>,
    scanner: Scanner,
}

impl Iterator for NeedleIter {
    type Item = Result<StoredNeedle>;
    fn next(&mut self) -> Option<Self::Item> {
        let seg = &self.seg;
        let item = self.scanner.next()?;
        Some(match item {
            Err(e) => Err(e),
            Ok(ScanItem::Needle {
                offset,
                header,
                data,
            }) => Ok(StoredNeedle {
                offset,
                key: header.key,
                alt_key: header.alt_key,
                cookie: header.cookie,
                flags: header.flags,
                data: data.unwrap_or_default(),
            }),
            Ok(ScanItem::Corrupt { offset, reason, .. }) => Err(seg.corrupt(offset, reason)),
        })
    }
}

/// Name of the lock file in each device directory.
pub const LOCK_FILE: &str = "strata.lock";

/// Takes the exclusive lock of a device directory, so that two processes
/// never append to (or recover) the same segments.
fn lock_dir(dir: &std::path::Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(StoreError::io("opening lock file", &path))?;
    match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
        Ok(()) => Ok(f),
        Err(e) if e == rustix::io::Errno::WOULDBLOCK => Err(StoreError::InUse(dir.to_path_buf())),
        Err(e) => Err(StoreError::io("locking", &path)(e.into())),
    }
}

/// A segment file found on open.
struct Found {
    device: usize,
    generation: u64,
    path: PathBuf,
}

/// Lists the segment files of all devices, keeps the highest generation of
/// each id (lower ones are leftovers of a compaction or move interrupted
/// after its rename) and removes temporary files.
fn discover(cfg: &StoreConfig) -> Result<BTreeMap<u64, Found>> {
    let mut found: BTreeMap<u64, Found> = BTreeMap::new();
    let mut stale: Vec<PathBuf> = Vec::new();
    let mut indexes: Vec<(u64, u64, PathBuf)> = Vec::new();
    for (i, d) in cfg.devices.iter().enumerate() {
        let rd = std::fs::read_dir(&d.path).map_err(StoreError::io("listing", &d.path))?;
        for e in rd {
            let e = e.map_err(StoreError::io("listing", &d.path))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = e.path();
            if name.ends_with(".tmp") {
                stale.push(path);
                continue;
            }
            match parse_file_name(name) {
                Some((id, generation, true)) => {
                    let f = Found {
                        device: i,
                        generation,
                        path,
                    };
                    match found.get(&id) {
                        Some(old) if old.generation >= generation => stale.push(f.path),
                        _ => {
                            if let Some(old) = found.insert(id, f) {
                                stale.push(old.path);
                            }
                        }
                    }
                }
                Some((id, generation, false)) => indexes.push((id, generation, path)),
                None if name.ends_with(".seg") => {
                    return Err(StoreError::NotASegment {
                        path,
                        reason: "its name is not <16 hex digits>-<8 hex digits>.seg".into(),
                    })
                }
                None => {}
            }
        }
    }
    for (id, generation, path) in indexes {
        let keep = found
            .get(&id)
            .is_some_and(|f| f.generation == generation && path.parent() == f.path.parent());
        if !keep {
            stale.push(path);
        }
    }
    let mut dirs = Vec::new();
    for p in stale {
        if let Some(d) = p.parent() {
            dirs.push(d.to_path_buf());
        }
        std::fs::remove_file(&p).map_err(StoreError::io("removing stale file", &p))?;
    }
    dirs.dedup();
    for d in dirs {
        sync_dir(&d)?;
    }
    Ok(found)
}

/// Loads one segment: its checkpoint if valid, then the needles past it.
fn load_segment(
    cfg: &StoreConfig,
    f: &Found,
    is_last: bool,
    report: &mut OpenReport,
) -> Result<Segment> {
    let file = Arc::new(segment::open_rw(&f.path)?);
    let sb = segment::read_superblock(&file, &f.path)?;
    if sb.generation != f.generation {
        return Err(StoreError::NotASegment {
            path: f.path.clone(),
            reason: format!(
                "its superblock says generation {} but its name says {}",
                sb.generation, f.generation
            ),
        });
    }
    let mut file_len = file
        .metadata()
        .map_err(StoreError::io("reading metadata of", &f.path))?
        .len();
    let idx_path = f.path.with_file_name(index_file_name(sb.id, sb.generation));
    let ck = std::fs::read(&idx_path).ok();
    let mut sealed: Option<SealedIndex> = None;
    let mut active: Option<ActiveIndex> = None;
    if let Some(bytes) = ck.as_deref() {
        if let Ok((h, body)) = checkpoint::parse(bytes) {
            if h.segment == sb.id && h.generation == sb.generation && h.covered_len <= file_len {
                if h.kind == checkpoint::KIND_SEALED && h.covered_len == file_len {
                    sealed = checkpoint::decode_sealed(&h, body).ok();
                } else if h.kind == checkpoint::KIND_ACTIVE {
                    active = checkpoint::decode_active(&h, body)
                        .ok()
                        .filter(|a| a.offsets.first() == Some(&((SUPERBLOCK_LEN / 8) as u32)));
                }
            }
        }
    }
    let mut dirty = false;
    if sealed.is_none() {
        let mut idx = active.take().unwrap_or_else(|| {
            report.scanned_segments += 1;
            ActiveIndex::new(SUPERBLOCK_LEN as u64)
        });
        // Orphans: needles past the checkpoint.
        let start = idx.end();
        let mut sc = Scanner::new(file.clone(), &f.path, start, file_len, false);
        let mut cut: Option<u64> = None;
        while let Some(item) = sc.next() {
            match item? {
                ScanItem::Needle { header, .. } => {
                    report.orphan_needles += 1;
                    let len = header.needle_len();
                    idx.push(header.key, header.alt_key, len);
                    if header.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0 {
                        idx.map.remove(&(header.key, header.alt_key));
                    }
                }
                ScanItem::Corrupt {
                    offset,
                    len,
                    at_tail,
                    ..
                } => {
                    if at_tail {
                        cut = Some(offset);
                        break;
                    }
                    report.corrupt_regions.push((sb.id, offset));
                    // Keep the region as an unindexed entry so offsets stay
                    // contiguous.
                    idx.offsets.push(((offset + len) / 8) as u32);
                }
            }
        }
        if idx.end() != start {
            dirty = true;
        }
        if let Some(at) = cut {
            file.set_len(at)
                .and_then(|_| file.sync_all())
                .map_err(StoreError::io("cutting torn tail of", &f.path))?;
            report.torn_tails.push((sb.id, at, file_len - at));
            file_len = at;
            dirty = true;
        }
        if is_last && file_len < cfg.segment_size {
            active = Some(idx);
        } else {
            let s = idx
                .seal(seed_of(sb.id, sb.generation), cfg.fingerprint_bits)
                .map_err(|_| StoreError::NotASegment {
                    path: f.path.clone(),
                    reason: "its needles could not be indexed (duplicate identities)".into(),
                })?;
            sealed = Some(s);
            dirty = true;
        }
    }
    let index = match sealed {
        Some(s) => SegIndex::Sealed(s),
        None => SegIndex::Active(RwLock::new(
            active.unwrap_or_else(|| ActiveIndex::new(SUPERBLOCK_LEN as u64)),
        )),
    };
    let seg = Segment {
        id: sb.id,
        generation: sb.generation,
        device: f.device,
        tier: cfg.devices[f.device].tier,
        path: f.path.clone(),
        file,
        created_unix_ns: sb.created_unix_ns,
        index,
        len: AtomicU64::new(file_len),
        garbage: AtomicU64::new(0),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        dirty: AtomicBool::new(dirty),
    };
    seg.garbage.store(initial_garbage(&seg), Ordering::Relaxed);
    Ok(seg)
}

/// Garbage bytes known from a segment's own index: needles not indexed
/// (overwritten within the segment, damaged) or deleted.
fn initial_garbage(seg: &Segment) -> u64 {
    match &seg.index {
        SegIndex::Active(a) => {
            let a = read(a);
            let live: u64 = a
                .map
                .values()
                .filter_map(|&o| a.needle(o))
                .map(|x| x.1)
                .sum();
            a.end().saturating_sub(SUPERBLOCK_LEN as u64 + live)
        }
        SegIndex::Sealed(s) => {
            let mut indexed = vec![false; s.needle_count() as usize];
            for o in s.indexed_ordinals() {
                if let Some(x) = indexed.get_mut(o as usize) {
                    *x = !s.is_deleted(o);
                }
            }
            let live: u64 = s
                .needles()
                .zip(indexed)
                .filter(|(_, live)| *live)
                .map(|((_, len), _)| len)
                .sum();
            seg.len
                .load(Ordering::Relaxed)
                .saturating_sub(SUPERBLOCK_LEN as u64 + live)
        }
    }
}

fn new_active(cfg: &StoreConfig, device: usize, id: u64) -> Result<Segment> {
    let d = &cfg.devices[device];
    let sb = Superblock {
        tier: d.tier,
        id,
        generation: 0,
        created_unix_ns: now_ns(),
    };
    let (file, path) = segment::create_segment(&d.path, &sb)?;
    if cfg.random_access_advice {
        advise_random(&file);
    }
    Ok(Segment {
        id,
        generation: 0,
        device,
        tier: d.tier,
        path,
        file: Arc::new(file),
        created_unix_ns: sb.created_unix_ns,
        index: SegIndex::Active(RwLock::new(ActiveIndex::new(SUPERBLOCK_LEN as u64))),
        len: AtomicU64::new(SUPERBLOCK_LEN as u64),
        garbage: AtomicU64::new(0),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        dirty: AtomicBool::new(true),
    })
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
        }
        if inner.cfg.auto_compaction && last_compact.elapsed() >= inner.cfg.checkpoint_interval {
            last_compact = Instant::now();
            let candidate = read(&inner.segs)
                .iter()
                .filter(|s| {
                    !s.is_active() && s.garbage_ratio() >= inner.cfg.compaction_garbage_ratio
                })
                .map(|s| s.id)
                .next();
            if let Some(id) = candidate {
                let _ = inner.rewrite(id, None, &mut |_| {});
            }
        }
    }
}

impl Inner {
    fn find(&self, id: u64) -> Result<Arc<Segment>> {
        read(&self.segs)
            .iter()
            .find(|s| s.id == id)
            .cloned()
            .ok_or(StoreError::NoSuchSegment(id))
    }

    /// The newest indexed needle of (key, alt) in a segment with id below
    /// `below`.
    fn next_candidate(&self, key: u64, alt: u32, below: u64) -> Result<Option<Cand>> {
        let segs = read(&self.segs);
        let start = segs.partition_point(|s| s.id >= below);
        for s in &segs[start..] {
            if let Some((ord, offset, len)) = s.locate(key, alt) {
                return Ok(Some(Cand {
                    seg: s.clone(),
                    ord,
                    offset,
                    len,
                }));
            }
        }
        Ok(None)
    }

    fn get(&self, key: u64, alt: u32, cookie: Option<u32>) -> Result<Option<Object>> {
        let mut below = u64::MAX;
        loop {
            let Some(c) = self.next_candidate(key, alt, below)? else {
                return Ok(None);
            };
            below = c.seg.id;
            let mut buf = c.seg.pread(c.offset, c.len, &self.counters)?;
            let h = match needle::parse_header(&buf) {
                Ok(h) => h,
                Err(e) => return Err(c.seg.corrupt(c.offset, e)),
            };
            if (h.key, h.alt_key) != (key, alt) {
                continue; // a fingerprint false positive: another needle
            }
            if let Err(e) = needle::parse(&buf) {
                return Err(c.seg.corrupt(c.offset, e));
            }
            if h.is_deleted() {
                c.seg.mark_dead(key, alt, c.ord);
                return Ok(None);
            }
            if h.is_superseded() {
                c.seg.mark_dead(key, alt, c.ord);
                continue;
            }
            if cookie.is_some_and(|ck| ck != h.cookie) {
                return Ok(None);
            }
            buf.truncate(HEADER_LEN + h.size as usize);
            buf.drain(..HEADER_LEN);
            return Ok(Some(Object {
                data: buf,
                tier: c.seg.tier,
                segment: c.seg.id,
                device: c.seg.device,
                cookie: h.cookie,
            }));
        }
    }

    /// Reads a needle header and checks it is (key, alt).
    fn verify_header(&self, c: &Cand, key: u64, alt: u32) -> Result<Option<NeedleHeader>> {
        let buf = c.seg.pread(c.offset, HEADER_LEN as u64, &self.counters)?;
        let h = needle::parse_header(&buf).map_err(|e| c.seg.corrupt(c.offset, e))?;
        Ok(((h.key, h.alt_key) == (key, alt)).then_some(h))
    }

    /// Sets `flag` in a needle on disk (under the segment's lock); returns
    /// false if the segment was retired meanwhile (the caller retries).
    fn set_flag(&self, c: &Cand, key: u64, alt: u32, flag: u32) -> Result<bool> {
        let _g = lock(&c.seg.lock);
        if c.seg.retired.load(Ordering::Acquire) {
            return Ok(false);
        }
        let Some(h) = self.verify_header(c, key, alt)? else {
            return Ok(true);
        };
        let flags = h.flags | flag;
        c.seg
            .file
            .write_all_at(&flags.to_le_bytes(), c.offset + FLAGS_OFFSET)
            .and_then(|_| c.seg.file.sync_data())
            .map_err(StoreError::io("writing flags in", &c.seg.path))?;
        self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        if c.seg.mark_dead(key, alt, c.ord) {
            c.seg.garbage.fetch_add(c.len, Ordering::Relaxed);
        }
        c.seg.dirty.store(true, Ordering::Relaxed);
        Ok(true)
    }

    fn delete(&self, key: u64, alt: u32) -> Result<bool> {
        'retry: loop {
            // Every indexed version, newest first, checked against its header.
            let mut versions: Vec<(Cand, NeedleHeader)> = Vec::new();
            let mut below = u64::MAX;
            while let Some(c) = self.next_candidate(key, alt, below)? {
                below = c.seg.id;
                if let Some(h) = self.verify_header(&c, key, alt)? {
                    versions.push((c, h));
                }
            }
            let existed = versions
                .first()
                .is_some_and(|(_, h)| h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0);
            // Oldest first, so that a crash never leaves the newest version
            // deleted on disk while an older one is not.
            for (c, _) in versions.iter().rev() {
                if !self.set_flag(c, key, alt, FLAG_DELETED)? {
                    continue 'retry;
                }
            }
            return Ok(existed);
        }
    }

    fn put_batch_on(&self, device: usize, items: &[PutItem<'_>]) -> Result<()> {
        let dev = self
            .devices
            .get(device)
            .ok_or(StoreError::NoSuchDevice(device))?;
        for it in items {
            if it.data.len() as u64 > self.cfg.max_object_size {
                return Err(StoreError::ObjectTooLarge {
                    size: it.data.len() as u64,
                    max: self.cfg.max_object_size,
                });
            }
        }
        if items.is_empty() {
            return Ok(());
        }
        let mut buf = Vec::with_capacity(
            items
                .iter()
                .map(|i| needle::needle_len(i.data.len() as u32) as usize)
                .sum(),
        );
        let mut lens = Vec::with_capacity(items.len());
        for it in items {
            let before = buf.len();
            needle::encode(&mut buf, it.cookie, it.key, it.alt_key, 0, it.data);
            lens.push((buf.len() - before) as u64);
        }
        let seg = {
            let mut w = lock(&dev.writer);
            let seg = w.clone();
            let start = seg.len.load(Ordering::Relaxed);
            let res = seg
                .file
                .write_all_at(&buf, start)
                .and_then(|_| seg.file.sync_data());
            if let Err(e) = res {
                // Leave the segment as it was: nothing of the batch is
                // visible, and a partial write is cut (or cut on open).
                let _ = seg.file.set_len(start);
                let _ = seg.file.sync_all();
                return Err(StoreError::io("appending to", &seg.path)(e));
            }
            self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
            self.counters.written[dev.tier.code() as usize]
                .fetch_add(buf.len() as u64, Ordering::Relaxed);
            if let SegIndex::Active(a) = &seg.index {
                let mut a = write(a);
                for (it, &len) in items.iter().zip(&lens) {
                    let (_, prev) = a.push(it.key, it.alt_key, len);
                    if let Some(p) = prev.and_then(|p| a.needle(p)) {
                        seg.garbage.fetch_add(p.1, Ordering::Relaxed);
                    }
                }
            }
            seg.len.store(start + buf.len() as u64, Ordering::Release);
            seg.dirty.store(true, Ordering::Relaxed);
            if start + buf.len() as u64 >= self.cfg.segment_size {
                // The batch is durable whatever happens here; a failed seal
                // (e.g. no space for a new segment) is retried next batch.
                let _ = self.seal(device, &mut w);
            }
            seg
        };
        // Older versions elsewhere: count them as garbage; if one lies in a
        // segment probed before this one, flag it superseded on disk.
        for it in items {
            let mut below = u64::MAX;
            while let Some(c) = self.next_candidate(it.key, it.alt_key, below)? {
                below = c.seg.id;
                if c.seg.id == seg.id {
                    continue;
                }
                if c.seg.id > seg.id {
                    if !self.set_flag(&c, it.key, it.alt_key, FLAG_SUPERSEDED)? {
                        below = u64::MAX; // retired meanwhile: look again
                    }
                    continue;
                }
                c.seg.garbage.fetch_add(c.len, Ordering::Relaxed);
                break;
            }
        }
        Ok(())
    }

    /// Seals the device's active segment and starts a new one. The caller
    /// holds the device's writer lock (`w`).
    fn seal(&self, device: usize, w: &mut Arc<Segment>) -> Result<()> {
        let old = w.clone();
        let next = Arc::new(new_active(
            &self.cfg,
            device,
            self.next_id.fetch_add(1, Ordering::Relaxed),
        )?);
        let _g = lock(&old.lock);
        let SegIndex::Active(a) = &old.index else {
            return Ok(());
        };
        let sealed_index = read(a)
            .seal(seed_of(old.id, old.generation), self.cfg.fingerprint_bits)
            .map_err(|_| StoreError::Config("could not build a segment index".into()))?;
        let sealed = Arc::new(Segment {
            id: old.id,
            generation: old.generation,
            device: old.device,
            tier: old.tier,
            path: old.path.clone(),
            file: old.file.clone(),
            created_unix_ns: old.created_unix_ns,
            index: SegIndex::Sealed(sealed_index),
            len: AtomicU64::new(old.len.load(Ordering::Acquire)),
            garbage: AtomicU64::new(old.garbage.load(Ordering::Relaxed)),
            lock: Mutex::new(()),
            retired: AtomicBool::new(false),
            dirty: AtomicBool::new(true),
        });
        {
            let mut segs = write(&self.segs);
            for s in segs.iter_mut() {
                if s.id == old.id {
                    *s = sealed.clone();
                }
            }
            segs.push(next.clone());
            segs.sort_by_key(|s| std::cmp::Reverse(s.id));
        }
        old.retired.store(true, Ordering::Release);
        *w = next;
        Ok(())
    }

    fn write_checkpoints(&self) -> Result<()> {
        let segs: Vec<Arc<Segment>> = read(&self.segs).clone();
        for s in segs {
            if s.dirty.swap(false, Ordering::AcqRel) {
                let bytes = s.checkpoint_bytes();
                if let Err(e) = write_file_atomic(&s.index_path(), &bytes) {
                    s.dirty.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Whether needle `ord` of `seg` (with header `h`) is the live version of
    /// its identity.
    fn needle_is_live(&self, seg: &Segment, ord: u32, h: &NeedleHeader) -> Result<bool> {
        if h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0 {
            return Ok(false);
        }
        let SegIndex::Sealed(s) = &seg.index else {
            return Ok(true);
        };
        if s.is_deleted(ord) || s.lookup(h.key, h.alt_key) != Some(ord) {
            return Ok(false);
        }
        // A newer version in a newer segment (checked on disk, since a
        // fingerprint match alone could be a stranger).
        let mut below = u64::MAX;
        while let Some(c) = self.next_candidate(h.key, h.alt_key, below)? {
            if c.seg.id <= seg.id {
                break;
            }
            below = c.seg.id;
            if self.verify_header(&c, h.key, h.alt_key)?.is_some() {
                return Ok(false);
            }
        }
        Ok(true)
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
        if src.is_active() {
            return Err(StoreError::SegmentActive(id));
        }
        let SegIndex::Sealed(src_index) = &src.index else {
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
            tier: dev.tier,
            id,
            generation,
            created_unix_ns: src.created_unix_ns,
        };
        let out = File::create(&tmp_path).map_err(StoreError::io("creating", &tmp_path))?;
        let wr = |bytes: &[u8], at: u64| {
            out.write_all_at(bytes, at)
                .map_err(StoreError::io("writing", &tmp_path))
        };
        wr(&sb.encode(), 0)?;
        let total = src.len.load(Ordering::Acquire);
        let mut new_idx = ActiveIndex::new(SUPERBLOCK_LEN as u64);
        // (source ordinal, new ordinal, new offset) of every needle kept.
        let mut kept: Vec<(u32, u32, u64)> = Vec::new();
        let mut pending: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut pending_at = SUPERBLOCK_LEN as u64;
        let mut sc = Scanner::new(
            src.file.clone(),
            &src.path,
            SUPERBLOCK_LEN as u64,
            total,
            true,
        );
        let mut ord: u32 = 0;
        let mut last_report = 0u64;
        let rate = self.cfg.compaction_bytes_per_s;
        let mut io_bytes = 0u64;
        let result: Result<()> = (|| {
            while let Some(item) = sc.next() {
                let item = item?;
                let this = ord;
                ord += 1;
                if let ScanItem::Needle {
                    offset,
                    header,
                    data,
                } = &item
                {
                    if src_index.needle(this).map(|x| x.0) != Some(*offset) {
                        return Err(src.corrupt(*offset, "needle offsets disagree with the index"));
                    }
                    let keep = !compacting || self.needle_is_live(&src, this, header)?;
                    if keep {
                        let before = pending.len();
                        needle::encode(
                            &mut pending,
                            header.cookie,
                            header.key,
                            header.alt_key,
                            header.flags,
                            data.as_deref().unwrap_or_default(),
                        );
                        let len = (pending.len() - before) as u64;
                        let new_off = new_idx.end();
                        let (new_ord, _) = new_idx.push(header.key, header.alt_key, len);
                        if header.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0
                            || src_index.is_deleted(this)
                            || src_index.lookup(header.key, header.alt_key) != Some(this)
                        {
                            // Not the live version: copied (a move keeps
                            // everything) but not indexed.
                            new_idx.map.remove(&(header.key, header.alt_key));
                        }
                        kept.push((this, new_ord, new_off));
                    }
                } else if !compacting {
                    // A move keeps damaged regions byte for byte.
                    let (o, l) = (item.offset(), item.len());
                    let mut raw = vec![0u8; l as usize];
                    pread_exact(&src.file, &mut raw, o)
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
            out.sync_data()
                .map_err(StoreError::io("syncing", &tmp_path))?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = std::fs::remove_file(&tmp_path);
            return Err(e);
        }
        progress(RewriteProgress {
            segment: id,
            done: total,
            total,
        });
        let new_len = new_idx.end();
        // Swap, with in-place flag writes to the source blocked.
        let _g = lock(&src.lock);
        let swap: Result<Arc<Segment>> = (|| {
            // Deletes that reached the source during the copy.
            let mut flagged = false;
            for &(src_ord, _, new_off) in &kept {
                if src_index.is_deleted(src_ord) {
                    let Some((so, _)) = src_index.needle(src_ord) else {
                        continue;
                    };
                    let mut fl = [0u8; 4];
                    pread_exact(&src.file, &mut fl, so + FLAGS_OFFSET)
                        .map_err(StoreError::io("reading", &src.path))?;
                    wr(&fl, new_off + FLAGS_OFFSET)?;
                    flagged = true;
                }
            }
            if flagged {
                out.sync_data()
                    .map_err(StoreError::io("syncing", &tmp_path))?;
            }
            let sealed = new_idx
                .seal(seed_of(id, generation), self.cfg.fingerprint_bits)
                .map_err(|_| StoreError::Config("could not build a segment index".into()))?;
            for &(src_ord, new_ord, _) in &kept {
                if src_index.is_deleted(src_ord) {
                    sealed.set_deleted(new_ord);
                }
            }
            write_file_atomic(
                &dev.path.join(index_file_name(id, generation)),
                &checkpoint::encode_sealed(id, generation, &sealed),
            )?;
            std::fs::rename(&tmp_path, &final_path)
                .map_err(StoreError::io("renaming", &tmp_path))?;
            sync_dir(&dev.path)?;
            let file = segment::open_rw(&final_path)?;
            if self.cfg.random_access_advice {
                advise_random(&file);
            }
            let seg = Arc::new(Segment {
                id,
                generation,
                device: dev_i,
                tier: dev.tier,
                path: final_path.clone(),
                file: Arc::new(file),
                created_unix_ns: src.created_unix_ns,
                index: SegIndex::Sealed(sealed),
                len: AtomicU64::new(new_len),
                garbage: AtomicU64::new(0),
                lock: Mutex::new(()),
                retired: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
            });
            seg.garbage.store(initial_garbage(&seg), Ordering::Relaxed);
            {
                let mut segs = write(&self.segs);
                for s in segs.iter_mut() {
                    if s.id == id {
                        *s = seg.clone();
                    }
                }
            }
            src.retired.store(true, Ordering::Release);
            Ok(seg)
        })();
        drop(_g);
        let seg = match swap {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp_path);
                return Err(e);
            }
        };
        // The old generation is no longer referenced by name.
        let old_idx = src.index_path();
        let _ = std::fs::remove_file(&src.path);
        let _ = std::fs::remove_file(&old_idx);
        if let Some(d) = src.path.parent() {
            sync_dir(d)?;
        }
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
