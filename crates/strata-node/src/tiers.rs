//! What the node's tiers share: which reads the RAM cache admits, the
//! stratified write draw, the flash overflow rule, the LRU mover's
//! reference bits and re-append, the shared part's name, bucket names and
//! the flash capacity default.

use rand::Rng;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use strata_store::{PutItem, Store, StoreError, StoredNeedle, Tier};

/// Which objects the RAM cache may admit (Haystack §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamAdmission {
    /// Every object read from flash or disk.
    All,
    /// Only objects in write-enabled, recently written segments (the active
    /// segment of a device, or one sealed less than the recent window ago):
    /// Haystack's rule, since those are read most.
    Recent,
}

/// The write-probability draw of one workload, stratified: writes are
/// taken in blocks of [`DRAW_BLOCK`], and in each block a random subset of
/// `p × DRAW_BLOCK` (rounded at random) goes to flash. Each write still goes
/// to flash with probability `p` (Janus §7), but the fraction that does is
/// exact over every block instead of binomial, so a workload's flash hit
/// ratio does not swing with the luck of the draw.
#[derive(Default)]
pub struct WriteDraw {
    p: f64,
    left: u32,
    flash_left: u32,
}

const DRAW_BLOCK: u32 = 32;

impl WriteDraw {
    /// Whether the next write goes to flash, under write probability `p`.
    pub fn next(&mut self, p: f64, rng: &mut impl Rng) -> bool {
        if p >= 1.0 {
            return true;
        }
        if p <= 0.0 {
            return false;
        }
        if self.left == 0 || self.p != p {
            let want = p * DRAW_BLOCK as f64;
            let whole = want.floor();
            let extra = rng.random::<f64>() < want - whole;
            self.p = p;
            self.left = DRAW_BLOCK;
            self.flash_left = whole as u32 + extra as u32;
        }
        let flash = rng.random_range(0..self.left) < self.flash_left;
        self.left -= 1;
        if flash {
            self.flash_left -= 1;
        }
        flash
    }
}

/// Whether flash holding `have` bytes against an allocation of `limit` is
/// so far over (the mover lags far behind) that a write drawn for flash
/// goes to disk instead (Colossus does the same when flash is full, Janus
/// §8.1): over twice the allocation and over it by four segments.
pub fn flash_overflowing(limit: u64, have: u64, segment_bytes: u64) -> bool {
    limit == 0 || have > limit.saturating_mul(2).max(limit + 4 * segment_bytes)
}

/// One bit per object (hashed): set when a flash-resident object is read,
/// cleared when the LRU mover looks at it (CLOCK's reference bit).
pub struct HotBits {
    bits: Vec<AtomicU64>,
}

impl HotBits {
    /// `2^bits_log2` bits, all clear.
    pub fn new(bits_log2: u32) -> HotBits {
        HotBits {
            bits: (0..(1usize << bits_log2) / 64)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    fn slot(&self, k: u64) -> (usize, u64) {
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = (h >> 32) as usize % (self.bits.len() * 64);
        (i / 64, 1u64 << (i % 64))
    }
    /// Marks `k` as read.
    pub fn set(&self, k: u64) {
        let (w, m) = self.slot(k);
        if self.bits[w].load(Relaxed) & m == 0 {
            self.bits[w].fetch_or(m, Relaxed);
        }
    }
    /// Whether `k` was read since the last call; clears the bit.
    pub fn take(&self, k: u64) -> bool {
        let (w, m) = self.slot(k);
        self.bits[w].fetch_and(!m, Relaxed) & m != 0
    }
}

/// Name of the store that holds every workload the plan does not list.
/// Bucket and workload names cannot start with `_`, so it names no bucket.
pub const SHARED: &str = "_shared";

/// Id of the shared store (no trace workload has it).
pub const SHARED_ID: u32 = u32::MAX;

/// Whether `s` is a valid bucket or workload name: 1 to 63 of
/// `[A-Za-z0-9._-]`, not starting with `.` or `_` (reserved).
pub fn valid_bucket(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('.')
        && !s.starts_with('_')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Re-appends to flash those of `needles` (read from `segment`) that are
/// still live (the LRU mover's re-append, run by a store's writer on every
/// server).
pub fn reappend_live(
    store: &Store,
    segment: u64,
    needles: Vec<StoredNeedle>,
) -> Result<u64, StoreError> {
    let mut live = Vec::with_capacity(needles.len());
    for n in needles {
        if store.is_live(segment, n.offset, n.key, n.alt_key)? {
            live.push(n);
        }
    }
    for chunk in live.chunks(256) {
        let items: Vec<PutItem<'_>> = chunk
            .iter()
            .map(|n| PutItem {
                head: &[],
                key: n.key,
                alt_key: n.alt_key,
                cookie: n.cookie,
                data: &n.data,
            })
            .collect();
        store.put_batch(Tier::Flash, &items)?;
    }
    Ok(live.len() as u64)
}

/// 90% of the free space of the filesystems of `dirs`, each filesystem
/// counted once (a directory not made yet is measured at its parent).
pub fn free_space(dirs: &[PathBuf]) -> u64 {
    let mut seen = HashSet::new();
    let mut total = 0u64;
    for d in dirs {
        let probe = if d.exists() {
            d.clone()
        } else {
            d.parent()
                .map(Path::to_path_buf)
                .unwrap_or_else(|| PathBuf::from("."))
        };
        if let Ok(st) = rustix::fs::statvfs(&probe) {
            if seen.insert(st.f_fsid) {
                total += st.f_bavail.saturating_mul(st.f_frsize) / 10 * 9;
            }
        }
    }
    total
}
