//! Strata's charts: small SVG documents written as plain strings.
//!
//! One module for every chart the lab draws — miss-ratio curves
//! (`strata mrc --plot`), cacheability curves (`strata provision --plot`)
//! and the charts of the HTML report (`strata report`): line charts with
//! several series, scatter plots, grouped bars and box plots, on linear or
//! log axes with ticks, labels and a legend. No fonts, scripts, files or
//! dependencies: the output renders anywhere an SVG does, inline in HTML
//! included.
//!
//! ```
//! use strata_plot::{line_chart, Axis, Fmt, Series};
//! let svg = line_chart(
//!     "miss ratio",
//!     &Axis::log("cache size", Fmt::Bytes),
//!     &Axis::linear("miss ratio", Fmt::Percent).with_range(0.0, 1.0),
//!     &[Series::new("LRU", vec![(1024.0, 0.9), (1048576.0, 0.4)])],
//! );
//! assert!(svg.starts_with("<svg") && svg.ends_with("</svg>"));
//! ```

#![warn(missing_docs)]

mod bars;
mod chart;
mod format;
mod scale;

pub use bars::{bar_chart, box_plot, BoxRow};
pub use chart::{chart, line_chart, scatter_chart, Legend, Point, Series, Style, PALETTE};
pub use format::{esc, fmt_value, Fmt};
pub use scale::Axis;
