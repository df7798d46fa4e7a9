//! The short fault campaign of CI (issue 15): `strata torture` over every
//! kind of trial, real processes really killed, real bytes cut and
//! flipped, a real full filesystem when the tests run as root, network
//! partitions through the harness's proxy. The full campaign is
//! bench/torture.sh; docs/reliability.md has the results.
//!
//! It asserts what the campaign promises: every trial passes (no
//! acknowledged write lost, no acknowledged delete back, no wrong byte
//! served), every kind ran, and the linearizability histories the
//! harness wrote are complete JSON with answered operations in them.

use std::process::Command;

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}

#[test]
fn a_short_campaign_over_every_kind_passes() {
    let hist = tempfile::tempdir().expect("tempdir");
    let mut kinds = String::from("all");
    if !is_root() {
        // disk-full mounts a 64 MiB tmpfs, which needs root.
        let out = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["torture", "--list"])
            .output()
            .expect("strata torture --list");
        kinds = String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|k| *k != "disk-full")
            .collect::<Vec<_>>()
            .join(",");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "torture", "--trials", "36", "--seed", "15", "--json", "--kinds", &kinds,
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
    let want = kinds.split(',').count();
    let want = if kinds == "all" { 18 } else { want };
    assert_eq!(kinds_run.len(), want, "every kind ran: {kinds_run:?}");
    for k in kinds_run {
        assert!(k["passed"].as_u64() >= Some(1), "{k}");
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
    assert!(!histories.is_empty(), "no linearizability history written");
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
