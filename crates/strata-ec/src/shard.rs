//! Shard files, encoding, range reads, rebuild and scrub.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use reed_solomon_simd::{ReedSolomonDecoder, ReedSolomonEncoder};

/// Bytes of a shard file's header.
pub const HEADER_LEN: usize = 64;
/// The unit of shard lengths and decoded ranges (the coder works on
/// 64-byte blocks of each shard; a range is decoded block-aligned).
pub const BLOCK: u64 = 64;
/// Bytes encoded per shard at a time (bounds memory to (K+M) × this).
const CHUNK: u64 = 1 << 20;
const MAGIC: [u8; 4] = *b"SEC1";
const VERSION: u8 = 1;

/// Why an erasure-coding step failed.
#[derive(Debug, thiserror::Error)]
pub enum EcError {
    /// A code Strata does not use.
    #[error("bad code {k}+{m}: K and M at least 1, K+M at most 32")]
    BadCode {
        /// Data shards.
        k: usize,
        /// Parity shards.
        m: usize,
    },
    /// File I/O.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The error.
        source: std::io::Error,
    },
    /// A shard file whose header or payload fails its checksum, or that
    /// belongs to another stripe or code.
    #[error("{path}: {reason}")]
    BadShard {
        /// The file.
        path: String,
        /// What is wrong.
        reason: String,
    },
    /// Fewer than K shards are left.
    #[error("only {have} shards of {k} needed survive")]
    TooFewShards {
        /// Shards available.
        have: usize,
        /// Shards needed.
        k: usize,
    },
    /// The Reed-Solomon coder refused.
    #[error("reed-solomon: {0}")]
    Coder(String),
}

type Result<T> = std::result::Result<T, EcError>;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> EcError + '_ {
    move |source| EcError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn coder(e: reed_solomon_simd::Error) -> EcError {
    EcError::Coder(e.to_string())
}

/// A Reed-Solomon code: K data shards and M parity shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Code {
    /// Data shards.
    pub k: usize,
    /// Parity shards.
    pub m: usize,
}

impl Code {
    /// The code K+M (1 ≤ K, 1 ≤ M, K+M ≤ 32).
    pub fn new(k: usize, m: usize) -> Result<Code> {
        if k == 0 || m == 0 || k + m > 32 {
            return Err(EcError::BadCode { k, m });
        }
        Ok(Code { k, m })
    }

    /// Stored bytes per logical byte, (K+M)/K.
    pub fn overhead(&self) -> f64 {
        (self.k + self.m) as f64 / self.k as f64
    }

    /// The shard length for `data_len` bytes: ⌈data_len / K⌉ rounded up to
    /// [`BLOCK`] (at least one block).
    pub fn shard_len(&self, data_len: u64) -> u64 {
        let per = data_len.div_ceil(self.k as u64).max(1);
        per.div_ceil(BLOCK) * BLOCK
    }
}

/// The header of a shard file (docs/erasure-coding.md, "Shard files").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardHeader {
    /// The code.
    pub code: Code,
    /// This shard's index: `0..K` data, `K..K+M` parity.
    pub index: usize,
    /// The stripe (the segment it encodes).
    pub stripe: u64,
    /// Bytes of the encoded segment.
    pub data_len: u64,
    /// Payload bytes of every shard of the stripe.
    pub shard_len: u64,
    /// CRC-32C of this shard's payload.
    pub payload_crc: u32,
}

impl ShardHeader {
    fn encode(&self) -> [u8; HEADER_LEN] {
        let mut h = [0u8; HEADER_LEN];
        h[0..4].copy_from_slice(&MAGIC);
        h[4] = VERSION;
        h[5] = self.code.k as u8;
        h[6] = self.code.m as u8;
        h[7] = self.index as u8;
        h[8..16].copy_from_slice(&self.stripe.to_le_bytes());
        h[16..24].copy_from_slice(&self.data_len.to_le_bytes());
        h[24..32].copy_from_slice(&self.shard_len.to_le_bytes());
        h[32..36].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32c::crc32c(&h[..60]);
        h[60..64].copy_from_slice(&crc.to_le_bytes());
        h
    }

    fn decode(h: &[u8], path: &Path) -> Result<ShardHeader> {
        let bad = |reason: &str| EcError::BadShard {
            path: path.display().to_string(),
            reason: reason.to_string(),
        };
        if h.len() < HEADER_LEN {
            return Err(bad("shorter than a shard header"));
        }
        let u64at = |i: usize| u64::from_le_bytes(h[i..i + 8].try_into().unwrap_or([0; 8]));
        let u32at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap_or([0; 4]));
        if h[0..4] != MAGIC {
            return Err(bad("not a shard file (bad magic)"));
        }
        if h[4] != VERSION {
            return Err(bad(&format!("shard format version {} is not 1", h[4])));
        }
        if crc32c::crc32c(&h[..60]) != u32at(60) {
            return Err(bad("header checksum mismatch"));
        }
        let code = Code::new(h[5] as usize, h[6] as usize).map_err(|e| bad(&e.to_string()))?;
        let index = h[7] as usize;
        if index >= code.k + code.m {
            return Err(bad("shard index out of the code"));
        }
        let shard_len = u64at(24);
        if shard_len == 0 || shard_len % BLOCK != 0 {
            return Err(bad("shard length not a positive multiple of 64"));
        }
        Ok(ShardHeader {
            code,
            index,
            stripe: u64at(8),
            data_len: u64at(16),
            shard_len,
            payload_crc: u32at(32),
        })
    }

    /// Reads the header of the shard file at `path`.
    pub fn read(path: &Path) -> Result<ShardHeader> {
        let f = File::open(path).map_err(io(path))?;
        let mut h = [0u8; HEADER_LEN];
        f.read_exact_at(&mut h, 0).map_err(io(path))?;
        ShardHeader::decode(&h, path)
    }
}

fn tmp_of(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_owned();
    s.push(".tmp");
    PathBuf::from(s)
}

fn sync_parent(p: &Path) -> Result<()> {
    if let Some(d) = p.parent() {
        let dir = if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        };
        strata_fs::sync_dir(dir).map_err(io(dir))?;
    }
    Ok(())
}

/// Shard files being written: temporary names until [`Writers::finish`].
struct Writers {
    files: Vec<(PathBuf, File, u32)>,
}

impl Writers {
    fn create(paths: &[&Path]) -> Result<Writers> {
        let mut files = Vec::new();
        for p in paths {
            let t = tmp_of(p);
            let f = strata_fs::create(&t).map_err(io(&t))?;
            strata_fs::write_all_at(&f, &[0u8; HEADER_LEN], 0).map_err(io(&t))?;
            files.push((p.to_path_buf(), f, 0u32));
        }
        Ok(Writers { files })
    }

    fn write(&mut self, i: usize, at: u64, data: &[u8]) -> Result<()> {
        let (p, f, crc) = &mut self.files[i];
        strata_fs::write_all_at(f, data, HEADER_LEN as u64 + at).map_err(io(&tmp_of(p)))?;
        *crc = crc32c::crc32c_append(*crc, data);
        Ok(())
    }

    /// Headers, fsync, rename, directory fsync: each file whole or absent
    /// (`durable`); without `durable`, headers and rename only (a file
    /// whole once renamed, but not made durable).
    fn finish(self, header: impl Fn(usize, u32) -> ShardHeader, durable: bool) -> Result<()> {
        for (i, (p, mut f, crc)) in self.files.into_iter().enumerate() {
            let t = tmp_of(&p);
            strata_fs::write_all_at(&f, &header(i, crc).encode(), 0).map_err(io(&t))?;
            f.flush().map_err(io(&t))?;
            if durable {
                strata_fs::sync_all(&f).map_err(io(&t))?;
            }
            strata_fs::rename(&t, &p).map_err(io(&p))?;
            if durable {
                sync_parent(&p)?;
            }
        }
        Ok(())
    }
}

/// Reads `len` bytes at `at` of `f`, zeros past its end.
fn read_padded(f: &File, path: &Path, at: u64, len: usize, file_len: u64) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; len];
    if at < file_len {
        let n = ((file_len - at) as usize).min(len);
        f.read_exact_at(&mut buf[..n], at).map_err(io(path))?;
    }
    Ok(buf)
}

/// Encodes the file `src` (a sealed segment) as stripe `stripe` of `code`
/// into the K+M shard files `out` (data shards first), streaming: at most
/// (K+M) × 1 MiB in memory. Returns the data shards' header (index 0).
pub fn encode_file(src: &Path, out: &[&Path], code: Code, stripe: u64) -> Result<ShardHeader> {
    encode_file_to(src, out, code, stripe, true)
}

/// [`encode_file`] for a staging copy that is sent elsewhere and made
/// durable there (the server's encoder): the same files, but neither
/// they nor their directory are fsynced — after a crash they may be
/// missing or short, and must be deleted rather than trusted.
pub fn encode_file_staged(
    src: &Path,
    out: &[&Path],
    code: Code,
    stripe: u64,
) -> Result<ShardHeader> {
    encode_file_to(src, out, code, stripe, false)
}

fn encode_file_to(
    src: &Path,
    out: &[&Path],
    code: Code,
    stripe: u64,
    durable: bool,
) -> Result<ShardHeader> {
    if out.len() != code.k + code.m {
        return Err(EcError::BadCode {
            k: code.k,
            m: out.len().saturating_sub(code.k),
        });
    }
    let f = File::open(src).map_err(io(src))?;
    let data_len = f.metadata().map_err(io(src))?.len();
    let shard_len = code.shard_len(data_len);
    let mut w = Writers::create(out)?;
    let mut at = 0;
    while at < shard_len {
        let n = CHUNK.min(shard_len - at);
        let mut enc = ReedSolomonEncoder::new(code.k, code.m, n as usize).map_err(coder)?;
        let mut originals = Vec::with_capacity(code.k);
        for i in 0..code.k {
            let d = read_padded(&f, src, i as u64 * shard_len + at, n as usize, data_len)?;
            enc.add_original_shard(&d).map_err(coder)?;
            originals.push(d);
        }
        let res = enc.encode().map_err(coder)?;
        let recovery: Vec<Vec<u8>> = res.recovery_iter().map(<[u8]>::to_vec).collect();
        drop(res);
        for (i, d) in originals.iter().enumerate() {
            w.write(i, at, d)?;
        }
        for (j, r) in recovery.iter().enumerate() {
            w.write(code.k + j, at, r)?;
        }
        at += n;
    }
    let head = |index, payload_crc| ShardHeader {
        code,
        index,
        stripe,
        data_len,
        shard_len,
        payload_crc,
    };
    w.finish(head, durable)?;
    ShardHeader::read(out[0])
}

/// Where `[offset, offset + len)` of the encoded segment lies: (data shard,
/// offset in the shard, length) pieces, in order.
pub fn locate(h: &ShardHeader, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
    let mut out = Vec::new();
    let end = (offset + len).min(h.data_len);
    let mut at = offset;
    while at < end {
        let i = (at / h.shard_len) as usize;
        let off = at % h.shard_len;
        let n = (h.shard_len - off).min(end - at);
        out.push((i, off, n));
        at += n;
    }
    out
}

/// A healthy read: `len` bytes at `offset` of the encoded segment, read
/// from the data shards (`data[i]` the path of data shard `i`): one read
/// when the range lies in one shard.
pub fn read_range(h: &ShardHeader, data: &[&Path], offset: u64, len: u64) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len as usize);
    for (i, off, n) in locate(h, offset, len) {
        let p = data.get(i).ok_or(EcError::TooFewShards {
            have: data.len(),
            k: h.code.k,
        })?;
        let f = File::open(p).map_err(io(p))?;
        let mut buf = vec![0u8; n as usize];
        f.read_exact_at(&mut buf, HEADER_LEN as u64 + off)
            .map_err(io(p))?;
        out.extend_from_slice(&buf);
    }
    Ok(out)
}

/// Decodes shard range `[a, b)` (block-aligned) of every original shard
/// from the K of `available` (index, path) listed first.
fn decode_block_range(
    h: &ShardHeader,
    available: &[(usize, &Path)],
    a: u64,
    b: u64,
) -> Result<Vec<Vec<u8>>> {
    let k = h.code.k;
    if available.len() < k {
        return Err(EcError::TooFewShards {
            have: available.len(),
            k,
        });
    }
    let n = (b - a) as usize;
    let mut have: Vec<Option<Vec<u8>>> = vec![None; k];
    let mut dec = ReedSolomonDecoder::new(k, h.code.m, n).map_err(coder)?;
    for &(i, p) in available.iter().take(k) {
        let f = File::open(p).map_err(io(p))?;
        let mut buf = vec![0u8; n];
        f.read_exact_at(&mut buf, HEADER_LEN as u64 + a)
            .map_err(io(p))?;
        if i < k {
            dec.add_original_shard(i, &buf).map_err(coder)?;
            have[i] = Some(buf);
        } else {
            dec.add_recovery_shard(i - k, &buf).map_err(coder)?;
        }
    }
    if have.iter().all(Option::is_some) {
        return Ok(have.into_iter().flatten().collect());
    }
    let res = dec.decode().map_err(coder)?;
    let mut out = Vec::with_capacity(k);
    for (i, got) in have.into_iter().enumerate() {
        match got {
            Some(d) => out.push(d),
            None => out.push(
                res.restored_original(i)
                    .ok_or_else(|| EcError::Coder(format!("shard {i} not restored")))?
                    .to_vec(),
            ),
        }
    }
    Ok(out)
}

/// A degraded read: `len` bytes at `offset` of the encoded segment decoded
/// from any K of the surviving shards `available` (index, path) — only the
/// block-aligned range around it is read from each.
pub fn decode_range(
    h: &ShardHeader,
    available: &[(usize, &Path)],
    offset: u64,
    len: u64,
) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(len as usize);
    for (i, off, n) in locate(h, offset, len) {
        let a = off / BLOCK * BLOCK;
        let b = ((off + n).div_ceil(BLOCK) * BLOCK).min(h.shard_len);
        let shards = decode_block_range(h, available, a, b)?;
        out.extend_from_slice(&shards[i][(off - a) as usize..(off - a + n) as usize]);
    }
    Ok(out)
}

/// Writes the lost shards `lost` (index, path) of the stripe from any K of
/// the surviving ones `available`, a megabyte of each at a time.
pub fn rebuild(
    h: &ShardHeader,
    available: &[(usize, &Path)],
    lost: &[(usize, &Path)],
) -> Result<()> {
    let code = h.code;
    let paths: Vec<&Path> = lost.iter().map(|l| l.1).collect();
    let mut w = Writers::create(&paths)?;
    let mut at = 0;
    while at < h.shard_len {
        let n = CHUNK.min(h.shard_len - at);
        let originals = decode_block_range(h, available, at, at + n)?;
        let recovery: Vec<Vec<u8>> = if lost.iter().any(|l| l.0 >= code.k) {
            let mut enc = ReedSolomonEncoder::new(code.k, code.m, n as usize).map_err(coder)?;
            for d in &originals {
                enc.add_original_shard(d).map_err(coder)?;
            }
            let res = enc.encode().map_err(coder)?;
            res.recovery_iter().map(<[u8]>::to_vec).collect()
        } else {
            Vec::new()
        };
        for (slot, &(i, _)) in lost.iter().enumerate() {
            let d = if i < code.k {
                &originals[i]
            } else {
                &recovery[i - code.k]
            };
            w.write(slot, at, d)?;
        }
        at += n;
    }
    w.finish(
        |slot, payload_crc| ShardHeader {
            index: lost[slot].0,
            payload_crc,
            ..*h
        },
        true,
    )
}

/// Checks every shard of a stripe (`shards[i]` the path of shard `i`):
/// header and payload checksums; rebuilds the damaged or missing ones from
/// the others. Returns the indexes it rebuilt.
pub fn scrub(shards: &[&Path]) -> Result<Vec<usize>> {
    let mut good: Vec<(usize, ShardHeader)> = Vec::new();
    let mut bad: Vec<usize> = Vec::new();
    for (i, p) in shards.iter().enumerate() {
        match check(p) {
            Ok(h) if h.index == i => good.push((i, h)),
            _ => bad.push(i),
        }
    }
    let Some(&(_, h0)) = good.first() else {
        return Err(EcError::TooFewShards { have: 0, k: 1 });
    };
    if bad.is_empty() {
        return Ok(bad);
    }
    let available: Vec<(usize, &Path)> = good.iter().map(|&(i, _)| (i, shards[i])).collect();
    let lost: Vec<(usize, &Path)> = bad.iter().map(|&i| (i, shards[i])).collect();
    rebuild(&h0, &available, &lost)?;
    Ok(bad)
}

/// Reads a whole shard and checks its header and payload checksums.
fn check(p: &Path) -> Result<ShardHeader> {
    let h = ShardHeader::read(p)?;
    let f = File::open(p).map_err(io(p))?;
    let mut crc = 0u32;
    let mut at = 0;
    let mut buf = vec![0u8; CHUNK as usize];
    while at < h.shard_len {
        let n = CHUNK.min(h.shard_len - at) as usize;
        f.read_exact_at(&mut buf[..n], HEADER_LEN as u64 + at)
            .map_err(io(p))?;
        crc = crc32c::crc32c_append(crc, &buf[..n]);
        at += n as u64;
    }
    if crc != h.payload_crc {
        return Err(EcError::BadShard {
            path: p.display().to_string(),
            reason: "payload checksum mismatch".into(),
        });
    }
    Ok(h)
}

/// Decodes equal-length block ranges of the original (data) shards from
/// any K of `available` (shard index, bytes of the same range of that
/// shard; lengths a multiple of [`BLOCK`]): the in-memory form of
/// [`decode_range`], for a reader that fetched the ranges over a network.
/// Returns the K data shards' ranges, in order.
pub fn decode_blocks(code: Code, available: &[(usize, Vec<u8>)]) -> Result<Vec<Vec<u8>>> {
    let k = code.k;
    if available.len() < k {
        return Err(EcError::TooFewShards {
            have: available.len(),
            k,
        });
    }
    let n = available[0].1.len();
    let mut have: Vec<Option<Vec<u8>>> = vec![None; k];
    let mut dec = ReedSolomonDecoder::new(k, code.m, n).map_err(coder)?;
    for (i, buf) in available.iter().take(k) {
        if buf.len() != n || *i >= k + code.m {
            return Err(EcError::Coder(format!(
                "shard {i}: range of {} bytes, not {n}",
                buf.len()
            )));
        }
        if *i < k {
            dec.add_original_shard(*i, buf).map_err(coder)?;
            have[*i] = Some(buf.clone());
        } else {
            dec.add_recovery_shard(i - k, buf).map_err(coder)?;
        }
    }
    if have.iter().all(Option::is_some) {
        return Ok(have.into_iter().flatten().collect());
    }
    let res = dec.decode().map_err(coder)?;
    let mut out = Vec::with_capacity(k);
    for (i, got) in have.into_iter().enumerate() {
        match got {
            Some(d) => out.push(d),
            None => out.push(
                res.restored_original(i)
                    .ok_or_else(|| EcError::Coder(format!("shard {i} not restored")))?
                    .to_vec(),
            ),
        }
    }
    Ok(out)
}

/// Encodes the parity of equal-length data ranges (`data[i]` the range of
/// data shard i): the parity shards' same ranges, in order.
pub fn encode_blocks(code: Code, data: &[Vec<u8>]) -> Result<Vec<Vec<u8>>> {
    let n = data.first().map_or(0, Vec::len);
    let mut enc = ReedSolomonEncoder::new(code.k, code.m, n).map_err(coder)?;
    for d in data {
        enc.add_original_shard(d).map_err(coder)?;
    }
    let res = enc.encode().map_err(coder)?;
    Ok(res.recovery_iter().map(<[u8]>::to_vec).collect())
}

/// The header of a shard file as bytes, for a writer that builds the file
/// elsewhere (a rebuilt shard streamed to its new node).
pub fn header_bytes(h: &ShardHeader) -> [u8; HEADER_LEN] {
    h.encode()
}

/// Parses a shard file's header from its first [`HEADER_LEN`] bytes
/// (`name` for errors).
pub fn parse_header(bytes: &[u8], name: &str) -> Result<ShardHeader> {
    ShardHeader::decode(bytes, Path::new(name))
}
