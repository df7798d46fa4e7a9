//! SIEVE (Zhang et al., NSDI'24), as libCacheSim's `sieve`.
//!
//! New objects enter at the head unvisited; a hit marks the object visited
//! and moves nothing. The hand starts at the tail and walks toward the head:
//! a visited object is cleared and skipped, the first unvisited one is
//! evicted and the hand stays at its neighbour (wrapping to the tail).

use crate::slab::{List, Slab, NIL};
use crate::{node_size, storable, Evicted, Policy, Unit};

/// SIEVE.
pub struct Sieve {
    slab: Slab,
    list: List,
    hand: u32,
    cap: u64,
    unit: Unit,
}

impl Sieve {
    /// An empty SIEVE cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Sieve {
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize + 1);
        }
        Sieve {
            slab,
            list: List::default(),
            hand: NIL,
            cap: capacity,
            unit,
        }
    }

    fn unlink(&mut self, i: u32) -> u64 {
        if self.hand == i {
            self.hand = self.slab.get(i).prev;
        }
        self.list.remove_node(&mut self.slab, i, self.unit)
    }
}

impl Policy for Sieve {
    fn name(&self) -> String {
        "sieve".into()
    }
    resident_accessors!(lists: [list], resident: |_| true);

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(i) => {
                self.slab.get_mut(i).meta = 1;
                true
            }
            None => false,
        }
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        if self.slab.find(key).is_some() {
            self.remove(key);
        }
        let w = self.unit.charge(size);
        if w > self.cap || !storable(self.unit, size) {
            return false;
        }
        while self.list.weight + w > self.cap {
            let mut o = if self.hand == NIL {
                self.list.tail
            } else {
                self.hand
            };
            while self.slab.get(o).meta > 0 {
                let n = self.slab.get_mut(o);
                n.meta -= 1;
                o = if n.prev == NIL {
                    self.list.tail
                } else {
                    n.prev
                };
            }
            let key = self.slab.get(o).key;
            let prev = self.slab.get(o).prev;
            let size = self.unlink(o);
            self.hand = prev;
            evicted.push(Evicted { key, size });
        }
        let i = self.slab.alloc(key, node_size(size), 0);
        self.list.push_front(&mut self.slab, i, w);
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        Some(self.unlink(i))
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.list = List::default();
        self.hand = NIL;
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
