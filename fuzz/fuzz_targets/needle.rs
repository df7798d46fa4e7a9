//! Needle parser: never panics on any bytes, and whatever it accepts
//! re-encodes to the same bytes. A second pass fixes up the input's
//! checksums, so that the fuzzer also reaches the footer and data checks.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_store::format::needle;

fn roundtrip(data: &[u8]) {
    let _ = needle::parse_header(data);
    if let Ok((h, body)) = needle::parse(data) {
        let mut out = Vec::new();
        needle::encode(&mut out, h.cookie, h.key, h.alt_key, h.flags, body);
        // Padding bytes are not checked by the parser; everything else must
        // match byte for byte.
        let used = needle::HEADER_LEN + body.len() + needle::FOOTER_LEN;
        assert_eq!(&out[..used], &data[..used]);
        assert_eq!(out.len() as u64, h.needle_len());
    }
}

fuzz_target!(|data: &[u8]| {
    roundtrip(data);
    if data.len() < needle::HEADER_LEN + needle::FOOTER_LEN {
        return;
    }
    let mut b = data.to_vec();
    b[0..4].copy_from_slice(&needle::HEADER_MAGIC.to_le_bytes());
    let room = (b.len() - needle::HEADER_LEN - needle::FOOTER_LEN) as u32;
    let size = u32::from_le_bytes([b[24], b[25], b[26], b[27]]) % (room + 1);
    b[24..28].copy_from_slice(&size.to_le_bytes());
    let hcrc = crc32c::crc32c_append(crc32c::crc32c(&b[0..20]), &b[24..28]);
    b[28..32].copy_from_slice(&hcrc.to_le_bytes());
    let n = size as usize;
    if b[32 + n] & 1 == 0 {
        // half the time also a valid footer and data checksum
        let dcrc = crc32c::crc32c(&b[32..32 + n]);
        b[32 + n..36 + n].copy_from_slice(&needle::FOOTER_MAGIC.to_le_bytes());
        b[36 + n..40 + n].copy_from_slice(&dcrc.to_le_bytes());
    }
    roundtrip(&b);
});
