//! Segment files on disk: naming, creation (crash-safe), positioned reads
//! that the store counts, and a sequential scanner that finds needles,
//! corrupt regions and torn tails.

use crate::error::{Result, StoreError};
use crate::format::needle::{self, NeedleError, NeedleHeader, HEADER_LEN, HEADER_MAGIC};
use crate::format::superblock::{Superblock, SuperblockError, SUPERBLOCK_LEN};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

/// File name of segment `id`, generation `generation`.
pub fn segment_file_name(id: u64, generation: u64) -> String {
    format!("{id:016x}-{generation:08x}.seg")
}

/// File name of the index checkpoint of segment `id`, generation `generation`.
pub fn index_file_name(id: u64, generation: u64) -> String {
    format!("{id:016x}-{generation:08x}.idx")
}

/// Parses `<id>-<generation>.seg` or `.idx`; returns (id, generation, is_segment).
pub fn parse_file_name(name: &str) -> Option<(u64, u64, bool)> {
    let (stem, seg) = if let Some(s) = name.strip_suffix(".seg") {
        (s, true)
    } else if let Some(s) = name.strip_suffix(".idx") {
        (s, false)
    } else {
        return None;
    };
    let (id, generation) = stem.split_once('-')?;
    if id.len() != 16 || generation.len() != 8 {
        return None;
    }
    Some((
        u64::from_str_radix(id, 16).ok()?,
        u64::from_str_radix(generation, 16).ok()?,
        seg,
    ))
}

/// fsyncs a directory so that renames and unlinks in it are durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    strata_fs::sync_dir(dir).map_err(StoreError::io("syncing directory", dir))
}

/// Writes `bytes` to `path` crash-safely ([`strata_fs::write_atomic`]:
/// a temporary file, fdatasync, rename over `path`, fsync of the
/// directory).
pub fn write_file_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    strata_fs::write_atomic(path, bytes).map_err(StoreError::io("writing", path))
}

/// [`write_file_atomic`] for a file written by `fill` (e.g. streamed in
/// pieces rather than held whole in RAM; through `strata_fs`).
pub fn write_file_atomic_with(
    path: &Path,
    fill: impl FnOnce(&File) -> std::io::Result<()>,
) -> Result<()> {
    strata_fs::write_atomic_with(path, fill).map_err(StoreError::io("writing", path))
}

/// Creates a new segment file holding only its superblock, crash-safely
/// (written as a temporary file and renamed into place).
pub fn create_segment(dir: &Path, sb: &Superblock) -> Result<(File, PathBuf)> {
    let path = dir.join(segment_file_name(sb.id, sb.generation));
    write_file_atomic(&path, &sb.encode())?;
    let f = open_rw(&path)?;
    Ok((f, path))
}

/// Opens a segment file for reading and writing.
pub fn open_rw(path: &Path) -> Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(StoreError::io("opening", path))
}

/// Reads and checks the superblock of an open segment file, correcting one
/// flipped bit ([`Superblock::parse_mending`]): the superblock as written,
/// and whether the file's bytes are one bit off.
pub fn read_superblock(file: &File, path: &Path) -> Result<(Superblock, bool)> {
    let mut b = [0u8; SUPERBLOCK_LEN];
    let mut got = 0;
    while got < SUPERBLOCK_LEN {
        match file.read_at(&mut b[got..], got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(StoreError::io("reading", path)(e)),
        }
    }
    Superblock::parse_mending(&b[..got]).map_err(|e| match e {
        SuperblockError::UnsupportedVersion(_) => StoreError::NewerFormat {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
        _ => StoreError::NotASegment {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
    })
}

/// Reads exactly `buf.len()` bytes at `offset`; returns the number of
/// `pread` calls made (so the store can count device reads), or an error
/// (`UnexpectedEof` if the file is shorter).
pub fn pread_exact(file: &File, buf: &mut [u8], offset: u64) -> io::Result<u64> {
    let mut calls = 0;
    let mut done = 0;
    while done < buf.len() {
        calls += 1;
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(calls)
}

/// One thing found by a [`Scanner`].
#[derive(Debug, Clone)]
pub enum ScanItem {
    /// A needle whose magics and checksums are all good, or whose header
    /// had one flipped bit that its checksum corrected, the rest whole
    /// ([`needle::parse_mending`]).
    Needle {
        /// Byte offset in the segment.
        offset: u64,
        /// The header (as written, when mended).
        header: NeedleHeader,
        /// The data, when the scanner was asked for it.
        data: Option<Vec<u8>>,
        /// The header on disk is one bit off (damage to report and to
        /// rewrite; the needle reads as written).
        mended: bool,
    },
    /// Bytes that are not a valid needle.
    Corrupt {
        /// Byte offset where the bad region starts.
        offset: u64,
        /// Its length: up to the next valid needle, or to the end.
        len: u64,
        /// What check failed first.
        reason: NeedleError,
        /// True when no valid needle follows (a torn or damaged tail).
        at_tail: bool,
        /// The header of the needle that starts the region, when it
        /// parses or one flipped bit explains its damage
        /// ([`needle::repair_header`]) and the needle it describes ends
        /// within the region: the identity whose newest needle this was.
        header: Option<NeedleHeader>,
    },
}

impl ScanItem {
    /// Offset of the item.
    pub fn offset(&self) -> u64 {
        match self {
            ScanItem::Needle { offset, .. } | ScanItem::Corrupt { offset, .. } => *offset,
        }
    }
    /// Length of the item in bytes.
    pub fn len(&self) -> u64 {
        match self {
            ScanItem::Needle { header, .. } => header.needle_len(),
            ScanItem::Corrupt { len, .. } => *len,
        }
    }
    /// True for a zero-length item (never produced).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

const WINDOW: usize = 4 << 20;

type ParsedNeedle = (NeedleHeader, Option<Vec<u8>>, bool);

/// Reads a segment file sequentially from `start` to `end`, yielding every
/// needle and every damaged region. After a damaged header it resynchronises
/// on the next 8-byte-aligned position that holds a whole valid needle.
pub struct Scanner {
    file: std::sync::Arc<File>,
    path: PathBuf,
    end: u64,
    pos: u64,
    buf: Vec<u8>,
    buf_start: u64,
    with_data: bool,
    code: needle::FlagCode,
    /// Bytes read from the file so far.
    pub bytes_read: u64,
}

impl Scanner {
    /// A scanner over `[start, end)` of `file`, a segment whose needles
    /// write their flags in `code` ([`crate::format::superblock::Superblock::flag_code`]).
    pub fn new(
        file: std::sync::Arc<File>,
        path: &Path,
        start: u64,
        end: u64,
        with_data: bool,
        code: needle::FlagCode,
    ) -> Self {
        Scanner {
            file,
            path: path.to_path_buf(),
            end,
            pos: start,
            buf: Vec::new(),
            buf_start: start,
            with_data,
            code,
            bytes_read: 0,
        }
    }

    /// Current position.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// Bytes `[pos, pos+len)` as far as the file (and `end`) has them.
    fn window(&mut self, pos: u64, len: usize) -> Result<&[u8]> {
        let want_end = (pos + len as u64).min(self.end);
        let buf_end = self.buf_start + self.buf.len() as u64;
        if pos < self.buf_start || want_end > buf_end {
            // Refill from `pos`, reading at least WINDOW bytes.
            let read_len = (want_end.saturating_sub(pos) as usize).max(WINDOW);
            let read_len = read_len.min(self.end.saturating_sub(pos) as usize);
            self.buf.resize(read_len, 0);
            let mut got = 0;
            while got < read_len {
                match self.file.read_at(&mut self.buf[got..], pos + got as u64) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(StoreError::io("reading", &self.path)(e)),
                }
            }
            self.bytes_read += got as u64;
            self.buf.truncate(got);
            self.buf_start = pos;
        }
        let a = (pos - self.buf_start) as usize;
        let b = ((want_end.max(pos) - self.buf_start) as usize).min(self.buf.len());
        Ok(&self.buf[a.min(b)..b])
    }

    /// Parses a whole needle at `pos`; the error is what is wrong with it.
    fn needle_at(&mut self, pos: u64) -> Result<Result<ParsedNeedle, NeedleError>> {
        let (with_data, code) = (self.with_data, self.code);
        let head = self.window(pos, HEADER_LEN)?;
        // Its length from the header as written, one flipped bit corrected.
        let (h, header_err) = match needle::mend_header(head, code) {
            Ok(x) => x,
            Err(e) => return Ok(Err(e)),
        };
        let len = h.needle_len() as usize;
        let w = self.window(pos, len)?;
        Ok(match needle::check_body(w, &h) {
            Ok(d) => Ok((h, with_data.then(|| d.to_vec()), header_err.is_some())),
            Err(e) => Err(header_err.unwrap_or(e)),
        })
    }

    /// The next needle or damaged region, or `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Option<Result<ScanItem>> {
        if self.pos >= self.end {
            return None;
        }
        let pos = self.pos;
        let r = match self.needle_at(pos) {
            Ok(r) => r,
            Err(e) => {
                self.pos = self.end;
                return Some(Err(e));
            }
        };
        match r {
            Ok((header, data, mended)) => {
                self.pos = pos + header.needle_len();
                Some(Ok(ScanItem::Needle {
                    offset: pos,
                    header,
                    data,
                    mended,
                }))
            }
            Err(reason) => {
                let code = self.code;
                let header = match self.window(pos, HEADER_LEN) {
                    Ok(w) => needle::repair_header(w, code).ok(),
                    Err(e) => return Some(Err(e)),
                };
                // Resynchronise: next aligned position with a whole valid needle.
                let mut q = pos + 8;
                let found = loop {
                    if q + HEADER_LEN as u64 > self.end {
                        break None;
                    }
                    let magic_ok = match self.window(q, 4) {
                        Ok(w) => w.len() == 4 && w == HEADER_MAGIC.to_le_bytes(),
                        Err(e) => return Some(Err(e)),
                    };
                    if magic_ok {
                        match self.needle_at(q) {
                            Ok(Ok(_)) => break Some(q),
                            Ok(Err(_)) => {}
                            Err(e) => return Some(Err(e)),
                        }
                    }
                    q += 8;
                };
                let next = found.unwrap_or(self.end);
                self.pos = next;
                Some(Ok(ScanItem::Corrupt {
                    offset: pos,
                    len: next - pos,
                    reason,
                    at_tail: found.is_none(),
                    header: header.filter(|h| pos + h.needle_len() <= next),
                }))
            }
        }
    }
}
