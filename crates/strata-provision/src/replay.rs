//! Replay of a trace through a flash tier laid out by an allocation, to
//! measure the flash hit ratio on an evaluation window.
//!
//! The tier inserts on write (§3): a put of workload `i` is written to flash
//! with the workload's write probability (decided by a hash of the object
//! and the put time, so every layout replayed side by side makes the same
//! draw for the same put), and evicts by FIFO (oldest insertion first) or LRU
//! (least recently read or written first) when the workload's flash bytes
//! are full. A read is a flash hit when the object is on flash. An object
//! read but never written in the trace is on disk; it is then treated as
//! written at that read (with the same draw), so read-only traces still
//! measure the insert-on-first-sight behaviour the curves assume — unless
//! the read carries a creation time before it (the object predates the
//! trace), in which case it stays on disk.
//!
//! Requests before the window warm the tier up; only reads inside the window
//! are counted. Several layouts are replayed in one pass.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;
use strata_trace::{Op, Request};

use crate::collect::{mix64, unit};
use strata_plan::Eviction;

/// How flash is laid out for one replay.
#[derive(Clone, Debug)]
pub enum Layout {
    /// A separate flash per workload: (bytes, write probability) by id;
    /// workloads not listed get no flash.
    PerWorkload(HashMap<u32, (u64, f64)>),
    /// One flash of this many bytes shared by every workload, every new byte
    /// written (the single FIFO / single LRU).
    Shared(u64),
}

/// One workload's measured figures on the window.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Measured {
    /// Reads in the window.
    pub reads: u64,
    /// Of those, flash hits.
    pub flash_hits: u64,
    /// Bytes written to flash in the window.
    pub flash_write_bytes: u64,
}

#[derive(Debug)]
struct Flash {
    cap: u64,
    used: u64,
    policy: Eviction,
    seq: u64,
    by_obj: HashMap<u64, (u64, u64)>,
    order: BTreeMap<u64, u64>,
}

impl Flash {
    fn new(cap: u64, policy: Eviction) -> Flash {
        Flash {
            cap,
            used: 0,
            policy,
            seq: 0,
            by_obj: HashMap::new(),
            order: BTreeMap::new(),
        }
    }

    fn remove(&mut self, obj: u64) {
        if let Some((seq, size)) = self.by_obj.remove(&obj) {
            self.order.remove(&seq);
            self.used -= size;
        }
    }

    fn insert(&mut self, obj: u64, size: u64) -> bool {
        self.remove(obj);
        if size > self.cap {
            return false;
        }
        while self.used + size > self.cap {
            let Some((&s, &o)) = self.order.iter().next() else {
                break;
            };
            self.order.remove(&s);
            if let Some((_, sz)) = self.by_obj.remove(&o) {
                self.used -= sz;
            }
        }
        self.seq += 1;
        self.order.insert(self.seq, obj);
        self.by_obj.insert(obj, (self.seq, size));
        self.used += size;
        true
    }

    fn read(&mut self, obj: u64) -> bool {
        let Some(&(seq, size)) = self.by_obj.get(&obj) else {
            return false;
        };
        if self.policy == Eviction::Lru {
            self.order.remove(&seq);
            self.seq += 1;
            self.order.insert(self.seq, obj);
            self.by_obj.insert(obj, (self.seq, size));
        }
        true
    }
}

#[derive(Debug)]
struct Run {
    layout: Layout,
    flashes: HashMap<u32, Flash>,
    shared: Option<Flash>,
    measured: HashMap<u32, Measured>,
}

/// Replays several layouts side by side.
#[derive(Debug)]
pub struct Replay {
    runs: Vec<Run>,
    window: (f64, f64),
    policy: Eviction,
    seed: u64,
    known: HashMap<u64, ()>,
    reads_total: u64,
}

impl Replay {
    /// Replays `layouts` with `policy`, counting reads in `[start, end)`.
    pub fn new(layouts: Vec<Layout>, policy: Eviction, start: f64, end: f64, seed: u64) -> Replay {
        let runs = layouts
            .into_iter()
            .map(|layout| Run {
                shared: match &layout {
                    Layout::Shared(cap) => Some(Flash::new(*cap, policy)),
                    Layout::PerWorkload(_) => None,
                },
                layout,
                flashes: HashMap::new(),
                measured: HashMap::new(),
            })
            .collect();
        Replay {
            runs,
            window: (start, end),
            policy,
            seed,
            known: HashMap::new(),
            reads_total: 0,
        }
    }

    /// Feeds one request; returns `false` once past the window end.
    pub fn push(&mut self, r: &Request) -> bool {
        if r.time >= self.window.1 {
            return false;
        }
        let counting = r.time >= self.window.0;
        let draw = unit(mix64(
            r.object ^ r.time.to_bits().rotate_left(23) ^ self.seed.rotate_left(7),
        ));
        let write = |run: &mut Run, policy: Eviction, r: &Request| {
            let admitted = match &run.layout {
                Layout::Shared(_) => run.shared.as_mut().map(|f| f.insert(r.object, r.size)),
                Layout::PerWorkload(m) => match m.get(&r.workload) {
                    Some(&(cap, p)) if draw < p => Some(
                        run.flashes
                            .entry(r.workload)
                            .or_insert_with(|| Flash::new(cap, policy))
                            .insert(r.object, r.size),
                    ),
                    _ => {
                        if let Some(f) = run.flashes.get_mut(&r.workload) {
                            f.remove(r.object);
                        }
                        None
                    }
                },
            };
            if counting && admitted == Some(true) {
                run.measured
                    .entry(r.workload)
                    .or_default()
                    .flash_write_bytes += r.size;
            }
        };
        match r.op {
            Op::Put => {
                self.known.insert(r.object, ());
                for run in &mut self.runs {
                    write(run, self.policy, r);
                }
            }
            Op::Delete => {
                self.known.remove(&r.object);
                for run in &mut self.runs {
                    if let Some(f) = run.shared.as_mut() {
                        f.remove(r.object);
                    }
                    if let Some(f) = run.flashes.get_mut(&r.workload) {
                        f.remove(r.object);
                    }
                }
            }
            Op::Get => {
                let first_sight = self.known.insert(r.object, ()).is_none();
                if counting {
                    self.reads_total += 1;
                }
                for run in &mut self.runs {
                    let hit = if first_sight {
                        false
                    } else if let Some(f) = run.shared.as_mut() {
                        f.read(r.object)
                    } else if let Some(f) = run.flashes.get_mut(&r.workload) {
                        f.read(r.object)
                    } else {
                        false
                    };
                    if counting {
                        let m = run.measured.entry(r.workload).or_default();
                        m.reads += 1;
                        m.flash_hits += hit as u64;
                    }
                    // An object first seen by a read is written then, unless
                    // the trace says it was created earlier (before the
                    // trace began): that object was written long ago and
                    // is on disk.
                    if first_sight && !matches!(r.create_time, Some(c) if c < r.time) {
                        write(run, self.policy, r);
                    }
                }
            }
        }
        true
    }

    /// Per layout, the measured figures per workload id.
    pub fn finish(self) -> Vec<HashMap<u32, Measured>> {
        self.runs.into_iter().map(|r| r.measured).collect()
    }

    /// Reads counted so far.
    pub fn reads(&self) -> u64 {
        self.reads_total
    }
}

/// The cell-wide flash hit ratio of one layout's figures.
pub fn hit_ratio(m: &HashMap<u32, Measured>) -> f64 {
    let reads: u64 = m.values().map(|v| v.reads).sum();
    let hits: u64 = m.values().map(|v| v.flash_hits).sum();
    if reads == 0 {
        0.0
    } else {
        hits as f64 / reads as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(t: f64, o: u64, w: u32, s: u64) -> Request {
        Request::new(t, Op::Put, o, w, s)
    }
    fn get(t: f64, o: u64, w: u32) -> Request {
        Request::new(t, Op::Get, o, w, 1)
    }

    #[test]
    fn fifo_and_lru_differ() {
        // Capacity for two objects; A written, B written, A read, C written,
        // then A read. FIFO evicted A (oldest insert), LRU evicted B.
        let reqs = [
            put(0.0, 1, 0, 10),
            put(1.0, 2, 0, 10),
            get(2.0, 1, 0),
            put(3.0, 3, 0, 10),
            get(4.0, 1, 0),
        ];
        let layout = Layout::PerWorkload([(0, (20, 1.0))].into_iter().collect());
        for (policy, hits) in [(Eviction::Fifo, 0), (Eviction::Lru, 1)] {
            let mut r = Replay::new(vec![layout.clone()], policy, 3.5, 10.0, 1);
            for q in &reqs {
                r.push(q);
            }
            let m = r.finish();
            assert_eq!(m[0][&0].reads, 1);
            assert_eq!(m[0][&0].flash_hits, hits, "{policy:?}");
        }
    }

    #[test]
    fn objects_older_than_the_trace_are_on_disk() {
        let layout = Layout::PerWorkload([(0, (100, 1.0))].into_iter().collect());
        let mut r = Replay::new(vec![layout], Eviction::Fifo, 0.0, 10.0, 1);
        let mut old = get(1.0, 1, 0);
        old.create_time = Some(-50.0);
        r.push(&old);
        let mut again = get(2.0, 1, 0);
        again.create_time = Some(-50.0);
        r.push(&again);
        // Unknown creation: written at first sight, hit the second time.
        r.push(&get(3.0, 2, 0));
        r.push(&get(4.0, 2, 0));
        let m = r.finish();
        assert_eq!(m[0][&0].reads, 4);
        assert_eq!(m[0][&0].flash_hits, 1);
    }

    #[test]
    fn write_probability_zero_means_disk() {
        let layout = Layout::PerWorkload([(0, (100, 0.0))].into_iter().collect());
        let mut r = Replay::new(
            vec![layout, Layout::Shared(100)],
            Eviction::Fifo,
            0.0,
            10.0,
            1,
        );
        r.push(&put(0.0, 1, 0, 10));
        r.push(&get(1.0, 1, 0));
        let m = r.finish();
        assert_eq!(m[0][&0].flash_hits, 0);
        assert_eq!(m[1][&0].flash_hits, 1);
        assert_eq!(hit_ratio(&m[1]), 1.0);
    }
}
