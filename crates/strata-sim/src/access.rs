//! The compact request the simulator replays.

use strata_trace::{Op, Request};

/// What a request does, as the simulator sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A read (a lookup).
    Read,
    /// A write of the whole object.
    Write,
    /// A delete.
    Delete,
}

/// One request, reduced to what caches need.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Access {
    /// Seconds since the trace's epoch.
    pub time: f64,
    /// The object key.
    pub key: u64,
    /// The object's size in bytes.
    pub size: u64,
    /// Position of the next request to the same key (`u64::MAX`: none or
    /// unknown); only Belady reads it.
    pub next: u64,
    /// Read, write or delete.
    pub kind: Kind,
    /// The request's caching hint (false: asks caches not to admit).
    pub admit: bool,
}

impl Access {
    /// A read of `key` of `size` bytes at `time`.
    pub fn read(time: f64, key: u64, size: u64) -> Access {
        Access {
            time,
            key,
            size,
            next: u64::MAX,
            kind: Kind::Read,
            admit: true,
        }
    }
}

impl From<&Request> for Access {
    fn from(r: &Request) -> Access {
        Access {
            time: r.time,
            key: r.object,
            size: r.size,
            next: u64::MAX,
            kind: match r.op {
                Op::Get => Kind::Read,
                Op::Put => Kind::Write,
                Op::Delete => Kind::Delete,
            },
            admit: r.cache_hint != Some(false),
        }
    }
}

/// Fills `next` of every access with the position of the next access to the
/// same key (a backward pass; the whole trace must be in memory).
pub fn next_access_pass(accesses: &mut [Access]) {
    let mut seen = crate::fasthash::key_map::<u64>();
    for (i, a) in accesses.iter_mut().enumerate().rev() {
        a.next = seen.insert(a.key, i as u64).unwrap_or(u64::MAX);
    }
}
