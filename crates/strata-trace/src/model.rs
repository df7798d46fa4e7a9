//! The request record shared by every trace format and every lab tool.

use std::fmt;
use std::path::PathBuf;

/// What a request does to its object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Op {
    /// A read of the object (or of `length` bytes at `offset` in it).
    Get,
    /// A write (create or overwrite) of the object.
    Put,
    /// A delete of the object.
    Delete,
}

impl Op {
    /// The lower-case name used in CSV traces and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::Delete => "delete",
        }
    }

    /// Parses the names trace files use for an op (case-insensitive):
    /// get/read/r, put/set/write/w/add/replace, delete/del/remove/d.
    pub fn parse(s: &str) -> Option<Op> {
        match s.trim().to_ascii_lowercase().as_str() {
            "get" | "read" | "r" | "gets" => Some(Op::Get),
            "put" | "set" | "write" | "w" | "add" | "replace" | "cas" | "append" | "prepend" => {
                Some(Op::Put)
            }
            "delete" | "del" | "remove" | "d" | "rm" => Some(Op::Delete),
            _ => None,
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The storage tier that served a read (written by the store into its traces).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// The RAM object cache.
    Ram,
    /// The flash tier or the flash read cache.
    Flash,
    /// The disk tier.
    Disk,
}

impl Tier {
    /// The lower-case name used in CSV traces and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::Ram => "ram",
            Tier::Flash => "flash",
            Tier::Disk => "disk",
        }
    }

    /// Parses `ram`, `flash` or `disk` (case-insensitive).
    pub fn parse(s: &str) -> Option<Tier> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ram" | "mem" | "memory" => Some(Tier::Ram),
            "flash" | "ssd" => Some(Tier::Flash),
            "disk" | "hdd" => Some(Tier::Disk),
            _ => None,
        }
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One storage request.
///
/// `object` and `workload` are numeric ids; formats that name objects or
/// workloads by string map them to ids (a stable hash for objects, a name
/// table for workloads) in their reader.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Seconds since an arbitrary epoch of the trace (fractions allowed).
    pub time: f64,
    /// What the request does.
    pub op: Op,
    /// The object id.
    pub object: u64,
    /// The workload id (0 when the trace has no workloads).
    pub workload: u32,
    /// The object's size in bytes (for a ranged read, the whole object's size
    /// when known, else the bytes transferred).
    pub size: u64,
    /// Byte offset of a ranged request within the object.
    pub offset: Option<u64>,
    /// Byte length of a ranged request.
    pub length: Option<u64>,
    /// The object's creation time in seconds, when the trace records it.
    pub create_time: Option<f64>,
    /// A per-request caching hint: `Some(false)` asks caches not to admit.
    pub cache_hint: Option<bool>,
    /// Index of the next request to the same object, when the trace has it
    /// (libCacheSim's `next_access_vtime`); `None` for never or unknown.
    pub next_access: Option<u64>,
    /// The tier that served a read (store traces).
    pub tier: Option<Tier>,
    /// The request's latency in microseconds (store traces).
    pub latency_us: Option<u32>,
}

impl Request {
    /// A request with only the required fields set.
    pub fn new(time: f64, op: Op, object: u64, workload: u32, size: u64) -> Request {
        Request {
            time,
            op,
            object,
            workload,
            size,
            offset: None,
            length: None,
            create_time: None,
            cache_hint: None,
            next_access: None,
            tier: None,
            latency_us: None,
        }
    }

    /// Bytes this request transfers: `length` for a ranged request, else `size`.
    pub fn bytes(&self) -> u64 {
        self.length.unwrap_or(self.size)
    }
}

/// What can go wrong while reading or writing a trace.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// The file could not be opened, read or written.
    #[error("{path}: {source}")]
    Io {
        /// The trace file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A record could not be parsed.
    #[error("{path}: record {record}: {reason}")]
    BadRecord {
        /// The trace file.
        path: PathBuf,
        /// The 1-based record number (for a CSV, the data row number).
        record: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// The file ends in the middle of a record.
    #[error("{path}: record {record} is truncated ({have} of {need} bytes)")]
    Truncated {
        /// The trace file.
        path: PathBuf,
        /// The 1-based number of the truncated record.
        record: u64,
        /// Bytes present.
        have: usize,
        /// Bytes a record needs.
        need: usize,
    },
    /// The file is not in the expected (or any recognised) format.
    #[error("{path}: {reason}")]
    BadFormat {
        /// The trace file.
        path: PathBuf,
        /// Why the format was rejected or could not be detected.
        reason: String,
    },
}
