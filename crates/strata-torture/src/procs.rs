//! The real `strata` binary as child processes: servers and the metadata
//! service, killed with SIGKILL and started again on the same directories,
//! or run over strata-fs's power-loss model (`STRATA_POWER_ROOT`, see
//! `strata_fs::power::arm_from_env`) and their power cut.

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

/// A process run over strata-fs's power-loss model: the directory whose
/// files are modelled, the file whose appearance cuts the power, and the
/// model's seed and kind of cut.
#[derive(Clone, Debug)]
pub struct Power {
    pub root: PathBuf,
    pub trigger: PathBuf,
    pub seed: u64,
    pub tear: bool,
}

/// The exit status of a process whose power the model cut.
pub const POWER_CUT_STATUS: i32 = 86;

impl Power {
    fn apply(&self, c: &mut Command) {
        c.env("STRATA_POWER_ROOT", &self.root)
            .env("STRATA_POWER_CUT_ON", &self.trigger)
            .env("STRATA_POWER_SEED", self.seed.to_string())
            .env("STRATA_POWER_TEAR", if self.tear { "1" } else { "0" });
    }

    /// Cuts the power of every process over a model watching `trigger`.
    pub fn trigger(trigger: &Path) -> anyhow::Result<()> {
        std::fs::write(trigger, b"")
            .with_context(|| format!("the power-cut trigger {}", trigger.display()))
    }

    /// After the cut (every process watching the trigger stopped): the
    /// trigger removed, so that no process started later cuts at once,
    /// and the model's leftover backups (`ROOT.power-backups`, which a cut
    /// that kept some directory changes leaves) removed, so that the next
    /// model on the root starts clean. The next model gets another seed
    /// and the other kind of cut (a tear after a drop, a drop after a
    /// tear).
    pub fn after_cut(&mut self) {
        let _ = std::fs::remove_file(&self.trigger);
        let mut b = self.root.as_os_str().to_owned();
        b.push(".power-backups");
        let _ = std::fs::remove_dir_all(PathBuf::from(b));
        self.seed = self.seed.wrapping_add(0x9E37_79B9);
        self.tear = !self.tear;
    }
}

/// Waits until `child` exits, for up to `limit`: its status must be the
/// power cut's ([`POWER_CUT_STATUS`]). `what` names it in the error.
fn wait_power_off(
    child: &mut Child,
    limit: Duration,
    what: &str,
    log: &Path,
) -> anyhow::Result<()> {
    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(st)) if st.code() == Some(POWER_CUT_STATUS) => return Ok(()),
            Ok(Some(st)) => bail!(
                "{what} exited with {st} instead of the power cut's status {POWER_CUT_STATUS} \
                 (log {}):\n{}",
                log.display(),
                tail(log)
            ),
            Ok(None) if start.elapsed() > limit => {
                let _ = child.kill();
                let _ = child.wait();
                bail!(
                    "{what} was still running {limit:?} after its power was cut (killed; log {}):\n{}",
                    log.display(),
                    tail(log)
                )
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => bail!("waiting for {what}: {e}"),
        }
    }
}

/// What the last power cut in `log` undid, as the model reported it
/// (`strata-fs: power cut (Drop): Ok(CutReport { files: .., .. })`):
/// a short summary, or None.
pub fn cut_summary(log: &Path) -> Option<String> {
    let s = std::fs::read_to_string(log).ok()?;
    let line = s
        .lines()
        .rev()
        .find(|l| l.starts_with("strata-fs: power cut"))?;
    let how = if line.contains("(Tear)") {
        "tear"
    } else {
        "drop"
    };
    let field = |name: &str| -> String {
        line.split(&format!("{name}: "))
            .nth(1)
            .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
            .unwrap_or("?")
            .to_string()
    };
    if !line.contains("Ok(CutReport") {
        return Some(format!(
            "{how}: {}",
            line.chars().take(200).collect::<String>()
        ));
    }
    Some(format!(
        "{how}: {} file(s), {} write(s) dropped, {} torn, {} directory change(s) undone",
        field("files"),
        field("writes_dropped"),
        field("writes_torn"),
        field("dir_changes_undone")
    ))
}

/// A `strata server` child process.
pub struct Server {
    child: Option<Child>,
    /// The address it serves its API on.
    pub addr: String,
    args: Vec<OsString>,
    log: PathBuf,
    env: Env,
    /// Run over the power-loss model (from its next start on).
    pub power: Option<Power>,
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
        Self::start_powered(env, args, log, None)
    }

    /// [`Server::start`], over the power-loss model when `power` is given.
    pub fn start_powered(
        env: &Env,
        args: Vec<OsString>,
        log: &Path,
        power: Option<Power>,
    ) -> anyhow::Result<Server> {
        let mut s = Server {
            child: None,
            addr: String::new(),
            args,
            log: log.to_path_buf(),
            env: env.clone(),
            power,
        };
        s.spawn()?;
        Ok(s)
    }

    /// The log its standard error is appended to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Waits for the process to stop from the power cut (its trigger
    /// already made): exit status [`POWER_CUT_STATUS`] within `limit`,
    /// else an error saying how it ended. The caller then calls
    /// [`Server::after_power_cut`] (once every process watching the same
    /// trigger has stopped).
    pub fn wait_power_off(&mut self, limit: Duration) -> anyhow::Result<()> {
        let Some(mut c) = self.child.take() else {
            bail!("the server was not running when its power was cut");
        };
        wait_power_off(&mut c, limit, "strata server", &self.log)
    }

    /// [`Power::after_cut`] of its model, if it runs over one.
    pub fn after_power_cut(&mut self) {
        if let Some(p) = self.power.as_mut() {
            p.after_cut();
        }
    }

    /// Cuts the power of this server alone (it must run over the model,
    /// with a trigger of its own): makes the trigger, waits as
    /// [`Server::wait_power_off`], then [`Server::after_power_cut`].
    pub fn power_cut(&mut self, limit: Duration) -> anyhow::Result<()> {
        let Some(p) = &self.power else {
            bail!("power cut of a server not started over the power-loss model");
        };
        Power::trigger(&p.trigger)?;
        let r = self.wait_power_off(limit);
        self.after_power_cut();
        r
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("log {}", self.log.display()))?;
        let mut cmd = self.env.command();
        cmd.arg("server")
            .args(&self.args)
            .stdout(Stdio::piped())
            .stderr(logf);
        if let Some(p) = &self.power {
            p.apply(&mut cmd);
        }
        let mut child = cmd.spawn().context("starting strata server")?;
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
            let last = match crate::http::request(
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
    child: Option<Child>,
    pub addr: String,
    args: Vec<OsString>,
    log: PathBuf,
    env: Env,
    /// Run over the power-loss model (from its next start on).
    pub power: Option<Power>,
}

impl Meta {
    /// Starts `strata meta --listen (a free port) --data DIR ARGS` and
    /// waits for it to listen, over the power-loss model when `power` is
    /// given.
    pub fn start_powered(
        env: &Env,
        args: &[&str],
        dir: &Path,
        log: &Path,
        power: Option<Power>,
    ) -> anyhow::Result<Meta> {
        let port = listen_port()?;
        let addr = format!("127.0.0.1:{port}");
        let mut a: Vec<OsString> = vec!["--listen".into(), addr.clone().into(), "--data".into()];
        a.push(dir.into());
        a.extend(args.iter().map(OsString::from));
        // A fresh log (a directory used again by an earlier run keeps none
        // of its lines); restarts append.
        std::fs::File::create(log).with_context(|| format!("log {}", log.display()))?;
        let mut m = Meta {
            child: None,
            addr,
            args: a,
            log: log.to_path_buf(),
            env: env.clone(),
            power,
        };
        m.spawn()?;
        Ok(m)
    }

    fn spawn(&mut self) -> anyhow::Result<()> {
        let logf = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("log {}", self.log.display()))?;
        let mut cmd = self.env.command();
        cmd.arg("meta")
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(logf);
        if let Some(p) = &self.power {
            p.apply(&mut cmd);
        }
        let mut child = cmd.spawn().context("starting strata meta")?;
        let start = Instant::now();
        while std::net::TcpStream::connect(&self.addr).is_err() {
            if start.elapsed() > Duration::from_secs(30) || !matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
                bail!("strata meta did not start:\n{}", tail(&self.log));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.child = Some(child);
        Ok(())
    }

    /// The log its standard error is appended to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// SIGKILL.
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same address and directory.
    pub fn restart(&mut self) -> anyhow::Result<()> {
        self.kill9();
        self.spawn()
    }

    /// As [`Server::wait_power_off`].
    pub fn wait_power_off(&mut self, limit: Duration) -> anyhow::Result<()> {
        let Some(mut c) = self.child.take() else {
            bail!("the metadata service was not running when its power was cut");
        };
        wait_power_off(&mut c, limit, "strata meta", &self.log)
    }

    /// As [`Server::after_power_cut`].
    pub fn after_power_cut(&mut self) {
        if let Some(p) = self.power.as_mut() {
            p.after_cut();
        }
    }
}

impl Drop for Meta {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// Whether the first power cut of a trial of `seed` tears unsynced writes
/// rather than drops them; each later cut of a process does the other
/// ([`procs::Power::after_cut`]), so that a trial of 2-3 cuts has both.
/// A bit of a hash of the seed, not its parity: a campaign cycling
/// through an even number of kinds gives each kind seeds of one parity.
pub fn tears(seed: u64) -> bool {
    // splitmix64's finalizer.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

/// The order in which a trial's power cuts hit its processes: `cuts`
/// random indexes below `n`.
pub fn cut_plan(rng: &mut impl rand::Rng, n: usize, cuts: usize) -> Vec<usize> {
    (0..cuts).map(|_| rng.random_range(0..n)).collect()
}

/// Whether the process cut in round `round` of `plan` is cut again later
/// (then it restarts over the model; after its last cut, without).
pub fn cut_again(plan: &[usize], round: usize) -> bool {
    plan[round + 1..].contains(&plan[round])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_cuts_tear_or_drop_for_seeds_of_either_parity() {
        // A campaign over an even number of kinds gives each kind seeds
        // of one parity: each parity must still see both kinds of cut.
        for parity in [0, 1] {
            let tears: Vec<bool> = (0..64u64).map(|i| tears(2 * i + parity)).collect();
            assert!(tears.contains(&true) && tears.contains(&false), "{parity}");
        }
    }

    #[test]
    fn a_process_restarts_over_the_model_only_when_cut_again() {
        let plan = [2, 0, 2, 1];
        let again: Vec<bool> = (0..plan.len()).map(|r| cut_again(&plan, r)).collect();
        assert_eq!(again, [true, false, false, false]);
    }

    #[test]
    fn the_power_cut_summary_reads_the_models_last_report() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("node.log");
        std::fs::write(
            &log,
            "start\nstrata-fs: power cut (Drop): Ok(CutReport { files: 1, writes_dropped: 2, writes_torn: 0, dir_changes_undone: 0 })\n\
             strata-fs: power cut (Tear): Ok(CutReport { files: 3, writes_dropped: 4, writes_torn: 5, dir_changes_undone: 6 })\n",
        )
        .expect("log");
        assert_eq!(
            cut_summary(&log).as_deref(),
            Some("tear: 3 file(s), 4 write(s) dropped, 5 torn, 6 directory change(s) undone")
        );
        std::fs::write(&log, "nothing\n").expect("log");
        assert_eq!(cut_summary(&log), None);
    }
}
