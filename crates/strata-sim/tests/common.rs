//! Shared helpers: where the shared traces are, and EXPECTED.md parsed.

#![allow(dead_code)]

use std::path::PathBuf;

/// The shared traces: `$STRATA_TRACES`, else `../shared/traces` beside
/// the repository.
pub fn traces() -> PathBuf {
    let p = match std::env::var_os("STRATA_TRACES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/traces"),
    };
    assert!(
        p.join("EXPECTED.md").exists(),
        "the shared traces are missing: expected them at {} (../shared/traces beside the \
         repository, or set STRATA_TRACES)",
        p.display()
    );
    p
}

/// (request, byte, object-mode) miss ratios at 1/5/10/20%.
pub type Cells = Vec<(f64, f64, f64)>;

/// One trace's section of EXPECTED.md.
pub struct Expected {
    /// Requests, distinct objects and working-set bytes from the heading.
    pub requests: u64,
    pub objects: u64,
    pub wss: u64,
    /// Absolute byte sizes at 1/5/10/20%.
    pub sizes: Vec<u64>,
    /// policy -> [(request, byte, object) miss ratio] at 1/5/10/20%.
    pub rows: Vec<(String, Cells)>,
}

/// Parses the section of EXPECTED.md whose heading starts with `heading`.
pub fn expected(heading: &str) -> Expected {
    let text = std::fs::read_to_string(traces().join("EXPECTED.md")).expect("read EXPECTED.md");
    let mut lines = text
        .lines()
        .skip_while(|l| !l.starts_with(&format!("## {heading}")));
    let head = lines.next().expect("heading");
    // "— 10,000,000 requests, 897,664 objects, WSS 174,722,571 B"
    let nums: Vec<u64> = head
        .split(|c: char| !(c.is_ascii_digit() || c == ','))
        .map(|t| t.replace(',', ""))
        .filter(|t| t.len() > 3)
        .map(|t| t.parse().expect("number"))
        .collect();
    let (requests, objects, wss) = (
        nums[nums.len() - 3],
        nums[nums.len() - 2],
        nums[nums.len() - 1],
    );
    let mut lines = lines.take_while(|l| !l.starts_with("## "));
    let mut sizes = Vec::new();
    let mut rows = Vec::new();
    for l in lines.by_ref() {
        if let Some(s) = l.strip_prefix("Sizes:") {
            for part in s.split(';') {
                let v = part.split('=').nth(1).expect("size").trim();
                let v = v.trim_end_matches('.').trim_end_matches('B').trim();
                sizes.push(v.replace(',', "").parse().expect("size number"));
            }
        } else if l.starts_with("| ") && !l.starts_with("| policy") {
            let cells: Vec<&str> = l
                .split('|')
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect();
            let vals = cells[1..]
                .iter()
                .map(|c| {
                    let v: Vec<f64> = c
                        .split('/')
                        .map(|x| x.trim().parse().expect("ratio"))
                        .collect();
                    (v[0], v[1], v[2])
                })
                .collect();
            rows.push((cells[0].to_string(), vals));
        }
    }
    assert_eq!(sizes.len(), 4, "sizes of {heading}");
    assert_eq!(rows.len(), 8, "rows of {heading}");
    Expected {
        requests,
        objects,
        wss,
        sizes,
        rows,
    }
}

/// Rounds to 4 decimals the way the reference tables print.
pub fn r4(x: f64) -> String {
    format!("{x:.4}")
}
