//! The S3 operations, each mapped onto one call of the cluster coordinator.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine;
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use md5::{Digest, Md5};
use s3s::dto::{
    AbortMultipartUploadInput, AbortMultipartUploadOutput, Bucket, CompleteMultipartUploadInput,
    CompleteMultipartUploadOutput, CreateBucketInput, CreateBucketOutput,
    CreateMultipartUploadInput, CreateMultipartUploadOutput, DeleteBucketInput, DeleteBucketOutput,
    DeleteObjectInput, DeleteObjectOutput, ETag, GetBucketLocationInput, GetBucketLocationOutput,
    GetObjectInput, GetObjectOutput, HeadBucketInput, HeadBucketOutput, HeadObjectInput,
    HeadObjectOutput, ListBucketsInput, ListBucketsOutput, ListMultipartUploadsInput,
    ListMultipartUploadsOutput, ListObjectsInput, ListObjectsOutput, ListObjectsV2Input,
    ListObjectsV2Output, ListPartsInput, ListPartsOutput, PutObjectInput, PutObjectOutput,
    StreamingBlob, Timestamp, UploadPartInput, UploadPartOutput,
};
use std::collections::BTreeMap;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use strata_client::protocol::{IndexEntry, ListQuery};

use crate::list;
use s3s::{s3_error, S3Request, S3Response, S3Result, S3};
use strata_client::{Client, ClientError};

use crate::cluster::{unavailable, Cluster};

/// The S3 service of one node: a coordinator into the cluster whose
/// metadata service is `meta`.
pub struct StrataS3 {
    cluster: Arc<Cluster>,
    max_object_size: u64,
    /// The cluster's buckets as last fetched from the metadata service, and
    /// when: a request for a bucket not in it, or after [`BUCKETS_TTL`],
    /// fetches them again (no key-value read on the GET path).
    buckets: Mutex<Option<(Instant, Buckets)>>,
}

type Buckets = BTreeMap<String, strata_client::BucketRecord>;

/// Where a stored body's MD5 and length land once it has ended.
type Hashed = Arc<Mutex<Option<(Vec<u8>, u64)>>>;

/// How long a node trusts its copy of the bucket list.
const BUCKETS_TTL: Duration = Duration::from_secs(1);

pub(crate) fn timestamp(ms: u64) -> Timestamp {
    Timestamp::from(UNIX_EPOCH + Duration::from_millis(ms))
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl StrataS3 {
    /// A service into `cluster` accepting objects of at most
    /// `max_object_size` bytes.
    pub fn new(cluster: Arc<Cluster>, max_object_size: u64) -> StrataS3 {
        StrataS3 {
            cluster,
            max_object_size,
            buckets: Mutex::new(None),
        }
    }

    async fn client(&self) -> S3Result<Arc<Client>> {
        self.cluster.client().await
    }

    /// The cluster's buckets, fetched again if `fresh` or the copy is old.
    async fn buckets(&self, client: &Client, fresh: bool) -> S3Result<Buckets> {
        if !fresh {
            if let Ok(g) = self.buckets.lock() {
                if let Some((at, b)) = g.as_ref() {
                    if at.elapsed() < BUCKETS_TTL {
                        return Ok(b.clone());
                    }
                }
            }
        }
        let b = client.buckets().await.map_err(unavailable)?;
        if let Ok(mut g) = self.buckets.lock() {
            *g = Some((Instant::now(), b.clone()));
        }
        Ok(b)
    }

    /// The client, once `bucket` is known to exist (else NoSuchBucket).
    pub(crate) async fn bucket(&self, bucket: &str) -> S3Result<Arc<Client>> {
        let client = self.client().await?;
        if self.buckets(&client, false).await?.contains_key(bucket)
            || self.buckets(&client, true).await?.contains_key(bucket)
        {
            return Ok(client);
        }
        Err(s3_error!(NoSuchBucket))
    }

    /// The client and an object's head record and stamp (NoSuchBucket,
    /// NoSuchKey): what GET and HEAD read, the head record only, never the
    /// listing index.
    async fn object(
        &self,
        bucket: &str,
        key: &str,
    ) -> S3Result<(Arc<Client>, strata_client::protocol::Head, u64)> {
        let client = self.bucket(bucket).await?;
        let (head, stamp) = client
            .head_stamped(bucket, key)
            .await
            .map_err(unavailable)?
            .ok_or_else(|| s3_error!(NoSuchKey))?;
        Ok((client, head, stamp))
    }

    /// Stores `body` as `bucket/key` through the coordinator, hashing it on
    /// the way (MD5, checked against `content_md5` when given) and bounding
    /// it by the object size limit; returns its MD5 and size. Nothing
    /// becomes visible when the body fails: the stream ends in an error
    /// before the object's last record.
    pub(crate) async fn store(
        &self,
        client: &Client,
        bucket: &str,
        key: &str,
        body: Option<StreamingBlob>,
        content_length: Option<i64>,
        content_md5: Option<&String>,
    ) -> S3Result<(Vec<u8>, u64)> {
        if let Some(n) = content_length {
            if n as u64 > self.max_object_size {
                return Err(s3_error!(
                    EntityTooLarge,
                    "objects are limited to {} bytes",
                    self.max_object_size
                ));
            }
        }
        let expected = match content_md5 {
            None => None,
            Some(b64) => Some(
                base64::engine::general_purpose::STANDARD
                    .decode(b64)
                    .map_err(|_| s3_error!(InvalidDigest, "Content-MD5 is not base64"))?,
            ),
        };
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
        let (f2, d2) = (fault.clone(), digest.clone());
        let checked = stream::unfold(
            (body, Md5::new(), 0u64, false),
            move |(mut body, mut md5, seen, done)| {
                let (fault, digest, expected) = (f2.clone(), d2.clone(), expected.clone());
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
                        None => {
                            let d = md5.finalize().to_vec();
                            if expected.as_ref().is_some_and(|e| *e != d) {
                                let m = fail(s3_error!(
                                    BadDigest,
                                    "The Content-MD5 you specified did not match what we received."
                                ));
                                return Some((Err(m), (body, Md5::new(), seen, true)));
                            }
                            if let Ok(mut g) = digest.lock() {
                                *g = Some((d, seen));
                            }
                            None
                        }
                        Some(Err(e)) => {
                            let m = fail(s3_error!(IncompleteBody, "reading the body: {e}"));
                            Some((Err(m), (body, md5, seen, true)))
                        }
                        Some(Ok(chunk)) => {
                            let seen = seen + chunk.len() as u64;
                            if seen > max {
                                let m = fail(s3_error!(
                                    EntityTooLarge,
                                    "objects are limited to {max} bytes"
                                ));
                                return Some((Err(m), (body, md5, seen, true)));
                            }
                            md5.update(&chunk);
                            Some((Ok::<Bytes, String>(chunk), (body, md5, seen, false)))
                        }
                    }
                }
            },
        );
        let put = client.put_stream(bucket, key, checked).await;
        if let Some(e) = fault.lock().ok().and_then(|mut f| f.take()) {
            return Err(e);
        }
        put.map_err(unavailable)?;
        let (d, size) = digest
            .lock()
            .ok()
            .and_then(|mut d| d.take())
            .unwrap_or_default();
        Ok((d, size))
    }

    /// One page of the listing index.
    pub(crate) async fn page(
        &self,
        bucket: &str,
        q: ListQuery,
    ) -> S3Result<strata_client::protocol::ListPage> {
        let client = self.bucket(bucket).await?;
        client.index_list(bucket, &q).await.map_err(unavailable)
    }
}

/// The ETag S3 gives a single PUT: the hex MD5 of its bytes, quoted.
fn md5_etag(digest: &[u8]) -> ETag {
    ETag::Strong(hex::encode(digest))
}

/// The ETag of GET and HEAD until the MD5 is stored with the object
/// (docs/s3-compatibility.md): the object's random cookie and write stamp,
/// which change with every write, with a `-` so that clients do not take
/// it for an MD5 of the bytes (as with multipart ETags).
fn version_etag(head: &strata_client::protocol::Head, stamp: u64) -> ETag {
    ETag::Strong(format!("{:08x}{stamp:016x}-1", head.cookie()))
}

#[async_trait::async_trait]
impl S3 for StrataS3 {
    async fn put_object(
        &self,
        req: S3Request<PutObjectInput>,
    ) -> S3Result<S3Response<PutObjectOutput>> {
        let input = req.input;
        let client = self.bucket(&input.bucket).await?;
        let (d, size) = self
            .store(
                &client,
                &input.bucket,
                &input.key,
                input.body,
                input.content_length,
                input.content_md5.as_ref(),
            )
            .await?;
        // Listed before it is acknowledged (docs/placement.md).
        let entry = IndexEntry {
            size,
            etag: hex::encode(&d),
            modified_ms: now_ms(),
        };
        client
            .index_write(&input.bucket, &input.key, Some(&entry))
            .await
            .map_err(unavailable)?;
        Ok(S3Response::new(PutObjectOutput {
            e_tag: Some(md5_etag(&d)),
            ..Default::default()
        }))
    }

    async fn get_object(
        &self,
        req: S3Request<GetObjectInput>,
    ) -> S3Result<S3Response<GetObjectOutput>> {
        let input = req.input;
        let (client, head, stamp) = self.object(&input.bucket, &input.key).await?;
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
        let e_tag = Some(version_etag(&head, stamp));
        let body = client
            .read_range(&input.bucket, &input.key, head, range.start, range.end)
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
        Ok(S3Response::new(GetObjectOutput {
            body: Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
            e_tag,
            content_length: Some(len as i64),
            content_range,
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(stamp / 1000)),
            ..Default::default()
        }))
    }

    async fn head_object(
        &self,
        req: S3Request<HeadObjectInput>,
    ) -> S3Result<S3Response<HeadObjectOutput>> {
        let input = req.input;
        let (_, head, stamp) = self.object(&input.bucket, &input.key).await?;
        Ok(S3Response::new(HeadObjectOutput {
            e_tag: Some(version_etag(&head, stamp)),
            content_length: Some(head.len() as i64),
            accept_ranges: Some("bytes".into()),
            last_modified: Some(timestamp(stamp / 1000)),
            ..Default::default()
        }))
    }

    async fn delete_object(
        &self,
        req: S3Request<DeleteObjectInput>,
    ) -> S3Result<S3Response<DeleteObjectOutput>> {
        let input = req.input;
        let client = self.bucket(&input.bucket).await?;
        // S3 answers a delete of an absent key with success too.
        client
            .delete(&input.bucket, &input.key)
            .await
            .map_err(unavailable)?;
        client
            .index_write(&input.bucket, &input.key, None)
            .await
            .map_err(unavailable)?;
        Ok(S3Response::new(DeleteObjectOutput::default()))
    }

    async fn create_bucket(
        &self,
        req: S3Request<CreateBucketInput>,
    ) -> S3Result<S3Response<CreateBucketOutput>> {
        let client = self.client().await?;
        let name = req.input.bucket;
        match client.set_bucket(&name, true).await {
            Ok(true) => {
                let _ = self.buckets(&client, true).await;
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
        let client = self.client().await?;
        if !client.set_bucket(&name, false).await.map_err(unavailable)? {
            return Err(s3_error!(NoSuchBucket));
        }
        let _ = self.buckets(&client, true).await;
        Ok(S3Response::new(DeleteBucketOutput::default()))
    }

    async fn head_bucket(
        &self,
        req: S3Request<HeadBucketInput>,
    ) -> S3Result<S3Response<HeadBucketOutput>> {
        self.bucket(&req.input.bucket).await?;
        Ok(S3Response::new(HeadBucketOutput::default()))
    }

    async fn get_bucket_location(
        &self,
        req: S3Request<GetBucketLocationInput>,
    ) -> S3Result<S3Response<GetBucketLocationOutput>> {
        self.bucket(&req.input.bucket).await?;
        Ok(S3Response::new(GetBucketLocationOutput::default()))
    }

    async fn list_buckets(
        &self,
        _req: S3Request<ListBucketsInput>,
    ) -> S3Result<S3Response<ListBucketsOutput>> {
        let client = self.client().await?;
        let buckets = self
            .buckets(&client, true)
            .await?
            .into_iter()
            .map(|(name, b)| Bucket {
                name: Some(name),
                creation_date: Some(timestamp(b.created_ms)),
                bucket_region: None,
            })
            .collect();
        Ok(S3Response::new(ListBucketsOutput {
            buckets: Some(buckets),
            ..Default::default()
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
        let (contents, prefixes) = list::entries(&page, url);
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
            delimiter: input.delimiter.as_deref().map(|d| list::enc(url, d)),
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
            marker: input.marker.as_deref().map(|m| list::enc(url, m)),
            max_keys: Some(max as i32),
            prefix: Some(list::enc(url, input.prefix.as_deref().unwrap_or(""))),
            delimiter: input.delimiter.as_deref().map(|d| list::enc(url, d)),
            encoding_type: input.encoding_type,
            request_charged: None,
        }))
    }

    async fn create_multipart_upload(
        &self,
        req: S3Request<CreateMultipartUploadInput>,
    ) -> S3Result<S3Response<CreateMultipartUploadOutput>> {
        let input = req.input;
        let upload = self.create_upload(&input.bucket, &input.key).await?;
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
        let input = req.input;
        let md5 = req
            .headers
            .get("content-md5")
            .and_then(|v| v.to_str().ok())
            .map(String::from);
        let etag = self.upload_part(input, md5.as_ref()).await?;
        Ok(S3Response::new(UploadPartOutput {
            e_tag: Some(etag),
            ..Default::default()
        }))
    }

    async fn list_parts(
        &self,
        req: S3Request<ListPartsInput>,
    ) -> S3Result<S3Response<ListPartsOutput>> {
        let input = req.input;
        let parts = self
            .list_parts(&input.bucket, &input.key, &input.upload_id)
            .await?;
        Ok(S3Response::new(ListPartsOutput {
            bucket: Some(input.bucket),
            key: Some(input.key),
            upload_id: Some(input.upload_id),
            parts: Some(parts),
            is_truncated: Some(false),
            ..Default::default()
        }))
    }

    async fn complete_multipart_upload(
        &self,
        req: S3Request<CompleteMultipartUploadInput>,
    ) -> S3Result<S3Response<CompleteMultipartUploadOutput>> {
        let input = req.input;
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
        let prefix = input.prefix.clone().unwrap_or_default();
        let uploads = self.list_uploads(&input.bucket, &prefix).await?;
        Ok(S3Response::new(ListMultipartUploadsOutput {
            bucket: Some(input.bucket),
            prefix: input.prefix,
            uploads: Some(uploads),
            is_truncated: Some(false),
            ..Default::default()
        }))
    }
}
