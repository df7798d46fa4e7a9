//! Shared by the cluster tests: a real etcd, a metadata service and node
//! processes of the real `strata` binary on loopback.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The admin token every server and command of the tests runs with.
#[allow(dead_code)]
pub const TEST_ADMIN_TOKEN: &str = "strata-test-admin-token";

/// The `strata` binary, with the tests' admin token in its environment.
/// The cluster secret of the tests' clusters (every node, metadata
/// service and client gets it).
pub const TEST_CLUSTER_SECRET: &str = "strata-test-cluster-secret";

pub fn strata() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_strata"));
    c.env("STRATA_ADMIN_TOKEN", TEST_ADMIN_TOKEN);
    c.env("STRATA_CLUSTER_SECRET", TEST_CLUSTER_SECRET);
    c.env("STRATA_ROOT_ACCESS_KEY", TEST_ROOT_ACCESS);
    c.env("STRATA_ROOT_SECRET_KEY", TEST_ROOT_SECRET);
    c
}

/// The root key of the tests' servers (the object API's and S3's).
pub const TEST_ROOT_ACCESS: &str = "STRATATESTROOT";
/// Its secret.
pub const TEST_ROOT_SECRET: &str = "strata-test-secret-0123456789";

/// A bearer token of the root key for the object API, valid for a day.
pub fn root_token() -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    strata_s3::auth::mint_token(
        &strata_s3::auth::Key {
            access_key: TEST_ROOT_ACCESS.into(),
            secret_key: TEST_ROOT_SECRET.into(),
        },
        now + 86_400,
    )
}

/// `head` (a request written by hand) with `Authorization: Bearer` and a
/// token of the root key after its request line.
pub fn authed(head: &str) -> String {
    head.replacen(
        "\r\n",
        &format!("\r\nAuthorization: Bearer {}\r\n", root_token()),
        1,
    )
}

/// A loopback port for a server child to listen on, taken below the
/// kernel's ephemeral range (32768-60999 by default). A port from
/// `bind(0)` is in that range and free only until some process's next
/// outgoing connection takes it as its source port: under load a node then
/// failed to bind and the cluster never formed (seen in CI).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    // Test binaries run one at a time; the process id spreads reruns.
    let start = std::process::id().wrapping_mul(7919) % 12_000;
    loop {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((start + n) % 12_000) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
}

/// A temporary directory on tmpfs when there is one (the tests measure the
/// cluster's logic, not this VM's fsync latency), else the default.
pub fn scratch() -> tempfile::TempDir {
    if Path::new("/dev/shm").is_dir() {
        if let Ok(d) = tempfile::tempdir_in("/dev/shm") {
            return d;
        }
    }
    tempfile::tempdir().expect("tempdir")
}

/// A child process killed when dropped.
pub struct Proc {
    pub child: Child,
    pub name: String,
}

impl Proc {
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

pub struct Etcd {
    pub proc: Proc,
    pub url: String,
    _dir: tempfile::TempDir,
}

pub fn start_etcd() -> Etcd {
    let dir = scratch();
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "t", "--data-dir"])
        .arg(dir.path().join("etcd"))
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("t={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd must be installed (apt-get install etcd-server)");
    let etcd = Etcd {
        proc: Proc {
            child,
            name: "etcd".into(),
        },
        url,
        _dir: dir,
    };
    wait_until(Duration::from_secs(20), "etcd to answer", || {
        std::net::TcpStream::connect(("127.0.0.1", client)).is_ok()
    });
    etcd
}

pub fn wait_until(limit: Duration, what: &str, mut f: impl FnMut() -> bool) {
    let start = Instant::now();
    while !f() {
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the metadata service's map lists a node at `addr` (a node
/// restarted on another port re-registers; its heartbeat brings the new
/// address).
pub fn wait_for_node_addr(meta: &str, addr: &str) {
    wait_until(
        Duration::from_secs(30),
        "a restarted node's address",
        || {
            map_of(meta).1["nodes"]
                .as_array()
                .is_some_and(|n| n.iter().any(|n| n["addr"] == addr))
        },
    );
}

/// Waits for the metadata service at `meta` to publish its first table
/// (every initial node registered). On a timeout it panics with what the
/// service knows and every `*.log` under `dir`, so that a cluster that never
/// formed (a node that failed to start, or never registered) says why.
pub fn wait_for_table(meta: &str, dir: &Path) {
    let start = Instant::now();
    let limit = Duration::from_secs(60);
    loop {
        let out = run(strata().args(["cluster", "status", "--meta", meta, "--json"]));
        let st: Option<serde_json::Value> = serde_json::from_slice(&out.stdout).ok();
        if st
            .as_ref()
            .and_then(|s| s["table_version"].as_u64())
            .is_some_and(|v| v >= 1)
        {
            return;
        }
        if start.elapsed() > limit {
            panic!(
                "timed out after {limit:?} waiting for a table; status: {}\n{}\n{}",
                st.map(|s| s.to_string()).unwrap_or_default(),
                String::from_utf8_lossy(&out.stderr),
                logs(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub fn start_meta(etcd: Option<&str>, initial: usize, dir: &Path, log: &Path) -> (Proc, String) {
    let initial = initial.to_string();
    let mut args = vec!["--initial-nodes", initial.as_str()];
    if let Some(url) = etcd {
        args.extend(["--etcd", url, "--prefix", "/strata-test"]);
    }
    start_meta_with(&args, dir, log)
}

/// A metadata service with its state in `dir` (quick failure detection:
/// suspect after 1 s, 2 strikes, unless `args` say otherwise) and extra
/// arguments.
pub fn start_meta_with(args: &[&str], dir: &Path, log: &Path) -> (Proc, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    let mut quick = Vec::new();
    for (flag, value) in [("--suspect-after", "1"), ("--strikes", "2")] {
        if !args.contains(&flag) {
            quick.extend([flag, value]);
        }
    }
    let child = strata()
        .args(["meta", "--listen", &addr])
        .args(quick)
        .arg("--data")
        .arg(dir)
        .args(args)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("strata meta");
    let p = Proc {
        child,
        name: "meta".into(),
    };
    wait_until(Duration::from_secs(20), "meta to listen", || {
        std::net::TcpStream::connect(&addr).is_ok()
    });
    (p, addr)
}

/// A metadata service (on `etcd` if given) and `n` nodes of one disk each,
/// `dir/node{i}` (logs `dir/node{i}.log`, the service's `dir/meta.log`),
/// returned once the first table is out.
pub fn start_cluster_of(
    etcd: Option<&str>,
    n: usize,
    dir: &Path,
) -> ((Proc, String), Vec<(Proc, String)>) {
    let meta = start_meta(etcd, n, &dir.join("meta"), &dir.join("meta.log"));
    let nodes = (0..n)
        .map(|i| {
            start_node(
                &meta.1,
                &dir.join(format!("node{i}")),
                &dir.join(format!("node{i}.log")),
            )
        })
        .collect();
    wait_until(Duration::from_secs(30), "the first table", || {
        status(&meta.1)["table_version"].as_u64() == Some(1)
    });
    (meta, nodes)
}

pub fn start_node(meta: &str, data: &Path, log: &Path) -> (Proc, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // The data directory is the node's one disk device (no flash tier).
    let child = strata()
        .args(["server", "--meta", meta, "--listen", &addr, "--data"])
        .arg(data)
        .arg("--disk")
        .arg(data)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("strata server");
    (
        Proc {
            child,
            name: format!("node {addr}"),
        },
        addr,
    )
}

pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("run strata")
}

pub fn ok(cmd: &mut Command) -> String {
    let out = run(cmd);
    assert!(
        out.status.success(),
        "{:?} failed: {}\n{}",
        cmd,
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub fn status(meta: &str) -> serde_json::Value {
    let s = ok(strata().args(["cluster", "status", "--meta", meta, "--json"]));
    serde_json::from_str(&s).expect("status JSON")
}

pub fn logs(dir: &Path) -> String {
    let mut out = String::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p: PathBuf = e.path();
            if p.extension().is_some_and(|x| x == "log") {
                out.push_str(&format!("== {}\n", p.display()));
                out.push_str(&std::fs::read_to_string(&p).unwrap_or_default());
            }
        }
    }
    out
}

/// One HTTP/1.1 request; returns the status, the header block (lowercase)
/// and the body.
pub fn http_full(
    addr: &str,
    method: &str,
    path: &str,
    version: Option<u64>,
    headers: &str,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    http_full_within(
        Duration::from_secs(30),
        addr,
        method,
        path,
        version,
        headers,
        body,
    )
}

/// [`http_full`] waiting up to `patience` for the answer, for a request
/// that itself waits out a server-side deadline.
pub fn http_full_within(
    patience: Duration,
    addr: &str,
    method: &str,
    path: &str,
    version: Option<u64>,
    headers: &str,
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    let head = request_head(addr, addr, method, path, version, headers, body);
    send_raw(patience, addr, head.as_bytes(), body)
}

/// The head [`http_full`] sends to `addr`: control routes with the tests'
/// admin token, cluster routes signed with the tests' cluster secret for
/// destination `signed_for` (unless `headers` carry credentials).
pub fn request_head(
    addr: &str,
    signed_for: &str,
    method: &str,
    path: &str,
    version: Option<u64>,
    headers: &str,
    body: &[u8],
) -> String {
    let mut v = version
        .map(|v| format!("x-strata-table-version: {v}\r\n"))
        .unwrap_or_default();
    // Control endpoints get the tests' admin token, objects a token of the
    // root key, unless the caller sends an Authorization of its own
    // (`Authorization: none` for none at all).
    let control = path.starts_with("/_admin") || path.starts_with("/metrics");
    let cluster = path.starts_with("/v1/") || path.starts_with("/cluster/v1/");
    let own = headers.to_ascii_lowercase().contains("authorization:");
    let headers = headers.replace("Authorization: none\r\n", "");
    if !own && control {
        v.push_str(&format!("Authorization: Bearer {TEST_ADMIN_TOKEN}\r\n"));
    } else if !own && !cluster && path != "/healthz" {
        v.push_str(&format!("Authorization: Bearer {}\r\n", root_token()));
    }
    // Cluster routes are signed with the tests' cluster secret unless the
    // caller sends credentials of its own.
    if cluster && !headers.to_ascii_lowercase().contains("x-strata-auth:") {
        let stamp = headers
            .lines()
            .find_map(|l| l.trim().strip_prefix("x-strata-stamp:"))
            .and_then(|x| x.trim().parse().ok());
        let secret = strata_meta::cluster_auth::ClusterSecret::new(TEST_CLUSTER_SECRET).unwrap();
        let auth = secret.sign(
            &strata_meta::cluster_auth::Signed {
                method,
                path,
                version,
                stamp,
                host: signed_for,
            },
            body,
        );
        v.push_str(&format!("x-strata-auth: {auth}\r\n"));
    }
    format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{v}{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
}

/// Sends `head` and `body` as they are on a new connection to `addr`,
/// waiting up to `patience`: the status, the header block (lowercase) and
/// the body of the answer.
pub fn send_raw(
    patience: Duration,
    addr: &str,
    head: &[u8],
    body: &[u8],
) -> (u16, String, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(patience)).ok();
    s.write_all(head).expect("send");
    s.write_all(body).expect("send body");
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).expect("read");
    let at = buf
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(buf.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&buf[..at]).to_lowercase();
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    (code, head, buf[at..].to_vec())
}

/// The value of header `name` (lowercase) in a header block from [`http_full`].
pub fn header<'a>(head: &'a str, name: &str) -> Option<&'a str> {
    head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == name).then(|| v.trim())
    })
}

/// The current placement table and the map JSON (for node addresses).
pub fn map_of(meta: &str) -> (strata_placement::PlacementTable, serde_json::Value) {
    let (_, _, body) = http_full(meta, "GET", "/v1/map", None, "", b"");
    let map: serde_json::Value = serde_json::from_slice(&body).expect("map");
    let t = serde_json::from_value(map["table"].clone()).expect("table");
    (t, map)
}

/// The data address of the node holding `disk`.
pub fn addr_of(
    map: &serde_json::Value,
    t: &strata_placement::PlacementTable,
    disk: strata_placement::DiskId,
) -> String {
    let node = t.disk(disk).expect("disk").node.0;
    map["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["id"] == node))
        .and_then(|n| n["addr"].as_str())
        .expect("node")
        .to_string()
}

/// A node process with extra arguments.
pub fn start_node_with(meta: &str, args: &[&str], log: &Path) -> (Proc, String) {
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // Without --flash or --disk, the data directory is the node's one disk
    // device (no flash tier).
    let mut devices: Vec<&str> = Vec::new();
    if !args.iter().any(|a| *a == "--flash" || *a == "--disk") {
        if let Some(i) = args.iter().position(|a| *a == "--data") {
            devices = vec!["--disk", args[i + 1]];
        }
    }
    let child = strata()
        .args(["server", "--meta", meta, "--listen", &addr])
        .args(args)
        .args(&devices)
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).expect("log"))
        .spawn()
        .expect("strata server");
    (
        Proc {
            child,
            name: format!("node {addr}"),
        },
        addr,
    )
}

/// The value of a Prometheus sample `name` (no labels) in `text`.
pub fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == name).then(|| v.trim().parse().ok())?
    })
}

/// The data directory of node `id` among `nodes` (process, address, dir),
/// found by its address in the map (ids follow registration order, not
/// start order).
pub fn dir_of_node(map: &serde_json::Value, nodes: &[(Proc, String, PathBuf)], id: u32) -> PathBuf {
    let addr = map["nodes"]
        .as_array()
        .and_then(|ns| ns.iter().find(|n| n["id"] == id))
        .and_then(|n| n["addr"].as_str())
        .expect("node in map")
        .to_string();
    nodes
        .iter()
        .find(|n| n.1 == addr)
        .map(|n| n.2.clone())
        .expect("node process")
}

/// A deterministic body of `len` bytes that differs with `seed` (striped
/// objects whose tracts must not be mixed up between versions).
pub fn seeded_body(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

/// Successful protocol PUTs a node has answered (its `/metrics`).
pub fn puts_answered(addr: &str) -> f64 {
    let (code, _, text) = http_full(addr, "GET", "/metrics", None, "", b"");
    assert_eq!(code, 200, "GET /metrics of {addr}");
    metric(
        &String::from_utf8_lossy(&text),
        "strata_http_requests_total{method=\"PUT\",code=\"200\"}",
    )
    .unwrap_or(0.0)
}

/// `len` bytes of a xorshift64 stream started at `seed` (made odd): the
/// deterministic object bodies of the cluster tests.
pub fn xorshift_bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}
