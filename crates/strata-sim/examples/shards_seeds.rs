//! How SHARDS's error at a fixed rate depends on which keys the hash happens
//! to sample: runs fixed-rate SHARDS with many hash seeds over one trace
//! (held in memory), against the exact curve at 1..20% of the working set,
//! and prints the distribution of the mean absolute error (MAE) per variant:
//! request and byte mode, with and without SHARDS-adj, the paper's `d/R`
//! distance scaling or the own-weight-once scaling. "bias" is the MAE of the
//! mean curve over all seeds: near 0 when the estimator is unbiased and the
//! error is sampling variance, large when it is a systematic error.
//!
//! cargo run --release -p strata-sim --example shards_seeds -- TRACE [SEEDS] [RATE]

use strata_policy::Unit;
use strata_sim::mrc::{
    mean_absolute_error, CurvePoint, ExactMrc, Rescale, Shards, ShardsMode, DEFAULT_SEED,
};
use strata_sim::AccessSource;

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

struct Variant {
    name: String,
    unit: Unit,
    rescale: Rescale,
    adjust: bool,
    maes: Vec<f64>,
    sum_curve: Vec<f64>,
    default_mae: f64,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a: Vec<String> = std::env::args().collect();
    let Some(path) = a.get(1) else {
        eprintln!("usage: shards_seeds TRACE [SEEDS] [RATE]");
        std::process::exit(2);
    };
    let seeds: u64 = a.get(2).map_or(Ok(200), |s| s.parse())?;
    let rate: f64 = a.get(3).map_or(Ok(0.01), |s| s.parse())?;
    let mut trace: Vec<(u64, u64)> = Vec::new();
    for b in AccessSource::open(std::path::Path::new(path), None)? {
        trace.extend(b?.iter().map(|x| (x.key, x.size)));
    }
    // Working set (first-seen sizes) and the exact curves.
    let mut seen = std::collections::HashSet::new();
    let (mut objects, mut wss) = (0u64, 0u64);
    for &(k, s) in &trace {
        if seen.insert(k) {
            objects += 1;
            wss += s;
        }
    }
    let g20: Vec<u64> = (1..=20).map(|i| wss * i / 100).collect();
    let o20: Vec<u64> = (1..=20).map(|i| objects * i / 100).collect();
    let mut eb = ExactMrc::new(Unit::Bytes, &g20);
    let mut eo = ExactMrc::new(Unit::Objects, &[]);
    for &(k, s) in &trace {
        eb.access(k, s);
        eo.access(k, s);
    }
    let exact_b = eb.curve(&g20);
    let exact_o = eo.curve(&o20);
    println!(
        "{path}: {} requests, {objects} objects, {wss} B working set; rate {rate}, {seeds} seeds",
        trace.len()
    );
    let mut variants = Vec::new();
    for unit in [Unit::Objects, Unit::Bytes] {
        for rescale in [Rescale::Paper, Rescale::OwnWeightOnce] {
            for adjust in [false, true] {
                variants.push(Variant {
                    name: format!(
                        "{:<7} {:<13} {}",
                        match unit {
                            Unit::Objects => "objects",
                            Unit::Bytes => "bytes",
                        },
                        match rescale {
                            Rescale::Paper => "d/R",
                            Rescale::OwnWeightOnce => "w+(d-w)/R",
                        },
                        if adjust { "adj" } else { "plain" }
                    ),
                    unit,
                    rescale,
                    adjust,
                    maes: Vec::new(),
                    sum_curve: vec![0.0; 20],
                    default_mae: 0.0,
                });
            }
        }
    }
    // Seed 0 stands for the default seed; the others are 1..seeds.
    for i in 0..=seeds {
        let seed = if i == 0 { DEFAULT_SEED } else { i };
        let mut samplers: Vec<Shards> = Vec::new();
        for unit in [Unit::Objects, Unit::Bytes] {
            for rescale in [Rescale::Paper, Rescale::OwnWeightOnce] {
                samplers.push(
                    Shards::new(unit, ShardsMode::FixedRate(rate))
                        .with_seed(seed)
                        .with_rescale(rescale),
                );
            }
        }
        for &(k, s) in &trace {
            for sh in samplers.iter_mut() {
                sh.access(k, s);
            }
        }
        let mut samplers = samplers.into_iter();
        let mut j = 0;
        while j < variants.len() {
            let Some(mut sh) = samplers.next() else {
                break;
            };
            for adjust in [false, true] {
                sh = sh.with_adjustment(adjust);
                let v = &mut variants[j];
                assert_eq!(v.adjust, adjust);
                let (sizes, exact) = match v.unit {
                    Unit::Bytes => (&g20, &exact_b),
                    Unit::Objects => (&o20, &exact_o),
                };
                let c: Vec<CurvePoint> = sh.curve(sizes);
                let mae = mean_absolute_error(exact, &c);
                if i == 0 {
                    v.default_mae = mae;
                } else {
                    v.maes.push(mae);
                    for (acc, p) in v.sum_curve.iter_mut().zip(&c) {
                        *acc += p.miss_ratio;
                    }
                }
                let _ = v.rescale;
                j += 1;
            }
        }
    }
    println!(
        "| variant | mean MAE | median | p90 | max | bias (MAE of the mean curve) | default seed |"
    );
    println!("|---|---|---|---|---|---|---|");
    for v in &mut variants {
        let exact = match v.unit {
            Unit::Bytes => &exact_b,
            Unit::Objects => &exact_o,
        };
        let n = v.maes.len() as f64;
        let bias = exact
            .iter()
            .zip(&v.sum_curve)
            .map(|(e, s)| (s / n - e.miss_ratio).abs())
            .sum::<f64>()
            / exact.len() as f64;
        let mean = v.maes.iter().sum::<f64>() / n;
        let med = quantile(&mut v.maes, 0.5);
        let p90 = quantile(&mut v.maes, 0.9);
        let max = quantile(&mut v.maes, 1.0);
        println!(
            "| {} | {mean:.4} | {med:.4} | {p90:.4} | {max:.4} | {bias:.4} | {:.4} |",
            v.name, v.default_mae
        );
    }
    Ok(())
}
