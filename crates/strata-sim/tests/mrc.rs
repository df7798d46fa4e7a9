//! The exact MRC against LRU simulations at every size, on random streams
//! (proptest) and on a long stream that forces the Fenwick tree to renumber
//! many times; SHARDS against the exact curve.

use proptest::prelude::*;
use strata_policy::{build, PolicySpec, Unit};
use strata_sim::mrc::{mean_absolute_error, ExactMrc, Shards, ShardsMode, StackDistance};

fn lru_misses(stream: &[(u64, u64)], cap: u64, unit: Unit) -> (u64, u64) {
    let mut p = build(&PolicySpec::Lru, cap, unit);
    let mut ev = Vec::new();
    let (mut m, mut mb) = (0, 0);
    for &(k, s) in stream {
        if !p.lookup(k) {
            m += 1;
            mb += s;
            p.insert(k, s, &mut ev);
        }
    }
    (m, mb)
}

fn check_against_lru(stream: &[(u64, u64)], unit: Unit, sizes: &[u64]) {
    let mut e = ExactMrc::new(unit, sizes);
    for &(k, s) in stream {
        e.access(k, s);
    }
    let n = stream.len() as u64;
    let bytes: u64 = stream.iter().map(|x| x.1).sum();
    for p in e.curve(sizes) {
        let (m, mb) = lru_misses(stream, p.cache_size, unit);
        assert_eq!(
            p.miss_ratio,
            m as f64 / n as f64,
            "{unit:?} size {}",
            p.cache_size
        );
        assert_eq!(
            p.byte_miss_ratio,
            mb as f64 / bytes as f64,
            "{unit:?} size {}",
            p.cache_size
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn exact_curve_equals_lru_at_every_size(
        sizes in prop::collection::vec(1u64..500, 60),
        keys in prop::collection::vec(0u64..60, 1..600),
    ) {
        let stream: Vec<(u64, u64)> = keys.iter().map(|&k| (k, sizes[k as usize])).collect();
        let obj: Vec<u64> = (1..=62).collect();
        check_against_lru(&stream, Unit::Objects, &obj);
        // Byte mode: every size from 1 B to past the working set, in steps.
        let grid: Vec<u64> = (1..=40).map(|i| i * 800).collect();
        check_against_lru(&stream, Unit::Bytes, &grid);
    }

    #[test]
    fn stack_distance_is_the_number_of_distinct_keys_since(keys in prop::collection::vec(0u64..30, 1..300)) {
        let mut sd = StackDistance::new();
        for (i, &k) in keys.iter().enumerate() {
            let got = sd.access(k, 1);
            let want = keys[..i].iter().rposition(|&x| x == k).map(|j| {
                let mut d: Vec<u64> = keys[j + 1..i].to_vec();
                d.sort_unstable();
                d.dedup();
                d.iter().filter(|&&x| x != k).count() as u64 + 1
            });
            prop_assert_eq!(got, want);
        }
    }
}

#[test]
fn renumbering_keeps_distances_exact_on_long_streams() {
    // 400K requests over 3000 keys: the tree (64K positions at first) is
    // renumbered several times.
    let mut s = 12345u64;
    let stream: Vec<(u64, u64)> = (0..400_000)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let k = (s % 3000) * (s % 3000) / 3000;
            (k, 64 + k % 100)
        })
        .collect();
    check_against_lru(&stream, Unit::Objects, &[1, 10, 100, 500, 1000, 2000, 3000]);
    check_against_lru(
        &stream,
        Unit::Bytes,
        &[1_000, 10_000, 50_000, 100_000, 250_000],
    );
}

/// 300K requests over 200K keys, key k drawn as 200000·u³ (key 0 alone
/// takes 1.7% of the requests, so which heavy keys a sample holds matters).
fn skewed_stream() -> Vec<(u64, u64)> {
    let mut s = 99u64;
    (0..300_000)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let k = (200_000.0 * u.powi(3)) as u64;
            (k, 100 + k % 300)
        })
        .collect()
}

#[test]
fn shards_without_sampling_is_the_exact_curve() {
    let stream = skewed_stream();
    let sizes: Vec<u64> = (1..=20).map(|i| i * 2000).collect();
    let bsizes: Vec<u64> = (1..=20).map(|i| i * 500_000).collect();
    let mut exact = ExactMrc::new(Unit::Objects, &[]);
    let mut exact_b = ExactMrc::new(Unit::Bytes, &bsizes);
    let mut full = Shards::new(Unit::Objects, ShardsMode::FixedRate(1.0));
    let mut full_b = Shards::new(Unit::Bytes, ShardsMode::FixedRate(1.0));
    for &(k, b) in &stream {
        exact.access(k, b);
        exact_b.access(k, b);
        full.access(k, b);
        full_b.access(k, b);
    }
    assert_eq!(full.sampled_requests(), stream.len() as u64);
    // Only the histogram's 0.2%-wide buckets separate the two.
    assert!(mean_absolute_error(&exact.curve(&sizes), &full.curve(&sizes)) < 1e-3);
    assert!(mean_absolute_error(&exact_b.curve(&bsizes), &full_b.curve(&bsizes)) < 1e-3);
}

/// Over many hash seeds, the sampled curves' mean is the exact curve (the
/// estimator is unbiased: what error a single sample shows is variance),
/// and the typical error is small; without SHARDS-adj the mean is visibly
/// off, which is what the adjustment is for.
#[test]
fn shards_error_over_seeds_is_variance_not_bias() {
    let stream = skewed_stream();
    let sizes: Vec<u64> = (1..=20).map(|i| i * 2000).collect();
    let mut exact = ExactMrc::new(Unit::Objects, &[]);
    for &(k, b) in &stream {
        exact.access(k, b);
    }
    let e = exact.curve(&sizes);
    let seeds = 40u64;
    for (mode, max_mean_mae) in [
        (ShardsMode::FixedRate(0.1), 0.01),
        (ShardsMode::FixedSize(8192), 0.01),
    ] {
        let mut mean_curve = [0.0f64; 20];
        let mut mean_plain = [0.0f64; 20];
        let mut maes = Vec::new();
        for seed in 1..=seeds {
            let mut sh = Shards::new(Unit::Objects, mode).with_seed(seed);
            for &(k, b) in &stream {
                sh.access(k, b);
            }
            if let ShardsMode::FixedSize(_) = mode {
                assert!(sh.rate() < 1.0 && sh.rate() > 0.0);
            }
            let c = sh.curve(&sizes);
            maes.push(mean_absolute_error(&e, &c));
            for (m, p) in mean_curve.iter_mut().zip(&c) {
                *m += p.miss_ratio / seeds as f64;
            }
            let plain = sh.with_adjustment(false).curve(&sizes);
            for (m, p) in mean_plain.iter_mut().zip(&plain) {
                *m += p.miss_ratio / seeds as f64;
            }
        }
        let bias = |m: &[f64; 20]| {
            m.iter()
                .zip(&e)
                .map(|(a, b)| (a - b.miss_ratio).abs())
                .sum::<f64>()
                / 20.0
        };
        let mean_mae = maes.iter().sum::<f64>() / seeds as f64;
        eprintln!(
            "{mode:?}: mean MAE {mean_mae:.4}, bias {:.4}, without adj {:.4}",
            bias(&mean_curve),
            bias(&mean_plain)
        );
        assert!(
            bias(&mean_curve) < 0.0025,
            "{mode:?}: bias {}",
            bias(&mean_curve)
        );
        assert!(mean_mae < max_mean_mae, "{mode:?}: mean MAE {mean_mae}");
        assert!(
            bias(&mean_plain) > 2.0 * bias(&mean_curve),
            "{mode:?}: without SHARDS-adj {} vs with {}",
            bias(&mean_plain),
            bias(&mean_curve)
        );
    }
}

/// Stack distances with forgotten keys (what fixed-size SHARDS does) and
/// weights, on enough keys that the last-position map grows, probes collide
/// and deletes shift entries back, and positions are renumbered many times:
/// against a model that keeps each live key's last time and weight.
#[test]
fn stack_distance_with_forget_and_weights_matches_a_model() {
    use std::collections::{BTreeMap, HashMap};
    for seed in [1u64, 7, 42] {
        let mut s = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        let mut sd = StackDistance::new();
        let mut last: HashMap<u64, (u64, u32)> = HashMap::new();
        let mut by_time: BTreeMap<u64, u32> = BTreeMap::new();
        // The first third of the requests weigh 1, then weights vary (the
        // profiler starts keeping per-position weights mid-stream).
        let n = 150_000u64;
        for t in 0..n {
            let r = rnd();
            let k = (r % 4000) * 0x1_0000_0001;
            let w = if t < n / 3 {
                1
            } else {
                1 + (r >> 40) as u32 % 100
            };
            if (r >> 20) % 10 == 0 {
                sd.forget(k);
                if let Some((old, _)) = last.remove(&k) {
                    by_time.remove(&old);
                }
                continue;
            }
            let got = sd.access(k, w);
            let want = last
                .get(&k)
                .map(|&(old, _)| by_time.range(old..).map(|(_, &w)| w as u64).sum::<u64>());
            assert_eq!(got, want, "seed {seed} request {t}");
            if let Some((old, _)) = last.insert(k, (t, w)) {
                by_time.remove(&old);
            }
            by_time.insert(t, w);
            assert_eq!(sd.distinct(), last.len() as u64);
        }
        assert_eq!(
            sd.total_weight(),
            by_time.values().map(|&w| w as u64).sum::<u64>()
        );
    }
}
