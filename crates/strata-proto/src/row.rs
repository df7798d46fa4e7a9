//! The row record: what a replica stores for one name, as the data of one
//! needle of its row's segment store (docs/protocol.md, *Row records*).
//!
//! A record named `(bucket, key)` is a needle whose key and alternate key
//! are the low 96 bits of XXH3-128 over `bucket`, NUL, `key` (its cookie:
//! the next 32 bits), and whose data is the bucket length (u16 LE, bit 15
//! set: the stamped layout), the bucket, the key length (u16 LE), the key,
//! the stamp (u64 LE, microseconds since the epoch), then the record (kind
//! byte and payload, [`crate::RECORD_INLINE`] and the others). Needles of
//! the first layout (bit 15 clear) have no stamp and read as stamp 0. The
//! names are compared on every read, so a hash collision reads as absent,
//! never as the wrong object.

/// Bit 15 of the bucket length: the needle has a stamp after the key.
const STAMPED: u16 = 0x8000;

/// XXH3-128 over `bucket`, a zero byte and `name`: the one hash every
/// part of Strata derives an object's engine identity from.
pub fn name_hash(bucket: &str, name: &str) -> u128 {
    let mut buf = Vec::with_capacity(bucket.len() + 1 + name.len());
    buf.extend_from_slice(bucket.as_bytes());
    buf.push(0);
    buf.extend_from_slice(name.as_bytes());
    xxhash_rust::xxh3::xxh3_128(&buf)
}

/// The engine identity of a row record: (key, alternate key, cookie), the
/// low 64, next 32 and next 32 bits of [`name_hash`]. The store-level
/// cookie of a row record; the object's own random cookie is in the record,
/// checked by the node serving the public API.
pub fn identity(bucket: &str, key: &str) -> (u64, u32, u32) {
    let h = name_hash(bucket, key);
    (h as u64, (h >> 64) as u32, (h >> 96) as u32)
}

/// Needle data of a record.
pub fn encode(bucket: &str, key: &str, stamp: u64, record: &[u8]) -> Vec<u8> {
    let mut out = encode_prefix(bucket, key, stamp, record.len());
    out.extend_from_slice(record);
    out
}

/// The length of [`encode`]'s answer for a record of `record_len` bytes:
/// the bucket's and the key's length (u16 each), their bytes, the stamp
/// (u64), the record.
pub fn encoded_len(bucket: &str, key: &str, record_len: usize) -> usize {
    12 + bucket.len() + key.len() + record_len
}

/// The row layout up to the record (bucket, key, stamp), with room for a
/// record of `record_len` bytes after it.
pub fn encode_prefix(bucket: &str, key: &str, stamp: u64, record_len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_len(bucket, key, record_len));
    out.extend_from_slice(&(bucket.len() as u16 | STAMPED).to_le_bytes());
    out.extend_from_slice(bucket.as_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&stamp.to_le_bytes());
    out
}

/// A decoded needle.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Bucket.
    pub bucket: &'a str,
    /// Key.
    pub key: &'a str,
    /// Stamp (0 for needles of the first layout).
    pub stamp: u64,
    /// The record: kind byte and payload.
    pub record: &'a [u8],
}

/// Splits needle data into its parts.
pub fn decode(data: &[u8]) -> Option<Decoded<'_>> {
    let raw = u16::from_le_bytes(data.get(..2)?.try_into().ok()?);
    let stamped = raw & STAMPED != 0;
    let bl = (raw & !STAMPED) as usize;
    let bucket = std::str::from_utf8(data.get(2..2 + bl)?).ok()?;
    let rest = &data[2 + bl..];
    let kl = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let key = std::str::from_utf8(rest.get(2..2 + kl)?).ok()?;
    let rest = &rest[2 + kl..];
    let (stamp, record) = if stamped {
        (
            u64::from_le_bytes(rest.get(..8)?.try_into().ok()?),
            &rest[8..],
        )
    } else {
        (0, rest)
    };
    Some(Decoded {
        bucket,
        key,
        stamp,
        record,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needle_layouts_round_trip() {
        let n = encode("b", "k", 42, b"\x00hello");
        let d = decode(&n).unwrap();
        assert_eq!(
            (d.bucket, d.key, d.stamp, d.record),
            ("b", "k", 42, &b"\x00hello"[..])
        );
        // The first layout (no stamp) still reads, as stamp 0.
        let mut old = Vec::new();
        old.extend_from_slice(&1u16.to_le_bytes());
        old.extend_from_slice(b"b");
        old.extend_from_slice(&1u16.to_le_bytes());
        old.extend_from_slice(b"k");
        old.extend_from_slice(b"\x00x");
        let d = decode(&old).unwrap();
        assert_eq!((d.stamp, d.record), (0, &b"\x00x"[..]));
        assert!(decode(&n[..n.len() - 7]).is_none());
    }

    #[test]
    fn identity_is_the_name_hash() {
        let h = name_hash("b", "k");
        assert_eq!(
            identity("b", "k"),
            (h as u64, (h >> 64) as u32, (h >> 96) as u32)
        );
        assert_ne!(name_hash("b", "k"), name_hash("bk", ""));
    }

    #[test]
    fn encoded_len_is_the_encoding_s_length() {
        for (b, k, r) in [("", "", 0usize), ("b", "key", 1), ("bucket", "a/b/c", 4096)] {
            assert_eq!(encoded_len(b, k, r), encode(b, k, 7, &vec![0u8; r]).len());
        }
    }
}
