//! Shard files under the power-loss model (strata_fs::power): the power cut
//! after each file operation of an encode and of a rebuild in turn. A shard
//! file under its own name is whole — byte for byte the shard a run without
//! a cut writes — and once the call returned every one of them is there.
// The reference shards and the acknowledgements are written around the
// model, with std.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use strata_ec::{encode_file, rebuild, Code, ShardHeader};
use strata_fs::power::{cut_at_every_step, Cut};

const CODE: (usize, usize) = (3, 2);

fn segment() -> Vec<u8> {
    // A 1 MiB chunk and a bit per data shard: the writers loop twice.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    (0..(1 << 20) * 3 + 12_345)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn shard_paths(dir: &Path, code: Code) -> Vec<PathBuf> {
    (0..code.k + code.m)
        .map(|i| dir.join(format!("shard-{i:02}")))
        .collect()
}

/// The shards of [`segment`] as a run without a cut writes them.
fn reference(dir: &Path, code: Code) -> Vec<Vec<u8>> {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("segment"), segment()).unwrap();
    let paths = shard_paths(dir, code);
    let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
    encode_file(&dir.join("segment"), &refs, code, 7).unwrap();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Every shard file under its name equals the reference; once acknowledged
/// (`root/ack`), every one in `expected` exists. Temporary names may hold
/// anything.
fn check(root: &Path, want: &[Vec<u8>], expected: &[usize], how: Cut, n: u64, what: &str) {
    let code = Code::new(CODE.0, CODE.1).unwrap();
    let acked = root.join("ack").exists();
    for (i, p) in shard_paths(root, code).iter().enumerate() {
        match std::fs::read(p) {
            Ok(b) => {
                assert!(
                    b == want[i],
                    "{how:?} {what} step {n}: shard {i} exists under its name but is not \
                     the whole shard ({} bytes of {})",
                    b.len(),
                    want[i].len()
                );
                ShardHeader::read(p).unwrap();
            }
            Err(e) => assert!(
                !(acked && expected.contains(&i)),
                "{how:?} {what} step {n}: shard {i} was acknowledged but is gone: {e}"
            ),
        }
    }
}

#[test]
fn an_encode_leaves_each_shard_whole_or_absent_at_every_step() {
    let code = Code::new(CODE.0, CODE.1).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let want = reference(&scratch.path().join("ref"), code);
    let all: Vec<usize> = (0..code.k + code.m).collect();
    for how in [Cut::Drop, Cut::Tear] {
        let steps = cut_at_every_step(
            scratch.path(),
            how,
            |root| std::fs::write(root.join("segment"), segment()).unwrap(),
            |root| {
                let paths = shard_paths(root, code);
                let refs: Vec<&Path> = paths.iter().map(PathBuf::as_path).collect();
                encode_file(&root.join("segment"), &refs, code, 7)
                    .map_err(std::io::Error::other)?;
                std::fs::write(root.join("ack"), b"")
            },
            |root, n| check(root, &want, &all, how, n, "encode"),
        )
        .unwrap();
        // Five shards, each: created, written per chunk, header, sync,
        // rename, directory sync.
        assert!(steps > 5 * 6, "{how:?}: only {steps} steps");
    }
}

#[test]
fn a_rebuild_leaves_each_lost_shard_whole_or_absent_at_every_step() {
    let code = Code::new(CODE.0, CODE.1).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let want = reference(&scratch.path().join("ref"), code);
    // A data shard and a parity shard lost.
    let lost = [1usize, 4];
    for how in [Cut::Drop, Cut::Tear] {
        let steps = cut_at_every_step(
            scratch.path(),
            how,
            |root| {
                for (i, p) in shard_paths(root, code).iter().enumerate() {
                    if !lost.contains(&i) {
                        std::fs::write(p, &want[i]).unwrap();
                    }
                }
            },
            |root| {
                let paths = shard_paths(root, code);
                let h = ShardHeader::read(&paths[0]).map_err(std::io::Error::other)?;
                let available: Vec<(usize, &Path)> = (0..code.k + code.m)
                    .filter(|i| !lost.contains(i))
                    .map(|i| (i, paths[i].as_path()))
                    .collect();
                let targets: Vec<(usize, &Path)> =
                    lost.iter().map(|&i| (i, paths[i].as_path())).collect();
                rebuild(&h, &available, &targets).map_err(std::io::Error::other)?;
                std::fs::write(root.join("ack"), b"")
            },
            |root, n| check(root, &want, &lost, how, n, "rebuild"),
        )
        .unwrap();
        assert!(steps > 2 * 6, "{how:?}: only {steps} steps");
    }
}
