//! `strata upgrade`: converts a data directory written by the single-node
//! server of Strata before 0.3 into the one server's layout.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use futures_util::stream::{self, StreamExt};
use strata_meta::api::TierClass;
use strata_store::{Store, StoreConfig, Tier};

use crate::units::parse_bytes;

/// Convert a node directory written by the single-node server of Strata
/// before 0.3 (one segment store per workload under each device directory,
/// `DEVICE/_shared/`, `DEVICE/WORKLOAD/`, and DATA/workloads.log) into the
/// one server's layout (a cluster of one: placement rows under
/// `DEVICE/rows/`, metadata in DATA/meta), in place.
///
/// Every live object is copied with its cookie (so the URLs handed out
/// keep working) and its creation time as its stamp (of two versions of a
/// name the newer wins), through the server itself, started inside this
/// command; the old stores are removed only once every object is durable
/// in the new layout. Interrupted, it can be run again: it starts over from
/// the old stores, which are still whole.
///
/// Give the same --data, --flash and --disk as to `strata server`.
#[derive(clap::Args)]
#[command(verbatim_doc_comment)]
pub struct Args {
    /// The node directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// A flash device directory (repeatable; default DATA/flash).
    #[arg(long, value_name = "DIR")]
    flash: Vec<PathBuf>,
    /// A disk device directory (repeatable; default DATA/disk).
    #[arg(long, value_name = "DIR")]
    disk: Vec<PathBuf>,
    /// Largest object of the old stores (their server's --max-object-size;
    /// a segment store holds needles of at most 1 GiB).
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    max_object_size: String,
    /// Objects copied at once.
    #[arg(long, value_name = "N", default_value_t = 16)]
    parallel: usize,
}

/// Directories of a device that are the one server's own, not old stores.
const OWN: [&str; 2] = ["rows", "_readcache"];

/// The old per-workload store directories under the device directories
/// (a subdirectory holding segment files, other than the one server's).
pub fn legacy_stores(_data: &Path, devices: &[strata_server::Device]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for d in devices {
        let Ok(rd) = std::fs::read_dir(&d.path) else {
            continue;
        };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if OWN.contains(&name.as_str()) || name.starts_with("trash") || !e.path().is_dir() {
                continue;
            }
            let has_segments = std::fs::read_dir(e.path()).is_ok_and(|rd| {
                rd.flatten()
                    .any(|f| f.file_name().to_string_lossy().ends_with(".seg"))
            });
            if has_segments {
                out.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// Opens the old store `name` over every device directory that has it.
fn open_old(
    name: &str,
    devices: &[strata_server::Device],
    max_object: u64,
) -> anyhow::Result<Store> {
    let devs: Vec<(PathBuf, Tier)> = devices
        .iter()
        .map(|d| {
            let tier = match d.tier {
                TierClass::Flash => Tier::Flash,
                TierClass::Disk => Tier::Disk,
            };
            (d.path.join(name), tier)
        })
        .filter(|(p, _)| p.is_dir())
        .collect();
    let Some(((first, tier), rest)) = devs.split_first() else {
        bail!("store {name}: no directory");
    };
    let mut sc = StoreConfig::new(first, *tier);
    for (p, t) in rest {
        sc = sc.with_device(p, *t);
    }
    sc.max_object_size = (max_object + 64 * 1024).min(1 << 30);
    Store::open(sc).with_context(|| format!("opening the old store {name}"))
}

/// Runs `strata upgrade`.
pub fn run(a: Args) -> anyhow::Result<()> {
    let devices = super::devices::device_list(&a.data, &a.flash, &a.disk)?;
    let legacy = legacy_stores(&a.data, &devices);
    if legacy.is_empty() {
        println!(
            "{}: no stores of the single-node server before 0.3; nothing to upgrade",
            a.data.display()
        );
        return Ok(());
    }
    if a.data.join("cluster-node.json").exists() && !a.data.join("meta").join("meta.json").exists()
    {
        bail!(
            "{} is a member of a cluster (DATA/cluster-node.json): old stores there are not \
             a single node's",
            a.data.display()
        );
    }
    let max_object = parse_bytes(&a.max_object_size).context("--max-object-size")?;
    let names: BTreeMap<String, ()> = legacy
        .iter()
        .filter_map(|p| p.file_name())
        .map(|n| (n.to_string_lossy().into_owned(), ()))
        .collect();
    eprintln!(
        "strata upgrade: {} old store(s) ({}) in {} director(ies)",
        names.len(),
        names.keys().cloned().collect::<Vec<_>>().join(", "),
        legacy.len()
    );

    // The server runs inside this command: its protocol answers only it.
    strata_meta::cluster_auth::process_secret_or_generate();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let meta = rt.block_on(strata_server::embedded_meta(
        &a.data.join("meta"),
        "127.0.0.1:0",
        None,
    ))?;
    let mut opts = strata_server::NodeOptions::new(&meta, "127.0.0.1:0", &a.data);
    opts.devices = devices.clone();
    opts.cluster_of_one = true;
    opts.scrub_interval = None;
    opts.gateway.max_object_size = max_object;
    let server = rt.spawn(strata_server::serve(opts));
    let client = rt
        .block_on(strata_client::Client::connect(
            &meta,
            strata_client::ClientConfig::default(),
        ))
        .context("starting the one server for the upgrade")?;
    let client = Arc::new(client);

    let copied = Arc::new(AtomicU64::new(0));
    let skipped = Arc::new(AtomicU64::new(0));
    let bytes = Arc::new(AtomicU64::new(0));
    for name in names.keys() {
        let store = open_old(name, &devices, max_object)?;
        let segments = store.segments();
        let total: u64 = segments.iter().map(|s| s.needles).sum();
        let pb = crate::progress::bar(total, name);
        let store = Arc::new(store);
        for seg in segments {
            let needles = store
                .needles(seg.id)
                .with_context(|| format!("reading segment {} of store {name}", seg.id))?;
            // Objects of this segment that are live, decoded.
            let mut items = Vec::new();
            for n in needles {
                pb.inc(1);
                let n = match n {
                    Ok(n) => n,
                    Err(e) => {
                        eprintln!("strata upgrade: store {name}: skipped a damaged needle: {e}");
                        skipped.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                if !store
                    .is_live(seg.id, n.offset, n.key, n.alt_key)
                    .unwrap_or(false)
                {
                    continue;
                }
                let data = Bytes::from(n.data);
                let Ok((h, body)) = strata_node::object::ObjectHeader::decode(&data) else {
                    eprintln!(
                        "strata upgrade: store {name}: skipped a needle that is not an object"
                    );
                    skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let Some((bucket, key)) = h.full_name.split_once('/') else {
                    skipped.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                items.push((
                    bucket.to_string(),
                    key.to_string(),
                    body,
                    n.cookie,
                    h.created_ms.saturating_mul(1000),
                ));
            }
            let puts = items.into_iter().map(|(bucket, key, body, cookie, stamp)| {
                let (client, copied, bytes) = (client.clone(), copied.clone(), bytes.clone());
                async move {
                    let len = body.len() as u64;
                    client
                        .put_as(&bucket, &key, body, cookie, stamp)
                        .await
                        .with_context(|| format!("copying {bucket}/{key}"))?;
                    copied.fetch_add(1, Ordering::Relaxed);
                    bytes.fetch_add(len, Ordering::Relaxed);
                    Ok::<_, anyhow::Error>(())
                }
            });
            let results: Vec<anyhow::Result<()>> = rt.block_on(
                stream::iter(puts)
                    .buffer_unordered(a.parallel.max(1))
                    .collect(),
            );
            for r in results {
                r?;
            }
        }
        pb.finish_and_clear();
        match Arc::try_unwrap(store) {
            Ok(s) => s
                .close()
                .with_context(|| format!("closing the old store {name}"))?,
            Err(_) => bail!("the old store {name} is still in use"),
        }
    }
    // Every object is durable in the new layout (each put returned after
    // its replica's fdatasync): the old stores can go.
    for dir in &legacy {
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    for f in ["workloads.log", "workloads.json"] {
        let _ = std::fs::remove_file(a.data.join(f));
    }
    server.abort();
    rt.shutdown_timeout(Duration::from_secs(2));
    println!(
        "upgraded {}: {} objects ({}) copied into the one server's layout, {} skipped; \
         start it with `strata server --data {}`",
        a.data.display(),
        copied.load(Ordering::Relaxed),
        crate::units::format_bytes(bytes.load(Ordering::Relaxed)),
        skipped.load(Ordering::Relaxed),
        a.data.display()
    );
    Ok(())
}
