//! Where a node keeps its stripe files (`DISK/ec/STRIPE/`), and how they
//! travel between nodes (fetch, send in chunks), and the little placement the
//! stripe jobs share (the disks here, whether this node leads a row, the view
//! refreshed from the metadata service).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use hyper::Method;
use strata_meta::api::EcView;
use strata_placement::{DiskId, PlacementTable};

use super::state::{lock, View};
use crate::node::ClusterNode;

/// Bytes sent per request when a shard travels between nodes.
pub(super) const SEND_CHUNK: usize = 8 << 20;

pub(super) const TIMEOUT: Duration = Duration::from_secs(30);

/// How often the task runs.
pub(super) const TICK: Duration = Duration::from_millis(500);

/// `DISK/ec/` of this node's disk `disk`, if it is a row disk here.
pub(super) fn ec_dir(node: &ClusterNode, disk: DiskId) -> Option<PathBuf> {
    let s = node.stores_of(disk)?;
    Some(s.dir().parent()?.join("ec"))
}

pub(super) fn stripe_dir(node: &ClusterNode, disk: DiskId, stripe: u64) -> Option<PathBuf> {
    Some(ec_dir(node, disk)?.join(format!("{stripe:016x}")))
}

pub(super) async fn fetch(node: &ClusterNode, url: &str) -> Result<Bytes, String> {
    let r = node
        .http
        .send(Method::GET, url, None, Bytes::new(), TIMEOUT)
        .await?;
    if r.status.is_success() {
        Ok(r.body)
    } else {
        Err(format!(
            "{url}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ))
    }
}

pub(super) async fn send_chunk(node: &ClusterNode, url: &str, body: Bytes) -> Result<(), String> {
    let r = node
        .http
        .send(Method::PUT, url, None, body, TIMEOUT)
        .await?;
    if r.status.is_success() {
        Ok(())
    } else {
        Err(format!(
            "{url}: {} {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        ))
    }
}

/// The URL of a stripe file on the node of `disk` (None: unknown disk).
pub(super) fn file_url(
    table_addr: &HashMap<DiskId, String>,
    disk: DiskId,
    stripe: u64,
    file: &str,
) -> Option<String> {
    let addr = table_addr.get(&disk)?;
    Some(format!(
        "http://{addr}/cluster/v1/ec/{stripe}/{file}?disk={}",
        disk.0
    ))
}

/// Fetches the code and the stripe records from the metadata service.
pub(super) async fn refresh_view(node: &ClusterNode) -> Result<Arc<View>, String> {
    let url = format!("http://{}/v1/ec", node.opts.meta);
    let v: EcView = node.http.get_json(&url, TIMEOUT).await?;
    {
        // Installed stripes that were just forgotten: kept readable here.
        let old = node.ec.view();
        let inst = lock(&node.ec.installed);
        let mut gone = lock(&node.ec.gone);
        for s in old.stripes.values() {
            if inst.contains_key(&s.id) && !v.stripes.iter().any(|x| x.id == s.id) {
                gone.insert(s.id, s.clone());
            }
        }
    }
    let view = Arc::new(View {
        ec: v.ec,
        stripes: v.stripes.into_iter().map(|s| (s.id, s)).collect(),
        next_stripe: v.next_stripe,
        fetched: true,
    });
    match node.ec.view.write() {
        Ok(mut g) => *g = view.clone(),
        Err(p) => *p.into_inner() = view.clone(),
    }
    Ok(view)
}

pub(super) fn my_disks(node: &ClusterNode) -> Vec<DiskId> {
    node.disk_ids().map(|(_, d)| d).unwrap_or_default()
}

/// Whether this node leads `row`: its disk is the row's first live one.
pub(super) fn leads(table: &PlacementTable, mine: &[DiskId], row: usize) -> bool {
    table
        .row(row)
        .iter()
        .find(|&&d| table.is_live(d))
        .is_some_and(|d| mine.contains(d))
}

pub(super) async fn send_file(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    disk: DiskId,
    stripe: u64,
    file: &str,
    bytes: Bytes,
) -> Result<(), String> {
    let url =
        file_url(addrs, disk, stripe, file).ok_or_else(|| format!("disk {disk} has no address"))?;
    let mut at = 0;
    loop {
        let end = (at + SEND_CHUNK).min(bytes.len());
        send_chunk(node, &format!("{url}&at={at}"), bytes.slice(at..end)).await?;
        at = end;
        if at >= bytes.len() {
            break;
        }
    }
    send_chunk(node, &format!("{url}&done={}", bytes.len()), Bytes::new()).await
}
