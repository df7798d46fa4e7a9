//! Cacheability curves as SVG charts (drawn by `strata-plot`).

use strata_plot::{chart, Axis, Fmt, Legend, Point, Series, Style};

use crate::analysis::Curves;
use crate::curve::CacheabilityCurve;

/// Colours of the three curves: FIFO age, LRU lower and upper bound.
const COLORS: [&str; 3] = ["#1f77b4", "#d62728", "#ff7f0e"];

fn line(name: &str, c: &CacheabilityCurve) -> Series {
    Series::new(name, c.x.iter().copied().zip(c.y.iter().copied()).collect())
}

/// The chart of one workload: φ by FIFO age and the LRU bounds, flash bytes
/// on x, reads/s on y (up to every read of the workload, so the headroom
/// no flash can serve shows), with the allocation of the plan marked.
pub fn curve_chart(c: &Curves, title: &str, marker: Option<(f64, f64)>) -> String {
    let series = [
        line("FIFO age", &c.fifo),
        line("LRU age (lower bound)", &c.lru_lower),
        line("LRU age (upper bound)", &c.lru_upper).dashed(),
    ];
    let ymax = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(c.fifo.total_reads, f64::max)
        .max(1e-9);
    let style = Style {
        width: 720.0,
        height: 440.0,
        legend: Legend::BottomRight,
        palette: &COLORS,
        marker: "#000000",
    };
    let points: Vec<Point> = marker
        .map(|(x, y)| Point {
            x,
            y,
            label: Some("plan".into()),
            highlight: true,
        })
        .into_iter()
        .collect();
    chart(
        &style,
        title,
        &Axis::linear("flash", Fmt::Bytes),
        &Axis::linear("reads/s served from flash", Fmt::Number).with_range(0.0, ymax),
        &series,
        &points,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_has_three_curves_the_plan_and_byte_ticks() {
        let c = CacheabilityCurve::from_points(vec![0.0, 1e6, 2e6], vec![0.0, 5.0, 6.0]).unwrap();
        let cs = Curves {
            id: 1,
            fifo: c.clone(),
            lru_lower: c.clone(),
            lru_upper: c,
        };
        let s = curve_chart(&cs, "workload <1>", Some((1e6, 5.0)));
        assert!(s.starts_with("<svg") && s.ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 3);
        assert_eq!(
            s.matches("stroke-dasharray").count(),
            2,
            "upper bound and its legend"
        );
        assert!(s.contains("workload &lt;1&gt;"));
        assert!(s.contains(">plan</text>"));
        assert!(s.contains("MiB</text>"));
        for name in ["FIFO age", "LRU age (lower bound)", "LRU age (upper bound)"] {
            assert!(s.contains(&format!(">{name}</text>")), "{name}");
        }
    }
}
