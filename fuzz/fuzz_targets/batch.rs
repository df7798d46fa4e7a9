//! The batch PUT framing (docs/node.md): never panics; what it accepts
//! re-frames to exactly the input.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::batch(data));
