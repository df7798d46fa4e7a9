//! The client: map cache, writes to all replicas, reads with failover.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hyper::{Method, StatusCode};
use rand::seq::SliceRandom;
use strata_placement::{object_hash, PlacementTable, DEFAULT_TRACT_SIZE};
use strata_proto::replica::{IndexChange, IndexOrder, RecordRead, Refusal};

use crate::http::Http;
use crate::replica::{Call, Intents, Remote, Replica};
use crate::view::{ClusterView, Placement};
use crate::ClientError;
use strata_proto::{
    index_row, inline_meta_record, manifest_record, new_cookie, new_tract_version, parse_head,
    parse_head_start, tract_data, tract_record, valid_name, versioned_tract_key, ExtendRequest,
    Head, HeadInfo, IndexEntry, ListPage, ListQuery, Manifest, ObjectMeta, HEAD_START,
    RECORD_INLINE_COOKIE, RECORD_TRACT,
};

/// Timeouts of a [`Client`].
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// One request to one node.
    pub request_timeout: Duration,
    /// How long one operation keeps retrying (refreshing the map, failing
    /// over) before it reports an error: long enough for the health checker
    /// to replace a dead node.
    pub deadline: Duration,
    /// Data tracts of one large object written or read at once.
    pub tract_parallelism: usize,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            request_timeout: Duration::from_secs(3),
            deadline: Duration::from_secs(60),
            tract_parallelism: 8,
        }
    }
}

impl ClientConfig {
    /// The settings of a node that coordinates requests for other clients
    /// (the public API and the S3 API of every node): a shorter deadline,
    /// so a caller hears of an outage while it still waits, and fewer
    /// tracts in flight per request, since many requests share the node.
    pub fn coordinator() -> ClientConfig {
        ClientConfig {
            deadline: Duration::from_secs(30),
            tract_parallelism: 4,
            ..ClientConfig::default()
        }
    }
}

/// Counters of what the client had to do beyond the happy path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// Map fetches after the first.
    pub refreshes: u64,
    /// Requests refused for a stale table version.
    pub stale_refusals: u64,
    /// Reads that moved on to another replica after an error or timeout.
    pub failovers: u64,
    /// Writes retried (a replica failed; waiting for a new table).
    pub write_retries: u64,
}

#[derive(Default)]
struct Counters {
    stale: AtomicU64,
    failovers: AtomicU64,
    write_retries: AtomicU64,
}

/// A cluster client: the coordinator of every operation, in a client
/// process and in every node alike. Share it (`Arc<Client>`) across tasks.
pub struct Client {
    view: Arc<ClusterView>,
    cfg: ClientConfig,
    counters: Counters,
    /// Last stamp handed out: stamps of one client strictly increase.
    last_stamp: std::sync::atomic::AtomicU64,
    /// The replica in this process (a node's own), by its address:
    /// called directly, never over HTTP.
    local: Option<(String, Arc<dyn Replica>)>,
}

/// The replica at one address: this process's own, or a remote one.
enum Via<'c> {
    Here(&'c dyn Replica),
    There(Remote<'c>),
}

impl<'c> std::ops::Deref for Via<'c> {
    type Target = dyn Replica + 'c;
    fn deref(&self) -> &Self::Target {
        match self {
            Via::Here(r) => *r,
            Via::There(r) => r,
        }
    }
}

enum Outcome {
    Done,
    Stale,
    Failed(String),
}

impl Client {
    /// A stamp for one write or delete: the clock in microseconds, made
    /// strictly increasing within this client so that a delete issued after
    /// a put of the same name always wins over it.
    pub fn next_stamp(&self) -> u64 {
        let now = strata_proto::now_stamp();
        let mut last = self.last_stamp.load(Ordering::Relaxed);
        loop {
            let next = now.max(last + 1);
            match self.last_stamp.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(cur) => last = cur,
            }
        }
    }

    /// Fetches the map from the metadata service at `meta` (`host:port`),
    /// waiting up to `cfg.deadline` for the cluster's first table.
    pub async fn connect(meta: &str, cfg: ClientConfig) -> Result<Client, ClientError> {
        let view = Arc::new(ClusterView::new(
            meta,
            Http::new(),
            cfg.request_timeout,
            None,
        ));
        let client = Client::over(view, cfg, None);
        client.map().await?;
        Ok(client)
    }

    /// The coordinator over a process's cluster `view` (which may have no
    /// table yet: operations then fail with [`ClientError::NoTable`]),
    /// calling `local` directly for the replicas at its address (a node's
    /// own) and the others over HTTP.
    pub fn over(
        view: Arc<ClusterView>,
        cfg: ClientConfig,
        local: Option<(String, Arc<dyn Replica>)>,
    ) -> Client {
        Client {
            view,
            cfg,
            counters: Counters::default(),
            last_stamp: std::sync::atomic::AtomicU64::new(0),
            local,
        }
    }

    /// The cluster view the client places with.
    pub fn view(&self) -> &Arc<ClusterView> {
        &self.view
    }

    fn http(&self) -> &Http {
        self.view.http()
    }

    fn meta(&self) -> &str {
        self.view.meta()
    }

    /// The address of the replica in this process, if any.
    fn local_addr(&self) -> Option<&str> {
        self.local.as_ref().map(|(a, _)| a.as_str())
    }

    /// The replica at `addr`.
    fn at<'c>(&'c self, addr: &'c str) -> Via<'c> {
        self.at_with(addr, None)
    }

    /// [`at`](Self::at), a remote one sending a record whose digest the
    /// caller already has.
    fn at_with<'c>(
        &'c self,
        addr: &'c str,
        digest: Option<strata_meta::cluster_auth::Digest>,
    ) -> Via<'c> {
        match &self.local {
            Some((a, r)) if a == addr => Via::Here(r.as_ref()),
            _ => Via::There(Remote {
                http: self.http(),
                addr,
                timeout: self.cfg.request_timeout,
                digest,
            }),
        }
    }

    /// A replica's answer to `call`, or [`Refusal::Unreachable`] after one
    /// request timeout.
    async fn timed<T>(&self, addr: &str, call: Call<'_, T>) -> Result<T, Refusal> {
        match tokio::time::timeout(self.cfg.request_timeout, call).await {
            Ok(r) => r,
            Err(_) => Err(Refusal::Unreachable(format!(
                "{addr}: no answer within {:?}",
                self.cfg.request_timeout
            ))),
        }
    }

    /// The placement table the client uses now (none before the cluster
    /// has one).
    pub fn table(&self) -> Option<PlacementTable> {
        self.current().map(|m| m.table.clone())
    }

    /// The version of that table (0: none yet).
    pub fn table_version(&self) -> u64 {
        self.view.version()
    }

    /// What the client had to do beyond the happy path so far.
    pub fn stats(&self) -> ClientStats {
        let c = &self.counters;
        ClientStats {
            refreshes: self.view.refreshes(),
            stale_refusals: c.stale.load(Ordering::Relaxed),
            failovers: c.failovers.load(Ordering::Relaxed),
            write_retries: c.write_retries.load(Ordering::Relaxed),
        }
    }

    fn current(&self) -> Option<Arc<Placement>> {
        self.view.current()
    }

    /// The map in force, fetched first when the view has none yet.
    /// The current table, or the cluster's first one: an operation that
    /// arrives before it (a node serves as soon as it has registered, the
    /// metadata service builds the table once enough nodes have) waits for
    /// it as long as it would retry anything else, `cfg.deadline`.
    async fn map(&self) -> Result<Arc<Placement>, ClientError> {
        if let Some(m) = self.current() {
            return Ok(m);
        }
        let start = Instant::now();
        loop {
            self.view.refresh_from(0).await?;
            if let Some(m) = self.current() {
                return Ok(m);
            }
            if start.elapsed() >= self.cfg.deadline {
                return Err(ClientError::NoTable);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Fetches the map again unless another task already replaced the one
    /// with version `seen`.
    pub async fn refresh_from(&self, seen: u64) -> Result<(), ClientError> {
        self.view.refresh_from(seen).await
    }

    /// Stores `data` as `bucket/key` on every replica; returns once all of
    /// them have it durably, with the object's new random cookie.
    pub async fn put(&self, bucket: &str, key: &str, data: Bytes) -> Result<u32, ClientError> {
        let once = futures_util::stream::once(async move { Ok::<_, std::io::Error>(data) });
        self.put_stream(bucket, key, once).await
    }

    /// The tract size of the cluster's table: objects larger than this are
    /// split into tracts across rows.
    pub fn tract_size(&self) -> u64 {
        self.current()
            .map_or(DEFAULT_TRACT_SIZE, |m| m.table.tract_size())
    }

    /// Bytes a streamed PUT holds in memory at most: the tract being
    /// filled and the ones in flight.
    pub fn put_buffer_bytes(&self) -> u64 {
        self.tract_size() * (self.cfg.tract_parallelism.max(1) as u64 + 1)
    }

    /// Stores the bytes `body` yields as `bucket/key`, streaming: a body
    /// that ends within one tract is stored whole at the object's row;
    /// a longer one is cut into tracts as it arrives, each written to every
    /// replica of its own row while the next is read (at most
    /// `tract_parallelism` tracts in memory), then the manifest (tract −1)
    /// last, so that a reader that finds the manifest finds every tract.
    /// Returns the object's new random cookie once every replica holds
    /// every record durably.
    pub async fn put_stream<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
    ) -> Result<u32, ClientError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        self.put_stream_tier(bucket, key, body)
            .await
            .map(|(cookie, _)| cookie)
    }

    /// [`Client::put_stream`], also answering the tier the object's first
    /// replica (this process's own, when it holds one) put its bytes on
    /// (`flash` or `disk`; for a striped object, its first tract's).
    pub async fn put_stream_tier<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
    ) -> Result<(u32, Option<String>), ClientError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        self.put_stream_as(bucket, key, body, new_cookie(), None)
            .await
    }

    /// Stores the body of `bucket/key` as [`Client::put_stream`] does, but
    /// not its head record: a body that ends within one tract is kept in
    /// memory; a longer one has every data tract durable on every replica
    /// when this returns. Nothing is visible until [`Client::put_head`]
    /// writes the head, which may then carry a digest of the body, and
    /// which a caller may write beside other changes of its own (an S3
    /// coordinator writes the listing entry at the same time, with the
    /// same stamp). A staged body never headed leaves, at most, data
    /// tracts no manifest names (garbage, as a write cut short leaves).
    pub async fn put_staged<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
    ) -> Result<Staged, ClientError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        self.stage(bucket, key, body, new_cookie(), None).await
    }

    /// Writes the head record of a staged body with `stamp` (of two
    /// versions of a name the newer stamp wins on every replica) and
    /// `meta` (what S3 keeps with an object: ETag, content headers, user
    /// metadata); returns the object's cookie and the tier its first
    /// replica put it on, once every replica holds it durably.
    pub async fn put_head(
        &self,
        staged: Staged,
        stamp: u64,
        meta: Option<ObjectMeta>,
    ) -> Result<(u32, Option<String>), ClientError> {
        let Staged {
            bucket,
            key,
            h,
            cookie,
            body,
            first_tier,
        } = staged;
        let m = match body {
            StagedBody::Small(rec) => {
                let rec = match meta {
                    Some(m) => inline_meta_record(cookie, &m, &rec[INLINE_LEAD..]),
                    None => rec,
                };
                return self
                    .put_record(&bucket, &key, h, -1, rec, Some(stamp))
                    .await
                    .map(|tier| (cookie, tier));
            }
            StagedBody::Striped {
                len,
                tract_size,
                tracts,
                version,
            } => Manifest {
                len,
                tract_size,
                tracts,
                lens: Vec::new(),
                cookie,
                meta,
                version,
            },
        };
        // Every data tract is durable on every replica: the manifest may
        // now make this version visible. The one it replaces is read first,
        // so that its tracts can be freed once this one is in place.
        let replaced = self.replaced_head(&bucket, &key, h).await;
        self.put_record(&bucket, &key, h, -1, manifest_record(&m), Some(stamp))
            .await?;
        if let Some((old, old_stamp)) = replaced {
            // Only a version older than this write's manifest is replaced
            // (of two writers, the newer stamp wins on every replica); its
            // tracts are garbage now. Best effort: a failure leaves them
            // behind, unreferenced, and loses nothing.
            if old_stamp < stamp && old.version != m.version {
                self.delete_tracts(&bucket, &key, h, &old).await;
            }
        }
        Ok((cookie, first_tier))
    }

    /// Stores `data` as `bucket/key` with a given cookie and stamp instead
    /// of new ones: an object brought over from elsewhere (`strata
    /// upgrade`) keeps the cookie its URLs carry, and of two versions of a
    /// name the one with the newer stamp wins, whatever the order they are
    /// written in.
    pub async fn put_as(
        &self,
        bucket: &str,
        key: &str,
        data: Bytes,
        cookie: u32,
        stamp: u64,
    ) -> Result<(), ClientError> {
        let once = futures_util::stream::once(async move { Ok::<_, std::io::Error>(data) });
        self.put_stream_as(bucket, key, once, cookie, Some(stamp))
            .await
            .map(|_| ())
    }

    async fn put_stream_as<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
        cookie: u32,
        stamp: Option<u64>,
    ) -> Result<(u32, Option<String>), ClientError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        let staged = self.stage(bucket, key, body, cookie, stamp).await?;
        let stamp = stamp.unwrap_or_else(|| self.next_stamp());
        self.put_head(staged, stamp, None).await
    }

    async fn stage<S, E>(
        &self,
        bucket: &str,
        key: &str,
        body: S,
        cookie: u32,
        stamp: Option<u64>,
    ) -> Result<Staged, ClientError>
    where
        S: futures_util::Stream<Item = Result<Bytes, E>>,
        E: std::fmt::Display,
    {
        use futures_util::stream::{FuturesOrdered, StreamExt};
        check(bucket, key)?;
        let h = object_hash(bucket, key);
        // The table's tract size: a node may take a PUT before its first
        // table arrives, and the object must not be cut to a default.
        let ts = self.map().await?.table.tract_size() as usize;
        let body_err = |e: E| ClientError::Write {
            name: format!("{bucket}/{key}"),
            reason: format!("reading the body: {e}"),
        };
        let mut body = std::pin::pin!(body);
        let mut len = 0u64;
        let mut tracts = 0u64;
        let mut inflight = FuturesOrdered::new();
        let mut ended = false;
        // Each tract's record is built in place (kind byte, then the bytes
        // as they arrive): one copy from the body into the record, the only
        // one on the way to the segment file (the row store writes the
        // record where it lies). The first record has room for an inline
        // record's kind and cookie before the bytes ([`INLINE_LEAD`]): a
        // body that ends within it becomes that record in place; one that
        // goes on is a tract from its fifth byte.
        // A record starts small: a body that arrives in one chunk (most
        // small objects) gets a buffer of its size, not a whole tract's
        // (8 MiB by default: a mapping and its page faults per PUT); a
        // second chunk reserves the rest of the tract at once.
        let new_record = |lead: usize| {
            let mut r = BytesMut::new();
            r.resize(lead - 1, 0);
            r.extend_from_slice(&[RECORD_TRACT]);
            r
        };
        let mut lead = INLINE_LEAD;
        let mut rec = new_record(lead);
        let mut pending: Option<Bytes> = None;
        let mut first_tier: Option<String> = None;
        // This write's tracts go under keys of their own: an overwrite cut
        // short leaves the version it replaces whole.
        let tract_version = new_tract_version();
        let staged = |body, first_tier| Staged {
            bucket: bucket.to_string(),
            key: key.to_string(),
            h,
            cookie,
            body,
            first_tier,
        };
        loop {
            while rec.len() < ts + lead {
                let chunk = match pending.take() {
                    Some(c) => c,
                    None => match next_chunk(&mut body, &mut inflight, &mut first_tier).await? {
                        Some(Ok(c)) => {
                            len += c.len() as u64;
                            c
                        }
                        Some(Err(e)) => return Err(body_err(e)),
                        None => {
                            ended = true;
                            break;
                        }
                    },
                };
                let room = ts + lead - rec.len();
                if rec.len() > lead {
                    rec.reserve(room);
                } else {
                    rec.reserve(chunk.len().min(room));
                }
                if chunk.len() <= room {
                    rec.extend_from_slice(&chunk);
                } else {
                    rec.extend_from_slice(&chunk[..room]);
                    pending = Some(chunk.slice(room..));
                }
            }
            if tracts == 0 && ended {
                // Small object: stored whole in its head record, no tracts.
                rec[0] = RECORD_INLINE_COOKIE;
                rec[1..INLINE_LEAD].copy_from_slice(&cookie.to_le_bytes());
                return Ok(staged(StagedBody::Small(rec.freeze()), None));
            }
            if rec.len() > lead {
                let piece = std::mem::replace(&mut rec, new_record(1))
                    .freeze()
                    .slice(lead - 1..);
                lead = 1;
                let t = tracts;
                tracts += 1;
                let name = versioned_tract_key(key, tract_version, t);
                inflight.push_back(async move {
                    self.put_record(bucket, &name, h, t as i64, piece, stamp)
                        .await
                });
                if inflight.len() >= self.cfg.tract_parallelism.max(1) {
                    if let Some(r) = inflight.next().await {
                        let t = r?;
                        first_tier = first_tier.or(t);
                    }
                }
            }
            if ended {
                break;
            }
        }
        while let Some(r) = inflight.next().await {
            let t = r?;
            first_tier = first_tier.or(t);
        }
        Ok(staged(
            StagedBody::Striped {
                len,
                tract_size: ts as u64,
                tracts,
                version: tract_version,
            },
            first_tier,
        ))
    }

    /// The manifest (and its stamp) an overwrite of `bucket/key` is about
    /// to replace, if the object is striped; `None` when it is small,
    /// absent, or cannot be read within one request timeout (its tracts
    /// are then left behind rather than the write delayed).
    async fn replaced_head(&self, bucket: &str, key: &str, h: u64) -> Option<(Manifest, u64)> {
        let read = self.get_stamped(bucket, key, h, -1);
        match tokio::time::timeout(self.cfg.request_timeout, read).await {
            Ok(Ok(Some((rec, stamp)))) => match parse_head(&rec) {
                Ok(Head::Manifest(m)) => Some((m, stamp)),
                _ => None,
            },
            _ => None,
        }
    }

    /// Deletes the data tracts of manifest `m` of `bucket/key` (best
    /// effort: a tract that cannot be deleted stays, unreferenced).
    async fn delete_tracts(&self, bucket: &str, key: &str, h: u64, m: &Manifest) {
        use futures_util::stream::{self, StreamExt};
        stream::iter(0..m.tracts)
            .map(|t| {
                let name = m.tract_key(key, t);
                async move {
                    let stamp = self.next_stamp();
                    let _ = self.delete_record(bucket, &name, h, t as i64, stamp).await;
                }
            })
            .buffer_unordered(self.cfg.tract_parallelism.max(1))
            .collect::<Vec<()>>()
            .await;
    }

    async fn put_record(
        &self,
        bucket: &str,
        name: &str,
        h: u64,
        tract: i64,
        body: Bytes,
        stamp: Option<u64>,
    ) -> Result<Option<String>, ClientError> {
        let start = Instant::now();
        let stamp = stamp.unwrap_or_else(|| self.next_stamp());
        let mut backoff = Duration::from_millis(50);
        let mut tier: Option<String> = None;
        // The record is signed for each remote replica: hashed once for
        // all of them (and all the tries), when more than one is remote.
        let mut digest = None;
        loop {
            let map = self.map().await?;
            let version = map.table.version();
            let row = map.table.tract_row(h, tract);
            let reps = map.replicas(row);
            let outcome = if reps.is_empty() {
                Outcome::Failed(format!("row {row} has no live replica"))
            } else {
                let remote = reps
                    .iter()
                    .filter(|a| Some(a.as_str()) != self.local_addr())
                    .count();
                if remote > 1 && digest.is_none() {
                    digest = self.http().digest_of(&body);
                }
                let sends = reps.iter().map(|addr| {
                    let body = body.clone();
                    async move {
                        let via = self.at_with(addr, digest);
                        self.timed(addr, via.put(version, row, bucket, name, stamp, body))
                            .await
                    }
                });
                let results = futures_util::future::join_all(sends).await;
                let local = self.local_addr();
                let mut out = Outcome::Done;
                for (addr, r) in reps.iter().zip(results) {
                    match r {
                        Err(Refusal::Full(why)) => {
                            // (A tract's stored name carries its number after a NUL.)
                            let key = name.split('\0').next().unwrap_or(name);
                            return Err(ClientError::Full {
                                name: format!("{bucket}/{key}"),
                                reason: format!("{addr}: {why}"),
                            });
                        }
                        Ok(t) => {
                            // The tier of this process's own replica, else
                            // of the first one.
                            if tier.is_none() || local == Some(addr.as_str()) {
                                tier = t;
                            }
                        }
                        Err(Refusal::Stale { .. }) => {
                            self.counters.stale.fetch_add(1, Ordering::Relaxed);
                            out = Outcome::Stale;
                        }
                        Err(e) => {
                            if !matches!(out, Outcome::Stale) {
                                out = Outcome::Failed(format!("{addr}: {e}"));
                            }
                        }
                    }
                }
                out
            };
            match outcome {
                Outcome::Done => return Ok(tier),
                Outcome::Stale => {
                    self.refresh_from(version).await?;
                }
                Outcome::Failed(reason) => {
                    if start.elapsed() >= self.cfg.deadline {
                        return Err(ClientError::Write {
                            name: format!("{bucket}/{name}"),
                            reason,
                        });
                    }
                    self.counters.write_retries.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                    // A replica is down: the health checker will publish a
                    // table without it.
                    let _ = self.refresh_from(version).await;
                }
            }
        }
    }

    /// Appends `data` to `bucket/key` atomically with respect to other
    /// appenders (FDS's extend-blob): the first live replica of the
    /// object's metadata row reserves whole tracts at the end of the object
    /// and updates its manifest on every replica, then the data tracts are
    /// written. Returns the first tract of the reserved range. An object
    /// written whole with [`put`](Self::put) and larger than a tract can be
    /// appended to; a small one (stored inline) cannot.
    pub async fn append(&self, bucket: &str, key: &str, data: Bytes) -> Result<u64, ClientError> {
        check(bucket, key)?;
        if data.is_empty() {
            return Err(ClientError::Write {
                name: format!("{bucket}/{key}"),
                reason: "nothing to append".into(),
            });
        }
        let h = object_hash(bucket, key);
        let ts = self.map().await?.table.tract_size();
        let lens: Vec<u64> = data.chunks(ts as usize).map(|c| c.len() as u64).collect();
        let (first, version) = self.extend(bucket, key, h, &lens, ts).await?;
        let work = lens.iter().enumerate().map(|(i, _)| {
            let start = i * ts as usize;
            let end = (start + ts as usize).min(data.len());
            let piece = tract_record(&data[start..end]);
            let t = first + i as u64;
            let name = versioned_tract_key(key, version, t);
            async move {
                self.put_record(bucket, &name, h, t as i64, piece, None)
                    .await
            }
        });
        run_bounded(work, self.cfg.tract_parallelism).await?;
        Ok(first)
    }

    async fn extend(
        &self,
        bucket: &str,
        key: &str,
        h: u64,
        lens: &[u64],
        tract_size: u64,
    ) -> Result<(u64, u64), ClientError> {
        let req = ExtendRequest {
            lens: lens.to_vec(),
            tract_size,
        };
        let start = Instant::now();
        let mut backoff = Duration::from_millis(50);
        loop {
            let map = self.map().await?;
            let version = map.table.version();
            let row = map.table.tract_row(h, -1);
            let reason = match map.replicas(row).first() {
                None => format!("row {row} has no live replica"),
                Some(addr) => {
                    let via = self.at(addr);
                    match self
                        .timed(addr, via.extend(version, row, bucket, key, &req))
                        .await
                    {
                        Ok(e) => return Ok((e.first, e.version)),
                        Err(Refusal::Stale { .. }) => {
                            self.counters.stale.fetch_add(1, Ordering::Relaxed);
                            self.refresh_from(version).await?;
                            continue;
                        }
                        Err(Refusal::Bad(why) | Refusal::Conflict(why)) => {
                            return Err(ClientError::Write {
                                name: format!("{bucket}/{key}"),
                                reason: why,
                            });
                        }
                        Err(Refusal::Full(why)) => {
                            return Err(ClientError::Full {
                                name: format!("{bucket}/{key}"),
                                reason: format!("{addr}: {why}"),
                            });
                        }
                        Err(e) => format!("{addr}: {e}"),
                    }
                }
            };
            if start.elapsed() >= self.cfg.deadline {
                return Err(ClientError::Write {
                    name: format!("{bucket}/{key}"),
                    reason,
                });
            }
            self.counters.write_retries.fetch_add(1, Ordering::Relaxed);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
            let _ = self.refresh_from(version).await;
        }
    }

    /// Reads `bucket/key` whole: `None` when no replica has it.
    pub async fn get(&self, bucket: &str, key: &str) -> Result<Option<Bytes>, ClientError> {
        let Some(head) = self.head(bucket, key).await? else {
            return Ok(None);
        };
        let m = match head {
            Head::Inline { data, .. } => return Ok(Some(data)),
            Head::Manifest(m) => m,
        };
        let work = (0..m.tracts).map(|t| self.get_tract(bucket, key, &m, t));
        let parts = run_bounded(work, self.cfg.tract_parallelism).await?;
        let mut out = BytesMut::with_capacity(m.len as usize);
        for p in parts {
            out.extend_from_slice(&p);
        }
        if out.len() as u64 != m.len {
            return Err(ClientError::Manifest {
                name: format!("{bucket}/{key}"),
                reason: format!("tracts hold {} bytes, manifest says {}", out.len(), m.len),
            });
        }
        Ok(Some(out.freeze()))
    }

    /// Reads the record at `bucket/key`'s metadata row: the object whole
    /// when it is small, else its manifest; `None` when no replica has it.
    pub async fn head(&self, bucket: &str, key: &str) -> Result<Option<Head>, ClientError> {
        Ok(self.read_head(bucket, key).await?.map(|r| r.head))
    }

    /// The head record of `bucket/key` whole (an inline object's bytes
    /// with it), its stamp, and where the replica that answered read it.
    pub async fn read_head(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<HeadRead<Head>>, ClientError> {
        check(bucket, key)?;
        let h = object_hash(bucket, key);
        let Some(got) = self.read_record(bucket, key, h, -1, None).await? else {
            return Ok(None);
        };
        match parse_head(&got.record) {
            Ok(head) => Ok(Some(HeadRead {
                head,
                stamp: got.stamp,
                tier: got.tier,
            })),
            Err(reason) => Err(ClientError::Manifest {
                name: format!("{bucket}/{key}"),
                reason,
            }),
        }
    }

    /// What a HEAD answers of `bucket/key`, with the head record's stamp
    /// and where the replica that answered read it: [`Client::read_head`]
    /// without the object's bytes. The replica reads the record's first
    /// [`HEAD_START`] bytes only (a HEAD of an 8 MiB inline object read 8
    /// MiB), and the record whole when its metadata runs past them.
    pub async fn read_head_info(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<Option<HeadRead<HeadInfo>>, ClientError> {
        check(bucket, key)?;
        let h = object_hash(bucket, key);
        let Some(got) = self
            .read_record(bucket, key, h, -1, Some(HEAD_START))
            .await?
        else {
            return Ok(None);
        };
        // A replica that does not know `start` answers the record whole.
        let len = got.len.unwrap_or(got.record.len() as u64);
        match parse_head_start(&got.record, len) {
            Ok(Some(info)) => Ok(Some(HeadRead {
                head: info,
                stamp: got.stamp,
                tier: got.tier,
            })),
            Ok(None) => Ok(self.read_head(bucket, key).await?.map(|r| HeadRead {
                head: r.head.info(),
                stamp: r.stamp,
                tier: r.tier,
            })),
            Err(reason) => Err(ClientError::Manifest {
                name: format!("{bucket}/{key}"),
                reason,
            }),
        }
    }

    /// Reads data tract `t` of an object whose manifest is `m`, checking
    /// its length against the manifest.
    pub async fn get_tract(
        &self,
        bucket: &str,
        key: &str,
        m: &Manifest,
        t: u64,
    ) -> Result<Bytes, ClientError> {
        let h = object_hash(bucket, key);
        let name = format!("{bucket}/{key}");
        let data = self
            .get_record(bucket, &m.tract_key(key, t), h, t as i64)
            .await?
            .map(tract_data)
            .ok_or_else(|| ClientError::Manifest {
                name: name.clone(),
                reason: format!("tract {t} is missing"),
            })?;
        if data.len() as u64 != m.tract_len(t) {
            return Err(ClientError::Manifest {
                name,
                reason: format!(
                    "tract {t} holds {} bytes, the manifest says {}",
                    data.len(),
                    m.tract_len(t)
                ),
            });
        }
        Ok(data)
    }

    /// The bytes `start..end` of an object whose head record is `head`, as
    /// a stream of pieces: an inline object at once, a striped one tract by
    /// tract (the next tract read while this one is consumed), so a reader
    /// holds at most two tracts of any object in memory.
    pub fn read_range(
        self: &Arc<Self>,
        bucket: &str,
        key: &str,
        head: Head,
        start: u64,
        end: u64,
    ) -> impl futures_util::Stream<Item = Result<Bytes, ClientError>> + Send + 'static {
        use futures_util::stream::{self, StreamExt};
        let end = end.min(head.len());
        let start = start.min(end);
        match head {
            Head::Inline { data, .. } => {
                stream::iter(vec![Ok(data.slice(start as usize..end as usize))]).left_stream()
            }
            Head::Manifest(m) => {
                // Tracts of a written-whole object are full but the last;
                // appended objects list each tract's length.
                let offsets: Vec<(u64, u64)> = (0..m.tracts)
                    .scan(0u64, |off, t| {
                        let l = m.tract_len(t);
                        let o = *off;
                        *off += l;
                        Some((o, l))
                    })
                    .collect();
                let wanted: Vec<(u64, u64)> = (0..m.tracts)
                    .filter_map(|t| {
                        let (o, l) = offsets[t as usize];
                        (o < end && o + l > start).then_some((t, o))
                    })
                    .collect();
                let (client, bucket, key) = (self.clone(), bucket.to_string(), key.to_string());
                let m = Arc::new(m);
                stream::iter(wanted)
                    .map(move |(t, o)| {
                        let (client, bucket, key, m) =
                            (client.clone(), bucket.clone(), key.clone(), m.clone());
                        async move {
                            let data = client.get_tract(&bucket, &key, &m, t).await?;
                            let a = start.saturating_sub(o).min(data.len() as u64) as usize;
                            let b = (end - o).min(data.len() as u64) as usize;
                            Ok(data.slice(a..b))
                        }
                    })
                    .buffered(2)
                    .right_stream()
            }
        }
    }

    async fn get_record(
        &self,
        bucket: &str,
        name: &str,
        h: u64,
        tract: i64,
    ) -> Result<Option<Bytes>, ClientError> {
        Ok(self
            .get_stamped(bucket, name, h, tract)
            .await?
            .map(|(rec, _)| rec))
    }

    /// A record and its stamp, from one replica with failover.
    async fn get_stamped(
        &self,
        bucket: &str,
        name: &str,
        h: u64,
        tract: i64,
    ) -> Result<Option<(Bytes, u64)>, ClientError> {
        Ok(self
            .read_record(bucket, name, h, tract, None)
            .await?
            .map(|g| (g.record, g.stamp)))
    }

    /// One record read from one replica with failover: the replica in this
    /// process first (no network hop), the others in random order. With a
    /// `limit`, only the record's first `limit` bytes are asked for.
    async fn read_record(
        &self,
        bucket: &str,
        name: &str,
        h: u64,
        tract: i64,
        limit: Option<usize>,
    ) -> Result<Option<Got>, ClientError> {
        let start = Instant::now();
        let mut backoff = Duration::from_millis(50);
        loop {
            let map = self.map().await?;
            let version = map.table.version();
            let row = map.table.tract_row(h, tract);
            let mut reps = map.replicas(row);
            reps.shuffle(&mut rand::rng());
            if let Some(i) = self
                .local_addr()
                .and_then(|l| reps.iter().position(|a| a.as_str() == l))
            {
                reps.swap(0, i);
            }
            let mut not_found = 0;
            let mut unreadable = Vec::new();
            let mut stale = false;
            // The newest tombstone seen: a replica that missed the delete
            // may still hold the older object; it must not be served.
            let mut deleted_at: Option<u64> = None;
            let mut last_err = format!("row {row} has no live replica");
            for (i, addr) in reps.iter().enumerate() {
                let via = self.at(addr);
                match self
                    .timed(addr, via.get(version, row, bucket, name, limit))
                    .await
                {
                    Ok(RecordRead::Found {
                        record,
                        stamp,
                        len,
                        tier,
                    }) if deleted_at.is_none_or(|d| stamp > d) => {
                        return Ok(Some(Got {
                            record,
                            stamp,
                            len,
                            tier,
                        }))
                    }
                    Ok(RecordRead::Found { .. } | RecordRead::Absent) => not_found += 1,
                    Ok(RecordRead::Deleted { stamp }) => {
                        not_found += 1;
                        deleted_at = Some(deleted_at.map_or(stamp, |d| d.max(stamp)));
                    }
                    Err(Refusal::Stale { .. }) => {
                        self.counters.stale.fetch_add(1, Ordering::Relaxed);
                        stale = true;
                        break;
                    }
                    // The replica's device failed on this record: not a
                    // fault that passes (it repairs it from a peer that
                    // holds it, if one does).
                    Err(Refusal::Failed(e)) => unreadable.push(format!("{addr}: {e}")),
                    Err(e) => last_err = format!("{addr}: {e}"),
                }
                if i + 1 < reps.len() {
                    self.counters.failovers.fetch_add(1, Ordering::Relaxed);
                }
            }
            if stale {
                self.refresh_from(version).await?;
                continue;
            }
            if !reps.is_empty() && not_found == reps.len() {
                return Ok(None);
            }
            // Every replica answered: those that hold the record cannot
            // read it. Waiting changes nothing.
            if !reps.is_empty() && not_found + unreadable.len() == reps.len() {
                return Err(ClientError::Unreadable {
                    name: format!("{bucket}/{name}"),
                    reason: unreadable.join("; "),
                });
            }
            // Some replica failed (and the others lack it or failed too): it
            // may hold the only copy, so wait for it or for a new table.
            if start.elapsed() >= self.cfg.deadline {
                return Err(ClientError::Read {
                    name: format!("{bucket}/{name}"),
                    reason: last_err,
                });
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
            let _ = self.refresh_from(version).await;
        }
    }

    /// The cluster's S3 buckets, from the metadata service.
    pub async fn buckets(
        &self,
    ) -> Result<std::collections::BTreeMap<String, strata_meta::state::BucketRecord>, ClientError>
    {
        self.http()
            .get_json(
                &format!("http://{}/v1/buckets", self.meta()),
                self.cfg.request_timeout,
            )
            .await
            .map_err(|reason| ClientError::Meta {
                addr: self.meta().to_string(),
                reason,
            })
    }

    /// A bodiless request to the metadata service's control route `url`
    /// with the admin token.
    async fn admin_request(
        &self,
        method: Method,
        url: &str,
        admin_token: &str,
    ) -> Result<crate::HttpResponse, ClientError> {
        self.http()
            .send_with_headers(
                method,
                url,
                &[(strata_meta::http::ADMIN_TOKEN_HEADER, admin_token)],
                Bytes::new(),
                self.cfg.request_timeout,
            )
            .await
            .map_err(|reason| ClientError::Meta {
                addr: self.meta().to_string(),
                reason,
            })
    }

    /// The cluster's S3 access keys with their secrets and permissions,
    /// from the metadata service (which answers only with its admin token).
    pub async fn keys(
        &self,
        admin_token: &str,
    ) -> Result<std::collections::BTreeMap<String, strata_meta::state::KeyRecord>, ClientError>
    {
        let url = format!("http://{}/v1/keys", self.meta());
        let r = self.admin_request(Method::GET, &url, admin_token).await?;
        let fail = |reason: String| ClientError::Meta {
            addr: self.meta().to_string(),
            reason,
        };
        if r.status != StatusCode::OK {
            return Err(fail(format!("{url}: {}", r.status)));
        }
        serde_json::from_slice(&r.body).map_err(|e| fail(format!("{url}: {e}")))
    }

    /// Makes S3 bucket `name` readable without a key (`public`) or not, at
    /// the metadata service (which answers only with its admin token);
    /// returns whether the bucket exists.
    pub async fn set_bucket_public(
        &self,
        name: &str,
        public: bool,
        admin_token: &str,
    ) -> Result<bool, ClientError> {
        let url = format!(
            "http://{}/v1/buckets/{}/public",
            self.meta(),
            strata_proto::encode_segment(name)
        );
        let method = if public { Method::PUT } else { Method::DELETE };
        let r = self.admin_request(method, &url, admin_token).await?;
        let fail = |reason: String| ClientError::Meta {
            addr: self.meta().to_string(),
            reason,
        };
        match r.status {
            StatusCode::NO_CONTENT => Ok(true),
            StatusCode::NOT_FOUND => Ok(false),
            s => Err(fail(format!("{url}: {s}"))),
        }
    }

    /// Creates (`create`) or deletes an S3 bucket at the metadata service;
    /// returns whether anything changed (false: it existed already, or did
    /// not exist).
    pub async fn set_bucket(&self, name: &str, create: bool) -> Result<bool, ClientError> {
        let url = format!(
            "http://{}/v1/buckets/{}",
            self.meta(),
            strata_proto::encode_segment(name)
        );
        let method = if create { Method::PUT } else { Method::DELETE };
        let r = self
            .http()
            .send(method, &url, None, Bytes::new(), self.cfg.request_timeout)
            .await
            .map_err(|reason| ClientError::Meta {
                addr: self.meta().to_string(),
                reason,
            })?;
        match r.status {
            StatusCode::CREATED | StatusCode::NO_CONTENT => Ok(true),
            StatusCode::OK | StatusCode::NOT_FOUND => Ok(false),
            StatusCode::BAD_REQUEST => Err(ClientError::BadName(name.to_string())),
            s => Err(ClientError::Meta {
                addr: self.meta().to_string(),
                reason: format!("{url}: {s}: {}", String::from_utf8_lossy(&r.body)),
            }),
        }
    }

    /// Writes (`Some`) or removes (`None`) `bucket/key`'s entry in the
    /// bucket's listing index on every replica of the bucket's index row;
    /// returns once every replica has it durably.
    pub async fn index_write(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
    ) -> Result<(), ClientError> {
        // The stamp orders this write against others of the same name on
        // each replica, and against what recovery copies in: the newer
        // wins, as for records (docs/placement.md, "The listing index").
        self.index_write_stamped(bucket, key, entry, self.next_stamp())
            .await
    }

    /// [`Client::index_write`] with the change's stamp given: an S3
    /// write's entry carries the stamp of the object's head record (or
    /// tombstone), so that of two writers of a name the listing and the
    /// object keep the same one.
    pub async fn index_write_stamped(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
    ) -> Result<(), ClientError> {
        let entry = entry.map(|e| IndexEntry { stamp, ..e.clone() });
        self.index_change(bucket, key, entry.as_ref(), stamp, IndexOrder::Write)
            .await
    }

    /// [`Client::index_write_stamped`] together with the write's intent,
    /// both in one durable commit of the index, when the node in this
    /// process is the only live replica of the bucket's index row (a
    /// cluster of one): the intent is then this node's own, as
    /// [`Client::intent`] records it, and is removed the same way. Returns
    /// false, having sent nothing, when the row has any other replica: the
    /// caller records an intent first and writes the entry as usual
    /// (docs/placement.md, "Write intents").
    pub async fn index_write_intended(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
    ) -> Result<bool, ClientError> {
        check(bucket, key)?;
        let Some((local, replica)) = &self.local else {
            return Ok(false);
        };
        let map = self.map().await?;
        let reps = map.replicas(index_row(&map.table, bucket));
        if reps.is_empty() || reps.iter().any(|a| a != local) {
            return Ok(false);
        }
        let change = IndexChange {
            bucket: bucket.to_string(),
            key: key.to_string(),
            entry: entry.map(|e| IndexEntry { stamp, ..e.clone() }),
            stamp,
            order: IndexOrder::Write,
            intent: true,
        };
        self.timed(local, replica.index_change(map.table.version(), &change))
            .await
            .map_err(|e| ClientError::Write {
                name: format!("{bucket}/{key} (listing index and write intent)"),
                reason: e.to_string(),
            })?;
        Ok(true)
    }

    /// Sets `bucket/key`'s listing entry to what its head record says
    /// (`entry`, with the record's stamp) or removes it (`None`, with the
    /// stamp `stamp`), on every replica of the index row, each only over
    /// nothing, something older, or what the interrupted write of intent
    /// stamp `intent` may have left (a stamp at most `intent`): the
    /// resolution of a write intent (docs/placement.md, "Write intents").
    pub async fn index_resolve(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
        intent: u64,
    ) -> Result<(), ClientError> {
        self.index_change(
            bucket,
            key,
            entry,
            stamp,
            IndexOrder::Resolve { upto: intent },
        )
        .await
    }

    /// Sends one change of `bucket/key`'s entry to every replica of the
    /// index row: `entry` (its own stamp) or a removal of stamp `stamp`,
    /// ordered as `order` says.
    async fn index_change(
        &self,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
        order: IndexOrder,
    ) -> Result<(), ClientError> {
        check(bucket, key)?;
        let change = IndexChange {
            bucket: bucket.to_string(),
            key: key.to_string(),
            stamp: entry.map_or(stamp, |e| e.stamp),
            entry: entry.cloned(),
            order,
            intent: false,
        };
        self.index_rows(bucket, IndexCall::Change(&change))
            .await
            .map(drop)
            .map_err(|reason| ClientError::Write {
                name: format!("{bucket}/{key} (listing index)"),
                reason,
            })
    }

    /// Records (`add`, durably before it returns) or removes the write
    /// intent of stamp `stamp` for `names` on the node in this process:
    /// its own, or one it holds `mirrored` for another node (recorded, as
    /// removals are, with the node's next durable group). False (and
    /// nothing done) for a client with no node in its process.
    pub async fn intent(
        &self,
        names: &[(String, String)],
        stamp: u64,
        add: bool,
        mirrored: bool,
    ) -> Result<bool, ClientError> {
        let Some(local) = self.local_addr() else {
            return Ok(false);
        };
        self.intent_at(local, names, stamp, add, mirrored).await?;
        Ok(true)
    }

    /// Records (`add`) or removes a mirror of this node's write intent on
    /// another node, which resolves it should this one be lost with its
    /// disk in the middle of the write (docs/placement.md, "Write
    /// intents"): on `to`, else on the first replica of `bucket`'s index
    /// row other than this node that takes it. Returns the node that
    /// holds it, or None when no other node took it (the write goes on
    /// with this node's intent alone, as in a cluster of one).
    pub async fn mirror_intent(
        &self,
        bucket: &str,
        names: &[(String, String)],
        stamp: u64,
        add: bool,
        to: Option<&str>,
    ) -> Option<String> {
        let local = self.local_addr()?;
        let candidates = match to {
            Some(to) => vec![to.to_string()],
            None => {
                let map = self.map().await.ok()?;
                map.replicas(index_row(&map.table, bucket))
                    .into_iter()
                    .filter(|a| a != local)
                    .collect()
            }
        };
        for addr in candidates {
            if self.intent_at(&addr, names, stamp, add, true).await.is_ok() {
                return Some(addr);
            }
        }
        None
    }

    /// One intent change sent to the node at `addr`.
    async fn intent_at(
        &self,
        addr: &str,
        names: &[(String, String)],
        stamp: u64,
        add: bool,
        mirrored: bool,
    ) -> Result<(), ClientError> {
        let change = strata_proto::IntentChange {
            names: names.to_vec(),
            stamp,
            add,
            mirrored,
        };
        let via = self.at(addr);
        self.timed(addr, via.intents(&change))
            .await
            .map_err(|e| ClientError::Write {
                name: "write intents".into(),
                reason: format!("{addr}: {e}"),
            })
    }

    /// The write intents of the node in this process recorded with a
    /// stamp below `before`: (bucket, key, stamp), its own or those it
    /// holds `mirrored` for other nodes; none without a node.
    pub async fn intents_before(
        &self,
        before: u64,
        mirrored: bool,
    ) -> Result<Intents, ClientError> {
        let Some((local, replica)) = &self.local else {
            return Ok(Vec::new());
        };
        self.timed(local, replica.intents_before(before, mirrored))
            .await
            .map_err(|e| ClientError::Read {
                name: "write intents".into(),
                reason: e.to_string(),
            })
    }

    /// Makes one call on the replicas of `bucket`'s index row, with a
    /// fresh table and back-off until the deadline: on every replica
    /// (`all`: a change, done when each took it) or on one replica at a
    /// time in random order (a read, done at the first answer). Returns
    /// the first answer, or the last failure.
    async fn index_rows(
        &self,
        bucket: &str,
        call: IndexCall<'_>,
    ) -> Result<Option<ListPage>, String> {
        let all = matches!(call, IndexCall::Change(_));
        let start = Instant::now();
        let mut backoff = Duration::from_millis(50);
        loop {
            let map = self.map().await.map_err(|e| e.to_string())?;
            let version = map.table.version();
            let row = index_row(&map.table, bucket);
            // A change goes to every replica; a listing only to one that
            // holds the whole index of the row (a replica still being
            // filled by recovery would miss older names).
            let reps = if all {
                map.replicas(row)
            } else {
                let mut r = map.complete_replicas(row);
                r.shuffle(&mut rand::rng());
                r
            };
            let mut last_err = if all {
                String::from("the index row has no live replica")
            } else {
                String::from(
                    "no live replica holds the whole listing index of the bucket's row (a copy is still under way)",
                )
            };
            let mut done = 0;
            for addr in &reps {
                let via = self.at(addr);
                let answer = match call {
                    IndexCall::Change(c) => self
                        .timed(addr, via.index_change(version, c))
                        .await
                        .map(|()| None),
                    IndexCall::List(q) => self
                        .timed(addr, via.index_list(version, bucket, q))
                        .await
                        .map(Some),
                };
                match answer {
                    Ok(page) if !all => return Ok(page),
                    Ok(_) => done += 1,
                    Err(e) => last_err = format!("{addr}: {e}"),
                }
            }
            if all && done == reps.len() && done > 0 {
                return Ok(None);
            }
            if start.elapsed() >= self.cfg.deadline {
                return Err(last_err);
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(1));
            let _ = self.refresh_from(version).await;
        }
    }

    /// One page of `bucket`'s listing index, from one replica of its index
    /// row (failing over to the others).
    pub async fn index_list(&self, bucket: &str, q: &ListQuery) -> Result<ListPage, ClientError> {
        let name = format!("{bucket} (listing index)");
        self.index_rows(bucket, IndexCall::List(q))
            .await
            .map_err(|reason| ClientError::Read {
                name: name.clone(),
                reason,
            })?
            .ok_or(ClientError::Read {
                name,
                reason: "no replica answered".into(),
            })
    }

    /// Deletes `bucket/key` (and its tracts) on every replica; returns
    /// whether it existed.
    pub async fn delete(&self, bucket: &str, key: &str) -> Result<bool, ClientError> {
        self.delete_stamped(bucket, key, self.next_stamp()).await
    }

    /// [`Client::delete`] with the tombstone's stamp given (an S3
    /// coordinator removes the listing entry with the same stamp, at the
    /// same time).
    pub async fn delete_stamped(
        &self,
        bucket: &str,
        key: &str,
        stamp: u64,
    ) -> Result<bool, ClientError> {
        check(bucket, key)?;
        let h = object_hash(bucket, key);
        // The head first: once it is a tombstone on every replica the
        // object is gone whole; a delete cut short before then leaves it
        // whole (never a manifest whose tracts are gone).
        //
        // The tombstone is written even when no replica holds the object:
        // "absent" may be an unfinished delete's newer tombstone on one
        // replica hiding the object the others still hold, and once this
        // delete has answered, no read may find that object again
        // (docs/reliability.md, finding 5). Each replica answers with what
        // the tombstone replaced there; the newest of those answers says
        // whether the object existed (as a read of it would have) and, if
        // it was split, which tracts to delete.
        let Some(prior) = self.delete_record(bucket, key, h, -1, stamp).await? else {
            return Ok(false);
        };
        if let Some(rec) = prior {
            if let Ok(Head::Manifest(m)) = parse_head(&rec) {
                self.delete_tracts(bucket, key, h, &m).await;
            }
        }
        Ok(true)
    }

    /// Writes a tombstone with `stamp` at every replica of the record's
    /// row. Returns what it replaced, from the replica whose replaced copy
    /// is newest: None if that copy was a tombstone or no replica held
    /// one, Some(Some(manifest record)) if it was a manifest, Some(None)
    /// if it was another live record.
    async fn delete_record(
        &self,
        bucket: &str,
        name: &str,
        h: u64,
        tract: i64,
        stamp: u64,
    ) -> Result<Option<Option<Bytes>>, ClientError> {
        let start = Instant::now();
        // The newest replaced copy any replica reported, over every pass
        // (a replica retried after it wrote the tombstone reports the
        // tombstone itself, of this stamp: not older, so not counted).
        let mut newest: Option<(u64, Option<Option<Bytes>>)> = None;
        loop {
            let map = self.map().await?;
            let version = map.table.version();
            let row = map.table.tract_row(h, tract);
            let mut stale = false;
            let mut failed = None;
            for addr in map.replicas(row) {
                let via = self.at(&addr);
                match self
                    .timed(&addr, via.delete(version, row, bucket, name, stamp))
                    .await
                {
                    Ok(r) => {
                        if let Some(s) = r.stamp.filter(|&s| s < stamp) {
                            if newest.as_ref().is_none_or(|(n, _)| s > *n) {
                                newest = Some((s, r.live.then_some(r.manifest)));
                            }
                        }
                    }
                    Err(Refusal::Stale { .. }) => stale = true,
                    // A replica whose device is full even for a tombstone
                    // (its reserve for deletes used up): the client's to
                    // know at once, not a fault to retry until the deadline.
                    Err(Refusal::Full(why)) => {
                        let key = name.split('\0').next().unwrap_or(name);
                        return Err(ClientError::Full {
                            name: format!("{bucket}/{key}"),
                            reason: format!("{addr}: {why}"),
                        });
                    }
                    Err(e) => failed = Some(format!("{addr}: {e}")),
                }
            }
            if stale {
                self.refresh_from(version).await?;
                continue;
            }
            match failed {
                None => return Ok(newest.and_then(|(_, live)| live)),
                Some(reason) if start.elapsed() >= self.cfg.deadline => {
                    return Err(ClientError::Write {
                        name: format!("{bucket}/{name}"),
                        reason,
                    })
                }
                Some(_) => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    let _ = self.refresh_from(version).await;
                }
            }
        }
    }
}

fn check(bucket: &str, key: &str) -> Result<(), ClientError> {
    if valid_name(bucket, key) {
        Ok(())
    } else {
        Err(ClientError::BadName(format!("{bucket}/{key}")))
    }
}

/// A call on the replicas of a bucket's index row.
#[derive(Clone, Copy)]
enum IndexCall<'a> {
    /// A change, made on every replica.
    Change(&'a IndexChange),
    /// A listing, from one replica.
    List(&'a ListQuery),
}

/// One record as a replica answered it.
struct Got {
    record: Bytes,
    stamp: u64,
    len: Option<u64>,
    tier: Option<String>,
}

/// An object's head as one replica read it ([`Client::read_head`]).
#[derive(Clone, Debug)]
pub struct HeadRead<T> {
    /// The head ([`Head`], or [`HeadInfo`] for a HEAD).
    pub head: T,
    /// The head record's stamp.
    pub stamp: u64,
    /// Where the replica read it (`ram`, `flash-cache`, `flash`, `disk`,
    /// ...), if it said.
    pub tier: Option<String>,
}

/// A body stored by [`Client::put_staged`] whose head record is not
/// written yet.
#[derive(Debug)]
pub struct Staged {
    bucket: String,
    key: String,
    h: u64,
    cookie: u32,
    body: StagedBody,
    first_tier: Option<String>,
}

/// The bytes of an inline record before the object's ([`inline_record`]:
/// kind, cookie).
const INLINE_LEAD: usize = 5;

#[derive(Debug)]
enum StagedBody {
    /// The head record of a body stored whole, without metadata
    /// ([`inline_record`]: kind, cookie, then the body, built in place as
    /// the body arrived).
    Small(Bytes),
    /// Data tracts written, the manifest to come.
    Striped {
        len: u64,
        tract_size: u64,
        tracts: u64,
        version: u64,
    },
}

impl Staged {
    /// The body's length in bytes.
    pub fn len(&self) -> u64 {
        match &self.body {
            StagedBody::Small(rec) => (rec.len() - INLINE_LEAD) as u64,
            StagedBody::Striped { len, .. } => *len,
        }
    }

    /// Whether the body is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The next piece of a body being cut into tracts, driving the tract
/// writes already started while it waits: a tract is written as soon as
/// it is cut, not when the next one fills or the body ends.
async fn next_chunk<S, E, F>(
    body: &mut std::pin::Pin<&mut S>,
    inflight: &mut futures_util::stream::FuturesOrdered<F>,
    first_tier: &mut Option<String>,
) -> Result<Option<Result<Bytes, E>>, ClientError>
where
    S: futures_util::Stream<Item = Result<Bytes, E>>,
    F: std::future::Future<Output = Result<Option<String>, ClientError>>,
{
    use futures_util::stream::StreamExt;
    loop {
        if inflight.is_empty() {
            return Ok(body.next().await);
        }
        // Both are cancel-safe: a tract write that finishes first is
        // taken, and the body is asked again.
        tokio::select! {
            biased;
            done = inflight.next() => {
                if let Some(t) = done {
                    let t = t?;
                    *first_tier = first_tier.take().or(t);
                }
            }
            chunk = body.next() => return Ok(chunk),
        }
    }
}

/// Runs futures with at most `n` at once, keeping their order.
async fn run_bounded<T, F>(work: impl Iterator<Item = F>, n: usize) -> Result<Vec<T>, ClientError>
where
    F: std::future::Future<Output = Result<T, ClientError>>,
{
    use futures_util::stream::{self, StreamExt};
    let results: Vec<Result<T, ClientError>> =
        stream::iter(work).buffered(n.max(1)).collect().await;
    results.into_iter().collect()
}
