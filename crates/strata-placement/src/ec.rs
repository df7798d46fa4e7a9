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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NodeId;
    use proptest::prelude::*;

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
