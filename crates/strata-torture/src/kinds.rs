//! The kinds of trial: their names and what each does, the groups of
//! `--kinds`, and which trial function runs each kind with which faults,
//! flags and load.

use crate::damage::Flip;
use crate::load::Mix;
use crate::trial::{Ctx, Trial};
use crate::{cluster, ec, s3, single};
use std::path::Path;

/// Every kind of trial and what it does, in the order a campaign cycles
/// through them.
pub const KINDS: &[(&str, &str)] = &[
    ("put", "single node: kill -9 during single PUTs"),
    ("batch", "single node: kill -9 during batch POSTs"),
    ("delete", "single node: kill -9 during DELETEs"),
    ("overwrite", "single node: kill -9 during overwrites"),
    ("compaction", "single node: kill -9 during background compactions (overwrite- and delete-heavy, 64 KiB segments)"),
    ("tier-move", "single node: kill -9 while the tier mover moves segments from flash to disk (256 KiB of flash)"),
    ("torn-write", "single node: kill -9, then the unsynced tail of each directory's newest segment (the only one taking writes) cut at a random offset"),
    ("flip-needle", "single node: a bit flipped in a needle of a stopped node"),
    ("flip-checkpoint", "single node: a bit flipped in an index checkpoint"),
    ("flip-superblock", "single node: a bit flipped in a segment's superblock"),
    ("disk-full", "single node on a 64 MiB tmpfs: written until 507, killed, restarted, half deleted, written again"),
    ("slow-clients", "single node: 50-200 stalled and dribbling connections and 2-5 GETs of 64 MiB never read during a load (dropped at --write-timeout), then kill -9"),
    ("cluster-kill", "cluster: kill -9 of a random node under load, restarted"),
    ("multipart", "cluster: objects striped in 64 KiB tracts, kill -9 of a node mid-upload"),
    ("node-loss", "cluster: a node killed for good under load; recovery re-replicates its rows"),
    ("partition-nodes", "cluster: a node cut from the others and the metadata service (proxy blackhole or reset), healed"),
    ("partition-client", "cluster: the clients cut from a node mid-request, healed"),
    ("linearizable", "cluster: 5 clients, 3 keys, a kill and a partition; the history is written for Porcupine"),
    ("cluster-flip", "cluster: bits flipped in a stopped node's segments and checkpoints; read through it, the scrub must repair"),
    ("ec-encode", "erasure coding (6 nodes, --ec 4+2, 64 KiB segments): kill -9 of a node while segments are encoded"),
    ("ec-compact", "erasure coding: most objects deleted; kill -9 of a node while stripes are compacted"),
    ("ec-rebuild", "erasure coding: a node lost for good; kill -9 of another while the lost shards are rebuilt"),
    ("ec-flip", "erasure coding: a bit flipped in a shard file; every read checked, the scrub must rebuild it"),
    ("s3-put", "S3 (a cluster of one): kill -9 during PutObject and DeleteObject; GetObject and ListObjectsV2 checked"),
    ("s3-multipart", "S3: kill -9 during multipart uploads (UploadPart, CompleteMultipartUpload of 5-11 MiB objects)"),
    ("s3-delete", "S3: kill -9 during DeleteObjects (2-12 keys each)"),
    ("s3-flip-listing", "S3: a bit flipped in the listing index (listing.redb) of a stopped node"),
    ("s3-cluster", "S3 on a 4-node cluster (every node an S3 endpoint): kill -9 of a random node under load, restarted"),
    ("s3-cluster-multipart", "S3 on the 4-node cluster: multipart uploads (5-11 MiB) among the load, kill -9 of a node mid-upload"),
    ("s3-cluster-partition", "S3 on the 4-node cluster: a member cut from the others and the metadata service (blackhole or reset), healed"),
    ("s3-cluster-loss", "S3 on the 4-node cluster: a member killed for good under load; recovery copies its rows and listing index"),
    ("power-put", "single node over the power-loss model: power cut (unsynced writes dropped or torn, in turn) during PUTs, overwrites, DELETEs and batches, 2-3 cuts"),
    ("power-compaction", "single node over the power-loss model (64 KiB segments, 256 KiB of flash): power cut during compactions and tier moves, 2-3 cuts"),
    ("power-s3", "S3 (a cluster of one) over the power-loss model: power cut during PutObject, DeleteObject(s) and multipart uploads, 2-3 cuts"),
    ("cluster-power", "cluster, every node over the power-loss model: a random node's power cut under load, restarted, 2-3 cuts"),
    ("cluster-power-all", "cluster: the metadata service and every node lose their power at once, all restarted; node ids kept, no rows dropped; 2-3 cuts"),
    ("ec-power", "erasure coding (6 nodes, --ec 4+2), nodes over the power-loss model: a node's power cut while segments are encoded, 2-3 cuts"),
];

/// The power-cut kinds (group `power`): processes run over strata-fs's
/// power-loss model (`STRATA_POWER_ROOT`), their power cut by a trigger
/// file (exit status 86), restarted over a fresh model for the next cut
/// and, after their last, without it.
const POWER: &[&str] = &[
    "power-put",
    "power-compaction",
    "power-s3",
    "cluster-power",
    "cluster-power-all",
    "ec-power",
];

/// The kinds of a group name of --kinds.
fn group(name: &str) -> Option<Vec<&'static str>> {
    let all = KINDS.iter().map(|(k, _)| *k);
    let is_ec = |k: &str| k.starts_with("ec-");
    let is_s3 = |k: &str| k.starts_with("s3-");
    let named = |ks: &'static [(&'static str, &'static str)]| ks.iter().map(|(k, _)| *k);
    Some(match name {
        "all" => all.collect(),
        "single" => named(&KINDS[..12])
            .chain(["power-put", "power-compaction"])
            .collect(),
        "cluster" => named(&KINDS[12..19])
            .chain(["cluster-power", "cluster-power-all"])
            .collect(),
        "ec" => all.filter(|k| is_ec(k)).collect(),
        "s3" => all
            .filter(|k| is_s3(k))
            .chain(std::iter::once("power-s3"))
            .collect(),
        "power" => POWER.to_vec(),
        _ => return None,
    })
}

/// The kinds `kinds` names (kinds and groups), in order: an error naming
/// what is unknown or that nothing is.
pub fn expand(kinds: &[String]) -> Result<Vec<&'static str>, String> {
    let mut out = Vec::new();
    for k in kinds {
        if let Some(g) = group(k) {
            out.extend(g);
            continue;
        }
        match KINDS.iter().find(|(n, _)| *n == k) {
            Some((n, _)) => out.push(*n),
            None => return Err(format!(
                "--kinds: unknown kind {k:?}; the kinds are {} (or all, single, cluster, ec, s3, power)",
                KINDS.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", ")
            )),
        }
    }
    if out.is_empty() {
        return Err("--kinds: no kind given".into());
    }
    Ok(out)
}

/// Runs trial `t` of its kind in `dir`: its failures and notes go on
/// `t`; `Err` when the trial could not be run to its end.
pub fn run_trial(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let kill = (100, 900);
    let kind = t.kind.clone();
    match kind.as_str() {
        "put" => single::crash(ctx, t, dir, &[], Mix::new(1, 0, 0, 0, 0), kill),
        "batch" => single::crash(ctx, t, dir, &[], Mix::new(1, 0, 0, 6, 1), kill),
        "delete" => single::crash(ctx, t, dir, &[], Mix::new(3, 0, 6, 1, 1), kill),
        "overwrite" => single::crash(ctx, t, dir, &[], Mix::new(1, 6, 0, 1, 2), kill),
        "compaction" => single::crash(
            ctx,
            t,
            dir,
            &["--segment-size", "64KiB"],
            Mix::new(2, 6, 3, 1, 1).sizes(1 << 10, 16 << 10),
            (400, 1500),
        ),
        "tier-move" => single::crash(
            ctx,
            t,
            dir,
            &[
                "--segment-size",
                "64KiB",
                "--flash-capacity",
                "256KiB",
                "--mover-rate",
                "64MiB",
            ],
            Mix::new(4, 2, 1, 2, 2).sizes(1 << 10, 16 << 10),
            (300, 1500),
        ),
        "torn-write" => single::torn(ctx, t, dir),
        "flip-needle" => single::bitflip(ctx, t, dir, Flip::Needle),
        "flip-checkpoint" => single::bitflip(ctx, t, dir, Flip::Checkpoint),
        "flip-superblock" => single::bitflip(ctx, t, dir, Flip::Superblock),
        "disk-full" => single::disk_full(ctx, t, dir),
        "slow-clients" => single::slow_clients(ctx, t, dir),
        "linearizable" => cluster::linearizable(ctx, t, dir),
        "cluster-flip" => cluster::flip(ctx, t, dir),
        "ec-encode" => ec::trial(ctx, t, dir, ec::Fault::Encode),
        "ec-compact" => ec::trial(ctx, t, dir, ec::Fault::Compact),
        "ec-rebuild" => ec::trial(ctx, t, dir, ec::Fault::Rebuild),
        "ec-flip" => ec::trial(ctx, t, dir, ec::Fault::Flip),
        "s3-put" => s3::trial(ctx, t, dir, s3::Fault::Put),
        "s3-multipart" => s3::trial(ctx, t, dir, s3::Fault::Multipart),
        "s3-delete" => s3::trial(ctx, t, dir, s3::Fault::Delete),
        "s3-flip-listing" => s3::trial(ctx, t, dir, s3::Fault::FlipListing),
        "s3-cluster" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Kill),
        "s3-cluster-multipart" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Multipart),
        "s3-cluster-partition" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Partition),
        "s3-cluster-loss" => s3::cluster_trial(ctx, t, dir, s3::ClusterFault::Loss),
        "power-put" => single::power(ctx, t, dir, &[], Mix::new(4, 3, 1, 2, 1), (100, 900)),
        "power-compaction" => single::power(
            ctx,
            t,
            dir,
            &[
                "--segment-size",
                "64KiB",
                "--flash-capacity",
                "256KiB",
                "--mover-rate",
                "64MiB",
            ],
            Mix::new(2, 6, 3, 1, 1).sizes(1 << 10, 16 << 10),
            (400, 1500),
        ),
        "power-s3" => s3::trial(ctx, t, dir, s3::Fault::Power),
        "cluster-power" => cluster::power(ctx, t, dir),
        "cluster-power-all" => cluster::power_all(ctx, t, dir),
        "ec-power" => ec::trial(ctx, t, dir, ec::Fault::Power),
        k => cluster::trial(ctx, t, dir, k),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> Vec<&'static str> {
        KINDS.iter().map(|(k, _)| *k).collect()
    }

    #[test]
    fn every_group_names_kinds_and_every_kind_is_in_a_group() {
        assert_eq!(group("all"), Some(names()));
        let groups = ["single", "cluster", "ec", "s3", "power"];
        for g in groups {
            let ks = group(g).expect("a group");
            assert!(!ks.is_empty(), "{g}");
            for k in &ks {
                assert!(names().contains(k), "{g}: {k} is no kind");
            }
        }
        for k in names() {
            assert!(
                groups
                    .iter()
                    .any(|g| group(g).is_some_and(|ks| ks.contains(&k))),
                "{k} is in no group"
            );
        }
        assert_eq!(group("single").map(|g| g.len()), Some(14));
        assert!(group("s3").is_some_and(|g| g.contains(&"power-s3")));
        assert_eq!(group("power").map(|g| g.len()), Some(POWER.len()));
    }

    #[test]
    fn kinds_and_groups_expand_in_order_and_unknown_ones_are_refused() {
        let arg = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            expand(&arg(&["s3-put", "ec", "put"])),
            Ok(vec![
                "s3-put",
                "ec-encode",
                "ec-compact",
                "ec-rebuild",
                "ec-flip",
                "ec-power",
                "put"
            ])
        );
        let e = expand(&arg(&["put", "nope"])).expect_err("unknown");
        assert!(e.starts_with("--kinds: unknown kind \"nope\""), "{e}");
        assert_eq!(expand(&[]), Err("--kinds: no kind given".to_string()));
    }
}
