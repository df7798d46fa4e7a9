//! `strata model TRACE`: the layered device model on a trace.

use crate::cmd::analyze::{open_trace, parse_duration, write_out};
use crate::progress;
use crate::units::{parse_bytes, parse_size_arg, SizeArg};
use anyhow::{bail, Context};
use std::fmt::Write as _;
use std::path::PathBuf;
use strata_devmodel::{
    run_models, DiskParams, FlashHit, IoClass, Layout, Model, ModelConfig, ModelReport, PolicyCache,
};
use strata_policy::PolicySpec;

/// Replay a trace beneath replication, caches and disks (the Facebook
/// Messages study's layered model, §3.2, §5.3, §6).
///
/// One representative node of a symmetric cluster: each PUT becomes R local
/// writes (its own replica and, by symmetry, R−1 replicas of its peers') and
/// (R−1)× its bytes on the network; a GET reads the local replica through a
/// RAM cache over an optional flash cache (LRU by default; no-write
/// allocate), then a disk. Disks pay a 10 ms seek between files and
/// min(seek, distance/bandwidth) within a file, transfer at the configured
/// bandwidth, and a per-disk scheduler rotates between files in 1 MiB
/// slices with C-SCAN within a file; a balancer places files on disks.
/// Reports foreground read latency percentiles (all GETs, cache hits
/// included) and disk latency per class of background work.
///
/// What-ifs: --local-compaction (§6.2), --combined-logging (§6.3),
/// --flash-buffer-threshold (§5.3); --compare runs the baseline beside the
/// what-if in the same pass, --sweep-flash-buffer prints foreground latency
/// against the buffering threshold.
///
/// Examples:
///   strata model trace.bin
///   strata model trace.bin --disks 15 --ram 5% --flash 10%
///   strata model trace.bin --local-compaction --compare
///   strata model trace.bin --flash 20% --sweep-flash-buffer
#[derive(clap::Args, Debug)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The trace file (format detected from its name, magic or header).
    pub trace: PathBuf,
    /// Disks in the node.
    #[arg(long, default_value_t = 10)]
    pub disks: u32,
    /// Replicas of each object (one local, R−1 remote).
    #[arg(long, default_value_t = 3)]
    pub replicas: u32,
    /// Disk seek between files.
    #[arg(long, default_value = "10ms")]
    pub seek: String,
    /// Disk transfer rate in MB/s.
    #[arg(long, default_value_t = 100.0)]
    pub bandwidth: f64,
    /// Flash latency.
    #[arg(long, default_value = "0.5ms")]
    pub flash_latency: String,
    /// RAM cache: bytes (30GiB) or a percentage of the working set (10%).
    #[arg(long, default_value = "10%")]
    pub ram: String,
    /// Flash cache: bytes or a percentage of the working set (0 = none).
    #[arg(long, default_value = "0")]
    pub flash: String,
    /// Cache policy of each tier (any `strata sim` policy).
    #[arg(long, default_value = "lru")]
    pub policy: String,
    /// On a flash hit keep the object on flash (KP) instead of promoting it
    /// to RAM (PP).
    #[arg(long)]
    pub keep: bool,
    /// Cache written objects (write allocate) instead of no-write allocate.
    #[arg(long)]
    pub write_allocate: bool,
    /// How objects map to local files: `segments` (Strata: needles appended
    /// to segment files) or `files` (the study's HDFS: one file per object,
    /// cut into blocks).
    #[arg(long, default_value = "segments")]
    pub layout: String,
    /// Segment file size (segments layout) or block size (files layout).
    #[arg(long, default_value = "256MiB")]
    pub segment_size: String,
    /// Compact a sealed segment when this fraction of it is garbage.
    #[arg(long, default_value_t = 0.5)]
    pub compaction_threshold: f64,
    /// §6.2: each replica compacts its own copy (no network for compaction).
    #[arg(long)]
    pub local_compaction: bool,
    /// §6.3: all replicas' appends go to one log on a dedicated disk.
    #[arg(long)]
    pub combined_logging: bool,
    /// §5.3: write objects smaller than this to flash first.
    #[arg(long)]
    pub flash_buffer_threshold: Option<String>,
    /// Flash given to the write buffer (bytes or % of the working set);
    /// default: half of --flash.
    #[arg(long)]
    pub flash_buffer: Option<String>,
    /// Run the baseline (no what-if) beside the configured model.
    #[arg(long)]
    pub compare: bool,
    /// Print foreground latency against flash-buffer thresholds (none,
    /// 4KiB, 64KiB, 1MiB, 16MiB, 128MiB, all).
    #[arg(long)]
    pub sweep_flash_buffer: bool,
    /// Keep the trace's timestamps as they are (by default requests sharing
    /// a timestamp are spread over the gap to the next one).
    #[arg(long)]
    pub no_spread: bool,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Print JSON instead of tables.
    #[arg(long)]
    pub json: bool,
    /// Write the output to this file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

struct Variant {
    name: String,
    cfg: ModelConfig,
    ram: u64,
    flash: u64,
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    let seek = parse_duration(&args.seek).context("in --seek")?;
    let flash_latency = parse_duration(&args.flash_latency).context("in --flash-latency")?;
    if !(args.bandwidth.is_finite() && args.bandwidth > 0.0) {
        bail!("--bandwidth must be a positive number of MB/s");
    }
    let policy: PolicySpec = args
        .policy
        .parse()
        .map_err(|e| anyhow::anyhow!("--policy: {e}"))?;
    let seg = parse_bytes(&args.segment_size).context("in --segment-size")?;
    let layout = match args.layout.as_str() {
        "segments" => Layout::Segments { segment_bytes: seg },
        "files" => Layout::Files { block_bytes: seg },
        other => bail!("--layout must be `segments` or `files`, not {other:?}"),
    };
    let ram = parse_size_arg(&args.ram).context("in --ram")?;
    let flash = parse_size_arg(&args.flash).context("in --flash")?;
    let threshold = args
        .flash_buffer_threshold
        .as_deref()
        .map(parse_bytes)
        .transpose()
        .context("in --flash-buffer-threshold")?;
    let buffer = args
        .flash_buffer
        .as_deref()
        .map(parse_size_arg)
        .transpose()
        .context("in --flash-buffer")?;
    let need_ws = [Some(ram), Some(flash), buffer]
        .iter()
        .flatten()
        .any(|s| matches!(s, SizeArg::Percent(_)));
    let ws = if need_ws {
        let (b, _) = strata_cost::working_set(open_trace(&args.trace, "sizing")?)
            .with_context(|| format!("reading {}", args.trace.display()))?;
        b
    } else {
        0
    };
    let ram_b = ram.resolve(ws);
    let flash_b = flash.resolve(ws);
    let base = ModelConfig {
        replicas: args.replicas,
        disks: args.disks,
        disk: DiskParams {
            seek_s: seek,
            bandwidth: args.bandwidth * 1e6,
            ..DiskParams::default()
        },
        flash_latency_s: flash_latency,
        layout,
        compaction_threshold: args.compaction_threshold,
        local_compaction: false,
        combined_logging: false,
        flash_buffer_threshold: None,
        flash_buffer_bytes: 0,
    };
    let buffer_b = buffer.map(|b| b.resolve(ws)).unwrap_or(flash_b / 2);
    let with_buffer = |cfg: &mut ModelConfig, th: Option<u64>| -> u64 {
        cfg.flash_buffer_threshold = th;
        if th.is_some() {
            cfg.flash_buffer_bytes = buffer_b;
            flash_b.saturating_sub(buffer_b)
        } else {
            flash_b
        }
    };
    let mut variants = Vec::new();
    if args.sweep_flash_buffer {
        if flash_b == 0 && buffer.is_none() {
            bail!("--sweep-flash-buffer needs flash: give --flash (e.g. --flash 10%)");
        }
        let ths: [(&str, Option<u64>); 7] = [
            ("none", None),
            ("<4KiB", Some(4 << 10)),
            ("<64KiB", Some(64 << 10)),
            ("<1MiB", Some(1 << 20)),
            ("<16MiB", Some(16 << 20)),
            ("<128MiB", Some(128 << 20)),
            ("all", Some(u64::MAX)),
        ];
        for (name, th) in ths {
            let mut cfg = base.clone();
            cfg.local_compaction = args.local_compaction;
            cfg.combined_logging = args.combined_logging;
            let f = with_buffer(&mut cfg, th);
            variants.push(Variant {
                name: format!("buffer {name}"),
                cfg,
                ram: ram_b,
                flash: f,
            });
        }
    } else {
        let mut cfg = base.clone();
        cfg.local_compaction = args.local_compaction;
        cfg.combined_logging = args.combined_logging;
        let f = with_buffer(&mut cfg, threshold);
        let whatif = args.local_compaction || args.combined_logging || threshold.is_some();
        if args.compare {
            if !whatif {
                bail!("--compare needs a what-if: --local-compaction, --combined-logging or --flash-buffer-threshold");
            }
            variants.push(Variant {
                name: "baseline".into(),
                cfg: base.clone(),
                ram: ram_b,
                flash: flash_b,
            });
        }
        let mut name = Vec::new();
        if args.local_compaction {
            name.push("local compaction");
        }
        if args.combined_logging {
            name.push("combined logging");
        }
        if threshold.is_some() {
            name.push("flash buffer");
        }
        variants.push(Variant {
            name: if name.is_empty() {
                "model".into()
            } else {
                name.join(" + ")
            },
            cfg,
            ram: ram_b,
            flash: f,
        });
    }
    let on_hit = if args.keep {
        FlashHit::Keep
    } else {
        FlashHit::Promote
    };
    let mut models = Vec::new();
    for v in &variants {
        let cache = PolicyCache::new(&policy, v.ram, v.flash, on_hit, args.write_allocate);
        models.push(Model::new(v.cfg.clone(), cache)?);
    }
    let threads = args.threads.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    let bar = progress::spinner("modelling");
    let (reports, requests) = run_models(
        models,
        open_trace(&args.trace, "modelling")?,
        threads,
        !args.no_spread,
        &|n| bar.set_position(n),
    )
    .with_context(|| format!("reading {}", args.trace.display()))?;
    bar.finish_and_clear();
    if requests == 0 {
        bail!("{}: the trace has no requests", args.trace.display());
    }
    let text = if args.json {
        #[derive(serde::Serialize)]
        struct Out<'a> {
            name: &'a str,
            ram_bytes: u64,
            flash_cache_bytes: u64,
            report: &'a ModelReport,
        }
        let out: Vec<Out> = variants
            .iter()
            .zip(&reports)
            .map(|(v, r)| Out {
                name: &v.name,
                ram_bytes: v.ram,
                flash_cache_bytes: v.flash,
                report: r,
            })
            .collect();
        let mut s = serde_json::to_string_pretty(&out)?;
        s.push('\n');
        s
    } else {
        render(&variants, &reports, ws)
    };
    write_out(&args.output, &text)
}

fn gb(b: u64) -> String {
    crate::units::format_bytes(b)
}

fn render(variants: &[Variant], reports: &[ModelReport], ws: u64) -> String {
    let mut o = String::new();
    if ws > 0 {
        let _ = writeln!(o, "working set {}", gb(ws));
    }
    for (v, r) in variants.iter().zip(reports) {
        let gets = r.ram_hits + r.flash_hits + r.disk_reads;
        let _ = writeln!(
            o,
            "== {}: {} disks, R={}, RAM {}, flash cache {}{}",
            v.name,
            r.config.disks,
            r.config.replicas,
            gb(v.ram),
            gb(v.flash),
            match r.config.flash_buffer_threshold {
                Some(t) if t == u64::MAX => format!(
                    ", flash buffer {} (all writes)",
                    gb(r.config.flash_buffer_bytes)
                ),
                Some(t) => format!(
                    ", flash buffer {} (writes < {})",
                    gb(r.config.flash_buffer_bytes),
                    gb(t)
                ),
                None => String::new(),
            }
        );
        let _ = writeln!(
            o,
            "  {} requests over {:.0} s; GETs: {} RAM hits, {} flash hits, {} disk reads ({:.1}% hit)",
            r.requests,
            r.duration_s,
            r.ram_hits,
            r.flash_hits,
            r.disk_reads,
            if gets > 0 {
                100.0 * (r.ram_hits + r.flash_hits) as f64 / gets as f64
            } else {
                0.0
            }
        );
        let _ = writeln!(
            o,
            "  trace read {} write {}; disk read {} write {}; network {}; flash writes {}; compactions {}",
            gb(r.trace_read_bytes),
            gb(r.trace_write_bytes),
            gb(r.disk_read_bytes),
            gb(r.disk_write_bytes),
            gb(r.network_bytes),
            gb(r.flash_write_bytes),
            r.compactions
        );
        let util: f64 = if r.disk_utilisation.is_empty() {
            0.0
        } else {
            r.disk_utilisation.iter().sum::<f64>() / r.disk_utilisation.len() as f64
        };
        let _ = writeln!(o, "  mean disk utilisation {:.1}%", util * 100.0);
        let _ = writeln!(
            o,
            "  {:<22} {:>10} {:>9} {:>9} {:>9} {:>9} {:>10}",
            "latency (ms)", "count", "mean", "p50", "p90", "p99", "max"
        );
        let f = &r.foreground;
        let _ = writeln!(
            o,
            "  {:<22} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10.3}",
            "foreground (all GETs)", f.count, f.mean_ms, f.p50_ms, f.p90_ms, f.p99_ms, f.max_ms
        );
        for c in &r.disk_classes {
            let l = &c.latency;
            let label = match c.class {
                IoClass::ForegroundRead => "disk: foreground read".to_string(),
                other => format!("disk: {}", other.as_str()),
            };
            let _ = writeln!(
                o,
                "  {:<22} {:>10} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>10.3}",
                label, l.count, l.mean_ms, l.p50_ms, l.p90_ms, l.p99_ms, l.max_ms
            );
        }
        let _ = writeln!(o);
    }
    o
}
