//! The node's way into the cluster: one coordinator client, shared by the
//! S3 operations and the key checks.

use std::sync::Arc;

use s3s::{s3_error, S3Result};
use strata_client::{Client, ClientConfig, ClientError, Http, LocalNode};

/// The cluster whose metadata service is `meta`, connected on first use
/// (the cluster may have no placement table yet when the node starts).
pub struct Cluster {
    meta: String,
    /// This process's own node (its address and protocol routes), called
    /// in-process instead of over loopback HTTP.
    local: Option<(String, Arc<dyn LocalNode>)>,
    client: tokio::sync::OnceCell<Arc<Client>>,
}

impl Cluster {
    /// The cluster at `meta`; requests to the node `local` names are
    /// served in-process.
    pub fn new(meta: &str, local: Option<(String, Arc<dyn LocalNode>)>) -> Cluster {
        Cluster {
            meta: meta.to_string(),
            local,
            client: tokio::sync::OnceCell::new(),
        }
    }

    /// The coordinator client.
    pub async fn client(&self) -> S3Result<Arc<Client>> {
        self.client
            .get_or_try_init(|| async {
                let http = match &self.local {
                    Some((addr, node)) => Http::new().with_local(addr, node.clone()),
                    None => Http::new(),
                };
                Client::connect_with(&self.meta, ClientConfig::coordinator(), http)
                    .await
                    .map(Arc::new)
            })
            .await
            .cloned()
            .map_err(unavailable)
    }
}

/// A cluster failure is the service's, never the caller's: 503, which S3
/// clients retry.
pub fn unavailable(e: ClientError) -> s3s::S3Error {
    match e {
        ClientError::BadName(_) => s3_error!(InvalidArgument, "{e}"),
        e => s3_error!(ServiceUnavailable, "{e}"),
    }
}
