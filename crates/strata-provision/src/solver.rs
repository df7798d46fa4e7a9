//! Flash allocation (§6 and §7).
//!
//! The bounded-write problem maximises `Σ ρ_i p_i φ_i(x_i/p_i)` subject to
//! `Σ x_i ≤ F` and `Σ p_i w_i ≤ W`. It is solved as the paper does:
//!
//! 1. the write bound is relaxed with a penalty λ per byte/s written
//!    (Lagrangian relaxation), and λ is found by bisection (the write rate
//!    of the relaxed optimum falls as λ grows);
//! 2. for a given λ, the write probability is eliminated:
//!    `h_i(x) = max(0, x · max_{z ∈ [x, d_i]} (ρ_i φ_i(z) − λ w_i) / z)`,
//!    piecewise linear with breakpoints at φ's breakpoints and at most two
//!    crossings per segment, computed in one backward pass;
//! 3. each `h_i` is replaced by its concave upper bound (upper hull);
//! 4. the separable concave problem is solved greedily: hull segments are
//!    taken in decreasing order of slope until the flash runs out. Instead of
//!    sorting every segment, a weighted quickselect finds the threshold
//!    slope in expected linear time.
//!
//! When a hull segment bridges a non-concave part of `h_i` and the greedy
//! stops inside it, the result can be below the optimum by at most that
//! last increment, which is reported as the error bound. Without a write
//! bound λ = 0, which is the weighted max-reads allocation of §6 (for a
//! concave φ, `h = ρφ` and every write probability is 1), extended with
//! write probabilities where φ is not concave (Figure 5).

use crate::curve::{interp, CacheabilityCurve};
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

#[derive(Clone, Copy, Debug)]
struct Seg {
    slope: f64,
    len: f64,
    item: u32,
    exact: bool,
}

/// Reusable buffers for repeated solves (bisection).
#[derive(Default)]
struct Work {
    hx: Vec<f64>,
    hy: Vec<f64>,
    suffix: Vec<f64>,
    hull: Vec<(f64, f64, bool)>,
    segs: Vec<Seg>,
    cand: Vec<f64>,
}

/// The result of one relaxed solve.
struct Relaxed {
    flash: Vec<f64>,
    error_bound: f64,
}

/// Computes `h^λ` for one item into `w.hx, w.hy` (cleared first).
fn h_points(it: &Item<'_>, c: f64, w: &mut Work) {
    let cv = it.curve;
    let rho = it.weight;
    let m = cv.x.len();
    w.hx.clear();
    w.hy.clear();
    w.hx.push(0.0);
    w.hy.push(0.0);
    if m < 2 {
        return;
    }
    // suffix[j] = max over breakpoints k ≥ j of (ρ y_k − c) / x_k.
    w.suffix.clear();
    w.suffix.resize(m + 1, f64::NEG_INFINITY);
    for j in (1..m).rev() {
        let r = (rho * cv.y[j] - c) / cv.x[j];
        w.suffix[j] = w.suffix[j + 1].max(r);
    }
    for k in 0..m - 1 {
        let (a, b) = (cv.x[k], cv.x[k + 1]);
        let ya = rho * cv.y[k];
        let s = (rho * cv.y[k + 1] - ya) / (b - a);
        let big_s = w.suffix[k + 1];
        let h = |x: f64| -> f64 {
            let l1 = ya + s * (x - a) - c;
            let l2 = x * big_s;
            l1.max(l2).max(0.0)
        };
        w.cand.clear();
        if big_s != s {
            let xc = (ya - s * a - c) / (big_s - s);
            if xc > a && xc < b {
                w.cand.push(xc);
            }
        }
        if s != 0.0 {
            let xc = a + (c - ya) / s;
            if xc > a && xc < b {
                w.cand.push(xc);
            }
        }
        if w.cand.len() == 2 && w.cand[0] > w.cand[1] {
            w.cand.swap(0, 1);
        }
        for i in 0..w.cand.len() {
            let x = w.cand[i];
            w.hx.push(x);
            w.hy.push(h(x));
        }
        w.hx.push(b);
        w.hy.push(h(b));
    }
}

/// Upper concave hull of `w.hx, w.hy`, appended as segments of item `item`.
/// A hull edge is exact when every point it replaced lies on it (collinear
/// points), i.e. the hull equals `h` along the edge.
fn hull_segments(item: u32, w: &mut Work) {
    w.hull.clear();
    for i in 0..w.hx.len() {
        let (px, py) = (w.hx[i], w.hy[i]);
        let mut exact = true;
        while w.hull.len() >= 2 {
            let (x1, y1, _) = w.hull[w.hull.len() - 2];
            let (x2, y2, e2) = w.hull[w.hull.len() - 1];
            // Pop the middle point if it lies on or below the chord.
            let cross = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1);
            let scale = ((x2 - x1).abs() * (py - y1).abs()).max((y2 - y1).abs() * (px - x1).abs());
            if cross >= -1e-12 * scale {
                let collinear = cross.abs() <= 1e-12 * scale;
                exact = exact && e2 && collinear;
                w.hull.pop();
            } else {
                break;
            }
        }
        w.hull.push((px, py, exact));
    }
    for k in 1..w.hull.len() {
        let (x0, y0, _) = w.hull[k - 1];
        let (x1, y1, exact) = w.hull[k];
        let len = x1 - x0;
        if len <= 0.0 {
            continue;
        }
        let slope = (y1 - y0) / len;
        if slope.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            break;
        }
        w.segs.push(Seg {
            slope,
            len,
            item,
            exact,
        });
    }
}

/// Greedy over all segments with a weighted quickselect; returns flash per
/// item and the error bound of the last partial step.
fn greedy(segs: &mut [Seg], n_items: usize, budget: f64) -> Relaxed {
    let mut flash = vec![0.0; n_items];
    let mut budget = budget;
    let mut error_bound = 0.0;
    let mut slice: &mut [Seg] = segs;
    while !slice.is_empty() && budget > 0.0 {
        // Median of three as the pivot slope.
        let n = slice.len();
        let (a, b, c) = (slice[0].slope, slice[n / 2].slope, slice[n - 1].slope);
        let pivot = a.min(b).max(a.max(b).min(c));
        // Three-way partition: [> pivot | == pivot | < pivot].
        let (mut lt, mut i, mut gt) = (0usize, 0usize, n);
        while i < gt {
            let s = slice[i].slope;
            if s > pivot {
                slice.swap(lt, i);
                lt += 1;
                i += 1;
            } else if s < pivot {
                gt -= 1;
                slice.swap(i, gt);
            } else {
                i += 1;
            }
        }
        let sum_gt: f64 = slice[..lt].iter().map(|s| s.len).sum();
        if sum_gt >= budget {
            // The threshold lies among the steeper segments (the pivot's own
            // group is not empty, so the slice shrinks).
            slice = &mut slice[..lt];
            continue;
        }
        for s in slice[..lt].iter() {
            flash[s.item as usize] += s.len;
        }
        budget -= sum_gt;
        let mut done = false;
        for s in slice[lt..gt].iter() {
            if s.len <= budget {
                flash[s.item as usize] += s.len;
                budget -= s.len;
            } else {
                flash[s.item as usize] += budget;
                if !s.exact {
                    error_bound = s.slope * budget;
                }
                budget = 0.0;
                done = true;
                break;
            }
        }
        if done {
            break;
        }
        let rest = std::mem::take(&mut slice);
        slice = &mut rest[gt..];
    }
    Relaxed { flash, error_bound }
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

struct Solver<'a, 'b> {
    items: &'b [Item<'a>],
    /// One work area per thread.
    work: Vec<Work>,
    segs: Vec<Seg>,
}

/// Items per thread below which one thread does everything (spawning costs
/// more than it saves).
const PARALLEL_MIN_ITEMS: usize = 512;

impl Solver<'_, '_> {
    fn new<'a, 'b>(items: &'b [Item<'a>]) -> Solver<'a, 'b> {
        let threads = if items.len() >= 2 * PARALLEL_MIN_ITEMS {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .clamp(1, 8)
        } else {
            1
        };
        Solver::with_threads(items, threads)
    }

    fn with_threads<'a, 'b>(items: &'b [Item<'a>], threads: usize) -> Solver<'a, 'b> {
        let threads = threads.max(1);
        Solver {
            items,
            work: (0..threads).map(|_| Work::default()).collect(),
            segs: Vec::new(),
        }
    }

    fn relaxed(&mut self, lambda: f64, flash: f64) -> Solution {
        let items = self.items;
        let n = items.len();
        let chunk = n.div_ceil(self.work.len()).max(1);
        // h^λ and its hull per item: independent, so split across threads.
        let hull_chunk = |base: usize, part: &[Item<'_>], w: &mut Work| {
            w.segs.clear();
            for (k, it) in part.iter().enumerate() {
                h_points(it, lambda * it.write_rate, w);
                hull_segments((base + k) as u32, w);
            }
        };
        if self.work.len() == 1 {
            hull_chunk(0, items, &mut self.work[0]);
        } else {
            std::thread::scope(|sc| {
                for (t, (part, w)) in items.chunks(chunk).zip(self.work.iter_mut()).enumerate() {
                    let f = &hull_chunk;
                    sc.spawn(move || f(t * chunk, part, w));
                }
            });
        }
        self.segs.clear();
        for w in &self.work {
            self.segs.extend_from_slice(&w.segs);
        }
        let r = greedy(&mut self.segs, n, flash);
        let mut sol = Solution {
            flash: r.flash,
            write_probability: vec![0.0; n],
            flash_reads: vec![0.0; n],
            objective: 0.0,
            write_rate: 0.0,
            lambda,
            error_bound: r.error_bound,
            iterations: 1,
        };
        // The write probability realising each h^λ(x_i).
        let finish = |part: &[Item<'_>], flash: &mut [f64], ps: &mut [f64], reads: &mut [f64]| {
            for (k, it) in part.iter().enumerate() {
                let x = flash[k].min(it.curve.size());
                flash[k] = x;
                let p = best_p(it, lambda * it.write_rate, x);
                ps[k] = p;
                reads[k] = if p > 0.0 {
                    p * it.curve.eval(x / p)
                } else {
                    0.0
                };
            }
        };
        if self.work.len() == 1 {
            finish(
                items,
                &mut sol.flash,
                &mut sol.write_probability,
                &mut sol.flash_reads,
            );
        } else {
            std::thread::scope(|sc| {
                let parts = items
                    .chunks(chunk)
                    .zip(sol.flash.chunks_mut(chunk))
                    .zip(sol.write_probability.chunks_mut(chunk))
                    .zip(sol.flash_reads.chunks_mut(chunk));
                for (((part, fl), ps), rd) in parts {
                    let f = &finish;
                    sc.spawn(move || f(part, fl, ps, rd));
                }
            });
        }
        for (i, it) in items.iter().enumerate() {
            sol.objective += it.weight * sol.flash_reads[i];
            sol.write_rate += sol.write_probability[i] * it.write_rate;
        }
        sol
    }
}

/// Evaluates `h^λ` of one item at `x` (exposed for tests and plots).
pub fn h_lambda(item: &Item<'_>, lambda: f64, x: f64) -> f64 {
    let mut w = Work::default();
    h_points(item, lambda * item.write_rate, &mut w);
    interp(&w.hx, &w.hy, x)
}

/// Allocates `flash` bytes among the items, maximising the weighted flash
/// read rate, with an optional bound on the total flash write rate
/// (bytes/s).
pub fn allocate(items: &[Item<'_>], flash: f64, write_bound: Option<f64>) -> Result<Solution> {
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
    let mut s = Solver::new(items);
    let sol0 = s.relaxed(0.0, flash);
    let Some(bound) = write_bound else {
        return Ok(sol0);
    };
    if sol0.write_rate <= bound {
        return Ok(sol0);
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
    let mut best = s.relaxed(hi, flash);
    let mut over = sol0;
    let mut iterations = 2;
    // λ can span many orders of magnitude between workloads: bisect on a
    // log scale while the bracket is wide, then arithmetically. Stop when
    // the write rate is within 1e-4 of the bound (the remaining slack is
    // negligible) or λ is known to 1e-9 relative.
    let floor = hi * 1e-12;
    for _ in 0..200 {
        if hi - lo <= 1e-9 * hi || best.write_rate >= bound * (1.0 - 1e-4) {
            break;
        }
        let mid = if hi > 16.0 * lo.max(floor) {
            (hi * lo.max(floor)).sqrt()
        } else {
            0.5 * (lo + hi)
        };
        let cand = s.relaxed(mid, flash);
        iterations += 1;
        if cand.write_rate <= bound {
            hi = mid;
            best = cand;
        } else {
            lo = mid;
            over = cand;
        }
    }
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
    Ok(best)
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
    fn threads_give_the_same_solution() {
        // Pseudo-random curves, some not concave, 3000 workloads.
        let mut z = 12345u64;
        let mut next = || {
            z ^= z << 13;
            z ^= z >> 7;
            z ^= z << 17;
            (z >> 11) as f64 / (1u64 << 53) as f64
        };
        let curves: Vec<CacheabilityCurve> = (0..3000)
            .map(|_| {
                let (mut x, mut y) = (vec![0.0], vec![0.0]);
                for k in 1..20 {
                    x.push(x[k - 1] + 1.0 + 100.0 * next());
                    y.push(y[k - 1] + 10.0 * next());
                }
                CacheabilityCurve::from_points(x, y).unwrap()
            })
            .collect();
        let items: Vec<Item<'_>> = curves
            .iter()
            .map(|c| Item {
                curve: c,
                weight: 1.0,
                write_rate: 1.0 + next(),
            })
            .collect();
        let total: f64 = curves.iter().map(|c| c.size()).sum();
        for lambda in [0.0, 0.5, 3.0] {
            let one = Solver::with_threads(&items, 1).relaxed(lambda, 0.1 * total);
            let four = Solver::with_threads(&items, 4).relaxed(lambda, 0.1 * total);
            assert_eq!(one, four);
        }
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
