//! Reading a trace file as batches of [`Access`]es, and the pre-pass that
//! sizes its working set.

use crate::access::{next_access_pass, Access};
use crate::fasthash::key_map;
use crate::SimError;
use strata_trace::{Format, OpenOptions, ReadProgress, Request, TraceReader};

/// Accesses per batch handed to the simulator.
pub const BATCH: usize = 1 << 16;

/// A trace file read as batches of accesses.
pub struct AccessSource {
    reader: TraceReader,
    buf: Vec<Request>,
    done: bool,
}

impl AccessSource {
    /// Opens `path` (format detected unless given).
    pub fn open(path: &std::path::Path, format: Option<Format>) -> Result<AccessSource, SimError> {
        let mut o = OpenOptions::new();
        if let Some(f) = format {
            o = o.format(f);
        }
        Ok(AccessSource {
            reader: o.open(path)?,
            buf: Vec::with_capacity(BATCH),
            done: false,
        })
    }

    /// How far the reader has got (for progress bars).
    pub fn progress(&self) -> ReadProgress {
        self.reader.progress()
    }
}

impl Iterator for AccessSource {
    type Item = Result<Vec<Access>, SimError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let mut out = Vec::with_capacity(BATCH);
        while out.len() < BATCH {
            match self.reader.read_batch(&mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    break;
                }
                Ok(_) => out.extend(self.buf.iter().map(Access::from)),
                Err(e) => {
                    self.done = true;
                    return Some(Err(e.into()));
                }
            }
        }
        if out.is_empty() {
            None
        } else {
            Some(Ok(out))
        }
    }
}

/// What a pre-pass learns about a trace.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct WorkingSet {
    /// Requests.
    pub requests: u64,
    /// Distinct objects.
    pub objects: u64,
    /// Sum of each distinct object's size at its first request (libCacheSim's
    /// working-set size).
    pub bytes: u64,
}

/// Counts requests, distinct objects and working-set bytes of `batches`.
pub fn working_set<I>(batches: I, mut progress: impl FnMut(u64)) -> Result<WorkingSet, SimError>
where
    I: Iterator<Item = Result<Vec<Access>, SimError>>,
{
    let mut seen = key_map::<()>();
    let mut ws = WorkingSet::default();
    for b in batches {
        let b = b?;
        for a in &b {
            ws.requests += 1;
            if seen.insert(a.key, ()).is_none() {
                ws.objects += 1;
                ws.bytes += a.size;
            }
        }
        progress(ws.requests);
    }
    Ok(ws)
}

/// Reads all of `batches` into memory and fills every access's next-access
/// position (what Belady needs), returning batches again.
pub fn with_next_access<I>(batches: I) -> Result<Vec<Vec<Access>>, SimError>
where
    I: Iterator<Item = Result<Vec<Access>, SimError>>,
{
    let mut all = Vec::new();
    for b in batches {
        all.extend(b?);
    }
    next_access_pass(&mut all);
    Ok(all.chunks(BATCH).map(|c| c.to_vec()).collect())
}
