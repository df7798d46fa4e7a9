//! The store's errors, in the user's terms: which directory, which segment
//! file, which offset, which object.

use std::path::PathBuf;

/// Everything the segment store can report.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A device directory does not exist.
    #[error("store directory {0} does not exist")]
    MissingDirectory(PathBuf),
    /// A path that should be a directory is something else.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// Another process has the store directory open.
    #[error("store directory {0} is in use by another process (its strata.lock is held)")]
    InUse(PathBuf),
    /// The store orders versions by an order this open was not given
    /// (`StoreConfig::version_order`, named in the directory's
    /// `strata.order`).
    #[error("store directory {dir} orders versions by `{recorded}` (its strata.order), and was opened {given}: opening it so could keep an older version of an object after a crash")]
    VersionOrder {
        /// The device directory.
        dir: PathBuf,
        /// The order its file names.
        recorded: String,
        /// How it was opened ("without an order", "with `x`").
        given: String,
    },
    /// The node index's recent table could not take an entry.
    #[error("node index: {0}")]
    Index(#[from] crate::recent::RecentError),
    /// The configuration is unusable.
    #[error("invalid store configuration: {0}")]
    Config(String),
    /// A file named like a segment is not a Strata segment.
    #[error("{path} is not a Strata segment: {reason}")]
    NotASegment {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A segment written by a newer Strata (a superblock version this
    /// build does not read): the store refuses to open rather than set it
    /// aside as damaged.
    #[error("{path} was written by a newer Strata: {reason}")]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// Which version.
        reason: String,
    },
    /// A needle failed its checksum or magic checks: the bytes on disk are
    /// damaged. Never answered with the damaged bytes.
    #[error("corrupt needle in segment {segment:016x} ({path}) at offset {offset}: {reason}")]
    Corrupt {
        /// Segment id.
        segment: u64,
        /// Segment file.
        path: PathBuf,
        /// Byte offset of the needle.
        offset: u64,
        /// What check failed.
        reason: String,
    },
    /// A GET under [`crate::cached_only`] found its needle (or part of it)
    /// out of the page cache: nothing was read, nothing changed; read again
    /// outside it (where the read may wait for the device).
    #[error("the needle is not in the page cache (a read that may not wait for the device)")]
    NotCached,
    /// An object larger than the store's maximum.
    #[error("object of {size} bytes is over the maximum object size of {max} bytes")]
    ObjectTooLarge {
        /// Size given.
        size: u64,
        /// Configured maximum.
        max: u64,
    },
    /// No device of the requested tier.
    #[error("the store has no {0} device")]
    NoDeviceForTier(crate::Tier),
    /// The segment id names no segment of this store.
    #[error("no segment {0:016x} in this store")]
    NoSuchSegment(u64),
    /// The operation needs a sealed segment.
    #[error("segment {0:016x} is the active segment of its device; only sealed segments can be compacted or moved")]
    SegmentActive(u64),
    /// The device index is out of range.
    #[error("no device number {0} in this store")]
    NoSuchDevice(usize),
    /// A move's destination device has no room for the segment and the
    /// headroom a move leaves for client writes ([`crate::Store::move_segment`]).
    /// Nothing was written; try again once the device has room.
    #[error("{} has {available} bytes free; moving segment {segment:016x} there needs {needed}", dir.display())]
    NoRoom {
        /// The destination device's directory.
        dir: PathBuf,
        /// The segment.
        segment: u64,
        /// Bytes free on the destination's file system.
        available: u64,
        /// The segment's bytes plus the headroom.
        needed: u64,
    },
    /// The store's write path failed earlier and was poisoned.
    #[error("the store hit a write error and is read-only until reopened: {0}")]
    Poisoned(String),
    /// An I/O error, with what was being done.
    #[error("{what} {path}: {source}")]
    Io {
        /// What was being done ("writing", "reading", ...).
        what: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StoreError {
        let path = path.into();
        move |source| StoreError::Io { what, path, source }
    }

    /// True when the error means the device ran out of space (ENOSPC, or a
    /// file-size limit, EFBIG).
    pub fn is_out_of_space(&self) -> bool {
        match self {
            StoreError::Io { source, .. } => matches!(source.raw_os_error(), Some(28) | Some(27)),
            _ => false,
        }
    }
}

/// Result alias of the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
