//! Shared by the lab's CLI tests (analyze, model, cost, report): where the
//! shared traces are, and the real `strata` binary.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output};

/// The shared traces: `$STRATA_TRACES`, else `../shared/traces` beside the
/// checkout.
pub fn traces_dir() -> PathBuf {
    let dir = match std::env::var_os("STRATA_TRACES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    assert!(
        dir.join("SOURCES.md").exists(),
        "the shared traces are not at {} (set STRATA_TRACES)",
        dir.display()
    );
    dir
}

/// One shared trace by file name.
pub fn trace(name: &str) -> PathBuf {
    traces_dir().join(name)
}

/// Runs `strata ARGS` and returns its output.
pub fn strata(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

/// Runs `strata ARGS`, which must succeed, and parses its standard output
/// as one JSON value.
pub fn json(args: &[&str]) -> serde_json::Value {
    let out = strata(args);
    assert!(
        out.status.success(),
        "strata {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("valid JSON")
}
