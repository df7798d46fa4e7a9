//! `strata bench store`: fill a segment store with N objects, reopen it,
//! then read it back with random GETs, cold (the store's files dropped from
//! the page cache with posix_fadvise DONTNEED, readahead off).

use crate::progress;
use crate::units::{format_bytes, parse_bytes};
use anyhow::{bail, Context};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use strata_store::{PutItem, Store, StoreConfig, Tier};

/// Fill a segment store, reopen it, then read it back cold.
#[derive(clap::Args)]
pub struct Args {
    /// Directory for the store; must be empty or absent. Default: a new
    /// temporary directory (removed afterwards).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Number of objects to write.
    #[arg(long, default_value_t = 300_000)]
    objects: u64,
    /// Object size (e.g. 4096, 4KiB, 64k).
    #[arg(long, default_value = "4KiB", value_parser = parse_size)]
    size: u64,
    /// Objects per multi-write (one fdatasync per batch).
    #[arg(long, default_value_t = 16)]
    batch: usize,
    /// Writer threads, then reader threads: the number of requests in flight.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Random GETs in the read phase (default: min(objects, 50000)); each
    /// reads a distinct object.
    #[arg(long)]
    gets: Option<u64>,
    /// Segment size (a segment is sealed when it reaches it).
    #[arg(long, default_value = "1GiB", value_parser = parse_size)]
    segment_size: u64,
    /// Tier class of the directory.
    #[arg(long, default_value = "flash")]
    tier: Tier,
    /// Also measure GETs while a compaction runs: delete half the objects
    /// of the oldest sealed segment, then run the GET phase twice, without
    /// and with a compaction of that segment going on. Adds
    /// get_p50_us_quiet, get_p99_us_quiet, get_p50_us_compacting,
    /// get_p99_us_compacting and compaction_seconds to the output.
    #[arg(long)]
    compaction: bool,
    /// Identities per hash partition of the node index's run (default: the
    /// store's, 1048576). A merge rebuilds one partition at a time, so its
    /// transient memory follows this; smaller values give more partitions
    /// (e.g. to measure GETs over a partitioned run with few objects).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    run_partition_size: Option<u64>,
    /// Zeros written ahead of the active segment's needles so that a
    /// batch's fdatasync does not grow the file (the store's
    /// `prepare_ahead`); 0: off, every batch appends.
    #[arg(long, value_name = "SIZE", default_value = "32MiB", value_parser = parse_size)]
    prepare_ahead: u64,
    /// Keep the store's files afterwards.
    #[arg(long)]
    keep: bool,
    /// Skip the fill: --dir already holds the store of an earlier
    /// `--keep` run with the same --objects and --size (put figures are then
    /// reported as 0). For interleaving with other readers, e.g. fio.
    #[arg(long, requires = "dir")]
    reuse: bool,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

fn parse_size(s: &str) -> Result<u64, String> {
    parse_bytes(s).map_err(|e| format!("{e:#}"))
}

/// xorshift64*: fast, deterministic object contents and key orders.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }
}

fn cookie_of(key: u64) -> u32 {
    (Rng(key.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1).next() >> 32) as u32
}

fn config(dir: &std::path::Path, a: &Args) -> StoreConfig {
    let mut cfg = StoreConfig::new(dir, a.tier);
    cfg.segment_size = a.segment_size;
    cfg.create_dirs = true;
    cfg.auto_compaction = false;
    cfg.max_object_size = cfg.max_object_size.max(a.size);
    cfg.prepare_ahead = a.prepare_ahead;
    if let Some(n) = a.run_partition_size {
        cfg.run_partition_size = usize::try_from(n).unwrap_or(usize::MAX);
    }
    cfg
}

struct GetStats {
    p50: f64,
    p99: f64,
    per_s: f64,
    reads_per_get: f64,
    probes_per_get: f64,
    cpu_us_per_get: f64,
}

/// CPU time (user + system) of this process so far, in microseconds.
fn cpu_us() -> f64 {
    // SAFETY: getrusage only writes the struct it is given.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Runs `gets` random GETs of distinct objects on `threads` threads.
fn get_phase(
    store: &Arc<Store>,
    a: &Args,
    gets: u64,
    seed: u64,
    label: &str,
) -> anyhow::Result<GetStats> {
    get_phase_mapped(store, a.objects, a.threads, gets, seed, label, |k| k, true)
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Writes objects 0..N in batches on `threads` threads, then merges the
/// store's recent map into its node-wide index (as its background thread
/// would); returns the seconds of both.
fn fill(dir: &std::path::Path, a: &Args, size: usize) -> anyhow::Result<(f64, f64)> {
    let store = Arc::new(
        Store::open(config(dir, a))
            .with_context(|| format!("opening store in {}", dir.display()))?,
    );
    let pb = progress::bar(a.objects, "put");
    let next = Arc::new(AtomicU64::new(0));
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for t in 0..a.threads {
        let store = store.clone();
        let next = next.clone();
        let pb = pb.clone();
        let (batch, objects, tier) = (a.batch as u64, a.objects, a.tier);
        handles.push(std::thread::spawn(move || -> anyhow::Result<()> {
            let mut rng = Rng(0x5151_u64 + t as u64 * 7919);
            let mut bufs: Vec<Vec<u8>> = (0..batch).map(|_| vec![0u8; size]).collect();
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= objects {
                    return Ok(());
                }
                let last = (first + batch).min(objects);
                for b in bufs.iter_mut() {
                    rng.fill(b);
                }
                let items: Vec<PutItem> = (first..last)
                    .zip(bufs.iter())
                    .map(|(k, b)| PutItem {
                        head: &[],
                        key: k,
                        alt_key: 0,
                        cookie: cookie_of(k),
                        data: b,
                    })
                    .collect();
                store.put_batch(tier, &items)?;
                pb.inc(last - first);
            }
        }));
    }
    for h in handles {
        h.join()
            .map_err(|_| anyhow::anyhow!("a writer thread panicked"))??;
    }
    let put_secs = t0.elapsed().as_secs_f64();
    pb.finish_and_clear();
    let t1 = Instant::now();
    store.merge_index().context("merging the node index")?;
    let merge_secs = t1.elapsed().as_secs_f64();
    let store = Arc::try_unwrap(store).map_err(|_| anyhow::anyhow!("store still shared"))?;
    store.close().context("closing store")?;
    Ok((put_secs, merge_secs))
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<()> {
    if a.objects == 0 || a.batch == 0 || a.threads == 0 {
        bail!("--objects, --batch and --threads must be at least 1");
    }
    let _tmp;
    let dir = match &a.dir {
        Some(d) => {
            if !a.reuse
                && d.exists()
                && std::fs::read_dir(d)
                    .with_context(|| format!("listing {}", d.display()))?
                    .next()
                    .is_some()
            {
                bail!(
                    "{} is not empty: give an empty or new directory for the benchmark store",
                    d.display()
                );
            }
            d.clone()
        }
        None => {
            _tmp = TempDir::new()?;
            _tmp.0.clone()
        }
    };
    let size = usize::try_from(a.size).context("object size")?;
    let gets = a.gets.unwrap_or(a.objects.min(50_000)).min(a.objects);

    // Fill.
    let (put_secs, merge_secs) = if a.reuse {
        if !dir.is_dir() {
            bail!("--reuse: {} holds no store", dir.display());
        }
        (f64::INFINITY, 0.0)
    } else {
        fill(&dir, &a, size)?
    };

    // Reopen (loads the checkpoints).
    let t1 = Instant::now();
    let store = Store::open(config(&dir, &a)).context("reopening store")?;
    let restart_secs = t1.elapsed().as_secs_f64();
    let mem = store.memory();
    let store = Arc::new(store);

    // Cold random GETs.
    store.drop_page_cache().context("dropping the page cache")?;
    let cold = get_phase(&store, &a, gets, 0xC01D, "get")?;
    // The same GETs again, from the page cache: the engine's own CPU per
    // GET (index probes, one pread, checks) without the device's.
    let warm = get_phase(&store, &a, gets, 0xC01D, "get (warm)")?;
    // GETs of absent keys (never written): index probes and CPU only,
    // plus the reads that fingerprint false positives cost; 20 times as
    // many, as each is short.
    let objects = a.objects;
    let absent_gets = gets.saturating_mul(20);
    let absent = get_phase_mapped(
        &store,
        absent_gets,
        a.threads,
        absent_gets,
        0xAB5E,
        "get (absent)",
        move |k| k + objects,
        false,
    )?;
    let segments = store.segments().len();

    let mut extra = serde_json::Map::new();
    if a.compaction {
        compaction_phase(&store, &a, gets, &mut extra)?;
    }

    let put_per_s = a.objects as f64 / put_secs;
    let mut fields: Vec<(String, serde_json::Value)> = Vec::new();
    let mut f = |k: &str, v: f64| {
        fields.push((
            k.to_string(),
            serde_json::json!((v * 1000.0).round() / 1000.0),
        ));
    };
    f("put_objects_per_s", put_per_s);
    f("put_mb_per_s", put_per_s * a.size as f64 / 1e6);
    f("get_objects_per_s", cold.per_s);
    f("get_p50_us", cold.p50);
    f("get_p99_us", cold.p99);
    f("device_reads_per_get", cold.reads_per_get);
    f("index_probes_per_get", cold.probes_per_get);
    f("cpu_us_per_get", cold.cpu_us_per_get);
    f("warm_get_objects_per_s", warm.per_s);
    f("warm_cpu_us_per_get", warm.cpu_us_per_get);
    f("absent_get_objects_per_s", absent.per_s);
    f("absent_index_probes_per_get", absent.probes_per_get);
    f("absent_cpu_us_per_get", absent.cpu_us_per_get);
    f(
        "absent_device_reads_per_10k_gets",
        absent.reads_per_get * 1e4,
    );
    f("segments", segments as f64);
    f("run_partitions", mem.run_partitions as f64);
    f(
        "ram_bytes_per_object",
        (mem.sealed_bytes + mem.active_bytes) as f64 / a.objects.max(1) as f64,
    );
    f(
        "ram_bytes_per_object_sealed",
        if mem.sealed_objects > 0 {
            mem.sealed_bytes_per_object()
        } else {
            0.0
        },
    );
    f(
        "ram_bytes_per_object_active",
        if mem.active_objects > 0 {
            mem.active_bytes_per_object()
        } else {
            0.0
        },
    );
    f("restart_seconds", restart_secs);
    f("merge_seconds", merge_secs);
    fields.extend(extra);
    if a.json {
        let out: serde_json::Map<String, serde_json::Value> = fields.into_iter().collect();
        println!("{}", serde_json::Value::Object(out));
    } else {
        println!(
            "strata bench store: {} objects of {} in batches of {}, {} threads, {} segments, {} cold GETs",
            a.objects,
            format_bytes(a.size),
            a.batch,
            a.threads,
            store.segments().len(),
            gets
        );
        for (k, v) in &fields {
            println!("  {k:<30} {v}");
        }
        if mem.sealed_objects == 0 {
            println!("  (no sealed segment yet: use more objects or a smaller --segment-size for the sealed figure)");
        }
    }
    let store = Arc::try_unwrap(store).map_err(|_| anyhow::anyhow!("store still shared"))?;
    store.close().context("closing store")?;
    if a.dir.is_some() && !a.keep && !a.reuse {
        remove_store_files(&dir)?;
    }
    Ok(())
}

fn compaction_phase(
    store: &Arc<Store>,
    a: &Args,
    gets: u64,
    extra: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let Some(seg) = store
        .segments()
        .into_iter()
        .filter(|s| !s.active)
        .min_by_key(|s| s.id)
    else {
        bail!("--compaction needs a sealed segment: use more objects or a smaller --segment-size");
    };
    // Delete every other object of that segment.
    for n in store.needles(seg.id)? {
        let n = n?;
        if n.key % 2 == 0 {
            store.delete(n.key, n.alt_key)?;
        }
    }
    // GET only odd keys (never deleted) in both phases.
    let odd = |store: &Arc<Store>, seed: u64, label: &str| {
        get_phase_mapped(
            store,
            a.objects / 2,
            a.threads,
            gets / 2,
            seed,
            label,
            |k| 2 * k + 1,
            true,
        )
    };
    store.drop_page_cache()?;
    let quiet = odd(store, 0xA11CE, "get (quiet)")?;
    store.drop_page_cache()?;
    let s2 = store.clone();
    let id = seg.id;
    let t = Instant::now();
    let compactor = std::thread::spawn(move || s2.compact(id, &mut |_| {}));
    // Let the compaction start before measuring.
    std::thread::sleep(Duration::from_millis(50));
    let busy = odd(store, 0xB0B, "get (compacting)")?;
    let still_running = !compactor.is_finished();
    compactor
        .join()
        .map_err(|_| anyhow::anyhow!("compaction thread panicked"))?
        .context("compaction")?;
    let secs = t.elapsed().as_secs_f64();
    let mut put = |k: &str, v: f64| {
        extra.insert(k.into(), serde_json::json!((v * 1000.0).round() / 1000.0));
    };
    put("get_p50_us_quiet", quiet.p50);
    put("get_p99_us_quiet", quiet.p99);
    put("get_p50_us_compacting", busy.p50);
    put("get_p99_us_compacting", busy.p99);
    put("compaction_seconds", secs);
    if !still_running {
        eprintln!("note: the compaction finished before the GET phase did; use more --gets for a fully overlapped measurement");
    }
    Ok(())
}

/// GETs of `gets` distinct keys `map(i)`, i a random permutation of 0..n;
/// every key must be present (`present`) or absent.
#[allow(clippy::too_many_arguments)]
fn get_phase_mapped(
    store: &Arc<Store>,
    n: u64,
    threads: usize,
    gets: u64,
    seed: u64,
    label: &str,
    map: impl Fn(u64) -> u64 + Copy + Send + 'static,
    present: bool,
) -> anyhow::Result<GetStats> {
    let n = n.max(1);
    let gets = gets.min(n);
    let mut rng = Rng(seed | 1);
    let mut mult = (rng.next() % n.max(2)) | 1;
    while gcd(mult, n) != 1 {
        mult += 2;
    }
    let offset = rng.next() % n;
    let pb = progress::bar(gets, label);
    let next = Arc::new(AtomicU64::new(0));
    let c0 = store.counters();
    let cpu0 = cpu_us();
    let t0 = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..threads {
        let store = store.clone();
        let next = next.clone();
        let pb = pb.clone();
        handles.push(std::thread::spawn(move || -> anyhow::Result<Vec<u32>> {
            let mut lat = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= gets {
                    return Ok(lat);
                }
                let key = map(((i as u128 * mult as u128 + offset as u128) % n as u128) as u64);
                let t = Instant::now();
                let got = store.get(key, 0, cookie_of(key))?;
                lat.push(t.elapsed().as_micros().min(u32::MAX as u128) as u32);
                if got.is_some() != present {
                    bail!(
                        "object {key} is {}",
                        if present { "missing" } else { "present" }
                    );
                }
                pb.inc(1);
            }
        }));
    }
    let mut lat = Vec::new();
    for h in handles {
        lat.extend(
            h.join()
                .map_err(|_| anyhow::anyhow!("a reader thread panicked"))??,
        );
    }
    let secs = t0.elapsed().as_secs_f64();
    let cpu = cpu_us() - cpu0;
    pb.finish_and_clear();
    let c1 = store.counters();
    let reads = c1.preads - c0.preads;
    let probes = c1.index_probes - c0.index_probes;
    lat.sort_unstable();
    let pct = |p: f64| {
        lat.get(((lat.len() as f64 * p) as usize).min(lat.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0) as f64
    };
    Ok(GetStats {
        p50: pct(0.50),
        p99: pct(0.99),
        per_s: gets as f64 / secs,
        reads_per_get: reads as f64 / gets.max(1) as f64,
        probes_per_get: probes as f64 / gets.max(1) as f64,
        cpu_us_per_get: cpu / gets.max(1) as f64,
    })
}

/// Removes the segment and checkpoint files the benchmark made in `dir`.
fn remove_store_files(dir: &std::path::Path) -> anyhow::Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e?.path();
        let ours = matches!(
            p.extension().and_then(|x| x.to_str()),
            Some("seg") | Some("idx")
        ) || matches!(
            p.file_name().and_then(|x| x.to_str()),
            Some(strata_store::LOCK_FILE) | Some("strata.run")
        );
        if ours {
            std::fs::remove_file(&p).with_context(|| format!("removing {}", p.display()))?;
        }
    }
    Ok(())
}

/// A temporary directory removed on drop.
struct TempDir(PathBuf);
impl TempDir {
    fn new() -> anyhow::Result<TempDir> {
        let base = std::env::temp_dir();
        for i in 0..1000u32 {
            let p = base.join(format!("strata-bench-store-{}-{i}", std::process::id()));
            if std::fs::create_dir(&p).is_ok() {
                return Ok(TempDir(p));
            }
        }
        bail!(
            "could not create a temporary directory in {}",
            base.display()
        )
    }
}
impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
