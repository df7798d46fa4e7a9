//! A segment as the store holds it: its file (opened on demand, within the
//! store's budget of open files), its needles' offsets (an active segment's
//! growing table, or a sealed segment's index), its prepared tail, and the
//! counted reads of it.

use super::locks::{lock, read, write};
use super::report::CounterCells;
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::needle::{self, HEADER_LEN};
use crate::format::superblock::{self, Tier};
use crate::index::SealedSegment;
use crate::segment::{self, index_file_name, Scanner};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// An identity and the ordinal of its live needle in a segment.
pub(super) type Entry = (u64, u32, u32);

/// An active segment's needles: offsets (8-byte units, then the end). The
/// identities are not kept for good: RAM holds only those of the needles
/// written since the segment's last checkpoint (`ids`); a checkpoint (and
/// the sealed checkpoint at seal) reads the older ones back from the
/// previous checkpoint file and keeps those the recent table still places
/// in this segment.
#[derive(Debug, Default)]
pub(super) struct ActiveSeg {
    pub(super) offsets: Vec<u32>,
    /// Needles whose index update is done: a checkpoint covers only these
    /// (the others are found as orphans by a scan after a crash).
    pub(super) installed: usize,
    /// The checkpoint on disk lists the identities of needles below this
    /// ordinal (0: RAM has them all, in `ids`).
    pub(super) ids_base: usize,
    /// (key, alt, ordinal) of the needles at `ids_base` and above, in
    /// ordinal order.
    pub(super) ids: Vec<Entry>,
}

impl ActiveSeg {
    pub(super) fn needle(&self, ord: u32) -> Option<(u64, u64)> {
        let a = u64::from(*self.offsets.get(ord as usize)?);
        let b = u64::from(*self.offsets.get(ord as usize + 1)?);
        Some((a * 8, (b - a) * 8))
    }
    pub(super) fn end(&self) -> u64 {
        u64::from(self.offsets.last().copied().unwrap_or(0)) * 8
    }
    pub(super) fn push(&mut self, key: u64, alt: u32, len: u64) -> u32 {
        let ord = (self.offsets.len() - 1) as u32;
        let end = (self.end() + len) / 8;
        if self.offsets.len() == self.offsets.capacity() {
            // Grow by a quarter rather than double: the offsets are most
            // of an active segment's RAM after the recent table.
            let more = (self.offsets.len() / 4).max(1024);
            self.offsets.reserve_exact(more);
        }
        self.offsets.push(end as u32);
        self.ids.push((key, alt, ord));
        ord
    }
    fn heap_bytes(&self) -> usize {
        self.offsets.capacity() * 4 + self.ids.capacity() * std::mem::size_of::<Entry>()
    }
}

pub(super) enum Body {
    Active(RwLock<ActiveSeg>),
    Sealed(SealedSegment),
}

/// How many segment files the store keeps open: an active segment's file
/// stays open, a sealed one's is opened on use and closed again (least
/// recently used first) once more than `cap` are open, so that a node with
/// more segments than its file-descriptor limit serves them all.
pub(super) struct FdBudget {
    pub(super) open: AtomicUsize,
    pub(super) cap: usize,
    /// Clock hand of the eviction sweep over the segment table.
    pub(super) hand: AtomicUsize,
    random_advice: bool,
}

impl FdBudget {
    pub(super) fn new(cfg: &StoreConfig) -> FdBudget {
        let cap = if cfg.max_open_files > 0 {
            cfg.max_open_files
        } else {
            let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile)
                .current
                .unwrap_or(1 << 20);
            (soft / 2).clamp(64, 1 << 20) as usize
        };
        FdBudget {
            open: AtomicUsize::new(0),
            cap,
            hand: AtomicUsize::new(0),
            random_advice: cfg.random_access_advice,
        }
    }
}

/// A segment's file, opened on demand (see [`FdBudget`]).
pub(super) struct SegFile {
    pub(super) handle: RwLock<Option<Arc<File>>>,
    /// Used since the eviction sweep last passed (second chance).
    pub(super) used: AtomicBool,
    pub(super) budget: Arc<FdBudget>,
}

impl SegFile {
    pub(super) fn new(file: Option<Arc<File>>, budget: &Arc<FdBudget>) -> SegFile {
        if file.is_some() {
            budget.open.fetch_add(1, Ordering::Relaxed);
        }
        SegFile {
            handle: RwLock::new(file),
            used: AtomicBool::new(true),
            budget: budget.clone(),
        }
    }

    fn get(&self, path: &std::path::Path) -> Result<Arc<File>> {
        self.used.store(true, Ordering::Relaxed);
        if let Some(f) = read(&self.handle).as_ref() {
            return Ok(f.clone());
        }
        let mut h = write(&self.handle);
        if let Some(f) = h.as_ref() {
            return Ok(f.clone());
        }
        let f = Arc::new(segment::open_rw(path)?);
        if self.budget.random_advice {
            advise_random(&f);
        }
        *h = Some(f.clone());
        self.budget.open.fetch_add(1, Ordering::Relaxed);
        Ok(f)
    }

    /// Closes the handle (readers holding a clone finish on it).
    pub(super) fn close(&self) {
        if write(&self.handle).take().is_some() {
            self.budget.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for SegFile {
    fn drop(&mut self) {
        if read(&self.handle).is_some() {
            self.budget.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

pub(super) struct Segment {
    pub(super) id: u64,
    pub(super) generation: u64,
    pub(super) device: usize,
    pub(super) tier: Tier,
    pub(super) path: PathBuf,
    pub(super) file: SegFile,
    pub(super) created_unix_ns: u64,
    /// Place in the node index's segment table (kept by seal and move, new
    /// after a compaction, which renumbers needles).
    pub(super) slot: u32,
    pub(super) body: Body,
    pub(super) len: AtomicU64,
    pub(super) garbage: AtomicU64,
    /// Serialises in-place flag writes with the swap of a compaction, move
    /// or seal.
    pub(super) lock: Mutex<()>,
    /// Set once a newer handle replaced this one (seal, compaction, move).
    pub(super) retired: AtomicBool,
    /// The newer handle and, for a compaction, each old ordinal's new one
    /// (`u32::MAX`: dropped); a flag write that finds this handle retired
    /// follows it.
    pub(super) moved_to: OnceLock<(Arc<Segment>, Option<Vec<u32>>)>,
    /// The on-disk checkpoint is behind.
    pub(super) dirty: AtomicBool,
    /// Identity → ordinal entries of a sealed segment whose checkpoint has
    /// not been written yet (the RAM keeps no keys of sealed segments).
    pub(super) pending: Mutex<Option<Vec<(u64, u32, u32)>>>,
    /// The segment's format version (its superblock's): from version 2 its
    /// needles carry the batch end (`needle::BATCH_END`), from version 3
    /// their flags are coded (`needle::FlagCode`). A version-1 active
    /// segment takes no batch, and is sealed before one is written into it
    /// (`put_batch_on`); an empty active segment of an older version is
    /// upgraded to this one in place (`upgrade_empty_segment`).
    pub(super) version: AtomicU32,
    /// An active segment's prepared space: zeros written ahead of its
    /// needles (`StoreConfig::prepare_ahead`).
    pub(super) tail: Tail,
}

/// The file bytes of an active segment past its last needle that are
/// written (zeros) and synced, so that a batch's `fdatasync` overwrites
/// blocks the file has instead of growing it (a sync that grows a file
/// also commits the file system's journal). Batches are written below
/// `prepared` without `lock`; zeros are written at `prepared` and above,
/// and a batch that goes past `prepared` is written, only while holding
/// it, so the two never touch the same bytes.
pub(super) struct Tail {
    /// Length of the file: the needles, then the zeros.
    pub(super) prepared: AtomicU64,
    /// True once the segment takes no more zeros (sealed, closed, or a
    /// zeroing failed).
    pub(super) lock: Mutex<bool>,
    /// A zeroing job for this segment is queued.
    pub(super) queued: AtomicBool,
    /// The file opened again with O_DIRECT (None where that is refused),
    /// for the zeros and for large batches written into them; counted in
    /// the store's open files while it is open.
    pub(super) direct: OnceLock<Option<(File, Arc<FdBudget>)>>,
    /// The last block an O_DIRECT batch wrote, when the batch ended inside
    /// it: (its offset, its bytes as the file holds them). The next batch
    /// begins in that block and must write it whole again; an O_DIRECT
    /// write drops the block from the page cache, so without this copy
    /// each batch would first read it back from the device. Dropped by
    /// every other write to the segment (a flag, a buffered batch), whose
    /// bytes the copy would lack.
    pub(super) last_block: Mutex<Option<(u64, Vec<u8>)>>,
}

impl Tail {
    /// A tail whose file ends at `len` (the last needle's end).
    pub(super) fn at(len: u64) -> Tail {
        Tail {
            prepared: AtomicU64::new(len),
            lock: Mutex::new(false),
            queued: AtomicBool::new(false),
            direct: OnceLock::new(),
            last_block: Mutex::new(None),
        }
    }

    /// The segment file `path` opened for O_DIRECT writes, once, and
    /// counted in `budget` until the tail is dropped.
    fn direct(&self, path: &std::path::Path, budget: &Arc<FdBudget>) -> Option<&File> {
        self.direct
            .get_or_init(|| {
                use std::os::unix::fs::OpenOptionsExt;
                let f = std::fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32)
                    .open(path)
                    .ok()?;
                budget.open.fetch_add(1, Ordering::Relaxed);
                Some((f, budget.clone()))
            })
            .as_ref()
            .map(|(f, _)| f)
    }

    /// Takes no more zeros and cuts those past `len` (the segment's last
    /// needle), synced: what a seal or a close leaves is exactly the
    /// needles. Waits for a zeroing in flight.
    pub(super) fn finish(&self, file: &File, len: u64, path: &std::path::Path) -> Result<()> {
        let mut done = lock(&self.lock);
        *done = true;
        if self.prepared.load(Ordering::Acquire) > len {
            strata_fs::set_len(file, len)
                .and_then(|_| strata_fs::sync_data(file))
                .map_err(StoreError::io("cutting the prepared space of", path))?;
            self.prepared.store(len, Ordering::Release);
        }
        Ok(())
    }
}

impl Drop for Tail {
    fn drop(&mut self) {
        if let Some(Some((_, budget))) = self.direct.get() {
            budget.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Segment {
    /// Whether the segment's needles carry the batch end (version 2 on).
    pub(super) fn marks_batches(&self) -> bool {
        self.version.load(Ordering::Relaxed) >= superblock::VERSION_2
    }

    /// How the segment's needles write their flags word.
    pub(super) fn flag_code(&self) -> needle::FlagCode {
        needle::FlagCode::of_version(self.version.load(Ordering::Relaxed))
    }

    /// A scanner over `[start, end)` of the segment's file.
    pub(super) fn scanner(&self, start: u64, end: u64, with_data: bool) -> Result<Scanner> {
        Ok(Scanner::new(
            self.file()?,
            &self.path,
            start,
            end,
            with_data,
            self.flag_code(),
        ))
    }

    /// The segment's file opened for O_DIRECT writes ([`Tail::direct`]).
    pub(super) fn direct(&self) -> Option<&File> {
        self.tail.direct(&self.path, &self.file.budget)
    }

    pub(super) fn needle(&self, ord: u32) -> Option<(u64, u64)> {
        match &self.body {
            Body::Active(a) => read(a).needle(ord),
            Body::Sealed(s) => s.needle(ord),
        }
    }

    pub(super) fn is_deleted(&self, ord: u32) -> bool {
        match &self.body {
            Body::Active(_) => false,
            Body::Sealed(s) => s.is_deleted(ord),
        }
    }

    pub(super) fn is_active(&self) -> bool {
        matches!(self.body, Body::Active(_))
    }

    pub(super) fn needle_count(&self) -> u64 {
        match &self.body {
            Body::Active(a) => read(a).offsets.len().saturating_sub(1) as u64,
            Body::Sealed(s) => s.needle_count(),
        }
    }

    pub(super) fn file(&self) -> Result<Arc<File>> {
        self.file.get(&self.path)
    }

    pub(super) fn pread(&self, offset: u64, len: u64, counters: &CounterCells) -> Result<Vec<u8>> {
        let (buf, calls) = crate::fresh::read_at(&*self.file()?, len as usize, offset)
            .map_err(StoreError::io("reading", &self.path))?;
        counters.read(calls, len);
        Ok(buf)
    }

    /// [`Segment::pread`] of `HEADER_LEN + len` bytes at `offset`: the
    /// needle header into `head`, the `len` bytes after it returned (one
    /// device read; the data is never moved to drop the header). With
    /// `nowait`, only from the page cache ([`crate::fresh::read_split`]):
    /// `None` when it does not hold all of it.
    pub(super) fn pread_split(
        &self,
        offset: u64,
        head: &mut [u8; HEADER_LEN],
        len: u64,
        nowait: bool,
        counters: &CounterCells,
    ) -> Result<Option<Vec<u8>>> {
        match crate::fresh::read_split(&*self.file()?, head, len as usize, offset, nowait)
            .map_err(StoreError::io("reading", &self.path))?
        {
            crate::fresh::Split::Read(buf, calls) => {
                counters.read(calls, HEADER_LEN as u64 + len);
                Ok(Some(buf))
            }
            crate::fresh::Split::NotCached => Ok(None),
        }
    }

    pub(super) fn corrupt(&self, offset: u64, reason: impl ToString) -> StoreError {
        StoreError::Corrupt {
            segment: self.id,
            path: self.path.clone(),
            offset,
            reason: reason.to_string(),
        }
    }

    pub(super) fn index_path(&self) -> PathBuf {
        self.path
            .with_file_name(index_file_name(self.id, self.generation))
    }

    pub(super) fn garbage_ratio(&self) -> f64 {
        let len = self.len.load(Ordering::Relaxed).max(1);
        (self.garbage.load(Ordering::Relaxed) as f64 / len as f64).min(1.0)
    }

    pub(super) fn heap_bytes(&self) -> u64 {
        let own = std::mem::size_of::<Segment>() + self.path.as_os_str().len();
        let body = match &self.body {
            Body::Active(a) => read(a).heap_bytes(),
            Body::Sealed(s) => s.heap_bytes(),
        };
        (own + body) as u64
    }
}

pub(super) fn advise_random(file: &File) {
    // Advice only: failure changes performance, never correctness.
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random);
}
