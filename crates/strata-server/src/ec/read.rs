//! A record read from a stripe: the span of the data shards it lies in, read
//! from their holders, and when some are damaged or unreachable, decoded from
//! any K of the K+M (docs/erasure-coding.md, "Degraded reads").

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use axum::body::Bytes;
use strata_ec::{Code, ShardHeader, BLOCK, HEADER_LEN};
use strata_meta::api::StripeRecord;
use strata_placement::{DiskId, PlacementTable};
use strata_store::format::needle::FlagCode;

use super::files::{fetch, file_url, refresh_view};
use super::format::shard_name;
use super::state::{lock, Located};
use crate::node::ClusterNode;

/// Reads `[a, a + n)` of shard `i`'s payload from its disk.
pub(super) async fn shard_range(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    s: &StripeRecord,
    i: usize,
    a: u64,
    n: u64,
) -> Result<Vec<u8>, String> {
    let disk = *s.disks.get(i).ok_or("shard index out of the stripe")?;
    let url = file_url(addrs, disk, s.id, &shard_name(i))
        .ok_or_else(|| format!("disk {disk} has no address"))?;
    let b = fetch(node, &format!("{url}&at={}&len={n}", HEADER_LEN as u64 + a)).await?;
    if b.len() as u64 != n {
        return Err(format!("{url}: {} bytes for {n}", b.len()));
    }
    Ok(b.to_vec())
}

/// Shard range `[a, b)` (block-aligned) of every data shard, from any K
/// shards that answer other than `skip`.
pub(super) async fn decode_from_survivors(
    node: &ClusterNode,
    addrs: &HashMap<DiskId, String>,
    table: &PlacementTable,
    s: &StripeRecord,
    skip: &[usize],
    a: u64,
    b: u64,
) -> Result<Vec<Vec<u8>>, String> {
    let code = Code::new(s.k, s.m).map_err(|e| e.to_string())?;
    // Live disks first, data shards before parity (no decode when all the
    // data shards answer).
    let mut order: Vec<usize> = (0..s.k + s.m).filter(|i| !skip.contains(i)).collect();
    order.sort_by_key(|&i| (!table.is_live(s.disks[i]), i));
    let mut got: Vec<(usize, Vec<u8>)> = Vec::new();
    let mut at = 0;
    while got.len() < s.k && at < order.len() {
        // Ask as many as are still needed at once.
        let want = s.k - got.len();
        let batch: Vec<usize> = order[at..(at + want).min(order.len())].to_vec();
        at += batch.len();
        let futs = batch
            .iter()
            .map(|&i| async move { (i, shard_range(node, addrs, s, i, a, b - a).await) });
        for (i, r) in futures_util::future::join_all(futs).await {
            if let Ok(buf) = r {
                got.push((i, buf));
            }
        }
    }
    if got.len() < s.k {
        return Err(format!(
            "stripe {:016x}: only {} of the {} shards needed answered",
            s.id,
            got.len(),
            s.k
        ));
    }
    strata_ec::decode_blocks(code, &got).map_err(|e| e.to_string())
}

/// The layout of stripe `s` (what `strata_ec::locate` needs of a header).
pub(super) fn layout_of(s: &StripeRecord) -> Result<ShardHeader, String> {
    Ok(ShardHeader {
        code: Code::new(s.k, s.m).map_err(|e| e.to_string())?,
        index: 0,
        stripe: s.id,
        data_len: s.data_len,
        shard_len: s.shard_len,
        payload_crc: 0,
    })
}

/// What reading the bytes of stripe `s` needs: the node (its HTTP client),
/// the placement table (which disks are live) and the disks' addresses.
#[derive(Clone, Copy)]
pub(super) struct StripeReader<'a> {
    pub(super) node: &'a ClusterNode,
    pub(super) table: &'a PlacementTable,
    pub(super) addrs: &'a HashMap<DiskId, String>,
    pub(super) s: &'a StripeRecord,
}

impl StripeReader<'_> {
    /// Bytes `[offset, offset + total)` of the segment the stripe encodes:
    /// from the data shards holding them (one read on each), or decoded
    /// from K other shards where a shard's disk is dead or does not answer.
    /// Returns the bytes and whether any were decoded.
    pub(super) async fn span(&self, offset: u64, total: u64) -> Result<(Vec<u8>, bool), String> {
        let (node, table, addrs, s) = (self.node, self.table, self.addrs, self.s);
        let h = layout_of(s)?;
        check_span(s, offset, total)?;
        let mut out = Vec::with_capacity(total as usize);
        let mut decoded = false;
        for (i, off, n) in strata_ec::locate(&h, offset, total) {
            let healthy = if table.is_live(s.disks[i]) {
                shard_range(node, addrs, s, i, off, n).await.ok()
            } else {
                None
            };
            match healthy {
                Some(b) => out.extend_from_slice(&b),
                None => {
                    decoded = true;
                    let (a, b) = block_range(s, off, n);
                    let data = decode_from_survivors(node, addrs, table, s, &[i], a, b).await?;
                    out.extend_from_slice(&data[i][(off - a) as usize..(off - a + n) as usize]);
                }
            }
        }
        Ok((out, decoded))
    }

    /// Bytes `[offset, offset + total)` when a read of them failed its
    /// checksum: up to M shards hold damage no scrub has rebuilt yet, at
    /// least one of them a data shard the bytes lie in. The span's block
    /// ranges are read once from every shard that answers; then each set
    /// of at most M shards that includes one of the span's data shards is
    /// taken in turn for the damaged ones: the span's parts in those shards
    /// are decoded from K of the others (never from a shard of the set),
    /// the other parts used as read. Decoding each part apart from its own
    /// shard only is not enough: a part decoded with a damaged shard among
    /// its sources carries the damage (docs/reliability.md, finding 23).
    /// The first bytes `ok` accepts (the record's CRC and name), or None
    /// when no set of at most M damaged shards explains the failure.
    pub(super) async fn span_around_damage(
        &self,
        offset: u64,
        total: u64,
        ok: impl Fn(&[u8]) -> bool,
    ) -> Result<Option<Vec<u8>>, String> {
        let s = self.s;
        let h = layout_of(s)?;
        check_span(s, offset, total)?;
        let width = s.k + s.m;
        // Each part: its data shard, its place in that shard, and the
        // block range around it read from every shard (None: no answer).
        let mut parts = Vec::new();
        for (i, off, n) in strata_ec::locate(&h, offset, total) {
            let (a, b) = block_range(s, off, n);
            let reads = (0..width).map(|j| async move {
                if self.table.is_live(s.disks[j]) {
                    shard_range(self.node, self.addrs, s, j, a, b - a)
                        .await
                        .ok()
                } else {
                    None
                }
            });
            let ranges = futures_util::future::join_all(reads).await;
            parts.push((i, (off - a) as usize, n as usize, ranges));
        }
        Ok(explain_damage(h.code, &parts, total, ok))
    }
}

/// A part of a span: its data shard, where it starts in the block range
/// read, its length, and that block range as read from every shard of
/// the stripe (None: no answer).
pub(super) type Part = (usize, usize, usize, Vec<Option<Vec<u8>>>);

/// The span `parts` make up, read around the first set of at most M
/// damaged shards (one of them a data shard of the span) for which `ok`
/// accepts it; None when no such set explains the failure.
pub(super) fn explain_damage(
    code: Code,
    parts: &[Part],
    total: u64,
    ok: impl Fn(&[u8]) -> bool,
) -> Option<Vec<u8>> {
    let mut span: Vec<usize> = parts.iter().map(|p| p.0).collect();
    span.dedup();
    for size in 1..=code.m {
        for damaged in combinations(code.k + code.m, size) {
            if !damaged.iter().any(|j| span.contains(j)) {
                continue;
            }
            if let Some(bytes) = assemble(code, parts, &damaged, total) {
                if ok(&bytes) {
                    return Some(bytes);
                }
            }
        }
    }
    None
}

/// The span's bytes with the shards in `damaged` never read nor decoded
/// from: parts in other shards as read, parts in damaged ones decoded from
/// K of the shards that answered and are not damaged. None when fewer
/// than K such shards answered.
pub(super) fn assemble(
    code: Code,
    parts: &[Part],
    damaged: &[usize],
    total: u64,
) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(total as usize);
    for (i, at, n, ranges) in parts {
        let own = ranges[*i].as_ref().filter(|_| !damaged.contains(i));
        match own {
            Some(b) => out.extend_from_slice(&b[*at..at + n]),
            None => {
                let sources: Vec<(usize, Vec<u8>)> = ranges
                    .iter()
                    .enumerate()
                    .filter(|(j, r)| r.is_some() && !damaged.contains(j))
                    .take(code.k)
                    .map(|(j, r)| (j, r.clone().unwrap_or_default()))
                    .collect();
                if sources.len() < code.k {
                    return None;
                }
                let data = strata_ec::decode_blocks(code, &sources).ok()?;
                out.extend_from_slice(&data[*i][*at..at + n]);
            }
        }
    }
    Some(out)
}

/// Every set of `r` of the numbers `0..n`, in increasing order.
pub(super) fn combinations(n: usize, r: usize) -> Vec<Vec<usize>> {
    let mut out = Vec::new();
    if r == 0 || r > n {
        return out;
    }
    let mut c: Vec<usize> = (0..r).collect();
    loop {
        out.push(c.clone());
        // The rightmost place that can still move right.
        let Some(p) = (0..r).rev().find(|&p| c[p] < n - r + p) else {
            return out;
        };
        c[p] += 1;
        for q in p + 1..r {
            c[q] = c[q - 1] + 1;
        }
    }
}

/// The block-aligned shard range around `[off, off + n)`.
pub(super) fn block_range(s: &StripeRecord, off: u64, n: u64) -> (u64, u64) {
    let a = off / BLOCK * BLOCK;
    let b = ((off + n).div_ceil(BLOCK) * BLOCK).min(s.shard_len);
    (a, b)
}

/// Refuses a span past the end of the segment stripe `s` encodes.
pub(super) fn check_span(s: &StripeRecord, offset: u64, total: u64) -> Result<(), String> {
    if offset + total > s.data_len {
        return Err(format!(
            "stripe {:016x}: bytes {offset}..{} beyond its {} bytes",
            s.id,
            offset + total,
            s.data_len
        ));
    }
    Ok(())
}

/// Reads the record of `bucket/key` from stripe `loc.stripe`: the needle's
/// bytes from the data shard holding them (one read on that shard's
/// disk), or decoded from K other shards when that disk does not answer.
/// Returns the record (kind byte and payload).
pub(crate) async fn read_record(
    node: &ClusterNode,
    loc: Located,
    bucket: &str,
    key: &str,
) -> Result<Bytes, String> {
    let map = node.map().ok_or("no placement table yet")?;
    let mut view = node.ec.view();
    // A shard on a dead disk may have been rebuilt since the view was
    // fetched: fetch it again before decoding.
    let stale = view
        .stripes
        .get(&loc.stripe)
        .is_none_or(|s| s.disks.iter().any(|&d| !map.table.is_live(d)));
    if stale {
        if let Ok(v) = refresh_view(node).await {
            view = v;
        }
    }
    // A stripe a compaction replaced stays readable here until this
    // replica installs the new one (its files stay for the sweep's grace).
    let gone = lock(&node.ec.gone).get(&loc.stripe).cloned();
    let s = view
        .stripes
        .get(&loc.stripe)
        .or(gone.as_ref())
        .ok_or_else(|| format!("stripe {:016x} is not recorded", loc.stripe))?;
    let total = strata_store::format::needle::needle_len(loc.len);
    let check = |needle: &[u8]| -> Result<Bytes, String> {
        // A stripe holds segment bytes as they were: flags of any code,
        // meaningless there (the stripe index says what is live).
        let (_, data) = strata_store::format::needle::parse(needle, FlagCode::Ignored)
            .map_err(|e| format!("stripe {:016x} offset {}: {e}", s.id, loc.offset))?;
        let d = strata_proto::row::decode(data)
            .ok_or_else(|| format!("stripe {:016x} offset {}: no name header", s.id, loc.offset))?;
        if d.bucket != bucket || d.key != key || d.stamp != loc.stamp {
            return Err(format!(
                "stripe {:016x} offset {}: holds another record",
                s.id, loc.offset
            ));
        }
        let at = data.len() - d.record.len();
        Ok(Bytes::copy_from_slice(&data[at..]))
    };
    let reader = StripeReader {
        node,
        table: &map.table,
        addrs: &map.addr_of_disk,
        s,
    };
    let (needle, mut degraded) = reader.span(loc.offset, total).await?;
    let mut got = check(&needle);
    if got.is_err() {
        // Damaged shards (the scrub will rebuild them): read around them.
        let around = reader
            .span_around_damage(loc.offset, total, |b| check(b).is_ok())
            .await?;
        if let Some(needle) = around {
            degraded = true;
            got = check(&needle);
        }
    }
    let counter = if degraded {
        &node.ec.reads_degraded
    } else {
        &node.ec.reads_healthy
    };
    counter.fetch_add(1, Ordering::Relaxed);
    got
}

// ------------------------------------------------------------- the task

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combinations_are_every_set_once() {
        assert_eq!(
            combinations(4, 2),
            vec![
                vec![0, 1],
                vec![0, 2],
                vec![0, 3],
                vec![1, 2],
                vec![1, 3],
                vec![2, 3]
            ]
        );
        assert_eq!(combinations(14, 4).len(), 1001);
        assert_eq!(combinations(3, 3), vec![vec![0, 1, 2]]);
        assert!(combinations(3, 4).is_empty());
        assert!(combinations(3, 0).is_empty());
    }

    /// A span over the end of data shard 0 and the start of data shard 1
    /// of a 4+2 stripe reads back around any two damaged shards (data or
    /// parity) when one of them holds part of it, and not around three.
    #[test]
    fn a_span_reads_around_up_to_m_damaged_shards() {
        let code = Code::new(4, 2).unwrap();
        let block = BLOCK as usize;
        let shard_len = 8 * block;
        let data: Vec<Vec<u8>> = (0..4)
            .map(|i| {
                (0..shard_len)
                    .map(|x| (x * 31 + i * 7 + x / 251) as u8)
                    .collect()
            })
            .collect();
        let mut shards = data.clone();
        shards.extend(strata_ec::encode_blocks(code, &data).unwrap());
        // The span: the last 100 bytes of shard 0, the first 300 of shard 1.
        let want: Vec<u8> = [&data[0][shard_len - 100..], &data[1][..300]].concat();
        let ok = |b: &[u8]| b == want.as_slice();
        let parts_of = |shards: &[Vec<u8>]| -> Vec<Part> {
            // The block ranges around the parts (block_range).
            let tail_len = 100usize.div_ceil(block) * block;
            let tail = |s: &Vec<u8>| Some(s[shard_len - tail_len..].to_vec());
            let head = |s: &Vec<u8>| Some(s[..300usize.div_ceil(block) * block].to_vec());
            vec![
                (0, tail_len - 100, 100, shards.iter().map(tail).collect()),
                (1, 0, 300, shards.iter().map(head).collect()),
            ]
        };
        // Damage where the span lies: the byte 50 from shard 0's end (in
        // its part), byte 10 of shard 1 (in its part), and both in every
        // other shard (in the blocks a decode of either part reads).
        let hit = |s: &mut Vec<u8>, i: usize| {
            if i != 1 {
                s[shard_len - 50] ^= 0x41;
            }
            if i != 0 {
                s[10] ^= 0x41;
            }
        };
        for damaged in [
            vec![0],
            vec![1],
            vec![0, 1],
            vec![0, 4],
            vec![1, 5],
            vec![0, 2],
        ] {
            let mut bad = shards.clone();
            for &i in &damaged {
                hit(&mut bad[i], i);
            }
            let got = explain_damage(code, &parts_of(&bad), 400, ok);
            assert_eq!(got.as_deref(), Some(want.as_slice()), "damaged {damaged:?}");
        }
        // A shard that did not answer counts against M.
        let mut bad = shards.clone();
        hit(&mut bad[0], 0);
        hit(&mut bad[1], 1);
        let mut parts = parts_of(&bad);
        for p in &mut parts {
            p.3[5] = None;
        }
        assert_eq!(explain_damage(code, &parts, 400, ok), None);
        // Three damaged shards are more than M = 2.
        let mut bad = shards.clone();
        for i in [0, 1, 2] {
            hit(&mut bad[i], i);
        }
        assert_eq!(explain_damage(code, &parts_of(&bad), 400, ok), None);
    }
}
