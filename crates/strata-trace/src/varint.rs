//! LEB128 varints and zigzag, as used by Strata's binary trace format.

/// Appends `v` as an unsigned LEB128 varint (1 to 10 bytes).
#[inline]
pub(crate) fn put(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Zigzag: small magnitudes of either sign become small unsigned numbers.
#[inline]
pub(crate) fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub(crate) fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// A read cursor over a block.
pub(crate) struct Cursor<'a> {
    pub b: &'a [u8],
    pub i: usize,
}

impl<'a> Cursor<'a> {
    #[inline(always)]
    pub fn byte(&mut self) -> Option<u8> {
        let v = *self.b.get(self.i)?;
        self.i += 1;
        Some(v)
    }

    #[inline(always)]
    pub fn u64le(&mut self) -> Option<u64> {
        let s = self.b.get(self.i..self.i + 8)?;
        self.i += 8;
        let mut a = [0u8; 8];
        a.copy_from_slice(s);
        Some(u64::from_le_bytes(a))
    }

    /// An unsigned LEB128 varint; `None` if the block ends inside it or it
    /// is longer than 10 bytes / overflows 64 bits. Best for fields that
    /// are usually one byte (a predictable branch takes them).
    #[inline(always)]
    pub fn varint(&mut self) -> Option<u64> {
        if let Some(&b0) = self.b.get(self.i) {
            if b0 < 0x80 {
                self.i += 1;
                return Some(b0 as u64);
            }
        }
        self.varint_mixed()
    }

    /// The same decoding without the one-byte branch: for fields whose
    /// length varies from record to record (a mispredicted branch costs more
    /// than the few operations below).
    #[inline(always)]
    pub fn varint_mixed(&mut self) -> Option<u64> {
        // With 8 bytes at hand, decode branch-free from one load: find the
        // first byte without the continuation bit, keep the bytes through
        // it, and gather their 7-bit groups in three steps.
        if let Some(w) = self.b.get(self.i..self.i + 8) {
            if let Ok(w) = <[u8; 8]>::try_from(w) {
                let w = u64::from_le_bytes(w);
                let stops = !w & 0x8080_8080_8080_8080;
                if stops != 0 {
                    let bits = stops.trailing_zeros() + 1; // 8, 16, ..., 64
                    let x = w & (u64::MAX >> (64 - bits)) & 0x7f7f_7f7f_7f7f_7f7f;
                    let x = ((x & 0x7f00_7f00_7f00_7f00) >> 1) | (x & 0x007f_007f_007f_007f);
                    let x = ((x & 0x3fff_0000_3fff_0000) >> 2) | (x & 0x0000_3fff_0000_3fff);
                    let x = ((x & 0x0fff_ffff_0000_0000) >> 4) | (x & 0x0000_0000_0fff_ffff);
                    self.i += (bits / 8) as usize;
                    return Some(x);
                }
            }
        }
        self.varint_slow()
    }

    #[inline(never)]
    fn varint_slow(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let b = *self.b.get(self.i)?;
            self.i += 1;
            if shift == 63 && b > 1 {
                return None;
            }
            v |= ((b & 0x7f) as u64) << shift;
            if b < 0x80 {
                return Some(v);
            }
            shift += 7;
            if shift > 63 {
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let vals = [0u64, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX];
        let mut buf = Vec::new();
        for v in vals {
            put(&mut buf, v);
        }
        let mut c = Cursor { b: &buf, i: 0 };
        for v in vals {
            assert_eq!(c.varint(), Some(v));
        }
        assert_eq!(c.varint(), None);
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -123456789] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert!(zigzag(-1) < 3 && zigzag(1) < 3);
    }

    #[test]
    fn fast_and_slow_paths_agree() {
        // Every length of varint, at the end of a block (slow path) and with
        // slack after it (the 8-byte fast path).
        for shift in 0..64 {
            for v in [1u64 << shift, (1u64 << shift) - 1, (1u64 << shift) | 0x55] {
                for pad in [0usize, 3, 10] {
                    let mut buf = Vec::new();
                    put(&mut buf, v);
                    let len = buf.len();
                    buf.extend(std::iter::repeat_n(0x80, pad));
                    let mut c = Cursor { b: &buf, i: 0 };
                    assert_eq!(c.varint(), Some(v), "v={v} pad={pad}");
                    assert_eq!(c.i, len);
                    let mut c = Cursor { b: &buf, i: 0 };
                    assert_eq!(c.varint_mixed(), Some(v), "v={v} pad={pad}");
                    assert_eq!(c.i, len);
                }
            }
        }
    }

    #[test]
    fn rejects_overlong_and_truncated() {
        let mut c = Cursor {
            b: &[0xff; 11],
            i: 0,
        };
        assert_eq!(c.varint(), None);
        let mut c = Cursor {
            b: &[0x80, 0x80],
            i: 0,
        };
        assert_eq!(c.varint(), None);
        // 2^64 does not fit.
        let mut c = Cursor {
            b: &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            i: 0,
        };
        assert_eq!(c.varint(), None);
    }
}
