//! Named objects: how a (bucket, name) becomes an engine key and what the
//! node keeps in a needle's data besides the object's bytes.
//!
//! A named object maps to the engine's 64-bit key and 32-bit alternate key
//! by a 96-bit hash of its bucket and name (DESIGN.md, "Object identity").
//! The name is written into the needle in front of the object's bytes and
//! compared on every read, so a hash collision is detected and reported as
//! "not found", never served as the wrong object. The layout of that header
//! is in docs/node.md ("Object header").

use bytes::Bytes;
use strata_proto::row::name_hash;

/// Magic of the object header: `SNO1` in ASCII.
pub const OBJECT_MAGIC: [u8; 4] = *b"SNO1";
/// Version of the object header layout.
pub const OBJECT_VERSION: u8 = 1;
/// Fixed part of the header: magic 4, version 1, flags 1, name length 2,
/// workload 4, creation time 8.
pub const OBJECT_HEADER_FIXED: usize = 20;
/// Longest bucket + name accepted (bytes of `bucket/name`).
pub const MAX_NAME_BYTES: usize = 1024;

/// The engine identity of a named object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ObjectId {
    /// The 64-bit key.
    pub key: u64,
    /// The 32-bit alternate key.
    pub alt: u32,
}

/// The 96-bit identity of `bucket/name`: the low 64 bits of XXH3-128 over
/// `bucket`, a zero byte and `name` give the key, the next 32 the
/// alternate key.
pub fn object_id(bucket: &str, name: &str) -> ObjectId {
    let h = name_hash(bucket, name);
    ObjectId {
        key: h as u64,
        alt: (h >> 64) as u32,
    }
}

/// The header the node writes before an object's bytes in a needle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectHeader {
    /// The workload the object was written under.
    pub workload: u32,
    /// Creation time, milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// `bucket/name` of the object.
    pub full_name: String,
}

/// Why stored needle data is not a valid node object.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ObjectFormatError {
    /// Shorter than the fixed header or than its own name length.
    #[error("needle data too short for an object header ({0} bytes)")]
    Short(usize),
    /// Wrong magic or an unknown version.
    #[error("needle data is not a Strata object (bad magic or version)")]
    BadMagic,
    /// The stored name is not UTF-8.
    #[error("stored object name is not UTF-8")]
    BadName,
}

impl ObjectHeader {
    /// The encoded header followed by `data`, ready to be a needle's data.
    pub fn encode_with(&self, data: &[u8]) -> Vec<u8> {
        let name = self.full_name.as_bytes();
        let mut out = Vec::with_capacity(OBJECT_HEADER_FIXED + name.len() + data.len());
        out.extend_from_slice(&OBJECT_MAGIC);
        out.push(OBJECT_VERSION);
        out.push(0);
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&self.workload.to_le_bytes());
        out.extend_from_slice(&self.created_ms.to_le_bytes());
        out.extend_from_slice(name);
        out.extend_from_slice(data);
        out
    }

    /// Splits needle data into its header and the object's bytes (a cheap
    /// slice of `needle`).
    pub fn decode(needle: &Bytes) -> Result<(ObjectHeader, Bytes), ObjectFormatError> {
        if needle.len() < OBJECT_HEADER_FIXED {
            return Err(ObjectFormatError::Short(needle.len()));
        }
        if needle[0..4] != OBJECT_MAGIC || needle[4] != OBJECT_VERSION {
            return Err(ObjectFormatError::BadMagic);
        }
        let name_len = u16::from_le_bytes([needle[6], needle[7]]) as usize;
        let workload = u32::from_le_bytes([needle[8], needle[9], needle[10], needle[11]]);
        let mut t = [0u8; 8];
        t.copy_from_slice(&needle[12..20]);
        let created_ms = u64::from_le_bytes(t);
        let end = OBJECT_HEADER_FIXED + name_len;
        if needle.len() < end {
            return Err(ObjectFormatError::Short(needle.len()));
        }
        let full_name = std::str::from_utf8(&needle[OBJECT_HEADER_FIXED..end])
            .map_err(|_| ObjectFormatError::BadName)?
            .to_string();
        Ok((
            ObjectHeader {
                workload,
                created_ms,
                full_name,
            },
            needle.slice(end..),
        ))
    }
}

/// `bucket/name` as stored in the header.
pub fn full_name(bucket: &str, name: &str) -> String {
    let mut s = String::with_capacity(bucket.len() + 1 + name.len());
    s.push_str(bucket);
    s.push('/');
    s.push_str(name);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trips_and_slices_data() {
        let h = ObjectHeader {
            workload: 7,
            created_ms: 1_700_000_000_123,
            full_name: "photos/cat.jpg".into(),
        };
        let enc = Bytes::from(h.encode_with(b"meow"));
        let (back, data) = ObjectHeader::decode(&enc).unwrap();
        assert_eq!(back, h);
        assert_eq!(&data[..], b"meow");
    }

    #[test]
    fn garbage_is_rejected_not_misread() {
        assert_eq!(
            ObjectHeader::decode(&Bytes::from_static(b"short")),
            Err(ObjectFormatError::Short(5))
        );
        let mut enc = ObjectHeader {
            workload: 1,
            created_ms: 0,
            full_name: "b/n".into(),
        }
        .encode_with(b"x");
        enc[0] = b'X';
        assert_eq!(
            ObjectHeader::decode(&Bytes::from(enc.clone())),
            Err(ObjectFormatError::BadMagic)
        );
        enc[0] = b'S';
        enc[6] = 200; // name longer than the needle
        assert!(matches!(
            ObjectHeader::decode(&Bytes::from(enc)),
            Err(ObjectFormatError::Short(_))
        ));
    }

    #[test]
    fn ids_differ_by_bucket_and_name() {
        let a = object_id("a", "bc");
        let b = object_id("ab", "c");
        let c = object_id("a", "bd");
        assert_ne!(a, b);
        assert_ne!(a, c);
        assert_eq!(a, object_id("a", "bc"));
    }
}
