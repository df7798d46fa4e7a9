//! What can go wrong while provisioning, in the user's terms.

use std::path::PathBuf;

/// An error of the provisioner.
#[derive(Debug, thiserror::Error)]
pub enum ProvisionError {
    /// The trace could not be read.
    #[error(transparent)]
    Trace(#[from] strata_trace::TraceError),
    /// The trace (or the training window) holds no requests.
    #[error("the trace has no requests{0}")]
    EmptyTrace(String),
    /// A time window does not lie inside the trace.
    #[error("{name} window {start}..{end} s is outside the trace, which spans {trace_start}..{trace_end} s")]
    WindowOutsideTrace {
        /// Which window (`train` or `eval`).
        name: &'static str,
        /// Window start in trace seconds.
        start: f64,
        /// Window end in trace seconds.
        end: f64,
        /// First request time of the trace.
        trace_start: f64,
        /// Last request time of the trace.
        trace_end: f64,
    },
    /// A time window is empty or reversed.
    #[error("{name} window {start}..{end} s is empty: the end must be after the start")]
    EmptyWindow {
        /// Which window.
        name: &'static str,
        /// Window start.
        start: f64,
        /// Window end.
        end: f64,
    },
    /// A parameter is out of its range.
    #[error("{0}")]
    BadParameter(String),
    /// The weights file is malformed.
    #[error("{path}: line {line}: {reason}")]
    BadWeights {
        /// The weights file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What was wrong.
        reason: String,
    },
    /// The training window has no reads, so nothing can be cached.
    #[error("the training window has no reads: there is nothing for flash to serve")]
    NoReads,
    /// A tier plan could not be parsed or is invalid.
    #[error(transparent)]
    BadPlan(#[from] strata_plan::PlanError),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, ProvisionError>;
