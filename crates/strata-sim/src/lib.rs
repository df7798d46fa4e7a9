//! Strata's cache and tier simulator.
//!
//! A trace is turned into a stream of [`Access`]es and replayed through any
//! number of simulated caches at once ([`run`]): one read of the trace
//! evaluates many policies × sizes, spread over all cores. A simulated cache
//! ([`SimConfig`]) is one tier or RAM over flash (exclusive, promote or keep
//! on a flash hit), fully or set-associative (linear or hashed set mapping,
//! per-set load reported), with a write policy (treat writes as lookups,
//! write allocate, no-write allocate, per-request hints), flash wear and
//! lifetime, and crashes that empty RAM. The eviction policies are
//! `strata-policy`'s, the very code the store runs.
//!
//! [`mrc`] computes exact LRU miss-ratio curves in one pass (stack distances
//! with a Fenwick tree, O(log n) per request, object or byte mode) and
//! SHARDS-sampled ones (fixed rate or fixed size).

#![warn(missing_docs)]

mod access;
mod engine;
mod fasthash;
pub mod mrc;
pub mod plot;
mod prefetch;
mod runner;
mod setassoc;
mod source;

pub use access::{next_access_pass, Access, Kind};
pub use engine::{
    CrashReport, Medium, OnFlashHit, SetLoadReport, SimConfig, SimReport, TierReport, TierSpec,
    WritePolicy,
};
pub use runner::{run, RunOptions};
pub use setassoc::{SetAssociative, SetMapping};
pub use source::{with_next_access, working_set, AccessSource, WorkingSet, BATCH};

/// Errors in the user's terms.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] strata_trace::TraceError),
    /// The simulation was configured inconsistently.
    #[error("bad simulation setup: {0}")]
    Config(String),
    /// A worker thread died.
    #[error("a simulation worker failed: {0}")]
    Worker(String),
}
