//! What the harness does to a stopped node's files: their list, a bit
//! flipped in a needle, a checkpoint or a superblock, several bytes
//! damaged under a segment's newest needles, and where a segment's
//! needles end (what a torn write may cut).

use rand::rngs::StdRng;
use rand::Rng;
use std::path::{Path, PathBuf};

/// Every regular file under `dir` whose name ends with `suffix`.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => stack.push(p),
                Ok(t) if t.is_file() && p.to_string_lossy().ends_with(suffix) => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Where the last non-zero byte of a file ends, rounded up to 8 (needles
/// are 8-byte aligned): the end of a segment's needles, wherever the
/// prepared zeros after them end.
pub fn written_end(p: &Path) -> std::io::Result<u64> {
    let b = std::fs::read(p)?;
    let end = b.iter().rposition(|&x| x != 0).map_or(0, |i| i + 1);
    Ok((end as u64).next_multiple_of(8).min(b.len() as u64))
}

/// Which part of the files a bit flip hits.
#[derive(Clone, Copy, Debug)]
pub enum Flip {
    /// Past a segment's superblock: a needle's header, key, data or
    /// checksum, or prepared zeros.
    Needle,
    /// An index checkpoint (rebuilt from its segment).
    Checkpoint,
    /// A segment's 64-byte superblock (one bit: corrected by its checksum).
    Superblock,
}

/// Flips one random bit of the file `f` in the part `what` names (past
/// the 64-byte superblock for a needle, in it for a superblock, anywhere
/// in a checkpoint): the byte offset and the bit, or None when the file
/// has no such part.
pub fn flip_bit(f: &Path, what: Flip, rng: &mut StdRng) -> std::io::Result<Option<(usize, u8)>> {
    let mut bytes = std::fs::read(f)?;
    let len = bytes.len();
    let (lo, hi) = match what {
        Flip::Needle => (64, len),
        Flip::Superblock => (0, 64.min(len)),
        Flip::Checkpoint => (0, len),
    };
    if hi <= lo {
        return Ok(None);
    }
    let off = rng.random_range(lo..hi);
    let bit = rng.random_range(0..8u8);
    bytes[off] ^= 1 << bit;
    std::fs::write(f, &bytes)?;
    Ok(Some((off, bit)))
}

/// Damage of several bytes at once near the end of a segment's written
/// needles (a bad sector under the newest writes, say): 2 to 16 bytes from
/// a random place in the last 256 bytes written (past the superblock),
/// each XORed with a random non-zero value. Such damage hits the newest
/// needle's header in more than one bit (no checksum names whose needle
/// it was) or looks like a torn write. The offset and the byte count, or
/// None when the segment holds no needle.
pub fn burst_at_tail(f: &Path, rng: &mut StdRng) -> std::io::Result<Option<(usize, usize)>> {
    let end = written_end(f)? as usize;
    if end <= 64 {
        return Ok(None);
    }
    let mut bytes = std::fs::read(f)?;
    let off = rng.random_range(end.saturating_sub(256).max(64)..end);
    let n = rng.random_range(2..=16usize).min(bytes.len() - off);
    for b in &mut bytes[off..off + n] {
        *b ^= rng.random_range(1..=255u8);
    }
    std::fs::write(f, &bytes)?;
    Ok(Some((off, n)))
}
