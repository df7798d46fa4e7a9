//! Scrubbing: a background, throttled pass over the rows this node leads
//! (it is the first live replica of the row). Each replica re-reads every
//! record of the row and checks its checksum while computing per-range
//! counts and checksums; ranges that differ are listed name by name, and
//! every replica that lacks the newest record of a name (highest stamp;
//! a tombstone counts as a record), or holds a corrupt or divergent copy,
//! gets it from a replica that has it. Tombstones that every replica holds
//! and that are older than the grace time are then dropped everywhere
//! (docs/recovery.md, "Scrubbing" and "Tombstones").

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
        // Counted into the totals as they happen: the repairs of a pass
        // that fails later (a peer timing out) are reported all the same.
        if let Err(e) = scrub_into(&node, &mut total).await {
            eprintln!("strata server: scrub pass failed: {e}");
        }
        if let Ok(mut g) = node.scrub_report.lock() {
            *g = Some(total.clone());
        }
    }
}

/// One pass over every row this node leads; returns what it found.
pub async fn scrub_once(node: &Arc<ClusterNode>) -> Result<ScrubReport, ClusterError> {
    let mut report = ScrubReport::default();
    scrub_into(node, &mut report).await?;
    Ok(report)
}

/// One pass, adding what it finds to `report` as it goes.
async fn scrub_into(node: &Arc<ClusterNode>, report: &mut ScrubReport) -> Result<(), ClusterError> {
    let Some(map) = node.map() else {
        return Ok(());
    };
    let Some((_, ids)) = node.disk_ids() else {
        return Ok(());
    };
    let version = map.table.version();
    let start = Instant::now();
    let mut bytes_read = 0u64;
    for row in 0..map.table.row_count() {
        let live = map.table.live_replicas(row);
        if live.first().is_none_or(|d| !ids.contains(d)) {
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
        // A replica that has installed a stripe of the row has dropped
        // the records it holds; one that has not yet (or not yet retired a
        // replaced one) still lists them. Copying between them would bring
        // records back next to their stripe copy: the row waits for the
        // next pass (installs take a tick).
        if digests.windows(2).any(|w| w[0].stripes != w[1].stripes) {
            continue;
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
            let tombstones = digests
                .iter()
                .any(|d| d.tombstones.get(range).is_some_and(|&t| t > 0));
            if same && !any_corrupt && !tombstones {
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
            let full = addrs.len() == map.table.replication();
            let fix = repair_range(node, version, row, &addrs, &lists, full).await?;
            report.missing += fix.missing;
            report.repaired += fix.repaired;
            report.deletes_propagated += fix.deletes_propagated;
            report.tombstones_purged += fix.tombstones_purged;
        }
        // Throttle: the digests re-read the row on every replica.
        let here = node
            .row_here(row)
            .and_then(|s| s.existing(row).ok().flatten());
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
    Ok(())
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

#[derive(Default)]
struct Fix {
    missing: u64,
    repaired: u64,
    deletes_propagated: u64,
    tombstones_purged: u64,
}

/// Gives every replica the newest record of every name of one range (the
/// highest stamp; among equal stamps the copy most replicas hold), then
/// drops the tombstones every replica holds past the grace time when the
/// row has all its replicas (`full`).
async fn repair_range(
    node: &Arc<ClusterNode>,
    version: u64,
    row: usize,
    addrs: &[String],
    lists: &[Vec<ListEntry>],
    full: bool,
) -> Result<Fix, ClusterError> {
    // name -> (hash -> (stamp, tombstone, replicas holding that copy))
    type Copies = HashMap<u64, (u64, bool, Vec<usize>)>;
    let mut seen: HashMap<(String, String), Copies> = HashMap::new();
    for (i, list) in lists.iter().enumerate() {
        for e in list {
            seen.entry((e.bucket.clone(), e.key.clone()))
                .or_default()
                .entry(e.hash)
                .or_insert((e.stamp, e.tombstone, Vec::new()))
                .2
                .push(i);
        }
    }
    let peer = |addr: &String| {
        let addr = addr.clone();
        move |reason| ClusterError::Peer { addr, reason }
    };
    let grace = node.opts.tombstone_grace.as_micros() as u64;
    let now = strata_client::protocol::now_stamp();
    let mut fix = Fix::default();
    for ((bucket, key), copies) in seen {
        let Some((_, &(stamp, tombstone, ref holders))) = copies
            .iter()
            .max_by_key(|(h, (s, _, v))| (*s, v.len(), **h))
        else {
            continue;
        };
        let path = object_path(row, &bucket, &key);
        // An erasure-coded stripe of the row holds this record or a newer
        // one: every replica reads it from there, none lacks it.
        let (k, alt, _) = crate::rows::identity(&bucket, &key);
        if holders.len() < addrs.len()
            && node
                .ec
                .lookup(row, k, alt)
                .is_some_and(|l| l.stamp >= stamp)
        {
            continue;
        }
        if holders.len() == addrs.len() {
            if tombstone && full && now.saturating_sub(stamp) >= grace {
                // Every replica has the delete: drop it everywhere.
                let mut all = true;
                for addr in addrs {
                    let r = node
                        .http
                        .send(
                            Method::DELETE,
                            &format!("http://{addr}{path}?purge={stamp}"),
                            Some(version),
                            Bytes::new(),
                            TIMEOUT,
                        )
                        .await
                        .map_err(peer(addr))?;
                    all &= r.status.is_success();
                }
                if all {
                    fix.tombstones_purged += 1;
                }
            }
            continue;
        }
        fix.missing += 1;
        let body = if tombstone {
            strata_client::protocol::tombstone_record()
        } else {
            let src = &addrs[holders[0]];
            let got = node
                .http
                .send(
                    Method::GET,
                    &format!("http://{src}{path}?raw=1"),
                    Some(version),
                    Bytes::new(),
                    TIMEOUT,
                )
                .await
                .map_err(peer(src))?;
            if !got.status.is_success() {
                continue;
            }
            got.body
        };
        for (i, addr) in addrs.iter().enumerate() {
            if holders.contains(&i) {
                continue;
            }
            let put = node
                .http
                .send_stamped(
                    Method::PUT,
                    &format!("http://{addr}{path}"),
                    Some(version),
                    Some(stamp),
                    body.clone(),
                    TIMEOUT,
                )
                .await
                .map_err(peer(addr))?;
            if put.status.is_success() {
                fix.repaired += 1;
                if tombstone {
                    fix.deletes_propagated += 1;
                }
            }
        }
    }
    Ok(fix)
}

/// Rewrites this node's copy of `bucket/key` in `row` from the peer
/// replica holding the newest record of it (its stamp kept), after a read
/// found the copy here unreadable. The write path replaces a damaged
/// record whatever its stamp and keeps a newer one; a cluster of one has
/// no peer, and the damage stays reported until the record is written
/// again.
pub(crate) async fn repair_record(node: Arc<ClusterNode>, row: usize, bucket: String, key: String) {
    let task = (row, bucket.clone(), key.clone());
    {
        let Ok(mut g) = node.repairing.lock() else {
            return;
        };
        if !g.insert(task.clone()) {
            return;
        }
    }
    let outcome = repair_from_peers(&node, row, &bucket, &key).await;
    if let Ok(mut g) = node.repairing.lock() {
        g.remove(&task);
    }
    match outcome {
        Ok(true) => {
            node.read_repairs
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            eprintln!("strata server: {bucket}/{key} (row {row}) was unreadable here; rewritten from a peer");
        }
        Ok(false) => {}
        Err(e) => eprintln!("strata server: {bucket}/{key} (row {row}) is unreadable here and was not repaired: {e}"),
    }
}

async fn repair_from_peers(
    node: &Arc<ClusterNode>,
    row: usize,
    bucket: &str,
    key: &str,
) -> Result<bool, ClusterError> {
    let Some(map) = node.map() else {
        return Ok(false);
    };
    let version = map.table.version();
    let path = object_path(row, bucket, key);
    let peers: Vec<String> = map
        .table
        .live_replicas(row)
        .iter()
        .filter_map(|d| map.addr_of_disk.get(d).cloned())
        .filter(|a| *a != node.addr)
        .collect();
    // The newest readable copy among the peers.
    let mut best: Option<(u64, Bytes)> = None;
    for addr in &peers {
        let Ok(got) = node
            .http
            .send(
                Method::GET,
                &format!("http://{addr}{path}?raw=1"),
                Some(version),
                Bytes::new(),
                TIMEOUT,
            )
            .await
        else {
            continue;
        };
        let Some(stamp) = got.stamp else { continue };
        if got.status.is_success() && best.as_ref().is_none_or(|(s, _)| stamp > *s) {
            best = Some((stamp, got.body));
        }
    }
    let Some((stamp, body)) = best else {
        return Ok(false);
    };
    let put = node
        .http
        .send_stamped(
            Method::PUT,
            &format!("http://{}{path}", node.addr),
            Some(version),
            Some(stamp),
            body,
            TIMEOUT,
        )
        .await
        .map_err(|reason| ClusterError::Peer {
            addr: node.addr.clone(),
            reason,
        })?;
    Ok(put.status.is_success())
}
