//! Synthetic multi-workload storage traces.
//!
//! A [`Generator`] yields [`Request`]s in time order for a set of
//! [`WorkloadSpec`]s: each workload creates objects as a Poisson process,
//! with log-normal sizes, and every object receives a random number of reads
//! at ages drawn from the workload's read-age distribution (a mixture of
//! exponential and uniform shapes). This is exactly the structure Janus
//! exploits: workloads whose reads fall with age at different speeds, reads
//! that come late (a batch job reading logs hours after they were written),
//! cold big data, different sizes and write rates. The same seed always
//! gives the same trace (the random numbers come from this crate's own
//! generator, see [`rng`]).
//!
//! The generator streams: memory holds only the reads and deletes already
//! scheduled but not yet due, so it can drive a load generator for hours as
//! well as write trace files.

#![warn(missing_docs)]

pub mod rng;
mod write;

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use strata_trace::{Op, Request};

pub use write::{write_trace, TraceFile, WriteError};

use rng::Rng;

/// How the reads of an object spread over its age.
#[derive(Clone, Debug, PartialEq)]
pub enum AgeShape {
    /// Exponentially falling with age, with this mean age (seconds).
    Exponential {
        /// Mean age of a read.
        mean: f64,
    },
    /// Uniform over ages `[start, end)` seconds.
    Uniform {
        /// Youngest age read.
        start: f64,
        /// Oldest age read.
        end: f64,
    },
}

impl AgeShape {
    fn sample(&self, r: &mut Rng) -> f64 {
        match *self {
            AgeShape::Exponential { mean } => r.exponential(mean),
            AgeShape::Uniform { start, end } => start + (end - start) * r.uniform(),
        }
    }
}

/// One synthetic workload.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    /// Workload id in the trace.
    pub id: u32,
    /// A short name.
    pub name: String,
    /// Objects created per second.
    pub puts_per_s: f64,
    /// Median object size in bytes.
    pub size_median: f64,
    /// Log-normal shape of sizes (0: every object has the median size).
    pub size_sigma: f64,
    /// Mean number of reads per object (each object's own mean is this
    /// times an exponential "heat" of mean 1, so some objects are hot).
    pub reads_per_object: f64,
    /// Read-age distribution: a mixture of shapes with weights.
    pub read_ages: Vec<(f64, AgeShape)>,
    /// Objects are deleted at this age, if set.
    pub lifetime: Option<f64>,
}

impl WorkloadSpec {
    fn check(&self) -> Result<(), String> {
        let pos = |v: f64| v.is_finite() && v >= 0.0;
        if !pos(self.puts_per_s) || !pos(self.reads_per_object) || !pos(self.size_sigma) {
            return Err(format!(
                "workload {}: rates and shapes must be non-negative",
                self.name
            ));
        }
        if !(self.size_median.is_finite() && self.size_median >= 1.0) {
            return Err(format!(
                "workload {}: median size must be at least 1 byte",
                self.name
            ));
        }
        if self.reads_per_object > 0.0
            && (self.read_ages.is_empty() || self.read_ages.iter().all(|(w, _)| *w <= 0.0))
        {
            return Err(format!(
                "workload {}: reads need a read-age distribution",
                self.name
            ));
        }
        for (w, s) in &self.read_ages {
            let ok = pos(*w)
                && match *s {
                    AgeShape::Exponential { mean } => mean.is_finite() && mean > 0.0,
                    AgeShape::Uniform { start, end } => {
                        pos(start) && end.is_finite() && end > start
                    }
                };
            if !ok {
                return Err(format!("workload {}: bad read-age shape {s:?}", self.name));
            }
        }
        Ok(())
    }

    fn sample_age(&self, r: &mut Rng) -> f64 {
        let total: f64 = self.read_ages.iter().map(|(w, _)| *w).sum();
        let mut u = r.uniform() * total;
        for (w, s) in &self.read_ages {
            if u < *w {
                return s.sample(r);
            }
            u -= w;
        }
        self.read_ages.last().map_or(0.0, |(_, s)| s.sample(r))
    }
}

const MIN: f64 = 60.0;
const HOUR: f64 = 3600.0;
const DAY: f64 = 86400.0;

/// The default mix of six workloads (rates at scale 1; about 12 requests
/// per second in all):
///
/// | id | name | puts/s | size | reads/object | read ages |
/// | --- | --- | --- | --- | --- | --- |
/// | 0 | hot-recent | 1.0 | 16 KiB | 4 | exponential, mean 15 min |
/// | 1 | warm-slow | 0.5 | 64 KiB | 3 | exponential, mean 6 h |
/// | 2 | late-batch | 0.25 | 128 KiB | 4 | 15% exp. mean 10 min, 85% uniform 3–4 h |
/// | 3 | cold-big | 0.1 | 4 MiB | 0.3 | uniform 0–2 days |
/// | 4 | flat | 0.5 | 8 KiB | 2 | uniform 0–1 day |
/// | 5 | medium | 0.5 | 32 KiB | 3 | exponential, mean 2 h |
pub fn default_workloads() -> Vec<WorkloadSpec> {
    let w = |id: u32,
             name: &str,
             puts: f64,
             size: f64,
             sigma: f64,
             reads: f64,
             ages: Vec<(f64, AgeShape)>| WorkloadSpec {
        id,
        name: name.to_string(),
        puts_per_s: puts,
        size_median: size,
        size_sigma: sigma,
        reads_per_object: reads,
        read_ages: ages,
        lifetime: None,
    };
    use AgeShape::*;
    vec![
        w(
            0,
            "hot-recent",
            1.0,
            16384.0,
            0.5,
            4.0,
            vec![(1.0, Exponential { mean: 15.0 * MIN })],
        ),
        w(
            1,
            "warm-slow",
            0.5,
            65536.0,
            0.5,
            3.0,
            vec![(1.0, Exponential { mean: 6.0 * HOUR })],
        ),
        w(
            2,
            "late-batch",
            0.25,
            131072.0,
            0.3,
            4.0,
            vec![
                (0.15, Exponential { mean: 10.0 * MIN }),
                (
                    0.85,
                    Uniform {
                        start: 3.0 * HOUR,
                        end: 4.0 * HOUR,
                    },
                ),
            ],
        ),
        w(
            3,
            "cold-big",
            0.1,
            4194304.0,
            0.3,
            0.3,
            vec![(
                1.0,
                Uniform {
                    start: 0.0,
                    end: 2.0 * DAY,
                },
            )],
        ),
        w(
            4,
            "flat",
            0.5,
            8192.0,
            0.5,
            2.0,
            vec![(
                1.0,
                Uniform {
                    start: 0.0,
                    end: DAY,
                },
            )],
        ),
        w(
            5,
            "medium",
            0.5,
            32768.0,
            0.5,
            3.0,
            vec![(1.0, Exponential { mean: 2.0 * HOUR })],
        ),
    ]
}

#[derive(Clone, Copy, Debug)]
struct Event {
    time: f64,
    create: f64,
    seq: u64,
    op: Op,
    object: u64,
    workload: u32,
    size: u64,
}

impl PartialEq for Event {
    fn eq(&self, o: &Event) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Event {}
impl PartialOrd for Event {
    fn partial_cmp(&self, o: &Event) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Event {
    // Reversed: the heap pops the earliest event first.
    fn cmp(&self, o: &Event) -> Ordering {
        o.time.total_cmp(&self.time).then(o.seq.cmp(&self.seq))
    }
}

/// An error in the generator's parameters.
#[derive(Debug, thiserror::Error)]
#[error("synthetic workload: {0}")]
pub struct SpecError(String);

/// Yields the requests of a synthetic trace in time order.
#[derive(Debug)]
pub struct Generator {
    specs: Vec<WorkloadSpec>,
    rngs: Vec<Rng>,
    next_put: Vec<f64>,
    counters: Vec<u64>,
    heap: BinaryHeap<Event>,
    seq: u64,
    duration: f64,
    start: f64,
}

impl Generator {
    /// A trace of `duration` seconds of the given workloads, their rates
    /// multiplied by `scale`, from `seed`.
    pub fn new(
        specs: Vec<WorkloadSpec>,
        duration: f64,
        scale: f64,
        seed: u64,
    ) -> Result<Generator, SpecError> {
        if !(duration.is_finite() && duration > 0.0) {
            return Err(SpecError(format!(
                "duration must be positive, got {duration}"
            )));
        }
        if !(scale.is_finite() && scale > 0.0) {
            return Err(SpecError(format!("scale must be positive, got {scale}")));
        }
        let mut ids = std::collections::HashSet::new();
        for s in &specs {
            s.check().map_err(SpecError)?;
            if !ids.insert(s.id) {
                return Err(SpecError(format!("workload id {} is used twice", s.id)));
            }
        }
        let mut specs = specs;
        for s in &mut specs {
            s.puts_per_s *= scale;
        }
        let mut rngs: Vec<Rng> = specs
            .iter()
            .map(|s| Rng::new(seed, s.id as u64 + 1))
            .collect();
        let next_put = specs
            .iter()
            .zip(rngs.iter_mut())
            .map(|(s, r)| {
                if s.puts_per_s > 0.0 {
                    r.exponential(1.0 / s.puts_per_s)
                } else {
                    f64::INFINITY
                }
            })
            .collect();
        Ok(Generator {
            counters: vec![0; specs.len()],
            specs,
            rngs,
            next_put,
            heap: BinaryHeap::new(),
            seq: 0,
            duration,
            start: 0.0,
        })
    }

    /// Starts the emitted trace at `start` seconds instead of 0: objects are
    /// still created from time 0, but requests before `start` are not
    /// yielded, and later requests to objects created before it carry their
    /// `create_time` — a trace that begins after its data was created, whose
    /// LRU ages are censored (Janus §8.7).
    pub fn starting_at(mut self, start: f64) -> Generator {
        self.start = start.clamp(0.0, self.duration);
        self
    }

    /// The default workloads for `duration` seconds at `scale`.
    pub fn default_mix(duration: f64, scale: f64, seed: u64) -> Result<Generator, SpecError> {
        Generator::new(default_workloads(), duration, scale, seed)
    }

    /// The workloads (rates already scaled).
    pub fn specs(&self) -> &[WorkloadSpec] {
        &self.specs
    }

    /// The trace's length in seconds.
    pub fn duration(&self) -> f64 {
        self.duration
    }

    #[allow(clippy::too_many_arguments)]
    fn schedule(&mut self, time: f64, create: f64, op: Op, object: u64, workload: u32, size: u64) {
        if time < self.duration {
            self.seq += 1;
            self.heap.push(Event {
                time,
                create,
                seq: self.seq,
                op,
                object,
                workload,
                size,
            });
        }
    }

    fn put(&mut self, i: usize) -> Request {
        let t = self.next_put[i];
        let spec = &self.specs[i];
        let r = &mut self.rngs[i];
        let size = r
            .lognormal(spec.size_median, spec.size_sigma)
            .round()
            .max(1.0) as u64;
        let object = ((spec.id as u64 + 1) << 40) | self.counters[i];
        self.counters[i] += 1;
        let heat = r.exponential(1.0);
        let n = r.poisson(spec.reads_per_object * heat);
        let mut ages: Vec<f64> = (0..n).map(|_| spec.sample_age(r)).collect();
        let lifetime = spec.lifetime;
        let id = spec.id;
        self.next_put[i] = t + r.exponential(1.0 / spec.puts_per_s);
        if let Some(l) = lifetime {
            ages.retain(|&a| a < l);
            self.schedule(t + l, t, Op::Delete, object, id, size);
        }
        for a in ages {
            self.schedule(t + a, t, Op::Get, object, id, size);
        }
        Request::new(t, Op::Put, object, id, size)
    }
}

impl Iterator for Generator {
    type Item = Request;

    fn next(&mut self) -> Option<Request> {
        loop {
            let (i, t_put) = self
                .next_put
                .iter()
                .copied()
                .enumerate()
                .min_by(|a, b| a.1.total_cmp(&b.1))?;
            let t_event = self.heap.peek().map_or(f64::INFINITY, |e| e.time);
            if t_event <= t_put {
                let e = self.heap.pop()?;
                if e.time < self.start {
                    continue;
                }
                let mut r = Request::new(e.time, e.op, e.object, e.workload, e.size);
                if e.create < self.start {
                    r.create_time = Some(e.create);
                }
                return Some(r);
            }
            if t_put >= self.duration {
                return None;
            }
            let r = self.put(i);
            if r.time >= self.start {
                return Some(r);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordered_deterministic_and_shaped() {
        let a: Vec<Request> = Generator::default_mix(6.0 * HOUR, 0.2, 42)
            .unwrap()
            .collect();
        let b: Vec<Request> = Generator::default_mix(6.0 * HOUR, 0.2, 42)
            .unwrap()
            .collect();
        let c: Vec<Request> = Generator::default_mix(6.0 * HOUR, 0.2, 43)
            .unwrap()
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].time <= w[1].time));
        assert!(a.iter().all(|r| r.time >= 0.0 && r.time < 6.0 * HOUR));
        // Every read follows its object's put.
        let mut born = std::collections::HashMap::new();
        for r in &a {
            match r.op {
                Op::Put => {
                    born.insert(r.object, r.time);
                }
                Op::Get => assert!(born[&r.object] <= r.time),
                Op::Delete => {}
            }
        }
        // Puts per workload follow the rates (±15% over 6 h at scale 0.2).
        let puts0 = a
            .iter()
            .filter(|r| r.op == Op::Put && r.workload == 0)
            .count() as f64;
        let want = 1.0 * 0.2 * 6.0 * HOUR;
        assert!((puts0 / want - 1.0).abs() < 0.15, "{puts0} vs {want}");
        // The late workload's reads come mostly 3-4 h after creation.
        let late: Vec<f64> = a
            .iter()
            .filter(|r| r.op == Op::Get && r.workload == 2)
            .map(|r| r.time - born[&r.object])
            .collect();
        let in_band = late
            .iter()
            .filter(|&&x| (3.0 * HOUR..4.0 * HOUR).contains(&x))
            .count();
        assert!(
            in_band as f64 > 0.5 * late.len() as f64,
            "{in_band} of {}",
            late.len()
        );
        // cold-big objects are big.
        let big = a
            .iter()
            .find(|r| r.workload == 3 && r.op == Op::Put)
            .unwrap();
        assert!(big.size > 1_000_000);
    }

    #[test]
    fn starting_late_censors_and_keeps_the_rest() {
        let all: Vec<Request> = Generator::default_mix(4.0 * HOUR, 0.1, 5)
            .unwrap()
            .collect();
        let late: Vec<Request> = Generator::default_mix(4.0 * HOUR, 0.1, 5)
            .unwrap()
            .starting_at(HOUR)
            .collect();
        // The same requests from one hour on, with creation times for the
        // objects created before.
        let tail: Vec<&Request> = all.iter().filter(|r| r.time >= HOUR).collect();
        assert_eq!(tail.len(), late.len());
        let mut censored = 0;
        for (a, b) in tail.iter().zip(&late) {
            assert_eq!((a.time, a.op, a.object), (b.time, b.op, b.object));
            if let Some(c) = b.create_time {
                assert!(c < HOUR && b.op != Op::Put);
                censored += 1;
            }
        }
        assert!(censored > 100, "{censored}");
        assert!(late.iter().all(|r| r.time >= HOUR));
    }

    #[test]
    fn lifetime_deletes_and_bad_specs() {
        let mut s = default_workloads();
        s.truncate(1);
        s[0].lifetime = Some(600.0);
        let reqs: Vec<Request> = Generator::new(s.clone(), 3600.0, 1.0, 1).unwrap().collect();
        assert!(reqs.iter().any(|r| r.op == Op::Delete));
        let mut bad = s.clone();
        bad[0].size_median = 0.0;
        assert!(Generator::new(bad, 10.0, 1.0, 1).is_err());
        assert!(Generator::new(s.clone(), -1.0, 1.0, 1).is_err());
        let mut dup = s.clone();
        dup.push(s[0].clone());
        assert!(Generator::new(dup, 10.0, 1.0, 1).is_err());
    }
}
