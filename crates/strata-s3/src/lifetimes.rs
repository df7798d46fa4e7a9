//! How long a signature is good for, checked on a request's head before
//! s3s verifies the signature itself (docs/security.md, "Signature
//! lifetimes"):
//!
//! - **SigV2** (`Authorization: AWS KEY:SIG`, or a presigned URL with
//!   `AWSAccessKeyId` and `Signature`) is refused unless the listener was
//!   started with it on (`strata server --s3-sigv2`): it signs no body, so
//!   a captured PUT could be replayed with any bytes, and s3s checks no
//!   date on it. When it is on, a header-signed request's `x-amz-date` (or
//!   `Date`) must be within [`MAX_SKEW`] of the server's clock, and a
//!   presigned URL's `Expires` at most [`MAX_PRESIGNED`] ahead.
//! - **SigV4 presigned URLs**: `X-Amz-Expires` from 1 to [`MAX_PRESIGNED`]
//!   seconds, as S3 (above a week is a 400, a negative or zero one a 403).
//!   s3s checks the expiry itself and the 15-minute clock skew of
//!   header-signed SigV4 requests.

use http::{HeaderMap, StatusCode, Uri};

/// The clock skew a signed request may have (S3: 15 minutes).
pub const MAX_SKEW: i64 = 15 * 60;

/// The longest a presigned URL may be valid (S3: 7 days).
pub const MAX_PRESIGNED: i64 = 7 * 24 * 3600;

/// Why a request's signature is refused before it is checked: the HTTP
/// status, the S3 error code and the message of the error document.
#[derive(Debug, PartialEq)]
pub struct Refusal {
    /// The HTTP status.
    pub status: StatusCode,
    /// The S3 error code (`<Code>`).
    pub code: &'static str,
    /// The error document's `<Message>`.
    pub message: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Refusal {
        Refusal {
            status,
            code,
            message: message.into(),
        }
    }

    /// The S3 error document of the refusal.
    pub fn xml(&self) -> String {
        let esc = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>{}</Code><Message>{}</Message></Error>",
            self.code,
            esc(&self.message)
        )
    }
}

/// The value of query parameter `name` (as written: the parameters
/// checked here are digits).
fn query_value<'a>(query: &'a str, name: &str) -> Option<&'a str> {
    query.split('&').find_map(|p| match p.split_once('=') {
        Some((k, v)) if k == name => Some(v),
        None if p == name => Some(""),
        _ => None,
    })
}

/// Checks the lifetime of the request's signature at `now` (Unix
/// seconds); `sigv2` is whether SigV2 is accepted at all.
pub fn check(uri: &Uri, headers: &HeaderMap, now: i64, sigv2: bool) -> Result<(), Refusal> {
    let query = uri.query().unwrap_or("");
    let auth = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| v.as_bytes())
        .unwrap_or(b"");
    let v2_header = auth.starts_with(b"AWS ");
    let v2_query =
        query_value(query, "AWSAccessKeyId").is_some() && query_value(query, "Signature").is_some();
    if v2_header || v2_query {
        if !sigv2 {
            return Err(Refusal::new(
                StatusCode::BAD_REQUEST,
                "InvalidRequest",
                "The authorization mechanism you have provided is not supported. Please use AWS4-HMAC-SHA256. (SigV2 is off on this server: strata server --s3-sigv2 turns it on)",
            ));
        }
        if v2_header {
            let date = headers
                .get("x-amz-date")
                .or_else(|| headers.get(http::header::DATE))
                .and_then(|v| v.to_str().ok())
                .and_then(|s| httpdate::parse_http_date(s).ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_secs() as i64);
            let Some(date) = date else {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    "AccessDenied",
                    "AWS authentication requires a valid Date or x-amz-date header",
                ));
            };
            if (date - now).abs() > MAX_SKEW {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    "RequestTimeTooSkewed",
                    "The difference between the request time and the current time is too large.",
                ));
            }
        } else {
            let expires = query_value(query, "Expires").and_then(|v| v.parse::<i64>().ok());
            match expires {
                None => {
                    return Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        "AccessDenied",
                        "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters",
                    ))
                }
                Some(e) if e - now > MAX_PRESIGNED => {
                    return Err(Refusal::new(
                        StatusCode::BAD_REQUEST,
                        "AuthorizationQueryParametersError",
                        format!("Expires must be at most a week ({MAX_PRESIGNED} seconds) from now"),
                    ))
                }
                Some(_) => {}
            }
        }
        return Ok(());
    }
    if query_value(query, "X-Amz-Signature").is_some() {
        let expires = query_value(query, "X-Amz-Expires").map(|v| v.parse::<i64>());
        match expires {
            Some(Ok(e)) if e > MAX_PRESIGNED => {
                return Err(Refusal::new(
                    StatusCode::BAD_REQUEST,
                    "AuthorizationQueryParametersError",
                    format!(
                    "X-Amz-Expires must be less than a week (in seconds) that is; {MAX_PRESIGNED}"
                ),
                ))
            }
            Some(Ok(e)) if e <= 0 => {
                return Err(Refusal::new(
                    StatusCode::FORBIDDEN,
                    "AccessDenied",
                    "Request has expired",
                ))
            }
            Some(Ok(_)) => {}
            // Missing or not a number: s3s answers it as S3 does.
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_796_300_000;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, v.parse().unwrap());
        }
        h
    }

    fn http_date(t: i64) -> String {
        httpdate::fmt_http_date(std::time::UNIX_EPOCH + std::time::Duration::from_secs(t as u64))
    }

    #[test]
    fn sigv2_is_refused_when_off_in_both_forms() {
        let h = headers(&[
            ("authorization", "AWS AKID:c2ln"),
            ("date", &http_date(NOW)),
        ]);
        let r = check(&"/b/k".parse().unwrap(), &h, NOW, false).unwrap_err();
        assert_eq!(
            (r.status, r.code),
            (StatusCode::BAD_REQUEST, "InvalidRequest")
        );
        let q: Uri = "/b/k?AWSAccessKeyId=A&Expires=1796300100&Signature=x"
            .parse()
            .unwrap();
        assert_eq!(
            check(&q, &HeaderMap::new(), NOW, false).unwrap_err().code,
            "InvalidRequest"
        );
        // SigV4 is not SigV2.
        let v4 = headers(&[("authorization", "AWS4-HMAC-SHA256 Credential=A/...")]);
        assert!(check(&"/b/k".parse().unwrap(), &v4, NOW, false).is_ok());
    }

    #[test]
    fn sigv2_headers_must_be_dated_within_fifteen_minutes() {
        let at = |t: i64| {
            let h = headers(&[("authorization", "AWS AKID:c2ln"), ("date", &http_date(t))]);
            check(&"/b/k".parse().unwrap(), &h, NOW, true).map_err(|r| r.code)
        };
        assert_eq!(at(NOW), Ok(()));
        assert_eq!(at(NOW - MAX_SKEW), Ok(()));
        assert_eq!(at(NOW + MAX_SKEW), Ok(()));
        assert_eq!(at(NOW - MAX_SKEW - 1), Err("RequestTimeTooSkewed"));
        assert_eq!(at(NOW + MAX_SKEW + 1), Err("RequestTimeTooSkewed"));
        assert_eq!(at(NOW - 10 * 365 * 86_400), Err("RequestTimeTooSkewed"));
        // x-amz-date is taken before Date.
        let h = headers(&[
            ("authorization", "AWS AKID:c2ln"),
            ("date", &http_date(NOW)),
            ("x-amz-date", &http_date(NOW - 3600)),
        ]);
        assert_eq!(
            check(&"/b/k".parse().unwrap(), &h, NOW, true)
                .unwrap_err()
                .code,
            "RequestTimeTooSkewed"
        );
        let h = headers(&[("authorization", "AWS AKID:c2ln"), ("date", "yesterday")]);
        assert_eq!(
            check(&"/b/k".parse().unwrap(), &h, NOW, true)
                .unwrap_err()
                .code,
            "AccessDenied"
        );
    }

    #[test]
    fn presigned_urls_last_at_most_a_week() {
        let v2 = |e: i64| {
            let q: Uri = format!("/b/k?AWSAccessKeyId=A&Expires={e}&Signature=x")
                .parse()
                .unwrap();
            check(&q, &HeaderMap::new(), NOW, true).map_err(|r| (r.status.as_u16(), r.code))
        };
        assert_eq!(v2(NOW + MAX_PRESIGNED), Ok(()));
        assert_eq!(
            v2(NOW + MAX_PRESIGNED + 1),
            Err((400, "AuthorizationQueryParametersError"))
        );
        assert_eq!(
            v2(4_102_444_800),
            Err((400, "AuthorizationQueryParametersError"))
        );
        let v4 = |e: &str| {
            let q: Uri = format!(
                "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires={e}&X-Amz-Signature=ab"
            )
            .parse()
            .unwrap();
            check(&q, &HeaderMap::new(), NOW, false).map_err(|r| (r.status.as_u16(), r.code))
        };
        assert_eq!(v4("604800"), Ok(()));
        assert_eq!(v4("1"), Ok(()));
        assert_eq!(
            v4("604801"),
            Err((400, "AuthorizationQueryParametersError"))
        );
        assert_eq!(
            v4("4294967295"),
            Err((400, "AuthorizationQueryParametersError"))
        );
        assert_eq!(v4("-1"), Err((403, "AccessDenied")));
        assert_eq!(v4("0"), Err((403, "AccessDenied")));
    }

    #[test]
    fn refusals_are_s3_error_documents() {
        let r = Refusal::new(StatusCode::FORBIDDEN, "AccessDenied", "a < b & c");
        assert_eq!(
            r.xml(),
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>AccessDenied</Code><Message>a &lt; b &amp; c</Message></Error>"
        );
    }
}
