//! `strata analyze TRACE`: characterise a trace's workload.

use crate::progress;
use crate::units::parse_bytes;
use anyhow::{bail, Context};
use indicatif::ProgressBar;
use std::io::Write;
use std::path::{Path, PathBuf};
use strata_analyze::{Analysis, AnalyzeConfig, Analyzer};
use strata_trace::{ReadProgress, Request, TraceError, TraceReader};

/// Characterise a trace's workload, as the Facebook Messages study (§4),
/// Haystack (§4.1) and Janus (§4–5) did for theirs.
///
/// Prints, per workload: the op mix in requests and bytes; object sizes
/// (percentiles, box-plot data); object lifetimes as CDFs by size class;
/// the locality map (fraction of reads preceded by a read within an offset
/// distance and a recency window); read heat (data and read I/O by times
/// read); popularity by age; and peak IOPS per GiB against the flash
/// break-even line.
///
/// Memory is bounded: past --max-objects distinct objects, object-level
/// statistics come from a hash sample of objects (the output says so).
///
/// Examples:
///   strata analyze trace.csv.zst
///   strata analyze trace.bin --json > analysis.json
///   strata analyze trace.bin --size-classes 1MiB,16MiB --max-objects 200000
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    pub trace: PathBuf,
    /// Print the analysis as JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the output to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Upper bounds of the lifetime size classes, comma-separated.
    #[arg(long, default_value = "16MiB,64MiB")]
    pub size_classes: String,
    /// Offset distances of the locality map, comma-separated (0 = same data).
    #[arg(long, default_value = "0,1KiB,64KiB,1MiB")]
    pub distances: String,
    /// Recency windows of the locality table, comma-separated (s, m, h, d).
    #[arg(long, default_value = "1s,10s,1m,4m,16m,32m,1h,2h,4h,8h")]
    pub windows: String,
    /// Distinct objects tracked exactly before sampling starts.
    #[arg(long, default_value_t = 1_000_000)]
    pub max_objects: usize,
    /// Interval for peak IOPS (the 95th percentile over intervals).
    #[arg(long, default_value = "10m")]
    pub iops_interval: String,
    /// Break-even IOPS per GiB above which all-flash is cheaper (Janus: 1.5).
    #[arg(long, default_value_t = 1.5)]
    pub break_even: f64,
}

/// Parses a duration such as `90`, `1.5s`, `10m`, `2h`, `1d` into seconds.
pub(crate) fn parse_duration(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .with_context(|| format!("bad duration {s:?}: expected a number with s, m, h or d"))?;
    let mult = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        other => bail!("bad duration {s:?}: unknown unit {other:?} (use ms, s, m, h, d)"),
    };
    let v = v * mult;
    if !(v.is_finite() && v > 0.0) {
        bail!("bad duration {s:?}: must be positive");
    }
    Ok(v)
}

fn list<T>(s: &str, what: &str, f: impl Fn(&str) -> anyhow::Result<T>) -> anyhow::Result<Vec<T>> {
    let v: Vec<T> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(|p| f(p).with_context(|| format!("in --{what}")))
        .collect::<anyhow::Result<_>>()?;
    if v.is_empty() {
        bail!("--{what} lists nothing");
    }
    Ok(v)
}

/// The analysis settings from the command line.
pub(crate) fn config(args: &Args) -> anyhow::Result<AnalyzeConfig> {
    let cfg = AnalyzeConfig {
        size_classes: list(&args.size_classes, "size-classes", parse_bytes)?,
        distances: list(&args.distances, "distances", parse_bytes)?,
        windows: list(&args.windows, "windows", parse_duration)?,
        max_objects: args.max_objects,
        iops_interval_s: parse_duration(&args.iops_interval).context("in --iops-interval")?,
        break_even_iops_per_gib: args.break_even,
    };
    cfg.validate()?;
    Ok(cfg)
}

/// A trace opened with a progress bar that follows the bytes read.
pub(crate) struct Traced {
    reader: TraceReader,
    progress: ReadProgress,
    bar: ProgressBar,
    n: u64,
}

impl Iterator for Traced {
    type Item = Result<Request, TraceError>;
    fn next(&mut self) -> Option<Self::Item> {
        self.n += 1;
        if self.n.is_multiple_of(65536) {
            self.bar.set_position(self.progress.bytes_read());
        }
        let r = self.reader.next();
        if r.is_none() {
            self.bar.finish_and_clear();
        }
        r
    }
}

/// Opens a trace for one pass, with a progress bar labelled `label`.
pub(crate) fn open_trace(path: &Path, label: &str) -> anyhow::Result<Traced> {
    let reader = strata_trace::open(path)
        .with_context(|| format!("cannot open trace {}", path.display()))?;
    let progress = reader.progress();
    let bar = progress::bytes_bar(progress.file_len(), label);
    Ok(Traced {
        reader,
        progress,
        bar,
        n: 0,
    })
}

/// Runs the analysis pass.
pub(crate) fn analyze(path: &Path, cfg: AnalyzeConfig) -> anyhow::Result<Analysis> {
    let mut a = Analyzer::new(cfg)?;
    for r in open_trace(path, "analysing")? {
        let r = r.with_context(|| format!("reading {}", path.display()))?;
        a.push(&r);
    }
    let out = a.finish();
    if out.requests == 0 {
        bail!("{}: the trace has no requests", path.display());
    }
    Ok(out)
}

/// Writes to `-o FILE` or standard output.
pub(crate) fn write_out(path: &Option<PathBuf>, text: &str) -> anyhow::Result<()> {
    match path {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display())),
        None => {
            let mut o = std::io::stdout().lock();
            o.write_all(text.as_bytes())?;
            o.flush()?;
            Ok(())
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let cfg = config(&args)?;
    let a = analyze(&args.trace, cfg)?;
    let text = if args.json {
        let mut s = serde_json::to_string_pretty(&a)?;
        s.push('\n');
        s
    } else {
        strata_analyze::render_text(&a)
    };
    write_out(&args.output, &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90").unwrap(), 90.0);
        assert_eq!(parse_duration("10m").unwrap(), 600.0);
        assert_eq!(parse_duration("1.5h").unwrap(), 5400.0);
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("3 fortnights").is_err());
    }
}
