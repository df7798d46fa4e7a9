//! `strata model` end to end: replication, what-ifs and the flash-buffer
//! sweep on a shared trace, and errors on bad settings.

mod lab_common;

use lab_common::*;

#[test]
fn model_replicates_writes_and_compares_local_compaction() {
    let t = trace("cloudPhysicsIO.vscsi");
    let v = json(&[
        "model",
        t.to_str().unwrap(),
        "--json",
        "--local-compaction",
        "--compare",
        "--segment-size",
        "16MiB",
    ]);
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 2);
    let base = &runs[0]["report"];
    let local = &runs[1]["report"];
    assert_eq!(runs[0]["name"], "baseline");
    let w = base["trace_write_bytes"].as_u64().unwrap();
    assert!(w > 0);
    // R = 3: every written byte lands three times on the node's disks (plus
    // compaction output) and twice on the network.
    assert!(base["disk_write_bytes"].as_u64().unwrap() >= 3 * w);
    assert!(base["network_bytes"].as_u64().unwrap() >= 2 * w);
    // The block trace overwrites blocks: segments become garbage and are
    // compacted; doing it locally trades network bytes for disk reads.
    assert!(base["compactions"].as_u64().unwrap() > 0);
    assert!(local["network_bytes"].as_u64() < base["network_bytes"].as_u64());
    assert!(local["disk_read_bytes"].as_u64() > base["disk_read_bytes"].as_u64());
    // Latency percentiles are ordered.
    let f = &base["foreground"];
    assert!(f["p50_ms"].as_f64() <= f["p99_ms"].as_f64());
    assert!(f["p99_ms"].as_f64() <= f["max_ms"].as_f64());
}

#[test]
fn model_sweeps_the_flash_buffer_threshold() {
    let t = trace("cloudPhysicsIO.vscsi");
    let v = json(&[
        "model",
        t.to_str().unwrap(),
        "--json",
        "--flash",
        "20%",
        "--sweep-flash-buffer",
    ]);
    let runs = v.as_array().unwrap();
    assert_eq!(runs.len(), 7);
    let disk_writes: Vec<u64> = runs
        .iter()
        .map(|r| r["report"]["disk_write_bytes"].as_u64().unwrap())
        .collect();
    // Buffering more writes in flash never adds disk writes in this window,
    // and buffering all of them removes most.
    assert!(disk_writes[6] < disk_writes[0]);
    let text = String::from_utf8_lossy(
        &strata(&[
            "model",
            t.to_str().unwrap(),
            "--flash",
            "20%",
            "--sweep-flash-buffer",
        ])
        .stdout,
    )
    .to_string();
    assert!(text.contains("buffer <64KiB"), "{text}");
    assert!(text.contains("foreground (all GETs)"));
}

#[test]
fn model_bad_settings_are_clear_errors() {
    let t = trace("cloudPhysicsIO.vscsi");
    let out = strata(&["model", t.to_str().unwrap(), "--disks", "0"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("at least one disk"));
    let out = strata(&["model", t.to_str().unwrap(), "--layout", "raid5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--layout"));
    let out = strata(&["model", t.to_str().unwrap(), "--compare"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("what-if"));
}
