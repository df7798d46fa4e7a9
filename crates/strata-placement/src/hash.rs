//! The two hashes every client must compute identically, forever.

use xxhash_rust::xxh3::xxh3_64;

/// The 64-bit placement hash of an object named `key` in `bucket`.
///
/// XXH3-64 (seed 0) over: the bucket's length as a little-endian `u32`, the
/// bucket's UTF-8 bytes, then the key's UTF-8 bytes. The length prefix keeps
/// `("ab", "c")` and `("a", "bc")` apart. Documented in docs/placement.md;
/// changing it would move every object, so it never changes.
pub fn object_hash(bucket: &str, key: &str) -> u64 {
    let mut buf = Vec::with_capacity(4 + bucket.len() + key.len());
    buf.extend_from_slice(&(bucket.len() as u32).to_le_bytes());
    buf.extend_from_slice(bucket.as_bytes());
    buf.extend_from_slice(key.as_bytes());
    xxh3_64(&buf)
}

/// Jump consistent hash (Lamping and Veach, 2014): maps `key` to a bucket in
/// `0..buckets`. When `buckets` grows from `n` to `m`, only keys that move to
/// the new buckets `n..m` change bucket — the least movement possible.
///
/// `buckets` must be at least 1; 0 is treated as 1.
pub fn jump_hash(mut key: u64, buckets: u32) -> u32 {
    let buckets = i64::from(buckets.max(1));
    let mut b: i64 = -1;
    let mut j: i64 = 0;
    while j < buckets {
        b = j;
        key = key.wrapping_mul(2862933555777941757).wrapping_add(1);
        j = (((b + 1) as f64) * ((1i64 << 31) as f64 / (((key >> 33) + 1) as f64))) as i64;
    }
    b as u32
}

/// SplitMix64: a cheap, well-mixed deterministic pseudo-random step, used for
/// tie-breaks and shuffles so that a table is a pure function of its input.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Mixes several values into one tie-break key.
pub(crate) fn mix3(a: u64, b: u64, c: u64) -> u64 {
    mix(mix(mix(a) ^ b) ^ c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_hash_separates_bucket_from_key() {
        assert_ne!(object_hash("ab", "c"), object_hash("a", "bc"));
        assert_eq!(object_hash("photos", "x"), object_hash("photos", "x"));
    }

    #[test]
    fn jump_hash_moves_only_to_new_buckets() {
        for k in 0..10_000u64 {
            let key = mix(k);
            let a = jump_hash(key, 100);
            let b = jump_hash(key, 130);
            assert!(a < 100 && b < 130);
            assert!(
                a == b || b >= 100,
                "key {k} moved from {a} to old bucket {b}"
            );
        }
    }

    #[test]
    fn jump_hash_is_balanced() {
        let mut counts = [0u32; 10];
        for k in 0..100_000u64 {
            counts[jump_hash(mix(k), 10) as usize] += 1;
        }
        for c in counts {
            assert!((9_000..11_000).contains(&c), "{counts:?}");
        }
    }
}
