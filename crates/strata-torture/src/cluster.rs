//! Trials against a loopback cluster: `strata meta` and N `strata server
//! --meta` processes, each behind two fault-injecting proxies: the one it
//! advertises (every other node and the metadata service reach it there:
//! cutting it partitions the node from the cluster) and the one the
//! harness's clients use (cutting it partitions the clients from it).

use crate::damage::{burst_at_tail, files, flip_bit, Flip};
use crate::load::{self, Load, Mix, Model, Targets};
use crate::procs::{cut_summary, Meta, Power, Server};
use crate::proxy::{Mode, Proxy};
use crate::trial::{Ctx, Trial};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

pub struct Node {
    pub server: Server,
    pub peer: Proxy,
    pub client: Proxy,
    pub up: bool,
    /// Its S3 listener, when started with [`S3_LISTEN`].
    pub s3: Option<String>,
}

/// A node flag of [`Cluster::start_with`]: `--s3-listen` on a free port.
pub const S3_LISTEN: &str = "--s3-listen=auto";

pub struct Cluster {
    pub meta: Meta,
    pub nodes: Vec<Node>,
    pub targets: Targets,
    pub env: crate::procs::Env,
}

/// Starts node `i` of a cluster behind its two proxies, with the server
/// flags `extra` (a `--segment-size` there replaces the default 256 KiB).
fn start_node(
    ctx: &Ctx,
    dir: &Path,
    i: usize,
    meta: &str,
    extra: &[&str],
    power: Option<Power>,
) -> anyhow::Result<Node> {
    let port = crate::procs::listen_port()?;
    let listen = format!("127.0.0.1:{port}");
    let peer = Proxy::start(&listen)?;
    let client = Proxy::start(&listen)?;
    let data = dir.join(format!("node{i}"));
    let args: Vec<OsString> = vec![
        "--meta".into(),
        meta.into(),
        "--listen".into(),
        listen.into(),
        "--advertise".into(),
        peer.addr.clone().into(),
        "--data".into(),
        data.clone().into(),
        "--disk".into(),
        data.join("disk").into(),
        "--threads".into(),
        "2".into(),
        "--ram-cache".into(),
        "0".into(),
    ];
    let mut args = args;
    if !extra.contains(&"--segment-size") {
        args.extend(["--segment-size".into(), "256KiB".into()]);
    }
    let mut s3 = None;
    for a in extra {
        if *a == S3_LISTEN {
            let addr = format!("127.0.0.1:{}", crate::procs::listen_port()?);
            args.extend(["--s3-listen".into(), addr.clone().into()]);
            s3 = Some(addr);
        } else {
            args.push(a.into());
        }
    }
    if let Some(p) = &power {
        // The model's root must exist before the process starts.
        std::fs::create_dir_all(&p.root)?;
    }
    let server = Server::start_powered(&ctx.env, args, &dir.join(format!("node{i}.log")), power)?;
    Ok(Node {
        server,
        peer,
        client,
        up: true,
        s3,
    })
}

impl Cluster {
    pub fn start(ctx: &Ctx, dir: &Path, tract_size: &str) -> anyhow::Result<Cluster> {
        Self::start_with(ctx, dir, ctx.nodes, &["--tract-size", tract_size], &[])
    }

    /// A cluster of `n` nodes; `meta_extra`: more `strata meta` flags,
    /// `node_extra`: more `strata server` flags.
    pub fn start_with(
        ctx: &Ctx,
        dir: &Path,
        n: usize,
        meta_extra: &[&str],
        node_extra: &[&str],
    ) -> anyhow::Result<Cluster> {
        Self::start_powered(ctx, dir, n, meta_extra, node_extra, &|_, _| None)
    }

    /// [`Cluster::start_with`], each process over the power-loss model
    /// that `power` gives it (called with "meta" or "node{i}" and its data
    /// directory; None: not over the model). A flag of the metadata
    /// service's defaults (--suspect-after, --strikes, --replication)
    /// given in `meta_extra` replaces the default.
    pub fn start_powered(
        ctx: &Ctx,
        dir: &Path,
        n: usize,
        meta_extra: &[&str],
        node_extra: &[&str],
        power: &(dyn Fn(&str, &Path) -> Option<Power> + Sync),
    ) -> anyhow::Result<Cluster> {
        let initial = n.to_string();
        let mut meta_args: Vec<&str> = Vec::new();
        for (flag, value) in [
            ("--initial-nodes", initial.as_str()),
            ("--replication", "3"),
            ("--suspect-after", "1"),
            ("--strikes", "2"),
        ] {
            if !meta_extra.contains(&flag) {
                meta_args.extend([flag, value]);
            }
        }
        meta_args.extend_from_slice(meta_extra);
        let meta_dir = dir.join("meta");
        let meta_power = power("meta", &meta_dir);
        if meta_power.is_some() {
            std::fs::create_dir_all(&meta_dir)?;
        }
        let meta = Meta::start_powered(
            &ctx.env,
            &meta_args,
            &meta_dir,
            &dir.join("meta.log"),
            meta_power,
        )?;
        // Every node at once: a member answers once the first table exists,
        // which needs all of them registered.
        let started: Vec<anyhow::Result<Node>> = std::thread::scope(|sc| {
            let hs: Vec<_> = (0..n)
                .map(|i| {
                    let meta = meta.addr.clone();
                    sc.spawn(move || -> anyhow::Result<Node> {
                        // A port found free may be taken before the node binds
                        // it: try another.
                        let mut last = None;
                        for _ in 0..3 {
                            let name = format!("node{i}");
                            let p = power(&name, &dir.join(&name));
                            match start_node(ctx, dir, i, &meta, node_extra, p) {
                                Ok(n) => return Ok(n),
                                Err(e) if format!("{e:#}").contains("Address already in use") => {
                                    last = Some(e)
                                }
                                Err(e) => return Err(e),
                            }
                        }
                        Err(last.unwrap_or_else(|| anyhow::anyhow!("node {i} did not start")))
                    })
                })
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("node start panicked")))
                })
                .collect()
        });
        let nodes = started.into_iter().collect::<anyhow::Result<Vec<Node>>>()?;
        let targets = Arc::new(RwLock::new(
            nodes.iter().map(|n| n.client.addr.clone()).collect(),
        ));
        let c = Cluster {
            meta,
            nodes,
            targets,
            env: ctx.env.clone(),
        };
        for n in &c.nodes {
            Server::wait_ready(&n.client.addr, Duration::from_secs(60))?;
        }
        Ok(c)
    }

    fn refresh_targets(&self) {
        let t: Vec<String> = self
            .nodes
            .iter()
            .filter(|n| n.up)
            .map(|n| n.client.addr.clone())
            .collect();
        *self.targets.write().unwrap_or_else(|e| e.into_inner()) = t;
    }

    pub fn kill(&mut self, i: usize) {
        self.nodes[i].server.kill9();
        self.nodes[i].up = false;
        self.refresh_targets();
    }

    pub fn restart(&mut self, t: &mut Trial, i: usize) -> bool {
        match self.nodes[i].server.restart() {
            Ok(()) => {
                self.nodes[i].up = true;
                self.refresh_targets();
                true
            }
            Err(e) => {
                t.fail(format!("node {i} did not come back: {e:#}"));
                false
            }
        }
    }

    /// Cuts the power of node `i` (it runs over the model with a trigger
    /// of its own) and marks it down: false, with a failure on `t`, when
    /// it did not stop with the power cut's status.
    pub fn power_cut(&mut self, t: &mut Trial, i: usize) -> bool {
        let r = self.nodes[i].server.power_cut(Duration::from_secs(30));
        self.nodes[i].up = false;
        self.refresh_targets();
        match r {
            Ok(()) => {
                t.power_cuts += 1;
                t.note(format!(
                    "node {i}'s power cut: {}",
                    cut_summary(self.nodes[i].server.log())
                        .unwrap_or_else(|| "no report in the log".into())
                ));
                true
            }
            Err(e) => {
                t.fail(format!("node {i}'s power cut: {e:#}"));
                false
            }
        }
    }

    /// The metadata service's status (`strata cluster status --json`):
    /// None when it does not answer.
    pub fn meta_status(&self) -> Option<serde_json::Value> {
        let out = self
            .env
            .command()
            .args(["cluster", "status", "--meta", &self.meta.addr, "--json"])
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        serde_json::from_slice(&out.stdout).ok()
    }

    /// The ids of the nodes the metadata service knows (`strata cluster
    /// status --json`), sorted; None when it does not answer.
    pub fn node_ids(&self) -> Option<Vec<u64>> {
        let s = self.meta_status()?;
        let mut ids: Vec<u64> = s["nodes"]
            .as_array()?
            .iter()
            .filter_map(|n| n["id"].as_u64())
            .collect();
        ids.sort_unstable();
        Some(ids)
    }

    /// Waits until every row is fully replicated again.
    pub fn settle(&self, t: &mut Trial, limit: Duration) {
        let out = self
            .env
            .command()
            .args(["cluster", "wait", "--meta", &self.meta.addr, "--timeout"])
            .arg(limit.as_secs().to_string())
            .output();
        match out {
            Ok(o) if o.status.success() => {}
            Ok(o) => t.fail(format!(
                "the cluster did not recover: {}",
                String::from_utf8_lossy(&o.stderr).trim()
            )),
            Err(e) => t.fail(format!("strata cluster wait: {e}")),
        }
    }
}

/// The common shape: load through every node, a fault, heal, settle,
/// verify through every node.
pub fn trial(ctx: &Ctx, t: &mut Trial, dir: &Path, fault: &str) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let multipart = fault == "multipart";
    let mut c = Cluster::start(ctx, dir, if multipart { "64KiB" } else { "8MiB" })?;
    let model = Arc::new(Model::default());
    let mut mix = Mix::new(4, 3, 1, 2, 2);
    if multipart {
        // Objects of 1 to 6 tracts, striped over consecutive rows.
        mix = Mix::new(4, 2, 1, 0, 2).sizes(40 << 10, 400 << 10);
    }
    let timeout = if fault == "partition-client" {
        Duration::from_secs(2)
    } else {
        Duration::from_secs(15)
    };
    let l = Load::start(
        model.clone(),
        c.targets.clone(),
        mix,
        ctx.workers,
        rng.random(),
        "",
        timeout,
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(200..1000)));
    let victim = rng.random_range(0..c.nodes.len());
    match fault {
        "cluster-kill" | "multipart" => {
            c.kill(victim);
            std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
            if !c.restart(t, victim) {
                l.finish();
                return t.absorb(&model, vec![]);
            }
            t.note(format!("node {victim} killed and restarted"));
        }
        "node-loss" => {
            c.kill(victim);
            // Through detection and recovery, under load.
            std::thread::sleep(Duration::from_millis(rng.random_range(2500..5000)));
            t.note(format!("node {victim} killed for good"));
        }
        "partition-nodes" => {
            let mode = if rng.random_bool(0.5) {
                Mode::Blackhole
            } else {
                Mode::Reset
            };
            c.nodes[victim].peer.set(mode);
            let ms = rng.random_range(300..4000);
            std::thread::sleep(Duration::from_millis(ms));
            c.nodes[victim].peer.set(Mode::Open);
            t.note(format!(
                "node {victim} cut from the cluster ({mode:?}) for {ms} ms"
            ));
        }
        "partition-client" => {
            let mode = if rng.random_bool(0.5) {
                Mode::Blackhole
            } else {
                Mode::Reset
            };
            c.nodes[victim].client.set(mode);
            let ms = rng.random_range(300..3000);
            std::thread::sleep(Duration::from_millis(ms));
            c.nodes[victim].client.set(Mode::Open);
            t.note(format!(
                "clients cut from node {victim} ({mode:?}) for {ms} ms"
            ));
        }
        other => anyhow::bail!("unknown cluster fault {other}"),
    }
    std::thread::sleep(Duration::from_millis(rng.random_range(200..800)));
    l.finish();
    c.settle(t, Duration::from_secs(90));
    let unreadable = load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
    t.absorb(&model, unreadable)
}

/// Power cuts of single nodes under load: every node runs over the
/// power-loss model of its data directory (a trigger of its own); 2 or 3
/// times a random node's power is cut and it is restarted 0-1.5 s later
/// (over a fresh model if it is cut again later, else without); then the
/// cluster settles and every key is read back (no GET may answer 500).
pub fn power(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let tear = crate::procs::tears(t.seed);
    let base: u64 = rng.random();
    let mut c = Cluster::start_powered(
        ctx,
        dir,
        ctx.nodes,
        &["--tract-size", "8MiB"],
        &[],
        &|name, root| {
            let i: u64 = name.trim_start_matches("node").parse().ok()?;
            Some(Power {
                root: root.to_path_buf(),
                trigger: dir.join(format!("power-cut-{name}")),
                seed: base.wrapping_add(i),
                tear,
            })
        },
    )?;
    let model = Arc::new(Model::default());
    model.strict_500.store(true, Ordering::Relaxed);
    let l = Load::start(
        model.clone(),
        c.targets.clone(),
        Mix::new(4, 3, 1, 2, 2),
        ctx.workers,
        rng.random(),
        "",
        Duration::from_secs(15),
    );
    let cuts = rng.random_range(2..=3);
    let plan = crate::procs::cut_plan(&mut rng, c.nodes.len(), cuts);
    for (round, &victim) in plan.iter().enumerate() {
        std::thread::sleep(Duration::from_millis(rng.random_range(200..1000)));
        if !c.power_cut(t, victim) {
            l.finish();
            return t.absorb(&model, vec![]);
        }
        std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
        if !crate::procs::cut_again(&plan, round) {
            c.nodes[victim].server.power = None;
        }
        if !c.restart(t, victim) {
            l.finish();
            return t.absorb(&model, vec![]);
        }
    }
    t.note(format!("nodes cut in turn: {plan:?}"));
    std::thread::sleep(Duration::from_millis(rng.random_range(200..800)));
    l.finish();
    c.settle(t, Duration::from_secs(90));
    let unreadable = load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
    t.absorb(&model, unreadable)
}

/// What a node's log says when it gave up its rows (it took itself, or
/// was taken, for a node declared dead) or was refused its identity.
const ROWS_DROPPED: [&str; 2] = ["dropping them", "gave this node a new identity"];

/// The whole cluster loses its power at once: the metadata service and
/// every node over the power-loss model, one trigger for all; every
/// process must stop with the power cut's status, and all are started
/// again (over fresh models before a later cut, without after the last).
/// 2 or 3 cuts under load; after each, every node must come back under
/// its own node id (the ids `strata cluster status --json` lists before
/// and after) and, at the end, no node's log may say it dropped its rows;
/// then the cluster settles and every key is read back.
pub fn power_all(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let tear = crate::procs::tears(t.seed);
    let base: u64 = rng.random();
    let trigger = dir.join("power-cut");
    let mut c = Cluster::start_powered(
        ctx,
        dir,
        ctx.nodes,
        // No node declared dead while the power is off (they come back
        // within seconds): this trial is about what the disks kept.
        &["--tract-size", "8MiB", "--suspect-after", "10"],
        &[],
        &|name, root| {
            let i: u64 = name.trim_start_matches("node").parse().unwrap_or(99);
            Some(Power {
                root: root.to_path_buf(),
                trigger: trigger.clone(),
                seed: base.wrapping_add(i),
                tear,
            })
        },
    )?;
    let Some(ids_before) = c.node_ids() else {
        anyhow::bail!("strata cluster status --json: no node ids");
    };
    if ids_before.len() != c.nodes.len() {
        anyhow::bail!(
            "the metadata service lists nodes {ids_before:?} for {} nodes",
            c.nodes.len()
        );
    }
    let model = Arc::new(Model::default());
    model.strict_500.store(true, Ordering::Relaxed);
    let cuts = rng.random_range(2..=3);
    let n = c.nodes.len();
    for round in 0..cuts {
        let l = Load::start(
            model.clone(),
            c.targets.clone(),
            Mix::new(4, 3, 1, 2, 2),
            ctx.workers,
            rng.random(),
            &format!("r{round}"),
            Duration::from_secs(15),
        );
        let ms = rng.random_range(300..1500);
        std::thread::sleep(Duration::from_millis(ms));
        Power::trigger(&trigger)?;
        let mut bad = Vec::new();
        if let Err(e) = c.meta.wait_power_off(Duration::from_secs(30)) {
            bad.push(format!("the metadata service: {e:#}"));
        }
        for (i, node) in c.nodes.iter_mut().enumerate() {
            if let Err(e) = node.server.wait_power_off(Duration::from_secs(30)) {
                bad.push(format!("node {i}: {e:#}"));
            }
            node.up = false;
        }
        c.refresh_targets();
        l.finish();
        c.meta.after_power_cut();
        for node in &mut c.nodes {
            node.server.after_power_cut();
        }
        if !bad.is_empty() {
            for b in bad {
                t.fail(format!(
                    "whole-cluster power cut {} of {cuts}: {b}",
                    round + 1
                ));
            }
            return t.absorb(&model, vec![]);
        }
        t.power_cuts += 1 + n as u64;
        let mut undone = vec![format!(
            "meta {}",
            cut_summary(c.meta.log()).unwrap_or_default()
        )];
        for (i, node) in c.nodes.iter().enumerate() {
            undone.push(format!(
                "node {i} {}",
                cut_summary(node.server.log()).unwrap_or_default()
            ));
        }
        t.note(format!(
            "whole-cluster cut {} after {ms} ms: {}",
            round + 1,
            undone.join("; ")
        ));
        let last = round + 1 == cuts;
        if last {
            c.meta.power = None;
            for node in &mut c.nodes {
                node.server.power = None;
            }
        }
        // The power back: the metadata service, then every node at once.
        if let Err(e) = c.meta.restart() {
            t.fail(format!(
                "the metadata service did not come back after cut {}: {e:#}",
                round + 1
            ));
            return t.absorb(&model, vec![]);
        }
        let started: Vec<anyhow::Result<()>> = std::thread::scope(|sc| {
            let hs: Vec<_> = c
                .nodes
                .iter_mut()
                .map(|node| sc.spawn(move || node.server.restart()))
                .collect();
            hs.into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a restart panicked")))
                })
                .collect()
        });
        let mut down = false;
        for (i, r) in started.into_iter().enumerate() {
            match r {
                Ok(()) => c.nodes[i].up = true,
                Err(e) => {
                    t.fail(format!(
                        "node {i} did not come back after cut {}: {e:#}",
                        round + 1
                    ));
                    down = true;
                }
            }
        }
        c.refresh_targets();
        if down {
            return t.absorb(&model, vec![]);
        }
        for (i, node) in c.nodes.iter().enumerate() {
            if let Err(e) = Server::wait_ready(&node.client.addr, Duration::from_secs(60)) {
                t.fail(format!(
                    "node {i} takes no write after cut {}: {e:#}",
                    round + 1
                ));
                return t.absorb(&model, vec![]);
            }
        }
        match c.node_ids() {
            Some(ids) if ids == ids_before => {}
            ids => t.fail(format!(
                "after whole-cluster cut {}, the nodes are {ids:?}, were {ids_before:?} \
                 (a node came back under another id)",
                round + 1
            )),
        }
        let unreadable = load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
        if !unreadable.is_empty() {
            t.note(format!("read back after whole-cluster cut {}", round + 1));
            return t.absorb(&model, unreadable);
        }
    }
    c.settle(t, Duration::from_secs(90));
    for i in 0..n {
        let log = dir.join(format!("node{i}.log"));
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        for l in text.lines() {
            if ROWS_DROPPED.iter().any(|w| l.contains(w)) {
                t.fail(format!(
                    "node {i}'s log: {}",
                    l.chars().take(400).collect::<String>()
                ));
                break;
            }
        }
    }
    let unreadable = load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
    t.absorb(&model, unreadable)
}

/// A GET of the node protocol at `addr`, signed with the cluster's
/// secret: the JSON it answers, or None.
pub fn signed_get(c: &Cluster, addr: &str, path: &str) -> Option<serde_json::Value> {
    use strata_meta::cluster_auth::{ClusterSecret, Signed, AUTH_HEADER};
    let secret = ClusterSecret::new(&c.env.cluster_secret).ok()?;
    let auth = secret.sign(
        &Signed {
            method: "GET",
            path,
            version: None,
            stamp: None,
            host: addr,
        },
        b"",
    );
    let r = crate::http::request(
        addr,
        "GET",
        path,
        &[(AUTH_HEADER, auth)],
        &[],
        Duration::from_secs(10),
    )
    .ok()?;
    (r.status == 200)
        .then(|| serde_json::from_slice(&r.body).ok())
        .flatten()
}

/// The rows whose replicas disagree: for each row of the current table,
/// every live replica's digest (`/cluster/v1/rows/R/digest`: record counts
/// and sums per hash range) compared, with the corrupt-needle count left
/// out (a damaged needle stays in its segment until a compaction; the
/// scrub writes a good copy after it). A replica that does not answer
/// counts as disagreeing.
fn rows_out_of_step(c: &Cluster) -> Result<Vec<String>, String> {
    let map: strata_meta::api::ClusterMap =
        serde_json::from_value(signed_get(c, &c.meta.addr, "/v1/map").ok_or("the map: no answer")?)
            .map_err(|e| format!("the map: {e}"))?;
    let table = map.table.as_ref().ok_or("the map has no table")?;
    let addr_of = |d: strata_placement::DiskId| -> Option<String> {
        let node = table.disk(d)?.node;
        map.nodes
            .iter()
            .find(|n| n.id == node)
            .map(|n| n.addr.clone())
    };
    let mut out = Vec::new();
    for row in 0..table.row_count() {
        let path = format!("/cluster/v1/rows/{row}/digest");
        let digests: Vec<Option<serde_json::Value>> = table
            .live_replicas(row)
            .into_iter()
            .map(|d| {
                let mut v = signed_get(c, &addr_of(d)?, &path)?;
                v["corrupt"] = serde_json::json!(0);
                Some(v)
            })
            .collect();
        if digests.iter().any(Option::is_none) || digests.windows(2).any(|w| w[0] != w[1]) {
            out.push(format!("row {row}"));
        }
    }
    Ok(out)
}

/// Bits flipped in a stopped cluster node's own files: 1 to 8 bits, each
/// in a random segment (past its superblock, or now and then in it) or
/// index checkpoint of the node's rows, no two in one file; in one trial
/// of three also 2 to 16 bytes under one segment's newest needles
/// ([`burst_at_tail`]), its checkpoint removed. Replication 3 keeps two good
/// copies of whatever a flip hits, so nothing may be lost: every key is
/// read back through the damaged node alone (its own copy fails its
/// checksum or is missing, and the read goes to another replica; a wrong
/// or older byte must never be served), and then the scrub (every 1 s
/// here) must bring every replica of every row back to the same records
/// within 60 s.
pub fn flip(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let mut c = Cluster::start_with(
        ctx,
        dir,
        ctx.nodes,
        &["--tract-size", "8MiB"],
        &["--scrub-every", "1"],
    )?;
    let model = Arc::new(Model::default());
    let l = Load::start(
        model.clone(),
        c.targets.clone(),
        Mix::new(4, 3, 1, 2, 2),
        ctx.workers,
        rng.random(),
        "",
        Duration::from_secs(15),
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(300..1200)));
    l.finish();
    c.settle(t, Duration::from_secs(90));
    let victim = rng.random_range(0..c.nodes.len());
    c.kill(victim);
    let rows = dir.join(format!("node{victim}")).join("disk").join("rows");
    let segs: Vec<PathBuf> = files(&rows, ".seg")
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 64))
        .collect();
    let idxs = files(&rows, ".idx");
    if segs.is_empty() {
        t.note(format!("node {victim} holds no segment to flip a bit in"));
        t.skipped = true;
        return Ok(());
    }
    // Each bit in a file of its own: independent damage. In one trial of
    // three, also several bytes at once under the newest needles of one
    // segment whose checkpoint is lost with them (as when a crash came
    // before the checkpoint): the open's scan finds a header that names no
    // object, or an end that looks like a torn write, and the node must
    // catch up from the other replicas before it serves the row
    // (docs/reliability.md, finding 25).
    let mut hit = std::collections::HashSet::new();
    if rng.random_range(0..3) == 0 {
        let f = &segs[rng.random_range(0..segs.len())];
        if let Some((off, n)) = burst_at_tail(f, &mut rng)? {
            hit.insert(f.clone());
            let idx = f.with_extension("idx");
            hit.insert(idx.clone());
            let _ = std::fs::remove_file(&idx);
            t.note(format!(
                "node {victim}: {n} bytes damaged from byte {off} of {} (under its newest needles), its checkpoint removed",
                f.strip_prefix(dir).unwrap_or(f).display()
            ));
        }
    }
    for _ in 0..rng.random_range(1..=8) {
        let at = match rng.random_range(0..20) {
            0..=1 => Flip::Superblock,
            2..=4 if !idxs.is_empty() => Flip::Checkpoint,
            _ => Flip::Needle,
        };
        let f = match at {
            Flip::Checkpoint => &idxs[rng.random_range(0..idxs.len())],
            _ => &segs[rng.random_range(0..segs.len())],
        };
        if !hit.insert(f.clone()) {
            continue;
        }
        let Some((off, bit)) = flip_bit(f, at, &mut rng)? else {
            continue;
        };
        t.note(format!(
            "node {victim}: flipped bit {bit} of byte {off} of {} ({at:?})",
            f.strip_prefix(dir).unwrap_or(f).display()
        ));
    }
    if !c.restart(t, victim) {
        return t.absorb(&model, vec![]);
    }
    // Every key through the damaged node alone.
    let only: Targets = Arc::new(RwLock::new(vec![c.nodes[victim].client.addr.clone()]));
    let unreadable = load::verify(&model, &only, Duration::from_secs(20), rng.random());
    let bad = |m: &Model| {
        !m.lost.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
            || !m.wrong.lock().unwrap_or_else(|e| e.into_inner()).is_empty()
    };
    if !unreadable.is_empty() || bad(&model) {
        t.note(format!("read back through node {victim}, the damaged one"));
        return t.absorb(&model, unreadable);
    }
    // The scrub brings every replica back in step.
    let start = Instant::now();
    let mut last = Ok(vec![]);
    while start.elapsed() < Duration::from_secs(60) {
        last = rows_out_of_step(&c);
        if last.as_ref().is_ok_and(Vec::is_empty) {
            break;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    match last {
        Ok(rows) if rows.is_empty() => t.note(format!(
            "replicas in step again after {:.1} s",
            start.elapsed().as_secs_f64()
        )),
        Ok(rows) => t.fail(format!(
            "the replicas of {} still differ 60 s after the restart (scrub every 1 s)",
            rows.join(", ")
        )),
        Err(e) => t.fail(format!("comparing the replicas: {e}")),
    }
    // And every key through any node once more.
    let unreadable = load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
    t.absorb(&model, unreadable)
}

/// One operation of a linearizability history.
#[derive(serde::Serialize, Clone)]
pub struct HOp {
    pub client: usize,
    pub key: String,
    pub op: &'static str,
    pub value: Option<String>,
    pub call: u64,
    #[serde(rename = "return")]
    pub ret: u64,
    pub outcome: &'static str,
}

/// Several clients on a few keys through every node, with a node killed
/// and restarted and another cut from the cluster meanwhile; the history
/// (call and return times of every operation) is written for Porcupine
/// (tools/linearizability). Payloads are still checked byte for byte.
pub fn linearizable(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let mut c = Cluster::start(ctx, dir, "8MiB")?;
    let model = Arc::new(Model::default());
    let history = Arc::new(Mutex::new(Vec::<HOp>::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    let keys = 3;
    let clients = 5;
    let handles: Vec<_> = (0..clients)
        .map(|ci| {
            let (history, stop, targets, model) = (
                history.clone(),
                stop.clone(),
                c.targets.clone(),
                model.clone(),
            );
            let seed = rng.random::<u64>();
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    let key = format!("lin-{}", rng.random_range(0..keys));
                    let addr = {
                        let tg = targets.read().unwrap_or_else(|e| e.into_inner());
                        if tg.is_empty() {
                            continue;
                        }
                        tg[rng.random_range(0..tg.len())].clone()
                    };
                    let p = format!("/{}/{key}", load::BUCKET);
                    let r: f64 = rng.random();
                    let to = Duration::from_secs(3);
                    let call = t0.elapsed().as_nanos() as u64;
                    let (op, value, outcome) = if r < 0.4 {
                        n += 1;
                        let ver = ((ci as u64 + 1) << 32) | n;
                        let body = load::payload(&key, ver, rng.random_range(16..2048));
                        let res = crate::http::request(&addr, "PUT", &p, &[], &body, to);
                        let o = if matches!(res, Ok(ref r) if r.status == 201 || r.status == 200) {
                            "ok"
                        } else {
                            "unknown"
                        };
                        ("put", Some(ver.to_string()), o)
                    } else if r < 0.55 {
                        let res = crate::http::request(&addr, "DELETE", &p, &[], &[], to);
                        let o = if matches!(res, Ok(ref r) if matches!(r.status, 200 | 204 | 404)) {
                            "ok"
                        } else {
                            "unknown"
                        };
                        ("delete", None, o)
                    } else {
                        match crate::http::request(&addr, "GET", &p, &[], &[], to) {
                            Ok(r) if r.status == 200 => match load::decode(&key, &r.body) {
                                Ok(v) => ("get", Some(v.to_string()), "ok"),
                                Err(e) => {
                                    model.wrong(format!("GET {key} served {e}"));
                                    ("get", None, "failed")
                                }
                            },
                            Ok(r) if r.status == 404 => ("get", None, "ok"),
                            _ => ("get", None, "failed"),
                        }
                    };
                    let ret = t0.elapsed().as_nanos() as u64;
                    history.lock().unwrap_or_else(|e| e.into_inner()).push(HOp {
                        client: ci,
                        key,
                        op,
                        value,
                        call,
                        ret,
                        outcome,
                    });
                }
            })
        })
        .collect();
    // Faults: a kill and restart, a partition, in random order and times.
    let a = rng.random_range(0..c.nodes.len());
    let b = (a + 1 + rng.random_range(0..c.nodes.len() - 1)) % c.nodes.len();
    std::thread::sleep(Duration::from_millis(rng.random_range(300..1000)));
    c.kill(a);
    c.nodes[b].peer.set(Mode::Blackhole);
    std::thread::sleep(Duration::from_millis(rng.random_range(300..2500)));
    let restarted = c.restart(t, a);
    std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
    c.nodes[b].peer.set(Mode::Open);
    std::thread::sleep(Duration::from_millis(rng.random_range(500..1500)));
    stop.store(true, Ordering::SeqCst);
    for h in handles {
        let _ = h.join();
    }
    t.note(format!(
        "node {a} killed and restarted, node {b} cut from the cluster"
    ));
    if !restarted {
        return t.absorb(&model, vec![]);
    }
    let h = history.lock().unwrap_or_else(|e| e.into_inner()).clone();
    t.acked_puts += h
        .iter()
        .filter(|o| o.op == "put" && o.outcome == "ok")
        .count() as u64;
    t.acked_deletes += h
        .iter()
        .filter(|o| o.op == "delete" && o.outcome == "ok")
        .count() as u64;
    t.reads += h.iter().filter(|o| o.op == "get").count() as u64;
    t.history_ops = h.len();
    let out = serde_json::json!({ "kind": "linearizable", "seed": t.seed, "ops": h });
    let dir_out = ctx.history.clone().unwrap_or_else(|| dir.to_path_buf());
    std::fs::create_dir_all(&dir_out)?;
    let path = dir_out.join(format!("lin-{}.json", t.seed));
    std::fs::write(&path, serde_json::to_vec(&out)?)?;
    t.history = Some(path.display().to_string());
    t.absorb(&model, vec![])
}
