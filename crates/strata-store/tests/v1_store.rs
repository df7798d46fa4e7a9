//! Stores written by format version 1 (the index checkpoints before the
//! node-wide index) still open and read back everything.
//!
//! `tests/fixtures/v1-store/{flash,disk}` was written by the version-1 code
//! (commit 09e0ecc) running `write_v1_fixture` below (now `Shape::write`), which is kept (ignored)
//! to document exactly what the fixture holds; `expected` derives the same
//! contents without a store.

mod fixture_common;

use fixture_common::{config, Shape};
use strata_store::{Store, Tier};

const V1: Shape = Shape {
    dir: "v1-store",
    keys: 60,
    base: 50,
    spread: 700,
    merge_after: None,
};

/// Writes the fixture (run once with the version-1 code; kept for reference).
#[test]
#[ignore]
fn write_v1_fixture() {
    V1.write();
}

#[test]
fn a_version_1_store_opens_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = V1.copy_to(tmp.path());
    let want = V1.expected();
    for round in 0..2 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        assert!(store.segments().len() >= 4, "round {round}");
        V1.check(&store, &want, &format!("round {round}"));
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
                store.put(Tier::Flash, k, 0, v, &V1.data(k, v)).unwrap();
            } else {
                store.delete(k, 0).unwrap();
            }
        }
        store.close().unwrap();
    }
}
