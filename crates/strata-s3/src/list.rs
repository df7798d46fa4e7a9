//! ListObjects and ListObjectsV2 over the listing index: the query from
//! the request, the S3 entries from a page, continuation tokens.

use base64::Engine;
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use s3s::dto::{CommonPrefix, EncodingType, Object, ObjectStorageClass, Timestamp};
use s3s::{s3_error, S3Result};
use std::time::{Duration, UNIX_EPOCH};
use strata_proto::{ListPage, ListQuery};

/// S3's default and largest page.
pub const MAX_KEYS: usize = 1000;

/// What `encoding-type=url` escapes: everything but unreserved characters
/// and `/`, as S3 does.
const URL: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~')
    .remove(b'/');

/// The index query of a listing: the later of the two starting points.
pub fn query(
    prefix: &Option<String>,
    delimiter: &Option<String>,
    max_keys: Option<i32>,
    after: [Option<&str>; 2],
) -> S3Result<ListQuery> {
    let max = match max_keys {
        None => MAX_KEYS,
        Some(n) if n < 0 => return Err(s3_error!(InvalidArgument, "max-keys must be >= 0")),
        Some(n) => (n as usize).min(MAX_KEYS),
    };
    let start_after = after.into_iter().flatten().max().unwrap_or("").to_string();
    Ok(ListQuery {
        prefix: prefix.clone().unwrap_or_default(),
        start_after,
        delimiter: delimiter.clone().filter(|d| !d.is_empty()),
        max,
    })
}

/// Whether the request asked for `encoding-type=url` (the only type S3
/// knows).
pub fn url_encoding(e: &Option<EncodingType>) -> S3Result<bool> {
    match e {
        None => Ok(false),
        Some(e) if e.as_str() == EncodingType::URL => Ok(true),
        Some(_) => Err(s3_error!(
            InvalidArgument,
            "Invalid Encoding Method specified in Request"
        )),
    }
}

/// A name as the response carries it.
pub fn enc(url: bool, s: &str) -> String {
    if url {
        utf8_percent_encode(s, URL).to_string()
    } else {
        s.to_string()
    }
}

/// The objects and common prefixes of a page, as S3 lists them.
pub fn entries(page: &ListPage, url: bool) -> (Vec<Object>, Vec<CommonPrefix>) {
    let objects = page
        .contents
        .iter()
        .map(|(name, e)| Object {
            key: Some(enc(url, name)),
            size: Some(e.size as i64),
            e_tag: Some(s3s::dto::ETag::Strong(e.etag.clone())),
            last_modified: Some(Timestamp::from(
                UNIX_EPOCH + Duration::from_millis(e.modified_ms),
            )),
            storage_class: Some(ObjectStorageClass::from_static(
                ObjectStorageClass::STANDARD,
            )),
            ..Default::default()
        })
        .collect();
    let prefixes = page
        .common_prefixes
        .iter()
        .map(|p| CommonPrefix {
            prefix: Some(enc(url, p)),
        })
        .collect();
    (objects, prefixes)
}

/// The opaque continuation token of a page that ended at `last`.
pub fn encode_token(last: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(last.as_bytes())
}

/// The name a continuation token continues after.
pub fn decode_token(t: &str) -> S3Result<String> {
    base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(t)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| {
            s3_error!(
                InvalidArgument,
                "The continuation token provided is incorrect"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_round_trip_and_bad_ones_are_refused() {
        for n in ["", "a/b c", "\u{e9}t\u{e9}/x"] {
            assert_eq!(decode_token(&encode_token(n)).expect("token"), n);
        }
        assert!(decode_token("%%%").is_err());
    }

    #[test]
    fn query_takes_the_later_start_and_caps_max_keys() {
        let q = query(
            &None,
            &Some(String::new()),
            Some(5000),
            [Some("b"), Some("a")],
        )
        .expect("query");
        assert_eq!(q.start_after, "b");
        assert_eq!(q.max, MAX_KEYS);
        assert_eq!(q.delimiter, None);
        assert!(query(&None, &None, Some(-1), [None, None]).is_err());
        assert_eq!(enc(true, "a b/\u{e9}+"), "a%20b/%C3%A9%2B");
    }
}
