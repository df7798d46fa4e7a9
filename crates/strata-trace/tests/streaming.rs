//! A trace much larger than the memory it may use streams through the
//! writer and the readers: peak memory stays flat while the file grows.
//! (Its own test binary, so no other test shares the process's peak RSS.)

use strata_trace::{open, Op, OutputFormat, Request, TraceWriter, WriterOptions};

/// Peak resident set of this process, in bytes (Linux).
fn peak_rss() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kb: u64 = s
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    kb * 1024
}

#[test]
fn large_traces_stream_in_bounded_memory() {
    let dir = tempfile::tempdir().unwrap();
    let n: u64 = 8_000_000;
    let before = peak_rss();
    for (name, format) in [
        ("big.strace", OutputFormat::Strata),
        ("big.oracleGeneral.bin", OutputFormat::OracleGeneral),
    ] {
        let path = dir.path().join(name);
        let mut w = TraceWriter::create(&path, format, WriterOptions::default()).unwrap();
        for i in 0..n {
            // Hashed-looking ids: nothing compresses away.
            let id = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            w.write(&Request::new(
                (i / 1000) as f64,
                Op::Get,
                id,
                0,
                100 + i % 4000,
            ))
            .unwrap();
        }
        w.finish().unwrap();
        let len = std::fs::metadata(&path).unwrap().len();
        assert!(len > 90_000_000, "{name} is only {len} bytes");
        let mut reader = open(&path).unwrap();
        let mut batch = Vec::new();
        let mut count = 0u64;
        let mut sum = 0u64;
        loop {
            let k = reader.read_batch(&mut batch).unwrap();
            if k == 0 {
                break;
            }
            count += k as u64;
            sum = sum.wrapping_add(batch.iter().map(|r| r.size).sum::<u64>());
        }
        assert_eq!(count, n);
        let want: u64 = (0..n).map(|i| 100 + i % 4000).sum();
        assert_eq!(sum, want);
        let grown = peak_rss().saturating_sub(before);
        // The file is >90 MB; reading and writing it may not hold more than
        // a few buffers (1 MiB blocks, 4096-record batches).
        assert!(
            grown < 48 << 20,
            "{name}: peak RSS grew by {} MiB",
            grown >> 20
        );
    }
}
