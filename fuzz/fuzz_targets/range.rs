//! The `Range` header of GET: never panics, and an accepted range (the
//! half-open interval `[start, end)`) is non-empty and lies within the
//! object.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap()) % (1 << 40);
    let Ok(v) = std::str::from_utf8(&data[8..]) else {
        return;
    };
    if let Ok((a, b)) = strata_node::range::parse_range(v, size) {
        assert!(a < b && b <= size, "{v:?} of {size} gave [{a}, {b})");
    }
});
