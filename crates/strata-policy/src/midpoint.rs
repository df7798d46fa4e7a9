//! LRU with mid-point insertion (Flashcache's "LRU-2Q", InnoDB's midpoint).
//!
//! The LRU list is cut at `percentile` percent of the capacity from its head:
//! the part above is the hot (old, proven) region, the part below the
//! nursery. New objects enter at the top of the nursery, i.e. at the
//! `percentile`-th percentile of the list; a hit moves an object to the head
//! of the hot region; the hot region is kept within `percentile` percent of
//! the capacity by demoting its tail to the top of the nursery; eviction
//! takes the nursery's tail. `percentile` 0 is plain LRU; Flashcache runs
//! 75, and found the cache stops working from about 85.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};

const COLD: u32 = 0;
const HOT: u32 = 1;

/// LRU with mid-point insertion.
pub struct MidpointLru {
    slab: Slab,
    hot: List,
    cold: List,
    cap: u64,
    hot_cap: u64,
    percentile: f64,
    unit: Unit,
}

impl MidpointLru {
    /// An empty cache of `capacity` units inserting at `percentile` (0..100).
    pub fn new(capacity: u64, unit: Unit, percentile: f64) -> MidpointLru {
        let p = percentile.clamp(0.0, 99.999);
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize + 1);
        }
        MidpointLru {
            slab,
            hot: List::default(),
            cold: List::default(),
            cap: capacity,
            hot_cap: (capacity as f64 * p / 100.0) as u64,
            percentile: p,
            unit,
        }
    }

    fn w(&self, i: u32) -> u64 {
        self.unit.charge(self.slab.get(i).size as u64)
    }

    fn rebalance(&mut self) {
        while self.hot.weight > self.hot_cap {
            let t = self.hot.tail;
            let w = self.w(t);
            self.hot.unlink(&mut self.slab, t, w);
            self.slab.get_mut(t).meta = COLD;
            self.cold.push_front(&mut self.slab, t, w);
        }
    }

    fn unlink(&mut self, i: u32) -> u64 {
        let w = self.w(i);
        let size = self.slab.get(i).size as u64;
        if self.slab.get(i).meta == HOT {
            self.hot.unlink(&mut self.slab, i, w);
        } else {
            self.cold.unlink(&mut self.slab, i, w);
        }
        self.slab.release(i);
        size
    }
}

impl Policy for MidpointLru {
    fn name(&self) -> String {
        format!("lru-mid:{}", self.percentile)
    }
    fn unit(&self) -> Unit {
        self.unit
    }
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn used(&self) -> u64 {
        self.hot.weight + self.cold.weight
    }
    fn len(&self) -> usize {
        (self.hot.len + self.cold.len) as usize
    }
    fn contains(&self, key: u64) -> bool {
        self.slab.find(key).is_some()
    }

    fn lookup(&mut self, key: u64) -> bool {
        let Some(i) = self.slab.find(key) else {
            return false;
        };
        if self.slab.get(i).meta == HOT {
            self.hot.move_to_front(&mut self.slab, i);
        } else {
            let w = self.w(i);
            self.cold.unlink(&mut self.slab, i, w);
            self.slab.get_mut(i).meta = HOT;
            self.hot.push_front(&mut self.slab, i, w);
            self.rebalance();
        }
        true
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        if self.slab.find(key).is_some() {
            self.remove(key);
        }
        let w = self.unit.charge(size);
        if w > self.cap || !storable(self.unit, size) {
            return false;
        }
        while self.hot.weight + self.cold.weight + w > self.cap {
            let t = if self.cold.is_empty() {
                self.hot.tail
            } else {
                self.cold.tail
            };
            let key = self.slab.get(t).key;
            let size = self.unlink(t);
            evicted.push(Evicted { key, size });
        }
        let i = self.slab.alloc(key, node_size(size), COLD);
        self.cold.push_front(&mut self.slab, i, w);
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        Some(self.unlink(i))
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.hot = List::default();
        self.cold = List::default();
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
