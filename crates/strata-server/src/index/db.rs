//! The listing index's database: the redb file under strata-fs, its
//! tables, the group commit through the log, replay at open, listing,
//! export and merge, and the typed changes a replica applies.

use std::ops::Bound;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use strata_proto::{IndexEntry, ListPage, ListQuery};

use super::log::Log;
use crate::ClusterError;

/// Whether redb refused a database file for its contents (corrupt pages
/// or header, an unknown format byte), not for a lock or an I/O failure.
/// The listing index's file under redb: redb's own file backend for its
/// reads, length and locks, and strata-fs for every write, length change
/// and sync, so that the power-loss model sees them (docs/reliability.md,
/// *Power loss*). A new file is made durable in its directory when it is
/// created (redb's own `Database::create` does not sync the directory).
#[derive(Debug)]
struct PowerSafeFile {
    inner: redb::backends::FileBackend,
    file: std::fs::File,
}

impl PowerSafeFile {
    fn open(path: &Path) -> std::io::Result<PowerSafeFile> {
        let file = match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
        {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => strata_fs::create_durable(path)?,
            r => r?,
        };
        let writes = file.try_clone()?;
        let inner = redb::backends::FileBackend::new(file).map_err(std::io::Error::other)?;
        Ok(PowerSafeFile {
            inner,
            file: writes,
        })
    }
}

impl redb::StorageBackend for PowerSafeFile {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        strata_fs::set_len(&self.file, len)
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        strata_fs::sync_data(&self.file)
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        strata_fs::write_all_at(&self.file, data, offset)
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
    fn try_lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_range(start, end)
    }
    fn try_lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<bool, redb::BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }
    fn lock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_range(start, end)
    }
    fn lock_shared_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.lock_shared_range(start, end)
    }
    fn unlock_range(
        &self,
        start: std::ops::Bound<u64>,
        end: std::ops::Bound<u64>,
    ) -> Result<(), redb::BackendError> {
        self.inner.unlock_range(start, end)
    }
}

/// Opens (or creates) the listing index's database at `path` over
/// [`PowerSafeFile`].
fn create_db(path: &Path) -> Result<Database, redb::DatabaseError> {
    let backend = PowerSafeFile::open(path)?;
    redb::Builder::new().create_with_backend(backend)
}

fn is_corrupt(e: &redb::DatabaseError) -> bool {
    match e {
        redb::DatabaseError::UpgradeRequired(_) => true,
        redb::DatabaseError::Storage(s) => match s {
            redb::StorageError::Corrupted(_) | redb::StorageError::ValueTooLarge(_) => true,
            redb::StorageError::Io(io) => matches!(
                io.kind(),
                std::io::ErrorKind::InvalidData | std::io::ErrorKind::UnexpectedEof
            ),
            _ => false,
        },
        _ => false,
    }
}

/// Key: bucket, NUL, name (a bucket holds no NUL); value: the entry as JSON.
const ENTRIES: TableDefinition<&[u8], &[u8]> = TableDefinition::new("entries");

/// Tombstones: key as in [`ENTRIES`]; value: the stamp of the delete. A
/// delete keeps one for [`TOMBSTONE_KEEP`], so that a write or a copied
/// entry older than the delete, arriving after it, is refused.
const DELETED: TableDefinition<&[u8], u64> = TableDefinition::new("deleted");

/// The tombstones by age, for their removal: key: the delete's time (ms
/// since the epoch, 8 bytes big-endian) then the entry's key; value: the
/// delete's stamp (the tombstone is removed only if it still holds it).
const DELETED_AT: TableDefinition<&[u8], u64> = TableDefinition::new("deleted_at");

/// The S3 writes this node coordinates that may have changed an object
/// without its listing entry yet (docs/placement.md, "Write intents"):
/// key: the intent's stamp (8 bytes big-endian), then the name's key as
/// in [`ENTRIES`]; no value. Written durably before the object changes,
/// removed once its entry is written; what a crash leaves is resolved
/// against the object's head record. Keyed by stamp, so that the few in
/// flight sit in one or two pages at the end of the tree: recording and
/// removing them does not copy a random page each, as keys by name did.
const INTENTS: TableDefinition<&[u8], ()> = TableDefinition::new("intents_by_stamp");

/// The write intents this node holds for S3 writes another node
/// coordinates (a *mirror* of that node's [`INTENTS`], docs/placement.md,
/// "Write intents"), laid out as [`INTENTS`]: should the coordinator be
/// lost with its disk in the middle of a write, this node resolves them.
/// Unlike its own, it resolves them only once older than the resolver's
/// grace, never at its start: their writes may still be in flight.
const MIRRORED_INTENTS: TableDefinition<&[u8], ()> =
    TableDefinition::new("mirrored_intents_by_stamp");

/// What a group does with a write intent, and its byte in the log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IntentOp {
    /// Removes this node's own intent (log byte 0).
    Remove,
    /// Records this node's own intent (1).
    Add,
    /// Records a mirrored intent, [`MIRRORED_INTENTS`] (2).
    AddMirrored,
    /// Removes a mirrored intent (3).
    RemoveMirrored,
}

impl IntentOp {
    /// The op recording (`add`) or removing an intent, this node's own or
    /// one `mirrored` for another node.
    pub fn of(add: bool, mirrored: bool) -> IntentOp {
        match (add, mirrored) {
            (false, false) => IntentOp::Remove,
            (true, false) => IntentOp::Add,
            (true, true) => IntentOp::AddMirrored,
            (false, true) => IntentOp::RemoveMirrored,
        }
    }

    fn byte(self) -> u8 {
        match self {
            IntentOp::Remove => 0,
            IntentOp::Add => 1,
            IntentOp::AddMirrored => 2,
            IntentOp::RemoveMirrored => 3,
        }
    }

    fn from_byte(b: u8) -> Option<IntentOp> {
        Some(match b {
            0 => IntentOp::Remove,
            1 => IntentOp::Add,
            2 => IntentOp::AddMirrored,
            3 => IntentOp::RemoveMirrored,
            _ => return None,
        })
    }

    fn adds(self) -> bool {
        matches!(self, IntentOp::Add | IntentOp::AddMirrored)
    }

    fn mirrored(self) -> bool {
        matches!(self, IntentOp::AddMirrored | IntentOp::RemoveMirrored)
    }
}

/// The intents of the index's first layout (until November 2026): key as
/// in [`ENTRIES`], value the stamp; moved into [`INTENTS`] when the index
/// opens.
const INTENTS_BY_NAME: TableDefinition<&[u8], u64> = TableDefinition::new("intents");

/// An intent's key in [`INTENTS`].
fn intent_key(stamp: u64, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + name.len());
    k.extend_from_slice(&stamp.to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// Moves the intents of the first layout into [`INTENTS`] (one
/// transaction; nothing to do in an index that has none).
fn migrate_intents(db: &Database) -> Result<(), String> {
    let old: Vec<(Vec<u8>, u64)> = {
        let tx = db.begin_read().map_err(|e| e.to_string())?;
        match tx.open_table(INTENTS_BY_NAME) {
            Ok(t) => t
                .iter()
                .map_err(|e| e.to_string())?
                .map(|i| i.map(|(k, v)| (k.value().to_vec(), v.value())))
                .collect::<Result<_, _>>()
                .map_err(|e| e.to_string())?,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(()),
            Err(e) => return Err(e.to_string()),
        }
    };
    let tx = db.begin_write().map_err(|e| e.to_string())?;
    {
        let mut t = tx.open_table(INTENTS).map_err(|e| e.to_string())?;
        for (name, stamp) in &old {
            t.insert(intent_key(*stamp, name).as_slice(), ())
                .map_err(|e| e.to_string())?;
        }
    }
    tx.delete_table(INTENTS_BY_NAME)
        .map_err(|e| e.to_string())?;
    tx.commit().map_err(|e| e.to_string())
}

/// The index's own state: `rebuild` (1) while it is being rebuilt after
/// its file was found damaged; listings are refused until it is done;
/// `wal_lsn`, the last record of the log ([`super::log`]) the index
/// holds (written by every group's transaction, so a checkpoint records
/// exactly what it made durable); `wal_id`, the id of the index's log.
const STATE: TableDefinition<&str, u64> = TableDefinition::new("state");

/// The value of `key` in [`STATE`] (none in an index without the table).
fn state_value(db: &Database, key: &str) -> Result<Option<u64>, String> {
    let tx = db.begin_read().map_err(|e| e.to_string())?;
    match tx.open_table(STATE) {
        Ok(t) => Ok(t.get(key).map_err(|e| e.to_string())?.map(|v| v.value())),
        Err(redb::TableError::TableDoesNotExist(_)) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The last log record the index holds ([`STATE`]).
const WAL_LSN: &str = "wal_lsn";

/// The id of the index's log ([`STATE`]).
const WAL_ID: &str = "wal_id";

/// How often the committer makes redb durable (a checkpoint) while it
/// takes writes: the most of the log a restart applies again.
pub const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// A checkpoint is made sooner once a pass of the log holds this many
/// bytes.
const CHECKPOINT_BYTES: u64 = 32 << 20;

/// How long a tombstone is kept: longer than any write stays in flight
/// (a client gives up after its deadline, seconds) and than a copy of
/// the index may run ([`ListingIndex::merge`] refuses older copies).
pub const TOMBSTONE_KEEP: std::time::Duration = std::time::Duration::from_secs(3600);

/// At most this many tombstones are removed per commit.
const GC_BATCH: usize = 10_000;

/// A node's listing index.
pub struct ListingIndex {
    db: Arc<Database>,
    path: String,
    /// Writes waiting for the committer thread ([`commit_loop`]): one log
    /// record and one redb transaction commit every write that arrived
    /// while the previous one committed (group commit, as the row writer
    /// does for records).
    writes: Option<std::sync::mpsc::Sender<Write>>,
    /// The committer thread, joined on drop (so the file is closed when
    /// the index is).
    committer: Option<std::thread::JoinHandle<()>>,
    /// What the committer has done.
    stats: Arc<CommitStats>,
    /// Whether the index is being rebuilt ([`STATE`]): it is then no
    /// complete copy, and listings and exports are refused.
    rebuilding: std::sync::atomic::AtomicBool,
}

impl Drop for ListingIndex {
    fn drop(&mut self) {
        // Closing the queue ends the committer once it has committed
        // what was queued.
        self.writes.take();
        if let Some(t) = self.committer.take() {
            let _ = t.join();
        }
    }
}

/// How a change is ordered against what the index holds for the name.
pub use strata_proto::replica::IndexOrder as Order;
use strata_proto::replica::{IndexChange, Refusal};

/// One change to one name: set (`Some` value) or remove it.
struct Op {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    stamp: u64,
    order: Order,
}

/// Changes applied together, and where their writer waits.
struct Write {
    ops: Vec<Op>,
    /// Intents to record or to remove if they still hold that stamp:
    /// key, stamp, op.
    intents: Vec<(Vec<u8>, u64, IntentOp)>,
    /// Where the writer waits; `None` for a write nobody waits for (an
    /// intent's removal), which commits with the next durable group.
    done: Option<tokio::sync::oneshot::Sender<Result<(), String>>>,
}

/// At most this many writes share one transaction.
const GROUP_MAX: usize = 4096;

/// How long a group with fewer writers than the last one waits for more
/// before its record is written (docs/benchmarks.md, "The listing index's
/// log": 300–500 µs took the most PUTs per CPU-second here).
const GROUP_WINDOW: std::time::Duration = std::time::Duration::from_micros(400);

fn put_bytes(b: &mut Vec<u8>, v: &[u8]) {
    b.extend_from_slice(&(v.len() as u32).to_le_bytes());
    b.extend_from_slice(v);
}

/// A group's record in the log ([`super::log`]; the bytes in
/// docs/placement.md, "The listing index's log"): its changes, then its
/// intents, each in the order they were queued.
fn encode_group(group: &[Write]) -> Vec<u8> {
    let ops: Vec<&Op> = group.iter().flat_map(|w| &w.ops).collect();
    let intents: Vec<&(Vec<u8>, u64, IntentOp)> = group.iter().flat_map(|w| &w.intents).collect();
    let mut b = Vec::with_capacity(
        8 + ops
            .iter()
            .map(|o| 30 + o.key.len() + o.value.as_ref().map_or(0, Vec::len))
            .sum::<usize>()
            + intents.iter().map(|i| 17 + i.0.len()).sum::<usize>(),
    );
    b.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        put_bytes(&mut b, &op.key);
        match &op.value {
            Some(v) => {
                b.push(1);
                put_bytes(&mut b, v);
            }
            None => b.push(0),
        }
        b.extend_from_slice(&op.stamp.to_le_bytes());
        match op.order {
            Order::Write => b.push(0),
            Order::Copy => b.push(1),
            Order::Resolve { upto } => {
                b.push(2);
                b.extend_from_slice(&upto.to_le_bytes());
            }
        }
    }
    b.extend_from_slice(&(intents.len() as u32).to_le_bytes());
    for (key, stamp, op) in intents {
        put_bytes(&mut b, key);
        b.extend_from_slice(&stamp.to_le_bytes());
        b.push(op.byte());
    }
    b
}

/// A record's changes and intents ([`encode_group`]).
type Group = (Vec<Op>, Vec<(Vec<u8>, u64, IntentOp)>);

/// Reads back what [`encode_group`] wrote.
fn decode_group(buf: &[u8]) -> Result<Group, String> {
    struct Cursor<'a>(&'a [u8]);
    impl Cursor<'_> {
        fn take(&mut self, n: usize) -> Result<&[u8], String> {
            if self.0.len() < n {
                return Err("a record ends inside a change".into());
            }
            let (a, b) = self.0.split_at(n);
            self.0 = b;
            Ok(a)
        }
        fn u8(&mut self) -> Result<u8, String> {
            Ok(self.take(1)?[0])
        }
        fn u32(&mut self) -> Result<u32, String> {
            Ok(u32::from_le_bytes(
                self.take(4)?.try_into().expect("4 bytes"),
            ))
        }
        fn u64(&mut self) -> Result<u64, String> {
            Ok(u64::from_le_bytes(
                self.take(8)?.try_into().expect("8 bytes"),
            ))
        }
        fn bytes(&mut self) -> Result<Vec<u8>, String> {
            let n = self.u32()? as usize;
            Ok(self.take(n)?.to_vec())
        }
    }
    let mut c = Cursor(buf);
    let n = c.u32()? as usize;
    let mut ops = Vec::with_capacity(n.min(buf.len() / 14));
    for _ in 0..n {
        let key = c.bytes()?;
        let value = match c.u8()? {
            0 => None,
            1 => Some(c.bytes()?),
            k => return Err(format!("a change of kind {k}")),
        };
        let stamp = c.u64()?;
        let order = match c.u8()? {
            0 => Order::Write,
            1 => Order::Copy,
            2 => Order::Resolve { upto: c.u64()? },
            k => return Err(format!("a change ordered as {k}")),
        };
        ops.push(Op {
            key,
            value,
            stamp,
            order,
        });
    }
    let n = c.u32()? as usize;
    let mut intents = Vec::with_capacity(n.min(buf.len() / 13));
    for _ in 0..n {
        let key = c.bytes()?;
        let stamp = c.u64()?;
        let k = c.u8()?;
        let op = IntentOp::from_byte(k).ok_or_else(|| format!("an intent marked {k}"))?;
        intents.push((key, stamp, op));
    }
    if !c.0.is_empty() {
        return Err(format!("{} bytes after a record's intents", c.0.len()));
    }
    Ok((ops, intents))
}

/// Applies changes and intents in one write transaction, and records `lsn`
/// as the last log record the index holds.
fn apply_group<'a>(
    tx: &redb::WriteTransaction,
    ops: impl IntoIterator<Item = &'a Op>,
    intents: impl IntoIterator<Item = &'a (Vec<u8>, u64, IntentOp)>,
    lsn: u64,
    now: u64,
) -> Result<(), String> {
    let mut t = tx.open_table(ENTRIES).map_err(|e| e.to_string())?;
    let mut d = tx.open_table(DELETED).map_err(|e| e.to_string())?;
    let mut at = tx.open_table(DELETED_AT).map_err(|e| e.to_string())?;
    let mut held = tx.open_table(INTENTS).map_err(|e| e.to_string())?;
    let mut mirrored = tx.open_table(MIRRORED_INTENTS).map_err(|e| e.to_string())?;
    for op in ops {
        apply(&mut t, &mut d, &mut at, op, now).map_err(|e| e.to_string())?;
    }
    for (key, stamp, op) in intents {
        let k = intent_key(*stamp, key);
        let table = if op.mirrored() {
            &mut mirrored
        } else {
            &mut held
        };
        if op.adds() {
            table.insert(k.as_slice(), ()).map(drop)
        } else {
            table.remove(k.as_slice()).map(drop)
        }
        .map_err(|e| e.to_string())?;
    }
    tx.open_table(STATE)
        .and_then(|mut s| s.insert(WAL_LSN, lsn).map(drop).map_err(Into::into))
        .map_err(|e| e.to_string())
}

/// Makes every commit redb holds durable (one synced, empty commit) and
/// starts the log's next pass.
fn checkpoint(db: &Database, log: &mut Log) -> Result<(), String> {
    db.begin_write()
        .map_err(|e| e.to_string())?
        .commit()
        .map_err(|e| e.to_string())?;
    log.start_over()
}

/// How long a write nobody waits for (an intent's removal) waits for a
/// durable group to join before it commits on its own: under load one
/// always comes sooner, so removals cost no commit of their own.
pub const LAZY_WAIT: std::time::Duration = std::time::Duration::from_millis(20);

/// The stamp an entry's JSON carries (0 if none).
fn stamp_of(value: &[u8]) -> u64 {
    #[derive(serde::Deserialize)]
    struct Stamp {
        #[serde(default)]
        stamp: u64,
    }
    serde_json::from_slice::<Stamp>(value).map_or(0, |s| s.stamp)
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Applies one change inside a write transaction.
fn apply(
    entries: &mut redb::Table<&[u8], &[u8]>,
    deleted: &mut redb::Table<&[u8], u64>,
    deleted_at: &mut redb::Table<&[u8], u64>,
    op: &Op,
    now: u64,
) -> Result<(), redb::StorageError> {
    let key = op.key.as_slice();
    let held = entries.get(key)?.map(|v| stamp_of(v.value()));
    let dead = deleted.get(key)?.map(|v| v.value());
    let newest = held.max(dead);
    let applies = match op.order {
        Order::Write => op.stamp == 0 || newest.is_none_or(|s| s <= op.stamp),
        Order::Copy => newest.is_none_or(|s| s < op.stamp),
        Order::Resolve { upto } => newest.is_none_or(|s| s < op.stamp || s <= upto),
    };
    if !applies {
        return Ok(());
    }
    match &op.value {
        Some(v) => {
            entries.insert(key, v.as_slice())?;
            if dead.is_some() {
                deleted.remove(key)?;
            }
        }
        None => {
            entries.remove(key)?;
            if op.stamp != 0 {
                deleted.insert(key, op.stamp)?;
                let mut at = now.to_be_bytes().to_vec();
                at.extend_from_slice(key);
                deleted_at.insert(at.as_slice(), op.stamp)?;
            }
        }
    }
    Ok(())
}

/// Removes up to [`GC_BATCH`] tombstones older than `keep`;
/// returns how many it looked at.
fn collect_tombstones(db: &Database, keep: std::time::Duration) -> Result<usize, String> {
    let cutoff = now_ms().saturating_sub(keep.as_millis() as u64);
    let tx = db.begin_write().map_err(|e| e.to_string())?;
    let n = {
        let mut deleted = tx.open_table(DELETED).map_err(|e| e.to_string())?;
        let mut at = tx.open_table(DELETED_AT).map_err(|e| e.to_string())?;
        let old: Vec<(Vec<u8>, u64)> = at
            .range::<&[u8]>(..cutoff.to_be_bytes().as_slice())
            .map_err(|e| e.to_string())?
            .take(GC_BATCH)
            .map(|i| i.map(|(k, v)| (k.value().to_vec(), v.value())))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        for (k, stamp) in &old {
            at.remove(k.as_slice()).map_err(|e| e.to_string())?;
            let key = &k[8..];
            let same = deleted
                .get(key)
                .map_err(|e| e.to_string())?
                .is_some_and(|v| v.value() == *stamp);
            if same {
                deleted.remove(key).map_err(|e| e.to_string())?;
            }
        }
        old.len()
    };
    tx.commit().map_err(|e| e.to_string())?;
    Ok(n)
}

/// What the committer has done, for the server's list of workers.
#[derive(Debug, Default)]
pub struct CommitStats {
    /// Groups committed (one log record and one redb transaction each),
    /// and checkpoints.
    pub groups: AtomicU64,
    /// Groups or checkpoints that failed.
    pub failures: AtomicU64,
    /// The last failure.
    pub last_error: std::sync::Mutex<Option<String>>,
}

impl CommitStats {
    fn failed(&self, e: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut g) = self.last_error.lock() {
            *g = Some(e.to_string());
        }
    }
}

/// The index's one writer: takes the first waiting write, every other one
/// already queued (up to [`GROUP_MAX`]), appends them to the log as one
/// record (synced if anybody waits), applies them in arrival order in one
/// redb transaction and answers each. redb's commits are durable only at a
/// checkpoint: every `every` while writes come (that group's own commit),
/// once the log's pass reaches [`CHECKPOINT_BYTES`], after the writes stop
/// (an empty commit) and when the index closes; the log then starts over.
/// Once a minute it removes expired tombstones. Writes nobody waits for
/// (intent removals) are held until a durable group comes, or
/// [`LAZY_WAIT`]. Ends when the index is dropped, after committing what
/// was queued.
fn commit_loop(
    db: Arc<Database>,
    mut log: Log,
    every: std::time::Duration,
    rx: std::sync::mpsc::Receiver<Write>,
    stats: Arc<CommitStats>,
) {
    use std::sync::mpsc::RecvTimeoutError;
    use std::time::Instant;
    let gc_every = std::time::Duration::from_secs(60);
    let mut last_gc = Instant::now();
    let mut lazy: Vec<Write> = Vec::new();
    let mut lazy_since = Instant::now();
    let mut closed = false;
    // Since when redb holds commits that are not durable yet.
    let mut dirty: Option<Instant> = None;
    // How many writers the last group answered.
    let mut last_group = 0usize;
    let report = |e: String| {
        stats.failed(&e);
        eprintln!("strata server: checkpointing the listing index failed: {e}")
    };
    loop {
        if last_gc.elapsed() >= gc_every {
            last_gc = Instant::now();
            if let Err(e) = collect_tombstones(&db, TOMBSTONE_KEEP) {
                eprintln!("strata server: removing old listing tombstones failed: {e}");
            }
        }
        let mut wait = gc_every.saturating_sub(last_gc.elapsed());
        if !lazy.is_empty() {
            wait = wait.min(LAZY_WAIT.saturating_sub(lazy_since.elapsed()));
        }
        if let Some(t) = dirty {
            wait = wait.min(every.saturating_sub(t.elapsed()));
        }
        let first = if closed {
            None
        } else {
            match rx.recv_timeout(wait) {
                Ok(w) if w.done.is_none() && lazy.len() < GROUP_MAX => {
                    if lazy.is_empty() {
                        lazy_since = Instant::now();
                    }
                    lazy.push(w);
                    continue;
                }
                Ok(w) => Some(w),
                Err(RecvTimeoutError::Timeout) => None,
                Err(RecvTimeoutError::Disconnected) => {
                    closed = true;
                    None
                }
            }
        };
        if first.is_none() && lazy.is_empty() {
            let due = dirty.is_some_and(|t| closed || t.elapsed() >= every);
            if due {
                match checkpoint(&db, &mut log) {
                    Ok(()) => {
                        stats.groups.fetch_add(1, Ordering::Relaxed);
                        dirty = None
                    }
                    Err(e) => {
                        // Tried again after another `every`.
                        report(e);
                        dirty = Some(Instant::now());
                    }
                }
            }
            if closed {
                if dirty.is_none() {
                    if let Err(e) = log.reset() {
                        report(e);
                    }
                }
                return;
            }
            continue;
        }
        let mut group: Vec<Write> = lazy.drain(..).chain(first).collect();
        // Fewer than the last group took: wait a little for the rest (each
        // record's sync costs the node a device flush; under load the
        // writers of the last group come back within the window).
        let until = Instant::now() + GROUP_WINDOW;
        while group.len() < GROUP_MAX {
            match rx.try_recv() {
                Ok(w) => group.push(w),
                Err(_) if closed || group.len() >= last_group => break,
                Err(_) => match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
                    Ok(w) => group.push(w),
                    Err(_) => break,
                },
            }
        }
        last_group = group.iter().filter(|w| w.done.is_some()).count();
        let durable =
            closed || dirty.is_some_and(|t| t.elapsed() >= every) || log.used() >= CHECKPOINT_BYTES;
        let waited = last_group > 0;
        let now = now_ms();
        let res = (|| -> Result<(), String> {
            // A group whose own commit is durable needs no synced record.
            let lsn = log.append(&encode_group(&group), waited && !durable)?;
            let mut tx = db.begin_write().map_err(|e| e.to_string())?;
            if !durable {
                tx.set_durability(redb::Durability::None)
                    .map_err(|e| e.to_string())?;
            }
            apply_group(
                &tx,
                group.iter().flat_map(|w| &w.ops),
                group.iter().flat_map(|w| &w.intents),
                lsn,
                now,
            )?;
            tx.commit().map_err(|e| e.to_string())
        })();
        match &res {
            Ok(()) => {
                stats.groups.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => stats.failed(e),
        }
        match (&res, durable) {
            (Ok(()), true) => {
                dirty = None;
                if let Err(e) = log.start_over() {
                    report(e);
                }
            }
            (Ok(()), false) => {
                dirty.get_or_insert_with(Instant::now);
            }
            (Err(e), _) if !waited => {
                eprintln!("strata server: removing finished write intents failed (the resolver will): {e}");
            }
            (Err(_), _) => {}
        }
        for w in group {
            if let Some(done) = w.done {
                let _ = done.send(res.clone());
            }
        }
    }
}

/// One line of an index export (`GET /cluster/v1/index-rows/{row}`): an
/// entry (`e`) or a tombstone (`d`, its delete's stamp) of `b`/`n`; the
/// last line has only `done`, the number of lines before it (a stream
/// cut short is told from a whole one).
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct ExportLine {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    /// The bucket.
    pub b: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    /// The name.
    pub n: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The entry (a live name).
    pub e: Option<IndexEntry>,
    #[serde(default, skip_serializing_if = "is_zero")]
    /// The delete's stamp (a tombstone).
    pub d: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    /// The end: lines before it.
    pub done: Option<u64>,
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

fn base(bucket: &str) -> Vec<u8> {
    let mut b = bucket.as_bytes().to_vec();
    b.push(0);
    b
}

fn full(bucket: &str, name: &[u8]) -> Vec<u8> {
    let mut b = base(bucket);
    b.extend_from_slice(name);
    b
}

impl ListingIndex {
    /// Opens (or creates) the index database at `path`.
    pub fn open(path: &Path) -> Result<ListingIndex, ClusterError> {
        Self::open_checkpointing(path, CHECKPOINT_EVERY)
    }

    /// [`ListingIndex::open`] with redb made durable every `every` while
    /// writes come (tests).
    fn open_checkpointing(
        path: &Path,
        every: std::time::Duration,
    ) -> Result<ListingIndex, ClusterError> {
        let db = create_db(path).map_err(|e| ClusterError::Index {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::with_db(path, db, every)
    }

    /// The log beside the index file at `path` (`listing.wal` beside
    /// `listing.redb`).
    pub fn log_path(path: &Path) -> std::path::PathBuf {
        path.with_extension("wal")
    }

    /// Opens the index's log and applies the records the index does not
    /// hold yet (a crash came before redb's checkpoint), durably, then cuts
    /// the log back to its header.
    fn replay(path: &Path, db: &Database) -> Result<Log, String> {
        let after = state_value(db, WAL_LSN)?.unwrap_or(0);
        let id = state_value(db, WAL_ID)?;
        let log_path = Self::log_path(path);
        let opened = Log::open(&log_path, id, after)?;
        if let Some(w) = &opened.warning {
            eprintln!("strata server: listing log {}: {w}", log_path.display());
        }
        let mut log = opened.log;
        if !opened.records.is_empty() || id != Some(log.id) {
            let now = now_ms();
            let tx = db.begin_write().map_err(|e| e.to_string())?;
            let mut last = after;
            for (lsn, payload) in &opened.records {
                let (ops, intents) = decode_group(payload).map_err(|e| {
                    format!(
                        "record {lsn} of {}: {e} (written by another build?)",
                        log_path.display()
                    )
                })?;
                apply_group(&tx, &ops, &intents, *lsn, now)?;
                last = *lsn;
            }
            {
                let mut t = tx.open_table(STATE).map_err(|e| e.to_string())?;
                t.insert(WAL_LSN, last).map_err(|e| e.to_string())?;
                t.insert(WAL_ID, log.id).map_err(|e| e.to_string())?;
            }
            tx.commit().map_err(|e| e.to_string())?;
        }
        log.reset()?;
        Ok(log)
    }

    fn with_db(
        path: &Path,
        db: Database,
        every: std::time::Duration,
    ) -> Result<ListingIndex, ClusterError> {
        let fail = |reason: String| ClusterError::Index {
            path: path.display().to_string(),
            reason,
        };
        let rebuilding = state_value(&db, "rebuild").map_err(fail)? == Some(1);
        migrate_intents(&db).map_err(|e| fail(format!("moving its write intents: {e}")))?;
        let log = Self::replay(path, &db).map_err(|e| fail(format!("replaying its log: {e}")))?;
        let db = Arc::new(db);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread_db = db.clone();
        let stats = Arc::new(CommitStats::default());
        let thread_stats = stats.clone();
        let committer = std::thread::Builder::new()
            .name("listing-index".into())
            .spawn(move || commit_loop(thread_db, log, every, rx, thread_stats))
            .map_err(|e| ClusterError::Index {
                path: path.display().to_string(),
                reason: format!("starting its writer thread: {e}"),
            })?;
        Ok(ListingIndex {
            db,
            path: path.display().to_string(),
            writes: Some(tx),
            committer: Some(committer),
            stats,
            rebuilding: std::sync::atomic::AtomicBool::new(rebuilding),
        })
    }

    /// What its committer thread has done.
    pub fn commit_stats(&self) -> &CommitStats {
        &self.stats
    }

    /// Whether the index is being rebuilt (after its file was found
    /// damaged): it is then no complete copy of its rows' entries.
    pub fn rebuilding(&self) -> bool {
        self.rebuilding.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Records durably that the index is (`true`) or is no longer being
    /// rebuilt.
    pub fn set_rebuilding(&self, on: bool) -> Result<(), ClusterError> {
        let tx = self.db.begin_write().map_err(|e| self.fail(e))?;
        {
            let mut t = tx.open_table(STATE).map_err(|e| self.fail(e))?;
            if on {
                t.insert("rebuild", 1).map_err(|e| self.fail(e))?;
            } else {
                t.remove("rebuild").map_err(|e| self.fail(e))?;
            }
        }
        tx.commit().map_err(|e| self.fail(e))?;
        self.rebuilding
            .store(on, std::sync::atomic::Ordering::Release);
        Ok(())
    }

    /// [`ListingIndex::open`], but a database redb finds corrupt (a
    /// flipped bit in a page both its commit roots share, a torn header)
    /// is moved into `quarantine` (as `listing.redb.UNIX-SECONDS`) and a
    /// fresh, empty index is opened in its place: the node starts and
    /// serves every object; what the quarantined file listed is not
    /// listed (docs/placement.md, "The listing index"). Returns where the
    /// damaged file went, if it was moved. Any other failure (the file
    /// locked by another process, an I/O error) is returned as it is.
    pub fn open_or_quarantine(
        path: &Path,
        quarantine: &Path,
    ) -> Result<(ListingIndex, Option<std::path::PathBuf>), ClusterError> {
        match create_db(path) {
            Ok(db) => Ok((Self::with_db(path, db, CHECKPOINT_EVERY)?, None)),
            Err(e) if is_corrupt(&e) => {
                let fail = |reason: String| ClusterError::Index {
                    path: path.display().to_string(),
                    reason,
                };
                strata_fs::create_dir_all(quarantine)
                    .map_err(|q| fail(format!("{e}; creating {}: {q}", quarantine.display())))?;
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let name = path
                    .file_name()
                    .map_or("listing.redb".into(), |n| n.to_string_lossy().into_owned());
                let to = quarantine.join(format!("{name}.{secs}"));
                strata_fs::rename(path, &to)
                    .map_err(|q| fail(format!("{e}; moving it to {}: {q}", to.display())))?;
                // Its log goes with it: its records are of that index.
                let log = Self::log_path(path);
                if log.exists() {
                    let log_to = to.with_file_name(format!(
                        "{}.{secs}",
                        log.file_name()
                            .map_or("listing.wal".into(), |n| n.to_string_lossy())
                    ));
                    strata_fs::rename(&log, &log_to).map_err(|q| {
                        fail(format!(
                            "{e}; moving {} to {}: {q}",
                            log.display(),
                            log_to.display()
                        ))
                    })?;
                }
                if let Some(dir) = path.parent() {
                    let _ = strata_fs::sync_dir(dir);
                }
                let idx = Self::open(path)?;
                idx.set_rebuilding(true)?;
                Ok((idx, Some(to)))
            }
            Err(e) => Err(ClusterError::Index {
                path: path.display().to_string(),
                reason: e.to_string(),
            }),
        }
    }

    fn fail(&self, e: impl std::fmt::Display) -> ClusterError {
        ClusterError::Index {
            path: self.path.clone(),
            reason: e.to_string(),
        }
    }

    /// Queues changes; the answer comes once they are durably committed
    /// (with the others queued meanwhile: [`commit_loop`]).
    fn queue(
        &self,
        ops: Vec<Op>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<(), String>>, ClusterError> {
        self.queue_with(ops, Vec::new())
    }

    fn queue_with(
        &self,
        ops: Vec<Op>,
        intents: Vec<(Vec<u8>, u64, IntentOp)>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<(), String>>, ClusterError> {
        let (done, rx) = tokio::sync::oneshot::channel();
        self.writes
            .as_ref()
            .ok_or_else(|| self.fail("closed"))?
            .send(Write {
                ops,
                intents,
                done: Some(done),
            })
            .map_err(|_| self.fail("its writer thread stopped"))?;
        Ok(rx)
    }

    /// Records (`add`, durably before it returns) or removes intents:
    /// `names` of (bucket, name), all with the intent's `stamp` (a removal
    /// removes that intent only, not one of another write of the name:
    /// each is kept under its own stamp), this node's own or `mirrored`
    /// for another node. A removal returns at once and commits with the
    /// next durable group (at most [`LAZY_WAIT`] later): one lost in a
    /// crash leaves an intent whose resolution finds the entry already
    /// right. A mirror is recorded the same way: it is lost only if this
    /// node fails within that time as well as the write's coordinator,
    /// and the coordinator's write does not wait for a sync here.
    pub async fn intents(
        &self,
        names: &[(String, String)],
        stamp: u64,
        add: bool,
        mirrored: bool,
    ) -> Result<(), ClusterError> {
        let op = IntentOp::of(add, mirrored);
        let intents = names
            .iter()
            .map(|(b, n)| (full(b, n.as_bytes()), stamp, op))
            .collect();
        if !add || mirrored {
            return self
                .writes
                .as_ref()
                .ok_or_else(|| self.fail("closed"))?
                .send(Write {
                    ops: Vec::new(),
                    intents,
                    done: None,
                })
                .map_err(|_| self.fail("its writer thread stopped"));
        }
        self.queue_with(Vec::new(), intents)?
            .await
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// The intents recorded with a stamp below `before`: (bucket, name,
    /// stamp); this node's own, or those it holds `mirrored` for others.
    pub fn intents_before(
        &self,
        before: u64,
        mirrored: bool,
    ) -> Result<Vec<(String, String, u64)>, ClusterError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let table = if mirrored { MIRRORED_INTENTS } else { INTENTS };
        let t = match tx.open_table(table) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(self.fail(e)),
        };
        let mut out = Vec::new();
        let end = before.to_be_bytes();
        for item in t
            .range::<&[u8]>(..end.as_slice())
            .map_err(|e| self.fail(e))?
        {
            let (k, _) = item.map_err(|e| self.fail(e))?;
            let k = k.value();
            let Some((stamp, k)) = k.split_first_chunk::<8>() else {
                continue;
            };
            let stamp = u64::from_be_bytes(*stamp);
            if let Some(nul) = k.iter().position(|&c| c == 0) {
                out.push((
                    String::from_utf8_lossy(&k[..nul]).into_owned(),
                    String::from_utf8_lossy(&k[nul + 1..]).into_owned(),
                    stamp,
                ));
            }
        }
        Ok(out)
    }

    /// A writer's change of one name: set to `entry` (ordered by its
    /// stamp) or removed by a delete of stamp `stamp`.
    fn op(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
        order: Order,
    ) -> Result<Op, ClusterError> {
        let (value, stamp) = match entry {
            Some(e) => (
                Some(serde_json::to_vec(e).map_err(|e| self.fail(e))?),
                e.stamp,
            ),
            None => (None, stamp),
        };
        Ok(Op {
            key: full(bucket, name.as_bytes()),
            value,
            stamp,
            order,
        })
    }

    /// Sets (`Some`) or removes (`None`, by a delete of stamp
    /// `delete_stamp`) one entry, durably, unless the name holds a newer
    /// stamp (from async code: waits without blocking a thread).
    pub async fn write_async(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
        delete_stamp: u64,
    ) -> Result<(), ClusterError> {
        self.change_async(bucket, name, entry, delete_stamp, Order::Write)
            .await
    }

    /// [`ListingIndex::write_async`] with the change ordered by `order`.
    pub async fn change_async(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
        delete_stamp: u64,
        order: Order,
    ) -> Result<(), ClusterError> {
        let rx = self.queue(vec![self.op(bucket, name, entry, delete_stamp, order)?])?;
        rx.await
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// A writer's change of `bucket/name` and its write intent (stamped as
    /// the change: the entry's stamp, or `delete_stamp`) in one group, so
    /// one durable commit makes both (docs/placement.md, "Write intents").
    pub async fn write_intended_async(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
        delete_stamp: u64,
    ) -> Result<(), ClusterError> {
        let op = self.op(bucket, name, entry, delete_stamp, Order::Write)?;
        let stamp = entry.map_or(delete_stamp, |e| e.stamp);
        let intent = (full(bucket, name.as_bytes()), stamp, IntentOp::Add);
        let rx = self.queue_with(vec![op], vec![intent])?;
        rx.await
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// [`ListingIndex::write_async`], blocking (not from an async task).
    pub fn write(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
        delete_stamp: u64,
    ) -> Result<(), ClusterError> {
        let rx = self.queue(vec![self.op(
            bucket,
            name,
            entry,
            delete_stamp,
            Order::Write,
        )?])?;
        rx.blocking_recv()
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// Applies copied entries and tombstones (an export of another
    /// replica, or entries rebuilt from records), durably, in one
    /// transaction: each only over nothing or something older, so a
    /// write or delete this replica took meanwhile is never undone.
    pub async fn merge(&self, lines: Vec<ExportLine>) -> Result<(), ClusterError> {
        let mut ops = Vec::with_capacity(lines.len());
        for l in lines {
            let key = full(&l.b, l.n.as_bytes());
            match l.e {
                Some(e) => ops.push(Op {
                    key,
                    stamp: e.stamp,
                    value: Some(serde_json::to_vec(&e).map_err(|e| self.fail(e))?),
                    order: Order::Copy,
                }),
                None if l.d != 0 => ops.push(Op {
                    key,
                    value: None,
                    stamp: l.d,
                    order: Order::Copy,
                }),
                None => {}
            }
        }
        if ops.is_empty() {
            return Ok(());
        }
        self.queue(ops)?
            .await
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// Streams every entry and tombstone of the buckets `want` picks (the
    /// buckets of one index row), as [`ExportLine`] JSON lines in chunks
    /// of about 1 MiB, from one consistent snapshot, ending with the
    /// `done` line; stops early (and returns `Ok(None)`) once `sink`
    /// refuses a chunk. Returns the lines sent.
    pub fn export(
        &self,
        want: &dyn Fn(&str) -> bool,
        sink: &mut dyn FnMut(Bytes) -> bool,
    ) -> Result<Option<u64>, ClusterError> {
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
        let mut lines = 0u64;
        let mut emit = |line: &ExportLine, buf: &mut Vec<u8>| -> Result<bool, ClusterError> {
            serde_json::to_writer(&mut *buf, line).map_err(|e| self.fail(e))?;
            buf.push(b'\n');
            if buf.len() >= 1 << 20 {
                let chunk = Bytes::from(std::mem::take(buf));
                return Ok(sink(chunk));
            }
            Ok(true)
        };
        macro_rules! scan {
            ($def:expr, $line:expr) => {
                match tx.open_table($def) {
                    Err(redb::TableError::TableDoesNotExist(_)) => {}
                    Err(e) => return Err(self.fail(e)),
                    Ok(t) => {
                        let mut from: Vec<u8> = Vec::new();
                        'buckets: loop {
                            let range = t
                                .range::<&[u8]>(from.as_slice()..)
                                .map_err(|e| self.fail(e))?;
                            let mut current: Option<(Vec<u8>, bool)> = None;
                            for item in range {
                                let (k, v) = item.map_err(|e| self.fail(e))?;
                                let k = k.value();
                                let Some(nul) = k.iter().position(|&c| c == 0) else {
                                    continue;
                                };
                                let bucket = &k[..nul];
                                let wanted = match &current {
                                    Some((b, w)) if b.as_slice() == bucket => *w,
                                    _ => {
                                        let w = want(&String::from_utf8_lossy(bucket));
                                        current = Some((bucket.to_vec(), w));
                                        if !w {
                                            // Skip the whole bucket: past
                                            // bucket NUL comes bucket 0x01.
                                            from = bucket.to_vec();
                                            from.push(1);
                                            continue 'buckets;
                                        }
                                        w
                                    }
                                };
                                if !wanted {
                                    continue;
                                }
                                let line = ($line)(
                                    String::from_utf8_lossy(bucket).into_owned(),
                                    String::from_utf8_lossy(&k[nul + 1..]).into_owned(),
                                    v.value(),
                                )?;
                                lines += 1;
                                if !emit(&line, &mut buf)? {
                                    return Ok(None);
                                }
                            }
                            break;
                        }
                    }
                }
            };
        }
        scan!(ENTRIES, |b,
                        n,
                        v: &[u8]|
         -> Result<ExportLine, ClusterError> {
            Ok(ExportLine {
                b,
                n,
                e: Some(serde_json::from_slice(v).map_err(|e| self.fail(e))?),
                ..ExportLine::default()
            })
        });
        scan!(DELETED, |b,
                        n,
                        d: u64|
         -> Result<ExportLine, ClusterError> {
            Ok(ExportLine {
                b,
                n,
                d,
                ..ExportLine::default()
            })
        });
        let end = ExportLine {
            done: Some(lines),
            ..ExportLine::default()
        };
        serde_json::to_writer(&mut buf, &end).map_err(|e| self.fail(e))?;
        buf.push(b'\n');
        if !sink(Bytes::from(buf)) {
            return Ok(None);
        }
        Ok(Some(lines))
    }

    /// Sets many entries of `bucket` in one durable transaction (bulk
    /// loads: `strata bench listing` fills a bucket of 100M names this
    /// way; the S3 path writes one entry per object through
    /// [`ListingIndex::write_async`]).
    pub fn write_batch<'a>(
        &self,
        bucket: &str,
        entries: impl IntoIterator<Item = (&'a str, &'a IndexEntry)>,
    ) -> Result<(), ClusterError> {
        let tx = self.db.begin_write().map_err(|e| self.fail(e))?;
        {
            let mut t = tx.open_table(ENTRIES).map_err(|e| self.fail(e))?;
            for (name, e) in entries {
                let v = serde_json::to_vec(e).map_err(|e| self.fail(e))?;
                t.insert(full(bucket, name.as_bytes()).as_slice(), v.as_slice())
                    .map_err(|e| self.fail(e))?;
            }
        }
        tx.commit().map_err(|e| self.fail(e))
    }

    /// One page of `bucket`'s names as `q` asks (S3's ListObjects rules:
    /// prefix, delimiter roll-up into common prefixes, start after a name).
    pub fn list(&self, bucket: &str, q: &ListQuery) -> Result<ListPage, ClusterError> {
        let mut page = ListPage::default();
        let tx = self.db.begin_read().map_err(|e| self.fail(e))?;
        let t = match tx.open_table(ENTRIES) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(page),
            Err(e) => return Err(self.fail(e)),
        };
        let prefix = q.prefix.as_bytes();
        let after = q.start_after.as_bytes();
        let delim = q.delimiter.as_deref().filter(|d| !d.is_empty());
        let base_len = base(bucket).len();
        let mut end = bucket.as_bytes().to_vec();
        end.push(1);
        let mut cursor: Bound<Vec<u8>> = if after >= prefix {
            Bound::Excluded(full(bucket, after))
        } else {
            Bound::Included(full(bucket, prefix))
        };
        'scan: loop {
            let range = t
                .range::<&[u8]>((
                    cursor.as_ref().map(|c| c.as_slice()),
                    Bound::Excluded(end.as_slice()),
                ))
                .map_err(|e| self.fail(e))?;
            for item in range {
                let (k, v) = item.map_err(|e| self.fail(e))?;
                let name = &k.value()[base_len..];
                if !name.starts_with(prefix) {
                    // Names are in order: past the prefix, nothing follows.
                    break 'scan;
                }
                let rolled = delim.and_then(|d| {
                    let rest = &name[prefix.len()..];
                    rest.windows(d.len())
                        .position(|w| w == d.as_bytes())
                        .map(|i| name[..prefix.len() + i + d.len()].to_vec())
                });
                if let Some(cp) = &rolled {
                    if cp.as_slice() <= after {
                        // Listed on an earlier page: skip the whole prefix
                        // (no UTF-8 name holds byte 0xFF).
                        let mut next = full(bucket, cp);
                        next.push(0xFF);
                        cursor = Bound::Included(next);
                        continue 'scan;
                    }
                }
                if page.contents.len() + page.common_prefixes.len() >= q.max {
                    page.truncated = true;
                    break 'scan;
                }
                match rolled {
                    Some(cp) => {
                        let cp = String::from_utf8_lossy(&cp).into_owned();
                        let mut next = full(bucket, cp.as_bytes());
                        next.push(0xFF);
                        page.last = Some(cp.clone());
                        page.common_prefixes.push(cp);
                        cursor = Bound::Included(next);
                        continue 'scan;
                    }
                    None => {
                        let e: IndexEntry =
                            serde_json::from_slice(v.value()).map_err(|e| self.fail(e))?;
                        let n = String::from_utf8_lossy(name).into_owned();
                        page.last = Some(n.clone());
                        page.contents.push((n, e));
                    }
                }
            }
            break;
        }
        Ok(page)
    }
}

/// One change of a listing entry on this node's index (`PUT`/`DELETE
/// /cluster/v1/index/...`, and the coordinator's call on this node's own
/// replica).
pub(crate) async fn apply_change(idx: &ListingIndex, c: &IndexChange) -> Result<(), Refusal> {
    let done = match (c.intent, c.order) {
        (false, order) => {
            idx.change_async(&c.bucket, &c.key, c.entry.as_ref(), c.stamp, order)
                .await
        }
        (true, Order::Write) => {
            idx.write_intended_async(&c.bucket, &c.key, c.entry.as_ref(), c.stamp)
                .await
        }
        (true, _) => {
            return Err(Refusal::Bad(
                "a write intent goes only with a writer's change (no order)".into(),
            ))
        }
    };
    done.map_err(|e| Refusal::Failed(e.to_string()))
}

/// One page of `bucket`'s listing from this node's index.
pub(crate) async fn list_page(
    idx: &Arc<ListingIndex>,
    bucket: &str,
    q: &ListQuery,
) -> Result<ListPage, Refusal> {
    if idx.rebuilding() {
        return Err(Refusal::Unavailable(
            "this node's listing index is being rebuilt; ask another replica".into(),
        ));
    }
    let (idx, bucket, q) = (idx.clone(), bucket.to_string(), q.clone());
    match tokio::task::spawn_blocking(move || idx.list(&bucket, &q)).await {
        Ok(Ok(page)) => Ok(page),
        Ok(Err(e)) => Err(Refusal::Failed(e.to_string())),
        Err(e) => Err(Refusal::Failed(e.to_string())),
    }
}

/// This node's write intents below `before`.
pub(crate) async fn intents_below(
    idx: &Arc<ListingIndex>,
    before: u64,
    mirrored: bool,
) -> Result<Vec<(String, String, u64)>, Refusal> {
    let idx = idx.clone();
    match tokio::task::spawn_blocking(move || idx.intents_before(before, mirrored)).await {
        Ok(Ok(list)) => Ok(list),
        Ok(Err(e)) => Err(Refusal::Failed(e.to_string())),
        Err(e) => Err(Refusal::Failed(e.to_string())),
    }
}

#[cfg(test)]
// The tests damage and write files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    /// A runtime for the index's async calls.
    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime")
    }

    /// One name of bucket `bk`, as the intent calls take names.
    fn one_name(k: &str) -> Vec<(String, String)> {
        vec![("bk".to_string(), k.to_string())]
    }

    fn entry(size: u64) -> IndexEntry {
        IndexEntry {
            size,
            etag: format!("{size:032x}"),
            modified_ms: 1,
            meta: None,
            stamp: 0,
        }
    }

    fn names(p: &ListPage) -> Vec<String> {
        p.contents.iter().map(|(n, _)| n.clone()).collect()
    }

    #[test]
    fn concurrent_writes_are_all_committed() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = Arc::new(ListingIndex::open(&dir.path().join("l.redb")).expect("open"));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let idx = idx.clone();
                std::thread::spawn(move || {
                    for i in 0..50u64 {
                        let name = format!("t{t}/{i:03}");
                        idx.write("bk", &name, Some(&entry(i)), 0).expect("write");
                        if i.is_multiple_of(5) {
                            idx.write("bk", &name, None, 1).expect("delete");
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().expect("thread");
        }
        let q = ListQuery {
            prefix: String::new(),
            start_after: String::new(),
            delimiter: None,
            max: 1000,
        };
        let page = idx.list("bk", &q).expect("list");
        assert_eq!(page.contents.len(), 8 * 40);
        assert!(page.contents.iter().all(|(n, e)| {
            let i: u64 = n[3..].parse().expect("number");
            !i.is_multiple_of(5) && e.size == i
        }));
        // Durable: the same entries after reopening.
        drop(page);
        let path = dir.path().join("l.redb");
        drop(idx);
        let again = ListingIndex::open(&path).expect("reopen");
        assert_eq!(again.list("bk", &q).expect("list").contents.len(), 8 * 40);
    }

    #[test]
    fn intent_removals_commit_with_the_next_write_or_alone_soon_after() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        let rt = runtime();
        let held = |idx: &ListingIndex| -> Vec<String> {
            let mut v: Vec<String> = idx
                .intents_before(u64::MAX, false)
                .expect("intents")
                .into_iter()
                .map(|(_, n, _)| n)
                .collect();
            v.sort();
            v
        };
        {
            let idx = ListingIndex::open(&path).expect("open");
            rt.block_on(async {
                idx.intents(&one_name("a"), 10, true, false)
                    .await
                    .expect("add a");
                idx.intents(&one_name("b"), 11, true, false)
                    .await
                    .expect("add b");
                // A removal answers at once; the next durable write (here
                // the record of c) commits it.
                idx.intents(&one_name("a"), 10, false, false)
                    .await
                    .expect("remove a");
                idx.intents(&one_name("c"), 12, true, false)
                    .await
                    .expect("add c");
            });
            assert_eq!(held(&idx), ["b", "c"]);
            // Alone, a removal commits after LAZY_WAIT; one with a stamp
            // the intent no longer holds removes nothing.
            rt.block_on(async {
                idx.intents(&one_name("b"), 11, false, false)
                    .await
                    .expect("remove b");
                idx.intents(&one_name("c"), 99, false, false)
                    .await
                    .expect("stale");
            });
            std::thread::sleep(LAZY_WAIT * 10);
            assert_eq!(held(&idx), ["c"]);
            // One still held when the index closes is committed first.
            rt.block_on(idx.intents(&one_name("c"), 12, false, false))
                .expect("remove c");
        }
        let again = ListingIndex::open(&path).expect("reopen");
        assert!(held(&again).is_empty());
    }

    /// Intents held for another node are kept apart from this node's own
    /// (its resolver treats them differently), through the log and a
    /// reopen, and removed by their own stamp.
    #[test]
    fn mirrored_intents_are_kept_apart_from_the_nodes_own() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        let rt = runtime();
        let list = |idx: &ListingIndex, mirrored: bool| {
            idx.intents_before(u64::MAX, mirrored).expect("intents")
        };
        let one = |k: &str, s: u64| vec![("bk".to_string(), k.to_string(), s)];
        {
            let idx = ListingIndex::open(&path).expect("open");
            rt.block_on(async {
                idx.intents(&one_name("own"), 10, true, false)
                    .await
                    .expect("own");
                idx.intents(&one_name("m1"), 20, true, true)
                    .await
                    .expect("m1");
                idx.intents(&one_name("m2"), 30, true, true)
                    .await
                    .expect("m2");
                // A removal of the wrong kind, or stamp, removes nothing.
                idx.intents(&one_name("m1"), 20, false, false)
                    .await
                    .expect("wrong kind");
                idx.intents(&one_name("m2"), 31, false, true)
                    .await
                    .expect("wrong stamp");
                idx.intents(&one_name("m2"), 30, false, true)
                    .await
                    .expect("m2 done");
                idx.intents(&one_name("x"), 40, true, false)
                    .await
                    .expect("a durable write");
            });
            assert_eq!(list(&idx, false), [one("own", 10), one("x", 40)].concat());
            assert_eq!(list(&idx, true), one("m1", 20));
            assert_eq!(idx.intents_before(20, true).expect("intents"), []);
        }
        let again = ListingIndex::open(&path).expect("reopen");
        assert_eq!(list(&again, true), one("m1", 20));
        assert_eq!(list(&again, false).len(), 2);
    }

    #[test]
    fn intents_of_the_first_layout_are_kept_by_stamp() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        {
            // An index written before intents were keyed by stamp.
            let db = Database::create(&path).expect("create");
            let tx = db.begin_write().expect("tx");
            {
                let mut t = tx.open_table(INTENTS_BY_NAME).expect("table");
                t.insert(full("bk", b"x").as_slice(), 30).expect("x");
                t.insert(full("bk", b"y").as_slice(), 20).expect("y");
            }
            tx.commit().expect("commit");
        }
        let idx = ListingIndex::open(&path).expect("open");
        let want = vec![
            ("bk".to_string(), "y".to_string(), 20),
            ("bk".to_string(), "x".to_string(), 30),
        ];
        assert_eq!(idx.intents_before(u64::MAX, false).expect("intents"), want);
        assert_eq!(idx.intents_before(30, false).expect("intents"), want[..1]);
        let tx = idx.db.begin_read().expect("read");
        assert!(matches!(
            tx.open_table(INTENTS_BY_NAME),
            Err(redb::TableError::TableDoesNotExist(_))
        ));
    }

    /// A copy of the index's files as a crash would leave them (taken
    /// while the index is open and idle): the redb file as of its last
    /// durable commit, the log as synced. `with_log` false leaves the log
    /// out, to see what redb alone holds.
    fn crash_image(from: &Path, to: &Path, with_log: bool) -> std::path::PathBuf {
        let file = to.join("l.redb");
        std::fs::copy(from, &file).expect("copy the index");
        if with_log {
            std::fs::copy(ListingIndex::log_path(from), ListingIndex::log_path(&file))
                .expect("copy the log");
        }
        file
    }

    /// Every kind of change, through the log alone: a crash before redb's
    /// checkpoint loses none of what was acknowledged.
    #[test]
    fn a_crash_before_the_checkpoint_loses_nothing_the_log_holds() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        let hour = std::time::Duration::from_secs(3600);
        let idx = ListingIndex::open_checkpointing(&path, hour).expect("open");
        let rt = runtime();
        for i in 0..20u64 {
            idx.write("b", &format!("n{i:02}"), Some(&stamped(i, 100 + i)), 0)
                .expect("write");
        }
        idx.write("b", "n03", None, 200).expect("delete");
        rt.block_on(async {
            idx.change_async(
                "b",
                "n04",
                Some(&stamped(44, 150)),
                0,
                Order::Resolve { upto: 150 },
            )
            .await
            .expect("resolve");
            idx.merge(vec![ExportLine {
                b: "c".into(),
                n: "copied".into(),
                e: Some(stamped(7, 5)),
                d: 0,
                done: None,
            }])
            .await
            .expect("merge");
            let names = |n: &str| vec![("b".to_string(), n.to_string())];
            idx.intents(&names("kept"), 300, true, false)
                .await
                .expect("intent");
            idx.intents(&names("gone"), 301, true, false)
                .await
                .expect("intent");
            idx.intents(&names("gone"), 301, false, false)
                .await
                .expect("removal");
        });
        // The removal is committed (not synced) with the next group.
        idx.write("b", "last", Some(&stamped(1, 400)), 0)
            .expect("write");
        let want_b = {
            let mut v: Vec<(String, u64)> = (0..20u64)
                .filter(|i| *i != 3)
                .map(|i| (format!("n{i:02}"), if i == 4 { 44 } else { i }))
                .collect();
            v.insert(0, ("last".to_string(), 1));
            v
        };
        assert_eq!(all(&idx, "b"), want_b);

        // redb alone has none of it: nothing was made durable there.
        let bare = tempfile::tempdir().expect("tmp");
        let alone = ListingIndex::open(&crash_image(&path, bare.path(), false)).expect("open");
        assert!(all(&alone, "b").is_empty());
        drop(alone);

        // With the log, all of it, and it stays after another reopen.
        let img = tempfile::tempdir().expect("tmp");
        let file = crash_image(&path, img.path(), true);
        for _ in 0..2 {
            let back = ListingIndex::open(&file).expect("reopen");
            assert_eq!(all(&back, "b"), want_b);
            assert_eq!(all(&back, "c"), [("copied".to_string(), 7)]);
            let held: Vec<String> = back
                .intents_before(u64::MAX, false)
                .expect("intents")
                .into_iter()
                .map(|(_, n, _)| n)
                .collect();
            assert_eq!(held, ["kept"]);
            // The log was cut back once replayed.
            assert_eq!(
                std::fs::metadata(ListingIndex::log_path(&file))
                    .expect("log")
                    .len(),
                crate::index::log::HEADER
            );
        }
    }

    /// A writer's change sent with its intent (`?intent=1`: a cluster of
    /// one's S3 write, docs/placement.md "Write intents") is one commit:
    /// a crash image taken right after holds the entries and the intents;
    /// the route refuses an intent with any other order or value.
    #[tokio::test]
    async fn a_change_with_its_intent_is_one_commit() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        let every = std::time::Duration::from_secs(3600);
        let idx = Arc::new(ListingIndex::open_checkpointing(&path, every).expect("open"));
        idx.write_intended_async("b", "k", Some(&stamped(5, 40)), 0)
            .await
            .expect("write");
        idx.write_intended_async("b", "gone", None, 41)
            .await
            .expect("delete");
        let img = tempfile::tempdir().expect("tmp");
        let back = ListingIndex::open(&crash_image(&path, img.path(), true)).expect("reopen");
        assert_eq!(all(&back, "b"), [("k".to_string(), 5)]);
        let held = |i: &ListingIndex| i.intents_before(u64::MAX, false).expect("intents");
        assert_eq!(
            held(&back),
            [
                ("b".to_string(), "k".to_string(), 40),
                ("b".to_string(), "gone".to_string(), 41)
            ]
        );
        // A write intent goes only with a writer's change: with a copy's
        // order it is refused and records nothing.
        let change = |intent, order| IndexChange {
            bucket: "b".into(),
            key: "c".into(),
            entry: None,
            stamp: 42,
            order,
            intent,
        };
        assert!(matches!(
            apply_change(&idx, &change(true, Order::Copy)).await,
            Err(Refusal::Bad(_))
        ));
        assert!(!held(&idx).iter().any(|(_, n, _)| n == "c"));
        apply_change(&idx, &change(true, Order::Write))
            .await
            .expect("a writer's change with its intent");
        assert!(held(&idx).contains(&("b".to_string(), "c".to_string(), 42)));
    }

    /// An index checkpointing every `every`, in a new directory, with two
    /// entries of bucket `b` written: x (size 1) and y (size 2).
    fn two_written(
        every: std::time::Duration,
    ) -> (tempfile::TempDir, std::path::PathBuf, ListingIndex) {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.redb");
        let idx = ListingIndex::open_checkpointing(&path, every).expect("open");
        idx.write("b", "x", Some(&stamped(1, 10)), 0)
            .expect("write");
        idx.write("b", "y", Some(&stamped(2, 11)), 0)
            .expect("write");
        (dir, path, idx)
    }

    /// Once writes stop, redb is made durable within the checkpoint
    /// interval: the log is no longer needed.
    #[test]
    fn an_idle_index_checkpoints_within_its_interval() {
        let every = std::time::Duration::from_millis(50);
        let (_dir, path, _idx) = two_written(every);
        std::thread::sleep(every * 10);
        let img = tempfile::tempdir().expect("tmp");
        let alone = ListingIndex::open(&crash_image(&path, img.path(), false)).expect("open");
        assert_eq!(
            all(&alone, "b"),
            [("x".to_string(), 1), ("y".to_string(), 2)]
        );
    }

    /// A log whose last record is torn (or flipped) gives back the records
    /// before it: the writes that were acknowledged.
    #[test]
    fn a_torn_log_record_ends_the_replay_at_the_record_before() {
        let (_dir, path, _idx) = two_written(std::time::Duration::from_secs(3600));
        let img = tempfile::tempdir().expect("tmp");
        let file = crash_image(&path, img.path(), true);
        let log = ListingIndex::log_path(&file);
        let mut bytes = std::fs::read(&log).expect("log");
        let last = bytes.len() - 3;
        bytes[last] ^= 0x10;
        std::fs::write(&log, &bytes).expect("write");
        let back = ListingIndex::open(&file).expect("reopen");
        assert_eq!(all(&back, "b"), [("x".to_string(), 1)]);
    }

    #[test]
    fn a_group_record_reads_back_as_written() {
        let op = |k: &str, v: Option<&str>, stamp: u64, order: Order| Op {
            key: k.as_bytes().to_vec(),
            value: v.map(|v| v.as_bytes().to_vec()),
            stamp,
            order,
        };
        let group = vec![
            Write {
                ops: vec![
                    op("b\0x", Some("{}"), 1, Order::Write),
                    op("b\0y", None, 2, Order::Copy),
                ],
                intents: vec![
                    (b"b\0i".to_vec(), 9, IntentOp::Add),
                    (b"b\0k".to_vec(), 11, IntentOp::AddMirrored),
                ],
                done: None,
            },
            Write {
                ops: vec![op("b\0z", Some(""), 3, Order::Resolve { upto: 77 })],
                intents: vec![
                    (b"b\0j".to_vec(), 10, IntentOp::Remove),
                    (b"b\0k".to_vec(), 11, IntentOp::RemoveMirrored),
                ],
                done: None,
            },
        ];
        let bytes = encode_group(&group);
        let (ops, intents) = decode_group(&bytes).expect("decode");
        let seen: Vec<_> = ops
            .iter()
            .map(|o| (o.key.clone(), o.value.clone(), o.stamp, o.order))
            .collect();
        let want: Vec<_> = group
            .iter()
            .flat_map(|w| &w.ops)
            .map(|o| (o.key.clone(), o.value.clone(), o.stamp, o.order))
            .collect();
        assert_eq!(seen, want);
        assert_eq!(
            intents,
            [
                (b"b\0i".to_vec(), 9, IntentOp::Add),
                (b"b\0k".to_vec(), 11, IntentOp::AddMirrored),
                (b"b\0j".to_vec(), 10, IntentOp::Remove),
                (b"b\0k".to_vec(), 11, IntentOp::RemoveMirrored),
            ]
        );
        // Cut short or with a byte more, it is refused.
        assert!(decode_group(&bytes[..bytes.len() - 1]).is_err());
        let mut more = bytes.clone();
        more.push(0);
        assert!(decode_group(&more).is_err());
    }

    fn stamped(size: u64, stamp: u64) -> IndexEntry {
        IndexEntry {
            stamp,
            ..entry(size)
        }
    }

    fn all(idx: &ListingIndex, bucket: &str) -> Vec<(String, u64)> {
        let q = ListQuery {
            prefix: String::new(),
            start_after: String::new(),
            delimiter: None,
            max: 10_000,
        };
        idx.list(bucket, &q)
            .expect("list")
            .contents
            .into_iter()
            .map(|(n, e)| (n, e.size))
            .collect()
    }

    /// Of two changes of one name, the newer stamp wins whatever their
    /// order of arrival; a copied entry never undoes what the replica
    /// took itself.
    #[test]
    fn stamps_order_writes_deletes_and_copies() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = ListingIndex::open(&dir.path().join("l.redb")).expect("open");
        idx.write("b", "x", Some(&stamped(1, 10)), 0)
            .expect("write");
        // A delete older than the entry: refused.
        idx.write("b", "x", None, 5).expect("old delete");
        assert_eq!(all(&idx, "b"), [("x".to_string(), 1)]);
        // A newer delete, then the older write arriving late: stays gone.
        idx.write("b", "x", None, 20).expect("delete");
        idx.write("b", "x", Some(&stamped(2, 15)), 0)
            .expect("late write");
        assert!(all(&idx, "b").is_empty());
        // A write newer than the tombstone brings the name back.
        idx.write("b", "x", Some(&stamped(3, 30)), 0)
            .expect("rewrite");
        assert_eq!(all(&idx, "b"), [("x".to_string(), 3)]);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let line = |n: &str, e: Option<IndexEntry>, d: u64| ExportLine {
            b: "b".into(),
            n: n.into(),
            e,
            d,
            done: None,
        };
        rt.block_on(idx.merge(vec![
            // Older than what is here: ignored.
            line("x", Some(stamped(9, 25)), 0),
            // New names: taken.
            line("y", Some(stamped(4, 1)), 0),
            line("z", Some(stamped(5, 0)), 0),
            // A copied tombstone newer than nothing here: kept, and it
            // refuses an older write after it.
            line("w", None, 40),
        ]))
        .expect("merge");
        idx.write("b", "w", Some(&stamped(6, 35)), 0)
            .expect("older write");
        assert_eq!(
            all(&idx, "b"),
            [
                ("x".to_string(), 3),
                ("y".to_string(), 4),
                ("z".to_string(), 5)
            ]
        );
        // A copy of an entry equal to what is here changes nothing; a
        // stamp-0 copy never replaces anything.
        rt.block_on(idx.merge(vec![line("z", Some(stamped(7, 0)), 0)]))
            .expect("merge");
        assert_eq!(all(&idx, "b")[2], ("z".to_string(), 5));
    }

    /// The resolution of a write intent of stamp U replaces what that
    /// write itself left (an entry or a tombstone stamped at most U, even
    /// newer than the head record it resolves to), and never a later
    /// write.
    #[test]
    fn a_resolution_undoes_its_own_write_only() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = ListingIndex::open(&dir.path().join("l.redb")).expect("open");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let resolve = |name: &str, e: Option<IndexEntry>, stamp: u64, upto: u64| {
            rt.block_on(idx.change_async("b", name, e.as_ref(), stamp, Order::Resolve { upto }))
                .expect("resolve")
        };
        // A PUT of intent 20 listed its entry, its head record never
        // landed: the object's head is still version 1 (stamp 10).
        idx.write("b", "x", Some(&stamped(1, 10)), 0).expect("v1");
        idx.write("b", "x", Some(&stamped(2, 20)), 0)
            .expect("v2 entry");
        resolve("x", Some(stamped(1, 10)), 0, 20);
        assert_eq!(all(&idx, "b"), [("x".to_string(), 1)]);
        // A DELETE of intent 30 removed the entry, its tombstone record
        // never landed: the entry comes back from the head.
        idx.write("b", "x", None, 30).expect("unlisted");
        assert!(all(&idx, "b").is_empty());
        resolve("x", Some(stamped(1, 10)), 0, 30);
        assert_eq!(all(&idx, "b"), [("x".to_string(), 1)]);
        // A PUT of a new name listed, never stored: removed.
        idx.write("b", "y", Some(&stamped(3, 40)), 0).expect("y");
        resolve("y", None, 40, 40);
        assert_eq!(all(&idx, "b"), [("x".to_string(), 1)]);
        // A later write (stamp 60) is never undone by the resolution of an
        // earlier intent (50), whatever the head said when it was read.
        idx.write("b", "x", Some(&stamped(4, 60)), 0).expect("v4");
        resolve("x", Some(stamped(1, 10)), 0, 50);
        resolve("x", None, 50, 50);
        assert_eq!(all(&idx, "b"), [("x".to_string(), 4)]);
        // The head of the later write itself resolves to what is there.
        resolve("x", Some(stamped(4, 60)), 0, 50);
        assert_eq!(all(&idx, "b"), [("x".to_string(), 4)]);
    }

    /// An export carries the entries and tombstones of the buckets asked
    /// for, and nothing else; merged into an empty index it reproduces
    /// them. Tombstones past their age are removed.
    #[test]
    fn exports_merge_and_tombstones_expire() {
        let dir = tempfile::tempdir().expect("tmp");
        let src = ListingIndex::open(&dir.path().join("a.redb")).expect("open");
        for (b, n, s) in [
            ("one", "a", 1),
            ("one", "b", 2),
            ("two", "c", 3),
            ("three", "d", 4),
        ] {
            src.write(b, n, Some(&stamped(s, s)), 0).expect("write");
        }
        src.write("one", "gone", None, 9).expect("delete");
        src.write("two", "gone", None, 9).expect("delete");
        let mut out = Vec::new();
        let sent = src
            .export(&|b| b == "one" || b == "three", &mut |c| {
                out.extend_from_slice(&c);
                true
            })
            .expect("export");
        let lines: Vec<ExportLine> = out
            .split(|&c| c == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).expect("line"))
            .collect();
        assert_eq!(sent, Some(4));
        assert_eq!(lines.last().and_then(|l| l.done), Some(4));
        let body: Vec<_> = lines.iter().filter(|l| l.done.is_none()).cloned().collect();
        assert!(body.iter().all(|l| l.b == "one" || l.b == "three"));
        assert_eq!(body.iter().filter(|l| l.d == 9).count(), 1);
        let dst = ListingIndex::open(&dir.path().join("b.redb")).expect("open");
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        rt.block_on(dst.merge(body)).expect("merge");
        assert_eq!(all(&dst, "one"), all(&src, "one"));
        assert_eq!(all(&dst, "three"), all(&src, "three"));
        assert!(all(&dst, "two").is_empty());
        // The copied tombstone refuses an older write of its name.
        dst.write("one", "gone", Some(&stamped(1, 5)), 0)
            .expect("write");
        assert_eq!(all(&dst, "one").len(), 2);
        // Expired (kept for 0 s here): removed, and the name takes any
        // write again.
        std::thread::sleep(std::time::Duration::from_millis(5));
        assert_eq!(
            collect_tombstones(&dst.db, std::time::Duration::ZERO).expect("gc"),
            1
        );
        dst.write("one", "gone", Some(&stamped(1, 5)), 0)
            .expect("write");
        assert_eq!(all(&dst, "one").len(), 3);
    }

    #[test]
    fn lists_in_byte_order_with_prefix_delimiter_and_pages() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = ListingIndex::open(&dir.path().join("l.redb")).expect("open");
        for (i, n) in ["b", "a/2", "a/1", "a/x/y", "c", "\u{e9}", "Z", "a"]
            .iter()
            .enumerate()
        {
            idx.write("bk", n, Some(&entry(i as u64)), 0)
                .expect("write");
        }
        idx.write("other", "a/1", Some(&entry(9)), 0)
            .expect("write");
        idx.write("bk", "c", None, 1).expect("delete");
        let q = |prefix: &str, after: &str, d: Option<&str>, max| ListQuery {
            prefix: prefix.into(),
            start_after: after.into(),
            delimiter: d.map(String::from),
            max,
        };
        let all = idx.list("bk", &q("", "", None, 100)).expect("list");
        assert_eq!(
            names(&all),
            ["Z", "a", "a/1", "a/2", "a/x/y", "b", "\u{e9}"]
        );
        assert!(!all.truncated);
        assert_eq!(all.contents[2].1, entry(2));

        let top = idx.list("bk", &q("", "", Some("/"), 100)).expect("list");
        assert_eq!(names(&top), ["Z", "a", "b", "\u{e9}"]);
        assert_eq!(top.common_prefixes, ["a/"]);

        let under = idx.list("bk", &q("a/", "", Some("/"), 100)).expect("list");
        assert_eq!(names(&under), ["a/1", "a/2"]);
        assert_eq!(under.common_prefixes, ["a/x/"]);

        // Pages of two, continuing after the last name or prefix.
        let mut got = Vec::new();
        let mut after = String::new();
        loop {
            let p = idx.list("bk", &q("", &after, Some("/"), 2)).expect("list");
            got.extend(names(&p));
            got.extend(p.common_prefixes.clone());
            if !p.truncated {
                break;
            }
            after = p.last.clone().expect("last");
        }
        got.sort();
        assert_eq!(got, ["Z", "a", "a/", "b", "\u{e9}"]);
        assert!(idx
            .list("none", &q("", "", None, 10))
            .expect("list")
            .contents
            .is_empty());
    }
}
