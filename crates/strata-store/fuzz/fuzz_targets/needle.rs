//! Needle parser: never panics on any bytes, and whatever it accepts
//! re-encodes to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_store::format::needle;

fuzz_target!(|data: &[u8]| {
    let _ = needle::parse_header(data);
    if let Ok((h, body)) = needle::parse(data) {
        let mut out = Vec::new();
        needle::encode(&mut out, h.cookie, h.key, h.alt_key, h.flags, body);
        let n = h.needle_len() as usize;
        // Padding bytes are not checked by the parser; everything else must
        // match byte for byte.
        let used = needle::HEADER_LEN + body.len() + needle::FOOTER_LEN;
        assert_eq!(&out[..used], &data[..used]);
        assert_eq!(out.len(), n);
    }
});
