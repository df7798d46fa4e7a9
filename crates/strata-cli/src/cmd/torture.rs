//! `strata torture`: the fault campaign's flags. The campaign itself is
//! the strata-torture crate; this module only parses the flags into its
//! options and runs it with this binary as the `strata` it starts.

use anyhow::Context;
use std::path::PathBuf;
use std::time::Duration;

/// Run the fault campaign: trials of kill -9, torn writes, bit flips, a
/// full disk, slow clients and network partitions against real `strata`
/// processes (a single node and a loopback cluster), each checked for lost,
/// resurrected and wrong data.
///
/// Each trial starts fresh processes in its own directory, runs a load of
/// checksummed objects (each a pure function of its key and version),
/// injects its fault, brings the node or cluster back, and reads every key
/// back: an acknowledged PUT must read back byte for byte, an acknowledged
/// DELETE must be absent (404), an operation without an answer may have
/// taken effect or not, and a wrong byte must never have been served.
/// Trials cycle through --kinds; trial i uses seed SEED+i, and each failure
/// prints the command that repeats it.
///
/// Kinds (--kinds, comma-separated; groups: all, single, cluster, ec, s3,
/// power):
///   single: put, batch, delete, overwrite, compaction, tier-move,
///     torn-write, flip-needle, flip-checkpoint, flip-superblock, disk-full
///     (needs root: it mounts a 64 MiB tmpfs), slow-clients, power-put,
///     power-compaction
///   cluster: cluster-kill, multipart, node-loss, partition-nodes,
///     partition-client, linearizable, cluster-flip, cluster-power,
///     cluster-power-all
///   ec (6 nodes, --ec 4+2): ec-encode, ec-compact, ec-rebuild, ec-flip,
///     ec-power
///   s3: s3-put, s3-multipart, s3-delete, s3-flip-listing, s3-cluster,
///     s3-cluster-multipart, s3-cluster-partition, s3-cluster-loss, power-s3
///   power: power-put, power-compaction, power-s3, cluster-power,
///     cluster-power-all, ec-power
///
/// Power cuts (the power kinds): unlike kill -9, a power cut loses what
/// was written but not fsynced. The processes run over strata-fs's
/// power-loss model (STRATA_POWER_ROOT: their data directories); at a
/// random moment under load the harness makes the trigger file and the
/// process cuts its power (unsynced writes dropped, or torn page by page,
/// the two in turn from one cut to the next, the first by the seed;
/// unsynced directory changes undone) and exits
/// with status 86 (any other end fails the trial). Each trial cuts 2-3
/// times, restarting over a fresh model between cuts and without it after
/// a process's last cut; every key is read back after each restart, and
/// a GET answering 500 then fails the trial. The report's `cuts` column
/// (`power_cuts` in --json) counts the processes whose power was cut.
///
/// Linearizability: `linearizable` trials write their histories to
/// --history DIR; check them with tools/linearizability (Porcupine):
///   go run ./tools/linearizability DIR/*.json
///
/// Exit status: 0 when every trial passed, 1 otherwise.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Number of trials (they cycle through the kinds).
    #[arg(long, default_value_t = 18)]
    trials: usize,
    /// Kinds of trials, comma-separated (see above), or a group: all, single,
    /// cluster, ec, s3, power.
    #[arg(long, value_delimiter = ',', default_value = "all")]
    kinds: Vec<String>,
    /// Seed of trial 0 (trial i uses SEED+i); default: from the clock.
    #[arg(long)]
    seed: Option<u64>,
    /// Print the report as JSON on standard output instead of a table.
    #[arg(long)]
    json: bool,
    /// Directory for the trials' data (default: a temporary directory on
    /// /dev/shm when there is one). Each trial's directory is removed when
    /// it passes.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Keep the directories (data and logs) of failed trials.
    #[arg(long)]
    keep_failed: bool,
    /// Write the histories of `linearizable` trials here.
    #[arg(long, value_name = "DIR")]
    history: Option<PathBuf>,
    /// Nodes of the cluster trials (replication 3).
    #[arg(long, default_value_t = 4)]
    nodes: usize,
    /// Client threads of each trial's load.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// Start no trial after this many seconds (the report then counts the
    /// trials run); 0: no limit.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    time_limit: u64,
    /// List the kinds and exit.
    #[arg(long)]
    list: bool,
}

pub fn run(a: Args) -> anyhow::Result<()> {
    if a.list {
        print!("{}", strata_torture::kind_list());
        return Ok(());
    }
    let opts = strata_torture::Options {
        exe: std::env::current_exe().context("the strata binary")?,
        trials: a.trials,
        kinds: a.kinds,
        seed: a.seed,
        json: a.json,
        dir: a.dir,
        keep_failed: a.keep_failed,
        history: a.history,
        nodes: a.nodes,
        workers: a.workers,
        time_limit: (a.time_limit > 0).then(|| Duration::from_secs(a.time_limit)),
    };
    strata_torture::run(&opts)?;
    Ok(())
}
