//! LRU: a hit moves the object to the head; eviction takes the tail.
//! Same as libCacheSim's `lru`.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};

/// Least recently used.
pub struct Lru {
    slab: Slab,
    list: List,
    cap: u64,
    unit: Unit,
    /// FIFO mode: hits do not move objects.
    fifo: bool,
}

impl Lru {
    /// An empty LRU cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Lru {
        Lru::make(capacity, unit, false)
    }

    pub(crate) fn make(capacity: u64, unit: Unit, fifo: bool) -> Lru {
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize + 1);
        }
        Lru {
            slab,
            list: List::default(),
            cap: capacity,
            unit,
            fifo,
        }
    }

    #[inline]
    fn evict_one(&mut self, evicted: &mut Vec<Evicted>) {
        let t = self.list.tail;
        let n = *self.slab.get(t);
        self.list
            .unlink(&mut self.slab, t, self.unit.charge(n.size as u64));
        self.slab.release(t);
        evicted.push(Evicted {
            key: n.key,
            size: n.size as u64,
        });
    }
}

impl Policy for Lru {
    fn name(&self) -> String {
        if self.fifo { "fifo" } else { "lru" }.to_string()
    }
    resident_accessors!(lists: [list], resident: |_| true);

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(i) => {
                if !self.fifo {
                    self.list.move_to_front(&mut self.slab, i);
                }
                true
            }
            None => false,
        }
    }

    #[inline]
    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        if self.slab.find(key).is_some() {
            self.remove(key);
        }
        let w = self.unit.charge(size);
        if w > self.cap || !storable(self.unit, size) {
            return false;
        }
        while self.list.weight + w > self.cap {
            self.evict_one(evicted);
        }
        let i = self.slab.alloc(key, node_size(size), 0);
        self.list.push_front(&mut self.slab, i, w);
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        Some(self.list.remove_node(&mut self.slab, i, self.unit))
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.list = List::default();
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
