//! Property tests of the placement table's promises, against a brute-force
//! model of each promise.

use std::collections::{HashMap, HashSet};

use proptest::prelude::*;
use strata_placement::recovery::{plan, simulate, SimParams};
use strata_placement::{
    object_hash, DiskId, DiskState, NodeId, PlacementError, PlacementTable, DEFAULT_TRACT_SIZE,
};

/// A cluster: `nodes[i]` disks on node i.
fn disks(nodes: &[usize]) -> Vec<(DiskId, NodeId)> {
    let mut out = Vec::new();
    let mut id = 0;
    for (n, &k) in nodes.iter().enumerate() {
        for _ in 0..k {
            out.push((DiskId(id), NodeId(n as u32)));
            id += 1;
        }
    }
    out
}

fn node_of(t: &PlacementTable) -> HashMap<DiskId, NodeId> {
    t.disks().iter().map(|d| (d.id, d.node)).collect()
}

/// Every row: R distinct disks on R distinct nodes.
fn assert_rows_well_formed(t: &PlacementTable) {
    let nodes = node_of(t);
    for (i, row) in t.rows().enumerate() {
        assert_eq!(row.len(), t.replication());
        let ns: HashSet<NodeId> = row.iter().map(|d| nodes[d]).collect();
        assert_eq!(ns.len(), row.len(), "row {i} {row:?} repeats a node");
    }
}

/// Every pair of live disks on different nodes shares a row (brute force).
fn assert_pairs_covered(t: &PlacementTable) {
    let nodes = node_of(t);
    let live: Vec<DiskId> = t
        .disks()
        .iter()
        .filter(|d| d.state == DiskState::Live)
        .map(|d| d.id)
        .collect();
    for &a in &live {
        for &b in &live {
            if a < b && nodes[&a] != nodes[&b] {
                assert!(
                    t.rows().any(|r| r.contains(&a) && r.contains(&b)),
                    "pair {a} {b} shares no row"
                );
            }
        }
    }
}

fn cluster() -> impl Strategy<Value = (Vec<usize>, usize)> {
    (
        prop::collection::vec(1usize..=4, 3..=8),
        prop::sample::select(vec![1usize, 2, 3, 3, 3]),
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn built_table_keeps_its_promises((nodes, r) in cluster(), seed in any::<u64>()) {
        let t = PlacementTable::build(&disks(&nodes), r, DEFAULT_TRACT_SIZE, seed).unwrap();
        prop_assert_eq!(t.version(), 1);
        assert_rows_well_formed(&t);
        if r >= 2 {
            assert_pairs_covered(&t);
        }
        // Balance: with equal nodes, every disk within 2 rows of every other.
        if nodes.iter().all(|&k| k == nodes[0]) {
            let counts = t.rows_per_disk();
            let max = counts.values().max().copied().unwrap_or(0);
            let min = counts.values().min().copied().unwrap_or(0);
            prop_assert!(max - min <= 2, "unbalanced: min {} max {}", min, max);
        }
        // Serialized and read back, the table is the same.
        let json = serde_json::to_string(&t).unwrap();
        let back: PlacementTable = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, t);
    }

    #[test]
    fn replacing_a_dead_node_moves_only_its_slots((nodes, r) in cluster(), seed in any::<u64>(), victim in 0usize..8) {
        prop_assume!(nodes.len() > r);
        let t = PlacementTable::build(&disks(&nodes), r, DEFAULT_TRACT_SIZE, seed).unwrap();
        let victim = NodeId((victim % nodes.len()) as u32);
        let dead: Vec<DiskId> = t.disks().iter().filter(|d| d.node == victim).map(|d| d.id).collect();
        let (next, mv) = t.replace_disks(&dead, DiskState::Dead).unwrap();
        prop_assert_eq!(next.version(), 2);
        assert_rows_well_formed(&next);
        // No row names a dead disk any more: enough nodes remain.
        for row in next.rows() {
            for d in &dead {
                prop_assert!(!row.contains(d));
            }
        }
        prop_assert_eq!(next.rows_under_replicated(), 0);
        // Exactly the dead disks' slots changed, each to a live disk.
        let mut changed = 0;
        for (i, (a, b)) in t.rows().zip(next.rows()).enumerate() {
            for (x, y) in a.iter().zip(b) {
                if x != y {
                    changed += 1;
                    prop_assert!(dead.contains(x), "row {} slot {} -> {} moved a live disk", i, x, y);
                    prop_assert!(next.is_live(*y));
                }
            }
        }
        prop_assert_eq!(changed, mv.changes.len());
        if r >= 2 {
            assert_pairs_covered(&next);
        }
        // Recovery: every moved slot has a surviving source in its row.
        let p = plan(&t, &next, &mv);
        prop_assert!(p.lost_rows.is_empty() || r == 1);
        for tr in &p.transfers {
            prop_assert!(next.row(tr.row).contains(&tr.source));
            prop_assert!(t.row(tr.row).contains(&tr.source));
            prop_assert!(next.row(tr.row).contains(&tr.target));
            prop_assert!(next.is_live(tr.source));
        }
        // Spread: no disk receives more than its fair share plus slack (when
        // the node constraint leaves a real choice: equal nodes, R+2 of them).
        let spread_matters = nodes.iter().all(|&k| k == nodes[0]) && nodes.len() >= r + 2;
        let eligible = next.disks().iter().filter(|d| d.state == DiskState::Live).count();
        let mut recv: HashMap<DiskId, usize> = HashMap::new();
        for c in &mv.changes {
            *recv.entry(c.to).or_default() += 1;
        }
        let fair = mv.changes.len().div_ceil(eligible);
        for (d, n) in recv {
            prop_assert!(!spread_matters ||n <= fair + 2, "disk {} receives {} rows, fair share {}", d, n, fair);
        }
    }

    #[test]
    fn adding_a_node_moves_data_only_to_it((nodes, r) in cluster(), seed in any::<u64>(), k in 1usize..=3) {
        let base = disks(&nodes);
        let t = PlacementTable::build(&base, r, DEFAULT_TRACT_SIZE, seed).unwrap();
        let new_node = NodeId(nodes.len() as u32);
        let new: Vec<DiskId> = (0..k).map(|i| DiskId((base.len() + i) as u32)).collect();
        let (next, mv) = t.add_node(new_node, &new).unwrap();
        prop_assert_eq!(next.version(), 2);
        assert_rows_well_formed(&next);
        if r >= 2 {
            assert_pairs_covered(&next);
        }
        // Old rows: every changed slot now holds a new disk.
        for (a, b) in t.rows().zip(next.rows()) {
            for (x, y) in a.iter().zip(b) {
                if x != y {
                    prop_assert!(new.contains(y), "{} -> {} is not a move to the new node", x, y);
                }
            }
        }
        // Rows are appended only when a tiny table has no slot to spare.
        prop_assert_eq!(next.row_count(), t.row_count() + mv.new_rows.len());
        if r >= 3 && nodes.len() >= 5 && nodes.iter().all(|&k| k == nodes[0]) {
            prop_assert_eq!(next.row_count(), t.row_count(), "no object changes row");
            // The new disks hold about an average share.
            let counts = next.rows_per_disk();
            let avg = (next.row_count() * r) as f64 / counts.len() as f64;
            for d in &new {
                prop_assert!(counts[d] as f64 >= avg * 0.6 - 2.0, "new disk {} has {} rows, avg {}", d, counts[d], avg);
            }
        }
        // Objects: an object either keeps its row or moves to an appended row.
        for i in 0..2000u32 {
            let h = object_hash("b", &i.to_string());
            let (a, b) = (t.row_of(h), next.row_of(h));
            prop_assert!(a == b || b >= t.row_count());
        }
    }

    #[test]
    fn remove_node_moves_only_its_slots((nodes, r) in cluster(), seed in any::<u64>()) {
        prop_assume!(nodes.len() > r);
        let t = PlacementTable::build(&disks(&nodes), r, DEFAULT_TRACT_SIZE, seed).unwrap();
        let (next, mv) = t.remove_node(NodeId(0)).unwrap();
        assert_rows_well_formed(&next);
        for c in &mv.changes {
            prop_assert_eq!(t.disk(c.from).unwrap().node, NodeId(0));
        }
        prop_assert_eq!(next.rows_under_replicated(), 0);
        // Removed disks can serve as drain sources, so nothing is lost even at R=1.
        prop_assert!(plan(&t, &next, &mv).lost_rows.is_empty());
    }

    #[test]
    fn tracts_fall_on_consecutive_rows(seed in any::<u64>(), key in "[a-z]{1,12}", len in 0u64..(100 << 20)) {
        let t = PlacementTable::build(&disks(&[2, 2, 2, 2]), 3, DEFAULT_TRACT_SIZE, seed).unwrap();
        let h = object_hash("bucket", &key);
        let rows = t.row_count();
        let meta = t.tract_row(h, -1);
        prop_assert_eq!(meta, t.row_of(h));
        for tract in 0..t.tract_count(len) as i64 {
            prop_assert_eq!(t.tract_row(h, tract), (meta + 1 + tract as usize) % rows);
        }
    }
}

#[test]
fn too_few_nodes_is_refused() {
    let err = PlacementTable::build(&disks(&[3, 3]), 3, DEFAULT_TRACT_SIZE, 1).unwrap_err();
    assert_eq!(
        err,
        PlacementError::TooFewNodes {
            nodes: 2,
            replication: 3
        }
    );
}

#[test]
fn unrecoverable_rows_are_reported_not_hidden() {
    // 3 nodes, R=3: losing one node leaves nowhere to put a third copy.
    let t = PlacementTable::build(&disks(&[1, 1, 1]), 3, DEFAULT_TRACT_SIZE, 1).unwrap();
    let (next, mv) = t.replace_disks(&[DiskId(0)], DiskState::Dead).unwrap();
    assert_eq!(next.rows_under_replicated(), next.row_count());
    assert_eq!(mv.unrepaired_rows.len(), next.row_count());
    assert!(mv.changes.is_empty());
}

#[test]
fn corrupt_table_json_is_rejected() {
    let t = PlacementTable::build(&disks(&[1, 1, 1]), 3, DEFAULT_TRACT_SIZE, 1).unwrap();
    let mut v: serde_json::Value = serde_json::to_value(&t).unwrap();
    v["rows"][0][1] = serde_json::json!(0);
    assert!(serde_json::from_value::<PlacementTable>(v.clone()).is_err());
    v["format"] = serde_json::json!(99);
    assert!(serde_json::from_value::<PlacementTable>(v).is_err());
}

#[test]
fn recovery_time_falls_as_the_cluster_grows() {
    let run = |disks| {
        simulate(&SimParams {
            disks,
            disks_per_node: 5,
            failed_disks: 1,
            bytes_lost: 47_000_000_000,
            disk_bytes_per_sec: 80e6,
            replication: 3,
        })
        .unwrap()
    };
    let small = run(50);
    let big = run(200);
    assert_eq!(small.lost_rows, 0);
    assert!(big.disks_involved > small.disks_involved);
    assert!(
        big.seconds < small.seconds / 3.0,
        "{} vs {}",
        big.seconds,
        small.seconds
    );
}
