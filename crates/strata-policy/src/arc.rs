//! ARC (Megiddo and Modha, FAST'03), as libCacheSim's `arc`.
//!
//! T1/T2 hold resident objects seen once/more than once, B1/B2 their ghosts;
//! the target size `p` of T1 adapts on ghost hits. Sizes are counted in
//! capacity units, so in byte mode the lists, the ghost bounds (`|T1|+|B1| <=
//! c`, total `<= 2c`) and the adaptation step (`max(|B2|/|B1|, 1)` with the
//! sizes in bytes) are in bytes, exactly as libCacheSim does; in object mode
//! this is the paper's ARC. libCacheSim's order of operations is kept: the
//! ghost hit adapts `p` and drops the ghost at lookup, and the REPLACE and
//! case-IV steps run once per eviction while making room.
//!
//! Ghosts may be as many as resident objects, so ARC's nodes are the 20-byte
//! kind (the list id packed into the size's top two bits): in byte mode it
//! refuses objects of 1 GiB or more, where the other policies go to 4 GiB.

use crate::slab::{List, Slab, SlabNode, TaggedNode, TAGGED_MAX_SIZE};
use crate::{node_size, storable, Evicted, Policy, Unit};

const T1: u32 = 0;
const T2: u32 = 1;
const B1: u32 = 2;
const B2: u32 = 3;

/// Adaptive replacement cache.
pub struct Arc {
    /// 20-byte nodes with the list id (T1, T2, B1, B2) as their tag: ARC
    /// holds up to as many ghosts as resident objects, so each byte of the
    /// node counts twice per cached object.
    slab: Slab<TaggedNode>,
    lists: [List; 4],
    cap: u64,
    p: f64,
    unit: Unit,
    /// The key whose lookup just hit a ghost.
    ghost_hit: Option<u64>,
    /// libCacheSim's "current object was in B1/B2" flags (kept until the
    /// next insert after a ghost hit or the next lookup of a known key).
    in_b1: bool,
    in_b2: bool,
}

impl Arc {
    /// An empty ARC cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Arc {
        let mut slab = Slab::empty();
        if unit == Unit::Objects {
            slab.reserve(capacity as usize * 2 + 1);
        }
        Arc {
            slab,
            lists: [List::default(); 4],
            cap: capacity,
            p: 0.0,
            unit,
            ghost_hit: None,
            in_b1: false,
            in_b2: false,
        }
    }

    #[inline(always)]
    fn w(&self, i: u32) -> u64 {
        self.unit.charge(self.slab.get(i).size() as u64)
    }

    #[inline(always)]
    fn size_of(&self, l: u32) -> u64 {
        self.lists[l as usize].weight
    }

    fn unlink(&mut self, i: u32) {
        let w = self.w(i);
        let l = self.slab.get(i).tag() as usize;
        self.lists[l].unlink(&mut self.slab, i, w);
    }

    fn push(&mut self, l: u32, i: u32) {
        let w = self.w(i);
        self.slab.get_mut(i).set_tag(l);
        self.lists[l as usize].push_front(&mut self.slab, i, w);
    }

    /// Moves the tail of a resident list to the head of its ghost list.
    fn demote_tail(&mut self, from: u32, evicted: &mut Vec<Evicted>) {
        let t = self.lists[from as usize].tail;
        let n = *self.slab.get(t);
        self.unlink(t);
        self.push(if from == T1 { B1 } else { B2 }, t);
        evicted.push(Evicted {
            key: n.key(),
            size: n.size() as u64,
        });
    }

    fn drop_tail(&mut self, l: u32) {
        let t = self.lists[l as usize].tail;
        self.unlink(t);
        self.slab.release(t);
    }

    /// The paper's REPLACE.
    fn replace(&mut self, evicted: &mut Vec<Evicted>) {
        let t1 = self.size_of(T1);
        let cond1 = t1 > 0;
        let cond2 = t1 as f64 > self.p;
        let cond3 = t1 as f64 == self.p && self.in_b2;
        let cond4 = self.size_of(T2) == 0;
        if (cond1 && (cond2 || cond3)) || cond4 {
            self.demote_tail(T1, evicted);
        } else {
            self.demote_tail(T2, evicted);
        }
    }

    /// The paper's case IV (a miss in all four lists), one eviction.
    fn evict_on_miss(&mut self, incoming: u64, evicted: &mut Vec<Evicted>) {
        let (t1, b1) = (self.size_of(T1), self.size_of(B1));
        if t1 + b1 + incoming > self.cap {
            if b1 > 0 {
                self.drop_tail(B1);
                self.replace(evicted);
            } else {
                let t = self.lists[T1 as usize].tail;
                let n = *self.slab.get(t);
                self.unlink(t);
                self.slab.release(t);
                evicted.push(Evicted {
                    key: n.key(),
                    size: n.size() as u64,
                });
            }
        } else {
            let total = t1 + b1 + self.size_of(T2) + self.size_of(B2);
            if total >= self.cap * 2 && self.size_of(B2) > 0 {
                self.drop_tail(B2);
            }
            self.replace(evicted);
        }
    }

    /// A request found `key`'s ghost at slot `i`: adapt p, forget the ghost.
    fn ghost_hit_at(&mut self, i: u32) {
        let w = self.w(i) as f64;
        let (b1, b2) = (self.size_of(B1) as f64, self.size_of(B2) as f64);
        if self.slab.get(i).tag() == B1 {
            self.in_b1 = true;
            let delta = (b2 / b1).max(1.0);
            self.p = (self.p + delta).min(self.cap as f64);
        } else {
            self.in_b2 = true;
            let delta = (b1 / b2).max(1.0);
            self.p = (self.p - delta).max(0.0);
        }
        let _ = w;
        self.unlink(i);
        self.slab.release(i);
    }

    /// T1's target size (for tests and reports).
    pub fn target_t1(&self) -> f64 {
        self.p
    }
}

impl Policy for Arc {
    fn name(&self) -> String {
        "arc".into()
    }
    fn unit(&self) -> Unit {
        self.unit
    }
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn used(&self) -> u64 {
        self.size_of(T1) + self.size_of(T2)
    }
    fn len(&self) -> usize {
        (self.lists[0].len + self.lists[1].len) as usize
    }
    fn contains(&self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(i) => self.slab.get(i).tag() <= T2,
            None => false,
        }
    }

    fn lookup(&mut self, key: u64) -> bool {
        self.ghost_hit = None;
        let Some(i) = self.slab.find(key) else {
            return false;
        };
        self.in_b1 = false;
        self.in_b2 = false;
        match self.slab.get(i).tag() {
            T1 => {
                self.unlink(i);
                self.push(T2, i);
                true
            }
            T2 => {
                self.lists[T2 as usize].move_to_front(&mut self.slab, i);
                true
            }
            _ => {
                self.ghost_hit_at(i);
                self.ghost_hit = Some(key);
                false
            }
        }
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        let mut ghost = self.ghost_hit.take() == Some(key);
        if let Some(i) = self.slab.find(key) {
            if self.slab.get(i).tag() >= B1 {
                self.in_b1 = false;
                self.in_b2 = false;
                self.ghost_hit_at(i);
                ghost = true;
            } else {
                self.remove(key);
            }
        }
        let w = self.unit.charge(size);
        // Nodes keep 30-bit sizes: in byte mode a larger object is refused.
        let too_big = self.unit == Unit::Bytes && size > TAGGED_MAX_SIZE;
        if w > self.cap || !storable(self.unit, size) || too_big {
            return false;
        }
        while self.used() + w > self.cap {
            if ghost {
                self.replace(evicted);
            } else {
                self.evict_on_miss(w, evicted);
            }
        }
        let i = self.slab.alloc(key, node_size(size), T1);
        if ghost {
            self.push(T2, i);
            self.in_b1 = false;
            self.in_b2 = false;
        } else {
            self.push(T1, i);
        }
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        let n = *self.slab.get(i);
        self.unlink(i);
        self.slab.release(i);
        (n.tag() <= T2).then_some(n.size() as u64)
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.lists = [List::default(); 4];
        self.p = 0.0;
        self.ghost_hit = None;
        self.in_b1 = false;
        self.in_b2 = false;
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
    }
}
