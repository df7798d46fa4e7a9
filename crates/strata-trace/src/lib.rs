//! Strata's trace model and trace readers.
//!
//! One [`Request`] record describes one storage request (a read, write or
//! delete of one object by one workload). Every trace format Strata reads is
//! turned into a stream of these records, and every lab tool (simulator,
//! miss-ratio curves, provisioner, analysis) consumes that stream, so a trace
//! far larger than RAM works with bounded memory.
//!
//! # Reading a trace
//!
//! ```no_run
//! # fn main() -> Result<(), strata_trace::TraceError> {
//! // Format detected from the file's magic, name or header;
//! // gzip and zstd are decompressed transparently.
//! for req in strata_trace::open("trace.oracleGeneral.bin")? {
//!     let req = req?;
//!     println!("{} {} {} {}", req.time, req.op, req.object, req.size);
//! }
//! # Ok(()) }
//! ```
//!
//! To force a format or read an arbitrary CSV, use [`OpenOptions`]:
//!
//! ```no_run
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use strata_trace::{ColumnMap, Format, OpenOptions};
//! let reader = OpenOptions::new()
//!     .columns("time=1,object=3,size=4,op=2".parse::<ColumnMap>()?)
//!     .open("my.csv")?;
//! let oracle = OpenOptions::new().format(Format::OracleGeneral).open("trace.bin")?;
//! # drop((reader, oracle)); Ok(()) }
//! ```
//!
//! # Speed
//!
//! A [`TraceReader`] is an `Iterator<Item = Result<Request, TraceError>>`
//! (and `Send`). Records are decoded in batches from large blocks of the
//! file, never allocated one by one. For the fastest path — the simulator's —
//! use [`TraceReader::read_batch`], which fills a caller-owned `Vec<Request>`
//! with up to a few thousand records per call; a loop over batches avoids the
//! per-record iterator and `Result` overhead entirely. docs/benchmarks.md
//! ("Trace readers") lists the measured records/s of every reader.
//!
//! # Object and workload ids
//!
//! Numeric ids are used as they are; string ids are hashed with the stable
//! [`hash_object_id`] (XXH3-64, seed 0). Workload names (Strata CSV and
//! binary traces, MSR host/disk pairs) get small ids in order of first
//! appearance; [`TraceReader::workload_names`] maps ids back to names.
//!
//! # Strata's own format
//!
//! [`Writer`] writes and [`Format::Strata`] reads Strata's compact binary
//! trace format (docs/trace-format.md describes it byte by byte).

#![warn(missing_docs)]

mod columns;
mod detect;
mod format;
mod hash;
mod input;
mod model;
mod reader;
mod readers;
pub mod stats;
mod varint;
mod writer;

pub use columns::BadColumnMap;
pub use columns::{Column, ColumnMap};
pub use format::{Format, UnknownFormat};
pub use hash::{hash_object_id, object_id};
pub use model::{Op, Request, Tier, TraceError};
pub use reader::{open, OpenOptions, ReadProgress, TraceReader, BATCH};
pub use writer::{
    CsvWriter, OracleWriter, OutputFormat, TraceWriter, Writer, WriterOptions, CSV_COLUMNS,
};
