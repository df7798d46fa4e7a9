//! Cacheability curves as small self-contained SVG charts.
//!
//! Hand-written rather than plotters: a line chart with axes is a few dozen
//! lines, needs no font files, and keeps the crate free of I/O.

use std::fmt::Write;

use crate::analysis::Curves;

/// One line of a chart.
struct Line<'a> {
    xs: &'a [f64],
    ys: &'a [f64],
    color: &'a str,
    dash: bool,
    label: &'a str,
}

fn unit_of(max: f64) -> (f64, &'static str) {
    const U: [(&str, f64); 5] = [
        ("TiB", 1099511627776.0),
        ("GiB", 1073741824.0),
        ("MiB", 1048576.0),
        ("KiB", 1024.0),
        ("B", 1.0),
    ];
    for (n, v) in U {
        if max >= v {
            return (v, n);
        }
    }
    (1.0, "B")
}

fn nice_step(range: f64) -> f64 {
    if range <= 0.0 || !range.is_finite() {
        return 1.0;
    }
    let raw = range / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n < 1.5 {
        1.0
    } else if n < 3.5 {
        2.0
    } else if n < 7.5 {
        5.0
    } else {
        10.0
    };
    m * mag
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

/// The chart of one workload: φ by FIFO age and the LRU bounds, flash bytes
/// on x, reads/s on y, with the allocation of the plan marked.
pub fn curve_chart(c: &Curves, title: &str, marker: Option<(f64, f64)>) -> String {
    let lines = [
        Line {
            xs: &c.fifo.x,
            ys: &c.fifo.y,
            color: "#1f77b4",
            dash: false,
            label: "FIFO age",
        },
        Line {
            xs: &c.lru_lower.x,
            ys: &c.lru_lower.y,
            color: "#d62728",
            dash: false,
            label: "LRU age (lower bound)",
        },
        Line {
            xs: &c.lru_upper.x,
            ys: &c.lru_upper.y,
            color: "#ff7f0e",
            dash: true,
            label: "LRU age (upper bound)",
        },
    ];
    let xmax = lines
        .iter()
        .flat_map(|l| l.xs.iter())
        .cloned()
        .fold(0.0, f64::max)
        .max(1.0);
    let ymax = lines
        .iter()
        .flat_map(|l| l.ys.iter())
        .cloned()
        .fold(0.0, f64::max)
        .max(c.fifo.total_reads)
        .max(1e-9);
    let (w, h, l, r, t, b) = (720.0, 440.0, 80.0, 20.0, 40.0, 60.0);
    let (ux, uname) = unit_of(xmax);
    let px = |x: f64| l + (x / xmax) * (w - l - r);
    let py = |y: f64| h - b - (y / ymax) * (h - t - b);
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="{}" y="22" text-anchor="middle" font-size="15">{}</text>
"##,
        w / 2.0,
        esc(title)
    );
    // Grid and ticks.
    let xs = nice_step(xmax / ux);
    let mut v = 0.0;
    while v <= xmax / ux + 1e-9 {
        let x = px(v * ux);
        let _ = writeln!(
            s,
            r##"<line x1="{x:.1}" y1="{t}" x2="{x:.1}" y2="{}" stroke="#eee"/><text x="{x:.1}" y="{}" text-anchor="middle">{}</text>"##,
            h - b,
            h - b + 16.0,
            trim(v)
        );
        v += xs;
    }
    let ys = nice_step(ymax);
    let mut v = 0.0;
    while v <= ymax + 1e-9 {
        let y = py(v);
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{y:.1}" x2="{}" y2="{y:.1}" stroke="#eee"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            w - r,
            l - 6.0,
            y + 4.0,
            trim(v)
        );
        v += ys;
    }
    let _ = writeln!(
        s,
        r##"<line x1="{l}" y1="{}" x2="{}" y2="{}" stroke="black"/><line x1="{l}" y1="{t}" x2="{l}" y2="{}" stroke="black"/>"##,
        h - b,
        w - r,
        h - b,
        h - b
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="{}" text-anchor="middle">flash ({uname})</text><text transform="translate(18 {}) rotate(-90)" text-anchor="middle">reads/s served from flash</text>"##,
        (l + w - r) / 2.0,
        h - 18.0,
        (t + h - b) / 2.0
    );
    for (i, line) in lines.iter().enumerate() {
        let pts: Vec<String> = line
            .xs
            .iter()
            .zip(line.ys)
            .map(|(&x, &y)| format!("{:.1},{:.1}", px(x), py(y)))
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline fill="none" stroke="{}" stroke-width="2"{} points="{}"/>"##,
            line.color,
            if line.dash {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            },
            pts.join(" ")
        );
        let ly = t + 14.0 + 16.0 * i as f64;
        let _ = writeln!(
            s,
            r##"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{}/><text x="{}" y="{}">{}</text>"##,
            w - r - 200.0,
            w - r - 175.0,
            line.color,
            if line.dash {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            },
            w - r - 170.0,
            ly + 4.0,
            line.label
        );
    }
    if let Some((x, y)) = marker {
        let _ = writeln!(
            s,
            r##"<circle cx="{:.1}" cy="{:.1}" r="5" fill="black"/><text x="{:.1}" y="{:.1}">plan</text>"##,
            px(x),
            py(y),
            px(x) + 8.0,
            py(y) - 6.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::curve::CacheabilityCurve;

    #[test]
    fn chart_is_svg_with_three_lines() {
        let c = CacheabilityCurve::from_points(vec![0.0, 1e6, 2e6], vec![0.0, 5.0, 6.0]).unwrap();
        let cs = Curves {
            id: 1,
            fifo: c.clone(),
            lru_lower: c.clone(),
            lru_upper: c,
        };
        let s = curve_chart(&cs, "workload <1>", Some((1e6, 5.0)));
        assert!(s.starts_with("<svg"));
        assert!(s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert!(s.contains("workload &lt;1&gt;"));
        assert!(s.contains("MiB"));
    }
}
