//! A store opens whatever its directories look like (issue 15, "always
//! comes back"): a full volume, a corrupt superblock, a stray or empty
//! `.seg` file; and deleted space is reclaimed in the active segment too.
//!
//! The full-volume test mounts a small tmpfs of its own, so it needs root
//! (as the crash and node tests on this project's machines run).
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::Command;
use strata_store::{PutItem, Store, StoreConfig, Tier};

fn cfg(dir: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(dir, Tier::Flash);
    c.auto_compaction = false;
    c
}

fn data(k: u64, len: usize) -> Vec<u8> {
    (0..len).map(|i| (k as usize * 31 + i * 7) as u8).collect()
}

/// A tmpfs of a fixed size mounted at a temporary directory, unmounted on
/// drop.
struct SmallVolume {
    dir: tempfile::TempDir,
}

impl SmallVolume {
    fn new(bytes: u64) -> SmallVolume {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "this test mounts a {bytes}-byte tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallVolume { dir }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// A store with a flash and a disk device on `vol`, one segment per device
/// until sealed by hand; and the disk device's directory.
fn flash_and_disk(vol: &SmallVolume) -> (StoreConfig, PathBuf) {
    let disk = vol.path().join("disk");
    let mut c = cfg(&vol.path().join("flash")).with_device(&disk, Tier::Disk);
    c.create_dirs = true;
    c.segment_size = 1 << 30;
    (c, disk)
}

/// Fills a store on a 4 MiB volume until a put fails for lack of space,
/// deletes some objects, and reopens it: the open must succeed with the
/// volume still full (the checkpoints it would write do not fit), every
/// acknowledged object reads back and every acknowledged delete stays
/// deleted; a second reopen too.
#[test]
fn a_full_volume_reopens_and_serves() {
    for segment_size in [1u64 << 30, 256 << 10] {
        let vol = SmallVolume::new(4 << 20);
        let dir = vol.path().join("store");
        let mut c = cfg(&dir);
        c.create_dirs = true;
        c.segment_size = segment_size;
        let s = Store::open(c.clone()).unwrap();
        let mut acked = Vec::new();
        let mut k = 0u64;
        let full = loop {
            let items: Vec<Vec<u8>> = (0..4)
                .map(|i| data(k + i, 3000 + (k as usize % 5) * 700))
                .collect();
            let batch: Vec<PutItem<'_>> = items
                .iter()
                .enumerate()
                .map(|(i, d)| PutItem {
                    head: &[],
                    key: k + i as u64,
                    alt_key: 0,
                    cookie: 7,
                    data: d,
                })
                .collect();
            match s.put_batch(Tier::Flash, &batch) {
                Ok(()) => acked.extend((0..4).map(|i| (k + i, items[i as usize].clone()))),
                Err(e) => break e,
            }
            k += 4;
            assert!(k < 100_000, "a 4 MiB volume never filled");
        };
        assert!(full.is_out_of_space(), "the fill ended with {full}");
        assert!(acked.len() > 100, "only {} objects fit", acked.len());
        // Deletes on a full volume flag needles in place: no space needed.
        let gone: Vec<(u64, u32)> = acked.iter().step_by(3).map(|(k, _)| (*k, 0)).collect();
        assert!(s.delete_batch(&gone).unwrap().iter().all(|&b| b));
        drop(s);
        // Fill whatever a close's checkpoints left, so that the volume is
        // full when the store opens.
        let mut n = 0;
        while std::fs::write(vol.path().join(format!("filler{n}")), vec![1u8; 4096]).is_ok() {
            n += 1;
        }
        let _ = std::fs::write(vol.path().join("filler-last"), [1u8; 1]);
        for round in 0..2 {
            let s = Store::open(c.clone()).unwrap_or_else(|e| {
                panic!(
                    "round {round}, segment size {segment_size}: a full volume did not open: {e}"
                )
            });
            for (i, (k, d)) in acked.iter().enumerate() {
                let got = s.get(*k, 0, 7).unwrap().map(|o| o.data);
                if i % 3 == 0 {
                    assert_eq!(got, None, "deleted object {k} came back");
                } else {
                    assert_eq!(got.as_ref(), Some(d), "object {k} lost");
                }
            }
            drop(s);
        }
    }
}

/// A flash segment moved to the disk device gets a higher id there than
/// the disk's active segment. Reopened on a full volume, the store must
/// take its existing active segment, not seal it and create a new one
/// (there is no room for one): the open used to fail so, and a node on a
/// full volume never served its row again (docs/reliability.md, finding
/// 2b).
#[test]
fn a_full_volume_with_a_moved_segment_reopens() {
    let vol = SmallVolume::new(4 << 20);
    let (c, _) = flash_and_disk(&vol);
    let s = Store::open(c.clone()).unwrap();
    let mut acked = Vec::new();
    for k in 0..40u64 {
        let d = data(k, 5000);
        s.put(Tier::Flash, k, 0, 7, &d).unwrap();
        acked.push((k, d));
        if k == 9 || k == 19 {
            s.seal_active(0).unwrap();
        }
    }
    // The newest sealed flash segment goes to disk (device 1), above the
    // disk's own active segment.
    let disk_active = s
        .segments()
        .into_iter()
        .find(|x| x.device == 1 && x.active)
        .unwrap()
        .id;
    let newest_sealed = s
        .segments()
        .into_iter()
        .filter(|x| x.device == 0 && !x.active)
        .map(|x| x.id)
        .max()
        .unwrap();
    assert!(newest_sealed > disk_active);
    s.move_segment(newest_sealed, 1, &mut |_| {}).unwrap();
    // Fill the volume.
    let full = loop {
        let k = acked.len() as u64;
        let d = data(k, 5000);
        match s.put(Tier::Flash, k, 0, 7, &d) {
            Ok(()) => acked.push((k, d)),
            Err(e) => break e,
        }
        assert!(k < 100_000, "a 4 MiB volume never filled");
    };
    assert!(full.is_out_of_space(), "the fill ended with {full}");
    drop(s);
    let mut n = 0;
    while std::fs::write(vol.path().join(format!("filler{n}")), vec![1u8; 4096]).is_ok() {
        n += 1;
    }
    let _ = std::fs::write(vol.path().join("filler-last"), [1u8; 1]);
    for round in 0..2 {
        let s = Store::open(c.clone())
            .unwrap_or_else(|e| panic!("round {round}: a full volume did not open: {e}"));
        for (k, d) in &acked {
            let got = s.get(*k, 0, 7).unwrap().map(|o| o.data);
            assert_eq!(got.as_ref(), Some(d), "object {k} lost");
        }
        drop(s);
    }
}

/// A move to a device without room for the segment (plus the headroom a
/// move leaves for client writes) is refused before it writes anything:
/// no temporary file, the free space untouched, the segment still read
/// from where it was. A copy that ran into ENOSPC half way took the last
/// free bytes from client writes while it lasted (a node's fill then saw
/// 507 with a megabyte free, and a tier mover retried it every pass).
#[test]
fn a_move_that_does_not_fit_is_refused_before_it_starts() {
    let vol = SmallVolume::new(4 << 20);
    let (c, disk) = flash_and_disk(&vol);
    let s = Store::open(c.clone()).unwrap();
    let mut acked = Vec::new();
    // 1.8 MB of a 4 MiB volume: fits, but leaves less than the 1 MiB
    // headroom.
    for k in 0..36u64 {
        let d = data(k, 50_000);
        s.put(Tier::Flash, k, 0, 7, &d).unwrap();
        acked.push((k, d));
    }
    s.seal_active(0).unwrap();
    let seg = s
        .segments()
        .into_iter()
        .find(|x| x.device == 0 && !x.active)
        .unwrap();
    let free = free_bytes(vol.path());
    assert!(
        seg.size < free && seg.size + strata_store::move_headroom(4 << 20) > free,
        "the test wants a segment that fits but leaves no headroom: {} of {free}",
        seg.size
    );
    let e = s.move_segment(seg.id, 1, &mut |_| {}).unwrap_err();
    assert!(
        matches!(e, strata_store::StoreError::NoRoom { .. }),
        "the move ended with {e}"
    );
    assert_eq!(free_bytes(vol.path()), free, "the refused move took space");
    let tmp: Vec<_> = std::fs::read_dir(&disk)
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(tmp.is_empty(), "the refused move left {tmp:?}");
    assert!(s.segments().iter().any(|x| x.id == seg.id && x.device == 0));
    for (k, d) in &acked {
        assert_eq!(s.get(*k, 0, 7).unwrap().map(|o| o.data).as_ref(), Some(d));
    }
    // Client writes still take the space the move would have used.
    s.put(Tier::Flash, 1000, 0, 7, &data(1000, 500_000))
        .unwrap();
}

/// Free bytes of the file system holding `p`.
fn free_bytes(p: &Path) -> u64 {
    let out = Command::new("stat")
        .args(["-f", "-c", "%a %S"])
        .arg(p)
        .output()
        .expect("stat -f");
    let t = String::from_utf8_lossy(&out.stdout);
    let v: Vec<u64> = t.split_whitespace().map(|x| x.parse().unwrap()).collect();
    v[0] * v[1]
}

/// The write that takes the volume's last page also takes the active
/// segment past the segment size: its seal fails (no room for the next
/// segment file) and it stays the active segment, over size. Reopened on
/// the full volume, the store must keep it active, not seal it and need a
/// new segment (the open used to fail so: finding 2b of
/// docs/reliability.md, a node restarted on a full volume that never
/// opened its row again).
#[test]
fn a_full_volume_whose_active_segment_is_over_size_reopens() {
    let vol = SmallVolume::new(4 << 20);
    let dir = vol.path().join("store");
    let mut c = cfg(&dir);
    c.create_dirs = true;
    c.segment_size = 256 << 10;
    let s = Store::open(c.clone()).unwrap();
    let small = data(1, 1000);
    s.put(Tier::Flash, 1, 0, 7, &small).unwrap();
    s.checkpoint().unwrap();
    // Leave exactly the pages a 300,000-byte needle needs beyond the
    // active segment's current length.
    let active_len = std::fs::metadata(&segs(&dir)[0]).unwrap().len();
    let big = data(2, 300_000);
    let need_end = active_len + strata_store::format::needle::needle_len(300_000);
    let pages = need_end.div_ceil(4096) - active_len.div_ceil(4096);
    let leave = pages * 4096;
    let free = free_bytes(vol.path());
    assert!(free > leave);
    std::fs::write(
        vol.path().join("filler"),
        vec![1u8; (free - leave) as usize],
    )
    .unwrap();
    assert_eq!(free_bytes(vol.path()), leave);
    s.put(Tier::Flash, 2, 0, 7, &big)
        .unwrap_or_else(|e| panic!("the last pages did not take the write: {e}"));
    assert!(free_bytes(vol.path()) < 4096, "the volume is not full");
    let over: Vec<_> = segs(&dir)
        .into_iter()
        .filter(|p| std::fs::metadata(p).unwrap().len() >= 256 << 10)
        .collect();
    assert_eq!(over.len(), 1, "one segment past the segment size");
    assert_eq!(segs(&dir).len(), 1, "no room was left for a next segment");
    drop(s);
    let _ = std::fs::write(vol.path().join("filler-last"), [1u8; 1]);
    for round in 0..2 {
        let s = Store::open(c.clone())
            .unwrap_or_else(|e| panic!("round {round}: a full volume did not open: {e}"));
        assert_eq!(s.get(1, 0, 7).unwrap().map(|o| o.data), Some(small.clone()));
        assert_eq!(s.get(2, 0, 7).unwrap().map(|o| o.data), Some(big.clone()));
        drop(s);
    }
}

fn segs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .collect();
    v.sort();
    v
}

/// Three sealed segments of 40 objects each and an active one.
fn three_segments(dir: &Path) -> Vec<(u64, Vec<u8>)> {
    let mut c = cfg(dir);
    c.create_dirs = true;
    let s = Store::open(c).unwrap();
    let mut all = Vec::new();
    for seg in 0..3u64 {
        for i in 0..40u64 {
            let k = seg * 1000 + i;
            let d = data(k, 500);
            s.put(Tier::Flash, k, 0, 7, &d).unwrap();
            all.push((k, d));
        }
        s.seal_active(0).unwrap();
    }
    s.put(Tier::Flash, 9999, 0, 7, b"active").unwrap();
    all.push((9999, b"active".to_vec()));
    drop(s);
    all
}

/// A superblock with two flipped bits, a stray `notes.seg` and an empty segment
/// file: each is moved to `quarantine/` and reported, the rest serves, and
/// the next open finds nothing to report.
#[test]
fn bad_segment_files_are_quarantined_and_the_rest_serves() {
    for damage in ["superblock", "stray", "empty", "generation"] {
        let d = tempfile::tempdir().unwrap();
        let all = three_segments(d.path());
        let files = segs(d.path());
        assert_eq!(files.len(), 4);
        // The second segment (keys 1000..1040).
        let victim = files[1].clone();
        let lost: Vec<u64> = (1000..1040).collect();
        let bad = match damage {
            "superblock" => {
                let mut b = std::fs::read(&victim).unwrap();
                // Inside the segment id and the zero bytes, under the CRC:
                // two bits, beyond its correction (one is corrected and
                // written back: tests/recovery.rs).
                b[17] ^= 0x10;
                b[44] ^= 0x01;
                std::fs::write(&victim, b).unwrap();
                victim.clone()
            }
            "generation" => {
                // A valid segment renamed to another generation.
                let to = victim.with_file_name(
                    victim
                        .file_name()
                        .unwrap()
                        .to_str()
                        .unwrap()
                        .replace("-00000000.seg", "-00000003.seg"),
                );
                std::fs::rename(&victim, &to).unwrap();
                to
            }
            "stray" => {
                let p = d.path().join("notes.seg");
                std::fs::write(&p, b"remember the milk").unwrap();
                p
            }
            "empty" => {
                let p = d.path().join("00000000000000aa-00000000.seg");
                std::fs::write(&p, b"").unwrap();
                p
            }
            _ => unreachable!(),
        };
        let s = Store::open(cfg(d.path())).unwrap_or_else(|e| panic!("{damage}: {e}"));
        let q = &s.open_report().quarantined;
        assert_eq!(q.len(), 1, "{damage}: {q:?}");
        assert_eq!(q[0].path, bad, "{damage}");
        assert!(!q[0].reason.is_empty());
        assert!(!bad.exists(), "{damage}: the bad file is still in place");
        let moved = d.path().join("quarantine").join(bad.file_name().unwrap());
        assert!(moved.exists(), "{damage}: not in quarantine/");
        let damaged_segment = matches!(damage, "superblock" | "generation");
        for (k, v) in &all {
            let got = s.get(*k, 0, 7).unwrap().map(|o| o.data);
            if damaged_segment && lost.contains(k) {
                assert_eq!(got, None, "{damage}: {k} served from a quarantined segment");
            } else {
                assert_eq!(got.as_ref(), Some(v), "{damage}: {k}");
            }
        }
        // Writes go on, and new segments never take a quarantined id.
        s.put(Tier::Flash, 5, 1, 7, b"after").unwrap();
        s.seal_active(0).unwrap();
        drop(s);
        let s = Store::open(cfg(d.path())).unwrap();
        assert!(s.open_report().quarantined.is_empty(), "{damage}");
        assert_eq!(s.get(5, 1, 7).unwrap().unwrap().data, b"after");
        assert!(moved.exists());
    }
}

/// Objects deleted from the active segment of a store whose segments are
/// large (the default 1 GiB: it would never seal) are reclaimed by
/// compaction: the active segment is sealed and rewritten, and the bytes
/// on disk shrink.
#[test]
fn deleted_space_in_the_active_segment_is_reclaimed() {
    let d = tempfile::tempdir().unwrap();
    let mut c = cfg(d.path());
    c.create_dirs = true;
    let s = Store::open(c.clone()).unwrap();
    for k in 0..200u64 {
        s.put(Tier::Flash, k, 0, 7, &data(k, 20_000)).unwrap();
    }
    let gone: Vec<(u64, u32)> = (0..150u64).map(|k| (k, 0)).collect();
    s.delete_batch(&gone).unwrap();
    let before: u64 = s.segments().iter().map(|x| x.size).sum();
    let reports = s.compact_all(0.4, &mut |_| {}).unwrap();
    assert_eq!(reports.len(), 1, "the active segment was not compacted");
    let after: u64 = s.segments().iter().map(|x| x.size).sum();
    assert!(
        after < before / 3,
        "{before} bytes before, {after} after compacting"
    );
    let on_disk: u64 = segs(d.path())
        .iter()
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(on_disk < before / 3, "{on_disk} bytes of segments on disk");
    for k in 0..200u64 {
        let got = s.get(k, 0, 7).unwrap().map(|o| o.data);
        assert_eq!(got, (k >= 150).then(|| data(k, 20_000)), "{k}");
    }
    drop(s);
    let s = Store::open(c).unwrap();
    for k in 0..200u64 {
        let got = s.get(k, 0, 7).unwrap().map(|o| o.data);
        assert_eq!(got, (k >= 150).then(|| data(k, 20_000)), "{k} after reopen");
    }
}

/// `verify` reports a segment whose superblock is bad and a stray `.seg`,
/// and still checks every other segment (a flipped needle byte in another
/// one is found too).
#[test]
fn verify_reports_bad_segment_files_and_checks_the_rest() {
    let d = tempfile::tempdir().unwrap();
    three_segments(d.path());
    let files = segs(d.path());
    let mut b = std::fs::read(&files[0]).unwrap();
    b[17] ^= 0x10;
    b[44] ^= 0x01; // two bits: one would be corrected
    std::fs::write(&files[0], b).unwrap();
    let mut b = std::fs::read(&files[2]).unwrap();
    b[64 + 40] ^= 0x01; // the data of the segment's first needle
    std::fs::write(&files[2], b).unwrap();
    std::fs::write(d.path().join("notes.seg"), b"remember the milk").unwrap();
    let rep = strata_store::verify::verify_dir(d.path(), &mut |_, _| {}).unwrap();
    assert!(rep.has_corruption());
    let at = |p: &Path| rep.corruptions.iter().find(|c| c.path == p);
    let sb = at(&files[0]).expect("bad superblock not reported");
    assert!(sb.reason.contains("not a Strata segment"), "{}", sb.reason);
    assert!(
        at(&d.path().join("notes.seg")).is_some(),
        "{:?}",
        rep.corruptions
    );
    let needle = at(&files[2]).expect("flipped needle not reported");
    assert_eq!(needle.offset, 64);
    assert!(!needle.torn_tail);
    // The second segment's 40 needles, the third's 39 undamaged ones and
    // the active segment's one are live; the first segment is not read.
    assert_eq!(rep.live.needles, 40 + 39 + 1);
    assert_eq!(rep.segments, 3);
}

/// A segment written by a newer Strata (a whole, checksummed superblock of
/// another version) is not damage: the open refuses, naming it, and moves
/// nothing.
#[test]
fn a_newer_format_segment_is_refused_not_quarantined() {
    let d = tempfile::tempdir().unwrap();
    three_segments(d.path());
    let files = segs(d.path());
    let mut b = std::fs::read(&files[1]).unwrap();
    let newer = strata_store::format::superblock::VERSION + 1;
    b[8..12].copy_from_slice(&newer.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&files[1], b).unwrap();
    let e = Store::open(cfg(d.path()))
        .err()
        .expect("opened a newer segment");
    assert!(
        matches!(e, strata_store::StoreError::NewerFormat { ref path, .. } if *path == files[1]),
        "{e}"
    );
    assert!(files[1].exists());
    assert!(!d.path().join("quarantine").exists());
}
