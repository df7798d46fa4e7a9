//! The flash read cache (Flashcache): copies of disk-resident objects that
//! turn hot, kept in a segment store of their own on the flash devices
//! (`<flash>/_readcache/`), with membership and eviction decided by a
//! `strata-policy` policy (LRU with mid-point insertion at the 75th
//! percentile by default, Flashcache's setting) and the bytes written to
//! flash per second bounded by a token bucket to protect flash wear.
//!
//! Fills and evictions are written by a background thread in batches, so a
//! GET served from disk never waits for a flash write.

use crate::metrics::Metrics;
use crate::object::ObjectId;
use crate::ramcache::cache_key;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::Instant;
use strata_policy::{Evicted, Policy, PolicySpec, Unit};
use strata_store::{PutItem, Store, Tier};

enum Job {
    Fill {
        id: ObjectId,
        cookie: u32,
        needle: Vec<u8>,
    },
    Drop(ObjectId),
}

struct State {
    policy: Box<dyn Policy>,
    /// Policy key -> identity of the resident copy.
    resident: HashMap<u64, ObjectId>,
    evicted: Vec<Evicted>,
    /// Token bucket of flash bytes that may be written.
    tokens: f64,
    last_refill: Instant,
}

/// The flash read cache.
pub struct FlashCache {
    store: Arc<Store>,
    state: Mutex<State>,
    jobs: SyncSender<Job>,
    rate: f64,
    metrics: Arc<Metrics>,
}

/// How a flash read cache is set up (`--flash-cache`,
/// `--flash-cache-policy`, `--flash-cache-write-rate`).
#[derive(Clone, Debug)]
pub struct FlashCacheConfig {
    /// Bytes it may hold.
    pub bytes: u64,
    /// Its policy (strata-policy, the simulator's code).
    pub policy: PolicySpec,
    /// Bound on bytes it writes per second.
    pub write_bytes_per_s: u64,
}

impl FlashCache {
    /// Opens the read cache of every Strata server: an emptied store in
    /// `_readcache/` on each of the flash directories `flash`, segments of
    /// `segment_bytes`, needles up to `max_needle` bytes.
    pub fn open_on(
        flash: &[std::path::PathBuf],
        segment_bytes: u64,
        max_needle: u64,
        cfg: &FlashCacheConfig,
        metrics: Arc<Metrics>,
    ) -> Result<Arc<FlashCache>, String> {
        let dirs: Vec<std::path::PathBuf> = flash.iter().map(|d| d.join("_readcache")).collect();
        let Some(first) = dirs.first() else {
            return Err("a flash read cache needs a flash device (--flash DIR)".into());
        };
        for d in &dirs {
            // A read cache holds copies only: start empty.
            let _ = strata_fs::remove_dir_all(d);
        }
        let mut sc = strata_store::StoreConfig::new(first, strata_store::Tier::Flash);
        for d in &dirs[1..] {
            sc = sc.with_device(d, strata_store::Tier::Flash);
        }
        sc.create_dirs = true;
        sc.segment_size = segment_bytes;
        sc.max_object_size = max_needle;
        sc.compaction_garbage_ratio = 0.3;
        let store =
            Store::open(sc).map_err(|e| format!("cannot open the flash read cache: {e}"))?;
        Ok(FlashCache::new(
            store,
            &cfg.policy,
            cfg.bytes,
            cfg.write_bytes_per_s,
            metrics,
        ))
    }

    /// Opens (and empties: a read cache holds copies only) the cache store
    /// `store`, of `capacity` bytes under `spec`, writing at most
    /// `write_bytes_per_s` to flash.
    pub fn new(
        store: Store,
        spec: &PolicySpec,
        capacity: u64,
        write_bytes_per_s: u64,
        metrics: Arc<Metrics>,
    ) -> Arc<FlashCache> {
        let store = Arc::new(store);
        let (tx, rx) = sync_channel(4096);
        let fc = Arc::new(FlashCache {
            store: store.clone(),
            state: Mutex::new(State {
                policy: strata_policy::build(spec, capacity, Unit::Bytes),
                resident: HashMap::new(),
                evicted: Vec::new(),
                tokens: write_bytes_per_s as f64,
                last_refill: Instant::now(),
            }),
            jobs: tx,
            rate: write_bytes_per_s as f64,
            metrics: metrics.clone(),
        });
        std::thread::Builder::new()
            .name("flash-read-cache".into())
            .spawn(move || writer(store, rx, metrics))
            .ok();
        fc
    }

    /// A read of a disk-resident object: the cached needle data on a hit.
    /// Runs a device read; call off the async executor.
    pub fn get(&self, id: ObjectId) -> Option<(u32, Vec<u8>)> {
        let k = cache_key(id);
        let resident = {
            let mut s = self.state.lock();
            let r = s.resident.get(&k) == Some(&id);
            s.policy.lookup(k);
            r
        };
        if !resident {
            self.metrics.fcache_misses.fetch_add(1, Relaxed);
            return None;
        }
        match self.store.get_unchecked(id.key, id.alt) {
            Ok(Some(o)) => {
                self.metrics.fcache_hits.fetch_add(1, Relaxed);
                Some((o.cookie, o.data))
            }
            // Admitted but not written yet, or lost: a miss.
            _ => {
                self.metrics.fcache_misses.fetch_add(1, Relaxed);
                None
            }
        }
    }

    /// Offers an object just read from disk. The policy decides; the write
    /// is skipped when the flash write budget is spent.
    pub fn admit(&self, id: ObjectId, cookie: u32, needle: &[u8]) {
        let k = cache_key(id);
        let size = needle.len() as u64;
        let mut s = self.state.lock();
        let now = Instant::now();
        let dt = now.duration_since(s.last_refill).as_secs_f64();
        s.last_refill = now;
        s.tokens = (s.tokens + dt * self.rate).min(self.rate.max(size as f64));
        if s.tokens < size as f64 {
            self.metrics.fcache_throttled.fetch_add(1, Relaxed);
            return;
        }
        let mut ev = std::mem::take(&mut s.evicted);
        ev.clear();
        let admitted = s.policy.insert(k, size, &mut ev);
        s.policy.drain_evictions(&mut ev);
        for e in &ev {
            if e.key == k {
                continue;
            }
            if let Some(old) = s.resident.remove(&e.key) {
                self.metrics.fcache_evictions.fetch_add(1, Relaxed);
                let _ = self.jobs.try_send(Job::Drop(old));
            }
        }
        s.evicted = ev;
        if admitted {
            let job = Job::Fill {
                id,
                cookie,
                needle: needle.to_vec(),
            };
            match self.jobs.try_send(job) {
                Ok(()) => {
                    s.tokens -= size as f64;
                    s.resident.insert(k, id);
                    self.metrics.fcache_admits.fetch_add(1, Relaxed);
                }
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                    s.policy.remove(k);
                    self.metrics.fcache_throttled.fetch_add(1, Relaxed);
                }
            }
        }
        self.metrics.fcache_bytes.store(s.policy.used(), Relaxed);
    }

    /// Drops `id` (written again or deleted).
    pub fn invalidate(&self, id: ObjectId) {
        let k = cache_key(id);
        let mut s = self.state.lock();
        s.policy.remove(k);
        if s.resident.remove(&k).is_some() {
            // Blocking send: an invalidation must not be lost.
            drop(s);
            let _ = self.jobs.send(Job::Drop(id));
        }
    }
}

fn writer(store: Arc<Store>, rx: Receiver<Job>, metrics: Arc<Metrics>) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        while jobs.len() < 256 {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) => break,
            }
        }
        // Keep order: a fill followed by a drop of the same id must end dropped.
        let mut fills: Vec<(ObjectId, u32, Vec<u8>)> = Vec::new();
        for j in jobs {
            match j {
                Job::Fill { id, cookie, needle } => fills.push((id, cookie, needle)),
                Job::Drop(id) => {
                    flush(&store, &mut fills, &metrics);
                    let _ = store.delete(id.key, id.alt);
                }
            }
        }
        flush(&store, &mut fills, &metrics);
    }
}

fn flush(store: &Store, fills: &mut Vec<(ObjectId, u32, Vec<u8>)>, metrics: &Metrics) {
    if fills.is_empty() {
        return;
    }
    let items: Vec<PutItem<'_>> = fills
        .iter()
        .map(|(id, cookie, d)| PutItem {
            head: &[],
            key: id.key,
            alt_key: id.alt,
            cookie: *cookie,
            data: d,
        })
        .collect();
    if store.put_batch(Tier::Flash, &items).is_ok() {
        let bytes: u64 = fills.iter().map(|f| f.2.len() as u64).sum();
        metrics.fcache_bytes_written.fetch_add(bytes, Relaxed);
    }
    fills.clear();
}
