//! A merge's spill file: records (identity, location) grouped by the
//! partition of the run they belong to, so that a merge holds one
//! partition's records at a time rather than the whole recent part.
//!
//! Records arrive in any order; they are buffered up to [`CHUNK`] at a
//! time, sorted by partition and appended to the file as one *chunk*, whose
//! per-partition extents stay in RAM (`(P + 1)` offsets per chunk). Reading
//! partition q reads its extent of every chunk. The file is a temporary
//! (`*.tmp`, removed when dropped, and by the next open after a crash); it
//! holds nothing the store needs to recover.

use crate::error::{Result, StoreError};
use crate::index::{part_hash, part_of};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// Records buffered before a chunk is sorted and written (20 bytes each on
/// disk, 32 in RAM: 16 MiB).
pub(crate) const CHUNK: usize = 1 << 19;
const RECORD: usize = 20;

/// One record: key, alternate key, and two u32 of location.
pub(crate) type Record = (u64, u32, u32, u32);

pub(crate) struct Spill {
    file: File,
    path: PathBuf,
    parts: u64,
    buf: Vec<(u64, Record)>,
    /// Per chunk, the byte offset where each partition's records start,
    /// then the chunk's end.
    chunks: Vec<Vec<u64>>,
    at: u64,
}

impl Spill {
    /// A new, empty spill file at `path` for records of `parts` partitions.
    pub(crate) fn create(path: PathBuf, parts: u64) -> Result<Spill> {
        let file = File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .map_err(StoreError::io("creating", &path))?;
        Ok(Spill {
            file,
            path,
            parts: parts.max(1),
            buf: Vec::new(),
            chunks: Vec::new(),
            at: 0,
        })
    }

    /// Adds a record.
    pub(crate) fn push(&mut self, r: Record) -> Result<()> {
        let q = part_of(part_hash(r.0, r.1), self.parts);
        self.buf.push((q, r));
        if self.buf.len() >= CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Writes the buffered records as a chunk.
    pub(crate) fn flush(&mut self) -> Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.buf.sort_unstable_by_key(|e| e.0);
        let mut starts = Vec::with_capacity(self.parts as usize + 1);
        let mut bytes = Vec::with_capacity(self.buf.len() * RECORD);
        let mut i = 0;
        for q in 0..self.parts {
            starts.push(self.at + bytes.len() as u64);
            while let Some(&(p, (k, a, x, y))) = self.buf.get(i) {
                if p != q {
                    break;
                }
                bytes.extend_from_slice(&k.to_le_bytes());
                bytes.extend_from_slice(&a.to_le_bytes());
                bytes.extend_from_slice(&x.to_le_bytes());
                bytes.extend_from_slice(&y.to_le_bytes());
                i += 1;
            }
        }
        starts.push(self.at + bytes.len() as u64);
        strata_fs::write_all_at(&self.file, &bytes, self.at)
            .map_err(StoreError::io("writing", &self.path))?;
        self.at += bytes.len() as u64;
        self.chunks.push(starts);
        self.buf.clear();
        self.buf.shrink_to(0);
        Ok(())
    }

    /// The records of partition `q` (call [`Spill::flush`] first).
    pub(crate) fn read(&self, q: u64) -> Result<Vec<Record>> {
        let q = q as usize;
        let mut out = Vec::new();
        let mut bytes = Vec::new();
        for c in &self.chunks {
            let (Some(&a), Some(&b)) = (c.get(q), c.get(q + 1)) else {
                continue;
            };
            bytes.resize((b - a) as usize, 0);
            self.file
                .read_exact_at(&mut bytes, a)
                .map_err(StoreError::io("reading", &self.path))?;
            for r in bytes.chunks_exact(RECORD) {
                let u32_at = |i: usize| u32::from_le_bytes([r[i], r[i + 1], r[i + 2], r[i + 3]]);
                let k = u64::from_le_bytes([r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]]);
                out.push((k, u32_at(8), u32_at(12), u32_at(16)));
            }
        }
        Ok(out)
    }
}

impl Drop for Spill {
    fn drop(&mut self) {
        let _ = strata_fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_come_back_by_partition() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.tmp");
        let mut s = Spill::create(path.clone(), 5).unwrap();
        let n = CHUNK as u64 + 1000;
        for i in 0..n {
            s.push((i, (i % 3) as u32, i as u32, 7)).unwrap();
        }
        s.flush().unwrap();
        let mut seen = 0;
        for q in 0..5 {
            for (k, a, x, y) in s.read(q).unwrap() {
                assert_eq!(part_of(part_hash(k, a), 5), q);
                assert_eq!((a, x, y), ((k % 3) as u32, k as u32, 7));
                seen += 1;
            }
        }
        assert_eq!(seen, n);
        drop(s);
        assert!(!path.exists());
    }
}
