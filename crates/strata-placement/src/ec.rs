//! Erasure-coded rows: the disks a Reed-Solomon stripe of K data and M
//! parity shards may be written to (docs/erasure-coding.md, "Placement").
//!
//! An EC row names K+M live disks on K+M distinct nodes. As the replica
//! rows do (FDS), the rows are built so that every pair of live disks on
//! different nodes shares at least one EC row: when a disk dies, the shards
//! it held are rebuilt by writers on every other disk, not a few.

use std::collections::HashSet;

use crate::table::{LoadQueue, PlacementTable};
use crate::{DiskId, PlacementError};

/// The erasure-coded rows of `table` for stripes `width` (= K+M) shards
/// wide, over its live disks. Deterministic for a given table.
///
/// Greedy pair cover: for every pair of live disks on different nodes not
/// yet in a common row, a row is made of the pair and `width − 2` more
/// disks, each the least loaded (fewest EC rows so far) on a node not yet
/// in the row; every pair of the new row is then covered. Fails when fewer
/// than `width` distinct nodes have a live disk.
pub fn ec_rows(table: &PlacementTable, width: usize) -> Result<Vec<Vec<DiskId>>, PlacementError> {
    let live: Vec<usize> = (0..table.disks.len())
        .filter(|&i| table.is_live(table.disks[i].id))
        .collect();
    let nodes: HashSet<_> = live.iter().map(|&i| table.disks[i].node).collect();
    if width < 2 || nodes.len() < width {
        return Err(PlacementError::TooFewNodes {
            nodes: nodes.len(),
            replication: width,
        });
    }
    let n = table.disks.len();
    let mut covered = vec![false; n * n];
    let mut load = vec![0u64; n];
    let mut rows = Vec::new();
    for (ai, &a) in live.iter().enumerate() {
        for &b in &live[ai + 1..] {
            if table.disks[a].node == table.disks[b].node || covered[a * n + b] {
                continue;
            }
            let mut row = vec![a, b];
            let mut queue = LoadQueue::new(&load, table.seed ^ (rows.len() as u64));
            while row.len() < width {
                let in_row: HashSet<_> = row.iter().map(|&i| table.disks[i].node).collect();
                let pick = queue.take_least(
                    |i| table.is_live(table.disks[i].id) && !in_row.contains(&table.disks[i].node),
                    rows.len() as u64,
                );
                match pick {
                    Some(i) => row.push(i),
                    None => {
                        return Err(PlacementError::TooFewNodes {
                            nodes: nodes.len(),
                            replication: width,
                        })
                    }
                }
            }
            for &x in &row {
                load[x] += 1;
                for &y in &row {
                    covered[x * n + y] = true;
                }
            }
            rows.push(row.iter().map(|&i| table.disks[i].id).collect());
        }
    }
    Ok(rows)
}

/// The rebuild of the shards that `p.failed_disks` disks of one node held,
/// over the stripe layout [`ec_rows`] makes for K+M = `k + m` on `p.disks`
/// disks (what [`crate::recovery::simulate`] does for replicas).
///
/// Each failed disk's `p.bytes_lost / p.failed_disks` bytes are spread
/// evenly over its EC rows: one lost shard per affected row. A lost shard
/// of S bytes is rebuilt by reading S from K surviving shards of its row
/// (the K least busy so far) and writing S to the least busy live disk on
/// a node the row does not use (never the failed node). Every affected row
/// is rebuilt at once, each disk at `p.disk_bytes_per_sec`: the time is the
/// busiest disk's bytes over its rate (detection not included). Reading K
/// shards per lost one is why a stripe's rebuild moves K+1 times the lost
/// bytes where a replica's moves 2 times.
pub fn simulate_ec(
    p: &crate::recovery::SimParams,
    k: usize,
    m: usize,
) -> Result<crate::recovery::SimResult, PlacementError> {
    let per_node = p.disks_per_node.max(1);
    let disks: Vec<(DiskId, crate::NodeId)> = (0..p.disks)
        .map(|i| (DiskId(i as u32), crate::NodeId((i / per_node) as u32)))
        .collect();
    let nodes = p.disks.div_ceil(per_node);
    let table = PlacementTable::build(&disks, 3.min(nodes).max(1), crate::DEFAULT_TRACT_SIZE, 7)?;
    let rows = ec_rows(&table, k + m)?;
    let failed: HashSet<DiskId> = (0..p.failed_disks.min(per_node).min(p.disks))
        .map(|i| DiskId(i as u32))
        .collect();
    let node_of = |d: DiskId| d.0 as usize / per_node;
    let failed_node = 0usize;
    let mut rows_of = vec![0usize; p.disks];
    for r in &rows {
        for d in r {
            rows_of[d.0 as usize] += 1;
        }
    }
    let per_failed = p.bytes_lost as f64 / failed.len().max(1) as f64;
    let mut work = vec![0f64; p.disks];
    let (mut rebuilt, mut lost_rows) = (0, 0);
    for r in &rows {
        let lost: Vec<DiskId> = r.iter().copied().filter(|d| failed.contains(d)).collect();
        if lost.is_empty() {
            continue;
        }
        let mut survivors: Vec<DiskId> =
            r.iter().copied().filter(|d| !failed.contains(d)).collect();
        if survivors.len() < k {
            lost_rows += 1;
            continue;
        }
        let in_row: HashSet<usize> = r.iter().map(|&d| node_of(d)).collect();
        for l in lost {
            let bytes = per_failed / rows_of[l.0 as usize].max(1) as f64;
            // The K least busy survivors read their shard's range.
            survivors.sort_by(|a, b| {
                work[a.0 as usize]
                    .total_cmp(&work[b.0 as usize])
                    .then(a.cmp(b))
            });
            for s in &survivors[..k] {
                work[s.0 as usize] += bytes;
            }
            // The least busy disk on a node the row does not use writes it.
            let target = (0..p.disks)
                .filter(|&i| {
                    let n = i / per_node;
                    n != failed_node && !in_row.contains(&n)
                })
                .min_by(|&a, &b| work[a].total_cmp(&work[b]).then(a.cmp(&b)));
            match target {
                Some(t) => {
                    work[t] += bytes;
                    rebuilt += 1;
                }
                None => lost_rows += 1,
            }
        }
    }
    let involved: Vec<f64> = work.iter().copied().filter(|&w| w > 0.0).collect();
    let busiest = involved.iter().copied().fold(0.0, f64::max);
    let mean = if involved.is_empty() {
        0.0
    } else {
        involved.iter().sum::<f64>() / involved.len() as f64
    };
    Ok(crate::recovery::SimResult {
        rows: rows.len(),
        rows_recovered: rebuilt,
        disks_involved: involved.len(),
        busiest_disk_bytes: busiest as u64,
        mean_disk_bytes: mean,
        seconds: busiest / p.disk_bytes_per_sec.max(1.0),
        lost_rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeId;
    use proptest::prelude::*;

    #[test]
    fn a_lost_disk_is_rebuilt_by_many_and_faster_on_more_disks() {
        let params = |disks| crate::recovery::SimParams {
            disks,
            disks_per_node: 2,
            failed_disks: 1,
            bytes_lost: 100 << 30,
            disk_bytes_per_sec: 100e6,
            replication: 3,
        };
        let small = simulate_ec(&params(24), 4, 2).expect("24 disks");
        let big = simulate_ec(&params(96), 4, 2).expect("96 disks");
        for r in [&small, &big] {
            assert_eq!(r.lost_rows, 0);
            assert!(r.rows_recovered > 0);
            // Every lost byte read K times and written once: the total work
            // is (K+1) x the bytes lost, whoever does it.
            let total = r.mean_disk_bytes * r.disks_involved as f64;
            let want = 5.0 * (100u64 << 30) as f64;
            assert!((total - want).abs() / want < 1e-6, "{total} vs {want}");
        }
        // Every disk but the failed one's node takes part, and more disks
        // rebuild faster.
        assert!(big.disks_involved > small.disks_involved);
        assert!(
            big.seconds < small.seconds,
            "{} vs {}",
            big.seconds,
            small.seconds
        );
    }

    fn table(nodes: u32, disks_per_node: u32) -> PlacementTable {
        let disks: Vec<(DiskId, NodeId)> = (0..nodes * disks_per_node)
            .map(|d| (DiskId(d), NodeId(d / disks_per_node)))
            .collect();
        PlacementTable::build(&disks, 3.min(nodes as usize), crate::DEFAULT_TRACT_SIZE, 7)
            .expect("table")
    }

    proptest! {
        #[test]
        fn rows_are_distinct_nodes_and_cover_every_pair(
            nodes in 3u32..14, per in 1u32..3, width in 2usize..8,
        ) {
            let t = table(nodes, per);
            let res = ec_rows(&t, width);
            if (nodes as usize) < width {
                prop_assert!(res.is_err());
                return Ok(());
            }
            let rows = res.expect("rows");
            let node = |d: DiskId| t.disk(d).map(|x| x.node);
            for r in &rows {
                prop_assert_eq!(r.len(), width);
                let ns: HashSet<_> = r.iter().map(|&d| node(d)).collect();
                prop_assert_eq!(ns.len(), width);
            }
            for a in t.disks() {
                for b in t.disks() {
                    if a.node != b.node {
                        prop_assert!(rows.iter().any(|r| r.contains(&a.id) && r.contains(&b.id)),
                            "pair {} {} uncovered", a.id, b.id);
                    }
                }
            }
        }
    }

    #[test]
    fn too_few_nodes_is_an_error() {
        let t = table(5, 1);
        assert!(matches!(
            ec_rows(&t, 6),
            Err(PlacementError::TooFewNodes { nodes: 5, .. })
        ));
    }
}
