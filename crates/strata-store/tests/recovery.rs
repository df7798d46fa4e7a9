//! Recovery from damaged files: truncated tails, bit-flipped tails, stale
//! or damaged checkpoints, garbage appended, flipped bytes mid-segment.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

mod fixture_common;

use fixture_common::copy_dir;
use std::path::{Path, PathBuf};
use strata_store::{PutItem, Store, StoreConfig, StoreError, Tier};

fn cfg(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir, Tier::Disk);
    c.auto_compaction = false;
    c
}

fn data(k: u64) -> Vec<u8> {
    (0..(200 + k as usize * 3))
        .map(|i| (k as usize * 11 + i) as u8)
        .collect()
}

/// A store with `n` objects in one (active) segment; returns the segment path.
fn fill(dir: &Path, n: u64) -> PathBuf {
    let s = Store::open(cfg(dir)).unwrap();
    for k in 0..n {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    drop(s);
    seg_path(dir)
}

fn seg_path(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap()
}

fn idx_path(dir: &Path) -> PathBuf {
    seg_path(dir).with_extension("idx")
}

fn readable(dir: &Path, n: u64) -> Vec<bool> {
    let s = Store::open(cfg(dir)).unwrap();
    (0..n)
        .map(|k| s.get(k, 0, k as u32).unwrap().map(|o| o.data) == Some(data(k)))
        .collect()
}

#[test]
fn truncated_tail_is_cut_and_everything_before_survives() {
    for cut_back in [1u64, 7, 8, 100, 250] {
        let d = tempfile::tempdir().unwrap();
        let seg = fill(d.path(), 20);
        let len = std::fs::metadata(&seg).unwrap().len();
        // A torn write: the last needle only partly on disk, and the
        // checkpoint of a process that died before writing it.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(len - cut_back)
            .unwrap();
        std::fs::remove_file(idx_path(d.path())).unwrap();
        let s = Store::open(cfg(d.path())).unwrap();
        assert_eq!(s.open_report().torn_tails.len(), 1, "cut {cut_back}");
        drop(s);
        let ok = readable(d.path(), 20);
        assert!(ok[..19].iter().all(|&b| b), "cut {cut_back}: {ok:?}");
        assert!(!ok[19]);
        let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
        assert!(rep.corruptions.is_empty(), "{:?}", rep.corruptions);
        assert_eq!(rep.live.needles, 19);
        // and the store appends after the cut
        let s = Store::open(cfg(d.path())).unwrap();
        s.put(Tier::Disk, 19, 0, 19, &data(19)).unwrap();
        drop(s);
        assert!(readable(d.path(), 20).iter().all(|&b| b));
    }
}

#[test]
fn truncation_below_the_checkpoint_is_detected() {
    let d = tempfile::tempdir().unwrap();
    let seg = fill(d.path(), 20);
    let len = std::fs::metadata(&seg).unwrap().len();
    // the checkpoint covers the whole file; the file loses its last 400
    // bytes (the last needle is 304 bytes long, so two needles are hit)
    std::fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(len - 400)
        .unwrap();
    let ok = readable(d.path(), 20);
    assert_eq!(ok.iter().filter(|&&b| b).count(), 18, "{ok:?}");
    assert!(!ok[18] && !ok[19]);
}

/// The last needle of the newest segment, past its checkpoint: with bytes
/// missing where a crash tore it (zeros over its end), it is a torn tail
/// and cut; with one bit flipped in a needle otherwise whole, it is damage
/// (a torn needle misses whole sectors), kept: a read of it is a
/// corruption error, not an older version nor an absent key, and the
/// needles before it stay (docs/reliability.md, finding 19).
#[test]
fn bit_flipped_tail_is_recovered_from() {
    for torn in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let seg = fill(d.path(), 20);
        std::fs::remove_file(idx_path(d.path())).unwrap();
        let mut b = std::fs::read(&seg).unwrap();
        let n = b.len();
        if torn {
            b[n - 24..].fill(0); // its last data bytes and footer never written
        } else {
            b[n - 20] ^= 0x01; // one bit inside the last needle's data
        }
        std::fs::write(&seg, &b).unwrap();
        let s = Store::open(cfg(d.path())).unwrap();
        assert_eq!(
            s.open_report().torn_tails.len(),
            usize::from(torn),
            "torn {torn}"
        );
        if !torn {
            assert!(matches!(s.get(19, 0, 19), Err(StoreError::Corrupt { .. })));
        }
        drop(s);
        let s = Store::open(cfg(d.path())).unwrap();
        for k in 0..19 {
            assert_eq!(
                s.get(k, 0, k as u32).unwrap().unwrap().data,
                data(k),
                "torn {torn}"
            );
        }
        if torn {
            assert_eq!(s.get(19, 0, 19).unwrap(), None);
        }
        drop(s);
        let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
        assert_eq!(rep.corruptions.is_empty(), torn, "torn {torn}");
    }
}

#[test]
fn garbage_appended_after_the_last_needle_is_cut() {
    let d = tempfile::tempdir().unwrap();
    let seg = fill(d.path(), 5);
    let mut f = std::fs::OpenOptions::new().append(true).open(&seg).unwrap();
    std::io::Write::write_all(&mut f, b"NEDL partial header and some junk").unwrap();
    drop(f);
    let s = Store::open(cfg(d.path())).unwrap();
    assert_eq!(s.open_report().torn_tails.len(), 1);
    drop(s);
    assert!(readable(d.path(), 5).iter().all(|&x| x));
}

#[test]
fn a_damaged_checkpoint_falls_back_to_a_scan() {
    let d = tempfile::tempdir().unwrap();
    fill(d.path(), 30);
    let idx = idx_path(d.path());
    let mut b = std::fs::read(&idx).unwrap();
    let n = b.len();
    b[n / 2] ^= 0xff;
    std::fs::write(&idx, &b).unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    assert_eq!(s.open_report().scanned_segments, 1);
    drop(s);
    assert!(readable(d.path(), 30).iter().all(|&x| x));
}

#[test]
fn a_flipped_byte_mid_segment_is_a_corruption_error_naming_segment_and_offset() {
    let d = tempfile::tempdir().unwrap();
    let seg = fill(d.path(), 10);
    let s = Store::open(cfg(d.path())).unwrap();
    s.seal_active(0).unwrap();
    drop(s);
    // needle k is at 64 + sum of earlier needle lengths
    let len = |k: u64| (32 + data(k).len() as u64 + 8).next_multiple_of(8);
    let off4: u64 = 64 + (0..4).map(len).sum::<u64>();
    let mut b = std::fs::read(&seg).unwrap();
    b[(off4 + 40) as usize] ^= 0x80;
    std::fs::write(&seg, &b).unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    match s.get(4, 0, 4) {
        Err(StoreError::Corrupt {
            offset, segment, ..
        }) => {
            assert_eq!(offset, off4);
            assert_eq!(segment, 1);
        }
        other => panic!("expected a corruption error, got {other:?}"),
    }
    assert_eq!(s.get(5, 0, 5).unwrap().unwrap().data, data(5));
    drop(s);
    let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
    assert!(rep.has_corruption());
    assert_eq!(rep.corruptions[0].offset, off4);
    // Compaction drops the damaged needle and keeps the rest.
    let s = Store::open(cfg(d.path())).unwrap();
    let id = s.segments().iter().find(|x| !x.active).unwrap().id;
    s.compact(id, &mut |_| {}).unwrap();
    assert_eq!(s.get(4, 0, 4).unwrap(), None);
    assert_eq!(s.get(9, 0, 9).unwrap().unwrap().data, data(9));
}

fn multi_cfg(dir: &Path) -> StoreConfig {
    let mut c = cfg(dir);
    c.segment_size = 8192;
    // A run of several hash partitions (200 objects: 5), so that a merge
    // swaps them in one at a time.
    c.run_partition_size = 40;
    c
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
}

/// The byte range of partition `q`'s keys in a run file of version 2
/// (docs/store-format.md, *Run file*).
fn keys_range(b: &[u8], q: usize) -> std::ops::Range<usize> {
    let width = u64::from(u32::from_le_bytes(b[12..16].try_into().unwrap()))
        + u64::from(u32::from_le_bytes(b[16..20].try_into().unwrap()));
    let dir = 64 + 16 * le_u64(b, 32) as usize + 48 * q;
    let (offset, slots, buckets) = (le_u64(b, dir), le_u64(b, dir + 24), le_u64(b, dir + 32));
    let at = offset + (buckets * 2).next_multiple_of(8) + (slots * width).div_ceil(64) * 8;
    at as usize..(at + slots * 12) as usize
}

fn multi_fill(dir: &Path, n: u64) -> Store {
    let s = Store::open(multi_cfg(dir)).unwrap();
    for k in 0..n {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    s
}

fn all_readable(s: &Store, n: u64, deleted: &[u64]) {
    for k in 0..n {
        let got = s.get(k, 0, k as u32).unwrap().map(|o| o.data);
        if deleted.contains(&k) {
            assert_eq!(got, None, "key {k} resurrected");
        } else {
            assert_eq!(got, Some(data(k)), "key {k}");
        }
    }
}

#[test]
fn a_damaged_or_missing_run_file_is_rebuilt_from_the_checkpoints() {
    // (damage, whether the open still uses the run: a restart reads only
    // the header, directory, pilots and slot tables; a merge then finds the
    // identities of the run in the checkpoints if a partition's keys are
    // damaged, from that partition on: the first, or the last, after the
    // others were swapped in)
    for (damage, kept) in [
        ("flip index", false),
        ("flip first keys", true),
        ("flip last keys", true),
        ("truncate", false),
        ("remove", false),
        ("garbage", false),
    ] {
        for lost_checkpoints in [false, true] {
            let d = tempfile::tempdir().unwrap();
            let s = multi_fill(d.path(), 200);
            s.merge_index().unwrap();
            assert!(s.delete(7, 0).unwrap());
            drop(s);
            let run = d.path().join("strata.run");
            let mut b = std::fs::read(&run).unwrap();
            let n = b.len();
            match damage {
                "flip index" => {
                    b[80] ^= 0x20;
                    std::fs::write(&run, &b).unwrap();
                }
                "flip first keys" | "flip last keys" => {
                    let parts = u32::from_le_bytes(b[20..24].try_into().unwrap()) as usize;
                    assert!(parts > 1, "{parts} partitions");
                    let q = if damage == "flip first keys" {
                        0
                    } else {
                        parts - 1
                    };
                    let r = keys_range(&b, q);
                    b[r.end - 3] ^= 0x20;
                    std::fs::write(&run, &b).unwrap();
                }
                "truncate" => std::fs::write(&run, &b[..n - 5]).unwrap(),
                "remove" => std::fs::remove_file(&run).unwrap(),
                _ => std::fs::write(&run, b"STRATRUN and then nothing useful").unwrap(),
            }
            if lost_checkpoints {
                for e in std::fs::read_dir(d.path()).unwrap() {
                    let p = e.unwrap().path();
                    if p.extension().is_some_and(|x| x == "idx") {
                        std::fs::remove_file(p).unwrap();
                    }
                }
            }
            let what = format!("{damage}, checkpoints lost: {lost_checkpoints}");
            let s = Store::open(multi_cfg(d.path())).unwrap();
            assert_eq!(s.memory().sealed_objects > 0, kept, "{what}");
            all_readable(&s, 200, &[7]);
            // and the next merge writes a good one
            s.merge_index().unwrap();
            all_readable(&s, 200, &[7]);
            drop(s);
            let s = Store::open(multi_cfg(d.path())).unwrap();
            assert!(s.memory().sealed_objects > 150, "{what}");
            all_readable(&s, 200, &[7]);
        }
    }
}

#[test]
fn a_run_file_older_than_the_segments_is_settled_on_open() {
    let d = tempfile::tempdir().unwrap();
    let s = multi_fill(d.path(), 300);
    s.merge_index().unwrap();
    // After the merge: overwrites (some with the same data), deletes, and a
    // compaction that renumbers a segment the run covers.
    for k in (0..300u64).step_by(5) {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    let deleted: Vec<u64> = (0..300u64).step_by(7).collect();
    let ids: Vec<(u64, u32)> = deleted.iter().map(|&k| (k, 0)).collect();
    assert!(s.delete_batch(&ids).unwrap().iter().all(|&g| g));
    s.compact_all(0.05, &mut |_| {}).unwrap();
    all_readable(&s, 300, &deleted);
    drop(s);
    let s = Store::open(multi_cfg(d.path())).unwrap();
    all_readable(&s, 300, &deleted);
    // the stale checkpoints too: remove them all
    drop(s);
    for e in std::fs::read_dir(d.path()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "idx") {
            std::fs::remove_file(p).unwrap();
        }
    }
    let s = Store::open(multi_cfg(d.path())).unwrap();
    all_readable(&s, 300, &deleted);
}

/// A store in `dir` with keys 0..10, then a newer needle of key 3
/// (`newer`), then (`more`) keys 10..15, and no checkpoint: the next open
/// scans the segment. Its path and the newer needle's offset.
fn newer_key_3_unchecked(dir: &Path, newer: &[u8], more: bool) -> (PathBuf, u64) {
    let len = |d: &[u8]| (32 + d.len() as u64 + 8).next_multiple_of(8);
    let s = Store::open(cfg(dir)).unwrap();
    for k in 0..10 {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    s.put(Tier::Disk, 3, 0, 3, newer).unwrap();
    if more {
        for k in 10..15 {
            s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
        }
    }
    drop(s);
    std::fs::remove_file(idx_path(dir)).unwrap();
    (
        seg_path(dir),
        64 + (0..10).map(|k| len(&data(k))).sum::<u64>(),
    )
}

/// A needle damaged mid-segment, in a part of the active segment the open
/// scans (no checkpoint covers it: a crash came first), whose identity has
/// an older needle earlier in the same segment: the open must keep the
/// damaged needle as the identity's newest, so that a read fails its
/// checksum, and never find the older needle and serve it as the newest
/// (docs/reliability.md, finding 18: a cluster node served the older
/// version so, where another replica held the newest). Damage in the
/// data, and a bit flipped in the header (the header's checksum names the
/// one bit that explains it, so the identity is still known). A put of the
/// identity afterwards, as a cluster's read repair does, reads back.
#[test]
fn a_damaged_newest_needle_is_not_served_as_its_older_version() {
    let newer = |k: u64| vec![0xA5; 300 + k as usize];
    // Bytes to flip (one bit each), counted from the start of the newer
    // needle of key 3: its data, and a header field with its data too. One
    // header bit alone is corrected (the next test).
    for (ats, what) in [
        (&[40 + 100][..], "data"),
        (&[9, 140], "key and data"),
        (&[5, 140], "cookie and data"),
        (&[26, 140], "size word and data"),
        (&[1, 140], "magic and data"),
        (&[29, 140], "header checksum and data"),
    ] {
        let d = tempfile::tempdir().unwrap();
        let (seg, off) = newer_key_3_unchecked(d.path(), &newer(3), true);
        let mut b = std::fs::read(&seg).unwrap();
        for &at in ats {
            b[(off + at) as usize] ^= 0x10;
        }
        std::fs::write(&seg, &b).unwrap();
        // `strata store verify` counts it as the open does: key 3's older
        // needle is overwritten, not live.
        let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
        assert_eq!(rep.corruptions.len(), 1, "{what}: {:?}", rep.corruptions);
        assert_eq!(
            (rep.live.needles, rep.overwritten.needles),
            (14, 1),
            "{what}"
        );
        let s = Store::open(cfg(d.path())).unwrap();
        assert_eq!(s.open_report().corrupt_regions, vec![(1, off)], "{what}");
        assert!(s.open_report().torn_tails.is_empty(), "{what}");
        // Named: nothing is lost to the index.
        assert!(s.open_report().nameless_regions.is_empty(), "{what}");
        assert!(!s.open_report().may_lack_records(), "{what}");
        match s.get(3, 0, 3) {
            Err(StoreError::Corrupt { offset, .. }) => assert_eq!(offset, off, "{what}"),
            other => panic!("{what}: expected a corruption error, got {other:?}"),
        }
        for k in (0..15).filter(|&k| k != 3) {
            assert_eq!(
                s.get(k, 0, k as u32).unwrap().unwrap().data,
                data(k),
                "{what}: key {k}"
            );
        }
        // A good copy written again is what reads back, now and after a reopen.
        s.put(Tier::Disk, 3, 0, 3, &newer(4)).unwrap();
        assert_eq!(s.get(3, 0, 3).unwrap().unwrap().data, newer(4), "{what}");
        drop(s);
        let s = Store::open(cfg(d.path())).unwrap();
        assert_eq!(s.get(3, 0, 3).unwrap().unwrap().data, newer(4), "{what}");
    }
}

/// A needle damaged in the scanned part of the active segment whose header
/// names no identity (two of its header bytes hit: the checksum corrects
/// one bit, not two): the open cannot tell whose newest needle it was, so
/// the identity reads as its older needle. The open says so
/// (`nameless_regions`, `may_lack_records`): a cluster node then answers
/// no reads of the row until it has caught up from its replicas
/// (docs/reliability.md, finding 25). Also at the segment's end, where the
/// damage is cut as a torn tail.
#[test]
fn a_nameless_damaged_needle_is_reported_as_records_that_may_be_lacking() {
    let newer = vec![0xA5; 300];
    for last in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let (seg, off) = newer_key_3_unchecked(d.path(), &newer, !last);
        let mut b = std::fs::read(&seg).unwrap();
        // The key and the cookie: two bits, no identity.
        b[(off + 9) as usize] ^= 0x10;
        b[(off + 5) as usize] ^= 0x10;
        std::fs::write(&seg, &b).unwrap();
        let s = Store::open(cfg(d.path())).unwrap();
        let r = s.open_report();
        if last {
            assert_eq!(r.torn_tails.len(), 1, "{r:?}");
        } else {
            assert_eq!(r.nameless_regions, vec![(1, off)], "{r:?}");
            assert_eq!(r.corrupt_regions, vec![(1, off)], "{r:?}");
        }
        assert!(r.may_lack_records(), "last {last}");
        // Noted on disk, for the opens after this one.
        assert!(
            d.path().join(strata_store::DAMAGE_NOTE).exists(),
            "last {last}"
        );
        // What the report warns of: the older needle is what reads back.
        assert_eq!(
            s.get(3, 0, 3).unwrap().unwrap().data,
            data(3),
            "last {last}"
        );
    }
}

/// One flipped bit in a needle's header, its data whole: the header's
/// checksum corrects it (one bit unambiguously) and the data's vouches for
/// the rest, so the needle reads as written, through its checkpoint (the
/// read) and by a scan (the open indexes it, and writes the one byte back
/// as it was), instead of failing as corrupt; `strata store verify`
/// reports one left on disk, and a compaction rewrites it whole. Every bit of the header of a small needle, which is most of a
/// small object's bits (32 of its 240 bytes here).
#[test]
fn one_flipped_header_bit_is_corrected_and_the_object_served() {
    let len = |k: u64| (32 + data(k).len() as u64 + 8).next_multiple_of(8);
    let off3: u64 = 64 + (0..3).map(len).sum::<u64>();
    for bit in (0..256u64).filter(|b| !(160..192).contains(b)) {
        let scan = bit % 2 == 1;
        let d = tempfile::tempdir().unwrap();
        let seg = fill(d.path(), 6);
        let s = Store::open(cfg(d.path())).unwrap();
        s.seal_active(0).unwrap();
        drop(s);
        let written = std::fs::read(&seg).unwrap();
        let mut b = written.clone();
        b[(off3 + bit / 8) as usize] ^= 1 << (bit % 8);
        std::fs::write(&seg, &b).unwrap();
        if scan {
            std::fs::remove_file(seg.with_extension("idx")).unwrap();
        }
        let s = Store::open(cfg(d.path())).unwrap();
        // A header the open's scan mended is written back as written; one
        // a checkpoint covers is mended by each read, and left as it is.
        let now = std::fs::read(&seg).unwrap();
        assert_eq!(now == written, scan, "bit {bit}");
        assert_eq!(now == b, !scan, "bit {bit}");
        for k in 0..6 {
            let got = s.get(k, 0, k as u32).map(|o| o.map(|o| o.data));
            assert_eq!(
                got.ok(),
                Some(Some(data(k))),
                "bit {bit}, scan {scan}: key {k}"
            );
        }
        let report = s.open_report();
        assert!(report.corrupt_regions.is_empty(), "bit {bit}");
        let mended = if scan { vec![(1, off3)] } else { vec![] };
        assert_eq!(report.mended_headers, mended, "bit {bit}");
        drop(s);
        let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
        assert_eq!(rep.live.needles, 6, "bit {bit}");
        if scan {
            assert!(
                rep.corruptions.is_empty(),
                "bit {bit}: {:?}",
                rep.corruptions
            );
            continue;
        }
        assert_eq!(rep.corruptions.len(), 1, "bit {bit}");
        assert_eq!(rep.corruptions[0].offset, off3, "bit {bit}");
        if bit % 16 == 0 {
            // A compaction writes the needle anew: nothing left to report.
            let s = Store::open(cfg(d.path())).unwrap();
            let id = s.segments().iter().find(|x| !x.active).unwrap().id;
            s.compact(id, &mut |_| {}).unwrap();
            assert_eq!(s.get(3, 0, 3).unwrap().unwrap().data, data(3), "bit {bit}");
            drop(s);
            let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
            assert!(
                rep.corruptions.is_empty(),
                "bit {bit}: {:?}",
                rep.corruptions
            );
        }
    }
}

/// Damage at the end of a segment that is not its directory's newest (a
/// sealed segment whose sealed checkpoint a crash kept from being written,
/// so the open scans it) is damage to acknowledged needles, not a torn
/// write: only the newest segment takes batches, and the next segment is
/// made only after its predecessor's last batch is synced. The open must
/// keep the rest of that last batch; it cut the whole batch as a torn tail
/// (docs/reliability.md, finding 19: `flip-needle` trials lost 2 to 7
/// acknowledged objects to one flipped bit).
#[test]
fn damage_at_the_end_of_an_older_segment_is_not_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    for k in 0..5 {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    let batch: Vec<Vec<u8>> = (10..15).map(data).collect();
    let items: Vec<PutItem<'_>> = (10..15u64)
        .zip(&batch)
        .map(|(k, b)| PutItem {
            head: &[],
            key: k,
            alt_key: 0,
            cookie: k as u32,
            data: b,
        })
        .collect();
    s.put_batch(Tier::Disk, &items).unwrap();
    s.seal_active(0).unwrap();
    s.put(Tier::Disk, 20, 0, 20, &data(20)).unwrap();
    drop(s);
    let seg = d.path().join("0000000000000001-00000000.seg");
    std::fs::remove_file(seg.with_extension("idx")).unwrap();
    let mut b = std::fs::read(&seg).unwrap();
    let last = (32 + data(14).len() as u64 + 8).next_multiple_of(8);
    let off = b.len() as u64 - last;
    b[(off + 40) as usize] ^= 0x04; // in key 14's data
    std::fs::write(&seg, &b).unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    assert!(
        s.open_report().torn_tails.is_empty(),
        "{:?}",
        s.open_report().torn_tails
    );
    assert_eq!(s.open_report().corrupt_regions, vec![(1, off)]);
    assert!(matches!(s.get(14, 0, 14), Err(StoreError::Corrupt { .. })));
    for k in (0..5).chain(10..14).chain([20]) {
        assert_eq!(
            s.get(k, 0, k as u32).unwrap().unwrap().data,
            data(k),
            "key {k}"
        );
    }
    drop(s);
    assert_eq!(std::fs::metadata(&seg).unwrap().len(), b.len() as u64);
}

/// The flags word lies outside the header checksum (a delete rewrites it
/// in place), so in segments of version 3 it is coded: 16 copies of each
/// flag. A flipped bit in it must neither delete a live object nor bring
/// a deleted one back, whether the open reads the segment's checkpoint
/// (the read checks the flags) or scans the needles (no checkpoint); more
/// flipped bits than the code corrects are damage, never another answer.
/// With the plain flags of versions 1 and 2, each of the first two cases
/// answered wrongly (docs/reliability.md, finding 20).
#[test]
fn a_flipped_flag_bit_neither_deletes_nor_restores_an_object() {
    let len = |k: u64| (32 + data(k).len() as u64 + 8).next_multiple_of(8);
    let off = |k: u64| 64 + (0..k).map(len).sum::<u64>();
    // (key, deleted, bits of the flags word flipped)
    let cases: [(u64, bool, &[u32]); 7] = [
        (0, false, &[0]),
        (1, false, &[16]),
        (2, true, &[0]),
        (3, false, &[0, 5, 9]),
        (4, true, &[1, 7, 15]),
        (5, false, &[17, 20, 31]),
        (6, true, &[3, 18]),
    ];
    for scan in [false, true] {
        let d = tempfile::tempdir().unwrap();
        let s = Store::open(cfg(d.path())).unwrap();
        for k in 0..10 {
            s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
        }
        for &(k, deleted, _) in &cases {
            if deleted {
                assert!(s.delete(k, 0).unwrap());
            }
        }
        drop(s);
        let seg = seg_path(d.path());
        let mut b = std::fs::read(&seg).unwrap();
        assert_eq!(&b[8..12], &3u32.to_le_bytes(), "segment version");
        for &(k, _, bits) in &cases {
            for &bit in bits {
                b[(off(k) + 20 + u64::from(bit / 8)) as usize] ^= 1 << (bit % 8);
            }
        }
        // Four bits of one flag: beyond the code's correction.
        for bit in [0, 2, 4, 6] {
            b[(off(8) + 20 + bit / 8) as usize] ^= 1 << (bit % 8);
        }
        std::fs::write(&seg, &b).unwrap();
        if scan {
            std::fs::remove_file(idx_path(d.path())).unwrap();
        }
        let s = Store::open(cfg(d.path())).unwrap();
        for &(k, deleted, bits) in &cases {
            let got = s.get(k, 0, k as u32).unwrap().map(|o| o.data);
            let want = (!deleted).then(|| data(k));
            assert_eq!(got, want, "scan {scan}: key {k}, bits {bits:?}");
        }
        for k in [7, 9] {
            assert_eq!(s.get(k, 0, k as u32).unwrap().unwrap().data, data(k));
        }
        if scan {
            // The scan finds the needle damaged and reports it.
            assert!(
                s.open_report().corrupt_regions.contains(&(1, off(8))),
                "{:?}",
                s.open_report().corrupt_regions
            );
        } else {
            match s.get(8, 0, 8) {
                Err(StoreError::Corrupt { offset, .. }) => assert_eq!(offset, off(8)),
                other => panic!("key 8: expected a corruption error, got {other:?}"),
            }
        }
        // A delete rewrites the whole word: what it finds corrected reads
        // the same after a reopen, with no checkpoint to lean on.
        assert!(s.delete(3, 0).unwrap());
        drop(s);
        std::fs::remove_file(idx_path(d.path())).unwrap();
        let s = Store::open(cfg(d.path())).unwrap();
        assert_eq!(s.get(3, 0, 3).unwrap(), None);
        assert_eq!(s.get(0, 0, 0).unwrap().unwrap().data, data(0));
        assert_eq!(s.get(2, 0, 2).unwrap(), None);
    }
}

/// One flipped bit anywhere in a segment's 64-byte superblock is corrected
/// by its checksum and written back: the segment serves as it was, instead
/// of being set aside in `quarantine/` with every object in it (on a single
/// node, lost until an operator restores the file). Two flipped bits are
/// not corrected: the segment is quarantined as before. Every fifth bit
/// (the unit test in `superblock.rs` takes every bit).
#[test]
fn one_flipped_superblock_bit_is_corrected_and_written_back() {
    let base = tempfile::tempdir().unwrap();
    let seg = fill(base.path(), 8);
    let s = Store::open(cfg(base.path())).unwrap();
    s.seal_active(0).unwrap();
    drop(s);
    let name = seg.file_name().unwrap().to_owned();
    let copy = |flips: &[usize]| {
        let d = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(base.path()).unwrap().flatten() {
            if e.path().is_file() {
                std::fs::copy(e.path(), d.path().join(e.file_name())).unwrap();
            }
        }
        let p = d.path().join(&name);
        let mut b = std::fs::read(&p).unwrap();
        for &bit in flips {
            b[bit / 8] ^= 1 << (bit % 8);
        }
        std::fs::write(&p, &b).unwrap();
        d
    };
    for bit in (0..64 * 8).step_by(5) {
        let d = copy(&[bit]);
        let p = d.path().join(&name);
        let s = Store::open(cfg(d.path())).unwrap();
        assert!(s.open_report().quarantined.is_empty(), "bit {bit}");
        assert_eq!(
            s.open_report().mended_superblocks,
            vec![p.clone()],
            "bit {bit}"
        );
        for k in 0..8 {
            assert_eq!(
                s.get(k, 0, k as u32).unwrap().unwrap().data,
                data(k),
                "bit {bit}"
            );
        }
        drop(s);
        let b = std::fs::read(&p).unwrap();
        let sb = strata_store::format::superblock::Superblock::parse(&b).unwrap();
        assert_eq!(sb.id, 1, "bit {bit}");
        if bit % 160 == 0 {
            let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
            assert!(
                rep.corruptions.is_empty(),
                "bit {bit}: {:?}",
                rep.corruptions
            );
        }
    }
    // verify reports a flipped bit (it changes nothing), and reads on.
    let d = copy(&[100]);
    let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
    assert_eq!(rep.corruptions.len(), 1, "{:?}", rep.corruptions);
    assert_eq!(rep.live.needles, 8);
    // Two bits: set aside, as before.
    let d = copy(&[3, 200]);
    let s = Store::open(cfg(d.path())).unwrap();
    assert_eq!(s.open_report().quarantined.len(), 1);
    assert!(s.open_report().mended_superblocks.is_empty());
    assert_eq!(s.get(2, 0, 2).unwrap(), None);
}

/// The newer versions the torn-batch tests write: other bytes than
/// `data(k)`, of `len` bytes.
fn newer_data(k: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (k as usize * 7 + i * 13 + 5) as u8)
        .collect()
}

/// The active segment of `s`: (id, path, bytes of its needles).
fn active_seg(s: &Store) -> (u64, PathBuf, u64) {
    let a = s.segments().into_iter().find(|x| x.active).unwrap();
    (a.id, a.path, a.size)
}

/// Waits until the zeroing thread has prepared space past the active
/// segment's needles and is done with it (the file's length unchanged for
/// 300 ms: it adds 4 MiB at a time).
fn wait_prepared(s: &Store) {
    let (_, path, size) = active_seg(s);
    let len = |p: &Path| std::fs::metadata(p).unwrap().len();
    let t = std::time::Instant::now();
    let mut last = (len(&path), std::time::Instant::now());
    loop {
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "no space was prepared past the needles in 20 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
        let now = len(&path);
        if now != last.0 {
            last = (now, std::time::Instant::now());
        } else if now > size && last.1.elapsed() >= std::time::Duration::from_millis(300) {
            return;
        }
    }
}

/// A store for the torn-batch tests (issue 33), in `dir` (created):
/// keys 0..10 acknowledged in segment 1, sealed; keys 20..26 (one batch)
/// and 30 in segment 2, the active one; every checkpoint written. With
/// `prepare`, batches land in prepared space (zeros written and synced
/// ahead of the needles), which is there when this returns.
fn before_torn_batch(dir: &Path, prepare: bool) -> Store {
    let mut c = cfg(dir);
    c.create_dirs = true;
    c.prepare_ahead = if prepare { 8 << 20 } else { 0 };
    let s = Store::open(c).unwrap();
    for k in 0..10 {
        s.put(Tier::Disk, k, 0, k as u32, &data(k)).unwrap();
    }
    s.seal_active(0).unwrap();
    let batch: Vec<Vec<u8>> = (20..26).map(data).collect();
    let items: Vec<PutItem<'_>> = (20..26u64)
        .zip(&batch)
        .map(|(k, b)| PutItem {
            head: &[],
            key: k,
            alt_key: 0,
            cookie: k as u32,
            data: b,
        })
        .collect();
    s.put_batch(Tier::Disk, &items).unwrap();
    s.put(Tier::Disk, 30, 0, 30, &data(30)).unwrap();
    if prepare {
        wait_prepared(&s);
    }
    s.checkpoint().unwrap();
    s
}

/// The keys acknowledged by [`before_torn_batch`].
fn acknowledged_before() -> impl Iterator<Item = u64> {
    (0..10).chain(20..26).chain([30])
}

/// The overwrite batch of the torn-batch tests: key 1's second version
/// first (long enough to reach into the pages a power cut loses), new
/// keys 100.. (`big`: 24 of 3,000 bytes, 80 KiB in all, a batch the store
/// writes with O_DIRECT into prepared space; else 6 of 1,500), key 20's
/// second version among them (its first is in the same segment), and
/// three small new keys last, so that the batch's last page holds whole
/// needles, the batch end among them.
fn torn_batch_items(big: bool) -> Vec<(u64, Vec<u8>)> {
    let (n, len) = if big { (24, 3000) } else { (6, 1500) };
    let mut v = vec![(1, newer_data(1, 6000))];
    for i in 0..n {
        if i == 2 {
            v.push((20, newer_data(20, len)));
        }
        v.push((100 + i, newer_data(100 + i, len)));
    }
    for k in 200..203 {
        v.push((k, newer_data(k, 300)));
    }
    v
}

fn put_items(s: &Store, items: &[(u64, Vec<u8>)]) {
    let items: Vec<PutItem<'_>> = items
        .iter()
        .map(|(k, b)| PutItem {
            head: &[],
            key: *k,
            alt_key: 0,
            cookie: *k as u32,
            data: b,
        })
        .collect();
    s.put_batch(Tier::Disk, &items).unwrap();
}

/// A batch an overwrite wrote but a power cut tore before its
/// `fdatasync` returned (so it was never acknowledged): the pages of one
/// `pwritev` reach the medium in any order, and here its first and last
/// pages did while those between read as what was there before (zeros:
/// prepared space, or a hole of the file the write extended). Its needles
/// after the lost pages are whole, the batch end among them, and the
/// header of key 1's new needle, whose data the lost pages held, names
/// its identity. The open must cut the whole batch, as a torn tail: key
/// 1 reads as its acknowledged first version (in an older segment),
/// key 20 as its first (earlier in the same segment), the batch's new
/// keys as absent, not as errors, nothing acknowledged is lost, and the
/// report says what was cut (`may_lack_records`: a cluster replica
/// catches up). Key 1 answered a corruption error for good, and some new
/// keys read back, before (issue 33). Also with the batch's first page
/// lost instead (its first needle's header with it), and its last pages
/// (a torn tail, which the open cut before too). Written through the
/// real `put_batch`, with and without prepared space, a small batch
/// (page cache) and a large one (O_DIRECT when prepared), the active
/// segment's checkpoint kept (the scan starts at the batch) or lost (it
/// starts at the segment's first needle). `strata store verify` reports
/// it as a torn tail, not as corruption.
#[test]
fn a_batch_a_power_cut_tore_in_its_middle_is_cut_whole() {
    let mut cases = Vec::new();
    for prepare in [false, true] {
        for big in [false, true] {
            for checkpointed in [true, false] {
                for lose in ["middle", "first", "last"] {
                    cases.push((prepare, big, checkpointed, lose));
                }
            }
        }
    }
    for (prepare, big, checkpointed, lose) in cases {
        let what = format!("prepare {prepare}, big {big}, checkpointed {checkpointed}, {lose}");
        let d = tempfile::tempdir().unwrap();
        let (live, crashed) = (d.path().join("live"), d.path().join("crashed"));
        let s = before_torn_batch(&live, prepare);
        let (id, path, start) = active_seg(&s);
        // The medium as the batch's write found it: every earlier batch
        // synced (and its superseded flags, none here).
        copy_dir(&live, &crashed);
        let items = torn_batch_items(big);
        put_items(&s, &items);
        let (_, _, end) = active_seg(&s);
        let after = std::fs::read(&path).unwrap();
        drop(s);
        let target = crashed.join(path.file_name().unwrap());
        let before = std::fs::read(&target).unwrap();
        // The pages from the one where the last needle starts reach the
        // medium, and so does the batch's first page ("middle").
        let last_at = end - (32 + 300 + 8u64).next_multiple_of(8);
        let first_page_end = (start / 4096 + 1) * 4096;
        let lost = match lose {
            "middle" => first_page_end..last_at / 4096 * 4096,
            "first" => start..first_page_end,
            _ => last_at / 4096 * 4096..end,
        };
        assert!(lost.end > lost.start + 512, "{what}: {lost:?}");
        let mut torn = after.clone();
        for i in lost.clone() {
            torn[i as usize] = before.get(i as usize).copied().unwrap_or(0);
        }
        std::fs::write(&target, &torn).unwrap();
        if !checkpointed {
            std::fs::remove_file(target.with_extension("idx")).unwrap();
        }

        let rep = strata_store::verify::verify_dir(&crashed, &mut |_, _| {}).unwrap();
        assert!(!rep.has_corruption(), "{what}: {:?}", rep.corruptions);
        assert!(
            rep.corruptions
                .iter()
                .any(|c| c.torn_tail && c.offset == start),
            "{what}: {:?}",
            rep.corruptions
        );

        let mut c = cfg(&crashed);
        c.prepare_ahead = if prepare { 8 << 20 } else { 0 };
        let s = Store::open(c.clone()).unwrap();
        let r = s.open_report().clone();
        // Cut from the batch's start; what is zeros past its needles is
        // prepared space (a torn tail with bytes other than zeros in it
        // is torn to the file's end).
        assert_eq!(r.torn_tails.len(), 1, "{what}: {r:?}");
        let (seg, at, cut) = r.torn_tails[0];
        assert_eq!((seg, at), (id, start), "{what}: {r:?}");
        assert_eq!(
            cut + r.prepared_bytes_cut,
            torn.len() as u64 - start,
            "{what}: {r:?}"
        );
        if lose != "last" {
            assert_eq!(cut, end - start, "{what}: {r:?}");
        }
        assert!(r.corrupt_regions.is_empty(), "{what}: {r:?}");
        assert!(r.may_lack_records(), "{what}");
        assert_eq!(std::fs::metadata(&target).unwrap().len(), start, "{what}");
        for k in acknowledged_before() {
            let got = s.get(k, 0, k as u32).map(|o| o.map(|o| o.data));
            assert_eq!(got.ok(), Some(Some(data(k))), "{what}: key {k}");
        }
        for (k, _) in items.iter().filter(|(k, _)| *k >= 100) {
            let got = s.get(*k, 0, *k as u32).map(|o| o.map(|o| o.data));
            assert_eq!(got.ok(), Some(None), "{what}: new key {k}");
        }
        // The open noted the damage before it cut the tail.
        let note = crashed.join(strata_store::DAMAGE_NOTE);
        let noted = std::fs::read_to_string(&note).unwrap_or_default();
        assert!(noted.contains("torn tail"), "{what}: {noted:?}");
        // The store takes the batch again, and keeps it.
        put_items(&s, &items);
        drop(s);
        // Until told the loss is made good, every open says so (no new
        // damage found), then no more.
        let s = Store::open(c.clone()).unwrap();
        let r = s.open_report();
        assert!(r.torn_tails.is_empty(), "{what}: {r:?}");
        assert_eq!(r.earlier_damage.as_deref(), Some(noted.as_str()), "{what}");
        assert!(r.may_lack_records(), "{what}");
        s.damage_dealt_with().unwrap();
        drop(s);
        let s = Store::open(c).unwrap();
        assert!(!s.open_report().may_lack_records(), "{what}");
        assert!(!note.exists(), "{what}");
        for (k, b) in &items {
            assert_eq!(
                s.get(*k, 0, *k as u32).unwrap().unwrap().data,
                *b,
                "{what}: key {k} written again"
            );
        }
    }
}

/// What must stay as it was beside the rule above: damage that is not a
/// torn last batch is kept in place (reported; a damaged needle whose
/// header names its identity answers a corruption error, never an older
/// version), and no acknowledged needle after it is cut. The batch of
/// the test above, acknowledged this time, and the active segment's
/// checkpoint lost (a crash came before it was written):
/// - one bit flipped in the data of a needle in its middle, the batch the
///   segment's last: one flipped bit is damage, not a tear (a power cut
///   loses whole sectors);
/// - 24 bytes of that data overwritten (0xEE), the batch the segment's
///   last: garbled, not lost (a sector a write did not reach holds what
///   the file held before it, zeros), so damage too;
/// - the pages of its middle zeroed, another batch written after it: a
///   batch's `pwritev` starts only once the batch before it is synced, so
///   this one was on the medium whole, and the zeros are damage;
/// - the same, the next batch's last needle missing (a crash tore that
///   batch): the next batch is cut as a torn tail, the damaged one before
///   it kept.
#[test]
fn damage_that_is_no_torn_last_batch_is_kept_in_place() {
    let needle_len = |len: usize| (32 + len as u64 + 8).next_multiple_of(8);
    for case in [
        "bit in the last batch",
        "bytes in the last batch",
        "pages of an earlier batch",
        "before a torn batch",
    ] {
        let in_last = case.ends_with("in the last batch");
        let d = tempfile::tempdir().unwrap();
        let (live, crashed) = (d.path().join("live"), d.path().join("crashed"));
        let s = before_torn_batch(&live, false);
        let (id, path, start) = active_seg(&s);
        let items = torn_batch_items(false);
        put_items(&s, &items);
        let (_, _, end) = active_seg(&s);
        let later: Vec<(u64, Vec<u8>)> = (300..304).map(|k| (k, newer_data(k, 500))).collect();
        if !in_last {
            put_items(&s, &later);
        }
        let (_, _, after_later) = active_seg(&s);
        copy_dir(&live, &crashed);
        drop(s);
        let target = crashed.join(path.file_name().unwrap());
        std::fs::remove_file(target.with_extension("idx")).unwrap();
        let mut b = std::fs::read(&target).unwrap();
        // Where each needle of the batch starts.
        let offsets: Vec<u64> = items
            .iter()
            .scan(start, |at, (_, v)| {
                let o = *at;
                *at += needle_len(v.len());
                Some(o)
            })
            .collect();
        // Key 101's needle: the third of the batch.
        assert_eq!(items[2].0, 101);
        let mut lost = 0..0;
        if case == "bit in the last batch" {
            b[(offsets[2] + 32 + 700) as usize] ^= 0x08;
        } else if case == "bytes in the last batch" {
            // Garbled by the medium, not lost: no sector of zeros.
            let at = (offsets[2] + 32 + 700) as usize;
            b[at..at + 24].fill(0xEE);
        } else {
            let last_at = *offsets.last().unwrap();
            lost = (start / 4096 + 1) * 4096..last_at / 4096 * 4096;
            assert!(!lost.is_empty());
            b[lost.start as usize..lost.end as usize].fill(0);
        }
        let mut cut_at = None;
        if case == "before a torn batch" {
            let at = after_later - needle_len(500);
            b.truncate(at as usize);
            cut_at = Some(at);
        }
        std::fs::write(&target, &b).unwrap();

        let s = Store::open(cfg(&crashed)).unwrap();
        let r = s.open_report().clone();
        assert!(!r.corrupt_regions.is_empty(), "{case}: {r:?}");
        assert!(
            r.corrupt_regions
                .iter()
                .all(|&(seg, at)| seg == id && at >= start && at < end),
            "{case}: {r:?}"
        );
        match cut_at {
            Some(at) => assert_eq!(r.torn_tails, vec![(id, end, at - end)], "{case}: {r:?}"),
            None => assert!(r.torn_tails.is_empty(), "{case}: {r:?}"),
        }
        for k in acknowledged_before().filter(|&k| k != 1 && k != 20) {
            assert_eq!(
                s.get(k, 0, k as u32).unwrap().unwrap().data,
                data(k),
                "{case}: key {k}"
            );
        }
        if in_last {
            let got = s.get(101, 0, 101);
            assert!(
                matches!(got, Err(StoreError::Corrupt { .. })),
                "{case}: {got:?}"
            );
            for (k, v) in items.iter().filter(|(k, _)| *k != 101) {
                assert_eq!(
                    s.get(*k, 0, *k as u32).unwrap().unwrap().data,
                    *v,
                    "key {k}"
                );
            }
        } else {
            // Key 1's newest needle lost its data: an error, not its
            // first version.
            let got = s.get(1, 0, 1);
            assert!(
                matches!(got, Err(StoreError::Corrupt { .. })),
                "{case}: {got:?}"
            );
            // The batch's needles after the zeroed pages are kept.
            for ((k, v), &o) in items.iter().zip(&offsets) {
                if o >= lost.end {
                    let got = s.get(*k, 0, *k as u32).unwrap().map(|o| o.data);
                    assert_eq!(got.as_ref(), Some(v), "{case}: key {k}");
                }
            }
        }
        for (k, v) in &later {
            let got = s.get(*k, 0, *k as u32).unwrap().map(|o| o.data);
            let want = (case == "pages of an earlier batch").then(|| v.clone());
            assert_eq!(got, want, "{case}: key {k}");
        }
    }
}
