//! Economics of flash (§5): the break-even IOPS per GiB and the
//! cost-optimal amount of flash per workload (equation 1).

use serde::Serialize;

use crate::curve::CacheabilityCurve;
use crate::error::{ProvisionError, Result};

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

/// Hardware prices: disk IOPS per dollar and flash GiB per dollar.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prices {
    /// `I_d`: random IOPS a dollar of disk buys (the paper: a $100 10K disk
    /// at 150 IOPS, 1.5).
    pub disk_iops_per_dollar: f64,
    /// `G_f`: GiB of flash a dollar buys (the paper: about 1).
    pub flash_gib_per_dollar: f64,
}

impl Default for Prices {
    fn default() -> Prices {
        Prices {
            disk_iops_per_dollar: 1.5,
            flash_gib_per_dollar: 1.0,
        }
    }
}

impl Prices {
    /// Checks both prices are positive and finite.
    pub fn validate(&self) -> Result<()> {
        let ok = |v: f64| v > 0.0 && v.is_finite();
        if !(ok(self.disk_iops_per_dollar) && ok(self.flash_gib_per_dollar)) {
            return Err(ProvisionError::BadParameter(format!(
                "prices must be positive: disk IOPS per dollar {}, flash GiB per dollar {}",
                self.disk_iops_per_dollar, self.flash_gib_per_dollar
            )));
        }
        Ok(())
    }

    /// The break-even point `I_d / G_f` in IOPS per GiB: a workload hotter
    /// than this is cheaper entirely on flash.
    pub fn break_even_iops_per_gib(&self) -> f64 {
        self.disk_iops_per_dollar / self.flash_gib_per_dollar
    }
}

/// The cost-optimal flash for one workload.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct CostOptimum {
    /// The workload's I/O density (reads + writes per second per GiB stored).
    pub iops_per_gib: f64,
    /// Whether the workload is above the break-even point (cheaper all on flash).
    pub above_break_even: bool,
    /// Cost-optimal flash bytes `x` minimising equation (1).
    pub flash_bytes: f64,
    /// The cost at that optimum (dollars of hardware).
    pub cost: f64,
    /// The cost all on disk (sized by IOPS): `(r + w) / I_d`.
    pub all_disk_cost: f64,
    /// The cost all on flash: `d / G_f`.
    pub all_flash_cost: f64,
    /// Savings over the better of all-disk and all-flash, in [0, 1).
    pub savings: f64,
}

/// Minimises `cost(x) = (r + w − φ(x)) / I_d + x / G_f` over `[0, d]`
/// (at a breakpoint, since φ is piecewise linear), and compares with the
/// all-disk and all-flash costs.
pub fn cost_optimum(
    curve: &CacheabilityCurve,
    read_ops_per_s: f64,
    write_ops_per_s: f64,
    prices: &Prices,
) -> CostOptimum {
    let ops = read_ops_per_s + write_ops_per_s;
    let id = prices.disk_iops_per_dollar;
    let gf = prices.flash_gib_per_dollar;
    let cost = |x: f64, phi: f64| (ops - phi).max(0.0) / id + x / GIB / gf;
    let mut best = (0.0, cost(0.0, 0.0));
    for (&x, &y) in curve.x.iter().zip(&curve.y) {
        let c = cost(x, y);
        if c < best.1 {
            best = (x, c);
        }
    }
    let all_disk = ops / id;
    let all_flash = curve.size() / GIB / gf;
    if all_flash < best.1 {
        best = (curve.size(), all_flash);
    }
    let single = all_disk.min(all_flash);
    let savings = if single > 0.0 {
        (1.0 - best.1 / single).max(0.0)
    } else {
        0.0
    };
    let gib = curve.size() / GIB;
    let iops_per_gib = if gib > 0.0 { ops / gib } else { f64::INFINITY };
    CostOptimum {
        iops_per_gib,
        above_break_even: iops_per_gib > prices.break_even_iops_per_gib(),
        flash_bytes: best.0,
        cost: best.1,
        all_disk_cost: all_disk,
        all_flash_cost: all_flash,
        savings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn break_even_of_the_paper() {
        assert_eq!(Prices::default().break_even_iops_per_gib(), 1.5);
    }

    #[test]
    fn steep_curve_buys_a_little_flash() {
        // 100 GiB; the youngest 1 GiB gets 90 of 100 reads/s.
        let c = CacheabilityCurve::from_points(vec![0.0, GIB, 100.0 * GIB], vec![0.0, 90.0, 100.0])
            .unwrap();
        let p = Prices::default();
        let o = cost_optimum(&c, 100.0, 0.0, &p);
        assert_eq!(o.flash_bytes, GIB);
        // 10/1.5 + 1 = 7.67 against min(66.7, 100).
        assert!((o.cost - (10.0 / 1.5 + 1.0)).abs() < 1e-9);
        assert!((o.savings - (1.0 - o.cost / (100.0 / 1.5))).abs() < 1e-12);
        assert!(!o.above_break_even);
        // A hot small workload goes all on flash.
        let hot = CacheabilityCurve::from_points(vec![0.0, GIB], vec![0.0, 50.0]).unwrap();
        let o = cost_optimum(&hot, 50.0, 10.0, &p);
        assert!(o.above_break_even);
        assert_eq!(o.flash_bytes, GIB);
        assert!((o.cost - 1.0).abs() < 1e-9);
    }
}
