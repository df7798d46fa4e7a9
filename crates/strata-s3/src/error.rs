//! Errors of the S3 front.

/// Why the S3 listener could not run.
#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    /// The listen address could not be bound.
    #[error("cannot listen for S3 on {addr}: {source}")]
    Listen {
        /// The address given.
        addr: String,
        /// The socket error.
        source: std::io::Error,
    },
    /// No root key was configured.
    #[error("the S3 API needs a root key: set STRATA_ROOT_ACCESS_KEY and STRATA_ROOT_SECRET_KEY")]
    NoRootKey,
}
