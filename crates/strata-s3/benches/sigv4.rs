//! What AWS Signature Version 4 costs per request on Strata's S3 path
//! (docs/benchmarks.md, "S3 API"): the same requests served in-process by
//! the s3s service Strata uses, against an S3 implementation that does
//! nothing (so only the protocol layer is timed), once signed and checked
//! and once unsigned with signing off. The difference is the verification:
//! the canonical request, the signing key's four HMACs, the signature
//! compare and, for a signed payload, the body's SHA-256.
//!
//! `cargo bench -p strata-s3 --bench sigv4` (one thread; prints µs per
//! request: the fastest of 15 batches of 2,000, signed and unsigned
//! batches taking turns).
//!
//! The requests are signed here by the reference algorithm (AWS's SigV4
//! documentation) with `hmac` and `sha2`, the crates s3s itself verifies
//! with; every signed request is checked to be answered 200, so a wrong
//! signature cannot pass for a fast one.

use std::time::{Duration, Instant};

use bytes::Bytes;
use hmac::{Hmac, KeyInit, Mac};
use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::SimpleAuth;
use s3s::dto::{GetObjectInput, GetObjectOutput, PutObjectInput, PutObjectOutput};
use s3s::service::{S3Service, S3ServiceBuilder};
use s3s::{S3Request, S3Response, S3Result, S3};
use sha2::{Digest, Sha256};

const ACCESS: &str = "BENCHACCESSKEY";
const SECRET: &str = "bench-secret-key-0123456789abcdef";
const HOST: &str = "127.0.0.1:8490";
const REGION: &str = "us-east-1";

/// An S3 service that stores nothing: GET answers an empty body, PUT
/// reads the body (so a signed payload's hash is checked) and drops it.
struct Null;

#[async_trait::async_trait]
impl S3 for Null {
    async fn get_object(
        &self,
        _req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        Ok(S3Response::new(GetObjectOutput {
            content_length: Some(0),
            ..Default::default()
        }))
    }

    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        use futures_util::StreamExt;
        if let Some(mut body) = req.input.body {
            while let Some(chunk) = body.next().await {
                chunk.map_err(|e| s3s::s3_error!(IncompleteBody, "{e}"))?;
            }
        }
        Ok(S3Response::new(PutObjectOutput::default()))
    }
}

/// Lets unsigned requests in (the baseline service has no signing).
struct Open;

#[async_trait::async_trait]
impl S3Access for Open {
    async fn check(&self, _cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        Ok(())
    }
}

fn hex_sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn hmac(key: &[u8], msg: &str) -> Vec<u8> {
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("any key length");
    m.update(msg.as_bytes());
    m.finalize().into_bytes().to_vec()
}

struct Clock {
    amz: String,
    date: String,
}

fn now() -> Clock {
    let t = time::OffsetDateTime::now_utc();
    let amz = format!(
        "{:04}{:02}{:02}T{:02}{:02}{:02}Z",
        t.year(),
        t.month() as u8,
        t.day(),
        t.hour(),
        t.minute(),
        t.second()
    );
    Clock {
        date: amz[..8].to_string(),
        amz,
    }
}

fn signature(c: &Clock, canonical: &str) -> String {
    let scope = format!("{}/{REGION}/s3/aws4_request", c.date);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        c.amz,
        hex_sha(canonical.as_bytes())
    );
    let k = hmac(format!("AWS4{SECRET}").as_bytes(), &c.date);
    let k = hmac(&k, REGION);
    let k = hmac(&k, "s3");
    let k = hmac(&k, "aws4_request");
    hex::encode(hmac(&k, &to_sign))
}

/// A request: method, path and query, headers, body.
#[derive(Clone)]
struct Req {
    method: http::Method,
    uri: String,
    headers: Vec<(&'static str, String)>,
    body: Bytes,
}

impl Req {
    fn build(&self) -> http::Request<s3s::Body> {
        let mut b = http::Request::builder()
            .method(self.method.clone())
            .uri(&self.uri);
        for (k, v) in &self.headers {
            b = b.header(*k, v);
        }
        b.body(s3s::Body::from(self.body.clone())).expect("request")
    }
}

/// A request signed in its Authorization header; `signed_payload`: the
/// body's SHA-256 is signed (and so checked), else UNSIGNED-PAYLOAD.
fn header_signed(method: http::Method, path: &str, body: Bytes, signed_payload: bool) -> Req {
    let c = now();
    let payload = if signed_payload {
        hex_sha(&body)
    } else {
        "UNSIGNED-PAYLOAD".to_string()
    };
    let mut headers = vec![
        ("host", HOST.to_string()),
        ("x-amz-content-sha256", payload.clone()),
        ("x-amz-date", c.amz.clone()),
    ];
    if !body.is_empty() {
        headers.push(("content-length", body.len().to_string()));
    }
    headers.sort();
    let canonical_headers: String = headers.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = headers.iter().map(|(k, _)| *k).collect();
    let signed = signed.join(";");
    let canonical = format!("{method}\n{path}\n\n{canonical_headers}\n{signed}\n{payload}");
    let sig = signature(&c, &canonical);
    headers.push((
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={ACCESS}/{}/{REGION}/s3/aws4_request, SignedHeaders={signed}, Signature={sig}",
            c.date
        ),
    ));
    Req {
        method,
        uri: path.to_string(),
        headers,
        body,
    }
}

/// A presigned GET of `path` (the signature in the query string).
fn presigned(path: &str) -> Req {
    let c = now();
    let cred = format!("{ACCESS}%2F{}%2F{REGION}%2Fs3%2Faws4_request", c.date);
    let query = format!(
        "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential={cred}&X-Amz-Date={}&X-Amz-Expires=300&X-Amz-SignedHeaders=host",
        c.amz
    );
    let canonical = format!("GET\n{path}\n{query}\nhost:{HOST}\n\nhost\nUNSIGNED-PAYLOAD");
    let sig = signature(&c, &canonical);
    Req {
        method: http::Method::GET,
        uri: format!("{path}?{query}&X-Amz-Signature={sig}"),
        headers: vec![("host", HOST.to_string())],
        body: Bytes::new(),
    }
}

/// The same request without any signature.
fn unsigned(method: http::Method, path: &str, body: Bytes) -> Req {
    let mut headers = vec![("host", HOST.to_string())];
    if !body.is_empty() {
        headers.push(("content-length", body.len().to_string()));
    }
    Req {
        method,
        uri: path.to_string(),
        headers,
        body,
    }
}

/// µs per request of `req` through `svc` and of `plain` through `open`:
/// batches of `n` of each in turn, the fastest batch of each (the least
/// disturbed by whatever else the machine runs).
async fn time(svc: &S3Service, req: &Req, open: &S3Service, plain: &Req, n: u32) -> (f64, f64) {
    // Warm up, and check both are served.
    for (s, r) in [(svc, req), (open, plain)] {
        let a = s.call(r.build()).await.expect("served");
        assert_eq!(a.status(), http::StatusCode::OK, "{} {}", r.method, r.uri);
    }
    let (mut best_s, mut best_u) = (Duration::MAX, Duration::MAX);
    for _ in 0..BATCHES {
        for (s, r, best) in [(svc, req, &mut best_s), (open, plain, &mut best_u)] {
            let t = Instant::now();
            for _ in 0..n {
                let a = s.call(r.build()).await.expect("served");
                debug_assert_eq!(a.status(), http::StatusCode::OK);
                drop(a);
            }
            *best = (*best).min(t.elapsed());
        }
    }
    let us = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(n);
    (us(best_s), us(best_u))
}

/// Batches of each request timed.
const BATCHES: usize = 15;

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    rt.block_on(async {
        let mut b = S3ServiceBuilder::new(Null);
        b.set_auth(SimpleAuth::from_single(ACCESS, SECRET));
        let signed_svc = b.build();
        let mut b = S3ServiceBuilder::new(Null);
        b.set_access(Open);
        let open_svc = b.build();

        let n = 2_000;
        let path = "/bench/some/object-key.bin";
        let kib = Bytes::from(vec![7u8; 1024]);
        let kib64 = Bytes::from(vec![7u8; 64 * 1024]);
        let cases: Vec<(&str, Req, Req)> = vec![
            (
                "GET, Authorization header",
                header_signed(http::Method::GET, path, Bytes::new(), true),
                unsigned(http::Method::GET, path, Bytes::new()),
            ),
            (
                "GET, presigned URL",
                presigned(path),
                unsigned(http::Method::GET, path, Bytes::new()),
            ),
            (
                "PUT 1 KiB, header, UNSIGNED-PAYLOAD",
                header_signed(http::Method::PUT, path, kib.clone(), false),
                unsigned(http::Method::PUT, path, kib.clone()),
            ),
            (
                "PUT 1 KiB, header, signed payload (SHA-256 of the body)",
                header_signed(http::Method::PUT, path, kib.clone(), true),
                unsigned(http::Method::PUT, path, kib),
            ),
            (
                "PUT 64 KiB, header, signed payload (SHA-256 of the body)",
                header_signed(http::Method::PUT, path, kib64.clone(), true),
                unsigned(http::Method::PUT, path, kib64),
            ),
        ];
        println!(
            "| request | signed, µs/request | unsigned, µs/request | SigV4 cost, µs/request |"
        );
        println!("| --- | ---: | ---: | ---: |");
        for (name, signed, plain) in cases {
            let (s, u) = time(&signed_svc, &signed, &open_svc, &plain, n).await;
            println!("| {name} | {s:.2} | {u:.2} | {:.2} |", s - u);
        }
    });
}
