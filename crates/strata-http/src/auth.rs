//! The admin token: every Strata server's control endpoints (`/_admin/*`,
//! `/metrics`, and the metadata service's writes) answer only requests that
//! carry `Authorization: Bearer TOKEN` with the token the server was
//! started with (`STRATA_ADMIN_TOKEN`). Without one, or with a wrong one,
//! the answer is 401 or 403 before anything is read or changed; a server
//! started without a token has its control endpoints off (403 saying how
//! to turn them on). docs/security.md.

// A refusal is an HTTP answer, returned as the error (as in http.rs).
#![allow(clippy::result_large_err)]

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use axum::Router;
use std::sync::Arc;

/// The environment variable servers and `strata` commands read the admin
/// token from.
pub const ADMIN_TOKEN_ENV: &str = "STRATA_ADMIN_TOKEN";

/// The admin token a server checks (None: control endpoints are off).
#[derive(Clone, Debug, Default)]
pub struct AdminAuth {
    token: Option<Arc<str>>,
}

impl AdminAuth {
    /// Checks against `token`.
    pub fn new(token: Option<String>) -> AdminAuth {
        AdminAuth {
            token: token.filter(|t| !t.is_empty()).map(Arc::from),
        }
    }

    /// The token of the environment (`STRATA_ADMIN_TOKEN`), if set.
    pub fn from_env() -> AdminAuth {
        AdminAuth::new(std::env::var(ADMIN_TOKEN_ENV).ok())
    }

    /// Whether a token is set.
    pub fn is_set(&self) -> bool {
        self.token.is_some()
    }

    /// Whether `headers` carry the token (`Authorization: Bearer TOKEN`);
    /// the answer to give when they do not.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), Response> {
        let Some(want) = &self.token else {
            return Err(crate::http::reason(
                StatusCode::FORBIDDEN,
                format!("the control endpoints are off: start the server with {ADMIN_TOKEN_ENV} set (or --dev)"),
            ));
        };
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        match given {
            None => {
                let mut r = crate::http::reason(
                    StatusCode::UNAUTHORIZED,
                    "this endpoint needs the admin token: Authorization: Bearer TOKEN",
                );
                r.headers_mut().insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"strata\""),
                );
                Err(r)
            }
            Some(t) if same(t.as_bytes(), want.as_bytes()) => Ok(()),
            Some(_) => Err(crate::http::reason(
                StatusCode::FORBIDDEN,
                "wrong admin token",
            )),
        }
    }
}

/// Compares without stopping at the first differing byte.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether `path` is a control endpoint of a node.
pub fn is_control(path: &str) -> bool {
    path.starts_with("/_admin/") || path == "/_admin" || path == "/metrics"
}

/// A boxed answer future (the route guard's).
type Answer = std::pin::Pin<Box<dyn std::future::Future<Output = Response> + Send>>;
/// The route guard's function.
type GuardFn = fn(State<AdminAuth>, Request, Next) -> Answer;

/// The guard as a route layer, for routes that are all control endpoints
/// (no per-request path test, and no cost on the object routes).
pub fn route_guard(
    auth: AdminAuth,
) -> axum::middleware::FromFnLayer<GuardFn, AdminAuth, (State<AdminAuth>, Request)> {
    fn check_all(State(auth): State<AdminAuth>, req: Request, next: Next) -> Answer {
        Box::pin(async move {
            if let Err(r) = auth.check(req.headers()) {
                return r;
            }
            next.run(req).await
        })
    }
    axum::middleware::from_fn_with_state(auth, check_all as GuardFn)
}

async fn guard(State(auth): State<AdminAuth>, req: Request, next: Next) -> Response {
    if is_control(req.uri().path()) {
        if let Err(r) = auth.check(req.headers()) {
            return r;
        }
    }
    next.run(req).await
}

/// `app` with its control endpoints behind `auth` (every Strata server's
/// one guard).
pub fn protect(app: Router, auth: AdminAuth) -> Router {
    app.layer(axum::middleware::from_fn_with_state(auth, guard))
}

/// A fresh random token (`--dev` without `STRATA_ADMIN_TOKEN`).
pub fn generate() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..32)
        .map(|_| format!("{:x}", rng.random_range(0..16u8)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_checked() {
        let a = AdminAuth::new(Some("s3cret".into()));
        let mut h = HeaderMap::new();
        assert_eq!(a.check(&h).unwrap_err().status(), StatusCode::UNAUTHORIZED);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer nope"),
        );
        assert_eq!(a.check(&h).unwrap_err().status(), StatusCode::FORBIDDEN);
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret"),
        );
        assert!(a.check(&h).is_ok());
        h.insert(
            header::AUTHORIZATION,
            HeaderValue::from_static("Bearer s3cret2"),
        );
        assert!(a.check(&h).is_err());
        let off = AdminAuth::new(None);
        assert_eq!(off.check(&h).unwrap_err().status(), StatusCode::FORBIDDEN);
        assert!(is_control("/_admin/plan") && is_control("/metrics"));
        assert!(!is_control("/bucket/_admin") && !is_control("/healthz"));
        assert_eq!(generate().len(), 32);
    }
}
