//! `strata meta`: run the metadata service.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context};
use strata_meta::backend::{Backend, FileBackend};
use strata_meta::state::ClusterConfig;
use strata_meta::{HealthConfig, MetaService};

use crate::units::parse_bytes;

/// Run the metadata service: membership with heartbeats, disks, placement
/// table versions, recovery progress and the tier plan, with the health
/// checker (pitchfork) that declares silent nodes dead and publishes a new
/// table version with their disks replaced.
///
/// Without --etcd the state lives in a file under --data (one node, no
/// extra process); with --etcd it lives in etcd under --prefix.
/// The first table is built when --initial-nodes nodes have registered
/// (`strata server --meta ADDR ...`); later nodes wait for
/// `strata cluster add-node`.
///
/// HTTP API (docs/placement.md): POST /v1/register, POST /v1/heartbeat,
/// GET /v1/map, /v1/table, /v1/status, /v1/history, /v1/recovery/tasks,
/// POST /v1/nodes/ID/add and /remove, GET/PUT /v1/tier-plan.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// Address to listen on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7400")]
    listen: String,
    /// Another HOST:PORT that nodes and clients reach this service by (a
    /// DNS name, a load balancer's address); repeatable. Signed cluster
    /// requests name their destination, and one naming a destination this
    /// service does not answer as is refused (docs/security.md). The
    /// listening address (any host on its port when it is 0.0.0.0 or [::])
    /// and, on loopback, localhost:PORT are always answered.
    #[arg(long, value_name = "HOST:PORT")]
    answer_as: Vec<String>,
    /// etcd endpoint (e.g. http://127.0.0.1:2379); without it the state is
    /// kept in DATA/meta.json.
    #[arg(long, value_name = "URL")]
    etcd: Option<String>,
    /// Key prefix in etcd.
    #[arg(long, value_name = "PREFIX", default_value = "/strata")]
    prefix: String,
    /// Directory of the embedded state file (without --etcd).
    #[arg(long, value_name = "DIR", default_value = "strata-meta")]
    data: PathBuf,
    /// Replicas per row (only for a new cluster; a saved state keeps its own).
    #[arg(long, value_name = "R", default_value_t = 3)]
    replication: usize,
    /// Nodes to wait for before the first table is built (default: R).
    #[arg(long, value_name = "N")]
    initial_nodes: Option<usize>,
    /// Objects larger than this are split into tracts over consecutive rows.
    #[arg(long, value_name = "SIZE", default_value = "8MiB")]
    tract_size: String,
    /// Seconds of silence after which a node is probed.
    #[arg(long, value_name = "SECS", default_value_t = 3.0)]
    suspect_after: f64,
    /// Failed probes in a row before a silent node is declared dead.
    #[arg(long, value_name = "N", default_value_t = 2)]
    strikes: u32,
    /// Erasure-code the warm tier with K data and M parity shards (4+2,
    /// 6+3, 10+4, ...; K,M ≥ 1, K+M ≤ 32 and at most the number of nodes):
    /// sealed segments older than --ec-after become Reed-Solomon stripes
    /// on K+M nodes and their replicas are dropped (docs/erasure-coding.md).
    /// Applied at every start; without it, a saved state keeps its code,
    /// and `--ec off` turns encoding off (stripes stay readable).
    #[arg(long, value_name = "K+M")]
    ec: Option<String>,
    /// The warm age: a sealed segment older than this is encoded (ms, s,
    /// m, h, d; a tier plan may give a workload its own or turn it off).
    #[arg(long, value_name = "DURATION", default_value = "7d")]
    ec_after: String,
}

/// Runs `strata meta`.
pub fn run(a: Args) -> anyhow::Result<()> {
    if !(1..=16).contains(&a.replication) {
        bail!("--replication must be between 1 and 16");
    }
    let tract_size = parse_bytes(&a.tract_size).context("--tract-size")?;
    if tract_size == 0 {
        bail!("--tract-size must be at least 1 byte");
    }
    if !(a.suspect_after.is_finite() && a.suspect_after > 0.0) {
        bail!("--suspect-after must be a positive number of seconds");
    }
    let ec_after = crate::units::parse_duration(&a.ec_after).context("--ec-after")?;
    let ec = match a.ec.as_deref() {
        None => None,
        Some("off") => Some(None),
        Some(c) => {
            let (k, m) = crate::units::parse_code(c).context("--ec")?;
            Some(Some(strata_meta::api::EcConfig {
                k,
                m,
                after_ms: ec_after.as_millis() as u64,
            }))
        }
    };
    if let Some(n) = a.initial_nodes.filter(|&n| n < a.replication) {
        bail!(
            "--initial-nodes {n} is fewer than --replication {}: a row needs {} distinct \
             nodes, so the first table could never be built; start at least {} nodes, or \
             lower --replication",
            a.replication,
            a.replication,
            a.replication
        );
    }
    let config = ClusterConfig {
        replication: a.replication,
        tract_size,
        initial_nodes: a.initial_nodes.unwrap_or(a.replication),
        ..ClusterConfig::default()
    };
    let health = HealthConfig {
        suspect_after: Duration::from_secs_f64(a.suspect_after),
        strikes: a.strikes.max(1),
        ..HealthConfig::default()
    };
    let Some(secret) = strata_meta::cluster_auth::from_env().map_err(anyhow::Error::msg)? else {
        bail!(
            "the metadata service needs the cluster secret: set {} to the same value (16 \
             characters or more) on it, every node and every client (docs/security.md)",
            strata_meta::cluster_auth::SECRET_ENV
        );
    };
    // Replays of what an earlier run admitted are refused from here on.
    strata_meta::cluster_auth::arm();
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    rt.block_on(async move {
        let backend = match &a.etcd {
            Some(url) => Backend::etcd(url, &a.prefix)
                .await
                .with_context(|| format!("connecting to etcd at {url}"))?,
            None => Backend::File(
                FileBackend::new(&a.data)
                    .with_context(|| format!("metadata directory {}", a.data.display()))?,
            ),
        };
        let describe = backend.describe();
        let svc = MetaService::open(backend, config, health)
            .await
            .context("loading the cluster state")?;
        if let Some(ec) = ec {
            if let Some(c) = ec {
                let st = svc.state().await;
                let nodes = st.nodes.len().max(st.config.initial_nodes);
                if c.k + c.m > nodes {
                    bail!(
                        "--ec {}+{}: a stripe needs {} distinct nodes and this cluster has {} \
                         (--initial-nodes); use a narrower code or more nodes",
                        c.k,
                        c.m,
                        c.k + c.m,
                        nodes
                    );
                }
            }
            svc.set_ec(ec).await.context("saving the erasure code")?;
        }
        let listener = tokio::net::TcpListener::bind(&a.listen)
            .await
            .with_context(|| format!("listening on {}", a.listen))?;
        let addr = listener.local_addr().context("listening address")?;
        // Signed requests must name this address (or, bound to every
        // address, this port) as their Host.
        strata_meta::cluster_auth::answer_as(&addr.to_string());
        for name in &a.answer_as {
            strata_meta::cluster_auth::answer_as(name);
        }
        eprintln!("strata meta: listening on {addr}, state in {describe}");
        tokio::spawn(svc.clone().run_health_checker());
        // The S3 key routes answer only with this token (none: keys are off).
        let admin_token = std::env::var("STRATA_ADMIN_TOKEN")
            .ok()
            .filter(|t| !t.is_empty());
        strata_http::http::serve_router(
            strata_meta::http::router_with_keys(svc, admin_token, Some(secret)),
            listener,
            strata_http::HttpLimits::default(),
            std::future::pending(),
        )
        .await;
        Ok(())
    })
}
