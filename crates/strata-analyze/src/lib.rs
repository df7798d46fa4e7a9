//! Workload characterisation of a storage trace, in one pass and bounded
//! memory: the questions the Facebook Messages study (§4) and the Haystack
//! and Janus papers answer about their workloads, for any trace.
//!
//! - op mix per workload, in requests and bytes;
//! - object sizes per workload (percentiles and box-plot data);
//! - object lifetimes (create to delete) as CDFs by size class;
//! - the locality map (study Figure 7): the fraction of reads preceded by a
//!   read within an offset distance and a recency window;
//! - read heat (study Figure 8): data and read I/O by times read;
//! - popularity by age (Haystack Figure 7);
//! - peak IOPS per GiB per workload against the break-even line (Janus
//!   Figure 4).
//!
//! Large traces are handled by hash-sampling objects (see [`Analyzer`]).

#![warn(missing_docs)]

mod analyzer;
pub mod hist;
mod text;

pub use analyzer::{
    short_bytes, Analysis, AnalyzeConfig, AnalyzeError, Analyzer, HeatBucket, LifetimeClass,
    LocalityLine, OpMix, PopularityByAge, Sampling, WorkloadStats, HEAT_BUCKETS,
};
pub use text::render_text;
