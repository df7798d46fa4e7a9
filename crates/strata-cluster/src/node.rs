//! The node: identity, membership (register, heartbeats), the table it
//! serves with, and the background loops.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use strata_client::Http;
use strata_meta::api::{
    ClusterMap, DiskSpec, HeartbeatRequest, HeartbeatResponse, RegisterRequest, RegisterResponse,
    ScrubReport, TierClass,
};
use strata_placement::recovery::Transfer;
use strata_placement::{DiskId, NodeId, PlacementTable};
use strata_store::Tier;
use tokio::sync::Semaphore;

use crate::rows::RowStores;
use crate::ClusterError;

/// How a cluster node runs.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Metadata service `host:port`.
    pub meta: String,
    /// Address to listen on.
    pub listen: String,
    /// Address others reach this node at (default: the bound address).
    pub advertise: Option<String>,
    /// The node's disk directory.
    pub data: PathBuf,
    /// Tier class of the disk.
    pub tier: TierClass,
    /// Capacity to report (default: the filesystem's size).
    pub capacity: Option<u64>,
    /// Rows pulled at once during recovery (per disk).
    pub recovery_streams: usize,
    /// Bound on recovery bytes per second (per disk; None: unbounded).
    pub recovery_bytes_per_sec: Option<u64>,
    /// Time between scrub passes (None: no scrubbing).
    pub scrub_interval: Option<Duration>,
    /// Bound on scrub bytes read per second.
    pub scrub_bytes_per_sec: u64,
}

impl NodeOptions {
    /// Working defaults for a node with its disk at `data`.
    pub fn new(meta: &str, listen: &str, data: &Path) -> NodeOptions {
        NodeOptions {
            meta: meta.to_string(),
            listen: listen.to_string(),
            advertise: None,
            data: data.to_path_buf(),
            tier: TierClass::Disk,
            capacity: None,
            recovery_streams: 4,
            recovery_bytes_per_sec: None,
            scrub_interval: Some(Duration::from_secs(3600)),
            scrub_bytes_per_sec: 32 << 20,
        }
    }
}

/// What a node remembers across restarts: `DATA/cluster-node.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Identity {
    node_id: NodeId,
    disk_id: DiskId,
    meta: String,
}

pub(crate) struct NodeMap {
    pub(crate) table: PlacementTable,
    pub(crate) addr_of_disk: HashMap<DiskId, String>,
}

/// A running cluster node.
pub struct ClusterNode {
    pub(crate) opts: NodeOptions,
    pub(crate) addr: String,
    pub(crate) http: Http,
    pub(crate) rows: RowStores,
    identity: RwLock<Option<Identity>>,
    map: RwLock<Option<Arc<NodeMap>>>,
    refresh: tokio::sync::Mutex<()>,
    pub(crate) completed: Mutex<Vec<Transfer>>,
    pub(crate) completed_bytes: AtomicU64,
    pub(crate) running: Mutex<HashSet<(usize, DiskId)>>,
    pub(crate) finished: Mutex<HashSet<(usize, DiskId)>>,
    pub(crate) recovery_permits: Arc<Semaphore>,
    pub(crate) export_permits: Arc<Semaphore>,
    pub(crate) scrub_report: Mutex<Option<ScrubReport>>,
    /// Serializes extends (atomic appends) led by this node.
    pub(crate) extend_lock: tokio::sync::Mutex<()>,
    /// When the disk's recovery bandwidth is next free (leaky bucket).
    pacer: Mutex<Instant>,
}

const TIMEOUT: Duration = Duration::from_secs(5);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl ClusterNode {
    /// This node's id and disk, once registered.
    pub fn ids(&self) -> Option<(NodeId, DiskId)> {
        let g = match self.identity.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.as_ref().map(|i| (i.node_id, i.disk_id))
    }

    pub(crate) fn map(&self) -> Option<Arc<NodeMap>> {
        match self.map.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The table version this node serves with (0: none yet).
    pub fn table_version(&self) -> u64 {
        self.map().map_or(0, |m| m.table.version())
    }

    /// Fetches the map unless one newer than `seen` is already here.
    pub(crate) async fn refresh_from(&self, seen: u64) -> Result<(), ClusterError> {
        let _g = self.refresh.lock().await;
        if self.table_version() > seen {
            return Ok(());
        }
        let m: ClusterMap = self
            .http
            .get_json(&format!("http://{}/v1/map", self.opts.meta), TIMEOUT)
            .await
            .map_err(|reason| self.meta_err(reason))?;
        let Some(table) = m.table else {
            return Ok(());
        };
        let addr_of_node: HashMap<NodeId, String> =
            m.nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
        let addr_of_disk = table
            .disks()
            .iter()
            .filter_map(|d| addr_of_node.get(&d.node).map(|a| (d.id, a.clone())))
            .collect();
        let mut w = match self.map.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *w = Some(Arc::new(NodeMap {
            table,
            addr_of_disk,
        }));
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

    /// Registers (or re-registers) with the metadata service. A node that
    /// comes back under a new identity (it was declared dead meanwhile)
    /// drops its old rows: their data was re-replicated elsewhere.
    async fn register(&self) -> Result<(), ClusterError> {
        let saved: Option<Identity> = std::fs::read(self.identity_path())
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok());
        let capacity = self.opts.capacity.unwrap_or(0);
        let req = RegisterRequest {
            addr: self.addr.clone(),
            disks: vec![DiskSpec {
                tier: self.opts.tier,
                capacity_bytes: capacity,
                path: self.opts.data.display().to_string(),
            }],
            node_id: saved.as_ref().map(|s| s.node_id),
        };
        let resp: RegisterResponse = self
            .http
            .post_json(
                &format!("http://{}/v1/register", self.opts.meta),
                &req,
                TIMEOUT,
            )
            .await
            .map_err(|reason| self.meta_err(reason))?;
        let disk_id =
            resp.disk_ids.first().copied().ok_or_else(|| {
                self.meta_err("registration answered without a disk id".to_string())
            })?;
        let fresh = saved.as_ref().is_none_or(|s| s.node_id != resp.node_id);
        if fresh && self.rows.dir().exists() {
            std::fs::remove_dir_all(self.rows.dir()).map_err(|source| ClusterError::Io {
                path: self.rows.dir().display().to_string(),
                source,
            })?;
        }
        let id = Identity {
            node_id: resp.node_id,
            disk_id,
            meta: self.opts.meta.clone(),
        };
        let path = self.identity_path();
        let bytes = serde_json::to_vec_pretty(&id).unwrap_or_default();
        std::fs::write(&path, bytes).map_err(|source| ClusterError::Io {
            path: path.display().to_string(),
            source,
        })?;
        *match self.identity.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        } = Some(id);
        let _ = self.refresh_from(0).await;
        Ok(())
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

    /// Whether the disk answers: a small file written, synced and read back.
    pub(crate) fn disk_ok(&self) -> bool {
        let p = self.opts.data.join(".health-probe");
        std::fs::write(&p, b"ok").is_ok() && std::fs::read(&p).is_ok_and(|b| b == b"ok")
    }

    async fn heartbeat_loop(self: Arc<Self>, every: Duration) {
        let mut tick = tokio::time::interval(every);
        loop {
            tick.tick().await;
            let Some((node_id, disk)) = self.ids() else {
                let _ = self.register().await;
                continue;
            };
            let completed: Vec<Transfer> = std::mem::take(&mut *lock(&self.completed));
            let bytes = self.completed_bytes.swap(0, Ordering::Relaxed);
            let scrub = lock(&self.scrub_report).take();
            let disk_ok = tokio::task::block_in_place(|| self.disk_ok());
            let req = HeartbeatRequest {
                node_id,
                failed_disks: if disk_ok { Vec::new() } else { vec![disk] },
                completed: completed.clone(),
                recovery_bytes: bytes,
                scrub: scrub.clone(),
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
                        *match self.identity.write() {
                            Ok(g) => g,
                            Err(p) => p.into_inner(),
                        } = None;
                        let _ = std::fs::remove_file(self.identity_path());
                        continue;
                    }
                    if r.table_version > self.table_version() {
                        let _ = self.refresh_from(self.table_version()).await;
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

/// Runs a cluster node until the process ends: binds `listen`, registers
/// with the metadata service, and serves.
pub async fn serve(opts: NodeOptions) -> Result<(), ClusterError> {
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|source| ClusterError::Io {
            path: format!("listen address {}", opts.listen),
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ClusterError::Io {
            path: opts.listen.clone(),
            source,
        })?
        .to_string();
    std::fs::create_dir_all(&opts.data).map_err(|source| ClusterError::Io {
        path: opts.data.display().to_string(),
        source,
    })?;
    let tier = match opts.tier {
        TierClass::Flash => Tier::Flash,
        TierClass::Disk => Tier::Disk,
    };
    let node = Arc::new(ClusterNode {
        addr: opts.advertise.clone().unwrap_or(bound),
        http: Http::new(),
        rows: RowStores::new(&opts.data, tier),
        identity: RwLock::new(None),
        map: RwLock::new(None),
        refresh: tokio::sync::Mutex::new(()),
        completed: Mutex::new(Vec::new()),
        completed_bytes: AtomicU64::new(0),
        running: Mutex::new(HashSet::new()),
        finished: Mutex::new(HashSet::new()),
        recovery_permits: Arc::new(Semaphore::new(opts.recovery_streams.max(1))),
        export_permits: Arc::new(Semaphore::new(opts.recovery_streams.max(1) * 2)),
        scrub_report: Mutex::new(None),
        pacer: Mutex::new(Instant::now()),
        extend_lock: tokio::sync::Mutex::new(()),
        opts,
    });
    // Wait for the metadata service (it may start after the nodes).
    let mut tries = 0;
    loop {
        match node.register().await {
            Ok(()) => break,
            Err(e) if tries < 300 => {
                if tries % 25 == 0 {
                    eprintln!("strata server: waiting for the metadata service: {e}");
                }
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
    if let Some((n, d)) = node.ids() {
        eprintln!(
            "strata server: node {n} (disk {d}) serving at {} in the cluster of {}",
            node.addr, node.opts.meta
        );
    }
    tokio::spawn(node.clone().heartbeat_loop(Duration::from_millis(500)));
    tokio::spawn(crate::recovery::run(node.clone()));
    if let Some(every) = node.opts.scrub_interval {
        tokio::spawn(crate::scrub::run(node.clone(), every));
    }
    let app = crate::server::router(node.clone());
    axum::serve(listener, app)
        .await
        .map_err(|source| ClusterError::Io {
            path: "HTTP server".into(),
            source,
        })
}
