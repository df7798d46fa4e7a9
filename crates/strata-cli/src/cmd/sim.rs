//! `strata sim`: replay a trace through cache and tier policies.

use crate::progress;
use crate::units::{format_bytes, parse_size_arg, SizeArg};
use anyhow::{bail, Context};
use std::io::Write;
use std::path::PathBuf;
use strata_policy::{PolicySpec, Unit};
use strata_sim::{
    run as simulate, with_next_access, working_set, Access, AccessSource, Medium, OnFlashHit,
    RunOptions, SetMapping, SimConfig, SimError, SimReport, TierSpec, WritePolicy,
};
use strata_trace::Format;

/// Replay a trace through cache and tier policies.
///
/// Every combination of --policy and --size (or of --policy, --ram and
/// --flash) is simulated in one read of the trace, spread over all cores.
/// Sizes are bytes (4KiB, 1GiB, 1.5GB), object counts with --objects, or
/// percentages of the trace's working set (distinct bytes, each object at
/// its first-seen size; distinct objects with --objects), which costs one
/// extra read of the trace to measure.
///
/// Examples:
///   strata sim trace.bin --policy lru,s3fifo,arc --size 1%,5%,10%,20%
///   strata sim trace.bin --ram 1GiB --flash 4GiB,8GiB --keep --json
///   strata sim block.vscsi --size 10% --sets 64 --set-map linear --set-span 4096
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    pub trace: PathBuf,
    /// Force the trace format (strata, oracleGeneral, lcs, vscsi, twitter-csv,
    /// cloudphysics-csv, msr, txt, strata-csv, csv).
    #[arg(long)]
    pub format: Option<String>,
    /// Eviction policies, comma-separated: lru, fifo, clock, clock2, sieve,
    /// lru-mid[:PERCENTILE] (mid-point insertion, default 75), twoq, arc,
    /// s3fifo[:SMALL_RATIO[:THRESHOLD]], lirs, belady (offline optimum).
    #[arg(long, default_value = "lru")]
    pub policy: String,
    /// Cache sizes, comma-separated (single-tier mode; default 10%).
    #[arg(long)]
    pub size: Option<String>,
    /// Count capacity in objects instead of bytes (every object size 1).
    #[arg(long)]
    pub objects: bool,
    /// RAM tier sizes (tiered mode: RAM over flash, exclusive).
    #[arg(long)]
    pub ram: Option<String>,
    /// Flash tier sizes (tiered mode; alone: a flash cache with wear figures).
    #[arg(long)]
    pub flash: Option<String>,
    /// On a flash hit, move the object up to RAM (the default).
    #[arg(long, conflicts_with = "keep")]
    pub promote: bool,
    /// On a flash hit, keep the object on flash (fewer flash writes).
    #[arg(long)]
    pub keep: bool,
    /// Policy of the RAM tier (default: each of --policy).
    #[arg(long)]
    pub ram_policy: Option<String>,
    /// Policy of the flash tier (default: each of --policy).
    #[arg(long)]
    pub flash_policy: Option<String>,
    /// Program/erase cycles of the flash, for its lifetime.
    #[arg(long, default_value_t = 10_000)]
    pub pe_cycles: u64,
    /// Crash times in seconds after the first request, comma-separated: RAM
    /// is emptied, flash kept; extra misses against a never-crashed twin are
    /// reported.
    #[arg(long)]
    pub crash_at: Option<String>,
    /// What writes do: lookup (every request is a lookup that inserts on a
    /// miss, libCacheSim's convention), allocate, no-allocate, hints (a write
    /// is cached unless its request's hint says not to).
    #[arg(long, default_value = "lookup")]
    pub writes: String,
    /// Make the (top) cache set-associative with this many sets.
    #[arg(long)]
    pub sets: Option<u32>,
    /// How keys map to sets: linear (by address range, as Flashcache did) or
    /// hash.
    #[arg(long, default_value = "hash")]
    pub set_map: String,
    /// Linear mapping: consecutive keys per region (for 512-byte block
    /// numbers, 4096 is a 2 MiB region).
    #[arg(long, default_value_t = 4096)]
    pub set_span: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// One JSON object per line instead of a table.
    #[arg(long)]
    pub json: bool,
}

fn parse_sizes(s: &str) -> anyhow::Result<Vec<SizeArg>> {
    let v: Vec<SizeArg> = s
        .split(',')
        .filter(|p| !p.trim().is_empty())
        .map(parse_size_arg)
        .collect::<anyhow::Result<_>>()?;
    if v.is_empty() {
        bail!("no size given in {s:?}");
    }
    Ok(v)
}

/// A percentage of the working set, truncated as libCacheSim truncates it.
pub(crate) fn resolve(s: SizeArg, whole: u64) -> u64 {
    match s {
        SizeArg::Bytes(b) => b,
        SizeArg::Percent(p) => (whole as f64 * p / 100.0) as u64,
    }
}

pub(crate) fn parse_format(f: &Option<String>) -> anyhow::Result<Option<Format>> {
    f.as_deref()
        .map(|s| s.parse::<Format>())
        .transpose()
        .map_err(anyhow::Error::from)
}

pub(crate) fn open(path: &std::path::Path, format: Option<Format>) -> anyhow::Result<AccessSource> {
    AccessSource::open(path, format)
        .with_context(|| format!("cannot read trace {}", path.display()))
}

fn policies(s: &str) -> anyhow::Result<Vec<PolicySpec>> {
    let v = strata_policy::parse_list(s)?;
    if v.is_empty() {
        bail!("no policy given in {s:?}");
    }
    Ok(v)
}

/// Measures the working set with a progress bar.
pub(crate) fn measure(
    path: &std::path::Path,
    format: Option<Format>,
) -> anyhow::Result<strata_sim::WorkingSet> {
    let src = open(path, format)?;
    let prog = src.progress();
    let bar = progress::bytes_bar(prog.file_len(), "sizing");
    let ws = working_set(src, |_| bar.set_position(prog.bytes_read()))
        .with_context(|| format!("reading {}", path.display()))?;
    bar.finish_and_clear();
    Ok(ws)
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let format = parse_format(&args.format)?;
    let unit = if args.objects {
        Unit::Objects
    } else {
        Unit::Bytes
    };
    let writes = match args.writes.as_str() {
        "lookup" => WritePolicy::Lookup,
        "allocate" | "write-allocate" => WritePolicy::Allocate,
        "no-allocate" | "no-write-allocate" => WritePolicy::NoAllocate,
        "hints" | "write-hints" => WritePolicy::Hints,
        w => bail!("unknown --writes {w:?} (use lookup, allocate, no-allocate or hints)"),
    };
    let mapping = match args.set_map.as_str() {
        "linear" => SetMapping::Linear {
            span: args.set_span.max(1),
        },
        "hash" => SetMapping::Hash,
        m => bail!("unknown --set-map {m:?} (use linear or hash)"),
    };
    if args.sets == Some(0) {
        bail!("--sets must be at least 1");
    }
    let crashes: Vec<f64> = match &args.crash_at {
        None => Vec::new(),
        Some(s) => s
            .split(',')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.trim()
                    .parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .with_context(|| format!("bad crash time {p:?}: expected seconds, e.g. 3600"))
            })
            .collect::<anyhow::Result<_>>()?,
    };
    let tiered = args.ram.is_some() || args.flash.is_some();
    if tiered && args.size.is_some() {
        bail!("give either --size (one cache) or --ram/--flash (tiers), not both");
    }
    let pols = policies(&args.policy)?;
    let ram_pols = args.ram_policy.as_deref().map(policies).transpose()?;
    let flash_pols = args.flash_policy.as_deref().map(policies).transpose()?;
    let sizes = parse_sizes(args.size.as_deref().unwrap_or("10%"))?;
    let rams = args.ram.as_deref().map(parse_sizes).transpose()?;
    let flashes = args.flash.as_deref().map(parse_sizes).transpose()?;

    let single = (!tiered).then_some(&sizes);
    let any_percent = [single, rams.as_ref(), flashes.as_ref()]
        .into_iter()
        .flatten()
        .flatten()
        .any(|s| matches!(s, SizeArg::Percent(_)));
    let whole = if any_percent {
        let ws = measure(&args.trace, format)?;
        if ws.requests == 0 {
            bail!("{}: the trace has no requests", args.trace.display());
        }
        match unit {
            Unit::Bytes => ws.bytes,
            Unit::Objects => ws.objects,
        }
    } else {
        0
    };
    let r = |s: &SizeArg| resolve(*s, whole);

    let mut configs = Vec::new();
    let on_flash_hit = if args.keep {
        OnFlashHit::Keep
    } else {
        OnFlashHit::Promote
    };
    let sets = args.sets.map(|n| (n, mapping));
    for p in &pols {
        let ram_p: Vec<PolicySpec> = ram_pols.clone().unwrap_or_else(|| vec![p.clone()]);
        let flash_p: Vec<PolicySpec> = flash_pols.clone().unwrap_or_else(|| vec![p.clone()]);
        let mut tiers_list: Vec<Vec<TierSpec>> = Vec::new();
        if !tiered {
            for s in &sizes {
                tiers_list.push(vec![TierSpec {
                    medium: Medium::Ram,
                    policy: p.clone(),
                    capacity: r(s),
                    sets,
                }]);
            }
        } else {
            let rs: Vec<Option<u64>> = match &rams {
                Some(v) => v.iter().map(|s| Some(r(s))).collect(),
                None => vec![None],
            };
            let fs: Vec<Option<u64>> = match &flashes {
                Some(v) => v.iter().map(|s| Some(r(s))).collect(),
                None => vec![None],
            };
            for rp in &ram_p {
                for fp in &flash_p {
                    for ram in &rs {
                        for fl in &fs {
                            let mut t = Vec::new();
                            if let Some(c) = ram {
                                t.push(TierSpec {
                                    medium: Medium::Ram,
                                    policy: rp.clone(),
                                    capacity: *c,
                                    sets,
                                });
                            }
                            if let Some(c) = fl {
                                t.push(TierSpec {
                                    medium: Medium::Flash,
                                    policy: fp.clone(),
                                    capacity: *c,
                                    sets: if ram.is_some() { None } else { sets },
                                });
                            }
                            tiers_list.push(t);
                        }
                    }
                }
            }
            if ram_pols.is_some() && flash_pols.is_some() {
                // The tier policies are given explicitly: one pass over them
                // is enough, whatever --policy says.
                if p != &pols[0] {
                    tiers_list.clear();
                }
            }
        }
        for tiers in tiers_list {
            if tiers.iter().any(|t| t.capacity == 0) {
                bail!("a cache size resolved to 0 units; give a larger size");
            }
            configs.push(SimConfig {
                tiers,
                unit,
                writes,
                on_flash_hit,
                crashes: crashes.clone(),
                pe_cycles: args.pe_cycles,
            });
        }
    }

    let opts = RunOptions {
        threads: args
            .threads
            .unwrap_or_else(|| RunOptions::default().threads)
            .max(1),
    };
    let needs_next = configs.iter().any(SimConfig::needs_next_access);
    let src = open(&args.trace, format)?;
    let prog = src.progress();
    let bar = progress::bytes_bar(prog.file_len(), "simulating");
    let started = std::time::Instant::now();
    let reports = if needs_next {
        // Belady needs each request's next use: read the trace into memory
        // and compute it backwards first.
        let batches = with_next_access(src)?;
        simulate(
            batches.into_iter().map(Ok::<Vec<Access>, SimError>),
            &configs,
            &opts,
            |_| bar.set_position(prog.bytes_read()),
        )
    } else {
        simulate(src, &configs, &opts, |_| {
            bar.set_position(prog.bytes_read())
        })
    }
    .with_context(|| format!("simulating {}", args.trace.display()))?;
    bar.finish_and_clear();
    let elapsed = started.elapsed().as_secs_f64();
    print_reports(&reports, args.json, unit)?;
    std::io::stdout().flush()?;
    if !args.json {
        let reqs = reports.first().map_or(0, |r| r.requests);
        eprintln!(
            "{} caches, {} requests, {:.2} s ({:.1} M requests/s per cache)",
            reports.len(),
            reqs,
            elapsed,
            if elapsed > 0.0 {
                reqs as f64 * reports.len() as f64 / elapsed / 1e6
            } else {
                0.0
            }
        );
    }
    Ok(())
}

fn size_str(v: u64, unit: Unit) -> String {
    match unit {
        Unit::Bytes => format!("{v} ({})", format_bytes(v)),
        Unit::Objects => format!("{v} obj"),
    }
}

fn print_reports(reports: &[SimReport], json: bool, unit: Unit) -> anyhow::Result<()> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    if json {
        for r in reports {
            serde_json::to_writer(&mut out, r)?;
            writeln!(out)?;
        }
        return Ok(());
    }
    let tiered = reports.iter().any(|r| r.tier.is_some());
    let sets = reports.iter().any(|r| r.sets.is_some());
    let crashes = reports.iter().any(|r| !r.crashes.is_empty());
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut head = vec![
        "policy",
        "cache_size",
        "requests",
        "miss_ratio",
        "byte_miss_ratio",
    ];
    if tiered {
        head.extend([
            "ram_size",
            "flash_size",
            "ram_hit",
            "flash_hit",
            "flash_written",
            "lifetime_years",
        ]);
    }
    if sets {
        head.extend(["sets", "top_half_miss_share"]);
    }
    if crashes {
        head.extend(["crash_extra_misses", "recovered_after_s"]);
    }
    for r in reports {
        let mut row = vec![
            r.policy.clone(),
            size_str(r.cache_size, unit),
            r.requests.to_string(),
            format!("{:.4}", r.miss_ratio),
            format!("{:.4}", r.byte_miss_ratio),
        ];
        if tiered {
            match &r.tier {
                Some(t) => row.extend([
                    size_str(t.ram_size, unit),
                    size_str(t.flash_size, unit),
                    format!("{:.4}", t.ram_hit_ratio),
                    format!("{:.4}", t.flash_hit_ratio),
                    format_bytes(t.flash_bytes_written),
                    t.flash_lifetime_years
                        .map_or("inf".into(), |y| format!("{y:.2}")),
                ]),
                None => row.extend(std::iter::repeat_n("-".to_string(), 6)),
            }
        }
        if sets {
            match &r.sets {
                Some(s) => row.extend([
                    format!("{} {}", s.sets, s.mapping),
                    format!("{:.3}", s.top_half_miss_share),
                ]),
                None => row.extend(["-".into(), "-".into()]),
            }
        }
        if crashes {
            row.push(
                r.crashes
                    .iter()
                    .map(|c| c.extra_misses.to_string())
                    .collect::<Vec<_>>()
                    .join(","),
            );
            row.push(
                r.crashes
                    .iter()
                    .map(|c| {
                        c.recovered_after_s
                            .map_or("-".into(), |s| format!("{s:.0}"))
                    })
                    .collect::<Vec<_>>()
                    .join(","),
            );
        }
        rows.push(row);
    }
    print_table(&mut out, &head, &rows)?;
    Ok(())
}

pub(crate) fn print_table(
    out: &mut impl Write,
    head: &[&str],
    rows: &[Vec<String>],
) -> anyhow::Result<()> {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == 0 {
                    format!("{c:<width$}", width = w[i])
                } else {
                    format!("{c:>width$}", width = w[i])
                }
            })
            .collect::<Vec<_>>()
            .join("  ")
    };
    writeln!(out, "{}", line(head.to_vec()))?;
    for r in rows {
        writeln!(out, "{}", line(r.iter().map(String::as_str).collect()))?;
    }
    Ok(())
}
