//! Fixed-size binary records: libCacheSim oracleGeneral and LCS, and
//! CloudPhysics vscsi.

use super::source::{buffer, Ctx, Source};
use super::{libcachesim_op, scsi_op};
use crate::input::{read_full, Buf, Compression, Input};
use crate::{Op, Request, TraceError};

/// The LCS header's magic (little-endian u64 at offset 0).
pub(crate) const LCS_MAGIC: u64 = 0x1234_5678_9abc_def0;
/// The LCS header's size in bytes.
pub(crate) const LCS_HEADER: usize = 8192;

#[derive(Clone, Copy, Debug)]
enum Layout {
    /// `<IQIq`: oracleGeneral and LCS v1.
    OracleGeneral,
    /// `<IQIIq`: LCS v2 (op in the low 8 bits, tenant in the high 24).
    LcsV2,
    /// `<IQqIIq` + `features` u32s: LCS v3..v8.
    LcsV3 { features: usize },
    /// vscsi v1: `u32 sn, u32 len, u32 nSG, u16 cmd, u16 ver, u64 lbn, u64 ts`.
    VscsiV1,
    /// vscsi v2: `u16 cmd, u16 ver, u32 sn, u32 len, u32 nSG, u64 lbn, u64 ts, u64 rt`.
    VscsiV2,
}

impl Layout {
    fn size(self) -> usize {
        match self {
            Layout::OracleGeneral => 24,
            Layout::LcsV2 => 28,
            Layout::LcsV3 { features } => 36 + 4 * features,
            Layout::VscsiV1 => 32,
            Layout::VscsiV2 => 48,
        }
    }
}

#[inline(always)]
fn u16le(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
#[inline(always)]
fn u32le(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
#[inline(always)]
fn u64le(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// libCacheSim writes -1 or INT64_MAX for "never requested again".
#[inline(always)]
fn next_access(v: u64) -> Option<u64> {
    let v = v as i64;
    if v < 0 || v == i64::MAX {
        None
    } else {
        Some(v as u64)
    }
}

/// The vscsi version of a record's `ver` field (its high byte).
fn vscsi_version(head: &[u8]) -> Option<Layout> {
    // As libCacheSim does: the first two records must agree; v2 first.
    let all = |layout: Layout, at: usize, want: u16| {
        let size = layout.size();
        head.len() >= 2 * size && (0..2).all(|i| u16le(head, i * size + at) >> 8 == want)
    };
    if all(Layout::VscsiV2, 2, 2) {
        Some(Layout::VscsiV2)
    } else if all(Layout::VscsiV1, 14, 1) {
        Some(Layout::VscsiV1)
    } else {
        None
    }
}

/// Whether `head` looks like vscsi records (used by detection).
pub(crate) fn looks_like_vscsi(head: &[u8]) -> bool {
    let Some(layout) = vscsi_version(head) else {
        return false;
    };
    let size = layout.size();
    let cmd_at = if matches!(layout, Layout::VscsiV1) {
        12
    } else {
        0
    };
    let n = (head.len() / size).min(64);
    n >= 2
        && (0..n).all(|i| {
            scsi_op(u16le(head, i * size + cmd_at) as u32).is_some()
                && u16le(head, i * size + cmd_at + 2) >> 8 == if size == 32 { 1 } else { 2 }
        })
}

/// Whether `head` looks like oracleGeneral records: next_access is "never"
/// or later than the record itself, and times do not run backwards much.
pub(crate) fn looks_like_oracle(head: &[u8]) -> bool {
    let n = (head.len() / 24).min(2048);
    if n < 2 {
        return false;
    }
    let mut prev_t = u32le(head, 0);
    for i in 0..n {
        let r = &head[i * 24..i * 24 + 24];
        let t = u32le(r, 0);
        if t < prev_t {
            return false;
        }
        prev_t = t;
        let na = u64le(r, 16) as i64;
        if !(na == -1 || na == i64::MAX || na > i as i64) {
            return false;
        }
    }
    true
}

pub(crate) struct FixedReader {
    buf: Buf,
    ctx: Ctx,
    layout: Layout,
    len_hint: Option<u64>,
    /// LCS: the header's request count, checked at the end of the file so
    /// a file cut at a record boundary is still reported.
    expect: Option<u64>,
}

impl FixedReader {
    pub fn oracle_general(input: Input) -> FixedReader {
        let len_hint = (input.compression == Compression::None).then_some(input.file_len / 24);
        let (buf, ctx) = buffer(input);
        FixedReader {
            buf,
            ctx,
            layout: Layout::OracleGeneral,
            len_hint,
            expect: None,
        }
    }

    pub fn lcs(mut input: Input) -> Result<FixedReader, TraceError> {
        let ctx = Ctx::new(&input.path);
        let mut header = vec![0u8; LCS_HEADER];
        let n = read_full(&mut *input.reader, &mut header).map_err(|e| ctx.io(e))?;
        if n < 16 || u64le(&header, 0) != LCS_MAGIC {
            return Err(ctx.format("not an LCS trace: no 0x123456789abcdef0 magic at offset 0"));
        }
        if n < LCS_HEADER {
            return Err(ctx.format(format!(
                "LCS header is truncated ({n} of {LCS_HEADER} bytes)"
            )));
        }
        let version = u64le(&header, 8);
        let layout = match version {
            1 => Layout::OracleGeneral,
            2 => Layout::LcsV2,
            3 => Layout::LcsV3 { features: 0 },
            4 => Layout::LcsV3 { features: 1 },
            5 => Layout::LcsV3 { features: 2 },
            6 => Layout::LcsV3 { features: 4 },
            7 => Layout::LcsV3 { features: 8 },
            8 => Layout::LcsV3 { features: 16 },
            v => return Err(ctx.format(format!("LCS version {v} is not supported (1 to 8 are)"))),
        };
        // The trace statistics start at offset 16: stat version, n_req, ...
        let n_req = u64le(&header, 24) as i64;
        let len_hint = (n_req >= 0).then_some(n_req as u64);
        let (buf, _) = buffer(input);
        Ok(FixedReader {
            buf,
            ctx,
            layout,
            len_hint,
            expect: len_hint,
        })
    }

    pub fn vscsi(input: Input) -> Result<FixedReader, TraceError> {
        let ctx = Ctx::new(&input.path);
        let layout = vscsi_version(&input.head).ok_or_else(|| {
            ctx.format("not a vscsi trace: the first two records carry no version 1 or 2 in their ver field")
        })?;
        let len_hint = (input.compression == Compression::None)
            .then_some(input.file_len / layout.size() as u64);
        let (buf, _) = buffer(input);
        Ok(FixedReader {
            buf,
            ctx,
            layout,
            len_hint,
            expect: None,
        })
    }

    #[inline(always)]
    fn decode(&self, r: &[u8], record: u64) -> Result<Request, TraceError> {
        Ok(match self.layout {
            Layout::OracleGeneral => {
                let mut q = Request::new(
                    u32le(r, 0) as f64,
                    Op::Get,
                    u64le(r, 4),
                    0,
                    u32le(r, 12) as u64,
                );
                q.next_access = next_access(u64le(r, 16));
                q
            }
            Layout::LcsV2 => {
                let opt = u32le(r, 16);
                let op = libcachesim_op(opt & 0xff).ok_or_else(|| {
                    self.ctx
                        .bad(record, format!("unknown op code {}", opt & 0xff))
                })?;
                let mut q = Request::new(
                    u32le(r, 0) as f64,
                    op,
                    u64le(r, 4),
                    opt >> 8,
                    u32le(r, 12) as u64,
                );
                q.next_access = next_access(u64le(r, 20));
                q
            }
            Layout::LcsV3 { .. } => {
                let size = u64le(r, 12) as i64;
                if size < 0 {
                    return Err(self.ctx.bad(record, format!("negative object size {size}")));
                }
                let opt = u32le(r, 20);
                let op = libcachesim_op(opt & 0xff).ok_or_else(|| {
                    self.ctx
                        .bad(record, format!("unknown op code {}", opt & 0xff))
                })?;
                let mut q =
                    Request::new(u32le(r, 0) as f64, op, u64le(r, 4), opt >> 8, size as u64);
                q.next_access = next_access(u64le(r, 28));
                q
            }
            Layout::VscsiV1 | Layout::VscsiV2 => {
                let (cmd, len, lbn, ts) = if matches!(self.layout, Layout::VscsiV1) {
                    (u16le(r, 12), u32le(r, 4), u64le(r, 16), u64le(r, 24))
                } else {
                    (u16le(r, 0), u32le(r, 8), u64le(r, 16), u64le(r, 24))
                };
                let op = scsi_op(cmd as u32).ok_or_else(|| {
                    self.ctx
                        .bad(record, format!("unknown SCSI command 0x{cmd:02x}"))
                })?;
                // vscsi timestamps are microseconds.
                let mut q = Request::new(ts as f64 / 1e6, op, lbn, 0, len as u64);
                if matches!(self.layout, Layout::VscsiV2) {
                    q.latency_us = Some(u64le(r, 40).min(u32::MAX as u64) as u32);
                }
                q
            }
        })
    }
}

impl Source for FixedReader {
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let size = self.layout.size();
        let start = out.len();
        while out.len() - start < max {
            let avail = self.buf.available().len();
            if avail < size {
                if self.buf.refill().map_err(|e| self.ctx.io(e))? {
                    continue;
                }
                if avail > 0 {
                    return Err(self.ctx.truncated(self.ctx.records + 1, avail, size));
                }
                if let Some(want) = self.expect.take() {
                    if want != self.ctx.records {
                        return Err(self.ctx.bad(
                            self.ctx.records + 1,
                            format!(
                                "the LCS header counts {want} requests but the file ends after {}",
                                self.ctx.records
                            ),
                        ));
                    }
                }
                break;
            }
            let k = (avail / size).min(max - (out.len() - start));
            out.reserve(k);
            let mut err = None;
            {
                let bytes = &self.buf.available()[..k * size];
                if let Layout::OracleGeneral = self.layout {
                    // The hot path: no error is possible.
                    out.extend(bytes.chunks_exact(24).map(|r| {
                        let mut q = Request::new(
                            u32le(r, 0) as f64,
                            Op::Get,
                            u64le(r, 4),
                            0,
                            u32le(r, 12) as u64,
                        );
                        q.next_access = next_access(u64le(r, 16));
                        q
                    }));
                } else if let Layout::VscsiV1 = self.layout {
                    // The other hot path: the error check is one match.
                    for (i, r) in bytes.chunks_exact(32).enumerate() {
                        let cmd = u16le(r, 12);
                        let Some(op) = scsi_op(cmd as u32) else {
                            let e = self.ctx.bad(
                                self.ctx.records + i as u64 + 1,
                                format!("unknown SCSI command 0x{cmd:02x}"),
                            );
                            err = Some((i, e));
                            break;
                        };
                        out.push(Request::new(
                            u64le(r, 24) as f64 / 1e6,
                            op,
                            u64le(r, 16),
                            0,
                            u32le(r, 4) as u64,
                        ));
                    }
                } else {
                    for (i, r) in bytes.chunks_exact(size).enumerate() {
                        match self.decode(r, self.ctx.records + i as u64 + 1) {
                            Ok(q) => out.push(q),
                            Err(e) => {
                                err = Some((i, e));
                                break;
                            }
                        }
                    }
                }
            }
            if let Some((i, e)) = err {
                self.buf.consume(i * size);
                self.ctx.records += i as u64;
                return Err(e);
            }
            self.buf.consume(k * size);
            self.ctx.records += k as u64;
        }
        Ok(out.len() - start)
    }

    fn len_hint(&self) -> Option<u64> {
        self.len_hint
    }
}
