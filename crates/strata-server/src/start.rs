//! The server assembled: [`start`] binds the listener, opens the node
//! ([`ClusterNode::open`]), registers it, opens the listing index, starts
//! every background worker under the node's one runner and the tier
//! mover, builds the one coordinator, and serves the node protocol, the
//! public API, the admin routes, the dashboard and (when asked) the S3
//! API; [`Running::shutdown`] stops them in order.

use std::collections::HashSet;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::node::{refill_reserves, ClusterNode};
use crate::options::{NodeOptions, S3Listen};
use crate::ClusterError;

/// Runs a node until the process ends: binds `listen`, registers with the
/// metadata service, and serves.
pub async fn serve(opts: NodeOptions) -> Result<(), ClusterError> {
    start(opts)
        .await?
        .served
        .await
        .map_err(|e| ClusterError::Io {
            path: "the HTTP loop".into(),
            source: std::io::Error::other(e.to_string()),
        })
}

/// A node started in this process ([`start`]).
pub struct Running {
    /// The address it serves at.
    pub addr: String,
    /// The node (its counters, for a caller in the same process).
    pub node: Arc<ClusterNode>,
    /// The HTTP loop; it ends once [`Running::shutdown`] stopped it (or when aborted).
    pub served: tokio::task::JoinHandle<()>,
    /// The S3 API's address, when it has one ([`NodeOptions::s3`]).
    pub s3_addr: Option<std::net::SocketAddr>,
    /// The S3 API's connection loop; stopped with the other.
    s3_served: Option<tokio::task::JoinHandle<()>>,
    /// The process's coordinator (the public API's, the S3 API's): this
    /// node's own replicas called directly, the others over the node
    /// protocol.
    pub coordinator: Arc<strata_client::Client>,
    /// Set to stop the HTTP listener ([`Running::shutdown`]).
    stop_http: tokio::sync::watch::Sender<bool>,
}

/// What [`Running::shutdown`] did.
#[derive(Debug, Default)]
pub struct Shutdown {
    /// Workers that had not reached a safe point by the deadline (their
    /// tasks were dropped; their work is redone at the next start).
    pub late_workers: Vec<&'static str>,
    /// Row stores whose checkpoints could not be written (the next open
    /// scans them; nothing is lost).
    pub checkpoint_errors: Vec<String>,
}

impl Running {
    /// Stops the node cleanly within `deadline`: the listener stops
    /// accepting and the requests in flight are answered (up to
    /// [`strata_http::conns::DRAIN`]); every background worker stops at its
    /// next safe point; the tier mover ends its pass; every open row store
    /// writes its checkpoints. Everything acknowledged was durable already
    /// (a write is answered after its fsync); this only makes the next
    /// start fast and leaves no pass half done.
    pub async fn shutdown(self, deadline: Duration) -> Shutdown {
        let until = std::time::Instant::now() + deadline;
        let _ = self.stop_http.send(true);
        let s3 = async {
            if let Some(h) = self.s3_served {
                let _ = h.await;
            }
        };
        let _ = tokio::time::timeout(deadline, async {
            let _ = tokio::join!(self.served, s3);
        })
        .await;
        let mut out = Shutdown {
            late_workers: self
                .node
                .workers
                .stop(until.saturating_duration_since(std::time::Instant::now()))
                .await,
            ..Shutdown::default()
        };
        let node = self.node.clone();
        let errors = tokio::task::spawn_blocking(move || {
            let mut errors = Vec::new();
            for s in node.stores.iter().flatten().flat_map(|s| s.opened()) {
                if let Err(e) = s.checkpoint() {
                    errors.push(e.to_string());
                }
            }
            errors
        });
        let left = until.saturating_duration_since(std::time::Instant::now());
        match tokio::time::timeout(left, errors).await {
            Ok(Ok(e)) => out.checkpoint_errors = e,
            Ok(Err(e)) => out.checkpoint_errors.push(e.to_string()),
            Err(_) => out
                .checkpoint_errors
                .push("the checkpoints were not written by the deadline".into()),
        }
        out
    }
}

/// Starts a node: binds `listen`, registers with the metadata service,
/// starts the background loops and the HTTP loop, and returns once it
/// serves.
pub async fn start(opts: NodeOptions) -> Result<Running, ClusterError> {
    if opts.devices.is_empty() {
        return Err(ClusterError::Io {
            path: "device list".into(),
            source: std::io::Error::other("no device directories: give --data, --flash or --disk"),
        });
    }
    let listener = tokio::net::TcpListener::bind(&opts.listen)
        .await
        .map_err(|source| ClusterError::Io {
            path: format!("listen address {}", opts.listen),
            source,
        })?;
    let bound = listener
        .local_addr()
        .map_err(|source| ClusterError::Io {
            path: opts.listen.clone(),
            source,
        })?
        .to_string();
    // Signed cluster requests name this node as the map does (its
    // advertised address) or as it is bound; others are refused.
    strata_meta::cluster_auth::answer_as(&bound);
    if let Some(a) = &opts.advertise {
        strata_meta::cluster_auth::answer_as(a);
    }
    let node = ClusterNode::open(opts, bound)?;
    // Wait for the metadata service (it may start after the nodes).
    let mut tries = 0;
    loop {
        match node.register().await {
            Ok(()) => break,
            Err(e @ ClusterError::Refused(_)) => return Err(e),
            Err(e) if tries < 300 => {
                if tries % 25 == 0 {
                    eprintln!("strata server: waiting for the metadata service: {e}");
                }
                tries += 1;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e),
        }
    }
    if let Some((n, ids)) = node.disk_ids() {
        let devs: Vec<String> = ids
            .iter()
            .zip(&node.opts.devices)
            .map(|(id, d)| {
                let tier = format!("{:?}", d.tier).to_lowercase();
                format!("{id} {tier} {}", d.path.display())
            })
            .collect();
        eprintln!(
            "strata server: node {n} serving at {} in the cluster of {} (devices: {})",
            node.addr,
            node.opts.meta,
            devs.join(", ")
        );
    }
    // The listing index routes are node protocol routes: the gateway and
    // the S3 coordinator reach them in-process on their own node too.
    // A damaged index file does not keep the node down: it is
    // quarantined and a fresh one serves (the objects are untouched).
    let (index, moved) = crate::index::ListingIndex::open_or_quarantine(
        &node.opts.data.join("listing.redb"),
        &node.opts.data.join("quarantine"),
    )?;
    if let Some(to) = moved {
        eprintln!(
            "strata server: the listing index {} is corrupt: moved to {}; a new index is being \
             rebuilt (from the other replicas of its rows, or from the objects' head records \
             in a cluster of one); until it is, listings are served by other replicas \
             (objects are not affected)",
            node.opts.data.join("listing.redb").display(),
            to.display()
        );
    }
    let index = Arc::new(index);
    let _ = node.index.set(index.clone());
    let w = &node.workers;
    if index.rebuilding() {
        let n = node.clone();
        w.spawn(
            "index-rebuild",
            "rebuilds the listing index from the rows",
            |ctx| crate::recovery::rebuild_index(n, ctx),
        );
    }
    let n = node.clone();
    w.spawn(
        "heartbeat",
        "reports to the metadata service, takes the table",
        |ctx| n.heartbeat_loop(Duration::from_millis(500), ctx),
    );
    let n = node.clone();
    w.spawn(
        "reserve",
        "refills the space kept back for deletes",
        |ctx| refill_reserves(n, ctx),
    );
    let n = node.clone();
    w.spawn(
        "recovery",
        "copies the rows the table gives this node",
        |ctx| crate::recovery::run(n, ctx),
    );
    let n = node.clone();
    w.spawn(
        "erasure-coding",
        "installs, encodes, rebuilds and scrubs stripes",
        |ctx| crate::ec::run(n, ctx),
    );
    if let Some(every) = node.opts.scrub_interval {
        let n = node.clone();
        w.spawn(
            "scrub",
            "compares the replicas of each row, repairs",
            move |ctx| crate::scrub::run(n, every, ctx),
        );
    }
    let n = node.clone();
    w.spawn(
        "catch-up",
        "brings copies that may lack records up to date",
        |ctx| crate::scrub::catch_up(n, ctx),
    );
    // Without a flash tier the mover only keeps the gauges and the
    // recently-written sets (RAM cache admission).
    let n = node.clone();
    w.thread(
        "tier-mover",
        "moves segments between flash and disk by the plan",
        move |mut ctx| {
            let mut st = strata_node::mover::MoverState::new();
            while ctx.sleep(strata_node::mover::Tiered::settings(n.as_ref()).interval) {
                strata_node::mover::pass(n.as_ref(), &mut st);
            }
        },
    )
    .map_err(|source| ClusterError::Io {
        path: "tier mover thread".into(),
        source,
    })?;
    w.limit("tier-mover", node.opts.mover_bytes_per_sec);
    if let Some(r) = node.opts.recovery_bytes_per_sec {
        w.limit("recovery", r);
    }
    w.limit("scrub", node.opts.scrub_bytes_per_sec);
    w.limit("erasure-coding", node.opts.ec_rebuild_bytes_per_sec);
    watch_owned_loops(&node, &index);
    let coordinator = Arc::new(strata_client::Client::over(
        node.view.clone(),
        strata_client::ClientConfig::coordinator(),
        Some((
            node.addr.clone(),
            Arc::new(crate::local::LocalReplica {
                node: node.clone(),
                index: index.clone(),
            }) as Arc<dyn strata_client::Replica>,
        )),
    ));
    let protocol = crate::server::router(node.clone())
        .merge(crate::index::routes(index, node.clone()))
        .route_layer(axum::middleware::from_fn(crate::server::cluster_guard));
    // The one identity model of both APIs (and the write-intent resolver,
    // which native writes need as S3's do).
    let (native, jobs) = strata_s3::native::Native::new(
        coordinator.clone(),
        node.opts.root.clone(),
        node.opts.admin_token.clone(),
        node.opts.gateway.max_object_size,
        node.opts
            .s3
            .as_ref()
            .is_none_or(|s| s.options.listing_index),
        Some(node.opts.data.join("buckets.json")),
    );
    for job in jobs {
        spawn_job(&node.workers, job);
    }
    let gateway = Arc::new(crate::gateway::Gateway::new(
        node.opts.gateway.clone(),
        coordinator.clone(),
        native.clone(),
    ));
    let dash =
        strata_http::dashboard::Dashboard::new(crate::dashboard::ClusterSource(node.clone()));
    let sampled = dash.clone();
    w.thread(
        "dashboard",
        "samples the counters into the dashboard's history",
        move |mut ctx| {
            while ctx.sleep(strata_http::dashboard::SAMPLE_EVERY) {
                sampled.sample();
            }
        },
    )
    .map_err(|source| ClusterError::Io {
        path: "dashboard sampler thread".into(),
        source,
    })?;
    if node.opts.plan_path.is_some() {
        node.publish_plan_file()
            .await
            .map_err(|e| ClusterError::Meta {
                addr: node.opts.meta.clone(),
                reason: match e {
                    crate::admin::PlanError::Bad(m) | crate::admin::PlanError::Meta(m) => m,
                },
            })?;
        let n = node.clone();
        let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
            .map_err(|source| ClusterError::Io {
                path: "SIGHUP handler".into(),
                source,
            })?;
        tokio::spawn(async move {
            while hup.recv().await.is_some() {
                match n.publish_plan_file().await {
                    Ok(v) => eprintln!("strata server: tier plan version {v} loaded"),
                    Err(crate::admin::PlanError::Bad(m) | crate::admin::PlanError::Meta(m)) => {
                        eprintln!("strata server: tier plan not reloaded: {m}")
                    }
                }
            }
        });
    }
    let app = protocol
        .merge(crate::gateway::routes(gateway))
        .merge(crate::admin::routes(node.clone()))
        .merge(strata_http::dashboard::router(
            dash,
            strata_http::auth::AdminAuth::new(node.opts.admin_token.clone()),
        ));
    let app = app
        .fallback(|| async {
            strata_http::http::reason(
                axum::http::StatusCode::NOT_FOUND,
                "no such route: objects live at /{bucket}/{name}",
            )
        })
        .layer(axum::middleware::from_fn_with_state(
            node.metrics.clone(),
            crate::gateway::count,
        ));
    let http = node.opts.http;
    let (stop_http, mut stop) = tokio::sync::watch::channel(false);
    let s3 = match node.opts.s3.clone() {
        None => None,
        Some(S3Listen { options, tls }) => {
            let listen = options.listen.clone();
            let bad = |reason: String| ClusterError::S3 {
                listen: listen.clone(),
                reason,
            };
            let bound = strata_s3::serve(options, &native)
                .await
                .map_err(|e| bad(e.to_string()))?;
            let addr = bound.local_addr().map_err(|e| bad(e.to_string()))?;
            let (listener, service, jobs) = bound.into_parts();
            for job in jobs {
                spawn_job(&node.workers, job);
            }
            let mut stop = stop_http.subscribe();
            let served = tokio::spawn(strata_http::conns::serve_tls(
                listener,
                http,
                service,
                tls,
                None,
                async move {
                    let _ = stop.wait_for(|s| *s).await;
                },
            ));
            Some((addr, served))
        }
    };
    // The cluster's own nodes and its metadata service hold no client
    // share of the node port (they may all sit in one network).
    let peers = cluster_peers(node.clone());
    let served = tokio::spawn(async move {
        let stopped = async move {
            let _ = stop.wait_for(|s| *s).await;
        };
        strata_http::conns::serve_tls(
            listener,
            http,
            strata_http::conns::router_service(app),
            None,
            Some(peers),
            stopped,
        )
        .await;
    });
    let (s3_addr, s3_served) = match s3 {
        Some((a, h)) => (Some(a), Some(h)),
        None => (None, None),
    };
    Ok(Running {
        addr: node.addr.clone(),
        node,
        served,
        s3_addr,
        s3_served,
        coordinator,
        stop_http,
    })
}

/// Lists the loops the node's libraries keep in what they own beside the
/// workers (they stop when their owner closes): the listing index's
/// committer, the row stores' group commit, the segment stores'
/// compaction and merges, and the trace writer.
fn watch_owned_loops(node: &Arc<ClusterNode>, index: &Arc<crate::index::ListingIndex>) {
    use crate::workers::Probe;
    use std::sync::atomic::Ordering::Relaxed;
    let w = &node.workers;
    let idx = index.clone();
    w.watch(
        "index-commit",
        "group-commits listing changes (log, redb, checkpoints)",
        move || {
            let s = idx.commit_stats();
            Probe {
                passes: s.groups.load(Relaxed),
                errors: s.failures.load(Relaxed),
                last_error: s.last_error.lock().ok().and_then(|g| g.clone()),
            }
        },
    );
    let m = node.metrics.clone();
    w.watch(
        "row-writers",
        "group-commit record writes, one thread per row",
        move || Probe {
            passes: m.commit_batches.load(Relaxed),
            ..Probe::default()
        },
    );
    let stores: Vec<_> = node.stores.iter().flatten().cloned().collect();
    let counters = move || {
        stores
            .iter()
            .flat_map(|rs| rs.opened())
            .flat_map(|r| r.parts())
            .map(|(_, s)| s.counters())
            .collect::<Vec<_>>()
    };
    let c = counters.clone();
    w.watch(
        "store-compaction",
        "rewrites segments past the garbage ratio, each store's own thread",
        move || Probe {
            passes: c().iter().map(|c| c.compactions).sum(),
            ..Probe::default()
        },
    );
    w.watch(
        "store-merge",
        "merges each store's recent map into its sorted index",
        move || Probe {
            passes: counters().iter().map(|c| c.merges).sum(),
            ..Probe::default()
        },
    );
    if node.tracer.is_some() {
        let m = node.metrics.clone();
        w.watch(
            "trace-writer",
            "writes the sampled request traces, rotating files",
            move || Probe {
                passes: m.trace_files.load(Relaxed),
                ..Probe::default()
            },
        );
    }
}

/// Runs an S3 job as a worker: its first pass after its first wait, then
/// one every `every`, until the runner stops.
fn spawn_job(workers: &crate::workers::Workers, job: strata_s3::jobs::Job) {
    let strata_s3::jobs::Job {
        name,
        what,
        first_after,
        every,
        mut pass,
    } = job;
    workers.spawn(name, what, move |mut ctx| async move {
        let mut wait = first_after;
        while ctx.sleep(wait).await {
            wait = every;
            match pass().await {
                Ok(Some(done)) => eprintln!("strata: {done}"),
                Ok(None) => {}
                Err(e) => {
                    eprintln!("strata: {e}");
                    ctx.failed(e);
                }
            }
        }
    });
}

/// Starts the embedded metadata service of a cluster of one (state in
/// `dir`, one replica per row, the table built at the first registration;
/// no health checker: a cluster of one has no other node to recover to)
/// on `listen`, with the S3 key routes behind `admin_token`; returns its
/// address.
pub async fn embedded_meta(
    dir: &Path,
    listen: &str,
    admin_token: Option<String>,
) -> Result<String, ClusterError> {
    use strata_meta::backend::{Backend, FileBackend};
    let meta_err = |reason: String| ClusterError::Meta {
        addr: format!("embedded ({})", dir.display()),
        reason,
    };
    let backend = Backend::File(FileBackend::new(dir).map_err(|e| meta_err(e.to_string()))?);
    let config = strata_meta::state::ClusterConfig {
        replication: 1,
        initial_nodes: 1,
        ..strata_meta::state::ClusterConfig::default()
    };
    let svc = strata_meta::MetaService::open(backend, config, strata_meta::HealthConfig::default())
        .await
        .map_err(|e| meta_err(e.to_string()))?;
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| ClusterError::Io {
            path: format!("metadata listen address {listen}"),
            source,
        })?;
    let addr = listener
        .local_addr()
        .map_err(|source| ClusterError::Io {
            path: listen.to_string(),
            source,
        })?
        .to_string();
    strata_meta::cluster_auth::answer_as(&addr);
    tokio::spawn(strata_http::http::serve_router(
        strata_meta::http::router_with_keys(
            svc,
            admin_token,
            strata_meta::cluster_auth::process_secret(),
        ),
        listener,
        strata_http::HttpLimits::default(),
        std::future::pending(),
    ));
    Ok(addr)
}

/// Whether an address is one of the cluster's: a node of the current map
/// or the metadata service (addresses given as IP:PORT; a host name is not
/// resolved here, and its connections count as a client's). The set is
/// made again when the map changes.
fn cluster_peers(node: Arc<ClusterNode>) -> strata_http::conns::Exempt {
    type Seen = Option<(Arc<strata_client::Placement>, HashSet<std::net::IpAddr>)>;
    let meta: Option<std::net::IpAddr> = node
        .opts
        .meta
        .parse::<std::net::SocketAddr>()
        .ok()
        .map(|a| a.ip());
    let seen: std::sync::Mutex<Seen> = std::sync::Mutex::new(None);
    Arc::new(move |ip| {
        if meta == Some(ip) {
            return true;
        }
        let Some(map) = node.map() else {
            return false;
        };
        let mut g = seen.lock().unwrap_or_else(|e| e.into_inner());
        match g.as_ref() {
            Some((m, set)) if Arc::ptr_eq(m, &map) => set.contains(&ip),
            _ => {
                let set: HashSet<std::net::IpAddr> = map
                    .addr_of_disk
                    .values()
                    .filter_map(|a| a.parse::<std::net::SocketAddr>().ok())
                    .map(|a| a.ip())
                    .collect();
                let hit = set.contains(&ip);
                *g = Some((map, set));
                hit
            }
        }
    })
}
