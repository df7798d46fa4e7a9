//! The greedy allocation against an LP solver on random concave instances:
//! the objective of the greedy must equal the LP optimum of problem (2) of
//! the paper to 1e-9 relative.

use good_lp::{
    constraint, default_solver, variable, Expression, ProblemVariables, Solution as _, SolverModel,
};
use proptest::prelude::*;
use strata_provision::{allocate, CacheabilityCurve, Item};

/// A random concave increasing curve: positive segment lengths and
/// strictly decreasing positive slopes.
fn concave_curve() -> impl Strategy<Value = CacheabilityCurve> {
    (1usize..8)
        .prop_flat_map(|n| {
            (
                prop::collection::vec(0.1f64..100.0, n),
                prop::collection::vec(0.01f64..10.0, n),
            )
        })
        .prop_map(|(lens, mut slopes)| {
            slopes.sort_by(|a, b| b.total_cmp(a));
            slopes.dedup();
            let mut x = vec![0.0];
            let mut y = vec![0.0];
            for (l, s) in lens.iter().zip(&slopes) {
                let (lx, ly) = (*x.last().unwrap(), *y.last().unwrap());
                x.push(lx + l);
                y.push(ly + l * s);
            }
            CacheabilityCurve::from_points(x, y).unwrap()
        })
}

/// Problem (2): max Σ y_i s.t. y_i ≤ a_ij + b_ij x_i, Σ x_i ≤ F, 0 ≤ x_i ≤ d_i.
fn lp_optimum(curves: &[CacheabilityCurve], weights: &[f64], flash: f64) -> f64 {
    let mut vars = ProblemVariables::new();
    let xs: Vec<_> = curves
        .iter()
        .map(|c| vars.add(variable().min(0.0).max(c.size())))
        .collect();
    let ys: Vec<_> = curves.iter().map(|_| vars.add(variable())).collect();
    let objective: Expression = ys.iter().sum();
    let mut model = vars.maximise(objective).using(default_solver);
    for (i, c) in curves.iter().enumerate() {
        for j in 1..c.x.len() {
            let b = weights[i] * (c.y[j] - c.y[j - 1]) / (c.x[j] - c.x[j - 1]);
            let a = weights[i] * c.y[j - 1] - b * c.x[j - 1];
            model = model.with(constraint!(ys[i] <= a + b * xs[i]));
        }
    }
    let total: Expression = xs.iter().sum();
    model = model.with(constraint!(total <= flash));
    let sol = model.solve().expect("the LP is feasible and bounded");
    ys.iter().map(|&y| sol.value(y)).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn greedy_equals_lp(
        curves in prop::collection::vec(concave_curve(), 1..12),
        weights_seed in prop::collection::vec(0.1f64..5.0, 12),
        fraction in 0.0f64..1.2,
    ) {
        let weights: Vec<f64> = weights_seed[..curves.len()].to_vec();
        let total: f64 = curves.iter().map(|c| c.size()).sum();
        let flash = fraction * total;
        let items: Vec<Item<'_>> = curves
            .iter()
            .zip(&weights)
            .map(|(c, &w)| Item { curve: c, weight: w, write_rate: 1.0 })
            .collect();
        let greedy = allocate(&items, flash, None).unwrap();
        let lp = lp_optimum(&curves, &weights, flash);
        let rel = (greedy.objective - lp).abs() / lp.abs().max(1e-12);
        prop_assert!(rel <= 1e-9, "greedy {} lp {} rel {}", greedy.objective, lp, rel);
        // Concave curves: every write probability is 1 where flash is given.
        for (x, p) in greedy.flash.iter().zip(&greedy.write_probability) {
            prop_assert!(*x == 0.0 || (*p - 1.0).abs() < 1e-12);
        }
        prop_assert!(greedy.flash.iter().sum::<f64>() <= flash * (1.0 + 1e-12) + 1e-9);
        prop_assert_eq!(greedy.error_bound, 0.0);
    }
}
