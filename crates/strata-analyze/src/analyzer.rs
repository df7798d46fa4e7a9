//! The one-pass analyzer.

use crate::hist::{SizeHist, SizeSummary, TimeHist};
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use strata_trace::{Op, Request};

/// What to compute and how much memory to spend.
#[derive(Clone, Debug, Serialize)]
pub struct AnalyzeConfig {
    /// Upper bounds of the lifetime size classes, ascending; one more class
    /// holds everything above the last (default 16 MiB, 64 MiB: the study's
    /// small, medium and large files).
    pub size_classes: Vec<u64>,
    /// Offset distances of the locality map in bytes (0 = the same data).
    pub distances: Vec<u64>,
    /// Recency windows (seconds) at which the locality map is tabulated.
    pub windows: Vec<f64>,
    /// Objects whose state is kept exactly; past this, objects are sampled
    /// by a hash of their id and the sampling rate halves as needed.
    pub max_objects: usize,
    /// Interval (seconds) over which request rates are measured for
    /// IOPS per GiB; the peak is the 95th percentile of intervals (Janus).
    pub iops_interval_s: f64,
    /// The break-even IOPS per GiB above which a workload is cheaper all on
    /// flash (Janus §5: 1.5).
    pub break_even_iops_per_gib: f64,
}

impl Default for AnalyzeConfig {
    fn default() -> Self {
        AnalyzeConfig {
            size_classes: vec![16 << 20, 64 << 20],
            distances: vec![0, 1 << 10, 64 << 10, 1 << 20],
            windows: vec![
                1.0, 10.0, 60.0, 240.0, 960.0, 1920.0, 3600.0, 7200.0, 14400.0, 28800.0,
            ],
            max_objects: 1_000_000,
            iops_interval_s: 600.0,
            break_even_iops_per_gib: 1.5,
        }
    }
}

/// Errors in the analysis settings.
#[derive(Debug, thiserror::Error)]
pub enum AnalyzeError {
    /// A setting is out of range.
    #[error("invalid analysis setting: {0}")]
    Invalid(String),
}

impl AnalyzeConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), AnalyzeError> {
        let bad = |s: String| Err(AnalyzeError::Invalid(s));
        if self.size_classes.windows(2).any(|w| w[0] >= w[1]) {
            return bad("size classes must be strictly ascending".into());
        }
        if self.size_classes.first() == Some(&0) {
            return bad("a size class bound must be positive".into());
        }
        if self.distances.is_empty() || self.distances.windows(2).any(|w| w[0] >= w[1]) {
            return bad("locality distances must be given and strictly ascending".into());
        }
        if self.windows.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
            return bad("locality windows must be positive".into());
        }
        if self.max_objects < 1000 {
            return bad(format!(
                "max objects {} is too small to sample from (use at least 1000)",
                self.max_objects
            ));
        }
        if !(self.iops_interval_s.is_finite() && self.iops_interval_s > 0.0) {
            return bad("the IOPS interval must be positive".into());
        }
        if !(self.break_even_iops_per_gib.is_finite() && self.break_even_iops_per_gib > 0.0) {
            return bad("the break-even IOPS per GiB must be positive".into());
        }
        Ok(())
    }

    fn class_of(&self, size: u64) -> usize {
        self.size_classes
            .iter()
            .position(|&b| size < b)
            .unwrap_or(self.size_classes.len())
    }

    /// Labels of the size classes, e.g. `0–16 MiB`.
    pub fn class_labels(&self) -> Vec<String> {
        let mut out = Vec::new();
        let mut lo = 0;
        for &b in &self.size_classes {
            out.push(format!("{}–{}", short_bytes(lo), short_bytes(b)));
            lo = b;
        }
        out.push(format!("{}+", short_bytes(lo)));
        out
    }
}

/// A compact byte count: `16 MiB`, `1 KiB`, `0`.
pub fn short_bytes(b: u64) -> String {
    const U: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if b == 0 {
        return "0".into();
    }
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < U.len() {
        v /= 1024.0;
        i += 1;
    }
    if (v - v.round()).abs() < 1e-9 {
        format!("{} {}", v.round(), U[i])
    } else {
        format!("{v:.1} {}", U[i])
    }
}

/// Recent reads remembered per object for the locality map.
const RECENT: usize = 4;

/// Read-count buckets of the read-heat chart: lower bounds.
pub const HEAT_BUCKETS: [u32; 9] = [0, 1, 2, 3, 4, 8, 16, 32, 64];

fn heat_bucket(reads: u32) -> usize {
    HEAT_BUCKETS.iter().rposition(|&b| reads >= b).unwrap_or(0)
}

#[derive(Clone, Debug)]
struct Obj {
    size: u64,
    level: u8,
    /// Creation time (trace time), NaN when not created in the trace.
    created: f64,
    /// Time the object was first seen, for ages when it has no creation.
    first_seen: f64,
    create_class: u8,
    reads: u32,
    read_bytes: u64,
    recent: [(f64, u64, u64); RECENT],
    nrecent: u8,
    next: u8,
}

/// Statistics of the objects of one sampling level (see [`Analyzer`]).
#[derive(Clone, Debug, Default)]
struct Level {
    /// Per distance: time since the most recent read within the distance.
    locality: Vec<TimeHist>,
    /// Reads by the age of the object read.
    popularity: TimeHist,
    /// Per size class: lifetimes of created objects (never = not deleted).
    lifetimes: Vec<TimeHist>,
    /// Per workload: object sizes at first sight.
    sizes: BTreeMap<u32, SizeHist>,
    /// Per workload: bytes of distinct objects seen.
    footprint: BTreeMap<u32, u128>,
    /// Read heat: bytes of data and bytes of reads per heat bucket.
    heat_data: [u128; HEAT_BUCKETS.len()],
    heat_io: [u128; HEAT_BUCKETS.len()],
    objects: u64,
}

#[derive(Clone, Debug, Default)]
struct OpCounts {
    requests: [u64; 3],
    bytes: [u128; 3],
}

/// Walks a trace once and characterises it.
///
/// Memory is bounded by `max_objects`: each object gets a level, the number
/// of leading zero bits of a hash of its id, so a fraction 2^-c of objects
/// has level ≥ c. Object-level statistics are kept per level; when more
/// than `max_objects` objects are tracked, the cut-off c rises by one, the
/// objects and statistics of the lowest level are dropped, and what remains
/// is an exact analysis of a uniform 2^-c sample of the objects (SHARDS-
/// style spatial sampling). Op mix and request rates are always exact.
pub struct Analyzer {
    cfg: AnalyzeConfig,
    objs: HashMap<u64, Obj>,
    levels: Vec<Level>,
    cutoff: u8,
    ops: BTreeMap<u32, OpCounts>,
    intervals: BTreeMap<u32, BTreeMap<u64, u64>>,
    requests: u64,
    first: Option<f64>,
    last: f64,
    has_create_time: bool,
    has_offsets: bool,
    peak_tracked: usize,
}

fn level_of(object: u64) -> u8 {
    let mut x = object.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    x.leading_zeros().min(63) as u8
}

impl Analyzer {
    /// A fresh analyzer.
    pub fn new(cfg: AnalyzeConfig) -> Result<Analyzer, AnalyzeError> {
        cfg.validate()?;
        Ok(Analyzer {
            cfg,
            objs: HashMap::new(),
            levels: Vec::new(),
            cutoff: 0,
            ops: BTreeMap::new(),
            intervals: BTreeMap::new(),
            requests: 0,
            first: None,
            last: f64::NEG_INFINITY,
            has_create_time: false,
            has_offsets: false,
            peak_tracked: 0,
        })
    }

    fn level(&mut self, l: u8) -> &mut Level {
        let l = l as usize;
        while self.levels.len() <= l {
            let classes = self.cfg.size_classes.len() + 1;
            self.levels.push(Level {
                locality: vec![TimeHist::default(); self.cfg.distances.len()],
                lifetimes: vec![TimeHist::default(); classes],
                ..Level::default()
            });
        }
        &mut self.levels[l]
    }

    /// Analyses one request.
    pub fn push(&mut self, r: &Request) {
        self.requests += 1;
        let t = if r.time.is_finite() {
            r.time
        } else {
            self.last.max(0.0)
        };
        if self.first.is_none() {
            self.first = Some(t);
        }
        self.last = self.last.max(t);
        let bytes = r.bytes();
        let op = match r.op {
            Op::Get => 0,
            Op::Put => 1,
            Op::Delete => 2,
        };
        let oc = self.ops.entry(r.workload).or_default();
        oc.requests[op] += 1;
        if r.op != Op::Delete {
            oc.bytes[op] += u128::from(bytes);
        }
        let start = self.first.unwrap_or(0.0);
        let slot = ((t - start).max(0.0) / self.cfg.iops_interval_s) as u64;
        *self
            .intervals
            .entry(r.workload)
            .or_default()
            .entry(slot)
            .or_insert(0) += 1;
        if r.offset.is_some() {
            self.has_offsets = true;
        }
        if r.create_time.is_some() {
            self.has_create_time = true;
        }

        let level = level_of(r.object);
        if level < self.cutoff {
            return;
        }
        let class = self.cfg.class_of(r.size) as u8;
        #[allow(clippy::map_entry)]
        if !self.objs.contains_key(&r.object) {
            if r.op == Op::Delete {
                return;
            }
            let created = match (r.op, r.create_time) {
                (_, Some(c)) if c.is_finite() && c >= start => c,
                (Op::Put, None) => t,
                _ => f64::NAN,
            };
            let obj = Obj {
                size: r.size,
                level,
                created,
                first_seen: t,
                create_class: class,
                reads: 0,
                read_bytes: 0,
                recent: [(0.0, 0, 0); RECENT],
                nrecent: 0,
                next: 0,
            };
            self.objs.insert(r.object, obj);
            let lv = self.level(level);
            lv.objects += 1;
            lv.sizes.entry(r.workload).or_default().add(r.size);
            *lv.footprint.entry(r.workload).or_insert(0) += u128::from(r.size);
            if created.is_finite() {
                lv.lifetimes[class as usize].add_never();
            }
            if self.objs.len() > self.peak_tracked {
                self.peak_tracked = self.objs.len();
            }
            if self.objs.len() > self.cfg.max_objects {
                self.raise_cutoff();
                if level < self.cutoff {
                    return;
                }
            }
        }
        match r.op {
            Op::Get => self.read(r, t, level),
            Op::Put => {
                if let Some(o) = self.objs.get_mut(&r.object) {
                    o.size = r.size;
                }
            }
            Op::Delete => self.delete(r.object, t),
        }
    }

    fn read(&mut self, r: &Request, t: f64, level: u8) {
        let ndist = self.cfg.distances.len();
        let mut best = [f64::INFINITY; 8];
        let mut best_v = Vec::new();
        let best: &mut [f64] = if ndist <= 8 {
            &mut best[..ndist]
        } else {
            best_v.resize(ndist, f64::INFINITY);
            &mut best_v
        };
        let s = r.offset.unwrap_or(0);
        let e = s + r.length.unwrap_or(r.size).max(1);
        let Some(o) = self.objs.get_mut(&r.object) else {
            return;
        };
        for &(tr, rs, re) in &o.recent[..o.nrecent as usize] {
            let dist = if rs < e && s < re {
                0
            } else if re <= s {
                s - re + 1
            } else {
                rs - e + 1
            };
            let gap = (t - tr).max(0.0);
            for (i, &d) in self.cfg.distances.iter().enumerate() {
                if dist <= d && gap < best[i] {
                    best[i] = gap;
                }
            }
        }
        let slot = o.next as usize;
        o.recent[slot] = (t, s, e);
        o.next = ((slot + 1) % RECENT) as u8;
        o.nrecent = (o.nrecent + 1).min(RECENT as u8);
        o.reads = o.reads.saturating_add(1);
        o.read_bytes += r.bytes();
        let age = if o.created.is_finite() {
            t - o.created
        } else {
            t - o.first_seen
        };
        let best = best.to_vec();
        let lv = self.level(level);
        for (h, g) in lv.locality.iter_mut().zip(best) {
            if g.is_finite() {
                h.add(g);
            } else {
                h.add_never();
            }
        }
        lv.popularity.add(age.max(0.0));
    }

    fn delete(&mut self, object: u64, t: f64) {
        let Some(o) = self.objs.remove(&object) else {
            return;
        };
        let lv = self.level(o.level);
        if o.created.is_finite() {
            let h = &mut lv.lifetimes[o.create_class as usize];
            h.never = h.never.saturating_sub(1);
            h.add((t - o.created).max(0.0));
        }
        let b = heat_bucket(o.reads);
        lv.heat_data[b] += u128::from(o.size);
        lv.heat_io[b] += u128::from(o.read_bytes);
    }

    fn raise_cutoff(&mut self) {
        while self.objs.len() > self.cfg.max_objects && self.cutoff < 63 {
            let c = self.cutoff;
            self.objs.retain(|_, o| o.level > c);
            if let Some(l) = self.levels.get_mut(c as usize) {
                *l = Level::default();
            }
            self.cutoff += 1;
        }
    }

    /// Finishes the pass and returns the analysis.
    pub fn finish(mut self) -> Analysis {
        let live: Vec<(u8, u32, u64, u64)> = self
            .objs
            .values()
            .map(|o| (o.level, o.reads, o.size, o.read_bytes))
            .collect();
        for (level, reads, size, read_bytes) in live {
            let lv = self.level(level);
            let b = heat_bucket(reads);
            lv.heat_data[b] += u128::from(size);
            lv.heat_io[b] += u128::from(read_bytes);
        }
        let cfg = self.cfg.clone();
        let rate = 0.5f64.powi(i32::from(self.cutoff));
        let scale = 1.0 / rate;
        // Merge the levels that survived the sampling.
        let nd = cfg.distances.len();
        let nc = cfg.size_classes.len() + 1;
        let mut locality = vec![TimeHist::default(); nd];
        let mut popularity = TimeHist::default();
        let mut lifetimes = vec![TimeHist::default(); nc];
        let mut sizes: BTreeMap<u32, SizeHist> = BTreeMap::new();
        let mut footprint: BTreeMap<u32, u128> = BTreeMap::new();
        let mut heat_data = [0u128; HEAT_BUCKETS.len()];
        let mut heat_io = [0u128; HEAT_BUCKETS.len()];
        let mut objects = 0u64;
        for lv in self.levels.iter().skip(self.cutoff as usize) {
            for (a, b) in locality.iter_mut().zip(&lv.locality) {
                a.merge(b);
            }
            popularity.merge(&lv.popularity);
            for (a, b) in lifetimes.iter_mut().zip(&lv.lifetimes) {
                a.merge(b);
            }
            for (w, h) in &lv.sizes {
                sizes.entry(*w).or_default().merge(h);
            }
            for (w, f) in &lv.footprint {
                *footprint.entry(*w).or_insert(0) += f;
            }
            for i in 0..HEAT_BUCKETS.len() {
                heat_data[i] += lv.heat_data[i];
                heat_io[i] += lv.heat_io[i];
            }
            objects += lv.objects;
        }
        let first = self.first.unwrap_or(0.0);
        let duration = if self.requests > 0 {
            (self.last - first).max(0.0)
        } else {
            0.0
        };

        let reads_sampled = locality.first().map(|h| h.total()).unwrap_or(0);
        let locality_map = cfg
            .distances
            .iter()
            .zip(&locality)
            .map(|(&d, h)| LocalityLine {
                distance: d,
                label: if d == 0 {
                    "0".to_string()
                } else {
                    short_bytes(d)
                },
                at_windows: cfg
                    .windows
                    .iter()
                    .map(|&w| (w, h.at_most(w) as f64 / h.total().max(1) as f64))
                    .collect(),
                curve: h.cdf(h.total()),
            })
            .collect();

        let labels = cfg.class_labels();
        let lifetime = labels
            .iter()
            .zip(&lifetimes)
            .map(|(label, h)| {
                let created = h.total();
                LifetimeClass {
                    class: label.clone(),
                    created: (created as f64 * scale).round() as u64,
                    deleted_fraction: if created == 0 {
                        0.0
                    } else {
                        (created - h.never) as f64 / created as f64
                    },
                    curve: h.cdf(created),
                }
            })
            .collect();

        let pop_total = popularity.total();
        let popularity_by_age = PopularityByAge {
            age_basis: if self.has_create_time {
                "creation time recorded in the trace".into()
            } else {
                "time since the object was first written or seen in the trace".into()
            },
            reads: (pop_total as f64 * scale).round() as u64,
            curve: popularity.cdf(pop_total),
        };

        let total_heat_data: u128 = heat_data.iter().sum();
        let total_heat_io: u128 = heat_io.iter().sum();
        let read_heat = HEAT_BUCKETS
            .iter()
            .enumerate()
            .map(|(i, &lo)| HeatBucket {
                label: match HEAT_BUCKETS.get(i + 1) {
                    None => format!("{lo}+"),
                    Some(&hi) if hi == lo + 1 => format!("{lo}"),
                    Some(&hi) => format!("{lo}–{}", hi - 1),
                },
                min_reads: lo,
                data_bytes: (heat_data[i] as f64 * scale) as u128,
                data_fraction: heat_data[i] as f64 / total_heat_data.max(1) as f64,
                read_bytes: (heat_io[i] as f64 * scale) as u128,
                read_fraction: heat_io[i] as f64 / total_heat_io.max(1) as f64,
            })
            .collect();

        let mut workloads = Vec::new();
        for (&w, oc) in &self.ops {
            let reqs: u64 = oc.requests.iter().sum();
            let bytes: u128 = oc.bytes.iter().sum();
            let counts: Vec<u64> = self
                .intervals
                .get(&w)
                .map(|m| {
                    let n = (duration / cfg.iops_interval_s).ceil().max(1.0) as u64;
                    (0..n).map(|i| m.get(&i).copied().unwrap_or(0)).collect()
                })
                .unwrap_or_default();
            let interval = if duration > 0.0 {
                cfg.iops_interval_s.min(duration)
            } else {
                1.0
            };
            let peak_iops = p95(&counts) as f64 / interval;
            let mean_iops = if duration > 0.0 {
                reqs as f64 / duration
            } else {
                0.0
            };
            let gib = footprint.get(&w).copied().unwrap_or(0) as f64 * scale / (1u64 << 30) as f64;
            let iops_per_gib = if gib > 0.0 { peak_iops / gib } else { 0.0 };
            let sz = sizes.get(&w).map(|h| h.summary()).unwrap_or_default();
            workloads.push(WorkloadStats {
                workload: w,
                requests: reqs,
                bytes,
                ops: ["get", "put", "delete"]
                    .iter()
                    .enumerate()
                    .map(|(i, name)| OpMix {
                        op: (*name).to_string(),
                        requests: oc.requests[i],
                        request_fraction: oc.requests[i] as f64 / reqs.max(1) as f64,
                        bytes: oc.bytes[i],
                        byte_fraction: oc.bytes[i] as f64 / bytes.max(1) as f64,
                    })
                    .collect(),
                sizes: sz,
                footprint_gib: gib,
                mean_iops,
                peak_iops,
                iops_per_gib,
                above_break_even: iops_per_gib > cfg.break_even_iops_per_gib,
            });
        }

        let sampled = self.cutoff > 0;
        Analysis {
            requests: self.requests,
            start_time: first,
            duration_s: duration,
            objects_estimate: (objects as f64 * scale).round() as u64,
            has_offsets: self.has_offsets,
            sampling: Sampling {
                exact: !sampled,
                rate,
                max_objects: cfg.max_objects,
                objects_tracked_peak: self.peak_tracked,
                note: if sampled {
                    format!(
                        "object-level statistics (sizes, lifetimes, locality, heat, popularity, GiB) come from a \
                         1/{} hash sample of objects because the trace has more than {} objects; op mix and request \
                         rates are exact",
                        1u64 << self.cutoff,
                        cfg.max_objects
                    )
                } else {
                    "exact: every object was tracked".into()
                },
            },
            reads_analysed: (reads_sampled as f64 * scale).round() as u64,
            workloads,
            lifetime,
            locality: locality_map,
            read_heat,
            popularity_by_age,
            break_even_iops_per_gib: cfg.break_even_iops_per_gib,
            iops_interval_s: cfg.iops_interval_s,
            config: cfg,
        }
    }
}

fn p95(v: &[u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let mut s = v.to_vec();
    s.sort_unstable();
    let idx = ((0.95 * s.len() as f64).ceil() as usize).clamp(1, s.len()) - 1;
    s[idx]
}

/// The result of [`Analyzer::finish`].
#[derive(Clone, Debug, Serialize)]
pub struct Analysis {
    /// Requests in the trace.
    pub requests: u64,
    /// Time of the first request.
    pub start_time: f64,
    /// Seconds from first to last request.
    pub duration_s: f64,
    /// Distinct objects (estimated when sampled).
    pub objects_estimate: u64,
    /// Whether any request had a byte offset (ranged I/O).
    pub has_offsets: bool,
    /// Whether and how objects were sampled.
    pub sampling: Sampling,
    /// Reads that the locality map and popularity cover (estimated).
    pub reads_analysed: u64,
    /// Per-workload op mix, sizes and IOPS per GiB.
    pub workloads: Vec<WorkloadStats>,
    /// Lifetime CDFs by size class.
    pub lifetime: Vec<LifetimeClass>,
    /// The locality map: one line per offset distance.
    pub locality: Vec<LocalityLine>,
    /// Read heat: data and read I/O by number of reads.
    pub read_heat: Vec<HeatBucket>,
    /// Reads by the age of the object read.
    pub popularity_by_age: PopularityByAge,
    /// The break-even line (IOPS per GiB).
    pub break_even_iops_per_gib: f64,
    /// Interval of the IOPS measurement (seconds).
    pub iops_interval_s: f64,
    /// The settings used.
    pub config: AnalyzeConfig,
}

/// How the object-level statistics were sampled.
#[derive(Clone, Debug, Serialize)]
pub struct Sampling {
    /// True when every object was tracked.
    pub exact: bool,
    /// Fraction of objects tracked (1 when exact).
    pub rate: f64,
    /// The memory bound in objects.
    pub max_objects: usize,
    /// Most objects tracked at once.
    pub objects_tracked_peak: usize,
    /// A sentence for the reader.
    pub note: String,
}

/// One workload's statistics.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadStats {
    /// Workload id.
    pub workload: u32,
    /// Requests.
    pub requests: u64,
    /// Bytes transferred by gets and puts.
    pub bytes: u128,
    /// Op mix, in requests and bytes.
    pub ops: Vec<OpMix>,
    /// Object sizes (at first sight).
    pub sizes: SizeSummary,
    /// GiB of distinct objects seen.
    pub footprint_gib: f64,
    /// Mean requests per second.
    pub mean_iops: f64,
    /// 95th percentile over intervals of requests per second.
    pub peak_iops: f64,
    /// Peak IOPS per GiB.
    pub iops_per_gib: f64,
    /// Whether the workload lies above the break-even line.
    pub above_break_even: bool,
}

/// One op's share.
#[derive(Clone, Debug, Serialize)]
pub struct OpMix {
    /// get, put or delete.
    pub op: String,
    /// Requests.
    pub requests: u64,
    /// Fraction of the workload's requests.
    pub request_fraction: f64,
    /// Bytes.
    pub bytes: u128,
    /// Fraction of the workload's bytes.
    pub byte_fraction: f64,
}

/// Lifetimes of objects created in one size class.
#[derive(Clone, Debug, Serialize)]
pub struct LifetimeClass {
    /// Size-class label.
    pub class: String,
    /// Objects created during the trace in this class (estimated).
    pub created: u64,
    /// Fraction of them also deleted during the trace.
    pub deleted_fraction: f64,
    /// CDF: (lifetime seconds, fraction of created objects deleted by then).
    pub curve: Vec<(f64, f64)>,
}

/// One line of the locality map.
#[derive(Clone, Debug, Serialize)]
pub struct LocalityLine {
    /// Offset distance in bytes.
    pub distance: u64,
    /// Its label.
    pub label: String,
    /// (window seconds, fraction of reads preceded within it) at the
    /// configured windows.
    pub at_windows: Vec<(f64, f64)>,
    /// The whole curve on log-spaced windows.
    pub curve: Vec<(f64, f64)>,
}

/// One bar pair of the read-heat chart.
#[derive(Clone, Debug, Serialize)]
pub struct HeatBucket {
    /// Label, e.g. `4–7` reads.
    pub label: String,
    /// Smallest number of reads in the bucket.
    pub min_reads: u32,
    /// Bytes of data read this many times (estimated when sampled).
    pub data_bytes: u128,
    /// Fraction of all data.
    pub data_fraction: f64,
    /// Bytes of reads to that data.
    pub read_bytes: u128,
    /// Fraction of all read bytes.
    pub read_fraction: f64,
}

/// Reads by age of the object read (Haystack Figure 7).
#[derive(Clone, Debug, Serialize)]
pub struct PopularityByAge {
    /// What "age" is measured from.
    pub age_basis: String,
    /// Reads counted (estimated when sampled).
    pub reads: u64,
    /// CDF: (age seconds, fraction of reads to objects at most that old).
    pub curve: Vec<(f64, f64)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(t: f64, op: Op, o: u64, w: u32, size: u64) -> Request {
        Request::new(t, op, o, w, size)
    }

    #[test]
    fn op_mix_and_sizes_per_workload() {
        let mut a = Analyzer::new(AnalyzeConfig::default()).unwrap();
        for i in 0..100 {
            a.push(&req(i as f64, Op::Put, i, 1, 1000 * (i + 1)));
        }
        for i in 0..100 {
            a.push(&req(100.0 + i as f64, Op::Get, i, 1, 1000 * (i + 1)));
            a.push(&req(100.0 + i as f64, Op::Get, i, 1, 1000 * (i + 1)));
        }
        a.push(&req(300.0, Op::Get, 7, 2, 10));
        a.push(&req(301.0, Op::Delete, 7, 2, 10));
        let r = a.finish();
        assert_eq!(r.requests, 302);
        let w1 = &r.workloads[0];
        assert_eq!(w1.workload, 1);
        assert_eq!(w1.ops[0].requests, 200);
        assert_eq!(w1.ops[1].requests, 100);
        assert!((w1.ops[0].request_fraction - 2.0 / 3.0).abs() < 1e-12);
        assert!((w1.ops[0].byte_fraction - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(w1.sizes.count, 100);
        assert_eq!(w1.sizes.min, 1000);
        assert_eq!(w1.sizes.max, 100_000);
        let p50 = w1.sizes.p50 as f64;
        assert!((p50 - 50_000.0).abs() / 50_000.0 < 0.06, "{p50}");
        let w2 = &r.workloads[1];
        assert_eq!(w2.ops[2].requests, 1);
        assert!(r.sampling.exact);
    }

    #[test]
    fn lifetimes_by_size_class() {
        let mut a = Analyzer::new(AnalyzeConfig::default()).unwrap();
        // 10 small objects: half deleted after 30 s; 4 large, never deleted.
        for i in 0..10 {
            a.push(&req(0.0, Op::Put, i, 0, 1 << 20));
        }
        for i in 100..104 {
            a.push(&req(0.0, Op::Put, i, 0, 100 << 20));
        }
        for i in 0..5 {
            a.push(&req(30.0, Op::Delete, i, 0, 1 << 20));
        }
        let r = a.finish();
        assert_eq!(r.lifetime.len(), 3);
        assert_eq!(r.lifetime[0].created, 10);
        assert!((r.lifetime[0].deleted_fraction - 0.5).abs() < 1e-12);
        let at = |c: &LifetimeClass, s: f64| {
            c.curve
                .iter()
                .filter(|p| p.0 <= s)
                .map(|p| p.1)
                .next_back()
                .unwrap_or(0.0)
        };
        assert_eq!(at(&r.lifetime[0], 20.0), 0.0);
        assert_eq!(at(&r.lifetime[0], 40.0), 0.5);
        assert_eq!(r.lifetime[1].created, 0);
        assert_eq!(r.lifetime[2].created, 4);
        assert_eq!(r.lifetime[2].deleted_fraction, 0.0);
    }

    #[test]
    fn locality_map_separates_repeats_from_neighbours() {
        let mut a = Analyzer::new(AnalyzeConfig::default()).unwrap();
        let ranged = |t: f64, o: u64, off: u64, len: u64| {
            let mut r = req(t, Op::Get, o, 0, 1 << 30);
            r.offset = Some(off);
            r.length = Some(len);
            r
        };
        let reqs = vec![
            ranged(0.0, 1, 0, 4096),
            // same data 100 s later
            ranged(100.0, 1, 0, 4096),
            // 512 B past the end of the last read, 1 s later
            ranged(101.0, 1, 4096 + 512, 4096),
            // 32 KiB away, 1 s later
            ranged(102.0, 1, 8704 + 4096 + 32768, 4096),
        ];
        for r in &reqs {
            a.push(r);
        }
        let r = a.finish();
        let frac = |d: usize, w: f64| {
            r.locality[d]
                .at_windows
                .iter()
                .find(|p| p.0 == w)
                .map(|p| p.1)
                .unwrap()
        };
        // distance 0: only the repeat, within 240 s but not 60 s
        assert_eq!(frac(0, 60.0), 0.0);
        assert_eq!(frac(0, 240.0), 0.25);
        // 1 KiB: the repeat and the 512 B neighbour
        assert_eq!(frac(1, 1.0), 0.25);
        assert_eq!(frac(1, 240.0), 0.5);
        // 64 KiB: all three followers
        assert_eq!(frac(2, 1.0), 0.5);
        assert_eq!(frac(2, 240.0), 0.75);
        assert_eq!(frac(3, 240.0), 0.75);
    }

    #[test]
    fn read_heat_and_popularity() {
        let mut a = Analyzer::new(AnalyzeConfig::default()).unwrap();
        a.push(&req(0.0, Op::Put, 1, 0, 100));
        a.push(&req(0.0, Op::Put, 2, 0, 300));
        for i in 0..70 {
            a.push(&req(10.0 + i as f64, Op::Get, 1, 0, 100));
        }
        a.push(&req(5000.0, Op::Get, 2, 0, 300));
        let r = a.finish();
        let hot = r.read_heat.iter().find(|b| b.min_reads == 64).unwrap();
        assert_eq!(hot.data_bytes, 100);
        assert_eq!(hot.read_bytes, 7000);
        let once = r.read_heat.iter().find(|b| b.min_reads == 1).unwrap();
        assert_eq!(once.data_bytes, 300);
        assert!((once.data_fraction - 0.75).abs() < 1e-12);
        // 70 of 71 reads were to objects at most 80 s old
        let young = r
            .popularity_by_age
            .curve
            .iter()
            .filter(|p| p.0 <= 100.0)
            .map(|p| p.1)
            .next_back()
            .unwrap();
        assert!((young - 70.0 / 71.0).abs() < 1e-12);
    }

    #[test]
    fn sampling_bounds_memory_and_says_so() {
        let cfg = AnalyzeConfig {
            max_objects: 5_000,
            ..AnalyzeConfig::default()
        };
        let mut a = Analyzer::new(cfg).unwrap();
        let n = 100_000u64;
        for i in 0..n {
            a.push(&req(i as f64 * 0.01, Op::Put, i, 0, 1000));
            a.push(&req(i as f64 * 0.01, Op::Get, i, 0, 1000));
        }
        let r = a.finish();
        assert!(!r.sampling.exact);
        assert!(r.sampling.rate <= 0.05 + 1e-12);
        assert!(r.sampling.objects_tracked_peak <= 5_001);
        assert!(r.sampling.note.contains("sample"));
        // Estimates stay close to the truth.
        let est = r.objects_estimate as f64;
        assert!((est - n as f64).abs() / (n as f64) < 0.15, "{est}");
        let gib = r.workloads[0].footprint_gib;
        let want = n as f64 * 1000.0 / (1u64 << 30) as f64;
        assert!((gib - want).abs() / want < 0.15);
        // Op mix is exact.
        assert_eq!(r.workloads[0].ops[0].requests, n);
    }

    #[test]
    fn iops_per_gib_and_break_even() {
        let cfg = AnalyzeConfig {
            iops_interval_s: 10.0,
            ..AnalyzeConfig::default()
        };
        let mut a = Analyzer::new(cfg).unwrap();
        // 1 MiB of data read 100 times a second for 100 s: very hot.
        for i in 0..10_000u64 {
            a.push(&req(i as f64 * 0.01, Op::Get, i % 16, 0, 65536));
        }
        let r = a.finish();
        let w = &r.workloads[0];
        assert!((w.peak_iops - 100.0).abs() < 1.0, "{}", w.peak_iops);
        assert!((w.footprint_gib - 1.0 / 1024.0).abs() < 1e-12);
        assert!(w.above_break_even);
    }

    #[test]
    fn bad_settings_are_rejected() {
        let cfg = AnalyzeConfig {
            size_classes: vec![64, 16],
            ..AnalyzeConfig::default()
        };
        assert!(Analyzer::new(cfg).is_err());
        let cfg = AnalyzeConfig {
            max_objects: 10,
            ..AnalyzeConfig::default()
        };
        assert!(Analyzer::new(cfg).is_err());
    }
}
