//! Pure encoding and parsing of Strata's on-disk formats: needles,
//! segment superblocks and index checkpoints. Nothing here does I/O, so the
//! parsers can be fuzzed and tested on byte slices
//! (docs/store-format.md describes every byte).

pub mod checkpoint;
pub mod needle;
pub mod run;
pub mod superblock;

/// A little-endian cursor over a byte slice; every read is bounds-checked.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.bytes.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }
    pub(crate) fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    /// `count` u64 words, refusing counts larger than the bytes left.
    pub(crate) fn words(&mut self, count: u64) -> Option<Vec<u64>> {
        let n = usize::try_from(count).ok()?;
        if n.checked_mul(8)? > self.bytes.len() - self.pos {
            return None;
        }
        (0..n).map(|_| self.u64()).collect()
    }
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }
}

/// Reads a little-endian u32 at `at` (caller guarantees bounds).
pub(crate) fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

/// Reads a little-endian u64 at `at` (caller guarantees bounds).
pub(crate) fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}
