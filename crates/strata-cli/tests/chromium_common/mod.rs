//! Headless Chromium for the tests of pages (the report, the dashboard):
//! find it, take a screenshot, dump the DOM after the page's scripts ran,
//! decode the PNG, and pick the console errors out of its log.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

/// The Chromium binary; panics with how to install it when it is missing.
pub fn chromium() -> PathBuf {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .map(|n| Path::new("/usr/bin").join(n))
        .find(|p| p.exists())
        .expect("chromium is not installed (apt-get install chromium; scripts/test does it)")
}

/// Runs headless Chromium on `url` with `extra` flags in a fresh profile;
/// returns (stdout, stderr).
pub fn headless(url: &str, extra: &[String]) -> (String, String) {
    let profile = tempfile::tempdir().expect("profile dir");
    let out = Command::new(chromium())
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(extra)
        .arg(url)
        .output()
        .expect("run chromium");
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A `width`×`height` screenshot of `url` into `png`, after the page ran
/// `budget_ms` of virtual time (0: as soon as it loaded); returns
/// Chromium's log.
pub fn screenshot(url: &str, png: &Path, width: u32, height: u32, budget_ms: u32) -> String {
    let mut args = vec![
        format!("--window-size={width},{height}"),
        format!("--screenshot={}", png.display()),
    ];
    if budget_ms > 0 {
        args.push(format!("--virtual-time-budget={budget_ms}"));
    }
    let (_, log) = headless(url, &args);
    assert!(png.exists(), "no screenshot; chromium said:\n{log}");
    log
}

/// The DOM of `url` after its scripts ran `budget_ms` of virtual time, and
/// Chromium's log.
pub fn dump_dom(url: &str, budget_ms: u32) -> (String, String) {
    headless(
        url,
        &[
            "--dump-dom".into(),
            format!("--virtual-time-budget={budget_ms}"),
        ],
    )
}

/// Lines of Chromium's log that are console messages, uncaught errors or
/// resources that failed to load (Chromium logs every console message as
/// an `INFO:CONSOLE` line).
pub fn page_errors(log: &str) -> Vec<String> {
    log.lines()
        .filter(|line| {
            let l = line.to_ascii_lowercase();
            l.contains(":console")
                || l.contains("uncaught")
                || l.contains("err_file_not_found")
                || l.contains("err_connection_refused")
        })
        .map(str::to_string)
        .collect()
}

/// Decodes an RGBA/RGB PNG: (width, height, pixels as RGB).
pub fn decode(png_path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
    let f = std::fs::File::open(png_path).expect("screenshot exists");
    let dec = png::Decoder::new(std::io::BufReader::new(f));
    let mut reader = dec.read_info().expect("a PNG");
    let mut buf = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buf).expect("a frame");
    let ch = info.color_type.samples();
    let px = buf[..info.buffer_size()]
        .chunks(ch)
        .map(|c| {
            if ch >= 3 {
                [c[0], c[1], c[2]]
            } else {
                [c[0], c[0], c[0]]
            }
        })
        .collect();
    (info.width, info.height, px)
}

/// Pixels within `tol` of `rgb` in every channel.
pub fn count_colour(px: &[[u8; 3]], rgb: [u8; 3], tol: u8) -> usize {
    px.iter()
        .filter(|p| (0..3).all(|i| p[i].abs_diff(rgb[i]) <= tol))
        .count()
}

/// The variance of the pixels' grey level: near 0 for a blank page.
pub fn grey_variance(px: &[[u8; 3]]) -> f64 {
    let g: Vec<f64> = px
        .iter()
        .map(|p| (p[0] as f64 + p[1] as f64 + p[2] as f64) / 3.0)
        .collect();
    let n = g.len().max(1) as f64;
    let mean = g.iter().sum::<f64>() / n;
    g.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n
}

/// What in `html` would make a browser fetch something (another host, a
/// script, a stylesheet, a font, an image by URL); the SVG namespace is a
/// name, not a fetch.
pub fn external_references(html: &str) -> Vec<&'static str> {
    let svg_ns = html.matches("http://www.w3.org/2000/svg").count();
    [
        "http://",
        "https://",
        "<script src",
        "<link ",
        "@import",
        "url(",
        "@font-face",
    ]
    .into_iter()
    .filter(|bad| {
        let n = html.matches(bad).count();
        if *bad == "http://" {
            n > svg_ns
        } else {
            n > 0
        }
    })
    .collect()
}
