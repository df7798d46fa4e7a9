//! The S3 listener: one HTTP/1 connection task per client, each request
//! handed to the s3s service.

use hyper_util::rt::TokioIo;
use s3s::service::S3ServiceBuilder;

use std::sync::Arc;

use crate::auth::{Key, KeyAccess, KeyAuth, Keys};
use crate::cluster::Cluster;
use crate::service::StrataS3;
use crate::S3Error;

/// What the S3 listener of a node needs.
#[derive(Clone)]
pub struct S3Options {
    /// The address to listen on.
    pub listen: String,
    /// The cluster's metadata service.
    pub meta: String,
    /// The root access key (every permission).
    pub root: Option<Key>,
    /// Largest object accepted.
    pub max_object_size: u64,
    /// The metadata service's admin token, to fetch the other keys (none:
    /// only the root key).
    pub admin_token: Option<String>,
}

/// A bound S3 listener, ready to serve.
pub struct Listener {
    listener: tokio::net::TcpListener,
    service: s3s::service::S3Service,
}

impl Listener {
    /// The address actually bound.
    pub fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until the task is dropped.
    pub async fn run(self) {
        loop {
            let Ok((sock, _)) = self.listener.accept().await else {
                // Out of descriptors or the like: wait, do not spin.
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                continue;
            };
            let _ = sock.set_nodelay(true);
            let service = self.service.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .keep_alive(true)
                    .serve_connection(TokioIo::new(sock), service)
                    .await;
            });
        }
    }
}

/// Binds the S3 listener of a node.
pub async fn serve(opts: S3Options) -> Result<Listener, S3Error> {
    let root = opts.root.ok_or(S3Error::NoRootKey)?;
    let cluster = Arc::new(Cluster::new(&opts.meta));
    let keys = Keys::new(root, cluster.clone(), opts.admin_token);
    let mut builder = S3ServiceBuilder::new(StrataS3::new(cluster, opts.max_object_size));
    builder.set_auth(KeyAuth(keys.clone()));
    builder.set_access(KeyAccess(keys));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|source| S3Error::Listen {
            addr: opts.listen.clone(),
            source,
        })?;
    Ok(Listener { listener, service })
}
