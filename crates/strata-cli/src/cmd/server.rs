//! `strata server`: the one Strata server, a member of a cluster (`--meta
//! ADDR`) or a cluster of one (its own embedded metadata service).

use crate::cmd::devices::device_list;
use crate::cmd::key::{ROOT_ACCESS_ENV, ROOT_SECRET_ENV};
use crate::units::parse_bytes;
use anyhow::{bail, Context};
use std::path::{Path, PathBuf};
use std::time::Duration;
use strata_node::RamAdmission;

/// Serve objects over HTTP from flash and disk device directories, tiered
/// by a tier plan, with a RAM cache, an optional flash read cache and
/// sampled request traces.
///
/// One server in every mode (docs/node.md, docs/placement.md): without
/// --meta the node is a cluster of one (its metadata service runs inside
/// it, state in DATA/meta); with --meta ADDR it is one member of the
/// cluster whose metadata service (`strata meta`) is at ADDR. Either way
/// every node serves the public API for every object of its cluster.
///
/// API (docs/node.md): PUT, GET (with Range), HEAD, DELETE of
/// /{bucket}/{name}; POST /{bucket} is a batch PUT; GET /metrics
/// (Prometheus), GET /healthz; /_admin/plan (GET, POST a plan or an empty
/// body to reload --plan, DELETE for the default plan), /_admin/status;
/// GET /dashboard, the live flash dashboard. --s3-listen adds the S3 API.
/// A PUT answers with the object's cookie (X-Strata-Cookie and a URL with
/// ?cookie=HEX); a GET with a wrong cookie is a 404 like an absent object.
/// SIGHUP reloads --plan.
///
/// Object requests carry Authorization: Bearer TOKEN, a token of an access
/// key (`strata key token`), and may do what the key may do in the bucket,
/// as on S3; without one, only GET and HEAD of a public-read bucket. The
/// root key (every permission) is STRATA_ROOT_ACCESS_KEY and
/// STRATA_ROOT_SECRET_KEY (with --dev and none set, one is generated and
/// printed with a token); other keys come from `strata key create`
/// (docs/security.md).
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Working defaults for a try-out: data, flash and disk under
    /// ./strata-data, traces in ./strata-data/traces, 127.0.0.1:8480, an
    /// admin token (and with --s3-listen, or S3 at 127.0.0.1:8490, a root
    /// key) generated and printed once.
    #[arg(long)]
    dev: bool,
    /// Node directory (its identity; in a cluster of one, the metadata
    /// state in DATA/meta; the default flash and disk directories DATA/flash
    /// and DATA/disk when neither --flash nor --disk is given).
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
    /// The address other nodes, the metadata service and clients of the
    /// direct path are told to reach this node at (default: the address
    /// it listens on). For a node behind a proxy or NAT; `strata torture`
    /// advertises its fault-injecting proxies with it.
    #[arg(long, value_name = "ADDR")]
    advertise: Option<String>,
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
    /// Bytes the flash tier may hold. Remembered in DATA/flash-capacity.json;
    /// without it, the remembered figure, or at the first start 90% of the
    /// flash file systems' free space plus what Strata holds there.
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
    /// Largest object accepted (objects above the tract size are striped
    /// into tracts, streamed both ways).
    #[arg(long, value_name = "SIZE", default_value = "5GiB")]
    max_object_size: String,
    /// Segment size (the tier mover moves whole segments).
    #[arg(long, value_name = "SIZE", default_value = "64MiB")]
    segment_size: String,
    /// Zeros written (and synced) ahead of each active segment's needles by
    /// a background thread, so that a group commit's fdatasync overwrites
    /// blocks the file already has instead of growing it, which on ext4
    /// also commits the journal (several times slower per sync). Never past
    /// the segment, only while 1/16 of the volume is free; cut when the
    /// segment is sealed or the server stops. 0: off (for a file system
    /// where it does not pay, e.g. tmpfs).
    #[arg(long, value_name = "SIZE", default_value = "32MiB",
          value_parser = |s: &str| crate::units::parse_bytes(s).map_err(|e| format!("{e:#}")))]
    prepare_ahead: u64,
    /// Space kept back on each disk device so that a full volume can still
    /// take deletes and compact (a file `space.reserve` in the device's
    /// directory). When the volume fills, deletes use it and other writes
    /// answer 507 until compaction has freed room for it again. Default:
    /// two segments, at most 1/32 of the volume, at least 256KiB; 0: none.
    #[arg(long, value_name = "SIZE")]
    space_reserve: Option<String>,
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
    /// Seconds a request body may go without a byte; the whole body is due
    /// within this plus its time at 64 KiB/s (else 408 on the object API,
    /// 400 RequestTimeout on the S3 API, as S3 answers).
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    body_timeout: u64,
    /// Seconds a client has to send its request head, counted from the
    /// connection opening or from the head's first byte (the wait between
    /// requests on a kept-alive connection is --idle-timeout's).
    #[arg(long, value_name = "SECS", default_value_t = 10)]
    header_timeout: u64,
    /// Most connections served at once on each listener (object API, S3).
    /// Past it the connection idle longest is closed; when every one is
    /// busy, 8 more are taken that answer only `GET /healthz`, and the
    /// rest wait in the accept queue.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    max_connections: usize,
    /// Most connections of one client network on each listener (an IPv4
    /// /24, all of loopback, an IPv6 /64; default a quarter of
    /// --max-connections). Past it that client's idlest connection is
    /// closed for a new one, or, when none is idle, the new one gets 503
    /// and is closed; other clients keep their slots. On the node port the
    /// cluster's own nodes and its metadata service (their addresses in
    /// the cluster map) are not counted: they may all sit in one network.
    #[arg(long, value_name = "N")]
    max_connections_per_client: Option<usize>,

    /// Request bytes the object API holds in memory at once, all requests
    /// together (small PUT bodies, batch bodies, the tracts a large PUT
    /// fills); past it a request waits up to 1 s, then gets 503.
    #[arg(long, value_name = "SIZE", default_value = "2GiB")]
    max_buffered_bytes: String,
    /// What the requests of one access key may hold of --max-buffered-bytes
    /// at once (default: a quarter of it; at least 1 MiB): past it that
    /// key's next request gets 503 at once, and the other keys' are not
    /// held back. A batch POST larger than it gets 413.
    #[arg(long, value_name = "SIZE")]
    max_buffered_bytes_per_key: Option<String>,
    /// Seconds a keep-alive connection may stay without a request before
    /// it is closed. The node lets go of its own idle connections to its
    /// peers after half of it (at most 30 s), so that it never sends on one
    /// a peer with the same setting is closing.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    idle_timeout: u64,
    /// Seconds a client may take no byte of an answer before its
    /// connection is dropped (on every listener: the object API, S3, the
    /// node protocol). A slow reader that keeps taking bytes is not
    /// affected; one that asks and never reads frees its slot.
    #[arg(long, value_name = "SECS", default_value_t = 30)]
    write_timeout: u64,
    /// Most workloads a tier plan may list. A listed workload gets a segment
    /// store of its own (a writer thread and its files); every other bucket
    /// and workload shares one store and costs neither (docs/node.md).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    max_workloads: usize,
    /// HTTP worker threads (0: one per core).
    #[arg(long, value_name = "N", default_value_t = 0)]
    threads: usize,
    /// Join the cluster whose metadata service (`strata meta`) is at ADDR:
    /// register every device and serve the placement rows of the disk
    /// devices, with the flash devices as a tier in front of them
    /// (docs/placement.md). Without it the node is a cluster of one.
    #[arg(long, value_name = "ADDR")]
    meta: Option<String>,
    /// Cluster of one: where its embedded metadata service listens (the
    /// Rust client's `strata put/get --meta` reach the node through it).
    #[arg(
        long,
        value_name = "ADDR",
        default_value = "127.0.0.1:0",
        conflicts_with = "meta"
    )]
    meta_listen: String,
    /// Seconds between scrub passes (0: no scrubbing). A pass re-reads
    /// every record and, with other replicas, compares and repairs them.
    #[arg(long, value_name = "SECS", default_value_t = 3600)]
    scrub_every: u64,
    /// Bound on recovery bytes per second into this disk (a cluster of
    /// one has no other replica to recover from: refused there).
    #[arg(long, value_name = "SIZE", requires = "meta")]
    recovery_rate: Option<String>,
    /// Seconds a delete's tombstone is kept once every replica of its row
    /// holds it (then the scrub drops it).
    #[arg(long, value_name = "SECS", default_value_t = 86_400)]
    tombstone_grace: u64,
    /// Erasure coding: a stripe whose dead records (deleted or rewritten
    /// names) reach this fraction of its bytes is compacted: its live
    /// records are re-encoded into a new stripe and the old one's shard
    /// files are deleted (docs/erasure-coding.md).
    #[arg(long, value_name = "FRACTION", default_value_t = 0.5)]
    ec_compact_garbage: f64,
    /// Erasure coding: how long a stripe directory that no stripe record
    /// names (left by a crash, or replaced by a compaction) is kept before
    /// it is deleted (`ms`, `s`, `m`, `h`, `d`). Replicas that have not yet
    /// switched to the new stripe read the old one meanwhile.
    #[arg(long, value_name = "DURATION", default_value = "10m")]
    ec_sweep_grace: String,
    /// Erasure coding: bound on the bytes per second of lost shards this
    /// node rebuilds (every node rebuilds its share of a lost disk at once,
    /// so a cluster rebuilds at up to nodes x this rate).
    #[arg(long, value_name = "SIZE", default_value = "200MiB")]
    ec_rebuild_rate: String,
    /// Seconds after which the scrub deletes a data tract of a striped
    /// object that no manifest refers to (left by an upload or overwrite
    /// whose coordinator died, or by a delete cut short). An upload must
    /// finish within this time.
    #[arg(long, value_name = "SECS", default_value_t = 86_400)]
    orphan_grace: u64,
    /// Serve the S3 API at ADDR too (docs/s3-compatibility.md); requests
    /// are signed with the root key STRATA_ROOT_ACCESS_KEY /
    /// STRATA_ROOT_SECRET_KEY (with --dev and no such key, one is generated
    /// and printed once). With --dev the default is 127.0.0.1:8490.
    #[arg(long, value_name = "ADDR")]
    s3_listen: Option<String>,
    /// The domain of virtual-host-style S3 requests: a request for host
    /// BUCKET.DOMAIN (any port) addresses bucket BUCKET; any other host is
    /// path style (/BUCKET/KEY). Repeat for several domains.
    #[arg(long, value_name = "DOMAIN", default_value = "localhost")]
    s3_domain: Vec<String>,
    /// The region the S3 API answers for: GetBucketLocation gives it (none
    /// for us-east-1, as S3 does) and a CreateBucket asking for another
    /// location is refused (IllegalLocationConstraintException). Needs
    /// --s3-listen (or --dev). Default us-east-1.
    #[arg(long, value_name = "NAME")]
    s3_region: Option<String>,
    /// Accept SigV2 signatures on the S3 API (off by default: SigV2 signs
    /// no body, so a captured request can be replayed with other bytes).
    /// When on, a header-signed request must be dated within 15 minutes of
    /// the server's clock and a presigned URL expire within 7 days, as
    /// SigV4's must. Needs --s3-listen (or --dev).
    #[arg(long)]
    s3_sigv2: bool,
    /// S3 multipart uploads neither completed nor aborted this long after
    /// they were created are aborted and their parts' space reclaimed
    /// (S3's AbortIncompleteMultipartUpload lifecycle rule, for every
    /// bucket); `off` keeps them until aborted. Units ms, s, m, h, d.
    /// Default 7d. Needs --s3-listen (or --dev).
    #[arg(long, value_name = "DURATION")]
    s3_abandoned_uploads_after: Option<String>,
    /// Serve the S3 API over TLS (HTTPS only, TLS 1.2 and 1.3) with this
    /// PEM certificate chain, the server's certificate first. Needs
    /// --s3-tls-key and --s3-listen (or --dev). Without it the S3 API is
    /// plain HTTP (docs/security.md).
    #[arg(long, value_name = "PEM", requires = "s3_tls_key")]
    s3_tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of --s3-tls-cert.
    #[arg(long, value_name = "PEM", requires = "s3_tls_cert")]
    s3_tls_key: Option<PathBuf>,
    /// Benchmarks only: S3 PUTs skip the listing index (nothing written
    /// then is listed), to measure what the index costs.
    #[arg(long, hide = true)]
    s3_bench_no_listing_index: bool,
}

/// `--ram-admission`.
fn ram_admission(s: &str) -> anyhow::Result<RamAdmission> {
    match s {
        "all" => Ok(RamAdmission::All),
        "recent" => Ok(RamAdmission::Recent),
        o => bail!("--ram-admission: {o:?} is neither `all` nor `recent`"),
    }
}

/// The admin token of the control endpoints: `STRATA_ADMIN_TOKEN`, or with
/// `--dev` a fresh one printed once; without either they are off.
fn admin_token(a: &Args) -> Option<String> {
    let env = std::env::var(strata_http::auth::ADMIN_TOKEN_ENV)
        .ok()
        .filter(|t| !t.is_empty());
    if env.is_some() {
        return env;
    }
    if a.dev {
        let t = strata_http::auth::generate();
        eprintln!(
            "strata: admin token for this run (send it as Authorization: Bearer TOKEN, or export {}={t}): {t}",
            strata_http::auth::ADMIN_TOKEN_ENV
        );
        return Some(t);
    }
    eprintln!(
        "strata: {} is not set: /_admin and /metrics are off (403)",
        strata_http::auth::ADMIN_TOKEN_ENV
    );
    None
}

/// The root key from STRATA_ROOT_ACCESS_KEY and STRATA_ROOT_SECRET_KEY;
/// with `--dev` and neither set, a fresh one printed once, with a native
/// token of it. Without either, None: the native API then answers only
/// the metadata service's keys and public-read buckets.
fn root_key(dev: bool) -> anyhow::Result<Option<strata_s3::auth::Key>> {
    use crate::cmd::key::{root_key_from_env, token_valid_for, DEFAULT_TOKEN_LIFE};
    match root_key_from_env()? {
        Some(key) => Ok(Some(key)),
        None if dev => {
            let token = strata_http::auth::generate();
            let key = strata_s3::auth::Key {
                access_key: format!("SK{}", token[..18].to_uppercase()),
                secret_key: strata_http::auth::generate(),
            };
            eprintln!(
                "strata: root key for this run: access key {} secret key {} \
                 (export {ROOT_ACCESS_ENV} and {ROOT_SECRET_ENV} to choose one)\n\
                 strata: a 24-hour token of it for the object API \
                 (send it as Authorization: Bearer TOKEN): {}",
                key.access_key,
                key.secret_key,
                token_valid_for(&key, DEFAULT_TOKEN_LIFE)
            );
            Ok(Some(key))
        }
        None => {
            eprintln!(
                "strata: {ROOT_ACCESS_ENV} is not set: the object API answers only keys from \
                 `strata key create` and anonymous reads of public-read buckets (401 otherwise)"
            );
            Ok(None)
        }
    }
}

/// The node's options from the arguments.
fn options(
    a: &Args,
    meta: &str,
    data: &Path,
    devices: Vec<strata_server::Device>,
) -> anyhow::Result<strata_server::NodeOptions> {
    let mut opts = strata_server::NodeOptions::new(meta, &a.listen, data);
    opts.devices = devices;
    if let Some(a) = &a.advertise {
        a.parse::<std::net::SocketAddr>()
            .with_context(|| format!("--advertise {a:?}: not an IP address and port"))?;
    }
    opts.advertise = a.advertise.clone();
    opts.cluster_of_one = a.meta.is_none();
    opts.ram_cache_bytes = parse_bytes(&a.ram_cache).context("--ram-cache")?;
    opts.ram_policy = a
        .ram_policy
        .parse()
        .map_err(|e| anyhow::anyhow!("--ram-policy: {e}"))?;
    opts.ram_admission = ram_admission(&a.ram_admission)?;
    opts.flash_capacity = a
        .flash_capacity
        .as_deref()
        .map(parse_bytes)
        .transpose()
        .context("--flash-capacity")?;
    opts.segment_size = parse_bytes(&a.segment_size).context("--segment-size")?;
    if opts.segment_size < 64 << 10 {
        bail!("--segment-size must be at least 64KiB");
    }
    opts.prepare_ahead = a.prepare_ahead;
    opts.space_reserve = a
        .space_reserve
        .as_deref()
        .map(parse_bytes)
        .transpose()
        .context("--space-reserve")?;
    opts.mover_bytes_per_sec = parse_bytes(&a.mover_rate).context("--mover-rate")?;
    if opts.mover_bytes_per_sec == 0 {
        bail!("--mover-rate must be positive");
    }
    if !(0.0..=10.0).contains(&a.flash_burst) {
        bail!("--flash-burst must be within 0 and 10");
    }
    opts.flash_burst = a.flash_burst;
    if !(0.0..=1.0).contains(&a.trace_sample) {
        bail!("--trace-sample must be within 0..1");
    }
    opts.trace_dir = a
        .trace_dir
        .clone()
        .or_else(|| a.dev.then(|| data.join("traces")));
    opts.trace_sample = a.trace_sample;
    opts.trace_rotate = a.trace_rotate.max(1);
    opts.trace_rotate_after = Duration::from_secs(a.trace_rotate_seconds.max(1));
    opts.scrub_interval = (a.scrub_every > 0).then(|| Duration::from_secs(a.scrub_every));
    opts.recovery_bytes_per_sec = a
        .recovery_rate
        .as_deref()
        .map(parse_bytes)
        .transpose()
        .context("--recovery-rate")?;
    opts.tombstone_grace = Duration::from_secs(a.tombstone_grace);
    if !(a.ec_compact_garbage > 0.0 && a.ec_compact_garbage <= 1.0) {
        bail!(
            "--ec-compact-garbage must be above 0 and at most 1 (a fraction of a stripe's bytes), not {}",
            a.ec_compact_garbage
        );
    }
    opts.ec_compact_garbage = a.ec_compact_garbage;
    opts.ec_sweep_grace =
        crate::units::parse_duration(&a.ec_sweep_grace).context("--ec-sweep-grace")?;
    if opts.ec_sweep_grace < Duration::from_secs(1) {
        bail!("--ec-sweep-grace must be at least 1s");
    }
    opts.ec_rebuild_bytes_per_sec = parse_bytes(&a.ec_rebuild_rate).context("--ec-rebuild-rate")?;
    if opts.ec_rebuild_bytes_per_sec == 0 {
        bail!("--ec-rebuild-rate must be above 0 (a rebuild that never runs loses stripes)");
    }
    opts.orphan_grace = Duration::from_secs(a.orphan_grace);
    opts.plan_path = a.plan.clone();
    let fc_bytes = parse_bytes(&a.flash_cache).context("--flash-cache")?;
    if fc_bytes > 0 {
        if opts.flash_tier().is_empty() {
            bail!("--flash-cache needs a flash device to cache on (--flash DIR)");
        }
        opts.flash_cache = Some(strata_node::flashcache::FlashCacheConfig {
            bytes: fc_bytes,
            policy: a
                .flash_cache_policy
                .parse()
                .map_err(|e| anyhow::anyhow!("--flash-cache-policy: {e}"))?,
            write_bytes_per_s: parse_bytes(&a.flash_cache_write_rate)
                .context("--flash-cache-write-rate")?,
        });
    }
    if a.max_workloads == 0 {
        bail!("--max-workloads must be at least 1");
    }
    opts.max_workloads = a.max_workloads;
    if a.max_connections == 0 {
        bail!("--max-connections must be at least 1");
    }
    let per_client = a
        .max_connections_per_client
        .unwrap_or((a.max_connections / 4).max(1));
    if per_client == 0 || per_client > a.max_connections {
        bail!(
            "--max-connections-per-client {per_client}: give 1 to --max-connections ({})",
            a.max_connections
        );
    }

    opts.http = strata_http::HttpLimits {
        header_timeout: Duration::from_secs(a.header_timeout.max(1)),
        body_timeout: Duration::from_secs(a.body_timeout.max(1)),
        max_connections: a.max_connections,
        max_connections_per_client: per_client,
        idle_timeout: Duration::from_secs(a.idle_timeout.max(1)),
        write_timeout: Duration::from_secs(a.write_timeout.max(1)),
        ..strata_http::HttpLimits::default()
    };
    // This node's clients (to its peers and the metadata service, which
    // close idle connections after the same --idle-timeout) let go first.
    strata_client::set_pool_idle(opts.http.idle_timeout / 2);
    let max_buffered_bytes = parse_bytes(&a.max_buffered_bytes).context("--max-buffered-bytes")?;
    let max_buffered_bytes_per_key = match &a.max_buffered_bytes_per_key {
        None => max_buffered_bytes / 4,
        Some(s) => {
            let share = parse_bytes(s).context("--max-buffered-bytes-per-key")?;
            if share > max_buffered_bytes {
                bail!(
                    "--max-buffered-bytes-per-key {s} is more than --max-buffered-bytes {}: \
                     a key's share is part of the cap",
                    a.max_buffered_bytes
                );
            }
            share
        }
    };
    opts.gateway = strata_server::GatewayLimits {
        max_object_size: parse_bytes(&a.max_object_size).context("--max-object-size")?,
        require_cookies: a.require_cookies,
        max_buffered_bytes,
        max_buffered_bytes_per_key,
        body_idle_timeout: Duration::from_secs(a.body_timeout.max(1)),
        ..strata_server::GatewayLimits::default()
    };
    Ok(opts)
}

/// Refuses a data directory this mode would damage: one written by the
/// single-node server of Strata before 0.3 (its per-workload stores are
/// converted by `strata upgrade`), or a node's directory started in the
/// other mode (a member of a cluster started alone, or a cluster of one
/// told to join another: either would register anew and drop its rows).
fn check_data(a: &Args, data: &Path, devices: &[strata_server::Device]) -> anyhow::Result<()> {
    let legacy = crate::cmd::upgrade::legacy_stores(data, devices);
    if !legacy.is_empty() {
        bail!(
            "{} holds the per-workload stores of the single-node server of Strata before 0.3 \
             ({} and {} more); convert them into the one server's layout with \
             `strata upgrade --data {}` (with the same --flash/--disk as here), then start again",
            data.display(),
            legacy[0].display(),
            legacy.len() - 1,
            data.display()
        );
    }
    let member = data.join("cluster-node.json").exists();
    let alone = data.join("meta").join("meta.json").exists();
    match &a.meta {
        None if member && !alone => bail!(
            "{} is the directory of a member of a cluster (DATA/cluster-node.json names its \
             metadata service); start it with --meta ADDR, not as a cluster of one",
            data.display()
        ),
        Some(_) if alone => bail!(
            "{} is the directory of a cluster of one (its metadata state is in DATA/meta); \
             joining another cluster would drop its rows: start it without --meta",
            data.display()
        ),
        _ => Ok(()),
    }
}

/// Runs the server until SIGINT or SIGTERM.
pub fn run(mut a: Args) -> anyhow::Result<()> {
    let data = match (&a.data, a.dev) {
        (Some(d), _) => d.clone(),
        (None, true) => PathBuf::from("strata-data"),
        (None, false) => bail!("give --data DIR (or --dev)"),
    };
    if a.dev && a.s3_listen.is_none() {
        a.s3_listen = Some("127.0.0.1:8490".into());
    }
    if a.s3_abandoned_uploads_after.is_some() && a.s3_listen.is_none() {
        bail!("--s3-abandoned-uploads-after is about S3 uploads: it needs --s3-listen (or --dev)");
    }
    if a.s3_sigv2 && a.s3_listen.is_none() {
        bail!("--s3-sigv2 is about S3 signatures: it needs --s3-listen (or --dev)");
    }
    if let Some(r) = &a.s3_region {
        if a.s3_listen.is_none() {
            bail!("--s3-region is the S3 API's region: it needs --s3-listen (or --dev)");
        }
        if r.is_empty()
            || !r
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            bail!("--s3-region {r:?}: a region name is lowercase letters, digits and '-' (like us-east-1)");
        }
    }
    let tls = match (&a.s3_tls_cert, &a.s3_tls_key) {
        (Some(cert), Some(key)) => {
            if a.s3_listen.is_none() {
                bail!("--s3-tls-cert is the S3 listener's certificate: it needs --s3-listen (or --dev)");
            }
            Some(
                strata_http::conns::tls_acceptor(cert, key)
                    .context("--s3-tls-cert / --s3-tls-key")?,
            )
        }
        _ => None,
    };
    let abandoned_uploads_after = match a.s3_abandoned_uploads_after.as_deref().unwrap_or("7d") {
        "off" => None,
        d => Some(
            crate::units::parse_duration(d)
                .context("--s3-abandoned-uploads-after")
                .and_then(|d| {
                    if d.is_zero() {
                        bail!("--s3-abandoned-uploads-after: give a positive age, or `off`")
                    }
                    Ok(d)
                })?,
        ),
    };
    let devices = device_list(&data, &a.flash, &a.disk)?;
    check_data(&a, &data, &devices)?;
    // The cluster secret, before anything sends a request.
    use strata_meta::cluster_auth::{self, SECRET_ENV};
    match (
        &a.meta,
        cluster_auth::from_env().map_err(anyhow::Error::msg)?,
    ) {
        (Some(_), None) => bail!(
            "a cluster member needs the cluster secret: set {SECRET_ENV} to the same value \
             (16 characters or more) on every node, the metadata service and every client \
             (docs/security.md)"
        ),
        (None, None) => {
            eprintln!(
                "strata: {SECRET_ENV} is not set: the node protocol (/cluster/v1) answers only \
                 this process (set it to use `strata put/get --meta` here)"
            );
            cluster_auth::process_secret_or_generate();
        }
        (_, Some(s)) => {
            cluster_auth::install(Some(s));
        }
    }
    let token = admin_token(&a);
    let mut rt = tokio::runtime::Builder::new_multi_thread();
    rt.enable_all();
    if a.threads > 0 {
        rt.worker_threads(a.threads);
    }
    let rt = rt.build().context("starting the async runtime")?;
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    let meta = match &a.meta {
        Some(m) => m.clone(),
        None => {
            let addr = rt.block_on(strata_server::embedded_meta(
                &data.join("meta"),
                &a.meta_listen,
                token.clone(),
            ))?;
            eprintln!(
                "strata: a cluster of one; its metadata service listens on {addr} (state in {})",
                data.join("meta").display()
            );
            addr
        }
    };
    let mut opts = options(&a, &meta, &data, devices)?;
    opts.admin_token = token.clone();
    // The root key is checked before the node starts.
    opts.root = root_key(a.dev)?;
    if let Some(listen) = &a.s3_listen {
        if opts.root.is_none() {
            bail!(
                "--s3-listen needs a root key: set {ROOT_ACCESS_ENV} and {ROOT_SECRET_ENV} \
                 (no anonymous access)"
            );
        }
        opts.s3 = Some(strata_server::S3Listen {
            options: strata_s3::S3Options {
                listen: listen.clone(),
                max_object_size: opts.gateway.max_object_size,
                admin_token: token,
                domains: a.s3_domain.clone(),
                listing_index: !a.s3_bench_no_listing_index,
                abandoned_uploads_after,
                region: a
                    .s3_region
                    .clone()
                    .unwrap_or_else(|| strata_s3::DEFAULT_REGION.to_string()),
                sigv2: a.s3_sigv2,
                body_timeout: Duration::from_secs(a.body_timeout.max(1)),
            },
            tls,
        });
    }
    let https = opts.s3.as_ref().is_some_and(|s| s.tls.is_some());
    let running = rt
        .block_on(strata_server::start(opts))
        .with_context(|| format!("node on {} with data in {}", a.listen, data.display()))?;
    if let Some(addr) = running.s3_addr {
        eprintln!(
            "strata: S3 API on {}://{addr}",
            if https { "https" } else { "http" }
        );
    }
    // The one line on standard output: where to send requests.
    println!(
        "strata server listening on http://{} (node {}, {}, metadata service {})",
        running.addr,
        running
            .node
            .ids()
            .map_or("?".into(), |(n, _)| n.to_string()),
        if running.node.cluster_of_one() {
            "a cluster of one"
        } else {
            "a cluster member"
        },
        running.node.meta()
    );
    {
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    // SIGTERM or SIGINT: stop accepting, answer what is in flight, stop the
    // background workers at a safe point, write checkpoints, exit 0.
    rt.block_on(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
        let mut running = running;
        let why = tokio::select! {
            r = &mut running.served => {
                return r.context("the HTTP loop stopped");
            }
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        eprintln!("strata server: {why}: stopping (answering the requests in flight, stopping the background workers)");
        let started = std::time::Instant::now();
        let report = running.shutdown(SHUTDOWN_DEADLINE).await;
        if !report.late_workers.is_empty() {
            eprintln!(
                "strata server: workers still in a pass at the deadline, dropped (their work is redone at the next start): {}",
                report.late_workers.join(", ")
            );
        }
        for e in &report.checkpoint_errors {
            eprintln!("strata server: checkpoint not written (the next start scans instead): {e}");
        }
        eprintln!(
            "strata server: stopped in {:.1} s",
            started.elapsed().as_secs_f64()
        );
        Ok(())
    })
}

/// How long a stop may take in all (the requests in flight, the workers'
/// passes, the checkpoints).
const SHUTDOWN_DEADLINE: std::time::Duration = std::time::Duration::from_secs(9);
