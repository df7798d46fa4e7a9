//! CLOCK with an n-bit reference counter (1 bit: classic CLOCK).
//!
//! As libCacheSim's `clock`: a hit raises the counter (saturating at
//! 2^bits - 1); a new object starts at 0 at the head; eviction looks at the
//! tail, and an object with a non-zero counter has it decremented and goes
//! back to the head (the hand sweeping past it), otherwise it is evicted.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};

/// CLOCK (second chance).
pub struct Clock {
    slab: Slab,
    list: List,
    cap: u64,
    unit: Unit,
    max_freq: u32,
    bits: u8,
}

impl Clock {
    /// An empty 1-bit CLOCK cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Clock {
        Clock::with_bits(capacity, unit, 1)
    }

    /// An empty CLOCK cache whose counters have `bits` bits (clamped to 1..=8).
    pub fn with_bits(capacity: u64, unit: Unit, bits: u8) -> Clock {
        let bits = bits.clamp(1, 8);
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize + 1);
        }
        Clock {
            slab,
            list: List::default(),
            cap: capacity,
            unit,
            max_freq: (1u32 << bits) - 1,
            bits,
        }
    }
}

impl Policy for Clock {
    fn name(&self) -> String {
        if self.bits == 1 {
            "clock".into()
        } else {
            format!("clock{}", self.bits)
        }
    }
    resident_accessors!(lists: [list], resident: |_| true);

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(i) => {
                let n = self.slab.get_mut(i);
                if n.meta < self.max_freq {
                    n.meta += 1;
                }
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
            loop {
                let t = self.list.tail;
                let n = self.slab.get_mut(t);
                if n.meta >= 1 {
                    n.meta -= 1;
                    self.list.move_to_front(&mut self.slab, t);
                } else {
                    let n = *n;
                    self.list
                        .unlink(&mut self.slab, t, self.unit.charge(n.size as u64));
                    self.slab.release(t);
                    evicted.push(Evicted {
                        key: n.key,
                        size: n.size as u64,
                    });
                    break;
                }
            }
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
