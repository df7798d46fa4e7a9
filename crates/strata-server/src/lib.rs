//! The Strata server (`strata server`): every node, a cluster of one or a
//! member of a larger cluster (`--meta ADDR`).
//!
//! The node registers its disk with the metadata service, sends heartbeats,
//! and keeps the current placement table. For every row its disk belongs
//! to it keeps one segment store (Haystack's physical volume of a logical
//! volume; [`rows::RowStores`]) and serves the table-versioned object API of
//! [`strata_proto`]: a request with a stale table version is
//! refused, one for a row that is not here is misdirected.
//!
//! Recovery ([`recovery`]): when the table puts this node's disk in place of
//! a dead one, the node pulls each such row from a surviving replica (all
//! rows at once, a bounded number of streams and bytes per second per disk)
//! while it already accepts the row's new writes.
//!
//! Scrubbing ([`scrub`]): a background, throttled pass re-reads every
//! record of the rows this node leads, checks checksums, compares per-range
//! counts and checksums with the other replicas, repairs what is corrupt,
//! missing or divergent from a good copy, and reports what it found.

#![warn(missing_docs)]

mod admin;
mod dashboard;
pub mod ec;
mod error;
pub mod gateway;
mod identity;
pub mod index;
mod local;
mod node;
mod options;
pub mod recovery;
pub mod reserve;
pub mod rows;
pub mod scrub;
mod server;
mod start;
mod wire;
pub mod workers;

pub use error::ClusterError;
pub use node::ClusterNode;
pub use options::{Device, GatewayLimits, NodeOptions, S3Listen};
pub use start::{embedded_meta, serve, start, Running, Shutdown};
