//! What a holder of a captured or forged cluster request could do to the
//! metadata service (issue 34, finding 4), tried against a real 3-node
//! cluster: a heartbeat that names another node's disk as failed is
//! refused and the disk stays live; a register sent again is the same
//! pending node, and pending nodes are bounded.

mod cluster_common;

use cluster_common::*;
use std::time::Duration;

#[test]
fn a_node_reports_only_its_own_disks_and_registers_do_not_pile_up() {
    let dir = scratch();
    let (meta, _nodes) = start_cluster_of(None, 3, dir.path());
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
}
