//! The node's cluster routes (`/cluster/v1/...`, see
//! [`strata_proto`]).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bytes::BytesMut;
use serde::Deserialize;
use std::sync::atomic::Ordering;
use std::time::Instant;

use strata_node::metrics::Served;
use strata_node::object::ObjectId;
use strata_node::ramcache::Cached;
use strata_proto::{
    is_data_record, is_tombstone, manifest_record, new_cookie, now_stamp, object_path, parse_head,
    parse_head_start, put_frame, record_hash, record_range, tombstone_record, ExtendRequest,
    ExtendResponse, ListEntry, Manifest, ObjectMeta, RowDigest, DIGEST_RANGES,
    RECORD_LENGTH_HEADER, RECORD_MANIFEST, STAMP_HEADER,
};
use strata_store::Tier;

use crate::error::ClusterError;
use crate::node::ClusterNode;
use crate::rows::{RowStore, RowStores, Scanned};
use crate::wire::{refused, text, version_of};
use strata_proto::replica::{RecordRead, Refusal, Replaced};
use strata_proto::row::identity;

type Node = Arc<ClusterNode>;

pub(crate) fn router(node: Node) -> Router {
    Router::new()
        .route(
            "/cluster/v1/rows/{row}/objects/{bucket}/{key}",
            get(get_object).put(put_object).delete(delete_object),
        )
        .route(
            "/cluster/v1/rows/{row}/extend/{bucket}/{key}",
            axum::routing::post(extend),
        )
        .route("/cluster/v1/rows/{row}/export", get(export))
        .route("/cluster/v1/rows/{row}/digest", get(digest))
        .route("/cluster/v1/rows/{row}/list", get(list))
        .route("/cluster/v1/rows/{row}/stripes", get(stripes))
        .route("/cluster/v1/status", get(status))
        .route("/cluster/v1/ec/status", get(crate::ec::status))
        .route(
            "/cluster/v1/ec/{stripe}/{file}",
            get(crate::ec::get_file).put(crate::ec::put_file),
        )
        .route(
            "/cluster/v1/ec/{stripe}",
            axum::routing::delete(crate::ec::delete_stripe),
        )
        // A record is at most one tract (the table's tract size, 8 MiB by
        // default) or a whole small object: bounded well above both.
        .layer(axum::extract::DefaultBodyLimit::max(RECORD_BODY_LIMIT))
        .route("/cluster/v1/health", get(health))
        .with_state(node)
}

/// The node protocol's guard: a request from outside the process must
/// carry the cluster secret's MAC ([`strata_meta::cluster_auth`]), checked
/// before it touches a store: 401 without it, 403 when wrong or when this
/// process has no secret.
pub(crate) async fn cluster_guard(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    use strata_meta::cluster_auth::{process_secret, AuthFault};
    // The health probe (pitchfork's) says only ok or not, to anyone.
    if req.uri().path() == "/cluster/v1/health" {
        return next.run(req).await;
    }
    let Some(secret) = process_secret() else {
        return text(
            StatusCode::FORBIDDEN,
            "this node has no cluster secret (STRATA_CLUSTER_SECRET)",
        );
    };
    match secret.admit(req) {
        Ok(req) => next.run(req).await,
        Err(f @ AuthFault::Missing) => text(StatusCode::UNAUTHORIZED, f.to_string()),
        Err(f) => text(StatusCode::FORBIDDEN, f.to_string()),
    }
}

/// Largest record body a node accepts on the protocol routes.
const RECORD_BODY_LIMIT: usize = 64 << 20;

/// The row's store for a call that carries a current table version and
/// names a row this node serves (`admit`), or the refusal.
pub(crate) async fn admitted_row_store(
    node: &Node,
    version: u64,
    row: usize,
) -> Result<Arc<RowStore>, Refusal> {
    let (_, stores) = node.admit(version, row).await?;
    row_store(stores, row).await
}

async fn row_store(stores: Arc<RowStores>, row: usize) -> Result<Arc<RowStore>, Refusal> {
    // Open already (every row but the first request's): no hand-off.
    if let Some(s) = stores.opened_row(row) {
        return Ok(s);
    }
    match tokio::task::spawn_blocking(move || stores.row(row)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(Refusal::Failed(e.to_string())),
        Err(e) => Err(Refusal::Failed(e.to_string())),
    }
}

async fn health(State(node): State<Node>) -> Response {
    // Every device answers (pitchfork's probe).
    let n = node.clone();
    match tokio::task::spawn_blocking(move || n.disk_ok()).await {
        Ok(true) => text(StatusCode::OK, "ok"),
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "disk does not answer"),
    }
}

/// The header naming where a record was put (PUT) or read from (GET).
pub use strata_proto::TIER_HEADER;

/// The write's stamp: the client's, else this node's clock.
fn stamp_of(headers: &HeaderMap) -> u64 {
    headers
        .get(STAMP_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(now_stamp)
}

fn object_id(bucket: &str, key: &str) -> ObjectId {
    let (key, alt, _) = identity(bucket, key);
    ObjectId { key, alt }
}

/// The bucket's name without a tract suffix is the workload; a data tract
/// (`key` NUL `n`) belongs to its object's workload.
fn is_tract(key: &str) -> bool {
    key.contains('\0')
}

async fn put_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let put = async {
        let version = version_of(&headers)?;
        put_record(&node, version, row, &bucket, &key, stamp_of(&headers), body).await
    };
    match put.await {
        Ok(tier) => {
            let mut r = text(StatusCode::OK, "stored");
            if let Some(Ok(v)) = tier.map(|t| axum::http::HeaderValue::from_str(&t)) {
                r.headers_mut().insert(TIER_HEADER, v);
            }
            r
        }
        Err(r) => refused(r),
    }
}

/// A replica's put of one record (`PUT /cluster/v1/rows/...`, and the
/// coordinator's call on this node's own replica): answers the tier it
/// went to.
pub(crate) async fn put_record(
    node: &Node,
    version: u64,
    row: usize,
    bucket: &str,
    key: &str,
    stamp: u64,
    record: Bytes,
) -> Result<Option<String>, Refusal> {
    let start = Instant::now();
    let store = admitted_row_store(node, version, row).await?;
    match write_local(node, &store, bucket, key, stamp, &record, start).await {
        Ok(tier) => Ok(Some(tier_str(tier).to_string())),
        // A full device is the client's to know (507: deleting frees
        // space), not a fault to retry on.
        Err(e @ ClusterError::Full { .. }) => Err(Refusal::Full(e.to_string())),
        Err(e) => Err(Refusal::Failed(e.to_string())),
    }
}

/// `flash` or `disk`.
pub(crate) fn tier_str(t: Tier) -> &'static str {
    match t {
        Tier::Flash => "flash",
        Tier::Disk => "disk",
    }
}

/// Writes `record` as `bucket/key` with `stamp` into this node's `store`:
/// the tier by the plan (object bytes, whole or a tract, by the bucket's
/// write probability; manifests and tombstones to disk), the part by the
/// plan, the caches told, the write counted and traced once at its head
/// record. The one write path of the row protocol (`PUT
/// /cluster/v1/rows/...`) and of the coordinator's calls on this node's
/// replica (the local replica); answers the tier the record went to. The
/// record goes to the store as it came (no copy behind the row prefix).
pub(crate) async fn write_local(
    node: &Node,
    store: &Arc<RowStore>,
    bucket: &str,
    key: &str,
    stamp: u64,
    record: &Bytes,
    start: Instant,
) -> Result<Tier, ClusterError> {
    let head_len = parse_head(record).ok().map(|h| h.len());
    let is_data = is_data_record(record);
    let data_bytes = is_data || is_tract(key);
    let tier = if data_bytes {
        node.choose_tier(bucket)
    } else {
        Tier::Disk
    };
    let own = node.own_part(bucket);
    let res = store
        .put(bucket, key, stamp, record.clone(), tier, own)
        .await;
    node.forget(object_id(bucket, key));
    res?;
    // An object's write is counted and traced once, at its head record (the
    // object whole, or the manifest written after every tract), with the
    // object's length.
    if let (false, Some(len)) = (is_tract(key), head_len) {
        let w = node.metrics.workload(bucket);
        w.writes.fetch_add(1, Ordering::Relaxed);
        w.bytes_written.fetch_add(len, Ordering::Relaxed);
        if tier == Tier::Flash && data_bytes {
            w.writes_flash.fetch_add(1, Ordering::Relaxed);
        }
        if let Some(t) = node.tracer.as_ref() {
            let id = object_id(bucket, key);
            t.put(
                id.key,
                node.workload_id(bucket),
                len,
                stamp as f64 / 1e6,
                start.elapsed().as_micros() as u64,
            );
        }
    }
    node.metrics
        .put_latency
        .observe(start.elapsed().as_micros() as u64);
    Ok(tier)
}

#[derive(Deserialize)]
struct GetQuery {
    /// Answer tombstones too, with the stamp (scrub repair).
    #[serde(default)]
    raw: Option<u8>,
    /// Answer the record's first `start` bytes only, with the whole
    /// record's length in `RECORD_LENGTH_HEADER` (a HEAD).
    #[serde(default)]
    start: Option<usize>,
}

async fn get_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    Query(q): Query<GetQuery>,
    headers: HeaderMap,
) -> Response {
    let got = async {
        let version = version_of(&headers)?;
        get_record(&node, version, row, &bucket, &key, q.raw.is_some(), q.start).await
    };
    match got.await {
        Ok(RecordRead::Found {
            stamp,
            record,
            len,
            tier,
        }) => {
            let mut r = (StatusCode::OK, record).into_response();
            if let (Some(len), true) = (len, q.start.is_some()) {
                r.headers_mut()
                    .insert(RECORD_LENGTH_HEADER, axum::http::HeaderValue::from(len));
            }
            if let Ok(v) = stamp.to_string().parse() {
                r.headers_mut().insert(STAMP_HEADER, v);
            }
            if let Some(Ok(v)) = tier.map(|t| axum::http::HeaderValue::from_str(&t)) {
                r.headers_mut().insert(TIER_HEADER, v);
            }
            r
        }
        Ok(RecordRead::Deleted { stamp }) => {
            // A tombstone: 404 with the delete's stamp, so a client that
            // fails over to a replica which missed the delete does not
            // serve the older object.
            let mut r = text(StatusCode::NOT_FOUND, "deleted");
            if let Ok(v) = stamp.to_string().parse() {
                r.headers_mut().insert(STAMP_HEADER, v);
            }
            r
        }
        Ok(RecordRead::Absent) => text(StatusCode::NOT_FOUND, "not found"),
        Err(r) => refused(r),
    }
}

/// A replica's read of one record (`GET /cluster/v1/rows/...`, and the
/// coordinator's call on this node's own replica): with `raw`, a
/// tombstone is answered as a record; with a `limit`, the record's first
/// bytes and its whole length.
pub(crate) async fn get_record(
    node: &Node,
    version: u64,
    row: usize,
    bucket: &str,
    key: &str,
    raw: bool,
    limit: Option<usize>,
) -> Result<RecordRead, Refusal> {
    let start = Instant::now();
    let store = admitted_row_store(node, version, row).await?;
    match read_local(node, &store, bucket, key, raw, limit, start).await {
        LocalRead::Found {
            stamp,
            record,
            len,
            served,
        } => Ok(RecordRead::Found {
            record,
            stamp,
            len: Some(len),
            tier: Some(served.as_str().to_string()),
        }),
        LocalRead::Deleted { stamp } => Ok(RecordRead::Deleted { stamp }),
        // No stamp: the reader asks the other replicas.
        LocalRead::Absent | LocalRead::Copying => Ok(RecordRead::Absent),
        LocalRead::NotYetKnown => Err(Refusal::Unavailable(format!(
            "this node has just started and does not know yet whether its copy of \
             row {row} is complete: retry, or ask another replica"
        ))),
        LocalRead::CatchingUp => Err(Refusal::Unavailable(format!(
            "this node's copy of row {row} may lack records after damage found when it \
             opened, and is catching up from the other replicas: ask another replica"
        ))),
        LocalRead::Failed(e) => Err(Refusal::Failed(e)),
    }
}

/// What a read of one record from a row store on this node found.
pub(crate) enum LocalRead {
    /// The record (with `raw`, a tombstone too), or its first bytes when
    /// the read was limited; the whole record's length, its stamp and
    /// where it was read from.
    Found {
        stamp: u64,
        record: Bytes,
        len: u64,
        served: Served,
    },
    /// A tombstone (without `raw`).
    Deleted { stamp: u64 },
    /// No record of the name.
    Absent,
    /// No record of the name this replica may serve: only a stripe holds
    /// one, and this node's copy of the row is still being made (a newer
    /// record may not have arrived). Answered as a 404 without a stamp,
    /// so the reader asks the other replicas.
    Copying,
    /// Only a stripe holds a record of the name and this node, just
    /// started, does not know yet whether its copy of the row is
    /// complete: answered 503 (retry, or ask another replica).
    NotYetKnown,
    /// This copy of the row may lack records it acknowledged (damage found
    /// when it opened) and has not yet caught up from the other replicas,
    /// one of which is live: answered 503 (ask another replica).
    CatchingUp,
    /// The store failed (the reason is for the log, not for clients).
    Failed(String),
}

/// Reads `bucket/key` from this node's `store`: the RAM cache, the flash
/// read cache, then the row's parts; admits what it read to the caches when
/// no write raced it, counts and traces the read. The one read path of the
/// row protocol (`GET /cluster/v1/rows/...`) and of the public API's local
/// replicas (the public API). With a `limit`, a record longer than it
/// is read from the device only up to it (a HEAD: the record's kind,
/// cookie and metadata), its data unchecked, and not cached; a cached
/// record is served from the cache.
pub(crate) async fn read_local(
    node: &Node,
    store: &Arc<RowStore>,
    bucket: &str,
    key: &str,
    raw: bool,
    limit: Option<usize>,
    start: Instant,
) -> LocalRead {
    // A copy that may lack acknowledged records serves no reads while
    // another replica can (a repair's raw reads still get what it holds).
    if !raw && store.catching_up() && node.other_replica_live(store.row()) {
        return LocalRead::CatchingUp;
    }
    let id = object_id(bucket, key);
    let traced = !is_tract(key);
    let limit = limit.unwrap_or(usize::MAX);
    let found = |stamp: u64, record: Bytes, len: u64, served: Served| {
        node.metrics.served(served);
        node.metrics.workload(bucket).read(served);
        let us = start.elapsed().as_micros() as u64;
        node.metrics.get_latency.observe(us);
        if let (Some(t), true) = (node.tracer.as_ref(), traced) {
            // A HEAD whose metadata runs past its limit is read again
            // whole, and traced then.
            if let Ok(Some(len)) = parse_head_start(&record, len).map(|h| h.map(|h| h.len)) {
                t.get(
                    id.key,
                    node.workload_id(bucket),
                    len,
                    stamp as f64 / 1e6,
                    served,
                    us,
                    None,
                );
            }
        }
        LocalRead::Found {
            stamp,
            record,
            len,
            served,
        }
    };
    let finish = |stamp: u64, record: Bytes, served: Served| {
        let len = record.len() as u64;
        let record = record.slice(..record.len().min(limit));
        found(stamp, record, len, served)
    };
    // The caches serve and take records of this row only under its
    // current cache generation, and not at all while this node's copy of
    // the row is being made (an entry cached before the row last left
    // this node may be older than what was acknowledged meanwhile).
    let tag = if raw || (node.ram.is_none() && node.fcache.is_none()) {
        None
    } else {
        node.cache_tag(store.row())
    };
    if let (Some(tag), Some(ram)) = (tag, node.ram.as_ref()) {
        if let Some(c) = ram.get(id) {
            if c.cookie != tag {
                ram.remove(id);
            } else if c.needle.len() >= 8 {
                let mut b = [0u8; 8];
                b.copy_from_slice(&c.needle[..8]);
                return finish(u64::from_le_bytes(b), c.needle.slice(8..), Served::Ram);
            }
        }
    }
    let before = store.write_count();
    if let Some(tag) = tag {
        if let Some(fc) = node.fcache.clone() {
            let hit = tokio::task::spawn_blocking(move || fc.get(id)).await;
            if let Ok(Some((cookie, needle))) = hit {
                if cookie != tag {
                    if let Some(fc) = &node.fcache {
                        fc.invalidate(id);
                    }
                } else if needle.len() >= 8 && store.write_count() == before {
                    let needle = Bytes::from(needle);
                    let mut b = [0u8; 8];
                    b.copy_from_slice(&needle[..8]);
                    return finish(u64::from_le_bytes(b), needle.slice(8..), Served::FlashCache);
                }
            }
        }
    }
    let got = match row_get(node, store, bucket, key, limit).await {
        Ok(g) => g,
        Err(e) => return LocalRead::Failed(e),
    };
    let got = match got {
        // A newer copy of the record in an erasure-coded stripe (its
        // replica copy was dropped once the stripe was durable).
        Ok(g) => match stripe_copy(node, store, bucket, key, g.as_ref().map(|s| s.0.stamp)).await {
            Ok(FromStripe::Record(s)) => {
                let len = s.record.len() as u64;
                Some((s, len))
            }
            Ok(FromStripe::Nothing) => g,
            Ok(FromStripe::Withheld) => return LocalRead::Copying,
            Ok(FromStripe::NotKnown) => return LocalRead::NotYetKnown,
            Err(e) => return LocalRead::Failed(e),
        },
        Err(e) => {
            // A damaged copy: the reader goes to another replica, and this
            // one is rewritten from a peer in the background (Haystack's
            // repair of a bad needle, without waiting for the scrub).
            tokio::spawn(crate::scrub::repair_record(
                node.clone(),
                store.row(),
                bucket.to_string(),
                key.to_string(),
            ));
            return LocalRead::Failed(e.to_string());
        }
    };
    match got {
        Some((s, len)) if raw || !is_tombstone(&s.record) => {
            let whole = s.record.len() as u64 == len;
            if let (Some(tag), true, true) = (tag, whole, store.write_count() == before) {
                // No write to the row raced this read: safe to cache.
                let cache_ram = node.ram.is_some() && node.admits(s.part, s.segment);
                let cache_flash = node.fcache.is_some() && s.tier == Tier::Disk;
                if cache_ram || cache_flash {
                    let mut needle = Vec::with_capacity(8 + s.record.len());
                    needle.extend_from_slice(&s.stamp.to_le_bytes());
                    needle.extend_from_slice(&s.record);
                    // The cookie carries the row's cache generation.
                    if let (true, Some(fc)) = (cache_flash, &node.fcache) {
                        fc.admit(id, tag, &needle);
                    }
                    if let (true, Some(ram)) = (cache_ram, &node.ram) {
                        ram.insert(Cached {
                            id,
                            cookie: tag,
                            needle: Bytes::from(needle),
                        });
                    }
                }
            }
            let served = match s.tier {
                Tier::Flash => {
                    // The LRU mover's reference bit.
                    node.hot.set(strata_node::ramcache::cache_key(id));
                    Served::Flash
                }
                Tier::Disk => Served::Disk,
            };
            let record = s.record.slice(..s.record.len().min(limit));
            found(s.stamp, record, len, served)
        }
        Some((s, _)) => LocalRead::Deleted { stamp: s.stamp },
        None => LocalRead::Absent,
    }
}

/// `store.get(bucket, key)`, or the first `limit` bytes of a longer
/// record, with the whole record's length. A read from the page cache
/// costs less than the hand-off to the blocking pool (two context
/// switches): it runs here, on the runtime's thread, limited to the page
/// cache ([`strata_store::cached_only`]); a needle that is not there (one
/// just written with O_DIRECT, or not read for long) is read by the pool,
/// where waiting for the device holds no runtime thread. After a read
/// found its record on the disk tier or was slow, every read goes to the
/// pool for a while. Err: the pool's task failed.
async fn row_get(
    node: &Node,
    store: &Arc<RowStore>,
    bucket: &str,
    key: &str,
    limit: usize,
) -> Result<Result<Option<(crate::rows::Stored, u64)>, ClusterError>, String> {
    // The needle's data starts with the name and stamp (at most
    // RECORD_START bytes), then the record.
    let n = limit.saturating_add(crate::rows::RECORD_START);
    let get = move |store: &RowStore, bucket: &str, key: &str| {
        store
            .get_start(bucket, key, n)
            .map(|g| g.map(|(s, _, len)| (s, len)))
    };
    if node.inline_reads.open() {
        let t0 = Instant::now();
        let got = strata_store::cached_only(|| get(store, bucket, key));
        let uncached = matches!(
            &got,
            Err(ClusterError::Store {
                source: strata_store::StoreError::NotCached,
                ..
            })
        );
        if !uncached {
            let disk = matches!(&got, Ok(Some((s, _))) if s.tier == Tier::Disk);
            node.inline_reads.observe(disk, t0.elapsed());
            return Ok(got);
        }
        node.metrics
            .reads_not_cached
            .fetch_add(1, Ordering::Relaxed);
    }
    let st = store.clone();
    let (b, k) = (bucket.to_string(), key.to_string());
    tokio::task::spawn_blocking(move || get(&st, &b, &k))
        .await
        .map_err(|e| e.to_string())
}

/// The held copy a delete replaces, as [`row_get`] reads it but without
/// reading a long record whole: its stamp, and its record whole only when
/// it is short (a tombstone) or a manifest (whose tracts the client
/// deletes). A delete of a 4 MiB object read 4 MiB first.
async fn row_start(
    node: &Node,
    store: &Arc<RowStore>,
    bucket: &str,
    key: &str,
) -> Result<Result<Option<crate::rows::Stored>, ClusterError>, String> {
    let st = store.clone();
    let (b, k) = (bucket.to_string(), key.to_string());
    let start =
        tokio::task::spawn_blocking(move || st.get_start(&b, &k, crate::rows::RECORD_START))
            .await
            .map_err(|e| e.to_string())?;
    match start {
        Ok(Some((s, false, _))) if s.record.first() == Some(&RECORD_MANIFEST) => {
            let got = row_get(node, store, bucket, key, usize::MAX).await?;
            Ok(got.map(|g| g.map(|(s, _)| s)))
        }
        Ok(s) => Ok(Ok(s.map(|(s, _, _)| s))),
        Err(e) => Ok(Err(e)),
    }
}

/// What the stripes of a row hold for one name, beside the row store's copy.
enum FromStripe {
    /// No stripe copy newer than the row store's.
    Nothing,
    /// The newer stripe copy, read.
    Record(crate::rows::Stored),
    /// A newer stripe copy, not served: this node's copy of the row is
    /// still being made, so a newer record of the name may not have
    /// reached its row store yet.
    Withheld,
    /// A newer stripe copy, not served: this node has not yet learnt
    /// whether its copy of the row is complete (just started).
    NotKnown,
}

/// The stripe copy of `bucket/key` in `store`'s row, read, if a stripe
/// holds one newer than `have` (the stamp of the row store's copy) and
/// this node's copy of the row is complete. A replica that joined the row
/// (a recovery target, a new node) installs the row's stripes at once but
/// receives the row's records only as the copy streams in: until then a
/// stripe's record may be older than one acknowledged before it joined
/// (docs/reliability.md, finding 10), so the read goes to another replica.
async fn stripe_copy(
    node: &Node,
    store: &Arc<RowStore>,
    bucket: &str,
    key: &str,
    have: Option<u64>,
) -> Result<FromStripe, String> {
    let (k, alt, _) = identity(bucket, key);
    let Some(loc) = node.ec.lookup(store.row(), k, alt) else {
        return Ok(FromStripe::Nothing);
    };
    if have.is_some_and(|h| h >= loc.stamp) {
        return Ok(FromStripe::Nothing);
    }
    match node.row_complete(store.row()) {
        Some(true) => {}
        Some(false) => {
            node.ec.reads_withheld.fetch_add(1, Ordering::Relaxed);
            return Ok(FromStripe::Withheld);
        }
        None => {
            node.ec.reads_withheld.fetch_add(1, Ordering::Relaxed);
            return Ok(FromStripe::NotKnown);
        }
    }
    let record = crate::ec::read_record(node, loc, bucket, key).await?;
    Ok(FromStripe::Record(crate::rows::Stored {
        stamp: loc.stamp,
        record,
        tier: Tier::Disk,
        segment: loc.stripe,
        part: 0,
    }))
}

#[derive(Deserialize)]
struct DeleteQuery {
    /// Drop the tombstone of this stamp (tombstone garbage collection).
    #[serde(default)]
    purge: Option<u64>,
}

/// A delete writes a tombstone with the request's stamp (it wins over
/// every older record of the name on every replica, in recovery and in
/// scrubbing); `?purge=STAMP` drops a tombstone once the scrub found it on
/// every replica past the grace time.
async fn delete_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    Query(q): Query<DeleteQuery>,
    headers: HeaderMap,
) -> Response {
    let version = match version_of(&headers) {
        Ok(v) => v,
        Err(r) => return refused(r),
    };
    let Some(stamp) = q.purge else {
        return match delete_record(&node, version, row, &bucket, &key, stamp_of(&headers)).await {
            Ok(r) => {
                let mut resp = match (&r.manifest, r.live) {
                    (Some(rec), _) => (StatusCode::OK, rec.clone()).into_response(),
                    (None, true) => text(StatusCode::OK, "deleted"),
                    (None, false) => text(StatusCode::NOT_FOUND, "not found"),
                };
                if let Some(v) = r.stamp.and_then(|s| s.to_string().parse().ok()) {
                    resp.headers_mut().insert(STAMP_HEADER, v);
                }
                resp
            }
            Err(r) => refused(r),
        };
    };
    let store = match admitted_row_store(&node, version, row).await {
        Ok(s) => s,
        Err(r) => return refused(r),
    };
    {
        let (k, alt, _) = identity(&bucket, &key);
        if !node.ec.may_purge(store.row(), k, alt, stamp) {
            return text(
                StatusCode::CONFLICT,
                "an erasure-coded stripe may still hold an older record of this name: \
                 the tombstone stays until stripe compaction drops that record",
            );
        }
        return match store.purge(&bucket, &key, stamp).await {
            Ok(true) => text(StatusCode::OK, "purged"),
            Ok(false) => text(StatusCode::NOT_FOUND, "no tombstone of that stamp"),
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        };
    }
}

/// A replica's delete (`DELETE /cluster/v1/rows/...`, and the
/// coordinator's call on this node's own replica): a tombstone of `stamp`;
/// answers what it replaced.
pub(crate) async fn delete_record(
    node: &Node,
    version: u64,
    row: usize,
    bucket: &str,
    key: &str,
    stamp: u64,
) -> Result<Replaced, Refusal> {
    let store = admitted_row_store(node, version, row).await?;
    let (bucket, key) = (bucket.to_string(), key.to_string());
    let node = node.clone();
    // The newest copy older than this delete, the row store's or an
    // erasure-coded stripe's (whose index tells a tombstone by its
    // length): its stamp and whether it is live go back to the client,
    // with the record itself when it is a manifest (the client deletes its
    // tracts), so that a delete costs no read of the object before it.
    let held = match row_start(&node, &store, &bucket, &key).await {
        Ok(Ok(g)) => g,
        Ok(Err(e)) => return Err(Refusal::Failed(e.to_string())),
        Err(e) => return Err(Refusal::Failed(e)),
    };
    let (k, alt, _) = identity(&bucket, &key);
    let stripe = node
        .ec
        .lookup(store.row(), k, alt)
        .filter(|l| held.as_ref().is_none_or(|s| s.stamp < l.stamp));
    // A copy as new as the delete or newer (a later write) is not
    // replaced: nothing is reported.
    let prior: Option<(u64, Option<Bytes>)> = match (stripe, held) {
        (Some(l), _) if l.stamp >= stamp => None,
        (Some(l), _) => {
            let tomb_len = strata_proto::row::encoded_len(&bucket, &key, 1) as u32;
            if l.len == tomb_len {
                Some((l.stamp, None))
            } else {
                match crate::ec::read_record(&node, l, &bucket, &key).await {
                    Ok(r) => Some((l.stamp, Some(r))),
                    Err(e) => return Err(Refusal::Failed(e)),
                }
            }
        }
        (None, Some(s)) if s.stamp >= stamp => None,
        (None, Some(s)) => Some((s.stamp, (!is_tombstone(&s.record)).then_some(s.record))),
        (None, None) => None,
    };
    let res = store
        .put(
            &bucket,
            &key,
            stamp,
            tombstone_record(),
            Tier::Disk,
            node.own_part(&bucket),
        )
        .await;
    node.forget(object_id(&bucket, &key));
    match res {
        Ok(_) => {
            if let (Some(t), false) = (node.tracer.as_ref(), is_tract(&key)) {
                t.delete(object_id(&bucket, &key).key, node.workload_id(&bucket));
            }
            Ok(match prior {
                Some((s, Some(rec))) => Replaced {
                    stamp: Some(s),
                    live: true,
                    manifest: (rec.first() == Some(&RECORD_MANIFEST)).then_some(rec),
                },
                Some((s, None)) => Replaced {
                    stamp: Some(s),
                    live: false,
                    manifest: None,
                },
                None => Replaced::default(),
            })
        }
        Err(e @ ClusterError::Full { .. }) => Err(Refusal::Full(e.to_string())),
        Err(e) => Err(Refusal::Failed(e.to_string())),
    }
}

/// FDS's extend-blob at the first live replica of the object's metadata
/// row: appends are serialized here (one lock per node), the new manifest
/// is written to every live replica of the row before the range is handed
/// out, so concurrent appenders get disjoint tract ranges.
async fn extend(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let done = async {
        let version = version_of(&headers)?;
        let req: ExtendRequest = serde_json::from_slice(&body)
            .map_err(|e| Refusal::Bad(format!("bad extend request: {e}")))?;
        extend_record(&node, version, row, &bucket, &key, &req).await
    };
    match done.await {
        Ok(r) => Json(r).into_response(),
        Err(r) => refused(r),
    }
}

/// A replica's extend (see [`extend`]): the first live replica of the
/// row reserves `req.lens` tracts at the object's end.
pub(crate) async fn extend_record(
    node: &Node,
    version: u64,
    row: usize,
    bucket: &str,
    key: &str,
    req: &ExtendRequest,
) -> Result<ExtendResponse, Refusal> {
    let (bucket, key) = (bucket.to_string(), key.to_string());
    let (disk, stores) = node.admit(version, row).await?;
    let Some(map) = node.map() else {
        return Err(Refusal::Unavailable("no table".into()));
    };
    let live = map.table.live_replicas(row);
    if live.first() != Some(&disk) {
        return Err(Refusal::NotHere(format!(
            "extend of row {row} goes to the row's first live replica"
        )));
    }
    if req.lens.is_empty() || req.tract_size == 0 || req.lens.iter().any(|&l| l > req.tract_size) {
        return Err(Refusal::Bad(
            "extend needs at least one tract, each no larger than the tract size".into(),
        ));
    }
    let _serial = node.extend_lock.lock().await;
    let store = row_store(stores, row).await?;
    let (b, k) = (bucket.clone(), key.clone());
    let st = store.clone();
    let current = match tokio::task::spawn_blocking(move || st.get(&b, &k)).await {
        Ok(Ok(c)) => c.map(|s| s.record).filter(|r| !is_tombstone(r)),
        Ok(Err(e)) => return Err(Refusal::Failed(e.to_string())),
        Err(e) => return Err(Refusal::Failed(e.to_string())),
    };
    let mut m = match current {
        None => Manifest {
            len: 0,
            tract_size: req.tract_size,
            tracts: 0,
            lens: Vec::new(),
            cookie: new_cookie(),
            meta: None,
            version: 0,
        },
        Some(rec) if rec.first() == Some(&RECORD_MANIFEST) => {
            match serde_json::from_slice::<Manifest>(&rec[1..]) {
                // An append changes the bytes: an S3 ETag would be wrong.
                Ok(m) => Manifest {
                    meta: m.meta.map(|x| ObjectMeta {
                        etag: String::new(),
                        ..x
                    }),
                    ..m
                },
                Err(e) => {
                    return Err(Refusal::Failed(format!(
                        "{bucket}/{key}: damaged manifest: {e}"
                    )))
                }
            }
        }
        Some(_) => {
            return Err(Refusal::Conflict(format!(
                "{bucket}/{key} is a small object stored whole; it cannot be appended to"
            )))
        }
    };
    if m.lens.is_empty() && m.tracts > 0 {
        m.lens = (0..m.tracts)
            .map(|t| m.tract_size.min(m.len.saturating_sub(t * m.tract_size)))
            .collect();
    }
    let first = m.tracts;
    m.tracts += req.lens.len() as u64;
    m.len += req.lens.iter().sum::<u64>();
    m.lens.extend(&req.lens);
    let rec = manifest_record(&m);
    let stamp = now_stamp();
    let own = node.own_part(&bucket);
    let res = store
        .put(&bucket, &key, stamp, rec.clone(), Tier::Disk, own)
        .await;
    node.forget(object_id(&bucket, &key));
    if let Err(e) = res {
        return Err(Refusal::Failed(e.to_string()));
    }
    let path = object_path(row, &bucket, &key);
    for d in live.iter().skip(1) {
        let Some(addr) = map.addr_of_disk.get(d) else {
            continue;
        };
        let ok = node
            .http
            .send_stamped(
                hyper::Method::PUT,
                &format!("http://{addr}{path}"),
                Some(map.table.version()),
                Some(stamp),
                rec.clone(),
                std::time::Duration::from_secs(10),
            )
            .await
            .is_ok_and(|r| r.status.is_success());
        if !ok {
            return Err(Refusal::Unavailable(format!(
                "replica {addr} did not take the new manifest; retry"
            )));
        }
    }
    Ok(ExtendResponse {
        first,
        version: m.version,
    })
}

/// Streams every live record of the row (no version check: a node being
/// drained or replaced still hands over what it holds). At most a few
/// exports run at once per disk: the source side of recovery's throttle.
async fn export(State(node): State<Node>, Path(row): Path<usize>) -> Response {
    let permit = match node.export_permits.clone().acquire_owned().await {
        Ok(p) => p,
        Err(_) => return text(StatusCode::SERVICE_UNAVAILABLE, "shutting down"),
    };
    let n = node.clone();
    let found = tokio::task::spawn_blocking(move || match n.row_here(row) {
        Some(s) => s.existing(row),
        None => Ok(None),
    })
    .await;
    let store = match found {
        Ok(Ok(Some(s))) => s,
        Ok(Ok(None)) => return text(StatusCode::NOT_FOUND, format!("row {row} is not here")),
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    // A copy that may lack acknowledged records is no source for another
    // while it catches up (a second, with another replica live); the copy
    // is tried again.
    if store.catching_up() && node.other_replica_live(row) {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "this node's copy of row {row} is catching up from the other replicas: try again"
            ),
        );
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(8);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let mut buf = BytesMut::with_capacity(1 << 20);
        let res = store.scan(|item| {
            if let Scanned::Record {
                bucket,
                key,
                stamp,
                data,
            } = item
            {
                put_frame(&mut buf, &bucket, &key, stamp, &data);
                if buf.len() >= 1 << 20 {
                    let chunk = buf.split().freeze();
                    return tx.blocking_send(Ok(chunk)).is_ok();
                }
            }
            true
        });
        match res {
            Ok(()) => {
                if !buf.is_empty() {
                    let _ = tx.blocking_send(Ok(buf.freeze()));
                }
            }
            Err(e) => {
                let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
            }
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Body::from_stream(stream).into_response()
}

/// Re-reads the row and computes per-range counts and checksums.
pub(crate) fn compute_digest(store: &RowStore) -> Result<(RowDigest, Vec<Vec<ListEntry>>), String> {
    let mut d = RowDigest {
        counts: vec![0; DIGEST_RANGES],
        sums: vec![0; DIGEST_RANGES],
        corrupt: 0,
        tombstones: vec![0; DIGEST_RANGES],
        stripes: Vec::new(),
    };
    let mut lists: Vec<Vec<ListEntry>> = vec![Vec::new(); DIGEST_RANGES];
    store
        .scan(|item| {
            match item {
                Scanned::Record {
                    bucket,
                    key,
                    stamp,
                    data,
                } => {
                    let r = record_range(&bucket, &key);
                    let h = record_hash(&bucket, &key, stamp, &data);
                    let tombstone = is_tombstone(&data);
                    d.counts[r] += 1;
                    d.sums[r] = d.sums[r].wrapping_add(h);
                    if tombstone {
                        d.tombstones[r] += 1;
                    }
                    lists[r].push(ListEntry {
                        bucket,
                        key,
                        hash: h,
                        stamp,
                        tombstone,
                    });
                }
                Scanned::Corrupt(_) => d.corrupt += 1,
            }
            true
        })
        .map_err(|e| e.to_string())?;
    Ok((d, lists))
}

async fn digest(State(node): State<Node>, Path(row): Path<usize>) -> Response {
    let n = node.clone();
    let res = tokio::task::spawn_blocking(move || -> Result<RowDigest, String> {
        let here = match n.row_here(row) {
            Some(s) => s.existing(row).map_err(|e| e.to_string())?,
            None => None,
        };
        match here {
            Some(s) => compute_digest(&s).map(|(d, _)| RowDigest {
                stripes: n.ec.installed_of(row),
                ..d
            }),
            None => Ok(RowDigest {
                counts: vec![0; DIGEST_RANGES],
                sums: vec![0; DIGEST_RANGES],
                corrupt: 0,
                tombstones: vec![0; DIGEST_RANGES],
                stripes: n.ec.installed_of(row),
            }),
        }
    })
    .await;
    match res {
        Ok(Ok(d)) => Json(d).into_response(),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

#[derive(Deserialize)]
struct ListQuery {
    range: usize,
}

async fn list(
    State(node): State<Node>,
    Path(row): Path<usize>,
    Query(q): Query<ListQuery>,
) -> Response {
    if q.range >= DIGEST_RANGES {
        return text(
            StatusCode::BAD_REQUEST,
            format!("range must be below {DIGEST_RANGES}"),
        );
    }
    let n = node.clone();
    let res = tokio::task::spawn_blocking(move || -> Result<Vec<ListEntry>, String> {
        let here = match n.row_here(row) {
            Some(s) => s.existing(row).map_err(|e| e.to_string())?,
            None => None,
        };
        match here {
            Some(s) => compute_digest(&s).map(|(_, mut l)| std::mem::take(&mut l[q.range])),
            None => Ok(Vec::new()),
        }
    })
    .await;
    match res {
        Ok(Ok(l)) => Json(l).into_response(),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// The erasure-coded stripes of the row installed here now (what a
/// digest's `stripes` says, without re-reading the row): the scrub asks
/// again after listing a range, since an install in between drops records
/// from one replica's list.
async fn stripes(State(node): State<Node>, Path(row): Path<usize>) -> Response {
    Json(node.ec.installed_of(row)).into_response()
}

async fn status(State(node): State<Node>) -> Response {
    let ids = node.disk_ids();
    let devices: Vec<serde_json::Value> = node
        .opts
        .devices
        .iter()
        .enumerate()
        .map(|(i, d)| {
            serde_json::json!({
                "disk": ids.as_ref().and_then(|(_, v)| v.get(i)).map(|d| d.0),
                "path": d.path.display().to_string(),
                "tier": d.tier,
                "in_rows": node.opts.in_rows(i),
            })
        })
        .collect();
    let plan = node.plan.read().map(|g| g.0).unwrap_or(0);
    Json(serde_json::json!({
        "node": ids.as_ref().map(|(n, _)| n.0),
        "devices": devices,
        "table_version": node.table_version(),
        "plan_version": plan,
        "flash_used_bytes": node.flash_used(),
        "flash_budget_bytes": node.flash_budget(),
        "rows_removed": node.rows_removed.load(Ordering::Relaxed),
        "read_repairs": node.read_repairs.load(Ordering::Relaxed),
        "addr": node.addr,
        "workers": node.workers.status(),
    }))
    .into_response()
}

/// Prometheus text: strata-node's counters (requests, reads by tier, RAM
/// cache, mover, traces, plan loads) and the cluster node's own.
pub(crate) async fn metrics(State(node): State<Node>) -> Response {
    let mut out = node.metrics.render();
    let lines = [
        (
            "strata_server_flash_used_bytes",
            "Bytes of the flash tier held by row segments.",
            node.flash_used(),
        ),
        (
            "strata_server_flash_budget_bytes",
            "Bytes the flash tier may hold (capacity, bounded by the plan).",
            node.flash_budget(),
        ),
        (
            "strata_server_rows_removed_total",
            "Row directories removed after their rows moved to other disks.",
            node.rows_removed.load(Ordering::Relaxed),
        ),
        (
            "strata_server_read_repairs_total",
            "Records found unreadable on a read and rewritten from another replica.",
            node.read_repairs.load(Ordering::Relaxed),
        ),
        (
            "strata_server_table_version",
            "Placement table version this node serves with.",
            node.table_version(),
        ),
    ];
    for (name, help, v) in lines {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}\n"
        ));
    }
    // The background workers: passes, errors, and whether one is busy.
    let workers = node.workers.status();
    for (name, help, kind) in [
        (
            "strata_worker_passes_total",
            "Passes a background worker finished.",
            "counter",
        ),
        (
            "strata_worker_errors_total",
            "Passes of a background worker that ended in an error.",
            "counter",
        ),
        (
            "strata_worker_busy",
            "1 while a background worker is in a pass, 0 between passes or once it stopped.",
            "gauge",
        ),
    ] {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
        for w in &workers {
            let v = match name {
                "strata_worker_passes_total" => w.passes,
                "strata_worker_errors_total" => w.errors,
                _ => u64::from(w.state == crate::workers::State::Busy),
            };
            out.push_str(&format!("{name}{{worker=\"{}\"}} {v}\n", w.name));
        }
    }
    let name = "strata_worker_throttle_bytes_per_second";
    out.push_str(&format!(
        "# HELP {name} A background worker's throttle in bytes per second (absent: none).\n# TYPE {name} gauge\n"
    ));
    for w in &workers {
        if let Some(t) = w.throttle_bytes_per_s {
            out.push_str(&format!("{name}{{worker=\"{}\"}} {t}\n", w.name));
        }
    }
    // The erasure-coding task's progress (as `GET /cluster/v1/ec/status`).
    let ec = node.ec.stats();
    let counters = [
        (
            "strata_server_ec_segments_encoded_total",
            "Sealed segments this node encoded into stripes.",
            ec.segments_encoded,
        ),
        (
            "strata_server_ec_bytes_encoded_total",
            "Bytes of the segments this node encoded.",
            ec.bytes_encoded,
        ),
        (
            "strata_server_ec_stripes_installed_total",
            "Stripe indexes installed on this node's replicas.",
            ec.stripes_installed,
        ),
        (
            "strata_server_ec_reads_healthy_total",
            "GETs served from a healthy data shard.",
            ec.reads_healthy,
        ),
        (
            "strata_server_ec_reads_degraded_total",
            "GETs decoded from K other shards.",
            ec.reads_degraded,
        ),
        (
            "strata_server_ec_shards_rebuilt_total",
            "Shards rebuilt here (lost disks, failed scrubs).",
            ec.shards_rebuilt,
        ),
        (
            "strata_server_ec_bytes_rebuilt_total",
            "Bytes of the shards rebuilt here.",
            ec.bytes_rebuilt,
        ),
        (
            "strata_server_ec_stripes_compacted_total",
            "Stripes this node compacted.",
            ec.stripes_compacted,
        ),
        (
            "strata_server_ec_reads_withheld_total",
            "GETs not served from a stripe because this node's copy of the row was still being made.",
            ec.reads_withheld,
        ),
        (
            "strata_server_ec_errors_total",
            "Erasure-coding steps that failed (retried on a later tick).",
            ec.errors,
        ),
    ];
    for (name, help, v) in counters {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}\n"
        ));
    }
    (
        StatusCode::OK,
        [("content-type", "text/plain; version=0.0.4")],
        out,
    )
        .into_response()
}
