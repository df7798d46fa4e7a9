//! The `Range` header of GET: never panics, and an accepted range (the
//! half-open interval `[start, end)`) is non-empty and lies within the
//! object.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::range(data));
