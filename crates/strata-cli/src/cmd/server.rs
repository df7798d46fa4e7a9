//! `strata server`: one storage node serving objects over HTTP.

use crate::units::parse_bytes;
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::time::Duration;
use strata_node::{HttpLimits, NodeConfig, RamAdmission};

/// Serve objects over HTTP from flash and disk device directories, tiered
/// by a tier plan, with a RAM cache, an optional flash read cache and
/// sampled request traces.
///
/// API (docs/node.md): PUT, GET (with Range), HEAD, DELETE of
/// /{bucket}/{name}; POST /{bucket} is a batch PUT; GET /metrics
/// (Prometheus), GET /healthz; /_admin/plan (GET, POST a plan or an empty
/// body to reload --plan, DELETE for the default plan), /_admin/status;
/// GET /dashboard, the live flash dashboard (also in --meta mode).
/// A PUT answers with the object's cookie (X-Strata-Cookie and a URL with
/// ?cookie=HEX); a GET with a wrong cookie is a 404 like an absent object.
/// SIGHUP reloads --plan.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Single node with working defaults: data, flash and disk under
    /// ./strata-data, traces in ./strata-data/traces, 127.0.0.1:8480.
    #[arg(long)]
    dev: bool,
    /// Node directory (workload table; the default flash and disk
    /// directories DATA/flash and DATA/disk when neither --flash nor --disk
    /// is given).
    #[arg(long, value_name = "DIR", required_unless_present = "dev")]
    data: Option<PathBuf>,
    /// A flash device directory (repeatable).
    #[arg(long, value_name = "DIR")]
    flash: Vec<PathBuf>,
    /// A disk device directory (repeatable).
    #[arg(long, value_name = "DIR")]
    disk: Vec<PathBuf>,
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8480")]
    listen: String,
    /// RAM object cache size (0 for none).
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    ram_cache: String,
    /// RAM cache policy (any of `strata sim`'s: lru, lru-mid:75, s3fifo, ...).
    #[arg(long, value_name = "POLICY", default_value = "lru-mid:75")]
    ram_policy: String,
    /// RAM cache admission: `all`, or `recent` (Haystack: only objects in
    /// write-enabled, recently written segments).
    #[arg(long, value_name = "RULE", default_value = "all")]
    ram_admission: String,
    /// Tier plan to load (JSON from `strata provision --plan`); SIGHUP reloads it.
    #[arg(long, value_name = "FILE")]
    plan: Option<PathBuf>,
    /// Bytes the flash tier may hold (default: 90% of the flash
    /// filesystems' free space at start).
    #[arg(long, value_name = "SIZE")]
    flash_capacity: Option<String>,
    /// Flash read cache size for hot disk-resident objects (0: none).
    #[arg(long, value_name = "SIZE", default_value = "0")]
    flash_cache: String,
    /// Flash read cache policy.
    #[arg(long, value_name = "POLICY", default_value = "lru-mid:75")]
    flash_cache_policy: String,
    /// Bound on bytes per second the flash read cache writes.
    #[arg(long, value_name = "SIZE", default_value = "16MiB")]
    flash_cache_write_rate: String,
    /// A GET without a cookie is a 404 (Haystack's defence against guessed URLs).
    #[arg(long)]
    require_cookies: bool,
    /// Largest object accepted.
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    max_object_size: String,
    /// Segment size (the tier mover moves whole segments).
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    segment_size: String,
    /// Bound on bytes per second the tier mover copies from flash to disk.
    #[arg(long, value_name = "SIZE", default_value = "256MiB")]
    mover_rate: String,
    /// Write sampled request traces here (default with --dev: DATA/traces).
    #[arg(long, value_name = "DIR")]
    trace_dir: Option<PathBuf>,
    /// Fraction of objects whose requests are traced.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.1)]
    trace_sample: f64,
    /// Records per trace file before it rotates.
    #[arg(long, value_name = "N", default_value_t = 1_000_000)]
    trace_rotate: u64,
    /// Seconds a trace file stays open before it rotates (then it is
    /// finished and readable; after a crash the next start finishes it).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    trace_rotate_seconds: u64,
    /// Under a tier plan, how far above its flash bytes a workload may go
    /// (a fraction of them) while the plan's TTL is what moves its data to
    /// disk; the flash capacity bounds the sum regardless.
    #[arg(long, value_name = "FRACTION", default_value_t = 0.25)]
    flash_burst: f64,
    /// Seconds a client has to send a request body (else 408).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    body_timeout: u64,
    /// Seconds a client has to send its request head.
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    header_timeout: u64,
    /// Most workloads a tier plan may list. A listed workload gets a segment
    /// store of its own (a writer thread and its files); every other bucket
    /// and workload shares one store and costs neither (docs/node.md).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_workloads: usize,
    /// HTTP worker threads (0: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Join a cluster: register every device (--flash, --disk; or --data
    /// alone, one disk device) with the metadata service at ADDR (`strata
    /// meta`) and serve the placement rows of the disk devices, with the
    /// flash devices as a tier in front of them (placed by the cluster's
    /// tier plan), the RAM cache and traces, instead of the single-node API
    /// (docs/placement.md).
    #[arg(long, value_name = "ADDR")]
    meta: Option<String>,
    /// Cluster mode: seconds between scrub passes (0: no scrubbing).
    #[arg(long, value_name = "SECS", default_value_t = 3600, requires = "meta")]
    scrub_every: u64,
    /// Cluster mode: bound on recovery bytes per second into this disk.
    #[arg(long, value_name = "SIZE", requires = "meta")]
    recovery_rate: Option<String>,
    /// Cluster mode: seconds a delete's tombstone is kept once every replica
    /// of its row holds it (then the scrub drops it).
    #[arg(long, value_name = "SECS", default_value_t = 86_400, requires = "meta")]
    tombstone_grace: u64,
    /// Serve the S3 API at ADDR too (docs/s3-compatibility.md); requests
    /// are signed with the root key STRATA_ROOT_ACCESS_KEY /
    /// STRATA_ROOT_SECRET_KEY. Cluster nodes only for now.
    #[arg(long, value_name = "ADDR")]
    s3_listen: Option<String>,
}

/// `--ram-admission`.
fn ram_admission(s: &str) -> anyhow::Result<RamAdmission> {
    match s {
        "all" => Ok(RamAdmission::All),
        "recent" => Ok(RamAdmission::Recent),
        o => bail!("--ram-admission: {o:?} is neither `all` nor `recent`"),
    }
}

/// Builds the node configuration from the arguments.
fn config(a: &Args) -> anyhow::Result<NodeConfig> {
    let data = match (&a.data, a.dev) {
        (Some(d), _) => d.clone(),
        (None, true) => PathBuf::from("strata-data"),
        (None, false) => bail!("give --data DIR (or --dev)"),
    };
    let mut cfg = NodeConfig::new(&data);
    if !a.flash.is_empty() || !a.disk.is_empty() {
        cfg.flash = a.flash.clone();
        cfg.disk = a.disk.clone();
    }
    cfg.ram_cache_bytes = parse_bytes(&a.ram_cache).context("--ram-cache")?;
    cfg.ram_policy = a
        .ram_policy
        .parse()
        .map_err(|e| anyhow::anyhow!("--ram-policy: {e}"))?;
    cfg.ram_admission = ram_admission(&a.ram_admission)?;
    cfg.flash_cache_bytes = parse_bytes(&a.flash_cache).context("--flash-cache")?;
    if cfg.flash_cache_bytes > 0 && cfg.flash.is_empty() {
        bail!("--flash-cache needs a flash device to cache on (--flash DIR)");
    }
    cfg.flash_cache_policy = a
        .flash_cache_policy
        .parse()
        .map_err(|e| anyhow::anyhow!("--flash-cache-policy: {e}"))?;
    cfg.flash_cache_write_bytes_per_s =
        parse_bytes(&a.flash_cache_write_rate).context("--flash-cache-write-rate")?;
    cfg.flash_capacity = match &a.flash_capacity {
        Some(s) => parse_bytes(s).context("--flash-capacity")?,
        None => {
            for d in &cfg.flash {
                std::fs::create_dir_all(d)
                    .with_context(|| format!("cannot create {}", d.display()))?;
            }
            NodeConfig::free_space(&cfg.flash)
        }
    };
    cfg.plan_path = a.plan.clone();
    cfg.require_cookies = a.require_cookies;
    cfg.max_object_bytes = parse_bytes(&a.max_object_size).context("--max-object-size")?;
    cfg.segment_bytes = parse_bytes(&a.segment_size).context("--segment-size")?;
    if cfg.segment_bytes < 64 << 10 {
        bail!("--segment-size must be at least 64KiB");
    }
    cfg.mover_bytes_per_s = parse_bytes(&a.mover_rate).context("--mover-rate")?;
    if cfg.mover_bytes_per_s == 0 {
        bail!("--mover-rate must be positive");
    }
    if !(0.0..=1.0).contains(&a.trace_sample) {
        bail!("--trace-sample must be within 0..1");
    }
    cfg.trace_dir = a
        .trace_dir
        .clone()
        .or_else(|| a.dev.then(|| data.join("traces")));
    cfg.trace_sample = a.trace_sample;
    cfg.trace_rotate_records = a.trace_rotate;
    cfg.trace_rotate_after = Duration::from_secs(a.trace_rotate_seconds.max(1));
    if !(0.0..=10.0).contains(&a.flash_burst) {
        bail!("--flash-burst must be within 0 and 10");
    }
    cfg.flash_burst = a.flash_burst;
    if a.max_workloads == 0 {
        bail!("--max-workloads must be at least 1");
    }
    cfg.max_workloads = a.max_workloads;
    Ok(cfg)
}

/// The admin token of the control endpoints: `STRATA_ADMIN_TOKEN`, or with
/// `--dev` a fresh one printed once; without either they are off.
fn admin_token(a: &Args) -> Option<String> {
    let env = std::env::var(strata_node::auth::ADMIN_TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    if env.is_some() {
        return env;
    }
    if a.dev {
        let t = strata_node::auth::generate();
        eprintln!(
            "strata: admin token for this run (send it as Authorization: Bearer TOKEN, or export {}={t}): {t}",
            strata_node::auth::ADMIN_TOKEN_ENV
        );
        return Some(t);
    }
    eprintln!(
        "strata: {} is not set: /_admin and /metrics are off (403)",
        strata_node::auth::ADMIN_TOKEN_ENV
    );
    None
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(a: Args) -> anyhow::Result<()> {
    if a.s3_listen.is_some() && a.meta.is_none() {
        bail!(
            "--s3-listen is served by cluster nodes only for now (the single-node server \
             is being merged into the cluster code): run `strata meta --initial-nodes 1 \
             --replication 1` and `strata server --meta ADDR --s3-listen ADDR`"
        );
    }
    if let Some(meta) = &a.meta {
        return super::cluster::serve_node(super::cluster::NodeArgs {
            meta: meta.clone(),
            listen: a.listen.clone(),
            data: a
                .data
                .clone()
                .unwrap_or_else(|| PathBuf::from("strata-data")),
            flash: a.flash.clone(),
            disk: a.disk.clone(),
            ram_cache: a.ram_cache.clone(),
            ram_policy: a.ram_policy.clone(),
            flash_capacity: a.flash_capacity.clone(),
            segment_size: a.segment_size.clone(),
            mover_rate: a.mover_rate.clone(),
            flash_burst: a.flash_burst,
            // --dev: traces in DATA/traces, as on a single node.
            trace_dir: a.trace_dir.clone().or_else(|| {
                a.dev.then(|| {
                    a.data
                        .clone()
                        .unwrap_or_else(|| PathBuf::from("strata-data"))
                        .join("traces")
                })
            }),
            trace_sample: a.trace_sample,
            trace_rotate: a.trace_rotate,
            scrub_every: a.scrub_every,
            recovery_rate: a.recovery_rate.clone(),
            tombstone_grace: a.tombstone_grace,
            max_object_size: a.max_object_size.clone(),
            require_cookies: a.require_cookies,
            body_timeout: a.body_timeout,
            header_timeout: a.header_timeout,
            plan: a.plan.clone(),
            max_workloads: a.max_workloads,
            admin_token: admin_token(&a),
            ram_admission: ram_admission(&a.ram_admission)?,
            flash_cache: a.flash_cache.clone(),
            flash_cache_policy: a.flash_cache_policy.clone(),
            flash_cache_write_rate: a.flash_cache_write_rate.clone(),
            threads: a.threads,
            trace_rotate_seconds: a.trace_rotate_seconds,
            s3_listen: a.s3_listen.clone(),
        });
    }
    let mut cfg = config(&a)?;
    cfg.admin_token = admin_token(&a);
    let limits = HttpLimits {
        header_timeout: Duration::from_secs(a.header_timeout.max(1)),
        body_timeout: Duration::from_secs(a.body_timeout.max(1)),
        ..HttpLimits::default()
    };
    let summary = format!(
        "flash: {:?}, disk: {:?}, flash capacity {}, RAM cache {}, plan: {}, traces: {}",
        cfg.flash,
        cfg.disk,
        crate::units::format_bytes(cfg.flash_capacity),
        crate::units::format_bytes(cfg.ram_cache_bytes),
        cfg.plan_path
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "default".into()),
        cfg.trace_dir
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "off".into()),
    );
    let running =
        strata_node::start(cfg, &a.listen, limits, a.threads).context("cannot start the node")?;
    println!(
        "strata node listening on http://{} ({summary})",
        running.addr
    );
    eprintln!("strata: SIGHUP reloads the plan; Ctrl-C stops");
    running.wait_for_signals(|r| match r {
        Ok(()) => eprintln!("strata: tier plan reloaded"),
        Err(e) => eprintln!("strata: tier plan not reloaded: {e}"),
    });
    Ok(())
}
