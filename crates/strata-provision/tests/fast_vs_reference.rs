//! The fast solver (hulls of ρφ built once, one merge per λ) against the
//! straightforward one (h^λ and its hull rebuilt for every λ) on random
//! instances: curves that are concave, convex, bumpy or flat in places,
//! with and without a write bound, must get the same allocation, write
//! probabilities, reads and λ.

use proptest::prelude::*;
use strata_provision::solver::reference::allocate_reference;
use strata_provision::{allocate, CacheabilityCurve, Item, Solution};

/// A random increasing curve: each segment's read density is drawn from
/// a falling trend, times a random bump (late reads) or, with `flats`,
/// zero (a flat run).
fn curve(flats: bool) -> impl Strategy<Value = CacheabilityCurve> {
    (
        2usize..12,
        prop::collection::vec((0.1f64..100.0, 0.0f64..1.0, 0u8..10), 11),
        0.01f64..10.0,
    )
        .prop_map(move |(n, segs, d0)| {
            let (mut x, mut y) = (vec![0.0], vec![0.0]);
            let mut density = d0;
            for &(len, u, kind) in &segs[..n - 1] {
                density *= 0.5 + 0.5 * u;
                let d = match kind {
                    0 if flats => 0.0,
                    1 | 2 => density * (1.0 + 20.0 * u),
                    _ => density,
                };
                x.push(x.last().unwrap() + len);
                y.push(y.last().unwrap() + d * len);
            }
            CacheabilityCurve::from_points(x, y).unwrap()
        })
}

fn close(a: f64, b: f64, scale: f64) -> bool {
    (a - b).abs() <= 1e-9 * scale.max(1e-12)
}

/// The two must agree to 1e-9 relative, except where the optimum is not
/// unique:
/// - flash serving nothing: the straightforward solver's `h^λ` can rise
///   by a rounding error along a flat end of φ and so give it flash (same
///   p, same reads);
/// - the write probability of a workload whose flash holds only part of
///   φ's first segment: there `p φ(x/p)` is the same for every p that
///   keeps `x/p` on that segment. With a write bound between the write
///   rates at λ = 0 and just above it, both solvers bisect to λ ≈ 0 and mix
///   the two sides in proportions that rounding decides.
fn assert_same(
    items: &[Item<'_>],
    fast: &Solution,
    slow: &Solution,
    flash: f64,
) -> Result<(), TestCaseError> {
    let total_flash = flash.max(fast.flash.iter().sum::<f64>());
    let reads_scale = slow.objective.abs().max(1e-9);
    prop_assert!(
        close(fast.objective, slow.objective, reads_scale),
        "objective fast {} slow {}",
        fast.objective,
        slow.objective
    );
    // λ is found to where the allocation changes; when λ·w is tiny beside
    // the read rates that point moves with rounding, so λ is compared by
    // what it costs: its penalty on the writes, against the reads.
    let total_writes: f64 = items.iter().map(|it| it.write_rate).sum();
    prop_assert!(
        close(fast.lambda, slow.lambda, slow.lambda.max(1e-300))
            || (fast.lambda - slow.lambda).abs() * total_writes <= 1e-9 * reads_scale,
        "lambda fast {} slow {}",
        fast.lambda,
        slow.lambda
    );
    prop_assert_eq!(fast.iterations, slow.iterations);
    // The bound is the objective increment of a partial last step over a
    // non-concave part; where the bisection ends, one solver's last step
    // can leave a budget of rounding size on such a part and the other's
    // none: a bound of ~1e-9 of the objective against 0 (the saved case:
    // 1.1e-8 against 0 beside an objective of 9.35, the solutions equal
    // to the last digit). So bounds agree to 1e-8 of the objective.
    prop_assert!(
        close(fast.error_bound, slow.error_bound, 10.0 * reads_scale),
        "error bound fast {} slow {}",
        fast.error_bound,
        slow.error_bound
    );
    let mut all_same_p = true;
    for (i, it) in items.iter().enumerate() {
        let p = slow.write_probability[i];
        let flat = p > 0.0
            && close(
                it.curve.eval(fast.flash[i] / p),
                it.curve.eval(slow.flash[i] / p),
                it.curve.max_reads(),
            );
        prop_assert!(
            close(fast.flash[i], slow.flash[i], total_flash) || flat,
            "flash[{}] fast {} slow {}",
            i,
            fast.flash[i],
            slow.flash[i]
        );
        let on_first_segment = |sol: &Solution| {
            let c = it.curve;
            let p = sol.write_probability[i];
            p > 0.0 && sol.flash[i] / p <= c.x[1] * (1.0 + 1e-9)
        };
        let same_p = close(fast.write_probability[i], slow.write_probability[i], 1.0);
        prop_assert!(
            same_p || (on_first_segment(fast) && on_first_segment(slow)),
            "p[{}] fast {} slow {}",
            i,
            fast.write_probability[i],
            slow.write_probability[i]
        );
        all_same_p &= same_p;
        prop_assert!(
            close(fast.flash_reads[i], slow.flash_reads[i], reads_scale),
            "reads[{}] fast {} slow {}",
            i,
            fast.flash_reads[i],
            slow.flash_reads[i]
        );
    }
    prop_assert!(
        !all_same_p || close(fast.write_rate, slow.write_rate, slow.write_rate.max(1e-9)),
        "write rate fast {} slow {}",
        fast.write_rate,
        slow.write_rate
    );
    Ok(())
}

/// Random instances with and without a write bound: the solutions of the
/// fast solver and of the reference; with `degenerate`, some workloads
/// weigh nothing, some write nothing, and curves have flat runs.
fn solve_both(
    curves: &[CacheabilityCurve],
    params: &[(f64, f64, u8)],
    degenerate: bool,
    fraction: f64,
    bound_fraction: Option<f64>,
    check: impl Fn(&[Item<'_>], &Solution, &Solution, f64) -> Result<(), TestCaseError>,
) -> Result<(), TestCaseError> {
    let items: Vec<Item<'_>> = curves
        .iter()
        .zip(params)
        .map(|(c, &(w, wr, kind))| Item {
            curve: c,
            weight: if degenerate && kind == 0 {
                0.0
            } else {
                0.1 + w
            },
            write_rate: if degenerate && kind == 1 {
                0.0
            } else {
                1.0 + wr
            },
        })
        .collect();
    let total: f64 = curves.iter().map(|c| c.size()).sum();
    let flash = fraction * total;
    let free = allocate_reference(&items, flash, None).unwrap();
    check(
        &items,
        &allocate(&items, flash, None).unwrap(),
        &free,
        flash,
    )?;
    if let Some(b) = bound_fraction {
        let bound = b * free.write_rate;
        let slow = allocate_reference(&items, flash, Some(bound)).unwrap();
        let fast = allocate(&items, flash, Some(bound)).unwrap();
        check(&items, &fast, &slow, flash)?;
        prop_assert!(fast.write_rate <= bound * (1.0 + 1e-9) + 1e-12);
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Generic instances (no ties): the same allocation.
    #[test]
    fn fast_equals_reference(
        curves in prop::collection::vec(curve(false), 1..40),
        params in prop::collection::vec((0.0f64..5.0, 0.0f64..1e3, 0u8..8), 40),
        fraction in 0.0f64..1.1,
        bound_fraction in prop::option::of(0.0f64..1.2),
    ) {
        solve_both(&curves, &params, false, fraction, bound_fraction, assert_same)?;
    }

    /// Degenerate instances (flat runs, zero weights and write rates):
    /// where many allocations are optimal the two may pick different
    /// ones, but with the same objective, within the flash and the bound.
    #[test]
    fn fast_is_as_good_as_reference_on_ties(
        curves in prop::collection::vec(curve(true), 1..40),
        params in prop::collection::vec((0.0f64..5.0, 0.0f64..1e3, 0u8..8), 40),
        fraction in 0.0f64..1.1,
        bound_fraction in prop::option::of(0.0f64..1.2),
    ) {
        solve_both(&curves, &params, true, fraction, bound_fraction, |_, fast, slow, flash| {
            prop_assert!(
                close(fast.objective, slow.objective, slow.objective.abs().max(1e-9)),
                "objective fast {} slow {}",
                fast.objective,
                slow.objective
            );
            prop_assert!(fast.flash.iter().sum::<f64>() <= flash * (1.0 + 1e-12) + 1e-9);
            Ok(())
        })?;
    }
}

/// Thousands of workloads with a hundred breakpoints, the shape of the
/// solver benchmark, at several write bounds.
#[test]
fn fast_equals_reference_at_scale() {
    let mut z = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        z ^= z << 13;
        z ^= z >> 7;
        z ^= z << 17;
        (z >> 11) as f64 / (1u64 << 53) as f64
    };
    let curves: Vec<CacheabilityCurve> = (0..2000)
        .map(|i| {
            let (mut x, mut y) = (vec![0.0], vec![0.0]);
            let mut density = next() * 10.0 + 0.1;
            for k in 1..100 {
                let len = next() * 1e9 + 1e6;
                density *= 0.6 + 0.35 * next();
                let d = if i % 10 == 0 && k == 50 {
                    density * 20.0
                } else {
                    density
                };
                x.push(x[k - 1] + len);
                y.push(y[k - 1] + d * len / 1e9);
            }
            CacheabilityCurve::from_points(x, y).unwrap()
        })
        .collect();
    let items: Vec<Item<'_>> = curves
        .iter()
        .map(|c| Item {
            curve: c,
            weight: 0.5 + next(),
            write_rate: next() * 1e6 + 1e3,
        })
        .collect();
    let total: f64 = curves.iter().map(|c| c.size()).sum();
    for fraction in [0.01, 0.05, 0.3] {
        let flash = fraction * total;
        let free = allocate_reference(&items, flash, None).unwrap();
        let fast = allocate(&items, flash, None).unwrap();
        assert_same(&items, &fast, &free, flash).unwrap();
        for b in [0.9, 0.5, 0.1] {
            let bound = b * free.write_rate;
            let slow = allocate_reference(&items, flash, Some(bound)).unwrap();
            let fast = allocate(&items, flash, Some(bound)).unwrap();
            assert_same(&items, &fast, &slow, flash).unwrap();
            assert!(
                slow.iterations > 2,
                "the bound must make the bisection work"
            );
        }
    }
}
