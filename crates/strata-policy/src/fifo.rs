//! FIFO: hits change nothing; eviction takes the oldest insert.
//! Same as libCacheSim's `fifo`.

use crate::lru::Lru;
use crate::{Evicted, Policy, Unit};

/// First in, first out.
pub struct Fifo(Lru);

impl Fifo {
    /// An empty FIFO cache of `capacity` units.
    pub fn new(capacity: u64, unit: Unit) -> Fifo {
        Fifo(Lru::make(capacity, unit, true))
    }
}

impl Policy for Fifo {
    fn name(&self) -> String {
        self.0.name()
    }
    fn unit(&self) -> Unit {
        self.0.unit()
    }
    fn capacity(&self) -> u64 {
        self.0.capacity()
    }
    fn used(&self) -> u64 {
        self.0.used()
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn contains(&self, key: u64) -> bool {
        self.0.contains(key)
    }
    #[inline]
    fn lookup(&mut self, key: u64) -> bool {
        self.0.lookup(key)
    }
    #[inline]
    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        self.0.insert(key, size, evicted)
    }
    fn remove(&mut self, key: u64) -> Option<u64> {
        self.0.remove(key)
    }
    fn clear(&mut self) {
        self.0.clear()
    }
    fn heap_bytes(&self) -> usize {
        self.0.heap_bytes()
    }
}
