//! The segment superblock: the first [`SUPERBLOCK_LEN`] bytes of a segment
//! file.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "STRATSEG"
//!      8     4  format version (u32): 3; 2 for a segment written
//!               before needles' flags were coded (see
//!               [`super::needle::FlagCode`]); 1 for one written before
//!               needles carried the batch end (see
//!               [`super::needle::BATCH_END`])
//!     12     1  tier class: 0 flash, 1 disk
//!     13     3  zero
//!     16     8  segment id (u64): the segment's place in the probe order
//!     24     8  generation (u64): bumped by every compaction or move
//!     32     8  creation time of the segment, ns since the Unix epoch
//!     40    20  zero
//!     60     4  CRC32C of bytes 0..60
//! ```
//! Needles follow from byte 64.

use super::{le_u32, le_u64};

/// Superblock magic.
pub const MAGIC: [u8; 8] = *b"STRATSEG";
/// The segment format version this code writes: needles carry the batch
/// end ([`super::needle::BATCH_END`]), so that a batch is all-or-nothing,
/// and their flags word is coded ([`super::needle::FlagCode::Coded`]), so
/// that a flipped bit can neither delete an object nor bring one back.
pub const VERSION: u32 = 3;
/// The second segment format, still read: needles carry the batch end,
/// their flags word is plain ([`super::needle::FlagCode::Plain`]).
pub const VERSION_2: u32 = 2;
/// The first segment format, still read: no needle carries the batch end,
/// each stands for itself after a crash; plain flags.
pub const VERSION_1: u32 = 1;
/// Length of the superblock; the first needle starts here.
pub const SUPERBLOCK_LEN: usize = 64;

/// Tier class of a device and of the segments on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Tier {
    /// Flash (SSD, NVMe): fast random reads.
    Flash,
    /// Disk (HDD): cheap capacity.
    Disk,
}

impl Tier {
    /// The on-disk code.
    pub fn code(self) -> u8 {
        match self {
            Tier::Flash => 0,
            Tier::Disk => 1,
        }
    }
    /// The tier of an on-disk code.
    pub fn from_code(c: u8) -> Option<Tier> {
        match c {
            0 => Some(Tier::Flash),
            1 => Some(Tier::Disk),
            _ => None,
        }
    }
    /// Lower-case name ("flash", "disk").
    pub fn name(self) -> &'static str {
        match self {
            Tier::Flash => "flash",
            Tier::Disk => "disk",
        }
    }
}

impl std::fmt::Display for Tier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Tier {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "flash" | "ssd" => Ok(Tier::Flash),
            "disk" | "hdd" => Ok(Tier::Disk),
            _ => Err(format!("unknown tier {s:?} (expected flash or disk)")),
        }
    }
}

/// The decoded superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Superblock {
    /// Format version ([`VERSION`] for a new segment, or an older one read:
    /// [`VERSION_2`], [`VERSION_1`]).
    pub version: u32,
    /// Tier class of the device the segment was written to.
    pub tier: Tier,
    /// Segment id.
    pub id: u64,
    /// Generation.
    pub generation: u64,
    /// Creation time, ns since the Unix epoch.
    pub created_unix_ns: u64,
}

/// What is wrong with bytes that should be a superblock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SuperblockError {
    /// Shorter than a superblock.
    #[error("too short for a segment superblock ({0} bytes)")]
    Truncated(usize),
    /// Not a Strata segment.
    #[error("not a Strata segment (bad magic)")]
    BadMagic,
    /// Checksum mismatch.
    #[error("superblock checksum mismatch")]
    BadChecksum,
    /// A version this code does not read.
    #[error(
        "segment format version {0} is not supported (this build reads versions {VERSION_1} to {VERSION})"
    )]
    UnsupportedVersion(u32),
    /// Unknown tier code.
    #[error("unknown tier code {0}")]
    BadTier(u8),
}

impl Superblock {
    /// True when the segment's needles carry the batch end (version 2 and
    /// later).
    pub fn marks_batches(&self) -> bool {
        self.version >= VERSION_2
    }

    /// How the segment's needles write their flags word.
    pub fn flag_code(&self) -> super::needle::FlagCode {
        super::needle::FlagCode::of_version(self.version)
    }

    /// Encodes the superblock.
    pub fn encode(&self) -> [u8; SUPERBLOCK_LEN] {
        let mut b = [0u8; SUPERBLOCK_LEN];
        b[0..8].copy_from_slice(&MAGIC);
        b[8..12].copy_from_slice(&self.version.to_le_bytes());
        b[12] = self.tier.code();
        b[16..24].copy_from_slice(&self.id.to_le_bytes());
        b[24..32].copy_from_slice(&self.generation.to_le_bytes());
        b[32..40].copy_from_slice(&self.created_unix_ns.to_le_bytes());
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// [`Superblock::parse`], except that bytes one flipped bit damaged
    /// (anywhere in the 64, the checksum included) are corrected: the
    /// superblock as written and true, or false when nothing was damaged.
    /// CRC32C's Hamming distance over these 60 bytes is 6, so a single-bit
    /// error has exactly one correction and no error of two to four bits is
    /// taken for another superblock. Otherwise the error of
    /// the bytes as they are (a whole superblock of a version this build
    /// does not read is not damage, and is not "corrected").
    pub fn parse_mending(b: &[u8]) -> Result<(Superblock, bool), SuperblockError> {
        let err = match Superblock::parse(b) {
            Ok(sb) => return Ok((sb, false)),
            Err(e @ (SuperblockError::Truncated(_) | SuperblockError::UnsupportedVersion(_))) => {
                return Err(e)
            }
            Err(e) => e,
        };
        super::one_bit_correction::<_, SUPERBLOCK_LEN>(b, |c| Superblock::parse(c).ok())
            .map(|sb| (sb, true))
            .ok_or(err)
    }

    /// Parses and checks a superblock.
    pub fn parse(b: &[u8]) -> Result<Superblock, SuperblockError> {
        if b.len() < SUPERBLOCK_LEN {
            return Err(SuperblockError::Truncated(b.len()));
        }
        if b[0..8] != MAGIC {
            return Err(SuperblockError::BadMagic);
        }
        if le_u32(b, 60) != crc32c::crc32c(&b[0..60]) {
            return Err(SuperblockError::BadChecksum);
        }
        let version = le_u32(b, 8);
        if !(VERSION_1..=VERSION).contains(&version) {
            return Err(SuperblockError::UnsupportedVersion(version));
        }
        let tier = Tier::from_code(b[12]).ok_or(SuperblockError::BadTier(b[12]))?;
        Ok(Superblock {
            version,
            tier,
            id: le_u64(b, 16),
            generation: le_u64(b, 24),
            created_unix_ns: le_u64(b, 32),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_and_flips() {
        let s = Superblock {
            version: VERSION,
            tier: Tier::Disk,
            id: 17,
            generation: 2,
            created_unix_ns: 123,
        };
        let b = s.encode();
        assert_eq!(Superblock::parse(&b), Ok(s));
        for bit in 0..SUPERBLOCK_LEN * 8 {
            let mut c = b;
            c[bit / 8] ^= 1 << (bit % 8);
            assert!(Superblock::parse(&c).is_err(), "bit {bit}");
        }
        assert_eq!(
            Superblock::parse(&b[..10]),
            Err(SuperblockError::Truncated(10))
        );
    }

    /// Every single flipped bit is corrected to the superblock as written;
    /// no two flipped bits are (they are refused, never mistaken for
    /// another superblock).
    #[test]
    fn one_flipped_bit_is_mended_and_two_are_refused() {
        for version in [VERSION_1, VERSION_2, VERSION] {
            let s = Superblock {
                version,
                tier: Tier::Flash,
                id: 0x0123_4567_89AB,
                generation: 7,
                created_unix_ns: 1_764_400_000_000_000_000,
            };
            let b = s.encode();
            assert_eq!(Superblock::parse_mending(&b), Ok((s, false)));
            for x in 0..SUPERBLOCK_LEN * 8 {
                let mut c = b;
                c[x / 8] ^= 1 << (x % 8);
                assert_eq!(Superblock::parse_mending(&c), Ok((s, true)), "bit {x}");
                for y in (x + 1..SUPERBLOCK_LEN * 8).step_by(7) {
                    let mut d = c;
                    d[y / 8] ^= 1 << (y % 8);
                    assert!(Superblock::parse_mending(&d).is_err(), "bits {x} and {y}");
                }
            }
        }
        // A whole superblock of a newer version is no damage to mend.
        let mut newer = Superblock {
            version: VERSION,
            tier: Tier::Disk,
            id: 1,
            generation: 0,
            created_unix_ns: 0,
        }
        .encode();
        newer[8..12].copy_from_slice(&(VERSION + 1).to_le_bytes());
        let crc = crc32c::crc32c(&newer[0..60]);
        newer[60..64].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(
            Superblock::parse_mending(&newer),
            Err(SuperblockError::UnsupportedVersion(VERSION + 1))
        );
    }
}
