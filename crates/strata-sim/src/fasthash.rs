//! A fast hasher for u64 keys (folded 64x64->128 multiply), for maps keyed
//! by object id inside one process; not DoS-resistant, not stable across
//! versions.

use std::hash::{BuildHasher, Hasher};

/// Mixes a key so both the high and the low bits depend on all its bits.
#[inline(always)]
pub(crate) fn mix(key: u64) -> u64 {
    let m = (key ^ 0x9e37_79b9_7f4a_7c15) as u128 * 0xa076_1d64_78bd_642fu128;
    (m as u64) ^ ((m >> 64) as u64)
}

#[derive(Default, Clone, Copy)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline(always)]
    fn finish(&self) -> u64 {
        mix(self.0)
    }
    #[inline(always)]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) ^ (self.0 >> 56) ^ b as u64;
        }
    }
    #[inline(always)]
    fn write_u64(&mut self, v: u64) {
        self.0 ^= v;
    }
}

#[derive(Default, Clone, Copy)]
pub(crate) struct BuildKeyHasher;

impl BuildHasher for BuildKeyHasher {
    type Hasher = KeyHasher;
    #[inline(always)]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(0)
    }
}

pub(crate) type KeyMap<V> = hashbrown::HashMap<u64, V, BuildKeyHasher>;

pub(crate) fn key_map<V>() -> KeyMap<V> {
    hashbrown::HashMap::with_hasher(BuildKeyHasher)
}
