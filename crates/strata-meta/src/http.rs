//! The HTTP API (axum). Off the data path: nodes call it to register, beat
//! and fetch recovery tasks; clients call it once for the map.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use strata_placement::NodeId;

use crate::api::{ChangeResponse, ErrorBody, HeartbeatRequest, RegisterRequest};
use crate::service::MetaService;
use crate::MetaError;

impl IntoResponse for MetaError {
    fn into_response(self) -> Response {
        let code = match &self {
            MetaError::UnknownNode(_) => StatusCode::NOT_FOUND,
            MetaError::BadRequest(_) | MetaError::Placement(_) => StatusCode::BAD_REQUEST,
            MetaError::Conflict => StatusCode::CONFLICT,
            MetaError::Forbidden(_) => StatusCode::FORBIDDEN,
            MetaError::File { .. } | MetaError::Etcd { .. } | MetaError::Corrupt { .. } => {
                StatusCode::SERVICE_UNAVAILABLE
            }
        };
        (
            code,
            Json(ErrorBody {
                error: self.to_string(),
            }),
        )
            .into_response()
    }
}

/// The header that carries the admin token of the key routes.
pub const ADMIN_TOKEN_HEADER: &str = "x-strata-admin-token";

/// The service's routes with the control routes guarded by the admin token
/// (`STRATA_ADMIN_TOKEN`): the S3 key routes (`/v1/keys`, they hold the
/// keys' secrets), the tier plan's writes, adding and removing nodes and
/// `/metrics` answer only requests carrying the token as `Authorization:
/// Bearer TOKEN` (or in [`ADMIN_TOKEN_HEADER`]), and none at all without
/// a token (403 saying how to turn them on).
///
/// Every other `/v1/` route is the cluster's own (membership, the map,
/// buckets): it needs a request signed with the cluster secret
/// ([`crate::cluster_auth`]); a service started without one (`secret`
/// None) refuses them all.
pub fn router_with_keys(
    svc: Arc<MetaService>,
    admin_token: Option<String>,
    secret: Option<crate::cluster_auth::ClusterSecret>,
) -> Router {
    let keys = Router::new()
        .route(
            "/v1/buckets/{name}/public",
            put(make_public).delete(make_private),
        )
        .route("/v1/keys", get(list_keys).post(create_key))
        .route("/v1/keys/{access}", axum::routing::delete(delete_key))
        .with_state(svc.clone());
    let members = axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let secret = secret.clone();
            async move {
                let path = req.uri().path();
                if !path.starts_with("/v1/") || is_control(req.method(), path) {
                    return next.run(req).await;
                }
                match check_member(secret.as_ref(), req) {
                    Ok(req) => next.run(req).await,
                    Err(r) => r,
                }
            }
        },
    );
    router(svc)
        .merge(keys)
        .layer(members)
        .layer(axum::middleware::from_fn(
            move |req: axum::extract::Request, next: axum::middleware::Next| {
                let token = admin_token.clone();
                async move {
                    if !is_control(req.method(), req.uri().path()) {
                        return next.run(req).await;
                    }
                    let given = req
                        .headers()
                        .get(axum::http::header::AUTHORIZATION)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.strip_prefix("Bearer "))
                        .map(|v| v.as_bytes().to_vec())
                        .or_else(|| {
                            req.headers()
                                .get(ADMIN_TOKEN_HEADER)
                                .map(|v| v.as_bytes().to_vec())
                        });
                    match (&token, given) {
                        (None, _) => (
                            StatusCode::FORBIDDEN,
                            Json(ErrorBody {
                                error: "the control routes are off: start the metadata \
                                        service with STRATA_ADMIN_TOKEN set"
                                    .into(),
                            }),
                        )
                            .into_response(),
                        (Some(t), Some(g)) if same(t.as_bytes(), &g) => next.run(req).await,
                        (Some(_), None) => (
                            StatusCode::UNAUTHORIZED,
                            Json(ErrorBody {
                                error: "this route needs the admin token: \
                                        Authorization: Bearer TOKEN"
                                    .into(),
                            }),
                        )
                            .into_response(),
                        (Some(_), Some(_)) => (
                            StatusCode::FORBIDDEN,
                            Json(ErrorBody {
                                error: "wrong admin token".into(),
                            }),
                        )
                            .into_response(),
                    }
                }
            },
        ))
}

/// Checks a cluster request's MAC on its head and admits it once (401
/// without one, 403 when wrong or replayed), giving it back with its body
/// checked against the signed digest; the refusal is built once per
/// refused request, never on the success path.
#[allow(clippy::result_large_err)]
fn check_member(
    secret: Option<&crate::cluster_auth::ClusterSecret>,
    req: axum::extract::Request,
) -> Result<axum::extract::Request, Response> {
    use crate::cluster_auth::AuthFault;
    let Some(secret) = secret else {
        return Err((
            StatusCode::FORBIDDEN,
            Json(ErrorBody {
                error: "this metadata service has no cluster secret: start it with \
                        STRATA_CLUSTER_SECRET set"
                    .into(),
            }),
        )
            .into_response());
    };
    secret.admit(req).map_err(|f| {
        let code = if f == AuthFault::Missing {
            StatusCode::UNAUTHORIZED
        } else {
            StatusCode::FORBIDDEN
        };
        (
            code,
            Json(ErrorBody {
                error: f.to_string(),
            }),
        )
            .into_response()
    })
}

/// Whether a request is to a control route (see [`router_with_keys`]).
fn is_control(method: &axum::http::Method, path: &str) -> bool {
    use axum::http::Method;
    path.starts_with("/v1/keys")
        || path == "/metrics"
        || (path.starts_with("/v1/buckets/") && path.ends_with("/public"))
        || (path == "/v1/tier-plan" && method != Method::GET && method != Method::HEAD)
        || (path.starts_with("/v1/nodes/") && (path.ends_with("/add") || path.ends_with("/remove")))
}

/// Compares two secrets in time independent of where they differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The service's routes (listed in docs/placement.md).
pub fn router(svc: Arc<MetaService>) -> Router {
    Router::new()
        .route("/v1/register", post(register))
        .route("/v1/heartbeat", post(heartbeat))
        .route("/v1/map", get(map))
        .route("/v1/table", get(table))
        .route("/v1/status", get(status))
        .route("/v1/history", get(history))
        .route("/v1/recovery/tasks", get(tasks))
        .route("/v1/nodes/{id}/add", post(add_node))
        .route("/v1/nodes/{id}/remove", post(remove_node))
        .route(
            "/v1/tier-plan",
            get(get_tier_plan)
                .put(put_tier_plan)
                .delete(delete_tier_plan),
        )
        .route("/v1/buckets", get(list_buckets))
        .route(
            "/v1/buckets/{name}",
            put(create_bucket).delete(delete_bucket),
        )
        .route("/v1/ec", get(ec_view))
        .route("/v1/ec/allocate", post(ec_allocate))
        .route("/v1/ec/stripes", post(ec_commit))
        .route("/v1/ec/stripes/{id}", axum::routing::delete(ec_drop))
        .route("/v1/ec/stripes/{id}/shard", post(ec_move))
        .route("/health", get(|| async { "ok" }))
        .route("/metrics", get(metrics))
        .with_state(svc)
}

async fn ec_view(State(svc): State<Arc<MetaService>>) -> Response {
    Json(svc.ec_view().await).into_response()
}

async fn ec_allocate(State(svc): State<Arc<MetaService>>) -> Response {
    match svc.allocate_stripe().await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn ec_commit(
    State(svc): State<Arc<MetaService>>,
    Json(rec): Json<crate::api::StripeRecord>,
) -> Response {
    match svc.commit_stripe(rec).await {
        Ok(()) => Json(serde_json::json!({"ok": true})).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn ec_move(
    State(svc): State<Arc<MetaService>>,
    axum::extract::Path(id): axum::extract::Path<u64>,
    Json(mv): Json<crate::api::ShardMove>,
) -> Response {
    match svc.move_shard(id, mv).await {
        Ok(()) => Json(serde_json::json!({"ok": true})).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn ec_drop(
    State(svc): State<Arc<MetaService>>,
    axum::extract::Path(id): axum::extract::Path<u64>,
) -> Response {
    match svc.drop_stripe(id).await {
        Ok(d) => Json(serde_json::json!({"dropped": d})).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn register(
    State(svc): State<Arc<MetaService>>,
    Json(req): Json<RegisterRequest>,
) -> Response {
    match svc.register(req).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn heartbeat(
    State(svc): State<Arc<MetaService>>,
    Json(req): Json<HeartbeatRequest>,
) -> Response {
    match svc.heartbeat(req).await {
        Ok(r) => Json(r).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn map(State(svc): State<Arc<MetaService>>) -> Response {
    Json(svc.state().await.map()).into_response()
}

async fn table(State(svc): State<Arc<MetaService>>) -> Response {
    match svc.state().await.table {
        Some(t) => Json(t).into_response(),
        None => {
            MetaError::BadRequest("no placement table yet: waiting for nodes to register".into())
                .into_response()
        }
    }
}

/// Prometheus text: membership, the table, recovery and the tier plan.
async fn metrics(State(svc): State<Arc<MetaService>>) -> Response {
    let st = svc.state().await;
    (
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        render_metrics(&st),
    )
        .into_response()
}

/// The metadata service's metrics (docs/placement.md lists them).
pub fn render_metrics(st: &crate::state::ClusterState) -> String {
    use crate::api::NodeState;
    use std::fmt::Write;
    let mut out = String::new();
    let mut gauge = |name: &str, help: &str, samples: &[(String, u64)]| {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
        for (labels, v) in samples {
            let _ = writeln!(out, "{name}{labels} {v}");
        }
    };
    let states = [
        (NodeState::Pending, "pending"),
        (NodeState::Up, "up"),
        (NodeState::Dead, "dead"),
        (NodeState::Removed, "removed"),
    ];
    let nodes: Vec<(String, u64)> = states
        .iter()
        .map(|(s, name)| {
            let n = st.nodes.values().filter(|r| r.state == *s).count() as u64;
            (format!("{{state=\"{name}\"}}"), n)
        })
        .collect();
    gauge("strata_meta_nodes", "Nodes by lifecycle state.", &nodes);
    let disks = st.nodes.values().map(|n| n.disks.len() as u64).sum();
    gauge(
        "strata_meta_disks",
        "Disks registered.",
        &[(String::new(), disks)],
    );
    let (version, rows, under) = st.table.as_ref().map_or((0, 0, 0), |t| {
        (
            t.version(),
            t.row_count() as u64,
            t.rows_under_replicated() as u64,
        )
    });
    gauge(
        "strata_meta_table_version",
        "Version of the current placement table (0: none yet).",
        &[(String::new(), version)],
    );
    gauge(
        "strata_meta_table_rows",
        "Rows of the current table.",
        &[(String::new(), rows)],
    );
    gauge(
        "strata_meta_rows_under_replicated",
        "Rows with fewer live replicas than the replication factor.",
        &[(String::new(), under)],
    );
    let r = &st.recovery;
    let pending = r.done.iter().filter(|d| !**d).count() as u64;
    gauge(
        "strata_meta_recovery_transfers",
        "Row copies of the current or last recovery, by state.",
        &[
            ("{state=\"pending\"}".to_string(), pending),
            (
                "{state=\"done\"}".to_string(),
                r.done.len() as u64 - pending,
            ),
        ],
    );
    gauge(
        "strata_meta_recovery_bytes_copied",
        "Bytes the nodes report copied by the current or last recovery.",
        &[(String::new(), r.bytes_copied)],
    );
    gauge(
        "strata_meta_tier_plan_version",
        "Version of the cluster's tier plan (0: the default plan).",
        &[(String::new(), st.tier_plan_version)],
    );
    out
}

async fn status(State(svc): State<Arc<MetaService>>) -> Response {
    Json(svc.status().await).into_response()
}

async fn history(State(svc): State<Arc<MetaService>>) -> Response {
    Json(svc.state().await.history).into_response()
}

#[derive(Deserialize)]
struct TaskQuery {
    node: u32,
}

async fn tasks(State(svc): State<Arc<MetaService>>, Query(q): Query<TaskQuery>) -> Response {
    Json(svc.state().await.tasks_for(NodeId(q.node))).into_response()
}

async fn add_node(State(svc): State<Arc<MetaService>>, Path(id): Path<u32>) -> Response {
    match svc.add_node(NodeId(id)).await {
        Ok((table_version, transfers)) => Json(ChangeResponse {
            table_version,
            transfers,
        })
        .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn remove_node(State(svc): State<Arc<MetaService>>, Path(id): Path<u32>) -> Response {
    match svc.remove_node(NodeId(id)).await {
        Ok((table_version, transfers)) => Json(ChangeResponse {
            table_version,
            transfers,
        })
        .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn get_tier_plan(State(svc): State<Arc<MetaService>>) -> Response {
    let st = svc.state().await;
    match st.tier_plan {
        Some(p) => {
            let mut r = Json(p).into_response();
            if let Ok(v) = st.tier_plan_version.to_string().parse() {
                r.headers_mut().insert("x-strata-plan-version", v);
            }
            r
        }
        None => (
            StatusCode::NOT_FOUND,
            Json(ErrorBody {
                error: "no tier plan loaded (strata provision writes one; PUT it here)".into(),
            }),
        )
            .into_response(),
    }
}

async fn put_tier_plan(State(svc): State<Arc<MetaService>>, body: axum::body::Bytes) -> Response {
    // JSON whatever the Content-Type says (curl -d sends form encoding).
    let plan: serde_json::Value = match serde_json::from_slice(&body) {
        Ok(p) => p,
        Err(e) => {
            return MetaError::BadRequest(format!("the tier plan is not JSON: {e}")).into_response()
        }
    };
    match svc.set_tier_plan(plan).await {
        Ok(version) => Json(serde_json::json!({ "version": version })).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn delete_tier_plan(State(svc): State<Arc<MetaService>>) -> Response {
    match svc.clear_tier_plan().await {
        Ok(version) => Json(serde_json::json!({ "version": version })).into_response(),
        Err(e) => e.into_response(),
    }
}

async fn list_buckets(State(svc): State<Arc<MetaService>>) -> Response {
    Json(svc.state().await.buckets).into_response()
}

async fn create_bucket(State(svc): State<Arc<MetaService>>, Path(name): Path<String>) -> Response {
    match svc.create_bucket(&name).await {
        Ok(true) => StatusCode::CREATED.into_response(),
        Ok(false) => StatusCode::OK.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn make_public(State(svc): State<Arc<MetaService>>, Path(name): Path<String>) -> Response {
    set_public(&svc, &name, true).await
}

async fn make_private(State(svc): State<Arc<MetaService>>, Path(name): Path<String>) -> Response {
    set_public(&svc, &name, false).await
}

/// `PUT|DELETE /v1/buckets/{name}/public` (admin token): 204, or 404 for
/// an unknown bucket.
async fn set_public(svc: &MetaService, name: &str, public: bool) -> Response {
    match svc.set_bucket_public(name, public).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => e.into_response(),
    }
}

async fn delete_bucket(State(svc): State<Arc<MetaService>>, Path(name): Path<String>) -> Response {
    match svc.delete_bucket(&name).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => e.into_response(),
    }
}

/// Body of `POST /v1/keys`.
#[derive(Deserialize)]
struct CreateKey {
    #[serde(default)]
    buckets: std::collections::BTreeMap<String, crate::state::Permission>,
}

async fn list_keys(State(svc): State<Arc<MetaService>>) -> Response {
    Json(
        svc.state()
            .await
            .keys
            .into_iter()
            .collect::<std::collections::BTreeMap<_, _>>(),
    )
    .into_response()
}

async fn create_key(State(svc): State<Arc<MetaService>>, Json(body): Json<CreateKey>) -> Response {
    match svc.create_key(body.buckets).await {
        Ok((access_key, secret_key)) => (
            StatusCode::CREATED,
            Json(serde_json::json!({ "access_key": access_key, "secret_key": secret_key })),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

async fn delete_key(State(svc): State<Arc<MetaService>>, Path(access): Path<String>) -> Response {
    match svc.delete_key(&access).await {
        Ok(true) => StatusCode::NO_CONTENT.into_response(),
        Ok(false) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => e.into_response(),
    }
}
