//! Progress bars for long work, drawn on stderr only when it is a terminal.

#![allow(dead_code)]

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;

/// A bar counting `total` units of work with a label; hidden when stderr is
/// not a terminal (so logs and pipes stay clean).
pub fn bar(total: u64, label: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), draw_target());
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{elapsed_precise}] {wide_bar} {pos}/{len} ({per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(label.to_string());
    pb
}

/// A bar counting bytes (for reading a file of known size).
pub fn bytes_bar(total: u64, label: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(Some(total), draw_target());
    pb.set_style(
        ProgressStyle::with_template(
            "{msg:>12} [{elapsed_precise}] {wide_bar} {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    pb.set_message(label.to_string());
    pb
}

/// A spinner for work of unknown length.
pub fn spinner(label: &str) -> ProgressBar {
    let pb = ProgressBar::with_draw_target(None, draw_target());
    pb.set_style(
        ProgressStyle::with_template("{msg:>12} [{elapsed_precise}] {spinner} {pos} ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
    );
    pb.set_message(label.to_string());
    pb
}

fn draw_target() -> ProgressDrawTarget {
    if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}
