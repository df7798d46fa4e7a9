//! The tier mover: keeps each workload within its flash bytes by moving
//! its oldest flash segments whole to disk (Janus's insert-on-write flash
//! tier with FIFO eviction; sequential I/O on both sides). The one mover of
//! every Strata server: a single node's workload stores and a cluster
//! node's row stores both hand it their stores grouped by workload
//! ([`Tiered`]).
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
//!   re-appended to the store's active flash segment, so recently read
//!   objects stay on flash.
//! - Moves use the store's crash-safe `move_segment` (copy, fsync, rename,
//!   switch, unlink: the needle is readable from one tier or the other at
//!   every moment) and are throttled to a byte rate.

use crate::metrics::{Metrics, WorkloadCounters};
use crate::object::ObjectId;
use crate::plan::Rule;
use crate::ramcache::cache_key;
use crate::tiers::HotBits;
use parking_lot::RwLock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use strata_plan::Eviction;
use strata_store::{SegmentInfo, Store, StoreError, StoredNeedle, Tier};

/// Re-appends the still-live ones of needles read from a segment to the
/// store's flash, through the store's writer (in order with client
/// writes); returns how many.
pub type Reappend = Arc<dyn Fn(u64, Vec<StoredNeedle>) -> Result<u64, String> + Send + Sync>;

/// One segment store the mover looks after.
pub struct Member {
    /// Unique among every member the mover sees (it ages segments by
    /// `(key, segment id)`).
    pub key: u64,
    /// The store.
    pub store: Arc<Store>,
    /// Device index of its first disk device.
    pub first_disk: usize,
    /// How many disk devices follow it (moves go round-robin over them).
    pub disks: usize,
    /// Set to the store's recently written segments on every pass (RAM
    /// cache admission), when the server uses it.
    pub recent: Option<Arc<RwLock<HashSet<u64>>>>,
    /// The LRU re-append through the store's writer.
    pub reappend: Reappend,
}

/// One workload: the rule the plan gives it, its counters (the mover sets
/// its flash and disk bytes) and the stores holding its segments.
pub struct Group {
    /// Its rule under the plan in force.
    pub rule: Rule,
    /// Its counters.
    pub counters: Arc<WorkloadCounters>,
    /// Its stores.
    pub members: Vec<Member>,
}

/// The mover's settings.
#[derive(Clone, Copy, Debug)]
pub struct MoverSettings {
    /// Whether there is both a flash and a disk tier (else nothing moves).
    pub both_tiers: bool,
    /// Bytes the flash tier may hold over all workloads.
    pub flash_capacity: u64,
    /// Burst allowance over a TTL-evicted workload's flash bytes (fraction).
    pub flash_burst: f64,
    /// Bound on bytes copied per second.
    pub bytes_per_s: u64,
    /// How long a sealed segment counts as recently written.
    pub recent_window: Duration,
    /// Time between passes.
    pub interval: Duration,
}

/// What a server gives the mover.
pub trait Tiered: Send + Sync {
    /// Its stores grouped by workload, with each workload's rule.
    fn groups(&self) -> Vec<Group>;
    /// The settings.
    fn settings(&self) -> MoverSettings;
    /// The counters the mover feeds (`strata_mover_*`).
    fn metrics(&self) -> &Metrics;
    /// The reference bits of flash-resident objects (LRU).
    fn hot(&self) -> &HotBits;
    /// Whether the server is stopping.
    fn stopped(&self) -> bool;
}

/// What the mover remembers between passes: the round-robin disk cursor
/// and, per flash segment, when its size last changed (the time of its last
/// append, to within one pass), which the TTL eviction ages segments by.
#[derive(Default)]
pub struct MoverState {
    rr: usize,
    /// (member key, segment id) -> (bytes seen, ns when they last changed).
    seen: HashMap<(u64, u64), (u64, u64)>,
}

impl MoverState {
    /// A fresh state (the server's `tier-mover` worker keeps one).
    pub fn new() -> MoverState {
        MoverState::default()
    }
}

/// A flash or disk segment of one member of a group.
#[derive(Clone)]
struct Seg {
    member: usize,
    info: SegmentInfo,
}

struct View {
    g: Group,
    segs: Vec<Seg>,
    flash: u64,
}

fn now_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn refresh(host: &dyn Tiered, st: &mut MoverState) -> Vec<View> {
    let window = host.settings().recent_window.as_nanos() as u64;
    let now = now_ns();
    let mut seen = HashMap::new();
    let views = host
        .groups()
        .into_iter()
        .map(|g| {
            let mut segs = Vec::new();
            for (mi, m) in g.members.iter().enumerate() {
                let all = m.store.segments();
                if let Some(r) = &m.recent {
                    *r.write() = all
                        .iter()
                        .filter(|s| s.active || now.saturating_sub(s.created_unix_ns) < window)
                        .map(|s| s.id)
                        .collect();
                }
                for s in all.iter().filter(|s| s.tier == Tier::Flash) {
                    let k = (m.key, s.id);
                    let entry = match st.seen.get(&k) {
                        Some(&(size, t)) if size == s.size => (size, t),
                        Some(_) => (s.size, now),
                        // First sight (a new segment, or a server just
                        // started): a sealed segment was last written at
                        // the latest when the next segment of its device
                        // was created.
                        None if !s.active => (
                            s.size,
                            all.iter()
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
                segs.extend(all.into_iter().map(|info| Seg { member: mi, info }));
            }
            let bytes = |t: Tier| -> u64 {
                segs.iter()
                    .filter(|s| s.info.tier == t)
                    .map(|s| s.info.size)
                    .sum()
            };
            let flash = bytes(Tier::Flash);
            g.counters.flash_bytes.store(flash, Relaxed);
            g.counters.disk_bytes.store(bytes(Tier::Disk), Relaxed);
            View { g, segs, flash }
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
pub fn pass(host: &dyn Tiered, st: &mut MoverState) {
    let set = host.settings();
    let mut views = refresh(host, st);
    if !set.both_tiers {
        return;
    }
    let now = now_ns();
    let planned = views.iter().any(|v| v.g.rule.flash_bytes.is_some());
    for v in views.iter_mut().filter(|v| v.g.rule.flash_bytes.is_some()) {
        let limit = v.g.rule.flash_bytes.unwrap_or(0);
        if let Some(ttl) = v.g.rule.ttl {
            let ttl_ns = ttl.as_nanos() as u64;
            let stale_active: Vec<(usize, usize)> = v
                .segs
                .iter()
                .filter(|s| {
                    s.info.tier == Tier::Flash
                        && s.info.active
                        && s.info.needles > 0
                        && now.saturating_sub(s.info.created_unix_ns) >= ttl_ns
                })
                .map(|s| (s.member, s.info.device))
                .collect();
            for (m, device) in stale_active {
                if v.g.members[m].store.seal_active(device).is_err() {
                    host.metrics().mover_errors.fetch_add(1, Relaxed);
                }
            }
            let mut expired: Vec<Seg> = v
                .segs
                .iter()
                .filter(|s| s.info.tier == Tier::Flash && !s.info.active)
                .filter(|s| {
                    let key = (v.g.members[s.member].key, s.info.id);
                    let last = st.seen.get(&key).map_or(now, |e| e.1);
                    now.saturating_sub(last) >= ttl_ns
                })
                .cloned()
                .collect();
            expired.sort_by_key(|s| (s.info.created_unix_ns, s.info.id));
            for seg in expired {
                if host.stopped() {
                    return;
                }
                match move_one(host, v, seg, &mut st.rr) {
                    Some(moved) => v.flash = v.flash.saturating_sub(moved),
                    None => break,
                }
            }
        }
        let burst = if v.g.rule.ttl.is_some() {
            (limit as f64 * set.flash_burst.max(0.0)) as u64
        } else {
            0
        };
        let ceiling = limit.saturating_add(burst);
        while v.flash > ceiling && !host.stopped() {
            let Some(seg) = oldest_flash(v, true) else {
                break;
            };
            match move_one(host, v, seg, &mut st.rr) {
                Some(moved) => v.flash = v.flash.saturating_sub(moved),
                None => break,
            }
        }
    }
    if planned {
        // The node's flash capacity bounds the sum, whatever the bursts.
        loop {
            if host.stopped() {
                return;
            }
            let total: u64 = views.iter().map(|v| v.flash).sum();
            if total <= set.flash_capacity {
                return;
            }
            let over = |v: &View| v.flash as f64 / v.g.rule.flash_bytes.unwrap_or(0).max(1) as f64;
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
            match move_one(host, v, seg, &mut st.rr) {
                Some(moved) => v.flash = v.flash.saturating_sub(moved),
                None => return,
            }
        }
    }
    // Workloads sharing the node's flash (default plan).
    loop {
        if host.stopped() {
            return;
        }
        let total: u64 = views
            .iter()
            .filter(|v| v.g.rule.flash_bytes.is_none())
            .map(|v| v.flash)
            .sum();
        if total <= set.flash_capacity {
            return;
        }
        // The globally oldest sealed flash segment among them.
        let pick = views
            .iter()
            .enumerate()
            .filter(|(_, v)| v.g.rule.flash_bytes.is_none())
            .filter_map(|(i, v)| oldest_flash(v, false).map(|s| (i, s)))
            .min_by_key(|(_, s)| s.info.created_unix_ns);
        let (i, seg) = match pick {
            Some(p) => p,
            None => {
                // Only active segments left: seal the largest, retry next pass.
                if let Some(v) = views
                    .iter_mut()
                    .filter(|v| v.g.rule.flash_bytes.is_none())
                    .max_by_key(|v| v.flash)
                {
                    if let Some(s) = oldest_flash(v, true) {
                        if let Some(m) = move_one(host, v, s, &mut st.rr) {
                            v.flash = v.flash.saturating_sub(m);
                            continue;
                        }
                    }
                }
                return;
            }
        };
        let v = &mut views[i];
        match move_one(host, v, seg, &mut st.rr) {
            Some(moved) => v.flash = v.flash.saturating_sub(moved),
            None => return,
        }
    }
}

/// The oldest sealed flash segment of `v`; with `seal`, an active flash
/// segment with data counts too (it is sealed before the move).
fn oldest_flash(v: &View, seal: bool) -> Option<Seg> {
    let age = |s: &&Seg| (s.info.created_unix_ns, s.info.id);
    let sealed = v
        .segs
        .iter()
        .filter(|s| s.info.tier == Tier::Flash && !s.info.active)
        .min_by_key(age)
        .cloned();
    if sealed.is_some() || !seal {
        return sealed;
    }
    v.segs
        .iter()
        .filter(|s| s.info.tier == Tier::Flash && s.info.active && s.info.needles > 0)
        .min_by_key(age)
        .cloned()
}

/// Moves `seg` of `v` to a disk device; returns the flash bytes freed.
fn move_one(host: &dyn Tiered, v: &mut View, seg: Seg, rr: &mut usize) -> Option<u64> {
    let metrics = host.metrics();
    let t0 = Instant::now();
    let m = &v.g.members[seg.member];
    if seg.info.active {
        if let Err(e) = m.store.seal_active(seg.info.device) {
            metrics.mover_errors.fetch_add(1, Relaxed);
            eprintln!("strata server: tier mover: sealing: {e}");
            return None;
        }
    }
    if v.g.rule.eviction == Eviction::Lru {
        if let Err(_e) = reappend_hot(host, m, seg.info.id) {
            metrics.mover_errors.fetch_add(1, Relaxed);
        }
    }
    let device = m.first_disk + (*rr % m.disks.max(1));
    *rr = rr.wrapping_add(1);
    let res = m.store.move_segment(seg.info.id, device, &mut |_| {});
    let (member, id) = (seg.member, seg.info.id);
    v.segs.retain(|s| !(s.member == member && s.info.id == id));
    match res {
        Ok(r) => {
            metrics.mover_no_room.store(0, Relaxed);
            metrics.mover_segments.fetch_add(1, Relaxed);
            metrics.mover_bytes.fetch_add(r.bytes_before, Relaxed);
            // Throttle: this move's bytes at the configured rate.
            let want = Duration::from_secs_f64(
                r.bytes_before as f64 / host.settings().bytes_per_s.max(1) as f64,
            );
            let spent = t0.elapsed();
            if want > spent {
                std::thread::sleep(want - spent);
            }
            Some(seg.info.size)
        }
        Err(StoreError::NoSuchSegment(_)) | Err(StoreError::SegmentActive(_)) => Some(0),
        Err(e @ StoreError::NoRoom { .. }) => {
            // Not an error: the disk is full. Said once per run of
            // refusals; the next pass looks again.
            if metrics.mover_no_room.fetch_add(1, Relaxed) == 0 {
                eprintln!("strata server: tier mover: waiting for room: {e}");
            }
            None
        }
        Err(e) => {
            metrics.mover_errors.fetch_add(1, Relaxed);
            eprintln!(
                "strata server: tier mover: segment {:016x}: {e}",
                seg.info.id
            );
            None
        }
    }
}

/// Re-appends to flash the needles of `segment` whose reference bit is set
/// (clearing the bits), through the store's writer.
fn reappend_hot(host: &dyn Tiered, m: &Member, segment: u64) -> Result<(), String> {
    let mut hot = Vec::new();
    for n in m.store.needles(segment).map_err(|e| e.to_string())? {
        let Ok(n) = n else { continue };
        let id = ObjectId {
            key: n.key,
            alt: n.alt_key,
        };
        if host.hot().take(cache_key(id)) {
            hot.push(n);
        }
    }
    if hot.is_empty() {
        return Ok(());
    }
    let n = (m.reappend)(segment, hot)?;
    host.metrics().mover_reappended.fetch_add(n, Relaxed);
    Ok(())
}
