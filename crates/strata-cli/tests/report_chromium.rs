//! `strata report` end to end: the report is written, is self-contained,
//! and renders in headless Chromium with charts on screen and no console
//! errors.

mod lab_common;

use lab_common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn chromium() -> Option<PathBuf> {
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .map(|n| Path::new("/usr/bin").join(n))
        .find(|p| p.exists())
}

/// Decodes an RGBA/RGB PNG: (width, height, pixels as RGB).
fn decode(png_path: &Path) -> (u32, u32, Vec<[u8; 3]>) {
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

#[test]
fn report_renders_in_headless_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("report.html");
    let t = trace("cloudPhysicsIO.vscsi");
    let out = strata(&["report", t.to_str().unwrap(), "-o", html.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&html).unwrap();
    // Self-contained: nothing to fetch.
    for bad in [
        "http://",
        "https://",
        "<script src",
        "<link ",
        "@import",
        "url(",
    ] {
        let allowed = bad == "http://"
            && text.matches(bad).count() == text.matches("http://www.w3.org/2000/svg").count();
        assert!(allowed || !text.contains(bad), "report references {bad}");
    }
    for section in [
        "Op mix",
        "Object sizes",
        "lifetimes",
        "Locality map",
        "Read heat",
        "Popularity by age",
        "IOPS per GiB",
        "Miss-ratio curves",
        "Cost explorer",
        "Cacheability curves and tier plan",
    ] {
        assert!(text.contains(section), "missing section {section}");
    }
    assert!(text.matches("<svg").count() >= 10);

    let Some(chrome) = chromium() else {
        panic!("chromium is not installed (apt-get install chromium; .ci/run does it)");
    };
    let profile = tempfile::tempdir().unwrap();
    let shot = dir.path().join("shot.png");
    let out = Command::new(chrome)
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
            "--window-size=1400,5000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--screenshot={}", shot.display()))
        .arg(format!("file://{}", html.display()))
        .output()
        .expect("run chromium");
    let log = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(shot.exists(), "no screenshot; chromium said:\n{log}");
    // Chromium logs every console message (console.error, uncaught
    // exceptions) as an `INFO:CONSOLE` line; the report has no scripts, so
    // any such line is a defect, as is a resource that failed to load.
    for line in log.lines() {
        let l = line.to_ascii_lowercase();
        assert!(!l.contains(":console"), "console message: {line}");
        assert!(!l.contains("uncaught"), "page error: {line}");
        assert!(
            !l.contains("err_file_not_found"),
            "missing resource: {line}"
        );
    }
    let (w, h, px) = decode(&shot);
    assert_eq!((w, h), (1400, 5000));
    let white = px.iter().filter(|p| p.iter().all(|&c| c > 245)).count();
    let non_white = px.len() - white;
    assert!(
        non_white as f64 > 0.02 * px.len() as f64,
        "screenshot is (nearly) blank: {non_white} of {} pixels drawn",
        px.len()
    );
    // The charts' colours are on screen (#0072B2 bars/lines, #D55E00).
    let blue = px
        .iter()
        .filter(|p| p[0] < 20 && (100..130).contains(&p[1]) && (160..195).contains(&p[2]))
        .count();
    let orange = px
        .iter()
        .filter(|p| p[0] > 200 && (80..110).contains(&p[1]) && p[2] < 20)
        .count();
    assert!(blue > 2000, "chart blue pixels: {blue}");
    assert!(orange > 100, "chart orange pixels: {orange}");
}

#[test]
fn report_bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = strata(&[
        "report",
        "/no/such/trace",
        "-o",
        dir.path().join("r.html").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/trace"));
    let t = trace("cloudPhysicsIO.vscsi");
    let out = strata(&[
        "report",
        t.to_str().unwrap(),
        "-o",
        "/no/such/dir/r.html",
        "--no-cost",
    ]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/no/such/dir/r.html"));
}
