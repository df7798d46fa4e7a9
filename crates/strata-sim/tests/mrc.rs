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

#[test]
fn shards_without_sampling_is_the_exact_curve_and_sampling_stays_close() {
    let mut s = 99u64;
    let stream: Vec<(u64, u64)> = (0..300_000)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (s >> 11) as f64 / (1u64 << 53) as f64;
            let k = (200_000.0 * u.powi(3)) as u64;
            (k, 100)
        })
        .collect();
    let sizes: Vec<u64> = (1..=20).map(|i| i * 2000).collect();
    let mut exact = ExactMrc::new(Unit::Objects, &[]);
    let mut full = Shards::new(Unit::Objects, ShardsMode::FixedRate(1.0));
    let mut rate = Shards::new(Unit::Objects, ShardsMode::FixedRate(0.1));
    let mut size = Shards::new(Unit::Objects, ShardsMode::FixedSize(8192));
    for &(k, b) in &stream {
        exact.access(k, b);
        full.access(k, b);
        rate.access(k, b);
        size.access(k, b);
    }
    let e = exact.curve(&sizes);
    assert!(mean_absolute_error(&e, &full.curve(&sizes)) < 1e-3);
    let r = mean_absolute_error(&e, &rate.curve(&sizes));
    let z = mean_absolute_error(&e, &size.curve(&sizes));
    assert!(r < 0.01, "fixed rate 10%: {r}");
    assert!(z < 0.01, "fixed size 8192: {z}");
    assert!(size.rate() < 1.0 && size.rate() > 0.0);
}
