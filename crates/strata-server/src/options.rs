//! How a node runs: its options (what `strata server`'s flags set), its
//! devices, the limits of its public API and its S3 API.

use std::path::{Path, PathBuf};
use std::time::Duration;

use strata_meta::api::TierClass;
use strata_policy::PolicySpec;

/// One device directory of a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Device {
    /// Its directory.
    pub path: PathBuf,
    /// Flash or disk.
    pub tier: TierClass,
}

/// How a cluster node runs.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Metadata service `host:port`.
    pub meta: String,
    /// Address to listen on.
    pub listen: String,
    /// Address others reach this node at (default: the bound address).
    pub advertise: Option<String>,
    /// The node's own directory (its identity, `cluster-node.json`).
    pub data: PathBuf,
    /// Its devices, each registered as a disk with its tier class and
    /// capacity. Disk-class devices are members of placement rows; flash
    /// devices are the flash tier in front of them (or, on a node without
    /// disk-class devices, row members themselves).
    pub devices: Vec<Device>,
    /// Capacity to report per device (default: the filesystem's size).
    pub capacity: Option<u64>,
    /// Bytes the flash tier may hold (default: 90% of the flash devices'
    /// free space at start); a loaded plan bounds it further to the sum of
    /// its workloads' flash bytes.
    pub flash_capacity: Option<u64>,
    /// Segment size of the row stores (the tier mover moves whole segments).
    pub segment_size: u64,
    /// Zeros written ahead of each active segment's needles, so that a
    /// group commit's sync overwrites blocks instead of growing the file
    /// (`strata_store::StoreConfig::prepare_ahead`; 0: none).
    pub prepare_ahead: u64,
    /// Bytes kept back on each disk device for deletes and compaction on a
    /// full volume ([`crate::reserve`]; None: two segments, at most 1/32
    /// of the volume, at least 256 KiB; 0: none).
    pub space_reserve: Option<u64>,
    /// Bound on bytes per second the tier mover copies from flash to disk.
    pub mover_bytes_per_sec: u64,
    /// Under a tier plan, how far above its flash bytes a workload may go
    /// (a fraction of them) while the plan's TTL is what evicts it.
    pub flash_burst: f64,
    /// RAM object cache bytes (0: none).
    pub ram_cache_bytes: u64,
    /// RAM cache policy (strata-policy, the simulator's code).
    pub ram_policy: PolicySpec,
    /// Where sampled request traces go (None: no traces).
    pub trace_dir: Option<PathBuf>,
    /// Fraction of objects whose requests are traced.
    pub trace_sample: f64,
    /// Records per trace file before it rotates.
    pub trace_rotate: u64,
    /// Seconds a trace file stays open before it rotates.
    pub trace_rotate_after: Duration,
    /// Rows pulled at once during recovery (per disk).
    pub recovery_streams: usize,
    /// Bound on recovery bytes per second (per disk; None: unbounded).
    pub recovery_bytes_per_sec: Option<u64>,
    /// Time between scrub passes (None: no scrubbing).
    pub scrub_interval: Option<Duration>,
    /// Bound on scrub bytes read per second.
    pub scrub_bytes_per_sec: u64,
    /// A tombstone held by every replica of its row is dropped by the scrub
    /// once it is this old.
    pub tombstone_grace: Duration,
    /// A data tract of a striped object that no manifest refers to (its
    /// upload or overwrite was cut short, or its delete) is deleted by the
    /// scrub once it is this old; an upload must finish within it.
    pub orphan_grace: Duration,
    /// Limits of the public object API this node serves for the cluster.
    pub gateway: GatewayLimits,
    /// Connection limits (request head timeout, most connections): the
    /// single-node server's own.
    pub http: strata_http::HttpLimits,
    /// A tier plan file published to the metadata service at start and on
    /// SIGHUP (`--plan`).
    pub plan_path: Option<PathBuf>,
    /// Most workloads a tier plan may list (`--max-workloads`).
    pub max_workloads: usize,
    /// The admin token: it guards this node's control endpoints and goes
    /// with the plans this node publishes to the metadata service.
    pub admin_token: Option<String>,
    /// The root key: every permission on the native API and S3 alike
    /// (none: only the keys the metadata service keeps, and anonymous
    /// reads of public-read buckets; S3 refuses to start without it).
    pub root: Option<strata_s3::auth::Key>,
    /// Which reads the RAM cache admits (`--ram-admission`).
    pub ram_admission: strata_node::RamAdmission,
    /// How long a sealed segment counts as recently written.
    pub recent_window: Duration,
    /// The flash read cache for hot disk-resident records (`--flash-cache`;
    /// needs a flash device).
    pub flash_cache: Option<strata_node::flashcache::FlashCacheConfig>,
    /// The node is a cluster of one (its metadata service is embedded):
    /// no other replica holds its rows, so a registration that would drop
    /// them (its devices changed) is refused instead.
    pub cluster_of_one: bool,
    /// Time between the tier mover's passes.
    pub mover_interval: Duration,
    /// A stripe is compacted (its live records re-encoded into a new
    /// stripe) once this fraction of its bytes is dead records.
    pub ec_compact_garbage: f64,
    /// How long a stripe directory no stripe record names (a crash's
    /// leftover, or a stripe compaction replaced) is kept before it is
    /// deleted; the encoder gives up on a stripe it could not record
    /// within half of it.
    pub ec_sweep_grace: Duration,
    /// Bound on the bytes per second of shards this node rebuilds (lost
    /// disks, damaged shards).
    pub ec_rebuild_bytes_per_sec: u64,
    /// The S3 API of this node, on a listener of its own (none: no S3).
    pub s3: Option<S3Listen>,
}

/// The S3 API of a node: the listener's options and, for HTTPS only, its
/// TLS. The server binds it over its one coordinator, serves it with the
/// same connection limits as the object API, runs its background jobs as
/// workers, and stops it with the rest ([`Running::shutdown`]).
#[derive(Clone)]
pub struct S3Listen {
    /// The S3 API's options.
    pub options: strata_s3::S3Options,
    /// The TLS of the listener (none: plain HTTP).
    pub tls: Option<strata_http::conns::Tls>,
}

impl std::fmt::Debug for S3Listen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Listen")
            .field("listen", &self.options.listen)
            .field("tls", &self.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl NodeOptions {
    /// Working defaults for a node with one disk device at `data`.
    pub fn new(meta: &str, listen: &str, data: &Path) -> NodeOptions {
        NodeOptions {
            meta: meta.to_string(),
            listen: listen.to_string(),
            advertise: None,
            data: data.to_path_buf(),
            devices: vec![Device {
                path: data.to_path_buf(),
                tier: TierClass::Disk,
            }],
            capacity: None,
            flash_capacity: None,
            segment_size: 64 << 20,
            prepare_ahead: crate::rows::Sizes::segments_of(0).prepare_ahead,
            space_reserve: None,
            mover_bytes_per_sec: 256 << 20,
            flash_burst: 0.25,
            ram_cache_bytes: 0,
            ram_policy: PolicySpec::MidpointLru { percentile: 75.0 },
            trace_dir: None,
            trace_sample: 0.1,
            trace_rotate: 1_000_000,
            trace_rotate_after: Duration::from_secs(60),
            recovery_streams: 4,
            recovery_bytes_per_sec: None,
            scrub_interval: Some(Duration::from_secs(3600)),
            scrub_bytes_per_sec: 32 << 20,
            tombstone_grace: Duration::from_secs(24 * 3600),
            orphan_grace: Duration::from_secs(24 * 3600),
            gateway: GatewayLimits::default(),
            http: strata_http::HttpLimits::default(),
            plan_path: None,
            max_workloads: 1024,
            admin_token: None,
            root: None,
            flash_cache: None,
            ram_admission: strata_node::RamAdmission::All,
            recent_window: Duration::from_secs(600),
            cluster_of_one: false,
            mover_interval: Duration::from_millis(100),
            ec_compact_garbage: 0.5,
            ec_sweep_grace: Duration::from_secs(600),
            ec_rebuild_bytes_per_sec: 200 << 20,
            s3: None,
        }
    }

    /// Whether device `i` is a member of placement rows (else it is the
    /// flash tier in front of them).
    pub fn in_rows(&self, i: usize) -> bool {
        let has_disk = self.devices.iter().any(|d| d.tier == TierClass::Disk);
        !has_disk
            || self
                .devices
                .get(i)
                .is_some_and(|d| d.tier == TierClass::Disk)
    }

    /// The flash tier's device directories (none on a disk-only or
    /// all-flash node).
    pub fn flash_tier(&self) -> Vec<PathBuf> {
        (0..self.devices.len())
            .filter(|&i| !self.in_rows(i))
            .map(|i| self.devices[i].path.clone())
            .collect()
    }
}

/// Limits of the public API of a cluster node.
#[derive(Clone, Debug)]
pub struct GatewayLimits {
    /// Largest object accepted (`--max-object-size`).
    pub max_object_size: u64,
    /// Largest batch body.
    pub max_batch_bytes: u64,
    /// A body that sends nothing for this long is abandoned (408).
    pub body_idle_timeout: Duration,
    /// A GET or HEAD without the object's cookie is a 404.
    pub require_cookies: bool,
    /// Request bytes held in memory at once by every handler together
    /// (small PUT bodies, batch bodies, the tract a large PUT fills): past
    /// it a request waits up to a second, then gets 503 (docs/security.md).
    pub max_buffered_bytes: u64,
    /// What one access key's requests may hold of it at once (past it a
    /// request of that key gets 503 at once; others are not held back).
    pub max_buffered_bytes_per_key: u64,
}

impl Default for GatewayLimits {
    fn default() -> Self {
        GatewayLimits {
            max_object_size: 5 << 30,
            max_batch_bytes: 256 << 20,
            body_idle_timeout: Duration::from_secs(30),
            require_cookies: false,
            max_buffered_bytes: 2 << 30,
            max_buffered_bytes_per_key: 512 << 20,
        }
    }
}
