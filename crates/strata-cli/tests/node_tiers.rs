//! The node's tiers with the real binary: the flash read cache (hot
//! disk-resident objects are cached on flash and served from it, counted in
//! /metrics, within its bound on flash bytes written per second), the LRU
//! variant of the tier mover (recently read needles are re-appended and
//! stay on flash while unread ones move to disk), the mover's throttle, and
//! moves that survive `kill -9`.

mod node_common;
use node_common::*;
use std::time::{Duration, Instant};

fn metric(addr: &str, name: &str) -> f64 {
    let m = get(addr, "/metrics").text();
    m.lines()
        .filter(|l| !l.starts_with('#'))
        .filter(|l| l.split(['{', ' ']).next() == Some(name))
        .filter_map(|l| l.split_whitespace().last()?.parse::<f64>().ok())
        .sum()
}

fn tier(addr: &str, path: &str) -> String {
    let r = get(addr, path);
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.header("X-Strata-Tier").unwrap_or("").to_string()
}

/// A tier plan giving each (name, flash bytes, write probability,
/// eviction) entry its flash, no TTL.
fn plan(entries: &[(&str, u64, f64, &str)]) -> String {
    let total: u64 = entries.iter().map(|e| e.1).sum();
    let ws: Vec<String> = entries
        .iter()
        .enumerate()
        .map(|(i, (n, b, p, ev))| {
            format!(
                r#"{{"id":{},"name":"{n}","flash_bytes":{b},"write_probability":{p},"ttl_seconds":null,"eviction":"{ev}","weight":1.0,"predicted_flash_reads_per_s":0.0}}"#,
                i + 1
            )
        })
        .collect();
    format!(
        r#"{{"format":"strata-tier-plan","version":1,"total_flash_bytes":{total},"write_bound_bytes_per_s":null,"train_window":[0.0,1.0],"policy":"fifo","predicted_flash_hit_ratio":0.0,"workloads":[{}]}}"#,
        ws.join(",")
    )
}

fn load_plan(addr: &str, p: &str) {
    let r = request(addr, "POST", "/_admin/plan", &[], Some(p.as_bytes())).unwrap();
    assert_eq!(r.status, 200, "plan refused: {}", r.text());
}

fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn flash_read_cache_serves_hot_disk_objects_within_its_write_bound() {
    let dir = tempfile::tempdir().unwrap();
    // No flash tier for new objects (capacity 0: all to disk), no RAM
    // cache, a flash read cache writing at most 64 KiB/s.
    let rate = 64.0 * 1024.0;
    let s = Server::start(
        dir.path(),
        &[
            "--ram-cache",
            "0",
            "--flash-capacity",
            "0",
            "--flash-cache",
            "8MiB",
            "--flash-cache-write-rate",
            "64KiB",
        ],
    );
    let t_start = Instant::now();
    let obj = |i: u64| content(i, 16 * 1024);
    for i in 0..300u64 {
        let r = put(&s.addr, &format!("/cold/o{i}"), &obj(i));
        assert_eq!(r.status, 201);
        assert!(r.text().contains("\"disk\""), "{}", r.text());
    }
    // Three objects turn hot: read from disk first, then from the cache.
    for i in 0..3u64 {
        assert_eq!(tier(&s.addr, &format!("/cold/o{i}")), "disk");
    }
    wait_until("the cache fill", Duration::from_secs(10), || {
        (0..3u64).all(|i| tier(&s.addr, &format!("/cold/o{i}")) == "flash-cache")
    });
    for i in 0..3u64 {
        let r = get(&s.addr, &format!("/cold/o{i}"));
        assert_eq!(r.header("X-Strata-Tier"), Some("flash-cache"));
        assert!(r.body == obj(i), "cached copy of o{i} differs");
    }
    assert!(metric(&s.addr, "strata_flash_cache_hits_total") >= 6.0);
    assert!(metric(&s.addr, "strata_flash_cache_written_bytes_total") >= 3.0 * 16384.0);
    // Many objects read once in a burst: the cache writes no more than its
    // bound allows (a full bucket of one second plus the rate since start).
    for i in 3..300u64 {
        let r = get(&s.addr, &format!("/cold/o{i}"));
        assert_eq!(r.status, 200);
        assert!(r.body == obj(i));
    }
    std::thread::sleep(Duration::from_millis(300));
    let elapsed = t_start.elapsed().as_secs_f64();
    let written = metric(&s.addr, "strata_flash_cache_written_bytes_total");
    let throttled = metric(&s.addr, "strata_flash_cache_throttled_total");
    assert!(
        written <= rate * (elapsed + 1.0) + 16384.0,
        "{written} bytes written in {elapsed:.1} s, bound {rate} B/s"
    );
    assert!(throttled > 0.0, "the bound never held anything back");
    assert!(
        metric(&s.addr, "strata_flash_cache_misses_total") >= 297.0,
        "misses not counted"
    );
}

#[test]
fn lru_mover_keeps_recently_read_needles_on_flash() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(
        dir.path(),
        &[
            "--ram-cache",
            "0",
            "--segment-size",
            "64KiB",
            "--flash-capacity",
            "64MiB",
        ],
    );
    // Two workloads of the same shape, 192 KiB of flash each: `lru` evicts
    // by LRU (re-appends what was read), `fifo` by FIFO.
    load_plan(
        &s.addr,
        &plan(&[
            ("lru", 192 << 10, 1.0, "lru"),
            ("fifo", 192 << 10, 1.0, "fifo"),
        ]),
    );
    let obj = |b: &str, i: u64| content(i + if b == "lru" { 0 } else { 1 << 20 }, 8 * 1024);
    let hot: Vec<u64> = (0..5).collect();
    let mut written = 0u64;
    // 120 objects of 8 KiB each (960 KiB, five times the allocation), the
    // first five read after every round of ten writes.
    for _round in 0..12 {
        for _ in 0..10 {
            for b in ["lru", "fifo"] {
                let r = put(&s.addr, &format!("/{b}/o{written}"), &obj(b, written));
                assert_eq!(r.status, 201);
            }
            written += 1;
        }
        std::thread::sleep(Duration::from_millis(250));
        for b in ["lru", "fifo"] {
            for &i in &hot {
                let r = get(&s.addr, &format!("/{b}/o{i}"));
                assert_eq!(r.status, 200, "{b}/o{i} unreadable mid-run");
                assert!(r.body == obj(b, i));
            }
        }
    }
    std::thread::sleep(Duration::from_millis(500));
    // Recently read needles stayed on flash under LRU, not under FIFO.
    for &i in &hot {
        assert_eq!(tier(&s.addr, &format!("/lru/o{i}")), "flash", "lru o{i}");
        assert_eq!(tier(&s.addr, &format!("/fifo/o{i}")), "disk", "fifo o{i}");
    }
    // The unread old ones went to disk in both.
    for i in 5..60u64 {
        for b in ["lru", "fifo"] {
            assert_eq!(tier(&s.addr, &format!("/{b}/o{i}")), "disk", "{b}/o{i}");
        }
    }
    assert!(metric(&s.addr, "strata_mover_reappended_total") >= 5.0);
    // The allocation holds once the mover's pass has run (re-appends of
    // the last reads may take a workload over it until the next pass), and
    // every object reads back intact.
    let start = std::time::Instant::now();
    loop {
        let st: serde_json::Value =
            serde_json::from_str(&get(&s.addr, "/_admin/status").text()).unwrap();
        let over: Vec<String> = st["workloads"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["flash_bytes"].as_u64().unwrap() > 192 << 10)
            .map(|w| format!("{} holds {} flash bytes", w["name"], w["flash_bytes"]))
            .collect();
        if over.is_empty() {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(30), "{over:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
    for i in 0..written {
        for b in ["lru", "fifo"] {
            let r = get(&s.addr, &format!("/{b}/o{i}"));
            assert_eq!(r.status, 200, "{b}/o{i}");
            assert!(r.body == obj(b, i), "{b}/o{i} differs");
        }
    }
}

/// Writes `n` objects of 32 KiB to bucket `b` (all to flash under the
/// default plan), two per batch so that segments stay near 64 KiB.
fn fill(addr: &str, b: &str, n: u64) {
    for i in 0..n / 2 {
        let items: Vec<(String, Vec<u8>)> = (0..2)
            .map(|j| {
                let k = i * 2 + j;
                (format!("o{k}"), content(k, 32 * 1024))
            })
            .collect();
        let r = request(
            addr,
            "POST",
            &format!("/{b}"),
            &[],
            Some(&batch_body(&items)),
        )
        .unwrap();
        assert_eq!(r.status, 201);
        assert!(r.text().contains("\"flash\""));
    }
}

#[test]
fn mover_throttle_holds_its_byte_rate() {
    let dir = tempfile::tempdir().unwrap();
    let rate = 512.0 * 1024.0;
    let s = Server::start(
        dir.path(),
        &[
            "--ram-cache",
            "0",
            "--segment-size",
            "64KiB",
            "--flash-capacity",
            "64MiB",
            "--mover-rate",
            "512KiB",
        ],
    );
    fill(&s.addr, "t", 96); // 3 MiB on flash
    assert_eq!(metric(&s.addr, "strata_mover_bytes_total"), 0.0);
    // Now the workload may hold no flash: all of it moves, at the rate.
    load_plan(&s.addr, &plan(&[("t", 0, 0.0, "fifo")]));
    let t0 = Instant::now();
    let mut samples = Vec::new();
    loop {
        let moved = metric(&s.addr, "strata_mover_bytes_total");
        let t = t0.elapsed().as_secs_f64();
        samples.push((t, moved));
        if moved >= 3.0 * 1024.0 * 1024.0 {
            break;
        }
        assert!(
            t < 30.0,
            "the mover did not finish: {moved} bytes in {t:.1} s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // Never ahead of the rate (one segment of slack, at most 128 KiB
    // here: a move is paid for after it is done).
    for (t, moved) in &samples {
        assert!(
            *moved <= rate * (t + 0.15) + 128.0 * 1024.0,
            "{moved} bytes moved after {t:.2} s at {rate} B/s"
        );
    }
    // And not far behind it either: 3 MiB at 512 KiB/s is about 6 s.
    let (t, _) = samples.last().copied().unwrap();
    assert!(t >= 5.0, "moved 3 MiB in {t:.2} s, faster than the rate");
    assert!(t <= 15.0, "moved 3 MiB in {t:.2} s, far below the rate");
    for i in 0..96u64 {
        let r = get(&s.addr, &format!("/t/o{i}"));
        assert_eq!(r.header("X-Strata-Tier"), Some("disk"));
        assert!(r.body == content(i, 32 * 1024));
    }
}

#[test]
fn kill9_while_the_mover_runs_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "--ram-cache",
        "0",
        "--segment-size",
        "64KiB",
        "--flash-capacity",
        "64MiB",
        "--mover-rate",
        "1MiB",
    ];
    let mut s = Server::start(dir.path(), &args);
    fill(&s.addr, "m", 160); // 5 MiB on flash
    for round in 0..3 {
        // Moving everything to disk takes seconds at 1 MiB/s: kill it in
        // the middle.
        load_plan(&s.addr, &plan(&[("m", 0, 0.0, "fifo")]));
        let before = metric(&s.addr, "strata_mover_segments_total");
        wait_until("the mover to start", Duration::from_secs(10), || {
            metric(&s.addr, "strata_mover_segments_total") >= before + 3.0
        });
        std::thread::sleep(Duration::from_millis(137 * (round + 1)));
        s.kill9();
        s = Server::start(dir.path(), &args);
        // Every object reads back intact, from one tier or the other.
        let mut tiers = std::collections::HashMap::new();
        for i in 0..160u64 {
            let r = get(&s.addr, &format!("/m/o{i}"));
            assert_eq!(r.status, 200, "round {round}: m/o{i} lost");
            assert!(r.body == content(i, 32 * 1024), "round {round}: m/o{i}");
            *tiers
                .entry(r.header("X-Strata-Tier").unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
        if round == 0 {
            // Killed mid-move: some on each tier.
            assert!(tiers.get("disk").is_some_and(|&n| n > 0), "{tiers:?}");
            assert!(tiers.get("flash").is_some_and(|&n| n > 0), "{tiers:?}");
        }
    }
    // Left alone, the move completes and everything is still there.
    load_plan(&s.addr, &plan(&[("m", 0, 0.0, "fifo")]));
    wait_until("the move to finish", Duration::from_secs(30), || {
        (0..160u64)
            .step_by(9)
            .all(|i| tier(&s.addr, &format!("/m/o{i}")) == "disk")
    });
    for i in 0..160u64 {
        let r = get(&s.addr, &format!("/m/o{i}"));
        assert_eq!(r.status, 200);
        assert!(r.body == content(i, 32 * 1024));
    }
}
