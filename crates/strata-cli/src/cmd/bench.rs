//! `strata bench ...`: benchmarks of whole paths.

use clap::Subcommand;

/// Benchmarks of whole paths.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand)]
enum Which {
    /// Fill a segment store, reopen it, then read it back cold.
    Store(super::bench_store::Args),
    /// HTTP load generator (Haystress): a Strata node or SeaweedFS side by side.
    Http(super::bench_http::Args),
    /// The erasure-coding engine: encode, healthy and degraded range reads,
    /// rebuild.
    Ec(super::bench_ec::Args),
    /// The S3 listing index at scale: fill one bucket with many names,
    /// then time pages of it.
    Listing(super::bench_listing::Args),
}

/// Runs the chosen benchmark.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.which {
        Which::Store(a) => super::bench_store::run(a),
        Which::Http(a) => super::bench_http::run(a),
        Which::Ec(a) => super::bench_ec::run(a),
        Which::Listing(a) => super::bench_listing::run(a),
    }
}
