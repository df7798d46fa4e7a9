//! Reads while a row is copied to a new replica under erasure coding
//! (docs/reliability.md, finding 10). A replica that joins a row (a
//! recovery target) installs the row's stripes at once but receives the
//! row's records only as the copy streams in. Before the fix it answered a
//! GET from a stripe holding an older version of a name whose newer,
//! acknowledged version was still on its way: a stale read. Here the copy
//! is held back (1 KiB/s into the new replica, the newer version behind
//! 2.75 MiB of other records), and every read of the name, through the new
//! replica or the others, must give the acknowledged version.

mod cluster_common;

use std::path::PathBuf;
use std::time::Duration;

use cluster_common::*;

const NODES: usize = 4;
const BUCKET: &str = "warm";
const OBJ: usize = 64 << 10;

/// A deterministic body of `len` bytes for `(name, version)`.
fn body(name: &str, version: u64, len: usize) -> Vec<u8> {
    let seed = name
        .bytes()
        .fold(version.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, |a, b| {
            a.rotate_left(7) ^ u64::from(b)
        });
    xorshift_bytes(seed, len)
}

fn put(addr: &str, name: &str, data: &[u8]) {
    let (code, _, b) = http_full(addr, "PUT", &format!("/{BUCKET}/{name}"), None, "", data);
    assert_eq!(
        code,
        201,
        "PUT {name} through {addr}: {}",
        String::from_utf8_lossy(&b)
    );
}

/// An erasure-coding counter of one node (`/cluster/v1/ec/status`).
fn ec_of(addr: &str, field: &str) -> u64 {
    let (code, _, b) = http_full(addr, "GET", "/cluster/v1/ec/status", None, "", b"");
    if code != 200 {
        return 0;
    }
    let v: serde_json::Value = serde_json::from_slice(&b).unwrap_or_default();
    v[field].as_u64().unwrap_or(0)
}

/// Stripes the metadata service has recorded for `row`.
fn stripes_of_row(meta: &str, row: usize) -> u64 {
    let (code, _, b) = http_full(meta, "GET", "/v1/ec", None, "", b"");
    assert_eq!(code, 200, "GET /v1/ec: {}", String::from_utf8_lossy(&b));
    let v: serde_json::Value = serde_json::from_slice(&b).expect("ec view");
    v["stripes"]
        .as_array()
        .map(|ss| ss.iter().filter(|s| s["row"] == row).count() as u64)
        .unwrap_or(0)
}

/// Whether the row copies of the current recovery are still under way.
fn copying(meta: &str) -> bool {
    let s = status(meta);
    s["rows_under_replicated"].as_u64().unwrap_or(0) > 0
        && s["recovery"]["complete"].as_bool() == Some(false)
}

#[test]
fn a_replica_still_being_copied_never_serves_an_older_stripe_record() {
    let dir = scratch();
    let (_meta_proc, meta) = start_meta_with(
        &["--initial-nodes", "4", "--ec", "2+1", "--ec-after", "1s"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes: Vec<(Option<Proc>, String, PathBuf)> = Vec::new();
    for i in 0..NODES {
        let data = dir.path().join(format!("n{i}"));
        let d = data.display().to_string();
        // 4 MiB segments: the first one seals (and is encoded) after
        // about 64 objects of 64 KiB, the second stays open (never
        // encoded). Recovery into a disk at 1 KiB/s: a copy writes at
        // most its first two stream chunks (about 1 MiB each) before the
        // throttle holds it for hours.
        let args = [
            "--data",
            &d,
            "--segment-size",
            "4MiB",
            "--scrub-every",
            "0",
            "--recovery-rate",
            "1KiB",
        ];
        let (p, addr) = start_node_with(&meta, &args, &dir.path().join(format!("n{i}.log")));
        nodes.push((Some(p), addr, data));
    }
    wait_for_table(&meta, dir.path());
    let (table, map) = map_of(&meta);
    let row_of = |name: &str| table.tract_row(strata_placement::object_hash(BUCKET, name), -1);
    let key = "k";
    let row = row_of(key);
    let replicas = table.row(row).to_vec();
    assert_eq!(replicas.len(), 3, "three replicas per row");
    // Other objects of the same row: enough to seal the first segment,
    // then 2.75 MiB in the second one ahead of the key's newer version.
    let fillers: Vec<String> = (0..100_000)
        .map(|i| format!("f{i}"))
        .filter(|n| row_of(n) == row)
        .take(64 + 44)
        .collect();
    assert_eq!(fillers.len(), 108, "names for row {row}");
    let addr_of_disk = |d| addr_of(&map, &table, d);
    let lost = addr_of_disk(replicas[0]);
    let newcomer = nodes
        .iter()
        .map(|n| n.1.clone())
        .find(|a| replicas.iter().all(|&d| addr_of_disk(d) != *a))
        .expect("a node outside the row");
    let others: Vec<String> = replicas[1..].iter().map(|&d| addr_of_disk(d)).collect();

    // Version 2 of the key, first in the row: encoded with the first
    // segment, its replica copies dropped once every replica installed
    // the stripe.
    let v2 = body(key, 2, 4096);
    let v3 = body(key, 3, 4096);
    put(&lost, key, &v2);
    for (i, f) in fillers[..64].iter().enumerate() {
        put(&others[i % 2], f, &body(f, 1, OBJ));
    }
    wait_until(
        Duration::from_secs(120),
        "the row's first segment encoded and installed on its 3 replicas",
        || {
            let stripes = stripes_of_row(&meta, row);
            stripes >= 1
                && std::iter::once(&lost)
                    .chain(&others)
                    .all(|a| ec_of(a, "stripes_installed") >= stripes)
        },
    );
    // Then 2.75 MiB more in the open segment, and version 3 of the key,
    // acknowledged by the row's three replicas.
    for (i, f) in fillers[64..].iter().enumerate() {
        put(&others[i % 2], f, &body(f, 1, OBJ));
    }
    put(&others[0], key, &v3);
    let stripes = stripes_of_row(&meta, row);
    assert_eq!(
        ec_of(&newcomer, "stripes_installed"),
        0,
        "the node outside the row holds no stripe index yet"
    );

    // The first replica lost for good: the node outside the row replaces
    // it, installs the row's stripes, and its copy of the row crawls.
    let victim = nodes.iter().position(|n| n.1 == lost).expect("victim");
    if let Some(mut p) = nodes[victim].0.take() {
        p.kill();
    }
    wait_until(
        Duration::from_secs(60),
        "the lost node declared dead",
        || status(&meta)["table_version"].as_u64().unwrap_or(0) >= 2,
    );
    let (t2, _) = map_of(&meta);
    let newcomer_disk = t2
        .row(row)
        .iter()
        .copied()
        .find(|d| !replicas.contains(d))
        .expect("a replacement disk in the row");
    assert_eq!(
        addr_of_disk(newcomer_disk),
        newcomer,
        "the row's new replica is the node that was outside it"
    );
    wait_until(
        Duration::from_secs(60),
        "the new replica to install the row's stripes",
        || ec_of(&newcomer, "stripes_installed") >= stripes,
    );
    assert!(copying(&meta), "the row copy must still be under way");

    // The new replica's own answer: no record it may serve (404 without
    // a stamp, so a reader asks the other replicas), never version 2.
    let path = format!("/cluster/v1/rows/{row}/objects/{BUCKET}/{key}");
    let (code, head, got) = http_full(&newcomer, "GET", &path, Some(t2.version()), "", b"");
    assert!(
        !(code == 200 && got.ends_with(&v2)),
        "the new replica served version 2 from its stripe while version 3 was acknowledged"
    );
    assert_eq!(
        code,
        404,
        "a replica still being copied answers 404 for a name only its stripes hold: {}",
        String::from_utf8_lossy(&got)
    );
    assert!(
        header(&head, "x-strata-stamp").is_none(),
        "without a stamp (it is not a delete)"
    );
    // Through the public API of every live node, the new replica first:
    // always version 3 (the others have it).
    for round in 0..5 {
        for addr in std::iter::once(&newcomer).chain(&others) {
            let (code, _, got) = http_full(addr, "GET", &format!("/{BUCKET}/{key}"), None, "", b"");
            assert_eq!(
                code,
                200,
                "GET {key} through {addr} (round {round}): {}",
                String::from_utf8_lossy(&got)
            );
            assert!(
                got == v3,
                "GET {key} through {addr} (round {round}) served {}, not the acknowledged version 3",
                if got == v2 { "version 2" } else { "other bytes" }
            );
        }
    }
    assert!(
        ec_of(&newcomer, "reads_withheld") >= 1,
        "the new replica counts the stripe reads it withheld"
    );
    assert!(
        copying(&meta),
        "the reads above must have run while the copy was under way"
    );
}
