//! What a holder of a captured or forged cluster request could do to the
//! metadata service (issue 34, finding 4), tried against a real 3-node
//! cluster: a heartbeat that names another node's disk as failed is
//! refused and the disk stays live; a register sent again is the same
//! pending node, and pending nodes are bounded. And a batch of tiny items
//! is bounded by its count (finding 6), not only by its bytes; a public
//! 503 names no internal address (finding 9).

mod cluster_common;

use cluster_common::*;
use std::time::Duration;

#[test]
fn own_disks_only_registers_bounded_and_batches_counted() {
    let dir = scratch();
    let (meta, nodes) = start_cluster_of(None, 3, dir.path());
    let (table, _) = map_of(&meta.1);
    let disks = table.disks();
    let a = disks[0].node;
    let other = disks
        .iter()
        .find(|d| d.node != a)
        .expect("a disk of another node")
        .id;
    let own = disks.iter().find(|d| d.node == a).expect("a's disk").id;

    // A heartbeat as node a naming another node's disk failed, and one
    // claiming a copy to it: both refused, nothing changes.
    for body in [
        format!(r#"{{"node_id":{},"failed_disks":[{}]}}"#, a.0, other.0),
        format!(
            r#"{{"node_id":{},"completed":[{{"row":0,"source":{},"target":{}}}]}}"#,
            a.0, own.0, other.0
        ),
    ] {
        let (code, _, answer) = http_full(
            &meta.1,
            "POST",
            "/v1/heartbeat",
            None,
            "Content-Type: application/json\r\n",
            body.as_bytes(),
        );
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(code, 400, "{body}: {answer}");
        assert!(answer.contains("its own disks"), "{answer}");
    }
    std::thread::sleep(Duration::from_millis(500));
    let (after, _) = map_of(&meta.1);
    assert_eq!(after.version(), table.version(), "the table did not change");
    assert!(
        after
            .disks()
            .iter()
            .all(|d| d.state == strata_placement::DiskState::Live),
        "every disk is still live: {:?}",
        after.disks()
    );

    // One register sent 50 times: one pending node.
    let reg = |addr: &str| {
        let body = format!(
            r#"{{"addr":"{addr}","disks":[{{"tier":"disk","capacity_bytes":1073741824,"path":"/d"}}]}}"#
        );
        http_full(
            &meta.1,
            "POST",
            "/v1/register",
            None,
            "Content-Type: application/json\r\n",
            body.as_bytes(),
        )
    };
    let first = reg("127.0.0.1:1");
    assert_eq!(first.0, 200, "{}", String::from_utf8_lossy(&first.2));
    for _ in 0..49 {
        let again = reg("127.0.0.1:1");
        assert_eq!(again.2, first.2, "the same node and disks each time");
    }
    let pending = |m: &serde_json::Value| {
        m["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .filter(|n| n["state"] == "pending")
            .count()
    };
    assert_eq!(pending(&map_of(&meta.1).1), 1);
    // Registers from ever new addresses stop at the bound.
    let mut refused = 0;
    for i in 0..300 {
        let (code, _, body) = reg(&format!("127.0.0.1:{}", 2000 + i));
        if code != 200 {
            assert_eq!(code, 400);
            assert!(String::from_utf8_lossy(&body).contains("pending"));
            refused += 1;
        }
    }
    let now = pending(&map_of(&meta.1).1);
    assert_eq!(now, strata_meta::state::MAX_PENDING_NODES, "{now} pending");
    assert_eq!(refused, 301 - strata_meta::state::MAX_PENDING_NODES);

    // A batch one item over the bound: 400 before any of it is stored.
    let items: Vec<(String, bytes::Bytes)> = (0..=strata_proto::batch::MAX_ITEMS)
        .map(|i| (format!("n{i}"), bytes::Bytes::from_static(b"x")))
        .collect();
    let body = strata_proto::batch::encode(&items);
    let (code, _, answer) = http_full(&nodes[0].1, "POST", "/tiny", None, "", &body);
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("at most 10000 items"), "{answer}");
    let (code, _, _) = http_full(&nodes[0].1, "GET", "/tiny/n0", None, "", b"");
    assert_eq!(code, 404, "nothing of the refused batch was stored");
    // At the bound it is taken whole.
    let body = strata_proto::batch::encode(&items[..strata_proto::batch::MAX_ITEMS]);
    let (code, _, answer) = http_full(&nodes[0].1, "POST", "/tiny", None, "", &body);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
}

/// A write that cannot reach a replica is a 503 whose body names no
/// internal address (issue 34, finding 9: it quoted the replica's URL);
/// the node's log keeps the detail.
#[test]
fn a_public_503_names_no_internal_address() {
    let dir = scratch();
    // Never declared dead: the write waits out its deadline (30 s).
    let meta = start_meta_with(
        &["--initial-nodes", "3", "--suspect-after", "600"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes: Vec<(Proc, String)> = (0..3)
        .map(|i| {
            start_node(
                &meta.1,
                &dir.path().join(format!("node{i}")),
                &dir.path().join(format!("node{i}.log")),
            )
        })
        .collect();
    wait_until(Duration::from_secs(30), "the first table", || {
        status(&meta.1)["table_version"].as_u64() == Some(1)
    });
    let victim = nodes[2].1.clone();
    nodes[2].0.kill();
    // The node answers when its 30 s replica deadline passes; wait longer.
    let (code, head, body) = http_full_within(
        Duration::from_secs(90),
        &nodes[0].1,
        "PUT",
        "/b/k",
        None,
        "",
        b"hello",
    );
    let body = String::from_utf8_lossy(&body);
    assert_eq!(code, 503, "{body}");
    assert!(header(&head, "retry-after").is_some(), "{head}");
    let port = victim.rsplit(':').next().unwrap();
    for secret in [victim.as_str(), port, "http://", "/cluster/v1"] {
        assert!(!body.contains(secret), "the answer names {secret}: {body}");
    }
    assert!(body.contains("b/k"), "{body}");
    let log = std::fs::read_to_string(dir.path().join("node0.log")).unwrap_or_default();
    assert!(log.contains(port), "the log keeps the detail: {log}");
}
