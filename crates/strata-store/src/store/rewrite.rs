//! The rewrite of a sealed segment as its next generation, online: a
//! compaction (same device, the garbage dropped) and a move (another
//! device, every byte kept) copy it while reads and writes go on, then
//! swap the new file in and unlink the old one.

use super::handle::{advise_random, Body, SegFile, Segment, Tail};
use super::locks::{lock, read, write};
use super::node_index::Loc;
use super::report::{RewriteProgress, RewriteReport};
use super::Inner;
use crate::error::{Result, StoreError};
use crate::format::checkpoint;
use crate::format::needle::{self, NeedleHeader, FLAGS_OFFSET, FLAG_DELETED, FLAG_SUPERSEDED};
use crate::format::superblock::{self, Superblock, SUPERBLOCK_LEN};
use crate::index::{ActiveIndex, SealedSegment};
use crate::segment::{
    self, index_file_name, pread_exact, segment_file_name, sync_dir, write_file_atomic, ScanItem,
    Scanner,
};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

impl Inner {
    /// Whether needle `ord` of `seg` (with header `h`) is the live version of
    /// its identity.
    fn needle_is_live(&self, seg: &Segment, ord: u32, h: &NeedleHeader) -> bool {
        h.flags & (FLAG_DELETED | FLAG_SUPERSEDED) == 0
            && !seg.is_deleted(ord)
            && read(&self.idx).current(h.key, h.alt_key, &self.counters)
                == Some(Loc {
                    slot: seg.slot,
                    ord,
                })
    }

    /// Compaction (`dest` = None: same device, drop garbage) or move
    /// (`dest` = Some(device): copy everything to that device).
    pub(super) fn rewrite(
        &self,
        id: u64,
        dest: Option<usize>,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        let _m = lock(&self.maintenance);
        let t0 = Instant::now();
        let src = self.find(id)?;
        let Body::Sealed(src_index) = &src.body else {
            return Err(StoreError::SegmentActive(id));
        };
        let compacting = dest.is_none();
        let dev_i = dest.unwrap_or(src.device);
        let dev = &self.devices[dev_i];
        let generation = src.generation + 1;
        let final_path = dev.path.join(segment_file_name(id, generation));
        let tmp_path = dev
            .path
            .join(format!("{}.tmp", segment_file_name(id, generation)));
        let sb = Superblock {
            version: superblock::VERSION,
            tier: dev.tier,
            id,
            generation,
            created_unix_ns: src.created_unix_ns,
        };
        let out = strata_fs::create(&tmp_path).map_err(StoreError::io("creating", &tmp_path))?;
        let wr = |bytes: &[u8], at: u64| {
            strata_fs::write_all_at(&out, bytes, at).map_err(StoreError::io("writing", &tmp_path))
        };
        if let Err(e) = wr(&sb.encode(), 0) {
            // Not even the superblock fits (a full device): leave no file.
            let _ = strata_fs::remove_file(&tmp_path);
            return Err(e);
        }
        let total = src.len.load(Ordering::Acquire);
        let mut new_idx = ActiveIndex::new(SUPERBLOCK_LEN as u64);
        // (source ordinal, new ordinal, new offset, identity) of every
        // needle kept.
        let mut kept: Vec<(u32, u32, u64, u64, u32)> = Vec::new();
        // (ordinal, key, alt) of every needle a compaction drops.
        let mut dropped: Vec<(u32, u64, u32)> = Vec::new();
        let mut pending: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut pending_at = SUPERBLOCK_LEN as u64;
        // Held to the end: readers and flag writes that find the source
        // retired still use this handle after its file is unlinked.
        let src_file = src.file()?;
        let mut sc = Scanner::new(
            src_file.clone(),
            &src.path,
            SUPERBLOCK_LEN as u64,
            total,
            true,
            src.flag_code(),
        );
        // The new file is of this version (its superblock above).
        let code = needle::FlagCode::of_version(superblock::VERSION);
        let mut ord: u32 = 0;
        let mut last_report = 0u64;
        let rate = self.cfg.compaction_bytes_per_s;
        let mut io_bytes = 0u64;
        let result: Result<()> = (|| {
            while let Some(item) = sc.next() {
                let item = item?;
                let this = ord;
                ord += 1;
                // A mended needle (one header bit corrected) is written
                // anew here, its header as it was written.
                if let ScanItem::Needle {
                    offset,
                    header,
                    data,
                    ..
                } = &item
                {
                    if src_index.needle(this).map(|x| x.0) != Some(*offset) {
                        return Err(src.corrupt(*offset, "needle offsets disagree with the index"));
                    }
                    let keep = !compacting || self.needle_is_live(&src, this, header);
                    if keep {
                        let before = pending.len();
                        needle::encode(
                            &mut pending,
                            header.cookie,
                            header.key,
                            header.alt_key,
                            code.word(header.flags),
                            data.as_deref().unwrap_or_default(),
                        );
                        let len = (pending.len() - before) as u64;
                        let new_off = new_idx.end();
                        let (new_ord, _) = new_idx.push(header.key, header.alt_key, len);
                        kept.push((this, new_ord, new_off, header.key, header.alt_key));
                    } else {
                        dropped.push((this, header.key, header.alt_key));
                    }
                } else if !compacting {
                    // A move keeps damaged regions byte for byte.
                    let (o, l) = (item.offset(), item.len());
                    let mut raw = vec![0u8; l as usize];
                    pread_exact(&src_file, &mut raw, o)
                        .map_err(StoreError::io("reading", &src.path))?;
                    pending.extend_from_slice(&raw);
                    new_idx.offsets.push(((new_idx.end() + l) / 8) as u32);
                }
                if pending.len() >= 1 << 20 {
                    wr(&pending, pending_at)?;
                    pending_at += pending.len() as u64;
                    io_bytes += pending.len() as u64;
                    pending.clear();
                }
                let done = sc.position();
                if done - last_report >= 1 << 20 {
                    last_report = done;
                    progress(RewriteProgress {
                        segment: id,
                        done,
                        total,
                    });
                    if let Some(r) = rate {
                        let budget = Duration::from_secs_f64((done + io_bytes) as f64 / r as f64);
                        let spent = t0.elapsed();
                        if budget > spent {
                            std::thread::sleep(budget - spent);
                        }
                    }
                }
            }
            wr(&pending, pending_at)?;
            strata_fs::sync_data(&out).map_err(StoreError::io("syncing", &tmp_path))?;
            Ok(())
        })();
        if let Err(e) = result {
            let _ = strata_fs::remove_file(&tmp_path);
            return Err(e);
        }
        progress(RewriteProgress {
            segment: id,
            done: total,
            total,
        });
        let new_len = new_idx.end();
        let new_slot = if compacting {
            self.reserve_slot()
        } else {
            src.slot
        };
        // Swap, with in-place flag writes to the source blocked.
        let _g = lock(&src.lock);
        let swap: Result<Arc<Segment>> = (|| {
            // Flags that reached the source during the copy.
            let mut flagged = false;
            for &(src_ord, _, new_off, _, _) in &kept {
                if src_index.is_deleted(src_ord) {
                    let Some((so, _)) = src_index.needle(src_ord) else {
                        continue;
                    };
                    let mut fl = [0u8; 4];
                    pread_exact(&src_file, &mut fl, so + FLAGS_OFFSET)
                        .map_err(StoreError::io("reading", &src.path))?;
                    // In the new file's code; a word beyond correction is
                    // still a dead needle's (the index says so): both flags.
                    let flags = src
                        .flag_code()
                        .flags(u32::from_le_bytes(fl))
                        .unwrap_or(FLAG_DELETED | FLAG_SUPERSEDED);
                    wr(&code.word(flags).to_le_bytes(), new_off + FLAGS_OFFSET)?;
                    flagged = true;
                }
            }
            if flagged {
                strata_fs::sync_data(&out).map_err(StoreError::io("syncing", &tmp_path))?;
            }
            let mut deleted = vec![0u64; (new_idx.needle_count() as usize).div_ceil(64)];
            let mut map = vec![u32::MAX; src_index.needle_count() as usize];
            new_idx.map.clear();
            {
                let ix = read(&self.idx);
                for &(src_ord, new_ord, _, k, a) in &kept {
                    map[src_ord as usize] = new_ord;
                    if src_index.is_deleted(src_ord) {
                        deleted[new_ord as usize / 64] |= 1 << (new_ord % 64);
                    } else if ix.current(k, a, &self.counters)
                        == Some(Loc {
                            slot: src.slot,
                            ord: src_ord,
                        })
                    {
                        new_idx.map.insert((k, a), new_ord);
                    }
                }
            }
            let body = SealedSegment::new(&new_idx.offsets, &deleted)
                .ok_or_else(|| StoreError::Config("could not build a segment index".into()))?;
            write_file_atomic(
                &dev.path.join(index_file_name(id, generation)),
                &checkpoint::encode_sealed(id, generation, &new_idx, &deleted),
            )?;
            strata_fs::rename(&tmp_path, &final_path)
                .map_err(StoreError::io("renaming", &tmp_path))?;
            sync_dir(&dev.path)?;
            let file = segment::open_rw(&final_path)?;
            if self.cfg.random_access_advice {
                advise_random(&file);
            }
            let file = SegFile::new(Some(Arc::new(file)), &src.file.budget);
            let live: u64 = new_idx
                .map
                .values()
                .filter_map(|&o| new_idx.needle(o))
                .map(|x| x.1)
                .sum();
            let seg = Arc::new(Segment {
                id,
                generation,
                device: dev_i,
                tier: dev.tier,
                path: final_path.clone(),
                file,
                created_unix_ns: src.created_unix_ns,
                slot: new_slot,
                body: Body::Sealed(body),
                len: AtomicU64::new(new_len),
                garbage: AtomicU64::new(new_len.saturating_sub(SUPERBLOCK_LEN as u64 + live)),
                lock: Mutex::new(()),
                retired: AtomicBool::new(false),
                version: AtomicU32::new(superblock::VERSION),
                tail: Tail::at(new_len),
                moved_to: OnceLock::new(),
                dirty: AtomicBool::new(false),
                pending: Mutex::new(None),
            });
            {
                let mut ix = write(&self.idx);
                ix.table[new_slot as usize] = Some(seg.clone());
                if compacting {
                    // Needles renumbered: the live ones move to the recent
                    // map, and the run forgets the old generation.
                    for &(src_ord, new_ord, _, k, a) in &kept {
                        let here = Loc {
                            slot: src.slot,
                            ord: src_ord,
                        };
                        if src_index.is_deleted(src_ord) {
                            continue;
                        }
                        // Live here: the recent table's entry (exact, by
                        // location), or the run's answer if nothing newer.
                        let live = ix.recent.contains(ix.hid(k, a), here)
                            || (!ix.recent_has(k, a, &self.counters)
                                && ix.run_hit(k, a) == Some(here));
                        if live {
                            let to = Loc {
                                slot: new_slot,
                                ord: new_ord,
                            };
                            ix.set(k, a, to, Some(here), &self.counters)?;
                        }
                    }
                    // A dropped needle's recent entry, if it still has one
                    // (an open that trusted a checkpoint older than the
                    // needle's delete enters it; the read path fixes that
                    // only when the needle is read): once the old slot is
                    // gone the entry could no longer be read, and a lookup
                    // of another identity whose hash remainder it shares
                    // took it for that identity's newest version, so that
                    // a compaction dropped that live needle too (found by
                    // tests/model.rs with colliding hashes).
                    for &(ord, k, a) in &dropped {
                        let h = ix.hid(k, a);
                        ix.recent.remove(
                            h,
                            Loc {
                                slot: src.slot,
                                ord,
                            },
                        );
                    }
                    ix.table[src.slot as usize] = None;
                    if let Some(run) = &ix.run {
                        for list in run.seg_lists() {
                            list.invalidate(src.slot);
                        }
                    }
                }
            }
            let _ = src.moved_to.set((seg.clone(), compacting.then_some(map)));
            src.retired.store(true, Ordering::Release);
            // A retired handle's file is never closed (its name is about to
            // be unlinked): make sure it has one.
            let mut h = write(&src.file.handle);
            if h.is_none() {
                *h = Some(src_file.clone());
                src.file.budget.open.fetch_add(1, Ordering::Relaxed);
            }
            Ok(seg)
        })();
        drop(_g);
        let seg = match swap {
            Ok(s) => s,
            Err(e) => {
                let _ = strata_fs::remove_file(&tmp_path);
                return Err(e);
            }
        };
        // The old generation is no longer referenced by name.
        let old_idx = src.index_path();
        let _ = strata_fs::remove_file(&src.path);
        let _ = strata_fs::remove_file(&old_idx);
        if let Some(d) = src.path.parent() {
            sync_dir(d)?;
        }
        self.trim_fds();
        if compacting {
            self.counters.compactions.fetch_add(1, Ordering::Relaxed);
            self.counters
                .reclaimed
                .fetch_add(total.saturating_sub(new_len), Ordering::Relaxed);
        }
        Ok(RewriteReport {
            segment: id,
            bytes_before: total,
            bytes_after: new_len,
            needles_before: src_index.needle_count(),
            needles_after: seg.needle_count(),
            seconds: t0.elapsed().as_secs_f64(),
        })
    }
}
