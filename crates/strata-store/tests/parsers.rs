//! The parsers on arbitrary bytes (the same properties as the cargo-fuzz
//! targets under fuzz/, run briefly in CI): they never panic, and what they
//! accept re-encodes to the same bytes.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use proptest::prelude::*;
use strata_store::format::{checkpoint, needle, run, superblock::Superblock};

/// Gives random bytes valid checkpoint checksums, so the decoders are reached.
/// (Version 2, the previous format, still read.)
fn fix_up(mut b: Vec<u8>) -> Vec<u8> {
    b.resize(b.len().max(checkpoint::HEADER_LEN_V2), 0);
    b[0..8].copy_from_slice(&checkpoint::MAGIC);
    b[8..12].copy_from_slice(&checkpoint::VERSION_2.to_le_bytes());
    let body_len = (b.len() - checkpoint::HEADER_LEN_V2) as u64;
    b[48..56].copy_from_slice(&body_len.to_le_bytes());
    let body_crc = crc32c_of(&b[checkpoint::HEADER_LEN_V2..]);
    b[56..60].copy_from_slice(&body_crc.to_le_bytes());
    let crc = crc32c_of(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    b
}

fn crc32c_of(b: &[u8]) -> u32 {
    // CRC32C (Castagnoli), bitwise: independent of the crate under test.
    let mut crc = !0u32;
    for &x in b {
        crc ^= u32::from(x);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// Recomputes a version-3 file's checksums (offsets section `plen - 80`).
fn fix_up_v3_crcs(mut b: Vec<u8>, plen: usize) -> Vec<u8> {
    let hl = checkpoint::HEADER_LEN;
    let ca = crc32c_of(&b[hl..plen]);
    let cb = crc32c_of(&b[plen..]);
    b[64..68].copy_from_slice(&ca.to_le_bytes());
    b[68..72].copy_from_slice(&cb.to_le_bytes());
    let crc = crc32c_of(&b[0..76]);
    b[76..80].copy_from_slice(&crc.to_le_bytes());
    b
}

/// The same for version 3: sizes made to agree (a needle count below 64
/// from the bytes, the body cut or padded to whole sections), both
/// sections' and the header's checksums.
fn fix_up_v3(mut b: Vec<u8>) -> Vec<u8> {
    let hl = checkpoint::HEADER_LEN;
    b.resize(b.len().max(hl), 0);
    b[0..8].copy_from_slice(&checkpoint::MAGIC);
    b[8..12].copy_from_slice(&checkpoint::VERSION.to_le_bytes());
    b[72..76].copy_from_slice(&[0; 4]);
    let n = u64::from(b[40]) % 64;
    b[40..48].copy_from_slice(&n.to_le_bytes());
    let a = ((n as usize + 1) * 4).next_multiple_of(8) + (n as usize).div_ceil(64) * 8;
    if b.len() < hl + a {
        b.resize(hl + a, 0);
    }
    let m = (b.len() - hl - a) / 16;
    b.truncate(hl + a + m * 16);
    b[48..56].copy_from_slice(&(m as u64).to_le_bytes());
    let ca = crc32c_of(&b[hl..hl + a]);
    let cb = crc32c_of(&b[hl + a..]);
    b[64..68].copy_from_slice(&ca.to_le_bytes());
    b[68..72].copy_from_slice(&cb.to_le_bytes());
    let crc = crc32c_of(&b[0..76]);
    b[76..80].copy_from_slice(&crc.to_le_bytes());
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn needle_parser_total(data in prop::collection::vec(any::<u8>(), 0..200)) {
        // Plain flags: what parses re-encodes byte for byte (a coded word
        // may be read through its correction: fuzz/props.rs checks that).
        let plain = needle::FlagCode::Plain;
        let _ = needle::parse_header(&data, plain);
        if let Ok((h, body)) = needle::parse(&data, plain) {
            let mut out = Vec::new();
            needle::encode_in_batch(
                &mut out, h.cookie, h.key, h.alt_key, h.flags, body, h.batch_end,
            );
            let used = needle::HEADER_LEN + body.len() + needle::FOOTER_LEN;
            prop_assert_eq!(&out[..used], &data[..used]);
        }
        let _ = needle::parse(&data, needle::FlagCode::Coded);
    }

    #[test]
    fn needle_with_valid_header_and_random_rest(cookie: u32, key: u64, alt: u32, body in prop::collection::vec(any::<u8>(), 0..64), noise in prop::collection::vec(any::<u8>(), 0..64)) {
        let mut b = Vec::new();
        needle::encode(&mut b, cookie, key, alt, 0, &body);
        let keep = needle::HEADER_LEN.min(b.len());
        b.truncate(keep);
        b.extend_from_slice(&noise);
        // a valid header followed by noise parses only if the noise happens
        // to be a valid body, which random bytes are not
        let _ = needle::parse(&b, needle::FlagCode::Coded);
    }

    #[test]
    fn superblock_parser_total(data in prop::collection::vec(any::<u8>(), 0..80)) {
        if let Ok(sb) = Superblock::parse(&data) {
            prop_assert_eq!(&sb.encode()[..], &data[..64]);
        }
    }

    #[test]
    fn checkpoint_decoders_total(data in prop::collection::vec(any::<u8>(), 0..400), kind in 1u32..3, needles in 0u64..40, covered in 0u64..4000) {
        let _ = checkpoint::parse(&data);
        let mut b = data.clone();
        b.resize(b.len().max(64), 0);
        b[12..16].copy_from_slice(&kind.to_le_bytes());
        b[32..40].copy_from_slice(&covered.to_le_bytes());
        b[40..48].copy_from_slice(&needles.to_le_bytes());
        let b = fix_up(b);
        let (h, body) = checkpoint::parse(&b).expect("checksums were fixed up");
        if let Ok(a) = checkpoint::decode_active(&h, body) {
            for &o in a.map.values() {
                prop_assert!(a.needle(o).is_some());
            }
        }
        if let Ok((s, deleted)) = checkpoint::decode_sealed(&h, body) {
            for &o in s.map.values() {
                prop_assert!(s.needle(o).is_some());
            }
            prop_assert_eq!(deleted.len() as u64, s.needle_count().div_ceil(64));
        }
    }

    /// Version 3: the whole file and its prefix (what an open of a segment
    /// the run covers reads) never panic, and agree when both decode.
    #[test]
    fn checkpoint_v3_decoders_total(data in prop::collection::vec(any::<u8>(), 0..600), kind in 1u32..3, covered in 0u64..4000, sorted: bool) {
        let mut b = data.clone();
        b.resize(b.len().max(checkpoint::HEADER_LEN), 0);
        b[12..16].copy_from_slice(&kind.to_le_bytes());
        b[32..40].copy_from_slice(&covered.to_le_bytes());
        let mut b = fix_up_v3(b);
        let n = u64::from_le_bytes(b[40..48].try_into().unwrap()) as usize;
        let plen = checkpoint::prefix_len(&b).unwrap() as usize;
        if sorted {
            // increasing offsets ending at the covered length reach the
            // entries' checks
            for i in 0..=n {
                let o = (i * (covered as usize / 8) / n.max(1)) as u32;
                let at = checkpoint::HEADER_LEN + 4 * i;
                b[at..at + 4].copy_from_slice(&o.to_le_bytes());
            }
            let end = ((covered / 8) as u32).to_le_bytes();
            let at = checkpoint::HEADER_LEN + 4 * n;
            b[at..at + 4].copy_from_slice(&end);
            b = fix_up_v3_crcs(b, plen);
        }
        let (h, body) = checkpoint::parse(&b).expect("sizes and checksums were fixed up");
        let (hp, sec) = checkpoint::parse_prefix(&b[..plen]).expect("its prefix parses");
        prop_assert_eq!(hp, h);
        let pre = checkpoint::decode_sealed_prefix(&hp, sec);
        if let Ok(full) = checkpoint::decode_sealed_parts(&h, body) {
            let pre = pre.expect("the prefix of a decodable checkpoint decodes");
            prop_assert_eq!((&pre.offsets, &pre.deleted, pre.live_bytes), (&full.offsets, &full.deleted, full.live_bytes));
        }
        if let Ok(a) = checkpoint::decode_active(&h, body) {
            for &o in a.map.values() {
                prop_assert!(a.needle(o).is_some());
            }
        }
    }

    #[test]
    fn run_file_decoder_total(data in prop::collection::vec(any::<u8>(), 0..600)) {
        if let Ok(r) = run::decode(&data) {
            for k in 0..32u64 {
                if let Some((p, i, o)) = r.lookup(k, 0) {
                    prop_assert!(u64::from(o) < p.segs().segments()[i].1);
                }
            }
        }
    }
}

#[test]
fn fix_up_matches_the_real_crc() {
    assert_eq!(crc32c_of(b"123456789"), 0xE306_9283);
}
