//! The RAM object cache in front of the tiers: whole objects in memory,
//! eviction and admission decided by a `strata-policy` policy (the same code
//! the simulator runs), LRU with mid-point insertion by default.

use crate::metrics::Metrics;
use crate::object::ObjectId;
use bytes::Bytes;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use strata_policy::{Evicted, Policy, PolicySpec, Unit};

/// The 64-bit policy key of an object (its key mixed with its alternate key).
pub fn cache_key(id: ObjectId) -> u64 {
    id.key ^ (id.alt as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// An object held in RAM: its needle data (node header and bytes) and cookie.
#[derive(Clone, Debug)]
pub struct Cached {
    /// The object's identity (checked on lookup: two ids may share a key).
    pub id: ObjectId,
    /// Its cookie.
    pub cookie: u32,
    /// The needle data (object header then the object's bytes).
    pub needle: Bytes,
}

struct Inner {
    policy: Box<dyn Policy>,
    map: HashMap<u64, Cached>,
    evicted: Vec<Evicted>,
}

/// A bounded RAM cache of whole objects.
pub struct RamCache {
    inner: Mutex<Inner>,
    metrics: Arc<Metrics>,
}

impl RamCache {
    /// A cache of `capacity` bytes run by `spec`.
    pub fn new(spec: &PolicySpec, capacity: u64, metrics: Arc<Metrics>) -> RamCache {
        RamCache {
            inner: Mutex::new(Inner {
                policy: strata_policy::build(spec, capacity, Unit::Bytes),
                map: HashMap::new(),
                evicted: Vec::new(),
            }),
            metrics,
        }
    }

    /// A request for `id`: the cached object on a hit (counted by the policy).
    pub fn get(&self, id: ObjectId) -> Option<Cached> {
        let k = cache_key(id);
        let mut g = self.inner.lock();
        let hit = match g.map.get(&k) {
            Some(c) if c.id == id => Some(c.clone()),
            _ => None,
        };
        if hit.is_some() {
            g.policy.lookup(k);
            self.metrics.ram_hits.fetch_add(1, Relaxed);
        } else {
            // A miss still teaches policies with ghost queues.
            g.policy.lookup(k);
            self.metrics.ram_misses.fetch_add(1, Relaxed);
        }
        hit
    }

    /// Offers an object after a miss; the policy decides and may evict.
    pub fn insert(&self, c: Cached) {
        let k = cache_key(c.id);
        let size = c.needle.len() as u64;
        let mut g = self.inner.lock();
        let mut ev = std::mem::take(&mut g.evicted);
        ev.clear();
        let admitted = g.policy.insert(k, size, &mut ev);
        g.policy.drain_evictions(&mut ev);
        for e in &ev {
            if e.key != k {
                g.map.remove(&e.key);
            }
        }
        if admitted {
            g.map.insert(k, c);
            self.metrics.ram_admits.fetch_add(1, Relaxed);
        } else {
            g.map.remove(&k);
        }
        g.evicted = ev;
        self.metrics.ram_bytes.store(g.policy.used(), Relaxed);
    }

    /// Drops `id` (written again or deleted).
    pub fn remove(&self, id: ObjectId) {
        let k = cache_key(id);
        let mut g = self.inner.lock();
        g.policy.remove(k);
        g.map.remove(&k);
        self.metrics.ram_bytes.store(g.policy.used(), Relaxed);
    }

    /// Objects held.
    pub fn len(&self) -> usize {
        self.inner.lock().map.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(k: u64, n: usize) -> Cached {
        Cached {
            id: ObjectId { key: k, alt: 0 },
            cookie: 1,
            needle: Bytes::from(vec![0u8; n]),
        }
    }

    #[test]
    fn bounded_and_evicts_through_policy() {
        let m = Arc::new(Metrics::default());
        let c = RamCache::new(&PolicySpec::Lru, 1000, m.clone());
        for k in 0..20 {
            c.insert(obj(k, 100));
        }
        assert_eq!(c.len(), 10);
        assert!(m.ram_bytes.load(Relaxed) <= 1000);
        assert!(c.get(ObjectId { key: 19, alt: 0 }).is_some());
        assert!(c.get(ObjectId { key: 0, alt: 0 }).is_none());
        // Same key, other alternate key: not a hit.
        assert!(c.get(ObjectId { key: 19, alt: 1 }).is_none());
        c.remove(ObjectId { key: 19, alt: 0 });
        assert!(c.get(ObjectId { key: 19, alt: 0 }).is_none());
    }
}
