//! One segment store per placement row on a disk device, with group
//! commit, last-writer-wins by stamp, and tombstones.
//!
//! Layout: `DISK/rows/RRRRRRRR/` (row number, 8 digits) holds the row's
//! segment files (docs/store-format.md); when the node has flash devices,
//! the same row also has `FLASH/rows/RRRRRRRR/` on one of them (row number
//! modulo the flash device count), the flash tier in front of the row: new
//! needles go there with their bucket's write probability and the tier
//! mover moves the oldest flash segments whole to the disk directory.
//!
//! A record named `(bucket, key)` is a needle whose key and alternate key
//! are the low 96 bits of XXH3-128 over `bucket`, NUL, `key` (cookie: the
//! next 32 bits), and whose data is (docs/recovery.md, "Row records"):
//! the bucket length (u16 LE, bit 15 set: stamped layout), the bucket, the
//! key length (u16 LE), the key, the stamp (u64 LE, microseconds since the
//! epoch), then the record (kind byte and payload). Needles of the first
//! layout (bit 15 clear) have no stamp and read as stamp 0. The names are
//! compared on every read, so a hash collision reads as absent, never as
//! the wrong object.
//!
//! Every write goes through the row's writer thread, which keeps a record
//! only if its stamp is at least the stamp of the record it replaces: the
//! replicas of a row converge on the newest write whatever the order in
//! which puts, deletes (tombstones), recovery copies and scrub repairs
//! arrive.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_store::{PutItem, Store, StoreConfig, StoreError, Tier};

use crate::ClusterError;

/// Most records one group commit writes with one fsync.
const BATCH_RECORDS: usize = 512;
/// Most bytes one group commit writes.
const BATCH_BYTES: usize = 16 << 20;
/// Bit 15 of the bucket length: the needle has a stamp after the key.
const STAMPED: u16 = 0x8000;

/// The engine identity of a record.
/// The key and alternate key are the node's object identity
/// ([`strata_node::object::object_id`]); the next 32 bits of the same hash
/// are the store-level cookie of a row record (the object's own random
/// cookie is in the record, checked by the node serving the public API).
pub fn identity(bucket: &str, key: &str) -> (u64, u32, u32) {
    let h = strata_node::object::name_hash(bucket, key);
    (h as u64, (h >> 64) as u32, (h >> 96) as u32)
}

/// Needle data of a record.
pub fn encode(bucket: &str, key: &str, stamp: u64, record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(12 + bucket.len() + key.len() + record.len());
    out.extend_from_slice(&(bucket.len() as u16 | STAMPED).to_le_bytes());
    out.extend_from_slice(bucket.as_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(&stamp.to_le_bytes());
    out.extend_from_slice(record);
    out
}

/// A decoded needle.
#[derive(Debug, PartialEq, Eq)]
pub struct Decoded<'a> {
    /// Bucket.
    pub bucket: &'a str,
    /// Key.
    pub key: &'a str,
    /// Stamp (0 for needles of the first layout).
    pub stamp: u64,
    /// The record: kind byte and payload.
    pub record: &'a [u8],
}

/// Splits needle data into its parts.
pub fn decode(data: &[u8]) -> Option<Decoded<'_>> {
    let raw = u16::from_le_bytes(data.get(..2)?.try_into().ok()?);
    let stamped = raw & STAMPED != 0;
    let bl = (raw & !STAMPED) as usize;
    let bucket = std::str::from_utf8(data.get(2..2 + bl)?).ok()?;
    let rest = &data[2 + bl..];
    let kl = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let key = std::str::from_utf8(rest.get(2..2 + kl)?).ok()?;
    let rest = &rest[2 + kl..];
    let (stamp, record) = if stamped {
        (
            u64::from_le_bytes(rest.get(..8)?.try_into().ok()?),
            &rest[8..],
        )
    } else {
        (0, rest)
    };
    Some(Decoded {
        bucket,
        key,
        stamp,
        record,
    })
}

/// A record read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Its stamp.
    pub stamp: u64,
    /// The record (kind byte and payload; a tombstone too).
    pub record: Bytes,
    /// The tier it was read from.
    pub tier: Tier,
}

/// What a write does when the row already holds a record of the name.
enum Job {
    Put(WriteReq),
    /// Drop the tombstone of this identity if its stamp is this one.
    Purge {
        key: u64,
        alt: u32,
        stamp: u64,
        reply: tokio::sync::oneshot::Sender<Result<bool, String>>,
    },
}

struct WriteReq {
    key: u64,
    alt: u32,
    cookie: u32,
    stamp: u64,
    tier: Tier,
    data: Vec<u8>,
    reply: tokio::sync::oneshot::Sender<Result<bool, String>>,
}

/// One row's segment store and its group-commit writer.
pub struct RowStore {
    row: usize,
    path: PathBuf,
    flash_path: Option<PathBuf>,
    store: Arc<Store>,
    tx: Mutex<mpsc::Sender<Job>>,
    /// Bumped after every batch the writer applies: a reader that saw the
    /// same value before and after its read knows no write raced it (the
    /// RAM cache admits only such reads).
    writes: Arc<AtomicU64>,
}

/// A live record read back while iterating a row (tombstones included).
pub enum Scanned {
    /// A live record.
    Record {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// Stamp.
        stamp: u64,
        /// The record.
        data: Vec<u8>,
    },
    /// A needle whose checksum or framing failed.
    Corrupt(String),
}

impl RowStore {
    fn open(
        row: usize,
        path: PathBuf,
        flash_path: Option<PathBuf>,
        segment_size: u64,
    ) -> Result<RowStore, ClusterError> {
        let mut cfg = StoreConfig::new(&path, Tier::Disk);
        if let Some(f) = &flash_path {
            cfg = cfg.with_device(f, Tier::Flash);
        }
        cfg.create_dirs = true;
        cfg.segment_size = segment_size;
        cfg.max_object_size = 16 << 20;
        let store = Arc::new(Store::open(cfg).map_err(|source| ClusterError::Store {
            row,
            path: path.display().to_string(),
            source,
        })?);
        let (tx, rx) = mpsc::channel::<Job>();
        let writer = store.clone();
        let writes = Arc::new(AtomicU64::new(0));
        let w = writes.clone();
        std::thread::Builder::new()
            .name(format!("row-{row}-writer"))
            .spawn(move || group_commit(&writer, &rx, &w))
            .map_err(|source| ClusterError::Io {
                path: path.display().to_string(),
                source,
            })?;
        Ok(RowStore {
            row,
            path,
            flash_path,
            store,
            tx: Mutex::new(tx),
            writes,
        })
    }

    fn err(&self, source: StoreError) -> ClusterError {
        ClusterError::Store {
            row: self.row,
            path: self.path.display().to_string(),
            source,
        }
    }

    fn gone(&self) -> ClusterError {
        ClusterError::BadRecord {
            row: self.row,
            reason: "the row's writer stopped".into(),
        }
    }

    fn send(&self, job: Job) -> Result<(), ClusterError> {
        let sent = match self.tx.lock() {
            Ok(tx) => tx.send(job).is_ok(),
            Err(_) => false,
        };
        if sent {
            Ok(())
        } else {
            Err(self.gone())
        }
    }

    /// Writes a record (a tombstone too) with `stamp` on `tier` (the disk
    /// tier when the row has no flash); returns once it is durable (batched
    /// with concurrent writes to the row: one fsync per batch and tier).
    /// Returns false, writing nothing, when the row already holds a record
    /// of the name with a newer stamp.
    pub async fn put(
        &self,
        bucket: &str,
        key: &str,
        stamp: u64,
        record: &[u8],
        tier: Tier,
    ) -> Result<bool, ClusterError> {
        let (k, alt, cookie) = identity(bucket, key);
        let (reply, rx) = tokio::sync::oneshot::channel();
        let tier = if self.flash_path.is_some() {
            tier
        } else {
            Tier::Disk
        };
        self.send(Job::Put(WriteReq {
            key: k,
            alt,
            cookie,
            stamp,
            tier,
            data: encode(bucket, key, stamp, record),
            reply,
        }))?;
        match rx.await {
            Ok(Ok(w)) => Ok(w),
            Ok(Err(reason)) => Err(ClusterError::BadRecord {
                row: self.row,
                reason,
            }),
            Err(_) => Err(self.gone()),
        }
    }

    /// Drops the tombstone of `(bucket, key)` if it is still the one with
    /// `stamp` (tombstone garbage collection); returns whether it did.
    pub async fn purge(&self, bucket: &str, key: &str, stamp: u64) -> Result<bool, ClusterError> {
        let (k, alt, _) = identity(bucket, key);
        let (reply, rx) = tokio::sync::oneshot::channel();
        self.send(Job::Purge {
            key: k,
            alt,
            stamp,
            reply,
        })?;
        match rx.await {
            Ok(Ok(w)) => Ok(w),
            Ok(Err(reason)) => Err(ClusterError::BadRecord {
                row: self.row,
                reason,
            }),
            Err(_) => Err(self.gone()),
        }
    }

    /// Reads the record of a name, tombstones included (blocking: call
    /// from a blocking thread).
    pub fn get(&self, bucket: &str, key: &str) -> Result<Option<Stored>, ClusterError> {
        let (k, alt, cookie) = identity(bucket, key);
        let Some(obj) = self.store.get(k, alt, cookie).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        match decode(&obj.data) {
            Some(d) if d.bucket == bucket && d.key == key => Ok(Some(Stored {
                stamp: d.stamp,
                record: Bytes::copy_from_slice(d.record),
                tier: obj.tier,
            })),
            Some(_) => Ok(None),
            None => Err(ClusterError::BadRecord {
                row: self.row,
                reason: format!("needle of {bucket}/{key} has no name header"),
            }),
        }
    }

    /// The write counter (see [`RowStore::get`] and the RAM cache).
    pub fn write_count(&self) -> u64 {
        self.writes.load(Ordering::Acquire)
    }

    /// Visits every live record of the row (tombstones included; blocking),
    /// re-reading and checksum-verifying each needle; damaged needles are
    /// reported as [`Scanned::Corrupt`]. Stops early when `f` returns false.
    pub fn scan(&self, mut f: impl FnMut(Scanned) -> bool) -> Result<(), ClusterError> {
        for seg in self.store.segments() {
            let iter = match self.store.needles(seg.id) {
                Ok(i) => i,
                // Compacted or moved since the listing: its live needles
                // are in a segment the listing also holds.
                Err(_) => continue,
            };
            for item in iter {
                let item = match item {
                    Ok(n) => n,
                    Err(e) => {
                        if !f(Scanned::Corrupt(e.to_string())) {
                            return Ok(());
                        }
                        continue;
                    }
                };
                if !self
                    .store
                    .is_live(seg.id, item.offset, item.key, item.alt_key)
                    .unwrap_or(false)
                {
                    continue;
                }
                let go = match decode(&item.data) {
                    Some(d) => f(Scanned::Record {
                        bucket: d.bucket.to_string(),
                        key: d.key.to_string(),
                        stamp: d.stamp,
                        data: d.record.to_vec(),
                    }),
                    None => f(Scanned::Corrupt(format!(
                        "segment {:016x} offset {}: no name header",
                        seg.id, item.offset
                    ))),
                };
                if !go {
                    return Ok(());
                }
            }
        }
        Ok(())
    }

    /// The row's directory on its disk device.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The row's directory on flash, if the node has flash.
    pub fn flash_path(&self) -> Option<&Path> {
        self.flash_path.as_deref()
    }

    /// The row's segment store (the tier mover moves its flash segments).
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }
}

/// The stamp of the record the store holds for an identity (None: none).
fn current_stamp(store: &Store, key: u64, alt: u32) -> Result<Option<(u64, bool)>, String> {
    match store.get_unchecked(key, alt) {
        Ok(Some(obj)) => {
            Ok(decode(&obj.data)
                .map(|d| (d.stamp, strata_client::protocol::is_tombstone(d.record))))
        }
        Ok(None) => Ok(None),
        // The held copy cannot be read back (a damaged needle): the new
        // record replaces it, as a scrub repair must.
        Err(StoreError::Corrupt { .. }) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

fn group_commit(store: &Store, rx: &mpsc::Receiver<Job>, writes: &AtomicU64) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let mut bytes = 0usize;
        while jobs.len() < BATCH_RECORDS && bytes < BATCH_BYTES {
            match rx.try_recv() {
                Ok(j) => {
                    if let Job::Put(r) = &j {
                        bytes += r.data.len();
                    }
                    jobs.push(j);
                }
                Err(_) => break,
            }
        }
        // Last writer wins by stamp: a record older than what the row (or
        // an earlier record of this batch) holds is answered "not written".
        let mut newest: HashMap<(u64, u32), u64> = HashMap::new();
        let mut keep: Vec<WriteReq> = Vec::new();
        for job in jobs {
            match job {
                Job::Put(r) => {
                    let have = match newest.get(&(r.key, r.alt)) {
                        Some(&s) => Ok(Some(s)),
                        None => current_stamp(store, r.key, r.alt).map(|c| c.map(|(s, _)| s)),
                    };
                    match have {
                        Ok(Some(s)) if s > r.stamp => {
                            let _ = r.reply.send(Ok(false));
                        }
                        Ok(_) => {
                            newest.insert((r.key, r.alt), r.stamp);
                            keep.push(r);
                        }
                        Err(e) => {
                            let _ = r.reply.send(Err(e));
                        }
                    }
                }
                Job::Purge {
                    key,
                    alt,
                    stamp,
                    reply,
                } => {
                    // Earlier puts of this batch first, so the purge sees them.
                    apply(store, std::mem::take(&mut keep), writes);
                    newest.clear();
                    let res = match current_stamp(store, key, alt) {
                        Ok(Some((s, true))) if s == stamp => {
                            store.delete(key, alt).map_err(|e| e.to_string())
                        }
                        Ok(_) => Ok(false),
                        Err(e) => Err(e),
                    };
                    writes.fetch_add(1, Ordering::Release);
                    let _ = reply.send(res);
                }
            }
        }
        apply(store, keep, writes);
    }
}

/// Writes a batch, one `put_batch` (one fsync) per tier, and answers.
fn apply(store: &Store, batch: Vec<WriteReq>, writes: &AtomicU64) {
    if batch.is_empty() {
        return;
    }
    let mut results: Vec<Result<bool, String>> = vec![Ok(true); batch.len()];
    for tier in [Tier::Flash, Tier::Disk] {
        let idx: Vec<usize> = (0..batch.len())
            .filter(|&i| batch[i].tier == tier)
            .collect();
        if idx.is_empty() {
            continue;
        }
        let items: Vec<PutItem<'_>> = idx
            .iter()
            .map(|&i| PutItem {
                key: batch[i].key,
                alt_key: batch[i].alt,
                cookie: batch[i].cookie,
                data: &batch[i].data,
            })
            .collect();
        let res = store.put_batch(tier, &items).map_err(|e| e.to_string());
        for &i in &idx {
            results[i] = res.clone().map(|()| true);
        }
    }
    writes.fetch_add(1, Ordering::Release);
    for (r, res) in batch.into_iter().zip(results) {
        let _ = r.reply.send(res);
    }
}

/// The row stores of one disk device.
pub struct RowStores {
    dir: PathBuf,
    flash: Vec<PathBuf>,
    segment_size: u64,
    open: Mutex<HashMap<usize, Arc<RowStore>>>,
}

/// Prefix of a row directory being removed (a crash leaves it for the next
/// start to finish).
const TRASH: &str = "trash-";

impl RowStores {
    /// Row stores under `disk/rows/`, with the flash tier of each row under
    /// `flash[row % flash.len()]/rows/` when `flash` is not empty. Removals
    /// a crash interrupted are finished here.
    pub fn new(disk: &Path, flash: &[PathBuf], segment_size: u64) -> RowStores {
        let s = RowStores {
            dir: disk.join("rows"),
            flash: flash.iter().map(|f| f.join("rows")).collect(),
            segment_size,
            open: Mutex::new(HashMap::new()),
        };
        for d in std::iter::once(&s.dir).chain(s.flash.iter()) {
            if let Ok(rd) = std::fs::read_dir(d) {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().starts_with(TRASH) {
                        let _ = std::fs::remove_dir_all(e.path());
                    }
                }
            }
        }
        s
    }

    fn row_dir(&self, row: usize) -> PathBuf {
        self.dir.join(format!("{row:08}"))
    }

    fn flash_dir(&self, row: usize) -> Option<PathBuf> {
        if self.flash.is_empty() {
            None
        } else {
            Some(self.flash[row % self.flash.len()].join(format!("{row:08}")))
        }
    }

    /// The store of `row`, opened (or created) on first use. Blocking.
    pub fn row(&self, row: usize) -> Result<Arc<RowStore>, ClusterError> {
        let mut open = match self.open.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if let Some(s) = open.get(&row) {
            return Ok(s.clone());
        }
        let s = Arc::new(RowStore::open(
            row,
            self.row_dir(row),
            self.flash_dir(row),
            self.segment_size,
        )?);
        open.insert(row, s.clone());
        Ok(s)
    }

    /// The store of `row` if it exists on disk. Blocking.
    pub fn existing(&self, row: usize) -> Result<Option<Arc<RowStore>>, ClusterError> {
        if self.row_dir(row).is_dir() {
            self.row(row).map(Some)
        } else {
            Ok(None)
        }
    }

    /// Rows with a directory on this disk.
    pub fn rows_on_disk(&self) -> Vec<usize> {
        let mut out: Vec<usize> = std::fs::read_dir(&self.dir)
            .map(|rd| {
                rd.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse::<usize>().ok())
                    .collect()
            })
            .unwrap_or_default();
        out.sort_unstable();
        out
    }

    /// The stores opened so far.
    pub fn opened(&self) -> Vec<Arc<RowStore>> {
        match self.open.lock() {
            Ok(g) => g.values().cloned().collect(),
            Err(p) => p.into_inner().values().cloned().collect(),
        }
    }

    /// Removes row `row` from this disk (and its flash directory): the
    /// store is closed, each directory is renamed to `trash-…` (atomic; the
    /// parent directory is synced) and then deleted. A crash in between
    /// leaves a trash directory that [`RowStores::new`] deletes. Call only
    /// once another disk holds the row durably (docs/recovery.md).
    pub fn remove_row(&self, row: usize) -> Result<(), ClusterError> {
        let store = match self.open.lock() {
            Ok(mut g) => g.remove(&row),
            Err(p) => p.into_inner().remove(&row),
        };
        drop(store);
        let io = |path: &Path| {
            let path = path.display().to_string();
            move |source| ClusterError::Io { path, source }
        };
        let dirs: Vec<PathBuf> = std::iter::once(self.row_dir(row))
            .chain(self.flash_dir(row))
            .filter(|d| d.exists())
            .collect();
        for d in dirs {
            let parent = d.parent().map(Path::to_path_buf).unwrap_or_default();
            let trash = parent.join(format!("{TRASH}{row:08}-{}", std::process::id()));
            std::fs::rename(&d, &trash).map_err(io(&d))?;
            if let Ok(f) = std::fs::File::open(&parent) {
                let _ = f.sync_all();
            }
            std::fs::remove_dir_all(&trash).map_err(io(&trash))?;
        }
        Ok(())
    }

    /// The disk's `rows/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The `rows/` directories on the node's flash devices.
    pub fn flash_dirs(&self) -> &[PathBuf] {
        &self.flash
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn needle_layouts_round_trip() {
        let n = encode("b", "k", 42, b"\x00hello");
        let d = decode(&n).unwrap();
        assert_eq!(
            (d.bucket, d.key, d.stamp, d.record),
            ("b", "k", 42, &b"\x00hello"[..])
        );
        // The first layout (no stamp) still reads, as stamp 0.
        let mut old = Vec::new();
        old.extend_from_slice(&1u16.to_le_bytes());
        old.extend_from_slice(b"b");
        old.extend_from_slice(&1u16.to_le_bytes());
        old.extend_from_slice(b"k");
        old.extend_from_slice(b"\x00x");
        let d = decode(&old).unwrap();
        assert_eq!((d.stamp, d.record), (0, &b"\x00x"[..]));
        assert!(decode(&n[..n.len() - 7]).is_none());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn newest_stamp_wins_whatever_the_order() {
        let d = tempfile::tempdir().unwrap();
        let flash = d.path().join("flash");
        let rows = RowStores::new(&d.path().join("disk"), &[flash], 1 << 20);
        let s = rows.row(3).unwrap();
        assert!(s.put("b", "k", 10, b"\x00v10", Tier::Flash).await.unwrap());
        // A tombstone newer than the object replaces it ...
        assert!(s.put("b", "k", 20, &[2], Tier::Disk).await.unwrap());
        // ... and an older copy arriving later (a recovery stream) loses.
        assert!(!s.put("b", "k", 10, b"\x00v10", Tier::Disk).await.unwrap());
        let got = s.get("b", "k").unwrap().unwrap();
        assert_eq!((got.stamp, &got.record[..]), (20, &[2u8][..]));
        // A newer put wins over the tombstone.
        assert!(s.put("b", "k", 30, b"\x00v30", Tier::Flash).await.unwrap());
        let got = s.get("b", "k").unwrap().unwrap();
        assert_eq!((got.stamp, got.tier), (30, Tier::Flash));
        // Purge drops only the tombstone it names.
        assert!(!s.purge("b", "k", 30).await.unwrap());
        assert!(s.put("b", "k", 40, &[2], Tier::Disk).await.unwrap());
        assert!(!s.purge("b", "k", 39).await.unwrap());
        assert!(s.purge("b", "k", 40).await.unwrap());
        assert!(s.get("b", "k").unwrap().is_none());
        let mut n = 0;
        s.scan(|_| {
            n += 1;
            true
        })
        .unwrap();
        assert_eq!(n, 0);
        // Removal is complete and a fresh store of the row starts empty.
        rows.remove_row(3).unwrap();
        assert!(rows.rows_on_disk().is_empty());
        assert!(!d.path().join("flash/rows/00000003").exists());
        assert!(rows.row(3).unwrap().get("b", "k").unwrap().is_none());
    }
}
