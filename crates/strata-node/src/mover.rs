//! The tier mover: keeps each workload within its flash bytes by moving
//! its oldest flash segments whole to disk (Janus's insert-on-write flash
//! tier with FIFO eviction; sequential I/O on both sides).
//!
//! - Under a loaded plan, each listed workload's data leaves flash once it
//!   is older than the plan's TTL for it (Janus §8.1: Colossus tags files
//!   with an eviction time from the workload's flash and write rate), and
//!   the workload is held to its `flash_bytes` (plus a burst allowance
//!   while a TTL evicts it); workloads the plan does not list hold none.
//! - Under the default plan, all workloads share the node's flash capacity
//!   as one FIFO: the globally oldest flash segment moves first.
//! - With LRU eviction, before a segment moves, its needles read since the
//!   mover last looked (one reference bit per object, CLOCK-style) are
//!   re-appended to the workload's active flash segment, so recently read
//!   objects stay on flash.
//! - Moves use the store's crash-safe `move_segment` (copy, fsync, rename,
//!   switch, unlink: the needle is readable from one tier or the other at
//!   every moment) and are throttled to a byte rate.

use crate::metrics::Metrics;
use crate::node::{Node, Workload};
use crate::object::ObjectId;
use crate::ramcache::cache_key;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use strata_provision::Eviction;
use strata_store::{SegmentInfo, StoreError, Tier};

/// What the mover remembers between passes: the round-robin disk cursor
/// and, per flash segment, when its size last changed (the time of its last
/// append, to within one pass), which the TTL eviction ages segments by.
#[derive(Default)]
pub struct MoverState {
    rr: usize,
    /// (workload id, segment id) -> (bytes seen, ns when they last changed).
    seen: HashMap<(u32, u64), (u64, u64)>,
}

impl MoverState {
    /// A fresh state (the mover's thread keeps one).
    pub fn new() -> MoverState {
        MoverState::default()
    }
}

/// Starts the mover thread of `node`.
pub fn spawn(node: Arc<Node>) -> std::io::Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("tier-mover".into())
        .spawn(move || {
            let mut st = MoverState::new();
            while !node.stop.load(Relaxed) {
                std::thread::sleep(node.cfg.mover_interval);
                pass(&node, &mut st);
            }
        })
}

struct View {
    w: Arc<Workload>,
    segs: Vec<SegmentInfo>,
    flash: u64,
    limit: Option<u64>,
    eviction: Eviction,
    ttl: Option<Duration>,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn refresh(node: &Node, st: &mut MoverState) -> Vec<View> {
    let window = node.cfg.recent_window.as_nanos() as u64;
    let now = now_ns();
    let mut seen = HashMap::new();
    let views = node
        .workloads()
        .into_iter()
        .map(|w| {
            let segs = w.store.segments();
            let flash: u64 = segs
                .iter()
                .filter(|s| s.tier == Tier::Flash)
                .map(|s| s.size)
                .sum();
            let disk: u64 = segs
                .iter()
                .filter(|s| s.tier == Tier::Disk)
                .map(|s| s.size)
                .sum();
            w.counters.flash_bytes.store(flash, Relaxed);
            w.counters.disk_bytes.store(disk, Relaxed);
            *w.recent.write() = segs
                .iter()
                .filter(|s| s.active || now.saturating_sub(s.created_unix_ns) < window)
                .map(|s| s.id)
                .collect();
            for s in segs.iter().filter(|s| s.tier == Tier::Flash) {
                let k = (w.id, s.id);
                let entry = match st.seen.get(&k) {
                    Some(&(size, t)) if size == s.size => (size, t),
                    Some(_) => (s.size, now),
                    // First sight (a new segment, or a node just started):
                    // a sealed segment was last written at the latest when
                    // the next segment of its device was created.
                    None if !s.active => (
                        s.size,
                        segs.iter()
                            .filter(|n| n.device == s.device && n.id > s.id)
                            .map(|n| n.created_unix_ns)
                            .min()
                            .unwrap_or(now)
                            .min(now),
                    ),
                    None => (s.size, now),
                };
                seen.insert(k, entry);
            }
            let rule = node.rule(&w);
            View {
                w,
                segs,
                flash,
                limit: rule.flash_bytes,
                eviction: rule.eviction,
                ttl: rule.ttl,
            }
        })
        .collect();
    st.seen = seen;
    views
}

/// One look at every workload; moves what its plan says must leave flash.
///
/// Under a loaded plan, for each workload: first the TTL (Janus §8.1, as
/// Colossus evicts): a sealed flash segment whose last append is older than
/// the workload's `ttl_seconds` moves to disk, and an active one open for
/// longer than the TTL is sealed so that its needles age out together; then
/// the byte bound: while the workload holds more than its `flash_bytes`
/// (plus the burst allowance when a TTL is what evicts it), its oldest
/// segment moves. Finally the node's flash capacity: while all workloads
/// together hold more, the oldest segment of the workload furthest over its
/// allocation moves. Under the default plan, all workloads share the flash
/// capacity as one FIFO.
pub fn pass(node: &Node, st: &mut MoverState) {
    if node.cfg.disk.is_empty() || node.cfg.flash.is_empty() {
        refresh(node, st);
        return;
    }
    let mut views = refresh(node, st);
    let now = now_ns();
    let planned = views.iter().any(|v| v.limit.is_some());
    for v in views.iter_mut().filter(|v| v.limit.is_some()) {
        let limit = v.limit.unwrap_or(0);
        if let Some(ttl) = v.ttl {
            let ttl_ns = ttl.as_nanos() as u64;
            let stale_active: Vec<usize> = v
                .segs
                .iter()
                .filter(|s| {
                    s.tier == Tier::Flash
                        && s.active
                        && s.needles > 0
                        && now.saturating_sub(s.created_unix_ns) >= ttl_ns
                })
                .map(|s| s.device)
                .collect();
            for device in stale_active {
                if v.w.store.seal_active(device).is_err() {
                    node.metrics.mover_errors.fetch_add(1, Relaxed);
                }
            }
            let mut expired: Vec<SegmentInfo> = v
                .segs
                .iter()
                .filter(|s| s.tier == Tier::Flash && !s.active)
                .filter(|s| {
                    let last = st.seen.get(&(v.w.id, s.id)).map_or(now, |e| e.1);
                    now.saturating_sub(last) >= ttl_ns
                })
                .cloned()
                .collect();
            expired.sort_by_key(|s| s.id);
            for seg in expired {
                if node.stop.load(Relaxed) {
                    return;
                }
                match move_one(node, v, seg, &mut st.rr) {
                    Some(moved) => v.flash = v.flash.saturating_sub(moved),
                    None => break,
                }
            }
        }
        let burst = if v.ttl.is_some() {
            (limit as f64 * node.cfg.flash_burst.max(0.0)) as u64
        } else {
            0
        };
        let ceiling = limit.saturating_add(burst);
        while v.flash > ceiling && !node.stop.load(Relaxed) {
            let Some(seg) = oldest_flash(v, true) else {
                break;
            };
            match move_one(node, v, seg, &mut st.rr) {
                Some(moved) => v.flash = v.flash.saturating_sub(moved),
                None => break,
            }
        }
    }
    if planned {
        // The node's flash capacity bounds the sum, whatever the bursts.
        loop {
            if node.stop.load(Relaxed) {
                return;
            }
            let total: u64 = views.iter().map(|v| v.flash).sum();
            if total <= node.cfg.flash_capacity {
                return;
            }
            let over = |v: &View| v.flash as f64 / v.limit.unwrap_or(0).max(1) as f64;
            let Some(v) = views
                .iter_mut()
                .filter(|v| oldest_flash(v, true).is_some())
                .max_by(|a, b| over(a).total_cmp(&over(b)))
            else {
                return;
            };
            let Some(seg) = oldest_flash(v, true) else {
                return;
            };
            match move_one(node, v, seg, &mut st.rr) {
                Some(moved) => v.flash = v.flash.saturating_sub(moved),
                None => return,
            }
        }
    }
    // Workloads sharing the node's flash (default plan).
    let cap = node.cfg.flash_capacity;
    loop {
        if node.stop.load(Relaxed) {
            return;
        }
        let total: u64 = views
            .iter()
            .filter(|v| v.limit.is_none())
            .map(|v| v.flash)
            .sum();
        if total <= cap {
            return;
        }
        // The globally oldest sealed flash segment among them.
        let pick = views
            .iter()
            .enumerate()
            .filter(|(_, v)| v.limit.is_none())
            .filter_map(|(i, v)| oldest_flash(v, false).map(|s| (i, s)))
            .min_by_key(|(_, s)| s.created_unix_ns);
        let (i, seg) = match pick {
            Some(p) => p,
            None => {
                // Only active segments left: seal the largest, retry next pass.
                if let Some(v) = views
                    .iter_mut()
                    .filter(|v| v.limit.is_none())
                    .max_by_key(|v| v.flash)
                {
                    if let Some(s) = oldest_flash(v, true) {
                        if let Some(m) = move_one(node, v, s, &mut st.rr) {
                            v.flash = v.flash.saturating_sub(m);
                            continue;
                        }
                    }
                }
                return;
            }
        };
        let v = &mut views[i];
        match move_one(node, v, seg, &mut st.rr) {
            Some(moved) => v.flash = v.flash.saturating_sub(moved),
            None => return,
        }
    }
}

/// The oldest sealed flash segment of `v`; with `seal`, an active flash
/// segment with data counts too (it is sealed before the move).
fn oldest_flash(v: &View, seal: bool) -> Option<SegmentInfo> {
    let sealed = v
        .segs
        .iter()
        .filter(|s| s.tier == Tier::Flash && !s.active)
        .min_by_key(|s| s.id)
        .cloned();
    if sealed.is_some() || !seal {
        return sealed;
    }
    v.segs
        .iter()
        .filter(|s| s.tier == Tier::Flash && s.active && s.needles > 0)
        .min_by_key(|s| s.id)
        .cloned()
}

/// Moves `seg` of `v` to a disk device; returns the flash bytes freed.
fn move_one(node: &Node, v: &mut View, seg: SegmentInfo, rr: &mut usize) -> Option<u64> {
    let w = v.w.clone();
    let metrics: &Metrics = &node.metrics;
    let t0 = Instant::now();
    if seg.active {
        if let Err(_e) = w.store.seal_active(seg.device) {
            metrics.mover_errors.fetch_add(1, Relaxed);
            return None;
        }
    }
    if v.eviction == Eviction::Lru {
        if let Err(_e) = reappend_hot(node, &w, seg.id) {
            metrics.mover_errors.fetch_add(1, Relaxed);
        }
    }
    let disks = node.cfg.disk.len();
    let device = w.first_disk + (*rr % disks);
    *rr = rr.wrapping_add(1);
    let res = w.store.move_segment(seg.id, device, &mut |_| {});
    v.segs.retain(|s| s.id != seg.id);
    match res {
        Ok(r) => {
            metrics.mover_segments.fetch_add(1, Relaxed);
            metrics.mover_bytes.fetch_add(r.bytes_before, Relaxed);
            // Throttle: this move's bytes at the configured rate.
            let want = Duration::from_secs_f64(
                r.bytes_before as f64 / node.cfg.mover_bytes_per_s.max(1) as f64,
            );
            let spent = t0.elapsed();
            if want > spent {
                std::thread::sleep(want - spent);
            }
            Some(seg.size)
        }
        Err(StoreError::NoSuchSegment(_)) | Err(StoreError::SegmentActive(_)) => Some(0),
        Err(_e) => {
            metrics.mover_errors.fetch_add(1, Relaxed);
            None
        }
    }
}

/// Re-appends to flash the needles of `segment` whose reference bit is set
/// (clearing the bits), through the workload's writer.
fn reappend_hot(node: &Node, w: &Workload, segment: u64) -> Result<(), String> {
    let mut hot = Vec::new();
    for n in w.store.needles(segment).map_err(|e| e.to_string())? {
        let Ok(n) = n else { continue };
        let id = ObjectId {
            key: n.key,
            alt: n.alt_key,
        };
        if node.hot.take(cache_key(id)) {
            hot.push(n);
        }
    }
    if hot.is_empty() {
        return Ok(());
    }
    let n = node.reappend(w, segment, hot).map_err(|e| e.to_string())?;
    node.metrics.mover_reappended.fetch_add(n, Relaxed);
    Ok(())
}
