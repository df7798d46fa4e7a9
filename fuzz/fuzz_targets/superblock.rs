//! Superblock parser: never panics, and accepts only what it would write.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_store::format::superblock::{Superblock, SUPERBLOCK_LEN};

fuzz_target!(|data: &[u8]| {
    if let Ok(sb) = Superblock::parse(data) {
        assert_eq!(&sb.encode()[..], &data[..SUPERBLOCK_LEN]);
    }
});
