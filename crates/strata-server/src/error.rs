//! Errors of a cluster node, in the operator's terms.

/// What went wrong on a cluster node.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// A row's segment store failed.
    #[error("row {row} store at {path}: {source}")]
    Store {
        /// The row.
        row: usize,
        /// Its directory.
        path: String,
        /// The store's error.
        source: strata_store::StoreError,
    },
    /// The S3 API could not be set up.
    #[error("the S3 API on {listen}: {reason}")]
    S3 {
        /// Its listen address.
        listen: String,
        /// Why.
        reason: String,
    },
    /// A file of the node's directory.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// The metadata service refused or could not be reached.
    #[error("metadata service at {addr}: {reason}")]
    Meta {
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// Another node answered an error.
    #[error("node {addr}: {reason}")]
    Peer {
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// A row's device is full: the record was not written (answered 507
    /// Insufficient Storage; deleting objects frees space).
    #[error("row {row}: the device is full: {reason}")]
    Full {
        /// The row.
        row: usize,
        /// What the store said.
        reason: String,
    },
    /// A stored record is not in the node's layout.
    #[error("row {row}: damaged record: {reason}")]
    BadRecord {
        /// The row.
        row: usize,
        /// Why.
        reason: String,
    },
    /// The listing index database failed.
    #[error("listing index at {path}: {reason}")]
    Index {
        /// The database file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The node refuses to start in a state that would lose data.
    #[error("{0}")]
    Refused(String),
}
