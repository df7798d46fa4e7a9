//! What a crash or a power cut leaves at the end of a segment, told apart
//! from damage: a needle whole but for one flipped bit, a sector of zeros
//! a write did not reach, the zeros of prepared space. Used by the open
//! ([`super::load`]) and by the offline check ([`crate::verify`]).

use crate::format::needle;
use crate::segment::{self, ScanItem};
use std::fs::File;

/// Needles of at most this many data bytes are told whole-but-one-bit
/// from torn at the end of the newest segment: a torn needle's bytes pass
/// for one bit off with odds of about 8 × size / 2^32 (1.2 × 10^-4 here).
const ONE_BIT_MAX: u32 = 64 << 10;

/// Whether the needle `h` at `offset` of `file` is whole but for one
/// flipped bit after its header ([`needle::whole_but_one_bit`]), of at most
/// [`ONE_BIT_MAX`] data bytes, with only zeros after it up to `file_len`.
pub(super) fn whole_but_one_bit(
    file: &File,
    offset: u64,
    h: &needle::NeedleHeader,
    file_len: u64,
) -> std::io::Result<bool> {
    let end = offset + h.needle_len();
    if h.size > ONE_BIT_MAX || end > file_len || !all_zero(file, end, file_len)? {
        return Ok(false);
    }
    one_bit_off(file, offset, h)
}

/// Whether the needle `h` at `offset` of `file` (inside the file) is whole
/// but for one flipped bit after its header ([`needle::whole_but_one_bit`]),
/// of at most [`ONE_BIT_MAX`] data bytes.
fn one_bit_off(file: &File, offset: u64, h: &needle::NeedleHeader) -> std::io::Result<bool> {
    if h.size > ONE_BIT_MAX {
        return Ok(false);
    }
    let mut b = vec![0u8; h.needle_len() as usize];
    segment::pread_exact(file, &mut b, offset)?;
    Ok(needle::whole_but_one_bit(&b, h))
}

/// Whether `items`, the last batch of the newest segment of `file` as its
/// scan found it, hold what a power cut leaves of a batch whose write it
/// interrupted: a damaged region that is not one needle whole but for one
/// flipped bit after its header ([`one_bit_off`]) and that holds a sector
/// reading as zeros ([`shows_lost_sector`]). A device writes a sector whole
/// or not at all, and where a batch's sector did not reach the medium the
/// file holds what it held before the write: zeros (prepared space, or a
/// hole of a file the write extended). Damage the medium did to bytes it
/// held (flipped bits, a garbled flags word) leaves no such sector.
pub(crate) fn torn_by_power_loss(file: &File, items: &[ScanItem]) -> std::io::Result<bool> {
    let Some(start) = items.first().map(ScanItem::offset) else {
        return Ok(false);
    };
    for item in items {
        let ScanItem::Corrupt {
            offset,
            len,
            header,
            ..
        } = item
        else {
            continue;
        };
        let one_bit = match header {
            Some(h) if *len == h.needle_len() => one_bit_off(file, *offset, h)?,
            _ => false,
        };
        if !one_bit && shows_lost_sector(file, start, *offset, *len)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// What a device writes whole or not at all (the smallest sector; a 4 KiB
/// one is eight of these).
const SECTOR: u64 = 512;

/// Whether the damaged region `[offset, offset + len)` of a batch that
/// starts at `start` holds a sector whose bytes are all zero: a whole
/// [`SECTOR`] inside the region, or, when the region is the batch's first
/// needle, the part of the sector holding `start` from `start` on (its
/// bytes before are the batch before, which a write of the batch rewrites
/// as they were).
fn shows_lost_sector(file: &File, start: u64, offset: u64, len: u64) -> std::io::Result<bool> {
    let end = offset + len;
    let whole_from = offset.next_multiple_of(SECTOR);
    if offset == start
        && whole_from > offset
        && whole_from <= end
        && all_zero(file, offset, whole_from)?
    {
        return Ok(true);
    }
    let whole_to = end / SECTOR * SECTOR;
    let mut buf = vec![0u8; (1 << 20).min(whole_to.saturating_sub(whole_from)) as usize];
    let mut at = whole_from;
    while at < whole_to {
        let n = ((whole_to - at) as usize).min(buf.len());
        segment::pread_exact(file, &mut buf[..n], at)?;
        if buf[..n]
            .chunks_exact(SECTOR as usize)
            .any(|c| c.iter().all(|&b| b == 0))
        {
            return Ok(true);
        }
        at += n as u64;
    }
    Ok(false)
}

/// Whether `file` holds only zero bytes in `[from, to)`: the prepared space
/// of an active segment (`Tail`), not a torn write.
pub(crate) fn all_zero(file: &File, from: u64, to: u64) -> std::io::Result<bool> {
    let mut buf = vec![0u8; (1 << 20).min(to.saturating_sub(from)) as usize];
    let mut at = from;
    while at < to {
        let n = ((to - at) as usize).min(buf.len());
        segment::pread_exact(file, &mut buf[..n], at)?;
        if buf[..n].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        at += n as u64;
    }
    Ok(true)
}

#[cfg(test)]
// The tests write and damage files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;

    /// What counts as a sector a write did not reach: a whole 512-byte
    /// sector of zeros inside the damaged region, or, in the batch's
    /// first needle, the zeros from the batch's start to the end of its
    /// sector; zeros that fill no sector of the region (a needle's
    /// padding, zero bytes of data) do not.
    #[test]
    fn a_lost_sector_is_a_whole_sector_of_zeros_in_the_region() {
        let dir = tempfile::tempdir().unwrap();
        let f = File::options()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("f"))
            .unwrap();
        let mut b = vec![0xA5u8; 4096];
        // Zeros at 1000..1024 (the end of sector 1) and 1536..2048
        // (sector 3 whole).
        b[1000..1024].fill(0);
        b[1536..2048].fill(0);
        f.write_all_at(&b, 0).unwrap();
        let lost = |start, offset, len| shows_lost_sector(&f, start, offset, len).unwrap();
        // The batch's first needle starts at 1000: the rest of its sector
        // is zeros.
        assert!(lost(1000, 1000, 100));
        // Not the first needle: those 24 bytes are no whole sector.
        assert!(!lost(992, 1000, 100));
        assert!(!lost(800, 1000, 500));
        // Sector 3 whole inside the region, or not.
        assert!(lost(64, 1500, 600));
        assert!(lost(64, 1536, 512));
        assert!(!lost(64, 1544, 600));
        assert!(!lost(64, 1500, 540));
        // A region of no zeros at all, however long.
        assert!(!lost(64, 2048, 2048));
    }
}
