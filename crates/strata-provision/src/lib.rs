//! Janus flash provisioning for Strata's lab.
//!
//! From a trace with workloads this crate builds, per workload, histograms of
//! bytes stored and of reads by data age over shared buckets (FIFO age, and
//! LRU age with censoring bounds), joins them into piecewise linear
//! cacheability curves φ(x) = g(f⁻¹(x)), and allocates a total flash size
//! among workloads to maximise weighted flash reads, optionally under a
//! bound on the flash write rate (write probabilities, Lagrangian
//! relaxation, bisection on λ, greedy over concave upper bounds). It compares
//! the result with a single FIFO and with flash proportional to reads or
//! size, prices flash against disk (break-even IOPS per GiB, the
//! cost-optimal flash per workload), computes per-workload TTLs, writes the
//! tier plan the store loads, and replays an evaluation window through a
//! flash tier laid out by the plan to measure what it achieves.
//!
//! The algorithms are pure: they take requests from any iterator and know
//! nothing of files; the `strata provision` command is the I/O edge.
//! Section numbers (§) refer to the Janus paper (USENIX ATC 2013).

#![warn(missing_docs)]

pub mod age;
pub mod analysis;
pub mod baseline;
pub mod collect;
pub mod curve;
pub mod econ;
mod error;
pub mod replay;
pub mod solver;
pub mod svg;
pub mod warm;
pub mod weights;

pub use age::{AgeBuckets, AgeHistogram};
pub use analysis::{provision, Amount, Config, Provision};
pub use collect::{collect, CollectConfig, Collected, Collector, WorkloadStats};
pub use curve::CacheabilityCurve;
pub use econ::Prices;
pub use error::{ProvisionError, Result};
pub use replay::{Layout, Replay};
pub use solver::{allocate, Item, Solution};
/// The tier plan format lives in its own crate (the store reads it too).
pub use strata_plan::{
    Eviction, TierPlan, WarmOff, WarmTier, WorkloadPlan, PLAN_FORMAT, PLAN_VERSION,
};
pub use warm::{warm_age, WarmAge, WarmConfig};
