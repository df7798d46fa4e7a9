//! Replaying one stream of accesses through many simulated caches at once,
//! spread over threads: the trace is read once, in batches, and every batch
//! is shared (not copied) with every worker.

use crate::access::Access;
use crate::engine::{SimConfig, SimReport, SimState};
use crate::SimError;
use std::sync::mpsc::sync_channel;
use std::sync::Arc;

/// How to run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Worker threads (1: everything on the calling thread).
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> RunOptions {
        RunOptions {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

/// Replays `batches` through every cache in `configs` and returns one report
/// per config, in order. `progress` is called with the number of accesses
/// replayed so far after each batch.
pub fn run<I, F>(
    batches: I,
    configs: &[SimConfig],
    opts: &RunOptions,
    mut progress: F,
) -> Result<Vec<SimReport>, SimError>
where
    I: Iterator<Item = Result<Vec<Access>, SimError>>,
    F: FnMut(u64),
{
    let workers = opts.threads.max(1).min(configs.len().max(1));
    let mut done = 0u64;
    if workers <= 1 {
        let mut states: Vec<SimState> = configs.iter().map(SimState::new).collect();
        for batch in batches {
            let batch = batch?;
            for s in &mut states {
                for a in &batch {
                    s.step(a);
                }
            }
            done += batch.len() as u64;
            progress(done);
        }
        return Ok(states.iter().map(SimState::report).collect());
    }
    // Round-robin the caches over the workers.
    let mut groups: Vec<Vec<(usize, SimConfig)>> = vec![Vec::new(); workers];
    for (i, c) in configs.iter().enumerate() {
        groups[i % workers].push((i, c.clone()));
    }
    let mut out: Vec<Option<SimReport>> = vec![None; configs.len()];
    std::thread::scope(|scope| -> Result<(), SimError> {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for group in groups {
            let (tx, rx) = sync_channel::<Arc<Vec<Access>>>(4);
            senders.push(tx);
            handles.push(scope.spawn(move || {
                let mut states: Vec<(usize, SimState)> =
                    group.iter().map(|(i, c)| (*i, SimState::new(c))).collect();
                while let Ok(batch) = rx.recv() {
                    for (_, s) in &mut states {
                        for a in batch.iter() {
                            s.step(a);
                        }
                    }
                }
                states
                    .iter()
                    .map(|(i, s)| (*i, s.report()))
                    .collect::<Vec<_>>()
            }));
        }
        let mut result = Ok(());
        for batch in batches {
            match batch {
                Ok(b) => {
                    let n = b.len() as u64;
                    let b = Arc::new(b);
                    for tx in &senders {
                        if tx.send(b.clone()).is_err() {
                            result = Err(SimError::Worker("a worker stopped early".into()));
                        }
                    }
                    done += n;
                    progress(done);
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
            if result.is_err() {
                break;
            }
        }
        drop(senders);
        for h in handles {
            match h.join() {
                Ok(reports) => {
                    for (i, r) in reports {
                        out[i] = Some(r);
                    }
                }
                Err(_) => return Err(SimError::Worker("a worker panicked".into())),
            }
        }
        result
    })?;
    out.into_iter()
        .map(|r| r.ok_or_else(|| SimError::Worker("a cache produced no report".into())))
        .collect()
}
