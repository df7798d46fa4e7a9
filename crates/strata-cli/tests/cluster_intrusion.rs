//! What a holder of a captured or forged cluster request could do to the
//! metadata service (issue 34, finding 4), tried against a real 3-node
//! cluster: a heartbeat or register as a node without its node key is
//! refused; a heartbeat that names another node's disk as failed is
//! refused and the disk stays live; a register sent again is the same
//! pending node, and pending nodes are bounded; a captured request is
//! admitted nowhere again, its body cannot be swapped under its signature,
//! and it is not admitted by a member it was not sent to. And a batch of
//! tiny items
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

    // Node a's key, as it keeps it: readable by its user only.
    let (_, m) = map_of(&meta.1);
    let a_addr = m["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .find(|n| n["id"] == a.0)
        .and_then(|n| n["addr"].as_str())
        .expect("a's address")
        .to_string();
    let i = nodes
        .iter()
        .position(|n| n.1 == a_addr)
        .expect("a's process");
    let ident = dir.path().join(format!("node{i}/cluster-node.json"));
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&ident)
            .expect("identity")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{}", ident.display());
    }
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&ident).expect("identity")).expect("JSON");
    let key = saved["node_key"].as_str().expect("a node key").to_string();
    // A heartbeat as node a without its key, or with another: refused
    // (403), whatever it says.
    for k in [
        String::new(),
        format!(r#","node_key":"{}""#, "0".repeat(64)),
    ] {
        let body = format!(r#"{{"node_id":{}{k}}}"#, a.0);
        let (code, _, answer) = http_full(
            &meta.1,
            "POST",
            "/v1/heartbeat",
            None,
            "Content-Type: application/json\r\n",
            body.as_bytes(),
        );
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(code, 403, "{body}: {answer}");
        assert!(answer.contains("only that node may"), "{answer}");
    }
    // With it, naming another node's disk failed, or claiming a copy to
    // it: both refused, nothing changes.
    for body in [
        format!(
            r#"{{"node_id":{},"node_key":"{key}","failed_disks":[{}]}}"#,
            a.0, other.0
        ),
        format!(
            r#"{{"node_id":{},"node_key":"{key}","completed":[{{"row":0,"source":{},"target":{}}}]}}"#,
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
    // A register naming node a from another address, without its key: a
    // 403, and a stays where it is (a captured or forged register cannot
    // point the cluster at another listener).
    let body = format!(
        r#"{{"addr":"127.0.0.1:1","node_id":{},"disks":[{{"tier":"disk","capacity_bytes":1073741824,"path":"/d"}}]}}"#,
        a.0
    );
    let (code, _, answer) = http_full(
        &meta.1,
        "POST",
        "/v1/register",
        None,
        "Content-Type: application/json\r\n",
        body.as_bytes(),
    );
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&answer));
    let (_, m) = map_of(&meta.1);
    assert!(
        m["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .any(|n| n["id"] == a.0 && n["addr"] == a_addr.as_str()),
        "{m}"
    );
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
    let ids = |body: &[u8]| {
        let v: serde_json::Value = serde_json::from_slice(body).expect("JSON");
        (v["node_id"].clone(), v["disk_ids"].clone())
    };
    for _ in 0..49 {
        let again = reg("127.0.0.1:1");
        assert_eq!(
            ids(&again.2),
            ids(&first.2),
            "the same node and disks each time"
        );
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

/// Issue 34, finding 4: what a party on the network that captures signed
/// cluster requests can do with them. A register rewritten to another
/// port of the same length (which pointed a node at a listener of the
/// attacker's) is refused on its body; the one captured is not admitted
/// twice; a node's request sent to another node is refused by it.
#[test]
fn a_captured_cluster_request_is_admitted_once_where_it_was_sent() {
    let dir = scratch();
    let (meta, nodes) = start_cluster_of(None, 3, dir.path());
    let (_, before) = map_of(&meta.1);
    let json = "Content-Type: application/json\r\n";
    let reg = |port: u32| {
        format!(
            r#"{{"addr":"127.0.0.1:{port}","disks":[{{"tier":"disk","capacity_bytes":1073741824,"path":"/d"}}]}}"#
        )
    };
    let body = reg(40001);
    let head = request_head(
        &meta.1,
        &meta.1,
        "POST",
        "/v1/register",
        None,
        json,
        body.as_bytes(),
    );
    let patience = Duration::from_secs(30);
    // The body swapped for one of the same length under the same head.
    let swapped = reg(40002);
    assert_eq!(swapped.len(), body.len());
    let (code, _, answer) = send_raw(patience, &meta.1, head.as_bytes(), swapped.as_bytes());
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 400, "{answer}");
    assert!(answer.contains("does not match"), "{answer}");
    // That head was admitted once (its body then failed): the original
    // body under it is a replay now.
    let (code, _, answer) = send_raw(patience, &meta.1, head.as_bytes(), body.as_bytes());
    assert_eq!(code, 403, "{}", String::from_utf8_lossy(&answer));
    // A fresh one is served, and is then not served again.
    let head = request_head(
        &meta.1,
        &meta.1,
        "POST",
        "/v1/register",
        None,
        json,
        body.as_bytes(),
    );
    let (code, _, answer) = send_raw(patience, &meta.1, head.as_bytes(), body.as_bytes());
    assert_eq!(code, 200, "{}", String::from_utf8_lossy(&answer));
    let (code, _, answer) = send_raw(patience, &meta.1, head.as_bytes(), body.as_bytes());
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 403, "{answer}");
    assert!(answer.contains("admitted before"), "{answer}");
    let (_, after) = map_of(&meta.1);
    let addrs = |m: &serde_json::Value| -> Vec<String> {
        let mut v: Vec<String> = m["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|n| n["addr"].as_str().unwrap_or("").to_string())
            .collect();
        v.sort();
        v
    };
    let mut want = addrs(&before);
    want.push("127.0.0.1:40001".into());
    want.sort();
    assert_eq!(
        addrs(&after),
        want,
        "one node added, none pointed elsewhere"
    );

    // A request to node 1, delivered to node 0 (its Host kept, or
    // rewritten to node 0's): refused either way.
    let (a, b) = (&nodes[0].1, &nodes[1].1);
    let for_b = request_head(b, b, "GET", "/cluster/v1/status", None, "", b"");
    let (code, _, answer) = send_raw(patience, a, for_b.as_bytes(), b"");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 403, "{answer}");
    assert!(answer.contains("does not answer as"), "{answer}");
    let rewritten = for_b.replace(&format!("Host: {b}"), &format!("Host: {a}"));
    assert_ne!(rewritten, for_b);
    let (code, _, answer) = send_raw(patience, a, rewritten.as_bytes(), b"");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 403, "{answer}");
    assert!(answer.contains("does not match"), "{answer}");
    // Delivered where it was meant: served, once.
    let (code, _, _) = send_raw(patience, b, for_b.as_bytes(), b"");
    assert_eq!(code, 200);
    let (code, _, _) = send_raw(patience, b, for_b.as_bytes(), b"");
    assert_eq!(code, 403);
    // A first-version header (no body digest) is refused, saying why.
    let v1 = "GET /cluster/v1/status HTTP/1.1\r\nHost: HOST\r\nx-strata-auth: v1 1 00\r\nConnection: close\r\n\r\n"
        .replace("HOST", a);
    let (code, _, answer) = send_raw(patience, a, v1.as_bytes(), b"");
    let answer = String::from_utf8_lossy(&answer);
    assert_eq!(code, 403, "{answer}");
    assert!(answer.contains("v1 signs no body"), "{answer}");
}

/// A node keeps its copy of the bucket list across restarts
/// (`DATA/buckets.json`): a node restarted, whose metadata service then
/// goes away before the node fetched the list, still takes native writes
/// into an S3 bucket from the copy (listed: S3 sees them), rather than
/// answer 503 for want of the list.
#[test]
fn a_restarted_node_writes_from_its_kept_bucket_list_while_the_metadata_service_is_away() {
    let dir = scratch();
    let (mut meta, m) = start_meta_with(
        &["--initial-nodes", "1", "--replication", "1"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let data = dir.path().join("node");
    let s3 = format!("127.0.0.1:{}", free_port());
    let data_s = data.to_str().unwrap().to_string();
    let (mut node, addr) = start_node_with(
        &m,
        &["--data", &data_s, "--s3-listen", &s3],
        &dir.path().join("node.log"),
    );
    wait_for_table(&m, dir.path());
    wait_until(Duration::from_secs(30), "the S3 listener", || {
        std::net::TcpStream::connect(&s3).is_ok()
    });
    let py = |code: &str| {
        let out = std::process::Command::new("python3")
            .arg("-c")
            .arg(format!(
                "import boto3\ns3 = boto3.client('s3', endpoint_url='http://{s3}', aws_access_key_id='{TEST_ROOT_ACCESS}', aws_secret_access_key='{TEST_ROOT_SECRET}', region_name='us-east-1')\n{code}"
            ))
            .output()
            .expect("python3 with boto3 (scripts/test's venv)");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    // A listing fetches the list afresh, and the node keeps it.
    py("s3.create_bucket(Bucket='kept'); s3.list_buckets()");
    let copy = data.join("buckets.json");
    wait_until(Duration::from_secs(10), "the kept bucket list", || {
        std::fs::read_to_string(&copy).is_ok_and(|t| t.contains("\"kept\""))
    });
    node.kill();
    let s3 = s3.clone();
    let (mut node, addr2) = start_node_with(
        &m,
        &["--data", &data_s, "--s3-listen", &s3],
        &dir.path().join("node2.log"),
    );
    let _ = addr;
    wait_for_node_addr(&m, &addr2);
    wait_until(Duration::from_secs(30), "the restarted S3 listener", || {
        std::net::TcpStream::connect(&s3).is_ok()
    });
    meta.kill();
    let head = format!("Authorization: Bearer {}\r\n", root_token());
    let (code, text, _) = http_full(&addr2, "PUT", "/kept/while-away", None, &head, b"abc");
    assert_eq!(code, 201, "{text}");
    // Listed: S3 lists it with its size.
    let listed = py("print([(o['Key'], o['Size']) for o in s3.list_objects_v2(Bucket='kept').get('Contents', [])])");
    assert_eq!(listed.trim(), "[('while-away', 3)]", "{listed}");
    node.kill();
}
