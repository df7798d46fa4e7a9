//! Where the state lives: a file for a single node (no extra process), or
//! etcd for a cluster (docs/placement.md, "Metadata storage").

use std::path::{Path, PathBuf};

use strata_placement::PlacementTable;

use crate::etcd::{Compare, EtcdClient, EtcdError, Op};
use crate::journal::Change;
use crate::state::{ClusterState, STATE_FORMAT};
use crate::MetaError;

/// Table versions kept in etcd besides the current one.
const KEEP_VERSIONS: u64 = 16;

/// The metadata store.
pub enum Backend {
    /// One JSON file, replaced atomically (write, fsync, rename).
    File(FileBackend),
    /// etcd v3.
    Etcd(Box<EtcdBackend>),
}

impl Backend {
    /// Loads the saved state, if any.
    pub async fn load(&mut self) -> Result<Option<ClusterState>, MetaError> {
        match self {
            Backend::File(f) => f.load().await,
            Backend::Etcd(e) => e.load().await,
        }
    }

    /// Saves `next` (durably, before the change is acknowledged): what
    /// differs from `prev`, the state as last loaded or saved (None: all
    /// of it).
    pub async fn save(
        &mut self,
        prev: Option<&ClusterState>,
        next: &ClusterState,
    ) -> Result<(), MetaError> {
        match self {
            Backend::File(f) => f.save(prev, next).await,
            Backend::Etcd(e) => e.save(prev, next).await,
        }
    }

    /// Connects to etcd at `endpoint` and keeps the state under `prefix`.
    pub async fn etcd(endpoint: &str, prefix: &str) -> Result<Backend, MetaError> {
        Ok(Backend::Etcd(Box::new(
            EtcdBackend::connect(endpoint, prefix).await?,
        )))
    }

    /// "file:PATH" or "etcd:URL".
    pub fn describe(&self) -> String {
        match self {
            Backend::File(f) => format!("file:{}", f.path.display()),
            Backend::Etcd(e) => format!("etcd:{}{}", e.endpoint, e.prefix),
        }
    }
}

/// The embedded store: `DIR/meta.json`, a snapshot of the whole state, and
/// `DIR/meta.log`, the changes since it (crate::journal, which documents
/// the log byte by byte).
///
/// A save appends one frame of what changed and fdatasyncs it: a bucket
/// creation costs its own bytes, whatever the state's size (before issue
/// 34 every save replaced the whole file: 25 creations a second at 9,000
/// buckets). When the log has grown past the snapshot (and past 1 MiB) the
/// state is written as a new snapshot and the log begins again.
///
/// A node's metadata lives on the node's own volume, so the files must be
/// writable when that volume is full (a node killed on a full volume
/// registers again at start, and waits for that write): beside them,
/// `DIR/meta.reserve` holds zeros that are given back to the file system
/// when a write meets ENOSPC, then the write is tried again, and the
/// reserve is filled again afterwards as far as free space allows. A save
/// of the state the files already hold writes nothing.
pub struct FileBackend {
    inner: std::sync::Arc<std::sync::Mutex<FileInner>>,
    path: PathBuf,
}

/// A log longer than this and than the snapshot is compacted.
const COMPACT_MIN: u64 = 1 << 20;

/// The files, and where the log stands.
struct FileInner {
    path: PathBuf,
    log: PathBuf,
    reserve: PathBuf,
    /// Bytes of the snapshot as last read or written.
    snapshot_len: u64,
    /// Where the next frame goes in the log; None when the next save must
    /// write a snapshot (none of this format yet, no log for it, or an
    /// append or compaction that failed part-way).
    log_end: Option<u64>,
    /// The last batch's number in the log.
    seq: u64,
    /// [`COMPACT_MIN`] (smaller in tests).
    compact_min: u64,
}

/// What a save writes.
enum Write {
    /// One frame at the log's end.
    Append(Vec<u8>),
    /// A new snapshot of these bytes, and a new log for it.
    Snapshot(Vec<u8>),
}

/// The smallest space kept in `meta.reserve`; it is also at least twice
/// the state file's size, room for the new copy beside the old one.
const RESERVE_MIN: u64 = 256 << 10;

/// A file system block, the unit files take space in.
const PAGE: u64 = 4096;

fn lock(m: &std::sync::Mutex<FileInner>) -> std::sync::MutexGuard<'_, FileInner> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

fn file_err(path: &Path) -> impl Fn(std::io::Error) -> MetaError + '_ {
    move |source| MetaError::File {
        path: path.display().to_string(),
        source,
    }
}

impl FileBackend {
    /// State kept in `dir/meta.json` and `dir/meta.log` (the directory is
    /// created). The directory is made the service's user's only (0700, an
    /// older one included): the state holds the S3 keys' secrets (issue
    /// 34).
    pub fn new(dir: &Path) -> Result<FileBackend, MetaError> {
        use std::os::unix::fs::PermissionsExt;
        strata_fs::create_dir_all(dir)
            .and_then(|_| std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)))
            .map_err(file_err(dir))?;
        let path = dir.join("meta.json");
        Ok(FileBackend {
            inner: std::sync::Arc::new(std::sync::Mutex::new(FileInner {
                path: path.clone(),
                log: dir.join("meta.log"),
                reserve: dir.join("meta.reserve"),
                snapshot_len: 0,
                log_end: None,
                seq: 0,
                compact_min: COMPACT_MIN,
            })),
            path,
        })
    }

    async fn load(&self) -> Result<Option<ClusterState>, MetaError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || lock(&inner).load())
            .await
            .map_err(|e| file_err(&self.path)(std::io::Error::other(e)))?
    }

    async fn save(
        &self,
        prev: Option<&ClusterState>,
        next: &ClusterState,
    ) -> Result<(), MetaError> {
        // What to write is worked out here (CPU), and written on a
        // blocking thread.
        let (log_end, seq) = {
            let g = lock(&self.inner);
            (g.log_end, g.seq)
        };
        let write = match (prev, log_end) {
            (Some(prev), Some(_)) => {
                let changes = crate::journal::diff(prev, next);
                if changes.is_empty() {
                    return Ok(());
                }
                let batch = crate::journal::Batch {
                    seq: seq + 1,
                    changes,
                };
                Write::Append(crate::journal::frame(&encode(&batch, &self.path)?))
            }
            _ => Write::Snapshot(snapshot_bytes(next, &self.path)?),
        };
        let compact = self.write(write).await?;
        if compact {
            // The change is durable in the log already: a failed compaction
            // only makes the next save write the snapshot.
            let bytes = snapshot_bytes(next, &self.path)?;
            if let Err(e) = self.write(Write::Snapshot(bytes)).await {
                eprintln!("strata meta: compacting {}: {e}", self.path.display());
            }
        }
        Ok(())
    }

    /// Writes `w`; whether the log should now be compacted.
    async fn write(&self, w: Write) -> Result<bool, MetaError> {
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || {
            let mut g = lock(&inner);
            match w {
                Write::Append(frame) => g.append(&frame).map(|()| g.wants_compaction()),
                Write::Snapshot(bytes) => g.snapshot(&bytes).map(|()| false),
            }
        })
        .await
        .map_err(|e| file_err(&self.path)(std::io::Error::other(e)))?
    }
}

fn encode<T: serde::Serialize>(v: &T, path: &Path) -> Result<Vec<u8>, MetaError> {
    serde_json::to_vec(v).map_err(|e| unencodable(path, e))
}

fn unencodable(path: &Path, e: serde_json::Error) -> MetaError {
    MetaError::Corrupt {
        what: path.display().to_string(),
        reason: e.to_string(),
    }
}

/// The snapshot's bytes for `state` (of this build's format: a loaded
/// state is given it at load, a new one has it).
fn snapshot_bytes(state: &ClusterState, path: &Path) -> Result<Vec<u8>, MetaError> {
    debug_assert_eq!(state.format, STATE_FORMAT);
    let mut bytes = serde_json::to_vec_pretty(state).map_err(|e| unencodable(path, e))?;
    bytes.push(b'\n');
    Ok(bytes)
}

impl FileInner {
    /// A fresh handle on the same files (tests read a store as a new
    /// process would).
    #[cfg(test)]
    fn clone_paths(&self) -> FileInner {
        FileInner {
            path: self.path.clone(),
            log: self.log.clone(),
            reserve: self.reserve.clone(),
            snapshot_len: 0,
            log_end: None,
            seq: 0,
            compact_min: self.compact_min,
        }
    }

    fn wants_compaction(&self) -> bool {
        self.log_end
            .is_some_and(|end| end > self.compact_min.max(self.snapshot_len))
    }

    /// Reads the snapshot and applies the log written for it, cutting off
    /// a torn last frame.
    fn load(&mut self) -> Result<Option<ClusterState>, MetaError> {
        self.log_end = None;
        self.seq = 0;
        let Some(bytes) = strata_fs::read_if_exists(&self.path).map_err(file_err(&self.path))?
        else {
            return Ok(None);
        };
        let what = self.path.display().to_string();
        let mut state = decode_state(&bytes, &what)?;
        self.snapshot_len = bytes.len() as u64;
        // A store made before the reserve existed gets one now (as far as
        // free space allows; never an error).
        top_up(&self.reserve, reserve_size(bytes.len()));
        if state.format != STATE_FORMAT {
            // Format 1 had no log: the first save writes a snapshot of
            // this format (and a log for it).
            state.format = STATE_FORMAT;
            return Ok(Some(state));
        }
        let Some(log) = strata_fs::read_if_exists(&self.log).map_err(file_err(&self.log))? else {
            // Cut between a snapshot and its log: the snapshot is whole.
            return Ok(Some(state));
        };
        let log_what = self.log.display().to_string();
        let read = crate::journal::read_log(&log).map_err(|(at, reason)| MetaError::Corrupt {
            what: format!("{log_what} at byte {at}"),
            reason: format!(
                "{reason} (the log's later changes cannot be trusted; move the file away to start from {what} alone)"
            ),
        })?;
        let header: crate::journal::Header =
            serde_json::from_slice(read.header).map_err(|e| MetaError::Corrupt {
                what: format!("{log_what} header"),
                reason: e.to_string(),
            })?;
        if header.snapshot != crate::journal::snapshot_digest(&bytes) {
            // The log of an older snapshot (a compaction cut after the new
            // snapshot): everything in it is in the snapshot already.
            return Ok(Some(state));
        }
        for body in &read.batches {
            let batch: crate::journal::Batch =
                serde_json::from_slice(body).map_err(|e| MetaError::Corrupt {
                    what: format!("{log_what} batch {}", self.seq + 1),
                    reason: e.to_string(),
                })?;
            self.seq = batch.seq;
            for c in batch.changes {
                crate::journal::apply(&mut state, c);
            }
        }
        if read.valid_len < log.len() {
            eprintln!(
                "strata meta: {log_what}: cutting off a torn last write ({} bytes at byte {})",
                log.len() - read.valid_len,
                read.valid_len
            );
            strata_fs::open(&self.log, std::fs::OpenOptions::new().write(true))
                .and_then(|f| {
                    strata_fs::set_len(&f, read.valid_len as u64)?;
                    strata_fs::sync_data(&f)
                })
                .map_err(file_err(&self.log))?;
        }
        self.log_end = Some(read.valid_len as u64);
        Ok(Some(state))
    }

    /// Appends one frame and makes it durable. A failure leaves the log
    /// to be replaced by the next save's snapshot.
    fn append(&mut self, frame: &[u8]) -> Result<(), MetaError> {
        let Some(end) = self.log_end.take() else {
            return Err(MetaError::Corrupt {
                what: self.log.display().to_string(),
                reason: "an append with no log open (a snapshot must come first)".into(),
            });
        };
        let log = self.log.clone();
        let write = || {
            strata_fs::open(&log, std::fs::OpenOptions::new().write(true)).and_then(|f| {
                strata_fs::write_all_at(&f, frame, end)?;
                strata_fs::sync_data(&f)
            })
        };
        with_reserve(&self.reserve, frame.len() as u64 + 2 * PAGE, &log, write)
            .map_err(file_err(&self.log))?;
        self.log_end = Some(end + frame.len() as u64);
        self.seq += 1;
        top_up(&self.reserve, reserve_size(self.snapshot_len as usize));
        Ok(())
    }

    /// Replaces the snapshot with `bytes` and begins a new log for it.
    fn snapshot(&mut self, bytes: &[u8]) -> Result<(), MetaError> {
        self.log_end = None;
        save_with_reserve(&self.path, &self.reserve, bytes).map_err(file_err(&self.path))?;
        self.snapshot_len = bytes.len() as u64;
        let log = crate::journal::new_log(bytes);
        let log_path = self.log.clone();
        with_reserve(
            &self.reserve,
            log.len() as u64 + 2 * PAGE,
            &log_path,
            || write_atomically(&log_path, &log),
        )
        .map_err(file_err(&self.log))?;
        self.log_end = Some(log.len() as u64);
        self.seq = 0;
        Ok(())
    }
}

/// Bytes kept in reserve for a state file of `len` bytes.
fn reserve_size(len: usize) -> u64 {
    (2 * len as u64).max(RESERVE_MIN)
}

fn is_no_space(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(28) | Some(27))
}

/// Runs `write`; on ENOSPC gives `need` bytes of the reserve back and runs
/// it once more.
fn with_reserve(
    reserve: &Path,
    need: u64,
    what: &Path,
    write: impl Fn() -> std::io::Result<()>,
) -> std::io::Result<()> {
    match write() {
        Ok(()) => Ok(()),
        Err(e) if is_no_space(&e) => {
            // Give back only what this write needs, so that the reserve
            // lasts over many writes on a full volume: each spends the
            // state's growth, and a replaced copy's blocks go back to the
            // reserve afterwards.
            let have = std::fs::metadata(reserve).map_or(0, |m| m.len());
            if have == 0 {
                // No reserve to give back: the volume is simply full.
                return Err(e);
            }
            std::fs::OpenOptions::new()
                .write(true)
                .open(reserve)
                .and_then(|f| {
                    strata_fs::set_len(&f, have.saturating_sub(need))?;
                    strata_fs::sync_all(&f)
                })?;
            eprintln!(
                "strata meta: {} met a full volume; writing it in the space reserved for it ({})",
                what.display(),
                reserve.display()
            );
            write()
        }
        Err(e) => Err(e),
    }
}

/// Writes `bytes` to `path` atomically; on ENOSPC gives the reserve back
/// and tries once more; then fills the reserve again (best effort).
fn save_with_reserve(path: &Path, reserve: &Path, bytes: &[u8]) -> std::io::Result<()> {
    with_reserve(reserve, bytes.len() as u64 + 2 * PAGE, path, || {
        write_atomically(path, bytes)
    })?;
    top_up(reserve, reserve_size(bytes.len()));
    Ok(())
}

/// Grows the reserve file to `want` bytes of real (written, not sparse)
/// blocks, as far as free space allows; never fails.
fn top_up(reserve: &Path, want: u64) {
    let have = std::fs::metadata(reserve).map_or(0, |m| m.len());
    if have >= want {
        return;
    }
    let Ok(f) = strata_fs::open(
        reserve,
        std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true),
    ) else {
        return;
    };
    let zeros = [0u8; 4096];
    let mut at = have;
    while at < want {
        let n = (want - at).min(zeros.len() as u64) as usize;
        if strata_fs::write_all_at(&f, &zeros[..n], at).is_err() {
            break;
        }
        at += n as u64;
    }
    let _ = strata_fs::sync_all(&f);
}

/// [`strata_fs::write_atomic`]: a temporary file, fsync, rename, directory
/// fsync (a failed write removes the temporary file: a partial copy would
/// hold space a retry needs).
///
/// The file is readable by the service's user only (0600, set on the
/// temporary file before its bytes): it holds the S3 keys' secrets.
fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    strata_fs::write_atomic_with(path, |f| {
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        strata_fs::write_all_at(f, bytes, 0)
    })
}

fn decode_state(bytes: &[u8], what: &str) -> Result<ClusterState, MetaError> {
    let s: ClusterState = serde_json::from_slice(bytes).map_err(|e| MetaError::Corrupt {
        what: what.to_string(),
        reason: e.to_string(),
    })?;
    // Format 1 had no log and, in etcd, the whole state in one key.
    if s.format != STATE_FORMAT && s.format != 1 {
        return Err(MetaError::Corrupt {
            what: what.to_string(),
            reason: format!(
                "state format {} (this build reads {STATE_FORMAT})",
                s.format
            ),
        });
    }
    Ok(s)
}

/// The cluster store: keys under a prefix in etcd (format 2).
///
/// - `PREFIX/state`: the core of the state as JSON (crate::journal: the
///   state without its buckets, keys, stripes, scrub reports and table);
/// - `PREFIX/e/bucket/NAME`, `PREFIX/e/key/ID`,
///   `PREFIX/e/stripe/SSSSSSSSSSSSSSSSSSSS` (20 digits),
///   `PREFIX/e/scrub/NNNNNNNNNN` (10 digits): one entry each, as JSON;
/// - `PREFIX/table/current`: the current table version (decimal);
/// - `PREFIX/table/VVVVVVVVVVVVVVVVVVVV`: each table version as JSON
///   (20-digit zero-padded version; the last 16 are kept);
/// - `PREFIX/saves`: the number of saves, put by every save.
///
/// A save writes what changed, in one transaction guarded by the `saves`
/// key's revision, so two metadata services on one prefix cannot overwrite
/// each other. One of more than [`TXN_OPS`] operations (etcd refuses more
/// than 128 in one) is written in transactions of that many entries, each
/// guarded and advancing `saves`, the core last: a cut part-way leaves
/// entries of a change not yet acknowledged, never a core that counts
/// stripes or nodes its entries lack. Format 1 kept the whole state in
/// `state`; it is read as it is, and its first save moves the entries to
/// their keys.
pub struct EtcdBackend {
    client: EtcdClient,
    endpoint: String,
    prefix: String,
    /// mod_revision of the `saves` key as last read or written (0: absent).
    revision: i64,
    /// mod_revision of the `state` key as last read (format 1's guard).
    state_revision: i64,
    /// Whether the prefix holds format 1 (the whole state in `state`).
    old_layout: bool,
    /// Saves made on this prefix.
    saves: u64,
}

/// The most operations of one etcd transaction Strata sends (etcd's
/// default `--max-txn-ops` is 128).
pub const TXN_OPS: usize = 100;

/// Entries read per range request at load.
const RANGE_PAGE: i64 = 1000;

impl EtcdBackend {
    /// Connects to etcd at `endpoint` (e.g. `http://127.0.0.1:2379`).
    pub async fn connect(endpoint: &str, prefix: &str) -> Result<EtcdBackend, MetaError> {
        let client = EtcdClient::connect(endpoint)
            .await
            .map_err(|source| MetaError::Etcd {
                endpoint: endpoint.to_string(),
                source,
            })?;
        Ok(EtcdBackend {
            client,
            endpoint: endpoint.to_string(),
            prefix: prefix.trim_end_matches('/').to_string(),
            revision: 0,
            state_revision: 0,
            old_layout: false,
            saves: 0,
        })
    }

    fn key(&self, k: &str) -> String {
        format!("{}/{k}", self.prefix)
    }

    fn table_key(&self, v: u64) -> String {
        self.key(&format!("table/{v:020}"))
    }

    fn entry_key(&self, c: &Change) -> Option<String> {
        Some(match c {
            Change::Core(_) => return None,
            Change::Bucket { name, .. } => self.key(&format!("e/bucket/{name}")),
            Change::Key { id, .. } => self.key(&format!("e/key/{id}")),
            Change::Stripe { id, .. } => self.key(&format!("e/stripe/{id:020}")),
            Change::Scrub { node, .. } => self.key(&format!("e/scrub/{node:010}")),
        })
    }

    fn err(&self, source: EtcdError) -> MetaError {
        MetaError::Etcd {
            endpoint: self.endpoint.clone(),
            source,
        }
    }

    /// The entry stored under `key` (after the prefix's `e/`).
    fn decode_entry(&self, key: &str, value: &[u8]) -> Result<Change, MetaError> {
        let bad = |reason: String| MetaError::Corrupt {
            what: self.key(&format!("e/{key}")),
            reason,
        };
        let json = |e: serde_json::Error| bad(e.to_string());
        let (kind, name) = key
            .split_once('/')
            .ok_or_else(|| bad("not KIND/NAME".into()))?;
        let number = |s: &str| -> Result<u64, MetaError> {
            s.parse().map_err(|_| bad(format!("{s:?} is not a number")))
        };
        Ok(match kind {
            "bucket" => Change::Bucket {
                name: name.to_string(),
                record: Some(serde_json::from_slice(value).map_err(json)?),
            },
            "key" => Change::Key {
                id: name.to_string(),
                record: Some(serde_json::from_slice(value).map_err(json)?),
            },
            "stripe" => Change::Stripe {
                id: number(name)?,
                record: Some(serde_json::from_slice(value).map_err(json)?),
            },
            "scrub" => Change::Scrub {
                node: u32::try_from(number(name)?).map_err(|e| bad(e.to_string()))?,
                report: Some(serde_json::from_slice(value).map_err(json)?),
            },
            other => return Err(bad(format!("unknown entry kind {other:?}"))),
        })
    }

    async fn load(&mut self) -> Result<Option<ClusterState>, MetaError> {
        let saves_key = self.key("saves");
        let state_key = self.key("state");
        // Every read at one revision: the state as one save left it.
        let first = self
            .client
            .range(saves_key.as_bytes(), None, 0, 1)
            .await
            .map_err(|e| self.err(e))?;
        let at = first.revision;
        let (revision, saves) = match first.kvs.first() {
            Some((_, kv)) => (
                kv.mod_revision,
                std::str::from_utf8(&kv.value)
                    .ok()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0),
            ),
            None => (0, 0),
        };
        self.revision = revision;
        self.saves = saves;
        let got = self
            .client
            .range(state_key.as_bytes(), None, at, 1)
            .await
            .map_err(|e| self.err(e))?;
        let Some((_, kv)) = got.kvs.into_iter().next() else {
            self.state_revision = 0;
            self.old_layout = false;
            return Ok(None);
        };
        self.state_revision = kv.mod_revision;
        let mut state = decode_state(&kv.value, &state_key)?;
        self.old_layout = state.format != STATE_FORMAT;
        if self.old_layout {
            state.format = STATE_FORMAT;
        } else {
            let from = self.key("e/");
            // The end of the `e/` range: the prefix with '/' + 1.
            let end = self.key("e0");
            let mut next = from.clone().into_bytes();
            loop {
                let page = self
                    .client
                    .range(&next, Some(end.as_bytes()), at, RANGE_PAGE)
                    .await
                    .map_err(|e| self.err(e))?;
                for (k, kv) in &page.kvs {
                    let k = String::from_utf8_lossy(k);
                    let rest = k.strip_prefix(from.as_str()).unwrap_or(&k);
                    let change = self.decode_entry(rest, &kv.value)?;
                    crate::journal::apply(&mut state, change);
                }
                match (page.more, page.kvs.last()) {
                    (true, Some((last, _))) => {
                        next = last.clone();
                        next.push(0);
                    }
                    _ => break,
                }
            }
        }
        // A save split over transactions writes its entries first: one cut
        // part-way may hold stripes the core's counter has not reached.
        if let Some(last) = state.stripes.keys().next_back() {
            state.next_stripe = state.next_stripe.max(last + 1);
        }
        let cur_key = self.key("table/current");
        let cur = self
            .client
            .range(cur_key.as_bytes(), None, at, 1)
            .await
            .map_err(|e| self.err(e))?;
        if let Some((_, kv)) = cur.kvs.into_iter().next() {
            let v: u64 = std::str::from_utf8(&kv.value)
                .ok()
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| MetaError::Corrupt {
                    what: cur_key.clone(),
                    reason: "not a decimal version".into(),
                })?;
            let tk = self.table_key(v);
            let kv = self
                .client
                .range(tk.as_bytes(), None, at, 1)
                .await
                .map_err(|e| self.err(e))?
                .kvs
                .into_iter()
                .next()
                .map(|(_, kv)| kv)
                .ok_or_else(|| MetaError::Corrupt {
                    what: tk.clone(),
                    reason: "current table version is missing".into(),
                })?;
            let table: PlacementTable =
                serde_json::from_slice(&kv.value).map_err(|e| MetaError::Corrupt {
                    what: tk.clone(),
                    reason: e.to_string(),
                })?;
            state.table = Some(table);
        }
        Ok(Some(state))
    }

    /// The guard of the next transaction.
    fn guard(&self) -> Vec<Compare> {
        let saves = self.key("saves");
        let mut when = vec![if self.revision == 0 {
            Compare::CreateRevision(saves, 0)
        } else {
            Compare::ModRevision(saves, self.revision)
        }];
        if self.revision == 0 {
            // No save of format 2 yet: format 1's guard (or none there).
            let state = self.key("state");
            when.push(if self.state_revision == 0 {
                Compare::CreateRevision(state, 0)
            } else {
                Compare::ModRevision(state, self.state_revision)
            });
        }
        when
    }

    /// Runs `ops` and a put of `saves` under the guard.
    async fn guarded(&mut self, mut ops: Vec<Op>) -> Result<(), MetaError> {
        let saves = self.saves + 1;
        ops.push(Op::Put(self.key("saves"), saves.to_string().into_bytes()));
        let made = self
            .client
            .txn(&self.guard(), &ops)
            .await
            .map_err(|e| self.err(e))?;
        let Some(revision) = made else {
            return Err(MetaError::Conflict);
        };
        self.revision = revision;
        self.saves = saves;
        Ok(())
    }

    async fn save(
        &mut self,
        prev: Option<&ClusterState>,
        next: &ClusterState,
    ) -> Result<(), MetaError> {
        let changes = match prev {
            Some(p) if !self.old_layout && (self.revision != 0 || self.state_revision != 0) => {
                crate::journal::diff(p, next)
            }
            // A new prefix, or format 1: the core and every entry.
            _ => {
                let mut all = vec![Change::Core(Box::new(crate::journal::core_of(next)))];
                all.extend(crate::journal::entries(next));
                all
            }
        };
        if changes.is_empty() {
            return Ok(());
        }
        let mut entry_ops = Vec::new();
        let mut core_ops = Vec::new();
        for c in &changes {
            match (c, self.entry_key(c)) {
                (Change::Core(core), _) => {
                    let mut bare = (**core).clone();
                    bare.format = STATE_FORMAT;
                    let table = bare.table.take();
                    let state_key = self.key("state");
                    let body = serde_json::to_vec(&bare).map_err(|e| MetaError::Corrupt {
                        what: state_key.clone(),
                        reason: e.to_string(),
                    })?;
                    core_ops.push(Op::Put(state_key, body));
                    let table_changed = prev.is_none_or(|p| p.table != next.table)
                        || self.old_layout
                        || self.revision == 0;
                    if let (Some(t), true) = (&table, table_changed) {
                        let json = serde_json::to_vec(t).map_err(|e| MetaError::Corrupt {
                            what: self.table_key(t.version()),
                            reason: e.to_string(),
                        })?;
                        core_ops.push(Op::Put(self.table_key(t.version()), json));
                        core_ops.push(Op::Put(
                            self.key("table/current"),
                            t.version().to_string().into_bytes(),
                        ));
                        if t.version() > KEEP_VERSIONS {
                            // Drop versions older than the last KEEP_VERSIONS.
                            core_ops.push(Op::DeleteRange(
                                self.table_key(0),
                                self.table_key(t.version() - KEEP_VERSIONS),
                            ));
                        }
                    }
                }
                (c, Some(key)) => entry_ops.push(match entry_value(c) {
                    Some(v) => Op::Put(
                        key.clone(),
                        v.map_err(|e| MetaError::Corrupt {
                            what: key,
                            reason: e.to_string(),
                        })?,
                    ),
                    None => Op::Delete(key),
                }),
                (_, None) => unreachable!("every change but the core has a key"),
            }
        }
        // Entries first, in transactions of at most TXN_OPS; the core last.
        while entry_ops.len() + core_ops.len() > TXN_OPS {
            let rest = entry_ops.split_off(TXN_OPS.min(entry_ops.len()));
            let chunk = std::mem::replace(&mut entry_ops, rest);
            if chunk.is_empty() {
                break;
            }
            self.guarded(chunk).await?;
        }
        entry_ops.extend(core_ops);
        self.guarded(entry_ops).await?;
        self.old_layout = false;
        Ok(())
    }
}

/// An entry's value as stored (None: the entry is deleted).
fn entry_value(c: &Change) -> Option<serde_json::Result<Vec<u8>>> {
    match c {
        Change::Core(_) => None,
        Change::Bucket { record, .. } => record.as_ref().map(serde_json::to_vec),
        Change::Key { record, .. } => record.as_ref().map(serde_json::to_vec),
        Change::Stripe { record, .. } => record.as_ref().map(serde_json::to_vec),
        Change::Scrub { report, .. } => report.as_ref().map(serde_json::to_vec),
    }
}

#[cfg(test)]
// The tests write and damage files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use crate::state::{BucketRecord, ClusterConfig};
    use std::os::unix::fs::MetadataExt;

    fn with_buckets(n: usize) -> ClusterState {
        let mut s = ClusterState::new(ClusterConfig::default());
        for i in 0..n {
            s.buckets.insert(
                format!("bucket-{i:05}"),
                BucketRecord {
                    created_ms: i as u64,
                    public_read: false,
                },
            );
        }
        s
    }

    fn add_bucket(s: &ClusterState, name: &str) -> ClusterState {
        let mut next = s.clone();
        next.buckets.insert(
            name.to_string(),
            BucketRecord {
                created_ms: 7,
                public_read: true,
            },
        );
        next
    }

    async fn reopen(dir: &Path) -> ClusterState {
        FileBackend::new(dir)
            .unwrap()
            .load()
            .await
            .unwrap()
            .unwrap()
    }

    #[tokio::test]
    async fn the_state_is_readable_by_its_user_only() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let meta = dir.path().join("meta");
        std::fs::create_dir(&meta).unwrap();
        std::fs::set_permissions(&meta, std::fs::Permissions::from_mode(0o755)).unwrap();
        // An older state file, world-readable.
        std::fs::write(meta.join("meta.json"), b"{}").unwrap();
        std::fs::set_permissions(
            meta.join("meta.json"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        let f = FileBackend::new(&meta).unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&meta), 0o700);
        let s = ClusterState::new(ClusterConfig::default());
        f.save(None, &s).await.unwrap();
        f.save(Some(&s), &add_bucket(&s, "b")).await.unwrap();
        assert_eq!(mode(&meta.join("meta.json")), 0o600);
        assert_eq!(mode(&meta.join("meta.log")), 0o600);
    }

    #[tokio::test]
    async fn a_save_keeps_space_in_reserve_and_an_unchanged_state_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        let state = ClusterState::new(ClusterConfig::default());
        f.save(None, &state).await.unwrap();
        let file = dir.path().join("meta.json");
        let log = dir.path().join("meta.log");
        let reserve = std::fs::metadata(dir.path().join("meta.reserve")).unwrap();
        let len = std::fs::metadata(&file).unwrap().len();
        assert!(reserve.len() >= RESERVE_MIN.max(2 * len), "{reserve:?}");
        // Real blocks, not a sparse file: the space is taken.
        assert!(reserve.blocks() * 512 >= reserve.len());

        // The same state again: nothing is written.
        let (json, log_bytes) = (std::fs::read(&file).unwrap(), std::fs::read(&log).unwrap());
        f.save(Some(&state), &state).await.unwrap();
        assert_eq!(std::fs::read(&file).unwrap(), json);
        assert_eq!(std::fs::read(&log).unwrap(), log_bytes);

        // A new process reads the state back and writes nothing for it.
        let g = FileBackend::new(dir.path()).unwrap();
        let back = g.load().await.unwrap().unwrap();
        assert_eq!(back, state);
        let ino = std::fs::metadata(&file).unwrap().ino();
        g.save(Some(&back), &back).await.unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), ino);
        assert_eq!(std::fs::read(&log).unwrap(), log_bytes);
    }

    /// Issue 34, finding 9: a bucket creation rewrote the whole state (25
    /// a second at 9,000 buckets). It appends its own change now: the
    /// snapshot is not touched, and the log grows by one small frame.
    #[tokio::test]
    async fn a_bucket_creation_appends_its_change_and_does_not_rewrite_the_state() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        let mut s = with_buckets(9000);
        f.save(None, &s).await.unwrap();
        let file = dir.path().join("meta.json");
        let log = dir.path().join("meta.log");
        let snapshot = std::fs::read(&file).unwrap();
        let ino = std::fs::metadata(&file).unwrap().ino();
        let started = std::time::Instant::now();
        for i in 0..200 {
            let before = std::fs::metadata(&log).unwrap().len();
            let next = add_bucket(&s, &format!("new-{i}"));
            f.save(Some(&s), &next).await.unwrap();
            s = next;
            let grew = std::fs::metadata(&log).unwrap().len() - before;
            assert!(grew < 200, "a creation appended {grew} bytes");
        }
        eprintln!("200 creations at 9,000 buckets: {:?}", started.elapsed());
        assert_eq!(std::fs::metadata(&file).unwrap().ino(), ino);
        assert_eq!(std::fs::read(&file).unwrap(), snapshot);
        // A deletion too, and everything is read back.
        let mut next = s.clone();
        next.buckets.remove("bucket-00017");
        f.save(Some(&s), &next).await.unwrap();
        assert_eq!(reopen(dir.path()).await, next);
    }

    #[tokio::test]
    async fn a_log_past_the_snapshot_is_compacted_into_a_new_snapshot() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        lock(&f.inner).compact_min = 0;
        let mut s = with_buckets(3);
        f.save(None, &s).await.unwrap();
        let file = dir.path().join("meta.json");
        let log = dir.path().join("meta.log");
        let first = std::fs::read(&file).unwrap();
        let mut compactions = 0;
        for i in 0..40 {
            let next = add_bucket(&s, &format!("b-{i}"));
            f.save(Some(&s), &next).await.unwrap();
            s = next;
            if std::fs::read(&file).unwrap() != first {
                compactions += 1;
            }
            let snapshot_len = std::fs::metadata(&file).unwrap().len();
            let log_len = std::fs::metadata(&log).unwrap().len();
            assert!(log_len <= snapshot_len + 200, "{log_len} > {snapshot_len}");
            assert_eq!(reopen(dir.path()).await, s, "after save {i}");
        }
        assert!(compactions > 0);
        let back: ClusterState = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
        assert_eq!(back.format, STATE_FORMAT);
    }

    /// A store of format 1 (meta.json only, written by the last release)
    /// opens, and its first save moves it to format 2 with a log.
    #[tokio::test]
    async fn a_format_1_state_opens_and_is_moved_to_format_2() {
        let dir = tempfile::tempdir().unwrap();
        let mut old = with_buckets(5);
        old.format = 1;
        std::fs::write(
            dir.path().join("meta.json"),
            serde_json::to_vec_pretty(&old).unwrap(),
        )
        .unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        let s = f.load().await.unwrap().unwrap();
        assert_eq!(s.format, STATE_FORMAT);
        assert_eq!(s.buckets, old.buckets);
        let next = add_bucket(&s, "after");
        f.save(Some(&s), &next).await.unwrap();
        let json: ClusterState =
            serde_json::from_slice(&std::fs::read(dir.path().join("meta.json")).unwrap()).unwrap();
        assert_eq!(json.format, 2);
        assert!(dir.path().join("meta.log").exists());
        assert_eq!(reopen(dir.path()).await, next);
        // A format this build does not know is refused, naming it.
        let mut future = next.clone();
        future.format = 3;
        std::fs::write(
            dir.path().join("meta.json"),
            serde_json::to_vec(&future).unwrap(),
        )
        .unwrap();
        let e = FileBackend::new(dir.path())
            .unwrap()
            .load()
            .await
            .unwrap_err();
        assert!(e.to_string().contains("state format 3"), "{e}");
    }

    /// A frame damaged before a valid one is not a torn write: the service
    /// refuses to start, naming the file and the byte; a torn last frame
    /// is cut off and the next save goes where it began.
    #[tokio::test]
    async fn a_torn_last_frame_is_cut_and_a_damaged_earlier_one_refuses_to_start() {
        let dir = tempfile::tempdir().unwrap();
        let f = FileBackend::new(dir.path()).unwrap();
        let s0 = with_buckets(2);
        f.save(None, &s0).await.unwrap();
        let log = dir.path().join("meta.log");
        let header_end = std::fs::metadata(&log).unwrap().len() as usize;
        let s1 = add_bucket(&s0, "one");
        f.save(Some(&s0), &s1).await.unwrap();
        let after_one = std::fs::metadata(&log).unwrap().len() as usize;
        let s2 = add_bucket(&s1, "two");
        f.save(Some(&s1), &s2).await.unwrap();
        let whole = std::fs::read(&log).unwrap();

        // The last frame torn: the state of the first save.
        std::fs::write(&log, &whole[..whole.len() - 5]).unwrap();
        let g = FileBackend::new(dir.path()).unwrap();
        assert_eq!(g.load().await.unwrap().unwrap(), s1);
        assert_eq!(std::fs::metadata(&log).unwrap().len() as usize, after_one);
        let s3 = add_bucket(&s1, "three");
        g.save(Some(&s1), &s3).await.unwrap();
        assert_eq!(reopen(dir.path()).await, s3);

        // A byte of the first batch flipped, the second intact.
        let mut bad = whole.clone();
        bad[header_end + 20] ^= 0x40;
        std::fs::write(&log, &bad).unwrap();
        let e = FileBackend::new(dir.path())
            .unwrap()
            .load()
            .await
            .unwrap_err();
        let text = e.to_string();
        assert!(text.contains("meta.log at byte"), "{text}");
        assert!(text.contains(&format!("byte {header_end}")), "{text}");
    }

    /// A power cut at every step of an append and of a compaction: the
    /// store reads back as the state before the save or the one after.
    #[test]
    fn the_state_survives_a_power_cut_at_every_step_of_a_save() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let dir = tempfile::tempdir().unwrap();
        let old = with_buckets(4);
        let new = add_bucket(&old, "new");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let read = |r: &Path| {
            let mut inner = lock(&FileBackend::new(r).unwrap().inner).clone_paths();
            inner.load().unwrap().unwrap()
        };
        for how in [Cut::Drop, Cut::Tear] {
            for compact in [false, true] {
                let prepare = |r: &Path| {
                    let f = FileBackend::new(r).unwrap();
                    rt.block_on(f.save(None, &old)).unwrap();
                };
                let update = |r: &Path| -> std::io::Result<()> {
                    let f = FileBackend::new(r).unwrap();
                    let mut g = lock(&f.inner).clone_paths();
                    let loaded = g.load().map_err(std::io::Error::other)?.unwrap();
                    if compact {
                        g.snapshot(&snapshot_bytes(&new, r).unwrap())
                    } else {
                        let batch = crate::journal::Batch {
                            seq: 1,
                            changes: crate::journal::diff(&loaded, &new),
                        };
                        g.append(&crate::journal::frame(&serde_json::to_vec(&batch).unwrap()))
                    }
                    .map_err(std::io::Error::other)
                };
                let steps = cut_at_every_step(dir.path(), how, prepare, update, |r, n| {
                    let got = read(r);
                    assert!(
                        got == old || got == new,
                        "{how:?} compact {compact} step {n}: {got:?}"
                    );
                })
                .unwrap();
                assert!(steps >= 2, "{steps}");
            }
        }
    }

    #[test]
    fn a_failed_write_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        // The final name is a directory: the rename fails after the write.
        let path = dir.path().join("meta.json");
        std::fs::create_dir(&path).unwrap();
        std::fs::write(path.join("x"), b"x").unwrap();
        assert!(write_atomically(&path, b"{}").is_err());
        assert!(!dir.path().join("meta.json.tmp").exists());
    }
}
