//! The stripe store's upkeep: a scrub of this node's shard files (checksums;
//! a damaged shard is rebuilt) and the bytes the stripes here hold and lead,
//! for `cluster status`.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_ec::HEADER_LEN;
use strata_placement::{DiskId, PlacementTable};

use super::files::{leads, my_disks, stripe_dir};
use super::format::shard_name;
use super::rebuild::rebuild_shard;
use super::state::{lock, View};
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// How often the shard scrub runs.
pub(super) const SCRUB_EVERY: Duration = Duration::from_secs(30);

/// Checks every shard file on this node's disks (header and payload
/// checksums); a damaged or missing one is rebuilt in place from the
/// others.
pub(super) async fn scrub(
    node: &Node,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) {
    {
        let mut last = lock(&node.ec.last_scrub);
        if last.is_some_and(|t| t.elapsed() < SCRUB_EVERY) {
            return;
        }
        *last = Some(Instant::now());
    }
    let mine = my_disks(node);
    let mut checks = Vec::new();
    for s in view.stripes.values() {
        for (i, &d) in s.disks.iter().enumerate() {
            if mine.contains(&d) {
                if let Some(dir) = stripe_dir(node, d, s.id) {
                    checks.push((s.clone(), i, d, dir.join(shard_name(i))));
                }
            }
        }
    }
    for (s, i, d, path) in checks {
        let p = path.clone();
        let ok = tokio::task::spawn_blocking(move || check_shard(&p))
            .await
            .unwrap_or(false);
        if ok {
            continue;
        }
        node.ec.shards_corrupt.fetch_add(1, Ordering::Relaxed);
        eprintln!(
            "strata server: scrub: shard {i} of stripe {:016x} ({}) is damaged or missing; rebuilding it",
            s.id,
            path.display()
        );
        match rebuild_shard(node, &s, i, d, table, addrs).await {
            Ok(b) => {
                node.ec.shards_rebuilt.fetch_add(1, Ordering::Relaxed);
                node.ec.bytes_rebuilt.fetch_add(b, Ordering::Relaxed);
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("strata server: scrub: rebuilding: {e}");
            }
        }
    }
}

/// Whether a shard file's header and payload checksums hold.
pub(super) fn check_shard(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    let Ok(h) = strata_ec::parse_header(&b, &path.display().to_string()) else {
        return false;
    };
    b.len() as u64 == HEADER_LEN as u64 + h.shard_len
        && crc32c::crc32c(&b[HEADER_LEN..]) == h.payload_crc
}

/// Bytes stored on this node (every segment and shard file) and the
/// logical bytes of the rows it leads.
pub(super) fn count_bytes(node: &ClusterNode, view: &View) {
    let mut stored = 0;
    for rows in node.stores.iter().flatten() {
        if let Some(d) = rows.dir().parent() {
            stored += tree_bytes(&d.join("ec"));
        }
        stored += tree_bytes(rows.dir());
    }
    for f in node.opts.flash_tier() {
        stored += tree_bytes(&f.join("rows"));
    }
    let mut logical = 0u64;
    let mine = my_disks(node);
    if let Some(map) = node.map() {
        for rows in node.stores.iter().flatten() {
            for row in rows.rows_on_disk() {
                if row >= map.table.row_count() || !leads(&map.table, &mine, row) {
                    continue;
                }
                if let Ok(Some(store)) = rows.existing(row) {
                    for (_, part) in store.parts() {
                        for seg in part.segments() {
                            let body = seg.size.saturating_sub(64) as f64;
                            logical += (body * (1.0 - seg.garbage_ratio)) as u64;
                        }
                    }
                }
                logical += view
                    .stripes
                    .values()
                    .filter(|s| s.row == row)
                    .map(|s| s.record_bytes)
                    .sum::<u64>();
            }
        }
    }
    node.ec.stored_bytes.store(stored, Ordering::Relaxed);
    node.ec.logical_bytes.store(logical, Ordering::Relaxed);
}

/// Bytes of the segment (`.seg`) and shard files under `dir`.
pub(super) fn tree_bytes(dir: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    rd.filter_map(Result::ok)
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => tree_bytes(&e.path()),
            Ok(_) => {
                let name = e.file_name();
                let name = name.to_string_lossy();
                if name.ends_with(".seg") || name.starts_with("shard-") && !name.ends_with(".part")
                {
                    e.metadata().map_or(0, |m| m.len())
                } else {
                    0
                }
            }
            Err(_) => 0,
        })
        .sum()
}
