//! The recovery executor: this node pulls every row it was made a
//! replacement for from a surviving replica, all rows at once up to a
//! per-disk bound, each stream throttled, while it already serves the
//! row's new writes (docs/recovery.md).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use http_body_util::BodyExt;
use hyper::Method;
use strata_meta::api::RecoveryTask;
use strata_proto::take_frame;
use strata_store::Tier;

use crate::node::ClusterNode;
use crate::ClusterError;

/// Polls the metadata service for this node's copies and runs them.
pub(crate) async fn run(node: Arc<ClusterNode>, mut ctx: crate::workers::Ctx) {
    let mut tick = tokio::time::interval(Duration::from_millis(300));
    while ctx.tick(&mut tick).await {
        let Some((me, _)) = node.ids() else { continue };
        let url = format!("http://{}/v1/recovery/tasks?node={}", node.opts.meta, me.0);
        // The list answers for this table version or a later one.
        let polled_at = node.table_version();
        let Ok(tasks) = node
            .http
            .get_json::<Vec<RecoveryTask>>(&url, Duration::from_secs(5))
            .await
        else {
            continue;
        };
        // Copies finished here but not yet acknowledged (the report rides on
        // the next heartbeat) must not run again; once the service stops
        // listing a copy, forget it.
        {
            let listed: std::collections::HashSet<_> = tasks
                .iter()
                .map(|t| (t.transfer.row, t.transfer.target))
                .collect();
            if let Ok(mut fin) = node.finished.lock() {
                fin.retain(|k| listed.contains(k));
            }
        }
        // Which rows here are still being copied (reads must not trust
        // their stripes yet).
        node.note_tasks(polled_at, &tasks);
        for task in tasks {
            let key = (task.transfer.row, task.transfer.target);
            if node.finished.lock().is_ok_and(|f| f.contains(&key)) {
                continue;
            }
            {
                let mut running = match node.running.lock() {
                    Ok(g) => g,
                    Err(p) => p.into_inner(),
                };
                if !running.insert(key) {
                    continue;
                }
            }
            let node = node.clone();
            tokio::spawn(async move {
                let permit = node.recovery_permits.clone().acquire_owned().await;
                let res = pull_row(&node, &task).await;
                drop(permit);
                match res {
                    Ok(bytes) => {
                        if let Ok(mut fin) = node.finished.lock() {
                            fin.insert(key);
                        }
                        if let Ok(mut done) = node.completed.lock() {
                            done.push(task.transfer);
                        }
                        node.completed_bytes.fetch_add(bytes, Ordering::Relaxed);
                    }
                    Err(e) => {
                        eprintln!(
                            "strata server: recovery of row {} from {} failed (will retry): {e}",
                            task.transfer.row, task.source_addr
                        );
                        tokio::time::sleep(Duration::from_millis(500)).await;
                    }
                }
                if let Ok(mut running) = node.running.lock() {
                    running.remove(&key);
                }
            });
        }
    }
}

/// Streams row `task.transfer.row` from its source into this node's store
/// of the row; returns the bytes copied.
async fn pull_row(node: &Arc<ClusterNode>, task: &RecoveryTask) -> Result<u64, ClusterError> {
    let row = task.transfer.row;
    // The row's records, then its part of the listing index (the buckets
    // whose index lives in this row); the copy is reported done only after
    // both. Records first: an index that cannot be copied yet (its sources
    // rebuilding their own) must not hold back the data's replication.
    let url = format!("http://{}/cluster/v1/rows/{row}/export", task.source_addr);
    let peer = |reason: String| ClusterError::Peer {
        addr: task.source_addr.clone(),
        reason,
    };
    let resp = node
        .http
        .start(Method::GET, &url, None, bytes::Bytes::new())
        .await
        .map_err(peer)?;
    if !resp.status().is_success() {
        return Err(peer(format!("export of row {row}: {}", resp.status())));
    }
    let stores = node
        .stores_of(task.transfer.target)
        .ok_or_else(|| ClusterError::BadRecord {
            row,
            reason: format!(
                "disk {} is not a row disk of this node",
                task.transfer.target
            ),
        })?;
    let store = tokio::task::spawn_blocking(move || stores.row(row))
        .await
        .map_err(|e| peer(e.to_string()))??;
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut copied = 0u64;
    let limit = node.opts.recovery_bytes_per_sec;
    while let Some(data) = next_chunk(&mut body, &format!("export of row {row}"))
        .await
        .map_err(peer)?
    {
        buf.extend_from_slice(&data);
        let mut puts = Vec::new();
        let mut chunk_bytes = 0u64;
        while let Some(f) =
            take_frame(&mut buf).map_err(|e| ClusterError::BadRecord { row, reason: e })?
        {
            copied += f.data.len() as u64;
            chunk_bytes += f.data.len() as u64;
            puts.push(f);
        }
        // Records of one chunk go to the row's group commit together. Each
        // is kept only if newer than what the row holds: a delete or a
        // write that reached this replica while the copy ran wins over the
        // older record the stream brings (docs/recovery.md).
        let writes = puts.iter().map(|f| {
            let own = node.own_part(&f.bucket);
            node.forget(strata_node::object::object_id(&f.bucket, &f.key));
            store.put(&f.bucket, &f.key, f.stamp, f.data.clone(), Tier::Disk, own)
        });
        for r in futures_util::future::join_all(writes).await {
            r?;
        }
        if let Some(rate) = limit {
            // One pacer per disk, shared by all its streams: the disk's
            // recovery bandwidth, not each stream's, is bounded.
            let wait = node.pace(chunk_bytes, rate);
            tokio::time::sleep(wait).await;
        }
    }
    if !buf.is_empty() {
        return Err(peer(format!(
            "export of row {row} ended inside a record ({} bytes left)",
            buf.len()
        )));
    }
    let index_bytes = pull_index_from_any(node, row, Some(&task.source_addr)).await?;
    Ok(copied + index_bytes)
}

/// [`pull_index_row`] from `preferred`, else from each other live replica
/// of `row` that holds it whole (not this node's, not a copy's target) in
/// turn, until one serves it (a replica rebuilding its own index refuses).
async fn pull_index_from_any(
    node: &Arc<ClusterNode>,
    row: usize,
    preferred: Option<&str>,
) -> Result<u64, ClusterError> {
    let mut sources: Vec<String> = preferred.map(str::to_string).into_iter().collect();
    if let (Some(map), Some((_, mine))) = (node.map(), node.disk_ids()) {
        for d in map.table.live_replicas(row) {
            if mine.contains(&d) || map.copying.contains(&(row, d)) {
                continue;
            }
            if let Some(a) = map.addr_of_disk.get(&d) {
                if !sources.contains(a) {
                    sources.push(a.clone());
                }
            }
        }
    }
    let mut last = ClusterError::Peer {
        addr: String::new(),
        reason: format!("no live replica of row {row} to copy its listing index from"),
    };
    for source in sources {
        match pull_index_row(node, row, &source).await {
            Ok(n) => return Ok(n),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// The next chunk of an export's body (`None` at its end); an error if
/// it fails or stalls for 10 s.
async fn next_chunk(
    body: &mut hyper::body::Incoming,
    what: &str,
) -> Result<Option<bytes::Bytes>, String> {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), body.frame()).await {
            Err(_) => return Err(format!("{what} stalled")),
            Ok(None) => return Ok(None),
            Ok(Some(Err(e))) => return Err(format!("{what}: {e}")),
            Ok(Some(Ok(f))) => {
                if let Ok(data) = f.into_data() {
                    return Ok(Some(data));
                }
            }
        }
    }
}

/// Entries applied per index transaction while copying.
const INDEX_BATCH: usize = 2_000;

/// Copies the listing index entries and tombstones of the buckets whose
/// index lives in `row` from the node at `source` into this node's index
/// (each only over nothing or something older: a write this node took
/// meanwhile wins). Returns the bytes read.
pub(crate) async fn pull_index_row(
    node: &Arc<ClusterNode>,
    row: usize,
    source: &str,
) -> Result<u64, ClusterError> {
    let index = node
        .index
        .get()
        .cloned()
        .ok_or_else(|| ClusterError::Peer {
            addr: source.to_string(),
            reason: "this node's listing index is not open yet".into(),
        })?;
    let url = format!("http://{source}/cluster/v1/index-rows/{row}");
    let peer = |reason: String| ClusterError::Peer {
        addr: source.to_string(),
        reason,
    };
    let started = std::time::Instant::now();
    let resp = node
        .http
        .start(Method::GET, &url, None, bytes::Bytes::new())
        .await
        .map_err(peer)?;
    if !resp.status().is_success() {
        return Err(peer(format!(
            "index export of row {row}: {}",
            resp.status()
        )));
    }
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut batch = Vec::with_capacity(INDEX_BATCH);
    let (mut lines, mut bytes) = (0u64, 0u64);
    let mut done = None;
    let limit = node.opts.recovery_bytes_per_sec;
    while let Some(data) = next_chunk(&mut body, &format!("index export of row {row}"))
        .await
        .map_err(peer)?
    {
        bytes += data.len() as u64;
        buf.extend_from_slice(&data);
        while let Some(nl) = buf.iter().position(|&c| c == b'\n') {
            let line = buf.split_to(nl + 1);
            let l: crate::index::ExportLine = serde_json::from_slice(&line[..nl])
                .map_err(|e| peer(format!("index export of row {row}: bad line: {e}")))?;
            if done.is_some() {
                return Err(peer(format!(
                    "index export of row {row}: data after its end"
                )));
            }
            if let Some(n) = l.done {
                done = Some(n);
                continue;
            }
            lines += 1;
            batch.push(l);
            if batch.len() >= INDEX_BATCH {
                index.merge(std::mem::take(&mut batch)).await?;
            }
        }
        if let Some(rate) = limit {
            tokio::time::sleep(node.pace(data.len() as u64, rate)).await;
        }
        // A copy slower than tombstones live could bring back a name
        // deleted (and its tombstone dropped) while it ran: start again.
        if started.elapsed() > crate::index::TOMBSTONE_KEEP / 2 {
            return Err(peer(format!(
                "index export of row {row} took longer than {} s; starting again",
                crate::index::TOMBSTONE_KEEP.as_secs() / 2
            )));
        }
    }
    if done != Some(lines) {
        return Err(peer(format!(
            "index export of row {row} cut short ({lines} lines, end {done:?})"
        )));
    }
    index.merge(batch).await?;
    Ok(bytes)
}

/// Rebuilds this node's listing index after its file was found damaged
/// and replaced by an empty one (docs/placement.md, "The listing index"):
/// in a cluster that keeps more than one replica of a row, each row this
/// node holds is copied from another replica that holds it whole; in a
/// cluster of one (one replica), the entries are rebuilt from the head
/// records of the objects written over S3 in this node's rows. Until it
/// is done, this node refuses listings (the client asks another replica)
/// and index exports; writes are taken all along. Retries until done.
pub(crate) async fn rebuild_index(node: Arc<ClusterNode>, mut ctx: crate::workers::Ctx) {
    let Some(index) = node.index.get().cloned() else {
        return;
    };
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut copied: std::collections::HashSet<usize> = std::collections::HashSet::new();
    while ctx.tick(&mut tick).await {
        let (Some(map), Some((_, mine))) = (node.map(), node.disk_ids()) else {
            continue;
        };
        let res = if map.table.replication() <= 1 {
            let n = node.clone();
            let idx = index.clone();
            match tokio::task::spawn_blocking(move || index_from_heads(&n)).await {
                Ok(Ok(lines)) => idx.merge(lines).await.map(|()| true),
                Ok(Err(e)) => Err(e),
                Err(e) => Err(ClusterError::Index {
                    path: "listing.redb".into(),
                    reason: e.to_string(),
                }),
            }
        } else {
            let mut rows: Vec<usize> = mine
                .iter()
                .flat_map(|&d| map.table.rows_of_disk(d))
                .collect();
            rows.sort_unstable();
            rows.dedup();
            let mut all = true;
            for row in rows {
                if copied.contains(&row) {
                    continue;
                }
                match pull_index_from_any(&node, row, None).await {
                    Ok(_) => {
                        copied.insert(row);
                    }
                    Err(e) => {
                        all = false;
                        eprintln!("strata server: rebuilding the listing index of row {row}: {e} (will retry)");
                    }
                }
            }
            Ok(all)
        };
        match res {
            Ok(true) => match index.set_rebuilding(false) {
                Ok(()) => {
                    eprintln!("strata server: the listing index is rebuilt");
                    return;
                }
                Err(e) => eprintln!("strata server: {e}"),
            },
            Ok(false) => {}
            Err(e) => {
                eprintln!("strata server: rebuilding the listing index: {e} (will retry)");
                ctx.failed(e);
            }
        }
    }
}

/// The listing entries of every object written over S3 whose head record
/// is in this node's rows (and a tombstone for each deleted one), with
/// the records' stamps. Blocking.
fn index_from_heads(node: &ClusterNode) -> Result<Vec<crate::index::ExportLine>, ClusterError> {
    use strata_proto::{is_tombstone, listing_entry, parse_head};
    let mut out = Vec::new();
    for stores in node.stores.iter().flatten() {
        for row in stores.rows_on_disk() {
            let Some(store) = stores.existing(row)? else {
                continue;
            };
            store.scan(|item| {
                let crate::rows::Scanned::Record {
                    bucket,
                    key,
                    stamp,
                    data,
                } = item
                else {
                    return true;
                };
                // Tract records and multipart uploads' hidden part objects
                // are no names of their own.
                if key.contains('\0') || key.starts_with('\u{1}') || bucket.contains('\u{1}') {
                    return true;
                }
                if is_tombstone(&data) {
                    out.push(crate::index::ExportLine {
                        b: bucket,
                        n: key,
                        d: stamp,
                        ..Default::default()
                    });
                    return true;
                }
                let Ok(head) = parse_head(&bytes::Bytes::from(data)) else {
                    return true;
                };
                // Objects written over the native API are not listed.
                if let Some(e) = listing_entry(&head.info(), stamp) {
                    out.push(crate::index::ExportLine {
                        e: Some(e),
                        b: bucket,
                        n: key,
                        ..Default::default()
                    });
                }
                true
            })?;
        }
    }
    Ok(out)
}
