//! `strata mrc`: LRU miss-ratio curves, exact in one pass or SHARDS-sampled.

use crate::cmd::sim::{measure, open, parse_format, print_table, resolve};
use crate::progress;
use crate::units::{format_bytes, parse_size_arg, SizeArg};
use anyhow::{bail, Context};
use serde::Serialize;
use std::io::Write;
use std::path::PathBuf;
use strata_policy::Unit;
use strata_sim::mrc::{
    mean_absolute_error, CurvePoint, ExactMrc, Shards, ShardsMode, DEFAULT_SEED,
};
use strata_sim::plot::{line_chart, Series};

/// LRU miss-ratio curves: exact for all sizes in one pass, or SHARDS.
///
/// The exact curve computes every request's LRU stack distance (a Fenwick
/// tree, O(log n) per request); it equals a separate LRU run at every size.
/// In object mode one pass gives every size; in byte mode the sizes are
/// fixed before the pass (default: 100 points up to the working set, which
/// costs one extra read of the trace to measure). SHARDS samples objects by
/// a hash of their key, at a fixed rate or a fixed number of tracked objects.
///
/// Examples:
///   strata mrc trace.bin --objects
///   strata mrc trace.bin --size 1%,5%,10%,20% --csv
///   strata mrc trace.bin --shards-rate 0.01 --compare --plot mrc.svg
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    pub trace: PathBuf,
    /// Force the trace format.
    #[arg(long)]
    pub format: Option<String>,
    /// Count cache sizes in objects instead of bytes.
    #[arg(long)]
    pub objects: bool,
    /// Sizes to report, comma-separated (bytes with units, object counts
    /// with --objects, or percentages of the working set).
    #[arg(long)]
    pub size: Option<String>,
    /// Without --size: report this many evenly spaced sizes up to the
    /// working set.
    #[arg(long, default_value_t = 100)]
    pub points: u32,
    /// SHARDS at a fixed sampling rate (e.g. 0.01).
    #[arg(long, conflicts_with = "shards_size")]
    pub shards_rate: Option<f64>,
    /// SHARDS tracking at most this many objects (e.g. 32768). The mode to
    /// use on small traces: a 1% sample of a trace with ~50K objects holds
    /// ~500 of them, too few for a steady estimate.
    #[arg(long)]
    pub shards_size: Option<usize>,
    /// Seed of SHARDS's sampling hash (default: a fixed arbitrary
    /// constant). Each seed samples a different set of objects; running a
    /// few seeds shows how much the estimate owes to the sample.
    #[arg(long)]
    pub shards_seed: Option<u64>,
    /// With SHARDS: also compute the exact curve in the same pass and report
    /// the mean absolute error.
    #[arg(long)]
    pub compare: bool,
    /// Print JSON (one object per line) instead of a table.
    #[arg(long, conflicts_with = "csv")]
    pub json: bool,
    /// Print CSV instead of a table.
    #[arg(long)]
    pub csv: bool,
    /// Also write the curve as an SVG chart to this file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
}

#[derive(Serialize)]
struct Row<'a> {
    method: &'a str,
    unit: &'a str,
    cache_size: u64,
    miss_ratio: f64,
    byte_miss_ratio: f64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = parse_format(&args.format)?;
    let unit = if args.objects {
        Unit::Objects
    } else {
        Unit::Bytes
    };
    let sizes: Option<Vec<SizeArg>> = args
        .size
        .as_deref()
        .map(|s| {
            s.split(',')
                .filter(|p| !p.trim().is_empty())
                .map(parse_size_arg)
                .collect::<anyhow::Result<Vec<_>>>()
        })
        .transpose()?;
    if sizes.as_ref().is_some_and(|v| v.is_empty()) {
        bail!("--size lists no size");
    }
    if args.points == 0 {
        bail!("--points must be at least 1");
    }
    let shards_mode = match (args.shards_rate, args.shards_size) {
        (Some(r), _) => {
            if !(r > 0.0 && r <= 1.0) {
                bail!("--shards-rate must be in (0, 1], e.g. 0.01");
            }
            Some(ShardsMode::FixedRate(r))
        }
        (None, Some(n)) => {
            if n == 0 {
                bail!("--shards-size must be at least 1");
            }
            Some(ShardsMode::FixedSize(n))
        }
        (None, None) => None,
    };
    if args.shards_seed.is_some() && shards_mode.is_none() {
        bail!("--shards-seed needs --shards-rate or --shards-size");
    }
    if args.compare && shards_mode.is_none() {
        bail!("--compare needs --shards-rate or --shards-size");
    }
    let exact_needed = shards_mode.is_none() || args.compare;
    let has_percent = sizes
        .as_ref()
        .is_none_or(|v| v.iter().any(|s| matches!(s, SizeArg::Percent(_))));
    // Byte-mode exact curves need their sizes before the pass; so do
    // percentages when SHARDS is compared with the exact curve.
    let whole = if has_percent && (exact_needed && unit == Unit::Bytes || args.compare) {
        let ws = measure(&args.trace, format)?;
        Some(match unit {
            Unit::Bytes => ws.bytes,
            Unit::Objects => ws.objects,
        })
    } else {
        None
    };
    let grid_for = |whole: u64| -> Vec<u64> {
        match &sizes {
            Some(v) => v.iter().map(|s| resolve(*s, whole)).collect(),
            None => (1..=args.points)
                .map(|i| (whole as f64 * i as f64 / args.points as f64) as u64)
                .collect(),
        }
    };
    let pre_grid = whole
        .map(grid_for)
        .or_else(|| sizes.as_ref().filter(|_| !has_percent).map(|_| grid_for(0)));
    let mut exact = exact_needed.then(|| ExactMrc::new(unit, pre_grid.as_deref().unwrap_or(&[])));
    let mut shards = shards_mode
        .map(|m| Shards::new(unit, m).with_seed(args.shards_seed.unwrap_or(DEFAULT_SEED)));

    let src = open(&args.trace, format)?;
    let prog = src.progress();
    let bar = progress::bytes_bar(prog.file_len(), "profiling");
    let started = std::time::Instant::now();
    for batch in src {
        let batch = batch.with_context(|| format!("reading {}", args.trace.display()))?;
        if let Some(e) = exact.as_mut() {
            e.access_batch(&batch);
        }
        if let Some(s) = shards.as_mut() {
            s.access_batch(&batch);
        }
        bar.set_position(prog.bytes_read());
    }
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    let requests = exact
        .as_ref()
        .map(|e| e.requests())
        .or(shards.as_ref().map(|s| s.requests()))
        .unwrap_or(0);
    if requests == 0 {
        bail!("{}: the trace has no requests", args.trace.display());
    }

    let grid = match (&pre_grid, &exact, &shards) {
        (Some(g), _, _) => g.clone(),
        (None, Some(e), _) => grid_for(e.distinct_objects()),
        (None, None, Some(s)) => grid_for(s.estimated_working_set()),
        (None, None, None) => Vec::new(),
    };
    let mut curves: Vec<(&str, Vec<CurvePoint>)> = Vec::new();
    if let Some(e) = &exact {
        curves.push(("exact", e.curve(&grid)));
    }
    if let Some(s) = &shards {
        curves.push(("shards", s.curve(&grid)));
    }
    let unit_name = match unit {
        Unit::Bytes => "bytes",
        Unit::Objects => "objects",
    };

    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if args.json {
        for (m, c) in &curves {
            for p in c {
                serde_json::to_writer(
                    &mut out,
                    &Row {
                        method: m,
                        unit: unit_name,
                        cache_size: p.cache_size,
                        miss_ratio: p.miss_ratio,
                        byte_miss_ratio: p.byte_miss_ratio,
                    },
                )?;
                writeln!(out)?;
            }
        }
    } else if args.csv {
        writeln!(out, "method,unit,cache_size,miss_ratio,byte_miss_ratio")?;
        for (m, c) in &curves {
            for p in c {
                writeln!(
                    out,
                    "{m},{unit_name},{},{:.6},{:.6}",
                    p.cache_size, p.miss_ratio, p.byte_miss_ratio
                )?;
            }
        }
    } else {
        let head = ["method", "cache_size", "miss_ratio", "byte_miss_ratio"];
        let rows: Vec<Vec<String>> = curves
            .iter()
            .flat_map(|(m, c)| {
                c.iter().map(move |p| {
                    vec![
                        m.to_string(),
                        match unit {
                            Unit::Bytes => {
                                format!("{} ({})", p.cache_size, format_bytes(p.cache_size))
                            }
                            Unit::Objects => format!("{} obj", p.cache_size),
                        },
                        format!("{:.4}", p.miss_ratio),
                        format!("{:.4}", p.byte_miss_ratio),
                    ]
                })
            })
            .collect();
        print_table(&mut out, &head, &rows)?;
    }
    out.flush()?;
    let mae = if curves.len() == 2 {
        Some(mean_absolute_error(&curves[0].1, &curves[1].1))
    } else {
        None
    };
    if !args.json && !args.csv {
        let mut msg = format!("{requests} requests, {elapsed:.2} s");
        if let Some(s) = &shards {
            msg += &format!(
                ", SHARDS sampled {} requests (final rate {:.5})",
                s.sampled_requests(),
                s.rate()
            );
        }
        if let Some(m) = mae {
            msg += &format!(", mean absolute error vs exact {m:.4}");
        }
        eprintln!("{msg}");
    } else if let Some(m) = mae {
        eprintln!("mean absolute error vs exact: {m:.4}");
    }
    if let Some(path) = &args.plot {
        let series: Vec<Series> = curves
            .iter()
            .map(|(m, c)| Series {
                label: m.to_string(),
                points: c
                    .iter()
                    .map(|p| (p.cache_size as f64, p.miss_ratio))
                    .collect(),
            })
            .collect();
        let title = format!(
            "LRU miss-ratio curve: {}",
            args.trace.file_name().map_or_else(
                || args.trace.display().to_string(),
                |f| f.to_string_lossy().into()
            )
        );
        let x = format!("cache size ({unit_name})");
        let svg = line_chart(&title, &x, "miss ratio", &series, true);
        std::fs::write(path, svg).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
