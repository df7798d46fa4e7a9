//! Background work with owners: every loop of the server (heartbeats,
//! recovery, erasure coding, scrub, catch-up, the listing index's rebuild,
//! the space reserve's refill, and the S3 API's intent and upload sweeps)
//! is a named worker of one [`Workers`] runner, with its pass count, what
//! it is doing, its last error, and one stop signal for all of them
//! (Garage's `util/background` is the shape).
//!
//! A worker's loop waits through its [`Ctx`] ([`Ctx::tick`],
//! [`Ctx::sleep`]): those waits are its safe points, where it ends once
//! [`Workers::stop`] is called. A pass under way runs to its end; one that
//! does not end within the stop's deadline is dropped at its next await
//! (its work is idempotent and redone at the next start, as after a
//! crash) and named in the answer.

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// What a worker is doing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Between passes, waiting for its next tick.
    Idle,
    /// In a pass.
    Busy,
    /// Its loop ended (the stop, or nothing left to do).
    Done,
}

impl State {
    fn from_u8(v: u8) -> State {
        match v {
            0 => State::Idle,
            1 => State::Busy,
            _ => State::Done,
        }
    }
}

/// One worker's counters, shared by its loop and the runner.
#[derive(Debug)]
struct Cell {
    name: &'static str,
    what: &'static str,
    state: AtomicU8,
    passes: AtomicU64,
    errors: AtomicU64,
    /// Milliseconds since the Unix epoch of the current pass's start (busy)
    /// or of the last pass's end.
    since_ms: AtomicU64,
    last_error: Mutex<Option<String>>,
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// A worker's status, as `/cluster/v1/status` and `strata cluster status`
/// show it.
#[derive(Clone, Debug, Serialize)]
pub struct WorkerStatus {
    /// Its name (`recovery`, `erasure-coding`, …).
    pub name: &'static str,
    /// What it does, in a few words.
    pub what: &'static str,
    /// Idle, busy or done.
    pub state: State,
    /// Passes finished.
    pub passes: u64,
    /// Passes that ended in an error.
    pub errors: u64,
    /// When the current pass began (busy) or the last one ended, ms since
    /// the Unix epoch (0: never ran).
    pub since_ms: u64,
    /// The last error, if any.
    pub last_error: Option<String>,
}

/// What a worker's loop is given: its stop signal and its counters.
pub struct Ctx {
    stop: watch::Receiver<bool>,
    cell: Arc<Cell>,
}

impl Ctx {
    /// Whether the runner asked the workers to stop.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    fn idle(&self) {
        if self.cell.state.swap(0, Ordering::AcqRel) == 1 {
            self.cell.passes.fetch_add(1, Ordering::Relaxed);
            self.cell.since_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    fn busy(&self) {
        self.cell.state.store(1, Ordering::Release);
        self.cell.since_ms.store(now_ms(), Ordering::Relaxed);
    }

    /// Ends the pass under way (if any) and waits for `interval`'s next
    /// tick: true to run the next pass, false once the runner stops (the
    /// loop returns then: this is its safe point).
    pub async fn tick(&mut self, interval: &mut tokio::time::Interval) -> bool {
        self.between_passes(interval.tick()).await
    }

    /// [`Ctx::tick`] with a sleep of `d` between passes.
    pub async fn sleep(&mut self, d: Duration) -> bool {
        self.between_passes(tokio::time::sleep(d)).await
    }

    /// The wait between two passes: `wait`, unless the runner stops first.
    async fn between_passes(&mut self, wait: impl Future) -> bool {
        self.idle();
        if self.stopping() {
            return false;
        }
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = wait => {}
            _ = stop.wait_for(|s| *s) => return false,
        }
        self.busy();
        true
    }

    /// Records that the pass under way failed with `e` (the loop goes on).
    pub fn failed(&self, e: impl std::fmt::Display) {
        self.cell.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut g) = self.cell.last_error.lock() {
            *g = Some(e.to_string());
        }
    }
}

struct Entry {
    cell: Arc<Cell>,
    handle: Option<JoinHandle<()>>,
}

/// The runner of a server's background workers.
pub struct Workers {
    stop: watch::Sender<bool>,
    list: Mutex<Vec<Entry>>,
}

impl Default for Workers {
    fn default() -> Self {
        Workers::new()
    }
}

impl Workers {
    /// A runner with no workers yet.
    pub fn new() -> Workers {
        Workers {
            stop: watch::Sender::new(false),
            list: Mutex::new(Vec::new()),
        }
    }

    /// Starts worker `name` (`what` says what it does): `run` is its loop,
    /// which waits through the [`Ctx`] it is given and returns once a wait
    /// says stop.
    pub fn spawn<F, Fut>(&self, name: &'static str, what: &'static str, run: F)
    where
        F: FnOnce(Ctx) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let cell = Arc::new(Cell {
            name,
            what,
            state: AtomicU8::new(0),
            passes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            since_ms: AtomicU64::new(0),
            last_error: Mutex::new(None),
        });
        let ctx = Ctx {
            stop: self.stop.subscribe(),
            cell: cell.clone(),
        };
        let fut = run(ctx);
        let done = cell.clone();
        let handle = tokio::spawn(async move {
            fut.await;
            done.state.store(2, Ordering::Release);
        });
        if let Ok(mut l) = self.list.lock() {
            l.push(Entry {
                cell,
                handle: Some(handle),
            });
        }
    }

    /// Every worker's status, in the order they were started.
    pub fn status(&self) -> Vec<WorkerStatus> {
        let Ok(l) = self.list.lock() else {
            return Vec::new();
        };
        l.iter()
            .map(|e| WorkerStatus {
                name: e.cell.name,
                what: e.cell.what,
                state: State::from_u8(e.cell.state.load(Ordering::Acquire)),
                passes: e.cell.passes.load(Ordering::Relaxed),
                errors: e.cell.errors.load(Ordering::Relaxed),
                since_ms: e.cell.since_ms.load(Ordering::Relaxed),
                last_error: e.cell.last_error.lock().ok().and_then(|g| g.clone()),
            })
            .collect()
    }

    /// Asks every worker to stop at its next safe point and waits up to
    /// `deadline` for them; the names of those still running then, whose
    /// tasks are dropped.
    pub async fn stop(&self, deadline: Duration) -> Vec<&'static str> {
        let _ = self.stop.send(true);
        let handles: Vec<(&'static str, JoinHandle<()>)> = match self.list.lock() {
            Ok(mut l) => l
                .iter_mut()
                .filter_map(|e| e.handle.take().map(|h| (e.cell.name, h)))
                .collect(),
            Err(_) => Vec::new(),
        };
        let until = Instant::now() + deadline;
        let mut late = Vec::new();
        for (name, mut h) in handles {
            let left = until.saturating_duration_since(Instant::now());
            if tokio::time::timeout(left, &mut h).await.is_err() {
                h.abort();
                late.push(name);
            }
        }
        late
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn workers_count_passes_and_stop_at_their_safe_point() {
        let w = Workers::new();
        let passes = Arc::new(AtomicU64::new(0));
        let p = passes.clone();
        w.spawn("ticker", "counts", move |mut ctx| async move {
            let mut tick = tokio::time::interval(Duration::from_millis(5));
            while ctx.tick(&mut tick).await {
                p.fetch_add(1, Ordering::Relaxed);
                if p.load(Ordering::Relaxed) == 2 {
                    ctx.failed("second pass");
                }
            }
        });
        // A worker whose pass never reaches a safe point.
        w.spawn("stuck", "never waits", |_ctx| async move {
            std::future::pending::<()>().await;
        });
        tokio::time::sleep(Duration::from_millis(60)).await;
        let st = w.status();
        assert_eq!(st.len(), 2);
        assert_eq!(st[0].name, "ticker");
        assert!(st[0].passes >= 3, "{st:?}");
        assert_eq!(st[0].errors, 1);
        assert_eq!(st[0].last_error.as_deref(), Some("second pass"));
        let late = w.stop(Duration::from_millis(100)).await;
        assert_eq!(late, vec!["stuck"]);
        let st = w.status();
        assert_eq!(st[0].state, State::Done);
        let after = passes.load(Ordering::Relaxed);
        tokio::time::sleep(Duration::from_millis(30)).await;
        assert_eq!(
            passes.load(Ordering::Relaxed),
            after,
            "no pass after the stop"
        );
    }
}
