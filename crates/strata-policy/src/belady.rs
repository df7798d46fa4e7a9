//! Belady's MIN: evict the resident object whose next request is farthest
//! in the future. An offline bound: it needs, for every request, the position
//! of the next request to the same key ([`Policy::set_next_access`]), which
//! the simulator computes in a backward pre-pass (or takes from an
//! oracleGeneral trace). A missed object that would itself be the farthest
//! is not admitted (bypass), which is what makes MIN optimal for
//! equal-sized objects; with sizes it is the classic heuristic bound, not
//! the (NP-hard) byte-optimal one.

use crate::slab::{List, Slab};
use crate::{node_size, storable, Evicted, Policy, Unit};
use std::collections::BinaryHeap;

/// Belady's offline optimum.
pub struct Belady {
    slab: Slab,
    all: List,
    next_of: Vec<u64>,
    heap: BinaryHeap<(u64, u32, u64)>,
    cap: u64,
    unit: Unit,
    cur_next: u64,
}

impl Belady {
    /// An empty Belady cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Belady {
        Belady {
            slab: Slab::new(),
            all: List::default(),
            next_of: Vec::new(),
            heap: BinaryHeap::new(),
            cap: capacity,
            unit,
            cur_next: u64::MAX,
        }
    }

    fn valid(&self, n: u64, i: u32, k: u64) -> bool {
        let node = self.slab.get(i);
        node.meta == 0 && node.key == k && self.next_of.get(i as usize) == Some(&n)
    }

    fn farthest(&mut self) -> Option<(u64, u32)> {
        while let Some(&(n, i, k)) = self.heap.peek() {
            if (i as usize) < self.next_of.len() && self.valid(n, i, k) {
                return Some((n, i));
            }
            self.heap.pop();
        }
        None
    }

    fn set_next(&mut self, i: u32, n: u64) {
        if self.next_of.len() <= i as usize {
            self.next_of.resize(i as usize + 1, u64::MAX);
        }
        self.next_of[i as usize] = n;
        self.heap.push((n, i, self.slab.get(i).key));
        if self.heap.len() > 4 * self.slab.live() + 1024 {
            let mut v = Vec::with_capacity(self.slab.live());
            let mut c = self.all.head;
            while c != crate::slab::NIL {
                let node = self.slab.get(c);
                v.push((self.next_of[c as usize], c, node.key));
                c = node.next;
            }
            self.heap = BinaryHeap::from(v);
        }
    }

    fn unlink(&mut self, i: u32) -> u64 {
        self.all.remove_node(&mut self.slab, i, self.unit)
    }
}

impl Policy for Belady {
    fn name(&self) -> String {
        "belady".into()
    }
    resident_accessors!(lists: [all], resident: |_| true);
    fn set_next_access(&mut self, next: Option<u64>) {
        self.cur_next = next.unwrap_or(u64::MAX);
    }

    fn lookup(&mut self, key: u64) -> bool {
        match self.slab.find(key) {
            Some(i) => {
                let n = self.cur_next;
                self.set_next(i, n);
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
        let next = self.cur_next;
        while self.all.weight + w > self.cap {
            let Some((n, i)) = self.farthest() else {
                return false;
            };
            if next >= n {
                return false;
            }
            let k = self.slab.get(i).key;
            let size = self.unlink(i);
            evicted.push(Evicted { key: k, size });
        }
        let i = self.slab.alloc(key, node_size(size), 0);
        self.all.push_front(&mut self.slab, i, w);
        self.set_next(i, next);
        true
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let i = self.slab.find(key)?;
        Some(self.unlink(i))
    }

    fn clear(&mut self) {
        self.slab.clear();
        self.all = List::default();
        self.next_of.clear();
        self.heap.clear();
    }

    fn heap_bytes(&self) -> usize {
        self.slab.heap_bytes()
            + self.next_of.capacity() * 8
            + self.heap.capacity() * std::mem::size_of::<(u64, u32, u64)>()
    }
}
