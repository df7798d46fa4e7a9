//! Superblock parser: never panics, and accepts only what it would write.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::superblock(data));
