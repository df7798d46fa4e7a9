//! Strata's files: every byte the store, the server and the metadata
//! service rely on after a power cut is written through this crate.
//!
//! Two kinds of update are durable here, and nothing else is relied on
//! (docs/store-format.md, *Assumptions about the medium*):
//!
//! - **Replace a whole file** ([`write_atomic`], [`write_atomic_with`]): a
//!   temporary file beside it is written and fsynced, renamed over the
//!   file, and the directory fsynced. After a power cut the file holds the
//!   old bytes or the new ones, whole.
//! - **Append to a file** ([`write_all_at`] or [`write_all_vectored_at`]
//!   past its end, then [`sync_data`]): what was written before the sync
//!   is durable once it returns; a file created for appending is made
//!   durable in its directory once, at creation ([`create_durable`]).
//!
//! New directories are made durable in their parents
//! ([`create_dir_all`]); renames and removals that must hold are followed
//! by [`sync_dir`] of the directories they change ([`rename_durable`],
//! [`remove_file_durable`]).
//!
//! Every operation here passes through the power-loss model ([`power`]),
//! which is off unless a test or `strata torture` turns it on for a
//! directory: then it keeps what each unsynced write replaced and, on
//! command, puts the files back as a power cut would leave them (unsynced
//! writes dropped, or the last of them torn page by page; unsynced
//! creations, renames and removals undone).

#![warn(missing_docs)]

pub mod power;

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// Writes every byte of `buf` at `offset` of `file`.
pub fn write_all_at(file: &File, buf: &[u8], offset: u64) -> io::Result<()> {
    power::write(file, offset, buf.len() as u64, || {
        file.write_all_at(buf, offset)
    })
}

/// Writes every byte of `parts`, in order, at `offset`: `pwritev` calls of
/// at most [`IOV_MAX`] slices, continued after short writes and
/// interruptions. The slices are handed to the kernel where they lie.
pub fn write_all_vectored_at(file: &File, parts: &[&[u8]], offset: u64) -> io::Result<()> {
    let len = parts.iter().map(|p| p.len() as u64).sum();
    power::write(file, offset, len, || pwritev_all(file, parts, offset))
}

/// A file written front to back through [`write_all_at`], for encoders
/// that take an [`io::Write`] (the trace writer): each `write` lands at the
/// end of what came before. Durable only once [`sync_data`] or
/// [`sync_all`] of [`Appender::file`] returns.
#[derive(Debug)]
pub struct Appender {
    file: File,
    at: u64,
}

impl Appender {
    /// Appends to `file` from offset `at` (its length, for a file being
    /// continued; 0 for a new one).
    pub fn new(file: File, at: u64) -> Appender {
        Appender { file, at }
    }

    /// The file, for syncing.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The offset the next write lands at.
    pub fn position(&self) -> u64 {
        self.at
    }
}

impl io::Write for Appender {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        write_all_at(&self.file, buf, self.at)?;
        self.at += buf.len() as u64;
        Ok(buf.len())
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write(buf).map(|_| ())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The most slices one `pwritev` takes (Linux's `IOV_MAX`).
pub const IOV_MAX: usize = 1024;

fn pwritev_all(file: &File, parts: &[&[u8]], offset: u64) -> io::Result<()> {
    use std::io::IoSlice;
    let mut at = offset;
    // The first slice not yet written whole, and how much of it was.
    let (mut i, mut skip) = (0usize, 0usize);
    while i < parts.len() {
        if parts[i].len() == skip {
            (i, skip) = (i + 1, 0);
            continue;
        }
        let end = (i + IOV_MAX).min(parts.len());
        let iov: Vec<IoSlice<'_>> = std::iter::once(IoSlice::new(&parts[i][skip..]))
            .chain(parts[i + 1..end].iter().map(|p| IoSlice::new(p)))
            .collect();
        let mut n = match rustix::io::pwritev(file, &iov, at) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(rustix::io::Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        };
        at += n as u64;
        while n > 0 {
            let left = parts[i].len() - skip;
            if n >= left {
                n -= left;
                (i, skip) = (i + 1, 0);
            } else {
                skip += n;
                n = 0;
            }
        }
    }
    Ok(())
}

/// Sets the length of `file` (cut or extended with zeros).
pub fn set_len(file: &File, len: u64) -> io::Result<()> {
    power::set_len(file, len, || file.set_len(len))
}

/// fdatasync: every write to `file` before it is durable once it returns
/// (its data, and its size where reading the data needs it).
pub fn sync_data(file: &File) -> io::Result<()> {
    power::synced(file, || file.sync_data())
}

/// fsync: as [`sync_data`], with all of the file's metadata.
pub fn sync_all(file: &File) -> io::Result<()> {
    power::synced(file, || file.sync_all())
}

/// Opens `path` with `options`. When the options may create the file and
/// it did not exist, the creation is a change to its directory that is
/// durable only once the directory is synced ([`sync_dir`]).
pub fn open(path: &Path, options: &OpenOptions) -> io::Result<File> {
    power::open(path, || options.open(path))
}

/// Creates (or truncates) `path` for reading and writing; its directory
/// entry is durable once its directory is synced.
pub fn create(path: &Path) -> io::Result<File> {
    // Opened without O_TRUNC and cut here, so that the power-loss model
    // sees (and keeps) the bytes a truncation drops.
    let f = open(
        path,
        OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false),
    )?;
    if f.metadata()?.len() > 0 {
        set_len(&f, 0)?;
    }
    Ok(f)
}

/// Creates `path`, which must not exist, for appending: the file and its
/// directory entry are durable when this returns (the directory is
/// synced once, here), so that later appends need only [`sync_data`].
pub fn create_durable(path: &Path) -> io::Result<File> {
    let f = open(
        path,
        OpenOptions::new().read(true).write(true).create_new(true),
    )?;
    sync_all(&f)?;
    sync_dir(parent(path))?;
    Ok(f)
}

/// Renames `from` to `to` (replacing it). Durable once the directories of
/// both are synced ([`rename_durable`] does it).
pub fn rename(from: &Path, to: &Path) -> io::Result<()> {
    power::rename(from, to, || std::fs::rename(from, to))
}

/// [`rename`], then syncs the directory of `to` (and of `from`, when it
/// is another): the rename holds after a power cut once this returns.
pub fn rename_durable(from: &Path, to: &Path) -> io::Result<()> {
    rename(from, to)?;
    let (a, b) = (parent(from), parent(to));
    sync_dir(b)?;
    if a != b {
        sync_dir(a)?;
    }
    Ok(())
}

/// Removes the file `path`. Durable once its directory is synced.
pub fn remove_file(path: &Path) -> io::Result<()> {
    power::remove(path, || std::fs::remove_file(path))
}

/// [`remove_file`], then syncs its directory.
pub fn remove_file_durable(path: &Path) -> io::Result<()> {
    remove_file(path)?;
    sync_dir(parent(path))
}

/// Removes the directory `path` and everything in it. Durable once its
/// parent is synced.
pub fn remove_dir_all(path: &Path) -> io::Result<()> {
    power::remove(path, || std::fs::remove_dir_all(path))
}

/// Creates `dir` and every missing parent, each made durable in its own
/// parent (the parent synced after the new directory is made), so that a
/// power cut cannot lose a directory files were then written into.
pub fn create_dir_all(dir: &Path) -> io::Result<()> {
    let mut missing: Vec<&Path> = Vec::new();
    let mut d = dir;
    loop {
        match std::fs::metadata(d) {
            Ok(m) if m.is_dir() => break,
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", d.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => missing.push(d),
            Err(e) => return Err(e),
        }
        match d.parent() {
            Some(p) if !p.as_os_str().is_empty() => d = p,
            _ => break,
        }
    }
    for d in missing.into_iter().rev() {
        match power::mkdir(d, || std::fs::create_dir(d)) {
            Ok(()) => {}
            // Made meanwhile by another thread: it syncs its parent.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && d.is_dir() => continue,
            Err(e) => return Err(e),
        }
        sync_dir(parent(d))?;
    }
    Ok(())
}

/// fsyncs a directory, so that the creations, renames and removals in it
/// so far are durable.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    power::dir_synced(dir, || File::open(dir).and_then(|d| d.sync_all()))
}

/// Writes `bytes` to `path` crash-safely: a temporary file beside it,
/// fdatasync, rename over `path`, fsync of the directory. After a power
/// cut `path` holds its old bytes or `bytes`, whole.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    write_atomic_with(path, |f| write_all_at(f, bytes, 0))
}

/// [`write_atomic`] for a file written by `fill` (e.g. streamed in pieces
/// rather than held whole in RAM; `fill` writes through this crate's
/// functions): temporary file, `fill`, fdatasync, rename, directory fsync.
/// A failed `fill`, sync or rename removes the temporary file and leaves
/// `path` as it was.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&File) -> io::Result<()>,
) -> io::Result<()> {
    let tmp = temporary_name(path);
    let f = create(&tmp)?;
    if let Err(e) = fill(&f).and_then(|_| sync_data(&f)) {
        // A partial temporary file would hold space a full device needs.
        let _ = remove_file(&tmp);
        return Err(e);
    }
    drop(f);
    if let Err(e) = rename(&tmp, path) {
        let _ = remove_file(&tmp);
        return Err(e);
    }
    sync_dir(parent(path))
}

/// The temporary file [`write_atomic`] writes before its rename:
/// `path` with `.tmp` appended. A reader of a directory skips and may
/// remove such files (a crash before the rename leaves them).
pub fn temporary_name(path: &Path) -> PathBuf {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    PathBuf::from(tmp)
}

/// Reads `path` whole; `Ok(None)` when it does not exist.
pub fn read_if_exists(path: &Path) -> io::Result<Option<Vec<u8>>> {
    match std::fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The directory of `path` (`.` for a bare name).
pub fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectored_writes_put_every_slice_in_order() {
        let dir = tempfile::tempdir().expect("dir");
        let f = create(&dir.path().join("v")).expect("open");
        // More slices than one pwritev takes, empty ones among them.
        let owned: Vec<Vec<u8>> = (0..3000u32)
            .map(|i| vec![(i % 251) as u8; (i % 7) as usize])
            .collect();
        let parts: Vec<&[u8]> = owned.iter().map(|v| v.as_slice()).collect();
        write_all_vectored_at(&f, &parts, 5).expect("write");
        let want: Vec<u8> = owned.concat();
        let mut got = vec![0u8; want.len()];
        f.read_exact_at(&mut got, 5).expect("read");
        assert!(got == want);
    }

    #[test]
    fn create_dir_all_makes_every_missing_level() {
        let dir = tempfile::tempdir().expect("dir");
        let d = dir.path().join("a/b/c");
        create_dir_all(&d).expect("mkdir");
        assert!(d.is_dir());
        create_dir_all(&d).expect("again");
        write_atomic(&d.join("f"), b"x").expect("write");
        assert!(create_dir_all(&d.join("f")).is_err());
    }
}
