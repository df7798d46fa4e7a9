//! The node's traces end to end with the real binary: files in Strata's
//! binary trace format with the workload names, the tier and latency of
//! every read; finished when they rotate; a file left unfinished by
//! `kill -9` is finished at the next start with every record of its
//! complete frames; and `strata trace stats`, `strata provision` and
//! `strata sim` read them without a format flag.

mod node_common;
use node_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Records per frame of the node's trace files (strata_node::trace).
const FRAME: usize = 1024;

fn metric(addr: &str, name: &str) -> f64 {
    let m = get(addr, "/metrics").text();
    m.lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

fn strata(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(args)
        .output()
        .expect("run strata")
}

/// The records of `file` as Strata CSV rows (header, rows), through
/// `strata trace convert`.
fn rows(file: &Path, out: &Path) -> (Vec<String>, Vec<Vec<String>>) {
    let o = strata(&[
        "trace",
        "convert",
        file.to_str().unwrap(),
        out.to_str().unwrap(),
    ]);
    assert!(
        o.status.success(),
        "convert {}: {}",
        file.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    let text = std::fs::read_to_string(out).unwrap();
    let mut lines = text.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    let rows = lines
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect();
    (header, rows)
}

#[test]
fn binary_traces_rotate_survive_kill9_and_the_lab_reads_them() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let traces = dir.path().join("traces");
    let args = [
        "--trace-dir",
        traces.to_str().unwrap(),
        "--trace-sample",
        "1",
        "--trace-rotate",
        "1500",
        "--ram-cache",
        "0",
        "--flash-capacity",
        "256MiB",
        "--segment-size",
        "1MiB",
    ];
    let mut s = Server::start(&data, &args);
    // 5,000 writes in batches of 50 over two buckets, then 700 reads: 5,700
    // records, so three files of 1,500 rotate and a fourth holds 1,200 of
    // which one frame (1,024) is on disk when the node is killed.
    let mut names = Vec::new();
    for b in 0..100u64 {
        let bucket = if b % 2 == 0 { "photos" } else { "logs" };
        let items: Vec<(String, Vec<u8>)> = (0..50u64)
            .map(|i| {
                let n = format!("o{b}-{i}");
                (n, content(b * 100 + i, 500 + (i as usize * 37) % 3000))
            })
            .collect();
        let r = request(
            &s.addr,
            "POST",
            &format!("/{bucket}"),
            &[],
            Some(&batch_body(&items)),
        )
        .unwrap();
        assert_eq!(r.status, 201, "{}", r.text());
        for (n, _) in &items {
            names.push(format!("/{bucket}/{n}"));
        }
    }
    for p in names.iter().take(700) {
        assert_eq!(get(&s.addr, p).status, 200);
    }
    // Every record has reached the file writer.
    let t0 = Instant::now();
    while metric(&s.addr, "strata_trace_records_total") < 5700.0 {
        assert!(t0.elapsed() < Duration::from_secs(20), "records missing");
        std::thread::sleep(Duration::from_millis(50));
    }
    s.kill9();

    // Rotated files are finished and readable as they are.
    let done = files(&traces, ".strace");
    assert_eq!(done.len(), 3, "{done:?}");
    for f in &done {
        let st = strata(&["trace", "stats", f.to_str().unwrap()]);
        assert!(
            st.status.success(),
            "trace stats {}: {}",
            f.display(),
            String::from_utf8_lossy(&st.stderr)
        );
        let out = String::from_utf8_lossy(&st.stdout);
        assert!(out.contains("1500") || out.contains("1,500"), "{out}");
        assert!(out.contains("photos") && out.contains("logs"), "{out}");
    }
    // The killed node left one unfinished file: readable only up to where
    // it stopped, with no end frame.
    let parts = files(&traces, ".strace.part");
    assert_eq!(parts.len(), 1, "{parts:?}");
    let st = strata(&["trace", "stats", parts[0].to_str().unwrap()]);
    assert!(!st.status.success(), "an unfinished file reads as complete");

    // The next start finishes it: every record of its complete frames.
    let s = Server::start(&data, &args);
    assert!(files(&traces, ".strace.part").is_empty());
    let done2 = files(&traces, ".strace");
    assert_eq!(done2.len(), 4, "{done2:?}");
    let salvaged = done2
        .iter()
        .find(|f| !done.contains(f))
        .expect("the salvaged file")
        .clone();
    let mut total = 0;
    let mut all = Vec::new();
    for (i, f) in done2.iter().enumerate() {
        let (header, recs) = rows(f, &dir.path().join(format!("t{i}.csv")));
        total += recs.len();
        let col = |n: &str| header.iter().position(|h| h == n).unwrap();
        for r in recs {
            all.push((
                r[col("op")].clone(),
                r[col("tier")].clone(),
                r[col("latency_us")].clone(),
                r[col("workload")].clone(),
                r[col("create_time")].clone(),
            ));
        }
    }
    assert_eq!(total, 3 * 1500 + FRAME);
    // Writes first, then reads, each with the tier that served it (all on
    // flash here) and its latency; workloads by name; creation times set.
    assert_eq!(all.iter().filter(|r| r.0 == "put").count(), 5000);
    let gets: Vec<_> = all.iter().filter(|r| r.0 == "get").collect();
    assert_eq!(gets.len(), 3 * 1500 + FRAME - 5000);
    assert!(gets.iter().all(|r| r.1 == "flash"), "tier of a read");
    assert!(all.iter().all(|r| r.2.parse::<u32>().is_ok()), "latency");
    assert!(all.iter().all(|r| r.3 == "photos" || r.3 == "logs"));
    assert!(all.iter().all(|r| r.4.parse::<f64>().is_ok()));

    // The lab reads the node's traces with no format flag.
    let f = salvaged.to_str().unwrap();
    let p = strata(&["provision", f, "--flash", "1MiB"]);
    assert!(
        p.status.success(),
        "provision: {}",
        String::from_utf8_lossy(&p.stderr)
    );
    let out = String::from_utf8_lossy(&p.stdout);
    assert!(out.contains("photos") || out.contains("logs"), "{out}");
    let sim = strata(&["sim", f, "--policy", "lru", "--size", "10%"]);
    assert!(
        sim.status.success(),
        "sim: {}",
        String::from_utf8_lossy(&sim.stderr)
    );
    // The node still serves after the restart, and traces on.
    assert_eq!(get(&s.addr, &names[0]).status, 200);
}
