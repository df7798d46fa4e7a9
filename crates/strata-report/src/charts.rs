//! Small SVG charts written as text: line charts, scatter plots, grouped
//! bars and box plots, on linear or log axes. No fonts, scripts or network:
//! the SVG is inlined in the report and renders anywhere.

use std::fmt::Write;

/// Colours of successive series (colour-blind friendly, Okabe–Ito).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

const W: f64 = 640.0;
const H: f64 = 380.0;
const ML: f64 = 70.0;
const MR: f64 = 20.0;
const MT: f64 = 36.0;
const MB: f64 = 56.0;

/// How axis values are printed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fmt {
    /// Plain numbers (1.5, 20, 3k, 2M).
    Number,
    /// Fractions as percentages.
    Percent,
    /// Seconds as s/m/h/d.
    Seconds,
    /// Bytes with binary units.
    Bytes,
    /// Dollars.
    Dollars,
    /// Milliseconds.
    Millis,
}

/// One axis.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Label under or beside the axis.
    pub label: String,
    /// Logarithmic scale.
    pub log: bool,
    /// How ticks are printed.
    pub fmt: Fmt,
    /// Fixed range; computed from the data when `None`.
    pub range: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: &str, fmt: Fmt) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            fmt,
            range: None,
        }
    }

    /// A log axis.
    pub fn log(label: &str, fmt: Fmt) -> Axis {
        Axis {
            label: label.into(),
            log: true,
            fmt,
            range: None,
        }
    }

    /// The same axis with a fixed range.
    pub fn with_range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }
}

/// A named line.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
    /// Dashed line.
    pub dashed: bool,
}

impl Series {
    /// A solid line.
    pub fn new(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
        Series {
            name: name.into(),
            points,
            dashed: false,
        }
    }
}

/// A point of a scatter plot.
#[derive(Clone, Debug)]
pub struct Point {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// Text next to the point.
    pub label: Option<String>,
    /// Drawn dark and large (for example, a Pareto point) instead of grey.
    pub highlight: bool,
}

/// Escapes text for XML.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Prints a value the way an axis of `fmt` does.
pub fn fmt_value(v: f64, fmt: Fmt) -> String {
    match fmt {
        Fmt::Percent => {
            let p = v * 100.0;
            if (p - p.round()).abs() < 1e-6 {
                format!("{p:.0}%")
            } else {
                format!("{p:.1}%")
            }
        }
        Fmt::Seconds => {
            let (n, u) = if v < 1.0 {
                (v * 1e3, "ms")
            } else if v < 60.0 {
                (v, "s")
            } else if v < 3600.0 {
                (v / 60.0, "m")
            } else if v < 86400.0 {
                (v / 3600.0, "h")
            } else {
                (v / 86400.0, "d")
            };
            format!("{}{u}", trim(n))
        }
        Fmt::Bytes => {
            const U: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
            let mut x = v;
            let mut i = 0;
            while x.abs() >= 1024.0 && i + 1 < U.len() {
                x /= 1024.0;
                i += 1;
            }
            format!("{} {}", trim(x), U[i])
        }
        Fmt::Dollars => format!("${}", short_num(v)),
        Fmt::Millis => format!("{} ms", trim(v)),
        Fmt::Number => short_num(v),
    }
}

fn trim(v: f64) -> String {
    if v == 0.0 {
        return "0".into();
    }
    let a = v.abs();
    let s = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else if a >= 0.01 {
        format!("{v:.3}")
    } else {
        format!("{v:.1e}")
    };
    if s.contains('.') && !s.contains('e') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

fn short_num(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{}G", trim(v / 1e9))
    } else if a >= 1e6 {
        format!("{}M", trim(v / 1e6))
    } else if a >= 1e4 {
        format!("{}k", trim(v / 1e3))
    } else {
        trim(v)
    }
}

/// Maps data values to pixels along one axis.
struct Scale {
    lo: f64,
    hi: f64,
    log: bool,
    fmt: Fmt,
    p0: f64,
    p1: f64,
}

impl Scale {
    fn new(axis: &Axis, values: impl Iterator<Item = f64>, p0: f64, p1: f64) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if v.is_finite() && (!axis.log || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if let Some((a, b)) = axis.range {
            lo = a;
            hi = b;
        }
        if !lo.is_finite() || !hi.is_finite() {
            lo = if axis.log { 1.0 } else { 0.0 };
            hi = if axis.log { 10.0 } else { 1.0 };
        }
        if axis.log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if axis.range.is_none() && lo > 0.0 {
                lo = 0.0;
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            if axis.range.is_none() {
                let step = nice_step((hi - lo) / 5.0);
                hi = (hi / step).ceil() * step;
                lo = (lo / step).floor() * step;
            }
        }
        Scale {
            lo,
            hi,
            log: axis.log,
            fmt: axis.fmt,
            p0,
            p1,
        }
    }

    fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.lo * 1e-3);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.p0 + f.clamp(-0.05, 1.05) * (self.p1 - self.p0)
    }

    fn ticks(&self) -> Vec<f64> {
        if self.log && self.fmt == Fmt::Seconds {
            const T: [f64; 14] = [
                1e-3,
                1e-2,
                0.1,
                1.0,
                10.0,
                60.0,
                600.0,
                3600.0,
                6.0 * 3600.0,
                86400.0,
                7.0 * 86400.0,
                30.0 * 86400.0,
                365.0 * 86400.0,
                3650.0 * 86400.0,
            ];
            return T
                .iter()
                .copied()
                .filter(|&t| t >= self.lo * 0.999 && t <= self.hi * 1.001)
                .collect();
        }
        if self.log && self.fmt == Fmt::Bytes {
            let a = self.lo.log2().ceil() as i32;
            let b = self.hi.log2().floor() as i32;
            let stride = (((b - a).max(1) as f64) / 8.0).ceil().max(1.0) as i32;
            // Prefer powers of 1024 when they fall on the stride.
            let stride = if stride > 5 { 10 } else { stride };
            let start = if stride == 10 {
                (a + 9).div_euclid(10) * 10
            } else {
                a
            };
            let mut t = Vec::new();
            let mut e = start;
            while e <= b {
                t.push(2f64.powi(e));
                e += stride;
            }
            return t;
        }
        if self.log {
            let a = self.lo.log10().round() as i32;
            let b = self.hi.log10().round() as i32;
            let mut t = Vec::new();
            let decades = b - a;
            let stride = ((decades as f64) / 8.0).ceil().max(1.0) as i32;
            let mut e = a;
            while e <= b {
                t.push(10f64.powi(e));
                if decades <= 2 && e < b {
                    t.push(2.0 * 10f64.powi(e));
                    t.push(5.0 * 10f64.powi(e));
                }
                e += stride;
            }
            t
        } else {
            let step = nice_step((self.hi - self.lo) / 5.0);
            let mut t = Vec::new();
            let mut v = (self.lo / step).ceil() * step;
            while v <= self.hi + step * 1e-9 {
                t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
                v += step;
            }
            t
        }
    }
}

fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(raw.log10().floor());
    let f = raw / e;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * e
}

fn open_svg(o: &mut String, title: &str) {
    let _ = write!(
        o,
        r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {W} {H}" width="{W}" height="{H}" role="img" font-family="Helvetica, Arial, sans-serif" font-size="12"><title>{t}</title><rect x="0" y="0" width="{W}" height="{H}" fill="#ffffff"/><text x="{cx}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{t}</text>"##,
        t = esc(title),
        cx = W / 2.0
    );
}

fn axes(o: &mut String, xs: &Scale, ys: &Scale, x: &Axis, y: &Axis, xticks: bool) {
    let (x0, x1, y0, y1) = (ML, W - MR, H - MB, MT);
    for t in ys.ticks() {
        let py = ys.px(t);
        let _ = write!(
            o,
            r##"<line x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="#e5e5e5"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{l}</text>"##,
            tx = x0 - 6.0,
            ty = py + 4.0,
            l = esc(&fmt_value(t, y.fmt))
        );
    }
    if xticks {
        for t in xs.ticks() {
            let px = xs.px(t);
            let _ = write!(
                o,
                r##"<line x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{y1}" stroke="#f0f0f0"/><text x="{px:.1}" y="{ty}" text-anchor="middle">{l}</text>"##,
                ty = y0 + 16.0,
                l = esc(&fmt_value(t, x.fmt))
            );
        }
    }
    let _ = write!(
        o,
        r##"<line x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333"/><line x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333"/><text x="{cx}" y="{ly}" text-anchor="middle">{xl}</text><text transform="translate(16,{cy}) rotate(-90)" text-anchor="middle">{yl}</text>"##,
        cx = (x0 + x1) / 2.0,
        ly = H - 14.0,
        cy = (y0 + y1) / 2.0,
        xl = esc(&x.label),
        yl = esc(&y.label)
    );
}

fn legend(o: &mut String, names: &[(String, &str, bool)]) {
    let mut y = MT + 8.0;
    for (name, color, dashed) in names {
        let dash = if *dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = write!(
            o,
            r##"<line x1="{a}" y1="{y}" x2="{b}" y2="{y}" stroke="{color}" stroke-width="3"{dash}/><text x="{c}" y="{ty}">{n}</text>"##,
            a = ML + 12.0,
            b = ML + 36.0,
            c = ML + 42.0,
            ty = y + 4.0,
            n = esc(name)
        );
        y += 16.0;
    }
}

fn polyline(o: &mut String, xs: &Scale, ys: &Scale, s: &Series, color: &str) {
    let pts: Vec<String> = s
        .points
        .iter()
        .filter(|(x, y)| {
            x.is_finite() && y.is_finite() && (!xs.log || *x > 0.0) && (!ys.log || *y > 0.0)
        })
        .map(|(x, y)| format!("{:.1},{:.1}", xs.px(*x), ys.px(*y)))
        .collect();
    if pts.is_empty() {
        return;
    }
    let dash = if s.dashed {
        r#" stroke-dasharray="6 4""#
    } else {
        ""
    };
    if pts.len() == 1 {
        let mut it = pts[0].split(',');
        let (cx, cy) = (it.next().unwrap_or("0"), it.next().unwrap_or("0"));
        let _ = write!(o, r##"<circle cx="{cx}" cy="{cy}" r="3" fill="{color}"/>"##);
        return;
    }
    let _ = write!(
        o,
        r##"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"##,
        pts.join(" ")
    );
}

/// A line chart of several series.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    let mut o = String::new();
    open_svg(&mut o, title);
    let xs = Scale::new(
        x,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.0)),
        ML,
        W - MR,
    );
    let ys = Scale::new(
        y,
        series.iter().flat_map(|s| s.points.iter().map(|p| p.1)),
        H - MB,
        MT,
    );
    axes(&mut o, &xs, &ys, x, y, true);
    let mut names = Vec::new();
    for (i, s) in series.iter().enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        polyline(&mut o, &xs, &ys, s, c);
        names.push((s.name.clone(), c, s.dashed));
    }
    legend(&mut o, &names);
    if series.iter().all(|s| s.points.is_empty()) {
        no_data(&mut o);
    }
    o.push_str("</svg>");
    o
}

fn no_data(o: &mut String) {
    let _ = write!(
        o,
        r##"<text x="{}" y="{}" text-anchor="middle" fill="#888">no data in this trace</text>"##,
        W / 2.0,
        H / 2.0
    );
}

/// A scatter plot with optional lines (for example, a break-even line).
pub fn scatter_chart(
    title: &str,
    x: &Axis,
    y: &Axis,
    points: &[Point],
    lines: &[Series],
) -> String {
    let mut o = String::new();
    open_svg(&mut o, title);
    let xv = points
        .iter()
        .map(|p| p.x)
        .chain(lines.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let yv = points
        .iter()
        .map(|p| p.y)
        .chain(lines.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let xs = Scale::new(x, xv, ML, W - MR);
    let ys = Scale::new(y, yv, H - MB, MT);
    axes(&mut o, &xs, &ys, x, y, true);
    let mut names = Vec::new();
    for (i, s) in lines.iter().enumerate() {
        let c = PALETTE[(i + 1) % PALETTE.len()];
        polyline(&mut o, &xs, &ys, s, c);
        names.push((s.name.clone(), c, s.dashed));
    }
    for p in points.iter().filter(|p| !p.highlight) {
        let _ = write!(
            o,
            r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="#b0b0b0"/>"##,
            xs.px(p.x),
            ys.px(p.y)
        );
    }
    for p in points.iter().filter(|p| p.highlight) {
        let (cx, cy) = (xs.px(p.x), ys.px(p.y));
        let _ = write!(
            o,
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{c}"/>"##,
            c = PALETTE[0]
        );
        if let Some(l) = &p.label {
            let _ = write!(
                o,
                r##"<text x="{:.1}" y="{:.1}" font-size="11">{}</text>"##,
                cx + 7.0,
                cy - 5.0,
                esc(l)
            );
        }
    }
    legend(&mut o, &names);
    if points.is_empty() {
        no_data(&mut o);
    }
    o.push_str("</svg>");
    o
}

/// Grouped vertical bars: one group per category, one bar per series.
pub fn bar_chart(
    title: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    y: &Axis,
    x_label: &str,
) -> String {
    let mut o = String::new();
    open_svg(&mut o, title);
    let xaxis = Axis::linear(x_label, Fmt::Number);
    let xs = Scale::new(
        &xaxis.clone().with_range(0.0, 1.0),
        std::iter::empty(),
        ML,
        W - MR,
    );
    let ys = Scale::new(
        y,
        series.iter().flat_map(|s| s.1.iter().copied()).chain([0.0]),
        H - MB,
        MT,
    );
    axes(&mut o, &xs, &ys, &xaxis, y, false);
    let n = categories.len().max(1) as f64;
    let group_w = (W - ML - MR) / n;
    let k = series.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / k).max(1.0);
    let base = ys.px(if y.log { ys.lo } else { 0.0f64.max(ys.lo) });
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ML + group_w * ci as f64 + group_w * 0.1;
        for (si, (_, vals)) in series.iter().enumerate() {
            let v = vals.get(ci).copied().unwrap_or(0.0);
            let top = ys.px(v);
            let (yt, h) = if top < base {
                (top, base - top)
            } else {
                (base, top - base)
            };
            let _ = write!(
                o,
                r##"<rect x="{:.1}" y="{yt:.1}" width="{bar_w:.1}" height="{h:.1}" fill="{}"><title>{}: {}</title></rect>"##,
                gx + bar_w * si as f64,
                PALETTE[si % PALETTE.len()],
                esc(cat),
                esc(&fmt_value(v, y.fmt))
            );
        }
        let _ = write!(
            o,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"##,
            ML + group_w * (ci as f64 + 0.5),
            H - MB + 16.0,
            esc(cat)
        );
    }
    let names: Vec<(String, &str, bool)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.0.clone(), PALETTE[i % PALETTE.len()], false))
        .collect();
    if names.len() > 1 {
        let mut y0 = MT + 8.0;
        for (name, color, _) in &names {
            let _ = write!(
                o,
                r##"<rect x="{a}" y="{b}" width="12" height="12" fill="{color}"/><text x="{c}" y="{d}">{n}</text>"##,
                a = W - MR - 160.0,
                b = y0 - 6.0,
                c = W - MR - 142.0,
                d = y0 + 4.0,
                n = esc(name)
            );
            y0 += 16.0;
        }
    }
    o.push_str("</svg>");
    o
}

/// One row of a box plot: whiskers at `p10`/`p90`, box `p25`–`p75`, median
/// line, mean dot (the study's Figure 5 convention).
#[derive(Clone, Debug)]
pub struct BoxRow {
    /// Row label.
    pub label: String,
    /// 10th, 25th, 50th, 75th, 90th percentiles.
    pub q: [f64; 5],
    /// Mean.
    pub mean: f64,
}

/// A horizontal box plot.
pub fn box_plot(title: &str, rows: &[BoxRow], x: &Axis) -> String {
    let mut o = String::new();
    open_svg(&mut o, title);
    let xs = Scale::new(
        x,
        rows.iter()
            .flat_map(|r| r.q.iter().copied().chain([r.mean])),
        ML + 40.0,
        W - MR,
    );
    let n = rows.len().max(1) as f64;
    let row_h = ((H - MT - MB) / n).min(60.0);
    let yaxis = Axis::linear("", Fmt::Number);
    let ys = Scale::new(
        &yaxis.clone().with_range(0.0, 1.0),
        std::iter::empty(),
        H - MB,
        MT,
    );
    axes(&mut o, &xs, &ys, x, &Axis::linear("", Fmt::Number), true);
    // cover the meaningless y tick labels
    let _ = write!(
        o,
        r##"<rect x="0" y="{MT}" width="{}" height="{}" fill="#fff"/>"##,
        ML - 1.0,
        H - MT - MB + 6.0
    );
    for (i, r) in rows.iter().enumerate() {
        let cy = MT + row_h * (i as f64 + 0.5);
        let [a, b, c, d, e] = r.q.map(|v| xs.px(v.max(1e-9)));
        let bh = row_h * 0.5;
        let _ = write!(
            o,
            r##"<line x1="{a:.1}" y1="{cy:.1}" x2="{e:.1}" y2="{cy:.1}" stroke="#333"/><line x1="{a:.1}" y1="{:.1}" x2="{a:.1}" y2="{:.1}" stroke="#333"/><line x1="{e:.1}" y1="{:.1}" x2="{e:.1}" y2="{:.1}" stroke="#333"/><rect x="{b:.1}" y="{:.1}" width="{:.1}" height="{bh:.1}" fill="{}" fill-opacity="0.35" stroke="{}"/><line x1="{c:.1}" y1="{:.1}" x2="{c:.1}" y2="{:.1}" stroke="#000" stroke-width="2"/><circle cx="{:.1}" cy="{cy:.1}" r="3" fill="#D55E00"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            cy - bh / 3.0,
            cy + bh / 3.0,
            cy - bh / 3.0,
            cy + bh / 3.0,
            cy - bh / 2.0,
            (d - b).max(1.0),
            PALETTE[0],
            PALETTE[0],
            cy - bh / 2.0,
            cy + bh / 2.0,
            xs.px(r.mean.max(1e-9)),
            ML + 34.0,
            cy + 4.0,
            esc(&r.label)
        );
    }
    if rows.is_empty() {
        no_data(&mut o);
    }
    o.push_str("</svg>");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats() {
        assert_eq!(fmt_value(0.25, Fmt::Percent), "25%");
        assert_eq!(fmt_value(3600.0, Fmt::Seconds), "1h");
        assert_eq!(fmt_value(90.0, Fmt::Seconds), "1.5m");
        assert_eq!(fmt_value(1048576.0, Fmt::Bytes), "1 MiB");
        assert_eq!(fmt_value(2500.0, Fmt::Dollars), "$2500");
        assert_eq!(fmt_value(25000.0, Fmt::Number), "25k");
    }

    #[test]
    fn charts_are_well_formed_svg() {
        let s = line_chart(
            "a <b>",
            &Axis::log("x", Fmt::Seconds),
            &Axis::linear("y", Fmt::Percent),
            &[Series::new(
                "one",
                vec![(1.0, 0.1), (100.0, 0.5), (3600.0, 0.9)],
            )],
        );
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert!(s.contains("a &lt;b&gt;"));
        assert!(s.contains("<polyline"));
        assert_eq!(s.matches("<svg").count(), s.matches("</svg>").count());
        let b = bar_chart(
            "bars",
            &["1".into(), "2".into()],
            &[
                ("data".into(), vec![0.5, 0.25]),
                ("io".into(), vec![0.1, 0.9]),
            ],
            &Axis::linear("share", Fmt::Percent),
            "reads",
        );
        assert!(b.matches("<rect x=").count() >= 4);
        let e = line_chart(
            "empty",
            &Axis::log("x", Fmt::Number),
            &Axis::linear("y", Fmt::Number),
            &[],
        );
        assert!(e.contains("no data"));
        let p = scatter_chart(
            "sc",
            &Axis::log("x", Fmt::Number),
            &Axis::log("y", Fmt::Number),
            &[Point {
                x: 1.0,
                y: 2.0,
                label: Some("A".into()),
                highlight: true,
            }],
            &[],
        );
        assert!(p.contains(">A</text>"));
        let bp = box_plot(
            "box",
            &[BoxRow {
                label: "w0".into(),
                q: [10.0, 20.0, 40.0, 80.0, 160.0],
                mean: 50.0,
            }],
            &Axis::log("size", Fmt::Bytes),
        );
        assert!(bp.contains("w0"));
    }

    #[test]
    fn log_ticks_cover_range() {
        let a = Axis::log("x", Fmt::Number);
        let s = Scale::new(&a, [3.0, 4000.0].into_iter(), 0.0, 100.0);
        assert_eq!(s.lo, 1.0);
        assert_eq!(s.hi, 10000.0);
        assert_eq!(s.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert!((s.px(100.0) - 50.0).abs() < 1e-9);
    }
}
