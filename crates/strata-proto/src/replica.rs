//! The calls a coordinator makes on one replica, as data: what each call
//! carries, what it answers, and why a replica refuses one.
//!
//! A coordinator (the Rust client, or any node for the public and the S3
//! API) makes these calls on every replica of a row. A replica in another
//! process gets them as the HTTP requests of the module documentation of
//! this crate; the replica in the coordinator's own process gets them as
//! function calls, with no request built or parsed. Both answer the same
//! values, and [`Refusal::status`] / [`Refusal::from_status`] are the one
//! mapping between a refusal and its HTTP status.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::IndexEntry;

/// What a replica read of one record found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RecordRead {
    /// The record (its first bytes when the read was limited), its stamp,
    /// the whole record's length when only its start was asked for, and
    /// where the replica read it from (`ram`, `flash`, `disk`, ...).
    Found {
        /// The record, or its first bytes.
        record: Bytes,
        /// The write's stamp.
        stamp: u64,
        /// The whole record's length, when `record` is its start.
        len: Option<u64>,
        /// Where it was read from ([`crate::TIER_HEADER`]).
        tier: Option<String>,
    },
    /// A tombstone of this stamp: a replica that missed the delete may
    /// still hold the older record, which must not be served.
    Deleted {
        /// The delete's stamp.
        stamp: u64,
    },
    /// No record of the name this replica may serve.
    Absent,
}

/// What a replica's tombstone replaced: the newest copy older than the
/// delete, if it held one.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Replaced {
    /// The replaced copy's stamp (none: nothing older was there).
    pub stamp: Option<u64>,
    /// Whether that copy was a live record (not a tombstone).
    pub live: bool,
    /// The copy itself when it was a manifest (the coordinator deletes its
    /// tracts).
    pub manifest: Option<Bytes>,
}

/// How a change of a listing entry is ordered against what the replica
/// holds for the name (`?order=` on the wire).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndexOrder {
    /// A writer's change: applied unless the name holds a newer stamp
    /// (an entry or a tombstone); stamp 0 (no stamp) always applies.
    Write,
    /// A copied entry or tombstone (recovery, a rebuild): applied only
    /// over nothing or something strictly older.
    Copy,
    /// The resolution of a write intent of stamp `upto` from the object's
    /// head record (docs/placement.md, "Write intents"): applied over
    /// nothing, something strictly older, or anything the interrupted
    /// write itself may have left (stamp at most `upto`), never over a
    /// later write.
    Resolve {
        /// The intent's stamp.
        upto: u64,
    },
}

/// One change of one name's listing entry on a replica of the bucket's
/// index row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexChange {
    /// The bucket.
    pub bucket: String,
    /// The name.
    pub key: String,
    /// The new entry (its stamp is the change's), or none: a removal.
    pub entry: Option<IndexEntry>,
    /// The change's stamp.
    pub stamp: u64,
    /// How it is ordered.
    pub order: IndexOrder,
    /// Also record the write intent of this stamp for the name, in the
    /// same durable commit (only on the replica in the coordinator's own
    /// process, when it is the row's only replica: `?intent=1`).
    pub intent: bool,
}

/// Why a replica did not do what it was asked. On the wire each is one
/// HTTP status with the reason as the body ([`Refusal::status`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The call's table version is older than the replica's (409, with the
    /// replica's version in [`crate::TABLE_VERSION_HEADER`]): fetch the new
    /// table and call again.
    Stale {
        /// The replica's table version.
        at: u64,
    },
    /// The row is not on this replica in the call's table (421).
    NotHere(String),
    /// The replica's device is full (507): the caller's to know at once.
    Full(String),
    /// The call itself is wrong (400).
    Bad(String),
    /// The call conflicts with what the replica holds (409 without a
    /// table version): an append to a small object, a purge a stripe
    /// still needs.
    Conflict(String),
    /// The replica cannot answer just now (503): retry, or ask another.
    Unavailable(String),
    /// The replica failed (500): its device could not read or write.
    Failed(String),
    /// No answer: the replica could not be reached or did not answer in
    /// time (no HTTP status).
    Unreachable(String),
}

impl Refusal {
    /// The HTTP status that carries this refusal (0 for
    /// [`Refusal::Unreachable`], which never travels).
    pub fn status(&self) -> u16 {
        match self {
            Refusal::Stale { .. } | Refusal::Conflict(_) => 409,
            Refusal::NotHere(_) => 421,
            Refusal::Full(_) => 507,
            Refusal::Bad(_) => 400,
            Refusal::Unavailable(_) => 503,
            Refusal::Failed(_) => 500,
            Refusal::Unreachable(_) => 0,
        }
    }

    /// The reason, as the replica gave it.
    pub fn reason(&self) -> String {
        match self {
            Refusal::Stale { at } => format!("stale table version; the replica is at {at}"),
            Refusal::NotHere(r)
            | Refusal::Full(r)
            | Refusal::Bad(r)
            | Refusal::Conflict(r)
            | Refusal::Unavailable(r)
            | Refusal::Failed(r)
            | Refusal::Unreachable(r) => r.clone(),
        }
    }

    /// The refusal an answer of `status` carries (`version`: its table
    /// version header; `body`: its reason).
    pub fn from_status(status: u16, version: Option<u64>, body: &[u8]) -> Refusal {
        let why = String::from_utf8_lossy(body).trim_end().to_string();
        match (status, version) {
            (409, Some(at)) => Refusal::Stale { at },
            (409, None) => Refusal::Conflict(why),
            (421, _) => Refusal::NotHere(why),
            (507, _) => Refusal::Full(why),
            (400..=499, _) => Refusal::Bad(format!("{status}: {why}")),
            (503, _) => Refusal::Unavailable(why),
            (s, _) => Refusal::Failed(format!("{s}: {why}")),
        }
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status() {
            0 => f.write_str(&self.reason()),
            s => write!(f, "{s}: {}", self.reason()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_survives_its_status() {
        for r in [
            Refusal::Stale { at: 7 },
            Refusal::NotHere("n".into()),
            Refusal::Full("f".into()),
            Refusal::Conflict("c".into()),
            Refusal::Unavailable("u".into()),
        ] {
            let version = matches!(r, Refusal::Stale { .. }).then_some(7);
            let back = Refusal::from_status(r.status(), version, r.reason().as_bytes());
            assert_eq!(back.status(), r.status(), "{r:?}");
            assert_eq!(
                std::mem::discriminant(&back),
                std::mem::discriminant(&r),
                "{r:?}"
            );
        }
        assert!(matches!(
            Refusal::from_status(500, None, b"disk"),
            Refusal::Failed(_)
        ));
        assert!(matches!(
            Refusal::from_status(413, None, b"big"),
            Refusal::Bad(_)
        ));
    }
}
