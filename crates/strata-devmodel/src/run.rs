//! Running several models over one read of a trace, in parallel.

use crate::layered::{Model, ModelReport, TieredCache, TimeSpreader};
use std::sync::mpsc;
use std::sync::Arc;
use strata_trace::Request;

const BATCH: usize = 1 << 15;

/// Feeds every request of `trace` to every model, the models spread over
/// `threads` worker threads while this thread reads the trace. With
/// `spread`, requests sharing a timestamp are spread evenly over the gap to
/// the next one (see [`TimeSpreader`]). `progress` gets the number of
/// requests read so far. Returns the reports in the models' order and the
/// number of requests.
pub fn run_models<C, E>(
    models: Vec<Model<C>>,
    trace: impl Iterator<Item = Result<Request, E>>,
    threads: usize,
    spread: bool,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<(Vec<ModelReport>, u64), E>
where
    C: TieredCache + Send,
{
    let n = models.len();
    let threads = threads.clamp(1, n.max(1));
    let mut shares: Vec<Vec<(usize, Model<C>)>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, m) in models.into_iter().enumerate() {
        shares[i % threads].push((i, m));
    }
    let mut requests = 0u64;
    let (mut out, result) = std::thread::scope(|scope| {
        let mut senders = Vec::new();
        let mut handles = Vec::new();
        for share in shares {
            let (tx, rx) = mpsc::sync_channel::<Arc<Vec<Request>>>(4);
            senders.push(tx);
            handles.push(scope.spawn(move || {
                let mut share = share;
                for batch in rx {
                    for (_, m) in share.iter_mut() {
                        for r in batch.iter() {
                            m.apply(r);
                        }
                    }
                }
                share
                    .into_iter()
                    .map(|(i, m)| (i, m.finish()))
                    .collect::<Vec<_>>()
            }));
        }
        let send = |batch: Vec<Request>| {
            let b = Arc::new(batch);
            for tx in &senders {
                // A worker only hangs up by panicking, which join reports.
                let _ = tx.send(Arc::clone(&b));
            }
        };
        let mut spreader = TimeSpreader::new();
        let mut batch = Vec::with_capacity(BATCH);
        let mut result = Ok(());
        for r in trace {
            match r {
                Ok(r) => {
                    requests += 1;
                    if spread {
                        spreader.push(r, &mut |r| batch.push(r));
                    } else {
                        batch.push(r);
                    }
                    if batch.len() >= BATCH {
                        send(std::mem::replace(&mut batch, Vec::with_capacity(BATCH)));
                        progress(requests);
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        spreader.finish(&mut |r| batch.push(r));
        send(batch);
        progress(requests);
        drop(senders);
        let mut out = Vec::with_capacity(n);
        for h in handles {
            match h.join() {
                Ok(v) => out.extend(v),
                // Re-raise a worker's panic: it is a bug, not bad input.
                Err(p) => std::panic::resume_unwind(p),
            }
        }
        (out, result)
    });
    result?;
    out.sort_by_key(|(i, _)| *i);
    Ok((out.into_iter().map(|(_, r)| r).collect(), requests))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layered::{ModelConfig, NoCache};
    use strata_trace::Op;

    #[test]
    fn every_model_sees_every_request_and_errors_stop_the_run() {
        let reqs: Vec<Result<Request, String>> = (0..100_000u64)
            .map(|i| Ok(Request::new(i as f64 * 0.001, Op::Get, i % 100, 0, 4096)))
            .collect();
        let models: Vec<_> = (1..=5)
            .map(|d| {
                Model::new(
                    ModelConfig {
                        disks: d,
                        ..ModelConfig::default()
                    },
                    NoCache,
                )
                .unwrap()
            })
            .collect();
        let (reps, n) = run_models(models, reqs.into_iter(), 2, true, &|_| {}).unwrap();
        assert_eq!(n, 100_000);
        assert_eq!(reps.len(), 5);
        for (i, r) in reps.iter().enumerate() {
            assert_eq!(r.config.disks, i as u32 + 1);
            assert_eq!(r.requests, 100_000);
            assert_eq!(r.disk_reads, 100_000);
        }
        // More disks: less queueing.
        assert!(reps[4].foreground.mean_ms < reps[0].foreground.mean_ms);

        let bad: Vec<Result<Request, String>> = vec![
            Ok(Request::new(0.0, Op::Get, 1, 0, 1)),
            Err("record 2 is garbage".into()),
        ];
        let m = vec![Model::new(ModelConfig::default(), NoCache).unwrap()];
        let e = run_models(m, bad.into_iter(), 1, false, &|_| {}).unwrap_err();
        assert!(e.contains("garbage"));
    }
}
