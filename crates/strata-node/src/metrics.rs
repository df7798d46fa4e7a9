//! Counters of the node, exposed as Prometheus text on `GET /metrics`.
//!
//! Plain atomics, written without locks on the request path; the text
//! exposition (format 0.0.4) is produced on demand.

use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// Where a read was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Served {
    /// The RAM object cache.
    Ram,
    /// The flash tier (the object's needle lives on flash).
    Flash,
    /// The flash read cache (a copy of a disk-resident needle).
    FlashCache,
    /// The disk tier.
    Disk,
}

impl Served {
    const ALL: [Served; 4] = [Served::Ram, Served::Flash, Served::FlashCache, Served::Disk];
    fn idx(self) -> usize {
        self as usize
    }
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Served::Ram => "ram",
            Served::Flash => "flash",
            Served::FlashCache => "flash_cache",
            Served::Disk => "disk",
        }
    }
}

const METHODS: [&str; 6] = ["GET", "HEAD", "PUT", "POST", "DELETE", "OTHER"];
const CODES: [u16; 15] = [
    200, 201, 204, 206, 400, 404, 405, 408, 411, 413, 416, 429, 500, 503, 0,
];
/// Latency histogram bucket bounds, microseconds.
const LAT_BOUNDS_US: [u64; 14] = [
    50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000,
];

/// A latency histogram with fixed buckets.
#[derive(Default)]
pub struct LatencyHist {
    buckets: [AtomicU64; 15],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl LatencyHist {
    /// Records one latency.
    pub fn observe(&self, us: u64) {
        let i = LAT_BOUNDS_US
            .iter()
            .position(|b| us <= *b)
            .unwrap_or(LAT_BOUNDS_US.len());
        self.buckets[i].fetch_add(1, Relaxed);
        self.sum_us.fetch_add(us, Relaxed);
        self.count.fetch_add(1, Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} histogram");
        let mut cum = 0;
        for (i, b) in LAT_BOUNDS_US.iter().enumerate() {
            cum += self.buckets[i].load(Relaxed);
            let _ = writeln!(out, "{name}_bucket{{le=\"{}\"}} {cum}", *b as f64 / 1e6);
        }
        cum += self.buckets[LAT_BOUNDS_US.len()].load(Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {cum}");
        let _ = writeln!(out, "{name}_sum {}", self.sum_us.load(Relaxed) as f64 / 1e6);
        let _ = writeln!(out, "{name}_count {}", self.count.load(Relaxed));
    }
}

/// The most workloads (buckets) `/metrics` gives series of their own: the
/// busiest by reads and writes; the rest are summed under
/// [`OTHER_WORKLOADS`] (before issue 34, 100,000 buckets made by anyone
/// made `/metrics` 52 MB).
pub const MAX_WORKLOAD_SERIES: usize = 100;

/// The `workload` label of the workloads past [`MAX_WORKLOAD_SERIES`]
/// (never a bucket's name: bucket names do not start with `_`). Its
/// counters are sums over a changing set, so they may go down.
pub const OTHER_WORKLOADS: &str = "_other";

/// `wl` with at most [`MAX_WORKLOAD_SERIES`] entries of its own, the
/// busiest first, and the rest summed as one more.
fn bounded(mut wl: Vec<(String, Arc<WorkloadCounters>)>) -> Vec<(String, Arc<WorkloadCounters>)> {
    if wl.len() <= MAX_WORKLOAD_SERIES {
        return wl;
    }
    wl.sort_by_key(|(name, w)| {
        (
            std::cmp::Reverse(w.total_reads() + w.writes.load(Relaxed)),
            name.clone(),
        )
    });
    let rest = wl.split_off(MAX_WORKLOAD_SERIES);
    let sum = WorkloadCounters::default();
    for (_, w) in &rest {
        for (to, from) in sum.reads.iter().zip(&w.reads) {
            to.fetch_add(from.load(Relaxed), Relaxed);
        }
        for (to, from) in [
            (&sum.writes, &w.writes),
            (&sum.writes_flash, &w.writes_flash),
            (&sum.bytes_written, &w.bytes_written),
            (&sum.flash_bytes, &w.flash_bytes),
            (&sum.disk_bytes, &w.disk_bytes),
        ] {
            to.fetch_add(from.load(Relaxed), Relaxed);
        }
    }
    wl.push((OTHER_WORKLOADS.to_string(), Arc::new(sum)));
    wl
}

/// Counters of one workload.
#[derive(Default)]
pub struct WorkloadCounters {
    /// Reads that found the object, by where they were served from.
    pub reads: [AtomicU64; 4],
    /// Objects written.
    pub writes: AtomicU64,
    /// Objects written to the flash tier.
    pub writes_flash: AtomicU64,
    /// Payload bytes written.
    pub bytes_written: AtomicU64,
    /// Bytes of this workload's segments on flash (set by the tier mover).
    pub flash_bytes: AtomicU64,
    /// Bytes of this workload's segments on disk (set by the tier mover).
    pub disk_bytes: AtomicU64,
}

impl WorkloadCounters {
    /// Counts a read served from `s`.
    pub fn read(&self, s: Served) {
        self.reads[s.idx()].fetch_add(1, Relaxed);
    }
    /// Total reads served.
    pub fn total_reads(&self) -> u64 {
        self.reads.iter().map(|a| a.load(Relaxed)).sum()
    }
    /// Reads served by `s`.
    pub fn reads_from(&self, s: Served) -> u64 {
        self.reads[s.idx()].load(Relaxed)
    }
}

/// All counters of a node.
#[derive(Default)]
pub struct Metrics {
    requests: [[AtomicU64; CODES.len()]; METHODS.len()],
    /// GET latency (including cache hits).
    pub get_latency: LatencyHist,
    /// PUT latency (single and batch requests).
    pub put_latency: LatencyHist,
    /// Reads that found the object, by where they were served from.
    pub served: [AtomicU64; 4],
    /// RAM cache lookups that hit.
    pub ram_hits: AtomicU64,
    /// RAM cache lookups that missed.
    pub ram_misses: AtomicU64,
    /// Objects admitted to the RAM cache.
    pub ram_admits: AtomicU64,
    /// Bytes currently held by the RAM cache.
    pub ram_bytes: AtomicU64,
    /// Flash read cache lookups that hit.
    pub fcache_hits: AtomicU64,
    /// Flash read cache lookups that missed.
    pub fcache_misses: AtomicU64,
    /// Bytes written to flash by the flash read cache.
    pub fcache_bytes_written: AtomicU64,
    /// Objects written to the flash read cache.
    pub fcache_admits: AtomicU64,
    /// Admissions skipped because the flash write rate bound was reached.
    pub fcache_throttled: AtomicU64,
    /// Objects evicted from the flash read cache.
    pub fcache_evictions: AtomicU64,
    /// Bytes held by the flash read cache.
    pub fcache_bytes: AtomicU64,
    /// Segments the tier mover moved from flash to disk.
    pub mover_segments: AtomicU64,
    /// Bytes the tier mover moved from flash to disk.
    pub mover_bytes: AtomicU64,
    /// Needles the LRU mover re-appended to flash before a move.
    pub mover_reappended: AtomicU64,
    /// Tier mover errors.
    pub mover_errors: AtomicU64,
    /// Moves not started since the last move because the disk had no
    /// room for the segment (strata_store::move_headroom).
    pub mover_no_room: AtomicU64,
    /// Reads a runtime thread found out of the page cache and handed to
    /// the blocking pool (`strata_store::cached_only`).
    pub reads_not_cached: AtomicU64,
    /// Multi-writes (group commits) issued to the store.
    pub commit_batches: AtomicU64,
    /// Objects in them.
    pub commit_objects: AtomicU64,
    /// Trace records written.
    pub trace_records: AtomicU64,
    /// Trace files started.
    pub trace_files: AtomicU64,
    /// Trace records dropped (writer fell behind or failed).
    pub trace_dropped: AtomicU64,
    /// Tier plan loads.
    pub plan_loads: AtomicU64,
    workloads: RwLock<BTreeMap<String, Arc<WorkloadCounters>>>,
}

fn method_idx(m: &str) -> usize {
    METHODS
        .iter()
        .position(|x| *x == m)
        .unwrap_or(METHODS.len() - 1)
}
fn code_idx(c: u16) -> usize {
    CODES
        .iter()
        .position(|x| *x == c)
        .unwrap_or(CODES.len() - 1)
}

impl Metrics {
    /// Counts one answered request.
    pub fn request(&self, method: &str, code: u16) {
        self.requests[method_idx(method)][code_idx(code)].fetch_add(1, Relaxed);
    }

    /// Requests answered with `code` (any method).
    pub fn requests_with(&self, code: u16) -> u64 {
        let c = code_idx(code);
        self.requests.iter().map(|row| row[c].load(Relaxed)).sum()
    }

    /// Counts a read served from `s`.
    pub fn served(&self, s: Served) {
        self.served[s.idx()].fetch_add(1, Relaxed);
    }

    /// The counters of workload `name`, created on first use.
    pub fn workload(&self, name: &str) -> Arc<WorkloadCounters> {
        if let Some(w) = self.workloads.read().get(name) {
            return w.clone();
        }
        self.workloads
            .write()
            .entry(name.to_string())
            .or_default()
            .clone()
    }

    /// Names and counters of every workload seen.
    pub fn workloads(&self) -> Vec<(String, Arc<WorkloadCounters>)> {
        self.workloads
            .read()
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut o = String::with_capacity(8192);
        let counter = |o: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        };
        let gauge = |o: &mut String, name: &str, help: &str, v: u64| {
            let _ = writeln!(o, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        };
        let _ = writeln!(o, "# HELP strata_http_requests_total HTTP requests answered, by method and status code (code 0: any other).");
        let _ = writeln!(o, "# TYPE strata_http_requests_total counter");
        for (mi, m) in METHODS.iter().enumerate() {
            for (ci, c) in CODES.iter().enumerate() {
                let v = self.requests[mi][ci].load(Relaxed);
                if v > 0 {
                    let _ = writeln!(
                        o,
                        "strata_http_requests_total{{method=\"{m}\",code=\"{c}\"}} {v}"
                    );
                }
            }
        }
        self.get_latency.render(
            &mut o,
            "strata_get_latency_seconds",
            "GET latency as seen by the server.",
        );
        self.put_latency.render(
            &mut o,
            "strata_put_latency_seconds",
            "PUT and batch PUT latency as seen by the server (until durable).",
        );
        let _ = writeln!(o, "# HELP strata_reads_served_total Reads that found their object, by where they were served from.");
        let _ = writeln!(o, "# TYPE strata_reads_served_total counter");
        for s in Served::ALL {
            let _ = writeln!(
                o,
                "strata_reads_served_total{{tier=\"{}\"}} {}",
                s.as_str(),
                self.served[s.idx()].load(Relaxed)
            );
        }
        counter(
            &mut o,
            "strata_ram_cache_hits_total",
            "RAM object cache hits.",
            self.ram_hits.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_ram_cache_misses_total",
            "RAM object cache misses.",
            self.ram_misses.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_ram_cache_admissions_total",
            "Objects admitted to the RAM object cache.",
            self.ram_admits.load(Relaxed),
        );
        gauge(
            &mut o,
            "strata_ram_cache_bytes",
            "Bytes held by the RAM object cache.",
            self.ram_bytes.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_hits_total",
            "Flash read cache hits.",
            self.fcache_hits.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_misses_total",
            "Flash read cache misses (reads of disk-resident objects not in it).",
            self.fcache_misses.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_admissions_total",
            "Objects written to the flash read cache.",
            self.fcache_admits.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_written_bytes_total",
            "Bytes written to flash by the flash read cache.",
            self.fcache_bytes_written.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_throttled_total",
            "Admissions skipped by the flash write rate bound.",
            self.fcache_throttled.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_flash_cache_evictions_total",
            "Objects evicted from the flash read cache.",
            self.fcache_evictions.load(Relaxed),
        );
        gauge(
            &mut o,
            "strata_flash_cache_bytes",
            "Bytes held by the flash read cache.",
            self.fcache_bytes.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_mover_segments_total",
            "Segments moved from flash to disk by the tier mover.",
            self.mover_segments.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_mover_bytes_total",
            "Bytes moved from flash to disk by the tier mover.",
            self.mover_bytes.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_mover_reappended_total",
            "Recently read needles re-appended to flash by the LRU mover.",
            self.mover_reappended.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_mover_errors_total",
            "Tier mover errors.",
            self.mover_errors.load(Relaxed),
        );
        gauge(
            &mut o,
            "strata_mover_waiting_for_room",
            "Moves not started since the last move because the disk had no room for the segment.",
            self.mover_no_room.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_reads_not_cached_total",
            "Reads whose needle was not in the page cache, handed from a runtime thread to the blocking pool.",
            self.reads_not_cached.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_commit_batches_total",
            "Multi-writes issued to the store (one fsync per device each).",
            self.commit_batches.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_commit_objects_total",
            "Objects written by those multi-writes.",
            self.commit_objects.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_trace_records_total",
            "Request trace records written.",
            self.trace_records.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_trace_files_total",
            "Request trace files started.",
            self.trace_files.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_trace_dropped_total",
            "Request trace records dropped.",
            self.trace_dropped.load(Relaxed),
        );
        counter(
            &mut o,
            "strata_plan_loads_total",
            "Tier plan loads (start, SIGHUP, admin endpoint).",
            self.plan_loads.load(Relaxed),
        );

        let wl = bounded(self.workloads());
        let _ = writeln!(o, "# HELP strata_workload_reads_total Reads per workload, by where they were served from.");
        let _ = writeln!(o, "# TYPE strata_workload_reads_total counter");
        for (name, w) in &wl {
            for s in Served::ALL {
                let _ = writeln!(
                    o,
                    "strata_workload_reads_total{{workload=\"{}\",tier=\"{}\"}} {}",
                    escape(name),
                    s.as_str(),
                    w.reads_from(s)
                );
            }
        }
        let per = |o: &mut String,
                   metric: &str,
                   kind: &str,
                   help: &str,
                   f: &dyn Fn(&WorkloadCounters) -> u64| {
            let _ = writeln!(o, "# HELP {metric} {help}\n# TYPE {metric} {kind}");
            for (name, w) in &wl {
                let _ = writeln!(o, "{metric}{{workload=\"{}\"}} {}", escape(name), f(w));
            }
        };
        per(
            &mut o,
            "strata_workload_writes_total",
            "counter",
            "Objects written per workload.",
            &|w| w.writes.load(Relaxed),
        );
        per(
            &mut o,
            "strata_workload_flash_writes_total",
            "counter",
            "Objects written to the flash tier per workload.",
            &|w| w.writes_flash.load(Relaxed),
        );
        per(
            &mut o,
            "strata_workload_written_bytes_total",
            "counter",
            "Payload bytes written per workload.",
            &|w| w.bytes_written.load(Relaxed),
        );
        per(
            &mut o,
            "strata_workload_flash_bytes",
            "gauge",
            "Bytes of the workload's segments on flash.",
            &|w| w.flash_bytes.load(Relaxed),
        );
        per(
            &mut o,
            "strata_workload_disk_bytes",
            "gauge",
            "Bytes of the workload's segments on disk.",
            &|w| w.disk_bytes.load(Relaxed),
        );
        o
    }
}

/// Escapes a Prometheus label value.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The status JSON of one workload (`/_admin/status` on every server):
/// reads by tier, flash hit ratio, writes, tier bytes and the plan's rule.
pub fn workload_status(
    name: &str,
    c: &WorkloadCounters,
    rule: &crate::plan::Rule,
) -> serde_json::Value {
    let reads = c.total_reads();
    let flash = c.reads_from(Served::Flash);
    serde_json::json!({
        "name": name,
        "reads": reads,
        "reads_ram": c.reads_from(Served::Ram),
        "reads_flash": flash,
        "reads_flash_cache": c.reads_from(Served::FlashCache),
        "reads_disk": c.reads_from(Served::Disk),
        "flash_hit_ratio": if reads > 0 { flash as f64 / reads as f64 } else { 0.0 },
        "writes": c.writes.load(Relaxed),
        "writes_flash": c.writes_flash.load(Relaxed),
        "flash_bytes": c.flash_bytes.load(Relaxed),
        "disk_bytes": c.disk_bytes.load(Relaxed),
        "plan_flash_bytes": rule.flash_bytes,
        "plan_write_probability": rule.write_probability,
        "plan_eviction": rule.eviction.as_str(),
    })
}

impl Metrics {
    /// The caches' and the mover's part of `/_admin/status`, added to
    /// `status` (every server's).
    pub fn add_status(&self, status: &mut serde_json::Value) {
        status["ram_cache"] = serde_json::json!({
            "hits": self.ram_hits.load(Relaxed),
            "misses": self.ram_misses.load(Relaxed),
            "bytes": self.ram_bytes.load(Relaxed),
        });
        status["flash_cache"] = serde_json::json!({
            "hits": self.fcache_hits.load(Relaxed),
            "misses": self.fcache_misses.load(Relaxed),
            "written_bytes": self.fcache_bytes_written.load(Relaxed),
        });
        status["mover"] = serde_json::json!({
            "segments": self.mover_segments.load(Relaxed),
            "bytes": self.mover_bytes.load(Relaxed),
            "reappended": self.mover_reappended.load(Relaxed),
            "errors": self.mover_errors.load(Relaxed),
            "waiting_for_room": self.mover_no_room.load(Relaxed),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exposition_has_counts() {
        let m = Metrics::default();
        m.request("GET", 404);
        m.request("GET", 404);
        m.request("BREW", 418);
        m.get_latency.observe(150);
        m.workload("a\"b").read(Served::Flash);
        let t = m.render();
        assert!(t.contains("strata_http_requests_total{method=\"GET\",code=\"404\"} 2"));
        assert!(t.contains("strata_http_requests_total{method=\"OTHER\",code=\"0\"} 1"));
        assert!(t.contains("strata_get_latency_seconds_bucket{le=\"0.0002\"} 1"));
        assert!(t.contains("strata_get_latency_seconds_bucket{le=\"0.0001\"} 0"));
        assert!(t.contains("strata_workload_reads_total{workload=\"a\\\"b\",tier=\"flash\"} 1"));
        assert_eq!(m.requests_with(404), 2);
    }

    #[test]
    fn workload_series_are_bounded_the_rest_summed() {
        let m = Metrics::default();
        for i in 0..10_000 {
            m.workload(&format!("bucket-{i:05}"))
                .writes
                .fetch_add(1, Relaxed);
        }
        // The busiest keep series of their own.
        for _ in 0..5 {
            m.workload("busy").read(Served::Disk);
        }
        let t = m.render();
        let series = t
            .lines()
            .filter(|l| l.starts_with("strata_workload_writes_total{"))
            .count();
        assert_eq!(series, MAX_WORKLOAD_SERIES + 1, "{series}");
        assert!(t.contains("strata_workload_reads_total{workload=\"busy\",tier=\"disk\"} 5"));
        // 10,000 writes in all: those with a series of their own plus the
        // rest's sum.
        let own = (MAX_WORKLOAD_SERIES - 1) as u64;
        assert!(
            t.contains(&format!(
                "strata_workload_writes_total{{workload=\"_other\"}} {}",
                10_000 - own
            )),
            "{}",
            t.lines()
                .filter(|l| l.contains("_other"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert!(t.len() < 200_000, "{} bytes", t.len());
    }
}
