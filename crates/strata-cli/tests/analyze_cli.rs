//! `strata analyze` end to end: the real binary on the shared traces, the
//! memory bound's sampling, and clear errors on bad input.

mod lab_common;

use lab_common::*;
use serde_json::Value;

#[test]
fn analyze_cloudphysics_matches_the_trace() {
    let t = traces_dir().join("cloudPhysicsIO.vscsi");
    let a = json(&["analyze", t.to_str().unwrap(), "--json"]);
    assert_eq!(a["requests"], 113_872);
    // SOURCES.md: 48,974 objects, 59% writes / 41% reads, about 2 hours.
    assert_eq!(a["objects_estimate"], 48_974);
    assert_eq!(a["sampling"]["exact"], true);
    let ops = &a["workloads"][0]["ops"];
    let reads = ops[0]["request_fraction"].as_f64().unwrap();
    let writes = ops[1]["request_fraction"].as_f64().unwrap();
    assert!((reads - 0.41).abs() < 0.01, "{reads}");
    assert!((writes - 0.59).abs() < 0.01, "{writes}");
    let dur = a["duration_s"].as_f64().unwrap();
    assert!((6500.0..7300.0).contains(&dur), "{dur}");
    // Sizes: 512 B to a few hundred KB.
    let sizes = &a["workloads"][0]["sizes"];
    assert!(sizes["min"].as_u64().unwrap() >= 512);
    assert!(sizes["p10"].as_u64() <= sizes["p50"].as_u64());
    assert!(sizes["p50"].as_u64() <= sizes["p90"].as_u64());
    // The locality map has the four default distances, non-decreasing in
    // the window and in the distance.
    let loc = a["locality"].as_array().unwrap();
    assert_eq!(loc.len(), 4);
    for l in loc {
        let w: Vec<f64> = l["at_windows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[1].as_f64().unwrap())
            .collect();
        assert!(w.windows(2).all(|x| x[0] <= x[1]));
    }
    // Read heat fractions each sum to one.
    let heat = a["read_heat"].as_array().unwrap();
    let d: f64 = heat
        .iter()
        .map(|h| h["data_fraction"].as_f64().unwrap())
        .sum();
    let r: f64 = heat
        .iter()
        .map(|h| h["read_fraction"].as_f64().unwrap())
        .sum();
    assert!((d - 1.0).abs() < 1e-9 && (r - 1.0).abs() < 1e-9);
}

#[test]
fn analyze_twitter_heat_and_sampling_under_a_memory_bound() {
    let t = traces_dir().join("twitter_cluster52.csv");
    let exact = json(&["analyze", t.to_str().unwrap(), "--json"]);
    assert_eq!(exact["requests"], 1_000_000);
    assert_eq!(exact["objects_estimate"], 143_542);
    // Every byte of the working set was read at least once (all gets):
    // 29,227,218 B (SOURCES.md).
    let data: u64 = exact["read_heat"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["data_bytes"].as_u64().unwrap())
        .sum();
    assert_eq!(data, 29_227_218);

    let sampled = json(&[
        "analyze",
        t.to_str().unwrap(),
        "--json",
        "--max-objects",
        "10000",
    ]);
    assert_eq!(sampled["sampling"]["exact"], false);
    assert!(
        sampled["sampling"]["objects_tracked_peak"]
            .as_u64()
            .unwrap()
            <= 10_001
    );
    assert!(sampled["sampling"]["note"]
        .as_str()
        .unwrap()
        .contains("sample"));
    let est = sampled["objects_estimate"].as_f64().unwrap();
    assert!((est - 143_542.0).abs() / 143_542.0 < 0.2, "{est}");
    // Sampled locality stays close to exact (within 5 points at 1 minute).
    let at = |v: &Value| v["locality"][0]["at_windows"][2][1].as_f64().unwrap();
    assert!((at(&exact) - at(&sampled)).abs() < 0.05);
    // The terminal rendering says so too.
    let out = strata(&["analyze", t.to_str().unwrap(), "--max-objects", "10000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("hash sample"), "{text}");
    assert!(text.contains("Locality map"));
}

#[test]
fn analyze_bad_input_is_a_clear_error() {
    let out = strata(&["analyze", "/nonexistent/trace.bin"]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("/nonexistent/trace.bin"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.csv");
    std::fs::write(&garbage, "time,object,size\n1,2,3\nthis,is,garbage\n").unwrap();
    let out = strata(&["analyze", garbage.to_str().unwrap()]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("garbage.csv"), "{err}");

    let t = traces_dir().join("cloudPhysicsIO.vscsi");
    let out = strata(&[
        "analyze",
        t.to_str().unwrap(),
        "--size-classes",
        "64MiB,16MiB",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("ascending"));
    let out = strata(&["analyze", t.to_str().unwrap(), "--windows", "1s,soon"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--windows"));
}
