//! Crash points: fault injection for the crash tests (`STRATA_CRASH_AT`,
//! docs/reliability.md, "Crash points").

/// Fault injection: a process started with `STRATA_CRASH_AT=NAME` aborts
/// (SIGABRT: no destructor runs, nothing is flushed, as after kill -9) when
/// it reaches the point `NAME`, so that a test can crash it in a window too
/// narrow to hit with a signal (docs/reliability.md, "Crash points").
pub(crate) fn crash_point(name: &str) {
    if crash_at() == Some(name) {
        eprintln!("strata: crash point {name} reached (STRATA_CRASH_AT): aborting");
        std::process::abort();
    }
}

/// Runs the two writes of an S3 change at once (an object's head record or
/// tombstone, and its listing entry), answering both outcomes. With
/// `STRATA_CRASH_AT` naming `after_a` (or `after_b`), they run in series
/// instead, `a` (or `b`) first, and the process aborts between them: the
/// crash-point tests stop it with exactly one of the two done.
pub(crate) async fn both<A, B>(
    a: impl std::future::Future<Output = A>,
    b: impl std::future::Future<Output = B>,
    after_a: &str,
    after_b: &str,
) -> (A, B) {
    match crash_at() {
        Some(p) if p == after_a => {
            let x = a.await;
            crash_point(after_a);
            (x, b.await)
        }
        Some(p) if p == after_b => {
            let y = b.await;
            crash_point(after_b);
            (a.await, y)
        }
        _ => tokio::join!(a, b),
    }
}

/// The crash point `STRATA_CRASH_AT` names, if any.
pub(crate) fn crash_at() -> Option<&'static str> {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    AT.get_or_init(|| std::env::var("STRATA_CRASH_AT").ok())
        .as_deref()
}
