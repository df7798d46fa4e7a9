//! `strata`: the single command line of Strata's store and lab.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only
//! parses the command line and dispatches.

/// mimalloc instead of glibc's allocator (docs/node.md, "Memory allocator"): the
/// server's requests allocate and free buffers of 64 KiB to 8 MiB on many
/// threads. glibc gave freed heap tops back to the system and faulted them
/// in again on the next request (and, with a dynamic mmap threshold, kept
/// large buffers in per-thread arenas); mimalloc reuses its pages per
/// thread and returns unused ones after a short delay. Measured: server
/// CPU per 64 KiB PUT 59-62 µs with glibc, 49-50 µs with mimalloc
/// (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cmd;
mod progress;
mod units;

use clap::{Parser, Subcommand};

/// Strata: a store for billions of small objects on RAM, flash and disk, and
/// the lab that decides how to tier them.
#[derive(Parser)]
#[command(name = "strata", version, about, long_about = None, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
/// Each subcommand's help comes from its own `Args` doc comment (a doc
/// comment here would replace its long help).
enum Command {
    Demo(cmd::demo::Args),
    Store(cmd::store::Args),
    Server(Box<cmd::server::Args>),
    Meta(cmd::meta::Args),
    Cluster(cmd::cluster::Args),
    Key(cmd::key::Args),
    Put(cmd::client::PutArgs),
    Get(cmd::client::GetArgs),
    Rm(cmd::client::RmArgs),
    Load(cmd::client::LoadArgs),
    Bench(cmd::bench::Args),
    Trace(cmd::trace::Args),
    Sim(cmd::sim::Args),
    Mrc(cmd::mrc::Args),
    Provision(cmd::provision::Args),
    Analyze(cmd::analyze::Args),
    Model(cmd::model::Args),
    Cost(cmd::cost::Args),
    Report(cmd::report::Args),
    Synth(cmd::synth::Args),
    Upgrade(cmd::upgrade::Args),
    /// The fault campaign: kill -9, power cuts, torn writes, bit flips, a
    /// full disk, slow clients and network partitions against real nodes
    /// and a loopback cluster, each trial checked for lost or wrong data
    /// (`strata torture --list`: the kinds)
    Torture(cmd::torture::Args),
}

/// Raises the soft limit on open files to the hard limit, as Go programs
/// and most servers do: a node may hold more segment files than the usual
/// soft limit (1,024 on many systems, 20,000 here), and a store reopens the
/// least recently used ones on GETs once its descriptor budget (half the
/// soft limit) is exhausted, which costs an `open` per GET of a random
/// object. The hard limit is what the administrator allows; going beyond it
/// is theirs to decide (`LimitNOFILE=` in a systemd unit, `ulimit -Hn`).
fn raise_fd_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let mut lim = getrlimit(Resource::Nofile);
    if lim.current != lim.maximum {
        lim.current = lim.maximum;
        // Failing leaves the soft limit as it was: the store sizes its
        // descriptor budget from whatever limit is in force.
        let _ = setrlimit(Resource::Nofile, lim);
    }
}

fn main() {
    raise_fd_limit();
    let cli = Cli::parse();
    if matches!(cli.command, Command::Server(_) | Command::Meta(_)) {
        // `strata torture`'s power kinds and the power tests start servers
        // over the power-loss model (strata_fs::power); nothing otherwise.
        if let Err(e) = strata_fs::power::arm_from_env() {
            eprintln!("strata: STRATA_POWER_ROOT: {e}");
            std::process::exit(2);
        }
    }
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Store(a) => cmd::store::run(a),
        Command::Server(a) => cmd::server::run(*a),
        Command::Meta(a) => cmd::meta::run(a),
        Command::Cluster(a) => cmd::cluster::run(a),
        Command::Key(a) => cmd::key::run(a),
        Command::Put(a) => cmd::client::put(a),
        Command::Get(a) => cmd::client::get(a),
        Command::Rm(a) => cmd::client::rm(a),
        Command::Load(a) => cmd::client::load(a),
        Command::Bench(a) => cmd::bench::run(a),
        Command::Trace(a) => cmd::trace::run(a),
        Command::Sim(a) => cmd::sim::run(a),
        Command::Mrc(a) => cmd::mrc::run(a),
        Command::Provision(a) => cmd::provision::run(a),
        Command::Analyze(a) => cmd::analyze::run(a),
        Command::Model(a) => cmd::model::run(a),
        Command::Cost(a) => cmd::cost::run(a),
        Command::Report(a) => cmd::report::run(a),
        Command::Synth(a) => cmd::synth::run(a),
        Command::Upgrade(a) => cmd::upgrade::run(a),
        Command::Torture(a) => cmd::torture::run(a),
    };
    if let Err(e) = result {
        eprintln!("strata: error: {e:#}");
        std::process::exit(1);
    }
}
