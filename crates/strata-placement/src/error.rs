//! Errors of the placement table, in the operator's terms.

use crate::{DiskId, NodeId};

/// What went wrong while building, changing or decoding a placement table.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PlacementError {
    /// The replication factor is outside 1..=16.
    #[error("replication factor {0} is not supported (use 1 to 16)")]
    BadReplication(usize),
    /// Fewer distinct live nodes than replicas: a row cannot hold R disks on R nodes.
    #[error("{nodes} live node(s) cannot hold {replication} replicas on different nodes; add nodes or lower the replication factor")]
    TooFewNodes {
        /// Distinct live nodes available.
        nodes: usize,
        /// Replicas wanted per row.
        replication: usize,
    },
    /// A disk id appears twice in the input.
    #[error("disk {0} is listed twice")]
    DuplicateDisk(DiskId),
    /// A change names a disk the table does not know.
    #[error("disk {0} is not in the placement table")]
    UnknownDisk(DiskId),
    /// A change names a node the table does not know.
    #[error("node {0} is not in the placement table")]
    UnknownNode(NodeId),
    /// add-node named a node that already has disks in the table.
    #[error("node {0} is already in the placement table")]
    NodeExists(NodeId),
    /// The tract size is zero.
    #[error("tract size must be at least 1 byte")]
    BadTractSize,
    /// A decoded table breaks an invariant.
    #[error("invalid placement table: {0}")]
    Invalid(String),
}
