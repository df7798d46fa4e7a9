//! Store configuration.

use crate::format::superblock::Tier;
use std::path::PathBuf;
use std::time::Duration;

/// One device directory of a store and its tier class.
#[derive(Clone, Debug, PartialEq)]
pub struct DeviceConfig {
    /// Directory holding this device's segment files.
    pub path: PathBuf,
    /// Tier class of the device.
    pub tier: Tier,
}

/// How to open a store. [`StoreConfig::new`] gives working defaults.
#[derive(Clone, Debug)]
pub struct StoreConfig {
    /// Device directories; the RAM index covers all of them.
    pub devices: Vec<DeviceConfig>,
    /// A segment is sealed once it reaches this many bytes (default 1 GiB;
    /// at most 16 GiB).
    pub segment_size: u64,
    /// Largest object accepted (default 64 MiB).
    pub max_object_size: u64,
    /// Create missing device directories instead of failing (default false).
    pub create_dirs: bool,
    /// Compact a sealed segment by itself once this fraction of its bytes is
    /// garbage (deleted or overwritten needles). Default 0.4.
    pub compaction_garbage_ratio: f64,
    /// Run compactions in the background (default true).
    pub auto_compaction: bool,
    /// Upper bound on compaction I/O (bytes read plus written per second),
    /// so that GETs keep their latency during a compaction. Default 64 MiB/s;
    /// `None` for unthrottled.
    pub compaction_bytes_per_s: Option<u64>,
    /// How often dirty index checkpoints are written in the background
    /// (default 1 s).
    pub checkpoint_interval: Duration,
    /// Fingerprint bits per object in the node-wide index's run (default
    /// 14: 0.61 extra device reads per 10,000 GETs of absent keys, each
    /// bit more halves that; 8..=40).
    pub fingerprint_bits: u32,
    /// Advise the kernel that segment reads are random (no readahead), so
    /// that a GET costs exactly the pages of its needle (default true).
    pub random_access_advice: bool,
    /// Segment files kept open at most (active segments' always are;
    /// sealed ones are opened on use and the least recently used closed
    /// beyond this). 0 (default): half the process's file-descriptor limit.
    pub max_open_files: usize,
    /// Bits of an identity's hash that the node index's recent table keys
    /// by: 64 (default) in production. Fewer make identities share
    /// candidates on purpose, which the store tells apart by reading their
    /// needles' headers; tests set it low to exercise that path (1..=64).
    /// The table then holds at most about 256 × 2^bits entries (those of
    /// one hash share a home bucket and are displaced 255 places at most);
    /// past that a put or an open fails with `RecentError::Unplaceable`.
    pub recent_hash_bits: u32,
    /// Identities per hash partition of the node index's run (default
    /// 2^20): a merge rebuilds one partition at a time, so its transient
    /// memory follows this, not the number of objects (about 50 bytes per
    /// identity of a partition: ~50 MB at the default). Tests set it low to
    /// run merges over many partitions.
    pub run_partition_size: usize,
    /// Bytes of an active segment's file written ahead of its needles
    /// (zeros, synced) by a background thread, so that a batch's
    /// `fdatasync` overwrites blocks the file already has instead of
    /// growing it: on ext4 a sync that grows a file also commits the
    /// journal (measured 3–14x slower at 1 MiB per sync,
    /// docs/benchmarks.md). At most this much ahead, topped up when less
    /// than min(half of it, max(4 MiB, 16 batches)) is left; never past the
    /// segment size, never on tmpfs, and only while the file system keeps
    /// 1/16 of its size free; the zeros past the last
    /// needle are cut when the segment is sealed or the store closed, and
    /// by the next open after a crash (docs/store-format.md, *Prepared
    /// space*). 0 turns it off (default 32 MiB).
    pub prepare_ahead: u64,
    /// Tells which of two needles of one identity is the newer from their
    /// data (`Greater`: the first), or cannot (`None`, or `Equal`). Without
    /// it (default), a put that replaces a version in another segment
    /// flags that needle superseded and `fdatasync`s its segment before the
    /// put is acknowledged, because the flags are all an open has to
    /// settle two live-looking needles of an identity (segment ids do not
    /// follow time across devices). With it, the flag is written at once
    /// but synced later (by the background thread, before any delete and
    /// at close), and an open settles two unflagged needles by this order
    /// (docs/store-format.md, *Needle*). The row stores of `strata server`
    /// order by their records' stamps. The order's name is kept in each
    /// device directory ([`ORDER_FILE`]), and an open without that order
    /// (or with another) is refused: an open settles ties for good (it
    /// flags the loser), and by segment id it could keep an older version.
    pub version_order: Option<VersionOrder>,
}

/// The file of a device directory that names the store's version order.
pub const ORDER_FILE: &str = "strata.order";

/// Orders two needles' data by version; see [`StoreConfig::version_order`].
#[derive(Clone, Copy, Debug)]
pub struct VersionOrder {
    /// Its name, kept in [`ORDER_FILE`] (one line).
    pub name: &'static str,
    /// Which of two needles' data is the newer (`Greater`: the first), or
    /// `None` (or `Equal`) when it cannot tell.
    pub cmp: fn(&[u8], &[u8]) -> Option<std::cmp::Ordering>,
}

/// The version order named in the device directory `dir`, if any (a store
/// opened with one; see [`StoreConfig::version_order`]).
pub fn recorded_order(dir: &std::path::Path) -> std::io::Result<Option<String>> {
    match std::fs::read_to_string(dir.join(ORDER_FILE)) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

impl StoreConfig {
    /// A single-device store at `path` with the given tier and defaults.
    pub fn new(path: impl Into<PathBuf>, tier: Tier) -> Self {
        StoreConfig {
            devices: vec![DeviceConfig {
                path: path.into(),
                tier,
            }],
            segment_size: 1 << 30,
            max_object_size: 64 << 20,
            create_dirs: false,
            compaction_garbage_ratio: 0.4,
            auto_compaction: true,
            compaction_bytes_per_s: Some(64 << 20),
            checkpoint_interval: Duration::from_secs(1),
            fingerprint_bits: crate::index::DEFAULT_FINGERPRINT_BITS,
            random_access_advice: true,
            max_open_files: 0,
            recent_hash_bits: 64,
            run_partition_size: 1 << 20,
            prepare_ahead: 32 << 20,
            version_order: None,
        }
    }

    /// Adds a device directory.
    pub fn with_device(mut self, path: impl Into<PathBuf>, tier: Tier) -> Self {
        self.devices.push(DeviceConfig {
            path: path.into(),
            tier,
        });
        self
    }
}
