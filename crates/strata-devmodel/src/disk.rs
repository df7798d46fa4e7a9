//! One disk: the study's seek model and its per-disk scheduler.
//!
//! Requests to different files are far apart and pay a full seek; requests
//! in the same file pay `min(seek, distance / bandwidth)`, so an adjacent
//! request pays nothing. Transfer runs at the configured bandwidth. The
//! scheduler rotates between the files that have requests waiting, giving
//! each a slice of (by default) 1 MiB, and serves the requests of the file
//! it is on in C-SCAN order: ascending offsets from the head, then wrapping
//! to the lowest waiting offset.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// What kind of work an I/O is, for latency accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum IoClass {
    /// A read a user waits for (a trace GET that missed the caches).
    ForegroundRead,
    /// Appending written needles to a segment or log (a trace PUT).
    Log,
    /// Writing a sealed segment out of the combined log (combined logging).
    Flush,
    /// Reading and rewriting live needles during compaction.
    Compaction,
    /// Moving needles out of the flash write buffer to disk.
    Destage,
}

impl IoClass {
    /// Every class, in report order.
    pub const ALL: [IoClass; 5] = [
        IoClass::ForegroundRead,
        IoClass::Log,
        IoClass::Flush,
        IoClass::Compaction,
        IoClass::Destage,
    ];

    /// The name used in tables and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            IoClass::ForegroundRead => "foreground-read",
            IoClass::Log => "log",
            IoClass::Flush => "flush",
            IoClass::Compaction => "compaction",
            IoClass::Destage => "destage",
        }
    }

    /// Whether a user request waits on this class.
    pub fn is_foreground(self) -> bool {
        matches!(self, IoClass::ForegroundRead)
    }
}

/// The performance of one disk.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct DiskParams {
    /// Seek time between files, in seconds (the study: 10 ms).
    pub seek_s: f64,
    /// Transfer rate in bytes per second (the study: 100 MB/s).
    pub bandwidth: f64,
    /// Bytes the scheduler serves from one file before rotating (1 MiB).
    pub slice_bytes: u64,
}

impl Default for DiskParams {
    fn default() -> Self {
        DiskParams {
            seek_s: 0.010,
            bandwidth: 100e6,
            slice_bytes: 1 << 20,
        }
    }
}

/// One request to a disk.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DiskRequest {
    /// Caller's id, returned in the completion.
    pub id: u64,
    /// Arrival time in seconds.
    pub arrival: f64,
    /// The local file the request touches.
    pub file: u64,
    /// Byte offset in the file.
    pub offset: u64,
    /// Bytes transferred.
    pub len: u64,
    /// What the I/O is for.
    pub class: IoClass,
    /// A write (true) or a read.
    pub write: bool,
}

/// A served request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Completion {
    /// The request.
    pub request: DiskRequest,
    /// When the disk started it (seconds).
    pub start: f64,
    /// Positioning time it paid (seconds).
    pub seek: f64,
    /// When it finished (seconds).
    pub finish: f64,
}

impl Completion {
    /// Queueing plus service time.
    pub fn latency(&self) -> f64 {
        self.finish - self.request.arrival
    }
}

/// A disk with its scheduler and queue.
#[derive(Debug)]
pub struct Disk {
    params: DiskParams,
    free_at: f64,
    head: Option<(u64, u64)>,
    pending: HashMap<u64, BTreeMap<(u64, u64), DiskRequest>>,
    rotation: VecDeque<u64>,
    current: Option<u64>,
    slice_used: u64,
    seq: u64,
    queued: usize,
    busy: f64,
}

impl Disk {
    /// An idle disk with its head nowhere in particular.
    pub fn new(params: DiskParams) -> Disk {
        Disk {
            params,
            free_at: 0.0,
            head: None,
            pending: HashMap::new(),
            rotation: VecDeque::new(),
            current: None,
            slice_used: 0,
            seq: 0,
            queued: 0,
            busy: 0.0,
        }
    }

    /// The disk's parameters.
    pub fn params(&self) -> &DiskParams {
        &self.params
    }

    /// Requests waiting.
    pub fn queued(&self) -> usize {
        self.queued
    }

    /// Seconds the disk spent seeking and transferring.
    pub fn busy_seconds(&self) -> f64 {
        self.busy
    }

    /// Queues a request. Call [`Disk::advance`] with its arrival time first,
    /// so that the disk has served everything it could before it arrived.
    pub fn submit(&mut self, request: DiskRequest) {
        let seq = self.seq;
        self.seq += 1;
        let q = self.pending.entry(request.file).or_default();
        let was_empty = q.is_empty();
        q.insert((request.offset, seq), request);
        self.queued += 1;
        if was_empty && self.current != Some(request.file) {
            self.rotation.push_back(request.file);
        }
    }

    /// Serves queued requests that the disk can start before `until`,
    /// passing each completion to `done`.
    pub fn advance(&mut self, until: f64, done: &mut impl FnMut(Completion)) {
        while self.queued > 0 && self.free_at < until {
            let Some(req) = self.pick() else { break };
            done(self.serve(req));
        }
    }

    /// Serves everything still queued.
    pub fn drain(&mut self, done: &mut impl FnMut(Completion)) {
        self.advance(f64::INFINITY, done);
    }

    /// The scheduler: stay on the current file while its slice lasts and it
    /// has requests (C-SCAN among them), else rotate to the next file.
    fn pick(&mut self) -> Option<DiskRequest> {
        let stay = match self.current {
            Some(f) => {
                self.slice_used < self.params.slice_bytes
                    && self.pending.get(&f).is_some_and(|q| !q.is_empty())
            }
            None => false,
        };
        if !stay {
            if let Some(f) = self.current.take() {
                if self.pending.get(&f).is_some_and(|q| !q.is_empty()) {
                    self.rotation.push_back(f);
                }
            }
            let next = self.rotation.pop_front()?;
            self.current = Some(next);
            self.slice_used = 0;
        }
        let file = self.current?;
        let head_pos = match self.head {
            Some((hf, pos)) if hf == file => pos,
            _ => 0,
        };
        let q = self.pending.get_mut(&file)?;
        let key = q
            .range((head_pos, 0)..)
            .next()
            .map(|(k, _)| *k)
            .or_else(|| q.keys().next().copied())?;
        let req = q.remove(&key)?;
        if q.is_empty() {
            self.pending.remove(&file);
        }
        self.queued -= 1;
        Some(req)
    }

    fn serve(&mut self, req: DiskRequest) -> Completion {
        let bw = self.params.bandwidth;
        let seek = match self.head {
            Some((f, pos)) if f == req.file => {
                let distance = pos.abs_diff(req.offset) as f64;
                (distance / bw).min(self.params.seek_s)
            }
            _ => self.params.seek_s,
        };
        let transfer = req.len as f64 / bw;
        let start = self.free_at.max(req.arrival);
        let finish = start + seek + transfer;
        self.free_at = finish;
        self.busy += seek + transfer;
        self.head = Some((req.file, req.offset + req.len));
        self.slice_used += req.len.max(1);
        Completion {
            request: req,
            start,
            seek,
            finish,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(id: u64, arrival: f64, file: u64, offset: u64, len: u64) -> DiskRequest {
        DiskRequest {
            id,
            arrival,
            file,
            offset,
            len,
            class: IoClass::ForegroundRead,
            write: false,
        }
    }

    fn run(disk: &mut Disk, reqs: &[DiskRequest]) -> Vec<Completion> {
        let mut out = Vec::new();
        for r in reqs {
            disk.advance(r.arrival, &mut |c| out.push(c));
            disk.submit(*r);
        }
        disk.drain(&mut |c| out.push(c));
        out
    }

    #[test]
    fn sequential_reads_in_a_file_run_at_the_configured_bandwidth() {
        for bw in [50e6, 100e6, 250e6] {
            let params = DiskParams {
                bandwidth: bw,
                ..DiskParams::default()
            };
            let mut disk = Disk::new(params);
            let len = 256 * 1024;
            // A closed-loop reader: each read arrives when the previous ends.
            let mut out = Vec::new();
            let mut t = 0.0;
            for i in 0..400u64 {
                disk.advance(t, &mut |c| out.push(c));
                disk.submit(req(i, t, 7, i * len, len));
                disk.drain(&mut |c| out.push(c));
                t = out.last().map(|c| c.finish).unwrap_or(t);
            }
            assert_eq!(out.len(), 400);
            // The first read seeks to the file; every later one is adjacent.
            assert_eq!(out[0].seek, params.seek_s);
            assert!(out[1..].iter().all(|c| c.seek == 0.0));
            let bytes = 399.0 * len as f64;
            let secs = out[399].finish - out[0].finish;
            let rate = bytes / secs;
            assert!((rate - bw).abs() / bw < 1e-9, "rate {rate} vs {bw}");
        }
    }

    #[test]
    fn alternating_files_pay_the_seek() {
        let params = DiskParams::default();
        let mut disk = Disk::new(params);
        let len = 4096;
        // Arrivals far apart so that nothing queues: the scheduler cannot
        // batch, and every request switches file.
        let reqs: Vec<_> = (0..100u64)
            .map(|i| req(i, i as f64, i % 2, (i / 2) * len, len))
            .collect();
        let out = run(&mut disk, &reqs);
        for c in &out {
            assert_eq!(c.seek, params.seek_s);
            let service = c.finish - c.start;
            let want = params.seek_s + len as f64 / params.bandwidth;
            assert!((service - want).abs() < 1e-12);
        }
        // The same reads all in one file pay (almost) nothing to position.
        let mut disk = Disk::new(params);
        let reqs: Vec<_> = (0..100u64)
            .map(|i| req(i, i as f64, 0, i * len, len))
            .collect();
        let out = run(&mut disk, &reqs);
        assert!(out[1..].iter().all(|c| c.seek == 0.0));
    }

    #[test]
    fn seek_within_a_file_is_distance_over_bandwidth_capped() {
        let params = DiskParams::default();
        let mut disk = Disk::new(params);
        let near = 100_000; // 1 ms at 100 MB/s
        let far = 10_000_000_000; // 100 s at 100 MB/s: capped at 10 ms
        let reqs = [
            req(0, 0.0, 3, 0, 1000),
            req(1, 1.0, 3, 1000 + near, 1000),
            req(2, 2.0, 3, far, 1000),
        ];
        let out = run(&mut disk, &reqs);
        assert_eq!(out[0].seek, params.seek_s);
        assert!((out[1].seek - 0.001).abs() < 1e-12);
        assert_eq!(out[2].seek, params.seek_s);
    }

    #[test]
    fn c_scan_order_is_respected() {
        let params = DiskParams::default();
        let mut disk = Disk::new(params);
        let k = 1 << 12;
        // The first request puts the head at offset 41k; while it is being
        // served, five more arrive for the same file.
        let mut reqs = vec![req(0, 0.0, 1, 40 * k, k)];
        for (i, off) in [50u64, 10, 70, 30, 90].iter().enumerate() {
            reqs.push(req(i as u64 + 1, 0.001, 1, off * k, k));
        }
        let out = run(&mut disk, &reqs);
        let order: Vec<u64> = out.iter().map(|c| c.request.offset / k).collect();
        // Ascending from the head, then wrap to the lowest: never backwards
        // in between, as plain SCAN or SSTF would go.
        assert_eq!(order, vec![40, 50, 70, 90, 10, 30]);
    }

    #[test]
    fn scheduler_rotates_between_files_in_slices() {
        let params = DiskParams::default();
        let mut disk = Disk::new(params);
        let half = 512 * 1024;
        let mut reqs = vec![req(0, 0.0, 9, 0, 4096)];
        // While the first read runs, four 512 KiB reads queue for each of
        // files A=1 and B=2.
        for i in 0..4u64 {
            reqs.push(req(1 + i, 0.0001, 1, i * half, half));
            reqs.push(req(10 + i, 0.0001, 2, i * half, half));
        }
        let out = run(&mut disk, &reqs);
        let files: Vec<u64> = out.iter().map(|c| c.request.file).collect();
        assert_eq!(files, vec![9, 1, 1, 2, 2, 1, 1, 2, 2]);
        // Each switch pays a seek; each second read of a slice is adjacent.
        let seeks: Vec<bool> = out.iter().map(|c| c.seek > 0.0).collect();
        assert_eq!(
            seeks,
            vec![true, true, false, true, false, true, false, true, false]
        );
    }

    #[test]
    fn idle_disk_starts_at_arrival() {
        let mut disk = Disk::new(DiskParams::default());
        let out = run(&mut disk, &[req(0, 5.0, 1, 0, 0)]);
        assert_eq!(out[0].start, 5.0);
        assert!((out[0].latency() - 0.010).abs() < 1e-12);
    }
}
