//! Rebuilding the shards of stripes whose disk died that the table now places
//! on this node (every node rebuilds its share at once, FDS), decoded chunk
//! by chunk from the survivors and made durable with the stripe's index
//! beside them.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use strata_ec::{Code, ShardHeader, HEADER_LEN};
use strata_meta::api::ShardMove;
use strata_meta::api::StripeRecord;
use strata_placement::{DiskId, PlacementTable};

use super::files::{fetch, file_url, my_disks, stripe_dir, TIMEOUT};
use super::format::{shard_name, sync_dir, write_atomic};
use super::read::decode_from_survivors;
use super::state::View;
use crate::node::ClusterNode;

type Node = Arc<ClusterNode>;

/// Bytes of each shard decoded at a time by a rebuild.
pub(super) const REBUILD_CHUNK: u64 = 1 << 20;

/// The disk a lost shard of `s` is rebuilt on: a live disk on a node
/// holding no other shard of the stripe, else (fewer live nodes than K+M)
/// a live disk whose node holds the fewest — then one node holds two
/// shards of the stripe, which still survives the loss of any M shards'
/// worth of disks that do not include it; ties by a hash of (stripe,
/// shard), so the rebuilds of one lost disk spread over every other disk.
pub fn rebuild_target(table: &PlacementTable, s: &StripeRecord, index: usize) -> Option<DiskId> {
    let node_of = |d: DiskId| table.disk(d).map(|x| x.node);
    let mut count: HashMap<_, usize> = HashMap::new();
    for (j, &d) in s.disks.iter().enumerate() {
        if j != index && table.is_live(d) {
            *count.entry(node_of(d)).or_default() += 1;
        }
    }
    table
        .disks()
        .iter()
        .filter(|d| table.is_live(d.id))
        .min_by_key(|d| {
            let h = strata_placement::jump_hash(
                s.id.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ index as u64 ^ u64::from(d.id.0) << 32,
                1 << 30,
            );
            (count.get(&Some(d.node)).copied().unwrap_or(0), h)
        })
        .map(|d| d.id)
}

/// Rebuilds the lost shards this node's disks are the target of.
pub(super) async fn rebuild(
    node: &Node,
    view: &View,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) {
    let mine = my_disks(node);
    let mut todo = Vec::new();
    for s in view.stripes.values() {
        for (i, &d) in s.disks.iter().enumerate() {
            if table.is_live(d) {
                continue;
            }
            if let Some(t) = rebuild_target(table, s, i).filter(|t| mine.contains(t)) {
                todo.push((s.clone(), i, t));
            }
        }
    }
    for (s, i, target) in todo {
        match rebuild_shard(node, &s, i, target, table, addrs).await {
            Ok(bytes) => {
                let url = format!("http://{}/v1/ec/stripes/{}/shard", node.opts.meta, s.id);
                let mv = ShardMove {
                    index: i,
                    disk: target,
                };
                match node
                    .http
                    .post_json::<_, serde_json::Value>(&url, &mv, TIMEOUT)
                    .await
                {
                    Ok(_) => {
                        node.ec.shards_rebuilt.fetch_add(1, Ordering::Relaxed);
                        node.ec.bytes_rebuilt.fetch_add(bytes, Ordering::Relaxed);
                    }
                    Err(e) => {
                        node.ec.errors.fetch_add(1, Ordering::Relaxed);
                        eprintln!("strata server: recording rebuilt shard: {e}");
                    }
                }
            }
            Err(e) => {
                node.ec.errors.fetch_add(1, Ordering::Relaxed);
                eprintln!(
                    "strata server: rebuilding shard {i} of stripe {:016x}: {e}",
                    s.id
                );
            }
        }
    }
}

/// Writes shard `index` of `s` on this node's disk `target` from K other
/// shards, a megabyte of each at a time; returns its payload bytes.
pub(super) async fn rebuild_shard(
    node: &Node,
    s: &StripeRecord,
    index: usize,
    target: DiskId,
    table: &PlacementTable,
    addrs: &HashMap<DiskId, String>,
) -> Result<u64, String> {
    let code = Code::new(s.k, s.m).map_err(|e| e.to_string())?;
    let dir = stripe_dir(node, target, s.id).ok_or("target disk is not here")?;
    let path = dir.join(shard_name(index));
    let part = dir.join(format!("{}.part", shard_name(index)));
    {
        let d = dir.clone();
        let p = part.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            strata_fs::create_dir_all(&d)?;
            strata_fs::set_len(&strata_fs::create(&p)?, HEADER_LEN as u64)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    }
    let mut crc = 0u32;
    let mut at = 0u64;
    while at < s.shard_len {
        let n = REBUILD_CHUNK.min(s.shard_len - at);
        let data = decode_from_survivors(node, addrs, table, s, &[index], at, at + n).await?;
        let piece = if index < s.k {
            data[index].clone()
        } else {
            strata_ec::encode_blocks(code, &data)
                .map_err(|e| e.to_string())?
                .swap_remove(index - s.k)
        };
        crc = crc32c::crc32c_append(crc, &piece);
        let p = part.clone();
        tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let f = strata_fs::open(&p, std::fs::OpenOptions::new().write(true))?;
            strata_fs::write_all_at(&f, &piece, HEADER_LEN as u64 + at)
        })
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
        at += n;
        // The throttle (`--ec-rebuild-rate`): the disk stays free for
        // foreground reads.
        let rate = node.opts.ec_rebuild_bytes_per_sec.max(1) as f64;
        tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate)).await;
    }
    let h = ShardHeader {
        code,
        index,
        stripe: s.id,
        data_len: s.data_len,
        shard_len: s.shard_len,
        payload_crc: crc,
    };
    let head = strata_ec::header_bytes(&h);
    // The index file travels with every shard.
    let index_bytes = {
        let mut got = None;
        for (j, &d) in s.disks.iter().enumerate() {
            if j == index {
                continue;
            }
            if let Some(url) = file_url(addrs, d, s.id, "index") {
                if let Ok(b) = fetch(node, &url).await {
                    got = Some(b);
                    break;
                }
            }
        }
        got.ok_or("no shard holder gave the stripe index")?
    };
    tokio::task::spawn_blocking(move || finish_rebuilt(&dir, &part, &path, &head, &index_bytes))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| e.to_string())?;
    Ok(s.shard_len)
}

/// Makes a rebuilt shard durable in its stripe directory `dir`: the
/// stripe's index beside it first (whole, [`write_atomic`]), then the
/// shard's header `head` into its part file, fsync, rename to `path`,
/// directory fsync. After a power cut the shard under its name is whole
/// and has its index beside it, or it is absent (and rebuilt again).
pub(super) fn finish_rebuilt(
    dir: &Path,
    part: &Path,
    path: &Path,
    head: &[u8],
    index: &[u8],
) -> std::io::Result<()> {
    write_atomic(&dir.join("index"), index)?;
    let f = strata_fs::open(part, std::fs::OpenOptions::new().write(true))?;
    strata_fs::write_all_at(&f, head, 0)?;
    strata_fs::sync_all(&f)?;
    strata_fs::rename(part, path)?;
    sync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ec::format::{encode_index, IndexEntry};

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31) ^ seed)
            .collect()
    }

    /// A rebuilt shard made durable, the power cut after each file
    /// operation in turn: under its name the shard is whole and its
    /// stripe's index is beside it, whole; once done, both are there.
    #[test]
    #[allow(clippy::disallowed_methods)] // the part file and acknowledgements
    fn a_rebuilt_shard_is_whole_with_its_index_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let payload = pattern(2 * 4096, 3);
        let head = [0xA5u8; HEADER_LEN];
        let index = encode_index(
            9,
            4,
            &[IndexEntry {
                key: 1,
                alt: 0,
                len: 10,
                stamp: 5,
                offset: 0,
            }],
        );
        let mut whole = head.to_vec();
        whole.extend_from_slice(&payload);
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |root| {
                    // What the rebuild's pieces left: the part file with a
                    // blank header, the payload behind it.
                    let mut b = vec![0u8; HEADER_LEN];
                    b.extend_from_slice(&payload);
                    std::fs::write(root.join("shard-02.part"), b).unwrap();
                },
                |root| {
                    finish_rebuilt(
                        root,
                        &root.join("shard-02.part"),
                        &root.join("shard-02"),
                        &head,
                        &index,
                    )?;
                    std::fs::write(root.join("ack"), b"")
                },
                |root, n| {
                    let acked = root.join("ack").exists();
                    match std::fs::read(root.join("shard-02")) {
                        Ok(b) => {
                            assert!(b == whole, "{how:?} step {n}: shard of {} bytes", b.len());
                            let i = std::fs::read(root.join("index")).unwrap_or_else(|e| {
                                panic!("{how:?} step {n}: a shard without its index: {e}")
                            });
                            assert!(i == index, "{how:?} step {n}: a torn index");
                        }
                        Err(e) => assert!(!acked, "{how:?} step {n}: done, then gone: {e}"),
                    }
                },
            )
            .unwrap();
            assert!(steps > 6, "{how:?}: {steps} steps");
        }
    }
}
