//! The running service: state behind a lock, persisted before every
//! acknowledged change, heartbeats in memory, and the health checker.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::rt::TokioExecutor;
use strata_placement::NodeId;
use tokio::sync::Mutex;

use crate::api::{
    HeartbeatRequest, HeartbeatResponse, NodeState, RegisterRequest, RegisterResponse, Status,
};
use crate::backend::Backend;
use crate::state::{ClusterConfig, ClusterState};
use crate::MetaError;

/// Timing of heartbeats and health checks.
#[derive(Clone, Debug)]
pub struct HealthConfig {
    /// How often nodes send heartbeats.
    pub heartbeat: Duration,
    /// A node silent for this long is probed.
    pub suspect_after: Duration,
    /// Consecutive failed probes before a silent node is declared dead.
    pub strikes: u32,
    /// How often the checker runs.
    pub check_every: Duration,
    /// Timeout of one probe.
    pub probe_timeout: Duration,
}

impl Default for HealthConfig {
    fn default() -> Self {
        HealthConfig {
            heartbeat: Duration::from_millis(500),
            suspect_after: Duration::from_secs(3),
            strikes: 2,
            check_every: Duration::from_millis(500),
            probe_timeout: Duration::from_secs(1),
        }
    }
}

struct Inner {
    state: ClusterState,
    backend: Backend,
    last_seen: HashMap<NodeId, Instant>,
    strikes: HashMap<NodeId, u32>,
    /// Each node's last reported byte counts (in memory, as heartbeats).
    bytes: HashMap<NodeId, crate::api::NodeBytes>,
}

/// The metadata service.
pub struct MetaService {
    inner: Mutex<Inner>,
    health: HealthConfig,
    started: Instant,
    backend_name: String,
}

pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl MetaService {
    /// Opens the service on `backend`: loads the saved state, or starts an
    /// empty cluster with `config` (a saved state keeps its own config).
    pub async fn open(
        mut backend: Backend,
        config: ClusterConfig,
        health: HealthConfig,
    ) -> Result<Arc<MetaService>, MetaError> {
        let state = match backend.load().await? {
            Some(s) => s,
            None => {
                let s = ClusterState::new(config);
                backend.save(None, &s).await?;
                s
            }
        };
        let backend_name = backend.describe();
        Ok(Arc::new(MetaService {
            inner: Mutex::new(Inner {
                state,
                backend,
                last_seen: HashMap::new(),
                strikes: HashMap::new(),
                bytes: HashMap::new(),
            }),
            health,
            started: Instant::now(),
            backend_name,
        }))
    }

    /// Applies `f` to a copy of the state, persists the copy, and only then
    /// makes it current: a change is acknowledged only once it is durable.
    async fn mutate<T>(
        &self,
        f: impl FnOnce(&mut ClusterState) -> Result<T, MetaError>,
    ) -> Result<T, MetaError> {
        let mut g = self.inner.lock().await;
        let mut next = g.state.clone();
        let out = f(&mut next)?;
        if next != g.state {
            let g = &mut *g;
            match g.backend.save(Some(&g.state), &next).await {
                Ok(()) => g.state = next,
                Err(MetaError::Conflict) => {
                    if let Ok(Some(s)) = g.backend.load().await {
                        g.state = s;
                    }
                    return Err(MetaError::Conflict);
                }
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// A copy of the current state.
    pub async fn state(&self) -> ClusterState {
        self.inner.lock().await.state.clone()
    }

    /// `POST /v1/register`.
    pub async fn register(&self, req: RegisterRequest) -> Result<RegisterResponse, MetaError> {
        let mut resp = self.mutate(|s| s.register(&req, now_ms())).await?;
        resp.heartbeat_ms = self.health.heartbeat.as_millis() as u64;
        let mut g = self.inner.lock().await;
        g.last_seen.insert(resp.node_id, Instant::now());
        g.strikes.remove(&resp.node_id);
        Ok(resp)
    }

    /// `POST /v1/heartbeat`.
    pub async fn heartbeat(&self, req: HeartbeatRequest) -> Result<HeartbeatResponse, MetaError> {
        {
            let mut g = self.inner.lock().await;
            let Some(n) = g.state.nodes.get(&req.node_id.0) else {
                return Err(MetaError::UnknownNode(req.node_id));
            };
            let given = req.node_key.as_deref();
            if !n.proves(given) {
                return Err(n.refusal(given, "a heartbeat"));
            }
            // A node speaks for its own disks only.
            let targets: Vec<_> = req.completed.iter().map(|t| t.target).collect();
            for (what, disks) in [("failed", &req.failed_disks), ("copied to", &targets)] {
                if let Some(d) = g.state.foreign_disk(req.node_id, disks) {
                    return Err(MetaError::BadRequest(format!(
                        "node {} reported disk {d} as {what}, which is not one of its disks: a node reports its own disks only",
                        req.node_id
                    )));
                }
            }
            g.last_seen.insert(req.node_id, Instant::now());
            g.strikes.remove(&req.node_id);
            if let Some(b) = req.bytes {
                g.bytes.insert(req.node_id, b);
            }
        }
        if !req.completed.is_empty() || !req.failed_disks.is_empty() || req.scrub.is_some() {
            self.mutate(|s| {
                let now = now_ms();
                if !req.completed.is_empty() {
                    s.complete(&req.completed, req.recovery_bytes, now);
                }
                if let Some(r) = &req.scrub {
                    s.scrub.insert(req.node_id.0, r.clone());
                }
                s.fail_disks(&req.failed_disks, now)
            })
            .await?;
        }
        let g = self.inner.lock().await;
        let node = g.state.nodes.get(&req.node_id.0);
        let member = node.is_some_and(|n| {
            matches!(
                n.state,
                NodeState::Up | NodeState::Pending | NodeState::Removed
            )
        });
        Ok(HeartbeatResponse {
            table_version: g.state.table_version(),
            member,
            plan_version: g.state.tier_plan_version,
            rows_in_recovery: g.state.rows_in_recovery(),
            addresses: g.state.addresses_fingerprint(),
        })
    }

    /// `GET /v1/status`.
    pub async fn status(&self) -> Status {
        let g = self.inner.lock().await;
        let now = Instant::now();
        let seen = |n: NodeId| {
            g.last_seen
                .get(&n)
                .map(|t| now.duration_since(*t).as_millis() as u64)
        };
        let mut st = g.state.status(now_ms(), &seen, self.backend_name.clone());
        // Only members' counts: a dead node's disks hold nothing served.
        for (n, b) in &g.bytes {
            let up = g
                .state
                .nodes
                .get(&n.0)
                .is_some_and(|r| r.state == NodeState::Up);
            if up {
                st.stored_bytes += b.stored;
                st.logical_bytes += b.logical;
            }
        }
        st
    }

    /// Sets the erasure code (`strata meta --ec`, applied at every start:
    /// turning it off or changing it leaves existing stripes readable).
    pub async fn set_ec(&self, ec: Option<crate::api::EcConfig>) -> Result<(), MetaError> {
        self.mutate(|s| {
            s.config.ec = ec;
            Ok(())
        })
        .await
    }

    /// `POST /v1/ec/allocate`.
    pub async fn allocate_stripe(&self) -> Result<crate::api::StripeAllocation, MetaError> {
        self.mutate(|s| {
            let (id, ec, disks) = s.allocate_stripe()?;
            Ok(crate::api::StripeAllocation {
                id,
                k: ec.k,
                m: ec.m,
                disks,
            })
        })
        .await
    }

    /// `POST /v1/ec/stripes`: records a stripe whose shards are durable.
    pub async fn commit_stripe(&self, rec: crate::api::StripeRecord) -> Result<(), MetaError> {
        let rec = crate::api::StripeRecord {
            created_ms: now_ms(),
            ..rec
        };
        self.mutate(|s| s.commit_stripe(rec)).await
    }

    /// `POST /v1/ec/stripes/{id}/shard`.
    pub async fn move_shard(&self, id: u64, mv: crate::api::ShardMove) -> Result<(), MetaError> {
        self.mutate(|s| s.move_shard(id, mv.index, mv.disk)).await
    }

    /// `DELETE /v1/ec/stripes/{id}`.
    pub async fn drop_stripe(&self, id: u64) -> Result<bool, MetaError> {
        self.mutate(|s| Ok(s.drop_stripe(id))).await
    }

    /// `GET /v1/ec`.
    pub async fn ec_view(&self) -> crate::api::EcView {
        let g = self.inner.lock().await;
        crate::api::EcView {
            ec: g.state.config.ec,
            stripes: g.state.stripes.values().cloned().collect(),
            next_stripe: g.state.next_stripe,
        }
    }

    /// `cluster add-node`.
    pub async fn add_node(&self, node: NodeId) -> Result<(u64, usize), MetaError> {
        self.mutate(|s| {
            s.add_node(node, now_ms())?;
            Ok((s.table_version(), s.recovery.transfers.len()))
        })
        .await
    }

    /// `cluster remove-node`.
    pub async fn remove_node(&self, node: NodeId) -> Result<(u64, usize), MetaError> {
        self.mutate(|s| {
            s.remove_node(node, now_ms())?;
            Ok((s.table_version(), s.recovery.transfers.len()))
        })
        .await
    }

    /// Stores the lab's tier plan (a new plan version); returns the version.
    pub async fn set_tier_plan(&self, plan: serde_json::Value) -> Result<u64, MetaError> {
        let parsed: strata_plan::TierPlan = serde_json::from_value(plan.clone()).map_err(|e| {
            MetaError::BadRequest(format!(
                "not a tier plan (strata provision --plan writes one): {e}"
            ))
        })?;
        parsed
            .validate()
            .map_err(|e| MetaError::BadRequest(format!("bad tier plan: {e}")))?;
        self.mutate(|s| {
            s.tier_plan = Some(plan);
            s.tier_plan_version += 1;
            Ok(s.tier_plan_version)
        })
        .await
    }

    /// Drops the tier plan (the default plan is in force; a new version).
    pub async fn clear_tier_plan(&self) -> Result<u64, MetaError> {
        self.mutate(|s| {
            s.tier_plan = None;
            s.tier_plan_version += 1;
            Ok(s.tier_plan_version)
        })
        .await
    }

    /// Creates S3 bucket `name`; returns whether it is new (false: it
    /// existed already).
    pub async fn create_bucket(&self, name: &str) -> Result<bool, MetaError> {
        if !crate::api::valid_bucket_name(name) {
            return Err(MetaError::BadRequest(format!(
                "bad bucket name {name:?}: 3 to 63 lowercase letters, digits, '.' and '-', \
                 starting and ending with a letter or digit"
            )));
        }
        if self.state().await.buckets.contains_key(name) {
            return Ok(false);
        }
        self.mutate(|s| {
            let new = !s.buckets.contains_key(name);
            s.buckets
                .entry(name.to_string())
                .or_insert(crate::state::BucketRecord {
                    created_ms: now_ms(),
                    public_read: false,
                });
            Ok(new)
        })
        .await
    }

    /// Makes S3 bucket `name` readable without a key (`public`) or not;
    /// returns whether the bucket exists.
    pub async fn set_bucket_public(&self, name: &str, public: bool) -> Result<bool, MetaError> {
        if !self.state().await.buckets.contains_key(name) {
            return Ok(false);
        }
        self.mutate(|s| {
            Ok(match s.buckets.get_mut(name) {
                Some(b) => {
                    b.public_read = public;
                    true
                }
                None => false,
            })
        })
        .await
    }

    /// Forgets S3 bucket `name`; returns whether it existed. The caller
    /// (the S3 coordinator) checks that it is empty first.
    pub async fn delete_bucket(&self, name: &str) -> Result<bool, MetaError> {
        if !self.state().await.buckets.contains_key(name) {
            return Ok(false);
        }
        self.mutate(|s| Ok(s.buckets.remove(name).is_some())).await
    }

    /// Creates an S3 access key with `buckets`' permissions; returns its
    /// access key id and secret.
    pub async fn create_key(
        &self,
        buckets: std::collections::BTreeMap<String, crate::state::Permission>,
    ) -> Result<(String, String), MetaError> {
        use rand::Rng;
        const UPPER: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
        const ANY: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let pick = |set: &[u8], n: usize| -> String {
            let mut r = rand::rng();
            (0..n)
                .map(|_| set[r.random_range(0..set.len())] as char)
                .collect()
        };
        let access = format!("SK{}", pick(UPPER, 18));
        let secret = pick(ANY, 40);
        let (a, sec) = (access.clone(), secret.clone());
        self.mutate(move |s| {
            s.keys.insert(
                a,
                crate::state::KeyRecord {
                    secret: sec,
                    created_ms: now_ms(),
                    buckets,
                },
            );
            Ok(())
        })
        .await?;
        Ok((access, secret))
    }

    /// Deletes S3 access key `access`; returns whether it existed.
    pub async fn delete_key(&self, access: &str) -> Result<bool, MetaError> {
        if !self.state().await.keys.contains_key(access) {
            return Ok(false);
        }
        self.mutate(|s| Ok(s.keys.remove(access).is_some())).await
    }

    /// Runs the health checker (Haystack's pitchfork) until the task is
    /// dropped: a node silent for `suspect_after` is probed over HTTP
    /// (`GET /cluster/v1/health`, which checks its disks); after `strikes`
    /// failed probes in a row it is declared dead, which publishes a new
    /// table version with its disks replaced and plans the recovery.
    pub async fn run_health_checker(self: Arc<Self>) {
        let http: HttpClient<_, Empty<Bytes>> =
            HttpClient::builder(TokioExecutor::new()).build_http();
        let mut tick = tokio::time::interval(self.health.check_every);
        loop {
            tick.tick().await;
            let suspects: Vec<(NodeId, String)> = {
                let g = self.inner.lock().await;
                let now = Instant::now();
                g.state
                    .nodes
                    .values()
                    .filter(|n| n.state == NodeState::Up)
                    .filter(|n| {
                        let last = g.last_seen.get(&n.id).copied().unwrap_or(self.started);
                        now.duration_since(last) > self.health.suspect_after
                    })
                    .map(|n| (n.id, n.addr.clone()))
                    .collect()
            };
            for (id, addr) in suspects {
                let ok = probe(&http, &addr, self.health.probe_timeout).await;
                let dead = {
                    let mut g = self.inner.lock().await;
                    if ok {
                        g.strikes.remove(&id);
                        false
                    } else {
                        let s = g.strikes.entry(id).or_default();
                        *s += 1;
                        *s >= self.health.strikes
                    }
                };
                if dead {
                    if let Err(e) = self.mutate(|s| s.declare_dead(id, now_ms())).await {
                        eprintln!("strata meta: could not declare node {id} dead: {e}");
                    } else {
                        eprintln!("strata meta: node {id} at {addr} declared dead; its rows are being re-replicated");
                    }
                }
            }
        }
    }
}

async fn probe(
    http: &HttpClient<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>,
    addr: &str,
    timeout: Duration,
) -> bool {
    let Ok(uri) = format!("http://{addr}/cluster/v1/health").parse::<hyper::Uri>() else {
        return false;
    };
    match tokio::time::timeout(timeout, http.get(uri)).await {
        Ok(Ok(resp)) => resp.status().is_success(),
        _ => false,
    }
}
