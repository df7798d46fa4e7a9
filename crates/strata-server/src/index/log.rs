//! The listing index's write-ahead log (`DATA/listing.wal`; its bytes in
//! docs/placement.md, "The listing index's log").
//!
//! Each group of index changes the committer takes is appended here as one
//! record and made durable by one `fdatasync` of a small sequential write,
//! then applied to redb *without* a sync of its own. Every
//! `CHECKPOINT_EVERY` (5 s) the committer makes redb durable (a checkpoint: one synced commit that also
//! records the last record it holds, the database's `wal_lsn`) and the
//! log starts over at its beginning. At open, the records after the one redb
//! holds are applied again. So a change waits for one small append per
//! group instead of a B-tree commit that writes back every page the group
//! dirtied, and redb writes those pages back once a second.
//!
//! This module frames records and keeps the file; what a record's payload
//! holds is the index's business.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};

/// The file's first 8 bytes.
pub const MAGIC: [u8; 8] = *b"STRATAIL";

/// The log format this build writes and reads.
pub const VERSION: u32 = 1;

/// Header bytes: magic, version (u32 LE), 4 reserved (zero), the log's
/// id (u64 LE: the index it belongs to).
pub const HEADER: u64 = 24;

/// A record's framing before its payload: payload length (u32 LE),
/// CRC32C (u32 LE) of the sequence number's 8 bytes then the payload,
/// sequence number (u64 LE).
const FRAME: usize = 16;

/// Records larger than this are refused (a length read from damaged bytes
/// is not believed).
pub const MAX_RECORD: usize = 1 << 30;

/// A log longer than this when it starts over is cut back to its header
/// (after a large copy of entries), so the file does not keep its peak size.
const KEEP_MAX: u64 = 64 << 20;

/// The log file of an index: where the next record goes and its number.
pub struct Log {
    file: File,
    path: PathBuf,
    /// The index this log belongs to (its header's id).
    pub id: u64,
    /// Where the next record is written.
    at: u64,
    /// The file's length (records of an earlier pass may lie past `at`).
    len: u64,
    /// The next record's sequence number.
    pub next: u64,
    /// Set when a failed append could not be undone: the log's tail is
    /// unknown, so no further record is appended (every write fails until
    /// the node restarts and replays what is whole).
    broken: Option<String>,
}

/// What [`Log::open`] found.
pub struct Opened {
    /// The log, positioned after its header, its next record numbered
    /// after the last one found (or `after + 1`).
    pub log: Log,
    /// The whole records numbered `after + 1`, `after + 2`, … in order:
    /// (sequence number, payload).
    pub records: Vec<(u64, Vec<u8>)>,
    /// Why records were set aside (another index's log, a gap), if so.
    pub warning: Option<String>,
}

fn header(id: u64) -> [u8; HEADER as usize] {
    let mut h = [0u8; HEADER as usize];
    h[..8].copy_from_slice(&MAGIC);
    h[8..12].copy_from_slice(&VERSION.to_le_bytes());
    h[16..24].copy_from_slice(&id.to_le_bytes());
    h
}

fn crc(lsn: u64, payload: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&lsn.to_le_bytes()), payload)
}

/// A new log id: different for every index file created.
fn new_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.write_u32(std::process::id());
    h.finish().max(1)
}

/// Parses the records of `body` (the bytes after the header) numbered
/// after `after`: whole, contiguous, in order; stops at the first torn or
/// damaged record, at a gap, or at a record of an earlier pass. A pass that
/// starts past `after + 1` (the index fell back to an older commit than
/// the log's checkpoint) is still read, with a warning.
fn parse(body: &[u8], after: u64) -> (Vec<(u64, Vec<u8>)>, Option<String>) {
    let mut out: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut pos = 0usize;
    let mut warning = None;
    while body.len() - pos >= FRAME {
        let f = &body[pos..pos + FRAME];
        let len = u32::from_le_bytes(f[0..4].try_into().expect("4 bytes")) as usize;
        let sum = u32::from_le_bytes(f[4..8].try_into().expect("4 bytes"));
        let lsn = u64::from_le_bytes(f[8..16].try_into().expect("8 bytes"));
        if len > MAX_RECORD || body.len() - pos - FRAME < len {
            break;
        }
        let payload = &body[pos + FRAME..pos + FRAME + len];
        if crc(lsn, payload) != sum {
            break;
        }
        pos += FRAME + len;
        let expected = out.last().map_or(after + 1, |(l, _)| l + 1);
        if lsn <= after {
            if out.is_empty() {
                continue;
            }
            break;
        }
        if lsn != expected && out.is_empty() {
            // The index holds less than the log's last checkpoint (redb
            // fell back to an older commit, its newest one damaged): the
            // changes between are lost, those after are still applied.
            warning = Some(format!(
                "the index holds records up to {after}, the log starts at {lsn}: the changes between are lost (the index fell back to an older commit); the records from {lsn} on are applied"
            ));
        } else if lsn != expected {
            warning = Some(format!(
                "record {lsn} follows {} (a gap); it and those after it are not applied",
                expected - 1
            ));
            break;
        }
        out.push((lsn, payload.to_vec()));
    }
    (out, warning)
}

impl Log {
    /// Opens (or creates) the log at `path` of the index whose id is `id`
    /// (`None`: the index has none yet) and which holds every record up to
    /// `after`. A log of another index (another id) or of none yet has its
    /// records set aside, with a warning, and is started again for this
    /// one: [`Opened::log`]'s id is then new and the index must record it.
    /// The log is not cut until [`Log::reset`]: call it once what
    /// [`Opened::records`] holds is durable in the index.
    pub fn open(path: &Path, id: Option<u64>, after: u64) -> Result<Opened, String> {
        let shown = path.display();
        // A new log is made durable in its directory at once: appends
        // then need only fdatasync.
        let mut file = match OpenOptions::new().read(true).write(true).open(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => strata_fs::create_durable(path),
            r => r,
        }
        .map_err(|e| format!("opening {shown}: {e}"))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| format!("reading {shown}: {e}"))?;
        let torn_header = bytes.len() < HEADER as usize
            && header(0)[..bytes.len().min(8)] == bytes[..bytes.len().min(8)];
        let (found, records, mut warning) = if bytes.is_empty() || torn_header {
            // New, or its header torn at creation: nothing was logged.
            (None, Vec::new(), None)
        } else {
            if bytes.len() < HEADER as usize || bytes[..8] != MAGIC {
                return Err(format!(
                    "{shown} is not a Strata listing log (its first bytes are not {:?})",
                    String::from_utf8_lossy(&MAGIC)
                ));
            }
            let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
            if version != VERSION {
                return Err(format!(
                    "{shown} is a listing log of format version {version}; this build reads version {VERSION}"
                ));
            }
            let found = u64::from_le_bytes(bytes[16..24].try_into().expect("8 bytes"));
            let (records, warning) = parse(&bytes[HEADER as usize..], after);
            (Some(found), records, warning)
        };
        let (id, records) = match (id, found) {
            (Some(want), Some(have)) if want == have => (want, records),
            (want, _) => {
                if !records.is_empty() {
                    warning = Some(format!(
                        "{} record(s) belong to another listing index (log id {:x?}, the index's {:x?}); they are not applied",
                        records.len(),
                        found,
                        want
                    ));
                }
                (want.unwrap_or_else(new_id), Vec::new())
            }
        };
        let next = records.last().map_or(after + 1, |(l, _)| l + 1);
        let log = Log {
            file,
            path: path.to_path_buf(),
            id,
            at: HEADER,
            len: bytes.len() as u64,
            next,
            broken: None,
        };
        Ok(Opened {
            log,
            records,
            warning,
        })
    }

    /// Cuts the log back to its header (with this log's id), durably.
    /// Call once every record it holds is durable in the index.
    pub fn reset(&mut self) -> Result<(), String> {
        let shown = self.path.display();
        strata_fs::set_len(&self.file, 0)
            .and_then(|()| strata_fs::write_all_at(&self.file, &header(self.id), 0))
            .and_then(|()| strata_fs::sync_all(&self.file))
            .map_err(|e| format!("starting {shown} over: {e}"))?;
        self.at = HEADER;
        self.len = HEADER;
        self.broken = None;
        Ok(())
    }

    /// Appends record `self.next` with `payload` and numbers the next one;
    /// with `sync`, returns once it is durable (and so is every record
    /// before it). A record that could not be written whole is cut off
    /// again; if even that fails, the log refuses every later append.
    pub fn append(&mut self, payload: &[u8], sync: bool) -> Result<u64, String> {
        if let Some(why) = &self.broken {
            return Err(why.clone());
        }
        if payload.len() > MAX_RECORD {
            return Err(format!(
                "a group of listing changes of {} bytes (at most {MAX_RECORD})",
                payload.len()
            ));
        }
        let lsn = self.next;
        let mut rec = Vec::with_capacity(FRAME + payload.len());
        rec.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        rec.extend_from_slice(&crc(lsn, payload).to_le_bytes());
        rec.extend_from_slice(&lsn.to_le_bytes());
        rec.extend_from_slice(payload);
        let shown = self.path.display();
        let res = strata_fs::write_all_at(&self.file, &rec, self.at).and_then(|()| {
            if sync {
                strata_fs::sync_data(&self.file)
            } else {
                Ok(())
            }
        });
        if let Err(e) = res {
            // What was written of it must not be read as a record: cut the
            // file at the record's start (the records of an earlier pass
            // past it are older than the index's checkpoint anyway).
            if let Err(cut) = strata_fs::set_len(&self.file, self.at)
                .and_then(|()| strata_fs::sync_data(&self.file))
            {
                self.broken = Some(format!(
                    "{shown}: an append failed ({e}) and could not be cut off ({cut}); restart the node"
                ));
            } else {
                self.len = self.at;
            }
            return Err(format!("appending to {shown}: {e}"));
        }
        self.at += rec.len() as u64;
        self.len = self.len.max(self.at);
        self.next += 1;
        Ok(lsn)
    }

    /// Bytes appended since the log last started over.
    pub fn used(&self) -> u64 {
        self.at - HEADER
    }

    /// Starts the next pass at the beginning, once the index has made every
    /// record so far durable (a checkpoint). The records of this pass stay
    /// past the new ones until overwritten: they are numbered lower than
    /// anything written next, so a reader stops at them. A file grown past
    /// [`KEEP_MAX`] is cut back to its header.
    pub fn start_over(&mut self) -> Result<(), String> {
        if self.len > KEEP_MAX {
            return self.reset();
        }
        self.at = HEADER;
        Ok(())
    }
}

#[cfg(test)]
// The tests damage and write files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn read(path: &Path, id: Option<u64>, after: u64) -> Opened {
        Log::open(path, id, after).expect("open")
    }

    /// A power cut at every step of a new log's creation and appends: every
    /// record an append with sync acknowledged comes back (before issue 33
    /// the log's creation was not made durable in its directory, so a cut
    /// lost the whole file with its synced records).
    #[test]
    fn every_synced_record_survives_a_power_cut_at_every_step() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let dir = tempfile::tempdir().expect("tmp");
        for how in [Cut::Drop, Cut::Tear] {
            let steps = cut_at_every_step(
                dir.path(),
                how,
                |_| {},
                |r| {
                    let mut o =
                        Log::open(&r.join("l.wal"), None, 0).map_err(std::io::Error::other)?;
                    o.log.reset().map_err(std::io::Error::other)?;
                    std::fs::write(r.join("id"), o.log.id.to_le_bytes())?;
                    for i in 1..=4u8 {
                        o.log
                            .append(&[i; 300], true)
                            .map_err(std::io::Error::other)?;
                        std::fs::write(r.join(format!("acked-{i}")), b"")?;
                    }
                    Ok(())
                },
                |r, n| {
                    let Ok(id) = std::fs::read(r.join("id")) else {
                        return;
                    };
                    let id = u64::from_le_bytes(id.try_into().expect("8 bytes"));
                    let o = Log::open(&r.join("l.wal"), Some(id), 0)
                        .unwrap_or_else(|e| panic!("{how:?} step {n}: {e}"));
                    for i in 1..=4u8 {
                        if r.join(format!("acked-{i}")).exists() {
                            assert!(
                                o.records
                                    .iter()
                                    .any(|(l, p)| *l == i as u64 && p == &vec![i; 300]),
                                "{how:?} step {n}: record {i} was acknowledged: {:?}",
                                o.records.iter().map(|(l, _)| l).collect::<Vec<_>>()
                            );
                        }
                    }
                },
            )
            .expect("steps");
            assert!(steps > 8, "{steps}");
        }
    }

    #[test]
    fn records_come_back_after_the_checkpointed_one_and_stop_at_damage() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.wal");
        let mut o = read(&path, None, 0);
        assert!(o.records.is_empty() && o.warning.is_none());
        let id = o.log.id;
        o.log.reset().expect("reset");
        for i in 1..=5u8 {
            let lsn = o
                .log
                .append(&vec![i; i as usize * 10], i % 2 == 0)
                .expect("append");
            assert_eq!(lsn, u64::from(i));
        }
        drop(o);
        let again = read(&path, Some(id), 2);
        assert_eq!(
            again
                .records
                .iter()
                .map(|(l, p)| (*l, p.len()))
                .collect::<Vec<_>>(),
            [(3, 30), (4, 40), (5, 50)]
        );
        assert_eq!(again.log.next, 6);
        // Another index's log: nothing applied, a new id.
        let other = read(&path, Some(id ^ 1), 0);
        assert!(other.records.is_empty());
        assert!(other
            .warning
            .as_deref()
            .is_some_and(|w| w.contains("another listing index")));
        // A flipped byte in record 4 ends the log before it.
        let mut bytes = std::fs::read(&path).expect("read");
        let at4 = HEADER as usize + (FRAME + 10) + (FRAME + 20) + (FRAME + 30) + FRAME + 7;
        bytes[at4] ^= 0x40;
        std::fs::write(&path, &bytes).expect("write");
        let cut = read(&path, Some(id), 2);
        assert_eq!(cut.records, [(3, vec![3u8; 30])]);
        assert_eq!(cut.log.next, 4);
        // A torn tail (the last record's end missing) likewise.
        std::fs::write(&path, &bytes[..at4]).expect("write");
        assert_eq!(read(&path, Some(id), 0).records.len(), 3);
    }

    #[test]
    fn a_second_pass_ends_where_its_own_records_end() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.wal");
        let mut o = read(&path, None, 0);
        let id = o.log.id;
        o.log.reset().expect("reset");
        for _ in 0..6 {
            o.log.append(&[7u8; 100], true).expect("append");
        }
        // Checkpoint at 6; two short records overwrite the first one's
        // place, and the older records past them are not read again.
        o.log.start_over().expect("start over");
        o.log.append(&[8u8; 10], true).expect("append");
        o.log.append(&[9u8; 10], true).expect("append");
        drop(o);
        let again = read(&path, Some(id), 6);
        assert_eq!(again.records, [(7, vec![8u8; 10]), (8, vec![9u8; 10])]);
        // An index fallen back to an older commit (4) still gets the pass
        // after the checkpoint, with a warning.
        let fell = read(&path, Some(id), 4);
        assert_eq!(fell.records.len(), 2);
        assert!(fell.warning.as_deref().is_some_and(|w| w.contains("lost")));
        // Before anything of the second pass: nothing after 6.
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[HEADER as usize + 4] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        assert!(read(&path, Some(id), 6).records.is_empty());
    }

    #[test]
    fn a_file_that_is_no_log_or_of_a_newer_format_is_refused() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join("l.wal");
        std::fs::write(&path, b"hello, this is not a log at all").expect("write");
        let e = Log::open(&path, None, 0).err().expect("refused");
        assert!(e.contains("not a Strata listing log"), "{e}");
        let mut h = header(5);
        h[8] = 2;
        std::fs::write(&path, h).expect("write");
        let e = Log::open(&path, Some(5), 0).err().expect("refused");
        assert!(e.contains("format version 2"), "{e}");
        // A header torn at creation is a new log.
        std::fs::write(&path, &header(5)[..11]).expect("write");
        assert!(Log::open(&path, Some(5), 0)
            .expect("open")
            .records
            .is_empty());
    }
}
