//! The node's way into the cluster: the process's one coordinator client,
//! shared by the S3 operations and the key checks.

use std::sync::Arc;

use s3s::s3_error;
use strata_client::{Client, ClientError};

/// The cluster, reached through the coordinator of the node this process
/// runs (its own replicas called directly, the others over the node
/// protocol). The cluster may have no placement table yet when the node
/// starts; the coordinator fetches it on first use.
pub struct Cluster {
    client: Arc<Client>,
}

impl Cluster {
    /// The cluster `client` coordinates.
    pub fn new(client: Arc<Client>) -> Cluster {
        Cluster { client }
    }

    /// The coordinator client.
    pub fn client(&self) -> Arc<Client> {
        self.client.clone()
    }
}

/// A cluster failure is the service's, never the caller's: 503, which S3
/// clients retry. The detail (replica and metadata-service addresses, file
/// paths) goes to the operator's log, not into the client's answer.
pub fn unavailable(e: ClientError) -> s3s::S3Error {
    match e {
        ClientError::BadName(_) => s3_error!(InvalidArgument, "{e}"),
        e => {
            eprintln!("strata s3: {e}");
            s3_error!(
                ServiceUnavailable,
                "the cluster could not serve the request in time; retry (the server's log says why)"
            )
        }
    }
}
