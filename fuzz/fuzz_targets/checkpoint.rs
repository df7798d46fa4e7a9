//! Checkpoint parser and decoders: never panic or allocate wildly on any
//! bytes; a decoded index answers lookups without panicking. The input's
//! checksums are fixed up first, so that the fuzzer reaches the decoders.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::checkpoint(data));
