//! The S3 kinds' signatures: AWS Signature Version 4 by the AWS SDK's
//! own signer (`aws-sigv4`), with the settings the SDK's S3 client signs
//! with, the nodes' S3 root key as the credentials. A request is built
//! here as an `http::Request` (its target percent-encoded as SigV4
//! canonicalises it), signed, and sent by the harness's HTTP client
//! ([`crate::http::send`]), which shows exactly what the node answered.

use crate::http::{self as wire, Resp};
use aws_credential_types::Credentials;
use aws_sigv4::http_request::{
    sign, PayloadChecksumKind, PercentEncodingMode, SignableBody, SignableRequest, SigningError,
    SigningSettings, UriPathNormalizationMode,
};
use aws_sigv4::sign::v4;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use std::time::{Duration, SystemTime};

/// The region every request is signed for (the nodes take any region;
/// the AWS tools default to this one).
pub const REGION: &str = "us-east-1";
/// The service name of the credential scope.
const SERVICE: &str = "s3";

/// What SigV4 percent-encodes in a query: everything but its unreserved
/// characters (`A-Z a-z 0-9 - _ . ~`).
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');
/// What it percent-encodes in a path: the same, `/` kept.
const PATH: &AsciiSet = &QUERY.remove(b'/');

/// Why a request could not be signed (a mistake of the harness: the
/// requests it makes are always signable).
#[derive(Debug, thiserror::Error)]
pub enum SignError {
    /// The method, target or a header is not valid HTTP.
    #[error("the request is not valid HTTP: {0}")]
    Request(#[from] http::Error),
    /// A header value is not visible ASCII.
    #[error("a header value is not visible ASCII: {0}")]
    Header(#[from] http::header::ToStrError),
    /// The signing parameters are incomplete.
    #[error("the signing parameters: {0}")]
    Params(#[from] v4::signing_params::BuildError),
    /// aws-sigv4 refused the request.
    #[error("signing: {0}")]
    Signing(#[from] SigningError),
}

/// An access key and the SigV4 signature of requests with it.
#[derive(Clone)]
pub struct Signer {
    credentials: Credentials,
    /// How long a request may take ([`wire::request`]).
    pub timeout: Duration,
}

/// The settings aws-sdk-s3 signs with: the path as it is sent (S3 object
/// names are neither normalised nor encoded twice) and the payload's
/// SHA-256 in `x-amz-content-sha256` (S3 requires the header).
fn s3_settings() -> SigningSettings {
    let mut s = SigningSettings::default();
    s.percent_encoding_mode = PercentEncodingMode::Single;
    s.uri_path_normalization_mode = UriPathNormalizationMode::Disabled;
    s.payload_checksum_kind = PayloadChecksumKind::XAmzSha256;
    s
}

impl Signer {
    /// A signer with the access key `access` and its secret.
    pub fn new(access: &str, secret: &str, timeout: Duration) -> Signer {
        Signer {
            credentials: Credentials::new(access, secret, None, None, "strata-torture"),
            timeout,
        }
    }

    /// `METHOD path?query` to `addr` (host and port) with `body` and the
    /// headers `extra`, signed as of `time`: the request with its
    /// `x-amz-date`, `x-amz-content-sha256` and `authorization` headers.
    /// `host`, the `extra` headers and `x-amz-*` are signed.
    #[allow(clippy::too_many_arguments)]
    pub fn signed<'b>(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &'b [u8],
        time: SystemTime,
    ) -> Result<http::Request<&'b [u8]>, SignError> {
        let mut target = utf8_percent_encode(path, PATH).to_string();
        for (i, (k, v)) in query.iter().enumerate() {
            target.push(if i == 0 { '?' } else { '&' });
            target.extend(utf8_percent_encode(k, QUERY));
            target.push('=');
            target.extend(utf8_percent_encode(v, QUERY));
        }
        let mut b = http::Request::builder()
            .method(method)
            .uri(format!("http://{addr}{target}"));
        for (k, v) in extra {
            b = b.header(*k, v.as_str());
        }
        let mut req = b.body(body)?;
        let identity = self.credentials.clone().into();
        let params = v4::SigningParams::builder()
            .identity(&identity)
            .region(REGION)
            .name(SERVICE)
            .time(time)
            .settings(s3_settings())
            .build()?
            .into();
        let uri = req.uri().to_string();
        let headers = req
            .headers()
            .iter()
            .map(|(k, v)| Ok((k.as_str(), v.to_str()?)))
            .collect::<Result<Vec<_>, http::header::ToStrError>>()?;
        let signable = SignableRequest::new(
            req.method().as_str(),
            uri,
            headers.into_iter(),
            SignableBody::Bytes(body),
        )?;
        let (instructions, _signature) = sign(signable, &params)?.into_parts();
        instructions.apply_to_request_http1x(&mut req);
        Ok(req)
    }

    /// One signed request to `addr`, signed now. `Err` as
    /// [`wire::request`]'s (no complete answer), or of kind `InvalidInput`
    /// when the request could not be signed.
    pub fn request(
        &self,
        addr: &str,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        let req = self
            .signed(addr, method, path, query, extra, body, SystemTime::now())
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
        wire::send(addr, &req, self.timeout)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of the S3 documentation's "Signature calculations for
    /// the Authorization header" (the example key, examplebucket, 24 May
    /// 2013 00:00:00 UTC): the signed headers and the signature each
    /// example gives.
    fn example(
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> (String, String) {
        let s = Signer::new(
            "AKIAIOSFODNN7EXAMPLE",
            "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            Duration::from_secs(1),
        );
        let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_369_353_600);
        let req = s
            .signed(
                "examplebucket.s3.amazonaws.com",
                method,
                path,
                query,
                extra,
                body,
                time,
            )
            .expect("signed");
        assert_eq!(req.headers()["x-amz-date"], "20130524T000000Z");
        let auth = req.headers()["authorization"].to_str().expect("ASCII");
        let field = |name: &str| {
            auth.split(&format!("{name}="))
                .nth(1)
                .and_then(|r| r.split([',', ' ']).next())
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(
            field("Credential"),
            "AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
        );
        (field("SignedHeaders"), field("Signature"))
    }

    #[test]
    fn get_object_with_a_range_signs_as_the_s3_documentation() {
        let (signed, sig) = example(
            "GET",
            "/test.txt",
            &[],
            &[("range", "bytes=0-9".into())],
            b"",
        );
        assert_eq!(signed, "host;range;x-amz-content-sha256;x-amz-date");
        assert_eq!(
            sig,
            "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn put_object_with_an_encoded_name_signs_as_the_s3_documentation() {
        let (signed, sig) = example(
            "PUT",
            "/test$file.text",
            &[],
            &[
                ("date", "Fri, 24 May 2013 00:00:00 GMT".into()),
                ("x-amz-storage-class", "REDUCED_REDUNDANCY".into()),
            ],
            b"Welcome to Amazon S3.",
        );
        assert_eq!(
            signed,
            "date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class"
        );
        assert_eq!(
            sig,
            "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"
        );
    }

    #[test]
    fn list_objects_with_a_query_signs_as_the_s3_documentation() {
        let (signed, sig) = example("GET", "/", &[("max-keys", "2"), ("prefix", "J")], &[], b"");
        assert_eq!(signed, "host;x-amz-content-sha256;x-amz-date");
        assert_eq!(
            sig,
            "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn the_target_is_percent_encoded_as_sigv4_canonicalises_it() {
        let s = Signer::new("AK", "SK", Duration::from_secs(1));
        let req = s
            .signed(
                "127.0.0.1:9000",
                "GET",
                "/b/a b/c+d~e",
                &[("continuation-token", "x/y+z="), ("list-type", "2")],
                &[],
                b"",
                SystemTime::now(),
            )
            .expect("signed");
        assert_eq!(
            req.uri().path_and_query().map(|p| p.as_str()),
            Some("/b/a%20b/c%2Bd~e?continuation-token=x%2Fy%2Bz%3D&list-type=2")
        );
        // The body's hash is what the node checks the body against.
        assert_eq!(
            req.headers()["x-amz-content-sha256"],
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
