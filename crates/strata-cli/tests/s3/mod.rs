//! Shared by the S3 tests: a cluster of one (the real `strata server`
//! without `--meta`, serving S3), and real S3 clients (boto3 and the aws
//! CLI) run against it.

#![allow(dead_code)]

use crate::cluster_common::*;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// The root key the tests start nodes with.
pub const ACCESS: &str = TEST_ROOT_ACCESS;
/// Its secret.
pub const SECRET: &str = TEST_ROOT_SECRET;
/// The metadata service's admin token (key routes).
pub const ADMIN: &str = "strata-test-admin-token";

/// A cluster of one serving S3: one `strata server` without `--meta`,
/// its embedded metadata service at a known address (`--meta-listen`, for
/// `strata key`).
pub struct S3Cluster {
    /// The embedded metadata service's address.
    pub meta: String,
    pub node: (Proc, String),
    pub s3: String,
    pub dir: tempfile::TempDir,
    /// With TLS: the self-signed certificate the S3 listener serves (the
    /// clients' CA bundle).
    pub tls: Option<PathBuf>,
}

impl S3Cluster {
    pub fn start() -> S3Cluster {
        Self::start_with(&[])
    }

    /// [`S3Cluster::start`] with more `strata server` arguments.
    /// A port picked by [`free_port`] may be taken by another test's
    /// server before this one binds it: a node that exits while starting
    /// is started again on fresh ports (three tries).
    pub fn start_with(extra: &[&str]) -> S3Cluster {
        Self::start_full(extra, false)
    }

    /// [`S3Cluster::start_with`], the S3 API over TLS when `tls`: a
    /// self-signed certificate for 127.0.0.1 and localhost (rcgen) given
    /// to `--s3-tls-cert`, and to the clients as their CA bundle.
    pub fn start_full(extra: &[&str], tls: bool) -> S3Cluster {
        for attempt in 1.. {
            let dir = scratch();
            let meta = format!("127.0.0.1:{}", free_port());
            let s3 = format!("127.0.0.1:{}", free_port());
            let addr = format!("127.0.0.1:{}", free_port());
            let mut args: Vec<String> = extra.iter().map(|x| x.to_string()).collect();
            let cert = tls.then(|| {
                let ck = rcgen::generate_simple_self_signed(vec![
                    "127.0.0.1".to_string(),
                    "localhost".to_string(),
                ])
                .expect("self-signed certificate");
                let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
                std::fs::write(&cert, ck.cert.pem()).expect("cert.pem");
                std::fs::write(&key, ck.key_pair.serialize_pem()).expect("key.pem");
                args.extend(["--s3-tls-cert".into(), cert.display().to_string()]);
                args.extend(["--s3-tls-key".into(), key.display().to_string()]);
                cert
            });
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            let node = Self::node_with(&meta, dir.path(), &s3, &addr, &refs);
            let mut c = S3Cluster {
                meta,
                node: (node, addr),
                s3,
                dir,
                tls: cert,
            };
            if c.wait_ready_or_exit() || attempt == 3 {
                return c;
            }
        }
        unreachable!()
    }

    /// [`S3Cluster::wait_ready`], but false as soon as the node process
    /// has exited (with its log on standard error).
    fn wait_ready_or_exit(&mut self) -> bool {
        let start = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.node.0.child.try_wait() {
                eprintln!(
                    "the node exited while starting ({status}):\n{}",
                    self.logs()
                );
                return false;
            }
            if std::net::TcpStream::connect(&self.node.1).is_ok()
                && std::net::TcpStream::connect(&self.s3).is_ok()
                && http_full(&self.node.1, "PUT", "/ready/probe", None, "", b"x").0 == 201
            {
                return true;
            }
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "timed out waiting for the cluster to take writes:\n{}",
                self.logs()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Starts the node (again) on the same data directory and addresses.
    pub fn node(meta: &str, dir: &Path, s3: &str, addr: &str) -> Proc {
        Self::node_with(meta, dir, s3, addr, &[])
    }

    /// [`S3Cluster::node`] with more `strata server` arguments.
    pub fn node_with(meta: &str, dir: &Path, s3: &str, addr: &str, extra: &[&str]) -> Proc {
        Self::node_with_env(meta, dir, s3, addr, extra, &[])
    }

    /// [`S3Cluster::node_with`] with more environment variables.
    pub fn node_with_env(
        meta: &str,
        dir: &Path,
        s3: &str,
        addr: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Proc {
        let child = strata()
            .envs(env.iter().copied())
            .args(["server", "--meta-listen", meta, "--listen", addr, "--data"])
            .arg(dir.join("node"))
            .args(["--s3-listen", s3, "--max-object-size", "1GiB"])
            .args(extra)
            .env("STRATA_ROOT_ACCESS_KEY", ACCESS)
            .env("STRATA_ROOT_SECRET_KEY", SECRET)
            .env("STRATA_ADMIN_TOKEN", ADMIN)
            .stdout(Stdio::null())
            .stderr(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(dir.join("node.log"))
                    .expect("log"),
            )
            .spawn()
            .expect("strata server");
        Proc {
            child,
            name: format!("node {addr}"),
        }
    }

    /// Waits until the node's native API can store an object (the cluster
    /// has its table) and the S3 port listens.
    pub fn wait_ready(&self) {
        wait_until(
            Duration::from_secs(30),
            "the cluster to take writes",
            || {
                std::net::TcpStream::connect(&self.node.1).is_ok()
                    && std::net::TcpStream::connect(&self.s3).is_ok()
                    && http_full(&self.node.1, "PUT", "/ready/probe", None, "", b"x").0 == 201
            },
        );
    }

    pub fn endpoint(&self) -> String {
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        format!("{scheme}://{}", self.s3)
    }

    /// The CA bundle the clients trust: the listener's certificate with
    /// TLS, else none (a bundle set for other HTTPS use is removed).
    fn ca(&self, cmd: &mut Command) {
        match &self.tls {
            Some(cert) => cmd.env("AWS_CA_BUNDLE", cert),
            None => cmd.env_remove("AWS_CA_BUNDLE"),
        };
    }

    pub fn logs(&self) -> String {
        logs(self.dir.path())
    }

    /// Runs a Python script with boto3 against the S3 endpoint; `ENDPOINT`,
    /// `ACCESS` and `SECRET` are in its environment. Asserts it succeeds and
    /// returns its standard output.
    pub fn python(&self, script: &str) -> String {
        self.python_env(script, &[])
    }

    /// [`S3Cluster::python`] with more environment variables.
    pub fn python_env(&self, script: &str, env: &[(&str, &str)]) -> String {
        let mut cmd = Command::new("python3");
        self.ca(&mut cmd);
        let out = cmd
            .envs(env.iter().copied())
            .arg("-c")
            .arg(script)
            .env("ENDPOINT", self.endpoint())
            .env("ACCESS", ACCESS)
            .env("SECRET", SECRET)
            .env("NODE", &self.node.1)
            .env("META", &self.meta)
            .env("STRATA_BIN", env!("CARGO_BIN_EXE_strata"))
            .env("STRATA_CLUSTER_SECRET", TEST_CLUSTER_SECRET)
            .output()
            .expect("python3 (with boto3: pip install boto3) must be installed");
        assert_ok(&out, "python3", &self.logs());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The aws CLI with the root key, path-style, against the endpoint.
    pub fn aws(&self, args: &[&str]) -> Output {
        let cfg = self.dir.path().join("aws-config");
        std::fs::write(
            &cfg,
            "[default]\nregion = us-east-1\ns3 =\n    addressing_style = path\n",
        )
        .expect("aws config");
        let mut cmd = Command::new("aws");
        self.ca(&mut cmd);
        cmd.args(["--endpoint-url", &self.endpoint()])
            .args(args)
            .env("AWS_CONFIG_FILE", &cfg)
            .env("AWS_SHARED_CREDENTIALS_FILE", self.dir.path().join("none"))
            .env("AWS_ACCESS_KEY_ID", ACCESS)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .output()
            .expect("the aws CLI (pip install awscli) must be installed")
    }

    pub fn aws_ok(&self, args: &[&str]) -> String {
        let out = self.aws(args);
        assert_ok(&out, &format!("aws {args:?}"), &self.logs());
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

pub fn assert_ok(out: &Output, what: &str, logs: &str) {
    assert!(
        out.status.success(),
        "{what} failed:\n{}\n{}\n{logs}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The boto3 prelude of every script: a client `s3` with the root key and
/// helpers `client(access, secret)` and `code(fn)` (the S3 error code and
/// HTTP status a call fails with).
/// Python: `native(path)`, the status of a GET of `path` from the node's
/// native API (`NODE` in the environment), and `time`.
pub const NATIVE: &str = r#"
import time, urllib.request, urllib.error
def native(path):
    try:
        with urllib.request.urlopen("http://%s%s" % (os.environ["NODE"], path)) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
"#;

/// Python: `stored(path)`, 200 if the record `/BUCKET/NAME` (`%01` for
/// U+0001) exists, 404 if not, read over the direct path with the cluster
/// secret (`strata get --meta`): S3's own names (multipart parts) are not
/// reachable through the native API.
pub const STORED: &str = r#"
import subprocess, time
def stored(path):
    r = subprocess.run([os.environ["STRATA_BIN"], "get", "--meta", os.environ["META"], "--deadline", "5",
                        "-o", "/dev/null", path[1:].replace("%01", "\x01")], capture_output=True)
    if r.returncode == 0:
        return 200
    return 404 if b"does not exist" in r.stderr else (r.returncode, r.stderr)
"#;

pub const PRELUDE: &str = r#"
import os, hashlib, boto3, botocore
from botocore.config import Config
def client(access, secret, **kw):
    # boto3 presigns with SigV2 unless told otherwise; SigV2 is off unless
    # the server is started with --s3-sigv2.
    kw.setdefault("signature_version", "s3v4")
    return boto3.client("s3", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
        aws_access_key_id=access, aws_secret_access_key=secret,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}, **kw))
s3 = client(os.environ["ACCESS"], os.environ["SECRET"])
def code(f):
    try:
        f()
    except botocore.exceptions.ClientError as e:
        return (e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"])
    raise AssertionError("the call succeeded")
"#;
