//! The HTML report: one file, inline CSS and SVG, no scripts, no network.

use crate::charts::{
    bar_chart, box_plot, esc, fmt_value, line_chart, scatter_chart, Axis, BoxRow, Fmt, Point,
    Series,
};
use std::fmt::Write;
use strata_analyze::Analysis;
use strata_cost::CostReport;

/// A miss-ratio curve: miss ratio against cache size in bytes.
#[derive(Clone, Debug)]
pub struct MrcCurve {
    /// Legend name (policy, workload).
    pub name: String,
    /// (cache bytes, miss ratio).
    pub points: Vec<(f64, f64)>,
}

/// A section the caller builds (for example the provisioner's cacheability
/// curves and tier plan).
#[derive(Clone, Debug)]
pub struct Section {
    /// Anchor id.
    pub id: String,
    /// Heading.
    pub title: String,
    /// A paragraph of explanation (plain text).
    pub intro: String,
    /// Charts and tables, as HTML.
    pub body_html: String,
}

/// Everything a report shows.
pub struct ReportInput<'a> {
    /// The trace's name (file name).
    pub trace: String,
    /// When and by what the report was made.
    pub generated: String,
    /// The workload analysis.
    pub analysis: &'a Analysis,
    /// Miss-ratio curves (empty: section says none were computed).
    pub mrc: Vec<MrcCurve>,
    /// How the curves were computed.
    pub mrc_note: String,
    /// The cost exploration, when run.
    pub cost: Option<&'a CostReport>,
    /// Sections added by the caller, shown after the cost section.
    pub extra: Vec<Section>,
}

/// A simple HTML table.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut o = String::from("<table><thead><tr>");
    for h in headers {
        let _ = write!(o, "<th>{}</th>", esc(h));
    }
    o.push_str("</tr></thead><tbody>");
    for r in rows {
        o.push_str("<tr>");
        for c in r {
            let _ = write!(o, "<td>{}</td>", esc(c));
        }
        o.push_str("</tr>");
    }
    o.push_str("</tbody></table>");
    o
}

fn figure(svg: &str, caption: &str) -> String {
    format!(
        "<figure>{svg}<figcaption>{}</figcaption></figure>",
        esc(caption)
    )
}

/// The Pareto chart of a cost exploration: capex against mean foreground
/// latency, justifiable systems dark and labelled, the rest grey.
pub fn cost_chart(c: &CostReport) -> String {
    let pts: Vec<Point> = c
        .systems
        .iter()
        .map(|s| Point {
            x: s.capex,
            y: s.latency.mean_ms,
            label: Some(s.label.clone()),
            highlight: s.pareto,
        })
        .collect();
    let mut front: Vec<(f64, f64)> = c
        .systems
        .iter()
        .filter(|s| s.pareto)
        .map(|s| (s.capex, s.latency.mean_ms))
        .collect();
    front.sort_by(|a, b| a.0.total_cmp(&b.0));
    scatter_chart(
        &format!(
            "Capex vs foreground latency: {} systems, {} justifiable",
            c.systems.len(),
            c.pareto.len()
        ),
        &Axis::linear("capex per node (dollars)", Fmt::Dollars),
        &Axis::linear("mean foreground read latency (ms)", Fmt::Millis),
        &pts,
        &[Series {
            name: "Pareto front".into(),
            points: front,
            dashed: true,
        }],
    )
}

const CSS: &str = "body{font-family:Helvetica,Arial,sans-serif;max-width:1500px;margin:24px auto;padding:0 16px;color:#222}\
h1{font-size:26px;margin-bottom:4px}h2{margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}\
.meta{color:#555}.note{background:#fff8e1;border-left:4px solid #E69F00;padding:8px 12px}\
.grid{display:flex;flex-wrap:wrap;gap:16px}figure{margin:0;border:1px solid #eee;padding:6px;background:#fff}\
figcaption{font-size:12px;color:#555;max-width:640px;padding:4px}svg{display:block;max-width:100%;height:auto}\
table{border-collapse:collapse;font-size:13px;margin:8px 0}th,td{border:1px solid #ddd;padding:3px 8px;text-align:right}\
th{background:#f4f4f4}td:first-child,th:first-child{text-align:left}tr.pareto td{font-weight:bold}\
nav a{margin-right:12px}";

/// Renders the whole report.
pub fn render(r: &ReportInput) -> String {
    let a = r.analysis;
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>Strata report: {t}</title><style>{CSS}</style></head><body>\
         <h1>Strata workload report: {t}</h1><p class=\"meta\">{g}. {req} requests over {dur}, about {obj} objects, {nw} workload(s).</p>\
         <p class=\"note\">Sampling: {note}</p>",
        t = esc(&r.trace),
        g = esc(&r.generated),
        req = a.requests,
        dur = esc(&fmt_value(a.duration_s.max(0.0), Fmt::Seconds)),
        obj = a.objects_estimate,
        nw = a.workloads.len(),
        note = esc(&a.sampling.note),
    );
    o.push_str("<nav><a href=\"#ops\">Op mix</a><a href=\"#sizes\">Sizes</a><a href=\"#life\">Lifetimes</a><a href=\"#locality\">Locality</a><a href=\"#heat\">Read heat</a><a href=\"#age\">Popularity by age</a><a href=\"#iops\">IOPS/GiB</a><a href=\"#mrc\">Miss ratio</a><a href=\"#cost\">Cost</a>");
    for s in &r.extra {
        let _ = write!(o, "<a href=\"#{}\">{}</a>", esc(&s.id), esc(&s.title));
    }
    o.push_str("</nav>");

    // Op mix.
    let cats: Vec<String> = a
        .workloads
        .iter()
        .map(|w| format!("w{}", w.workload))
        .collect();
    let mut req_series = Vec::new();
    let mut byte_series = Vec::new();
    for (i, op) in ["get", "put", "delete"].iter().enumerate() {
        req_series.push((
            op.to_string(),
            a.workloads
                .iter()
                .map(|w| w.ops[i].request_fraction)
                .collect::<Vec<_>>(),
        ));
        byte_series.push((
            op.to_string(),
            a.workloads
                .iter()
                .map(|w| w.ops[i].byte_fraction)
                .collect::<Vec<_>>(),
        ));
    }
    let rows: Vec<Vec<String>> = a
        .workloads
        .iter()
        .map(|w| {
            let mut v = vec![format!("w{}", w.workload), w.requests.to_string()];
            for op in &w.ops {
                v.push(format!(
                    "{} ({})",
                    op.requests,
                    fmt_value(op.request_fraction, Fmt::Percent)
                ));
                v.push(format!(
                    "{} ({})",
                    fmt_value(op.bytes as f64, Fmt::Bytes),
                    fmt_value(op.byte_fraction, Fmt::Percent)
                ));
            }
            v
        })
        .collect();
    let _ = write!(
        o,
        "<h2 id=\"ops\">Op mix per workload</h2><p>Share of requests and of bytes by operation.</p><div class=\"grid\">{}{}</div>{}",
        figure(
            &bar_chart("Op mix: requests", &cats, &req_series, &Axis::linear("share of requests", Fmt::Percent).with_range(0.0, 1.0), "workload"),
            "Fraction of each workload's requests that are gets, puts and deletes."
        ),
        figure(
            &bar_chart("Op mix: bytes", &cats, &byte_series, &Axis::linear("share of bytes", Fmt::Percent).with_range(0.0, 1.0), "workload"),
            "Fraction of each workload's bytes moved by gets and puts."
        ),
        table(
            &["workload", "requests", "gets", "get bytes", "puts", "put bytes", "deletes", "delete bytes"],
            &rows
        )
    );

    // Sizes.
    let boxes: Vec<BoxRow> = a
        .workloads
        .iter()
        .filter(|w| w.sizes.count > 0)
        .map(|w| BoxRow {
            label: format!("w{}", w.workload),
            q: [
                w.sizes.p10 as f64,
                w.sizes.p25 as f64,
                w.sizes.p50 as f64,
                w.sizes.p75 as f64,
                w.sizes.p90 as f64,
            ],
            mean: w.sizes.mean,
        })
        .collect();
    let rows: Vec<Vec<String>> = a
        .workloads
        .iter()
        .map(|w| {
            let s = &w.sizes;
            let mut v = vec![format!("w{}", w.workload), s.count.to_string()];
            for x in [
                s.mean,
                s.min as f64,
                s.p10 as f64,
                s.p25 as f64,
                s.p50 as f64,
                s.p75 as f64,
                s.p90 as f64,
                s.p99 as f64,
                s.max as f64,
            ] {
                v.push(fmt_value(x, Fmt::Bytes));
            }
            v
        })
        .collect();
    let _ = write!(
        o,
        "<h2 id=\"sizes\">Object sizes</h2><p>Size of each object when first seen, per workload (box: 25th–75th percentile, whiskers: 10th and 90th, bar: median, dot: mean — the study's Figure 5).</p>{}{}",
        figure(&box_plot("Object size distribution per workload", &boxes, &Axis::log("object size", Fmt::Bytes)), "Box plot of object sizes."),
        table(&["workload", "objects", "mean", "min", "p10", "p25", "p50", "p75", "p90", "p99", "max"], &rows)
    );

    // Lifetimes.
    let series: Vec<Series> = a
        .lifetime
        .iter()
        .map(|c| {
            Series::new(
                format!("{} ({} created)", c.class, c.created),
                c.curve.clone(),
            )
        })
        .collect();
    let _ = write!(
        o,
        "<h2 id=\"life\">Object lifetimes by size class</h2><p>For objects created during the trace: the fraction deleted within a given time of creation (the study's Figure 6). Lines need not reach 100%: objects still alive at the end of the trace are not deleted.</p>{}",
        figure(
            &line_chart("Lifetime CDF by size class", &Axis::log("lifetime (create to delete)", Fmt::Seconds), &Axis::linear("fraction of created objects deleted", Fmt::Percent).with_range(0.0, 1.0), &series),
            "One line per size class."
        )
    );

    // Locality.
    let series: Vec<Series> = a
        .locality
        .iter()
        .map(|l| Series::new(format!("within {}", l.label), l.curve.clone()))
        .collect();
    let mut headers: Vec<String> = vec!["distance".into()];
    if let Some(l) = a.locality.first() {
        headers.extend(l.at_windows.iter().map(|w| fmt_value(w.0, Fmt::Seconds)));
    }
    let hrefs: Vec<&str> = headers.iter().map(String::as_str).collect();
    let rows: Vec<Vec<String>> = a
        .locality
        .iter()
        .map(|l| {
            let mut v = vec![l.label.clone()];
            v.extend(l.at_windows.iter().map(|w| fmt_value(w.1, Fmt::Percent)));
            v
        })
        .collect();
    let _ = write!(
        o,
        "<h2 id=\"locality\">Locality map</h2><p>How often a read was recently preceded by a nearby read (the study's Figure 7): the x-axis is how recent, each line how near in offset (0 = the same bytes). Line shape shows temporal locality, the gaps between lines spatial locality and sequentiality.</p>{}{}",
        figure(
            &line_chart("Reads: locality map", &Axis::log("recency window", Fmt::Seconds), &Axis::linear("fraction of reads preceded", Fmt::Percent).with_range(0.0, 1.0), &series),
            if a.has_offsets { "Reads carry offsets: distances are byte distances between read ranges." } else { "This trace has no offsets: every read covers its whole object, so all lines coincide (only temporal locality)." }
        ),
        table(&hrefs, &rows)
    );

    // Heat.
    let cats: Vec<String> = a.read_heat.iter().map(|h| h.label.clone()).collect();
    let _ = write!(
        o,
        "<h2 id=\"heat\">Read heat</h2><p>Data bytes by the number of times they were read (left, sums to the data set) and read I/O to data of each heat (right, sums to all reads) — the study's Figure 8. Heat is counted per object.</p><div class=\"grid\">{}{}</div>",
        figure(
            &bar_chart("Data by times read", &cats, &[("data".into(), a.read_heat.iter().map(|h| h.data_fraction).collect())], &Axis::linear("share of data bytes", Fmt::Percent), "times read"),
            "Bytes of objects read this many times."
        ),
        figure(
            &bar_chart("Read I/O by heat", &cats, &[("read I/O".into(), a.read_heat.iter().map(|h| h.read_fraction).collect())], &Axis::linear("share of read bytes", Fmt::Percent), "times read"),
            "Bytes read from objects of each heat."
        )
    );

    // Popularity by age.
    let _ = write!(
        o,
        "<h2 id=\"age\">Popularity by age</h2><p>Cumulative fraction of reads by the age of the object read (Haystack's Figure 7); age is measured from the {}.</p>{}",
        esc(&a.popularity_by_age.age_basis),
        figure(
            &line_chart("Reads by object age (CDF)", &Axis::log("object age at read", Fmt::Seconds), &Axis::linear("fraction of reads", Fmt::Percent).with_range(0.0, 1.0), &[Series::new("reads", a.popularity_by_age.curve.clone())]),
            "A steep rise at young ages means recent objects draw most reads."
        )
    );

    // IOPS per GiB.
    let pts: Vec<Point> = a
        .workloads
        .iter()
        .filter(|w| w.footprint_gib > 0.0 && w.peak_iops > 0.0)
        .map(|w| Point {
            x: w.footprint_gib,
            y: w.peak_iops,
            label: Some(format!("w{}", w.workload)),
            highlight: true,
        })
        .collect();
    let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
    for p in &pts {
        lo = lo.min(p.x);
        hi = hi.max(p.x);
    }
    let line = if pts.is_empty() {
        Vec::new()
    } else {
        let (lo, hi) = (lo / 10.0, hi * 10.0);
        vec![Series {
            name: format!("break-even {} IOPS/GiB", a.break_even_iops_per_gib),
            points: vec![
                (lo, lo * a.break_even_iops_per_gib),
                (hi, hi * a.break_even_iops_per_gib),
            ],
            dashed: true,
        }]
    };
    let rows: Vec<Vec<String>> = a
        .workloads
        .iter()
        .map(|w| {
            vec![
                format!("w{}", w.workload),
                format!("{:.4}", w.footprint_gib),
                format!("{:.1}", w.mean_iops),
                format!("{:.1}", w.peak_iops),
                format!("{:.2}", w.iops_per_gib),
                if w.above_break_even {
                    "yes".into()
                } else {
                    "no".into()
                },
            ]
        })
        .collect();
    let _ = write!(
        o,
        "<h2 id=\"iops\">IOPS per GiB against the break-even line</h2><p>Peak IOPS (95th percentile of {}-long intervals) against the workload's data size (Janus Figure 4). Workloads above the line would be cheaper stored entirely on flash.</p>{}{}",
        esc(&fmt_value(a.iops_interval_s, Fmt::Seconds)),
        figure(
            &scatter_chart("Peak IOPS vs capacity per workload", &Axis::log("data (GiB)", Fmt::Number), &Axis::log("peak IOPS", Fmt::Number), &pts, &line),
            "Each dot is a workload."
        ),
        table(&["workload", "GiB", "mean IOPS", "peak IOPS", "IOPS/GiB", "above break-even"], &rows)
    );

    // MRC.
    let _ = write!(
        o,
        "<h2 id=\"mrc\">Miss-ratio curves</h2><p>{}</p>",
        esc(&r.mrc_note)
    );
    if !r.mrc.is_empty() {
        let series: Vec<Series> = r
            .mrc
            .iter()
            .map(|m| Series::new(m.name.clone(), m.points.clone()))
            .collect();
        o.push_str(&figure(
            &line_chart(
                "Miss ratio vs cache size",
                &Axis::log("cache size", Fmt::Bytes),
                &Axis::linear("miss ratio", Fmt::Percent).with_range(0.0, 1.0),
                &series,
            ),
            "Lower is better; the flattening shows where more cache stops paying.",
        ));
    }

    // Cost.
    o.push_str("<h2 id=\"cost\">Cost explorer</h2>");
    match r.cost {
        None => {
            o.push_str("<p>Not run for this report (use <code>strata report --cost</code>).</p>")
        }
        Some(c) => {
            let _ = write!(
                o,
                "<p>{} systems (RAM × flash × disks) simulated on this trace with the layered device model and priced with the hardware model. Justifiable systems — no other is both cheaper and faster — are dark and labelled (the study's Figure 15). {}</p>{}",
                c.systems.len(),
                esc(&c.scale_note),
                figure(&cost_chart(c), "Grey: dominated systems. Labels: RAM level letter (A smallest), flash level digit (0 = none), disks.")
            );
            let mut rows = Vec::new();
            for s in &c.systems {
                rows.push((
                    s.pareto,
                    vec![
                        s.label.clone(),
                        format!("{}", s.ram_gb),
                        format!("{}", s.flash_gb),
                        s.disks.to_string(),
                        format!("{:.0}", s.capex),
                        format!("{:.1}", s.opex),
                        format!("{:.2}", s.latency.mean_ms),
                        format!("{:.2}", s.latency.p99_ms),
                        fmt_value(s.hit_ratio, Fmt::Percent),
                        s.flash_lifetime_years
                            .map(|y| format!("{y:.1}"))
                            .unwrap_or_else(|| "-".into()),
                        if s.pareto { "yes".into() } else { "".into() },
                    ],
                ));
            }
            o.push_str("<table><thead><tr>");
            for h in [
                "system",
                "RAM GB",
                "flash GB",
                "disks",
                "capex $",
                "opex $/yr",
                "mean ms",
                "p99 ms",
                "hit ratio",
                "flash life (yr)",
                "justifiable",
            ] {
                let _ = write!(o, "<th>{h}</th>");
            }
            o.push_str("</tr></thead><tbody>");
            for (p, r) in rows {
                o.push_str(if p { "<tr class=\"pareto\">" } else { "<tr>" });
                for c in r {
                    let _ = write!(o, "<td>{}</td>", esc(&c));
                }
                o.push_str("</tr>");
            }
            o.push_str("</tbody></table>");
        }
    }

    for s in &r.extra {
        let _ = write!(
            o,
            "<h2 id=\"{}\">{}</h2><p>{}</p>{}",
            esc(&s.id),
            esc(&s.title),
            esc(&s.intro),
            s.body_html
        );
    }
    o.push_str("<p class=\"meta\">Made by strata report. Charts are inline SVG; the page needs no network.</p></body></html>\n");
    o
}
