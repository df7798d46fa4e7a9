//! Deletes are never resurrected: a delete that misses a killed replica
//! reaches it through the scrub (its tombstone wins over the older object);
//! a delete that races a recovery copy of its row stays deleted; tombstones
//! every replica holds are collected after the grace time; and the old
//! owner of a moved row keeps its directory until the copy is done, then
//! removes it (a removal cut short by a crash is finished at restart).

mod cluster_common;

use std::time::{Duration, Instant};

use cluster_common::*;
use strata_placement::object_hash;

/// Whether every replica of `bucket/key`'s row answers 404.
fn gone_everywhere(meta: &str, bucket: &str, key: &str) -> bool {
    let (t, map) = map_of(meta);
    let row = t.row_of(object_hash(bucket, key));
    t.row(row).iter().all(|&d| {
        let (code, _, _) = http_full(
            &addr_of(&map, &t, d),
            "GET",
            &format!("/cluster/v1/rows/{row}/objects/{bucket}/{key}"),
            Some(t.version()),
            "",
            b"",
        );
        code == 404
    })
}

fn scrub_sum(meta: &str, field: &str) -> u64 {
    status(meta)["scrub"]
        .as_array()
        .map(|a| a.iter().map(|x| x[1][field].as_u64().unwrap_or(0)).sum())
        .unwrap_or(0)
}

#[test]
fn a_delete_missed_by_a_killed_replica_reaches_it_and_its_tombstone_is_collected() {
    let dir = scratch();
    let meta_dir = dir.path().join("meta");
    let port = free_port();
    let meta = format!("127.0.0.1:{port}");
    // A long suspicion time: the stopped node is not declared dead, it
    // comes back with its stale copy.
    let _meta_proc = Proc {
        child: strata()
            .args(["meta", "--listen", &meta, "--initial-nodes", "3"])
            .args(["--suspect-after", "60", "--data"])
            .arg(&meta_dir)
            .stderr(std::fs::File::create(dir.path().join("meta.log")).expect("log"))
            .spawn()
            .expect("meta"),
        name: "meta".into(),
    };
    let node_args = |i: usize| {
        let data = dir.path().join(format!("n{i}")).display().to_string();
        vec![
            "--data".to_string(),
            data,
            "--scrub-every".into(),
            "1".into(),
            "--tombstone-grace".into(),
            "4".into(),
        ]
    };
    let start = |i: usize, log: &str| {
        let args = node_args(i);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        start_node_with(&meta, &args, &dir.path().join(log))
    };
    let mut nodes: Vec<(Proc, String)> = (0..3).map(|i| start(i, &format!("n{i}.log"))).collect();
    wait_for_table(&meta, dir.path());
    let f = dir.path().join("obj");
    std::fs::write(&f, b"to be deleted").expect("write");
    ok(strata().args(["put", "--meta", &meta, "b/victim"]).arg(&f));
    ok(strata().args(["put", "--meta", &meta, "b/keeper"]).arg(&f));

    // Kill one replica of the victim's row, delete, restart it on another
    // port with its stale copy (the table version stays: the others learn
    // its new address from the heartbeat's address fingerprint).
    let (t, map) = map_of(&meta);
    let row = t.row_of(object_hash("b", "victim"));
    let stopped_addr = addr_of(&map, &t, t.row(row)[2]);
    let i = nodes
        .iter()
        .position(|(_, a)| *a == stopped_addr)
        .expect("node");
    nodes[i].0.kill();
    let out = run(strata().args(["rm", "--deadline", "2", "--meta", &meta, "b/victim"]));
    assert!(
        !out.status.success(),
        "the delete could not reach the killed replica, yet succeeded"
    );
    nodes[i] = start(i, &format!("n{i}-restarted.log"));
    wait_for_node_addr(&meta, &nodes[i].1);
    // The two replicas that took the delete no longer serve it.
    let path = format!("/cluster/v1/rows/{row}/objects/b/victim");
    for &d in &t.row(row)[..2] {
        let (code, _, _) = http_full(&addr_of(&map, &t, d), "GET", &path, Some(1), "", b"");
        assert_eq!(code, 404);
    }
    // The scrub brings the tombstone to the third: deleted everywhere,
    // never resurrected, and the other object is untouched.
    wait_until(
        Duration::from_secs(60),
        "the delete to reach the third replica",
        || gone_everywhere(&meta, "b", "victim"),
    );
    wait_until(Duration::from_secs(30), "the scrub to report it", || {
        scrub_sum(&meta, "deletes_propagated") >= 1
    });
    let got = run(strata().args(["get", "--meta", &meta, "b/victim", "--deadline", "5"]));
    assert!(String::from_utf8_lossy(&got.stderr).contains("does not exist"));
    assert_eq!(
        ok(strata().args(["get", "--meta", &meta, "b/keeper"])),
        "to be deleted"
    );

    // Every replica holds the tombstone: after the grace time the scrub
    // drops it everywhere, and the object stays deleted.
    wait_until(
        Duration::from_secs(60),
        "the tombstone to be collected",
        || scrub_sum(&meta, "tombstones_purged") >= 1,
    );
    let map = map_of(&meta).1;
    for &d in t.row(row) {
        let (code, _, _) = http_full(
            &addr_of(&map, &t, d),
            "GET",
            &format!("{path}?raw=1"),
            Some(1),
            "",
            b"",
        );
        assert_eq!(code, 404, "tombstone still on {d}");
    }
    std::thread::sleep(Duration::from_secs(3));
    assert!(gone_everywhere(&meta, "b", "victim"));
    drop(nodes);
}

#[test]
fn a_delete_racing_a_row_copy_stays_deleted_and_old_rows_go_only_after_the_copy() {
    let dir = scratch();
    let (_meta_proc, meta) = start_meta(
        None,
        3,
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("n{i}"));
        let (p, a) = start_node_with(
            &meta,
            &["--data", &data.display().to_string(), "--scrub-every", "0"],
            &dir.path().join(format!("n{i}.log")),
        );
        nodes.push((p, a, data));
    }
    wait_for_table(&meta, dir.path());
    // ~2.4 MiB per row (3 rows), written in key order.
    ok(strata().args([
        "load",
        "--meta",
        &meta,
        "--objects",
        "1800",
        "--size",
        "4KiB",
        "--concurrency",
        "8",
    ]));
    let before = map_of(&meta).0;

    // A fourth node whose copies crawl (256 KiB/s): add it.
    let data = dir.path().join("n3");
    let (p, a) = start_node_with(
        &meta,
        &[
            "--data",
            &data.display().to_string(),
            "--scrub-every",
            "0",
            "--recovery-rate",
            "256KiB",
        ],
        &dir.path().join("n3.log"),
    );
    nodes.push((p, a, data));
    wait_until(Duration::from_secs(20), "node 3 pending", || {
        status(&meta)["nodes"]
            .as_array()
            .is_some_and(|n| n.len() == 4)
    });
    ok(strata().args(["cluster", "add-node", "--meta", &meta, "3"]));
    let started = Instant::now();
    let (after, map) = map_of(&meta);
    let new_disk = after
        .disks()
        .iter()
        .find(|d| d.node.0 == 3)
        .expect("new disk")
        .id;
    let moving: Vec<usize> = after.rows_of_disk(new_disk);
    assert!(!moving.is_empty());
    // Delete the last-written objects of the moving rows: the copy streams
    // a row in write order, so their old copies arrive after the deletes.
    let mut deleted = Vec::new();
    for i in (0..1800).rev() {
        let key = format!("obj-{i:08}");
        let row = after.row_of(object_hash("load", &key));
        if moving.contains(&row) && deleted.iter().filter(|(r, _)| *r == row).count() < 8 {
            deleted.push((row, key));
        }
        if deleted.len() == 8 * moving.len() {
            break;
        }
    }
    for (_, key) in &deleted {
        ok(strata().args(["rm", "--meta", &meta, &format!("load/{key}")]));
    }
    // The deletes ran while the copies were still going on (else this test
    // would not race anything), and the old owners still hold their rows.
    let st = status(&meta);
    assert_eq!(
        st["recovery"]["complete"],
        false,
        "copies finished within {:?}, before the deletes were done",
        started.elapsed()
    );
    let mut old_dirs: Vec<std::path::PathBuf> = Vec::new();
    for &r in &moving {
        for d in before.row(r) {
            if !after.row(r).contains(d) {
                let n = before.disk(*d).expect("disk").node.0;
                old_dirs.push(
                    dir_of_node(&map, &nodes, n)
                        .join("rows")
                        .join(format!("{r:08}")),
                );
            }
        }
    }
    assert!(!old_dirs.is_empty());
    for d in &old_dirs {
        assert!(
            d.is_dir(),
            "{} removed before its copy finished",
            d.display()
        );
    }
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "120"]));
    // Deleted on every replica, the new one included: the tombstone won
    // over the older copy the stream brought.
    let new_addr = addr_of(&map, &after, new_disk);
    for (row, key) in &deleted {
        assert!(gone_everywhere(&meta, "load", key), "{key} came back");
        let (code, _, body) = http_full(
            &new_addr,
            "GET",
            &format!("/cluster/v1/rows/{row}/objects/load/{key}?raw=1"),
            Some(after.version()),
            "",
            b"",
        );
        assert_eq!(
            (code, body),
            (200, vec![2u8]),
            "{key}: no tombstone on the new replica"
        );
    }
    // The replicas of every moved row agree, record for record.
    for &r in &moving {
        let digests: Vec<Vec<u8>> = after
            .row(r)
            .iter()
            .map(|&d| {
                http_full(
                    &addr_of(&map, &after, d),
                    "GET",
                    &format!("/cluster/v1/rows/{r}/digest"),
                    None,
                    "",
                    b"",
                )
                .2
            })
            .collect();
        assert_eq!(digests[0], digests[1], "row {r}");
        assert_eq!(digests[0], digests[2], "row {r}");
    }
    // Once the copies are done, the old owners remove the moved rows.
    for d in &old_dirs {
        wait_until(
            Duration::from_secs(20),
            "the old row directory to go",
            || !d.exists(),
        );
    }
    // A removal cut short (renamed to trash, not yet deleted) is finished
    // when the node restarts; its other rows stay.
    let n0 = nodes[0].2.clone();
    let kept: Vec<_> = std::fs::read_dir(n0.join("rows"))
        .expect("rows")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(!kept.is_empty());
    let trash = n0.join("rows").join("trash-00000099-1");
    std::fs::create_dir_all(&trash).expect("trash");
    std::fs::write(trash.join("x.seg"), b"old").expect("trash file");
    nodes[0].0.kill();
    let (restarted, _) = start_node_with(
        &meta,
        &["--data", &n0.display().to_string(), "--scrub-every", "0"],
        &dir.path().join("n0-again.log"),
    );
    wait_until(Duration::from_secs(20), "the trash to be deleted", || {
        !trash.exists()
    });
    for name in &kept {
        assert!(n0.join("rows").join(name).is_dir(), "{name:?} lost");
    }
    drop(restarted);
    drop(nodes);
}

/// An unfinished delete (its coordinator gone) left its tombstone on two
/// replicas of the row and the object on the third. A delete through a
/// node holding the tombstone finds no replica serving the object, and
/// answers so; it must still leave the object absent on every replica:
/// before, it wrote nothing, and the third replica served the object to
/// every later read that asked it (Porcupine's stale reads after an
/// acknowledged delete in the linearizability campaign: finding 5 of
/// docs/reliability.md).
#[test]
fn a_delete_that_finds_the_object_hidden_still_deletes_it_everywhere() {
    let dir = scratch();
    let (_meta_proc, meta) = start_meta(
        None,
        3,
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("n{i}"));
        nodes.push(start_node_with(
            &meta,
            &["--data", &data.display().to_string(), "--scrub-every", "0"],
            &dir.path().join(format!("n{i}.log")),
        ));
    }
    wait_for_table(&meta, dir.path());
    let f = dir.path().join("obj");
    std::fs::write(&f, b"hidden, not deleted").expect("write");
    ok(strata().args(["put", "--meta", &meta, "b/victim"]).arg(&f));
    let (t, map) = map_of(&meta);
    let row = t.row_of(object_hash("b", "victim"));
    let reps: Vec<String> = t.row(row).iter().map(|&d| addr_of(&map, &t, d)).collect();
    assert_eq!(reps.len(), 3);
    // The unfinished delete: a tombstone newer than the object on two
    // replicas only.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_micros() as u64;
    let path = format!("/cluster/v1/rows/{row}/objects/b/victim");
    for a in &reps[..2] {
        let (code, _, body) = http_full(
            a,
            "DELETE",
            &path,
            Some(t.version()),
            &format!("x-strata-stamp: {stamp}\r\n"),
            b"",
        );
        assert!(
            code == 200 || code == 404,
            "{code} {}",
            String::from_utf8_lossy(&body)
        );
    }
    let (code, _, _) = http_full(&reps[2], "GET", &path, Some(t.version()), "", b"");
    assert_eq!(code, 200, "the third replica holds the object");
    // The delete, through a node holding the tombstone (its own replica is
    // read first): every replica says absent or older than the tombstone.
    let (code, _, body) = http_full(&reps[0], "DELETE", "/b/victim", None, "", b"");
    assert!(
        code == 200 || code == 404,
        "the delete answered {code} {}",
        String::from_utf8_lossy(&body)
    );
    // Once it has answered, no replica serves the object.
    for a in &reps {
        let (code, _, _) = http_full(a, "GET", &path, Some(t.version()), "", b"");
        assert_eq!(
            code, 404,
            "{a} still serves the object the delete answered for"
        );
    }
    drop(nodes);
}
