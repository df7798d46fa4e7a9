//! Tier plan JSON (docs/tier-plan.md), as every server reads it from a
//! file, `/_admin/plan` or the metadata service: never panics; a plan that
//! validates survives the node's own checks.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(plan) = strata_provision::TierPlan::from_json(text) {
        let _ = plan.validate();
        let _ = strata_node::plan::check(&plan, 1024);
    }
});
