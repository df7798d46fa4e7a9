//! Crash consistency: a child process writes batches, deletes and
//! compacts; the parent SIGKILLs it at random moments, reopens the store
//! and checks that every acknowledged write reads back byte-identical,
//! every acknowledged delete stays deleted, and verify finds no corruption.
//!
//! The child is this same test binary, re-run with `STRATA_CRASH_DIR` set
//! and only the `crash_child_writer` test selected.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;
use strata_store::{PutItem, Store, StoreConfig, Tier};

const KEYS: u64 = 400;

fn config(dir: &std::path::Path) -> StoreConfig {
    // A child learns the parent's `hash_bits` from the environment.
    let bits = std::env::var("STRATA_CRASH_HASH_BITS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64);
    config_bits(dir, bits)
}

/// `hash_bits` < 64: the node index's recent table keys by that many bits
/// of an identity's hash, so identities share its entries' fingerprints
/// and every path must tell them apart by needle headers.
fn config_bits(dir: &std::path::Path, hash_bits: u32) -> StoreConfig {
    let mut c = StoreConfig::new(dir, Tier::Flash);
    c.recent_hash_bits = hash_bits;
    c.segment_size = 48 << 10;
    c.checkpoint_interval = Duration::from_millis(15);
    c.compaction_garbage_ratio = 0.3;
    c.compaction_bytes_per_s = None;
    // Runs of several hash partitions (the merger's 5,000 keys: up to 8),
    // so that kills land between the partitions a merge swaps in.
    c.run_partition_size = 700;
    c
}

/// Object bytes of version `ver` of `key`.
fn data(key: u64, ver: u64) -> Vec<u8> {
    let len = 16 + ((key * 31 + ver * 17) % 900) as usize;
    let mut x = key.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ ver;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Puts `(key, version)` pairs as one batch, each body `body(key,
/// version)`, its cookie the version's low bits.
fn put_pairs(store: &Store, pairs: &[(u64, u64)], body: impl Fn(u64, u64) -> Vec<u8>) {
    let datas: Vec<Vec<u8>> = pairs.iter().map(|&(k, v)| body(k, v)).collect();
    let batch: Vec<PutItem> = pairs
        .iter()
        .zip(&datas)
        .map(|(&(k, v), d)| PutItem {
            head: &[],
            key: k,
            alt_key: 0,
            cookie: v as u32,
            data: d,
        })
        .collect();
    store.put_batch(Tier::Flash, &batch).unwrap();
}

struct Rng(u64);
impl Rng {
    /// A child's generator: seeds 2k and 2k + 1 must not share a sequence
    /// (`seed | 1` made them, so that two children in a row wrote the same
    /// keys with the same cookies).
    fn child(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// Not a test by itself: the writer that the crash test runs as a child.
#[test]
fn crash_child_writer() {
    let Ok(dir) = std::env::var("STRATA_CRASH_DIR") else {
        return;
    };
    let seed: u64 = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let store = Store::open(config(std::path::Path::new(&dir))).unwrap();
    let mut out = std::io::stdout().lock();
    let mut rng = Rng::child(seed);
    let mut ver = seed << 32;
    loop {
        if rng.next().is_multiple_of(40) {
            store.compact_all(0.25, &mut |_| {}).unwrap();
            continue;
        }
        if rng.next().is_multiple_of(30) {
            store.merge_index().unwrap();
            continue;
        }
        if rng.next().is_multiple_of(5) {
            let key = rng.next() % KEYS;
            writeln!(out, "@I D {key}").unwrap();
            out.flush().unwrap();
            store.delete(key, 0).unwrap();
            writeln!(out, "@A").unwrap();
        } else if rng.next().is_multiple_of(6) {
            let keys: Vec<u64> = (0..1 + rng.next() % 6).map(|_| rng.next() % KEYS).collect();
            let line: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            writeln!(out, "@I D {}", line.join(" ")).unwrap();
            out.flush().unwrap();
            let ids: Vec<(u64, u32)> = keys.iter().map(|&k| (k, 0)).collect();
            store.delete_batch(&ids).unwrap();
            writeln!(out, "@A").unwrap();
        } else {
            let n = 1 + rng.next() % 8;
            let items: Vec<(u64, u64)> = (0..n)
                .map(|_| {
                    ver += 1;
                    (rng.next() % KEYS, ver)
                })
                .collect();
            let line: Vec<String> = items.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            writeln!(out, "@I P {}", line.join(" ")).unwrap();
            out.flush().unwrap();
            put_pairs(&store, &items, data);
            writeln!(out, "@A").unwrap();
        }
        out.flush().unwrap();
    }
}

const MERGE_KEYS: u64 = 5000;

/// Not a test by itself: a writer that merges the node index after every
/// few batches, so that kills land inside merges and their run file write.
#[test]
fn crash_child_merger() {
    let Ok(dir) = std::env::var("STRATA_CRASH_DIR") else {
        return;
    };
    let seed: u64 = std::env::var("STRATA_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let store = Store::open(config(std::path::Path::new(&dir))).unwrap();
    let mut out = std::io::stdout().lock();
    let mut rng = Rng::child(seed);
    let mut ver = seed << 32;
    let mut batches = 0u64;
    loop {
        if rng.next().is_multiple_of(7) {
            let keys: Vec<u64> = (0..1 + rng.next() % 20)
                .map(|_| rng.next() % MERGE_KEYS)
                .collect();
            let line: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
            writeln!(out, "@I D {}", line.join(" ")).unwrap();
            out.flush().unwrap();
            let ids: Vec<(u64, u32)> = keys.iter().map(|&k| (k, 0)).collect();
            store.delete_batch(&ids).unwrap();
            writeln!(out, "@A").unwrap();
        } else {
            let items: Vec<(u64, u64)> = (0..32)
                .map(|_| {
                    ver += 1;
                    (rng.next() % MERGE_KEYS, ver)
                })
                .collect();
            let line: Vec<String> = items.iter().map(|(k, v)| format!("{k}:{v}")).collect();
            writeln!(out, "@I P {}", line.join(" ")).unwrap();
            out.flush().unwrap();
            put_pairs(&store, &items, |k, v| data(k, v)[..16].to_vec());
            writeln!(out, "@A").unwrap();
            batches += 1;
        }
        out.flush().unwrap();
        if batches.is_multiple_of(3) {
            store.merge_index().unwrap();
        }
    }
}

#[derive(Clone, Debug, PartialEq)]
enum Pending {
    Delete(Vec<u64>),
    Put(Vec<(u64, u64)>),
}

#[test]
fn sigkill_at_random_moments_loses_nothing_acknowledged() {
    let iterations: u64 = std::env::var("STRATA_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let dir = tempfile::tempdir().unwrap();
    let total_acked = kill_and_check(
        dir.path(),
        "crash_child_writer",
        KEYS,
        iterations,
        40..240,
        64,
    );
    let compacted = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".seg")
        })
        .filter(|e| {
            !e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with("-00000000.seg")
        })
        .count();
    eprintln!(
        "{iterations} kills, {total_acked} acknowledged operations, {compacted} compacted segments"
    );
    assert!(compacted > 0, "no compaction ran during the crash test");
    assert!(
        total_acked > iterations * 3,
        "the child acknowledged only {total_acked} operations"
    );
}

#[test]
fn sigkill_during_index_merges_loses_nothing_acknowledged() {
    let iterations: u64 = std::env::var("STRATA_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let dir = tempfile::tempdir().unwrap();
    let acked = kill_and_check(
        dir.path(),
        "crash_child_merger",
        MERGE_KEYS,
        iterations,
        50..400,
        64,
    );
    assert!(
        acked > iterations * 3,
        "the child acknowledged only {acked} operations"
    );
    // The merges did happen: the store reopens with a run holding objects.
    let store = Store::open(config(dir.path())).unwrap();
    let run = std::fs::read(dir.path().join("strata.run")).unwrap();
    assert_eq!(&run[8..12], &2u32.to_le_bytes(), "run file version");
    let parts = u32::from_le_bytes(run[20..24].try_into().unwrap());
    assert!(parts > 1, "a run of {parts} partitions");
    assert!(store.memory().sealed_objects > 0, "{:?}", store.memory());
}

#[test]
fn sigkill_with_colliding_recent_fingerprints_loses_nothing_acknowledged() {
    // The recent table keyed by 6 bits of hash (~80 of the 5,000 keys
    // share each value): every put, delete, merge, compaction and recovery
    // tells candidates apart by needle headers. Not fewer: a table keyed by
    // b bits holds about 256 × 2^b entries at most, and an open that finds
    // most of the keys outside the run enters them all (3 bits: 2,048; an
    // open then failed, before that grew the table without end).
    let iterations: u64 = std::env::var("STRATA_CRASH_ITERATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(30);
    let dir = tempfile::tempdir().unwrap();
    let acked = kill_and_check(
        dir.path(),
        "crash_child_merger",
        MERGE_KEYS,
        iterations,
        50..400,
        6,
    );
    assert!(
        acked > iterations * 3,
        "the child acknowledged only {acked} operations"
    );
}

/// Runs `child` (a test of this binary) `iterations` times against `dir`,
/// SIGKILLs it after a random delay in `kill_after_ms`, and checks after
/// each kill that every acknowledged operation on keys `0..keys` survived.
/// Returns the number of acknowledged operations.
fn kill_and_check(
    dir: &std::path::Path,
    child: &str,
    keys: u64,
    iterations: u64,
    kill_after_ms: std::ops::Range<u64>,
    hash_bits: u32,
) -> u64 {
    let exe = std::env::current_exe().unwrap();
    // key -> Some(version) live, None deleted/absent
    let mut model: HashMap<u64, Option<u64>> = HashMap::new();
    let mut rng = Rng(0xC0FFEE);
    let mut total_acked = 0u64;
    // With STRATA_CRASH_KEEP=PATH, a failing trial's store is copied to
    // PATH/CHILD-BITS (one place per test: they run in parallel).
    let keep = std::env::var("STRATA_CRASH_KEEP").ok().map(|to| {
        let _ = std::fs::create_dir_all(&to);
        format!("{to}/{child}-{hash_bits}")
    });
    for it in 0..iterations {
        let mut child = Command::new(&exe)
            .args([child, "--exact", "--nocapture", "--test-threads=1"])
            .env("STRATA_CRASH_DIR", dir)
            .env("STRATA_CRASH_SEED", (it + 1).to_string())
            .env("STRATA_CRASH_HASH_BITS", hash_bits.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader = std::thread::spawn(move || {
            // The harness may print "test ... " before the first line.
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .filter_map(|l| l.find('@').map(|i| l[i..].to_string()))
                .collect::<Vec<String>>()
        });
        let span = kill_after_ms.end - kill_after_ms.start;
        std::thread::sleep(Duration::from_millis(
            kill_after_ms.start + rng.next() % span,
        ));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        // Apply acknowledged operations; keep the last unacknowledged one.
        let mut pending: Option<Pending> = None;
        for l in &lines {
            if let Some(rest) = l.strip_prefix("@I D ") {
                pending = Some(Pending::Delete(
                    rest.split(' ').map(|k| k.parse().unwrap()).collect(),
                ));
            } else if let Some(rest) = l.strip_prefix("@I P ") {
                pending = Some(Pending::Put(
                    rest.split(' ')
                        .map(|kv| {
                            let (k, v) = kv.split_once(':').unwrap();
                            (k.parse().unwrap(), v.parse().unwrap())
                        })
                        .collect(),
                ));
            } else if l == "@A" {
                match pending.take() {
                    Some(Pending::Delete(keys)) => {
                        for k in keys {
                            model.insert(k, None);
                        }
                    }
                    Some(Pending::Put(items)) => {
                        for (k, v) in items {
                            model.insert(k, Some(v));
                        }
                    }
                    None => panic!("ack without intent"),
                }
                total_acked += 1;
            }
        }
        // Recover and check. With STRATA_CRASH_KEEP=PATH, the store as the
        // kill left it is kept at `keep.pre` (each iteration replaces it),
        // so that a failure can be replayed on the exact bytes.
        if let Some(to) = &keep {
            let pre = format!("{to}.pre");
            let _ = std::fs::remove_dir_all(&pre);
            let _ = std::process::Command::new("cp")
                .args(["-a", dir.to_str().unwrap(), &pre])
                .status();
        }
        let store = Store::open(config_bits(dir, hash_bits)).unwrap();
        // The operation in flight may or may not have happened: accept both
        // outcomes, all or nothing for a put batch, and learn which one it
        // was.
        let mut in_flight: HashMap<u64, Option<u64>> = HashMap::new();
        match &pending {
            Some(Pending::Delete(keys)) => {
                for &k in keys {
                    in_flight.insert(k, None);
                }
            }
            Some(Pending::Put(items)) => {
                for &(k, v) in items {
                    in_flight.insert(k, Some(v));
                }
            }
            None => {}
        }
        let mut applied: Option<bool> = None;
        for k in 0..keys {
            let old = model.get(&k).copied().flatten();
            let got = match old {
                Some(v) => store.get(k, 0, v as u32).unwrap(),
                None => None,
            };
            let got_new = match in_flight.get(&k) {
                Some(Some(v)) => store.get(k, 0, *v as u32).unwrap(),
                _ => None,
            };
            let old_ok = match old {
                Some(v) => got
                    .as_ref()
                    .is_some_and(|o| data(k, v).starts_with(&o.data)),
                None => !store.contains(k, 0).unwrap(),
            };
            let new_ok = match in_flight.get(&k) {
                None => old_ok,
                Some(Some(v)) => got_new
                    .as_ref()
                    .is_some_and(|o| data(k, *v).starts_with(&o.data)),
                Some(None) => !store.contains(k, 0).unwrap(),
            };
            if !(old_ok || new_ok) {
                if let Some(to) = &keep {
                    let _ = std::process::Command::new("cp")
                        .args(["-a", dir.to_str().unwrap(), to])
                        .status();
                }
                panic!(
                    "iteration {it}: key {k} has neither its acknowledged nor its in-flight value: acked {old:?}, in flight {:?}, got cookie {:?} / {:?}",
                    in_flight.get(&k),
                    got.as_ref().map(|o| o.cookie),
                    store.get_unchecked(k, 0).unwrap().map(|o| (o.cookie, o.segment))
                );
            }
            if in_flight.contains_key(&k) && old_ok != new_ok {
                if let Some(Pending::Delete(_)) = &pending {
                    // A batch of deletes is not atomic: each identity is
                    // deleted or not.
                    if new_ok {
                        model.insert(k, None);
                    }
                    continue;
                }
                if applied.is_some_and(|a| a != new_ok) {
                    if let Some(to) = &keep {
                        let _ = std::process::Command::new("cp")
                            .args(["-a", dir.to_str().unwrap(), to])
                            .status();
                    }
                    panic!(
                        "iteration {it}: in-flight batch applied partially: {pending:?}, key {k} {}, acked {old:?}, found {:?}",
                        if new_ok { "applied" } else { "not applied" },
                        store.get_unchecked(k, 0).unwrap().map(|o| (o.cookie, o.segment))
                    );
                }
                applied = Some(new_ok);
            }
        }
        if applied == Some(true) {
            for (k, v) in in_flight {
                model.insert(k, v);
            }
        }
        drop(store);
        let rep = strata_store::verify::verify_dir(dir, &mut |_, _| {}).unwrap();
        assert!(
            !rep.has_corruption(),
            "iteration {it}: {:?}",
            rep.corruptions
        );
        assert!(
            rep.corruptions.is_empty(),
            "iteration {it}: torn tail left after recovery: {:?}",
            rep.corruptions
        );
    }
    total_acked
}

/// Not a test by itself: writes three batches; run with
/// `STRATA_CRASH_AT=store-batch-torn:N`, the Nth stops the process in the
/// middle of its write, as a kill inside the batch's `pwritev` does (the
/// kernel stops it between pages: whole needles, then a torn one).
#[test]
fn crash_child_torn_batch() {
    let Ok(dir) = std::env::var("STRATA_CRASH_DIR") else {
        return;
    };
    let mut c = config(std::path::Path::new(&dir));
    // No checkpoint while the child runs: the batches are all orphans.
    c.checkpoint_interval = Duration::from_secs(3600);
    let store = Store::open(c).unwrap();
    let mut out = std::io::stdout().lock();
    for (i, batch) in TORN_BATCHES.iter().enumerate() {
        put_pairs(&store, batch, data);
        writeln!(out, "@A {i}").unwrap();
        out.flush().unwrap();
    }
}

/// (key, version) of the batches `crash_child_torn_batch` writes.
const TORN_BATCHES: [&[(u64, u64)]; 3] = [
    &[(1, 1), (2, 1), (3, 1)],
    &[(4, 1), (5, 1), (6, 1), (7, 1)],
    &[(1, 2), (10, 2), (11, 2), (12, 2), (13, 2)],
];

/// Runs `crash_child_torn_batch` against `dir`, stopped in the middle of
/// the write of batch `n` (1-based); returns the batches it acknowledged.
fn run_torn_child(dir: &std::path::Path, n: usize) -> usize {
    let exe = std::env::current_exe().unwrap();
    let out = Command::new(&exe)
        .args(["crash_child_torn_batch", "--exact", "--nocapture"])
        .env("STRATA_CRASH_DIR", dir)
        .env("STRATA_CRASH_AT", format!("store-batch-torn:{n}"))
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success(), "the child was not stopped");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains("@A"))
        .count()
}

/// Finding 13 (docs/reliability.md): a kill in the middle of a batch's
/// write leaves whole needles of it before its torn end; the open must cut
/// them with the torn tail, or the batch comes back in part. Deterministic:
/// the store's crash point writes exactly that and aborts.
#[test]
fn a_batch_torn_in_its_write_comes_back_whole_or_not_at_all() {
    for n in [1usize, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(run_torn_child(dir.path(), n), n - 1, "batch {n}");
        // The file holds whole needles of the torn batch (all but its
        // last): an unfinished batch, then the torn needle.
        let rep = strata_store::verify::verify_dir(dir.path(), &mut |_, _| {}).unwrap();
        let unfinished = rep
            .corruptions
            .iter()
            .find(|c| {
                c.reason
                    .contains("write batch whose last needle is missing")
            })
            .unwrap_or_else(|| panic!("batch {n}: {:?}", rep.corruptions));
        assert!(unfinished.torn_tail, "batch {n}: {unfinished:?}");
        assert!(!rep.has_corruption(), "batch {n}: {:?}", rep.corruptions);
        // The same with the write stopped exactly where the torn needle
        // starts (whole needles of the batch, nothing after them).
        let cut = tempfile::tempdir().unwrap();
        for e in std::fs::read_dir(dir.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), cut.path().join(e.file_name())).unwrap();
        }
        let seg = cut.path().join(unfinished.path.file_name().unwrap());
        std::fs::OpenOptions::new()
            .write(true)
            .open(&seg)
            .unwrap()
            .set_len(unfinished.offset + unfinished.len)
            .unwrap();
        for (d, what) in [(dir.path(), "torn"), (cut.path(), "cut at a needle's end")] {
            let store = Store::open(config(d)).unwrap();
            assert_eq!(store.open_report().torn_tails.len(), 1, "batch {n}, {what}");
            // The batches before the torn one are whole; of the torn one,
            // nothing (key 1 keeps its first version).
            let mut want: HashMap<u64, u64> = HashMap::new();
            for batch in &TORN_BATCHES[..n - 1] {
                for &(k, v) in *batch {
                    want.insert(k, v);
                }
            }
            for k in 0..16u64 {
                let got = store.get_unchecked(k, 0).unwrap();
                match want.get(&k) {
                    Some(&v) => {
                        let o = got.unwrap_or_else(|| panic!("batch {n}, {what}: key {k} lost"));
                        assert_eq!(
                            (o.cookie, &o.data),
                            (v as u32, &data(k, v)),
                            "batch {n}, {what}"
                        );
                    }
                    None => assert!(
                        got.is_none(),
                        "batch {n}, {what}: key {k} of the torn batch came back"
                    ),
                }
            }
            drop(store);
            let rep = strata_store::verify::verify_dir(d, &mut |_, _| {}).unwrap();
            assert!(
                rep.corruptions.is_empty(),
                "batch {n}, {what}: {:?}",
                rep.corruptions
            );
        }
    }
}
