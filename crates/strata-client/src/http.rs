//! A small HTTP/1.1 client over hyper with a connection pool and per-request
//! timeouts; shared by the client library and by nodes talking to nodes.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client as Pool;
use hyper_util::rt::TokioExecutor;

/// A pooled HTTP client.
#[derive(Clone)]
pub struct Http {
    pool: Pool<HttpConnector, Full<Bytes>>,
    /// The cluster secret every request is signed with
    /// ([`strata_meta::cluster_auth`]; none: unsigned).
    secret: Option<strata_meta::cluster_auth::ClusterSecret>,
}

/// The path and query of an `http://host:port/...` URL.
/// The `host:port` of a URL (the destination a cluster signature's
/// sequence counts for).
fn authority_of(url: &str) -> &str {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    rest.find('/').map_or(rest, |i| &rest[..i])
}

fn path_of(url: &str) -> &str {
    let rest = url.strip_prefix("http://").unwrap_or(url);
    rest.find('/').map_or("/", |i| &rest[i..])
}

/// A whole response.
#[derive(Debug)]
pub struct HttpResponse {
    /// Status.
    pub status: StatusCode,
    /// The table version header, if present.
    pub table_version: Option<u64>,
    /// The record's stamp header, if present (a GET's record, or the
    /// tombstone behind a 404).
    pub stamp: Option<u64>,
    /// The tier a replica put a record on or read it from
    /// ([`strata_proto::TIER_HEADER`]: `flash`, `disk`, ...), if it said.
    pub tier: Option<String>,
    /// The whole record's length when the body is its first bytes
    /// ([`strata_proto::RECORD_LENGTH_HEADER`]).
    pub record_len: Option<u64>,
    /// Body.
    pub body: Bytes,
}

impl Default for Http {
    fn default() -> Self {
        Http::new()
    }
}

/// How long this process's clients keep an idle connection (milliseconds;
/// 0: the default, 30 s). See [`set_pool_idle`].
static POOL_IDLE_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Makes the clients this process creates from now on keep an idle
/// connection at most `idle` (and at most 30 s). A node sets half its own
/// `--idle-timeout`: its peers, run with the same flags, close an idle
/// connection after that, and a request sent on a connection as the server
/// closes it fails.
pub fn set_pool_idle(idle: Duration) {
    let ms = idle.as_millis().clamp(1, 30_000) as u64;
    POOL_IDLE_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}

impl Http {
    /// A client with keep-alive connections, no proxy, Nagle off.
    pub fn new() -> Http {
        let mut conn = HttpConnector::new();
        conn.set_nodelay(true);
        let idle = match POOL_IDLE_MS.load(std::sync::atomic::Ordering::Relaxed) {
            0 => Duration::from_secs(30),
            ms => Duration::from_millis(ms),
        };
        let pool = Pool::builder(TokioExecutor::new())
            .pool_idle_timeout(idle)
            .pool_max_idle_per_host(256)
            .build(conn);
        Http {
            pool,
            secret: strata_meta::cluster_auth::process_secret(),
        }
    }

    /// Sends a request and reads the whole answer within `timeout`.
    pub async fn send(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        body: Bytes,
        timeout: Duration,
    ) -> Result<HttpResponse, String> {
        self.send_stamped(method, url, version, None, body, timeout)
            .await
    }

    /// [`send`](Self::send) with the write's stamp in
    /// [`STAMP_HEADER`](strata_proto::STAMP_HEADER).
    pub async fn send_stamped(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        body: Bytes,
        timeout: Duration,
    ) -> Result<HttpResponse, String> {
        self.send_digested(method, url, version, stamp, body, None, timeout)
            .await
    }

    /// [`send_stamped`](Self::send_stamped) of a body whose digest the
    /// caller may have computed once for all the replicas it goes to
    /// ([`Http::digest_of`]; None: hashed here).
    #[allow(clippy::too_many_arguments)]
    pub async fn send_digested(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        body: Bytes,
        digest: Option<strata_meta::cluster_auth::Digest>,
        timeout: Duration,
    ) -> Result<HttpResponse, String> {
        self.exchange(method, url, version, stamp, &[], body, digest, timeout)
            .await
    }

    /// The digest this client's signatures take of `body`, if it signs
    /// (None without a cluster secret).
    pub fn digest_of(&self, body: &[u8]) -> Option<strata_meta::cluster_auth::Digest> {
        self.secret
            .as_ref()
            .map(|_| strata_meta::cluster_auth::body_digest(body))
    }

    /// [`send`](Self::send) with extra request headers (an admin token).
    pub async fn send_with_headers(
        &self,
        method: Method,
        url: &str,
        extra: &[(&str, &str)],
        body: Bytes,
        timeout: Duration,
    ) -> Result<HttpResponse, String> {
        self.exchange(method, url, None, None, extra, body, None, timeout)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        extra: &[(&str, &str)],
        body: Bytes,
        digest: Option<strata_meta::cluster_auth::Digest>,
        timeout: Duration,
    ) -> Result<HttpResponse, String> {
        let fut = async {
            let resp = self
                .start_stamped(method, url, version, stamp, extra, body, digest)
                .await?;
            let status = resp.status();
            let table_version = header_version(&resp);
            let stamp = resp
                .headers()
                .get(strata_proto::STAMP_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.parse().ok());
            let tier = resp
                .headers()
                .get(strata_proto::TIER_HEADER)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            let record_len = resp
                .headers()
                .get(strata_proto::RECORD_LENGTH_HEADER)
                .and_then(|v| v.to_str().ok())
                .and_then(|s| s.parse().ok());
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{url}: reading body: {e}"))?
                .to_bytes();
            Ok(HttpResponse {
                status,
                table_version,
                stamp,
                tier,
                record_len,
                body,
            })
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(format!("{url}: no answer within {timeout:?}")),
        }
    }

    /// Sends a request and returns the response with its body unread (for
    /// streams such as a row export).
    pub async fn start(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        body: Bytes,
    ) -> Result<hyper::Response<Incoming>, String> {
        self.start_stamped(method, url, version, None, &[], body, None)
            .await
    }

    #[allow(clippy::too_many_arguments)]
    async fn start_stamped(
        &self,
        method: Method,
        url: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        headers: &[(&str, &str)],
        body: Bytes,
        digest: Option<strata_meta::cluster_auth::Digest>,
    ) -> Result<hyper::Response<Incoming>, String> {
        self.request(url, || {
            self.build(&method, url, version, stamp, headers, &body, digest)
        })
        .await
    }

    /// The request [`start_stamped`](Self::start_stamped) sends, signed
    /// (with `digest` as the body's, when the caller has it).
    #[allow(clippy::too_many_arguments)]
    fn build(
        &self,
        method: &Method,
        url: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        headers: &[(&str, &str)],
        body: &Bytes,
        digest: Option<strata_meta::cluster_auth::Digest>,
    ) -> Result<Request<Full<Bytes>>, hyper::http::Error> {
        // The Host the signature names, as written (hyper would leave a
        // default port out).
        let mut req = Request::builder()
            .method(method.clone())
            .uri(url)
            .header(hyper::header::HOST, authority_of(url));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        if let Some(v) = version {
            req = req.header(strata_proto::TABLE_VERSION_HEADER, v);
        }
        if let Some(s) = stamp {
            req = req.header(strata_proto::STAMP_HEADER, s);
        }
        if !body.is_empty()
            && !headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("content-type"))
        {
            req = req.header("content-type", "application/octet-stream");
        }
        if let Some(sec) = &self.secret {
            req = req.header(
                strata_meta::cluster_auth::AUTH_HEADER,
                sec.sign_digested(
                    &strata_meta::cluster_auth::Signed {
                        method: method.as_str(),
                        path: path_of(url),
                        version,
                        stamp,
                        host: authority_of(url),
                    },
                    body.len() as u64,
                    digest.unwrap_or_else(|| strata_meta::cluster_auth::body_digest(body)),
                ),
            );
        }
        req.body(Full::new(body.clone()))
    }

    /// Sends the request `build` makes on a pooled connection. A GET or
    /// HEAD that fails once sent (a kept-alive connection the server
    /// closed as the request went out) is built and sent once more, as
    /// Go's `http.Transport` does; a request that changes something is
    /// not, since the server may have applied it.
    async fn request(
        &self,
        url: &str,
        build: impl Fn() -> Result<Request<Full<Bytes>>, hyper::http::Error>,
    ) -> Result<hyper::Response<Incoming>, String> {
        let req = build().map_err(|e| format!("{url}: {e}"))?;
        let replay = matches!(*req.method(), Method::GET | Method::HEAD);
        let sent = match self.pool.request(req).await {
            Err(e) if replay && !e.is_connect() => {
                let req = build().map_err(|e| format!("{url}: {e}"))?;
                self.pool.request(req).await
            }
            r => r,
        };
        sent.map_err(|e| format!("{url}: {}", error_chain(&e)))
    }

    /// GET a JSON document.
    pub async fn get_json<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        timeout: Duration,
    ) -> Result<T, String> {
        let r = self
            .send(Method::GET, url, None, Bytes::new(), timeout)
            .await?;
        if !r.status.is_success() {
            return Err(format!(
                "{url}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        serde_json::from_slice(&r.body).map_err(|e| format!("{url}: bad JSON: {e}"))
    }

    /// POST a JSON document and read a JSON answer.
    pub async fn post_json<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, String> {
        self.json_request(Method::POST, url, body, timeout).await
    }

    /// PUT a JSON document and read a JSON answer.
    pub async fn put_json<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, String> {
        self.json_request(Method::PUT, url, body, timeout).await
    }

    async fn json_request<B: serde::Serialize, T: serde::de::DeserializeOwned>(
        &self,
        method: Method,
        url: &str,
        body: &B,
        timeout: Duration,
    ) -> Result<T, String> {
        let bytes = Bytes::from(serde_json::to_vec(body).map_err(|e| e.to_string())?);
        const JSON: [(&str, &str); 2] = [
            ("content-type", "application/json"),
            ("accept", "application/json"),
        ];
        let build = || self.build(&method, url, None, None, &JSON, &bytes, None);
        let fut = async {
            let resp = self.request(url, build).await?;
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("{url}: {e}"))?
                .to_bytes();
            if !status.is_success() {
                return Err(format!(
                    "{url}: {status} {}",
                    String::from_utf8_lossy(&body)
                ));
            }
            serde_json::from_slice(&body).map_err(|e| format!("{url}: bad JSON: {e}"))
        };
        tokio::time::timeout(timeout, fut)
            .await
            .map_err(|_| format!("{url}: no answer within {timeout:?}"))?
    }
}

/// The table version header of a response.
pub fn header_version<B>(resp: &hyper::Response<B>) -> Option<u64> {
    resp.headers()
        .get(strata_proto::TABLE_VERSION_HEADER)
        .and_then(|v| v.to_str().ok())
        .and_then(|s| s.parse().ok())
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}
