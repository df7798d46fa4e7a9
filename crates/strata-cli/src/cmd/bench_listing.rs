//! `strata bench listing`: the S3 listing index at scale — fill one
//! bucket with many names through the index's own API (a bulk load: going
//! through HTTP would take days at 100M), then time pages of it. The
//! index file is a node's (`DATA/listing.redb`), so a node started on the
//! same data directory afterwards serves the bucket over S3 (the bucket
//! must exist in its metadata service: create it over S3 first).

use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;
use strata_proto::{IndexEntry, ListQuery};
use strata_server::index::ListingIndex;

/// Fill a bucket of the listing index with N names, then time pages.
#[derive(clap::Args)]
pub struct Args {
    /// The node's data directory (the index is DATA/listing.redb).
    #[arg(long)]
    data: PathBuf,
    /// The bucket.
    #[arg(long, default_value = "big")]
    bucket: String,
    /// Names the bucket holds when filled: `DDDDD/NNNNNNNNNNN`, 10,000
    /// names a directory, in order.
    #[arg(long, default_value_t = 1_000_000)]
    names: u64,
    /// Names already in it (a fill that was stopped goes on from here);
    /// with --names equal to it, no fill, only the pages.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Names per transaction while filling.
    #[arg(long, default_value_t = 200_000)]
    batch: u64,
    /// Pages timed of each kind.
    #[arg(long, default_value_t = 1000)]
    pages: usize,
    /// Keys per page (S3's max-keys).
    #[arg(long, default_value_t = 1000)]
    max_keys: usize,
}

/// The i-th name of the bucket (10,000 to a directory).
pub fn name(i: u64) -> String {
    format!("{:05}/{:011}", i / 10_000, i)
}

fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Runs the benchmark.
pub fn run(a: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&a.data).with_context(|| format!("creating {}", a.data.display()))?;
    let path = a.data.join("listing.redb");
    let idx = ListingIndex::open(&path)?;
    let entry = |i: u64| IndexEntry {
        size: 1024,
        etag: format!("{:032x}", i.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
        modified_ms: 1_795_000_000_000 + i,
        meta: None,
        stamp: 0,
    };
    let start = Instant::now();
    let mut i = a.from;
    let mut last_report = Instant::now();
    while i < a.names {
        let end = (i + a.batch).min(a.names);
        let batch: Vec<(String, IndexEntry)> = (i..end).map(|j| (name(j), entry(j))).collect();
        idx.write_batch(&a.bucket, batch.iter().map(|(n, e)| (n.as_str(), e)))?;
        i = end;
        if last_report.elapsed().as_secs() >= 30 || i == a.names {
            let s = start.elapsed().as_secs_f64();
            eprintln!(
                "{i} names ({:.0}/s since start), {:.1} GB on disk",
                (i - a.from) as f64 / s,
                std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / 1e9
            );
            last_report = Instant::now();
        }
    }
    if a.names > a.from {
        let s = start.elapsed().as_secs_f64();
        println!(
            "filled {} names in {s:.0} s ({:.0} names/s, transactions of {}); index file {:.2} GB",
            a.names - a.from,
            (a.names - a.from) as f64 / s,
            a.batch,
            std::fs::metadata(&path).map_or(0, |m| m.len()) as f64 / 1e9
        );
    }
    // Pages from random places (a fixed xorshift: the same places every run).
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % a.names
    };
    for (kind, delim, prefix) in [
        ("flat (no delimiter)", None, false),
        (
            "delimiter / under a directory prefix",
            Some("/".to_string()),
            true,
        ),
        (
            "delimiter / at the top (10,000 common prefixes)",
            Some("/".to_string()),
            false,
        ),
    ] {
        let mut lat = Vec::with_capacity(a.pages);
        let mut keys = 0usize;
        for _ in 0..a.pages {
            let n = next();
            let (prefix, after) = if prefix {
                (format!("{:05}/", n / 10_000), name(n))
            } else if delim.is_some() {
                (String::new(), format!("{:05}/", n / 10_000))
            } else {
                (String::new(), name(n))
            };
            let q = ListQuery {
                prefix,
                start_after: after,
                delimiter: delim.clone(),
                max: a.max_keys,
            };
            let t = Instant::now();
            let page = idx.list(&a.bucket, &q)?;
            lat.push(t.elapsed().as_secs_f64() * 1e3);
            keys += page.contents.len() + page.common_prefixes.len();
        }
        let mean = keys as f64 / a.pages as f64;
        println!(
            "index page, {kind}: {} pages of up to {} ({mean:.0} on average): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            a.pages,
            a.max_keys,
            pct(&mut lat, 0.5),
            pct(&mut lat, 0.99),
            pct(&mut lat, 1.0)
        );
    }
    Ok(())
}
