//! Bit-level building blocks of the compact index: fixed-width packed
//! arrays and an Elias–Fano sequence. Pure: no I/O.

/// Number of bits needed to write `v` (0 for 0).
#[inline]
pub fn bits_for(v: u64) -> u32 {
    64 - v.leading_zeros()
}

/// An array of `len` unsigned values of `width` bits each (0..=64), packed
/// little-endian into 64-bit words.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PackedArray {
    width: u32,
    len: usize,
    words: Vec<u64>,
}

impl PackedArray {
    /// An array of `len` zeros.
    pub fn new(width: u32, len: usize) -> Self {
        let width = width.min(64);
        let words = (len * width as usize).div_ceil(64);
        PackedArray {
            width,
            len,
            words: vec![0; words],
        }
    }

    /// Rebuilds an array from its parts, as read from a checkpoint; `None`
    /// if the word count does not match.
    pub fn from_parts(width: u32, len: usize, words: Vec<u64>) -> Option<Self> {
        if width > 64 || words.len() != (len.checked_mul(width as usize)?).div_ceil(64) {
            return None;
        }
        Some(PackedArray { width, len, words })
    }

    /// Bits per value.
    pub fn width(&self) -> u32 {
        self.width
    }
    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when the array holds no values.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The packed words.
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    fn mask(&self) -> u64 {
        if self.width == 64 {
            u64::MAX
        } else {
            (1u64 << self.width) - 1
        }
    }

    /// Value `i` (0 when out of range or width 0).
    #[inline]
    pub fn get(&self, i: usize) -> u64 {
        if self.width == 0 || i >= self.len {
            return 0;
        }
        let bit = i * self.width as usize;
        let (w, o) = (bit / 64, bit % 64);
        let mut v = self.words[w] >> o;
        if o + self.width as usize > 64 {
            v |= self.words[w + 1] << (64 - o);
        }
        v & self.mask()
    }

    /// Sets value `i` to `v` (truncated to the width).
    #[inline]
    pub fn set(&mut self, i: usize, v: u64) {
        if self.width == 0 || i >= self.len {
            return;
        }
        let v = v & self.mask();
        let bit = i * self.width as usize;
        let (w, o) = (bit / 64, bit % 64);
        self.words[w] &= !(self.mask() << o);
        self.words[w] |= v << o;
        if o + self.width as usize > 64 {
            let spill = 64 - o;
            self.words[w + 1] &= !(self.mask() >> spill);
            self.words[w + 1] |= v >> spill;
        }
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.words.len() * 8
    }
}

/// How many ones separate two select samples of an [`EliasFano`] sequence.
pub const SELECT_SAMPLE: usize = 256;

/// A non-decreasing sequence of integers in `0..=universe`, Elias–Fano coded:
/// each value's low `low_bits` bits in a packed array, its high part in unary
/// in a bit vector, plus the position of every [`SELECT_SAMPLE`]-th one so
/// that random access costs a few word scans.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EliasFano {
    len: usize,
    universe: u64,
    low: PackedArray,
    high: Vec<u64>,
    samples: Vec<u64>,
}

impl EliasFano {
    /// Encodes `values`, which must be non-decreasing and at most `universe`.
    /// Returns `None` when they are not.
    pub fn new(values: &[u64], universe: u64) -> Option<Self> {
        let n = values.len();
        let low_bits = if n == 0 {
            0
        } else {
            let ratio = universe / n as u64;
            if ratio == 0 {
                0
            } else {
                bits_for(ratio) - 1
            }
        };
        let mut low = PackedArray::new(low_bits, n);
        let high_len = n + (universe >> low_bits) as usize + 1;
        let mut high = vec![0u64; high_len.div_ceil(64)];
        let mut prev = 0u64;
        for (i, &v) in values.iter().enumerate() {
            if v < prev || v > universe {
                return None;
            }
            prev = v;
            low.set(i, v);
            let pos = (v >> low_bits) as usize + i;
            high[pos / 64] |= 1u64 << (pos % 64);
        }
        let mut ef = EliasFano {
            len: n,
            universe,
            low,
            high,
            samples: Vec::new(),
        };
        ef.samples = ef.build_samples();
        Some(ef)
    }

    fn build_samples(&self) -> Vec<u64> {
        let mut samples = Vec::with_capacity(self.len / SELECT_SAMPLE + 1);
        let mut seen = 0usize;
        for (w, &word) in self.high.iter().enumerate() {
            let mut word = word;
            while word != 0 {
                let bit = word.trailing_zeros() as usize;
                if seen.is_multiple_of(SELECT_SAMPLE) {
                    samples.push((w * 64 + bit) as u64);
                }
                seen += 1;
                word &= word - 1;
            }
        }
        samples
    }

    /// Rebuilds a sequence from the parts a checkpoint stores (the select
    /// samples are recomputed); `None` if the parts are inconsistent.
    pub fn from_parts(len: usize, universe: u64, low: PackedArray, high: Vec<u64>) -> Option<Self> {
        let high_len = len.checked_add((universe >> low.width().min(63)) as usize)? + 1;
        if low.len() != len || high.len() != high_len.div_ceil(64) {
            return None;
        }
        let ones: usize = high.iter().map(|w| w.count_ones() as usize).sum();
        if ones != len {
            return None;
        }
        let mut ef = EliasFano {
            len,
            universe,
            low,
            high,
            samples: Vec::new(),
        };
        ef.samples = ef.build_samples();
        // Stored bits can describe a decreasing sequence or values past the
        // universe; refuse them.
        let mut prev = 0u64;
        for v in ef.iter() {
            if v < prev || v > universe {
                return None;
            }
            prev = v;
        }
        Some(ef)
    }

    /// Number of values.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The largest value the sequence may hold.
    pub fn universe(&self) -> u64 {
        self.universe
    }
    /// The packed low parts.
    pub fn low(&self) -> &PackedArray {
        &self.low
    }
    /// The unary-coded high parts.
    pub fn high(&self) -> &[u64] {
        &self.high
    }

    /// Value `i`, or `None` when out of range.
    pub fn get(&self, i: usize) -> Option<u64> {
        if i >= self.len {
            return None;
        }
        let sample = i / SELECT_SAMPLE;
        let start = *self.samples.get(sample)? as usize;
        let mut remaining = i - sample * SELECT_SAMPLE;
        let mut w = start / 64;
        let mut word = self.high.get(w)? & (u64::MAX << (start % 64));
        loop {
            let ones = word.count_ones() as usize;
            if remaining < ones {
                let pos = w * 64 + select_in_word(word, remaining as u32) as usize;
                let high = (pos - i) as u64;
                return Some((high << self.low.width()) | self.low.get(i));
            }
            remaining -= ones;
            w += 1;
            word = *self.high.get(w)?;
        }
    }

    /// Heap bytes used.
    pub fn heap_bytes(&self) -> usize {
        self.low.heap_bytes() + self.high.len() * 8 + self.samples.len() * 8
    }

    /// All values in order, decoded sequentially (much faster than `get`
    /// for every index).
    pub fn iter(&self) -> impl Iterator<Item = u64> + '_ {
        let mut w = 0usize;
        let mut word = self.high.first().copied().unwrap_or(0);
        (0..self.len).map(move |i| {
            while word == 0 {
                w += 1;
                word = self.high.get(w).copied().unwrap_or(u64::MAX);
            }
            let pos = w * 64 + word.trailing_zeros() as usize;
            word &= word - 1;
            (((pos - i) as u64) << self.low.width()) | self.low.get(i)
        })
    }
}

/// Position of the `k`-th set bit (0-based) of `w`, which has more than `k`.
#[inline]
fn select_in_word(mut w: u64, mut k: u32) -> u32 {
    let mut pos = 0;
    for shift in [32u32, 16, 8] {
        let low = (w & ((1u64 << shift) - 1)).count_ones();
        if k >= low {
            k -= low;
            w >>= shift;
            pos += shift;
        }
    }
    for _ in 0..k {
        w &= w - 1;
    }
    pos + w.trailing_zeros()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn packed_roundtrip(width in 0u32..=64, vals in proptest::collection::vec(any::<u64>(), 0..200)) {
            let mut a = PackedArray::new(width, vals.len());
            for (i, v) in vals.iter().enumerate() { a.set(i, *v); }
            let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
            for (i, v) in vals.iter().enumerate() { prop_assert_eq!(a.get(i), v & mask); }
        }

        #[test]
        fn elias_fano_roundtrip(mut vals in proptest::collection::vec(0u64..1_000_000, 0..2000), extra in 0u64..100) {
            vals.sort_unstable();
            let universe = vals.last().copied().unwrap_or(0) + extra;
            let ef = EliasFano::new(&vals, universe).unwrap();
            for (i, v) in vals.iter().enumerate() { prop_assert_eq!(ef.get(i), Some(*v)); }
            prop_assert_eq!(ef.get(vals.len()), None);
            prop_assert_eq!(ef.iter().collect::<Vec<_>>(), vals.clone());
            let again = EliasFano::from_parts(ef.len(), ef.universe(), ef.low().clone(), ef.high().to_vec()).unwrap();
            prop_assert_eq!(again, ef);
        }
    }

    #[test]
    fn elias_fano_rejects_unsorted() {
        assert!(EliasFano::new(&[3, 2], 10).is_none());
        assert!(EliasFano::new(&[3, 20], 10).is_none());
    }
}
