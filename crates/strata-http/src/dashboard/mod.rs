//! The live flash dashboard (docs/node.md, "Dashboard"): `GET /dashboard`
//! serves one self-contained page (inline CSS, JS and SVG, nothing from
//! another host) that polls `GET /_admin/dashboard?window=hour|day` every
//! few seconds and draws, per workload, flash bytes against the plan's
//! allocation, reads by tier, the flash hit ratio against the plan's
//! prediction and the flash write rate (Janus §8, Figure 7).
//!
//! - [`history`]: the bounded rings and the JSON (pure);
//! - [`Dashboard::sample`]: reads a [`Source`] into the history; the
//!   server calls it every [`SAMPLE_EVERY`] from its `dashboard` worker;
//! - [`router`]: the two routes, merged into a server's router;
//! - [`NodeSource`]: a storage node's counters. Cluster mode has its own
//!   source (strata-server), over the same history and page.

pub mod history;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use history::{Counts, History, PlanInfo, Reading, Window};
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use strata_node::metrics::Served;
use strata_node::plan::ActivePlan;
use strata_plan::TierPlan;

/// The page, compiled in.
pub const PAGE: &str = include_str!("page.html");
/// The path of the page.
pub const PAGE_PATH: &str = "/dashboard";
/// The path of the page's data.
pub const DATA_PATH: &str = "/_admin/dashboard";
/// How often the sampler reads the counters.
pub const SAMPLE_EVERY: Duration = Duration::from_secs(2);

/// Where the dashboard's readings come from: a server's counters.
pub trait Source: Send + Sync + 'static {
    /// The counters and gauges now.
    fn read(&self) -> Reading;
    /// The server's mode, shown on the page (`node`, `cluster`).
    fn mode(&self) -> &'static str;
}

/// The history of one server and where its readings come from.
pub struct Dashboard {
    source: Box<dyn Source>,
    history: Mutex<History>,
    /// Unix seconds at `start`: readings are timed on the monotonic clock
    /// from there, so a wall-clock step cannot scramble the history.
    unix0: f64,
    start: Instant,
}

impl Dashboard {
    /// A dashboard over `source`, with an empty history starting now.
    pub fn new(source: impl Source) -> Arc<Dashboard> {
        let unix0 = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        Arc::new(Dashboard {
            source: Box::new(source),
            history: Mutex::new(History::new(unix0)),
            unix0,
            start: Instant::now(),
        })
    }

    /// Takes one reading into the history.
    pub fn sample(&self) {
        let r = self.source.read();
        let t = self.unix0 + self.start.elapsed().as_secs_f64();
        self.history.lock().record(t, &r);
    }

    /// The JSON of window `w`.
    pub fn data(&self, w: Window) -> history::Data {
        self.history.lock().data(self.source.mode(), w)
    }
}

/// The routes `GET /dashboard` and `GET /_admin/dashboard`.
pub fn router(dash: Arc<Dashboard>, auth: crate::auth::AdminAuth) -> Router {
    // The page is public (it holds no data); its data needs the admin token.
    let data_route = Router::new()
        .route(DATA_PATH, get(data))
        .route_layer(crate::auth::route_guard(auth));
    Router::new()
        .route(PAGE_PATH, get(page))
        .merge(data_route)
        .with_state(dash)
}

async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
            // The page may talk to this server only: no other host, no
            // external script, style, font or image.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; connect-src 'self'",
            ),
        ],
        PAGE,
    )
        .into_response()
}

async fn data(State(dash): State<Arc<Dashboard>>, req: Request) -> Response {
    let mut window = Window::Hour;
    for kv in req.uri().query().unwrap_or("").split('&') {
        if let Some(v) = kv.strip_prefix("window=") {
            match Window::parse(v) {
                Some(w) => window = w,
                None => {
                    return (
                        StatusCode::BAD_REQUEST,
                        format!("bad window {v:?}: expected hour or day\n"),
                    )
                        .into_response()
                }
            }
        }
    }
    let mut r = axum::Json(dash.data(window)).into_response();
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        header::HeaderValue::from_static("no-store"),
    );
    r
}

/// The plan in force as the dashboard shows it.
pub fn plan_info(plan: Option<&TierPlan>) -> PlanInfo {
    PlanInfo {
        loaded: plan.is_some(),
        predicted_flash_hit_ratio: plan.map(|p| p.predicted_flash_hit_ratio),
        write_bound_bytes_per_s: plan.and_then(|p| p.write_bound_bytes_per_s),
    }
}

/// What `plan` says of workload `id` named `name`: its flash allocation
/// (`None`: the default plan, no allocation of its own) and its predicted
/// flash hit ratio (0 for a workload a loaded plan does not list: it gets
/// no flash; `None` for a plan without the workload's read rate).
pub fn plan_of(plan: &ActivePlan, id: u32, name: &str) -> (Option<u64>, Option<f64>) {
    if plan.plan.is_none() {
        return (None, None);
    }
    match plan.entry(id, name) {
        Some(e) => (Some(e.flash_bytes), e.predicted_flash_hit_ratio()),
        None => (Some(0), Some(0.0)),
    }
}

/// Reads of `c` by tier, in the order of [`history::TIERS`].
pub fn reads_of(c: &strata_node::metrics::WorkloadCounters) -> [u64; 4] {
    [Served::Ram, Served::Flash, Served::FlashCache, Served::Disk].map(|s| c.reads_from(s))
}

/// Adds `c`'s reads into `total`.
pub fn add_reads(total: &mut Counts, c: &Counts) {
    for (a, b) in total.reads.iter_mut().zip(c.reads) {
        *a += b;
    }
}
