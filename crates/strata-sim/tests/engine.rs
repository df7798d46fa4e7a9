//! The simulator's features on synthetic traces whose answers are known:
//! RAM over flash, flash wear, crashes, set-associative mapping, write
//! policies, Belady, and the multi-threaded runner.

mod common;

use strata_policy::{PolicySpec, Unit};
use strata_sim::{
    run, with_next_access, Access, AccessSource, Kind, Medium, OnFlashHit, RunOptions, SetMapping,
    SimConfig, SimError, SimReport, TierSpec, WritePolicy,
};

/// A skewed synthetic trace: `n` reads over `keys` keys, one per second,
/// key = keys * u^4 (u uniform) so low keys are hot; size 100 + key % 900.
fn skewed(n: usize, keys: u64, seed: u64) -> Vec<Access> {
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = s;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let u = (z >> 11) as f64 / (1u64 << 53) as f64;
            let key = ((keys as f64) * u.powi(4)) as u64;
            Access::read(i as f64, key, 100 + key % 900)
        })
        .collect()
}

fn sim(trace: &[Access], configs: &[SimConfig], threads: usize) -> Vec<SimReport> {
    let batches = trace.chunks(1000).map(|c| Ok::<_, SimError>(c.to_vec()));
    run(batches, configs, &RunOptions { threads }, |_| {}).expect("run")
}

fn tiered(ram: u64, flash: u64, on_hit: OnFlashHit, unit: Unit) -> SimConfig {
    SimConfig {
        tiers: vec![
            TierSpec {
                medium: Medium::Ram,
                policy: PolicySpec::Lru,
                capacity: ram,
                sets: None,
            },
            TierSpec {
                medium: Medium::Flash,
                policy: PolicySpec::Lru,
                capacity: flash,
                sets: None,
            },
        ],
        unit,
        writes: WritePolicy::Lookup,
        on_flash_hit: on_hit,
        crashes: Vec::new(),
        pe_cycles: 10_000,
    }
}

#[test]
fn promote_makes_ram_over_flash_one_lru_and_keep_writes_less_flash() {
    let t = skewed(200_000, 20_000, 1);
    let configs = vec![
        tiered(300, 1200, OnFlashHit::Promote, Unit::Objects),
        tiered(300, 1200, OnFlashHit::Keep, Unit::Objects),
        SimConfig::single(PolicySpec::Lru, 1500, Unit::Objects),
    ];
    let r = sim(&t, &configs, 2);
    let (pp, kp, lru) = (&r[0], &r[1], &r[2]);
    // The FM study: "PP gives the combined cache LRU behavior".
    assert_eq!(pp.misses, lru.misses);
    let (ptier, ktier) = (pp.tier.as_ref().unwrap(), kp.tier.as_ref().unwrap());
    assert_eq!(ptier.ram_hits + ptier.flash_hits, pp.hits);
    assert_eq!(ktier.ram_hits + ktier.flash_hits, kp.hits);
    // Promote sends more hits to RAM; keep writes flash less.
    assert!(ptier.ram_hits > ktier.ram_hits);
    assert!(ktier.flash_objects_written < ptier.flash_objects_written);
    // Flash writes under promote are exactly the RAM evictions.
    assert!(ptier.flash_objects_written > 0);
    // "The number of reads that hit in any cache differs very little."
    assert!((pp.miss_ratio - kp.miss_ratio).abs() < 0.05);
}

#[test]
fn flash_lifetime_follows_capacity_pe_cycles_and_write_rate() {
    // 1000 distinct 100-byte objects over 999 s into a 10 KB flash cache:
    // every miss is a 100-byte flash write.
    let t: Vec<Access> = (0..1000).map(|i| Access::read(i as f64, i, 100)).collect();
    let mut c = SimConfig::single(PolicySpec::Fifo, 10_000, Unit::Bytes);
    c.tiers[0].medium = Medium::Flash;
    c.pe_cycles = 3000;
    let r = &sim(&t, &[c], 1)[0];
    let tier = r.tier.as_ref().expect("flash tier fields");
    assert_eq!(tier.flash_bytes_written, 100_000);
    assert_eq!(tier.span_seconds, 999.0);
    let per_year = 100_000.0 / 999.0 * 365.25 * 86_400.0;
    let want = 10_000.0 * 3000.0 / per_year;
    let got = tier.flash_lifetime_years.expect("lifetime");
    assert!((got - want).abs() < 1e-9 * want, "{got} vs {want}");
    // Doubling the flash with the same writes doubles the lifetime.
    let mut c2 = SimConfig::single(PolicySpec::Fifo, 20_000, Unit::Bytes);
    c2.tiers[0].medium = Medium::Flash;
    c2.pe_cycles = 3000;
    let r2 = &sim(&t, &[c2], 1)[0];
    let got2 = r2.tier.as_ref().unwrap().flash_lifetime_years.unwrap();
    assert!((got2 / got - 2.0).abs() < 1e-9);
}

#[test]
fn a_crash_empties_ram_keeps_flash_and_counts_the_extra_misses() {
    // 10 keys read round-robin at 1 request/s; a cache that holds them all
    // misses only the first 10 requests. A crash at t=500 costs exactly 10
    // extra misses, the last at t=509.
    let t: Vec<Access> = (0..1000)
        .map(|i| Access::read(i as f64, i % 10, 1))
        .collect();
    let mut ram = SimConfig::single(PolicySpec::Lru, 10, Unit::Objects);
    ram.crashes = vec![500.0];
    let mut flash = ram.clone();
    flash.tiers[0].medium = Medium::Flash;
    let mut both = tiered(4, 6, OnFlashHit::Promote, Unit::Objects);
    both.crashes = vec![500.0];
    let r = sim(&t, &[ram, flash, both], 1);
    assert_eq!(r[0].misses, 20);
    assert_eq!(r[0].crashes.len(), 1);
    assert_eq!(r[0].crashes[0].extra_misses, 10);
    assert_eq!(r[0].crashes[0].recovered_after_s, Some(9.0));
    // "Hit rates are unaffected when crashing with 100% flash."
    assert_eq!(r[1].misses, 10);
    assert_eq!(r[1].crashes[0].extra_misses, 0);
    assert_eq!(r[1].crashes[0].recovered_after_s, None);
    // A hybrid loses only what RAM held.
    let hybrid = &r[2].crashes[0];
    assert!(
        hybrid.extra_misses > 0 && hybrid.extra_misses < 10,
        "{hybrid:?}"
    );
}

#[test]
fn linear_set_mapping_packs_hot_ranges_and_hashing_spreads_them() {
    // Hot keys are a contiguous low range (the skewed trace); 64 sets of a
    // cache with linear mapping by ranges of 1024 keys put the hot range in
    // a few sets, as Flashcache saw; hashing spreads it.
    let t = skewed(300_000, 64 * 1024, 7);
    let mk = |mapping| {
        let mut c = SimConfig::single(PolicySpec::Lru, 64 * 40, Unit::Objects);
        c.tiers[0].sets = Some((64, mapping));
        c
    };
    let r = sim(
        &t,
        &[
            mk(SetMapping::Linear { span: 1024 }),
            mk(SetMapping::Hash),
            SimConfig::single(PolicySpec::Lru, 64 * 40, Unit::Objects),
        ],
        2,
    );
    let (lin, hash) = (r[0].sets.as_ref().unwrap(), r[1].sets.as_ref().unwrap());
    assert_eq!(lin.misses.iter().sum::<u64>(), r[0].misses);
    assert_eq!(lin.lookups.len(), 64);
    assert!(
        lin.top_half_miss_share > 0.75,
        "linear {}",
        lin.top_half_miss_share
    );
    assert!(
        hash.top_half_miss_share < 0.6,
        "hash {}",
        hash.top_half_miss_share
    );
    // Hashing also beats linear mapping on misses here, and a fully
    // associative cache is at least as good as either.
    assert!(r[1].misses < r[0].misses);
    assert!(r[2].misses <= r[1].misses);
}

#[test]
fn one_set_is_the_fully_associative_cache() {
    let t = skewed(50_000, 5_000, 3);
    let mut one = SimConfig::single(
        PolicySpec::S3Fifo {
            small_ratio: 0.1,
            threshold: 2,
        },
        50_000,
        Unit::Bytes,
    );
    one.tiers[0].sets = Some((1, SetMapping::Hash));
    let full = SimConfig::single(
        PolicySpec::S3Fifo {
            small_ratio: 0.1,
            threshold: 2,
        },
        50_000,
        Unit::Bytes,
    );
    let r = sim(&t, &[one, full], 1);
    assert_eq!(r[0].misses, r[1].misses);
    assert_eq!(r[0].byte_miss_ratio, r[1].byte_miss_ratio);
}

#[test]
fn write_policies_allocate_skip_or_follow_hints() {
    // Writes of keys 1000.. that are never read, interleaved with reads of a
    // hot set 0..50, in an 80-object LRU: between two reads of a hot key
    // come 49 other hot keys and 50 writes. Allocating all writes makes that
    // distance 100 > 80 (every read misses); no-write allocate leaves 50
    // (only cold misses); hints admit half the writes: 75, still hits.
    let mut t = Vec::new();
    for i in 0..20_000u64 {
        let time = i as f64;
        if i % 2 == 0 {
            t.push(Access::read(time, i / 2 % 50, 10));
        } else {
            t.push(Access {
                time,
                key: 1000 + i,
                size: 10,
                next: u64::MAX,
                kind: Kind::Write,
                admit: i % 4 == 1,
            });
        }
    }
    let mk = |w| {
        let mut c = SimConfig::single(PolicySpec::Lru, 80, Unit::Objects);
        c.writes = w;
        c
    };
    let r = sim(
        &t,
        &[
            mk(WritePolicy::Allocate),
            mk(WritePolicy::NoAllocate),
            mk(WritePolicy::Hints),
            mk(WritePolicy::Lookup),
        ],
        2,
    );
    let (alloc, noalloc, hints, lookup) = (&r[0], &r[1], &r[2], &r[3]);
    for x in [alloc, noalloc, hints] {
        assert_eq!(x.lookups, 10_000);
        assert_eq!(x.writes, 10_000);
    }
    assert_eq!(lookup.lookups, 20_000);
    assert_eq!(
        noalloc.misses, 50,
        "only cold misses without write allocation"
    );
    assert_eq!(alloc.misses, 10_000, "allocating writes evict the hot set");
    assert_eq!(hints.misses, 50, "hinted-out writes must not be cached");
    // Every request a lookup: the writes miss too.
    assert!(lookup.misses > 10_000);
}

#[test]
fn deletes_remove_objects_when_writes_are_separated() {
    let t = vec![
        Access::read(0.0, 1, 10),
        Access {
            kind: Kind::Delete,
            ..Access::read(1.0, 1, 10)
        },
        Access::read(2.0, 1, 10),
    ];
    let mut c = SimConfig::single(PolicySpec::Lru, 100, Unit::Bytes);
    c.writes = WritePolicy::NoAllocate;
    let r = &sim(&t, &[c], 1)[0];
    assert_eq!(r.deletes, 1);
    assert_eq!(r.misses, 2);
}

#[test]
fn belady_bounds_every_policy_on_a_real_trace_and_threads_change_nothing() {
    let path = common::traces().join("cloudPhysicsIO.vscsi");
    let batches = with_next_access(AccessSource::open(&path, None).expect("open")).expect("read");
    let all: Vec<Access> = batches.concat();
    let configs: Vec<SimConfig> = strata_policy::all_specs()
        .into_iter()
        .map(|p| SimConfig::single(p, 4_897, Unit::Objects))
        .collect();
    let one = sim(&all, &configs, 1);
    let two = sim(&all, &configs, 2);
    assert_eq!(one, two, "results depend on the thread count");
    let opt = one.iter().find(|r| r.policy == "belady").expect("belady");
    for r in &one {
        assert!(
            opt.misses <= r.misses,
            "belady {} > {} {}",
            opt.misses,
            r.policy,
            r.misses
        );
    }
}
