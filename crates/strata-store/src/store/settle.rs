//! Settling, on open, the identities that two segments (or a segment and
//! the run) both claim as live: the needles' headers, then the version
//! order or the segments' order, tell which wins, and the loser is flagged
//! superseded.

use super::locks::{read, write};
use super::node_index::{ident_in, Loc, TOMB};
use super::Inner;
use crate::error::Result;
use crate::format::needle::{self, FLAG_DELETED, FLAG_SUPERSEDED, HEADER_LEN};
use crate::hash::IdHasherBuilder;
use crate::recent::{hash_of, RecentTable};
#[cfg(doc)]
use crate::StoreConfig;
use std::collections::{HashMap, HashSet};

impl Inner {
    /// Reads the header of the needle at `loc`: Some(live) if it is
    /// (key, alt)'s (live = flagged neither deleted nor superseded).
    fn probe_header(&self, loc: Loc, key: u64, alt: u32) -> Result<Option<bool>> {
        let Some(seg) = read(&self.idx).seg(loc.slot).cloned() else {
            return Ok(None);
        };
        let Some((offset, _)) = seg.needle(loc.ord) else {
            return Ok(None);
        };
        let buf = seg.pread(offset, HEADER_LEN as u64, &self.counters)?;
        // A header one flipped bit damaged still names its needle (the
        // open indexes such needles: docs/reliability.md, finding 18).
        let h = needle::repair_header(&buf, seg.flag_code()).map_err(|e| seg.corrupt(offset, e))?;
        if (h.key, h.alt_key) != (key, alt) {
            return Ok(None);
        }
        Ok(Some(h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0))
    }

    fn seg_id(&self, loc: Loc) -> u64 {
        read(&self.idx).seg(loc.slot).map_or(0, |s| s.id)
    }

    /// The data of the needle at `loc` if it is (key, alt)'s and passes
    /// its checks: None for a damaged needle too (its data tells no
    /// version; [`Inner::pick`] lets it answer).
    fn needle_data(&self, loc: Loc, key: u64, alt: u32) -> Result<Option<Vec<u8>>> {
        let Some(seg) = read(&self.idx).seg(loc.slot).cloned() else {
            return Ok(None);
        };
        let Some((offset, len)) = seg.needle(loc.ord) else {
            return Ok(None);
        };
        let buf = seg.pread(offset, len, &self.counters)?;
        Ok(
            match needle::parse_mending(&buf, seg.flag_code()).map(|(h, d, _)| (h, d)) {
                Ok((h, data)) => ((h.key, h.alt_key) == (key, alt)).then(|| data.to_vec()),
                Err(_) => None,
            },
        )
    }

    /// Two needles both claim to be the live version of (key, alt): the one
    /// whose header says so wins; if both do (a crash between a put's write
    /// and its flagging of the version it replaced, a flag not yet synced
    /// under a [`StoreConfig::version_order`], or a store written by format
    /// 1, where an older needle in a lower segment was not flagged), the
    /// newer by the version order wins, else (no order, or it cannot tell)
    /// the one in the higher segment (then later in the segment); the other
    /// is flagged superseded now.
    fn pick(&self, key: u64, alt: u32, x: Loc, y: Loc) -> Result<Option<Loc>> {
        let lx = self.probe_header(x, key, alt)? == Some(true);
        let ly = self.probe_header(y, key, alt)? == Some(true);
        Ok(match (lx, ly) {
            (true, true) => {
                let by_data = match self.cfg.version_order {
                    Some(order) => match (
                        self.needle_data(x, key, alt)?,
                        self.needle_data(y, key, alt)?,
                    ) {
                        (Some(a), Some(b)) => (order.cmp)(&a, &b).filter(|o| o.is_ne()),
                        // One of them is damaged: which is newer cannot be
                        // told, and serving the other could be serving an
                        // older version. The damaged one answers (a read
                        // fails, and a cluster reads another replica), and
                        // neither is flagged: the next put of the identity,
                        // or a later open, settles them again.
                        (None, Some(_)) => return Ok(Some(x)),
                        (Some(_), None) => return Ok(Some(y)),
                        (None, None) => None,
                    },
                    None => None,
                };
                let x_newer = match by_data {
                    Some(o) => o.is_gt(),
                    None => (self.seg_id(x), x.ord) > (self.seg_id(y), y.ord),
                };
                let (win, lose) = if x_newer { (x, y) } else { (y, x) };
                let target = read(&self.idx).target(lose, key, alt);
                self.flag_many(&[target], FLAG_SUPERSEDED, true)?;
                Some(win)
            }
            (true, false) => Some(x),
            (false, true) => Some(y),
            (false, false) => None,
        })
    }

    /// On open: enters the identities found in the segments the run does
    /// not cover into the recent map, settling any identity claimed by two
    /// segments, or by one of them and the run, from the needle headers.
    pub(super) fn settle(&self, cands: Vec<(u64, u32, Loc)>) -> Result<()> {
        let mut recent: HashMap<(u64, u32), Loc, IdHasherBuilder> =
            HashMap::with_capacity_and_hasher(cands.len(), IdHasherBuilder);
        for (k, a, loc) in cands {
            match recent.get(&(k, a)).copied() {
                None => {
                    recent.insert((k, a), loc);
                }
                Some(prev) => match self.pick(k, a, prev, loc)? {
                    Some(w) => {
                        recent.insert((k, a), w);
                    }
                    None => {
                        recent.remove(&(k, a));
                    }
                },
            }
        }
        let mut conflicts = Vec::new();
        {
            let ix = read(&self.idx);
            if ix.run.is_some() {
                for (&(k, a), &loc) in &recent {
                    if let Some(r) = ix.run_hit(k, a) {
                        conflicts.push((k, a, loc, r));
                    }
                }
            }
        }
        for (k, a, loc, r) in conflicts {
            if self.probe_header(r, k, a)?.is_none() {
                continue; // a stranger behind the run's fingerprint
            }
            match self.pick(k, a, r, loc)? {
                Some(w) if w == r => {
                    recent.remove(&(k, a));
                }
                Some(_) => {}
                None => {
                    recent.insert((k, a), TOMB);
                }
            }
        }
        let mut guard = write(&self.idx);
        let ix = &mut *guard;
        let mut table = RecentTable::with_capacity(recent.len());
        let mut tombs = HashSet::with_hasher(IdHasherBuilder);
        for ((k, a), loc) in recent {
            if loc == TOMB {
                tombs.insert((k, a));
            } else {
                let mask = ix.hash_mask;
                table.insert(hash_of(k, a) & mask, loc, &mut |l| {
                    ident_in(&ix.table, l, &self.counters).map(|(k, a)| hash_of(k, a) & mask)
                })?;
            }
        }
        ix.recent = table;
        ix.tombs = tombs;
        Ok(())
    }
}
