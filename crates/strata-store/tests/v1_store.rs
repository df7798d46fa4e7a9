//! Stores written by format version 1 (the index checkpoints before the
//! node-wide index) still open and read back everything.
//!
//! `tests/fixtures/v1-store/{flash,disk}` was written by the version-1 code
//! (commit 09e0ecc) running `write_v1_fixture` below (now `Shape::write`), which is kept (ignored)
//! to document exactly what the fixture holds; `expected` derives the same
//! contents without a store.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::{config, segment_versions, Shape};
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

/// Segments of version 1 hold needles without the batch end, so a batch
/// written into one would not be all-or-nothing after a crash
/// (reliability.md, finding 13): the first batch seals a version-1 active
/// segment that holds needles (flash: segment 5) and upgrades an empty one
/// in place (disk: segment 6); the batches then land in segments of version
/// 2, and everything reads back, before and after a reopen.
#[test]
fn a_version_1_active_segment_takes_no_batch_without_its_end() {
    use strata_store::format::superblock::{VERSION, VERSION_1};
    use strata_store::PutItem;
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = V1.copy_to(tmp.path());
    assert!(segment_versions(&flash).values().all(|&v| v == VERSION_1));
    assert!(segment_versions(&disk).values().all(|&v| v == VERSION_1));
    let mut want = V1.expected();
    let store = Store::open(config(&flash, &disk)).unwrap();
    let active = |s: &Store, tier: Tier| {
        s.segments()
            .iter()
            .find(|x| x.active && x.tier == tier)
            .map(|x| x.id)
    };
    assert_eq!(active(&store, Tier::Flash), Some(5));
    assert_eq!(active(&store, Tier::Disk), Some(6));
    for (tier, keys) in [(Tier::Flash, [1u64, 2, 3]), (Tier::Disk, [4, 5, 6])] {
        let datas: Vec<Vec<u8>> = keys.iter().map(|&k| V1.data(k, 7)).collect();
        let items: Vec<PutItem> = keys
            .iter()
            .zip(&datas)
            .map(|(&key, data)| PutItem {
                head: &[],
                key,
                alt_key: 0,
                cookie: 7,
                data,
            })
            .collect();
        store.put_batch(tier, &items).unwrap();
        for k in keys {
            want.insert(k, 7);
        }
    }
    // Flash: segment 5 sealed, the batch in a new segment of version 2.
    let flash_active = active(&store, Tier::Flash).unwrap();
    assert_ne!(flash_active, 5);
    let v = segment_versions(&flash);
    assert_eq!((v[&5], v[&flash_active]), (VERSION_1, VERSION));
    // Disk: the empty segment 6 took the batch, as version 2.
    assert_eq!(active(&store, Tier::Disk), Some(6));
    assert_eq!(segment_versions(&disk)[&6], VERSION);
    V1.check(&store, &want, "after the batches");
    store.close().unwrap();
    let store = Store::open(config(&flash, &disk)).unwrap();
    assert!(store.open_report().torn_tails.is_empty());
    V1.check(&store, &want, "reopened");
    store.close().unwrap();
    let rep = strata_store::verify::verify_dir(&flash, &mut |_, _| {}).unwrap();
    assert!(rep.corruptions.is_empty(), "{:?}", rep.corruptions);
    let rep = strata_store::verify::verify_dir(&disk, &mut |_, _| {}).unwrap();
    assert!(rep.corruptions.is_empty(), "{:?}", rep.corruptions);
}
