//! The values the store's API takes and hands out: objects to write and
//! read back, segment listings, counters and memory use, and the reports
//! of an open and of a compaction or move.

use crate::format::superblock::Tier;
#[cfg(doc)]
use crate::{Store, StoreConfig, DAMAGE_NOTE};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

/// One object to write.
#[derive(Clone, Copy, Debug)]
pub struct PutItem<'a> {
    /// 64-bit key.
    pub key: u64,
    /// 32-bit alternate key.
    pub alt_key: u32,
    /// Random cookie, checked on every read.
    pub cookie: u32,
    /// The first bytes of the object, written before [`PutItem::data`]
    /// (empty for most callers): a caller that frames its bodies with a
    /// header of its own (the server's row layout) hands the header and
    /// the body apart, so the body goes to the kernel where it lies
    /// instead of being copied behind the header first. The needle's data
    /// is `head` then `data`, one checksum over both.
    pub head: &'a [u8],
    /// The object's bytes (after `head`).
    pub data: &'a [u8],
}

/// An object read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// The object's bytes (checksum verified).
    pub data: Vec<u8>,
    /// Tier of the device it was read from.
    pub tier: Tier,
    /// Segment it was read from.
    pub segment: u64,
    /// Index of the device (in [`StoreConfig::devices`]) it was read from.
    pub device: usize,
    /// The needle's cookie (lets a caller that read without a cookie, e.g.
    /// the HTTP node in its default mode, hand the cookie back).
    pub cookie: u32,
}

/// The start of an object's data, as [`Store::get_prefix`] read it.
#[derive(Clone, Debug)]
pub struct Prefix {
    /// The first bytes of the data (all of it when it was short enough).
    pub data: Vec<u8>,
    /// The length of the whole data.
    pub size: u32,
    /// The needle was read whole and its data's checksum verified (else
    /// only its header's).
    pub verified: bool,
    /// Tier of the device it was read from.
    pub tier: Tier,
    /// Segment it was read from.
    pub segment: u64,
}

/// A segment as [`Store::segments`] lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct SegmentInfo {
    /// Segment id (higher ids were created later).
    pub id: u64,
    /// Generation (bumped by each compaction or move).
    pub generation: u64,
    /// Device index.
    pub device: usize,
    /// Tier of its device.
    pub tier: Tier,
    /// Segment file.
    pub path: PathBuf,
    /// Bytes of the superblock and the needles (an active segment's file
    /// can be longer while the store runs: zeros prepared ahead of its
    /// writes, `StoreConfig::prepare_ahead`).
    pub size: u64,
    /// Needles in the file.
    pub needles: u64,
    /// True for a device's active (appendable) segment.
    pub active: bool,
    /// Estimated fraction of the bytes that are garbage (deleted or
    /// overwritten needles).
    pub garbage_ratio: f64,
    /// Creation time, ns since the Unix epoch.
    pub created_unix_ns: u64,
}

/// Counters since the store was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// `pread` calls on segment files by GETs, deletes and liveness checks
    /// (a GET of a live needle costs exactly one).
    pub preads: u64,
    /// Bytes those preads returned.
    pub bytes_read: u64,
    /// Needle bytes written to flash devices.
    pub bytes_written_flash: u64,
    /// Needle bytes written to disk devices.
    pub bytes_written_disk: u64,
    /// fdatasync calls on segment files.
    pub fdatasyncs: u64,
    /// Completed compactions.
    pub compactions: u64,
    /// Bytes reclaimed by compactions.
    pub bytes_reclaimed: u64,
    /// Probes of the node-wide index by GETs (the recent map, then the run
    /// if the recent map does not know the identity): at most 2 per GET.
    pub index_probes: u64,
    /// GETs (index lookups) counted in `index_probes`.
    pub index_lookups: u64,
    /// Merges of the recent map into the run.
    pub merges: u64,
    /// Needle headers read (each one `pread`, counted in `preads`) to tell
    /// apart identities whose fingerprints the recent table holds alike: a
    /// put or delete of an object written since the last merge reads its
    /// previous needle's header, and a remainder shared by two identities
    /// costs one more.
    pub header_checks: u64,
}

/// The live counters behind [`Counters`].
#[derive(Default)]
pub(super) struct CounterCells {
    pub(super) preads: AtomicU64,
    /// Needle headers read to tell recent-table candidates apart.
    pub(super) header_checks: AtomicU64,
    pub(super) bytes_read: AtomicU64,
    pub(super) written: [AtomicU64; 2],
    pub(super) fdatasyncs: AtomicU64,
    pub(super) compactions: AtomicU64,
    pub(super) reclaimed: AtomicU64,
    pub(super) probes: AtomicU64,
    pub(super) gets: AtomicU64,
    pub(super) merges: AtomicU64,
}

impl CounterCells {
    /// Counts `calls` reads of `len` bytes in all.
    pub(super) fn read(&self, calls: u64, len: u64) {
        self.preads.fetch_add(calls, Ordering::Relaxed);
        self.bytes_read.fetch_add(len, Ordering::Relaxed);
    }
}

/// RAM used by the index.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemoryUsage {
    /// Bytes of the run (the merged node-wide index) and of the sealed
    /// segments' offsets and deleted bits.
    pub sealed_bytes: u64,
    /// Objects held by the run.
    pub sealed_objects: u64,
    /// Bytes of the recent map (writes since the last merge) and of the
    /// active segments' offsets and identities.
    pub active_bytes: u64,
    /// Objects (and tombstones) held by the recent map.
    pub active_objects: u64,
    /// Hash partitions of the run (0: no run yet).
    pub run_partitions: u64,
}

impl MemoryUsage {
    /// Index bytes per object held by the run (with the sealed segments).
    pub fn sealed_bytes_per_object(&self) -> f64 {
        self.sealed_bytes as f64 / self.sealed_objects.max(1) as f64
    }
    /// Index bytes per object of the recent map and active segments.
    pub fn active_bytes_per_object(&self) -> f64 {
        self.active_bytes as f64 / self.active_objects.max(1) as f64
    }
}

/// Progress of a compaction or move, as given to its callback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RewriteProgress {
    /// Segment being rewritten.
    pub segment: u64,
    /// Bytes of the source scanned so far.
    pub done: u64,
    /// Bytes of the source.
    pub total: u64,
}

/// What a compaction or move did.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RewriteReport {
    /// Segment id.
    pub segment: u64,
    /// Size before.
    pub bytes_before: u64,
    /// Size after.
    pub bytes_after: u64,
    /// Needles before.
    pub needles_before: u64,
    /// Needles kept.
    pub needles_after: u64,
    /// Wall time.
    pub seconds: f64,
}

/// One needle of a sealed segment, as [`Store::needles`] yields it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredNeedle {
    /// Byte offset in the segment.
    pub offset: u64,
    /// Key.
    pub key: u64,
    /// Alternate key.
    pub alt_key: u32,
    /// Cookie.
    pub cookie: u32,
    /// Flag bits as on disk.
    pub flags: u32,
    /// The data.
    pub data: Vec<u8>,
}

/// What an open found and repaired.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Segments loaded.
    pub segments: usize,
    /// Segments whose checkpoint was missing or stale and were scanned.
    pub scanned_segments: usize,
    /// Needles found past the checkpoints (orphans).
    pub orphan_needles: u64,
    /// Torn tails cut off: (segment id, offset cut at, bytes removed). A
    /// batch a crash interrupted in its write, never acknowledged: a
    /// prefix of it a kill left, or, in the newest segment, a last batch
    /// whose write a power cut tore in any of its pages (sectors of zeros
    /// among whole needles), cut whole.
    pub torn_tails: Vec<(u64, u64, u64)>,
    /// Zeros past active segments' last needles (prepared space,
    /// `StoreConfig::prepare_ahead`) that a stop without `close` (a kill, a
    /// crash) left, cut off: bytes. Not damage.
    pub prepared_bytes_cut: u64,
    /// Damaged regions kept in place (not at a tail): (segment id, offset).
    pub corrupt_regions: Vec<(u64, u64)>,
    /// Those of `corrupt_regions` whose header names no identity (hit by
    /// more than one flipped bit, or not a needle's start): what they held
    /// is unknown, and an identity whose newest needle was there now reads
    /// as its older needle, if it has one.
    pub nameless_regions: Vec<(u64, u64)>,
    /// Segment files whose superblock had one flipped bit, corrected by its
    /// checksum and written back (the segment serves as it was).
    pub mended_superblocks: Vec<PathBuf>,
    /// Needles found by a scan whose header had one flipped bit, corrected
    /// by its checksum, their data whole: indexed and read as written, and
    /// the one byte that differs written back. (segment id, offset).
    pub mended_headers: Vec<(u64, u64)>,
    /// Files named like segments that are not readable segments (a bad
    /// superblock, an empty file, a name that does not parse), moved to
    /// the directory's `quarantine/` and left out; the rest serves.
    pub quarantined: Vec<Quarantined>,
    /// Why the checkpoints of scanned segments could not be written when
    /// the store opened (a full device, typically). The store serves
    /// anyway: checkpoints only make the next open faster, and the
    /// background thread retries.
    pub checkpoints_deferred: Option<String>,
    /// What an earlier open found that may have lost acknowledged needles
    /// and that has not been made good since ([`DAMAGE_NOTE`], cleared by
    /// [`Store::damage_dealt_with`]).
    pub earlier_damage: Option<String>,
}

impl OpenReport {
    /// Whether the store may lack needles it acknowledged, or hold an
    /// identity's older needle as its newest, because of what the open
    /// found: a cut torn tail (a batch cut short by a crash, which was
    /// never acknowledged, cannot be told from an acknowledged batch whose
    /// last needle was damaged), a damaged region whose header names no
    /// identity, or a segment file set aside. A replicated store then
    /// catches up from its replicas before it serves reads again.
    pub fn may_lack_records(&self) -> bool {
        !self.torn_tails.is_empty()
            || !self.nameless_regions.is_empty()
            || !self.quarantined.is_empty()
            || self.earlier_damage.is_some()
    }
}

/// A file the open set aside (see [`OpenReport::quarantined`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// Where the file was.
    pub path: PathBuf,
    /// Where it is now (`<device dir>/quarantine/<name>`), or None if it
    /// could not be moved (it is then left in place and skipped again at
    /// the next open).
    pub moved_to: Option<PathBuf>,
    /// What is wrong with it.
    pub reason: String,
}
