//! The erasure-coded warm tier on a node (f4; docs/erasure-coding.md).
//!
//! One background task per node ([`run`]) does, each tick, in order:
//!
//! 1. refreshes the code and the stripe records from the metadata service;
//! 2. **installs** every recorded stripe of a row this node replicates:
//!    fetches the stripe's index from a shard holder, writes it durably to
//!    `ROW/stripes/`, loads it into the RAM map the GET path consults, and
//!    only then drops its own copies of the records the stripe holds (same
//!    stamp only: a newer write of a name stays);
//! 3. **rebuilds** the shards of stripes whose disk died and that the
//!    metadata service's table now places on one of this node's disks
//!    (every node rebuilds its share at once, FDS);
//! 4. **encodes** one sealed segment older than its warm age, of a row
//!    this node leads (the row's first live replica; first it seals the
//!    active segments of those rows that no write reached for their warm
//!    age, so a row that stopped growing is encoded whole): shards and index go
//!    to the K+M disks of an erasure-coded row, each fsynced there, then
//!    the stripe is recorded; step 2 then drops the replicas;
//! 5. **scrubs** its shard files (checksums), rebuilding a damaged one;
//! 6. counts the bytes it stores and leads (for `cluster status`).
//!
//! Crash safety: a record is dropped from a replica only after the stripe
//! holding it is recorded (every shard durable) and the replica's copy of
//! the index is durable; until then the replicas serve it.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use hyper::Method;
use serde::{Deserialize, Serialize};
use strata_ec::{Code, ShardHeader, BLOCK, HEADER_LEN};
use strata_meta::api::{EcView, ShardMove, StripeAllocation};
use strata_meta::state::{EcConfig, StripeRecord};
use strata_placement::{DiskId, PlacementTable};
use strata_store::format::needle::FlagCode;

use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

const INDEX_MAGIC: [u8; 4] = *b"SEIX";
const INDEX_VERSION: u32 = 1;
const INDEX_HEADER: usize = 32;
const INDEX_ENTRY: usize = 32;
/// Bytes sent per request when a shard travels between nodes.
const SEND_CHUNK: usize = 8 << 20;
/// Bytes of each shard decoded at a time by a rebuild.
const REBUILD_CHUNK: u64 = 1 << 20;
const TIMEOUT: Duration = Duration::from_secs(30);
/// How often the task runs.
const TICK: Duration = Duration::from_millis(500);

/// One record of a stripe's index: where a needle lies in the encoded
/// segment (docs/erasure-coding.md, "Stripe index").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Needle key.
    pub key: u64,
    /// Needle alternate key.
    pub alt: u32,
    /// Needle data bytes.
    pub len: u32,
    /// The record's stamp.
    pub stamp: u64,
    /// Offset of the needle (its header) in the encoded segment.
    pub offset: u64,
}

/// The stripe index file: a 32-byte header then 32 bytes per record.
pub fn encode_index(stripe: u64, row: usize, entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_HEADER + entries.len() * INDEX_ENTRY);
    out.extend_from_slice(&INDEX_MAGIC);
    out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    out.extend_from_slice(&stripe.to_le_bytes());
    out.extend_from_slice(&(row as u64).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    for e in entries {
        out.extend_from_slice(&e.key.to_le_bytes());
        out.extend_from_slice(&e.alt.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.stamp.to_le_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..28]), &out[INDEX_HEADER..]);
    out[28..32].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Parses a stripe index file: (stripe, row, entries).
pub fn decode_index(b: &[u8]) -> Result<(u64, usize, Vec<IndexEntry>), String> {
    if b.len() < INDEX_HEADER || b[..4] != INDEX_MAGIC {
        return Err("not a stripe index (bad magic)".into());
    }
    let u32at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64at = |i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(x)
    };
    if u32at(4) != INDEX_VERSION {
        return Err(format!("stripe index version {} is not 1", u32at(4)));
    }
    let count = u32at(24) as usize;
    if b.len() != INDEX_HEADER + count * INDEX_ENTRY {
        return Err(format!(
            "stripe index of {count} records is {} bytes long",
            b.len()
        ));
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..28]), &b[INDEX_HEADER..]);
    if crc != u32at(28) {
        return Err("stripe index checksum mismatch".into());
    }
    let entries = (0..count)
        .map(|i| {
            let at = INDEX_HEADER + i * INDEX_ENTRY;
            IndexEntry {
                key: u64at(at),
                alt: u32at(at + 8),
                len: u32at(at + 12),
                stamp: u64at(at + 16),
                offset: u64at(at + 24),
            }
        })
        .collect();
    Ok((u64at(8), u64at(16) as usize, entries))
}

/// Where a record lives in a stripe (the RAM index's value).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Located {
    pub(crate) stripe: u64,
    pub(crate) stamp: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// One row's stripe copies: identity (key, alternate key) → location.
type RowIndex = HashMap<(u64, u32), Located>;

/// The code and the stripe records as last fetched.
#[derive(Default)]
struct View {
    ec: Option<EcConfig>,
    stripes: HashMap<u64, StripeRecord>,
    /// Every id below it was allocated (0: unknown).
    next_stripe: u64,
    /// Fetched from the metadata service (false: the empty start value).
    fetched: bool,
}

/// Progress counters of the task (`GET /cluster/v1/ec/status`).
#[derive(Default, Serialize, Deserialize, Clone, Debug)]
pub struct EcStats {
    /// Segments this node encoded into stripes.
    pub segments_encoded: u64,
    /// Bytes of those segments.
    pub bytes_encoded: u64,
    /// Stripe indexes installed on this node's replicas.
    pub stripes_installed: u64,
    /// Replica records dropped because a stripe holds them.
    pub records_dropped: u64,
    /// GETs served from a healthy data shard.
    pub reads_healthy: u64,
    /// GETs decoded from K other shards.
    pub reads_degraded: u64,
    /// Shards rebuilt here (lost disks, failed scrubs).
    pub shards_rebuilt: u64,
    /// Bytes of those shards.
    pub bytes_rebuilt: u64,
    /// Shards found damaged by the scrub.
    pub shards_corrupt: u64,
    /// Steps that failed (retried on a later tick).
    pub errors: u64,
    /// Stripes this node compacted (live records re-encoded, or a stripe
    /// with none left forgotten).
    #[serde(default)]
    pub stripes_compacted: u64,
    /// Encoded bytes those compactions gave back (old stripes' segment
    /// bytes less the new ones').
    #[serde(default)]
    pub bytes_reclaimed: u64,
    /// Stripe indexes this node's replicas let go of (replaced or
    /// forgotten stripes).
    #[serde(default)]
    pub stripes_retired: u64,
    /// Stripe directories no record names, deleted after the grace time.
    #[serde(default)]
    pub dirs_swept: u64,
    /// GETs whose only copy here was a stripe's while this node's copy of
    /// the row was still being made (recovery, add-node): not served, as
    /// the row's newer record may not have arrived yet; the reader asks
    /// another replica.
    #[serde(default)]
    pub reads_withheld: u64,
    /// Active segments of rows this node leads that it sealed because no
    /// write had reached them for their warm age (so a row that stopped
    /// growing is encoded whole).
    #[serde(default)]
    pub segments_sealed_idle: u64,
}

/// The node's erasure-coding state.
#[derive(Default)]
pub(crate) struct EcNode {
    view: RwLock<Arc<View>>,
    /// Per row: identity → where its record lies in a stripe.
    index: RwLock<HashMap<usize, RowIndex>>,
    /// Installed stripes: id → row.
    installed: Mutex<HashMap<u64, usize>>,
    /// Segments this node encoded and recorded (row, part, segment).
    encoded: Mutex<HashSet<(usize, String, u64)>>,
    loaded: AtomicBool,
    segments_encoded: AtomicU64,
    bytes_encoded: AtomicU64,
    stripes_installed: AtomicU64,
    records_dropped: AtomicU64,
    reads_healthy: AtomicU64,
    reads_degraded: AtomicU64,
    shards_rebuilt: AtomicU64,
    bytes_rebuilt: AtomicU64,
    shards_corrupt: AtomicU64,
    errors: AtomicU64,
    stripes_compacted: AtomicU64,
    bytes_reclaimed: AtomicU64,
    stripes_retired: AtomicU64,
    dirs_swept: AtomicU64,
    pub(crate) reads_withheld: AtomicU64,
    segments_sealed_idle: AtomicU64,
    /// Unrecorded stripe directories: when this node first saw each.
    unrecorded: Mutex<HashMap<PathBuf, Instant>>,
    last_compact: Mutex<Option<Instant>>,
    /// Installed stripes whose record the metadata service no longer holds
    /// (replaced by a compaction), kept until this node retires them.
    gone: Mutex<HashMap<u64, StripeRecord>>,
    last_sweep: Mutex<Option<Instant>>,
    pub(crate) stored_bytes: AtomicU64,
    pub(crate) logical_bytes: AtomicU64,
    last_scrub: Mutex<Option<Instant>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl EcNode {
    fn view(&self) -> Arc<View> {
        match self.view.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Where the stripe copy of a record of `row` lies, if a stripe holds one.
    pub(crate) fn lookup(&self, row: usize, key: u64, alt: u32) -> Option<Located> {
        let g = match self.index.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.get(&row)?.get(&(key, alt)).copied()
    }

    fn insert(&self, row: usize, stripe: u64, entries: &[IndexEntry]) {
        let mut g = match self.index.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let m = g.entry(row).or_default();
        for e in entries {
            let l = Located {
                stripe,
                stamp: e.stamp,
                offset: e.offset,
                len: e.len,
            };
            // The newest record wins; among copies of one record (a
            // compaction re-encoded it) the later stripe.
            match m.get(&(e.key, e.alt)) {
                Some(old) if (old.stamp, old.stripe) >= (e.stamp, stripe) => {}
                _ => {
                    m.insert((e.key, e.alt), l);
                }
            }
        }
    }

    /// Replaces the RAM map of `row` with the one built from `stripes`
    /// (the indexes still installed, after some were retired).
    fn reload_row(&self, row: usize, stripes: &[(u64, Vec<IndexEntry>)]) {
        let mut fresh = RowIndex::new();
        for (stripe, entries) in stripes {
            for e in entries {
                let l = Located {
                    stripe: *stripe,
                    stamp: e.stamp,
                    offset: e.offset,
                    len: e.len,
                };
                match fresh.get(&(e.key, e.alt)) {
                    Some(old) if (old.stamp, old.stripe) >= (e.stamp, *stripe) => {}
                    _ => {
                        fresh.insert((e.key, e.alt), l);
                    }
                }
            }
        }
        let mut g = match self.index.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if fresh.is_empty() {
            g.remove(&row);
        } else {
            g.insert(row, fresh);
        }
    }

    /// Whether the tombstone of stamp `stamp` of an identity of `row` may
    /// be dropped here: no stripe this node knows of holds an older record
    /// of it (the tombstone is what hides that copy; it goes once stripe
    /// compaction drops the copy), and every recorded stripe of the row is
    /// installed here (one not yet installed may hold such a copy).
    pub(crate) fn may_purge(&self, row: usize, key: u64, alt: u32, stamp: u64) -> bool {
        let view = self.view();
        if !self.loaded.load(Ordering::Acquire) || !view.fetched {
            return false;
        }
        if self.lookup(row, key, alt).is_some_and(|l| l.stamp < stamp) {
            return false;
        }
        let inst = lock(&self.installed);
        !view
            .stripes
            .values()
            .any(|s| s.row == row && !inst.contains_key(&s.id))
    }

    /// The installed stripes of `row` here (the replica scrub compares
    /// them between replicas before it copies records).
    pub(crate) fn installed_of(&self, row: usize) -> Vec<u64> {
        let mut v: Vec<u64> = lock(&self.installed)
            .iter()
            .filter(|(_, r)| **r == row)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// The task's counters.
    pub(crate) fn stats(&self) -> EcStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EcStats {
            segments_encoded: r(&self.segments_encoded),
            bytes_encoded: r(&self.bytes_encoded),
            stripes_installed: r(&self.stripes_installed),
            records_dropped: r(&self.records_dropped),
            reads_healthy: r(&self.reads_healthy),
            reads_degraded: r(&self.reads_degraded),
            shards_rebuilt: r(&self.shards_rebuilt),
            bytes_rebuilt: r(&self.bytes_rebuilt),
            shards_corrupt: r(&self.shards_corrupt),
            errors: r(&self.errors),
            stripes_compacted: r(&self.stripes_compacted),
            bytes_reclaimed: r(&self.bytes_reclaimed),
            stripes_retired: r(&self.stripes_retired),
            dirs_swept: r(&self.dirs_swept),
            reads_withheld: r(&self.reads_withheld),
            segments_sealed_idle: r(&self.segments_sealed_idle),
        }
    }
}

/// `DISK/ec/` of this node's disk `disk`, if it is a row disk here.
fn ec_dir(node: &ClusterNode, disk: DiskId) -> Option<PathBuf> {
    let s = node.stores_of(disk)?;
    Some(s.dir().parent()?.join("ec"))
}

fn stripe_dir(node: &ClusterNode, disk: DiskId, stripe: u64) -> Option<PathBuf> {
    Some(ec_dir(node, disk)?.join(format!("{stripe:016x}")))
}

fn shard_name(i: usize) -> String {
    format!("shard-{i:02}")
}

fn sync_dir(dir: &Path) -> std::io::Result<()> {
    strata_fs::sync_dir(dir)
}

/// Writes `bytes` to `path` whole or not at all, its directory made
/// first if need be ([`strata_fs::create_dir_all`], durable), then
/// [`strata_fs::write_atomic`].
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    strata_fs::create_dir_all(strata_fs::parent(path))?;
    strata_fs::write_atomic(path, bytes)
}

// ---------------------------------------------------------------- routes

#[derive(Deserialize)]
pub(crate) struct FileQuery {
    disk: u32,
    #[serde(default)]
    at: Option<u64>,
    #[serde(default)]
    len: Option<u64>,
    /// PUT: the file is complete at this many bytes: fsync and rename.
    #[serde(default)]
    done: Option<u64>,
}

fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, msg.into()).into_response()
}

fn valid_file(name: &str) -> bool {
    name == "index"
        || name
            .strip_prefix("shard-")
            .is_some_and(|n| n.len() == 2 && n.bytes().all(|c| c.is_ascii_digit()))
}

/// `PUT /cluster/v1/ec/{stripe}/{file}?disk=D&at=A` writes a chunk of a
/// shard or index file being received (to `FILE.part`); `?disk=D&done=LEN`
/// then makes it durable under its name.
pub(crate) async fn put_file(
    State(node): State<Node>,
    UrlPath((stripe, file)): UrlPath<(u64, String)>,
    Query(q): Query<FileQuery>,
    body: Bytes,
) -> Response {
    if !valid_file(&file) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("no such stripe file {file:?}"),
        );
    }
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let res = tokio::task::spawn_blocking(move || receive(&dir, &file, q.at, q.done, &body)).await;
    match res {
        Ok(Ok(())) => text(StatusCode::OK, "ok"),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// One request of a stripe file being received into `dir`: a chunk of
/// `body` at `at` (offset 0 creates `FILE.part` afresh), or with `done` the
/// end — the part must hold `done` bytes — made durable under its name
/// (fsync, rename, directory fsync). After a power cut `dir/FILE` is whole
/// or absent; the `.part` may hold anything and is swept.
fn receive(
    dir: &Path,
    file: &str,
    at: Option<u64>,
    done: Option<u64>,
    body: &[u8],
) -> std::io::Result<()> {
    strata_fs::create_dir_all(dir)?;
    let part = dir.join(format!("{file}.part"));
    if let Some(len) = done {
        let f = strata_fs::open(&part, std::fs::OpenOptions::new().write(true))?;
        if f.metadata()?.len() != len {
            return Err(std::io::Error::other(format!(
                "{}: {} bytes received, {len} announced",
                part.display(),
                f.metadata()?.len()
            )));
        }
        strata_fs::sync_all(&f)?;
        strata_fs::rename(&part, &dir.join(file))?;
        return sync_dir(dir);
    }
    let at = at.unwrap_or(0);
    let f = if at == 0 {
        strata_fs::create(&part)?
    } else {
        strata_fs::open(&part, std::fs::OpenOptions::new().write(true))?
    };
    strata_fs::write_all_at(&f, body, at)
}

/// `GET /cluster/v1/ec/{stripe}/{file}?disk=D[&at=A&len=N]`: a file or a
/// byte range of it (one read).
pub(crate) async fn get_file(
    State(node): State<Node>,
    UrlPath((stripe, file)): UrlPath<(u64, String)>,
    Query(q): Query<FileQuery>,
) -> Response {
    if !valid_file(&file) {
        return text(
            StatusCode::BAD_REQUEST,
            format!("no such stripe file {file:?}"),
        );
    }
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let path = dir.join(&file);
    let res = tokio::task::spawn_blocking(move || -> std::io::Result<Vec<u8>> {
        use std::os::unix::fs::FileExt;
        match (q.at, q.len) {
            (Some(at), Some(len)) => {
                let f = std::fs::File::open(&path)?;
                let mut buf = vec![0u8; len as usize];
                f.read_exact_at(&mut buf, at)?;
                Ok(buf)
            }
            _ => std::fs::read(&path),
        }
    })
    .await;
    match res {
        Ok(Ok(b)) => (StatusCode::OK, b).into_response(),
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => text(
            StatusCode::NOT_FOUND,
            format!("stripe {stripe:016x} has no {file} here"),
        ),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `DELETE /cluster/v1/ec/{stripe}?disk=D`: drops this disk's files of a
/// stripe (after compaction re-encoded it).
pub(crate) async fn delete_stripe(
    State(node): State<Node>,
    UrlPath(stripe): UrlPath<u64>,
    Query(q): Query<FileQuery>,
) -> Response {
    let Some(dir) = stripe_dir(&node, DiskId(q.disk), stripe) else {
        return text(
            StatusCode::NOT_FOUND,
            format!("disk {} is not a row disk here", q.disk),
        );
    };
    let gone = strata_fs::remove_dir_all(&dir).and_then(|()| sync_dir(strata_fs::parent(&dir)));
    match gone {
        Ok(()) => text(StatusCode::OK, "deleted"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => text(StatusCode::NOT_FOUND, "absent"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `GET /cluster/v1/ec/status`: the task's counters.
pub(crate) async fn status(State(node): State<Node>) -> Response {
    Json(node.ec.stats()).into_response()
}

// ----------------------------------------------------------- the GET path

async fn fetch(node: &ClusterNode, url: &str) -> Result<Bytes, String> {
    let r = node
        .http
        .send(Method::GET, url, None, Bytes::new(), TIMEOUT)
        .await?;
    if r.status.is_success() {
        Ok(r.body)
    } else {
        Err(format!(
            "{url}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ))
    }
}

async fn send_chunk(node: &ClusterNode, url: &str, body: Bytes) -> Result<(), String> {
    let r = node
        .http
        .send(Method::PUT, url, None, body, TIMEOUT)
        .await?;
    if r.status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "{url}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ))
    }
}

/// The URL of a stripe file on the node of `disk` (None: unknown disk).
fn file_url(
    table_addr: &HashMap<DiskId, String>,
    disk: DiskId,
    stripe: u64,
    file: &str,
) -> Option<String> {
    let addr = table_addr.get(&disk)?;
    Some(format!(
        "http://{addr}/cluster/v1/ec/{stripe}/{file}?disk={}",
        disk.0
    ))
}

/// Reads `[a, a + n)` of shard `i`'s payload from its disk.
async fn shard_range(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    s: &StripeRecord,
    i: usize,
    a: u64,
    n: u64,
) -> Result<Vec<u8>, String> {
    let disk = *s.disks.get(i).ok_or("shard index out of the stripe")?;
    let url = file_url(addrs, disk, s.id, &shard_name(i))
        .ok_or_else(|| format!("disk {disk} has no address"))?;
    let b = fetch(node, &format!("{url}&at={}&len={n}", HEADER_LEN as u64 + a)).await?;
    if b.len() as u64 != n {
        return Err(format!("{url}: {} bytes for {n}", b.len()));
    }
    Ok(b.to_vec())
}

/// Shard range `[a, b)` (block-aligned) of every data shard, from any K
/// shards that answer other than `skip`.
async fn decode_from_survivors(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    table: &PlacementTable,
    s: &StripeRecord,
    skip: &[usize],
    a: u64,
    b: u64,
) -> Result<Vec<Vec<u8>>, String> {
    let code = Code::new(s.k, s.m).map_err(|e| e.to_string())?;
    // Live disks first, data shards before parity (no decode when all the
    // data shards answer).
    let mut order: Vec<usize> = (0..s.k + s.m).filter(|i| !skip.contains(i)).collect();
    order.sort_by_key(|&i| (!table.is_live(s.disks[i]), i));
    let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut at = 0;
    while got.len() < s.k && at < order.len() {
        // Ask as many as are still needed at once.
        let want = s.k - got.len();
        let batch: Vec<usize> = order[at..(at + want).min(order.len())].to_vec();
        at += batch.len();
        let futs = batch
            .iter()
            .map(|&i| async move { (i, shard_range(node, addrs, s, i, a, b - a).await) });
        for (i, r) in futures_util::future::join_all(futs).await {
            if let Ok(buf) = r {
                got.push((i, buf));
            }
        }
    }
    if got.len() < s.k {
        return Err(format!(
            "stripe {:016x}: only {} of the {} shards needed answered",
            s.id,
            got.len(),
            s.k
        ));
    }
    strata_ec::decode_blocks(code, &got).map_err(|e| e.to_string())
}

/// The layout of stripe `s` (what `strata_ec::locate` needs of a header).
fn layout_of(s: &StripeRecord) -> Result<ShardHeader, String> {
    Ok(ShardHeader {
        code: Code::new(s.k, s.m).map_err(|e| e.to_string())?,
        index: 0,
        stripe: s.id,
        data_len: s.data_len,
        shard_len: s.shard_len,
        payload_crc: 0,
    })
}

/// What reading the bytes of stripe `s` needs: the node (its HTTP client),
/// the placement table (which disks are live) and the disks' addresses.
#[derive(Clone, Copy)]
struct StripeReader<'a> {
    node: &'a ClusterNode,
    table: &'a PlacementTable,
    addrs: &'a HashMap<DiskId, String>,
    s: &'a StripeRecord,
}

impl StripeReader<'_> {
    /// Bytes `[offset, offset + total)` of the segment the stripe encodes:
    /// from the data shards holding them (one read on each), or decoded
    /// from K other shards where a shard's disk is dead or does not answer.
    /// Returns the bytes and whether any were decoded.
    async fn span(&self, offset: u64, total: u64) -> Result<(Vec<u8>, bool), String> {
        let (node, table, addrs, s) = (self.node, self.table, self.addrs, self.s);
        let h = layout_of(s)?;
        check_span(s, offset, total)?;
        let mut out = Vec::with_capacity(total as usize);
        let mut decoded = false;
        for (i, off, n) in strata_ec::locate(&h, offset, total) {
            let healthy = if table.is_live(s.disks[i]) {
                shard_range(node, addrs, s, i, off, n).await.ok()
            } else {
                None
            };
            match healthy {
                Some(b) => out.extend_from_slice(&b),
                None => {
                    decoded = true;
                    let (a, b) = block_range(s, off, n);
                    let data = decode_from_survivors(node, addrs, table, s, &[i], a, b).await?;
                    out.extend_from_slice(&data[i][(off - a) as usize..(off - a + n) as usize]);
                }
            }
        }
        Ok((out, decoded))
    }

    /// Bytes `[offset, offset + total)` when a read of them failed its
    /// checksum: up to M shards hold damage no scrub has rebuilt yet, at
    /// least one of them a data shard the bytes lie in. The span's block
    /// ranges are read once from every shard that answers; then each set
    /// of at most M shards that includes one of the span's data shards is
    /// taken in turn for the damaged ones: the span's parts in those shards
    /// are decoded from K of the others (never from a shard of the set),
    /// the other parts used as read. Decoding each part apart from its own
    /// shard only is not enough: a part decoded with a damaged shard among
    /// its sources carries the damage (docs/reliability.md, finding 23).
    /// The first bytes `ok` accepts (the record's CRC and name), or None
    /// when no set of at most M damaged shards explains the failure.
    async fn span_around_damage(
        &self,
        offset: u64,
        total: u64,
        ok: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<Vec<u8>>, String> {
        let s = self.s;
        let h = layout_of(s)?;
        check_span(s, offset, total)?;
        let width = s.k + s.m;
        // Each part: its data shard, its place in that shard, and the
        // block range around it read from every shard (None: no answer).
        let mut parts = Vec::new();
        for (i, off, n) in strata_ec::locate(&h, offset, total) {
            let (a, b) = block_range(s, off, n);
            let reads = (0..width).map(|j| async move {
                if self.table.is_live(s.disks[j]) {
                    shard_range(self.node, self.addrs, s, j, a, b - a)
                        .await
                        .ok()
                } else {
                    None
                }
            });
            let ranges = futures_util::future::join_all(reads).await;
            parts.push((i, (off - a) as usize, n as usize, ranges));
        }
        Ok(explain_damage(h.code, &parts, total, ok))
    }
}

/// A part of a span: its data shard, where it starts in the block range
/// read, its length, and that block range as read from every shard of
/// the stripe (None: no answer).
type Part = (usize, usize, usize, Vec<Option<Vec<u8>>>);

/// The span `parts` make up, read around the first set of at most M
/// damaged shards (one of them a data shard of the span) for which `ok`
/// accepts it; None when no such set explains the failure.
fn explain_damage(
    code: Code,
    parts: &[Part],
    total: u64,
    ok: impl Fn(&[u8]) -> bool,
) -> Option<Vec<u8>> {
    let mut span: Vec<usize> = parts.iter().map(|p| p.0).collect();
    span.dedup();
    for size in 1..=code.m {
        for damaged in combinations(code.k + code.m, size) {
            if !damaged.iter().any(|j| span.contains(j)) {
                continue;
            }
            if let Some(bytes) = assemble(code, parts, &damaged, total) {
                if ok(&bytes) {
                    return Some(bytes);
                }
            }
        }
    }
    None
}

/// The span's bytes with the shards in `damaged` never read nor decoded
/// from: parts in other shards as read, parts in damaged ones decoded from
/// K of the shards that answered and are not damaged. None when fewer
/// than K such shards answered.
fn assemble(code: Code, parts: &[Part], damaged: &[usize], total: u64) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(total as usize);
    for (i, at, n, ranges) in parts {
        let own = ranges[*i].as_ref().filter(|_| !damaged.contains(i));
        match own {
            Some(b) => out.extend_from_slice(&b[*at..at + n]),
            None => {
                let sources: Vec<(usize, Vec<u8>)> = ranges
                    .iter()
                    .enumerate()
                    .filter(|(j, r)| r.is_some() && !damaged.contains(j))
                    .take(code.k)
                    .map(|(j, r)| (j, r.clone().unwrap_or_default()))
                    .collect();
                if sources.len() < code.k {
                    return None;
                }
                let data = strata_ec::decode_blocks(code, &sources).ok()?;
                out.extend_from_slice(&data[*i][*at..at + n]);
            }
        }
    }
    Some(out)
}

/// Every set of `r` of the numbers `0..n`, in increasing order.
fn combinations(n: usize, r: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    if r == 0 || r > n {
        return out;
    }
    let mut c: Vec<usize> = (0..r).collect();
    loop {
        out.push(c.clone());
        // The rightmost place that can still move right.
        let Some(p) = (0..r).rev().find(|&p| c[p] < n - r + p) else {
            return out;
        };
        c[p] += 1;
        for q in p + 1..r {
            c[q] = c[q - 1] + 1;
        }
    }
}

/// The block-aligned shard range around `[off, off + n)`.
fn block_range(s: &StripeRecord, off: u64, n: u64) -> (u64, u64) {
    let a = off / BLOCK * BLOCK;
    let b = ((off + n).div_ceil(BLOCK) * BLOCK).min(s.shard_len);
    (a, b)
}

/// Refuses a span past the end of the segment stripe `s` encodes.
fn check_span(s: &StripeRecord, offset: u64, total: u64) -> Result<(), String> {
    if offset + total > s.data_len {
        return Err(format!(
            "stripe {:016x}: bytes {offset}..{} beyond its {} bytes",
            s.id,
            offset + total,
            s.data_len
        ));
    }
    Ok(())
}

/// Reads the record of `bucket/key` from stripe `loc.stripe`: the needle's
/// bytes from the data shard holding them (one read on that shard's
/// disk), or decoded from K other shards when that disk does not answer.
/// Returns the record (kind byte and payload).
pub(crate) async fn read_record(
    node: &ClusterNode,
    loc: Located,
    bucket: &str,
    key: &str,
) -> Result<Bytes, String> {
    let map = node.map().ok_or("no placement table yet")?;
    let mut view = node.ec.view();
    // A shard on a dead disk may have been rebuilt since the view was
    // fetched: fetch it again before decoding.
    let stale = view
        .stripes
        .get(&loc.stripe)
        .is_none_or(|s| s.disks.iter().any(|&d| !map.table.is_live(d)));
    if stale {
        if let Ok(v) = refresh_view(node).await {
            view = v;
        }
    }
    // A stripe a compaction replaced stays readable here until this
    // replica installs the new one (its files stay for the sweep's grace).
    let gone = lock(&node.ec.gone).get(&loc.stripe).cloned();
    let s = view
        .stripes
        .get(&loc.stripe)
        .or(gone.as_ref())
        .ok_or_else(|| format!("stripe {:016x} is not recorded", loc.stripe))?;
    let total = strata_store::format::needle::needle_len(loc.len);
    let check = |needle: &[u8]| -> Result<Bytes, String> {
        // A stripe holds segment bytes as they were: flags of any code,
        // meaningless there (the stripe index says what is live).
        let (_, data) = strata_store::format::needle::parse(needle, FlagCode::Ignored)
            .map_err(|e| format!("stripe {:016x} offset {}: {e}", s.id, loc.offset))?;
        let d = strata_proto::row::decode(data)
            .ok_or_else(|| format!("stripe {:016x} offset {}: no name header", s.id, loc.offset))?;
        if d.bucket != bucket || d.key != key || d.stamp != loc.stamp {
            return Err(format!(
                "stripe {:016x} offset {}: holds another record",
                s.id, loc.offset
            ));
        }
        let at = data.len() - d.record.len();
        Ok(Bytes::copy_from_slice(&data[at..]))
    };
    let reader = StripeReader {
        node,
        table: &map.table,
        addrs: &map.addr_of_disk,
        s,
    };
    let (needle, mut degraded) = reader.span(loc.offset, total).await?;
    let mut got = check(&needle);
    if got.is_err() {
        // Damaged shards (the scrub will rebuild them): read around them.
        let around = reader
            .span_around_damage(loc.offset, total, |b| check(b).is_ok())
            .await?;
        if let Some(needle) = around {
            degraded = true;
            got = check(&needle);
        }
    }
    let counter = if degraded {
        &node.ec.reads_degraded
    } else {
        &node.ec.reads_healthy
    };
    counter.fetch_add(1, Ordering::Relaxed);
    got
}

// ------------------------------------------------------------- the task

/// The node's erasure-coding task (see the module comment).
pub(crate) async fn run(node: Node, mut ctx: crate::workers::Ctx) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while ctx.tick(&mut tick).await {
        if let Err(e) = step(&node).await {
            node.ec.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("strata server: erasure coding: {e}");
            ctx.failed(e);
        }
    }
}

async fn step(node: &Node) -> Result<(), String> {
    if node.ids().is_none() {
        return Ok(());
    }
    if !node.ec.loaded.load(Ordering::Acquire) {
        let n = node.clone();
        tokio::task::spawn_blocking(move || load_installed(&n))
            .await
            .map_err(|e| e.to_string())?;
        node.ec.loaded.store(true, Ordering::Release);
    }
    let view = refresh_view(node).await?;
    let Some(map) = node.map() else {
        return Ok(());
    };
    install(node, &view, &map.table, &map.addr_of_disk).await;
    retire(node, &view).await;
    rebuild(node, &view, &map.table, &map.addr_of_disk).await;
    if let Some(ec) = view.ec {
        encode_one(node, ec, &view, &map.table, &map.addr_of_disk).await?;
    }
    if let Err(e) = compact_one(node, &view, &map.table, &map.addr_of_disk).await {
        node.ec.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("strata server: stripe compaction: {e}");
    }
    scrub(node, &view, &map.table, &map.addr_of_disk).await;
    if let Err(e) = sweep(node).await {
        node.ec.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("strata server: erasure coding sweep: {e}");
    }
    let n = node.clone();
    let v2 = view.clone();
    let _ = tokio::task::spawn_blocking(move || count_bytes(&n, &v2)).await;
    Ok(())
}

/// Fetches the code and the stripe records from the metadata service.
async fn refresh_view(node: &ClusterNode) -> Result<Arc<View>, String> {
    let url = format!("http://{}/v1/ec", node.opts.meta);
    let v: EcView = node.http.get_json(&url, TIMEOUT).await?;
    {
        // Installed stripes that were just forgotten: kept readable here.
        let old = node.ec.view();
        let inst = lock(&node.ec.installed);
        let mut gone = lock(&node.ec.gone);
        for s in old.stripes.values() {
            if inst.contains_key(&s.id) && !v.stripes.iter().any(|x| x.id == s.id) {
                gone.insert(s.id, s.clone());
            }
        }
    }
    let view = Arc::new(View {
        ec: v.ec,
        stripes: v.stripes.into_iter().map(|s| (s.id, s)).collect(),
        next_stripe: v.next_stripe,
        fetched: true,
    });
    match node.ec.view.write() {
        Ok(mut g) => *g = view.clone(),
        Err(p) => *p.into_inner() = view.clone(),
    }
    Ok(view)
}

/// On start: every index in `ROW/stripes/` into the RAM map; the staging
/// directories of encodings and compactions a crash interrupted (nothing
/// is being encoded yet) and half-written index files are deleted.
fn load_installed(node: &ClusterNode) {
    for rows in node.stores.iter().flatten() {
        if let Some(d) = rows.dir().parent() {
            let staging = d.join("ec").join("staging");
            if staging.exists() {
                match strata_fs::remove_dir_all(&staging) {
                    Ok(()) => eprintln!(
                        "strata server: erasure coding: deleted {} (an interrupted encoding)",
                        staging.display()
                    ),
                    Err(e) => eprintln!("strata server: {}: {e}", staging.display()),
                }
            }
        }
        for row in rows.rows_on_disk() {
            let dir = rows.dir().join(format!("{row:08}")).join("stripes");
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().and_then(|x| x.to_str()) == Some("tmp") {
                    let _ = strata_fs::remove_file(&p);
                    continue;
                }
                if p.extension().and_then(|x| x.to_str()) != Some("idx") {
                    continue;
                }
                match std::fs::read(&p)
                    .map_err(|e| e.to_string())
                    .and_then(|b| decode_index(&b))
                {
                    Ok((stripe, r, entries)) if r == row => {
                        node.ec.insert(row, stripe, &entries);
                        lock(&node.ec.installed).insert(stripe, row);
                    }
                    Ok(_) => eprintln!("strata server: {}: index of another row", p.display()),
                    Err(e) => eprintln!("strata server: {}: {e}", p.display()),
                }
            }
        }
    }
}

fn my_disks(node: &ClusterNode) -> Vec<DiskId> {
    node.disk_ids().map(|(_, d)| d).unwrap_or_default()
}

/// Installs every recorded stripe of a row this node replicates.
async fn install(
    node: &Node,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) {
    let mine = my_disks(node);
    let mut todo: Vec<&StripeRecord> = view
        .stripes
        .values()
        .filter(|s| !lock(&node.ec.installed).contains_key(&s.id))
        .filter(|s| s.row < table.row_count() && table.row(s.row).iter().any(|d| mine.contains(d)))
        .collect();
    todo.sort_by_key(|s| s.id);
    for s in todo {
        if let Err(e) = install_one(node, s, table, addrs).await {
            node.ec.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("strata server: installing stripe {:016x}: {e}", s.id);
        }
    }
}

async fn install_one(
    node: &Node,
    s: &StripeRecord,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    let Some(rows) = node.row_here(s.row) else {
        return Ok(());
    };
    let store = rows.row(s.row).map_err(|e| e.to_string())?;
    // The index from any shard holder (live ones first).
    let mut order: Vec<usize> = (0..s.disks.len()).collect();
    order.sort_by_key(|&i| !table.is_live(s.disks[i]));
    let mut bytes = None;
    let mut last = String::new();
    for i in order {
        let Some(url) = file_url(addrs, s.disks[i], s.id, "index") else {
            continue;
        };
        match fetch(node, &url).await {
            Ok(b) => {
                bytes = Some(b);
                break;
            }
            Err(e) => last = e,
        }
    }
    let bytes = bytes.ok_or_else(|| format!("no shard holder gave its index: {last}"))?;
    let (stripe, row, entries) = decode_index(&bytes)?;
    if stripe != s.id || row != s.row {
        return Err(format!("index of stripe {stripe:016x} row {row}"));
    }
    // Durable here before any replica record is dropped.
    let path = store
        .path()
        .join("stripes")
        .join(format!("{:016x}.idx", s.id));
    let b = bytes.clone();
    tokio::task::spawn_blocking(move || write_atomic(&path, &b))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    node.ec.insert(s.row, s.id, &entries);
    let items: Vec<(u64, u32, u64)> = entries.iter().map(|e| (e.key, e.alt, e.stamp)).collect();
    let dropped = store.drop_encoded(items).await.map_err(|e| e.to_string())?;
    lock(&node.ec.installed).insert(s.id, s.row);
    node.ec.stripes_installed.fetch_add(1, Ordering::Relaxed);
    node.ec
        .records_dropped
        .fetch_add(dropped, Ordering::Relaxed);
    // Reclaim the space of the dropped records now.
    let st = store.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for (_, part) in st.parts() {
            let _ = part.compact_all(0.5, &mut |_| {});
        }
    })
    .await;
    Ok(())
}

/// The disk a lost shard of `s` is rebuilt on: a live disk on a node
/// holding no other shard of the stripe, else (fewer live nodes than K+M)
/// a live disk whose node holds the fewest — then one node holds two
/// shards of the stripe, which still survives the loss of any M shards'
/// worth of disks that do not include it; ties by a hash of (stripe,
/// shard), so the rebuilds of one lost disk spread over every other disk.
pub fn rebuild_target(table: &PlacementTable, s: &StripeRecord, index: usize) -> Option<DiskId> {
    let node_of = |d: DiskId| table.disk(d).map(|x| x.node);
    let mut count: HashMap<_, usize> = HashMap::new();
    for (j, &d) in s.disks.iter().enumerate() {
        if j != index && table.is_live(d) {
            *count.entry(node_of(d)).or_default() += 1;
        }
    }
    table
        .disks()
        .iter()
        .filter(|d| table.is_live(d.id))
        .min_by_key(|d| {
            let h = strata_placement::jump_hash(
                s.id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64 ^ u64::from(d.id.0) << 32,
                1 << 30,
            );
            (count.get(&Some(d.node)).copied().unwrap_or(0), h)
        })
        .map(|d| d.id)
}

/// Rebuilds the lost shards this node's disks are the target of.
async fn rebuild(
    node: &Node,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) {
    let mine = my_disks(node);
    let mut todo = Vec::new();
    for s in view.stripes.values() {
        for (i, &d) in s.disks.iter().enumerate() {
            if table.is_live(d) {
                continue;
            }
            if let Some(t) = rebuild_target(table, s, i).filter(|t| mine.contains(t)) {
                todo.push((s.clone(), i, t));
            }
        }
    }
    for (s, i, target) in todo {
        match rebuild_shard(node, &s, i, target, table, addrs).await {
            Ok(bytes) => {
                let url = format!("http://{}/v1/ec/stripes/{}/shard", node.opts.meta, s.id);
                let mv = ShardMove {
                    index: i,
                    disk: target,
                };
                match node
                    .http
                    .post_json::<_, serde_json::Value>(&url, &mv, TIMEOUT)
                    .await
                {
                    Ok(_) => {
                        node.ec.shards_rebuilt.fetch_add(1, Ordering::Relaxed);
                        node.ec.bytes_rebuilt.fetch_add(bytes, Ordering::Relaxed);
                    }
                    Err(e) => {
                        node.ec.errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("strata server: recording rebuilt shard: {e}");
                    }
                }
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "strata server: rebuilding shard {i} of stripe {:016x}: {e}",
                    s.id
                );
            }
        }
    }
}

/// Writes shard `index` of `s` on this node's disk `target` from K other
/// shards, a megabyte of each at a time; returns its payload bytes.
async fn rebuild_shard(
    node: &Node,
    s: &StripeRecord,
    index: usize,
    target: DiskId,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<u64, String> {
    let code = Code::new(s.k, s.m).map_err(|e| e.to_string())?;
    let dir = stripe_dir(node, target, s.id).ok_or("target disk is not here")?;
    let path = dir.join(shard_name(index));
    let part = dir.join(format!("{}.part", shard_name(index)));
    {
        let d = dir.clone();
        let p = part.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            strata_fs::create_dir_all(&d)?;
            strata_fs::set_len(&strata_fs::create(&p)?, HEADER_LEN as u64)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    }
    let mut crc = 0u32;
    let mut at = 0u64;
    while at < s.shard_len {
        let n = REBUILD_CHUNK.min(s.shard_len - at);
        let data = decode_from_survivors(node, addrs, table, s, &[index], at, at + n).await?;
        let piece = if index < s.k {
            data[index].clone()
        } else {
            strata_ec::encode_blocks(code, &data)
                .map_err(|e| e.to_string())?
                .swap_remove(index - s.k)
        };
        crc = crc32c::crc32c_append(crc, &piece);
        let p = part.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let f = strata_fs::open(&p, std::fs::OpenOptions::new().write(true))?;
            strata_fs::write_all_at(&f, &piece, HEADER_LEN as u64 + at)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        at += n;
        // The throttle (`--ec-rebuild-rate`): the disk stays free for
        // foreground reads.
        let rate = node.opts.ec_rebuild_bytes_per_sec.max(1) as f64;
        tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate)).await;
    }
    let h = ShardHeader {
        code,
        index,
        stripe: s.id,
        data_len: s.data_len,
        shard_len: s.shard_len,
        payload_crc: crc,
    };
    let head = strata_ec::header_bytes(&h);
    // The index file travels with every shard.
    let index_bytes = {
        let mut got = None;
        for (j, &d) in s.disks.iter().enumerate() {
            if j == index {
                continue;
            }
            if let Some(url) = file_url(addrs, d, s.id, "index") {
                if let Ok(b) = fetch(node, &url).await {
                    got = Some(b);
                    break;
                }
            }
        }
        got.ok_or("no shard holder gave the stripe index")?
    };
    tokio::task::spawn_blocking(move || finish_rebuilt(&dir, &part, &path, &head, &index_bytes))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(s.shard_len)
}

/// Makes a rebuilt shard durable in its stripe directory `dir`: the
/// stripe's index beside it first (whole, [`write_atomic`]), then the
/// shard's header `head` into its part file, fsync, rename to `path`,
/// directory fsync. After a power cut the shard under its name is whole
/// and has its index beside it, or it is absent (and rebuilt again).
fn finish_rebuilt(
    dir: &Path,
    part: &Path,
    path: &Path,
    head: &[u8],
    index: &[u8],
) -> std::io::Result<()> {
    write_atomic(&dir.join("index"), index)?;
    let f = strata_fs::open(part, std::fs::OpenOptions::new().write(true))?;
    strata_fs::write_all_at(&f, head, 0)?;
    strata_fs::sync_all(&f)?;
    strata_fs::rename(part, path)?;
    sync_dir(dir)
}

/// Whether this node leads `row`: its disk is the row's first live one.
fn leads(table: &PlacementTable, mine: &[DiskId], row: usize) -> bool {
    table
        .row(row)
        .iter()
        .find(|&&d| table.is_live(d))
        .is_some_and(|d| mine.contains(d))
}

/// The warm age of workload `part` under the tier plan in force (None:
/// the plan turns erasure coding off for it).
fn warm_age(node: &ClusterNode, ec: &EcConfig, part: &str) -> Option<Duration> {
    match node.ec_after_of(part) {
        Some(Some(secs)) => Some(Duration::from_secs_f64(secs)),
        Some(None) => None,
        None => Some(Duration::from_millis(ec.after_ms)),
    }
}

/// Whether an active segment whose file was last written at `modified`
/// (None: unknown) has been idle for `age` at `now`.
fn idle_for(
    modified: Option<std::time::SystemTime>,
    now: std::time::SystemTime,
    age: Duration,
) -> bool {
    modified.is_some_and(|m| now.duration_since(m).is_ok_and(|idle| idle >= age))
}

/// Seals the active segment of every part of the rows this node leads that
/// holds needles and has not been written to for the part's warm age (the
/// segment file's modification time: every append and every in-place
/// delete flag moves it, and it survives a restart). The store's own seal
/// (the one the tier mover and compaction use): the file stays as it is, a
/// new active segment takes the next writes. Without it a row that stopped
/// growing kept its last segment replicated three times for ever.
fn seal_idle(
    node: &ClusterNode,
    ec: EcConfig,
    table: &PlacementTable,
    mine: &[DiskId],
) -> Result<(), String> {
    let now = std::time::SystemTime::now();
    for rows in node.stores.iter().flatten() {
        for row in rows.rows_on_disk() {
            if row >= table.row_count() || !leads(table, mine, row) {
                continue;
            }
            let Ok(Some(store)) = rows.existing(row) else {
                continue;
            };
            for (name, part) in store.parts() {
                let Some(age) = warm_age(node, &ec, &name) else {
                    continue;
                };
                for seg in part.segments() {
                    if !seg.active || seg.needles == 0 {
                        continue;
                    }
                    let modified = std::fs::metadata(&seg.path).and_then(|m| m.modified()).ok();
                    if !idle_for(modified, now, age) {
                        continue;
                    }
                    part.seal_active(seg.device).map_err(|e| {
                        format!(
                            "row {row} part {name}: sealing idle segment {}: {e}",
                            seg.id
                        )
                    })?;
                    node.ec.segments_sealed_idle.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

/// Encodes one sealed segment older than its warm age of a row this node
/// leads, if there is one.
async fn encode_one(
    node: &Node,
    ec: EcConfig,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    let mine = my_disks(node);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let me = node.ids().map(|(n, _)| n);
    let recorded: HashSet<(usize, String, u64)> = view
        .stripes
        .values()
        .filter(|s| Some(s.source_node) == me)
        .map(|s| (s.row, s.part.clone(), s.segment))
        .collect();
    // Active segments idle for their warm age are sealed first, so that
    // the pass below finds them.
    let (n, m2) = (node.clone(), mine.clone());
    let t2 = table.clone();
    tokio::task::spawn_blocking(move || seal_idle(&n, ec, &t2, &m2))
        .await
        .map_err(|e| e.to_string())??;
    let mut pick = None;
    'outer: for rows in node.stores.iter().flatten() {
        for row in rows.rows_on_disk() {
            if row >= table.row_count() || !leads(table, &mine, row) {
                continue;
            }
            let Ok(Some(store)) = rows.existing(row) else {
                continue;
            };
            for (name, part) in store.parts() {
                let Some(age) = warm_age(node, &ec, &name) else {
                    continue;
                };
                for seg in part.segments() {
                    let key = (row, name.clone(), seg.id);
                    if seg.active
                        || seg.needles == 0
                        || now_ns.saturating_sub(seg.created_unix_ns) < age.as_nanos() as u64
                        || recorded.contains(&key)
                        || lock(&node.ec.encoded).contains(&key)
                    {
                        continue;
                    }
                    pick = Some((store.clone(), name.clone(), part.clone(), seg));
                    break 'outer;
                }
            }
        }
    }
    let Some((store, name, part, seg)) = pick else {
        return Ok(());
    };
    let row = store.row();
    let key = (row, name.clone(), seg.id);
    // The live records of the segment, with their stamps.
    let p2 = part.clone();
    let segment = seg.id;
    let entries = tokio::task::spawn_blocking(move || -> Result<Vec<IndexEntry>, String> {
        let mut out = Vec::new();
        for item in p2.needles(segment).map_err(|e| e.to_string())? {
            let Ok(n) = item else { continue };
            if !p2
                .is_live(segment, n.offset, n.key, n.alt_key)
                .unwrap_or(false)
            {
                continue;
            }
            let Some(d) = strata_proto::row::decode(&n.data) else {
                continue;
            };
            // A tombstone is not indexed: it stays in the replicas' row
            // stores, where it hides the stripes' older records of its
            // name and where the replica scrub purges it once no stripe
            // holds one (its bytes in the stripe are dead weight).
            if strata_proto::is_tombstone(d.record) {
                continue;
            }
            out.push(IndexEntry {
                key: n.key,
                alt: n.alt_key,
                len: n.data.len() as u32,
                stamp: d.stamp,
                offset: n.offset,
            });
        }
        Ok(out)
    })
    .await
    .map_err(|e| e.to_string())??;
    if entries.is_empty() {
        // Nothing live: compaction's job, not the encoder's.
        lock(&node.ec.encoded).insert(key);
        return Ok(());
    }
    let staging = store
        .path()
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ec").join("staging"))
        .ok_or("row directory has no parent")?;
    let data_len = store_stripe(
        node,
        addrs,
        Source {
            row,
            part: name,
            segment: seg.id,
            file: seg.path.clone(),
            replaces: Vec::new(),
        },
        &staging,
        &entries,
    )
    .await?;
    lock(&node.ec.encoded).insert(key);
    node.ec.segments_encoded.fetch_add(1, Ordering::Relaxed);
    node.ec.bytes_encoded.fetch_add(data_len, Ordering::Relaxed);
    Ok(())
}

/// What a new stripe encodes.
struct Source {
    row: usize,
    /// The workload part of the records.
    part: String,
    /// The row segment first encoded (kept through compactions).
    segment: u64,
    /// The file to encode: a sealed segment, or a compaction's file of
    /// live needles.
    file: PathBuf,
    /// Stripes of the row it re-encodes the live records of.
    replaces: Vec<u64>,
}

/// Allocates a stripe, encodes `src.file` into its K+M shards under
/// `staging/ID/`, sends every shard and the index to its disk (each made
/// durable there) and records the stripe; returns the encoded bytes. A
/// stripe that could not be recorded within half the sweep's grace is
/// given up (its files are swept), so a sweep never deletes the files of
/// a stripe being recorded.
async fn store_stripe(
    node: &Node,
    addrs: &HashMap<DiskId, String>,
    src: Source,
    staging: &Path,
    entries: &[IndexEntry],
) -> Result<u64, String> {
    let started = Instant::now();
    let url = format!("http://{}/v1/ec/allocate", node.opts.meta);
    let alloc: StripeAllocation = node
        .http
        .post_json(&url, &serde_json::json!({}), TIMEOUT)
        .await?;
    let code = Code::new(alloc.k, alloc.m).map_err(|e| e.to_string())?;
    let staging = staging.join(format!("{:016x}", alloc.id));
    let file = src.file.clone();
    let st = staging.clone();
    let width = alloc.k + alloc.m;
    let header = tokio::task::spawn_blocking(move || -> Result<ShardHeader, String> {
        strata_fs::create_dir_all(&st).map_err(|e| e.to_string())?;
        let paths: Vec<PathBuf> = (0..width).map(|i| st.join(shard_name(i))).collect();
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        // Not fsynced here: the shards are sent to their disks and made
        // durable there; a crash leaves a staging directory, deleted at
        // start.
        strata_ec::encode_file_staged(&file, &refs, code, alloc.id).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?;
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            let _ = strata_fs::remove_dir_all(&staging);
            // Compacted or moved meanwhile: listed again next tick.
            return Err(format!(
                "encoding {} (row {}): {e}",
                src.file.display(),
                src.row
            ));
        }
    };
    let index = Bytes::from(encode_index(alloc.id, src.row, entries));
    // Every shard and the index to their disks, each made durable there.
    let sent = async {
        for (i, &disk) in alloc.disks.iter().enumerate() {
            let path = staging.join(shard_name(i));
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?;
            send_file(
                node,
                addrs,
                disk,
                alloc.id,
                &shard_name(i),
                Bytes::from(bytes),
            )
            .await?;
            send_file(node, addrs, disk, alloc.id, "index", index.clone()).await?;
        }
        Ok::<(), String>(())
    }
    .await;
    let _ = strata_fs::remove_dir_all(&staging);
    sent?;
    if started.elapsed() > node.opts.ec_sweep_grace / 2 {
        return Err(format!(
            "stripe {:016x} took {:.1} s to store, more than half the sweep's grace: \
             not recorded (its files will be swept)",
            alloc.id,
            started.elapsed().as_secs_f64()
        ));
    }
    let me = node.ids().map(|(n, _)| n).ok_or("not registered")?;
    let rec = StripeRecord {
        id: alloc.id,
        row: src.row,
        source_node: me,
        segment: src.segment,
        part: src.part,
        k: alloc.k,
        m: alloc.m,
        disks: alloc.disks.clone(),
        data_len: header.data_len,
        shard_len: header.shard_len,
        records: entries.len() as u64,
        record_bytes: entries
            .iter()
            .map(|e| strata_store::format::needle::needle_len(e.len))
            .sum(),
        created_ms: 0,
        replaces: src.replaces,
    };
    let url = format!("http://{}/v1/ec/stripes", node.opts.meta);
    node.http
        .post_json::<_, serde_json::Value>(&url, &rec, TIMEOUT)
        .await?;
    Ok(header.data_len)
}

// ------------------------------------------------------ stripe compaction

/// How often a node looks for a stripe to compact.
const COMPACT_EVERY: Duration = Duration::from_secs(2);
/// Most bytes of a stripe read in one request by a compaction.
const COMPACT_SPAN: u64 = 4 << 20;

/// The stripe index of `id` installed in `row`'s directory (blocking).
fn read_installed(store: &crate::rows::RowStore, id: u64) -> Result<Vec<IndexEntry>, String> {
    let path = store.path().join("stripes").join(format!("{id:016x}.idx"));
    let b = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (stripe, row, entries) =
        decode_index(&b).map_err(|e| format!("{}: {e}", path.display()))?;
    if stripe != id || row != store.row() {
        return Err(format!(
            "{}: index of stripe {stripe:016x} row {row}",
            path.display()
        ));
    }
    Ok(entries)
}

/// A stripe worth compacting: its record, its live entries and the bytes
/// of its dead ones.
struct Candidate {
    stripe: StripeRecord,
    store: Arc<crate::rows::RowStore>,
    live: Vec<IndexEntry>,
    dead_bytes: u64,
}

/// Splits a stripe's entries into live and dead ones (blocking). A record
/// is dead when a newer record of its name exists — in the row store (a
/// delete's tombstone, a rewrite) or in a later stripe — or when a later
/// stripe holds the same record (a compaction re-encoded it). Everything
/// else is live, tombstones included (a tombstone in a stripe may be what
/// hides an older copy in another stripe).
fn split_live(
    node: &ClusterNode,
    store: &crate::rows::RowStore,
    s: &StripeRecord,
) -> Result<(Vec<IndexEntry>, u64), String> {
    let entries = read_installed(store, s.id)?;
    let mut live = Vec::new();
    let mut dead = 0u64;
    for e in entries {
        let superseded = match node.ec.lookup(s.row, e.key, e.alt) {
            Some(l) => l.stamp > e.stamp || (l.stamp == e.stamp && l.stripe > s.id),
            None => false,
        };
        let rewritten = !superseded
            && store
                .newest_stamp(e.key, e.alt)
                .map_err(|x| x.to_string())?
                .is_some_and(|t| t > e.stamp);
        if superseded || rewritten {
            dead += strata_store::format::needle::needle_len(e.len);
        } else {
            live.push(e);
        }
    }
    Ok((live, dead))
}

/// Finds, among the installed stripes of the rows this node leads, the
/// first whose dead records reach the garbage threshold (blocking).
fn pick_compaction(
    node: &ClusterNode,
    view: &View,
    table: &PlacementTable,
) -> Result<Option<Candidate>, String> {
    let mine = my_disks(node);
    let installed = lock(&node.ec.installed).clone();
    let mut ids: Vec<&StripeRecord> = view
        .stripes
        .values()
        .filter(|s| installed.contains_key(&s.id))
        .filter(|s| s.row < table.row_count() && leads(table, &mine, s.row))
        .collect();
    ids.sort_by_key(|s| s.id);
    for s in ids {
        let Some(store) = node
            .row_here(s.row)
            .and_then(|r| r.existing(s.row).ok().flatten())
        else {
            continue;
        };
        let (live, dead_bytes) = split_live(node, &store, s)?;
        if live.is_empty()
            || dead_bytes as f64 >= node.opts.ec_compact_garbage * s.data_len.max(1) as f64
        {
            return Ok(Some(Candidate {
                stripe: s.clone(),
                store,
                live,
                dead_bytes,
            }));
        }
    }
    Ok(None)
}

/// Whether `needle` is the record `e` names (checksums, identity, stamp).
fn needle_is(needle: &[u8], e: &IndexEntry) -> bool {
    match strata_store::format::needle::parse(needle, FlagCode::Ignored) {
        Ok((h, data)) => {
            h.key == e.key
                && h.alt_key == e.alt
                && data.len() == e.len as usize
                && strata_proto::row::decode(data).is_some_and(|d| d.stamp == e.stamp)
        }
        Err(_) => false,
    }
}

/// Compacts one stripe of a row this node leads whose dead records passed
/// the threshold (`--ec-compact-garbage`): its live needles are read from
/// the data shards (a span at a time; decoded from the others where a
/// shard is lost or damaged — never the whole stripe), written one after
/// the other into a staging file, encoded into a new stripe whose shards
/// are made durable on their disks, and the new stripe is recorded with
/// `replaces: [old]`, which forgets the old one in the same step. The
/// replicas then install the new index and retire the old one; the old
/// shard files are swept after the grace time. A stripe with no live
/// record left is simply forgotten.
async fn compact_one(
    node: &Node,
    view: &Arc<View>,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    {
        let mut last = lock(&node.ec.last_compact);
        if last.is_some_and(|t| t.elapsed() < COMPACT_EVERY) {
            return Ok(());
        }
        *last = Some(Instant::now());
    }
    let (n, v, t) = (node.clone(), view.clone(), table.clone());
    let Some(c) = tokio::task::spawn_blocking(move || pick_compaction(&n, &v, &t))
        .await
        .map_err(|e| e.to_string())??
    else {
        return Ok(());
    };
    let s = &c.stripe;
    if c.live.is_empty() {
        let url = format!("http://{}/v1/ec/stripes/{}", node.opts.meta, s.id);
        let r = node
            .http
            .send(Method::DELETE, &url, None, Bytes::new(), TIMEOUT)
            .await?;
        if !r.status.is_success() {
            return Err(format!(
                "{url}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        node.ec.stripes_compacted.fetch_add(1, Ordering::Relaxed);
        node.ec
            .bytes_reclaimed
            .fetch_add(s.data_len, Ordering::Relaxed);
        return Ok(());
    }
    if view.ec.is_none() {
        // Re-encoding needs a code; the stripe stays as it is.
        return Ok(());
    }
    let staging = c
        .store
        .path()
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ec").join("staging"))
        .ok_or("row directory has no parent")?;
    let file = staging.join(format!("compact-{:016x}", s.id));
    let result = async {
        let f = file.clone();
        let d = staging.clone();
        let out = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            strata_fs::create_dir_all(&d)?;
            strata_fs::create(&f)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{}: {e}", file.display()))?;
        let out = Arc::new(out);
        let reader = StripeReader {
            node,
            table,
            addrs,
            s,
        };
        let mut entries = c.live.clone();
        entries.sort_by_key(|e| e.offset);
        let mut fresh = Vec::with_capacity(entries.len());
        let mut pos = 0u64;
        let mut i = 0;
        while i < entries.len() {
            // A span of neighbouring live needles read at once.
            let start = entries[i].offset;
            let mut end = start + strata_store::format::needle::needle_len(entries[i].len);
            let mut j = i + 1;
            while j < entries.len() {
                let e_end =
                    entries[j].offset + strata_store::format::needle::needle_len(entries[j].len);
                if entries[j].offset > end + 4096 || e_end - start > COMPACT_SPAN {
                    break;
                }
                end = end.max(e_end);
                j += 1;
            }
            let (span, _) = reader.span(start, end - start).await?;
            let mut chunk = Vec::with_capacity(span.len());
            for e in &entries[i..j] {
                let len = strata_store::format::needle::needle_len(e.len);
                let at = (e.offset - start) as usize;
                let mut needle = span[at..at + len as usize].to_vec();
                if !needle_is(&needle, e) {
                    // Damaged shards: read around them.
                    needle = reader
                        .span_around_damage(e.offset, len, |b| needle_is(b, e))
                        .await?
                        .ok_or_else(|| {
                            format!(
                                "stripe {:016x}: the record at offset {} does not read back",
                                s.id, e.offset
                            )
                        })?;
                }
                fresh.push(IndexEntry {
                    offset: pos + chunk.len() as u64,
                    ..*e
                });
                chunk.extend_from_slice(&needle);
            }
            let o = out.clone();
            let at = pos;
            let n = chunk.len() as u64;
            tokio::task::spawn_blocking(move || strata_fs::write_all_at(&o, &chunk, at))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            pos += n;
            i = j;
        }
        let data_len = store_stripe(
            node,
            addrs,
            Source {
                row: s.row,
                part: s.part.clone(),
                segment: s.segment,
                file: file.clone(),
                replaces: vec![s.id],
            },
            &staging,
            &fresh,
        )
        .await?;
        Ok::<u64, String>(data_len)
    }
    .await;
    let _ = strata_fs::remove_file(&file);
    let data_len = result?;
    node.ec.stripes_compacted.fetch_add(1, Ordering::Relaxed);
    node.ec
        .bytes_reclaimed
        .fetch_add(s.data_len.saturating_sub(data_len), Ordering::Relaxed);
    eprintln!(
        "strata server: stripe {:016x} (row {}) compacted: {} live records re-encoded, {} dead bytes reclaimed",
        s.id,
        s.row,
        c.live.len(),
        c.dead_bytes
    );
    Ok(())
}

/// Lets go of the installed stripes the metadata service forgot (a
/// compaction replaced them): once every recorded stripe of the row is
/// installed here (the replacement holds their live records), the index
/// file is deleted and the row's RAM map rebuilt from the indexes left.
async fn retire(node: &Node, view: &View) {
    if !view.fetched || view.next_stripe == 0 {
        return;
    }
    let installed = lock(&node.ec.installed).clone();
    let mut rows: HashMap<usize, Vec<u64>> = HashMap::new();
    for (&id, &row) in &installed {
        if id < view.next_stripe && !view.stripes.contains_key(&id) {
            rows.entry(row).or_default().push(id);
        }
    }
    for (row, ids) in rows {
        let pending = view
            .stripes
            .values()
            .any(|s| s.row == row && !installed.contains_key(&s.id));
        if pending {
            continue;
        }
        let Some(store) = node
            .row_here(row)
            .and_then(|r| r.existing(row).ok().flatten())
        else {
            // The row left this node: nothing to read any more.
            let mut inst = lock(&node.ec.installed);
            for id in &ids {
                inst.remove(id);
            }
            continue;
        };
        let keep: Vec<u64> = installed
            .iter()
            .filter(|(id, r)| **r == row && !ids.contains(id))
            .map(|(id, _)| *id)
            .collect();
        let n = node.clone();
        let gone = ids.clone();
        let res = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let dir = store.path().join("stripes");
            for id in &gone {
                let p = dir.join(format!("{id:016x}.idx"));
                match strata_fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("{}: {e}", p.display())),
                }
            }
            sync_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut left = Vec::new();
            for id in keep {
                left.push((id, read_installed(&store, id)?));
            }
            n.ec.reload_row(row, &left);
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match res {
            Ok(()) => {
                let mut inst = lock(&node.ec.installed);
                let mut g = lock(&node.ec.gone);
                for id in &ids {
                    inst.remove(id);
                    g.remove(id);
                }
                node.ec
                    .stripes_retired
                    .fetch_add(ids.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("strata server: retiring stripes of row {row}: {e}");
            }
        }
    }
}

/// Deletes, on this node's disks, the stripe directories no stripe record
/// names (left by a crash before the stripe was recorded, or replaced by a
/// compaction) once this node has seen them unrecorded for the grace time,
/// and the `.part` files of rebuilds a crash interrupted. Only ids below
/// the service's next id are touched (a service that lost its state
/// deletes nothing).
async fn sweep(node: &Node) -> Result<(), String> {
    let grace = node.opts.ec_sweep_grace;
    {
        let every = (grace / 4).clamp(TICK, Duration::from_secs(60));
        let mut last = lock(&node.ec.last_sweep);
        if last.is_some_and(|t| t.elapsed() < every) {
            return Ok(());
        }
        *last = Some(Instant::now());
    }
    // Fresh: a stripe recorded a moment ago must not look unrecorded.
    let view = refresh_view(node).await?;
    if view.next_stripe == 0 {
        return Ok(());
    }
    let n = node.clone();
    tokio::task::spawn_blocking(move || {
        let mut seen_now = HashSet::new();
        for disk in my_disks(&n) {
            let Some(dir) = ec_dir(&n, disk) else {
                continue;
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(id) = name
                    .to_str()
                    .filter(|x| x.len() == 16)
                    .and_then(|x| u64::from_str_radix(x, 16).ok())
                else {
                    continue;
                };
                let path = e.path();
                if view.stripes.contains_key(&id) {
                    sweep_parts(&path, grace);
                    continue;
                }
                if id >= view.next_stripe {
                    continue;
                }
                seen_now.insert(path.clone());
                let first = *lock(&n.ec.unrecorded)
                    .entry(path.clone())
                    .or_insert_with(Instant::now);
                if first.elapsed() < grace {
                    continue;
                }
                match strata_fs::remove_dir_all(&path) {
                    Ok(()) => {
                        let _ = sync_dir(&dir);
                        n.ec.dirs_swept.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => eprintln!("strata server: sweeping {}: {e}", path.display()),
                }
            }
        }
        lock(&n.ec.unrecorded).retain(|p, _| seen_now.contains(p) && p.exists());
    })
    .await
    .map_err(|e| e.to_string())
}

/// Deletes the `.part` and `.tmp` files in a recorded stripe's directory
/// that nothing wrote to for the grace time (a rebuild or a transfer a
/// crash interrupted).
fn sweep_parts(dir: &Path, grace: Duration) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ext = p.extension().and_then(|x| x.to_str());
        if !matches!(ext, Some("part") | Some("tmp")) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= grace);
        if old {
            let _ = strata_fs::remove_file(&p);
        }
    }
}

async fn send_file(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    disk: DiskId,
    stripe: u64,
    file: &str,
    bytes: Bytes,
) -> Result<(), String> {
    let url =
        file_url(addrs, disk, stripe, file).ok_or_else(|| format!("disk {disk} has no address"))?;
    let mut at = 0;
    loop {
        let end = (at + SEND_CHUNK).min(bytes.len());
        send_chunk(node, &format!("{url}&at={at}"), bytes.slice(at..end)).await?;
        at = end;
        if at >= bytes.len() {
            break;
        }
    }
    send_chunk(node, &format!("{url}&done={}", bytes.len()), Bytes::new()).await
}

/// How often the shard scrub runs.
const SCRUB_EVERY: Duration = Duration::from_secs(30);

/// Checks every shard file on this node's disks (header and payload
/// checksums); a damaged or missing one is rebuilt in place from the
/// others.
async fn scrub(node: &Node, view: &View, table: &PlacementTable, addrs: &HashMap<DiskId, String>) {
    {
        let mut last = lock(&node.ec.last_scrub);
        if last.is_some_and(|t| t.elapsed() < SCRUB_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    let mine = my_disks(node);
    let mut checks = Vec::new();
    for s in view.stripes.values() {
        for (i, &d) in s.disks.iter().enumerate() {
            if mine.contains(&d) {
                if let Some(dir) = stripe_dir(node, d, s.id) {
                    checks.push((s.clone(), i, d, dir.join(shard_name(i))));
                }
            }
        }
    }
    for (s, i, d, path) in checks {
        let p = path.clone();
        let ok = tokio::task::spawn_blocking(move || check_shard(&p))
            .await
            .unwrap_or(false);
        if ok {
            continue;
        }
        node.ec.shards_corrupt.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "strata server: scrub: shard {i} of stripe {:016x} ({}) is damaged or missing; rebuilding it",
            s.id,
            path.display()
        );
        match rebuild_shard(node, &s, i, d, table, addrs).await {
            Ok(b) => {
                node.ec.shards_rebuilt.fetch_add(1, Ordering::Relaxed);
                node.ec.bytes_rebuilt.fetch_add(b, Ordering::Relaxed);
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("strata server: scrub: rebuilding: {e}");
            }
        }
    }
}

/// Whether a shard file's header and payload checksums hold.
fn check_shard(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    let Ok(h) = strata_ec::parse_header(&b, &path.display().to_string()) else {
        return false;
    };
    b.len() as u64 == HEADER_LEN as u64 + h.shard_len
        && crc32c::crc32c(&b[HEADER_LEN..]) == h.payload_crc
}

/// Bytes stored on this node (every segment and shard file) and the
/// logical bytes of the rows it leads.
fn count_bytes(node: &ClusterNode, view: &View) {
    let mut stored = 0;
    for rows in node.stores.iter().flatten() {
        if let Some(d) = rows.dir().parent() {
            stored += tree_bytes(&d.join("ec"));
        }
        stored += tree_bytes(rows.dir());
    }
    for f in node.opts.flash_tier() {
        stored += tree_bytes(&f.join("rows"));
    }
    let mut logical = 0u64;
    let mine = my_disks(node);
    if let Some(map) = node.map() {
        for rows in node.stores.iter().flatten() {
            for row in rows.rows_on_disk() {
                if row >= map.table.row_count() || !leads(&map.table, &mine, row) {
                    continue;
                }
                if let Ok(Some(store)) = rows.existing(row) {
                    for (_, part) in store.parts() {
                        for seg in part.segments() {
                            let body = seg.size.saturating_sub(64) as f64;
                            logical += (body * (1.0 - seg.garbage_ratio)) as u64;
                        }
                    }
                }
                logical += view
                    .stripes
                    .values()
                    .filter(|s| s.row == row)
                    .map(|s| s.record_bytes)
                    .sum::<u64>();
            }
        }
    }
    node.ec.stored_bytes.store(stored, Ordering::Relaxed);
    node.ec.logical_bytes.store(logical, Ordering::Relaxed);
}

/// Bytes of the segment (`.seg`) and shard files under `dir`.
fn tree_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(_) => {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".seg") || name.starts_with("shard-") && !name.ends_with(".part")
                {
                    e.metadata().map_or(0, |m| m.len())
                } else {
                    0
                }
            }
            Err(_) => 0,
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// A shard or index file received in chunks then finished, the power
    /// cut after each file operation in turn: under its name the file is
    /// the whole of what was sent, or absent; once the finishing request
    /// was answered, it is there.
    #[test]
    #[allow(clippy::disallowed_methods)] // acknowledgements around the model
    fn a_received_stripe_file_is_whole_or_absent_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let whole = pattern(3 * 4096 + 100, 7);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |_| {},
                |root| {
                    let dir = root.join("ec").join(format!("{:016x}", 9));
                    for (n, c) in whole.chunks(4096).enumerate() {
                        receive(&dir, "shard-01", Some(n as u64 * 4096), None, c)?;
                    }
                    receive(&dir, "shard-01", None, Some(whole.len() as u64), &[])?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let f = root.join("ec").join(format!("{:016x}", 9)).join("shard-01");
                    match std::fs::read(&f) {
                        Ok(b) => assert!(b == whole, "{how:?} step {n}: {} bytes", b.len()),
                        Err(e) => assert!(
                            !root.join("ack").exists(),
                            "{how:?} step {n}: finished, then gone: {e}"
                        ),
                    }
                },
            )
            .unwrap();
            assert!(steps > 8, "{how:?}: {steps} steps");
        }
    }

    /// A rebuilt shard made durable, the power cut after each file
    /// operation in turn: under its name the shard is whole and its
    /// stripe's index is beside it, whole; once done, both are there.
    #[test]
    #[allow(clippy::disallowed_methods)] // the part file and acknowledgements
    fn a_rebuilt_shard_is_whole_with_its_index_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let payload = pattern(2 * 4096, 3);
        let head = [0xA5u8; HEADER_LEN];
        let index = encode_index(
            9,
            4,
            &[IndexEntry {
                key: 1,
                alt: 0,
                len: 10,
                stamp: 5,
                offset: 0,
            }],
        );
        let mut whole = head.to_vec();
        whole.extend_from_slice(&payload);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |root| {
                    // What the rebuild's pieces left: the part file with a
                    // blank header, the payload behind it.
                    let mut b = vec![0u8; HEADER_LEN];
                    b.extend_from_slice(&payload);
                    std::fs::write(root.join("shard-02.part"), b).unwrap();
                },
                |root| {
                    finish_rebuilt(
                        root,
                        &root.join("shard-02.part"),
                        &root.join("shard-02"),
                        &head,
                        &index,
                    )?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let acked = root.join("ack").exists();
                    match std::fs::read(root.join("shard-02")) {
                        Ok(b) => {
                            assert!(b == whole, "{how:?} step {n}: shard of {} bytes", b.len());
                            let i = std::fs::read(root.join("index")).unwrap_or_else(|e| {
                                panic!("{how:?} step {n}: a shard without its index: {e}")
                            });
                            assert!(i == index, "{how:?} step {n}: a torn index");
                        }
                        Err(e) => assert!(!acked, "{how:?} step {n}: done, then gone: {e}"),
                    }
                },
            )
            .unwrap();
            assert!(steps > 6, "{how:?}: {steps} steps");
        }
    }

    /// A replica's copy of a stripe index, written into a `stripes/`
    /// directory that does not exist yet, the power cut after each file
    /// operation in turn: whole or absent, and there once written (a
    /// replica drops its own records only after this).
    #[test]
    #[allow(clippy::disallowed_methods)] // acknowledgements around the model
    fn an_installed_stripe_index_is_whole_or_absent_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let entries: Vec<IndexEntry> = (0..200u64)
            .map(|k| IndexEntry {
                key: k,
                alt: 1,
                len: 1000,
                stamp: k + 1,
                offset: k * 1040,
            })
            .collect();
        let index = encode_index(9, 4, &entries);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |root| std::fs::create_dir_all(root.join("rows/00000004")).unwrap(),
                |root| {
                    write_atomic(
                        &root.join("rows/00000004/stripes/0000000000000009.idx"),
                        &index,
                    )?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let p = root.join("rows/00000004/stripes/0000000000000009.idx");
                    match std::fs::read(&p) {
                        Ok(b) => {
                            let (stripe, row, got) = decode_index(&b)
                                .unwrap_or_else(|e| panic!("{how:?} step {n}: {e}"));
                            assert_eq!((stripe, row, got), (9, 4, entries.clone()));
                        }
                        Err(e) => assert!(
                            !root.join("ack").exists(),
                            "{how:?} step {n}: written, then gone: {e}"
                        ),
                    }
                },
            )
            .unwrap();
            assert!(steps > 4, "{how:?}: {steps} steps");
        }
    }

    #[test]
    fn a_segment_is_idle_once_unwritten_for_its_warm_age() {
        let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let age = Duration::from_secs(60);
        assert!(!idle_for(Some(t0), t0 + Duration::from_secs(59), age));
        assert!(idle_for(Some(t0), t0 + age, age));
        assert!(idle_for(Some(t0), t0 + Duration::from_secs(3600), age));
        // Written "after" now (a clock stepped back): not idle.
        assert!(!idle_for(Some(t0 + age), t0, age));
        // No modification time: never sealed on a guess.
        assert!(!idle_for(None, t0 + age, age));
    }

    #[test]
    fn combinations_are_every_set_once() {
        assert_eq!(
            combinations(4, 2),
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(combinations(14, 4).len(), 1001);
        assert_eq!(combinations(3, 3), vec![vec![0, 1, 2]]);
        assert!(combinations(3, 4).is_empty());
        assert!(combinations(3, 0).is_empty());
    }

    /// A span over the end of data shard 0 and the start of data shard 1
    /// of a 4+2 stripe reads back around any two damaged shards (data or
    /// parity) when one of them holds part of it, and not around three.
    #[test]
    fn a_span_reads_around_up_to_m_damaged_shards() {
        let code = Code::new(4, 2).unwrap();
        let block = BLOCK as usize;
        let shard_len = 8 * block;
        let data: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                (0..shard_len)
                    .map(|x| (x * 31 + i * 7 + x / 251) as u8)
                    .collect()
            })
            .collect();
        let mut shards = data.clone();
        shards.extend(strata_ec::encode_blocks(code, &data).unwrap());
        // The span: the last 100 bytes of shard 0, the first 300 of shard 1.
        let want: Vec<u8> = [&data[0][shard_len - 100..], &data[1][..300]].concat();
        let ok = |b: &[u8]| b == want.as_slice();
        let parts_of = |shards: &[Vec<u8>]| -> Vec<Part> {
            // The block ranges around the parts (block_range).
            let tail_len = 100usize.div_ceil(block) * block;
            let tail = |s: &Vec<u8>| Some(s[shard_len - tail_len..].to_vec());
            let head = |s: &Vec<u8>| Some(s[..300usize.div_ceil(block) * block].to_vec());
            vec![
                (0, tail_len - 100, 100, shards.iter().map(tail).collect()),
                (1, 0, 300, shards.iter().map(head).collect()),
            ]
        };
        // Damage where the span lies: the byte 50 from shard 0's end (in
        // its part), byte 10 of shard 1 (in its part), and both in every
        // other shard (in the blocks a decode of either part reads).
        let hit = |s: &mut Vec<u8>, i: usize| {
            if i != 1 {
                s[shard_len - 50] ^= 0x41;
            }
            if i != 0 {
                s[10] ^= 0x41;
            }
        };
        for damaged in [
            vec![0],
            vec![1],
            vec![0, 1],
            vec![0, 4],
            vec![1, 5],
            vec![0, 2],
        ] {
            let mut bad = shards.clone();
            for &i in &damaged {
                hit(&mut bad[i], i);
            }
            let got = explain_damage(code, &parts_of(&bad), 400, ok);
            assert_eq!(got.as_deref(), Some(want.as_slice()), "damaged {damaged:?}");
        }
        // A shard that did not answer counts against M.
        let mut bad = shards.clone();
        hit(&mut bad[0], 0);
        hit(&mut bad[1], 1);
        let mut parts = parts_of(&bad);
        for p in &mut parts {
            p.3[5] = None;
        }
        assert_eq!(explain_damage(code, &parts, 400, ok), None);
        // Three damaged shards are more than M = 2.
        let mut bad = shards.clone();
        for i in [0, 1, 2] {
            hit(&mut bad[i], i);
        }
        assert_eq!(explain_damage(code, &parts_of(&bad), 400, ok), None);
    }

    #[test]
    fn index_round_trips_and_refuses_damage() {
        let entries: Vec<IndexEntry> = (0..5)
            .map(|i| IndexEntry {
                key: i * 7,
                alt: i as u32,
                len: 100 + i as u32,
                stamp: 1_000 + i,
                offset: 64 + i * 200,
            })
            .collect();
        let b = encode_index(9, 3, &entries);
        assert_eq!(b.len(), INDEX_HEADER + 5 * INDEX_ENTRY);
        assert_eq!(decode_index(&b), Ok((9, 3, entries)));
        for at in [0, 5, 10, 40, b.len() - 1] {
            let mut c = b.clone();
            c[at] ^= 1;
            assert!(decode_index(&c).is_err(), "flip at {at} accepted");
        }
        assert!(decode_index(&b[..b.len() - 1]).is_err());
    }
}
