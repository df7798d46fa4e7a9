//! A cluster node's `/_admin` routes, the single-node server's: the tier
//! plan (`GET`, `POST`/`PUT` a plan or an empty body to reload `--plan`,
//! `DELETE` for the default plan), the status summary and a trace flush.
//!
//! One plan path: a plan given here, in `--plan` (at start and on SIGHUP)
//! or with `strata cluster plan set` is checked by
//! [`strata_node::plan::check`] and stored by the metadata service, which
//! hands every node the new version with its next heartbeat answer; the
//! node that took it applies it at once.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::{Json, Router};
use bytes::Bytes;
use strata_http::http::{method_not_allowed, read_body, reason};
use strata_plan::TierPlan;

use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// The control routes (`/_admin/*`, `/metrics`), behind the admin token
/// (a route layer: the object routes pay nothing for it).
pub(crate) fn routes(node: Node) -> Router {
    let auth = strata_http::auth::AdminAuth::new(node.opts.admin_token.clone());
    Router::new()
        .route("/_admin/plan", any(plan))
        .route("/_admin/status", get(status))
        .route("/_admin/traces/flush", post(flush))
        .route("/metrics", get(crate::server::metrics))
        .route_layer(strata_http::auth::route_guard(auth))
        .with_state(node)
}

/// Why a plan was not put in force.
pub(crate) enum PlanError {
    /// The plan itself (400).
    Bad(String),
    /// The metadata service (502).
    Meta(String),
}

impl IntoResponse for PlanError {
    fn into_response(self) -> Response {
        match self {
            PlanError::Bad(m) => reason(StatusCode::BAD_REQUEST, format!("bad tier plan: {m}")),
            PlanError::Meta(m) => reason(
                StatusCode::BAD_GATEWAY,
                format!("the metadata service did not take the plan: {m}"),
            ),
        }
    }
}

impl ClusterNode {
    /// Checks `plan`, stores it at the metadata service (`None`: back to
    /// the default plan) and applies the new version here.
    pub(crate) async fn publish_plan(&self, plan: Option<TierPlan>) -> Result<u64, PlanError> {
        let url = format!("http://{}/v1/tier-plan", self.opts.meta);
        let (method, body) = match &plan {
            Some(p) => {
                strata_node::plan::check(p, self.opts.max_workloads).map_err(PlanError::Bad)?;
                let json = serde_json::to_vec(p).map_err(|e| PlanError::Bad(e.to_string()))?;
                (hyper::Method::PUT, Bytes::from(json))
            }
            None => (hyper::Method::DELETE, Bytes::new()),
        };
        let bearer = format!(
            "Bearer {}",
            self.opts.admin_token.clone().unwrap_or_default()
        );
        let r = self
            .http
            .send_with_headers(
                method,
                &url,
                &[("authorization", bearer.as_str())],
                body,
                Duration::from_secs(10),
            )
            .await
            .map_err(PlanError::Meta)?;
        if !r.status.is_success() {
            let text = String::from_utf8_lossy(&r.body).into_owned();
            return Err(if r.status == hyper::StatusCode::BAD_REQUEST {
                PlanError::Bad(text)
            } else {
                PlanError::Meta(format!("{}: {text}", r.status))
            });
        }
        let version = serde_json::from_slice::<serde_json::Value>(&r.body)
            .ok()
            .and_then(|v| v["version"].as_u64())
            .ok_or_else(|| PlanError::Meta("no version in its answer".into()))?;
        self.reload_plan(version)
            .await
            .map_err(|e| PlanError::Meta(e.to_string()))?;
        Ok(version)
    }

    /// Publishes the `--plan` file (at start, on SIGHUP, on an empty POST).
    pub(crate) async fn publish_plan_file(&self) -> Result<u64, PlanError> {
        let Some(path) = self.opts.plan_path.clone() else {
            return Err(PlanError::Bad(
                "the node was started without --plan; POST a plan to /_admin/plan instead".into(),
            ));
        };
        let plan = strata_node::plan::read_file(&path).map_err(PlanError::Bad)?;
        self.publish_plan(Some(plan)).await
    }
}

async fn plan(State(node): State<Node>, req: Request) -> Response {
    match *req.method() {
        Method::GET => match node.plan_in_force() {
            Some(p) => Json(p).into_response(),
            None => reason(
                StatusCode::NOT_FOUND,
                "no tier plan loaded: the default plan is in force (every object to flash, one FIFO)",
            ),
        },
        Method::POST | Method::PUT => {
            let body = match read_body(req, 16 << 20, node.opts.http.body_timeout).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            let res = if body.iter().all(|b| b.is_ascii_whitespace()) {
                node.publish_plan_file().await
            } else {
                match std::str::from_utf8(&body) {
                    Ok(t) => match TierPlan::from_json(t) {
                        Ok(p) => node.publish_plan(Some(p)).await,
                        Err(e) => Err(PlanError::Bad(e.to_string())),
                    },
                    Err(_) => Err(PlanError::Bad("the plan is not UTF-8 text".into())),
                }
            };
            match res {
                Ok(v) => reason(StatusCode::OK, format!("tier plan version {v} loaded")),
                Err(e) => e.into_response(),
            }
        }
        Method::DELETE => match node.publish_plan(None).await {
            Ok(_) => reason(StatusCode::OK, "default tier plan in force"),
            Err(e) => e.into_response(),
        },
        _ => method_not_allowed("GET, POST, PUT, DELETE"),
    }
}

async fn status(State(node): State<Node>) -> Response {
    let plan = node.plan_in_force();
    let active = strata_node::plan::ActivePlan { plan: plan.clone() };
    let mut workloads: Vec<serde_json::Value> = Vec::new();
    let mut all = node.metrics.workloads();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    for (name, c) in all {
        let rule = if name == strata_node::tiers::SHARED {
            active.rule(strata_node::tiers::SHARED_ID, &name)
        } else {
            active.rule(node.workload_id(&name), &name)
        };
        workloads.push(strata_node::metrics::workload_status(&name, &c, &rule));
    }
    // The segment stores: the shared part and one part per listed
    // workload, each in every row of this node.
    let mut stores: std::collections::BTreeMap<String, usize> = Default::default();
    for rows in node.stores.iter().flatten() {
        for r in rows.opened() {
            for (name, _) in r.parts() {
                *stores.entry(name).or_default() += 1;
            }
        }
    }
    let stores: Vec<serde_json::Value> = stores
        .into_iter()
        .map(|(name, rows)| serde_json::json!({ "name": name, "rows": rows }))
        .collect();
    let mut st = serde_json::json!({
        "node": node.disk_ids().map(|(n, _)| n.0),
        "stores": stores,
        "table_version": node.table_version(),
        "flash_capacity": node.flash_capacity,
        "flash_used_bytes": node.flash_used(),
        "plan": if plan.is_some() { "loaded" } else { "default" },
        "predicted_flash_hit_ratio": plan.as_ref().map(|p| p.predicted_flash_hit_ratio),
        "workloads": workloads,
    });
    node.metrics.add_status(&mut st);
    Json(st).into_response()
}

async fn flush(State(node): State<Node>) -> Response {
    match &node.tracer {
        Some(_) => {
            let n = node.clone();
            let flushed = tokio::task::spawn_blocking(move || match &n.tracer {
                Some(t) => t.flush(),
                None => Ok(()),
            });
            match flushed.await {
                Ok(Ok(())) => reason(StatusCode::OK, "traces flushed"),
                Ok(Err(e)) => reason(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    format!("the trace file could not be finished: {e}"),
                ),
                Err(e) => reason(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
            }
        }
        None => reason(
            StatusCode::BAD_REQUEST,
            "the node was started without --trace-dir",
        ),
    }
}
