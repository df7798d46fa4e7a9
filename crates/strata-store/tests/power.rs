//! Power loss, in process: the store runs over strata-fs's power-loss
//! model, which keeps what every unsynced write replaced; a writer thread
//! puts batches, overwrites, deletes, compacts, moves segments between
//! tiers and merges the node index while the test cuts the power at a
//! random moment (every unsynced write dropped, or the last of each file's
//! torn page by page, unsynced directory changes undone). The store is
//! then opened again as after the machine came back, and every
//! acknowledged write must read back byte-identical, every acknowledged
//! delete stay deleted, no read may fail, and verify must find only what
//! the open already reported.
//!
//! Unlike crash.rs (kill -9, which keeps the page cache), this loses what
//! was written but not synced, as a power cut does.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use strata_fs::power::{Cut, Recorder};
use strata_store::{PutItem, Store, StoreConfig, Tier};

const KEYS: u64 = 300;

fn config(dir: &std::path::Path) -> StoreConfig {
    let mut c =
        StoreConfig::new(dir.join("flash"), Tier::Flash).with_device(dir.join("disk"), Tier::Disk);
    c.create_dirs = true;
    c.segment_size = 64 << 10;
    c.checkpoint_interval = Duration::from_millis(10);
    c.compaction_garbage_ratio = 0.3;
    c.compaction_bytes_per_s = None;
    c.run_partition_size = 200;
    c
}

/// Object bytes of version `ver` of `key`: sizes across several pages, so
/// that a torn batch loses pages in its middle.
fn data(key: u64, ver: u64) -> Vec<u8> {
    let len = 16 + ((key * 31 + ver * 17) % 9000) as usize;
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

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// What a key may hold after the cut: the versions it may read as (None:
/// absent). One value once its last operation was acknowledged; two while
/// an operation on it was in flight at the cut.
#[derive(Default)]
struct Model {
    may: HashMap<u64, Vec<Option<u64>>>,
}

impl Model {
    fn acked(&mut self, key: u64, v: Option<u64>) {
        self.may.insert(key, vec![v]);
    }
    fn in_flight(&mut self, key: u64, v: Option<u64>) {
        let e = self.may.entry(key).or_insert_with(|| vec![None]);
        if !e.contains(&v) {
            e.push(v);
        }
    }
}

/// The writer: runs until an operation fails (the power is off), then
/// records the failed operation's keys as in flight.
fn writer(store: &Store, seed: u64, model: &Mutex<Model>, stop: &AtomicBool) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut ver = seed << 32;
    while !stop.load(Ordering::Relaxed) {
        let r = rng.next() % 100;
        if r < 3 {
            if store.compact_all(0.2, &mut |_| {}).is_err() {
                return;
            }
        } else if r < 5 {
            let sealed: Vec<_> = store.segments().into_iter().filter(|s| !s.active).collect();
            if let Some(s) = sealed.get(rng.next() as usize % sealed.len().max(1)) {
                let to = 1 - s.device;
                if store.move_segment(s.id, to, &mut |_| {}).is_err()
                    && stop.load(Ordering::Relaxed)
                {
                    return;
                }
            }
        } else if r < 7 {
            if store.merge_index().is_err() {
                return;
            }
        } else if r < 20 {
            let keys: Vec<u64> = (0..1 + rng.next() % 4).map(|_| rng.next() % KEYS).collect();
            let ids: Vec<(u64, u32)> = keys.iter().map(|&k| (k, 0)).collect();
            let ok = store.delete_batch(&ids).is_ok();
            let mut m = model.lock().unwrap();
            for k in keys {
                if ok {
                    m.acked(k, None)
                } else {
                    m.in_flight(k, None)
                }
            }
            if !ok {
                return;
            }
        } else {
            let mut items: Vec<(u64, u64)> = Vec::new();
            for _ in 0..1 + rng.next() % 10 {
                ver += 1;
                let k = rng.next() % KEYS;
                // One version of a key per batch: which one wins within a
                // batch is not what this test is about.
                if !items.iter().any(|&(x, _)| x == k) {
                    items.push((k, ver));
                }
            }
            let datas: Vec<Vec<u8>> = items.iter().map(|&(k, v)| data(k, v)).collect();
            let batch: Vec<PutItem> = items
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
            let ok = store.put_batch(Tier::Flash, &batch).is_ok();
            let mut m = model.lock().unwrap();
            for (k, v) in items {
                if ok {
                    m.acked(k, Some(v))
                } else {
                    m.in_flight(k, Some(v))
                }
            }
            if !ok {
                return;
            }
        }
    }
}

/// Every needle of `key` in the store's segments, for a failure to show.
fn where_is(store: &Store, key: u64) -> String {
    let mut out = Vec::new();
    for s in store.segments() {
        if let Ok(it) = store.needles(s.id) {
            for n in it.flatten() {
                if n.key == key {
                    out.push(format!(
                        "segment {} gen {} (active {}) @{} cookie {} flags {:#x}",
                        s.id, s.generation, s.active, n.offset, n.cookie, n.flags
                    ));
                }
            }
        }
    }
    out.join("; ")
}

/// One trial: load, cut, reopen, check. Returns what the cut undid.
fn trial(seed: u64, how: Option<Cut>) -> strata_fs::power::CutReport {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("node");
    std::fs::create_dir(&root).unwrap();
    let model = Arc::new(Mutex::new(Model::default()));
    let rec = Recorder::start(&root, seed).unwrap();
    let store = Arc::new(Store::open(config(&root)).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let w = {
        let (store, model, stop) = (store.clone(), model.clone(), stop.clone());
        std::thread::spawn(move || writer(&store, seed, &model, &stop))
    };
    std::thread::sleep(Duration::from_millis(20 + seed * 7 % 120));
    let report = match how {
        Some(how) => rec.cut(how).unwrap(),
        None => Default::default(),
    };
    stop.store(true, Ordering::Relaxed);
    w.join().unwrap();
    // The machine is off: nothing the old store does now reaches the files.
    drop(store);
    drop(rec);

    let store = Store::open(config(&root)).unwrap_or_else(|e| {
        panic!("seed {seed} {how:?}: the store does not open after the power cut: {e}")
    });
    let m = Arc::try_unwrap(model).ok().unwrap().into_inner().unwrap();
    for (&k, may) in &m.may {
        let got = store
            .get_unchecked(k, 0)
            .unwrap_or_else(|e| panic!("seed {seed} {how:?}: GET {k} failed: {e}"));
        let as_ver = match &got {
            None => None,
            Some(o) => may
                .iter()
                .flatten()
                .find(|&&v| o.data == data(k, v))
                .map(|&v| Some(v))
                .unwrap_or_else(|| {
                    panic!(
                        "seed {seed} {how:?}: key {k} holds {} bytes that are none of {may:?}; \
                         the open found {:?}",
                        o.data.len(),
                        store.open_report()
                    )
                }),
        };
        if !may.contains(&as_ver) {
            eprintln!("key {k} on disk: {}", where_is(&store, k));
            let kept = dir.path().to_path_buf();
            std::mem::forget(dir);
            eprintln!("kept {}", kept.display());
            for d in ["flash", "disk"] {
                for e in std::fs::read_dir(root.join(d)).unwrap().flatten() {
                    eprintln!(
                        "  {d}/{} {}",
                        e.file_name().to_string_lossy(),
                        e.metadata().unwrap().len()
                    );
                }
            }
            panic!("seed {seed} {how:?}: key {k} reads as {as_ver:?}, must be one of {may:?} ({report:?}); the open found {:?}", store.open_report());
        }
        assert!(
            may.contains(&as_ver),
            "seed {seed} {how:?}: key {k} reads as {as_ver:?}, must be one of {may:?} ({report:?}); \
             the open found {:?}",
            store.open_report()
        );
    }
    drop(store);
    report
}

#[test]
fn acknowledged_writes_survive_power_cuts_that_drop_unsynced_data() {
    let mut undone = 0;
    for seed in 1..=12u64 {
        let r = trial(seed, Some(Cut::Drop));
        undone += r.writes_dropped + r.dir_changes_undone;
    }
    assert!(undone > 0, "the cuts found unsynced writes to drop");
}

#[test]
fn acknowledged_writes_survive_power_cuts_that_tear_writes() {
    let mut torn = 0;
    for seed in 100..=115u64 {
        let r = trial(seed, Some(Cut::Tear));
        torn += r.writes_torn;
    }
    assert!(torn > 0, "some cuts tore a write");
}

#[test]
fn control_without_a_cut() {
    for seed in 1..=6u64 {
        trial(seed, None);
    }
}

/// A fixed script over a new store — its directories made, batches put
/// and overwritten, a delete, a checkpoint, a seal, a compaction, a move
/// to the other tier and a merge of the node index — with the power cut
/// right after each of its file operations in turn (strata-fs counts
/// them): after every cut the store opens, and every operation the
/// script saw acknowledged holds.
#[test]
fn a_power_cut_at_every_step_of_a_store_s_life_loses_nothing_acknowledged() {
    use strata_fs::power::cut_at_every_step;
    // On tmpfs when there is one: hundreds of opens, each syncing.
    let scratch = tempfile::tempdir_in("/dev/shm")
        .or_else(|_| tempfile::tempdir())
        .unwrap();
    for how in [Cut::Drop, Cut::Tear] {
        let steps = cut_at_every_step(
            scratch.path(),
            how,
            |_| {},
            |root| {
                let mut c = config(root);
                c.checkpoint_interval = Duration::from_secs(3600);
                c.compaction_garbage_ratio = 1.0;
                let store = Store::open(c).map_err(std::io::Error::other)?;
                let ack = |what: String| std::fs::write(root.join(format!("ack-{what}")), b"");
                let e = std::io::Error::other;
                let put = |keys: &[u64], ver: u64| -> std::io::Result<()> {
                    let datas: Vec<Vec<u8>> = keys.iter().map(|&k| data(k, ver)).collect();
                    let items: Vec<PutItem> = keys
                        .iter()
                        .zip(&datas)
                        .map(|(&k, d)| PutItem {
                            head: &[],
                            key: k,
                            alt_key: 0,
                            cookie: ver as u32,
                            data: d,
                        })
                        .collect();
                    store.put_batch(Tier::Flash, &items).map_err(e)?;
                    for k in keys {
                        ack(format!("{k}-{ver}"))?;
                    }
                    Ok(())
                };
                put(&[1, 2, 3], 1)?;
                put(&[4, 5, 6, 7, 8, 9], 1)?;
                store.checkpoint().map_err(e)?;
                put(&[1, 2], 2)?;
                store.delete(3, 0).map_err(e)?;
                ack("3-del".into())?;
                store.seal_active(0).map_err(e)?;
                put(&[10, 11], 1)?;
                let sealed: Vec<u64> = store
                    .segments()
                    .iter()
                    .filter(|s| !s.active)
                    .map(|s| s.id)
                    .collect();
                for id in &sealed {
                    store.compact(*id, &mut |_| {}).map_err(e)?;
                }
                if let Some(s) = store
                    .segments()
                    .into_iter()
                    .find(|s| !s.active && s.device == 0)
                {
                    store.move_segment(s.id, 1, &mut |_| {}).map_err(e)?;
                }
                store.merge_index().map_err(e)?;
                put(&[1, 12], 3)?;
                store.close().map_err(e)
            },
            |root, n| {
                let store = Store::open(config(root))
                    .unwrap_or_else(|e| panic!("{how:?} step {n}: the store does not open: {e}"));
                let acked = |w: &str| root.join(format!("ack-{w}")).exists();
                for k in 1..=12u64 {
                    let got = store
                        .get_unchecked(k, 0)
                        .unwrap_or_else(|e| panic!("{how:?} step {n}: GET {k}: {e}"));
                    let newest = (1..=3u64).rev().find(|v| acked(&format!("{k}-{v}")));
                    if k == 3 && acked("3-del") {
                        assert!(got.is_none(), "{how:?} step {n}: 3 was deleted");
                    } else if let Some(v) = newest {
                        // The newest acknowledged version, or one put after it
                        // and not yet acknowledged.
                        let ok = got
                            .as_ref()
                            .is_some_and(|o| (v..=3).any(|w| o.data == data(k, w)));
                        assert!(ok, "{how:?} step {n}: {k} must hold version {v} or later");
                    }
                }
            },
        )
        .unwrap();
        eprintln!("{how:?}: the power cut after each of {} steps", steps - 1);
        assert!(steps > 40, "{how:?}: {steps} steps");
    }
}
