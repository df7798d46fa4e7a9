//! The HTTP pieces every Strata server shares (docs/node.md): the one
//! connection loop ([`serve_router`]: head timeout, connection limit), the
//! checks of names, cookies, escapes, lengths and ranges, the batch body
//! reader, and the one-line 4xx answer. Every client mistake gets a 4xx
//! with a one-line reason.

// Helpers return a ready 4xx `Response` as their error: built once per bad
// request, never on the success path, so its size does not matter.
#![allow(clippy::result_large_err)]

use crate::range::{parse_range, RangeError};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::Bytes;
use http_body_util::BodyExt;
use std::time::Duration;
use strata_node::object::MAX_NAME_BYTES;
use strata_node::tiers::valid_bucket;
use tokio::net::TcpListener;

/// The header naming a request's workload (else the bucket is).
pub const WORKLOAD_HEADER: &str = "x-strata-workload";
/// The header carrying an object's cookie in answers.
pub const COOKIE_HEADER: &str = "x-strata-cookie";

/// HTTP-level limits.
#[derive(Clone, Copy, Debug)]
pub struct HttpLimits {
    /// Time a client has to send its request head.
    pub header_timeout: Duration,
    /// Time a client has to send a request body.
    pub body_timeout: Duration,
    /// Largest batch PUT body.
    pub max_batch_bytes: u64,
    /// Most connections served at once: past it the idlest is closed, and
    /// when none is idle, new ones get only health checks, then wait in the
    /// accept queue (crate::conns).
    pub max_connections: usize,
    /// Most of them one client network holds (crate::conns); at
    /// `max_connections` or more, no share (the default: the metadata
    /// service's listener, which only the cluster's nodes use; `strata
    /// server` sets a quarter of `max_connections` on the node port, its
    /// peers exempt, and on S3).
    pub max_connections_per_client: usize,
    /// A keep-alive connection with no request for this long is closed.
    pub idle_timeout: Duration,
    /// A connection whose answer the client stops reading (no byte of it
    /// taken for this long) is dropped, freeing its slot.
    pub write_timeout: Duration,
}

impl Default for HttpLimits {
    fn default() -> Self {
        HttpLimits {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_batch_bytes: 256 << 20,
            max_connections: 4096,
            max_connections_per_client: usize::MAX,
            idle_timeout: Duration::from_secs(60),
            write_timeout: Duration::from_secs(30),
        }
    }
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
    let items = strata_proto::batch::parse(&body)
        .map_err(|e| reason(StatusCode::BAD_REQUEST, format!("bad batch: {e}")))?;
    for (name, _) in &items {
        check_names(bucket, name)?;
    }
    Ok(items)
}

/// Serves `app` on `listener` with Strata's connection limits (every
/// Strata server's one HTTP loop, [`crate::conns::serve`]) until
/// `shutdown` resolves.
pub async fn serve_router(
    app: Router,
    listener: TcpListener,
    limits: HttpLimits,
    shutdown: impl std::future::Future<Output = ()>,
) {
    crate::conns::serve(
        listener,
        limits,
        crate::conns::router_service(app),
        shutdown,
    )
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

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
