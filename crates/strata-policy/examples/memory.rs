//! Measures RAM per cached object for one policy at 10 M objects (object
//! capacity): fills the cache, then streams as many new keys again so ghost
//! queues reach their steady size, and prints heap bytes per resident object
//! (as the policy accounts them) and the process's resident-set growth per
//! object (as the OS sees it).
//!
//! cargo run --release -p strata-policy --example memory -- POLICY [OBJECTS]

use strata_policy::{build, PolicySpec, Unit};

fn rss_bytes() -> u64 {
    // /proc/self/statm: size resident ... in pages.
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map_or(0, |pages| pages * 4096)
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let Some(spec) = a.get(1).and_then(|s| s.parse::<PolicySpec>().ok()) else {
        eprintln!("usage: memory POLICY [OBJECTS]");
        std::process::exit(2);
    };
    let n: u64 = a.get(2).and_then(|s| s.parse().ok()).unwrap_or(10_000_000);
    let before = rss_bytes();
    let mut p = build(&spec, n, Unit::Objects);
    let mut ev = Vec::new();
    let mut k = 0u64;
    // Every key is requested twice in a row so policies that need a second
    // touch (S3-FIFO's move to main, ARC's T2, LIRS's LIR set) see reuse.
    while k < 2 * n {
        let key = k.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for _ in 0..2 {
            if !p.lookup(key) {
                ev.clear();
                p.insert(key, 100, &mut ev);
            }
        }
        k += 1;
    }
    let after = rss_bytes();
    let len = p.len() as f64;
    println!(
        "{spec}: {} objects resident, {:.1} heap B/object, {:.1} RSS B/object",
        p.len(),
        p.heap_bytes() as f64 / len,
        after.saturating_sub(before) as f64 / len
    );
}
