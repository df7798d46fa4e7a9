//! The terminal rendering of an analysis.

use crate::analyzer::{short_bytes, Analysis};
use std::fmt::Write;

fn pct(f: f64) -> String {
    format!("{:.1}%", f * 100.0)
}

fn dur(s: f64) -> String {
    if s < 60.0 {
        format!("{s:.0}s")
    } else if s < 3600.0 {
        format!("{:.0}m", s / 60.0)
    } else if s < 86400.0 {
        format!("{:.1}h", s / 3600.0)
    } else {
        format!("{:.1}d", s / 86400.0)
    }
}

fn bytes128(b: u128) -> String {
    short_bytes(u64::try_from(b).unwrap_or(u64::MAX))
}

/// Renders an analysis as plain-text tables for a terminal.
pub fn render_text(a: &Analysis) -> String {
    let mut o = String::new();
    let _ = writeln!(
        o,
        "{} requests over {}, ~{} objects, {} reads analysed",
        a.requests,
        dur(a.duration_s),
        a.objects_estimate,
        a.reads_analysed
    );
    let _ = writeln!(o, "sampling: {}", a.sampling.note);
    let _ = writeln!(o);
    let _ = writeln!(o, "Op mix per workload (requests / bytes)");
    let _ = writeln!(
        o,
        "{:>9} {:>12} {:>17} {:>17} {:>17}",
        "workload", "requests", "get", "put", "delete"
    );
    for w in &a.workloads {
        let cell = |i: usize| {
            format!(
                "{} / {}",
                pct(w.ops[i].request_fraction),
                pct(w.ops[i].byte_fraction)
            )
        };
        let _ = writeln!(
            o,
            "{:>9} {:>12} {:>17} {:>17} {:>17}",
            w.workload,
            w.requests,
            cell(0),
            cell(1),
            cell(2)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Object sizes per workload");
    let _ = writeln!(
        o,
        "{:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "workload", "objects", "mean", "p10", "p25", "p50", "p75", "p90", "max"
    );
    for w in &a.workloads {
        let s = &w.sizes;
        let _ = writeln!(
            o,
            "{:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            w.workload,
            s.count,
            short_bytes(s.mean as u64),
            short_bytes(s.p10),
            short_bytes(s.p25),
            short_bytes(s.p50),
            short_bytes(s.p75),
            short_bytes(s.p90),
            short_bytes(s.max)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Lifetime (create to delete) by size class");
    for c in &a.lifetime {
        let at = |s: f64| {
            c.curve
                .iter()
                .filter(|p| p.0 <= s)
                .map(|p| p.1)
                .next_back()
                .unwrap_or(0.0)
        };
        let _ = writeln!(
            o,
            "{:>12}: {:>9} created, deleted within 1m {}, 1h {}, 8h {}, ever {}",
            c.class,
            c.created,
            pct(at(60.0)),
            pct(at(3600.0)),
            pct(at(28800.0)),
            pct(c.deleted_fraction)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Locality map: fraction of reads preceded by a read within distance and window"
    );
    let mut head = format!("{:>9}", "distance");
    if let Some(l) = a.locality.first() {
        for (w, _) in &l.at_windows {
            let _ = write!(head, " {:>6}", dur(*w));
        }
    }
    let _ = writeln!(o, "{head}");
    for l in &a.locality {
        let mut line = format!("{:>9}", l.label);
        for (_, f) in &l.at_windows {
            let _ = write!(line, " {:>6}", pct(*f));
        }
        let _ = writeln!(o, "{line}");
    }
    let _ = writeln!(o);
    let _ = writeln!(o, "Read heat: data and read I/O by times read");
    let _ = writeln!(
        o,
        "{:>8} {:>12} {:>8} {:>12} {:>8}",
        "reads", "data", "", "read I/O", ""
    );
    for h in &a.read_heat {
        let _ = writeln!(
            o,
            "{:>8} {:>12} {:>8} {:>12} {:>8}",
            h.label,
            bytes128(h.data_bytes),
            pct(h.data_fraction),
            bytes128(h.read_bytes),
            pct(h.read_fraction)
        );
    }
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "Popularity by age ({}): reads to objects at most",
        a.popularity_by_age.age_basis
    );
    let mut line = String::new();
    for s in [60.0, 600.0, 3600.0, 86400.0, 7.0 * 86400.0] {
        let f = a
            .popularity_by_age
            .curve
            .iter()
            .filter(|p| p.0 <= s)
            .map(|p| p.1)
            .next_back()
            .unwrap_or(0.0);
        let _ = write!(line, "  {} old: {}", dur(s), pct(f));
    }
    let _ = writeln!(o, "{line}");
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "IOPS per GiB (peak = p95 of {} intervals; break-even {} IOPS/GiB)",
        dur(a.iops_interval_s),
        a.break_even_iops_per_gib
    );
    let _ = writeln!(
        o,
        "{:>9} {:>12} {:>12} {:>12} {:>12}  all on flash?",
        "workload", "GiB", "mean IOPS", "peak IOPS", "IOPS/GiB"
    );
    for w in &a.workloads {
        let _ = writeln!(
            o,
            "{:>9} {:>12.4} {:>12.1} {:>12.1} {:>12.1}  {}",
            w.workload,
            w.footprint_gib,
            w.mean_iops,
            w.peak_iops,
            w.iops_per_gib,
            if w.above_break_even {
                "yes (above break-even)"
            } else {
                "no"
            }
        );
    }
    o
}
