//! A perfect hash function over the needle identities of a sealed segment,
//! in the style of PTHash (Pibiri and Trani, SIGIR 2021): keys are spread
//! into buckets by one hash, and each bucket stores a 16-bit pilot chosen so
//! that `position = (h ^ mix(pilot)) mod slots` sends every key of every
//! bucket to a distinct slot. With slots = n / 0.99 the table is almost
//! minimal, and a lookup costs two hashes and one pilot read. Pure: no I/O.

use crate::hash::{key_hash, mix64};

/// Average keys per bucket: 16-bit pilots then cost 16/5 = 3.2 bits per key.
const KEYS_PER_BUCKET: u64 = 5;
/// Slots per key, as a ratio: 100 slots per 99 keys.
const SLOT_NUM: u64 = 100;
const SLOT_DEN: u64 = 99;

/// The perfect hash function: a seed, a slot count and one pilot per bucket.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Mphf {
    seed: u64,
    slots: u64,
    pilots: Vec<u16>,
}

/// Building failed for every seed tried (only possible when two distinct
/// identities collide on all 64 bits of their hash under many seeds, or
/// when the same identity is given twice).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuildFailed;

impl Mphf {
    /// Rebuilds a function from the parts a checkpoint stores.
    pub fn from_parts(seed: u64, slots: u64, pilots: Vec<u16>) -> Option<Self> {
        if slots == 0 || pilots.is_empty() {
            return None;
        }
        Some(Mphf {
            seed,
            slots,
            pilots,
        })
    }

    /// The seed of the bucket and position hashes.
    pub fn seed(&self) -> u64 {
        self.seed
    }
    /// Number of slots (the range of [`Mphf::slot`]).
    pub fn slots(&self) -> u64 {
        self.slots
    }
    /// One pilot per bucket.
    pub fn pilots(&self) -> &[u16] {
        &self.pilots
    }

    /// Number of slots used for `n` keys.
    pub fn slots_for(n: usize) -> u64 {
        ((n as u64) * SLOT_NUM).div_ceil(SLOT_DEN).max(1)
    }

    fn bucket_of(h: u64, buckets: u64) -> u64 {
        // Skewed assignment (PTHash): 60% of keys go to 30% of buckets, so the
        // dense buckets are placed first, while the table is still empty.
        let dense = (buckets * 3).div_ceil(10).max(1);
        let threshold = (u64::MAX / 10) * 6;
        if h < threshold || dense == buckets {
            ((mix64(h ^ 0x2545_f491_4f6c_dd1d) as u128 * dense as u128) >> 64) as u64
        } else {
            let sparse = buckets - dense;
            dense + (((mix64(h) as u128 * sparse as u128) >> 64) as u64)
        }
    }

    #[inline]
    fn position(h: u64, pilot: u16, slots: u64) -> u64 {
        let p = mix64(u64::from(pilot) ^ 0x4f1b_bcdc_bfa5_4b6b);
        ((mix64(h ^ p) as u128 * slots as u128) >> 64) as u64
    }

    /// The slot of an identity (any identity maps to some slot; callers
    /// check a fingerprint to tell members from strangers).
    #[inline]
    pub fn slot(&self, key: u64, alt_key: u32) -> u64 {
        let h = key_hash(key, alt_key, self.seed);
        let b = Self::bucket_of(h, self.pilots.len() as u64);
        let pilot = self.pilots.get(b as usize).copied().unwrap_or(0);
        Self::position(h, pilot, self.slots)
    }

    /// Builds a function for the given distinct identities, trying seeds
    /// derived from `base_seed`.
    pub fn build(ids: &[(u64, u32)], base_seed: u64) -> Result<Mphf, BuildFailed> {
        Self::build_with(ids.len(), |i| ids[i], base_seed)
    }

    /// [`Mphf::build`] over `n` identities given by `id(i)` (so that a
    /// caller need not copy its records into a vector of identities).
    pub fn build_with(
        n: usize,
        id: impl Fn(usize) -> (u64, u32),
        base_seed: u64,
    ) -> Result<Mphf, BuildFailed> {
        let slots = Self::slots_for(n);
        let buckets = (n as u64).div_ceil(KEYS_PER_BUCKET).max(1);
        for attempt in 0..16u64 {
            let seed = mix64(base_seed ^ attempt.wrapping_mul(0x9e37_79b9_7f4a_7c15));
            if let Some(pilots) = Self::try_build(n, &id, seed, slots, buckets) {
                return Ok(Mphf {
                    seed,
                    slots,
                    pilots,
                });
            }
        }
        Err(BuildFailed)
    }

    fn try_build(
        n: usize,
        id: &impl Fn(usize) -> (u64, u32),
        seed: u64,
        slots: u64,
        buckets: u64,
    ) -> Option<Vec<u16>> {
        // Hashes grouped by bucket.
        let mut hb: Vec<(u64, u64)> = (0..n)
            .map(|i| {
                let (k, a) = id(i);
                let h = key_hash(k, a, seed);
                (Self::bucket_of(h, buckets), h)
            })
            .collect();
        hb.sort_unstable();
        if hb.windows(2).any(|w| w[0] == w[1]) {
            return None;
        }
        let mut ranges: Vec<(usize, usize)> = Vec::with_capacity(buckets as usize);
        let mut i = 0;
        while i < hb.len() {
            let mut j = i;
            while j < hb.len() && hb[j].0 == hb[i].0 {
                j += 1;
            }
            ranges.push((i, j));
            i = j;
        }
        // Largest buckets first.
        ranges.sort_by_key(|&(a, b)| std::cmp::Reverse(b - a));
        let mut taken = vec![0u64; (slots as usize).div_ceil(64)];
        let mut pilots = vec![0u16; buckets as usize];
        let mut pos = Vec::with_capacity(16);
        for (a, b) in ranges {
            let bucket = hb[a].0 as usize;
            let mut found = false;
            'pilot: for pilot in 0..=u16::MAX {
                pos.clear();
                for &(_, h) in &hb[a..b] {
                    let p = Self::position(h, pilot, slots);
                    if taken[(p / 64) as usize] & (1 << (p % 64)) != 0 || pos.contains(&p) {
                        continue 'pilot;
                    }
                    pos.push(p);
                }
                for &p in &pos {
                    taken[(p / 64) as usize] |= 1 << (p % 64);
                }
                pilots[bucket] = pilot;
                found = true;
                break;
            }
            if !found {
                return None;
            }
        }
        Some(pilots)
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.pilots.len() * 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distinct_slots_for_many_keys() {
        for n in [0usize, 1, 2, 7, 100, 5000, 60_000] {
            let ids: Vec<(u64, u32)> = (0..n as u64).map(|i| (i * 7919, (i % 4) as u32)).collect();
            let f = Mphf::build(&ids, 42).unwrap_or_else(|_| panic!("n = {n}"));
            let mut seen = vec![false; f.slots() as usize];
            for &(k, a) in &ids {
                let s = f.slot(k, a) as usize;
                assert!(!seen[s], "slot {s} used twice (n = {n})");
                seen[s] = true;
            }
            assert!(f.slots() as usize <= n + n / 99 + 1);
        }
    }

    #[test]
    fn duplicate_identity_fails() {
        assert_eq!(Mphf::build(&[(1, 1), (1, 1)], 0), Err(BuildFailed));
    }
}
