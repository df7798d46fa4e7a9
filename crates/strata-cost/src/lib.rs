//! The cost explorer: which hardware to buy for a workload.
//!
//! The Facebook Messages study's §5.4 as a tool: a price, performance and
//! failure model of disks, RAM and flash (defaults: the study's Table 3,
//! overridable by a TOML file), a grid of systems (RAM × flash × disks,
//! default 3 × 4 × 3 = 36), each simulated on the trace with the layered
//! device model, then capex, opex (failed disks and DIMMs replaced at their
//! annual failure rate, flash replaced as it wears out) and foreground
//! latency, and the Pareto set of systems one could justify buying.

#![warn(missing_docs)]

pub mod ec;
mod explore;
mod hardware;

pub use ec::{price_ec, EcInputs, EcPrice};
pub use explore::{explore, mark_pareto, working_set, CostReport, SystemResult};
pub use hardware::{CostModel, DiskModel, FlashModel, Grid, RamModel, Simulation};

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
pub enum CostError {
    /// The cost model (TOML) is invalid.
    #[error("cost model: {0}")]
    Config(String),
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] strata_trace::TraceError),
    /// A bug.
    #[error("internal error: {0}")]
    Internal(String),
}
