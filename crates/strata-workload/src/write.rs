//! Writing a generated trace to a file: Strata's binary trace format (with
//! the workload-name table) or Strata CSV.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};

use strata_trace::{CsvWriter, Request, Writer};

/// A trace file could not be written.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {source}")]
pub struct WriteError {
    /// The file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
}

/// The file format of a written trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceFile {
    /// Strata's compact binary format (docs/trace-format.md), with names.
    Strata,
    /// Strata CSV with a header row (workloads by id).
    Csv,
}

impl TraceFile {
    /// CSV for a `.csv` name, else Strata's binary format.
    pub fn from_path(path: &Path) -> TraceFile {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("csv") => TraceFile::Csv,
            _ => TraceFile::Strata,
        }
    }
}

/// Writes requests to `path`, naming workloads (`names`: id and name),
/// calling `progress` with the record count and the current trace time
/// every 65,536 records. Returns the number of records written.
pub fn write_trace<I, F>(
    path: &Path,
    format: TraceFile,
    names: &[(u32, String)],
    requests: I,
    mut progress: F,
) -> Result<u64, WriteError>
where
    I: IntoIterator<Item = Request>,
    F: FnMut(u64, f64),
{
    let err = |source| WriteError {
        path: path.to_path_buf(),
        source,
    };
    let file = BufWriter::with_capacity(1 << 20, File::create(path).map_err(err)?);
    let mut n = 0u64;
    let out = match format {
        TraceFile::Strata => {
            let mut w = Writer::new(file).map_err(err)?;
            for (id, name) in names {
                w.name_workload(*id, name).map_err(err)?;
            }
            for r in requests {
                w.write(&r).map_err(err)?;
                n += 1;
                if n & 0xFFFF == 0 {
                    progress(n, r.time);
                }
            }
            w.finish().map_err(err)?
        }
        TraceFile::Csv => {
            let mut w = CsvWriter::new(file).map_err(err)?;
            for r in requests {
                w.write(&r).map_err(err)?;
                n += 1;
                if n & 0xFFFF == 0 {
                    progress(n, r.time);
                }
            }
            w.finish().map_err(err)?
        }
    };
    let file = out.into_inner().map_err(|e| err(e.into_error()))?;
    file.sync_all().map_err(err)?;
    Ok(n)
}
