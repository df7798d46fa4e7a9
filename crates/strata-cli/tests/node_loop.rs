//! The loop end to end with the real binary: `strata demo` starts a node,
//! drives a synthetic multi-workload load over HTTP, captures the node's
//! traces, provisions a plan from them, loads it and drives the load again.
//! The flash hit ratio the node measures must improve on the default plan
//! and land within a few percent of what the lab predicted, cell-wide and
//! per workload.

use std::process::Command;

#[test]
fn plan_from_the_nodes_traces_beats_the_default_and_matches_the_prediction() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args([
            "demo",
            "--json",
            "--phase-seconds",
            "30",
            "--warmup-seconds",
            "15",
        ])
        .arg("--dir")
        .arg(dir.path())
        .output()
        .expect("run strata demo");
    assert!(
        out.status.success(),
        "strata demo failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let f = |k: &str| r[k].as_f64().unwrap_or(f64::NAN);
    let (mb, pb, ma, pa) = (
        f("measured_before"),
        f("predicted_before"),
        f("measured_after"),
        f("predicted_after"),
    );
    eprintln!(
        "default: measured {mb:.3} predicted {pb:.3}; plan: measured {ma:.3} predicted {pa:.3}"
    );
    // The computed plan serves clearly more reads from flash than one FIFO.
    assert!(
        ma > mb + 0.10,
        "plan {ma:.3} does not beat the default {mb:.3}"
    );
    // And the lab's predictions hold on the node: cell-wide within 3
    // points, every workload within 5, in both phases (runs so far: at
    // most 0.3 points cell-wide and 2.3 per workload; docs/benchmarks.md).
    assert!(
        (ma - pa).abs() < 0.03,
        "plan: measured {ma:.3} vs predicted {pa:.3}"
    );
    assert!(
        (mb - pb).abs() < 0.03,
        "default: measured {mb:.3} vs predicted {pb:.3}"
    );
    //
    // Per workload the tolerance depends on the write draw. A workload
    // written wholly to flash or wholly to disk (p = 0 or 1) has no draw:
    // within 5 points. One with a fractional p (`late`, p ~ 0.72) is a
    // sample: which of its ~240 objects the draw sends to flash decides the
    // hit ratio, and its reads per object are Poisson(4 x Exp(1)), so the
    // standard deviation is sqrt(p(1-p) x 2.25 / 240) ~ 4.4 points; two
    // runs on a quiet machine measured 82.5% and 66.3% against 71.8%
    // predicted. Within 15 points (3.4 sigma) there.
    for w in r["workloads"].as_array().unwrap() {
        let g = |k: &str| w[k].as_f64().unwrap_or(f64::NAN);
        assert!(
            (g("measured_before") - g("predicted_before")).abs() < 0.05,
            "default plan, workload {w}"
        );
        let p = g("plan_write_probability");
        let tol = if p > 0.001 && p < 0.999 { 0.15 } else { 0.05 };
        assert!(
            (g("measured_after") - g("predicted_after")).abs() < tol,
            "computed plan, workload {w}"
        );
    }
    // No request failed: the load never reads an object before its PUT was
    // acknowledged, and a healthy node answers every request.
    assert!(r["requests"].as_u64().unwrap() > 1000, "{r}");
    assert_eq!(r["errors"].as_u64(), Some(0), "failed requests: {r}");
    // Every workload was read in both phases, and the traces and plan exist.
    for w in r["workloads"].as_array().unwrap() {
        assert!(w["reads_before"].as_u64().unwrap() > 0, "{w}");
        assert!(w["reads_after"].as_u64().unwrap() > 0, "{w}");
    }
    // The traces are finished files in Strata's binary format, and the lab
    // reads them without being told the format.
    let traces = r["trace_files"].as_array().unwrap();
    assert!(!traces.is_empty());
    for t in traces {
        let t = t.as_str().unwrap();
        assert!(t.ends_with(".strace"), "{t}");
        let head = std::fs::read(t).unwrap();
        assert_eq!(&head[..8], b"STRTRACE", "{t}");
        let stats = Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["trace", "stats", t])
            .output()
            .unwrap();
        assert!(
            stats.status.success(),
            "strata trace stats {t}: {}",
            String::from_utf8_lossy(&stats.stderr)
        );
    }
    let plan = std::fs::read_to_string(r["plan_path"].as_str().unwrap()).unwrap();
    assert!(plan.contains("strata-tier-plan"));
    assert!(
        r["segments_moved"].as_u64().unwrap() > 0,
        "the tier mover never moved"
    );
}
