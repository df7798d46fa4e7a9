//! The cluster's request signatures (`x-strata-auth`, docs/security.md):
//! never panic on any header value, and never accept a forged one.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::cluster_auth(data));
