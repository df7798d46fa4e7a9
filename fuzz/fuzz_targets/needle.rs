//! Needle parser: never panics on any bytes, and whatever it accepts
//! re-encodes to the same bytes. A second pass fixes up the input's
//! checksums, so that the fuzzer also reaches the footer and data checks.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::needle(data));
