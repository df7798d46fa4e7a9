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
/// Examples:
///   strata cost trace.csv.zst
///   strata cost trace.bin --config prices.toml --json > cost.json
///   strata cost trace.bin --plot pareto.svg
///   strata cost --print-config > prices.toml
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
    let rep = run_grid(trace, &model, None, args.threads)?;
    if let Some(p) = &args.plot {
        std::fs::write(p, strata_report::cost_chart(&rep))
            .with_context(|| format!("cannot write {}", p.display()))?;
    }
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&rep)?;
        s.push('\n');
        s
    } else {
        render(&rep)
    };
    write_out(&args.output, &text)
}
