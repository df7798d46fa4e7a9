//! Helpers of the node's integration tests: start the real `strata server`
//! binary, talk raw HTTP/1.1 to it (so tests can also send what a polite
//! client never would).

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The admin token of the tests' servers.
pub const ADMIN_TOKEN: &str = "strata-test-admin-token";
/// The cluster secret of the tests' servers (for the direct path).
pub const CLUSTER_SECRET: &str = "strata-test-node-cluster-secret";

/// The root key of the tests' servers (the same as cluster_common's, so
/// that a `strata` command started by either side's helpers holds it).
pub const ROOT_ACCESS: &str = "STRATATESTROOT";
/// Its secret.
pub const ROOT_SECRET: &str = "strata-test-secret-0123456789";

/// A bearer token of the root key, valid for a day.
pub fn root_token() -> String {
    token_of(ROOT_ACCESS, ROOT_SECRET)
}

/// A bearer token of key `access` with `secret`, valid for a day.
pub fn token_of(access: &str, secret: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    strata_s3::auth::mint_token(
        &strata_s3::auth::Key {
            access_key: access.into(),
            secret_key: secret.into(),
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

/// A running `strata server`.
pub struct Server {
    child: Child,
    /// host:port it listens on.
    pub addr: String,
    /// Its data directory.
    pub data: PathBuf,
}

impl Server {
    /// Starts a node on a free port with its data under `data`.
    pub fn start(data: &Path, extra: &[&str]) -> Server {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_strata"));
        cmd.env("STRATA_ADMIN_TOKEN", ADMIN_TOKEN);
        cmd.env("STRATA_CLUSTER_SECRET", CLUSTER_SECRET);
        // The root key: of the object API, and of S3 for a test that adds
        // --s3-listen.
        cmd.env("STRATA_ROOT_ACCESS_KEY", ROOT_ACCESS);
        cmd.env("STRATA_ROOT_SECRET_KEY", ROOT_SECRET);
        cmd.arg("server")
            .arg("--data")
            .arg(data)
            .args(["--listen", "127.0.0.1:0", "--threads", "2"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("start strata server");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        BufReader::new(out)
            .read_line(&mut line)
            .expect("read banner");
        if line.is_empty() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            panic!("strata server did not start: {err}");
        }
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .expect("address in banner")
            .to_string();
        Server {
            child,
            addr,
            data: data.to_path_buf(),
        }
    }

    /// SIGKILL, no chance to flush anything.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The process id.
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM and waits up to `wait` for the process to end: its
    /// exit status (None: still running at the deadline), how long it
    /// took, and what it wrote to stderr.
    #[allow(dead_code)]
    pub fn terminate(
        &mut self,
        wait: std::time::Duration,
    ) -> (
        Option<std::process::ExitStatus>,
        std::time::Duration,
        String,
    ) {
        let t0 = std::time::Instant::now();
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let mut status = None;
        while t0.elapsed() < wait {
            if let Ok(Some(s)) = self.child.try_wait() {
                status = Some(s);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let took = t0.elapsed();
        let mut err = String::new();
        if status.is_some() {
            if let Some(mut e) = self.child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
        }
        (status, took, err)
    }

    /// Sends SIGHUP (reload the tier plan).
    pub fn hup(&self) {
        let _ = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status();
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// An HTTP response.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses a whole response read until the server closed the connection.
pub fn parse(raw: &[u8], head_only: bool) -> Resp {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no header end in {:?}", String::from_utf8_lossy(raw)));
    let head = String::from_utf8_lossy(&raw[..end]).into_owned();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .expect("status line");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let body = if head_only {
        Vec::new()
    } else {
        raw[end + 4..].to_vec()
    };
    Resp {
        status,
        headers,
        body,
    }
}

/// One request on a fresh connection (`Connection: close`).
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<&[u8]>,
) -> std::io::Result<Resp> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        if k.eq_ignore_ascii_case("authorization") && *v == "none" {
            continue;
        }
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    // Control endpoints get the tests' admin token, objects a token of the
    // root key, unless the caller sends an Authorization of its own (or
    // `Authorization: none`, for none at all).
    let control = path.starts_with("/_admin") || path.starts_with("/metrics");
    let own = headers
        .iter()
        .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
    if !own && control {
        req.push_str(&format!("Authorization: Bearer {ADMIN_TOKEN}\r\n"));
    } else if !own && !path.starts_with("/cluster/") && path != "/healthz" {
        req.push_str(&format!("Authorization: Bearer {}\r\n", root_token()));
    }
    if let Some(b) = body {
        req.push_str(&format!("Content-Length: {}\r\n", b.len()));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes())?;
    if let Some(b) = body {
        s.write_all(b)?;
    }
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    if !raw.windows(4).any(|w| w == b"\r\n\r\n") {
        // The server went away before answering (e.g. killed).
        return Err(std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            "no complete response",
        ));
    }
    Ok(parse(&raw, method == "HEAD"))
}

pub fn get(addr: &str, path: &str) -> Resp {
    request(addr, "GET", path, &[], None).expect("GET")
}

pub fn put(addr: &str, path: &str, body: &[u8]) -> Resp {
    request(addr, "PUT", path, &[], Some(body)).expect("PUT")
}

/// The framed body of a batch PUT.
pub fn batch_body(items: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (n, d) in items {
        out.extend_from_slice(&(n.len() as u16).to_le_bytes());
        out.extend_from_slice(&(d.len() as u32).to_le_bytes());
        out.extend_from_slice(n.as_bytes());
        out.extend_from_slice(d);
    }
    out
}

/// Deterministic object contents.
pub fn content(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// (name, cookie) of each object of a batch answer, in order.
pub fn cookies_of(json: &str) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_str(json).expect("batch answer is JSON");
    v["objects"]
        .as_array()
        .expect("objects")
        .iter()
        .map(|o| {
            (
                o["name"].as_str().unwrap_or("").to_string(),
                o["cookie"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}
