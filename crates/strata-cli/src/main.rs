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
    Server(cmd::server::Args),
    Meta(cmd::meta::Args),
    Cluster(cmd::cluster::Args),
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
