//! `strata trace`: read, convert and summarise storage traces.

use crate::progress;
use crate::units::format_bytes;
use anyhow::{bail, Context};
use clap::{Args as ClapArgs, Subcommand};
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use strata_trace::stats::{Sizes, StatsCollector, Summary, TraceStats};
use strata_trace::{
    ColumnMap, Format, OpenOptions, OutputFormat, Request, TraceReader, TraceWriter, WriterOptions,
};

const FORMATS_HELP: &str = "\
Formats read (detected from the file's magic, name or first lines; gzip and zstd are
decompressed transparently, detected by magic):
  strata            Strata's binary trace (.strace; magic STRTRACE)
  oracleGeneral     libCacheSim oracleGeneral binary (name contains 'oracleGeneral')
  lcs               libCacheSim LCS v1-v8 (magic 0x123456789abcdef0)
  vscsi             CloudPhysics vscsi v1/v2 (.vscsi, or records with a vscsi version)
  twitter-csv       '# time, object, size, next_access_vtime' header, ', ' separators
  cloudphysics-csv  'version,time,op,size,lbn' header, SCSI opcodes 28/2a
  msr               MSR Cambridge: filetime,host,disk,Read|Write,offset,size,latency
  txt               one object id per line (size 1)
  strata-csv        a header naming columns among time, op, object, size, workload,
                    offset, length, create_time, tier, latency_us, hint, next_access
  csv               anything else, through --columns";

/// Arguments of `strata trace`.
#[derive(ClapArgs)]
#[command(after_help = FORMATS_HELP)]
pub struct Args {
    #[command(subcommand)]
    command: Cmd,
}

/// How to read the input trace (shared by every subcommand).
#[derive(ClapArgs, Clone)]
struct Input {
    /// The trace file.
    file: PathBuf,
    /// Force the input format instead of detecting it (strata, oracleGeneral,
    /// lcs, vscsi, twitter-csv, cloudphysics-csv, msr, txt, strata-csv, csv).
    #[arg(long, short = 'f', value_name = "FORMAT")]
    format: Option<Format>,
    /// Read a delimited text trace through a column map: 1-based column
    /// numbers or header names, e.g. `time=1,object=3,size=4,op=2` or
    /// `object=key,size=bytes`. Also takes `delimiter=tab|comma|space|;`,
    /// `header=true|false` and `time_unit=s|ms|us|ns`.
    #[arg(long, value_name = "MAP")]
    columns: Option<ColumnMap>,
}

#[derive(Subcommand)]
enum Cmd {
    /// Summarise a trace: requests, unique objects, working-set bytes, op
    /// mix, size percentiles and time span, in total and per workload.
    Stats {
        #[command(flatten)]
        input: Input,
        /// Print one JSON object instead of tables.
        #[arg(long)]
        json: bool,
    },
    /// Convert a trace to Strata's binary format (.strace), Strata CSV
    /// (.csv) or oracleGeneral (a name containing `oracleGeneral`); a .gz or
    /// .zst suffix compresses the output.
    Convert {
        #[command(flatten)]
        input: Input,
        /// The output file.
        out: PathBuf,
        /// Output format, instead of the one OUT's name implies
        /// (strata, csv, oracleGeneral).
        #[arg(long, value_name = "FORMAT")]
        to: Option<OutputFormat>,
        /// Time resolution of a Strata binary output, in nanoseconds per tick.
        #[arg(long, default_value_t = 1000, value_name = "NS")]
        time_unit_ns: u32,
        /// Overwrite OUT if it exists.
        #[arg(long)]
        force: bool,
    },
    /// Print the first records as Strata CSV.
    Head {
        #[command(flatten)]
        input: Input,
        /// How many records.
        #[arg(short = 'n', long, default_value_t = 10)]
        count: u64,
    },
    /// Read a whole trace as fast as possible and report records/s and MB/s
    /// (the reader benchmark of docs/benchmarks.md).
    Bench {
        #[command(flatten)]
        input: Input,
        /// Read the file this many times and report each pass.
        #[arg(long, default_value_t = 3)]
        repeat: u32,
        /// Print JSON lines.
        #[arg(long)]
        json: bool,
        /// Records per read_batch call.
        #[arg(long, default_value_t = 4096)]
        batch: usize,
    },
}

/// Runs `strata trace`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let r = match args.command {
        Cmd::Stats { input, json } => stats(&input, json),
        Cmd::Convert {
            input,
            out,
            to,
            time_unit_ns,
            force,
        } => convert(&input, &out, to, time_unit_ns, force),
        Cmd::Head { input, count } => head(&input, count),
        Cmd::Bench {
            input,
            repeat,
            json,
            batch,
        } => bench(&input, repeat, json, batch),
    };
    // `strata trace head big.strace | head -1` is not an error.
    match r {
        Err(e)
            if e.chain().any(|c| {
                c.downcast_ref::<std::io::Error>()
                    .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            }) =>
        {
            Ok(())
        }
        r => r,
    }
}

fn open(input: &Input) -> anyhow::Result<TraceReader> {
    let mut o = OpenOptions::new();
    if let Some(f) = input.format {
        o = o.format(f);
    }
    if let Some(c) = &input.columns {
        o = o.columns(c.clone());
    }
    let r = o
        .open(&input.file)
        .with_context(|| format!("cannot read trace {}", input.file.display()))?;
    Ok(r)
}

/// Reads the whole trace in batches, calling `f` on each, with a progress
/// bar over the file's bytes.
fn for_each_batch(
    reader: &mut TraceReader,
    label: &str,
    mut f: impl FnMut(&TraceReader, &[Request]) -> anyhow::Result<()>,
) -> anyhow::Result<u64> {
    let progress = reader.progress();
    let bar = progress::bytes_bar(progress.file_len(), label);
    let mut batch = Vec::with_capacity(16_384);
    let mut n = 0u64;
    loop {
        let k = reader.read_batch(&mut batch)?;
        if k == 0 {
            break;
        }
        n += k as u64;
        f(reader, &batch)?;
        bar.set_position(progress.bytes_read());
    }
    bar.finish_and_clear();
    Ok(n)
}

fn stats(input: &Input, as_json: bool) -> anyhow::Result<()> {
    let mut reader = open(input)?;
    let format = reader.format();
    let mut c = StatsCollector::new();
    for_each_batch(&mut reader, "stats", |_, batch| {
        for r in batch {
            c.add(r);
        }
        Ok(())
    })?;
    let s = c.finish(reader.workload_names());
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if as_json {
        let v = json!({
            "file": input.file.display().to_string(),
            "format": format.name(),
            "total": summary_json(&s.total),
            "workloads": s.workloads.iter().map(|(id, name, w)| {
                let mut v = summary_json(w);
                v["id"] = json!(id);
                v["name"] = json!(name);
                v
            }).collect::<Vec<_>>(),
        });
        writeln!(out, "{v}")?;
    } else {
        print_stats(&mut out, &input.file, format, &s)?;
    }
    Ok(())
}

fn sizes_json(s: &Sizes) -> serde_json::Value {
    json!({"min": s.min, "p50": s.p50, "p90": s.p90, "p99": s.p99, "max": s.max, "mean": s.mean})
}

fn summary_json(s: &Summary) -> serde_json::Value {
    json!({
        "requests": s.requests,
        "objects": s.objects,
        "working_set_bytes": s.working_set_bytes,
        "requested_bytes": s.requested_bytes,
        "ops": {"get": s.gets, "put": s.puts, "delete": s.deletes},
        "first_time": s.first_time,
        "last_time": s.last_time,
        "span_seconds": s.span(),
        "request_size": sizes_json(&s.request_sizes),
        "object_size": sizes_json(&s.object_sizes),
    })
}

/// 1234567 -> "1,234,567".
fn thousands(v: u64) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    let mut until_comma = match s.len() % 3 {
        0 => 3,
        r => r,
    };
    for c in s.chars() {
        if until_comma == 0 {
            out.push(',');
            until_comma = 3;
        }
        out.push(c);
        until_comma -= 1;
    }
    out
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn duration(secs: f64) -> String {
    if secs >= 86_400.0 {
        format!("{:.2} days", secs / 86_400.0)
    } else if secs >= 3600.0 {
        format!("{:.2} h", secs / 3600.0)
    } else if secs >= 60.0 {
        format!("{:.1} min", secs / 60.0)
    } else {
        format!("{secs:.3} s")
    }
}

fn print_stats(
    out: &mut impl Write,
    file: &Path,
    format: Format,
    s: &TraceStats,
) -> anyhow::Result<()> {
    let t = &s.total;
    writeln!(out, "trace          {} ({})", file.display(), format.name())?;
    writeln!(out, "requests       {}", thousands(t.requests))?;
    writeln!(
        out,
        "ops            get {:.1}%  put {:.1}%  delete {:.1}%",
        pct(t.gets, t.requests),
        pct(t.puts, t.requests),
        pct(t.deletes, t.requests)
    )?;
    writeln!(out, "objects        {}", thousands(t.objects))?;
    writeln!(
        out,
        "working set    {} B ({})",
        thousands(t.working_set_bytes),
        format_bytes(t.working_set_bytes)
    )?;
    writeln!(
        out,
        "requested      {} B ({})",
        thousands(t.requested_bytes),
        format_bytes(t.requested_bytes)
    )?;
    writeln!(
        out,
        "time           {} .. {} ({})",
        t.first_time,
        t.last_time,
        duration(t.span())
    )?;
    for (label, z) in [
        ("request size", &t.request_sizes),
        ("object size", &t.object_sizes),
    ] {
        writeln!(
            out,
            "{label:<14} min {}  p50 {}  p90 {}  p99 {}  max {}  mean {:.1}",
            z.min, z.p50, z.p90, z.p99, z.max, z.mean
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "{:<16} {:>12} {:>11} {:>16} {:>7} {:>7} {:>7} {:>8} {:>8} {:>12}",
        "workload",
        "requests",
        "objects",
        "working set B",
        "get%",
        "put%",
        "del%",
        "p50 B",
        "p99 B",
        "span"
    )?;
    for (id, name, w) in &s.workloads {
        let label = match name {
            Some(n) => format!("{id} {n}"),
            None => id.to_string(),
        };
        writeln!(
            out,
            "{:<16} {:>12} {:>11} {:>16} {:>7.1} {:>7.1} {:>7.1} {:>8} {:>8} {:>12}",
            label,
            thousands(w.requests),
            thousands(w.objects),
            thousands(w.working_set_bytes),
            pct(w.gets, w.requests),
            pct(w.puts, w.requests),
            pct(w.deletes, w.requests),
            w.request_sizes.p50,
            w.request_sizes.p99,
            duration(w.span())
        )?;
    }
    Ok(())
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(x), Ok(y)) => x == y,
        _ => false,
    }
}

fn convert(
    input: &Input,
    out: &Path,
    to: Option<OutputFormat>,
    time_unit_ns: u32,
    force: bool,
) -> anyhow::Result<()> {
    let to = match to.or_else(|| OutputFormat::from_path(out)) {
        Some(t) => t,
        None => bail!(
            "cannot tell the output format from {:?}: name it *.strace, *.csv or *.oracleGeneral.bin (optionally .gz/.zst), or give --to strata|csv|oracleGeneral",
            out.display().to_string()
        ),
    };
    if time_unit_ns == 0 {
        bail!("--time-unit-ns must be at least 1");
    }
    if same_file(&input.file, out) {
        bail!("the output {} is the input file", out.display());
    }
    if out.exists() && !force {
        bail!("{} exists; pass --force to overwrite it", out.display());
    }
    let mut reader = open(input)?;
    let mut w = TraceWriter::create(
        out,
        to,
        WriterOptions {
            time_unit_ns,
            ..WriterOptions::default()
        },
    )
    .with_context(|| format!("cannot write {}", out.display()))?;
    let mut named = 0usize;
    let n = for_each_batch(&mut reader, "convert", |reader, batch| {
        let names = reader.workload_names();
        if names.len() > named {
            w.set_workload_names(&pad_new(names, named))?;
            named = names.len();
        }
        for r in batch {
            w.write(r)?;
        }
        Ok(())
    })?;
    w.finish()?;
    eprintln!(
        "converted {} records from {} ({}) to {} ({:?})",
        thousands(n),
        input.file.display(),
        reader.format().name(),
        out.display(),
        to
    );
    Ok(())
}

/// The name table with the names before `from` blanked, so a writer only
/// adds the new ones.
fn pad_new(names: &[String], from: usize) -> Vec<String> {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| if i < from { String::new() } else { n.clone() })
        .collect()
}

fn head(input: &Input, count: u64) -> anyhow::Result<()> {
    let reader = open(input)?;
    let stdout = std::io::stdout();
    let mut w = strata_trace::CsvWriter::new(stdout.lock())?;
    for r in reader.take(count as usize) {
        w.write(&r?)?;
    }
    drop(w.finish()?);
    Ok(())
}

/// CPU time of the calling thread in seconds (Linux: /proc/thread-self/schedstat),
/// so a benchmark on a shared, loaded machine can report the time it was
/// actually running next to the wall-clock time.
fn thread_cpu_seconds() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    let ns: f64 = s.split_whitespace().next()?.parse().ok()?;
    Some(ns / 1e9)
}

fn bench(input: &Input, repeat: u32, as_json: bool, batch_len: usize) -> anyhow::Result<()> {
    let file_len = std::fs::metadata(&input.file)
        .with_context(|| format!("cannot read trace {}", input.file.display()))?
        .len();
    for pass in 1..=repeat.max(1) {
        let cpu0 = thread_cpu_seconds();
        let start = std::time::Instant::now();
        let mut reader = open(input)?;
        let mut batch = Vec::with_capacity(batch_len);
        let mut n = 0u64;
        // Touch every record so the work cannot be skipped.
        let mut check = 0u64;
        loop {
            let k = reader.read_batch(&mut batch)?;
            if k == 0 {
                break;
            }
            n += k as u64;
            for r in &batch {
                check = check.wrapping_add(r.object ^ r.size);
            }
        }
        let secs = start.elapsed().as_secs_f64();
        let cpu = match (cpu0, thread_cpu_seconds()) {
            (Some(a), Some(b)) if b > a => Some(b - a),
            _ => None,
        };
        let rps = n as f64 / secs;
        let mbps = file_len as f64 / secs / 1e6;
        if as_json {
            writeln!(
                std::io::stdout(),
                "{}",
                json!({"file": input.file.display().to_string(), "format": reader.format().name(),
                       "pass": pass, "records": n, "seconds": secs, "cpu_seconds": cpu,
                       "records_per_sec": rps, "records_per_cpu_sec": cpu.map(|c| n as f64 / c),
                       "file_mb_per_sec": mbps, "checksum": check})
            )?;
        } else {
            let cpu_part = match cpu {
                Some(c) => format!(
                    "; cpu {:.3} s: {:.1} M records/s, {:.0} MB/s",
                    c,
                    n as f64 / c / 1e6,
                    file_len as f64 / c / 1e6
                ),
                None => String::new(),
            };
            writeln!(
                std::io::stdout(),
                "pass {pass}: {} records ({}): wall {:.3} s: {:.1} M records/s, {:.0} MB/s of file{cpu_part}",
                thousands(n),
                reader.format().name(),
                secs,
                rps / 1e6,
                mbps,
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(113_872), "113,872");
        assert_eq!(thousands(2_029_769_728), "2,029,769,728");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn only_new_workload_names_are_passed_on() {
        let names = vec!["a".to_string(), "b".to_string(), "c".to_string()];
        assert_eq!(pad_new(&names, 2), ["", "", "c"]);
        assert_eq!(pad_new(&names, 0), names);
    }

    #[test]
    fn durations() {
        assert_eq!(duration(1.5), "1.500 s");
        assert_eq!(duration(7200.0), "2.00 h");
        assert_eq!(duration(90.0), "1.5 min");
    }
}
