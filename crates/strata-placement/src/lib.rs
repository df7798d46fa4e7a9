//! Strata's placement table: where every object lives, computed by clients.
//!
//! This is the tract locator table of Flat Datacenter Storage (FDS). The
//! table holds disks, not data: it is a list of rows, each row naming `R`
//! disks (the replicas, default 3) on `R` different nodes. A client hashes
//! `(bucket, key)` to a row ([`object_hash`], [`PlacementTable::row_of`])
//! and talks to that row's disks directly; reads and writes never change the
//! table, so clients fetch it once and only refresh it when a server refuses
//! their table version.
//!
//! The table is built so that every pair of disks on different nodes shares
//! at least one row ([`PlacementTable::build`]). When a disk dies, a
//! different live disk takes its place in each of its rows
//! ([`PlacementTable::replace_disks`]), and a surviving replica of each row
//! streams the row's data to the newcomer ([`recovery::plan`]): every disk
//! takes part, so recovery is faster the larger the cluster.
//!
//! Objects larger than a tract (default 8 MiB) are split into tracts over
//! consecutive rows; tract −1 holds the object's metadata
//! ([`PlacementTable::tract_row`]).
//!
//! Everything here is pure: no I/O, no clocks, deterministic for a given
//! input, so the metadata service, the clients, the simulator and the tests
//! all compute the same thing.

#![warn(missing_docs)]

mod change;
pub mod ec;
mod error;
mod hash;
pub mod recovery;
mod table;

pub use change::Movement;
pub use error::PlacementError;
pub use hash::{jump_hash, object_hash};
pub use table::{
    Disk, DiskId, DiskState, NodeId, PlacementTable, DEFAULT_REPLICATION, DEFAULT_TRACT_SIZE,
    FORMAT_VERSION,
};
