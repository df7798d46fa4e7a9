//! Shared by the old-format fixture tests (`v1_store.rs`, `v2_store.rs`,
//! `v3_store.rs`, `seg2_store.rs`): the store each fixture was written with, its operations
//! and the contents they leave, and the checks. Each fixture's shape (how
//! many keys, how long their values) is the one its writer used, so the
//! contents derived here are byte for byte what the fixture holds.
// Fixtures and damage are written as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use strata_store::{PutItem, Store, StoreConfig, Tier};

/// A fixture's shape.
pub struct Shape {
    /// The directory under `tests/fixtures/`.
    pub dir: &'static str,
    /// Keys 0..keys.
    pub keys: u64,
    /// Values are `base + (…) % spread` bytes long.
    pub base: usize,
    pub spread: u64,
    /// A merge after this many operations (none for the version-1
    /// fixture, written before merges existed).
    pub merge_after: Option<usize>,
}

impl Shape {
    /// The shape of the fixtures written since merges exist: 200 keys,
    /// values of 20–319 bytes, a merge after 250 operations.
    pub const fn merged(dir: &'static str) -> Shape {
        Shape {
            dir,
            keys: 200,
            base: 20,
            spread: 300,
            merge_after: Some(250),
        }
    }

    pub fn root(&self) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(self.dir)
    }

    pub fn data(&self, key: u64, ver: u32) -> Vec<u8> {
        let len = self.base + ((key * 37 + u64::from(ver) * 11) % self.spread) as usize;
        (0..len)
            .map(|i| (key as usize * 13 + ver as usize * 7 + i * 3) as u8)
            .collect()
    }

    /// The operations, in order: (key, version or None for a delete,
    /// flash?).
    pub fn ops(&self) -> Vec<(u64, Option<u32>, bool)> {
        let n = self.keys;
        let mut v = Vec::new();
        for k in 0..n {
            v.push((k, Some(1), k % 3 != 0));
        }
        // Overwrites on the other tier (some land in lower segment ids).
        for k in (0..n).step_by(4) {
            v.push((k, Some(2), k % 3 == 0));
        }
        for k in (0..n).step_by(7) {
            v.push((k, None, true));
        }
        for k in (1..n).step_by(10) {
            v.push((k, Some(3), k % 2 == 0));
        }
        v
    }

    /// The version each key holds once every operation ran.
    pub fn expected(&self) -> HashMap<u64, u32> {
        let mut m = HashMap::new();
        for (k, ver, _) in self.ops() {
            match ver {
                Some(v) => {
                    m.insert(k, v);
                }
                None => {
                    m.remove(&k);
                }
            }
        }
        m
    }

    /// Writes the fixture with the code of its format (run once; kept to
    /// document what the fixture holds): the operations, a merge after
    /// `merge_after` of them, then the store closed.
    pub fn write(&self) {
        let root = self.root();
        let (flash, disk) = (root.join("flash"), root.join("disk"));
        let _ = std::fs::remove_dir_all(&root);
        let mut c = config(&flash, &disk);
        c.create_dirs = true;
        let store = Store::open(c).unwrap();
        for (i, (k, ver, on_flash)) in self.ops().into_iter().enumerate() {
            match ver {
                Some(v) => {
                    let d = self.data(k, v);
                    let tier = if on_flash { Tier::Flash } else { Tier::Disk };
                    store
                        .put_batch(
                            tier,
                            &[PutItem {
                                head: &[],
                                key: k,
                                alt_key: 0,
                                cookie: v,
                                data: &d,
                            }],
                        )
                        .unwrap();
                }
                None => {
                    store.delete(k, 0).unwrap();
                }
            }
            if Some(i + 1) == self.merge_after {
                store.merge_index().unwrap();
            }
        }
        if self.merge_after.is_some() {
            store.checkpoint().unwrap();
        } else {
            store.seal_active(1).unwrap();
        }
        store.close().unwrap();
        for d in [&flash, &disk] {
            let _ = std::fs::remove_file(d.join(strata_store::LOCK_FILE));
        }
    }

    /// Copies the fixture into `tmp` (the tests write to their copy):
    /// returns its flash and disk directories.
    pub fn copy_to(&self, tmp: &Path) -> (PathBuf, PathBuf) {
        let root = self.root();
        let (flash, disk) = (tmp.join("flash"), tmp.join("disk"));
        copy_dir(&root.join("flash"), &flash);
        copy_dir(&root.join("disk"), &disk);
        (flash, disk)
    }

    /// Every key reads back as `want` says (its version's value, or
    /// absent).
    pub fn check(&self, store: &Store, want: &HashMap<u64, u32>, what: &str) {
        for k in 0..self.keys {
            let got = store.get_unchecked(k, 0).unwrap();
            match want.get(&k) {
                Some(&v) => {
                    let o = got.unwrap_or_else(|| panic!("{what}: key {k} missing"));
                    assert_eq!((o.cookie, o.data), (v, self.data(k, v)), "{what}: key {k}");
                }
                None => assert!(got.is_none(), "{what}: key {k} resurrected"),
            }
        }
    }

    /// One round of "it keeps working as a store" on an opened fixture:
    /// overwrite key 5 + round, delete key 105 + round, merge the index
    /// (`merged` then looks at the directory), check, and in round 1 also
    /// compact everything and check again; `want` follows the changes.
    pub fn keep_working(
        &self,
        store: &Store,
        want: &mut HashMap<u64, u32>,
        round: u64,
        merged: impl FnOnce(),
    ) {
        let k = 5 + round;
        store.put(Tier::Disk, k, 0, 9, &self.data(k, 9)).unwrap();
        want.insert(k, 9);
        store.delete(100 + k, 0).unwrap();
        want.remove(&(100 + k));
        store.merge_index().unwrap();
        merged();
        self.check(store, want, &format!("round {round} after the merge"));
        if round == 1 {
            store.compact_all(0.0, &mut |_| {}).unwrap();
            self.check(store, want, &format!("round {round} after compaction"));
        }
    }
}

/// The store configuration every fixture was written and is read with.
pub fn config(flash: &Path, disk: &Path) -> StoreConfig {
    let mut c = StoreConfig::new(flash, Tier::Flash).with_device(disk, Tier::Disk);
    c.segment_size = 8192;
    c.auto_compaction = false;
    c
}

/// The superblock version of each segment file in `dir`, by segment id.
pub fn segment_versions(dir: &std::path::Path) -> std::collections::BTreeMap<u64, u32> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "seg"))
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            let sb = strata_store::format::superblock::Superblock::parse(&b).unwrap();
            (sb.id, sb.version)
        })
        .collect()
}

/// Index checkpoints of format `version` in a device directory.
pub fn checkpoints_of_version(dir: &Path, version: u32) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| std::fs::read(e.unwrap().path()).ok())
        .filter(|b| b.len() >= 12 && &b[0..8] == b"STRATIDX" && b[8..12] == version.to_le_bytes())
        .count()
}

/// Copies the files (not the subdirectories) of `from` into `to`.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
