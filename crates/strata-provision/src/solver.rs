//! Flash allocation (§6 and §7).
//!
//! The bounded-write problem maximises `Σ ρ_i p_i φ_i(x_i/p_i)` subject to
//! `Σ x_i ≤ F` and `Σ p_i w_i ≤ W`. It is solved as the paper does:
//!
//! 1. the write bound is relaxed with a penalty λ per byte/s written
//!    (Lagrangian relaxation), and λ is found by bisection (the write rate
//!    of the relaxed optimum falls as λ grows);
//! 2. for a given λ, the write probability is eliminated:
//!    `h_i(x) = max(0, x · max_{z ∈ [x, d_i]} (ρ_i φ_i(z) − λ w_i) / z)`;
//! 3. each `h_i` is replaced by its concave upper bound `ĥ_i`;
//! 4. the separable concave problem is solved greedily: segments of the
//!    `ĥ_i` are taken in decreasing order of slope until the flash runs out.
//!
//! The concave upper bound of `h_i^λ` does not need `h_i^λ`: with `ψ̂_i` the
//! upper hull of `ρ_i φ_i`, it is `x · max_{z ≥ x} (ψ̂_i(z) − c)/z` with
//! `c = λ w_i` (the perspective of a concave function is concave, and every
//! point of it is a mix of points of `h_i`). For a concave `ψ̂` that is a
//! line from the origin to the hull vertex `z*` where a line from `(0, c)`
//! touches the hull, then `ψ̂ − c`. So the hulls are built once, their
//! edges sorted by slope once, and a relaxed problem costs a binary search
//! for `z*` per workload plus a merge of the `W` first steps into the
//! sorted edges up to where the flash runs out. [`reference`] keeps the
//! straightforward solver (build `h^λ` and its hull for every λ) as the
//! oracle the tests compare with.
//!
//! When a hull edge bridges a non-concave part of `h_i` and the greedy
//! stops inside it, the result can be below the optimum by at most that
//! last increment, which is reported as the error bound. Without a write
//! bound λ = 0, which is the weighted max-reads allocation of §6 (for a
//! concave φ, `h = ρφ` and every write probability is 1), extended with
//! write probabilities where φ is not concave (Figure 5).

pub mod reference;

use crate::curve::CacheabilityCurve;
use crate::error::{ProvisionError, Result};

/// One workload as the solver sees it.
#[derive(Clone, Copy, Debug)]
pub struct Item<'a> {
    /// The cacheability curve φ.
    pub curve: &'a CacheabilityCurve,
    /// The priority weight ρ (≥ 0).
    pub weight: f64,
    /// The rate of new bytes written, w (bytes/s).
    pub write_rate: f64,
}

/// An allocation and what it achieves.
#[derive(Clone, Debug, PartialEq)]
pub struct Solution {
    /// Flash bytes per item.
    pub flash: Vec<f64>,
    /// Write probability per item.
    pub write_probability: Vec<f64>,
    /// Predicted flash reads per second per item, `p φ(x/p)` (unweighted).
    pub flash_reads: Vec<f64>,
    /// The weighted objective `Σ ρ p φ(x/p)`.
    pub objective: f64,
    /// Flash write rate `Σ p w` (bytes/s).
    pub write_rate: f64,
    /// The penalty λ of the final relaxed problem (0 without a write bound).
    pub lambda: f64,
    /// Bound on the distance to the optimum of the relaxed problem caused
    /// by non-concave curves: the objective increment of the greedy's last,
    /// partial step when that step bridged a non-concave part (else 0).
    pub error_bound: f64,
    /// Relaxed problems solved (bisection steps + 1).
    pub iterations: u32,
}

/// One way of solving the relaxed problem for a given λ; the bisection
/// drives either solver.
trait Relaxation {
    /// What one relaxed solve leaves for the bisection.
    type Step;
    /// Solves the relaxed problem with penalty `lambda`.
    fn step(&mut self, lambda: f64) -> Self::Step;
    /// The flash write rate `Σ p w` of a step's optimum.
    fn write_rate(step: &Self::Step) -> f64;
    /// The full solution of a step.
    fn solution(&mut self, step: Self::Step) -> Solution;
}

/// A hull edge of one workload's `ρφ`.
#[derive(Clone, Copy, Debug)]
struct Edge {
    slope: f64,
    len: f64,
    item: u32,
    /// Index of the edge's right vertex among its workload's vertices.
    end: u32,
    /// The hull equals `ρφ` along the edge (it bridges nothing).
    exact: bool,
}

/// A workload's first step at a given λ: from 0 to `z*`, slope `r*`.
#[derive(Clone, Copy, Debug)]
struct First {
    slope: f64,
    len: f64,
    item: u32,
}

/// No flash is worth its writes for this workload at this λ.
const NONE: u32 = u32::MAX;

/// The fast solver: hulls of `ρφ` built once, edges sorted once (as far as
/// the greedy reaches).
struct Fast<'a, 'b> {
    items: &'b [Item<'a>],
    budget: f64,
    /// Workload `i`'s hull vertices are `vx[start[i]..start[i + 1]]`
    /// (and `vy`), the first being the origin; only edges of positive
    /// slope are kept.
    start: Vec<usize>,
    vx: Vec<f64>,
    vy: Vec<f64>,
    /// Every hull edge; `edges[..sorted]` are the steepest, in order, and
    /// no later edge is steeper than them. The greedy usually needs only a
    /// prefix, so the order is extended on demand instead of sorting all.
    edges: Vec<Edge>,
    sorted: usize,
    /// Per step: the index of `z*` among the workload's vertices, or NONE.
    jstar: Vec<u32>,
    firsts: Vec<First>,
    flash: Vec<f64>,
}

/// What one fast relaxed solve leaves for the bisection.
struct FastStep {
    lambda: f64,
    write_rate: f64,
}

/// Appends the upper hull of `(x_k, ρ y_k)` to `hull`: (x, y, exact) where
/// `exact` says every point the edge ending there replaced lies on it.
fn upper_hull(it: &Item<'_>, hull: &mut Vec<(f64, f64, bool)>) {
    hull.clear();
    let cv = it.curve;
    for (&px, &y) in cv.x.iter().zip(&cv.y) {
        let py = it.weight * y;
        let mut exact = true;
        while hull.len() >= 2 {
            let (x1, y1, _) = hull[hull.len() - 2];
            let (x2, y2, e2) = hull[hull.len() - 1];
            // Pop the middle point if it lies on or below the chord.
            let cross = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1);
            let scale = ((x2 - x1).abs() * (py - y1).abs()).max((y2 - y1).abs() * (px - x1).abs());
            if cross >= -1e-12 * scale {
                let collinear = cross.abs() <= 1e-12 * scale;
                exact = exact && e2 && collinear;
                hull.pop();
            } else {
                break;
            }
        }
        hull.push((px, py, exact));
    }
}

impl<'a, 'b> Fast<'a, 'b> {
    fn new(items: &'b [Item<'a>], budget: f64) -> Fast<'a, 'b> {
        let n = items.len();
        let total: usize = items.iter().map(|it| it.curve.x.len()).sum();
        let mut f = Fast {
            items,
            budget,
            start: Vec::with_capacity(n + 1),
            vx: Vec::with_capacity(total),
            vy: Vec::with_capacity(total),
            edges: Vec::with_capacity(total),
            sorted: 0,
            jstar: vec![NONE; n],
            firsts: Vec::with_capacity(n),
            flash: vec![0.0; n],
        };
        let mut hull = Vec::new();
        for (i, it) in items.iter().enumerate() {
            f.start.push(f.vx.len());
            if it.curve.x.len() < 2 {
                continue;
            }
            upper_hull(it, &mut hull);
            f.vx.push(hull[0].0);
            f.vy.push(hull[0].1);
            for k in 1..hull.len() {
                let (x0, y0, _) = hull[k - 1];
                let (x1, y1, exact) = hull[k];
                let len = x1 - x0;
                let slope = (y1 - y0) / len;
                // Flash beyond a flat or falling edge serves nothing more.
                if len <= 0.0 || slope.is_nan() || slope <= 0.0 {
                    break;
                }
                f.vx.push(x1);
                f.vy.push(y1);
                f.edges.push(Edge {
                    slope,
                    len,
                    item: i as u32,
                    end: k as u32,
                    exact,
                });
            }
        }
        f.start.push(f.vx.len());
        f
    }

    /// Extends the sorted prefix of `edges` (eightfold, so that a greedy
    /// that needs every edge selects only a few times before sorting).
    fn sort_more(&mut self) {
        // Slopes are positive, so their bit patterns sort as they do.
        let steeper = |e: &Edge| std::cmp::Reverse(e.slope.to_bits());
        let n = self.edges.len();
        let end = (8 * self.sorted).max(16384).min(n);
        let rest = &mut self.edges[self.sorted..];
        if end < n {
            rest.select_nth_unstable_by_key(end - self.sorted, steeper);
        }
        self.edges[self.sorted..end].sort_unstable_by_key(steeper);
        self.sorted = end;
    }

    /// The greedy for penalty `lambda` into `self.flash`; returns the item
    /// of the partial last step (if any) and the error bound.
    fn greedy(&mut self, lambda: f64) -> (Option<usize>, f64) {
        self.firsts.clear();
        for (i, it) in self.items.iter().enumerate() {
            self.jstar[i] = NONE;
            let (a, b) = (self.start[i], self.start[i + 1]);
            if b < a + 2 {
                continue;
            }
            let (vx, vy) = (&self.vx[a..b], &self.vy[a..b]);
            let c = lambda * it.write_rate;
            // The slope from (0, c) to vertex j rises up to z* and falls
            // after it (the hull is concave): binary search for the peak.
            let r = |j: usize| (vy[j] - c) / vx[j];
            let (mut lo, mut hi) = (1, vx.len() - 1);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if r(mid + 1) > r(mid) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            let mut slope = r(lo);
            if slope.is_nan() || slope <= 0.0 {
                continue;
            }
            if lo + 1 < vx.len() {
                // Rounding must not put the next edge before the first step.
                slope = slope.max((vy[lo + 1] - vy[lo]) / (vx[lo + 1] - vx[lo]));
            }
            self.jstar[i] = lo as u32;
            self.firsts.push(First {
                slope,
                len: vx[lo],
                item: i as u32,
            });
        }
        self.firsts
            .sort_unstable_by(|a, b| b.slope.total_cmp(&a.slope));
        self.flash.fill(0.0);
        let mut budget = self.budget;
        let mut error_bound = 0.0;
        let mut partial = None;
        let (mut fi, mut ei) = (0, 0);
        while budget > 0.0 {
            // Edges left of a workload's z* are covered by its first step.
            while ei < self.edges.len() {
                if ei == self.sorted {
                    self.sort_more();
                }
                let e = &self.edges[ei];
                if e.end > self.jstar[e.item as usize] {
                    break;
                }
                ei += 1;
            }
            let (slope, len, item, exact) = match (self.firsts.get(fi), self.edges.get(ei)) {
                (Some(f), e) if e.is_none_or(|e| f.slope >= e.slope) => {
                    fi += 1;
                    (f.slope, f.len, f.item as usize, true)
                }
                (_, Some(e)) => {
                    ei += 1;
                    (e.slope, e.len, e.item as usize, e.exact)
                }
                _ => break,
            };
            if len <= budget {
                self.flash[item] += len;
                budget -= len;
            } else {
                self.flash[item] += budget;
                if !exact {
                    error_bound = slope * budget;
                }
                partial = Some(item);
                budget = 0.0;
            }
        }
        (partial, error_bound)
    }
}

impl Relaxation for Fast<'_, '_> {
    type Step = FastStep;

    fn step(&mut self, lambda: f64) -> FastStep {
        let (partial, _) = self.greedy(lambda);
        // Every workload but the partial one ends on a vertex of its hull
        // at or after z*, where the best write probability is 1.
        let mut write_rate = 0.0;
        for (i, it) in self.items.iter().enumerate() {
            let x = self.flash[i];
            if x > 0.0 {
                let p = if partial == Some(i) {
                    finish_item(it, lambda, x).1
                } else {
                    1.0
                };
                write_rate += p * it.write_rate;
            }
        }
        FastStep { lambda, write_rate }
    }

    fn write_rate(step: &FastStep) -> f64 {
        step.write_rate
    }

    fn solution(&mut self, step: FastStep) -> Solution {
        let lambda = step.lambda;
        let (_, error_bound) = self.greedy(lambda);
        let n = self.items.len();
        let mut sol = Solution {
            flash: vec![0.0; n],
            write_probability: vec![0.0; n],
            flash_reads: vec![0.0; n],
            objective: 0.0,
            write_rate: 0.0,
            lambda,
            error_bound,
            iterations: 1,
        };
        for (i, it) in self.items.iter().enumerate() {
            let (x, p, reads) = finish_item(it, lambda, self.flash[i]);
            sol.flash[i] = x;
            sol.write_probability[i] = p;
            sol.flash_reads[i] = reads;
            sol.objective += it.weight * reads;
            sol.write_rate += p * it.write_rate;
        }
        sol
    }
}

/// Clamps an allocation to the workload's size and finds the write
/// probability realising `h^λ(x)` and the flash reads it serves.
fn finish_item(it: &Item<'_>, lambda: f64, x: f64) -> (f64, f64, f64) {
    let x = x.min(it.curve.size());
    let p = best_p(it, lambda * it.write_rate, x);
    let reads = if p > 0.0 {
        p * it.curve.eval(x / p)
    } else {
        0.0
    };
    (x, p, reads)
}

/// The write probability that realises `h^λ(x)`: `x / z*` for the best
/// `z* ≥ x`, or 0 when no flash is worth its writes.
fn best_p(it: &Item<'_>, c: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let cv = it.curve;
    let rho = it.weight;
    let mut best_z = x;
    let mut best = (rho * cv.eval(x) - c) / x;
    let start = cv.x.partition_point(|&v| v <= x);
    for j in start..cv.x.len() {
        let r = (rho * cv.y[j] - c) / cv.x[j];
        if r > best * (1.0 + 1e-12) + 1e-300 {
            best = r;
            best_z = cv.x[j];
        }
    }
    if best <= 0.0 {
        return 0.0;
    }
    (x / best_z).min(1.0)
}

pub use reference::h_lambda;

/// Allocates `flash` bytes among the items, maximising the weighted flash
/// read rate, with an optional bound on the total flash write rate
/// (bytes/s).
pub fn allocate(items: &[Item<'_>], flash: f64, write_bound: Option<f64>) -> Result<Solution> {
    validate(items, flash, write_bound)?;
    Ok(bisect(&mut Fast::new(items, flash), items, write_bound))
}

/// Rejects parameters the solvers cannot use.
fn validate(items: &[Item<'_>], flash: f64, write_bound: Option<f64>) -> Result<()> {
    if !(flash.is_finite() && flash >= 0.0) {
        return Err(ProvisionError::BadParameter(format!(
            "the flash size must be a non-negative number of bytes, got {flash}"
        )));
    }
    if let Some(wb) = write_bound {
        if !(wb.is_finite() && wb >= 0.0) {
            return Err(ProvisionError::BadParameter(format!(
                "the write bound must be a non-negative rate, got {wb}"
            )));
        }
    }
    for it in items {
        if !(it.weight.is_finite() && it.weight >= 0.0) {
            return Err(ProvisionError::BadParameter(format!(
                "priority weights must be non-negative, got {}",
                it.weight
            )));
        }
        if !(it.write_rate.is_finite() && it.write_rate >= 0.0) {
            return Err(ProvisionError::BadParameter(format!(
                "write rates must be non-negative, got {}",
                it.write_rate
            )));
        }
    }
    Ok(())
}

/// Finds λ by bisection so that the relaxed optimum meets the write bound.
fn bisect<R: Relaxation>(s: &mut R, items: &[Item<'_>], write_bound: Option<f64>) -> Solution {
    let step0 = s.step(0.0);
    let Some(bound) = write_bound else {
        return s.solution(step0);
    };
    if R::write_rate(&step0) <= bound {
        return s.solution(step0);
    }
    // Above λ_max every h is 0 and nothing is written.
    let mut hi = items
        .iter()
        .filter(|it| it.write_rate > 0.0)
        .map(|it| it.weight * it.curve.max_reads() / it.write_rate)
        .fold(0.0, f64::max)
        * (1.0 + 1e-9)
        + 1e-300;
    let mut lo = 0.0;
    let mut best = s.step(hi);
    let mut over = step0;
    let mut iterations = 2;
    // λ can span many orders of magnitude between workloads: bisect on a
    // log scale while the bracket is wide, then arithmetically. Stop when
    // the write rate is within 1e-4 of the bound (the remaining slack is
    // negligible) or λ is known to 1e-9 relative.
    let floor = hi * 1e-12;
    for _ in 0..200 {
        if hi - lo <= 1e-9 * hi || R::write_rate(&best) >= bound * (1.0 - 1e-4) {
            break;
        }
        let mid = if hi > 16.0 * lo.max(floor) {
            (hi * lo.max(floor)).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        let cand = s.step(mid);
        iterations += 1;
        if R::write_rate(&cand) <= bound {
            hi = mid;
            best = cand;
        } else {
            lo = mid;
            over = cand;
        }
    }
    let mut best = s.solution(best);
    let over = s.solution(over);
    // The relaxed optimum's write rate jumps at λ* (at λ* itself every mix
    // of the solutions on both sides is optimal: a workload whose whole
    // worth equals its write penalty can be written with any probability).
    // Mixing the two, per workload (x, p) = θ·(x, p)_over + (1−θ)·(x, p)_under,
    // meets the bound exactly; the read rate p·φ(x/p) is a perspective of
    // φ, so with concave φ the mix reads at least the mix of the reads.
    if best.write_rate < bound * (1.0 - 1e-4) && over.write_rate > bound {
        let theta = (bound - best.write_rate) / (over.write_rate - best.write_rate);
        let mut mixed = best.clone();
        mixed.objective = 0.0;
        mixed.write_rate = 0.0;
        for (i, it) in items.iter().enumerate() {
            let x = theta * over.flash[i] + (1.0 - theta) * best.flash[i];
            let p = theta * over.write_probability[i] + (1.0 - theta) * best.write_probability[i];
            let reads = if p > 0.0 {
                p * it.curve.eval(x / p)
            } else {
                0.0
            };
            mixed.flash[i] = x;
            mixed.write_probability[i] = p;
            mixed.flash_reads[i] = reads;
            mixed.objective += it.weight * reads;
            mixed.write_rate += p * it.write_rate;
        }
        mixed.error_bound = best.error_bound.max(over.error_bound);
        if mixed.objective >= best.objective && mixed.write_rate <= bound * (1.0 + 1e-9) {
            best = mixed;
        }
    }
    best.iterations = iterations;
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig5() -> CacheabilityCurve {
        CacheabilityCurve::from_points(vec![0.0, 10.0, 20.0, 30.0], vec![0.0, 30.0, 45.0, 90.0])
            .unwrap()
    }

    /// The paper's Figure 5: with flash for two of three age blocks, writing
    /// 2/3 of new data keeps it until age 30 and serves 60 reads against 45
    /// when every new byte is written.
    #[test]
    fn figure_5() {
        let c = fig5();
        let it = Item {
            curve: &c,
            weight: 1.0,
            write_rate: 1.0,
        };
        let all_written = c.eval(20.0);
        assert_eq!(all_written, 45.0);
        let s = allocate(&[it], 20.0, None).unwrap();
        assert!((s.flash[0] - 20.0).abs() < 1e-9, "{s:?}");
        assert!((s.write_probability[0] - 2.0 / 3.0).abs() < 1e-12, "{s:?}");
        assert!((s.flash_reads[0] - 60.0).abs() < 1e-9, "{s:?}");
        // The write rate also falls by a third.
        assert!((s.write_rate - 2.0 / 3.0).abs() < 1e-12);
        // h at 20 is 60; at 10 it is 30 (still 1/3 of the blocks at 90/30 per byte).
        assert!((h_lambda(&it, 0.0, 20.0) - 60.0).abs() < 1e-9);
        assert!((h_lambda(&it, 0.0, 10.0) - 30.0).abs() < 1e-9);
    }

    #[test]
    fn write_bound_is_respected_and_costs_reads() {
        let a =
            CacheabilityCurve::from_points(vec![0.0, 50.0, 100.0], vec![0.0, 80.0, 100.0]).unwrap();
        let b =
            CacheabilityCurve::from_points(vec![0.0, 100.0, 400.0], vec![0.0, 60.0, 90.0]).unwrap();
        let items = [
            Item {
                curve: &a,
                weight: 1.0,
                write_rate: 10.0,
            },
            Item {
                curve: &b,
                weight: 1.0,
                write_rate: 40.0,
            },
        ];
        let free = allocate(&items, 150.0, None).unwrap();
        let mut prev = free.objective;
        for bound in [40.0, 30.0, 20.0, 10.0, 5.0, 0.0] {
            let s = allocate(&items, 150.0, Some(bound)).unwrap();
            assert!(s.write_rate <= bound + 1e-9, "{bound}: {s:?}");
            assert!(s.objective <= prev + 1e-9, "{bound}: {s:?}");
            assert!(s.flash.iter().sum::<f64>() <= 150.0 + 1e-9);
            prev = s.objective;
        }
        let zero = allocate(&items, 150.0, Some(0.0)).unwrap();
        assert_eq!(zero.objective, 0.0);
    }

    #[test]
    fn write_bound_below_a_jump_is_met_by_mixing() {
        // One steep workload: its relaxed optimum writes everything (p = 1
        // at its knee) until λw reaches φ(d), then nothing. A bound of 80%
        // of its writes is met by writing 80% of its objects.
        let a =
            CacheabilityCurve::from_points(vec![0.0, 10.0, 100.0], vec![0.0, 10.0, 10.5]).unwrap();
        let items = [Item {
            curve: &a,
            weight: 1.0,
            write_rate: 10.0,
        }];
        let s = allocate(&items, 50.0, Some(8.0)).unwrap();
        assert!((s.write_rate - 8.0).abs() < 1e-6, "{s:?}");
        // p = 0.8 with the same TTL: 80% of the reads the knee serves, or more.
        assert!(s.objective >= 0.8 * 10.0 - 1e-6, "{s:?}");
        assert!(s.flash.iter().sum::<f64>() <= 50.0 + 1e-9);
    }

    #[test]
    fn weights_shift_flash() {
        let a = CacheabilityCurve::from_points(vec![0.0, 100.0], vec![0.0, 100.0]).unwrap();
        let b = CacheabilityCurve::from_points(vec![0.0, 100.0], vec![0.0, 50.0]).unwrap();
        let items = [
            Item {
                curve: &a,
                weight: 1.0,
                write_rate: 1.0,
            },
            Item {
                curve: &b,
                weight: 3.0,
                write_rate: 1.0,
            },
        ];
        let s = allocate(&items, 100.0, None).unwrap();
        assert_eq!(s.flash, vec![0.0, 100.0]);
        assert!((s.objective - 150.0).abs() < 1e-9);
    }

    #[test]
    fn non_concave_error_bound() {
        // A convex curve: the hull is one chord, and stopping inside it is
        // bounded by the last increment.
        let c =
            CacheabilityCurve::from_points(vec![0.0, 10.0, 20.0], vec![0.0, 1.0, 100.0]).unwrap();
        let d = CacheabilityCurve::from_points(vec![0.0, 20.0], vec![0.0, 10.0]).unwrap();
        let items = [
            Item {
                curve: &c,
                weight: 1.0,
                write_rate: 0.0,
            },
            Item {
                curve: &d,
                weight: 1.0,
                write_rate: 0.0,
            },
        ];
        let s = allocate(&items, 15.0, None).unwrap();
        // With write probabilities, h(x) = x·100/20 = 5x is linear: exact.
        assert!((s.objective - 75.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.error_bound, 0.0);
    }

    #[test]
    fn bridged_hull_reports_last_increment() {
        // h = 5x up to 10, then max(φ, x·10/3): not concave; the hull
        // bridges (10, 50)–(30, 100) with slope 2.5.
        let c = CacheabilityCurve::from_points(
            vec![0.0, 10.0, 20.0, 30.0],
            vec![0.0, 50.0, 55.0, 100.0],
        )
        .unwrap();
        let it = Item {
            curve: &c,
            weight: 1.0,
            write_rate: 0.0,
        };
        let s = allocate(&[it], 20.0, None).unwrap();
        assert!((s.flash[0] - 20.0).abs() < 1e-9);
        assert!((s.error_bound - 25.0).abs() < 1e-9, "{s:?}");
        assert!((s.objective - 200.0 / 3.0).abs() < 1e-9, "{s:?}");
        // The true optimum (here: 20 bytes, p = 2/3) lies within the bound.
        assert!(s.objective + s.error_bound >= 75.0 - 1e-9);
        assert!((s.write_probability[0] - 2.0 / 3.0).abs() < 1e-12);
    }
}
