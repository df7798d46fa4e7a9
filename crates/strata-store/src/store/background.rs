//! The store's background thread: every `checkpoint_interval` it writes
//! the dirty checkpoints, syncs pending flags and merges the recent map
//! when due, and (with `auto_compaction`) compacts the segment with the
//! fewest live bytes past the garbage ratio, or seals an active one whose
//! garbage is worth a rewrite.

use super::Inner;
use std::sync::atomic::Ordering;
use std::sync::Weak;
use std::time::{Duration, Instant};

/// The background compaction seals an active segment for compaction once
/// it holds at least this much garbage (and its garbage ratio passes
/// `compaction_garbage_ratio`).
const ACTIVE_RECLAIM_MIN_BYTES: u64 = 1 << 20;

pub(super) fn background(weak: Weak<Inner>) {
    let mut last_ck = Instant::now();
    let mut last_compact = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let Some(inner) = weak.upgrade() else { return };
        if inner.stop.load(Ordering::Relaxed) {
            return;
        }
        if last_ck.elapsed() >= inner.cfg.checkpoint_interval {
            last_ck = Instant::now();
            // Errors here are retried on the next round; the segments
            // themselves stay authoritative.
            let _ = inner.write_checkpoints();
            let _ = inner.sync_pending_flags();
            if inner.merge_due() {
                let _ = inner.merge();
            }
        }
        if inner.cfg.auto_compaction && last_compact.elapsed() >= inner.cfg.checkpoint_interval {
            last_compact = Instant::now();
            let ratio = inner.cfg.compaction_garbage_ratio;
            let all = inner.all_segments();
            // The segment with the fewest live bytes first: the cheapest
            // to rewrite, and on a nearly full volume the one whose new
            // generation fits in the space left.
            let candidate = all
                .iter()
                .filter(|s| !s.is_active() && s.garbage_ratio() >= ratio)
                .min_by_key(|s| {
                    s.len
                        .load(Ordering::Relaxed)
                        .saturating_sub(s.garbage.load(Ordering::Relaxed))
                })
                .map(|s| s.id);
            if let Some(id) = candidate {
                let _ = inner.rewrite(id, None, &mut |_| {});
            } else if let Some(s) = all.iter().find(|s| {
                // An active segment that may never fill (large segments,
                // a small workload) is sealed once its garbage is worth a
                // rewrite, and compacted on the next round.
                s.is_active()
                    && s.garbage_ratio() >= ratio
                    && s.garbage.load(Ordering::Relaxed) >= ACTIVE_RECLAIM_MIN_BYTES
            }) {
                let _ = inner.seal_if_active(s.device, s.id);
            }
        }
    }
}
