//! A delete removes a striped object's tracts itself, and orphan data
//! tracts are reclaimed (issue 15): an overwrite of a striped
//! object and the first upload of another, both cut short by kill -9 of
//! their coordinator after some of their tracts were stored everywhere,
//! leave tracts that no manifest refers to. The scrub deletes them once
//! they are older than `--orphan-grace`, and the acknowledged version of
//! the overwritten object stays whole.
//!
//! Three nodes (replication 3, 64 KiB tracts), scrubbing every second,
//! orphan grace 2 s.

mod cluster_common;

use cluster_common::*;
use std::io::Write;
use std::path::Path;
use std::time::Duration;
use strata_proto::{ListEntry, DIGEST_RANGES};

const TRACT: usize = 64 << 10;

/// The data tract records (name `KEY` NUL ...) `addr` holds, tombstones
/// left out, over every row of the table.
fn live_tracts(meta: &str, addr: &str) -> Vec<String> {
    let (t, _) = map_of(meta);
    let mut out = Vec::new();
    for row in 0..t.row_count() {
        for range in 0..DIGEST_RANGES {
            let (code, _, b) = http_full(
                addr,
                "GET",
                &format!("/cluster/v1/rows/{row}/list?range={range}"),
                Some(t.version()),
                "",
                b"",
            );
            if code != 200 {
                continue;
            }
            let list: Vec<ListEntry> = serde_json::from_slice(&b).expect("a list");
            out.extend(
                list.into_iter()
                    .filter(|e| e.key.contains('\0') && !e.tombstone)
                    .map(|e| format!("{}/{}", e.bucket, e.key.replace('\0', "|"))),
            );
        }
    }
    out.sort();
    out
}

/// Starts an upload of `data` to `path` on `addr` that sends `sent` bytes
/// of it and then nothing more.
fn cut_upload(addr: &str, path: &str, data: &[u8], sent: usize) -> std::net::TcpStream {
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    write!(
        s,
        "PUT {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Length: {}\r\n\r\n",
        data.len(),
        tok = root_token()
    )
    .expect("send head");
    s.write_all(&data[..sent]).expect("send body");
    s.flush().expect("flush");
    s
}

/// The arguments of node `i`: its data directory under `dir`, then `extra`.
fn node_args(dir: &Path, i: usize, extra: &[&str]) -> Vec<String> {
    let data = dir.join(format!("n{i}")).display().to_string();
    ["--data", data.as_str()]
        .iter()
        .chain(extra)
        .map(|a| a.to_string())
        .collect()
}

/// Starts node `i` with [`node_args`], its log in `dir/LOG`.
fn start_node(meta: &str, dir: &Path, i: usize, extra: &[&str], log: &str) -> (Proc, String) {
    let args = node_args(dir, i, extra);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    start_node_with(meta, &args, &dir.join(log))
}

/// A metadata service for three nodes (replication 3, 64 KiB tracts) and
/// the three nodes, started with `extra`; returned once the table is out
/// and every node listens.
fn three_nodes(dir: &Path, extra: &[&str]) -> (Proc, String, Vec<(Proc, String)>) {
    let (meta_proc, meta) = start_meta_with(
        &["--initial-nodes", "3", "--tract-size", "64KiB"],
        &dir.join("meta"),
        &dir.join("meta.log"),
    );
    let nodes: Vec<(Proc, String)> = (0..3)
        .map(|i| start_node(&meta, dir, i, extra, &format!("n{i}.log")))
        .collect();
    wait_for_table(&meta, dir);
    for (_, addr) in &nodes {
        wait_until(Duration::from_secs(30), "the nodes to listen", || {
            std::net::TcpStream::connect(addr.as_str()).is_ok()
        });
    }
    (meta_proc, meta, nodes)
}

#[test]
fn tracts_of_uploads_cut_short_by_a_kill_are_reclaimed_after_the_grace() {
    let dir = scratch();
    let extra = ["--scrub-every", "1", "--orphan-grace", "2"];
    let (_meta, meta, mut nodes) = three_nodes(dir.path(), &extra);
    let (a, b, c) = (nodes[0].1.clone(), nodes[1].1.clone(), nodes[2].1.clone());

    // Version 1: five tracts, acknowledged.
    let v1 = seeded_body(1, 300_000);
    let (code, _, answer) = http_full(&a, "PUT", "/photos/big", None, "", &v1);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let kept = live_tracts(&meta, &b);
    assert_eq!(kept.len(), 5, "{kept:?}");

    // Through A: an overwrite of it (three tracts sent) and the first
    // upload of another object (two tracts sent); A is killed once B has
    // stored those five tracts.
    let before = puts_answered(&b);
    let v2 = seeded_body(2, 320_000);
    let fresh = seeded_body(3, 200_000);
    let u1 = cut_upload(&a, "/photos/big", &v2, 3 * TRACT + 100);
    let u2 = cut_upload(&a, "/photos/fresh", &fresh, 2 * TRACT + 100);
    wait_until(Duration::from_secs(60), "B to store five tracts", || {
        puts_answered(&b) >= before + 5.0
    });
    nodes[0].0.kill();
    drop((u1, u2));
    let orphaned = live_tracts(&meta, &b);
    assert!(
        orphaned.len() >= 10,
        "the cut uploads left no tracts behind: {orphaned:?}"
    );

    // A comes back; after the grace, the scrubs delete every tract no
    // manifest refers to, on every node.
    let (p, a2) = start_node(&meta, dir.path(), 0, &extra, "n0-again.log");
    nodes[0] = (p, a2.clone());
    wait_until(Duration::from_secs(60), "A to listen again", || {
        std::net::TcpStream::connect(a2.as_str()).is_ok()
    });
    wait_until(
        Duration::from_secs(120),
        "the orphan tracts to be reclaimed on every node",
        || [&a2, &b, &c].iter().all(|n| live_tracts(&meta, n) == kept),
    );
    // The scrubs report it (once their passes end and a heartbeat carries
    // the totals).
    let reclaimed = || -> u64 {
        status(&meta)["scrub"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|x| x[1]["orphan_tracts_reclaimed"].as_u64().unwrap_or(0))
                    .sum()
            })
            .unwrap_or(0)
    };
    let want = (orphaned.len() - kept.len()) as u64;
    wait_until(Duration::from_secs(30), "the scrub reports", || {
        reclaimed() >= want
    });

    // The acknowledged version is whole everywhere; the upload that never
    // finished left no object.
    for addr in [&a2, &b, &c] {
        let (code, _, got) = http_full(addr, "GET", "/photos/big", None, "", b"");
        assert_eq!(code, 200, "through {addr}");
        assert!(got == v1, "through {addr}: not the acknowledged version");
        let (code, _, _) = http_full(addr, "GET", "/photos/fresh", None, "", b"");
        assert_eq!(code, 404, "through {addr}");
    }
    drop(nodes);
}

/// A delete tombstones a striped object's tracts on every replica itself,
/// at once (no scrub runs here): each replica answers the head's delete
/// with the manifest it replaced, and nothing reads the object first.
#[test]
fn a_delete_removes_the_tracts_of_a_striped_object_everywhere() {
    let dir = scratch();
    let (_meta, meta, nodes) = three_nodes(dir.path(), &["--scrub-every", "0"]);
    let (a, b) = (nodes[0].1.clone(), nodes[1].1.clone());
    let big = seeded_body(7, 300_000);
    let (code, _, answer) = http_full(&a, "PUT", "/photos/big", None, "", &big);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    let small = seeded_body(8, 1_000);
    let (code, _, _) = http_full(&a, "PUT", "/photos/small", None, "", &small);
    assert_eq!(code, 201);
    for (_, n) in &nodes {
        assert_eq!(live_tracts(&meta, n).len(), 5, "through {n}");
    }

    let (code, _, _) = http_full(&b, "DELETE", "/photos/big", None, "", b"");
    assert_eq!(code, 204, "the striped object existed");
    for (_, n) in &nodes {
        assert_eq!(live_tracts(&meta, n), Vec::<String>::new(), "on {n}");
        let (code, _, _) = http_full(n, "GET", "/photos/big", None, "", b"");
        assert_eq!(code, 404, "through {n}");
    }
    let (code, _, _) = http_full(&a, "DELETE", "/photos/big", None, "", b"");
    assert_eq!(code, 404, "deleted already");

    let (code, _, _) = http_full(&b, "DELETE", "/photos/small", None, "", b"");
    assert_eq!(code, 204, "the small object existed");
    let (code, _, _) = http_full(&a, "DELETE", "/photos/small", None, "", b"");
    assert_eq!(code, 404, "deleted already");
    let (code, _, _) = http_full(&a, "DELETE", "/photos/never", None, "", b"");
    assert_eq!(code, 404, "never written");
    drop(nodes);
}
