//! One segment's index as its checkpoint file stores it: the offsets of its
//! needles in file order and the identity → ordinal entries of the latest
//! needle of each identity in it. Pure: no I/O. (The RAM index over all
//! segments is `nodeindex`.)

use crate::hash::IdHasherBuilder;
use std::collections::HashMap;

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

    /// Bytes of the needles indexed (the live ones, as far as this segment
    /// knows).
    pub fn live_bytes(&self) -> u64 {
        self.map
            .values()
            .filter_map(|&o| self.needle(o))
            .map(|x| x.1)
            .sum()
    }

    /// Heap bytes used (hash map buckets and control bytes, offsets).
    pub fn heap_bytes(&self) -> usize {
        let entry = std::mem::size_of::<((u64, u32), u32)>() + 1;
        self.map.capacity() * entry + self.offsets.capacity() * 4
    }
}
