//! The S3 listener: one HTTP/1 connection task per client, each request
//! handed to the s3s service.

use s3s::host::{S3Host, VirtualHost};
use s3s::service::S3ServiceBuilder;
use s3s::S3Result;

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
    /// Domains of virtual-host-style requests (`BUCKET.DOMAIN`); requests
    /// to any other host are path style.
    pub domains: Vec<String>,
    /// This process's node (its address and protocol routes), reached
    /// in-process rather than over loopback HTTP.
    pub local: Option<(String, Arc<dyn strata_client::LocalNode>)>,
    /// Whether PUTs write the listing index (always, but for the
    /// benchmark of the index's cost: without it nothing is listed).
    pub listing_index: bool,
    /// Multipart uploads neither completed nor aborted this long after
    /// their creation are aborted by the sweep, their parts reclaimed
    /// (None: never).
    pub abandoned_uploads_after: Option<std::time::Duration>,
}

/// Virtual-host-style addressing: a host `BUCKET.DOMAIN[:PORT]` for one of
/// the configured domains names the bucket; every other host (an IP
/// address, the domain itself, an unknown name) is path style. s3s's own
/// `SingleDomain` would take an unknown host, `127.0.0.1` included, for a
/// bucket name.
pub struct Domains(pub Vec<String>);

impl S3Host for Domains {
    fn parse_host_header<'a>(&'a self, host: &'a str) -> S3Result<VirtualHost<'a>> {
        let name = match host.rsplit_once(':') {
            Some((n, port)) if port.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => host,
        };
        for d in &self.0 {
            if let Some(bucket) = name
                .strip_suffix(d.as_str())
                .and_then(|b| b.strip_suffix('.'))
                .filter(|b| !b.is_empty())
            {
                return Ok(VirtualHost::new(d.as_str()).with_bucket(bucket));
            }
        }
        Ok(VirtualHost::new(name))
    }
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

    /// The bound socket and the S3 service, for the server's one
    /// connection loop (`strata_node::conns::serve`: connection limit,
    /// idle drop, head timeout).
    pub fn into_parts(self) -> (tokio::net::TcpListener, s3s::service::S3Service) {
        (self.listener, self.service)
    }
}

/// Binds the S3 listener of a node.
pub async fn serve(opts: S3Options) -> Result<Listener, S3Error> {
    let root = opts.root.ok_or(S3Error::NoRootKey)?;
    let cluster = Arc::new(Cluster::new(&opts.meta, opts.local));
    let keys = Keys::new(root, cluster.clone(), opts.admin_token.clone());
    let mut s3 = StrataS3::new(
        cluster.clone(),
        opts.max_object_size,
        opts.admin_token.clone(),
    );
    s3.listing_index = opts.listing_index;
    s3.keys = Some(keys.clone());
    if opts.listing_index {
        let resolver = StrataS3::new(
            cluster.clone(),
            opts.max_object_size,
            opts.admin_token.clone(),
        );
        tokio::spawn(crate::intents::resolve_loop(resolver));
    }
    if let Some(after) = opts.abandoned_uploads_after {
        // Every node sweeps (deletes are idempotent), a quarter of the age
        // apart, at most hourly.
        let every = (after / 4).clamp(
            std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(3600),
        );
        let sweeper = StrataS3::new(cluster, opts.max_object_size, opts.admin_token);
        tokio::spawn(crate::multipart::sweep_loop(sweeper, after, every));
    }
    let mut builder = S3ServiceBuilder::new(s3);
    builder.set_auth(KeyAuth(keys.clone()));
    builder.set_access(KeyAccess(keys));
    builder.set_host(Domains(opts.domains));
    let service = builder.build();
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|source| S3Error::Listen {
            addr: opts.listen.clone(),
            source,
        })?;
    Ok(Listener { listener, service })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_of_the_domain_name_buckets() {
        let d = Domains(vec!["localhost".into(), "s3.example.com".into()]);
        let bucket = |h: &'static str| d.parse_host_header(h).unwrap().bucket().map(str::to_string);
        assert_eq!(bucket("photos.localhost:8490").as_deref(), Some("photos"));
        assert_eq!(bucket("a.b.s3.example.com").as_deref(), Some("a.b"));
        assert_eq!(bucket("localhost:8490"), None);
        assert_eq!(bucket("127.0.0.1:8490"), None);
        assert_eq!(bucket("other.example.org"), None);
        assert_eq!(bucket("notlocalhost"), None);
    }
}
