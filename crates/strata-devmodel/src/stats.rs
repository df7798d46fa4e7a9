//! Latency accounting with bounded memory: a log-scale histogram per I/O class.

use serde::Serialize;

/// Smallest latency the histogram resolves (1 µs); anything below counts as 0.
const MIN_S: f64 = 1e-6;
/// Bucket growth factor: 2% relative error on any reported percentile.
const RATIO: f64 = 1.02;
/// Number of log buckets: 1 µs .. about 10^4 s.
const BUCKETS: usize = 1200;

/// A latency histogram: exact count, sum and max, percentiles within 2%.
#[derive(Clone, Debug)]
pub struct LatencyHistogram {
    zero: u64,
    buckets: Vec<u64>,
    count: u64,
    sum: f64,
    max: f64,
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        LatencyHistogram {
            zero: 0,
            buckets: vec![0; BUCKETS],
            count: 0,
            sum: 0.0,
            max: 0.0,
        }
    }
}

/// Summary of a latency distribution, in milliseconds.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Number of requests.
    pub count: u64,
    /// Mean latency (ms).
    pub mean_ms: f64,
    /// Median (ms).
    pub p50_ms: f64,
    /// 90th percentile (ms).
    pub p90_ms: f64,
    /// 99th percentile (ms).
    pub p99_ms: f64,
    /// 99.9th percentile (ms).
    pub p999_ms: f64,
    /// Largest latency seen (ms).
    pub max_ms: f64,
}

impl LatencyHistogram {
    /// Records one latency in seconds.
    pub fn record(&mut self, seconds: f64) {
        let s = if seconds.is_finite() && seconds > 0.0 {
            seconds
        } else {
            0.0
        };
        self.count += 1;
        self.sum += s;
        if s > self.max {
            self.max = s;
        }
        if s < MIN_S {
            self.zero += 1;
            return;
        }
        let i = ((s / MIN_S).ln() / RATIO.ln()) as usize;
        self.buckets[i.min(BUCKETS - 1)] += 1;
    }

    /// Adds another histogram's counts into this one.
    pub fn merge(&mut self, other: &LatencyHistogram) {
        self.zero += other.zero;
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.count += other.count;
        self.sum += other.sum;
        self.max = self.max.max(other.max);
    }

    /// Number of recorded latencies.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Mean latency in seconds (0 when empty).
    pub fn mean(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum / self.count as f64
        }
    }

    /// The `q`-quantile (0..=1) in seconds: the upper edge of the bucket
    /// holding it, capped at the largest latency seen.
    pub fn quantile(&self, q: f64) -> f64 {
        if self.count == 0 {
            return 0.0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = self.zero;
        if seen >= rank {
            return 0.0;
        }
        for (i, c) in self.buckets.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let upper = MIN_S * RATIO.powi(i as i32 + 1);
                return upper.min(self.max);
            }
        }
        self.max
    }

    /// The summary in milliseconds.
    pub fn summary(&self) -> LatencySummary {
        LatencySummary {
            count: self.count,
            mean_ms: self.mean() * 1e3,
            p50_ms: self.quantile(0.5) * 1e3,
            p90_ms: self.quantile(0.9) * 1e3,
            p99_ms: self.quantile(0.99) * 1e3,
            p999_ms: self.quantile(0.999) * 1e3,
            max_ms: self.max * 1e3,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_within_two_percent() {
        let mut h = LatencyHistogram::default();
        for i in 1..=1000 {
            h.record(i as f64 * 1e-3);
        }
        assert_eq!(h.count(), 1000);
        assert!((h.mean() - 0.5005).abs() < 1e-9);
        let p50 = h.quantile(0.5);
        assert!((p50 - 0.5).abs() / 0.5 < 0.021, "{p50}");
        let p99 = h.quantile(0.99);
        assert!((p99 - 0.99).abs() / 0.99 < 0.021, "{p99}");
        assert_eq!(h.quantile(1.0), 1.0);
    }

    #[test]
    fn zeros_count() {
        let mut h = LatencyHistogram::default();
        h.record(0.0);
        h.record(0.0);
        h.record(0.01);
        assert_eq!(h.quantile(0.5), 0.0);
        assert!(h.quantile(1.0) > 0.0099);
    }
}
