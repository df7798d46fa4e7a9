//! The public reading interface: [`open`], [`OpenOptions`], [`TraceReader`].

use crate::columns::ColumnMap;
use crate::detect::detect;
use crate::format::Format;
use crate::input::Input;
use crate::readers;
use crate::readers::source::Source;
use crate::{Request, TraceError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Records decoded per internal batch (and the default of
/// [`TraceReader::read_batch`]).
pub const BATCH: usize = 4096;

/// How to open a trace: force a format, give a CSV column map.
#[derive(Clone, Debug, Default)]
pub struct OpenOptions {
    format: Option<Format>,
    columns: Option<ColumnMap>,
}

impl OpenOptions {
    /// Options that detect the format.
    pub fn new() -> OpenOptions {
        OpenOptions::default()
    }

    /// Reads the file as `format` instead of detecting it.
    pub fn format(mut self, format: Format) -> OpenOptions {
        self.format = Some(format);
        self
    }

    /// Reads the file as delimited text through `columns` (implies
    /// [`Format::Csv`] unless a format is forced).
    pub fn columns(mut self, columns: ColumnMap) -> OpenOptions {
        self.columns = Some(columns);
        self
    }

    /// Opens the trace.
    pub fn open(&self, path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
        let path = path.as_ref();
        let input = Input::open(path)?;
        let format = match (self.format, &self.columns) {
            (Some(f), _) => f,
            (None, Some(_)) => Format::Csv,
            (None, None) => detect(&input)?,
        };
        let consumed = input.consumed.clone();
        let file_len = input.file_len;
        let path = input.path.clone();
        let source = readers::make(format, input, self.columns.as_ref())?;
        Ok(TraceReader {
            path,
            format,
            source,
            buf: Vec::with_capacity(BATCH),
            pos: 0,
            pending: None,
            done: false,
            progress: ReadProgress { consumed, file_len },
        })
    }
}

/// Opens a trace file, detecting its format from its magic, name or header
/// (gzip and zstd are decompressed transparently).
pub fn open(path: impl AsRef<Path>) -> Result<TraceReader, TraceError> {
    OpenOptions::new().open(path)
}

/// How far a reader has got through its file, for progress bars; cheap to
/// clone and to read from another thread.
#[derive(Clone, Debug)]
pub struct ReadProgress {
    consumed: Arc<AtomicU64>,
    file_len: u64,
}

impl ReadProgress {
    /// Bytes of the file on disk read so far (compressed bytes for a
    /// compressed file; reading runs up to ~1 MiB ahead of decoding).
    pub fn bytes_read(&self) -> u64 {
        self.consumed.load(Ordering::Relaxed).min(self.file_len)
    }

    /// The size of the file on disk.
    pub fn file_len(&self) -> u64 {
        self.file_len
    }
}

/// A stream of requests from one trace file.
///
/// An `Iterator<Item = Result<Request, TraceError>>`; after an error it
/// ends. Memory stays bounded whatever the trace's length (one block buffer
/// and one batch of records, plus the workload name table).
pub struct TraceReader {
    path: PathBuf,
    format: Format,
    source: Box<dyn Source>,
    buf: Vec<Request>,
    pos: usize,
    pending: Option<TraceError>,
    done: bool,
    progress: ReadProgress,
}

impl std::fmt::Debug for TraceReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TraceReader")
            .field("path", &self.path)
            .field("format", &self.format)
            .finish_non_exhaustive()
    }
}

impl TraceReader {
    /// The format being read.
    pub fn format(&self) -> Format {
        self.format
    }

    /// The trace file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Workload names indexed by workload id, as far as the trace has named
    /// them so far (names may appear as the trace goes on); empty when the
    /// trace has no named workloads.
    pub fn workload_names(&self) -> &[String] {
        self.source.workload_names()
    }

    /// The name of workload `id`, if the trace named it.
    pub fn workload_name(&self, id: u32) -> Option<&str> {
        self.workload_names()
            .get(id as usize)
            .map(|s| s.as_str())
            .filter(|s| !s.is_empty())
    }

    /// The number of records, when the format says so up front (LCS,
    /// uncompressed fixed-record formats).
    pub fn len_hint(&self) -> Option<u64> {
        self.source.len_hint()
    }

    /// A handle for progress bars.
    pub fn progress(&self) -> ReadProgress {
        self.progress.clone()
    }

    /// Replaces `out`'s contents with the next records (up to
    /// `max(out.capacity(), 4096)`, at most 1 Mi). Returns how many; 0 at the
    /// end of the trace. The fastest way to read a trace.
    pub fn read_batch(&mut self, out: &mut Vec<Request>) -> Result<usize, TraceError> {
        out.clear();
        let max = out.capacity().clamp(BATCH, 1 << 20);
        if self.pos < self.buf.len() {
            let take = (self.buf.len() - self.pos).min(max);
            out.extend_from_slice(&self.buf[self.pos..self.pos + take]);
            self.pos += take;
            return Ok(take);
        }
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Err(e);
        }
        if self.done {
            return Ok(0);
        }
        match self.source.fill(out, max) {
            Ok(n) => {
                if n == 0 {
                    self.done = true;
                }
                Ok(n)
            }
            Err(e) => {
                if out.is_empty() {
                    self.done = true;
                    Err(e)
                } else {
                    self.pending = Some(e);
                    Ok(out.len())
                }
            }
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.pos < self.buf.len() {
            let r = self.buf[self.pos].clone();
            self.pos += 1;
            return Some(Ok(r));
        }
        self.refill()
    }
}

impl TraceReader {
    #[cold]
    fn refill(&mut self) -> Option<Result<Request, TraceError>> {
        if let Some(e) = self.pending.take() {
            self.done = true;
            return Some(Err(e));
        }
        if self.done {
            return None;
        }
        self.buf.clear();
        self.pos = 0;
        let r = self.source.fill(&mut self.buf, BATCH);
        if let Err(e) = r {
            self.pending = Some(e);
        }
        if self.buf.is_empty() {
            match self.pending.take() {
                Some(e) => {
                    self.done = true;
                    Some(Err(e))
                }
                None => {
                    self.done = true;
                    None
                }
            }
        } else {
            self.pos = 1;
            Some(Ok(self.buf[0].clone()))
        }
    }
}
