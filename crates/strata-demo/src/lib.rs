//! The loop end to end (`strata demo`, and the loop test): a node with
//! flash and disk directories, a synthetic multi-workload load driven over
//! HTTP in real time, the node's own traces, a Janus plan computed from them
//! by the provisioning library, the plan loaded through the admin endpoint,
//! the load again, and the flash hit ratio per workload measured by the node
//! next to what the lab predicted.
//!
//! Time is compressed: the workloads' read ages are seconds, not hours, so
//! a phase of a minute shows the same structure Janus exploits (workloads
//! whose reads fall off at different speeds, one read late, one cold and
//! big).

#![warn(missing_docs)]

use bytes::Bytes;
use hyper::Method;
use rand::{RngCore, SeedableRng};
use serde::Serialize;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_bench::client::Client;
use strata_meta::api::TierClass;
use strata_provision::{
    provision, AgeBuckets, Amount, CollectConfig, Collector, Config, Eviction, Prices, TierPlan,
};
use strata_server::{ClusterNode, Device, NodeOptions};
use strata_trace::{Op, Request};
use strata_workload::{AgeShape, Generator, WorkloadSpec};

/// What the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Working directory (node data, traces, plan).
    pub dir: PathBuf,
    /// Seconds measured in each phase (default plan, then the computed
    /// plan).
    pub phase_seconds: f64,
    /// Seconds of load before each measured phase: before phase 1 so the
    /// node is in steady state, before phase 2 so flash is laid out by the
    /// new plan.
    pub warmup_seconds: f64,
    /// Flash bytes the node may use.
    pub flash_capacity: u64,
    /// Segment size (the tier mover's unit).
    pub segment_bytes: u64,
    /// Fraction of the node's flash the plan leaves undivided: under a
    /// plan, each workload's data leaves flash by the plan's TTL, so its
    /// bytes swing around its allocation with the arrivals; the headroom
    /// holds the swings without evicting early.
    pub headroom: f64,
    /// Load scale (1: about 60 writes and 150 reads per second).
    pub scale: f64,
    /// Random seed.
    pub seed: u64,
    /// Requests in flight at most.
    pub concurrency: usize,
}

impl DemoOptions {
    /// Defaults: 30 s measured per phase after 15 s of warm-up, 6 MiB of
    /// flash, 64 KiB segments.
    pub fn new(dir: impl Into<PathBuf>) -> DemoOptions {
        DemoOptions {
            dir: dir.into(),
            phase_seconds: 30.0,
            warmup_seconds: 15.0,
            flash_capacity: 6 << 20,
            segment_bytes: 64 << 10,
            headroom: 0.1,
            scale: 1.0,
            seed: 42,
            concurrency: 32,
        }
    }
}

/// One workload's row of the demo's result.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadRow {
    /// Workload (bucket) name.
    pub name: String,
    /// Its id in the node's traces and the plan.
    pub id: u32,
    /// Reads measured in phase 1's window.
    pub reads_before: u64,
    /// Flash hit ratio measured under the default plan (single FIFO).
    pub measured_before: f64,
    /// What the lab predicts for the single FIFO.
    pub predicted_before: f64,
    /// Flash bytes the computed plan gives it.
    pub plan_flash_bytes: u64,
    /// Its write probability in the plan.
    pub plan_write_probability: f64,
    /// Reads measured in phase 2's window.
    pub reads_after: u64,
    /// Flash hit ratio measured under the computed plan.
    pub measured_after: f64,
    /// What the lab predicts for the computed plan.
    pub predicted_after: f64,
}

/// The demo's result.
#[derive(Clone, Debug, Serialize)]
pub struct DemoReport {
    /// Per workload.
    pub workloads: Vec<WorkloadRow>,
    /// Cell-wide flash hit ratio measured under the default plan.
    pub measured_before: f64,
    /// Predicted by the lab for the single FIFO.
    pub predicted_before: f64,
    /// Cell-wide flash hit ratio measured under the computed plan.
    pub measured_after: f64,
    /// Predicted by the lab for the computed plan.
    pub predicted_after: f64,
    /// Requests sent.
    pub requests: u64,
    /// Requests that failed (none on a healthy node: a read is sent only
    /// after its object's write was acknowledged).
    pub errors: u64,
    /// Trace files the node wrote in phase 1.
    pub trace_files: Vec<PathBuf>,
    /// The plan file.
    pub plan_path: PathBuf,
    /// The node's address during the demo.
    pub node_addr: String,
    /// Tier mover segments moved.
    pub segments_moved: u64,
}

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The node failed.
    #[error(transparent)]
    Node(#[from] strata_server::ClusterError),
    /// The workload generator refused its parameters.
    #[error("{0}")]
    Workload(String),
    /// Provisioning failed.
    #[error("provisioning from the node's traces failed: {0}")]
    Provision(String),
    /// File trouble.
    #[error("{0}")]
    Io(String),
}

/// The demo's workloads, in compressed time.
pub fn demo_workloads() -> Vec<WorkloadSpec> {
    let w = |id: u32, name: &str, puts: f64, size: f64, reads: f64, ages: Vec<(f64, AgeShape)>| {
        WorkloadSpec {
            id,
            name: name.to_string(),
            puts_per_s: puts,
            size_median: size,
            size_sigma: 0.3,
            reads_per_object: reads,
            read_ages: ages,
            lifetime: None,
        }
    };
    use AgeShape::*;
    vec![
        // Read right after upload, falling off within seconds (News Feed).
        w(
            0,
            "hot",
            30.0,
            8192.0,
            3.0,
            vec![(1.0, Exponential { mean: 2.0 })],
        ),
        // Read again 8-12 s after being written (a batch job over logs).
        w(
            1,
            "late",
            8.0,
            32768.0,
            4.0,
            vec![
                (0.1, Exponential { mean: 1.0 }),
                (
                    0.9,
                    Uniform {
                        start: 8.0,
                        end: 12.0,
                    },
                ),
            ],
        ),
        // Big and rarely read at any age.
        w(
            2,
            "cold",
            3.0,
            262144.0,
            2.0,
            vec![(
                1.0,
                Uniform {
                    start: 0.0,
                    end: 20.0,
                },
            )],
        ),
        // Read evenly over its first 15 s.
        w(
            3,
            "flat",
            15.0,
            8192.0,
            2.0,
            vec![(
                1.0,
                Uniform {
                    start: 0.0,
                    end: 15.0,
                },
            )],
        ),
    ]
}

#[derive(Default)]
struct Snapshot {
    reads: HashMap<String, (u64, u64)>,
}

fn snapshot(node: &ClusterNode, names: &HashMap<u32, String>) -> Snapshot {
    let mut s = Snapshot::default();
    for name in names.values() {
        let c = node.metrics().workload(name);
        s.reads.insert(
            name.clone(),
            (
                c.total_reads(),
                c.reads_from(strata_node::metrics::Served::Flash),
            ),
        );
    }
    s
}

fn delta(a: &Snapshot, b: &Snapshot, name: &str) -> (u64, u64) {
    let x = a.reads.get(name).copied().unwrap_or((0, 0));
    let y = b.reads.get(name).copied().unwrap_or((0, 0));
    (y.0.saturating_sub(x.0), y.1.saturating_sub(x.1))
}

/// The node a replay drives: its address and the `Authorization` of its
/// requests (a token of the demo's root key).
#[derive(Clone)]
struct Node {
    addr: String,
    authorization: Arc<String>,
}

/// Replays `reqs` (times relative to `t0`) against `node` in real time.
async fn replay(
    node: Node,
    reqs: Vec<Request>,
    t0: f64,
    names: Arc<HashMap<u32, String>>,
    concurrency: usize,
    progress: Arc<AtomicU64>,
    errors: Arc<AtomicU64>,
) {
    // Every request of one object goes to the same worker, in trace order:
    // a GET is sent only after its object's PUT was acknowledged (a trace
    // written by a real store never reads an object before its write
    // returned, so the replay must not either).
    let concurrency = concurrency.max(1);
    let mut pool = vec![0u8; 2 << 20];
    rand::rngs::SmallRng::seed_from_u64(7).fill_bytes(&mut pool);
    let pool = Bytes::from(pool);
    let mut senders = Vec::with_capacity(concurrency);
    let mut workers = Vec::new();
    for _ in 0..concurrency {
        let (tx, mut rx) = tokio::sync::mpsc::channel::<Request>(64);
        senders.push(tx);
        let Node {
            addr,
            authorization,
        } = node.clone();
        let names = names.clone();
        let pool = pool.clone();
        let progress = progress.clone();
        let errors = errors.clone();
        workers.push(tokio::spawn(async move {
            let mut client = Client::new();
            let auth = [("authorization", authorization.as_str())];
            while let Some(r) = rx.recv().await {
                let bucket = names
                    .get(&r.workload)
                    .cloned()
                    .unwrap_or_else(|| "w".into());
                let path = format!("/{bucket}/o{}", r.object);
                let res = match r.op {
                    Op::Put => {
                        let n = (r.size as usize).min(pool.len());
                        client
                            .request(&addr, Method::PUT, &path, &auth, pool.slice(..n))
                            .await
                    }
                    Op::Get => {
                        client
                            .request(&addr, Method::GET, &path, &auth, Bytes::new())
                            .await
                    }
                    Op::Delete => {
                        client
                            .request(&addr, Method::DELETE, &path, &auth, Bytes::new())
                            .await
                    }
                };
                match res {
                    Ok(resp) if resp.status.is_success() => {}
                    _ => {
                        errors.fetch_add(1, Relaxed);
                    }
                }
                progress.fetch_add(1, Relaxed);
            }
        }));
    }
    let start = Instant::now();
    for r in reqs {
        let due = Duration::from_secs_f64((r.time - t0).max(0.0));
        let now = start.elapsed();
        if due > now {
            tokio::time::sleep(due - now).await;
        }
        let key = (u64::from(r.workload) << 40) ^ r.object;
        let w = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as usize % concurrency;
        if senders[w].send(r).await.is_err() {
            break;
        }
    }
    drop(senders);
    for w in workers {
        let _ = w.await;
    }
}

fn trace_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.to_string_lossy()
                        .ends_with(strata_node::trace::TRACE_SUFFIX)
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Runs the demo; `log` hears what happens, `progress` counts requests
/// (out of the returned total of [`demo_requests`]).
pub fn run_demo(
    opts: &DemoOptions,
    log: &dyn Fn(&str),
    progress: Arc<AtomicU64>,
) -> Result<DemoReport, DemoError> {
    let specs = demo_workloads();
    let phase = opts.phase_seconds;
    let warm = opts.warmup_seconds.max(0.0);
    // Timeline: warm-up, phase 1 (default plan), [plan], warm-up, phase 2.
    let bounds = [
        0.0,
        warm,
        warm + phase,
        2.0 * warm + phase,
        2.0 * (warm + phase),
    ];
    let gen = Generator::new(specs.clone(), bounds[4], opts.scale, opts.seed)
        .map_err(|e| DemoError::Workload(e.to_string()))?;
    let mut parts: Vec<Vec<Request>> = vec![Vec::new(); 4];
    for r in gen {
        let i = (1..4).take_while(|&i| r.time >= bounds[i]).count();
        parts[i].push(r);
    }
    let nreq: u64 = parts.iter().map(|p| p.len() as u64).sum();
    let names: Arc<HashMap<u32, String>> =
        Arc::new(specs.iter().map(|s| (s.id, s.name.clone())).collect());

    // The node: flash and disk directories, no RAM cache (so every read
    // shows its tier), traces of every object.
    let data = opts.dir.join("node");
    let (flash_capacity, segment_bytes) = (opts.flash_capacity, opts.segment_bytes);
    let traces = opts.dir.join("traces");
    // The demo's own control requests carry a token of this run.
    let token = strata_http::auth::generate();
    // The demo's own root key, and a token of it for its requests (the
    // object API takes no anonymous writes).
    let root = strata_s3::auth::Key {
        access_key: "demo".into(),
        secret_key: strata_http::auth::generate(),
    };
    let object_auth = Arc::new(format!(
        "Bearer {}",
        strata_s3::auth::mint_token(&root, unix_now() as u64 + 24 * 3600)
    ));
    let bearer = format!("Bearer {token}");
    let admin = [("authorization", bearer.as_str())];
    // The one server, a cluster of one, on its own runtime; its protocol
    // answers only this process.
    strata_meta::cluster_auth::process_secret_or_generate();
    let node_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| DemoError::Io(format!("cannot start the node's runtime: {e}")))?;
    let running = node_rt.block_on(async {
        let meta =
            strata_server::embedded_meta(&data.join("meta"), "127.0.0.1:0", Some(token.clone()))
                .await?;
        let mut opts = NodeOptions::new(&meta, "127.0.0.1:0", &data);
        opts.devices = vec![
            Device {
                path: data.join("flash"),
                tier: TierClass::Flash,
            },
            Device {
                path: data.join("disk"),
                tier: TierClass::Disk,
            },
        ];
        opts.cluster_of_one = true;
        opts.flash_capacity = Some(flash_capacity);
        opts.ram_cache_bytes = 0;
        opts.segment_size = segment_bytes;
        opts.trace_dir = Some(traces.clone());
        opts.trace_sample = 1.0;
        opts.trace_rotate = 100_000;
        opts.mover_interval = Duration::from_millis(50);
        opts.admin_token = Some(token.clone());
        opts.root = Some(root.clone());
        strata_server::start(opts).await
    })?;
    let addr = running.addr.to_string();
    log(&format!(
        "node on http://{addr}: flash {} ({} of it) and disk {} under {}",
        data.join("flash").display(),
        fmt_bytes(opts.flash_capacity),
        data.join("disk").display(),
        opts.dir.display()
    ));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| DemoError::Io(format!("cannot start the load runtime: {e}")))?;
    let errors = Arc::new(AtomicU64::new(0));
    let mut parts = parts.into_iter();
    let mut run_part = |i: usize| {
        let reqs = parts.next().unwrap_or_default();
        rt.block_on(replay(
            Node {
                addr: addr.clone(),
                authorization: object_auth.clone(),
            },
            reqs,
            bounds[i],
            names.clone(),
            opts.concurrency,
            progress.clone(),
            errors.clone(),
        ));
        snapshot(&running.node, &names)
    };

    log(&format!(
        "phase 1, default plan (every object to flash, one FIFO): {warm:.0} s of warm-up, then {phase:.0} s measured and traced"
    ));
    run_part(0);
    let train_start = unix_now();
    let before0 = snapshot(&running.node, &names);
    let before1 = run_part(1);

    // Traces -> plan.
    let mut client_rt = Client::new();
    let flush = rt.block_on(client_rt.request(
        &addr,
        Method::POST,
        "/_admin/traces/flush",
        &admin,
        Bytes::new(),
    ));
    if !flush.is_ok_and(|r| r.status.is_success()) {
        return Err(DemoError::Io("the node did not flush its traces".into()));
    }
    let files = trace_files(&traces);
    log(&format!(
        "phase 1 traced in {} file(s) under {}; provisioning {} of flash",
        files.len(),
        traces.display(),
        fmt_bytes(opts.flash_capacity)
    ));
    let buckets = AgeBuckets::geometric(0.01, 366.0 * 86400.0, 8)
        .map_err(|e| DemoError::Provision(e.to_string()))?;
    let mut ccfg = CollectConfig::new(buckets.clone());
    // Train on the measured phase only; the warm-up before it still tells
    // the collector when objects were created.
    ccfg.start = Some(train_start);
    let mut collector = Collector::new(ccfg).map_err(|e| DemoError::Provision(e.to_string()))?;
    for f in &files {
        let reader = strata_trace::open(f)
            .map_err(|e| DemoError::Provision(format!("{}: {e}", f.display())))?;
        for r in reader {
            let r = r.map_err(|e| DemoError::Provision(e.to_string()))?;
            collector.push(&r);
        }
    }
    let collected = collector
        .finish()
        .map_err(|e| DemoError::Provision(e.to_string()))?;
    let planned_flash = opts.flash_capacity as f64 * (1.0 - opts.headroom.clamp(0.0, 0.9));
    let config = Config {
        policy: Eviction::Fifo,
        flash: Amount::Absolute(planned_flash),
        write_bound: None,
        weights: HashMap::new(),
        prices: Prices::default(),
        warm: None,
    };
    let prov = provision(&collected, &buckets, &config)
        .map_err(|e| DemoError::Provision(e.to_string()))?;
    // The default plan is one FIFO over all of the node's flash: its
    // prediction is the single-FIFO baseline at the full capacity.
    let full = Config {
        flash: Amount::Absolute(opts.flash_capacity as f64),
        ..config.clone()
    };
    let prov_full =
        provision(&collected, &buckets, &full).map_err(|e| DemoError::Provision(e.to_string()))?;
    let plan: TierPlan = prov.plan();
    let plan_path = opts.dir.join("plan.json");
    strata_fs::write_atomic(&plan_path, plan.to_json().as_bytes())
        .map_err(|e| DemoError::Io(format!("cannot write {}: {e}", plan_path.display())))?;
    let load = rt.block_on(client_rt.request(
        &addr,
        Method::POST,
        "/_admin/plan",
        &admin,
        Bytes::from(plan.to_json()),
    ));
    match load {
        Ok(r) if r.status.is_success() => {}
        Ok(r) => {
            return Err(DemoError::Provision(format!(
                "the node refused the plan: {}",
                String::from_utf8_lossy(&r.body)
            )))
        }
        Err(e) => return Err(DemoError::Io(e.to_string())),
    }
    log(&format!(
        "plan loaded through POST /_admin/plan (saved to {}); predicted flash hit ratio {:.1}% vs {:.1}% for the single FIFO",
        plan_path.display(),
        prov.predicted_flash_hit_ratio * 100.0,
        prov_full.baselines.single_fifo.flash_hit_ratio * 100.0
    ));

    log(&format!(
        "phase 2, computed plan: {warm:.0} s for flash to settle, then {phase:.0} s measured"
    ));
    run_part(2);
    let after0 = snapshot(&running.node, &names);
    let after1 = run_part(3);

    // Rows: the node's workload ids are those of its traces and the plan.
    let mut rows = Vec::new();
    let (mut rb, mut fb, mut ra, mut fa) = (0u64, 0u64, 0u64, 0u64);
    for s in &specs {
        let w = DemoWorkload {
            id: running.node.workload_id(&s.name),
        };
        let (r1, f1) = delta(&before0, &before1, &s.name);
        let (r2, f2) = delta(&after0, &after1, &s.name);
        rb += r1;
        fb += f1;
        ra += r2;
        fa += f2;
        let rep = prov.workloads.iter().find(|x| x.id == w.id);
        let rep_full = prov_full.workloads.iter().find(|x| x.id == w.id);
        let ratio = |share: f64, reads: f64| if reads > 0.0 { share / reads } else { 0.0 };
        let pb = rep_full.map_or(0.0, |x| {
            ratio(x.single_fifo.predicted_flash_reads_per_s, x.read_ops_per_s)
        });
        let (pa, fbytes, wp) = match rep {
            Some(x) => (
                ratio(x.predicted_flash_reads_per_s, x.read_ops_per_s),
                x.flash_bytes,
                x.write_probability,
            ),
            None => (0.0, 0, 0.0),
        };
        rows.push(WorkloadRow {
            name: s.name.clone(),
            id: w.id,
            reads_before: r1,
            measured_before: ratio(f1 as f64, r1 as f64),
            predicted_before: pb,
            plan_flash_bytes: fbytes,
            plan_write_probability: wp,
            reads_after: r2,
            measured_after: ratio(f2 as f64, r2 as f64),
            predicted_after: pa,
        });
    }
    let ratio = |f: u64, r: u64| if r > 0 { f as f64 / r as f64 } else { 0.0 };
    let report = DemoReport {
        workloads: rows,
        measured_before: ratio(fb, rb),
        predicted_before: prov_full.baselines.single_fifo.flash_hit_ratio,
        measured_after: ratio(fa, ra),
        predicted_after: prov.predicted_flash_hit_ratio,
        requests: nreq,
        errors: errors.load(Relaxed),
        trace_files: files,
        plan_path,
        node_addr: addr,
        segments_moved: running.node.metrics().mover_segments.load(Relaxed),
    };
    let stopped = node_rt.block_on(running.shutdown(Duration::from_secs(10)));
    for w in &stopped.late_workers {
        eprintln!("strata demo: the node's {w} worker did not stop in time");
    }
    for e in &stopped.checkpoint_errors {
        eprintln!("strata demo: checkpointing a store: {e}");
    }
    node_rt.shutdown_timeout(Duration::from_secs(2));
    Ok(report)
}

/// A demo workload's id in the node's traces (and so in the plan).
struct DemoWorkload {
    id: u32,
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Requests the demo will send with these options.
pub fn demo_requests(opts: &DemoOptions) -> Result<u64, DemoError> {
    let total = 2.0 * (opts.phase_seconds + opts.warmup_seconds.max(0.0));
    let gen = Generator::new(demo_workloads(), total, opts.scale, opts.seed)
        .map_err(|e| DemoError::Workload(e.to_string()))?;
    Ok(gen.count() as u64)
}

fn fmt_bytes(b: u64) -> String {
    format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
}
