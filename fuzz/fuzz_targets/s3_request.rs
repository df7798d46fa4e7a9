//! The S3 API's own parsers of request parts (the SigV4 signature itself
//! is checked by the s3s crate): listing continuation tokens, copy source
//! ranges, content headers and user metadata. Never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(name) = strata_s3::list::decode_token(&text) {
        assert_eq!(
            strata_s3::list::encode_token(&name),
            text.trim_end_matches('=')
        );
    }
    let size = data.len() as u64 * 977;
    if let Ok((a, b)) = strata_s3::multipart::copy_range(&text, size) {
        assert!(a <= b && b <= size);
    }
    let mut h = http::HeaderMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_bytes(v.trim().as_bytes()),
            ) {
                h.append(k, v);
            }
        }
    }
    let _ = strata_s3::meta::from_headers(&h);
    let _ = strata_s3::meta::refuse_unsupported_write(&h);
    let _ = strata_s3::meta::refuse_unsupported_read(&h);
    let _ = strata_s3::meta::Checks::from_request(&h, None);
});
