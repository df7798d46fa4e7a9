//! Stores written before the run file was partitioned (checkpoints of
//! version 3, a run file of version 1: one perfect hash over the whole run)
//! still open, read back everything and keep working; their first merge
//! writes a run file of version 2 (hash partitions), streaming the old
//! run's keys from the version-1 file.
//!
//! `tests/fixtures/v3-store/{flash,disk}` was written by the code before
//! the partitioned run (the index branch at 2298f51) running
//! `write_v3_fixture` below (now `Shape::write`), which is kept (ignored) to document exactly
//! what the fixture holds; `expected` derives the same contents without a
//! store.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::{checkpoints_of_version, config, Shape};
use std::path::Path;
use strata_store::Store;

const V3: Shape = Shape::merged("v3-store");

/// Writes the fixture (run once with the code at 2298f51; kept for reference).
#[test]
#[ignore]
fn write_v3_fixture() {
    V3.write();
}

fn run_version(dir: &Path) -> Option<u32> {
    let b = std::fs::read(dir.join("strata.run")).ok()?;
    (b.len() >= 12 && &b[0..8] == b"STRATRUN")
        .then(|| u32::from_le_bytes([b[8], b[9], b[10], b[11]]))
}

#[test]
fn a_store_with_a_version_1_run_opens_and_reads_back() {
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = V3.copy_to(tmp.path());
    // The fixture is what this test says it is: version-3 checkpoints and a
    // version-1 run file.
    assert_eq!(run_version(&flash), Some(1));
    assert!(checkpoints_of_version(&flash, 3) >= 3);
    let mut want = V3.expected();
    for round in 0..3 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        let r = store.open_report().clone();
        assert_eq!(r.scanned_segments, 0, "round {round}: {r:?}");
        assert!(store.segments().len() >= 6, "round {round}");
        V3.check(&store, &want, &format!("round {round}"));
        if round == 0 {
            // Served from the version-1 run: its segments' identities were
            // not loaded into the recent table.
            assert!(
                store.memory().sealed_objects > 0,
                "round 0: the run was not loaded"
            );
        }
        V3.keep_working(&store, &mut want, round, || {
            assert_eq!(run_version(&flash), Some(2), "round {round}");
        });
        store.close().unwrap();
    }
}
