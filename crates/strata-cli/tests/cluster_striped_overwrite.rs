//! An object striped in tracts keeps its acknowledged version when an
//! overwrite is cut short by a node killed mid-upload (issue 15, finding 3
//! of docs/reliability.md): the new version's tracts go under keys of
//! their own, and its manifest is written only after every one of them, so
//! the old manifest keeps finding its own tracts whole.
//!
//! Three nodes (replication 3, 64 KiB tracts); a 300,000-byte object
//! written and acknowledged; an overwrite through node A sends three
//! tracts' worth of its body, and once node B has stored those three
//! tracts (its PUT counter says so), A is killed with kill -9. The object
//! must then read back as the acknowledged version, whole, through B, C
//! and A restarted; a completed overwrite and a delete then behave.

mod cluster_common;

use cluster_common::*;
use std::io::Write;
use std::time::Duration;

const TRACT: usize = 64 << 10;

fn get_body(addr: &str, path: &str) -> (u16, Vec<u8>) {
    let (code, _, b) = http_full(addr, "GET", path, None, "", b"");
    (code, b)
}

#[test]
fn an_overwrite_cut_short_by_a_kill_keeps_the_acknowledged_version_whole() {
    let dir = scratch();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "3", "--tract-size", "64KiB"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("n{i}"));
        let (p, addr) = start_node(&meta, &data, &dir.path().join(format!("n{i}.log")));
        nodes.push((p, addr, data));
    }
    wait_for_table(&meta, dir.path());
    let (a, b, c) = (nodes[0].1.clone(), nodes[1].1.clone(), nodes[2].1.clone());
    for addr in [&a, &b, &c] {
        wait_until(Duration::from_secs(30), "the nodes to listen", || {
            std::net::TcpStream::connect(addr.as_str()).is_ok()
        });
    }

    // Version 1: five tracts (300,000 bytes), acknowledged.
    let v1 = seeded_body(1, 300_000);
    let (code, _, answer) = http_full(&a, "PUT", "/photos/big", None, "", &v1);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    assert_eq!(get_body(&b, "/photos/big"), (200, v1.clone()));

    // Version 2 through A: its head and three full tracts' worth of body,
    // then nothing more.
    let v2 = seeded_body(2, 320_000);
    let before = puts_answered(&b);
    let mut upload = std::net::TcpStream::connect(&a).expect("connect to A");
    write!(
        upload,
        "PUT /photos/big HTTP/1.1\r\nHost: {a}\r\nAuthorization: Bearer {tok}\r\nContent-Length: {}\r\n\r\n",
        v2.len(),
        tok = root_token()
    )
    .expect("send head");
    upload.write_all(&v2[..3 * TRACT + 100]).expect("send body");
    upload.flush().expect("flush");
    // B holds replicas of every row: once it has stored three records more
    // (the new version's tracts 0, 1 and 2), the overwrite is mid-way.
    wait_until(Duration::from_secs(60), "B to store three tracts", || {
        puts_answered(&b) >= before + 3.0
    });
    nodes[0].0.kill();
    drop(upload);

    // The acknowledged version, whole, through the nodes that stayed up.
    for addr in [&b, &c] {
        let (code, got) = get_body(addr, "/photos/big");
        assert_eq!(code, 200, "through {addr}");
        assert_eq!(got.len(), v1.len(), "through {addr}: a body cut short");
        assert!(got == v1, "through {addr}: not the acknowledged version");
    }

    // A comes back (at another port) and serves it too.
    let (p, a2) = start_node(&meta, &nodes[0].2, &dir.path().join("n0-again.log"));
    nodes[0].0 = p;
    wait_until(Duration::from_secs(60), "A to listen again", || {
        std::net::TcpStream::connect(a2.as_str()).is_ok()
    });
    wait_until(Duration::from_secs(60), "A to read the object", || {
        get_body(&a2, "/photos/big").0 == 200
    });
    let (code, got) = get_body(&a2, "/photos/big");
    assert_eq!(code, 200);
    assert!(
        got == v1,
        "through A restarted: not the acknowledged version"
    );

    // A completed overwrite replaces it whole (and fewer tracts than
    // before: nothing of version 1 shows through).
    let v3 = seeded_body(3, 150_000);
    let (code, _, answer) = http_full(&b, "PUT", "/photos/big", None, "", &v3);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&answer));
    for addr in [&a2, &b, &c] {
        let (code, got) = get_body(addr, "/photos/big");
        assert_eq!(code, 200, "through {addr}");
        assert!(got == v3, "through {addr}: not the new version");
    }

    // A delete removes it whole.
    let (code, _, _) = http_full(&c, "DELETE", "/photos/big", None, "", b"");
    assert_eq!(code, 204);
    for addr in [&a2, &b, &c] {
        assert_eq!(get_body(addr, "/photos/big").0, 404, "through {addr}");
    }
}
