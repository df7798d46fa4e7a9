//! The node's RAM and flash caches, built from the shared policy crate.
//!
//! The study's hybrid cache (§5.2): two independent tiers, RAM over flash,
//! exclusive. Misses are inserted into RAM; RAM evictions are inserted into
//! flash. On a flash hit the promote policy (PP) moves the object back to
//! RAM, the keep policy (KP) leaves it on flash. Writes are not allocated
//! (the study's "no-write allocate"): a write invalidates cached copies,
//! unless write allocation is asked for.

use crate::layered::{CacheOutcome, TieredCache};
use serde::Serialize;
use strata_policy::{build, Evicted, Policy, PolicySpec, Unit};

/// What a flash hit does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum FlashHit {
    /// Promote to RAM (PP): the hybrid behaves as one LRU.
    Promote,
    /// Keep on flash (KP): less flash wear, fewer RAM hits.
    Keep,
}

/// RAM over flash, each tier one policy of the shared policy crate.
pub struct PolicyCache {
    ram: Option<Box<dyn Policy>>,
    flash: Option<Box<dyn Policy>>,
    on_flash_hit: FlashHit,
    write_allocate: bool,
    flash_written: u64,
    evicted: Vec<Evicted>,
    spill: Vec<Evicted>,
}

impl PolicyCache {
    /// A cache of `ram_bytes` of RAM over `flash_bytes` of flash (0 for none),
    /// each run by `policy` (the study: LRU).
    pub fn new(
        policy: &PolicySpec,
        ram_bytes: u64,
        flash_bytes: u64,
        on_flash_hit: FlashHit,
        write_allocate: bool,
    ) -> PolicyCache {
        let tier = |b: u64| (b > 0).then(|| build(policy, b, Unit::Bytes));
        PolicyCache {
            ram: tier(ram_bytes),
            flash: tier(flash_bytes),
            on_flash_hit,
            write_allocate,
            flash_written: 0,
            evicted: Vec::new(),
            spill: Vec::new(),
        }
    }

    /// Puts an object in RAM; what RAM evicts goes to flash.
    fn admit_ram(&mut self, key: u64, bytes: u64) {
        let Some(ram) = self.ram.as_mut() else {
            self.admit_flash(key, bytes);
            return;
        };
        self.evicted.clear();
        ram.insert(key, bytes, &mut self.evicted);
        ram.drain_evictions(&mut self.evicted);
        let spilled = std::mem::take(&mut self.evicted);
        for e in &spilled {
            self.admit_flash(e.key, e.size);
        }
        self.evicted = spilled;
    }

    fn admit_flash(&mut self, key: u64, bytes: u64) {
        if let Some(flash) = self.flash.as_mut() {
            self.spill.clear();
            if flash.insert(key, bytes, &mut self.spill) {
                self.flash_written += bytes;
            }
        }
    }
}

impl TieredCache for PolicyCache {
    fn read(&mut self, key: u64, bytes: u64) -> CacheOutcome {
        if let Some(ram) = self.ram.as_mut() {
            if ram.lookup(key) {
                return CacheOutcome::Ram;
            }
            let mut lost = Vec::new();
            ram.drain_evictions(&mut lost);
            for e in lost {
                self.admit_flash(e.key, e.size);
            }
        }
        if let Some(flash) = self.flash.as_mut() {
            if flash.lookup(key) {
                if self.on_flash_hit == FlashHit::Promote && self.ram.is_some() {
                    let size = flash.remove(key).unwrap_or(bytes);
                    self.admit_ram(key, size);
                }
                return CacheOutcome::Flash;
            }
        }
        self.admit_ram(key, bytes);
        CacheOutcome::Miss
    }

    fn write(&mut self, key: u64, bytes: u64) {
        self.remove(key);
        if self.write_allocate {
            self.admit_ram(key, bytes);
        }
    }

    fn remove(&mut self, key: u64) {
        if let Some(r) = self.ram.as_mut() {
            r.remove(key);
        }
        if let Some(f) = self.flash.as_mut() {
            f.remove(key);
        }
    }

    fn flash_bytes_written(&self) -> u64 {
        self.flash_written
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ram_evictions_fall_to_flash_and_promote_back() {
        let lru = PolicySpec::Lru;
        let mut c = PolicyCache::new(&lru, 2000, 4000, FlashHit::Promote, false);
        for k in 0..3 {
            assert_eq!(c.read(k, 1000), CacheOutcome::Miss);
        }
        // key 0 was pushed from RAM to flash
        assert_eq!(c.flash_bytes_written(), 1000);
        assert_eq!(c.read(0, 1000), CacheOutcome::Flash);
        // promoted: now a RAM hit
        assert_eq!(c.read(0, 1000), CacheOutcome::Ram);
    }

    #[test]
    fn keep_policy_leaves_flash_hits_on_flash() {
        let lru = PolicySpec::Lru;
        let mut c = PolicyCache::new(&lru, 2000, 4000, FlashHit::Keep, false);
        for k in 0..3 {
            c.read(k, 1000);
        }
        assert_eq!(c.read(0, 1000), CacheOutcome::Flash);
        assert_eq!(c.read(0, 1000), CacheOutcome::Flash);
    }

    #[test]
    fn writes_invalidate_without_allocating() {
        let lru = PolicySpec::Lru;
        let mut c = PolicyCache::new(&lru, 10_000, 0, FlashHit::Promote, false);
        c.read(1, 100);
        assert_eq!(c.read(1, 100), CacheOutcome::Ram);
        c.write(1, 100);
        assert_eq!(c.read(1, 100), CacheOutcome::Miss);
        let mut c = PolicyCache::new(&lru, 10_000, 0, FlashHit::Promote, true);
        c.write(2, 100);
        assert_eq!(c.read(2, 100), CacheOutcome::Ram);
    }
}
