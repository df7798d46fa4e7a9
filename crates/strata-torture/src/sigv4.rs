//! The S3 kinds' signatures: AWS Signature Version 4 computed by the
//! harness itself, with `hmac` and `sha2` (the crates s3s verifies with).

use crate::http::{self, Resp};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The region every request is signed for.
const REGION: &str = "us-east-1";

/// An access key and the SigV4 signature of requests with it.
#[derive(Clone)]
pub struct Signer {
    pub access: String,
    pub secret: String,
    /// How long a request may take ([`http::request`]).
    pub timeout: Duration,
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length: new_from_slice cannot fail here.
    match <Hmac<Sha256> as KeyInit>::new_from_slice(key) {
        Ok(mut m) => {
            m.update(msg);
            m.finalize().into_bytes().to_vec()
        }
        Err(_) => Vec::new(),
    }
}

/// RFC 3986 percent-encoding as SigV4 wants it (unreserved characters as
/// they are; `/` too when `slash`).
fn uri_encode(s: &str, slash: bool) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) || (slash && b == b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `YYYYMMDDTHHMMSSZ` of now (UTC).
fn amz_date() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs()) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

impl Signer {
    /// Signs `METHOD path?query` to `host` with `body`: the request target
    /// and the headers to send (host, x-amz-date, x-amz-content-sha256,
    /// authorization, and `extra`, which are signed too).
    pub fn sign(
        &self,
        method: &str,
        host: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> (String, Vec<(&'static str, String)>) {
        let date = amz_date();
        let day = &date[..8];
        let payload = hex::encode(Sha256::digest(body));
        let mut q: Vec<(String, String)> = query
            .iter()
            .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
            .collect();
        q.sort();
        let qs = q
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("&");
        let uri = uri_encode(path, true);
        let mut hs: Vec<(String, String)> = vec![
            ("host".into(), host.to_string()),
            ("x-amz-content-sha256".into(), payload.clone()),
            ("x-amz-date".into(), date.clone()),
        ];
        for (k, v) in extra {
            hs.push((k.to_ascii_lowercase(), v.trim().to_string()));
        }
        hs.sort();
        let canonical_headers: String = hs.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
        let signed = hs
            .iter()
            .map(|(k, _)| k.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let canonical = format!("{method}\n{uri}\n{qs}\n{canonical_headers}\n{signed}\n{payload}");
        let scope = format!("{day}/{REGION}/s3/aws4_request");
        let to_sign = format!(
            "AWS4-HMAC-SHA256\n{date}\n{scope}\n{}",
            hex::encode(Sha256::digest(canonical.as_bytes()))
        );
        let k = hmac(format!("AWS4{}", self.secret).as_bytes(), day.as_bytes());
        let k = hmac(&k, REGION.as_bytes());
        let k = hmac(&k, b"s3");
        let k = hmac(&k, b"aws4_request");
        let sig = hex::encode(hmac(&k, to_sign.as_bytes()));
        let auth = format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={sig}",
            self.access
        );
        let mut headers: Vec<(&'static str, String)> = vec![
            ("x-amz-content-sha256", payload),
            ("x-amz-date", date),
            ("Authorization", auth),
        ];
        for (k, v) in extra {
            // The extra headers are few and fixed names of this module.
            let name: &'static str = match k.to_ascii_lowercase().as_str() {
                "content-md5" => "Content-MD5",
                "content-type" => "Content-Type",
                _ => continue,
            };
            headers.push((name, v.clone()));
        }
        let target = if qs.is_empty() {
            uri
        } else {
            format!("{uri}?{qs}")
        };
        (target, headers)
    }

    /// One signed request to `addr`.
    pub fn request(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        let (target, headers) = self.sign(method, addr, path, query, extra, body);
        http::request(addr, method, &target, &headers, body, self.timeout)
    }
}
