//! `strata cost TRACE`: which hardware to buy for this workload.

use crate::cmd::analyze::{open_trace, write_out};
use crate::progress;
use anyhow::{bail, Context};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use strata_cost::{explore, working_set, CostModel, CostReport};

/// Price a grid of RAM × flash × disk systems on a trace (the Facebook
/// Messages study's §5.4 and Figure 15).
///
/// Each system is simulated on the trace with the layered device model
/// (see `strata model --help`): RAM over flash caches (LRU, promote on
/// flash hit, no-write allocate), disks with seeks and a scheduler, R=3
/// replication. Its capex, opex (failed disks and DIMMs replaced at their
/// annual failure rate, flash replaced as it wears out at the trace's
/// write rate) and mean foreground read latency are computed, and the
/// justifiable systems — the Pareto set, where no other system is both
/// cheaper and faster — are marked.
///
/// Defaults are the study's Table 3 (disk $100, 4% AFR, 10 ms, 100 MB/s;
/// RAM $5/GB, 4% AFR per 8 GB DIMM; flash $0.80/GB, 10K P/E cycles,
/// 0.5 ms) and its grid of 3 RAM × 4 flash × 3 disk levels = 36 systems.
/// Cache sizes are scaled to the trace: by the trace's working set over the
/// ~2.9 TB per node the study's sizes were chosen for (override with
/// --scale or in the config); prices stay those of the unscaled sizes.
/// `--print-config` prints the defaults as TOML to edit for --config.
///
/// With --ec K+M, the erasure-coded warm tier is priced too (f4): from the
/// trace, the logical bytes, the share of bytes older than --ec-after at
/// the trace's end and the share of reads going to data that old; then
/// stored bytes per logical byte (R replicated, 1 + M/K encoded, and
/// blended), the disks (of `disk.capacity_gb`) and dollars saved, the
/// degraded-read traffic (K shard reads for a read of a lost shard, while
/// a disk is being rebuilt) and the rebuild traffic and time of one lost
/// disk. `strata provision --ec` recommends each workload's warm age.
///
/// Examples:
///   strata cost trace.csv.zst
///   strata cost trace.bin --config prices.toml --json > cost.json
///   strata cost trace.bin --plot pareto.svg
///   strata cost --print-config > prices.toml
///   strata cost trace.bin --ec 10+4 --ec-after 30d
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    #[arg(required_unless_present = "print_config")]
    pub trace: Option<PathBuf>,
    /// A TOML file overriding the hardware model, grid or simulation.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Scale the grid's cache sizes by this factor instead of the automatic
    /// working-set scale (1 = the sizes as written).
    #[arg(long)]
    pub scale: Option<f64>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the capex/latency Pareto chart as SVG to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print the cost model (defaults, or with --config the merged model)
    /// as TOML and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Write the output to this file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Also price an erasure-coded warm tier with this code (K+M, for
    /// instance 10+4) for data older than --ec-after.
    #[arg(long, value_name = "K+M")]
    pub ec: Option<String>,
    /// With --ec: the warm age (trace time: s, m, h, d; default 7d).
    #[arg(long, value_name = "DURATION", default_value = "7d", requires = "ec")]
    pub ec_after: String,
}

/// One pass over the trace: the inputs of the erasure-coding price.
fn ec_inputs(
    path: &Path,
    k: usize,
    m: usize,
    replicas: u32,
    after: f64,
) -> anyhow::Result<strata_cost::EcInputs> {
    use std::collections::HashMap;
    use strata_trace::Op;
    // object -> (creation time, size)
    let mut objects: HashMap<u64, (f64, u64)> = HashMap::new();
    let (mut reads, mut warm_reads, mut read_bytes) = (0u64, 0u64, 0f64);
    let (mut first, mut last) = (f64::INFINITY, f64::NEG_INFINITY);
    for r in open_trace(path, "ages")? {
        let r = r.with_context(|| format!("reading {}", path.display()))?;
        first = first.min(r.time);
        last = last.max(r.time);
        match r.op {
            Op::Put => {
                let created = r.create_time.unwrap_or(r.time);
                objects.insert(r.object, (created, r.size));
            }
            Op::Delete => {
                objects.remove(&r.object);
            }
            Op::Get => {
                let e = objects
                    .entry(r.object)
                    .or_insert((r.create_time.unwrap_or(r.time), r.size));
                reads += 1;
                read_bytes += r.bytes() as f64;
                if r.time - e.0 >= after {
                    warm_reads += 1;
                }
            }
        }
    }
    if !first.is_finite() {
        bail!("{}: the trace has no requests", path.display());
    }
    let logical: f64 = objects.values().map(|v| v.1 as f64).sum();
    let warm: f64 = objects
        .values()
        .filter(|v| last - v.0 >= after)
        .map(|v| v.1 as f64)
        .sum();
    let span = (last - first).max(1e-9);
    Ok(strata_cost::EcInputs {
        k,
        m,
        replicas,
        logical_bytes: logical,
        warm_bytes_fraction: if logical > 0.0 { warm / logical } else { 0.0 },
        reads_per_s: reads as f64 / span,
        warm_reads_fraction: if reads > 0 {
            warm_reads as f64 / reads as f64
        } else {
            0.0
        },
        read_bytes: if reads > 0 {
            read_bytes / reads as f64
        } else {
            0.0
        },
    })
}

/// The terminal lines of an erasure-coding price.
fn render_ec(p: &strata_cost::EcPrice, after: &str) -> String {
    let i = &p.inputs;
    let gb = |b: f64| b / 1e9;
    let mut o = String::new();
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "erasure-coded warm tier {}+{} for data older than {after}:",
        i.k, i.m
    );
    let _ = writeln!(
        o,
        "  logical {:.3} GB; {:.1}% of bytes and {:.2}% of reads past the warm age",
        gb(i.logical_bytes),
        100.0 * i.warm_bytes_fraction,
        100.0 * i.warm_reads_fraction
    );
    let _ = writeln!(
        o,
        "  stored per logical byte: {:.3} replicated (R={}), {:.3} encoded, {:.3} blended",
        p.overhead_replicated, i.replicas, p.overhead_encoded, p.overhead_blended
    );
    let _ = writeln!(
        o,
        "  disks: {} replicated, {} with the warm tier (capex saved ${:.0}, disk replacements saved ${:.0}/year)",
        p.disks_replicated, p.disks_with_ec, p.capex_saved, p.opex_saved_per_year
    );
    let _ = writeln!(
        o,
        "  degraded read: {} shard reads; a shard's disk is lost {:.2e} of the time; {:.1} extra bytes/s read on average",
        p.degraded_read_amplification, p.disk_down_probability, p.degraded_read_bytes_per_s
    );
    let _ = writeln!(
        o,
        "  rebuild of one lost disk: {:.1} GB read in {:.0} s with the warm tier ({:.1} GB in {:.0} s replicated); {:.1} GB read per year",
        gb(p.rebuild_read_bytes_with_ec),
        p.rebuild_seconds_with_ec,
        gb(p.rebuild_read_bytes_replicated),
        p.rebuild_seconds_replicated,
        gb(p.rebuild_read_bytes_per_year_with_ec)
    );
    o
}

/// Loads the cost model: defaults, then the TOML file, then --scale.
pub(crate) fn load_model(
    config: &Option<PathBuf>,
    scale: Option<f64>,
) -> anyhow::Result<CostModel> {
    let mut model = match config {
        Some(p) => {
            let text = std::fs::read_to_string(p)
                .with_context(|| format!("cannot read cost model {}", p.display()))?;
            CostModel::from_toml(&text).with_context(|| format!("in {}", p.display()))?
        }
        None => CostModel::default(),
    };
    if let Some(s) = scale {
        if !(s.is_finite() && s > 0.0) {
            bail!("--scale must be a positive number");
        }
        model.simulation.scale = Some(s);
    }
    model.validate()?;
    Ok(model)
}

/// Sizes the trace, then simulates the grid on it.
pub(crate) fn run_grid(
    path: &Path,
    model: &CostModel,
    working_set_bytes: Option<u64>,
    threads: Option<usize>,
) -> anyhow::Result<CostReport> {
    let ws = match (working_set_bytes, model.simulation.scale) {
        (Some(w), _) => w,
        (None, Some(_)) => 0,
        (None, None) => {
            let (b, n) = working_set(open_trace(path, "sizing")?)
                .with_context(|| format!("reading {}", path.display()))?;
            if n == 0 {
                bail!("{}: the trace has no requests", path.display());
            }
            b
        }
    };
    let threads = threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let bar = progress::spinner(&format!("{} systems", model.systems()));
    let rep = explore(model, open_trace(path, "simulating")?, ws, threads, &|n| {
        bar.set_position(n)
    })
    .with_context(|| format!("simulating {} on {}", model.systems(), path.display()))?;
    bar.finish_and_clear();
    if rep.requests == 0 {
        bail!("{}: the trace has no requests", path.display());
    }
    Ok(rep)
}

/// The terminal table of a cost report.
pub(crate) fn render(c: &CostReport) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} systems on {} requests ({:.0} s of trace); {}",
        c.systems.len(),
        c.requests,
        c.duration_s,
        c.scale_note
    );
    let _ = writeln!(
        o,
        "{:<9} {:>7} {:>8} {:>5} {:>8} {:>9} {:>9} {:>9} {:>8} {:>10}  justifiable",
        "system",
        "RAM GB",
        "flash GB",
        "disks",
        "capex $",
        "opex $/y",
        "mean ms",
        "p99 ms",
        "hit",
        "flash yrs",
    );
    for s in &c.systems {
        let _ = writeln!(
            o,
            "{:<9} {:>7} {:>8} {:>5} {:>8.0} {:>9.1} {:>9.3} {:>9.3} {:>7.1}% {:>10}  {}",
            s.label,
            s.ram_gb,
            s.flash_gb,
            s.disks,
            s.capex,
            s.opex,
            s.latency.mean_ms,
            s.latency.p99_ms,
            s.hit_ratio * 100.0,
            s.flash_lifetime_years
                .map(|y| format!("{y:.1}"))
                .unwrap_or_else(|| "-".into()),
            if s.pareto { "*" } else { "" }
        );
    }
    let _ = writeln!(
        o,
        "Pareto set ({} of {}), cheapest first: {}",
        c.pareto.len(),
        c.systems.len(),
        c.pareto.join(", ")
    );
    o
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let model = load_model(&args.config, args.scale)?;
    if args.print_config {
        return write_out(&args.output, &model.to_toml());
    }
    let Some(trace) = &args.trace else {
        bail!("give a trace file (or --print-config)");
    };
    let ec = match &args.ec {
        Some(code) => {
            let (k, m) = crate::units::parse_code(code).context("--ec")?;
            let after =
                crate::cmd::analyze::parse_duration(&args.ec_after).context("--ec-after")?;
            let inputs = ec_inputs(trace, k, m, model.simulation.replicas, after)?;
            Some(strata_cost::price_ec(&model.disk, inputs))
        }
        None => None,
    };
    let rep = run_grid(trace, &model, None, args.threads)?;
    if let Some(p) = &args.plot {
        std::fs::write(p, strata_report::cost_chart(&rep))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    let text = if args.json {
        let mut s = match &ec {
            // With --ec: the grid's report and the price side by side.
            Some(p) => serde_json::to_string_pretty(&serde_json::json!({
                "cost": rep,
                "ec": p,
            }))?,
            None => serde_json::to_string_pretty(&rep)?,
        };
        s.push('\n');
        s
    } else {
        let mut s = render(&rep);
        if let Some(p) = &ec {
            s.push_str(&render_ec(p, &args.ec_after));
        }
        s
    };
    write_out(&args.output, &text)
}
