//! The listing index (docs/placement.md, "The listing index"): per bucket,
//! every object's name, size, ETag and time, in UTF-8 byte order, in a
//! redb database on the node (`DATA/listing.redb`). The index is
//! partitioned by bucket: a bucket's entries live on the replicas of its
//! index row ([`strata_client::protocol::index_row`]); the coordinator
//! writes them after the object and before acknowledging, so an
//! acknowledged PUT is listed and an acknowledged DELETE is not, after any
//! crash (every commit is durable before it answers). Writes are group
//! committed: one thread commits, in one transaction and one fsync, every
//! write that arrived while the previous transaction committed. GETs never
//! read it.

use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{post, put};
use axum::Router;
use redb::{Database, ReadableDatabase, TableDefinition};
use strata_client::protocol::{IndexEntry, ListPage, ListQuery};

use crate::ClusterError;

/// Whether redb refused a database file for its contents (corrupt pages
/// or header, an unknown format byte), not for a lock or an I/O failure.
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

/// A node's listing index.
pub struct ListingIndex {
    db: Arc<Database>,
    path: String,
    /// Writes waiting for the committer thread ([`commit_loop`]): one
    /// redb transaction, so one fsync, commits every write that arrived
    /// while the previous one committed (group commit, as the row writer
    /// does for records).
    writes: Option<std::sync::mpsc::Sender<Write>>,
    /// The committer thread, joined on drop (so the file is closed when
    /// the index is).
    committer: Option<std::thread::JoinHandle<()>>,
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

/// One entry to set (`Some` value) or remove, and where its writer waits.
struct Write {
    key: Vec<u8>,
    value: Option<Vec<u8>>,
    done: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// At most this many writes share one transaction.
const GROUP_MAX: usize = 4096;

/// The index's one writer: takes the first waiting write, every other one
/// already queued (up to [`GROUP_MAX`]), applies them in arrival order in
/// one durable transaction and answers each once it is committed. Ends
/// when the index is dropped.
fn commit_loop(db: Arc<Database>, rx: std::sync::mpsc::Receiver<Write>) {
    while let Ok(first) = rx.recv() {
        let mut group = vec![first];
        while group.len() < GROUP_MAX {
            match rx.try_recv() {
                Ok(w) => group.push(w),
                Err(_) => break,
            }
        }
        let res = (|| -> Result<(), String> {
            let tx = db.begin_write().map_err(|e| e.to_string())?;
            {
                let mut t = tx.open_table(ENTRIES).map_err(|e| e.to_string())?;
                for w in &group {
                    match &w.value {
                        Some(v) => t.insert(w.key.as_slice(), v.as_slice()).map(drop),
                        None => t.remove(w.key.as_slice()).map(drop),
                    }
                    .map_err(|e| e.to_string())?;
                }
            }
            tx.commit().map_err(|e| e.to_string())
        })();
        for w in group {
            let _ = w.done.send(res.clone());
        }
    }
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
        let db = Database::create(path).map_err(|e| ClusterError::Index {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Self::with_db(path, db)
    }

    fn with_db(path: &Path, db: Database) -> Result<ListingIndex, ClusterError> {
        let db = Arc::new(db);
        let (tx, rx) = std::sync::mpsc::channel();
        let thread_db = db.clone();
        let committer = std::thread::Builder::new()
            .name("listing-index".into())
            .spawn(move || commit_loop(thread_db, rx))
            .map_err(|e| ClusterError::Index {
                path: path.display().to_string(),
                reason: format!("starting its writer thread: {e}"),
            })?;
        Ok(ListingIndex {
            db,
            path: path.display().to_string(),
            writes: Some(tx),
            committer: Some(committer),
        })
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
        match Database::create(path) {
            Ok(db) => Ok((Self::with_db(path, db)?, None)),
            Err(e) if is_corrupt(&e) => {
                let fail = |reason: String| ClusterError::Index {
                    path: path.display().to_string(),
                    reason,
                };
                std::fs::create_dir_all(quarantine)
                    .map_err(|q| fail(format!("{e}; creating {}: {q}", quarantine.display())))?;
                let secs = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs());
                let name = path
                    .file_name()
                    .map_or("listing.redb".into(), |n| n.to_string_lossy().into_owned());
                let to = quarantine.join(format!("{name}.{secs}"));
                std::fs::rename(path, &to)
                    .map_err(|q| fail(format!("{e}; moving it to {}: {q}", to.display())))?;
                if let Some(dir) = path.parent() {
                    let _ = std::fs::File::open(dir).and_then(|d| d.sync_all());
                }
                let idx = Self::open(path)?;
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

    /// Queues setting (`Some`) or removing (`None`) one entry; the answer
    /// comes once it is durably committed (with the others queued
    /// meanwhile: [`commit_loop`]).
    fn queue(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
    ) -> Result<tokio::sync::oneshot::Receiver<Result<(), String>>, ClusterError> {
        let value = match entry {
            Some(e) => Some(serde_json::to_vec(e).map_err(|e| self.fail(e))?),
            None => None,
        };
        let (done, rx) = tokio::sync::oneshot::channel();
        let w = Write {
            key: full(bucket, name.as_bytes()),
            value,
            done,
        };
        self.writes
            .as_ref()
            .ok_or_else(|| self.fail("closed"))?
            .send(w)
            .map_err(|_| self.fail("its writer thread stopped"))?;
        Ok(rx)
    }

    /// Sets (`Some`) or removes (`None`) one entry, durably (from async
    /// code: waits without blocking a thread).
    pub async fn write_async(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
    ) -> Result<(), ClusterError> {
        let rx = self.queue(bucket, name, entry)?;
        rx.await
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
    }

    /// Sets (`Some`) or removes (`None`) one entry, durably (blocks; not
    /// from an async task).
    pub fn write(
        &self,
        bucket: &str,
        name: &str,
        entry: Option<&IndexEntry>,
    ) -> Result<(), ClusterError> {
        let rx = self.queue(bucket, name, entry)?;
        rx.blocking_recv()
            .map_err(|_| self.fail("its writer thread stopped"))?
            .map_err(|e| self.fail(e))
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

type Idx = Arc<ListingIndex>;

/// The index routes of a node (`/cluster/v1/index`, docs/placement.md).
pub fn routes(index: Idx) -> Router {
    Router::new()
        .route(
            "/cluster/v1/index/{bucket}/{*name}",
            put(put_entry).delete(delete_entry),
        )
        .route("/cluster/v1/index/{bucket}", post(list))
        .with_state(index)
}

fn failed(e: impl std::fmt::Display) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
}

async fn write(idx: Idx, bucket: String, name: String, entry: Option<IndexEntry>) -> Response {
    match idx.write_async(&bucket, &name, entry.as_ref()).await {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => failed(e),
    }
}

async fn put_entry(
    State(idx): State<Idx>,
    UrlPath((bucket, name)): UrlPath<(String, String)>,
    body: Bytes,
) -> Response {
    match serde_json::from_slice::<IndexEntry>(&body) {
        Ok(e) => write(idx, bucket, name, Some(e)).await,
        Err(e) => (StatusCode::BAD_REQUEST, format!("bad index entry: {e}")).into_response(),
    }
}

async fn delete_entry(
    State(idx): State<Idx>,
    UrlPath((bucket, name)): UrlPath<(String, String)>,
) -> Response {
    write(idx, bucket, name, None).await
}

async fn list(State(idx): State<Idx>, UrlPath(bucket): UrlPath<String>, body: Bytes) -> Response {
    let q: ListQuery = match serde_json::from_slice(&body) {
        Ok(q) => q,
        Err(e) => {
            return (StatusCode::BAD_REQUEST, format!("bad listing query: {e}")).into_response()
        }
    };
    match tokio::task::spawn_blocking(move || idx.list(&bucket, &q)).await {
        Ok(Ok(page)) => axum::Json(page).into_response(),
        Ok(Err(e)) => failed(e),
        Err(e) => failed(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(size: u64) -> IndexEntry {
        IndexEntry {
            size,
            etag: format!("{size:032x}"),
            modified_ms: 1,
            meta: None,
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
                        idx.write("bk", &name, Some(&entry(i))).expect("write");
                        if i.is_multiple_of(5) {
                            idx.write("bk", &name, None).expect("delete");
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
    fn lists_in_byte_order_with_prefix_delimiter_and_pages() {
        let dir = tempfile::tempdir().expect("tmp");
        let idx = ListingIndex::open(&dir.path().join("l.redb")).expect("open");
        for (i, n) in ["b", "a/2", "a/1", "a/x/y", "c", "\u{e9}", "Z", "a"]
            .iter()
            .enumerate()
        {
            idx.write("bk", n, Some(&entry(i as u64))).expect("write");
        }
        idx.write("other", "a/1", Some(&entry(9))).expect("write");
        idx.write("bk", "c", None).expect("delete");
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
