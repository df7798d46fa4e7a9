//! A cluster node is still a store node: every device registers with its
//! tier class and capacity, rows hold the disk-class devices, the flash in
//! front of them takes new needles with the cluster tier plan's write
//! probability (a bucket with probability 0 never touches flash), the tier
//! mover holds flash to its budget, the RAM cache serves repeated reads
//! (visible in /metrics), and sampled traces come out in the lab's format.

mod cluster_common;

use std::path::Path;
use std::time::Duration;

use cluster_common::*;
use strata_placement::object_hash;

/// Occurrences of `needle` in every file under `dir`.
fn count_in_files(dir: &Path, needle: &[u8]) -> usize {
    let mut n = 0;
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            n += count_in_files(&p, needle);
        } else if let Ok(b) = std::fs::read(&p) {
            n += b.windows(needle.len()).filter(|w| *w == needle).count();
        }
    }
    n
}

/// The name bytes of a record of `bucket` in a needle (bucket, key length
/// 12 for `obj-NNNNNNNN`, then the key's start).
fn name_bytes(bucket: &str) -> Vec<u8> {
    let mut v = bucket.as_bytes().to_vec();
    v.extend_from_slice(&12u16.to_le_bytes());
    v.extend_from_slice(b"obj-");
    v
}

fn plan_json(hot_flash: u64, hot_p: f64) -> String {
    serde_json::json!({
        "format": "strata-tier-plan",
        "version": 1,
        "total_flash_bytes": 1u64 << 20,
        "write_bound_bytes_per_s": null,
        "train_window": [0.0, 1.0],
        "policy": "fifo",
        "predicted_flash_hit_ratio": 0.5,
        "workloads": [
            {"id": 1, "name": "hot", "flash_bytes": hot_flash,
             "write_probability": hot_p, "ttl_seconds": null, "eviction": "fifo",
             "weight": 1.0, "predicted_flash_reads_per_s": 1.0},
            {"id": 2, "name": "cold", "flash_bytes": 0,
             "write_probability": 0.0, "ttl_seconds": null, "eviction": "fifo",
             "weight": 1.0, "predicted_flash_reads_per_s": 0.0}
        ]
    })
    .to_string()
}

fn node_status(addr: &str) -> serde_json::Value {
    let (_, _, b) = http_full(addr, "GET", "/cluster/v1/status", None, "", b"");
    serde_json::from_slice(&b).expect("node status")
}

fn metrics_of(addr: &str) -> String {
    let (_, _, b) = http_full(addr, "GET", "/metrics", None, "", b"");
    String::from_utf8_lossy(&b).into_owned()
}

#[test]
fn devices_tiers_plan_ram_cache_mover_and_traces() {
    let dir = scratch();
    let (_meta_proc, meta) = start_meta(
        None,
        3,
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let n = dir.path().join(format!("n{i}"));
        let p = |s: &str| n.join(s).display().to_string();
        let (flash, d0, d1, traces, id) = (p("flash"), p("d0"), p("d1"), p("traces"), p("id"));
        let args = [
            "--data",
            &id,
            "--flash",
            &flash,
            "--disk",
            &d0,
            "--disk",
            &d1,
            "--ram-cache",
            "8MiB",
            "--trace-dir",
            &traces,
            "--trace-sample",
            "1",
            "--trace-rotate",
            "100",
            "--segment-size",
            "64KiB",
            "--flash-capacity",
            "4MiB",
            "--scrub-every",
            "0",
        ];
        let (proc_, addr) = start_node_with(&meta, &args, &dir.path().join(format!("n{i}.log")));
        nodes.push((proc_, addr, n));
    }
    wait_for_table(&meta, dir.path());

    // Every device registered, with its tier class; rows hold the two
    // disk-class devices of each node, never two of one node.
    let st = status(&meta);
    for n in st["nodes"].as_array().expect("nodes") {
        let disks = n["disks"].as_array().expect("disks");
        assert_eq!(disks.len(), 3, "{n}");
        assert_eq!(disks[0]["tier"], "flash");
        assert_eq!(disks[0]["state"], "flash-tier");
        assert_eq!(disks[0]["rows"], 0);
        for d in &disks[1..] {
            assert_eq!(d["tier"], "disk");
            assert_eq!(d["state"], "live");
            assert!(d["rows"].as_u64().unwrap_or(0) > 0, "{d}");
            assert!(d["capacity_bytes"].as_u64().unwrap_or(0) > 0, "{d}");
        }
    }
    let (t, map) = map_of(&meta);
    assert_eq!(t.disks().len(), 6);
    assert!(t.uncovered_pairs().is_empty());
    for row in t.rows() {
        let mut owners: Vec<u32> = row
            .iter()
            .map(|d| t.disk(*d).expect("disk").node.0)
            .collect();
        owners.sort_unstable();
        owners.dedup();
        assert_eq!(owners.len(), 3, "a node's disks share a row");
    }
    let human = ok(strata().args(["cluster", "status", "--meta", &meta]));
    assert!(human.contains("flash-tier"), "{human}");

    // The tier plan: `hot` always to flash, `cold` never. A bad plan is refused.
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, "{\"workloads\": 3}").expect("write");
    let out = run(strata()
        .args(["cluster", "plan", "set", "--meta", &meta])
        .arg(&bad));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a valid tier plan"));
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, plan_json(1 << 20, 1.0)).expect("write");
    ok(strata()
        .args(["cluster", "plan", "set", "--meta", &meta])
        .arg(&plan));
    let got = ok(strata().args(["cluster", "plan", "get", "--meta", &meta]));
    assert!(got.contains("\"hot\""), "{got}");
    for (_, addr, _) in &nodes {
        wait_until(Duration::from_secs(20), "the plan on every node", || {
            node_status(addr)["plan_version"] == 1
        });
        assert_eq!(node_status(addr)["flash_budget_bytes"], 1 << 20);
    }

    for bucket in ["cold", "hot"] {
        ok(strata().args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "300",
            "--size",
            "2KiB",
            "--bucket",
            bucket,
        ]));
    }
    // Nothing of `cold` was ever written to flash (the flash directories
    // hold no needle of it, moved segments went to disk), all of it is on
    // the disks; `hot` went to flash.
    let mut cold_on_disk = 0;
    let mut hot_anywhere = 0;
    for (_, _, n) in &nodes {
        assert_eq!(count_in_files(&n.join("flash"), &name_bytes("cold")), 0);
        cold_on_disk += count_in_files(&n.join("d0"), &name_bytes("cold"))
            + count_in_files(&n.join("d1"), &name_bytes("cold"));
        hot_anywhere += count_in_files(&n.join("flash"), &name_bytes("hot"))
            + count_in_files(&n.join("d0"), &name_bytes("hot"))
            + count_in_files(&n.join("d1"), &name_bytes("hot"));
    }
    assert!(
        cold_on_disk >= 900,
        "3 replicas of 300 cold objects: {cold_on_disk}"
    );
    assert!(hot_anywhere >= 900, "{hot_anywhere}");
    // Reads say where they were served from: cold from disk on every
    // replica; hot from flash for the newest objects.
    for i in 0..20 {
        let key = format!("obj-{i:08}");
        let row = t.row_of(object_hash("cold", &key));
        for &d in t.row(row) {
            let (code, head, _) = http_full(
                &addr_of(&map, &t, d),
                "GET",
                &format!("/cluster/v1/rows/{row}/objects/cold/{key}?raw=1"),
                Some(1),
                "",
                b"",
            );
            assert_eq!(code, 200);
            assert_eq!(header(&head, "x-strata-tier"), Some("disk"));
        }
    }
    let newest = "obj-00000299";
    let row = t.row_of(object_hash("hot", newest));
    let addr = addr_of(&map, &t, t.row(row)[0]);
    let path = format!("/cluster/v1/rows/{row}/objects/hot/{newest}");
    let (code, head, first) = http_full(&addr, "GET", &path, Some(1), "", b"");
    assert_eq!(code, 200);
    assert_eq!(header(&head, "x-strata-tier"), Some("flash"));
    // The RAM cache serves the repeated read, and says so in /metrics.
    let hits_before = metric(&metrics_of(&addr), "strata_ram_cache_hits_total").unwrap_or(0.0);
    let (code, head, again) = http_full(&addr, "GET", &path, Some(1), "", b"");
    assert_eq!(code, 200);
    assert_eq!(header(&head, "x-strata-tier"), Some("ram"));
    assert_eq!(first, again);
    let m = metrics_of(&addr);
    assert!(
        metric(&m, "strata_ram_cache_hits_total").unwrap_or(0.0) >= hits_before + 1.0,
        "{m}"
    );
    // A write invalidates the cached copy: the next read is the new bytes.
    ok(strata().args(["put", "--meta", &meta, &format!("hot/{newest}"), "-"]));
    let (_, head, after) = http_full(&addr, "GET", &path, Some(1), "", b"");
    assert_ne!(header(&head, "x-strata-tier"), Some("ram"));
    // The new record: an empty object stored whole with its random cookie
    // (kind 3, cookie u32, no bytes).
    assert_eq!((after.len(), after[0]), (5, 3), "{after:?}");

    // A plan that gives `hot` 256 KiB: the tier mover brings each node's
    // flash down to it (300 hot objects of 2 KiB, 3 replicas over 3 nodes,
    // make ~600 KiB each) by moving whole segments to disk.
    std::fs::write(&plan, plan_json(256 << 10, 1.0)).expect("write");
    ok(strata()
        .args(["cluster", "plan", "set", "--meta", &meta])
        .arg(&plan));
    for (_, addr, _) in &nodes {
        // The flash gauge is refreshed by the mover's passes (every 250 ms):
        // wait for the new budget, a move, and the gauge under the budget,
        // so a fast run cannot read a gauge from before the load.
        let start = std::time::Instant::now();
        loop {
            let m = metrics_of(addr);
            // `hot` within its 256 KiB; `cold` and `_shared` (0 bytes of
            // flash) hold no object, only their empty active segments'
            // headers, one per row part (at most 1 KiB each).
            let of = |w: &str| {
                metric(
                    &m,
                    &format!("strata_workload_flash_bytes{{workload=\"{w}\"}}"),
                )
                .unwrap_or(f64::MAX)
            };
            if metric(&m, "strata_server_flash_budget_bytes") == Some((256 << 10) as f64)
                && metric(&m, "strata_mover_segments_total").unwrap_or(0.0) >= 1.0
                && of("hot") <= (256 << 10) as f64
                && of("cold") <= 1024.0
                && of("_shared") <= 1024.0
            {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "flash not within its budget on {addr}:\n{}",
                m.lines()
                    .filter(|l| l.contains("flash") || l.contains("mover"))
                    .collect::<Vec<_>>()
                    .join("\n")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let m = metrics_of(addr);
        assert!(
            metric(&m, "strata_mover_segments_total").unwrap_or(0.0) >= 1.0,
            "{m}"
        );
    }
    // Every object is still readable, wherever the mover put it.
    for bucket in ["cold", "hot"] {
        ok(strata().args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "299",
            "--size",
            "2KiB",
            "--bucket",
            bucket,
            "--verify",
        ]));
    }

    // Traces: rotated files of sampled requests that the lab reads, with
    // both workloads.
    let (_, _, n0) = &nodes[0];
    let files: Vec<std::path::PathBuf> = std::fs::read_dir(n0.join("traces"))
        .expect("trace dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| !p.to_string_lossy().ends_with(".part"))
        .collect();
    assert!(!files.is_empty(), "no finished trace file");
    let mut requests = 0u64;
    let mut text = String::new();
    for f in &files {
        let out = ok(strata().args(["trace", "stats", "--json"]).arg(f));
        let v: serde_json::Value = serde_json::from_str(&out).expect("stats JSON");
        requests += v["total"]["requests"].as_u64().unwrap_or(0);
        text.push_str(&out);
    }
    assert!(requests > 0, "{text}");
    // Every trace names its workloads: the lab prints bucket names.
    for bucket in ["hot", "cold"] {
        assert!(
            text.contains(&format!("\"{bucket}\"")),
            "workload {bucket} missing: {text}"
        );
    }

    // A new plan version reaches every node: `hot` now goes to disk.
    std::fs::write(&plan, plan_json(256 << 10, 0.0)).expect("write");
    ok(strata()
        .args(["cluster", "plan", "set", "--meta", &meta])
        .arg(&plan));
    for (_, addr, _) in &nodes {
        wait_until(Duration::from_secs(20), "plan version 3", || {
            node_status(addr)["plan_version"] == 3
        });
    }
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "50",
        "--size",
        "2KiB",
        "--bucket",
        "hot",
        "--prefix",
        "late-",
    ]));
    for (_, _, n) in &nodes {
        let mut late = b"hot".to_vec();
        late.extend_from_slice(&13u16.to_le_bytes());
        late.extend_from_slice(b"late-");
        assert_eq!(count_in_files(&n.join("flash"), &late), 0);
    }
    drop(nodes);
}

/// The per-workload flash gauge of `workload` on a node.
fn workload_flash(addr: &str, workload: &str) -> f64 {
    let m = metrics_of(addr);
    metric(
        &m,
        &format!("strata_workload_flash_bytes{{workload=\"{workload}\"}}"),
    )
    .unwrap_or(0.0)
}

#[test]
fn per_workload_flash_bytes_and_ttl_in_a_three_node_cluster() {
    let dir = scratch();
    let (_meta_proc, meta) = start_meta(
        None,
        3,
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let n = dir.path().join(format!("n{i}"));
        let p = |s: &str| n.join(s).display().to_string();
        let (flash, d0, id) = (p("flash"), p("d0"), p("id"));
        let args = [
            "--data",
            &id,
            "--flash",
            &flash,
            "--disk",
            &d0,
            "--ram-cache",
            "0",
            "--segment-size",
            "64KiB",
            "--flash-capacity",
            "16MiB",
            "--flash-burst",
            "0",
            "--max-workloads",
            "4",
            "--flash-cache",
            "1MiB",
            "--scrub-every",
            "0",
        ];
        let (proc_, addr) = start_node_with(&meta, &args, &dir.path().join(format!("n{i}.log")));
        nodes.push((proc_, addr));
    }
    wait_for_table(&meta, dir.path());
    // `fresh` may hold 4 MiB but only for 3 s (its TTL); `big` holds at
    // most 192 KiB per node, with no TTL.
    let plan = serde_json::json!({
        "format": "strata-tier-plan", "version": 1,
        "total_flash_bytes": (4u64 << 20) + (192 << 10),
        "write_bound_bytes_per_s": null, "train_window": [0.0, 1.0],
        "policy": "fifo", "predicted_flash_hit_ratio": 0.5,
        "workloads": [
            {"id": 1, "name": "fresh", "flash_bytes": 4u64 << 20,
             "write_probability": 1.0, "ttl_seconds": 3.0, "eviction": "fifo",
             "weight": 1.0, "predicted_flash_reads_per_s": 1.0},
            {"id": 2, "name": "big", "flash_bytes": 192u64 << 10,
             "write_probability": 1.0, "ttl_seconds": null, "eviction": "fifo",
             "weight": 1.0, "predicted_flash_reads_per_s": 1.0}
        ]
    });
    // One plan path: the plan POSTed to one node's /_admin/plan goes
    // through the metadata service to every node; a plan over a node's
    // --max-workloads is refused there with the reason.
    let (code, _, _) = http_full(&nodes[1].1, "GET", "/_admin/plan", None, "", b"");
    assert_eq!(code, 404, "no plan yet");
    let mut wide = plan.clone();
    wide["total_flash_bytes"] = (5u64 * (4 << 20)).into();
    let w0 = wide["workloads"][0].clone();
    wide["workloads"] = serde_json::Value::Array(
        (1..=5)
            .map(|i| {
                let mut w = w0.clone();
                w["id"] = i.into();
                w["name"] = format!("w{i}").into();
                w
            })
            .collect(),
    );
    let (code, _, body) = http_full(
        &nodes[0].1,
        "POST",
        "/_admin/plan",
        None,
        "",
        wide.to_string().as_bytes(),
    );
    assert_eq!(code, 400, "{}", String::from_utf8_lossy(&body));
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("--max-workloads"), "{text}");
    // The control routes need the admin token: a node's /_admin/plan and
    // the metadata service's plan writes refuse a request without it (401)
    // or with a wrong one (403), and `strata cluster plan set` says which
    // variable to set.
    let body = plan.to_string();
    for (addr, path, method) in [
        (nodes[0].1.as_str(), "/_admin/plan", "POST"),
        (meta.as_str(), "/v1/tier-plan", "PUT"),
    ] {
        let (code, _, _) = http_full(
            addr,
            method,
            path,
            None,
            "Authorization: \r\n",
            body.as_bytes(),
        );
        assert_eq!(code, 401, "{method} {path} without a token");
        let (code, _, _) = http_full(
            addr,
            method,
            path,
            None,
            "Authorization: Bearer guess\r\n",
            body.as_bytes(),
        );
        assert_eq!(code, 403, "{method} {path} with a wrong token");
    }
    let plan_file = dir.path().join("plan.json");
    std::fs::write(&plan_file, &body).expect("write");
    let out = run(strata()
        .env_remove("STRATA_ADMIN_TOKEN")
        .args(["cluster", "plan", "set", "--meta", &meta])
        .arg(&plan_file));
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("STRATA_ADMIN_TOKEN"));
    let (code, _, body) = http_full(
        &nodes[0].1,
        "POST",
        "/_admin/plan",
        None,
        "",
        plan.to_string().as_bytes(),
    );
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&body));
    for (_, addr) in &nodes {
        wait_until(Duration::from_secs(20), "the plan on every node", || {
            node_status(addr)["plan_version"] == 1
        });
        let (code, _, body) = http_full(addr, "GET", "/_admin/plan", None, "", b"");
        assert_eq!(code, 200);
        assert!(String::from_utf8_lossy(&body).contains("\"fresh\""));
    }
    for (bucket, n) in [("fresh", "60"), ("big", "300")] {
        ok(strata().args([
            "load",
            "--meta",
            &meta,
            "--objects",
            n,
            "--size",
            "2KiB",
            "--bucket",
            bucket,
        ]));
    }
    // Both went to flash; each workload's parts of the rows are its own.
    for (_, addr) in &nodes {
        wait_until(Duration::from_secs(10), "fresh on flash", || {
            workload_flash(addr, "fresh") > 0.0
        });
    }
    // `big` is held to its 192 KiB by moving its oldest segments, while
    // `fresh` (under its allocation) keeps its flash until its TTL passes;
    // then all of it leaves flash, and `big` keeps its allocation.
    for (_, addr) in &nodes {
        wait_until(
            Duration::from_secs(20),
            "big within its flash bytes",
            || {
                let b = workload_flash(addr, "big");
                b > 0.0 && b <= (192 << 10) as f64
            },
        );
    }
    // The newest `fresh` objects leave flash on every replica once the TTL
    // passed (the gauge keeps only empty active segments' headers).
    let (t, map) = map_of(&meta);
    let tier_of = |bucket: &str, key: &str| -> Vec<String> {
        let row = t.row_of(object_hash(bucket, key));
        t.row(row)
            .iter()
            .map(|&d| {
                let (code, head, _) = http_full(
                    &addr_of(&map, &t, d),
                    "GET",
                    &format!("/cluster/v1/rows/{row}/objects/{bucket}/{key}"),
                    Some(1),
                    "",
                    b"",
                );
                assert_eq!(code, 200);
                header(&head, "x-strata-tier").unwrap_or("").to_string()
            })
            .collect()
    };
    let newest: Vec<String> = (55..60).map(|i| format!("obj-{i:08}")).collect();
    wait_until(Duration::from_secs(30), "fresh evicted by its TTL", || {
        newest
            .iter()
            .all(|k| tier_of("fresh", k).iter().all(|t| t != "flash"))
    });
    for (_, addr) in &nodes {
        // The gauge is refreshed at the start of the mover's next pass.
        wait_until(Duration::from_secs(30), "the fresh gauge to follow", || {
            workload_flash(addr, "fresh") < (64 << 10) as f64
        });
        let b = workload_flash(addr, "big");
        assert!(b > 0.0 && b <= (192 << 10) as f64, "big holds {b}");
    }
    // The flash read cache takes the disk-resident objects that are read
    // again (the RAM cache is off here).
    wait_until(Duration::from_secs(10), "a flash read cache hit", || {
        tier_of("fresh", "obj-00000058")
            .iter()
            .all(|t| t == "flash_cache")
    });
    // /metrics: the single node's series, fed here too.
    for (_, addr) in &nodes {
        let m = metrics_of(addr);
        for series in [
            "strata_commit_batches_total",
            "strata_commit_objects_total",
            "strata_workload_writes_total{workload=\"fresh\"}",
            "strata_workload_flash_writes_total{workload=\"big\"}",
            "strata_workload_written_bytes_total{workload=\"big\"}",
            "strata_mover_segments_total",
        ] {
            assert!(metric(&m, series).unwrap_or(0.0) > 0.0, "{series}: {m}");
        }
    }
    let m = metrics_of(&meta);
    assert!(m.contains("strata_meta_tier_plan_version"), "{m}");
    // Every object reads back, wherever the mover put it.
    for (bucket, n) in [("fresh", "60"), ("big", "300")] {
        ok(strata().args([
            "load",
            "--meta",
            &meta,
            "--objects",
            n,
            "--size",
            "2KiB",
            "--bucket",
            bucket,
            "--verify",
        ]));
    }
    drop(nodes);
}
