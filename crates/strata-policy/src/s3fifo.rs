//! S3-FIFO (Yang et al., SOSP'23), as libCacheSim's `S3FIFO-0.1000-2`.
//!
//! A small FIFO (10% of the capacity), a main FIFO (the rest) and a ghost
//! FIFO of keys (sized at 90% of the capacity, counting the evicted objects'
//! sizes). A new object enters the small queue, or the main queue if its key
//! is in the ghost queue. Hits count (the count is kept, capped at 3 in main).
//! Eviction runs on the main queue when it is over its share or the small
//! queue is empty, otherwise on the small queue: a small-queue tail with at
//! least `threshold` hits moves to main (with its count reset), else it is
//! evicted and its key enters the ghost queue; a main-queue tail with a
//! non-zero count is reinserted with the count decremented (capped at 2),
//! else evicted. As in libCacheSim, the small queue's share is truncated to a
//! whole number of units, an object larger than the small queue is refused
//! (even on a ghost hit), and moves into main may overfill main until the
//! next eviction drains it.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};

const SMALL: u32 = 0;
const MAIN: u32 = 1;
const GHOST: u32 = 2;
const FREQ_CAP: u32 = 1 << 20;

#[inline(always)]
fn queue(meta: u32) -> u32 {
    meta & 3
}
#[inline(always)]
fn freq(meta: u32) -> u32 {
    meta >> 2
}
#[inline(always)]
fn meta(q: u32, f: u32) -> u32 {
    q | (f << 2)
}

/// S3-FIFO.
pub struct S3Fifo {
    slab: Slab,
    small: List,
    main: List,
    ghost: List,
    cap: u64,
    small_cap: u64,
    main_cap: u64,
    ghost_cap: u64,
    threshold: u32,
    ratio: f64,
    unit: Unit,
    ghost_hit: Option<u64>,
}

impl S3Fifo {
    /// An empty S3-FIFO cache with the paper's parameters (10%, threshold 2).
    pub fn new(capacity: u64, unit: Unit) -> S3Fifo {
        S3Fifo::with_params(capacity, unit, 0.1, 2)
    }

    /// An empty S3-FIFO cache with a small queue of `small_ratio` of the
    /// capacity and a move-to-main threshold of `threshold` hits.
    pub fn with_params(capacity: u64, unit: Unit, small_ratio: f64, threshold: u32) -> S3Fifo {
        let small_cap = (capacity as f64 * small_ratio) as u64;
        let mut slab = Slab::new();
        if unit == Unit::Objects {
            // Resident objects plus ghosts (90% of the capacity).
            slab.reserve((capacity as f64 * 1.9) as usize + 1);
        }
        S3Fifo {
            slab,
            small: List::default(),
            main: List::default(),
            ghost: List::default(),
            cap: capacity,
            small_cap,
            main_cap: capacity - small_cap,
            ghost_cap: (capacity as f64 * 0.9) as u64,
            threshold: threshold.max(1),
            ratio: small_ratio,
            unit,
            ghost_hit: None,
        }
    }

    #[inline(always)]
    fn w(&self, i: u32) -> u64 {
        self.unit.charge(self.slab.get(i).size as u64)
    }

    fn list(&mut self, q: u32) -> &mut List {
        match q {
            SMALL => &mut self.small,
            MAIN => &mut self.main,
            _ => &mut self.ghost,
        }
    }

    /// Unlinks and frees slot `i` from whatever queue holds it.
    fn drop_slot(&mut self, i: u32) {
        let w = self.w(i);
        let q = queue(self.slab.get(i).meta);
        let mut l = *self.list(q);
        l.unlink(&mut self.slab, i, w);
        *self.list(q) = l;
        self.slab.release(i);
    }

    /// Puts the (unlinked) node `i` at the head of the ghost queue, or frees
    /// it when it is larger than the ghost queue.
    fn move_to_ghost(&mut self, i: u32) {
        let w = self.w(i);
        if w > self.ghost_cap {
            self.slab.release(i);
            return;
        }
        while self.ghost.weight + w > self.ghost_cap {
            let t = self.ghost.tail;
            self.drop_slot(t);
        }
        self.slab.get_mut(i).meta = meta(GHOST, 0);
        self.ghost.push_front(&mut self.slab, i, w);
    }

    fn evict_small(&mut self, evicted: &mut Vec<Evicted>) {
        while self.small.weight > 0 {
            let t = self.small.tail;
            let w = self.w(t);
            self.small.unlink(&mut self.slab, t, w);
            if freq(self.slab.get(t).meta) >= self.threshold {
                self.slab.get_mut(t).meta = meta(MAIN, 0);
                self.main.push_front(&mut self.slab, t, w);
            } else {
                let n = *self.slab.get(t);
                evicted.push(Evicted {
                    key: n.key,
                    size: n.size as u64,
                });
                self.move_to_ghost(t);
                return;
            }
        }
    }

    fn evict_main(&mut self, evicted: &mut Vec<Evicted>) {
        while self.main.weight > 0 {
            let t = self.main.tail;
            let f = freq(self.slab.get(t).meta);
            if f >= 1 {
                self.main.move_to_front(&mut self.slab, t);
                self.slab.get_mut(t).meta = meta(MAIN, f.min(3) - 1);
            } else {
                let n = *self.slab.get(t);
                self.drop_slot(t);
                evicted.push(Evicted {
                    key: n.key,
                    size: n.size as u64,
                });
                return;
            }
        }
    }

    fn evict(&mut self, evicted: &mut Vec<Evicted>) {
        if self.main.weight > self.main_cap || self.small.weight == 0 {
            self.evict_main(evicted);
        } else {
            self.evict_small(evicted);
        }
    }
}

impl Policy for S3Fifo {
    fn name(&self) -> String {
        if self.ratio == 0.1 && self.threshold == 2 {
            "s3fifo".into()
        } else {
            format!("s3fifo:{}:{}", self.ratio, self.threshold)
        }
    }
    resident_accessors!(lists: [small, main], resident: |n| queue(n.meta) != GHOST);

    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        self.ghost_hit = None;
        let Some(i) = self.slab.find(key) else {
            return false;
        };
        let m = self.slab.get(i).meta;
        if queue(m) == GHOST {
            self.drop_slot(i);
            self.ghost_hit = Some(key);
            return false;
        }
        let f = (freq(m) + 1).min(FREQ_CAP);
        self.slab.get_mut(i).meta = meta(queue(m), f);
        true
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        let mut ghost_hit = self.ghost_hit.take() == Some(key);
        if let Some(i) = self.slab.find(key) {
            if queue(self.slab.get(i).meta) == GHOST {
                ghost_hit = true;
            }
            self.drop_slot(i);
        }
        let w = self.unit.charge(size);
        if w > self.small_cap || !storable(self.unit, size) {
            return false;
        }
        while self.small.weight + self.main.weight + w > self.cap {
            self.evict(evicted);
        }
        if ghost_hit {
            let i = self.slab.alloc(key, node_size(size), meta(MAIN, 0));
            self.main.push_front(&mut self.slab, i, w);
        } else {
            if w >= self.small_cap {
                return false;
            }
            let i = self.slab.alloc(key, node_size(size), meta(SMALL, 0));
            self.small.push_front(&mut self.slab, i, w);
        }
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        let n = *self.slab.get(i);
        self.drop_slot(i);
        if queue(n.meta) == GHOST {
            None
        } else {
            Some(n.size as u64)
        }
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.small = List::default();
        self.main = List::default();
        self.ghost = List::default();
        self.ghost_hit = None;
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
