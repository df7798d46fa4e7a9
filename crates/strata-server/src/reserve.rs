//! Space kept back on each disk device so that a full node can still
//! delete, and so free space again.
//!
//! A delete is a tombstone appended to its row's segment (docs/recovery.md,
//! "Row records"), and deleted space comes back only when compaction
//! rewrites a segment's live needles into a new generation: both need free
//! space, which a full volume does not have. So each disk device keeps
//! `DEVICE/space.reserve`, a file of zeros with its blocks allocated
//! (`fallocate`), that nothing else uses:
//!
//! 1. Writes fill the volume until they meet ENOSPC: 507 Insufficient
//!    Storage, the reserve untouched.
//! 2. A tombstone that meets ENOSPC releases the reserve (the file is cut
//!    to zero bytes) and is written again in the space it freed. From then
//!    on the device is *depleted*: every other write to its rows (puts,
//!    recovery copies, scrub repairs) answers 507 at once, so the freed
//!    space goes to tombstones and to the store's compaction, which
//!    reclaims the deleted needles.
//! 3. Once the filesystem has room for the whole reserve plus the slack
//!    (room for one compaction's new generation), [`Reserve::refill`]
//!    allocates the file again and writes are taken again.
//!
//! Crash safety: the file is the only state. A crash after a release
//! leaves it short, so the next start finds the device depleted and
//! refills it when there is room; a crash during a refill leaves it
//! partly allocated, which counts as short.

use std::fs::{File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// The reserve's file name in a device's directory.
pub const RESERVE_FILE: &str = "space.reserve";

/// The reserve of one disk device.
#[derive(Debug)]
pub struct Reserve {
    path: PathBuf,
    target: u64,
    slack: u64,
    depleted: AtomicBool,
    /// Times it was released (a metric; also shown in logs).
    releases: AtomicU64,
    lock: Mutex<()>,
}

/// The default reserve of a device of `fs_bytes` whose stores use
/// `segment_size` segments: two segments, at most 1/32 of the filesystem,
/// at least 256 KiB.
pub fn default_size(fs_bytes: u64, segment_size: u64) -> u64 {
    (2 * segment_size).min(fs_bytes / 32).max(256 << 10)
}

/// Free bytes a refill leaves: room for one compaction's new generation
/// (a segment, at most 1/16 of the filesystem).
pub fn default_slack(fs_bytes: u64, segment_size: u64) -> u64 {
    segment_size.min(fs_bytes / 16)
}

fn avail(dir: &Path) -> Option<u64> {
    rustix::fs::statvfs(dir)
        .ok()
        .map(|st| st.f_bavail.saturating_mul(st.f_frsize))
}

impl Reserve {
    /// The reserve of the device at `dir`: `target` bytes, refilled only
    /// while `slack` more bytes stay free. Creates (or grows) the file now
    /// when there is room; otherwise the device starts depleted and says
    /// so on standard error.
    pub fn open(dir: &Path, target: u64, slack: u64) -> Reserve {
        let r = Reserve {
            path: dir.join(RESERVE_FILE),
            target,
            slack,
            depleted: AtomicBool::new(true),
            releases: AtomicU64::new(0),
            lock: Mutex::new(()),
        };
        if !r.refill() {
            eprintln!(
                "strata server: {}: the volume has no room for the {} bytes kept back for deletes; new writes there answer 507 until there is",
                r.path.display(),
                target
            );
        }
        r
    }

    /// Its file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether it is in use (released and not refilled yet): writes other
    /// than tombstones are refused.
    pub fn is_depleted(&self) -> bool {
        self.depleted.load(Ordering::Acquire)
    }

    /// Times it was released since start.
    pub fn releases(&self) -> u64 {
        self.releases.load(Ordering::Relaxed)
    }

    fn allocated(&self) -> u64 {
        // Blocks really allocated, not the length (a sparse tail after a
        // crash or a file system without fallocate counts as missing).
        match std::fs::metadata(&self.path) {
            Ok(m) => {
                use std::os::unix::fs::MetadataExt;
                (m.blocks() * 512).min(m.len())
            }
            Err(_) => 0,
        }
    }

    /// Frees the reserve for tombstones and compaction (the device becomes
    /// depleted); returns the bytes freed.
    pub fn release(&self) -> u64 {
        let _g = match self.lock.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        self.depleted.store(true, Ordering::Release);
        let had = self.allocated();
        let cut = OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|f| {
                strata_fs::set_len(&f, 0)?;
                strata_fs::sync_all(&f)
            });
        if had > 0 && cut.is_ok() {
            self.releases.fetch_add(1, Ordering::Relaxed);
            eprintln!(
                "strata server: {}: the volume is full; released {} bytes kept back for deletes (new writes answer 507 until compaction has freed room for them again)",
                self.path.display(),
                had
            );
            had
        } else {
            0
        }
    }

    /// Allocates the reserve again when the filesystem has room for it and
    /// the slack; returns whether it is whole (writes are taken).
    pub fn refill(&self) -> bool {
        let _g = match self.lock.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let have = self.allocated();
        if have >= self.target {
            self.depleted.store(false, Ordering::Release);
            return true;
        }
        let Some(dir) = self.path.parent() else {
            return false;
        };
        let free = avail(dir).unwrap_or(0);
        if free < self.target - have + self.slack {
            self.depleted.store(true, Ordering::Release);
            return false;
        }
        match self.allocate() {
            Ok(()) => {
                self.depleted.store(false, Ordering::Release);
                true
            }
            Err(e) => {
                // Raced by other writers, or a file system without
                // fallocate that also refused zeros: retried later.
                eprintln!(
                    "strata server: {}: could not allocate the space kept back for deletes: {e}",
                    self.path.display()
                );
                self.depleted.store(true, Ordering::Release);
                false
            }
        }
    }

    fn allocate(&self) -> std::io::Result<()> {
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.path)?;
        let res =
            match rustix::fs::fallocate(&f, rustix::fs::FallocateFlags::empty(), 0, self.target) {
                Ok(()) => Ok(()),
                Err(rustix::io::Errno::OPNOTSUPP) => write_zeros(&f, self.target),
                Err(e) => Err(std::io::Error::from(e)),
            };
        if let Err(e) = res {
            // Give back what a half-done allocation took.
            let _ = strata_fs::set_len(&f, 0);
            return Err(e);
        }
        strata_fs::sync_all(&f)
    }
}

fn write_zeros(f: &File, len: u64) -> std::io::Result<()> {
    let chunk = vec![0u8; 1 << 16];
    let mut at = 0;
    while at < len {
        let n = (len - at).min(chunk.len() as u64) as usize;
        strata_fs::write_all_at(f, &chunk[..n], at)?;
        at += n as u64;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reserve_is_allocated_released_and_refilled() {
        let d = tempfile::tempdir().unwrap();
        let r = Reserve::open(d.path(), 1 << 20, 0);
        assert!(!r.is_depleted());
        assert!(r.allocated() >= 1 << 20);
        assert_eq!(r.release(), 1 << 20);
        assert!(r.is_depleted());
        assert_eq!(std::fs::metadata(r.path()).unwrap().len(), 0);
        assert!(r.refill());
        assert!(!r.is_depleted());
        // A reopened device finds its reserve whole.
        let again = Reserve::open(d.path(), 1 << 20, 0);
        assert!(!again.is_depleted());
    }

    #[test]
    fn a_reserve_the_volume_cannot_hold_starts_depleted() {
        let d = tempfile::tempdir().unwrap();
        let r = Reserve::open(d.path(), u64::MAX / 4, 0);
        assert!(r.is_depleted());
        assert_eq!(r.release(), 0);
    }

    #[test]
    fn default_sizes_follow_segments_and_volume() {
        assert_eq!(default_size(64 << 20, 1 << 20), 2 << 20);
        assert_eq!(default_size(64 << 20, 64 << 20), 2 << 20);
        assert_eq!(default_size(4 << 40, 64 << 20), 128 << 20);
        assert_eq!(default_size(1 << 20, 64 << 20), 256 << 10);
        assert_eq!(default_slack(64 << 20, 1 << 20), 1 << 20);
        assert_eq!(default_slack(64 << 20, 64 << 20), 4 << 20);
    }
}
