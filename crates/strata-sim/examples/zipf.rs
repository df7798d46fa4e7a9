//! Writes a synthetic Zipf trace in libCacheSim's oracleGeneral format
//! (24-byte little-endian records: u32 time, u64 object, u32 size, i64 next
//! access), which both `strata` and libCacheSim's `cachesim` read, for the
//! side-by-side benchmarks in docs/benchmarks.md.
//!
//! cargo run --release -p strata-sim --example zipf -- OUT REQUESTS OBJECTS ALPHA
//! e.g. zipf /tmp/zipf.oracleGeneral.bin 100000000 10000000 1.0
//!
//! Object ranks are scattered over the id space by a bijective mix, object
//! sizes are fixed per object (100 B to 4 KiB), one request per 10 us of
//! trace time, next access is -1 (unknown; LRU, FIFO and S3-FIFO ignore it).

use std::io::{BufWriter, Write};

fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn main() -> std::io::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: zipf OUT REQUESTS OBJECTS ALPHA");
        std::process::exit(2);
    }
    let (n, m): (u64, usize) = match (a[2].parse(), a[3].parse()) {
        (Ok(n), Ok(m)) if m > 0 => (n, m),
        _ => {
            eprintln!("REQUESTS and OBJECTS must be positive integers");
            std::process::exit(2);
        }
    };
    let alpha: f64 = a[4].parse().unwrap_or(1.0);
    // Cumulative distribution over ranks 1..=m.
    let mut cdf = Vec::with_capacity(m);
    let mut acc = 0.0f64;
    for r in 1..=m {
        acc += 1.0 / (r as f64).powf(alpha);
        cdf.push(acc);
    }
    let total = acc;
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&a[1])?);
    let mut s = 0x1234_5678u64;
    for i in 0..n {
        s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let u = (mix(s) >> 11) as f64 / (1u64 << 53) as f64 * total;
        let rank = cdf.partition_point(|&c| c < u) as u64;
        let id = mix(rank ^ 0x5eed);
        let size = 100 + (mix(id) % 3997) as u32;
        let time = (i / 100_000) as u32;
        out.write_all(&time.to_le_bytes())?;
        out.write_all(&id.to_le_bytes())?;
        out.write_all(&size.to_le_bytes())?;
        out.write_all(&(-1i64).to_le_bytes())?;
    }
    out.flush()
}
