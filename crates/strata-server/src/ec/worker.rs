//! The erasure-coding worker: one loop per node that, each tick, refreshes
//! the view and runs the stripe jobs in order (install, rebuild, encode,
//! compact, retire, sweep, scrub, count), under the node's one runner.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::compact::{compact_one, retire, sweep};
use super::encode::encode_one;
use super::files::{refresh_view, TICK};
use super::install::{install, load_installed};
use super::rebuild::rebuild;
use super::upkeep::{count_bytes, scrub};
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// The node's erasure-coding task (see the module comment).
pub(crate) async fn run(node: Node, mut ctx: crate::workers::Ctx) {
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while ctx.tick(&mut tick).await {
        if let Err(e) = step(&node).await {
            node.ec.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("strata server: erasure coding: {e}");
            ctx.failed(e);
        }
    }
}

pub(super) async fn step(node: &Node) -> Result<(), String> {
    if node.ids().is_none() {
        return Ok(());
    }
    if !node.ec.loaded.load(Ordering::Acquire) {
        let n = node.clone();
        tokio::task::spawn_blocking(move || load_installed(&n))
            .await
            .map_err(|e| e.to_string())?;
        node.ec.loaded.store(true, Ordering::Release);
    }
    let view = refresh_view(node).await?;
    let Some(map) = node.map() else {
        return Ok(());
    };
    install(node, &view, &map.table, &map.addr_of_disk).await;
    retire(node, &view).await;
    rebuild(node, &view, &map.table, &map.addr_of_disk).await;
    if let Some(ec) = view.ec {
        encode_one(node, ec, &view, &map.table, &map.addr_of_disk).await?;
    }
    if let Err(e) = compact_one(node, &view, &map.table, &map.addr_of_disk).await {
        node.ec.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("strata server: stripe compaction: {e}");
    }
    scrub(node, &view, &map.table, &map.addr_of_disk).await;
    if let Err(e) = sweep(node).await {
        node.ec.errors.fetch_add(1, Ordering::Relaxed);
        eprintln!("strata server: erasure coding sweep: {e}");
    }
    let n = node.clone();
    let v2 = view.clone();
    let _ = tokio::task::spawn_blocking(move || count_bytes(&n, &v2)).await;
    Ok(())
}
