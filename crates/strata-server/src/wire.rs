//! The node protocol's answers over HTTP: a replica's [`Refusal`] as its
//! status and reason (a stale table's with this node's version in
//! [`TABLE_VERSION_HEADER`]), and the table version a request carries.
//! Shared by every handler of the protocol (records, the listing index,
//! stripes).

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use strata_proto::replica::Refusal;
use strata_proto::TABLE_VERSION_HEADER;

/// A plain-text answer.
pub(crate) fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    (code, msg.into()).into_response()
}

/// A plain-text answer carrying this node's table `version`.
pub(crate) fn with_version(code: StatusCode, version: u64, msg: String) -> Response {
    let mut r = text(code, msg);
    if let Ok(v) = version.to_string().parse() {
        r.headers_mut().insert(TABLE_VERSION_HEADER, v);
    }
    r
}

/// The answer that carries `r` (a stale table's refusal with this node's
/// version in its header).
pub(crate) fn refused(r: Refusal) -> Response {
    match r {
        Refusal::Stale { at } => with_version(StatusCode::CONFLICT, at, r.reason()),
        r => text(
            StatusCode::from_u16(r.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            r.reason(),
        ),
    }
}

/// The table version a request carries.
pub(crate) fn version_of(headers: &HeaderMap) -> Result<u64, Refusal> {
    headers
        .get(TABLE_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse::<u64>().ok())
        .ok_or_else(|| {
            Refusal::Bad(format!(
                "missing or malformed {TABLE_VERSION_HEADER} header"
            ))
        })
}
