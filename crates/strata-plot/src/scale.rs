//! Axes: how data values map to pixels and where the ticks go.

use crate::format::Fmt;

/// One axis of a chart.
#[derive(Clone, Debug)]
pub struct Axis {
    /// Label under (x) or beside (y) the axis.
    pub label: String,
    /// Logarithmic scale.
    pub log: bool,
    /// How ticks are printed.
    pub fmt: Fmt,
    /// Fixed range; computed from the data when `None` (a linear axis
    /// then starts at 0 for non-negative data and ends on a round tick).
    pub range: Option<(f64, f64)>,
}

impl Axis {
    /// A linear axis.
    pub fn linear(label: &str, fmt: Fmt) -> Axis {
        Axis {
            label: label.into(),
            log: false,
            fmt,
            range: None,
        }
    }

    /// A log axis (base 10; powers of two for bytes, round durations
    /// for seconds).
    pub fn log(label: &str, fmt: Fmt) -> Axis {
        Axis {
            label: label.into(),
            log: true,
            fmt,
            range: None,
        }
    }

    /// The same axis with a fixed range.
    pub fn with_range(mut self, lo: f64, hi: f64) -> Axis {
        self.range = Some((lo, hi));
        self
    }
}

/// Maps data values to pixels along one axis.
pub(crate) struct Scale {
    pub(crate) lo: f64,
    pub(crate) hi: f64,
    log: bool,
    fmt: Fmt,
    p0: f64,
    p1: f64,
}

impl Scale {
    /// The scale of `axis` over `values`, drawn from pixel `p0` to `p1`.
    pub(crate) fn new(axis: &Axis, values: impl Iterator<Item = f64>, p0: f64, p1: f64) -> Scale {
        let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            if v.is_finite() && (!axis.log || v > 0.0) {
                lo = lo.min(v);
                hi = hi.max(v);
            }
        }
        if let Some((a, b)) = axis.range {
            lo = a;
            hi = b;
        }
        if !lo.is_finite() || !hi.is_finite() {
            lo = if axis.log { 1.0 } else { 0.0 };
            hi = if axis.log { 10.0 } else { 1.0 };
        }
        if axis.log {
            lo = 10f64.powf(lo.log10().floor());
            hi = 10f64.powf(hi.log10().ceil());
            if hi <= lo {
                hi = lo * 10.0;
            }
        } else {
            if axis.range.is_none() && lo > 0.0 {
                lo = 0.0;
            }
            if hi <= lo {
                hi = lo + 1.0;
            }
            if axis.range.is_none() {
                let step = linear_step(hi - lo, axis.fmt);
                hi = (hi / step).ceil() * step;
                lo = (lo / step).floor() * step;
            }
        }
        Scale {
            lo,
            hi,
            log: axis.log,
            fmt: axis.fmt,
            p0,
            p1,
        }
    }

    /// The pixel of value `v` (a little outside the axis at most).
    pub(crate) fn px(&self, v: f64) -> f64 {
        let f = if self.log {
            let v = v.max(self.lo * 1e-3);
            (v.log10() - self.lo.log10()) / (self.hi.log10() - self.lo.log10())
        } else {
            (v - self.lo) / (self.hi - self.lo)
        };
        self.p0 + f.clamp(-0.05, 1.05) * (self.p1 - self.p0)
    }

    /// Whether `v` can be drawn on this axis.
    pub(crate) fn shows(&self, v: f64) -> bool {
        v.is_finite() && (!self.log || v > 0.0)
    }

    /// Tick values, in increasing order.
    pub(crate) fn ticks(&self) -> Vec<f64> {
        if self.log && self.fmt == Fmt::Seconds {
            const T: [f64; 14] = [
                1e-3,
                1e-2,
                0.1,
                1.0,
                10.0,
                60.0,
                600.0,
                3600.0,
                6.0 * 3600.0,
                86400.0,
                7.0 * 86400.0,
                30.0 * 86400.0,
                365.0 * 86400.0,
                3650.0 * 86400.0,
            ];
            return T
                .iter()
                .copied()
                .filter(|&t| t >= self.lo * 0.999 && t <= self.hi * 1.001)
                .collect();
        }
        if self.log && self.fmt == Fmt::Bytes {
            let a = self.lo.log2().ceil() as i32;
            let b = self.hi.log2().floor() as i32;
            let stride = (((b - a).max(1) as f64) / 8.0).ceil().max(1.0) as i32;
            // Prefer powers of 1024 when they fall on the stride.
            let stride = if stride > 5 { 10 } else { stride };
            let start = if stride == 10 {
                (a + 9).div_euclid(10) * 10
            } else {
                a
            };
            let mut t = Vec::new();
            let mut e = start;
            while e <= b {
                t.push(2f64.powi(e));
                e += stride;
            }
            return t;
        }
        if self.log {
            let a = self.lo.log10().round() as i32;
            let b = self.hi.log10().round() as i32;
            let mut t = Vec::new();
            let decades = b - a;
            let stride = ((decades as f64) / 8.0).ceil().max(1.0) as i32;
            let mut e = a;
            while e <= b {
                t.push(10f64.powi(e));
                if decades <= 2 && e < b {
                    t.push(2.0 * 10f64.powi(e));
                    t.push(5.0 * 10f64.powi(e));
                }
                e += stride;
            }
            t
        } else {
            let step = linear_step(self.hi - self.lo, self.fmt);
            let mut t = Vec::new();
            let mut v = (self.lo / step).ceil() * step;
            while v <= self.hi + step * 1e-9 {
                t.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
                v += step;
            }
            t
        }
    }
}

/// The tick step of a linear axis spanning `range`: about five round
/// steps, round in KiB/MiB/… for bytes.
fn linear_step(range: f64, fmt: Fmt) -> f64 {
    if fmt == Fmt::Bytes && range >= 1024.0 {
        let mut unit = 1.0;
        while range / unit >= 1024.0 {
            unit *= 1024.0;
        }
        return nice_step(range / unit / 5.0) * unit;
    }
    nice_step(range / 5.0)
}

/// 1, 2, 2.5 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if !(raw.is_finite() && raw > 0.0) {
        return 1.0;
    }
    let e = 10f64.powf(raw.log10().floor());
    let f = raw / e;
    let m = if f <= 1.0 {
        1.0
    } else if f <= 2.0 {
        2.0
    } else if f <= 2.5 {
        2.5
    } else if f <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * e
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_cover_range() {
        let a = Axis::log("x", Fmt::Number);
        let s = Scale::new(&a, [3.0, 4000.0].into_iter(), 0.0, 100.0);
        assert_eq!(s.lo, 1.0);
        assert_eq!(s.hi, 10000.0);
        assert_eq!(s.ticks(), vec![1.0, 10.0, 100.0, 1000.0, 10000.0]);
        assert!((s.px(100.0) - 50.0).abs() < 1e-9);
    }

    #[test]
    fn linear_ticks_are_round_and_start_at_zero() {
        let a = Axis::linear("x", Fmt::Number);
        let s = Scale::new(&a, [3.0, 87.0].into_iter(), 0.0, 100.0);
        assert_eq!((s.lo, s.hi), (0.0, 100.0));
        assert_eq!(s.ticks(), vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let fixed = Scale::new(&a.with_range(0.0, 1.0), [5.0].into_iter(), 0.0, 100.0);
        assert_eq!((fixed.lo, fixed.hi), (0.0, 1.0));
    }

    #[test]
    fn linear_byte_ticks_are_round_in_binary_units() {
        let a = Axis::linear("flash", Fmt::Bytes);
        let s = Scale::new(&a, [0.0, 9.3 * 1048576.0].into_iter(), 0.0, 100.0);
        let mib = 1048576.0;
        assert_eq!(
            s.ticks(),
            vec![0.0, 2.0 * mib, 4.0 * mib, 6.0 * mib, 8.0 * mib, 10.0 * mib]
        );
    }

    #[test]
    fn log_byte_and_time_ticks() {
        let b = Scale::new(
            &Axis::log("b", Fmt::Bytes),
            [1000.0, 3e9].into_iter(),
            0.0,
            1.0,
        );
        assert!(b.ticks().iter().all(|t| t.log2().fract() == 0.0));
        let t = Scale::new(
            &Axis::log("t", Fmt::Seconds),
            [2.0, 5000.0].into_iter(),
            0.0,
            1.0,
        );
        assert!(t.ticks().contains(&60.0) && t.ticks().contains(&3600.0));
    }
}
