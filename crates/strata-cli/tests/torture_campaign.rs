//! The short fault campaign of CI (issue 15): `strata torture` over every
//! kind of trial but those with an open finding, real processes really
//! killed, real bytes cut and flipped, network partitions through the
//! harness's proxy, a history for the linearizability checker. The full
//! campaign is bench/torture.sh; docs/reliability.md has the results.
//!
//! It asserts what the campaign promises: every trial passes (no
//! acknowledged write lost, no acknowledged delete back, no wrong byte
//! served), every kind ran, and the linearizability histories the
//! harness wrote are JSON with answered operations in them.

use std::process::Command;

/// Kinds with an open finding of the campaign (docs/reliability.md,
/// "Findings"), left out of CI until their fix lands so that this test
/// guards everything that holds today. None today: s3-flip-listing
/// (finding 7) came back once a quarantined index was rebuilt and write
/// intents resolved what a rolled-back commit lost (100 of 100 trials).
const OPEN_FINDINGS: &[&str] = &[];

/// Kinds left out to keep the campaign under 5 minutes: one erasure-coding
/// kind (each trial starts six nodes and waits for segments to be encoded),
/// one S3 kind and one power-cut kind run here; the others run in the full
/// campaign (bench/torture.sh).
const LEFT_OUT_FOR_TIME: &[&str] = &[
    "ec-compact",
    "ec-rebuild",
    "ec-flip",
    "s3-multipart",
    "s3-delete",
    "s3-cluster",
    "s3-cluster-multipart",
    "s3-cluster-partition",
    "s3-cluster-loss",
    // Of the power-cut kinds, power-put runs here.
    "power-compaction",
    "power-s3",
    "cluster-power",
    "cluster-power-all",
    "ec-power",
];

/// Kinds this campaign runs, three trials each.
const KINDS: usize = 23;

#[test]
fn a_short_campaign_over_every_kind_passes() {
    let hist = tempfile::tempdir().expect("tempdir");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["torture", "--list"])
        .output()
        .expect("strata torture --list");
    let kinds: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|k| !OPEN_FINDINGS.contains(k) && !LEFT_OUT_FOR_TIME.contains(k))
        .map(str::to_string)
        .collect();
    assert_eq!(kinds.len(), KINDS, "{kinds:?}");
    let kinds = kinds.join(",");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "torture",
            "--trials",
            &(3 * KINDS).to_string(),
            "--seed",
            "15",
            "--json",
            "--kinds",
            &kinds,
        ])
        .arg("--history")
        .arg(hist.path())
        .output()
        .expect("strata torture");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| {
        panic!(
            "no JSON report ({e}): {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    let failures: Vec<String> = report["results"]
        .as_array()
        .expect("results")
        .iter()
        .filter(|t| t["passed"] != true)
        .map(|t| format!("{}: {}", t["repro"], t["failures"]))
        .collect();
    assert!(
        failures.is_empty(),
        "failed trials:\n{}",
        failures.join("\n")
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let kinds_run = report["kinds"].as_array().expect("kinds");
    assert_eq!(kinds_run.len(), KINDS, "every kind ran: {kinds_run:?}");
    for k in kinds_run {
        assert_eq!(k["passed"].as_u64(), Some(3), "{k}");
    }
    let puts: u64 = kinds_run
        .iter()
        .map(|k| k["acked_puts"].as_u64().unwrap_or(0))
        .sum();
    assert!(puts > 1000, "the loads acknowledged only {puts} PUTs");
    let histories: Vec<_> = std::fs::read_dir(hist.path())
        .expect("histories")
        .flatten()
        .collect();
    assert_eq!(histories.len(), 3, "one history per linearizable trial");
    for h in histories {
        let v: serde_json::Value =
            serde_json::from_slice(&std::fs::read(h.path()).expect("read")).expect("history JSON");
        let ops = v["ops"].as_array().expect("ops");
        assert!(
            ops.iter().filter(|o| o["outcome"] == "ok").count() > 10,
            "{}: too few answered operations",
            h.path().display()
        );
    }
}
