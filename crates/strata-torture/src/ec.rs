//! Trials of the erasure-coded warm tier (docs/erasure-coding.md) on a
//! loopback cluster of six nodes whose metadata service runs
//! `--ec 4+2 --ec-after 1s`, with 64 KiB segments: sealed segments become
//! Reed-Solomon stripes within seconds of the load, their replicas drop
//! the encoded records, and reads of those objects go to the stripes.
//! Faults: kill -9 of a node while segments are encoded, while stripes
//! are compacted (after deletes), while lost shards are rebuilt (after a
//! node is lost for good), and a bit flipped in a shard file (the scrub
//! must rebuild it; no GET may serve a wrong byte meanwhile), and power
//! cuts of nodes over the power-loss model while segments are encoded.
//! After each trial the usual checks: every acknowledged write reads back
//! identical (healthy or degraded), every acknowledged delete is absent.

use crate::cluster::{signed_get, Cluster};
use crate::damage::files;
use crate::load::{self, Load, Mix, Model};
use crate::procs::Power;
use crate::trial::{Ctx, Trial};
use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The erasure-coding faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 of a node while segments are being encoded.
    Encode,
    /// kill -9 of a node while stripes are compacted after deletes.
    Compact,
    /// A node lost for good; kill -9 of another while the lost shards are
    /// rebuilt.
    Rebuild,
    /// A bit flipped in a shard file of a live node.
    Flip,
    /// Every node over the power-loss model; a random node's power cut
    /// while segments are being encoded, 2 or 3 times.
    Power,
}

/// Nodes of an erasure-coding trial: K + M.
const NODES: usize = 6;

fn meta_u64(c: &Cluster, field: &str) -> u64 {
    c.meta_status().and_then(|s| s[field].as_u64()).unwrap_or(0)
}

/// The sum of an erasure-coding counter (`/cluster/v1/ec/status`) over
/// the live nodes.
fn ec_sum(c: &Cluster, field: &str) -> u64 {
    c.nodes
        .iter()
        .filter(|n| n.up)
        .filter_map(|n| signed_get(c, &n.server.addr, "/cluster/v1/ec/status"))
        .filter_map(|v| v[field].as_u64())
        .sum()
}

/// Polls `f` every 500 ms until it holds or `limit` passes.
fn wait_for(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    loop {
        if f() {
            return true;
        }
        if start.elapsed() > limit {
            return false;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// Every shard file (`ec/STRIPE/shard-NN`) under `dir`.
fn shard_files(dir: &Path) -> Vec<PathBuf> {
    files(dir, "")
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("shard-") && n.len() == 8)
        })
        .collect()
}

/// One erasure-coding trial.
pub fn trial(ctx: &Ctx, t: &mut Trial, dir: &Path, fault: Fault) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let mut node_flags = vec!["--segment-size", "64KiB"];
    match fault {
        Fault::Compact => {
            node_flags.extend(["--ec-sweep-grace", "2s", "--ec-compact-garbage", "0.5"])
        }
        // A slow rebuild leaves time to kill a node in the middle of it.
        Fault::Rebuild => node_flags.extend(["--ec-rebuild-rate", "256KiB"]),
        _ => {}
    }
    let tear = crate::procs::tears(t.seed);
    let base: u64 = if fault == Fault::Power {
        rng.random()
    } else {
        0
    };
    let mut c = Cluster::start_powered(
        ctx,
        dir,
        NODES,
        &["--tract-size", "8MiB", "--ec", "4+2", "--ec-after", "1s"],
        &node_flags,
        &|name, root| {
            let i: u64 = name.trim_start_matches("node").parse().ok()?;
            (fault == Fault::Power).then(|| Power {
                root: root.to_path_buf(),
                trigger: dir.join(format!("power-cut-{name}")),
                seed: base.wrapping_add(i),
                tear,
            })
        },
    )?;
    let model = Arc::new(Model::default());
    model
        .strict_500
        .store(fault == Fault::Power, std::sync::atomic::Ordering::Relaxed);
    // Objects of 1 to 8 KiB: tens of them fill a 64 KiB segment.
    let mix = match fault {
        Fault::Encode | Fault::Power => Mix::new(4, 2, 1, 2, 2),
        Fault::Compact => Mix::new(4, 0, 0, 2, 1),
        Fault::Rebuild => Mix::new(3, 1, 1, 1, 3),
        Fault::Flip => Mix::new(4, 1, 0, 2, 1),
    }
    .sizes(1 << 10, 8 << 10);
    let timeout = Duration::from_secs(15);
    let mut l = Some(Load::start(
        model.clone(),
        c.targets.clone(),
        mix,
        ctx.workers,
        rng.random(),
        "a",
        timeout,
    ));
    let encoded = wait_for(Duration::from_secs(60), || meta_u64(&c, "ec_segments") >= 1);
    if !encoded {
        if let Some(l) = l.take() {
            l.finish();
        }
        t.fail("no segment was encoded within 60 s of the load".into());
        return t.absorb(&model, vec![]);
    }
    let victim = rng.random_range(0..c.nodes.len());
    match fault {
        Fault::Encode => {
            // In the middle of the encoder's work: stripes are being cut,
            // sent, recorded and installed while the load seals segments.
            std::thread::sleep(Duration::from_millis(rng.random_range(0..3000)));
            let stripes = meta_u64(&c, "ec_segments");
            c.kill(victim);
            std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
            if !c.restart(t, victim) {
                if let Some(l) = l.take() {
                    l.finish();
                }
                return t.absorb(&model, vec![]);
            }
            t.note(format!(
                "node {victim} killed and restarted with {stripes} segment(s) encoded"
            ));
            std::thread::sleep(Duration::from_millis(rng.random_range(500..2000)));
        }
        Fault::Power => {
            let cuts = rng.random_range(2..=3);
            let plan = crate::procs::cut_plan(&mut rng, c.nodes.len(), cuts);
            for (round, &victim) in plan.iter().enumerate() {
                std::thread::sleep(Duration::from_millis(rng.random_range(0..3000)));
                let stripes = meta_u64(&c, "ec_segments");
                if !c.power_cut(t, victim) {
                    if let Some(l) = l.take() {
                        l.finish();
                    }
                    return t.absorb(&model, vec![]);
                }
                std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
                if !crate::procs::cut_again(&plan, round) {
                    c.nodes[victim].server.power = None;
                }
                if !c.restart(t, victim) {
                    if let Some(l) = l.take() {
                        l.finish();
                    }
                    return t.absorb(&model, vec![]);
                }
                t.note(format!(
                    "node {victim}'s power cut with {stripes} segment(s) encoded, restarted"
                ));
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(500..2000)));
        }
        Fault::Compact => {
            // Let a few stripes form, then delete most of what was written
            // (the deletes run under a load that keeps writing).
            std::thread::sleep(Duration::from_millis(rng.random_range(1000..3000)));
            if let Some(l) = l.take() {
                l.finish();
            }
            let del = Load::start(
                model.clone(),
                c.targets.clone(),
                Mix::new(1, 0, 12, 0, 1).sizes(1 << 10, 8 << 10),
                ctx.workers,
                rng.random(),
                "b",
                timeout,
            );
            // The new load's workers own new keys (`bw{w}-N`) and delete
            // most of them; the first load's keys, most of them already
            // encoded, are deleted here.
            let keys = model.key_names();
            delete_most(&model, &c, &keys, &mut rng, timeout);
            let compacted = wait_for(Duration::from_secs(40), || {
                ec_sum(&c, "stripes_compacted") >= 1
            });
            std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
            let n = ec_sum(&c, "stripes_compacted");
            c.kill(victim);
            if !c.restart(t, victim) {
                del.finish();
                return t.absorb(&model, vec![]);
            }
            t.note(format!(
                "node {victim} killed and restarted after {n} stripe compaction(s){}",
                if compacted { "" } else { " (none within 40 s)" }
            ));
            if !compacted {
                t.fail("no stripe was compacted within 40 s of the deletes".into());
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(500..2000)));
            l = Some(del);
        }
        Fault::Rebuild => {
            std::thread::sleep(Duration::from_millis(rng.random_range(1000..3000)));
            c.kill(victim);
            let dead = wait_for(Duration::from_secs(60), || {
                c.meta_status()
                    .and_then(|s| {
                        s["nodes"]
                            .as_array()
                            .map(|ns| ns.iter().any(|n| n["state"] == "dead"))
                    })
                    .unwrap_or(false)
            });
            if !dead {
                t.fail(format!("node {victim} was not declared dead within 60 s"));
            }
            let started = wait_for(Duration::from_secs(60), || {
                ec_sum(&c, "shards_rebuilt") >= 1
            });
            std::thread::sleep(Duration::from_millis(rng.random_range(0..2000)));
            let other = (victim + 1 + rng.random_range(0..c.nodes.len() - 1)) % c.nodes.len();
            let degraded = meta_u64(&c, "stripes_degraded");
            c.kill(other);
            if !c.restart(t, other) {
                if let Some(l) = l.take() {
                    l.finish();
                }
                return t.absorb(&model, vec![]);
            }
            t.note(format!(
                "node {victim} lost for good; node {other} killed and restarted with {degraded} stripe(s) degraded{}",
                if started { "" } else { " (no shard rebuilt yet)" }
            ));
            let whole = wait_for(Duration::from_secs(180), || {
                c.meta_status().is_some_and(|s| {
                    s["stripes_degraded"].as_u64() == Some(0)
                        && s["ec_segments"].as_u64().unwrap_or(0) > 0
                })
            });
            if !whole {
                t.fail(format!(
                    "stripes still degraded 180 s after the loss: {}",
                    meta_u64(&c, "stripes_degraded")
                ));
            }
        }
        Fault::Flip => {
            // Enough stripes, then every write answered; a bit flipped in
            // a shard file of a live node.
            std::thread::sleep(Duration::from_millis(rng.random_range(1000..2500)));
            if let Some(l) = l.take() {
                l.finish();
            }
            std::thread::sleep(Duration::from_secs(2));
            let shards: Vec<(usize, PathBuf)> = (0..c.nodes.len())
                .flat_map(|i| {
                    shard_files(&dir.join(format!("node{i}")))
                        .into_iter()
                        .map(move |p| (i, p))
                })
                .collect();
            if shards.is_empty() {
                t.fail("no shard file to flip a bit in".into());
                return t.absorb(&model, vec![]);
            }
            let (holder, f) = shards[rng.random_range(0..shards.len())].clone();
            let original = std::fs::read(&f).with_context(|| f.display().to_string())?;
            if original.is_empty() {
                t.skipped = true;
                return t.absorb(&model, vec![]);
            }
            let off = rng.random_range(0..original.len());
            let bit = rng.random_range(0..8u8);
            let mut bytes = original.clone();
            bytes[off] ^= 1 << bit;
            std::fs::write(&f, &bytes)?;
            t.note(format!(
                "flipped bit {bit} of byte {off} of {} (node {holder}, {} bytes)",
                f.strip_prefix(dir).unwrap_or(&f).display(),
                original.len()
            ));
            // Every object read back while the shard is damaged: a wrong
            // byte is never served (the needle checksums catch it and the
            // read decodes from the other shards).
            let unreadable =
                load::verify(&model, &c.targets, Duration::from_secs(20), rng.random());
            if !unreadable.is_empty() {
                t.absorb(&model, unreadable)?;
                return Ok(());
            }
            // The holder restarted (its scrub runs at once): the shard is
            // rebuilt, byte for byte, or the stripe it belonged to is gone.
            c.kill(holder);
            if !c.restart(t, holder) {
                return t.absorb(&model, vec![]);
            }
            let repaired = wait_for(Duration::from_secs(60), || {
                std::fs::read(&f).map_or(!f.exists(), |b| b == original)
            });
            if !repaired {
                t.fail(format!(
                    "the damaged shard {} was not rebuilt within 60 s (shards found corrupt: {}, rebuilt: {})",
                    f.strip_prefix(dir).unwrap_or(&f).display(),
                    ec_sum(&c, "shards_corrupt"),
                    ec_sum(&c, "shards_rebuilt")
                ));
            } else {
                t.note(format!(
                    "shard rebuilt (shards found corrupt: {})",
                    ec_sum(&c, "shards_corrupt")
                ));
            }
        }
    }
    if let Some(l) = l.take() {
        l.finish();
    }
    c.settle(t, Duration::from_secs(120));
    t.note(format!(
        "{} segment(s) encoded, {} degraded read(s), {} healthy stripe read(s)",
        meta_u64(&c, "ec_segments"),
        ec_sum(&c, "reads_degraded"),
        ec_sum(&c, "reads_healthy")
    ));
    let unreadable = load::verify(&model, &c.targets, Duration::from_secs(30), rng.random());
    t.absorb(&model, unreadable)
}

/// Deletes about four keys in five of `keys` (through random live nodes)
/// and records each in the model. The load's own workers never touch
/// these keys again (a worker's keys are those it wrote since it
/// started), so each key still has one writer at a time.
fn delete_most(model: &Model, c: &Cluster, keys: &[String], rng: &mut StdRng, timeout: Duration) {
    for k in keys {
        if !rng.random_bool(0.8) {
            continue;
        }
        let addr = {
            let t = c.targets.read().unwrap_or_else(|e| e.into_inner());
            if t.is_empty() {
                return;
            }
            t[rng.random_range(0..t.len())].clone()
        };
        let path = format!("/{}/{k}", load::BUCKET);
        let log = model.log(k);
        let o = match crate::http::request(&addr, "DELETE", &path, &[], &[], timeout) {
            Ok(r) if matches!(r.status, 200 | 204) => load::Outcome::Acked,
            Ok(r) if r.status == 404 => {
                if !log.allowed().contains(&None) {
                    model.lost(format!(
                        "DELETE {k} answered 404 but it must be {}",
                        log.describe()
                    ));
                }
                load::Outcome::Acked
            }
            _ => load::Outcome::Unknown,
        };
        model.record(k, load::Op::Del, o);
    }
}
