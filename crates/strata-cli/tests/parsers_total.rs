//! Every fuzz target's property (fuzz/props.rs: needle, superblock,
//! checkpoint and run files, trace readers, batch framing, tier plan JSON,
//! row and head records, the Range header, cluster signatures, the S3
//! API's own parsers) run over proptest's arbitrary bytes: the short run of
//! each target that CI makes (docs/reliability.md, "Fuzzing"). The
//! coverage-guided fuzzer itself needs its own instrumented build
//! (`fuzz/run.sh`), too long for CI; the properties are the same code.

#[path = "../../../fuzz/props.rs"]
mod props;

use proptest::prelude::*;

fn bytes(max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..max)
}

/// Text that looks like what the parser reads half the time, arbitrary
/// bytes the other half.
fn texty(pattern: &'static str, max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![pattern.prop_map(String::into_bytes), bytes(max),]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn needle(d in bytes(300)) {
        props::needle(&d);
    }

    #[test]
    fn superblock(d in bytes(100)) {
        props::superblock(&d);
    }

    #[test]
    fn checkpoint(d in bytes(600)) {
        props::checkpoint(&d);
    }

    #[test]
    fn batch(d in bytes(200)) {
        props::batch(&d);
    }

    #[test]
    fn plan_json(d in texty(r#"\{"version": ?[0-9], ?"workloads": ?\[(\{"name": ?"[a-z]{0,4}"(, ?"flash_bytes": ?[0-9]{1,20})?\},?){0,3}\]\}"#, 200)) {
        props::plan_json(&d);
    }

    #[test]
    fn row_record(d in bytes(300)) {
        props::row_record(&d);
    }

    #[test]
    fn range(size in any::<u64>(), v in texty("bytes=[0-9]{0,12}-[0-9]{0,12}(,[0-9]{0,3}-[0-9]{0,3}){0,2}", 40)) {
        let mut d = size.to_le_bytes().to_vec();
        d.extend_from_slice(&v);
        props::range(&d);
    }

    #[test]
    fn cluster_auth(d in texty("(x-strata-auth: ?v[0-9] [0-9a-f]{0,70}\n){0,2}(x-strata-[a-z]{1,8}: ?[ -~]{0,20}\n){0,3}", 300)) {
        props::cluster_auth(&d);
    }

    #[test]
    fn s3_request(d in texty("([a-z-]{1,24}: ?[ -~]{0,30}\n){0,5}", 300)) {
        props::s3_request(&d);
    }
}

proptest! {
    // The trace readers write their input to a file first: fewer cases.
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn trace_reader(d in bytes(400)) {
        props::trace_reader(&d);
    }
}
