//! The campaign's report: per kind, trials passed and failed and what the
//! loads did, as a table or as JSON, and the failed trials with the
//! command that repeats each.

use crate::trial::Trial;

#[derive(serde::Serialize, Default)]
/// One kind's line of the report.
struct KindSummary {
    kind: String,
    trials: usize,
    passed: usize,
    failed: usize,
    skipped: usize,
    acked_puts: u64,
    acked_deletes: u64,
    unknown_ops: u64,
    reads: u64,
    history_ops: usize,
    power_cuts: u64,
    seconds: f64,
}

/// Prints the report of `results` on standard output: a table (or JSON
/// when `json`) of the kinds in the order of `kinds`.
pub fn report(
    results: &[Trial],
    kinds: &[&str],
    seed: u64,
    json: bool,
) -> Result<(), serde_json::Error> {
    let mut sums: Vec<KindSummary> = Vec::new();
    let mut seen: Vec<&str> = Vec::new();
    for k in kinds {
        if !seen.contains(k) {
            seen.push(k);
        }
    }
    for k in seen {
        let ts: Vec<&Trial> = results.iter().filter(|t| t.kind == k).collect();
        if ts.is_empty() {
            continue;
        }
        sums.push(KindSummary {
            kind: k.to_string(),
            trials: ts.len(),
            passed: ts.iter().filter(|t| t.passed).count(),
            failed: ts.iter().filter(|t| !t.passed).count(),
            skipped: ts.iter().filter(|t| t.skipped).count(),
            acked_puts: ts.iter().map(|t| t.acked_puts).sum(),
            acked_deletes: ts.iter().map(|t| t.acked_deletes).sum(),
            unknown_ops: ts.iter().map(|t| t.unknown_ops).sum(),
            reads: ts.iter().map(|t| t.reads).sum(),
            history_ops: ts.iter().map(|t| t.history_ops).sum(),
            power_cuts: ts.iter().map(|t| t.power_cuts).sum(),
            seconds: ts.iter().map(|t| t.seconds).sum(),
        });
    }
    if json {
        let v = serde_json::json!({
            "seed": seed,
            "trials": results.len(),
            "passed": results.iter().filter(|t| t.passed).count(),
            "failed": results.iter().filter(|t| !t.passed).count(),
            "power_cuts": results.iter().map(|t| t.power_cuts).sum::<u64>(),
            "kinds": sums,
            "results": results,
        });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    println!(
        "{:<17} {:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>8} {:>9} {:>5} {:>8}",
        "kind",
        "trials",
        "passed",
        "failed",
        "skipped",
        "acked PUT",
        "acked DEL",
        "unknown",
        "reads",
        "cuts",
        "seconds"
    );
    for s in &sums {
        println!(
            "{:<17} {:>6} {:>6} {:>6} {:>7} {:>10} {:>10} {:>8} {:>9} {:>5} {:>8.1}",
            s.kind,
            s.trials,
            s.passed,
            s.failed,
            s.skipped,
            s.acked_puts,
            s.acked_deletes,
            s.unknown_ops,
            s.reads,
            s.power_cuts,
            s.seconds
        );
    }
    let failed: Vec<&Trial> = results.iter().filter(|t| !t.passed).collect();
    let cuts: u64 = results.iter().map(|t| t.power_cuts).sum();
    println!(
        "{} trials, {} passed, {} failed (seed {seed}){}",
        results.len(),
        results.len() - failed.len(),
        failed.len(),
        if cuts > 0 {
            format!("; {cuts} power cuts")
        } else {
            String::new()
        }
    );
    for t in failed {
        println!(
            "FAILED trial {} ({}): {}",
            t.index,
            t.kind,
            t.failures.join(" | ")
        );
        println!("  repeat: {}", t.repro);
    }
    let hist: Vec<&str> = results
        .iter()
        .filter_map(|t| t.history.as_deref())
        .collect();
    if !hist.is_empty() {
        println!("{} linearizability histories written; check them with: go run ./tools/linearizability {}", hist.len(), hist.join(" "));
    }
    Ok(())
}
