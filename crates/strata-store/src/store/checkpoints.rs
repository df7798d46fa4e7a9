//! Index checkpoints: each segment's offsets and identities written to its
//! `.idx` file, so that an open loads them instead of scanning the segment.
//! An active segment's checkpoint is rebuilt from its previous one and the
//! identities RAM holds; a sealed one's is written once, then again with
//! new deleted bits.

use super::handle::{ActiveSeg, Body, Entry, Segment};
use super::locks::{lock, read, write};
use super::node_index::Loc;
use super::Inner;
use crate::error::Result;
use crate::format::checkpoint;
use crate::format::superblock::SUPERBLOCK_LEN;
use crate::index::ActiveIndex;
use crate::segment::{write_file_atomic, ScanItem};
use std::sync::atomic::Ordering;

/// What [`Inner::live_entries_of`] needs of an active segment, copied so
/// that its lock is not held meanwhile.
pub(super) struct IdsSnapshot {
    ids_base: usize,
    /// Byte offset of needle `ids_base`.
    base_offset: u64,
    below: usize,
    ids: Vec<Entry>,
}

impl IdsSnapshot {
    pub(super) fn of(a: &ActiveSeg, below: usize) -> IdsSnapshot {
        IdsSnapshot {
            ids_base: a.ids_base,
            base_offset: a.needle(a.ids_base as u32).map_or(a.end(), |x| x.0),
            below,
            ids: a
                .ids
                .iter()
                .filter(|e| (e.2 as usize) < below)
                .copied()
                .collect(),
        }
    }
}

impl Inner {
    pub(super) fn write_checkpoints(&self) -> Result<()> {
        for s in self.all_segments() {
            if !s.dirty.swap(false, Ordering::AcqRel) {
                continue;
            }
            let res = self.write_checkpoint(&s);
            if res.is_err() {
                s.dirty.store(true, Ordering::Relaxed);
            }
            res?;
        }
        Ok(())
    }

    fn write_checkpoint(&self, s: &Segment) -> Result<()> {
        match &s.body {
            Body::Active(a) => {
                // One writer at a time: the identities RAM drops below rely
                // on the newest checkpoint being the one on disk.
                let _c = lock(&self.checkpointing);
                if s.retired.load(Ordering::Acquire) {
                    // Sealed since the caller took this handle: its entries
                    // are the sealed segment's to write (from `pending`),
                    // and the recent table may no longer hold them.
                    return Ok(());
                }
                let (bytes, covered) = {
                    // A snapshot: the segment's lock is not held while the
                    // index is read (a put holding the index may read a
                    // header of this segment).
                    let (offsets, snap, covered) = {
                        let a = read(a);
                        (
                            a.offsets[..=a.installed].to_vec(),
                            IdsSnapshot::of(&a, a.installed),
                            a.installed,
                        )
                    };
                    let mut idx = ActiveIndex::new(0);
                    idx.offsets = offsets;
                    let entries = self.live_entries_of(s, snap)?;
                    idx.map.reserve(entries.len());
                    for (k, alt, o) in entries {
                        idx.map.insert((k, alt), o);
                    }
                    (checkpoint::encode_active(s.id, s.generation, &idx), covered)
                };
                write_file_atomic(&s.index_path(), &bytes)?;
                // The identities below `covered` are on disk now.
                let mut a = write(a);
                if covered > a.ids_base {
                    a.ids_base = covered;
                    a.ids.retain(|e| e.2 as usize >= covered);
                    if a.ids.capacity() > 2 * a.ids.len() + 256 {
                        a.ids.shrink_to_fit();
                    }
                }
                Ok(())
            }
            Body::Sealed(sealed) => {
                let mut pending = lock(&s.pending);
                let entries = match pending.as_ref() {
                    Some(e) => e.clone(),
                    None => {
                        // Entries never change once sealed: take them from
                        // the checkpoint on disk, with the new deleted bits.
                        let Some(old) = std::fs::read(s.index_path()).ok() else {
                            return Ok(());
                        };
                        let Ok((h, body)) = checkpoint::parse(&old) else {
                            return Ok(());
                        };
                        let Ok((idx, _)) = checkpoint::decode_sealed(&h, body) else {
                            return Ok(());
                        };
                        idx.map.iter().map(|(&(k, a), &o)| (k, a, o)).collect()
                    }
                };
                let mut idx = ActiveIndex::new(0);
                idx.offsets = sealed.units();
                idx.map.reserve(entries.len());
                for &(k, a, o) in &entries {
                    idx.map.insert((k, a), o);
                }
                let bytes =
                    checkpoint::encode_sealed(s.id, s.generation, &idx, &sealed.deleted_words());
                write_file_atomic(&s.index_path(), &bytes)?;
                *pending = None;
                Ok(())
            }
        }
    }

    /// (key, alt, ordinal) of the needles of active segment `seg` below
    /// `below` that the recent table places there (its live needles), in
    /// ordinal order: those below `a.ids_base` from the checkpoint on disk
    /// (or, if it cannot be read, the needles' headers), the others from
    /// RAM. An entry is kept if the table holds exactly (its hash, its
    /// location): a location holds one needle, so no header is read.
    pub(super) fn live_entries_of(&self, seg: &Segment, a: IdsSnapshot) -> Result<Vec<Entry>> {
        let below = a.below;
        let mut src: Vec<Entry> = Vec::new();
        if a.ids_base > 0 {
            let from_ck = std::fs::read(seg.index_path()).ok().and_then(|b| {
                let (h, body) = checkpoint::parse(&b).ok()?;
                (h.segment == seg.id
                    && h.generation == seg.generation
                    && h.needles >= a.ids_base as u64)
                    .then_some(())?;
                checkpoint::decode_parts_of_any_kind(&h, body, true)
                    .ok()
                    .map(|p| p.entries)
            });
            src = match from_ck {
                Some(e) => e,
                None => self.scan_identities(seg, a.base_offset)?,
            };
            src.retain(|e| (e.2 as usize) < a.ids_base);
        }
        src.extend(a.ids);
        let ix = read(&self.idx);
        src.retain(|&(k, al, o)| {
            (o as usize) < below
                && ix.recent.contains(
                    ix.hid(k, al),
                    Loc {
                        slot: seg.slot,
                        ord: o,
                    },
                )
        });
        src.sort_unstable_by_key(|e| e.2);
        Ok(src)
    }

    /// (key, alt, ordinal) of every needle of `seg` below byte `end`, from
    /// the needle headers.
    fn scan_identities(&self, seg: &Segment, end: u64) -> Result<Vec<Entry>> {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Store, StoreConfig, Tier};
    use std::time::Duration;

    /// The interleaving of docs/reliability.md finding 12, step by step:
    /// the background thread takes the active segment for a checkpoint;
    /// the writer seals it and a merge takes its identities out of the
    /// recent table; the checkpoint then goes ahead. The disk is then
    /// copied as a kill -9 leaves it before the sealed segment's own
    /// checkpoint, without the run file (a merge killed before its rename
    /// left the old one, before the fix that defers the recent table's
    /// removals to after the rename; or a run file lost or damaged, which
    /// the open rebuilds from the checkpoints): every object must still be
    /// found on the reopen.
    #[test]
    fn a_checkpoint_of_a_segment_sealed_meanwhile_keeps_its_identities() {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = StoreConfig::new(dir.path(), Tier::Flash);
        // The background thread writes no checkpoint and compacts nothing
        // during the test: the test plays its part.
        cfg.checkpoint_interval = Duration::from_secs(3600);
        cfg.auto_compaction = false;
        let store = Store::open(cfg).unwrap();
        let n = 200u64;
        for k in 0..n {
            let data = k.to_le_bytes().repeat(1 + (k % 5) as usize);
            store.put(Tier::Flash, k, 0, k as u32 + 1, &data).unwrap();
        }
        store.checkpoint().unwrap();
        // The background thread's list of segments holds the active one.
        let active = lock(&store.inner.devices[0].writer).clone();
        store.seal_active(0).unwrap();
        store.merge_index().unwrap();
        // Its checkpoint of that segment runs now.
        store.inner.write_checkpoint(&active).unwrap();
        // The disk at a kill -9 now, less the run file: every segment and
        // checkpoint.
        let copy = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().to_string();
            if name.ends_with(".seg") || name.ends_with(".idx") {
                std::fs::copy(e.path(), copy.path().join(&name)).unwrap();
            }
        }
        let reopened = Store::open(StoreConfig::new(copy.path(), Tier::Flash)).unwrap();
        for k in 0..n {
            let got = reopened.get(k, 0, k as u32 + 1).unwrap();
            assert!(
                got.is_some_and(|o| o.data == k.to_le_bytes().repeat(1 + (k % 5) as usize)),
                "object {k} lost on the reopen"
            );
        }
        drop(reopened);
        drop(store);
    }
}
