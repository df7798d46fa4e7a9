//! `strata`: the single command line of Strata's store and lab.
//!
//! Each subcommand lives in its own module under `cmd/`; this file only
//! parses the command line and dispatches.

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
    /// The fault campaign: kill -9, torn writes, bit flips, a full disk,
    /// slow clients and network partitions against real nodes and a
    /// loopback cluster, each trial checked for lost or wrong data
    Torture(cmd::torture::Args),
}

/// Fixes glibc's mmap threshold at 1 MiB. Its default threshold is
/// dynamic: after a large buffer is freed it rises (up to 32 MiB), and later
/// buffers of that size come from per-thread heap arenas that keep the
/// memory. A server that streams 8 MiB tracts through many threads then
/// holds hundreds of MiB it no longer uses; with a fixed threshold every
/// large buffer is mapped and returned to the system when freed.
fn bound_allocator_retention() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator tunable; called once at start,
    // before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 20);
    }
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
    bound_allocator_retention();
    raise_fd_limit();
    let cli = Cli::parse();
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
