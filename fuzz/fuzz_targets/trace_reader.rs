//! Every trace reader (the format is detected from the bytes, as `strata
//! trace` does): never panics, never allocates wildly, always ends on
//! arbitrary bytes; a record it accepts has sane fields.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::trace_reader(data));
