//! Building the age histograms of every workload from a stream of requests
//! (§4.1 and §8.7).
//!
//! One pass over a time-ordered trace keeps a small state per live object
//! (size, creation time, and for LRU age the time of its last read and its
//! largest gap so far) and accumulates, for the requests inside the window:
//!
//! * bytes stored by age: the time integral of each object's bytes, split by
//!   the age bucket it was in at each instant, divided by the window length
//!   (the time-averaged size of the workload's data of each age);
//! * reads by age: each read counted in the bucket of the object's age at the
//!   moment of the read, divided by the window length (reads per second).
//!
//! **FIFO age** is the time since creation: the request's `create_time` when
//! the trace records it, else the time of the put that created the object.
//! An object read before any put of it (and with no creation time) is taken
//! as created when first seen; that first read is counted at infinite age
//! (it could not have been a flash hit under insertion on write).
//!
//! **LRU age** at time t is `max(t1−t0, …, tn−tn−1, t−tn)` over the reads
//! `t1..tn` since creation `t0`. When an object was created before the trace
//! starts (`t_S`), the age is censored and two bounds are kept: the upper
//! bound age assumes no reads between creation and `t_S` (infinite if the
//! creation time is unknown), the lower bound age assumes reads right up to
//! `t_S`.
//!
//! **Sampling** (§4.1): reads can be sampled at a rate for the FIFO read
//! histogram, as Dapper samples RPCs (bytes stored by FIFO age come from the
//! creation times of all objects, as Janus scans file system metadata); LRU
//! ages need every read of an object, so they are computed on objects
//! sampled by a hash of their id. Sampled counts are scaled back by the
//! inverse rate.

use std::collections::HashMap;

use strata_trace::{Op, Request};

use crate::age::{AgeBuckets, AgeHistogram};
use crate::error::{ProvisionError, Result};

/// Which requests and objects to look at.
#[derive(Clone, Debug)]
pub struct CollectConfig {
    /// The shared age buckets.
    pub buckets: AgeBuckets,
    /// Start of the window in trace seconds (`None`: the trace's first request).
    pub start: Option<f64>,
    /// End of the window (exclusive; `None`: the trace's last request).
    pub end: Option<f64>,
    /// Fraction of reads counted in the FIFO read histogram (0 < r ≤ 1).
    pub read_sample_rate: f64,
    /// Fraction of objects (by hash of id) tracked for LRU age (0 < r ≤ 1).
    pub object_sample_rate: f64,
    /// Seed of the sampling hashes.
    pub seed: u64,
}

impl CollectConfig {
    /// Whole trace, no sampling, the given buckets.
    pub fn new(buckets: AgeBuckets) -> CollectConfig {
        CollectConfig {
            buckets,
            start: None,
            end: None,
            read_sample_rate: 1.0,
            object_sample_rate: 1.0,
            seed: 0,
        }
    }
}

/// The measured statistics of one workload over the window.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadStats {
    /// The workload id.
    pub id: u32,
    /// Bytes stored and reads by FIFO age.
    pub fifo: AgeHistogram,
    /// Bytes stored and reads by upper-bound LRU age.
    pub lru_age_upper: AgeHistogram,
    /// Bytes stored and reads by lower-bound LRU age.
    pub lru_age_lower: AgeHistogram,
    /// Reads per second (every read of the window, unsampled).
    pub read_ops_per_s: f64,
    /// Puts per second.
    pub write_ops_per_s: f64,
    /// Bytes of new data written per second.
    pub write_bytes_per_s: f64,
    /// Objects seen (created or read) in the trace up to the window end.
    pub objects: u64,
    /// Of those, objects created before the trace started or of unknown
    /// creation (their LRU age is censored).
    pub censored_objects: u64,
}

/// The statistics of every workload plus what the pass learnt of the trace.
#[derive(Clone, Debug)]
pub struct Collected {
    /// Per workload, sorted by id.
    pub workloads: Vec<WorkloadStats>,
    /// The window actually used (start, end) in trace seconds.
    pub window: (f64, f64),
    /// The time of the trace's first request.
    pub trace_start: f64,
    /// The time of the last request read (the trace end if it was read whole).
    pub last_time: f64,
    /// Requests read.
    pub requests: u64,
    /// The sampling rates applied (reads for FIFO, objects for LRU).
    pub read_sample_rate: f64,
    /// See [`CollectConfig::object_sample_rate`].
    pub object_sample_rate: f64,
}

#[derive(Clone, Copy, Debug)]
struct LruState {
    last_up: f64,
    gap_up: f64,
    last_lo: f64,
    gap_lo: f64,
}

#[derive(Clone, Debug)]
struct Obj {
    size: f64,
    workload: u32,
    create: f64,
    seen: f64,
    lru: Option<LruState>,
}

#[derive(Clone, Debug)]
struct Acc {
    fifo: AgeHistogram,
    up: AgeHistogram,
    lo: AgeHistogram,
    reads: u64,
    put_ops: u64,
    put_bytes: f64,
    objects: u64,
    censored: u64,
}

impl Acc {
    fn new(n: usize) -> Acc {
        Acc {
            fifo: AgeHistogram::new(n),
            up: AgeHistogram::new(n),
            lo: AgeHistogram::new(n),
            reads: 0,
            put_ops: 0,
            put_bytes: 0.0,
            objects: 0,
            censored: 0,
        }
    }
}

/// A 64-bit mix (splitmix64's finaliser), used for sampling decisions so
/// they are deterministic and independent of request order.
pub fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A uniform number in [0, 1) from a hash.
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The streaming histogram builder.
#[derive(Debug)]
pub struct Collector {
    cfg: CollectConfig,
    objects: HashMap<u64, Obj>,
    acc: HashMap<u32, Acc>,
    trace_start: Option<f64>,
    last_time: f64,
    requests: u64,
    w0: f64,
    w1: f64,
}

impl Collector {
    /// A collector for the given window and sampling.
    pub fn new(cfg: CollectConfig) -> Result<Collector> {
        for (name, r) in [
            ("read sample rate", cfg.read_sample_rate),
            ("object sample rate", cfg.object_sample_rate),
        ] {
            if !(r > 0.0 && r <= 1.0) {
                return Err(ProvisionError::BadParameter(format!(
                    "{name} must be in (0, 1], got {r}"
                )));
            }
        }
        if let (Some(s), Some(e)) = (cfg.start, cfg.end) {
            if e <= s {
                return Err(ProvisionError::EmptyWindow {
                    name: "train",
                    start: s,
                    end: e,
                });
            }
        }
        Ok(Collector {
            w0: cfg.start.unwrap_or(f64::NEG_INFINITY),
            w1: cfg.end.unwrap_or(f64::INFINITY),
            cfg,
            objects: HashMap::new(),
            acc: HashMap::new(),
            trace_start: None,
            last_time: f64::NEG_INFINITY,
            requests: 0,
        })
    }

    /// Feeds one request. Returns `false` once the request lies at or past
    /// the window end (the caller can stop reading: later requests cannot
    /// change the result).
    pub fn push(&mut self, r: &Request) -> bool {
        let t = r.time;
        if t >= self.w1 {
            self.last_time = self.last_time.max(t);
            return false;
        }
        self.requests += 1;
        let ts = *self.trace_start.get_or_insert(t);
        self.last_time = self.last_time.max(t);
        let in_window = t >= self.w0;
        let n = self.cfg.buckets.len();
        let obj_rate = self.cfg.object_sample_rate;
        let lru_sampled =
            obj_rate >= 1.0 || unit(mix64(r.object ^ self.cfg.seed.rotate_left(17))) < obj_rate;
        match r.op {
            Op::Put => {
                if let Some(old) = self.objects.remove(&r.object) {
                    self.flush(&old, t);
                }
                let create = r.create_time.map_or(t, |c| c.min(t));
                let acc = self.acc.entry(r.workload).or_insert_with(|| Acc::new(n));
                acc.objects += 1;
                if create < ts {
                    acc.censored += 1;
                }
                if in_window {
                    acc.put_ops += 1;
                    acc.put_bytes += r.size as f64;
                }
                self.objects.insert(
                    r.object,
                    Obj {
                        size: r.size as f64,
                        workload: r.workload,
                        create,
                        seen: t,
                        lru: lru_sampled.then_some(LruState {
                            last_up: create,
                            gap_up: 0.0,
                            last_lo: create.max(ts),
                            gap_lo: 0.0,
                        }),
                    },
                );
            }
            Op::Delete => {
                if let Some(old) = self.objects.remove(&r.object) {
                    self.flush(&old, t);
                }
            }
            Op::Get => {
                let mut first_unknown = false;
                let mut obj = match self.objects.remove(&r.object) {
                    Some(o) => o,
                    None => {
                        let acc = self.acc.entry(r.workload).or_insert_with(|| Acc::new(n));
                        acc.objects += 1;
                        let known = r.create_time.is_some();
                        let create = r.create_time.map_or(t, |c| c.min(t));
                        if !known || create < ts {
                            acc.censored += 1;
                        }
                        first_unknown = !known;
                        Obj {
                            size: r.size as f64,
                            workload: r.workload,
                            create,
                            seen: t,
                            lru: lru_sampled.then_some(LruState {
                                last_up: create,
                                gap_up: if known { 0.0 } else { f64::INFINITY },
                                last_lo: create.max(ts),
                                gap_lo: 0.0,
                            }),
                        }
                    }
                };
                self.flush(&obj, t);
                obj.seen = obj.seen.max(t);
                let buckets = &self.cfg.buckets;
                let acc = self.acc.entry(obj.workload).or_insert_with(|| Acc::new(n));
                if in_window {
                    acc.reads += 1;
                    let rr = self.cfg.read_sample_rate;
                    let sampled = rr >= 1.0
                        || unit(mix64(
                            r.object ^ t.to_bits().rotate_left(29) ^ self.cfg.seed,
                        )) < rr;
                    if sampled {
                        let age = if first_unknown {
                            f64::INFINITY
                        } else {
                            (t - obj.create).max(0.0)
                        };
                        acc.fifo.add_read(buckets, age, 1.0 / rr);
                    }
                }
                if let Some(l) = obj.lru.as_mut() {
                    let age_up = l.gap_up.max(t - l.last_up);
                    let age_lo = l.gap_lo.max(t - l.last_lo);
                    if in_window {
                        acc.up.add_read(buckets, age_up, 1.0 / obj_rate);
                        acc.lo.add_read(buckets, age_lo, 1.0 / obj_rate);
                    }
                    l.gap_up = age_up;
                    l.last_up = t;
                    l.gap_lo = age_lo;
                    l.last_lo = t;
                }
                self.objects.insert(r.object, obj);
            }
        }
        true
    }

    /// Accumulates an object's bytes from the time it was last accounted up
    /// to `t` (clipped to the window).
    fn flush(&mut self, o: &Obj, t: f64) {
        let s = o.seen.max(self.w0);
        let e = t.min(self.w1);
        if e <= s {
            return;
        }
        let n = self.cfg.buckets.len();
        let b = &self.cfg.buckets;
        let acc = self.acc.entry(o.workload).or_insert_with(|| Acc::new(n));
        acc.fifo.add_ramp(b, s - o.create, e - o.create, o.size);
        if let Some(l) = o.lru {
            let w = o.size / self.cfg.object_sample_rate;
            lru_piece(&mut acc.up, b, l.last_up, l.gap_up, s, e, w);
            lru_piece(&mut acc.lo, b, l.last_lo, l.gap_lo, s, e, w);
        }
    }

    /// Ends the pass: accounts every live object up to the window end and
    /// scales the histograms to averages and rates.
    pub fn finish(mut self) -> Result<Collected> {
        let Some(ts) = self.trace_start else {
            return Err(ProvisionError::EmptyTrace(
                match (self.cfg.start, self.cfg.end) {
                    (None, None) => String::new(),
                    _ => " before the end of the training window".into(),
                },
            ));
        };
        let w0 = self.cfg.start.unwrap_or(ts);
        let w1 = self.cfg.end.unwrap_or(self.last_time);
        // The window must lie within the requests seen (up to a slack of 1% of
        // its length: a trace's first and last requests fall a little inside
        // its true span).
        let slack = 0.01 * (w1 - w0).max(0.0);
        if w0 < ts - slack || w1 > self.last_time + slack {
            return Err(ProvisionError::WindowOutsideTrace {
                name: "train",
                start: w0,
                end: w1,
                trace_start: ts,
                trace_end: self.last_time,
            });
        }
        if w1 <= w0 {
            return Err(ProvisionError::EmptyTrace(format!(
                ": all requests are at one instant ({w0} s), so no rate can be measured"
            )));
        }
        self.w0 = w0;
        self.w1 = w1;
        let objects = std::mem::take(&mut self.objects);
        for o in objects.values() {
            self.flush(o, w1);
        }
        let len = w1 - w0;
        let mut workloads: Vec<WorkloadStats> = self
            .acc
            .drain()
            .map(|(id, mut a)| {
                a.fifo.scale(len);
                a.up.scale(len);
                a.lo.scale(len);
                WorkloadStats {
                    id,
                    fifo: a.fifo,
                    lru_age_upper: a.up,
                    lru_age_lower: a.lo,
                    read_ops_per_s: a.reads as f64 / len,
                    write_ops_per_s: a.put_ops as f64 / len,
                    write_bytes_per_s: a.put_bytes / len,
                    objects: a.objects,
                    censored_objects: a.censored,
                }
            })
            .collect();
        workloads.sort_by_key(|w| w.id);
        Ok(Collected {
            workloads,
            window: (w0, w1),
            trace_start: ts,
            last_time: self.last_time,
            requests: self.requests,
            read_sample_rate: self.cfg.read_sample_rate,
            object_sample_rate: self.cfg.object_sample_rate,
        })
    }
}

/// Adds the bytes of one object to an LRU-age histogram over `[s, e)`:
/// its age is `max(gap, t − last)`.
fn lru_piece(h: &mut AgeHistogram, b: &AgeBuckets, last: f64, gap: f64, s: f64, e: f64, w: f64) {
    if gap.is_infinite() {
        h.add_constant(b, f64::INFINITY, e - s, w);
        return;
    }
    let knee = last + gap;
    let c_end = e.min(knee);
    if c_end > s {
        h.add_constant(b, gap, c_end - s, w);
    }
    let r_start = s.max(knee);
    if e > r_start {
        h.add_ramp(b, r_start - last, e - last, w);
    }
}

/// Runs a collector over an iterator of requests.
pub fn collect<I, E>(cfg: CollectConfig, requests: I) -> Result<Collected>
where
    I: IntoIterator<Item = std::result::Result<Request, E>>,
    ProvisionError: From<E>,
{
    let mut c = Collector::new(cfg)?;
    for r in requests {
        let r = r?;
        if !c.push(&r) {
            break;
        }
    }
    c.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, op: Op, obj: u64, size: u64) -> Result<Request> {
        Ok(Request::new(t, op, obj, 0, size))
    }

    fn buckets() -> AgeBuckets {
        AgeBuckets::from_bounds((0..=20).map(|i| i as f64 * 10.0).collect()).unwrap()
    }

    #[test]
    fn fifo_bytes_and_reads() {
        // One 100-byte object created at 0, read at 15 and 35; window 0..40.
        let reqs = vec![
            req(0.0, Op::Put, 1, 100),
            req(15.0, Op::Get, 1, 100),
            req(35.0, Op::Get, 1, 100),
            req(40.0, Op::Get, 2, 1),
        ];
        let mut cfg = CollectConfig::new(buckets());
        cfg.end = Some(40.0);
        let c = collect(cfg, reqs).unwrap();
        let w = &c.workloads[0];
        // 100 bytes spend 10 s in each of the first four buckets: 25 bytes avg each.
        for k in 0..4 {
            assert!((w.fifo.bytes[k] - 25.0).abs() < 1e-9, "{:?}", w.fifo.bytes);
        }
        assert!((w.fifo.reads[1] - 1.0 / 40.0).abs() < 1e-12);
        assert!((w.fifo.reads[3] - 1.0 / 40.0).abs() < 1e-12);
        assert!((w.write_bytes_per_s - 100.0 / 40.0).abs() < 1e-12);
        // LRU age: gap 15 until 30, then rising to 20 at 35 (gap 20), const 20 after.
        // Read at 15 has age 15 (bucket 1), read at 35 has age 20 (bucket 2).
        assert!((w.lru_age_lower.reads[1] - 1.0 / 40.0).abs() < 1e-12);
        assert!((w.lru_age_lower.reads[2] - 1.0 / 40.0).abs() < 1e-12);
        assert_eq!(w.lru_age_lower, w.lru_age_upper);
        // Bytes: [0,10) age 0..10 -> b0 10s; [10,15) -> b1 5s; [15,25) const 15 -> b1 10s;
        // [25,30) 10..15?? no: after read at 15 gap=15, age = max(15, t-15): const 15 until 30
        // => [15,30) b1 15 s; [30,35) age 15..20 -> b1 5 s; [35,40) const 20 -> b2 5 s.
        let b = &w.lru_age_lower.bytes;
        assert!((b[0] - 100.0 * 10.0 / 40.0).abs() < 1e-9, "{b:?}");
        assert!((b[1] - 100.0 * 25.0 / 40.0).abs() < 1e-9, "{b:?}");
        assert!((b[2] - 100.0 * 5.0 / 40.0).abs() < 1e-9, "{b:?}");
    }

    #[test]
    fn censoring_bounds() {
        // Object created at -100 (before the trace starts at 0), read at 5.
        let mut r = Request::new(0.0, Op::Get, 9, 0, 10);
        r.create_time = Some(-100.0);
        let mut r2 = r.clone();
        r2.time = 5.0;
        let reqs = vec![Ok::<_, ProvisionError>(r), Ok(r2), req(10.0, Op::Get, 3, 0)];
        let c = collect(CollectConfig::new(buckets()), reqs).unwrap();
        let w = &c.workloads[0];
        // Object 9 (created before the trace) and object 3 (creation unknown).
        assert_eq!(w.censored_objects, 2);
        // Upper-bound age at the read at 0: 100 s (no reads since creation);
        // lower-bound age: 0 (reads up to the trace start).
        assert!(w.lru_age_upper.reads[10] > 0.0);
        assert!(w.lru_age_lower.reads[0] > 0.0);
        // Unknown creation: upper bound age is infinite.
        assert!(w.lru_age_upper.reads[20] > 0.0);
    }

    #[test]
    fn window_outside_trace() {
        let reqs = vec![req(0.0, Op::Put, 1, 1), req(5.0, Op::Get, 1, 1)];
        let mut cfg = CollectConfig::new(buckets());
        cfg.start = Some(1.0);
        cfg.end = Some(50.0);
        let err = collect(cfg, reqs).unwrap_err();
        assert!(
            matches!(err, ProvisionError::WindowOutsideTrace { .. }),
            "{err}"
        );
        let empty: Vec<Result<Request>> = vec![];
        assert!(matches!(
            collect(CollectConfig::new(buckets()), empty),
            Err(ProvisionError::EmptyTrace(_))
        ));
    }
}
