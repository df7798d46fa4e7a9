//! Installing a recorded stripe on a replica of its row: its index fetched
//! from a shard holder and written durably to `ROW/stripes/`, loaded into the
//! RAM map, and only then the replica's own copies of its records dropped;
//! and loading the installed indexes at start.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use strata_meta::api::StripeRecord;
use strata_placement::{DiskId, PlacementTable};

use super::files::{fetch, file_url, my_disks};
use super::format::{decode_index, write_atomic};
use super::state::{lock, View};
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// On start: every index in `ROW/stripes/` into the RAM map; the staging
/// directories of encodings and compactions a crash interrupted (nothing
/// is being encoded yet) and half-written index files are deleted.
pub(super) fn load_installed(node: &ClusterNode) {
    for rows in node.stores.iter().flatten() {
        if let Some(d) = rows.dir().parent() {
            let staging = d.join("ec").join("staging");
            if staging.exists() {
                match strata_fs::remove_dir_all(&staging) {
                    Ok(()) => eprintln!(
                        "strata server: erasure coding: deleted {} (an interrupted encoding)",
                        staging.display()
                    ),
                    Err(e) => eprintln!("strata server: {}: {e}", staging.display()),
                }
            }
        }
        for row in rows.rows_on_disk() {
            let dir = rows.dir().join(format!("{row:08}")).join("stripes");
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let p = e.path();
                if p.extension().and_then(|x| x.to_str()) == Some("tmp") {
                    let _ = strata_fs::remove_file(&p);
                    continue;
                }
                if p.extension().and_then(|x| x.to_str()) != Some("idx") {
                    continue;
                }
                match std::fs::read(&p)
                    .map_err(|e| e.to_string())
                    .and_then(|b| decode_index(&b))
                {
                    Ok((stripe, r, entries)) if r == row => {
                        node.ec.insert(row, stripe, &entries);
                        lock(&node.ec.installed).insert(stripe, row);
                    }
                    Ok(_) => eprintln!("strata server: {}: index of another row", p.display()),
                    Err(e) => eprintln!("strata server: {}: {e}", p.display()),
                }
            }
        }
    }
}

/// Installs every recorded stripe of a row this node replicates.
pub(super) async fn install(
    node: &Node,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) {
    let mine = my_disks(node);
    let mut todo: Vec<&StripeRecord> = view
        .stripes
        .values()
        .filter(|s| !lock(&node.ec.installed).contains_key(&s.id))
        .filter(|s| s.row < table.row_count() && table.row(s.row).iter().any(|d| mine.contains(d)))
        .collect();
    todo.sort_by_key(|s| s.id);
    for s in todo {
        if let Err(e) = install_one(node, s, table, addrs).await {
            node.ec.errors.fetch_add(1, Ordering::Relaxed);
            eprintln!("strata server: installing stripe {:016x}: {e}", s.id);
        }
    }
}

pub(super) async fn install_one(
    node: &Node,
    s: &StripeRecord,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    let Some(rows) = node.row_here(s.row) else {
        return Ok(());
    };
    let store = rows.row(s.row).map_err(|e| e.to_string())?;
    // The index from any shard holder (live ones first).
    let mut order: Vec<usize> = (0..s.disks.len()).collect();
    order.sort_by_key(|&i| !table.is_live(s.disks[i]));
    let mut bytes = None;
    let mut last = String::new();
    for i in order {
        let Some(url) = file_url(addrs, s.disks[i], s.id, "index") else {
            continue;
        };
        match fetch(node, &url).await {
            Ok(b) => {
                bytes = Some(b);
                break;
            }
            Err(e) => last = e,
        }
    }
    let bytes = bytes.ok_or_else(|| format!("no shard holder gave its index: {last}"))?;
    let (stripe, row, entries) = decode_index(&bytes)?;
    if stripe != s.id || row != s.row {
        return Err(format!("index of stripe {stripe:016x} row {row}"));
    }
    // Durable here before any replica record is dropped.
    let path = store
        .path()
        .join("stripes")
        .join(format!("{:016x}.idx", s.id));
    let b = bytes.clone();
    tokio::task::spawn_blocking(move || write_atomic(&path, &b))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    node.ec.insert(s.row, s.id, &entries);
    let items: Vec<(u64, u32, u64)> = entries.iter().map(|e| (e.key, e.alt, e.stamp)).collect();
    let dropped = store.drop_encoded(items).await.map_err(|e| e.to_string())?;
    lock(&node.ec.installed).insert(s.id, s.row);
    node.ec.stripes_installed.fetch_add(1, Ordering::Relaxed);
    node.ec
        .records_dropped
        .fetch_add(dropped, Ordering::Relaxed);
    // Reclaim the space of the dropped records now.
    let st = store.clone();
    let _ = tokio::task::spawn_blocking(move || {
        for (_, part) in st.parts() {
            let _ = part.compact_all(0.5, &mut |_| {});
        }
    })
    .await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec::format::{encode_index, IndexEntry};

    /// A replica's copy of a stripe index, written into a `stripes/`
    /// directory that does not exist yet, the power cut after each file
    /// operation in turn: whole or absent, and there once written (a
    /// replica drops its own records only after this).
    #[test]
    #[allow(clippy::disallowed_methods)] // acknowledgements around the model
    fn an_installed_stripe_index_is_whole_or_absent_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let entries: Vec<IndexEntry> = (0..200u64)
            .map(|k| IndexEntry {
                key: k,
                alt: 1,
                len: 1000,
                stamp: k + 1,
                offset: k * 1040,
            })
            .collect();
        let index = encode_index(9, 4, &entries);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |root| std::fs::create_dir_all(root.join("rows/00000004")).unwrap(),
                |root| {
                    write_atomic(
                        &root.join("rows/00000004/stripes/0000000000000009.idx"),
                        &index,
                    )?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let p = root.join("rows/00000004/stripes/0000000000000009.idx");
                    match std::fs::read(&p) {
                        Ok(b) => {
                            let (stripe, row, got) = decode_index(&b)
                                .unwrap_or_else(|e| panic!("{how:?} step {n}: {e}"));
                            assert_eq!((stripe, row, got), (9, 4, entries.clone()));
                        }
                        Err(e) => assert!(
                            !root.join("ack").exists(),
                            "{how:?} step {n}: written, then gone: {e}"
                        ),
                    }
                },
            )
            .unwrap();
            assert!(steps > 4, "{how:?}: {steps} steps");
        }
    }
}
