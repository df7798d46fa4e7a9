//! Opening a store: the directories checked and locked, their segment files
//! found (stale ones removed), each segment loaded ([`super::load`]), the
//! node-wide index built from the run file and the segments' identities
//! ([`super::settle`]), and the background thread started.

use super::background::background;
use super::damage::{quarantine, DamageNote, DAMAGE_NOTE};
use super::handle::{Entry, FdBudget, Segment};
use super::load::{load_segment, Found};
use super::locks::{lock, read, write};
use super::node_index::{Loc, NodeIndex};
use super::report::{CounterCells, OpenReport};
use super::write::new_active;
use super::{Device, Inner, Store};
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
use crate::format::needle;
use crate::format::run as run_file;
use crate::hash::IdHasherBuilder;
use crate::index::Run;
use crate::recent::RecentTable;
use crate::segment::{index_file_name, parse_file_name, sync_dir};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// [`Store::open`].
pub(super) fn open(cfg: StoreConfig) -> Result<Store> {
    if cfg.devices.is_empty() {
        return Err(StoreError::Config("no device directory given".into()));
    }
    if cfg.segment_size < 4096 || cfg.segment_size > 16 << 30 {
        return Err(StoreError::Config(format!(
            "segment size {} is outside 4 KiB ..= 16 GiB",
            cfg.segment_size
        )));
    }
    if cfg.max_object_size == 0 || cfg.max_object_size > u64::from(needle::MAX_DATA_LEN) {
        return Err(StoreError::Config(format!(
            "maximum object size {} is outside 1 ..= {}",
            cfg.max_object_size,
            needle::MAX_DATA_LEN
        )));
    }
    if !(8..=40).contains(&cfg.fingerprint_bits) {
        return Err(StoreError::Config("fingerprint bits must be 8..=40".into()));
    }
    for d in &cfg.devices {
        match std::fs::metadata(&d.path) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => return Err(StoreError::NotADirectory(d.path.clone())),
            Err(_) if cfg.create_dirs => strata_fs::create_dir_all(&d.path)
                .map_err(StoreError::io("creating directory", &d.path))?,
            Err(_) => return Err(StoreError::MissingDirectory(d.path.clone())),
        }
    }
    let mut locks = Vec::new();
    for d in &cfg.devices {
        locks.push(lock_dir(&d.path)?);
    }
    check_order(&cfg)?;
    let mut report = OpenReport {
        earlier_damage: strata_fs::read_if_exists(&cfg.devices[0].path.join(DAMAGE_NOTE))
            .map_err(StoreError::io(
                "reading",
                &cfg.devices[0].path.join(DAMAGE_NOTE),
            ))?
            .map(|b| String::from_utf8_lossy(&b).into_owned()),
        ..OpenReport::default()
    };
    let note = DamageNote::new(&cfg);
    let found = discover(&cfg, &note, &mut report)?;
    let max_id = found.keys().next_back().copied();
    let next_id = AtomicU64::new(max_id.map_or(1, |m| m + 1));
    // The highest id of each device among first generations is its
    // active segment candidate: a rewritten segment (a compaction's or
    // a move's, generation 1 and up) was sealed before it was
    // rewritten, even when a move gave the device a higher id than its
    // active segment's. Taking such a one would mean creating a new
    // active segment, which a full volume has no room for.
    let mut last_of_device: Vec<Option<u64>> = vec![None; cfg.devices.len()];
    for (&id, f) in &found {
        if f.generation == 0 {
            last_of_device[f.device] = Some(id);
        }
    }
    let fds = Arc::new(FdBudget::new(&cfg));
    // The run, valid for the segments that still have the needles it
    // numbered (same id, same needle count: rewrites only drop needles).
    // Read first: a sealed segment it covers needs no identities
    // loaded (they are only counted).
    let run = read_run_index(&cfg.devices[0].path.join(run_file::FILE_NAME));
    let run_counts: HashMap<u64, u64> = run
        .as_ref()
        .map(|r| {
            r.seg_lists()
                .iter()
                .flat_map(|l| l.segments().to_vec())
                .collect()
        })
        .unwrap_or_default();
    let mut table: Vec<Option<Arc<Segment>>> = Vec::new();
    let mut entries_of: Vec<Vec<Entry>> = Vec::new();
    // Segments load on a few threads (a restart at 100M objects reads
    // ~250 checkpoints of 1.6 MB and builds their offset tables), each
    // with one buffer for every checkpoint it reads: a fresh one per
    // file would fault its pages in again.
    let list: Vec<(u64, &Found)> = found.iter().map(|(&id, f)| (id, f)).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4)
        .min(list.len().max(1));
    type Loaded = (Result<(Segment, Vec<Entry>, bool)>, OpenReport);
    let results: Vec<Mutex<Option<Loaded>>> = list.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|sc| {
        for _ in 0..workers {
            sc.spawn(|| {
                let mut ck_buf: Vec<u8> = Vec::new();
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&(id, f)) = list.get(i) else { break };
                    let is_last = last_of_device[f.device] == Some(id);
                    let mut rep = OpenReport::default();
                    let r = load_segment(
                        &cfg,
                        f,
                        is_last,
                        &fds,
                        &run_counts,
                        &note,
                        &mut rep,
                        &mut ck_buf,
                    );
                    *lock(&results[i]) = Some((r, rep));
                }
            });
        }
    });
    // Segments whose checkpoint is of the previous format version.
    let mut upgrade: Vec<u32> = Vec::new();
    for (&(id, f), cell) in list.iter().zip(results) {
        let Some((loaded, rep)) = cell.into_inner().unwrap_or_else(|p| p.into_inner()) else {
            return Err(StoreError::Config(format!(
                "segment {id:016x} was not loaded"
            )));
        };
        report.scanned_segments += rep.scanned_segments;
        report.orphan_needles += rep.orphan_needles;
        report.torn_tails.extend(rep.torn_tails);
        report.prepared_bytes_cut += rep.prepared_bytes_cut;
        report.corrupt_regions.extend(rep.corrupt_regions);
        report.nameless_regions.extend(rep.nameless_regions);
        report.mended_headers.extend(rep.mended_headers);
        report.mended_superblocks.extend(rep.mended_superblocks);
        report.quarantined.extend(rep.quarantined);
        match loaded {
            Ok((mut seg, entries, old_checkpoint)) => {
                seg.slot = table.len() as u32;
                if old_checkpoint {
                    upgrade.push(seg.slot);
                }
                table.push(Some(Arc::new(seg)));
                entries_of.push(entries);
            }
            // One unreadable segment file must not stop the node: it
            // is set aside (its objects are absent until an operator
            // restores it) and the rest serves.
            Err(StoreError::NotASegment { reason, .. }) => {
                let idx = f.path.with_file_name(index_file_name(id, f.generation));
                report
                    .quarantined
                    .push(quarantine(&note, &f.path, Some(idx), reason));
            }
            Err(e) => return Err(e),
        }
    }
    report.segments = table.len();
    let mut covered: std::collections::HashSet<u32> = std::collections::HashSet::new();
    if let Some(r) = &run {
        let by_id: HashMap<u64, &Arc<Segment>> =
            table.iter().flatten().map(|s| (s.id, s)).collect();
        for list in r.seg_lists() {
            for (i, &(id, n)) in list.segments().iter().enumerate() {
                let slot = by_id
                    .get(&id)
                    .and_then(|s| (!s.is_active() && s.needle_count() == n).then_some(s.slot));
                list.set_place(i, slot);
                covered.extend(slot);
            }
        }
    }
    let mut devices = Vec::new();
    for (i, d) in cfg.devices.iter().enumerate() {
        let active = table
            .iter()
            .flatten()
            .find(|s| s.device == i && s.is_active())
            .cloned();
        let active = match active {
            Some(a) => a,
            None => {
                let s = Arc::new(new_active(
                    &cfg,
                    i,
                    next_id.fetch_add(1, Ordering::Relaxed),
                    table.len() as u32,
                    &fds,
                )?);
                table.push(Some(s.clone()));
                s
            }
        };
        devices.push(Device {
            path: d.path.clone(),
            tier: d.tier,
            writer: Mutex::new(active),
        });
    }
    let hash_mask = !(u64::MAX
        .checked_shr(cfg.recent_hash_bits.clamp(1, 64))
        .unwrap_or(0));
    let inner = Arc::new(Inner {
        cfg,
        devices,
        idx: RwLock::new(NodeIndex {
            table,
            recent: RecentTable::new(),
            tombs: HashSet::with_hasher(IdHasherBuilder),
            hash_mask,
            run: run.map(Arc::new),
            recent_floor: 0,
        }),
        next_id,
        rr: AtomicUsize::new(0),
        fds,
        counters: CounterCells::default(),
        update: Mutex::new(()),
        maintenance: Mutex::new(()),
        checkpointing: Mutex::new(()),
        flags_pending: Mutex::new(Vec::new()),
        stop: AtomicBool::new(false),
        _locks: locks,
    });
    // Identities of the segments the run does not cover go to the
    // recent map, oldest segment first.
    let mut cands: Vec<(u64, u32, Loc)> = Vec::new();
    for (slot, entries) in entries_of.into_iter().enumerate() {
        if covered.contains(&(slot as u32)) {
            continue;
        }
        for (k, a, ord) in entries {
            cands.push((
                k,
                a,
                Loc {
                    slot: slot as u32,
                    ord,
                },
            ));
        }
    }
    inner.settle(cands)?;
    {
        let mut ix = write(&inner.idx);
        ix.recent_floor = ix.recent_len();
    }
    // A checkpoint written over a damaged region that names no needle
    // would hide it from the next open: the note first.
    if let Some(&(seg, off)) = report.nameless_regions.first() {
        note.before_repair(&format!(
            "{} damaged region(s) naming no needle, the first in segment {seg:016x} at {off}",
            report.nameless_regions.len()
        ))?;
    }
    // Scanned or re-sealed segments get their checkpoints now, so that
    // the next open is fast even if this process is killed soon; on a
    // full device they wait (the background thread retries), since
    // the segments alone are authoritative.
    if let Err(e) = inner.write_checkpoints() {
        report.checkpoints_deferred = Some(e.to_string());
    }
    // Checkpoints of the previous version are rewritten in this one by
    // the background thread (or the close), not here: the open stays
    // as fast as the old files allow, and the next is faster.
    {
        let ix = read(&inner.idx);
        for slot in upgrade {
            if let Some(s) = ix.seg(slot) {
                s.dirty.store(true, Ordering::Relaxed);
            }
        }
    }
    let weak = Arc::downgrade(&inner);
    let bg = std::thread::Builder::new()
        .name("strata-store-bg".into())
        .spawn(move || background(weak))
        .map_err(StoreError::io(
            "starting background thread",
            "strata-store-bg",
        ))?;
    Ok(Store {
        inner,
        bg: Some(bg),
        report,
    })
}

/// Name of the lock file in each device directory.
pub const LOCK_FILE: &str = "strata.lock";

/// Takes the exclusive lock of a device directory, so that two processes
/// never append to (or recover) the same segments.
fn lock_dir(dir: &std::path::Path) -> Result<File> {
    let path = dir.join(LOCK_FILE);
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(StoreError::io("opening lock file", &path))?;
    // A lock held for a moment only is waited for (up to 2 s): the lock
    // of a store just closed in this process can outlive it briefly in a
    // child forked meanwhile (between its fork and its exec, which closes
    // the descriptor), or in a process that is exiting.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    loop {
        match rustix::fs::flock(&f, rustix::fs::FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => return Ok(f),
            Err(e) if e == rustix::io::Errno::WOULDBLOCK => {
                if std::time::Instant::now() >= deadline {
                    return Err(StoreError::InUse(dir.to_path_buf()));
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            Err(e) => return Err(StoreError::io("locking", &path)(e.into())),
        }
    }
}

/// Refuses a store whose directories name a version order other than
/// the one given (or none given), and names the given order in those that
/// name none yet (before anything is written that needs it).
fn check_order(cfg: &StoreConfig) -> Result<()> {
    for d in &cfg.devices {
        let path = d.path.join(crate::config::ORDER_FILE);
        let recorded =
            crate::config::recorded_order(&d.path).map_err(StoreError::io("reading", &path))?;
        match (recorded, cfg.version_order) {
            (Some(r), Some(o)) if r == o.name => {}
            (Some(recorded), given) => {
                return Err(StoreError::VersionOrder {
                    dir: d.path.clone(),
                    recorded,
                    given: given.map_or("without an order".to_string(), |o| {
                        format!("with `{}`", o.name)
                    }),
                })
            }
            (None, Some(o)) => {
                crate::segment::write_file_atomic(&path, format!("{}\n", o.name).as_bytes())?
            }
            (None, None) => {}
        }
    }
    Ok(())
}

/// Lists the segment files of all devices, keeps the highest generation of
/// each id (lower ones are leftovers of a compaction or move interrupted
/// after its rename) and removes temporary files.
fn discover(
    cfg: &StoreConfig,
    note: &DamageNote,
    report: &mut OpenReport,
) -> Result<BTreeMap<u64, Found>> {
    let mut found: BTreeMap<u64, Found> = BTreeMap::new();
    let mut stale: Vec<PathBuf> = Vec::new();
    let mut indexes: Vec<(u64, u64, PathBuf)> = Vec::new();
    for (i, d) in cfg.devices.iter().enumerate() {
        let rd = std::fs::read_dir(&d.path).map_err(StoreError::io("listing", &d.path))?;
        for e in rd {
            let e = e.map_err(StoreError::io("listing", &d.path))?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let path = e.path();
            if name.ends_with(".tmp") {
                stale.push(path);
                continue;
            }
            match parse_file_name(name) {
                Some((id, generation, true)) => {
                    let f = Found {
                        device: i,
                        generation,
                        path,
                    };
                    match found.get(&id) {
                        Some(old) if old.generation >= generation => stale.push(f.path),
                        _ => {
                            if let Some(old) = found.insert(id, f) {
                                stale.push(old.path);
                            }
                        }
                    }
                }
                Some((id, generation, false)) => indexes.push((id, generation, path)),
                None if name.ends_with(".seg") => report.quarantined.push(quarantine(
                    note,
                    &path,
                    None,
                    "its name is not <16 hex digits>-<8 hex digits>.seg".into(),
                )),
                None => {}
            }
        }
    }
    for (id, generation, path) in indexes {
        let keep = found
            .get(&id)
            .is_some_and(|f| f.generation == generation && path.parent() == f.path.parent());
        if !keep {
            stale.push(path);
        }
    }
    let mut dirs = Vec::new();
    for p in stale {
        if let Some(d) = p.parent() {
            dirs.push(d.to_path_buf());
        }
        match strata_fs::remove_file(&p) {
            // The damage note's temporary file, listed above, is renamed
            // by a repair meanwhile (or was never there).
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            r => r.map_err(StoreError::io("removing stale file", &p))?,
        }
    }
    dirs.dedup();
    for d in dirs {
        sync_dir(&d)?;
    }
    Ok(found)
}

/// Reads the header and index section of the run file (not its keys, which
/// only a merge needs); None if missing or damaged.
fn read_run_index(path: &std::path::Path) -> Option<Run> {
    let f = File::open(path).ok()?;
    run_file::read_index(&f).ok()
}
