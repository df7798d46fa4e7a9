//! The segment store from the command line: `strata store ...` and
//! `strata bench store`, run as the real binary.

use std::path::Path;
use std::process::{Command, Output};

fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn put(dir: &Path, key: u64, cookie: u32, data: &[u8]) -> Output {
    let f = dir.with_extension(format!("obj{key}"));
    std::fs::write(&f, data).unwrap();
    strata(&[
        "store",
        "put",
        dir.to_str().unwrap(),
        "--key",
        &key.to_string(),
        "--cookie",
        &cookie.to_string(),
        f.to_str().unwrap(),
    ])
}

#[test]
fn verify_of_a_missing_directory_is_a_clear_error() {
    let o = strata(&["store", "verify", "/nonexistent/strata-store-dir"]);
    assert!(!o.status.success());
    assert!(text(&o).contains("does not exist"), "{}", text(&o));
}

#[test]
fn a_file_that_is_not_a_segment_is_named() {
    let d = tempfile::tempdir().unwrap();
    let junk = d.path().join("0000000000000001-00000000.seg");
    std::fs::write(&junk, b"this is a text file, not a segment").unwrap();
    // verify reads only: it names the file and fails.
    let o = strata(&["store", "verify", d.path().to_str().unwrap()]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("not a Strata segment") && t.contains("0000000000000001-00000000.seg"),
        "{t}"
    );
    // ls opens the store: the file is quarantined, said so, and the (empty)
    // store is listed.
    let o = strata(&["store", "ls", d.path().to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("quarantined: ") && t.contains("0000000000000001-00000000.seg"),
        "{t}"
    );
    assert!(!junk.exists());
    assert!(d
        .path()
        .join("quarantine/0000000000000001-00000000.seg")
        .exists());
    // verify of the directory now passes: quarantine/ is not a store.
    let o = strata(&["store", "verify", d.path().to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
}

#[test]
fn put_get_delete_roundtrip_and_wrong_cookie() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let s = dir.to_str().unwrap();
    assert!(put(&dir, 7, 1234, b"hello needle").status.success());
    let o = strata(&["store", "get", s, "--key", "7", "--cookie", "1234"]);
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(o.stdout, b"hello needle");
    let o = strata(&["store", "get", s, "--key", "7", "--cookie", "1235"]);
    assert_eq!(o.status.code(), Some(2), "wrong cookie reads as not found");
    let o = strata(&["store", "delete", s, "--key", "7"]);
    assert!(o.status.success() && text(&o).contains("deleted"));
    let o = strata(&["store", "get", s, "--key", "7", "--cookie", "1234"]);
    assert_eq!(o.status.code(), Some(2));
    let o = strata(&["store", "verify", s]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("deleted                1 needles"),
        "{}",
        text(&o)
    );
}

#[test]
fn an_object_over_the_maximum_size_is_refused_and_the_store_stays_consistent() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    assert!(put(&dir, 1, 1, b"small").status.success());
    let big = dir.with_extension("big");
    std::fs::write(&big, vec![7u8; 4096]).unwrap();
    let o = strata(&[
        "store",
        "put",
        dir.to_str().unwrap(),
        "--key",
        "2",
        "--cookie",
        "1",
        "--max-object-size",
        "1KiB",
        big.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o).contains("over the maximum object size of 1024 bytes"),
        "{}",
        text(&o)
    );
    let o = strata(&["store", "verify", dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    let o = strata(&[
        "store",
        "get",
        dir.to_str().unwrap(),
        "--key",
        "1",
        "--cookie",
        "1",
    ]);
    assert_eq!(o.stdout, b"small");
}

#[test]
fn disk_full_in_the_middle_of_a_batch_is_a_clear_error_and_nothing_is_torn() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let s = dir.to_str().unwrap();
    // A file-size limit makes the segment write fail with EFBIG part way
    // through a batch, as a full device would (ENOSPC takes the same path).
    let script = format!(
        "trap '' XFSZ; ulimit -f 1024; exec '{}' bench store --dir '{}' --objects 5000 --batch 16 --threads 1 --keep",
        env!("CARGO_BIN_EXE_strata"),
        s
    );
    let o = Command::new("sh").args(["-c", &script]).output().unwrap();
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("appending to") && t.contains("File too large"),
        "{t}"
    );
    // The store is consistent: no corruption, no torn tail, and it accepts
    // writes again once there is room.
    let o = strata(&["store", "verify", s, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert!(v["live_needles"].as_u64().unwrap() > 0);
    assert_eq!(v["corruptions"].as_array().unwrap().len(), 0, "{v}");
    assert!(put(&dir, 999_999, 5, b"after the disk was freed")
        .status
        .success());
    let o = strata(&["store", "get", s, "--key", "999999", "--cookie", "5"]);
    assert_eq!(o.stdout, b"after the disk was freed");
}

#[test]
fn verify_reports_a_flipped_byte_with_segment_and_offset() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("store");
    let s = dir.to_str().unwrap();
    for k in 0..3u64 {
        assert!(put(&dir, k, 9, &[k as u8 + 1; 100]).status.success());
    }
    let seg = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "seg"))
        .unwrap();
    // needles are 144 bytes (32 header + 100 data + 8 footer, padded); the
    // second starts at 64 + 144 = 208; flip a data byte of it.
    let mut bytes = std::fs::read(&seg).unwrap();
    bytes[208 + 32 + 10] ^= 0x40;
    std::fs::write(&seg, &bytes).unwrap();
    let o = strata(&["store", "verify", s]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(t.contains("CORRUPT") && t.contains("offset 208"), "{t}");
    let o = strata(&["store", "get", s, "--key", "1", "--cookie", "9"]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("corrupt needle") && t.contains("at offset 208"),
        "{t}"
    );
    let o = strata(&["store", "get", s, "--key", "2", "--cookie", "9"]);
    assert_eq!(o.stdout, vec![3u8; 100]);
}

#[test]
fn bench_store_json_has_exactly_the_promised_fields() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("bench");
    let o = strata(&[
        "bench",
        "store",
        "--dir",
        dir.to_str().unwrap(),
        "--objects",
        "3000",
        "--size",
        "4KiB",
        "--batch",
        "16",
        "--threads",
        "2",
        "--gets",
        "1000",
        "--segment-size",
        "4MiB",
        "--run-partition-size",
        "500",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(|k| k.as_str()).collect();
    keys.sort_unstable();
    let mut want = vec![
        "put_objects_per_s",
        "put_mb_per_s",
        "get_objects_per_s",
        "get_p50_us",
        "get_p99_us",
        "device_reads_per_get",
        "ram_bytes_per_object",
        "ram_bytes_per_object_sealed",
        "ram_bytes_per_object_active",
        "restart_seconds",
        "segments",
        "run_partitions",
        "merge_seconds",
        "cpu_us_per_get",
        "index_probes_per_get",
        "warm_cpu_us_per_get",
        "warm_get_objects_per_s",
        "absent_cpu_us_per_get",
        "absent_device_reads_per_10k_gets",
        "absent_get_objects_per_s",
        "absent_index_probes_per_get",
    ];
    want.sort_unstable();
    assert_eq!(keys, want);
    assert_eq!(v["device_reads_per_get"].as_f64(), Some(1.0));
    // The node-wide index, in hash partitions of about 500 identities: at
    // most two probes per GET, present or absent.
    let parts = v["run_partitions"].as_f64().unwrap();
    assert!((5.0..=8.0).contains(&parts), "{parts} partitions");
    for k in ["index_probes_per_get", "absent_index_probes_per_get"] {
        let p = v[k].as_f64().unwrap();
        assert!(p > 0.0 && p <= 2.0, "{k} = {p}");
    }
    let sealed = v["ram_bytes_per_object_sealed"].as_f64().unwrap();
    assert!(sealed > 0.0 && sealed <= 8.0, "{sealed}");
    assert!(v["get_p99_us"].as_f64().unwrap() >= v["get_p50_us"].as_f64().unwrap());
    // Without --keep the store's files are removed.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
}

#[test]
fn bench_store_compaction_phase_and_reuse() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("bench");
    let s = dir.to_str().unwrap();
    let o = strata(&[
        "bench",
        "store",
        "--dir",
        s,
        "--objects",
        "1200",
        "--size",
        "1KiB",
        "--threads",
        "2",
        "--gets",
        "400",
        "--segment-size",
        "256KiB",
        "--compaction",
        "--keep",
        "--json",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "get_p99_us_quiet",
        "get_p99_us_compacting",
        "compaction_seconds",
    ] {
        assert!(v[k].as_f64().is_some(), "{k} missing: {v}");
    }
    // The compacted segment is generation 1 and the store verifies clean.
    let o = strata(&["store", "verify", s, "--json"]);
    assert!(o.status.success(), "{}", text(&o));
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().any(|n| n.ends_with("-00000001.seg")),
        "{names:?}"
    );
    // --reuse reads a kept store again without filling it.
    let dir2 = d.path().join("bench2");
    let s2 = dir2.to_str().unwrap();
    let args = [
        "bench",
        "store",
        "--dir",
        s2,
        "--objects",
        "800",
        "--size",
        "1KiB",
        "--gets",
        "300",
        "--json",
    ];
    let o = strata(&[&args[..], &["--keep"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let o = strata(&[&args[..], &["--reuse"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["put_objects_per_s"].as_f64(), Some(0.0));
    assert_eq!(v["device_reads_per_get"].as_f64(), Some(1.0));
    // without --reuse a non-empty directory is refused
    let o = strata(&[
        "bench",
        "store",
        "--dir",
        s,
        "--objects",
        "1200",
        "--size",
        "1KiB",
    ]);
    assert!(
        !o.status.success() && text(&o).contains("is not empty"),
        "{}",
        text(&o)
    );
}

/// `strata` raises its soft limit on open files to the hard limit at start,
/// so that a store sizes its descriptor budget (half the soft limit) from
/// what the administrator allows, not from a login shell's default: started
/// with a soft limit of 256, `strata store ls` reports the budget of the
/// hard limit.
#[test]
fn the_open_file_budget_follows_the_hard_limit() {
    let hard = rustix::process::getrlimit(rustix::process::Resource::Nofile).maximum;
    let Some(hard) = hard else {
        // An unlimited hard limit cannot be a soft limit for files (Linux
        // caps it at fs.nr_open): nothing to compare against.
        return;
    };
    assert!(
        hard > 512,
        "this test needs a hard limit above 512, not {hard}"
    );
    let d = tempfile::tempdir().unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -Sn 256 && exec '{}' store ls '{}'",
            env!("CARGO_BIN_EXE_strata"),
            d.path().display()
        ))
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let want = (hard / 2).clamp(64, 1 << 20);
    assert!(
        t.contains(&format!(
            "segment files kept open at most: {want} (soft limit on open files: {hard})"
        )),
        "{t}"
    );
}
