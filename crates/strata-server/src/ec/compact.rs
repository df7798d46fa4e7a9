//! Stripe compaction (the live records of stripes that deletes and overwrites
//! emptied re-encoded together, the old stripes retired) and the sweep of the
//! files of stripes that were never recorded.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use hyper::Method;
use strata_meta::api::StripeRecord;
use strata_placement::{DiskId, PlacementTable};
use strata_store::format::needle::FlagCode;

use super::encode::{store_stripe, Source};
use super::files::{ec_dir, leads, my_disks, refresh_view, TICK, TIMEOUT};
use super::format::{decode_index, sync_dir, IndexEntry};
use super::read::StripeReader;
use super::state::{lock, View};
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// How often a node looks for a stripe to compact.
pub(super) const COMPACT_EVERY: Duration = Duration::from_secs(2);

/// Most bytes of a stripe read in one request by a compaction.
pub(super) const COMPACT_SPAN: u64 = 4 << 20;

/// The stripe index of `id` installed in `row`'s directory (blocking).
pub(super) fn read_installed(
    store: &crate::rows::RowStore,
    id: u64,
) -> Result<Vec<IndexEntry>, String> {
    let path = store.path().join("stripes").join(format!("{id:016x}.idx"));
    let b = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let (stripe, row, entries) =
        decode_index(&b).map_err(|e| format!("{}: {e}", path.display()))?;
    if stripe != id || row != store.row() {
        return Err(format!(
            "{}: index of stripe {stripe:016x} row {row}",
            path.display()
        ));
    }
    Ok(entries)
}

/// A stripe worth compacting: its record, its live entries and the bytes
/// of its dead ones.
pub(super) struct Candidate {
    pub(super) stripe: StripeRecord,
    pub(super) store: Arc<crate::rows::RowStore>,
    pub(super) live: Vec<IndexEntry>,
    pub(super) dead_bytes: u64,
}

/// Splits a stripe's entries into live and dead ones (blocking). A record
/// is dead when a newer record of its name exists — in the row store (a
/// delete's tombstone, a rewrite) or in a later stripe — or when a later
/// stripe holds the same record (a compaction re-encoded it). Everything
/// else is live, tombstones included (a tombstone in a stripe may be what
/// hides an older copy in another stripe).
pub(super) fn split_live(
    node: &ClusterNode,
    store: &crate::rows::RowStore,
    s: &StripeRecord,
) -> Result<(Vec<IndexEntry>, u64), String> {
    let entries = read_installed(store, s.id)?;
    let mut live = Vec::new();
    let mut dead = 0u64;
    for e in entries {
        let superseded = match node.ec.lookup(s.row, e.key, e.alt) {
            Some(l) => l.stamp > e.stamp || (l.stamp == e.stamp && l.stripe > s.id),
            None => false,
        };
        let rewritten = !superseded
            && store
                .newest_stamp(e.key, e.alt)
                .map_err(|x| x.to_string())?
                .is_some_and(|t| t > e.stamp);
        if superseded || rewritten {
            dead += strata_store::format::needle::needle_len(e.len);
        } else {
            live.push(e);
        }
    }
    Ok((live, dead))
}

/// Finds, among the installed stripes of the rows this node leads, the
/// first whose dead records reach the garbage threshold (blocking).
pub(super) fn pick_compaction(
    node: &ClusterNode,
    view: &View,
    table: &PlacementTable,
) -> Result<Option<Candidate>, String> {
    let mine = my_disks(node);
    let installed = lock(&node.ec.installed).clone();
    let mut ids: Vec<&StripeRecord> = view
        .stripes
        .values()
        .filter(|s| installed.contains_key(&s.id))
        .filter(|s| s.row < table.row_count() && leads(table, &mine, s.row))
        .collect();
    ids.sort_by_key(|s| s.id);
    for s in ids {
        let Some(store) = node
            .row_here(s.row)
            .and_then(|r| r.existing(s.row).ok().flatten())
        else {
            continue;
        };
        let (live, dead_bytes) = split_live(node, &store, s)?;
        if live.is_empty()
            || dead_bytes as f64 >= node.opts.ec_compact_garbage * s.data_len.max(1) as f64
        {
            return Ok(Some(Candidate {
                stripe: s.clone(),
                store,
                live,
                dead_bytes,
            }));
        }
    }
    Ok(None)
}

/// Whether `needle` is the record `e` names (checksums, identity, stamp).
pub(super) fn needle_is(needle: &[u8], e: &IndexEntry) -> bool {
    match strata_store::format::needle::parse(needle, FlagCode::Ignored) {
        Ok((h, data)) => {
            h.key == e.key
                && h.alt_key == e.alt
                && data.len() == e.len as usize
                && strata_proto::row::decode(data).is_some_and(|d| d.stamp == e.stamp)
        }
        Err(_) => false,
    }
}

/// Compacts one stripe of a row this node leads whose dead records passed
/// the threshold (`--ec-compact-garbage`): its live needles are read from
/// the data shards (a span at a time; decoded from the others where a
/// shard is lost or damaged — never the whole stripe), written one after
/// the other into a staging file, encoded into a new stripe whose shards
/// are made durable on their disks, and the new stripe is recorded with
/// `replaces: [old]`, which forgets the old one in the same step. The
/// replicas then install the new index and retire the old one; the old
/// shard files are swept after the grace time. A stripe with no live
/// record left is simply forgotten.
pub(super) async fn compact_one(
    node: &Node,
    view: &Arc<View>,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<(), String> {
    {
        let mut last = lock(&node.ec.last_compact);
        if last.is_some_and(|t| t.elapsed() < COMPACT_EVERY) {
            return Ok(());
        }
        *last = Some(Instant::now());
    }
    let (n, v, t) = (node.clone(), view.clone(), table.clone());
    let Some(c) = tokio::task::spawn_blocking(move || pick_compaction(&n, &v, &t))
        .await
        .map_err(|e| e.to_string())??
    else {
        return Ok(());
    };
    let s = &c.stripe;
    if c.live.is_empty() {
        let url = format!("http://{}/v1/ec/stripes/{}", node.opts.meta, s.id);
        let r = node
            .http
            .send(Method::DELETE, &url, None, Bytes::new(), TIMEOUT)
            .await?;
        if !r.status.is_success() {
            return Err(format!(
                "{url}: {} {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ));
        }
        node.ec.stripes_compacted.fetch_add(1, Ordering::Relaxed);
        node.ec
            .bytes_reclaimed
            .fetch_add(s.data_len, Ordering::Relaxed);
        return Ok(());
    }
    if view.ec.is_none() {
        // Re-encoding needs a code; the stripe stays as it is.
        return Ok(());
    }
    let staging = c
        .store
        .path()
        .parent()
        .and_then(Path::parent)
        .map(|d| d.join("ec").join("staging"))
        .ok_or("row directory has no parent")?;
    let file = staging.join(format!("compact-{:016x}", s.id));
    let result = async {
        let f = file.clone();
        let d = staging.clone();
        let out = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            strata_fs::create_dir_all(&d)?;
            strata_fs::create(&f)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{}: {e}", file.display()))?;
        let out = Arc::new(out);
        let reader = StripeReader {
            node,
            table,
            addrs,
            s,
        };
        let mut entries = c.live.clone();
        entries.sort_by_key(|e| e.offset);
        let mut fresh = Vec::with_capacity(entries.len());
        let mut pos = 0u64;
        let mut i = 0;
        while i < entries.len() {
            // A span of neighbouring live needles read at once.
            let start = entries[i].offset;
            let mut end = start + strata_store::format::needle::needle_len(entries[i].len);
            let mut j = i + 1;
            while j < entries.len() {
                let e_end =
                    entries[j].offset + strata_store::format::needle::needle_len(entries[j].len);
                if entries[j].offset > end + 4096 || e_end - start > COMPACT_SPAN {
                    break;
                }
                end = end.max(e_end);
                j += 1;
            }
            let (span, _) = reader.span(start, end - start).await?;
            let mut chunk = Vec::with_capacity(span.len());
            for e in &entries[i..j] {
                let len = strata_store::format::needle::needle_len(e.len);
                let at = (e.offset - start) as usize;
                let mut needle = span[at..at + len as usize].to_vec();
                if !needle_is(&needle, e) {
                    // Damaged shards: read around them.
                    needle = reader
                        .span_around_damage(e.offset, len, |b| needle_is(b, e))
                        .await?
                        .ok_or_else(|| {
                            format!(
                                "stripe {:016x}: the record at offset {} does not read back",
                                s.id, e.offset
                            )
                        })?;
                }
                fresh.push(IndexEntry {
                    offset: pos + chunk.len() as u64,
                    ..*e
                });
                chunk.extend_from_slice(&needle);
            }
            let o = out.clone();
            let at = pos;
            let n = chunk.len() as u64;
            tokio::task::spawn_blocking(move || strata_fs::write_all_at(&o, &chunk, at))
                .await
                .map_err(|e| e.to_string())?
                .map_err(|e| e.to_string())?;
            pos += n;
            i = j;
        }
        let data_len = store_stripe(
            node,
            addrs,
            Source {
                row: s.row,
                part: s.part.clone(),
                segment: s.segment,
                file: file.clone(),
                replaces: vec![s.id],
            },
            &staging,
            &fresh,
        )
        .await?;
        Ok::<u64, String>(data_len)
    }
    .await;
    let _ = strata_fs::remove_file(&file);
    let data_len = result?;
    node.ec.stripes_compacted.fetch_add(1, Ordering::Relaxed);
    node.ec
        .bytes_reclaimed
        .fetch_add(s.data_len.saturating_sub(data_len), Ordering::Relaxed);
    eprintln!(
        "strata server: stripe {:016x} (row {}) compacted: {} live records re-encoded, {} dead bytes reclaimed",
        s.id,
        s.row,
        c.live.len(),
        c.dead_bytes
    );
    Ok(())
}

/// Lets go of the installed stripes the metadata service forgot (a
/// compaction replaced them): once every recorded stripe of the row is
/// installed here (the replacement holds their live records), the index
/// file is deleted and the row's RAM map rebuilt from the indexes left.
pub(super) async fn retire(node: &Node, view: &View) {
    if !view.fetched || view.next_stripe == 0 {
        return;
    }
    let installed = lock(&node.ec.installed).clone();
    let mut rows: HashMap<usize, Vec<u64>> = HashMap::new();
    for (&id, &row) in &installed {
        if id < view.next_stripe && !view.stripes.contains_key(&id) {
            rows.entry(row).or_default().push(id);
        }
    }
    for (row, ids) in rows {
        let pending = view
            .stripes
            .values()
            .any(|s| s.row == row && !installed.contains_key(&s.id));
        if pending {
            continue;
        }
        let Some(store) = node
            .row_here(row)
            .and_then(|r| r.existing(row).ok().flatten())
        else {
            // The row left this node: nothing to read any more.
            let mut inst = lock(&node.ec.installed);
            for id in &ids {
                inst.remove(id);
            }
            continue;
        };
        let keep: Vec<u64> = installed
            .iter()
            .filter(|(id, r)| **r == row && !ids.contains(id))
            .map(|(id, _)| *id)
            .collect();
        let n = node.clone();
        let gone = ids.clone();
        let res = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let dir = store.path().join("stripes");
            for id in &gone {
                let p = dir.join(format!("{id:016x}.idx"));
                match strata_fs::remove_file(&p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("{}: {e}", p.display())),
                }
            }
            sync_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut left = Vec::new();
            for id in keep {
                left.push((id, read_installed(&store, id)?));
            }
            n.ec.reload_row(row, &left);
            Ok(())
        })
        .await
        .map_err(|e| e.to_string())
        .and_then(|r| r);
        match res {
            Ok(()) => {
                let mut inst = lock(&node.ec.installed);
                let mut g = lock(&node.ec.gone);
                for id in &ids {
                    inst.remove(id);
                    g.remove(id);
                }
                node.ec
                    .stripes_retired
                    .fetch_add(ids.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!("strata server: retiring stripes of row {row}: {e}");
            }
        }
    }
}

/// Deletes, on this node's disks, the stripe directories no stripe record
/// names (left by a crash before the stripe was recorded, or replaced by a
/// compaction) once this node has seen them unrecorded for the grace time,
/// and the `.part` files of rebuilds a crash interrupted. Only ids below
/// the service's next id are touched (a service that lost its state
/// deletes nothing).
pub(super) async fn sweep(node: &Node) -> Result<(), String> {
    let grace = node.opts.ec_sweep_grace;
    {
        let every = (grace / 4).clamp(TICK, Duration::from_secs(60));
        let mut last = lock(&node.ec.last_sweep);
        if last.is_some_and(|t| t.elapsed() < every) {
            return Ok(());
        }
        *last = Some(Instant::now());
    }
    // Fresh: a stripe recorded a moment ago must not look unrecorded.
    let view = refresh_view(node).await?;
    if view.next_stripe == 0 {
        return Ok(());
    }
    let n = node.clone();
    tokio::task::spawn_blocking(move || {
        let mut seen_now = HashSet::new();
        for disk in my_disks(&n) {
            let Some(dir) = ec_dir(&n, disk) else {
                continue;
            };
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                let name = e.file_name();
                let Some(id) = name
                    .to_str()
                    .filter(|x| x.len() == 16)
                    .and_then(|x| u64::from_str_radix(x, 16).ok())
                else {
                    continue;
                };
                let path = e.path();
                if view.stripes.contains_key(&id) {
                    sweep_parts(&path, grace);
                    continue;
                }
                if id >= view.next_stripe {
                    continue;
                }
                seen_now.insert(path.clone());
                let first = *lock(&n.ec.unrecorded)
                    .entry(path.clone())
                    .or_insert_with(Instant::now);
                if first.elapsed() < grace {
                    continue;
                }
                match strata_fs::remove_dir_all(&path) {
                    Ok(()) => {
                        let _ = sync_dir(&dir);
                        n.ec.dirs_swept.fetch_add(1, Ordering::Relaxed);
                    }
                    Err(e) => eprintln!("strata server: sweeping {}: {e}", path.display()),
                }
            }
        }
        lock(&n.ec.unrecorded).retain(|p, _| seen_now.contains(p) && p.exists());
    })
    .await
    .map_err(|e| e.to_string())
}

/// Deletes the `.part` and `.tmp` files in a recorded stripe's directory
/// that nothing wrote to for the grace time (a rebuild or a transfer a
/// crash interrupted).
pub(super) fn sweep_parts(dir: &Path, grace: Duration) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        let ext = p.extension().and_then(|x| x.to_str());
        if !matches!(ext, Some("part") | Some("tmp")) {
            continue;
        }
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age >= grace);
        if old {
            let _ = strata_fs::remove_file(&p);
        }
    }
}
