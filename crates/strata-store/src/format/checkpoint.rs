//! Index checkpoint files: one per segment, written asynchronously, so that
//! opening a store mostly reads them instead of scanning segments.
//!
//! Header (64 bytes):
//! ```text
//! offset  size  field
//!      0     8  magic "STRATIDX"
//!      8     4  format version (u32, currently 2; version 1 files are
//!               ignored, and their segments scanned)
//!     12     4  kind: 1 active, 2 sealed (same body, plus deleted bits)
//!     16     8  segment id
//!     24     8  segment generation
//!     32     8  covered length: the segment bytes the checkpoint describes
//!               (end of the last needle it knows)
//!     40     8  needle count n (needles in file order up to covered length)
//!     48     8  body length in bytes
//!     56     4  CRC32C of the body
//!     60     4  CRC32C of bytes 0..60
//! ```
//! The body layouts are in docs/store-format.md; both are sequences of
//! little-endian integers.

use super::{le_u32, le_u64, Reader};
use crate::index::ActiveIndex;

/// Checkpoint magic.
pub const MAGIC: [u8; 8] = *b"STRATIDX";
/// Checkpoint format version.
pub const VERSION: u32 = 2;
/// Header length.
pub const HEADER_LEN: usize = 64;
/// Kind code of an active-segment checkpoint.
pub const KIND_ACTIVE: u32 = 1;
/// Kind code of a sealed-segment checkpoint.
pub const KIND_SEALED: u32 = 2;

/// What a checkpoint describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointHeader {
    /// [`KIND_ACTIVE`] or [`KIND_SEALED`].
    pub kind: u32,
    /// Segment id.
    pub segment: u64,
    /// Segment generation.
    pub generation: u64,
    /// Bytes of the segment covered.
    pub covered_len: u64,
    /// Needles covered.
    pub needles: u64,
}

/// What is wrong with bytes that should be a checkpoint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CheckpointError {
    /// Too short, bad magic, version or checksum.
    #[error("not a valid Strata index checkpoint ({0})")]
    Invalid(&'static str),
    /// The body does not decode.
    #[error("index checkpoint body is malformed ({0})")]
    Malformed(&'static str),
}

fn encode_header(h: &CheckpointHeader, body: &[u8]) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.kind.to_le_bytes());
    b[16..24].copy_from_slice(&h.segment.to_le_bytes());
    b[24..32].copy_from_slice(&h.generation.to_le_bytes());
    b[32..40].copy_from_slice(&h.covered_len.to_le_bytes());
    b[40..48].copy_from_slice(&h.needles.to_le_bytes());
    b[48..56].copy_from_slice(&(body.len() as u64).to_le_bytes());
    b[56..60].copy_from_slice(&crc32c::crc32c(body).to_le_bytes());
    let crc = crc32c::crc32c(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Parses and checks a checkpoint's header and body checksum; returns the
/// header and the body.
pub fn parse(bytes: &[u8]) -> Result<(CheckpointHeader, &[u8]), CheckpointError> {
    if bytes.len() < HEADER_LEN {
        return Err(CheckpointError::Invalid("truncated header"));
    }
    if bytes[0..8] != MAGIC {
        return Err(CheckpointError::Invalid("bad magic"));
    }
    if le_u32(bytes, 60) != crc32c::crc32c(&bytes[0..60]) {
        return Err(CheckpointError::Invalid("header checksum mismatch"));
    }
    if le_u32(bytes, 8) != VERSION {
        return Err(CheckpointError::Invalid("unsupported version"));
    }
    let body_len = le_u64(bytes, 48);
    let body = usize::try_from(body_len)
        .ok()
        .and_then(|l| bytes.get(HEADER_LEN..HEADER_LEN.checked_add(l)?))
        .ok_or(CheckpointError::Invalid("truncated body"))?;
    if le_u32(bytes, 56) != crc32c::crc32c(body) {
        return Err(CheckpointError::Invalid("body checksum mismatch"));
    }
    let h = CheckpointHeader {
        kind: le_u32(bytes, 12),
        segment: le_u64(bytes, 16),
        generation: le_u64(bytes, 24),
        covered_len: le_u64(bytes, 32),
        needles: le_u64(bytes, 40),
    };
    Ok((h, body))
}

/// Encodes an active segment's checkpoint: the offsets of all its needles
/// and its identity → ordinal entries.
pub fn encode_active(segment: u64, generation: u64, idx: &ActiveIndex) -> Vec<u8> {
    encode(KIND_ACTIVE, segment, generation, idx, &[])
}

/// Encodes a sealed segment's checkpoint: as an active one, followed by the
/// deleted bitmap (bit i = needle i).
pub fn encode_sealed(segment: u64, generation: u64, idx: &ActiveIndex, deleted: &[u64]) -> Vec<u8> {
    encode(KIND_SEALED, segment, generation, idx, deleted)
}

fn encode(kind: u32, segment: u64, generation: u64, idx: &ActiveIndex, deleted: &[u64]) -> Vec<u8> {
    let n = idx.needle_count() as usize;
    let mut body = Vec::with_capacity(idx.offsets.len() * 4 + idx.map.len() * 16 + n / 8 + 24);
    for &o in &idx.offsets {
        body.extend_from_slice(&o.to_le_bytes());
    }
    body.resize(body.len().next_multiple_of(8), 0);
    body.extend_from_slice(&(idx.map.len() as u64).to_le_bytes());
    let mut entries: Vec<(u64, u32, u32)> = idx.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect();
    entries.sort_unstable_by_key(|e| e.2);
    for (k, a, o) in entries {
        body.extend_from_slice(&k.to_le_bytes());
        body.extend_from_slice(&a.to_le_bytes());
        body.extend_from_slice(&o.to_le_bytes());
    }
    for i in 0..n.div_ceil(64) {
        let w = if kind == KIND_SEALED {
            deleted.get(i).copied().unwrap_or(0)
        } else {
            0
        };
        body.extend_from_slice(&w.to_le_bytes());
    }
    let h = CheckpointHeader {
        kind,
        segment,
        generation,
        covered_len: idx.end(),
        needles: idx.needle_count(),
    };
    let mut out = encode_header(&h, &body).to_vec();
    out.extend_from_slice(&body);
    out
}

/// Decodes an active checkpoint's body.
pub fn decode_active(h: &CheckpointHeader, body: &[u8]) -> Result<ActiveIndex, CheckpointError> {
    if h.kind != KIND_ACTIVE {
        return Err(CheckpointError::Malformed("not an active checkpoint"));
    }
    decode(h, body).map(|(idx, _)| idx)
}

/// Decodes a sealed checkpoint's body: the segment's offsets and entries,
/// and its deleted bitmap words.
pub fn decode_sealed(
    h: &CheckpointHeader,
    body: &[u8],
) -> Result<(ActiveIndex, Vec<u64>), CheckpointError> {
    let parts = decode_sealed_parts(h, body)?;
    let mut idx = ActiveIndex::new(0);
    idx.offsets = parts.offsets;
    idx.map.reserve(parts.entries.len());
    for (k, a, o) in parts.entries {
        if idx.map.insert((k, a), o).is_some() {
            return Err(CheckpointError::Malformed("an identity twice"));
        }
    }
    Ok((idx, parts.deleted))
}

/// A sealed checkpoint's body as read on open: no hash map is built (the
/// entries of a segment the run covers are only counted).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SealedParts {
    /// Needle offsets in 8-byte units, then the covered length.
    pub offsets: Vec<u32>,
    /// (key, alternate key, ordinal), ordinals strictly increasing.
    pub entries: Vec<(u64, u32, u32)>,
    /// Deleted bitmap words.
    pub deleted: Vec<u64>,
    /// Bytes of the needles the entries name that are not marked deleted
    /// (the segment's live bytes as of the checkpoint).
    pub live_bytes: u64,
}

/// Decodes a sealed checkpoint's body without building a map.
pub fn decode_sealed_parts(
    h: &CheckpointHeader,
    body: &[u8],
) -> Result<SealedParts, CheckpointError> {
    decode_sealed_parts_opt(h, body, true)
}

/// [`decode_sealed_parts`], checking the entries the same way but, when
/// `keep_entries` is false, leaving them out of the result (a segment the
/// node-wide run covers needs only its offsets, deleted bits and live
/// bytes when the store opens: 16 bytes per needle it need not hold).
pub fn decode_sealed_parts_opt(
    h: &CheckpointHeader,
    body: &[u8],
    keep_entries: bool,
) -> Result<SealedParts, CheckpointError> {
    if h.kind != KIND_SEALED {
        return Err(CheckpointError::Malformed("not a sealed checkpoint"));
    }
    decode_parts_of_any_kind(h, body, keep_entries)
}

/// Decodes a checkpoint body of either kind without building a map (the
/// store reads an active segment's entries back this way when it writes
/// the segment's next checkpoint: RAM keeps no identities).
pub fn decode_parts_of_any_kind(
    h: &CheckpointHeader,
    body: &[u8],
    keep_entries: bool,
) -> Result<SealedParts, CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let n = usize::try_from(h.needles).map_err(|_| bad)?;
    let (offsets, mut r) = decode_offsets(h, body)?;
    let m = r.u64().ok_or(bad)?;
    let words = n.div_ceil(64) as u64;
    if m.checked_mul(16)
        .and_then(|x| x.checked_add(words * 8))
        .is_none_or(|x| x != r.remaining() as u64)
    {
        return Err(bad);
    }
    let raw = r.take(m as usize * 16).ok_or(bad)?;
    let deleted = r.words(words).ok_or(bad)?;
    let mut entries = Vec::with_capacity(if keep_entries { m as usize } else { 0 });
    let mut next = 0u64;
    let mut live_bytes = 0u64;
    for e in raw.chunks_exact(16) {
        let k = u64::from_le_bytes(e[0..8].try_into().map_err(|_| bad)?);
        let a = u32::from_le_bytes(e[8..12].try_into().map_err(|_| bad)?);
        let o = u32::from_le_bytes(e[12..16].try_into().map_err(|_| bad)?);
        if o as usize >= n || u64::from(o) < next {
            return Err(bad);
        }
        next = u64::from(o) + 1;
        let ou = o as usize;
        if deleted[ou / 64] & (1 << (ou % 64)) == 0 {
            live_bytes += u64::from(offsets[ou + 1] - offsets[ou]) * 8;
        }
        if keep_entries {
            entries.push((k, a, o));
        }
    }
    Ok(SealedParts {
        offsets,
        entries,
        deleted,
        live_bytes,
    })
}

fn decode_offsets<'a>(
    h: &CheckpointHeader,
    body: &'a [u8],
) -> Result<(Vec<u32>, Reader<'a>), CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let n = usize::try_from(h.needles).map_err(|_| bad)?;
    let mut r = Reader::new(body);
    if n.checked_add(1)
        .and_then(|x| x.checked_mul(4))
        .is_none_or(|x| x > body.len())
    {
        return Err(bad);
    }
    let raw = r.take((n + 1) * 4).ok_or(bad)?;
    let offsets: Vec<u32> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    if offsets.windows(2).any(|w| w[0] > w[1]) || u64::from(offsets[n]) * 8 != h.covered_len {
        return Err(bad);
    }
    if (n + 1) % 2 == 1 {
        r.take(4).ok_or(bad)?;
    }
    Ok((offsets, r))
}

fn decode(h: &CheckpointHeader, body: &[u8]) -> Result<(ActiveIndex, Vec<u64>), CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let n = usize::try_from(h.needles).map_err(|_| bad)?;
    let (offsets, mut r) = decode_offsets(h, body)?;
    let m = r.u64().ok_or(bad)?;
    let words = n.div_ceil(64) as u64;
    if m.checked_mul(16)
        .and_then(|x| x.checked_add(words * 8))
        .is_none_or(|x| x != r.remaining() as u64)
    {
        return Err(bad);
    }
    let mut idx = ActiveIndex::new(0);
    idx.offsets = offsets;
    idx.map.reserve(m as usize);
    for _ in 0..m {
        let k = r.u64().ok_or(bad)?;
        let a = r.u32().ok_or(bad)?;
        let o = r.u32().ok_or(bad)?;
        if o as usize >= n || idx.map.insert((k, a), o).is_some() {
            return Err(bad);
        }
    }
    let deleted = r.words(words).ok_or(bad)?;
    Ok((idx, deleted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ActiveIndex {
        let mut a = ActiveIndex::new(64);
        for i in 0..3000u64 {
            a.push(i % 2500, 1, 8 * (6 + i % 5));
        }
        a
    }

    #[test]
    fn active_roundtrip() {
        let a = sample();
        let bytes = encode_active(5, 0, &a);
        let (h, body) = parse(&bytes).unwrap();
        assert_eq!(
            (h.kind, h.segment, h.covered_len),
            (KIND_ACTIVE, 5, a.end())
        );
        let b = decode_active(&h, body).unwrap();
        assert_eq!(a.offsets, b.offsets);
        assert_eq!(a.map, b.map);
    }

    #[test]
    fn sealed_roundtrip_and_flips() {
        let a = sample();
        let mut del = vec![0u64; 3000usize.div_ceil(64)];
        del[0] = 1 << 7;
        let bytes = encode_sealed(5, 2, &a, &del);
        let (h, body) = parse(&bytes).unwrap();
        assert_eq!((h.kind, h.generation), (KIND_SEALED, 2));
        let (t, d) = decode_sealed(&h, body).unwrap();
        assert_eq!(t.map, a.map);
        assert_eq!(t.offsets, a.offsets);
        assert_eq!(d, del);
        assert!(decode_active(&h, body).is_err());
        for i in (0..bytes.len()).step_by(13) {
            let mut c = bytes.clone();
            c[i] ^= 0x10;
            assert!(parse(&c).is_err(), "flip at byte {i} undetected");
        }
        assert!(parse(&bytes[..bytes.len() - 1]).is_err());
    }

    /// Leaving the entries out (a segment the run covers) changes nothing
    /// else: same offsets, deleted bits and live bytes, and the same
    /// refusals of bad entries.
    #[test]
    fn sealed_parts_without_entries() {
        let a = sample();
        let mut del = vec![0u64; 3000usize.div_ceil(64)];
        del[0] = 1 << 7 | 1 << 2;
        del[40] = 1 << 3;
        let bytes = encode_sealed(5, 2, &a, &del);
        let (h, body) = parse(&bytes).unwrap();
        let full = decode_sealed_parts(&h, body).unwrap();
        let lite = decode_sealed_parts_opt(&h, body, false).unwrap();
        assert_eq!(full.entries.len(), a.map.len());
        assert!(lite.entries.is_empty());
        assert_eq!(
            (&lite.offsets, &lite.deleted),
            (&full.offsets, &full.deleted)
        );
        let live: u64 = a
            .map
            .values()
            .filter(|&&o| del[o as usize / 64] & (1 << (o % 64)) == 0)
            .map(|&o| u64::from(a.offsets[o as usize + 1] - a.offsets[o as usize]) * 8)
            .sum();
        assert_eq!((full.live_bytes, lite.live_bytes), (live, live));
        // An entry naming a needle past the end, given to the decoder
        // directly (past `parse`'s CRC): only the entry check can catch it.
        let n = h.needles as usize;
        let first_entry = (n + 1) * 4 + if (n + 1) % 2 == 1 { 4 } else { 0 } + 8;
        let mut b = body.to_vec();
        b[first_entry + 12..first_entry + 16].copy_from_slice(&(n as u32).to_le_bytes());
        for keep in [true, false] {
            assert!(
                decode_sealed_parts_opt(&h, &b, keep).is_err(),
                "keep {keep}"
            );
        }
    }
}
