//! The prepared space of active segments: zeros written and synced ahead
//! of their needles by the process's zeroing thread, so that a batch's
//! fdatasync overwrites blocks the file has instead of growing it, and the
//! O_DIRECT path of large batches into those zeros.

use super::handle::Segment;
use super::locks::lock;
use super::Inner;
use crate::segment;
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};

impl Inner {
    /// Queues zeros past the active segment `seg`'s last needle (`end`)
    /// when fewer than `lead` bytes are prepared ahead of it: min(half of
    /// `prepare_ahead`, max(4 MiB, 16 batches of `batch` bytes)). The job
    /// prepares up to `2 × lead` ahead, never past the segment size.
    pub(super) fn prepare_ahead(&self, seg: &Arc<Segment>, end: u64, batch: u64) {
        let most = self.cfg.prepare_ahead;
        if most == 0 {
            return;
        }
        let lead = batch.saturating_mul(16).max(4 << 20).min(most / 2).max(1);
        let target = end.saturating_add(2 * lead).min(self.cfg.segment_size);
        let prepared = seg.tail.prepared.load(Ordering::Acquire);
        if target <= prepared || prepared.saturating_sub(end) >= lead {
            return;
        }
        if seg.tail.queued.swap(true, Ordering::AcqRel) {
            return;
        }
        let seg = seg.clone();
        let dir = self.devices[seg.device].path.clone();
        prepare::submit(Box::new(move || {
            seg.tail.queued.store(false, Ordering::Release);
            prepare_tail(&seg, target, &dir);
        }));
    }
}

/// Writes zeros into `seg`'s file from its prepared end up to `target`
/// (the zeroing thread's job), `PREPARE_CHUNK` bytes at a time, each chunk
/// synced and then published, with the tail lock released in between: a
/// batch that outruns the zeros waits for one chunk at most. Skipped when
/// the segment takes no more (sealed, closed), on a file system in RAM, or
/// when the file system would keep less than 1/16 of its size free; a
/// failed write cuts what it added and turns preparation off for the
/// segment.
fn prepare_tail(seg: &Segment, target: u64, dir: &std::path::Path) {
    let from = seg.tail.prepared.load(Ordering::Acquire);
    let roomy = rustix::fs::statvfs(dir).is_ok_and(|st| {
        let free = st.f_bavail.saturating_mul(st.f_frsize);
        let size = st.f_blocks.saturating_mul(st.f_frsize);
        room_to_prepare(free, size, target.saturating_sub(from))
    });
    if !roomy || in_memory(dir) {
        return;
    }
    let Ok(file) = seg.file() else { return };
    // The zeros go to the device straight from one buffer (O_DIRECT), not
    // copied into the page cache first: that copy, and the pages it
    // dirties, cost the server as much CPU as the needles' own (measured,
    // docs/benchmarks.md). Where O_DIRECT is refused, they are written
    // through the page cache.
    let direct = seg.direct();
    loop {
        let mut done = lock(&seg.tail.lock);
        let from = seg.tail.prepared.load(Ordering::Acquire);
        if *done || target <= from || seg.retired.load(Ordering::Acquire) {
            return;
        }
        let to = target.min(from + PREPARE_CHUNK);
        let res = write_zeros(&file, direct, from, to).and_then(|_| strata_fs::sync_data(&file));
        match res {
            Ok(()) => seg.tail.prepared.store(to, Ordering::Release),
            Err(_) => {
                let _ = strata_fs::set_len(&file, from);
                *done = true;
                return;
            }
        }
    }
}

/// Bytes of zeros written and synced at a time by the zeroing thread.
const PREPARE_CHUNK: u64 = 4 << 20;

/// O_DIRECT's unit here: buffers, offsets and lengths are multiples of it.
pub(super) const DIRECT_BLOCK: u64 = 4096;

/// Batches of at least this many bytes are written with O_DIRECT when
/// their blocks are prepared (`write_direct`); smaller ones through the
/// page cache, where a batch's copy costs less than rewriting the block it
/// shares with the last batch. 512 KiB (only a write-heavy load's batches)
/// was tried, to keep more needles cached for the reads after writes, and
/// measured worse in every side-by-side cell but one, equal there
/// (docs/benchmarks.md, *Prepared space*).
pub(super) const DIRECT_MIN_BATCH: u64 = 64 << 10;

thread_local! {
    /// A writer thread's buffer for O_DIRECT batches (block-aligned part
    /// used), kept between batches: its pages are touched once.
    static DIRECT_BUF: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Where the first `DIRECT_BLOCK`-aligned byte of `buf` is (O_DIRECT's
/// buffer alignment).
fn block_aligned(buf: &[u8]) -> usize {
    let p = buf.as_ptr() as u64;
    (p.next_multiple_of(DIRECT_BLOCK) - p) as usize
}

/// Writes a batch (`parts`, the bytes of `[start, end)`) of `seg` with
/// O_DIRECT through `direct`, whole blocks from `start`'s block to `end`'s:
/// the bytes before `start` in its block are read back first (the last
/// batch's needles, with any flag written since), those after `end` are
/// the prepared zeros. The segment's lock is held meanwhile, so that no
/// flag write lands between that read and the write. Same bytes on disk
/// as the page-cache path.
pub(super) fn write_direct(
    seg: &Segment,
    file: &File,
    direct: &File,
    parts: &[&[u8]],
    start: u64,
    end: u64,
) -> std::io::Result<()> {
    let a = start / DIRECT_BLOCK * DIRECT_BLOCK;
    let b = end.next_multiple_of(DIRECT_BLOCK);
    DIRECT_BUF.with(|cell| {
        let mut v = cell.borrow_mut();
        let need = (b - a + DIRECT_BLOCK) as usize;
        if v.len() < need {
            *v = vec![0u8; need.next_power_of_two()];
        }
        let skip = block_aligned(&v);
        let buf = &mut v[skip..][..(b - a) as usize];
        let _g = lock(&seg.lock);
        let head = (start - a) as usize;
        let kept = lock(&seg.tail.last_block).take();
        let kept = match kept {
            Some((at, block)) if at == a && head > 0 => {
                buf[..head].copy_from_slice(&block[..head]);
                Some(block)
            }
            other => {
                if head > 0 {
                    segment::pread_exact(file, &mut buf[..head], a)?;
                }
                other.map(|(_, block)| block)
            }
        };
        let mut at = head;
        for p in parts {
            buf[at..at + p.len()].copy_from_slice(p);
            at += p.len();
        }
        buf[at..].fill(0);
        strata_fs::write_all_at(direct, buf, a)?;
        if !end.is_multiple_of(DIRECT_BLOCK) {
            let last = &buf[buf.len() - DIRECT_BLOCK as usize..];
            let mut block = kept.unwrap_or_default();
            block.clear();
            block.extend_from_slice(last);
            *lock(&seg.tail.last_block) = Some((b - DIRECT_BLOCK, block));
        }
        Ok(())
    })
}

/// Writes zeros to `[from, to)` of `file` (at most `PREPARE_CHUNK` bytes):
/// the whole 4 KiB blocks through `direct` (the file opened with
/// O_DIRECT) if given, the unaligned ends (and everything without
/// `direct`) through the page cache. Should an O_DIRECT write fail
/// (a file system that takes it only for some alignments), the page cache
/// takes the rest.
fn write_zeros(file: &File, direct: Option<&File>, from: u64, to: u64) -> std::io::Result<()> {
    static ZEROS: OnceLock<Vec<u8>> = OnceLock::new();
    let buf = ZEROS.get_or_init(|| vec![0u8; (PREPARE_CHUNK + DIRECT_BLOCK) as usize]);
    let zeros = &buf[block_aligned(buf)..][..PREPARE_CHUNK as usize];
    let a = from.next_multiple_of(DIRECT_BLOCK).min(to);
    let b = (to / DIRECT_BLOCK * DIRECT_BLOCK).max(a);
    if a > from {
        strata_fs::write_all_at(file, &zeros[..(a - from) as usize], from)?;
    }
    let mut at = a;
    if let Some(d) = direct.filter(|_| b > a) {
        if strata_fs::write_all_at(d, &zeros[..(b - a) as usize], a).is_ok() {
            at = b;
        }
    }
    if to > at {
        strata_fs::write_all_at(file, &zeros[..(to - at) as usize], at)?;
    }
    Ok(())
}

/// The most free space a file system must keep, beyond the zeros, for
/// the store to go on preparing space on it ([`room_to_prepare`]).
const PREPARE_KEEP_MAX: u64 = 4 << 30;

/// Whether `want` more bytes of zeros may be written on a file system of
/// `size` bytes with `free` free: if it keeps 1/16 of its size free after
/// them, or 4 GiB on one larger than 64 GiB. The zeros are at most
/// `2 × prepare_ahead` per active segment, and needles overwrite them; the
/// margin is for everything else the file system holds. Until 29 November
/// 2026 it was 1/16 whatever the size: a 252 GB volume with 15 GB free
/// stopped preparing, and its 64 KiB PUTs at 64 clients fell from 16,000
/// to 5,000–7,000 a second (docs/benchmarks.md), as a 16 TB disk would
/// have 1 TB before it was full.
fn room_to_prepare(free: u64, size: u64, want: u64) -> bool {
    free >= want.saturating_add((size / 16).min(PREPARE_KEEP_MAX))
}

/// Whether `dir` is on a file system in RAM (tmpfs, ramfs), where a sync
/// costs nothing and zeros written ahead would only take memory.
fn in_memory(dir: &std::path::Path) -> bool {
    const TMPFS_MAGIC: i64 = 0x0102_1994;
    const RAMFS_MAGIC: i64 = 0x8584_58f6;
    rustix::fs::statfs(dir).is_ok_and(|st| {
        // `f_type`'s width differs between targets (i64 on x86_64).
        #[allow(clippy::unnecessary_cast)]
        let t = st.f_type as i64;
        t == TMPFS_MAGIC || t == RAMFS_MAGIC
    })
}

/// The process's one zeroing thread: it prepares the active segments of
/// every store in the process, one job at a time (they share the devices).
mod prepare {
    use std::sync::mpsc::{channel, Sender};
    use std::sync::{Mutex, OnceLock};

    type Job = Box<dyn FnOnce() + Send>;

    static QUEUE: OnceLock<Mutex<Sender<Job>>> = OnceLock::new();

    /// Runs `job` on the zeroing thread (started on first use).
    pub(super) fn submit(job: Job) {
        let q = QUEUE.get_or_init(|| {
            let (tx, rx) = channel::<Job>();
            let spawned = std::thread::Builder::new()
                .name("strata-prepare".into())
                .spawn(move || {
                    while let Ok(job) = rx.recv() {
                        job();
                    }
                });
            // Without the thread the jobs are dropped unrun: segments then
            // grow by appending, as with preparation off.
            drop(spawned);
            Mutex::new(tx)
        });
        let _ = super::lock(q).send(job);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreConfig, Tier};
    use std::time::{Duration, Instant};

    /// Zeros are written ahead while the file system keeps 1/16 of its
    /// size free, or 4 GiB on a large one.
    #[test]
    fn prepared_space_needs_a_sixteenth_free_up_to_4_gib() {
        const G: u64 = 1 << 30;
        // A 32 GiB volume keeps 2 GiB.
        assert!(room_to_prepare(2 * G + (32 << 20), 32 * G, 32 << 20));
        assert!(!room_to_prepare(2 * G + (31 << 20), 32 * G, 32 << 20));
        // A 252 GB one and a 16 TB one keep 4 GiB, not 15.75 GB or 1 TB.
        assert!(room_to_prepare(5 * G, 252 * G, 32 << 20));
        assert!(room_to_prepare(5 * G, 16_000 * G, 32 << 20));
        assert!(!room_to_prepare(4 * G, 16_000 * G, 32 << 20));
        // Nothing to spare: never.
        assert!(!room_to_prepare(0, 0, 1));
        assert!(!room_to_prepare(u64::MAX - 1, 64 * G, u64::MAX));
    }

    /// Descriptors of this process open on segment files under `dir`
    /// (not the lock file).
    fn fds_under(dir: &std::path::Path) -> usize {
        std::fs::read_dir("/proc/self/fd")
            .unwrap()
            .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
            .filter(|p| p.starts_with(dir) && p.extension().is_some_and(|x| x == "seg"))
            .count()
    }

    /// The store's count of its open files (what the budget of
    /// `max_open_files` is held to) is every descriptor it holds,
    /// including each active segment's second one, opened with O_DIRECT
    /// for the prepared zeros and large batches, and closed with it.
    #[test]
    fn the_open_files_count_includes_the_direct_descriptors() {
        let dir = tempfile::tempdir().unwrap();
        if in_memory(dir.path()) {
            return; // no prepared space, so no O_DIRECT descriptor
        }
        let mut cfg = StoreConfig::new(dir.path(), Tier::Flash);
        cfg.segment_size = 4 << 20;
        cfg.auto_compaction = false;
        let store = Store::open(cfg).unwrap();
        let counted = |s: &Store| s.inner.fds.open.load(Ordering::Relaxed);
        let big = vec![7u8; 256 << 10];
        // Batches of 256 KiB into prepared space are written with
        // O_DIRECT: wait for the zeroing thread to prepare some, until the
        // active segment holds its O_DIRECT descriptor.
        let t = Instant::now();
        let mut k = 0u64;
        while !matches!(
            lock(&store.inner.devices[0].writer).tail.direct.get(),
            Some(Some(_))
        ) {
            store.put(Tier::Flash, k, 0, 1, &big).unwrap();
            k += 1;
            std::thread::sleep(Duration::from_millis(5));
            assert!(t.elapsed() < Duration::from_secs(20), "no O_DIRECT batch");
        }
        assert_eq!(counted(&store), fds_under(dir.path()));
        // Sealing drops the segment's tail and its descriptor; the next
        // active segment counts its own.
        for _ in 0..40 {
            store.put(Tier::Flash, k, 0, 1, &big).unwrap();
            k += 1;
        }
        assert!(store.segments().len() >= 2);
        store.checkpoint().unwrap();
        let t = Instant::now();
        while counted(&store) != fds_under(dir.path()) {
            // A zeroing job may hold a retired segment for a moment.
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "counted {}, open {}",
                counted(&store),
                fds_under(dir.path())
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
