//! The real `strata` binary as child processes: servers and the metadata
//! service, killed with SIGKILL and started again on the same directories.

use anyhow::{bail, Context};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Credentials every process of a run gets (fresh per run).
#[derive(Clone)]
pub struct Env {
    pub exe: PathBuf,
    pub admin_token: String,
    pub cluster_secret: String,
    /// The S3 root key of nodes with `--s3-listen` (access key, secret).
    pub s3_root: (String, String),
}

impl Env {
    pub fn command(&self) -> Command {
        let mut c = Command::new(&self.exe);
        c.env("STRATA_ADMIN_TOKEN", &self.admin_token);
        c.env("STRATA_CLUSTER_SECRET", &self.cluster_secret);
        c.env("STRATA_ROOT_ACCESS_KEY", &self.s3_root.0);
        c.env("STRATA_ROOT_SECRET_KEY", &self.s3_root.1);
        c
    }
}

/// A `strata server` (or `strata meta`) child process.
pub struct Server {
    child: Option<Child>,
    /// The address it serves its API on.
    pub addr: String,
    args: Vec<OsString>,
    log: PathBuf,
    env: Env,
}

/// A loopback port for a child server to listen on, taken below the
/// kernel's ephemeral range (32768-60999 by default): a port from
/// `bind(0)` is in that range and free only until some process's next
/// outgoing connection takes it as its source port, and then the child
/// fails to bind.
pub fn listen_port() -> anyhow::Result<u16> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(7919) % 12_000;
    for _ in 0..12_000 {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = 20_000 + ((start + n) % 12_000) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return Ok(port);
        }
    }
    bail!("no free loopback port in 20000-31999")
}

fn tail(log: &Path) -> String {
    let s = std::fs::read_to_string(log).unwrap_or_default();
    let mut lines: Vec<&str> = s.lines().collect();
    lines.dedup();
    lines[lines.len().saturating_sub(4)..]
        .iter()
        .map(|l| l.chars().take(300).collect::<String>())
        .collect::<Vec<_>>()
        .join("\n")
}

impl Server {
    /// Starts `strata server ARGS` and waits for its banner (the address on
    /// standard output), then for it to take a write.
    pub fn start(env: &Env, args: Vec<OsString>, log: &Path) -> anyhow::Result<Server> {
        let mut s = Server {
            child: None,
            addr: String::new(),
            args,
            log: log.to_path_buf(),
            env: env.clone(),
        };
        s.spawn()?;
        Ok(s)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("log {}", self.log.display()))?;
        let mut child = self
            .env
            .command()
            .arg("server")
            .args(&self.args)
            .stdout(Stdio::piped())
            .stderr(logf)
            .spawn()
            .context("starting strata server")?;
        let out = child.stdout.take().context("stdout")?;
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut line = String::new();
            let _ = r.read_line(&mut line);
            let _ = tx.send(line);
            // Keep draining so the server never blocks on its stdout.
            let mut sink = Vec::new();
            let _ = r.read_to_end(&mut sink);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .map(str::to_string);
        let Some(addr) = addr else {
            let _ = child.kill();
            let _ = child.wait();
            bail!(
                "strata server did not start (log {}):\n{}",
                self.log.display(),
                tail(&self.log)
            );
        };
        self.addr = addr;
        self.child = Some(child);
        Ok(())
    }

    /// Waits until `PUT /torture-ready/probe` through `addr` succeeds.
    pub fn wait_ready(addr: &str, limit: Duration) -> anyhow::Result<()> {
        Self::wait_answering(addr, limit, false)
    }

    /// [`Server::wait_ready`], also taking 507 (Insufficient Storage) as
    /// ready when `full_ok`: a node on a full volume has come back when it
    /// answers that its volume is full.
    pub fn wait_answering(addr: &str, limit: Duration, full_ok: bool) -> anyhow::Result<()> {
        let start = Instant::now();
        loop {
            let last = match super::http::request(
                addr,
                "PUT",
                "/torture-ready/probe",
                &[],
                b"ready",
                Duration::from_secs(5),
            ) {
                Ok(r) => {
                    if r.status == 201 || r.status == 200 || (full_ok && r.status == 507) {
                        return Ok(());
                    }
                    format!("{} {}", r.status, String::from_utf8_lossy(&r.body).trim())
                }
                Err(e) => format!("no answer: {e}"),
            };
            if start.elapsed() > limit {
                bail!("{addr} takes no write after {limit:?} (the last probe PUT: {last})");
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGKILL: nothing is flushed, nothing is cleaned up.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again with the same arguments.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A `strata meta` child process.
pub struct Meta {
    child: Child,
    pub addr: String,
}

impl Meta {
    pub fn start(env: &Env, args: &[&str], dir: &Path, log: &Path) -> anyhow::Result<Meta> {
        let port = listen_port()?;
        let addr = format!("127.0.0.1:{port}");
        let child = env
            .command()
            .args(["meta", "--listen", &addr, "--data"])
            .arg(dir)
            .args(args)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(log)?)
            .spawn()
            .context("starting strata meta")?;
        let mut m = Meta { child, addr };
        let start = Instant::now();
        while std::net::TcpStream::connect(&m.addr).is_err() {
            if start.elapsed() > Duration::from_secs(30) || !matches!(m.child.try_wait(), Ok(None))
            {
                bail!("strata meta did not start:\n{}", tail(log));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        m.addr = m.addr.clone();
        Ok(m)
    }
}

impl Drop for Meta {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every regular file under `dir` whose name ends with `suffix`.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && p.to_string_lossy().ends_with(suffix) => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}
