//! `strata report` end to end: the report is written, is self-contained,
//! and renders in headless Chromium with charts on screen and no console
//! errors.

mod chromium_common;
mod lab_common;

use chromium_common::*;
use lab_common::*;

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
    let refs = external_references(&text);
    assert!(refs.is_empty(), "the report references {refs:?}");
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

    let shot = dir.path().join("shot.png");
    let log = screenshot(&format!("file://{}", html.display()), &shot, 1400, 5000, 0);
    // The report has no scripts, so any console message is a defect, as is
    // a resource that failed to load.
    let errors = page_errors(&log);
    assert!(errors.is_empty(), "page errors: {errors:?}");
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
