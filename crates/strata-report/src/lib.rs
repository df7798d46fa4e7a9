//! The lab's report for people: one self-contained HTML file with inline SVG
//! charts (no scripts, no fonts, no network) showing a trace's workload
//! analysis, miss-ratio curves, the cost explorer's Pareto chart, and any
//! sections the caller adds (the provisioner's cacheability curves and tier
//! plan).

#![warn(missing_docs)]

pub mod charts;
mod html;

pub use html::{cost_chart, render, table, MrcCurve, ReportInput, Section};
