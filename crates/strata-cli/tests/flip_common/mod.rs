//! Damage on the device, for the tests that flip stored bytes under a
//! running node (node_abuse.rs, s3_api.rs).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

/// Files under `dir` (recursively).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Flips one bit of the byte `at` bytes into the first copy of `probe`
/// in each file under `dir` that holds one: returns how many files.
pub fn flip_on_disk(dir: &Path, probe: &[u8], at: usize) -> usize {
    let mut flipped = 0;
    for f in files_under(dir) {
        let mut bytes = std::fs::read(&f).unwrap();
        if let Some(i) = bytes.windows(probe.len()).position(|w| w == probe) {
            bytes[i + at] ^= 0x40;
            std::fs::write(&f, &bytes).unwrap();
            flipped += 1;
        }
    }
    flipped
}
