//! Access keys: who may sign requests, with which secret, and what each
//! key may do. The root key comes from the node's environment; the other
//! keys from the metadata service (`strata key create`), fetched with the
//! admin token and cached for a second.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use s3s::access::{S3Access, S3AccessContext};
use s3s::auth::{S3Auth, SecretKey};
use s3s::dto::{CopyObjectInput, CopySource, UploadPartCopyInput};
use s3s::path::S3Path;
use s3s::{s3_error, S3Request, S3Result};
use strata_client::{KeyRecord, Permission};

use crate::cluster::{unavailable, Cluster};

/// An access key and its secret.
#[derive(Clone)]
pub struct Key {
    /// The access key id (public, appears in requests).
    pub access_key: String,
    /// The secret (never logged: `Debug` hides it).
    pub secret_key: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<hidden>")
            .finish()
    }
}

/// How long a node trusts its copy of the keys (a deleted key may sign
/// requests for this long).
const KEYS_TTL: Duration = Duration::from_secs(1);

/// How soon an unknown access key id may fetch the keys again.
const MISS_REFETCH: Duration = Duration::from_millis(200);

type KeyMap = BTreeMap<String, KeyRecord>;

/// The keys that sign requests to this node's S3 API.
pub struct Keys {
    root: Key,
    cluster: Arc<Cluster>,
    admin_token: Option<String>,
    cache: Mutex<Option<(Instant, KeyMap)>>,
    /// The public-read buckets as last fetched, and when (consulted for
    /// unsigned requests only).
    public: Mutex<Option<(Instant, BTreeSet<String>)>>,
}

impl Keys {
    /// The root key (every permission) and, if `admin_token` is given, the
    /// keys the metadata service keeps.
    pub fn new(root: Key, cluster: Arc<Cluster>, admin_token: Option<String>) -> Arc<Keys> {
        Arc::new(Keys {
            root,
            cluster,
            admin_token,
            cache: Mutex::new(None),
            public: Mutex::new(None),
        })
    }

    /// Whether `bucket` is public-read (the list is fetched at most once
    /// per [`KEYS_TTL`], so unsigned requests cannot flood the metadata
    /// service).
    async fn is_public(&self, bucket: &str) -> S3Result<bool> {
        if let Ok(g) = self.public.lock() {
            if let Some((at, public)) = g.as_ref() {
                if at.elapsed() < KEYS_TTL {
                    return Ok(public.contains(bucket));
                }
            }
        }
        let client = self.cluster.client();
        let public: BTreeSet<String> = client
            .buckets()
            .await
            .map_err(unavailable)?
            .into_iter()
            .filter(|(_, b)| b.public_read)
            .map(|(name, _)| name)
            .collect();
        let found = public.contains(bucket);
        if let Ok(mut g) = self.public.lock() {
            *g = Some((Instant::now(), public));
        }
        Ok(found)
    }

    /// Key `access`, from the cache or (missing, or the cache is old) the
    /// metadata service.
    async fn lookup(&self, access: &str) -> S3Result<Option<KeyRecord>> {
        let Some(token) = &self.admin_token else {
            return Ok(None);
        };
        if let Ok(g) = self.cache.lock() {
            if let Some((at, keys)) = g.as_ref() {
                let known = keys.get(access);
                // An unknown id refetches at most every MISS_REFETCH, so
                // requests with made-up keys cannot flood the metadata
                // service.
                if at.elapsed() < KEYS_TTL && (known.is_some() || at.elapsed() < MISS_REFETCH) {
                    return Ok(known.cloned());
                }
            }
        }
        let client = self.cluster.client();
        let keys = client.keys(token).await.map_err(unavailable)?;
        let found = keys.get(access).cloned();
        if let Ok(mut g) = self.cache.lock() {
            *g = Some((Instant::now(), keys));
        }
        Ok(found)
    }
}

/// [`Keys`] as s3s's signature checker.
pub struct KeyAuth(pub Arc<Keys>);

#[async_trait::async_trait]
impl S3Auth for KeyAuth {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if access_key == self.0.root.access_key {
            return Ok(SecretKey::from(self.0.root.secret_key.clone()));
        }
        match self.0.lookup(access_key).await? {
            Some(k) => Ok(SecretKey::from(k.secret)),
            None => Err(s3_error!(
                InvalidAccessKeyId,
                "The AWS Access Key Id you provided does not exist in our records."
            )),
        }
    }
}

/// What an unsigned request may do in a public-read bucket.
const PUBLIC_OPS: [&str; 5] = [
    "GetObject",
    "HeadObject",
    "ListObjects",
    "ListObjectsV2",
    "HeadBucket",
];

/// What an operation needs in its bucket.
fn needed(op: &str) -> Permission {
    match op {
        "GetObject" | "HeadObject" | "ListObjects" | "ListObjectsV2" | "HeadBucket"
        | "GetBucketLocation" | "GetObjectAcl" => Permission::Read,
        "PutObject"
        | "PutObjectAcl"
        | "DeleteObject"
        | "DeleteObjects"
        | "CopyObject"
        | "CreateMultipartUpload"
        | "UploadPart"
        | "UploadPartCopy"
        | "CompleteMultipartUpload"
        | "AbortMultipartUpload"
        | "ListParts" => Permission::Write,
        _ => Permission::Owner,
    }
}

/// [`Keys`] as s3s's access check: signed requests only; the root key may
/// do anything, another key what its per-bucket permissions allow.
pub struct KeyAccess(pub Arc<Keys>);

#[async_trait::async_trait]
impl S3Access for KeyAccess {
    async fn check(&self, cx: &mut S3AccessContext<'_>) -> S3Result<()> {
        let Some(creds) = cx.credentials() else {
            // Unsigned: only reads of a public-read bucket.
            let bucket = match cx.s3_path() {
                S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket.to_string(),
                S3Path::Root => String::new(),
            };
            let op = cx.s3_op().name();
            if PUBLIC_OPS.contains(&op) && !bucket.is_empty() && self.0.is_public(&bucket).await? {
                return Ok(());
            }
            return Err(s3_error!(AccessDenied, "Signature is required"));
        };
        if creds.access_key == self.0.root.access_key {
            return Ok(());
        }
        let access = creds.access_key.clone();
        let bucket = match cx.s3_path() {
            S3Path::Root => return Ok(()),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket.to_string(),
        };
        self.0
            .allow(&access, &bucket, needed(cx.s3_op().name()))
            .await
    }

    /// A copy also reads its source: the key needs read there (write on
    /// the destination was checked by [`KeyAccess::check`]).
    async fn copy_object(&self, req: &mut S3Request<CopyObjectInput>) -> S3Result<()> {
        self.0
            .source_readable(req.credentials.as_ref(), &req.input.copy_source)
            .await
    }

    /// As [`KeyAccess::copy_object`].
    async fn upload_part_copy(&self, req: &mut S3Request<UploadPartCopyInput>) -> S3Result<()> {
        self.0
            .source_readable(req.credentials.as_ref(), &req.input.copy_source)
            .await
    }
}

impl Keys {
    /// The buckets key `access` may see in ListBuckets: None for the root
    /// key (every bucket), else those it holds any permission on.
    pub(crate) async fn visible_buckets(&self, access: &str) -> S3Result<Option<BTreeSet<String>>> {
        if access == self.root.access_key {
            return Ok(None);
        }
        Ok(Some(
            self.lookup(access)
                .await?
                .map(|k| k.buckets.into_keys().collect())
                .unwrap_or_default(),
        ))
    }

    /// Ok if the signer may read a copy's source.
    async fn source_readable(
        &self,
        creds: Option<&s3s::auth::Credentials>,
        source: &CopySource,
    ) -> S3Result<()> {
        let Some(creds) = creds else {
            return Err(s3_error!(AccessDenied, "Signature is required"));
        };
        if creds.access_key == self.root.access_key {
            return Ok(());
        }
        match source {
            CopySource::Bucket { bucket, .. } => {
                self.allow(&creds.access_key, bucket, Permission::Read)
                    .await
            }
            _ => Err(s3_error!(AccessDenied, "Access Denied")),
        }
    }

    /// Ok if key `access` has at least `need` in `bucket`; AccessDenied
    /// otherwise.
    async fn allow(&self, access: &str, bucket: &str, need: Permission) -> S3Result<()> {
        let has = self
            .lookup(access)
            .await?
            .and_then(|k| k.buckets.get(bucket).copied());
        match has {
            Some(p) if p >= need => Ok(()),
            _ => Err(s3_error!(AccessDenied, "Access Denied")),
        }
    }
}
