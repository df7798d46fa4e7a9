//! Line charts and scatter plots, and the frame every chart shares
//! (title, axes with ticks and labels, legend).

use std::fmt::Write;

use crate::format::{esc, fmt_value};
use crate::scale::{Axis, Scale};

/// Colours of successive series (colour-blind friendly, Okabe–Ito).
pub const PALETTE: [&str; 8] = [
    "#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#F0E442",
];

/// Where the legend goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Legend {
    /// Inside the plot area, top left.
    TopLeft,
    /// Inside the plot area, top right.
    TopRight,
    /// Inside the plot area, bottom right (the empty corner under rising
    /// curves).
    BottomRight,
    /// In a margin right of the plot area (many or long names).
    Right,
}

/// The look of a chart: size, legend place, colours.
#[derive(Clone, Copy, Debug)]
pub struct Style {
    /// Width in pixels.
    pub width: f64,
    /// Height in pixels.
    pub height: f64,
    /// Where the legend goes.
    pub legend: Legend,
    /// Colours of successive series (cycled).
    pub palette: &'static [&'static str],
    /// Colour of highlighted points (markers).
    pub marker: &'static str,
}

impl Default for Style {
    /// 640 × 380, legend top left, the Okabe–Ito palette.
    fn default() -> Style {
        Style {
            width: 640.0,
            height: 380.0,
            legend: Legend::TopLeft,
            palette: &PALETTE,
            marker: PALETTE[0],
        }
    }
}

/// A named line.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend name.
    pub name: String,
    /// Points (x, y), drawn in order.
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

    /// The same line, dashed.
    pub fn dashed(mut self) -> Series {
        self.dashed = true;
        self
    }
}

/// A point of a scatter plot, or a marker on a line chart.
#[derive(Clone, Debug)]
pub struct Point {
    /// x.
    pub x: f64,
    /// y.
    pub y: f64,
    /// Text next to the point.
    pub label: Option<String>,
    /// Drawn large in the marker colour (for example, a Pareto point or
    /// the chosen allocation) instead of small and grey.
    pub highlight: bool,
}

/// Margins of the plot area inside the chart.
pub(crate) struct Frame {
    pub(crate) w: f64,
    pub(crate) h: f64,
    /// Left, right, top, bottom.
    pub(crate) ml: f64,
    pub(crate) mr: f64,
    pub(crate) mt: f64,
    pub(crate) mb: f64,
}

/// Width of the legend margin of [`Legend::Right`].
const RIGHT_LEGEND: f64 = 160.0;

impl Frame {
    pub(crate) fn of(style: &Style) -> Frame {
        Frame {
            w: style.width,
            h: style.height,
            ml: 70.0,
            // Room for half the last x tick label.
            mr: if style.legend == Legend::Right {
                30.0 + RIGHT_LEGEND
            } else {
                30.0
            },
            mt: 36.0,
            mb: 56.0,
        }
    }

    /// Left and right pixel of the plot area.
    pub(crate) fn xs(&self) -> (f64, f64) {
        (self.ml, self.w - self.mr)
    }

    /// Bottom and top pixel of the plot area.
    pub(crate) fn ys(&self) -> (f64, f64) {
        (self.h - self.mb, self.mt)
    }

    /// The opening tag, background and title.
    pub(crate) fn open(&self, o: &mut String, title: &str) {
        let (w, h) = (self.w, self.h);
        let _ = write!(
            o,
            r##"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" font-family="Helvetica, Arial, sans-serif" font-size="12"><title>{t}</title><rect x="0" y="0" width="{w}" height="{h}" fill="#ffffff"/><text x="{cx}" y="20" text-anchor="middle" font-size="14" font-weight="bold">{t}</text>"##,
            t = esc(title),
            cx = w / 2.0
        );
    }

    /// Grid lines, tick labels, axis lines and axis labels.
    pub(crate) fn axes(
        &self,
        o: &mut String,
        xs: &Scale,
        ys: &Scale,
        x: &Axis,
        y: &Axis,
        xticks: bool,
    ) {
        let (x0, x1) = self.xs();
        let (y0, y1) = self.ys();
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
            ly = self.h - 14.0,
            cy = (y0 + y1) / 2.0,
            xl = esc(&x.label),
            yl = esc(&y.label)
        );
    }

    /// One legend entry per (name, colour, dashed).
    fn legend(&self, o: &mut String, place: Legend, names: &[(String, &str, bool)]) {
        let (x0, x1) = self.xs();
        let longest = names.iter().map(|n| n.0.chars().count()).max().unwrap_or(0);
        let left = match place {
            Legend::TopLeft => x0 + 12.0,
            Legend::TopRight | Legend::BottomRight => x1 - 48.0 - 6.5 * longest as f64,
            Legend::Right => x1 + 10.0,
        };
        let mut y = if place == Legend::BottomRight {
            self.h - self.mb - 12.0 - 16.0 * names.len().saturating_sub(1) as f64
        } else {
            self.mt + 8.0
        };
        for (name, color, dashed) in names {
            let dash = if *dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let _ = write!(
                o,
                r##"<line x1="{a}" y1="{y}" x2="{b}" y2="{y}" stroke="{color}" stroke-width="3"{dash}/><text x="{c}" y="{ty}">{n}</text>"##,
                a = left,
                b = left + 24.0,
                c = left + 30.0,
                ty = y + 4.0,
                n = esc(name)
            );
            y += 16.0;
        }
    }

    /// The grey note of a chart without data.
    pub(crate) fn no_data(&self, o: &mut String) {
        let _ = write!(
            o,
            r##"<text x="{}" y="{}" text-anchor="middle" fill="#888">no data in this trace</text>"##,
            self.w / 2.0,
            self.h / 2.0
        );
    }
}

fn polyline(o: &mut String, xs: &Scale, ys: &Scale, s: &Series, color: &str) {
    let pts: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter(|(x, y)| xs.shows(*x) && ys.shows(*y))
        .map(|(x, y)| (xs.px(*x), ys.px(*y)))
        .collect();
    match pts.as_slice() {
        [] => {}
        [(cx, cy)] => {
            let _ = write!(
                o,
                r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="3" fill="{color}"/>"##
            );
        }
        _ => {
            let dash = if s.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let pts: Vec<String> = pts.iter().map(|(x, y)| format!("{x:.1},{y:.1}")).collect();
            let _ = write!(
                o,
                r##"<polyline fill="none" stroke="{color}" stroke-width="2"{dash} points="{}"/>"##,
                pts.join(" ")
            );
        }
    }
}

/// What a chart draws besides its frame.
struct Content<'a> {
    series: &'a [Series],
    points: &'a [Point],
    /// Index of the first series' colour in the palette.
    first_color: usize,
    /// Show "no data" when there are no points (a scatter plot) rather
    /// than when no series has a point (a line chart).
    empty_without_points: bool,
}

fn render(style: &Style, title: &str, x: &Axis, y: &Axis, c: Content<'_>) -> String {
    let f = Frame::of(style);
    let mut o = String::new();
    f.open(&mut o, title);
    let (x0, x1) = f.xs();
    let (y0, y1) = f.ys();
    let xv = c
        .points
        .iter()
        .map(|p| p.x)
        .chain(c.series.iter().flat_map(|s| s.points.iter().map(|p| p.0)));
    let yv = c
        .points
        .iter()
        .map(|p| p.y)
        .chain(c.series.iter().flat_map(|s| s.points.iter().map(|p| p.1)));
    let xs = Scale::new(x, xv, x0, x1);
    let ys = Scale::new(y, yv, y0, y1);
    f.axes(&mut o, &xs, &ys, x, y, true);
    let palette = if style.palette.is_empty() {
        &PALETTE[..]
    } else {
        style.palette
    };
    let mut names = Vec::new();
    for (i, s) in c.series.iter().enumerate() {
        let color = palette[(i + c.first_color) % palette.len()];
        polyline(&mut o, &xs, &ys, s, color);
        names.push((s.name.clone(), color, s.dashed));
    }
    let shown = |p: &&Point| xs.shows(p.x) && ys.shows(p.y);
    for p in c.points.iter().filter(|p| !p.highlight).filter(shown) {
        let _ = write!(
            o,
            r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="#b0b0b0"/>"##,
            xs.px(p.x),
            ys.px(p.y)
        );
    }
    for p in c.points.iter().filter(|p| p.highlight).filter(shown) {
        let (cx, cy) = (xs.px(p.x), ys.px(p.y));
        let _ = write!(
            o,
            r##"<circle cx="{cx:.1}" cy="{cy:.1}" r="5" fill="{}"/>"##,
            style.marker
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
    f.legend(&mut o, style.legend, &names);
    let empty = if c.empty_without_points {
        c.points.is_empty()
    } else {
        c.series.iter().all(|s| s.points.is_empty()) && c.points.is_empty()
    };
    if empty {
        f.no_data(&mut o);
    }
    o.push_str("</svg>");
    o
}

/// A line chart of several series, in the default style.
pub fn line_chart(title: &str, x: &Axis, y: &Axis, series: &[Series]) -> String {
    chart(&Style::default(), title, x, y, series, &[])
}

/// A line chart in a given style, with optional points or markers drawn
/// over the lines.
pub fn chart(
    style: &Style,
    title: &str,
    x: &Axis,
    y: &Axis,
    series: &[Series],
    points: &[Point],
) -> String {
    render(
        style,
        title,
        x,
        y,
        Content {
            series,
            points,
            first_color: 0,
            empty_without_points: false,
        },
    )
}

/// A scatter plot with optional lines (for example, a break-even line),
/// in the default style; the lines take colours from the second on, so
/// they stand apart from highlighted points.
pub fn scatter_chart(
    title: &str,
    x: &Axis,
    y: &Axis,
    points: &[Point],
    lines: &[Series],
) -> String {
    render(
        &Style::default(),
        title,
        x,
        y,
        Content {
            series: lines,
            points,
            first_color: 1,
            empty_without_points: true,
        },
    )
}
