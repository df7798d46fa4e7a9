//! The node-wide index over every segment of every device: the segment
//! table, the recent map of writes since the last merge, its tombstones,
//! and the run that holds everything merged before.

use super::handle::Segment;
use super::report::CounterCells;
use crate::error::Result;
use crate::format::needle::{self, HEADER_LEN};
use crate::hash::IdHasherBuilder;
use crate::index::Run;
use crate::recent::{hash_of, RecentLoc, RecentTable};
use std::collections::HashSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where the node-wide index says an identity lives: a place in the segment
/// table and a needle ordinal in that segment.
pub(super) type Loc = RecentLoc;

/// A tombstone in the exact map the open settles identities in: hides
/// whatever the run holds for an identity (deleted since the run was
/// built). In the node index, tombstones are the `tombs` set.
pub(super) const TOMB: Loc = Loc {
    slot: u32::MAX,
    ord: u32::MAX,
};

/// The node-wide index: which needle is the live version of each identity,
/// over every segment of every device.
///
/// Two parts, each probed at most once per lookup: the *recent map*
/// (identity → location, exact keys) holds every write since the last merge
/// and tombstones; the *run* ([`Run`]) holds everything merged before. A
/// recent entry always wins, so each identity has exactly one answer and a
/// GET never probes further.
pub(super) struct NodeIndex {
    /// Segment table: `Loc::slot` → segment (None once a compaction
    /// replaced it by a renumbered generation).
    pub(super) table: Vec<Option<Arc<Segment>>>,
    /// Fingerprint → location of every needle written since the last
    /// merge (8 bytes per entry; a match is confirmed by the needle's
    /// header).
    pub(super) recent: RecentTable,
    /// Identities deleted since the run was built (exact).
    pub(super) tombs: HashSet<(u64, u32), IdHasherBuilder>,
    /// Bits of the identity hash the recent table is keyed by (all but
    /// in tests, see `StoreConfig::recent_hash_bits`).
    pub(super) hash_mask: u64,
    /// The run; its segment lists say which table slot each of its
    /// segments is in (none once no longer valid).
    pub(super) run: Option<Arc<Run>>,
    /// Size of the recent map after the last merge.
    pub(super) recent_floor: usize,
}

/// What the index answers for an identity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Answer {
    /// Live (as far as RAM knows) at this location, from the recent map.
    Recent(Loc),
    /// Live at this location, from the run (a fingerprint match: may be a
    /// stranger, which the needle header tells).
    Run(Loc),
    /// Deleted since the run was built.
    Tomb,
    /// Unknown.
    Absent,
}

impl Answer {
    pub(super) fn loc(self) -> Option<Loc> {
        match self {
            Answer::Recent(l) | Answer::Run(l) => Some(l),
            _ => None,
        }
    }
}

impl NodeIndex {
    pub(super) fn seg(&self, slot: u32) -> Option<&Arc<Segment>> {
        self.table.get(slot as usize).and_then(|s| s.as_ref())
    }

    /// The run's answer for an identity, if its segment is still valid.
    pub(super) fn run_hit(&self, key: u64, alt: u32) -> Option<Loc> {
        let run = self.run.as_ref()?;
        let (part, i, ord) = run.lookup(key, alt)?;
        let slot = part.segs().place(i)?;
        Some(Loc { slot, ord })
    }

    /// The recent table's key for an identity.
    pub(super) fn hid(&self, key: u64, alt: u32) -> u64 {
        hash_of(key, alt) & self.hash_mask
    }

    /// The run's answer alone; also returns the number of probes.
    pub(super) fn find_in_run(&self, key: u64, alt: u32) -> (Answer, u64) {
        match self.run_hit(key, alt) {
            Some(l) => (Answer::Run(l), 2),
            None => (Answer::Absent, if self.run.is_some() { 2 } else { 1 }),
        }
    }

    /// Looks an identity up; also returns the number of probes (1 or 2).
    /// A single recent candidate is returned unconfirmed (the GET confirms
    /// it by the header it reads, and asks the run if it is a stranger);
    /// several are told apart by their headers now.
    pub(super) fn find(&self, key: u64, alt: u32, c: &CounterCells) -> (Answer, u64) {
        if self.tombs.contains(&(key, alt)) {
            return (Answer::Tomb, 1);
        }
        let mut it = self.recent.candidates(self.hid(key, alt));
        match (it.next(), it.next()) {
            (None, _) => self.find_in_run(key, alt),
            (Some(l), None) => (Answer::Recent(l), 1),
            _ => match self.recent_exact(key, alt, c, true) {
                Some(l) => (Answer::Recent(l), 1),
                None => self.find_in_run(key, alt),
            },
        }
    }

    /// The identity of the needle at `loc`, from its header (one `pread`).
    pub(super) fn ident_at(&self, loc: Loc, c: &CounterCells) -> Option<(u64, u32)> {
        ident_in(&self.table, loc, c)
    }

    /// The recent table's entry for exactly (key, alt), confirmed by the
    /// candidates' headers. `lenient`: a candidate whose header cannot be
    /// read counts as a match (a reader then gets the read's error rather
    /// than a silent miss); otherwise as a stranger.
    fn recent_exact(&self, key: u64, alt: u32, c: &CounterCells, lenient: bool) -> Option<Loc> {
        let mut unreadable = None;
        for l in self.recent.candidates(self.hid(key, alt)) {
            match self.ident_at(l, c) {
                Some(id) if id == (key, alt) => return Some(l),
                Some(_) => {}
                None => unreadable = Some(l),
            }
        }
        if lenient {
            unreadable
        } else {
            None
        }
    }

    /// Whether the recent part answers for (key, alt) (an entry or a
    /// tombstone), confirmed by headers.
    pub(super) fn recent_has(&self, key: u64, alt: u32, c: &CounterCells) -> bool {
        self.tombs.contains(&(key, alt)) || self.recent_exact(key, alt, c, false).is_some()
    }

    pub(super) fn current(&self, key: u64, alt: u32, c: &CounterCells) -> Option<Loc> {
        if self.tombs.contains(&(key, alt)) {
            return None;
        }
        if let Some(l) = self.recent_exact(key, alt, c, true) {
            return Some(l);
        }
        self.run_hit(key, alt)
    }

    /// Enters (key, alt) → loc, replacing the identity's previous recent
    /// entry (`hint`: where the caller found it, which spares the header
    /// reads) and any tombstone.
    pub(super) fn set(
        &mut self,
        key: u64,
        alt: u32,
        loc: Loc,
        hint: Option<Loc>,
        c: &CounterCells,
    ) -> Result<()> {
        self.tombs.remove(&(key, alt));
        let h = self.hid(key, alt);
        let old = match hint {
            Some(o) if self.recent.contains(h, o) => Some(o),
            _ => self.recent_exact(key, alt, c, false),
        };
        if let Some(o) = old {
            self.recent.remove(h, o);
        }
        let (table, mask) = (&self.table, self.hash_mask);
        self.recent.insert(h, loc, &mut |l| {
            ident_in(table, l, c).map(|(k, a)| hash_of(k, a) & mask)
        })?;
        Ok(())
    }

    /// The needle at `loc` is no longer the live version of (key, alt) (it
    /// was deleted, or found dead): drop it from the index, hiding whatever
    /// the run holds for the identity.
    pub(super) fn forget(&mut self, key: u64, alt: u32, loc: Loc, c: &CounterCells) {
        if self.recent.remove(self.hid(key, alt), loc) {
            if self.run_hit(key, alt).is_some() {
                self.tombs.insert((key, alt));
            }
        } else if !self.recent_has(key, alt, c) && self.run_hit(key, alt) == Some(loc) {
            self.tombs.insert((key, alt));
        }
    }

    /// Gives the recent part's memory back after a merge emptied it.
    pub(super) fn shrink_recent(&mut self, c: &CounterCells) {
        let (table, mask) = (&self.table, self.hash_mask);
        self.recent
            .shrink_if_sparse(&mut |l| ident_in(table, l, c).map(|(k, a)| hash_of(k, a) & mask));
        if self.tombs.capacity() > 4 * self.tombs.len().max(1024) {
            self.tombs.shrink_to_fit();
        }
    }

    /// Entries and tombstones of the recent part.
    pub(super) fn recent_len(&self) -> usize {
        self.recent.len() + self.tombs.len()
    }

    pub(super) fn recent_heap_bytes(&self) -> u64 {
        // hashbrown allocates a power of two of buckets, at most 7/8 of
        // them usable (`capacity`), each an entry and a control byte, plus
        // one group (16) of trailing control bytes.
        let cap = self.tombs.capacity();
        let tombs = if cap == 0 {
            0
        } else {
            let buckets = if cap < 8 {
                cap + 1
            } else {
                (cap * 8 / 7).next_power_of_two()
            };
            buckets * (std::mem::size_of::<(u64, u32)>() + 1) + 16
        };
        (self.recent.heap_bytes() + tombs) as u64
    }
}

/// The identity of the needle at `loc` of the segment table, from its
/// header (one `pread`); None if it cannot be read.
pub(super) fn ident_in(
    table: &[Option<Arc<Segment>>],
    loc: Loc,
    c: &CounterCells,
) -> Option<(u64, u32)> {
    let seg = table.get(loc.slot as usize)?.as_ref()?;
    let (offset, _) = seg.needle(loc.ord)?;
    let buf = seg.pread(offset, HEADER_LEN as u64, c).ok()?;
    let h = needle::repair_header(&buf, seg.flag_code()).ok()?;
    c.header_checks.fetch_add(1, Ordering::Relaxed);
    Some((h.key, h.alt_key))
}
