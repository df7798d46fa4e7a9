//! Index checkpoint files: one per segment, written asynchronously, so that
//! opening a store mostly reads them instead of scanning segments.
//!
//! Header, version 3 (80 bytes):
//! ```text
//! offset  size  field
//!      0     8  magic "STRATIDX"
//!      8     4  format version (u32, currently 3; version 2 files, with a
//!               64-byte header and one CRC over the body, are still read;
//!               version 1 files are ignored, and their segments scanned)
//!     12     4  kind: 1 active, 2 sealed (same body, plus deleted bits)
//!     16     8  segment id
//!     24     8  segment generation
//!     32     8  covered length: the segment bytes the checkpoint describes
//!               (end of the last needle it knows)
//!     40     8  needle count n (needles in file order up to covered length)
//!     48     8  entry count m
//!     56     8  live bytes: the needles the entries name that are not
//!               marked deleted, summed
//!     64     4  CRC32C of the offsets section
//!     68     4  CRC32C of the identities section
//!     72     4  zero
//!     76     4  CRC32C of bytes 0..76
//! ```
//! then the offsets section (offsets, deleted bits) and the identities
//! section (m entries), so that an open that needs no identities (a segment
//! the node-wide run covers) reads the header and the offsets section only.
//! The layouts are in docs/store-format.md; both are sequences of
//! little-endian integers.

use super::{le_u32, le_u64, Reader};
use crate::index::ActiveIndex;

/// Checkpoint magic.
pub const MAGIC: [u8; 8] = *b"STRATIDX";
/// Checkpoint format version written.
pub const VERSION: u32 = 3;
/// The previous version, still read.
pub const VERSION_2: u32 = 2;
/// Header length (version 3).
pub const HEADER_LEN: usize = 80;
/// Header length of a version-2 checkpoint.
pub const HEADER_LEN_V2: usize = 64;
/// Kind code of an active-segment checkpoint.
pub const KIND_ACTIVE: u32 = 1;
/// Kind code of a sealed-segment checkpoint.
pub const KIND_SEALED: u32 = 2;

/// What a checkpoint describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckpointHeader {
    /// Format version of the file ([`VERSION`] or [`VERSION_2`]).
    pub version: u32,
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
    /// Live bytes as the header says (version 3; None for version 2, whose
    /// decoders sum them from the entries).
    pub live_bytes: Option<u64>,
    /// Entries listed (version 3; for version 2, from the body).
    entries: u64,
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

/// Bytes of the offsets section of a version-3 checkpoint of `n` needles:
/// n + 1 offsets padded to 8 bytes, then the deleted bitmap.
fn offsets_section_len(n: u64) -> Option<u64> {
    let offs = n
        .checked_add(1)?
        .checked_mul(4)?
        .checked_next_multiple_of(8)?;
    offs.checked_add(n.div_ceil(64).checked_mul(8)?)
}

/// Parses and checks a version-3 header (magic, version, CRC); returns it
/// and the lengths of its two sections.
fn parse_header_v3(bytes: &[u8]) -> Result<(CheckpointHeader, u64, u64), CheckpointError> {
    let inv = CheckpointError::Invalid;
    if bytes.len() < HEADER_LEN {
        return Err(inv("truncated header"));
    }
    if le_u32(bytes, 76) != crc32c::crc32c(&bytes[0..76]) {
        return Err(inv("header checksum mismatch"));
    }
    if le_u32(bytes, 72) != 0 {
        return Err(inv("reserved header bytes"));
    }
    let h = CheckpointHeader {
        version: VERSION,
        kind: le_u32(bytes, 12),
        segment: le_u64(bytes, 16),
        generation: le_u64(bytes, 24),
        covered_len: le_u64(bytes, 32),
        needles: le_u64(bytes, 40),
        entries: le_u64(bytes, 48),
        live_bytes: Some(le_u64(bytes, 56)),
    };
    let a = offsets_section_len(h.needles).ok_or(inv("needle count"))?;
    let b = h.entries.checked_mul(16).ok_or(inv("entry count"))?;
    Ok((h, a, b))
}

/// The version of the checkpoint whose first bytes are `bytes`, if the
/// magic is there.
fn version_of(bytes: &[u8]) -> Result<u32, CheckpointError> {
    if bytes.len() < 12 {
        return Err(CheckpointError::Invalid("truncated header"));
    }
    if bytes[0..8] != MAGIC {
        return Err(CheckpointError::Invalid("bad magic"));
    }
    Ok(le_u32(bytes, 8))
}

/// Parses and checks a checkpoint's header and checksums (version 3: the
/// header's and both sections'; version 2: the header's and the body's);
/// returns the header and the body.
pub fn parse(bytes: &[u8]) -> Result<(CheckpointHeader, &[u8]), CheckpointError> {
    let inv = CheckpointError::Invalid;
    match version_of(bytes)? {
        VERSION => {
            let (h, a, b) = parse_header_v3(bytes)?;
            let body = &bytes[HEADER_LEN..];
            if a.checked_add(b) != Some(body.len() as u64) {
                return Err(inv("body length"));
            }
            let (sa, sb) = body.split_at(a as usize);
            if le_u32(bytes, 64) != crc32c::crc32c(sa) {
                return Err(inv("offsets checksum mismatch"));
            }
            if le_u32(bytes, 68) != crc32c::crc32c(sb) {
                return Err(inv("identities checksum mismatch"));
            }
            Ok((h, body))
        }
        VERSION_2 => parse_v2(bytes),
        _ => Err(inv("unsupported version")),
    }
}

fn parse_v2(bytes: &[u8]) -> Result<(CheckpointHeader, &[u8]), CheckpointError> {
    let inv = CheckpointError::Invalid;
    if bytes.len() < HEADER_LEN_V2 {
        return Err(inv("truncated header"));
    }
    if le_u32(bytes, 60) != crc32c::crc32c(&bytes[0..60]) {
        return Err(inv("header checksum mismatch"));
    }
    let body_len = le_u64(bytes, 48);
    let body = usize::try_from(body_len)
        .ok()
        .and_then(|l| bytes.get(HEADER_LEN_V2..HEADER_LEN_V2.checked_add(l)?))
        .ok_or(inv("truncated body"))?;
    if le_u32(bytes, 56) != crc32c::crc32c(body) {
        return Err(inv("body checksum mismatch"));
    }
    let n = le_u64(bytes, 40);
    // The entry count follows the padded offsets.
    let at = n
        .checked_add(1)
        .and_then(|x| x.checked_mul(4))
        .and_then(|x| x.checked_next_multiple_of(8))
        .and_then(|x| usize::try_from(x).ok());
    let entries = at
        .and_then(|at| body.get(at..at.checked_add(8)?))
        .map_or(0, |b| le_u64(b, 0));
    let h = CheckpointHeader {
        version: VERSION_2,
        kind: le_u32(bytes, 12),
        segment: le_u64(bytes, 16),
        generation: le_u64(bytes, 24),
        covered_len: le_u64(bytes, 32),
        needles: n,
        entries,
        live_bytes: None,
    };
    Ok((h, body))
}

/// How many bytes from the start of a checkpoint file [`parse_prefix`]
/// needs: for a version-3 file, the header and the offsets section (the
/// identities section is not read); None for other versions (read the
/// whole file then). `header` holds the file's first [`HEADER_LEN`] bytes
/// or all of a shorter file.
pub fn prefix_len(header: &[u8]) -> Option<u64> {
    if version_of(header).ok()? != VERSION {
        return None;
    }
    let (_, a, _) = parse_header_v3(header).ok()?;
    a.checked_add(HEADER_LEN as u64)
}

/// Parses a version-3 checkpoint's header and offsets section (`bytes`:
/// the file's first [`prefix_len`] bytes; anything after is ignored) and
/// checks their checksums; the identities section is neither read nor
/// checked. Returns the header and the offsets section.
pub fn parse_prefix(bytes: &[u8]) -> Result<(CheckpointHeader, &[u8]), CheckpointError> {
    if version_of(bytes)? != VERSION {
        return Err(CheckpointError::Invalid("not a version-3 checkpoint"));
    }
    let (h, a, _) = parse_header_v3(bytes)?;
    let sa = usize::try_from(a)
        .ok()
        .and_then(|a| bytes.get(HEADER_LEN..HEADER_LEN.checked_add(a)?))
        .ok_or(CheckpointError::Invalid("truncated offsets section"))?;
    if le_u32(bytes, 64) != crc32c::crc32c(sa) {
        return Err(CheckpointError::Invalid("offsets checksum mismatch"));
    }
    Ok((h, sa))
}

/// Decodes a sealed checkpoint's offsets section (from [`parse_prefix`]):
/// its offsets, deleted bits and the header's live bytes, no entries.
pub fn decode_sealed_prefix(
    h: &CheckpointHeader,
    section: &[u8],
) -> Result<SealedParts, CheckpointError> {
    if h.kind != KIND_SEALED {
        return Err(CheckpointError::Malformed("not a sealed checkpoint"));
    }
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let l = layout(h, section, false)?;
    let offsets = decode_offsets(h, l.offsets)?;
    let deleted = Reader::new(l.deleted)
        .words(l.deleted.len() as u64 / 8)
        .ok_or(bad)?;
    Ok(SealedParts {
        offsets,
        entries: Vec::new(),
        deleted,
        live_bytes: h.live_bytes.ok_or(bad)?,
    })
}

/// Where the parts of a body lie.
struct Layout<'a> {
    offsets: &'a [u8],
    deleted: &'a [u8],
    entries: &'a [u8],
}

/// Splits a body of either version (or, `with_entries` false, a version-3
/// offsets section alone) into its parts, checking every size.
fn layout<'a>(
    h: &CheckpointHeader,
    body: &'a [u8],
    with_entries: bool,
) -> Result<Layout<'a>, CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let n = usize::try_from(h.needles).map_err(|_| bad)?;
    let offs = n.checked_add(1).and_then(|x| x.checked_mul(4)).ok_or(bad)?;
    let padded = offs.checked_next_multiple_of(8).ok_or(bad)?;
    let words = n.div_ceil(64) * 8;
    let mut r = Reader::new(body);
    let offsets = r.take(offs).ok_or(bad)?;
    r.take(padded - offs).ok_or(bad)?;
    let (deleted, entries) = if h.version == VERSION_2 {
        let m = r.u64().ok_or(bad)?;
        let elen = usize::try_from(m)
            .ok()
            .and_then(|m| m.checked_mul(16))
            .ok_or(bad)?;
        let entries = r.take(elen).ok_or(bad)?;
        (r.take(words).ok_or(bad)?, entries)
    } else {
        let deleted = r.take(words).ok_or(bad)?;
        let elen = if with_entries {
            usize::try_from(h.entries)
                .ok()
                .and_then(|m| m.checked_mul(16))
                .ok_or(bad)?
        } else {
            0
        };
        (deleted, r.take(elen).ok_or(bad)?)
    };
    if r.remaining() != 0 {
        return Err(bad);
    }
    Ok(Layout {
        offsets,
        deleted,
        entries,
    })
}

fn encode_header(h: &CheckpointHeader, entries: u64, sa: &[u8], sb: &[u8]) -> [u8; HEADER_LEN] {
    let mut b = [0u8; HEADER_LEN];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[12..16].copy_from_slice(&h.kind.to_le_bytes());
    b[16..24].copy_from_slice(&h.segment.to_le_bytes());
    b[24..32].copy_from_slice(&h.generation.to_le_bytes());
    b[32..40].copy_from_slice(&h.covered_len.to_le_bytes());
    b[40..48].copy_from_slice(&h.needles.to_le_bytes());
    b[48..56].copy_from_slice(&entries.to_le_bytes());
    b[56..64].copy_from_slice(&h.live_bytes.unwrap_or(0).to_le_bytes());
    b[64..68].copy_from_slice(&crc32c::crc32c(sa).to_le_bytes());
    b[68..72].copy_from_slice(&crc32c::crc32c(sb).to_le_bytes());
    let crc = crc32c::crc32c(&b[0..76]);
    b[76..80].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Encodes an active segment's checkpoint: the offsets of all its needles
/// and its identity → ordinal entries.
pub fn encode_active(segment: u64, generation: u64, idx: &ActiveIndex) -> Vec<u8> {
    encode(KIND_ACTIVE, segment, generation, idx, &[])
}

/// Encodes a sealed segment's checkpoint: as an active one, with the
/// deleted bitmap (bit i = needle i).
pub fn encode_sealed(segment: u64, generation: u64, idx: &ActiveIndex, deleted: &[u64]) -> Vec<u8> {
    encode(KIND_SEALED, segment, generation, idx, deleted)
}

fn encode(kind: u32, segment: u64, generation: u64, idx: &ActiveIndex, deleted: &[u64]) -> Vec<u8> {
    let n = idx.needle_count() as usize;
    let words: Vec<u64> = (0..n.div_ceil(64))
        .map(|i| {
            if kind == KIND_SEALED {
                deleted.get(i).copied().unwrap_or(0)
            } else {
                0
            }
        })
        .collect();
    let mut sa = Vec::with_capacity(idx.offsets.len() * 4 + words.len() * 8 + 8);
    for &o in &idx.offsets {
        sa.extend_from_slice(&o.to_le_bytes());
    }
    sa.resize(sa.len().next_multiple_of(8), 0);
    for w in &words {
        sa.extend_from_slice(&w.to_le_bytes());
    }
    let mut entries: Vec<(u64, u32, u32)> = idx.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect();
    entries.sort_unstable_by_key(|e| e.2);
    let mut sb = Vec::with_capacity(entries.len() * 16);
    let mut live = 0u64;
    for &(k, a, o) in &entries {
        sb.extend_from_slice(&k.to_le_bytes());
        sb.extend_from_slice(&a.to_le_bytes());
        sb.extend_from_slice(&o.to_le_bytes());
        let ou = o as usize;
        if words.get(ou / 64).is_none_or(|w| w & (1 << (ou % 64)) == 0) {
            live += idx.needle(o).map_or(0, |(_, len)| len);
        }
    }
    let h = CheckpointHeader {
        version: VERSION,
        kind,
        segment,
        generation,
        covered_len: idx.end(),
        needles: idx.needle_count(),
        entries: entries.len() as u64,
        live_bytes: Some(live),
    };
    let mut out = encode_header(&h, entries.len() as u64, &sa, &sb).to_vec();
    out.extend_from_slice(&sa);
    out.extend_from_slice(&sb);
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
    let l = layout(h, body, true)?;
    let offsets = decode_offsets(h, l.offsets)?;
    let deleted = Reader::new(l.deleted)
        .words(l.deleted.len() as u64 / 8)
        .ok_or(bad)?;
    let mut entries = Vec::with_capacity(if keep_entries {
        l.entries.len() / 16
    } else {
        0
    });
    let mut next = 0u64;
    let mut live_bytes = 0u64;
    for e in l.entries.chunks_exact(16) {
        let k = le_u64(e, 0);
        let a = le_u32(e, 8);
        let o = le_u32(e, 12);
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
    // A version-3 header's live bytes are what its entries say.
    if h.live_bytes.is_some_and(|l| l != live_bytes) {
        return Err(bad);
    }
    Ok(SealedParts {
        offsets,
        entries,
        deleted,
        live_bytes,
    })
}

/// The n + 1 offsets, checked: non-decreasing, the last one the covered
/// length.
fn decode_offsets(h: &CheckpointHeader, raw: &[u8]) -> Result<Vec<u32>, CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let offsets: Vec<u32> = raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let last = offsets.last().copied().ok_or(bad)?;
    if offsets.windows(2).any(|w| w[0] > w[1]) || u64::from(last) * 8 != h.covered_len {
        return Err(bad);
    }
    Ok(offsets)
}

fn decode(h: &CheckpointHeader, body: &[u8]) -> Result<(ActiveIndex, Vec<u64>), CheckpointError> {
    let bad = CheckpointError::Malformed("segment checkpoint body");
    let parts = decode_parts_of_any_kind(h, body, true)?;
    let mut idx = ActiveIndex::new(0);
    idx.offsets = parts.offsets;
    idx.map.reserve(parts.entries.len());
    for (k, a, o) in parts.entries {
        if idx.map.insert((k, a), o).is_some() {
            return Err(bad);
        }
    }
    Ok((idx, parts.deleted))
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
        let first_entry = ((n + 1) * 4).next_multiple_of(8) + n.div_ceil(64) * 8;
        let mut b = body.to_vec();
        b[first_entry + 12..first_entry + 16].copy_from_slice(&(n as u32).to_le_bytes());
        for keep in [true, false] {
            assert!(
                decode_sealed_parts_opt(&h, &b, keep).is_err(),
                "keep {keep}"
            );
        }
    }

    /// An open of a segment the run covers reads the header and the
    /// offsets section only: what it gets is what the whole file says, a
    /// flip in those bytes is caught, and the identities section is not
    /// looked at.
    #[test]
    fn prefix_is_enough_and_checked() {
        let a = sample();
        let mut del = vec![0u64; 3000usize.div_ceil(64)];
        del[1] = 1 << 9;
        let bytes = encode_sealed(8, 1, &a, &del);
        let plen = prefix_len(&bytes[..HEADER_LEN]).unwrap() as usize;
        assert!(plen < bytes.len() / 3, "prefix {plen} of {}", bytes.len());
        let (h, body) = parse(&bytes).unwrap();
        let full = decode_sealed_parts(&h, body).unwrap();
        let (hp, sec) = parse_prefix(&bytes[..plen]).unwrap();
        assert_eq!(hp, h);
        let pre = decode_sealed_prefix(&hp, sec).unwrap();
        assert_eq!(
            (&pre.offsets, &pre.deleted, pre.live_bytes),
            (&full.offsets, &full.deleted, full.live_bytes)
        );
        assert!(pre.entries.is_empty());
        for i in 0..plen {
            let mut c = bytes[..plen].to_vec();
            c[i] ^= 0x20;
            let ok = parse_prefix(&c).and_then(|(h, s)| decode_sealed_prefix(&h, s));
            assert!(ok.is_err(), "flip at byte {i} undetected");
        }
        // A flip in the identities section: the prefix does not see it,
        // the whole file does.
        let mut c = bytes.clone();
        c[plen + 20] ^= 1;
        assert!(parse_prefix(&c[..plen]).is_ok());
        assert!(parse(&c).is_err());
        // An active checkpoint is not decoded as a sealed prefix.
        let act = encode_active(8, 1, &a);
        let plen = prefix_len(&act[..HEADER_LEN]).unwrap() as usize;
        let (h, sec) = parse_prefix(&act[..plen]).unwrap();
        assert!(decode_sealed_prefix(&h, sec).is_err());
    }

    /// Version-2 bytes (64-byte header, one CRC, the entry count and the
    /// entries before the deleted bits) still decode to the same index.
    #[test]
    fn version_2_bytes_decode() {
        let a = sample();
        let n = a.needle_count() as usize;
        let mut del = vec![0u64; n.div_ceil(64)];
        del[2] = 1 << 4;
        let mut body = Vec::new();
        for &o in &a.offsets {
            body.extend_from_slice(&o.to_le_bytes());
        }
        body.resize(body.len().next_multiple_of(8), 0);
        body.extend_from_slice(&(a.map.len() as u64).to_le_bytes());
        let mut e: Vec<(u64, u32, u32)> = a.map.iter().map(|(&(k, x), &o)| (k, x, o)).collect();
        e.sort_unstable_by_key(|e| e.2);
        for (k, x, o) in e {
            body.extend_from_slice(&k.to_le_bytes());
            body.extend_from_slice(&x.to_le_bytes());
            body.extend_from_slice(&o.to_le_bytes());
        }
        for w in &del {
            body.extend_from_slice(&w.to_le_bytes());
        }
        let mut b = vec![0u8; HEADER_LEN_V2];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&VERSION_2.to_le_bytes());
        b[12..16].copy_from_slice(&KIND_SEALED.to_le_bytes());
        b[16..24].copy_from_slice(&5u64.to_le_bytes());
        b[32..40].copy_from_slice(&a.end().to_le_bytes());
        b[40..48].copy_from_slice(&(n as u64).to_le_bytes());
        b[48..56].copy_from_slice(&(body.len() as u64).to_le_bytes());
        b[56..60].copy_from_slice(&crc32c::crc32c(&body).to_le_bytes());
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b.extend_from_slice(&body);
        assert_eq!(prefix_len(&b[..HEADER_LEN]), None);
        let (h, body) = parse(&b).unwrap();
        assert_eq!((h.version, h.live_bytes), (VERSION_2, None));
        let (t, d) = decode_sealed(&h, body).unwrap();
        assert_eq!(
            (t.map, t.offsets, d),
            (a.map.clone(), a.offsets.clone(), del.clone())
        );
        let v3 = encode_sealed(5, 0, &a, &del);
        let (h3, body3) = parse(&v3).unwrap();
        assert_eq!(
            decode_sealed_parts(&h, body).unwrap(),
            decode_sealed_parts(&h3, body3).unwrap()
        );
    }
}
