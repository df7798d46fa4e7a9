//! Multipart upload. Each part is stored through the coordinator as a
//! hidden object of the bucket (`\u{1}mpu/UPLOAD/PART`, striped into
//! tracts like any object) and recorded with its MD5 and size in the
//! bucket's upload index (the listing index of the internal name
//! `BUCKET\u{1}mpu`, so the bucket's own listing never shows it).
//! CompleteMultipartUpload streams the parts in order into the final
//! object (one copy through the node, a few tracts in memory at a time),
//! lists it, then removes the parts. docs/s3-compatibility.md has the
//! limits.

use futures_util::stream::{self, StreamExt};
use md5::{Digest, Md5};
use s3s::dto::{ETag, Part, StreamingBlob, UploadPartInput};
use s3s::{s3_error, S3Result};
use std::time::Duration;
use strata_client::{Client, ClientError};
use strata_proto::{IndexEntry, ListQuery, ObjectMeta};

use crate::cluster::unavailable;
use crate::crash::crash_point;
use crate::meta::{Checks, Conditions};
use crate::service::StrataS3;
use crate::upload_page::{page_uploads, OpenUpload, UploadPage, UploadQuery};

/// Every part but the last must be at least this long (S3's rule).
pub const MIN_PART: u64 = 5 << 20;
/// Part numbers run from 1 to this.
pub const MAX_PART: i32 = 10_000;

/// The bytes `first..end` an `x-amz-copy-source-range` of `bytes=FIRST-LAST`
/// names in an object of `size` bytes: InvalidArgument when malformed,
/// InvalidRange when past the end.
pub fn copy_range(r: &str, size: u64) -> S3Result<(u64, u64)> {
    let bad = || {
        s3_error!(
            InvalidArgument,
            "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"
        )
    };
    let (a, b) = r
        .trim()
        .strip_prefix("bytes=")
        .and_then(|x| x.split_once('-'))
        .ok_or_else(bad)?;
    let first: u64 = a.parse().map_err(|_| bad())?;
    let last: u64 = b.parse().map_err(|_| bad())?;
    if first > last {
        return Err(bad());
    }
    if last >= size {
        return Err(s3_error!(
            InvalidRange,
            "The requested range is not satisfiable"
        ));
    }
    Ok((first, last + 1))
}

/// The internal index namespace of `bucket`'s uploads.
fn uploads(bucket: &str) -> String {
    format!("{bucket}\u{1}mpu")
}

/// The hidden object of one part.
fn part_key(upload: &str, part: i32) -> String {
    format!("\u{1}mpu/{upload}/{part:05}")
}

fn part_name(upload: &str, part: i32) -> String {
    format!("{upload}/{part:05}")
}

/// The record written before a part's object is stored (and removed once
/// the part's own record is written): a crash in between leaves this name,
/// by which the sweep finds the part's bytes.
fn pending_name(upload: &str, part: i32) -> String {
    format!("{upload}/{part:05}{PENDING}")
}

/// The suffix of a pending part's record (sorts right after the part's own
/// record, and is no part number, so ListParts never shows it).
const PENDING: &str = ".pending";

/// A new upload id: 128 random bits.
fn new_upload_id() -> String {
    let a = strata_proto::new_cookie() as u128;
    let b = strata_proto::new_cookie() as u128;
    let c = strata_proto::new_cookie() as u128;
    let d = strata_proto::new_cookie() as u128;
    format!("{:032x}", a << 96 | b << 64 | c << 32 | d)
}

/// What an upload's record says.
enum Upload {
    /// Parts may still be sent: the content headers and metadata the
    /// object will have.
    Open(ObjectMeta),
    /// CompleteMultipartUpload wrote the object; its ETag (a repeated
    /// Complete answers it again, as S3 does).
    Completed(String),
}

impl Upload {
    /// An upload record's state. An open upload's metadata has no ETag
    /// (CreateMultipartUpload never sets one); a completed one's record
    /// keeps the object's ETag there.
    fn of(e: &IndexEntry) -> Upload {
        let meta = e.meta.clone().unwrap_or_default();
        if meta.etag.is_empty() {
            Upload::Open(meta)
        } else {
            Upload::Completed(meta.etag)
        }
    }
}

/// How long the record of a completed upload answers a repeated
/// CompleteMultipartUpload (or the abandoned-upload age, when shorter).
pub const COMPLETED_KEPT: Duration = Duration::from_secs(3600);

/// A stored part: number, size, MD5 (hex).
struct Stored {
    number: i32,
    size: u64,
    md5: String,
    modified_ms: u64,
}

impl StrataS3 {
    /// Checks that `upload` is an upload of `bucket/key`; returns the
    /// content headers and metadata it was created with.
    async fn upload_of(
        &self,
        client: &Client,
        bucket: &str,
        key: &str,
        upload: &str,
    ) -> S3Result<ObjectMeta> {
        match self.upload_record(client, bucket, key, upload).await? {
            Upload::Open(meta) => Ok(meta),
            Upload::Completed(_) => Err(s3_error!(NoSuchUpload)),
        }
    }

    /// The record of `upload` of `bucket/key`: still open (with the content
    /// headers and metadata it was created with) or completed (with the
    /// object's ETag); NoSuchUpload when there is none.
    async fn upload_record(
        &self,
        client: &Client,
        bucket: &str,
        key: &str,
        upload: &str,
    ) -> S3Result<Upload> {
        let page = client
            .index_list(
                &uploads(bucket),
                &ListQuery {
                    prefix: upload.to_string(),
                    max: 1,
                    ..ListQuery::default()
                },
            )
            .await
            .map_err(unavailable)?;
        match page.contents.first() {
            // The upload's own entry records its key in `etag`.
            Some((name, e)) if name == upload && e.etag == key => Ok(Upload::of(e)),
            _ => Err(s3_error!(NoSuchUpload)),
        }
    }

    /// Every entry of `bucket`'s upload index under `prefix`, in order
    /// (with `/` as delimiter when `rolled`: parts roll up under their
    /// upload).
    async fn upload_entries(
        &self,
        client: &Client,
        bucket: &str,
        prefix: &str,
        rolled: bool,
    ) -> S3Result<Vec<(String, IndexEntry)>> {
        let mut out = Vec::new();
        let mut after = String::new();
        loop {
            let page = client
                .index_list(
                    &uploads(bucket),
                    &ListQuery {
                        prefix: prefix.to_string(),
                        start_after: after.clone(),
                        delimiter: rolled.then(|| "/".to_string()),
                        max: 1000,
                    },
                )
                .await
                .map_err(unavailable)?;
            out.extend(page.contents);
            match (page.truncated, page.last) {
                (true, Some(l)) => after = l,
                _ => return Ok(out),
            }
        }
    }

    /// Every stored part of `upload`, in part order.
    async fn parts(&self, client: &Client, bucket: &str, upload: &str) -> S3Result<Vec<Stored>> {
        let prefix = format!("{upload}/");
        Ok(self
            .upload_entries(client, bucket, &prefix, false)
            .await?
            .into_iter()
            .filter_map(|(name, e)| {
                Some(Stored {
                    number: name[prefix.len()..].parse().ok()?,
                    size: e.size,
                    md5: e.etag,
                    modified_ms: e.modified_ms,
                })
            })
            .collect())
    }

    /// CreateMultipartUpload: a new upload id, recorded with the content
    /// headers and metadata the object will have.
    pub(crate) async fn create_upload(
        &self,
        bucket: &str,
        key: &str,
        meta: ObjectMeta,
    ) -> S3Result<String> {
        let client = self.bucket(bucket).await?;
        if !strata_proto::valid_name(bucket, key) {
            return Err(s3_error!(InvalidArgument, "bad object name"));
        }
        let upload = new_upload_id();
        let entry = IndexEntry {
            size: 0,
            etag: key.to_string(),
            modified_ms: crate::service::now_ms(),
            meta: Some(meta),
            stamp: 0,
        };
        client
            .index_write(&uploads(bucket), &upload, Some(&entry))
            .await
            .map_err(unavailable)?;
        Ok(upload)
    }

    /// UploadPart: stores the part, records its MD5; returns its ETag.
    pub(crate) async fn upload_part(
        &self,
        input: UploadPartInput,
        checks: Checks,
    ) -> S3Result<ETag> {
        let (bucket, key, upload, part) = (
            input.bucket.as_str(),
            input.key.as_str(),
            input.upload_id.as_str(),
            input.part_number,
        );
        if !(1..=MAX_PART).contains(&part) {
            return Err(s3_error!(
                InvalidArgument,
                "Part number must be an integer between 1 and 10000, inclusive"
            ));
        }
        let client = self.bucket(bucket).await?;
        self.upload_of(&client, bucket, key, upload).await?;
        self.store_part(
            &client,
            bucket,
            upload,
            part,
            input.body,
            input.content_length,
            checks,
        )
        .await
    }

    /// Stores part `part` of `upload` and records its MD5; returns its ETag.
    #[allow(clippy::too_many_arguments)]
    async fn store_part(
        &self,
        client: &std::sync::Arc<Client>,
        bucket: &str,
        upload: &str,
        part: i32,
        body: Option<StreamingBlob>,
        len: Option<i64>,
        checks: Checks,
    ) -> S3Result<ETag> {
        // Recorded before the bytes are stored, so that a crash before the
        // part's own record leaves a name the sweep finds.
        let pending = IndexEntry {
            size: 0,
            etag: String::new(),
            modified_ms: crate::service::now_ms(),
            meta: None,
            stamp: 0,
        };
        client
            .index_write(
                &uploads(bucket),
                &pending_name(upload, part),
                Some(&pending),
            )
            .await
            .map_err(unavailable)?;
        let stored = self
            .store(
                client,
                bucket,
                &part_key(upload, part),
                body,
                len,
                checks,
                None,
                None,
                false,
            )
            .await?;
        let entry = IndexEntry {
            size: stored.size,
            etag: hex::encode(&stored.md5),
            modified_ms: crate::service::now_ms(),
            meta: None,
            stamp: 0,
        };
        crash_point("s3-part-stored");
        client
            .index_write(&uploads(bucket), &part_name(upload, part), Some(&entry))
            .await
            .map_err(unavailable)?;
        // A failure here leaves a pending record beside the part's own;
        // the sweep removes it with the upload's parts.
        let _ = client
            .index_write(&uploads(bucket), &pending_name(upload, part), None)
            .await;
        Ok(ETag::Strong(entry.etag))
    }

    /// UploadPartCopy: part `part` of `upload` is the bytes `range`
    /// (`bytes=FIRST-LAST`, else the whole) of an object, read through the
    /// node; returns the part's ETag.
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn upload_part_copy(
        &self,
        bucket: &str,
        key: &str,
        upload: &str,
        part: i32,
        source: (&str, &str),
        range: Option<&str>,
        conditions: Conditions<'_>,
    ) -> S3Result<ETag> {
        if !(1..=MAX_PART).contains(&part) {
            return Err(s3_error!(
                InvalidArgument,
                "Part number must be an integer between 1 and 10000, inclusive"
            ));
        }
        let client = self.bucket(bucket).await?;
        self.upload_of(&client, bucket, key, upload).await?;
        let (_, head, stamp) = self.object(source.0, source.1).await?;
        let etag = crate::meta::etag(head.meta(), stamp);
        conditions.check(&etag, (stamp / 1_000_000) as i64, true)?;
        let size = head.len();
        let (first, end) = match range {
            None => (0, size),
            Some(r) => copy_range(r, size)?,
        };
        let body = client
            .read_range(source.0, source.1, head, first, end)
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
        self.store_part(
            &client,
            bucket,
            upload,
            part,
            Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
            Some((end - first) as i64),
            Checks::none(),
        )
        .await
    }

    /// ListParts: the parts numbered above `after`, in order, at most
    /// `max` (1 to 1,000); and whether more follow.
    pub(crate) async fn list_parts(
        &self,
        bucket: &str,
        key: &str,
        upload: &str,
        after: i32,
        max: usize,
    ) -> S3Result<(Vec<Part>, bool)> {
        let client = self.bucket(bucket).await?;
        self.upload_of(&client, bucket, key, upload).await?;
        let mut parts: Vec<Stored> = self
            .parts(&client, bucket, upload)
            .await?
            .into_iter()
            .filter(|p| p.number > after)
            .collect();
        let truncated = parts.len() > max;
        parts.truncate(max);
        let parts = parts
            .into_iter()
            .map(|p| Part {
                e_tag: Some(ETag::Strong(p.md5)),
                part_number: Some(p.number),
                size: Some(p.size as i64),
                last_modified: Some(crate::service::timestamp(p.modified_ms)),
                ..Default::default()
            })
            .collect();
        Ok((parts, truncated))
    }

    /// CompleteMultipartUpload: checks the client's part list against the
    /// stored parts (InvalidPartOrder, InvalidPart, EntityTooSmall), writes
    /// the object from them, lists it, removes the parts; returns the ETag
    /// `MD5(part MD5s)-N`.
    pub(crate) async fn complete_upload(
        &self,
        bucket: &str,
        key: &str,
        upload: &str,
        wanted: Vec<(i32, Option<ETag>)>,
    ) -> S3Result<ETag> {
        let client = self.bucket(bucket).await?;
        let meta = match self.upload_record(&client, bucket, key, upload).await? {
            Upload::Open(meta) => meta,
            Upload::Completed(etag) => return Ok(ETag::Strong(etag)),
        };
        if wanted.is_empty() {
            return Err(s3_error!(MalformedXML, "no parts listed"));
        }
        if wanted.windows(2).any(|w| w[0].0 > w[1].0) {
            return Err(s3_error!(InvalidPartOrder));
        }
        // A part number listed more than once (a part sent again while its
        // first send was in flight, both answers kept) is one part: the
        // one stored, whose ETag must be among those listed for it.
        let mut numbers: Vec<(i32, Vec<&ETag>)> = Vec::with_capacity(wanted.len());
        for (n, etag) in &wanted {
            match numbers.last_mut() {
                Some((m, etags)) if m == n => etags.extend(etag.as_ref()),
                _ => numbers.push((*n, etag.iter().collect())),
            }
        }
        let stored = self.parts(&client, bucket, upload).await?;
        let mut chosen = Vec::with_capacity(numbers.len());
        for (i, (n, etags)) in numbers.iter().enumerate() {
            let Some(p) = stored.iter().find(|p| p.number == *n) else {
                return Err(s3_error!(InvalidPart, "part {n} was not uploaded"));
            };
            if !etags.is_empty() && etags.iter().all(|e| e.value() != p.md5) {
                return Err(s3_error!(InvalidPart, "part {n} has another ETag"));
            }
            if i + 1 < numbers.len() && p.size < MIN_PART {
                return Err(s3_error!(EntityTooSmall, "part {n} is smaller than 5 MiB"));
            }
            chosen.push(p);
        }
        let mut md5s = Md5::new();
        for p in &chosen {
            md5s.update(hex::decode(&p.md5).unwrap_or_default());
        }
        let etag = format!("{}-{}", hex::encode(md5s.finalize()), chosen.len());
        let total: u64 = chosen.iter().map(|p| p.size).sum();
        let numbers: Vec<i32> = chosen.iter().map(|p| p.number).collect();
        // The parts in order, each read tract by tract.
        let (c2, b2, u2) = (client.clone(), bucket.to_string(), upload.to_string());
        let body = stream::iter(numbers.clone())
            .then(move |n| {
                let (client, bucket, key) = (c2.clone(), b2.clone(), part_key(&u2, n));
                async move {
                    match client.head(&bucket, &key).await {
                        Ok(Some(h)) => {
                            let len = h.len();
                            client.read_range(&bucket, &key, h, 0, len).left_stream()
                        }
                        Ok(None) => stream::iter(vec![Err(ClientError::Read {
                            name: key,
                            reason: "the part is gone".into(),
                        })])
                        .right_stream(),
                        Err(e) => stream::iter(vec![Err(e)]).right_stream(),
                    }
                }
            })
            .flatten()
            .map(|r| r.map_err(|e| std::io::Error::other(e.to_string())));
        self.store(
            &client,
            bucket,
            key,
            Some(StreamingBlob::wrap(sync_wrapper::SyncStream::new(body))),
            Some(total as i64),
            Checks::none(),
            Some(meta),
            Some(etag.clone()),
            true,
        )
        .await?;
        // The record stays, completed, to answer a repeated Complete; the
        // sweep removes it after [`COMPLETED_KEPT`].
        let done = IndexEntry {
            size: total,
            etag: key.to_string(),
            modified_ms: crate::service::now_ms(),
            meta: Some(ObjectMeta {
                etag: etag.clone(),
                ..ObjectMeta::default()
            }),
            stamp: 0,
        };
        let _ = client
            .index_write(&uploads(bucket), upload, Some(&done))
            .await;
        self.drop_parts(&client, bucket, upload, stored.iter().map(|p| p.number))
            .await;
        Ok(ETag::Strong(etag))
    }

    /// ListMultipartUploads: one page of the bucket's unfinished uploads
    /// (see [`page_uploads`]).
    pub(crate) async fn list_uploads(&self, bucket: &str, q: &UploadQuery) -> S3Result<UploadPage> {
        let client = self.bucket(bucket).await?;
        // Parts (`UPLOAD/PART`) roll up into common prefixes; the uploads
        // themselves are the plain names.
        let all: Vec<OpenUpload> = self
            .upload_entries(&client, bucket, "", true)
            .await?
            .into_iter()
            .filter(|(_, e)| {
                e.etag.starts_with(&q.prefix) && matches!(Upload::of(e), Upload::Open(_))
            })
            .map(|(upload, e)| OpenUpload {
                key: e.etag,
                id: upload,
                initiated_ms: e.modified_ms,
            })
            .collect();
        page_uploads(all, q)
    }

    /// AbortMultipartUpload: removes the parts and the upload.
    pub(crate) async fn abort_upload(&self, bucket: &str, key: &str, upload: &str) -> S3Result<()> {
        let client = self.bucket(bucket).await?;
        self.upload_of(&client, bucket, key, upload).await?;
        let parts = self.parts(&client, bucket, upload).await?;
        self.drop_upload(&client, bucket, upload, parts.iter().map(|p| p.number))
            .await;
        Ok(())
    }

    /// Removes the upload's record first (so it is gone for clients), then
    /// its parts; a failure leaves garbage the sweep finds (a part record
    /// without its upload), never a wrong answer.
    async fn drop_upload(
        &self,
        client: &Client,
        bucket: &str,
        upload: &str,
        parts: impl Iterator<Item = i32>,
    ) {
        let _ = client.index_write(&uploads(bucket), upload, None).await;
        self.drop_parts(client, bucket, upload, parts).await;
    }

    /// Removes each part's object, then its record and any pending record
    /// of it (a crash between the two leaves a record the next sweep
    /// removes again); returns how many went.
    async fn drop_parts(
        &self,
        client: &Client,
        bucket: &str,
        upload: &str,
        parts: impl Iterator<Item = i32>,
    ) -> u64 {
        let mut dropped = 0;
        for n in parts {
            let gone = client.delete(bucket, &part_key(upload, n)).await.is_ok();
            if gone
                && client
                    .index_write(&uploads(bucket), &part_name(upload, n), None)
                    .await
                    .is_ok()
                && client
                    .index_write(&uploads(bucket), &pending_name(upload, n), None)
                    .await
                    .is_ok()
            {
                dropped += 1;
            }
        }
        dropped
    }

    /// Every upload of `bucket`, open or completed, and every part, removed
    /// (DeleteBucket: nothing of the bucket's uploads outlives it).
    pub(crate) async fn drop_all_uploads(&self, client: &Client, bucket: &str) -> S3Result<()> {
        let entries = self.upload_entries(client, bucket, "", false).await?;
        for (name, _) in entries {
            match part_of(&name).or_else(|| pending_of(&name)) {
                Some((upload, n)) => {
                    self.drop_parts(client, bucket, upload, std::iter::once(n))
                        .await;
                }
                None => {
                    let _ = client.index_write(&uploads(bucket), &name, None).await;
                }
            }
        }
        Ok(())
    }

    /// One pass of the sweep over every bucket: uploads not completed nor
    /// aborted within `abandoned_after` of their creation are aborted;
    /// completed uploads' records older than [`COMPLETED_KEPT`] (or
    /// `abandoned_after`, when shorter) are removed; parts whose upload
    /// record is gone (an abort or a completion cut short by a crash, a
    /// part sent while its upload was aborted) and older than
    /// `abandoned_after` are removed. So are the bytes of a part whose
    /// node crashed after storing it and before recording it, found by its
    /// pending record once that is older than `abandoned_after` and its
    /// upload is no longer open (or abandoned).
    pub async fn sweep_uploads(&self, abandoned_after: Duration) -> S3Result<Swept> {
        let client = self.client();
        let now = crate::service::now_ms();
        let age = |ms: u64| Duration::from_millis(now.saturating_sub(ms));
        let mut swept = Swept::default();
        for bucket in self
            .buckets(&client, true)
            .await?
            .keys()
            .cloned()
            .collect::<Vec<_>>()
        {
            let entries = self.upload_entries(&client, &bucket, "", false).await?;
            // Open uploads, and whether each is abandoned.
            let open: std::collections::HashMap<&str, bool> = entries
                .iter()
                .filter(|(name, e)| is_upload(name) && matches!(Upload::of(e), Upload::Open(_)))
                .map(|(name, e)| (name.as_str(), age(e.modified_ms) > abandoned_after))
                .collect();
            for (name, e) in &entries {
                match part_of(name).or_else(|| pending_of(name)) {
                    None if !is_upload(name) => {}
                    None => match Upload::of(e) {
                        Upload::Open(_) if age(e.modified_ms) > abandoned_after => {
                            let _ = client.index_write(&uploads(&bucket), name, None).await;
                            swept.uploads += 1;
                        }
                        Upload::Completed(_)
                            if age(e.modified_ms) > abandoned_after.min(COMPLETED_KEPT) =>
                        {
                            let _ = client.index_write(&uploads(&bucket), name, None).await;
                            swept.completed += 1;
                        }
                        _ => {}
                    },
                    Some((upload, n)) => {
                        let gone = match open.get(upload) {
                            Some(&abandoned) => abandoned,
                            // Completed, aborted, or never recorded.
                            None => age(e.modified_ms) > abandoned_after,
                        };
                        if gone {
                            swept.parts += self
                                .drop_parts(&client, &bucket, upload, std::iter::once(n))
                                .await;
                        }
                    }
                }
            }
        }
        Ok(swept)
    }
}

/// What one sweep removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Swept {
    /// Abandoned uploads aborted.
    pub uploads: u64,
    /// Records of completed uploads past their keeping time.
    pub completed: u64,
    /// Parts removed (objects and records).
    pub parts: u64,
}

/// `UPLOAD/PART` of a part record's name; None for an upload's own record
/// and a pending record.
fn part_of(name: &str) -> Option<(&str, i32)> {
    let (upload, n) = name.split_once('/')?;
    Some((upload, n.parse().ok()?))
}

/// `UPLOAD/PART` of a pending part record's name ([`pending_name`]).
fn pending_of(name: &str) -> Option<(&str, i32)> {
    let (upload, n) = name.split_once('/')?;
    Some((upload, n.strip_suffix(PENDING)?.parse().ok()?))
}

/// Whether `name` is an upload's own record (no `/`).
fn is_upload(name: &str) -> bool {
    !name.contains('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_ranges() {
        assert_eq!(copy_range("bytes=0-9", 10).unwrap(), (0, 10));
        assert_eq!(copy_range("bytes=3-3", 10).unwrap(), (3, 4));
        let code = |r: &str| copy_range(r, 10).unwrap_err().code().clone();
        assert_eq!(code("bytes=0-10"), s3s::S3ErrorCode::InvalidRange);
        for bad in ["0-2", "bytes=2-1", "bytes=-3", "bytes=a-b", "bytes=1-"] {
            assert_eq!(code(bad), s3s::S3ErrorCode::InvalidArgument, "{bad}");
        }
    }
}
