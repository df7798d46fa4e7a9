//! 2Q (Johnson and Shasha, VLDB'94) as libCacheSim's `twoq`.
//!
//! A1in is a FIFO of new objects (25% of the capacity), A1out a FIFO of the
//! keys evicted from A1in (sized at 50% of the capacity, counting their
//! sizes), Am an LRU of objects re-referenced after leaving A1in (the other
//! 75%). A miss whose key is in A1out goes to Am; any other miss to A1in. A
//! hit in A1in changes nothing; a hit in Am is an LRU hit. To make room the
//! cache evicts from A1in (into A1out) while A1in is over its share, else
//! from Am's tail. As in libCacheSim, Am also enforces its own share when an
//! object enters it, and an object larger than A1in is refused.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};

const AIN: u32 = 0;
const AM: u32 = 1;
const AOUT: u32 = 2;

/// libCacheSim's 2Q.
pub struct TwoQ {
    slab: Slab,
    ain: List,
    am: List,
    aout: List,
    cap: u64,
    ain_cap: u64,
    am_cap: u64,
    aout_cap: u64,
    unit: Unit,
    ghost_hit: Option<u64>,
}

impl TwoQ {
    /// An empty 2Q cache of `capacity` units (A1in 25%, A1out 50%).
    pub fn new(capacity: u64, unit: Unit) -> TwoQ {
        let ain_cap = (capacity as f64 * 0.25) as u64;
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize * 3 / 2 + 1);
        }
        TwoQ {
            slab,
            ain: List::default(),
            am: List::default(),
            aout: List::default(),
            cap: capacity,
            ain_cap,
            am_cap: capacity - ain_cap,
            aout_cap: (capacity as f64 * 0.5) as u64,
            unit,
            ghost_hit: None,
        }
    }

    #[inline(always)]
    fn w(&self, i: u32) -> u64 {
        self.unit.charge(self.slab.get(i).size as u64)
    }

    fn drop_slot(&mut self, i: u32) {
        let w = self.w(i);
        match self.slab.get(i).meta {
            AIN => self.ain.unlink(&mut self.slab, i, w),
            AM => self.am.unlink(&mut self.slab, i, w),
            _ => self.aout.unlink(&mut self.slab, i, w),
        }
        self.slab.release(i);
    }

    fn evict_am(&mut self, evicted: &mut Vec<Evicted>) {
        let t = self.am.tail;
        let n = *self.slab.get(t);
        self.drop_slot(t);
        evicted.push(Evicted {
            key: n.key,
            size: n.size as u64,
        });
    }

    fn evict_ain(&mut self, evicted: &mut Vec<Evicted>) {
        let t = self.ain.tail;
        let w = self.w(t);
        let n = *self.slab.get(t);
        self.ain.unlink(&mut self.slab, t, w);
        evicted.push(Evicted {
            key: n.key,
            size: n.size as u64,
        });
        if w > self.aout_cap {
            self.slab.release(t);
            return;
        }
        while self.aout.weight + w > self.aout_cap {
            let g = self.aout.tail;
            self.drop_slot(g);
        }
        self.slab.get_mut(t).meta = AOUT;
        self.aout.push_front(&mut self.slab, t, w);
    }
}

impl Policy for TwoQ {
    fn name(&self) -> String {
        "twoq".into()
    }
    resident_accessors!(lists: [ain, am], resident: |n| n.meta != AOUT);

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        self.ghost_hit = None;
        let Some(i) = self.slab.find(key) else {
            return false;
        };
        match self.slab.get(i).meta {
            AIN => true,
            AM => {
                self.am.move_to_front(&mut self.slab, i);
                true
            }
            _ => {
                self.drop_slot(i);
                self.ghost_hit = Some(key);
                false
            }
        }
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        let mut ghost_hit = self.ghost_hit.take() == Some(key);
        if let Some(i) = self.slab.find(key) {
            if self.slab.get(i).meta == AOUT {
                ghost_hit = true;
            }
            self.drop_slot(i);
        }
        let w = self.unit.charge(size);
        if w > self.ain_cap || !storable(self.unit, size) {
            return false;
        }
        while self.ain.weight + self.am.weight + w > self.cap {
            if self.ain.weight > self.ain_cap || self.am.is_empty() {
                self.evict_ain(evicted);
            } else {
                self.evict_am(evicted);
            }
        }
        if ghost_hit {
            if w > self.am_cap {
                return false;
            }
            while self.am.weight + w > self.am_cap {
                self.evict_am(evicted);
            }
            let i = self.slab.alloc(key, node_size(size), AM);
            self.am.push_front(&mut self.slab, i, w);
        } else {
            let i = self.slab.alloc(key, node_size(size), AIN);
            self.ain.push_front(&mut self.slab, i, w);
        }
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        let n = *self.slab.get(i);
        self.drop_slot(i);
        (n.meta != AOUT).then_some(n.size as u64)
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.ain = List::default();
        self.am = List::default();
        self.aout = List::default();
        self.ghost_hit = None;
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
