//! The storage node's local machinery, shared by every Strata server
//! (docs/node.md): the tier mover over segment stores grouped by workload
//! ([`mover`], FIFO / LRU, TTL with burst, throttled, crash-safe moves),
//! the stratified write draw and flash rules ([`tiers`]), the RAM and flash
//! read caches run by `strata-policy` ([`ramcache`], [`flashcache`]),
//! sampled request traces in the lab's format ([`trace`]), the tier plan in
//! force ([`plan`]), counters ([`metrics`]), the live flash dashboard
//! ([`dashboard`]), the admin token ([`auth`]), and the HTTP pieces of the
//! public API ([`http`], [`range`], [`object`]). The server that runs them
//! is `strata-server`; [`loadgen`] and [`client`] drive it in `strata
//! bench http` and `strata demo`.

#![warn(missing_docs)]

pub mod auth;
pub mod client;
pub mod conns;
pub mod dashboard;
pub mod flashcache;
pub mod guard;
pub mod http;
pub mod loadgen;
pub mod metrics;
pub mod mover;
pub mod object;
pub mod plan;
pub mod ramcache;
pub mod range;
pub mod tiers;
pub mod trace;

pub use http::HttpLimits;
pub use tiers::RamAdmission;
