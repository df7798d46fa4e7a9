//! `strata report TRACE -o report.html`: one self-contained HTML report.

use crate::cmd::analyze::{open_trace, parse_duration};
use crate::cmd::cost::{load_model, run_grid};
use anyhow::{bail, Context};
use std::path::PathBuf;
use strata_analyze::{AnalyzeConfig, Analyzer};
use strata_policy::Unit;
use strata_provision::Eviction;
use strata_provision::{provision, AgeBuckets, Amount, CollectConfig, Collector, Prices};
use strata_report::charts::{fmt_value, line_chart, Axis, Fmt, Series};
use strata_report::{render, table, MrcCurve, ReportInput, Section};
use strata_sim::mrc::{Shards, ShardsMode};

/// Write one self-contained HTML report of a trace: inline SVG charts, no
/// scripts, nothing fetched from the network, so it opens anywhere.
///
/// It shows the workload analysis (`strata analyze`: op mix, object sizes,
/// lifetimes by size class, locality map, read heat, popularity by age,
/// IOPS per GiB against the break-even line), an LRU miss-ratio curve
/// (SHARDS, bounded memory), and the cost explorer's Pareto chart and table
/// (`strata cost`; skip it with --no-cost, it simulates 36 systems), and
/// the provisioner's cacheability curves and tier plan (`strata provision`
/// with FIFO eviction and --provision-flash of the data on flash; skip with
/// --no-provision).
///
/// Examples:
///   strata report trace.csv.zst -o report.html
///   strata report trace.bin -o r.html --no-cost
///   strata report trace.bin -o r.html --cost-config prices.toml
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    pub trace: PathBuf,
    /// Where to write the HTML report.
    #[arg(short, long)]
    pub output: PathBuf,
    /// Leave out the cost explorer (its 36 simulations are the slow part).
    #[arg(long)]
    pub no_cost: bool,
    /// A TOML file overriding the cost model (see `strata cost --help`).
    #[arg(long)]
    pub cost_config: Option<PathBuf>,
    /// Fixed scale for the cost grid's cache sizes (default: automatic).
    #[arg(long)]
    pub scale: Option<f64>,
    /// Distinct objects tracked exactly by the analysis before sampling.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_objects: usize,
    /// Objects tracked by the SHARDS miss-ratio curve.
    #[arg(long, default_value_t = 100_000)]
    pub mrc_objects: usize,
    /// Interval for peak IOPS.
    #[arg(long, default_value = "10m")]
    pub iops_interval: String,
    /// Leave out the provisioner's cacheability curves and tier plan.
    #[arg(long)]
    pub no_provision: bool,
    /// Flash the provisioner divides among workloads: bytes or % of the
    /// workloads' data.
    #[arg(long, default_value = "10%")]
    pub provision_flash: String,
    /// Worker threads for the cost simulations (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.mrc_objects < 100 {
        bail!("--mrc-objects must be at least 100");
    }
    let cost_model = if args.no_cost {
        None
    } else {
        Some(load_model(&args.cost_config, args.scale)?)
    };
    let cfg = AnalyzeConfig {
        max_objects: args.max_objects,
        iops_interval_s: parse_duration(&args.iops_interval).context("in --iops-interval")?,
        ..AnalyzeConfig::default()
    };
    // Check the output can be written before the long passes.
    std::fs::write(&args.output, b"")
        .with_context(|| format!("cannot write {}", args.output.display()))?;

    let provision_flash = if args.no_provision {
        None
    } else {
        Some(
            match crate::units::parse_size_arg(&args.provision_flash)
                .context("in --provision-flash")?
            {
                crate::units::SizeArg::Bytes(b) => Amount::Absolute(b as f64),
                crate::units::SizeArg::Percent(p) => Amount::Fraction(p / 100.0),
            },
        )
    };
    let buckets = AgeBuckets::geometric(0.01, 366.0 * 86400.0, 8)?;
    let mut collector = match provision_flash {
        Some(_) => Some(Collector::new(CollectConfig::new(buckets.clone()))?),
        None => None,
    };
    let mut analyzer = Analyzer::new(cfg)?;
    let mut shards = Shards::new(Unit::Bytes, ShardsMode::FixedSize(args.mrc_objects));
    for r in open_trace(&args.trace, "analysing")? {
        let r = r.with_context(|| format!("reading {}", args.trace.display()))?;
        analyzer.push(&r);
        if r.op == strata_trace::Op::Get {
            shards.access(r.object, r.bytes());
        }
        if let Some(c) = collector.as_mut() {
            c.push(&r);
        }
    }
    let analysis = analyzer.finish();
    if analysis.requests == 0 {
        bail!("{}: the trace has no requests", args.trace.display());
    }
    let ws = shards.estimated_working_set();
    let (mrc, mrc_note) = if shards.requests() == 0 || ws == 0 {
        (
            Vec::new(),
            "The trace has no reads, so there is no miss-ratio curve.".to_string(),
        )
    } else {
        let sizes: Vec<u64> = (0..=40)
            .map(|i| {
                (ws as f64 * 10f64.powf(-3.0 + 3.0 * i as f64 / 40.0))
                    .round()
                    .max(1.0) as u64
            })
            .collect();
        let curve = shards.curve(&sizes);
        (
            vec![
                MrcCurve {
                    name: "LRU request miss ratio".into(),
                    points: curve.iter().map(|p| (p.cache_size as f64, p.miss_ratio)).collect(),
                },
                MrcCurve {
                    name: "LRU byte miss ratio".into(),
                    points: curve
                        .iter()
                        .map(|p| (p.cache_size as f64, p.byte_miss_ratio))
                        .collect(),
                },
            ],
            format!(
                "LRU miss ratio of the reads against cache size in bytes, from the simulator's SHARDS \
                 sampler tracking at most {} objects (final sampling rate {:.4}); estimated read working set {}.",
                args.mrc_objects,
                shards.rate(),
                crate::units::format_bytes(ws)
            ),
        )
    };

    let cost = match &cost_model {
        Some(m) => {
            let ws_all: f64 = analysis
                .workloads
                .iter()
                .map(|w| w.footprint_gib)
                .sum::<f64>()
                * (1u64 << 30) as f64;
            Some(run_grid(&args.trace, m, Some(ws_all as u64), args.threads)?)
        }
        None => None,
    };
    let mut extra = Vec::new();
    if let (Some(c), Some(flash)) = (collector, provision_flash) {
        extra.push(provision_section(c, &buckets, flash)?);
    }
    let name = args
        .trace
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_else(|| args.trace.display().to_string());
    let html = render(&ReportInput {
        trace: name,
        generated: format!("Generated by strata {}", env!("CARGO_PKG_VERSION")),
        analysis: &analysis,
        mrc,
        mrc_note,
        cost: cost.as_ref(),
        extra,
    });
    std::fs::write(&args.output, html)
        .with_context(|| format!("cannot write {}", args.output.display()))?;
    eprintln!("wrote {}", args.output.display());
    Ok(())
}

/// The provisioner's section: cacheability curves and the tier plan.
fn provision_section(c: Collector, buckets: &AgeBuckets, flash: Amount) -> anyhow::Result<Section> {
    let collected = c.finish().context("provisioning")?;
    let cfg = strata_provision::Config {
        policy: Eviction::Fifo,
        flash,
        write_bound: None,
        weights: Default::default(),
        prices: Prices::default(),
        warm: None,
    };
    let p = match provision(&collected, buckets, &cfg) {
        Ok(p) => p,
        Err(e) => {
            return Ok(Section {
                id: "provision".into(),
                title: "Cacheability curves and tier plan".into(),
                intro: format!("The provisioner has nothing to plan for this trace: {e}."),
                body_html: String::new(),
            })
        }
    };
    let series: Vec<Series> = p
        .curves
        .iter()
        .map(|c| {
            Series::new(
                format!("w{} (FIFO age)", c.id),
                c.fifo
                    .x
                    .iter()
                    .copied()
                    .zip(c.fifo.y.iter().copied())
                    .collect(),
            )
        })
        .collect();
    let chart = line_chart(
        "Cacheability curves: reads/s absorbed by the youngest bytes",
        &Axis::linear("flash allocated (bytes)", Fmt::Bytes),
        &Axis::linear("flash reads per second", Fmt::Number),
        &series,
    );
    let plan = p.plan();
    let rows: Vec<Vec<String>> = plan
        .workloads
        .iter()
        .map(|w| {
            vec![
                format!("w{}", w.id),
                fmt_value(w.flash_bytes as f64, Fmt::Bytes),
                format!("{:.3}", w.write_probability),
                w.ttl_seconds
                    .map(|t| fmt_value(t, Fmt::Seconds))
                    .unwrap_or_else(|| "none (all fits)".into()),
                format!("{:.1}", w.predicted_flash_reads_per_s),
            ]
        })
        .collect();
    let body = format!(
        "<figure>{chart}<figcaption>Janus cacheability: for each workload, the read rate served by flash holding its youngest x bytes (FIFO eviction).</figcaption></figure>{}\
         <p>Predicted flash hit ratio of the optimised plan: {}; single FIFO: {}; proportional to reads: {}; proportional to size: {}.</p>",
        table(
            &["workload", "flash", "write probability", "TTL", "predicted flash reads/s"],
            &rows
        ),
        fmt_value(p.predicted_flash_hit_ratio, Fmt::Percent),
        fmt_value(p.baselines.single_fifo.flash_hit_ratio, Fmt::Percent),
        fmt_value(p.baselines.prop_reads.flash_hit_ratio, Fmt::Percent),
        fmt_value(p.baselines.prop_size.flash_hit_ratio, Fmt::Percent),
    );
    Ok(Section {
        id: "provision".into(),
        title: "Cacheability curves and tier plan".into(),
        intro: format!(
            "The provisioner (strata provision, Janus §4 and §6) divides {} of flash among the workloads to \
             maximise flash reads; the tier plan below is what the store's tier manager would load.",
            fmt_value(p.total_flash_bytes, Fmt::Bytes)
        ),
        body_html: body,
    })
}
