//! Trace writers: Strata's binary format ([`Writer`]), Strata CSV
//! ([`CsvWriter`]) and libCacheSim oracleGeneral ([`OracleWriter`]).

use crate::readers::strata::{
    frame_crc, FRAME_END, FRAME_LEN, FRAME_NAMES, FRAME_RECORDS, F_DELTA, F_EXT, F_RANGE,
    F_TIER_SHIFT, F_WORKLOAD, HEADER_LEN, MAGIC, VERSION, X_CREATE, X_HINT, X_HINT_VALUE,
    X_LATENCY, X_NEXT,
};
use crate::varint::{put, zigzag};
use crate::{Op, Request, Tier, TraceError};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Options of a Strata binary trace [`Writer`].
#[derive(Clone, Copy, Debug)]
pub struct WriterOptions {
    /// Nanoseconds per time tick (default 1000: microsecond resolution).
    /// Times are rounded to whole ticks.
    pub time_unit_ns: u32,
    /// Records per block (default 65,536). A block is the unit of checksums
    /// and of loss when a writer dies mid-file.
    pub block_records: u32,
}

impl Default for WriterOptions {
    fn default() -> WriterOptions {
        WriterOptions {
            time_unit_ns: 1000,
            block_records: 65_536,
        }
    }
}

fn invalid(msg: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, msg)
}

/// A streaming writer of Strata's binary trace format (docs/trace-format.md).
///
/// Records are buffered into blocks of up to `block_records` records (about
/// 1 MiB); [`Writer::finish`] writes the last block and the end frame, and
/// a file without its end frame is reported as cut short by the reader.
pub struct Writer<W: Write> {
    out: W,
    opts: WriterOptions,
    ticks_per_sec: f64,
    block: Vec<u8>,
    in_block: u32,
    prev_time: i64,
    prev_object: u64,
    workload: u32,
    names: Vec<(u32, String)>,
    records: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a trace with default options.
    pub fn new(out: W) -> io::Result<Writer<W>> {
        Writer::with_options(out, WriterOptions::default())
    }

    /// Starts a trace: writes the file header.
    pub fn with_options(mut out: W, opts: WriterOptions) -> io::Result<Writer<W>> {
        if opts.time_unit_ns == 0 {
            return Err(invalid("time unit must be at least 1 ns".into()));
        }
        let mut h = [0u8; HEADER_LEN];
        h[..8].copy_from_slice(&MAGIC);
        h[8..10].copy_from_slice(&VERSION.to_le_bytes());
        h[12..16].copy_from_slice(&opts.time_unit_ns.to_le_bytes());
        let crc = crc32c::crc32c(&h[..28]);
        h[28..32].copy_from_slice(&crc.to_le_bytes());
        out.write_all(&h)?;
        Ok(Writer {
            out,
            opts: WriterOptions {
                block_records: opts.block_records.max(1),
                ..opts
            },
            ticks_per_sec: 1e9 / opts.time_unit_ns as f64,
            block: Vec::with_capacity(1 << 20),
            in_block: 0,
            prev_time: 0,
            prev_object: 0,
            workload: 0,
            names: Vec::new(),
            records: 0,
        })
    }

    /// Names workload `id` (e.g. a store bucket). The name is written before
    /// the next block; readers see it from then on.
    pub fn name_workload(&mut self, id: u32, name: &str) -> io::Result<()> {
        if self.in_block > 0 {
            self.flush_block()?;
        }
        self.names.push((id, name.to_string()));
        Ok(())
    }

    fn ticks(&self, t: f64, what: &str) -> io::Result<i64> {
        let v = (t * self.ticks_per_sec).round();
        if !v.is_finite() || v.abs() >= 9.0e18 {
            return Err(invalid(format!(
                "record {}: {what} {t} is not a representable time",
                self.records + 1
            )));
        }
        Ok(v as i64)
    }

    /// Appends one request.
    pub fn write(&mut self, r: &Request) -> io::Result<()> {
        let t = self.ticks(r.time, "time")?;
        let create = match r.create_time {
            Some(c) => Some(self.ticks(c, "create_time")?),
            None => None,
        };
        if self.in_block == 0 {
            self.block.clear();
            self.block.extend_from_slice(&t.to_le_bytes());
            self.prev_time = t;
            self.prev_object = 0;
            self.workload = 0;
        }
        let mut flags = match r.op {
            Op::Get => 0u8,
            Op::Put => 1,
            Op::Delete => 2,
        };
        flags |= match r.tier {
            None => 0,
            Some(Tier::Ram) => 1,
            Some(Tier::Flash) => 2,
            Some(Tier::Disk) => 3,
        } << F_TIER_SHIFT;
        if r.workload != self.workload {
            flags |= F_WORKLOAD;
        }
        let delta = r.object.wrapping_sub(self.prev_object) as i64;
        // A delta that takes 7 varint bytes or fewer beats 8 raw bytes.
        let use_delta = zigzag(delta) < 1 << 49;
        if use_delta {
            flags |= F_DELTA;
        }
        if r.offset.is_some() || r.length.is_some() {
            flags |= F_RANGE;
        }
        let mut ext = 0u8;
        if r.latency_us.is_some() {
            ext |= X_LATENCY;
        }
        if create.is_some() {
            ext |= X_CREATE;
        }
        if let Some(h) = r.cache_hint {
            ext |= X_HINT | if h { X_HINT_VALUE } else { 0 };
        }
        if r.next_access.is_some() {
            ext |= X_NEXT;
        }
        if ext != 0 {
            flags |= F_EXT;
        }
        let b = &mut self.block;
        b.push(flags);
        if ext != 0 {
            b.push(ext);
        }
        put(b, zigzag(t.wrapping_sub(self.prev_time)));
        self.prev_time = t;
        if flags & F_WORKLOAD != 0 {
            put(b, r.workload as u64);
            self.workload = r.workload;
        }
        if use_delta {
            put(b, zigzag(delta));
        } else {
            b.extend_from_slice(&r.object.to_le_bytes());
        }
        self.prev_object = r.object;
        put(b, r.size);
        if flags & F_RANGE != 0 {
            put(b, r.offset.unwrap_or(0));
            put(b, r.length.unwrap_or(r.size));
        }
        if let Some(l) = r.latency_us {
            put(b, l as u64);
        }
        if let Some(c) = create {
            put(b, zigzag(t.wrapping_sub(c)));
        }
        if let Some(n) = r.next_access {
            put(b, zigzag((n as i64).wrapping_sub(self.records as i64)));
        }
        self.in_block += 1;
        self.records += 1;
        if self.in_block >= self.opts.block_records || self.block.len() >= 1 << 20 {
            self.flush_block()?;
        }
        Ok(())
    }

    fn frame(&mut self, kind: u8, count: u32, payload: &[u8]) -> io::Result<()> {
        let mut h = [0u8; FRAME_LEN];
        h[0] = kind;
        h[4..8].copy_from_slice(&(payload.len() as u32).to_le_bytes());
        h[8..12].copy_from_slice(&count.to_le_bytes());
        let crc = frame_crc(&h[..12], payload);
        h[12..16].copy_from_slice(&crc.to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(payload)
    }

    fn flush_names(&mut self) -> io::Result<()> {
        if self.names.is_empty() {
            return Ok(());
        }
        let mut p = Vec::new();
        for (id, n) in &self.names {
            put(&mut p, *id as u64);
            put(&mut p, n.len() as u64);
            p.extend_from_slice(n.as_bytes());
        }
        let count = self.names.len() as u32;
        self.names.clear();
        self.frame(FRAME_NAMES, count, &p)
    }

    fn flush_block(&mut self) -> io::Result<()> {
        self.flush_names()?;
        if self.in_block == 0 {
            return Ok(());
        }
        let block = std::mem::take(&mut self.block);
        let r = self.frame(FRAME_RECORDS, self.in_block, &block);
        self.block = block;
        self.block.clear();
        self.in_block = 0;
        r
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Writes the last block and the end frame, flushes, and returns the
    /// underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.flush_block()?;
        let total = self.records.to_le_bytes();
        self.frame(FRAME_END, 0, &total)?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes Strata CSV: a header row, then one request per line with every
/// column (empty cells for absent optional fields). Workloads are written by
/// name when a name is known.
pub struct CsvWriter<W: Write> {
    out: W,
    names: Vec<String>,
    line: String,
}

/// The columns [`CsvWriter`] writes, in order.
pub const CSV_COLUMNS: &str =
    "time,op,object,size,workload,offset,length,create_time,tier,latency_us,hint,next_access";

impl<W: Write> CsvWriter<W> {
    /// Starts a CSV trace: writes the header row.
    pub fn new(mut out: W) -> io::Result<CsvWriter<W>> {
        writeln!(out, "{CSV_COLUMNS}")?;
        Ok(CsvWriter {
            out,
            names: Vec::new(),
            line: String::with_capacity(128),
        })
    }

    /// Sets the workload names (index = id) written instead of ids; an
    /// empty entry keeps the name already known for that id.
    pub fn set_workload_names(&mut self, names: &[String]) {
        if self.names.len() < names.len() {
            self.names.resize(names.len(), String::new());
        }
        for (slot, n) in self.names.iter_mut().zip(names) {
            if !n.is_empty() {
                slot.clone_from(n);
            }
        }
    }

    /// Appends one request.
    pub fn write(&mut self, r: &Request) -> io::Result<()> {
        use std::fmt::Write as _;
        let l = &mut self.line;
        l.clear();
        let _ = write!(l, "{},{},{},{},", r.time, r.op, r.object, r.size);
        match self.names.get(r.workload as usize) {
            Some(n)
                if !n.is_empty()
                    && !n.contains([',', '"', '\n', '\r'])
                    && n.parse::<u64>().is_err() =>
            {
                l.push_str(n)
            }
            _ => {
                let _ = write!(l, "{}", r.workload);
            }
        }
        l.push(',');
        let opt = |l: &mut String, v: Option<String>| {
            if let Some(v) = v {
                l.push_str(&v);
            }
            l.push(',');
        };
        opt(l, r.offset.map(|v| v.to_string()));
        opt(l, r.length.map(|v| v.to_string()));
        opt(l, r.create_time.map(|v| v.to_string()));
        opt(l, r.tier.map(|v| v.to_string()));
        opt(l, r.latency_us.map(|v| v.to_string()));
        opt(l, r.cache_hint.map(|v| v.to_string()));
        if let Some(n) = r.next_access {
            let _ = write!(l, "{n}");
        }
        l.push('\n');
        self.out.write_all(l.as_bytes())
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Writes libCacheSim's oracleGeneral binary (24-byte records `<IQIq`):
/// time as whole seconds (u32), object, size (u32) and next access (-1 for
/// none). Other fields are dropped; a time or size that does not fit is an
/// error, never silently clamped.
pub struct OracleWriter<W: Write> {
    out: W,
    records: u64,
}

impl<W: Write> OracleWriter<W> {
    /// Starts an oracleGeneral trace (it has no header).
    pub fn new(out: W) -> OracleWriter<W> {
        OracleWriter { out, records: 0 }
    }

    /// Appends one request.
    pub fn write(&mut self, r: &Request) -> io::Result<()> {
        self.records += 1;
        let t = r.time.floor();
        if !(0.0..=u32::MAX as f64).contains(&t) {
            return Err(invalid(format!(
                "record {}: time {} does not fit oracleGeneral's u32 seconds",
                self.records, r.time
            )));
        }
        let size = u32::try_from(r.size).map_err(|_| {
            invalid(format!(
                "record {}: size {} does not fit oracleGeneral's u32",
                self.records, r.size
            ))
        })?;
        let mut rec = [0u8; 24];
        rec[..4].copy_from_slice(&(t as u32).to_le_bytes());
        rec[4..12].copy_from_slice(&r.object.to_le_bytes());
        rec[12..16].copy_from_slice(&size.to_le_bytes());
        let na = r
            .next_access
            .map_or(-1i64, |n| n.min(i64::MAX as u64) as i64);
        rec[16..24].copy_from_slice(&na.to_le_bytes());
        self.out.write_all(&rec)
    }

    /// Flushes and returns the underlying writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The formats Strata writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputFormat {
    /// Strata's binary trace format (lossless, compact, fast).
    Strata,
    /// Strata CSV (lossless up to float formatting; human-readable).
    Csv,
    /// libCacheSim oracleGeneral (time, object, size, next access only).
    OracleGeneral,
}

impl OutputFormat {
    /// The format an output file name implies: `.strace` Strata, `.csv`
    /// Strata CSV, a name containing `oracleGeneral` oracleGeneral (a
    /// `.gz`/`.zst` suffix is looked through).
    pub fn from_path(path: &Path) -> Option<OutputFormat> {
        let name = path.file_name()?.to_string_lossy().to_ascii_lowercase();
        let name = name
            .strip_suffix(".zst")
            .or_else(|| name.strip_suffix(".gz"))
            .unwrap_or(&name);
        if name.contains("oraclegeneral") {
            Some(OutputFormat::OracleGeneral)
        } else if name.ends_with(".strace") {
            Some(OutputFormat::Strata)
        } else if name.ends_with(".csv") {
            Some(OutputFormat::Csv)
        } else {
            None
        }
    }
}

impl std::str::FromStr for OutputFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<OutputFormat, String> {
        match s.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "strata" | "strace" => Ok(OutputFormat::Strata),
            "csv" | "stratacsv" => Ok(OutputFormat::Csv),
            "oraclegeneral" | "oracle" => Ok(OutputFormat::OracleGeneral),
            _ => Err(format!(
                "unknown output format {s:?} (strata, csv or oracleGeneral)"
            )),
        }
    }
}

/// A file, compressed by its name's suffix (.gz, .zst).
enum Sink {
    Plain(io::BufWriter<std::fs::File>),
    Gzip(flate2::write::GzEncoder<io::BufWriter<std::fs::File>>),
    Zstd(zstd::stream::write::Encoder<'static, io::BufWriter<std::fs::File>>),
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Plain(w) => w.write(buf),
            Sink::Gzip(w) => w.write(buf),
            Sink::Zstd(w) => w.write(buf),
        }
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.write_all(buf),
            Sink::Gzip(w) => w.write_all(buf),
            Sink::Zstd(w) => w.write_all(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Plain(w) => w.flush(),
            Sink::Gzip(w) => w.flush(),
            Sink::Zstd(w) => w.flush(),
        }
    }
}

impl Sink {
    fn create(path: &Path) -> io::Result<Sink> {
        let f = io::BufWriter::with_capacity(1 << 20, std::fs::File::create(path)?);
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        Ok(if name.ends_with(".gz") {
            Sink::Gzip(flate2::write::GzEncoder::new(
                f,
                flate2::Compression::default(),
            ))
        } else if name.ends_with(".zst") || name.ends_with(".zstd") {
            let mut e = zstd::stream::write::Encoder::new(f, 3)?;
            // Multi-threaded compression is not needed; a checksum is.
            e.include_checksum(true)?;
            Sink::Zstd(e)
        } else {
            Sink::Plain(f)
        })
    }

    fn finish(self) -> io::Result<()> {
        let mut f = match self {
            Sink::Plain(w) => w,
            Sink::Gzip(w) => w.finish()?,
            Sink::Zstd(w) => w.finish()?,
        };
        f.flush()?;
        f.get_ref().sync_all()
    }
}

enum AnyWriter {
    Strata(Writer<Sink>),
    Csv(CsvWriter<Sink>),
    Oracle(OracleWriter<Sink>),
}

/// Writes a trace file in any [`OutputFormat`], compressed with gzip or
/// zstd when the file name ends in `.gz` or `.zst`.
pub struct TraceWriter {
    path: PathBuf,
    inner: AnyWriter,
}

impl TraceWriter {
    /// Creates (or truncates) `path` and starts a trace in `format`.
    pub fn create(
        path: impl AsRef<Path>,
        format: OutputFormat,
        opts: WriterOptions,
    ) -> Result<TraceWriter, TraceError> {
        let path = path.as_ref().to_path_buf();
        let err = |e| TraceError::Io {
            path: path.clone(),
            source: e,
        };
        let sink = Sink::create(&path).map_err(err)?;
        let inner = match format {
            OutputFormat::Strata => {
                AnyWriter::Strata(Writer::with_options(sink, opts).map_err(err)?)
            }
            OutputFormat::Csv => AnyWriter::Csv(CsvWriter::new(sink).map_err(err)?),
            OutputFormat::OracleGeneral => AnyWriter::Oracle(OracleWriter::new(sink)),
        };
        Ok(TraceWriter { path, inner })
    }

    fn err(&self, e: io::Error) -> TraceError {
        TraceError::Io {
            path: self.path.clone(),
            source: e,
        }
    }

    /// Records workload names (index = id); formats without names ignore
    /// them. Call before the records that use them.
    pub fn set_workload_names(&mut self, names: &[String]) -> Result<(), TraceError> {
        match &mut self.inner {
            AnyWriter::Strata(w) => {
                for (id, n) in names.iter().enumerate() {
                    if !n.is_empty() {
                        if let Err(e) = w.name_workload(id as u32, n) {
                            return Err(self.err(e));
                        }
                    }
                }
            }
            AnyWriter::Csv(w) => w.set_workload_names(names),
            AnyWriter::Oracle(_) => {}
        }
        Ok(())
    }

    /// Appends one request.
    #[inline]
    pub fn write(&mut self, r: &Request) -> Result<(), TraceError> {
        let res = match &mut self.inner {
            AnyWriter::Strata(w) => w.write(r),
            AnyWriter::Csv(w) => w.write(r),
            AnyWriter::Oracle(w) => w.write(r),
        };
        res.map_err(|e| self.err(e))
    }

    /// Finishes the file (end frame, compression trailer) and syncs it.
    pub fn finish(self) -> Result<(), TraceError> {
        let path = self.path;
        let res = match self.inner {
            AnyWriter::Strata(w) => w.finish().and_then(Sink::finish),
            AnyWriter::Csv(w) => w.finish().and_then(Sink::finish),
            AnyWriter::Oracle(w) => w.finish().and_then(Sink::finish),
        };
        res.map_err(|e| TraceError::Io { path, source: e })
    }
}
