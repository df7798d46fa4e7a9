//! The straightforward bounded-write solver, kept as the oracle of the
//! fast one in the parent module and as its benchmark baseline.
//!
//! For every λ it builds each `h_i^λ` point by point, takes its upper hull
//! and runs a weighted quickselect over all hull segments: O(total
//! breakpoints) per relaxed problem, on up to eight threads. The parent
//! module's solver reaches the same allocations from hulls built once.

use super::{bisect, finish_item, validate, Item, Relaxation, Solution};
use crate::curve::interp;
use crate::error::Result;

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

struct Solver<'a, 'b> {
    items: &'b [Item<'a>],
    /// The flash to allocate.
    budget: f64,
    /// One work area per thread.
    work: Vec<Work>,
    segs: Vec<Seg>,
}

/// Items per thread below which one thread does everything (spawning costs
/// more than it saves).
const PARALLEL_MIN_ITEMS: usize = 512;

impl Solver<'_, '_> {
    fn new<'a, 'b>(items: &'b [Item<'a>], budget: f64) -> Solver<'a, 'b> {
        let threads = if items.len() >= 2 * PARALLEL_MIN_ITEMS {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
                .clamp(1, 8)
        } else {
            1
        };
        Solver::with_threads(items, budget, threads)
    }

    fn with_threads<'a, 'b>(items: &'b [Item<'a>], budget: f64, threads: usize) -> Solver<'a, 'b> {
        let threads = threads.max(1);
        Solver {
            items,
            budget,
            work: (0..threads).map(|_| Work::default()).collect(),
            segs: Vec::new(),
        }
    }

    fn relaxed(&mut self, lambda: f64) -> Solution {
        let flash = self.budget;
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
                (flash[k], ps[k], reads[k]) = finish_item(it, lambda, flash[k]);
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

impl Relaxation for Solver<'_, '_> {
    type Step = Solution;

    fn step(&mut self, lambda: f64) -> Solution {
        self.relaxed(lambda)
    }

    fn write_rate(step: &Solution) -> f64 {
        step.write_rate
    }

    fn solution(&mut self, step: Solution) -> Solution {
        step
    }
}

/// [`super::allocate`] by the straightforward method: the same bisection
/// on λ, but every relaxed problem rebuilds each `h^λ` and its hull and
/// selects over all their segments.
pub fn allocate_reference(
    items: &[Item<'_>],
    flash: f64,
    write_bound: Option<f64>,
) -> Result<Solution> {
    validate(items, flash, write_bound)?;
    Ok(bisect(&mut Solver::new(items, flash), items, write_bound))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CacheabilityCurve;

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
            let one = Solver::with_threads(&items, 0.1 * total, 1).relaxed(lambda);
            let four = Solver::with_threads(&items, 0.1 * total, 4).relaxed(lambda);
            assert_eq!(one, four);
        }
    }
}
