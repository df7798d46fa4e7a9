//! The metadata service's HTTP API: request and response bodies (JSON).
//! Nodes and clients use these types; docs/placement.md lists the routes.

use serde::{Deserialize, Serialize};
use strata_placement::recovery::Transfer;
use strata_placement::{DiskId, NodeId, PlacementTable};

/// Tier class of a disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum TierClass {
    /// Flash (SSD, NVMe).
    Flash,
    /// Spinning disk (the default).
    #[default]
    Disk,
}

/// A disk a node offers when it registers.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSpec {
    /// Tier class.
    pub tier: TierClass,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// The node's name for it (a directory), for operators.
    pub path: String,
}

/// `POST /v1/register`: a node joins (or rejoins with its old id).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RegisterRequest {
    /// `host:port` where the node serves data.
    pub addr: String,
    /// Its disks.
    pub disks: Vec<DiskSpec>,
    /// The id it had before a restart, if any.
    pub node_id: Option<NodeId>,
    /// The node key the service gave that id ([`RegisterResponse::node_key`]):
    /// a register naming a node that has one must carry it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_key: Option<String>,
}

/// Answer to a registration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RegisterResponse {
    /// The node's id.
    pub node_id: NodeId,
    /// Ids of its disks, in the order of the request.
    pub disk_ids: Vec<DiskId>,
    /// How often to send heartbeats, in milliseconds.
    pub heartbeat_ms: u64,
    /// What the service knew of the node id the request named, when it
    /// answers with another: `dead` or `removed` (its rows were given to
    /// other disks, so the node may drop its copies), `up` or `pending`
    /// (it still counts on them: the request offered other devices), or
    /// absent (it never knew that id, or none was named). A node drops
    /// rows only on `dead` or `removed` (docs/recovery.md, *A node comes
    /// back as itself*). Absent from services of the previous version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous: Option<NodeState>,
    /// A new node key (64 hex digits), when the service made one: for a
    /// new id, or for a node registered before keys existed. The node
    /// keeps it (DATA/cluster-node.json, mode 0600) and sends it with
    /// every register and heartbeat naming its id; the service keeps only
    /// its SHA-256. Absent: keep the key you have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_key: Option<String>,
}

/// `POST /v1/heartbeat`: a node is alive; reports failed disks and finished
/// recovery transfers.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct HeartbeatRequest {
    /// The node.
    pub node_id: NodeId,
    /// Its node key ([`RegisterResponse::node_key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_key: Option<String>,
    /// Disks the node found broken (I/O errors, missing directory).
    #[serde(default)]
    pub failed_disks: Vec<DiskId>,
    /// Transfers this node (as target) completed since the last heartbeat.
    #[serde(default)]
    pub completed: Vec<Transfer>,
    /// Bytes this node copied for the transfers in `completed`.
    #[serde(default)]
    pub recovery_bytes: u64,
    /// Scrub totals since the node started, sent after each pass.
    #[serde(default)]
    pub scrub: Option<ScrubReport>,
    /// The node's byte counts (for `logical_bytes` and `stored_bytes`).
    #[serde(default)]
    pub bytes: Option<NodeBytes>,
}

/// What a node holds, in bytes, as its heartbeat reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeBytes {
    /// Bytes of every segment file and shard file on its devices.
    pub stored: u64,
    /// Bytes of the live records of the rows it leads (first live replica
    /// of the row): every record counted once across the cluster.
    pub logical: u64,
}

/// The warm tier's erasure code (`strata meta --ec K+M --ec-after D`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct EcConfig {
    /// Data shards per stripe.
    pub k: usize,
    /// Parity shards per stripe.
    pub m: usize,
    /// A sealed segment older than this (ms) is encoded, unless the tier
    /// plan gives its workload another warm age.
    pub after_ms: u64,
}

/// A stripe: one sealed segment of one row, encoded into K+M shards
/// (docs/erasure-coding.md, "Stripe records").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StripeRecord {
    /// Stripe id (also in every shard's header).
    pub id: u64,
    /// The placement row whose records it holds.
    pub row: usize,
    /// The node that encoded it.
    pub source_node: NodeId,
    /// The segment it encodes (id in the source node's part).
    pub segment: u64,
    /// The part (workload store) of the segment.
    pub part: String,
    /// Data shards.
    pub k: usize,
    /// Parity shards.
    pub m: usize,
    /// The disk holding shard i (0..K data, K..K+M parity).
    pub disks: Vec<DiskId>,
    /// Bytes of the encoded segment.
    pub data_len: u64,
    /// Payload bytes of each shard.
    pub shard_len: u64,
    /// Records in its index.
    pub records: u64,
    /// Bytes of those records' needle data.
    pub record_bytes: u64,
    /// When it was recorded (ms since the Unix epoch).
    pub created_ms: u64,
    /// Stripes of the same row this one re-encodes the live records of
    /// (stripe compaction): recording it forgets them in the same step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replaces: Vec<u64>,
}

/// `POST /v1/ec/allocate`: a new stripe id and where its shards go.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StripeAllocation {
    /// The stripe id.
    pub id: u64,
    /// Data shards.
    pub k: usize,
    /// Parity shards.
    pub m: usize,
    /// The disk of shard i (0..K data, K..K+M parity).
    pub disks: Vec<DiskId>,
}

/// `GET /v1/ec`: the code and every stripe.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct EcView {
    /// The code (None: erasure coding is off).
    pub ec: Option<EcConfig>,
    /// Every stripe.
    pub stripes: Vec<StripeRecord>,
    /// The next stripe id to be handed out: every id below it was
    /// allocated, so a stripe directory of such an id that no record names
    /// is a leftover (0: an older service that does not say).
    #[serde(default)]
    pub next_stripe: u64,
}

/// `POST /v1/ec/stripes/{id}/shard`: shard `index` now lives on `disk`.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ShardMove {
    /// Shard index.
    pub index: usize,
    /// Its new disk.
    pub disk: DiskId,
}

/// Answer to a heartbeat.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct HeartbeatResponse {
    /// The current table version (0: no table yet). A node whose table is
    /// older fetches `GET /v1/map`.
    pub table_version: u64,
    /// False when the service no longer knows the node as up (it was
    /// declared dead or removed): the node must stop serving and re-register.
    pub member: bool,
    /// Version of the tier plan (0: none loaded); a node whose plan is of
    /// another version fetches `GET /v1/tier-plan`.
    #[serde(default)]
    pub plan_version: u64,
    /// Rows with row copies still to do at `table_version`: a disk that has
    /// left one of them keeps its copy until the copy is done.
    #[serde(default)]
    pub rows_in_recovery: Vec<usize>,
    /// A fingerprint of every node's address: it changes when a node
    /// restarts at another address (which leaves the table version alone),
    /// and a node whose map was fetched under another fingerprint fetches
    /// `GET /v1/map` again.
    #[serde(default)]
    pub addresses: u64,
}

/// One node as clients see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeEntry {
    /// Node id.
    pub id: NodeId,
    /// `host:port` of its data API.
    pub addr: String,
    /// Up, dead, removed or pending.
    pub state: NodeState,
}

/// Lifecycle of a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum NodeState {
    /// Registered but not yet in the table (waiting for the initial node
    /// count, or for `cluster add-node`).
    Pending,
    /// In the table and heart-beating.
    Up,
    /// Declared dead by the health checker; its disks were replaced.
    Dead,
    /// Taken out by the operator.
    Removed,
}

/// `GET /v1/map`: what a client needs to place objects.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ClusterMap {
    /// The current table (absent until enough nodes registered).
    pub table: Option<PlacementTable>,
    /// Every node with its address.
    pub nodes: Vec<NodeEntry>,
    /// Copies still to do: the target disk of each is in its row's
    /// replicas (it takes the row's new writes) but does not hold what
    /// was written before yet, its records nor its part of the listing
    /// index, so listings are served by the row's other replicas
    /// (docs/placement.md, "The listing index"). Absent from services
    /// before 0.4: none.
    #[serde(default)]
    pub copying: Vec<Transfer>,
}

/// A recovery task for a target node: pull `row` from `source_addr`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryTask {
    /// The transfer.
    pub transfer: Transfer,
    /// Data address of the source disk's node.
    pub source_addr: String,
    /// Table version that created the task.
    pub version: u64,
}

/// Per-disk status.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DiskStatus {
    /// Disk id.
    pub id: DiskId,
    /// Tier class.
    pub tier: TierClass,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
    /// live, dead or removed (or pending; `flash-tier` for a flash device
    /// in front of its node's disks, in no row itself).
    pub state: String,
    /// Rows of the current table that include it.
    pub rows: usize,
}

/// Per-node status.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeStatus {
    /// Node id.
    pub id: NodeId,
    /// Data address.
    pub addr: String,
    /// State.
    pub state: NodeState,
    /// Milliseconds since its last heartbeat (None if never since the
    /// service started).
    pub last_heartbeat_ms_ago: Option<u64>,
    /// Its disks.
    pub disks: Vec<DiskStatus>,
}

/// Progress of the current recovery.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RecoveryStatus {
    /// Table version the recovery leads to (0: none ever).
    pub version: u64,
    /// Row copies planned.
    pub transfers_total: usize,
    /// Row copies finished.
    pub transfers_done: usize,
    /// Bytes copied by all nodes (as reported).
    pub bytes_copied: u64,
    /// Whether every planned copy finished.
    pub complete: bool,
    /// Seconds from the failure's table version to the last copy (or now).
    pub seconds: f64,
}

/// How many names of repaired object records a [`ScrubReport`] keeps.
pub const SCRUB_NAMES_KEPT: usize = 64;

/// A scrub pass's findings on one node.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScrubReport {
    /// Rows compared.
    pub rows_checked: u64,
    /// Objects re-read and checksum-verified.
    pub objects_checked: u64,
    /// Objects whose bytes failed their checksum.
    pub corrupt: u64,
    /// Objects a replica lacked.
    pub missing: u64,
    /// Records copied from a good copy to a replica that lacked them or
    /// held a corrupt or older one: object records (`objects_repaired`)
    /// plus tombstones (`deletes_propagated`).
    pub repaired: u64,
    /// Deletes (tombstones) some replica lacked and got from the others.
    #[serde(default)]
    pub deletes_propagated: u64,
    /// Object records (not tombstones) copied to a replica that lacked
    /// them or held a corrupt or older copy.
    #[serde(default)]
    pub objects_repaired: u64,
    /// The names (`BUCKET/KEY`) of the last [`SCRUB_NAMES_KEPT`] object
    /// records counted in `objects_repaired`, oldest first: which objects
    /// a replica had lost (or had back after a delete, if one ever did).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub objects_repaired_names: Vec<String>,
    /// Tombstones dropped because every replica held them past the grace
    /// time.
    #[serde(default)]
    pub tombstones_purged: u64,
    /// Data tracts of striped objects that no manifest refers to (an
    /// upload or an overwrite whose coordinator died, a delete cut short)
    /// deleted once older than the orphan grace time.
    #[serde(default)]
    pub orphan_tracts_reclaimed: u64,
    /// When the pass ended (ms since the Unix epoch).
    pub finished_ms: u64,
}

/// `GET /v1/status`: the whole cluster at a glance.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Status {
    /// Current table version (0: none).
    pub table_version: u64,
    /// Replicas per row.
    pub replication: usize,
    /// Rows in the table.
    pub rows: usize,
    /// Rows with fewer than `replication` complete, live replicas: a dead
    /// disk not yet replaced, or a replacement still being filled.
    pub rows_under_replicated: usize,
    /// Nodes.
    pub nodes: Vec<NodeStatus>,
    /// The current recovery.
    pub recovery: RecoveryStatus,
    /// Latest scrub report per node.
    pub scrub: Vec<(NodeId, ScrubReport)>,
    /// Which metadata store holds the state: "file:PATH" or "etcd:URL".
    pub backend: String,
    /// Bytes of the live records, each counted once (as the nodes last
    /// reported them).
    #[serde(default)]
    pub logical_bytes: u64,
    /// Bytes on every disk: every replica's segment files and every shard.
    #[serde(default)]
    pub stored_bytes: u64,
    /// Sealed segments held as erasure-coded stripes.
    #[serde(default)]
    pub ec_segments: usize,
    /// Stripes with a shard on a disk that is not live.
    #[serde(default)]
    pub stripes_degraded: usize,
    /// The erasure code, "K+M" (None: off).
    #[serde(default)]
    pub ec: Option<String>,
}

/// `POST /v1/nodes/{id}/add` and `/remove` answer: the new version and how
/// many row copies it starts.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChangeResponse {
    /// New table version.
    pub table_version: u64,
    /// Row copies planned.
    pub transfers: usize,
}

/// An error body: `{"error": "..."}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: String,
}

/// Whether `name` is a valid S3 bucket name (3 to 63 characters of
/// lowercase letters, digits, `.` and `-`, starting and ending with a
/// letter or digit), the rule S3 clients assume.
pub fn valid_bucket_name(name: &str) -> bool {
    let b = name.as_bytes();
    (3..=63).contains(&b.len())
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'.' || *c == b'-')
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && !name.contains("..")
        && !name.contains(".-")
        && !name.contains("-.")
        && name.parse::<std::net::Ipv4Addr>().is_err()
}
