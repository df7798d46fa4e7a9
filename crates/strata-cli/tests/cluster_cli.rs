//! The cluster commands with the real binary, on the embedded (file)
//! metadata store: put/get/rm of small and multi-tract objects, add-node and
//! remove-node with data moving, a metadata restart, scrubbing that finds a
//! flipped byte and a missing replica and repairs both, and clear errors on
//! bad input.

mod cluster_common;

use std::io::Write;
use std::time::Duration;

use cluster_common::*;
use strata_placement::object_hash;

fn http(addr: &str, method: &str, path: &str, version: Option<u64>) -> (u16, Vec<u8>) {
    http_body(addr, method, path, version, "", b"")
}

fn http_body(
    addr: &str,
    method: &str,
    path: &str,
    version: Option<u64>,
    headers: &str,
    body: &[u8],
) -> (u16, Vec<u8>) {
    let (code, _, body) = http_full(addr, method, path, version, headers, body);
    (code, body)
}

#[test]
fn bad_input_is_a_clear_error() {
    let dead = format!("127.0.0.1:{}", free_port());
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["put", "--meta", &dead, "no-slash", "/dev/null"],
            "BUCKET/KEY",
        ),
        (
            vec!["get", "--meta", &dead, "b/k", "--deadline", "1"],
            "metadata service",
        ),
        (
            vec!["cluster", "status", "--meta", &dead],
            "asking the metadata service",
        ),
        (
            vec!["cluster", "simulate-recovery", "--disks", "100,x"],
            "--disks",
        ),
        (
            vec!["cluster", "simulate-recovery", "--disks", "10"],
            "fewer nodes than replicas",
        ),
        (
            vec![
                "cluster",
                "simulate-recovery",
                "--disks",
                "100",
                "--ec",
                "10+4",
            ],
            "too few nodes for stripes 14 wide",
        ),
        (
            vec![
                "cluster",
                "simulate-recovery",
                "--ec",
                "4+2",
                "--replication",
                "3",
            ],
            "cannot be used with",
        ),
        (vec!["cluster", "simulate-recovery", "--ec", "4+0"], "--ec"),
        (vec!["meta", "--replication", "0"], "--replication"),
        (vec!["meta", "--tract-size", "12 parsecs"], "--tract-size"),
        (
            vec![
                "load",
                "--meta",
                &dead,
                "--objects",
                "1",
                "--size",
                "1",
                "--concurrency",
                "0",
            ],
            "--concurrency",
        ),
    ];
    for (args, want) in cases {
        let out = run(strata().args(&args));
        assert!(!out.status.success(), "{args:?} succeeded");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{args:?}: {err}");
    }
    // Every new command explains itself.
    for cmd in [
        ["meta", "--help"],
        ["cluster", "--help"],
        ["load", "--help"],
        ["put", "--help"],
    ] {
        assert!(run(strata().args(cmd)).status.success());
    }
}

#[test]
fn simulation_recovers_faster_on_more_disks() {
    let out = ok(strata().args([
        "cluster",
        "simulate-recovery",
        "--disks",
        "100,400",
        "--lost",
        "47GB",
        "--json",
    ]));
    let rows: Vec<serde_json::Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("json line"))
        .collect();
    assert_eq!(rows.len(), 2);
    let (a, b) = (&rows[0], &rows[1]);
    assert_eq!(a["lost_rows"], 0);
    let (ta, tb) = (
        a["seconds"].as_f64().unwrap_or(0.0),
        b["seconds"].as_f64().unwrap_or(0.0),
    );
    assert!(tb < ta / 3.0, "100 disks {ta} s, 400 disks {tb} s");
}

#[test]
fn one_cluster_put_get_rm_tracts_add_remove_restart_scrub() {
    let dir = scratch();
    let meta_dir = dir.path().join("meta");
    let port = free_port();
    let meta = format!("127.0.0.1:{port}");
    let start_meta = || {
        let child = strata()
            .args([
                "meta",
                "--listen",
                &meta,
                "--initial-nodes",
                "3",
                "--tract-size",
                "64KiB",
            ])
            .args(["--suspect-after", "1", "--data"])
            .arg(&meta_dir)
            .stderr(std::fs::File::create(dir.path().join("meta.log")).expect("log"))
            .spawn()
            .expect("meta");
        wait_until(Duration::from_secs(20), "meta", || {
            std::net::TcpStream::connect(&meta).is_ok()
        });
        Proc {
            child,
            name: "meta".into(),
        }
    };
    let mut meta_proc = start_meta();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("n{i}"));
        let port = free_port();
        let addr = format!("127.0.0.1:{port}");
        let child = strata()
            .args([
                "server",
                "--meta",
                &meta,
                "--listen",
                &addr,
                "--scrub-every",
                "1",
                "--data",
            ])
            .arg(&data)
            .arg("--disk")
            .arg(&data)
            .stderr(std::fs::File::create(dir.path().join(format!("n{i}.log"))).expect("log"))
            .spawn()
            .expect("node");
        nodes.push((
            Proc {
                child,
                name: addr.clone(),
            },
            addr,
            data,
        ));
    }
    wait_for_table(&meta, dir.path());
    assert!(status(&meta)["backend"]
        .as_str()
        .unwrap_or("")
        .starts_with("file:"));

    // Small and multi-tract objects, from a file and from stdin.
    let small = dir.path().join("small");
    std::fs::write(&small, b"hello cluster").expect("write");
    let big: Vec<u8> = (0..300_000u32).map(|i| (i * 7 % 251) as u8).collect();
    let bigf = dir.path().join("big");
    std::fs::write(&bigf, &big).expect("write");
    ok(strata()
        .args(["put", "--meta", &meta, "b/small.txt"])
        .arg(&small));
    let mut child = strata()
        .args(["put", "--meta", &meta, "b/dir/big.bin", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("put");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&big)
        .expect("stdin");
    assert!(child.wait().expect("wait").success());
    let got = ok(strata().args(["get", "--meta", &meta, "b/small.txt"]));
    assert_eq!(got, "hello cluster");
    let out = dir.path().join("out");
    ok(strata()
        .args(["get", "--meta", &meta, "b/dir/big.bin", "-o"])
        .arg(&out));
    assert_eq!(std::fs::read(&out).expect("read"), big);
    // 300,000 bytes in 64 KiB tracts: 5 data tracts on 5 consecutive rows
    // after the manifest's row.
    let (t, _) = map_of(&meta);
    let h = object_hash("b", "dir/big.bin");
    assert_eq!(t.tract_count(big.len() as u64), 5);
    assert_eq!(t.tract_row(h, 0), (t.row_of(h) + 1) % t.row_count());
    // Atomic append (FDS's extend): four processes append distinct
    // 100,000-byte chunks to one object at once; each gets its own tracts.
    let chunks: Vec<Vec<u8>> = (0..4u8)
        .map(|c| {
            (0..100_000u32)
                .map(|i| (i as u8).wrapping_mul(3) ^ (c * 50))
                .collect()
        })
        .collect();
    let appenders: Vec<std::process::Child> = chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let f = dir.path().join(format!("chunk{i}"));
            std::fs::write(&f, c).expect("chunk");
            strata()
                .args(["put", "--append", "--meta", &meta, "b/log"])
                .arg(&f)
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("append")
        })
        .collect();
    for mut a in appenders {
        assert!(a.wait().expect("wait").success());
    }
    let log = dir.path().join("log");
    ok(strata()
        .args(["get", "--meta", &meta, "b/log", "-o"])
        .arg(&log));
    let got = std::fs::read(&log).expect("log");
    assert_eq!(got.len(), 400_000);
    let mut pieces: Vec<&[u8]> = got.chunks(100_000).collect();
    pieces.sort();
    let mut want: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
    want.sort();
    assert_eq!(pieces, want, "appends interleaved or lost");
    // A small object stored whole cannot be appended to.
    let refused = run(strata()
        .args(["put", "--append", "--meta", &meta, "b/small.txt"])
        .arg(&small));
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("cannot be appended"));
    ok(strata().args(["rm", "--meta", &meta, "b/small.txt"]));
    let gone = run(strata().args(["get", "--meta", &meta, "b/small.txt"]));
    assert!(String::from_utf8_lossy(&gone.stderr).contains("does not exist"));
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "400",
        "--size",
        "2KiB",
    ]));
    // `--indices FILE` checks just the objects it lists, in its order.
    let some = dir.path().join("some");
    std::fs::write(&some, "# two of them\n7\n\n123\n").expect("write the indices");
    let v: serde_json::Value = serde_json::from_str(&ok(strata()
        .args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "400",
            "--size",
            "2KiB",
        ])
        .args(["--verify", "--json", "--indices"])
        .arg(&some)))
    .expect("load --json");
    assert_eq!(
        (&v["ok"], &v["bad"], &v["objects"]),
        (&2.into(), &0.into(), &2.into())
    );
    // An object never written is reported, not skipped.
    std::fs::write(&some, "7\n400\n").expect("write the indices");
    let listed = run(strata()
        .args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "400",
            "--size",
            "2KiB",
        ])
        .args(["--verify", "--indices"])
        .arg(&some));
    assert!(!listed.status.success(), "an unwritten object verified");
    assert!(String::from_utf8_lossy(&listed.stderr).contains("obj-00000400: missing"));
    std::fs::write(&some, "7\nseven\n").expect("write the indices");
    let listed = run(strata()
        .args([
            "load",
            "--meta",
            &meta,
            "--objects",
            "400",
            "--size",
            "2KiB",
        ])
        .args(["--verify", "--indices"])
        .arg(&some));
    assert!(String::from_utf8_lossy(&listed.stderr).contains("line 2"));

    // A stale table version is refused with the current one.
    let row = t.row_of(object_hash("load", "obj-00000001"));
    let addr = addr_of(&map_of(&meta).1, &t, t.row(row)[0]);
    let (code, _) = http(
        &addr,
        "GET",
        &format!("/cluster/v1/rows/{row}/objects/load/obj-00000001"),
        Some(0),
    );
    assert_eq!(code, 409);
    let (code, _) = http(
        &addr,
        "GET",
        &format!("/cluster/v1/rows/{row}/objects/load/obj-00000001"),
        None,
    );
    assert_eq!(code, 400);
    // So is a listing or a change of the listing index: a coordinator
    // with an old table cannot list or change it.
    let irow = strata_proto::index_row(&t, "load");
    let iaddr = addr_of(&map_of(&meta).1, &t, t.row(irow)[0]);
    let query = br#"{"max":10}"#;
    for (version, want) in [(Some(0), 409), (None, 400), (Some(1), 200)] {
        let (code, body) = http_body(&iaddr, "POST", "/cluster/v1/index/load", version, "", query);
        assert_eq!(
            code,
            want,
            "listing at {version:?}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let entry = br#"{"size":1,"etag":"x","modified_ms":1,"stamp":5}"#;
    for (version, want) in [(Some(0), 409), (None, 400)] {
        let (code, body) = http_body(
            &iaddr,
            "PUT",
            "/cluster/v1/index/load/stale-entry?stamp=5",
            version,
            "",
            entry,
        );
        assert_eq!(
            code,
            want,
            "change at {version:?}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (_, listed) = http_body(&iaddr, "POST", "/cluster/v1/index/load", Some(1), "", query);
    assert!(
        !String::from_utf8_lossy(&listed).contains("stale-entry"),
        "a refused change was applied"
    );

    // The metadata service restarts from its file with the same table.
    meta_proc.kill();
    meta_proc = start_meta();
    assert_eq!(status(&meta)["table_version"], 1);

    // Scrubbing: flip a byte in one replica's segment, and write a record
    // to only two of the three replicas of its row (a write whose client
    // died half-way); the scrubber finds both and repairs them.
    let key_row = t.row_of(object_hash("load", "obj-00000007"));
    let reps = t.row(key_row).to_vec();
    let p_row = t.row_of(object_hash("b", "partial"));
    for &d in &t.row(p_row)[..2] {
        let (code, _) = http_body(
            &addr_of(&map_of(&meta).1, &t, d),
            "PUT",
            &format!("/cluster/v1/rows/{p_row}/objects/b/partial"),
            Some(1),
            "x-strata-stamp: 1000\r\n",
            b"\x00half-written",
        );
        assert_eq!(code, 200);
    }
    let flip_addr = addr_of(&map_of(&meta).1, &t, reps[2]);
    let flip_data = &nodes.iter().find(|n| n.1 == flip_addr).expect("node").2;
    let seg = std::fs::read_dir(flip_data.join("rows").join(format!("{key_row:08}")))
        .expect("row dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .expect("segment");
    let mut bytes = std::fs::read(&seg).expect("seg");
    let at = bytes.len() / 2;
    bytes[at] ^= 0x55;
    std::fs::write(&seg, &bytes).expect("flip");
    wait_until(
        Duration::from_secs(60),
        "a scrub report with repairs",
        || {
            let st = status(&meta);
            let sum = |f: &str| {
                st["scrub"]
                    .as_array()
                    .map(|a| a.iter().map(|x| x[1][f].as_u64().unwrap_or(0)).sum::<u64>())
                    .unwrap_or(0)
            };
            sum("corrupt") >= 1 && sum("repaired") >= 2
        },
    );
    // Every replica of every row holds the same records again.
    let (t, map) = map_of(&meta);
    for r in 0..t.row_count() {
        let digests: Vec<serde_json::Value> = t
            .row(r)
            .iter()
            .map(|&d| {
                let (_, b) = http(
                    &addr_of(&map, &t, d),
                    "GET",
                    &format!("/cluster/v1/rows/{r}/digest"),
                    None,
                );
                let mut v: serde_json::Value = serde_json::from_slice(&b).expect("digest");
                v["corrupt"] = serde_json::json!(0); // the damaged needle stays until compaction
                v
            })
            .collect();
        assert_eq!(digests[0], digests[1], "row {r}");
        assert_eq!(digests[0], digests[2], "row {r}");
    }
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "400",
        "--size",
        "2KiB",
        "--verify",
    ]));
    let third = addr_of(&map, &t, t.row(p_row)[2]);
    let (code, body) = http(
        &third,
        "GET",
        &format!("/cluster/v1/rows/{p_row}/objects/b/partial"),
        Some(1),
    );
    assert_eq!((code, &body[..]), (200, &b"\x00half-written"[..]));

    // add-node: a fourth node registers (pending), is added, receives rows.
    let data = dir.path().join("n3");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let child = strata()
        .args(["server", "--meta", &meta, "--listen", &addr, "--data"])
        .arg(&data)
        .arg("--disk")
        .arg(&data)
        .stderr(std::fs::File::create(dir.path().join("n3.log")).expect("log"))
        .spawn()
        .expect("node");
    nodes.push((
        Proc {
            child,
            name: addr.clone(),
        },
        addr.clone(),
        data,
    ));
    wait_until(Duration::from_secs(20), "node 3 pending", || {
        status(&meta)["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 4)
    });
    let before = map_of(&meta).0;
    ok(strata().args(["cluster", "add-node", "--meta", &meta, "3"]));
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "60"]));
    let after = map_of(&meta).0;
    assert_eq!(after.version(), 2);
    assert_eq!(
        after.row_count(),
        before.row_count(),
        "no object changed row"
    );
    let mut moved = 0;
    for (a, b) in before.rows().zip(after.rows()) {
        for (x, y) in a.iter().zip(b) {
            if x != y {
                moved += 1;
                assert_eq!(
                    after.disk(*y).expect("disk").node.0,
                    3,
                    "data moved only to the new node"
                );
            }
        }
    }
    assert!(moved > 0);
    // Each old owner removes the directory of a row that moved away once
    // the copy is done and the new table is out; the new owner has it.
    let moved_map = map_of(&meta).1;
    let data_of = |node: u32| dir_of_node(&moved_map, &nodes, node);
    for (r, (a, b)) in before.rows().zip(after.rows()).enumerate() {
        for (x, y) in a.iter().zip(b) {
            if x == y {
                continue;
            }
            let old = data_of(before.disk(*x).expect("disk").node.0)
                .join("rows")
                .join(format!("{r:08}"));
            wait_until(
                Duration::from_secs(20),
                "the old row directory to go",
                || !old.exists(),
            );
            assert!(data_of(3).join("rows").join(format!("{r:08}")).is_dir());
        }
    }
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "400",
        "--size",
        "2KiB",
        "--verify",
    ]));
    let got = ok(strata()
        .args(["get", "--meta", &meta, "b/dir/big.bin", "-o"])
        .arg(&out));
    assert!(got.is_empty());
    assert_eq!(std::fs::read(&out).expect("read"), big);

    // remove-node: node 0's rows drain to the others; everything stays.
    let human = ok(strata().args(["cluster", "remove-node", "--meta", &meta, "0"]));
    assert!(human.contains("removed"), "{human}");
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "60"]));
    let st = status(&meta);
    let n0 = &st["nodes"][0];
    assert_eq!(n0["state"], "removed");
    assert_eq!(n0["disks"][0]["rows"], 0);
    // The removed node drained: no row directory is left on it.
    wait_until(
        Duration::from_secs(20),
        "node 0's rows to be removed",
        || {
            std::fs::read_dir(data_of(0).join("rows"))
                .map(|rd| rd.count() == 0)
                .unwrap_or(true)
        },
    );
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "400",
        "--size",
        "2KiB",
        "--verify",
    ]));
    let text = ok(strata().args(["cluster", "status", "--meta", &meta]));
    assert!(text.contains("rows under-replicated 0"), "{text}");
    drop(nodes);
    drop(meta_proc);
}
