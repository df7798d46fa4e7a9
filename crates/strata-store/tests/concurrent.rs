//! Concurrency: writers, deleters, readers and compactions at the same time
//! on a two-device store. Every read returns either nothing or a version
//! its key really had, never an error; at the end the store equals the
//! model, before and after a reopen.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use strata_store::{PutItem, Store, StoreConfig, Tier};

const WRITERS: u64 = 3;
const KEYS_PER_WRITER: u64 = 150;

fn data(key: u64, ver: u64) -> Vec<u8> {
    let len = 50 + ((key * 7 + ver * 13) % 400) as usize;
    (0..len)
        .map(|i| (key as usize * 31 + ver as usize * 17 + i) as u8)
        .collect()
}

fn config(a: &std::path::Path, b: &std::path::Path) -> StoreConfig {
    let mut c = StoreConfig::new(a, Tier::Flash).with_device(b, Tier::Disk);
    c.segment_size = 32 << 10;
    c.compaction_garbage_ratio = 0.3;
    c.compaction_bytes_per_s = None;
    c.checkpoint_interval = std::time::Duration::from_millis(10);
    // fewer open files than segments: sealed files are closed and reopened
    // while readers, flag writes and rewrites use them
    c.max_open_files = 4;
    c
}

#[test]
fn readers_writers_deleters_and_compactions_together() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::open(config(a.path(), b.path())).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    // Readers: any value read must be data(key, ver) for the ver in its cookie.
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let store = store.clone();
        let stop = stop.clone();
        readers.push(std::thread::spawn(move || {
            let mut n = 0u64;
            let mut x = r + 1;
            while !stop.load(Ordering::Relaxed) {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = (x >> 33) % (WRITERS * KEYS_PER_WRITER);
                // contains() reads the needle whatever its cookie
                if store.contains(key, 0).unwrap() {
                    n += 1;
                }
            }
            n
        }));
    }
    let compactor = {
        let store = store.clone();
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut runs = 0;
            while !stop.load(Ordering::Relaxed) {
                runs += store.compact_all(0.2, &mut |_| {}).unwrap().len();
                store.merge_index().unwrap();
                if let Some(s) = store.segments().into_iter().find(|s| !s.active) {
                    let _ = store.move_segment(s.id, 1 - s.device, &mut |_| {});
                }
            }
            runs
        })
    };
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let store = store.clone();
        writers.push(std::thread::spawn(move || {
            let mut model: HashMap<u64, Option<u64>> = HashMap::new();
            let mut x = w * 977 + 5;
            for ver in 1..=600u64 {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let key = w * KEYS_PER_WRITER + (x >> 33) % KEYS_PER_WRITER;
                if ver % 5 == 0 {
                    let existed = store.delete(key, 0).unwrap();
                    assert_eq!(
                        existed,
                        model.get(&key).copied().flatten().is_some(),
                        "key {key}"
                    );
                    model.insert(key, None);
                } else {
                    let d = data(key, ver);
                    let tier = if ver % 3 == 0 {
                        Tier::Disk
                    } else {
                        Tier::Flash
                    };
                    store
                        .put_batch(
                            tier,
                            &[PutItem {
                                head: &[],
                                key,
                                alt_key: 0,
                                cookie: ver as u32,
                                data: &d,
                            }],
                        )
                        .unwrap();
                    model.insert(key, Some(ver));
                }
                // read back own writes
                if let Some(Some(v)) = model.get(&key) {
                    assert_eq!(
                        store.get(key, 0, *v as u32).unwrap().unwrap().data,
                        data(key, *v)
                    );
                }
            }
            model
        }));
    }
    let mut model = HashMap::new();
    for w in writers {
        model.extend(w.join().unwrap());
    }
    stop.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    let compactions = compactor.join().unwrap();
    let check = |store: &Store| {
        for (&k, &v) in &model {
            match v {
                Some(v) => assert_eq!(
                    store.get(k, 0, v as u32).unwrap().map(|o| o.data),
                    Some(data(k, v)),
                    "key {k}"
                ),
                None => assert!(!store.contains(k, 0).unwrap(), "key {k} should be deleted"),
            }
        }
    };
    check(&store);
    drop(store);
    let store = Store::open(config(a.path(), b.path())).unwrap();
    check(&store);
    assert!(compactions > 0, "no compaction ran");
}
