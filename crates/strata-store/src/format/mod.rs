//! Pure encoding and parsing of Strata's on-disk formats: needles,
//! segment superblocks and index checkpoints. Nothing here does I/O, so the
//! parsers can be fuzzed and tested on byte slices
//! (docs/store-format.md describes every byte).

pub mod checkpoint;
pub mod needle;
pub mod run;
pub mod superblock;

/// What `parse` makes of the first `N` bytes of `bytes` with one bit
/// flipped, when exactly one single flip gives a value: the correction of
/// a single-bit error that a checksum of Hamming distance 3 or more allows
/// (CRC32C's is 6 over the few hundred bits of a needle header or a
/// superblock: the tests below check that no error of one to five bits
/// has a zero syndrome). `None`
/// when no flip gives one, or more than one does. `bytes` holds `N` bytes
/// at least.
pub(crate) fn one_bit_correction<T, const N: usize>(
    bytes: &[u8],
    parse: impl Fn(&[u8; N]) -> Option<T>,
) -> Option<T> {
    let mut b = [0u8; N];
    b.copy_from_slice(&bytes[..N]);
    let mut found = None;
    for bit in 0..N * 8 {
        b[bit / 8] ^= 1 << (bit % 8);
        if let Some(v) = parse(&b) {
            if found.is_some() {
                return None;
            }
            found = Some(v);
        }
        b[bit / 8] ^= 1 << (bit % 8);
    }
    found
}

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

#[cfg(test)]
mod tests {
    use std::collections::{HashMap, HashSet};

    /// The syndromes of a CRC32C codeword of `data_bits` data bits and its
    /// 32 checksum bits: what flipping each bit does to (computed CRC) xor
    /// (stored CRC). CRC32C is affine, so a data bit's is the CRC of that
    /// bit alone xor the CRC of zeros.
    fn syndromes(data_bits: usize) -> Vec<u32> {
        let zero = vec![0u8; data_bits / 8];
        let base = crc32c::crc32c(&zero);
        let mut s: Vec<u32> = (0..data_bits)
            .map(|i| {
                let mut e = zero.clone();
                e[i / 8] ^= 1 << (i % 8);
                crc32c::crc32c(&e) ^ base
            })
            .collect();
        s.extend((0..32).map(|j| 1u32 << j));
        s
    }

    /// No error of 1 to 5 bits has a zero syndrome: the minimum distance is
    /// at least 6, so one flipped bit has exactly one correction and an
    /// error of two to four bits is never one bit from another codeword
    /// (what `one_bit_correction` relies on).
    fn assert_distance_at_least_6(data_bits: usize) {
        let s = syndromes(data_bits);
        let n = s.len();
        let singles: HashSet<u32> = s.iter().copied().collect();
        assert!(!singles.contains(&0) && singles.len() == n, "weight 1 or 2");
        let mut pairs: HashMap<u32, (usize, usize)> = HashMap::new();
        for i in 0..n {
            for j in i + 1..n {
                let v = s[i] ^ s[j];
                assert!(!singles.contains(&v), "weight 3: {i} {j}");
                assert!(pairs.insert(v, (i, j)).is_none(), "weight 4: {i} {j}");
            }
        }
        for i in 0..n {
            for j in i + 1..n {
                for k in j + 1..n {
                    if let Some(&(l, m)) = pairs.get(&(s[i] ^ s[j] ^ s[k])) {
                        assert!(
                            [i, j, k].contains(&l) || [i, j, k].contains(&m),
                            "weight 5: {i} {j} {k} {l} {m}"
                        );
                    }
                }
            }
        }
    }

    /// A needle header: 24 checksummed bytes (0..20 and 24..28).
    #[test]
    fn the_needle_header_checksum_has_distance_6() {
        assert_distance_at_least_6(24 * 8);
    }

    /// A superblock: 60 checksummed bytes.
    #[test]
    fn the_superblock_checksum_has_distance_6() {
        assert_distance_at_least_6(60 * 8);
    }
}
