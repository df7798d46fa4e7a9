//! The S3 API's own parsers of request parts (the SigV4 signature itself
//! is checked by the s3s crate): listing continuation tokens, copy source
//! ranges, content headers and user metadata. Never panic.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::s3_request(data));
