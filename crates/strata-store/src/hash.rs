//! Hashing of needle identities: (key, alternate key) to 64-bit hashes.
//!
//! Pure and deterministic: the compact index of a sealed segment stores only
//! hash-derived data (a perfect-hash pilot table and fingerprints), so these
//! functions are part of the checkpoint format (docs/store-format.md) and
//! must never change within a format version.

use std::hash::{BuildHasher, Hasher};

/// The 64-bit finaliser of MurmurHash3: a bijection that mixes every input
/// bit into every output bit.
#[inline]
pub fn mix64(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^= x >> 33;
    x
}

/// Hash of a needle identity under a seed.
#[inline]
pub fn key_hash(key: u64, alt_key: u32, seed: u64) -> u64 {
    let a = mix64(key ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    mix64(a ^ (u64::from(alt_key) | (u64::from(alt_key) << 32)) ^ seed.rotate_left(29))
}

/// Fingerprint hash of a needle identity (independent of [`key_hash`]).
#[inline]
pub fn fingerprint_hash(key: u64, alt_key: u32, seed: u64) -> u64 {
    key_hash(key, alt_key, seed ^ 0x5bd1_e995_2545_f491)
}

/// A `BuildHasher` for in-RAM hash maps keyed by (key, alternate key): keys
/// are application ids, so they are mixed rather than trusted to be random.
#[derive(Clone, Copy, Default, Debug)]
pub struct IdHasherBuilder;

/// The hasher made by [`IdHasherBuilder`].
#[derive(Default, Debug)]
pub struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        mix64(self.0)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = mix64(self.0 ^ u64::from(*b));
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = mix64(self.0 ^ i);
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = self.0.rotate_left(32) ^ u64::from(i);
    }
}

impl BuildHasher for IdHasherBuilder {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_differ_by_alt_key_and_seed() {
        assert_ne!(key_hash(1, 0, 0), key_hash(1, 1, 0));
        assert_ne!(key_hash(1, 0, 0), key_hash(1, 0, 1));
        assert_ne!(key_hash(1, 0, 0), fingerprint_hash(1, 0, 0));
    }
}
