//! `strata bench ec` end to end: it encodes, reads healthy and degraded
//! ranges (checking every byte), rebuilds, and reports; bad codes are a
//! clear error.

use std::process::Command;

fn strata(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

#[test]
fn bench_ec_measures_a_verified_round_trip() {
    let o = strata(&[
        "bench", "ec", "--codes", "4+2,10+4", "--size", "2MiB", "--reads", "50",
    ]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    // Stored bytes per logical byte within 1% of (K+M)/K (headers and the
    // last shard's padding are the rest).
    for (code, ideal) in [("4+2", 1.5), ("10+4", 1.4)] {
        let row = out
            .lines()
            .find(|l| l.starts_with(&format!("| {code} |")))
            .unwrap_or_else(|| panic!("no row for {code}: {out}"));
        let stored: f64 = row
            .split('|')
            .nth(2)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((stored / ideal - 1.0).abs() < 0.01, "{row}");
    }
    let o = strata(&["bench", "ec", "--codes", "0+2", "--size", "1MiB"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("K+M at most 32"));
}
