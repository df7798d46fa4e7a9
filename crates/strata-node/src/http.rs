//! The HTTP API (docs/node.md): objects at `/{bucket}/{name}`, batch PUT at
//! `POST /{bucket}`, `/metrics`, `/healthz` and the admin endpoints under
//! `/_admin/`. Every client mistake gets a 4xx with a one-line reason.

// Helpers return a ready 4xx `Response` as their error: built once per bad
// request, never on the success path, so its size does not matter.
#![allow(clippy::result_large_err)]

use crate::metrics::Served;
use crate::node::{valid_bucket, NewObject, Node, NodeError};
use crate::object::MAX_NAME_BYTES;
use crate::range::{parse_range, RangeError};
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;

/// The header naming a request's workload (else the bucket is).
pub const WORKLOAD_HEADER: &str = "x-strata-workload";
/// The header carrying an object's cookie in answers.
pub const COOKIE_HEADER: &str = "x-strata-cookie";
/// The header saying which tier served a read.
pub const TIER_HEADER: &str = "x-strata-tier";

/// HTTP-level limits.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Time a client has to send its request head.
    pub header_timeout: Duration,
    /// Time a client has to send a request body.
    pub body_timeout: Duration,
    /// Largest batch PUT body.
    pub max_batch_bytes: u64,
    /// Most connections served at once (more wait in the accept queue).
    pub max_connections: usize,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_batch_bytes: 256 << 20,
            max_connections: 4096,
        }
    }
}

#[derive(Clone)]
struct App {
    node: Arc<Node>,
    limits: HttpLimits,
}

/// A plain-text answer with a one-line reason (the API's error form).
pub fn reason(status: StatusCode, msg: impl Into<String>) -> Response {
    let mut m = msg.into();
    m.push('\n');
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        m,
    )
        .into_response()
}

impl IntoResponse for NodeError {
    fn into_response(self) -> Response {
        let status = match &self {
            NodeError::NotFound => StatusCode::NOT_FOUND,
            NodeError::BadRequest(_) | NodeError::BadPlan(_) => StatusCode::BAD_REQUEST,
            NodeError::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            NodeError::Full(_) => StatusCode::INSUFFICIENT_STORAGE,
            NodeError::Store(_) | NodeError::Startup(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        if let NodeError::Store(detail) = &self {
            // The detail (file paths, offsets, checksums) is for the
            // operator's log, not for the client.
            eprintln!("strata server: store error: {detail}");
            return reason(
                status,
                "the node could not read or write the object (the server's log says why)",
            );
        }
        reason(status, self.to_string())
    }
}

/// The router of a node.
pub fn router(node: Arc<Node>, limits: HttpLimits) -> Router {
    let auth = crate::auth::AdminAuth::new(node.cfg.admin_token.clone());
    let app = App { node, limits };
    // The control endpoints, behind the admin token (a route layer: the
    // object routes pay nothing for it).
    let control = Router::new()
        .route("/metrics", get(metrics))
        .route("/_admin/plan", any(admin_plan))
        .route("/_admin/status", get(admin_status))
        .route("/_admin/traces/flush", post(admin_flush))
        .route_layer(crate::auth::route_guard(auth));
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .merge(control)
        .route("/{bucket}/{*name}", any(object))
        .route("/{bucket}", any(bucket))
        // GET /dashboard is the dashboard's page (merged in by `serve`).
        .route(
            crate::dashboard::PAGE_PATH,
            post(|s: State<App>, r: Request| {
                bucket(s, Path(crate::dashboard::PAGE_PATH[1..].into()), r)
            }),
        )
        .fallback(|| async {
            reason(
                StatusCode::NOT_FOUND,
                "no such route: objects live at /{bucket}/{name}",
            )
        })
        .layer(axum::middleware::from_fn_with_state(app.clone(), count))
        .with_state(app)
}

async fn count(State(app): State<App>, req: Request, next: Next) -> Response {
    let m = req.method().as_str().to_string();
    let resp = next.run(req).await;
    app.node.metrics.request(&m, resp.status().as_u16());
    resp
}

async fn metrics(State(app): State<App>) -> Response {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        app.node.metrics.render(),
    )
        .into_response()
}

async fn admin_status(State(app): State<App>) -> Response {
    axum::Json(app.node.status()).into_response()
}

async fn admin_flush(State(app): State<App>) -> Response {
    let node = app.node.clone();
    match tokio::task::spawn_blocking(move || node.flush_traces()).await {
        Ok(Ok(())) => reason(StatusCode::OK, "traces flushed"),
        Ok(Err(e)) => e.into_response(),
        Err(e) => reason(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

async fn admin_plan(State(app): State<App>, req: Request) -> Response {
    match *req.method() {
        Method::GET => match app.node.plan() {
            Some(p) => axum::Json(p).into_response(),
            None => reason(
                StatusCode::NOT_FOUND,
                "no tier plan loaded: the default plan is in force (every object to flash, one FIFO)",
            ),
        },
        Method::POST | Method::PUT => {
            let body = match read_body(req, 16 << 20, app.limits.body_timeout).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            let res = if body.iter().all(|b| b.is_ascii_whitespace()) {
                app.node.reload_plan()
            } else {
                match std::str::from_utf8(&body) {
                    Ok(t) => strata_provision::TierPlan::from_json(t)
                        .map_err(|e| NodeError::BadPlan(e.to_string()))
                        .and_then(|p| app.node.set_plan(p)),
                    Err(_) => Err(NodeError::BadPlan("the plan is not UTF-8 text".into())),
                }
            };
            match res {
                Ok(()) => reason(StatusCode::OK, "tier plan loaded"),
                Err(e) => e.into_response(),
            }
        }
        Method::DELETE => {
            app.node.clear_plan();
            reason(StatusCode::OK, "default tier plan in force")
        }
        _ => method_not_allowed("GET, POST, PUT, DELETE"),
    }
}

/// 405 with `Allow`.
pub fn method_not_allowed(allow: &'static str) -> Response {
    let mut r = reason(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("method not allowed here; allowed: {allow}"),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// The request's workload: its bucket, or `X-Strata-Workload`. Naming a
/// workload other than the bucket takes the admin token (`auth`): a client
/// may not put its writes into another workload's flash share.
fn workload_of(headers: &HeaderMap, bucket: &str, node: &Node) -> Result<String, Response> {
    if headers
        .get(WORKLOAD_HEADER)
        .is_some_and(|v| v.as_bytes() != bucket.as_bytes())
    {
        crate::auth::AdminAuth::new(node.cfg.admin_token.clone()).check(headers)?;
    }
    match headers.get(WORKLOAD_HEADER) {
        None => Ok(bucket.to_string()),
        Some(v) => match v.to_str() {
            Ok(s) if valid_bucket(s) => Ok(s.to_string()),
            _ => Err(reason(
                StatusCode::BAD_REQUEST,
                "bad X-Strata-Workload: 1 to 63 of A-Z a-z 0-9 . _ -, not starting with . or _",
            )),
        },
    }
}

/// A 400 answer unless `bucket` and `name` are valid object names.
pub fn check_names(bucket: &str, name: &str) -> Result<(), Response> {
    if !valid_bucket(bucket) {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            format!("bad bucket name {bucket:?}: 1 to 63 of A-Z a-z 0-9 . _ -, not starting with . or _"),
        ));
    }
    if name.split('/').any(|seg| seg == "." || seg == "..") {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            "bad object name: no . or .. path segments (clients would rewrite its URL)",
        ));
    }
    if name.is_empty() || bucket.len() + 1 + name.len() > MAX_NAME_BYTES || name.contains('\0') {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            format!(
                "bad object name: 1 to {} bytes with the bucket, no NUL",
                MAX_NAME_BYTES - 1
            ),
        ));
    }
    Ok(())
}

/// The `cookie` query parameter: `Ok(None)` when absent.
pub fn cookie_of(query: Option<&str>) -> Result<Option<u32>, Response> {
    let Some(q) = query else { return Ok(None) };
    let bad = |why: &str| {
        reason(
            StatusCode::BAD_REQUEST,
            format!("bad cookie: {why} (a cookie is exactly 8 hex digits, given once)"),
        )
    };
    let mut found = None;
    for kv in q.split('&') {
        if let Some(v) = kv.strip_prefix("cookie=") {
            if found.is_some() {
                return Err(bad("given twice"));
            }
            if v.len() != 8 || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad("not 8 hex digits"));
            }
            found = Some(u32::from_str_radix(v, 16).map_err(|_| bad("not 8 hex digits"))?);
        }
    }
    Ok(found)
}

/// With `--require-cookies`, a DELETE or an overwriting PUT must carry the
/// object's cookie: a DELETE without the right one is a 404 like an absent
/// object; a PUT over an existing object without it is a 409. The check
/// reads the object first; a concurrent writer can still race it.
async fn owner_check(
    app: &App,
    workload: &str,
    bucket: &str,
    name: &str,
    query: Option<&str>,
    overwrite: bool,
) -> Result<(), Response> {
    if !app.node.cfg.require_cookies {
        return Ok(());
    }
    let cookie = cookie_of(query)?;
    // Reading with the given cookie: found means it matched.
    let got = match cookie {
        Some(c) => app.node.get(workload, bucket, name, Some(c), None).await,
        None => Err(NodeError::NotFound),
    };
    match got {
        Ok(_) => Ok(()),
        Err(NodeError::NotFound) => {
            // Absent (a PUT may create it), or present with another cookie.
            let exists = app
                .node
                .exists(workload, bucket, name)
                .await
                .map_err(IntoResponse::into_response)?;
            match (exists, overwrite) {
                (false, true) => Ok(()),
                (_, false) => Err(NodeError::NotFound.into_response()),
                (true, true) => Err(reason(
                    StatusCode::CONFLICT,
                    "the name exists: overwriting it needs its cookie (?cookie=HEX)",
                )),
            }
        }
        Err(e) => Err(e.into_response()),
    }
}

/// A 400 unless every `%` of the request path `raw` starts a valid escape
/// (two hex digits): a name is never taken literally from a broken one.
pub fn check_escapes(raw: &str) -> Result<(), Response> {
    let b = raw.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let ok = b.get(i + 1).is_some_and(|c| c.is_ascii_hexdigit())
                && b.get(i + 2).is_some_and(|c| c.is_ascii_hexdigit());
            if !ok {
                return Err(reason(
                    StatusCode::BAD_REQUEST,
                    "bad percent-encoding in the path: % must be followed by two hex digits",
                ));
            }
            i += 3;
        } else {
            i += 1;
        }
    }
    Ok(())
}

/// The declared body length, or a 411/413 answer.
pub fn content_length(headers: &HeaderMap, max: u64) -> Result<u64, Response> {
    let Some(v) = headers.get(header::CONTENT_LENGTH) else {
        return Err(reason(
            StatusCode::LENGTH_REQUIRED,
            "Content-Length required: send the object with its length",
        ));
    };
    let n: u64 = v
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| reason(StatusCode::BAD_REQUEST, "bad Content-Length"))?;
    if n > max {
        return Err(reason(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("body of {n} bytes is over the maximum of {max} bytes"),
        ));
    }
    Ok(n)
}

/// Reads a whole (bounded) body within `timeout`, or a 408/413/400 answer.
pub async fn read_body(req: Request, max: u64, timeout: Duration) -> Result<Bytes, Response> {
    let body = http_body_util::Limited::new(req.into_body(), max as usize);
    match tokio::time::timeout(timeout, body.collect()).await {
        Err(_) => Err(reason(
            StatusCode::REQUEST_TIMEOUT,
            format!("the body did not arrive within {} s", timeout.as_secs()),
        )),
        Ok(Err(e)) => {
            if e.is::<http_body_util::LengthLimitError>() {
                Err(reason(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    format!("body is over the maximum of {max} bytes"),
                ))
            } else {
                Err(reason(
                    StatusCode::BAD_REQUEST,
                    format!("could not read the body: {e}"),
                ))
            }
        }
        Ok(Ok(c)) => Ok(c.to_bytes()),
    }
}

async fn object(
    State(app): State<App>,
    Path((bucket, name)): Path<(String, String)>,
    req: Request,
) -> Response {
    if let Err(r) = check_escapes(req.uri().path()).and_then(|()| check_names(&bucket, &name)) {
        return r;
    }
    let workload = match workload_of(req.headers(), &bucket, &app.node) {
        Ok(w) => w,
        Err(r) => return r,
    };
    if matches!(*req.method(), Method::PUT | Method::DELETE) {
        let overwrite = req.method() == Method::PUT;
        if let Err(r) = owner_check(
            &app,
            &workload,
            &bucket,
            &name,
            req.uri().query(),
            overwrite,
        )
        .await
        {
            return r;
        }
    }
    match *req.method() {
        Method::GET | Method::HEAD => get_object(app, &workload, &bucket, &name, req).await,
        Method::PUT => {
            let max = app.node.cfg.max_object_bytes;
            let len = match content_length(req.headers(), max) {
                Ok(n) => n,
                Err(r) => return r,
            };
            let data = match read_body(req, max, app.limits.body_timeout).await {
                Ok(b) => b,
                Err(r) => return r,
            };
            if data.len() as u64 != len {
                return reason(StatusCode::BAD_REQUEST, "body shorter than Content-Length");
            }
            let obj = NewObject {
                bucket: bucket.clone(),
                name,
                data,
            };
            match app.node.put(&workload, vec![obj]).await {
                Ok(mut w) => {
                    let Some(w) = w.pop() else {
                        return reason(StatusCode::INTERNAL_SERVER_ERROR, "nothing written");
                    };
                    let mut r = (StatusCode::CREATED, axum::Json(&w)).into_response();
                    let h = r.headers_mut();
                    if let Ok(v) = HeaderValue::from_str(&w.cookie) {
                        h.insert(COOKIE_HEADER, v);
                    }
                    if let Ok(v) = HeaderValue::from_str(&w.url) {
                        h.insert(header::LOCATION, v);
                    }
                    r
                }
                Err(e) => e.into_response(),
            }
        }
        Method::DELETE => match app.node.delete(&workload, &bucket, &name).await {
            Ok(true) => StatusCode::NO_CONTENT.into_response(),
            Ok(false) => NodeError::NotFound.into_response(),
            Err(e) => e.into_response(),
        },
        _ => method_not_allowed("GET, HEAD, PUT, DELETE"),
    }
}

/// The request's `Range` header, checked for syntax before any device
/// read (a malformed or multiple range is a 416).
pub fn requested_range(headers: &HeaderMap) -> Result<Option<String>, Response> {
    let Some(v) = headers.get(header::RANGE) else {
        return Ok(None);
    };
    let Ok(r) = v.to_str() else {
        return Err(reason(
            StatusCode::RANGE_NOT_SATISFIABLE,
            "malformed Range header",
        ));
    };
    if let Err(e @ (RangeError::Malformed(_) | RangeError::Multiple(_))) = parse_range(r, u64::MAX)
    {
        return Err(reason(StatusCode::RANGE_NOT_SATISFIABLE, e.to_string()));
    }
    Ok(Some(r.to_string()))
}

/// The 416 answer for a range outside an object of `size` bytes.
pub fn unsatisfiable(e: RangeError, size: u64) -> Response {
    let mut resp = reason(StatusCode::RANGE_NOT_SATISFIABLE, e.to_string());
    if let Ok(v) = HeaderValue::from_str(&format!("bytes */{size}")) {
        resp.headers_mut().insert(header::CONTENT_RANGE, v);
    }
    resp
}

async fn get_object(app: App, workload: &str, bucket: &str, name: &str, req: Request) -> Response {
    let cookie = match cookie_of(req.uri().query()) {
        Ok(c) => c,
        Err(r) => return r,
    };
    let head = req.method() == Method::HEAD;
    let range_h = match requested_range(req.headers()) {
        Ok(r) => r,
        Err(r) => return r,
    };
    let found = match app.node.get(workload, bucket, name, cookie, None).await {
        Ok(f) => f,
        Err(e) => return e.into_response(),
    };
    let size = found.data.len() as u64;
    let tier = match found.served {
        Served::Ram => "ram",
        Served::Flash => "flash",
        Served::FlashCache => "flash-cache",
        Served::Disk => "disk",
    };
    let (status, body, content_range) = match &range_h {
        None => (StatusCode::OK, found.data, None),
        Some(r) => match parse_range(r, size) {
            Ok((a, b)) => (
                StatusCode::PARTIAL_CONTENT,
                found.data.slice(a as usize..b as usize),
                Some(format!("bytes {a}-{}/{size}", b - 1)),
            ),
            Err(e) => return unsatisfiable(e, size),
        },
    };
    let len = body.len();
    let mut resp = if head {
        Response::new(Body::empty())
    } else {
        Response::new(Body::from(body))
    };
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(TIER_HEADER, HeaderValue::from_static(tier));
    if let Ok(v) = HeaderValue::from_str(&format!("{:08x}", found.cookie)) {
        h.insert(COOKIE_HEADER, v);
    }
    if let Some(cr) = content_range {
        if let Ok(v) = HeaderValue::from_str(&cr) {
            h.insert(header::CONTENT_RANGE, v);
        }
    }
    resp
}

/// Reads and parses the batch body of `POST /{bucket}` (at most `max`
/// bytes, within `timeout`), checking every name; a 4xx answer otherwise.
pub async fn read_batch(
    req: Request,
    bucket: &str,
    max: u64,
    timeout: Duration,
) -> Result<Vec<(String, Bytes)>, Response> {
    let len = content_length(req.headers(), max)?;
    let body = read_body(req, max, timeout).await?;
    if body.len() as u64 != len {
        return Err(reason(
            StatusCode::BAD_REQUEST,
            "body shorter than Content-Length",
        ));
    }
    let items = parse_batch(&body)
        .map_err(|e| reason(StatusCode::BAD_REQUEST, format!("bad batch: {e}")))?;
    for (name, _) in &items {
        check_names(bucket, name)?;
    }
    Ok(items)
}

/// Parses a batch body (docs/node.md, "Batch PUT"): repeated
/// `name_len u16 LE, data_len u32 LE, name, data`.
pub fn parse_batch(body: &Bytes) -> Result<Vec<(String, Bytes)>, String> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < body.len() {
        if body.len() - i < 6 {
            return Err(format!(
                "batch item {} is truncated in its header",
                out.len() + 1
            ));
        }
        let nl = u16::from_le_bytes([body[i], body[i + 1]]) as usize;
        let dl = u32::from_le_bytes([body[i + 2], body[i + 3], body[i + 4], body[i + 5]]) as usize;
        i += 6;
        if body.len() - i < nl + dl {
            return Err(format!(
                "batch item {} says {nl} name bytes and {dl} data bytes but only {} remain",
                out.len() + 1,
                body.len() - i
            ));
        }
        let name = std::str::from_utf8(&body[i..i + nl])
            .map_err(|_| format!("batch item {}: name is not UTF-8", out.len() + 1))?
            .to_string();
        i += nl;
        out.push((name, body.slice(i..i + dl)));
        i += dl;
    }
    if out.is_empty() {
        return Err("empty batch".into());
    }
    Ok(out)
}

async fn bucket(State(app): State<App>, Path(bucket): Path<String>, req: Request) -> Response {
    if req.method() != Method::POST {
        return method_not_allowed("POST");
    }
    if !valid_bucket(&bucket) {
        return reason(
            StatusCode::BAD_REQUEST,
            format!("bad bucket name {bucket:?}"),
        );
    }
    let workload = match workload_of(req.headers(), &bucket, &app.node) {
        Ok(w) => w,
        Err(r) => return r,
    };
    let items = match read_batch(
        req,
        &bucket,
        app.limits.max_batch_bytes,
        app.limits.body_timeout,
    )
    .await
    {
        Ok(v) => v,
        Err(r) => return r,
    };
    // A batch carries no cookies: under --require-cookies it may create
    // names, not overwrite them.
    if app.node.cfg.require_cookies {
        for (name, _) in &items {
            match app.node.exists(&workload, &bucket, name).await {
                Ok(false) => {}
                Ok(true) => {
                    return reason(
                        StatusCode::CONFLICT,
                        format!(
                            "{bucket}/{name} exists: overwriting it needs its cookie (PUT with ?cookie=HEX)"
                        ),
                    )
                }
                Err(e) => return e.into_response(),
            }
        }
    }
    let mut objs = Vec::with_capacity(items.len());
    for (name, data) in items {
        objs.push(NewObject {
            bucket: bucket.clone(),
            name,
            data,
        });
    }
    match app.node.put(&workload, objs).await {
        Ok(w) => (
            StatusCode::CREATED,
            axum::Json(serde_json::json!({ "objects": w })),
        )
            .into_response(),
        Err(e) => e.into_response(),
    }
}

/// Serves the node's API on `listener` until `shutdown` resolves.
pub async fn serve(
    node: Arc<Node>,
    listener: TcpListener,
    limits: HttpLimits,
    extra: Router,
    shutdown: impl std::future::Future<Output = ()>,
) {
    serve_router(
        router(node, limits).merge(extra),
        listener,
        limits,
        shutdown,
    )
    .await
}

/// Serves `app` on `listener` with Strata's connection limits (every
/// Strata server's one HTTP loop): at most `max_connections` at once (more
/// wait in the accept queue), a request head within `header_timeout`,
/// keep-alive, no Nagle delay, until `shutdown` resolves.
pub async fn serve_router(
    app: Router,
    listener: TcpListener,
    limits: HttpLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    let sem = Arc::new(tokio::sync::Semaphore::new(limits.max_connections));
    tokio::pin!(shutdown);
    loop {
        let permit = tokio::select! {
            _ = &mut shutdown => return,
            p = sem.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
        };
        let (stream, _) = tokio::select! {
            _ = &mut shutdown => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    // Out of file descriptors or similar: back off a little.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let svc = TowerToHyperService::new(app.clone());
        tokio::spawn(async move {
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(limits.header_timeout)
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), svc)
                .await;
            drop(permit);
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_parse() {
        let b = crate::loadgen::encode_batch(&[
            ("a".into(), Bytes::from_static(b"1")),
            ("bc".into(), Bytes::from_static(b"")),
        ]);
        let v = parse_batch(&b).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[1].0, "bc");
        assert!(parse_batch(&b.slice(..b.len() - 1)).is_err());
        assert!(parse_batch(&Bytes::from_static(&[1, 0, 9, 0, 0, 0, b'a'])).is_err());
        assert!(parse_batch(&Bytes::new()).is_err());
    }

    #[test]
    fn cookies() {
        assert_eq!(cookie_of(None).ok(), Some(None));
        assert_eq!(cookie_of(Some("cookie=000000ff")).ok(), Some(Some(255)));
        assert_eq!(cookie_of(Some("x=1&cookie=0000000a")).ok(), Some(Some(10)));
        assert!(cookie_of(Some("cookie=00ff")).is_err());
        assert!(cookie_of(Some("cookie=+0000000")).is_err());
        assert!(cookie_of(Some("cookie=0000000a&cookie=0000000b")).is_err());
        assert!(check_escapes("/b/a%20b").is_ok());
        assert!(check_escapes("/b/a%zz").is_err());
        assert!(check_escapes("/b/a%2").is_err());
        assert!(check_escapes("/b/a%").is_err());
        assert!(cookie_of(Some("cookie=zz")).is_err());
        assert!(cookie_of(Some("cookie=123456789")).is_err());
    }
}
