//! Crash consistency of the node: `kill -9` the real server in the middle of
//! a load of batch PUTs, restart it, and every object whose batch was
//! acknowledged (201) reads back byte-identical with its cookie.

mod node_common;
use node_common::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// (bucket, name, content seed, length, cookie) of an acknowledged object.
type Acked = (String, String, u64, usize, String);

#[test]
fn kill9_during_batch_puts_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    // (bucket, name, content seed, length, cookie) of every acknowledged object.
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    for round in 0..4u64 {
        let mut s = Server::start(dir.path(), &["--segment-size", "256KiB"]);
        // Everything acknowledged in earlier rounds is there after the restart.
        verify(&s.addr, &acked.lock().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        for t in 0..4u64 {
            let bucket = format!("crash{}", t % 2);
            let (addr, acked, stop) = (s.addr.clone(), acked.clone(), stop.clone());
            threads.push(std::thread::spawn(move || {
                write_batches(
                    &addr,
                    &bucket,
                    &format!("r{round}-t{t}"),
                    (round << 40) | (t << 32),
                    9000,
                    &acked,
                    &stop,
                )
            }));
        }
        std::thread::sleep(Duration::from_millis(600 + 250 * round));
        s.kill9();
        stop.store(true, Ordering::Relaxed);
        for t in threads {
            t.join().unwrap();
        }
    }
    let s = Server::start(dir.path(), &["--segment-size", "256KiB"]);
    let a = acked.lock().unwrap();
    assert!(
        a.len() > 100,
        "too few acknowledged objects ({}) to mean anything",
        a.len()
    );
    verify(&s.addr, &a);
}

/// SIGTERM under a load of batch PUTs: the server stops accepting, answers
/// what is in flight, stops its background workers and exits 0 within
/// 10 s; after a restart every acknowledged object reads back.
#[test]
fn sigterm_under_load_exits_0_within_10_s_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let acked: Arc<Mutex<Vec<Acked>>> = Arc::default();
    // With the S3 API on: the server assembles it, runs its jobs as workers
    // and stops it with the rest.
    let mut s = Server::start(
        dir.path(),
        &["--segment-size", "256KiB", "--s3-listen", "127.0.0.1:0"],
    );
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for t in 0..4u64 {
        let (addr, acked, stop) = (s.addr.clone(), acked.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            write_batches(
                &addr,
                "term",
                &format!("t{t}"),
                (9 << 40) | (t << 32),
                20_000,
                &acked,
                &stop,
            )
        }));
    }
    std::thread::sleep(Duration::from_millis(1500));
    // The background workers are named and counted.
    let m = get(&s.addr, "/metrics").text();
    for w in [
        "heartbeat",
        "s3-intents",
        "s3-upload-sweep",
        "tier-mover",
        "dashboard",
        "index-commit",
        "row-writers",
        "store-compaction",
    ] {
        assert!(
            m.contains(&format!("strata_worker_passes_total{{worker=\"{w}\"}}")),
            "{w}: {m}"
        );
    }
    // The loops the stores own count what they did under this load.
    let passes = |w: &str| -> u64 {
        let key = format!("strata_worker_passes_total{{worker=\"{w}\"}} ");
        m.lines()
            .find_map(|l| l.strip_prefix(key.as_str()))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    assert!(passes("row-writers") > 0, "{m}");
    // Throttles are shown as the server was told them (the mover's
    // default, 256 MiB/s).
    assert!(
        m.contains(&format!(
            "strata_worker_throttle_bytes_per_second{{worker=\"tier-mover\"}} {}",
            256u64 << 20
        )),
        "{m}"
    );
    let before = acked.lock().unwrap().len();
    let (status, took, log) = s.terminate(Duration::from_secs(20));
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    let status = status.unwrap_or_else(|| panic!("still running 20 s after SIGTERM"));
    assert!(status.success(), "exit status {status:?}: {log}");
    assert!(took < Duration::from_secs(10), "stopped in {took:?}: {log}");
    assert!(
        log.contains("SIGTERM: stopping") && log.contains("stopped in"),
        "{log}"
    );
    let a = acked.lock().unwrap();
    assert!(
        before > 50 && a.len() >= before,
        "{before} then {}",
        a.len()
    );
    let s = Server::start(dir.path(), &["--segment-size", "256KiB"]);
    verify(&s.addr, &a);
}

/// Batch PUTs of 8 objects (`{prefix}-{seq}`, up to `max_len` bytes, content
/// seeds `seed_base | seq`) into `bucket` until `stop` or the server stops
/// answering 201; every acknowledged object is pushed to `acked`.
fn write_batches(
    addr: &str,
    bucket: &str,
    prefix: &str,
    seed_base: u64,
    max_len: u64,
    acked: &Mutex<Vec<Acked>>,
    stop: &AtomicBool,
) {
    let mut seq = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let items: Vec<(String, Vec<u8>, u64)> = (0..8)
            .map(|i| {
                seq += 1;
                let seed = seed_base | seq;
                let len = (seed.wrapping_mul(2654435761) % max_len) as usize + i;
                (format!("{prefix}-{seq}"), content(seed, len), seed)
            })
            .collect();
        let body = batch_body(
            &items
                .iter()
                .map(|(n, d, _)| (n.clone(), d.clone()))
                .collect::<Vec<_>>(),
        );
        let Ok(r) = request(addr, "POST", &format!("/{bucket}"), &[], Some(&body)) else {
            return; // the server is gone, or stopped accepting
        };
        if r.status != 201 {
            return;
        }
        let mut a = acked.lock().unwrap();
        for ((n, d, seed), (n2, c)) in items.iter().zip(cookies_of(&r.text())) {
            assert_eq!(*n, n2);
            a.push((bucket.to_string(), n.clone(), *seed, d.len(), c));
        }
    }
}

fn verify(addr: &str, acked: &[Acked]) {
    for (bucket, name, seed, len, cookie) in acked {
        let g = get(addr, &format!("/{bucket}/{name}?cookie={cookie}"));
        assert_eq!(
            g.status,
            200,
            "acknowledged {bucket}/{name} lost: {}",
            g.text()
        );
        assert_eq!(g.body.len(), *len);
        assert!(g.body == content(*seed, *len), "{bucket}/{name} corrupt");
    }
}
