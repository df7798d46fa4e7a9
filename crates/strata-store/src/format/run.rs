//! The run file: the node-wide index of the sealed segments, written by
//! every merge (crash-safely: temporary file, fdatasync, rename, directory
//! fsync), so that a restart loads it instead of rebuilding it.
//!
//! Version 2 (written) holds the run in hash partitions, each with its own
//! perfect hash, slot table and keys section, so that a merge builds and
//! writes one partition at a time:
//!
//! ```text
//! offset  size  field
//!      0     8  magic "STRATRUN"
//!      8     4  format version (u32, 2)
//!     12     4  fingerprint bits f
//!     16     4  needle-number bits b (b + f <= 64)
//!     20     4  partitions P (>= 1)
//!     24     8  generation (bumped by every merge)
//!     32     8  segment count k
//!     40     8  identities held
//!     48     8  file length in bytes
//!     56     4  CRC32C of the segment list and the directory
//!     60     4  CRC32C of bytes 0..60
//!     64  16 k  segments: id u64, needle count u64
//!        48 P   directory: per partition, offset u64, identities u64,
//!               seed u64, slots u64, buckets u64, CRC32C of its pilots
//!               and slot table u32, CRC32C of its keys u32
//! ```
//! then each partition at its offset: pilots, slot table, keys
//! (docs/store-format.md). Version 1 (one partition, the keys section
//! after the index section) is still read.

use super::le_u32;
use super::le_u64;
use crate::bits::PackedArray;
use crate::index::{part_start, KeysAt, Part, Run, SegList};
use crate::mphf::Mphf;
use std::sync::Arc;

/// Run file magic.
pub const MAGIC: [u8; 8] = *b"STRATRUN";
/// Run file format version written.
pub const VERSION: u32 = 2;
/// The version before partitions (still read).
pub const VERSION_1: u32 = 1;
/// Header length.
pub const HEADER_LEN: usize = 64;
/// Directory entry length (version 2).
pub const DIR_ENTRY_LEN: usize = 48;
/// Name of the run file (in the first device directory).
pub const FILE_NAME: &str = "strata.run";

/// What is wrong with bytes that should be a run file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("not a valid Strata run file ({0})")]
pub struct RunFileError(pub &'static str);

/// Something a run file can be read from: a file or bytes in RAM.
pub trait Source {
    /// Fills `buf` from byte `at`; false if that runs past the end or fails.
    fn read_at(&self, buf: &mut [u8], at: u64) -> bool;
    /// Length in bytes.
    fn length(&self) -> Option<u64>;
}

impl Source for std::fs::File {
    fn read_at(&self, buf: &mut [u8], at: u64) -> bool {
        std::os::unix::fs::FileExt::read_exact_at(self, buf, at).is_ok()
    }
    fn length(&self) -> Option<u64> {
        self.metadata().ok().map(|m| m.len())
    }
}

impl Source for [u8] {
    fn read_at(&self, buf: &mut [u8], at: u64) -> bool {
        let Ok(at) = usize::try_from(at) else {
            return false;
        };
        match at.checked_add(buf.len()).and_then(|end| self.get(at..end)) {
            Some(s) => {
                buf.copy_from_slice(s);
                true
            }
            None => false,
        }
    }
    fn length(&self) -> Option<u64> {
        Some(self.len() as u64)
    }
}

fn pilots_len(buckets: u64) -> Option<u64> {
    buckets.checked_mul(2)?.checked_next_multiple_of(8)
}

fn table_words(slots: u64, width: u32) -> Option<u64> {
    Some(slots.checked_mul(u64::from(width))?.div_ceil(64))
}

/// Reads `nwords` little-endian words from `at`, one MiB at a time, into a
/// vector, extending `crc`.
fn read_words(
    src: &(impl Source + ?Sized),
    at: u64,
    nwords: u64,
    crc: &mut u32,
) -> Result<Vec<u64>, RunFileError> {
    let e = RunFileError;
    let total = nwords.checked_mul(8).ok_or(e("table sizes"))?;
    if at
        .checked_add(total)
        .is_none_or(|end| Some(end) > src.length())
    {
        return Err(e("truncated slot table"));
    }
    let mut words: Vec<u64> = Vec::with_capacity(nwords as usize);
    let mut buf = vec![0u8; (1 << 20).min(total as usize)];
    let (mut at, mut left) = (at, total);
    while left > 0 {
        let n = left.min(buf.len() as u64) as usize;
        if !src.read_at(&mut buf[..n], at) {
            return Err(e("truncated slot table"));
        }
        *crc = crc32c::crc32c_append(*crc, &buf[..n]);
        words.extend(
            buf[..n]
                .chunks_exact(8)
                .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]])),
        );
        at += n as u64;
        left -= n as u64;
    }
    Ok(words)
}

fn pilots_of(p: &[u8], buckets: u64) -> Vec<u16> {
    p[..buckets as usize * 2]
        .chunks_exact(2)
        .map(|c| u16::from_le_bytes([c[0], c[1]]))
        .collect()
}

fn seg_list(segs: &[u8], ref_bits: u32) -> Result<Arc<SegList>, RunFileError> {
    let e = RunFileError;
    let list: Vec<(u64, u64)> = segs
        .chunks_exact(16)
        .map(|c| (le_u64(c, 0), le_u64(c, 8)))
        .collect();
    let segs = SegList::new(list).ok_or(e("segments"))?;
    if segs.total() >= 1u64 << ref_bits.min(63) {
        return Err(e("needle-number bits"));
    }
    Ok(Arc::new(segs))
}

/// Checks a header's magic, CRC, version and field widths; returns the
/// version.
fn check_header(h: &[u8]) -> Result<u32, RunFileError> {
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
    let version = le_u32(h, 8);
    if version != VERSION && version != VERSION_1 {
        return Err(e("unsupported version"));
    }
    let fp_bits = le_u32(h, 12);
    let ref_bits = le_u32(h, 16);
    if fp_bits == 0 || ref_bits == 0 || fp_bits + ref_bits > 64 {
        return Err(e("field widths"));
    }
    if version == VERSION && le_u32(h, 20) == 0 {
        return Err(e("partition count"));
    }
    Ok(version)
}

/// Reads and checks the header and every partition's pilots and slot table
/// (not the keys, which only a merge needs) with a few large reads: the slot
/// tables, most of the file, go straight into the run's words one MiB at a
/// time, their CRCs computed on the way.
pub fn read_index(src: &(impl Source + ?Sized)) -> Result<Run, RunFileError> {
    let e = RunFileError;
    let mut h = [0u8; HEADER_LEN];
    if !src.read_at(&mut h, 0) {
        return Err(e("truncated header"));
    }
    match check_header(&h)? {
        VERSION_1 => read_v1(src, &h),
        _ => read_v2(src, &h),
    }
}

fn read_v2(src: &(impl Source + ?Sized), h: &[u8]) -> Result<Run, RunFileError> {
    let e = RunFileError;
    let (fp_bits, ref_bits) = (le_u32(h, 12), le_u32(h, 16));
    let width = fp_bits + ref_bits;
    let nparts = u64::from(le_u32(h, 20));
    let generation = le_u64(h, 24);
    let nsegs = le_u64(h, 32);
    let file_len = le_u64(h, 48);
    if src.length() != Some(file_len) {
        return Err(e("file length"));
    }
    let meta_len = nsegs
        .checked_mul(16)
        .and_then(|x| x.checked_add(nparts * DIR_ENTRY_LEN as u64))
        .filter(|&x| x <= file_len.saturating_sub(HEADER_LEN as u64))
        .ok_or(e("segment count"))?;
    let mut meta = vec![0u8; meta_len as usize];
    if !src.read_at(&mut meta, HEADER_LEN as u64) {
        return Err(e("truncated directory"));
    }
    if crc32c::crc32c(&meta) != le_u32(h, 56) {
        return Err(e("directory checksum mismatch"));
    }
    let (segs, dir) = meta.split_at(nsegs as usize * 16);
    let segs = seg_list(segs, ref_bits)?;
    let data_start = HEADER_LEN as u64 + meta_len;
    let mut parts = Vec::with_capacity(nparts as usize);
    let mut bounds = Vec::with_capacity(nparts as usize);
    let mut held = 0u64;
    let mut next = data_start.next_multiple_of(8);
    if next != data_start {
        return Err(e("directory length"));
    }
    for (q, d) in dir.chunks_exact(DIR_ENTRY_LEN).enumerate() {
        let (offset, ids, seed) = (le_u64(d, 0), le_u64(d, 8), le_u64(d, 16));
        let (nslots, nbuckets) = (le_u64(d, 24), le_u64(d, 32));
        let (idx_crc, keys_crc) = (le_u32(d, 40), le_u32(d, 44));
        let plen = pilots_len(nbuckets).ok_or(e("table sizes"))?;
        let nwords = table_words(nslots, width).ok_or(e("table sizes"))?;
        let keys_at = offset
            .checked_add(plen)
            .and_then(|x| x.checked_add(nwords.checked_mul(8)?))
            .ok_or(e("table sizes"))?;
        let end = keys_at
            .checked_add(nslots.checked_mul(12).ok_or(e("table sizes"))?)
            .ok_or(e("table sizes"))?;
        // Partitions follow each other, each padded with zeros to a
        // multiple of 8 bytes, and the last ends the file: every byte is
        // either checked by a CRC or known to be zero.
        if offset != next || ids > nslots {
            return Err(e("partition extent"));
        }
        next = end.next_multiple_of(8);
        if next > file_len {
            return Err(e("partition extent"));
        }
        let mut pad = [0u8; 8];
        let pad = &mut pad[..(next - end) as usize];
        if !src.read_at(pad, end) || pad.iter().any(|&b| b != 0) {
            return Err(e("partition padding"));
        }
        let mut p = vec![0u8; plen as usize];
        if !src.read_at(&mut p, offset) {
            return Err(e("truncated pilots"));
        }
        let mut crc = crc32c::crc32c(&p);
        let words = read_words(src, offset + plen, nwords, &mut crc)?;
        if crc != idx_crc {
            return Err(e("partition checksum mismatch"));
        }
        let mph =
            Mphf::from_parts(seed, nslots, pilots_of(&p, nbuckets)).ok_or(e("perfect hash"))?;
        let nslots = usize::try_from(nslots).map_err(|_| e("slots"))?;
        let slots = PackedArray::from_parts(width, nslots, words).ok_or(e("slot table"))?;
        held = held.checked_add(ids).ok_or(e("identities"))?;
        parts.push(Arc::new(Part {
            mph,
            slots,
            ref_bits,
            fp_bits,
            segs: segs.clone(),
            entries: ids,
            keys: KeysAt {
                generation,
                offset: keys_at,
                crc: keys_crc,
            },
        }));
        bounds.push(part_start(q as u64, nparts));
    }
    if next != file_len {
        return Err(e("file length"));
    }
    if held != le_u64(h, 40) {
        return Err(e("identity count"));
    }
    Run::from_parts(generation, parts, bounds).ok_or(e("partitions"))
}

fn read_v1(src: &(impl Source + ?Sized), h: &[u8]) -> Result<Run, RunFileError> {
    let e = RunFileError;
    let (fp_bits, ref_bits) = (le_u32(h, 12), le_u32(h, 16));
    let nsegs = le_u64(h, 32);
    let idx_len = le_u64(h, 48);
    let file_len = src.length().ok_or(e("length"))?;
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
    if !src.read_at(&mut a, HEADER_LEN as u64) {
        return Err(e("truncated index section"));
    }
    let mut crc = crc32c::crc32c(&a);
    let seed = le_u64(&a, first as usize - 24);
    let nslots = le_u64(&a, first as usize - 16);
    let nbuckets = le_u64(&a, first as usize - 8);
    let width = fp_bits + ref_bits;
    let plen = pilots_len(nbuckets).ok_or(e("table sizes"))?;
    let nwords = table_words(nslots, width).ok_or(e("table sizes"))?;
    if first
        .checked_add(plen)
        .and_then(|x| x.checked_add(nwords.checked_mul(8)?))
        != Some(idx_len)
    {
        return Err(e("table sizes"));
    }
    let mut p = vec![0u8; plen as usize];
    if !src.read_at(&mut p, HEADER_LEN as u64 + first) {
        return Err(e("truncated index section"));
    }
    crc = crc32c::crc32c_append(crc, &p);
    let words = read_words(src, HEADER_LEN as u64 + first + plen, nwords, &mut crc)?;
    if crc != le_u32(h, 56) {
        return Err(e("index checksum mismatch"));
    }
    let segs = seg_list(&a[..nsegs as usize * 16], ref_bits)?;
    let mph = Mphf::from_parts(seed, nslots, pilots_of(&p, nbuckets)).ok_or(e("perfect hash"))?;
    let nslots = usize::try_from(nslots).map_err(|_| e("slots"))?;
    let slots = PackedArray::from_parts(width, nslots, words).ok_or(e("slot table"))?;
    let part = Part {
        mph,
        slots,
        ref_bits,
        fp_bits,
        segs,
        entries: le_u64(h, 40),
        keys: KeysAt {
            generation: le_u64(h, 24),
            offset: HEADER_LEN as u64 + idx_len,
            crc: le_u32(h, 20),
        },
    };
    Run::from_parts(le_u64(h, 24), vec![Arc::new(part)], vec![0]).ok_or(e("partitions"))
}

/// Reads the keys of partition `part` from the run file `src` (which must
/// be the file it was loaded from or written to: same generation), in
/// pieces of 65,536 slots, calling `each(first slot, identities)` for each
/// piece, and checks the section's CRC at the end: on `Err` the caller
/// discards what `each` was given.
pub fn for_each_key(
    src: &(impl Source + ?Sized),
    part: &Part,
    mut each: impl FnMut(usize, &[(u64, u32)]),
) -> Result<(), RunFileError> {
    let e = RunFileError;
    let mut h = [0u8; HEADER_LEN];
    if !src.read_at(&mut h, 0) {
        return Err(e("truncated header"));
    }
    check_header(&h)?;
    let at = part.keys_at();
    if le_u64(&h, 24) != at.generation {
        return Err(e("not the run loaded"));
    }
    let total = part.slot_count() as u64 * 12;
    if at
        .offset
        .checked_add(total)
        .is_none_or(|end| Some(end) > src.length())
    {
        return Err(e("keys section length"));
    }
    let mut crc = 0u32;
    let mut buf = vec![0u8; (12 << 16).min(total as usize)];
    let mut done = 0u64;
    let mut slot = 0usize;
    let mut ids: Vec<(u64, u32)> = Vec::with_capacity(1 << 16);
    while done < total {
        let n = (total - done).min(buf.len() as u64) as usize;
        if !src.read_at(&mut buf[..n], at.offset + done) {
            return Err(e("reading keys"));
        }
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
    if crc != at.crc {
        return Err(e("keys checksum mismatch"));
    }
    Ok(())
}

/// Parses and checks a run file in RAM (every checksum, the keys of every
/// partition included, every size); returns the run.
pub fn decode(bytes: &[u8]) -> Result<Run, RunFileError> {
    let run = read_index(bytes)?;
    for p in run.parts() {
        for_each_key(bytes, p, |_, _| {})?;
    }
    Ok(run)
}

/// The identity held in each slot of each partition of a run file.
pub fn keys(bytes: &[u8]) -> Result<Vec<Vec<(u64, u32)>>, RunFileError> {
    let run = read_index(bytes)?;
    let mut out = Vec::new();
    for p in run.parts() {
        let mut v = Vec::with_capacity(p.slot_count());
        for_each_key(bytes, p, |_, ks| v.extend_from_slice(ks))?;
        out.push(v);
    }
    Ok(out)
}

/// Writes a version-2 run file one partition at a time: [`Writer::part`]
/// for each partition in order, then [`Writer::finish`] for the header,
/// segment list and directory (which go before the partitions, in space
/// reserved for them).
pub struct Writer<'a> {
    f: &'a std::fs::File,
    generation: u64,
    parts: u32,
    at: u64,
    dir: Vec<u8>,
    held: u64,
}

impl<'a> Writer<'a> {
    /// A writer of a file of `parts` partitions over `segments` segments.
    pub fn new(f: &'a std::fs::File, generation: u64, segments: usize, parts: u32) -> Self {
        let meta = segments as u64 * 16 + u64::from(parts) * DIR_ENTRY_LEN as u64;
        Writer {
            f,
            generation,
            parts,
            at: (HEADER_LEN as u64 + meta).next_multiple_of(8),
            dir: Vec::with_capacity(parts as usize * DIR_ENTRY_LEN),
            held: 0,
        }
    }

    /// Writes the next partition, taking the identity of each of its slots,
    /// in slot order, from `keys` (exactly `part.slot_count()` of them),
    /// and records where its keys are in `part`.
    pub fn part(
        &mut self,
        part: &mut Part,
        keys: impl Iterator<Item = (u64, u32)>,
    ) -> std::io::Result<()> {
        let offset = self.at;
        let mut idx = Vec::with_capacity(part.mph.pilots().len() * 2 + 8);
        for p in part.mph.pilots() {
            idx.extend_from_slice(&p.to_le_bytes());
        }
        idx.resize(idx.len().next_multiple_of(8), 0);
        let mut idx_crc = crc32c::crc32c(&idx);
        strata_fs::write_all_at(self.f, &idx, offset)?;
        let mut at = offset + idx.len() as u64;
        drop(idx);
        for chunk in part.slots.words().chunks(1 << 17) {
            let mut b = Vec::with_capacity(chunk.len() * 8);
            for w in chunk {
                b.extend_from_slice(&w.to_le_bytes());
            }
            idx_crc = crc32c::crc32c_append(idx_crc, &b);
            strata_fs::write_all_at(self.f, &b, at)?;
            at += b.len() as u64;
        }
        let keys_at = at;
        let mut kcrc = 0u32;
        let mut buf: Vec<u8> = Vec::with_capacity(12 << 16);
        let mut n = 0usize;
        for (k, a) in keys {
            buf.extend_from_slice(&k.to_le_bytes());
            buf.extend_from_slice(&a.to_le_bytes());
            n += 1;
            if buf.len() >= 12 << 16 {
                kcrc = crc32c::crc32c_append(kcrc, &buf);
                strata_fs::write_all_at(self.f, &buf, at)?;
                at += buf.len() as u64;
                buf.clear();
            }
        }
        kcrc = crc32c::crc32c_append(kcrc, &buf);
        strata_fs::write_all_at(self.f, &buf, at)?;
        at += buf.len() as u64;
        if n != part.slot_count() {
            return Err(std::io::Error::other("run file: wrong number of keys"));
        }
        let pad = at.next_multiple_of(8) - at;
        if pad > 0 {
            strata_fs::write_all_at(self.f, &[0u8; 8][..pad as usize], at)?;
        }
        self.at = at + pad;
        let put64 = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
        put64(&mut self.dir, offset);
        put64(&mut self.dir, part.entries);
        put64(&mut self.dir, part.mph.seed());
        put64(&mut self.dir, part.mph.slots());
        put64(&mut self.dir, part.mph.pilots().len() as u64);
        self.dir.extend_from_slice(&idx_crc.to_le_bytes());
        self.dir.extend_from_slice(&kcrc.to_le_bytes());
        self.held += part.entries;
        part.keys = KeysAt {
            generation: self.generation,
            offset: keys_at,
            crc: kcrc,
        };
        Ok(())
    }

    /// Writes the segment list, the directory and the header, once every
    /// partition is written (all built over `segs` with the same widths).
    pub fn finish(self, segs: &SegList, fp_bits: u32, ref_bits: u32) -> std::io::Result<()> {
        if self.dir.len() != self.parts as usize * DIR_ENTRY_LEN {
            return Err(std::io::Error::other("run file: partitions missing"));
        }
        let mut meta = Vec::with_capacity(segs.segments().len() * 16 + self.dir.len());
        for &(id, n) in segs.segments() {
            meta.extend_from_slice(&id.to_le_bytes());
            meta.extend_from_slice(&n.to_le_bytes());
        }
        meta.extend_from_slice(&self.dir);
        strata_fs::write_all_at(self.f, &meta, HEADER_LEN as u64)?;
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&fp_bits.to_le_bytes());
        h[16..20].copy_from_slice(&ref_bits.to_le_bytes());
        h[20..24].copy_from_slice(&self.parts.to_le_bytes());
        h[24..32].copy_from_slice(&self.generation.to_le_bytes());
        h[32..40].copy_from_slice(&(segs.segments().len() as u64).to_le_bytes());
        h[40..48].copy_from_slice(&self.held.to_le_bytes());
        h[48..56].copy_from_slice(&self.at.to_le_bytes());
        h[56..60].copy_from_slice(&crc32c::crc32c(&meta).to_le_bytes());
        let crc = crc32c::crc32c(&h[0..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        strata_fs::write_all_at(self.f, &h, 0)?;
        // The file ends where the last partition does (a shorter file
        // from an earlier attempt at this path is impossible: the
        // temporary file is created empty).
        strata_fs::set_len(self.f, self.at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::part_hash;
    use crate::index::part_of;

    /// Builds `nparts` partitions over `segs` from `entries` and writes
    /// them as a file; returns its bytes.
    fn write_file(
        path: &std::path::Path,
        segs: Vec<(u64, u64)>,
        entries: &[(u64, u32, u32, u32)],
        nparts: u32,
    ) -> Vec<u8> {
        let segs = Arc::new(SegList::new(segs).unwrap());
        let f = std::fs::File::create(path).unwrap();
        let mut w = Writer::new(&f, 9, segs.segments().len(), nparts);
        let (mut fb, mut rb) = (0, 0);
        for q in 0..u64::from(nparts) {
            let mine: Vec<_> = entries
                .iter()
                .copied()
                .filter(|e| part_of(part_hash(e.0, e.1), u64::from(nparts)) == q)
                .collect();
            let mut p = Part::build(segs.clone(), &mine, 14, q).unwrap();
            let mut keys = vec![(0u64, 0u32); p.slot_count()];
            for &(k, a, _, _) in &mine {
                keys[p.slot_of(k, a)] = (k, a);
            }
            w.part(&mut p, keys.into_iter()).unwrap();
            (fb, rb) = (p.fp_bits, p.ref_bits);
        }
        w.finish(&segs, fb, rb).unwrap();
        drop(f);
        std::fs::read(path).unwrap()
    }

    #[test]
    fn partitioned_roundtrip_and_flips() {
        let entries: Vec<(u64, u32, u32, u32)> = (0..3000u32)
            .map(|i| (u64::from(i) * 3, i % 2, i % 3, i / 3))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        for nparts in [1u32, 4, 7] {
            let bytes = write_file(
                &path,
                vec![(1, 1000), (4, 1000), (6, 1000)],
                &entries,
                nparts,
            );
            let run = decode(&bytes).unwrap();
            assert_eq!((run.generation(), run.parts().len()), (9, nparts as usize));
            assert_eq!(run.entry_count(), 3000);
            for &(k, a, s, o) in &entries {
                let (_, i, ord) = run.lookup(k, a).unwrap();
                assert_eq!((i, ord), (s as usize, o));
            }
            // The keys stream back per partition, each in its slot.
            let f = std::fs::File::open(&path).unwrap();
            let from_file = read_index(&f).unwrap();
            let mut seen = 0;
            for p in from_file.parts() {
                for_each_key(&f, p, |first, ks| {
                    for (j, &(k, a)) in ks.iter().enumerate() {
                        if let Some((i, o)) = p.slot(first + j) {
                            let e = entries.iter().find(|e| (e.0, e.1) == (k, a)).unwrap();
                            assert_eq!((i, o), (e.2 as usize, e.3));
                            seen += 1;
                        }
                    }
                })
                .unwrap();
            }
            assert_eq!(seen, 3000);
            for i in (0..bytes.len()).step_by(13).chain(0..120) {
                let mut c = bytes.clone();
                c[i] ^= 0x04;
                assert!(
                    decode(&c).is_err(),
                    "{nparts} parts: flip at byte {i} undetected"
                );
            }
            assert!(decode(&bytes[..bytes.len() - 1]).is_err());
        }
    }

    /// A version-1 file (one partition, written by the code before
    /// partitions) as the bytes that code wrote, built here field by field.
    fn v1_bytes(run: &Run, keys: &[(u64, u32)]) -> Vec<u8> {
        let p = &run.parts()[0];
        let mut idx = Vec::new();
        for &(id, n) in p.segs.segments() {
            idx.extend_from_slice(&id.to_le_bytes());
            idx.extend_from_slice(&n.to_le_bytes());
        }
        idx.extend_from_slice(&p.mph.seed().to_le_bytes());
        idx.extend_from_slice(&p.mph.slots().to_le_bytes());
        idx.extend_from_slice(&(p.mph.pilots().len() as u64).to_le_bytes());
        for x in p.mph.pilots() {
            idx.extend_from_slice(&x.to_le_bytes());
        }
        idx.resize(idx.len().next_multiple_of(8), 0);
        for &w in p.slots.words() {
            idx.extend_from_slice(&w.to_le_bytes());
        }
        let mut kb = Vec::new();
        for &(k, a) in keys {
            kb.extend_from_slice(&k.to_le_bytes());
            kb.extend_from_slice(&a.to_le_bytes());
        }
        let mut h = [0u8; HEADER_LEN];
        h[0..8].copy_from_slice(&MAGIC);
        h[8..12].copy_from_slice(&1u32.to_le_bytes());
        h[12..16].copy_from_slice(&p.fp_bits.to_le_bytes());
        h[16..20].copy_from_slice(&p.ref_bits.to_le_bytes());
        h[20..24].copy_from_slice(&crc32c::crc32c(&kb).to_le_bytes());
        h[24..32].copy_from_slice(&run.generation().to_le_bytes());
        h[32..40].copy_from_slice(&(p.segs.segments().len() as u64).to_le_bytes());
        h[40..48].copy_from_slice(&p.entries.to_le_bytes());
        h[48..56].copy_from_slice(&(idx.len() as u64).to_le_bytes());
        h[56..60].copy_from_slice(&crc32c::crc32c(&idx).to_le_bytes());
        let crc = crc32c::crc32c(&h[0..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        let mut out = h.to_vec();
        out.extend_from_slice(&idx);
        out.extend_from_slice(&kb);
        out
    }

    #[test]
    fn version_1_files_still_read() {
        let entries: Vec<(u64, u32, u32, u32)> = (0..500u32)
            .map(|i| (u64::from(i) * 3, i % 2, i % 3, i / 3))
            .collect();
        let run = Run::build(7, vec![(1, 200), (4, 200), (6, 170)], &entries, 16).unwrap();
        let p = &run.parts()[0];
        let mut keys = vec![(0u64, 0u32); p.slot_count()];
        for &(k, a, _, _) in &entries {
            keys[p.slot_of(k, a)] = (k, a);
        }
        let bytes = v1_bytes(&run, &keys);
        let back = decode(&bytes).unwrap();
        assert_eq!(back.generation(), 7);
        assert_eq!(back.parts()[0].segs().segments(), p.segs().segments());
        for &(k, a, s, o) in &entries {
            let (_, i, ord) = back.lookup(k, a).unwrap();
            assert_eq!((i, ord), (s as usize, o));
        }
        assert_eq!(super::keys(&bytes).unwrap(), vec![keys]);
        for i in (0..bytes.len()).step_by(11) {
            let mut c = bytes.clone();
            c[i] ^= 0x04;
            assert!(decode(&c).is_err(), "flip at byte {i} undetected");
        }
    }

    #[test]
    fn too_few_keys_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let segs = Arc::new(SegList::new(vec![(1, 10)]).unwrap());
        let entries: Vec<_> = (0..10u32).map(|i| (u64::from(i), 0, 0, i)).collect();
        let mut p = Part::build(segs, &entries, 14, 1).unwrap();
        let f = std::fs::File::create(dir.path().join(FILE_NAME)).unwrap();
        let mut w = Writer::new(&f, 1, 1, 1);
        assert!(w.part(&mut p, std::iter::repeat_n((0, 0), 3)).is_err());
    }
}
