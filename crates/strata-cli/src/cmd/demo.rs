//! `strata demo`: the store-lab loop end to end on this machine.

use anyhow::Context;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_demo::{demo_requests, run_demo, DemoOptions, DemoReport};

/// Run the loop end to end: start a node with flash and disk directories
/// under a temporary folder, drive a synthetic multi-workload load through
/// HTTP (phase 1, default plan: every object to flash, one FIFO), capture
/// the node's traces, provision a Janus plan from them, load it through the
/// admin endpoint, run the load again (phase 2), and print the flash hit
/// ratio per workload, measured by the node and predicted by the lab.
#[derive(clap::Args)]
pub struct Args {
    /// Seconds measured per phase.
    #[arg(long, default_value_t = 30.0)]
    phase_seconds: f64,
    /// Seconds of load before each measured phase (steady state first, then
    /// time for flash to follow the new plan).
    #[arg(long, default_value_t = 15.0)]
    warmup_seconds: f64,
    /// Flash the node may use.
    #[arg(long, value_name = "SIZE", default_value = "6MiB")]
    flash: String,
    /// Fraction of the flash the plan leaves undivided, for the swings of
    /// each workload's bytes around its allocation (the node evicts a
    /// planned workload's data by the plan's TTL, so its bytes follow the
    /// arrivals).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    headroom: f64,
    /// Load scale (1: about 60 writes and 150 reads per second).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Random seed of the synthetic load.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keep the node, traces and plan here instead of a temporary folder
    /// that is removed at the end.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
}

/// Runs the demo.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !(a.phase_seconds >= 5.0 && a.phase_seconds.is_finite()) {
        anyhow::bail!("--phase-seconds must be at least 5");
    }
    let flash = crate::units::parse_bytes(&a.flash).context("--flash")?;
    let tmp;
    let dir = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
            d.clone()
        }
        None => {
            tmp = tempdir()?;
            tmp.0.clone()
        }
    };
    let mut opts = DemoOptions::new(&dir);
    opts.phase_seconds = a.phase_seconds;
    opts.warmup_seconds = a.warmup_seconds;
    opts.flash_capacity = flash;
    if !(0.0..0.9).contains(&a.headroom) {
        anyhow::bail!("--headroom must be within 0 and 0.9");
    }
    opts.headroom = a.headroom;
    opts.scale = a.scale;
    opts.seed = a.seed;
    let total = demo_requests(&opts)?;
    let pb = crate::progress::bar(total, "requests");
    let progress = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    let ticker = {
        let pb = pb.clone();
        let progress = progress.clone();
        let done = done.clone();
        std::thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                pb.set_position(progress.load(Ordering::Relaxed));
                std::thread::sleep(Duration::from_millis(200));
            }
        })
    };
    let quiet = a.json;
    let pb2 = pb.clone();
    let log = move |m: &str| {
        if !quiet {
            pb2.println(format!("strata demo: {m}"));
        }
    };
    let res = run_demo(&opts, &log, progress);
    done.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    pb.finish_and_clear();
    let report = res.context("the demo failed")?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_report(&report, a.dir.is_some());
    }
    Ok(())
}

fn print_report(r: &DemoReport, kept: bool) {
    println!();
    println!("Flash hit ratio (reads served by the flash tier / all reads), measured by the node in each measured phase, next to the lab's prediction:");
    println!();
    println!(
        "{:<10} {:>10} {:>8} {:>10}   {:>10} {:>6} {:>10} {:>10}",
        "workload", "default", "pred.", "reads", "plan flash", "p(w)", "planned", "pred."
    );
    for w in &r.workloads {
        println!(
            "{:<10} {:>9.1}% {:>7.1}% {:>10}   {:>10} {:>6.2} {:>9.1}% {:>9.1}%",
            w.name,
            w.measured_before * 100.0,
            w.predicted_before * 100.0,
            w.reads_before,
            crate::units::format_bytes(w.plan_flash_bytes),
            w.plan_write_probability,
            w.measured_after * 100.0,
            w.predicted_after * 100.0,
        );
    }
    println!(
        "{:<10} {:>9.1}% {:>7.1}% {:>10}   {:>10} {:>6} {:>9.1}% {:>9.1}%",
        "all",
        r.measured_before * 100.0,
        r.predicted_before * 100.0,
        r.workloads.iter().map(|w| w.reads_before).sum::<u64>(),
        "",
        "",
        r.measured_after * 100.0,
        r.predicted_after * 100.0,
    );
    println!();
    println!(
        "default = every object to flash, one FIFO over all of flash; planned = the Janus plan computed from the node's own traces."
    );
    println!(
        "{} requests, {} failed, {} segments moved flash -> disk.",
        r.requests, r.errors, r.segments_moved
    );
    if kept {
        println!("plan: {}", r.plan_path.display());
        for f in &r.trace_files {
            println!("trace: {}", f.display());
        }
        if let Some(f) = r.trace_files.first() {
            println!(
                "report: strata report {} (HTML report of the traced workload)",
                f.display()
            );
        }
    } else {
        println!("(run with --dir DIR to keep the traces and the plan, e.g. for `strata report` and `strata provision`)");
    }
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempdir() -> anyhow::Result<TempDir> {
    let base = std::env::temp_dir();
    for i in 0..100u32 {
        let p = base.join(format!("strata-demo-{}-{i}", std::process::id()));
        if std::fs::create_dir(&p).is_ok() {
            return Ok(TempDir(p));
        }
    }
    anyhow::bail!(
        "cannot create a temporary directory under {}",
        base.display()
    )
}
