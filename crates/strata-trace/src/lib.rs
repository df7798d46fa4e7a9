//! Strata's trace model.
//!
//! One [`Request`] record describes one storage request (a read, write or
//! delete of one object by one workload). Every trace format Strata reads is
//! turned into a stream of these records, and every lab tool (simulator,
//! miss-ratio curves, provisioner, analysis) consumes that stream, so a trace
//! far larger than RAM works with bounded memory.

#![warn(missing_docs)]

mod model;

pub use model::{Op, Request, Tier, TraceError};
