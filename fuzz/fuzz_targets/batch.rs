//! The batch PUT framing (docs/node.md): never panics; what it accepts
//! re-frames to exactly the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let body = bytes::Bytes::copy_from_slice(data);
    if let Ok(items) = strata_node::http::parse_batch(&body) {
        let mut out = Vec::new();
        for (n, d) in &items {
            out.extend_from_slice(&(n.len() as u16).to_le_bytes());
            out.extend_from_slice(&(d.len() as u32).to_le_bytes());
            out.extend_from_slice(n.as_bytes());
            out.extend_from_slice(d);
        }
        assert_eq!(out, data);
    }
});
