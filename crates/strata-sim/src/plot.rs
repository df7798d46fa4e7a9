//! A small self-contained SVG line chart (no dependencies): miss-ratio
//! curves and per-set loads.

use std::fmt::Write;

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn nice(v: f64) -> String {
    let a = v.abs();
    if a >= 1e12 {
        format!("{:.1}T", v / 1e12)
    } else if a >= 1e9 {
        format!("{:.1}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if a >= 1e3 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// Renders a line chart as an SVG document. The y axis runs from 0 to the
/// larger of 1 and the data's maximum when `unit_y` is set.
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    unit_y: bool,
) -> String {
    let (w, h) = (800.0, 500.0);
    let (l, r, t, b) = (80.0, 180.0, 50.0, 60.0);
    let pw = w - l - r;
    let ph = h - t - b;
    let xs = series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let ys = series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let xmax = xs.fold(0.0f64, f64::max).max(1e-9);
    let ymax_data = ys.fold(0.0f64, f64::max);
    let ymax = if unit_y {
        ymax_data.max(1.0)
    } else {
        ymax_data.max(1e-9) * 1.05
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="25" text-anchor="middle" font-size="16">{}</text>"#,
        l + pw / 2.0,
        esc(title)
    );
    for i in 0..=5 {
        let f = i as f64 / 5.0;
        let y = t + ph - f * ph;
        let x = l + f * pw;
        let _ = writeln!(
            s,
            r##"<line x1="{l}" y1="{y}" x2="{}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{}</text>"##,
            l + pw,
            l - 6.0,
            y + 4.0,
            nice(f * ymax)
        );
        let _ = writeln!(
            s,
            r##"<line x1="{x}" y1="{t}" x2="{x}" y2="{}" stroke="#eee"/><text x="{x}" y="{}" text-anchor="middle">{}</text>"##,
            t + ph,
            t + ph + 18.0,
            nice(f * xmax)
        );
    }
    let _ = writeln!(
        s,
        r#"<rect x="{l}" y="{t}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
    );
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        l + pw / 2.0,
        h - 15.0,
        esc(x_label)
    );
    let _ = writeln!(
        s,
        r#"<text x="20" y="{}" text-anchor="middle" transform="rotate(-90 20 {})">{}</text>"#,
        t + ph / 2.0,
        t + ph / 2.0,
        esc(y_label)
    );
    for (i, se) in series.iter().enumerate() {
        let c = COLORS[i % COLORS.len()];
        let pts: Vec<String> = se
            .points
            .iter()
            .map(|&(x, y)| format!("{:.1},{:.1}", l + x / xmax * pw, t + ph - y / ymax * ph))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline fill="none" stroke="{c}" stroke-width="2" points="{}"/>"#,
            pts.join(" ")
        );
        let ly = t + 10.0 + i as f64 * 20.0;
        let _ = writeln!(
            s,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{c}" stroke-width="3"/><text x="{}" y="{}">{}</text>"#,
            l + pw + 10.0,
            l + pw + 30.0,
            l + pw + 36.0,
            ly + 4.0,
            esc(&se.label)
        );
    }
    s.push_str("</svg>\n");
    s
}
