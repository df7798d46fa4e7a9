//! `strata bench ec`: the erasure-coding engine on real files — encode
//! throughput per core, healthy and degraded range reads, rebuild — and
//! the Reed-Solomon coder alone at the shard sizes the server hands it.

use crate::units::{format_bytes, parse_bytes};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::time::Instant;
use strata_ec::Code;

/// Encode a segment-sized file into K+M shards, read needle-sized ranges
/// healthy and degraded (the data shards of M lost), rebuild the lost
/// shards, and print the rates (one thread: figures are per core). Then
/// (unless `--chunks ""`) the Reed-Solomon coder alone, in memory: the
/// parity of K shards of each `--chunks` size, over and over, per
/// CPU-second of the thread (the server's encoder hands the coder
/// min(1 MiB, segment size / K) per shard at a time).
#[derive(clap::Args)]
pub struct Args {
    /// Codes to measure, K+M each.
    #[arg(long, value_delimiter = ',', default_value = "4+2,6+3,10+4")]
    codes: Vec<String>,
    /// Bytes of the encoded file (a sealed segment).
    #[arg(long, default_value = "256MiB")]
    size: String,
    /// Bytes of each range read (a needle).
    #[arg(long, default_value = "4KiB")]
    read: String,
    /// Range reads of each kind.
    #[arg(long, default_value_t = 2000)]
    reads: usize,
    /// Scratch directory (default: a temporary one).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Shard sizes for the coder alone ("" skips it): 1MiB is what the
    /// server uses for segments of K MiB or more (64 MiB by default),
    /// 256KiB and 16KiB those of 1 MiB and 64 KiB segments with K = 4.
    #[arg(long, value_delimiter = ',', default_value = "16KiB,256KiB,1MiB")]
    chunks: Vec<String>,
    /// Data bytes the coder alone encodes for each code and shard size.
    #[arg(long, default_value = "1GiB")]
    kernel_bytes: String,
}

fn code_of(s: &str) -> anyhow::Result<Code> {
    let (k, m) = s
        .split_once('+')
        .with_context(|| format!("{s:?} is not K+M"))?;
    Ok(Code::new(k.trim().parse()?, m.trim().parse()?)?)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<()> {
    let size = parse_bytes(&a.size).context("--size")?;
    let read = parse_bytes(&a.read).context("--read")?;
    let scratch = a.dir.is_none();
    let dir = a.dir.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("strata-bench-ec-{}", std::process::id()))
    });
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let res = measure(&a, &dir, size, read).and_then(|()| kernel(&a));
    if scratch {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        let _ = std::fs::remove_file(dir.join("segment"));
    }
    res
}

fn measure(a: &Args, dir: &Path, size: u64, read: u64) -> anyhow::Result<()> {
    if read == 0 || read >= size {
        anyhow::bail!("--read must be positive and smaller than --size");
    }
    let src = dir.join("segment");
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let data: Vec<u8> = (0..size)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(&src, &data)?;
    println!(
        "| code | stored / logical | encode MB/s (1 core) | healthy read p50 / p99 | degraded read p50 / p99 | rebuild of M shards MB/s |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for c in &a.codes {
        let code = code_of(c)?;
        let shards: Vec<PathBuf> = (0..code.k + code.m)
            .map(|i| dir.join(format!("{c}-shard-{i}")))
            .collect();
        let refs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
        let t = Instant::now();
        let h = strata_ec::encode_file(&src, &refs, code, 1)?;
        let enc = size as f64 / t.elapsed().as_secs_f64() / 1e6;
        let stored: u64 = shards
            .iter()
            .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
            .sum();
        let mut healthy = Vec::with_capacity(a.reads);
        let mut degraded = Vec::with_capacity(a.reads);
        // The first M data shards are lost for the degraded reads.
        let available: Vec<(usize, &Path)> = (code.m.min(code.k)..code.k + code.m)
            .map(|i| (i, refs[i]))
            .collect();
        let mut r: u64 = 12345;
        for _ in 0..a.reads {
            r = r
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let off = (r >> 11) % (size - read);
            let t = Instant::now();
            let got = strata_ec::read_range(&h, &refs[..code.k], off, read)?;
            healthy.push(t.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(
                got[..] == data[off as usize..(off + read) as usize],
                "healthy read differs"
            );
            let t = Instant::now();
            let got = strata_ec::decode_range(&h, &available, off, read)?;
            degraded.push(t.elapsed().as_secs_f64() * 1e6);
            anyhow::ensure!(
                got[..] == data[off as usize..(off + read) as usize],
                "degraded read differs"
            );
        }
        let lost: Vec<(usize, PathBuf)> = (0..code.m)
            .map(|i| (i, dir.join(format!("{c}-rebuilt-{i}"))))
            .collect();
        let lost_refs: Vec<(usize, &Path)> = lost.iter().map(|(i, p)| (*i, p.as_path())).collect();
        let t = Instant::now();
        strata_ec::rebuild(&h, &available, &lost_refs)?;
        let reb = (h.shard_len * code.m as u64) as f64 / t.elapsed().as_secs_f64() / 1e6;
        for (i, p) in &lost {
            anyhow::ensure!(
                std::fs::read(p)? == std::fs::read(refs[*i])?,
                "rebuilt shard {i} differs"
            );
            let _ = std::fs::remove_file(p);
        }
        println!(
            "| {c} | {:.3} (ideal {:.3}) | {enc:.0} | {:.0} / {:.0} µs | {:.0} / {:.0} µs | {reb:.0} |",
            stored as f64 / size as f64,
            code.overhead(),
            pct(&mut healthy, 0.5),
            pct(&mut healthy, 0.99),
            pct(&mut degraded, 0.5),
            pct(&mut degraded, 0.99),
        );
        for p in &shards {
            let _ = std::fs::remove_file(p);
        }
    }
    eprintln!(
        "{} segment, {} reads of {} each kind; files in the page cache (a warm machine)",
        format_bytes(size),
        a.reads,
        format_bytes(read)
    );
    Ok(())
}

/// CPU time of the calling thread, in seconds (`/proc/thread-self/schedstat`:
/// nanoseconds on a CPU), so the figure holds on a loaded machine.
fn thread_cpu_secs() -> anyhow::Result<f64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat")
        .context("reading /proc/thread-self/schedstat")?;
    let ns: u64 = s
        .split_whitespace()
        .next()
        .context("empty /proc/thread-self/schedstat")?
        .parse()
        .context("parsing /proc/thread-self/schedstat")?;
    Ok(ns as f64 / 1e9)
}

/// The Reed-Solomon coder alone (`strata_ec::encode_blocks`, the call the
/// server's encoder makes per chunk), in memory: data MB per CPU-second
/// and per wall second.
fn kernel(a: &Args) -> anyhow::Result<()> {
    let chunks: Vec<u64> = a
        .chunks
        .iter()
        .filter(|c| !c.trim().is_empty())
        .map(|c| parse_bytes(c).with_context(|| format!("--chunks {c:?}")))
        .collect::<anyhow::Result<_>>()?;
    if chunks.is_empty() {
        return Ok(());
    }
    let total = parse_bytes(&a.kernel_bytes).context("--kernel-bytes")?;
    if let Some(bad) = chunks.iter().find(|&&c| c == 0 || c % 64 != 0) {
        anyhow::bail!("--chunks: {bad} is not a positive multiple of 64 bytes (the coder's unit)");
    }
    println!();
    println!("| code | shard size | data encoded | MB/s per CPU-second (1 core) | MB/s wall |");
    println!("| --- | ---: | ---: | ---: | ---: |");
    for c in &a.codes {
        let code = code_of(c)?;
        for &chunk in &chunks {
            let mut x: u64 = 0x2545_F491_4F6C_DD1D ^ chunk;
            let data: Vec<Vec<u8>> = (0..code.k)
                .map(|_| {
                    (0..chunk)
                        .map(|_| {
                            x ^= x << 13;
                            x ^= x >> 7;
                            x ^= x << 17;
                            x as u8
                        })
                        .collect()
                })
                .collect();
            let per = chunk * code.k as u64;
            let rounds = total.div_ceil(per).max(1);
            let (cpu0, t) = (thread_cpu_secs()?, Instant::now());
            let mut check = 0u64;
            for _ in 0..rounds {
                let parity = strata_ec::encode_blocks(code, &data)?;
                check = check.wrapping_add(parity.iter().map(|p| p[0] as u64).sum::<u64>());
            }
            let (cpu, wall) = (thread_cpu_secs()? - cpu0, t.elapsed().as_secs_f64());
            let bytes = (rounds * per) as f64;
            println!(
                "| {c} | {} | {} | {:.0} | {:.0} |",
                format_bytes(chunk),
                format_bytes(rounds * per),
                bytes / cpu.max(1e-9) / 1e6,
                bytes / wall.max(1e-9) / 1e6,
            );
            // Keeps the parity from being optimised away.
            std::hint::black_box(check);
        }
    }
    Ok(())
}
