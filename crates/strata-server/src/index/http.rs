//! The listing index's routes on the node protocol
//! (`/cluster/v1/index...`, `/cluster/v1/intents`): each parses its
//! request and makes the same typed call the coordinator makes on this
//! node's own replica.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::Router;
use strata_proto::replica::IndexChange;
use strata_proto::{IndexEntry, ListQuery};

use super::db::{apply_change, intents_below, list_page, ListingIndex, Order};
use crate::node::ClusterNode;
use crate::wire::{refused, version_of};

#[derive(Clone)]
struct Routes {
    idx: Arc<ListingIndex>,
    node: Arc<ClusterNode>,
}

/// The index routes of a node (`/cluster/v1/index`, docs/placement.md).
/// A change or a listing carries the caller's table version and is served
/// only when it is this node's and the bucket's index row is here
/// ([`ClusterNode::admit_index`]), as a record call is.
pub fn routes(index: Arc<ListingIndex>, node: Arc<ClusterNode>) -> Router {
    Router::new()
        .route(
            "/cluster/v1/index/{bucket}/{*name}",
            put(put_entry).delete(delete_entry),
        )
        .route("/cluster/v1/index/{bucket}", post(list))
        .route("/cluster/v1/index-rows/{row}", get(export))
        .route("/cluster/v1/intents", get(list_intents).post(set_intents))
        .with_state(Routes { idx: index, node })
}

/// Admits a change or a listing of `bucket` by the version in `headers`.
async fn admitted(r: &Routes, headers: &HeaderMap, bucket: &str) -> Result<(), Response> {
    let v = version_of(headers).map_err(refused)?;
    r.node.admit_index(v, bucket).await.map_err(refused)
}

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

fn rebuilding() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "this node's listing index is being rebuilt; ask another replica",
    )
        .into_response()
}

async fn write(
    idx: Arc<ListingIndex>,
    bucket: String,
    name: String,
    entry: Option<IndexEntry>,
    q: ChangeQuery,
) -> Response {
    let order = match (q.order.as_deref(), q.upto) {
        (None | Some("write"), None) => Order::Write,
        (Some("copy"), None) => Order::Copy,
        (Some("resolve"), Some(upto)) => Order::Resolve { upto },
        (o, upto) => {
            return (
                StatusCode::BAD_REQUEST,
                format!(
                    "unknown order {o:?} with upto {upto:?} (write, copy, or resolve with upto)"
                ),
            )
                .into_response()
        }
    };
    let intent = match q.intent {
        None => false,
        Some(1) => true,
        Some(i) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("intent={i}: only intent=1, with a writer's change (no order)"),
            )
                .into_response()
        }
    };
    let change = IndexChange {
        bucket,
        key: name,
        entry,
        stamp: q.stamp,
        order,
        intent,
    };
    match apply_change(&idx, &change).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(r) => refused(r),
    }
}

/// `?stamp=S` (a delete's stamp) and `?order=copy` (ordered as a copied
/// change) or `?order=resolve&upto=S` (the resolution of a write intent
/// of stamp S); `?intent=1`: a writer's change that also records its write
/// intent, stamped S, in the same commit (sent only by a coordinator on
/// this node: the node's resolver takes its intents as its own).
#[derive(serde::Deserialize)]
struct ChangeQuery {
    #[serde(default)]
    stamp: u64,
    #[serde(default)]
    intent: Option<u8>,
    #[serde(default)]
    order: Option<String>,
    #[serde(default)]
    upto: Option<u64>,
}

async fn put_entry(
    State(r): State<Routes>,
    UrlPath((bucket, name)): UrlPath<(String, String)>,
    Query(q): Query<ChangeQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(no) = admitted(&r, &headers, &bucket).await {
        return no;
    }
    match serde_json::from_slice::<IndexEntry>(&body) {
        Ok(e) => write(r.idx, bucket, name, Some(e), q).await,
        Err(e) => (StatusCode::BAD_REQUEST, format!("bad index entry: {e}")).into_response(),
    }
}

async fn delete_entry(
    State(r): State<Routes>,
    UrlPath((bucket, name)): UrlPath<(String, String)>,
    Query(q): Query<ChangeQuery>,
    headers: HeaderMap,
) -> Response {
    if let Err(no) = admitted(&r, &headers, &bucket).await {
        return no;
    }
    write(r.idx, bucket, name, None, q).await
}

async fn set_intents(State(r): State<Routes>, body: Bytes) -> Response {
    let c: strata_proto::IntentChange = match serde_json::from_slice(&body) {
        Ok(c) => c,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("bad intent change: {e}")).into_response()
        }
    };
    match r.idx.intents(&c.names, c.stamp, c.add, c.mirrored).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(e),
    }
}

/// `?before=S`, and `&mirrored=1` for the intents held for other nodes.
#[derive(serde::Deserialize)]
struct BeforeQuery {
    before: u64,
    #[serde(default)]
    mirrored: Option<u8>,
}

async fn list_intents(State(r): State<Routes>, Query(q): Query<BeforeQuery>) -> Response {
    match intents_below(&r.idx, q.before, q.mirrored.is_some()).await {
        Ok(list) => axum::Json(list).into_response(),
        Err(r) => refused(r),
    }
}

async fn list(
    State(r): State<Routes>,
    UrlPath(bucket): UrlPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(no) = admitted(&r, &headers, &bucket).await {
        return no;
    }
    let q: ListQuery = match serde_json::from_slice(&body) {
        Ok(q) => q,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("bad listing query: {e}")).into_response()
        }
    };
    match list_page(&r.idx, &bucket, &q).await {
        Ok(page) => axum::Json(page).into_response(),
        Err(r) => refused(r),
    }
}

/// Streams the entries and tombstones of every bucket whose index lives
/// in `row` (recovery copies them to a row's new replica; a rebuilt
/// index takes them from the other replicas), as [`ExportLine`]s.
async fn export(State(r): State<Routes>, UrlPath(row): UrlPath<usize>) -> Response {
    if r.idx.rebuilding() {
        return rebuilding();
    }
    let Some(map) = r.node.map() else {
        return (StatusCode::SERVICE_UNAVAILABLE, "no placement table yet").into_response();
    };
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    let idx = r.idx;
    tokio::task::spawn_blocking(move || {
        let want = |bucket: &str| strata_proto::index_row(&map.table, bucket) == row;
        let res = idx.export(&want, &mut |chunk| tx.blocking_send(Ok(chunk)).is_ok());
        if let Err(e) = res {
            let _ = tx.blocking_send(Err(std::io::Error::other(e.to_string())));
        }
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    axum::body::Body::from_stream(stream).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A change's query is checked before the index is touched: an
    /// unknown intent value or an intent with a copy's order is a 400.
    #[test]
    fn a_malformed_change_query_is_a_bad_request() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = Arc::new(ListingIndex::open(&dir.path().join("l.redb")).expect("open"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let q = |intent, order: Option<&str>| ChangeQuery {
            stamp: 42,
            intent,
            order: order.map(str::to_string),
            upto: None,
        };
        rt.block_on(async {
            let w = |q| write(idx.clone(), "b".into(), "c".into(), None, q);
            assert_eq!(
                w(q(Some(1), Some("copy"))).await.status(),
                StatusCode::BAD_REQUEST
            );
            assert_eq!(w(q(Some(2), None)).await.status(), StatusCode::BAD_REQUEST);
            assert_eq!(
                w(q(None, Some("sideways"))).await.status(),
                StatusCode::BAD_REQUEST
            );
            assert_eq!(w(q(Some(1), None)).await.status(), StatusCode::NO_CONTENT);
        });
        let held = idx.intents_before(u64::MAX, false).expect("intents");
        assert!(held.contains(&("b".to_string(), "c".to_string(), 42)));
    }
}
