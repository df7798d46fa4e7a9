//! Encoding: a sealed segment older than its warm age, of a row this node
//! leads, cut into K data shards and M parity shards sent to the K+M disks of
//! an erasure-coded row (each fsynced there), then the stripe recorded with
//! the metadata service; idle active segments are sealed first so a row that
//! stopped growing is encoded whole.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use strata_ec::{Code, ShardHeader};
use strata_meta::api::StripeAllocation;
use strata_meta::api::{EcConfig, StripeRecord};
use strata_placement::{DiskId, PlacementTable};

use super::files::{leads, my_disks, send_file, TIMEOUT};
use super::format::{encode_index, shard_name, IndexEntry};
use super::state::{lock, View};
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// The warm age of workload `part` under the tier plan in force (None:
/// the plan turns erasure coding off for it).
pub(super) fn warm_age(node: &ClusterNode, ec: &EcConfig, part: &str) -> Option<Duration> {
    match node.ec_after_of(part) {
        Some(Some(secs)) => Some(Duration::from_secs_f64(secs)),
        Some(None) => None,
        None => Some(Duration::from_millis(ec.after_ms)),
    }
}

/// Whether an active segment whose file was last written at `modified`
/// (None: unknown) has been idle for `age` at `now`.
pub(super) fn idle_for(
    modified: Option<std::time::SystemTime>,
    now: std::time::SystemTime,
    age: Duration,
) -> bool {
    modified.is_some_and(|m| now.duration_since(m).is_ok_and(|idle| idle >= age))
}

/// Seals the active segment of every part of the rows this node leads that
/// holds needles and has not been written to for the part's warm age (the
/// segment file's modification time: every append and every in-place
/// delete flag moves it, and it survives a restart). The store's own seal
/// (the one the tier mover and compaction use): the file stays as it is, a
/// new active segment takes the next writes. Without it a row that stopped
/// growing kept its last segment replicated three times for ever.
pub(super) fn seal_idle(
    node: &ClusterNode,
    ec: EcConfig,
    table: &PlacementTable,
    mine: &[DiskId],
) -> Result<(), String> {
    let now = std::time::SystemTime::now();
    for rows in node.stores.iter().flatten() {
        for row in rows.rows_on_disk() {
            if row >= table.row_count() || !leads(table, mine, row) {
                continue;
            }
            let Ok(Some(store)) = rows.existing(row) else {
                continue;
            };
            for (name, part) in store.parts() {
                let Some(age) = warm_age(node, &ec, &name) else {
                    continue;
                };
                for seg in part.segments() {
                    if !seg.active || seg.needles == 0 {
                        continue;
                    }
                    let modified = std::fs::metadata(&seg.path).and_then(|m| m.modified()).ok();
                    if !idle_for(modified, now, age) {
                        continue;
                    }
                    part.seal_active(seg.device).map_err(|e| {
                        format!(
                            "row {row} part {name}: sealing idle segment {}: {e}",
                            seg.id
                        )
                    })?;
                    node.ec.segments_sealed_idle.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    }
    Ok(())
}

/// Encodes one sealed segment older than its warm age of a row this node
/// leads, if there is one.
pub(super) async fn encode_one(
    node: &Node,
    ec: EcConfig,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    let mine = my_disks(node);
    let now_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let me = node.ids().map(|(n, _)| n);
    let recorded: HashSet<(usize, String, u64)> = view
        .stripes
        .values()
        .filter(|s| Some(s.source_node) == me)
        .map(|s| (s.row, s.part.clone(), s.segment))
        .collect();
    // Active segments idle for their warm age are sealed first, so that
    // the pass below finds them.
    let (n, m2) = (node.clone(), mine.clone());
    let t2 = table.clone();
    tokio::task::spawn_blocking(move || seal_idle(&n, ec, &t2, &m2))
        .await
        .map_err(|e| e.to_string())??;
    let mut pick = None;
    'outer: for rows in node.stores.iter().flatten() {
        for row in rows.rows_on_disk() {
            if row >= table.row_count() || !leads(table, &mine, row) {
                continue;
            }
            let Ok(Some(store)) = rows.existing(row) else {
                continue;
            };
            for (name, part) in store.parts() {
                let Some(age) = warm_age(node, &ec, &name) else {
                    continue;
                };
                for seg in part.segments() {
                    let key = (row, name.clone(), seg.id);
                    if seg.active
                        || seg.needles == 0
                        || now_ns.saturating_sub(seg.created_unix_ns) < age.as_nanos() as u64
                        || recorded.contains(&key)
                        || lock(&node.ec.encoded).contains(&key)
                    {
                        continue;
                    }
                    pick = Some((store.clone(), name.clone(), part.clone(), seg));
                    break 'outer;
                }
            }
        }
    }
    let Some((store, name, part, seg)) = pick else {
        return Ok(());
    };
    let row = store.row();
    let key = (row, name.clone(), seg.id);
    // The live records of the segment, with their stamps.
    let p2 = part.clone();
    let segment = seg.id;
    let entries = tokio::task::spawn_blocking(move || -> Result<Vec<IndexEntry>, String> {
        let mut out = Vec::new();
        for item in p2.needles(segment).map_err(|e| e.to_string())? {
            let Ok(n) = item else { continue };
            if !p2
                .is_live(segment, n.offset, n.key, n.alt_key)
                .unwrap_or(false)
            {
                continue;
            }
            let Some(d) = strata_proto::row::decode(&n.data) else {
                continue;
            };
            // A tombstone is not indexed: it stays in the replicas' row
            // stores, where it hides the stripes' older records of its
            // name and where the replica scrub purges it once no stripe
            // holds one (its bytes in the stripe are dead weight).
            if strata_proto::is_tombstone(d.record) {
                continue;
            }
            out.push(IndexEntry {
                key: n.key,
                alt: n.alt_key,
                len: n.data.len() as u32,
                stamp: d.stamp,
                offset: n.offset,
            });
        }
        Ok(out)
    })
    .await
    .map_err(|e| e.to_string())??;
    if entries.is_empty() {
        // Nothing live: compaction's job, not the encoder's.
        lock(&node.ec.encoded).insert(key);
        return Ok(());
    }
    let staging = store
        .path()
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ec").join("staging"))
        .ok_or("row directory has no parent")?;
    let data_len = store_stripe(
        node,
        addrs,
        Source {
            row,
            part: name,
            segment: seg.id,
            file: seg.path.clone(),
            replaces: Vec::new(),
        },
        &staging,
        &entries,
    )
    .await?;
    lock(&node.ec.encoded).insert(key);
    node.ec.segments_encoded.fetch_add(1, Ordering::Relaxed);
    node.ec.bytes_encoded.fetch_add(data_len, Ordering::Relaxed);
    Ok(())
}

/// What a new stripe encodes.
pub(super) struct Source {
    pub(super) row: usize,
    /// The workload part of the records.
    pub(super) part: String,
    /// The row segment first encoded (kept through compactions).
    pub(super) segment: u64,
    /// The file to encode: a sealed segment, or a compaction's file of
    /// live needles.
    pub(super) file: PathBuf,
    /// Stripes of the row it re-encodes the live records of.
    pub(super) replaces: Vec<u64>,
}

/// Allocates a stripe, encodes `src.file` into its K+M shards under
/// `staging/ID/`, sends every shard and the index to its disk (each made
/// durable there) and records the stripe; returns the encoded bytes. A
/// stripe that could not be recorded within half the sweep's grace is
/// given up (its files are swept), so a sweep never deletes the files of
/// a stripe being recorded.
pub(super) async fn store_stripe(
    node: &Node,
    addrs: &HashMap<DiskId, String>,
    src: Source,
    staging: &Path,
    entries: &[IndexEntry],
) -> Result<u64, String> {
    let started = Instant::now();
    let url = format!("http://{}/v1/ec/allocate", node.opts.meta);
    let alloc: StripeAllocation = node
        .http
        .post_json(&url, &serde_json::json!({}), TIMEOUT)
        .await?;
    let code = Code::new(alloc.k, alloc.m).map_err(|e| e.to_string())?;
    let staging = staging.join(format!("{:016x}", alloc.id));
    let file = src.file.clone();
    let st = staging.clone();
    let width = alloc.k + alloc.m;
    let header = tokio::task::spawn_blocking(move || -> Result<ShardHeader, String> {
        strata_fs::create_dir_all(&st).map_err(|e| e.to_string())?;
        let paths: Vec<PathBuf> = (0..width).map(|i| st.join(shard_name(i))).collect();
        let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
        // Not fsynced here: the shards are sent to their disks and made
        // durable there; a crash leaves a staging directory, deleted at
        // start.
        strata_ec::encode_file_staged(&file, &refs, code, alloc.id).map_err(|e| e.to_string())
    })
    .await
    .map_err(|e| e.to_string())?;
    let header = match header {
        Ok(h) => h,
        Err(e) => {
            let _ = strata_fs::remove_dir_all(&staging);
            // Compacted or moved meanwhile: listed again next tick.
            return Err(format!(
                "encoding {} (row {}): {e}",
                src.file.display(),
                src.row
            ));
        }
    };
    let index = Bytes::from(encode_index(alloc.id, src.row, entries));
    // Every shard and the index to their disks, each made durable there.
    let sent = async {
        for (i, &disk) in alloc.disks.iter().enumerate() {
            let path = staging.join(shard_name(i));
            let bytes = tokio::fs::read(&path)
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?;
            send_file(
                node,
                addrs,
                disk,
                alloc.id,
                &shard_name(i),
                Bytes::from(bytes),
            )
            .await?;
            send_file(node, addrs, disk, alloc.id, "index", index.clone()).await?;
        }
        Ok::<(), String>(())
    }
    .await;
    let _ = strata_fs::remove_dir_all(&staging);
    sent?;
    if started.elapsed() > node.opts.ec_sweep_grace / 2 {
        return Err(format!(
            "stripe {:016x} took {:.1} s to store, more than half the sweep's grace: \
             not recorded (its files will be swept)",
            alloc.id,
            started.elapsed().as_secs_f64()
        ));
    }
    let me = node.ids().map(|(n, _)| n).ok_or("not registered")?;
    let rec = StripeRecord {
        id: alloc.id,
        row: src.row,
        source_node: me,
        segment: src.segment,
        part: src.part,
        k: alloc.k,
        m: alloc.m,
        disks: alloc.disks.clone(),
        data_len: header.data_len,
        shard_len: header.shard_len,
        records: entries.len() as u64,
        record_bytes: entries
            .iter()
            .map(|e| strata_store::format::needle::needle_len(e.len))
            .sum(),
        created_ms: 0,
        replaces: src.replaces,
    };
    let url = format!("http://{}/v1/ec/stripes", node.opts.meta);
    node.http
        .post_json::<_, serde_json::Value>(&url, &rec, TIMEOUT)
        .await?;
    Ok(header.data_len)
}

// ------------------------------------------------------ stripe compaction

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_segment_is_idle_once_unwritten_for_its_warm_age() {
        let t0 = std::time::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let age = Duration::from_secs(60);
        assert!(!idle_for(Some(t0), t0 + Duration::from_secs(59), age));
        assert!(idle_for(Some(t0), t0 + age, age));
        assert!(idle_for(Some(t0), t0 + Duration::from_secs(3600), age));
        // Written "after" now (a clock stepped back): not idle.
        assert!(!idle_for(Some(t0 + age), t0, age));
        // No modification time: never sealed on a guess.
        assert!(!idle_for(None, t0 + age, age));
    }
}
