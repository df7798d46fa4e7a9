//! Sampled request traces in the lab's format (Strata's binary trace
//! format, docs/trace-format.md), with the tier that served each read and
//! its latency, in rotating files.
//!
//! Sampling is by object (a hash of the object key below the rate), as
//! Janus samples files for LRU ages: every request to a sampled object is
//! recorded, so the lab sees each sampled object's creation and every read
//! of it and scales counts back by the rate. Records go through a bounded
//! channel to a writer thread; when it falls behind, records are dropped and
//! counted (`strata_trace_dropped_total`), never blocking a request.
//!
//! Files are written through `strata_trace::Writer` as
//! `trace-<start ms>-<seq>.strace.part` and renamed to `.strace` once
//! finished (end frame written, fsynced): when they reach the rotation's
//! record count or age, on a flush, and on shutdown. Every file starts with
//! the node's workload names table. The writer emits a checksummed frame
//! every [`FRAME_RECORDS`] records straight to the file, so a node killed
//! mid-file leaves a `.part` whose complete frames are intact; the next
//! start finishes it ([`salvage`]): the records of its complete frames are
//! written into a finished `.strace`, the torn tail is dropped.

use crate::metrics::{Metrics, Served};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use strata_trace::{Op, Request, Tier, Writer, WriterOptions};

/// Records per frame of a trace file: the most a node killed mid-file loses.
pub const FRAME_RECORDS: u32 = 1024;

/// The suffix of a finished trace file.
pub const TRACE_SUFFIX: &str = ".strace";

/// The suffix of a trace file being written.
pub const PART_SUFFIX: &str = ".strace.part";

enum Msg {
    Rec(Box<Request>),
    Name(u32, String),
    Flush(std::sync::mpsc::Sender<std::io::Result<()>>),
}

/// How a node traces.
#[derive(Clone, Debug)]
pub struct TraceConfig {
    /// Fraction of objects whose requests are traced.
    pub rate: f64,
    /// Records per file before it rotates.
    pub rotate_records: u64,
    /// Seconds a file stays open before it rotates (also bounds how much
    /// a crash can leave unfinished).
    pub rotate_after: Duration,
}

/// The trace writer of a node.
pub struct Tracer {
    tx: SyncSender<Msg>,
    threshold: u64,
    metrics: Arc<Metrics>,
}

fn now_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// Whether object `key` is sampled at `rate`.
pub fn sampled(key: u64, rate: f64) -> bool {
    if rate >= 1.0 {
        return true;
    }
    let h = key.wrapping_mul(0xD6E8_FEB8_6659_FD93) ^ (key >> 29);
    ((h >> 11) as f64) < rate * (1u64 << 53) as f64
}

impl Tracer {
    /// Starts the writer with `cfg`, first finishing the files a previous
    /// run left unfinished in `dir` ([`salvage`]).
    pub fn start_with(
        dir: &Path,
        cfg: &TraceConfig,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Tracer> {
        strata_fs::create_dir_all(dir)?;
        salvage(dir);
        let (tx, rx) = sync_channel(1 << 16);
        let dir = dir.to_path_buf();
        let m = metrics.clone();
        let rotate = cfg.rotate_records.max(1);
        let after = cfg.rotate_after.max(Duration::from_millis(100));
        std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || writer(dir, rx, rotate, after, m))?;
        Ok(Tracer {
            tx,
            threshold: cfg.rate.clamp(0.0, 1.0).to_bits(),
            metrics,
        })
    }

    fn rate(&self) -> f64 {
        f64::from_bits(self.threshold)
    }

    fn send(&self, r: Request) {
        match self.tx.try_send(Msg::Rec(Box::new(r))) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.metrics.trace_dropped.fetch_add(1, Relaxed);
            }
        }
    }

    /// Names workload `id` in the workload names table of every file from
    /// now on.
    pub fn name_workload(&self, id: u32, name: &str) {
        // Blocking: a name must not be lost (it is sent once per workload).
        let _ = self.tx.send(Msg::Name(id, name.to_string()));
    }

    /// Records a write.
    pub fn put(&self, key: u64, workload: u32, size: u64, created_s: f64, latency_us: u64) {
        if !sampled(key, self.rate()) {
            return;
        }
        let mut r = Request::new(now_s(), Op::Put, key, workload, size);
        r.create_time = Some(created_s);
        r.latency_us = Some(latency_us.min(u32::MAX as u64) as u32);
        self.send(r);
    }

    /// Records a read served from `served`.
    #[allow(clippy::too_many_arguments)]
    pub fn get(
        &self,
        key: u64,
        workload: u32,
        size: u64,
        created_s: f64,
        served: Served,
        latency_us: u64,
        range: Option<(u64, u64)>,
    ) {
        if !sampled(key, self.rate()) {
            return;
        }
        let mut r = Request::new(now_s(), Op::Get, key, workload, size);
        r.create_time = Some(created_s);
        r.tier = Some(match served {
            Served::Ram => Tier::Ram,
            Served::Flash | Served::FlashCache => Tier::Flash,
            Served::Disk => Tier::Disk,
        });
        r.latency_us = Some(latency_us.min(u32::MAX as u64) as u32);
        if let Some((a, b)) = range {
            r.offset = Some(a);
            r.length = Some(b.saturating_sub(a));
        }
        self.send(r);
    }

    /// Records a delete.
    pub fn delete(&self, key: u64, workload: u32) {
        if !sampled(key, self.rate()) {
            return;
        }
        self.send(Request::new(now_s(), Op::Delete, key, workload, 0));
    }

    /// Finishes the current file (the next record starts a new one);
    /// returns once it is durable under its final name. An error says
    /// records the writer took since the last flush were lost (a file not
    /// opened, written or finished; the first error is returned, the
    /// records are counted in `strata_trace_dropped_total`); records
    /// dropped because the writer fell behind are only counted.
    pub fn flush(&self) -> std::io::Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.tx
            .send(Msg::Flush(tx))
            .map_err(|_| std::io::Error::other("the trace writer has stopped"))?;
        rx.recv()
            .map_err(|_| std::io::Error::other("the trace writer has stopped"))?
    }
}

struct Current {
    part: PathBuf,
    done: PathBuf,
    out: Writer<strata_fs::Appender>,
    opened: Instant,
}

fn options() -> WriterOptions {
    WriterOptions {
        block_records: FRAME_RECORDS,
        ..WriterOptions::default()
    }
}

/// Finishes `cur`: end frame, fsync, rename to its final name.
fn close(cur: Option<Current>, metrics: &Metrics) -> std::io::Result<()> {
    let Some(c) = cur else {
        return Ok(());
    };
    // The part file's creation and its rename are made durable with the
    // rename: a finished trace file survives a power cut.
    let records = c.out.records();
    let res = c
        .out
        .finish()
        .and_then(|a| strata_fs::sync_all(a.file()))
        .and_then(|()| strata_fs::rename_durable(&c.part, &c.done));
    if res.is_err() {
        metrics.trace_dropped.fetch_add(records, Relaxed);
    }
    res
}

fn open(
    dir: &Path,
    base: &str,
    names: &BTreeMap<u32, String>,
) -> std::io::Result<(PathBuf, PathBuf, Writer<strata_fs::Appender>)> {
    let part = dir.join(format!("{base}{PART_SUFFIX}"));
    let done = dir.join(format!("{base}{TRACE_SUFFIX}"));
    let f = strata_fs::Appender::new(strata_fs::create(&part)?, 0);
    let mut out = Writer::with_options(f, options())?;
    for (id, n) in names {
        out.name_workload(*id, n)?;
    }
    Ok((part, done, out))
}

/// The first error that lost records since the last flush.
#[derive(Default)]
struct Lost(Option<std::io::Error>);

impl Lost {
    fn note(&mut self, r: std::io::Result<()>) {
        if let (None, Err(e)) = (&self.0, r) {
            self.0 = Some(e);
        }
    }

    fn take(&mut self) -> std::io::Result<()> {
        self.0.take().map_or(Ok(()), Err)
    }
}

fn writer(dir: PathBuf, rx: Receiver<Msg>, rotate: u64, after: Duration, metrics: Arc<Metrics>) {
    let mut cur: Option<Current> = None;
    let mut names: BTreeMap<u32, String> = BTreeMap::new();
    let mut seq = 0u64;
    let mut lost = Lost::default();
    let start = (now_s() * 1000.0) as u64;
    loop {
        let wait = cur.as_ref().map_or(Duration::from_secs(3600), |c| {
            after.saturating_sub(c.opened.elapsed())
        });
        let msg = match rx.recv_timeout(wait.max(Duration::from_millis(1))) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                if cur.as_ref().is_some_and(|c| c.opened.elapsed() >= after) {
                    lost.note(close(cur.take(), &metrics));
                }
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        match msg {
            Msg::Flush(ack) => {
                lost.note(close(cur.take(), &metrics));
                let _ = ack.send(lost.take());
            }
            Msg::Name(id, name) => {
                if names.get(&id) != Some(&name) {
                    if let Some(c) = cur.as_mut() {
                        if let Err(e) = c.out.name_workload(id, &name) {
                            metrics.trace_dropped.fetch_add(1, Relaxed);
                            lost.note(Err(e));
                        }
                    }
                    names.insert(id, name);
                }
            }
            Msg::Rec(r) => {
                if cur.is_none() {
                    seq += 1;
                    let base = format!("trace-{start}-{seq:06}");
                    match open(&dir, &base, &names) {
                        Ok((part, done, out)) => {
                            cur = Some(Current {
                                part,
                                done,
                                out,
                                opened: Instant::now(),
                            });
                            metrics.trace_files.fetch_add(1, Relaxed);
                        }
                        Err(e) => {
                            metrics.trace_dropped.fetch_add(1, Relaxed);
                            lost.note(Err(e));
                            continue;
                        }
                    }
                }
                if let Some(c) = cur.as_mut() {
                    match c.out.write(&r) {
                        Ok(()) => {
                            metrics.trace_records.fetch_add(1, Relaxed);
                        }
                        Err(e) => {
                            metrics.trace_dropped.fetch_add(1, Relaxed);
                            lost.note(Err(e));
                        }
                    }
                    if c.out.records() >= rotate || c.opened.elapsed() >= after {
                        lost.note(close(cur.take(), &metrics));
                    }
                }
            }
        }
    }
    let _ = close(cur, &metrics);
}

/// What [`salvage`] did with one unfinished file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Salvaged {
    /// The finished file (`None` when nothing in it was complete; the
    /// unfinished file is removed then).
    pub file: Option<PathBuf>,
    /// Records recovered.
    pub records: u64,
}

/// Finishes every `*.strace.part` file in `dir` (left by a node that was
/// killed): the records of its complete frames are written, with its
/// workload names, into the file's final `.strace` name (end frame,
/// fsync); the unfinished file is removed. A part file with no complete
/// frame is removed.
pub fn salvage(dir: &Path) -> Vec<Salvaged> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut parts: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.to_string_lossy().ends_with(PART_SUFFIX))
        .collect();
    parts.sort();
    parts.iter().filter_map(|p| salvage_one(p).ok()).collect()
}

fn salvage_one(part: &Path) -> std::io::Result<Salvaged> {
    let s = part.to_string_lossy();
    let done = PathBuf::from(format!(
        "{}{TRACE_SUFFIX}",
        &s[..s.len() - PART_SUFFIX.len()]
    ));
    // First pass: how many records are readable, and the names they use.
    let (count, names) = match strata_trace::open(part) {
        Ok(mut r) => {
            let n = r.by_ref().take_while(|x| x.is_ok()).count() as u64;
            (n, r.workload_names().to_vec())
        }
        Err(_) => (0, Vec::new()),
    };
    if count == 0 {
        strata_fs::remove_file(part)?;
        return Ok(Salvaged {
            file: None,
            records: 0,
        });
    }
    let tmp = PathBuf::from(format!("{s}.salvage"));
    let f = strata_fs::Appender::new(strata_fs::create(&tmp)?, 0);
    let mut out = Writer::with_options(f, options())?;
    for (id, n) in names.iter().enumerate() {
        if !n.is_empty() {
            out.name_workload(id as u32, n)?;
        }
    }
    let reader = strata_trace::open(part).map_err(std::io::Error::other)?;
    for r in reader.take(count as usize) {
        let r = r.map_err(std::io::Error::other)?;
        out.write(&r)?;
    }
    strata_fs::sync_all(out.finish()?.file())?;
    strata_fs::rename(&tmp, &done)?;
    strata_fs::remove_file_durable(part)?;
    Ok(Salvaged {
        file: Some(done),
        records: count,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_rate_is_close() {
        let n = 200_000u64;
        let hit = (0..n)
            .map(|i| i.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .filter(|k| sampled(*k, 0.1))
            .count() as f64;
        assert!((hit / n as f64 - 0.1).abs() < 0.005, "{hit}");
        assert!(sampled(12345, 1.0));
        assert!(!(0..1000u64).any(|k| sampled(k, 0.0)));
    }

    fn files(d: &Path) -> Vec<String> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn rotates_into_finished_binary_files_with_names() {
        let d = tempfile::tempdir().unwrap();
        let m = Arc::new(Metrics::default());
        let cfg = TraceConfig {
            rate: 1.0,
            rotate_records: 3,
            rotate_after: Duration::from_secs(60),
        };
        let t = Tracer::start_with(d.path(), &cfg, m.clone()).unwrap();
        t.name_workload(1, "photos");
        for k in 0..7 {
            t.put(k, 1, 10, 1.5, 5);
        }
        t.get(3, 1, 10, 1.5, Served::FlashCache, 77, Some((2, 6)));
        t.flush().unwrap();
        let names = files(d.path());
        assert_eq!(names.len(), 3, "{names:?}");
        assert!(names.iter().all(|f| f.ends_with(TRACE_SUFFIX)));
        let mut all = Vec::new();
        for f in &names {
            let mut r = strata_trace::open(d.path().join(f)).unwrap();
            assert_eq!(r.format(), strata_trace::Format::Strata);
            let recs: Vec<Request> = r.by_ref().map(|x| x.unwrap()).collect();
            assert_eq!(
                r.workload_names().get(1).map(String::as_str),
                Some("photos")
            );
            all.extend(recs);
        }
        assert_eq!(all.len(), 8);
        assert_eq!(m.trace_records.load(Relaxed), 8);
        let g = all.last().unwrap();
        assert_eq!(g.op, Op::Get);
        assert_eq!(g.tier, Some(Tier::Flash));
        assert_eq!(g.latency_us, Some(77));
        assert_eq!((g.offset, g.length), (Some(2), Some(4)));
        assert_eq!(g.create_time, Some(1.5));
        assert_eq!(all[0].op, Op::Put);
        assert_eq!(all[0].tier, None);
    }

    #[test]
    fn rotates_by_age() {
        let d = tempfile::tempdir().unwrap();
        let m = Arc::new(Metrics::default());
        let cfg = TraceConfig {
            rate: 1.0,
            rotate_records: 1_000_000,
            rotate_after: Duration::from_millis(200),
        };
        let t = Tracer::start_with(d.path(), &cfg, m).unwrap();
        t.put(1, 1, 10, 0.0, 5);
        std::thread::sleep(Duration::from_millis(600));
        // Finished by age, without a flush.
        let names = files(d.path());
        assert_eq!(names.len(), 1, "{names:?}");
        assert!(names[0].ends_with(TRACE_SUFFIX), "{names:?}");
        drop(t);
    }

    /// A node's trace life — the salvage of a file a killed run left
    /// unfinished, then three rotations — with the power cut after each
    /// file operation in turn, then the next start's salvage: every
    /// finished file reads whole, the left file's complete frames are there
    /// once, and so is every record of a rotation that had finished.
    #[test]
    #[allow(clippy::disallowed_methods)] // the left file and acknowledgements
    fn finished_trace_files_survive_a_power_cut_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let scratch = tempfile::tempdir().unwrap();
        let left = 2 * FRAME_RECORDS as u64;
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                scratch.path(),
                how,
                |root| {
                    let d = root.join("traces");
                    std::fs::create_dir_all(&d).unwrap();
                    let part = d.join(format!("trace-1-000001{PART_SUFFIX}"));
                    let f = std::fs::File::create(&part).unwrap();
                    let mut w = Writer::with_options(f, options()).unwrap();
                    for k in 0..left + 10 {
                        w.write(&Request::new(k as f64, Op::Put, k, 2, 100))
                            .unwrap();
                    }
                    // Killed: no end frame, the last 10 records unwritten.
                    std::mem::forget(w);
                },
                |root| {
                    let cfg = TraceConfig {
                        rate: 1.0,
                        rotate_records: 1_000,
                        rotate_after: Duration::from_secs(3600),
                    };
                    let m = Arc::new(Metrics::default());
                    let t = Tracer::start_with(&root.join("traces"), &cfg, m)?;
                    for batch in 1..=3u64 {
                        for i in 0..5 {
                            t.put(1_000_000 * batch + i, 1, 10, 0.0, 5);
                        }
                        if t.flush().is_err() {
                            continue;
                        }
                        std::fs::write(root.join(format!("ack-{batch}")), b"")?;
                    }
                    Ok(())
                },
                |root, n| {
                    let d = root.join("traces");
                    salvage(&d);
                    let mut seen = std::collections::HashMap::<u64, u32>::new();
                    for f in files(&d) {
                        assert!(f.ends_with(TRACE_SUFFIX), "{how:?} step {n}: {f} is left");
                        let mut r = strata_trace::open(d.join(&f)).unwrap();
                        for x in r.by_ref() {
                            let x = x.unwrap_or_else(|e| {
                                panic!("{how:?} step {n}: {f} does not read whole: {e}")
                            });
                            *seen.entry(x.object).or_default() += 1;
                        }
                    }
                    for k in 0..left {
                        assert_eq!(seen.get(&k), Some(&1), "{how:?} step {n}: left record {k}");
                    }
                    for batch in 1..=3u64 {
                        if root.join(format!("ack-{batch}")).exists() {
                            for i in 0..5 {
                                let k = 1_000_000 * batch + i;
                                assert_eq!(seen.get(&k), Some(&1), "{how:?} step {n}: {k}");
                            }
                        }
                    }
                    assert!(
                        seen.values().all(|&c| c == 1),
                        "{how:?} step {n}: a duplicate"
                    );
                },
            )
            .unwrap();
            assert!(steps > 12, "{how:?}: {steps} steps");
        }
    }

    #[test]
    #[allow(clippy::disallowed_methods)] // a file left as a killed run leaves it
    fn salvage_keeps_complete_frames_of_a_torn_file() {
        let d = tempfile::tempdir().unwrap();
        let part = d.path().join(format!("trace-1-000001{PART_SUFFIX}"));
        // A writer that died: 2.5 frames written, no end frame.
        let f = std::fs::File::create(&part).unwrap();
        let mut w = Writer::with_options(f, options()).unwrap();
        w.name_workload(2, "logs").unwrap();
        let n = FRAME_RECORDS as u64 * 5 / 2;
        for k in 0..n {
            w.write(&Request::new(k as f64, Op::Put, k, 2, 100))
                .unwrap();
        }
        drop(w);
        // Plus a torn partial frame header at the tail.
        use std::io::Write;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&part)
            .unwrap()
            .write_all(&[1, 0, 0])
            .unwrap();
        let got = salvage(d.path());
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].records, 2 * FRAME_RECORDS as u64);
        let file = got[0].file.clone().unwrap();
        assert!(!part.exists());
        let mut r = strata_trace::open(&file).unwrap();
        let recs: Vec<Request> = r.by_ref().map(|x| x.unwrap()).collect();
        assert_eq!(recs.len() as u64, 2 * FRAME_RECORDS as u64);
        assert!(recs.iter().enumerate().all(|(i, x)| x.object == i as u64));
        assert_eq!(r.workload_names().get(2).map(String::as_str), Some("logs"));
        // A part file with nothing complete is removed.
        std::fs::write(&part, b"STRT").unwrap();
        let got = salvage(d.path());
        assert_eq!(
            got,
            vec![Salvaged {
                file: None,
                records: 0
            }]
        );
        assert!(!part.exists());
    }
}
