//! The node's way into the cluster: the process's one coordinator client
//! and its one copy of the bucket list, shared by the S3 operations, the
//! key checks and the native API's.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use s3s::s3_error;
use strata_client::{BucketRecord, Client, ClientError};

/// The cluster's buckets by name.
pub type Buckets = BTreeMap<String, BucketRecord>;

/// How long a node trusts its copy of the bucket list.
pub const BUCKETS_TTL: Duration = Duration::from_secs(1);

/// The cluster, reached through the coordinator of the node this process
/// runs (its own replicas called directly, the others over the node
/// protocol). The cluster may have no placement table yet when the node
/// starts; the coordinator fetches it on first use.
pub struct Cluster {
    client: Arc<Client>,
    /// The buckets as last fetched from the metadata service, and when: a
    /// reader that may wait asks for a fresh copy, the others take one at
    /// most [`BUCKETS_TTL`] old (no metadata read on the object path, and
    /// unsigned requests cannot flood the metadata service).
    buckets: Mutex<Option<(Instant, Arc<Buckets>)>>,
    /// Where the last fetched list is kept across restarts (None: not
    /// kept): a node started while the metadata service is away serves
    /// from it rather than wait for the service on its first write.
    copy: Option<Arc<KeptCopy>>,
}

/// The file the bucket list is kept in, and the list it holds. Writes go
/// one at a time under the lock (each compared with the last written):
/// two at once would share the file's temporary name.
struct KeptCopy {
    path: std::path::PathBuf,
    written: Mutex<Option<Arc<Buckets>>>,
}

impl KeptCopy {
    /// Writes `list` unless the file holds it already; a failure costs
    /// only the copy (said on stderr).
    fn keep(&self, list: Arc<Buckets>) {
        let Ok(mut written) = self.written.lock() else {
            return;
        };
        if written.as_ref().is_some_and(|old| **old == *list) {
            return;
        }
        let bytes = serde_json::to_vec(&*list).unwrap_or_default();
        match strata_fs::write_atomic(&self.path, &bytes) {
            Ok(()) => *written = Some(list),
            Err(e) => eprintln!(
                "strata s3: keeping the bucket list in {}: {e}",
                self.path.display()
            ),
        }
    }
}

impl Cluster {
    /// The cluster `client` coordinates.
    pub fn new(client: Arc<Client>) -> Cluster {
        Cluster {
            client,
            buckets: Mutex::new(None),
            copy: None,
        }
    }

    /// [`Cluster::new`], keeping the last fetched bucket list in `path`
    /// (JSON, replaced atomically when the list changes) and starting from
    /// the copy there, as a stale one: it is fetched again at first use,
    /// and used only while the metadata service does not answer. A copy
    /// that cannot be read is ignored (said on stderr).
    pub fn with_copy(client: Arc<Client>, path: std::path::PathBuf) -> Cluster {
        let old = match strata_fs::read_if_exists(&path) {
            Ok(Some(bytes)) => match serde_json::from_slice::<Buckets>(&bytes) {
                Ok(b) => Some(b),
                Err(e) => {
                    eprintln!(
                        "strata s3: {}: not a bucket list ({e}); fetched again",
                        path.display()
                    );
                    None
                }
            },
            Ok(None) => None,
            Err(e) => {
                eprintln!("strata s3: {}: {e}; fetched again", path.display());
                None
            }
        };
        // Stale from the start: older than the copy's time to live.
        let stale = Instant::now()
            .checked_sub(BUCKETS_TTL * 2)
            .unwrap_or_else(Instant::now);
        let old = old.map(Arc::new);
        Cluster {
            client,
            buckets: Mutex::new(old.clone().map(|b| (stale, b))),
            copy: Some(Arc::new(KeptCopy {
                path,
                written: Mutex::new(old),
            })),
        }
    }

    /// The coordinator client.
    pub fn client(&self) -> Arc<Client> {
        self.client.clone()
    }

    /// Bucket `name`'s record, from the node's copy of the list if it is
    /// at most [`BUCKETS_TTL`] old (no copy of the whole list: this is on
    /// the path of every native request). When the metadata service does
    /// not answer, an older copy is used rather than none: native writes
    /// go on while it is away, as they did before buckets were consulted.
    pub async fn bucket(&self, name: &str) -> Result<Option<BucketRecord>, ClientError> {
        let stale = match self.buckets.lock() {
            Ok(g) => match g.as_ref() {
                Some((at, b)) if at.elapsed() < BUCKETS_TTL => return Ok(b.get(name).cloned()),
                Some((_, b)) => Some(b.get(name).cloned()),
                None => None,
            },
            Err(_) => None,
        };
        match (self.buckets(true).await, stale) {
            (Ok(b), _) => Ok(b.get(name).cloned()),
            (Err(_), Some(old)) => {
                // Tried again in a second, not by every request meanwhile.
                if let Ok(mut g) = self.buckets.lock() {
                    if let Some((at, _)) = g.as_mut() {
                        *at = Instant::now();
                    }
                }
                Ok(old)
            }
            (Err(e), None) => Err(e),
        }
    }

    /// The cluster's buckets, fetched again if `fresh` or the copy is old
    /// (shared, not copied: the list may hold many thousands).
    pub async fn buckets(&self, fresh: bool) -> Result<Arc<Buckets>, ClientError> {
        if !fresh {
            if let Ok(g) = self.buckets.lock() {
                if let Some((at, b)) = g.as_ref() {
                    if at.elapsed() < BUCKETS_TTL {
                        return Ok(b.clone());
                    }
                }
            }
        }
        let b = Arc::new(self.client.buckets().await?);
        if let Ok(mut g) = self.buckets.lock() {
            *g = Some((Instant::now(), b.clone()));
        }
        if let Some(copy) = &self.copy {
            // Compared and written off the request path.
            let (copy, list) = (copy.clone(), b.clone());
            tokio::task::spawn_blocking(move || copy.keep(list));
        }
        Ok(b)
    }

    /// Records in the node's copy what this node just made the metadata
    /// service do to bucket `name` (Some: created or changed, None:
    /// deleted), so that its next requests see it without fetching the
    /// whole list again; other nodes see it within [`BUCKETS_TTL`].
    pub fn learned(&self, name: &str, record: Option<BucketRecord>) {
        if let Ok(mut g) = self.buckets.lock() {
            if let Some((_, b)) = g.as_mut() {
                let b = Arc::make_mut(b);
                match record {
                    Some(r) => {
                        b.insert(name.to_string(), r);
                    }
                    None => {
                        b.remove(name);
                    }
                }
            }
        }
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
