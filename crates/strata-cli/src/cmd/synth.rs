//! `strata synth`: write a synthetic multi-workload trace.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context};
use strata_trace::Op;
use strata_workload::{default_workloads, write_trace, AgeShape, Generator, TraceFile};

use crate::progress;
use crate::units::format_bytes;

/// The long help: what the command does, with examples.
const DETAILS: &str = "\
Six workloads create objects at different rates and sizes; each object
is read a random number of times at ages drawn from its workload's
read-age distribution: reads falling fast with age (hot-recent), slowly
(warm-slow, medium), coming late, 3-4 hours after creation (late-batch),
spread evenly (flat), and a cold workload of big objects (cold-big). The
same --seed always gives the same trace. Use --list to see the mix.

The file is Strata's binary trace format (with workload names), or Strata
CSV when OUT ends in .csv.

Examples:
  strata synth synth.strace
  strata synth synth.csv --duration 1d --scale 0.5 --seed 7
  strata synth late.strace --start-at 24h   (objects predate the trace)";

/// Generate a synthetic multi-workload trace.
///
/// `--help` adds the details in `DETAILS`.
#[derive(clap::Args, Debug)]
#[command(after_long_help = DETAILS)]
pub struct Args {
    /// The trace file to write.
    #[arg(required_unless_present = "list")]
    pub out: Option<PathBuf>,
    /// Length of the trace (seconds, or with a unit: 90m, 36h, 2d).
    #[arg(long, default_value = "2d")]
    pub duration: String,
    /// Random seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Multiplies every workload's object creation rate (and so its reads).
    #[arg(long, default_value_t = 1.0)]
    pub scale: f64,
    /// Start the written trace this far in (e.g. 12h): objects are created
    /// from time 0, but only requests from here on are written, those to
    /// older objects with their creation time — a trace that begins after its
    /// data was created (censored LRU ages).
    #[arg(long, value_name = "DURATION")]
    pub start_at: Option<String>,
    /// Print the workload mix and exit.
    #[arg(long)]
    pub list: bool,
}

fn parse_duration(s: &str) -> anyhow::Result<f64> {
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('s') => (&t[..t.len() - 1], 1.0),
        Some('m') => (&t[..t.len() - 1], 60.0),
        Some('h') => (&t[..t.len() - 1], 3600.0),
        Some('d') => (&t[..t.len() - 1], 86400.0),
        _ => (t, 1.0),
    };
    let v: f64 = num.trim().parse().with_context(|| {
        format!("bad duration {s:?}: expected seconds or a number with s, m, h or d")
    })?;
    if !(v.is_finite() && v > 0.0) {
        bail!("bad duration {s:?}: it must be positive");
    }
    Ok(v * mult)
}

fn shape(s: &AgeShape) -> String {
    match *s {
        AgeShape::Exponential { mean } => format!("exp(mean {:.0} min)", mean / 60.0),
        AgeShape::Uniform { start, end } => {
            format!("uniform({:.1}-{:.1} h)", start / 3600.0, end / 3600.0)
        }
    }
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let duration = parse_duration(&args.duration)?;
    if args.list {
        println!(
            "{:<3} {:<12} {:>7} {:>10} {:>8}  read ages",
            "id", "name", "puts/s", "size", "reads/obj"
        );
        for w in default_workloads() {
            let ages: Vec<String> = w
                .read_ages
                .iter()
                .map(|(p, s)| format!("{:.0}% {}", 100.0 * p, shape(s)))
                .collect();
            println!(
                "{:<3} {:<12} {:>7.3} {:>10} {:>8.1}  {}",
                w.id,
                w.name,
                w.puts_per_s * args.scale,
                format_bytes(w.size_median as u64),
                w.reads_per_object,
                ages.join(", ")
            );
        }
        return Ok(());
    }
    let Some(out) = args.out else {
        bail!("an output file is required");
    };
    let mut gen = Generator::default_mix(duration, args.scale, args.seed)?;
    if let Some(s) = &args.start_at {
        let start = parse_duration(s).context("--start-at")?;
        if start >= duration {
            bail!(
                "--start-at {s} is not before the end of the trace ({})",
                args.duration
            );
        }
        gen = gen.starting_at(start);
    }
    let names: Vec<(u32, String)> = gen.specs().iter().map(|s| (s.id, s.name.clone())).collect();
    let format = TraceFile::from_path(&out);
    let bar = progress::bar(duration.ceil() as u64, "synth (s)");
    let mut stats: BTreeMap<u32, (u64, u64, u64)> = BTreeMap::new();
    let counted = gen.inspect(|r| {
        let e = stats.entry(r.workload).or_default();
        match r.op {
            Op::Put => {
                e.0 += 1;
                e.2 += r.size;
            }
            Op::Get => e.1 += 1,
            Op::Delete => {}
        }
    });
    let n = write_trace(&out, format, &names, counted, |_, t| {
        bar.set_position(t as u64)
    })?;
    bar.finish_and_clear();
    println!(
        "wrote {} requests ({:.1} h, seed {}, scale {}) to {} ({})",
        n,
        duration / 3600.0,
        args.seed,
        args.scale,
        out.display(),
        match format {
            TraceFile::Strata => "Strata binary trace",
            TraceFile::Csv => "Strata CSV",
        }
    );
    println!(
        "{:<3} {:<12} {:>9} {:>9} {:>12}",
        "id", "name", "puts", "reads", "bytes written"
    );
    for (id, name) in &names {
        let (p, g, b) = stats.get(id).copied().unwrap_or_default();
        println!("{id:<3} {name:<12} {p:>9} {g:>9} {:>12}", format_bytes(b));
    }
    Ok(())
}
