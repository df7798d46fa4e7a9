//! The run file: the node-wide index of the sealed segments, written by
//! every merge (crash-safely: temporary file, fdatasync, rename, directory
//! fsync), so that a restart loads it instead of rebuilding it.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "STRATRUN"
//!      8     4  format version (u32, currently 1)
//!     12     4  fingerprint bits f
//!     16     4  needle-number bits b (b + f <= 64)
//!     20     4  CRC32C of the keys section
//!     24     8  generation (bumped by every merge)
//!     32     8  segment count k
//!     40     8  identities held
//!     48     8  index section length in bytes
//!     56     4  CRC32C of the index section
//!     60     4  CRC32C of bytes 0..60
//! ```
//! then the index section and the keys section (docs/store-format.md).

use super::{le_u32, le_u64, Reader};
use crate::bits::PackedArray;
use crate::index::Run;
use crate::mphf::Mphf;

/// Run file magic.
pub const MAGIC: [u8; 8] = *b"STRATRUN";
/// Run file format version.
pub const VERSION: u32 = 1;
/// Header length.
pub const HEADER_LEN: usize = 64;
/// Name of the run file (in the first device directory).
pub const FILE_NAME: &str = "strata.run";

/// What is wrong with bytes that should be a run file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a valid Strata run file ({0})")]
pub struct RunFileError(pub &'static str);

/// Encodes a run and the identity held in each of its slots (`keys[s]`;
/// anything for empty slots).
pub fn encode(run: &Run, keys: &[(u64, u32)]) -> Vec<u8> {
    let mut idx = Vec::with_capacity(run.slots.words().len() * 8 + run.segments.len() * 16 + 64);
    let put64 = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    for &(id, n) in &run.segments {
        put64(&mut idx, id);
        put64(&mut idx, n);
    }
    put64(&mut idx, run.mph.seed());
    put64(&mut idx, run.mph.slots());
    put64(&mut idx, run.mph.pilots().len() as u64);
    for p in run.mph.pilots() {
        idx.extend_from_slice(&p.to_le_bytes());
    }
    idx.resize(idx.len().next_multiple_of(8), 0);
    for &w in run.slots.words() {
        put64(&mut idx, w);
    }
    let mut kb = Vec::with_capacity(run.slot_count() * 12);
    for s in 0..run.slot_count() {
        let (k, a) = keys.get(s).copied().unwrap_or((0, 0));
        kb.extend_from_slice(&k.to_le_bytes());
        kb.extend_from_slice(&a.to_le_bytes());
    }
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&run.fp_bits.to_le_bytes());
    h[16..20].copy_from_slice(&run.ref_bits.to_le_bytes());
    h[20..24].copy_from_slice(&crc32c::crc32c(&kb).to_le_bytes());
    h[24..32].copy_from_slice(&run.generation.to_le_bytes());
    h[32..40].copy_from_slice(&(run.segments.len() as u64).to_le_bytes());
    h[40..48].copy_from_slice(&run.entries.to_le_bytes());
    h[48..56].copy_from_slice(&(idx.len() as u64).to_le_bytes());
    h[56..60].copy_from_slice(&crc32c::crc32c(&idx).to_le_bytes());
    let crc = crc32c::crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    let mut out = h.to_vec();
    out.extend_from_slice(&idx);
    out.extend_from_slice(&kb);
    out
}

/// Writes a run file to `f` (from offset 0) as [`encode`] lays it out,
/// taking the identity of each slot, in slot order, from `keys` (exactly
/// `run.slot_count()` of them), so that a merge never holds the keys
/// section, or the file, in RAM.
pub fn write(
    f: &std::fs::File,
    run: &Run,
    keys: impl Iterator<Item = (u64, u32)>,
) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    let mut idx = Vec::with_capacity(run.slots.words().len() * 8 + run.segments.len() * 16 + 64);
    let put64 = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    for &(id, n) in &run.segments {
        put64(&mut idx, id);
        put64(&mut idx, n);
    }
    put64(&mut idx, run.mph.seed());
    put64(&mut idx, run.mph.slots());
    put64(&mut idx, run.mph.pilots().len() as u64);
    for p in run.mph.pilots() {
        idx.extend_from_slice(&p.to_le_bytes());
    }
    idx.resize(idx.len().next_multiple_of(8), 0);
    for &w in run.slots.words() {
        put64(&mut idx, w);
    }
    f.write_all_at(&idx, HEADER_LEN as u64)?;
    let idx_len = idx.len() as u64;
    let idx_crc = crc32c::crc32c(&idx);
    drop(idx);
    let mut at = (HEADER_LEN as u64) + idx_len;
    let mut kcrc = 0u32;
    let mut buf: Vec<u8> = Vec::with_capacity(12 << 16);
    let mut n = 0usize;
    for (k, a) in keys {
        buf.extend_from_slice(&k.to_le_bytes());
        buf.extend_from_slice(&a.to_le_bytes());
        n += 1;
        if buf.len() >= 12 << 16 {
            kcrc = crc32c::crc32c_append(kcrc, &buf);
            f.write_all_at(&buf, at)?;
            at += buf.len() as u64;
            buf.clear();
        }
    }
    kcrc = crc32c::crc32c_append(kcrc, &buf);
    f.write_all_at(&buf, at)?;
    if n != run.slot_count() {
        return Err(std::io::Error::other("run file: wrong number of keys"));
    }
    let mut h = [0u8; HEADER_LEN];
    h[0..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[12..16].copy_from_slice(&run.fp_bits.to_le_bytes());
    h[16..20].copy_from_slice(&run.ref_bits.to_le_bytes());
    h[20..24].copy_from_slice(&kcrc.to_le_bytes());
    h[24..32].copy_from_slice(&run.generation.to_le_bytes());
    h[32..40].copy_from_slice(&(run.segments.len() as u64).to_le_bytes());
    h[40..48].copy_from_slice(&run.entries.to_le_bytes());
    h[48..56].copy_from_slice(&idx_len.to_le_bytes());
    h[56..60].copy_from_slice(&idx_crc.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..60]);
    h[60..64].copy_from_slice(&crc.to_le_bytes());
    f.write_all_at(&h, 0)
}

/// Reads the keys section of the run file `f`, whose index section is
/// `run` (as loaded), in pieces of 65,536 slots, calling `each(first slot,
/// identities)` for each piece, and checks the section's length and CRC at
/// the end: on `Err` the caller discards what `each` was given.
pub fn for_each_key(
    f: &std::fs::File,
    run: &Run,
    mut each: impl FnMut(usize, &[(u64, u32)]),
) -> Result<(), RunFileError> {
    use std::os::unix::fs::FileExt;
    let e = RunFileError;
    let mut h = [0u8; HEADER_LEN];
    f.read_exact_at(&mut h, 0)
        .map_err(|_| e("truncated header"))?;
    if h[0..8] != MAGIC || le_u32(&h, 60) != crc32c::crc32c(&h[0..60]) {
        return Err(e("header"));
    }
    if le_u32(&h, 8) != VERSION || le_u64(&h, 24) != run.generation {
        return Err(e("not the run loaded"));
    }
    let start = (HEADER_LEN as u64)
        .checked_add(le_u64(&h, 48))
        .ok_or(e("index length"))?;
    let total = run.slot_count() as u64 * 12;
    let len = f.metadata().map_err(|_| e("metadata"))?.len();
    if len.checked_sub(start) != Some(total) {
        return Err(e("keys section length"));
    }
    let mut crc = 0u32;
    let mut buf = vec![0u8; 12 << 16];
    let mut done = 0u64;
    let mut slot = 0usize;
    let mut ids: Vec<(u64, u32)> = Vec::with_capacity(1 << 16);
    while done < total {
        let n = (total - done).min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], start + done)
            .map_err(|_| e("reading keys"))?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        ids.clear();
        for c in buf[..n].chunks_exact(12) {
            let k = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
            let a = u32::from_le_bytes([c[8], c[9], c[10], c[11]]);
            ids.push((k, a));
        }
        each(slot, &ids);
        slot += ids.len();
        done += n as u64;
    }
    if crc != le_u32(&h, 20) {
        return Err(e("keys checksum mismatch"));
    }
    Ok(())
}

/// Reads and checks the header and index section of the run file `f` (not
/// its keys section, which only a merge needs) with a few large reads: the
/// slot table, most of the file, goes from the file straight into the
/// run's words, one MiB at a time, its CRC computed on the way (a restart
/// at 100M objects reads ~600 MB here).
pub fn read_index(f: &std::fs::File) -> Result<Run, RunFileError> {
    use std::os::unix::fs::FileExt;
    let e = RunFileError;
    let mut h = [0u8; HEADER_LEN];
    f.read_exact_at(&mut h, 0)
        .map_err(|_| e("truncated header"))?;
    check_header(&h)?;
    let nsegs = le_u64(&h, 32);
    let idx_len = le_u64(&h, 48);
    let file_len = f.metadata().map_err(|_| e("metadata"))?.len();
    if idx_len > file_len.saturating_sub(HEADER_LEN as u64) {
        return Err(e("truncated index section"));
    }
    // Segments, then seed, slots and buckets.
    let first = nsegs
        .checked_mul(16)
        .and_then(|x| x.checked_add(24))
        .filter(|&x| x <= idx_len)
        .ok_or(e("segment count"))?;
    let mut a = vec![0u8; first as usize];
    f.read_exact_at(&mut a, HEADER_LEN as u64)
        .map_err(|_| e("truncated index section"))?;
    let mut crc = crc32c::crc32c(&a);
    let nslots = le_u64(&a, first as usize - 16);
    let nbuckets = le_u64(&a, first as usize - 8);
    let width = u64::from(le_u32(&h, 12) + le_u32(&h, 16));
    let pilot_len = nbuckets
        .checked_mul(2)
        .and_then(|x| x.checked_next_multiple_of(8))
        .ok_or(e("table sizes"))?;
    let nwords = nslots
        .checked_mul(width)
        .map(|x| x.div_ceil(64))
        .ok_or(e("table sizes"))?;
    if first
        .checked_add(pilot_len)
        .and_then(|x| x.checked_add(nwords.checked_mul(8)?))
        != Some(idx_len)
    {
        return Err(e("table sizes"));
    }
    let mut p = vec![0u8; pilot_len as usize];
    f.read_exact_at(&mut p, HEADER_LEN as u64 + first)
        .map_err(|_| e("truncated index section"))?;
    crc = crc32c::crc32c_append(crc, &p);
    let mut words: Vec<u64> = Vec::with_capacity(nwords as usize);
    let mut buf = vec![0u8; 1 << 20];
    let mut at = HEADER_LEN as u64 + first + pilot_len;
    let mut left = nwords * 8;
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        f.read_exact_at(&mut buf[..n], at)
            .map_err(|_| e("truncated index section"))?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        words.extend(
            buf[..n]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
        );
        at += n as u64;
        left -= n as u64;
    }
    if crc != le_u32(&h, 56) {
        return Err(e("index checksum mismatch"));
    }
    let pilots = p[..nbuckets as usize * 2]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect();
    assemble(
        &h,
        &a[..nsegs as usize * 16],
        le_u64(&a, first as usize - 24),
        nslots,
        pilots,
        words,
    )
}

/// Checks a header's magic, CRC, version and field widths.
fn check_header(h: &[u8]) -> Result<(), RunFileError> {
    let e = RunFileError;
    if h.len() < HEADER_LEN {
        return Err(e("truncated header"));
    }
    if h[0..8] != MAGIC {
        return Err(e("bad magic"));
    }
    if le_u32(h, 60) != crc32c::crc32c(&h[0..60]) {
        return Err(e("header checksum mismatch"));
    }
    if le_u32(h, 8) != VERSION {
        return Err(e("unsupported version"));
    }
    let fp_bits = le_u32(h, 12);
    let ref_bits = le_u32(h, 16);
    if fp_bits == 0 || ref_bits == 0 || fp_bits + ref_bits > 64 {
        return Err(e("field widths"));
    }
    Ok(())
}

/// A run from its checked header and the decoded parts of its index
/// section (`segs`: 16 bytes per segment). A slot naming a needle past the
/// run is not refused here: [`Run`]'s lookups read it as empty.
fn assemble(
    h: &[u8],
    segs: &[u8],
    seed: u64,
    nslots: u64,
    pilots: Vec<u16>,
    words: Vec<u64>,
) -> Result<Run, RunFileError> {
    let e = RunFileError;
    let fp_bits = le_u32(h, 12);
    let ref_bits = le_u32(h, 16);
    let mut segments = Vec::with_capacity(segs.len() / 16);
    let mut starts = Vec::with_capacity(segs.len() / 16 + 1);
    let mut total = 0u64;
    for c in segs.chunks_exact(16) {
        let id = le_u64(c, 0);
        let n = le_u64(c, 8);
        starts.push(total);
        total = total.checked_add(n).ok_or(e("segments"))?;
        segments.push((id, n));
    }
    starts.push(total);
    if total >= 1u64 << ref_bits.min(63) {
        return Err(e("needle-number bits"));
    }
    let mph = Mphf::from_parts(seed, nslots, pilots).ok_or(e("perfect hash"))?;
    let nslots = usize::try_from(nslots).map_err(|_| e("slots"))?;
    let slots =
        PackedArray::from_parts(ref_bits + fp_bits, nslots, words).ok_or(e("slot table"))?;
    Ok(Run {
        generation: le_u64(h, 24),
        mph,
        slots,
        ref_bits,
        fp_bits,
        segments,
        starts,
        entries: le_u64(h, 40),
    })
}

/// Parses and checks a run file (both checksums, every size); returns the
/// run. A run whose slots name a needle past the run is refused.
pub fn decode(bytes: &[u8]) -> Result<Run, RunFileError> {
    let (run, _) = decode_parts(bytes, true)?;
    Ok(run)
}

/// Length of the header and index section of a run file whose first
/// [`HEADER_LEN`] bytes are `header` (what [`decode_index`] needs).
pub fn index_len(header: &[u8]) -> Option<u64> {
    (header.len() >= HEADER_LEN && header[0..8] == MAGIC)
        .then(|| le_u64(header, 48).checked_add(HEADER_LEN as u64))
        .flatten()
}

/// Like [`decode`] from the header and index section only (what a restart
/// reads; the keys section, which only a merge needs, is checked then).
/// `bytes` may end anywhere after the index section.
pub fn decode_index(bytes: &[u8]) -> Result<Run, RunFileError> {
    let (run, _) = decode_parts(bytes, false)?;
    Ok(run)
}

/// The identity held in each slot of a run file (as [`encode`] wrote them).
pub fn keys(bytes: &[u8]) -> Result<Vec<(u64, u32)>, RunFileError> {
    let (_, kb) = decode_parts(bytes, true)?;
    let mut r = Reader::new(kb);
    let mut out = Vec::with_capacity(kb.len() / 12);
    while r.remaining() > 0 {
        let k = r.u64().ok_or(RunFileError("keys"))?;
        let a = r.u32().ok_or(RunFileError("keys"))?;
        out.push((k, a));
    }
    Ok(out)
}

fn decode_parts(bytes: &[u8], with_keys: bool) -> Result<(Run, &[u8]), RunFileError> {
    let e = RunFileError;
    check_header(bytes)?;
    let nsegs = le_u64(bytes, 32);
    let idx_len = usize::try_from(le_u64(bytes, 48)).map_err(|_| e("index length"))?;
    let idx = bytes
        .get(HEADER_LEN..HEADER_LEN.checked_add(idx_len).ok_or(e("index length"))?)
        .ok_or(e("truncated index section"))?;
    if le_u32(bytes, 56) != crc32c::crc32c(idx) {
        return Err(e("index checksum mismatch"));
    }
    let mut r = Reader::new(idx);
    let segs = usize::try_from(nsegs)
        .ok()
        .and_then(|n| n.checked_mul(16))
        .and_then(|n| r.take(n))
        .ok_or(e("segment count"))?;
    let seed = r.u64().ok_or(e("seed"))?;
    let nslots = r.u64().ok_or(e("slots"))?;
    let nbuckets = r.u64().ok_or(e("buckets"))?;
    let width = u64::from(le_u32(bytes, 12) + le_u32(bytes, 16));
    if nbuckets
        .checked_mul(2)
        .is_none_or(|x| x > r.remaining() as u64)
        || nslots
            .checked_mul(width)
            .is_none_or(|x| x / 8 > r.remaining() as u64)
    {
        return Err(e("table sizes"));
    }
    let mut pilots = Vec::with_capacity(nbuckets as usize);
    for _ in 0..nbuckets {
        pilots.push(r.u16().ok_or(e("pilots"))?);
    }
    let pad = (nbuckets as usize * 2).next_multiple_of(8) - nbuckets as usize * 2;
    r.take(pad).ok_or(e("pilot padding"))?;
    let words = r
        .words((nslots * width).div_ceil(64))
        .ok_or(e("slot table"))?;
    if r.remaining() != 0 {
        return Err(e("trailing bytes in the index section"));
    }
    let kb = &bytes[HEADER_LEN + idx_len..];
    if with_keys {
        if nslots.checked_mul(12) != Some(kb.len() as u64) {
            return Err(e("keys section length"));
        }
        if le_u32(bytes, 20) != crc32c::crc32c(kb) {
            return Err(e("keys checksum mismatch"));
        }
    }
    let run = assemble(bytes, segs, seed, nslots, pilots, words)?;
    Ok((run, kb))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_flips() {
        let entries: Vec<(u64, u32, u32, u32)> = (0..500u32)
            .map(|i| (u64::from(i) * 3, i % 2, i % 3, i / 3))
            .collect();
        let run = Run::build(7, vec![(1, 200), (4, 200), (6, 170)], &entries, 16).unwrap();
        let mut keys = vec![(0u64, 0u32); run.slot_count()];
        for &(k, a, _, _) in &entries {
            keys[run.slot_of(k, a)] = (k, a);
        }
        let bytes = encode(&run, &keys);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.generation(), 7);
        assert_eq!(back.segments(), run.segments());
        for &(k, a, s, o) in &entries {
            assert_eq!(back.lookup(k, a), Some((s as usize, o)));
        }
        assert_eq!(super::keys(&bytes).unwrap(), keys);
        let prefix = index_len(&bytes[..HEADER_LEN]).unwrap() as usize;
        assert!(decode_index(&bytes[..prefix]).is_ok());
        assert!(decode_index(&bytes[..prefix - 1]).is_err());
        for i in (0..bytes.len()).step_by(11) {
            let mut c = bytes.clone();
            c[i] ^= 0x04;
            assert!(decode(&c).is_err(), "flip at byte {i} undetected");
        }
        assert!(decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn streamed_file_is_the_encoded_bytes_and_keys_stream_back() {
        let entries: Vec<(u64, u32, u32, u32)> = (0..150_000u32)
            .map(|i| (u64::from(i) * 7 + 1, i % 3, i % 2, i / 2))
            .collect();
        let run = Run::build(3, vec![(2, 75_000), (9, 75_000)], &entries, 14).unwrap();
        let mut keys = vec![(0u64, 0u32); run.slot_count()];
        for &(k, a, _, _) in &entries {
            keys[run.slot_of(k, a)] = (k, a);
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let f = std::fs::File::create(&path).unwrap();
        write(&f, &run, keys.iter().copied()).unwrap();
        drop(f);
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(bytes, encode(&run, &keys));
        // What a restart reads: the same run, from a few large reads; a
        // flip anywhere in the header or index section refuses the file.
        let f = std::fs::File::open(&path).unwrap();
        let back = read_index(&f).unwrap();
        assert_eq!((back.generation(), back.segments()), (3, run.segments()));
        for &(k, a, s, o) in entries.iter().step_by(7) {
            assert_eq!(back.lookup(k, a), Some((s as usize, o)));
        }
        let prefix = index_len(&bytes[..HEADER_LEN]).unwrap() as usize;
        for i in (0..prefix).step_by(997).chain(0..200) {
            let mut c = bytes.clone();
            c[i] ^= 0x08;
            std::fs::write(&path, &c).unwrap();
            let f = std::fs::File::open(&path).unwrap();
            assert!(read_index(&f).is_err(), "flip at byte {i} undetected");
        }
        std::fs::write(&path, &bytes[..prefix - 1]).unwrap();
        assert!(read_index(&std::fs::File::open(&path).unwrap()).is_err());
        std::fs::write(&path, &bytes).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        let mut back = Vec::new();
        for_each_key(&f, &run, |first, ks| {
            assert_eq!(first, back.len());
            back.extend_from_slice(ks);
        })
        .unwrap();
        assert_eq!(back, keys);
        // A flipped key byte fails the section's CRC at the end.
        let mut c = bytes.clone();
        let at = c.len() - 100;
        c[at] ^= 1;
        std::fs::write(&path, &c).unwrap();
        let f = std::fs::File::open(&path).unwrap();
        assert!(for_each_key(&f, &run, |_, _| {}).is_err());
        // Too few keys is an error, not a short file.
        let f = std::fs::File::create(&path).unwrap();
        assert!(write(&f, &run, keys.iter().copied().take(10)).is_err());
    }
}
