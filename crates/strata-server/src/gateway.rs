//! The public object API (docs/node.md: `PUT`, `GET` with `Range`, `HEAD`,
//! `DELETE` of `/{bucket}/{name}`, batch `POST /{bucket}`, cookies) on every
//! node, for every object of the cluster.
//!
//! The node that receives a request is its coordinator, as the Rust client
//! is on the direct path (FDS: a client that computes placement itself
//! skips this hop; both see the same objects): it computes the object's
//! row from the placement table, writes to every replica and answers only
//! when all of them hold the object durably, and reads one replica with
//! failover. Bodies stream: an object larger than the table's tract size
//! is cut into tracts as its body arrives, each stored on its own row, and
//! read back tract by tract, so a node holds at most a few tracts of any
//! object in memory whatever its size.
//!
//! Who may do what is S3's rule (docs/security.md, "One identity model"):
//! a request proves an access key with `Authorization: Bearer TOKEN`
//! (`strata key token`) and is held to that key's permissions on the
//! bucket; without one it may only read a public-read bucket. A cookie
//! is an extra check on reads (and, with `--require-cookies`, on
//! overwrites and deletes), never a permission. Objects of S3 buckets are
//! written through S3's own write path, so they are listed.

// Handlers answer errors as ready responses, as strata-node's do.
#![allow(clippy::result_large_err)]

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use futures_util::stream::{self, StreamExt};
use strata_client::Permission;
use strata_client::{Client, ClientError};
use strata_http::http::{
    check_escapes, check_names, content_length, cookie_of, method_not_allowed, read_batch, reason,
    requested_range, unsatisfiable, COOKIE_HEADER,
};
use strata_http::range::parse_range;
use strata_node::tiers::valid_bucket;
use strata_proto::{Head, HeadInfo};
use strata_s3::auth::{Refused, RESERVED_PREFIX};
use strata_s3::native::Native;

pub use crate::options::GatewayLimits;
use strata_proto::TIER_HEADER;

/// How long a request waits for room under the buffered-bytes cap.
const BUDGET_WAIT: Duration = Duration::from_secs(1);

/// The public API of one node, over the process's one coordinator.
pub struct Gateway {
    limits: GatewayLimits,
    /// The coordinator: placement, every replica's call (this node's own
    /// directly, the others over the node protocol), failover.
    client: Arc<Client>,
    /// Wrong cookies per client address.
    cookies: strata_http::guard::CookieLimiter,
    /// The cap on request bytes held at once.
    budget: strata_http::guard::BodyBudget,
    /// The keys and S3's write path for listed buckets.
    native: Arc<Native>,
}

impl Gateway {
    /// The public API over `client`, with the keys and listed writes of
    /// `native`.
    pub(crate) fn new(limits: GatewayLimits, client: Arc<Client>, native: Arc<Native>) -> Gateway {
        Gateway {
            budget: strata_http::guard::BodyBudget::new(
                limits.max_buffered_bytes,
                limits.max_buffered_bytes_per_key,
            ),
            cookies: strata_http::guard::CookieLimiter::default(),
            limits,
            client,
            native,
        }
    }

    /// Ok if the request with `headers` may do what `need` says in
    /// `bucket`: 401 without a valid token (unless the bucket is
    /// public-read and `need` is a read), 403 for a key without the
    /// permission, 503 when the keys cannot be fetched. Ok is the key's id
    /// (empty for an anonymous read).
    async fn authorize(
        &self,
        headers: &axum::http::HeaderMap,
        bucket: &str,
        need: Permission,
    ) -> Result<Arc<str>, Response> {
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.as_bytes());
        match self
            .native
            .keys()
            .authorize_native(authorization, bucket, need)
            .await
        {
            Ok(key) => Ok(key),
            Err(Refused::Unauthenticated(why)) => {
                let mut r = reason(StatusCode::UNAUTHORIZED, why);
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"strata\""),
                );
                Err(r)
            }
            Err(Refused::Forbidden(why)) => Err(reason(StatusCode::FORBIDDEN, why)),
            Err(Refused::Unavailable) => Err(unavailable(
                "the cluster's metadata service did not answer (the keys); retry".into(),
            )),
        }
    }

    /// Whether writes to `bucket` go through S3's listed path.
    async fn listed(&self, bucket: &str) -> Result<bool, Response> {
        self.native.listed(bucket).await.map_err(s3_error)
    }

    /// The coordinator.
    async fn client(&self) -> Result<Arc<Client>, Response> {
        Ok(self.client.clone())
    }
}

type Gw = Arc<Gateway>;

/// The public routes, to be merged with the node's cluster routes.
pub fn routes(gw: Gw) -> Router {
    Router::new()
        .route("/healthz", axum::routing::get(|| async { "ok\n" }))
        .route("/{bucket}/{*name}", any(object))
        .route("/{bucket}", any(batch))
        // GET /dashboard is the dashboard's page (merged in beside these);
        // a batch into a bucket named "dashboard" still reaches the bucket.
        .route(
            strata_http::dashboard::PAGE_PATH,
            axum::routing::post(|s: State<Gw>, r: Request| {
                batch(s, Path(strata_http::dashboard::PAGE_PATH[1..].into()), r)
            }),
        )
        .with_state(gw)
}

fn client_error(e: ClientError) -> Response {
    match e {
        ClientError::BadName(_) => reason(StatusCode::BAD_REQUEST, e.to_string()),
        // The replica's or the metadata service's words name internal
        // addresses: for the operator's log, not for the client (issue 34).
        ClientError::Write { ref name, .. } => {
            eprintln!("strata server: {e}");
            unavailable(format!("write of {name} failed: a replica did not answer in time; retry (the server's log says which)"))
        }
        ClientError::Read { ref name, .. } => {
            eprintln!("strata server: {e}");
            unavailable(format!("read of {name} failed: no replica answered in time; retry (the server's log says which)"))
        }
        ClientError::Meta { .. } => {
            eprintln!("strata server: {e}");
            unavailable(
                "the cluster's metadata service did not answer; retry (the server's log says why)"
                    .into(),
            )
        }
        ClientError::NoTable => reason(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        // The replica's own words name its files: for the log only.
        ClientError::Full { name, reason: why } => {
            eprintln!("strata server: {name}: {why}");
            reason(
                StatusCode::INSUFFICIENT_STORAGE,
                format!("{name}: a replica's volume is full (deleting objects frees space)"),
            )
        }
        ClientError::Manifest { .. } => reason(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
        // The detail (file paths, offsets, checksums) is for the
        // operator's log, not for the client.
        ClientError::Unreadable { name, reason: why } => {
            eprintln!("strata server: reading {name}: {why}");
            reason(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the node could not read the object (the server's log says why)",
            )
        }
    }
}

/// The answer to a listed write S3's path refused.
fn s3_error(f: strata_s3::native::Failed) -> Response {
    if f.status == StatusCode::SERVICE_UNAVAILABLE {
        unavailable(f.message)
    } else {
        reason(f.status, f.message)
    }
}

/// 503 with `Retry-After: 1`.
fn unavailable(text: String) -> Response {
    let mut r = reason(StatusCode::SERVICE_UNAVAILABLE, text);
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

fn check_public(bucket: &str, name: &str) -> Result<(), Response> {
    if bucket == "cluster" {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            "bucket name \"cluster\" is reserved for the nodes' protocol (/cluster/v1)",
        ));
    }
    if name.starts_with(RESERVED_PREFIX) {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            "names beginning with U+0001 are reserved for S3's multipart parts",
        ));
    }
    check_names(bucket, name)
}

/// A request's workload is its bucket (docs/node.md, "Buckets and
/// workloads"): an `X-Strata-Workload` header naming another is refused
/// rather than ignored.
fn check_workload(headers: &axum::http::HeaderMap, bucket: &str) -> Result<(), Response> {
    match headers.get(strata_http::http::WORKLOAD_HEADER) {
        None => Ok(()),
        Some(v) if v.as_bytes() == bucket.as_bytes() => Ok(()),
        Some(_) => Err(reason(
            StatusCode::BAD_REQUEST,
            "X-Strata-Workload: a request's workload is its bucket; a tier plan names buckets",
        )),
    }
}

/// Counts every request the node answers on its HTTP port by method and
/// status (`strata_http_requests_total`), public API and node protocol
/// alike; the node's own in-process replica calls are not HTTP requests.
pub(crate) async fn count(
    State(metrics): State<Arc<strata_node::metrics::Metrics>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    let m = req.method().clone();
    let resp = next.run(req).await;
    metrics.request(m.as_str(), resp.status().as_u16());
    resp
}

/// 429 for an address out of wrong-cookie allowance.
fn too_many_failures(wait: Duration) -> Response {
    let secs = wait.as_secs().max(1);
    let mut r = reason(
        StatusCode::TOO_MANY_REQUESTS,
        format!("too many wrong cookies from this address; retry in {secs} s"),
    );
    if let Ok(v) = axum::http::HeaderValue::from_str(&secs.to_string()) {
        r.headers_mut().insert(axum::http::header::RETRY_AFTER, v);
    }
    r
}

/// 503 (or 413) when the buffered-bytes cap, or key `key`'s share of it,
/// has no room for `bytes`.
async fn reserve(
    gw: &Gateway,
    bytes: u64,
    key: &str,
) -> Result<strata_http::guard::Room, Response> {
    use strata_http::guard::BudgetError;
    gw.budget.reserve(bytes, BUDGET_WAIT, key).await.map_err(|e| match e {
        BudgetError::TooLarge { cap } => reason(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a body of {bytes} bytes is over this server's buffered-bytes cap of {cap} (--max-buffered-bytes)"),
        ),
        BudgetError::Busy { cap } => unavailable(format!(
            "the server holds its cap of {cap} request bytes (--max-buffered-bytes); retry"
        )),
        BudgetError::OverShareSize { share } => reason(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a body holding {bytes} bytes at once is over a key's share of {share} (--max-buffered-bytes-per-key; a PUT larger than a tract holds a few tracts)"),
        ),
        BudgetError::OverShare { share } => unavailable(format!(
            "this key's requests in flight hold its share of {share} request bytes \
             (--max-buffered-bytes-per-key); retry when they are done"
        )),
    })
}

/// What a PUT answers: the object's name, cookie, URL and the tier its
/// replica here (else its first replica) put it on.
fn created(bucket: &str, name: &str, cookie: u32, tier: Option<String>) -> serde_json::Value {
    let cookie = format!("{cookie:08x}");
    serde_json::json!({
        "name": name,
        "cookie": cookie,
        "url": format!("/{bucket}/{name}?cookie={cookie}"),
        "tier": tier,
    })
}

async fn object(
    State(gw): State<Gw>,
    Path((bucket, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    if let Err(r) = check_escapes(req.uri().path())
        .and_then(|()| check_public(&bucket, &name))
        .and_then(|()| check_workload(req.headers(), &bucket))
    {
        return r;
    }
    // An address that sent too many wrong cookies waits, whatever it asks.
    let ip = req
        .extensions()
        .get::<strata_http::conns::ClientAddr>()
        .map(|a| a.0.ip());
    if let Some(ip) = ip {
        if let Err(wait) = gw.cookies.check(ip) {
            return too_many_failures(wait);
        }
    }
    let need = match *req.method() {
        Method::GET | Method::HEAD => Permission::Read,
        Method::PUT | Method::DELETE => Permission::Write,
        _ => return method_not_allowed("GET, HEAD, PUT, DELETE"),
    };
    let key = match gw.authorize(req.headers(), &bucket, need).await {
        Ok(k) => k,
        Err(r) => return r,
    };
    match *req.method() {
        Method::GET | Method::HEAD => get(gw, &bucket, &name, req, ip).await,
        Method::PUT => {
            if let Err(r) = owner_check(&gw, &bucket, &name, req.uri().query(), true, ip).await {
                return r;
            }
            put(gw, &bucket, &name, &key, req).await
        }
        _ => {
            if let Err(r) = owner_check(&gw, &bucket, &name, req.uri().query(), false, ip).await {
                return r;
            }
            let deleted = match gw.listed(&bucket).await {
                Err(r) => return r,
                Ok(true) => gw.native.delete(&bucket, &name).await.map_err(s3_error),
                Ok(false) => gw.client.delete(&bucket, &name).await.map_err(client_error),
            };
            match deleted {
                Ok(true) => StatusCode::NO_CONTENT.into_response(),
                Ok(false) => reason(StatusCode::NOT_FOUND, "no such object"),
                Err(r) => r,
            }
        }
    }
}

/// With `--require-cookies`, a DELETE or an overwriting PUT must carry the
/// object's cookie: a DELETE without the right one is a 404 like an absent
/// object; a PUT over an existing object without it is a 409 (Haystack
/// §3.4.1's defence extended to writes). The check reads the object's head
/// first; a concurrent writer can still race it (docs/security.md).
async fn owner_check(
    gw: &Gw,
    bucket: &str,
    name: &str,
    query: Option<&str>,
    overwrite: bool,
    ip: Option<std::net::IpAddr>,
) -> Result<(), Response> {
    if !gw.limits.require_cookies {
        return Ok(());
    }
    let cookie = cookie_of(query)?;
    let client = gw.client().await?;
    let stored = match client.read_head_info(bucket, name).await {
        Ok(Some(r)) => r.head.cookie,
        Ok(None) if overwrite => return Ok(()),
        Ok(None) => return Err(reason(StatusCode::NOT_FOUND, "no such object")),
        Err(e) => return Err(client_error(e)),
    };
    if stored == 0 || cookie == Some(stored) {
        return Ok(());
    }
    if let Some(ip) = ip {
        gw.cookies.failed(ip);
    }
    Err(if overwrite {
        reason(
            StatusCode::CONFLICT,
            "the name exists: overwriting it needs its cookie (?cookie=HEX)",
        )
    } else {
        reason(StatusCode::NOT_FOUND, "no such object")
    })
}

async fn put(gw: Gw, bucket: &str, name: &str, key: &str, req: Request) -> Response {
    let max = gw.limits.max_object_size;
    let len = match content_length(req.headers(), max) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let client = match gw.client().await {
        Ok(c) => c,
        Err(r) => return r,
    };
    // Room for what the PUT holds at once (the whole body when small).
    let _room = match reserve(&gw, len.min(client.put_buffer_bytes()), key).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    // The body as it arrives, cut short by the declared length, the idle
    // timeout and the size limit (each a 4xx, never a partial object: the
    // manifest that makes an object visible is written last).
    let idle = gw.limits.body_idle_timeout;
    let started = tokio::time::Instant::now();
    // Past the body timeout, what has arrived must keep up with
    // MIN_BODY_RATE (strata_http::deadline): a client trickling bytes holds
    // its connection and its share of the budget no longer than the body
    // timeout, whatever length it declared (issue 34, finding 5); an
    // upload at the rate or faster gets the time it needs.
    let due = move |seen: u64| started + idle + strata_http::deadline::rate_time(seen);
    let body = req.into_body().into_data_stream();
    let checked = stream::unfold(
        (body, 0u64, false),
        move |(mut body, seen, done): (axum::body::BodyDataStream, u64, bool)| async move {
            if done {
                return None;
            }
            let wait = idle.min(due(seen).saturating_duration_since(tokio::time::Instant::now()));
            match tokio::time::timeout(wait, body.next()).await {
                Err(_) if wait < idle => Some((Err(BodyFault::Slow(idle)), (body, seen, true))),
                Err(_) => Some((Err(BodyFault::Idle(idle)), (body, seen, true))),
                Ok(None) if seen < len => Some((Err(BodyFault::Shorter(len)), (body, seen, true))),
                Ok(None) => None,
                Ok(Some(Err(e))) => {
                    Some((Err(BodyFault::Broken(e.to_string())), (body, seen, true)))
                }
                Ok(Some(Ok(chunk))) => {
                    let seen = seen + chunk.len() as u64;
                    if seen > len {
                        Some((Err(BodyFault::Longer(len)), (body, seen, true)))
                    } else {
                        Some((Ok(chunk), (body, seen, false)))
                    }
                }
            }
        },
    );
    let result = match gw.listed(bucket).await {
        Err(r) => return r,
        Ok(true) => match gw.native.put(bucket, name, checked).await {
            Ok(w) => Ok((w.cookie, w.tier)),
            Err(e) => return s3_error(e),
        },
        Ok(false) => client.put_stream_tier(bucket, name, checked).await,
    };
    match result {
        Ok((cookie, tier)) => {
            let mut r = (
                StatusCode::CREATED,
                axum::Json(created(bucket, name, cookie, tier)),
            )
                .into_response();
            let h = r.headers_mut();
            if let Ok(v) = HeaderValue::from_str(&format!("{cookie:08x}")) {
                h.insert(COOKIE_HEADER, v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("/{bucket}/{name}?cookie={cookie:08x}")) {
                h.insert(header::LOCATION, v);
            }
            r
        }
        Err(ClientError::Write { reason: why, .. }) if why.starts_with("reading the body: ") => {
            let why = why.trim_start_matches("reading the body: ");
            if why.starts_with("no data") {
                reason(StatusCode::REQUEST_TIMEOUT, why)
            } else {
                reason(StatusCode::BAD_REQUEST, why)
            }
        }
        Err(e) => client_error(e),
    }
}

/// Why a streamed body was abandoned.
#[derive(Debug)]
enum BodyFault {
    Idle(Duration),
    Slow(Duration),
    Broken(String),
    Longer(u64),
    Shorter(u64),
}

impl std::error::Error for BodyFault {}

impl std::fmt::Display for BodyFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BodyFault::Idle(d) => write!(f, "no data for {} s", d.as_secs()),
            BodyFault::Slow(d) => write!(
                f,
                "no data for too long: the body fell behind {} KiB/s after its first {} s",
                strata_http::deadline::MIN_BODY_RATE >> 10,
                d.as_secs()
            ),
            BodyFault::Broken(e) => write!(f, "could not read the body: {e}"),
            BodyFault::Longer(n) => write!(f, "body longer than its Content-Length of {n}"),
            BodyFault::Shorter(n) => write!(f, "body shorter than its Content-Length of {n}"),
        }
    }
}

/// What a GET or a HEAD read of an object's head record.
enum Found {
    /// The record whole (a GET): with an inline object's bytes.
    Whole(Head),
    /// What a HEAD answers, from the record's start.
    Start(HeadInfo),
}

impl Found {
    fn cookie(&self) -> u32 {
        match self {
            Found::Whole(h) => h.cookie(),
            Found::Start(i) => i.cookie,
        }
    }

    fn len(&self) -> u64 {
        match self {
            Found::Whole(h) => h.len(),
            Found::Start(i) => i.len,
        }
    }
}

/// The head of `bucket/name` for a GET (`whole`: the record whole, with
/// an inline object's bytes) or a HEAD (the record's start only: its data
/// is neither read nor checked), and where its replica read it (this
/// node's own first, when it holds one).
async fn head_of(
    gw: &Gw,
    bucket: &str,
    name: &str,
    whole: bool,
) -> Result<(Found, Option<String>), Response> {
    let client = gw.client().await?;
    let got = if whole {
        let got = client.read_head(bucket, name).await;
        got.map(|h| h.map(|r| (Found::Whole(r.head), r.tier)))
    } else {
        let got = client.read_head_info(bucket, name).await;
        got.map(|h| h.map(|r| (Found::Start(r.head), r.tier)))
    };
    match got {
        Ok(Some(h)) => Ok(h),
        Ok(None) => Err(reason(StatusCode::NOT_FOUND, "no such object")),
        Err(e) => Err(client_error(e)),
    }
}

async fn get(
    gw: Gw,
    bucket: &str,
    name: &str,
    req: Request,
    ip: Option<std::net::IpAddr>,
) -> Response {
    let cookie = match cookie_of(req.uri().query()) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let range_h = match requested_range(req.headers()) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let (found, served) = match head_of(&gw, bucket, name, req.method() != Method::HEAD).await {
        Ok(h) => h,
        Err(answer) => return answer,
    };
    // Haystack §3.4.1: a wrong cookie reads exactly as an absent object.
    let stored = found.cookie();
    let denied = match cookie {
        Some(c) => stored != 0 && c != stored,
        None => gw.limits.require_cookies && stored != 0,
    };
    if denied {
        if let Some(ip) = ip {
            gw.cookies.failed(ip);
        }
        return reason(StatusCode::NOT_FOUND, "no such object");
    }
    let size = found.len();
    let (status, start, end) = match &range_h {
        None => (StatusCode::OK, 0, size),
        Some(r) => match parse_range(r, size) {
            Ok((a, b)) => (StatusCode::PARTIAL_CONTENT, a, b),
            Err(e) => return unsatisfiable(e, size),
        },
    };
    let body = match found {
        Found::Start(_) => Body::empty(),
        Found::Whole(Head::Inline { data, .. }) => {
            Body::from(data.slice(start as usize..end as usize))
        }
        Found::Whole(head) => {
            let client = match gw.client().await {
                Ok(c) => c,
                Err(r) => return r,
            };
            let tracts = client
                .read_range(bucket, name, head, start, end)
                .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
            Body::from_stream(tracts)
        }
    };
    let mut resp = Response::new(body);
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(end - start));
    if let Ok(v) = HeaderValue::from_str(&format!("{stored:08x}")) {
        h.insert(COOKIE_HEADER, v);
    }
    if let Some(Ok(v)) = served.map(|s| HeaderValue::from_str(&tier_name(&s))) {
        h.insert(TIER_HEADER, v);
    }
    if status == StatusCode::PARTIAL_CONTENT {
        if let Ok(v) = HeaderValue::from_str(&format!("bytes {start}-{}/{size}", end - 1)) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    resp
}

/// The `X-Strata-Tier` value of a read its replica served from `s`
/// (docs/node.md: `flash-cache` for the flash read cache).
fn tier_name(s: &str) -> String {
    s.replace('_', "-")
}

async fn batch(State(gw): State<Gw>, Path(bucket): Path<String>, req: Request) -> Response {
    if req.method() != Method::POST {
        return method_not_allowed("POST");
    }
    if !valid_bucket(&bucket) || bucket == "cluster" {
        return reason(
            StatusCode::BAD_REQUEST,
            format!("bad bucket name {bucket:?}"),
        );
    }
    let key = match gw
        .authorize(req.headers(), &bucket, Permission::Write)
        .await
    {
        Ok(k) => k,
        Err(r) => return r,
    };
    // Room for the whole body before reading it.
    let len = match content_length(req.headers(), gw.limits.max_batch_bytes) {
        Ok(n) => n,
        Err(r) => return r,
    };
    let _room = match reserve(&gw, len, &key).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let items = match read_batch(
        req,
        &bucket,
        gw.limits.max_batch_bytes,
        gw.limits.body_idle_timeout,
    )
    .await
    {
        Ok(v) => v,
        Err(r) => return r,
    };
    let client = match gw.client().await {
        Ok(c) => c,
        Err(r) => return r,
    };
    // A batch carries no cookies: under --require-cookies it may create
    // names, not overwrite them.
    if gw.limits.require_cookies {
        for (name, _) in &items {
            match client.read_head_info(&bucket, name).await {
                Ok(None) => {}
                Ok(Some(_)) => {
                    return reason(
                        StatusCode::CONFLICT,
                        format!(
                            "{bucket}/{name} exists: overwriting it needs its cookie (PUT with ?cookie=HEX)"
                        ),
                    )
                }
                Err(e) => return client_error(e),
            }
        }
    }
    let listed = match gw.listed(&bucket).await {
        Ok(l) => l,
        Err(r) => return r,
    };
    if let Some((name, _)) = items.iter().find(|(n, _)| n.starts_with(RESERVED_PREFIX)) {
        return reason(
            StatusCode::BAD_REQUEST,
            format!("{name:?}: names beginning with U+0001 are reserved for S3's multipart parts"),
        );
    }
    let puts = items.into_iter().map(|(name, data)| {
        let (client, bucket, gw) = (client.clone(), bucket.clone(), gw.clone());
        async move {
            let once = stream::once(async move { Ok::<_, std::io::Error>(data) });
            let (cookie, tier) = if listed {
                let w = gw
                    .native
                    .put(&bucket, &name, once)
                    .await
                    .map_err(s3_error)?;
                (w.cookie, w.tier)
            } else {
                client
                    .put_stream_tier(&bucket, &name, once)
                    .await
                    .map_err(client_error)?
            };
            Ok::<_, Response>(created(&bucket, &name, cookie, tier))
        }
    });
    let done: Vec<Result<serde_json::Value, Response>> =
        stream::iter(puts).buffered(16).collect().await;
    let mut objects = Vec::with_capacity(done.len());
    for d in done {
        match d {
            Ok(v) => objects.push(v),
            Err(r) => return r,
        }
    }
    (
        StatusCode::CREATED,
        axum::Json(serde_json::json!({ "objects": objects })),
    )
        .into_response()
}
