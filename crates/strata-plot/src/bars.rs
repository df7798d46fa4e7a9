//! Grouped bars and box plots.

use std::fmt::Write;

use crate::chart::{Frame, Style, PALETTE};
use crate::format::{esc, fmt_value, Fmt};
use crate::scale::{Axis, Scale};

/// Grouped vertical bars: one group per category, one bar per series.
pub fn bar_chart(
    title: &str,
    categories: &[String],
    series: &[(String, Vec<f64>)],
    y: &Axis,
    x_label: &str,
) -> String {
    let f = Frame::of(&Style::default());
    let (w, h, ml, mr, mt, mb) = (f.w, f.h, f.ml, f.mr, f.mt, f.mb);
    let mut o = String::new();
    f.open(&mut o, title);
    let xaxis = Axis::linear(x_label, Fmt::Number);
    let xs = Scale::new(
        &xaxis.clone().with_range(0.0, 1.0),
        std::iter::empty(),
        ml,
        w - mr,
    );
    let ys = Scale::new(
        y,
        series.iter().flat_map(|s| s.1.iter().copied()).chain([0.0]),
        h - mb,
        mt,
    );
    f.axes(&mut o, &xs, &ys, &xaxis, y, false);
    let n = categories.len().max(1) as f64;
    let group_w = (w - ml - mr) / n;
    let k = series.len().max(1) as f64;
    let bar_w = (group_w * 0.8 / k).max(1.0);
    let base = ys.px(if y.log { ys.lo } else { 0.0f64.max(ys.lo) });
    for (ci, cat) in categories.iter().enumerate() {
        let gx = ml + group_w * ci as f64 + group_w * 0.1;
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
            ml + group_w * (ci as f64 + 0.5),
            h - mb + 16.0,
            esc(cat)
        );
    }
    let names: Vec<(String, &str, bool)> = series
        .iter()
        .enumerate()
        .map(|(i, s)| (s.0.clone(), PALETTE[i % PALETTE.len()], false))
        .collect();
    if names.len() > 1 {
        let mut y0 = mt + 8.0;
        for (name, color, _) in &names {
            let _ = write!(
                o,
                r##"<rect x="{a}" y="{b}" width="12" height="12" fill="{color}"/><text x="{c}" y="{d}">{n}</text>"##,
                a = w - mr - 160.0,
                b = y0 - 6.0,
                c = w - mr - 142.0,
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
    let f = Frame::of(&Style::default());
    let (w, h, ml, mr, mt, mb) = (f.w, f.h, f.ml, f.mr, f.mt, f.mb);
    let mut o = String::new();
    f.open(&mut o, title);
    let xs = Scale::new(
        x,
        rows.iter()
            .flat_map(|r| r.q.iter().copied().chain([r.mean])),
        ml + 40.0,
        w - mr,
    );
    let n = rows.len().max(1) as f64;
    let row_h = ((h - mt - mb) / n).min(60.0);
    let yaxis = Axis::linear("", Fmt::Number);
    let ys = Scale::new(
        &yaxis.clone().with_range(0.0, 1.0),
        std::iter::empty(),
        h - mb,
        mt,
    );
    f.axes(&mut o, &xs, &ys, x, &Axis::linear("", Fmt::Number), true);
    // cover the meaningless y tick labels
    let _ = write!(
        o,
        r##"<rect x="0" y="{mt}" width="{}" height="{}" fill="#fff"/>"##,
        ml - 1.0,
        h - mt - mb + 6.0
    );
    for (i, r) in rows.iter().enumerate() {
        let cy = mt + row_h * (i as f64 + 0.5);
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
            ml + 34.0,
            cy + 4.0,
            esc(&r.label)
        );
    }
    if rows.is_empty() {
        f.no_data(&mut o);
    }
    o.push_str("</svg>");
    o
}
