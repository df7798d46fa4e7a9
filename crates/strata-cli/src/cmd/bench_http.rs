//! `strata bench http`: an HTTP load generator (Haystack's Haystress) for a
//! Strata node or, side by side, a SeaweedFS master + volume server.

use crate::units::parse_bytes;
use anyhow::{bail, Context};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use strata_bench::loadgen::{self, LoadReport, LoadSpec, Target};

/// The `Authorization` of a run against a Strata node: `--token`, else
/// STRATA_TOKEN, else a token of the root key from the environment.
fn bearer(token: Option<String>, null_server: bool) -> anyhow::Result<Option<String>> {
    use crate::cmd::key::{root_key_from_env, token_valid_for, DEFAULT_TOKEN_LIFE};
    if null_server {
        return Ok(None);
    }
    let given = token.or_else(|| std::env::var("STRATA_TOKEN").ok().filter(|t| !t.is_empty()));
    if let Some(t) = given {
        return Ok(Some(format!("Bearer {t}")));
    }
    Ok(root_key_from_env()?
        .map(|key| format!("Bearer {}", token_valid_for(&key, DEFAULT_TOKEN_LIFE))))
}

/// Drive a node over HTTP with a synthetic load and report throughput and
/// latency percentiles per operation.
///
/// Writes a prefill of objects first (so reads have targets), then runs the
/// measured mix for --duration. Multi-writes (--batch K > 1) use the node's
/// batch PUT; against SeaweedFS, K fids are assigned at once and uploaded
/// one by one (it has no multi-write).
///
/// Examples:
///   strata bench http --addr 127.0.0.1:8480 --sizes 1KiB --read-fraction 0
///   strata bench http --sizes 8KiB:70,64KiB:30 --read-fraction 0.98 --batch 16 --popularity age
///   strata bench http --seaweedfs 127.0.0.1:9333 --sizes 64KiB --read-fraction 1 --json
///   strata bench http --null-server --sizes 1KiB --read-fraction 1   (the generator's own ceiling)
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The Strata node (host:port), or several nodes of one cluster,
    /// comma-separated: connection i writes and reads through node i mod n
    /// (every node serves every object of its cluster).
    #[arg(
        long,
        value_name = "HOST:PORT,...",
        default_value = "127.0.0.1:8480",
        value_delimiter = ','
    )]
    addr: Vec<String>,
    /// Drive a SeaweedFS master at this host:port instead.
    #[arg(long, value_name = "HOST:PORT")]
    seaweedfs: Option<String>,
    /// With --seaweedfs: ask for an fsync per upload (`?fsync=true`), as
    /// durable as a Strata PUT (SeaweedFS does not fsync by default).
    #[arg(long)]
    seaweedfs_fsync: bool,
    /// Drive a trivial built-in server instead (stores nothing, answers
    /// every PUT 201 and every GET with an object of the largest --sizes),
    /// started in this process on 127.0.0.1 with two threads: the ceiling
    /// of what this load generator can measure on this machine.
    #[arg(long, conflicts_with = "seaweedfs")]
    null_server: bool,
    /// Only serve the trivial server of --null-server at this address, in
    /// the foreground until killed (to run it as a process of its own, e.g.
    /// on another core than the load generator), and drive no load.
    #[arg(long, value_name = "HOST:PORT", conflicts_with_all = ["seaweedfs", "null_server"])]
    serve_null: Option<String>,
    /// Bucket (= workload) to write into on a Strata node.
    #[arg(long, default_value = "bench")]
    bucket: String,
    /// The bearer token of every request to a Strata node (`strata key
    /// token`); default: STRATA_TOKEN, else a token of the root key in
    /// STRATA_ROOT_ACCESS_KEY / STRATA_ROOT_SECRET_KEY, else none.
    #[arg(long, value_name = "TOKEN", conflicts_with_all = ["seaweedfs", "null_server"])]
    token: Option<String>,
    /// Object sizes: 4KiB, a uniform range 1KiB-64KiB, or a mix 8KiB:70,64KiB:30.
    #[arg(long, default_value = "4KiB")]
    sizes: String,
    /// Fraction of operations that are reads (0: only writes, 1: only reads).
    #[arg(long, default_value_t = 0.9)]
    read_fraction: f64,
    /// Objects per write (a multi-write when above 1).
    #[arg(long, default_value_t = 1)]
    batch: usize,
    /// Concurrent connections.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Seconds the measured phase runs.
    #[arg(long, default_value_t = 10.0)]
    duration: f64,
    /// Objects written before the measured phase.
    #[arg(long, default_value_t = 10_000)]
    prefill: u64,
    /// Key popularity of reads: uniform, zipf[:S] or age[:S] (newest most read).
    #[arg(long, default_value = "uniform")]
    popularity: String,
    /// Load generator threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Random seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Report the CPU time these processes (the server's, comma-separated
    /// PIDs) spend in the measured phase, and per object (Linux /proc).
    #[arg(long, value_name = "PID,...", value_delimiter = ',')]
    cpu_pids: Vec<u32>,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !(a.duration > 0.0 && a.duration.is_finite()) {
        bail!("--duration must be a positive number of seconds");
    }
    let sizes = loadgen::parse_sizes(&a.sizes, |s| parse_bytes(s).ok())?;
    if let Some(listen) = &a.serve_null {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .context("cannot start the null server's runtime")?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind(listen))
            .with_context(|| format!("cannot listen on {listen}"))?;
        println!(
            "null server on http://{} (GET answers {} bytes)",
            listener.local_addr().context("null server address")?,
            sizes.max()
        );
        rt.block_on(loadgen::null_server(listener, sizes.max() as usize));
        return Ok(());
    }
    let popularity = loadgen::parse_popularity(&a.popularity)?;
    // The null server's runtime lives until the end of the run.
    let mut null_rt = None;
    let addrs = if a.null_server {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .context("cannot start the null server's runtime")?;
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .context("cannot listen on 127.0.0.1 for the null server")?;
        let addr = listener
            .local_addr()
            .context("null server address")?
            .to_string();
        rt.spawn(loadgen::null_server(listener, sizes.max() as usize));
        null_rt = Some(rt);
        vec![addr]
    } else {
        a.addr.clone()
    };
    let shown = addrs.join(",");
    let target = match &a.seaweedfs {
        Some(m) => Target::Seaweed {
            master: m.clone(),
            fsync: a.seaweedfs_fsync,
        },
        None => Target::Strata {
            addrs,
            bucket: a.bucket.clone(),
            authorization: bearer(a.token.clone(), a.null_server)?,
        },
    };
    if !a.cpu_pids.is_empty() && loadgen::cpu_seconds(&a.cpu_pids).is_none() {
        bail!(
            "--cpu-pids: cannot read /proc/PID/stat of every one of {:?} (not running, or not Linux)",
            a.cpu_pids
        );
    }
    let spec = LoadSpec {
        target,
        sizes,
        read_fraction: a.read_fraction,
        batch: a.batch,
        concurrency: a.concurrency,
        duration: Duration::from_secs_f64(a.duration),
        prefill: a.prefill,
        popularity,
        seed: a.seed,
        cpu_pids: a.cpu_pids.clone(),
    };
    let progress = Arc::new(AtomicU64::new(0));
    let pb = crate::progress::spinner("requests");
    let p2 = progress.clone();
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d2 = done.clone();
    let pb2 = pb.clone();
    let ticker = std::thread::spawn(move || {
        while !d2.load(Ordering::Relaxed) {
            pb2.set_position(p2.load(Ordering::Relaxed));
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    let res = loadgen::run_blocking(spec, progress, a.threads);
    done.store(true, Ordering::Relaxed);
    let _ = ticker.join();
    pb.finish_and_clear();
    if let Some(rt) = null_rt {
        rt.shutdown_background();
    }
    let mut report = res.with_context(|| match &a.seaweedfs {
        Some(m) => format!("load against SeaweedFS at {m} failed"),
        None if a.null_server => format!("load against the null server at {shown} failed"),
        None => format!("load against the Strata node(s) at {shown} failed"),
    })?;
    if a.null_server {
        report.target = "null-server".into();
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_table(&report);
    }
    Ok(())
}

fn print_table(r: &LoadReport) {
    println!(
        "{}: {:.1} s, {} connections, batch {}, read fraction {}, prefill {} objects",
        r.target, r.seconds, r.concurrency, r.batch, r.read_fraction, r.prefill_objects
    );
    println!(
        "{:<5} {:>10} {:>10} {:>12} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
        "op",
        "requests",
        "objects",
        "objects/s",
        "MB/s",
        "p50 us",
        "p90 us",
        "p99 us",
        "p999 us",
        "max us",
        "errors"
    );
    for (name, s) in [("put", &r.put), ("get", &r.get)] {
        println!(
            "{:<5} {:>10} {:>10} {:>12.0} {:>9.1} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            name,
            s.requests,
            s.objects,
            s.objects_per_s,
            s.mb_per_s,
            s.p50_us,
            s.p90_us,
            s.p99_us,
            s.p999_us,
            s.max_us,
            s.errors
        );
    }
    if let (Some(c), Some(per)) = (r.server_cpu_seconds, r.server_cpu_us_per_object) {
        println!("server CPU: {c:.2} s in the measured phase, {per:.1} us per object");
    }
    if let Some(e) = &r.first_error {
        println!("first error: {e}");
    }
}
