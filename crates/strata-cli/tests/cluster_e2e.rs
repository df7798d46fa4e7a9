//! The cluster end to end, with the real binary: a real etcd, `strata meta`
//! and six `strata server --meta` node processes on loopback. 100k objects
//! are written with R=3, a node is killed, every object stays readable
//! throughout, recovery completes, every row is back to three replicas
//! holding the same records, and nothing acknowledged is lost.

mod cluster_common;

use std::io::{Read, Write};
use std::process::Stdio;
use std::time::{Duration, Instant};

use cluster_common::*;

/// A blocking HTTP GET (the test must not trust the client under test to
/// inspect the nodes).
fn http_get(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).ok();
    // Signed with the tests' cluster secret (the nodes' and the metadata
    // service's routes need it).
    let auth = strata_meta::cluster_auth::ClusterSecret::new(TEST_CLUSTER_SECRET)
        .unwrap()
        .sign(
            &strata_meta::cluster_auth::Signed {
                method: "GET",
                path,
                version: None,
                stamp: None,
                host: addr,
            },
            b"",
        );
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nx-strata-auth: {auth}\r\nConnection: close\r\n\r\n"
    )
    .expect("send");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let text = String::from_utf8_lossy(&buf);
    let code: u16 = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    let head_end = buf.windows(4).position(|w| w == b"\r\n\r\n").expect("head") + 4;
    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
    let mut body = buf[head_end..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let mut out = Vec::new();
        let mut rest = &body[..];
        loop {
            let nl = rest.windows(2).position(|w| w == b"\r\n").expect("chunk");
            let n =
                usize::from_str_radix(std::str::from_utf8(&rest[..nl]).expect("hex").trim(), 16)
                    .expect("size");
            if n == 0 {
                break;
            }
            out.extend_from_slice(&rest[nl + 2..nl + 2 + n]);
            rest = &rest[nl + 2 + n + 2..];
        }
        body = out;
    }
    (code, body)
}

#[test]
fn six_nodes_lose_one_and_recover_with_nothing_lost() {
    let t0 = Instant::now();
    let dir = scratch();
    let etcd = start_etcd();
    let ((_meta, meta), mut nodes) = start_cluster_of(Some(&etcd.url), 6, dir.path());
    let st = status(&meta);
    assert_eq!(st["replication"], 3);
    assert_eq!(st["nodes"].as_array().map(Vec::len), Some(6));
    assert!(st["backend"].as_str().unwrap_or("").starts_with("etcd:"));

    // 100k objects, R=3, many in flight.
    let n = 100_000u64;
    let out = ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        &n.to_string(),
        "--size",
        "512",
        "--concurrency",
        "128",
        "--json",
    ]));
    let w: serde_json::Value = serde_json::from_str(out.trim()).expect("load JSON");
    assert_eq!(w["ok"].as_u64(), Some(n), "{out}");
    eprintln!(
        "wrote {n} objects in {:.1} s ({:.0}/s)",
        w["seconds"], w["ops_per_sec"]
    );

    // Kill a node with SIGKILL, and at once: read everything back (through
    // detection, the new table and recovery) while writing new objects.
    let victim = 2;
    nodes[victim].0.kill();
    let killed_at = Instant::now();
    let verify = strata()
        .args([
            "load",
            "--meta",
            &meta,
            "--objects",
            &n.to_string(),
            "--size",
            "512",
            "--concurrency",
            "64",
            "--verify",
            "--json",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("verify");
    let during = ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "5000",
        "--size",
        "512",
        "--prefix",
        "during-",
        "--concurrency",
        "32",
        "--json",
    ]));
    let d: serde_json::Value = serde_json::from_str(during.trim()).expect("JSON");
    assert_eq!(
        d["ok"].as_u64(),
        Some(5000),
        "writes during the failure: {during}"
    );
    let v = verify.wait_with_output().expect("verify");
    assert!(
        v.status.success(),
        "objects unreadable during the failure: {}\n{}",
        String::from_utf8_lossy(&v.stderr),
        String::from_utf8_lossy(&v.stdout)
    );
    let vj: serde_json::Value = serde_json::from_slice(&v.stdout).expect("verify JSON");
    assert_eq!(vj["bad"].as_u64(), Some(0));
    assert_eq!(vj["ok"].as_u64(), Some(n));
    // The readers moved to the new table when the nodes refused the old one.
    assert!(vj["table_version"].as_u64().unwrap_or(0) >= 2, "{vj}");

    // Recovery completes: a new table without the dead node, no row short.
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "120"]));
    let recovered_in = killed_at.elapsed();
    let st = status(&meta);
    assert!(st["table_version"].as_u64().unwrap_or(0) >= 2);
    assert_eq!(st["rows_under_replicated"].as_u64(), Some(0));
    assert_eq!(st["recovery"]["complete"], true);
    let dead: Vec<&serde_json::Value> = st["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .filter(|x| x["state"] == "dead")
        .collect();
    assert_eq!(dead.len(), 1, "exactly the killed node is dead");
    assert_eq!(dead[0]["addr"].as_str(), Some(nodes[victim].1.as_str()));
    eprintln!(
        "recovered {} row copies, {} bytes, in {:.1} s after the kill",
        st["recovery"]["transfers_total"],
        st["recovery"]["bytes_copied"],
        recovered_in.as_secs_f64()
    );

    // Every row: three live disks, and the three replicas hold the same
    // records (per-range counts and checksums, re-read from disk).
    let (_, table) = http_get(&meta, "/v1/map");
    let map: serde_json::Value = serde_json::from_slice(&table).expect("map");
    let live_addr = |disk: u64| -> String {
        let node = map["table"]["disks"]
            .as_array()
            .and_then(|ds| ds.iter().find(|d| d["id"] == disk))
            .map(|d| d["node"].clone())
            .expect("disk");
        map["nodes"]
            .as_array()
            .and_then(|ns| ns.iter().find(|x| x["id"] == node && x["state"] == "up"))
            .and_then(|x| x["addr"].as_str())
            .map(str::to_string)
            .expect("row names a disk on a node that is not up")
    };
    let rows = map["table"]["rows"].as_array().expect("rows");
    let mut records = 0u64;
    for (r, row) in rows.iter().enumerate() {
        let disks = row.as_array().expect("row");
        assert_eq!(disks.len(), 3);
        let mut digests = Vec::new();
        for d in disks {
            let addr = live_addr(d.as_u64().expect("id"));
            let (code, body) = http_get(&addr, &format!("/cluster/v1/rows/{r}/digest"));
            assert_eq!(code, 200);
            let dg: serde_json::Value = serde_json::from_slice(&body).expect("digest");
            assert_eq!(dg["corrupt"], 0);
            digests.push(dg);
        }
        assert_eq!(digests[0], digests[1], "row {r} replicas differ");
        assert_eq!(digests[0], digests[2], "row {r} replicas differ");
        records += digests[0]["counts"]
            .as_array()
            .expect("counts")
            .iter()
            .filter_map(|c| c.as_u64())
            .sum::<u64>();
    }
    assert_eq!(records, n + 5000, "every record is in exactly one row");

    // Nothing acknowledged is lost: both sets read back byte for byte.
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        &n.to_string(),
        "--size",
        "512",
        "--verify",
        "--concurrency",
        "128",
    ]));
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "5000",
        "--size",
        "512",
        "--prefix",
        "during-",
        "--verify",
    ]));
    eprintln!("whole test {:.1} s", t0.elapsed().as_secs_f64());
    drop(nodes);
    let _ = logs(dir.path());
}

/// A node whose disk stops answering (its directory gone under it, the
/// process still up) reports it in its heartbeat: the metadata service marks
/// that disk dead, not the node, and recovery puts every row back on three
/// live disks; nothing acknowledged is lost.
#[test]
fn a_disk_that_stops_answering_is_reported_and_its_rows_recover() {
    let dir = scratch();
    let ((_meta, meta), nodes) = start_cluster_of(None, 4, dir.path());
    let load = |verify: bool| {
        let mut args = vec![
            "load",
            "--meta",
            &meta,
            "--objects",
            "2000",
            "--size",
            "1024",
        ];
        if verify {
            args.push("--verify");
        }
        ok(strata().args(&args))
    };
    load(false);

    // Node 1's one device disappears; the process keeps running.
    let victim = dir.path().join("node1");
    std::fs::rename(&victim, dir.path().join("node1.gone")).expect("rename");
    let disk_state = |st: &serde_json::Value| -> Vec<(String, String)> {
        st["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| {
                let disks: Vec<String> = n["disks"]
                    .as_array()
                    .expect("disks")
                    .iter()
                    .map(|d| d["state"].as_str().unwrap_or("?").to_string())
                    .collect();
                (
                    n["state"].as_str().unwrap_or("?").to_string(),
                    disks.join(","),
                )
            })
            .collect()
    };
    wait_until(
        Duration::from_secs(60),
        "the failed disk to be marked dead",
        || {
            disk_state(&status(&meta))
                .iter()
                .any(|(_, disks)| disks == "dead")
        },
    );
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "120"]));
    let st = status(&meta);
    let states = disk_state(&st);
    assert_eq!(
        states.iter().filter(|(_, d)| d == "dead").count(),
        1,
        "exactly one disk is dead: {states:?}"
    );
    assert!(
        states.iter().all(|(node, _)| node == "up"),
        "every node is still up (a disk failed, not a node): {states:?}"
    );
    assert_eq!(st["rows_under_replicated"].as_u64(), Some(0), "{st}");
    assert_eq!(st["recovery"]["complete"], true, "{st}");
    assert!(st["table_version"].as_u64().unwrap_or(0) >= 2, "{st}");
    load(true);
    // The node says which of its disks failed, once.
    let log = std::fs::read_to_string(dir.path().join("node1.log")).expect("log");
    assert_eq!(
        log.matches("failed (a device did not take a write").count(),
        1,
        "{}",
        logs(dir.path())
    );
    drop(nodes);
}
