//! Opening a trace file: transparent gzip/zstd decompression (detected by
//! magic), a byte counter for progress bars, and the block buffer every
//! reader parses from.

use crate::TraceError;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// How the file on disk is compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Compression {
    None,
    Gzip,
    Zstd,
}

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// Bytes of decompressed content kept for format detection.
pub(crate) const HEAD_LEN: usize = 64 * 1024;

/// Counts the bytes read from the file on disk (compressed bytes).
struct Counting {
    file: File,
    count: Arc<AtomicU64>,
}

impl Read for Counting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// An opened, decompressing trace input.
pub(crate) struct Input {
    pub path: PathBuf,
    pub compression: Compression,
    /// Size of the file on disk.
    pub file_len: u64,
    /// Bytes read so far from the file on disk.
    pub consumed: Arc<AtomicU64>,
    /// Up to [`HEAD_LEN`] first bytes of the decompressed content.
    pub head: Vec<u8>,
    /// The decompressed content from the first byte on (head included).
    pub reader: Box<dyn Read + Send>,
}

pub(crate) fn io_err(path: &Path, source: io::Error) -> TraceError {
    TraceError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Reads until `buf` is full or the stream ends; returns the bytes read.
pub(crate) fn read_full(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

impl Input {
    pub fn open(path: &Path) -> Result<Input, TraceError> {
        let mut file = File::open(path).map_err(|e| io_err(path, e))?;
        let meta = file.metadata().map_err(|e| io_err(path, e))?;
        if meta.is_dir() {
            return Err(TraceError::BadFormat {
                path: path.to_path_buf(),
                reason: "is a directory, not a trace file".into(),
            });
        }
        let file_len = meta.len();
        let mut magic = [0u8; 4];
        let n = read_full(&mut file, &mut magic).map_err(|e| io_err(path, e))?;
        let compression = if n >= 4 && magic == ZSTD_MAGIC {
            Compression::Zstd
        } else if n >= 2 && magic[..2] == GZIP_MAGIC {
            Compression::Gzip
        } else {
            Compression::None
        };
        let consumed = Arc::new(AtomicU64::new(n as u64));
        let counting = Counting {
            file,
            count: consumed.clone(),
        };
        let raw: Box<dyn Read + Send> =
            Box::new(io::Cursor::new(magic[..n].to_vec()).chain(counting));
        let mut reader: Box<dyn Read + Send> = match compression {
            Compression::None => raw,
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(
                io::BufReader::with_capacity(256 * 1024, raw),
            )),
            Compression::Zstd => {
                let mut d = zstd::stream::read::Decoder::with_buffer(io::BufReader::with_capacity(
                    256 * 1024,
                    raw,
                ))
                .map_err(|e| io_err(path, e))?;
                // Traces are often compressed with --long (windows up to 2 GiB).
                d.window_log_max(31).map_err(|e| io_err(path, e))?;
                Box::new(d)
            }
        };
        let mut head = vec![0u8; HEAD_LEN];
        let h = read_full(&mut *reader, &mut head).map_err(|e| io_err(path, e))?;
        head.truncate(h);
        let reader: Box<dyn Read + Send> = Box::new(io::Cursor::new(head.clone()).chain(reader));
        Ok(Input {
            path: path.to_path_buf(),
            compression,
            file_len,
            consumed,
            head,
            reader,
        })
    }

    /// The file name with a compression suffix (.gz, .zst, .zstd) removed,
    /// lower-cased, for detection by name.
    pub fn logical_name(&self) -> String {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        for suf in [".gz", ".gzip", ".zst", ".zstd"] {
            if let Some(s) = name.strip_suffix(suf) {
                return s.to_string();
            }
        }
        name
    }
}

/// A large block buffer over the decompressed stream. Readers parse records
/// directly from [`Buf::available`] and [`Buf::consume`] what they used.
pub(crate) struct Buf {
    inner: Box<dyn Read + Send>,
    data: Vec<u8>,
    pos: usize,
    end: usize,
    eof: bool,
    /// Bytes of decompressed content consumed before `data[pos]`.
    offset: u64,
}

pub(crate) const BUF_LEN: usize = 1 << 20;

impl Buf {
    pub fn new(inner: Box<dyn Read + Send>) -> Buf {
        Buf {
            inner,
            data: vec![0u8; BUF_LEN],
            pos: 0,
            end: 0,
            eof: false,
            offset: 0,
        }
    }

    /// The bytes read but not yet consumed.
    #[inline]
    pub fn available(&self) -> &[u8] {
        &self.data[self.pos..self.end]
    }

    /// Marks `n` available bytes as used.
    #[inline]
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.end - self.pos);
        self.pos += n;
        self.offset += n as u64;
    }

    /// Decompressed bytes consumed so far.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads more bytes after the available ones (moving those to the front,
    /// growing the buffer when it is full). Returns false at the end of the
    /// stream, when nothing more could be read.
    pub fn refill(&mut self) -> io::Result<bool> {
        if self.eof {
            return Ok(false);
        }
        if self.pos > 0 {
            self.data.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
        }
        if self.end == self.data.len() {
            let len = self.data.len() * 2;
            self.data.resize(len, 0);
        }
        let before = self.end;
        while self.end < self.data.len() {
            match self.inner.read(&mut self.data[self.end..]) {
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(k) => {
                    self.end += k;
                    // A pipe or decompressor may return little at a time;
                    // keep reading until a good block is there.
                    if self.end - before >= BUF_LEN / 2 {
                        break;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(self.end > before)
    }

    /// Makes at least `n` bytes available if the stream has them; returns
    /// whether it has.
    pub fn ensure(&mut self, n: usize) -> io::Result<bool> {
        while self.end - self.pos < n {
            if !self.refill()? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}
