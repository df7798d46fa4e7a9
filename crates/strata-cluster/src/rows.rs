//! One segment store per placement row on a node's disk, with group commit.
//!
//! Layout: `DISK/rows/RRRRRRRR/` (row number, 8 digits) holds the row's
//! segment files (docs/store-format.md). A record named `(bucket, key)` is
//! a needle whose key and alternate key are the low 96 bits of XXH3-128 over
//! `bucket`, NUL, `key` (cookie: the next 32 bits), and whose data is the
//! bucket length (u16 LE), the bucket, the key length (u16 LE), the key,
//! then the record; the names are compared on every read, so a hash
//! collision reads as absent, never as the wrong object.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use strata_store::{PutItem, Store, StoreConfig, StoreError, Tier};

use crate::ClusterError;

/// Most records one group commit writes with one fsync.
const BATCH_RECORDS: usize = 512;
/// Most bytes one group commit writes.
const BATCH_BYTES: usize = 16 << 20;

/// The engine identity of a record.
pub fn identity(bucket: &str, key: &str) -> (u64, u32, u32) {
    let mut buf = Vec::with_capacity(bucket.len() + 1 + key.len());
    buf.extend_from_slice(bucket.as_bytes());
    buf.push(0);
    buf.extend_from_slice(key.as_bytes());
    let h = xxhash_rust::xxh3::xxh3_128(&buf);
    (h as u64, (h >> 64) as u32, (h >> 96) as u32)
}

/// Needle data of a record.
pub fn encode(bucket: &str, key: &str, record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + bucket.len() + key.len() + record.len());
    out.extend_from_slice(&(bucket.len() as u16).to_le_bytes());
    out.extend_from_slice(bucket.as_bytes());
    out.extend_from_slice(&(key.len() as u16).to_le_bytes());
    out.extend_from_slice(key.as_bytes());
    out.extend_from_slice(record);
    out
}

/// Splits needle data into (bucket, key, record).
pub fn decode(data: &[u8]) -> Option<(&str, &str, &[u8])> {
    let bl = u16::from_le_bytes(data.get(..2)?.try_into().ok()?) as usize;
    let bucket = std::str::from_utf8(data.get(2..2 + bl)?).ok()?;
    let rest = &data[2 + bl..];
    let kl = u16::from_le_bytes(rest.get(..2)?.try_into().ok()?) as usize;
    let key = std::str::from_utf8(rest.get(2..2 + kl)?).ok()?;
    Some((bucket, key, &rest[2 + kl..]))
}

struct WriteReq {
    key: u64,
    alt: u32,
    cookie: u32,
    data: Vec<u8>,
    reply: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// One row's segment store and its group-commit writer.
pub struct RowStore {
    row: usize,
    path: PathBuf,
    store: Arc<Store>,
    tx: Mutex<mpsc::Sender<WriteReq>>,
}

/// A live record read back while iterating a row.
pub enum Scanned {
    /// A live record.
    Record {
        /// Bucket.
        bucket: String,
        /// Key.
        key: String,
        /// The record.
        data: Vec<u8>,
    },
    /// A needle whose checksum or framing failed.
    Corrupt(String),
}

impl RowStore {
    fn open(row: usize, path: PathBuf, tier: Tier) -> Result<RowStore, ClusterError> {
        let mut cfg = StoreConfig::new(&path, tier);
        cfg.create_dirs = true;
        cfg.segment_size = 64 << 20;
        cfg.max_object_size = 16 << 20;
        let store = Arc::new(Store::open(cfg).map_err(|source| ClusterError::Store {
            row,
            path: path.display().to_string(),
            source,
        })?);
        let (tx, rx) = mpsc::channel::<WriteReq>();
        let writer = store.clone();
        std::thread::Builder::new()
            .name(format!("row-{row}-writer"))
            .spawn(move || group_commit(&writer, &rx))
            .map_err(|source| ClusterError::Io {
                path: path.display().to_string(),
                source,
            })?;
        Ok(RowStore {
            row,
            path,
            store,
            tx: Mutex::new(tx),
        })
    }

    fn err(&self, source: StoreError) -> ClusterError {
        ClusterError::Store {
            row: self.row,
            path: self.path.display().to_string(),
            source,
        }
    }

    /// Writes a record; returns once it is durable (batched with concurrent
    /// writes to the same row: one fsync per batch).
    pub async fn put(&self, bucket: &str, key: &str, record: &[u8]) -> Result<(), ClusterError> {
        let (k, alt, cookie) = identity(bucket, key);
        let (reply, rx) = tokio::sync::oneshot::channel();
        let req = WriteReq {
            key: k,
            alt,
            cookie,
            data: encode(bucket, key, record),
            reply,
        };
        let sent = match self.tx.lock() {
            Ok(tx) => tx.send(req).is_ok(),
            Err(_) => false,
        };
        let gone = || ClusterError::BadRecord {
            row: self.row,
            reason: "the row's writer stopped".into(),
        };
        if !sent {
            return Err(gone());
        }
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(ClusterError::BadRecord {
                row: self.row,
                reason,
            }),
            Err(_) => Err(gone()),
        }
    }

    /// Reads a record (blocking: call from a blocking thread).
    pub fn get(&self, bucket: &str, key: &str) -> Result<Option<Bytes>, ClusterError> {
        let (k, alt, cookie) = identity(bucket, key);
        let Some(obj) = self.store.get(k, alt, cookie).map_err(|e| self.err(e))? else {
            return Ok(None);
        };
        match decode(&obj.data) {
            Some((b, n, rec)) if b == bucket && n == key => Ok(Some(Bytes::copy_from_slice(rec))),
            Some(_) => Ok(None),
            None => Err(ClusterError::BadRecord {
                row: self.row,
                reason: format!("needle of {bucket}/{key} has no name header"),
            }),
        }
    }

    /// Deletes a record (blocking).
    pub fn delete(&self, bucket: &str, key: &str) -> Result<bool, ClusterError> {
        let (k, alt, _) = identity(bucket, key);
        self.store.delete(k, alt).map_err(|e| self.err(e))
    }

    /// Visits every live record of the row (blocking), re-reading and
    /// checksum-verifying each needle; damaged needles are reported as
    /// [`Scanned::Corrupt`]. Stops early when `f` returns false.
    pub fn scan(&self, mut f: impl FnMut(Scanned) -> bool) -> Result<(), ClusterError> {
        for seg in self.store.segments() {
            let iter = match self.store.needles(seg.id) {
                Ok(i) => i,
                // Compacted away since the listing: its live needles moved
                // to a newer segment, which the listing also holds.
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
                    Some((b, k, rec)) => f(Scanned::Record {
                        bucket: b.to_string(),
                        key: k.to_string(),
                        data: rec.to_vec(),
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

    /// The row's directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn group_commit(store: &Store, rx: &mpsc::Receiver<WriteReq>) {
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let mut bytes = batch[0].data.len();
        while batch.len() < BATCH_RECORDS && bytes < BATCH_BYTES {
            match rx.try_recv() {
                Ok(r) => {
                    bytes += r.data.len();
                    batch.push(r);
                }
                Err(_) => break,
            }
        }
        let items: Vec<PutItem<'_>> = batch
            .iter()
            .map(|r| PutItem {
                key: r.key,
                alt_key: r.alt,
                cookie: r.cookie,
                data: &r.data,
            })
            .collect();
        let tier = store
            .config()
            .devices
            .first()
            .map_or(Tier::Disk, |d| d.tier);
        let res = store.put_batch(tier, &items).map_err(|e| e.to_string());
        drop(items);
        for r in batch {
            let _ = r.reply.send(res.clone());
        }
    }
}

/// The row stores of one disk.
pub struct RowStores {
    dir: PathBuf,
    tier: Tier,
    open: Mutex<HashMap<usize, Arc<RowStore>>>,
}

impl RowStores {
    /// Row stores under `disk/rows/`.
    pub fn new(disk: &Path, tier: Tier) -> RowStores {
        RowStores {
            dir: disk.join("rows"),
            tier,
            open: Mutex::new(HashMap::new()),
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
            self.dir.join(format!("{row:08}")),
            self.tier,
        )?);
        open.insert(row, s.clone());
        Ok(s)
    }

    /// The store of `row` if it exists on disk. Blocking.
    pub fn existing(&self, row: usize) -> Result<Option<Arc<RowStore>>, ClusterError> {
        if self.dir.join(format!("{row:08}")).is_dir() {
            self.row(row).map(Some)
        } else {
            Ok(None)
        }
    }

    /// The disk's `rows/` directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
