//! Strata's own binary trace format, version 1 (docs/trace-format.md is
//! the byte-by-byte description; keep the two in step).

use super::source::{buffer, Ctx, Source};
use crate::input::{Buf, Input};
use crate::varint::{unzigzag, Cursor};
use crate::{Op, Request, Tier, TraceError};

/// The file magic.
pub(crate) const MAGIC: [u8; 8] = *b"STRTRACE";
/// The format version this code writes and reads.
pub(crate) const VERSION: u16 = 1;
/// File header length.
pub(crate) const HEADER_LEN: usize = 32;
/// Frame header length.
pub(crate) const FRAME_LEN: usize = 16;
/// Largest payload a frame may have.
pub(crate) const MAX_PAYLOAD: usize = 64 << 20;
/// Workload ids a names frame may name: the name table is indexed by id,
/// so a frame of a few bytes naming id 2^24 would make it 400 MB (issue
/// 34: a trace reader bounds what one record makes it allocate). Writers
/// name the store's workloads, which a tier plan bounds far below this.
pub(crate) const MAX_NAMED_WORKLOADS: usize = 1 << 16;

/// Frame kinds.
pub(crate) const FRAME_RECORDS: u8 = 1;
pub(crate) const FRAME_NAMES: u8 = 2;
pub(crate) const FRAME_END: u8 = 0xff;

/// Record flag bits.
pub(crate) const F_OP: u8 = 0b0000_0011;
pub(crate) const F_TIER_SHIFT: u8 = 2;
pub(crate) const F_WORKLOAD: u8 = 1 << 4;
pub(crate) const F_DELTA: u8 = 1 << 5;
pub(crate) const F_RANGE: u8 = 1 << 6;
pub(crate) const F_EXT: u8 = 1 << 7;
/// Extension byte bits.
pub(crate) const X_LATENCY: u8 = 1;
pub(crate) const X_CREATE: u8 = 1 << 1;
pub(crate) const X_HINT: u8 = 1 << 2;
pub(crate) const X_HINT_VALUE: u8 = 1 << 3;
pub(crate) const X_NEXT: u8 = 1 << 4;
pub(crate) const X_RESERVED: u8 = 0b1110_0000;

/// The CRC-32C of a frame: over its header's first 12 bytes, then its payload.
pub(crate) fn frame_crc(head12: &[u8], payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(head12), payload)
}

pub(crate) struct StrataReader {
    buf: Buf,
    ctx: Ctx,
    /// Converts ticks to seconds: divide by this when exact, else multiply.
    ticks_per_sec: f64,
    divide: bool,
    names: Vec<String>,
    /// The current records frame's payload and the decoding state in it.
    block: Vec<u8>,
    at: usize,
    left: u32,
    /// 1-based number of the first record of the current block.
    block_first: u64,
    prev_time: i64,
    /// `prev_time` in seconds, when `time_valid`.
    prev_seconds: f64,
    time_valid: bool,
    prev_object: u64,
    workload: u32,
    ended: bool,
}

impl StrataReader {
    pub fn new(input: Input) -> Result<StrataReader, TraceError> {
        let (mut buf, ctx) = buffer(input);
        if !buf.ensure(HEADER_LEN).map_err(|e| ctx.io(e))? {
            return Err(ctx.format(format!(
                "Strata trace header is truncated ({} of {HEADER_LEN} bytes)",
                buf.available().len()
            )));
        }
        let h = &buf.available()[..HEADER_LEN];
        if h[..8] != MAGIC {
            return Err(ctx.format("not a Strata trace: no STRTRACE magic"));
        }
        let crc = u32::from_le_bytes([h[28], h[29], h[30], h[31]]);
        if crc32c::crc32c(&h[..28]) != crc {
            return Err(ctx.format("Strata trace header checksum mismatch (corrupt header)"));
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION {
            return Err(ctx.format(format!(
                "Strata trace version {version} is not supported (this build reads version {VERSION})"
            )));
        }
        let flags = u16::from_le_bytes([h[10], h[11]]);
        if flags != 0 {
            return Err(ctx.format(format!("unknown Strata trace header flags 0x{flags:04x}")));
        }
        let unit_ns = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
        if unit_ns == 0 {
            return Err(ctx.format("Strata trace time unit is 0 ns"));
        }
        buf.consume(HEADER_LEN);
        let divide = 1_000_000_000 % unit_ns == 0;
        let ticks_per_sec = 1e9 / unit_ns as f64;
        Ok(StrataReader {
            buf,
            ctx,
            ticks_per_sec: if divide {
                ticks_per_sec
            } else {
                unit_ns as f64 / 1e9
            },
            divide,
            names: Vec::new(),
            block: Vec::new(),
            at: 0,
            left: 0,
            block_first: 1,
            prev_time: 0,
            prev_seconds: 0.0,
            time_valid: false,
            prev_object: 0,
            workload: 0,
            ended: false,
        })
    }

    /// Reads frames until a records frame with records is current; false at
    /// the end frame.
    fn next_block(&mut self) -> Result<bool, TraceError> {
        loop {
            if self.ended {
                return Ok(false);
            }
            let next = self.ctx.records + 1;
            if !self.buf.ensure(FRAME_LEN).map_err(|e| self.ctx.io(e))? {
                let have = self.buf.available().len();
                if have == 0 {
                    return Err(self.ctx.bad(
                        next,
                        format!(
                            "the trace ends without its end frame after {} records: the writer did not finish, or the file was cut",
                            self.ctx.records
                        ),
                    ));
                }
                return Err(self.ctx.truncated(next, have, FRAME_LEN));
            }
            let h = &self.buf.available()[..FRAME_LEN];
            let kind = h[0];
            let len = u32::from_le_bytes([h[4], h[5], h[6], h[7]]) as usize;
            let count = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
            let crc = u32::from_le_bytes([h[12], h[13], h[14], h[15]]);
            let mut head12 = [0u8; 12];
            head12.copy_from_slice(&h[..12]);
            if h[1..4] != [0, 0, 0] || !matches!(kind, FRAME_RECORDS | FRAME_NAMES | FRAME_END) {
                return Err(self.ctx.bad(
                    next,
                    format!(
                        "corrupt frame header (kind {kind}) at byte {}",
                        self.buf.offset()
                    ),
                ));
            }
            if len > MAX_PAYLOAD {
                return Err(self.ctx.bad(
                    next,
                    format!(
                        "frame payload of {len} bytes is over the 64 MiB limit (corrupt frame)"
                    ),
                ));
            }
            if !self
                .buf
                .ensure(FRAME_LEN + len)
                .map_err(|e| self.ctx.io(e))?
            {
                let have = self.buf.available().len();
                return Err(self.ctx.truncated(next, have, FRAME_LEN + len));
            }
            let payload = &self.buf.available()[FRAME_LEN..FRAME_LEN + len];
            if frame_crc(&head12, payload) != crc {
                return Err(self.ctx.bad(next, "frame checksum mismatch (corrupt data)"));
            }
            match kind {
                FRAME_RECORDS => {
                    if len < 8 {
                        return Err(self
                            .ctx
                            .bad(next, "records frame shorter than its base time"));
                    }
                    self.block.clear();
                    self.block.extend_from_slice(payload);
                    self.buf.consume(FRAME_LEN + len);
                    let mut base = [0u8; 8];
                    base.copy_from_slice(&self.block[..8]);
                    self.prev_time = i64::from_le_bytes(base);
                    self.time_valid = false;
                    self.prev_object = 0;
                    self.workload = 0;
                    self.at = 8;
                    self.left = count;
                    self.block_first = next;
                    if count > 0 {
                        return Ok(true);
                    }
                }
                FRAME_NAMES => {
                    let mut c = Cursor { b: payload, i: 0 };
                    let mut names = Vec::new();
                    for _ in 0..count {
                        let id = c.varint().filter(|&v| v <= u32::MAX as u64);
                        let n = c.varint();
                        let (Some(id), Some(n)) = (id, n) else {
                            return Err(self.ctx.bad(next, "corrupt workload name frame"));
                        };
                        let s =
                            c.b.get(c.i..c.i.saturating_add(n as usize))
                                .ok_or_else(|| self.ctx.bad(next, "corrupt workload name frame"))?;
                        c.i += n as usize;
                        let s = std::str::from_utf8(s)
                            .map_err(|_| self.ctx.bad(next, "workload name is not UTF-8"))?;
                        names.push((id as usize, s.to_string()));
                    }
                    self.buf.consume(FRAME_LEN + len);
                    for (id, s) in names {
                        if id >= self.names.len() {
                            if id >= MAX_NAMED_WORKLOADS {
                                return Err(self.ctx.bad(
                                    next,
                                    format!(
                                        "workload id {id} is past the {MAX_NAMED_WORKLOADS} a name table holds (corrupt frame)"
                                    ),
                                ));
                            }
                            self.names.resize(id + 1, String::new());
                        }
                        self.names[id] = s;
                    }
                }
                _ => {
                    if len < 8 {
                        return Err(self
                            .ctx
                            .bad(next, "end frame shorter than its record count"));
                    }
                    let mut t = [0u8; 8];
                    t.copy_from_slice(&payload[..8]);
                    let total = u64::from_le_bytes(t);
                    self.buf.consume(FRAME_LEN + len);
                    if total != self.ctx.records {
                        return Err(self.ctx.bad(
                            next,
                            format!(
                                "the end frame counts {total} records but the trace holds {}",
                                self.ctx.records
                            ),
                        ));
                    }
                    self.ended = true;
                    return Ok(false);
                }
            }
        }
    }
}

/// The running state of a block's decoding, kept in locals while a run of
/// records is decoded (fields of `self` would be reloaded after every push).
#[derive(Clone, Copy)]
struct State {
    at: usize,
    prev_time: i64,
    prev_seconds: f64,
    time_valid: bool,
    prev_object: u64,
    workload: u32,
    /// 0-based index of the record being decoded.
    index: u64,
    divide: bool,
    ticks_per_sec: f64,
}

impl State {
    #[inline(always)]
    fn seconds(&self, t: i64) -> f64 {
        if self.divide {
            t as f64 / self.ticks_per_sec
        } else {
            t as f64 * self.ticks_per_sec
        }
    }
}

/// Decodes one record at `s.at`; `None` if it is malformed.
#[inline(always)]
fn decode(block: &[u8], s: &mut State) -> Option<Request> {
    let mut c = Cursor { b: block, i: s.at };
    let flags = c.byte()?;
    let ext = if flags & F_EXT != 0 { c.byte()? } else { 0 };
    if ext & X_RESERVED != 0 {
        return None;
    }
    let op = match flags & F_OP {
        0 => Op::Get,
        1 => Op::Put,
        2 => Op::Delete,
        _ => return None,
    };
    let dt = unzigzag(c.varint()?);
    let t = s.prev_time.wrapping_add(dt);
    s.prev_time = t;
    // Requests often share a tick: convert only when the tick changes.
    if dt != 0 || !s.time_valid {
        s.time_valid = true;
        s.prev_seconds = s.seconds(t);
    }
    if flags & F_WORKLOAD != 0 {
        s.workload = u32::try_from(c.varint()?).ok()?;
    }
    let object = if flags & F_DELTA != 0 {
        s.prev_object
            .wrapping_add(unzigzag(c.varint_mixed()?) as u64)
    } else {
        c.u64le()?
    };
    s.prev_object = object;
    let size = c.varint()?;
    let mut r = Request::new(s.prev_seconds, op, object, s.workload, size);
    r.tier = match (flags >> F_TIER_SHIFT) & 3 {
        0 => None,
        1 => Some(Tier::Ram),
        2 => Some(Tier::Flash),
        _ => Some(Tier::Disk),
    };
    if flags & F_RANGE != 0 {
        r.offset = Some(c.varint()?);
        r.length = Some(c.varint()?);
    }
    if ext != 0 {
        if ext & X_LATENCY != 0 {
            r.latency_us = Some(u32::try_from(c.varint()?).ok()?);
        }
        if ext & X_CREATE != 0 {
            let ct = t.wrapping_sub(unzigzag(c.varint()?));
            r.create_time = Some(s.seconds(ct));
        }
        if ext & X_HINT != 0 {
            r.cache_hint = Some(ext & X_HINT_VALUE != 0);
        }
        if ext & X_NEXT != 0 {
            let n = (s.index as i64).wrapping_add(unzigzag(c.varint_mixed()?));
            r.next_access = u64::try_from(n).ok();
        }
    }
    s.at = c.i;
    s.index += 1;
    Some(r)
}

impl Source for StrataReader {
    fn fill(&mut self, out: &mut Vec<Request>, max: usize) -> Result<usize, TraceError> {
        let start = out.len();
        while out.len() - start < max {
            if self.left == 0 && !self.next_block()? {
                break;
            }
            let k = (self.left as usize).min(max - (out.len() - start));
            out.reserve(k);
            let mut st = State {
                at: self.at,
                prev_time: self.prev_time,
                prev_seconds: self.prev_seconds,
                time_valid: self.time_valid,
                prev_object: self.prev_object,
                workload: self.workload,
                index: self.ctx.records,
                divide: self.divide,
                ticks_per_sec: self.ticks_per_sec,
            };
            let block = &self.block[..];
            let mut bad = false;
            for _ in 0..k {
                match decode(block, &mut st) {
                    Some(r) => out.push(r),
                    None => {
                        bad = true;
                        break;
                    }
                }
            }
            self.at = st.at;
            self.prev_time = st.prev_time;
            self.prev_seconds = st.prev_seconds;
            self.time_valid = st.time_valid;
            self.prev_object = st.prev_object;
            self.workload = st.workload;
            self.ctx.records = st.index;
            if bad {
                return Err(self.ctx.bad(
                    self.ctx.records + 1,
                    format!(
                        "corrupt record at byte {} of the block that starts at record {}",
                        self.at, self.block_first
                    ),
                ));
            }
            self.left -= k as u32;
            if self.left == 0 && self.at != self.block.len() {
                return Err(self.ctx.bad(
                    self.ctx.records,
                    format!(
                        "{} stray bytes after the last record of the block that starts at record {}",
                        self.block.len() - self.at,
                        self.block_first
                    ),
                ));
            }
        }
        Ok(out.len() - start)
    }

    fn workload_names(&self) -> &[String] {
        &self.names
    }
}
