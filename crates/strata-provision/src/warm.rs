//! The erasure-coded warm tier's age, per workload, from its reads by age
//! (f4, OSDI'14, §3: BLOBs are moved to the warm tier once their request
//! rate has fallen off with age).
//!
//! The reads-by-FIFO-age histogram (time since creation) already built for
//! the flash allocation says which share of a workload's reads go to data
//! older than any age. The recommended warm age is the youngest bucket
//! boundary past which at most `max_read_fraction` of the workload's reads
//! fall, and some of its bytes lie: data older than that is encoded (storage
//! `1 + M/K` instead of `R`), and at most that share of reads pays for a
//! degraded read (K shard reads) when a disk is lost. A workload whose reads
//! do not fall off within the trace gets none (erasure coding off for it).

use serde::Serialize;

use crate::age::{AgeBuckets, AgeHistogram};
use crate::error::{ProvisionError, Result};

/// The least share of a workload's bytes a warm age must cover: past the
/// trace's oldest ages little data lies and few reads are seen by chance,
/// which is no evidence that the data cooled (nor worth a rule).
pub const MIN_WARM_BYTES: f64 = 0.05;

/// The erasure code and the rule of the recommendation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WarmConfig {
    /// Data shards per stripe.
    pub k: usize,
    /// Parity shards per stripe.
    pub m: usize,
    /// Replicas of data that is not encoded.
    pub replicas: u32,
    /// Most of a workload's reads that may go to encoded data (0..1).
    pub max_read_fraction: f64,
}

impl WarmConfig {
    /// Checks the code (K, M ≥ 1, K + M ≤ 32), the replicas (≥ 1) and the
    /// fraction (within 0..1).
    pub fn validate(&self) -> Result<()> {
        if self.k == 0 || self.m == 0 || self.k + self.m > 32 {
            return Err(ProvisionError::BadParameter(format!(
                "erasure code {}+{}: K and M must be at least 1 and K+M at most 32",
                self.k, self.m
            )));
        }
        if self.replicas == 0 {
            return Err(ProvisionError::BadParameter(
                "replicas must be at least 1".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.max_read_fraction) {
            return Err(ProvisionError::BadParameter(format!(
                "the warm tier's share of reads must be within 0..1, not {}",
                self.max_read_fraction
            )));
        }
        Ok(())
    }

    /// Bytes stored per logical byte when encoded: `1 + M/K`.
    pub fn encoded_overhead(&self) -> f64 {
        1.0 + self.m as f64 / self.k as f64
    }
}

/// The recommendation for one workload.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WarmAge {
    /// Encode sealed data older than this (seconds); `None`: keep the
    /// workload replicated (its reads do not fall off within the trace).
    pub after_seconds: Option<f64>,
    /// Share of the workload's bytes older than the warm age.
    pub bytes_fraction: f64,
    /// Share of its reads going to data older than the warm age (the reads
    /// that would be degraded, K shard reads each, while a disk is lost).
    pub reads_fraction: f64,
    /// Average bytes stored for the workload without erasure coding
    /// (R per logical byte).
    pub stored_replicated: f64,
    /// Average bytes stored with data past the warm age encoded.
    pub stored_with_ec: f64,
}

/// The warm age of one workload from its FIFO-age histogram (after
/// [`AgeHistogram::scale`] or before: only ratios are used).
pub fn warm_age(fifo: &AgeHistogram, buckets: &AgeBuckets, cfg: &WarmConfig) -> WarmAge {
    let n = fifo.bytes.len().min(fifo.reads.len()).min(buckets.len());
    let total_reads: f64 = fifo.reads[..n].iter().sum();
    let total_bytes: f64 = fifo.bytes[..n].iter().sum();
    let r = f64::from(cfg.replicas);
    let mut out = WarmAge {
        after_seconds: None,
        bytes_fraction: 0.0,
        reads_fraction: 0.0,
        stored_replicated: total_bytes * r,
        stored_with_ec: total_bytes * r,
    };
    if n < 2 || total_bytes <= 0.0 {
        return out;
    }
    // Tails from the oldest bucket back: reads and bytes at age ≥ lower(k).
    let mut tail_reads = vec![0.0; n + 1];
    let mut tail_bytes = vec![0.0; n + 1];
    for k in (0..n).rev() {
        tail_reads[k] = tail_reads[k + 1] + fifo.reads[k];
        tail_bytes[k] = tail_bytes[k + 1] + fifo.bytes[k];
    }
    // The youngest boundary (never age 0: data being written is hot) past
    // which the reads are within the bound and some bytes lie.
    // Two conditions: few of the reads, and (f4's criterion) few reads per
    // byte — a workload read evenly at every age has few reads past the
    // trace's oldest ages only because little data is that old.
    let bound = cfg.max_read_fraction * total_reads;
    let density = total_reads / total_bytes;
    let pick = (1..n).find(|&k| {
        tail_bytes[k] >= MIN_WARM_BYTES * total_bytes
            && tail_reads[k] <= bound
            && tail_reads[k] / tail_bytes[k] <= cfg.max_read_fraction * density
    });
    if let Some(k) = pick {
        let bf = tail_bytes[k] / total_bytes;
        out.after_seconds = Some(buckets.lower(k));
        out.bytes_fraction = bf;
        out.reads_fraction = if total_reads > 0.0 {
            tail_reads[k] / total_reads
        } else {
            0.0
        };
        out.stored_with_ec = total_bytes * ((1.0 - bf) * r + bf * cfg.encoded_overhead());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::collect::{collect, CollectConfig};
    use strata_trace::{Op, Request};

    fn cfg() -> WarmConfig {
        WarmConfig {
            k: 4,
            m: 2,
            replicas: 3,
            max_read_fraction: 0.01,
        }
    }

    /// A synthetic trace: workload 1 creates an object every second and
    /// reads each every 10 s until it is `stop` seconds old, then never;
    /// workload 2 reads its objects at every age, evenly.
    fn trace(stop: f64, end: f64) -> Vec<std::result::Result<Request, ProvisionError>> {
        let mut v = Vec::new();
        let mut t = 0.0;
        while t < end {
            let id = t as u64;
            v.push(Request::new(t, Op::Put, id, 1, 4096));
            v.push(Request::new(t, Op::Put, 1_000_000 + id, 2, 4096));
            // Reads of workload 1's objects younger than `stop`.
            let mut age = 10.0;
            while age < stop && age <= t {
                if (t - age).fract() == 0.0 {
                    v.push(Request::new(t, Op::Get, (t - age) as u64, 1, 4096));
                }
                age += 10.0;
            }
            // One read of a workload-2 object of a uniformly drawn age.
            let back = ((t as u64).wrapping_mul(2_654_435_761) % (t as u64 + 1)) as f64;
            v.push(Request::new(
                t,
                Op::Get,
                1_000_000 + (t - back) as u64,
                2,
                4096,
            ));
            t += 1.0;
        }
        v.into_iter().map(Ok).collect()
    }

    #[test]
    fn the_warm_age_is_where_reads_stop() {
        let per_doubling = 4;
        let buckets = AgeBuckets::geometric(1.0, 1e6, per_doubling).unwrap();
        let stop = 300.0;
        let c = collect(CollectConfig::new(buckets.clone()), trace(stop, 3000.0)).unwrap();
        let w1 = c.workloads.iter().find(|w| w.id == 1).unwrap();
        let a = warm_age(&w1.fifo, &buckets, &cfg());
        let after = a.after_seconds.expect("workload 1 cools");
        // The first boundary past the last read age (one bucket's width).
        let step = 2f64.powf(1.0 / per_doubling as f64);
        assert!(
            after >= stop - 10.0 && after <= stop * step,
            "warm age {after} for reads that stop at {stop}"
        );
        assert_eq!(a.reads_fraction, 0.0);
        assert!(a.bytes_fraction > 0.8, "{a:?}");
        // Storage: most bytes at 1.5x instead of 3x.
        assert!(a.stored_with_ec < 0.6 * a.stored_replicated, "{a:?}");
        // Workload 2 is read at every age: it stays replicated.
        let w2 = c.workloads.iter().find(|w| w.id == 2).unwrap();
        let b = warm_age(&w2.fifo, &buckets, &cfg());
        assert_eq!(b.after_seconds, None, "{b:?}");
        assert_eq!(b.stored_with_ec, b.stored_replicated);
    }

    #[test]
    fn a_looser_bound_gives_a_younger_age() {
        let buckets = AgeBuckets::geometric(1.0, 1e6, 4).unwrap();
        let c = collect(CollectConfig::new(buckets.clone()), trace(600.0, 3000.0)).unwrap();
        let w1 = c.workloads.iter().find(|w| w.id == 1).unwrap();
        let strict = warm_age(&w1.fifo, &buckets, &cfg()).after_seconds.unwrap();
        let loose = warm_age(
            &w1.fifo,
            &buckets,
            &WarmConfig {
                max_read_fraction: 0.5,
                ..cfg()
            },
        )
        .after_seconds
        .unwrap();
        assert!(loose < strict, "{loose} vs {strict}");
        assert!(WarmConfig { k: 0, ..cfg() }.validate().is_err());
        assert!(WarmConfig {
            max_read_fraction: 1.0,
            ..cfg()
        }
        .validate()
        .is_err());
    }
}
