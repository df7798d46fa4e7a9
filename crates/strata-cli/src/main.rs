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
enum Command {
    /// Inspect and check a segment store directory.
    /// The loop end to end: a node, a synthetic load, traces, a plan, the load again.
    Demo(cmd::demo::Args),
    Store(cmd::store::Args),
    /// Run a storage node: objects over HTTP on flash and disk tiers.
    Server(cmd::server::Args),
    /// Run the cluster's metadata service (membership, placement table, health checker).
    Meta(cmd::meta::Args),
    /// Cluster status, add-node, remove-node, wait for recovery, recovery simulation.
    Cluster(cmd::cluster::Args),
    /// Store an object in the cluster (every replica of its row).
    Put(cmd::client::PutArgs),
    /// Read an object from the cluster (one replica, failing over).
    Get(cmd::client::GetArgs),
    /// Delete an object from the cluster.
    Rm(cmd::client::RmArgs),
    /// Write or verify N objects of known content against the cluster, many in flight.
    Load(cmd::client::LoadArgs),
    /// Benchmarks of whole paths (the segment store, the HTTP node).
    Bench(cmd::bench::Args),
    /// Read, convert and summarise storage traces.
    Trace(cmd::trace::Args),
    /// Replay a trace through cache and tier policies.
    Sim(cmd::sim::Args),
    /// Miss-ratio curves: exact LRU in one pass, or SHARDS-sampled.
    Mrc(cmd::mrc::Args),
    /// Janus flash provisioning: cacheability curves, allocation, tier plan.
    Provision(cmd::provision::Args),
    /// Characterise a trace's workload (op mix, sizes, lifetimes, locality, heat).
    Analyze(cmd::analyze::Args),
    /// Layered device model: replication, disks with seeks and a scheduler, flash, RAM.
    Model(cmd::model::Args),
    /// Hardware cost explorer: simulate a grid of RAM x flash x disk systems.
    Cost(cmd::cost::Args),
    /// Write a self-contained HTML report of a trace.
    Report(cmd::report::Args),
    /// Generate a synthetic multi-workload trace.
    Synth(cmd::synth::Args),
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Demo(a) => cmd::demo::run(a),
        Command::Store(a) => cmd::store::run(a),
        Command::Server(a) => cmd::server::run(a),
        Command::Meta(a) => cmd::meta::run(a),
        Command::Cluster(a) => cmd::cluster::run(a),
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
    };
    if let Err(e) = result {
        eprintln!("strata: error: {e:#}");
        std::process::exit(1);
    }
}
