//! `strata put`, `strata get`, `strata rm`, `strata load`: the cluster
//! client on the command line (placement computed here, nodes contacted
//! directly; the metadata service only hands out the map).

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use strata_client::{Client, ClientConfig};

use crate::units::{format_bytes, parse_bytes};

fn split_name(name: &str) -> anyhow::Result<(&str, &str)> {
    match name.split_once('/') {
        Some((b, k)) if !b.is_empty() && !k.is_empty() => Ok((b, k)),
        _ => bail!("{name:?} is not BUCKET/KEY (e.g. photos/cat.jpg)"),
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Runtime::new().context("starting the async runtime")
}

async fn connect(meta: &str, deadline: u64) -> anyhow::Result<Client> {
    let cfg = ClientConfig {
        deadline: Duration::from_secs(deadline),
        ..ClientConfig::default()
    };
    Client::connect(meta, cfg)
        .await
        .with_context(|| format!("connecting to the cluster through {meta}"))
}

/// Store one object in the cluster (written to every replica of its row;
/// returns once all have it durably).
#[derive(clap::Args)]
pub struct PutArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// Seconds to keep retrying while a replica is down.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    deadline: u64,
    /// Append to the object instead of replacing it (atomic with respect
    /// to other appenders: each append gets its own range of whole tracts,
    /// FDS's extend-blob).
    #[arg(long)]
    append: bool,
    /// BUCKET/KEY.
    name: String,
    /// File to store, or - for standard input.
    file: PathBuf,
}

/// Runs `strata put`.
pub fn put(a: PutArgs) -> anyhow::Result<()> {
    let (bucket, key) = split_name(&a.name)?;
    let mut input: Box<dyn Read + Send> = if a.file.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            std::fs::File::open(&a.file)
                .with_context(|| format!("reading {}", a.file.display()))?,
        )
    };
    runtime()?.block_on(async {
        let c = connect(&a.meta, a.deadline).await?;
        if a.append {
            let mut data = Vec::new();
            input
                .read_to_end(&mut data)
                .with_context(|| format!("reading {}", a.file.display()))?;
            let len = data.len();
            let first = c
                .append(bucket, key, Bytes::from(data))
                .await
                .with_context(|| format!("appending to {}", a.name))?;
            eprintln!(
                "appended {} to {} at tract {first}",
                format_bytes(len as u64),
                a.name
            );
            return Ok(());
        }
        // The file streams through a small queue: a tract at a time is cut
        // from it and written while the next is read.
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
        let reader = tokio::task::spawn_blocking(move || {
            let mut total = 0u64;
            loop {
                let mut buf = vec![0u8; 1 << 20];
                match input.read(&mut buf) {
                    Ok(0) => return total,
                    Ok(n) => {
                        buf.truncate(n);
                        total += n as u64;
                        if tx.blocking_send(Ok(Bytes::from(buf))).is_err() {
                            return total;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.blocking_send(Err(e));
                        return total;
                    }
                }
            }
        });
        let body = stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
        let cookie = c
            .put_stream(bucket, key, body)
            .await
            .with_context(|| format!("storing {}", a.name))?;
        let len = reader.await.unwrap_or(0);
        eprintln!(
            "stored {} ({}, cookie {cookie:08x})",
            a.name,
            format_bytes(len)
        );
        Ok(())
    })
}

/// Read one object from the cluster (one replica at random, failing over).
#[derive(clap::Args)]
pub struct GetArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// Seconds to keep retrying while replicas are down.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    deadline: u64,
    /// BUCKET/KEY.
    name: String,
    /// Write here instead of standard output.
    #[arg(short, long, value_name = "FILE")]
    output: Option<PathBuf>,
}

/// Runs `strata get`.
pub fn get(a: GetArgs) -> anyhow::Result<()> {
    use strata_proto::Head;
    let (bucket, key) = split_name(&a.name)?;
    let mut out: Box<dyn Write> = match &a.output {
        Some(p) => Box::new(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("writing {}", p.display()))?,
        )),
        None => Box::new(std::io::stdout().lock()),
    };
    let what = a
        .output
        .as_ref()
        .map_or("standard output".to_string(), |p| p.display().to_string());
    runtime()?.block_on(async {
        let c = connect(&a.meta, a.deadline).await?;
        let Some(head) = c
            .head(bucket, key)
            .await
            .with_context(|| format!("reading {}", a.name))?
        else {
            bail!("{} does not exist", a.name);
        };
        match head {
            Head::Inline { data, .. } => out.write_all(&data),
            Head::Manifest(m) => {
                // Tract by tract, the next one read while this one is written.
                let mut tracts = stream::iter(0..m.tracts)
                    .map(|t| c.get_tract(bucket, key, &m, t))
                    .buffered(2);
                while let Some(t) = tracts.next().await {
                    let t = t.with_context(|| format!("reading {}", a.name))?;
                    out.write_all(&t)
                        .with_context(|| format!("writing {what}"))?;
                }
                Ok(())
            }
        }
        .with_context(|| format!("writing {what}"))?;
        out.flush().with_context(|| format!("writing {what}"))
    })
}

/// Delete one object from every replica: each gets a tombstone stamped
/// with the time of the delete, which wins over the object in recovery and
/// scrubbing (a replica that was down catches up; docs/recovery.md).
#[derive(clap::Args)]
pub struct RmArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// Seconds to keep retrying while a replica is down (the replicas that
    /// took the delete keep it; the scrub brings it to the others).
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    deadline: u64,
    /// BUCKET/KEY.
    name: String,
}

/// Runs `strata rm`.
pub fn rm(a: RmArgs) -> anyhow::Result<()> {
    let (bucket, key) = split_name(&a.name)?;
    runtime()?.block_on(async {
        let c = connect(&a.meta, a.deadline).await?;
        if c.delete(bucket, key)
            .await
            .with_context(|| format!("deleting {}", a.name))?
        {
            eprintln!("deleted {}", a.name);
            Ok(())
        } else {
            bail!("{} does not exist", a.name)
        }
    })
}

/// Write (or, with --verify, read back and check) N objects of known
/// content with many requests in flight, and report throughput and
/// latency. Object i is BUCKET/PREFIXi (zero-padded) and its bytes are a
/// pure function of (i, size), so a later `--verify` run checks exactly
/// what an earlier run wrote.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct LoadArgs {
    /// Metadata service address.
    #[arg(long, value_name = "ADDR")]
    meta: String,
    /// Number of objects.
    #[arg(long, value_name = "N")]
    objects: u64,
    /// Bytes per object (e.g. 4KiB).
    #[arg(long, value_name = "BYTES")]
    size: String,
    /// Read the objects back and check every byte instead of writing.
    #[arg(long)]
    verify: bool,
    /// Requests in flight.
    #[arg(long, value_name = "N", default_value_t = 64)]
    concurrency: usize,
    /// Bucket.
    #[arg(long, default_value = "load")]
    bucket: String,
    /// Key prefix.
    #[arg(long, default_value = "obj-")]
    prefix: String,
    /// First object index (to write or check a slice of a larger set).
    #[arg(long, value_name = "I", default_value_t = 0)]
    start: u64,
    /// Seconds each operation keeps retrying while replicas are down.
    #[arg(long, value_name = "SECS", default_value_t = 60)]
    deadline: u64,
    /// Only the object indices listed in FILE (one per line, in that
    /// order; blank lines and lines starting with # skipped) instead of
    /// --start.. --start+--objects: for instance the objects whose data
    /// shard is on one node (bench/ec-degraded.sh).
    #[arg(long, value_name = "FILE")]
    indices: Option<std::path::PathBuf>,
    /// Print one JSON object with the results.
    #[arg(long)]
    json: bool,
}

/// The object indices `strata load --indices FILE` lists.
fn read_indices(path: &std::path::Path) -> anyhow::Result<Vec<u64>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading --indices {}", path.display()))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        out.push(line.parse().with_context(|| {
            format!(
                "{} line {}: {line:?} is not an object index",
                path.display(),
                n + 1
            )
        })?);
    }
    if out.is_empty() {
        bail!("--indices {} lists no object", path.display());
    }
    Ok(out)
}

/// The bytes of load object `i`.
pub fn load_content(i: u64, size: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(size + 8);
    let mut x = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xD1B5_4A32_D192_ED03;
    while out.len() < size {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(size);
    out
}

/// Runs `strata load`.
pub fn load(a: LoadArgs) -> anyhow::Result<()> {
    let size = parse_bytes(&a.size).context("--size")? as usize;
    if a.concurrency == 0 {
        bail!("--concurrency must be at least 1");
    }
    let which: Vec<u64> = match &a.indices {
        Some(p) => read_indices(p)?,
        None => (a.start..a.start + a.objects).collect(),
    };
    // Keys are zero-padded to the width of the set written.
    let top = which.iter().map(|i| i + 1).max().unwrap_or(0);
    let width = (a.start + a.objects)
        .max(top)
        .max(1)
        .to_string()
        .len()
        .max(8);
    let count = which.len() as u64;
    runtime()?.block_on(async {
        let c = Arc::new(connect(&a.meta, a.deadline).await?);
        let pb = crate::progress::bar(count, if a.verify { "verify" } else { "write" });
        let bad = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let results: Vec<anyhow::Result<Duration>> =
            stream::iter(which)
                .map(|i| {
                    let c = c.clone();
                    let key = format!("{}{:0width$}", a.prefix, i);
                    let bucket = a.bucket.clone();
                    let bad = bad.clone();
                    let pb = pb.clone();
                    let verify = a.verify;
                    async move {
                        let t = Instant::now();
                        if verify {
                            match c.get(&bucket, &key).await? {
                                Some(d) if d[..] == load_content(i, size)[..] => {}
                                Some(_) => {
                                    bad.fetch_add(1, Ordering::Relaxed);
                                    eprintln!("{bucket}/{key}: content differs");
                                }
                                None => {
                                    bad.fetch_add(1, Ordering::Relaxed);
                                    eprintln!("{bucket}/{key}: missing");
                                }
                            }
                        } else {
                            c.put(&bucket, &key, Bytes::from(load_content(i, size)))
                                .await?;
                        }
                        pb.inc(1);
                        Ok(t.elapsed())
                    }
                })
                .buffer_unordered(a.concurrency)
                .collect()
                .await;
        pb.finish_and_clear();
        let secs = start.elapsed().as_secs_f64();
        let mut lat = Vec::with_capacity(results.len());
        let mut errors = 0u64;
        let mut first_err = None;
        for r in results {
            match r {
                Ok(d) => lat.push(d.as_secs_f64() * 1000.0),
                Err(e) => {
                    errors += 1;
                    first_err.get_or_insert(format!("{e:#}"));
                }
            }
        }
        lat.sort_by(f64::total_cmp);
        let pct = |p: f64| {
            if lat.is_empty() {
                0.0
            } else {
                lat[((lat.len() - 1) as f64 * p) as usize]
            }
        };
        let ok = lat.len() as u64;
        let stats = c.stats();
        let bad = bad.load(Ordering::Relaxed);
        let summary = serde_json::json!({
            "op": if a.verify { "verify" } else { "write" },
            "objects": count, "size": size, "concurrency": a.concurrency,
            "ok": ok, "errors": errors, "bad": bad,
            "seconds": secs, "ops_per_sec": ok as f64 / secs,
            "mb_per_sec": ok as f64 * size as f64 / secs / 1e6,
            "latency_ms": {"p50": pct(0.5), "p99": pct(0.99), "max": pct(1.0)},
            "table_version": c.table_version(),
            "client": {"refreshes": stats.refreshes, "stale_refusals": stats.stale_refusals,
                       "failovers": stats.failovers, "write_retries": stats.write_retries},
        });
        if a.json {
            println!("{summary}");
        } else {
            println!(
                "{} {} objects of {} in {:.2} s: {:.0} ops/s, {:.1} MB/s, latency p50 {:.2} ms p99 {:.2} ms; {} errors, {} bad; {} failovers, {} stale refusals, {} write retries",
                if a.verify { "verified" } else { "wrote" },
                ok,
                format_bytes(size as u64),
                secs,
                ok as f64 / secs,
                ok as f64 * size as f64 / secs / 1e6,
                pct(0.5),
                pct(0.99),
                errors,
                bad,
                stats.failovers,
                stats.stale_refusals,
                stats.write_retries
            );
        }
        if errors > 0 || bad > 0 {
            bail!(
                "{errors} operations failed and {bad} objects were wrong or missing{}",
                first_err.map(|e| format!(" (first error: {e})")).unwrap_or_default()
            );
        }
        Ok(())
    })
}
