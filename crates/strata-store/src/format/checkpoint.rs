//! Index checkpoint files: one per segment, written asynchronously, so that
//! opening a store mostly reads them instead of scanning segments.
//!
//! Header (64 bytes):
//! ```text
//! offset  size  field
//!      0     8  magic "STRATIDX"
//!      8     4  format version (u32, currently 1)
//!     12     4  kind: 1 active (a record list), 2 sealed (the compact index)
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
use crate::bits::{EliasFano, PackedArray};
use crate::index::{ActiveIndex, SealedIndex};
use crate::mphf::Mphf;
use std::sync::atomic::{AtomicU64, Ordering};

/// Checkpoint magic.
pub const MAGIC: [u8; 8] = *b"STRATIDX";
/// Checkpoint format version.
pub const VERSION: u32 = 1;
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

/// Encodes an active segment's index (offsets of all needles, then the
/// identity → ordinal entries).
pub fn encode_active(segment: u64, generation: u64, idx: &ActiveIndex) -> Vec<u8> {
    let mut body = Vec::with_capacity(idx.offsets.len() * 4 + idx.map.len() * 16 + 16);
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
    let h = CheckpointHeader {
        kind: KIND_ACTIVE,
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
    let bad = CheckpointError::Malformed("active body");
    let n = usize::try_from(h.needles).map_err(|_| bad)?;
    let mut r = Reader::new(body);
    if n.checked_add(1)
        .and_then(|x| x.checked_mul(4))
        .is_none_or(|x| x > body.len())
    {
        return Err(bad);
    }
    let mut offsets = Vec::with_capacity(n + 1);
    for _ in 0..=n {
        offsets.push(r.u32().ok_or(bad)?);
    }
    if offsets.windows(2).any(|w| w[0] > w[1]) || u64::from(offsets[n]) * 8 != h.covered_len {
        return Err(bad);
    }
    if (n + 1) % 2 == 1 {
        r.take(4).ok_or(bad)?;
    }
    let m = r.u64().ok_or(bad)?;
    if m.checked_mul(16).is_none_or(|x| x != r.remaining() as u64) {
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
    Ok(idx)
}

/// Encodes a sealed segment's compact index.
pub fn encode_sealed(segment: u64, generation: u64, idx: &SealedIndex) -> Vec<u8> {
    let mut b = Vec::with_capacity(idx.heap_bytes() + 128);
    let put64 = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    put64(&mut b, idx.entries);
    b.extend_from_slice(&idx.ord_bits.to_le_bytes());
    b.extend_from_slice(&idx.fp_bits.to_le_bytes());
    put64(&mut b, idx.mph.seed());
    put64(&mut b, idx.mph.slots());
    put64(&mut b, idx.mph.pilots().len() as u64);
    for p in idx.mph.pilots() {
        b.extend_from_slice(&p.to_le_bytes());
    }
    b.resize(b.len().next_multiple_of(8), 0);
    for &w in idx.slots.words() {
        put64(&mut b, w);
    }
    put64(&mut b, idx.offsets.universe());
    b.extend_from_slice(&idx.offsets.low().width().to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for &w in idx.offsets.low().words() {
        put64(&mut b, w);
    }
    put64(&mut b, idx.offsets.high().len() as u64);
    for &w in idx.offsets.high() {
        put64(&mut b, w);
    }
    for w in &idx.deleted {
        put64(&mut b, w.load(Ordering::Relaxed));
    }
    let covered = idx
        .offsets
        .get(idx.offsets.len().saturating_sub(1))
        .unwrap_or(0)
        * 8;
    let h = CheckpointHeader {
        kind: KIND_SEALED,
        segment,
        generation,
        covered_len: covered,
        needles: idx.needle_count(),
    };
    let mut out = encode_header(&h, &b).to_vec();
    out.extend_from_slice(&b);
    out
}

/// Decodes a sealed checkpoint's body into the compact index.
pub fn decode_sealed(h: &CheckpointHeader, body: &[u8]) -> Result<SealedIndex, CheckpointError> {
    if h.kind != KIND_SEALED {
        return Err(CheckpointError::Malformed("not a sealed checkpoint"));
    }
    let m = |what| CheckpointError::Malformed(what);
    let mut r = Reader::new(body);
    let entries = r.u64().ok_or(m("entries"))?;
    let ord_bits = r.u32().ok_or(m("ordinal bits"))?;
    let fp_bits = r.u32().ok_or(m("fingerprint bits"))?;
    if ord_bits == 0 || fp_bits == 0 || ord_bits + fp_bits > 64 {
        return Err(m("field widths"));
    }
    let seed = r.u64().ok_or(m("seed"))?;
    let nslots = r.u64().ok_or(m("slots"))?;
    let nbuckets = r.u64().ok_or(m("buckets"))?;
    if nbuckets
        .checked_mul(2)
        .is_none_or(|x| x > r.remaining() as u64)
        || nslots
            .checked_mul(u64::from(ord_bits + fp_bits))
            .is_none_or(|x| x / 8 > r.remaining() as u64)
    {
        return Err(m("table sizes"));
    }
    let mut pilots = Vec::with_capacity(nbuckets as usize);
    for _ in 0..nbuckets {
        pilots.push(r.u16().ok_or(m("pilots"))?);
    }
    let pad = (nbuckets as usize * 2).next_multiple_of(8) - nbuckets as usize * 2;
    r.take(pad).ok_or(m("pilot padding"))?;
    let mph = Mphf::from_parts(seed, nslots, pilots).ok_or(m("perfect hash"))?;
    let width = ord_bits + fp_bits;
    let slot_words = r
        .words((nslots * u64::from(width)).div_ceil(64))
        .ok_or(m("slot table"))?;
    let slots =
        PackedArray::from_parts(width, nslots as usize, slot_words).ok_or(m("slot table"))?;
    let universe = r.u64().ok_or(m("universe"))?;
    let low_width = r.u32().ok_or(m("low width"))?;
    r.u32().ok_or(m("reserved"))?;
    let count = h.needles.checked_add(1).ok_or(m("needles"))?;
    if low_width > 64
        || count
            .checked_mul(u64::from(low_width))
            .is_none_or(|x| x / 8 > r.remaining() as u64)
    {
        return Err(m("offsets"));
    }
    let low_words = r
        .words((count * u64::from(low_width)).div_ceil(64))
        .ok_or(m("offsets"))?;
    let low = PackedArray::from_parts(low_width, count as usize, low_words).ok_or(m("offsets"))?;
    let high_len = r.u64().ok_or(m("offsets"))?;
    let high = r.words(high_len).ok_or(m("offsets"))?;
    let offsets = EliasFano::from_parts(count as usize, universe, low, high).ok_or(m("offsets"))?;
    if offsets.get(count as usize - 1).map(|e| e * 8) != Some(h.covered_len) {
        return Err(m("covered length"));
    }
    let deleted: Vec<AtomicU64> = r
        .words(h.needles.div_ceil(64))
        .ok_or(m("deleted bitmap"))?
        .into_iter()
        .map(AtomicU64::new)
        .collect();
    if r.remaining() != 0 {
        return Err(m("trailing bytes"));
    }
    let idx = SealedIndex {
        mph,
        slots,
        ord_bits,
        fp_bits,
        offsets,
        deleted,
        entries,
    };
    // Every occupied slot must name a needle that exists.
    if idx.indexed_ordinals().any(|o| u64::from(o) >= h.needles) {
        return Err(m("ordinal out of range"));
    }
    Ok(idx)
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
        let s = a.seal(9, 24).unwrap();
        s.set_deleted(7);
        let bytes = encode_sealed(5, 2, &s);
        let (h, body) = parse(&bytes).unwrap();
        let t = decode_sealed(&h, body).unwrap();
        for (&(k, alt), &ord) in &a.map {
            assert_eq!(t.lookup(k, alt), Some(ord));
            assert_eq!(t.needle(ord), a.needle(ord));
        }
        assert!(t.is_deleted(7));
        for i in (0..bytes.len()).step_by(13) {
            let mut c = bytes.clone();
            c[i] ^= 0x10;
            assert!(parse(&c).is_err(), "flip at byte {i} undetected");
        }
        assert!(parse(&bytes[..bytes.len() - 1]).is_err());
    }
}
