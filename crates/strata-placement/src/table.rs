//! The placement table itself: disks, rows, versions, object → row.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::hash::{jump_hash, mix, mix3};
use crate::PlacementError;

/// Replicas per row unless the operator says otherwise.
pub const DEFAULT_REPLICATION: usize = 3;
/// Tract size unless the operator says otherwise: 8 MiB, as in FDS.
pub const DEFAULT_TRACT_SIZE: u64 = 8 << 20;
/// Version of the table's serialized form (docs/placement.md).
pub const FORMAT_VERSION: u32 = 1;

/// A disk, numbered by the metadata service; never reused.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct DiskId(pub u32);

/// A node (one server process), numbered by the metadata service; never reused.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl fmt::Display for DiskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "n{}", self.0)
    }
}

/// Whether a disk may hold replicas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DiskState {
    /// Serving; may be placed in rows.
    Live,
    /// Declared dead by the health checker; being replaced in its rows.
    Dead,
    /// Taken out by the operator (remove-node); being drained.
    Removed,
}

/// One disk of the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Disk {
    /// The disk's id.
    pub id: DiskId,
    /// The node that holds it.
    pub node: NodeId,
    /// Live, dead or removed.
    pub state: DiskState,
}

/// The placement table (FDS's tract locator table), one version of it.
///
/// Rows are stored flat (`replication` disk ids per row) so that a table of
/// millions of rows (3,000 disks) stays compact.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "TableWire", try_from = "TableWire")]
pub struct PlacementTable {
    pub(crate) version: u64,
    pub(crate) replication: usize,
    pub(crate) tract_size: u64,
    pub(crate) seed: u64,
    /// Sorted by id.
    pub(crate) disks: Vec<Disk>,
    pub(crate) slots: Vec<DiskId>,
}

/// The serialized form: JSON-friendly rows of disk ids (docs/placement.md).
#[derive(Serialize, Deserialize)]
struct TableWire {
    format: u32,
    version: u64,
    replication: usize,
    tract_size: u64,
    seed: u64,
    disks: Vec<Disk>,
    rows: Vec<Vec<DiskId>>,
}

impl From<PlacementTable> for TableWire {
    fn from(t: PlacementTable) -> Self {
        let rows = t
            .slots
            .chunks(t.replication)
            .map(<[DiskId]>::to_vec)
            .collect();
        TableWire {
            format: FORMAT_VERSION,
            version: t.version,
            replication: t.replication,
            tract_size: t.tract_size,
            seed: t.seed,
            disks: t.disks,
            rows,
        }
    }
}

impl TryFrom<TableWire> for PlacementTable {
    type Error = PlacementError;

    fn try_from(w: TableWire) -> Result<Self, PlacementError> {
        if w.format != FORMAT_VERSION {
            return Err(PlacementError::Invalid(format!(
                "format {} is not supported (this build reads format {FORMAT_VERSION})",
                w.format
            )));
        }
        check_replication(w.replication)?;
        if w.tract_size == 0 {
            return Err(PlacementError::BadTractSize);
        }
        let mut disks = w.disks;
        disks.sort_by_key(|d| d.id);
        for pair in disks.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(PlacementError::DuplicateDisk(pair[0].id));
            }
        }
        let mut slots = Vec::with_capacity(w.rows.len() * w.replication);
        for (i, row) in w.rows.into_iter().enumerate() {
            if row.len() != w.replication {
                return Err(PlacementError::Invalid(format!(
                    "row {i} has {} disks, expected {}",
                    row.len(),
                    w.replication
                )));
            }
            slots.extend(row);
        }
        let t = PlacementTable {
            version: w.version,
            replication: w.replication,
            tract_size: w.tract_size,
            seed: w.seed,
            disks,
            slots,
        };
        t.check_rows()?;
        Ok(t)
    }
}

pub(crate) fn check_replication(r: usize) -> Result<(), PlacementError> {
    if (1..=16).contains(&r) {
        Ok(())
    } else {
        Err(PlacementError::BadReplication(r))
    }
}

impl PlacementTable {
    /// Builds version 1 of a table over `disks` (disk, node), all live.
    ///
    /// For `replication` ≥ 2 there is one row per pair of disks on different
    /// nodes (so every such pair shares a row, FDS's condition for recovery
    /// from all disks at once), and the remaining `replication − 2` places of
    /// each row go to the least-loaded disks on other nodes, so that every
    /// disk ends up in about the same number of rows. With `replication` 1
    /// there is one row per disk. Rows are then shuffled so consecutive rows
    /// (the tracts of one object) fall on different disks.
    ///
    /// `seed` makes tie-breaks and the shuffle deterministic.
    pub fn build(
        disks: &[(DiskId, NodeId)],
        replication: usize,
        tract_size: u64,
        seed: u64,
    ) -> Result<PlacementTable, PlacementError> {
        check_replication(replication)?;
        if tract_size == 0 {
            return Err(PlacementError::BadTractSize);
        }
        let mut list: Vec<Disk> = disks
            .iter()
            .map(|&(id, node)| Disk {
                id,
                node,
                state: DiskState::Live,
            })
            .collect();
        list.sort_by_key(|d| d.id);
        for pair in list.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(PlacementError::DuplicateDisk(pair[0].id));
            }
        }
        let nodes: HashSet<NodeId> = list.iter().map(|d| d.node).collect();
        if nodes.len() < replication {
            return Err(PlacementError::TooFewNodes {
                nodes: nodes.len(),
                replication,
            });
        }
        let mut table = PlacementTable {
            version: 1,
            replication,
            tract_size,
            seed,
            disks: list,
            slots: Vec::new(),
        };
        let n = table.disks.len();
        let mut rows: Vec<Vec<usize>> = Vec::new();
        if replication == 1 {
            rows.extend((0..n).map(|i| vec![i]));
        } else {
            for a in 0..n {
                for b in a + 1..n {
                    if table.disks[a].node != table.disks[b].node {
                        rows.push(vec![a, b]);
                    }
                }
            }
        }
        // Shuffle before filling, so fillers are not correlated with pair order.
        shuffle(&mut rows, seed);
        if replication > 2 {
            let mut load = vec![0u64; n];
            for row in &rows {
                for &i in row {
                    load[i] += 1;
                }
            }
            let mut queue = LoadQueue::new(&load, seed);
            for (r, row) in rows.iter_mut().enumerate() {
                while row.len() < replication {
                    let taken: Vec<NodeId> = row.iter().map(|&i| table.disks[i].node).collect();
                    let pick = queue
                        .take_least(|i| !taken.contains(&table.disks[i].node), r as u64)
                        .ok_or(PlacementError::TooFewNodes {
                            nodes: nodes.len(),
                            replication,
                        })?;
                    row.push(pick);
                }
            }
        }
        table.slots = rows
            .into_iter()
            .flat_map(|row| row.into_iter())
            .map(|i| table.disks[i].id)
            .collect();
        Ok(table)
    }

    /// The table's version: 1 when built, one more after every change.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Replicas per row.
    pub fn replication(&self) -> usize {
        self.replication
    }

    /// Bytes per tract: objects larger than this are split into tracts.
    pub fn tract_size(&self) -> u64 {
        self.tract_size
    }

    /// The seed used for tie-breaks.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Every disk the table knows, sorted by id (dead and removed ones too).
    pub fn disks(&self) -> &[Disk] {
        &self.disks
    }

    /// The disk with this id.
    pub fn disk(&self, id: DiskId) -> Option<&Disk> {
        self.disks
            .binary_search_by_key(&id, |d| d.id)
            .ok()
            .map(|i| &self.disks[i])
    }

    pub(crate) fn disk_index(&self, id: DiskId) -> Option<usize> {
        self.disks.binary_search_by_key(&id, |d| d.id).ok()
    }

    /// Whether the disk is known and live.
    pub fn is_live(&self, id: DiskId) -> bool {
        self.disk(id).is_some_and(|d| d.state == DiskState::Live)
    }

    /// Number of rows.
    pub fn row_count(&self) -> usize {
        self.slots.len() / self.replication
    }

    /// The disks of row `row` (panics if `row >= row_count()`; rows computed
    /// by [`row_of`](Self::row_of) and [`tract_row`](Self::tract_row) are
    /// always in range).
    pub fn row(&self, row: usize) -> &[DiskId] {
        &self.slots[row * self.replication..(row + 1) * self.replication]
    }

    /// Every row, in order.
    pub fn rows(&self) -> impl Iterator<Item = &[DiskId]> {
        self.slots.chunks(self.replication)
    }

    /// The live disks of row `row`.
    pub fn live_replicas(&self, row: usize) -> Vec<DiskId> {
        self.row(row)
            .iter()
            .copied()
            .filter(|&d| self.is_live(d))
            .collect()
    }

    /// The row of an object's first place (its metadata tract, tract −1):
    /// jump consistent hash of [`object_hash`](crate::object_hash) over the
    /// row count, so that rows appended later take only their fair share of
    /// objects and no object moves between old rows.
    pub fn row_of(&self, hash: u64) -> usize {
        jump_hash(hash, self.row_count() as u32) as usize
    }

    /// The row of tract `tract` (−1 = metadata tract, 0, 1, … data tracts) of
    /// the object with placement hash `hash`: `(row_of(hash) + 1 + tract) mod
    /// rows`, so tract −1 sits at `row_of(hash)` and data tracts follow on
    /// consecutive rows (FDS: "hash of GUID plus tract number").
    pub fn tract_row(&self, hash: u64, tract: i64) -> usize {
        let rows = self.row_count() as i64;
        (self.row_of(hash) as i64 + 1 + tract).rem_euclid(rows.max(1)) as usize
    }

    /// How many data tracts an object of `len` bytes takes (0 for an empty
    /// object: only its metadata tract exists).
    pub fn tract_count(&self, len: u64) -> u64 {
        len.div_ceil(self.tract_size)
    }

    /// Rows that hold a disk which is not live (dead or removed): their data
    /// has fewer than `replication` healthy copies.
    pub fn rows_under_replicated(&self) -> usize {
        self.rows()
            .filter(|row| row.iter().any(|&d| !self.is_live(d)))
            .count()
    }

    /// The rows that contain `disk`.
    pub fn rows_of_disk(&self, disk: DiskId) -> Vec<usize> {
        self.rows()
            .enumerate()
            .filter(|(_, row)| row.contains(&disk))
            .map(|(i, _)| i)
            .collect()
    }

    /// How many rows each disk is in (every known disk, 0 if none).
    pub fn rows_per_disk(&self) -> HashMap<DiskId, usize> {
        let mut m: HashMap<DiskId, usize> = self.disks.iter().map(|d| (d.id, 0)).collect();
        for &d in &self.slots {
            *m.entry(d).or_default() += 1;
        }
        m
    }

    /// Pairs of live disks on different nodes that share no row. Empty for a
    /// table that lets every disk help recover every other (FDS's property).
    /// Quadratic in the number of disks: for checks, not the data path.
    pub fn uncovered_pairs(&self) -> Vec<(DiskId, DiskId)> {
        let mut covered: HashSet<(DiskId, DiskId)> = HashSet::new();
        for row in self.rows() {
            for (i, &a) in row.iter().enumerate() {
                for &b in &row[i + 1..] {
                    covered.insert((a.min(b), a.max(b)));
                }
            }
        }
        let live: Vec<&Disk> = self
            .disks
            .iter()
            .filter(|d| d.state == DiskState::Live)
            .collect();
        let mut out = Vec::new();
        for (i, a) in live.iter().enumerate() {
            for b in &live[i + 1..] {
                if a.node != b.node && !covered.contains(&(a.id, b.id)) {
                    out.push((a.id, b.id));
                }
            }
        }
        out
    }

    /// Checks the structural invariants: every row names known disks, no disk
    /// twice in a row, no two disks of a row on one node.
    pub fn check_rows(&self) -> Result<(), PlacementError> {
        for (i, row) in self.rows().enumerate() {
            let mut nodes = Vec::with_capacity(row.len());
            for &d in row {
                let disk = self.disk(d).ok_or_else(|| {
                    PlacementError::Invalid(format!("row {i} names unknown disk {d}"))
                })?;
                if nodes.contains(&disk.node) {
                    return Err(PlacementError::Invalid(format!(
                        "row {i} has two disks on node {}",
                        disk.node
                    )));
                }
                nodes.push(disk.node);
            }
        }
        Ok(())
    }
}

/// Deterministic Fisher–Yates shuffle.
pub(crate) fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut state = mix(seed ^ 0x5EED);
    for i in (1..v.len()).rev() {
        state = mix(state);
        let j = (state % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// Disk indices ordered by (load, pseudo-random tie-break).
pub(crate) struct LoadQueue {
    set: BTreeSet<(u64, u64, usize)>,
    load: Vec<u64>,
    seed: u64,
}

impl LoadQueue {
    pub(crate) fn new(load: &[u64], seed: u64) -> LoadQueue {
        let set = load
            .iter()
            .enumerate()
            .map(|(i, &l)| (l, mix3(seed, i as u64, l), i))
            .collect();
        LoadQueue {
            set,
            load: load.to_vec(),
            seed,
        }
    }

    /// Takes the least-loaded index accepted by `ok`, counts one more load on
    /// it, and returns it.
    pub(crate) fn take_least(&mut self, ok: impl Fn(usize) -> bool, salt: u64) -> Option<usize> {
        let found = self.set.iter().find(|&&(_, _, i)| ok(i)).copied()?;
        self.set.remove(&found);
        let i = found.2;
        self.load[i] += 1;
        let l = self.load[i];
        self.set.insert((l, mix3(self.seed ^ salt, i as u64, l), i));
        Some(i)
    }
}
