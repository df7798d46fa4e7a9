//! Access keys: who may sign requests, with which secret, and what each
//! key may do. The root key comes from the node's environment; the other
//! keys from the metadata service (`strata key create`), fetched with the
//! admin token and cached for a second.
//!
//! One identity model for both ways into the data (docs/security.md): an
//! S3 request proves its key with a SigV4 signature, a native one with a
//! bearer token bound to a key ([`mint_token`], `strata key token`), and
//! both are held to the same per-bucket permissions and public-read flag.

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

/// The keys that sign requests to this node's S3 and native APIs.
pub struct Keys {
    /// The root key (every permission), if the node was given one.
    root: Option<Key>,
    cluster: Arc<Cluster>,
    admin_token: Option<String>,
    cache: Mutex<Option<(Instant, KeyMap)>>,
    /// Tokens whose signature checked, with their key and expiry: a
    /// client sends the same token with every request, and its HMAC is
    /// computed once (a deleted key's tokens still fail: its permissions
    /// are looked up on every request).
    verified: Mutex<Verified>,
}

/// Verified tokens: the token, its key's id and its expiry (Unix seconds).
type Verified = std::collections::HashMap<Box<str>, (Arc<str>, u64)>;

/// Verified tokens remembered at most (past it the memory starts over).
const VERIFIED_MAX: usize = 10_000;

impl Keys {
    /// The root key (every permission) and, if `admin_token` is given, the
    /// keys the metadata service keeps.
    pub fn new(root: Option<Key>, cluster: Arc<Cluster>, admin_token: Option<String>) -> Arc<Keys> {
        Arc::new(Keys {
            root,
            cluster,
            admin_token,
            cache: Mutex::new(None),
            verified: Mutex::new(Verified::new()),
        })
    }

    /// Whether the node has a root key.
    pub fn has_root(&self) -> bool {
        self.root.is_some()
    }

    /// Whether `access` is the root key's id.
    fn is_root(&self, access: &str) -> bool {
        self.root.as_ref().is_some_and(|r| r.access_key == access)
    }

    /// The secret of key `access` (the root key's, or one the metadata
    /// service keeps), None for an unknown id.
    async fn secret_of(&self, access: &str) -> S3Result<Option<String>> {
        if let Some(r) = self.root.as_ref().filter(|r| r.access_key == access) {
            return Ok(Some(r.secret_key.clone()));
        }
        Ok(self.lookup(access).await?.map(|k| k.secret))
    }

    /// Whether `bucket` is public-read (from the node's copy of the bucket
    /// list, at most [`crate::cluster::BUCKETS_TTL`] old: unsigned
    /// requests cannot flood the metadata service).
    async fn is_public(&self, bucket: &str) -> S3Result<bool> {
        let b = self.cluster.bucket(bucket).await.map_err(unavailable)?;
        Ok(b.is_some_and(|b| b.public_read))
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
        match self.0.secret_of(access_key).await? {
            Some(secret) => Ok(SecretKey::from(secret)),
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
        // The names S3 keeps for itself (a multipart upload's parts) are
        // no object key, for any signer, root included.
        if let S3Path::Object { key, .. } = cx.s3_path() {
            reserved_key(key)?;
        }
        if self.0.is_root(&creds.access_key) {
            return Ok(());
        }
        let access = creds.access_key.clone();
        let bucket = match cx.s3_path() {
            S3Path::Root => return Ok(()),
            S3Path::Bucket { bucket } | S3Path::Object { bucket, .. } => bucket.to_string(),
        };
        let op = cx.s3_op().name();
        match self.0.allow(&access, &bucket, needed(op)).await {
            // What an unsigned request may do, a key without a grant on
            // the bucket may do too (S3's public-read).
            Err(_) if PUBLIC_OPS.contains(&op) && self.0.is_public(&bucket).await? => Ok(()),
            r => r,
        }
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
        if self.is_root(access) {
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
        if let CopySource::Bucket { key, .. } = source {
            reserved_key(key)?;
        }
        if self.is_root(&creds.access_key) {
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

/// The first character of the names S3 keeps for itself in a bucket (a
/// multipart upload's parts: `\u{1}mpu/UPLOAD/PART`, docs/s3-compatibility.md):
/// no object key or native name may begin with it, so no client can read,
/// overwrite or delete a part through either API.
pub const RESERVED_PREFIX: char = '\u{1}';

/// InvalidArgument for a key in S3's own namespace.
fn reserved_key(key: &str) -> S3Result<()> {
    if key.starts_with(RESERVED_PREFIX) {
        return Err(s3_error!(
            InvalidArgument,
            "object keys beginning with U+0001 are reserved for multipart parts"
        ));
    }
    Ok(())
}

/// The prefix of a native bearer token.
pub const TOKEN_PREFIX: &str = "strata1.";

/// The longest a token may live: a token that says it expires later is
/// refused whoever signed it.
pub const TOKEN_MAX_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// What a token's HMAC covers: its version, key id and expiry.
fn token_message(access: &str, expires: u64) -> String {
    format!("strata-token-v1\n{access}\n{expires}")
}

fn token_mac(secret: &str, access: &str, expires: u64) -> hmac::Hmac<sha2::Sha256> {
    use hmac::{KeyInit, Mac};
    let mut mac = <hmac::Hmac<sha2::Sha256> as KeyInit>::new_from_slice(secret.as_bytes())
        .expect("HMAC takes a key of any length");
    mac.update(token_message(access, expires).as_bytes());
    mac
}

/// A bearer token for the native API that proves `key` until `expires`
/// (seconds since the Unix epoch): `strata1.ACCESS.EXPIRES.HMAC`, the HMAC
/// (SHA-256, hex) keyed by the key's secret over
/// `strata-token-v1\nACCESS\nEXPIRES` (docs/security.md). Anyone who
/// holds the secret can mint one; the node keeps no list of tokens, so a
/// token lives until it expires or its key is deleted.
pub fn mint_token(key: &Key, expires: u64) -> String {
    use hmac::Mac;
    let sig = token_mac(&key.secret_key, &key.access_key, expires)
        .finalize()
        .into_bytes();
    format!(
        "{TOKEN_PREFIX}{}.{expires}.{}",
        key.access_key,
        hex::encode(sig)
    )
}

/// A token's parts: key id, expiry, HMAC. The key id may hold dots: the
/// other two are split from the right.
fn token_parts(token: &str) -> Option<(&str, u64, Vec<u8>)> {
    let rest = token.strip_prefix(TOKEN_PREFIX)?;
    let mut it = rest.rsplitn(3, '.');
    let sig = hex::decode(it.next()?).ok()?;
    let expires = it.next()?.parse().ok()?;
    let access = it.next().filter(|a| !a.is_empty())?;
    Some((access, expires, sig))
}

/// Seconds since the Unix epoch.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// Why a native request was refused.
#[derive(Debug, PartialEq)]
pub enum Refused {
    /// No credentials, or credentials that prove nothing (401).
    Unauthenticated(String),
    /// A proven key without the permission (403).
    Forbidden(String),
    /// The keys or buckets could not be fetched (503).
    Unavailable,
}

impl Keys {
    /// Whether a native request with `authorization` (its Authorization
    /// header, if any) may do what `need` says in `bucket`: a valid token
    /// of the root key may do anything, one of another key what its
    /// permissions on the bucket allow; no token reads a public-read
    /// bucket and nothing else. The same rules as [`KeyAccess`]. Ok is the
    /// key's id (empty for an anonymous read): the client whose share of
    /// the node's buffers the request takes.
    pub async fn authorize_native(
        &self,
        authorization: Option<&[u8]>,
        bucket: &str,
        need: Permission,
    ) -> Result<Arc<str>, Refused> {
        let unavailable = |_| Refused::Unavailable;
        let Some(header) = authorization else {
            if need == Permission::Read && self.is_public(bucket).await.map_err(unavailable)? {
                return Ok(Arc::from(""));
            }
            return Err(Refused::Unauthenticated(
                "this bucket needs a key: send Authorization: Bearer TOKEN (`strata key token`)"
                    .into(),
            ));
        };
        let access = self.verify_token(header).await?;
        if self.is_root(&access) {
            return Ok(access);
        }
        let Some(record) = self.lookup(&access).await.map_err(unavailable)? else {
            return Err(Refused::Unauthenticated(
                "the token's access key does not exist".into(),
            ));
        };
        let has = record.buckets.get(bucket).copied();
        match has {
            Some(p) if p >= need => Ok(access),
            // What anyone may do, a key may do too.
            _ if need == Permission::Read
                && self.is_public(bucket).await.map_err(unavailable)? =>
            {
                Ok(access)
            }
            _ => Err(Refused::Forbidden(format!(
                "key {access} has no {} permission on bucket {bucket}",
                match need {
                    Permission::Read => "read",
                    Permission::Write => "write",
                    Permission::Owner => "owner",
                }
            ))),
        }
    }

    /// The key id a bearer `header` proves, if its token is well formed,
    /// unexpired, within [`TOKEN_MAX_LIFETIME`] and signed with the key's
    /// secret.
    async fn verify_token(&self, header: &[u8]) -> Result<Arc<str>, Refused> {
        use hmac::Mac;
        let bad = |why: &str| Err(Refused::Unauthenticated(why.to_string()));
        let Some(token) = std::str::from_utf8(header)
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .map(str::trim)
        else {
            return bad("the native API takes Authorization: Bearer TOKEN (`strata key token`); SigV4 signatures are for the S3 port");
        };
        let now = unix_now();
        if let Ok(g) = self.verified.lock() {
            if let Some((access, expires)) = g.get(token) {
                if *expires > now {
                    return Ok(access.clone());
                }
            }
        }
        let Some((access, expires, sig)) = token_parts(token) else {
            return bad("not a Strata token (strata1.ACCESS.EXPIRES.HMAC: `strata key token`)");
        };
        if expires <= now {
            return bad("the token has expired: mint another (`strata key token`)");
        }
        if expires - now > TOKEN_MAX_LIFETIME.as_secs() {
            return bad(
                "the token expires more than 30 days from now: mint one with a shorter --expires",
            );
        }
        let Some(secret) = self
            .secret_of(access)
            .await
            .map_err(|_| Refused::Unavailable)?
        else {
            return bad("the token's access key does not exist");
        };
        if token_mac(&secret, access, expires)
            .verify_slice(&sig)
            .is_err()
        {
            return bad("the token's signature does not match its key");
        }
        let access: Arc<str> = Arc::from(access);
        if let Ok(mut g) = self.verified.lock() {
            if g.len() >= VERIFIED_MAX {
                g.clear();
            }
            g.insert(token.into(), (access.clone(), expires));
        }
        Ok(access)
    }
}

#[cfg(test)]
mod token_tests {
    use super::*;

    #[test]
    fn tokens_split_from_the_right_and_carry_their_key() {
        let key = Key {
            access_key: "a.b.c".into(),
            secret_key: "s".into(),
        };
        let t = mint_token(&key, 1_900_000_000);
        let (access, exp, sig) = token_parts(&t).unwrap();
        assert_eq!((access, exp, sig.len()), ("a.b.c", 1_900_000_000, 32));
        assert!(token_parts("strata1..5.00").is_none());
        assert!(token_parts("strata1.k.x.00").is_none());
        assert!(token_parts("strata1.k.5.zz").is_none());
        assert!(token_parts("Bearer k").is_none());
    }

    #[test]
    fn a_token_of_another_secret_or_expiry_does_not_verify() {
        use hmac::Mac;
        let key = Key {
            access_key: "k".into(),
            secret_key: "right".into(),
        };
        let t = mint_token(&key, 1_900_000_000);
        let (_, exp, sig) = token_parts(&t).unwrap();
        assert!(token_mac("right", "k", exp).verify_slice(&sig).is_ok());
        assert!(token_mac("wrong", "k", exp).verify_slice(&sig).is_err());
        assert!(token_mac("right", "k", exp + 1).verify_slice(&sig).is_err());
        assert!(token_mac("right", "j", exp).verify_slice(&sig).is_err());
    }
}
