//! The merge of the node-wide index: the recent map's entries of sealed
//! segments and the old run built into a new run, one hash partition at a
//! time, written to the run file before the recent entries it took go.

use super::handle::{Entry, Segment};
use super::locks::{lock, read, write};
use super::node_index::{Loc, TOMB};
use super::Inner;
use crate::bits::bits_for;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::run as run_file;
use crate::format::superblock::SUPERBLOCK_LEN;
use crate::index::{part_hash, part_of, part_start, Part, Run, SegList};
use crate::segment::{write_file_atomic_with, ScanItem};
use crate::spill::Spill;
use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The recent map grows by at least this many entries between merges.
const MERGE_MIN_ENTRIES: usize = 1 << 16;
/// At most this many hash partitions in a run (2^16 × the default 2^20
/// identities per partition is far past any node).
const MAX_RUN_PARTITIONS: usize = 1 << 16;
/// A merge's spill files (temporary: an open removes `*.tmp` files).
const SPILL_TAKEN: &str = "strata.merge-taken.tmp";
const SPILL_OLD: &str = "strata.merge-old.tmp";

/// What [`Inner::merge_parts`] builds from.
struct MergePlan<'a> {
    old_run: Option<Arc<Run>>,
    segs: &'a Arc<SegList>,
    pos: &'a HashMap<u32, u32>,
    table: &'a [Option<Arc<Segment>>],
    taken: &'a Spill,
    nparts: u64,
    generation: u64,
    fp_bits: u32,
}

impl Inner {
    /// (key, alt key, ordinal) of the needles of a sealed segment that may
    /// be live: its checkpoint's entries, or every needle's header if the
    /// checkpoint cannot be read.
    fn segment_identities(&self, seg: &Segment) -> Result<Vec<Entry>> {
        let from_ck = std::fs::read(seg.index_path()).ok().and_then(|b| {
            let (h, body) = checkpoint::parse(&b).ok()?;
            (h.segment == seg.id && h.generation == seg.generation).then_some(())?;
            checkpoint::decode_sealed_parts(&h, body)
                .ok()
                .map(|p| p.entries)
        });
        if let Some(e) = from_ck {
            return Ok(e);
        }
        let end = seg.len.load(Ordering::Acquire);
        let mut sc = seg.scanner(SUPERBLOCK_LEN as u64, end, false)?;
        let mut out = Vec::new();
        let mut ord = 0u32;
        while let Some(item) = sc.next() {
            if let ScanItem::Needle { header, .. } = item? {
                out.push((header.key, header.alt_key, ord));
            }
            ord += 1;
        }
        Ok(out)
    }

    pub(super) fn merge_due(&self) -> bool {
        let ix = read(&self.idx);
        let run = ix.run.as_ref().map_or(0, |r| r.entry_count() as usize);
        ix.recent_len() >= ix.recent_floor + MERGE_MIN_ENTRIES.max(run / 8)
    }

    /// Builds a new run from the current run and the recent map's entries
    /// of sealed segments, one hash partition at a time: each partition is
    /// built from its share of the recent entries (spilled to a temporary
    /// file first) and of the old run (streamed from the run file), written
    /// to the new run file, and swapped into the index in place of the old
    /// partitions that covered its hashes. The file is renamed into place at
    /// the end (a crash before leaves the old one, which the restart uses);
    /// only then are the recent entries it took dropped (unless they changed
    /// meanwhile), so that RAM never forgets what the disk does not hold
    /// yet. The transient state is one partition's, whatever the run's size.
    pub(super) fn merge(&self) -> Result<u64> {
        let _m = lock(&self.maintenance);
        let (old_run, tombs, sealed, table, recent_len) = {
            let ix = read(&self.idx);
            let tombs: Vec<(u64, u32)> = ix.tombs.iter().copied().collect();
            // The sealed segments with recent entries (a flag per table
            // place, not a place per entry: the recent part can hold an
            // eighth of the run).
            let mut has = vec![false; ix.table.len()];
            for l in ix.recent.locs() {
                if let Some(h) = has.get_mut(l.slot as usize) {
                    *h = true;
                }
            }
            let sealed: Vec<u32> = (0..ix.table.len() as u32)
                .filter(|&s| has[s as usize] && ix.seg(s).is_some_and(|s| !s.is_active()))
                .collect();
            (
                ix.run.clone(),
                tombs,
                sealed,
                ix.table.clone(),
                ix.recent.len(),
            )
        };
        let seg_of = |slot: u32| table.get(slot as usize).and_then(|s| s.as_ref());
        // The segments of the new run: those the old run still numbers and
        // the sealed ones with recent entries. One needle numbering for
        // every partition this merge builds.
        let mut places: Vec<u32> = sealed.clone();
        if let Some(r) = &old_run {
            for l in r.seg_lists() {
                places.extend((0..l.segments().len()).filter_map(|i| l.place(i)));
            }
        }
        places.retain(|&p| seg_of(p).is_some());
        places.sort_unstable();
        places.dedup();
        let segs = SegList::new(
            places
                .iter()
                .map(|&p| seg_of(p).map_or((0, 0), |s| (s.id, s.needle_count())))
                .collect(),
        )
        .ok_or_else(|| StoreError::Config("could not build the node index".into()))?;
        for (i, &p) in places.iter().enumerate() {
            segs.set_place(i, Some(p));
        }
        let segs = Arc::new(segs);
        let pos: HashMap<u32, u32> = places
            .iter()
            .enumerate()
            .map(|(i, &s)| (s, i as u32))
            .collect();
        let held_before = old_run.as_ref().map_or(0, |r| r.entry_count());
        let estimate = held_before as usize + recent_len + tombs.len();
        let nparts = estimate
            .div_ceil(self.cfg.run_partition_size.max(1))
            .clamp(1, MAX_RUN_PARTITIONS) as u64;
        let dir = &self.devices[0].path;
        // The recent part this merge takes: tombstones, and the recent
        // entries of sealed segments with their identities (which the
        // table does not keep): each segment's identities that the table
        // holds exactly where that segment has them.
        let mut taken = Spill::create(dir.join(SPILL_TAKEN), nparts)?;
        for (k, a) in tombs {
            taken.push((k, a, TOMB.slot, TOMB.ord))?;
        }
        for &slot in &sealed {
            let Some(seg) = seg_of(slot) else { continue };
            let pending = lock(&seg.pending).clone();
            let ids = match pending {
                Some(e) => e,
                None => self.segment_identities(seg)?,
            };
            let mut mine = Vec::new();
            {
                let ix = read(&self.idx);
                for (k, a, ord) in ids {
                    if ix.recent.contains(ix.hid(k, a), Loc { slot, ord }) {
                        mine.push((k, a, slot, ord));
                    }
                }
            }
            for r in mine {
                taken.push(r)?;
            }
        }
        taken.flush()?;
        let generation = old_run.as_ref().map_or(1, |r| r.generation() + 1);
        let ref_bits = bits_for(segs.total()).max(1);
        let fp_bits = self.cfg.fingerprint_bits.clamp(1, 64 - ref_bits);
        let run_path = dir.join(run_file::FILE_NAME);
        let mut failed: Option<StoreError> = None;
        let mut held = 0u64;
        write_file_atomic_with(&run_path, |f| {
            let mut w = run_file::Writer::new(f, generation, places.len(), nparts as u32);
            let r = self.merge_parts(
                &mut w,
                MergePlan {
                    old_run,
                    segs: &segs,
                    pos: &pos,
                    table: &table,
                    taken: &taken,
                    nparts,
                    generation,
                    fp_bits,
                },
            );
            match r.and_then(|h| {
                held = h;
                w.finish(&segs, fp_bits, ref_bits)
                    .map_err(StoreError::io("writing", &run_path))
            }) {
                Ok(()) => Ok(()),
                Err(e) => {
                    failed = Some(e);
                    Err(std::io::Error::other("the merge failed"))
                }
            }
        })
        .map_err(|e| failed.take().unwrap_or(e))?;
        // The run file on disk holds what the merge took: the recent
        // entries and tombstones go now (unless they changed meanwhile: an
        // entry is removed only where it still is).
        for q in 0..nparts {
            let taken_q = taken.read(q)?;
            let mut ix = write(&self.idx);
            for (k, a, slot, ord) in taken_q {
                let l = Loc { slot, ord };
                if l == TOMB {
                    ix.tombs.remove(&(k, a));
                } else {
                    let h = ix.hid(k, a);
                    ix.recent.remove(h, l);
                }
            }
        }
        drop(taken);
        {
            let mut ix = write(&self.idx);
            // Give back what the merge emptied when the table is mostly
            // empty now, so that RAM at rest holds the run and the active
            // segments, not the peak.
            ix.shrink_recent(&self.counters);
            ix.recent_floor = ix.recent_len();
        }
        self.counters.merges.fetch_add(1, Ordering::Relaxed);
        Ok(held)
    }

    /// The partitions of a merge, built, written and swapped in one by one
    /// (see [`Inner::merge`]); returns the identities held.
    fn merge_parts(&self, w: &mut run_file::Writer<'_>, plan: MergePlan<'_>) -> Result<u64> {
        let MergePlan {
            old_run,
            segs,
            pos,
            table,
            taken,
            nparts,
            generation,
            fp_bits,
        } = plan;
        let seg_of = |slot: u32| table.get(slot as usize).and_then(|s| s.as_ref());
        let dir = &self.devices[0].path;
        let run_path = dir.join(run_file::FILE_NAME);
        // The old run's partitions, each dropped as soon as no partition
        // left to build overlaps it (the index drops its own reference when
        // the new partitions covering it are swapped in).
        let (mut old_parts, old_bounds): (Vec<Option<Arc<Part>>>, Vec<u64>) = match &old_run {
            Some(r) => (
                r.parts().iter().cloned().map(Some).collect(),
                r.bounds().to_vec(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        drop(old_run);
        let old_file = File::open(&run_path).ok();
        // Set when the old run's keys cannot be read: its identities then
        // come from its segments' checkpoints, spilled by partition.
        let mut fallback: Option<Spill> = None;
        let mut new_parts: Vec<Arc<Part>> = Vec::with_capacity(nparts as usize);
        let mut new_bounds: Vec<u64> = Vec::with_capacity(nparts as usize);
        let mut held = 0u64;
        for q in 0..nparts {
            let lo = part_start(q, nparts);
            let hi = (q + 1 < nparts).then(|| part_start(q + 1, nparts));
            let taken_q = taken.read(q)?;
            // (key, alt, segment index in `segs`, ordinal) of every identity
            // of the new partition.
            let mut entries: Vec<(u64, u32, u32, u32)> = Vec::new();
            for &(k, a, slot, ord) in &taken_q {
                let l = Loc { slot, ord };
                if l == TOMB || seg_of(slot).is_none_or(|s| s.is_deleted(ord)) {
                    continue;
                }
                if let Some(&i) = pos.get(&slot) {
                    entries.push((k, a, i, ord));
                }
            }
            let n_taken = entries.len();
            // The old partitions overlapping [lo, hi).
            let overlapping: Vec<usize> = (0..old_parts.len())
                .filter(|&j| {
                    hi.is_none_or(|h| old_bounds[j] < h)
                        && old_bounds.get(j + 1).is_none_or(|&e| e > lo)
                })
                .collect();
            if fallback.is_none() {
                let mut ok = true;
                for &j in &overlapping {
                    let Some(part) = old_parts[j].clone() else {
                        continue;
                    };
                    let Some(f) = &old_file else {
                        ok = false;
                        break;
                    };
                    let r = run_file::for_each_key(f, &part, |first, keys| {
                        let ix = read(&self.idx);
                        for (jj, &(k, a)) in keys.iter().enumerate() {
                            let Some((i, ord)) = part.slot(first + jj) else {
                                continue;
                            };
                            if part_of(part_hash(k, a), nparts) != q
                                || ix.recent_has(k, a, &self.counters)
                            {
                                continue; // another partition's, or a newer answer
                            }
                            let Some(slot) = part.segs().place(i) else {
                                continue;
                            };
                            if seg_of(slot).is_none_or(|s| s.is_deleted(ord)) {
                                continue;
                            }
                            if let Some(&si) = pos.get(&slot) {
                                entries.push((k, a, si, ord));
                            }
                        }
                    });
                    if r.is_err() {
                        ok = false;
                        break;
                    }
                }
                if !ok {
                    entries.truncate(n_taken);
                    fallback = Some(self.spill_old_identities(&old_parts, nparts, q, table)?);
                }
            }
            if let Some(fb) = &fallback {
                let ix = read(&self.idx);
                for (k, a, slot, ord) in fb.read(q)? {
                    if ix.recent_has(k, a, &self.counters)
                        || seg_of(slot).is_none_or(|s| s.is_deleted(ord))
                    {
                        continue;
                    }
                    if let Some(&si) = pos.get(&slot) {
                        entries.push((k, a, si, ord));
                    }
                }
            }
            entries.sort_unstable_by_key(|e| (e.0, e.1));
            entries.dedup_by_key(|e| (e.0, e.1));
            let seed = generation ^ 0x5275_6e5f_7365_6564 ^ q.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            let mut part = Part::build(segs.clone(), &entries, fp_bits, seed)
                .map_err(|_| StoreError::Config("could not build the node index".into()))?;
            // The keys in slot order, streamed to the file: each record's
            // slot replaces its (segment, ordinal), which the partition now
            // holds.
            for e in entries.iter_mut() {
                let s = part.slot_of(e.0, e.1) as u64;
                e.2 = s as u32;
                e.3 = (s >> 32) as u32;
            }
            entries.sort_unstable_by_key(|e| (e.3, e.2));
            let slot_of =
                |e: &(u64, u32, u32, u32)| (u64::from(e.3) << 32 | u64::from(e.2)) as usize;
            let mut it = entries.iter().peekable();
            let keys = (0..part.slot_count()).map(|s| match it.next_if(|e| slot_of(e) == s) {
                Some(e) => (e.0, e.1),
                None => (0, 0),
            });
            w.part(&mut part, keys)
                .map_err(StoreError::io("writing", &run_path))?;
            drop(entries);
            held += part.entry_count();
            new_parts.push(Arc::new(part));
            new_bounds.push(lo);
            {
                // Swapped in: the new partitions cover [0, hi), the old
                // ones (or, before the first merge, an empty run) the rest;
                // then the recent entries it took go.
                let mut ix = write(&self.idx);
                let mut parts = new_parts.clone();
                let mut bounds = new_bounds.clone();
                if let Some(hi) = hi {
                    let cur = match &ix.run {
                        Some(r) => r.clone(),
                        None => {
                            Arc::new(Run::build(0, Vec::new(), &[], fp_bits).map_err(|_| {
                                StoreError::Config("could not build the node index".into())
                            })?)
                        }
                    };
                    for (i, p) in cur.parts().iter().enumerate() {
                        if cur.bounds().get(i + 1).is_none_or(|&e| e > hi) {
                            parts.push(p.clone());
                            bounds.push(cur.bounds()[i].max(hi));
                        }
                    }
                }
                let run = Run::from_parts(generation, parts, bounds).ok_or_else(|| {
                    StoreError::Config("could not assemble the node index".into())
                })?;
                ix.run = Some(Arc::new(run));
                // The recent entries q took stay until the run file is on
                // disk (`merge` drops them after the rename): they answer
                // as q does meanwhile, and nothing derived from the recent
                // table (a checkpoint) can miss them before the disk has
                // them.
            }
            // Old partitions entirely below the next partition are done.
            for (j, p) in old_parts.iter_mut().enumerate() {
                if hi.is_some_and(|hi| old_bounds.get(j + 1).is_some_and(|&e| e <= hi)) {
                    *p = None;
                }
            }
        }
        Ok(held)
    }

    /// The identities the old run holds at or past partition `from` (of
    /// `nparts`), from its segments' checkpoints (or needle headers), for
    /// when its run file's keys cannot be read: each kept if the run still
    /// answers for it with that needle.
    fn spill_old_identities(
        &self,
        old_parts: &[Option<Arc<Part>>],
        nparts: u64,
        from: u64,
        table: &[Option<Arc<Segment>>],
    ) -> Result<Spill> {
        let mut out = Spill::create(self.devices[0].path.join(SPILL_OLD), nparts)?;
        let mut places: Vec<u32> = Vec::new();
        for p in old_parts.iter().flatten() {
            let l = p.segs();
            places.extend((0..l.segments().len()).filter_map(|i| l.place(i)));
        }
        places.sort_unstable();
        places.dedup();
        for slot in places {
            let Some(seg) = table.get(slot as usize).and_then(|s| s.as_ref()) else {
                continue;
            };
            let ids = self.segment_identities(seg)?;
            let mut mine = Vec::new();
            {
                let ix = read(&self.idx);
                for (k, a, ord) in ids {
                    if part_of(part_hash(k, a), nparts) >= from
                        && ix.run_hit(k, a) == Some(Loc { slot, ord })
                    {
                        mine.push((k, a, slot, ord));
                    }
                }
            }
            for r in mine {
                out.push(r)?;
            }
        }
        out.flush()?;
        Ok(out)
    }
}
