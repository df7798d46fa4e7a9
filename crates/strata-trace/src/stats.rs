//! Trace statistics: requests, unique objects, working-set bytes, op mix,
//! size percentiles and time span, for the whole trace and per workload.
//!
//! An object's size is its size at its first request (as libCacheSim and
//! EXPECTED.md count the working set). Memory grows with the number of
//! distinct objects (one hash-set entry each) and distinct sizes, not with
//! the number of requests.

use crate::{Op, Request};
use rustc_hash::{FxHashMap, FxHashSet};

/// Percentiles of a size distribution (bytes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sizes {
    /// Smallest.
    pub min: u64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
    /// Mean.
    pub mean: f64,
}

/// The summary of a whole trace or of one workload.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Summary {
    /// Requests.
    pub requests: u64,
    /// Get requests.
    pub gets: u64,
    /// Put requests.
    pub puts: u64,
    /// Delete requests.
    pub deletes: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Working-set bytes: the sum over distinct objects of the size at
    /// their first request.
    pub working_set_bytes: u64,
    /// Bytes requested: the sum of every request's bytes (its length for a
    /// ranged request, else its size).
    pub requested_bytes: u64,
    /// Time of the first request (seconds).
    pub first_time: f64,
    /// Time of the last request (seconds).
    pub last_time: f64,
    /// Request sizes (one sample per request).
    pub request_sizes: Sizes,
    /// Object sizes (one sample per distinct object, size at first request).
    pub object_sizes: Sizes,
}

impl Summary {
    /// Seconds from the first to the last request.
    pub fn span(&self) -> f64 {
        if self.requests == 0 {
            0.0
        } else {
            self.last_time - self.first_time
        }
    }
}

/// Statistics of a trace.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TraceStats {
    /// The whole trace.
    pub total: Summary,
    /// Per workload, by workload id: (id, name if the trace named it, summary).
    pub workloads: Vec<(u32, Option<String>, Summary)>,
}

#[derive(Default)]
struct Acc {
    requests: u64,
    ops: [u64; 3],
    wss: u64,
    requested: u64,
    first_time: f64,
    last_time: f64,
    req_sizes: FxHashMap<u64, u64>,
    obj_sizes: FxHashMap<u64, u64>,
}

impl Acc {
    #[inline]
    fn add(&mut self, r: &Request) {
        if self.requests == 0 {
            self.first_time = r.time;
            self.last_time = r.time;
        }
        self.requests += 1;
        self.ops[match r.op {
            Op::Get => 0,
            Op::Put => 1,
            Op::Delete => 2,
        }] += 1;
        self.requested += r.bytes();
        // Times are not always sorted; the span is first to last seen.
        self.first_time = self.first_time.min(r.time);
        self.last_time = self.last_time.max(r.time);
        *self.req_sizes.entry(r.size).or_insert(0) += 1;
    }

    #[inline]
    fn new_object(&mut self, size: u64) {
        self.wss += size;
        *self.obj_sizes.entry(size).or_insert(0) += 1;
    }

    fn summary(&self) -> Summary {
        let objects = self.obj_sizes.values().sum();
        Summary {
            requests: self.requests,
            gets: self.ops[0],
            puts: self.ops[1],
            deletes: self.ops[2],
            objects,
            working_set_bytes: self.wss,
            requested_bytes: self.requested,
            first_time: self.first_time,
            last_time: self.last_time,
            request_sizes: percentiles(&self.req_sizes),
            object_sizes: percentiles(&self.obj_sizes),
        }
    }
}

fn percentiles(hist: &FxHashMap<u64, u64>) -> Sizes {
    let mut v: Vec<(u64, u64)> = hist.iter().map(|(&s, &c)| (s, c)).collect();
    v.sort_unstable();
    let n: u64 = v.iter().map(|x| x.1).sum();
    if n == 0 {
        return Sizes::default();
    }
    let sum: f64 = v.iter().map(|&(s, c)| s as f64 * c as f64).sum();
    // The nearest-rank percentile: the smallest size with at least p% of
    // the samples at or below it.
    let at = |p: f64| -> u64 {
        let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as u64;
        let mut seen = 0;
        for &(s, c) in &v {
            seen += c;
            if seen >= rank {
                return s;
            }
        }
        v[v.len() - 1].0
    };
    Sizes {
        min: v[0].0,
        p50: at(50.0),
        p90: at(90.0),
        p99: at(99.0),
        max: v[v.len() - 1].0,
        mean: sum / n as f64,
    }
}

/// Accumulates [`TraceStats`] one request at a time.
#[derive(Default)]
pub struct StatsCollector {
    total: Acc,
    /// Every distinct object of the trace.
    seen: FxHashSet<u64>,
    /// Per workload accumulators and object sets. While the trace has shown
    /// a single workload, its object set is `seen` itself (not duplicated).
    per: FxHashMap<u32, (Acc, FxHashSet<u64>)>,
    only: Option<u32>,
}

impl StatsCollector {
    /// An empty collector.
    pub fn new() -> StatsCollector {
        StatsCollector::default()
    }

    /// Counts one request.
    pub fn add(&mut self, r: &Request) {
        self.total.add(r);
        let new_global = self.seen.insert(r.object);
        if new_global {
            self.total.new_object(r.size);
        }
        match self.only {
            None if self.per.is_empty() => self.only = Some(r.workload),
            Some(w) if w != r.workload => {
                // A second workload: the first one's objects so far are
                // exactly the global set.
                if let Some(e) = self.per.get_mut(&w) {
                    e.1 = self.seen.clone();
                    if new_global {
                        e.1.remove(&r.object);
                    }
                }
                self.only = None;
            }
            _ => {}
        }
        let single = self.only.is_some();
        let e = self.per.entry(r.workload).or_default();
        e.0.add(r);
        let new_here = if single {
            new_global
        } else {
            e.1.insert(r.object)
        };
        if new_here {
            e.0.new_object(r.size);
        }
    }

    /// The statistics so far; `names` maps workload ids to names.
    pub fn finish(&self, names: &[String]) -> TraceStats {
        let mut workloads: Vec<(u32, Option<String>, Summary)> = self
            .per
            .iter()
            .map(|(&id, (acc, _))| {
                let name = names.get(id as usize).filter(|n| !n.is_empty()).cloned();
                (id, name, acc.summary())
            })
            .collect();
        workloads.sort_by_key(|w| w.0);
        TraceStats {
            total: self.total.summary(),
            workloads,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_first_sizes_and_workloads() {
        let mut c = StatsCollector::new();
        let reqs = [
            Request::new(1.0, Op::Get, 1, 0, 100),
            Request::new(2.0, Op::Get, 1, 0, 999), // size change: first size counts
            Request::new(3.0, Op::Put, 2, 0, 50),
            Request::new(4.0, Op::Get, 3, 1, 10),
            Request::new(5.0, Op::Delete, 1, 1, 100), // object 1 also in workload 1
            Request::new(6.0, Op::Get, 2, 0, 50),
        ];
        for r in &reqs {
            c.add(r);
        }
        let s = c.finish(&["photos".into(), "thumbs".into()]);
        assert_eq!(s.total.requests, 6);
        assert_eq!(s.total.objects, 3);
        assert_eq!(s.total.working_set_bytes, 160);
        assert_eq!((s.total.gets, s.total.puts, s.total.deletes), (4, 1, 1));
        assert_eq!(s.total.span(), 5.0);
        assert_eq!(s.workloads.len(), 2);
        let (id, name, w0) = &s.workloads[0];
        assert_eq!((*id, name.as_deref()), (0, Some("photos")));
        assert_eq!((w0.requests, w0.objects, w0.working_set_bytes), (4, 2, 150));
        let (_, name, w1) = &s.workloads[1];
        assert_eq!(name.as_deref(), Some("thumbs"));
        assert_eq!((w1.requests, w1.objects, w1.working_set_bytes), (2, 2, 110));
        assert_eq!(s.total.request_sizes.max, 999);
        assert_eq!(s.total.request_sizes.min, 10);
        assert_eq!(s.total.object_sizes.p50, 50);
    }

    #[test]
    fn nearest_rank_percentiles() {
        let mut h = FxHashMap::default();
        for s in 1..=100u64 {
            h.insert(s, 1);
        }
        let p = percentiles(&h);
        assert_eq!((p.min, p.p50, p.p90, p.p99, p.max), (1, 50, 90, 99, 100));
        assert_eq!(p.mean, 50.5);
    }
}
