//! What the S3 listener refuses on a request's head by its size: a body
//! that s3s would read whole as XML (a configuration PUT, DeleteObjects,
//! CompleteMultipartUpload) declared longer than [`XML_MAX`] is S3's 400
//! `MaxMessageLengthExceeded` before any of it is read (s3s answered such
//! a body 500 after reading its first 20 MiB).

use crate::lifetimes::Refusal;
use http::{HeaderMap, Method, StatusCode, Uri};

/// The longest XML body (s3s's `xml_max_body_size`, 20 MiB: a
/// DeleteObjects of 1,000 keys or a CompleteMultipartUpload of 10,000
/// parts is about 1 MiB).
pub const XML_MAX: u64 = 20 << 20;

/// Query parameters of requests whose body is object data, not XML.
const DATA_PARAMS: [&str; 2] = ["partNumber", "uploadId"];

/// Whether the request's body is an XML document s3s reads whole.
fn xml_body(method: &Method, uri: &Uri, headers: &HeaderMap) -> bool {
    let params: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').map_or(p, |(k, _)| k))
        // Presigned-URL credentials and SDK routing hints.
        .filter(|k| !k.starts_with("X-Amz-") && *k != "x-id")
        .collect();
    match *method {
        Method::POST => !headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"multipart/form-data")),
        // PutObject and UploadPart (with partNumber and uploadId) carry
        // data; a PUT naming another subresource carries a configuration.
        Method::PUT => params.iter().any(|k| !DATA_PARAMS.contains(k)),
        _ => false,
    }
}

/// The refusal of a request whose XML body is declared (`Content-Length`)
/// too long.
pub fn check(
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    declared: Option<u64>,
) -> Result<(), Refusal> {
    match declared {
        Some(n) if n > XML_MAX && xml_body(method, uri, headers) => Err(Refusal {
            status: StatusCode::BAD_REQUEST,
            code: "MaxMessageLengthExceeded",
            message: format!("Your request was too big: an XML body holds at most {XML_MAX} bytes"),
        }),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asked(method: Method, uri: &str, len: u64, form: bool) -> Result<(), &'static str> {
        let mut h = HeaderMap::new();
        if form {
            h.insert(
                http::header::CONTENT_TYPE,
                "multipart/form-data; boundary=x".parse().unwrap(),
            );
        }
        check(&method, &uri.parse().unwrap(), &h, Some(len)).map_err(|r| r.code)
    }

    #[test]
    fn only_xml_bodies_past_the_bound_are_refused() {
        let big = XML_MAX + 1;
        assert_eq!(
            asked(Method::POST, "/b?delete", big, false),
            Err("MaxMessageLengthExceeded")
        );
        assert_eq!(
            asked(Method::POST, "/b/k?uploadId=u", big, false),
            Err("MaxMessageLengthExceeded")
        );
        assert_eq!(
            asked(Method::PUT, "/b?tagging", big, false),
            Err("MaxMessageLengthExceeded")
        );
        assert_eq!(
            asked(Method::PUT, "/b/k?acl", big, false),
            Err("MaxMessageLengthExceeded")
        );
        assert_eq!(asked(Method::POST, "/b?delete", XML_MAX, false), Ok(()));
        // Object data of any size is not XML.
        assert_eq!(asked(Method::PUT, "/b/k", big, false), Ok(()));
        assert_eq!(
            asked(Method::PUT, "/b/k?x-id=PutObject", big, false),
            Ok(())
        );
        assert_eq!(
            asked(Method::PUT, "/b/k?partNumber=1&uploadId=u", big, false),
            Ok(())
        );
        assert_eq!(
            asked(
                Method::PUT,
                "/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Signature=ab",
                big,
                false
            ),
            Ok(())
        );
        assert_eq!(asked(Method::POST, "/b", big, true), Ok(()));
        assert_eq!(asked(Method::GET, "/b?acl", big, false), Ok(()));
    }
}
