//! The native object API's side of the one identity model
//! (docs/security.md, "One identity model"): the node's public API
//! (`/{bucket}/{name}`, strata-server's gateway) asks here who may do
//! what, and writes objects of S3 buckets through the S3 service's own
//! write path, so that whichever API wrote an object, the listing index
//! agrees with it.
//!
//! - **Who**: a request proves a key with a bearer token
//!   ([`crate::auth::mint_token`]) and is held to that key's permissions
//!   on the bucket, as a SigV4-signed S3 request is; without a token it
//!   may only read a public-read bucket.
//! - **What is listed**: a bucket the metadata service knows (one made by
//!   S3 CreateBucket) is listed; a PUT, batch item or DELETE there records
//!   a write intent and writes the object and its listing entry with one
//!   stamp, as S3 PutObject does, and the object keeps S3 metadata (its
//!   MD5 as the ETag). A bucket made by a native PUT alone is not listed
//!   (the listing API is S3's), so its writes take the coordinator's
//!   plain path.

use std::sync::Arc;

use bytes::Bytes;
use s3s::dto::StreamingBlob;
use strata_proto::ObjectMeta;

use crate::auth::Keys;
use crate::cluster::{unavailable, Cluster};
use crate::jobs::Job;
use crate::meta::Checks;
use crate::service::StrataS3;

/// The native API's access and listed writes, shared by the node's public
/// routes; the S3 listener, when the node has one, uses the same keys and
/// bucket list.
pub struct Native {
    keys: Arc<Keys>,
    s3: StrataS3,
}

/// Why a native request failed on S3's path: its HTTP status and the
/// client's message (the S3 service keeps internal detail for the log).
#[derive(Debug)]
pub struct Failed {
    /// The status to answer.
    pub status: http::StatusCode,
    /// Why, for the client.
    pub message: String,
}

impl From<s3s::S3Error> for Failed {
    fn from(e: s3s::S3Error) -> Failed {
        use http::StatusCode as S;
        use s3s::S3ErrorCode as C;
        let message = e.message().unwrap_or("the write failed").to_string();
        let status = match e.code() {
            // A body that stopped coming is a timeout, one that broke or
            // did not match its length a bad request (as the native path
            // answers them).
            C::IncompleteBody => {
                let message = message.trim_start_matches("reading the body: ").to_string();
                let status = if message.starts_with("no data") {
                    S::REQUEST_TIMEOUT
                } else {
                    S::BAD_REQUEST
                };
                return Failed { status, message };
            }
            C::EntityTooLarge => S::PAYLOAD_TOO_LARGE,
            C::InvalidArgument => S::BAD_REQUEST,
            _ => e.status_code().unwrap_or(S::INTERNAL_SERVER_ERROR),
        };
        Failed { status, message }
    }
}

/// What a listed write stored: the object's cookie and the tier its first
/// replica put it on (a native PUT's answer).
pub struct Written {
    /// The object's cookie.
    pub cookie: u32,
    /// The tier its first replica stored it on.
    pub tier: Option<String>,
}

impl Native {
    /// The native API over `coordinator`, with the root key `root` and,
    /// with `admin_token`, the keys the metadata service keeps; objects of
    /// at most `max_object_size` bytes; `listing_index` off only for the
    /// benchmark of the index's cost. Also the write-intent resolver,
    /// which every node runs (an intent may be left by a native write as
    /// by an S3 one). The node's copy of the bucket list is kept in
    /// `bucket_copy` across restarts ([`Cluster::with_copy`]).
    pub fn new(
        coordinator: Arc<strata_client::Client>,
        root: Option<crate::auth::Key>,
        admin_token: Option<String>,
        max_object_size: u64,
        listing_index: bool,
        bucket_copy: Option<std::path::PathBuf>,
    ) -> (Arc<Native>, Vec<Job>) {
        let cluster = Arc::new(match bucket_copy {
            Some(path) => Cluster::with_copy(coordinator, path),
            None => Cluster::new(coordinator),
        });
        let keys = Keys::new(root, cluster.clone(), admin_token.clone());
        let service = || {
            let mut s3 = StrataS3::new(cluster.clone(), max_object_size, admin_token.clone());
            s3.listing_index = listing_index;
            s3
        };
        let jobs = if listing_index {
            vec![crate::jobs::resolver(service())]
        } else {
            Vec::new()
        };
        let mut s3 = service();
        s3.keys = Some(keys.clone());
        (Arc::new(Native { keys, s3 }), jobs)
    }

    /// The keys (the S3 listener checks signatures with the same).
    pub fn keys(&self) -> &Arc<Keys> {
        &self.keys
    }

    /// The cluster as the S3 service reaches it (one bucket list).
    pub(crate) fn cluster(&self) -> &Arc<Cluster> {
        self.s3.cluster()
    }

    /// Whether writes to `bucket` are listed: the metadata service knows
    /// it (from the node's copy of the bucket list, at most a second old)
    /// and the listing index is on.
    pub async fn listed(&self, bucket: &str) -> Result<bool, Failed> {
        if !self.s3.listing_index {
            return Ok(false);
        }
        let b = self
            .cluster()
            .bucket(bucket)
            .await
            .map_err(|e| Failed::from(unavailable(e)))?;
        Ok(b.is_some())
    }

    /// Stores `body` as `bucket/name` and lists it, as S3 PutObject does
    /// (no body of a failed upload becomes visible; the entry and the
    /// object carry one stamp). A body error ends the write with
    /// `IncompleteBody` whose message is the stream's error.
    pub async fn put<S, E>(&self, bucket: &str, name: &str, body: S) -> Result<Written, Failed>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let client = self.s3.cluster().client();
        let body = StreamingBlob::wrap(sync_wrapper::SyncStream::new(body));
        let stored = self
            .s3
            .store(
                &client,
                bucket,
                name,
                Some(body),
                None,
                Checks::none(),
                Some(ObjectMeta::default()),
                None,
                true,
            )
            .await?;
        Ok(Written {
            cookie: stored.cookie,
            tier: stored.tier,
        })
    }

    /// Deletes `bucket/name` and its listing entry, as S3 DeleteObject
    /// does; true if a replica held the object.
    pub async fn delete(&self, bucket: &str, name: &str) -> Result<bool, Failed> {
        let client = self.s3.cluster().client();
        Ok(self.s3.remove(&client, bucket, name).await?)
    }
}
