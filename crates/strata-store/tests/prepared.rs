//! Prepared space: zeros written (and synced) ahead of the active
//! segment's needles so that a batch's fdatasync overwrites blocks the file
//! has instead of growing it (`StoreConfig::prepare_ahead`,
//! docs/store-format.md, *Prepared space*). What a running store's files
//! hold is what a kill leaves (every batch is synced before it is
//! acknowledged), so a copy of the directory taken while it runs is opened
//! as after a crash.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::copy_dir;
use std::path::Path;
use std::time::{Duration, Instant};
use strata_store::verify::verify_dir;
use strata_store::{PutItem, Store, StoreConfig, Tier};

fn cfg(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir, Tier::Disk);
    c.auto_compaction = false;
    c.segment_size = 256 << 20;
    c.prepare_ahead = 8 << 20;
    c
}

fn body(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k as usize * 131 + i * 7) as u8).collect()
}

fn put(store: &Store, keys: std::ops::Range<u64>, len: usize) {
    let bodies: Vec<Vec<u8>> = keys.clone().map(|k| body(k, len)).collect();
    let items: Vec<PutItem<'_>> = keys
        .zip(&bodies)
        .map(|(key, data)| PutItem {
            head: &[],
            key,
            alt_key: 0,
            cookie: 7,
            data,
        })
        .collect();
    store.put_batch(Tier::Disk, &items).unwrap();
}

/// The active segment's (path, needle bytes).
fn active(store: &Store) -> (std::path::PathBuf, u64) {
    let s = store.segments().into_iter().find(|s| s.active).unwrap();
    (s.path, s.size)
}

fn file_len(p: &Path) -> u64 {
    std::fs::metadata(p).unwrap().len()
}

/// A store holding objects 0..8 of 64 KiB, once the zeroing thread has
/// prepared space past them (the O_DIRECT tests start there).
fn eight_objects_then_prepared(dir: &std::path::Path) -> Store {
    let store = Store::open(cfg(dir)).unwrap();
    put(&store, 0..8, 64 << 10);
    prepared(&store);
    store
}

/// Waits until the active segment's file holds more than its needles and
/// the zeroing thread is done with it (its length unchanged for 300 ms:
/// zeros are added 4 MiB at a time).
fn prepared(store: &Store) -> u64 {
    let (path, size) = active(store);
    let t = Instant::now();
    let mut last = (file_len(&path), Instant::now());
    loop {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no space was prepared past the needles in 20 s"
        );
        std::thread::sleep(Duration::from_millis(10));
        let now = file_len(&path);
        if now != last.0 {
            last = (now, Instant::now());
        } else if now > size && last.1.elapsed() >= Duration::from_millis(300) {
            return now;
        }
    }
}

fn check(store: &Store, keys: std::ops::Range<u64>, len: usize) {
    for k in keys {
        let o = store
            .get(k, 0, 7)
            .unwrap()
            .unwrap_or_else(|| panic!("key {k} lost"));
        assert_eq!(o.data, body(k, len), "key {k}");
    }
}

#[test]
fn batches_land_in_prepared_zeros_and_a_crash_leaves_only_zeros_to_cut() {
    let d = tempfile::tempdir().unwrap();
    let live = d.path().join("live");
    let store = Store::open({
        let mut c = cfg(&live);
        c.create_dirs = true;
        c
    })
    .unwrap();
    put(&store, 0..16, 64 << 10);
    let len = prepared(&store);
    let (path, size) = active(&store);
    assert!(
        len >= size + (2 << 20),
        "{len} bytes in the file for {size} of needles: at least 2 MiB prepared"
    );
    // A batch inside the prepared space: one sync, the file does not grow.
    let syncs = store.counters().fdatasyncs;
    put(&store, 16..20, 1 << 10);
    assert_eq!(store.counters().fdatasyncs, syncs + 1);
    assert_eq!(
        file_len(&path),
        len,
        "a batch below the prepared end grew the file"
    );
    let (_, size) = active(&store);
    assert!(size < len);

    // What a kill leaves: the needles, then zeros. The open cuts the zeros
    // as prepared space, not as a torn tail, and keeps every batch.
    let crashed = d.path().join("crashed");
    copy_dir(&live, &crashed);
    let v = verify_dir(&crashed, &mut |_, _| {}).unwrap();
    assert!(v.corruptions.is_empty(), "{:?}", v.corruptions);
    assert_eq!(v.prepared_bytes, len - size);
    {
        let back = Store::open(cfg(&crashed)).unwrap();
        let r = back.open_report();
        assert!(r.torn_tails.is_empty(), "{:?}", r.torn_tails);
        assert_eq!(r.prepared_bytes_cut, len - size);
        let (p, s) = active(&back);
        assert_eq!((file_len(&p), s), (size, size));
        check(&back, 0..16, 64 << 10);
        check(&back, 16..20, 1 << 10);
        // It prepares again and keeps taking writes.
        put(&back, 20..36, 64 << 10);
        prepared(&back);
        check(&back, 20..36, 64 << 10);
    }

    // A torn batch in the prepared space (its first bytes written, the
    // rest still zeros) is a torn tail, cut with the zeros after it.
    let torn = d.path().join("torn");
    copy_dir(&live, &torn);
    let tp = torn.join(path.file_name().unwrap());
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::OpenOptions::new().write(true).open(&tp).unwrap();
        f.write_all_at(&[0xa5; 100], size).unwrap();
    }
    {
        let back = Store::open(cfg(&torn)).unwrap();
        let r = back.open_report();
        assert_eq!(r.torn_tails.len(), 1, "{:?}", r.torn_tails);
        assert_eq!(r.torn_tails[0].1, size);
        assert_eq!(file_len(&tp), size);
        check(&back, 0..16, 64 << 10);
        check(&back, 16..20, 1 << 10);
    }

    // A close cuts the zeros: the files hold exactly the needles.
    store.close().unwrap();
    assert_eq!(file_len(&path), size);
    let back = Store::open(cfg(&live)).unwrap();
    assert_eq!(back.open_report().prepared_bytes_cut, 0);
    assert!(back.open_report().torn_tails.is_empty());
    check(&back, 0..16, 64 << 10);
    check(&back, 16..20, 1 << 10);
}

#[test]
fn a_sealed_segment_ends_at_its_last_needle_and_opens_from_its_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path());
    c.segment_size = 6 << 20;
    c.prepare_ahead = 32 << 20;
    let store = Store::open(c.clone()).unwrap();
    // 2 MiB batches: the third passes the segment size and seals it.
    for b in 0..3 {
        put(&store, b * 32..(b + 1) * 32, 64 << 10);
        if b == 0 {
            // Never prepared past the segment size.
            let len = prepared(&store);
            assert!(len <= 6 << 20, "{len} bytes prepared in a 6 MiB segment");
        }
    }
    let segs = store.segments();
    let sealed: Vec<_> = segs.iter().filter(|s| !s.active).collect();
    assert_eq!(sealed.len(), 1);
    assert_eq!(file_len(&sealed[0].path), sealed[0].size);
    store.checkpoint().unwrap();
    // Copied as a kill would leave it: the sealed segment opens from its
    // checkpoint (it covers exactly the file), nothing is scanned but the
    // active segment.
    let crashed = d.path().join("..").join(format!(
        "{}-crashed",
        d.path().file_name().unwrap().to_string_lossy()
    ));
    copy_dir(d.path(), &crashed);
    let back = Store::open(cfg(&crashed)).unwrap();
    assert!(back.open_report().torn_tails.is_empty());
    assert!(
        back.open_report().scanned_segments <= 1,
        "{:?}",
        back.open_report()
    );
    check(&back, 0..96, 64 << 10);
    drop(back);
    std::fs::remove_dir_all(&crashed).unwrap();
}

#[test]
fn preparation_off_leaves_the_file_at_its_needles() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path());
    c.prepare_ahead = 0;
    let store = Store::open(c).unwrap();
    for b in 0..8 {
        put(&store, b * 16..(b + 1) * 16, 64 << 10);
    }
    std::thread::sleep(Duration::from_millis(200));
    let (p, size) = active(&store);
    assert_eq!(file_len(&p), size);
}

/// Large batches into prepared space go to the device with O_DIRECT,
/// rewriting the block they share with the batch before; a delete flag
/// written into that block in between must survive it.
#[test]
fn a_flag_in_the_block_a_large_batch_shares_survives_its_write() {
    let d = tempfile::tempdir().unwrap();
    let store = eight_objects_then_prepared(d.path());
    let mut next = 8;
    for round in 0..6u64 {
        // Odd sizes, so that batches end inside a block.
        let len = (96 << 10) + 24 * round as usize + 8;
        // Six needles, 576 KiB and more: past the O_DIRECT threshold.
        put(&store, next..next + 6, len);
        // The last needle of the batch ends in a block the next batch
        // rewrites: delete it now.
        assert_eq!(store.delete_batch(&[(next + 5, 0)]).unwrap(), vec![true]);
        next += 6;
    }
    let check_all = |s: &Store| {
        check(s, 0..8, 64 << 10);
        for round in 0..6u64 {
            let len = (96 << 10) + 24 * round as usize + 8;
            let k0 = 8 + 6 * round;
            check(s, k0..k0 + 5, len);
            assert!(
                s.get(k0 + 5, 0, 7).unwrap().is_none(),
                "deleted {} is back",
                k0 + 5
            );
        }
    };
    check_all(&store);
    let crashed = d.path().join("crashed");
    copy_dir(d.path(), &crashed);
    let v = verify_dir(&crashed, &mut |_, _| {}).unwrap();
    assert!(v.corruptions.is_empty(), "{:?}", v.corruptions);
    assert_eq!(v.deleted.needles, 6);
    check_all(&Store::open(cfg(&crashed)).unwrap());
    store.close().unwrap();
    check_all(&Store::open(cfg(d.path())).unwrap());
}

#[test]
fn a_small_batch_between_large_ones_is_kept_whole() {
    // A large batch (O_DIRECT) ends inside a block; the store keeps a copy
    // of that block for the next large batch, which rewrites it. A small
    // batch written in between (through the page cache) lands in the same
    // block: the next large batch must carry its bytes, not the copy's.
    let d = tempfile::tempdir().unwrap();
    let store = eight_objects_then_prepared(d.path());
    let mut next = 8;
    for round in 0..6u64 {
        let len = (96 << 10) + 40 * round as usize + 8;
        put(&store, next..next + 6, len);
        put(&store, next + 6..next + 7, 100 + round as usize);
        next += 7;
    }
    put(&store, next..next + 6, 96 << 10);
    let check_all = |s: &Store| {
        check(s, 0..8, 64 << 10);
        for round in 0..6u64 {
            let k0 = 8 + 7 * round;
            check(s, k0..k0 + 6, (96 << 10) + 40 * round as usize + 8);
            check(s, k0 + 6..k0 + 7, 100 + round as usize);
        }
        check(s, 50..56, 96 << 10);
    };
    check_all(&store);
    let crashed = d.path().join("crashed");
    copy_dir(d.path(), &crashed);
    let v = verify_dir(&crashed, &mut |_, _| {}).unwrap();
    assert!(v.corruptions.is_empty(), "{:?}", v.corruptions);
    check_all(&Store::open(cfg(&crashed)).unwrap());
}
