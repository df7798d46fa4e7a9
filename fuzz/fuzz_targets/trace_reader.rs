//! Every trace reader (the format is detected from the bytes, as `strata
//! trace` does): never panics, never allocates wildly, always ends on
//! arbitrary bytes; a record it accepts has sane fields.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::io::Write;

fuzz_target!(|data: &[u8]| {
    // The readers open files (detection reads the magic and the name).
    let dir = std::env::temp_dir();
    for ext in ["strace", "csv", "bin"] {
        let p = dir.join(format!("strata-fuzz-{}.{ext}", std::process::id()));
        {
            let mut f = std::fs::File::create(&p).expect("temp file");
            f.write_all(data).expect("write");
        }
        if let Ok(mut r) = strata_trace::open(&p) {
            let mut out = Vec::new();
            let mut rounds = 0;
            loop {
                out.clear();
                match r.read_batch(&mut out) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => assert!(n <= out.len()),
                }
                rounds += 1;
                assert!(rounds < 1_000_000, "reader does not end");
            }
        }
        let _ = std::fs::remove_file(&p);
    }
});
