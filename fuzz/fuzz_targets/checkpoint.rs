//! Checkpoint parser and decoders: never panic or allocate wildly on any
//! bytes; a decoded index answers lookups without panicking. The input's
//! checksums are fixed up first, so that the fuzzer reaches the decoders.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_store::format::checkpoint;

fuzz_target!(|data: &[u8]| {
    let _ = checkpoint::parse(data);
    if data.len() < checkpoint::HEADER_LEN {
        return;
    }
    let mut b = data.to_vec();
    b[0..8].copy_from_slice(&checkpoint::MAGIC);
    b[8..12].copy_from_slice(&checkpoint::VERSION.to_le_bytes());
    let body_len = (b.len() - checkpoint::HEADER_LEN) as u64;
    b[48..56].copy_from_slice(&body_len.to_le_bytes());
    let body_crc = crc32c::crc32c(&b[checkpoint::HEADER_LEN..]);
    b[56..60].copy_from_slice(&body_crc.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    let (h, body) = checkpoint::parse(&b).expect("fixed-up checkpoint parses");
    if let Ok(a) = checkpoint::decode_active(&h, body) {
        for &o in a.map.values() {
            let _ = a.needle(o);
        }
    }
    if let Ok((s, _deleted)) = checkpoint::decode_sealed(&h, body) {
        for &o in s.map.values() {
            let _ = s.needle(o);
        }
    }
    let _ = strata_store::format::run::decode(data);
});
