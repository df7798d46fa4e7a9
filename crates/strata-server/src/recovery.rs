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
use strata_client::protocol::take_frame;
use strata_meta::api::RecoveryTask;
use strata_store::Tier;

use crate::node::ClusterNode;
use crate::ClusterError;

/// Polls the metadata service for this node's copies and runs them.
pub(crate) async fn run(node: Arc<ClusterNode>) {
    let mut tick = tokio::time::interval(Duration::from_millis(300));
    loop {
        tick.tick().await;
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
    let idle = Duration::from_secs(10);
    loop {
        let frame = match tokio::time::timeout(idle, body.frame()).await {
            Err(_) => return Err(peer(format!("export of row {row} stalled"))),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(peer(format!("export of row {row}: {e}"))),
            Ok(Some(Ok(f))) => f,
        };
        let Ok(data) = frame.into_data() else {
            continue;
        };
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
            store.put(&f.bucket, &f.key, f.stamp, &f.data, Tier::Disk, own)
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
    Ok(copied)
}
