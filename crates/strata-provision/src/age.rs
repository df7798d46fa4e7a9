//! Shared age buckets and the age histograms built on them (§4.1).
//!
//! Every histogram of one run — bytes stored and reads, FIFO and LRU age,
//! every workload — uses the same bucket boundaries, so a histogram of bytes
//! and a histogram of reads can be joined bucket by bucket into a
//! cacheability curve.

use crate::error::{ProvisionError, Result};

/// Age bucket boundaries in seconds: bucket `k` holds ages in
/// `[bounds[k], bounds[k+1])`; the last bucket, `[bounds[n-1], ∞)`, also
/// holds infinite ages (censored objects whose age is unknown and taken as
/// the worst case).
#[derive(Clone, Debug, PartialEq)]
pub struct AgeBuckets {
    bounds: Vec<f64>,
}

impl AgeBuckets {
    /// Boundaries `0, first, first·r, first·r², …` with `r = 2^(1/per_doubling)`,
    /// up to the first boundary at or past `last`.
    pub fn geometric(first: f64, last: f64, per_doubling: u32) -> Result<AgeBuckets> {
        if !(first.is_finite() && first > 0.0 && last.is_finite()) || per_doubling == 0 {
            return Err(ProvisionError::BadParameter(format!(
                "age buckets need a positive first boundary and at least one bucket per doubling (got first {first}, last {last}, {per_doubling} per doubling)"
            )));
        }
        let ratio = 2f64.powf(1.0 / per_doubling as f64);
        let mut bounds = vec![0.0, first];
        let mut b = first;
        while b < last && bounds.len() < 100_000 {
            b *= ratio;
            bounds.push(b);
        }
        Ok(AgeBuckets { bounds })
    }

    /// Buckets with the given boundaries (the first must be 0, strictly
    /// increasing, finite).
    pub fn from_bounds(bounds: Vec<f64>) -> Result<AgeBuckets> {
        let ok = bounds.len() >= 2
            && bounds[0] == 0.0
            && bounds.iter().all(|b| b.is_finite())
            && bounds.windows(2).all(|w| w[0] < w[1]);
        if !ok {
            return Err(ProvisionError::BadParameter(
                "age bucket boundaries must start at 0 and increase strictly".into(),
            ));
        }
        Ok(AgeBuckets { bounds })
    }

    /// The boundaries, starting with 0.
    pub fn bounds(&self) -> &[f64] {
        &self.bounds
    }

    /// Number of buckets (one per boundary; the last is open-ended).
    pub fn len(&self) -> usize {
        self.bounds.len()
    }

    /// Always false: there is at least one bucket.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The bucket holding `age` (negative ages count as 0, NaN and infinity
    /// go to the last bucket).
    pub fn index(&self, age: f64) -> usize {
        if age.is_nan() {
            return self.bounds.len() - 1;
        }
        let p = self.bounds.partition_point(|&b| b <= age);
        p.saturating_sub(1)
    }

    /// The lower edge of bucket `k`.
    pub fn lower(&self, k: usize) -> f64 {
        self.bounds[k]
    }

    /// The upper edge of bucket `k` (infinite for the last bucket).
    pub fn upper(&self, k: usize) -> f64 {
        self.bounds.get(k + 1).copied().unwrap_or(f64::INFINITY)
    }
}

/// A histogram of bytes stored and of reads by age, over shared buckets.
///
/// `bytes[k]` is the time-averaged number of bytes whose age lies in bucket
/// `k` (byte-seconds during the window divided by the window's length);
/// `reads[k]` the read rate (reads per second) to data whose age at the
/// time of the read lies in bucket `k`.
#[derive(Clone, Debug, PartialEq)]
pub struct AgeHistogram {
    /// Time-averaged bytes per bucket (byte-seconds until [`AgeHistogram::scale`]).
    pub bytes: Vec<f64>,
    /// Reads per second per bucket (read counts until [`AgeHistogram::scale`]).
    pub reads: Vec<f64>,
}

impl AgeHistogram {
    /// An empty histogram over `n` buckets.
    pub fn new(n: usize) -> AgeHistogram {
        AgeHistogram {
            bytes: vec![0.0; n],
            reads: vec![0.0; n],
        }
    }

    /// Adds `weight` bytes held at a constant `age` for `dt` seconds.
    pub fn add_constant(&mut self, buckets: &AgeBuckets, age: f64, dt: f64, weight: f64) {
        if dt > 0.0 {
            self.bytes[buckets.index(age)] += weight * dt;
        }
    }

    /// Adds `weight` bytes whose age grows from `a0` to `a1` (one second of
    /// age per second of time), spreading the time over the buckets crossed.
    pub fn add_ramp(&mut self, buckets: &AgeBuckets, a0: f64, a1: f64, weight: f64) {
        if a1 <= a0 {
            return;
        }
        let mut k = buckets.index(a0);
        let mut lo = a0;
        while lo < a1 && k < self.bytes.len() {
            let hi = buckets.upper(k).min(a1);
            self.bytes[k] += weight * (hi - lo);
            lo = hi;
            k += 1;
        }
    }

    /// Counts `weight` reads at `age`.
    pub fn add_read(&mut self, buckets: &AgeBuckets, age: f64, weight: f64) {
        self.reads[buckets.index(age)] += weight;
    }

    /// Divides bytes and reads by the window length (turning byte-seconds
    /// into average bytes and read counts into reads per second).
    pub fn scale(&mut self, window_seconds: f64) {
        for v in self.bytes.iter_mut().chain(self.reads.iter_mut()) {
            *v /= window_seconds;
        }
    }

    /// Total bytes (the workload's average size).
    pub fn total_bytes(&self) -> f64 {
        self.bytes.iter().sum()
    }

    /// Total read rate.
    pub fn total_reads(&self) -> f64 {
        self.reads.iter().sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_and_ramp() {
        let b = AgeBuckets::from_bounds(vec![0.0, 1.0, 2.0, 4.0]).unwrap();
        assert_eq!(b.index(0.0), 0);
        assert_eq!(b.index(0.5), 0);
        assert_eq!(b.index(1.0), 1);
        assert_eq!(b.index(3.9), 2);
        assert_eq!(b.index(100.0), 3);
        assert_eq!(b.index(f64::INFINITY), 3);
        let mut h = AgeHistogram::new(b.len());
        h.add_ramp(&b, 0.5, 5.0, 2.0);
        assert_eq!(h.bytes, vec![1.0, 2.0, 4.0, 2.0]);
        assert!((h.total_bytes() - 9.0).abs() < 1e-12);
    }

    #[test]
    fn geometric_covers_last() {
        let b = AgeBuckets::geometric(1.0, 1000.0, 4).unwrap();
        assert_eq!(b.bounds()[0], 0.0);
        assert!(*b.bounds().last().unwrap() >= 1000.0);
        assert!(b.bounds().len() > 40 && b.bounds().len() < 45);
        assert!(AgeBuckets::geometric(0.0, 10.0, 4).is_err());
    }
}
