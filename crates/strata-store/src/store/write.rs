//! Writes: a batch of puts appended to a device's active segment with one
//! fdatasync, the versions it replaces flagged superseded, deletes flagged
//! in place, and the active segment sealed and a new one started.

use super::checkpoints::IdsSnapshot;
use super::handle::{advise_random, ActiveSeg, Body, FdBudget, SegFile, Segment, Tail};
use super::locks::{lock, read, write};
use super::node_index::{Loc, NodeIndex};
use super::prepared::{write_direct, DIRECT_BLOCK, DIRECT_MIN_BATCH};
use super::report::PutItem;
use super::Inner;
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::needle::{self, FLAGS_OFFSET, FLAG_DELETED, FLAG_SUPERSEDED, HEADER_LEN};
use crate::format::superblock::{self, Superblock, SUPERBLOCK_LEN};
use crate::index::SealedSegment;
use crate::segment;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{SystemTime, UNIX_EPOCH};

/// A needle to flag: where the index says it is (with the segment handle
/// taken in the same look-up: a compaction may renumber the segment and
/// free its table place before the flag is written, and the handle then
/// leads to the new generation), and whose it should be.
#[derive(Clone)]
pub(super) struct FlagTarget {
    seg: Option<Arc<Segment>>,
    loc: Loc,
    key: u64,
    alt: u32,
}

impl NodeIndex {
    pub(super) fn target(&self, loc: Loc, key: u64, alt: u32) -> FlagTarget {
        FlagTarget {
            seg: self.seg(loc.slot).cloned(),
            loc,
            key,
            alt,
        }
    }
}

impl Inner {
    /// Sets `flag` in the needles named (each checked against its header:
    /// a fingerprint match may name a stranger), with one fdatasync per
    /// segment touched, or, without `sync`, the segments added to
    /// [`Inner::flags_pending`] instead. Returns, per target, whether the
    /// needle was the identity's and unflagged before. Follows segments
    /// retired by a seal, compaction or move to their new handle.
    pub(super) fn flag_many(
        &self,
        targets: &[FlagTarget],
        flag: u32,
        sync: bool,
    ) -> Result<Vec<bool>> {
        let mut out = vec![false; targets.len()];
        let mut groups: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            groups.entry(t.loc.slot).or_default().push(i);
        }
        for (_, members) in groups {
            let Some(mut seg) = targets[members[0]].seg.clone() else {
                continue;
            };
            let mut ords: Vec<(usize, u32)> =
                members.iter().map(|&i| (i, targets[i].loc.ord)).collect();
            loop {
                let g = lock(&seg.lock);
                if seg.retired.load(Ordering::Acquire) {
                    drop(g);
                    let Some((next, map)) = seg.moved_to.get() else {
                        break;
                    };
                    if let Some(map) = map {
                        ords = ords
                            .into_iter()
                            .filter_map(|(i, o)| {
                                map.get(o as usize)
                                    .filter(|&&n| n != u32::MAX)
                                    .map(|&n| (i, n))
                            })
                            .collect();
                    }
                    seg = next.clone();
                    continue;
                }
                let mut wrote = false;
                for &(i, ord) in &ords {
                    let t = &targets[i];
                    let Some((offset, len)) = seg.needle(ord) else {
                        continue;
                    };
                    let buf = seg.pread(offset, HEADER_LEN as u64, &self.counters)?;
                    let code = seg.flag_code();
                    // The identity and flags, through one flipped header bit.
                    let h =
                        needle::repair_header(&buf, code).map_err(|e| seg.corrupt(offset, e))?;
                    if (h.key, h.alt_key) != (t.key, t.alt) {
                        continue;
                    }
                    let was_live = h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0;
                    out[i] = was_live;
                    if h.flags & flag == 0 {
                        *lock(&seg.tail.last_block) = None;
                        strata_fs::write_all_at(
                            &*seg.file()?,
                            &code.word(h.flags | flag).to_le_bytes(),
                            offset + FLAGS_OFFSET,
                        )
                        .map_err(StoreError::io("writing flags in", &seg.path))?;
                        wrote = true;
                    }
                    let newly = match &seg.body {
                        Body::Sealed(s) => s.set_deleted(ord),
                        Body::Active(_) => was_live,
                    };
                    if newly {
                        seg.garbage.fetch_add(len, Ordering::Relaxed);
                    }
                }
                self.trim_fds();
                if wrote {
                    if sync {
                        strata_fs::sync_data(&*seg.file()?)
                            .map_err(StoreError::io("writing flags in", &seg.path))?;
                        self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
                    } else {
                        // Once per segment until the next sync, not once
                        // per batch: the list stays as short as the set of
                        // segments with unsynced flags.
                        let mut list = lock(&self.flags_pending);
                        if !list.iter().any(|s| Arc::ptr_eq(s, &seg)) {
                            list.push(seg.clone());
                        }
                    }
                    seg.dirty.store(true, Ordering::Relaxed);
                }
                break;
            }
        }
        Ok(out)
    }

    /// Syncs the segments of the superseded flags written without a sync
    /// (a segment moved or compacted since: the one that replaced it). The
    /// list stays locked until they are synced, so that a delete calling
    /// this while the background thread does waits for those syncs too.
    pub(super) fn sync_pending_flags(&self) -> Result<()> {
        let mut list = lock(&self.flags_pending);
        let pending = std::mem::take(&mut *list);
        let mut done: std::collections::HashSet<*const Segment> = Default::default();
        for (i, first) in pending.iter().enumerate() {
            let mut seg = first.clone();
            while seg.retired.load(Ordering::Acquire) {
                match seg.moved_to.get() {
                    Some((next, _)) => seg = next.clone(),
                    None => break,
                }
            }
            if !done.insert(Arc::as_ptr(&seg)) {
                continue;
            }
            let res = seg.file().and_then(|f| {
                strata_fs::sync_data(&f).map_err(StoreError::io("writing flags in", &seg.path))
            });
            if let Err(e) = res {
                // Kept for the next try: a delete must not pass them.
                list.extend(pending[i..].iter().cloned());
                return Err(e);
            }
            self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    pub(super) fn delete_batch(&self, ids: &[(u64, u32)]) -> Result<Vec<bool>> {
        let _u = lock(&self.update);
        // A deleted flag must not be durable before the superseded flags
        // written ahead of it: after a crash the older versions they hide
        // would be the only unflagged needles of their identities.
        self.sync_pending_flags()?;
        let mut targets = Vec::new();
        let mut which = Vec::new();
        {
            let ix = read(&self.idx);
            let mut seen = std::collections::HashSet::new();
            for (i, &(key, alt)) in ids.iter().enumerate() {
                if !seen.insert((key, alt)) {
                    continue;
                }
                if let Some(loc) = ix.current(key, alt, &self.counters) {
                    targets.push(ix.target(loc, key, alt));
                    which.push(i);
                }
            }
        }
        let res = self.flag_many(&targets, FLAG_DELETED, true)?;
        let mut out = vec![false; ids.len()];
        let mut ix = write(&self.idx);
        for ((t, &i), ok) in targets.iter().zip(&which).zip(res) {
            out[i] = ok;
            ix.forget(t.key, t.alt, t.loc, &self.counters);
        }
        Ok(out)
    }

    pub(super) fn put_batch_on(&self, device: usize, items: &[PutItem<'_>]) -> Result<()> {
        let dev = self
            .devices
            .get(device)
            .ok_or(StoreError::NoSuchDevice(device))?;
        for it in items {
            let size = (it.head.len() + it.data.len()) as u64;
            if size > self.cfg.max_object_size {
                return Err(StoreError::ObjectTooLarge {
                    size,
                    max: self.cfg.max_object_size,
                });
            }
        }
        if items.is_empty() {
            return Ok(());
        }
        // Each needle's frame (header, footer) is encoded here; its data
        // goes to the kernel from where the caller holds it (one pwritev
        // for the batch), not copied into a batch buffer first. The last
        // needle carries the batch end: an open keeps a batch only whole
        // (a kill in the middle of the pwritev leaves whole needles of it
        // before a torn one; reliability.md, finding 13).
        let encode = |marks: bool| {
            let mut frames = Vec::with_capacity(items.len() * needle::FRAME_MAX);
            let mut ranges = Vec::with_capacity(items.len());
            for (i, it) in items.iter().enumerate() {
                ranges.push(needle::encode_frame(
                    &mut frames,
                    it.cookie,
                    it.key,
                    it.alt_key,
                    0,
                    &[it.head, it.data],
                    marks && i + 1 == items.len(),
                ));
            }
            (frames, ranges)
        };
        let (mut frames, mut ranges) = encode(true);
        let lens: Vec<u64> = items
            .iter()
            .map(|it| needle::needle_len((it.head.len() + it.data.len()) as u32))
            .collect();
        let total: u64 = lens.iter().sum();
        let mut w = lock(&dev.writer);
        if w.version.load(Ordering::Relaxed) < superblock::VERSION {
            // An active segment written by an older build. Empty: upgraded
            // in place. Of version 1 and not empty: its needles carry no
            // batch end, so the batch would not be all-or-nothing in it;
            // sealed (a failed seal, e.g. no room for the next segment,
            // leaves it taking needles without the mark, as before). Of
            // version 2: it takes the batch, with plain flags like its
            // other needles.
            if w.needle_count() == 0 {
                upgrade_empty_segment(&w)?;
            } else if !w.marks_batches() {
                let _ = self.seal(device, &mut w);
            }
        }
        let seg = w.clone();
        if !seg.marks_batches() {
            (frames, ranges) = encode(false);
        }
        let mut parts = Vec::with_capacity(items.len() * 4);
        // Where the last needle's parts begin (its header).
        let mut last_at = 0;
        for (it, (head, tail)) in items.iter().zip(ranges) {
            last_at = parts.len();
            parts.push(&frames[head]);
            if !it.head.is_empty() {
                parts.push(it.head);
            }
            parts.push(it.data);
            parts.push(&frames[tail]);
        }
        let start = seg.len.load(Ordering::Relaxed);
        let file = seg.file()?;
        // Below the prepared space's end the batch overwrites zeros, and
        // its sync flushes data only; past it, the zeroing thread is
        // waited for and kept out until the file has grown.
        let end = start + total;
        let prepared = seg.tail.prepared.load(Ordering::Acquire);
        let mut past = (end > prepared).then(|| lock(&seg.tail.lock));
        if crash_due("store-batch-torn") {
            // What a kill in the middle of the pwritev leaves (the kernel
            // stops between pages): the batch's needles but the last whole,
            // then the last one's header and half its data. Written, as
            // the batch is, with the tail lock held when it passes the
            // prepared end: without it the zeroing thread could write its
            // zeros over the torn batch (O_DIRECT, past the page cache),
            // and the test saw no torn tail at all (a CI flake).
            let keep = last_at;
            let done: u64 = lens[..items.len() - 1].iter().sum();
            // The last needle's header, then the first half of its data
            // (its own header part and body part, in order).
            let data = &parts[keep + 1..parts.len() - 1];
            let mut half = data.iter().map(|d| d.len()).sum::<usize>() / 2;
            let mut torn = vec![parts[keep]];
            for d in data {
                let n = half.min(d.len());
                torn.push(&d[..n]);
                half -= n;
            }
            let _ = strata_fs::write_all_vectored_at(&file, &parts[..keep], start)
                .and_then(|_| strata_fs::write_all_vectored_at(&file, &torn, start + done));
            crash_now("store-batch-torn");
        }
        // A large batch whose blocks are all prepared goes to the device
        // from one buffer (O_DIRECT): no page-cache pages to allocate, copy
        // and write back for it.
        let direct = (total >= DIRECT_MIN_BATCH && end.next_multiple_of(DIRECT_BLOCK) <= prepared)
            .then(|| seg.direct())
            .flatten();
        let res = match direct {
            Some(d) => write_direct(&seg, &file, d, &parts, start, end)
                .or_else(|_| strata_fs::write_all_vectored_at(&file, &parts, start)),
            None => {
                *lock(&seg.tail.last_block) = None;
                strata_fs::write_all_vectored_at(&file, &parts, start)
            }
        }
        .and_then(|_| strata_fs::sync_data(&file));
        if let Err(e) = res {
            // Leave the segment as it was: nothing of the batch is
            // visible, and a partial write is cut (or cut on open), with
            // the zeros past it.
            let _t = past.take().unwrap_or_else(|| lock(&seg.tail.lock));
            let _ = strata_fs::set_len(&file, start);
            let _ = strata_fs::sync_all(&file);
            seg.tail.prepared.store(start, Ordering::Release);
            return Err(StoreError::io("appending to", &seg.path)(e));
        }
        if past.is_some() {
            seg.tail.prepared.fetch_max(end, Ordering::AcqRel);
        }
        drop(past);
        self.counters.fdatasyncs.fetch_add(1, Ordering::Relaxed);
        self.counters.written[dev.tier.code() as usize].fetch_add(total, Ordering::Relaxed);
        let Body::Active(a) = &seg.body else {
            return Err(StoreError::SegmentActive(seg.id));
        };
        let locs: Vec<Loc> = {
            let mut a = write(a);
            lens.iter()
                .zip(items)
                .map(|(&len, it)| Loc {
                    slot: seg.slot,
                    ord: a.push(it.key, it.alt_key, len),
                })
                .collect()
        };
        seg.len.store(start + total, Ordering::Release);
        seg.dirty.store(true, Ordering::Relaxed);
        {
            let _u = lock(&self.update);
            // The versions this batch replaces. One in another segment is
            // flagged superseded on disk before the batch is acknowledged,
            // so that at most one unflagged needle of an identity exists
            // across segments (what recovery relies on, whatever the
            // segments' ids or devices).
            let mut targets = Vec::new();
            // Per item: None if a later item of the batch overwrites it,
            // else Some(where the recent table held the identity before).
            let mut hints: Vec<Option<Option<Loc>>> = vec![None; items.len()];
            {
                let ix = read(&self.idx);
                let mut seen = std::collections::HashSet::new();
                for (i, it) in items.iter().enumerate().rev() {
                    if !seen.insert((it.key, it.alt_key)) {
                        // Overwritten within the batch: garbage in place.
                        seg.garbage.fetch_add(lens[i], Ordering::Relaxed);
                        continue;
                    }
                    let found = ix.current(it.key, it.alt_key, &self.counters);
                    hints[i] = Some(found);
                    if let Some(loc) = found {
                        if loc.slot == seg.slot {
                            if let Some((_, l)) = seg.needle(loc.ord) {
                                seg.garbage.fetch_add(l, Ordering::Relaxed);
                            }
                        } else {
                            targets.push(ix.target(loc, it.key, it.alt_key));
                        }
                    }
                }
            }
            // With a version order an open can settle an unsynced flag's
            // identity from the needles' data, so the flag's sync waits.
            self.flag_many(&targets, FLAG_SUPERSEDED, self.cfg.version_order.is_none())?;
            let mut ix = write(&self.idx);
            for ((it, &loc), hint) in items.iter().zip(&locs).zip(hints) {
                if let Some(hint) = hint {
                    ix.set(it.key, it.alt_key, loc, hint, &self.counters)?;
                }
            }
        }
        if let Some(last) = locs.last() {
            write(a).installed = last.ord as usize + 1;
        }
        if start + total >= self.cfg.segment_size {
            // The batch is durable whatever happens here; a failed seal
            // (e.g. no space for a new segment) is retried next batch.
            let _ = self.seal(device, &mut w);
        } else {
            self.prepare_ahead(&seg, end, total);
        }
        Ok(())
    }

    /// Seals the device's active segment and starts a new one. The caller
    /// holds the device's writer lock (`w`).
    /// Seals segment `id` if it is still the active segment of `device`
    /// and holds needles (for compaction to reclaim its garbage).
    pub(super) fn seal_if_active(&self, device: usize, id: u64) -> Result<bool> {
        let Some(dev) = self.devices.get(device) else {
            return Ok(false);
        };
        let mut w = lock(&dev.writer);
        if w.id != id || w.needle_count() == 0 {
            return Ok(false);
        }
        self.seal(device, &mut w)?;
        Ok(true)
    }

    pub(super) fn seal(&self, device: usize, w: &mut Arc<Segment>) -> Result<()> {
        // No checkpoint of the active segment is written while it is being
        // sealed, nor after (`write_checkpoint` skips a retired one): once
        // sealed, a merge may take its identities out of the recent table
        // before its run file is on disk, and an active checkpoint computed
        // from that table then would list none of them (reliability.md,
        // finding 12).
        let _c = lock(&self.checkpointing);
        let old = w.clone();
        // The sealed checkpoint covers exactly the file: no zeros past the
        // last needle.
        old.tail
            .finish(&*old.file()?, old.len.load(Ordering::Acquire), &old.path)?;
        let slot = self.reserve_slot();
        let next = Arc::new(new_active(
            &self.cfg,
            device,
            self.next_id.fetch_add(1, Ordering::Relaxed),
            slot,
            &self.fds,
        )?);
        write(&self.idx).table[slot as usize] = Some(next.clone());
        let _g = lock(&old.lock);
        let Body::Active(a) = &old.body else {
            return Ok(());
        };
        let a = read(a);
        let body = SealedSegment::new(&a.offsets, &[])
            .ok_or_else(|| StoreError::Config("could not build a segment index".into()))?;
        let entries = self.live_entries_of(&old, IdsSnapshot::of(&a, a.offsets.len() - 1))?;
        let sealed = Arc::new(Segment {
            id: old.id,
            generation: old.generation,
            device: old.device,
            tier: old.tier,
            path: old.path.clone(),
            // Opened again on use: the active handle's file closes with it.
            file: SegFile::new(None, &old.file.budget),
            created_unix_ns: old.created_unix_ns,
            slot: old.slot,
            body: Body::Sealed(body),
            len: AtomicU64::new(old.len.load(Ordering::Acquire)),
            garbage: AtomicU64::new(old.garbage.load(Ordering::Relaxed)),
            lock: Mutex::new(()),
            retired: AtomicBool::new(false),
            version: AtomicU32::new(old.version.load(Ordering::Relaxed)),
            tail: Tail::at(old.len.load(Ordering::Acquire)),
            moved_to: OnceLock::new(),
            dirty: AtomicBool::new(true),
            pending: Mutex::new(Some(entries)),
        });
        write(&self.idx).table[old.slot as usize] = Some(sealed.clone());
        let _ = old.moved_to.set((sealed, None));
        old.retired.store(true, Ordering::Release);
        *w = next;
        drop(a);
        drop(_g);
        self.trim_fds();
        Ok(())
    }
}

pub(super) fn new_active(
    cfg: &StoreConfig,
    device: usize,
    id: u64,
    slot: u32,
    budget: &Arc<FdBudget>,
) -> Result<Segment> {
    let d = &cfg.devices[device];
    let sb = Superblock {
        version: superblock::VERSION,
        tier: d.tier,
        id,
        generation: 0,
        created_unix_ns: now_ns(),
    };
    let (file, path) = segment::create_segment(&d.path, &sb)?;
    if cfg.random_access_advice {
        advise_random(&file);
    }
    Ok(Segment {
        id,
        generation: 0,
        device,
        tier: d.tier,
        path,
        file: SegFile::new(Some(Arc::new(file)), budget),
        created_unix_ns: sb.created_unix_ns,
        slot,
        body: Body::Active(RwLock::new(ActiveSeg {
            offsets: vec![(SUPERBLOCK_LEN / 8) as u32],
            installed: 0,
            ids_base: 0,
            ids: Vec::new(),
        })),
        len: AtomicU64::new(SUPERBLOCK_LEN as u64),
        garbage: AtomicU64::new(0),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        version: AtomicU32::new(superblock::VERSION),
        tail: Tail::at(SUPERBLOCK_LEN as u64),
        moved_to: OnceLock::new(),
        dirty: AtomicBool::new(true),
        pending: Mutex::new(None),
    })
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Rewrites the superblock of an empty active segment of an older version
/// as this one, so that the batches written into it carry the batch end
/// (version 2) and their flags are coded (version 3). The caller
/// holds the device's writer lock. A crash in the middle leaves a segment
/// with nothing in it and a bad superblock, quarantined at the next open:
/// nothing is lost.
fn upgrade_empty_segment(seg: &Segment) -> Result<()> {
    let sb = Superblock {
        version: superblock::VERSION,
        tier: seg.tier,
        id: seg.id,
        generation: seg.generation,
        created_unix_ns: seg.created_unix_ns,
    };
    let file = seg.file()?;
    strata_fs::write_all_at(&file, &sb.encode(), 0)
        .and_then(|_| strata_fs::sync_data(&file))
        .map_err(StoreError::io("upgrading the superblock of", &seg.path))?;
    seg.version.store(superblock::VERSION, Ordering::Relaxed);
    Ok(())
}

/// Fault injection (docs/reliability.md, "Crash points"): true when the
/// process was started with `STRATA_CRASH_AT=NAME` (or `NAME:N`, the Nth
/// time the point is reached) and this is the time, so that a test can
/// stop it (`crash_now`) in a window too narrow to hit with a signal.
fn crash_due(name: &str) -> bool {
    static AT: OnceLock<Option<(String, u64)>> = OnceLock::new();
    static SEEN: AtomicU64 = AtomicU64::new(0);
    let at = AT.get_or_init(|| {
        let v = std::env::var("STRATA_CRASH_AT").ok()?;
        Some(match v.split_once(':') {
            Some((n, k)) => (n.to_string(), k.parse().unwrap_or(1)),
            None => (v, 1),
        })
    });
    match at {
        Some((n, k)) if n == name => SEEN.fetch_add(1, Ordering::Relaxed) + 1 == *k,
        _ => false,
    }
}

/// Stops the process at crash point `name` (SIGABRT: no destructor runs,
/// nothing more is written, as after kill -9).
fn crash_now(name: &str) -> ! {
    eprintln!("strata: crash point {name} reached (STRATA_CRASH_AT): aborting");
    std::process::abort()
}
