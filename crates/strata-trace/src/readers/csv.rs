//! Delimited text traces: Strata CSV, libCacheSim's Twitter CSV and
//! CloudPhysics CSV, MSR Cambridge, one-id-per-line text, and any CSV through
//! a column map. One line parser serves them all; a dialect says how a few
//! fields are read (SCSI opcodes, Windows filetime, host/disk workloads).

use super::source::{buffer, Ctx, Source};
use super::{libcachesim_op, scsi_op};
use crate::columns::{Column, ColumnMap};
use crate::format::Format;
use crate::hash::{hash_object_id, parse_u64};
use crate::input::{Buf, Input};
use crate::{Op, Request, Tier, TraceError};
use rustc_hash::FxHashMap;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Dialect {
    /// Column map or Strata CSV header; ops by name or libCacheSim code.
    Generic,
    /// CloudPhysics CSV: op is a SCSI opcode in hex.
    CloudPhysics,
    /// MSR: filetime, host+disk workload, latency in 100 ns ticks.
    Msr,
    /// One id per line.
    Text,
}

/// Windows filetime (100 ns ticks since 1601) of the Unix epoch.
const FILETIME_UNIX_EPOCH: i128 = 116_444_736_000_000_000;

/// 0-based field indexes of each request field.
#[derive(Clone, Copy, Debug, Default)]
struct Plan {
    time: Option<usize>,
    op: Option<usize>,
    object: Option<usize>,
    size: Option<usize>,
    workload: Option<usize>,
    /// MSR: the disk number, joined to the host name.
    workload2: Option<usize>,
    offset: Option<usize>,
    length: Option<usize>,
    create_time: Option<usize>,
    tier: Option<usize>,
    latency: Option<usize>,
    hint: Option<usize>,
    next_access: Option<usize>,
}

impl Plan {
    fn max_index(&self) -> usize {
        [
            self.time,
            self.op,
            self.object,
            self.size,
            self.workload,
            self.workload2,
            self.offset,
            self.length,
            self.create_time,
            self.tier,
            self.latency,
            self.hint,
            self.next_access,
        ]
        .into_iter()
        .flatten()
        .max()
        .unwrap_or(0)
    }
}

pub(crate) struct CsvReader {
    buf: Buf,
    p: Parser,
}

/// Everything but the buffer, so a line borrowed from the buffer can be
/// parsed with `&mut Parser`.
struct Parser {
    ctx: Ctx,
    dialect: Dialect,
    plan: Plan,
    /// Columns still given by name, resolved against the header row.
    pending_names: Option<ColumnMap>,
    delimiter: Option<u8>,
    /// Whether the next non-comment line is the header row.
    expect_header: bool,
    /// Whether a first line of `version,...` (CloudPhysics) is skipped.
    skip_version_header: bool,
    time_unit: f64,
    line: u64,
    fields: Vec<(usize, usize)>,
    names: Vec<String>,
    name_ids: FxHashMap<Vec<u8>, u32>,
    scratch: Vec<u8>,
    format: Format,
}

fn col_index(c: &Option<Column>) -> Option<usize> {
    match c {
        Some(Column::Index(i)) => Some(*i),
        _ => None,
    }
}

impl CsvReader {
    pub fn new(
        format: Format,
        input: Input,
        columns: Option<&ColumnMap>,
    ) -> Result<CsvReader, TraceError> {
        let ctx = Ctx::new(&input.path);
        let mut plan = Plan::default();
        let mut dialect = Dialect::Generic;
        let mut delimiter = None;
        let mut expect_header = false;
        let mut pending_names = None;
        let mut time_unit = 1.0;
        let mut skip_version_header = false;
        match (format, columns) {
            (_, Some(map)) => {
                plan = Plan {
                    time: col_index(&map.time),
                    op: col_index(&map.op),
                    object: col_index(&map.object),
                    size: col_index(&map.size),
                    workload: col_index(&map.workload),
                    workload2: None,
                    offset: col_index(&map.offset),
                    length: col_index(&map.length),
                    create_time: col_index(&map.create_time),
                    tier: col_index(&map.tier),
                    latency: col_index(&map.latency_us),
                    hint: col_index(&map.hint),
                    next_access: col_index(&map.next_access),
                };
                if map.object.is_none() {
                    return Err(ctx.format("the column map names no object column"));
                }
                delimiter = map.delimiter;
                time_unit = map.time_unit;
                expect_header = map.header.unwrap_or(map.uses_names());
                if map.uses_names() {
                    if !expect_header {
                        return Err(ctx.format("the column map names columns but header=false"));
                    }
                    pending_names = Some(map.clone());
                }
            }
            (Format::TwitterCsv, None) => {
                plan.time = Some(0);
                plan.object = Some(1);
                plan.size = Some(2);
                plan.next_access = Some(3);
                delimiter = Some(b',');
            }
            (Format::CloudPhysicsCsv, None) => {
                dialect = Dialect::CloudPhysics;
                plan.time = Some(1);
                plan.op = Some(2);
                plan.size = Some(3);
                plan.object = Some(4);
                delimiter = Some(b',');
                skip_version_header = true;
            }
            (Format::Msr, None) => {
                dialect = Dialect::Msr;
                plan.time = Some(0);
                plan.workload = Some(1);
                plan.workload2 = Some(2);
                plan.op = Some(3);
                plan.object = Some(4);
                plan.size = Some(5);
                plan.latency = Some(6);
                delimiter = Some(b',');
            }
            (Format::Text, None) => {
                dialect = Dialect::Text;
                plan.object = Some(0);
                delimiter = Some(b'\n');
            }
            (Format::StrataCsv, None) => {
                expect_header = true;
                pending_names = Some(ColumnMap::new());
            }
            (Format::Csv, None) => {
                return Err(ctx.format("a CSV of unknown layout needs a column map (--columns time=1,object=2,size=3,...)"));
            }
            (f, None) => return Err(ctx.format(format!("{f} is not a text format"))),
        }
        let (buf, _) = buffer(input);
        Ok(CsvReader {
            buf,
            p: Parser {
                ctx,
                dialect,
                plan,
                pending_names,
                delimiter,
                expect_header,
                skip_version_header,
                time_unit,
                line: 0,
                fields: Vec::with_capacity(16),
                names: Vec::new(),
                name_ids: FxHashMap::default(),
                scratch: Vec::new(),
                format,
            },
        })
    }
}

impl Parser {
    /// Reads the header row: resolves named columns (Strata CSV: every
    /// column it knows).
    fn header(&mut self, line: &[u8]) -> Result<(), TraceError> {
        let line = line.strip_prefix(b"#").unwrap_or(line);
        let text = String::from_utf8_lossy(line).into_owned();
        if self.delimiter.is_none() {
            self.delimiter = Some(detect_delimiter(line));
        }
        let delim = self.delimiter.unwrap_or(b',');
        let names: Vec<String> = split_owned(&text, delim);
        let mut map = self.pending_names.take().unwrap_or_default();
        if self.format == Format::StrataCsv {
            for (i, n) in names.iter().enumerate() {
                // Columns the model does not know are ignored.
                map.set_named(n, Column::Index(i));
            }
        }
        let find = |c: &Option<Column>| -> Result<Option<usize>, String> {
            match c {
                None => Ok(None),
                Some(Column::Index(i)) => Ok(Some(*i)),
                Some(Column::Name(n)) => names
                    .iter()
                    .position(|h| h.eq_ignore_ascii_case(n))
                    .map(Some)
                    .ok_or_else(|| {
                        format!(
                            "the header has no column {n:?} (it has {})",
                            names.join(", ")
                        )
                    }),
            }
        };
        let resolve = |c: &Option<Column>| find(c).map_err(|r| self.ctx.format(r));
        self.plan = Plan {
            time: resolve(&map.time)?,
            op: resolve(&map.op)?,
            object: resolve(&map.object)?,
            size: resolve(&map.size)?,
            workload: resolve(&map.workload)?,
            workload2: None,
            offset: resolve(&map.offset)?,
            length: resolve(&map.length)?,
            create_time: resolve(&map.create_time)?,
            tier: resolve(&map.tier)?,
            latency: resolve(&map.latency_us)?,
            hint: resolve(&map.hint)?,
            next_access: resolve(&map.next_access)?,
        };
        if self.plan.object.is_none() {
            return Err(self.ctx.format(format!(
                "the header row ({}) names no object column (object, key, id, obj_id or lbn)",
                names.join(", ")
            )));
        }
        Ok(())
    }

    fn workload_id(&mut self, name: &[u8], record: u64) -> Result<u32, TraceError> {
        if let Some(&id) = self.name_ids.get(name) {
            return Ok(id);
        }
        let id = self.names.len() as u32;
        let s = std::str::from_utf8(name)
            .map_err(|_| self.ctx.bad(record, "workload name is not UTF-8"))?
            .to_string();
        self.names.push(s);
        self.name_ids.insert(name.to_vec(), id);
        Ok(id)
    }

    /// Parses one data line into a request.
    fn parse(&mut self, line: &[u8], record: u64) -> Result<Request, TraceError> {
        let delim = match self.delimiter {
            Some(d) => d,
            None => {
                let d = detect_delimiter(line);
                self.delimiter = Some(d);
                d
            }
        };
        let need = self.plan.max_index() + 1;
        let mut fields = std::mem::take(&mut self.fields);
        split(line, delim, need, &mut fields);
        let r = if fields.len() < need {
            Err(self.bad(
                record,
                format!("has {} field(s), {} needed", fields.len(), need),
            ))
        } else {
            self.fields_to_request(line, &fields, record)
        };
        self.fields = fields;
        r
    }

    fn fields_to_request(
        &mut self,
        line: &[u8],
        fields: &[(usize, usize)],
        record: u64,
    ) -> Result<Request, TraceError> {
        let plan = self.plan;
        let f = |i: usize| -> &[u8] {
            let (a, b) = fields[i];
            &line[a..b]
        };
        let time = match plan.time {
            None => (record - 1) as f64,
            Some(i) => {
                if self.dialect == Dialect::Msr {
                    let ft = parse_u64(f(i)).ok_or_else(|| {
                        self.bad(record, format!("bad filetime {:?}", lossy(f(i))))
                    })?;
                    (ft as i128 - FILETIME_UNIX_EPOCH) as f64 / 1e7
                } else {
                    parse_f64(f(i))
                        .ok_or_else(|| self.bad(record, format!("bad time {:?}", lossy(f(i)))))?
                        * self.time_unit
                }
            }
        };
        let op = match plan.op {
            None => Op::Get,
            Some(i) => {
                let v = f(i);
                let op = if self.dialect == Dialect::CloudPhysics {
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(|s| u32::from_str_radix(s.trim_start_matches("0x"), 16).ok())
                        .and_then(scsi_op)
                } else if let Some(code) = parse_u64(v) {
                    libcachesim_op(code.min(u32::MAX as u64) as u32)
                } else {
                    std::str::from_utf8(v).ok().and_then(Op::parse)
                };
                op.ok_or_else(|| self.bad(record, format!("unknown op {:?}", lossy(v))))?
            }
        };
        let size = match plan.size {
            None => 1,
            Some(i) => parse_u64(f(i))
                .ok_or_else(|| self.bad(record, format!("bad size {:?}", lossy(f(i)))))?,
        };
        let mut workload = 0;
        if let Some(i) = plan.workload {
            let v = f(i);
            if let Some(j) = plan.workload2 {
                let mut name = std::mem::take(&mut self.scratch);
                name.clear();
                name.extend_from_slice(v);
                name.push(b'_');
                name.extend_from_slice(f(j));
                let r = self.workload_id(&name, record);
                self.scratch = name;
                workload = r?;
            } else if let Some(n) = parse_u64(v) {
                workload = u32::try_from(n)
                    .map_err(|_| self.bad(record, format!("workload id {n} is over 2^32")))?;
            } else if !v.is_empty() {
                let v = v.to_vec();
                workload = self.workload_id(&v, record)?;
            }
        }
        let object = {
            let i = plan.object.unwrap_or(0);
            let v = f(i);
            if v.is_empty() {
                return Err(self.bad(record, "empty object id".into()));
            }
            let id = parse_u64(v).unwrap_or_else(|| hash_object_id(v));
            if self.dialect == Dialect::Msr {
                (workload as u64) << 56 | (id & ((1 << 56) - 1))
            } else {
                id
            }
        };
        let mut r = Request::new(time, op, object, workload, size);
        let opt_u64 = |i: Option<usize>, what: &str| -> Result<Option<u64>, TraceError> {
            match i {
                None => Ok(None),
                Some(i) if f(i).is_empty() => Ok(None),
                Some(i) => parse_u64(f(i))
                    .map(Some)
                    .ok_or_else(|| self.bad(record, format!("bad {what} {:?}", lossy(f(i))))),
            }
        };
        r.offset = opt_u64(plan.offset, "offset")?;
        r.length = opt_u64(plan.length, "length")?;
        if let Some(l) = opt_u64(plan.latency, "latency")? {
            let us = if self.dialect == Dialect::Msr {
                l / 10
            } else {
                l
            };
            r.latency_us = Some(us.min(u32::MAX as u64) as u32);
        }
        if let Some(i) = plan.next_access {
            let v = f(i);
            r.next_access = match parse_u64(v) {
                Some(n) if n < i64::MAX as u64 => Some(n),
                Some(_) => None,
                None if v == b"-1" || v.is_empty() => None,
                None => return Err(self.bad(record, format!("bad next access {:?}", lossy(v)))),
            };
        }
        if let Some(i) = plan.create_time {
            if !f(i).is_empty() {
                r.create_time = Some(
                    parse_f64(f(i)).ok_or_else(|| {
                        self.bad(record, format!("bad create_time {:?}", lossy(f(i))))
                    })? * self.time_unit,
                );
            }
        }
        if let Some(i) = plan.tier {
            let v = f(i);
            if !v.is_empty() {
                r.tier = Some(
                    std::str::from_utf8(v)
                        .ok()
                        .and_then(Tier::parse)
                        .ok_or_else(|| self.bad(record, format!("unknown tier {:?}", lossy(v))))?,
                );
            }
        }
        if let Some(i) = plan.hint {
            let v = f(i);
            if !v.is_empty() {
                r.cache_hint = Some(match v.to_ascii_lowercase().as_slice() {
                    b"1" | b"true" | b"yes" | b"admit" | b"cache" => true,
                    b"0" | b"false" | b"no" | b"bypass" | b"nocache" => false,
                    _ => {
                        return Err(
                            self.bad(record, format!("bad hint {:?} (true/false)", lossy(v)))
                        )
                    }
                });
            }
        }
        Ok(r)
    }

    fn bad(&self, record: u64, reason: String) -> TraceError {
        self.ctx
            .bad(record, format!("line {}: {reason}", self.line))
    }

    /// Handles one line; pushes a request for a data line.
    #[inline]
    fn line(&mut self, line: &[u8], out: &mut Vec<Request>) -> Result<(), TraceError> {
        self.line += 1;
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if self.dialect == Dialect::Text {
            let t = trim(line);
            if t.is_empty() {
                return Ok(());
            }
            let record = self.ctx.records + 1;
            let id = parse_u64(t).unwrap_or_else(|| hash_object_id(t));
            out.push(Request::new((record - 1) as f64, Op::Get, id, 0, 1));
            self.ctx.records = record;
            return Ok(());
        }
        if self.expect_header {
            if trim(line).is_empty() {
                return Ok(());
            }
            self.expect_header = false;
            return self.header(line);
        }
        if line.first() == Some(&b'#') || trim(line).is_empty() {
            return Ok(());
        }
        if self.skip_version_header {
            self.skip_version_header = false;
            if line.starts_with(b"version") {
                return Ok(());
            }
        }
        let record = self.ctx.records + 1;
        let r = self.parse(line, record)?;
        out.push(r);
        self.ctx.records = record;
        Ok(())
    }
}

/// The longest line a text trace may have (1 MiB; a trace's lines are
/// tens of bytes).
pub const MAX_LINE: usize = 1 << 20;

impl Source for CsvReader {
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let start = out.len();
        while out.len() - start < max {
            let avail = self.buf.available();
            match memchr::memchr(b'\n', avail) {
                Some(n) => {
                    // Parsed in place, no copy.
                    let r = self.p.line(&avail[..n], out);
                    self.buf.consume(n + 1);
                    r?;
                }
                None => {
                    // A line is bounded: a file of one endless line (a
                    // 284 KiB zstd frame can hold 8 GiB) is refused, not
                    // buffered whole.
                    if avail.len() >= MAX_LINE {
                        return Err(self.p.ctx.bad(
                            self.p.ctx.records + 1,
                            format!(
                                "line {}: longer than {MAX_LINE} bytes (no newline in them): not a line of a trace",
                                self.p.line + 1
                            ),
                        ));
                    }
                    if self.buf.refill().map_err(|e| self.p.ctx.io(e))? {
                        continue;
                    }
                    let rest = self.buf.available().len();
                    if rest == 0 {
                        break;
                    }
                    // The last line has no newline.
                    let line = self.buf.available().to_vec();
                    self.buf.consume(rest);
                    self.p.line(&line, out)?;
                }
            }
        }
        Ok(out.len() - start)
    }

    fn workload_names(&self) -> &[String] {
        &self.p.names
    }
}

fn lossy(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.len() > 40 {
        format!("{}...", &s.chars().take(40).collect::<String>())
    } else {
        s.into_owned()
    }
}

#[inline]
fn trim(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// The delimiter of a line: the most frequent of `, \t ; |`, else blanks.
pub(crate) fn detect_delimiter(line: &[u8]) -> u8 {
    let mut best = (0, b' ');
    for d in [b',', b'\t', b';', b'|'] {
        let n = line.iter().filter(|&&c| c == d).count();
        if n > best.0 {
            best = (n, d);
        }
    }
    best.1
}

/// Splits `line` into at most `need` trimmed field ranges (quotes removed).
/// `b' '` splits on runs of blanks.
#[inline]
fn split(line: &[u8], delim: u8, need: usize, out: &mut Vec<(usize, usize)>) {
    out.clear();
    let n = line.len();
    let mut i = 0;
    if delim == b' ' {
        while out.len() < need {
            while i < n && (line[i] == b' ' || line[i] == b'\t') {
                i += 1;
            }
            if i >= n {
                break;
            }
            let s = i;
            while i < n && line[i] != b' ' && line[i] != b'\t' {
                i += 1;
            }
            out.push((s, i));
        }
        return;
    }
    loop {
        while i < n && (line[i] == b' ' || (line[i] == b'\t' && delim != b'\t')) {
            i += 1;
        }
        let (s, e, next);
        if i < n && line[i] == b'"' {
            // A quoted field: up to the closing quote ("" inside is kept).
            s = i + 1;
            let mut j = s;
            while j < n && !(line[j] == b'"' && line.get(j + 1) != Some(&b'"')) {
                j += if line[j] == b'"' { 2 } else { 1 };
            }
            e = j.min(n);
            next = memchr::memchr(delim, &line[e.min(n)..]).map(|k| e + k);
        } else {
            next = memchr::memchr(delim, &line[i..]).map(|k| i + k);
            s = i;
            let mut end = next.unwrap_or(n);
            while end > s && (line[end - 1] == b' ' || line[end - 1] == b'\t') {
                end -= 1;
            }
            e = end;
        }
        out.push((s, e));
        if out.len() >= need {
            return;
        }
        match next {
            Some(k) => i = k + 1,
            None => return,
        }
    }
}

fn split_owned(line: &str, delim: u8) -> Vec<String> {
    let mut r = Vec::new();
    split(line.as_bytes(), delim, usize::MAX, &mut r);
    r.into_iter().map(|(a, b)| line[a..b].to_string()).collect()
}

/// Parses a decimal number: digits only is the fast path; anything else
/// goes through the standard parser (fractions, exponents, signs).
#[inline]
fn parse_f64(s: &[u8]) -> Option<f64> {
    if let Some(v) = parse_u64(s) {
        return Some(v as f64);
    }
    let v: f64 = std::str::from_utf8(s).ok()?.parse().ok()?;
    v.is_finite().then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(line: &str, d: u8) -> Vec<String> {
        split_owned(line, d)
    }

    #[test]
    fn splits_trimmed_and_quoted_fields() {
        assert_eq!(fields("0, 1305, 737, 13", b','), ["0", "1305", "737", "13"]);
        assert_eq!(fields("a,\"b,c\", d", b','), ["a", "b,c", "d"]);
        assert_eq!(fields("  a  b\tc ", b' '), ["a", "b", "c"]);
        assert_eq!(fields("a,,b", b','), ["a", "", "b"]);
        assert_eq!(fields("x\t y", b'\t'), ["x", "y"]);
        assert_eq!(detect_delimiter(b"a;b;c"), b';');
        assert_eq!(detect_delimiter(b"a b"), b' ');
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_f64(b"12"), Some(12.0));
        assert_eq!(parse_f64(b"1.5"), Some(1.5));
        assert_eq!(parse_f64(b"-2e3"), Some(-2000.0));
        assert_eq!(parse_f64(b"nan"), None);
        assert_eq!(parse_f64(b"x"), None);
    }
}
