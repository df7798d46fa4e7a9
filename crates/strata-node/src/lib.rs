//! Strata's storage node: one process serving objects over HTTP from the
//! segment store, tiering them across flash and disk by the tier plan, with
//! a RAM object cache, a flash read cache, and sampled request traces in the
//! lab's format (docs/node.md).
//!
//! - [`node`]: per-workload segment stores, group commit, the read and write
//!   paths; [`http`]: the HTTP API over it.
//! - [`mover`]: the tier mover (FIFO / LRU, throttled, crash-safe moves).
//! - [`ramcache`], [`flashcache`]: the caches, run by `strata-policy`.
//! - [`trace`]: sampled request traces; [`plan`]: the tier plan in force.
//! - [`dashboard`]: the live flash dashboard at `/dashboard`.
//! - [`loadgen`], [`client`]: the load generator of `strata bench http` and
//!   `strata demo`.

#![warn(missing_docs)]

pub mod auth;
pub mod client;
pub mod dashboard;
pub mod demo;
pub mod flashcache;
pub mod http;
pub mod loadgen;
pub mod metrics;
pub mod mover;
pub mod node;
pub mod object;
pub mod plan;
pub mod ramcache;
pub mod range;
pub mod server;
pub mod trace;

pub use http::{serve, HttpLimits};
pub use node::{Node, NodeConfig, NodeError, RamAdmission};
pub use server::{start, Running};
