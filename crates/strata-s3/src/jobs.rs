//! The S3 API's background jobs: the write-intent resolver and the
//! abandoned-upload sweep. The S3 crate says what a pass does and how
//! often; the server runs each as a named worker of its one runner (its
//! status, its errors, one stop for all: `strata_server::workers`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::intents::resolver_times;
use crate::multipart::Swept;
use crate::service::StrataS3;
use strata_proto::now_stamp;

/// One pass of a job: what to log when it did something, or why it failed.
pub type Pass = Pin<Box<dyn Future<Output = Result<Option<String>, String>> + Send>>;

/// A background job of the S3 API.
pub struct Job {
    /// Its worker's name.
    pub name: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// The wait before the first pass.
    pub first_after: Duration,
    /// The wait between passes.
    pub every: Duration,
    /// Runs one pass.
    pub pass: Box<dyn FnMut() -> Pass + Send>,
}

/// The resolver of write intents an interrupted write left (and of
/// intents mirrored for another node that did not finish them): every
/// `STRATA_TEST_RESOLVE_EVERY_MS` (default 10 s) it resolves those older
/// than the resolve age against the objects' head records, and at the
/// first pass every intent from before this process started; the mirrors
/// it holds for other nodes only once older than the resolve age.
pub(crate) fn resolver(s3: StrataS3) -> Job {
    let (every, after) = resolver_times();
    let s3 = Arc::new(s3);
    let started = now_stamp();
    let first = Arc::new(AtomicBool::new(true));
    Job {
        name: "s3-intents",
        what: "resolves the S3 write intents interrupted writes left",
        first_after: Duration::ZERO,
        every,
        pass: Box::new(move || {
            let (s3, first) = (s3.clone(), first.clone());
            Box::pin(async move {
                let aged = now_stamp().saturating_sub(after.as_micros() as u64);
                let before = if first.swap(false, Ordering::Relaxed) {
                    started
                } else {
                    aged
                };
                match s3.resolve_intents(before, aged).await {
                    Ok((0, 0)) => Ok(None),
                    Ok((n, 0)) => Ok(Some(format!(
                        "S3 write intents: {n} left by an interrupted write resolved against the objects' head records"
                    ))),
                    Ok((n, m)) => Ok(Some(format!(
                        "S3 write intents: {n} left by an interrupted write, and {m} mirrored for another node that did not finish them, resolved against the objects' head records"
                    ))),
                    Err(e) => Err(format!("S3 write intents not resolved yet: {e}")),
                }
            })
        }),
    }
}

/// The sweep of multipart uploads neither completed nor aborted
/// `abandoned_after` after their creation. Every node sweeps (deletes are
/// idempotent), a quarter of the age apart and at most hourly, the first
/// time after a random part of that.
pub(crate) fn sweeper(s3: StrataS3, abandoned_after: Duration) -> Job {
    let every = (abandoned_after / 4).clamp(Duration::from_secs(1), Duration::from_secs(3600));
    let jitter = every.mul_f64((strata_proto::new_cookie() % 1000) as f64 / 1000.0);
    let s3 = Arc::new(s3);
    Job {
        name: "s3-upload-sweep",
        what: "aborts abandoned S3 multipart uploads, reclaims their parts",
        first_after: jitter,
        every,
        pass: Box::new(move || {
            let s3 = s3.clone();
            Box::pin(async move {
                match s3.sweep_uploads(abandoned_after).await {
                    Ok(s) if s != Swept::default() => Ok(Some(format!(
                        "S3 upload sweep: {} abandoned uploads aborted, {} completed uploads' records and {} parts removed",
                        s.uploads, s.completed, s.parts
                    ))),
                    Ok(_) => Ok(None),
                    Err(e) => Err(format!("S3 upload sweep: {e:?}")),
                }
            })
        }),
    }
}
