//! Row records (docs/recovery.md: the needle data of a cluster row) and
//! the head-record parser of the client: never panic on any bytes.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::row_record(data));
