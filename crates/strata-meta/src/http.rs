//! The HTTP API (axum). Off the data path: nodes call it to register, beat
//! and fetch recovery tasks; clients call it once for the map.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
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
        .route("/v1/tier-plan", get(get_tier_plan).put(put_tier_plan))
        .route("/health", get(|| async { "ok" }))
        .with_state(svc)
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

async fn put_tier_plan(
    State(svc): State<Arc<MetaService>>,
    Json(plan): Json<serde_json::Value>,
) -> Response {
    match svc.set_tier_plan(plan).await {
        Ok(version) => Json(serde_json::json!({ "version": version })).into_response(),
        Err(e) => e.into_response(),
    }
}
