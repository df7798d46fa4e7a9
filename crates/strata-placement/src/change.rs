//! Changes to the table: replace dead or removed disks, add a node. Each
//! change returns the next version and the exact slots that moved.

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::hash::mix3;
use crate::table::{shuffle, LoadQueue};
use crate::{Disk, DiskId, DiskState, NodeId, PlacementError, PlacementTable};

/// What a change did to the rows: the data that has to move.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Movement {
    /// Slots whose disk changed: row `row` now has `to` where it had `from`.
    /// `to` needs a copy of the row's data.
    pub changes: Vec<SlotChange>,
    /// Rows appended by the change (replication 1 or 2 cannot add a node by
    /// swapping slots); objects that jump-hash to them move there.
    pub new_rows: Vec<usize>,
    /// Rows left with a non-live disk because no live disk on a distinct node
    /// was available.
    pub unrepaired_rows: Vec<usize>,
}

/// One slot of one row that now names a different disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotChange {
    /// The row.
    pub row: usize,
    /// The disk that was there.
    pub from: DiskId,
    /// The disk that is there now.
    pub to: DiskId,
}

type Pair = (DiskId, DiskId);

fn pair(a: DiskId, b: DiskId) -> Pair {
    (a.min(b), a.max(b))
}

impl PlacementTable {
    /// Marks `disks` as `state` (dead or removed) and, in every row that
    /// holds a non-live disk, puts a different live disk in its place: one on
    /// a node not already in the row, chosen so that the rows to re-replicate
    /// are spread evenly over all live disks (fewest received so far, then
    /// fewest rows). Returns the next version and the moved slots.
    ///
    /// Pairs of live disks keep sharing a row: only slots of non-live disks
    /// change.
    pub fn replace_disks(
        &self,
        disks: &[DiskId],
        state: DiskState,
    ) -> Result<(PlacementTable, Movement), PlacementError> {
        let mut next = self.clone();
        for &d in disks {
            let i = next.disk_index(d).ok_or(PlacementError::UnknownDisk(d))?;
            next.disks[i].state = state;
        }
        next.version += 1;
        let movement = next.repair_rows();
        Ok((next, movement))
    }

    /// Takes every disk of `node` out of service (state removed) and moves
    /// its rows to other disks, exactly as for a dead disk but with the
    /// removed disks still readable as sources while they drain.
    pub fn remove_node(&self, node: NodeId) -> Result<(PlacementTable, Movement), PlacementError> {
        let disks: Vec<DiskId> = self
            .disks
            .iter()
            .filter(|d| d.node == node && d.state == DiskState::Live)
            .map(|d| d.id)
            .collect();
        if !self.disks.iter().any(|d| d.node == node) {
            return Err(PlacementError::UnknownNode(node));
        }
        self.replace_disks(&disks, DiskState::Removed)
    }

    /// Replaces every non-live disk in every row where a replacement exists.
    fn repair_rows(&mut self) -> Movement {
        let r = self.replication;
        let n = self.disks.len();
        let mut load = vec![0u64; n];
        for &d in &self.slots {
            if let Some(i) = self.disk_index(d) {
                load[i] += 1;
            }
        }
        let mut received = vec![0u64; n];
        let mut rows: Vec<usize> = (0..self.row_count())
            .filter(|&row| self.row(row).iter().any(|&d| !self.is_live(d)))
            .collect();
        shuffle(&mut rows, self.seed ^ self.version);
        let mut movement = Movement::default();
        for row in rows {
            for pos in 0..r {
                let old = self.slots[row * r + pos];
                if self.is_live(old) {
                    continue;
                }
                let others: Vec<NodeId> = (0..r)
                    .filter(|&p| p != pos)
                    .filter_map(|p| self.disk(self.slots[row * r + p]).map(|d| d.node))
                    .collect();
                let best = (0..n)
                    .filter(|&i| {
                        self.disks[i].state == DiskState::Live
                            && !others.contains(&self.disks[i].node)
                    })
                    .min_by_key(|&i| {
                        (
                            received[i],
                            load[i],
                            mix3(self.seed ^ self.version, row as u64, i as u64),
                        )
                    });
                match best {
                    Some(i) => {
                        received[i] += 1;
                        load[i] += 1;
                        let to = self.disks[i].id;
                        self.slots[row * r + pos] = to;
                        movement.changes.push(SlotChange { row, from: old, to });
                    }
                    None => {
                        if movement.unrepaired_rows.last() != Some(&row) {
                            movement.unrepaired_rows.push(row);
                        }
                    }
                }
            }
        }
        movement.changes.sort_by_key(|c| (c.row, c.from));
        movement
    }

    /// Adds `node` with its `disks` and gives them their share of rows with
    /// the least data movement.
    ///
    /// With replication ≥ 3 no row is added (so no object changes row): each
    /// new disk takes over single slots of existing rows — first one row with
    /// each existing disk on another node (so the new pairs are covered),
    /// then more until it holds the average number of rows — always from the
    /// most loaded disk whose pairs stay covered by another row. Only the new
    /// disks receive data. With replication 1 or 2 slots cannot be swapped
    /// without losing a pair, so rows are appended (one per new disk, or one
    /// per new pair) and the jump hash moves to them only their fair share
    /// of objects.
    pub fn add_node(
        &self,
        node: NodeId,
        disks: &[DiskId],
    ) -> Result<(PlacementTable, Movement), PlacementError> {
        if self.disks.iter().any(|d| d.node == node) {
            return Err(PlacementError::NodeExists(node));
        }
        let mut next = self.clone();
        for &id in disks {
            if next.disk_index(id).is_some() {
                return Err(PlacementError::DuplicateDisk(id));
            }
            next.disks.push(Disk {
                id,
                node,
                state: DiskState::Live,
            });
            next.disks.sort_by_key(|d| d.id);
        }
        next.version += 1;
        let movement = if next.replication >= 3 {
            next.add_by_swaps(node, disks)
        } else {
            next.add_by_rows(node, disks)
        };
        Ok((next, movement))
    }

    fn add_by_rows(&mut self, node: NodeId, new: &[DiskId]) -> Movement {
        let first = self.row_count();
        for &e in new {
            if self.replication == 1 {
                self.slots.push(e);
            } else {
                let partners: Vec<DiskId> = self
                    .disks
                    .iter()
                    .filter(|d| d.state == DiskState::Live && d.node != node)
                    .map(|d| d.id)
                    .collect();
                for x in partners {
                    self.slots.push(e);
                    self.slots.push(x);
                }
            }
        }
        Movement {
            new_rows: (first..self.row_count()).collect(),
            ..Movement::default()
        }
    }

    fn add_by_swaps(&mut self, node: NodeId, new: &[DiskId]) -> Movement {
        let r = self.replication;
        let mut pairs: HashMap<Pair, u32> = HashMap::new();
        let mut disk_rows: HashMap<DiskId, Vec<usize>> = HashMap::new();
        let mut load: HashMap<DiskId, u64> = HashMap::new();
        for (i, row) in self.rows().enumerate() {
            for (p, &a) in row.iter().enumerate() {
                disk_rows.entry(a).or_default().push(i);
                *load.entry(a).or_default() += 1;
                for &b in &row[p + 1..] {
                    *pairs.entry(pair(a, b)).or_default() += 1;
                }
            }
        }
        let node_of: HashMap<DiskId, NodeId> = self.disks.iter().map(|d| (d.id, d.node)).collect();
        let new_set: HashSet<DiskId> = new.iter().copied().collect();
        let mut movement = Movement::default();
        let live = self
            .disks
            .iter()
            .filter(|d| d.state == DiskState::Live)
            .count()
            .max(1);
        let target = (self.slots.len() / live) as u64;

        // Whether slot `pos` of `row` may be handed to a disk of `node`.
        let swappable = |slots: &[DiskId], pairs: &HashMap<Pair, u32>, row: usize, pos: usize| {
            let c = slots[row * r + pos];
            if new_set.contains(&c) {
                return false;
            }
            let others = (0..r).filter(|&p| p != pos).map(|p| slots[row * r + p]);
            let mut ok = true;
            for z in others {
                if node_of.get(&z) == Some(&node) {
                    return false;
                }
                if pairs.get(&pair(c, z)).copied().unwrap_or(0) < 2 {
                    ok = false;
                }
            }
            ok
        };

        for (k, &e) in new.iter().enumerate() {
            let mut partners: Vec<DiskId> = self
                .disks
                .iter()
                .filter(|d| d.state == DiskState::Live && d.node != node)
                .map(|d| d.id)
                .collect();
            shuffle(&mut partners, self.seed ^ self.version ^ k as u64);
            for x in partners {
                if pairs.get(&pair(e, x)).copied().unwrap_or(0) > 0 {
                    continue;
                }
                let mut best: Option<(u64, usize, usize)> = None;
                for &row in disk_rows.get(&x).map(Vec::as_slice).unwrap_or(&[]) {
                    for pos in 0..r {
                        let c = self.slots[row * r + pos];
                        if c == x || !swappable(&self.slots, &pairs, row, pos) {
                            continue;
                        }
                        let l = load.get(&c).copied().unwrap_or(0);
                        if best.is_none_or(|(bl, _, _)| l > bl) {
                            best = Some((l, row, pos));
                        }
                    }
                }
                match best {
                    Some((_, row, pos)) => {
                        let from =
                            self.swap_slot(row, pos, e, &mut pairs, &mut disk_rows, &mut load);
                        movement.changes.push(SlotChange { row, from, to: e });
                    }
                    None => {
                        if let Some(row) =
                            self.append_row(e, x, &mut pairs, &mut disk_rows, &mut load)
                        {
                            movement.new_rows.push(row);
                        }
                    }
                }
            }
            // Balance: take slots from the most loaded disks until e holds its share.
            let mut order: Vec<usize> = (0..self.row_count()).collect();
            shuffle(&mut order, self.seed ^ self.version ^ (k as u64) << 8);
            for row in order {
                if load.get(&e).copied().unwrap_or(0) >= target {
                    break;
                }
                let el = load.get(&e).copied().unwrap_or(0);
                let pick = (0..r)
                    .filter(|&pos| {
                        let c = self.slots[row * r + pos];
                        load.get(&c).copied().unwrap_or(0) > el + 1
                            && swappable(&self.slots, &pairs, row, pos)
                    })
                    .max_by_key(|&pos| load.get(&self.slots[row * r + pos]).copied().unwrap_or(0));
                if let Some(pos) = pick {
                    let from = self.swap_slot(row, pos, e, &mut pairs, &mut disk_rows, &mut load);
                    movement.changes.push(SlotChange { row, from, to: e });
                }
            }
        }
        movement
    }

    /// Puts `e` in slot `pos` of `row`, keeps the bookkeeping in step, and
    /// returns the disk that was there.
    #[allow(clippy::too_many_arguments)]
    fn swap_slot(
        &mut self,
        row: usize,
        pos: usize,
        e: DiskId,
        pairs: &mut HashMap<Pair, u32>,
        disk_rows: &mut HashMap<DiskId, Vec<usize>>,
        load: &mut HashMap<DiskId, u64>,
    ) -> DiskId {
        let r = self.replication;
        let c = self.slots[row * r + pos];
        for p in (0..r).filter(|&p| p != pos) {
            let z = self.slots[row * r + p];
            if let Some(v) = pairs.get_mut(&pair(c, z)) {
                *v = v.saturating_sub(1);
            }
            *pairs.entry(pair(e, z)).or_default() += 1;
        }
        if let Some(v) = disk_rows.get_mut(&c) {
            v.retain(|&x| x != row);
        }
        disk_rows.entry(e).or_default().push(row);
        if let Some(v) = load.get_mut(&c) {
            *v = v.saturating_sub(1);
        }
        *load.entry(e).or_default() += 1;
        self.slots[row * r + pos] = e;
        c
    }

    fn append_row(
        &mut self,
        e: DiskId,
        x: DiskId,
        pairs: &mut HashMap<Pair, u32>,
        disk_rows: &mut HashMap<DiskId, Vec<usize>>,
        load: &mut HashMap<DiskId, u64>,
    ) -> Option<usize> {
        let r = self.replication;
        let row = self.row_count();
        let idx: Vec<u64> = self
            .disks
            .iter()
            .map(|d| {
                if d.state == DiskState::Live {
                    load.get(&d.id).copied().unwrap_or(0)
                } else {
                    u64::MAX / 2
                }
            })
            .collect();
        let mut queue = LoadQueue::new(&idx, self.seed ^ self.version);
        let mut members = vec![e, x];
        while members.len() < r {
            let taken: Vec<NodeId> = members
                .iter()
                .filter_map(|&m| self.disk(m).map(|d| d.node))
                .collect();
            let disks = &self.disks;
            match queue.take_least(
                |i| disks[i].state == DiskState::Live && !taken.contains(&disks[i].node),
                row as u64,
            ) {
                Some(i) => members.push(self.disks[i].id),
                None => break,
            }
        }
        if members.len() < r {
            // Fewer live nodes than replicas: the pair stays uncovered rather
            // than a row with two disks on one node.
            return None;
        }
        for (p, &a) in members.iter().enumerate() {
            disk_rows.entry(a).or_default().push(row);
            *load.entry(a).or_default() += 1;
            for &b in &members[p + 1..] {
                *pairs.entry(pair(a, b)).or_default() += 1;
            }
        }
        self.slots.extend(members);
        Some(row)
    }
}
