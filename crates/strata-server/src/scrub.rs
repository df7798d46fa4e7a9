//! Scrubbing: a background, throttled pass over the rows this node leads
//! (it is the first live replica of the row). Each replica re-reads every
//! record of the row and checks its checksum while computing per-range
//! counts and checksums; ranges that differ are listed name by name, and
//! every replica that lacks the newest record of a name (highest stamp;
//! a tombstone counts as a record), or holds a corrupt or divergent copy,
//! gets it from a replica that has it. Tombstones that every replica holds
//! and that are older than the grace time are then dropped everywhere
//! (docs/recovery.md, "Scrubbing" and "Tombstones"). Data tracts of
//! striped objects that no manifest refers to any more are deleted once
//! older than the orphan grace time ([`reclaim_orphans`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hyper::Method;
use strata_meta::api::{ScrubReport, SCRUB_NAMES_KEPT};
use strata_proto::{object_path, ListEntry, RowDigest, DIGEST_RANGES};

use crate::node::ClusterNode;
use crate::rows::RowStore;
use crate::ClusterError;

const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs a pass every `every`; reports totals since the node started (so a
/// repair is never hidden by a later clean pass).
pub(crate) async fn run(node: Arc<ClusterNode>, every: Duration, mut ctx: crate::workers::Ctx) {
    let mut total = ScrubReport::default();
    while ctx.sleep(every).await {
        // Counted into the totals as they happen: the repairs of a pass
        // that fails later (a peer timing out) are reported all the same.
        if let Err(e) = scrub_into(&node, &mut total).await {
            eprintln!("strata server: scrub pass failed: {e}");
            ctx.failed(e);
        }
        if let Ok(mut g) = node.scrub_report.lock() {
            *g = Some(total.clone());
        }
    }
}

/// Brings this node's copies of rows that may lack records they
/// acknowledged (damage found when they opened: [`RowStore::catching_up`])
/// up to date from the other replicas, trying every second until each has;
/// their reads answer 503 meanwhile. The scrub would repair them too, but
/// only on its next pass and led by each row's first replica; a copy that
/// must catch up does it itself, at once (docs/reliability.md, finding 25).
pub(crate) async fn catch_up(node: Arc<ClusterNode>, mut ctx: crate::workers::Ctx) {
    let mut attempts: HashMap<usize, u64> = HashMap::new();
    while ctx.sleep(Duration::from_secs(1)).await {
        let stores: Vec<Arc<RowStore>> = node
            .stores
            .iter()
            .flatten()
            .flat_map(|s| s.catching_up())
            .collect();
        for store in stores {
            let row = store.row();
            let n = attempts.entry(row).or_default();
            *n += 1;
            match catch_up_row(&node, &store).await {
                Ok(Some(fix)) => {
                    attempts.remove(&row);
                    eprintln!(
                        "strata server: row {row}: caught up from the other replicas \
                         ({} record(s) and {} delete(s) copied here or to them); its reads are \
                         served here again",
                        fix.objects_repaired, fix.deletes_propagated
                    );
                }
                Ok(None) => {}
                // Said once, then every minute: a peer may be away a while.
                Err(e) if *n == 1 || (*n).is_multiple_of(60) => {
                    eprintln!("strata server: row {row}: catching up from the other replicas: {e} (trying again)");
                }
                Err(_) => {}
            }
        }
    }
}

/// One attempt at catching `store`'s row up: what was repaired, or None
/// when it must wait (no other replica live, no table yet, the replicas'
/// stripes in flux).
async fn catch_up_row(
    node: &Arc<ClusterNode>,
    store: &Arc<RowStore>,
) -> Result<Option<ScrubReport>, ClusterError> {
    let row = store.row();
    let (Some(map), Some((_, mine))) = (node.map(), node.disk_ids()) else {
        return Ok(None);
    };
    if map.table.replication() == 1 {
        // No replica to catch up from, ever: what it holds is all there is.
        store.caught_up()?;
        eprintln!("strata server: row {row}: no other replica to catch up from (replication 1): serving what this copy holds");
        return Ok(Some(ScrubReport::default()));
    }
    let live = map.table.live_replicas(row);
    if !live.iter().any(|d| mine.contains(d)) || !node.other_replica_live(row) {
        // Not a replica here under this table, or no other one is live
        // (its reads are served meanwhile: there is nothing better).
        return Ok(None);
    }
    let addrs: Vec<String> = live
        .iter()
        .filter_map(|d| map.addr_of_disk.get(d).cloned())
        .collect();
    let mut fix = ScrubReport::default();
    match sync_row(node, &map, map.table.version(), row, &addrs, &mut fix).await? {
        Some(true) => {
            store.caught_up()?;
            Ok(Some(fix))
        }
        _ => Ok(None),
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
        if sync_row(node, &map, version, row, &addrs, report)
            .await?
            .is_none()
        {
            continue;
        }
        report.orphan_tracts_reclaimed += reclaim_orphans(node, &map, version, row, &addrs).await?;
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

/// Brings the live replicas of `row` (`addrs`, the first one's digest
/// first) to the same records: every replica re-reads and verifies its
/// copy into per-range digests, and every range whose digests differ (or
/// that holds damage or tombstones) is listed name by name and repaired.
/// None when the row must wait for a later pass (the replicas' installed
/// erasure-coded stripes differ); `Some(false)` when some range had to
/// (a replica installed a stripe while it was listed).
async fn sync_row(
    node: &Arc<ClusterNode>,
    map: &strata_client::Placement,
    version: u64,
    row: usize,
    addrs: &[String],
    report: &mut ScrubReport,
) -> Result<Option<bool>, ClusterError> {
    // Digests of every replica (each re-reads and verifies its copy).
    let mut digests: Vec<RowDigest> = Vec::new();
    for addr in addrs {
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
        return Ok(None);
    }
    report.rows_checked += 1;
    let mut whole = true;
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
        for addr in addrs {
            let url = format!("http://{addr}/cluster/v1/rows/{row}/list?range={range}");
            lists.push(node.http.get_json(&url, TIMEOUT).await.map_err(|reason| {
                ClusterError::Peer {
                    addr: addr.clone(),
                    reason,
                }
            })?);
        }
        // A replica that installed a stripe since its digest dropped
        // the stripe's records from its list: the lists would differ
        // by those, and copying them back would bring them back next
        // to their stripe copy. The range waits for the next pass.
        let mut moved = false;
        for (addr, d) in addrs.iter().zip(&digests) {
            let url = format!("http://{addr}/cluster/v1/rows/{row}/stripes");
            let now: Result<Vec<u64>, String> = node.http.get_json(&url, TIMEOUT).await;
            moved |= now.as_ref() != Ok(&d.stripes);
        }
        if moved {
            whole = false;
            continue;
        }
        let full = addrs.len() == map.table.replication();
        let fix = repair_range(node, version, row, addrs, &lists, full).await?;
        report.missing += fix.missing;
        report.repaired += fix.repaired;
        report.deletes_propagated += fix.deletes_propagated;
        report.objects_repaired += fix.objects_repaired;
        for name in fix.objects_repaired_names {
            if report.objects_repaired_names.len() >= SCRUB_NAMES_KEPT {
                report.objects_repaired_names.remove(0);
            }
            report.objects_repaired_names.push(name);
        }
        report.tombstones_purged += fix.tombstones_purged;
    }
    Ok(Some(whole))
}

/// A data tract record's name, `KEY` NUL `TRACT` NUL `VERSION` (16 hex
/// digits; [`strata_proto::versioned_tract_key`]): the object's
/// key, the tract number and the version. Tracts without a version (of
/// objects built by appends) are not orphans this pass can tell.
fn parse_tract_name(name: &str) -> Option<(&str, u64, u64)> {
    let mut it = name.split('\0');
    let key = it.next()?;
    let tract = it.next()?.parse().ok()?;
    let version = u64::from_str_radix(it.next()?, 16).ok()?;
    if it.next().is_some() || version == 0 {
        return None;
    }
    Some((key, tract, version))
}

/// Deletes the data tracts of `row` (which this node leads; `addrs` its
/// live replicas) that no manifest refers to and that are older than the
/// orphan grace time: what an upload or an overwrite whose coordinator
/// died before its manifest (or before it freed the version it replaced)
/// left, and a delete cut short before its tracts. Every replica of the
/// object's head row is asked for its manifest: a tract is kept if any of
/// them refers to its version or does not answer. The tract gets a
/// tombstone on every replica of its row (dropped later like any other).
/// Returns how many tracts it deleted.
async fn reclaim_orphans(
    node: &Arc<ClusterNode>,
    map: &strata_client::Placement,
    version: u64,
    row: usize,
    addrs: &[String],
) -> Result<u64, ClusterError> {
    let Some(store) = node
        .row_here(row)
        .and_then(|s| s.existing(row).ok().flatten())
    else {
        return Ok(0);
    };
    let grace = node.opts.orphan_grace.as_micros() as u64;
    let now = strata_proto::now_stamp();
    let scan = tokio::task::spawn_blocking(move || {
        let mut found: TractsByObject = HashMap::new();
        let res = store.scan(|s| {
            if let crate::rows::Scanned::Record {
                bucket,
                key,
                stamp,
                data,
            } = s
            {
                if now.saturating_sub(stamp) >= grace && !strata_proto::is_tombstone(&data) {
                    if let Some((k, t, v)) = parse_tract_name(&key) {
                        found.entry((bucket, k.to_string())).or_default().push((
                            key.clone(),
                            t,
                            v,
                            stamp,
                        ));
                    }
                }
            }
            true
        });
        res.map(|()| found)
    })
    .await
    .map_err(|e| ClusterError::BadRecord {
        row,
        reason: format!("orphan scan: {e}"),
    })??;
    let mut reclaimed = 0;
    for ((bucket, key), tracts) in found_sorted(scan) {
        // The versions the object's manifests refer to, on every replica
        // of its head row.
        let head_row = map
            .table
            .tract_row(strata_placement::object_hash(&bucket, &key), -1);
        let path = object_path(head_row, &bucket, &key);
        let mut live = Vec::new();
        let mut unsure = false;
        for d in &map.table.live_replicas(head_row) {
            let Some(addr) = map.addr_of_disk.get(d) else {
                unsure = true;
                continue;
            };
            match node
                .http
                .send(
                    Method::GET,
                    &format!("http://{addr}{path}"),
                    Some(version),
                    Bytes::new(),
                    TIMEOUT,
                )
                .await
            {
                Ok(r) if r.status.is_success() => match strata_proto::parse_head(&r.body) {
                    Ok(strata_proto::Head::Manifest(m)) => live.push(m.version),
                    Ok(_) => {}
                    Err(_) => unsure = true,
                },
                Ok(r) if r.status == hyper::StatusCode::NOT_FOUND => {}
                _ => unsure = true,
            }
        }
        if unsure {
            continue;
        }
        for (name, _tract, v, stamp) in tracts {
            if live.contains(&v) {
                continue;
            }
            let tpath = object_path(row, &bucket, &name);
            let tomb = strata_proto::now_stamp().max(stamp + 1);
            let mut all = true;
            for addr in addrs {
                let r = node
                    .http
                    .send_stamped(
                        Method::DELETE,
                        &format!("http://{addr}{tpath}"),
                        Some(version),
                        Some(tomb),
                        Bytes::new(),
                        TIMEOUT,
                    )
                    .await;
                all &= matches!(r, Ok(ref r) if r.status.is_success() || r.status == hyper::StatusCode::NOT_FOUND);
            }
            if all {
                reclaimed += 1;
            }
        }
    }
    if reclaimed > 0 {
        eprintln!(
            "strata server: scrub: row {row}: deleted {reclaimed} data tracts no manifest refers to"
        );
    }
    Ok(reclaimed)
}

/// A row's data tracts by object: (bucket, key) -> [(tract record name,
/// tract, version, stamp)].
type TractsByObject = HashMap<(String, String), Vec<TractRecord>>;

/// (tract record name, tract, version, stamp).
type TractRecord = (String, u64, u64, u64);

/// In name order (deterministic passes).
fn found_sorted(m: TractsByObject) -> Vec<((String, String), Vec<TractRecord>)> {
    let mut v: Vec<_> = m.into_iter().collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
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
    objects_repaired: u64,
    /// `BUCKET/KEY` of each object record (not tombstone) repaired.
    objects_repaired_names: Vec<String>,
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
    let now = strata_proto::now_stamp();
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
        let (k, alt, _) = strata_proto::row::identity(&bucket, &key);
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
            strata_proto::tombstone_record()
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
                } else {
                    fix.objects_repaired += 1;
                    fix.objects_repaired_names.push(format!("{bucket}/{key}"));
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

#[cfg(test)]
mod tests {
    use super::parse_tract_name;
    use strata_proto::{tract_key, versioned_tract_key};

    #[test]
    fn tract_names_are_parsed_and_unversioned_ones_left_alone() {
        let n = versioned_tract_key("a/b.jpg", 0xdead_beef, 7);
        assert_eq!(parse_tract_name(&n), Some(("a/b.jpg", 7, 0xdead_beef)));
        assert_eq!(parse_tract_name(&tract_key("a", 3)), None);
        assert_eq!(parse_tract_name("plain"), None);
        assert_eq!(parse_tract_name("k\u{0}1\u{0}zz"), None);
        assert_eq!(parse_tract_name("k\u{0}1\u{0}0000000000000001\u{0}x"), None);
    }
}
