//! Recovery planning (who streams which row to whom) and a recovery
//! simulation that sets a table's spread of work against FDS's figures.

use serde::{Deserialize, Serialize};

use crate::hash::mix3;
use crate::{DiskId, DiskState, Movement, NodeId, PlacementError, PlacementTable};

/// One row's data to copy: `source` (a surviving replica) streams the row's
/// segments to `target` (the disk that took a lost disk's place).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transfer {
    /// The row.
    pub row: usize,
    /// A replica of the row that holds the data.
    pub source: DiskId,
    /// The disk that needs it.
    pub target: DiskId,
}

/// Every transfer needed to bring the table back to full replication.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecoveryPlan {
    /// The table version the plan leads to.
    pub version: u64,
    /// One transfer per moved slot.
    pub transfers: Vec<Transfer>,
    /// Rows with no surviving replica to copy from: their data is lost.
    pub lost_rows: Vec<usize>,
}

/// Plans the copies for `movement`, the result of a change from `old` to
/// `new`. Each moved slot gets a source among the row's replicas that held
/// the data before and still do (a removed disk, which is still readable
/// while it drains, only when no other replica is left), chosen so that
/// every disk sends about the same number of rows.
pub fn plan(old: &PlacementTable, new: &PlacementTable, movement: &Movement) -> RecoveryPlan {
    let mut sent: std::collections::HashMap<DiskId, u64> = std::collections::HashMap::new();
    let mut out = RecoveryPlan {
        version: new.version(),
        ..RecoveryPlan::default()
    };
    for c in &movement.changes {
        if c.row >= old.row_count() {
            continue;
        }
        let old_row = old.row(c.row);
        let new_row = new.row(c.row);
        let holders: Vec<DiskId> = old_row
            .iter()
            .copied()
            .filter(|d| new_row.contains(d) && *d != c.to && new.is_live(*d) && old.is_live(*d))
            .collect();
        let draining: Vec<DiskId> = if holders.is_empty() {
            old_row
                .iter()
                .copied()
                .filter(|&d| new.disk(d).is_some_and(|x| x.state == DiskState::Removed))
                .collect()
        } else {
            Vec::new()
        };
        let candidates = if holders.is_empty() {
            draining
        } else {
            holders
        };
        let best = candidates.iter().copied().min_by_key(|d| {
            (
                sent.get(d).copied().unwrap_or(0),
                mix3(new.seed(), c.row as u64, u64::from(d.0)),
            )
        });
        match best {
            Some(source) => {
                *sent.entry(source).or_default() += 1;
                out.transfers.push(Transfer {
                    row: c.row,
                    source,
                    target: c.to,
                });
            }
            None => {
                if out.lost_rows.last() != Some(&c.row) {
                    out.lost_rows.push(c.row);
                }
            }
        }
    }
    out
}

/// Inputs of a recovery simulation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimParams {
    /// Disks in the cluster.
    pub disks: usize,
    /// Disks per node (the failed disks are all on one node).
    pub disks_per_node: usize,
    /// How many disks of that node fail at once.
    pub failed_disks: usize,
    /// Bytes lost in total (spread evenly over the failed disks' rows).
    pub bytes_lost: u64,
    /// Bytes per second one disk moves, reads and writes together (a
    /// recovering disk reads what it sends and writes what it receives).
    pub disk_bytes_per_sec: f64,
    /// Replicas per row.
    pub replication: usize,
}

/// What the simulation found.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SimResult {
    /// Rows in the table.
    pub rows: usize,
    /// Rows that had to be re-replicated.
    pub rows_recovered: usize,
    /// Disks that sent or received something.
    pub disks_involved: usize,
    /// Bytes read plus written by the busiest disk.
    pub busiest_disk_bytes: u64,
    /// Mean over involved disks of bytes read plus written.
    pub mean_disk_bytes: f64,
    /// Transfer time: the busiest disk's bytes over its bandwidth (all rows
    /// move at once, each disk throttled to its bandwidth).
    pub seconds: f64,
    /// The rows no replica survived (0 unless the input is wrong).
    pub lost_rows: usize,
}

/// Builds a table over `disks` disks, fails `failed_disks` disks of one node,
/// plans the recovery and computes each disk's share of the work and the
/// resulting transfer time (detection time not included).
pub fn simulate(p: &SimParams) -> Result<SimResult, PlacementError> {
    let per_node = p.disks_per_node.max(1);
    let disks: Vec<(DiskId, NodeId)> = (0..p.disks)
        .map(|i| (DiskId(i as u32), NodeId((i / per_node) as u32)))
        .collect();
    let table = PlacementTable::build(&disks, p.replication, crate::DEFAULT_TRACT_SIZE, 7)?;
    let failed: Vec<DiskId> = (0..p.failed_disks.min(per_node).min(p.disks))
        .map(|i| DiskId(i as u32))
        .collect();
    let rows_per_disk = table.rows_per_disk();
    let (next, movement) = table.replace_disks(&failed, DiskState::Dead)?;
    let recovery = plan(&table, &next, &movement);
    let per_failed = p.bytes_lost as f64 / failed.len().max(1) as f64;
    let lost_of: std::collections::HashMap<(usize, DiskId), DiskId> = movement
        .changes
        .iter()
        .map(|c| ((c.row, c.to), c.from))
        .collect();
    let mut work: std::collections::HashMap<DiskId, f64> = std::collections::HashMap::new();
    for t in &recovery.transfers {
        let lost = lost_of.get(&(t.row, t.target)).copied();
        let rows_of_lost = lost
            .and_then(|d| rows_per_disk.get(&d).copied())
            .unwrap_or(1)
            .max(1);
        let bytes = per_failed / rows_of_lost as f64;
        *work.entry(t.source).or_default() += bytes;
        *work.entry(t.target).or_default() += bytes;
    }
    let busiest = work.values().copied().fold(0.0, f64::max);
    let mean = if work.is_empty() {
        0.0
    } else {
        work.values().sum::<f64>() / work.len() as f64
    };
    Ok(SimResult {
        rows: table.row_count(),
        rows_recovered: recovery.transfers.len(),
        disks_involved: work.len(),
        busiest_disk_bytes: busiest as u64,
        mean_disk_bytes: mean,
        seconds: busiest / p.disk_bytes_per_sec.max(1.0),
        lost_rows: recovery.lost_rows.len(),
    })
}
