//! The metadata service's state and every change to it, as pure functions
//! (no I/O, time passed in), so they are tested without a network.

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};
use strata_placement::recovery::{plan, Transfer};
use strata_placement::{
    DiskId, DiskState, Movement, NodeId, PlacementTable, DEFAULT_REPLICATION, DEFAULT_TRACT_SIZE,
};

use crate::api::{
    ClusterMap, DiskSpec, DiskStatus, NodeEntry, NodeState, NodeStatus, RecoveryStatus,
    RecoveryTask, RegisterRequest, RegisterResponse, ScrubReport, Status, TierClass,
};
use crate::api::{EcConfig, StripeRecord};
use crate::MetaError;

/// Version of the persisted state's layout (docs/placement.md).
pub const STATE_FORMAT: u32 = 2;

/// The most nodes that may wait as pending at once: a register past it is
/// refused (a replayed or scripted register cannot grow the state without
/// bound).
pub const MAX_PENDING_NODES: usize = 256;

/// How the cluster is laid out; fixed when the service is first started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterConfig {
    /// Replicas per row.
    pub replication: usize,
    /// Bytes per tract.
    pub tract_size: u64,
    /// The first table is built once this many nodes have registered.
    pub initial_nodes: usize,
    /// Seed of the table's tie-breaks.
    pub seed: u64,
    /// The erasure code of the warm tier (None: no erasure coding).
    #[serde(default)]
    pub ec: Option<EcConfig>,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            replication: DEFAULT_REPLICATION,
            tract_size: DEFAULT_TRACT_SIZE,
            initial_nodes: DEFAULT_REPLICATION,
            seed: 0x0057_4241_5441,
            ec: None,
        }
    }
}

/// One disk as the service records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskRecord {
    /// Id.
    pub id: DiskId,
    /// What the node said about it.
    pub spec: DiskSpec,
}

/// One node as the service records it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeRecord {
    /// Id.
    pub id: NodeId,
    /// Data address.
    pub addr: String,
    /// Lifecycle state.
    pub state: NodeState,
    /// Its disks.
    pub disks: Vec<DiskRecord>,
    /// The SHA-256 (hex) of the node key the service gave it; absent for
    /// a node registered before keys existed, until it registers again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_digest: Option<String>,
}

/// A new node key and the digest the service keeps of it.
fn new_node_key() -> (String, String) {
    use rand::Rng;
    let mut b = [0u8; 32];
    rand::rng().fill(&mut b[..]);
    let key = crate::cluster_auth::hex(&b);
    let digest = key_digest(&key);
    (key, digest)
}

/// The digest kept of a node key.
fn key_digest(key: &str) -> String {
    use sha2::Digest;
    crate::cluster_auth::hex(&sha2::Sha256::digest(key.as_bytes()))
}

impl NodeRecord {
    /// Whether `given` is this node's key (true for a node without one:
    /// registered before keys existed). The digests are compared, not the
    /// keys: a timing difference says nothing of a key's bytes.
    pub fn proves(&self, given: Option<&str>) -> bool {
        match &self.key_digest {
            None => true,
            Some(d) => given.is_some_and(|k| key_digest(k) == *d),
        }
    }

    pub(crate) fn refusal(&self, given: Option<&str>, what: &str) -> MetaError {
        MetaError::Forbidden(format!(
            "{what} as node {} with {}: only that node may (its DATA/cluster-node.json holds \
             the key the metadata service gave it)",
            self.id,
            if given.is_some() {
                "another node key"
            } else {
                "no node key"
            }
        ))
    }
}

/// The recovery in progress (or the last one).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryRecord {
    /// Table version it leads to.
    pub version: u64,
    /// When the first of its table changes happened (ms since the epoch).
    pub started_ms: u64,
    /// When its last copy finished.
    pub finished_ms: Option<u64>,
    /// Every planned copy.
    pub transfers: Vec<Transfer>,
    /// Which copies finished (same order).
    pub done: Vec<bool>,
    /// Bytes copied, as nodes report them.
    pub bytes_copied: u64,
}

impl RecoveryRecord {
    fn pending(&self) -> impl Iterator<Item = &Transfer> {
        self.transfers
            .iter()
            .zip(&self.done)
            .filter(|(_, &d)| !d)
            .map(|(t, _)| t)
    }
}

/// One entry of the table's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableChange {
    /// The version created.
    pub version: u64,
    /// When (ms since the epoch).
    pub at_ms: u64,
    /// Why, in words.
    pub reason: String,
}

/// Everything the metadata service persists.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterState {
    /// [`STATE_FORMAT`].
    pub format: u32,
    /// Layout settings.
    pub config: ClusterConfig,
    /// Nodes by id.
    pub nodes: BTreeMap<u32, NodeRecord>,
    /// Next node id to hand out.
    pub next_node: u32,
    /// Next disk id to hand out.
    pub next_disk: u32,
    /// The current placement table.
    pub table: Option<PlacementTable>,
    /// Why each version was made.
    pub history: Vec<TableChange>,
    /// The current or last recovery.
    pub recovery: RecoveryRecord,
    /// The lab's tier plan, as the store loads it (opaque JSON here).
    pub tier_plan: Option<serde_json::Value>,
    /// Bumped by every change of the tier plan; nodes reload the plan when
    /// a heartbeat answers a version other than theirs.
    #[serde(default)]
    pub tier_plan_version: u64,
    /// Latest scrub report per node.
    #[serde(default)]
    pub scrub: BTreeMap<u32, ScrubReport>,
    /// The cluster's S3 buckets by name (every node serves them).
    #[serde(default)]
    pub buckets: BTreeMap<String, BucketRecord>,
    /// S3 access keys other than the root key, by access key id.
    #[serde(default)]
    pub keys: BTreeMap<String, KeyRecord>,
    /// Every erasure-coded stripe, by id.
    #[serde(default)]
    pub stripes: BTreeMap<u64, StripeRecord>,
    /// Next stripe id to hand out (ids are never reused).
    #[serde(default)]
    pub next_stripe: u64,
}

/// What an S3 access key may do in one bucket; each includes the ones
/// before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Permission {
    /// List and read objects.
    Read,
    /// Also write and delete objects.
    Write,
    /// Also delete the bucket.
    Owner,
}

impl std::str::FromStr for Permission {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "read" => Ok(Permission::Read),
            "write" => Ok(Permission::Write),
            "owner" => Ok(Permission::Owner),
            o => Err(format!("{o:?} is not read, write or owner")),
        }
    }
}

/// An S3 access key (not the root key, which comes from the nodes'
/// environment). The secret is kept as it is: SigV4 verification needs it.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRecord {
    /// The secret.
    pub secret: String,
    /// Milliseconds since the Unix epoch of its creation.
    pub created_ms: u64,
    /// Its permission per bucket (none elsewhere).
    pub buckets: BTreeMap<String, Permission>,
}

impl std::fmt::Debug for KeyRecord {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyRecord")
            .field("secret", &"<hidden>")
            .field("created_ms", &self.created_ms)
            .field("buckets", &self.buckets)
            .finish()
    }
}

/// An S3 bucket.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketRecord {
    /// Milliseconds since the Unix epoch of its creation.
    pub created_ms: u64,
    /// Whether anyone may read its objects and list it without a key
    /// (S3's canned ACL `public-read`).
    #[serde(default)]
    pub public_read: bool,
}

impl NodeRecord {
    /// The disks that are members of placement rows: the node's disk-class
    /// devices, or its flash devices when it has no disk-class device (an
    /// all-flash node). The flash devices of a node that also has disks are
    /// its flash tier, in front of its rows (docs/placement.md, "Devices
    /// and tiers").
    pub fn row_disks(&self) -> Vec<DiskId> {
        let has_disk = self.disks.iter().any(|d| d.spec.tier == TierClass::Disk);
        self.disks
            .iter()
            .filter(|d| !has_disk || d.spec.tier == TierClass::Disk)
            .map(|d| d.id)
            .collect()
    }
}

impl ClusterState {
    /// An empty cluster with `config`.
    pub fn new(config: ClusterConfig) -> ClusterState {
        ClusterState {
            format: STATE_FORMAT,
            config,
            nodes: BTreeMap::new(),
            next_node: 0,
            next_disk: 0,
            table: None,
            history: Vec::new(),
            recovery: RecoveryRecord::default(),
            tier_plan: None,
            tier_plan_version: 0,
            scrub: BTreeMap::new(),
            buckets: BTreeMap::new(),
            keys: BTreeMap::new(),
            stripes: BTreeMap::new(),
            next_stripe: 1,
        }
    }

    /// Hands out a stripe id and the K+M disks of an erasure-coded row for
    /// a stripe of `row`: the all-live EC row holding the fewest stripes
    /// (ties by id), so shards spread over every disk.
    pub fn allocate_stripe(&mut self) -> Result<(u64, EcConfig, Vec<DiskId>), MetaError> {
        let ec = self.config.ec.ok_or_else(|| {
            MetaError::BadRequest("erasure coding is off (strata meta --ec K+M)".into())
        })?;
        let table = self
            .table
            .as_ref()
            .ok_or_else(|| MetaError::BadRequest("no placement table yet".into()))?;
        let rows = strata_placement::ec::ec_rows(table, ec.k + ec.m)
            .map_err(|e| MetaError::BadRequest(format!("no erasure-coded row: {e}")))?;
        let mut held: std::collections::HashMap<DiskId, usize> = std::collections::HashMap::new();
        for s in self.stripes.values() {
            for d in &s.disks {
                *held.entry(*d).or_default() += 1;
            }
        }
        let id = self.next_stripe.max(1);
        let best = rows
            .iter()
            .enumerate()
            .min_by_key(|(i, r)| {
                (
                    r.iter()
                        .map(|d| held.get(d).copied().unwrap_or(0))
                        .sum::<usize>(),
                    (*i as u64).wrapping_sub(id) % rows.len() as u64,
                )
            })
            .map(|(_, r)| r.clone())
            .ok_or_else(|| MetaError::BadRequest("no erasure-coded row".into()))?;
        self.next_stripe = id + 1;
        Ok((id, ec, best))
    }

    /// Records a stripe whose every shard is durable.
    pub fn commit_stripe(&mut self, rec: StripeRecord) -> Result<(), MetaError> {
        if rec.id == 0 || rec.id >= self.next_stripe {
            return Err(MetaError::BadRequest(format!(
                "stripe {} was never allocated",
                rec.id
            )));
        }
        if rec.disks.len() != rec.k + rec.m {
            return Err(MetaError::BadRequest(format!(
                "stripe {} names {} disks for {}+{}",
                rec.id,
                rec.disks.len(),
                rec.k,
                rec.m
            )));
        }
        for old in &rec.replaces {
            match self.stripes.get(old) {
                Some(o) if o.row != rec.row => {
                    return Err(MetaError::BadRequest(format!(
                        "stripe {} of row {} cannot replace stripe {old} of row {}",
                        rec.id, rec.row, o.row
                    )))
                }
                _ => {}
            }
            if *old >= rec.id {
                return Err(MetaError::BadRequest(format!(
                    "stripe {} cannot replace the later stripe {old}",
                    rec.id
                )));
            }
        }
        // One state change: the replaced stripes are forgotten as the new
        // one is recorded (an already forgotten one is no error: the
        // compaction that replaces it is being retried).
        for old in &rec.replaces {
            self.stripes.remove(old);
        }
        self.stripes.insert(rec.id, rec);
        Ok(())
    }

    /// Moves shard `index` of stripe `id` to `disk` (a rebuilt shard).
    pub fn move_shard(&mut self, id: u64, index: usize, disk: DiskId) -> Result<(), MetaError> {
        let s = self
            .stripes
            .get_mut(&id)
            .ok_or_else(|| MetaError::BadRequest(format!("no stripe {id}")))?;
        let slot = s
            .disks
            .get_mut(index)
            .ok_or_else(|| MetaError::BadRequest(format!("stripe {id} has no shard {index}")))?;
        *slot = disk;
        Ok(())
    }

    /// Forgets stripe `id` (its records were re-encoded or dropped).
    pub fn drop_stripe(&mut self, id: u64) -> bool {
        self.stripes.remove(&id).is_some()
    }

    /// Stripes with a shard on a disk that is not live.
    pub fn stripes_degraded(&self) -> usize {
        let Some(t) = self.table.as_ref() else {
            return 0;
        };
        self.stripes
            .values()
            .filter(|s| s.disks.iter().any(|&d| !t.is_live(d)))
            .count()
    }

    /// The table's version, 0 before the first table.
    pub fn table_version(&self) -> u64 {
        self.table.as_ref().map_or(0, PlacementTable::version)
    }

    /// A fingerprint of every node's id and address (FNV-1a, stable across
    /// processes): equal fingerprints, equal address books.
    pub fn addresses_fingerprint(&self) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for n in self.nodes.values() {
            for b in
                n.id.0
                    .to_le_bytes()
                    .iter()
                    .chain(n.addr.as_bytes())
                    .chain([&0u8])
            {
                h ^= u64::from(*b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    /// Whether every disk in `disks` is one of `node`'s: a node reports
    /// failures and finished copies of its own disks only. The first disk
    /// that is not, if any.
    pub fn foreign_disk(&self, node: NodeId, disks: &[DiskId]) -> Option<DiskId> {
        let own = self.nodes.get(&node.0)?;
        disks
            .iter()
            .copied()
            .find(|d| !own.disks.iter().any(|x| x.id == *d))
    }

    /// A node registers. A known, non-dead node keeps its ids (a restart);
    /// otherwise it gets fresh ids and waits as pending. Once
    /// `initial_nodes` nodes are pending and no table exists, the first
    /// table is built over all of them.
    pub fn register(
        &mut self,
        req: &RegisterRequest,
        now_ms: u64,
    ) -> Result<RegisterResponse, MetaError> {
        if req.disks.is_empty() {
            return Err(MetaError::BadRequest(
                "a node must offer at least one disk".into(),
            ));
        }
        if let Some(id) = req.node_id {
            if let Some(n) = self.nodes.get_mut(&id.0) {
                if matches!(n.state, NodeState::Up | NodeState::Pending)
                    && n.disks.len() == req.disks.len()
                {
                    // Only the node itself may say where it is now.
                    let given = req.node_key.as_deref();
                    if !n.proves(given) {
                        return Err(n.refusal(given, "a register"));
                    }
                    let node_key = n.key_digest.is_none().then(|| {
                        let (key, digest) = new_node_key();
                        n.key_digest = Some(digest);
                        key
                    });
                    n.addr = req.addr.clone();
                    return Ok(RegisterResponse {
                        node_id: n.id,
                        disk_ids: n.disks.iter().map(|d| d.id).collect(),
                        heartbeat_ms: 0,
                        previous: None,
                        node_key,
                    });
                }
            }
        }
        // A node that registers again before it has an identity (a
        // restart before the answer reached it, or the same request sent
        // twice) is the pending node already at its address, not another.
        // It gets a fresh key: the answer with the first may be what it
        // never received.
        if req.node_id.is_none() {
            if let Some(n) = self.nodes.values_mut().find(|n| {
                n.state == NodeState::Pending
                    && n.addr == req.addr
                    && n.disks.len() == req.disks.len()
            }) {
                let (key, digest) = new_node_key();
                n.key_digest = Some(digest);
                return Ok(RegisterResponse {
                    node_id: n.id,
                    disk_ids: n.disks.iter().map(|d| d.id).collect(),
                    heartbeat_ms: 0,
                    previous: None,
                    node_key: Some(key),
                });
            }
        }
        let waiting = self
            .nodes
            .values()
            .filter(|n| n.state == NodeState::Pending)
            .count();
        if waiting >= MAX_PENDING_NODES {
            return Err(MetaError::BadRequest(format!(
                "{waiting} nodes are already pending, the most this service keeps: add them (strata cluster add-node) or remove them (strata cluster remove-node) first"
            )));
        }
        let previous = req
            .node_id
            .and_then(|id| self.nodes.get(&id.0))
            .map(|n| n.state);
        let id = NodeId(self.next_node);
        self.next_node += 1;
        let disks: Vec<DiskRecord> = req
            .disks
            .iter()
            .map(|spec| {
                let d = DiskRecord {
                    id: DiskId(self.next_disk),
                    spec: spec.clone(),
                };
                self.next_disk += 1;
                d
            })
            .collect();
        let disk_ids = disks.iter().map(|d| d.id).collect();
        let (key, digest) = new_node_key();
        self.nodes.insert(
            id.0,
            NodeRecord {
                id,
                addr: req.addr.clone(),
                state: NodeState::Pending,
                disks,
                key_digest: Some(digest),
            },
        );
        self.maybe_build(now_ms)?;
        Ok(RegisterResponse {
            node_id: id,
            disk_ids,
            heartbeat_ms: 0,
            previous,
            node_key: Some(key),
        })
    }

    fn maybe_build(&mut self, now_ms: u64) -> Result<(), MetaError> {
        if self.table.is_some() {
            return Ok(());
        }
        let pending: Vec<&NodeRecord> = self
            .nodes
            .values()
            .filter(|n| n.state == NodeState::Pending)
            .collect();
        if pending.len() < self.config.initial_nodes.max(self.config.replication) {
            return Ok(());
        }
        let disks: Vec<(DiskId, NodeId)> = pending
            .iter()
            .flat_map(|n| n.row_disks().into_iter().map(move |d| (d, n.id)))
            .collect();
        let count = pending.len();
        let table = PlacementTable::build(
            &disks,
            self.config.replication,
            self.config.tract_size,
            self.config.seed,
        )?;
        for n in self.nodes.values_mut() {
            if n.state == NodeState::Pending {
                n.state = NodeState::Up;
            }
        }
        self.history.push(TableChange {
            version: table.version(),
            at_ms: now_ms,
            reason: format!("initial table over {count} nodes"),
        });
        self.table = Some(table);
        Ok(())
    }

    fn node(&self, id: NodeId) -> Result<&NodeRecord, MetaError> {
        self.nodes.get(&id.0).ok_or(MetaError::UnknownNode(id))
    }

    /// The node that holds `disk`.
    pub fn node_of_disk(&self, disk: DiskId) -> Option<&NodeRecord> {
        self.nodes
            .values()
            .find(|n| n.disks.iter().any(|d| d.id == disk))
    }

    /// Records finished copies and the bytes they moved; returns whether
    /// anything changed.
    pub fn complete(&mut self, done: &[Transfer], bytes: u64, now_ms: u64) -> bool {
        let mut changed = false;
        for t in done {
            for (i, x) in self.recovery.transfers.iter().enumerate() {
                if x.row == t.row && x.target == t.target && !self.recovery.done[i] {
                    self.recovery.done[i] = true;
                    changed = true;
                }
            }
        }
        self.recovery.bytes_copied += bytes;
        if changed && self.recovery.finished_ms.is_none() && self.recovery.done.iter().all(|&d| d) {
            self.recovery.finished_ms = Some(now_ms);
        }
        changed
    }

    /// Declares `node` dead (the health checker's verdict): its disks are
    /// replaced in every row and a recovery is planned.
    pub fn declare_dead(&mut self, node: NodeId, now_ms: u64) -> Result<(), MetaError> {
        let rec = self.node(node)?;
        if rec.state != NodeState::Up {
            return Ok(());
        }
        let disks: Vec<DiskId> = rec.disks.iter().map(|d| d.id).collect();
        if let Some(n) = self.nodes.get_mut(&node.0) {
            n.state = NodeState::Dead;
        }
        self.change_disks(&disks, DiskState::Dead, now_ms, format!("node {node} dead"))
    }

    /// Disks a node reported broken.
    pub fn fail_disks(&mut self, disks: &[DiskId], now_ms: u64) -> Result<(), MetaError> {
        let Some(table) = &self.table else {
            return Ok(());
        };
        let live: Vec<DiskId> = disks
            .iter()
            .copied()
            .filter(|&d| table.is_live(d))
            .collect();
        if live.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = live.iter().map(ToString::to_string).collect();
        self.change_disks(
            &live,
            DiskState::Dead,
            now_ms,
            format!("disk(s) {} failed", names.join(",")),
        )
    }

    fn change_disks(
        &mut self,
        disks: &[DiskId],
        state: DiskState,
        now_ms: u64,
        reason: String,
    ) -> Result<(), MetaError> {
        let Some(old) = self.table.clone() else {
            return Ok(());
        };
        let known: Vec<DiskId> = disks
            .iter()
            .copied()
            .filter(|&d| old.disk(d).is_some())
            .collect();
        let (next, movement) = old.replace_disks(&known, state)?;
        self.install(old, next, movement, now_ms, reason);
        Ok(())
    }

    /// `cluster add-node`: a pending node's disks join the table.
    pub fn add_node(&mut self, node: NodeId, now_ms: u64) -> Result<(), MetaError> {
        let rec = self.node(node)?.clone();
        if rec.state != NodeState::Pending {
            return Err(MetaError::BadRequest(format!(
                "node {node} is {:?}, not pending; only a registered, pending node can be added",
                rec.state
            )));
        }
        let Some(old) = self.table.clone() else {
            return Err(MetaError::BadRequest(format!(
                "no table yet: it is built once {} nodes have registered",
                self.config.initial_nodes
            )));
        };
        let disks = rec.row_disks();
        let (next, movement) = old.add_node(node, &disks)?;
        if !movement.new_rows.is_empty() {
            // Appended rows would move objects between rows, which the row
            // copies (whole rows, slot by slot) do not do.
            return Err(MetaError::BadRequest(format!(
                "adding node {node} needs {} new row(s) (replication {} or a table too small to                  give it slots); that would move objects between rows, which recovery does not                  do: use replication 3 or more and at least 5 nodes",
                movement.new_rows.len(),
                old.replication()
            )));
        }
        if let Some(n) = self.nodes.get_mut(&node.0) {
            n.state = NodeState::Up;
        }
        self.install(old, next, movement, now_ms, format!("node {node} added"));
        Ok(())
    }

    /// `cluster remove-node`: the node's rows move to other disks; it stays
    /// readable as a source while they drain.
    pub fn remove_node(&mut self, node: NodeId, now_ms: u64) -> Result<(), MetaError> {
        let rec = self.node(node)?.clone();
        match rec.state {
            NodeState::Pending => {
                self.nodes.remove(&node.0);
                return Ok(());
            }
            NodeState::Up => {}
            other => {
                return Err(MetaError::BadRequest(format!(
                    "node {node} is already {other:?}"
                )))
            }
        }
        let Some(old) = self.table.clone() else {
            return Ok(());
        };
        let (next, movement) = old.remove_node(node)?;
        if let Some(n) = self.nodes.get_mut(&node.0) {
            n.state = NodeState::Removed;
        }
        self.install(old, next, movement, now_ms, format!("node {node} removed"));
        Ok(())
    }

    /// Installs a new table version and folds its copies into the recovery.
    fn install(
        &mut self,
        old: PlacementTable,
        next: PlacementTable,
        movement: Movement,
        now_ms: u64,
        reason: String,
    ) {
        let fresh = plan(&old, &next, &movement);
        let rec = &mut self.recovery;
        let was_complete = rec.done.iter().all(|&d| d);
        // Keep unfinished copies that still make sense in the new table.
        let mut transfers = Vec::new();
        let mut done = Vec::new();
        if !was_complete {
            for (t, &d) in rec.transfers.iter().zip(&rec.done) {
                if d || !next.is_live(t.target) || !next.row(t.row).contains(&t.target) {
                    continue;
                }
                let mut t = *t;
                if !next.is_live(t.source) || !next.row(t.row).contains(&t.source) {
                    // The source died too: another replica that is not itself
                    // still waiting for the row's data.
                    let waiting: HashSet<DiskId> = rec
                        .pending()
                        .filter(|p| p.row == t.row)
                        .map(|p| p.target)
                        .collect();
                    match next
                        .live_replicas(t.row)
                        .into_iter()
                        .find(|d| *d != t.target && !waiting.contains(d))
                    {
                        Some(s) => t.source = s,
                        None => continue,
                    }
                }
                transfers.push(t);
                done.push(false);
            }
        }
        for t in fresh.transfers {
            transfers.push(t);
            done.push(false);
        }
        if was_complete {
            rec.started_ms = now_ms;
            rec.bytes_copied = 0;
        }
        rec.finished_ms = if transfers.is_empty() {
            Some(now_ms)
        } else {
            None
        };
        rec.version = next.version();
        rec.transfers = transfers;
        rec.done = done;
        self.history.push(TableChange {
            version: next.version(),
            at_ms: now_ms,
            reason,
        });
        self.table = Some(next);
    }

    /// Copies still to do whose target disk is on `node`.
    pub fn tasks_for(&self, node: NodeId) -> Vec<RecoveryTask> {
        let Ok(rec) = self.node(node) else {
            return Vec::new();
        };
        let mine: HashSet<DiskId> = rec.disks.iter().map(|d| d.id).collect();
        self.recovery
            .pending()
            .filter(|t| mine.contains(&t.target))
            .filter_map(|t| {
                let src = self.node_of_disk(t.source)?;
                Some(RecoveryTask {
                    transfer: *t,
                    source_addr: src.addr.clone(),
                    version: self.recovery.version,
                })
            })
            .collect()
    }

    /// What clients need: the table and every node's address.
    pub fn map(&self) -> ClusterMap {
        ClusterMap {
            table: self.table.clone(),
            nodes: self
                .nodes
                .values()
                .map(|n| NodeEntry {
                    id: n.id,
                    addr: n.addr.clone(),
                    state: n.state,
                })
                .collect(),
            copying: self.recovery.pending().cloned().collect(),
        }
    }

    /// Rows with a copy still to do: a disk that left such a row must keep
    /// its directory until the copy is done (it may be the source).
    pub fn rows_in_recovery(&self) -> Vec<usize> {
        let mut rows: Vec<usize> = self.recovery.pending().map(|p| p.row).collect();
        rows.sort_unstable();
        rows.dedup();
        rows
    }

    /// Rows short of a complete, live replica: a non-live disk still in the
    /// row, or a replacement still waiting for its copy.
    pub fn rows_under_replicated(&self) -> usize {
        let Some(t) = &self.table else { return 0 };
        let mut rows: HashSet<usize> = (0..t.row_count())
            .filter(|&r| t.row(r).iter().any(|&d| !t.is_live(d)))
            .collect();
        rows.extend(self.recovery.pending().map(|p| p.row));
        rows.len()
    }

    /// The status report; `last_seen` gives ms since each node's heartbeat.
    pub fn status(
        &self,
        now_ms: u64,
        last_seen: &dyn Fn(NodeId) -> Option<u64>,
        backend: String,
    ) -> Status {
        let per_disk = self
            .table
            .as_ref()
            .map(PlacementTable::rows_per_disk)
            .unwrap_or_default();
        let nodes = self
            .nodes
            .values()
            .map(|n| NodeStatus {
                id: n.id,
                addr: n.addr.clone(),
                state: n.state,
                last_heartbeat_ms_ago: last_seen(n.id),
                disks: n
                    .disks
                    .iter()
                    .map(|d| DiskStatus {
                        id: d.id,
                        tier: d.spec.tier,
                        capacity_bytes: d.spec.capacity_bytes,
                        state: match self.table.as_ref().and_then(|t| t.disk(d.id)) {
                            Some(x) => format!("{:?}", x.state).to_lowercase(),
                            None if !n.row_disks().contains(&d.id) => "flash-tier".into(),
                            None => "pending".into(),
                        },
                        rows: per_disk.get(&d.id).copied().unwrap_or(0),
                    })
                    .collect(),
            })
            .collect();
        let rec = &self.recovery;
        let done = rec.done.iter().filter(|&&d| d).count();
        let end = rec.finished_ms.unwrap_or(now_ms);
        Status {
            table_version: self.table_version(),
            replication: self.config.replication,
            rows: self.table.as_ref().map_or(0, PlacementTable::row_count),
            rows_under_replicated: self.rows_under_replicated(),
            nodes,
            recovery: RecoveryStatus {
                version: rec.version,
                transfers_total: rec.transfers.len(),
                transfers_done: done,
                bytes_copied: rec.bytes_copied,
                complete: done == rec.transfers.len(),
                seconds: if rec.version == 0 {
                    0.0
                } else {
                    end.saturating_sub(rec.started_ms) as f64 / 1000.0
                },
            },
            scrub: self
                .scrub
                .iter()
                .map(|(&n, r)| (NodeId(n), r.clone()))
                .collect(),
            backend,
            logical_bytes: 0,
            stored_bytes: 0,
            ec_segments: self.stripes.len(),
            stripes_degraded: self.stripes_degraded(),
            ec: self.config.ec.map(|e| format!("{}+{}", e.k, e.m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::TierClass;

    fn reg(s: &mut ClusterState, addr: &str) -> RegisterResponse {
        s.register(
            &RegisterRequest {
                addr: addr.into(),
                disks: vec![DiskSpec {
                    tier: TierClass::Disk,
                    capacity_bytes: 1 << 30,
                    path: "/d".into(),
                }],
                node_id: None,
                node_key: None,
            },
            0,
        )
        .unwrap()
    }

    fn cluster(n: usize) -> ClusterState {
        let mut s = ClusterState::new(ClusterConfig {
            initial_nodes: n,
            ..ClusterConfig::default()
        });
        for i in 0..n {
            reg(&mut s, &format!("127.0.0.1:{}", 9000 + i));
        }
        s
    }

    #[test]
    fn a_register_sent_again_is_the_same_pending_node_and_pending_nodes_are_bounded() {
        let mut s = ClusterState::new(ClusterConfig {
            initial_nodes: 100_000,
            ..ClusterConfig::default()
        });
        let a = reg(&mut s, "127.0.0.1:9000");
        let again = reg(&mut s, "127.0.0.1:9000");
        assert_eq!((a.node_id, &a.disk_ids), (again.node_id, &again.disk_ids));
        assert_eq!(s.nodes.len(), 1);
        for i in 1..MAX_PENDING_NODES {
            reg(&mut s, &format!("127.0.0.1:{}", 9000 + i));
        }
        let past = s.register(
            &RegisterRequest {
                addr: "127.0.0.1:1".into(),
                disks: vec![DiskSpec {
                    tier: TierClass::Disk,
                    capacity_bytes: 1 << 30,
                    path: "/d".into(),
                }],
                node_id: None,
                node_key: None,
            },
            0,
        );
        assert!(
            matches!(past, Err(MetaError::BadRequest(ref m)) if m.contains("pending")),
            "{past:?}"
        );
        assert_eq!(s.nodes.len(), MAX_PENDING_NODES);
    }

    #[test]
    fn a_node_may_speak_for_its_own_disks_only() {
        let s = cluster(3);
        let ids: Vec<(NodeId, Vec<DiskId>)> = s
            .nodes
            .values()
            .map(|n| (n.id, n.disks.iter().map(|d| d.id).collect()))
            .collect();
        let (n0, d0) = &ids[0];
        let (_, d1) = &ids[1];
        assert_eq!(s.foreign_disk(*n0, d0), None);
        assert_eq!(s.foreign_disk(*n0, &[]), None);
        assert_eq!(s.foreign_disk(*n0, &[d0[0], d1[0]]), Some(d1[0]));
        assert_eq!(s.foreign_disk(*n0, &[DiskId(999)]), Some(DiskId(999)));
    }

    #[test]
    fn a_compacted_stripe_replaces_its_sources_in_one_step() {
        let mut s = cluster(6);
        s.config.ec = Some(EcConfig {
            k: 4,
            m: 2,
            after_ms: 0,
        });
        let rec = |id: u64, row: usize, disks: Vec<DiskId>, replaces: Vec<u64>| StripeRecord {
            id,
            row,
            source_node: NodeId(0),
            segment: id,
            part: "_".into(),
            k: 4,
            m: 2,
            disks,
            data_len: 100,
            shard_len: 64,
            records: 1,
            record_bytes: 64,
            created_ms: 0,
            replaces,
        };
        let (a, _, da) = s.allocate_stripe().unwrap();
        let (b, _, db) = s.allocate_stripe().unwrap();
        s.commit_stripe(rec(a, 3, da.clone(), vec![])).unwrap();
        s.commit_stripe(rec(b, 4, db.clone(), vec![])).unwrap();
        let (c, _, dc) = s.allocate_stripe().unwrap();
        // Another row's stripe cannot be replaced; nothing changes.
        assert!(s.commit_stripe(rec(c, 3, dc.clone(), vec![b])).is_err());
        assert_eq!(s.stripes.len(), 2);
        // A stripe cannot replace a later one.
        assert!(s.commit_stripe(rec(a, 3, da, vec![c])).is_err());
        s.commit_stripe(rec(c, 3, dc, vec![a])).unwrap();
        assert!(!s.stripes.contains_key(&a));
        assert!(s.stripes.contains_key(&b) && s.stripes.contains_key(&c));
        // The record survives a save and load (the field is kept).
        let json = serde_json::to_string(&s.stripes[&c]).unwrap();
        assert!(json.contains("\"replaces\":["));
        let back: StripeRecord = serde_json::from_str(&json).unwrap();
        assert_eq!(back.replaces, vec![a]);
        let plain = serde_json::to_string(&s.stripes[&b]).unwrap();
        assert!(!plain.contains("replaces"));
    }

    #[test]
    fn table_is_built_when_enough_nodes_registered() {
        let mut s = ClusterState::new(ClusterConfig {
            initial_nodes: 4,
            ..ClusterConfig::default()
        });
        for i in 0..3 {
            reg(&mut s, &format!("h:{i}"));
            assert!(s.table.is_none());
        }
        reg(&mut s, "h:3");
        let t = s.table.as_ref().unwrap();
        assert_eq!(t.version(), 1);
        assert!(t.uncovered_pairs().is_empty());
        assert!(s.nodes.values().all(|n| n.state == NodeState::Up));
        // A fifth node waits for add-node.
        let r = reg(&mut s, "h:4");
        assert_eq!(s.nodes[&r.node_id.0].state, NodeState::Pending);
    }

    #[test]
    fn a_dead_node_starts_a_recovery_that_completes() {
        let mut s = cluster(6);
        s.declare_dead(NodeId(2), 10).unwrap();
        let t = s.table.clone().unwrap();
        assert_eq!(t.version(), 2);
        assert!(!s.recovery.transfers.is_empty());
        assert_eq!(s.rows_under_replicated(), {
            let rows: HashSet<usize> = s.recovery.transfers.iter().map(|t| t.row).collect();
            rows.len()
        });
        // Every task goes to its target's node, with a live source address.
        let mut all = Vec::new();
        for n in 0..6 {
            for task in s.tasks_for(NodeId(n)) {
                assert_ne!(task.source_addr, "127.0.0.1:9002");
                all.push(task.transfer);
            }
        }
        assert_eq!(all.len(), s.recovery.transfers.len());
        assert!(s.tasks_for(NodeId(2)).is_empty());
        s.complete(&all[..1], 5, 20);
        assert!(!s.status(30, &|_| None, String::new()).recovery.complete);
        s.complete(&all, 100, 40);
        let st = s.status(50, &|_| None, String::new());
        assert!(st.recovery.complete);
        assert_eq!(st.rows_under_replicated, 0);
        assert_eq!(st.recovery.seconds, 0.03);
    }

    #[test]
    fn second_failure_during_recovery_re_sources_copies() {
        let mut s = cluster(7);
        s.declare_dead(NodeId(0), 1).unwrap();
        s.declare_dead(NodeId(1), 2).unwrap();
        let t = s.table.clone().unwrap();
        for (tr, _) in s.recovery.transfers.iter().zip(&s.recovery.done) {
            assert!(t.is_live(tr.source), "{tr:?} reads from a dead disk");
            assert!(t.is_live(tr.target));
            assert!(t.row(tr.row).contains(&tr.source));
            assert!(t.row(tr.row).contains(&tr.target));
        }
    }

    #[test]
    fn a_restart_at_another_address_changes_the_fingerprint_not_the_table() {
        let mut s = cluster(3);
        let (v, f) = (s.table_version(), s.addresses_fingerprint());
        assert_eq!(f, cluster(3).addresses_fingerprint(), "not deterministic");
        let k = known_key(&mut s, 1);
        let again = |s: &mut ClusterState, addr: &str| {
            s.register(
                &RegisterRequest {
                    addr: addr.into(),
                    disks: vec![DiskSpec {
                        tier: TierClass::Disk,
                        capacity_bytes: 1 << 30,
                        path: "/d".into(),
                    }],
                    node_id: Some(NodeId(1)),
                    node_key: Some(k.clone()),
                },
                1,
            )
            .unwrap()
        };
        assert_eq!(again(&mut s, "127.0.0.1:9001").node_id, NodeId(1));
        assert_eq!(s.addresses_fingerprint(), f, "same address, same book");
        again(&mut s, "127.0.0.1:7777");
        assert_eq!(s.table_version(), v);
        assert_ne!(s.addresses_fingerprint(), f);
    }

    #[test]
    fn add_and_remove_node() {
        let mut s = cluster(5);
        let r = reg(&mut s, "h:new");
        s.add_node(r.node_id, 5).unwrap();
        assert_eq!(s.table_version(), 2);
        assert!(s.table.as_ref().unwrap().uncovered_pairs().is_empty());
        assert!(s
            .recovery
            .transfers
            .iter()
            .all(|t| t.target == r.disk_ids[0]));
        s.remove_node(NodeId(0), 6).unwrap();
        assert_eq!(s.table_version(), 3);
        assert!(s.add_node(NodeId(0), 7).is_err());
        assert!(s.remove_node(NodeId(0), 7).is_err());
    }

    #[test]
    fn add_node_that_would_append_rows_is_refused() {
        let mut s = ClusterState::new(ClusterConfig {
            replication: 2,
            initial_nodes: 3,
            ..ClusterConfig::default()
        });
        for i in 0..3 {
            reg(&mut s, &format!("h:{i}"));
        }
        let r = reg(&mut s, "h:new");
        let err = s.add_node(r.node_id, 1).unwrap_err();
        assert!(err.to_string().contains("new row"), "{err}");
        assert_eq!(s.table_version(), 1, "nothing changed");
        assert_eq!(s.nodes[&r.node_id.0].state, NodeState::Pending);
    }

    #[test]
    fn every_device_registers_and_rows_hold_disk_class_devices_of_different_nodes() {
        let mut s = ClusterState::new(ClusterConfig {
            initial_nodes: 4,
            ..ClusterConfig::default()
        });
        let spec = |tier, path: &str| DiskSpec {
            tier,
            capacity_bytes: 1 << 30,
            path: path.into(),
        };
        let mut flash = Vec::new();
        for i in 0..4 {
            let r = s
                .register(
                    &RegisterRequest {
                        addr: format!("h:{i}"),
                        disks: vec![
                            spec(TierClass::Flash, "/f0"),
                            spec(TierClass::Disk, "/d0"),
                            spec(TierClass::Disk, "/d1"),
                        ],
                        node_id: None,
                        node_key: None,
                    },
                    0,
                )
                .unwrap();
            assert_eq!(r.disk_ids.len(), 3);
            flash.push(r.disk_ids[0]);
        }
        let t = s.table.clone().unwrap();
        // 8 disk-class devices in rows, flash devices in none.
        assert_eq!(t.disks().len(), 8);
        assert!(flash.iter().all(|f| t.disk(*f).is_none()));
        assert!(t.uncovered_pairs().is_empty());
        for row in t.rows() {
            let nodes: HashSet<NodeId> = row.iter().map(|d| t.disk(*d).unwrap().node).collect();
            assert_eq!(nodes.len(), row.len(), "a node's disks share a row");
        }
        let st = s.status(0, &|_| None, String::new());
        assert!(st.nodes.iter().all(|n| n.disks.len() == 3));
        assert_eq!(st.nodes[0].disks[0].state, "flash-tier");
        assert_eq!(st.nodes[0].disks[0].tier, TierClass::Flash);
        assert!(st.nodes[0].disks[1].rows > 0 && st.nodes[0].disks[2].rows > 0);
        // A node of flash only puts its flash in rows.
        let r = s
            .register(
                &RegisterRequest {
                    addr: "h:f".into(),
                    disks: vec![spec(TierClass::Flash, "/f0")],
                    node_id: None,
                    node_key: None,
                },
                0,
            )
            .unwrap();
        s.add_node(r.node_id, 1).unwrap();
        assert!(s.table.as_ref().unwrap().disk(r.disk_ids[0]).is_some());
    }

    #[test]
    fn restart_keeps_ids() {
        let mut s = cluster(3);
        let k = known_key(&mut s, 1);
        let again = s
            .register(
                &RegisterRequest {
                    addr: "127.0.0.1:1".into(),
                    disks: vec![DiskSpec {
                        tier: TierClass::Disk,
                        capacity_bytes: 1,
                        path: "/d".into(),
                    }],
                    node_id: Some(NodeId(1)),
                    node_key: Some(k),
                },
                0,
            )
            .unwrap();
        assert_eq!(again.node_id, NodeId(1));
        assert_eq!(again.node_key, None, "it keeps the key it has");
        assert_eq!(s.nodes[&1].addr, "127.0.0.1:1");
    }

    /// Gives node `id` a key the test knows.
    fn known_key(s: &mut ClusterState, id: u32) -> String {
        let (key, digest) = new_node_key();
        s.nodes.get_mut(&id).expect("node").key_digest = Some(digest);
        key
    }

    #[test]
    fn only_the_node_itself_registers_as_it() {
        let mut s = cluster(3);
        let first = reg(&mut s, "127.0.0.1:5000");
        let key = first.node_key.clone().expect("a new node gets a key");
        assert_eq!(key.len(), 64);
        let id = first.node_id;
        let again = |s: &mut ClusterState, addr: &str, key: Option<&str>| {
            s.register(
                &RegisterRequest {
                    addr: addr.into(),
                    disks: vec![DiskSpec {
                        tier: TierClass::Disk,
                        capacity_bytes: 1 << 30,
                        path: "/d".into(),
                    }],
                    node_id: Some(id),
                    node_key: key.map(str::to_string),
                },
                1,
            )
        };
        // Without its key, or with another node's: refused, the address
        // stays.
        let other = known_key(&mut s, 0);
        for k in [None, Some(other.as_str())] {
            let e = again(&mut s, "127.0.0.1:6666", k).unwrap_err();
            assert!(matches!(e, MetaError::Forbidden(_)), "{e}");
            assert_eq!(s.nodes[&id.0].addr, "127.0.0.1:5000");
        }
        let r = again(&mut s, "127.0.0.1:5001", Some(&key)).unwrap();
        assert_eq!((r.node_id, r.node_key), (id, None));
        assert_eq!(s.nodes[&id.0].addr, "127.0.0.1:5001");
        assert!(s.nodes[&id.0].proves(Some(&key)));
        assert!(!s.nodes[&id.0].proves(None));
        // A node of the version before keys: its first register gets one,
        // which it needs from then on.
        s.nodes.get_mut(&id.0).unwrap().key_digest = None;
        assert!(s.nodes[&id.0].proves(None));
        let r = again(&mut s, "127.0.0.1:5001", None).unwrap();
        let issued = r.node_key.expect("issued");
        assert!(again(&mut s, "127.0.0.1:5001", None).is_err());
        assert!(again(&mut s, "127.0.0.1:5001", Some(&issued)).is_ok());
        // The key is not kept, only its digest.
        let saved = serde_json::to_string(&s).unwrap();
        assert!(!saved.contains(&issued));
        assert!(saved.contains(&key_digest(&issued)));
    }
}
