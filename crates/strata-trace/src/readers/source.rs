//! What the format readers share: the [`Source`] they implement, the
//! [`Ctx`] of their error messages, and their block [`buffer`].

use crate::input::{Buf, Input};
use crate::{Request, TraceError};
use std::path::{Path, PathBuf};

/// What every format's reader implements.
pub(crate) trait Source: Send {
    /// Appends up to `max` records to `out`. Returns how many it appended;
    /// 0 means the trace has ended. On an error, the records appended before
    /// it stay in `out` (the caller delivers them first).
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError>;

    /// Workload names by id (empty when the trace names none).
    fn workload_names(&self) -> &[String] {
        &[]
    }

    /// The number of records, when the format says so before reading.
    fn len_hint(&self) -> Option<u64> {
        None
    }
}

/// Context every reader carries for error messages.
pub(crate) struct Ctx {
    pub path: PathBuf,
    /// Records produced so far.
    pub records: u64,
}

impl Ctx {
    pub fn new(path: &Path) -> Ctx {
        Ctx {
            path: path.to_path_buf(),
            records: 0,
        }
    }

    pub fn io(&self, e: std::io::Error) -> TraceError {
        crate::input::io_err(&self.path, e)
    }

    /// An error about record `record` (1-based).
    pub fn bad(&self, record: u64, reason: impl Into<String>) -> TraceError {
        TraceError::BadRecord {
            path: self.path.clone(),
            record,
            reason: reason.into(),
        }
    }

    pub fn truncated(&self, record: u64, have: usize, need: usize) -> TraceError {
        TraceError::Truncated {
            path: self.path.clone(),
            record,
            have,
            need,
        }
    }

    pub fn format(&self, reason: impl Into<String>) -> TraceError {
        TraceError::BadFormat {
            path: self.path.clone(),
            reason: reason.into(),
        }
    }
}

/// Builds the block buffer over an input.
pub(crate) fn buffer(input: Input) -> (Buf, Ctx) {
    let ctx = Ctx::new(&input.path);
    (Buf::new(input.reader), ctx)
}
