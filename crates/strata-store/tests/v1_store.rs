//! Stores written by format version 1 (the index checkpoints before the
//! node-wide index) still open and read back everything.
//!
//! `tests/fixtures/v1-store/{flash,disk}` was written by the version-1 code
//! (commit 09e0ecc) running `write_v1_fixture` below, which is kept (ignored)
//! to document exactly what the fixture holds; `expected` derives the same
//! contents without a store.

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
    let len = 50 + ((key * 37 + u64::from(ver) * 11) % 700) as usize;
    (0..len)
        .map(|i| (key as usize * 13 + ver as usize * 7 + i * 3) as u8)
        .collect()
}

/// The operations of the fixture: (step, key, version or None for a delete,
/// flash?).
fn ops() -> Vec<(u64, Option<u32>, bool)> {
    let mut v = Vec::new();
    for k in 0..60u64 {
        v.push((k, Some(1), k % 3 != 0));
    }
    // overwrites on the other tier (some land in lower segment ids)
    for k in (0..60u64).step_by(4) {
        v.push((k, Some(2), k % 3 == 0));
    }
    for k in (0..60u64).step_by(7) {
        v.push((k, None, true));
    }
    for k in (1..60u64).step_by(10) {
        v.push((k, Some(3), k % 2 == 0));
    }
    v
}

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

/// Writes the fixture (run once with the version-1 code; kept for reference).
#[test]
#[ignore]
fn write_v1_fixture() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1-store");
    let (flash, disk) = (root.join("flash"), root.join("disk"));
    let _ = std::fs::remove_dir_all(&root);
    let mut c = config(&flash, &disk);
    c.create_dirs = true;
    let store = Store::open(c).unwrap();
    for (k, ver, on_flash) in ops() {
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
    }
    store.seal_active(1).unwrap();
    store.close().unwrap();
    for d in [&flash, &disk] {
        let _ = std::fs::remove_file(d.join(strata_store::LOCK_FILE));
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn a_version_1_store_opens_and_reads_back() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1-store");
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = (tmp.path().join("flash"), tmp.path().join("disk"));
    copy_dir(&root.join("flash"), &flash);
    copy_dir(&root.join("disk"), &disk);
    let want = expected();
    for round in 0..2 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        assert!(store.segments().len() >= 4, "round {round}");
        for k in 0..60u64 {
            let got = store.get_unchecked(k, 0).unwrap();
            match want.get(&k) {
                Some(&v) => {
                    let o = got.unwrap_or_else(|| panic!("round {round}: key {k} missing"));
                    assert_eq!(
                        (o.cookie, o.data),
                        (v, data(k, v)),
                        "round {round}: key {k}"
                    );
                }
                None => assert!(got.is_none(), "round {round}: key {k} resurrected"),
            }
        }
        // and it keeps working as a store: overwrite, delete, compact
        store.put(Tier::Disk, 5, 0, 9, b"after upgrade").unwrap();
        store.delete(6, 0).unwrap();
        store.compact_all(0.0, &mut |_| {}).unwrap();
        assert_eq!(store.get(5, 0, 9).unwrap().unwrap().data, b"after upgrade");
        assert!(store.get_unchecked(6, 0).unwrap().is_none());
        store.close().unwrap();
        // put the fixture's values back for the second round's checks
        let store = Store::open(config(&flash, &disk)).unwrap();
        for k in [5u64, 6] {
            if let Some(&v) = want.get(&k) {
                store.put(Tier::Flash, k, 0, v, &data(k, v)).unwrap();
            } else {
                store.delete(k, 0).unwrap();
            }
        }
        store.close().unwrap();
    }
}
