//! The report's charts: line charts, scatter plots, grouped bars and box
//! plots, on linear or log axes, drawn by `strata-plot` (the lab's one SVG
//! chart module). No fonts, scripts or network: the SVG is inlined in the
//! report and renders anywhere.

pub use strata_plot::{
    bar_chart, box_plot, esc, fmt_value, line_chart, scatter_chart, Axis, BoxRow, Fmt, Point,
    Series, PALETTE,
};
