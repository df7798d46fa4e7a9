//! The state as a core and entries, and the changes from one state to the
//! next: what the backends write instead of the whole state (issue 34,
//! finding 9: a bucket creation rewrote all metadata, 25 a second at 9,000
//! buckets).
//!
//! The **core** is everything but the four maps that grow with use: S3
//! buckets, S3 keys, erasure-coded stripes and nodes' scrub reports. Each
//! element of those maps is an **entry**. [`diff`] gives the changes that
//! turn one state into another: an entry put or deleted for each element
//! that differs, and the core when any of its fields does. The file
//! backend appends them to `meta.log` as one checksummed frame per save
//! (below); etcd keeps each entry under its own key. Either way a save
//! costs what changed, not the state's size.
//!
//! ## `meta.log` (format 1), byte by byte
//!
//! ```text
//! file   := magic frame(header) frame(batch)*
//! magic  := "STRMLOG1"                       8 bytes
//! frame  := FRAME_MAGIC len crc body
//!   FRAME_MAGIC  u32 LE 0x4c4d5453 ("STML")
//!   len          u32 LE, bytes of body, 1 ..= MAX_FRAME
//!   crc          u32 LE, CRC-32C of body
//!   body         JSON
//! header := {"snapshot": "<BLAKE3 of meta.json's bytes, 64 hex digits>"}
//! batch  := {"seq": N, "changes": [Change, ...]}
//! ```
//!
//! A header names the snapshot the log applies to: a log whose header
//! names other bytes than `meta.json` holds (a compaction cut between
//! writing the snapshot and replacing the log) is ignored, since that
//! snapshot already holds every change of it. Each save appends one batch
//! and fdatasyncs it before the change is acknowledged, so a power cut can
//! damage only the last frame: a frame that is incomplete or fails its
//! checksum, with no valid frame after it, is that torn tail and is cut
//! off; a damaged frame followed by a valid one is corruption, and the
//! service refuses to start, naming the file and the offset.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::api::{ScrubReport, StripeRecord};
use crate::state::{
    BucketRecord, ClusterConfig, ClusterState, KeyRecord, NodeRecord, RecoveryRecord, TableChange,
};

/// One change between two states.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// The core: the state with its four entry maps empty.
    Core(Box<ClusterState>),
    /// An S3 bucket set (Some) or removed (None).
    Bucket {
        /// Its name.
        name: String,
        /// Its record.
        record: Option<BucketRecord>,
    },
    /// An S3 key set or removed.
    Key {
        /// Its access key id.
        id: String,
        /// Its record.
        record: Option<KeyRecord>,
    },
    /// An erasure-coded stripe set or removed.
    Stripe {
        /// Its id.
        id: u64,
        /// Its record.
        record: Option<StripeRecord>,
    },
    /// A node's scrub report set or removed.
    Scrub {
        /// The node's id.
        node: u32,
        /// Its report.
        report: Option<ScrubReport>,
    },
}

/// The core's fields, borrowed (compared without copying the state).
/// Destructuring [`ClusterState`] whole in [`core_ref`] makes a new field
/// a compile error here until it is placed in the core or in an entry map.
#[derive(PartialEq)]
struct CoreRef<'a> {
    format: u32,
    config: &'a ClusterConfig,
    nodes: &'a BTreeMap<u32, NodeRecord>,
    next_node: u32,
    next_disk: u32,
    table: &'a Option<strata_placement::PlacementTable>,
    history: &'a Vec<TableChange>,
    recovery: &'a RecoveryRecord,
    tier_plan: &'a Option<serde_json::Value>,
    tier_plan_version: u64,
    next_stripe: u64,
}

fn core_ref(s: &ClusterState) -> CoreRef<'_> {
    let ClusterState {
        format,
        config,
        nodes,
        next_node,
        next_disk,
        table,
        history,
        recovery,
        tier_plan,
        tier_plan_version,
        scrub: _,
        buckets: _,
        keys: _,
        stripes: _,
        next_stripe,
    } = s;
    CoreRef {
        format: *format,
        config,
        nodes,
        next_node: *next_node,
        next_disk: *next_disk,
        table,
        history,
        recovery,
        tier_plan,
        tier_plan_version: *tier_plan_version,
        next_stripe: *next_stripe,
    }
}

/// `s` without its entries.
pub fn core_of(s: &ClusterState) -> ClusterState {
    let c = core_ref(s);
    ClusterState {
        format: c.format,
        config: c.config.clone(),
        nodes: c.nodes.clone(),
        next_node: c.next_node,
        next_disk: c.next_disk,
        table: c.table.clone(),
        history: c.history.clone(),
        recovery: c.recovery.clone(),
        tier_plan: c.tier_plan.clone(),
        tier_plan_version: c.tier_plan_version,
        scrub: BTreeMap::new(),
        buckets: BTreeMap::new(),
        keys: BTreeMap::new(),
        stripes: BTreeMap::new(),
        next_stripe: c.next_stripe,
    }
}

/// Whether `a` and `b` have the same core.
pub fn same_core(a: &ClusterState, b: &ClusterState) -> bool {
    core_ref(a) == core_ref(b)
}

/// The changes of one map: a put for each key of `new` whose value is not
/// `old`'s, a delete for each key of `old` not in `new` (both in key
/// order, one pass over the two).
fn diff_map<K: Ord + Clone, V: PartialEq + Clone>(
    old: &BTreeMap<K, V>,
    new: &BTreeMap<K, V>,
    mut out: impl FnMut(K, Option<V>),
) {
    if old == new {
        return;
    }
    let (mut a, mut b) = (old.iter().peekable(), new.iter().peekable());
    loop {
        match (a.peek(), b.peek()) {
            (None, None) => break,
            (Some((ka, _)), None) => {
                out((*ka).clone(), None);
                a.next();
            }
            (None, Some((kb, vb))) => {
                out((*kb).clone(), Some((*vb).clone()));
                b.next();
            }
            (Some((ka, va)), Some((kb, vb))) => match ka.cmp(kb) {
                std::cmp::Ordering::Less => {
                    out((*ka).clone(), None);
                    a.next();
                }
                std::cmp::Ordering::Greater => {
                    out((*kb).clone(), Some((*vb).clone()));
                    b.next();
                }
                std::cmp::Ordering::Equal => {
                    if va != vb {
                        out((*kb).clone(), Some((*vb).clone()));
                    }
                    a.next();
                    b.next();
                }
            },
        }
    }
}

/// The changes that turn `old` into `new` (none when they are equal):
/// [`apply`]ing them to `old` gives `new`.
pub fn diff(old: &ClusterState, new: &ClusterState) -> Vec<Change> {
    let mut out = Vec::new();
    if !same_core(old, new) {
        out.push(Change::Core(Box::new(core_of(new))));
    }
    diff_map(&old.buckets, &new.buckets, |name, record| {
        out.push(Change::Bucket { name, record })
    });
    diff_map(&old.keys, &new.keys, |id, record| {
        out.push(Change::Key { id, record })
    });
    diff_map(&old.stripes, &new.stripes, |id, record| {
        out.push(Change::Stripe { id, record })
    });
    diff_map(&old.scrub, &new.scrub, |node, report| {
        out.push(Change::Scrub { node, report })
    });
    out
}

fn set<K: Ord, V>(map: &mut BTreeMap<K, V>, k: K, v: Option<V>) {
    match v {
        Some(v) => {
            map.insert(k, v);
        }
        None => {
            map.remove(&k);
        }
    }
}

/// Applies one change to `s`.
pub fn apply(s: &mut ClusterState, change: Change) {
    match change {
        Change::Core(core) => {
            let ClusterState {
                scrub,
                buckets,
                keys,
                stripes,
                ..
            } = std::mem::replace(s, *core);
            s.scrub = scrub;
            s.buckets = buckets;
            s.keys = keys;
            s.stripes = stripes;
        }
        Change::Bucket { name, record } => set(&mut s.buckets, name, record),
        Change::Key { id, record } => set(&mut s.keys, id, record),
        Change::Stripe { id, record } => set(&mut s.stripes, id, record),
        Change::Scrub { node, report } => set(&mut s.scrub, node, report),
    }
}

/// Every entry of `s` as a change (what a new etcd layout is filled with).
pub fn entries(s: &ClusterState) -> Vec<Change> {
    diff(&core_of(s), s)
}

/// A frame's magic: "STML" as a little-endian u32.
pub const FRAME_MAGIC: u32 = u32::from_le_bytes(*b"STML");
/// The log's magic.
pub const LOG_MAGIC: &[u8; 8] = b"STRMLOG1";
/// The largest frame body read back (a longer length is damage).
pub const MAX_FRAME: u32 = 256 << 20;
/// Bytes of a frame before its body.
pub const FRAME_HEAD: usize = 12;

/// The header frame's body.
#[derive(Debug, Serialize, Deserialize)]
pub struct Header {
    /// BLAKE3 of the snapshot's bytes, in hex.
    pub snapshot: String,
}

/// One save's frame body.
#[derive(Debug, Serialize, Deserialize)]
pub struct Batch {
    /// The save's number in this log (1, 2, …).
    pub seq: u64,
    /// Its changes, in order.
    pub changes: Vec<Change>,
}

/// `body` framed.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(FRAME_HEAD + body.len());
    out.extend_from_slice(&FRAME_MAGIC.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(body).to_le_bytes());
    out.extend_from_slice(body);
    out
}

/// The body of a valid frame at `at` in `bytes`, and the offset after it.
fn frame_at(bytes: &[u8], at: usize) -> Option<(&[u8], usize)> {
    let head = bytes.get(at..at.checked_add(FRAME_HEAD)?)?;
    let word = |i: usize| u32::from_le_bytes(head[i..i + 4].try_into().unwrap());
    if word(0) != FRAME_MAGIC {
        return None;
    }
    let len = word(4);
    if len == 0 || len > MAX_FRAME {
        return None;
    }
    let start = at + FRAME_HEAD;
    let body = bytes.get(start..start.checked_add(len as usize)?)?;
    (crc32c::crc32c(body) == word(8)).then_some((body, start + len as usize))
}

/// What a log's bytes hold.
#[derive(Debug)]
pub struct Read<'a> {
    /// The header's body.
    pub header: &'a [u8],
    /// Each batch's body, in order.
    pub batches: Vec<&'a [u8]>,
    /// Bytes up to the end of the last valid frame (the rest is a torn
    /// tail to cut off).
    pub valid_len: usize,
}

/// Reads a log's frames: Err(offset, reason) when it is not a log or is
/// damaged before its last frame.
pub fn read_log(bytes: &[u8]) -> Result<Read<'_>, (usize, String)> {
    if bytes.get(..LOG_MAGIC.len()) != Some(&LOG_MAGIC[..]) {
        return Err((0, "not a Strata metadata log (no STRMLOG1 magic)".into()));
    }
    let mut at = LOG_MAGIC.len();
    let mut bodies = Vec::new();
    while at < bytes.len() {
        match frame_at(bytes, at) {
            Some((body, next)) => {
                bodies.push(body);
                at = next;
            }
            None => {
                // A torn tail has no valid frame after it; a damaged frame
                // before a valid one is not a torn write.
                if let Some(later) = (at + 1..bytes.len()).find(|&i| frame_at(bytes, i).is_some()) {
                    return Err((
                        at,
                        format!("a damaged frame, and a valid one after it at byte {later}"),
                    ));
                }
                break;
            }
        }
    }
    if bodies.is_empty() {
        return Err((at, "no header frame".into()));
    }
    let header = bodies.remove(0);
    Ok(Read {
        header,
        batches: bodies,
        valid_len: at,
    })
}

/// The hex BLAKE3 of a snapshot's bytes.
pub fn snapshot_digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// A fresh log's bytes for the snapshot `snapshot`.
pub fn new_log(snapshot: &[u8]) -> Vec<u8> {
    let header = serde_json::to_vec(&Header {
        snapshot: snapshot_digest(snapshot),
    })
    .expect("a header serializes");
    let mut out = LOG_MAGIC.to_vec();
    out.extend_from_slice(&frame(&header));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::Permission;

    fn state(buckets: &[&str]) -> ClusterState {
        let mut s = ClusterState::new(ClusterConfig::default());
        for b in buckets {
            s.buckets.insert(
                b.to_string(),
                BucketRecord {
                    created_ms: 1,
                    public_read: false,
                },
            );
        }
        s
    }

    #[test]
    fn a_diff_applied_gives_the_new_state() {
        let old = state(&["a", "b", "c"]);
        let mut new = state(&["b", "c", "d"]);
        new.buckets.get_mut("c").unwrap().public_read = true;
        new.keys.insert(
            "K".into(),
            KeyRecord {
                secret: "s".into(),
                created_ms: 2,
                buckets: [("d".to_string(), Permission::Owner)].into(),
            },
        );
        new.next_stripe = 9;
        let changes = diff(&old, &new);
        // The core, a deleted, c changed, d added, the key added.
        assert_eq!(changes.len(), 5, "{changes:?}");
        let mut got = old.clone();
        for c in changes {
            apply(&mut got, c);
        }
        assert_eq!(got, new);
        assert!(diff(&new, &new).is_empty());
    }

    #[test]
    fn a_bucket_creation_is_one_small_change_whatever_the_state_size() {
        let names: Vec<String> = (0..9000).map(|i| format!("bucket-{i}")).collect();
        let refs: Vec<&str> = names.iter().map(|s| s.as_str()).collect();
        let old = state(&refs);
        let mut new = old.clone();
        new.buckets.insert(
            "one-more".into(),
            BucketRecord {
                created_ms: 3,
                public_read: false,
            },
        );
        let changes = diff(&old, &new);
        assert_eq!(changes.len(), 1);
        let body = serde_json::to_vec(&Batch { seq: 1, changes }).unwrap();
        assert!(body.len() < 200, "{}", body.len());
    }

    #[test]
    fn entries_and_the_core_rebuild_the_state() {
        let mut s = state(&["x", "y"]);
        s.scrub.insert(3, ScrubReport::default());
        let mut got = core_of(&s);
        for c in entries(&s) {
            apply(&mut got, c);
        }
        assert_eq!(got, s);
    }

    #[test]
    fn a_torn_tail_is_cut_and_damage_before_a_valid_frame_is_refused() {
        let mut log = new_log(b"{}");
        let one = frame(b"{\"seq\":1,\"changes\":[]}");
        let two = frame(b"{\"seq\":2,\"changes\":[]}");
        log.extend_from_slice(&one);
        let after_one = log.len();
        log.extend_from_slice(&two);
        let r = read_log(&log).unwrap();
        assert_eq!((r.batches.len(), r.valid_len), (2, log.len()));
        // The last frame torn anywhere: cut at the end of the first.
        for cut in after_one + 1..log.len() {
            let r = read_log(&log[..cut]).unwrap();
            assert_eq!((r.batches.len(), r.valid_len), (1, after_one), "cut {cut}");
        }
        let mut zeroed = log.clone();
        for b in &mut zeroed[after_one + 4..after_one + 8] {
            *b = 0;
        }
        assert_eq!(read_log(&zeroed).unwrap().valid_len, after_one);
        // A byte of the first batch flipped, the second intact: refused.
        let mut flipped = log.clone();
        flipped[after_one - 3] ^= 1;
        let (at, why) = read_log(&flipped).unwrap_err();
        assert_eq!(at, after_one - one.len());
        assert!(why.contains("valid one after it"), "{why}");
        assert!(read_log(b"garbage").is_err());
    }
}
