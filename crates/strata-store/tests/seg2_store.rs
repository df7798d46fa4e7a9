//! Stores of segment version 2 (needles' flags words plain, before version
//! 3 coded them: docs/reliability.md, finding 20) still open, read back
//! everything and keep working. A flag written into an old segment is
//! written plain, as its other needles' are; a compaction rewrites a
//! segment as version 3 with each needle's flags in the coded word; a
//! version-2 active segment that holds needles keeps taking batches.
//!
//! `tests/fixtures/seg2-store/{flash,disk}` was written by the code at
//! a8d93c9 (segment version 2) running `write_seg2_fixture` below, which
//! is kept (ignored) to document exactly what the fixture holds;
//! `expected` derives the same contents without a store.
// Fixtures and damage are written as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::{config, segment_versions, Shape};
use std::collections::BTreeMap;
use std::path::Path;
use strata_store::format::needle::{FlagCode, FLAG_DELETED, FLAG_SUPERSEDED};
use strata_store::format::superblock::VERSION;
use strata_store::{Store, Tier};

const SEG2: Shape = Shape::merged("seg2-store");

/// Writes the fixture (run once with the code at a8d93c9; kept for
/// reference).
#[test]
#[ignore]
fn write_seg2_fixture() {
    SEG2.write();
}

/// Every needle's (segment id, key) → flags word as stored, of the `.seg`
/// files of `dir`.
fn flag_words(dir: &Path) -> BTreeMap<(u64, u64, u64), u32> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "seg") {
            continue;
        }
        let b = std::fs::read(&p).unwrap();
        let word = |at: usize| u32::from_le_bytes(b[at..at + 4].try_into().unwrap());
        let id = u64::from_le_bytes(b[16..24].try_into().unwrap());
        let mut at = 64;
        while at + 40 <= b.len() && &b[at..at + 4] == b"NEDL" {
            let key = u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap());
            out.insert((id, key, at as u64), word(at + 20));
            at += (40 + (word(at + 24) & 0x7fff_ffff) as usize + 7) & !7;
        }
    }
    out
}

#[test]
fn a_store_of_version_2_segments_opens_reads_back_and_keeps_working() {
    let tmp = tempfile::tempdir().unwrap();
    let (flash, disk) = SEG2.copy_to(tmp.path());
    // The fixture is what this test says it is: version-2 segments only,
    // with plain deleted and superseded flags among their needles.
    for d in [&flash, &disk] {
        assert!(segment_versions(d).values().all(|&v| v == 2), "{d:?}");
    }
    let words: Vec<u32> = [&flash, &disk]
        .iter()
        .flat_map(|d| flag_words(d).into_values())
        .collect();
    assert!(words.contains(&FLAG_DELETED), "no plain deleted flag");
    assert!(words.contains(&FLAG_SUPERSEDED), "no plain superseded flag");
    let mut want = SEG2.expected();

    // A version-2 active segment that holds needles takes the next batch;
    // a delete in a version-2 segment writes the plain word.
    let store = Store::open(config(&flash, &disk)).unwrap();
    let active = |s: &Store| {
        s.segments()
            .iter()
            .find(|x| x.active && x.tier == Tier::Flash)
            .map(|x| x.id)
            .unwrap()
    };
    let before = active(&store);
    store
        .put(Tier::Flash, 300, 0, 4, &SEG2.data(300, 4))
        .unwrap();
    assert_eq!(active(&store), before);
    assert_eq!(segment_versions(&flash)[&before], 2);
    let victim = *want.keys().find(|&&k| k % 3 != 0 && k > 150).unwrap();
    assert!(store.delete(victim, 0).unwrap());
    want.remove(&victim);
    store.close().unwrap();
    let plain = flag_words(&flash)
        .into_iter()
        .chain(flag_words(&disk))
        .filter(|((_, k, _), _)| *k == victim)
        .map(|(_, w)| w)
        .collect::<Vec<_>>();
    assert!(plain.contains(&FLAG_DELETED), "{victim}: {plain:?}");

    // A move rewrites a sealed segment as version 3 with every needle,
    // dead ones too: their plain flags become coded words.
    let flagged_seg = flag_words(&flash)
        .into_iter()
        .filter(|((id, _, _), w)| *w != 0 && *id != before)
        .map(|((id, _, _), _)| id)
        .next()
        .unwrap();
    let store = Store::open(config(&flash, &disk)).unwrap();
    store.move_segment(flagged_seg, 1, &mut |_| {}).unwrap();
    store.close().unwrap();
    assert_eq!(segment_versions(&disk)[&flagged_seg], VERSION);
    let moved: Vec<u32> = flag_words(&disk)
        .into_iter()
        .filter(|((id, _, _), _)| *id == flagged_seg)
        .map(|(_, w)| w)
        .collect();
    assert!(moved.iter().any(|&w| w != 0), "{moved:?}");
    assert!(
        moved
            .iter()
            .all(|&w| [0, 0xFFFF, 0xFFFF_0000, u32::MAX].contains(&w)),
        "{moved:x?}"
    );

    let check_all = |store: &Store, want: &std::collections::HashMap<u64, u32>, what: &str| {
        SEG2.check(store, want, what);
        let o = store.get_unchecked(300, 0).unwrap().unwrap();
        assert_eq!((o.cookie, o.data), (4, SEG2.data(300, 4)), "{what}");
    };
    for round in 0..3 {
        let store = Store::open(config(&flash, &disk)).unwrap();
        check_all(&store, &want, &format!("round {round}"));
        // overwrite, delete, merge; round 1 compacts everything
        SEG2.keep_working(&store, &mut want, round, || {});
        store.close().unwrap();
    }
    // The compaction rewrote segments as version 3, their dead needles'
    // flags in the coded word; old and new segments read alike, through
    // checkpoints and by a scan of every segment.
    let versions: Vec<u32> = [&flash, &disk]
        .iter()
        .flat_map(|d| segment_versions(d).into_values())
        .collect();
    assert!(versions.contains(&VERSION), "{versions:?}");
    let coded: Vec<u32> = [&flash, &disk]
        .iter()
        .flat_map(|d| {
            let v = segment_versions(d);
            flag_words(d)
                .into_iter()
                .filter(move |((id, _, _), _)| v[id] == VERSION)
                .map(|(_, w)| w)
        })
        .collect();
    assert!(
        coded.iter().any(|&w| w != 0),
        "no flagged needle in a version-3 segment"
    );
    for w in coded {
        assert_eq!(FlagCode::Coded.word(FlagCode::Coded.flags(w).unwrap()), w);
    }
    for d in [&flash, &disk] {
        for e in std::fs::read_dir(d).unwrap().flatten() {
            let p = e.path();
            let name = p.file_name().unwrap().to_string_lossy().to_string();
            if name.ends_with(".idx") || name == "strata.run" {
                std::fs::remove_file(&p).unwrap();
            }
        }
    }
    let store = Store::open(config(&flash, &disk)).unwrap();
    assert!(store.open_report().scanned_segments >= 6);
    assert!(store.open_report().corrupt_regions.is_empty());
    check_all(&store, &want, "scanned");
    store.close().unwrap();
    for d in [&flash, &disk] {
        let rep = strata_store::verify::verify_dir(d, &mut |_, _| {}).unwrap();
        assert!(rep.corruptions.is_empty(), "{:?}", rep.corruptions);
    }
}
