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

#![warn(missing_docs)]

mod cluster;
mod ec;
mod http;
mod load;
mod procs;
mod proxy;
mod s3;
mod single;

use load::{Mix, Model};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

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

/// Every kind of trial and what it does, in the order a campaign cycles
/// through them.
pub const KINDS: &[(&str, &str)] = &[
    ("put", "single node: kill -9 during single PUTs"),
    ("batch", "single node: kill -9 during batch POSTs"),
    ("delete", "single node: kill -9 during DELETEs"),
    ("overwrite", "single node: kill -9 during overwrites"),
    ("compaction", "single node: kill -9 during background compactions (overwrite- and delete-heavy, 64 KiB segments)"),
    ("tier-move", "single node: kill -9 while the tier mover moves segments from flash to disk (256 KiB of flash)"),
    ("torn-write", "single node: kill -9, then every segment's unsynced tail cut at a random offset"),
    ("flip-needle", "single node: a bit flipped in a needle of a stopped node"),
    ("flip-checkpoint", "single node: a bit flipped in an index checkpoint"),
    ("flip-superblock", "single node: a bit flipped in a segment's superblock"),
    ("disk-full", "single node on a 64 MiB tmpfs: written until 507, killed, restarted, half deleted, written again"),
    ("slow-clients", "single node: 50-200 stalled and dribbling connections during a load, then kill -9"),
    ("cluster-kill", "cluster: kill -9 of a random node under load, restarted"),
    ("multipart", "cluster: objects striped in 64 KiB tracts, kill -9 of a node mid-upload"),
    ("node-loss", "cluster: a node killed for good under load; recovery re-replicates its rows"),
    ("partition-nodes", "cluster: a node cut from the others and the metadata service (proxy blackhole or reset), healed"),
    ("partition-client", "cluster: the clients cut from a node mid-request, healed"),
    ("linearizable", "cluster: 5 clients, 3 keys, a kill and a partition; the history is written for Porcupine"),
    ("cluster-flip", "cluster: bits flipped in a stopped node's segments and checkpoints; read through it, the scrub must repair"),
    ("ec-encode", "erasure coding (6 nodes, --ec 4+2, 64 KiB segments): kill -9 of a node while segments are encoded"),
    ("ec-compact", "erasure coding: most objects deleted; kill -9 of a node while stripes are compacted"),
    ("ec-rebuild", "erasure coding: a node lost for good; kill -9 of another while the lost shards are rebuilt"),
    ("ec-flip", "erasure coding: a bit flipped in a shard file; every read checked, the scrub must rebuild it"),
    ("s3-put", "S3 (a cluster of one): kill -9 during PutObject and DeleteObject; GetObject and ListObjectsV2 checked"),
    ("s3-multipart", "S3: kill -9 during multipart uploads (UploadPart, CompleteMultipartUpload of 5-11 MiB objects)"),
    ("s3-delete", "S3: kill -9 during DeleteObjects (2-12 keys each)"),
    ("s3-flip-listing", "S3: a bit flipped in the listing index (listing.redb) of a stopped node"),
    ("s3-cluster", "S3 on a 4-node cluster (every node an S3 endpoint): kill -9 of a random node under load, restarted"),
    ("s3-cluster-multipart", "S3 on the 4-node cluster: multipart uploads (5-11 MiB) among the load, kill -9 of a node mid-upload"),
    ("s3-cluster-partition", "S3 on the 4-node cluster: a member cut from the others and the metadata service (blackhole or reset), healed"),
    ("s3-cluster-loss", "S3 on the 4-node cluster: a member killed for good under load; recovery copies its rows and listing index"),
    ("power-put", "single node over the power-loss model: power cut (unsynced writes dropped or torn, in turn) during PUTs, overwrites, DELETEs and batches, 2-3 cuts"),
    ("power-compaction", "single node over the power-loss model (64 KiB segments, 256 KiB of flash): power cut during compactions and tier moves, 2-3 cuts"),
    ("power-s3", "S3 (a cluster of one) over the power-loss model: power cut during PutObject, DeleteObject(s) and multipart uploads, 2-3 cuts"),
    ("cluster-power", "cluster, every node over the power-loss model: a random node's power cut under load, restarted, 2-3 cuts"),
    ("cluster-power-all", "cluster: the metadata service and every node lose their power at once, all restarted; node ids kept, no rows dropped; 2-3 cuts"),
    ("ec-power", "erasure coding (6 nodes, --ec 4+2), nodes over the power-loss model: a node's power cut while segments are encoded, 2-3 cuts"),
];

/// The power-cut kinds (group `power`): processes run over strata-fs's
/// power-loss model (`STRATA_POWER_ROOT`), their power cut by a trigger
/// file (exit status 86), restarted over a fresh model for the next cut
/// and, after their last, without it.
const POWER: &[&str] = &[
    "power-put",
    "power-compaction",
    "power-s3",
    "cluster-power",
    "cluster-power-all",
    "ec-power",
];

/// Whether the first power cut of a trial of `seed` tears unsynced writes
/// rather than drops them; each later cut of a process does the other
/// ([`procs::Power::after_cut`]), so that a trial of 2-3 cuts has both.
/// A bit of a hash of the seed, not its parity: a campaign cycling
/// through an even number of kinds gives each kind seeds of one parity.
pub(crate) fn tears(seed: u64) -> bool {
    // splitmix64's finalizer.
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (z ^ (z >> 31)) & 1 == 1
}

/// The order in which a trial's power cuts hit its processes: `cuts`
/// random indexes below `n`.
pub(crate) fn cut_plan(rng: &mut impl rand::Rng, n: usize, cuts: usize) -> Vec<usize> {
    (0..cuts).map(|_| rng.random_range(0..n)).collect()
}

/// Whether the process cut in round `round` of `plan` is cut again later
/// (then it restarts over the model; after its last cut, without).
pub(crate) fn cut_again(plan: &[usize], round: usize) -> bool {
    plan[round + 1..].contains(&plan[round])
}

/// The kinds of a group name of --kinds.
fn group(name: &str) -> Option<Vec<&'static str>> {
    let all = KINDS.iter().map(|(k, _)| *k);
    let is_ec = |k: &str| k.starts_with("ec-");
    let is_s3 = |k: &str| k.starts_with("s3-");
    let named = |ks: &'static [(&'static str, &'static str)]| ks.iter().map(|(k, _)| *k);
    Some(match name {
        "all" => all.collect(),
        "single" => named(&KINDS[..12])
            .chain(["power-put", "power-compaction"])
            .collect(),
        "cluster" => named(&KINDS[12..19])
            .chain(["cluster-power", "cluster-power-all"])
            .collect(),
        "ec" => all.filter(|k| is_ec(k)).collect(),
        "s3" => all
            .filter(|k| is_s3(k))
            .chain(std::iter::once("power-s3"))
            .collect(),
        "power" => POWER.to_vec(),
        _ => return None,
    })
}

pub(crate) struct Ctx {
    env: procs::Env,
    workers: usize,
    nodes: usize,
    history: Option<PathBuf>,
}

impl Ctx {
    /// A SigV4 signer with the nodes' S3 root key.
    pub fn s3_signer(&self) -> s3::Signer {
        s3::Signer {
            access: self.env.s3_root.0.clone(),
            secret: self.env.s3_root.1.clone(),
            timeout: std::time::Duration::from_secs(20),
        }
    }
}

/// One trial's result.
#[derive(serde::Serialize, Default)]
pub(crate) struct Trial {
    pub index: usize,
    pub kind: String,
    pub seed: u64,
    pub passed: bool,
    pub skipped: bool,
    pub failures: Vec<String>,
    pub notes: Vec<String>,
    pub acked_puts: u64,
    pub acked_deletes: u64,
    pub unknown_ops: u64,
    pub reads: u64,
    pub history: Option<String>,
    pub history_ops: usize,
    /// Processes whose power was cut (the power kinds).
    pub power_cuts: u64,
    pub seconds: f64,
    pub repro: String,
}

impl Trial {
    pub fn fail(&mut self, s: String) {
        self.failures.push(s);
    }
    pub fn note(&mut self, s: String) {
        self.notes.push(s);
    }
    pub fn absorb(&mut self, m: &Model, unreadable: Vec<String>) -> anyhow::Result<()> {
        self.absorb_with_budget(m, unreadable, 0)
    }
    /// Takes the model's counts and findings; up to `budget` lost or
    /// unreadable keys are allowed (a bit flip may destroy what it hit).
    pub fn absorb_with_budget(
        &mut self,
        m: &Model,
        unreadable: Vec<String>,
        budget: usize,
    ) -> anyhow::Result<()> {
        self.acked_puts += m.acked_puts.load(Ordering::Relaxed);
        self.acked_deletes += m.acked_deletes.load(Ordering::Relaxed);
        self.unknown_ops += m.unknown.load(Ordering::Relaxed);
        self.reads += m.reads.load(Ordering::Relaxed);
        let e500 = m
            .errors_500
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for e in e500.iter().take(5) {
            self.fail(format!("SERVER ERROR: {e}"));
        }
        if e500.len() > 5 {
            self.fail(format!("... and {} more GETs answered 500", e500.len() - 5));
        }
        let wrong = m.wrong.lock().unwrap_or_else(|e| e.into_inner()).clone();
        for w in wrong.iter().take(10) {
            self.fail(format!("WRONG DATA SERVED: {w}"));
        }
        if wrong.len() > 10 {
            self.fail(format!("... and {} more wrong answers", wrong.len() - 10));
        }
        let lost = m.lost.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let bad: Vec<String> = lost
            .into_iter()
            .map(|l| format!("lost: {l}"))
            .chain(unreadable.into_iter().map(|u| format!("unreadable: {u}")))
            .collect();
        if bad.len() > budget {
            for b in bad.iter().take(10) {
                self.fail(b.clone());
            }
            if bad.len() > 10 {
                self.fail(format!(
                    "... and {} more lost or unreadable",
                    bad.len() - 10
                ));
            }
        } else if !bad.is_empty() {
            self.note(format!(
                "{} key(s) lost to the fault (allowed: {budget}): {}",
                bad.len(),
                bad.join("; ")
            ));
        }
        Ok(())
    }
}

fn expand(kinds: &[String]) -> Result<Vec<&'static str>, Error> {
    let mut out = Vec::new();
    for k in kinds {
        if let Some(g) = group(k) {
            out.extend(g);
            continue;
        }
        match KINDS.iter().find(|(n, _)| *n == k) {
            Some((n, _)) => out.push(*n),
            None => {
                return Err(Error::Options(format!(
                "--kinds: unknown kind {k:?}; the kinds are {} (or all, single, cluster, ec, s3, power)",
                KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
            )))
            }
        }
    }
    if out.is_empty() {
        return Err(Error::Options("--kinds: no kind given".into()));
    }
    Ok(out)
}

fn run_trial(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let kill = (100, 900);
    let kind = t.kind.clone();
    match kind.as_str() {
        "put" => single::crash(ctx, t, dir, &[], Mix::new(1, 0, 0, 0, 0), kill),
        "batch" => single::crash(ctx, t, dir, &[], Mix::new(1, 0, 0, 6, 1), kill),
        "delete" => single::crash(ctx, t, dir, &[], Mix::new(3, 0, 6, 1, 1), kill),
        "overwrite" => single::crash(ctx, t, dir, &[], Mix::new(1, 6, 0, 1, 2), kill),
        "compaction" => single::crash(
            ctx,
            t,
            dir,
            &["--segment-size", "64KiB"],
            Mix::new(2, 6, 3, 1, 1).sizes(1 << 10, 16 << 10),
            (400, 1500),
        ),
        "tier-move" => single::crash(
            ctx,
            t,
            dir,
            &[
                "--segment-size",
                "64KiB",
                "--flash-capacity",
                "256KiB",
                "--mover-rate",
                "64MiB",
            ],
            Mix::new(4, 2, 1, 2, 2).sizes(1 << 10, 16 << 10),
            (300, 1500),
        ),
        "torn-write" => single::torn(ctx, t, dir),
        "flip-needle" => single::bitflip(ctx, t, dir, single::Flip::Needle),
        "flip-checkpoint" => single::bitflip(ctx, t, dir, single::Flip::Checkpoint),
        "flip-superblock" => single::bitflip(ctx, t, dir, single::Flip::Superblock),
        "disk-full" => single::disk_full(ctx, t, dir),
        "slow-clients" => single::slow_clients(ctx, t, dir),
        "linearizable" => cluster::linearizable(ctx, t, dir),
        "cluster-flip" => cluster::flip(ctx, t, dir),
        "ec-encode" => ec::trial(ctx, t, dir, ec::Fault::Encode),
        "ec-compact" => ec::trial(ctx, t, dir, ec::Fault::Compact),
        "ec-rebuild" => ec::trial(ctx, t, dir, ec::Fault::Rebuild),
        "ec-flip" => ec::trial(ctx, t, dir, ec::Fault::Flip),
        "s3-put" => s3::trial(ctx, t, dir, s3::Fault::Put),
        "s3-multipart" => s3::trial(ctx, t, dir, s3::Fault::Multipart),
        "s3-delete" => s3::trial(ctx, t, dir, s3::Fault::Delete),
        "s3-flip-listing" => s3::trial(ctx, t, dir, s3::Fault::FlipListing),
        "s3-cluster" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Kill),
        "s3-cluster-multipart" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Multipart),
        "s3-cluster-partition" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Partition),
        "s3-cluster-loss" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Loss),
        "power-put" => single::power(ctx, t, dir, &[], Mix::new(4, 3, 1, 2, 1), (100, 900)),
        "power-compaction" => single::power(
            ctx,
            t,
            dir,
            &[
                "--segment-size",
                "64KiB",
                "--flash-capacity",
                "256KiB",
                "--mover-rate",
                "64MiB",
            ],
            Mix::new(2, 6, 3, 1, 1).sizes(1 << 10, 16 << 10),
            (400, 1500),
        ),
        "power-s3" => s3::trial(ctx, t, dir, s3::Fault::Power),
        "cluster-power" => cluster::power(ctx, t, dir),
        "cluster-power-all" => cluster::power_all(ctx, t, dir),
        "ec-power" => ec::trial(ctx, t, dir, ec::Fault::Power),
        k => cluster::trial(ctx, t, dir, k),
    }
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
    let kinds = expand(&opts.kinds)?;
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

#[derive(serde::Serialize, Default)]
struct KindSummary {
    kind: String,
    trials: usize,
    passed: usize,
    failed: usize,
    skipped: usize,
    acked_puts: u64,
    acked_deletes: u64,
    unknown_ops: u64,
    reads: u64,
    history_ops: usize,
    power_cuts: u64,
    seconds: f64,
}

fn report(results: &[Trial], kinds: &[&str], seed: u64, json: bool) -> Result<(), Error> {
    let mut sums: Vec<KindSummary> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for k in kinds {
        if !seen.contains(k) {
            seen.push(k);
        }
    }
    for k in seen {
        let ts: Vec<&Trial> = results.iter().filter(|t| t.kind == k).collect();
        if ts.is_empty() {
            continue;
        }
        sums.push(KindSummary {
            kind: k.to_string(),
            trials: ts.len(),
            passed: ts.iter().filter(|t| t.passed).count(),
            failed: ts.iter().filter(|t| !t.passed).count(),
            skipped: ts.iter().filter(|t| t.skipped).count(),
            acked_puts: ts.iter().map(|t| t.acked_puts).sum(),
            acked_deletes: ts.iter().map(|t| t.acked_deletes).sum(),
            unknown_ops: ts.iter().map(|t| t.unknown_ops).sum(),
            reads: ts.iter().map(|t| t.reads).sum(),
            history_ops: ts.iter().map(|t| t.history_ops).sum(),
            power_cuts: ts.iter().map(|t| t.power_cuts).sum(),
            seconds: ts.iter().map(|t| t.seconds).sum(),
        });
    }
    if json {
        let v = serde_json::json!({
            "seed": seed,
            "trials": results.len(),
            "passed": results.iter().filter(|t| t.passed).count(),
            "failed": results.iter().filter(|t| !t.passed).count(),
            "power_cuts": results.iter().map(|t| t.power_cuts).sum::<u64>(),
            "kinds": sums,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{:<17} {:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>8} {:>9} {:>5} {:>8}",
        "kind",
        "trials",
        "passed",
        "failed",
        "skipped",
        "acked PUT",
        "acked DEL",
        "unknown",
        "reads",
        "cuts",
        "seconds"
    );
    for s in &sums {
        println!(
            "{:<17} {:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>8} {:>9} {:>5} {:>8.1}",
            s.kind,
            s.trials,
            s.passed,
            s.failed,
            s.skipped,
            s.acked_puts,
            s.acked_deletes,
            s.unknown_ops,
            s.reads,
            s.power_cuts,
            s.seconds
        );
    }
    let failed: Vec<&Trial> = results.iter().filter(|t| !t.passed).collect();
    let cuts: u64 = results.iter().map(|t| t.power_cuts).sum();
    println!(
        "{} trials, {} passed, {} failed (seed {seed}){}",
        results.len(),
        results.len() - failed.len(),
        failed.len(),
        if cuts > 0 {
            format!("; {cuts} power cuts")
        } else {
            String::new()
        }
    );
    for t in failed {
        println!(
            "FAILED trial {} ({}): {}",
            t.index,
            t.kind,
            t.failures.join(" | ")
        );
        println!("  repeat: {}", t.repro);
    }
    let hist: Vec<&str> = results
        .iter()
        .filter_map(|t| t.history.as_deref())
        .collect();
    if !hist.is_empty() {
        println!("{} linearizability histories written; check them with: go run ./tools/linearizability {}", hist.len(), hist.join(" "));
    }
    Ok(())
}
