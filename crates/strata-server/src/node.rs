//! The node: identity, membership (register, heartbeats), the table it
//! serves with, its devices, caches, plan and traces, and the background
//! loops.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use strata_client::{Http, Placement};
use strata_meta::api::{
    DiskSpec, HeartbeatRequest, HeartbeatResponse, RecoveryTask, RegisterRequest, RegisterResponse,
    ScrubReport,
};
use strata_node::metrics::Metrics;
use strata_node::plan::ActivePlan;
use strata_node::ramcache::RamCache;
use strata_node::tiers::{SHARED, SHARED_ID};
use strata_node::trace::Tracer;
use strata_placement::recovery::Transfer;
use strata_placement::{DiskId, NodeId, PlacementTable};
use strata_plan::TierPlan;
use strata_proto::replica::Refusal;
use strata_store::Tier;
use tokio::sync::Semaphore;

use crate::identity::{read_identity, recover_identity, save_identity, Identity, DEVICE_IDENTITY};
use crate::options::NodeOptions;
use crate::rows::RowStores;
use crate::ClusterError;

/// Which rows of a node are still being copied into its disks (recovery,
/// add-node, a drain): such a copy may lack records acknowledged before
/// the disk joined the row, so the older copies of those names its
/// stripes hold must not be served (docs/recovery.md, "Reads while a row
/// is copied in"). Learnt from two sources: the table itself (a row a new
/// table puts on a disk here is marked before any request is admitted
/// under that table) and the recovery poll (the copies the metadata
/// service still lists for this node; one it no longer lists is done).
#[derive(Debug, Default)]
pub(crate) struct Incoming {
    /// (row, disk) → the table version at which the mark was made.
    marks: HashMap<(usize, DiskId), u64>,
    /// Whether a recovery poll that began under a table has answered
    /// since this node started.
    known: bool,
    /// Row → how many times a copy of it into this node was marked: the
    /// tag the read caches keep beside each entry of the row. A row that
    /// comes back to a node that held it before (moved away and back, or
    /// a node that rejoins under a new identity) gets a new generation, so
    /// what the caches kept from the earlier time is never served.
    generation: HashMap<usize, u32>,
}

impl Incoming {
    /// Marks every row `next` puts on one of `disks` that `prev` did not.
    pub(crate) fn arrived(
        &mut self,
        prev: &PlacementTable,
        next: &PlacementTable,
        disks: &[DiskId],
    ) {
        let v = next.version();
        for row in 0..next.row_count() {
            for &d in next.row(row) {
                let before = row < prev.row_count() && prev.row(row).contains(&d);
                if disks.contains(&d) && !before {
                    self.mark(row, d, v);
                }
            }
        }
    }

    /// Marks the copy of `row` into `disk` as under way since table
    /// version `v`; a new mark starts a new cache generation of the row.
    fn mark(&mut self, row: usize, disk: DiskId, v: u64) {
        if let std::collections::hash_map::Entry::Vacant(e) = self.marks.entry((row, disk)) {
            e.insert(v);
            let g = self.generation.entry(row).or_insert(0);
            *g = g.wrapping_add(1);
        }
    }

    /// The cache generation of `row` (see [`Incoming::generation`]).
    pub(crate) fn generation(&self, row: usize) -> u32 {
        self.generation.get(&row).copied().unwrap_or(0)
    }

    /// Folds in the copies into this node the metadata service listed in
    /// answer to a poll that began while the node held table version
    /// `polled_at` (0: none yet): each listed copy is still to do; a mark
    /// made at or before `polled_at` that the list does not name is done
    /// (the list answers for that table or a later one, whose recovery
    /// plan holds every copy not yet reported done).
    pub(crate) fn polled(&mut self, polled_at: u64, listed: &HashSet<(usize, DiskId)>) {
        self.marks
            .retain(|k, v| *v > polled_at || listed.contains(k));
        for &(row, disk) in listed {
            self.mark(row, disk, polled_at);
        }
        // A poll answered before this node had a table may predate the
        // table it then fetched: it does not settle which rows are whole.
        if polled_at > 0 {
            self.known = true;
        }
    }

    /// Whether the copy of `row` into `disk` is whole: `Some(false)` while
    /// it is marked, `None` before the first poll under a table (a node
    /// that just started does not know which of its rows were being
    /// copied when it stopped).
    pub(crate) fn complete(&self, row: usize, disk: DiskId) -> Option<bool> {
        if self.marks.contains_key(&(row, disk)) {
            Some(false)
        } else if self.known {
            Some(true)
        } else {
            None
        }
    }
}

/// A running cluster node.
pub struct ClusterNode {
    /// The background workers (heartbeats, recovery, erasure coding,
    /// scrub, catch-up, …), one runner with one stop.
    pub(crate) workers: crate::workers::Workers,
    pub(crate) opts: NodeOptions,
    pub(crate) addr: String,
    pub(crate) http: Http,
    /// Row stores per device (None for a flash-tier device).
    pub(crate) stores: Vec<Option<Arc<RowStores>>>,
    identity: RwLock<Option<Identity>>,
    /// The process's one cluster map, shared with its coordinator
    /// ([`Running::coordinator`]): which rows are this node's, where the
    /// other replicas are.
    pub(crate) view: Arc<strata_client::ClusterView>,
    /// The metadata service's address fingerprint the map was fetched
    /// under (a peer that restarted at another address changes it).
    addresses_seen: AtomicU64,
    pub(crate) completed: Mutex<Vec<Transfer>>,
    pub(crate) completed_bytes: AtomicU64,
    pub(crate) running: Mutex<HashSet<(usize, DiskId)>>,
    pub(crate) finished: Mutex<HashSet<(usize, DiskId)>>,
    /// The listing index (`DATA/listing.redb`), once opened at start.
    pub(crate) index: std::sync::OnceLock<Arc<crate::index::ListingIndex>>,
    /// Which of this node's rows are still being copied into it.
    incoming: Mutex<Incoming>,
    pub(crate) recovery_permits: Arc<Semaphore>,
    pub(crate) export_permits: Arc<Semaphore>,
    pub(crate) scrub_report: Mutex<Option<ScrubReport>>,
    /// Serializes extends (atomic appends) led by this node.
    pub(crate) extend_lock: tokio::sync::Mutex<()>,
    /// When the disk's recovery bandwidth is next free (leaky bucket).
    pacer: Mutex<Instant>,
    /// Counters, rendered on `GET /metrics` (strata-node's).
    pub(crate) metrics: Arc<Metrics>,
    /// The RAM object cache in front of the row stores.
    pub(crate) ram: Option<RamCache>,
    /// The flash read cache of disk-resident records.
    pub(crate) fcache: Option<Arc<strata_node::flashcache::FlashCache>>,
    /// Each part's recently written segments (RAM cache admission
    /// `recent`), kept by the tier mover, by [`crate::rows::part_id`].
    pub(crate) recent: Mutex<HashMap<usize, Arc<parking_lot::RwLock<HashSet<u64>>>>>,
    /// The tier plan in force and its version at the metadata service.
    pub(crate) plan: RwLock<(u64, ActivePlan)>,
    /// Sampled request traces.
    pub(crate) tracer: Option<Tracer>,
    /// Reference bits of flash-resident objects (the LRU mover's).
    pub(crate) hot: strata_node::tiers::HotBits,
    /// Bytes the flash tier may hold.
    pub(crate) flash_capacity: u64,
    /// Old row directories removed after their rows moved away.
    pub(crate) rows_removed: AtomicU64,
    /// Records found unreadable on a read and rewritten from a peer.
    pub(crate) read_repairs: AtomicU64,
    /// Read repairs under way (row, bucket, key): one at a time per name.
    pub(crate) repairing: Mutex<HashSet<(usize, String, String)>>,
    /// Whether reads run on the runtime's threads just now.
    pub(crate) inline_reads: InlineReads,
    /// The write-probability draw of each workload.
    pub(crate) draws: Mutex<HashMap<u32, strata_node::tiers::WriteDraw>>,
    /// The id of each workload (bucket) in this node's traces, dense from
    /// 1 in order of first use; every trace file names them (a plan matches
    /// workloads by name).
    workload_ids: Mutex<HashMap<String, u32>>,
    /// The erasure-coded warm tier (stripe indexes, counters).
    pub(crate) ec: crate::ec::state::EcNode,
}

const TIMEOUT: Duration = Duration::from_secs(5);

/// A read slower than this sends reads to the blocking pool for a while:
/// far above a flash or page-cache read (~0.1 ms), above the few ms a
/// thread can lose to preemption on a busy machine.
const INLINE_READ_SLOW: Duration = Duration::from_millis(10);
/// How long reads stay on the blocking pool after a disk hit or a slow read.
const INLINE_READ_PAUSE: Duration = Duration::from_secs(1);

/// When reads may run on the runtime's threads: not for
/// [`INLINE_READ_PAUSE`] after a read found its record on disk or took
/// over [`INLINE_READ_SLOW`].
pub(crate) struct InlineReads {
    epoch: Instant,
    /// Nanoseconds since `epoch` until which reads go to the pool.
    closed_until: AtomicU64,
}

impl Default for InlineReads {
    fn default() -> Self {
        InlineReads {
            epoch: Instant::now(),
            closed_until: AtomicU64::new(0),
        }
    }
}

impl InlineReads {
    fn now(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Whether the next read may run inline.
    pub(crate) fn open(&self) -> bool {
        self.now() >= self.closed_until.load(Ordering::Relaxed)
    }

    /// Notes an inline read: one from disk or a slow one closes the gate.
    pub(crate) fn observe(&self, disk: bool, took: Duration) {
        if disk || took > INLINE_READ_SLOW {
            let until = self.now() + INLINE_READ_PAUSE.as_nanos() as u64;
            self.closed_until.fetch_max(until, Ordering::Relaxed);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn read<T>(m: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    match m.read() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn write<T>(m: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    match m.write() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl ClusterNode {
    /// This node's id and its first row disk, once registered.
    pub fn ids(&self) -> Option<(NodeId, DiskId)> {
        let g = read(&self.identity);
        let i = g.as_ref()?;
        let first = (0..i.disk_ids.len()).find(|&k| self.opts.in_rows(k))?;
        Some((i.node_id, i.disk_ids[first]))
    }

    /// This node's id and the id of every device, in device order.
    pub fn disk_ids(&self) -> Option<(NodeId, Vec<DiskId>)> {
        let g = read(&self.identity);
        g.as_ref().map(|i| (i.node_id, i.disk_ids.clone()))
    }

    /// Whether a replica of `row` on another node is live in the current
    /// table (false without a table).
    pub(crate) fn other_replica_live(&self, row: usize) -> bool {
        let (Some(m), Some((_, mine))) = (self.map(), self.disk_ids()) else {
            return false;
        };
        m.table.live_replicas(row).iter().any(|d| !mine.contains(d))
    }

    /// The row stores of this node's disk `disk`, if it is a row disk here.
    pub(crate) fn stores_of(&self, disk: DiskId) -> Option<Arc<RowStores>> {
        let g = read(&self.identity);
        let i = g.as_ref()?.disk_ids.iter().position(|&d| d == disk)?;
        self.stores.get(i)?.clone()
    }

    /// This node's disk in `row` of `table`, with its row stores.
    pub(crate) fn home_in(
        &self,
        table: &PlacementTable,
        row: usize,
    ) -> Option<(DiskId, Arc<RowStores>)> {
        if row >= table.row_count() {
            return None;
        }
        let d = {
            let g = read(&self.identity);
            let ids = &g.as_ref()?.disk_ids;
            table
                .row(row)
                .iter()
                .find_map(|d| ids.contains(d).then_some(*d))?
        };
        Some(d).and_then(|d| self.stores_of(d).map(|s| (d, s)))
    }

    /// Where `row` is kept here: the disk the current table puts it on, else
    /// any row disk that still has a directory for it (a row being drained
    /// away). Blocking.
    pub(crate) fn row_here(&self, row: usize) -> Option<Arc<RowStores>> {
        if let Some(m) = self.map() {
            if let Some((_, s)) = self.home_in(&m.table, row) {
                return Some(s);
            }
        }
        self.stores
            .iter()
            .flatten()
            .find(|s| s.existing(row).ok().flatten().is_some())
            .cloned()
    }

    pub(crate) fn map(&self) -> Option<Arc<Placement>> {
        self.view.current()
    }

    /// The table version this node serves with (0: none yet).
    pub fn table_version(&self) -> u64 {
        self.view.version()
    }

    /// The tier for a new record of `bucket`: flash with the bucket's write
    /// probability under the plan in force (Janus's insert-on-write, the
    /// rule strata-node applies), disk otherwise, when the flash tier is
    /// far over its bound (the mover lags), or when there is no flash tier.
    /// The id of `bucket`'s workload in this node's traces, named in the
    /// traces' names table before its first record (the lab prints bucket
    /// names).
    pub fn workload_id(&self, bucket: &str) -> u32 {
        let mut ids = lock(&self.workload_ids);
        if let Some(&id) = ids.get(bucket) {
            return id;
        }
        let id = ids.len() as u32 + 1;
        ids.insert(bucket.to_string(), id);
        if let Some(t) = &self.tracer {
            t.name_workload(id, bucket);
        }
        id
    }

    /// The tier plan's warm-tier rule for the row part `part` (a workload
    /// name, or the shared part): None, the plan says nothing (the
    /// cluster's `--ec-after`); Some(None), off; Some(Some(s)), s seconds.
    pub(crate) fn ec_after_of(&self, part: &str) -> Option<Option<f64>> {
        if part == strata_node::tiers::SHARED {
            return None;
        }
        let id = self.workload_id(part);
        let g = read(&self.plan);
        match g.1.entry(id, part)?.ec.as_ref()? {
            strata_plan::WarmTier::After { after_seconds } => Some(Some(*after_seconds)),
            strata_plan::WarmTier::Off(_) => Some(None),
        }
    }

    /// Whether the plan in force lists `bucket`'s workload: its records go
    /// to the workload's own part of each row (else to the shared part).
    pub(crate) fn own_part(&self, bucket: &str) -> bool {
        let id = self.workload_id(bucket);
        read(&self.plan).1.entry(id, bucket).is_some()
    }

    pub(crate) fn choose_tier(&self, bucket: &str) -> Tier {
        if self.opts.flash_tier().is_empty() {
            return Tier::Disk;
        }
        let id = self.workload_id(bucket);
        let (rule, own) = {
            let g = read(&self.plan);
            (g.1.rule(id, bucket), g.1.entry(id, bucket).is_some())
        };
        // The node's stratified draw (strata-node), one per workload.
        let to_flash = lock(&self.draws)
            .entry(id)
            .or_default()
            .next(rule.write_probability, &mut rand::rng());
        if !to_flash {
            return Tier::Disk;
        }
        let part = if own { bucket } else { SHARED };
        let have = self
            .metrics
            .workload(part)
            .flash_bytes
            .load(Ordering::Relaxed);
        let limit = rule.flash_bytes.unwrap_or(self.flash_capacity);
        if strata_node::tiers::flash_overflowing(limit, have, self.opts.segment_size) {
            return Tier::Disk;
        }
        Tier::Flash
    }

    /// The set of recently written segments of `part` (created on first use).
    fn recent_of(&self, part: &Arc<strata_store::Store>) -> Arc<parking_lot::RwLock<HashSet<u64>>> {
        lock(&self.recent)
            .entry(crate::rows::part_id(part))
            .or_default()
            .clone()
    }

    /// Whether the RAM cache may admit a record read from `segment` of
    /// part `part` (`--ram-admission recent`: only recently written
    /// segments, Haystack's rule; the mover refreshes the sets each pass).
    pub(crate) fn admits(&self, part: usize, segment: u64) -> bool {
        match self.opts.ram_admission {
            strata_node::RamAdmission::All => true,
            strata_node::RamAdmission::Recent => lock(&self.recent)
                .get(&part)
                .is_some_and(|r| r.read().contains(&segment)),
        }
    }

    /// Drops `id` from the RAM and flash read caches (a write or delete).
    pub(crate) fn forget(&self, id: strata_node::object::ObjectId) {
        if let Some(ram) = &self.ram {
            ram.remove(id);
        }
        if let Some(fc) = &self.fcache {
            fc.invalidate(id);
        }
    }

    /// The loaded tier plan (None: the default plan).
    pub(crate) fn plan_in_force(&self) -> Option<TierPlan> {
        read(&self.plan).1.plan.clone()
    }

    /// Bytes of flash the row stores hold (as of the mover's last pass).
    pub(crate) fn flash_used(&self) -> u64 {
        let mut names: Vec<String> = self
            .stores
            .iter()
            .flatten()
            .flat_map(|s| s.opened())
            .flat_map(|r| r.parts().into_iter().map(|(n, _)| n))
            .collect();
        names.sort();
        names.dedup();
        names
            .iter()
            .map(|n| self.metrics.workload(n).flash_bytes.load(Ordering::Relaxed))
            .sum()
    }

    /// Bytes the flash tier may hold now: its capacity, bounded by the sum
    /// of the loaded plan's flash bytes.
    pub(crate) fn flash_budget(&self) -> u64 {
        let g = read(&self.plan);
        match &g.1.plan {
            Some(p) => p
                .workloads
                .iter()
                .map(|w| w.flash_bytes)
                .sum::<u64>()
                .min(self.flash_capacity),
            None => self.flash_capacity,
        }
    }

    /// Fetches the map unless one newer than `seen` is already here
    /// (the view marks the rows a new table brings here before it is
    /// published: [`ClusterNode::arrived`]).
    pub(crate) async fn refresh_from(&self, seen: u64) -> Result<(), ClusterError> {
        self.view
            .refresh_from(seen)
            .await
            .map_err(|e| self.meta_err(e.to_string()))
    }

    /// Marks the rows `next` brings to a disk here that `old` did not put
    /// there as being copied, before any request is admitted under `next`
    /// (the recovery poll clears the mark once the copy is done).
    fn arrived(&self, old: Option<&Placement>, next: &Placement) {
        if let (Some(old), Some((_, ids))) = (old, self.disk_ids()) {
            lock(&self.incoming).arrived(&old.table, &next.table, &ids);
        }
    }

    /// Folds in a poll of this node's recovery tasks that began while it
    /// held table version `polled_at` (see [`Incoming::polled`]).
    pub(crate) fn note_tasks(&self, polled_at: u64, tasks: &[RecoveryTask]) {
        let listed: HashSet<(usize, DiskId)> = tasks
            .iter()
            .map(|t| (t.transfer.row, t.transfer.target))
            .collect();
        lock(&self.incoming).polled(polled_at, &listed);
    }

    /// Whether this node's copy of `row` (on the disk the current table
    /// puts it on here) holds every record acknowledged before that disk
    /// joined the row: `Some(false)` while the copy into it is still being
    /// made, `None` when this node has not yet learnt which of its rows
    /// are being copied (from its start to its first recovery poll).
    pub(crate) fn row_complete(&self, row: usize) -> Option<bool> {
        let m = self.map()?;
        // A row this table does not put here (one being drained away) is
        // a whole copy: it is what the new owner copies from.
        let Some((disk, _)) = self.home_in(&m.table, row) else {
            return Some(true);
        };
        // Copied and synced here, the report to the service on its way.
        if lock(&self.finished).contains(&(row, disk)) {
            return Some(true);
        }
        lock(&self.incoming).complete(row, disk)
    }

    /// The tag under which the RAM and flash read caches may hold and serve
    /// records of `row`: the row's cache generation, or `None` while this
    /// node's copy of the row is not known to be whole (the caches are
    /// bypassed then: neither read nor filled). An entry whose tag is not
    /// the current one was cached before the row last came to this node
    /// and may be older than a record acknowledged while it was away.
    pub(crate) fn cache_tag(&self, row: usize) -> Option<u32> {
        match self.row_complete(row) {
            Some(true) => Some(lock(&self.incoming).generation(row)),
            _ => None,
        }
    }

    /// Loads the tier plan of version `version` from the metadata service
    /// (404: the default plan).
    pub(crate) async fn reload_plan(&self, version: u64) -> Result<(), ClusterError> {
        let url = format!("http://{}/v1/tier-plan", self.opts.meta);
        let r = self
            .http
            .send(hyper::Method::GET, &url, None, bytes::Bytes::new(), TIMEOUT)
            .await
            .map_err(|reason| self.meta_err(reason))?;
        let plan = if r.status == hyper::StatusCode::NOT_FOUND {
            None
        } else if r.status.is_success() {
            let text = String::from_utf8_lossy(&r.body);
            Some(
                TierPlan::from_json(&text)
                    .map_err(|e| self.meta_err(format!("tier plan version {version}: {e}")))?,
            )
        } else {
            return Err(self.meta_err(format!("tier plan: {}", r.status)));
        };
        if let Some(p) = &plan {
            if let Err(e) = strata_node::plan::check(p, self.opts.max_workloads) {
                return Err(self.meta_err(format!("tier plan version {version} not applied: {e}")));
            }
        }
        *write(&self.plan) = (version, ActivePlan { plan });
        self.metrics.plan_loads.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn meta_err(&self, reason: String) -> ClusterError {
        ClusterError::Meta {
            addr: self.opts.meta.clone(),
            reason,
        }
    }

    fn identity_path(&self) -> PathBuf {
        self.opts.data.join("cluster-node.json")
    }

    /// The identity this node had ([`recover_identity`]).
    fn saved_identity(&self) -> Result<Option<Identity>, ClusterError> {
        let devices: Vec<PathBuf> = self.opts.devices.iter().map(|d| d.path.clone()).collect();
        recover_identity(&self.identity_path(), &devices)
    }

    /// Writes the identity everywhere it is kept ([`save_identity`]).
    fn save_identity(&self, id: &Identity) -> Result<(), ClusterError> {
        let devices: Vec<PathBuf> = self.opts.devices.iter().map(|d| d.path.clone()).collect();
        save_identity(id, &self.identity_path(), &devices)
    }

    /// Registers (or re-registers) every device with the metadata service.
    /// A node comes back as the identity it saved; it drops its rows only
    /// when the service answers that this identity was declared dead or
    /// removed (its rows were given to other disks and copied there). A
    /// new identity for a node whose devices hold rows, for any other
    /// reason, is refused: the rows would be another node's data lost.
    pub(crate) async fn register(&self) -> Result<(), ClusterError> {
        let saved = self.saved_identity()?;
        let req = RegisterRequest {
            addr: self.addr.clone(),
            disks: self
                .opts
                .devices
                .iter()
                .map(|d| DiskSpec {
                    tier: d.tier,
                    capacity_bytes: self.opts.capacity.unwrap_or_else(|| fs_size(&d.path)),
                    path: d.path.display().to_string(),
                })
                .collect(),
            node_id: saved.as_ref().map(|s| s.node_id),
            node_key: saved.as_ref().and_then(|s| s.node_key.clone()),
        };
        let devices = self.device_names();
        let moved = saved
            .as_ref()
            .is_some_and(|s| !s.devices.is_empty() && s.devices != devices);
        if moved && self.opts.cluster_of_one {
            return Err(ClusterError::Refused(format!(
                "the devices of this cluster of one changed (were {}, now {}): its rows are on \
                 the devices it had and no other node holds them; start it with those",
                saved
                    .as_ref()
                    .map_or(String::new(), |s| s.devices.join(", ")),
                devices.join(", ")
            )));
        }
        let resp: RegisterResponse = self
            .http
            .post_json(
                &format!("http://{}/v1/register", self.opts.meta),
                &req,
                TIMEOUT,
            )
            .await
            .map_err(|reason| self.meta_err(reason))?;
        if resp.disk_ids.len() != self.opts.devices.len() {
            return Err(self.meta_err(format!(
                "registration answered {} disk ids for {} devices",
                resp.disk_ids.len(),
                self.opts.devices.len()
            )));
        }
        let fresh = saved
            .as_ref()
            .is_none_or(|s| s.node_id != resp.node_id || s.disk_ids != resp.disk_ids);
        let rows: usize = self
            .stores
            .iter()
            .flatten()
            .map(|s| s.rows_on_disk().len())
            .sum();
        let declared_dead = matches!(
            resp.previous,
            Some(strata_meta::api::NodeState::Dead | strata_meta::api::NodeState::Removed)
        );
        // Rows go only when the service declared this node dead (or took
        // it out), and never in a cluster of one.
        let may_drop = declared_dead && !self.opts.cluster_of_one;
        if fresh && rows > 0 && !may_drop {
            let was = saved.as_ref().map_or_else(
                || "no identity could be read (see above)".to_string(),
                |s| format!("it was node {} with disks {:?}", s.node_id, s.disk_ids),
            );
            let answer = match resp.previous {
                Some(st) => format!("the service has that node as {st:?}"),
                None if saved.is_some() => "the service does not know that node".into(),
                None => "it named no node".into(),
            };
            return Err(ClusterError::Refused(format!(
                "the metadata service gave this node a new identity (node {}, disks {:?}) while \
                 its device directories hold {rows} rows: {was}, and {answer}. Its rows are \
                 kept; a node drops them only when the service declared it dead or removed. \
                 Start it with the devices and data directory it had, or against the metadata \
                 service that knows it",
                resp.node_id, resp.disk_ids
            )));
        }
        if fresh && rows > 0 {
            eprintln!(
                "strata server: this node was declared {:?} as node {}; its {rows} rows were \
                 given to other disks: dropping them and joining as node {}",
                resp.previous.unwrap_or(strata_meta::api::NodeState::Dead),
                saved.as_ref().map_or(0, |s| s.node_id.0),
                resp.node_id
            );
            for s in self.stores.iter().flatten() {
                for row in s.rows_on_disk() {
                    s.remove_row(row)?;
                }
            }
        }
        // A new key when the service made one; else the one this id had.
        let node_key = resp.node_key.clone().or_else(|| {
            saved
                .as_ref()
                .filter(|s| s.node_id == resp.node_id)
                .and_then(|s| s.node_key.clone())
        });
        let id = Identity {
            node_id: resp.node_id,
            disk_ids: resp.disk_ids,
            disk_id: None,
            meta: self.opts.meta.clone(),
            devices,
            node_key,
        };
        let unchanged = saved.as_ref().is_some_and(|s| {
            s.node_id == id.node_id
                && s.disk_ids == id.disk_ids
                && s.devices == id.devices
                && s.node_key == id.node_key
        }) && self.identity_copies_whole(&id);
        if !unchanged {
            self.save_identity(&id)?;
        }
        *write(&self.identity) = Some(id);
        let _ = self.refresh_from(0).await;
        Ok(())
    }

    /// Whether the identity file and every device's copy hold `id`.
    fn identity_copies_whole(&self, id: &Identity) -> bool {
        std::iter::once(self.identity_path())
            .chain(
                self.opts
                    .devices
                    .iter()
                    .map(|d| d.path.join(DEVICE_IDENTITY)),
            )
            .all(|p| {
                read_identity(&p).is_ok_and(|i| {
                    i.is_some_and(|i| {
                        i.node_id == id.node_id
                            && i.disk_ids == id.disk_ids
                            && i.devices == id.devices
                            && i.node_key == id.node_key
                    })
                })
            })
    }

    /// The device directories as `tier:path`, in order.
    fn device_names(&self) -> Vec<String> {
        self.opts
            .devices
            .iter()
            .map(|d| {
                let tier = format!("{:?}", d.tier).to_lowercase();
                format!("{tier}:{}", d.path.display())
            })
            .collect()
    }

    /// Reserves `bytes` of the disk's recovery bandwidth `rate` (bytes/s)
    /// and returns how long to wait before they are due.
    pub(crate) fn pace(&self, bytes: u64, rate: u64) -> Duration {
        let mut next = lock(&self.pacer);
        let now = Instant::now();
        let start = (*next).max(now);
        *next = start + Duration::from_secs_f64(bytes as f64 / rate.max(1) as f64);
        start - now
    }

    /// The devices that do not answer: a small file written and read back
    /// in each device directory.
    pub(crate) fn failed_devices(&self) -> Vec<usize> {
        (0..self.opts.devices.len())
            .filter(|&i| {
                let p = self.opts.devices[i].path.join(".health-probe");
                // A probe of the device, relied on for nothing after a
                // power cut: written plainly, never synced.
                #[allow(clippy::disallowed_methods)]
                let wrote = std::fs::write(&p, b"ok").is_ok();
                !(wrote && std::fs::read(&p).is_ok_and(|b| b == b"ok"))
            })
            .collect()
    }

    /// Whether every device answers.
    pub(crate) fn disk_ok(&self) -> bool {
        self.failed_devices().is_empty()
    }

    /// Disks to report broken: every failed device; and when a flash-tier
    /// device fails, every row disk too (the newest needles of their rows
    /// were on it).
    fn failed_disks(&self, ids: &[DiskId]) -> Vec<DiskId> {
        let bad = self.failed_devices();
        let mut out: Vec<DiskId> = bad.iter().filter_map(|&i| ids.get(i).copied()).collect();
        if bad.iter().any(|&i| !self.opts.in_rows(i)) {
            out.extend(
                (0..ids.len())
                    .filter(|&i| self.opts.in_rows(i))
                    .map(|i| ids[i]),
            );
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Removes the directories of rows that moved away from this node's
    /// disks, once the metadata service's current table (the one this node
    /// serves with) no longer puts them here and no copy of them is still
    /// to do: the new owner then holds the row durably (it reported the
    /// copy done after its writes were synced). Blocking.
    fn remove_moved_rows(&self, table_version: u64, in_recovery: &[usize]) {
        let Some(m) = self.map() else { return };
        if m.table.version() != table_version {
            return;
        }
        let Some((_, ids)) = self.disk_ids() else {
            return;
        };
        let busy: HashSet<usize> = in_recovery.iter().copied().collect();
        if !lock(&self.running).is_empty() {
            return;
        }
        for (i, s) in self.stores.iter().enumerate() {
            let (Some(s), Some(&disk)) = (s, ids.get(i)) else {
                continue;
            };
            for row in s.rows_on_disk() {
                let mine = row < m.table.row_count() && m.table.row(row).contains(&disk);
                if mine || busy.contains(&row) {
                    continue;
                }
                match s.remove_row(row) {
                    Ok(()) => {
                        self.rows_removed.fetch_add(1, Ordering::Relaxed);
                        eprintln!(
                            "strata server: row {row} left disk {disk} at table version {table_version}; its directory is removed"
                        );
                    }
                    Err(e) => eprintln!("strata server: cannot remove row {row}: {e}"),
                }
            }
        }
    }

    pub(crate) async fn heartbeat_loop(
        self: Arc<Self>,
        every: Duration,
        mut ctx: crate::workers::Ctx,
    ) {
        let mut tick = tokio::time::interval(every);
        // The disks the last heartbeat reported failed (logged on change).
        let mut reported: Vec<DiskId> = Vec::new();
        while ctx.tick(&mut tick).await {
            let Some((node_id, ids)) = self.disk_ids() else {
                let _ = self.register().await;
                continue;
            };
            let completed: Vec<Transfer> = std::mem::take(&mut *lock(&self.completed));
            let bytes = self.completed_bytes.swap(0, Ordering::Relaxed);
            let scrub = lock(&self.scrub_report).take();
            // The devices' checks touch the disks: on the blocking pool,
            // not in place (block_in_place handed the runtime's worker to
            // another thread at every heartbeat).
            let failed = {
                let (me, ids) = (self.clone(), ids.clone());
                tokio::task::spawn_blocking(move || me.failed_disks(&ids))
                    .await
                    .unwrap_or_default()
            };
            if failed != reported {
                let names = |d: &[DiskId]| {
                    d.iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                let new: Vec<DiskId> = failed
                    .iter()
                    .copied()
                    .filter(|d| !reported.contains(d))
                    .collect();
                if !new.is_empty() {
                    eprintln!(
                        "strata server: disk(s) {} failed (a device did not take a write and read it back, or the flash in front of them failed): reported to the metadata service",
                        names(&new)
                    );
                }
                reported = failed.clone();
            }
            let req = HeartbeatRequest {
                node_id,
                node_key: read(&self.identity)
                    .as_ref()
                    .and_then(|i| i.node_key.clone()),
                failed_disks: failed,
                completed: completed.clone(),
                recovery_bytes: bytes,
                scrub: scrub.clone(),
                bytes: Some(strata_meta::api::NodeBytes {
                    stored: self.ec.stored_bytes.load(Ordering::Relaxed),
                    logical: self.ec.logical_bytes.load(Ordering::Relaxed),
                }),
            };
            let url = format!("http://{}/v1/heartbeat", self.opts.meta);
            match self
                .http
                .post_json::<_, HeartbeatResponse>(&url, &req, TIMEOUT)
                .await
            {
                Ok(r) => {
                    if !r.member {
                        eprintln!("strata server: the cluster no longer counts this node as a member; re-registering");
                        // The saved identity stays: registering with it
                        // lets the service say whether it was declared
                        // dead (then the rows go) or never known.
                        *write(&self.identity) = None;
                        continue;
                    }
                    // A newer table, or a peer at a new address (a restart
                    // on another port leaves the table version alone).
                    if (r.table_version > self.table_version()
                        || r.addresses != self.addresses_seen.load(Ordering::Relaxed))
                        && self.refresh_from(self.table_version()).await.is_ok()
                    {
                        self.addresses_seen.store(r.addresses, Ordering::Relaxed);
                    }
                    if r.plan_version != read(&self.plan).0 {
                        if let Err(e) = self.reload_plan(r.plan_version).await {
                            eprintln!("strata server: tier plan not reloaded: {e}");
                        }
                    }
                    if completed.is_empty() {
                        let node = self.clone();
                        let _ = tokio::task::spawn_blocking(move || {
                            node.remove_moved_rows(r.table_version, &r.rows_in_recovery)
                        })
                        .await;
                    }
                }
                Err(_) => {
                    // Try again next beat with the same reports.
                    lock(&self.completed).extend(completed);
                    self.completed_bytes.fetch_add(bytes, Ordering::Relaxed);
                    if let Some(s) = scrub {
                        lock(&self.scrub_report).get_or_insert(s);
                    }
                }
            }
        }
    }
}

/// The one tier mover (strata-node's) over the row stores: every row's
/// part of a workload is one member of the workload's group.
impl strata_node::mover::Tiered for ClusterNode {
    fn groups(&self) -> Vec<strata_node::mover::Group> {
        let mut by_name: HashMap<String, Vec<strata_node::mover::Member>> = HashMap::new();
        for (disk, rows) in self.stores.iter().enumerate() {
            let Some(rows) = rows else { continue };
            for r in rows.opened() {
                for (name, store) in r.parts() {
                    let key =
                        xxhash_rust::xxh3::xxh3_64(format!("{disk}/{}/{name}", r.row()).as_bytes());
                    let (rs, part) = (r.clone(), store.clone());
                    let recent = self.recent_of(&part);
                    by_name
                        .entry(name)
                        .or_default()
                        .push(strata_node::mover::Member {
                            key,
                            store,
                            first_disk: 0,
                            disks: 1,
                            recent: Some(recent),
                            reappend: Arc::new(move |segment, needles| {
                                rs.reappend(part.clone(), segment, needles)
                            }),
                        });
                }
            }
        }
        let plan = read(&self.plan).1.clone();
        by_name
            .into_iter()
            .map(|(name, members)| {
                let rule = if name == SHARED {
                    plan.rule(SHARED_ID, SHARED)
                } else {
                    plan.rule(self.workload_id(&name), &name)
                };
                strata_node::mover::Group {
                    rule,
                    counters: self.metrics.workload(&name),
                    members,
                }
            })
            .collect()
    }

    fn settings(&self) -> strata_node::mover::MoverSettings {
        strata_node::mover::MoverSettings {
            both_tiers: !self.opts.flash_tier().is_empty(),
            flash_capacity: self.flash_capacity,
            flash_burst: self.opts.flash_burst,
            bytes_per_s: self.opts.mover_bytes_per_sec,
            recent_window: self.opts.recent_window,
            interval: self.opts.mover_interval,
        }
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn hot(&self) -> &strata_node::tiers::HotBits {
        &self.hot
    }

    fn stopped(&self) -> bool {
        self.workers.stopping()
    }
}

/// Size of the filesystem holding `dir` (0 if unknown).
fn fs_size(dir: &Path) -> u64 {
    rustix::fs::statvfs(dir)
        .map(|st| st.f_blocks.saturating_mul(st.f_frsize))
        .unwrap_or(0)
}

/// 90% of the free space of the filesystems of `dirs` (each counted once).
fn free_space(dirs: &[PathBuf]) -> u64 {
    strata_node::tiers::free_space(dirs)
}

/// Gives each disk device whose reserve was used back its reserve once
/// compaction has freed room for it (every second).
pub(crate) async fn refill_reserves(node: Arc<ClusterNode>, mut ctx: crate::workers::Ctx) {
    let reserves: Vec<_> = node
        .stores
        .iter()
        .flatten()
        .filter_map(|s| s.reserve().cloned())
        .collect();
    if reserves.is_empty() {
        return;
    }
    while ctx.sleep(Duration::from_secs(1)).await {
        for r in &reserves {
            if r.is_depleted() {
                let r = r.clone();
                let whole = tokio::task::spawn_blocking(move || r.refill()).await;
                if matches!(whole, Ok(true)) {
                    eprintln!("strata server: the space kept back for deletes is whole again; writes are taken again");
                }
            }
        }
    }
}

impl ClusterNode {
    /// Opens the node over `opts` that serves at `bound` (its listener's
    /// address, unless `--advertise` names another): makes its
    /// directories, opens a row-store set per row device with its space
    /// reserve, the RAM cache, the trace writer, the flash read cache and
    /// the flash tier's capacity. It has no identity and no table until
    /// it registers.
    pub(crate) fn open(opts: NodeOptions, bound: String) -> Result<Arc<ClusterNode>, ClusterError> {
        for d in std::iter::once(&opts.data).chain(opts.devices.iter().map(|d| &d.path)) {
            strata_fs::create_dir_all(d).map_err(|source| ClusterError::Io {
                path: d.display().to_string(),
                source,
            })?;
        }
        let flash = opts.flash_tier();
        let metrics = Arc::new(Metrics::default());
        let stores = (0..opts.devices.len())
            .map(|i| {
                opts.in_rows(i).then(|| {
                    let dir = &opts.devices[i].path;
                    let fs = fs_size(dir);
                    let size = opts
                        .space_reserve
                        .unwrap_or_else(|| crate::reserve::default_size(fs, opts.segment_size));
                    let mut rs = RowStores::new(
                        dir,
                        &flash,
                        crate::rows::Sizes {
                            segment: opts.segment_size,
                            prepare_ahead: opts.prepare_ahead,
                        },
                    )
                    .with_metrics(metrics.clone());
                    if size > 0 {
                        rs = rs.with_reserve(Arc::new(crate::reserve::Reserve::open(
                            dir,
                            size,
                            crate::reserve::default_slack(fs, opts.segment_size),
                        )));
                    }
                    Arc::new(rs)
                })
            })
            .collect();
        let ram = (opts.ram_cache_bytes > 0)
            .then(|| RamCache::new(&opts.ram_policy, opts.ram_cache_bytes, metrics.clone()));
        let tracer = match &opts.trace_dir {
            Some(d) => Some(
                Tracer::start_with(
                    d,
                    &strata_node::trace::TraceConfig {
                        rate: opts.trace_sample,
                        rotate_records: opts.trace_rotate,
                        rotate_after: opts.trace_rotate_after,
                    },
                    metrics.clone(),
                )
                .map_err(|source| ClusterError::Io {
                    path: d.display().to_string(),
                    source,
                })?,
            ),
            None => None,
        };
        let flash_capacity = remembered_flash_capacity(&opts.data, opts.flash_capacity, &flash)?;
        let fcache = match &opts.flash_cache {
            Some(fc) => Some(
                strata_node::flashcache::FlashCache::open_on(
                    &flash,
                    opts.segment_size,
                    (opts.gateway.max_object_size.min(16 << 20)) + 4096,
                    fc,
                    metrics.clone(),
                )
                .map_err(|reason| ClusterError::Io {
                    path: "flash read cache".into(),
                    source: std::io::Error::other(reason),
                })?,
            ),
            None => None,
        };
        let http = Http::new();
        Ok(Arc::new_cyclic(|me: &std::sync::Weak<ClusterNode>| {
            ClusterNode {
                view: {
                    let me = me.clone();
                    Arc::new(strata_client::ClusterView::new(
                        &opts.meta,
                        http.clone(),
                        TIMEOUT,
                        Some(Box::new(move |old, next| {
                            if let Some(n) = me.upgrade() {
                                n.arrived(old, next);
                            }
                        })),
                    ))
                },
                workers: crate::workers::Workers::new(),
                fcache,
                recent: Mutex::new(HashMap::new()),
                addr: opts.advertise.clone().unwrap_or(bound),
                http,
                stores,
                identity: RwLock::new(None),
                addresses_seen: AtomicU64::new(0),
                completed: Mutex::new(Vec::new()),
                completed_bytes: AtomicU64::new(0),
                running: Mutex::new(HashSet::new()),
                finished: Mutex::new(HashSet::new()),
                index: std::sync::OnceLock::new(),
                incoming: Mutex::new(Incoming::default()),
                recovery_permits: Arc::new(Semaphore::new(opts.recovery_streams.max(1))),
                export_permits: Arc::new(Semaphore::new(opts.recovery_streams.max(1) * 2)),
                scrub_report: Mutex::new(None),
                pacer: Mutex::new(Instant::now()),
                extend_lock: tokio::sync::Mutex::new(()),
                metrics,
                ram,
                plan: RwLock::new((0, ActivePlan::default_plan())),
                tracer,
                hot: strata_node::tiers::HotBits::new(24),
                flash_capacity,
                rows_removed: AtomicU64::new(0),
                read_repairs: AtomicU64::new(0),
                repairing: Mutex::new(HashSet::new()),
                inline_reads: InlineReads::default(),
                draws: Mutex::new(HashMap::new()),
                workload_ids: Mutex::new(HashMap::new()),
                ec: crate::ec::state::EcNode::default(),
                opts,
            }
        }))
    }

    /// Its counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// The table a call of version `v` is served under: this node's, when
    /// it is `v` (a newer `v` makes it catch up first), else the refusal
    /// (stale, not known here yet, or no table at all).
    async fn table_at(&self, v: u64) -> Result<Arc<Placement>, Refusal> {
        if v > self.table_version() {
            // The client saw a newer table first: catch up.
            let _ = self.refresh_from(self.table_version()).await;
        }
        let Some(map) = self.map() else {
            return Err(Refusal::Unavailable(
                "this node has no placement table yet".into(),
            ));
        };
        let mine = map.table.version();
        if v < mine {
            return Err(Refusal::Stale { at: mine });
        }
        if v > mine {
            return Err(Refusal::Unavailable(format!(
                "table version {v} is not known here yet (at {mine}); retry"
            )));
        }
        Ok(map)
    }

    /// Checks a call's table version `v` and that `row` is on this node;
    /// returns this node's disk in the row and its row stores.
    pub(crate) async fn admit(
        &self,
        v: u64,
        row: usize,
    ) -> Result<(DiskId, Arc<RowStores>), Refusal> {
        let map = self.table_at(v).await?;
        self.admit_row(&map.table, row)
    }

    /// [`ClusterNode::admit`] for a call on `bucket`'s listing index: the
    /// version is current and the bucket's index row is on this node (a
    /// coordinator with an old table cannot change or list an index this
    /// node no longer holds, or holds only since a newer table).
    pub(crate) async fn admit_index(&self, v: u64, bucket: &str) -> Result<(), Refusal> {
        let map = self.table_at(v).await?;
        self.admit_row(&map.table, strata_proto::index_row(&map.table, bucket))
            .map(drop)
    }

    /// Whether `row` of the current `table` is on this node.
    fn admit_row(
        &self,
        table: &PlacementTable,
        row: usize,
    ) -> Result<(DiskId, Arc<RowStores>), Refusal> {
        if row >= table.row_count() {
            return Err(Refusal::Bad(format!(
                "row {row} does not exist (table has {})",
                table.row_count()
            )));
        }
        if self.ids().is_none() {
            return Err(Refusal::Unavailable("not registered".into()));
        }
        self.home_in(table, row).ok_or_else(|| {
            Refusal::NotHere(format!(
                "row {row} is not on this node in table version {}",
                table.version()
            ))
        })
    }

    /// Whether it is a cluster of one.
    pub fn cluster_of_one(&self) -> bool {
        self.opts.cluster_of_one
    }

    /// Its metadata service's address.
    pub fn meta(&self) -> &str {
        &self.opts.meta
    }
}

/// The file in the data directory that remembers the flash capacity.
const FLASH_CAPACITY_FILE: &str = "flash-capacity.json";

/// The flash tier's capacity: `--flash-capacity` when given (and then
/// remembered), else the figure remembered at an earlier start, else — at
/// the first start — 90% of the flash file systems' free space plus what
/// Strata already holds there, remembered from then on (re-deriving it
/// from free space at every start would shrink it as the tier fills).
fn remembered_flash_capacity(
    data: &Path,
    given: Option<u64>,
    flash: &[PathBuf],
) -> Result<u64, ClusterError> {
    let path = data.join(FLASH_CAPACITY_FILE);
    let io = |source| ClusterError::Io {
        path: path.display().to_string(),
        source,
    };
    let remembered = match std::fs::read(&path) {
        Ok(b) => Some(
            serde_json::from_slice::<serde_json::Value>(&b)
                .ok()
                .and_then(|v| v["bytes"].as_u64())
                .ok_or_else(|| {
                    io(std::io::Error::other(
                        "not a flash capacity record (delete it to derive the capacity again)",
                    ))
                })?,
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(io(e)),
    };
    let (bytes, source) = match (given, remembered) {
        (Some(b), _) => (b, "--flash-capacity"),
        (None, Some(b)) => return Ok(b),
        (None, None) if flash.is_empty() => return Ok(0),
        (None, None) => {
            let held: u64 = flash.iter().map(|d| tree_size(d)).sum();
            (free_space(flash) + held, "free space at the first start")
        }
    };
    if remembered != Some(bytes) {
        let body = serde_json::json!({ "bytes": bytes, "source": source }).to_string();
        strata_fs::write_atomic(&path, body.as_bytes()).map_err(io)?;
    }
    Ok(bytes)
}

/// Bytes of the files under `dir`.
fn tree_size(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_size(&e.path()),
            Ok(_) => e.metadata().map_or(0, |m| m.len()),
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_placement::DiskState;

    /// A table over four single-disk nodes, and the one after disk 0 is
    /// declared dead (its rows go to the other three).
    fn tables() -> (PlacementTable, PlacementTable) {
        let disks: Vec<(DiskId, NodeId)> = (0..4).map(|i| (DiskId(i), NodeId(i))).collect();
        let t1 = PlacementTable::build(&disks, 3, 1 << 20, 7).expect("table");
        let (t2, _) = t1
            .replace_disks(&[DiskId(0)], DiskState::Dead)
            .expect("replace");
        (t1, t2)
    }

    /// Rows `next` puts on `disk` that `prev` did not.
    fn arrivals(prev: &PlacementTable, next: &PlacementTable, disk: DiskId) -> Vec<usize> {
        (0..next.row_count())
            .filter(|&r| next.row(r).contains(&disk) && !prev.row(r).contains(&disk))
            .collect()
    }

    #[test]
    fn a_row_a_new_table_brings_is_incomplete_until_a_later_poll_omits_it() {
        let (t1, t2) = tables();
        let d = DiskId(3);
        let came = arrivals(&t1, &t2, d);
        assert!(!came.is_empty(), "disk 3 takes some of disk 0's rows");
        let kept: Vec<usize> = t1.rows_of_disk(d);
        let mut inc = Incoming::default();
        inc.polled(t1.version(), &HashSet::new());
        inc.arrived(&t1, &t2, &[d]);
        for &r in &came {
            assert_eq!(inc.complete(r, d), Some(false), "row {r} arrived");
        }
        for &r in &kept {
            assert_eq!(inc.complete(r, d), Some(true), "row {r} was here before");
        }
        // A poll that began under the old table answers for that table: it
        // does not know the new copies, and must not clear their marks.
        inc.polled(t1.version(), &HashSet::new());
        for &r in &came {
            assert_eq!(inc.complete(r, d), Some(false), "row {r} after an old poll");
        }
        // Under the new table, the service lists the copies not done yet.
        let (first, rest) = came.split_first().expect("one row at least");
        let listed: HashSet<(usize, DiskId)> = rest.iter().map(|&r| (r, d)).collect();
        inc.polled(t2.version(), &listed);
        assert_eq!(inc.complete(*first, d), Some(true), "row {first} copied");
        for &r in rest {
            assert_eq!(inc.complete(r, d), Some(false), "row {r} still listed");
        }
        inc.polled(t2.version(), &HashSet::new());
        for &r in &came {
            assert_eq!(inc.complete(r, d), Some(true), "row {r} copied");
        }
    }

    #[test]
    fn a_node_that_just_started_knows_nothing_until_a_poll_under_a_table() {
        let (_, t2) = tables();
        let d = DiskId(3);
        let mut inc = Incoming::default();
        assert_eq!(inc.complete(0, d), None, "no poll yet");
        // A poll answered before the node had a table may predate it.
        let listed: HashSet<(usize, DiskId)> = [(5, d)].into_iter().collect();
        inc.polled(0, &listed);
        assert_eq!(inc.complete(5, d), Some(false), "a listed copy is pending");
        assert_eq!(inc.complete(0, d), None, "the rest is not known yet");
        // The copy it was making when it stopped is listed again.
        inc.polled(t2.version(), &listed);
        assert_eq!(inc.complete(5, d), Some(false), "still being copied");
        assert_eq!(inc.complete(0, d), Some(true), "not being copied");
        inc.polled(t2.version(), &HashSet::new());
        assert_eq!(inc.complete(5, d), Some(true), "the copy finished");
    }
    #[test]
    fn a_row_that_comes_back_gets_a_new_cache_generation() {
        let (t1, t2) = tables();
        let d = DiskId(3);
        let came = arrivals(&t1, &t2, d);
        let kept: Vec<usize> = t1.rows_of_disk(d);
        let (&r, _) = came.split_first().expect("one row at least");
        let mut inc = Incoming::default();
        inc.polled(t1.version(), &HashSet::new());
        let before: Vec<u32> = (0..t2.row_count()).map(|x| inc.generation(x)).collect();
        inc.arrived(&t1, &t2, &[d]);
        assert_ne!(
            inc.generation(r),
            before[r],
            "row {r} arrived: what was cached is stale"
        );
        for &k in &kept {
            assert_eq!(
                inc.generation(k),
                before[k],
                "row {k} stayed: its cache entries hold"
            );
        }
        // The copy finishes: the generation stays (entries cached from the
        // whole copy are good).
        inc.polled(t2.version(), &HashSet::new());
        let settled = inc.generation(r);
        assert_eq!(inc.complete(r, d), Some(true));
        // The same table seen again brings nothing new.
        inc.arrived(&t2, &t2, &[d]);
        assert_eq!(inc.generation(r), settled);
        // The row leaves (t2 -> t1 gives it back to disk 0) and comes back:
        // a new generation, so an entry cached before it left is not served.
        inc.arrived(&t2, &t1, &[d]);
        assert_eq!(inc.generation(r), settled, "leaving marks nothing");
        inc.arrived(&t1, &t2, &[d]);
        assert_ne!(inc.generation(r), settled, "row {r} came back");
        // A copy the service lists that this node never saw arrive (it
        // restarted meanwhile) is a new generation too.
        let mut inc = Incoming::default();
        let listed: HashSet<(usize, DiskId)> = [(r, d)].into_iter().collect();
        inc.polled(t2.version(), &listed);
        assert_ne!(inc.generation(r), 0);
    }
}
