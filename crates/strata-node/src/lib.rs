//! The storage node's local machinery, shared by every Strata server
//! (docs/node.md): the tier mover over segment stores grouped by workload
//! ([`mover`], FIFO / LRU, TTL with burst, throttled, crash-safe moves),
//! the stratified write draw and flash rules ([`tiers`]), the RAM and flash
//! read caches run by `strata-policy` ([`ramcache`], [`flashcache`]),
//! sampled request traces in the lab's format ([`trace`]), the tier plan in
//! force ([`plan`]), counters ([`metrics`]) and the object header of the
//! native API ([`object`]). No HTTP here: the front that serves it is
//! `strata-http`, the server that runs it `strata-server`, and the load
//! generator that drives it `strata-bench`.

#![warn(missing_docs)]

pub mod flashcache;
pub mod metrics;
pub mod mover;
pub mod object;
pub mod plan;
pub mod ramcache;
pub mod tiers;
pub mod trace;

pub use tiers::RamAdmission;
