//! Stripes over real files: any K+M up to 32, any loss of up to M shards,
//! every range read back healthy and degraded, rebuilt shards identical to
//! the lost ones, a flipped byte found and repaired by the scrub.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use proptest::prelude::*;
use std::path::{Path, PathBuf};
use strata_ec::*;

fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn encode(dir: &Path, data: &[u8], code: Code) -> (ShardHeader, Vec<PathBuf>) {
    let src = dir.join("segment");
    std::fs::write(&src, data).unwrap();
    let shards: Vec<PathBuf> = (0..code.k + code.m)
        .map(|i| dir.join(format!("shard-{i}")))
        .collect();
    let refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let h = encode_file(&src, &refs, code, 7).unwrap();
    (h, shards)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(40))]

    #[test]
    fn any_range_reads_back_healthy_degraded_and_after_rebuild(
        k in 1usize..12,
        m in 1usize..5,
        len in 1usize..40_000,
        seed in any::<u64>(),
        lose in prop::collection::vec(any::<prop::sample::Index>(), 1..5),
        ranges in prop::collection::vec((any::<prop::sample::Index>(), 1usize..3000), 1..6),
    ) {
        let code = Code::new(k, m).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let data = bytes(seed, len);
        let (h, shards) = encode(dir.path(), &data, code);
        prop_assert_eq!(h.data_len, len as u64);
        prop_assert_eq!(h.shard_len % BLOCK, 0);
        let data_paths: Vec<&Path> = shards[..k].iter().map(PathBuf::as_path).collect();
        // Up to M shards lost.
        let mut lost: Vec<usize> = lose.iter().map(|i| i.index(k + m)).collect();
        lost.sort_unstable();
        lost.dedup();
        lost.truncate(m);
        let available: Vec<(usize, &Path)> = (0..k + m)
            .filter(|i| !lost.contains(i))
            .map(|i| (i, shards[i].as_path()))
            .collect();
        for (at, n) in &ranges {
            let off = at.index(len) as u64;
            let n = (*n as u64).min(len as u64 - off);
            let want = &data[off as usize..(off + n) as usize];
            prop_assert_eq!(&read_range(&h, &data_paths, off, n).unwrap()[..], want);
            prop_assert_eq!(&decode_range(&h, &available, off, n).unwrap()[..], want);
        }
        // Rebuild the lost shards elsewhere: byte-identical to the originals.
        let rebuilt: Vec<PathBuf> = lost.iter().map(|i| dir.path().join(format!("new-{i}"))).collect();
        let targets: Vec<(usize, &Path)> = lost.iter().zip(&rebuilt).map(|(&i, p)| (i, p.as_path())).collect();
        rebuild(&h, &available, &targets).unwrap();
        for (&i, p) in lost.iter().zip(&rebuilt) {
            prop_assert!(std::fs::read(p).unwrap() == std::fs::read(&shards[i]).unwrap(), "shard {}", i);
        }
    }
}

#[test]
fn more_losses_than_parity_is_a_clear_error() {
    let code = Code::new(4, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (h, shards) = encode(dir.path(), &bytes(1, 10_000), code);
    let three_lost: Vec<(usize, &Path)> = (3..6).map(|i| (i, shards[i].as_path())).collect();
    let e = decode_range(&h, &three_lost, 0, 100).unwrap_err();
    assert!(e.to_string().contains("only 3 shards of 4"), "{e}");
    assert!(Code::new(0, 2).is_err() && Code::new(30, 3).is_err());
    assert!((Code::new(10, 4).unwrap().overhead() - 1.4).abs() < 1e-9);
}

#[test]
fn scrub_finds_and_repairs_a_flipped_byte_and_a_missing_shard() {
    let code = Code::new(6, 3).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = bytes(9, 3 << 20);
    let (h, shards) = encode(dir.path(), &data, code);
    let originals: Vec<Vec<u8>> = shards.iter().map(|p| std::fs::read(p).unwrap()).collect();
    let refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    assert!(scrub(&refs).unwrap().is_empty());
    // A flipped payload byte in a data shard, a parity shard gone.
    let mut b = std::fs::read(&shards[2]).unwrap();
    b[HEADER_LEN + 12345] ^= 1;
    std::fs::write(&shards[2], b).unwrap();
    std::fs::remove_file(&shards[7]).unwrap();
    assert_eq!(scrub(&refs).unwrap(), vec![2, 7]);
    for (i, p) in shards.iter().enumerate() {
        assert!(std::fs::read(p).unwrap() == originals[i], "shard {i}");
    }
    let data_paths: Vec<&Path> = refs[..6].to_vec();
    assert_eq!(read_range(&h, &data_paths, 0, 3 << 20).unwrap(), data);
    // No temporary file is left behind.
    assert!(std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")));
}

#[test]
fn a_staged_encode_writes_the_same_shards_as_a_durable_one() {
    let code = Code::new(4, 2).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data = bytes(11, (2 << 20) + 777);
    let (h, shards) = encode(dir.path(), &data, code);
    let staged: Vec<PathBuf> = (0..code.k + code.m)
        .map(|i| dir.path().join(format!("staged-{i}")))
        .collect();
    let refs: Vec<&Path> = staged.iter().map(PathBuf::as_path).collect();
    let hs = encode_file_staged(&dir.path().join("segment"), &refs, code, 7).unwrap();
    assert_eq!(hs, h);
    for (a, b) in shards.iter().zip(&staged) {
        assert!(
            std::fs::read(a).unwrap() == std::fs::read(b).unwrap(),
            "{} differs from {}",
            b.display(),
            a.display()
        );
    }
    assert!(std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .all(|e| !e.file_name().to_string_lossy().ends_with(".tmp")));
}
