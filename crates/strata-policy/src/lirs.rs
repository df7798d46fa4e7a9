//! LIRS (Jiang and Zhang, SIGMETRICS'02), as libCacheSim's `lirs`.
//!
//! Stack S holds LIR objects and recently seen HIR objects (resident or
//! not), ordered by recency; queue Q holds the resident HIR objects (1% of
//! the capacity, at least one unit); NH lists the non-resident HIR entries of
//! S so the stack can be bounded (to twice the capacity). A hit on a LIR
//! prunes S; a hit on a resident HIR that is in S makes it LIR (demoting S's
//! bottom LIR into Q); a hit on a resident HIR that is only in Q puts it back
//! in S as HIR. A miss whose key is a non-resident HIR in S becomes LIR;
//! any other miss becomes LIR while LIR space lasts, else a resident HIR.
//!
//! libCacheSim's conventions are kept so results match it: an object larger
//! than the HIR queue (1% of the cache) is refused on a plain miss, S and Q
//! are both reordered on every lookup, and an object that re-enters as LIR
//! keeps the size it had when first seen. Because LIRS may demote and evict
//! objects during a hit, those evictions are reported by
//! [`Policy::drain_evictions`](crate::Policy::drain_evictions) and by the
//! next insert.

use crate::slab::{KeyedList, NIL};
use crate::{node_size, storable, Evicted, Policy, Unit};

const LIR: u32 = 1;
const IN: u32 = 2;

/// LIRS.
pub struct Lirs {
    s: KeyedList,
    q: KeyedList,
    nh: KeyedList,
    cap: u64,
    hirs_limit: u64,
    lirs_limit: u64,
    hirs: u64,
    lirs: u64,
    occupied: u64,
    n_obj: usize,
    unit: Unit,
    /// A missed lookup whose stack trim (done after every request) waits for
    /// the insert that normally follows.
    pending_limit: bool,
    spill: Vec<Evicted>,
}

impl Lirs {
    /// An empty LIRS cache of `capacity` units (HIR share 1%).
    pub fn new(capacity: u64, unit: Unit) -> Lirs {
        let hirs_limit = ((0.01 * capacity as f64) as u64).max(1);
        Lirs {
            s: KeyedList::new(),
            q: KeyedList::new(),
            nh: KeyedList::new(),
            cap: capacity,
            hirs_limit,
            lirs_limit: capacity.saturating_sub(hirs_limit),
            hirs: 0,
            lirs: 0,
            occupied: 0,
            n_obj: 0,
            unit,
            pending_limit: false,
            spill: Vec::new(),
        }
    }

    #[inline(always)]
    fn sw(&self, i: u32) -> u64 {
        self.unit.charge(self.s.slab.get(i).size as u64)
    }

    #[inline(always)]
    fn qw(&self, i: u32) -> u64 {
        self.unit.charge(self.q.slab.get(i).size as u64)
    }

    fn nh_remove(&mut self, key: u64) {
        if let Some(n) = self.nh.find(key) {
            let w = self.unit.charge(self.nh.slab.get(n).size as u64);
            self.nh.remove_idx(n, w);
        }
    }

    fn prune(&mut self) {
        loop {
            let t = self.s.list.tail;
            if t == NIL || t == self.s.list.head {
                break;
            }
            let n = *self.s.slab.get(t);
            if n.meta & LIR != 0 {
                break;
            }
            if n.meta & IN == 0 {
                self.nh_remove(n.key);
            }
            let w = self.sw(t);
            self.s.remove_idx(t, w);
        }
    }

    fn evict_hir(&mut self) -> bool {
        let t = self.q.list.tail;
        if t == NIL {
            return false;
        }
        let n = *self.q.slab.get(t);
        let w = self.qw(t);
        self.hirs -= w;
        self.q.remove_idx(t, w);
        if let Some(si) = self.s.find(n.key) {
            self.s.slab.get_mut(si).meta &= !IN;
            if let Some(x) = self.nh.find(n.key) {
                self.nh.list.move_to_front(&mut self.nh.slab, x);
            } else {
                self.nh.push_front(n.key, n.size, w, 0);
            }
        }
        self.occupied -= w;
        self.n_obj -= 1;
        self.spill.push(Evicted {
            key: n.key,
            size: n.size as u64,
        });
        true
    }

    fn evict_lir(&mut self) -> bool {
        let t = self.s.list.tail;
        if t == NIL {
            return false;
        }
        let n = *self.s.slab.get(t);
        let w = self.sw(t);
        self.lirs = self.lirs.saturating_sub(w);
        self.s.remove_idx(t, w);
        self.occupied -= w;
        self.n_obj -= 1;
        if w <= self.hirs_limit {
            while self.hirs + w > self.hirs_limit {
                if !self.evict_hir() {
                    break;
                }
            }
            match self.q.find(n.key) {
                Some(x) => self.q.list.move_to_front(&mut self.q.slab, x),
                None => {
                    self.q.push_front(n.key, n.size, w, IN);
                }
            }
            self.hirs += w;
            self.occupied += w;
            self.n_obj += 1;
        } else {
            self.spill.push(Evicted {
                key: n.key,
                size: n.size as u64,
            });
        }
        self.prune();
        true
    }

    fn limit_stack(&mut self) {
        self.pending_limit = false;
        while self.s.list.weight > 2 * self.cap {
            let t = self.nh.list.tail;
            if t == NIL {
                break;
            }
            let key = self.nh.slab.get(t).key;
            let w = self.unit.charge(self.nh.slab.get(t).size as u64);
            if let Some(si) = self.s.find(key) {
                let sw = self.sw(si);
                self.s.remove_idx(si, sw);
            }
            self.nh.remove_idx(t, w);
        }
    }

    fn hit_hir_in_s(&mut self, s: u32, q: Option<u32>) {
        if let Some(q) = q {
            let w = self.qw(q);
            self.hirs -= w;
            self.q.remove_idx(q, w);
            self.occupied -= w;
            self.n_obj -= 1;
        }
        let sw = self.sw(s);
        while self.lirs + sw > self.lirs_limit {
            if self.s.list.tail == s || !self.evict_lir() {
                break;
            }
        }
        self.s.slab.get_mut(s).meta |= LIR;
        self.lirs += sw;
        self.occupied += sw;
        self.n_obj += 1;
    }

    fn hit_hir_in_q(&mut self, q: u32) {
        let n = *self.q.slab.get(q);
        let w = self.qw(q);
        while self.lirs + w > self.lirs_limit {
            if !self.evict_lir() {
                break;
            }
        }
        // Making LIR room can push this very object out of Q (when Q is
        // tiny); libCacheSim then still re-enters it in S as resident
        // without counting it. Strata keeps the books straight: an object
        // evicted here stays evicted.
        if self.q.find(n.key).is_some() {
            self.s.push_front(n.key, n.size, w, IN);
        }
    }

    fn is_resident(&self, key: u64) -> bool {
        if let Some(s) = self.s.find(key) {
            let m = self.s.slab.get(s).meta;
            if m & (LIR | IN) != 0 {
                return true;
            }
        }
        self.q.find(key).is_some()
    }
}

impl Policy for Lirs {
    fn name(&self) -> String {
        "lirs".into()
    }
    fn unit(&self) -> Unit {
        self.unit
    }
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn used(&self) -> u64 {
        self.occupied
    }
    fn len(&self) -> usize {
        self.n_obj
    }
    fn contains(&self, key: u64) -> bool {
        self.is_resident(key)
    }

    fn lookup(&mut self, key: u64) -> bool {
        if self.pending_limit {
            self.limit_stack();
        }
        let s = self.s.find(key);
        if let Some(s) = s {
            self.s.list.move_to_front(&mut self.s.slab, s);
        }
        let q = self.q.find(key);
        if let Some(q) = q {
            self.q.list.move_to_front(&mut self.q.slab, q);
        }
        let hit = if let Some(s) = s {
            let m = self.s.slab.get(s).meta;
            if m & LIR != 0 {
                self.prune();
                true
            } else if m & IN != 0 {
                self.hit_hir_in_s(s, q);
                true
            } else {
                false
            }
        } else if let Some(q) = q {
            self.hit_hir_in_q(q);
            true
        } else {
            false
        };
        if hit {
            self.limit_stack();
        } else {
            self.pending_limit = true;
        }
        hit
    }

    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        evicted.append(&mut self.spill);
        if self.is_resident(key) {
            self.remove(key);
        }
        let admitted = self.admit(key, size);
        self.limit_stack();
        evicted.append(&mut self.spill);
        admitted
    }

    fn remove(&mut self, key: u64) -> Option<u64> {
        let s = self.s.find(key);
        let q = self.q.find(key);
        let mut out = None;
        if let Some(s) = s {
            let n = *self.s.slab.get(s);
            let w = self.sw(s);
            self.s.remove_idx(s, w);
            if n.meta & LIR != 0 {
                self.lirs -= w;
                self.occupied -= w;
                self.n_obj -= 1;
                out = Some(n.size as u64);
                self.prune();
                return out;
            } else if n.meta & IN != 0 {
                self.hirs -= w;
                self.occupied -= w;
                self.n_obj -= 1;
                out = Some(n.size as u64);
            } else {
                self.nh_remove(key);
            }
            if let Some(q) = q {
                let qw = self.qw(q);
                self.q.remove_idx(q, qw);
            }
        } else if let Some(q) = q {
            let n = *self.q.slab.get(q);
            let w = self.qw(q);
            self.q.remove_idx(q, w);
            self.hirs -= w;
            self.occupied -= w;
            self.n_obj -= 1;
            out = Some(n.size as u64);
        }
        out
    }

    fn clear(&mut self) {
        self.s.clear();
        self.q.clear();
        self.nh.clear();
        self.hirs = 0;
        self.lirs = 0;
        self.occupied = 0;
        self.n_obj = 0;
        self.pending_limit = false;
        self.spill.clear();
    }

    fn heap_bytes(&self) -> usize {
        self.s.slab.heap_bytes()
            + self.q.slab.heap_bytes()
            + self.nh.slab.heap_bytes()
            + self.spill.capacity() * std::mem::size_of::<Evicted>()
    }

    fn drain_evictions(&mut self, out: &mut Vec<Evicted>) {
        out.append(&mut self.spill);
    }
}

impl Lirs {
    /// The miss path: libCacheSim's can_insert, evict loop and insert.
    fn admit(&mut self, key: u64, size: u64) -> bool {
        let w = self.unit.charge(size);
        if w > self.cap || !storable(self.unit, size) {
            return false;
        }
        let mut s = self.s.find(key);
        let q = self.q.find(key);
        let nonresident =
            |me: &Lirs, s: Option<u32>| s.is_some_and(|s| me.s.slab.get(s).meta & (LIR | IN) == 0);
        if nonresident(self, s) {
            let sw = s.map_or(0, |s| self.sw(s));
            while self.lirs + sw > self.lirs_limit {
                if !self.evict_lir() {
                    break;
                }
            }
            self.nh_remove(key);
            s = self.s.find(key);
        }
        if !nonresident(self, s) && s.is_none() && q.is_none() {
            if w > self.lirs_limit || w > self.hirs_limit {
                return false;
            }
            if self.lirs + w > self.lirs_limit && self.hirs + w > self.hirs_limit {
                while self.hirs + w > self.hirs_limit {
                    if !self.evict_hir() {
                        break;
                    }
                }
            }
        }
        while self.occupied + w > self.cap {
            let s = self.s.find(key);
            let q = self.q.find(key);
            let mut progress = false;
            if nonresident(self, s) {
                while self.hirs >= self.hirs_limit {
                    if !self.evict_hir() {
                        break;
                    }
                }
                progress = self.evict_lir();
            } else if s.is_none()
                && q.is_none()
                && self.lirs + w > self.lirs_limit
                && self.hirs + w > self.hirs_limit
            {
                progress = self.evict_hir();
            }
            if !progress {
                break;
            }
        }
        let s = self.s.find(key);
        if let Some(s) = s.filter(|&s| nonresident(self, Some(s))) {
            let sw = self.sw(s);
            self.s.slab.get_mut(s).meta = LIR | IN;
            self.lirs += sw;
            self.occupied += sw;
            self.n_obj += 1;
        } else {
            if self.lirs + w <= self.lirs_limit {
                self.s.push_front(key, node_size(size), w, LIR | IN);
                self.lirs += w;
            } else {
                self.s.push_front(key, node_size(size), w, IN);
                self.q.push_front(key, node_size(size), w, IN);
                self.hirs += w;
            }
            self.occupied += w;
            self.n_obj += 1;
        }
        true
    }
}
