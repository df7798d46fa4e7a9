//! Agreement with libCacheSim: every cell of ../shared/traces/EXPECTED.md
//! (request, byte and object-mode miss ratios of lru, fifo, arc, s3fifo,
//! lirs, twoq, clock, sieve at 1/5/10/20% of the working set) reproduced to
//! 4 decimals. Each trace is read once: the same pass feeds every simulated
//! cache (`strata_sim::run`), separate LRU runs at a grid of sizes, the
//! exact MRC in both modes and 1% SHARDS, so the exact curve is compared
//! with LRU runs and SHARDS with the exact curve on the same requests.

mod common;

use common::{expected, r4, traces};
use strata_policy::{PolicySpec, Unit};
use strata_sim::mrc::{mean_absolute_error, CurvePoint, ExactMrc, Shards, ShardsMode};
use strata_sim::{run, AccessSource, RunOptions, SimConfig};

struct Outcome {
    failures: Vec<String>,
    exact_vs_lru: Vec<String>,
    shards_mae: [f64; 2],
    /// Object-mode 1% SHARDS over many hash seeds: (median MAE, p90 MAE,
    /// MAE of the mean curve), for the traces read with a 20-point grid.
    seeds: Option<(f64, f64, f64)>,
}

const SEEDS: u64 = 100;

/// 1% SHARDS (object mode, with SHARDS-adj) with hash seeds 1..=SEEDS
/// against the exact curve at `sizes`.
fn seed_study(stream: &[(u64, u64)], exact: &[CurvePoint], sizes: &[u64]) -> (f64, f64, f64) {
    let mut maes = Vec::new();
    let mut mean = vec![0.0; sizes.len()];
    for seed in 1..=SEEDS {
        let mut sh = Shards::new(Unit::Objects, ShardsMode::FixedRate(0.01)).with_seed(seed);
        for &(k, b) in stream {
            sh.access(k, b);
        }
        let c = sh.curve(sizes);
        maes.push(mean_absolute_error(exact, &c));
        for (m, p) in mean.iter_mut().zip(&c) {
            *m += p.miss_ratio / SEEDS as f64;
        }
    }
    maes.sort_by(|a, b| a.total_cmp(b));
    let bias = mean
        .iter()
        .zip(exact)
        .map(|(m, e)| (m - e.miss_ratio).abs())
        .sum::<f64>()
        / exact.len() as f64;
    (maes[maes.len() / 2], maes[(maes.len() * 9) / 10], bias)
}

fn pct(whole: u64, p: f64) -> u64 {
    (whole as f64 * p / 100.0) as u64
}

/// `grid_points`: how many LRU sizes (k% for k in 1..=n) to compare the exact
/// curve with, on top of the EXPECTED.md sizes.
fn check_trace(file: &str, heading: &str, grid_points: u32) -> Outcome {
    let path = traces().join(file);
    let exp = expected(heading);
    let byte_sizes: Vec<u64> = [1.0, 5.0, 10.0, 20.0]
        .iter()
        .map(|&p| pct(exp.wss, p))
        .collect();
    assert_eq!(byte_sizes, exp.sizes, "{file}: 1/5/10/20% of the WSS");
    let obj_sizes: Vec<u64> = [1.0, 5.0, 10.0, 20.0]
        .iter()
        .map(|&p| pct(exp.objects, p))
        .collect();
    let mut configs = Vec::new();
    for (name, _) in &exp.rows {
        let spec: PolicySpec = name.parse().expect("policy name");
        for i in 0..4 {
            configs.push(SimConfig::single(spec.clone(), byte_sizes[i], Unit::Bytes));
            configs.push(SimConfig::single(spec.clone(), obj_sizes[i], Unit::Objects));
        }
    }
    let n_expected = configs.len();
    let grid: Vec<u64> = (1..=grid_points).map(|i| pct(exp.wss, i as f64)).collect();
    let obj_grid: Vec<u64> = (1..=grid_points)
        .map(|i| pct(exp.objects, i as f64))
        .collect();
    for &c in &grid {
        configs.push(SimConfig::single(PolicySpec::Lru, c, Unit::Bytes));
    }
    for &c in &obj_grid {
        configs.push(SimConfig::single(PolicySpec::Lru, c, Unit::Objects));
    }
    let all_bytes: Vec<u64> = grid.iter().chain(&byte_sizes).copied().collect();
    let mut exact_b = ExactMrc::new(Unit::Bytes, &all_bytes);
    let mut exact_o = ExactMrc::new(Unit::Objects, &[]);
    let mut shards_b = Shards::new(Unit::Bytes, ShardsMode::FixedRate(0.01));
    let mut shards_o = Shards::new(Unit::Objects, ShardsMode::FixedRate(0.01));
    let keep = grid_points >= 20;
    let mut stream: Vec<(u64, u64)> = Vec::new();
    let src = AccessSource::open(&path, None).expect("open").inspect(|b| {
        if let Ok(b) = b {
            for a in b {
                exact_b.access(a.key, a.size);
                exact_o.access(a.key, a.size);
                shards_b.access(a.key, a.size);
                shards_o.access(a.key, a.size);
                if keep {
                    stream.push((a.key, a.size));
                }
            }
        }
    });
    let reports = run(src, &configs, &RunOptions::default(), |_| {}).expect("simulate");
    assert_eq!(reports[0].requests, exp.requests, "{file}: requests");
    assert_eq!(
        exact_o.distinct_objects(),
        exp.objects,
        "{file}: distinct objects"
    );

    let mut failures = Vec::new();
    for ((name, cells), chunk) in exp.rows.iter().zip(reports[..n_expected].chunks(8)) {
        for (i, &(req, byte, obj)) in cells.iter().enumerate() {
            let (b, o) = (&chunk[2 * i], &chunk[2 * i + 1]);
            let got = (r4(b.miss_ratio), r4(b.byte_miss_ratio), r4(o.miss_ratio));
            let want = (r4(req), r4(byte), r4(obj));
            if got != want {
                failures.push(format!(
                    "{file} {name} at {} B / {} obj: got {got:?}, EXPECTED.md says {want:?}",
                    b.cache_size, o.cache_size
                ));
            }
        }
    }

    // The exact curve against separate LRU runs at the same sizes: the grid
    // runs, and the lru rows of the table (the first 8 reports).
    let mut exact_vs_lru = Vec::new();
    let mut pairs: Vec<(u64, Unit, &strata_sim::SimReport)> = Vec::new();
    for i in 0..4 {
        pairs.push((byte_sizes[i], Unit::Bytes, &reports[2 * i]));
        pairs.push((obj_sizes[i], Unit::Objects, &reports[2 * i + 1]));
    }
    let grid_reports = &reports[n_expected..];
    for (i, &c) in grid.iter().enumerate() {
        pairs.push((c, Unit::Bytes, &grid_reports[i]));
    }
    for (i, &c) in obj_grid.iter().enumerate() {
        pairs.push((c, Unit::Objects, &grid_reports[grid.len() + i]));
    }
    for (size, unit, r) in pairs {
        assert_eq!(r.policy, "lru");
        assert_eq!(r.cache_size, size);
        // Byte mode equals LRU exactly only when objects keep their size
        // (CloudPhysics block extents change size; see docs/simulator.md).
        if unit == Unit::Bytes && file.contains("cloudPhysics") {
            continue;
        }
        let p = match unit {
            Unit::Bytes => exact_b.curve(&[size])[0],
            Unit::Objects => exact_o.curve(&[size])[0],
        };
        if p.miss_ratio != r.miss_ratio || p.byte_miss_ratio != r.byte_miss_ratio {
            exact_vs_lru.push(format!(
                "{file} {unit:?} at {size}: exact {} / {}, LRU run {} / {}",
                p.miss_ratio, p.byte_miss_ratio, r.miss_ratio, r.byte_miss_ratio
            ));
        }
    }
    // SHARDS at 1% against the exact curve at 1..20% of the working set.
    let g20: Vec<u64> = (1..=20).map(|i| pct(exp.wss, i as f64)).collect();
    let o20: Vec<u64> = (1..=20).map(|i| pct(exp.objects, i as f64)).collect();
    let eb = if grid_points >= 20 {
        exact_b.curve(&g20)
    } else {
        // The byte curve is exact only on its grid; the 10M run's grid is
        // the table's four sizes, so compare SHARDS there.
        exact_b.curve(&byte_sizes)
    };
    let sb = if grid_points >= 20 {
        shards_b.curve(&g20)
    } else {
        shards_b.curve(&byte_sizes)
    };
    let shards_mae = [
        mean_absolute_error(&eb, &sb),
        mean_absolute_error(&exact_o.curve(&o20), &shards_o.curve(&o20)),
    ];
    let seeds = keep.then(|| seed_study(&stream, &exact_o.curve(&o20), &o20));
    Outcome {
        failures,
        exact_vs_lru,
        shards_mae,
        seeds,
    }
}

#[test]
fn cloudphysics_matches_libcachesim_and_exact_mrc_equals_lru() {
    let o = check_trace("cloudPhysicsIO.vscsi", "cloudPhysicsIO", 20);
    assert!(o.failures.is_empty(), "{}", o.failures.join("\n"));
    assert!(o.exact_vs_lru.is_empty(), "{}", o.exact_vs_lru.join("\n"));
    // 1% SHARDS on this 49K-object trace samples ~490 objects and ~1,100
    // requests: its error is sampling variance (docs/simulator.md). Over
    // many seeds the estimator is unbiased, but a typical single sample is
    // several points off; fixed-size SHARDS is the mode for such traces.
    let (median, p90, bias) = o.seeds.expect("seed study");
    eprintln!(
        "cloudPhysics SHARDS 1% MAE (bytes, objects): {:?}; over {SEEDS} seeds: median {median:.4}, p90 {p90:.4}, mean curve off by {bias:.4}",
        o.shards_mae
    );
    assert!(bias < 0.008, "mean of the sampled curves off by {bias}");
    assert!(median < 0.05, "median MAE {median}");
}

#[test]
fn twitter_1m_matches_libcachesim_and_exact_mrc_equals_lru() {
    let o = check_trace("twitter_cluster52.csv", "twitter_cluster52.csv", 20);
    assert!(o.failures.is_empty(), "{}", o.failures.join("\n"));
    assert!(o.exact_vs_lru.is_empty(), "{}", o.exact_vs_lru.join("\n"));
    // 1% of 143K objects is ~1.4K sampled objects: the typical error is
    // above the 0.005 target (docs/benchmarks.md has the distribution); the
    // estimator is unbiased, so the error is the sample's, not a defect.
    let (median, p90, bias) = o.seeds.expect("seed study");
    eprintln!(
        "twitter 1M SHARDS 1% MAE (bytes, objects): {:?}; over {SEEDS} seeds: median {median:.4}, p90 {p90:.4}, mean curve off by {bias:.4}",
        o.shards_mae
    );
    assert!(bias < 0.003, "mean of the sampled curves off by {bias}");
    assert!(median < 0.01, "median MAE {median}");
}

#[test]
fn twitter_10m_matches_libcachesim_and_shards_is_within_0_005() {
    let o = check_trace(
        "twitter_cluster52_10m.csv.zst",
        "twitter_cluster52_10m.csv.zst",
        0,
    );
    assert!(o.failures.is_empty(), "{}", o.failures.join("\n"));
    assert!(o.exact_vs_lru.is_empty(), "{}", o.exact_vs_lru.join("\n"));
    eprintln!(
        "twitter 10M SHARDS 1% MAE (bytes, objects): {:?}",
        o.shards_mae
    );
    assert!(
        o.shards_mae[0] <= 0.005 && o.shards_mae[1] <= 0.005,
        "{:?}",
        o.shards_mae
    );
}
