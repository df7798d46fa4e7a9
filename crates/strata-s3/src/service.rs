//! The S3 operations, each mapped onto one call of the cluster coordinator.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, Bucket, BucketCannedACL, ChecksumMode,
    CommonPrefix, CompleteMultipartUploadInput, CompleteMultipartUploadOutput, CopyObjectInput,
    CopyObjectOutput, CopyObjectResult, CopyPartResult, CopySource, CreateBucketInput,
    CreateBucketOutput, CreateMultipartUploadInput, CreateMultipartUploadOutput, DeleteBucketInput,
    DeleteBucketOutput, DeleteObjectInput, DeleteObjectOutput, DeleteObjectsInput,
    DeleteObjectsOutput, DeletedObject, ETag, GetBucketAclInput, GetBucketAclOutput,
    GetBucketLocationInput, GetBucketLocationOutput, GetObjectAclInput, GetObjectAclOutput,
    GetObjectInput, GetObjectOutput, Grant, Grantee, HeadBucketInput, HeadBucketOutput,
    HeadObjectInput, HeadObjectOutput, ListBucketsInput, ListBucketsOutput,
    ListMultipartUploadsInput, ListMultipartUploadsOutput, ListObjectVersionsInput,
    ListObjectVersionsOutput, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input,
    ListObjectsV2Output, ListPartsInput, ListPartsOutput, MetadataDirective, MultipartUpload,
    ObjectVersion, ObjectVersionStorageClass, Owner, Permission, PutBucketAclInput,
    PutBucketAclOutput, PutObjectAclInput, PutObjectAclOutput, PutObjectInput, PutObjectOutput,
    StreamingBlob, Timestamp, TimestampFormat, Type, UploadPartCopyInput, UploadPartCopyOutput,
    UploadPartInput, UploadPartOutput,
};
use std::time::{SystemTime, UNIX_EPOCH};
use strata_proto::{entry_of, HeadInfo, ListQuery, ObjectMeta};

use crate::list;
use crate::meta::{self, Checks, Conditions};
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use strata_client::{BucketRecord, Client, ClientError};

use crate::cluster::{unavailable, Cluster};

/// The S3 service of one node: a coordinator into the cluster whose
/// metadata service is `meta`.
pub struct StrataS3 {
    cluster: Arc<Cluster>,
    max_object_size: u64,
    /// The metadata service's admin token: making a bucket public needs it.
    admin_token: Option<String>,
    /// Whether a PUT writes the listing index (off only to measure what
    /// the index costs: `strata server --s3-bench-no-listing-index`).
    pub listing_index: bool,
    /// The access keys: ListBuckets shows a key only the buckets it has a
    /// permission on (None: every bucket to every signer).
    pub keys: Option<Arc<crate::auth::Keys>>,
    /// The region this API answers for ([`DEFAULT_REGION`] unless set).
    pub region: String,
}

/// The region of a server not told another (`strata server --s3-region`):
/// S3's own default, whose buckets answer GetBucketLocation with no
/// location constraint.
pub const DEFAULT_REGION: &str = "us-east-1";

use crate::cluster::Buckets;

/// Where a stored body's MD5, length and verified checksums land once it
/// has ended.
type Hashed = Arc<Mutex<Option<(Vec<u8>, u64, Vec<(String, String)>)>>>;

/// What [`StrataS3::store`] stored.
pub(crate) struct Stored {
    /// The body's MD5.
    pub md5: Vec<u8>,
    /// Its length.
    pub size: u64,
    /// Its ETag, content headers, user metadata and verified checksums.
    pub meta: ObjectMeta,
    /// Its head record's stamp (microseconds: the modification time).
    pub stamp: u64,
    /// Its cookie and the tier its first replica put it on (what a native
    /// PUT answers).
    pub cookie: u32,
    pub tier: Option<String>,
}

/// `meta` completed once the body is known: its ETag (`etag`, else the
/// MD5's hex) and the checksums the client sent and Strata verified.
fn finished(
    mut meta: ObjectMeta,
    etag: Option<String>,
    md5: &[u8],
    sums: &[(String, String)],
) -> ObjectMeta {
    meta.etag = etag.unwrap_or_else(|| hex::encode(md5));
    for (name, value) in sums {
        meta.headers.insert(name.clone(), value.clone());
    }
    meta
}

/// Keys of one DeleteObjects deleted at once.
const DELETE_PARALLELISM: usize = 16;

pub(crate) fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl StrataS3 {
    /// The cluster this service coordinates writes in.
    pub(crate) fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// A service into `cluster` accepting objects of at most
    /// `max_object_size` bytes; `admin_token` lets it make buckets public.
    pub fn new(
        cluster: Arc<Cluster>,
        max_object_size: u64,
        admin_token: Option<String>,
    ) -> StrataS3 {
        StrataS3 {
            cluster,
            max_object_size,
            admin_token,
            listing_index: true,
            keys: None,
            region: DEFAULT_REGION.to_string(),
        }
    }

    pub(crate) fn client(&self) -> Arc<Client> {
        self.cluster.client()
    }

    /// The cluster's buckets (the node's one copy: [`Cluster::buckets`]),
    /// fetched again if `fresh` or the copy is old.
    pub(crate) async fn buckets(&self, _client: &Client, fresh: bool) -> S3Result<Arc<Buckets>> {
        self.cluster.buckets(fresh).await.map_err(unavailable)
    }

    /// The client, once `bucket` is known to exist (else NoSuchBucket).
    pub(crate) async fn bucket(&self, bucket: &str) -> S3Result<Arc<Client>> {
        let client = self.client();
        if self
            .cluster
            .bucket(bucket)
            .await
            .map_err(unavailable)?
            .is_some()
            || self.buckets(&client, true).await?.contains_key(bucket)
        {
            return Ok(client);
        }
        Err(s3_error!(NoSuchBucket))
    }

    /// The client and an object's head record and stamp (NoSuchBucket,
    /// NoSuchKey): what GET and HEAD read, the head record only, never the
    /// listing index.
    pub(crate) async fn object(
        &self,
        bucket: &str,
        key: &str,
    ) -> S3Result<(Arc<Client>, strata_proto::Head, u64)> {
        let client = self.bucket(bucket).await?;
        let r = client
            .read_head(bucket, key)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| s3_error!(NoSuchKey))?;
        Ok((client, r.head, r.stamp))
    }

    /// [`StrataS3::object`] without the object's bytes (a HEAD): the
    /// replica reads the head record's start only.
    pub(crate) async fn object_info(
        &self,
        bucket: &str,
        key: &str,
    ) -> S3Result<(Arc<Client>, HeadInfo, u64)> {
        let client = self.bucket(bucket).await?;
        let r = client
            .read_head_info(bucket, key)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| s3_error!(NoSuchKey))?;
        Ok((client, r.head, r.stamp))
    }

    /// Stores `body` as `bucket/key` through the coordinator, hashing it on
    /// the way (MD5, and the checksums `checks` asks for, verified at the
    /// end: BadDigest) and bounding it by the object size limit. With
    /// `meta`, the object's head record keeps it, completed with the ETag
    /// (`etag`, else the body's MD5) and the verified checksums. Nothing
    /// becomes visible when the body fails: the head record is written
    /// only once the body has been stored and verified.
    ///
    /// With `listed`, the object is listed: once the body is stored, a
    /// write intent is recorded (its stamp taken then, so that of two
    /// writes of a name the one whose body ends last wins, as in S3), then
    /// the listing entry is written at the same time as the head record,
    /// both with the intent's stamp (docs/placement.md, "Write intents").
    /// If either fails, the intent is resolved at once against what the
    /// head record holds.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn store(
        &self,
        client: &Arc<Client>,
        bucket: &str,
        key: &str,
        body: Option<StreamingBlob>,
        content_length: Option<i64>,
        checks: Checks,
        meta: Option<ObjectMeta>,
        etag: Option<String>,
        listed: bool,
    ) -> S3Result<Stored> {
        if let Some(n) = content_length {
            if n as u64 > self.max_object_size {
                return Err(s3_error!(
                    EntityTooLarge,
                    "objects are limited to {} bytes",
                    self.max_object_size
                ));
            }
        }
        let body = match body {
            Some(b) => b.left_stream(),
            None => stream::empty().right_stream(),
        };
        // The body as it arrives, hashed on the way; a fault (too long, bad
        // digest) ends the stream with an error before the last record, so
        // no object becomes visible.
        let fault: Arc<Mutex<Option<s3s::S3Error>>> = Arc::new(Mutex::new(None));
        let digest: Hashed = Arc::new(Mutex::new(None));
        let max = self.max_object_size;
        let checks = Arc::new(checks);
        let (f2, d2) = (fault.clone(), digest.clone());
        let hasher = checks.hasher();
        let checked = stream::unfold(
            (body, Some(hasher), 0u64, false),
            move |(mut body, mut hasher, seen, done)| {
                let (fault, digest, checks) = (f2.clone(), d2.clone(), checks.clone());
                async move {
                    if done {
                        return None;
                    }
                    let fail = |e: s3s::S3Error| {
                        let msg = e.message().unwrap_or("bad body").to_string();
                        if let Ok(mut f) = fault.lock() {
                            *f = Some(e);
                        }
                        msg
                    };
                    match body.next().await {
                        None => match hasher.take().map(|h| checks.verify(h)) {
                            Some(Ok((md5, sums))) => {
                                if let Ok(mut g) = digest.lock() {
                                    *g = Some((md5, seen, sums));
                                }
                                None
                            }
                            Some(Err(e)) => Some((Err(fail(e)), (body, None, seen, true))),
                            None => None,
                        },
                        Some(Err(e)) => {
                            // A chunk of an aws-chunked body whose signature
                            // is wrong is refused as S3 refuses it (403);
                            // s3s's error type is private, its message is
                            // not.
                            let e = e.to_string();
                            let m = if e == "AwsChunkedStreamError: SignatureMismatch" {
                                fail(s3_error!(
                                    SignatureDoesNotMatch,
                                    "a chunk's signature does not match"
                                ))
                            } else {
                                fail(s3_error!(IncompleteBody, "reading the body: {e}"))
                            };
                            Some((Err(m), (body, hasher, seen, true)))
                        }
                        Some(Ok(chunk)) => {
                            let seen = seen + chunk.len() as u64;
                            if seen > max {
                                let m = fail(s3_error!(
                                    EntityTooLarge,
                                    "objects are limited to {max} bytes"
                                ));
                                return Some((Err(m), (body, hasher, seen, true)));
                            }
                            if let Some(h) = hasher.as_mut() {
                                h.update(&chunk);
                            }
                            Some((Ok::<Bytes, String>(chunk), (body, hasher, seen, false)))
                        }
                    }
                }
            },
        );
        let staged = client.put_staged(bucket, key, checked).await;
        if let Some(e) = fault.lock().ok().and_then(|mut f| f.take()) {
            return Err(e);
        }
        let staged = staged.map_err(unavailable)?;
        let (md5, size, sums) = digest
            .lock()
            .ok()
            .and_then(|mut d| d.take())
            .unwrap_or_default();
        // Only an object with S3 metadata is listed (a multipart part's
        // head record has none).
        let head_meta = meta.map(|m| finished(m, etag.clone(), &md5, &sums));
        let meta = head_meta
            .clone()
            .unwrap_or_else(|| finished(ObjectMeta::default(), etag, &md5, &sums));
        if !(listed && self.listing_index) {
            let stamp = client.next_stamp();
            let (cookie, tier) = client
                .put_head(staged, stamp, head_meta)
                .await
                .map_err(unavailable)?;
            return Ok(Stored {
                md5,
                size,
                meta,
                stamp,
                cookie,
                tier,
            });
        }
        // A cluster of one: the entry and the intent in one commit, then
        // the head record.
        let stamp = client.next_stamp();
        let entry = entry_of(size, &meta, stamp);
        if let Some(intent) = self
            .intend_listed(client, bucket, key, Some(&entry), stamp)
            .await?
        {
            crate::crash::crash_point("s3-object-listed");
            let (cookie, tier) = match client.put_head(staged, stamp, head_meta).await {
                Ok(put) => put,
                Err(e) => {
                    intent.failed();
                    return Err(unavailable(e));
                }
            };
            crate::crash::crash_point("s3-object-stored");
            intent.done();
            return Ok(Stored {
                md5,
                size,
                meta,
                stamp,
                cookie,
                tier,
            });
        }
        // Other replicas of the index row: the intent first, on this node,
        // then the head record and the entry at once.
        let intent = self.intend(client, bucket, &[key]).await?;
        let stamp = intent.stamp;
        let entry = entry_of(size, &meta, stamp);
        let head = client.put_head(staged, stamp, head_meta);
        let list = client.index_write_stamped(bucket, key, Some(&entry), stamp);
        let (head, list) =
            crate::crash::both(head, list, "s3-object-stored", "s3-object-listed").await;
        let (cookie, tier) = match list.and(head) {
            Ok(put) => put,
            Err(e) => {
                intent.failed();
                return Err(unavailable(e));
            }
        };
        intent.done();
        Ok(Stored {
            md5,
            size,
            meta,
            stamp,
            cookie,
            tier,
        })
    }

    /// Deletes `bucket/key` and its listing entry, under a write intent;
    /// true if a replica held the object.
    pub(crate) async fn remove(
        &self,
        client: &Arc<Client>,
        bucket: &str,
        key: &str,
    ) -> S3Result<bool> {
        // A cluster of one: the entry's removal and the intent in one
        // commit, then the tombstone.
        let stamp = client.next_stamp();
        if let Some(intent) = self.intend_listed(client, bucket, key, None, stamp).await? {
            crate::crash::crash_point("s3-object-unlisted");
            let held = match client.delete_stamped(bucket, key, stamp).await {
                Ok(held) => held,
                Err(e) => {
                    intent.failed();
                    return Err(unavailable(e));
                }
            };
            crate::crash::crash_point("s3-object-deleted");
            intent.done();
            return Ok(held);
        }
        let intent = self.intend(client, bucket, &[key]).await?;
        match self.unstore(client, bucket, key, intent.stamp).await {
            Ok(held) => {
                intent.done();
                Ok(held)
            }
            Err(e) => {
                intent.failed();
                Err(unavailable(e))
            }
        }
    }

    /// Deletes `bucket/key` and its listing entry at the same time, both
    /// with `stamp`, the stamp of the write's recorded intent (the caller
    /// resolves the intent at once if this fails).
    pub(crate) async fn unstore(
        &self,
        client: &Client,
        bucket: &str,
        key: &str,
        stamp: u64,
    ) -> Result<bool, ClientError> {
        let gone = client.delete_stamped(bucket, key, stamp);
        if !self.listing_index {
            return gone.await;
        }
        let unlist = client.index_write_stamped(bucket, key, None, stamp);
        let (gone, unlist) =
            crate::crash::both(gone, unlist, "s3-object-deleted", "s3-object-unlisted").await;
        unlist.and(gone)
    }

    /// One page of the listing index.
    pub(crate) async fn page(
        &self,
        bucket: &str,
        q: ListQuery,
    ) -> S3Result<strata_proto::ListPage> {
        let client = self.bucket(bucket).await?;
        if q.max == 0 {
            // max-keys=0: nothing, and not truncated (as S3 answers).
            return Ok(strata_proto::ListPage::default());
        }
        client.index_list(bucket, &q).await.map_err(unavailable)
    }
}

/// The owner of every bucket and object (there are no accounts; keys have
/// permissions per bucket).
fn owner() -> Owner {
    Owner {
        display_name: Some("strata".into()),
        id: Some("strata".into()),
    }
}

/// Whether a canned ACL makes a bucket public-read (Some(true)), private
/// (Some(false)); other ACLs and grants are not supported (501).
fn canned_public(acl: Option<&BucketCannedACL>, grants: bool) -> S3Result<Option<bool>> {
    if grants {
        return Err(s3_error!(
            NotImplemented,
            "only the canned ACLs private and public-read are supported"
        ));
    }
    match acl.map(|a| a.as_str()) {
        None => Ok(None),
        Some(BucketCannedACL::PRIVATE) => Ok(Some(false)),
        Some(BucketCannedACL::PUBLIC_READ) => Ok(Some(true)),
        Some(other) => Err(s3_error!(
            NotImplemented,
            "the canned ACL {other} is not supported (private and public-read are)"
        )),
    }
}

impl StrataS3 {
    /// Makes `bucket` public-read or private at the metadata service.
    async fn set_public(&self, client: &Client, bucket: &str, public: bool) -> S3Result<()> {
        let Some(token) = &self.admin_token else {
            return Err(s3_error!(
                NotImplemented,
                "public buckets need the node's STRATA_ADMIN_TOKEN"
            ));
        };
        if !client
            .set_bucket_public(bucket, public, token)
            .await
            .map_err(unavailable)?
        {
            return Err(s3_error!(NoSuchBucket));
        }
        if let Some(mut b) = self.cluster.bucket(bucket).await.ok().flatten() {
            b.public_read = public;
            self.cluster.learned(bucket, Some(b));
        }
        Ok(())
    }
}

/// The grants of a bucket, and of every object in it (objects have no
/// ACL of their own: each is as readable as its bucket): the owner's
/// FULL_CONTROL and, when the bucket is public-read, AllUsers READ.
fn grants(public: bool) -> Vec<Grant> {
    let owner = owner();
    let mut grants = vec![Grant {
        grantee: Some(Grantee {
            display_name: owner.display_name.clone(),
            email_address: None,
            id: owner.id.clone(),
            type_: Type::from_static(Type::CANONICAL_USER),
            uri: None,
        }),
        permission: Some(Permission::from_static(Permission::FULL_CONTROL)),
    }];
    if public {
        grants.push(Grant {
            grantee: Some(Grantee {
                display_name: None,
                email_address: None,
                id: None,
                type_: Type::from_static(Type::GROUP),
                uri: Some("http://acs.amazonaws.com/groups/global/AllUsers".into()),
            }),
            permission: Some(Permission::from_static(Permission::READ)),
        });
    }
    grants
}

impl StrataS3 {
    /// Whether `bucket` is public-read (as last fetched).
    async fn is_public(&self, client: &Client, bucket: &str) -> S3Result<bool> {
        Ok(self
            .buckets(client, false)
            .await?
            .get(bucket)
            .is_some_and(|b| b.public_read))
    }

    /// A canned object ACL is kept only when it says what the bucket
    /// already gives (objects have no ACL of their own): `private` in a
    /// private bucket, `public-read` in a public-read one, and the
    /// `bucket-owner-*` ACLs (there is one owner); any other is 501, never
    /// a success that leaves the object readable otherwise than asked.
    async fn object_acl_fits(&self, client: &Client, bucket: &str, acl: &str) -> S3Result<()> {
        let public = self.is_public(client, bucket).await?;
        match acl {
            "bucket-owner-full-control" | "bucket-owner-read" => Ok(()),
            "private" if !public => Ok(()),
            "public-read" if public => Ok(()),
            "private" | "public-read" => Err(s3_error!(
                NotImplemented,
                "objects have no ACL of their own: in a {} bucket, only the canned ACL {} (or bucket-owner-*) is accepted",
                if public { "public-read" } else { "private" },
                if public { "public-read" } else { "private" }
            )),
            other => Err(s3_error!(
                NotImplemented,
                "the canned object ACL {other} is not supported"
            )),
        }
    }

    /// [`StrataS3::object_acl_fits`] for the `x-amz-acl` header of a write,
    /// if it has one.
    async fn acl_header_fits(
        &self,
        client: &Client,
        bucket: &str,
        headers: &http::HeaderMap,
    ) -> S3Result<()> {
        match headers.get("x-amz-acl").and_then(|v| v.to_str().ok()) {
            Some(acl) => self.object_acl_fits(client, bucket, acl).await,
            None => Ok(()),
        }
    }
}

/// The content headers and user metadata of a GET or HEAD answer.
#[derive(Default)]
struct Shown {
    cache_control: Option<String>,
    content_disposition: Option<String>,
    content_encoding: Option<String>,
    content_language: Option<String>,
    content_type: Option<String>,
    expires: Option<Timestamp>,
    metadata: Option<s3s::dto::Metadata>,
}

impl Shown {
    fn of(meta: Option<&ObjectMeta>) -> Shown {
        let Some(m) = meta else {
            return Shown::default();
        };
        let h = |n: &str| m.headers.get(n).cloned();
        Shown {
            cache_control: h("cache-control"),
            content_disposition: h("content-disposition"),
            content_encoding: h("content-encoding"),
            content_language: h("content-language"),
            content_type: h("content-type"),
            expires: m
                .headers
                .get("expires")
                .and_then(|e| Timestamp::parse(TimestampFormat::HttpDate, e).ok()),
            metadata: (!m.user.is_empty())
                .then(|| m.user.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        }
    }
}

/// The checksums stored with an object, as a GET or HEAD with
/// `x-amz-checksum-mode: ENABLED` answers them (whole objects only).
fn checksum(meta: Option<&ObjectMeta>, mode: Option<&ChecksumMode>, algo: &str) -> Option<String> {
    if mode.map(|m| m.as_str()) != Some(ChecksumMode::ENABLED) {
        return None;
    }
    meta?
        .headers
        .get(&format!("x-amz-checksum-{algo}"))
        .cloned()
}

/// Buckets are not versioned: the only version of an object is `null`;
/// any other version id is InvalidArgument, as S3 answers for an
/// unversioned bucket.
/// A page size parameter (`max-parts`, `max-uploads`): 1,000 when absent
/// or larger (S3's cap), InvalidArgument when negative.
fn page_size(v: Option<i32>, name: &str) -> S3Result<usize> {
    match v {
        None => Ok(1000),
        Some(n) if n < 0 => Err(s3_error!(
            InvalidArgument,
            "{name} must be a non-negative integer"
        )),
        Some(n) => Ok((n as usize).min(1000)),
    }
}

fn null_version(v: Option<&str>) -> S3Result<()> {
    match v {
        None | Some("null") => Ok(()),
        Some(_) => Err(s3_error!(InvalidArgument, "Invalid version id specified")),
    }
}

/// An object's last modification in whole seconds (HTTP dates), from its
/// head record's stamp (microseconds).
fn modified_secs(stamp: u64) -> i64 {
    (stamp / 1_000_000) as i64
}

#[async_trait::async_trait]
impl S3 for StrataS3 {
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        if req.method == http::Method::POST {
            // Browser uploads (POST Object with a policy): s3s checks the
            // policy only in part, so they are refused rather than trusted.
            return Err(s3_error!(NotImplemented, "POST Object is not supported"));
        }
        meta::refuse_unsupported_write(&req.headers)?;
        let checks = Checks::from_request(&req.headers, req.trailing_headers.clone())?;
        let meta = meta::from_headers(&req.headers)?;
        let input = req.input;
        let client = self.bucket(&input.bucket).await?;
        self.acl_header_fits(&client, &input.bucket, &req.headers)
            .await?;
        if input.if_match.is_some() || input.if_none_match.is_some() {
            // Conditional writes (If-None-Match: *) need an atomic
            // compare on the replicas: not a wrong success.
            return Err(s3_error!(
                NotImplemented,
                "conditional writes are not supported"
            ));
        }
        let stored = self
            .store(
                &client,
                &input.bucket,
                &input.key,
                input.body,
                input.content_length,
                checks,
                Some(meta),
                None,
                true,
            )
            .await?;
        let sum = |a: &str| {
            stored
                .meta
                .headers
                .get(&format!("x-amz-checksum-{a}"))
                .cloned()
        };
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(ETag::Strong(stored.meta.etag.clone())),
            checksum_crc32: sum("crc32"),
            checksum_crc32c: sum("crc32c"),
            checksum_sha1: sum("sha1"),
            checksum_sha256: sum("sha256"),
            checksum_crc64nvme: sum("crc64nvme"),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        meta::refuse_unsupported_read(&req.headers)?;
        let input = req.input;
        if input.part_number.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "GET of one part is not supported"
            ));
        }
        null_version(input.version_id.as_deref())?;
        let (client, head, stamp) = self.object(&input.bucket, &input.key).await?;
        let e_tag = meta::etag(head.meta(), stamp);
        Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&e_tag, modified_secs(stamp), false)?;
        let size = head.len();
        let (range, content_range) = match &input.range {
            None => (0..size, None),
            Some(r) => {
                let r = r.check(size)?;
                let cr = format!("bytes {}-{}/{size}", r.start, r.end.saturating_sub(1));
                (r, Some(cr))
            }
        };
        let len = range.end - range.start;
        let meta = head.meta().cloned();
        let shown = Shown::of(meta.as_ref());
        let mode = input
            .checksum_mode
            .as_ref()
            .filter(|_| input.range.is_none());
        let sum = |a: &str| checksum(meta.as_ref(), mode, a);
        let out = GetObjectOutput {
            checksum_crc32: sum("crc32"),
            checksum_crc32c: sum("crc32c"),
            checksum_sha1: sum("sha1"),
            checksum_sha256: sum("sha256"),
            checksum_crc64nvme: sum("crc64nvme"),
            e_tag: Some(e_tag),
            content_length: Some(len as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(stamp / 1000)),
            cache_control: input.response_cache_control.or(shown.cache_control),
            content_disposition: input
                .response_content_disposition
                .or(shown.content_disposition),
            content_encoding: input.response_content_encoding.or(shown.content_encoding),
            content_language: input.response_content_language.or(shown.content_language),
            content_type: input.response_content_type.or(shown.content_type),
            expires: input.response_expires.or(shown.expires),
            metadata: shown.metadata,
            ..Default::default()
        };
        let body = client
            .read_range(&input.bucket, &input.key, head, range.start, range.end)
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
            ..out
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        meta::refuse_unsupported_read(&req.headers)?;
        let input = req.input;
        if input.part_number.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "HEAD of one part is not supported"
            ));
        }
        null_version(input.version_id.as_deref())?;
        let (_, head, stamp) = self.object_info(&input.bucket, &input.key).await?;
        let e_tag = meta::etag(head.meta.as_ref(), stamp);
        Conditions {
            if_match: input.if_match.as_ref(),
            if_none_match: input.if_none_match.as_ref(),
            if_modified_since: input.if_modified_since.as_ref(),
            if_unmodified_since: input.if_unmodified_since.as_ref(),
        }
        .check(&e_tag, modified_secs(stamp), false)?;
        let size = head.len;
        let (len, content_range) = match &input.range {
            None => (size, None),
            Some(r) => {
                let r = r.check(size)?;
                let cr = format!("bytes {}-{}/{size}", r.start, r.end.saturating_sub(1));
                (r.end - r.start, Some(cr))
            }
        };
        let meta = head.meta.as_ref();
        let shown = Shown::of(meta);
        let mode = input
            .checksum_mode
            .as_ref()
            .filter(|_| input.range.is_none());
        let sum = |a: &str| checksum(meta, mode, a);
        Ok(S3Response::new(HeadObjectOutput {
            checksum_crc32: sum("crc32"),
            checksum_crc32c: sum("crc32c"),
            checksum_sha1: sum("sha1"),
            checksum_sha256: sum("sha256"),
            checksum_crc64nvme: sum("crc64nvme"),
            e_tag: Some(e_tag),
            content_length: Some(len as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(stamp / 1000)),
            cache_control: input.response_cache_control.or(shown.cache_control),
            content_disposition: input
                .response_content_disposition
                .or(shown.content_disposition),
            content_encoding: input.response_content_encoding.or(shown.content_encoding),
            content_language: input.response_content_language.or(shown.content_language),
            content_type: input.response_content_type.or(shown.content_type),
            expires: input.response_expires.or(shown.expires),
            metadata: shown.metadata,
            ..Default::default()
        }))
    }

    async fn copy_object(
        &self,
        req: S3Request<CopyObjectInput>,
    ) -> S3Result<S3Response<CopyObjectOutput>> {
        meta::refuse_unsupported_write(&req.headers)?;
        let replace_meta = meta::from_headers(&req.headers)?;
        let input = req.input;
        let CopySource::Bucket {
            bucket: src_bucket,
            key: src_key,
            version_id,
        } = &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "copy sources are bucket/key"));
        };
        null_version(version_id.as_deref())?;
        let (client, head, stamp) = self.object(src_bucket, src_key).await?;
        let src_etag = meta::etag(head.meta(), stamp);
        Conditions {
            if_match: input.copy_source_if_match.as_ref(),
            if_none_match: input.copy_source_if_none_match.as_ref(),
            if_modified_since: input.copy_source_if_modified_since.as_ref(),
            if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
        }
        .check(&src_etag, modified_secs(stamp), true)?;
        self.bucket(&input.bucket).await?;
        self.acl_header_fits(&client, &input.bucket, &req.headers)
            .await?;
        let replace = input
            .metadata_directive
            .as_ref()
            .is_some_and(|d| d.as_str() == MetadataDirective::REPLACE);
        let meta = if replace {
            replace_meta
        } else {
            if **src_bucket == *input.bucket && **src_key == *input.key {
                return Err(s3_error!(
                    InvalidRequest,
                    "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."
                ));
            }
            // COPY keeps the source's content headers and user metadata,
            // not its checksums (the copy's are not verified).
            let mut m = head.meta().cloned().unwrap_or_default();
            m.headers.retain(|k, _| !k.starts_with("x-amz-checksum-"));
            m
        };
        let size = head.len();
        let body = client
            .read_range(src_bucket, src_key, head, 0, size)
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
        let stored = self
            .store(
                &client,
                &input.bucket,
                &input.key,
                Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
                Some(size as i64),
                Checks::none(),
                Some(meta),
                None,
                true,
            )
            .await?;
        Ok(S3Response::new(CopyObjectOutput {
            copy_object_result: Some(CopyObjectResult {
                e_tag: Some(ETag::Strong(stored.meta.etag)),
                last_modified: Some(timestamp(stored.stamp / 1000)),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn delete_objects(
        &self,
        req: S3Request<DeleteObjectsInput>,
    ) -> S3Result<S3Response<DeleteObjectsOutput>> {
        let input = req.input;
        let objects = input.delete.objects;
        if objects.len() > 1000 {
            return Err(s3_error!(
                MalformedXML,
                "at most 1000 keys may be deleted at once"
            ));
        }
        let client = self.bucket(&input.bucket).await?;
        let quiet = input.delete.quiet.unwrap_or(false);
        let (mut deleted, mut errors) = (Vec::new(), Vec::new());
        let keys: Vec<&str> = objects.iter().map(|o| o.key.as_str()).collect();
        let intent = self.intend(&client, &input.bucket, &keys).await?;
        let mut work = Vec::new();
        for o in objects {
            let refused = if o.version_id.as_deref().is_some_and(|v| v != "null") {
                Some(("InvalidArgument", "Invalid version id specified"))
            } else if o.e_tag.is_some() || o.last_modified_time.is_some() || o.size.is_some() {
                Some(("NotImplemented", "conditional deletes are not supported"))
            } else {
                None
            };
            if let Some((code, message)) = refused {
                errors.push(s3s::dto::Error {
                    code: Some(code.into()),
                    key: Some(o.key),
                    message: Some(message.into()),
                    version_id: o.version_id,
                });
                continue;
            }
            work.push(o.key);
        }
        // The keys are deleted a few at a time, each with its entry.
        let stamp = intent.stamp;
        let results: Vec<(String, Result<bool, ClientError>)> = stream::iter(work)
            .map(|key| {
                let (client, bucket) = (&client, &input.bucket);
                async move {
                    let r = self.unstore(client, bucket, &key, stamp).await;
                    (key, r)
                }
            })
            .buffered(DELETE_PARALLELISM)
            .collect()
            .await;
        let mut failed = false;
        for (key, res) in results {
            failed |= res.is_err();
            match res {
                Ok(_) => {
                    if !quiet {
                        deleted.push(DeletedObject {
                            key: Some(key),
                            ..Default::default()
                        });
                    }
                }
                Err(e) => errors.push(s3s::dto::Error {
                    code: Some(
                        if matches!(e, ClientError::BadName(_)) {
                            "InvalidArgument"
                        } else {
                            "InternalError"
                        }
                        .into(),
                    ),
                    key: Some(key),
                    message: Some(e.to_string()),
                    version_id: None,
                }),
            }
        }
        if failed {
            intent.failed();
        } else {
            intent.done();
        }
        Ok(S3Response::new(DeleteObjectsOutput {
            deleted: Some(deleted),
            errors: (!errors.is_empty()).then_some(errors),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        null_version(input.version_id.as_deref())?;
        if input.if_match.is_some()
            || input.if_match_last_modified_time.is_some()
            || input.if_match_size.is_some()
        {
            return Err(s3_error!(
                NotImplemented,
                "conditional deletes are not supported"
            ));
        }
        let client = self.bucket(&input.bucket).await?;
        // S3 answers a delete of an absent key with success too.
        self.remove(&client, &input.bucket, &input.key).await?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let client = self.client();
        let input = req.input;
        let public = canned_public(
            input.acl.as_ref(),
            input.grant_full_control.is_some()
                || input.grant_read.is_some()
                || input.grant_read_acp.is_some()
                || input.grant_write.is_some()
                || input.grant_write_acp.is_some(),
        )?;
        let asked = input
            .create_bucket_configuration
            .as_ref()
            .and_then(|c| c.location_constraint.as_ref())
            .map(|l| l.as_str().to_string())
            .filter(|l| !l.is_empty());
        if let Some(l) = asked.filter(|l| *l != self.region) {
            return Err(s3_error!(
                IllegalLocationConstraintException,
                "The {l} location constraint is incompatible for the region specific endpoint this request was sent to (region {})",
                self.region
            ));
        }
        let name = input.bucket;
        match client.set_bucket(&name, true).await {
            Ok(true) => {
                self.cluster.learned(
                    &name,
                    Some(BucketRecord {
                        created_ms: now_ms(),
                        public_read: false,
                    }),
                );
                if public == Some(true) {
                    self.set_public(&client, &name, true).await?;
                }
                Ok(S3Response::new(CreateBucketOutput {
                    location: Some(format!("/{name}")),
                }))
            }
            Ok(false) => Err(s3_error!(BucketAlreadyOwnedByYou)),
            Err(ClientError::BadName(_)) => Err(s3_error!(InvalidBucketName)),
            Err(e) => Err(unavailable(e)),
        }
    }

    async fn delete_bucket(
        &self,
        req: S3Request<DeleteBucketInput>,
    ) -> S3Result<S3Response<DeleteBucketOutput>> {
        let name = req.input.bucket;
        let page = self
            .page(
                &name,
                ListQuery {
                    max: 1,
                    ..ListQuery::default()
                },
            )
            .await?;
        if !page.contents.is_empty() {
            return Err(s3_error!(BucketNotEmpty));
        }
        let client = self.client();
        // Unfinished uploads go with the bucket (their parts are hidden
        // objects of it); a bucket made again under the name starts bare.
        self.drop_all_uploads(&client, &name).await?;
        if !client.set_bucket(&name, false).await.map_err(unavailable)? {
            return Err(s3_error!(NoSuchBucket));
        }
        self.cluster.learned(&name, None);
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn put_bucket_acl(
        &self,
        req: S3Request<PutBucketAclInput>,
    ) -> S3Result<S3Response<PutBucketAclOutput>> {
        let input = req.input;
        let client = self.bucket(&input.bucket).await?;
        let public = canned_public(
            input.acl.as_ref(),
            input.access_control_policy.is_some()
                || input.grant_full_control.is_some()
                || input.grant_read.is_some()
                || input.grant_read_acp.is_some()
                || input.grant_write.is_some()
                || input.grant_write_acp.is_some(),
        )?
        .ok_or_else(|| {
            s3_error!(
                MissingSecurityHeader,
                "give x-amz-acl: private or public-read"
            )
        })?;
        self.set_public(&client, &input.bucket, public).await?;
        Ok(S3Response::new(PutBucketAclOutput::default()))
    }

    async fn get_bucket_acl(
        &self,
        req: S3Request<GetBucketAclInput>,
    ) -> S3Result<S3Response<GetBucketAclOutput>> {
        let name = req.input.bucket;
        let client = self.bucket(&name).await?;
        let public = self
            .buckets(&client, false)
            .await?
            .get(&name)
            .is_some_and(|b| b.public_read);
        Ok(S3Response::new(GetBucketAclOutput {
            grants: Some(grants(public)),
            owner: Some(owner()),
        }))
    }

    /// An object's ACL is its bucket's (objects have no ACL of their own).
    async fn get_object_acl(
        &self,
        req: S3Request<GetObjectAclInput>,
    ) -> S3Result<S3Response<GetObjectAclOutput>> {
        let input = req.input;
        null_version(input.version_id.as_deref())?;
        let (client, _, _) = self.object_info(&input.bucket, &input.key).await?;
        let public = self.is_public(&client, &input.bucket).await?;
        Ok(S3Response::new(GetObjectAclOutput {
            grants: Some(grants(public)),
            owner: Some(owner()),
            request_charged: None,
        }))
    }

    /// Accepts a canned ACL that says what the object's bucket already
    /// gives ([`StrataS3::object_acl_fits`]); grants and other ACLs are
    /// 501.
    async fn put_object_acl(
        &self,
        req: S3Request<PutObjectAclInput>,
    ) -> S3Result<S3Response<PutObjectAclOutput>> {
        let input = req.input;
        null_version(input.version_id.as_deref())?;
        if input.access_control_policy.is_some()
            || input.grant_full_control.is_some()
            || input.grant_read.is_some()
            || input.grant_read_acp.is_some()
            || input.grant_write.is_some()
            || input.grant_write_acp.is_some()
        {
            return Err(s3_error!(
                NotImplemented,
                "object ACL grants are not supported (objects are readable as their bucket is)"
            ));
        }
        let (client, _, _) = self.object_info(&input.bucket, &input.key).await?;
        let acl = input
            .acl
            .ok_or_else(|| s3_error!(MissingSecurityHeader, "give x-amz-acl (a canned ACL)"))?;
        self.object_acl_fits(&client, &input.bucket, acl.as_str())
            .await?;
        Ok(S3Response::new(PutObjectAclOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket(&req.input.bucket).await?;
        // Every bucket is in the server's region; S3 answers its default
        // region as no constraint.
        Ok(S3Response::new(GetBucketLocationOutput {
            location_constraint: (self.region != DEFAULT_REGION)
                .then(|| s3s::dto::BucketLocationConstraint::from(self.region.clone())),
        }))
    }

    async fn list_buckets(
        &self,
        req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let input = req.input;
        let max = match input.max_buckets {
            None => usize::MAX,
            Some(n) if (1..=10_000).contains(&n) => n as usize,
            Some(_) => {
                return Err(s3_error!(
                    InvalidArgument,
                    "max-buckets must be between 1 and 10000"
                ))
            }
        };
        let after = match &input.continuation_token {
            Some(t) => list::decode_token(t)?,
            None => String::new(),
        };
        let prefix = input.prefix.clone().unwrap_or_default();
        // A key sees the buckets it has a permission on; the root key all.
        let visible = match (&self.keys, &req.credentials) {
            (Some(keys), Some(c)) => keys.visible_buckets(&c.access_key).await?,
            _ => None,
        };
        let client = self.client();
        let mut buckets: Vec<Bucket> = self
            .buckets(&client, true)
            .await?
            .iter()
            .filter(|(name, _)| name.starts_with(&prefix) && **name > after)
            .filter(|(name, _)| visible.as_ref().is_none_or(|v| v.contains(*name)))
            .take(max.saturating_add(1))
            .map(|(name, b)| Bucket {
                name: Some(name.clone()),
                creation_date: Some(timestamp(b.created_ms)),
                bucket_region: None,
            })
            .collect();
        // One more than asked tells whether another page follows.
        let next = (buckets.len() > max).then(|| {
            buckets.truncate(max);
            buckets
                .last()
                .and_then(|b| b.name.as_deref())
                .map(list::encode_token)
                .unwrap_or_default()
        });
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            continuation_token: next,
            owner: Some(owner()),
            prefix: input.prefix,
        }))
    }

    async fn list_objects_v2(
        &self,
        req: S3Request<ListObjectsV2Input>,
    ) -> S3Result<S3Response<ListObjectsV2Output>> {
        let input = req.input;
        let after = match &input.continuation_token {
            Some(t) => Some(list::decode_token(t)?),
            None => None,
        };
        let q = list::query(
            &input.prefix,
            &input.delimiter,
            input.max_keys,
            [after.as_deref(), input.start_after.as_deref()],
        )?;
        let max = q.max;
        let page = self.page(&input.bucket, q).await?;
        let url = list::url_encoding(&input.encoding_type)?;
        let (mut contents, prefixes) = list::entries(&page, url);
        if input.fetch_owner == Some(true) {
            for o in &mut contents {
                o.owner = Some(owner());
            }
        }
        let next = page
            .truncated
            .then(|| page.last.as_deref().map(list::encode_token))
            .flatten();
        Ok(S3Response::new(ListObjectsV2Output {
            name: Some(input.bucket),
            key_count: Some((contents.len() + prefixes.len()) as i32),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            is_truncated: Some(page.truncated),
            next_continuation_token: next,
            continuation_token: input.continuation_token,
            max_keys: Some(max as i32),
            prefix: Some(list::enc(url, input.prefix.as_deref().unwrap_or(""))),
            delimiter: input
                .delimiter
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(|d| list::enc(url, d)),
            start_after: input.start_after.as_deref().map(|s| list::enc(url, s)),
            encoding_type: input.encoding_type,
            request_charged: None,
        }))
    }

    async fn list_objects(
        &self,
        req: S3Request<ListObjectsInput>,
    ) -> S3Result<S3Response<ListObjectsOutput>> {
        let input = req.input;
        let q = list::query(
            &input.prefix,
            &input.delimiter,
            input.max_keys,
            [input.marker.as_deref(), None],
        )?;
        let max = q.max;
        let page = self.page(&input.bucket, q).await?;
        let url = list::url_encoding(&input.encoding_type)?;
        let (contents, prefixes) = list::entries(&page, url);
        let next = page
            .truncated
            .then(|| page.last.as_deref().map(|l| list::enc(url, l)))
            .flatten();
        Ok(S3Response::new(ListObjectsOutput {
            name: Some(input.bucket),
            contents: Some(contents),
            common_prefixes: Some(prefixes),
            is_truncated: Some(page.truncated),
            next_marker: next,
            marker: Some(list::enc(url, input.marker.as_deref().unwrap_or(""))),
            max_keys: Some(max as i32),
            // ListObjects (v1) answers its Prefix as sent, even with
            // encoding-type=url (S3 encodes only the delimiter, markers,
            // keys and common prefixes there, the fields botocore decodes).
            prefix: Some(input.prefix.unwrap_or_default()),
            delimiter: input
                .delimiter
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(|d| list::enc(url, d)),
            encoding_type: input.encoding_type,
            request_charged: None,
        }))
    }

    /// Buckets are not versioned: every object is its one version, whose
    /// id is `null` (as S3 lists objects of an unversioned bucket).
    async fn list_object_versions(
        &self,
        req: S3Request<ListObjectVersionsInput>,
    ) -> S3Result<S3Response<ListObjectVersionsOutput>> {
        let input = req.input;
        if input
            .version_id_marker
            .as_deref()
            .is_some_and(|v| !v.is_empty() && v != "null")
        {
            return Err(s3_error!(InvalidArgument, "no such version id marker"));
        }
        let q = list::query(
            &input.prefix,
            &input.delimiter,
            input.max_keys,
            [input.key_marker.as_deref(), None],
        )?;
        let max = q.max;
        let page = self.page(&input.bucket, q).await?;
        let url = list::url_encoding(&input.encoding_type)?;
        let (contents, prefixes) = list::entries(&page, url);
        let versions = contents
            .into_iter()
            .map(|o| ObjectVersion {
                e_tag: o.e_tag,
                is_latest: Some(true),
                key: o.key,
                last_modified: o.last_modified,
                size: o.size,
                storage_class: Some(ObjectVersionStorageClass::from_static(
                    ObjectVersionStorageClass::STANDARD,
                )),
                version_id: Some("null".into()),
                ..Default::default()
            })
            .collect();
        let next = page
            .truncated
            .then(|| page.last.as_deref().map(|l| list::enc(url, l)))
            .flatten();
        Ok(S3Response::new(ListObjectVersionsOutput {
            name: Some(input.bucket),
            versions: Some(versions),
            common_prefixes: Some(prefixes),
            is_truncated: Some(page.truncated),
            next_version_id_marker: next.as_ref().map(|_| "null".into()),
            next_key_marker: next,
            key_marker: input.key_marker.as_deref().map(|m| list::enc(url, m)),
            version_id_marker: input.version_id_marker,
            max_keys: Some(max as i32),
            prefix: Some(list::enc(url, input.prefix.as_deref().unwrap_or(""))),
            delimiter: input
                .delimiter
                .as_deref()
                .filter(|d| !d.is_empty())
                .map(|d| list::enc(url, d)),
            encoding_type: input.encoding_type,
            ..Default::default()
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        meta::refuse_unsupported_write(&req.headers)?;
        let meta = meta::from_headers(&req.headers)?;
        let input = req.input;
        let client = self.bucket(&input.bucket).await?;
        self.acl_header_fits(&client, &input.bucket, &req.headers)
            .await?;
        let upload = self.create_upload(&input.bucket, &input.key, meta).await?;
        Ok(S3Response::new(CreateMultipartUploadOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(upload),
            ..Default::default()
        }))
    }

    async fn upload_part(
        &self,
        req: S3Request<UploadPartInput>,
    ) -> S3Result<S3Response<UploadPartOutput>> {
        meta::refuse_unsupported_read(&req.headers)?;
        let checks = Checks::from_request(&req.headers, req.trailing_headers.clone())?;
        let input = req.input;
        let etag = self.upload_part(input, checks).await?;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(etag),
            ..Default::default()
        }))
    }

    async fn upload_part_copy(
        &self,
        req: S3Request<UploadPartCopyInput>,
    ) -> S3Result<S3Response<UploadPartCopyOutput>> {
        meta::refuse_unsupported_write(&req.headers)?;
        let input = req.input;
        let CopySource::Bucket {
            bucket: src_bucket,
            key: src_key,
            version_id,
        } = &input.copy_source
        else {
            return Err(s3_error!(NotImplemented, "copy sources are bucket/key"));
        };
        null_version(version_id.as_deref())?;
        let etag = self
            .upload_part_copy(
                &input.bucket,
                &input.key,
                &input.upload_id,
                input.part_number,
                (src_bucket, src_key),
                input.copy_source_range.as_deref(),
                Conditions {
                    if_match: input.copy_source_if_match.as_ref(),
                    if_none_match: input.copy_source_if_none_match.as_ref(),
                    if_modified_since: input.copy_source_if_modified_since.as_ref(),
                    if_unmodified_since: input.copy_source_if_unmodified_since.as_ref(),
                },
            )
            .await?;
        Ok(S3Response::new(UploadPartCopyOutput {
            copy_part_result: Some(CopyPartResult {
                e_tag: Some(etag),
                last_modified: Some(timestamp(now_ms())),
                ..Default::default()
            }),
            ..Default::default()
        }))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        let max = page_size(input.max_parts, "max-parts")?;
        let after = input.part_number_marker.unwrap_or(0);
        let (parts, truncated) = self
            .list_parts(&input.bucket, &input.key, &input.upload_id, after, max)
            .await?;
        let next = parts.last().and_then(|p| p.part_number);
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            parts: Some(parts),
            is_truncated: Some(truncated),
            max_parts: Some(max as i32),
            part_number_marker: input.part_number_marker,
            next_part_number_marker: if truncated { next } else { None },
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
        if input.if_match.is_some() || input.if_none_match.is_some() {
            return Err(s3_error!(
                NotImplemented,
                "conditional writes are not supported"
            ));
        }
        let wanted: Vec<(i32, Option<ETag>)> = input
            .multipart_upload
            .and_then(|m| m.parts)
            .unwrap_or_default()
            .into_iter()
            .map(|p| (p.part_number.unwrap_or(0), p.e_tag))
            .collect();
        let etag = self
            .complete_upload(&input.bucket, &input.key, &input.upload_id, wanted)
            .await?;
        Ok(S3Response::new(CompleteMultipartUploadOutput {
            bucket: Some(input.bucket.clone()),
            key: Some(input.key.clone()),
            e_tag: Some(etag),
            location: Some(format!("/{}/{}", input.bucket, input.key)),
            ..Default::default()
        }))
    }

    async fn abort_multipart_upload(
        &self,
        req: S3Request<AbortMultipartUploadInput>,
    ) -> S3Result<S3Response<AbortMultipartUploadOutput>> {
        let input = req.input;
        self.abort_upload(&input.bucket, &input.key, &input.upload_id)
            .await?;
        Ok(S3Response::new(AbortMultipartUploadOutput::default()))
    }

    async fn list_multipart_uploads(
        &self,
        req: S3Request<ListMultipartUploadsInput>,
    ) -> S3Result<S3Response<ListMultipartUploadsOutput>> {
        let input = req.input;
        let q = crate::upload_page::UploadQuery {
            prefix: input.prefix.clone().unwrap_or_default(),
            delimiter: input.delimiter.clone(),
            key_marker: input.key_marker.clone(),
            upload_id_marker: input.upload_id_marker.clone(),
            max: page_size(input.max_uploads, "max-uploads")?,
        };
        let page = self.list_uploads(&input.bucket, &q).await?;
        let (next_key, next_id) = page.next.unzip();
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            delimiter: input.delimiter,
            key_marker: input.key_marker,
            upload_id_marker: input.upload_id_marker,
            max_uploads: Some(q.max as i32),
            uploads: Some(
                page.uploads
                    .into_iter()
                    .map(|u| MultipartUpload {
                        key: Some(u.key),
                        upload_id: Some(u.id),
                        initiated: Some(timestamp(u.initiated_ms)),
                        ..Default::default()
                    })
                    .collect(),
            ),
            common_prefixes: (!page.prefixes.is_empty()).then(|| {
                page.prefixes
                    .into_iter()
                    .map(|p| CommonPrefix { prefix: Some(p) })
                    .collect()
            }),
            is_truncated: Some(page.truncated),
            next_key_marker: next_key,
            next_upload_id_marker: next_id.filter(|id| !id.is_empty()),
            ..Default::default()
        }))
    }
}
