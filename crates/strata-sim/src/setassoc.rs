//! Set-associative caches: N independent sets, each with its own policy
//! instance and an equal share of the capacity, and a function from key to
//! set. Flashcache splits its flash into 2 MB sets and maps 2 MB regions of
//! the disk onto them linearly, which packs hot tables into a few sets;
//! hashing the block number spreads them. Both mappings are here, and every
//! set counts its lookups and misses so the imbalance can be seen.

use crate::fasthash::mix;
use strata_policy::{build, Evicted, Policy, PolicySpec, Unit};

/// How keys map to sets.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SetMapping {
    /// By address range: set = (key / span) mod sets, so `span` consecutive
    /// keys (e.g. a 2 MB region of 512-byte blocks: span 4096) share a set.
    Linear {
        /// Consecutive keys per region.
        span: u64,
    },
    /// By a hash of the key.
    Hash,
}

/// A set-associative cache; itself a [`Policy`].
pub struct SetAssociative {
    sets: Vec<Box<dyn Policy>>,
    mapping: SetMapping,
    lookups: Vec<u64>,
    misses: Vec<u64>,
    name: String,
    cap: u64,
}

impl SetAssociative {
    /// `n_sets` sets of `policy`, splitting `capacity` units evenly (the
    /// remainder of the division is unused, as in a real device).
    pub fn new(
        policy: &PolicySpec,
        capacity: u64,
        unit: Unit,
        n_sets: u32,
        mapping: SetMapping,
    ) -> SetAssociative {
        let n = n_sets.max(1) as usize;
        let per = capacity / n as u64;
        SetAssociative {
            sets: (0..n).map(|_| build(policy, per, unit)).collect(),
            mapping,
            lookups: vec![0; n],
            misses: vec![0; n],
            name: policy.to_string(),
            cap: per * n as u64,
        }
    }

    /// The set `key` maps to.
    #[inline]
    pub fn set_of(&self, key: u64) -> usize {
        let n = self.sets.len() as u64;
        let s = match self.mapping {
            SetMapping::Linear { span } => (key / span.max(1)) % n,
            SetMapping::Hash => ((mix(key) as u128 * n as u128) >> 64) as u64,
        };
        s as usize
    }

    /// Lookups per set so far.
    pub fn lookups(&self) -> &[u64] {
        &self.lookups
    }

    /// Misses per set so far.
    pub fn misses(&self) -> &[u64] {
        &self.misses
    }

    /// Number of sets.
    pub fn n_sets(&self) -> usize {
        self.sets.len()
    }
}

impl Policy for SetAssociative {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn unit(&self) -> Unit {
        self.sets[0].unit()
    }
    fn capacity(&self) -> u64 {
        self.cap
    }
    fn used(&self) -> u64 {
        self.sets.iter().map(|s| s.used()).sum()
    }
    fn len(&self) -> usize {
        self.sets.iter().map(|s| s.len()).sum()
    }
    fn contains(&self, key: u64) -> bool {
        self.sets[self.set_of(key)].contains(key)
    }
    fn lookup(&mut self, key: u64) -> bool {
        let s = self.set_of(key);
        self.lookups[s] += 1;
        let hit = self.sets[s].lookup(key);
        if !hit {
            self.misses[s] += 1;
        }
        hit
    }
    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool {
        let s = self.set_of(key);
        self.sets[s].insert(key, size, evicted)
    }
    fn remove(&mut self, key: u64) -> Option<u64> {
        let s = self.set_of(key);
        self.sets[s].remove(key)
    }
    fn clear(&mut self) {
        for s in &mut self.sets {
            s.clear();
        }
    }
    fn heap_bytes(&self) -> usize {
        self.sets.iter().map(|s| s.heap_bytes()).sum::<usize>() + self.sets.len() * 32
    }
    fn set_next_access(&mut self, next: Option<u64>) {
        for s in &mut self.sets {
            s.set_next_access(next);
        }
    }
    fn drain_evictions(&mut self, out: &mut Vec<Evicted>) {
        for s in &mut self.sets {
            s.drain_evictions(out);
        }
    }
}
