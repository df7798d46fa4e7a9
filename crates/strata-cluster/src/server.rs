//! The node's cluster routes (`/cluster/v1/...`, see
//! [`strata_client::protocol`]).

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use bytes::BytesMut;
use serde::Deserialize;
use strata_client::protocol::{
    manifest_record, object_path, put_frame, record_hash, record_range, ExtendRequest,
    ExtendResponse, ListEntry, Manifest, RowDigest, DIGEST_RANGES, RECORD_MANIFEST,
    TABLE_VERSION_HEADER,
};
use strata_placement::DiskId;

use crate::node::ClusterNode;
use crate::rows::{RowStore, Scanned};

type Node = Arc<ClusterNode>;

pub(crate) fn router(node: Node) -> Router {
    Router::new()
        .route("/cluster/v1/health", get(health))
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
        .route("/cluster/v1/status", get(status))
        .with_state(node)
}

fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, msg.into()).into_response()
}

fn with_version(code: StatusCode, version: u64, msg: String) -> Response {
    let mut r = text(code, msg);
    if let Ok(v) = version.to_string().parse() {
        r.headers_mut().insert(TABLE_VERSION_HEADER, v);
    }
    r
}

/// Checks the request's table version and that `row` is on this node;
/// returns this node's disk in the row.
async fn admit(node: &ClusterNode, headers: &HeaderMap, row: usize) -> Result<DiskId, Response> {
    let Some(v) = headers
        .get(TABLE_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return Err(text(
            StatusCode::BAD_REQUEST,
            format!("missing or malformed {TABLE_VERSION_HEADER} header"),
        ));
    };
    if v > node.table_version() {
        // The client saw a newer table first: catch up.
        let _ = node.refresh_from(node.table_version()).await;
    }
    let Some(map) = node.map() else {
        return Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "this node has no placement table yet",
        ));
    };
    let mine = map.table.version();
    if v < mine {
        return Err(with_version(
            StatusCode::CONFLICT,
            mine,
            format!("table version {v} is stale; this node is at {mine}"),
        ));
    }
    if v > mine {
        return Err(with_version(
            StatusCode::SERVICE_UNAVAILABLE,
            mine,
            format!("table version {v} is not known here yet (at {mine}); retry"),
        ));
    }
    if row >= map.table.row_count() {
        return Err(text(
            StatusCode::BAD_REQUEST,
            format!(
                "row {row} does not exist (table has {})",
                map.table.row_count()
            ),
        ));
    }
    let Some((_, disk)) = node.ids() else {
        return Err(text(StatusCode::SERVICE_UNAVAILABLE, "not registered"));
    };
    if !map.table.row(row).contains(&disk) {
        return Err(text(
            StatusCode::MISDIRECTED_REQUEST,
            format!("row {row} is not on this node in table version {mine}"),
        ));
    }
    Ok(disk)
}

/// The row's store for a request that carries a current table version and
/// names a row this node serves (`admit`), or the refusal to send.
async fn admitted_row_store(
    node: &Node,
    headers: &HeaderMap,
    row: usize,
) -> Result<Arc<RowStore>, Response> {
    admit(node, headers, row).await?;
    row_store(node, row).await
}

async fn row_store(node: &Node, row: usize) -> Result<Arc<RowStore>, Response> {
    let n = node.clone();
    match tokio::task::spawn_blocking(move || n.rows.row(row)).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
        Err(e) => Err(text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())),
    }
}

async fn health(State(node): State<Node>) -> Response {
    let n = node.clone();
    match tokio::task::spawn_blocking(move || n.disk_ok()).await {
        Ok(true) => text(StatusCode::OK, "ok"),
        _ => text(StatusCode::SERVICE_UNAVAILABLE, "disk does not answer"),
    }
}

async fn put_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let store = match admitted_row_store(&node, &headers, row).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match store.put(&bucket, &key, &body).await {
        Ok(()) => text(StatusCode::OK, "stored"),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn get_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    headers: HeaderMap,
) -> Response {
    let store = match admitted_row_store(&node, &headers, row).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match tokio::task::spawn_blocking(move || store.get(&bucket, &key)).await {
        Ok(Ok(Some(b))) => (StatusCode::OK, b).into_response(),
        Ok(Ok(None)) => text(StatusCode::NOT_FOUND, "not found"),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn delete_object(
    State(node): State<Node>,
    Path((row, bucket, key)): Path<(usize, String, String)>,
    headers: HeaderMap,
) -> Response {
    let store = match admitted_row_store(&node, &headers, row).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    match tokio::task::spawn_blocking(move || store.delete(&bucket, &key)).await {
        Ok(Ok(true)) => text(StatusCode::OK, "deleted"),
        Ok(Ok(false)) => text(StatusCode::NOT_FOUND, "not found"),
        Ok(Err(e)) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
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
    let disk = match admit(&node, &headers, row).await {
        Ok(d) => d,
        Err(r) => return r,
    };
    let Some(map) = node.map() else {
        return text(StatusCode::SERVICE_UNAVAILABLE, "no table");
    };
    let live = map.table.live_replicas(row);
    if live.first() != Some(&disk) {
        return text(
            StatusCode::MISDIRECTED_REQUEST,
            format!("extend of row {row} goes to the row's first live replica"),
        );
    }
    let req: ExtendRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return text(StatusCode::BAD_REQUEST, format!("bad extend request: {e}")),
    };
    if req.lens.is_empty() || req.tract_size == 0 || req.lens.iter().any(|&l| l > req.tract_size) {
        return text(
            StatusCode::BAD_REQUEST,
            "extend needs at least one tract, each no larger than the tract size",
        );
    }
    let _serial = node.extend_lock.lock().await;
    let store = match row_store(&node, row).await {
        Ok(s) => s,
        Err(r) => return r,
    };
    let (b, k) = (bucket.clone(), key.clone());
    let st = store.clone();
    let current = match tokio::task::spawn_blocking(move || st.get(&b, &k)).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let mut m = match current {
        None => Manifest {
            len: 0,
            tract_size: req.tract_size,
            tracts: 0,
            lens: Vec::new(),
        },
        Some(rec) if rec.first() == Some(&RECORD_MANIFEST) => {
            match serde_json::from_slice::<Manifest>(&rec[1..]) {
                Ok(m) => m,
                Err(e) => {
                    return text(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("{bucket}/{key}: damaged manifest: {e}"),
                    )
                }
            }
        }
        Some(_) => {
            return text(
                StatusCode::CONFLICT,
                format!("{bucket}/{key} is a small object stored whole; it cannot be appended to"),
            )
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
    if let Err(e) = store.put(&bucket, &key, &rec).await {
        return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string());
    }
    let path = object_path(row, &bucket, &key);
    for d in live.iter().skip(1) {
        let Some(addr) = map.addr_of_disk.get(d) else {
            continue;
        };
        let ok = node
            .http
            .send(
                hyper::Method::PUT,
                &format!("http://{addr}{path}"),
                Some(map.table.version()),
                rec.clone(),
                std::time::Duration::from_secs(10),
            )
            .await
            .is_ok_and(|r| r.status.is_success());
        if !ok {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("replica {addr} did not take the new manifest; retry"),
            );
        }
    }
    Json(ExtendResponse { first }).into_response()
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
    let store = match tokio::task::spawn_blocking(move || n.rows.existing(row)).await {
        Ok(Ok(Some(s))) => s,
        Ok(Ok(None)) => return text(StatusCode::NOT_FOUND, format!("row {row} is not here")),
        Ok(Err(e)) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        Err(e) => return text(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(8);
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        let mut buf = BytesMut::with_capacity(1 << 20);
        let res = store.scan(|item| {
            if let Scanned::Record { bucket, key, data } = item {
                put_frame(&mut buf, &bucket, &key, &data);
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
    };
    let mut lists: Vec<Vec<ListEntry>> = vec![Vec::new(); DIGEST_RANGES];
    store
        .scan(|item| {
            match item {
                Scanned::Record { bucket, key, data } => {
                    let r = record_range(&bucket, &key);
                    let h = record_hash(&bucket, &key, &data);
                    d.counts[r] += 1;
                    d.sums[r] = d.sums[r].wrapping_add(h);
                    lists[r].push(ListEntry {
                        bucket,
                        key,
                        hash: h,
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
        match n.rows.existing(row).map_err(|e| e.to_string())? {
            Some(s) => compute_digest(&s).map(|(d, _)| d),
            None => Ok(RowDigest {
                counts: vec![0; DIGEST_RANGES],
                sums: vec![0; DIGEST_RANGES],
                corrupt: 0,
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
        match n.rows.existing(row).map_err(|e| e.to_string())? {
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

async fn status(State(node): State<Node>) -> Response {
    let ids = node.ids();
    Json(serde_json::json!({
        "node": ids.map(|(n, _)| n.0),
        "disk": ids.map(|(_, d)| d.0),
        "table_version": node.table_version(),
        "addr": node.addr,
    }))
    .into_response()
}
