//! The store: device directories, their segments, the RAM index over all
//! of them, and the put / get / delete / compact / move operations.

use crate::bits::EliasFano;
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::checkpoint::{RunFile, RunSegment};
use crate::format::needle::{
    self, NeedleHeader, FLAGS_OFFSET, FLAG_DELETED, FLAG_SUPERSEDED, HEADER_LEN,
};
use crate::format::superblock::{Superblock, Tier, SUPERBLOCK_LEN};
use crate::hash::mix64;
use crate::index::ActiveIndex;
use crate::nodeindex::{Loc, NodeIndex, Run};
use crate::segment::{
    self, index_file_name, parse_file_name, pread_exact, segment_file_name, sync_dir,
    write_file_atomic, ScanItem, Scanner,
};
use std::collections::{BTreeMap, HashSet};
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
    /// Index structures probed by GETs (two per GET whatever the segment
    /// count: the map of recent versions and the run).
    pub index_probes: u64,
    /// Merges of recent versions into the node index's run.
    pub merges: u64,
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

/// Needle offsets (in 8-byte units, file order, then the end of the last
/// needle) of a segment; the identities live in the node index.
enum Offsets {
    /// The appendable segment: offsets and the identity of every needle
    /// (for its checkpoint).
    Active(RwLock<ActiveSeg>),
    /// A sealed segment: Elias–Fano coded offsets.
    Sealed(EliasFano),
}

struct ActiveSeg {
    offsets: Vec<u32>,
    /// Identity of each needle ((0, 0) for a damaged region).
    keys: Vec<(u64, u32)>,
    /// Needles whose identities are in the node index: a checkpoint covers
    /// only those (the rest are orphans for the next open to scan).
    published: usize,
}

impl ActiveSeg {
    fn needle(&self, ord: u32) -> Option<(u64, u64)> {
        let a = u64::from(*self.offsets.get(ord as usize)?);
        let b = u64::from(*self.offsets.get(ord as usize + 1)?);
        Some((a * 8, (b - a) * 8))
    }
}

struct Segment {
    id: u64,
    generation: u64,
    device: usize,
    tier: Tier,
    path: PathBuf,
    file: Arc<File>,
    created_unix_ns: u64,
    offsets: Offsets,
    /// Identities by ordinal of a sealed segment whose checkpoint is not yet
    /// written (dropped once it is).
    pending_keys: Mutex<Option<Vec<(u64, u32)>>>,
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

impl Cand {
    fn loc(&self) -> Loc {
        Loc {
            seg: self.seg.id as u32,
            ord: self.ord,
        }
    }
}

impl Segment {
    fn needle(&self, ord: u32) -> Option<(u64, u64)> {
        match &self.offsets {
            Offsets::Active(a) => read(a).needle(ord),
            Offsets::Sealed(ef) => {
                let a = ef.get(ord as usize)?;
                let b = ef.get(ord as usize + 1)?;
                Some((a * 8, (b - a) * 8))
            }
        }
    }

    fn is_active(&self) -> bool {
        matches!(self.offsets, Offsets::Active(_))
    }

    fn needle_count(&self) -> u64 {
        match &self.offsets {
            Offsets::Active(a) => read(a).offsets.len().saturating_sub(1) as u64,
            Offsets::Sealed(ef) => ef.len().saturating_sub(1) as u64,
        }
    }

    fn offset_units(&self) -> Vec<u32> {
        match &self.offsets {
            Offsets::Active(a) => read(a).offsets.clone(),
            Offsets::Sealed(ef) => ef.iter().map(|u| u as u32).collect(),
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

    /// The checkpoint of this segment (offsets, and the latest indexed
    /// needle of each identity in it), if its identities are in RAM.
    fn checkpoint_bytes(&self, idx: &NodeIndex) -> Option<Vec<u8>> {
        let pending = lock(&self.pending_keys);
        let active = match &self.offsets {
            Offsets::Active(a) => Some(read(a)),
            Offsets::Sealed(_) => None,
        };
        let (offsets, keys): (Vec<u32>, &[(u64, u32)]) = match (&active, pending.as_deref()) {
            (Some(a), _) => (a.offsets[..=a.published].to_vec(), &a.keys[..a.published]),
            (None, Some(k)) => (self.offset_units(), k),
            (None, None) => return None,
        };
        let mut ai = ActiveIndex::new(0);
        ai.offsets = offsets;
        for (ord, &(k, a)) in keys.iter().enumerate() {
            let loc = Loc {
                seg: self.id as u32,
                ord: ord as u32,
            };
            if idx.is_indexed(k, a, loc) {
                ai.map.insert((k, a), ord as u32);
            }
        }
        Some(checkpoint::encode_active(self.id, self.generation, &ai))
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
    probes: AtomicU64,
    merges: AtomicU64,
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
    /// The node-wide index. Lock order: `idx` before `segs`.
    idx: RwLock<NodeIndex>,
    /// Every segment, sorted by id, highest (newest) first.
    segs: RwLock<Vec<Arc<Segment>>>,
    /// The run changed since the run file was written.
    run_dirty: AtomicBool,
    /// Sequence number of the run file.
    run_seq: AtomicU64,
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

/// A needle a compaction or move copied: source ordinal, new ordinal, new
/// offset, identity, and whether the index held it when it was copied.
type KeptNeedle = (u32, u32, u64, (u64, u32), bool);

/// The segment with id `id` in a list sorted by id, highest first.
fn find_in(segs: &[Arc<Segment>], id: u64) -> Option<Arc<Segment>> {
    segs.binary_search_by(|s| id.cmp(&s.id))
        .ok()
        .map(|i| segs[i].clone())
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
        if max_id.is_some_and(|m| m >= u64::from(u32::MAX)) {
            return Err(StoreError::Config(
                "segment ids must stay below 2^32 (the node index stores 32 bits)".into(),
            ));
        }
        let next_id = AtomicU64::new(max_id.map_or(1, |m| m + 1));
        let counters = CounterCells::default();
        let mut segs: Vec<Arc<Segment>> = Vec::new();
        // The highest id of each device is its active segment candidate.
        let mut last_of_device: Vec<Option<u64>> = vec![None; cfg.devices.len()];
        for (&id, f) in &found {
            last_of_device[f.device] = Some(id);
        }
        // The run file: the merged part of the node index, with the needle
        // offsets of the segments it covers.
        let mut run_file = load_run_file(&cfg);
        let mut idx = NodeIndex::default();
        let mut covered_ok: HashSet<u32> = HashSet::new();
        for (&id, f) in &found {
            let is_last = last_of_device[f.device] == Some(id);
            let from_run = run_file.as_mut().and_then(|rf| {
                let i = rf.run.segs.binary_search(&(id as u32)).ok()?;
                let rs = &rf.segments[i];
                (rs.generation == f.generation).then(|| (rs.offsets.clone(), rs.garbage))
            });
            let seg = match from_run {
                Some((offsets, garbage)) => match load_covered(f, offsets, garbage)? {
                    Some(seg) => {
                        covered_ok.insert(id as u32);
                        seg
                    }
                    None => load_segment(&cfg, f, is_last, &mut report, &mut idx)?,
                },
                None => load_segment(&cfg, f, is_last, &mut report, &mut idx)?,
            };
            segs.push(Arc::new(seg));
        }
        let mut run_seq = 0;
        if let Some(rf) = run_file {
            let mut run = rf.run;
            for &id in &run.segs.clone() {
                if !covered_ok.contains(&id) {
                    run.forget_segment(id);
                }
            }
            for (k, a, l) in rf.older {
                if covered_ok.contains(&l.seg) {
                    idx.older.entry((k, a)).or_default().push(l);
                }
            }
            run_seq = rf.sequence;
            idx.run = Some(run);
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
            idx: RwLock::new(idx),
            segs: RwLock::new(segs),
            run_dirty: AtomicBool::new(false),
            run_seq: AtomicU64::new(run_seq),
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
        Ok(self.inner.delete_batch(&[(key, alt_key)])?[0])
    }

    /// Deletes a batch of objects, grouped like a PUT batch: the deleted
    /// flags of all their needles are written, then each segment file
    /// touched gets one `fdatasync` (two rounds when some object also has
    /// older versions: those are flagged and synced first, so that a crash
    /// never leaves the newest version deleted on disk while an older one is
    /// not). Returns, per identity in order, whether a live object was
    /// deleted (an identity given twice reports false the second time).
    pub fn delete_batch(&self, ids: &[(u64, u32)]) -> Result<Vec<bool>> {
        self.inner.delete_batch(ids)
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
            index_probes: c.probes.load(Ordering::Relaxed),
            merges: c.merges.load(Ordering::Relaxed),
        }
    }

    /// RAM used by the index. "Sealed" is the node index's run (the merged
    /// part) with the needle offsets of sealed segments; "active" is the
    /// map of recent versions (written since the last merge) with the
    /// offsets and identities of the active segments.
    pub fn memory(&self) -> MemoryUsage {
        let mut m = MemoryUsage::default();
        {
            let idx = read(&self.inner.idx);
            if let Some(r) = &idx.run {
                m.sealed_bytes += r.heap_bytes() as u64;
                m.sealed_objects += r.entry_count();
            }
            m.active_bytes += idx.map_heap_bytes() as u64;
            m.active_objects += idx.map_entries();
        }
        for s in read(&self.inner.segs).iter() {
            let own = std::mem::size_of::<Segment>() as u64 + s.path.as_os_str().len() as u64;
            match &s.offsets {
                Offsets::Active(a) => {
                    let a = read(a);
                    m.active_bytes +=
                        (a.offsets.capacity() * 4 + a.keys.capacity() * 16) as u64 + own;
                }
                Offsets::Sealed(ef) => {
                    m.sealed_bytes += ef.heap_bytes() as u64 + own;
                }
            }
            if let Some(k) = lock(&s.pending_keys).as_ref() {
                m.active_bytes += k.capacity() as u64 * 16;
            }
        }
        m
    }

    /// Merges the recent versions into the node index's run now (the
    /// background thread does it by itself past `merge_min_objects`).
    pub fn merge_index(&self) -> Result<()> {
        self.inner.merge()
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

/// Name of the node index's run file, in the first device directory.
pub const RUN_FILE: &str = "strata.run";

/// Reads the run file if it is whole and valid (otherwise the segments'
/// own checkpoints rebuild the index, and the next merge writes a new run).
fn load_run_file(cfg: &StoreConfig) -> Option<RunFile> {
    let path = cfg.devices.first()?.path.join(RUN_FILE);
    let bytes = std::fs::read(path).ok()?;
    let (h, body) = checkpoint::parse(&bytes).ok()?;
    checkpoint::decode_run(&h, body).ok()
}

/// Opens a segment covered by the run file (its offsets come from there);
/// `None` if the file does not match them (then it is loaded on its own).
fn load_covered(f: &Found, offsets: EliasFano, garbage: u64) -> Result<Option<Segment>> {
    let file = Arc::new(segment::open_rw(&f.path)?);
    let sb = segment::read_superblock(&file, &f.path)?;
    let file_len = file
        .metadata()
        .map_err(StoreError::io("reading metadata of", &f.path))?
        .len();
    let end = offsets.get(offsets.len().saturating_sub(1)).unwrap_or(0) * 8;
    if sb.generation != f.generation
        || end != file_len
        || offsets.get(0) != Some(SUPERBLOCK_LEN as u64 / 8)
    {
        return Ok(None);
    }
    Ok(Some(Segment {
        id: sb.id,
        generation: sb.generation,
        device: f.device,
        tier: sb.tier,
        path: f.path.clone(),
        file,
        created_unix_ns: sb.created_unix_ns,
        offsets: Offsets::Sealed(offsets),
        pending_keys: Mutex::new(None),
        len: AtomicU64::new(file_len),
        garbage: AtomicU64::new(garbage),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        dirty: AtomicBool::new(false),
    }))
}

/// Loads one segment not covered by the run: its checkpoint if valid, then
/// the needles past it; its identities go into the node index.
fn load_segment(
    cfg: &StoreConfig,
    f: &Found,
    is_last: bool,
    report: &mut OpenReport,
    node: &mut NodeIndex,
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
    let mut active: Option<ActiveIndex> = None;
    if let Some(bytes) = ck.as_deref() {
        if let Ok((h, body)) = checkpoint::parse(bytes) {
            if h.segment == sb.id
                && h.generation == sb.generation
                && h.covered_len <= file_len
                && h.kind == checkpoint::KIND_ACTIVE
            {
                active = checkpoint::decode_active(&h, body)
                    .ok()
                    .filter(|a| a.offsets.first() == Some(&((SUPERBLOCK_LEN / 8) as u32)));
            }
        }
    }
    let mut dirty = false;
    let mut idx = active.take().unwrap_or_else(|| {
        report.scanned_segments += 1;
        ActiveIndex::new(SUPERBLOCK_LEN as u64)
    });
    // Orphans: needles past the checkpoint.
    let start = idx.end();
    let mut sc = Scanner::new(file.clone(), &f.path, start, file_len, false);
    let mut cut: Option<u64> = None;
    let mut keys: Vec<(u64, u32)> = vec![(0, 0); idx.needle_count() as usize];
    for (&(k, a), &o) in &idx.map {
        if let Some(x) = keys.get_mut(o as usize) {
            *x = (k, a);
        }
    }
    while let Some(item) = sc.next() {
        match item? {
            ScanItem::Needle { header, .. } => {
                report.orphan_needles += 1;
                let len = header.needle_len();
                idx.push(header.key, header.alt_key, len);
                keys.push((header.key, header.alt_key));
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
                keys.push((0, 0));
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
    let live = idx.live_bytes();
    let garbage = idx.end().saturating_sub(SUPERBLOCK_LEN as u64 + live);
    for (&(k, a), &o) in &idx.map {
        node.insert(
            k,
            a,
            Loc {
                seg: sb.id as u32,
                ord: o,
            },
        );
    }
    let (offsets, pending) = if is_last && file_len < cfg.segment_size {
        (
            Offsets::Active(RwLock::new(ActiveSeg {
                offsets: idx.offsets,
                published: keys.len(),
                keys,
            })),
            None,
        )
    } else {
        let units: Vec<u64> = idx.offsets.iter().map(|&o| u64::from(o)).collect();
        let ef = EliasFano::new(&units, units.last().copied().unwrap_or(0)).ok_or_else(|| {
            StoreError::NotASegment {
                path: f.path.clone(),
                reason: "its needle offsets could not be indexed".into(),
            }
        })?;
        (Offsets::Sealed(ef), dirty.then_some(keys))
    };
    Ok(Segment {
        id: sb.id,
        generation: sb.generation,
        device: f.device,
        tier: cfg.devices[f.device].tier,
        path: f.path.clone(),
        file,
        created_unix_ns: sb.created_unix_ns,
        offsets,
        pending_keys: Mutex::new(pending),
        len: AtomicU64::new(file_len),
        garbage: AtomicU64::new(garbage),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        dirty: AtomicBool::new(dirty),
    })
}

fn new_active(cfg: &StoreConfig, device: usize, id: u64) -> Result<Segment> {
    if id >= u64::from(u32::MAX) {
        return Err(StoreError::Config(
            "segment ids must stay below 2^32 (the node index stores 32 bits)".into(),
        ));
    }
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
        offsets: Offsets::Active(RwLock::new(ActiveSeg {
            offsets: vec![(SUPERBLOCK_LEN / 8) as u32],
            keys: Vec::new(),
            published: 0,
        })),
        pending_keys: Mutex::new(None),
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
        if inner.merge_due() {
            // Errors leave the index as it was; retried on the next round.
            let _ = inner.merge();
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
        let segs = read(&self.segs);
        find_in(&segs, id).ok_or(StoreError::NoSuchSegment(id))
    }

    /// The newest indexed needle of (key, alt) in a segment with id below
    /// `below`.
    fn next_candidate(&self, key: u64, alt: u32, below: u64) -> Result<Option<Cand>> {
        Ok(self.next_candidate_counted(key, alt, below).0)
    }

    fn next_candidate_counted(&self, key: u64, alt: u32, below: u64) -> (Option<Cand>, u32) {
        let idx = read(&self.idx);
        let mut below = below;
        let mut probes = 0;
        loop {
            let (l, p) = idx.candidate_counted(key, alt, below);
            probes += p;
            let Some(l) = l else {
                return (None, probes);
            };
            let segs = read(&self.segs);
            if let Some(seg) = find_in(&segs, u64::from(l.seg)) {
                if let Some((offset, len)) = seg.needle(l.ord) {
                    return (
                        Some(Cand {
                            seg,
                            ord: l.ord,
                            offset,
                            len,
                        }),
                        probes,
                    );
                }
            }
            below = u64::from(l.seg);
        }
    }

    /// Drops the index entry of a needle found deleted or superseded.
    fn mark_dead(&self, c: &Cand, key: u64, alt: u32) -> bool {
        write(&self.idx).remove(key, alt, c.loc())
    }

    fn get(&self, key: u64, alt: u32, cookie: Option<u32>) -> Result<Option<Object>> {
        let mut below = u64::MAX;
        loop {
            let (c, probes) = self.next_candidate_counted(key, alt, below);
            self.counters
                .probes
                .fetch_add(u64::from(probes), Ordering::Relaxed);
            let Some(c) = c else {
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
                self.mark_dead(&c, key, alt);
                return Ok(None);
            }
            if h.is_superseded() {
                self.mark_dead(&c, key, alt);
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

    /// Sets `flag` in a needle on disk (under the segment's lock) and syncs
    /// it; returns false if the segment was retired meanwhile (the caller
    /// retries).
    fn set_flag(&self, c: &Cand, key: u64, alt: u32, flag: u32) -> Result<bool> {
        self.set_flags(std::slice::from_ref(&(c, key, alt)), flag)
    }

    /// Sets `flag` in every given needle, grouped by segment: each segment
    /// file gets its flag writes and then one `fdatasync`, under its lock.
    /// Returns false if a segment was retired meanwhile (flags already
    /// written stay; the caller retries, which is idempotent).
    fn set_flags(&self, needles: &[(&Cand, u64, u32)], flag: u32) -> Result<bool> {
        let mut order: Vec<usize> = (0..needles.len()).collect();
        order.sort_by_key(|&i| (needles[i].0.seg.id, needles[i].0.offset));
        let mut i = 0;
        while i < order.len() {
            let seg = needles[order[i]].0.seg.clone();
            let mut j = i;
            while j < order.len() && Arc::ptr_eq(&needles[order[j]].0.seg, &seg) {
                j += 1;
            }
            let _g = lock(&seg.lock);
            if seg.retired.load(Ordering::Acquire) {
                return Ok(false);
            }
            let mut written: Vec<&(&Cand, u64, u32)> = Vec::new();
            for &k in &order[i..j] {
                let n = &needles[k];
                let (c, key, alt) = *n;
                let Some(h) = self.verify_header(c, key, alt)? else {
                    continue;
                };
                if h.flags & flag == flag {
                    written.push(n);
                    continue;
                }
                seg.file
                    .write_all_at(&(h.flags | flag).to_le_bytes(), c.offset + FLAGS_OFFSET)
                    .map_err(StoreError::io("writing flags in", &seg.path))?;
                written.push(n);
            }
            if !written.is_empty() {
                seg.file
                    .sync_data()
                    .map_err(StoreError::io("writing flags in", &seg.path))?;
                self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
                for &&(c, key, alt) in &written {
                    if self.mark_dead(c, key, alt) {
                        seg.garbage.fetch_add(c.len, Ordering::Relaxed);
                    }
                }
                seg.dirty.store(true, Ordering::Relaxed);
            }
            i = j;
        }
        Ok(true)
    }

    fn delete_batch(&self, ids: &[(u64, u32)]) -> Result<Vec<bool>> {
        'retry: loop {
            // Every indexed version of every identity, checked against its
            // header: the newest of each apart from the older ones.
            let mut existed = Vec::with_capacity(ids.len());
            let mut newest: Vec<(Cand, u64, u32)> = Vec::new();
            let mut older: Vec<(Cand, u64, u32)> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            for &(key, alt) in ids {
                if !seen.insert((key, alt)) {
                    existed.push(false);
                    continue;
                }
                let mut versions: Vec<(Cand, NeedleHeader)> = Vec::new();
                let mut below = u64::MAX;
                while let Some(c) = self.next_candidate(key, alt, below)? {
                    below = c.seg.id;
                    if let Some(h) = self.verify_header(&c, key, alt)? {
                        versions.push((c, h));
                    }
                }
                existed.push(
                    versions
                        .first()
                        .is_some_and(|(_, h)| h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0),
                );
                let mut it = versions.into_iter();
                if let Some((c, _)) = it.next() {
                    newest.push((c, key, alt));
                }
                older.extend(it.map(|(c, _)| (c, key, alt)));
            }
            // Older versions first, so that a crash never leaves the newest
            // version deleted on disk while an older one is not.
            for group in [&older, &newest] {
                let refs: Vec<(&Cand, u64, u32)> =
                    group.iter().map(|(c, k, a)| (c, *k, *a)).collect();
                if !self.set_flags(&refs, FLAG_DELETED)? {
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
            if let Offsets::Active(a) = &seg.offsets {
                let first = {
                    let mut a = write(a);
                    let first = (a.offsets.len() - 1) as u32;
                    for (it, &len) in items.iter().zip(&lens) {
                        let end = a.offsets.last().copied().unwrap_or(0) + (len / 8) as u32;
                        a.offsets.push(end);
                        a.keys.push((it.key, it.alt_key));
                    }
                    first
                };
                let mut idx = write(&self.idx);
                let mut replaced = 0u64;
                for (i, it) in items.iter().enumerate() {
                    let loc = Loc {
                        seg: seg.id as u32,
                        ord: first + i as u32,
                    };
                    if let Some(p) = idx.insert(it.key, it.alt_key, loc) {
                        replaced += seg.needle(p.ord).map_or(0, |x| x.1);
                    }
                }
                drop(idx);
                seg.garbage.fetch_add(replaced, Ordering::Relaxed);
                write(a).published = first as usize + items.len();
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
    /// holds the device's writer lock (`w`). Sealing only re-codes the
    /// offsets: the identities stay where they are in the node index.
    fn seal(&self, device: usize, w: &mut Arc<Segment>) -> Result<()> {
        let old = w.clone();
        let next = Arc::new(new_active(
            &self.cfg,
            device,
            self.next_id.fetch_add(1, Ordering::Relaxed),
        )?);
        let _g = lock(&old.lock);
        let Offsets::Active(a) = &old.offsets else {
            return Ok(());
        };
        let (ef, keys) = {
            let a = read(a);
            let units: Vec<u64> = a.offsets.iter().map(|&o| u64::from(o)).collect();
            let ef = EliasFano::new(&units, units.last().copied().unwrap_or(0))
                .ok_or_else(|| old.corrupt(0, "needle offsets decrease"))?;
            (ef, a.keys.clone())
        };
        let sealed = Arc::new(Segment {
            id: old.id,
            generation: old.generation,
            device: old.device,
            tier: old.tier,
            path: old.path.clone(),
            file: old.file.clone(),
            created_unix_ns: old.created_unix_ns,
            offsets: Offsets::Sealed(ef),
            pending_keys: Mutex::new(Some(keys)),
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
                let bytes = s.checkpoint_bytes(&read(&self.idx));
                let Some(bytes) = bytes else { continue };
                if let Err(e) = write_file_atomic(&s.index_path(), &bytes) {
                    s.dirty.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                if !s.is_active() {
                    *lock(&s.pending_keys) = None;
                }
            }
        }
        if self.run_dirty.swap(false, Ordering::AcqRel) {
            if let Err(e) = self.write_run_file() {
                self.run_dirty.store(true, Ordering::Relaxed);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Writes the run file (atomically: temporary file, fdatasync, rename).
    fn write_run_file(&self) -> Result<()> {
        let bytes = {
            let idx = read(&self.idx);
            let Some(run) = idx.run.clone() else {
                return Ok(());
            };
            let segs = read(&self.segs);
            let mut segments = Vec::with_capacity(run.segs.len());
            for &id in &run.segs {
                let s = find_in(&segs, u64::from(id));
                let Some(Offsets::Sealed(ef)) = s.as_ref().map(|s| &s.offsets) else {
                    return Err(StoreError::Config(format!(
                        "segment {id:016x} of the index run is not sealed"
                    )));
                };
                let s = s.as_ref().expect("checked above");
                segments.push(RunSegment {
                    id,
                    generation: s.generation,
                    garbage: s.garbage.load(Ordering::Relaxed),
                    offsets: ef.clone(),
                });
            }
            let covered: HashSet<u32> = run
                .segs
                .iter()
                .copied()
                .filter(|&id| run.covers(id))
                .collect();
            let older = idx
                .older
                .iter()
                .flat_map(|(&(k, a), v)| v.iter().map(move |&l| (k, a, l)))
                .filter(|(_, _, l)| covered.contains(&l.seg))
                .collect();
            checkpoint::encode_run(&RunFile {
                sequence: self.run_seq.load(Ordering::Relaxed),
                run,
                segments,
                older,
            })
        };
        write_file_atomic(&self.devices[0].path.join(RUN_FILE), &bytes)
    }

    /// Whether the map of recent versions is due to be merged into the run.
    fn merge_due(&self) -> bool {
        let idx = read(&self.idx);
        let run = idx.run.as_ref().map_or(0, |r| r.entry_count());
        let recent = idx.recent.len() as u64;
        recent >= self.cfg.merge_min_objects.max(run / 4)
            && read(&self.segs)
                .iter()
                .any(|s| !s.is_active() && !idx.run.as_ref().is_some_and(|r| r.covers(s.id as u32)))
    }

    /// Builds a new run over every sealed segment: the identities come from
    /// their checkpoint files, filtered by what the index still holds; the
    /// newest version of each identity gets the run's slot, the others go
    /// to the map of older versions. Compactions wait meanwhile; GETs and
    /// PUTs go on (PUTs land in active segments, which the run leaves out).
    fn merge(&self) -> Result<()> {
        let _m = lock(&self.maintenance);
        let sealed: Vec<Arc<Segment>> = read(&self.segs)
            .iter()
            .filter(|s| !s.is_active())
            .cloned()
            .collect();
        // After the snapshot: every segment in it has its final checkpoint.
        self.write_checkpoints()?;
        if sealed.is_empty() {
            return Ok(());
        }
        let mut versions: Vec<(u64, u32, Loc)> = Vec::new();
        let mut max_needles = 1u64;
        for s in &sealed {
            let path = s.index_path();
            let bytes = std::fs::read(&path).map_err(StoreError::io("reading", &path))?;
            let (h, body) = checkpoint::parse(&bytes)
                .map_err(|e| s.corrupt(0, format!("checkpoint {}: {e}", path.display())))?;
            let ck = checkpoint::decode_active(&h, body)
                .map_err(|e| s.corrupt(0, format!("checkpoint {}: {e}", path.display())))?;
            if h.generation != s.generation || h.covered_len != s.len.load(Ordering::Acquire) {
                // Not the segment's final checkpoint yet: merge later.
                return Err(s.corrupt(0, "checkpoint does not cover the sealed segment"));
            }
            max_needles = max_needles.max(s.needle_count() + 1);
            let idx = read(&self.idx);
            for (&(k, a), &ord) in &ck.map {
                let loc = Loc {
                    seg: s.id as u32,
                    ord,
                };
                if idx.is_indexed(k, a, loc) {
                    versions.push((k, a, loc));
                }
            }
        }
        // Newest version of each identity first.
        versions.sort_unstable_by(|x, y| (x.0, x.1).cmp(&(y.0, y.1)).then(y.2.seg.cmp(&x.2.seg)));
        let mut primary: Vec<(u64, u32, Loc)> = Vec::with_capacity(versions.len());
        let mut older: Vec<(u64, u32, Loc)> = Vec::new();
        for v in versions {
            if primary.last().is_some_and(|p| (p.0, p.1) == (v.0, v.1)) {
                older.push(v);
            } else {
                primary.push(v);
            }
        }
        let mut seg_ids: Vec<u32> = sealed.iter().map(|s| s.id as u32).collect();
        seg_ids.sort_unstable();
        let covered: HashSet<u32> = seg_ids.iter().copied().collect();
        let seq = self.run_seq.load(Ordering::Relaxed) + 1;
        let run = Run::build(
            &primary,
            seg_ids,
            max_needles,
            mix64(seq ^ 0x006e_6f64_6572_756e),
            self.cfg.fingerprint_bits,
        )
        .map_err(|_| StoreError::Config("could not build the node index's run".into()))?;
        {
            let mut idx = write(&self.idx);
            idx.forget_map_entries(&covered);
            idx.run = Some(run);
            for (k, a, l) in older {
                idx.older.entry((k, a)).or_default().push(l);
            }
        }
        self.run_seq.store(seq, Ordering::Relaxed);
        self.run_dirty.store(true, Ordering::Relaxed);
        self.counters.merges.fetch_add(1, Ordering::Relaxed);
        self.write_checkpoints()
    }

    /// Whether needle `ord` of `seg` (with header `h`) is the live version of
    /// its identity.
    fn needle_is_live(&self, seg: &Segment, ord: u32, h: &NeedleHeader) -> Result<bool> {
        if h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0 {
            return Ok(false);
        }
        let loc = Loc {
            seg: seg.id as u32,
            ord,
        };
        if !read(&self.idx).is_indexed(h.key, h.alt_key, loc) {
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
        let src_needles = src.needle_count();
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
        // (source ordinal, new ordinal, new offset, identity, indexed when
        // copied) of every needle kept; identities of those dropped.
        let mut kept: Vec<KeptNeedle> = Vec::new();
        let mut dropped: Vec<(u32, (u64, u32))> = Vec::new();
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
                    if src.needle(this).map(|x| x.0) != Some(*offset) {
                        return Err(src.corrupt(*offset, "needle offsets disagree with the index"));
                    }
                    let id_of = (header.key, header.alt_key);
                    let src_loc = Loc {
                        seg: id as u32,
                        ord: this,
                    };
                    let keep = !compacting || self.needle_is_live(&src, this, header)?;
                    if !keep {
                        dropped.push((this, id_of));
                    }
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
                        let (new_ord, prev) = new_idx.push(header.key, header.alt_key, len);
                        let indexed = header.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0
                            && read(&self.idx).is_indexed(header.key, header.alt_key, src_loc);
                        if !indexed {
                            // Not the live version: copied (a move keeps
                            // everything) but not indexed.
                            match prev {
                                Some(p) => new_idx.map.insert(id_of, p),
                                None => new_idx.map.remove(&id_of),
                            };
                        }
                        kept.push((this, new_ord, new_off, id_of, indexed));
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
            // Deletes (and supersedes) that reached the source during the
            // copy: their flag words go to the new file too.
            let mut flagged = false;
            let gone: Vec<usize> = {
                let idx = read(&self.idx);
                kept.iter()
                    .enumerate()
                    .filter(|(_, k)| {
                        k.4 && !idx.is_indexed(
                            k.3 .0,
                            k.3 .1,
                            Loc {
                                seg: id as u32,
                                ord: k.0,
                            },
                        )
                    })
                    .map(|(i, _)| i)
                    .collect()
            };
            for &i in &gone {
                let (src_ord, new_ord, new_off, id_of, _) = kept[i];
                let Some((so, _)) = src.needle(src_ord) else {
                    continue;
                };
                let mut fl = [0u8; 4];
                pread_exact(&src.file, &mut fl, so + FLAGS_OFFSET)
                    .map_err(StoreError::io("reading", &src.path))?;
                wr(&fl, new_off + FLAGS_OFFSET)?;
                flagged = true;
                if new_idx.map.get(&id_of) == Some(&new_ord) {
                    new_idx.map.remove(&id_of);
                }
            }
            if flagged {
                out.sync_data()
                    .map_err(StoreError::io("syncing", &tmp_path))?;
            }
            let units: Vec<u64> = new_idx.offsets.iter().map(|&o| u64::from(o)).collect();
            let ef = EliasFano::new(&units, units.last().copied().unwrap_or(0))
                .ok_or_else(|| src.corrupt(0, "needle offsets decrease"))?;
            write_file_atomic(
                &dev.path.join(index_file_name(id, generation)),
                &checkpoint::encode_active(id, generation, &new_idx),
            )?;
            std::fs::rename(&tmp_path, &final_path)
                .map_err(StoreError::io("renaming", &tmp_path))?;
            sync_dir(&dev.path)?;
            let file = segment::open_rw(&final_path)?;
            if self.cfg.random_access_advice {
                advise_random(&file);
            }
            let live = new_idx.live_bytes();
            let seg = Arc::new(Segment {
                id,
                generation,
                device: dev_i,
                tier: dev.tier,
                path: final_path.clone(),
                file: Arc::new(file),
                created_unix_ns: src.created_unix_ns,
                offsets: Offsets::Sealed(ef),
                pending_keys: Mutex::new(None),
                len: AtomicU64::new(new_len),
                garbage: AtomicU64::new(new_len.saturating_sub(SUPERBLOCK_LEN as u64 + live)),
                lock: Mutex::new(()),
                retired: AtomicBool::new(false),
                dirty: AtomicBool::new(false),
            });
            {
                let mut idx = write(&self.idx);
                let at = |ord| Loc {
                    seg: id as u32,
                    ord,
                };
                // Removals first: a dropped needle's old ordinal may be a
                // kept needle's new one.
                for &(src_ord, (k, a)) in &dropped {
                    idx.remove(k, a, at(src_ord));
                }
                for &(src_ord, new_ord, _, (k, a), was) in &kept {
                    if was && src_ord != new_ord {
                        idx.renumber(k, a, at(src_ord), at(new_ord));
                    }
                }
                if idx.run.as_ref().is_some_and(|r| r.covers(id as u32)) {
                    self.run_dirty.store(true, Ordering::Relaxed);
                }
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
            needles_before: src_needles,
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
