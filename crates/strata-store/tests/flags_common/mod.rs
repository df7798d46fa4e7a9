//! What a power loss can do to flags whose sync a version order deferred
//! (`StoreConfig::version_order`), done to a closed store's files: flags
//! rewritten in place, index checkpoints and the run removed.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]
#![allow(dead_code)]

use std::os::unix::fs::FileExt;
use std::path::Path;

/// Orders data by its first 8 bytes (a version number, LE).
pub const BY_VERSION: strata_store::VersionOrder = strata_store::VersionOrder {
    name: "test-version",
    cmp: |a, b| {
        let v = |d: &[u8]| Some(u64::from_le_bytes(d.get(..8)?.try_into().ok()?));
        Some(v(a)?.cmp(&v(b)?))
    },
};

/// The superseded flag (docs/store-format.md, *Needle*).
pub const SUPERSEDED: u32 = strata_store::format::needle::FLAG_SUPERSEDED;

/// For every needle of the `.seg` files of `dir` (key, alt, flags, data),
/// writes the flags `f` returns, if any, in the segment's flag code (from
/// its superblock's version); returns how many it rewrote.
pub fn rewrite_flags(dir: &Path, f: impl Fn(u64, u32, u32, &[u8]) -> Option<u32>) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.extension().is_none_or(|x| x != "seg") {
            continue;
        }
        let bytes = std::fs::read(&p).unwrap();
        let file = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        let code = strata_store::format::needle::FlagCode::of_version(word(8));
        let mut at = 64;
        while at + 40 <= bytes.len() && &bytes[at..at + 4] == b"NEDL" {
            let size = (word(at + 24) & 0x7fff_ffff) as usize;
            let key = u64::from_le_bytes(bytes[at + 8..at + 16].try_into().unwrap());
            let (alt, flags) = (word(at + 16), code.flags(word(at + 20)).unwrap());
            if let Some(new) = f(key, alt, flags, &bytes[at + 32..at + 32 + size]) {
                file.write_all_at(&code.word(new).to_le_bytes(), at as u64 + 20)
                    .unwrap();
                n += 1;
            }
            at += (40 + size + 7) & !7;
        }
    }
    n
}

/// Removes the index checkpoints and the run: the next open scans every
/// segment, as after a crash before any checkpoint.
pub fn drop_indexes(dir: &Path) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let name = p.file_name().unwrap().to_string_lossy().to_string();
        if name.ends_with(".idx") || name == "strata.run" {
            std::fs::remove_file(&p).unwrap();
        }
    }
}
