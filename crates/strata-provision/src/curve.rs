//! Cacheability curves φ(x) = g(f⁻¹(x)) (§4.1).
//!
//! `f(a)` is the amount of a workload's data younger than age `a`, `g(a)`
//! the read rate to data younger than `a`; both are cumulative sums of the
//! same-bucket histograms, so the curve's breakpoints are the pairs
//! `(f(a_k), g(a_k))` at the bucket boundaries `a_k`, joined linearly.

use serde::Serialize;

use crate::age::AgeBuckets;
use crate::error::{ProvisionError, Result};

/// A piecewise linear cacheability curve: flash bytes → reads per second
/// served from flash when the youngest `x` bytes are on flash.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CacheabilityCurve {
    /// Breakpoint x-coordinates (bytes): starts at 0, strictly increasing;
    /// the last is the workload's size `d`.
    pub x: Vec<f64>,
    /// Breakpoint y-coordinates (reads/s): starts at 0, non-decreasing.
    pub y: Vec<f64>,
    /// The age (seconds) at each breakpoint; infinite for a last breakpoint
    /// holding data of unknown or unbounded age.
    pub age: Vec<f64>,
    /// Every read of the workload per second, including reads that no flash
    /// allocation can serve (reads of data older than any breakpoint, first
    /// reads of objects never written in the trace).
    pub total_reads: f64,
}

impl CacheabilityCurve {
    /// Joins a bytes histogram and a reads histogram over the same buckets.
    pub fn from_histograms(
        buckets: &AgeBuckets,
        bytes: &[f64],
        reads: &[f64],
    ) -> CacheabilityCurve {
        let total_bytes: f64 = bytes.iter().sum();
        let total_reads: f64 = reads.iter().sum();
        let eps = 1e-12 * total_bytes.max(1.0);
        let mut c = CacheabilityCurve {
            x: vec![0.0],
            y: vec![0.0],
            age: vec![0.0],
            total_reads,
        };
        let (mut cx, mut cy) = (0.0, 0.0);
        let n = bytes.len().min(reads.len());
        for k in 0..n {
            cx += bytes[k];
            cy += reads[k];
            let age = buckets.upper(k);
            let last = c.x.len() - 1;
            if cx > c.x[last] + eps {
                c.x.push(cx);
                c.y.push(cy);
                c.age.push(age);
            } else if last > 0 && age.is_finite() {
                // A bucket without bytes but with reads (objects of size 0):
                // its reads join the previous breakpoint.
                c.y[last] = cy;
                c.age[last] = age;
            }
        }
        c
    }

    /// A curve from explicit breakpoints (ages left unknown).
    pub fn from_points(x: Vec<f64>, y: Vec<f64>) -> Result<CacheabilityCurve> {
        let ok = !x.is_empty()
            && x.len() == y.len()
            && x[0] == 0.0
            && y[0] == 0.0
            && x.windows(2).all(|w| w[1] > w[0])
            && y.iter().chain(x.iter()).all(|v| v.is_finite());
        if !ok {
            return Err(ProvisionError::BadParameter(
                "a cacheability curve starts at (0, 0) and its x-coordinates increase strictly"
                    .into(),
            ));
        }
        let total_reads = y.iter().cloned().fold(0.0, f64::max);
        let age = vec![f64::NAN; x.len()];
        Ok(CacheabilityCurve {
            x,
            y,
            age,
            total_reads,
        })
    }

    /// The workload's size `d` (the last breakpoint).
    pub fn size(&self) -> f64 {
        *self.x.last().unwrap_or(&0.0)
    }

    /// The read rate served by the largest allocation, φ(d).
    pub fn max_reads(&self) -> f64 {
        *self.y.last().unwrap_or(&0.0)
    }

    /// φ(x), clamped to [0, d].
    pub fn eval(&self, x: f64) -> f64 {
        interp(&self.x, &self.y, x)
    }

    /// The age of the oldest data held when the youngest `x` bytes are kept:
    /// the eviction TTL of a flash of `x` bytes with every new byte written
    /// to it. `None` when `x` holds the whole workload (or reaches data of
    /// unbounded age): nothing needs evicting by age.
    pub fn age_at_bytes(&self, x: f64) -> Option<f64> {
        if x >= self.size() {
            return None;
        }
        let a = interp(&self.x, &self.age, x);
        a.is_finite().then_some(a)
    }

    /// f(a): bytes younger than age `a`.
    pub fn bytes_at_age(&self, a: f64) -> f64 {
        let n = finite_prefix(&self.age);
        interp(&self.age[..n], &self.x[..n], a)
    }

    /// g(a): reads per second to data younger than age `a`.
    pub fn reads_at_age(&self, a: f64) -> f64 {
        let n = finite_prefix(&self.age);
        interp(&self.age[..n], &self.y[..n], a)
    }

    /// Whether the curve is concave (slopes never increase, within a
    /// relative tolerance).
    pub fn is_concave(&self) -> bool {
        let mut prev = f64::INFINITY;
        for i in 1..self.x.len() {
            let s = (self.y[i] - self.y[i - 1]) / (self.x[i] - self.x[i - 1]);
            if s > prev * (1.0 + 1e-9) + 1e-300 {
                return false;
            }
            prev = s;
        }
        true
    }

    /// How far φ is from concave: the largest distance between φ and its
    /// concave upper bound (upper hull), as a fraction of φ(d). Zero for a
    /// concave curve; measured curves wiggle by a little from noise.
    pub fn concavity_gap(&self) -> f64 {
        let mut hull: Vec<usize> = Vec::with_capacity(self.x.len());
        for i in 0..self.x.len() {
            while hull.len() >= 2 {
                let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
                let cross = (self.x[b] - self.x[a]) * (self.y[i] - self.y[a])
                    - (self.y[b] - self.y[a]) * (self.x[i] - self.x[a]);
                if cross >= 0.0 {
                    hull.pop();
                } else {
                    break;
                }
            }
            hull.push(i);
        }
        let hx: Vec<f64> = hull.iter().map(|&i| self.x[i]).collect();
        let hy: Vec<f64> = hull.iter().map(|&i| self.y[i]).collect();
        let gap = self
            .x
            .iter()
            .zip(&self.y)
            .map(|(&x, &y)| interp(&hx, &hy, x) - y)
            .fold(0.0, f64::max);
        gap / self.max_reads().max(f64::MIN_POSITIVE)
    }
}

fn finite_prefix(age: &[f64]) -> usize {
    age.iter().take_while(|a| a.is_finite()).count().max(1)
}

/// Linear interpolation of `ys` over increasing `xs`, clamped at both ends.
pub(crate) fn interp(xs: &[f64], ys: &[f64], x: f64) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    if x <= xs[0] {
        return ys[0];
    }
    let last = xs.len() - 1;
    if x >= xs[last] {
        return ys[last];
    }
    let i = xs.partition_point(|&v| v <= x);
    let (x0, x1, y0, y1) = (xs[i - 1], xs[i], ys[i - 1], ys[i]);
    if x1 <= x0 {
        return y1;
    }
    if y1.is_infinite() {
        return y1;
    }
    y0 + (y1 - y0) * (x - x0) / (x1 - x0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_histograms() {
        let b = AgeBuckets::from_bounds(vec![0.0, 10.0, 20.0]).unwrap();
        // 10 bytes of age 0-10 read 30/s, 10 bytes of age 10-20 read 15/s,
        // 10 bytes older read 45/s.
        let c = CacheabilityCurve::from_histograms(&b, &[10.0, 10.0, 10.0], &[30.0, 15.0, 45.0]);
        assert_eq!(c.x, vec![0.0, 10.0, 20.0, 30.0]);
        assert_eq!(c.y, vec![0.0, 30.0, 45.0, 90.0]);
        assert_eq!(c.eval(15.0), 37.5);
        assert_eq!(c.age_at_bytes(15.0), Some(15.0));
        assert_eq!(c.age_at_bytes(25.0), None);
        assert_eq!(c.bytes_at_age(5.0), 5.0);
        assert_eq!(c.reads_at_age(20.0), 45.0);
        assert!(!c.is_concave());
        // The hull runs (0,0)-(10,30)-(30,90): at 20 it is 60, φ is 45.
        assert!((c.concavity_gap() - 15.0 / 90.0).abs() < 1e-12);
        assert_eq!(c.total_reads, 90.0);
    }

    #[test]
    fn unwritten_reads_are_not_cacheable() {
        let b = AgeBuckets::from_bounds(vec![0.0, 10.0]).unwrap();
        // No bytes of infinite age, but reads there: they stay out of φ.
        let c = CacheabilityCurve::from_histograms(&b, &[10.0, 0.0], &[5.0, 7.0]);
        assert_eq!(c.max_reads(), 5.0);
        assert_eq!(c.total_reads, 12.0);
    }
}
