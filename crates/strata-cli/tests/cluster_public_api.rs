//! Every node of a cluster serves the public object API (docs/node.md) for
//! every object of the cluster, to any plain HTTP client: the receiving node
//! computes the row, writes every replica, reads one with failover. Large
//! objects stream through in tracts with bounded memory.

mod cluster_common;
mod flip_common;

use cluster_common::*;
use flip_common::*;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::Stdio;
use std::time::Duration;

/// Deterministic bytes: byte `i` of object `seed`.
fn pattern(seed: u64, start: u64, out: &mut [u8]) {
    for (j, b) in out.iter_mut().enumerate() {
        let i = start + j as u64;
        let x = (i ^ seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xD6E8_FEB8_6659_FD93);
        *b = (x >> 56) as u8;
    }
}

fn object(seed: u64, len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    pattern(seed, 0, &mut v);
    v
}

fn put(addr: &str, path: &str, body: &[u8]) -> String {
    let (code, head, resp) = http_full(addr, "PUT", path, None, "", body);
    assert_eq!(
        code,
        201,
        "PUT {path} via {addr}: {}",
        String::from_utf8_lossy(&resp)
    );
    let cookie = header(&head, "x-strata-cookie").expect("cookie header");
    assert_eq!(cookie.len(), 8, "{head}");
    let json: serde_json::Value = serde_json::from_slice(&resp).expect("JSON answer");
    assert_eq!(json["cookie"], cookie);
    cookie.to_string()
}

fn get(addr: &str, path: &str, headers: &str) -> (u16, String, Vec<u8>) {
    http_full(addr, "GET", path, None, headers, b"")
}

#[test]
fn any_node_serves_every_object_to_plain_http_and_survives_the_writers_death() {
    let dir = scratch();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "3"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let mut nodes = Vec::new();
    for i in 0..3 {
        let data = dir.path().join(format!("n{i}"));
        let (p, addr) = start_node(&meta, &data, &dir.path().join(format!("n{i}.log")));
        nodes.push((p, addr));
    }
    let addrs: Vec<String> = nodes.iter().map(|n| n.1.clone()).collect();
    let (a, b, c) = (&addrs[0], &addrs[1], &addrs[2]);
    wait_for_table(&meta, dir.path());
    for addr in &addrs {
        wait_until(Duration::from_secs(30), "every node to serve", || {
            TcpStream::connect(addr).is_ok()
        });
    }

    // A small object through A, read through B and C with its cookie.
    let small = object(1, 5000);
    let ca = put(a, "/photos/cat.jpg", &small);
    for via in [b, c] {
        let (code, head, body) = get(via, &format!("/photos/cat.jpg?cookie={ca}"), "");
        assert_eq!(
            code,
            200,
            "GET via {via}: {}",
            String::from_utf8_lossy(&body)
        );
        assert!(body == small, "differs via {via}");
        assert_eq!(header(&head, "x-strata-cookie"), Some(ca.as_str()));
        // Without a cookie it is served (no --require-cookies); a wrong one
        // reads exactly as an absent object.
        assert_eq!(get(via, "/photos/cat.jpg", "").2, small);
        let wrong = format!("{:08x}", u32::from_str_radix(&ca, 16).unwrap() ^ 1);
        let (wcode, _, wbody) = get(via, &format!("/photos/cat.jpg?cookie={wrong}"), "");
        let (ncode, _, nbody) = get(via, "/photos/nothing-here", "");
        assert_eq!((wcode, &wbody), (404, &nbody), "wrong cookie vs absent");
        assert_eq!(ncode, 404);
    }
    // Range and HEAD.
    let (code, head, body) = get(b, "/photos/cat.jpg", "Range: bytes=100-199\r\n");
    assert_eq!(code, 206);
    assert_eq!(body, &small[100..200]);
    assert_eq!(header(&head, "content-range"), Some("bytes 100-199/5000"));
    let (code, head, body) = http_full(c, "HEAD", "/photos/cat.jpg", None, "", b"");
    assert_eq!((code, body.len()), (200, 0));
    assert_eq!(header(&head, "content-length"), Some("5000"));
    assert_eq!(get(c, "/photos/cat.jpg", "Range: bytes=9000-\r\n").0, 416);

    // A 20 MiB object (three tracts of 8 MiB on three rows) through B,
    // read whole through C and A, and a range across a tract boundary.
    let big = object(2, 20 << 20);
    put(b, "/videos/clip.mp4", &big);
    for via in [c, a] {
        let (code, _, body) = get(via, "/videos/clip.mp4", "");
        assert_eq!(code, 200);
        assert!(body == big, "20 MiB object differs via {via}");
    }
    let lo = (8 << 20) - 10;
    let (code, _, body) = get(
        c,
        "/videos/clip.mp4",
        &format!("Range: bytes={lo}-{}\r\n", lo + 19),
    );
    assert_eq!(code, 206);
    assert_eq!(body, &big[lo..lo + 20]);

    // A batch through C, read through A.
    let mut batch = Vec::new();
    for i in 0..20u32 {
        let name = format!("b{i}");
        let data = object(100 + u64::from(i), 300 + i as usize);
        batch.extend_from_slice(&(name.len() as u16).to_le_bytes());
        batch.extend_from_slice(&(data.len() as u32).to_le_bytes());
        batch.extend_from_slice(name.as_bytes());
        batch.extend_from_slice(&data);
    }
    let (code, _, body) = http_full(c, "POST", "/batch", None, "", &batch);
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let answer: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(answer["objects"].as_array().map(Vec::len), Some(20));
    for i in 0..20u32 {
        let (code, _, body) = get(a, &format!("/batch/b{i}"), "");
        assert_eq!(code, 200);
        assert_eq!(body, object(100 + u64::from(i), 300 + i as usize));
    }

    // The direct path (the Rust client, `strata get`) sees the same objects.
    let out = run(strata().args(["get", "--meta", &meta, "photos/cat.jpg"]));
    assert!(out.status.success());
    assert!(out.stdout == small, "strata get differs");

    // Bad input is a 4xx with a reason.
    assert_eq!(http_full(a, "PUT", "/cluster/x", None, "", b"x").0, 400);
    assert_eq!(
        http_full(a, "PATCH", "/photos/cat.jpg", None, "", b"").0,
        405
    );

    // The metadata service has metrics too.
    let (code, _, m) = http_full(&meta, "GET", "/metrics", None, "", b"");
    let m = String::from_utf8_lossy(&m);
    assert_eq!(code, 200);
    assert!(m.contains("strata_meta_nodes{state=\"up\"} 3"), "{m}");
    assert_eq!(metric(&m, "strata_meta_disks"), Some(3.0), "{m}");
    assert!(metric(&m, "strata_meta_table_version").unwrap_or(0.0) >= 1.0);

    // The node every write went through dies: the others still serve all.
    nodes[0].0.kill();
    for via in [b, c] {
        let (code, _, body) = get(via, "/photos/cat.jpg", "");
        assert_eq!(
            (code, body == small),
            (200, true),
            "after A died, via {via}"
        );
        let (code, _, body) = get(via, "/videos/clip.mp4", "");
        assert_eq!((code, body == big), (200, true), "after A died, via {via}");
    }
    // Deletes go through any node too.
    assert_eq!(http_full(c, "DELETE", "/batch/b3", None, "", b"").0, 204);
    assert_eq!(get(b, "/batch/b3", "").0, 404);
    assert_eq!(get(b, "/batch/b4", "").0, 200);
    drop(nodes);
}

/// Peak resident memory of a process (VmHWM), bytes.
fn peak_rss(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

#[test]
fn a_1_gib_object_streams_through_one_node_in_bounded_memory() {
    const LEN: u64 = 1 << 30;
    let dir = tempfile::tempdir().unwrap();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "1", "--replication", "1"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let data = dir.path().join("n");
    let addr = format!("127.0.0.1:{}", free_port());
    let mut child = strata()
        .args(["server", "--meta", &meta, "--listen", &addr])
        // The RAM cache is a budget of its own (256 MiB by default): off,
        // so that what is measured is the streaming path.
        .args(["--max-object-size", "2GiB", "--ram-cache", "0", "--data"])
        .arg(&data)
        .arg("--disk")
        .arg(&data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("n.log")).unwrap())
        .spawn()
        .unwrap();
    let pid = child.id();
    wait_until(Duration::from_secs(30), "the node to serve", || {
        TcpStream::connect(&addr).is_ok()
            && http_full(&addr, "GET", "/warm/up", None, "", b"").0 == 404
    });
    // Warm the node's allocators with one small round trip first.
    put(&addr, "/big/small", &object(5, 1000));
    let before = peak_rss(pid);
    assert!(before > 0, "no VmHWM for the node");

    // PUT 1 GiB from a generator: never whole in this process either.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).ok();
    write!(
        s,
        "PUT /big/one-gib HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nContent-Length: {LEN}\r\nConnection: close\r\n\r\n",
        tok = root_token()
    )
    .unwrap();
    let mut chunk = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < LEN {
        pattern(9, off, &mut chunk);
        s.write_all(&chunk).unwrap();
        off += chunk.len() as u64;
    }
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 201"), "{answer}");

    // GET it back, streamed, compared piece by piece.
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(300))).ok();
    write!(
        s,
        "GET /big/one-gib HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {tok}\r\nConnection: close\r\n\r\n",
        tok = root_token()
    )
    .unwrap();
    let mut r = BufReader::with_capacity(1 << 20, s);
    let mut status = String::new();
    r.read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let mut chunked = false;
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        if l.trim().is_empty() {
            break;
        }
        let l = l.to_lowercase();
        if let Some(v) = l.strip_prefix("content-length:") {
            assert_eq!(v.trim(), LEN.to_string());
        }
        chunked |= l.starts_with("transfer-encoding:") && l.contains("chunked");
    }
    assert!(!chunked, "a GET answers with its length");
    let mut got = vec![0u8; 1 << 20];
    let mut want = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < LEN {
        r.read_exact(&mut got).unwrap();
        pattern(9, off, &mut want);
        assert!(got == want, "bytes differ at {off}");
        off += got.len() as u64;
    }
    let after = peak_rss(pid);
    let grew = after.saturating_sub(before);
    eprintln!(
        "node peak RSS {} MiB before, {} MiB after a 1 GiB PUT and GET",
        before >> 20,
        after >> 20
    );
    assert!(
        grew < 256 << 20,
        "the node's peak resident memory grew by {} MiB",
        grew >> 20
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn strata_put_and_get_stream_a_20_mib_file() {
    let dir = scratch();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "1", "--replication", "1"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let (_n, addr) = start_node(&meta, &dir.path().join("n"), &dir.path().join("n.log"));
    wait_until(Duration::from_secs(30), "the node", || {
        TcpStream::connect(&addr).is_ok()
    });
    let file = dir.path().join("in.bin");
    let data = object(3, (20 << 20) + 12345);
    std::fs::write(&file, &data).unwrap();
    let out = strata()
        .args(["put", "--meta", &meta, "files/in.bin"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let back = dir.path().join("out.bin");
    ok(strata()
        .args(["get", "--meta", &meta, "files/in.bin", "-o"])
        .arg(&back));
    assert!(std::fs::read(&back).unwrap() == data);
    // And through the node's public API.
    let (code, _, body) = get(&addr, "/files/in.bin", "");
    assert_eq!(code, 200);
    assert!(body == data);
}

#[test]
fn cluster_node_flags_work_or_are_refused_by_name() {
    let dir = scratch();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "1", "--replication", "1"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    // A metadata service that could never build a table is refused.
    let out = run(strata()
        .args([
            "meta",
            "--listen",
            "127.0.0.1:0",
            "--initial-nodes",
            "2",
            "--data",
        ])
        .arg(dir.path().join("never")));
    assert!(
        !out.status.success(),
        "--initial-nodes 2 at R=3 was accepted"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--initial-nodes 2") && err.contains("--replication 3"),
        "{err}"
    );
    // Flags that cannot work here (a flash cache without a flash device)
    // or with a bad value are an error naming them.
    for (flag, value) in [("--flash-cache", "1MiB"), ("--ram-admission", "sometimes")] {
        let out = run(strata()
            .args([
                "server",
                "--meta",
                &meta,
                "--listen",
                "127.0.0.1:0",
                "--data",
            ])
            .arg(dir.path().join("refused"))
            .arg("--disk")
            .arg(dir.path().join("refused"))
            .args([flag, value]));
        assert!(!out.status.success(), "{flag} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag}: {err}");
    }
    // The ones it honours: cookies required, the object size bound, the
    // worker threads, the trace rotation age, the plan file (published to
    // the metadata service at start and on SIGHUP).
    let addr = format!("127.0.0.1:{}", free_port());
    let traces = dir.path().join("traces");
    let plan_file = dir.path().join("plan.json");
    let plan = |p: f64| {
        serde_json::json!({
            "format": "strata-tier-plan", "version": 1, "total_flash_bytes": 1000,
            "write_bound_bytes_per_s": null, "train_window": [0.0, 1.0],
            "policy": "fifo", "predicted_flash_hit_ratio": 0.5,
            "workloads": [{"id": 1, "name": "docs", "flash_bytes": 1000,
                "write_probability": p, "ttl_seconds": null, "eviction": "fifo",
                "weight": 1.0, "predicted_flash_reads_per_s": 1.0}]
        })
        .to_string()
    };
    std::fs::write(&plan_file, plan(0.5)).unwrap();
    let mut child = strata()
        .args([
            "server",
            "--meta",
            &meta,
            "--listen",
            &addr,
            "--require-cookies",
        ])
        .args(["--max-object-size", "1MiB", "--threads", "2"])
        .args(["--header-timeout", "2"])
        .arg("--plan")
        .arg(&plan_file)
        .args([
            "--trace-sample",
            "1",
            "--trace-rotate-seconds",
            "1",
            "--trace-dir",
        ])
        .arg(&traces)
        .arg("--data")
        .arg(dir.path().join("n"))
        .arg("--disk")
        .arg(dir.path().join("n"))
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(dir.path().join("n.log")).unwrap())
        .spawn()
        .unwrap();
    wait_until(Duration::from_secs(30), "the node", || {
        TcpStream::connect(&addr).is_ok()
            && http_full(&addr, "GET", "/warm/up", None, "", b"").0 == 404
    });
    let cookie = put(&addr, "/docs/a", b"hello");
    assert_eq!(get(&addr, "/docs/a", "").0, 404, "no cookie, required");
    // Writes need the cookie too under --require-cookies: a DELETE without
    // it is a 404 and deletes nothing, an overwrite without it is a 409.
    assert_eq!(http_full(&addr, "DELETE", "/docs/a", None, "", b"").0, 404);
    assert_eq!(http_full(&addr, "PUT", "/docs/a", None, "", b"mine").0, 409);
    let mut batch = Vec::new();
    batch.extend_from_slice(&1u16.to_le_bytes());
    batch.extend_from_slice(&4u32.to_le_bytes());
    batch.extend_from_slice(b"amine");
    assert_eq!(http_full(&addr, "POST", "/docs", None, "", &batch).0, 409);
    let (code, _, body) = get(&addr, &format!("/docs/a?cookie={cookie}"), "");
    assert_eq!((code, &body[..]), (200, &b"hello"[..]));
    // Names and cookies are taken exactly, as on a single node.
    for path in [
        "/docs/a%zz".to_string(),
        "/docs/x/../a".to_string(),
        "/docs/a?cookie=abc".to_string(),
        format!("/docs/a?cookie={cookie}&cookie={cookie}"),
    ] {
        assert_eq!(get(&addr, &path, "").0, 400, "{path}");
    }
    let (code, _, body) = get(&addr, &format!("/docs/a?cookie={cookie}"), "");
    assert_eq!((code, &body[..]), (200, &b"hello"[..]));
    // Refused from the declared length, before any of the body is read.
    let mut s = TcpStream::connect(&addr).unwrap();
    write!(
        s,
        "PUT /docs/big HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {tok}\r\nContent-Length: {}\r\n\r\n",
        (1 << 20) + 1,
        tok = root_token()
    )
    .unwrap();
    let mut status = String::new();
    BufReader::new(s).read_line(&mut status).unwrap();
    assert!(status.starts_with("HTTP/1.1 413"), "{status}");
    let (code, _, body) = http_full(&addr, "GET", "/_admin/plan", None, "", b"");
    assert_eq!(code, 200);
    assert!(String::from_utf8_lossy(&body).contains("\"write_probability\":0.5"));
    std::fs::write(&plan_file, plan(0.25)).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    wait_until(Duration::from_secs(10), "the reloaded plan", || {
        let (_, _, body) = http_full(&addr, "GET", "/_admin/plan", None, "", b"");
        String::from_utf8_lossy(&body).contains("\"write_probability\":0.25")
    });
    let (_, _, body) = http_full(&addr, "GET", "/_admin/status", None, "", b"");
    let st: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(st["plan"], "loaded", "{st}");
    // A client that does not finish its request head within
    // --header-timeout is disconnected; the others are served meanwhile.
    let mut slow = TcpStream::connect(&addr).unwrap();
    write!(slow, "GET /docs/a HTTP/1.1\r\nHost: x\r\n").unwrap();
    let t0 = std::time::Instant::now();
    assert_eq!(get(&addr, &format!("/docs/a?cookie={cookie}"), "").0, 200);
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut rest = Vec::new();
    let _ = std::io::Read::read_to_end(&mut slow, &mut rest);
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_millis(1500) && waited < Duration::from_secs(8),
        "slow head dropped after {waited:?}"
    );
    // A trace file is finished within about a second, naming the bucket.
    wait_until(Duration::from_secs(20), "a finished trace file", || {
        std::fs::read_dir(&traces).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.path().extension().is_some_and(|x| x == "strace"))
        })
    });
    let _ = child.kill();
    let _ = child.wait();
}

/// A node of [`quiet_cluster`]: its process, address and directory.
type QuietNode = (Proc, String, std::path::PathBuf);

/// A metadata service (`--initial-nodes n` and `meta_args`) and `n`
/// nodes, `dir/n{i}` (logs `dir/n{i}.log`), with no scrub and no RAM cache
/// (what a test damages on disk stays damaged, and every read reads it),
/// returned once the first table is out.
/// A node with no scrub and no RAM cache (what a test damages on disk
/// stays damaged, and every read reads it), its one disk `data`.
fn start_quiet_node(meta: &str, data: &std::path::Path, log: &std::path::Path) -> (Proc, String) {
    let args = [
        "--data",
        data.to_str().expect("utf-8"),
        "--scrub-every",
        "0",
        "--ram-cache",
        "0",
    ];
    start_node_with(meta, &args, log)
}

fn quiet_cluster(
    dir: &std::path::Path,
    n: usize,
    meta_args: &[&str],
) -> ((Proc, String), Vec<QuietNode>) {
    let count = n.to_string();
    let mut args = vec!["--initial-nodes", count.as_str()];
    args.extend_from_slice(meta_args);
    let meta = start_meta_with(&args, &dir.join("meta"), &dir.join("meta.log"));
    let nodes = (0..n)
        .map(|i| {
            let data = dir.join(format!("n{i}"));
            let (p, addr) = start_quiet_node(&meta.1, &data, &dir.join(format!("n{i}.log")));
            (p, addr, data)
        })
        .collect();
    wait_for_table(&meta.1, dir);
    (meta, nodes)
}

#[test]
fn a_damaged_replica_is_read_around_and_rewritten_from_a_peer() {
    let dir = scratch();
    let ((_meta, meta), nodes) = quiet_cluster(dir.path(), 3, &[]);
    let body = object(7, 4000);
    put(&nodes[0].1, "/b/damaged", &body);

    // Flip a byte of the object's bytes in one replica's segment.
    let (t, map) = map_of(&meta);
    let row = t.row_of(strata_placement::object_hash("b", "damaged"));
    let victim = addr_of(&map, &t, t.row(row)[1]);
    let (_, _, data) = nodes.iter().find(|n| n.1 == victim).expect("node");
    let seg = std::fs::read_dir(data.join("rows").join(format!("{row:08}")))
        .expect("row dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.extension().is_some_and(|x| x == "seg")
                && std::fs::read(p).is_ok_and(|b| b.windows(64).any(|w| w == &body[1000..1064]))
        })
        .expect("the segment holding the object");
    let mut bytes = std::fs::read(&seg).expect("seg");
    let at = bytes
        .windows(64)
        .position(|w| w == &body[1000..1064])
        .expect("object bytes");
    bytes[at + 10] ^= 0x55;
    std::fs::write(&seg, &bytes).expect("flip");

    // The damaged node's public API still answers the right bytes (its own
    // copy fails its checksum; the read goes to another replica)...
    let (code, _, got) = get(&victim, "/b/damaged", "");
    assert_eq!(code, 200);
    assert!(got == body, "wrong bytes served");
    // ...and its copy is rewritten from a peer, without a scrub.
    let path = format!("/cluster/v1/rows/{row}/objects/b/damaged");
    let healthy = addr_of(&map, &t, t.row(row)[0]);
    let (_, _, good) = http_full(&healthy, "GET", &path, Some(1), "", b"");
    wait_until(
        Duration::from_secs(30),
        "the damaged copy rewritten",
        || {
            let (code, _, rec) = http_full(&victim, "GET", &path, Some(1), "", b"");
            code == 200 && rec == good
        },
    );
    let (_, _, m) = http_full(&victim, "GET", "/metrics", None, "", b"");
    assert!(
        metric(
            &String::from_utf8_lossy(&m),
            "strata_server_read_repairs_total"
        ) >= Some(1.0),
        "no read repair counted"
    );
    // Every node serves it, every time.
    for (_, addr, _) in &nodes {
        for _ in 0..3 {
            let (code, _, got) = get(addr, "/b/damaged", "");
            assert_eq!(code, 200);
            assert!(got == body);
        }
    }
}

/// A replica that lost its newest record of a name to damage no checksum
/// can attribute (several bytes of the needle's header hit, its index
/// checkpoint gone: the open's scan cannot tell whose needle it was, and
/// the same name's older needle becomes the newest it holds) must not
/// serve that older record. It used to: the node read its own replica
/// first and answered 200 with the older version (docs/reliability.md,
/// finding 25). Now the open notes that the row may lack records, the
/// node's reads and exports of it answer 503 (the reader asks another
/// replica) while another replica is live in the table, even one that is
/// down, until it has caught up from the other replicas, which it does as
/// soon as they are back, with the scrub off.
#[test]
fn a_replica_that_lost_its_newest_record_to_damage_serves_it_only_once_caught_up() {
    let dir = scratch();
    // A long suspicion time: stopped nodes stay live in the table.
    let ((_meta, meta), mut nodes) = quiet_cluster(dir.path(), 3, &["--suspect-after", "600"]);
    let (old, new) = (object(21, 3000), object(22, 3000));
    put(&nodes[0].1, "/b/lost", &old);
    put(&nodes[0].1, "/b/lost", &new);
    let (t, map) = map_of(&meta);
    let row = t.row_of(strata_placement::object_hash("b", "lost"));
    let path = format!("/cluster/v1/rows/{row}/objects/b/lost");
    let (_, _, good) = http_full(&nodes[0].1, "GET", &path, Some(1), "", b"");
    let victim = addr_of(&map, &t, t.row(row)[1]);
    let i = nodes.iter().position(|n| n.1 == victim).expect("node");
    // Every node stopped (the two others too, so that the victim cannot
    // catch up at once).
    for n in nodes.iter_mut() {
        n.0.kill();
    }
    // The newest needle's header, from its key on, overwritten; the row's
    // index checkpoints removed, so that the open scans the segment.
    let row_dir = nodes[i].2.join("rows").join(format!("{row:08}"));
    assert!(row_dir.is_dir(), "{}", row_dir.display());
    let mut hit = 0;
    for f in files_under(&row_dir) {
        let name = f.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".idx") {
            std::fs::remove_file(&f).expect("remove checkpoint");
            continue;
        }
        let mut bytes = std::fs::read(&f).expect("read");
        let Some(at) = bytes.windows(64).position(|w| w == &new[..64]) else {
            continue;
        };
        let start = bytes[..at]
            .windows(4)
            .rposition(|w| w == b"NEDL")
            .expect("the needle's header");
        bytes[start + 8..start + 28].fill(0xA5);
        std::fs::write(&f, &bytes).expect("damage");
        hit += 1;
    }
    assert_eq!(hit, 1, "the newest record's segment");
    let restart = |j: usize, nodes: &mut Vec<QuietNode>| {
        let data = nodes[j].2.clone();
        let log = dir.path().join(format!("n{j}-again.log"));
        let (p, addr) = start_quiet_node(&meta, &data, &log);
        nodes[j] = (p, addr.clone(), data);
        wait_for_node_addr(&meta, &addr);
        addr
    };
    let addr = restart(i, &mut nodes);
    // The other replicas are down, yet live in the table: the victim's
    // copy serves neither its older version nor an export of the row (a
    // public GET through it would ask the others until its deadline).
    let (code, _, why) = http_full(&addr, "GET", &path, Some(1), "", b"");
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&why));
    assert!(String::from_utf8_lossy(&why).contains("catching up"));
    let export = format!("/cluster/v1/rows/{row}/export");
    let (code, _, why) = http_full(&addr, "GET", &export, Some(1), "", b"");
    assert_eq!(code, 503, "{}", String::from_utf8_lossy(&why));
    // The others back: through the damaged node, the newest version every
    // time; its own copy catches up without a scrub and then serves the
    // newest record itself.
    for j in (0..nodes.len()).filter(|&j| j != i) {
        restart(j, &mut nodes);
    }
    for _ in 0..5 {
        let (code, _, got) = get(&addr, "/b/lost", "");
        assert_eq!(code, 200);
        assert!(got == new, "the damaged node served an older version");
    }
    wait_until(Duration::from_secs(30), "the replica to catch up", || {
        let (code, _, rec) = http_full(&addr, "GET", &path, Some(1), "", b"");
        code == 200 && rec == good
    });
    let log = std::fs::read_to_string(dir.path().join(format!("n{i}-again.log"))).unwrap();
    assert!(log.contains("may lack records it acknowledged"), "{log}");
    assert!(log.contains("caught up from the other replicas"), "{log}");
    assert!(!row_dir.join(strata_store::DAMAGE_NOTE).exists());
}

/// A HEAD through any node reads the start of the object's head record,
/// not the object, from the node's own replica or over the node protocol
/// (`?start=N`, answered with `x-strata-record-length`): with replication
/// 2 over 4 nodes, two nodes hold the row and two ask a replica. The
/// object's bytes are damaged on both replicas 3 MiB in; every node still
/// answers its HEAD with the length and cookie (a HEAD read and checked
/// the whole record before, and failed here), while each replica's read
/// of the whole record fails.
#[test]
fn a_head_through_any_node_reads_the_record_start() {
    let dir = scratch();
    let ((_meta, meta), procs) = quiet_cluster(dir.path(), 4, &["--replication", "2"]);
    let nodes: Vec<String> = procs.iter().map(|p| p.1.clone()).collect();
    let body = object(9, 4 << 20);
    let cookie = put(&nodes[0], "/b/big", &body);
    let (t, map) = map_of(&meta);
    let row = t.row_of(strata_placement::object_hash("b", "big"));
    let holders: Vec<String> = t.row(row).iter().map(|&d| addr_of(&map, &t, d)).collect();
    assert_eq!(holders.len(), 2);
    assert!(nodes.iter().any(|n| !holders.contains(n)));
    // Flip a byte 3 MiB into the object on every replica.
    let probe = &body[3 << 20..(3 << 20) + 64];
    assert_eq!(
        flip_on_disk(dir.path(), probe, 10),
        2,
        "the object's bytes on both replicas"
    );
    for via in &nodes {
        let (code, head, body) = http_full(via, "HEAD", "/b/big", None, "", b"");
        assert_eq!(
            code,
            200,
            "HEAD via {via} (holds the row: {})",
            holders.contains(via)
        );
        assert_eq!(body.len(), 0);
        assert_eq!(header(&head, "content-length"), Some("4194304"));
        assert_eq!(header(&head, "x-strata-cookie"), Some(cookie.as_str()));
    }
    // The damage is real: each replica's read of the whole record fails
    // its checksum.
    let path = format!("/cluster/v1/rows/{row}/objects/b/big");
    for h in &holders {
        assert_eq!(http_full(h, "GET", &path, Some(1), "", b"").0, 500, "{h}");
    }
}

/// A request that reaches a node before the cluster's first table (the
/// node serves as soon as it listens; the table comes once enough nodes
/// registered) waits for the table and is then served, rather than
/// failing or being stored under a default layout.
#[test]
fn a_put_before_the_first_table_waits_for_it() {
    let dir = scratch();
    let (_meta, meta) = start_meta_with(
        &["--initial-nodes", "2", "--replication", "2"],
        &dir.path().join("meta"),
        &dir.path().join("meta.log"),
    );
    let (_a, a) = start_node(&meta, &dir.path().join("n0"), &dir.path().join("n0.log"));
    wait_until(Duration::from_secs(30), "node A to listen", || {
        TcpStream::connect(&a).is_ok()
    });
    assert_eq!(
        status(&meta)["table_version"].as_u64(),
        Some(0),
        "no table yet"
    );
    let body = object(7, 300_000);
    let sent = body.clone();
    let via = a.clone();
    let early = std::thread::spawn(move || put(&via, "/early/object", &sent));
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !early.is_finished(),
        "the PUT was answered before any table existed"
    );
    let (_b, b) = start_node(&meta, &dir.path().join("n1"), &dir.path().join("n1.log"));
    let cookie = early
        .join()
        .expect("the early PUT is answered 201 once the table is out");
    let (code, head, got) = get(&b, "/early/object", "");
    assert_eq!(code, 200, "{}", logs(dir.path()));
    assert!(got == body, "the early object differs when read through B");
    assert_eq!(header(&head, "x-strata-cookie"), Some(cookie.as_str()));
}
