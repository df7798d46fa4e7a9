//! The dashboard's history: per workload (and for all workloads together),
//! fixed-size rings of points, one for the last hour ([`HOUR_STEP`]-second
//! points) and one for the last day ([`DAY_STEP`]-second points), fed with
//! readings of cumulative counters and gauges, and rendered as the JSON the
//! page polls (docs/node.md, "Dashboard").
//!
//! Pure: no clock, no I/O. The sampler passes the time of each reading, so
//! tests drive it with made-up times.

use serde::Serialize;
use std::collections::{HashMap, VecDeque};

/// Seconds covered by one point of the last hour.
pub const HOUR_STEP: u64 = 10;
/// Points of the last hour (one hour of [`HOUR_STEP`] points).
pub const HOUR_POINTS: usize = 360;
/// Seconds covered by one point of the last day.
pub const DAY_STEP: u64 = 300;
/// Points of the last day (one day of [`DAY_STEP`] points).
pub const DAY_POINTS: usize = 288;
/// Most workloads with a history of their own; the others count in the
/// all-workloads series only (and in `untracked_workloads`).
pub const MAX_WORKLOADS: usize = 64;
/// The name of the all-workloads series (not a valid workload name, so it
/// cannot clash with one).
pub const TOTAL_NAME: &str = "all workloads";

/// Index of each tier in [`Counts::reads`].
pub const TIERS: [&str; 4] = ["ram", "flash", "flash_cache", "disk"];

/// Cumulative counters and current gauges of one series at one instant.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counts {
    /// Reads served so far by the RAM cache, the flash tier, the flash read
    /// cache and the disk tier (the order of [`TIERS`]).
    pub reads: [u64; 4],
    /// Bytes on flash now (`None`: not known per workload in this mode).
    pub flash_bytes: Option<u64>,
    /// Bytes written to flash so far (`None`: not known in this mode).
    pub flash_written_bytes: Option<u64>,
    /// Flash bytes the tier plan allocates (`None`: no allocation of its
    /// own, as under the default plan).
    pub plan_flash_bytes: Option<u64>,
    /// The flash hit ratio the tier plan predicts (`None`: no prediction).
    pub predicted_flash_hit_ratio: Option<f64>,
}

/// The plan in force, as the dashboard shows it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PlanInfo {
    /// Whether a tier plan is loaded (else the default plan is in force).
    pub loaded: bool,
    /// The plan's predicted flash hit ratio over all workloads.
    pub predicted_flash_hit_ratio: Option<f64>,
    /// The plan's bound on the flash write rate, bytes per second.
    pub write_bound_bytes_per_s: Option<f64>,
}

/// One reading of a server's counters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Reading {
    /// All workloads together.
    pub total: Counts,
    /// Each workload by name.
    pub workloads: Vec<(String, Counts)>,
    /// The plan in force.
    pub plan: PlanInfo,
}

/// Which ring the JSON shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Window {
    /// The last hour, [`HOUR_STEP`]-second points.
    Hour,
    /// The last day, [`DAY_STEP`]-second points.
    Day,
}

impl Window {
    /// Parses `hour` or `day`.
    pub fn parse(s: &str) -> Option<Window> {
        match s {
            "hour" => Some(Window::Hour),
            "day" => Some(Window::Day),
            _ => None,
        }
    }
    /// `hour` or `day`.
    pub fn as_str(self) -> &'static str {
        match self {
            Window::Hour => "hour",
            Window::Day => "day",
        }
    }
    /// Seconds per point.
    pub fn step(self) -> u64 {
        match self {
            Window::Hour => HOUR_STEP,
            Window::Day => DAY_STEP,
        }
    }
    /// Points kept.
    pub fn points(self) -> usize {
        match self {
            Window::Hour => HOUR_POINTS,
            Window::Day => DAY_POINTS,
        }
    }
}

/// What happened in one step: counts over `secs` seconds, gauges at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Point {
    /// Start of the step, unix seconds (a multiple of the step).
    t: u64,
    /// Seconds of readings it covers (the step, less for a partial one).
    secs: f64,
    reads: [u64; 4],
    written: Option<u64>,
    flash_bytes: Option<u64>,
    plan_flash_bytes: Option<u64>,
    predicted: Option<f32>,
}

impl Point {
    /// Adds the later point `o` into this one.
    fn absorb(&mut self, o: &Point) {
        self.secs += o.secs;
        for (a, b) in self.reads.iter_mut().zip(o.reads) {
            *a += b;
        }
        self.written = match (self.written, o.written) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.flash_bytes = o.flash_bytes;
        self.plan_flash_bytes = o.plan_flash_bytes;
        self.predicted = o.predicted;
    }
}

/// A ring of at most `cap` points: the oldest goes when a new one comes.
#[derive(Debug)]
struct Ring {
    cap: usize,
    points: VecDeque<Point>,
}

impl Ring {
    fn new(cap: usize) -> Ring {
        Ring {
            cap,
            points: VecDeque::with_capacity(cap),
        }
    }
    fn push(&mut self, p: Point) {
        if self.points.len() == self.cap {
            self.points.pop_front();
        }
        self.points.push_back(p);
    }
}

/// The history of one series.
#[derive(Debug)]
struct Series {
    name: String,
    prev: Counts,
    hour: Ring,
    day: Ring,
    open_hour: Option<Point>,
    open_day: Option<Point>,
}

/// How much a counter grew; a counter that went back was reset (the demo
/// resets read counters between phases), so all of it is new.
fn grew(cur: u64, prev: u64) -> u64 {
    if cur >= prev {
        cur - prev
    } else {
        cur
    }
}

fn align(t: u64, step: u64) -> u64 {
    t - t % step
}

impl Series {
    fn new(name: String) -> Series {
        Series {
            name,
            prev: Counts::default(),
            hour: Ring::new(HOUR_POINTS),
            day: Ring::new(DAY_POINTS),
            open_hour: None,
            open_day: None,
        }
    }

    /// Records the reading `c` taken at `t`, `dt` seconds after the last.
    fn record(&mut self, t: f64, dt: f64, c: &Counts) {
        let mut reads = [0; 4];
        for (i, r) in reads.iter_mut().enumerate() {
            *r = grew(c.reads[i], self.prev.reads[i]);
        }
        let written = c
            .flash_written_bytes
            .map(|w| grew(w, self.prev.flash_written_bytes.unwrap_or(0)));
        let p = Point {
            t: align(t as u64, HOUR_STEP),
            secs: dt,
            reads,
            written,
            flash_bytes: c.flash_bytes,
            plan_flash_bytes: c.plan_flash_bytes,
            predicted: c.predicted_flash_hit_ratio.map(|x| x as f32),
        };
        self.prev = c.clone();
        match &mut self.open_hour {
            Some(o) if o.t == p.t => o.absorb(&p),
            open => {
                if let Some(done) = open.replace(p) {
                    self.hour.push(done);
                    self.fold_day(&done);
                }
            }
        }
    }

    /// Adds a finished hour point to the day's open point.
    fn fold_day(&mut self, p: &Point) {
        let t = align(p.t, DAY_STEP);
        match &mut self.open_day {
            Some(o) if o.t == t => o.absorb(p),
            open => {
                if let Some(done) = open.replace(Point { t, ..*p }) {
                    self.day.push(done);
                }
            }
        }
    }

    /// The points of `w`, the open one last.
    fn points(&self, w: Window) -> Vec<Point> {
        match w {
            Window::Hour => {
                let mut v: Vec<Point> = self.hour.points.iter().copied().collect();
                v.extend(self.open_hour);
                v
            }
            Window::Day => {
                let mut v: Vec<Point> = self.day.points.iter().copied().collect();
                let mut open = self.open_day;
                if let Some(h) = &self.open_hour {
                    let t = align(h.t, DAY_STEP);
                    match &mut open {
                        Some(o) if o.t == t => o.absorb(h),
                        _ => {
                            v.extend(open);
                            open = Some(Point { t, ..*h });
                        }
                    }
                }
                v.extend(open);
                v
            }
        }
    }
}

/// The histories of every series, bounded: [`MAX_WORKLOADS`] workloads and
/// the total, each with [`HOUR_POINTS`] + [`DAY_POINTS`] points.
#[derive(Debug)]
pub struct History {
    last_t: f64,
    samples: u64,
    total: Series,
    workloads: Vec<Series>,
    index: HashMap<String, usize>,
    untracked: usize,
    plan: PlanInfo,
}

/// The JSON of `GET /_admin/dashboard` (docs/node.md, "Dashboard").
#[derive(Debug, Serialize)]
pub struct Data {
    /// The server's mode (`node` or `cluster`).
    pub mode: &'static str,
    /// Unix seconds of the last reading.
    pub now: f64,
    /// `hour` or `day`.
    pub window: &'static str,
    /// Seconds per point.
    pub step_seconds: u64,
    /// Points the window keeps.
    pub max_points: usize,
    /// Readings taken since the server started.
    pub samples: u64,
    /// Workloads with a history of their own at most.
    pub max_workloads: usize,
    /// Workloads in the last reading beyond that bound (counted in the
    /// all-workloads series only).
    pub untracked_workloads: usize,
    /// The plan in force.
    pub plan: PlanInfo,
    /// The all-workloads series first, then workloads by reads in the window.
    pub series: Vec<SeriesData>,
}

/// One series of [`Data`].
#[derive(Debug, Serialize)]
pub struct SeriesData {
    /// The workload's name, or [`TOTAL_NAME`].
    pub name: String,
    /// Whether this is the all-workloads series.
    pub total: bool,
    /// Reads in the window.
    pub reads: u64,
    /// Flash-tier reads over all reads in the window.
    pub flash_hit_ratio: Option<f64>,
    /// Flash bytes now.
    pub flash_bytes: Option<u64>,
    /// The plan's allocation now.
    pub plan_flash_bytes: Option<u64>,
    /// The plan's predicted flash hit ratio now.
    pub predicted_flash_hit_ratio: Option<f64>,
    /// The points, column by column.
    pub points: Columns,
}

/// The points of a series, one array per field, oldest first.
#[derive(Debug, Default, Serialize)]
pub struct Columns {
    /// Start of each step, unix seconds.
    pub t: Vec<u64>,
    /// Seconds each point covers (less than the step for the last, open one).
    pub seconds: Vec<f64>,
    /// Reads per second served by the RAM cache.
    pub reads_ram_per_s: Vec<f64>,
    /// Reads per second served by the flash tier.
    pub reads_flash_per_s: Vec<f64>,
    /// Reads per second served by the flash read cache.
    pub reads_flash_cache_per_s: Vec<f64>,
    /// Reads per second served by the disk tier.
    pub reads_disk_per_s: Vec<f64>,
    /// Flash-tier reads over all reads (`null` without reads).
    pub flash_hit_ratio: Vec<Option<f64>>,
    /// The plan's prediction of it.
    pub predicted_flash_hit_ratio: Vec<Option<f64>>,
    /// Flash bytes at the end of the step.
    pub flash_bytes: Vec<Option<u64>>,
    /// The plan's allocation at the end of the step.
    pub plan_flash_bytes: Vec<Option<u64>>,
    /// Bytes written to flash per second.
    pub flash_write_bytes_per_s: Vec<Option<f64>>,
}

/// Rounds to 4 significant decimals: the JSON stays short.
fn round(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}

fn ratio(flash: u64, all: u64) -> Option<f64> {
    (all > 0).then(|| round(flash as f64 / all as f64))
}

impl Columns {
    fn of(points: &[Point]) -> Columns {
        let mut c = Columns::default();
        for p in points {
            let per_s = |x: u64| {
                if p.secs > 0.0 {
                    round(x as f64 / p.secs)
                } else {
                    0.0
                }
            };
            c.t.push(p.t);
            c.seconds.push(round(p.secs));
            c.reads_ram_per_s.push(per_s(p.reads[0]));
            c.reads_flash_per_s.push(per_s(p.reads[1]));
            c.reads_flash_cache_per_s.push(per_s(p.reads[2]));
            c.reads_disk_per_s.push(per_s(p.reads[3]));
            c.flash_hit_ratio
                .push(ratio(p.reads[1], p.reads.iter().sum()));
            c.predicted_flash_hit_ratio
                .push(p.predicted.map(|x| round(x as f64)));
            c.flash_bytes.push(p.flash_bytes);
            c.plan_flash_bytes.push(p.plan_flash_bytes);
            c.flash_write_bytes_per_s.push(p.written.map(per_s));
        }
        c
    }
}

impl History {
    /// An empty history whose first reading counts from `t0` (unix seconds).
    pub fn new(t0: f64) -> History {
        History {
            last_t: t0,
            samples: 0,
            total: Series::new(TOTAL_NAME.into()),
            workloads: Vec::new(),
            index: HashMap::new(),
            untracked: 0,
            plan: PlanInfo::default(),
        }
    }

    /// Records reading `r` taken at `t` (unix seconds). A reading not later
    /// than the last one is ignored.
    pub fn record(&mut self, t: f64, r: &Reading) {
        let dt = t - self.last_t;
        // Also false for NaN.
        if dt.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return;
        }
        self.last_t = t;
        self.samples += 1;
        self.plan = r.plan.clone();
        self.total.record(t, dt, &r.total);
        let mut untracked = 0;
        for (name, c) in &r.workloads {
            let i = match self.index.get(name) {
                Some(&i) => i,
                None if self.workloads.len() < MAX_WORKLOADS => {
                    self.workloads.push(Series::new(name.clone()));
                    self.index.insert(name.clone(), self.workloads.len() - 1);
                    self.workloads.len() - 1
                }
                None => {
                    untracked += 1;
                    continue;
                }
            };
            self.workloads[i].record(t, dt, c);
        }
        self.untracked = untracked;
    }

    /// Readings recorded.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// The bytes the rings can ever hold: what bounds the history's memory
    /// whatever the uptime (names and the map aside).
    pub fn memory_bound() -> usize {
        (MAX_WORKLOADS + 1) * (HOUR_POINTS + 1 + DAY_POINTS + 1) * std::mem::size_of::<Point>()
    }

    /// The JSON data of window `w`.
    pub fn data(&self, mode: &'static str, w: Window) -> Data {
        let one = |s: &Series, total: bool| {
            let pts = s.points(w);
            let mut reads = [0u64; 4];
            for p in &pts {
                for (a, b) in reads.iter_mut().zip(p.reads) {
                    *a += b;
                }
            }
            let all: u64 = reads.iter().sum();
            let last = pts.last();
            SeriesData {
                name: s.name.clone(),
                total,
                reads: all,
                flash_hit_ratio: ratio(reads[1], all),
                flash_bytes: last.and_then(|p| p.flash_bytes),
                plan_flash_bytes: last.and_then(|p| p.plan_flash_bytes),
                predicted_flash_hit_ratio: last.and_then(|p| p.predicted.map(|x| round(x as f64))),
                points: Columns::of(&pts),
            }
        };
        let mut wl: Vec<SeriesData> = self.workloads.iter().map(|s| one(s, false)).collect();
        wl.sort_by(|a, b| b.reads.cmp(&a.reads).then_with(|| a.name.cmp(&b.name)));
        let mut series = vec![one(&self.total, true)];
        series.extend(wl);
        Data {
            mode,
            now: self.last_t,
            window: w.as_str(),
            step_seconds: w.step(),
            max_points: w.points(),
            samples: self.samples,
            max_workloads: MAX_WORKLOADS,
            untracked_workloads: self.untracked,
            plan: self.plan.clone(),
            series,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(ram: u64, flash: u64, disk: u64, written: u64, fb: u64) -> Counts {
        Counts {
            reads: [ram, flash, 0, disk],
            flash_bytes: Some(fb),
            flash_written_bytes: Some(written),
            plan_flash_bytes: Some(1000),
            predicted_flash_hit_ratio: Some(0.5),
        }
    }

    fn reading(w: &[(&str, Counts)]) -> Reading {
        let mut total = Counts::default();
        for (_, c) in w {
            for i in 0..4 {
                total.reads[i] += c.reads[i];
            }
        }
        Reading {
            total,
            workloads: w.iter().map(|(n, c)| (n.to_string(), c.clone())).collect(),
            plan: PlanInfo {
                loaded: true,
                predicted_flash_hit_ratio: Some(0.5),
                write_bound_bytes_per_s: None,
            },
        }
    }

    fn series<'a>(d: &'a Data, name: &str) -> &'a SeriesData {
        d.series.iter().find(|s| s.name == name).unwrap()
    }

    #[test]
    fn rates_ratio_and_gauges_per_step() {
        // Start at a step boundary; readings every 2 s.
        let t0 = 1_000_000.0;
        let mut h = History::new(t0);
        // 2 s: 10 RAM, 30 flash, 10 disk reads, 400 bytes to flash.
        h.record(t0 + 2.0, &reading(&[("a", counts(10, 30, 10, 400, 700))]));
        h.record(t0 + 4.0, &reading(&[("a", counts(20, 60, 20, 800, 750))]));
        let d = h.data("node", Window::Hour);
        let a = series(&d, "a");
        let p = &a.points;
        assert_eq!(p.t, vec![1_000_000]);
        assert_eq!(p.seconds, vec![4.0]);
        assert_eq!(p.reads_ram_per_s, vec![5.0]);
        assert_eq!(p.reads_flash_per_s, vec![15.0]);
        assert_eq!(p.reads_disk_per_s, vec![5.0]);
        assert_eq!(p.flash_hit_ratio, vec![Some(0.6)]);
        assert_eq!(p.flash_write_bytes_per_s, vec![Some(200.0)]);
        // Gauges: the last reading's.
        assert_eq!(p.flash_bytes, vec![Some(750)]);
        assert_eq!(a.plan_flash_bytes, Some(1000));
        assert_eq!(a.predicted_flash_hit_ratio, Some(0.5));
        assert_eq!(a.reads, 100);
        assert_eq!(a.flash_hit_ratio, Some(0.6));
        // The total comes first.
        assert!(d.series[0].total);
        assert_eq!(d.series[0].reads, 100);
        assert_eq!(d.samples, 2);
        assert!(d.plan.loaded);
    }

    #[test]
    fn steps_close_into_the_hour_and_day_rings() {
        let t0 = 3_000_000.0; // a multiple of 300
        let mut h = History::new(t0);
        // 11 minutes of readings every 5 s: one flash read per second.
        let mut n = 0;
        for i in 1..=132 {
            n += 5;
            h.record(
                t0 + 5.0 * i as f64,
                &reading(&[("a", counts(0, n, 0, 0, 1))]),
            );
        }
        let hour = h.data("node", Window::Hour);
        let a = series(&hour, "a");
        // 660 s: 66 steps of 10 s, the last one still open.
        assert_eq!(a.points.t.len(), 67);
        assert!(a.points.reads_flash_per_s.iter().all(|&r| r == 1.0));
        assert!(a.points.t.windows(2).all(|w| w[1] - w[0] == HOUR_STEP));
        assert_eq!(a.reads, 660);
        let day = h.data("node", Window::Day);
        let a = series(&day, "a");
        // Two 5-minute steps and the open third; a reading's counts go to
        // the step its time falls in, so the first step lacks the 5 s
        // before the first reading.
        assert_eq!(a.points.t, vec![3_000_000, 3_000_300, 3_000_600]);
        assert_eq!(a.points.seconds, vec![295.0, 300.0, 65.0]);
        assert_eq!(a.points.reads_flash_per_s, vec![1.0, 1.0, 1.0]);
        assert_eq!(a.reads, 660);
    }

    #[test]
    fn memory_is_bounded_whatever_the_uptime_and_workloads() {
        let mut h = History::new(0.0);
        let names: Vec<String> = (0..MAX_WORKLOADS + 10).map(|i| format!("w{i}")).collect();
        // Two days of 10 s readings of 74 workloads.
        for i in 1..=(2 * 86_400 / 10) {
            let w: Vec<(&str, Counts)> = names
                .iter()
                .map(|n| (n.as_str(), counts(0, i, 0, 0, 0)))
                .collect();
            h.record(i as f64 * 10.0, &reading(&w));
        }
        assert_eq!(h.workloads.len(), MAX_WORKLOADS);
        assert_eq!(h.untracked, 10);
        for s in h.workloads.iter().chain([&h.total]) {
            assert_eq!(s.hour.points.len(), HOUR_POINTS);
            assert_eq!(s.day.points.len(), DAY_POINTS);
            assert!(s.hour.points.capacity() < 2 * HOUR_POINTS);
        }
        let d = h.data("node", Window::Hour);
        assert_eq!(d.series.len(), MAX_WORKLOADS + 1);
        assert_eq!(d.untracked_workloads, 10);
        assert_eq!(d.series[1].points.t.len(), HOUR_POINTS + 1);
        // The oldest hour point is an hour old.
        let t = &d.series[1].points.t;
        assert_eq!(t[t.len() - 1] - t[0], HOUR_POINTS as u64 * HOUR_STEP);
        assert!(
            History::memory_bound() < 4_500_000,
            "{}",
            History::memory_bound()
        );
        // What the page downloads per poll at the bound (docs/node.md).
        let hour = serde_json::to_string(&d).unwrap().len();
        let day = serde_json::to_string(&h.data("node", Window::Day))
            .unwrap()
            .len();
        eprintln!("JSON at the bound: hour {hour} bytes, day {day} bytes");
        assert!(hour < 3 << 20 && day < 3 << 20, "{hour} {day}");
    }

    #[test]
    fn resets_gaps_unknowns_and_clock_steps() {
        let mut h = History::new(100.0);
        h.record(102.0, &reading(&[("a", counts(0, 50, 0, 0, 0))]));
        // The read counters were reset: the 5 reads are new, not -45.
        h.record(104.0, &reading(&[("a", counts(0, 5, 0, 0, 0))]));
        // A reading that is not later than the last one is ignored.
        h.record(104.0, &reading(&[("a", counts(0, 999, 0, 0, 0))]));
        h.record(90.0, &reading(&[("a", counts(0, 999, 0, 0, 0))]));
        let d = h.data("node", Window::Hour);
        assert_eq!(series(&d, "a").reads, 55);
        assert_eq!(d.samples, 2);
        // Unknowns stay null; no reads: no ratio.
        h.record(106.0, &reading(&[("b", Counts::default())]));
        let d = h.data("cluster", Window::Hour);
        let b = series(&d, "b");
        assert_eq!(b.points.flash_hit_ratio, vec![None]);
        assert_eq!(b.points.flash_bytes, vec![None]);
        assert_eq!(b.points.flash_write_bytes_per_s, vec![None]);
        assert_eq!(b.plan_flash_bytes, None);
        // Busiest workload first after the total.
        assert_eq!(d.series[1].name, "a");
        let json = serde_json::to_value(&d).unwrap();
        assert_eq!(json["mode"], "cluster");
        assert_eq!(
            json["series"][2]["points"]["flash_bytes"][0],
            serde_json::Value::Null
        );
    }
}
