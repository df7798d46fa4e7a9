//! What S3 keeps with an object besides its bytes (ETag, content headers,
//! user metadata: [`ObjectMeta`], stored in the object's head record),
//! the checksums a client may send with a body, and conditional requests.
//! Pure functions of headers and values; the service calls them.

use base64::Engine;
use http::HeaderMap;
use md5::{Digest, Md5};
use s3s::checksum::ChecksumHasher;
use s3s::crypto::Checksum as _;
use s3s::dto::{ETag, ETagCondition, Timestamp};
use s3s::{s3_error, S3Result, TrailingHeaders};
use strata_proto::ObjectMeta;

/// The content headers S3 stores with an object and answers on GET and
/// HEAD, by lower-case name.
pub const CONTENT_HEADERS: [&str; 6] = [
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-type",
    "expires",
];

/// The prefix of user metadata headers.
const USER_PREFIX: &str = "x-amz-meta-";

/// S3's limit on user metadata: names and values together.
pub const MAX_USER_META: usize = 2048;

/// The checksum algorithms S3 defines, by their header's suffix.
const ALGORITHMS: [&str; 5] = ["crc32", "crc32c", "crc64nvme", "sha1", "sha256"];

fn text(v: &http::HeaderValue) -> String {
    String::from_utf8_lossy(v.as_bytes()).into_owned()
}

/// The content headers and user metadata of a request that stores an
/// object (PutObject, CreateMultipartUpload, CopyObject with REPLACE);
/// MetadataTooLarge beyond S3's 2 KiB of user metadata.
pub fn from_headers(h: &HeaderMap) -> S3Result<ObjectMeta> {
    let mut meta = ObjectMeta::default();
    for name in CONTENT_HEADERS {
        let Some(v) = h.get(name) else { continue };
        let mut v = text(v);
        if name == "content-encoding"
            && v.split(',')
                .any(|e| e.trim().eq_ignore_ascii_case("aws-chunked"))
        {
            // `aws-chunked` describes the request's framing, not the object.
            v = v
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty() && !e.eq_ignore_ascii_case("aws-chunked"))
                .collect::<Vec<_>>()
                .join(",");
            if v.is_empty() {
                continue;
            }
        }
        meta.headers.insert(name.to_string(), v);
    }
    let mut size = 0;
    for (name, v) in h {
        if let Some(user) = name.as_str().strip_prefix(USER_PREFIX) {
            let v = text(v);
            size += user.len() + v.len();
            meta.user.insert(user.to_string(), v);
        }
    }
    if size > MAX_USER_META {
        return Err(s3_error!(
            MetadataTooLarge,
            "Your metadata headers exceed the maximum allowed metadata size of {MAX_USER_META} bytes"
        ));
    }
    Ok(meta)
}

/// Refuses (501 NotImplemented) a write that asks for what Strata does not
/// do, so that it never succeeds without doing it: server-side encryption,
/// object lock, tagging, website redirects, grants, and canned object ACLs
/// other than the private ones (objects are readable only as their bucket
/// is).
pub fn refuse_unsupported_write(h: &HeaderMap) -> S3Result<()> {
    for name in h.keys() {
        let n = name.as_str();
        let what = if n.starts_with("x-amz-server-side-encryption")
            || n.starts_with("x-amz-copy-source-server-side-encryption")
        {
            "server-side encryption"
        } else if n.starts_with("x-amz-object-lock-") {
            "object lock"
        } else if n == "x-amz-tagging" {
            "object tagging"
        } else if n == "x-amz-website-redirect-location" {
            "website redirects"
        } else if n.starts_with("x-amz-grant-") {
            "ACL grants"
        } else {
            continue;
        };
        return Err(s3_error!(NotImplemented, "{what} is not supported ({n})"));
    }
    if let Some(acl) = h.get("x-amz-acl") {
        let acl = text(acl);
        // private and public-read are checked against the bucket
        // (StrataS3::object_acl_fits): an object is as readable as its
        // bucket, nothing else.
        if !matches!(
            acl.as_str(),
            "private" | "public-read" | "bucket-owner-full-control" | "bucket-owner-read"
        ) {
            return Err(s3_error!(
                NotImplemented,
                "object ACL {acl} is not supported (objects are readable as their bucket is)"
            ));
        }
    }
    Ok(())
}

/// Refuses a read that names a customer encryption key (no object is
/// encrypted).
pub fn refuse_unsupported_read(h: &HeaderMap) -> S3Result<()> {
    match h
        .keys()
        .find(|n| n.as_str().starts_with("x-amz-server-side-encryption"))
    {
        Some(n) => Err(s3_error!(
            NotImplemented,
            "server-side encryption is not supported ({n})"
        )),
        None => Ok(()),
    }
}

/// What a body must hash to: the Content-MD5 and `x-amz-checksum-*`
/// values sent as headers, or named by `x-amz-trailer` and sent after an
/// aws-chunked body.
#[derive(Default)]
pub struct Checks {
    md5: Option<Vec<u8>>,
    /// Algorithm, and its value when sent as a header (else a trailer).
    sums: Vec<(&'static str, Option<String>)>,
    trailers: Option<TrailingHeaders>,
}

impl Checks {
    /// The checks a request asks for; InvalidDigest if its Content-MD5 is
    /// not base64.
    pub fn from_request(h: &HeaderMap, trailers: Option<TrailingHeaders>) -> S3Result<Checks> {
        let md5 = match h.get("content-md5") {
            None => None,
            Some(v) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(v.as_bytes())
                    .ok()
                    .filter(|d| d.len() == 16)
                    .ok_or_else(|| {
                        s3_error!(InvalidDigest, "Content-MD5 is not the base64 of an MD5")
                    })?,
            ),
        };
        let trailer = h
            .get("x-amz-trailer")
            .map(|v| text(v).to_ascii_lowercase())
            .unwrap_or_default();
        let mut sums = Vec::new();
        for algo in ALGORITHMS {
            let name = format!("x-amz-checksum-{algo}");
            if let Some(v) = h.get(name.as_str()) {
                sums.push((algo, Some(text(v))));
            } else if trailer.split(',').any(|t| t.trim() == name) {
                sums.push((algo, None));
            }
        }
        Ok(Checks {
            md5,
            sums,
            trailers,
        })
    }

    /// Checks of nothing (a body copied from stored objects).
    pub fn none() -> Checks {
        Checks::default()
    }

    /// A hasher for one body.
    pub fn hasher(&self) -> Hasher {
        let mut sums = ChecksumHasher::default();
        for (algo, _) in &self.sums {
            match *algo {
                "crc32" => sums.crc32 = Some(Default::default()),
                "crc32c" => sums.crc32c = Some(Default::default()),
                "crc64nvme" => sums.crc64nvme = Some(Default::default()),
                "sha1" => sums.sha1 = Some(s3s::crypto::Sha1::new()),
                _ => sums.sha256 = Some(s3s::crypto::Sha256::new()),
            }
        }
        Hasher {
            md5: Md5::new(),
            sums,
        }
    }

    /// The body's MD5 if it matches every check; BadDigest (or
    /// InvalidRequest for a missing trailer) otherwise. Returns the
    /// verified checksums as `(header name, base64 value)`.
    pub fn verify(&self, h: Hasher) -> S3Result<(Vec<u8>, Sums)> {
        let md5 = h.md5.finalize().to_vec();
        if self.md5.as_ref().is_some_and(|e| *e != md5) {
            return Err(s3_error!(
                BadDigest,
                "The Content-MD5 you specified did not match what we received."
            ));
        }
        let got = h.sums.finalize();
        let mut verified = Vec::new();
        for (algo, sent) in &self.sums {
            let name = format!("x-amz-checksum-{algo}");
            let sent = match sent {
                Some(v) => Some(v.clone()),
                None => self
                    .trailers
                    .as_ref()
                    .and_then(|t| t.read(|h| h.get(name.as_str()).map(text)))
                    .flatten(),
            };
            let Some(sent) = sent else {
                return Err(s3_error!(
                    InvalidRequest,
                    "the trailer {name} announced in x-amz-trailer was not sent"
                ));
            };
            let computed = match *algo {
                "crc32" => got.checksum_crc32.clone(),
                "crc32c" => got.checksum_crc32c.clone(),
                "crc64nvme" => got.checksum_crc64nvme.clone(),
                "sha1" => got.checksum_sha1.clone(),
                _ => got.checksum_sha256.clone(),
            };
            if computed.as_deref() != Some(sent.trim()) {
                return Err(s3_error!(
                    BadDigest,
                    "The {} you specified did not match the calculated checksum.",
                    algo.to_ascii_uppercase()
                ));
            }
            verified.push((name, sent.trim().to_string()));
        }
        Ok((md5, verified))
    }
}

/// Verified checksums: `(header name, base64 value)`.
pub type Sums = Vec<(String, String)>;

/// The running digests of one body.
pub struct Hasher {
    md5: Md5,
    sums: ChecksumHasher,
}

impl Hasher {
    /// Adds the next bytes of the body.
    pub fn update(&mut self, data: &[u8]) {
        self.md5.update(data);
        self.sums.update(data);
    }
}

/// The quoted ETag an object answers with: the stored one (an MD5, or the
/// `-N` one of a multipart upload), else, for objects written over the
/// native API before it listed them, a version tag of the record's stamp
/// that changes with every write (the `-` tells clients it is not an MD5
/// of the bytes). Never the cookie: an ETag is public wherever the object
/// is readable, a cookie is what `--require-cookies` asks of a writer.
pub fn etag(meta: Option<&ObjectMeta>, stamp: u64) -> ETag {
    match meta {
        Some(m) if !m.etag.is_empty() => ETag::Strong(m.etag.clone()),
        _ => ETag::Strong(format!("{stamp:032x}-1")),
    }
}

fn matches(cond: &ETagCondition, etag: &ETag) -> bool {
    match cond {
        ETagCondition::Any => true,
        ETagCondition::ETag(e) => e.value() == etag.value(),
    }
}

fn seconds(t: &Timestamp) -> i64 {
    time::OffsetDateTime::from(t.clone()).unix_timestamp()
}

/// The conditions of a GET or HEAD (or, with `copy`, of a CopyObject's
/// source), evaluated as S3 does (RFC 9110 §13.2.2): If-Match, else
/// If-Unmodified-Since, failing is 412 PreconditionFailed; then
/// If-None-Match, else If-Modified-Since, failing is 304 NotModified (412
/// for a copy source). `modified` is the object's last modification in
/// seconds since the Unix epoch (HTTP dates have whole seconds).
pub struct Conditions<'a> {
    /// If-Match.
    pub if_match: Option<&'a ETagCondition>,
    /// If-None-Match.
    pub if_none_match: Option<&'a ETagCondition>,
    /// If-Modified-Since.
    pub if_modified_since: Option<&'a Timestamp>,
    /// If-Unmodified-Since.
    pub if_unmodified_since: Option<&'a Timestamp>,
}

impl Conditions<'_> {
    /// Ok when the request goes ahead.
    pub fn check(&self, etag: &ETag, modified: i64, copy: bool) -> S3Result<()> {
        let failed = || {
            s3_error!(
                PreconditionFailed,
                "At least one of the pre-conditions you specified did not hold"
            )
        };
        if let Some(c) = self.if_match {
            if !matches(c, etag) {
                return Err(failed());
            }
        } else if let Some(t) = self.if_unmodified_since {
            if modified > seconds(t) {
                return Err(failed());
            }
        }
        let not_modified = || {
            if copy {
                failed()
            } else {
                let mut e = s3_error!(NotModified);
                let mut h = HeaderMap::new();
                if let Ok(v) = etag.to_http_header() {
                    h.insert(http::header::ETAG, v);
                }
                e.set_headers(h);
                e
            }
        };
        if let Some(c) = self.if_none_match {
            if matches(c, etag) {
                return Err(not_modified());
            }
        } else if let Some(t) = self.if_modified_since {
            if modified <= seconds(t) {
                return Err(not_modified());
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use s3s::S3ErrorCode;

    fn ts(secs: i64) -> Timestamp {
        Timestamp::from(std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs as u64))
    }

    fn code(r: S3Result<()>) -> Option<S3ErrorCode> {
        r.err().map(|e| e.code().clone())
    }

    /// The outcome of a GET of an object with ETag `abc` last modified at
    /// second 100.
    fn get(
        if_match: Option<&ETagCondition>,
        if_none_match: Option<&ETagCondition>,
        if_modified_since: Option<&Timestamp>,
        if_unmodified_since: Option<&Timestamp>,
    ) -> Option<S3ErrorCode> {
        let c = Conditions {
            if_match,
            if_none_match,
            if_modified_since,
            if_unmodified_since,
        };
        code(c.check(&ETag::Strong("abc".into()), 100, false))
    }

    #[test]
    fn conditions_follow_s3() {
        use S3ErrorCode::{NotModified, PreconditionFailed};
        let other = ETagCondition::ETag(ETag::Strong("zzz".into()));
        let same = ETagCondition::ETag(ETag::Strong("abc".into()));
        let any = ETagCondition::Any;
        let (before, at, after) = (ts(99), ts(100), ts(101));
        assert_eq!(get(None, None, None, None), None);
        assert_eq!(
            get(Some(&other), None, None, None),
            Some(PreconditionFailed)
        );
        assert_eq!(get(Some(&same), None, None, None), None);
        assert_eq!(get(Some(&any), None, None, None), None);
        assert_eq!(get(None, Some(&same), None, None), Some(NotModified));
        assert_eq!(get(None, Some(&any), None, None), Some(NotModified));
        assert_eq!(get(None, Some(&other), None, None), None);
        assert_eq!(get(None, None, Some(&at), None), Some(NotModified));
        assert_eq!(get(None, None, Some(&before), None), None);
        assert_eq!(
            get(None, None, None, Some(&before)),
            Some(PreconditionFailed)
        );
        assert_eq!(get(None, None, None, Some(&at)), None);
        assert_eq!(get(None, None, None, Some(&after)), None);
        // A matching If-Match overrides a failing If-Unmodified-Since; a
        // failing If-None-Match overrides If-Modified-Since.
        assert_eq!(get(Some(&same), None, None, Some(&before)), None);
        assert_eq!(get(None, Some(&other), Some(&after), None), None);
        // A copy source that is not modified fails with 412, not 304.
        let copy = Conditions {
            if_match: None,
            if_none_match: Some(&same),
            if_modified_since: None,
            if_unmodified_since: None,
        };
        assert_eq!(
            code(copy.check(&ETag::Strong("abc".into()), 100, true)),
            Some(PreconditionFailed)
        );
    }

    #[test]
    fn checksums_are_verified() {
        let mut h = HeaderMap::new();
        // CRC32C of "hello" and CRC32 of "hello", base64.
        h.insert("x-amz-checksum-crc32c", "mnG7TA==".parse().unwrap());
        h.insert("x-amz-checksum-crc32", "NhCmhg==".parse().unwrap());
        let checks = Checks::from_request(&h, None).unwrap();
        let mut hs = checks.hasher();
        hs.update(b"hello");
        let (md5, verified) = checks.verify(hs).unwrap();
        assert_eq!(hex::encode(md5), "5d41402abc4b2a76b9719d911017c592");
        assert_eq!(verified.len(), 2);
        let mut hs = checks.hasher();
        hs.update(b"hellO");
        let err = checks.verify(hs).unwrap_err();
        assert_eq!(*err.code(), S3ErrorCode::BadDigest);
    }

    #[test]
    fn metadata_from_headers() {
        let mut h = HeaderMap::new();
        h.insert("content-type", "text/plain".parse().unwrap());
        h.insert("content-encoding", "aws-chunked,gzip".parse().unwrap());
        h.insert("x-amz-meta-colour", "blue".parse().unwrap());
        h.insert("x-amz-date", "whatever".parse().unwrap());
        let m = from_headers(&h).unwrap();
        assert_eq!(m.headers["content-type"], "text/plain");
        assert_eq!(m.headers["content-encoding"], "gzip");
        assert_eq!(m.user["colour"], "blue");
        assert_eq!(m.headers.len() + m.user.len(), 3);
        h.insert("x-amz-meta-big", "x".repeat(3000).parse().unwrap());
        assert_eq!(
            *from_headers(&h).unwrap_err().code(),
            S3ErrorCode::MetadataTooLarge
        );
    }
}
