//! The cluster map as a process holds it: one placement table, the
//! address of every disk, the copies still under way, fetched from the
//! metadata service and replaced when a newer one is seen. A node's
//! process holds one [`ClusterView`], shared by the node (which rows are
//! its own) and by its coordinator ([`crate::Client`]); a client process
//! holds the one its `Client` made.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use strata_meta::api::{ClusterMap, NodeState};
use strata_placement::{DiskId, PlacementTable};

use crate::http::Http;
use crate::ClientError;

/// One version of the cluster map.
pub struct Placement {
    /// The placement table.
    pub table: PlacementTable,
    /// The address of every disk's node (dead nodes' too: recovery and
    /// scrubbing still name them).
    pub addr_of_disk: HashMap<DiskId, String>,
    /// Disks of nodes the metadata service declared dead.
    dead: HashSet<DiskId>,
    /// (row, disk) of every copy still to do: that disk of the row does
    /// not hold the row's older writes yet ([`ClusterMap::copying`]).
    pub copying: HashSet<(usize, DiskId)>,
}

impl Placement {
    /// The map's placement, if it has a table yet.
    pub fn of(m: ClusterMap) -> Option<Placement> {
        let table = m.table?;
        let addr_of_node: HashMap<_, _> = m.nodes.iter().map(|n| (n.id, n.addr.clone())).collect();
        let dead_nodes: HashSet<_> = m
            .nodes
            .iter()
            .filter(|n| n.state == NodeState::Dead)
            .map(|n| n.id)
            .collect();
        let mut addr_of_disk = HashMap::new();
        let mut dead = HashSet::new();
        for d in table.disks() {
            if let Some(a) = addr_of_node.get(&d.node) {
                addr_of_disk.insert(d.id, a.clone());
            }
            if dead_nodes.contains(&d.node) {
                dead.insert(d.id);
            }
        }
        let copying = m.copying.iter().map(|t| (t.row, t.target)).collect();
        Some(Placement {
            table,
            addr_of_disk,
            dead,
            copying,
        })
    }

    /// Addresses of the live replicas of `row` (on live nodes).
    pub fn replicas(&self, row: usize) -> Vec<String> {
        self.table
            .live_replicas(row)
            .into_iter()
            .filter(|d| !self.dead.contains(d))
            .filter_map(|d| self.addr_of_disk.get(&d).cloned())
            .collect()
    }

    /// [`Placement::replicas`] that hold all of the row: not the target of
    /// a copy still to do.
    pub fn complete_replicas(&self, row: usize) -> Vec<String> {
        self.table
            .live_replicas(row)
            .into_iter()
            .filter(|&d| !self.dead.contains(&d) && !self.copying.contains(&(row, d)))
            .filter_map(|d| self.addr_of_disk.get(&d).cloned())
            .collect()
    }
}

/// Called with the map being replaced (none the first time) and its
/// successor, before the successor is published: a node marks the rows a
/// new table brings to it before any request is admitted under it.
pub type OnNewMap = Box<dyn Fn(Option<&Placement>, &Placement) + Send + Sync>;

/// The process's cluster map, fetched from the metadata service.
pub struct ClusterView {
    meta: String,
    http: Http,
    timeout: Duration,
    current: RwLock<Option<Arc<Placement>>>,
    refresh: tokio::sync::Mutex<()>,
    refreshes: AtomicU64,
    on_new: Option<OnNewMap>,
}

impl ClusterView {
    /// A view of the cluster whose metadata service is at `meta`, with no
    /// map yet; `on_new` sees each new map before it is published.
    pub fn new(meta: &str, http: Http, timeout: Duration, on_new: Option<OnNewMap>) -> ClusterView {
        ClusterView {
            meta: meta.to_string(),
            http,
            timeout,
            current: RwLock::new(None),
            refresh: tokio::sync::Mutex::new(()),
            refreshes: AtomicU64::new(0),
            on_new,
        }
    }

    /// The metadata service's address.
    pub fn meta(&self) -> &str {
        &self.meta
    }

    /// The pool requests to the metadata service and to peers go through.
    pub fn http(&self) -> &Http {
        &self.http
    }

    /// The map in force, if the cluster has a table yet.
    pub fn current(&self) -> Option<Arc<Placement>> {
        match self.current.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The version of the table in force (0: none yet).
    pub fn version(&self) -> u64 {
        self.current().map_or(0, |m| m.table.version())
    }

    /// Map fetches that replaced one already held.
    pub fn refreshes(&self) -> u64 {
        self.refreshes.load(Ordering::Relaxed)
    }

    /// Fetches the map again unless another task already replaced the one
    /// with version `seen` (a fetch with `seen` equal to the version in
    /// force is made: a peer's address may have changed). A map with no
    /// table yet leaves the view as it was.
    pub async fn refresh_from(&self, seen: u64) -> Result<(), ClientError> {
        let _g = self.refresh.lock().await;
        if self.version() > seen {
            return Ok(());
        }
        let m: ClusterMap = self
            .http
            .get_json(&format!("http://{}/v1/map", self.meta), self.timeout)
            .await
            .map_err(|reason| ClientError::Meta {
                addr: self.meta.clone(),
                reason,
            })?;
        let Some(next) = Placement::of(m) else {
            return Ok(());
        };
        let old = self.current();
        if let Some(f) = &self.on_new {
            f(old.as_deref(), &next);
        }
        if old.is_some() {
            self.refreshes.fetch_add(1, Ordering::Relaxed);
        }
        let mut w = match self.current.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        *w = Some(Arc::new(next));
        Ok(())
    }
}
