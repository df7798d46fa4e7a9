//! The node: per-workload segment stores over the flash and disk device
//! directories, the group-commit writers, the caches, the plan in force and
//! the request paths the HTTP layer calls.

use crate::flashcache::FlashCache;
use crate::metrics::{Metrics, Served, WorkloadCounters};
use crate::object::{full_name, object_id, ObjectHeader, ObjectId, MAX_NAME_BYTES};
use crate::plan::{ActivePlan, Rule};
use crate::ramcache::{cache_key, Cached, RamCache};
use crate::trace::Tracer;
use bytes::Bytes;
use parking_lot::{Mutex, RwLock};
use rand::Rng;
use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use strata_policy::PolicySpec;
use strata_provision::TierPlan;
use strata_store::{PutItem, Store, StoreConfig, StoreError, StoredNeedle, Tier};

/// Which objects the RAM cache may admit (Haystack §3.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RamAdmission {
    /// Every object read from flash or disk.
    All,
    /// Only objects in write-enabled, recently written segments (the active
    /// segment of a device, or one sealed less than the recent window ago):
    /// Haystack's rule, since those are read most.
    Recent,
}

/// Everything a node is started with.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// Node metadata (the workload table) lives here.
    pub data: PathBuf,
    /// Flash device directories.
    pub flash: Vec<PathBuf>,
    /// Disk device directories.
    pub disk: Vec<PathBuf>,
    /// Bytes the flash tier may hold over all workloads (the default plan's
    /// single FIFO, and the bound of any plan).
    pub flash_capacity: u64,
    /// RAM object cache bytes (0: none).
    pub ram_cache_bytes: u64,
    /// RAM cache policy.
    pub ram_policy: PolicySpec,
    /// RAM cache admission rule.
    pub ram_admission: RamAdmission,
    /// How long a sealed segment counts as recently written, for
    /// [`RamAdmission::Recent`].
    pub recent_window: Duration,
    /// Flash read cache bytes (0: none).
    pub flash_cache_bytes: u64,
    /// Flash read cache policy.
    pub flash_cache_policy: PolicySpec,
    /// Bound on bytes the flash read cache writes per second.
    pub flash_cache_write_bytes_per_s: u64,
    /// A tier plan to load at start (and on SIGHUP).
    pub plan_path: Option<PathBuf>,
    /// Whether a GET without a cookie is a 404.
    pub require_cookies: bool,
    /// Largest object accepted.
    pub max_object_bytes: u64,
    /// Segment size of the stores (the tier mover's unit).
    pub segment_bytes: u64,
    /// How often the tier mover looks at the tiers.
    pub mover_interval: Duration,
    /// Bound on bytes the tier mover copies per second.
    pub mover_bytes_per_s: u64,
    /// How far above its plan's `flash_bytes` a workload may go, as a
    /// fraction of them, while the plan's TTL is what evicts it: the bytes
    /// a TTL keeps swing with the arrivals around the plan's average, and
    /// cutting them at the average would evict data younger than the TTL
    /// the prediction counted on. The node's flash capacity bounds the sum
    /// regardless.
    pub flash_burst: f64,
    /// Where sampled request traces go (`None`: no traces).
    pub trace_dir: Option<PathBuf>,
    /// Fraction of objects whose requests are traced (sampled by object id).
    pub trace_sample: f64,
    /// Records per trace file before it rotates.
    pub trace_rotate_records: u64,
    /// How long a trace file stays open before it rotates (a file is
    /// readable once rotated; a crash leaves at most this much unfinished,
    /// which the next start finishes).
    pub trace_rotate_after: Duration,
    /// Most objects per group commit.
    pub max_batch_objects: usize,
    /// Most workloads a tier plan may list (each listed workload gets a
    /// segment store of its own: a writer thread and its files).
    pub max_workloads: usize,
    /// The admin token of the control endpoints (`/_admin/*`, `/metrics`;
    /// None: they are off).
    pub admin_token: Option<String>,
}

impl NodeConfig {
    /// 90% of the free space of the filesystems of `dirs` (each counted
    /// once), the default flash capacity.
    pub fn free_space(dirs: &[PathBuf]) -> u64 {
        let mut seen = HashSet::new();
        let mut total = 0u64;
        for d in dirs {
            let probe = if d.exists() {
                d.clone()
            } else {
                d.parent()
                    .map(Path::to_path_buf)
                    .unwrap_or_else(|| PathBuf::from("."))
            };
            if let Ok(st) = rustix::fs::statvfs(&probe) {
                if seen.insert(st.f_fsid) {
                    total += st.f_bavail.saturating_mul(st.f_frsize) / 10 * 9;
                }
            }
        }
        total
    }

    /// A config with working defaults over `data`: flash in `data/flash`,
    /// disk in `data/disk`.
    pub fn new(data: impl Into<PathBuf>) -> NodeConfig {
        let data = data.into();
        NodeConfig {
            flash: vec![data.join("flash")],
            disk: vec![data.join("disk")],
            data,
            flash_capacity: 1 << 30,
            ram_cache_bytes: 64 << 20,
            ram_policy: PolicySpec::MidpointLru { percentile: 75.0 },
            ram_admission: RamAdmission::All,
            recent_window: Duration::from_secs(600),
            flash_cache_bytes: 0,
            flash_cache_policy: PolicySpec::MidpointLru { percentile: 75.0 },
            flash_cache_write_bytes_per_s: 16 << 20,
            plan_path: None,
            require_cookies: false,
            max_object_bytes: 64 << 20,
            segment_bytes: 64 << 20,
            mover_interval: Duration::from_millis(100),
            mover_bytes_per_s: 256 << 20,
            flash_burst: 0.25,
            trace_dir: None,
            trace_sample: 0.1,
            trace_rotate_records: 1_000_000,
            trace_rotate_after: Duration::from_secs(60),
            max_batch_objects: 1024,
            max_workloads: 1024,
            admin_token: None,
        }
    }
}

/// A request's failure, in the client's terms (the HTTP layer maps each to
/// a status code).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// Absent, deleted, wrong cookie, or missing cookie when required: all
    /// look the same on purpose.
    #[error("no such object")]
    NotFound,
    /// A malformed request.
    #[error("{0}")]
    BadRequest(String),
    /// The object is larger than the node accepts.
    #[error("object of {size} bytes is over the maximum of {max} bytes")]
    TooLarge {
        /// Its size.
        size: u64,
        /// The maximum.
        max: u64,
    },
    /// The devices are full.
    #[error("insufficient storage: {0}")]
    Full(String),
    /// The node's store failed (the client is not at fault).
    #[error("store error: {0}")]
    Store(String),
    /// A plan was rejected.
    #[error("bad tier plan: {0}")]
    BadPlan(String),
    /// The node could not start.
    #[error("{0}")]
    Startup(String),
}

fn store_err(e: StoreError) -> NodeError {
    store_err_ref(&e)
}

fn store_err_ref(e: &StoreError) -> NodeError {
    match e {
        StoreError::ObjectTooLarge { size, max } => NodeError::TooLarge {
            size: *size,
            max: *max,
        },
        e if e.is_out_of_space() => NodeError::Full(e.to_string()),
        e => NodeError::Store(e.to_string()),
    }
}

/// One object of a write.
pub struct NewObject {
    /// Bucket.
    pub bucket: String,
    /// Name within the bucket.
    pub name: String,
    /// The object's bytes.
    pub data: Bytes,
}

/// What a write answered for one object.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Written {
    /// The name.
    pub name: String,
    /// The cookie, 8 hex digits.
    pub cookie: String,
    /// Path and query to read it back.
    pub url: String,
    /// `flash` or `disk`.
    pub tier: &'static str,
}

/// An object found by a read.
pub struct Found {
    /// The object's bytes.
    pub data: Bytes,
    /// Its cookie.
    pub cookie: u32,
    /// Creation time, ms since the Unix epoch.
    pub created_ms: u64,
    /// Where it was served from.
    pub served: Served,
}

struct Commit {
    tier: Tier,
    items: Vec<(ObjectId, u32, Vec<u8>)>,
    reply: Option<tokio::sync::oneshot::Sender<Result<Tier, NodeError>>>,
}

/// Work for a workload's writer thread.
enum Job {
    Put(Commit),
    Delete(
        ObjectId,
        tokio::sync::oneshot::Sender<Result<bool, NodeError>>,
    ),
    Reappend(
        u64,
        Vec<StoredNeedle>,
        std::sync::mpsc::Sender<Result<u64, StoreError>>,
    ),
}

/// A segment store of the node: the shared store (`<dir>/_shared/`) that
/// holds every workload the tier plan does not list, or the store of one
/// listed workload (`<dir>/<workload>/`), so the tier mover can hold that
/// workload to its flash bytes and move its oldest segments. Buckets and
/// workloads cost a store (a writer thread and its files) only while a plan
/// lists them (docs/node.md, "Buckets, workloads and stores").
pub struct Workload {
    /// Name (the workload the plan lists, or [`SHARED`]).
    pub name: String,
    /// Numeric id (trace records, tier plan entries; [`SHARED_ID`] for the
    /// shared store).
    pub id: u32,
    /// The segment store.
    pub store: Arc<Store>,
    commit: Mutex<mpsc::Sender<Job>>,
    /// Counters.
    pub counters: Arc<WorkloadCounters>,
    /// Segments that count as recently written (RAM cache admission).
    pub recent: Arc<RwLock<HashSet<u64>>>,
    /// Index of the first disk device in the store's device list.
    pub first_disk: usize,
    draw: Mutex<WriteDraw>,
}

impl Workload {
    /// Re-appends (through the writer, in order with client writes) the
    /// still-live ones of `needles` read from `segment`; returns how many.
    pub fn reappend(&self, segment: u64, needles: Vec<StoredNeedle>) -> Result<u64, NodeError> {
        let (tx, rx) = mpsc::channel();
        self.commit
            .lock()
            .send(Job::Reappend(segment, needles, tx))
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))?;
        rx.recv()
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))?
            .map_err(store_err)
    }
}

impl crate::mover::Tiered for Node {
    fn groups(&self) -> Vec<crate::mover::Group> {
        self.workloads()
            .into_iter()
            .map(|w| {
                let rw = w.clone();
                crate::mover::Group {
                    rule: self.rule(&w),
                    counters: w.counters.clone(),
                    members: vec![crate::mover::Member {
                        key: w.id as u64,
                        store: w.store.clone(),
                        first_disk: w.first_disk,
                        disks: self.cfg.disk.len(),
                        recent: Some(w.recent.clone()),
                        reappend: Arc::new(move |segment, needles| {
                            rw.reappend(segment, needles).map_err(|e| e.to_string())
                        }),
                    }],
                }
            })
            .collect()
    }

    fn settings(&self) -> crate::mover::MoverSettings {
        crate::mover::MoverSettings {
            both_tiers: !self.cfg.disk.is_empty() && !self.cfg.flash.is_empty(),
            flash_capacity: self.cfg.flash_capacity,
            flash_burst: self.cfg.flash_burst,
            bytes_per_s: self.cfg.mover_bytes_per_s,
            recent_window: self.cfg.recent_window,
            interval: self.cfg.mover_interval,
        }
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn hot(&self) -> &HotBits {
        &self.hot
    }

    fn stopped(&self) -> bool {
        self.stop.load(Relaxed)
    }
}

/// A workload name the node has seen ([`Node::named_workloads`]).
pub struct NamedWorkload {
    /// The name (a bucket, or the workload header's value).
    pub name: String,
    /// Its trace id.
    pub id: u32,
    /// Its counters.
    pub counters: Arc<WorkloadCounters>,
    /// Its own store, when a plan listed it.
    pub store: Option<Arc<Workload>>,
}

/// The write-probability draw of one workload, stratified: writes are
/// taken in blocks of [`DRAW_BLOCK`], and in each block a random subset of
/// `p × DRAW_BLOCK` (rounded at random) goes to flash. Each write still goes
/// to flash with probability `p` (Janus §7), but the fraction that does is
/// exact over every block instead of binomial, so a workload's flash hit
/// ratio does not swing with the luck of the draw.
#[derive(Default)]
pub struct WriteDraw {
    p: f64,
    left: u32,
    flash_left: u32,
}

const DRAW_BLOCK: u32 = 32;

impl WriteDraw {
    /// Whether the next write goes to flash, under write probability `p`.
    pub fn next(&mut self, p: f64, rng: &mut impl Rng) -> bool {
        if p >= 1.0 {
            return true;
        }
        if p <= 0.0 {
            return false;
        }
        if self.left == 0 || self.p != p {
            let want = p * DRAW_BLOCK as f64;
            let whole = want.floor();
            let extra = rng.random::<f64>() < want - whole;
            self.p = p;
            self.left = DRAW_BLOCK;
            self.flash_left = whole as u32 + extra as u32;
        }
        let flash = rng.random_range(0..self.left) < self.flash_left;
        self.left -= 1;
        if flash {
            self.flash_left -= 1;
        }
        flash
    }
}

/// Whether flash holding `have` bytes against an allocation of `limit` is
/// so far over (the mover lags far behind) that a write drawn for flash
/// goes to disk instead (Colossus does the same when flash is full, Janus
/// §8.1): over twice the allocation and over it by four segments.
pub fn flash_overflowing(limit: u64, have: u64, segment_bytes: u64) -> bool {
    limit == 0 || have > limit.saturating_mul(2).max(limit + 4 * segment_bytes)
}

/// Recently written objects, so that a read which started before a write
/// does not put the old bytes into a cache after the write invalidated it.
struct WriteLog {
    seq: AtomicU64,
    ring: Mutex<VecDeque<(u64, u64)>>,
}

const WRITE_LOG: usize = 8192;

/// An inline read slower than this sends GETs off the executor for a while
/// ([`Node::read_inline`]). Far above a flash read (~0.1 ms), and above the
/// few ms a thread can lose to preemption on a busy machine.
const INLINE_READ_SLOW: Duration = Duration::from_millis(10);

impl WriteLog {
    fn now(&self) -> u64 {
        self.seq.load(Relaxed)
    }
    fn wrote(&self, k: u64) {
        let mut r = self.ring.lock();
        let s = self.seq.fetch_add(1, Relaxed) + 1;
        if r.len() == WRITE_LOG {
            r.pop_front();
        }
        r.push_back((k, s));
    }
    /// Whether `k` may have been written since `since`.
    fn written_since(&self, k: u64, since: u64) -> bool {
        let now = self.seq.load(Relaxed);
        if now == since {
            return false;
        }
        if now - since >= WRITE_LOG as u64 {
            return true;
        }
        self.ring
            .lock()
            .iter()
            .rev()
            .any(|(key, s)| *s > since && *key == k)
    }
}

/// One bit per object (hashed): set when a flash-resident object is read,
/// cleared when the LRU mover looks at it (CLOCK's reference bit).
pub struct HotBits {
    bits: Vec<AtomicU64>,
}

impl HotBits {
    /// `2^bits_log2` bits, all clear.
    pub fn new(bits_log2: u32) -> HotBits {
        HotBits {
            bits: (0..(1usize << bits_log2) / 64)
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }
    fn slot(&self, k: u64) -> (usize, u64) {
        let h = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        let i = (h >> 32) as usize % (self.bits.len() * 64);
        (i / 64, 1u64 << (i % 64))
    }
    /// Marks `k` as read.
    pub fn set(&self, k: u64) {
        let (w, m) = self.slot(k);
        if self.bits[w].load(Relaxed) & m == 0 {
            self.bits[w].fetch_or(m, Relaxed);
        }
    }
    /// Whether `k` was read since the last call; clears the bit.
    pub fn take(&self, k: u64) -> bool {
        let (w, m) = self.slot(k);
        self.bits[w].fetch_and(!m, Relaxed) & m != 0
    }
}

#[derive(serde::Serialize, serde::Deserialize, Default)]
struct WorkloadTable {
    workloads: Vec<WorkloadEntry>,
}

/// Name of the store that holds every workload the plan does not list.
/// Bucket and workload names cannot start with `_`, so it names no bucket.
pub const SHARED: &str = "_shared";
/// Id of the shared store (no trace workload has it).
pub const SHARED_ID: u32 = u32::MAX;
/// The append-only workload name table: one `ID NAME` line per workload.
const NAMES_LOG: &str = "workloads.log";

/// A workload name known to the node: its trace id and counters. Costs a
/// map entry, no thread and no file.
#[derive(Clone)]
struct Named {
    id: u32,
    counters: Arc<WorkloadCounters>,
}

#[derive(serde::Serialize, serde::Deserialize, Clone)]
struct WorkloadEntry {
    name: String,
    id: u32,
}

/// A storage node.
pub struct Node {
    /// The configuration.
    pub cfg: NodeConfig,
    /// Counters.
    pub metrics: Arc<Metrics>,
    workloads: RwLock<HashMap<String, Arc<Workload>>>,
    names: RwLock<HashMap<String, Named>>,
    by_id: RwLock<HashMap<u32, Arc<WorkloadCounters>>>,
    table: Mutex<WorkloadTable>,
    plan: RwLock<ActivePlan>,
    ram: Option<RamCache>,
    fcache: Option<Arc<FlashCache>>,
    writes: WriteLog,
    /// Reference bits of flash-resident objects.
    pub hot: HotBits,
    tracer: Option<Tracer>,
    /// Set when the node shuts down.
    pub stop: AtomicBool,
    started: Instant,
    /// Until when (ms since start) GETs read off the executor only, after
    /// an inline read turned out slow (see [`Node::read_inline`]).
    inline_off_until_ms: AtomicU64,
}

/// Whether `s` is a valid bucket or workload name: 1 to 63 of
/// `[A-Za-z0-9._-]`, not starting with `.` or `_` (reserved).
pub fn valid_bucket(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && !s.starts_with('.')
        && !s.starts_with('_')
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl Node {
    /// Opens the node: the workload table, every known workload's store,
    /// the caches, the plan and the trace writer.
    pub fn open(cfg: NodeConfig) -> Result<Arc<Node>, NodeError> {
        if cfg.flash.is_empty() && cfg.disk.is_empty() {
            return Err(NodeError::Startup(
                "no device directories: give --flash DIR or --disk DIR".into(),
            ));
        }
        for d in cfg.flash.iter().chain(cfg.disk.iter()).chain([&cfg.data]) {
            std::fs::create_dir_all(d).map_err(|e| {
                NodeError::Startup(format!("cannot create directory {}: {e}", d.display()))
            })?;
        }
        let table = read_names(&cfg.data)?;
        let metrics = Arc::new(Metrics::default());
        let ram = (cfg.ram_cache_bytes > 0)
            .then(|| RamCache::new(&cfg.ram_policy, cfg.ram_cache_bytes, metrics.clone()));
        let fcache = if cfg.flash_cache_bytes > 0 && !cfg.flash.is_empty() {
            let fc = crate::flashcache::FlashCacheConfig {
                bytes: cfg.flash_cache_bytes,
                policy: cfg.flash_cache_policy.clone(),
                write_bytes_per_s: cfg.flash_cache_write_bytes_per_s,
            };
            Some(
                FlashCache::open_on(
                    &cfg.flash,
                    cfg.segment_bytes,
                    cfg.max_object_bytes + MAX_NAME_BYTES as u64 + 64,
                    &fc,
                    metrics.clone(),
                )
                .map_err(NodeError::Startup)?,
            )
        } else {
            None
        };
        let tracer = match &cfg.trace_dir {
            Some(d) => Some(
                Tracer::start_with(
                    d,
                    &crate::trace::TraceConfig {
                        rate: cfg.trace_sample,
                        rotate_records: cfg.trace_rotate_records,
                        rotate_after: cfg.trace_rotate_after,
                    },
                    metrics.clone(),
                )
                .map_err(|e| NodeError::Startup(format!("cannot start traces: {e}")))?,
            ),
            None => None,
        };
        let node = Arc::new(Node {
            metrics,
            workloads: RwLock::new(HashMap::new()),
            names: RwLock::new(HashMap::new()),
            by_id: RwLock::new(HashMap::new()),
            table: Mutex::new(table),
            plan: RwLock::new(ActivePlan::default_plan()),
            ram,
            fcache,
            writes: WriteLog {
                seq: AtomicU64::new(0),
                ring: Mutex::new(VecDeque::with_capacity(WRITE_LOG)),
            },
            hot: HotBits::new(24),
            tracer,
            stop: AtomicBool::new(false),
            started: Instant::now(),
            inline_off_until_ms: AtomicU64::new(0),
            cfg,
        });
        let known: Vec<WorkloadEntry> = node.table.lock().workloads.clone();
        for e in known {
            node.register(e);
        }
        node.open_store(SHARED, SHARED_ID)?;
        // Stores on the devices already: those of workloads a plan listed,
        // and the per-bucket stores of data directories written before
        // buckets shared a store. Their objects stay readable.
        for name in existing_stores(&node.cfg) {
            let id = node.named(&name)?.id;
            node.open_store(&name, id)?;
        }
        if let Some(p) = node.cfg.plan_path.clone() {
            node.load_plan_file(&p)?;
        }
        Ok(node)
    }

    /// The store a write of workload `name` goes to: the workload's own
    /// store when the plan in force lists it (opened on first use), else the
    /// shared store. Registers the name on first sight (a table entry: no
    /// thread, no file).
    pub fn workload(&self, name: &str) -> Result<Arc<Workload>, NodeError> {
        let id = self.named(name)?.id;
        if self.plan.read().entry(id, name).is_some() {
            self.open_store(name, id)
        } else {
            self.shared()
        }
    }

    /// The shared store.
    fn shared(&self) -> Result<Arc<Workload>, NodeError> {
        self.workloads
            .read()
            .get(SHARED)
            .cloned()
            .ok_or_else(|| NodeError::Store("the shared store is not open".into()))
    }

    fn register(&self, e: WorkloadEntry) -> Named {
        let counters = self.metrics.workload(&e.name);
        let named = Named {
            id: e.id,
            counters: counters.clone(),
        };
        if let Some(t) = &self.tracer {
            t.name_workload(e.id, &e.name);
        }
        self.by_id.write().insert(e.id, counters);
        self.names.write().insert(e.name, named.clone());
        named
    }

    /// The trace id and counters of workload `name`, registering it (one
    /// appended line in the name table) on first sight.
    fn named(&self, name: &str) -> Result<Named, NodeError> {
        if let Some(n) = self.names.read().get(name) {
            return Ok(n.clone());
        }
        let mut t = self.table.lock();
        if let Some(n) = self.names.read().get(name) {
            return Ok(n.clone());
        }
        let id = t.workloads.iter().map(|w| w.id).max().unwrap_or(0) + 1;
        if id == SHARED_ID {
            return Err(NodeError::Store("the workload table is full".into()));
        }
        let e = WorkloadEntry {
            name: name.to_string(),
            id,
        };
        append_name(&self.cfg.data, &e)?;
        t.workloads.push(e.clone());
        Ok(self.register(e))
    }

    /// The store named `name` (the shared store, or a listed workload's),
    /// opening it on first use.
    fn open_store(&self, name: &str, id: u32) -> Result<Arc<Workload>, NodeError> {
        if let Some(w) = self.workloads.read().get(name) {
            return Ok(w.clone());
        }
        let mut all = self.workloads.write();
        if let Some(w) = all.get(name) {
            return Ok(w.clone());
        }
        let mut devs: Vec<(PathBuf, Tier)> = Vec::new();
        for d in &self.cfg.flash {
            devs.push((d.join(name), Tier::Flash));
        }
        let first_disk = devs.len();
        for d in &self.cfg.disk {
            devs.push((d.join(name), Tier::Disk));
        }
        let mut sc = StoreConfig::new(&devs[0].0, devs[0].1);
        for (p, t) in &devs[1..] {
            sc = sc.with_device(p, *t);
        }
        sc.create_dirs = true;
        sc.segment_size = self.cfg.segment_bytes;
        sc.max_object_size = self.cfg.max_object_bytes + MAX_NAME_BYTES as u64 + 64;
        let store = Arc::new(Store::open(sc).map_err(|e| {
            NodeError::Startup(format!("cannot open the store of workload {name}: {e}"))
        })?);
        let (tx, rx) = mpsc::channel::<Job>();
        let counters = self.metrics.workload(name);
        {
            let store = store.clone();
            let metrics = self.metrics.clone();
            let max = self.cfg.max_batch_objects;
            std::thread::Builder::new()
                .name(format!("commit-{name}"))
                .spawn(move || commit_loop(store, rx, metrics, max))
                .map_err(|e| NodeError::Startup(format!("cannot start a writer thread: {e}")))?;
        }
        let w = Arc::new(Workload {
            name: name.to_string(),
            id,
            store,
            commit: Mutex::new(tx),
            counters,
            recent: Arc::new(RwLock::new(HashSet::new())),
            first_disk,
            draw: Mutex::new(WriteDraw::default()),
        });
        all.insert(name.to_string(), w.clone());
        Ok(w)
    }

    /// Every workload name the node has seen, by id: its trace id,
    /// counters, and its own store when a plan listed it (else its objects
    /// are in the shared store).
    pub fn named_workloads(&self) -> Vec<NamedWorkload> {
        let stores = self.workloads.read();
        let mut v: Vec<NamedWorkload> = self
            .names
            .read()
            .iter()
            .map(|(name, n)| NamedWorkload {
                name: name.clone(),
                id: n.id,
                counters: n.counters.clone(),
                store: stores.get(name).cloned(),
            })
            .collect();
        v.sort_by_key(|w| w.id);
        v
    }

    /// Every open store: the shared one and those of listed workloads.
    pub fn workloads(&self) -> Vec<Arc<Workload>> {
        let mut v: Vec<_> = self.workloads.read().values().cloned().collect();
        v.sort_by_key(|w| w.id);
        v
    }

    /// The rule of `w` under the plan in force.
    pub fn rule(&self, w: &Workload) -> Rule {
        self.plan.read().rule(w.id, &w.name)
    }

    /// The loaded plan, if any.
    pub fn plan(&self) -> Option<TierPlan> {
        self.plan.read().plan.clone()
    }

    /// Validates and installs `plan` (the tier mover applies it on its next
    /// pass).
    pub fn set_plan(&self, plan: TierPlan) -> Result<(), NodeError> {
        crate::plan::check(&plan, self.cfg.max_workloads).map_err(NodeError::BadPlan)?;
        *self.plan.write() = ActivePlan { plan: Some(plan) };
        self.metrics.plan_loads.fetch_add(1, Relaxed);
        Ok(())
    }

    /// Back to the default plan.
    pub fn clear_plan(&self) {
        *self.plan.write() = ActivePlan::default_plan();
        self.metrics.plan_loads.fetch_add(1, Relaxed);
    }

    /// Loads the plan in `path`.
    pub fn load_plan_file(&self, path: &Path) -> Result<(), NodeError> {
        let plan = crate::plan::read_file(path).map_err(NodeError::BadPlan)?;
        self.set_plan(plan)
    }

    /// Reloads the plan file given at start (SIGHUP).
    pub fn reload_plan(&self) -> Result<(), NodeError> {
        match self.cfg.plan_path.clone() {
            Some(p) => self.load_plan_file(&p),
            None => Err(NodeError::BadPlan(
                "the node was started without --plan; POST a plan to /_admin/plan instead".into(),
            )),
        }
    }

    /// Seconds since the node started.
    pub fn uptime(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    fn choose_tier(&self, w: &Workload) -> Tier {
        if self.cfg.flash.is_empty() {
            return Tier::Disk;
        }
        if self.cfg.disk.is_empty() {
            return Tier::Flash;
        }
        let rule = self.rule(w);
        let to_flash = w.draw.lock().next(rule.write_probability, &mut rand::rng());
        if !to_flash {
            return Tier::Disk;
        }
        let limit = rule.flash_bytes.unwrap_or(self.cfg.flash_capacity);
        let have = w.counters.flash_bytes.load(Relaxed);
        if flash_overflowing(limit, have, self.cfg.segment_bytes) {
            return Tier::Disk;
        }
        Tier::Flash
    }

    /// Writes objects of one workload with one group commit; returns once
    /// every object is durable.
    pub async fn put(
        &self,
        workload: &str,
        objects: Vec<NewObject>,
    ) -> Result<Vec<Written>, NodeError> {
        let t0 = Instant::now();
        let named = self.named(workload)?;
        let w = self.workload(workload)?;
        let created = now_ms();
        let mut items = Vec::with_capacity(objects.len());
        let mut out = Vec::with_capacity(objects.len());
        let mut ids = Vec::with_capacity(objects.len());
        let mut bytes = 0u64;
        for o in &objects {
            if o.data.len() as u64 > self.cfg.max_object_bytes {
                return Err(NodeError::TooLarge {
                    size: o.data.len() as u64,
                    max: self.cfg.max_object_bytes,
                });
            }
            let id = object_id(&o.bucket, &o.name);
            let cookie: u32 = rand::rng().random();
            let header = ObjectHeader {
                workload: named.id,
                created_ms: created,
                full_name: full_name(&o.bucket, &o.name),
            };
            items.push((id, cookie, header.encode_with(&o.data)));
            ids.push((id, o.data.len() as u64));
            bytes += o.data.len() as u64;
            out.push(Written {
                name: o.name.clone(),
                cookie: format!("{cookie:08x}"),
                url: format!("/{}/{}?cookie={cookie:08x}", o.bucket, o.name),
                tier: "",
            });
        }
        let tier = self.choose_tier(&w);
        let (tx, rx) = tokio::sync::oneshot::channel();
        w.commit
            .lock()
            .send(Job::Put(Commit {
                tier,
                items,
                reply: Some(tx),
            }))
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))?;
        let tier = rx
            .await
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))??;
        self.drop_elsewhere(workload, &w, &ids).await?;
        for (id, _) in &ids {
            let k = cache_key(*id);
            self.writes.wrote(k);
            if let Some(r) = &self.ram {
                r.remove(*id);
            }
            if let Some(f) = &self.fcache {
                f.invalidate(*id);
            }
        }
        let n = ids.len() as u64;
        let c = &named.counters;
        c.writes.fetch_add(n, Relaxed);
        c.bytes_written.fetch_add(bytes, Relaxed);
        if tier == Tier::Flash {
            c.writes_flash.fetch_add(n, Relaxed);
        }
        let lat = t0.elapsed().as_micros() as u64;
        self.metrics.put_latency.observe(lat);
        if let Some(t) = &self.tracer {
            for (id, size) in &ids {
                t.put(id.key, named.id, *size, created as f64 / 1e3, lat);
            }
        }
        let tier_name = if tier == Tier::Flash { "flash" } else { "disk" };
        for o in &mut out {
            o.tier = tier_name;
        }
        Ok(out)
    }

    /// After a write of workload `name` into `target`, deletes older
    /// versions of the same objects from the other store the workload's
    /// objects can be in (its own store or the shared one, when the plan
    /// listed it then and not now, or the other way round), so that at most
    /// one store holds a live version of a name.
    async fn drop_elsewhere(
        &self,
        name: &str,
        target: &Arc<Workload>,
        ids: &[(ObjectId, u64)],
    ) -> Result<(), NodeError> {
        let other = if target.name == SHARED {
            self.workloads.read().get(name).cloned()
        } else {
            self.workloads.read().get(SHARED).cloned()
        };
        let Some(other) = other else {
            return Ok(());
        };
        let m = other.store.memory();
        if m.sealed_objects + m.active_objects == 0 {
            return Ok(());
        }
        for (id, _) in ids {
            self.delete_in(&other, *id).await?;
        }
        Ok(())
    }

    /// Deletes `id` from store `w` through its writer; whether it was there.
    async fn delete_in(&self, w: &Workload, id: ObjectId) -> Result<bool, NodeError> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        w.commit
            .lock()
            .send(Job::Delete(id, tx))
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))?;
        rx.await
            .map_err(|_| NodeError::Store("the workload's writer stopped".into()))?
    }

    /// Reads `bucket/name`, checking `cookie` when given (a mismatch is
    /// [`NodeError::NotFound`], as is a missing cookie under
    /// `require_cookies`). `range` is only recorded in the trace.
    pub async fn get(
        self: &Arc<Self>,
        workload: &str,
        bucket: &str,
        name: &str,
        cookie: Option<u32>,
        range: Option<(u64, u64)>,
    ) -> Result<Found, NodeError> {
        let t0 = Instant::now();
        if cookie.is_none() && self.cfg.require_cookies {
            return Err(NodeError::NotFound);
        }
        let id = object_id(bucket, name);
        let fname = full_name(bucket, name);
        let w = self.store_of(workload);
        let check = |needle: &Bytes, stored_cookie: u32| -> Option<(ObjectHeader, Bytes)> {
            if cookie.is_some_and(|c| c != stored_cookie) {
                return None;
            }
            let (h, data) = ObjectHeader::decode(needle).ok()?;
            (h.full_name == fname).then_some((h, data))
        };
        // RAM.
        if let Some(r) = &self.ram {
            if let Some(c) = r.get(id) {
                if let Some((h, data)) = check(&c.needle, c.cookie) {
                    let f = Found {
                        data,
                        cookie: c.cookie,
                        created_ms: h.created_ms,
                        served: Served::Ram,
                    };
                    self.finish_get(h.workload, id, &f, t0, range);
                    return Ok(f);
                }
                return Err(NodeError::NotFound);
            }
        }
        let since = self.writes.now();
        let res = match self.read_inline(w.as_ref(), id) {
            Some(r) => r?,
            None => {
                let node = self.clone();
                tokio::task::spawn_blocking(move || node.read_tiers(w, id))
                    .await
                    .map_err(|e| NodeError::Store(format!("read task failed: {e}")))??
            }
        };
        let Some((needle, stored_cookie, served, segment, wl)) = res else {
            return Err(NodeError::NotFound);
        };
        let Some((h, data)) = check(&needle, stored_cookie) else {
            return Err(NodeError::NotFound);
        };
        if let Some(r) = &self.ram {
            let admit = match self.cfg.ram_admission {
                RamAdmission::All => true,
                RamAdmission::Recent => wl.as_ref().is_some_and(|w| {
                    served != Served::FlashCache && w.recent.read().contains(&segment)
                }),
            };
            if admit && !self.writes.written_since(cache_key(id), since) {
                r.insert(Cached {
                    id,
                    cookie: stored_cookie,
                    needle: needle.clone(),
                });
            }
        }
        if served == Served::Disk {
            if let Some(fc) = &self.fcache {
                if !self.writes.written_since(cache_key(id), since) {
                    fc.admit(id, stored_cookie, &needle);
                }
            }
        }
        if served == Served::Flash {
            self.hot.set(cache_key(id));
        }
        let f = Found {
            data,
            cookie: stored_cookie,
            created_ms: h.created_ms,
            served,
        };
        self.finish_get(h.workload, id, &f, t0, range);
        Ok(f)
    }

    fn finish_get(
        &self,
        wid: u32,
        id: ObjectId,
        f: &Found,
        t0: Instant,
        range: Option<(u64, u64)>,
    ) {
        let lat = t0.elapsed().as_micros() as u64;
        self.metrics.get_latency.observe(lat);
        self.metrics.served(f.served);
        if let Some(c) = self.by_id.read().get(&wid) {
            c.read(f.served);
        }
        if let Some(t) = &self.tracer {
            t.get(
                id.key,
                wid,
                f.data.len() as u64,
                f.created_ms as f64 / 1e3,
                f.served,
                lat,
                range,
            );
        }
    }

    /// The store a read of workload `name` looks in first: where its
    /// writes go now (without registering the name).
    fn store_of(&self, name: &str) -> Option<Arc<Workload>> {
        if self.plan.read().plan.is_none() {
            // The default plan lists nothing: every write goes to the
            // shared store (one lookup on the GET path).
            return self.workloads.read().get(SHARED).cloned();
        }
        let id = self.names.read().get(name).map(|n| n.id);
        let listed = id.is_some_and(|id| self.plan.read().entry(id, name).is_some());
        let all = self.workloads.read();
        if listed {
            if let Some(w) = all.get(name) {
                return Some(w.clone());
            }
        }
        all.get(SHARED).cloned()
    }

    /// A GET's device read on the calling (async) thread, or `None` when it
    /// must go off the executor ([`Node::read_tiers`] in the blocking pool).
    /// Handing every read to the blocking pool costs two thread wake-ups per
    /// GET, more CPU than a read from the page cache or flash itself
    /// (measured: most of the node's CPU at 1 KiB, docs/benchmarks.md). So a
    /// workload all of whose bytes are on flash, on a node without a flash
    /// read cache, is read inline (a flash read takes about as long as the
    /// hand-off to the pool); a workload with bytes on disk is not. An inline
    /// read that finds its object on disk (the tier counters lag the mover by
    /// up to a pass) or takes over [`INLINE_READ_SLOW`] (a saturated device)
    /// sends every GET off the executor for the next second. An object not
    /// found in its workload is looked for in the others off the executor.
    #[allow(clippy::type_complexity)]
    fn read_inline(
        &self,
        w: Option<&Arc<Workload>>,
        id: ObjectId,
    ) -> Option<Result<Option<(Bytes, u32, Served, u64, Option<Arc<Workload>>)>, NodeError>> {
        let w = w?;
        // An empty segment is its superblock: a workload whose disk bytes
        // are only those holds no object on disk.
        let empty_disk =
            strata_store::format::superblock::SUPERBLOCK_LEN as u64 * self.cfg.disk.len() as u64;
        if self.fcache.is_some()
            || w.first_disk == 0
            || w.counters.disk_bytes.load(Relaxed) > empty_disk
            || (self.started.elapsed().as_millis() as u64) < self.inline_off_until_ms.load(Relaxed)
        {
            return None;
        }
        let t = Instant::now();
        let got = w.store.get_unchecked(id.key, id.alt);
        let slow = t.elapsed() > INLINE_READ_SLOW;
        let o = match got {
            Ok(Some(o)) => o,
            Ok(None) => return None,
            Err(e) => return Some(Err(store_err(e))),
        };
        if slow || o.tier != Tier::Flash {
            let until = self.started.elapsed().as_millis() as u64 + 1000;
            self.inline_off_until_ms.store(until, Relaxed);
        }
        let served = if o.tier == Tier::Flash {
            Served::Flash
        } else {
            Served::Disk
        };
        Some(Ok(Some((
            Bytes::from(o.data),
            o.cookie,
            served,
            o.segment,
            Some(w.clone()),
        ))))
    }

    /// The device read of a GET: flash read cache, then the workload's
    /// store, then the others'. Blocking.
    #[allow(clippy::type_complexity)]
    fn read_tiers(
        &self,
        first: Option<Arc<Workload>>,
        id: ObjectId,
    ) -> Result<Option<(Bytes, u32, Served, u64, Option<Arc<Workload>>)>, NodeError> {
        if let Some(fc) = &self.fcache {
            if let Some((cookie, data)) = fc.get(id) {
                return Ok(Some((
                    Bytes::from(data),
                    cookie,
                    Served::FlashCache,
                    0,
                    None,
                )));
            }
        }
        let mut order: Vec<Arc<Workload>> = Vec::new();
        if let Some(w) = first {
            order.push(w);
        }
        for w in self.workloads() {
            if !order.iter().any(|o| o.id == w.id) {
                order.push(w);
            }
        }
        for w in order {
            match w.store.get_unchecked(id.key, id.alt) {
                Ok(Some(o)) => {
                    let served = if o.tier == Tier::Flash {
                        Served::Flash
                    } else {
                        Served::Disk
                    };
                    return Ok(Some((
                        Bytes::from(o.data),
                        o.cookie,
                        served,
                        o.segment,
                        Some(w),
                    )));
                }
                Ok(None) => {}
                Err(e) => return Err(store_err(e)),
            }
        }
        Ok(None)
    }

    /// Whether `bucket/name` exists (whatever its cookie; a read).
    pub async fn exists(
        self: &Arc<Self>,
        workload: &str,
        bucket: &str,
        name: &str,
    ) -> Result<bool, NodeError> {
        let id = object_id(bucket, name);
        let fname = full_name(bucket, name);
        let stores = self.workloads();
        let first = self.store_of(workload);
        let found = tokio::task::spawn_blocking(move || {
            for w in first.into_iter().chain(stores) {
                if let Some(o) = w.store.get_unchecked(id.key, id.alt).map_err(store_err)? {
                    let needle = Bytes::from(o.data);
                    if ObjectHeader::decode(&needle).is_ok_and(|(h, _)| h.full_name == fname) {
                        return Ok(true);
                    }
                }
            }
            Ok::<bool, NodeError>(false)
        })
        .await
        .map_err(|e| NodeError::Store(format!("read task failed: {e}")))?;
        found
    }

    /// Deletes `bucket/name`; false when there was no such object.
    pub async fn delete(
        &self,
        workload: &str,
        bucket: &str,
        name: &str,
    ) -> Result<bool, NodeError> {
        let id = object_id(bucket, name);
        let k = cache_key(id);
        self.writes.wrote(k);
        if let Some(r) = &self.ram {
            r.remove(id);
        }
        if let Some(f) = &self.fcache {
            f.invalidate(id);
        }
        // Every store: a name has at most one live version, but which store
        // holds it depends on the plans in force when it was written.
        let mut deleted = None;
        for w in self.workloads() {
            if self.delete_in(&w, id).await? {
                deleted = Some(self.names.read().get(workload).map_or(w.id, |n| n.id));
            }
        }
        if let (Some(wid), Some(t)) = (deleted, &self.tracer) {
            t.delete(id.key, wid);
        }
        Ok(deleted.is_some())
    }

    /// Flushes traces and index checkpoints (on shutdown).
    pub fn shutdown(&self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = &self.tracer {
            t.flush();
        }
        for w in self.workloads() {
            let _ = w.store.checkpoint();
        }
    }

    /// Flushes the current trace file so that everything traced so far is
    /// readable.
    pub fn flush_traces(&self) -> Result<(), NodeError> {
        match &self.tracer {
            Some(t) => {
                t.flush();
                Ok(())
            }
            None => Err(NodeError::BadRequest(
                "the node was started without --trace-dir".into(),
            )),
        }
    }

    /// A JSON summary of the node: tiers, workloads, caches, plan.
    pub fn status(&self) -> serde_json::Value {
        let plan = self.plan();
        let stores: Vec<serde_json::Value> = self
            .workloads()
            .iter()
            .map(|w| {
                serde_json::json!({
                    "name": w.name,
                    "flash_bytes": w.counters.flash_bytes.load(Relaxed),
                    "disk_bytes": w.counters.disk_bytes.load(Relaxed),
                })
            })
            .collect();
        let wl: Vec<serde_json::Value> = self
            .named_workloads()
            .iter()
            .map(|w| {
                let rule = self.plan.read().rule(w.id, &w.name);
                let mut v = crate::metrics::workload_status(&w.name, &w.counters, &rule);
                v["id"] = w.id.into();
                v["store"] = w.store.as_ref().map_or(SHARED, |s| s.name.as_str()).into();
                v
            })
            .collect();
        let mut st = serde_json::json!({
            "uptime_seconds": self.uptime(),
            "flash_dirs": self.cfg.flash,
            "disk_dirs": self.cfg.disk,
            "flash_capacity": self.cfg.flash_capacity,
            "plan": plan.as_ref().map(|_| "loaded").unwrap_or("default"),
            "predicted_flash_hit_ratio": plan.as_ref().map(|p| p.predicted_flash_hit_ratio),
            "workloads": wl,
            "stores": stores,
        });
        self.metrics.add_status(&mut st);
        st
    }

    /// Resets the per-workload read counters (between demo phases).
    pub fn reset_read_counters(&self) {
        for w in self.named_workloads() {
            for r in &w.counters.reads {
                r.store(0, Relaxed);
            }
        }
    }
}

/// The workload name table of the node directory `data`: the table of
/// older versions (`workloads.json`, rewritten whole) and the append-only
/// `workloads.log` (one `ID NAME` line per workload; a torn last line, from
/// a crash while it was appended, is ignored).
fn read_names(data: &Path) -> Result<WorkloadTable, NodeError> {
    let mut table = WorkloadTable::default();
    let old = data.join("workloads.json");
    match std::fs::read_to_string(&old) {
        Ok(t) => {
            table = serde_json::from_str(&t).map_err(|e| {
                NodeError::Startup(format!("{}: not a workload table: {e}", old.display()))
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(NodeError::Startup(format!(
                "cannot read {}: {e}",
                old.display()
            )))
        }
    }
    let log = data.join(NAMES_LOG);
    let text = match std::fs::read(&log) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => {
            return Err(NodeError::Startup(format!(
                "cannot read {}: {e}",
                log.display()
            )))
        }
    };
    for line in text.split(|&b| b == b'\n') {
        let Ok(line) = std::str::from_utf8(line) else {
            continue;
        };
        let Some((id, name)) = line.split_once(' ') else {
            continue;
        };
        let Ok(id) = id.parse::<u32>() else { continue };
        if !valid_bucket(name) || table.workloads.iter().any(|w| w.name == name || w.id == id) {
            continue;
        }
        table.workloads.push(WorkloadEntry {
            name: name.to_string(),
            id,
        });
    }
    Ok(table)
}

/// Appends `e` to the name table, durably.
fn append_name(data: &Path, e: &WorkloadEntry) -> Result<(), NodeError> {
    use std::io::Write;
    let path = data.join(NAMES_LOG);
    let write = || -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        // A line starts on a line of its own even after a torn append.
        f.write_all(format!("\n{} {}\n", e.id, e.name).as_bytes())?;
        f.sync_data()
    };
    write().map_err(|err| NodeError::Store(format!("cannot write {}: {err}", path.display())))
}

/// Names of the stores already on the devices (subdirectories named like a
/// workload), the shared store and the read cache excepted.
fn existing_stores(cfg: &NodeConfig) -> Vec<String> {
    let mut names: Vec<String> = cfg
        .flash
        .iter()
        .chain(cfg.disk.iter())
        .filter_map(|d| std::fs::read_dir(d).ok())
        .flatten()
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| valid_bucket(n))
        .collect();
    names.sort();
    names.dedup();
    names
}

/// The group-commit writer of one workload: drains every job waiting,
/// issues one multi-write per tier for the writes among them (one fdatasync
/// per device), and answers all. Deletes and the LRU mover's re-appends run
/// here too, in order with the writes, so neither can undo the other.
///
/// The group-commit window: the writers answered by one commit usually send
/// their next write within a fraction of a millisecond. Starting the next
/// fdatasync with only the writes that queued up during the last one splits
/// N closed-loop writers into two halves that take turns (each write waits
/// for a whole fdatasync before its own: N/2 per fdatasync). So when fewer
/// requests are waiting than the last commit answered plus those that were
/// already queued, the writer waits for the rest, at most half the last
/// commit's duration (capped at 2 ms) after it answered. A lone writer never
/// waits.
fn commit_loop(store: Arc<Store>, rx: mpsc::Receiver<Job>, metrics: Arc<Metrics>, max: usize) {
    let size = |j: &Job| match j {
        Job::Put(c) => c.items.len(),
        _ => 1,
    };
    let mut answered = 0usize;
    let mut answered_at = Instant::now();
    let mut window = Duration::ZERO;
    loop {
        // Whether the first job was already waiting (queued during the last
        // commit) or is a writer coming back.
        let (first, mut queued) = match rx.try_recv() {
            Ok(j) => (j, 1),
            Err(mpsc::TryRecvError::Empty) => match rx.recv() {
                Ok(j) => (j, 0),
                Err(_) => break,
            },
            Err(mpsc::TryRecvError::Disconnected) => break,
        };
        let mut n = size(&first);
        let mut jobs = vec![first];
        while n < max {
            match rx.try_recv() {
                Ok(j) => {
                    if queued > 0 {
                        queued += 1;
                    }
                    n += size(&j);
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let expect = queued + answered;
        let deadline = answered_at + window;
        while n < max && jobs.len() < expect {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(j) => {
                    n += size(&j);
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        let t0 = Instant::now();
        answered = jobs.len();
        let mut puts: Vec<Commit> = Vec::new();
        for j in jobs {
            match j {
                Job::Put(c) => puts.push(c),
                Job::Delete(id, reply) => {
                    flush_puts(&store, &mut puts, &metrics);
                    let _ = reply.send(store.delete(id.key, id.alt).map_err(store_err));
                }
                Job::Reappend(segment, needles, reply) => {
                    flush_puts(&store, &mut puts, &metrics);
                    let _ = reply.send(reappend_live(&store, segment, needles));
                }
            }
        }
        flush_puts(&store, &mut puts, &metrics);
        answered_at = Instant::now();
        window = ((answered_at - t0) / 2).min(Duration::from_millis(2));
    }
}

/// Re-appends to flash those of `needles` (read from `segment`) that are
/// still live (the LRU mover's re-append, run by a store's writer on every
/// server).
pub fn reappend_live(
    store: &Store,
    segment: u64,
    needles: Vec<StoredNeedle>,
) -> Result<u64, StoreError> {
    let mut live = Vec::with_capacity(needles.len());
    for n in needles {
        if store.is_live(segment, n.offset, n.key, n.alt_key)? {
            live.push(n);
        }
    }
    for chunk in live.chunks(256) {
        let items: Vec<PutItem<'_>> = chunk
            .iter()
            .map(|n| PutItem {
                key: n.key,
                alt_key: n.alt_key,
                cookie: n.cookie,
                data: &n.data,
            })
            .collect();
        store.put_batch(Tier::Flash, &items)?;
    }
    Ok(live.len() as u64)
}

fn flush_puts(store: &Store, puts: &mut Vec<Commit>, metrics: &Metrics) {
    if puts.is_empty() {
        return;
    }
    for tier in [Tier::Flash, Tier::Disk] {
        let group: Vec<usize> = (0..puts.len()).filter(|&i| puts[i].tier == tier).collect();
        if group.is_empty() {
            continue;
        }
        let items: Vec<PutItem<'_>> = group
            .iter()
            .flat_map(|&i| puts[i].items.iter())
            .map(|(id, cookie, data)| PutItem {
                key: id.key,
                alt_key: id.alt,
                cookie: *cookie,
                data,
            })
            .collect();
        let mut res = store.put_batch(tier, &items).map(|_| tier);
        if tier == Tier::Flash {
            if let Err(e) = &res {
                // Flash full: the objects go to disk instead.
                if e.is_out_of_space() {
                    res = store.put_batch(Tier::Disk, &items).map(|_| Tier::Disk);
                }
            }
        }
        metrics.commit_batches.fetch_add(1, Relaxed);
        metrics
            .commit_objects
            .fetch_add(items.len() as u64, Relaxed);
        drop(items);
        for &i in &group {
            let c = &mut puts[i];
            if let Some(reply) = c.reply.take() {
                let r = match &res {
                    Ok(t) => Ok(*t),
                    Err(e) => Err(store_err_ref(e)),
                };
                let _ = reply.send(r);
            }
        }
    }
    puts.clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn write_draw_is_exact_per_block_and_p_per_write() {
        let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
        let mut d = WriteDraw::default();
        // p × block is whole: every block sends exactly that many to flash.
        for _ in 0..50 {
            let n = (0..DRAW_BLOCK).filter(|_| d.next(0.75, &mut rng)).count();
            assert_eq!(n, 24);
        }
        // Each position of a block goes to flash with probability p.
        let mut d = WriteDraw::default();
        let mut at = vec![0u32; DRAW_BLOCK as usize];
        let blocks = 4000;
        for _ in 0..blocks {
            for slot in at.iter_mut() {
                *slot += d.next(0.3, &mut rng) as u32;
            }
        }
        for (i, &n) in at.iter().enumerate() {
            let f = n as f64 / blocks as f64;
            assert!((f - 0.3).abs() < 0.035, "position {i}: {f}");
        }
        // A fractional p × block is rounded at random, exact on average.
        let total: u32 = at.iter().sum();
        let f = total as f64 / (blocks * DRAW_BLOCK) as f64;
        assert!((f - 0.3).abs() < 0.002, "{f}");
        assert!(!d.next(0.0, &mut rng));
        assert!(d.next(1.0, &mut rng));
    }
}
