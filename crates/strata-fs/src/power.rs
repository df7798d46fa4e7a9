//! The power-loss model: what a power cut leaves of the files under one
//! directory, played in the process itself (as redb's crash tests play it
//! with a backend that drops unsynced writes), so that it runs anywhere,
//! without FUSE.
//!
//! [`Recorder::start`] turns it on for a directory. From then on every
//! operation of this crate on a file or directory under it is recorded
//! before it is done: a write keeps the bytes it replaces and the file's
//! size before it; a length change keeps the bytes it cuts; a creation,
//! rename or removal keeps what undoes it (a removed file or directory,
//! and a file a rename replaces, are kept as a hard link or a renamed
//! directory beside the root until the change is durable). An fsync or
//! fdatasync of a file forgets its writes (they are durable); an fsync of
//! a directory forgets the changes to its entries.
//!
//! [`Recorder::cut`] is the power cut: it takes the model's lock (no
//! operation is then in flight), and puts every file back as the medium
//! could hold it:
//!
//! - [`Cut::Drop`]: every unsynced write, length change, creation, rename
//!   and removal is undone;
//! - [`Cut::Tear`]: of each file's unsynced writes a random prefix (of at
//!   least one) persists, and the last write of that prefix persists only
//!   in part: each of its 4 KiB pages holds the new bytes or the old ones
//!   (zeros past the old end), at random but at least one old and, of a
//!   write of several pages, at least one new, as the pages of one write
//!   reach the medium in any order; of the unsynced directory changes a
//!   random prefix persists.
//!
//! Every later operation under the directory fails with an I/O error (the
//! machine is off) until the recorder is dropped. Sector writes are taken
//! as atomic (docs/store-format.md, *Assumptions about the medium*): the
//! model never tears inside a 512-byte sector, and tears at 4 KiB pages.
//!
//! Operations that do not pass through this crate are not seen: a file
//! written with `std::fs` directly keeps its bytes, and a directory synced
//! with `std::fs` directly does not count as synced, so code that bypasses
//! the crate shows up as loss in the tests.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

/// The page a torn write persists whole or not at all.
pub const PAGE: u64 = 4096;

/// How a power cut leaves the unsynced writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cut {
    /// All of them lost.
    Drop,
    /// A random prefix of each file's kept, its last write torn.
    Tear,
}

/// What a cut undid.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CutReport {
    /// Files whose unsynced writes were undone in whole or in part.
    pub files: usize,
    /// Writes and length changes undone whole.
    pub writes_dropped: usize,
    /// Writes that persisted in part (some pages old, some new).
    pub writes_torn: usize,
    /// Pages of torn writes put back to their old bytes.
    pub pages_dropped: usize,
    /// Creations, renames and removals undone.
    pub dir_changes_undone: usize,
    /// What was undone, one line each (file, offset and length of a
    /// write; the directory change), for a failing test to show.
    pub undone: Vec<String>,
}

/// One change to a file not yet synced.
#[derive(Debug)]
enum FileOp {
    Write {
        offset: u64,
        len: u64,
        /// The bytes it replaced (those below `size_before`).
        old: Vec<u8>,
        size_before: u64,
    },
    SetLen {
        old_len: u64,
        new_len: u64,
        /// The bytes a cut removed.
        cut: Vec<u8>,
    },
}

#[derive(Debug)]
struct FileLog {
    /// The file, opened anew for reading and writing (never O_DIRECT).
    file: File,
    ops: Vec<FileOp>,
}

/// One change to directory entries not yet synced.
#[derive(Debug)]
enum DirOp {
    /// A file or directory made.
    Created { path: PathBuf },
    /// `from` renamed to `to`; what `to` was, kept at `backup`.
    Renamed {
        from: PathBuf,
        to: PathBuf,
        backup: Option<PathBuf>,
    },
    /// A file or directory removed, kept at `backup`.
    Removed { path: PathBuf, backup: PathBuf },
}

#[derive(Debug)]
struct PendingDir {
    op: DirOp,
    /// The directories whose sync makes it durable.
    dirs: Vec<PathBuf>,
}

#[derive(Debug)]
struct Model {
    id: u64,
    root: PathBuf,
    backups: PathBuf,
    next_backup: u64,
    files: HashMap<(u64, u64), FileLog>,
    /// Inodes seen outside the root.
    outside: std::collections::HashSet<(u64, u64)>,
    dirs: Vec<PendingDir>,
    rng: fastrand::Rng,
    dead: bool,
    /// Operations recorded so far (writes, length changes, syncs,
    /// directory changes and directory syncs under the root).
    ops: u64,
    /// Cut the power right after this many operations.
    cut_after: Option<(u64, Cut)>,
    /// What that cut undid.
    last_cut: Option<CutReport>,
}

static ON: AtomicBool = AtomicBool::new(false);
static MODELS: Mutex<Vec<Model>> = Mutex::new(Vec::new());
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

fn models() -> MutexGuard<'static, Vec<Model>> {
    MODELS.lock().unwrap_or_else(|e| e.into_inner())
}

fn off() -> io::Error {
    io::Error::other("the power is off (strata-fs power-loss model)")
}

/// Records the operations under one directory; a power cut on command.
#[derive(Debug)]
pub struct Recorder {
    id: u64,
}

impl Recorder {
    /// Turns the model on for `root` (which must exist), its choices drawn
    /// from `seed`. The backups of removed and replaced files live in
    /// `ROOT.power-backups` beside it (the same file system).
    pub fn start(root: &Path, seed: u64) -> io::Result<Recorder> {
        let root = std::fs::canonicalize(root)?;
        let mut b = root.as_os_str().to_owned();
        b.push(".power-backups");
        let backups = PathBuf::from(b);
        std::fs::create_dir_all(&backups)?;
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let mut all = models();
        if all
            .iter()
            .any(|m| m.root.starts_with(&root) || root.starts_with(&m.root))
        {
            return Err(io::Error::other(format!(
                "a power-loss model already records {} or a directory around it",
                root.display()
            )));
        }
        all.push(Model {
            id,
            root,
            backups,
            next_backup: 0,
            files: HashMap::new(),
            outside: Default::default(),
            dirs: Vec::new(),
            rng: fastrand::Rng::with_seed(seed),
            dead: false,
            ops: 0,
            cut_after: None,
            last_cut: None,
        });
        ON.store(true, Ordering::SeqCst);
        Ok(Recorder { id })
    }

    /// Unsynced writes and directory changes held now.
    pub fn pending(&self) -> (usize, usize) {
        let all = models();
        all.iter().find(|m| m.id == self.id).map_or((0, 0), |m| {
            (m.files.values().map(|f| f.ops.len()).sum(), m.dirs.len())
        })
    }

    /// Cuts the power right after the `n`th operation from now (1: the
    /// next one), as [`Recorder::cut`] would: the operation itself is
    /// done, every later one fails. A test that runs an update with
    /// `n = 1, 2, …` until it completes cuts it at each of its steps.
    pub fn cut_after(&self, n: u64, how: Cut) {
        let mut all = models();
        if let Some(m) = all.iter_mut().find(|m| m.id == self.id) {
            m.cut_after = Some((m.ops + n.max(1), how));
        }
    }

    /// Operations recorded so far.
    pub fn ops(&self) -> u64 {
        let all = models();
        all.iter().find(|m| m.id == self.id).map_or(0, |m| m.ops)
    }

    /// Whether the power is off, and what its cut undid.
    pub fn cut_report(&self) -> Option<CutReport> {
        let all = models();
        all.iter()
            .find(|m| m.id == self.id)
            .and_then(|m| m.last_cut.clone())
    }

    /// The power cut: puts the files back as the medium could hold them
    /// ([`Cut`]); every later operation under the root fails until the
    /// recorder is dropped.
    pub fn cut(&self, how: Cut) -> io::Result<CutReport> {
        let mut all = models();
        let Some(m) = all.iter_mut().find(|m| m.id == self.id) else {
            return Err(io::Error::other("no such power-loss model"));
        };
        if m.dead {
            return Err(off());
        }
        m.dead = true;
        let r = m.cut(how)?;
        m.last_cut = Some(r.clone());
        Ok(r)
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        let mut all = models();
        if let Some(i) = all.iter().position(|m| m.id == self.id) {
            let m = all.remove(i);
            let _ = std::fs::remove_dir_all(&m.backups);
        }
        if all.is_empty() {
            ON.store(false, Ordering::SeqCst);
        }
    }
}

/// Turns the model on for the process from its environment, when
/// `STRATA_POWER_ROOT` names a directory: `STRATA_POWER_SEED` (default 0)
/// seeds it, `STRATA_POWER_TEAR=1` tears instead of dropping, and the cut
/// comes when the file `STRATA_POWER_CUT_ON` appears (polled every
/// millisecond by a thread of its own), after which the process exits
/// with status 86 at once, as a machine that lost its power stops. What
/// `strata torture`'s power kinds start a node with; a no-op otherwise.
pub fn arm_from_env() -> io::Result<()> {
    let Some(root) = std::env::var_os("STRATA_POWER_ROOT") else {
        return Ok(());
    };
    let seed = std::env::var("STRATA_POWER_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let how = if std::env::var("STRATA_POWER_TEAR").is_ok_and(|v| v == "1") {
        Cut::Tear
    } else {
        Cut::Drop
    };
    let trigger = PathBuf::from(
        std::env::var_os("STRATA_POWER_CUT_ON")
            .ok_or_else(|| io::Error::other("STRATA_POWER_ROOT needs STRATA_POWER_CUT_ON"))?,
    );
    let rec = Recorder::start(Path::new(&root), seed)?;
    std::thread::Builder::new()
        .name("power-cut".into())
        .spawn(move || loop {
            if trigger.exists() {
                let r = rec.cut(how);
                eprintln!("strata-fs: power cut ({how:?}): {r:?}");
                std::process::exit(86);
            }
            std::thread::sleep(std::time::Duration::from_millis(1));
        })?;
    Ok(())
}

/// `STRATA_POWER_DEBUG` set: every recorded write and sync is logged
/// (read once).
fn debug() -> bool {
    static DEBUG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *DEBUG.get_or_init(|| std::env::var_os("STRATA_POWER_DEBUG").is_some())
}

fn key(file: &File) -> io::Result<(u64, u64)> {
    let st = rustix::fs::fstat(file)?;
    Ok((st.st_dev, st.st_ino))
}

/// The path the kernel has for an open file (as `/proc/self/fd` shows).
fn fd_path(file: &File) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd())).ok()
}

/// An absolute, canonical form of a path that may not exist yet: its
/// parent canonicalized, its name appended.
fn absolute(path: &Path) -> PathBuf {
    if let Ok(p) = std::fs::canonicalize(path) {
        return p;
    }
    let parent = crate::parent(path);
    match (std::fs::canonicalize(parent), path.file_name()) {
        (Ok(p), Some(n)) => p.join(n),
        _ => path.to_path_buf(),
    }
}

/// Runs `op` on a file: unrecorded when the model is off or the file is
/// outside every recorded root; else recorded first by `record`.
fn on_file<T>(
    file: &File,
    record: impl FnOnce(&mut Model, (u64, u64), &File) -> io::Result<()>,
    op: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    if !ON.load(Ordering::Relaxed) {
        return op();
    }
    let mut all = models();
    let k = key(file)?;
    let i = match all.iter().position(|m| m.files.contains_key(&k)) {
        Some(i) => Some(i),
        None if all.iter().all(|m| m.outside.contains(&k)) => None,
        None => {
            let p = fd_path(file).unwrap_or_default();
            let i = all.iter().position(|m| p.starts_with(&m.root));
            if i.is_none() {
                for m in all.iter_mut() {
                    m.outside.insert(k);
                }
            }
            i
        }
    };
    let Some(i) = i else {
        drop(all);
        return op();
    };
    let m = &mut all[i];
    if m.dead {
        return Err(off());
    }
    record(m, k, file)?;
    let r = op()?;
    m.tick()?;
    Ok(r)
}

/// Runs `op` on a path: unrecorded when the model is off or the path lies
/// outside every root; else `after` records it once done.
fn on_path<T>(
    path: &Path,
    before: impl FnOnce(&mut Model, &Path) -> io::Result<()>,
    op: impl FnOnce() -> io::Result<T>,
    after: impl FnOnce(&mut Model, &Path, &T),
) -> io::Result<T> {
    if !ON.load(Ordering::Relaxed) {
        return op();
    }
    let mut all = models();
    let abs = absolute(path);
    let Some(m) = all.iter_mut().find(|m| abs.starts_with(&m.root)) else {
        drop(all);
        return op();
    };
    if m.dead {
        return Err(off());
    }
    before(m, &abs)?;
    let r = op()?;
    after(m, &abs, &r);
    m.tick()?;
    Ok(r)
}

impl Model {
    /// Counts an operation done; cuts the power when it is the one
    /// [`Recorder::cut_after`] named.
    fn tick(&mut self) -> io::Result<()> {
        self.ops += 1;
        if let Some((n, how)) = self.cut_after {
            if self.ops >= n && !self.dead {
                self.dead = true;
                let r = self.cut(how)?;
                self.last_cut = Some(r);
            }
        }
        Ok(())
    }

    fn log(&mut self, k: (u64, u64), file: &File) -> io::Result<&mut FileLog> {
        Ok(match self.files.entry(k) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                let f = OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(format!("/proc/self/fd/{}", file.as_raw_fd()))?;
                e.insert(FileLog {
                    file: f,
                    ops: vec![],
                })
            }
        })
    }

    fn backup(&mut self) -> PathBuf {
        self.next_backup += 1;
        self.backups.join(format!("{:08}", self.next_backup))
    }

    fn pending_dir(&mut self, op: DirOp) {
        let dirs = match &op {
            DirOp::Created { path } | DirOp::Removed { path, .. } => {
                vec![crate::parent(path).to_path_buf()]
            }
            DirOp::Renamed { from, to, .. } => {
                let (a, b) = (crate::parent(from), crate::parent(to));
                if a == b {
                    vec![a.to_path_buf()]
                } else {
                    vec![a.to_path_buf(), b.to_path_buf()]
                }
            }
        };
        self.dirs.push(PendingDir { op, dirs });
    }

    fn cut(&mut self, how: Cut) -> io::Result<CutReport> {
        let mut report = CutReport::default();
        let mut logs: Vec<FileLog> = self.files.drain().map(|(_, l)| l).collect();
        // Deterministic for a seed: the order the inodes were recorded in
        // is lost by the map, so sort by the first write's place.
        logs.sort_by_key(|l| match l.ops.first() {
            Some(FileOp::Write { offset, len, .. }) => (*offset, *len),
            Some(FileOp::SetLen { new_len, .. }) => (*new_len, 0),
            None => (0, 0),
        });
        for log in logs {
            if log.ops.is_empty() {
                continue;
            }
            report.files += 1;
            let n = log.ops.len();
            // A tear keeps at least the first of the unsynced writes, in
            // part: a cut that dropped them all would be a drop.
            let keep = match how {
                Cut::Drop => 0,
                Cut::Tear => self.rng.usize(1..=n),
            };
            let name = fd_path(&log.file).unwrap_or_default();
            for op in log.ops[keep..].iter().rev() {
                undo(&log.file, op)?;
                report.writes_dropped += 1;
                report
                    .undone
                    .push(format!("{}: {}", name.display(), describe(op)));
            }
            if how == Cut::Tear && keep > 0 {
                if let FileOp::Write {
                    offset,
                    len,
                    old,
                    size_before,
                } = &log.ops[keep - 1]
                {
                    let first = offset / PAGE;
                    let last = (offset + len).div_ceil(PAGE);
                    // Which pages keep their old bytes: at random, but at
                    // least one, and not all of a write of several pages.
                    let pages = last - first;
                    let mut old_page: Vec<bool> = (0..pages).map(|_| self.rng.bool()).collect();
                    if !old_page.contains(&true) {
                        old_page[self.rng.usize(0..pages as usize)] = true;
                    }
                    if pages > 1 && !old_page.contains(&false) {
                        old_page[self.rng.usize(0..pages as usize)] = false;
                    }
                    let mut dropped = 0;
                    for p in first..last {
                        if old_page[(p - first) as usize] {
                            let a = (p * PAGE).max(*offset);
                            let b = ((p + 1) * PAGE).min(offset + len);
                            restore(&log.file, *offset, old, *size_before, a, b)?;
                            dropped += 1;
                        }
                    }
                    if dropped > 0 {
                        report.undone.push(format!(
                            "{}: torn, {dropped} page(s) old: {}",
                            name.display(),
                            describe(&log.ops[keep - 1])
                        ));
                        report.writes_torn += 1;
                        report.pages_dropped += dropped;
                    }
                }
            }
            log.file.sync_all()?;
        }
        let pending: Vec<PendingDir> = std::mem::take(&mut self.dirs);
        let keep = match how {
            Cut::Drop => 0,
            Cut::Tear => self.rng.usize(0..=pending.len()),
        };
        for p in pending[keep..].iter().rev() {
            report.undone.push(format!("{:?}", p.op));
            undo_dir(&p.op)?;
            report.dir_changes_undone += 1;
        }
        Ok(report)
    }
}

fn describe(op: &FileOp) -> String {
    match op {
        FileOp::Write {
            offset,
            len,
            size_before,
            ..
        } => format!("write of {len} bytes at {offset} (file size {size_before} before)"),
        FileOp::SetLen {
            old_len, new_len, ..
        } => format!("length {old_len} -> {new_len}"),
    }
}

/// Puts back the bytes `[a, b)` of a write at `offset` as they were
/// before it: `old` below `size_before`, zeros past it.
fn restore(
    file: &File,
    offset: u64,
    old: &[u8],
    size_before: u64,
    a: u64,
    b: u64,
) -> io::Result<()> {
    let mut buf = vec![0u8; (b - a) as usize];
    let old_end = size_before.min(b);
    if a < old_end {
        let from = (a - offset) as usize;
        let n = (old_end - a) as usize;
        buf[..n].copy_from_slice(&old[from..from + n]);
    }
    file.write_all_at(&buf, a)
}

fn undo(file: &File, op: &FileOp) -> io::Result<()> {
    match op {
        FileOp::Write {
            offset,
            len,
            old,
            size_before,
        } => {
            if !old.is_empty() {
                file.write_all_at(old, *offset)?;
            }
            if offset + len > *size_before {
                file.set_len(*size_before)?;
            }
        }
        FileOp::SetLen {
            old_len,
            new_len,
            cut,
        } => {
            file.set_len(*old_len)?;
            if !cut.is_empty() {
                file.write_all_at(cut, *new_len)?;
            }
        }
    }
    Ok(())
}

fn remove_any(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path),
        Ok(_) => std::fs::remove_file(path),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

fn undo_dir(op: &DirOp) -> io::Result<()> {
    match op {
        DirOp::Created { path } => remove_any(path),
        DirOp::Renamed { from, to, backup } => {
            if to.exists() {
                std::fs::rename(to, from)?;
            }
            if let Some(b) = backup {
                std::fs::rename(b, to)?;
            }
            Ok(())
        }
        DirOp::Removed { path, backup } => {
            remove_any(path)?;
            std::fs::rename(backup, path)
        }
    }
}

/// Keeps a copy of `path` at `to` that a rename or removal can be undone
/// from: a hard link for a file, the directory itself renamed for a
/// directory (`moved` then says the caller's removal is done).
fn keep(path: &Path, to: &Path) -> io::Result<bool> {
    if std::fs::symlink_metadata(path)?.is_dir() {
        std::fs::rename(path, to)?;
        Ok(true)
    } else {
        std::fs::hard_link(path, to)?;
        Ok(false)
    }
}

pub(crate) fn write(
    file: &File,
    offset: u64,
    len: u64,
    op: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    on_file(
        file,
        |m, k, file| {
            let log = m.log(k, file)?;
            let size_before = log.file.metadata()?.len();
            if debug() {
                eprintln!(
                    "POWER write {:?} {offset} {len} size {size_before}",
                    fd_path(file)
                );
            }
            let end = (offset + len).min(size_before);
            let mut old = vec![0u8; end.saturating_sub(offset) as usize];
            log.file.read_exact_at(&mut old, offset)?;
            log.ops.push(FileOp::Write {
                offset,
                len,
                old,
                size_before,
            });
            Ok(())
        },
        op,
    )
}

pub(crate) fn set_len(
    file: &File,
    new_len: u64,
    op: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    on_file(
        file,
        |m, k, file| {
            let log = m.log(k, file)?;
            let old_len = log.file.metadata()?.len();
            let mut cut = vec![0u8; old_len.saturating_sub(new_len) as usize];
            log.file.read_exact_at(&mut cut, new_len)?;
            log.ops.push(FileOp::SetLen {
                old_len,
                new_len,
                cut,
            });
            Ok(())
        },
        op,
    )
}

pub(crate) fn synced(file: &File, op: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    if !ON.load(Ordering::Relaxed) {
        return op();
    }
    let k = key(file)?;
    // Under the lock: a write recorded while the sync runs would be
    // forgotten with those it made durable.
    let mut all = models();
    if all.iter().any(|m| m.dead) {
        // The cut forgot its files: whether this one is under a dead root
        // is told by its path.
        let p = fd_path(file).unwrap_or_default();
        if all.iter().any(|m| m.dead && p.starts_with(&m.root)) {
            return Err(off());
        }
    }
    op()?;
    let p = fd_path(file).unwrap_or_default();
    for m in all.iter_mut() {
        let had = m.files.remove(&k).is_some();
        if had && debug() {
            eprintln!("POWER synced {}", p.display());
        }
        if had || p.starts_with(&m.root) {
            m.tick()?;
        }
    }
    Ok(())
}

pub(crate) fn open(path: &Path, op: impl FnOnce() -> io::Result<File>) -> io::Result<File> {
    let existed = std::fs::symlink_metadata(path).is_ok();
    on_path(
        path,
        |_, _| Ok(()),
        op,
        |m, abs, _| {
            if !existed {
                m.pending_dir(DirOp::Created {
                    path: abs.to_path_buf(),
                });
            }
        },
    )
}

pub(crate) fn mkdir(path: &Path, op: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    on_path(
        path,
        |_, _| Ok(()),
        op,
        |m, abs, _| {
            m.pending_dir(DirOp::Created {
                path: abs.to_path_buf(),
            })
        },
    )
}

pub(crate) fn rename(
    from: &Path,
    to: &Path,
    op: impl FnOnce() -> io::Result<()>,
) -> io::Result<()> {
    let from_abs = absolute(from);
    let backup = std::cell::Cell::new(None);
    on_path(
        to,
        |m, to_abs| {
            if std::fs::symlink_metadata(to_abs).is_ok() && !to_abs.is_dir() {
                let b = m.backup();
                keep(to_abs, &b)?;
                backup.set(Some(b));
            }
            Ok(())
        },
        op,
        |m, to_abs, _| {
            m.pending_dir(DirOp::Renamed {
                from: from_abs,
                to: to_abs.to_path_buf(),
                backup: backup.take(),
            })
        },
    )
}

pub(crate) fn remove(path: &Path, op: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    // The removed file or directory is kept at a backup first; a directory
    // is moved there whole, which is its removal.
    let backup = std::cell::Cell::new(None);
    let moved = std::cell::Cell::new(false);
    on_path(
        path,
        |m, abs| {
            let b = m.backup();
            moved.set(keep(abs, &b)?);
            backup.set(Some(b));
            Ok(())
        },
        || if moved.get() { Ok(()) } else { op() },
        |m, abs, _| {
            if let Some(b) = backup.take() {
                m.pending_dir(DirOp::Removed {
                    path: abs.to_path_buf(),
                    backup: b,
                })
            }
        },
    )
}

pub(crate) fn dir_synced(dir: &Path, op: impl FnOnce() -> io::Result<()>) -> io::Result<()> {
    if !ON.load(Ordering::Relaxed) {
        return op();
    }
    let abs = absolute(dir);
    let mut all = models();
    if all.iter().any(|m| m.dead && abs.starts_with(&m.root)) {
        return Err(off());
    }
    op()?;
    for m in all.iter_mut() {
        for p in m.dirs.iter_mut() {
            p.dirs.retain(|d| *d != abs);
        }
        let mut gone = Vec::new();
        m.dirs.retain_mut(|p| {
            if p.dirs.is_empty() {
                gone.push(std::mem::replace(
                    &mut p.op,
                    DirOp::Created {
                        path: PathBuf::new(),
                    },
                ));
                false
            } else {
                true
            }
        });
        for op in gone {
            match op {
                DirOp::Renamed {
                    backup: Some(b), ..
                }
                | DirOp::Removed { backup: b, .. } => {
                    let _ = remove_any(&b);
                }
                _ => {}
            }
        }
        // Counted once what the sync made durable is forgotten: a cut
        // right after this operation keeps it.
        if abs.starts_with(&m.root) {
            m.tick()?;
        }
    }
    Ok(())
}

/// Cuts an update at each of its steps: for `n = 1, 2, …`, a fresh
/// directory `scratch/step-N` is filled by `prepare` (unrecorded), then
/// `update` runs over the model with the power cut right after its `n`th
/// operation ([`Recorder::cut_after`]); `check` sees the directory as the
/// cut left it (the model off again, as after the power came back). Stops
/// after the first `n` at which `update` completed before its cut, and
/// returns that `n` (the update's steps + 1). What a test of a file kind
/// uses to drop its unsynced writes at every step of its update.
pub fn cut_at_every_step(
    scratch: &Path,
    how: Cut,
    prepare: impl Fn(&Path),
    update: impl Fn(&Path) -> io::Result<()>,
    mut check: impl FnMut(&Path, u64),
) -> io::Result<u64> {
    for n in 1.. {
        let root = scratch.join(format!("step-{n}"));
        std::fs::create_dir_all(&root)?;
        prepare(&root);
        let rec = Recorder::start(&root, n)?;
        rec.cut_after(n, how);
        let _ = update(&root);
        let cut = rec.cut_report().is_some();
        drop(rec);
        check(&root, n);
        let _ = std::fs::remove_dir_all(&root);
        if !cut {
            return Ok(n);
        }
    }
    unreachable!("the loop returns")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate as fs;

    fn read(p: &Path) -> Option<Vec<u8>> {
        std::fs::read(p).ok()
    }

    #[test]
    fn unsynced_writes_are_dropped_and_synced_ones_kept() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let rec = Recorder::start(&root, 1).unwrap();
        let a = root.join("a");
        let f = fs::create_durable(&a).unwrap();
        fs::write_all_at(&f, b"synced", 0).unwrap();
        fs::sync_data(&f).unwrap();
        fs::write_all_at(&f, b"SYNCED and more", 0).unwrap();
        assert_eq!(rec.pending(), (1, 0));
        let r = rec.cut(Cut::Drop).unwrap();
        assert_eq!(r.writes_dropped, 1);
        assert!(fs::write_all_at(&f, b"x", 0).is_err(), "power is off");
        drop(rec);
        assert_eq!(read(&a).unwrap(), b"synced");
    }

    #[test]
    fn a_rename_without_its_directory_sync_is_undone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let p = root.join("id.json");
        fs::write_atomic(&p, b"old").unwrap();
        let rec = Recorder::start(&root, 2).unwrap();
        // The tmp file synced and renamed, the directory not synced.
        let tmp = fs::temporary_name(&p);
        let f = fs::create(&tmp).unwrap();
        fs::write_all_at(&f, b"new", 0).unwrap();
        fs::sync_data(&f).unwrap();
        fs::rename(&tmp, &p).unwrap();
        assert_eq!(read(&p).unwrap(), b"new");
        rec.cut(Cut::Drop).unwrap();
        drop(rec);
        assert_eq!(read(&p).unwrap(), b"old");
        assert!(!tmp.exists(), "the temporary file's creation is undone too");
    }

    /// A cut counted at the directory sync itself keeps what that sync made
    /// durable (until issue 33's EC test the model cut first and forgot
    /// after, undoing a rename its sync had already kept).
    #[test]
    fn a_cut_right_at_the_directory_sync_keeps_the_rename() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let p = root.join("f");
        fs::write_atomic(&p, b"old").unwrap();
        let rec = Recorder::start(&root, 4).unwrap();
        let tmp = fs::temporary_name(&p);
        let f = fs::create(&tmp).unwrap();
        fs::write_all_at(&f, b"new", 0).unwrap();
        fs::sync_data(&f).unwrap();
        fs::rename(&tmp, &p).unwrap();
        // The next operation is the directory sync: the power goes with it.
        rec.cut_after(1, Cut::Drop);
        fs::sync_dir(&root).unwrap();
        assert!(rec.cut_report().is_some(), "the cut fired at the sync");
        drop(rec);
        assert_eq!(read(&p).unwrap(), b"new");
    }

    #[test]
    fn write_atomic_survives_a_cut_right_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let rec = Recorder::start(&root, 3).unwrap();
        let d = root.join("x/y");
        fs::create_dir_all(&d).unwrap();
        fs::write_atomic(&d.join("f"), b"kept").unwrap();
        std::fs::write(d.join("g"), b"bypass").unwrap();
        rec.cut(Cut::Drop).unwrap();
        drop(rec);
        assert_eq!(read(&d.join("f")).unwrap(), b"kept");
    }

    #[test]
    fn a_plain_write_to_a_new_file_loses_the_file() {
        // What std::fs::write (O_TRUNC, no fsync, no rename) leaves.
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let p = root.join("n");
        let rec = Recorder::start(&root, 4).unwrap();
        let f = fs::create(&p).unwrap();
        fs::write_all_at(&f, b"never synced", 0).unwrap();
        rec.cut(Cut::Drop).unwrap();
        drop(rec);
        assert!(!p.exists());
    }

    #[test]
    fn removals_and_directory_creations_are_undone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir_all(root.join("rows/7")).unwrap();
        std::fs::write(root.join("rows/7/seg"), b"row data").unwrap();
        std::fs::create_dir(root.join("sub")).unwrap();
        std::fs::write(root.join("sub/f"), b"file").unwrap();
        let rec = Recorder::start(&root, 5).unwrap();
        fs::remove_dir_all(&root.join("rows/7")).unwrap();
        fs::remove_file(&root.join("sub/f")).unwrap();
        fs::create_dir_all(&root.join("new/dir")).unwrap();
        std::fs::create_dir(root.join("new/dir/unsynced")).unwrap();
        assert!(!root.join("sub/f").exists());
        rec.cut(Cut::Drop).unwrap();
        drop(rec);
        assert_eq!(read(&root.join("rows/7/seg")).unwrap(), b"row data");
        assert_eq!(read(&root.join("sub/f")).unwrap(), b"file");
        // create_dir_all synced each level: they stay; the one made with
        // std::fs is not seen by the model (kept).
        assert!(root.join("new/dir").is_dir());
        assert!(root.join("new/dir/unsynced").is_dir(), "untracked: kept");
    }

    #[test]
    fn a_torn_write_keeps_some_pages_and_loses_others() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let p = root.join("seg");
        let f = fs::create_durable(&p).unwrap();
        fs::write_all_at(&f, &[1u8; 4096], 0).unwrap();
        fs::sync_data(&f).unwrap();
        let mut torn = 0;
        for seed in 0..64 {
            let rec = Recorder::start(&root, seed).unwrap();
            fs::write_all_at(&f, &[2u8; 8 * 4096], 4096).unwrap();
            let r = rec.cut(Cut::Tear).unwrap();
            drop(rec);
            let b = read(&p).unwrap();
            assert_eq!(&b[..4096], &[1u8; 4096][..], "synced page kept");
            for page in b[4096..].chunks(4096) {
                assert!(page.iter().all(|&x| x == 2) || page.iter().all(|&x| x == 0));
            }
            torn += r.writes_torn;
            fs::set_len(&f, 4096).unwrap();
            fs::sync_data(&f).unwrap();
        }
        assert!(torn > 10, "some cuts tore the write: {torn}");
    }

    fn at_every_step(
        how: Cut,
        prepare: impl Fn(&Path),
        update: impl Fn(&Path) -> io::Result<()>,
        check: impl FnMut(&Path, u64),
    ) -> u64 {
        let dir = tempfile::tempdir().unwrap();
        cut_at_every_step(dir.path(), how, prepare, update, check).unwrap()
    }

    #[test]
    fn write_atomic_holds_the_old_bytes_or_the_new_at_every_step() {
        for how in [Cut::Drop, Cut::Tear] {
            let steps = at_every_step(
                how,
                |r| fs::write_atomic(&r.join("id.json"), b"old identity").unwrap(),
                |r| fs::write_atomic(&r.join("id.json"), b"the new identity"),
                |r, n| {
                    let b = read(&r.join("id.json")).unwrap_or_default();
                    assert!(
                        b == b"old identity" || b == b"the new identity",
                        "{how:?} after step {n}: {:?}",
                        String::from_utf8_lossy(&b)
                    );
                },
            );
            assert!(
                steps >= 5,
                "create, write, sync, rename, directory sync: {steps}"
            );
        }
    }

    #[test]
    fn a_plain_rewrite_loses_the_file_at_some_step() {
        // What `std::fs::write` did to cluster-node.json (O_TRUNC, write,
        // no fsync, no rename): a cut that keeps the truncation and not
        // the write (a tear) leaves it empty, as LazyFS showed.
        let mut lost = false;
        at_every_step(
            Cut::Tear,
            |r| fs::write_atomic(&r.join("id.json"), b"old identity").unwrap(),
            |r| {
                let f = fs::create(&r.join("id.json"))?;
                fs::write_all_at(&f, b"the new identity", 0)
            },
            |r, _| lost |= read(&r.join("id.json")).unwrap_or_default().is_empty(),
        );
        assert!(lost);
    }

    #[test]
    fn an_append_file_keeps_every_synced_record_at_every_step() {
        at_every_step(
            Cut::Tear,
            |_| {},
            |r| {
                let f = fs::create_durable(&r.join("log"))?;
                for i in 0..4u8 {
                    fs::write_all_at(&f, &[i; 100], i as u64 * 100)?;
                    fs::sync_data(&f)?;
                    std::fs::write(r.join(format!("acked-{i}")), b"")?;
                }
                Ok(())
            },
            |r, n| {
                let b = read(&r.join("log")).unwrap_or_default();
                for i in 0..4u8 {
                    if r.join(format!("acked-{i}")).exists() {
                        let at = i as usize * 100;
                        assert!(
                            b.len() >= at + 100 && b[at..at + 100].iter().all(|&x| x == i),
                            "step {n}: record {i} was synced"
                        );
                    }
                }
            },
        );
    }

    #[test]
    fn files_outside_the_root_are_not_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("r");
        std::fs::create_dir(&root).unwrap();
        let out = dir.path().join("outside");
        let rec = Recorder::start(&root, 6).unwrap();
        let f = fs::create(&out).unwrap();
        fs::write_all_at(&f, b"kept", 0).unwrap();
        rec.cut(Cut::Drop).unwrap();
        fs::write_all_at(&f, b"KEPT", 0).unwrap();
        drop(rec);
        assert_eq!(read(&out).unwrap(), b"KEPT");
    }
}
