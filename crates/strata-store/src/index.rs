//! The RAM index structures. Pure: no I/O.
//!
//! - [`Run`]: the merged index of many sealed segments: one perfect hash
//!   ([`Mphf`]) over all their live identities into a slot table of
//!   (needle number, fingerprint). The store keeps one run for the whole
//!   node, so a GET probes it once whatever the number of segments.
//! - [`SealedSegment`]: per sealed segment, the Elias–Fano coded offsets of
//!   its needles (ordinal → offset and length) and a deleted bit per needle.
//! - [`ActiveIndex`]: a segment's needle offsets and its identity → ordinal
//!   map as a checkpoint or a scan finds them.
//!
//! docs/store-format.md has the layouts and the arithmetic.

use crate::bits::{bits_for, EliasFano, PackedArray};
use crate::hash::{fingerprint_hash, IdHasherBuilder};
use crate::mphf::{BuildFailed, Mphf};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

/// Default fingerprint width of the node-wide index: a GET of an absent key
/// probes one run, whose fingerprint lets a stranger through with
/// probability 2^-14 (then one read finds another key in the needle header):
/// 0.61 extra reads per 10,000 absent GETs, within issue 14's bound of 1,
/// for 2 bits per object less than 16 bits (0.15 per 10,000) cost.
pub const DEFAULT_FINGERPRINT_BITS: u32 = 14;

/// What the RAM keeps of a sealed segment: where its needles are (Elias–Fano
/// coded offsets in file order; a needle's length is the next offset minus
/// its own) and which are known deleted. Which identity lives where is in
/// the node-wide index ([`Run`] and the store's recent map), not here.
#[derive(Debug)]
pub struct SealedSegment {
    pub(crate) offsets: EliasFano,
    pub(crate) deleted: Vec<AtomicU64>,
}

impl SealedSegment {
    /// Builds it from the needle offsets in 8-byte units, followed by the
    /// end of the last needle, and the deleted bitmap words (bit i = needle
    /// i; missing words are zero).
    pub fn new(units: &[u32], deleted: &[u64]) -> Option<SealedSegment> {
        let units: Vec<u64> = units.iter().map(|&u| u64::from(u)).collect();
        let universe = units.last().copied().unwrap_or(0);
        let offsets = EliasFano::new(&units, universe)?;
        let needles = units.len().saturating_sub(1);
        let deleted = (0..needles.div_ceil(64))
            .map(|i| AtomicU64::new(deleted.get(i).copied().unwrap_or(0)))
            .collect();
        Some(SealedSegment { offsets, deleted })
    }

    /// Byte offset and length of needle `ordinal`.
    pub fn needle(&self, ordinal: u32) -> Option<(u64, u64)> {
        let a = self.offsets.get(ordinal as usize)?;
        let b = self.offsets.get(ordinal as usize + 1)?;
        Some((a * 8, (b - a) * 8))
    }

    /// Byte offset and length of every needle, in file order.
    pub fn needles(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        let mut it = self.offsets.iter();
        let mut prev = it.next();
        std::iter::from_fn(move || {
            let a = prev?;
            let b = it.next()?;
            prev = Some(b);
            Some((a * 8, (b - a) * 8))
        })
    }

    /// Offsets in 8-byte units, then the end of the last needle.
    pub fn units(&self) -> Vec<u32> {
        self.offsets.iter().map(|u| u as u32).collect()
    }

    /// Number of needles in the segment.
    pub fn needle_count(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }

    /// Whether needle `ordinal` is known to be deleted.
    #[inline]
    pub fn is_deleted(&self, ordinal: u32) -> bool {
        let o = ordinal as usize;
        self.deleted
            .get(o / 64)
            .is_some_and(|w| w.load(Ordering::Relaxed) & (1 << (o % 64)) != 0)
    }

    /// Marks needle `ordinal` deleted; returns whether it was not already.
    pub fn set_deleted(&self, ordinal: u32) -> bool {
        let o = ordinal as usize;
        match self.deleted.get(o / 64) {
            Some(w) => w.fetch_or(1 << (o % 64), Ordering::Relaxed) & (1 << (o % 64)) == 0,
            None => false,
        }
    }

    /// The deleted bitmap words.
    pub fn deleted_words(&self) -> Vec<u64> {
        self.deleted
            .iter()
            .map(|w| w.load(Ordering::Relaxed))
            .collect()
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.offsets.heap_bytes() + self.deleted.len() * 8
    }
}

/// Seed of the hash that picks an identity's partition of the run (part of
/// the run file's format, version 2).
pub const PART_SEED: u64 = 0x7061_7274_6974_696f;

/// The hash that picks an identity's partition.
#[inline]
pub fn part_hash(key: u64, alt_key: u32) -> u64 {
    crate::hash::key_hash(key, alt_key, PART_SEED)
}

/// The partition, of `parts`, of a partition hash `h`: `floor(h * parts /
/// 2^64)`, so partition q holds the hashes from [`part_start`]`(q)` on.
#[inline]
pub fn part_of(h: u64, parts: u64) -> u64 {
    ((u128::from(h) * u128::from(parts)) >> 64) as u64
}

/// The smallest partition hash of partition `q` of `parts` (`q < parts`).
pub fn part_start(q: u64, parts: u64) -> u64 {
    (u128::from(q) << 64).div_ceil(u128::from(parts.max(1))) as u64
}

/// The segments a run's needle numbers count through, shared by the
/// partitions one merge built: (segment id, needle count) each, the needle
/// number of each one's first needle, and the place of each in the store's
/// segment table (set by the store; `u32::MAX` once the segment no longer
/// has the needles numbered, e.g. after a compaction).
#[derive(Debug)]
pub struct SegList {
    pub(crate) segments: Vec<(u64, u64)>,
    /// Needle number of each segment's first needle, then the total.
    pub(crate) starts: Vec<u64>,
    pub(crate) places: Vec<AtomicU32>,
}

/// No place in the segment table: the run answers nothing for the segment.
pub const NO_PLACE: u32 = u32::MAX;

impl SegList {
    /// A list over `segments` (id, needle count), every place unset.
    pub fn new(segments: Vec<(u64, u64)>) -> Option<SegList> {
        let mut starts = Vec::with_capacity(segments.len() + 1);
        let mut total = 0u64;
        for &(_, n) in &segments {
            starts.push(total);
            total = total.checked_add(n)?;
        }
        starts.push(total);
        let places = segments.iter().map(|_| AtomicU32::new(NO_PLACE)).collect();
        Some(SegList {
            segments,
            starts,
            places,
        })
    }

    /// Total needles numbered.
    pub fn total(&self) -> u64 {
        self.starts.last().copied().unwrap_or(0)
    }

    /// (segment id, needle count) of each segment.
    pub fn segments(&self) -> &[(u64, u64)] {
        &self.segments
    }

    /// The table place of segment `i` (None: unset or invalidated).
    pub fn place(&self, i: usize) -> Option<u32> {
        let p = self.places.get(i)?.load(Ordering::Relaxed);
        (p != NO_PLACE).then_some(p)
    }

    /// Sets the table place of segment `i`.
    pub fn set_place(&self, i: usize, place: Option<u32>) {
        if let Some(p) = self.places.get(i) {
            p.store(place.unwrap_or(NO_PLACE), Ordering::Relaxed);
        }
    }

    /// Forgets every segment whose place is `place`.
    pub fn invalidate(&self, place: u32) {
        for p in &self.places {
            let _ = p.compare_exchange(place, NO_PLACE, Ordering::Relaxed, Ordering::Relaxed);
        }
    }

    /// (segment index, ordinal) of needle number `r`.
    fn locate(&self, r: u64) -> Option<(usize, u32)> {
        let i = self.starts.partition_point(|&s| s <= r).checked_sub(1)?;
        if i >= self.segments.len() {
            return None;
        }
        Some((i, (r - self.starts[i]) as u32))
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.segments.len() * 16 + self.starts.len() * 8 + self.places.len() * 4
    }
}

/// Where a partition's keys section is in the run file: the file's
/// generation, the section's offset and its CRC32C (`12 × slots` bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeysAt {
    /// Generation of the run file that holds them.
    pub generation: u64,
    /// Byte offset of the section.
    pub offset: u64,
    /// CRC32C of the section.
    pub crc: u32,
}

/// One hash partition of a run: one perfect hash over the identities whose
/// partition hash falls in its range, into a slot table of `ref + 1` (0 =
/// empty) and an `f`-bit fingerprint; `ref` numbers the needles of its
/// [`SegList`] one segment after the other.
#[derive(Debug)]
pub struct Part {
    pub(crate) mph: Mphf,
    pub(crate) slots: PackedArray,
    pub(crate) ref_bits: u32,
    pub(crate) fp_bits: u32,
    pub(crate) segs: Arc<SegList>,
    pub(crate) entries: u64,
    pub(crate) keys: KeysAt,
}

impl Part {
    /// Builds a partition over `segs` from `entries` (key, alt key, segment
    /// index in `segs`, ordinal): distinct identities, each with the needle
    /// that is its live version. `seed` varies the perfect hash.
    pub fn build(
        segs: Arc<SegList>,
        entries: &[(u64, u32, u32, u32)],
        fp_bits: u32,
        seed: u64,
    ) -> Result<Part, BuildFailed> {
        let mph = Mphf::build_with(entries.len(), |i| (entries[i].0, entries[i].1), seed)?;
        let ref_bits = bits_for(segs.total()).max(1);
        let fp_bits = fp_bits.clamp(1, 64 - ref_bits);
        let mut slots = PackedArray::new(ref_bits + fp_bits, mph.slots() as usize);
        for &(k, a, seg, ord) in entries {
            let (Some(&start), Some(&(_, n))) = (
                segs.starts.get(seg as usize),
                segs.segments.get(seg as usize),
            ) else {
                return Err(BuildFailed);
            };
            if u64::from(ord) >= n {
                return Err(BuildFailed);
            }
            let s = mph.slot(k, a) as usize;
            let fp = fingerprint(k, a, mph.seed(), fp_bits);
            slots.set(s, (start + u64::from(ord) + 1) | (fp << ref_bits));
        }
        Ok(Part {
            mph,
            slots,
            ref_bits,
            fp_bits,
            segs,
            entries: entries.len() as u64,
            keys: KeysAt {
                generation: 0,
                offset: 0,
                crc: 0,
            },
        })
    }

    /// The (segment index, ordinal) the partition holds for (key, alt key),
    /// if the fingerprint matches (a stranger passes with probability 2^-f).
    #[inline]
    pub fn lookup(&self, key: u64, alt_key: u32) -> Option<(usize, u32)> {
        let s = self.mph.slot(key, alt_key) as usize;
        let v = self.slots.get(s);
        if v >> self.ref_bits != fingerprint(key, alt_key, self.mph.seed(), self.fp_bits) {
            return None;
        }
        self.decode(v)
    }

    /// The slot of an identity.
    pub fn slot_of(&self, key: u64, alt_key: u32) -> usize {
        self.mph.slot(key, alt_key) as usize
    }

    /// What slot `s` holds: (segment index, ordinal), or `None` if empty.
    pub fn slot(&self, s: usize) -> Option<(usize, u32)> {
        self.decode(self.slots.get(s))
    }

    fn decode(&self, v: u64) -> Option<(usize, u32)> {
        let r1 = v & ((1u64 << self.ref_bits) - 1);
        self.segs.locate(r1.checked_sub(1)?)
    }

    /// Number of slots.
    pub fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// Number of identities held.
    pub fn entry_count(&self) -> u64 {
        self.entries
    }

    /// The segments its needle numbers count through.
    pub fn segs(&self) -> &Arc<SegList> {
        &self.segs
    }

    /// Where its keys are in the run file.
    pub fn keys_at(&self) -> KeysAt {
        self.keys
    }

    /// Sets where its keys are in the run file.
    pub fn set_keys_at(&mut self, k: KeysAt) {
        self.keys = k;
    }

    /// Heap bytes used (not the shared segment list).
    pub fn heap_bytes(&self) -> usize {
        self.mph.heap_bytes() + self.slots.heap_bytes()
    }
}

/// A *run*: the merged, read-only index of many sealed segments, in hash
/// partitions ([`Part`]), each covering a range of [`part_hash`]. A lookup
/// is one probe whatever the number of segments or partitions: the
/// partition hash picks a partition (a binary search over a few hundred
/// range starts at most), whose perfect hash picks one slot.
///
/// A merge rebuilds one partition at a time and swaps each in as it is
/// built, so while it runs the run holds new partitions for the low hashes
/// and old ones for the rest; each hash still has exactly one partition.
#[derive(Debug, Clone)]
pub struct Run {
    pub(crate) generation: u64,
    pub(crate) parts: Vec<Arc<Part>>,
    /// The smallest partition hash of each partition (the first is 0).
    pub(crate) bounds: Vec<u64>,
    /// Whether `bounds` are those of [`part_start`] (not in the middle of
    /// a merge): the partition is then computed, not searched for.
    pub(crate) uniform: bool,
}

impl Run {
    /// A run of `parts`, partition q covering the hashes from `bounds[q]`
    /// (increasing, the first 0) to the next bound.
    pub fn from_parts(generation: u64, parts: Vec<Arc<Part>>, bounds: Vec<u64>) -> Option<Run> {
        let ok = !parts.is_empty()
            && parts.len() == bounds.len()
            && bounds.first() == Some(&0)
            && bounds.windows(2).all(|w| w[0] < w[1]);
        let n = bounds.len() as u64;
        let uniform = bounds
            .iter()
            .enumerate()
            .all(|(q, &b)| b == part_start(q as u64, n));
        ok.then_some(Run {
            generation,
            parts,
            bounds,
            uniform,
        })
    }

    /// Builds a run of one partition over `segments` (id, needle count)
    /// from `entries` (key, alt key, segment index in `segments`, ordinal).
    pub fn build(
        generation: u64,
        segments: Vec<(u64, u64)>,
        entries: &[(u64, u32, u32, u32)],
        fp_bits: u32,
    ) -> Result<Run, BuildFailed> {
        let segs = Arc::new(SegList::new(segments).ok_or(BuildFailed)?);
        let part = Part::build(segs, entries, fp_bits, generation ^ 0x5275_6e5f_7365_6564)?;
        Ok(Run {
            generation,
            parts: vec![Arc::new(part)],
            bounds: vec![0],
            uniform: true,
        })
    }

    /// The partition an identity belongs to.
    #[inline]
    pub fn part_index(&self, key: u64, alt_key: u32) -> usize {
        if self.parts.len() == 1 {
            return 0;
        }
        let h = part_hash(key, alt_key);
        if self.uniform {
            return part_of(h, self.parts.len() as u64) as usize;
        }
        self.bounds.partition_point(|&b| b <= h).saturating_sub(1)
    }

    /// The partition that holds an identity's answer, and that answer:
    /// (segment index in the partition's [`SegList`], ordinal), if the
    /// fingerprint matches (a stranger passes with probability 2^-f).
    #[inline]
    pub fn lookup(&self, key: u64, alt_key: u32) -> Option<(&Part, usize, u32)> {
        let p = self.parts.get(self.part_index(key, alt_key))?;
        let (i, o) = p.lookup(key, alt_key)?;
        Some((p, i, o))
    }

    /// The partitions.
    pub fn parts(&self) -> &[Arc<Part>] {
        &self.parts
    }

    /// The smallest partition hash of each partition.
    pub fn bounds(&self) -> &[u64] {
        &self.bounds
    }

    /// Number of identities held.
    pub fn entry_count(&self) -> u64 {
        self.parts.iter().map(|p| p.entries).sum()
    }

    /// The run's generation (a counter bumped by every merge).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The distinct segment lists of its partitions (one, or two while a
    /// merge is swapping partitions in).
    pub fn seg_lists(&self) -> Vec<Arc<SegList>> {
        let mut out: Vec<Arc<SegList>> = Vec::new();
        for p in &self.parts {
            if !out.iter().any(|s| Arc::ptr_eq(s, &p.segs)) {
                out.push(p.segs.clone());
            }
        }
        out
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.parts
            .iter()
            .map(|p| p.heap_bytes() + 16)
            .sum::<usize>()
            + self
                .seg_lists()
                .iter()
                .map(|s| s.heap_bytes())
                .sum::<usize>()
    }
}

#[inline]
fn fingerprint(key: u64, alt_key: u32, seed: u64, bits: u32) -> u64 {
    fingerprint_hash(key, alt_key, seed) >> (64 - bits)
}

/// The index of the active (appendable) segment: a hash map from identity to
/// ordinal, plus the offsets of all needles in file order.
#[derive(Debug, Default, Clone)]
pub struct ActiveIndex {
    /// Identity → ordinal of its latest needle in this segment.
    pub map: HashMap<(u64, u32), u32, IdHasherBuilder>,
    /// Offset of each needle in units of 8 bytes, in file order, followed by
    /// the end of the last needle.
    pub offsets: Vec<u32>,
}

impl ActiveIndex {
    /// An empty index for a segment whose first needle starts at `start`.
    pub fn new(start: u64) -> Self {
        ActiveIndex {
            map: HashMap::with_hasher(IdHasherBuilder),
            offsets: vec![(start / 8) as u32],
        }
    }

    /// Records a needle appended at the current end, `len` bytes long;
    /// returns its ordinal and the ordinal it replaces, if any.
    pub fn push(&mut self, key: u64, alt_key: u32, len: u64) -> (u32, Option<u32>) {
        let ord = (self.offsets.len() - 1) as u32;
        let end = self.offsets.last().copied().unwrap_or(0) as u64 + len / 8;
        self.offsets.push(end as u32);
        (ord, self.map.insert((key, alt_key), ord))
    }

    /// Byte offset and length of needle `ordinal`.
    pub fn needle(&self, ordinal: u32) -> Option<(u64, u64)> {
        let a = *self.offsets.get(ordinal as usize)? as u64;
        let b = *self.offsets.get(ordinal as usize + 1)? as u64;
        Some((a * 8, (b - a) * 8))
    }

    /// Byte offset of the end of the last needle.
    pub fn end(&self) -> u64 {
        self.offsets.last().copied().unwrap_or(0) as u64 * 8
    }

    /// Number of needles.
    pub fn needle_count(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }

    /// Heap bytes used (hash map buckets and control bytes, offsets).
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<((u64, u32), u32)>() + 1;
        self.map.capacity() * entry + self.offsets.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lookup_finds_every_entry_and_rejects_strangers() {
        let segments = vec![(3u64, 5000u64), (9, 1), (12, 7000)];
        let mut entries = Vec::new();
        for i in 0..5000u32 {
            entries.push((u64::from(i), 0, 0, i));
        }
        entries.push((99_999, 1, 1, 0));
        for i in 0..7000u32 {
            entries.push((100_000 + u64::from(i), 2, 2, 6999 - i));
        }
        let r = Run::build(1, segments, &entries, DEFAULT_FINGERPRINT_BITS).unwrap();
        for &(k, a, s, o) in &entries {
            let (_, i, ord) = r.lookup(k, a).unwrap();
            assert_eq!((i, ord), (s as usize, o));
        }
        let strangers = (1_000_000..1_200_000u64)
            .filter(|&k| r.lookup(k, 0).is_some())
            .count();
        assert!(strangers < 20, "{strangers} false positives");
        // an ordinal past its segment is refused
        assert!(Run::build(1, vec![(1, 2)], &[(1, 0, 0, 2)], 16).is_err());
    }

    #[test]
    fn partition_starts_agree_with_part_of() {
        for parts in [1u64, 2, 3, 7, 20, 96, 1000] {
            let bounds: Vec<u64> = (0..parts).map(|q| part_start(q, parts)).collect();
            for i in 0..20_000u64 {
                let h = crate::hash::mix64(i) ^ (i << 60);
                let searched = bounds.partition_point(|&b| b <= h) - 1;
                assert_eq!(
                    part_of(h, parts) as usize,
                    searched,
                    "{parts} parts, h {h:x}"
                );
            }
            for q in 1..parts {
                let b = part_start(q, parts);
                assert_eq!(part_of(b, parts), q);
                assert_eq!(part_of(b - 1, parts), q - 1);
            }
        }
    }

    #[test]
    fn sealed_segment_offsets_and_deleted_bits() {
        let mut a = ActiveIndex::new(64);
        for i in 0..1000u64 {
            a.push(i, 0, 8 * (5 + i % 11));
        }
        let s = SealedSegment::new(&a.offsets, &[]).unwrap();
        assert_eq!(s.needle_count(), 1000);
        for o in 0..1000u32 {
            assert_eq!(s.needle(o), a.needle(o));
        }
        assert!(s.set_deleted(3));
        assert!(!s.set_deleted(3));
        assert!(s.is_deleted(3));
        let t = SealedSegment::new(&s.units(), &s.deleted_words()).unwrap();
        assert!(t.is_deleted(3) && !t.is_deleted(4));
    }
}
