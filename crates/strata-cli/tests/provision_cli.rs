//! `strata synth` and `strata provision` through the real binary: the
//! synthetic multi-workload trace end to end, and bad input.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use strata_provision::TierPlan;

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("the strata binary runs")
}

fn ok(args: &[&str]) -> String {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn fails(args: &[&str]) -> String {
    let out = strata(args);
    assert!(!out.status.success(), "strata {args:?} should fail");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// Writes a synthetic trace of `duration` at `scale` times the default
/// rates to `trace` (format from the name), with more `synth` options.
fn synth_to(trace: &Path, duration: &str, scale: &str, more: &[&str]) -> String {
    let mut args = vec!["synth", s(trace), "--duration", duration, "--scale", scale];
    args.extend_from_slice(more);
    ok(&args)
}

/// A two-day synthetic trace at 30% of the default rates (about 600,000
/// requests), in Strata's binary format.
fn synth(dir: &Path) -> PathBuf {
    let trace = dir.join("synth.strace");
    let out = synth_to(&trace, "2d", "0.3", &["--seed", "7"]);
    assert!(
        out.contains("late-batch") && out.contains("cold-big"),
        "{out}"
    );
    trace
}

/// `strata provision TRACE --flash FLASH` and more options.
fn provision<'a>(trace: &'a Path, flash: &'a str, more: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["provision", s(trace), "--flash", flash];
    args.extend_from_slice(more);
    args
}

/// The `--json` output of a provision run.
fn provision_json(trace: &Path, flash: &str, more: &[&str]) -> Value {
    let mut args = provision(trace, flash, more);
    args.push("--json");
    serde_json::from_str(&ok(&args)).expect("--json prints one JSON object")
}

fn f(v: &Value, k: &str) -> f64 {
    v[k].as_f64()
        .unwrap_or_else(|| panic!("field {k} missing in {v}"))
}

#[test]
fn optimized_fifo_beats_single_fifo_and_predicts_the_eval_window() {
    let dir = tempfile::tempdir().unwrap();
    let trace = synth(dir.path());
    let plan = dir.path().join("plan.json");
    let plots = dir.path().join("plots");
    // Train on 12h..30h, evaluate on 30h..48h, 1% of the data on flash.
    const WINDOWS: [&str; 4] = ["--train", "12h..30h", "--eval", "30h..48h"];
    let json = |more: &[&str]| provision_json(&trace, "1%", &[&WINDOWS, more].concat());
    let v = json(&["--plan", s(&plan), "--plot", s(&plots)]);
    // The fields the issue names.
    let ws = v["workloads"].as_array().expect("workloads");
    assert_eq!(ws.len(), 6);
    for w in ws {
        for k in [
            "id",
            "flash_bytes",
            "write_probability",
            "predicted_flash_reads_per_s",
        ] {
            assert!(w[k].is_number(), "{k} in {w}");
        }
        assert!(w.get("ttl_seconds").is_some());
    }
    let pred = f(&v, "predicted_flash_hit_ratio");
    let meas = f(&v, "measured_flash_hit_ratio");
    let single_pred = f(&v["baselines"]["single_fifo"], "flash_hit_ratio");
    let single_meas = f(&v["baselines"]["single_fifo"], "measured_flash_hit_ratio");
    for b in ["prop_reads", "prop_size"] {
        assert!(v["baselines"][b]["flash_hit_ratio"].is_number());
        assert!(v["baselines"][b]["measured_flash_hit_ratio"].is_number());
    }
    // Optimised FIFO beats a single FIFO on the evaluation window, by far.
    assert!(
        meas > 1.5 * single_meas,
        "optimized {meas} vs single {single_meas}"
    );
    assert!(pred > single_pred);
    // And the prediction from training is within a few percent of what the
    // evaluation window measures.
    assert!(
        (pred - meas).abs() / meas < 0.05,
        "predicted {pred}, measured {meas}"
    );
    // The cold, big workload gets no flash; the late one gets some.
    let by_name = |n: &str| ws.iter().find(|w| w["name"] == n).expect(n);
    assert_eq!(f(by_name("cold-big"), "flash_bytes"), 0.0);
    assert!(f(by_name("hot-recent"), "flash_bytes") > 0.0);
    // The tier plan: valid, named, within the flash.
    let p = TierPlan::from_json(&std::fs::read_to_string(&plan).unwrap()).unwrap();
    assert_eq!(p.workloads.len(), 6);
    assert!(p
        .workloads
        .iter()
        .any(|w| w.name.as_deref() == Some("hot-recent")));
    let total: u64 = p.workloads.iter().map(|w| w.flash_bytes).sum();
    assert!(total <= p.total_flash_bytes);
    assert!((p.predicted_flash_hit_ratio - pred).abs() < 1e-12);
    // One SVG per workload.
    let svgs = std::fs::read_dir(&plots).unwrap().count();
    assert_eq!(svgs, 6);
    let svg = std::fs::read_to_string(plots.join("workload-0.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("polyline"));

    // The readable table says the same.
    let table = ok(&provision(&trace, "1%", &WINDOWS));
    assert!(
        table.contains("optimized FIFO") && table.contains("single FIFO"),
        "{table}"
    );
    assert!(table.contains("break-even"), "{table}");

    // A write bound is honoured, predicted and measured.
    let b = json(&["--write-bound", "5%"]);
    let bound = f(&b, "write_bound_bytes_per_s");
    assert!((bound - 0.05 * f(&b, "write_bytes_per_s")).abs() < 1e-6 * bound);
    assert!(f(&b, "flash_write_bytes_per_s") <= bound * (1.0 + 1e-9));
    assert!(f(&b, "measured_flash_write_bytes_per_s") <= bound * 1.15);
    assert!(f(&b, "predicted_flash_hit_ratio") <= pred + 1e-9);
    assert!(f(&b, "lambda") > 0.0);

    // LRU: predicted as a lower..upper range, measured on the window.
    let l = json(&["--policy", "lru"]);
    assert_eq!(l["policy"], "lru");
    let lo = f(&l, "predicted_flash_hit_ratio");
    let hi = f(&l, "predicted_flash_hit_ratio_upper");
    assert!(lo <= hi + 1e-9);
    let m = f(&l, "measured_flash_hit_ratio");
    assert!(
        (lo - m).abs() / m < 0.08,
        "lru predicted {lo}, measured {m}"
    );
}

#[test]
fn censored_lru_ages_give_bounds_that_bracket_the_measurement() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("late.strace");
    // The trace begins a day after its data started being created.
    synth_to(&trace, "2d", "0.3", &["--seed", "11", "--start-at", "24h"]);
    let v = provision_json(
        &trace,
        "1%",
        &[
            "--policy", "lru", "--train", "24h..36h", "--eval", "36h..48h",
        ],
    );
    let censored: f64 = v["workloads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| f(w, "censored_objects"))
        .sum();
    assert!(censored > 1000.0, "{censored}");
    let lo = f(&v, "predicted_flash_hit_ratio");
    let hi = f(&v, "predicted_flash_hit_ratio_upper");
    let m = f(&v, "measured_flash_hit_ratio");
    assert!(
        hi > lo + 0.005,
        "bounds {lo}..{hi} should differ under censoring"
    );
    assert!(
        m > 0.97 * lo && m < 1.03 * hi,
        "measured {m} outside {lo}..{hi}"
    );
}

#[test]
fn sampling_is_scaled_back_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("small.csv");
    synth_to(&trace, "1d", "0.2", &["--seed", "3"]);
    let full = provision_json(&trace, "2%", &[]);
    let sampled = provision_json(
        &trace,
        "2%",
        &["--sample-reads", "0.25", "--sample-objects", "0.5"],
    );
    assert_eq!(f(&sampled["sampling"], "read_rate"), 0.25);
    assert_eq!(f(&sampled["sampling"], "object_rate"), 0.5);
    // The scaled-back read rate estimates the true one.
    let (a, b) = (f(&full, "read_ops_per_s"), f(&sampled, "read_ops_per_s"));
    assert!((a - b).abs() / a < 0.05, "full {a}, sampled {b}");
    let (a, b) = (
        f(&full, "predicted_flash_hit_ratio"),
        f(&sampled, "predicted_flash_hit_ratio"),
    );
    assert!((a - b).abs() < 0.05, "full {a}, sampled {b}");
}

#[test]
fn bad_input_gives_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.csv");
    synth_to(&trace, "6h", "0.1", &[]);
    // Provisioning the trace with 1% of flash and more options fails with…
    let bad = |more: &[&str]| fails(&provision(&trace, "1%", more));

    let e = fails(&["provision", s(&trace), "--flash", "lots"]);
    assert!(e.contains("--flash") && e.contains("bad size"), "{e}");
    let e = fails(&["provision", s(&trace), "--flash=-5%"]);
    assert!(e.contains("--flash") && e.contains("positive"), "{e}");
    let e = fails(&["provision", s(&trace)]);
    assert!(e.contains("--flash"), "{e}");

    let weights = dir.path().join("w.txt");
    std::fs::write(&weights, "# priorities\n0 2\n1 three\n").unwrap();
    let e = bad(&["--weights", s(&weights)]);
    assert!(
        e.contains("w.txt") && e.contains("line 3") && e.contains("three"),
        "{e}"
    );
    std::fs::write(&weights, "99 2\n").unwrap();
    let e = bad(&["--weights", s(&weights)]);
    assert!(e.contains("workload 99"), "{e}");
    let e = bad(&["--weights", "/nonexistent/w.txt"]);
    assert!(e.contains("weights file"), "{e}");

    let empty = dir.path().join("empty.csv");
    std::fs::write(&empty, "time,op,object,size,workload\n").unwrap();
    let e = fails(&provision(&empty, "1%", &[]));
    assert!(e.contains("no requests"), "{e}");

    let e = bad(&["--train", "1h..100h"]);
    assert!(e.contains("outside the trace"), "{e}");
    let e = bad(&["--train", "1h..3h", "--eval", "3h..50h"]);
    assert!(
        e.contains("eval window") && e.contains("outside the trace"),
        "{e}"
    );
    let e = bad(&["--train", "3h..1h"]);
    assert!(e.contains("end must be after the start"), "{e}");
    let e = bad(&["--train", "1h..3h", "--eval", "2h..4h"]);
    assert!(e.contains("evaluation window must start"), "{e}");
    let e = bad(&["--policy", "mru"]);
    assert!(e.contains("fifo or lru"), "{e}");
    let e = fails(&provision(Path::new("/nonexistent/trace.bin"), "1%", &[]));
    assert!(e.contains("/nonexistent/trace.bin"), "{e}");

    let e = fails(&["synth", s(&dir.path().join("x.csv")), "--duration=-1h"]);
    assert!(e.contains("duration"), "{e}");
}

#[test]
fn solver_benchmark_runs() {
    let out = ok(&["provision", "--bench-solver", "200x20"]);
    // Three rounds of both problems, each solved by both solvers, which
    // must print the same objective.
    for problem in ["max reads", "bounded writes"] {
        let objectives = |solver: &str| -> Vec<String> {
            out.lines()
                .filter(|l| l.contains(problem) && l.contains(&format!(" {solver} ")))
                .filter_map(|l| l.split("objective ").nth(1))
                .map(|o| o.split(',').next().unwrap_or("").to_string())
                .collect()
        };
        let (fast, reference) = (objectives("fast"), objectives("reference"));
        assert_eq!(fast.len(), 3, "{out}");
        assert_eq!(fast, reference, "{out}");
    }
    assert!(out.contains("load average"), "{out}");
}

/// `--ec K+M`: on a trace whose workload 1 reads each object until it is
/// 300 s old and never after, and whose workload 2 reads objects of every
/// age, the plan encodes workload 1 past about 300 s and keeps workload 2
/// replicated; `strata cost --ec` prices the same trace.
#[test]
fn the_warm_age_is_where_a_workloads_reads_stop() {
    use std::fmt::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("cooling.csv");
    let mut csv = String::from("time,op,object,size,workload\n");
    for t in 0..4000u64 {
        let _ = writeln!(csv, "{t},put,a{t},4096,1");
        let _ = writeln!(csv, "{t},put,b{t},4096,2");
        // Workload 1: reads at ages 10, 20, ..., 290 s.
        for age in (10..300).step_by(10) {
            if age <= t {
                let _ = writeln!(csv, "{t},get,a{},4096,1", t - age);
            }
        }
        // Workload 2: two reads at ages spread over everything written.
        for j in 0..2u64 {
            let back = t.wrapping_mul(2_654_435_761).wrapping_add(j * 977) % (t + 1);
            let _ = writeln!(csv, "{t},get,b{},4096,2", t - back);
        }
    }
    std::fs::write(&trace, csv).unwrap();
    let plan_path = dir.path().join("plan.json");
    let out = ok(&provision(
        &trace,
        "5%",
        &["--ec", "4+2", "--ec-reads", "1%", "--plan", s(&plan_path)],
    ));
    assert!(out.contains("erasure-coded warm tier"), "{out}");
    let plan: TierPlan =
        serde_json::from_str(&std::fs::read_to_string(&plan_path).unwrap()).unwrap();
    let ec_of = |id: u32| {
        plan.workloads
            .iter()
            .find(|w| w.id == id)
            .and_then(|w| w.ec.clone())
    };
    match ec_of(1) {
        Some(strata_provision::WarmTier::After { after_seconds }) => assert!(
            (290.0..=420.0).contains(&after_seconds),
            "warm age {after_seconds} s for reads that stop at 300 s"
        ),
        other => panic!("workload 1: {other:?}\n{out}"),
    }
    assert!(
        matches!(ec_of(2), Some(strata_provision::WarmTier::Off(_))),
        "workload 2 is read at every age: {:?}",
        ec_of(2)
    );
    // Bad codes are refused with the reason.
    let err = fails(&provision(&trace, "5%", &["--ec", "0+2"]));
    assert!(err.contains("K and M"), "{err}");
    // The cost model prices the code on the same trace.
    let cost = ok(&["cost", s(&trace), "--ec", "4+2", "--ec-after", "300s"]);
    assert!(cost.contains("1.500 encoded"), "{cost}");
    assert!(cost.contains("3.000 replicated"), "{cost}");
}
