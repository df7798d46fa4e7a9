//! The RAM index structures: a hash map for the active segment, and the
//! compact read-only index of a sealed segment. Pure: no I/O.
//!
//! A sealed segment's index answers "(key, alternate key) → needle ordinal"
//! with a perfect hash ([`Mphf`]) into a slot table whose entries hold the
//! ordinal (in file order) and a fingerprint; ordinal → (offset, length)
//! comes from an Elias–Fano sequence of the needle offsets in file order
//! (needles are contiguous, so a needle's length is the next offset minus
//! its own). A deleted bit per needle completes it. For 1 GiB segments of
//! 4 KiB objects that is about 7.2 bytes per object; see
//! docs/store-format.md for the arithmetic.

use crate::bits::{bits_for, EliasFano, PackedArray};
use crate::hash::{fingerprint_hash, IdHasherBuilder};
use crate::mphf::{BuildFailed, Mphf};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

/// Default fingerprint width: a stranger identity passes a segment's
/// fingerprint check with probability 2^-24, and then costs one read that
/// finds another key in the needle header.
pub const DEFAULT_FINGERPRINT_BITS: u32 = 24;

/// The compact, read-only index of a sealed segment.
#[derive(Debug)]
pub struct SealedIndex {
    pub(crate) mph: Mphf,
    pub(crate) slots: PackedArray,
    pub(crate) ord_bits: u32,
    pub(crate) fp_bits: u32,
    pub(crate) offsets: EliasFano,
    pub(crate) deleted: Vec<AtomicU64>,
    pub(crate) entries: u64,
}

impl SealedIndex {
    /// Builds the index of a segment. `offsets` holds the byte offset of
    /// every needle in file order followed by the end of the last needle
    /// (all multiples of 8); `entries` lists the identities to index with
    /// their ordinal (distinct identities; the latest needle of each).
    pub fn build(
        offsets: &[u64],
        entries: &[(u64, u32, u32)],
        seed: u64,
        fp_bits: u32,
    ) -> Result<SealedIndex, BuildFailed> {
        let needles = offsets.len().saturating_sub(1);
        let ids: Vec<(u64, u32)> = entries.iter().map(|&(k, a, _)| (k, a)).collect();
        let mph = Mphf::build(&ids, seed)?;
        let ord_bits = bits_for(needles as u64).max(1);
        let fp_bits = fp_bits.clamp(1, 64 - ord_bits);
        let mut slots = PackedArray::new(ord_bits + fp_bits, mph.slots() as usize);
        for &(k, a, ord) in entries {
            if ord as usize >= needles {
                return Err(BuildFailed);
            }
            let s = mph.slot(k, a) as usize;
            let fp = fingerprint(k, a, mph.seed(), fp_bits);
            slots.set(s, (u64::from(ord) + 1) | (fp << ord_bits));
        }
        let units: Vec<u64> = offsets.iter().map(|o| o / 8).collect();
        let universe = units.last().copied().unwrap_or(0);
        let offsets = EliasFano::new(&units, universe).ok_or(BuildFailed)?;
        let deleted = (0..needles.div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(SealedIndex {
            mph,
            slots,
            ord_bits,
            fp_bits,
            offsets,
            deleted,
            entries: entries.len() as u64,
        })
    }

    /// The ordinal of the needle indexed for (key, alt key), if the
    /// fingerprint matches (a stranger passes with probability 2^-fp_bits).
    #[inline]
    pub fn lookup(&self, key: u64, alt_key: u32) -> Option<u32> {
        let s = self.mph.slot(key, alt_key) as usize;
        let v = self.slots.get(s);
        let ord1 = v & ((1u64 << self.ord_bits) - 1);
        if ord1 == 0 {
            return None;
        }
        if v >> self.ord_bits != fingerprint(key, alt_key, self.mph.seed(), self.fp_bits) {
            return None;
        }
        Some((ord1 - 1) as u32)
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

    /// Number of needles in the segment (indexed or not).
    pub fn needle_count(&self) -> u64 {
        self.offsets.len().saturating_sub(1) as u64
    }

    /// Number of indexed identities.
    pub fn entry_count(&self) -> u64 {
        self.entries
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

    /// Number of needles marked deleted.
    pub fn deleted_count(&self) -> u64 {
        self.deleted
            .iter()
            .map(|w| u64::from(w.load(Ordering::Relaxed).count_ones()))
            .sum()
    }

    /// The identities and ordinals indexed is not recoverable from the index
    /// itself (it stores no keys); this iterates the occupied slots' ordinals.
    pub fn indexed_ordinals(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.slots.len()).filter_map(move |s| {
            let v = self.slots.get(s) & ((1u64 << self.ord_bits) - 1);
            (v != 0).then(|| (v - 1) as u32)
        })
    }

    /// Heap bytes used by the whole structure.
    pub fn heap_bytes(&self) -> usize {
        self.mph.heap_bytes()
            + self.slots.heap_bytes()
            + self.offsets.heap_bytes()
            + self.deleted.len() * 8
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

    /// Builds the compact index of this segment when it is sealed.
    pub fn seal(&self, seed: u64, fp_bits: u32) -> Result<SealedIndex, BuildFailed> {
        let offsets: Vec<u64> = self.offsets.iter().map(|&o| o as u64 * 8).collect();
        let mut entries: Vec<(u64, u32, u32)> =
            self.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect();
        entries.sort_unstable_by_key(|e| e.2);
        SealedIndex::build(&offsets, &entries, seed, fp_bits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_lookup_matches_active() {
        let mut a = ActiveIndex::new(64);
        for i in 0..10_000u64 {
            a.push(i % 7000, (i % 3) as u32, 8 * (5 + i % 11));
        }
        let s = a.seal(1, DEFAULT_FINGERPRINT_BITS).unwrap();
        assert_eq!(s.needle_count(), 10_000);
        for (&(k, alt), &ord) in &a.map {
            assert_eq!(s.lookup(k, alt), Some(ord));
            assert_eq!(s.needle(ord), a.needle(ord));
        }
        // strangers are (almost always) rejected by the fingerprint
        let strangers = (100_000..200_000u64)
            .filter(|&k| s.lookup(k, 0).is_some())
            .count();
        assert!(strangers < 5, "{strangers} false positives");
        assert!(s.set_deleted(3));
        assert!(!s.set_deleted(3));
        assert!(s.is_deleted(3));
        assert_eq!(s.deleted_count(), 1);
    }
}
