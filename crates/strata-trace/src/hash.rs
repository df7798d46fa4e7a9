//! The stable hash that turns string object ids (and any id that is not a
//! plain decimal number) into the 64-bit ids of [`crate::Request::object`].
//!
//! The hash is XXH3-64 with seed 0 over the id's bytes exactly as they appear
//! in the trace (after CSV unquoting; no trimming inside quotes, no case
//! folding). XXH3 is specified in xxHash's `doc/xxhash_spec.md` and its
//! output is the same on every platform and in every release, so an id hashed
//! today by `strata` equals the id the store hashes tomorrow. A field that is
//! a plain decimal number that fits in a u64 (`0` to `18446744073709551615`,
//! digits only) is used as the id itself, as libCacheSim does for numeric ids.

/// The 64-bit id of a string object id: XXH3-64 (seed 0) of its bytes.
pub fn hash_object_id(id: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(id)
}

/// The object id of a trace field: the number itself when the field is a
/// plain decimal u64, else [`hash_object_id`] of its bytes.
pub fn object_id(field: &[u8]) -> u64 {
    parse_u64(field).unwrap_or_else(|| hash_object_id(field))
}

/// Parses a plain decimal u64 (digits only, no sign, no spaces); `None` on
/// anything else or on overflow.
pub(crate) fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in s {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_ids_and_strings_are_hashed() {
        assert_eq!(object_id(b"42932745"), 42932745);
        assert_eq!(object_id(b"18446744073709551615"), u64::MAX);
        // One past u64::MAX is not a number any more: hashed.
        assert_eq!(
            object_id(b"18446744073709551616"),
            hash_object_id(b"18446744073709551616")
        );
        assert_eq!(object_id(b"photo/1.jpg"), hash_object_id(b"photo/1.jpg"));
        assert_ne!(object_id(b"a"), object_id(b"b"));
    }

    #[test]
    fn hash_is_xxh3_64_seed_0() {
        // Reference values of XXH3-64 (seed 0) from the xxHash spec's test
        // vectors: the empty input hashes to 0x2D06800538D394C2.
        assert_eq!(hash_object_id(b""), 0x2D06_8005_38D3_94C2);
    }
}
