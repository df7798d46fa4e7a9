//! Sampled request traces in the lab's format, with the tier that served
//! each read and its latency, in rotating files.
//!
//! Sampling is by object (a hash of the object key below the rate), as
//! Janus samples files for LRU ages: every request to a sampled object is
//! recorded, so the lab sees each sampled object's creation and every read
//! of it and scales counts back by the rate. Records go through a bounded
//! channel to a writer thread; when it falls behind, records are dropped and
//! counted (`strata_trace_dropped_total`), never blocking a request.
//!
//! Files are Strata CSV (`time,op,object,size,workload,create_time,tier,
//! latency_us,offset,length`), which every lab command reads; a file is
//! written as `*.csv.part` and renamed to `*.csv` when it rotates or is
//! flushed, so a reader never sees a half-written file.

use crate::metrics::{Metrics, Served};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The header row of a trace file.
pub const TRACE_HEADER: &str =
    "time,op,object,size,workload,create_time,tier,latency_us,offset,length";

enum Msg {
    Rec(String),
    Flush(std::sync::mpsc::Sender<()>),
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
    /// Starts writing traces of a `rate` sample of objects into `dir`,
    /// rotating every `rotate` records.
    pub fn start(
        dir: &Path,
        rate: f64,
        rotate: u64,
        metrics: Arc<Metrics>,
    ) -> std::io::Result<Tracer> {
        std::fs::create_dir_all(dir)?;
        let (tx, rx) = sync_channel(1 << 16);
        let dir = dir.to_path_buf();
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("trace-writer".into())
            .spawn(move || writer(dir, rx, rotate.max(1), m))?;
        Ok(Tracer {
            tx,
            threshold: rate.clamp(0.0, 1.0).to_bits(),
            metrics,
        })
    }

    fn rate(&self) -> f64 {
        f64::from_bits(self.threshold)
    }

    fn send(&self, line: String) {
        match self.tx.try_send(Msg::Rec(line)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.metrics.trace_dropped.fetch_add(1, Relaxed);
            }
        }
    }

    /// Records a write.
    pub fn put(&self, key: u64, workload: u32, size: u64, created_s: f64, latency_us: u64) {
        if !sampled(key, self.rate()) {
            return;
        }
        self.send(format!(
            "{:.6},put,{key},{size},{workload},{created_s:.6},,{latency_us},,\n",
            now_s()
        ));
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
        let tier = match served {
            Served::Ram => "ram",
            Served::Flash | Served::FlashCache => "flash",
            Served::Disk => "disk",
        };
        let (off, len) = match range {
            Some((a, b)) => (a.to_string(), (b - a).to_string()),
            None => (String::new(), String::new()),
        };
        self.send(format!(
            "{:.6},get,{key},{size},{workload},{created_s:.6},{tier},{latency_us},{off},{len}\n",
            now_s()
        ));
    }

    /// Records a delete.
    pub fn delete(&self, key: u64, workload: u32) {
        if !sampled(key, self.rate()) {
            return;
        }
        self.send(format!("{:.6},delete,{key},0,{workload},,,,,\n", now_s()));
    }

    /// Writes out and closes the current file (the next record starts a new
    /// one); returns once done.
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::channel();
        if self.tx.send(Msg::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

struct Current {
    part: PathBuf,
    done: PathBuf,
    out: std::io::BufWriter<std::fs::File>,
    records: u64,
}

fn close(cur: Option<Current>) {
    if let Some(mut c) = cur {
        let _ = c.out.flush();
        let _ = c.out.get_ref().sync_data();
        let _ = std::fs::rename(&c.part, &c.done);
    }
}

fn writer(dir: PathBuf, rx: Receiver<Msg>, rotate: u64, metrics: Arc<Metrics>) {
    let mut cur: Option<Current> = None;
    let mut seq = 0u64;
    let start = (now_s() * 1000.0) as u64;
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Flush(ack) => {
                close(cur.take());
                let _ = ack.send(());
            }
            Msg::Rec(line) => {
                if cur.is_none() {
                    seq += 1;
                    let base = format!("trace-{start}-{seq:06}.csv");
                    let part = dir.join(format!("{base}.part"));
                    match std::fs::File::create(&part) {
                        Ok(f) => {
                            let mut out = std::io::BufWriter::with_capacity(1 << 16, f);
                            let _ = writeln!(out, "{TRACE_HEADER}");
                            cur = Some(Current {
                                part,
                                done: dir.join(base),
                                out,
                                records: 0,
                            });
                            metrics.trace_files.fetch_add(1, Relaxed);
                        }
                        Err(_) => {
                            metrics.trace_dropped.fetch_add(1, Relaxed);
                            continue;
                        }
                    }
                }
                if let Some(c) = cur.as_mut() {
                    if c.out.write_all(line.as_bytes()).is_ok() {
                        c.records += 1;
                        metrics.trace_records.fetch_add(1, Relaxed);
                    } else {
                        metrics.trace_dropped.fetch_add(1, Relaxed);
                    }
                    if c.records >= rotate {
                        close(cur.take());
                    }
                }
            }
        }
    }
    close(cur);
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

    #[test]
    fn rotates_and_renames() {
        let d = tempfile::tempdir().unwrap();
        let m = Arc::new(Metrics::default());
        let t = Tracer::start(d.path(), 1.0, 3, m.clone()).unwrap();
        for k in 0..7 {
            t.put(k, 1, 10, 0.0, 5);
        }
        t.flush();
        let mut files: Vec<_> = std::fs::read_dir(d.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        files.sort();
        assert_eq!(files.len(), 3, "{files:?}");
        assert!(files.iter().all(|f| f.ends_with(".csv")));
        let first = std::fs::read_to_string(d.path().join(&files[0])).unwrap();
        assert_eq!(first.lines().count(), 4);
        assert_eq!(first.lines().next(), Some(TRACE_HEADER));
        assert_eq!(m.trace_records.load(Relaxed), 7);
    }
}
