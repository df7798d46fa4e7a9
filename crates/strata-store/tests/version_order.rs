//! A store given a version order (`StoreConfig::version_order`) writes the
//! superseded flag of the version a put replaces without waiting for its
//! sync, syncs such flags before any delete, and at open settles two
//! unflagged needles of one identity by that order, whatever their
//! segments' ids or devices.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod flags_common;

use flags_common::{drop_indexes, rewrite_flags, BY_VERSION};
use std::path::Path;
use std::time::Duration;

use strata_store::{Store, StoreConfig, Tier};

const ALT: u32 = 3;
const COOKIE: u32 = 0x5eed;

/// A version's data: the version number (u64 LE), then filler.
fn data(ver: u64) -> Vec<u8> {
    let mut v = ver.to_le_bytes().to_vec();
    v.extend(std::iter::repeat_n(ver as u8, 200));
    v
}

fn config(a: &Path, b: &Path, ordered: bool) -> StoreConfig {
    let mut c = StoreConfig::new(a, Tier::Flash).with_device(b, Tier::Disk);
    // No background round (which syncs pending flags) during a test.
    c.checkpoint_interval = Duration::from_secs(3600);
    c.auto_compaction = false;
    c.prepare_ahead = 0;
    if ordered {
        c.version_order = Some(BY_VERSION);
    }
    c
}

fn syncs(s: &Store) -> u64 {
    s.counters().fdatasyncs
}

/// fdatasyncs of: a put that replaces a version in another segment, the
/// first delete after it, and a second delete.
fn put_then_deletes(ordered: bool) -> (u64, u64, u64) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = Store::open(config(a.path(), b.path(), ordered)).unwrap();
    for k in [1, 2, 3] {
        s.put(Tier::Flash, k, ALT, COOKIE, &data(1)).unwrap();
    }
    let before = syncs(&s);
    s.put(Tier::Disk, 1, ALT, COOKIE, &data(2)).unwrap();
    let put = syncs(&s) - before;
    let before = syncs(&s);
    assert!(s.delete(2, ALT).unwrap());
    let first = syncs(&s) - before;
    let before = syncs(&s);
    assert!(s.delete(3, ALT).unwrap());
    let second = syncs(&s) - before;
    assert_eq!(s.get(1, ALT, COOKIE).unwrap().unwrap().data, data(2));
    (put, first, second)
}

#[test]
fn a_put_does_not_wait_for_the_superseded_flag_and_a_delete_syncs_it_first() {
    // Without an order: the put syncs its batch and the flag on the
    // version it replaced; each delete syncs its own flag.
    assert_eq!(put_then_deletes(false), (2, 1, 1));
    // With one: the put syncs only its batch; the first delete syncs the
    // pending flag's segment before its own, the second has none left.
    assert_eq!(put_then_deletes(true), (1, 2, 1));
}

/// Two versions of key 7 on the two devices, the newer in the segment
/// with the lower id (the segment order says the opposite of the truth),
/// then the older one's superseded flag lost and no checkpoint left: both
/// needles are unflagged and the next open must choose.
fn lost_flag() -> (tempfile::TempDir, tempfile::TempDir) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    {
        let s = Store::open(config(a.path(), b.path(), true)).unwrap();
        let active = |t: Tier| {
            s.segments()
                .into_iter()
                .find(|x| x.active && x.tier == t)
                .unwrap()
                .id
        };
        let (old, new) = if active(Tier::Flash) > active(Tier::Disk) {
            (Tier::Flash, Tier::Disk)
        } else {
            (Tier::Disk, Tier::Flash)
        };
        s.put(old, 7, ALT, COOKIE, &data(1)).unwrap();
        s.put(new, 7, ALT, COOKIE, &data(2)).unwrap();
        assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(2));
        s.close().unwrap();
    }
    let unflag =
        |k: u64, _: u32, _: u32, d: &[u8]| (k == 7 && d[..8] == 1u64.to_le_bytes()).then_some(0);
    assert_eq!(
        rewrite_flags(a.path(), unflag) + rewrite_flags(b.path(), unflag),
        1
    );
    for d in [a.path(), b.path()] {
        drop_indexes(d);
    }
    (a, b)
}

#[test]
fn an_open_settles_two_unflagged_needles_by_the_version_order() {
    let (a, b) = lost_flag();
    let s = Store::open(config(a.path(), b.path(), true)).unwrap();
    assert_eq!(
        s.get(7, ALT, COOKIE).unwrap().unwrap().data,
        data(2),
        "the newer version by the order wins, not the higher segment"
    );
    s.close().unwrap();
    // The open flagged version 1 (synced): a store without an order now
    // finds the one unflagged needle too, once let past the refusal below.
    unname_order(a.path(), b.path());
    let s = Store::open(config(a.path(), b.path(), false)).unwrap();
    assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(2));
}

/// Removes the order's name from both directories (as if the store had
/// been written without one).
fn unname_order(a: &Path, b: &Path) {
    for d in [a, b] {
        assert_eq!(
            strata_store::recorded_order(d).unwrap().as_deref(),
            Some(BY_VERSION.name)
        );
        std::fs::remove_file(d.join(strata_store::ORDER_FILE)).unwrap();
    }
}

#[test]
fn a_store_written_with_an_order_opens_only_with_it() {
    // Opened without its order (or with another), the store below would
    // settle the tie by segment id and flag the newer version for good.
    let (a, b) = lost_flag();
    let Err(err) = Store::open(config(a.path(), b.path(), false)) else {
        panic!("opened without its order");
    };
    assert!(
        matches!(&err, strata_store::StoreError::VersionOrder { recorded, .. } if recorded == "test-version"),
        "{err}"
    );
    let mut other = config(a.path(), b.path(), true);
    other.version_order = Some(strata_store::VersionOrder {
        name: "another",
        cmp: BY_VERSION.cmp,
    });
    let Err(err) = Store::open(other) else {
        panic!("opened with another order");
    };
    let err = err.to_string();
    assert!(
        err.contains("`test-version`") && err.contains("with `another`"),
        "{err}"
    );
    // Nothing was changed by the refusals: with the order, the newer wins.
    let s = Store::open(config(a.path(), b.path(), true)).unwrap();
    assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(2));
}

#[test]
fn without_an_order_the_higher_segment_wins_a_tie() {
    // The same state, opened without an order once the directories no
    // longer name one: the fallback rule takes the needle in the higher
    // segment, here the older version. This is why a store without an
    // order syncs the flag before acknowledging a put, and why a store
    // with one refuses to open without it.
    let (a, b) = lost_flag();
    unname_order(a.path(), b.path());
    let s = Store::open(config(a.path(), b.path(), false)).unwrap();
    assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(1));
}

/// Two unflagged needles of one identity, the newer one damaged (a bit
/// of its data flipped): the open must still open (it read both needles
/// whole to compare them, and the damaged one's error stopped it: the
/// node never came back, docs/reliability.md, finding 19), and must not
/// answer with the older version: the damaged one answers, with an error.
#[test]
fn an_open_settles_a_damaged_newer_needle_without_serving_the_older() {
    let (a, b) = lost_flag();
    let mut flipped = 0;
    for d in [a.path(), b.path()] {
        for e in std::fs::read_dir(d).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "seg") {
                let mut bytes = std::fs::read(&p).unwrap();
                let want = data(2);
                if let Some(at) = bytes.windows(want.len()).position(|w| w == want.as_slice()) {
                    bytes[at + 100] ^= 0x08;
                    std::fs::write(&p, &bytes).unwrap();
                    flipped += 1;
                }
            }
        }
    }
    assert_eq!(flipped, 1);
    let s = Store::open(config(a.path(), b.path(), true)).unwrap();
    assert!(
        matches!(
            s.get(7, ALT, COOKIE),
            Err(strata_store::StoreError::Corrupt { .. })
        ),
        "{:?}",
        s.get(7, ALT, COOKIE)
    );
    // A new version written over it is what reads back, now and reopened.
    s.put(Tier::Flash, 7, ALT, COOKIE, &data(3)).unwrap();
    assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(3));
    s.close().unwrap();
    let s = Store::open(config(a.path(), b.path(), true)).unwrap();
    assert_eq!(s.get(7, ALT, COOKIE).unwrap().unwrap().data, data(3));
}
