//! Stores written before the run file was partitioned (checkpoints of
//! version 3, a run file of version 1: one perfect hash over the whole run)
//! still open, read back everything and keep working; their first merge
//! writes a run file of version 2 (hash partitions), streaming the old
//! run's keys from the version-1 file.
//!
//! `tests/fixtures/v3-store/{flash,disk}` was written by the code before
//! the partitioned run (the index branch at 2298f51) running
//! `write_v3_fixture` below, which is kept (ignored) to document exactly
//! what the fixture holds; `expected` derives the same contents without a
//! store.

use std::collections::HashMap;
use std::path::Path;
use strata_store::{PutItem, Store, StoreConfig, Tier};

fn config(flash: &Path, disk: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(flash, Tier::Flash).with_device(disk, Tier::Disk);
    c.segment_size = 8192;
    c.auto_compaction = false;
    c
}

fn data(key: u64, ver: u32) -> Vec<u8> {
    let len = 20 + ((key * 37 + u64::from(ver) * 11) % 300) as usize;
    (0..len)
        .map(|i| (key as usize * 13 + ver as usize * 7 + i * 3) as u8)
        .collect()
}

/// The operations of the fixture, in order: (key, version or None for a
/// delete, flash?); `MERGE_AFTER` of them are followed by a merge (so that
/// the fixture has a run file covering its first segments).
fn ops() -> Vec<(u64, Option<u32>, bool)> {
    let mut v = Vec::new();
    for k in 0..200u64 {
        v.push((k, Some(1), k % 3 != 0));
    }
    for k in (0..200u64).step_by(4) {
        v.push((k, Some(2), k % 3 == 0));
    }
    for k in (0..200u64).step_by(7) {
        v.push((k, None, true));
    }
    for k in (1..200u64).step_by(10) {
        v.push((k, Some(3), k % 2 == 0));
    }
    v
}

const MERGE_AFTER: usize = 250;

fn expected() -> HashMap<u64, u32> {
    let mut m = HashMap::new();
    for (k, ver, _) in ops() {
        match ver {
            Some(v) => {
                m.insert(k, v);
            }
            None => {
                m.remove(&k);
            }
        }
    }
    m
}

/// Writes the fixture (run once with the code at 2298f51; kept for reference).
#[test]
#[ignore]
fn write_v3_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3-store");
    let (flash, disk) = (root.join("flash"), root.join("disk"));
    let _ = std::fs::remove_dir_all(&root);
    let mut c = config(&flash, &disk);
    c.create_dirs = true;
    let store = Store::open(c).unwrap();
    for (i, (k, ver, on_flash)) in ops().into_iter().enumerate() {
        match ver {
            Some(v) => {
                let d = data(k, v);
                let tier = if on_flash { Tier::Flash } else { Tier::Disk };
                store
                    .put_batch(
                        tier,
                        &[PutItem {
                            key: k,
                            alt_key: 0,
                            cookie: v,
                            data: &d,
                        }],
                    )
                    .unwrap();
            }
            None => {
                store.delete(k, 0).unwrap();
            }
        }
        if i + 1 == MERGE_AFTER {
            store.merge_index().unwrap();
        }
    }
    store.checkpoint().unwrap();
    store.close().unwrap();
    for d in [&flash, &disk] {
        let _ = std::fs::remove_file(d.join(strata_store::LOCK_FILE));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

fn check(store: &Store, want: &HashMap<u64, u32>, what: &str) {
    for k in 0..200u64 {
        let got = store.get_unchecked(k, 0).unwrap();
        match want.get(&k) {
            Some(&v) => {
                let o = got.unwrap_or_else(|| panic!("{what}: key {k} missing"));
                assert_eq!((o.cookie, o.data), (v, data(k, v)), "{what}: key {k}");
            }
            None => assert!(got.is_none(), "{what}: key {k} resurrected"),
        }
    }
}

fn run_version(dir: &Path) -> Option<u32> {
    let b = std::fs::read(dir.join("strata.run")).ok()?;
    (b.len() >= 12 && &b[0..8] == b"STRATRUN")
        .then(|| u32::from_le_bytes([b[8], b[9], b[10], b[11]]))
}

#[test]
fn a_store_with_a_version_1_run_opens_and_reads_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v3-store");
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = (tmp.path().join("flash"), tmp.path().join("disk"));
    copy_dir(&root.join("flash"), &flash);
    copy_dir(&root.join("disk"), &disk);
    // The fixture is what this test says it is: version-3 checkpoints and a
    // version-1 run file.
    assert_eq!(run_version(&flash), Some(1));
    assert!(checkpoints_of_version(&flash, 3) >= 3);
    let mut want = expected();
    for round in 0..3 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        let r = store.open_report().clone();
        assert_eq!(r.scanned_segments, 0, "round {round}: {r:?}");
        assert!(store.segments().len() >= 6, "round {round}");
        check(&store, &want, &format!("round {round}"));
        if round == 0 {
            // Served from the version-1 run: its segments' identities were
            // not loaded into the recent table.
            assert!(
                store.memory().sealed_objects > 0,
                "round 0: the run was not loaded"
            );
        }
        let k = 5 + round as u64;
        store.put(Tier::Disk, k, 0, 9, &data(k, 9)).unwrap();
        want.insert(k, 9);
        store.delete(100 + k, 0).unwrap();
        want.remove(&(100 + k));
        store.merge_index().unwrap();
        assert_eq!(run_version(&flash), Some(2), "round {round}");
        check(&store, &want, &format!("round {round} after the merge"));
        if round == 1 {
            store.compact_all(0.0, &mut |_| {}).unwrap();
            check(&store, &want, &format!("round {round} after compaction"));
        }
        store.close().unwrap();
    }
}

fn checkpoints_of_version(dir: &Path, version: u32) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| std::fs::read(e.unwrap().path()).ok())
        .filter(|b| b.len() >= 12 && &b[0..8] == b"STRATIDX" && b[8..12] == version.to_le_bytes())
        .count()
}
