//! Client errors, in the caller's terms.

/// What went wrong with a client operation.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The metadata service could not be reached or answered an error.
    #[error("metadata service at {addr}: {reason}")]
    Meta {
        /// Its address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The cluster has no placement table yet.
    #[error("the cluster has no placement table yet (too few nodes registered)")]
    NoTable,
    /// A bucket or key the store cannot hold.
    #[error("invalid object name {0:?}: bucket and key must be non-empty, and neither may contain a NUL byte; the bucket may not contain '/'")]
    BadName(String),
    /// A write could not reach every replica before the deadline.
    #[error("write of {name} failed: {reason}")]
    Write {
        /// bucket/key.
        name: String,
        /// The last replica error.
        reason: String,
    },
    /// A replica's device is full (it answered 507 Insufficient Storage):
    /// the write is refused at once rather than retried until the deadline.
    #[error("write of {name} refused: {reason}")]
    Full {
        /// bucket/key.
        name: String,
        /// The replica's answer.
        reason: String,
    },
    /// No replica could serve a read before the deadline.
    #[error("read of {name} failed on every replica: {reason}")]
    Read {
        /// bucket/key.
        name: String,
        /// The last replica error.
        reason: String,
    },
    /// Every replica of a record answered, and none could serve it: each
    /// that holds it failed to read it (its device answered damaged bytes
    /// or an error). Retrying does not help; the detail is for the log.
    #[error("read of {name} failed: every replica that holds it could not read it: {reason}")]
    Unreadable {
        /// bucket/key.
        name: String,
        /// The replicas' errors.
        reason: String,
    },
    /// A stored manifest is damaged.
    #[error("object {name}: damaged manifest: {reason}")]
    Manifest {
        /// bucket/key.
        name: String,
        /// Why.
        reason: String,
    },
}
