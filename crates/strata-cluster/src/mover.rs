//! The tier mover of a cluster node: keeps the flash tier in front of the
//! node's rows within its budget by moving the oldest flash segments, whole,
//! to the row's disk directory (Janus's FIFO flash tier; sequential I/O on
//! both sides), with the store's crash-safe `move_segment` (copy, fsync,
//! rename, switch, unlink: a needle is readable from one tier or the other
//! at every moment). Throttled to `mover_bytes_per_sec`.
//!
//! Row segments mix the buckets of a row, so the bound is the node's: its
//! flash capacity, or under a loaded plan the sum of the plan's per-workload
//! flash bytes (docs/placement.md, "Devices and tiers").

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use strata_store::Tier;

use crate::node::ClusterNode;

/// Device index of a row store's disk directory (its flash is index 1).
const DISK_DEVICE: usize = 0;
/// Device index of a row store's flash directory.
const FLASH_DEVICE: usize = 1;

/// Starts the mover thread.
pub(crate) fn spawn(node: Arc<ClusterNode>) -> std::io::Result<()> {
    std::thread::Builder::new()
        .name("cluster-tier-mover".into())
        .spawn(move || loop {
            std::thread::sleep(Duration::from_millis(250));
            pass(&node);
        })
        .map(|_| ())
}

/// One look at the flash tier; moves what is over the budget.
pub(crate) fn pass(node: &ClusterNode) {
    let stores: Vec<_> = node
        .stores
        .iter()
        .flatten()
        .flat_map(|s| s.opened())
        .filter(|s| s.flash_path().is_some())
        .collect();
    let mut used: u64 = stores
        .iter()
        .flat_map(|s| s.store().segments())
        .filter(|s| s.tier == Tier::Flash)
        .map(|s| s.size)
        .sum();
    node.flash_used.store(used, Relaxed);
    let budget = node.flash_budget();
    let mut sealed_once = false;
    while used > budget {
        // The oldest sealed flash segment of any row.
        let oldest = stores
            .iter()
            .flat_map(|s| {
                s.store()
                    .segments()
                    .into_iter()
                    .filter(|g| g.tier == Tier::Flash && !g.active && g.size > 0)
                    .map(move |g| (g.created_unix_ns, g.id, g.size, s.clone()))
            })
            .min_by_key(|x| (x.0, x.1));
        let Some((_, id, size, store)) = oldest else {
            if sealed_once {
                break;
            }
            // Only active segments on flash: seal the largest so it can move.
            sealed_once = true;
            let biggest = stores
                .iter()
                .flat_map(|s| {
                    s.store()
                        .segments()
                        .into_iter()
                        .filter(|g| g.tier == Tier::Flash && g.active)
                        .map(move |g| (g.size, s.clone()))
                })
                .max_by_key(|x| x.0);
            match biggest {
                Some((sz, s)) if sz > 0 => {
                    if s.store().seal_active(FLASH_DEVICE).is_err() {
                        break;
                    }
                }
                _ => break,
            }
            continue;
        };
        match store.store().move_segment(id, DISK_DEVICE, &mut |_| {}) {
            Ok(_) => {
                used = used.saturating_sub(size);
                node.flash_used.store(used, Relaxed);
                node.metrics.mover_segments.fetch_add(1, Relaxed);
                node.metrics.mover_bytes.fetch_add(size, Relaxed);
                let rate = node.opts.mover_bytes_per_sec.max(1);
                std::thread::sleep(Duration::from_secs_f64(size as f64 / rate as f64));
            }
            Err(e) => {
                node.metrics.mover_errors.fetch_add(1, Relaxed);
                eprintln!("strata server: tier mover: segment {id:016x}: {e}");
                break;
            }
        }
    }
}
