//! Fixed-bin histograms on a log scale, so every statistic has bounded memory.

use serde::Serialize;

/// Bins per doubling for time histograms.
const TIME_PER_OCTAVE: f64 = 4.0;
/// Smallest time resolved (1 ms); shorter gaps count in the first bin.
const TIME_MIN: f64 = 1e-3;
/// Number of time bins: 1 ms .. about 3 years.
pub const TIME_BINS: usize = 148;

/// A histogram of durations in seconds on log-spaced bins (4 per doubling
/// from 1 ms), plus a count of events that never happened ("never").
#[derive(Clone, Debug, PartialEq)]
pub struct TimeHist {
    /// Counts per bin; bin `i` holds durations up to [`TimeHist::edge`]`(i)`.
    pub bins: Vec<u64>,
    /// Events counted with no duration (for example, a read never preceded).
    pub never: u64,
}

impl Default for TimeHist {
    fn default() -> Self {
        TimeHist {
            bins: vec![0; TIME_BINS],
            never: 0,
        }
    }
}

impl TimeHist {
    /// The upper edge of bin `i` in seconds.
    pub fn edge(i: usize) -> f64 {
        TIME_MIN * 2f64.powf(i as f64 / TIME_PER_OCTAVE)
    }

    /// The bin a duration falls in.
    pub fn bin(seconds: f64) -> usize {
        if seconds.is_nan() || seconds <= TIME_MIN {
            return 0;
        }
        let i = ((seconds / TIME_MIN).log2() * TIME_PER_OCTAVE).ceil() as usize;
        i.min(TIME_BINS - 1)
    }

    /// Counts one duration.
    pub fn add(&mut self, seconds: f64) {
        self.bins[Self::bin(seconds)] += 1;
    }

    /// Counts one event that has no duration.
    pub fn add_never(&mut self) {
        self.never += 1;
    }

    /// Adds another histogram.
    pub fn merge(&mut self, o: &TimeHist) {
        for (a, b) in self.bins.iter_mut().zip(&o.bins) {
            *a += b;
        }
        self.never += o.never;
    }

    /// All events, with and without a duration.
    pub fn total(&self) -> u64 {
        self.bins.iter().sum::<u64>() + self.never
    }

    /// Events with a duration of at most `seconds` (counted to the bin edge
    /// at or above it).
    pub fn at_most(&self, seconds: f64) -> u64 {
        let b = Self::bin(seconds);
        self.bins[..=b].iter().sum()
    }

    /// The CDF as (seconds, fraction of `denominator`) at each bin edge, from
    /// the first non-empty bin to the last.
    pub fn cdf(&self, denominator: u64) -> Vec<(f64, f64)> {
        let first = self.bins.iter().position(|&c| c > 0);
        let last = self.bins.iter().rposition(|&c| c > 0);
        let (Some(first), Some(last)) = (first, last) else {
            return Vec::new();
        };
        let d = denominator.max(1) as f64;
        let mut acc = self.bins[..first].iter().sum::<u64>();
        let mut out = Vec::with_capacity(last - first + 1);
        for i in first..=last {
            acc += self.bins[i];
            out.push((Self::edge(i), acc as f64 / d));
        }
        out
    }
}

/// Bins per doubling for size histograms.
const SIZE_PER_OCTAVE: f64 = 8.0;
/// Number of size bins: 1 B .. 2^56 B.
const SIZE_BINS: usize = 8 * 56 + 1;

/// A histogram of byte sizes on log bins (8 per doubling, so percentiles
/// are within 9%), with exact count, sum, minimum and maximum.
#[derive(Clone, Debug, PartialEq)]
pub struct SizeHist {
    bins: Vec<u64>,
    count: u64,
    sum: u128,
    min: u64,
    max: u64,
}

impl Default for SizeHist {
    fn default() -> Self {
        SizeHist {
            bins: vec![0; SIZE_BINS],
            count: 0,
            sum: 0,
            min: u64::MAX,
            max: 0,
        }
    }
}

/// Percentiles and box-plot data of a size distribution, in bytes.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct SizeSummary {
    /// Number of objects.
    pub count: u64,
    /// Mean size.
    pub mean: f64,
    /// Smallest.
    pub min: u64,
    /// 10th percentile (the study's lower whisker).
    pub p10: u64,
    /// 25th percentile (box bottom).
    pub p25: u64,
    /// Median.
    pub p50: u64,
    /// 75th percentile (box top).
    pub p75: u64,
    /// 90th percentile (the study's upper whisker).
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// Largest.
    pub max: u64,
}

impl SizeHist {
    fn bin(size: u64) -> usize {
        if size <= 1 {
            return 0;
        }
        let i = ((size as f64).log2() * SIZE_PER_OCTAVE).ceil() as usize;
        i.min(SIZE_BINS - 1)
    }

    fn edge(i: usize) -> f64 {
        2f64.powf(i as f64 / SIZE_PER_OCTAVE)
    }

    /// Counts one size.
    pub fn add(&mut self, size: u64) {
        self.bins[Self::bin(size)] += 1;
        self.count += 1;
        self.sum += u128::from(size);
        self.min = self.min.min(size);
        self.max = self.max.max(size);
    }

    /// Adds another histogram.
    pub fn merge(&mut self, o: &SizeHist) {
        for (a, b) in self.bins.iter_mut().zip(&o.bins) {
            *a += b;
        }
        self.count += o.count;
        self.sum += o.sum;
        self.min = self.min.min(o.min);
        self.max = self.max.max(o.max);
    }

    /// Sizes counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The `q`-quantile, interpolated geometrically inside its bin and
    /// clamped to the exact minimum and maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = q.clamp(0.0, 1.0) * self.count as f64;
        let mut seen = 0u64;
        for (i, &c) in self.bins.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (seen + c) as f64 >= rank {
                let lo = if i == 0 { 0.0 } else { Self::edge(i - 1) };
                let hi = Self::edge(i);
                let frac = ((rank - seen as f64) / c as f64).clamp(0.0, 1.0);
                let v = if lo <= 0.0 {
                    hi * frac
                } else {
                    lo * (hi / lo).powf(frac)
                };
                return (v.round() as u64).clamp(self.min, self.max);
            }
            seen += c;
        }
        self.max
    }

    /// Percentiles for tables and box plots.
    pub fn summary(&self) -> SizeSummary {
        if self.count == 0 {
            return SizeSummary::default();
        }
        SizeSummary {
            count: self.count,
            mean: self.sum as f64 / self.count as f64,
            min: self.min,
            p10: self.quantile(0.10),
            p25: self.quantile(0.25),
            p50: self.quantile(0.50),
            p75: self.quantile(0.75),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            max: self.max,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_percentiles_are_close() {
        let mut h = SizeHist::default();
        for s in 1..=10_000u64 {
            h.add(s * 100);
        }
        let s = h.summary();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min, 100);
        assert_eq!(s.max, 1_000_000);
        for (got, want) in [(s.p10, 100_000.0), (s.p50, 500_000.0), (s.p90, 900_000.0)] {
            assert!((got as f64 - want).abs() / want < 0.05, "{got} vs {want}");
        }
        assert!((s.mean - 500_050.0).abs() < 1e-6);
    }

    #[test]
    fn time_cdf_counts_up_to_edges() {
        let mut h = TimeHist::default();
        h.add(0.5);
        h.add(30.0);
        h.add(3600.0);
        h.add_never();
        assert_eq!(h.total(), 4);
        assert_eq!(h.at_most(1.0), 1);
        assert_eq!(h.at_most(60.0), 2);
        assert_eq!(h.at_most(7200.0), 3);
        let cdf = h.cdf(h.total());
        assert_eq!(cdf.last().map(|p| p.1), Some(0.75));
        assert!(cdf.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
    }
}
