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
    assert!(out.contains("| 4+2 | 1.500 (ideal 1.500) |"), "{out}");
    assert!(out.contains("| 10+4 | 1.400 (ideal 1.400) |"), "{out}");
    let o = strata(&["bench", "ec", "--codes", "0+2", "--size", "1MiB"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("K+M at most 32"));
}
