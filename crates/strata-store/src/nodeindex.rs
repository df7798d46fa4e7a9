//! The node-wide RAM index: identity → (segment, ordinal) for every segment
//! of every device directory, with a cost per lookup that does not depend
//! on the number of segments. Pure: no I/O.
//!
//! Two parts, probed together (two probes per GET, present or absent key):
//!
//! - a [`Run`]: a read-only perfect-hash table over the identities of the
//!   sealed segments merged so far (the bulk of the store). Each slot holds
//!   the ordinal of the needle, the segment (as a position in the run's
//!   segment list) and a fingerprint that rejects strangers;
//! - a hash map (`recent`) holding, for each identity written since the
//!   last merge, its newest version, and a second map (`older`) with every
//!   other version the index still knows (older versions awaiting
//!   compaction; usually empty for most identities).
//!
//! The store merges the map into a new run in the background when it grows
//! past a fraction of the run (see `Store`), so the map stays small.
//! docs/store-format.md explains the choice against the alternatives.

use crate::bits::{bits_for, PackedArray};
use crate::hash::{fingerprint_hash, IdHasherBuilder};
use crate::mphf::{BuildFailed, Mphf};
use std::collections::HashMap;

/// Default fingerprint width of the run: a stranger passes with
/// probability 2^-14 (0.6 extra reads per 10,000 GETs of absent keys).
pub const DEFAULT_FINGERPRINT_BITS: u32 = 14;

/// Where a version of an identity lives: segment id and ordinal (position
/// of the needle in file order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Loc {
    /// Segment id (ids are below 2^32).
    pub seg: u32,
    /// Ordinal of the needle in its segment.
    pub ord: u32,
}

/// The read-only part of the node index over the sealed segments merged so
/// far.
#[derive(Debug, Clone)]
pub struct Run {
    pub(crate) mph: Mphf,
    /// Per slot: (ordinal + 1) | segment position << ord_bits | fingerprint
    /// << (ord_bits + seg_bits); 0 = empty (or removed).
    pub(crate) slots: PackedArray,
    pub(crate) ord_bits: u32,
    pub(crate) seg_bits: u32,
    pub(crate) fp_bits: u32,
    /// Segment ids covered, ascending (a slot names a position here).
    pub(crate) segs: Vec<u32>,
    pub(crate) entries: u64,
    /// Segments whose slots were emptied by [`Run::forget_segment`]: the
    /// run no longer covers them (their identities are in the maps).
    pub(crate) forgotten: std::collections::HashSet<u32>,
}

impl Run {
    /// Builds a run over `entries` (identity, segment id, ordinal): distinct
    /// identities, every segment id in `segs` (ascending, distinct), every
    /// ordinal below `max_needles`.
    pub fn build(
        entries: &[(u64, u32, Loc)],
        segs: Vec<u32>,
        max_needles: u64,
        seed: u64,
        fp_bits: u32,
    ) -> Result<Run, BuildFailed> {
        if segs.windows(2).any(|w| w[0] >= w[1]) {
            return Err(BuildFailed);
        }
        let ids: Vec<(u64, u32)> = entries.iter().map(|&(k, a, _)| (k, a)).collect();
        let mph = Mphf::build(&ids, seed)?;
        let ord_bits = bits_for(max_needles).max(1);
        let seg_bits = bits_for(segs.len().saturating_sub(1) as u64).max(1);
        if ord_bits + seg_bits >= 64 {
            return Err(BuildFailed);
        }
        let fp_bits = fp_bits.clamp(1, 64 - ord_bits - seg_bits);
        let mut run = Run {
            slots: PackedArray::new(ord_bits + seg_bits + fp_bits, mph.slots() as usize),
            mph,
            ord_bits,
            seg_bits,
            fp_bits,
            segs,
            entries: entries.len() as u64,
            forgotten: Default::default(),
        };
        for &(k, a, loc) in entries {
            let pos = run.segs.binary_search(&loc.seg).map_err(|_| BuildFailed)?;
            if u64::from(loc.ord) >= max_needles {
                return Err(BuildFailed);
            }
            let s = run.mph.slot(k, a) as usize;
            run.put(s, k, a, pos, loc.ord);
        }
        Ok(run)
    }

    fn put(&mut self, slot: usize, key: u64, alt: u32, pos: usize, ord: u32) {
        let fp = fingerprint(key, alt, self.mph.seed(), self.fp_bits);
        let v = (u64::from(ord) + 1)
            | ((pos as u64) << self.ord_bits)
            | (fp << (self.ord_bits + self.seg_bits));
        self.slots.set(slot, v);
    }

    /// The slot and location of the version of (key, alt) the run holds, if
    /// the fingerprint matches (a stranger passes with probability
    /// 2^-fp_bits).
    #[inline]
    pub fn lookup(&self, key: u64, alt: u32) -> Option<(usize, Loc)> {
        let s = self.mph.slot(key, alt) as usize;
        let v = self.slots.get(s);
        let ord1 = v & ((1u64 << self.ord_bits) - 1);
        if ord1 == 0 {
            return None;
        }
        if v >> (self.ord_bits + self.seg_bits)
            != fingerprint(key, alt, self.mph.seed(), self.fp_bits)
        {
            return None;
        }
        let pos = (v >> self.ord_bits) & ((1u64 << self.seg_bits) - 1);
        let seg = *self.segs.get(pos as usize)?;
        Some((
            s,
            Loc {
                seg,
                ord: (ord1 - 1) as u32,
            },
        ))
    }

    /// Empties a slot (the version it held was deleted or superseded).
    pub fn clear(&mut self, slot: usize) {
        if slot < self.slots.len() {
            self.slots.set(slot, 0);
        }
    }

    /// Points the slot of (key, alt) at another ordinal of the same segment
    /// (after a compaction).
    pub fn set_ord(&mut self, slot: usize, key: u64, alt: u32, loc: Loc) {
        if let Ok(pos) = self.segs.binary_search(&loc.seg) {
            if u64::from(loc.ord) + 1 < (1u64 << self.ord_bits) {
                self.put(slot, key, alt, pos, loc.ord);
            }
        }
    }

    /// Whether the run covers segment `id`.
    pub fn covers(&self, id: u32) -> bool {
        self.segs.binary_search(&id).is_ok() && !self.forgotten.contains(&id)
    }

    /// Empties every slot of segment `id` (its file is not the one the run
    /// was built over). One pass over the slots.
    pub fn forget_segment(&mut self, id: u32) {
        let Ok(pos) = self.segs.binary_search(&id) else {
            return;
        };
        self.forgotten.insert(id);
        for s in 0..self.slots.len() {
            let v = self.slots.get(s);
            if v & ((1u64 << self.ord_bits) - 1) != 0
                && (v >> self.ord_bits) & ((1u64 << self.seg_bits) - 1) == pos as u64
            {
                self.slots.set(s, 0);
            }
        }
    }

    /// Identities indexed at build time.
    pub fn entry_count(&self) -> u64 {
        self.entries
    }

    /// Segment ids covered.
    pub fn segments(&self) -> &[u32] {
        &self.segs
    }

    /// Live (slot-occupying) locations, one pass over the slots.
    pub fn locations(&self) -> impl Iterator<Item = Loc> + '_ {
        (0..self.slots.len()).filter_map(move |s| {
            let v = self.slots.get(s);
            let ord1 = v & ((1u64 << self.ord_bits) - 1);
            (ord1 != 0).then(|| {
                let pos = (v >> self.ord_bits) & ((1u64 << self.seg_bits) - 1);
                Loc {
                    seg: self.segs.get(pos as usize).copied().unwrap_or(0),
                    ord: (ord1 - 1) as u32,
                }
            })
        })
    }

    /// Heap bytes.
    pub fn heap_bytes(&self) -> usize {
        self.mph.heap_bytes() + self.slots.heap_bytes() + self.segs.len() * 4
    }
}

#[inline]
fn fingerprint(key: u64, alt: u32, seed: u64, bits: u32) -> u64 {
    fingerprint_hash(key, alt, seed) >> (64 - bits)
}

/// The whole node index: a run plus the maps of recent and older versions.
#[derive(Debug, Default)]
pub struct NodeIndex {
    /// The merged, read-only part.
    pub run: Option<Run>,
    /// Newest version of each identity outside the run's primary slots.
    pub recent: HashMap<(u64, u32), Loc, IdHasherBuilder>,
    /// Every other version still indexed (each older than the identity's
    /// entry in `recent`).
    pub older: HashMap<(u64, u32), Vec<Loc>, IdHasherBuilder>,
}

impl NodeIndex {
    /// Records a version (a needle just written, or found when opening).
    /// Within one segment a later ordinal replaces an earlier one (the
    /// earlier needle is then garbage known only to its file); across
    /// segments every version stays indexed until deleted, superseded or
    /// compacted away.
    pub fn insert(&mut self, key: u64, alt: u32, loc: Loc) -> Option<Loc> {
        let id = (key, alt);
        match self.recent.get(&id).copied() {
            None => {
                self.recent.insert(id, loc);
                None
            }
            Some(m) if m.seg == loc.seg => {
                self.recent.insert(id, loc);
                Some(m)
            }
            Some(m) if m.seg < loc.seg => {
                self.recent.insert(id, loc);
                self.older.entry(id).or_default().push(m);
                None
            }
            Some(_) => {
                let v = self.older.entry(id).or_default();
                match v.iter_mut().find(|l| l.seg == loc.seg) {
                    Some(l) => {
                        let prev = *l;
                        *l = loc;
                        Some(prev)
                    }
                    None => {
                        v.push(loc);
                        None
                    }
                }
            }
        }
    }

    /// The newest version of (key, alt) in a segment with id below `below`
    /// (the run's candidate may be a fingerprint false positive).
    pub fn candidate(&self, key: u64, alt: u32, below: u64) -> Option<Loc> {
        self.candidate_counted(key, alt, below).0
    }

    /// [`NodeIndex::candidate`], with the number of structures probed.
    pub fn candidate_counted(&self, key: u64, alt: u32, below: u64) -> (Option<Loc>, u32) {
        let id = (key, alt);
        let m = self.recent.get(&id).copied();
        let r = self
            .run
            .as_ref()
            .and_then(|r| r.lookup(key, alt))
            .map(|x| x.1);
        let mut probes = 1 + u32::from(self.run.is_some());
        let ok = |l: &Loc| u64::from(l.seg) < below;
        let mut best = [m, r]
            .into_iter()
            .flatten()
            .filter(ok)
            .max_by_key(|l| l.seg);
        // Every older version lies below the newest of `recent` and the
        // run: it can only be the answer once the search went past those.
        if below != u64::MAX && !self.older.is_empty() {
            probes += 1;
            if let Some(v) = self.older.get(&id) {
                for l in v.iter().filter(|l| ok(l)) {
                    if best.is_none_or(|b| l.seg > b.seg) {
                        best = Some(*l);
                    }
                }
            }
        }
        (best, probes)
    }

    /// Whether (key, alt) is indexed at `loc`.
    pub fn is_indexed(&self, key: u64, alt: u32, loc: Loc) -> bool {
        let id = (key, alt);
        self.recent.get(&id) == Some(&loc)
            || self
                .run
                .as_ref()
                .and_then(|r| r.lookup(key, alt))
                .is_some_and(|x| x.1 == loc)
            || self.older.get(&id).is_some_and(|v| v.contains(&loc))
    }

    /// Drops the version of (key, alt) at `loc`; returns whether it was
    /// indexed.
    pub fn remove(&mut self, key: u64, alt: u32, loc: Loc) -> bool {
        let id = (key, alt);
        if let Some(run) = self.run.as_mut() {
            if let Some((slot, l)) = run.lookup(key, alt) {
                if l == loc {
                    run.clear(slot);
                    // Keep every older version below `recent`.
                    let top = self
                        .older
                        .get(&id)
                        .and_then(|v| (0..v.len()).max_by_key(|&i| v[i].seg));
                    if let Some(i) = top {
                        let r = self.recent.get(&id).copied();
                        if let Some(v) = self.older.get_mut(&id) {
                            if r.is_none_or(|r| v[i].seg > r.seg) {
                                let l = v.swap_remove(i);
                                if let Some(r) = r {
                                    v.push(r);
                                }
                                if v.is_empty() {
                                    self.older.remove(&id);
                                }
                                self.recent.insert(id, l);
                            }
                        }
                    }
                    return true;
                }
            }
        }
        if self.recent.get(&id) == Some(&loc) {
            self.recent.remove(&id);
            // Promote the newest older version, keeping `recent` the newest.
            if let Some(v) = self.older.get_mut(&id) {
                if let Some(i) = (0..v.len()).max_by_key(|&i| v[i].seg) {
                    let l = v.swap_remove(i);
                    self.recent.insert(id, l);
                }
                if v.is_empty() {
                    self.older.remove(&id);
                }
            }
            return true;
        }
        if let Some(v) = self.older.get_mut(&id) {
            if let Some(i) = v.iter().position(|l| *l == loc) {
                v.swap_remove(i);
                if v.is_empty() {
                    self.older.remove(&id);
                }
                return true;
            }
        }
        false
    }

    /// Moves the version of (key, alt) at `from` to `to` (same segment,
    /// after a compaction renumbered its needles).
    pub fn renumber(&mut self, key: u64, alt: u32, from: Loc, to: Loc) {
        let id = (key, alt);
        if let Some(run) = self.run.as_mut() {
            if let Some((slot, l)) = run.lookup(key, alt) {
                if l == from {
                    run.set_ord(slot, key, alt, to);
                    return;
                }
            }
        }
        if let Some(l) = self.recent.get_mut(&id) {
            if *l == from {
                *l = to;
                return;
            }
        }
        if let Some(v) = self.older.get_mut(&id) {
            if let Some(l) = v.iter_mut().find(|l| **l == from) {
                *l = to;
            }
        }
    }

    /// Drops every map entry of the given segments (they were merged into a
    /// new run).
    pub fn forget_map_entries(&mut self, segs: &std::collections::HashSet<u32>) {
        self.recent.retain(|_, l| !segs.contains(&l.seg));
        self.older.retain(|_, v| {
            v.retain(|l| !segs.contains(&l.seg));
            !v.is_empty()
        });
    }

    /// Versions in the maps (recent plus older).
    pub fn map_entries(&self) -> u64 {
        self.recent.len() as u64 + self.older.values().map(|v| v.len() as u64).sum::<u64>()
    }

    /// Heap bytes of the maps (buckets, control bytes, older lists).
    pub fn map_heap_bytes(&self) -> usize {
        let recent = self.recent.capacity() * (std::mem::size_of::<((u64, u32), Loc)>() + 1);
        let older = self.older.capacity() * (std::mem::size_of::<((u64, u32), Vec<Loc>)>() + 1)
            + self
                .older
                .values()
                .map(|v| v.capacity() * std::mem::size_of::<Loc>())
                .sum::<usize>();
        recent + older
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_lookup_and_updates() {
        let entries: Vec<(u64, u32, Loc)> = (0..20_000u64)
            .map(|i| {
                (
                    i * 31,
                    (i % 3) as u32,
                    Loc {
                        seg: 10 + (i % 7) as u32,
                        ord: (i / 7) as u32,
                    },
                )
            })
            .collect();
        let segs: Vec<u32> = (10..17).collect();
        let mut run = Run::build(&entries, segs, 3000, 5, DEFAULT_FINGERPRINT_BITS).unwrap();
        for &(k, a, l) in &entries {
            assert_eq!(run.lookup(k, a).map(|x| x.1), Some(l));
        }
        let strangers = (1..100_000u64)
            .filter(|k| run.lookup(k * 31 + 1, 0).is_some())
            .count();
        assert!(strangers < 30, "{strangers} false positives in 100,000");
        let (slot, l) = run.lookup(31, 1).unwrap();
        run.set_ord(slot, 31, 1, Loc { seg: l.seg, ord: 2 });
        assert_eq!(run.lookup(31, 1).unwrap().1.ord, 2);
        run.clear(slot);
        assert_eq!(run.lookup(31, 1), None);
        run.forget_segment(10);
        assert!(run.locations().all(|l| l.seg != 10));
        assert_eq!(run.lookup(8 * 31, 2).map(|x| x.1.seg), Some(11));
    }

    #[test]
    fn versions_newest_first() {
        let mut x = NodeIndex::default();
        let l = |seg, ord| Loc { seg, ord };
        x.insert(1, 0, l(5, 0));
        x.insert(1, 0, l(9, 3));
        x.insert(1, 0, l(7, 1));
        assert_eq!(x.candidate(1, 0, u64::MAX), Some(l(9, 3)));
        assert_eq!(x.candidate(1, 0, 9), Some(l(7, 1)));
        assert_eq!(x.candidate(1, 0, 7), Some(l(5, 0)));
        assert_eq!(x.candidate(1, 0, 5), None);
        // same segment: the later ordinal replaces the earlier
        assert_eq!(x.insert(1, 0, l(9, 4)), Some(l(9, 3)));
        assert!(x.remove(1, 0, l(9, 4)));
        assert_eq!(x.candidate(1, 0, u64::MAX), Some(l(7, 1)));
        x.renumber(1, 0, l(5, 0), l(5, 8));
        assert!(x.is_indexed(1, 0, l(5, 8)));
        assert_eq!(x.map_entries(), 2);
        x.forget_map_entries(&[5u32, 7].into_iter().collect());
        assert_eq!(x.candidate(1, 0, u64::MAX), None);
    }
}
