//! The live flash dashboard end to end: a real `strata server` under load
//! from `strata bench http`, with a tier plan, serves `/dashboard`; headless
//! Chromium renders it from the server's own data (a screenshot that is not
//! blank, with the charts' colours; every chart of every loaded workload in
//! the DOM with points), and cluster mode serves the same page.
//!
//! `STRATA_SCREENSHOTS=DIR` keeps the node's screenshot as DIR/dashboard.png
//! (docs/screenshots/dashboard.png is made this way).

mod chromium_common;
mod cluster_common;
mod node_common;

use chromium_common::*;
use std::collections::HashMap;
use std::process::Stdio;
use std::time::Duration;

const PLAN: &str = r#"{
  "format": "strata-tier-plan", "version": 1, "total_flash_bytes": 40000000,
  "write_bound_bytes_per_s": 2000000, "train_window": [0, 3600], "policy": "fifo",
  "predicted_flash_hit_ratio": 0.55,
  "workloads": [
    {"id": 1, "name": "alpha", "flash_bytes": 30000000, "write_probability": 1.0,
     "ttl_seconds": null, "eviction": "fifo", "weight": 1,
     "predicted_flash_reads_per_s": 70, "read_ops_per_s": 100},
    {"id": 2, "name": "beta", "flash_bytes": 6000000, "write_probability": 0.5,
     "ttl_seconds": 600, "eviction": "fifo", "weight": 1,
     "predicted_flash_reads_per_s": 30, "read_ops_per_s": 100}
  ]
}"#;

const CHARTS: [&str; 4] = ["flash-bytes", "reads", "hit-ratio", "flash-writes"];

fn data(addr: &str, window: &str) -> serde_json::Value {
    let r = node_common::get(addr, &format!("/_admin/dashboard?window={window}"));
    assert_eq!(r.status, 200, "{}", r.text());
    serde_json::from_slice(&r.body).expect("dashboard JSON")
}

fn series<'a>(d: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    d["series"].as_array()?.iter().find(|s| s["name"] == name)
}

/// `strata bench http` against `addr`, killed when dropped.
fn bench(addr: &str, bucket: &str, args: &[&str]) -> cluster_common::Proc {
    let child = cluster_common::strata()
        .args(["bench", "http", "--addr", addr, "--bucket", bucket])
        .args(["--duration", "300"])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("strata bench http");
    cluster_common::Proc {
        child,
        name: format!("bench {bucket}"),
    }
}

/// The attributes of every `<svg class="chart" ...>` in `dom`.
fn charts(dom: &str) -> Vec<HashMap<String, String>> {
    dom.match_indices("<svg class=\"chart\"")
        .map(|(i, _)| {
            let tag = &dom[i..i + dom[i..].find('>').expect("tag end")];
            let mut attrs = HashMap::new();
            for part in tag.split("\" ") {
                if let Some((k, v)) = part.split_once("=\"") {
                    let k = k.rsplit(' ').next().unwrap_or(k);
                    attrs.insert(k.to_string(), v.trim_end_matches('"').to_string());
                }
            }
            attrs
        })
        .collect()
}

/// Asserts every chart of each of `names` is in `dom` with points.
fn assert_charts(dom: &str, names: &[&str], skip: &[(&str, &str)]) {
    let all = charts(dom);
    for name in names {
        for kind in CHARTS {
            let c = all
                .iter()
                .find(|a| {
                    a.get("data-series").map(String::as_str) == Some(*name)
                        && a.get("data-chart").map(String::as_str) == Some(kind)
                })
                .unwrap_or_else(|| panic!("no {kind} chart of {name} in the DOM"));
            if skip.contains(&(*name, kind)) {
                continue;
            }
            let n: usize = c["data-points"].parse().expect("data-points");
            assert!(n > 0, "the {kind} chart of {name} has no points");
        }
    }
}

#[test]
fn node_dashboard_renders_live_charts_under_load() {
    let dir = tempfile::tempdir().unwrap();
    let server = node_common::Server::start(
        &dir.path().join("data"),
        &["--flash-capacity", "64MiB", "--ram-cache", "2MiB"],
    );
    let addr = server.addr.clone();
    let r = node_common::request(&addr, "POST", "/_admin/plan", &[], Some(PLAN.as_bytes()))
        .expect("POST plan");
    assert_eq!(r.status, 200, "{}", r.text());

    // The page: one self-contained document that may talk to this server only.
    let page = node_common::get(&addr, "/dashboard");
    assert_eq!(page.status, 200);
    assert!(page
        .header("content-type")
        .unwrap_or("")
        .starts_with("text/html"));
    let csp = page.header("content-security-policy").unwrap_or("");
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    let refs = external_references(&page.text());
    assert!(refs.is_empty(), "the page references {refs:?}");
    let r = node_common::get(&addr, "/_admin/dashboard?window=week");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("hour or day"));

    // Load: two workloads, reads and writes, until the end of the test.
    let _alpha = bench(
        &addr,
        "alpha",
        &[
            "--sizes",
            "4KiB",
            "--prefill",
            "3000",
            "--popularity",
            "age",
        ]
        .into_iter()
        .chain(["--read-fraction", "0.8", "--concurrency", "4"])
        .collect::<Vec<_>>(),
    );
    let _beta = bench(
        &addr,
        "beta",
        &[
            "--sizes",
            "16KiB",
            "--prefill",
            "1500",
            "--read-fraction",
            "0.9",
        ]
        .into_iter()
        .chain(["--concurrency", "2", "--seed", "2"])
        .collect::<Vec<_>>(),
    );
    // Wait for three points with reads in each workload's hour (two steps
    // of 10 s closed): the charts then have lines, not dots.
    cluster_common::wait_until(Duration::from_secs(120), "reads on the dashboard", || {
        let d = data(&addr, "hour");
        ["alpha", "beta"].iter().all(|n| {
            series(&d, n).is_some_and(|s| {
                s["points"]["flash_hit_ratio"]
                    .as_array()
                    .is_some_and(|v| v.iter().filter(|x| !x.is_null()).count() >= 3)
            })
        })
    });

    let d = data(&addr, "hour");
    assert_eq!(d["mode"], "node");
    assert_eq!(d["step_seconds"], 10);
    assert_eq!(d["plan"]["loaded"], true);
    assert_eq!(d["plan"]["predicted_flash_hit_ratio"], 0.55);
    assert_eq!(d["plan"]["write_bound_bytes_per_s"], 2e6);
    assert_eq!(d["series"][0]["name"], "all workloads");
    assert_eq!(d["series"][0]["total"], true);
    for (name, alloc, predicted) in [("alpha", 30_000_000u64, 0.7), ("beta", 6_000_000, 0.3)] {
        let s = series(&d, name).expect("series");
        assert_eq!(s["plan_flash_bytes"], alloc, "{name}");
        assert_eq!(s["predicted_flash_hit_ratio"], predicted, "{name}");
        assert!(s["reads"].as_u64().unwrap_or(0) > 0, "{name}");
        let p = &s["points"];
        let some = |k: &str| {
            p[k].as_array()
                .expect("column")
                .iter()
                .any(|v| v.as_f64().is_some_and(|x| x > 0.0))
        };
        // Reads are served, objects are written to flash and held there.
        assert!(
            some("reads_flash_per_s") || some("reads_disk_per_s") || some("reads_ram_per_s"),
            "{name}: {p}"
        );
        assert!(some("flash_write_bytes_per_s"), "{name}: {p}");
        assert!(some("flash_bytes"), "{name}: {p}");
        let n = p["t"].as_array().expect("t").len();
        for k in [
            "seconds",
            "reads_disk_per_s",
            "flash_hit_ratio",
            "plan_flash_bytes",
        ] {
            assert_eq!(p[k].as_array().expect("column").len(), n, "{name}: {k}");
        }
    }
    // The day's window has the same reads, in 5-minute points.
    let day = data(&addr, "day");
    assert_eq!(day["step_seconds"], 300);
    assert!(series(&day, "alpha").is_some_and(|s| s["reads"].as_u64().unwrap_or(0) > 0));

    // Chromium runs the page's script against the server (still under load).
    let url = format!("http://{addr}/dashboard#token={}", node_common::ADMIN_TOKEN);
    let (dom, log) = dump_dom(&url, 8000);
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:?}");
    assert!(
        dom.contains("data-state=\"ready\""),
        "the page never got its data"
    );
    assert_charts(&dom, &["all workloads", "alpha", "beta"], &[]);
    assert!(dom.matches("data-key=\"flash_hit_ratio\"").count() >= 3);
    assert!(
        dom.matches("data-key=\"predicted_flash_hit_ratio\"")
            .count()
            >= 3
    );
    assert!(dom.contains("data-key=\"write_bound_bytes_per_s\""));

    let shots = tempfile::tempdir().unwrap();
    let shot = shots.path().join("dashboard.png");
    let log = screenshot(&url, &shot, 1400, 1200, 8000);
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:?}");
    if let Some(keep) = std::env::var_os("STRATA_SCREENSHOTS") {
        let keep = std::path::PathBuf::from(keep);
        std::fs::create_dir_all(&keep).expect("screenshot dir");
        std::fs::copy(&shot, keep.join("dashboard.png")).expect("keep screenshot");
    }
    let (w, h, px) = decode(&shot);
    assert_eq!((w, h), (1400, 1200));
    let var = grey_variance(&px);
    assert!(
        var > 200.0,
        "screenshot is (nearly) blank: grey variance {var:.1}"
    );
    // The charts' colours are on screen: flash blue, disk orange, RAM
    // purple, write green, plan vermillion.
    for (what, rgb, min) in [
        ("flash blue", [0x00, 0x72, 0xB2], 1000),
        ("disk orange", [0xE6, 0x9F, 0x00], 1000),
        ("RAM purple", [0xCC, 0x79, 0xA7], 300),
        ("write green", [0x00, 0x9E, 0x73], 300),
        ("plan vermillion", [0xD5, 0x5E, 0x00], 200),
    ] {
        let n = count_colour(&px, rgb, 24);
        eprintln!("{what} pixels: {n}");
        assert!(n > min, "{what} pixels: {n}");
    }
    // A batch PUT into a bucket named like the page still works.
    let batch = node_common::batch_body(&[("x".into(), b"1".to_vec())]);
    let r = node_common::request(&addr, "POST", "/dashboard", &[], Some(&batch)).expect("POST");
    assert_eq!(r.status, 201, "{}", r.text());
}

#[test]
fn cluster_dashboard_serves_the_same_page() {
    use cluster_common::*;
    let dir = scratch();
    let meta = format!("127.0.0.1:{}", free_port());
    let mut cmd = strata();
    cmd.args([
        "meta",
        "--listen",
        &meta,
        "--initial-nodes",
        "1",
        "--replication",
        "1",
    ])
    .arg("--data")
    .arg(dir.path().join("meta"))
    .stdout(Stdio::null())
    .stderr(std::fs::File::create(dir.path().join("meta.log")).expect("log"));
    let _meta = Proc {
        child: cmd.spawn().expect("strata meta"),
        name: "meta".into(),
    };
    wait_until(Duration::from_secs(20), "meta to listen", || {
        std::net::TcpStream::connect(&meta).is_ok()
    });
    let (_node, addr) = start_node(&meta, &dir.path().join("n0"), &dir.path().join("n0.log"));
    wait_for_table(&meta, dir.path());
    let load = |verify: bool| {
        let mut c = strata();
        c.args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "300",
            "--size",
            "4KiB",
        ])
        .args(["--bucket", "gamma"]);
        if verify {
            c.arg("--verify");
        }
        ok(&mut c);
    };
    load(false);
    load(true);
    wait_until(Duration::from_secs(30), "reads on the dashboard", || {
        series(&data(&addr, "hour"), "gamma")
            .is_some_and(|s| s["reads"].as_u64().unwrap_or(0) >= 300)
    });
    let d = data(&addr, "hour");
    assert_eq!(d["mode"], "cluster");
    assert_eq!(d["plan"]["loaded"], false);
    let g = series(&d, "gamma").expect("gamma");
    // Flash bytes and writes are per row, not per bucket: all workloads only.
    assert!(g["flash_bytes"].is_null());
    assert!(g["points"]["flash_write_bytes_per_s"]
        .as_array()
        .expect("column")
        .iter()
        .all(|v| v.is_null()));
    assert!(d["series"][0]["flash_bytes"].is_u64());

    let (dom, log) = dump_dom(
        &format!("http://{addr}/dashboard#token={}", node_common::ADMIN_TOKEN),
        6000,
    );
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:?}");
    assert!(
        dom.contains("data-state=\"ready\""),
        "the page never got its data"
    );
    assert!(dom.contains("cluster mode"));
    assert_charts(
        &dom,
        &["all workloads", "gamma"],
        &[("gamma", "flash-bytes"), ("gamma", "flash-writes")],
    );
    assert!(dom.contains("flash bytes not known per workload here"));
}
