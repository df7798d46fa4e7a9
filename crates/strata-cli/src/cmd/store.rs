//! `strata store ...`: inspect, check and compact a segment store directory.

use crate::progress;
use crate::units::format_bytes;
use anyhow::{bail, Context};
use clap::Subcommand;
use std::path::PathBuf;
use strata_store::verify::verify_dir;
use strata_store::{Store, StoreConfig, Tier};

/// Inspect, check and compact a segment store directory.
#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    which: Which,
}

#[derive(Subcommand)]
enum Which {
    /// Read every needle of every segment in DIR and check magics and
    /// checksums; print live / deleted / overwritten counts and bytes and
    /// every corruption with its segment and offset. Read-only. Exits
    /// non-zero when a needle is corrupt (a torn tail of the newest segment,
    /// which opening the store cuts off, is reported but is not corruption).
    /// A needle header or superblock one flipped bit damaged is reported
    /// too (its checksum corrects it: the store reads it as written; an
    /// open that scans it writes it back, a compaction rewrites it).
    Verify {
        /// A store (device) directory, or any directory above stores (a
        /// node's data directory): every store under it is checked.
        dir: PathBuf,
        /// Print the report as JSON (one line per store).
        #[arg(long)]
        json: bool,
    },
    /// List the segments of DIR: id, generation, tier, size, needles,
    /// garbage ratio, creation time. Opens the store (recovering it if
    /// needed).
    Ls {
        /// A store (device) directory.
        dir: PathBuf,
        /// Tier class of the directory (flash or disk) for new segments.
        #[arg(long, default_value = "flash")]
        tier: Tier,
    },
    /// Compact sealed segments of DIR online: rewrite them without deleted
    /// and overwritten needles, then swap atomically. Without --segment,
    /// every sealed segment whose garbage ratio is at least --min-garbage.
    Compact {
        /// A store (device) directory.
        dir: PathBuf,
        /// Only this segment (hex id as `strata store ls` prints it).
        #[arg(long, value_parser = parse_hex)]
        segment: Option<u64>,
        /// Minimum garbage ratio (0..=1) of the segments to compact.
        #[arg(long, default_value_t = 0.0)]
        min_garbage: f64,
        /// Tier class of the directory (flash or disk) for new segments.
        #[arg(long, default_value = "flash")]
        tier: Tier,
    },
    /// Store the contents of FILE (or standard input with `-`) as one object;
    /// returns once it is durable. The directory is created if absent.
    Put {
        /// A store (device) directory.
        dir: PathBuf,
        /// 64-bit key.
        #[arg(long)]
        key: u64,
        /// 32-bit alternate key.
        #[arg(long, default_value_t = 0)]
        alt: u32,
        /// 32-bit cookie that reads must present.
        #[arg(long)]
        cookie: u32,
        /// Largest object accepted.
        #[arg(long, default_value = "64MiB", value_parser = parse_size)]
        max_object_size: u64,
        /// Tier class of the directory (flash or disk) for new segments.
        #[arg(long, default_value = "flash")]
        tier: Tier,
        /// The object's bytes (`-` for standard input).
        file: PathBuf,
    },
    /// Write one object to standard output (exit status 2 when absent or
    /// when the cookie is wrong).
    Get {
        /// A store (device) directory.
        dir: PathBuf,
        /// 64-bit key.
        #[arg(long)]
        key: u64,
        /// 32-bit alternate key.
        #[arg(long, default_value_t = 0)]
        alt: u32,
        /// The object's cookie.
        #[arg(long)]
        cookie: u32,
    },
    /// Delete one object (its needle is flagged on disk synchronously).
    Delete {
        /// A store (device) directory.
        dir: PathBuf,
        /// 64-bit key.
        #[arg(long)]
        key: u64,
        /// 32-bit alternate key.
        #[arg(long, default_value_t = 0)]
        alt: u32,
    },
}

fn parse_size(s: &str) -> Result<u64, String> {
    crate::units::parse_bytes(s).map_err(|e| format!("{e:#}"))
}

fn parse_hex(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16)
        .map_err(|e| format!("bad segment id {s:?}: {e}"))
}

/// Runs the command.
pub fn run(args: Args) -> anyhow::Result<()> {
    match args.which {
        Which::Verify { dir, json } => verify(dir, json),
        Which::Ls { dir, tier } => ls(dir, tier),
        Which::Compact {
            dir,
            segment,
            min_garbage,
            tier,
        } => compact(dir, segment, min_garbage, tier),
        Which::Put {
            dir,
            key,
            alt,
            cookie,
            max_object_size,
            tier,
            file,
        } => {
            let data = if file.as_os_str() == "-" {
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut std::io::stdin(), &mut v)
                    .context("reading standard input")?;
                v
            } else {
                std::fs::read(&file).with_context(|| format!("reading {}", file.display()))?
            };
            let mut cfg = StoreConfig::new(&dir, tier);
            cfg.create_dirs = true;
            cfg.auto_compaction = false;
            cfg.version_order = order_of(&dir)?;
            cfg.max_object_size = max_object_size;
            let store =
                Store::open(cfg).with_context(|| format!("opening store {}", dir.display()))?;
            store
                .put(tier, key, alt, cookie, &data)
                .with_context(|| format!("storing key {key} alt {alt}"))?;
            store.close().context("closing store")
        }
        Which::Get {
            dir,
            key,
            alt,
            cookie,
        } => {
            let store = open(dir, Tier::Flash)?;
            match store
                .get(key, alt, cookie)
                .with_context(|| format!("reading key {key} alt {alt}"))?
            {
                Some(o) => {
                    std::io::Write::write_all(&mut std::io::stdout().lock(), &o.data)
                        .context("writing standard output")?;
                    store.close().context("closing store")
                }
                None => {
                    eprintln!(
                        "strata: not found: key {key} alt {alt} (absent, deleted or wrong cookie)"
                    );
                    std::process::exit(2);
                }
            }
        }
        Which::Delete { dir, key, alt } => {
            let store = open(dir, Tier::Flash)?;
            let existed = store
                .delete(key, alt)
                .with_context(|| format!("deleting key {key} alt {alt}"))?;
            println!("{}", if existed { "deleted" } else { "not found" });
            store.close().context("closing store")
        }
    }
}

/// The version order the store in `dir` was written with, if any: a row
/// of `strata server` orders by its records' stamps, and opening it
/// without that order could keep an older version after a crash (the
/// store refuses to).
fn order_of(dir: &std::path::Path) -> anyhow::Result<Option<strata_store::VersionOrder>> {
    let stamps = strata_server::rows::RECORD_STAMPS;
    match strata_store::recorded_order(dir)
        .with_context(|| format!("reading {}", dir.join(strata_store::ORDER_FILE).display()))?
    {
        None => Ok(None),
        Some(name) if name == stamps.name => Ok(Some(stamps)),
        Some(name) => bail!(
            "store {} orders versions by `{name}`, which this strata does not know: it cannot open it safely",
            dir.display()
        ),
    }
}

fn open(dir: PathBuf, tier: Tier) -> anyhow::Result<Store> {
    let mut cfg = StoreConfig::new(&dir, tier);
    cfg.auto_compaction = false;
    cfg.version_order = order_of(&dir)?;
    let store = Store::open(cfg).with_context(|| format!("opening store {}", dir.display()))?;
    let r = store.open_report();
    for (seg, at, bytes) in &r.torn_tails {
        eprintln!(
            "recovered: cut a torn tail of {bytes} bytes at offset {at} of segment {seg:016x}"
        );
    }
    for q in &r.quarantined {
        match &q.moved_to {
            Some(t) => eprintln!(
                "quarantined: {} moved to {}: {}",
                q.path.display(),
                t.display(),
                q.reason
            ),
            None => eprintln!(
                "quarantined: {} (left in place): {}",
                q.path.display(),
                q.reason
            ),
        }
    }
    for (seg, at) in &r.corrupt_regions {
        eprintln!("damaged: a needle kept at offset {at} of segment {seg:016x} (its reads fail)");
    }
    for p in &r.mended_superblocks {
        eprintln!(
            "corrected: one flipped bit in the superblock of {} (written back)",
            p.display()
        );
    }
    for (seg, at) in &r.mended_headers {
        eprintln!(
            "corrected: one flipped bit in the needle header at offset {at} of segment {seg:016x} (its data is whole; the byte written back)"
        );
    }
    if let Some(why) = &r.checkpoints_deferred {
        eprintln!("index checkpoints deferred (the next open scans again): {why}");
    }
    Ok(store)
}

/// Every store directory at or under `dir` (a directory holding segment
/// files): a node's data directory, a device, a workload's or a row's
/// store, at whatever level.
fn stores_under(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut subdirs = Vec::new();
    let mut is_store = false;
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            // Files an open set aside are known bad, not a store.
            if e.file_name() != strata_store::QUARANTINE_DIR {
                subdirs.push(p);
            }
        } else if e
            .file_name()
            .to_str()
            .is_some_and(|n| strata_store::segment::parse_file_name(n).is_some_and(|f| f.2))
        {
            is_store = true;
        }
    }
    if is_store {
        out.push(dir.to_path_buf());
    }
    subdirs.sort();
    for d in subdirs {
        out.extend(stores_under(&d));
    }
    out
}

fn verify(dir: PathBuf, json: bool) -> anyhow::Result<()> {
    match std::fs::metadata(&dir) {
        Ok(md) if md.is_dir() => {}
        // The store's own errors say what is wrong (does not exist, not a
        // directory).
        _ => return verify_one(dir, json),
    }
    let stores = stores_under(&dir);
    // One store at DIR itself: its report as it always was.
    if stores.len() <= 1 && stores.first().is_none_or(|s| *s == dir) {
        return verify_one(dir, json);
    }
    let mut bad_stores = Vec::new();
    for s in &stores {
        if !json {
            println!();
        }
        if let Err(e) = verify_one(s.clone(), json) {
            if !json {
                println!("  {e:#}");
            }
            bad_stores.push(s.display().to_string());
        }
    }
    if !json {
        println!(
            "\n{}: {} stores checked, {} with corruption",
            dir.display(),
            stores.len(),
            bad_stores.len()
        );
    }
    if !bad_stores.is_empty() {
        bail!(
            "corruption in {} of {} stores under {}: {}",
            bad_stores.len(),
            stores.len(),
            dir.display(),
            bad_stores.join(", ")
        );
    }
    Ok(())
}

/// Verifies the one store at `dir`.
fn verify_one(dir: PathBuf, json: bool) -> anyhow::Result<()> {
    let pb = progress::bytes_bar(0, "verify");
    let rep = verify_dir(&dir, &mut |done, total| {
        pb.set_length(total);
        pb.set_position(done);
    })
    .with_context(|| format!("verifying {}", dir.display()))?;
    pb.finish_and_clear();
    let bad: Vec<_> = rep.corruptions.iter().filter(|c| !c.torn_tail).collect();
    if json {
        let corr: Vec<serde_json::Value> = rep
            .corruptions
            .iter()
            .map(|c| {
                serde_json::json!({
                    "segment": format!("{:016x}", c.segment), "path": c.path, "offset": c.offset,
                    "len": c.len, "reason": c.reason, "torn_tail": c.torn_tail,
                })
            })
            .collect();
        let v = serde_json::json!({
            "segments": rep.segments, "bytes": rep.bytes,
            "live_needles": rep.live.needles, "live_bytes": rep.live.bytes,
            "deleted_needles": rep.deleted.needles, "deleted_bytes": rep.deleted.bytes,
            "overwritten_needles": rep.overwritten.needles, "overwritten_bytes": rep.overwritten.bytes,
            "corruptions": corr, "prepared_bytes": rep.prepared_bytes,
        });
        println!("{v}");
    } else {
        println!(
            "{}: {} segments, {}",
            dir.display(),
            rep.segments,
            format_bytes(rep.bytes)
        );
        println!(
            "  live        {:>12} needles {:>14}",
            rep.live.needles,
            format_bytes(rep.live.bytes)
        );
        println!(
            "  deleted     {:>12} needles {:>14}",
            rep.deleted.needles,
            format_bytes(rep.deleted.bytes)
        );
        println!(
            "  overwritten {:>12} needles {:>14}",
            rep.overwritten.needles,
            format_bytes(rep.overwritten.bytes)
        );
        if rep.prepared_bytes > 0 {
            println!(
                "  prepared    {:>29} of zeros past the last needle (written ahead by a \
                 running or killed store; cut when the store opens)",
                format_bytes(rep.prepared_bytes)
            );
        }
        for c in &rep.corruptions {
            println!(
                "  {} segment {:016x} ({}) offset {} length {}: {}",
                if c.torn_tail {
                    "torn tail (cut when the store opens):"
                } else {
                    "CORRUPT:"
                },
                c.segment,
                c.path.display(),
                c.offset,
                c.len,
                c.reason
            );
        }
        if bad.is_empty() {
            println!("  no corruption");
        }
    }
    if !bad.is_empty() {
        bail!("{} corrupt region(s) in {}", bad.len(), dir.display());
    }
    Ok(())
}

fn ls(dir: PathBuf, tier: Tier) -> anyhow::Result<()> {
    let store = open(dir, tier)?;
    println!(
        "{:<16} {:>4} {:<5} {:>12} {:>10} {:>8} {:<6} created",
        "segment", "gen", "tier", "size", "needles", "garbage", "state"
    );
    for s in store.segments() {
        let secs = s.created_unix_ns / 1_000_000_000;
        println!(
            "{:016x} {:>4} {:<5} {:>12} {:>10} {:>7.1}% {:<6} {}",
            s.id,
            s.generation,
            s.tier,
            format_bytes(s.size),
            s.needles,
            s.garbage_ratio * 100.0,
            if s.active { "active" } else { "sealed" },
            secs
        );
    }
    let m = store.memory();
    println!(
        "index RAM: sealed {} for {} objects ({:.2} B/object), active {} for {} objects",
        format_bytes(m.sealed_bytes),
        m.sealed_objects,
        m.sealed_bytes_per_object(),
        format_bytes(m.active_bytes),
        m.active_objects
    );
    let soft = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    println!(
        "segment files kept open at most: {} (soft limit on open files: {})",
        store.open_files_budget(),
        soft.map_or_else(|| "unlimited".to_string(), |n| n.to_string())
    );
    store.close().context("closing store")?;
    Ok(())
}

fn compact(dir: PathBuf, segment: Option<u64>, min_garbage: f64, tier: Tier) -> anyhow::Result<()> {
    if !(0.0..=1.0).contains(&min_garbage) {
        bail!("--min-garbage must be between 0 and 1, got {min_garbage}");
    }
    let store = open(dir, tier)?;
    let ids: Vec<u64> = match segment {
        Some(id) => vec![id],
        None => store
            .segments()
            .into_iter()
            .filter(|s| !s.active && s.garbage_ratio >= min_garbage)
            .map(|s| s.id)
            .collect(),
    };
    if ids.is_empty() {
        println!("nothing to compact");
    }
    for id in ids {
        let pb = progress::bytes_bar(0, &format!("{id:016x}"));
        let r = store
            .compact(id, &mut |p| {
                pb.set_length(p.total);
                pb.set_position(p.done);
            })
            .with_context(|| format!("compacting segment {id:016x}"))?;
        pb.finish_and_clear();
        println!(
            "segment {:016x}: {} -> {} ({} -> {} needles) in {:.2} s",
            id,
            format_bytes(r.bytes_before),
            format_bytes(r.bytes_after),
            r.needles_before,
            r.needles_after,
            r.seconds
        );
    }
    store.close().context("closing store")?;
    Ok(())
}
