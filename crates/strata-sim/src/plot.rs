//! Line charts of miss-ratio curves and per-set loads, drawn by
//! `strata-plot`.

use strata_plot::{chart, Axis, Fmt, Legend, Series as PlotSeries, Style};

/// One line of a chart.
pub struct Series {
    /// Legend label.
    pub label: String,
    /// Points (x, y).
    pub points: Vec<(f64, f64)>,
}

/// The ten colours of these charts (many policies side by side).
const COLORS: [&str; 10] = [
    "#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
    "#bcbd22", "#17becf",
];

/// Renders a line chart as an SVG document: x from 0, the legend right of
/// the plot (policy names can be long). The y axis runs from 0 to the
/// larger of 1 and the data's maximum when `unit_y` is set (miss ratios).
pub fn line_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[Series],
    unit_y: bool,
) -> String {
    let style = Style {
        width: 800.0,
        height: 500.0,
        legend: Legend::Right,
        palette: &COLORS,
        marker: COLORS[0],
    };
    let lines: Vec<PlotSeries> = series
        .iter()
        .map(|s| PlotSeries::new(s.label.as_str(), s.points.clone()))
        .collect();
    let mut y = Axis::linear(y_label, Fmt::Number);
    if unit_y {
        let ymax = series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.1))
            .fold(1.0, f64::max);
        y = y.with_range(0.0, ymax);
    }
    chart(
        &style,
        title,
        &Axis::linear(x_label, Fmt::Number),
        &y,
        &lines,
        &[],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn miss_ratio_chart_has_every_series_and_a_unit_y_axis() {
        let series = [
            Series {
                label: "lru".into(),
                points: vec![(0.0, 1.0), (1000.0, 0.6), (2000.0, 0.3)],
            },
            Series {
                label: "shards <1%>".into(),
                points: vec![(0.0, 1.0), (2000.0, 0.35)],
            },
        ];
        let s = line_chart("mrc", "cache size (objects)", "miss ratio", &series, true);
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains(">lru</text>") && s.contains(">shards &lt;1%&gt;</text>"));
        assert!(s.contains(">cache size (objects)</text>") && s.contains(">miss ratio</text>"));
        // 0 to 1 on y, in fifths.
        assert!(s.contains(">0.2</text>") && s.contains(">1</text>"));
        assert!(s.contains(r##"stroke="#1f77b4""##) && s.contains(r##"stroke="#d62728""##));
    }
}
