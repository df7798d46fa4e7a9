//! The stripe store's files: the stripe index (`SEIX`, docs/erasure-
//! coding.md, "Stripe index"), shard file names, and files written whole or
//! not at all (written, synced, renamed, the directory synced).

use std::path::Path;

pub(super) const INDEX_MAGIC: [u8; 4] = *b"SEIX";

pub(super) const INDEX_VERSION: u32 = 1;

pub(super) const INDEX_HEADER: usize = 32;

pub(super) const INDEX_ENTRY: usize = 32;

/// One record of a stripe's index: where a needle lies in the encoded
/// segment (docs/erasure-coding.md, "Stripe index").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexEntry {
    /// Needle key.
    pub key: u64,
    /// Needle alternate key.
    pub alt: u32,
    /// Needle data bytes.
    pub len: u32,
    /// The record's stamp.
    pub stamp: u64,
    /// Offset of the needle (its header) in the encoded segment.
    pub offset: u64,
}

/// The stripe index file: a 32-byte header then 32 bytes per record.
pub fn encode_index(stripe: u64, row: usize, entries: &[IndexEntry]) -> Vec<u8> {
    let mut out = Vec::with_capacity(INDEX_HEADER + entries.len() * INDEX_ENTRY);
    out.extend_from_slice(&INDEX_MAGIC);
    out.extend_from_slice(&INDEX_VERSION.to_le_bytes());
    out.extend_from_slice(&stripe.to_le_bytes());
    out.extend_from_slice(&(row as u64).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u32).to_le_bytes());
    out.extend_from_slice(&[0u8; 4]);
    for e in entries {
        out.extend_from_slice(&e.key.to_le_bytes());
        out.extend_from_slice(&e.alt.to_le_bytes());
        out.extend_from_slice(&e.len.to_le_bytes());
        out.extend_from_slice(&e.stamp.to_le_bytes());
        out.extend_from_slice(&e.offset.to_le_bytes());
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[..28]), &out[INDEX_HEADER..]);
    out[28..32].copy_from_slice(&crc.to_le_bytes());
    out
}

/// Parses a stripe index file: (stripe, row, entries).
pub fn decode_index(b: &[u8]) -> Result<(u64, usize, Vec<IndexEntry>), String> {
    if b.len() < INDEX_HEADER || b[..4] != INDEX_MAGIC {
        return Err("not a stripe index (bad magic)".into());
    }
    let u32at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let u64at = |i: usize| {
        let mut x = [0u8; 8];
        x.copy_from_slice(&b[i..i + 8]);
        u64::from_le_bytes(x)
    };
    if u32at(4) != INDEX_VERSION {
        return Err(format!("stripe index version {} is not 1", u32at(4)));
    }
    let count = u32at(24) as usize;
    if b.len() != INDEX_HEADER + count * INDEX_ENTRY {
        return Err(format!(
            "stripe index of {count} records is {} bytes long",
            b.len()
        ));
    }
    let crc = crc32c::crc32c_append(crc32c::crc32c(&b[..28]), &b[INDEX_HEADER..]);
    if crc != u32at(28) {
        return Err("stripe index checksum mismatch".into());
    }
    let entries = (0..count)
        .map(|i| {
            let at = INDEX_HEADER + i * INDEX_ENTRY;
            IndexEntry {
                key: u64at(at),
                alt: u32at(at + 8),
                len: u32at(at + 12),
                stamp: u64at(at + 16),
                offset: u64at(at + 24),
            }
        })
        .collect();
    Ok((u64at(8), u64at(16) as usize, entries))
}

pub(super) fn shard_name(i: usize) -> String {
    format!("shard-{i:02}")
}

pub(super) fn sync_dir(dir: &Path) -> std::io::Result<()> {
    strata_fs::sync_dir(dir)
}

/// Writes `bytes` to `path` whole or not at all, its directory made
/// first if need be ([`strata_fs::create_dir_all`], durable), then
/// [`strata_fs::write_atomic`].
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    strata_fs::create_dir_all(strata_fs::parent(path))?;
    strata_fs::write_atomic(path, bytes)
}

// ---------------------------------------------------------------- routes

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_round_trips_and_refuses_damage() {
        let entries: Vec<IndexEntry> = (0..5)
            .map(|i| IndexEntry {
                key: i * 7,
                alt: i as u32,
                len: 100 + i as u32,
                stamp: 1_000 + i,
                offset: 64 + i * 200,
            })
            .collect();
        let b = encode_index(9, 3, &entries);
        assert_eq!(b.len(), INDEX_HEADER + 5 * INDEX_ENTRY);
        assert_eq!(decode_index(&b), Ok((9, 3, entries)));
        for at in [0, 5, 10, 40, b.len() - 1] {
            let mut c = b.clone();
            c[at] ^= 1;
            assert!(decode_index(&c).is_err(), "flip at {at} accepted");
        }
        assert!(decode_index(&b[..b.len() - 1]).is_err());
    }
}
