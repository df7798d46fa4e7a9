//! Errors of the metadata service, in the operator's terms.

use strata_placement::{NodeId, PlacementError};

/// What went wrong in the metadata service.
#[derive(Debug, thiserror::Error)]
pub enum MetaError {
    /// A request named a node the service does not know.
    #[error("node {0} is not a member of this cluster")]
    UnknownNode(NodeId),
    /// A request that cannot be served as asked.
    #[error("{0}")]
    BadRequest(String),
    /// A request for a node that does not prove to be that node (403).
    #[error("{0}")]
    Forbidden(String),
    /// The placement table refused a change.
    #[error("placement: {0}")]
    Placement(#[from] PlacementError),
    /// The state file could not be read or written.
    #[error("metadata file {path}: {source}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The stored state is not valid.
    #[error("stored metadata at {what} is not valid: {reason}")]
    Corrupt {
        /// Where (file path or etcd key).
        what: String,
        /// Why.
        reason: String,
    },
    /// etcd refused or could not be reached.
    #[error("etcd at {endpoint}: {source}")]
    Etcd {
        /// The endpoint given with --etcd.
        endpoint: String,
        /// The client's error.
        source: crate::etcd::EtcdError,
    },
    /// Another metadata service changed the state in etcd since we read it.
    #[error("the state in etcd changed under us (another metadata service is running on the same prefix); reloaded, retry the request")]
    Conflict,
}
