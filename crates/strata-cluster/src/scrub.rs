//! Scrubbing: a background, throttled pass over the rows this node leads
//! (it is the first live replica of the row). Each replica re-reads every
//! record of the row and checks its checksum while computing per-range
//! counts and checksums; ranges that differ are listed name by name, and
//! every replica that lacks a record, or holds a corrupt or divergent copy,
//! gets the majority copy (docs/recovery.md, "Scrubbing").

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hyper::Method;
use strata_client::protocol::{object_path, ListEntry, RowDigest, DIGEST_RANGES};
use strata_meta::api::ScrubReport;

use crate::node::ClusterNode;
use crate::ClusterError;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs a pass every `every`; reports totals since the node started (so a
/// repair is never hidden by a later clean pass).
pub(crate) async fn run(node: Arc<ClusterNode>, every: Duration) {
    let mut total = ScrubReport::default();
    loop {
        tokio::time::sleep(every).await;
        match scrub_once(&node).await {
            Ok(r) => {
                total.rows_checked += r.rows_checked;
                total.objects_checked += r.objects_checked;
                total.corrupt += r.corrupt;
                total.missing += r.missing;
                total.repaired += r.repaired;
                total.finished_ms = r.finished_ms;
                if let Ok(mut g) = node.scrub_report.lock() {
                    *g = Some(total.clone());
                }
            }
            Err(e) => eprintln!("strata server: scrub pass failed: {e}"),
        }
    }
}

/// One pass over every row this node leads; returns what it found.
pub async fn scrub_once(node: &Arc<ClusterNode>) -> Result<ScrubReport, ClusterError> {
    let mut report = ScrubReport::default();
    let Some(map) = node.map() else {
        return Ok(report);
    };
    let Some((_, me)) = node.ids() else {
        return Ok(report);
    };
    let version = map.table.version();
    let start = Instant::now();
    let mut bytes_read = 0u64;
    for row in 0..map.table.row_count() {
        let live = map.table.live_replicas(row);
        if live.first() != Some(&me) {
            continue;
        }
        let addrs: Vec<String> = live
            .iter()
            .filter_map(|d| map.addr_of_disk.get(d).cloned())
            .collect();
        // Digests of every replica (each re-reads and verifies its copy).
        let mut digests: Vec<RowDigest> = Vec::new();
        for addr in &addrs {
            let url = format!("http://{addr}/cluster/v1/rows/{row}/digest");
            let d: RowDigest =
                node.http
                    .get_json(&url, TIMEOUT)
                    .await
                    .map_err(|reason| ClusterError::Peer {
                        addr: addr.clone(),
                        reason,
                    })?;
            digests.push(d);
        }
        report.rows_checked += 1;
        report.corrupt += digests.iter().map(|d| d.corrupt).sum::<u64>();
        if let Some(d) = digests.first() {
            report.objects_checked += d.counts.iter().sum::<u64>();
        }
        for range in 0..DIGEST_RANGES {
            let same = digests.windows(2).all(|w| {
                w[0].counts.get(range) == w[1].counts.get(range)
                    && w[0].sums.get(range) == w[1].sums.get(range)
            });
            let any_corrupt = digests.iter().any(|d| d.corrupt > 0);
            if same && !any_corrupt {
                continue;
            }
            let mut lists: Vec<Vec<ListEntry>> = Vec::new();
            for addr in &addrs {
                let url = format!("http://{addr}/cluster/v1/rows/{row}/list?range={range}");
                lists.push(node.http.get_json(&url, TIMEOUT).await.map_err(|reason| {
                    ClusterError::Peer {
                        addr: addr.clone(),
                        reason,
                    }
                })?);
            }
            let (missing, repaired) = repair_range(node, version, row, &addrs, &lists).await?;
            report.missing += missing;
            report.repaired += repaired;
        }
        // Throttle: the digests re-read the row on every replica.
        let here = node.rows.existing(row).ok().flatten();
        if let Some(s) = here {
            bytes_read += dir_size(s.path());
        }
        let due = Duration::from_secs_f64(
            bytes_read as f64 / node.opts.scrub_bytes_per_sec.max(1) as f64,
        );
        if due > start.elapsed() {
            tokio::time::sleep(due - start.elapsed()).await;
        }
    }
    report.finished_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    Ok(report)
}

fn dir_size(p: &std::path::Path) -> u64 {
    std::fs::read_dir(p)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Gives every replica the majority copy of every record of one range;
/// returns (records some replica lacked or held wrong, copies written).
async fn repair_range(
    node: &Arc<ClusterNode>,
    version: u64,
    row: usize,
    addrs: &[String],
    lists: &[Vec<ListEntry>],
) -> Result<(u64, u64), ClusterError> {
    // name -> (hash -> replicas holding that hash)
    let mut seen: HashMap<(String, String), HashMap<u64, Vec<usize>>> = HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        for e in list {
            seen.entry((e.bucket.clone(), e.key.clone()))
                .or_default()
                .entry(e.hash)
                .or_default()
                .push(i);
        }
    }
    let mut missing = 0;
    let mut repaired = 0;
    for ((bucket, key), by_hash) in seen {
        let Some((_, holders)) = by_hash.iter().max_by_key(|(_, v)| v.len()) else {
            continue;
        };
        if holders.len() == addrs.len() {
            continue;
        }
        missing += 1;
        let path = object_path(row, &bucket, &key);
        let src = &addrs[holders[0]];
        let got = node
            .http
            .send(
                Method::GET,
                &format!("http://{src}{path}"),
                Some(version),
                Bytes::new(),
                TIMEOUT,
            )
            .await
            .map_err(|reason| ClusterError::Peer {
                addr: src.clone(),
                reason,
            })?;
        if !got.status.is_success() {
            continue;
        }
        for (i, addr) in addrs.iter().enumerate() {
            if holders.contains(&i) {
                continue;
            }
            let put = node
                .http
                .send(
                    Method::PUT,
                    &format!("http://{addr}{path}"),
                    Some(version),
                    got.body.clone(),
                    TIMEOUT,
                )
                .await
                .map_err(|reason| ClusterError::Peer {
                    addr: addr.clone(),
                    reason,
                })?;
            if put.status.is_success() {
                repaired += 1;
            }
        }
    }
    Ok((missing, repaired))
}
