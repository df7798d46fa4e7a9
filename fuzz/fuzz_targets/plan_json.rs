//! Tier plan JSON (docs/tier-plan.md), as every server reads it from a
//! file, `/_admin/plan` or the metadata service: never panics; a plan that
//! validates survives the node's own checks.
#![no_main]

#[path = "../props.rs"]
mod props;

libfuzzer_sys::fuzz_target!(|data: &[u8]| props::plan_json(data));
