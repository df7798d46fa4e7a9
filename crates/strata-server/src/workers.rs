//! Background work with owners: every loop of the server (heartbeats,
//! recovery, erasure coding, scrub, catch-up, the listing index's rebuild,
//! the space reserve's refill, the tier mover, the dashboard's sampler,
//! and the S3 API's intent and upload sweeps) is a named worker of one
//! [`Workers`] runner, with its pass count, what it is doing, its last
//! error, its throttle, and one stop signal for all of them (Garage's
//! `util/background` is the shape). A worker is a task ([`Workers::spawn`])
//! or, for blocking work, a thread ([`Workers::thread`]). The loops a
//! library keeps inside what it owns (the listing index's committer, the
//! trace writer, the row stores' group commit and background passes) are
//! listed beside them through a probe of their counters
//! ([`Workers::watch`]); they stop when their owner closes.
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
    /// Its throttle in bytes per second (0: none).
    throttle: AtomicU64,
}

impl Cell {
    fn new(name: &'static str, what: &'static str) -> Arc<Cell> {
        Arc::new(Cell {
            name,
            what,
            state: AtomicU8::new(0),
            passes: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            since_ms: AtomicU64::new(0),
            last_error: Mutex::new(None),
            throttle: AtomicU64::new(0),
        })
    }

    fn idle(&self) {
        if self.state.swap(0, Ordering::AcqRel) == 1 {
            self.passes.fetch_add(1, Ordering::Relaxed);
            self.since_ms.store(now_ms(), Ordering::Relaxed);
        }
    }

    fn busy(&self) {
        self.state.store(1, Ordering::Release);
        self.since_ms.store(now_ms(), Ordering::Relaxed);
    }

    fn failed(&self, e: impl std::fmt::Display) {
        self.errors.fetch_add(1, Ordering::Relaxed);
        if let Ok(mut g) = self.last_error.lock() {
            *g = Some(e.to_string());
        }
    }
}

/// What a panic said.
fn panic_text(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
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
    /// Its throttle in bytes per second, if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub throttle_bytes_per_s: Option<u64>,
    /// A loop its owner runs ([`Workers::watch`]), not the runner.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub owned_elsewhere: bool,
}

/// What a probe of a loop kept by its owner reports ([`Workers::watch`]).
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Passes (groups committed, files written, …) so far.
    pub passes: u64,
    /// Passes that failed.
    pub errors: u64,
    /// The last failure, if any.
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
        self.cell.idle();
        if self.stopping() {
            return false;
        }
        let mut stop = self.stop.clone();
        tokio::select! {
            _ = wait => {}
            _ = stop.wait_for(|s| *s) => return false,
        }
        self.cell.busy();
        true
    }

    /// Records that the pass under way failed with `e` (the loop goes on).
    pub fn failed(&self, e: impl std::fmt::Display) {
        self.cell.failed(e);
    }
}

/// What a thread worker's loop is given ([`Workers::thread`]): the same
/// as [`Ctx`], with a blocking wait.
pub struct ThreadCtx {
    stop: Arc<Stop>,
    cell: Arc<Cell>,
}

impl ThreadCtx {
    /// Whether the runner asked the workers to stop.
    pub fn stopping(&self) -> bool {
        self.stop.is_set()
    }

    /// Ends the pass under way (if any) and sleeps `d`: true to run the
    /// next pass, false once the runner stops (at once when it does).
    pub fn sleep(&mut self, d: Duration) -> bool {
        self.cell.idle();
        if self.stop.wait(d) {
            return false;
        }
        self.cell.busy();
        true
    }

    /// Records that the pass under way failed with `e` (the loop goes on).
    pub fn failed(&self, e: impl std::fmt::Display) {
        self.cell.failed(e);
    }
}

/// The stop signal as threads wait for it.
#[derive(Default)]
struct Stop {
    set: Mutex<bool>,
    cv: std::sync::Condvar,
}

impl Stop {
    fn is_set(&self) -> bool {
        self.set.lock().map_or(true, |g| *g)
    }

    fn raise(&self) {
        if let Ok(mut g) = self.set.lock() {
            *g = true;
        }
        self.cv.notify_all();
    }

    /// Waits up to `d`; whether the stop was raised.
    fn wait(&self, d: Duration) -> bool {
        let Ok(g) = self.set.lock() else { return true };
        match self.cv.wait_timeout_while(g, d, |set| !*set) {
            Ok((g, _)) => *g,
            Err(_) => true,
        }
    }
}

/// How the runner waits for a worker to end.
enum Ends {
    Task(JoinHandle<()>),
    Thread(tokio::sync::oneshot::Receiver<()>),
}

enum Kind {
    Runs(Arc<Cell>, Option<Ends>),
    Watched {
        name: &'static str,
        what: &'static str,
        probe: Box<dyn Fn() -> Probe + Send + Sync>,
    },
}

/// The runner of a server's background workers.
pub struct Workers {
    stop: watch::Sender<bool>,
    thread_stop: Arc<Stop>,
    list: Mutex<Vec<Kind>>,
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
            thread_stop: Arc::new(Stop::default()),
            list: Mutex::new(Vec::new()),
        }
    }

    /// Whether the workers were asked to stop.
    pub fn stopping(&self) -> bool {
        *self.stop.borrow()
    }

    /// Starts worker `name` (`what` says what it does): `run` is its loop,
    /// which waits through the [`Ctx`] it is given and returns once a wait
    /// says stop.
    pub fn spawn<F, Fut>(&self, name: &'static str, what: &'static str, run: F)
    where
        F: FnOnce(Ctx) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let cell = Cell::new(name, what);
        let ctx = Ctx {
            stop: self.stop.subscribe(),
            cell: cell.clone(),
        };
        let fut = run(ctx);
        let done = cell.clone();
        let handle = tokio::spawn(async move {
            use futures_util::FutureExt;
            // As for a thread: a panic ends it, done, with the panic as
            // its last error.
            if let Err(p) = std::panic::AssertUnwindSafe(fut).catch_unwind().await {
                done.failed(format!("the loop panicked: {}", panic_text(&*p)));
            }
            done.state.store(2, Ordering::Release);
        });
        self.push(Kind::Runs(cell, Some(Ends::Task(handle))));
    }

    /// Starts worker `name` as a thread of its own, for a loop that blocks
    /// (file I/O, CPU): `run` waits through its [`ThreadCtx`] and returns
    /// once a wait says stop.
    pub fn thread<F>(&self, name: &'static str, what: &'static str, run: F) -> std::io::Result<()>
    where
        F: FnOnce(ThreadCtx) + Send + 'static,
    {
        let cell = Cell::new(name, what);
        let ctx = ThreadCtx {
            stop: self.thread_stop.clone(),
            cell: cell.clone(),
        };
        let (tx, rx) = tokio::sync::oneshot::channel();
        let done = cell.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                // A panic ends the loop too: it is then done, with the
                // panic as its last error, not left "busy".
                if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(ctx)))
                {
                    done.failed(format!("the loop panicked: {}", panic_text(&*p)));
                }
                done.state.store(2, Ordering::Release);
                let _ = tx.send(());
            })?;
        self.push(Kind::Runs(cell, Some(Ends::Thread(rx))));
        Ok(())
    }

    /// Lists a loop its owner runs (a library's own thread, stopped when
    /// its owner closes) beside the workers: `probe` reads its counters.
    pub fn watch(
        &self,
        name: &'static str,
        what: &'static str,
        probe: impl Fn() -> Probe + Send + Sync + 'static,
    ) {
        self.push(Kind::Watched {
            name,
            what,
            probe: Box::new(probe),
        });
    }

    /// Records worker `name`'s throttle, in bytes per second, as its
    /// status and /metrics show it.
    pub fn limit(&self, name: &str, bytes_per_s: u64) {
        if let Ok(l) = self.list.lock() {
            for k in l.iter() {
                if let Kind::Runs(c, _) = k {
                    if c.name == name {
                        c.throttle.store(bytes_per_s, Ordering::Relaxed);
                    }
                }
            }
        }
    }

    fn push(&self, k: Kind) {
        if let Ok(mut l) = self.list.lock() {
            l.push(k);
        }
    }

    /// Every worker's status, in the order they were started.
    pub fn status(&self) -> Vec<WorkerStatus> {
        let Ok(l) = self.list.lock() else {
            return Vec::new();
        };
        l.iter()
            .map(|k| match k {
                Kind::Runs(c, _) => WorkerStatus {
                    name: c.name,
                    what: c.what,
                    state: State::from_u8(c.state.load(Ordering::Acquire)),
                    passes: c.passes.load(Ordering::Relaxed),
                    errors: c.errors.load(Ordering::Relaxed),
                    since_ms: c.since_ms.load(Ordering::Relaxed),
                    last_error: c.last_error.lock().ok().and_then(|g| g.clone()),
                    throttle_bytes_per_s: Some(c.throttle.load(Ordering::Relaxed))
                        .filter(|&t| t > 0),
                    owned_elsewhere: false,
                },
                Kind::Watched { name, what, probe } => {
                    let p = probe();
                    WorkerStatus {
                        name,
                        what,
                        state: if self.stopping() {
                            State::Done
                        } else {
                            State::Idle
                        },
                        passes: p.passes,
                        errors: p.errors,
                        since_ms: 0,
                        last_error: p.last_error,
                        throttle_bytes_per_s: None,
                        owned_elsewhere: true,
                    }
                }
            })
            .collect()
    }

    /// Asks every worker to stop at its next safe point and waits up to
    /// `deadline` for them; the names of those still running then, whose
    /// tasks are dropped.
    pub async fn stop(&self, deadline: Duration) -> Vec<&'static str> {
        // `send_replace`: `send` does nothing when no task subscribes.
        self.stop.send_replace(true);
        self.thread_stop.raise();
        let ends: Vec<(&'static str, Ends)> = match self.list.lock() {
            Ok(mut l) => l
                .iter_mut()
                .filter_map(|k| match k {
                    Kind::Runs(c, ends) => ends.take().map(|e| (c.name, e)),
                    Kind::Watched { .. } => None,
                })
                .collect(),
            Err(_) => Vec::new(),
        };
        let until = Instant::now() + deadline;
        let mut late = Vec::new();
        for (name, ends) in ends {
            let left = until.saturating_duration_since(Instant::now());
            match ends {
                Ends::Task(mut h) => {
                    if tokio::time::timeout(left, &mut h).await.is_err() {
                        h.abort();
                        late.push(name);
                    }
                }
                // A thread cannot be dropped: it is named, and left to end
                // at its next wait.
                Ends::Thread(rx) => {
                    if tokio::time::timeout(left, rx).await.is_err() {
                        late.push(name);
                    }
                }
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

    #[tokio::test]
    async fn thread_workers_stop_at_once_and_watched_loops_are_listed() {
        let w = Workers::new();
        let passes = Arc::new(AtomicU64::new(0));
        let p = passes.clone();
        w.thread("blocking", "sleeps long", move |mut ctx| {
            // A long sleep between passes: the stop must end it at once.
            while ctx.sleep(Duration::from_millis(if p.load(Ordering::Relaxed) == 0 {
                5
            } else {
                60_000
            })) {
                p.fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
        .unwrap();
        w.limit("blocking", 1 << 20);
        let seen = Arc::new(AtomicU64::new(7));
        let s = seen.clone();
        w.watch("owned", "kept by its owner", move || Probe {
            passes: s.load(Ordering::Relaxed),
            errors: 1,
            last_error: Some("disk full".into()),
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        let st = w.status();
        assert_eq!(st.len(), 2, "{st:?}");
        assert_eq!(st[0].passes, 1, "{st:?}");
        assert_eq!(st[0].state, State::Idle);
        assert_eq!(st[0].throttle_bytes_per_s, Some(1 << 20));
        assert!(!st[0].owned_elsewhere);
        assert_eq!(st[1].name, "owned");
        assert_eq!(st[1].passes, 7);
        assert_eq!(st[1].last_error.as_deref(), Some("disk full"));
        assert!(st[1].owned_elsewhere);
        assert_eq!(st[1].throttle_bytes_per_s, None);
        seen.store(9, Ordering::Relaxed);
        assert_eq!(w.status()[1].passes, 9, "a probe reads live counters");
        let t = Instant::now();
        let late = w.stop(Duration::from_secs(5)).await;
        assert!(late.is_empty(), "{late:?}");
        assert!(
            t.elapsed() < Duration::from_secs(2),
            "the stop ends a thread's sleep: {:?}",
            t.elapsed()
        );
        let st = w.status();
        assert_eq!(st[0].state, State::Done);
        assert_eq!(st[1].state, State::Done);
        assert!(w.stopping());
    }

    #[tokio::test]
    async fn a_worker_that_panics_is_done_with_the_panic_as_its_error() {
        let w = Workers::new();
        w.thread("fragile", "panics in its first pass", |mut ctx| {
            if ctx.sleep(Duration::from_millis(1)) {
                panic!("segment 7 vanished");
            }
        })
        .unwrap();
        w.spawn(
            "fragile-task",
            "panics in its first pass",
            |mut ctx| async move {
                if ctx.sleep(Duration::from_millis(1)).await {
                    panic!("row {} vanished", 3);
                }
            },
        );
        let t = Instant::now();
        while w.status().iter().any(|s| s.state != State::Done)
            && t.elapsed() < Duration::from_secs(5)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for (st, said) in w
            .status()
            .iter()
            .zip(["segment 7 vanished", "row 3 vanished"])
        {
            assert_eq!(st.state, State::Done, "{st:?}");
            assert_eq!(st.errors, 1);
            assert!(
                st.last_error.as_deref().is_some_and(|e| e.contains(said)),
                "{st:?}"
            );
        }
        assert!(w.stop(Duration::from_secs(1)).await.is_empty());
    }
}
