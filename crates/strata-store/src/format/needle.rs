//! The needle: one object as it lies in a segment file.
//!
//! ```text
//! offset  size  field
//!      0     4  header magic  0x4C44454E ("NEDL" in file order)
//!      4     4  cookie        u32, random per object, checked on read
//!      8     8  key           u64
//!     16     4  alternate key u32
//!     20     4  flags         u32, coded as the segment's version says
//!               ([`FlagCode`]): version 3, deleted in bits 0-15 (all
//!               set), superseded in bits 16-31; versions 1 and 2, bit 0
//!               deleted, bit 1 superseded
//!     24     4  size word     u32: bits 0-30 the data size (n), bit 31
//!               the batch end (segment version 2 on: set on the last
//!               needle of each write batch; see [`BATCH_END`])
//!     28     4  header CRC32C of bytes 0..20 and 24..28 (flags excluded:
//!               a delete rewrites them in place; the size word included)
//!     32     n  data
//!   32+n     4  footer magic  0x4C444E45 ("ENDL" in file order)
//!   36+n     4  CRC32C of the data
//!   40+n     p  zero padding, so that the needle length is a multiple of 8
//! ```
//! All integers little-endian.

use super::le_u32;
use super::le_u64;

/// Header magic ("NEDL" in file order).
pub const HEADER_MAGIC: u32 = u32::from_le_bytes(*b"NEDL");
/// Footer magic ("ENDL" in file order).
pub const FOOTER_MAGIC: u32 = u32::from_le_bytes(*b"ENDL");
/// Bytes before the data.
pub const HEADER_LEN: usize = 32;
/// Bytes after the data, before padding.
pub const FOOTER_LEN: usize = 8;
/// Byte offset of the flags word inside a needle.
pub const FLAGS_OFFSET: u64 = 20;
/// Flag: the object was deleted.
pub const FLAG_DELETED: u32 = 1;
/// Flag: a newer needle with the same identity exists in a segment that is
/// probed later (written when a put lands in an older segment than the
/// current version's, e.g. across tiers).
pub const FLAG_SUPERSEDED: u32 = 2;
/// Flags this format version knows.
pub const KNOWN_FLAGS: u32 = FLAG_DELETED | FLAG_SUPERSEDED;

/// How a segment's needles write their flags word. The word is outside the
/// header checksum, because a delete or a put rewrites it in place; so in
/// version-3 segments it carries its own redundancy instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlagCode {
    /// Segment versions 1 and 2: bit 0 deleted, bit 1 superseded, the other
    /// bits zero (a set one is damage). A flipped bit 0 or 1 deletes a
    /// live object or brings a deleted one back, and nothing can tell.
    Plain,
    /// Segment version 3: each flag is 16 copies of its bit, deleted in
    /// bits 0-15 and superseded in bits 16-31. A half with at most 3 bits
    /// set reads as clear, one with at least 13 as set, anything between
    /// is damage (`BadHeaderField`): up to 3 flipped bits per flag are
    /// corrected, 4 to 12 detected. A flag write puts the whole word, so
    /// it also mends the bits a read corrected.
    Coded,
    /// The word is not read and every flag reads as clear: for needles
    /// copied into an erasure-coded stripe, where flags mean nothing.
    Ignored,
}

impl FlagCode {
    /// The code of a segment of format `version`.
    pub fn of_version(version: u32) -> FlagCode {
        if version >= 3 {
            FlagCode::Coded
        } else {
            FlagCode::Plain
        }
    }

    /// The word that stores `flags` ([`FLAG_DELETED`], [`FLAG_SUPERSEDED`]).
    pub fn word(self, flags: u32) -> u32 {
        match self {
            FlagCode::Plain | FlagCode::Ignored => flags,
            FlagCode::Coded => {
                let half = |f: u32| if flags & f != 0 { 0xFFFF } else { 0 };
                half(FLAG_DELETED) | half(FLAG_SUPERSEDED) << 16
            }
        }
    }

    /// The flags `word` stores, or `None` when no word of this code is
    /// within its correction of it.
    pub fn flags(self, word: u32) -> Option<u32> {
        match self {
            FlagCode::Plain => (word & !KNOWN_FLAGS == 0).then_some(word),
            FlagCode::Ignored => Some(0),
            FlagCode::Coded => {
                let bit = |half: u32| match half.count_ones() {
                    0..=3 => Some(0),
                    13..=16 => Some(1),
                    _ => None,
                };
                Some((bit(word & 0xFFFF)? * FLAG_DELETED) | (bit(word >> 16)? * FLAG_SUPERSEDED))
            }
        }
    }
}

/// The largest data size the format accepts (a store's own limit is lower).
pub const MAX_DATA_LEN: u32 = 1 << 30;
/// Bit 31 of the size word: this needle ends its write batch. In a segment
/// of version 2 a batch's needles are all-or-nothing: an open keeps the
/// needles of a segment's tail only up to the last one carrying this bit
/// and cuts those after it, the whole needles a crash in the middle of the
/// batch's write left before its torn end (the kernel stops a `pwritev`
/// between pages when the process is killed). Covered by the header CRC,
/// so a bit flip cannot move a batch's end.
pub const BATCH_END: u32 = 1 << 31;

/// The fixed fields of a needle.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NeedleHeader {
    /// Random number checked on every read.
    pub cookie: u32,
    /// 64-bit key.
    pub key: u64,
    /// 32-bit alternate key.
    pub alt_key: u32,
    /// Flag bits ([`FLAG_DELETED`], [`FLAG_SUPERSEDED`]), decoded from the
    /// word by the segment's [`FlagCode`].
    pub flags: u32,
    /// Data size in bytes.
    pub size: u32,
    /// The needle ends its write batch ([`BATCH_END`]).
    pub batch_end: bool,
}

impl NeedleHeader {
    /// Total needle length on disk, padding included.
    pub fn needle_len(&self) -> u64 {
        needle_len(self.size)
    }
    /// True when the deleted flag is set.
    pub fn is_deleted(&self) -> bool {
        self.flags & FLAG_DELETED != 0
    }
    /// True when the superseded flag is set.
    pub fn is_superseded(&self) -> bool {
        self.flags & FLAG_SUPERSEDED != 0
    }
}

/// What is wrong with bytes that should be a needle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NeedleError {
    /// Fewer bytes than the needle needs.
    #[error("truncated needle: {need} bytes needed, {have} present")]
    Truncated {
        /// Bytes needed.
        need: u64,
        /// Bytes present.
        have: u64,
    },
    /// The header magic is wrong.
    #[error("bad needle header magic {0:#010x}")]
    BadHeaderMagic(u32),
    /// The header checksum does not match.
    #[error("needle header checksum mismatch")]
    BadHeaderChecksum,
    /// A flags word that is not one of its code, or an impossible size.
    #[error("needle header has bad flags word {flags:#010x} or size {size}")]
    BadHeaderField {
        /// The flags word as stored.
        flags: u32,
        /// The size field.
        size: u32,
    },
    /// The footer magic is wrong.
    #[error("bad needle footer magic {0:#010x}")]
    BadFooterMagic(u32),
    /// The data checksum does not match.
    #[error("needle data checksum mismatch (stored {stored:#010x}, computed {computed:#010x})")]
    BadDataChecksum {
        /// The checksum in the needle.
        stored: u32,
        /// The checksum of the bytes read.
        computed: u32,
    },
}

/// Total needle length on disk for `size` data bytes.
pub fn needle_len(size: u32) -> u64 {
    (HEADER_LEN as u64 + u64::from(size) + FOOTER_LEN as u64).next_multiple_of(8)
}

fn header_crc(h: &[u8]) -> u32 {
    let c = crc32c::crc32c(&h[0..20]);
    crc32c::crc32c_append(c, &h[24..28])
}

/// Appends the encoded needle to `out`, a batch of its own (its
/// [`BATCH_END`] bit set). `flags` is the word as stored: the segment's
/// [`FlagCode::word`] of the flags (0 for none in every code).
pub fn encode(out: &mut Vec<u8>, cookie: u32, key: u64, alt_key: u32, flags: u32, data: &[u8]) {
    encode_in_batch(out, cookie, key, alt_key, flags, data, true);
}

/// [`encode`] for a needle of a write batch: `batch_end` sets the
/// [`BATCH_END`] bit (see [`encode_frame`]).
pub fn encode_in_batch(
    out: &mut Vec<u8>,
    cookie: u32,
    key: u64,
    alt_key: u32,
    flags: u32,
    data: &[u8],
    batch_end: bool,
) {
    let mut frame = Vec::with_capacity(FRAME_MAX);
    let (head, tail) = encode_frame(&mut frame, cookie, key, alt_key, flags, &[data], batch_end);
    out.extend_from_slice(&frame[head]);
    out.extend_from_slice(data);
    out.extend_from_slice(&frame[tail]);
}

/// The most bytes [`encode_frame`] appends for one needle: the header,
/// the footer and up to 7 bytes of padding.
pub const FRAME_MAX: usize = HEADER_LEN + FOOTER_LEN + 7;

/// Appends a needle's frame to `out`, the bytes that go around its data:
/// the header, then the footer with its padding. Returns their ranges in
/// `out`; the needle is `out[head]`, the data, `out[tail]`, in that order
/// (what [`encode`] writes), so that a writer can hand the data to the
/// kernel where it lies (`pwritev`) instead of copying it into a buffer.
/// The needle's data is the parts of `data`, in order (one checksum over
/// them). `batch_end` sets the [`BATCH_END`] bit, for the last needle of a write
/// batch (in a segment of version 2; a version-1 segment takes needles
/// without it).
pub fn encode_frame(
    out: &mut Vec<u8>,
    cookie: u32,
    key: u64,
    alt_key: u32,
    flags: u32,
    data: &[&[u8]],
    batch_end: bool,
) -> (std::ops::Range<usize>, std::ops::Range<usize>) {
    let start = out.len();
    let size = data.iter().map(|d| d.len()).sum::<usize>() as u32;
    let word = if batch_end { size | BATCH_END } else { size };
    out.extend_from_slice(&HEADER_MAGIC.to_le_bytes());
    out.extend_from_slice(&cookie.to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(&alt_key.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&word.to_le_bytes());
    let crc = header_crc(&out[start..start + 28]);
    out.extend_from_slice(&crc.to_le_bytes());
    let tail = out.len();
    out.extend_from_slice(&FOOTER_MAGIC.to_le_bytes());
    let crc = data.iter().fold(0, |c, d| crc32c::crc32c_append(c, d));
    out.extend_from_slice(&crc.to_le_bytes());
    let pad = needle_len(size) as usize - HEADER_LEN - size as usize - FOOTER_LEN;
    out.resize(out.len() + pad, 0);
    (start..tail, tail..out.len())
}

/// Parses and checks a needle header (the first [`HEADER_LEN`] bytes).
/// `code` is the segment's ([`FlagCode::of_version`]).
pub fn parse_header(bytes: &[u8], code: FlagCode) -> Result<NeedleHeader, NeedleError> {
    if bytes.len() < HEADER_LEN {
        return Err(NeedleError::Truncated {
            need: HEADER_LEN as u64,
            have: bytes.len() as u64,
        });
    }
    let magic = le_u32(bytes, 0);
    if magic != HEADER_MAGIC {
        return Err(NeedleError::BadHeaderMagic(magic));
    }
    if le_u32(bytes, 28) != header_crc(&bytes[..28]) {
        return Err(NeedleError::BadHeaderChecksum);
    }
    let word = le_u32(bytes, 24);
    let stored = le_u32(bytes, 20);
    let size = word & !BATCH_END;
    let bad = NeedleError::BadHeaderField {
        flags: stored,
        size,
    };
    if size > MAX_DATA_LEN {
        return Err(bad);
    }
    Ok(NeedleHeader {
        cookie: le_u32(bytes, 4),
        key: le_u64(bytes, 8),
        alt_key: le_u32(bytes, 16),
        flags: code.flags(stored).ok_or(bad)?,
        size,
        batch_end: word & BATCH_END != 0,
    })
}

/// The header at the start of `bytes`, as written, when it parses as is
/// or when exactly one flipped bit explains its damage: a bit of the bytes
/// the header checksum covers (magic, cookie, key, alternate key, size
/// word) or of the checksum itself, or (plain flags) an unknown flags bit
/// set; coded flags correct their own flipped bits. CRC32C's
/// Hamming distance over these 28 bytes is 6, so a single-bit error has
/// exactly one correction and no other header can be taken for it, nor
/// for an error of up to four bits. Used where a needle is expected (right after the previous one), never to
/// find one: it names the identity a damaged needle belonged to, so that
/// an older needle of the same identity is not taken for the newest.
///
/// Otherwise the error `parse_header` gives for the bytes as they are.
pub fn repair_header(bytes: &[u8], code: FlagCode) -> Result<NeedleHeader, NeedleError> {
    mend_header(bytes, code).map(|(h, _)| h)
}

/// [`repair_header`], with the error of the bytes as they are when one
/// flipped bit was corrected (`None` when the header parsed as is): what a
/// caller reports if the rest of the needle does not check either.
pub fn mend_header(
    bytes: &[u8],
    code: FlagCode,
) -> Result<(NeedleHeader, Option<NeedleError>), NeedleError> {
    let err = match parse_header(bytes, code) {
        Ok(h) => return Ok((h, None)),
        Err(e @ NeedleError::Truncated { .. }) => return Err(e),
        Err(e) => e,
    };
    super::one_bit_correction::<_, HEADER_LEN>(bytes, |b| parse_header(b, code).ok())
        .map(|h| (h, Some(err)))
        .ok_or(err)
}

/// The header bytes as written, when the header at the start of `bytes`
/// does not parse as is and exactly one flipped bit explains its damage
/// (what [`mend_header`] corrects): the 32 bytes to write back. None when
/// it parses as is, or when no single bit explains it.
pub fn mended_bytes(bytes: &[u8], code: FlagCode) -> Option<[u8; HEADER_LEN]> {
    if bytes.len() < HEADER_LEN || parse_header(bytes, code).is_ok() {
        return None;
    }
    super::one_bit_correction::<_, HEADER_LEN>(bytes, |b| parse_header(b, code).ok().map(|_| *b))
}

/// Whether the needle `h` describes, whose bytes start `bytes`, is whole
/// but for at most one flipped bit after its header: its footer magic and
/// data checksum hold, or one flipped bit of the data, the footer magic
/// or the checksum explains the mismatch. A needle a crash tore is missing
/// whole sectors (zeros, or nothing), which one bit never explains but
/// with odds of about 2^-32, so this tells a bit flipped in a complete
/// needle from a torn one. Linear in the needle's length: CRC32C is
/// affine, so flipping data bit `i` changes the checksum by a value that
/// depends on `i` and the length only, computed for every `i` by running
/// zero bytes through the CRC register.
pub fn whole_but_one_bit(bytes: &[u8], h: &NeedleHeader) -> bool {
    let n = h.size as usize;
    if (bytes.len() as u64) < h.needle_len() {
        return false;
    }
    let data = &bytes[HEADER_LEN..HEADER_LEN + n];
    let magic = le_u32(bytes, HEADER_LEN + n);
    let stored = le_u32(bytes, HEADER_LEN + n + 4);
    let syndrome = crc32c::crc32c(data) ^ stored;
    let magic_bits = (magic ^ FOOTER_MAGIC).count_ones();
    if magic_bits > 1 || (magic_bits == 1 && syndrome != 0) {
        return false;
    }
    if syndrome == 0 || syndrome.count_ones() == 1 {
        return true; // whole, or one bit of the stored checksum flipped
    }
    // The register's change for each bit of data byte j, from the last
    // byte back: a bit of the last byte runs through 8 CRC steps, one of
    // byte j through 8 more for each byte after it.
    const POLY: u32 = 0x82F6_3B78;
    let step = |mut r: u32| {
        for _ in 0..8 {
            r = if r & 1 != 0 { (r >> 1) ^ POLY } else { r >> 1 };
        }
        r
    };
    let mut g: [u32; 8] = std::array::from_fn(|b| step(1 << b));
    for _ in 0..n {
        if g.contains(&syndrome) {
            return true;
        }
        for x in &mut g {
            *x = step(*x);
        }
    }
    false
}

/// Parses a whole needle at the start of `bytes`: header, footer magic and
/// data checksum. Returns the header and the data. `code` is the
/// segment's ([`FlagCode::of_version`]).
pub fn parse(bytes: &[u8], code: FlagCode) -> Result<(NeedleHeader, &[u8]), NeedleError> {
    let h = parse_header(bytes, code)?;
    Ok((h, check_body(bytes, &h)?))
}

/// [`parse`], except that a header with one flipped bit is corrected
/// ([`repair_header`]) when the rest of the needle then checks whole: the
/// third value says so. The header checksum corrects one bit
/// unambiguously and the data checksum vouches for the data, so such a
/// needle is read as written. Otherwise the error of the bytes as they are.
pub fn parse_mending(
    bytes: &[u8],
    code: FlagCode,
) -> Result<(NeedleHeader, &[u8], bool), NeedleError> {
    let (h, header_err) = mend_header(bytes, code)?;
    match check_body(bytes, &h) {
        Ok(data) => Ok((h, data, header_err.is_some())),
        Err(e) => Err(header_err.unwrap_or(e)),
    }
}

/// The data of the needle `h` heads at the start of `bytes`, once its
/// length, footer magic and data checksum are checked.
pub fn check_body<'a>(bytes: &'a [u8], h: &NeedleHeader) -> Result<&'a [u8], NeedleError> {
    if bytes.len() < HEADER_LEN {
        return Err(NeedleError::Truncated {
            need: h.needle_len(),
            have: bytes.len() as u64,
        });
    }
    check_rest(&bytes[HEADER_LEN..], h)
}

/// [`check_body`] of what follows the header (a reader that read the
/// header into a buffer of its own and the rest into another, so that the
/// data need not be moved to drop the header).
pub fn check_rest<'a>(rest: &'a [u8], h: &NeedleHeader) -> Result<&'a [u8], NeedleError> {
    let need = h.needle_len() - HEADER_LEN as u64;
    if (rest.len() as u64) < need {
        return Err(NeedleError::Truncated {
            need: h.needle_len(),
            have: (rest.len() + HEADER_LEN) as u64,
        });
    }
    let bytes = rest;
    let n = h.size as usize;
    let data = &bytes[..n];
    let footer = le_u32(bytes, n);
    if footer != FOOTER_MAGIC {
        return Err(NeedleError::BadFooterMagic(footer));
    }
    let stored = le_u32(bytes, n + 4);
    let computed = crc32c::crc32c(data);
    if stored != computed {
        return Err(NeedleError::BadDataChecksum { stored, computed });
    }
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: FlagCode = FlagCode::Coded;

    #[test]
    fn roundtrip_and_padding() {
        for len in [0usize, 1, 7, 8, 4096, 5000] {
            let data: Vec<u8> = (0..len).map(|i| (i * 31) as u8).collect();
            let mut buf = Vec::new();
            encode(&mut buf, 7, 42, 3, 0, &data);
            assert_eq!(buf.len() % 8, 0);
            assert_eq!(buf.len() as u64, needle_len(len as u32));
            let (h, d) = parse(&buf, C).unwrap();
            assert_eq!(
                (h.cookie, h.key, h.alt_key, h.flags, h.size),
                (7, 42, 3, 0, len as u32)
            );
            assert_eq!(d, &data[..]);
        }
    }

    #[test]
    fn the_batch_end_bit_is_apart_from_the_size() {
        for end in [false, true] {
            let mut frame = Vec::new();
            let (head, tail) = encode_frame(&mut frame, 1, 2, 3, 0, &[b"he", b"llo"], end);
            let mut buf = frame[head].to_vec();
            buf.extend_from_slice(b"hello");
            buf.extend_from_slice(&frame[tail]);
            let (h, d) = parse(&buf, C).unwrap();
            assert_eq!((h.size, h.batch_end, d), (5, end, &b"hello"[..]));
            assert_eq!(h.needle_len(), buf.len() as u64);
        }
    }

    #[test]
    fn flags_can_change_without_breaking_header_checksum() {
        for code in [FlagCode::Plain, C] {
            let mut buf = Vec::new();
            encode(&mut buf, 1, 2, 3, 0, b"hello");
            for flags in [FLAG_DELETED, FLAG_SUPERSEDED, KNOWN_FLAGS, 0] {
                let at = FLAGS_OFFSET as usize;
                buf[at..at + 4].copy_from_slice(&code.word(flags).to_le_bytes());
                assert_eq!(parse(&buf, code).unwrap().0.flags, flags, "{code:?}");
            }
        }
    }

    /// Every word within 3 flipped bits per half of a coded flags word
    /// reads as the flags written; every word 4 to 12 bits from both
    /// codewords of a half is refused; never is a word read as other
    /// flags than the nearest codeword's. Exhaustive over each half.
    #[test]
    fn coded_flags_correct_three_bits_per_flag_and_detect_twelve() {
        for flags in 0..=KNOWN_FLAGS {
            let word = C.word(flags);
            assert_eq!(C.flags(word), Some(flags));
            for shift in [0, 16] {
                for e in 0..=0xFFFFu32 {
                    let got = C.flags(word ^ e << shift);
                    match e.count_ones() {
                        0..=3 => assert_eq!(got, Some(flags), "{flags} ^ {e:#x} << {shift}"),
                        4..=12 => assert_eq!(got, None, "{flags} ^ {e:#x} << {shift}"),
                        _ => assert_eq!(
                            got,
                            Some(
                                flags
                                    ^ if shift == 0 {
                                        FLAG_DELETED
                                    } else {
                                        FLAG_SUPERSEDED
                                    }
                            ),
                        ),
                    }
                }
            }
        }
        // Plain: a known bit flipped is silently the other flag (why
        // version 3 codes them), an unknown one is refused.
        assert_eq!(FlagCode::Plain.flags(FLAG_DELETED), Some(FLAG_DELETED));
        assert_eq!(FlagCode::Plain.flags(4), None);
        assert_eq!(FlagCode::of_version(2), FlagCode::Plain);
        assert_eq!(FlagCode::of_version(3), C);
    }

    /// With coded flags, a single flipped bit anywhere in a needle is
    /// either detected (a checksum or magic) or corrected (the flags).
    #[test]
    fn every_single_bit_flip_is_detected_or_corrected() {
        for flags in 0..=KNOWN_FLAGS {
            let mut buf = Vec::new();
            encode(&mut buf, 9, 99, 1, C.word(flags), b"some object bytes");
            let end = HEADER_LEN + 17 + FOOTER_LEN;
            for bit in 0..end * 8 {
                let mut b = buf.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                if (20..24).contains(&(bit / 8)) {
                    assert_eq!(parse(&b, C).unwrap().0.flags, flags, "bit {bit}");
                } else {
                    assert!(parse(&b, C).is_err(), "flip of bit {bit} not detected");
                }
            }
        }
    }

    /// A header with one bit flipped anywhere but in a known flag is
    /// repaired to exactly what was written; with two bits flipped in the
    /// checksummed bytes it is never "repaired" into another header
    /// (no two-bit error lies one bit from another valid header: CRC32C's
    /// Hamming distance over these 28 bytes is 6).
    #[test]
    fn a_header_with_one_flipped_bit_is_repaired_and_two_are_refused() {
        for (cookie, key, alt, size, end) in [
            (9u32, 99u64, 1u32, 17usize, true),
            (0xDEAD_BEEF, u64::MAX, 0, 0, false),
            (1, 0x0123_4567_89AB_CDEF, 7, 4096, true),
        ] {
            let data = vec![0x5Au8; size];
            let mut frame = Vec::new();
            let (head, _) = encode_frame(&mut frame, cookie, key, alt, 0, &[&data], end);
            let good = frame[head][..HEADER_LEN].to_vec();
            let want = parse_header(&good, C).unwrap();
            assert_eq!(repair_header(&good, C), Ok(want));
            for bit in 0..HEADER_LEN * 8 {
                let mut b = good.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(repair_header(&b, C), Ok(want), "bit {bit}");
            }
            // Plain flags: every bit but the two known flags.
            let plain = FlagCode::Plain;
            let known =
                |bit: usize| (20..24).contains(&(bit / 8)) && KNOWN_FLAGS & (1 << (bit - 160)) != 0;
            for bit in (0..HEADER_LEN * 8).filter(|&b| !known(b)) {
                let mut b = good.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                assert_eq!(repair_header(&b, plain), Ok(want), "bit {bit}");
            }
            let covered: Vec<usize> = (0..HEADER_LEN * 8)
                .filter(|&b| !(20..24).contains(&(b / 8)))
                .collect();
            for (i, &x) in covered.iter().enumerate() {
                for &y in &covered[i + 1..] {
                    let mut b = good.clone();
                    b[x / 8] ^= 1 << (x % 8);
                    b[y / 8] ^= 1 << (y % 8);
                    assert!(repair_header(&b, C).is_err(), "bits {x} and {y}");
                }
            }
        }
    }

    /// One flipped bit anywhere after the header of a whole needle is
    /// told apart from a torn one: every data, footer-magic and checksum
    /// bit of a small needle, a sample of a 64 KiB one; a needle whose
    /// last sector is zeros (torn), or with two flipped data bits, is not
    /// taken for one.
    #[test]
    fn a_needle_one_bit_off_is_told_from_a_torn_one() {
        for (size, every) in [(0usize, 1usize), (13, 1), (300, 1), (65_536, 4093)] {
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
            let mut buf = Vec::new();
            encode(&mut buf, 5, 6, 7, 0, &data);
            let h = parse_header(&buf, C).unwrap();
            assert!(whole_but_one_bit(&buf, &h));
            let end = HEADER_LEN + size + FOOTER_LEN;
            for bit in (HEADER_LEN * 8..end * 8).step_by(every) {
                let mut b = buf.clone();
                b[bit / 8] ^= 1 << (bit % 8);
                assert!(parse(&b, C).is_err());
                assert!(whole_but_one_bit(&b, &h), "size {size}, bit {bit}");
            }
            if size >= 600 {
                let mut torn = buf.clone();
                let from = (end - 512) / 512 * 512;
                torn[from..].fill(0);
                assert!(!whole_but_one_bit(&torn, &h), "size {size}: torn");
                let mut two = buf.clone();
                two[HEADER_LEN + 1] ^= 1;
                two[HEADER_LEN + 100] ^= 0x10;
                assert!(!whole_but_one_bit(&two, &h), "size {size}: two bits");
            }
        }
    }

    /// A needle with one flipped header bit and its data whole is read as
    /// written by `parse_mending`; with its data damaged too, or two header
    /// bits flipped, it is refused with the error of the bytes as they are.
    #[test]
    fn one_flipped_header_bit_is_mended_when_the_data_checks() {
        let data = b"small object bytes".to_vec();
        let mut buf = Vec::new();
        encode(&mut buf, 4, 44, 2, 0, &data);
        let (want, _) = parse(&buf, C).unwrap();
        assert_eq!(parse_mending(&buf, C), Ok((want, &data[..], false)));
        for bit in 0..HEADER_LEN * 8 {
            let mut b = buf.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            let mended = !(160..192).contains(&bit); // flags: read through their code
            assert_eq!(
                parse_mending(&b, C),
                Ok((want, &data[..], mended)),
                "bit {bit}"
            );
            let mut worse = b.clone();
            worse[HEADER_LEN + 3] ^= 1;
            let err = parse(&worse, C).unwrap_err();
            assert_eq!(parse_mending(&worse, C), Err(err), "bit {bit} and data");
        }
        let mut two = buf.clone();
        two[9] ^= 1;
        two[12] ^= 4;
        assert!(parse_mending(&two, C).is_err());
    }

    #[test]
    fn truncation_is_detected() {
        let mut buf = Vec::new();
        encode(&mut buf, 9, 99, 1, 0, b"some object bytes");
        for cut in 0..buf.len() {
            assert!(parse(&buf[..cut], C).is_err());
        }
    }
}
