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
use crate::index::ActiveIndex;
use crate::mphf::Mphf;
use crate::nodeindex::{Loc, Run};

/// Checkpoint magic.
pub const MAGIC: [u8; 8] = *b"STRATIDX";
/// Checkpoint format version (2: the node-wide run file; per-segment
/// checkpoints are always of the active kind).
pub const VERSION: u32 = 2;
/// Version 1 checkpoints of the active kind have the same layout and are
/// read; version 1 sealed checkpoints are not (their segment is scanned).
pub const VERSION_1: u32 = 1;
/// Header length.
pub const HEADER_LEN: usize = 64;
/// Kind code of an active-segment checkpoint.
pub const KIND_ACTIVE: u32 = 1;
/// Kind code of a version 1 sealed-segment checkpoint (no longer read).
pub const KIND_SEALED_V1: u32 = 2;
/// Kind code of the node index's run file.
pub const KIND_RUN: u32 = 3;

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
    let version = le_u32(bytes, 8);
    if version != VERSION && !(version == VERSION_1 && le_u32(bytes, 12) == KIND_ACTIVE) {
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

fn put64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_ef(b: &mut Vec<u8>, ef: &EliasFano) {
    put64(b, ef.universe());
    b.extend_from_slice(&ef.low().width().to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for &w in ef.low().words() {
        put64(b, w);
    }
    put64(b, ef.high().len() as u64);
    for &w in ef.high() {
        put64(b, w);
    }
}

fn read_ef(r: &mut Reader<'_>, count: u64) -> Option<EliasFano> {
    let universe = r.u64()?;
    let low_width = r.u32()?;
    r.u32()?;
    if low_width > 64
        || count
            .checked_mul(u64::from(low_width))
            .is_none_or(|x| x / 8 > r.remaining() as u64)
    {
        return None;
    }
    let low_words = r.words((count * u64::from(low_width)).div_ceil(64))?;
    let low = PackedArray::from_parts(low_width, usize::try_from(count).ok()?, low_words)?;
    let high_len = r.u64()?;
    let high = r.words(high_len)?;
    EliasFano::from_parts(count as usize, universe, low, high)
}

/// One segment covered by a run file.
#[derive(Clone, Debug, PartialEq)]
pub struct RunSegment {
    /// Segment id.
    pub id: u32,
    /// Generation the run was built over (or last renumbered for).
    pub generation: u64,
    /// Garbage bytes known when the run file was written.
    pub garbage: u64,
    /// Offsets of its needles in 8-byte units, and the end of the last.
    pub offsets: EliasFano,
}

/// The node index's merged part as stored in the run file.
#[derive(Clone, Debug)]
pub struct RunFile {
    /// Run sequence number (bumped by each merge).
    pub sequence: u64,
    /// The perfect-hash table.
    pub run: Run,
    /// The segments it covers, with their needle offsets.
    pub segments: Vec<RunSegment>,
    /// Older versions in covered segments still indexed.
    pub older: Vec<(u64, u32, Loc)>,
}

/// Encodes the run file (kind [`KIND_RUN`]).
pub fn encode_run(f: &RunFile) -> Vec<u8> {
    let run = &f.run;
    let mut b = Vec::with_capacity(run.heap_bytes() + 1024);
    put64(&mut b, run.entries);
    for v in [run.ord_bits, run.seg_bits, run.fp_bits, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    put64(&mut b, run.mph.seed());
    put64(&mut b, run.mph.slots());
    put64(&mut b, run.mph.pilots().len() as u64);
    for p in run.mph.pilots() {
        b.extend_from_slice(&p.to_le_bytes());
    }
    b.resize(b.len().next_multiple_of(8), 0);
    for &w in run.slots.words() {
        put64(&mut b, w);
    }
    put64(&mut b, run.segs.len() as u64);
    for (id, s) in run.segs.iter().zip(&f.segments) {
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        // A segment the run no longer covers gets an impossible generation,
        // so that no open takes its (emptied) slots for its identities.
        let generation = if run.forgotten.contains(id) {
            u64::MAX
        } else {
            s.generation
        };
        put64(&mut b, generation);
        put64(&mut b, s.garbage);
        put64(&mut b, s.offsets.len() as u64);
        put_ef(&mut b, &s.offsets);
    }
    put64(&mut b, f.older.len() as u64);
    for &(k, a, l) in &f.older {
        put64(&mut b, k);
        b.extend_from_slice(&a.to_le_bytes());
        b.extend_from_slice(&l.seg.to_le_bytes());
        b.extend_from_slice(&l.ord.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
    }
    let h = CheckpointHeader {
        kind: KIND_RUN,
        segment: 0,
        generation: f.sequence,
        covered_len: 0,
        needles: run.entries,
    };
    let mut out = encode_header(&h, &b).to_vec();
    out.extend_from_slice(&b);
    out
}

/// Decodes a run file's body.
pub fn decode_run(h: &CheckpointHeader, body: &[u8]) -> Result<RunFile, CheckpointError> {
    if h.kind != KIND_RUN {
        return Err(CheckpointError::Malformed("not a run file"));
    }
    let m = |what| CheckpointError::Malformed(what);
    let mut r = Reader::new(body);
    let entries = r.u64().ok_or(m("entries"))?;
    let ord_bits = r.u32().ok_or(m("ordinal bits"))?;
    let seg_bits = r.u32().ok_or(m("segment bits"))?;
    let fp_bits = r.u32().ok_or(m("fingerprint bits"))?;
    r.u32().ok_or(m("reserved"))?;
    if ord_bits == 0 || seg_bits == 0 || fp_bits == 0 || ord_bits + seg_bits + fp_bits > 64 {
        return Err(m("field widths"));
    }
    let width = ord_bits + seg_bits + fp_bits;
    let seed = r.u64().ok_or(m("seed"))?;
    let nslots = r.u64().ok_or(m("slots"))?;
    let nbuckets = r.u64().ok_or(m("buckets"))?;
    if nbuckets
        .checked_mul(2)
        .is_none_or(|x| x > r.remaining() as u64)
        || nslots
            .checked_mul(u64::from(width))
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
    let slot_words = r
        .words((nslots * u64::from(width)).div_ceil(64))
        .ok_or(m("slot table"))?;
    let slots =
        PackedArray::from_parts(width, nslots as usize, slot_words).ok_or(m("slot table"))?;
    let nsegs = r.u64().ok_or(m("segment count"))?;
    if nsegs > r.remaining() as u64 / 40 || nsegs > 1u64 << seg_bits {
        return Err(m("segment count"));
    }
    let mut segs = Vec::with_capacity(nsegs as usize);
    let mut segments = Vec::with_capacity(nsegs as usize);
    for _ in 0..nsegs {
        let id = r.u32().ok_or(m("segment id"))?;
        r.u32().ok_or(m("segment id"))?;
        let generation = r.u64().ok_or(m("generation"))?;
        let garbage = r.u64().ok_or(m("garbage"))?;
        let n = r.u64().ok_or(m("needle count"))?;
        if n == 0 {
            return Err(m("needle count"));
        }
        let offsets = read_ef(&mut r, n).ok_or(m("offsets"))?;
        if segs.last().is_some_and(|&l| l >= id) {
            return Err(m("segment order"));
        }
        segs.push(id);
        segments.push(RunSegment {
            id,
            generation,
            garbage,
            offsets,
        });
    }
    let nolder = r.u64().ok_or(m("older count"))?;
    if nolder
        .checked_mul(24)
        .is_none_or(|x| x != r.remaining() as u64)
    {
        return Err(m("older versions"));
    }
    let mut older = Vec::with_capacity(nolder as usize);
    for _ in 0..nolder {
        let k = r.u64().ok_or(m("older"))?;
        let a = r.u32().ok_or(m("older"))?;
        let seg = r.u32().ok_or(m("older"))?;
        let ord = r.u32().ok_or(m("older"))?;
        r.u32().ok_or(m("older"))?;
        older.push((k, a, Loc { seg, ord }));
    }
    let run = Run {
        mph,
        slots,
        ord_bits,
        seg_bits,
        fp_bits,
        segs,
        entries,
        forgotten: Default::default(),
    };
    // Every occupied slot names a covered segment and a needle it has.
    for l in run.locations() {
        let Ok(i) = run.segs.binary_search(&l.seg) else {
            return Err(m("segment position out of range"));
        };
        if l.ord as usize + 1 >= segments[i].offsets.len() {
            return Err(m("ordinal out of range"));
        }
    }
    Ok(RunFile {
        sequence: h.generation,
        run,
        segments,
        older,
    })
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
    fn run_roundtrip_and_flips() {
        let a = sample();
        let mut entries: Vec<(u64, u32, Loc)> = a
            .map
            .iter()
            .map(|(&(k, alt), &o)| (k, alt, Loc { seg: 3, ord: o }))
            .collect();
        entries.sort_unstable();
        let run = Run::build(&entries, vec![3], a.needle_count(), 9, 14).unwrap();
        let units: Vec<u64> = a.offsets.iter().map(|&o| u64::from(o)).collect();
        let f = RunFile {
            sequence: 4,
            run,
            segments: vec![RunSegment {
                id: 3,
                generation: 1,
                garbage: 80,
                offsets: EliasFano::new(&units, *units.last().unwrap()).unwrap(),
            }],
            older: vec![(77, 1, Loc { seg: 3, ord: 5 })],
        };
        let bytes = encode_run(&f);
        let (h, body) = parse(&bytes).unwrap();
        let g = decode_run(&h, body).unwrap();
        assert_eq!(g.sequence, 4);
        assert_eq!(g.segments, f.segments);
        assert_eq!(g.older, f.older);
        for &(k, alt, l) in &entries {
            assert_eq!(g.run.lookup(k, alt).map(|x| x.1), Some(l));
        }
        for i in (0..bytes.len()).step_by(13) {
            let mut c = bytes.clone();
            c[i] ^= 0x10;
            assert!(parse(&c).is_err(), "flip at byte {i} undetected");
        }
        assert!(parse(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn version_1_active_checkpoints_are_read() {
        let a = sample();
        let mut bytes = encode_active(5, 0, &a);
        bytes[8..12].copy_from_slice(&VERSION_1.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[0..60]);
        bytes[60..64].copy_from_slice(&crc.to_le_bytes());
        let (h, body) = parse(&bytes).unwrap();
        assert_eq!(decode_active(&h, body).unwrap().map, a.map);
        bytes[12..16].copy_from_slice(&KIND_SEALED_V1.to_le_bytes());
        let crc = crc32c::crc32c(&bytes[0..60]);
        bytes[60..64].copy_from_slice(&crc.to_le_bytes());
        assert!(parse(&bytes).is_err(), "v1 sealed checkpoints are refused");
    }
}
