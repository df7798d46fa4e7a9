//! Strata's device and layered model.
//!
//! The lab's answer to "what happens to this trace beneath replication and
//! caches, on real devices": the Facebook Messages study's local-store
//! simulator (§3.2) — disks with a seek/bandwidth model and a per-disk
//! scheduler, several disks per node behind a balancer, flash with a fixed
//! latency, RAM with none — and its HDFS+HBase model, here replication of a
//! Strata object store: R replicas, one local and R−1 remote, with network
//! bytes counted, plus the study's what-ifs (local compaction, combined
//! logging, flash as a write buffer).
//!
//! The model is pure: it takes requests and returns numbers. Cache policies
//! come from the simulator's crates through [`TieredCache`].

#![warn(missing_docs)]

pub mod cache;
pub mod disk;
pub mod layered;
pub mod node;
mod run;
pub mod stats;

pub use cache::{FlashHit, PolicyCache};
pub use disk::{Completion, Disk, DiskParams, DiskRequest, IoClass};
pub use layered::{
    CacheOutcome, ClassLatency, Layout, Model, ModelConfig, ModelError, ModelReport, NoCache,
    TieredCache, TimeSpreader,
};
pub use node::Node;
pub use run::run_models;
pub use stats::{LatencyHistogram, LatencySummary};
