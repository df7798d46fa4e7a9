//! `strata provision`: Janus flash provisioning from a trace.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context};
use strata_provision::analysis::WorkloadReport;
use strata_provision::solver::reference::allocate_reference;
use strata_provision::svg::curve_chart;
use strata_provision::{
    allocate, provision, AgeBuckets, Amount, CacheabilityCurve, CollectConfig, Collector, Config,
    Eviction, Item, Prices, Provision, ProvisionError, Replay, Solution,
};
use strata_trace::{Request, TraceError};

use crate::progress;
use crate::units::{format_bytes, parse_size_arg, SizeArg};

/// The long help: what the command does, with examples.
const DETAILS: &str = "\
Reads the trace once to build, per workload, histograms of bytes stored
and of reads by data age (FIFO age: since creation; LRU age: the largest
gap between reads, with upper/lower bounds when objects predate the
trace), joins them into cacheability curves, and divides --flash among
the workloads to maximise (weighted) reads served from flash, optionally
under a flash write-rate bound through per-workload write probabilities.
It compares the result with a single FIFO (one TTL for all) and with
flash proportional to read rate or size, prints the per-workload TTLs and
the cost-optimal flash of each workload, and writes the tier plan the
store loads (--plan, docs/tier-plan.md).

With --eval, the evaluation window is replayed through a flash tier laid
out by each allocation (insert on write, FIFO or LRU eviction within each
workload's flash), and the measured flash hit ratios are printed beside
the predicted ones.

With --ec K+M, each workload also gets an erasure-coded warm age (f4):
the youngest age past which at most --ec-reads of its reads go and its
reads per byte are at most --ec-reads of its average (reads by age since
creation, the FIFO histogram above). Data older than that is
encoded (stored 1 + M/K times instead of R = --replicas times); a
workload still read at every age stays replicated (\"ec\": \"off\" in the
plan). The plan carries each workload's age (\"ec\": {\"after_seconds\": S});
a server loading the plan encodes that workload's sealed segments once
older than it (docs/tier-plan.md, docs/erasure-coding.md).

Times are trace seconds, with an optional unit (s, m, h, d).

Examples:
  strata provision trace.csv --flash 5%
  strata provision trace.csv --flash 2GiB --write-bound 50% --train 12h..30h --eval 30h..48h
  strata provision trace.bin --flash 1% --policy lru --weights weights.txt --plan plan.json --plot plots/
  strata provision trace.csv --flash 5% --ec 10+4 --ec-reads 1% --plan plan.json
  strata provision --bench-solver 10000x100";

/// Janus flash provisioning: how much flash each workload should get.
///
/// `--help` adds the details in `DETAILS`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = DETAILS)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    #[arg(required_unless_present = "bench_solver")]
    pub trace: Option<PathBuf>,
    /// Total flash: bytes (e.g. 10GiB) or a percentage of the workloads'
    /// total size in the training window (e.g. 5%).
    #[arg(long, value_parser = parse_size, required_unless_present = "bench_solver")]
    pub flash: Option<SizeArg>,
    /// Bound on the flash write rate: bytes per second (e.g. 20MB or
    /// 20MB/s) or a percentage of the rate of new bytes (e.g. 50%).
    #[arg(long, value_parser = parse_rate)]
    pub write_bound: Option<SizeArg>,
    /// Priority weights: a file of `WORKLOAD WEIGHT` lines (`#` comments);
    /// workloads not listed have weight 1.
    #[arg(long)]
    pub weights: Option<PathBuf>,
    /// Eviction policy of the flash tier: fifo (by age since creation) or
    /// lru (by time since last read).
    #[arg(long, default_value = "fifo", value_parser = parse_policy)]
    pub policy: Eviction,
    /// Training window T0..T1 (default: the whole trace, or everything
    /// before the evaluation window).
    #[arg(long, value_parser = parse_window)]
    pub train: Option<(f64, f64)>,
    /// Evaluation window T1..T2: replayed to measure the flash hit ratios.
    #[arg(long, value_parser = parse_window)]
    pub eval: Option<(f64, f64)>,
    /// Write the tier plan (JSON) here.
    #[arg(long, value_name = "OUT")]
    pub plan: Option<PathBuf>,
    /// Write the cacheability curves as SVG charts into this directory.
    #[arg(long, value_name = "DIR")]
    pub plot: Option<PathBuf>,
    /// Print one JSON object instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Fraction of reads sampled for the FIFO read histograms (Dapper-like);
    /// counts are scaled back.
    #[arg(long, default_value_t = 1.0)]
    pub sample_reads: f64,
    /// Fraction of objects (by id hash) tracked for LRU ages.
    #[arg(long, default_value_t = 1.0)]
    pub sample_objects: f64,
    /// Age buckets per doubling of age (finer buckets, finer curves).
    #[arg(long, default_value_t = 8)]
    pub buckets_per_doubling: u32,
    /// Disk IOPS per dollar (economics, §5 of Janus).
    #[arg(long, default_value_t = 1.5)]
    pub disk_iops_per_dollar: f64,
    /// Flash GiB per dollar (economics).
    #[arg(long, default_value_t = 1.0)]
    pub flash_gib_per_dollar: f64,
    /// Seed of the sampling and write-probability draws.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Recommend each workload's erasure-coded warm age for this code
    /// (K+M, for instance 10+4) and put it in the plan.
    #[arg(long, value_name = "K+M")]
    pub ec: Option<String>,
    /// With --ec: the most of a workload's reads that may go to encoded
    /// data (a fraction, or a percentage such as 1%).
    #[arg(long, value_name = "FRACTION", default_value = "1%", requires = "ec")]
    pub ec_reads: String,
    /// With --ec: replicas of data that is not encoded (for the storage
    /// figures).
    #[arg(long, value_name = "R", default_value_t = 3, requires = "ec")]
    pub replicas: u32,
    /// Benchmark the solver on random curves, WORKLOADSxBREAKPOINTS
    /// (e.g. 10000x100), instead of provisioning a trace: the fast solver
    /// and the straightforward reference, alternating, three rounds.
    #[arg(long, value_name = "WxB", conflicts_with_all = ["trace", "flash"])]
    pub bench_solver: Option<String>,
}

fn parse_size(s: &str) -> Result<SizeArg, String> {
    parse_size_arg(s).map_err(|e| format!("{e:#}"))
}

fn parse_rate(s: &str) -> Result<SizeArg, String> {
    let t = s.trim();
    let t = t.strip_suffix("/s").unwrap_or(t);
    parse_size_arg(t)
        .map_err(|e| format!("{e:#} (a write bound is bytes per second or a percentage)"))
}

fn parse_policy(s: &str) -> Result<Eviction, String> {
    match s.to_ascii_lowercase().as_str() {
        "fifo" => Ok(Eviction::Fifo),
        "lru" => Ok(Eviction::Lru),
        _ => Err(format!("unknown policy {s:?}: use fifo or lru")),
    }
}

/// Parses a time in seconds with an optional unit: `90`, `90s`, `15m`, `12h`, `1.5d`.
fn parse_time(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().last() {
        Some((i, 's')) => (&t[..i], 1.0),
        Some((i, 'm')) => (&t[..i], 60.0),
        Some((i, 'h')) => (&t[..i], 3600.0),
        Some((i, 'd')) => (&t[..i], 86400.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("bad time {s:?}: expected seconds or a number with s, m, h or d"))?;
    if !v.is_finite() {
        return Err(format!("bad time {s:?}"));
    }
    Ok(v * mult)
}

fn parse_window(s: &str) -> Result<(f64, f64), String> {
    let Some((a, b)) = s.split_once("..") else {
        return Err(format!(
            "bad window {s:?}: expected START..END, e.g. 12h..30h"
        ));
    };
    let (a, b) = (parse_time(a)?, parse_time(b)?);
    if b <= a {
        return Err(format!("bad window {s:?}: the end must be after the start"));
    }
    Ok((a, b))
}

/// Reads the trace through `push` until it returns false; returns the time
/// of the last request read.
fn stream(
    path: &Path,
    label: &str,
    mut push: impl FnMut(&Request) -> bool,
) -> anyhow::Result<(Option<f64>, HashMap<u32, String>)> {
    let mut reader = strata_trace::open(path)
        .with_context(|| format!("cannot read trace {}", path.display()))?;
    let bar = progress::bytes_bar(reader.progress().file_len(), label);
    let mut last = None;
    let mut n = 0u64;
    let mut batch: Vec<Request> = Vec::with_capacity(4096);
    'outer: loop {
        batch.clear();
        let got = reader.read_batch(&mut batch).map_err(trace_err)?;
        if got == 0 {
            break;
        }
        for r in &batch {
            last = Some(r.time);
            if !push(r) {
                break 'outer;
            }
        }
        n += got as u64;
        if n % (1 << 16) < got as u64 {
            bar.set_position(reader.progress().bytes_read());
        }
    }
    bar.finish_and_clear();
    let names = reader
        .workload_names()
        .iter()
        .enumerate()
        .map(|(i, s)| (i as u32, s.clone()))
        .collect();
    Ok((last, names))
}

fn trace_err(e: TraceError) -> anyhow::Error {
    anyhow::Error::new(e)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if let Some(spec) = &args.bench_solver {
        return bench_solver(spec);
    }
    let (Some(trace), Some(flash)) = (args.trace.clone(), args.flash) else {
        bail!("a trace and --flash are required");
    };
    let weights = match &args.weights {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read weights file {}", p.display()))?;
            strata_provision::weights::parse_weights(p, &text)?
        }
        None => HashMap::new(),
    };
    let prices = Prices {
        disk_iops_per_dollar: args.disk_iops_per_dollar,
        flash_gib_per_dollar: args.flash_gib_per_dollar,
    };
    prices.validate()?;
    if let Some(SizeArg::Percent(p)) = args.write_bound {
        if p > 100.0 {
            bail!("--write-bound {p}% is more than every new byte: use at most 100%");
        }
    }
    // Windows: train defaults to everything before the evaluation window.
    let train = match (args.train, args.eval) {
        (Some(t), _) => Some(t),
        (None, Some((e0, _))) => Some((f64::NEG_INFINITY, e0)),
        (None, None) => None,
    };
    if let (Some((_, t1)), Some((e0, _))) = (train, args.eval) {
        if e0 < t1 {
            bail!("the evaluation window must start at or after the end of the training window");
        }
    }
    // The buckets must reach the oldest age of the window; a year is plenty
    // for any trace, data older than the last boundary counts as unbounded.
    let buckets = AgeBuckets::geometric(0.01, 366.0 * 86400.0, args.buckets_per_doubling)?;
    let mut cfg = CollectConfig::new(buckets.clone());
    if let Some((a, b)) = train {
        cfg.start = a.is_finite().then_some(a);
        cfg.end = Some(b);
    }
    cfg.read_sample_rate = args.sample_reads;
    cfg.object_sample_rate = args.sample_objects;
    cfg.seed = args.seed;
    let mut collector = Collector::new(cfg)?;
    let (_, names) = stream(&trace, "training", |r| collector.push(r))?;
    let collected = collector.finish().map_err(|e| match e {
        ProvisionError::EmptyTrace(_) if train.is_some() => anyhow::anyhow!(
            "{}: no requests before the end of the training window",
            trace.display()
        ),
        other => anyhow::Error::new(other).context(format!("trace {}", trace.display())),
    })?;
    let config = Config {
        policy: args.policy,
        flash: match flash {
            SizeArg::Bytes(b) => Amount::Absolute(b as f64),
            SizeArg::Percent(p) => Amount::Fraction(p / 100.0),
        },
        write_bound: args.write_bound.map(|w| match w {
            SizeArg::Bytes(b) => Amount::Absolute(b as f64),
            SizeArg::Percent(p) => Amount::Fraction(p / 100.0),
        }),
        weights,
        prices,
        warm: warm_config(&args)?,
    };
    let mut result = provision(&collected, &buckets, &config)?;
    for w in &mut result.workloads {
        w.name = names.get(&w.id).cloned();
    }
    if let Some((e0, e1)) = args.eval {
        let mut replay = Replay::new(result.layouts(), args.policy, e0, e1, args.seed);
        let (last, _) = stream(&trace, "evaluation", |r| replay.push(r))?;
        let last = last.unwrap_or(f64::NEG_INFINITY);
        // A trace that ends before the window's end (1% slack) cannot
        // measure it.
        if last < e1 - 0.01 * (e1 - e0) {
            return Err(ProvisionError::WindowOutsideTrace {
                name: "eval",
                start: e0,
                end: e1,
                trace_start: collected.trace_start,
                trace_end: last,
            }
            .into());
        }
        if replay.reads() == 0 {
            bail!("the evaluation window {e0}..{e1} s has no reads to measure");
        }
        let measured = replay.finish();
        result.set_measured(&measured, (e0, e1));
    }
    if let Some(path) = &args.plan {
        let plan = result.plan();
        std::fs::write(path, plan.to_json() + "\n")
            .with_context(|| format!("cannot write tier plan {}", path.display()))?;
    }
    if let Some(dir) = &args.plot {
        write_plots(dir, &result)?;
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&result)?);
    } else {
        print!("{}", table(&trace, &result, &collected));
    }
    Ok(())
}

fn write_plots(dir: &Path, r: &Provision) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir)
        .with_context(|| format!("cannot create plot directory {}", dir.display()))?;
    for (c, w) in r.curves.iter().zip(&r.workloads) {
        let title = match &w.name {
            Some(n) => format!("workload {} ({n}): cacheability", w.id),
            None => format!("workload {}: cacheability", w.id),
        };
        let curve = match r.policy {
            Eviction::Fifo => &c.fifo,
            Eviction::Lru => &c.lru_lower,
        };
        let x = w.flash_bytes as f64;
        let marker = (x > 0.0).then(|| {
            (
                x / w.write_probability.max(1e-12),
                curve.eval(x / w.write_probability.max(1e-12)),
            )
        });
        let svg = curve_chart(c, &title, marker);
        let path = dir.join(format!("workload-{}.svg", w.id));
        std::fs::write(&path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

fn dur(s: Option<f64>) -> String {
    match s {
        None => "none".into(),
        Some(s) if s < 120.0 => format!("{s:.0}s"),
        Some(s) if s < 7200.0 => format!("{:.1}m", s / 60.0),
        Some(s) if s < 172800.0 => format!("{:.1}h", s / 3600.0),
        Some(s) => format!("{:.1}d", s / 86400.0),
    }
}

fn pct(v: f64) -> String {
    format!("{:.1}%", 100.0 * v)
}

fn opt_pct(v: Option<f64>) -> String {
    v.map_or("-".into(), pct)
}

fn name(w: &WorkloadReport) -> String {
    match &w.name {
        Some(n) => format!("{} {}", w.id, n),
        None => w.id.to_string(),
    }
}

fn table(trace: &Path, r: &Provision, c: &strata_provision::Collected) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "strata provision {}: {} requests, policy {}, train {:.0}..{:.0} s{}",
        trace.display(),
        c.requests,
        r.policy.as_str(),
        r.train_window[0],
        r.train_window[1],
        r.eval_window.map_or(String::new(), |e| format!(
            ", eval {:.0}..{:.0} s",
            e[0], e[1]
        ))
    );
    let _ = writeln!(
        s,
        "flash {} of {} total ({}), reads {:.2}/s, new data {}/s",
        format_bytes(r.total_flash_bytes as u64),
        format_bytes(r.total_size_bytes as u64),
        pct(r.total_flash_bytes / r.total_size_bytes.max(1.0)),
        r.read_ops_per_s,
        format_bytes(r.write_bytes_per_s as u64),
    );
    let _ = writeln!(
        s,
        "flash writes {}/s ({} of new data){}{}",
        format_bytes(r.flash_write_bytes_per_s as u64),
        pct(r.flash_write_bytes_per_s / r.write_bytes_per_s.max(1e-300)),
        r.write_bound_bytes_per_s.map_or(String::new(), |b| format!(
            ", bound {}/s, lambda {:.3e}",
            format_bytes(b as u64),
            r.lambda
        )),
        if r.error_bound > 0.0 {
            format!(
                ", error bound {:.4} reads/s (non-concave curve)",
                r.error_bound
            )
        } else {
            String::new()
        }
    );
    if r.sampling.read_rate < 1.0 || r.sampling.object_rate < 1.0 {
        let _ = writeln!(
            s,
            "sampled: reads at {}, objects (LRU ages) at {}; counts scaled back",
            r.sampling.read_rate, r.sampling.object_rate
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>8} {:>10} {:>10} {:>6} {:>7} {:>9} {:>9} {:>7} {:>7}",
        "workload",
        "size",
        "reads/s",
        "new/s",
        "flash",
        "p",
        "TTL",
        "pred r/s",
        "meas r/s",
        "hit%",
        "size%"
    );
    if r.workloads.iter().any(|w| w.warm.is_some()) {
        let _ = writeln!(s, "erasure-coded warm tier (reads by age since creation):");
        let _ = writeln!(
            s,
            "{:<18} {:>10} {:>8} {:>8} {:>12} {:>12}",
            "workload", "warm age", "bytes%", "reads%", "stored (R)", "stored (ec)"
        );
        for w in &r.workloads {
            if let Some(a) = &w.warm {
                let _ = writeln!(
                    s,
                    "{:<18} {:>10} {:>8.1} {:>8.2} {:>12} {:>12}",
                    name(w),
                    a.after_seconds.map_or("off".into(), |x| dur(Some(x))),
                    100.0 * a.bytes_fraction,
                    100.0 * a.reads_fraction,
                    format_bytes(a.stored_replicated as u64),
                    format_bytes(a.stored_with_ec as u64),
                );
            }
        }
        let _ = writeln!(s);
    }
    for w in &r.workloads {
        let _ = writeln!(
            s,
            "{:<18} {:>10} {:>8.2} {:>10} {:>10} {:>6.3} {:>7} {:>9.3} {:>9} {:>7.2} {:>7.3}{}",
            name(w),
            format_bytes(w.size_bytes as u64),
            w.read_ops_per_s,
            format_bytes(w.write_bytes_per_s as u64),
            format_bytes(w.flash_bytes),
            w.write_probability,
            if w.flash_bytes == 0 {
                "-".into()
            } else {
                dur(w.ttl_seconds)
            },
            w.predicted_flash_reads_per_s,
            w.measured_flash_reads_per_s
                .map_or("-".into(), |v| format!("{v:.3}")),
            w.normalized_flash_hit_pct,
            w.normalized_flash_size_pct,
            if w.concave { "" } else { "  (not concave)" }
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "normalized flash hit rate (% of all reads), predicted / measured:"
    );
    let _ = writeln!(
        s,
        "{:<18} {:>15} {:>15} {:>15} {:>15}",
        "workload", "optimized", "single", "prop. reads", "prop. size"
    );
    let total = r.read_ops_per_s.max(1e-300);
    let cell = |pred: f64, meas: Option<f64>, eval_total: f64| {
        format!(
            "{:>6.2} / {:<6}",
            100.0 * pred / total,
            meas.map_or("-".into(), |m| format!(
                "{:.2}",
                100.0 * m / eval_total.max(1e-300)
            ))
        )
    };
    let eval_total: f64 = r
        .workloads
        .iter()
        .filter_map(|w| w.eval_read_ops_per_s)
        .sum();
    for w in &r.workloads {
        let _ = writeln!(
            s,
            "{:<18} {:>15} {:>15} {:>15} {:>15}",
            name(w),
            cell(
                w.predicted_flash_reads_per_s,
                w.measured_flash_reads_per_s,
                eval_total
            ),
            cell(
                w.single_fifo.predicted_flash_reads_per_s,
                w.single_fifo.measured_flash_reads_per_s,
                eval_total
            ),
            cell(
                w.prop_reads.predicted_flash_reads_per_s,
                w.prop_reads.measured_flash_reads_per_s,
                eval_total
            ),
            cell(
                w.prop_size.predicted_flash_reads_per_s,
                w.prop_size.measured_flash_reads_per_s,
                eval_total
            ),
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(s, "normalized flash size (% of all bytes):");
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>10} {:>12} {:>11}",
        "workload", "optimized", "single", "prop. reads", "prop. size"
    );
    let tb = r.total_size_bytes.max(1.0);
    for w in &r.workloads {
        let _ = writeln!(
            s,
            "{:<18} {:>10.3} {:>10.3} {:>12.3} {:>11.3}",
            name(w),
            100.0 * w.flash_bytes as f64 / tb,
            100.0 * w.single_fifo.flash_bytes / tb,
            100.0 * w.prop_reads.flash_bytes / tb,
            100.0 * w.prop_size.flash_bytes / tb,
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "{:<28} {:>10} {:>10}",
        "cell-wide flash hit ratio", "predicted", "measured"
    );
    let opt_name = match r.policy {
        Eviction::Fifo => "optimized FIFO",
        Eviction::Lru => "optimized LRU",
    };
    let pred = match r.predicted_flash_hit_ratio_upper {
        Some(u) => format!("{}-{}", pct(r.predicted_flash_hit_ratio), pct(u)),
        None => pct(r.predicted_flash_hit_ratio),
    };
    let _ = writeln!(
        s,
        "{:<28} {:>10} {:>10}",
        opt_name,
        pred,
        opt_pct(r.measured_flash_hit_ratio)
    );
    let single_name = match r.policy {
        Eviction::Fifo => format!("single FIFO (TTL {})", dur(r.single_fifo_ttl_seconds)),
        Eviction::Lru => format!("single LRU (TTL {})", dur(r.single_fifo_ttl_seconds)),
    };
    let b = &r.baselines;
    for (n, v) in [
        (single_name.as_str(), &b.single_fifo),
        ("proportional to reads", &b.prop_reads),
        ("proportional to size", &b.prop_size),
    ] {
        let _ = writeln!(
            s,
            "{:<28} {:>10} {:>10}",
            n,
            pct(v.flash_hit_ratio),
            opt_pct(v.measured_flash_hit_ratio)
        );
    }
    let _ = writeln!(s);
    let _ = writeln!(
        s,
        "economics: break-even {:.2} IOPS/GiB (disk {} IOPS/$, flash {} GiB/$); per-workload optimum saves {} overall",
        r.break_even_iops_per_gib,
        r.prices.disk_iops_per_dollar,
        r.prices.flash_gib_per_dollar,
        pct(r.cost_savings)
    );
    let _ = writeln!(
        s,
        "{:<18} {:>10} {:>6} {:>14} {:>9}",
        "workload", "IOPS/GiB", "flash?", "optimal flash", "savings"
    );
    for w in &r.workloads {
        let _ = writeln!(
            s,
            "{:<18} {:>10.3} {:>6} {:>14} {:>9}",
            name(w),
            w.cost.iops_per_gib,
            if w.cost.above_break_even {
                "all"
            } else {
                "part"
            },
            format_bytes(w.cost.flash_bytes as u64),
            pct(w.cost.savings)
        );
    }
    s
}

/// `--bench-solver WxB`: random curves, timed allocations.
fn bench_solver(spec: &str) -> anyhow::Result<()> {
    let (w, b) = spec
        .split_once(['x', 'X'])
        .context("--bench-solver takes WORKLOADSxBREAKPOINTS, e.g. 10000x100")?;
    let w: usize = w
        .trim()
        .parse()
        .context("bad workload count in --bench-solver")?;
    let b: usize = b
        .trim()
        .parse()
        .context("bad breakpoint count in --bench-solver")?;
    if w == 0 || b < 2 {
        bail!("--bench-solver needs at least 1 workload and 2 breakpoints");
    }
    let mut rng = strata_workload::rng::Rng::new(1, 0);
    let mut curves = Vec::with_capacity(w);
    let mut writes = Vec::with_capacity(w);
    for i in 0..w {
        let mut x = vec![0.0];
        let mut y = vec![0.0];
        // Read density falling with age, with a bump in one workload of
        // ten (a late reader): realistic, and not all concave.
        let mut density = rng.uniform() * 10.0 + 0.1;
        for k in 1..b {
            let len = rng.uniform() * 1e9 + 1e6;
            density *= 0.6 + 0.35 * rng.uniform();
            let d = if i % 10 == 0 && k == b / 2 {
                density * 20.0
            } else {
                density
            };
            x.push(x[k - 1] + len);
            y.push(y[k - 1] + d * len / 1e9);
        }
        curves.push(CacheabilityCurve::from_points(x, y)?);
        writes.push(rng.uniform() * 1e6 + 1e3);
    }
    let items: Vec<Item<'_>> = curves
        .iter()
        .zip(&writes)
        .map(|(c, &wr)| Item {
            curve: c,
            weight: 1.0,
            write_rate: wr,
        })
        .collect();
    let total: f64 = curves.iter().map(|c| c.size()).sum();
    let total_w: f64 = writes.iter().sum();
    let flash = 0.05 * total;
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    println!("solver benchmark: {w} workloads x {b} breakpoints, flash 5% of the total size");
    println!(
        "load average {} (wall time includes waiting for a core; CPU time is all threads)",
        load.join(" ")
    );
    let free = allocate(&items, flash, None)?;
    // Half the write rate of the unbounded optimum: the bisection works.
    let bound = 0.5 * free.write_rate.min(total_w);
    type Solve = fn(&[Item<'_>], f64, Option<f64>) -> Result<Solution, ProvisionError>;
    let solvers: [(&str, Solve); 2] = [("fast", allocate), ("reference", allocate_reference)];
    let problems = [
        ("max reads (no write bound)", None),
        ("bounded writes (half the writes)", Some(bound)),
    ];
    // Alternate the solvers, three rounds, so that both see the same load.
    for round in 1..=3 {
        for (problem, wb) in problems {
            for (name, solve) in solvers {
                let (t, c) = (Instant::now(), cpu_seconds());
                let s = solve(&items, flash, wb)?;
                let (wall, cpu) = (t.elapsed().as_secs_f64(), cpu_seconds() - c);
                println!(
                    "round {round}  {problem:<33} {name:<9} {:>8.1} ms wall {:>8.1} ms CPU  objective {:.6e}, {} relaxed solve(s)",
                    wall * 1e3,
                    cpu * 1e3,
                    s.objective,
                    s.iterations
                );
            }
        }
    }
    Ok(())
}

/// CPU time (user + system, all threads) of this process so far, from
/// /proc/self/stat (Linux; 0 elsewhere), in seconds.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name: state is field 3, utime 14, stime 15.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15, i.e. indices 11 and 12 after ')'.
    (ticks(11) + ticks(12)) / 100.0
}

/// The warm-tier rule of `--ec K+M --ec-reads F --replicas R`.
fn warm_config(args: &Args) -> anyhow::Result<Option<strata_provision::WarmConfig>> {
    let Some(code) = args.ec.as_deref() else {
        return Ok(None);
    };
    let (k, m) = code
        .split_once('+')
        .and_then(|(k, m)| Some((k.trim().parse().ok()?, m.trim().parse().ok()?)))
        .ok_or_else(|| anyhow::anyhow!("--ec {code:?}: expected K+M, for instance 10+4"))?;
    let f = args.ec_reads.trim();
    let max_read_fraction = match f.strip_suffix('%') {
        Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
        None => f.parse::<f64>(),
    }
    .map_err(|_| {
        anyhow::anyhow!("--ec-reads {f:?}: expected a fraction (0.01) or a percentage (1%)")
    })?;
    let cfg = strata_provision::WarmConfig {
        k,
        m,
        replicas: args.replicas,
        max_read_fraction,
    };
    cfg.validate().context("--ec / --ec-reads / --replicas")?;
    Ok(Some(cfg))
}
