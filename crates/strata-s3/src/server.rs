//! The S3 listener: one HTTP/1 connection task per client, each request
//! handed to the s3s service.

use s3s::host::{S3Host, VirtualHost};
use s3s::service::S3ServiceBuilder;
use s3s::S3Result;

use std::sync::Arc;

use crate::auth::{KeyAccess, KeyAuth};
use crate::service::StrataS3;
use crate::S3Error;

/// What the S3 listener of a node needs.
#[derive(Clone)]
pub struct S3Options {
    /// The address to listen on.
    pub listen: String,
    /// Largest object accepted.
    pub max_object_size: u64,
    /// The metadata service's admin token, to fetch the other keys (none:
    /// only the root key).
    pub admin_token: Option<String>,
    /// Domains of virtual-host-style requests (`BUCKET.DOMAIN`); requests
    /// to any other host are path style.
    pub domains: Vec<String>,
    /// Whether PUTs write the listing index (always, but for the
    /// benchmark of the index's cost: without it nothing is listed).
    pub listing_index: bool,
    /// Multipart uploads neither completed nor aborted this long after
    /// their creation are aborted by the sweep, their parts reclaimed
    /// (None: never).
    pub abandoned_uploads_after: Option<std::time::Duration>,
    /// The region the API answers for (GetBucketLocation; a CreateBucket
    /// for another location is refused).
    pub region: String,
    /// Whether SigV2 signatures are accepted (off by default: see
    /// [`crate::lifetimes`]).
    pub sigv2: bool,
    /// A request body with no byte for this long, or not whole by this
    /// long plus its time at 64 KiB/s, is answered 400 `RequestTimeout`
    /// (`strata_http::deadline`).
    pub body_timeout: std::time::Duration,
}

/// Virtual-host-style addressing: a host `BUCKET.DOMAIN[:PORT]` for one of
/// the configured domains names the bucket; every other host (an IP
/// address, the domain itself, an unknown name) is path style. s3s's own
/// `SingleDomain` would take an unknown host, `127.0.0.1` included, for a
/// bucket name.
pub struct Domains(pub Vec<String>);

impl S3Host for Domains {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<VirtualHost<'a>> {
        let name = match host.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => host,
        };
        for d in &self.0 {
            if let Some(bucket) = name
                .strip_suffix(d.as_str())
                .and_then(|b| b.strip_suffix('.'))
                .filter(|b| !b.is_empty())
            {
                return Ok(VirtualHost::new(d.as_str()).with_bucket(bucket));
            }
        }
        Ok(VirtualHost::new(name))
    }
}

/// A bound S3 listener, ready to serve.
pub struct Listener {
    listener: tokio::net::TcpListener,
    service: RequestIds,
    jobs: Vec<crate::jobs::Job>,
}

/// The S3 service with a request id on every answer, as S3 gives one: the
/// `x-amz-request-id` header, and in an error's XML the same id as
/// `<RequestId>` (what a client quotes in a bug report; s3s sets neither).
/// Ids are 16 hex digits: a random start for this process, then counted.
/// Before s3s sees a request, the lifetime of its signature is checked
/// ([`crate::lifetimes`]).
#[derive(Clone)]
pub struct RequestIds {
    inner: s3s::service::S3Service,
    next: Arc<std::sync::atomic::AtomicU64>,
    sigv2: bool,
    body_timeout: std::time::Duration,
}

impl RequestIds {
    fn new(
        inner: s3s::service::S3Service,
        sigv2: bool,
        body_timeout: std::time::Duration,
    ) -> RequestIds {
        RequestIds {
            inner,
            next: Arc::new(std::sync::atomic::AtomicU64::new(rand::random::<u64>())),
            sigv2,
            body_timeout,
        }
    }
}

/// S3's answer to a body that did not arrive in time.
fn body_too_slow() -> s3s::HttpResponse {
    let mut r = refused(&crate::lifetimes::Refusal {
        status: http::StatusCode::BAD_REQUEST,
        code: "RequestTimeout",
        message: "Your socket connection to the server was not read from or written to within the timeout period. Idle connections will be closed.".into(),
    });
    r.headers_mut().insert(
        http::header::CONNECTION,
        http::HeaderValue::from_static("close"),
    );
    r
}

/// The answer to a request refused before s3s saw it.
fn refused(r: &crate::lifetimes::Refusal) -> s3s::HttpResponse {
    let mut resp = http::Response::new(s3s::Body::from(r.xml()));
    *resp.status_mut() = r.status;
    resp.headers_mut().insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/xml"),
    );
    resp
}

/// `body` (an S3 error document) with `<RequestId>id</RequestId>` as its
/// last element, if it is one and has none.
fn with_request_id(body: &[u8], id: &str) -> Option<bytes::Bytes> {
    const END: &[u8] = b"</Error>";
    if body.windows(11).any(|w| w == b"<RequestId>") {
        return None;
    }
    let at = body.windows(END.len()).rposition(|w| w == END)?;
    let mut out = Vec::with_capacity(body.len() + 40);
    out.extend_from_slice(&body[..at]);
    out.extend_from_slice(b"<RequestId>");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"</RequestId>");
    out.extend_from_slice(&body[at..]);
    Some(out.into())
}

const SIG_MISMATCH: &[u8] = b"<Code>SignatureDoesNotMatch</Code>";

/// At most this many refused signatures are logged per second: a client
/// with a wrong secret (or an attacker) cannot fill the log.
const REFUSED_PER_SECOND: u64 = 20;

static REFUSED_LOG: LogBudget = LogBudget(std::sync::atomic::AtomicU64::new(0));

/// Lines left this second: the second (since the Unix epoch) in the high
/// 44 bits, the lines logged in it in the low 20.
struct LogBudget(std::sync::atomic::AtomicU64);

#[derive(Debug, PartialEq)]
enum Admit {
    Yes,
    /// The last line of this second.
    Last,
    No,
}

impl LogBudget {
    fn admit(&self) -> Admit {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.admit_at(now)
    }

    fn admit_at(&self, second: u64) -> Admit {
        use std::sync::atomic::Ordering::Relaxed;
        let mut cur = self.0.load(Relaxed);
        loop {
            let (at, n) = (cur >> 20, cur & 0xF_FFFF);
            let n = if at == second & 0xFFF_FFFF_FFFF { n } else { 0 };
            if n >= REFUSED_PER_SECOND {
                return Admit::No;
            }
            let next = ((second & 0xFFF_FFFF_FFFF) << 20) | (n + 1);
            match self.0.compare_exchange_weak(cur, next, Relaxed, Relaxed) {
                Ok(_) if n + 1 == REFUSED_PER_SECOND => return Admit::Last,
                Ok(_) => return Admit::Yes,
                Err(c) => cur = c,
            }
        }
    }
}

/// The operator's line for a refused signature: the request as the server
/// read it (method, path and query, the signed header names and the date),
/// never the signature itself. A client whose request was changed on the
/// way (a proxy, a desynchronised connection) shows here.
fn refused_signature(
    (method, uri, auth, date): &(
        http::Method,
        http::Uri,
        Option<http::HeaderValue>,
        Option<http::HeaderValue>,
    ),
) -> String {
    let text = |v: &Option<http::HeaderValue>| {
        v.as_ref()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_else(|| "-".into())
    };
    let auth = text(auth);
    let signed = auth
        .split("SignedHeaders=")
        .nth(1)
        .map(|s| s.split(',').next().unwrap_or(""))
        .unwrap_or("-");
    let method: String = method.as_str().escape_debug().collect();
    // A presigned URL's signature (V4 or V2) is a credential until it
    // expires.
    let query = uri.query().map(|q| {
        q.split('&')
            .map(|p| match p.split_once('=') {
                Some((k, _))
                    if k.eq_ignore_ascii_case("X-Amz-Signature")
                        || k.eq_ignore_ascii_case("Signature") =>
                {
                    format!("{k}=(hidden)")
                }
                _ => p.to_string(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    let uri = match query {
        Some(q) => format!("{}?{q}", uri.path()),
        None => uri.path().to_string(),
    };
    let uri: String = uri.escape_debug().collect();
    format!(
        "signature does not match: {method} {uri} (signed headers {signed}, x-amz-date {})",
        text(date).escape_debug()
    )
}

impl hyper::service::Service<http::Request<hyper::body::Incoming>> for RequestIds {
    type Response = s3s::HttpResponse;
    type Error = s3s::HttpError;
    type Future = futures_util::future::BoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn call(&self, req: http::Request<hyper::body::Incoming>) -> Self::Future {
        let n = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let id = format!("{n:016X}");
        // What the log says of a request whose signature is refused
        // (cheap clones: the URI and header values share their bytes).
        let asked = (
            req.method().clone(),
            req.uri().clone(),
            req.headers().get(http::header::AUTHORIZATION).cloned(),
            req.headers().get("x-amz-date").cloned(),
        );
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        let declared = req
            .headers()
            .get(http::header::CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        let early = crate::lifetimes::check(req.uri(), req.headers(), now, self.sigv2)
            .and_then(|_| crate::bounds::check(req.method(), req.uri(), req.headers(), declared))
            .err();
        // The body, read by s3s and the handlers, has the listener's
        // deadline (the head's is the connection loop's); a request
        // refused on its head, or without a body, needs no timer.
        let (parts, body) = req.into_parts();
        let (body, late) = if early.is_some() || hyper::body::Body::is_end_stream(&body) {
            (s3s::Body::from(body), None)
        } else {
            let (b, late) = strata_http::deadline::Deadline::new(body, self.body_timeout);
            (s3s::Body::http_body(b), Some(late))
        };
        let req = http::Request::from_parts(parts, body);
        let inner = self.inner.clone();
        Box::pin(async move {
            let mut resp = match early {
                None => {
                    let resp = inner.call(req).await;
                    if late.is_some_and(|l| l.fired()) {
                        body_too_slow()
                    } else {
                        resp?
                    }
                }
                Some(r) => refused(&r),
            };
            if resp.status().as_u16() >= 400 {
                let body = resp.body().bytes();
                if resp.status() == http::StatusCode::FORBIDDEN
                    && body
                        .as_ref()
                        .is_some_and(|b| b.windows(SIG_MISMATCH.len()).any(|w| w == SIG_MISMATCH))
                {
                    match REFUSED_LOG.admit() {
                        Admit::Yes => {
                            eprintln!("strata s3: request {id}: {}", refused_signature(&asked))
                        }
                        Admit::Last => eprintln!(
                            "strata s3: request {id}: {} (more refused signatures this second are not logged)",
                            refused_signature(&asked)
                        ),
                        Admit::No => {}
                    }
                }
                if let Some(b) = body.and_then(|b| with_request_id(&b, &id)) {
                    resp.headers_mut().remove(http::header::CONTENT_LENGTH);
                    *resp.body_mut() = s3s::Body::from(b);
                }
            }
            if let Ok(v) = http::HeaderValue::from_str(&id) {
                resp.headers_mut().insert("x-amz-request-id", v);
            }
            Ok(resp)
        })
    }
}

impl Listener {
    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// The bound socket and the S3 service, for the server's one
    /// connection loop (`strata_http::conns::serve`: connection limit,
    /// idle drop, head timeout), and the background jobs, for its workers.
    pub fn into_parts(self) -> (tokio::net::TcpListener, RequestIds, Vec<crate::jobs::Job>) {
        (self.listener, self.service, self.jobs)
    }
}

/// The bounds of a browser-upload form (POST with `multipart/form-data`),
/// which s3s reads before it can check the form's signature: every field
/// but the file together at most [`FORM_FIELDS_MAX`] bytes (S3's policy
/// and fields are a few KiB), at most [`FORM_PARTS_MAX`] parts. s3s's own
/// defaults (20 MB of fields) let an unsigned client make the node hold
/// 20 MB per connection (issue 34).
fn form_limits() -> s3s::config::S3Config {
    let mut c = s3s::config::S3Config::default();
    c.form_max_field_size = FORM_FIELDS_MAX;
    c.form_max_fields_size = FORM_FIELDS_MAX;
    c.form_max_parts = FORM_PARTS_MAX;
    c
}

/// Bytes of a browser-upload form's fields, the file excepted.
pub const FORM_FIELDS_MAX: usize = 64 << 10;

/// Parts of a browser-upload form.
pub const FORM_PARTS_MAX: usize = 100;

/// Binds the S3 listener of a node, over the node's coordinator and with
/// its keys (`native`: the one identity model both APIs share). Nothing is
/// spawned: the caller serves the listener and runs the jobs (the
/// write-intent resolver is the node's, not the listener's:
/// [`crate::native::Native::new`]).
pub async fn serve(opts: S3Options, native: &crate::native::Native) -> Result<Listener, S3Error> {
    let keys = native.keys().clone();
    if !keys.has_root() {
        return Err(S3Error::NoRootKey);
    }
    let cluster = native.cluster().clone();
    let job_s3 = || {
        let mut s3 = StrataS3::new(
            cluster.clone(),
            opts.max_object_size,
            opts.admin_token.clone(),
        );
        s3.listing_index = opts.listing_index;
        s3
    };
    let mut jobs = Vec::new();
    if let Some(after) = opts.abandoned_uploads_after {
        jobs.push(crate::jobs::sweeper(job_s3(), after));
    }
    let mut s3 = job_s3();
    s3.keys = Some(keys.clone());
    s3.region = opts.region.clone();
    let mut builder = S3ServiceBuilder::new(s3);
    builder.set_auth(KeyAuth(keys.clone()));
    builder.set_access(KeyAccess(keys));
    builder.set_host(Domains(opts.domains));
    builder.set_config(Arc::new(s3s::config::StaticConfigProvider::new(Arc::new(
        form_limits(),
    ))));
    let service = RequestIds::new(builder.build(), opts.sigv2, opts.body_timeout);
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|source| S3Error::Listen {
            addr: opts.listen.clone(),
            source,
        })?;
    Ok(Listener {
        listener,
        service,
        jobs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_documents_get_the_request_id_once() {
        let doc = b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code></Error>";
        let with = with_request_id(doc, "00000000000000AB").expect("an error");
        assert_eq!(
            &with[..],
            &b"<?xml version=\"1.0\"?><Error><Code>NoSuchKey</Code><RequestId>00000000000000AB</RequestId></Error>"[..]
        );
        assert!(with_request_id(&with, "X").is_none());
        assert!(with_request_id(b"<ListBucketResult/>", "X").is_none());
    }

    #[test]
    fn hosts_of_the_domain_name_buckets() {
        let d = Domains(vec!["localhost".into(), "s3.example.com".into()]);
        let bucket = |h: &'static str| d.parse_host_header(h).unwrap().bucket().map(str::to_string);
        assert_eq!(bucket("photos.localhost:8490").as_deref(), Some("photos"));
        assert_eq!(bucket("a.b.s3.example.com").as_deref(), Some("a.b"));
        assert_eq!(bucket("localhost:8490"), None);
        assert_eq!(bucket("127.0.0.1:8490"), None);
        assert_eq!(bucket("other.example.org"), None);
        assert_eq!(bucket("notlocalhost"), None);
    }
}

#[cfg(test)]
mod log_budget_tests {
    use super::*;

    #[test]
    fn twenty_lines_a_second_then_none_until_the_next() {
        let b = LogBudget(std::sync::atomic::AtomicU64::new(0));
        let got: Vec<Admit> = (0..25).map(|_| b.admit_at(1_000)).collect();
        assert!(got[..19].iter().all(|a| *a == Admit::Yes));
        assert_eq!(got[19], Admit::Last);
        assert!(got[20..].iter().all(|a| *a == Admit::No));
        assert_eq!(b.admit_at(1_001), Admit::Yes);
    }
}
