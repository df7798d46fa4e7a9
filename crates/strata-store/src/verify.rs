//! Offline verification of a store directory: every needle of every segment
//! is read and checked; nothing is modified.

use crate::error::{Result, StoreError};
use crate::format::superblock::SUPERBLOCK_LEN;
use crate::segment::{self, parse_file_name, ScanItem, Scanner};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Counts of one kind of needle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tally {
    /// Needles.
    pub needles: u64,
    /// Bytes on disk (needle lengths).
    pub bytes: u64,
}

impl Tally {
    fn add(&mut self, len: u64) {
        self.needles += 1;
        self.bytes += len;
    }
    fn sub(&mut self, len: u64) {
        self.needles -= 1;
        self.bytes -= len;
    }
}

/// A damaged region found by [`verify_dir`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Corruption {
    /// Segment file.
    pub path: PathBuf,
    /// Segment id.
    pub segment: u64,
    /// Byte offset of the damaged region.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// What check failed.
    pub reason: String,
    /// True when nothing valid follows in the file: a torn tail of the newest
    /// segment (what a crash mid-batch leaves; cut off when the store opens)
    /// is reported here but not counted as corruption.
    pub torn_tail: bool,
}

/// What [`verify_dir`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Segment files checked.
    pub segments: u64,
    /// Bytes scanned.
    pub bytes: u64,
    /// Live needles (the latest version of their identity, not deleted).
    pub live: Tally,
    /// Needles flagged deleted.
    pub deleted: Tally,
    /// Needles replaced by a later needle of the same identity.
    pub overwritten: Tally,
    /// Damaged regions and torn tails.
    pub corruptions: Vec<Corruption>,
    /// Zeros past the newest segment's last needle: the space a running
    /// (or killed) store prepared ahead of its writes (`Tail` in the
    /// store), bytes. Not damage; an open cuts them.
    pub prepared_bytes: u64,
}

impl VerifyReport {
    /// True when a damaged region other than a torn tail was found.
    pub fn has_corruption(&self) -> bool {
        self.corruptions.iter().any(|c| !c.torn_tail)
    }
}

/// Checks every segment in `dir` (a device directory): superblocks, needle
/// magics, header and data checksums. Reads only. `progress` gets the bytes
/// scanned so far and the total.
pub fn verify_dir(dir: &Path, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
    let md = std::fs::metadata(dir).map_err(|_| StoreError::MissingDirectory(dir.to_path_buf()))?;
    if !md.is_dir() {
        return Err(StoreError::NotADirectory(dir.to_path_buf()));
    }
    // Highest generation of each id, in id order.
    let mut files: std::collections::BTreeMap<u64, (u64, PathBuf)> = Default::default();
    let mut rep = VerifyReport::default();
    for e in std::fs::read_dir(dir).map_err(StoreError::io("listing", dir))? {
        let e = e.map_err(StoreError::io("listing", dir))?;
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        match parse_file_name(name) {
            Some((id, generation, true)) if files.get(&id).is_none_or(|(g, _)| *g < generation) => {
                files.insert(id, (generation, e.path()));
            }
            Some(_) => {}
            // Reported, and the other segments are still checked (an open
            // would quarantine it).
            None if name.ends_with(".seg") => rep.corruptions.push(Corruption {
                path: e.path(),
                segment: 0,
                offset: 0,
                len: e.metadata().map_or(0, |m| m.len()),
                reason: "not a Strata segment: its name is not <16 hex digits>-<8 hex digits>.seg"
                    .into(),
                torn_tail: false,
            }),
            None => {}
        }
    }
    let total: u64 = files
        .values()
        .filter_map(|(_, p)| std::fs::metadata(p).ok())
        .map(|m| m.len())
        .sum();
    // identity -> needle length of its latest live needle so far
    let mut latest: HashMap<(u64, u32), u64> = HashMap::new();
    let last_id = files.keys().next_back().copied();
    let mut done = 0u64;
    for (&id, (_, path)) in &files {
        let file = Arc::new(
            segment::open_rw(path)
                .or_else(|_| std::fs::File::open(path).map_err(StoreError::io("opening", path)))?,
        );
        let len = file
            .metadata()
            .map_err(StoreError::io("reading metadata of", path))?
            .len();
        let sb = match segment::read_superblock(&file, path) {
            Ok((sb, mended)) => {
                if mended {
                    rep.corruptions.push(Corruption {
                        path: path.clone(),
                        segment: id,
                        offset: 0,
                        len: SUPERBLOCK_LEN as u64,
                        reason: "one flipped bit in the superblock, corrected by its checksum \
                                 (an open rewrites it)"
                            .into(),
                        torn_tail: false,
                    });
                }
                sb
            }
            Err(StoreError::NotASegment { reason, .. }) => {
                rep.corruptions.push(Corruption {
                    path: path.clone(),
                    segment: id,
                    offset: 0,
                    len,
                    reason: format!("not a Strata segment: {reason}"),
                    torn_tail: false,
                });
                done += len;
                continue;
            }
            Err(e) => return Err(e),
        };
        rep.segments += 1;
        rep.bytes += len;
        let mut sc = Scanner::new(
            file.clone(),
            path,
            SUPERBLOCK_LEN as u64,
            len,
            false,
            sb.flag_code(),
        );
        // Where the needles after the last batch end start (version 2): an
        // unfinished batch, if nothing ends it (reliability.md, finding 13).
        let mut open_batch: Option<u64> = None;
        let mut tail_at = len;
        let seg = Seg {
            path,
            id: sb.id,
            newest: Some(id) == last_id,
            file: &file,
            len,
        };
        // In the newest segment of version 2 or 3, the items of the batch
        // being read and of the last whole batch wait, as in an open,
        // until the next batch ends: a last batch that a power cut tore
        // is a torn tail, not corruption (docs/store-format.md, *Opening*,
        // step 3).
        let hold = seg.newest && sb.marks_batches();
        let mut held: Vec<ScanItem> = Vec::new();
        let mut last: Vec<ScanItem> = Vec::new();
        while let Some(item) = sc.next() {
            let item = item?;
            if sb.marks_batches() {
                match &item {
                    ScanItem::Needle { header, .. } if header.batch_end => open_batch = None,
                    ScanItem::Corrupt {
                        offset, at_tail, ..
                    } if *at_tail => tail_at = *offset,
                    i => {
                        open_batch.get_or_insert(i.offset());
                    }
                }
            }
            progress(done + sc.position(), total);
            if !hold {
                tally(&mut rep, &mut latest, &seg, item)?;
                continue;
            }
            let ends = match &item {
                ScanItem::Needle { header, .. } => header.batch_end,
                ScanItem::Corrupt {
                    header: Some(h),
                    at_tail: false,
                    ..
                } => h.batch_end,
                ScanItem::Corrupt { .. } => false,
            };
            held.push(item);
            if ends {
                for item in last.drain(..) {
                    tally(&mut rep, &mut latest, &seg, item)?;
                }
                std::mem::swap(&mut last, &mut held);
            }
        }
        if hold {
            // Anything but zeros after the last batch end was written by
            // a later batch, after the last one was synced.
            let mut written_after = false;
            for i in &held {
                written_after |= match i {
                    ScanItem::Corrupt {
                        offset,
                        at_tail: true,
                        ..
                    } => !crate::store::all_zero(&file, *offset, len)
                        .map_err(StoreError::io("reading", path))?,
                    _ => true,
                };
            }
            let torn = !last.is_empty()
                && !written_after
                && crate::store::torn_by_power_loss(&file, &last)
                    .map_err(StoreError::io("reading", path))?;
            if let (true, Some(a), Some(z)) = (torn, last.first(), last.last()) {
                let (from, to) = (a.offset(), z.offset() + z.len());
                rep.corruptions.push(Corruption {
                    path: path.clone(),
                    segment: sb.id,
                    offset: from,
                    len: to - from,
                    reason: "a write batch a power cut tore before it was acknowledged \
                             (damage in the newest segment's last batch that one flipped \
                             bit does not explain, with sectors of zeros where its write \
                             did not reach; an open cuts it)"
                        .into(),
                    torn_tail: true,
                });
                // Never acknowledged: the older versions stay live.
                last.clear();
            }
            for item in last.drain(..).chain(held.drain(..)) {
                tally(&mut rep, &mut latest, &seg, item)?;
            }
        }
        if let Some(at) = open_batch.filter(|&at| at < tail_at) {
            rep.corruptions.push(Corruption {
                path: path.clone(),
                segment: sb.id,
                offset: at,
                len: tail_at - at,
                reason: "needles of a write batch whose last needle is missing (an interrupted \
                         write; an open cuts them)"
                    .into(),
                torn_tail: Some(id) == last_id,
            });
        }
        done += len;
    }
    Ok(rep)
}

/// The segment [`tally`] counts the needles of.
struct Seg<'a> {
    path: &'a PathBuf,
    id: u64,
    /// The newest segment of the directory (the only one a crash can tear).
    newest: bool,
    file: &'a std::fs::File,
    len: u64,
}

/// Counts one item of `seg`'s scan into `rep`: a needle as live, deleted
/// or overwritten (`latest`: identity → length of its newest live needle
/// so far), damage as a corruption, a tail of zeros as prepared space.
fn tally(
    rep: &mut VerifyReport,
    latest: &mut HashMap<(u64, u32), u64>,
    seg: &Seg<'_>,
    item: ScanItem,
) -> Result<()> {
    match item {
        ScanItem::Needle {
            header,
            offset,
            mended,
            ..
        } => {
            let nl = header.needle_len();
            if mended {
                rep.corruptions.push(Corruption {
                    path: seg.path.clone(),
                    segment: seg.id,
                    offset,
                    len: nl,
                    reason: "one flipped bit in the needle header, corrected by its \
                             checksum (the data is whole and reads as written; an \
                             open that scans it writes it back, a compaction \
                             rewrites it)"
                        .into(),
                    torn_tail: false,
                });
            }
            let idk = (header.key, header.alt_key);
            if header.is_deleted() {
                rep.deleted.add(nl);
                if let Some(old) = latest.remove(&idk) {
                    rep.live.sub(old);
                    rep.overwritten.add(old);
                }
            } else if header.is_superseded() {
                rep.overwritten.add(nl);
            } else {
                if let Some(old) = latest.insert(idk, nl) {
                    rep.live.sub(old);
                    rep.overwritten.add(old);
                }
                rep.live.add(nl);
            }
        }
        ScanItem::Corrupt {
            offset, at_tail, ..
        } if at_tail
            && seg.newest
            && crate::store::all_zero(seg.file, offset, seg.len)
                .map_err(StoreError::io("reading", seg.path))? =>
        {
            rep.prepared_bytes += seg.len - offset;
        }
        ScanItem::Corrupt {
            offset,
            len: l,
            reason,
            at_tail,
            header,
        } => {
            let torn_tail = at_tail && seg.newest;
            // A damaged needle whose header names its identity is
            // that identity's newest (an open indexes it so, and its
            // reads fail): the older needle is overwritten, not live.
            // A torn tail was never acknowledged: the older stays.
            if let Some(h) = header.filter(|_| !torn_tail) {
                if let Some(old) = latest.remove(&(h.key, h.alt_key)) {
                    rep.live.sub(old);
                    rep.overwritten.add(old);
                }
            }
            rep.corruptions.push(Corruption {
                path: seg.path.clone(),
                segment: seg.id,
                offset,
                len: l,
                reason: reason.to_string(),
                torn_tail,
            })
        }
    }
    Ok(())
}
