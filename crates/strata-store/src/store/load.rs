//! Loading one segment on open: its superblock (written back if one bit
//! was mended), its checkpoint if it is current, and a scan of the needles
//! past the checkpoint (orphans), with torn tails cut ([`super::torn`]
//! tells them from damage), the zeros of prepared space cut, and mended
//! needle headers written back.

use super::damage::DamageNote;
use super::handle::{ActiveSeg, Body, Entry, FdBudget, SegFile, Segment, Tail};
use super::report::OpenReport;
use super::torn::{all_zero, torn_by_power_loss, whole_but_one_bit};
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::needle::{self, FLAG_DELETED, FLAG_SUPERSEDED};
use crate::format::superblock::SUPERBLOCK_LEN;
use crate::index::{ActiveIndex, SealedSegment};
use crate::segment::{self, index_file_name, ScanItem, Scanner};
use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

/// A segment file found on open.
pub(super) struct Found {
    pub(super) device: usize,
    pub(super) generation: u64,
    pub(super) path: PathBuf,
}

/// Loads one segment: its checkpoint if valid, then the needles past it.
/// Returns the segment and its identity → ordinal entries (the latest
/// needle of each identity in the segment, unless found flagged). The
/// caller sets the segment's slot.
// The open's state it needs, passed apart rather than bundled for one call.
#[allow(clippy::too_many_arguments)]
pub(super) fn load_segment(
    cfg: &StoreConfig,
    f: &Found,
    is_last: bool,
    budget: &Arc<FdBudget>,
    run_counts: &HashMap<u64, u64>,
    note: &DamageNote,
    report: &mut OpenReport,
    ck_buf: &mut Vec<u8>,
) -> Result<(Segment, Vec<Entry>, bool)> {
    let file = Arc::new(segment::open_rw(&f.path)?);
    let (sb, mended) = segment::read_superblock(&file, &f.path)?;
    if sb.generation != f.generation {
        return Err(StoreError::NotASegment {
            path: f.path.clone(),
            reason: format!(
                "its superblock says generation {} but its name says {}",
                sb.generation, f.generation
            ),
        });
    }
    if mended {
        // One flipped bit, corrected: written back whole (64 bytes in one
        // sector), so the next open and `strata store verify` find it
        // sound. Should the write fail, the store serves from the
        // corrected copy in RAM and the next open corrects it again.
        let _ = strata_fs::write_all_at(&file, &sb.encode(), 0)
            .and_then(|_| strata_fs::sync_data(&file));
        report.mended_superblocks.push(f.path.clone());
    }
    let mut file_len = file
        .metadata()
        .map_err(StoreError::io("reading metadata of", &f.path))?
        .len();
    let idx_path = f.path.with_file_name(index_file_name(sb.id, sb.generation));
    let mut sealed: Option<checkpoint::SealedParts> = None;
    let mut active: Option<ActiveIndex> = None;
    // A segment the run covers exactly (this id with this needle count,
    // the test the open applies below) needs no identities: of a version-3
    // checkpoint, only the header and the offsets section are read.
    let covered_by_run =
        |h: &checkpoint::CheckpointHeader| run_counts.get(&sb.id) == Some(&h.needles);
    let is_current = |h: &checkpoint::CheckpointHeader| {
        h.segment == sb.id && h.generation == sb.generation && h.covered_len <= file_len
    };
    let first_ok = |o: &[u32]| o.first() == Some(&((SUPERBLOCK_LEN / 8) as u32));
    ck_buf.clear();
    let mut whole = false;
    if let Ok(mut cf) = File::open(&idx_path) {
        use std::io::Read;
        let mut done = false;
        let head = (&mut cf)
            .take(checkpoint::HEADER_LEN as u64)
            .read_to_end(ck_buf)
            .is_ok();
        if let (true, Some(plen)) = (head, checkpoint::prefix_len(ck_buf)) {
            ck_buf.reserve(plen.saturating_sub(ck_buf.len() as u64) as usize);
            let rest = plen.saturating_sub(checkpoint::HEADER_LEN as u64);
            if (&mut cf).take(rest).read_to_end(ck_buf).is_ok() {
                if let Ok((h, sec)) = checkpoint::parse_prefix(ck_buf) {
                    if h.kind == checkpoint::KIND_SEALED
                        && is_current(&h)
                        && h.covered_len == file_len
                        && covered_by_run(&h)
                    {
                        sealed = checkpoint::decode_sealed_prefix(&h, sec)
                            .ok()
                            .filter(|p| first_ok(&p.offsets));
                        done = sealed.is_some();
                    }
                }
            }
        }
        whole = !done && head && cf.read_to_end(ck_buf).is_ok();
    }
    let mut old_checkpoint = false;
    if whole {
        if let Ok((h, body)) = checkpoint::parse(ck_buf) {
            old_checkpoint = h.version != checkpoint::VERSION;
            if is_current(&h) {
                if h.kind == checkpoint::KIND_SEALED && h.covered_len == file_len {
                    sealed = checkpoint::decode_sealed_parts_opt(&h, body, !covered_by_run(&h))
                        .ok()
                        .filter(|p| first_ok(&p.offsets));
                } else if h.kind == checkpoint::KIND_ACTIVE {
                    active = checkpoint::decode_active(&h, body)
                        .ok()
                        .filter(|a| first_ok(&a.offsets));
                }
            }
        }
    }
    let mut dirty = false;
    let mut fresh_entries = false;
    let mut live_from_checkpoint = None;
    // Needles whose identities the active checkpoint on disk lists.
    let ck_needles = match (&sealed, &active) {
        (None, Some(a)) => a.offsets.len().saturating_sub(1),
        _ => 0,
    };
    let (offsets, entries, deleted, is_active) = match sealed {
        Some(p) => {
            live_from_checkpoint = Some(p.live_bytes);
            (p.offsets, p.entries, p.deleted, false)
        }
        None => {
            let mut idx = active.take().unwrap_or_else(|| {
                report.scanned_segments += 1;
                ActiveIndex::new(SUPERBLOCK_LEN as u64)
            });
            // Orphans: needles past the checkpoint (which ends where a
            // batch does).
            let start = idx.end();
            let mut sc = Scanner::new(
                file.clone(),
                &f.path,
                start,
                file_len,
                false,
                sb.flag_code(),
            );
            let mut cut: Option<u64> = None;
            // A batch is all-or-nothing: in a segment whose needles carry
            // the batch end, what follows the last needle that does is what
            // a crash in the middle of an unacknowledged batch left (whole
            // needles before its torn end, or all but the last one), and is
            // cut with the torn tail (reliability.md, finding 13). So the
            // items of a batch are held until its end is seen.
            let marks = sb.marks_batches();
            let mut held: Vec<ScanItem> = Vec::new();
            // In the newest segment the last whole batch is held too, until
            // the next one ends: it is the one batch that can have been in
            // its write when the power failed, and then its pages may have
            // reached the medium in any order, whole needles after lost
            // ones (docs/store-format.md, *Opening*, step 3; issue 33).
            let hold_last = is_last && marks;
            let mut last: Vec<ScanItem> = Vec::new();
            // Where the zeros of the prepared space start, if the tail is
            // only that.
            let mut zeros_from: Option<u64> = None;
            // Where a damaged but whole last needle ends (see below).
            let mut whole_end: Option<u64> = None;
            while let Some(item) = sc.next() {
                let mut item = item?;
                if let ScanItem::Corrupt {
                    offset,
                    at_tail: true,
                    header,
                    ..
                } = item
                {
                    let zeros = all_zero(&file, offset, file_len)
                        .map_err(StoreError::io("reading", &f.path))?;
                    // Only the newest segment of a directory takes
                    // batches, and a segment after it is made only once
                    // its last batch is written and synced: a tail that is
                    // not zeros in an older segment is damage to
                    // acknowledged needles, not a torn write, and is kept
                    // in place like damage anywhere else (cutting it
                    // would take its whole last batch with it:
                    // docs/reliability.md, finding 19). In the newest
                    // one, a last needle of a batch that is whole but for
                    // one flipped bit, with only zeros after it, is damage
                    // too: a torn needle misses whole sectors.
                    let whole = match header {
                        Some(h) if is_last && !zeros && h.batch_end => {
                            whole_but_one_bit(&file, offset, &h, file_len)
                                .map_err(StoreError::io("reading", &f.path))?
                                .then(|| h.needle_len())
                        }
                        _ => None,
                    };
                    if let Some(nl) = whole {
                        if let ScanItem::Corrupt { len, at_tail, .. } = &mut item {
                            (*len, *at_tail) = (nl, false);
                        }
                        whole_end = Some(offset + nl);
                    } else if is_last || zeros {
                        cut = Some(offset);
                        if zeros {
                            zeros_from = Some(offset);
                        }
                        break;
                    }
                }
                let ends = !marks
                    || match &item {
                        ScanItem::Needle { header, .. } => header.batch_end,
                        ScanItem::Corrupt {
                            header: Some(h), ..
                        } => h.batch_end,
                        ScanItem::Corrupt { .. } => false,
                    };
                held.push(item);
                if !ends {
                    continue;
                }
                for item in last.drain(..) {
                    install(item, &mut idx, report, sb.id);
                }
                if hold_last {
                    std::mem::swap(&mut last, &mut held);
                } else {
                    for item in held.drain(..) {
                        install(item, &mut idx, report, sb.id);
                    }
                }
            }
            // Bytes other than zeros past the last batch end (needles of a
            // batch without its end, or a torn needle) were written by a
            // later batch, whose write starts only once the batch before
            // it is synced: then that last whole batch was on the medium
            // whole, and damage in it is damage. Otherwise, damage in it
            // that one flipped bit does not explain and that holds a
            // sector of zeros (one the write did not reach) is a write a
            // power cut tore before its sync returned, so before it was
            // acknowledged: the whole batch is cut with the tail, as a
            // torn tail.
            let written_after = !held.is_empty() || (cut.is_some() && zeros_from.is_none());
            let torn_batch = match last.first() {
                Some(first) if !written_after => torn_by_power_loss(&file, &last)
                    .map_err(StoreError::io("reading", &f.path))?
                    .then(|| first.offset()),
                _ => None,
            };
            if torn_batch.is_none() {
                for item in last.drain(..) {
                    install(item, &mut idx, report, sb.id);
                }
            }
            // The zeros after a damaged whole last needle are prepared
            // space, cut as such.
            if let Some(end) = whole_end.filter(|&e| e < file_len && cut.is_none()) {
                cut = Some(end);
                zeros_from = Some(end);
            }
            if let Some(first) = held.first().map(ScanItem::offset) {
                if is_last {
                    cut = Some(first);
                } else {
                    // An older segment's last batch ends in damage that
                    // hid its end (see above): its needles stay.
                    for item in held.drain(..) {
                        install(item, &mut idx, report, sb.id);
                    }
                }
            }
            if torn_batch.is_some() {
                cut = torn_batch;
            }
            if idx.end() != start {
                dirty = true;
            }
            if let Some(at) = cut {
                // Zeros are what the store wrote ahead of its needles;
                // anything before them (an unfinished batch) is torn.
                let torn_end = zeros_from.unwrap_or(file_len);
                if torn_end > at {
                    note.before_repair(&format!(
                        "segment {:016x}: torn tail of {} bytes at {at} cut",
                        sb.id,
                        torn_end - at
                    ))?;
                }
                strata_fs::set_len(&file, at)
                    .and_then(|_| strata_fs::sync_all(&file))
                    .map_err(StoreError::io("cutting torn tail of", &f.path))?;
                report.prepared_bytes_cut += file_len - torn_end;
                if torn_end > at {
                    report.torn_tails.push((sb.id, at, torn_end - at));
                }
                file_len = at;
                dirty = true;
            }
            // Headers the scan mended (one flipped bit, the data whole) are
            // written back as they were written: the one byte that differs,
            // which a device writes whole (it lies in one sector), so a
            // crash leaves the byte damaged or mended. Should the write
            // fail, reads go on mending the header in RAM.
            let code = sb.flag_code();
            let ours: Vec<u64> = report
                .mended_headers
                .iter()
                .filter(|&&(s, off)| s == sb.id && off + needle::HEADER_LEN as u64 <= file_len)
                .map(|&(_, off)| off)
                .collect();
            let mut wrote = false;
            for off in ours {
                let mut h = [0u8; needle::HEADER_LEN];
                if file.read_exact_at(&mut h, off).is_err() {
                    continue;
                }
                let Some(good) = needle::mended_bytes(&h, code) else {
                    continue;
                };
                for (i, (a, b)) in h.iter().zip(&good).enumerate() {
                    if a != b {
                        wrote |= strata_fs::write_all_at(&file, &[*b], off + i as u64).is_ok();
                    }
                }
            }
            if wrote {
                let _ = strata_fs::sync_data(&file);
            }
            // The last segment stays active even when it has reached the
            // segment size (its seal failed: a full volume had no room for
            // the next segment): the next write's batch seals it. Sealing
            // it here would mean creating a new active segment at open,
            // which a full volume has no room for either.
            let stays_active = is_last;
            if !stays_active {
                dirty = true;
                fresh_entries = true;
            }
            let mut entries: Vec<Entry> = idx.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect();
            entries.sort_unstable_by_key(|e| e.2);
            (idx.offsets, entries, Vec::new(), stays_active)
        }
    };
    let needle = |o: u32| -> Option<u64> {
        let a = u64::from(*offsets.get(o as usize)?);
        let b = u64::from(*offsets.get(o as usize + 1)?);
        Some((b - a) * 8)
    };
    let body = if is_active {
        let installed = offsets.len().saturating_sub(1);
        // RAM keeps the identities the checkpoint on disk does not list
        // (the orphans a scan found) until the next checkpoint does.
        let ids_base = ck_needles.min(installed);
        Body::Active(RwLock::new(ActiveSeg {
            offsets: offsets.clone(),
            installed,
            ids_base,
            ids: entries
                .iter()
                .filter(|e| e.2 as usize >= ids_base)
                .copied()
                .collect(),
        }))
    } else {
        Body::Sealed(SealedSegment::new(&offsets, &deleted).ok_or_else(|| {
            StoreError::NotASegment {
                path: f.path.clone(),
                reason: "its needle offsets could not be indexed".into(),
            }
        })?)
    };
    // Garbage known from the segment itself: needles not indexed
    // (overwritten within the segment, flagged, damaged) or deleted.
    let live: u64 = live_from_checkpoint.unwrap_or_else(|| {
        entries
            .iter()
            .filter(|&&(_, _, o)| {
                deleted
                    .get(o as usize / 64)
                    .is_none_or(|w| w & (1 << (o % 64)) == 0)
            })
            .filter_map(|&(_, _, o)| needle(o))
            .sum()
    });
    let end = u64::from(offsets.last().copied().unwrap_or(0)) * 8;
    let garbage = end.saturating_sub(SUPERBLOCK_LEN as u64 + live);
    // Sealed segments' files are opened again on use.
    let file = SegFile::new(is_active.then_some(file), budget);
    let seg = Segment {
        id: sb.id,
        generation: sb.generation,
        device: f.device,
        tier: cfg.devices[f.device].tier,
        path: f.path.clone(),
        file,
        created_unix_ns: sb.created_unix_ns,
        slot: 0,
        body,
        len: AtomicU64::new(file_len),
        garbage: AtomicU64::new(garbage),
        lock: Mutex::new(()),
        retired: AtomicBool::new(false),
        version: AtomicU32::new(sb.version),
        tail: Tail::at(file_len),
        moved_to: OnceLock::new(),
        dirty: AtomicBool::new(dirty),
        pending: Mutex::new(fresh_entries.then(|| entries.clone())),
    };
    Ok((seg, entries, old_checkpoint))
}

/// Enters one item of a segment's scan into its index: a needle under its
/// identity (removed again when flagged deleted or superseded), a damaged
/// region as an entry of its own so that ordinals stay contiguous, indexed
/// under the identity its header names when it names one.
fn install(item: ScanItem, idx: &mut ActiveIndex, report: &mut OpenReport, segment: u64) {
    match item {
        ScanItem::Needle {
            header,
            offset,
            mended,
            ..
        } => {
            report.orphan_needles += 1;
            if mended {
                report.mended_headers.push((segment, offset));
            }
            let len = header.needle_len();
            idx.push(header.key, header.alt_key, len);
            if header.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0 {
                idx.map.remove(&(header.key, header.alt_key));
            }
        }
        ScanItem::Corrupt {
            offset,
            len,
            header,
            ..
        } => {
            report.corrupt_regions.push((segment, offset));
            // A damaged needle whose header names its identity stays that
            // identity's newest needle: a read of it fails its checksum (a
            // cluster node then reads another replica and rewrites its
            // copy) instead of finding an older needle of the identity
            // earlier in the segment and serving that as the newest
            // (docs/reliability.md, finding 18).
            if let Some(h) = header {
                let nl = h.needle_len();
                idx.push(h.key, h.alt_key, nl);
                if h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) != 0 {
                    idx.map.remove(&(h.key, h.alt_key));
                }
                if len > nl {
                    idx.offsets.push(((offset + len) / 8) as u32);
                }
            } else {
                // Keep the region as an unindexed entry so offsets stay
                // contiguous.
                report.nameless_regions.push((segment, offset));
                idx.offsets.push(((offset + len) / 8) as u32);
            }
        }
    }
}
