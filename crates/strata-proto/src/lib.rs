//! Strata's node protocol as data: what travels between clients and nodes
//! and between nodes (recovery, scrubbing, listing), and the row record a
//! replica stores ([`row`]). No I/O: the Rust client, the server and the
//! metadata service build on it; docs/protocol.md describes it for
//! clients in other languages.
//!
//! Routes on a node (all under `/cluster/v1`):
//!
//! | route | what |
//! | --- | --- |
//! | `GET /health` | pitchfork's probe: 200 when every disk answers |
//! | `PUT /rows/{row}/objects/{bucket}/{key}` | store one record, 200 once durable |
//! | `GET /rows/{row}/objects/{bucket}/{key}` | 200 with the record, 404 if absent |
//! | `DELETE /rows/{row}/objects/{bucket}/{key}` | writes a tombstone: 200 deleted, 404 absent |
//! | `DELETE /rows/{row}/objects/{bucket}/{key}?purge=STAMP` | drops the tombstone of that stamp (tombstone GC) |
//! | `GET /rows/{row}/export` | every live record of the row as frames (recovery) |
//! | `GET /rows/{row}/digest` | per-range counts and checksums (scrubbing) |
//! | `GET /rows/{row}/list?range=R` | names and checksums of one range (scrubbing) |
//!
//! Object requests carry [`TABLE_VERSION_HEADER`]; a node with a newer
//! table answers 409 with its version in the same header, and 421 when the
//! row is not on this node in the request's version.

#![warn(missing_docs)]

use bytes::{Buf, BufMut, Bytes, BytesMut};
use percent_encoding::{utf8_percent_encode, AsciiSet, NON_ALPHANUMERIC};
use serde::{Deserialize, Serialize};

pub mod batch;
pub mod replica;
pub mod row;

/// The HTTP header that carries the client's placement-table version on
/// every data request; a node refuses a stale one with 409 and its own
/// version in the same header.
pub const TABLE_VERSION_HEADER: &str = "x-strata-table-version";

/// Characters escaped in a path segment (everything but unreserved ones).
const SEGMENT: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// Percent-encodes one path segment.
pub fn encode_segment(s: &str) -> String {
    utf8_percent_encode(s, SEGMENT).to_string()
}

/// Whether `(bucket, key)` is a name the cluster can store.
pub fn valid_name(bucket: &str, key: &str) -> bool {
    !bucket.is_empty()
        && !key.is_empty()
        && !bucket.contains('\0')
        && !key.contains('\0')
        && !bucket.contains('/')
        && bucket.len() + key.len() <= 1024
}

/// The stored name of data tract `tract` of an object: `key` NUL `tract`
/// (keys never contain NUL, so it cannot collide with a user's key). The
/// name of tracts of a manifest without a version (written before
/// versions, or built by appends); see [`Manifest::tract_key`].
pub fn tract_key(key: &str, tract: u64) -> String {
    format!("{key}\0{tract}")
}

/// The stored name of data tract `tract` of version `version` of an
/// object: `key` NUL `tract` NUL `version` (16 hex digits); version 0 is
/// [`tract_key`]. Each whole write of a striped object picks a new random
/// version, so its tracts never overwrite those of the version its
/// manifest replaces: until the new manifest is on every replica, the old
/// one still finds all of its own tracts.
pub fn versioned_tract_key(key: &str, version: u64, tract: u64) -> String {
    if version == 0 {
        tract_key(key, tract)
    } else {
        format!("{key}\0{tract}\0{version:016x}")
    }
}

/// A new tract-key version: random, never 0.
pub fn new_tract_version() -> u64 {
    rand::random::<u64>().max(1)
}

/// The path of an object record on a node.
pub fn object_path(row: usize, bucket: &str, key: &str) -> String {
    format!(
        "/cluster/v1/rows/{row}/objects/{}/{}",
        encode_segment(bucket),
        encode_segment(key)
    )
}

/// Kind byte of a record at an object's metadata row: the object's bytes follow.
pub const RECORD_INLINE: u8 = 0;
/// Kind byte of a record at an object's metadata row: a JSON [`Manifest`] follows.
pub const RECORD_MANIFEST: u8 = 1;
/// Kind byte of a record at an object's metadata row: the object's cookie
/// (u32 LE, random per object, Haystack §3.4.1) and its bytes follow.
pub const RECORD_INLINE_COOKIE: u8 = 3;
/// Kind byte of a data tract's record: the tract's bytes follow. (Tracts
/// written before this kind existed are stored raw; one whose first byte
/// happened to be [`RECORD_TOMBSTONE`] read as deleted, so every tract now
/// carries its kind.)
pub const RECORD_TRACT: u8 = 4;
/// Kind byte of a record at an object's metadata row: the object's cookie
/// (u32 LE), the length of its [`ObjectMeta`] (u32 LE), that metadata as
/// JSON, then the object's bytes. What S3 writes (docs/s3-compatibility.md):
/// the ETag and content headers travel with the bytes, so GET and HEAD read
/// them from the one record they read anyway.
pub const RECORD_INLINE_META: u8 = 5;
/// Kind byte of a tombstone: the name was deleted at the record's stamp
/// (no payload). A tombstone wins over any record of the name with an
/// older stamp, in recovery streaming and in scrubbing (docs/recovery.md).
pub const RECORD_TOMBSTONE: u8 = 2;

/// The HTTP header carrying a write's stamp (microseconds since the Unix
/// epoch, chosen once per operation by the client): of two records of one
/// name, the one with the higher stamp wins on every replica.
pub const STAMP_HEADER: &str = "x-strata-stamp";
/// The header a node answers with the tier it put a record on (a PUT) or
/// read it from (a GET): `ram`, `flash`, `flash-cache` or `disk`.
pub const TIER_HEADER: &str = "x-strata-tier";

/// Whether a record is a tombstone.
pub fn is_tombstone(record: &[u8]) -> bool {
    record.first() == Some(&RECORD_TOMBSTONE)
}

/// A tombstone record.
pub fn tombstone_record() -> Bytes {
    Bytes::from_static(&[RECORD_TOMBSTONE])
}

/// Microseconds since the Unix epoch (0 if the clock is before it).
pub fn now_stamp() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// The metadata tract (−1) of an object split into tracts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The object's length in bytes.
    pub len: u64,
    /// The tract size it was split with.
    pub tract_size: u64,
    /// Number of data tracts.
    pub tracts: u64,
    /// Bytes in each data tract, for objects built by appends (each append
    /// takes whole tracts, so tracts may be partly filled). Empty for an
    /// object written whole: every tract is full but the last.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lens: Vec<u64>,
    /// The object's cookie (random per object; 0 in manifests written
    /// before cookies existed: none to check).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cookie: u32,
    /// What an S3 client stored with the object (ETag, content headers,
    /// user metadata); none for objects written over the native API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ObjectMeta>,
    /// The version its data tracts are stored under
    /// ([`versioned_tract_key`]); 0 (absent) for manifests written before
    /// versions and for objects built by appends: tracts `KEY` NUL `t`.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub version: u64,
}

fn is_zero_u64(v: &u64) -> bool {
    *v == 0
}

/// What an S3 client stores with an object besides its bytes, kept in the
/// object's head record (the inline record or the manifest) so that GET and
/// HEAD answer it without another read.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectMeta {
    /// The S3 ETag, unquoted: the MD5 of a single PUT in hex, or
    /// `MD5(part MD5s)-N` of a multipart upload.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub etag: String,
    /// Content headers by lower-case name (`content-type`,
    /// `content-encoding`, `content-disposition`, `content-language`,
    /// `cache-control`, `expires`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub headers: std::collections::BTreeMap<String, String>,
    /// User metadata (`x-amz-meta-NAME`), by lower-case NAME.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub user: std::collections::BTreeMap<String, String>,
}

fn is_zero(c: &u32) -> bool {
    *c == 0
}

impl Manifest {
    /// The stored name of this manifest's data tract `t` of `key`.
    pub fn tract_key(&self, key: &str, t: u64) -> String {
        versioned_tract_key(key, self.version, t)
    }

    /// Bytes held by data tract `t`.
    pub fn tract_len(&self, t: u64) -> u64 {
        if let Some(l) = self.lens.get(t as usize) {
            return *l;
        }
        let start = t * self.tract_size;
        self.len.saturating_sub(start).min(self.tract_size)
    }
}

/// `POST /cluster/v1/rows/{row}/extend/{bucket}/{key}` at the first live
/// replica of the object's metadata row (FDS's extend-blob): reserve one
/// data tract per entry of `lens` at the end of the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendRequest {
    /// Bytes that will go in each reserved tract.
    pub lens: Vec<u64>,
    /// The client's tract size (used when the object is new).
    pub tract_size: u64,
}

/// Answer to an extend: the first reserved tract number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtendResponse {
    /// First tract of the reserved range.
    pub first: u64,
    /// The manifest's tract-key version: the appended tracts are stored
    /// under it (0, absent, for objects made by appends).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub version: u64,
}

/// The path of an extend request.
pub fn extend_path(row: usize, bucket: &str, key: &str) -> String {
    format!(
        "/cluster/v1/rows/{row}/extend/{}/{}",
        encode_segment(bucket),
        encode_segment(key)
    )
}

/// A record holding a small object whole, with its cookie.
pub fn inline_record(cookie: u32, data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(5 + data.len());
    b.put_u8(RECORD_INLINE_COOKIE);
    b.put_u32_le(cookie);
    b.put_slice(data);
    b.freeze()
}

/// A record holding a small object whole, with its cookie and what an S3
/// client stored with it ([`RECORD_INLINE_META`]).
pub fn inline_meta_record(cookie: u32, meta: &ObjectMeta, data: &[u8]) -> Bytes {
    // Serializing strings and maps of strings cannot fail.
    let m = serde_json::to_vec(meta).unwrap_or_default();
    let mut b = BytesMut::with_capacity(9 + m.len() + data.len());
    b.put_u8(RECORD_INLINE_META);
    b.put_u32_le(cookie);
    b.put_u32_le(m.len() as u32);
    b.put_slice(&m);
    b.put_slice(data);
    b.freeze()
}

/// A random cookie for a new object (Haystack §3.4.1): never 0, which
/// stands for "no cookie" in records written before cookies existed.
pub fn new_cookie() -> u32 {
    loop {
        let c: u32 = rand::random();
        if c != 0 {
            return c;
        }
    }
}

/// What an object's metadata-row record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Head {
    /// The object whole.
    Inline {
        /// Its cookie (0: written before cookies, none to check).
        cookie: u32,
        /// Its bytes.
        data: Bytes,
        /// What an S3 client stored with it.
        meta: Option<ObjectMeta>,
    },
    /// The object is split into tracts.
    Manifest(Manifest),
}

impl Head {
    /// The object's length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Head::Inline { data, .. } => data.len() as u64,
            Head::Manifest(m) => m.len,
        }
    }

    /// Whether the object is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// What an S3 client stored with the object (none: written over the
    /// native API).
    pub fn meta(&self) -> Option<&ObjectMeta> {
        match self {
            Head::Inline { meta, .. } => meta.as_ref(),
            Head::Manifest(m) => m.meta.as_ref(),
        }
    }

    /// The object's cookie (0: none).
    pub fn cookie(&self) -> u32 {
        match self {
            Head::Inline { cookie, .. } => *cookie,
            Head::Manifest(m) => m.cookie,
        }
    }

    /// The head without the object's bytes.
    pub fn info(&self) -> HeadInfo {
        HeadInfo {
            cookie: self.cookie(),
            len: self.len(),
            meta: self.meta().cloned(),
        }
    }
}

/// What a HEAD answers: an object's head record without its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadInfo {
    /// The object's cookie (0: none).
    pub cookie: u32,
    /// The object's length in bytes.
    pub len: u64,
    /// What an S3 client stored with the object.
    pub meta: Option<ObjectMeta>,
}

/// Bytes of an object's head record a HEAD reads ([`HEAD_START_PARAM`]):
/// the kind, cookie and an S3 client's metadata of an inline object fit
/// (S3 allows 2 KiB of user metadata; a record whose metadata runs
/// past is read whole), and a HEAD of an 8 MiB inline object reads 16
/// KiB of it, not 8 MiB.
pub const HEAD_START: usize = 16 << 10;

/// Query parameter of a record read (`?start=N`) asking for the record's
/// first N bytes only; the answer then says the whole record's length in
/// [`RECORD_LENGTH_HEADER`]. A node that does not know it answers the
/// whole record without that header.
pub const HEAD_START_PARAM: &str = "start";

/// Header of a record read's answer when it holds only the record's
/// first bytes: the whole record's length.
pub const RECORD_LENGTH_HEADER: &str = "x-strata-record-length";

/// Parses the first bytes `start` of a head record of `len` bytes (not a
/// tombstone): `Ok(None)` when they do not hold what a HEAD answers (a
/// manifest, or metadata running past them), and the record must be read
/// whole. `start` whole (`start.len() >= len`) parses as [`parse_head`].
pub fn parse_head_start(start: &Bytes, len: u64) -> Result<Option<HeadInfo>, String> {
    if start.len() as u64 >= len {
        return parse_head(start).map(|h| Some(h.info()));
    }
    let cookie = |rec: &Bytes| {
        let mut c = [0u8; 4];
        c.copy_from_slice(&rec[1..5]);
        u32::from_le_bytes(c)
    };
    match start.first() {
        Some(&RECORD_INLINE) => Ok(Some(HeadInfo {
            cookie: 0,
            len: len - 1,
            meta: None,
        })),
        Some(&RECORD_INLINE_COOKIE) if start.len() >= 5 => Ok(Some(HeadInfo {
            cookie: cookie(start),
            len: len - 5,
            meta: None,
        })),
        Some(&RECORD_INLINE_META) if start.len() >= 9 => {
            let mut l = [0u8; 4];
            l.copy_from_slice(&start[5..9]);
            let end = 9u64 + u32::from_le_bytes(l) as u64;
            if end > len {
                return Err(format!(
                    "metadata of {} bytes overruns a record of {len}",
                    end - 9
                ));
            }
            if end > start.len() as u64 {
                return Ok(None);
            }
            let meta = serde_json::from_slice(&start[9..end as usize])
                .map_err(|e| format!("bad object metadata: {e}"))?;
            Ok(Some(HeadInfo {
                cookie: cookie(start),
                len: len - end,
                meta: Some(meta),
            }))
        }
        Some(&RECORD_INLINE_COOKIE) | Some(&RECORD_INLINE_META) | Some(&RECORD_MANIFEST) => {
            Ok(None)
        }
        Some(k) => Err(format!("unknown record kind {k}")),
        None => Err("empty record".into()),
    }
}

/// Parses the record at an object's metadata row (not a tombstone).
pub fn parse_head(rec: &Bytes) -> Result<Head, String> {
    match rec.first() {
        Some(&RECORD_INLINE) => Ok(Head::Inline {
            cookie: 0,
            data: rec.slice(1..),
            meta: None,
        }),
        Some(&RECORD_INLINE_COOKIE) if rec.len() >= 5 => {
            let mut c = [0u8; 4];
            c.copy_from_slice(&rec[1..5]);
            Ok(Head::Inline {
                cookie: u32::from_le_bytes(c),
                data: rec.slice(5..),
                meta: None,
            })
        }
        Some(&RECORD_INLINE_META) if rec.len() >= 9 => {
            let mut c = [0u8; 4];
            c.copy_from_slice(&rec[1..5]);
            let mut l = [0u8; 4];
            l.copy_from_slice(&rec[5..9]);
            let end = 9usize.saturating_add(u32::from_le_bytes(l) as usize);
            if end > rec.len() {
                return Err(format!(
                    "metadata of {} bytes overruns a record of {}",
                    end - 9,
                    rec.len()
                ));
            }
            let meta = serde_json::from_slice(&rec[9..end])
                .map_err(|e| format!("bad object metadata: {e}"))?;
            Ok(Head::Inline {
                cookie: u32::from_le_bytes(c),
                data: rec.slice(end..),
                meta: Some(meta),
            })
        }
        Some(&RECORD_MANIFEST) => serde_json::from_slice(&rec[1..])
            .map(Head::Manifest)
            .map_err(|e| format!("bad manifest: {e}")),
        Some(k) => Err(format!("unknown record kind {k}")),
        None => Err("empty record".into()),
    }
}

/// The record of a data tract.
pub fn tract_record(data: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(1 + data.len());
    b.put_u8(RECORD_TRACT);
    b.put_slice(data);
    b.freeze()
}

/// The bytes of a data tract's record (a raw record of the first layout as
/// it is).
pub fn tract_data(rec: Bytes) -> Bytes {
    if rec.first() == Some(&RECORD_TRACT) {
        rec.slice(1..)
    } else {
        rec
    }
}

/// Whether a record holds object bytes (a whole object; tracts are
/// recognised by their key), as opposed to a manifest or a tombstone.
pub fn is_data_record(rec: &[u8]) -> bool {
    matches!(
        rec.first(),
        Some(&RECORD_INLINE) | Some(&RECORD_INLINE_COOKIE) | Some(&RECORD_INLINE_META)
    )
}

/// A record holding a manifest.
pub fn manifest_record(m: &Manifest) -> Bytes {
    let mut b = BytesMut::new();
    b.put_u8(RECORD_MANIFEST);
    // Serializing a plain struct of integers cannot fail.
    b.put_slice(serde_json::to_string(m).unwrap_or_default().as_bytes());
    b.freeze()
}

/// One record of a row, as exported for recovery and repair (tombstones
/// included: they travel like any record).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Bucket.
    pub bucket: String,
    /// Key (or tract key).
    pub key: String,
    /// The record's stamp.
    pub stamp: u64,
    /// The record's bytes.
    pub data: Bytes,
}

/// Appends a frame: bucket length (u16 LE), bucket, key length (u16 LE),
/// key, length of what follows (u32 LE) = 8 + record length, stamp (u64
/// LE), record.
pub fn put_frame(out: &mut BytesMut, bucket: &str, key: &str, stamp: u64, data: &[u8]) {
    out.put_u16_le(bucket.len() as u16);
    out.put_slice(bucket.as_bytes());
    out.put_u16_le(key.len() as u16);
    out.put_slice(key.as_bytes());
    out.put_u32_le(8 + data.len() as u32);
    out.put_u64_le(stamp);
    out.put_slice(data);
}

/// Takes one whole frame off the front of `buf`, if it holds one.
/// `Err` when the bytes cannot be a frame (not UTF-8 names).
pub fn take_frame(buf: &mut BytesMut) -> Result<Option<Frame>, String> {
    let mut peek = &buf[..];
    if peek.len() < 2 {
        return Ok(None);
    }
    let bl = peek.get_u16_le() as usize;
    if peek.len() < bl + 2 {
        return Ok(None);
    }
    let bucket = peek[..bl].to_vec();
    peek.advance(bl);
    let kl = peek.get_u16_le() as usize;
    if peek.len() < kl + 4 {
        return Ok(None);
    }
    let key = peek[..kl].to_vec();
    peek.advance(kl);
    let dl = peek.get_u32_le() as usize;
    if peek.len() < dl {
        return Ok(None);
    }
    if dl < 8 {
        return Err(format!("frame of {dl} bytes cannot hold its stamp"));
    }
    let header = 2 + bl + 2 + kl + 4;
    buf.advance(header);
    let stamp = buf.get_u64_le();
    let data = buf.split_to(dl - 8).freeze();
    let bucket = String::from_utf8(bucket).map_err(|_| "bucket is not UTF-8".to_string())?;
    let key = String::from_utf8(key).map_err(|_| "key is not UTF-8".to_string())?;
    Ok(Some(Frame {
        bucket,
        key,
        stamp,
        data,
    }))
}

/// Per-range digest of a row (scrubbing): 16 ranges by the top 4 bits of
/// the name hash; each with a count and an order-independent checksum (sum
/// of the records' name-and-data hashes).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RowDigest {
    /// Records per range.
    pub counts: Vec<u64>,
    /// Sum (wrapping) of record hashes per range.
    pub sums: Vec<u64>,
    /// Records whose checksum failed when re-read for this digest.
    pub corrupt: u64,
    /// Tombstones per range (included in `counts`); the scrub lists a
    /// range that holds any, to collect the ones every replica has.
    #[serde(default)]
    pub tombstones: Vec<u64>,
    /// The erasure-coded stripes of the row installed on this replica
    /// (sorted ids): the scrub copies no record between replicas whose
    /// stripes differ (one has dropped what a stripe now holds, the other
    /// not yet).
    #[serde(default)]
    pub stripes: Vec<u64>,
}

/// Number of ranges in a [`RowDigest`].
pub const DIGEST_RANGES: usize = 16;

/// One record in a `list` answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListEntry {
    /// Bucket.
    pub bucket: String,
    /// Key.
    pub key: String,
    /// Hash of name, stamp and data.
    pub hash: u64,
    /// The record's stamp (the higher stamp wins).
    #[serde(default)]
    pub stamp: u64,
    /// Whether the record is a tombstone.
    #[serde(default)]
    pub tombstone: bool,
}

/// The hash of a record for digests: XXH3-64 of bucket, NUL, key, NUL,
/// stamp (u64 LE), data.
pub fn record_hash(bucket: &str, key: &str, stamp: u64, data: &[u8]) -> u64 {
    let mut buf = Vec::with_capacity(bucket.len() + key.len() + data.len() + 10);
    buf.extend_from_slice(bucket.as_bytes());
    buf.push(0);
    buf.extend_from_slice(key.as_bytes());
    buf.push(0);
    buf.extend_from_slice(&stamp.to_le_bytes());
    buf.extend_from_slice(data);
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// Range of a record in a [`RowDigest`].
pub fn record_range(bucket: &str, key: &str) -> usize {
    (strata_placement::object_hash(bucket, key) >> 60) as usize
}

/// An object's entry in its bucket's listing index (docs/placement.md,
/// "The listing index").
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexEntry {
    /// Bytes.
    pub size: u64,
    /// The S3 ETag, unquoted.
    pub etag: String,
    /// Milliseconds since the Unix epoch of the write.
    pub modified_ms: u64,
    /// The object's content headers and user metadata (its ETag is
    /// `etag`); none for entries written before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub meta: Option<ObjectMeta>,
    /// The writer's stamp (`strata_client::Client::next_stamp`): of two writes
    /// of one name, on one replica, the newer stamp wins, whatever their
    /// order of arrival (0: written before stamps were kept).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub stamp: u64,
}

/// A change of a node's write intents (`POST /cluster/v1/intents`,
/// docs/placement.md, "Write intents"): the names (bucket, key) an S3
/// write of stamp `stamp` is about to change (`add`), or has finished with.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentChange {
    /// (bucket, key) of each name.
    pub names: Vec<(String, String)>,
    /// The write's stamp.
    pub stamp: u64,
    /// Record (`true`) or remove.
    pub add: bool,
    /// Held for another node, the write's coordinator (a mirror of its
    /// intent: docs/placement.md, "Write intents"), not this node's own.
    #[serde(default)]
    pub mirrored: bool,
}

/// The listing entry of an object from its head record and the record's
/// stamp: none for an object written over the native API (no S3
/// metadata), which is not listed.
pub fn listing_entry(head: &HeadInfo, stamp: u64) -> Option<IndexEntry> {
    Some(entry_of(head.len, head.meta.as_ref()?, stamp))
}

/// The listing entry of an object of `size` bytes whose head record
/// carries `meta` and `stamp` (the same as [`listing_entry`] finds in
/// that head record).
pub fn entry_of(size: u64, meta: &ObjectMeta, stamp: u64) -> IndexEntry {
    IndexEntry {
        size,
        etag: meta.etag.clone(),
        modified_ms: stamp / 1000,
        meta: Some(ObjectMeta {
            etag: String::new(),
            ..meta.clone()
        }),
        stamp,
    }
}

/// A listing request (`POST /cluster/v1/index/{bucket}/list`): names in
/// UTF-8 byte order after `start_after` that start with `prefix`, at most
/// `max` entries and common prefixes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListQuery {
    /// Only names starting with this.
    #[serde(default)]
    pub prefix: String,
    /// Only names (and common prefixes) after this one.
    #[serde(default)]
    pub start_after: String,
    /// Names that contain this after the prefix are rolled up into one
    /// common prefix (up to and including it).
    #[serde(default)]
    pub delimiter: Option<String>,
    /// At most this many entries and common prefixes together.
    pub max: usize,
}

/// A listing answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListPage {
    /// Objects, in order.
    pub contents: Vec<(String, IndexEntry)>,
    /// Common prefixes, in order.
    pub common_prefixes: Vec<String>,
    /// Whether more follow; the next page starts after [`ListPage::last`].
    pub truncated: bool,
    /// The last name or common prefix of this page.
    pub last: Option<String>,
}

/// The path of `bucket/key`'s entry in the listing index on a node.
pub fn index_path(bucket: &str, key: &str) -> String {
    format!(
        "/cluster/v1/index/{}/{}",
        encode_segment(bucket),
        encode_segment(key)
    )
}

/// The path of a listing request for `bucket` on a node.
pub fn index_list_path(bucket: &str) -> String {
    format!("/cluster/v1/index/{}", encode_segment(bucket))
}

/// The row whose replicas hold `bucket`'s listing index: the index is
/// partitioned by bucket (one row per bucket), the row of the bucket's
/// name as an object with an empty key.
pub fn index_row(table: &strata_placement::PlacementTable, bucket: &str) -> usize {
    table.tract_row(strata_placement::object_hash(bucket, ""), -1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_across_split_buffers() {
        let mut out = BytesMut::new();
        put_frame(&mut out, "b", "k1", 7, b"hello");
        put_frame(&mut out, "b", "k\u{e9}2", u64::MAX, b"");
        let all = out.freeze();
        // Feed byte by byte: a frame is taken only when whole.
        let mut buf = BytesMut::new();
        let mut got = Vec::new();
        for &x in all.iter() {
            buf.put_u8(x);
            while let Some(f) = take_frame(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].key, "k1");
        assert_eq!(&got[0].data[..], b"hello");
        assert_eq!(got[0].stamp, 7);
        assert_eq!(got[1].stamp, u64::MAX);
        assert_eq!(got[1].key, "k\u{e9}2");
        assert!(buf.is_empty());
    }

    #[test]
    fn inline_records_with_metadata_round_trip() {
        let mut meta = ObjectMeta {
            etag: "abc".into(),
            ..ObjectMeta::default()
        };
        meta.headers
            .insert("content-type".into(), "text/plain".into());
        meta.user.insert("colour".into(), "blue".into());
        let rec = inline_meta_record(7, &meta, b"bytes");
        assert!(is_data_record(&rec));
        let head = parse_head(&rec).unwrap();
        assert_eq!(head.cookie(), 7);
        assert_eq!(head.meta(), Some(&meta));
        assert!(matches!(&head, Head::Inline { data, .. } if &data[..] == b"bytes"));
        // A metadata length past the record's end is an error, not a panic.
        let mut bad = rec.to_vec();
        bad[5] = 0xff;
        assert!(parse_head(&Bytes::from(bad)).is_err());
        // Manifests without metadata (written before it existed) still parse.
        let old = Bytes::from_static(b"\x01{\"len\":3,\"tract_size\":1,\"tracts\":3}");
        assert_eq!(parse_head(&old).unwrap().meta(), None);
    }

    #[test]
    fn a_head_parses_from_its_records_first_bytes() {
        let data = vec![7u8; 50_000];
        let mut meta = ObjectMeta {
            etag: "e".into(),
            ..ObjectMeta::default()
        };
        meta.user.insert("k".into(), "v".into());
        let records = [
            inline_record(0, &data),
            inline_record(9, &data),
            inline_meta_record(9, &meta, &data),
        ];
        for rec in &records {
            let whole = parse_head(rec).unwrap().info();
            assert_eq!(whole.len, data.len() as u64);
            for n in [HEAD_START, 100] {
                let start = rec.slice(..n);
                let got = parse_head_start(&start, rec.len() as u64).unwrap();
                assert_eq!(
                    got.as_ref(),
                    Some(&whole),
                    "first {n} bytes of kind {}",
                    rec[0]
                );
            }
            // Whole, it is parse_head.
            assert_eq!(
                parse_head_start(rec, rec.len() as u64).unwrap(),
                Some(whole)
            );
        }
        // Metadata past the bytes read: read the record whole.
        let long = inline_meta_record(9, &meta, &data);
        assert_eq!(
            parse_head_start(&long.slice(..12), long.len() as u64).unwrap(),
            None
        );
        // The kind and cookie are enough without metadata.
        let five = parse_head_start(&records[1].slice(..5), 50_005).unwrap();
        assert_eq!(five.map(|h| (h.cookie, h.len)), Some((9, 50_000)));
        // Too short for the cookie, or a manifest: read whole.
        assert_eq!(
            parse_head_start(&records[1].slice(..3), 50_005).unwrap(),
            None
        );
        let m = Bytes::from_static(b"\x01{\"len\":3,\"tract_size\":1,\"tracts\":3}");
        assert_eq!(
            parse_head_start(&m.slice(..5), m.len() as u64).unwrap(),
            None
        );
        // A metadata length past the whole record, or an unknown kind: errors.
        let mut bad = long.slice(..HEAD_START).to_vec();
        bad[5..9].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_head_start(&Bytes::from(bad), long.len() as u64).is_err());
        assert!(parse_head_start(&Bytes::from_static(b"\x09abc"), 10).is_err());
    }

    #[test]
    fn names_are_checked_and_encoded() {
        assert!(valid_name("photos", "a/b c.jpg"));
        assert!(!valid_name("", "k"));
        assert!(!valid_name("a/b", "k"));
        assert!(!valid_name("b", "k\0"));
        assert_eq!(
            object_path(3, "b", "a/b c"),
            "/cluster/v1/rows/3/objects/b/a%2Fb%20c"
        );
    }
}
