//! What a node knows of the stripes in RAM: the installed stripes' index by
//! row (the map a GET consults before its row store), the view of the code
//! and the recorded stripes last fetched from the metadata service, and the
//! counters `cluster status` and /metrics show.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Instant;

use serde::{Deserialize, Serialize};
use strata_meta::api::{EcConfig, StripeRecord};

use super::format::IndexEntry;

/// Where a record lives in a stripe (the RAM index's value).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Located {
    pub(crate) stripe: u64,
    pub(crate) stamp: u64,
    pub(crate) offset: u64,
    pub(crate) len: u32,
}

/// One row's stripe copies: identity (key, alternate key) → location.
pub(super) type RowIndex = HashMap<(u64, u32), Located>;

/// The code and the stripe records as last fetched.
#[derive(Default)]
pub(super) struct View {
    pub(super) ec: Option<EcConfig>,
    pub(super) stripes: HashMap<u64, StripeRecord>,
    /// Every id below it was allocated (0: unknown).
    pub(super) next_stripe: u64,
    /// Fetched from the metadata service (false: the empty start value).
    pub(super) fetched: bool,
}

/// Progress counters of the task (`GET /cluster/v1/ec/status`).
#[derive(Default, Serialize, Deserialize, Clone, Debug)]
pub struct EcStats {
    /// Segments this node encoded into stripes.
    pub segments_encoded: u64,
    /// Bytes of those segments.
    pub bytes_encoded: u64,
    /// Stripe indexes installed on this node's replicas.
    pub stripes_installed: u64,
    /// Replica records dropped because a stripe holds them.
    pub records_dropped: u64,
    /// GETs served from a healthy data shard.
    pub reads_healthy: u64,
    /// GETs decoded from K other shards.
    pub reads_degraded: u64,
    /// Shards rebuilt here (lost disks, failed scrubs).
    pub shards_rebuilt: u64,
    /// Bytes of those shards.
    pub bytes_rebuilt: u64,
    /// Shards found damaged by the scrub.
    pub shards_corrupt: u64,
    /// Steps that failed (retried on a later tick).
    pub errors: u64,
    /// Stripes this node compacted (live records re-encoded, or a stripe
    /// with none left forgotten).
    #[serde(default)]
    pub stripes_compacted: u64,
    /// Encoded bytes those compactions gave back (old stripes' segment
    /// bytes less the new ones').
    #[serde(default)]
    pub bytes_reclaimed: u64,
    /// Stripe indexes this node's replicas let go of (replaced or
    /// forgotten stripes).
    #[serde(default)]
    pub stripes_retired: u64,
    /// Stripe directories no record names, deleted after the grace time.
    #[serde(default)]
    pub dirs_swept: u64,
    /// GETs whose only copy here was a stripe's while this node's copy of
    /// the row was still being made (recovery, add-node): not served, as
    /// the row's newer record may not have arrived yet; the reader asks
    /// another replica.
    #[serde(default)]
    pub reads_withheld: u64,
    /// Active segments of rows this node leads that it sealed because no
    /// write had reached them for their warm age (so a row that stopped
    /// growing is encoded whole).
    #[serde(default)]
    pub segments_sealed_idle: u64,
}

/// The node's erasure-coding state.
#[derive(Default)]
pub(crate) struct EcNode {
    pub(super) view: RwLock<Arc<View>>,
    /// Per row: identity → where its record lies in a stripe.
    pub(super) index: RwLock<HashMap<usize, RowIndex>>,
    /// Installed stripes: id → row.
    pub(super) installed: Mutex<HashMap<u64, usize>>,
    /// Segments this node encoded and recorded (row, part, segment).
    pub(super) encoded: Mutex<HashSet<(usize, String, u64)>>,
    pub(super) loaded: AtomicBool,
    pub(super) segments_encoded: AtomicU64,
    pub(super) bytes_encoded: AtomicU64,
    pub(super) stripes_installed: AtomicU64,
    pub(super) records_dropped: AtomicU64,
    pub(super) reads_healthy: AtomicU64,
    pub(super) reads_degraded: AtomicU64,
    pub(super) shards_rebuilt: AtomicU64,
    pub(super) bytes_rebuilt: AtomicU64,
    pub(super) shards_corrupt: AtomicU64,
    pub(super) errors: AtomicU64,
    pub(super) stripes_compacted: AtomicU64,
    pub(super) bytes_reclaimed: AtomicU64,
    pub(super) stripes_retired: AtomicU64,
    pub(super) dirs_swept: AtomicU64,
    pub(crate) reads_withheld: AtomicU64,
    pub(super) segments_sealed_idle: AtomicU64,
    /// Unrecorded stripe directories: when this node first saw each.
    pub(super) unrecorded: Mutex<HashMap<PathBuf, Instant>>,
    pub(super) last_compact: Mutex<Option<Instant>>,
    /// Installed stripes whose record the metadata service no longer holds
    /// (replaced by a compaction), kept until this node retires them.
    pub(super) gone: Mutex<HashMap<u64, StripeRecord>>,
    pub(super) last_sweep: Mutex<Option<Instant>>,
    pub(crate) stored_bytes: AtomicU64,
    pub(crate) logical_bytes: AtomicU64,
    pub(super) last_scrub: Mutex<Option<Instant>>,
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl EcNode {
    pub(super) fn view(&self) -> Arc<View> {
        match self.view.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Where the stripe copy of a record of `row` lies, if a stripe holds one.
    pub(crate) fn lookup(&self, row: usize, key: u64, alt: u32) -> Option<Located> {
        let g = match self.index.read() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        g.get(&row)?.get(&(key, alt)).copied()
    }

    pub(super) fn insert(&self, row: usize, stripe: u64, entries: &[IndexEntry]) {
        let mut g = match self.index.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let m = g.entry(row).or_default();
        for e in entries {
            let l = Located {
                stripe,
                stamp: e.stamp,
                offset: e.offset,
                len: e.len,
            };
            // The newest record wins; among copies of one record (a
            // compaction re-encoded it) the later stripe.
            match m.get(&(e.key, e.alt)) {
                Some(old) if (old.stamp, old.stripe) >= (e.stamp, stripe) => {}
                _ => {
                    m.insert((e.key, e.alt), l);
                }
            }
        }
    }

    /// Replaces the RAM map of `row` with the one built from `stripes`
    /// (the indexes still installed, after some were retired).
    pub(super) fn reload_row(&self, row: usize, stripes: &[(u64, Vec<IndexEntry>)]) {
        let mut fresh = RowIndex::new();
        for (stripe, entries) in stripes {
            for e in entries {
                let l = Located {
                    stripe: *stripe,
                    stamp: e.stamp,
                    offset: e.offset,
                    len: e.len,
                };
                match fresh.get(&(e.key, e.alt)) {
                    Some(old) if (old.stamp, old.stripe) >= (e.stamp, *stripe) => {}
                    _ => {
                        fresh.insert((e.key, e.alt), l);
                    }
                }
            }
        }
        let mut g = match self.index.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if fresh.is_empty() {
            g.remove(&row);
        } else {
            g.insert(row, fresh);
        }
    }

    /// Whether the tombstone of stamp `stamp` of an identity of `row` may
    /// be dropped here: no stripe this node knows of holds an older record
    /// of it (the tombstone is what hides that copy; it goes once stripe
    /// compaction drops the copy), and every recorded stripe of the row is
    /// installed here (one not yet installed may hold such a copy).
    pub(crate) fn may_purge(&self, row: usize, key: u64, alt: u32, stamp: u64) -> bool {
        let view = self.view();
        if !self.loaded.load(Ordering::Acquire) || !view.fetched {
            return false;
        }
        if self.lookup(row, key, alt).is_some_and(|l| l.stamp < stamp) {
            return false;
        }
        let inst = lock(&self.installed);
        !view
            .stripes
            .values()
            .any(|s| s.row == row && !inst.contains_key(&s.id))
    }

    /// The installed stripes of `row` here (the replica scrub compares
    /// them between replicas before it copies records).
    pub(crate) fn installed_of(&self, row: usize) -> Vec<u64> {
        let mut v: Vec<u64> = lock(&self.installed)
            .iter()
            .filter(|(_, r)| **r == row)
            .map(|(id, _)| *id)
            .collect();
        v.sort_unstable();
        v
    }

    /// The task's counters.
    pub(crate) fn stats(&self) -> EcStats {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        EcStats {
            segments_encoded: r(&self.segments_encoded),
            bytes_encoded: r(&self.bytes_encoded),
            stripes_installed: r(&self.stripes_installed),
            records_dropped: r(&self.records_dropped),
            reads_healthy: r(&self.reads_healthy),
            reads_degraded: r(&self.reads_degraded),
            shards_rebuilt: r(&self.shards_rebuilt),
            bytes_rebuilt: r(&self.bytes_rebuilt),
            shards_corrupt: r(&self.shards_corrupt),
            errors: r(&self.errors),
            stripes_compacted: r(&self.stripes_compacted),
            bytes_reclaimed: r(&self.bytes_reclaimed),
            stripes_retired: r(&self.stripes_retired),
            dirs_swept: r(&self.dirs_swept),
            reads_withheld: r(&self.reads_withheld),
            segments_sealed_idle: r(&self.segments_sealed_idle),
        }
    }
}
