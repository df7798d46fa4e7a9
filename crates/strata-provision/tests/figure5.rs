//! The paper's Figure 5 as a trace, end to end: collected into curves,
//! optimised, and replayed through a FIFO flash tier.
//!
//! A hundred objects of one byte are created every second. Each object is read 6
//! times at ages in [0, 10), 3 times in [10, 20) and 9 times in [20, 30)
//! (read rates 30, 15 and 45 per 10 bytes of age at steady state, scaled).
//! With 2000 bytes of flash (20 seconds of objects), writing every object keeps ages below 20 and
//! serves 9 of 18 reads (45 of 90); writing 2/3 of the objects keeps them
//! until age 30 and serves 12 of 18 (60 of 90). Objects are deleted at
//! age 30, so the workload is exactly the figure's three blocks.

use strata_provision::{
    collect, provision, AgeBuckets, Amount, CollectConfig, Config, Eviction, Layout, Prices, Replay,
};
use strata_trace::{Op, Request, TraceError};

fn trace(objects: u64) -> Vec<Request> {
    let mut v = Vec::new();
    for o in 0..objects {
        let t0 = o as f64 / 100.0;
        v.push(Request::new(t0, Op::Put, o, 0, 1));
        for k in 0..6 {
            v.push(Request::new(t0 + 0.5 + k as f64 * 1.6, Op::Get, o, 0, 1));
        }
        for k in 0..3 {
            v.push(Request::new(t0 + 11.0 + k as f64 * 3.0, Op::Get, o, 0, 1));
        }
        for k in 0..9 {
            v.push(Request::new(t0 + 20.6 + k as f64 * 1.1, Op::Get, o, 0, 1));
        }
        // The workload is the three blocks: objects leave at age 30.
        v.push(Request::new(t0 + 30.0, Op::Delete, o, 0, 1));
    }
    v.sort_by(|a, b| a.time.total_cmp(&b.time));
    v
}

#[test]
fn write_probability_two_thirds_beats_writing_everything() {
    let n = 60_000;
    let reqs = trace(n);
    let buckets = AgeBuckets::from_bounds((0..=40).map(|a| a as f64).collect()).unwrap();
    let mut cfg = CollectConfig::new(buckets.clone());
    cfg.start = Some(100.0);
    cfg.end = Some(300.0);
    let c = collect(cfg, reqs.iter().cloned().map(Ok::<_, TraceError>)).unwrap();
    let p = provision(
        &c,
        &buckets,
        &Config {
            policy: Eviction::Fifo,
            flash: Amount::Absolute(2000.0),
            write_bound: None,
            weights: Default::default(),
            prices: Prices::default(),
            warm: None,
        },
    )
    .unwrap();
    let w = &p.workloads[0];
    // At steady state the workload holds 3000 bytes (100 per second of age).
    assert!((w.size_bytes - 3000.0).abs() < 5.0, "{}", w.size_bytes);
    assert!(
        (w.write_probability - 2.0 / 3.0).abs() < 0.02,
        "p = {}",
        w.write_probability
    );
    // Predicted: 12 of 18 reads per object, against 9 of 18 for p = 1.
    assert!(
        (p.predicted_flash_hit_ratio - 2.0 / 3.0).abs() < 0.02,
        "{}",
        p.predicted_flash_hit_ratio
    );
    assert!((p.baselines.single_fifo.flash_hit_ratio - 0.5).abs() < 0.02);
    // x/p covers the whole workload: nothing to evict by age (null TTL).
    assert_eq!(w.ttl_seconds, None);
    assert_eq!(p.plan().workloads[0].ttl_seconds, None);

    // Measured: replay 300..600 s with the plan's p and with p = 1.
    let layouts = vec![
        Layout::PerWorkload([(0, (2000, w.write_probability))].into_iter().collect()),
        Layout::PerWorkload([(0, (2000, 1.0))].into_iter().collect()),
    ];
    let mut r = Replay::new(layouts, Eviction::Fifo, 300.0, 600.0, 3);
    for q in &reqs {
        r.push(q);
    }
    let m = r.finish();
    let ratio = |k: usize| m[k][&0].flash_hits as f64 / m[k][&0].reads as f64;
    assert!(
        (ratio(0) - 60.0 / 90.0).abs() < 0.03,
        "p=2/3 measured {}",
        ratio(0)
    );
    assert!(
        (ratio(1) - 45.0 / 90.0).abs() < 0.02,
        "p=1 measured {}",
        ratio(1)
    );
    // The flash write rate falls by a third.
    let writes = |k: usize| m[k][&0].flash_write_bytes as f64;
    assert!((writes(0) / writes(1) - 2.0 / 3.0).abs() < 0.03);
}
