//! Every chart parsed as XML: the series, points, axes, ticks and labels
//! the caller asked for are in the document, where they belong.

use roxmltree::{Document, Node};
use strata_plot::{
    bar_chart, box_plot, chart, line_chart, scatter_chart, Axis, BoxRow, Fmt, Legend, Point,
    Series, Style, PALETTE,
};

fn parse(svg: &str) -> Document<'_> {
    Document::parse(svg).unwrap_or_else(|e| panic!("not XML ({e}):\n{svg}"))
}

fn elements<'a>(d: &'a Document<'a>, tag: &str) -> Vec<Node<'a, 'a>> {
    d.descendants().filter(|n| n.has_tag_name(tag)).collect()
}

fn texts(d: &Document<'_>) -> Vec<String> {
    elements(d, "text")
        .iter()
        .map(|n| n.text().unwrap_or("").to_string())
        .collect()
}

fn num(n: &Node<'_, '_>, attr: &str) -> f64 {
    n.attribute(attr)
        .unwrap_or_else(|| panic!("no {attr}"))
        .parse()
        .unwrap()
}

/// The polyline's points as (x, y) pixels.
fn points(n: &Node<'_, '_>) -> Vec<(f64, f64)> {
    n.attribute("points")
        .unwrap()
        .split(' ')
        .map(|p| {
            let (x, y) = p.split_once(',').unwrap();
            (x.parse().unwrap(), y.parse().unwrap())
        })
        .collect()
}

/// The text elements whose y is below the plot area's bottom (x ticks)
/// or whose anchor is "end" (y ticks), in document order.
fn tick_labels(d: &Document<'_>, bottom: f64) -> (Vec<String>, Vec<String>) {
    let mut xt = Vec::new();
    let mut yt = Vec::new();
    for t in elements(d, "text") {
        let s = t.text().unwrap_or("").to_string();
        if t.attribute("text-anchor") == Some("end") {
            yt.push(s);
        } else if t.attribute("text-anchor") == Some("middle")
            && t.attribute("y").and_then(|y| y.parse::<f64>().ok()) == Some(bottom + 16.0)
        {
            xt.push(s);
        }
    }
    (xt, yt)
}

#[test]
fn line_chart_has_its_series_axes_ticks_and_legend() {
    let kib = 1024.0;
    let series = [
        Series::new(
            "LRU",
            vec![(kib, 0.9), (kib * kib, 0.5), (kib * kib * kib, 0.1)],
        ),
        Series::new(
            "FIFO",
            vec![(kib, 0.95), (kib * kib, 0.6), (kib * kib * kib, 0.2)],
        ),
        Series::new("bound", vec![(kib, 0.5), (kib * kib * kib, 0.05)]).dashed(),
    ];
    let svg = line_chart(
        "Miss ratio <all>",
        &Axis::log("cache size", Fmt::Bytes),
        &Axis::linear("miss ratio", Fmt::Percent).with_range(0.0, 1.0),
        &series,
    );
    let d = parse(&svg);
    let root = d.root_element();
    assert!(root.has_tag_name("svg"));
    assert_eq!(num(&root, "width"), 640.0);
    assert_eq!(num(&root, "height"), 380.0);
    // The title, escaped in the source, reads back as given.
    assert_eq!(elements(&d, "title")[0].text(), Some("Miss ratio <all>"));
    let t = texts(&d);
    assert_eq!(t[0], "Miss ratio <all>");
    for label in ["cache size", "miss ratio", "LRU", "FIFO", "bound"] {
        assert!(t.iter().any(|s| s == label), "no label {label}: {t:?}");
    }
    // One polyline per series, coloured in palette order, the third dashed.
    let lines = elements(&d, "polyline");
    assert_eq!(lines.len(), 3);
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l.attribute("stroke"), Some(PALETTE[i]));
        assert_eq!(l.attribute("stroke-dasharray").is_some(), i == 2);
        assert_eq!(points(l).len(), series[i].points.len());
    }
    // Plot area: x from 70 to 610, y from 324 (bottom) to 36 (top); the log
    // axis spans whole decades (1000 to 1e10), equal ratios equal steps.
    let p = points(&lines[0]);
    assert!(p.iter().all(|&(x, _)| (70.0..=610.0).contains(&x)), "{p:?}");
    let (d1, d2) = (p[1].0 - p[0].0, p[2].0 - p[1].0);
    assert!(d1 > 100.0 && (d1 - d2).abs() < 0.2, "{p:?}");
    let decade = 540.0 / 7.0;
    assert!(
        (p[0].0 - (70.0 + decade * 1.024f64.log10())).abs() < 0.2,
        "{p:?}"
    );
    // y = 0.9 of a 0..1 axis: 10% below the top of 288 px.
    assert!((p[0].1 - (36.0 + 0.1 * 288.0)).abs() < 0.2, "{p:?}");
    // Powers of two on the log bytes axis, in binary units.
    let (xt, yt) = tick_labels(&d, 324.0);
    assert_eq!(
        xt.first().map(String::as_str),
        Some("1 KiB"),
        "x ticks {xt:?}"
    );
    assert!(
        xt.len() >= 4 && xt.iter().all(|s| s.ends_with('B')),
        "x ticks {xt:?}"
    );
    assert_eq!(yt, ["0%", "20%", "40%", "60%", "80%", "100%"]);
    // The legend: one short line per series, in the series' colour and dash.
    let legend: Vec<Node<'_, '_>> = elements(&d, "line")
        .into_iter()
        .filter(|l| l.attribute("stroke-width") == Some("3"))
        .collect();
    assert_eq!(legend.len(), 3);
    for (i, l) in legend.iter().enumerate() {
        assert_eq!(l.attribute("stroke"), Some(PALETTE[i]));
        assert_eq!(l.attribute("stroke-dasharray").is_some(), i == 2);
        assert!(num(l, "x1") < 200.0, "top-left legend");
    }
}

#[test]
fn style_sets_size_palette_legend_place_and_markers() {
    const TAB: [&str; 2] = ["#1f77b4", "#d62728"];
    let style = Style {
        width: 800.0,
        height: 500.0,
        legend: Legend::Right,
        palette: &TAB,
        marker: "#000",
    };
    let series = [
        Series::new("exact", vec![(0.0, 1.0), (500.0, 0.5), (1000.0, 0.2)]),
        Series::new("shards 1%", vec![(0.0, 1.0), (1000.0, 0.25)]),
        Series::new("third", vec![(0.0, 0.9), (1000.0, 0.3)]),
    ];
    let svg = chart(
        &style,
        "t",
        &Axis::linear("objects", Fmt::Number),
        &Axis::linear("miss ratio", Fmt::Number).with_range(0.0, 1.0),
        &series,
        &[Point {
            x: 500.0,
            y: 0.5,
            label: Some("plan".into()),
            highlight: true,
        }],
    );
    let d = parse(&svg);
    assert_eq!(num(&d.root_element(), "width"), 800.0);
    assert_eq!(num(&d.root_element(), "height"), 500.0);
    let lines = elements(&d, "polyline");
    // The palette cycles.
    let strokes: Vec<_> = lines
        .iter()
        .map(|l| l.attribute("stroke").unwrap())
        .collect();
    assert_eq!(strokes, [TAB[0], TAB[1], TAB[0]]);
    // Plot area x from 70 to 800 - 30 - 160 = 610; the legend right of it.
    let p = points(&lines[0]);
    assert!((p[2].0 - 610.0).abs() < 1.0, "{p:?}");
    let legend_x: Vec<f64> = elements(&d, "text")
        .iter()
        .filter(|t| ["exact", "shards 1%", "third"].contains(&t.text().unwrap_or("")))
        .map(|t| num(t, "x"))
        .collect();
    assert_eq!(legend_x.len(), 3);
    assert!(legend_x.iter().all(|&x| x > 610.0), "{legend_x:?}");
    // The marker sits on the first line's middle point, labelled.
    let c = elements(&d, "circle");
    assert_eq!(c.len(), 1);
    assert_eq!(c[0].attribute("fill"), Some("#000"));
    assert!((num(&c[0], "cx") - p[1].0).abs() < 0.2 && (num(&c[0], "cy") - p[1].1).abs() < 0.2);
    assert!(texts(&d).iter().any(|t| t == "plan"));
    // Linear ticks are round: 0, 200, …, 1000 on x.
    let (xt, _) = tick_labels(&d, 500.0 - 56.0);
    assert_eq!(xt, ["0", "200", "400", "600", "800", "1000"]);
}

#[test]
fn right_legends_are_inside_on_the_right() {
    let with = |legend| {
        chart(
            &Style {
                legend,
                ..Style::default()
            },
            "t",
            &Axis::linear("x", Fmt::Number),
            &Axis::linear("y", Fmt::Number),
            &[Series::new("curve", vec![(0.0, 0.0), (1.0, 1.0)])],
            &[],
        )
    };
    let place = |svg: &str| {
        let d = parse(svg);
        let t = elements(&d, "text")
            .into_iter()
            .find(|t| t.text() == Some("curve"))
            .unwrap();
        (num(&t, "x"), num(&t, "y"))
    };
    let (tx, ty) = place(&with(Legend::TopRight));
    let (bx, by) = place(&with(Legend::BottomRight));
    assert!(tx > 400.0 && tx < 610.0 && tx == bx, "{tx} {bx}");
    assert!(ty < 100.0 && by > 250.0 && by < 324.0, "{ty} {by}");
}

#[test]
fn linear_bytes_axis_ticks_on_round_units() {
    let svg = chart(
        &Style::default(),
        "t",
        &Axis::linear("flash", Fmt::Bytes),
        &Axis::linear("reads/s", Fmt::Number),
        &[Series::new(
            "FIFO age",
            vec![(0.0, 0.0), (3.0 * 1048576.0, 5.0)],
        )],
        &[],
    );
    let d = parse(&svg);
    let (xt, _) = tick_labels(&d, 324.0);
    assert_eq!(xt, ["0 B", "1 MiB", "2 MiB", "3 MiB"]);
}

#[test]
fn log_axes_skip_what_they_cannot_show() {
    let svg = line_chart(
        "t",
        &Axis::log("age", Fmt::Seconds),
        &Axis::log("reads", Fmt::Number),
        &[Series::new(
            "reads",
            vec![(0.0, 5.0), (10.0, 0.0), (60.0, 10.0), (3600.0, 100.0)],
        )],
    );
    let d = parse(&svg);
    let lines = elements(&d, "polyline");
    assert_eq!(points(&lines[0]).len(), 2);
    let (xt, _) = tick_labels(&d, 324.0);
    assert!(
        xt.contains(&"1m".to_string()) && xt.contains(&"1h".to_string()),
        "{xt:?}"
    );
    // A series with one drawable point is a dot.
    let one = line_chart(
        "t",
        &Axis::log("x", Fmt::Number),
        &Axis::linear("y", Fmt::Number),
        &[Series::new("one", vec![(-1.0, 1.0), (10.0, 2.0)])],
    );
    let d = parse(&one);
    assert!(elements(&d, "polyline").is_empty());
    assert_eq!(elements(&d, "circle").len(), 1);
}

#[test]
fn empty_charts_say_so() {
    let svg = line_chart(
        "empty",
        &Axis::log("x", Fmt::Number),
        &Axis::linear("y", Fmt::Number),
        &[Series::new("none", vec![])],
    );
    let d = parse(&svg);
    assert!(texts(&d).iter().any(|t| t == "no data in this trace"));
    let full = line_chart(
        "full",
        &Axis::linear("x", Fmt::Number),
        &Axis::linear("y", Fmt::Number),
        &[Series::new("s", vec![(0.0, 0.0), (1.0, 1.0)])],
    );
    assert!(!texts(&parse(&full))
        .iter()
        .any(|t| t == "no data in this trace"));
}

#[test]
fn scatter_points_and_lines() {
    let pts = [
        Point {
            x: 1.0,
            y: 2.0,
            label: Some("A & B".into()),
            highlight: true,
        },
        Point {
            x: 10.0,
            y: 20.0,
            label: None,
            highlight: false,
        },
        Point {
            x: 100.0,
            y: 3.0,
            label: None,
            highlight: false,
        },
    ];
    let svg = scatter_chart(
        "sc",
        &Axis::log("capex", Fmt::Dollars),
        &Axis::log("latency", Fmt::Millis),
        &pts,
        &[Series::new("break-even", vec![(1.0, 1.0), (100.0, 100.0)])],
    );
    let d = parse(&svg);
    let c = elements(&d, "circle");
    assert_eq!(
        c.iter()
            .filter(|c| c.attribute("fill") == Some("#b0b0b0"))
            .count(),
        2
    );
    assert_eq!(
        c.iter()
            .filter(|c| c.attribute("fill") == Some(PALETTE[0]))
            .count(),
        1
    );
    assert!(texts(&d).iter().any(|t| t == "A & B"));
    // The line takes the second colour, apart from the highlighted point.
    assert_eq!(
        elements(&d, "polyline")[0].attribute("stroke"),
        Some(PALETTE[1])
    );
    assert!(texts(&d).iter().any(|t| t == "break-even"));
    assert!(texts(&d).iter().any(|t| t.starts_with('$')));
}

#[test]
fn bars_and_boxes() {
    let b = bar_chart(
        "bars",
        &["reads".into(), "writes".into(), "deletes".into()],
        &[
            ("data".into(), vec![0.5, 0.25, 0.1]),
            ("io".into(), vec![0.1, 0.9, 0.0]),
        ],
        &Axis::linear("share", Fmt::Percent),
        "op",
    );
    let d = parse(&b);
    // One bar per category and series, each with a tooltip.
    let bars: Vec<Node<'_, '_>> = elements(&d, "rect")
        .into_iter()
        .filter(|r| r.children().any(|c| c.has_tag_name("title")))
        .collect();
    assert_eq!(bars.len(), 6);
    assert_eq!(
        bars[1]
            .children()
            .find(|c| c.has_tag_name("title"))
            .unwrap()
            .text(),
        Some("reads: 10%")
    );
    // Taller value, taller bar.
    assert!(num(&bars[2], "height") < num(&bars[3], "height"));
    let t = texts(&d);
    for label in ["reads", "writes", "deletes", "data", "io", "share", "op"] {
        assert!(t.iter().any(|s| s == label), "{label}: {t:?}");
    }
    let bp = box_plot(
        "box",
        &[
            BoxRow {
                label: "w0".into(),
                q: [10.0, 20.0, 40.0, 80.0, 160.0],
                mean: 50.0,
            },
            BoxRow {
                label: "w1".into(),
                q: [1000.0, 2000.0, 4000.0, 8000.0, 16000.0],
                mean: 5000.0,
            },
        ],
        &Axis::log("size", Fmt::Bytes),
    );
    let d = parse(&bp);
    let t = texts(&d);
    assert!(t.iter().any(|s| s == "w0") && t.iter().any(|s| s == "w1"));
    // One mean dot per row, the second row's further right.
    let dots = elements(&d, "circle");
    assert_eq!(dots.len(), 2);
    assert!(num(&dots[1], "cx") > num(&dots[0], "cx"));
}
