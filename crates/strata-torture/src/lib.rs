//! strata-torture: the fault campaign behind `strata torture` (issue 15;
//! docs/reliability.md). Real `strata` processes, really killed and
//! power-cut; real bytes cut and flipped; a real full filesystem; a
//! fault-injecting proxy between nodes and between clients and nodes.
//! After each trial every acknowledged write must read back byte for
//! byte, every acknowledged delete must be absent, and no wrong byte may
//! ever have been served (payloads are derived from key and version, so
//! any wrong byte is caught).
//!
//! [`run`] runs a campaign of [`Options`]; the processes it starts are
//! the binary [`Options::exe`] names (the `strata` command line passes
//! itself).
//!
//! The modules, each using only those below it (a test of this file
//! checks it):
//!
//! ```text
//! kinds     the kinds, their groups, which trial function runs each
//! report    the table or JSON report
//! s3        trials through the S3 API, on one node or on the cluster
//! ec        erasure-coding trials on the cluster
//! cluster   the loopback cluster (meta, nodes, proxies) and its trials
//! single    trials on one node
//! trial     what a trial gets (Ctx) and what it gives back (Trial)
//! sigv4     the S3 requests' SigV4 signatures
//! load      payloads, the model of what was acknowledged, the loads
//! damage    a stopped node's files: bits flipped, bytes damaged
//! procs     the strata processes: started, killed, their power cut
//! proxy     the fault-injecting TCP proxy
//! http      the blocking HTTP/1.1 client
//! ```

#![warn(missing_docs)]

mod cluster;
mod damage;
mod ec;
mod http;
mod kinds;
mod load;
mod procs;
mod proxy;
mod report;
mod s3;
mod sigv4;
mod single;
mod trial;

/// The modules from the top down: each uses only modules after it.
#[cfg(test)]
const LAYERS: &[(&str, &str)] = &[
    ("kinds", include_str!("kinds.rs")),
    ("report", include_str!("report.rs")),
    ("s3", include_str!("s3.rs")),
    ("ec", include_str!("ec.rs")),
    ("cluster", include_str!("cluster.rs")),
    ("single", include_str!("single.rs")),
    ("trial", include_str!("trial.rs")),
    ("sigv4", include_str!("sigv4.rs")),
    ("load", include_str!("load.rs")),
    ("damage", include_str!("damage.rs")),
    ("procs", include_str!("procs.rs")),
    ("proxy", include_str!("proxy.rs")),
    ("http", include_str!("http.rs")),
];

pub use kinds::KINDS;

use kinds::{expand, run_trial};
use report::report;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use trial::{Ctx, Trial};

/// What a campaign runs: the flags of `strata torture`.
#[derive(Clone, Debug)]
pub struct Options {
    /// The `strata` binary the trials start (servers, the metadata
    /// service, `strata cluster` commands).
    pub exe: PathBuf,
    /// Number of trials (they cycle through the kinds).
    pub trials: usize,
    /// Kinds of trials ([`KINDS`]) or groups of them: all, single,
    /// cluster, ec, s3, power.
    pub kinds: Vec<String>,
    /// Seed of trial 0 (trial i uses SEED+i); None: from the clock.
    pub seed: Option<u64>,
    /// The report as JSON on standard output instead of a table.
    pub json: bool,
    /// Directory for the trials' data (None: a temporary directory on
    /// /dev/shm when there is one).
    pub dir: Option<PathBuf>,
    /// Keep the directories (data and logs) of failed trials.
    pub keep_failed: bool,
    /// Where the histories of `linearizable` trials are written.
    pub history: Option<PathBuf>,
    /// Nodes of the cluster trials (replication 3; at least 3).
    pub nodes: usize,
    /// Client threads of each trial's load.
    pub workers: usize,
    /// Start no trial after this long (the report then counts the trials
    /// run); None: no limit.
    pub time_limit: Option<Duration>,
}

/// Why a campaign did not pass.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The options ask for something the campaign cannot run (an
    /// unknown kind, no trial, fewer than 3 nodes, no worker).
    #[error("{0}")]
    Options(String),
    /// The campaign's own files: its directory, a trial's directory.
    #[error("{what}")]
    Io {
        /// What the campaign was doing.
        what: String,
        /// The error the system gave.
        #[source]
        source: std::io::Error,
    },
    /// The JSON report could not be written.
    #[error("the JSON report: {0}")]
    Report(#[from] serde_json::Error),
    /// Trials failed (each printed with the command that repeats it).
    #[error("{failed} of {trials} trials failed")]
    Failed {
        /// Trials that failed.
        failed: usize,
        /// Trials run.
        trials: usize,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// A campaign that passed.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Trials run (fewer than asked when the time limit stopped it).
    pub trials: usize,
    /// Trials skipped (they had nothing to damage); they count as passed.
    pub skipped: usize,
    /// Processes whose power was cut.
    pub power_cuts: u64,
}

fn random_hex() -> String {
    let mut b = [0u8; 16];
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        use std::io::Read;
        let _ = f.read_exact(&mut b);
    }
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The kinds, one a line: name and what the trial does (`strata torture
/// --list`).
pub fn kind_list() -> String {
    KINDS
        .iter()
        .map(|(k, d)| format!("{k:<17} {d}\n"))
        .collect()
}

/// A bar counting the trials on standard error, hidden when it is no
/// terminal (so that logs and pipes stay clean).
fn progress(trials: usize) -> indicatif::ProgressBar {
    use std::io::IsTerminal;
    let target = if std::io::stderr().is_terminal() {
        indicatif::ProgressDrawTarget::stderr()
    } else {
        indicatif::ProgressDrawTarget::hidden()
    };
    let pb = indicatif::ProgressBar::with_draw_target(Some(trials as u64), target);
    pb.set_style(
        indicatif::ProgressStyle::with_template(
            "{msg:>12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    pb.set_message("trials");
    pb
}

/// Runs the fault campaign: trials of kill -9, power cuts, torn writes,
/// bit flips, a full disk, slow clients and network partitions against
/// real `strata` processes (a single node, a loopback cluster, erasure
/// coding, the S3 API), each checked for lost, resurrected and wrong
/// data.
///
/// Each trial starts fresh processes in its own directory, runs a load of
/// checksummed objects (each a pure function of its key and version),
/// injects its fault, brings the node or cluster back, and reads every
/// key back. Trials cycle through `opts.kinds`; trial i uses seed SEED+i.
/// Progress and each failure (with the command that repeats it) go to
/// standard error, the report (a table, or JSON) to standard output.
/// [`Error::Failed`] when a trial failed.
pub fn run(opts: &Options) -> Result<Summary, Error> {
    let kinds = expand(&opts.kinds).map_err(Error::Options)?;
    if opts.trials == 0 {
        return Err(Error::Options("--trials must be at least 1".into()));
    }
    if opts.nodes < 3 {
        return Err(Error::Options(
            "--nodes must be at least 3 (replication 3)".into(),
        ));
    }
    if opts.workers == 0 {
        return Err(Error::Options("--workers must be at least 1".into()));
    }
    let seed = opts.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_000)
    });
    let root = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(io(format!("--dir {}", d.display())))?;
            tempfile::Builder::new()
                .prefix("torture-")
                .tempdir_in(d)
                .map_err(io(format!("a temporary directory in {}", d.display())))?
        }
        None if Path::new("/dev/shm").is_dir() => tempfile::Builder::new()
            .prefix("strata-torture-")
            .tempdir_in("/dev/shm")
            .map_err(io("a temporary directory in /dev/shm"))?,
        None => tempfile::Builder::new()
            .prefix("strata-torture-")
            .tempdir()
            .map_err(io("a temporary directory"))?,
    };
    let ctx = Ctx {
        env: procs::Env {
            exe: opts.exe.clone(),
            admin_token: random_hex(),
            cluster_secret: random_hex(),
            s3_root: (
                format!("TORTURE{}", &random_hex()[..13].to_uppercase()),
                random_hex(),
            ),
        },
        workers: opts.workers,
        nodes: opts.nodes,
        history: opts.history.clone(),
    };
    // The object API takes no anonymous writes: every object request
    // carries a token of the servers' root key.
    let week = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        + 7 * 86_400;
    http::authenticate_as(strata_s3::auth::mint_token(
        &strata_s3::auth::Key {
            access_key: ctx.env.s3_root.0.clone(),
            secret_key: ctx.env.s3_root.1.clone(),
        },
        week,
    ));
    eprintln!(
        "strata torture: {} trials over {} kinds, seed {seed}, in {}",
        opts.trials,
        kinds.len(),
        root.path().display()
    );
    let pb = progress(opts.trials);
    let mut results = Vec::new();
    let campaign = Instant::now();
    for i in 0..opts.trials {
        if let Some(limit) = opts.time_limit.filter(|l| campaign.elapsed() >= *l) {
            pb.suspend(|| {
                eprintln!(
                    "--time-limit {} s reached after {i} trials",
                    limit.as_secs()
                )
            });
            break;
        }
        let kind = kinds[i % kinds.len()];
        let tseed = seed.wrapping_add(i as u64);
        pb.set_message(kind.to_string());
        let dir = root.path().join(format!("trial-{i:05}-{kind}"));
        std::fs::create_dir_all(&dir).map_err(io(format!("{}", dir.display())))?;
        let mut t = Trial {
            index: i,
            kind: kind.to_string(),
            seed: tseed,
            repro: format!("strata torture --kinds {kind} --seed {tseed} --trials 1"),
            ..Trial::default()
        };
        let start = Instant::now();
        if let Err(e) = run_trial(&ctx, &mut t, &dir) {
            t.fail(format!("{e:#}"));
        }
        t.seconds = start.elapsed().as_secs_f64();
        t.passed = t.failures.is_empty();
        if !t.passed {
            pb.suspend(|| {
                eprintln!("trial {i} ({kind}, seed {tseed}) FAILED:");
                for f in &t.failures {
                    eprintln!("  {f}");
                }
                for n in &t.notes {
                    eprintln!("  note: {n}");
                }
                eprintln!("  repeat: {}", t.repro);
                if opts.keep_failed {
                    eprintln!("  data and logs kept in {}", dir.display());
                }
            });
        }
        if t.passed || !opts.keep_failed {
            let _ = std::fs::remove_dir_all(&dir);
        }
        results.push(t);
        pb.inc(1);
    }
    pb.finish_and_clear();
    if opts.keep_failed && results.iter().any(|t| !t.passed) {
        let kept = root.keep();
        eprintln!("failed trials' directories are under {}", kept.display());
    }
    report(&results, &kinds, seed, opts.json)?;
    let failed = results.iter().filter(|t| !t.passed).count();
    if failed > 0 {
        return Err(Error::Failed {
            failed,
            trials: results.len(),
        });
    }
    Ok(Summary {
        trials: results.len(),
        skipped: results.iter().filter(|t| t.skipped).count(),
        power_cuts: results.iter().map(|t| t.power_cuts).sum(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The modules of this crate that `src` names (`crate::m` and
    /// `use crate::{m, ..}`), comments left out.
    fn uses(src: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in src.lines().filter(|l| !l.trim_start().starts_with("//")) {
            for (i, _) in line.match_indices("crate::") {
                let rest = &line[i + "crate::".len()..];
                let names: Vec<&str> = match rest.strip_prefix('{') {
                    Some(r) => r
                        .split('}')
                        .next()
                        .unwrap_or_default()
                        .split(',')
                        .map(|p| p.trim().split("::").next().unwrap_or_default())
                        .collect(),
                    None => vec![rest],
                };
                for n in names {
                    let n: String = n
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !n.is_empty() {
                        out.push(n);
                    }
                }
            }
        }
        out
    }

    #[test]
    fn every_module_is_in_the_layers() {
        let mut declared: Vec<&str> = include_str!("lib.rs")
            .lines()
            .filter_map(|l| l.strip_prefix("mod ")?.strip_suffix(';'))
            .collect();
        let mut layered: Vec<&str> = LAYERS.iter().map(|(n, _)| *n).collect();
        declared.sort_unstable();
        layered.sort_unstable();
        assert_eq!(declared, layered);
    }

    #[test]
    fn module_arrows_point_one_way() {
        let names: Vec<&str> = LAYERS.iter().map(|(n, _)| *n).collect();
        let mut arrows = 0;
        for (i, (m, src)) in LAYERS.iter().enumerate() {
            for u in uses(src) {
                let j = names.iter().position(|n| *n == u);
                assert!(
                    j.is_some_and(|j| j > i),
                    "{m} uses crate::{u}, which is not below it in LAYERS"
                );
                arrows += 1;
            }
        }
        // The check saw the arrows (ec uses cluster, s3 uses sigv4, ...).
        assert!(arrows > 20, "only {arrows} uses of crate:: found");
        assert!(uses(LAYERS[3].1).contains(&"cluster".to_string()));
        assert_eq!(
            uses("use crate::{a, b::C};\n// crate::d\nx(crate::e::f)"),
            ["a", "b", "e"]
        );
    }
}
