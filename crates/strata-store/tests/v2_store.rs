//! Stores written by format version 2 (checkpoints with one CRC over the
//! whole body, before version 3 gave the identities section its own) still
//! open, read back everything and keep working; a restart reads their
//! checkpoints whole, as before.
//!
//! `tests/fixtures/v2-store/{flash,disk}` was written by the version-2 code
//! (the index branch at a039dc3) running `write_v2_fixture` below (now `Shape::write`), which is
//! kept (ignored) to document exactly what the fixture holds; `expected`
//! derives the same contents without a store.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::{checkpoints_of_version, config, Shape};
use strata_store::Store;

const V2: Shape = Shape::merged("v2-store");

/// Writes the fixture (run once with the version-2 code; kept for reference).
#[test]
#[ignore]
fn write_v2_fixture() {
    V2.write();
}

#[test]
fn a_version_2_store_opens_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = V2.copy_to(tmp.path());
    // The fixture is what this test says it is: sealed checkpoints of
    // version 2 and a run file.
    let v2_checkpoints = checkpoints_of_version(&flash, 2);
    assert!(
        v2_checkpoints >= 3,
        "{v2_checkpoints} version-2 checkpoints"
    );
    assert!(flash.join("strata.run").exists());
    let mut want = V2.expected();
    for round in 0..3 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        let r = store.open_report().clone();
        assert_eq!(r.scanned_segments, 0, "round {round}: {r:?}");
        assert!(store.segments().len() >= 6, "round {round}");
        V2.check(&store, &want, &format!("round {round}"));
        // and it keeps working as a store: overwrite, delete, merge, compact
        V2.keep_working(&store, &mut want, round, || {});
        store.close().unwrap();
        // The first open rewrote every checkpoint in version 3 (after the
        // open, in the background or at the close).
        for d in [&flash, &disk] {
            assert_eq!(checkpoints_of_version(d, 2), 0, "round {round}");
            assert!(checkpoints_of_version(d, 3) >= 3, "round {round}");
        }
    }
}
