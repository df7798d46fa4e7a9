//! Reads: a GET (one positioned read of the whole needle, or of a prefix
//! of its data), the page-cache-only mode of an async server's workers,
//! liveness checks, and the needles of a segment streamed in file order.

use super::handle::{Body, Segment};
use super::locks::{read, write};
use super::node_index::{Answer, Loc};
use super::report::{CounterCells, Object, StoredNeedle};
use super::Inner;
use crate::error::{Result, StoreError};
use crate::format::needle::{self, HEADER_LEN};
use crate::format::superblock::SUPERBLOCK_LEN;
use crate::segment::{ScanItem, Scanner};
#[cfg(doc)]
use crate::Store;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// GETs that find the indexed needle flagged superseded wait this many
/// times for the put that flagged it to install its newer needle.
const SUPERSEDED_RETRIES: u32 = 10_000;

thread_local! {
    /// Set by [`cached_only`] on this thread.
    static CACHED_ONLY: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with this thread's GETs ([`Store::get`] and
/// [`Store::get_unchecked`]) limited to needles in the page cache: a GET
/// whose needle is not there returns [`StoreError::NotCached`] at once,
/// without waiting for the device (and without side effects). For an async
/// server's worker thread: it serves what is cached itself and hands the
/// rest to threads that may block. Only the needle's read is limited; the
/// rare header reads of an index check still wait.
pub fn cached_only<T>(f: impl FnOnce() -> T) -> T {
    struct Reset(bool);
    impl Drop for Reset {
        fn drop(&mut self) {
            CACHED_ONLY.set(self.0);
        }
    }
    let _reset = Reset(CACHED_ONLY.replace(true));
    f()
}

impl Segment {
    /// The needle read of a GET, `len` bytes at `offset`: the header into
    /// `head`, the rest returned ([`Segment::pread_split`]: the data is
    /// not moved to drop the header, nor zeroed before the read), except
    /// under [`cached_only`], where it is one `preadv2` with `RWF_NOWAIT`,
    /// which copies what the page cache holds and never waits for the
    /// device: a needle not wholly cached is [`StoreError::NotCached`]. A
    /// file system that does not take the flag is read as usual.
    fn pread_get(
        &self,
        offset: u64,
        head: &mut [u8; HEADER_LEN],
        len: u64,
        counters: &CounterCells,
    ) -> Result<Vec<u8>> {
        let rest = len.saturating_sub(HEADER_LEN as u64);
        self.pread_split(offset, head, rest, CACHED_ONLY.get(), counters)?
            .ok_or(StoreError::NotCached)
    }
}

impl Inner {
    pub(super) fn get(&self, key: u64, alt: u32, cookie: Option<u32>) -> Result<Option<Object>> {
        Ok(self.read(key, alt, cookie, None)?.map(|(o, ..)| o))
    }

    /// [`Inner::get`], reading at most `limit` bytes of the data when
    /// given (see [`Store::get_prefix`]); with the data's whole length and
    /// whether its checksum was verified.
    pub(super) fn read(
        &self,
        key: u64,
        alt: u32,
        cookie: Option<u32>,
        limit: Option<usize>,
    ) -> Result<Option<(Object, u32, bool)>> {
        self.counters.gets.fetch_add(1, Ordering::Relaxed);
        let mut waits = 0u32;
        // Set once the recent table's one candidate proved a stranger: the
        // identity can then only be in the run (its second probe).
        let mut run_only = false;
        // Probes made by this call, given back if its read is refused.
        let mut probed = 0u64;
        loop {
            let (seg, loc, unconfirmed) = {
                let ix = read(&self.idx);
                let (found, probes) = if run_only {
                    (ix.find_in_run(key, alt).0, u64::from(ix.run.is_some()))
                } else {
                    ix.find(key, alt, &self.counters)
                };
                self.counters.probes.fetch_add(probes, Ordering::Relaxed);
                probed += probes;
                let Some(loc) = found.loc() else {
                    return Ok(None);
                };
                let unconfirmed = matches!(found, Answer::Recent(_));
                match ix.seg(loc.slot) {
                    Some(s) => (s.clone(), loc, unconfirmed),
                    None if unconfirmed => {
                        run_only = true;
                        continue;
                    }
                    None => return Ok(None),
                }
            };
            if seg.is_deleted(loc.ord) {
                if unconfirmed && read(&self.idx).ident_at(loc, &self.counters) != Some((key, alt))
                {
                    run_only = true;
                    continue;
                }
                return Ok(None);
            }
            let Some((offset, len)) = seg.needle(loc.ord) else {
                if unconfirmed {
                    run_only = true;
                    continue;
                }
                return Ok(None);
            };
            // Read whole unless a limit leaves out more than the footer.
            let want = match limit {
                Some(n)
                    if (HEADER_LEN + needle::FOOTER_LEN + 7).saturating_add(n) < len as usize =>
                {
                    (HEADER_LEN + n) as u64
                }
                _ => len,
            };
            let whole = want == len;
            let mut head = [0u8; HEADER_LEN];
            let mut buf = match seg.pread_get(offset, &mut head, want, &self.counters) {
                Err(StoreError::NotCached) => {
                    // Counted again by the read that follows.
                    self.counters.gets.fetch_sub(1, Ordering::Relaxed);
                    self.counters.probes.fetch_sub(probed, Ordering::Relaxed);
                    return Err(StoreError::NotCached);
                }
                r => r?,
            };
            self.trim_fds();
            // One flipped header bit, corrected by its checksum: read as
            // written if the whole needle was read and its data checks
            // (below); a prefix cannot be.
            let (h, header_err) = match needle::mend_header(&head, seg.flag_code()) {
                Ok((_, Some(e))) if !whole => return Err(seg.corrupt(offset, e)),
                Ok(x) => x,
                Err(e) => return Err(seg.corrupt(offset, e)),
            };
            if (h.key, h.alt_key) != (key, alt) {
                if unconfirmed {
                    // The recent table's remainder matched a stranger's.
                    self.counters.header_checks.fetch_add(1, Ordering::Relaxed);
                    run_only = true;
                    continue;
                }
                return Ok(None); // a fingerprint false positive: another needle
            }
            if whole {
                if let Err(e) = needle::check_rest(&buf, &h) {
                    return Err(seg.corrupt(offset, header_err.unwrap_or(e)));
                }
            } else if needle::needle_len(h.size) > len {
                // The header names more than the index's slot holds.
                return Err(seg.corrupt(
                    offset,
                    needle::NeedleError::Truncated {
                        need: needle::needle_len(h.size),
                        have: len,
                    },
                ));
            }
            if h.is_deleted() || h.is_superseded() {
                let still = read(&self.idx).current(key, alt, &self.counters) == Some(loc);
                if !still {
                    run_only = false;
                    continue; // the index moved on meanwhile: look again
                }
                if h.is_superseded() && waits < SUPERSEDED_RETRIES {
                    // A put flagged it and is about to install the newer
                    // needle (it holds the update lock until it has).
                    waits += 1;
                    std::thread::yield_now();
                    continue;
                }
                self.mark_dead(&seg, key, alt, loc, len);
                return Ok(None);
            }
            if cookie.is_some_and(|ck| ck != h.cookie) {
                return Ok(None);
            }
            // The data is the start of `buf` already: truncating frees
            // nothing and moves nothing.
            buf.truncate(h.size as usize);
            return Ok(Some((
                Object {
                    data: buf,
                    tier: seg.tier,
                    segment: seg.id,
                    device: seg.device,
                    cookie: h.cookie,
                },
                h.size,
                whole,
            )));
        }
    }

    /// A needle the index pointed at was found flagged on disk (a stale
    /// checkpoint): fix the RAM.
    fn mark_dead(&self, seg: &Segment, key: u64, alt: u32, loc: Loc, len: u64) {
        if let Body::Sealed(s) = &seg.body {
            if s.set_deleted(loc.ord) {
                seg.garbage.fetch_add(len, Ordering::Relaxed);
                seg.dirty.store(true, Ordering::Relaxed);
            }
        }
        write(&self.idx).forget(key, alt, loc, &self.counters);
    }
}

impl Inner {
    /// [`Store::needles`].
    pub(super) fn needles(&self, segment: u64) -> Result<NeedleIter> {
        let seg = self.find(segment)?;
        self.trim_fds();
        let end = seg.len.load(Ordering::Relaxed);
        let scanner = seg.scanner(SUPERBLOCK_LEN as u64, end, true)?;
        Ok(NeedleIter { seg, scanner })
    }

    /// [`Store::is_live`].
    pub(super) fn is_live(
        &self,
        segment: u64,
        offset: u64,
        key: u64,
        alt_key: u32,
    ) -> Result<bool> {
        let seg = self.find(segment)?;
        let loc = read(&self.idx).current(key, alt_key, &self.counters);
        Ok(match loc {
            Some(l) if l.slot == seg.slot && !seg.is_deleted(l.ord) => {
                seg.needle(l.ord).map(|x| x.0) == Some(offset)
            }
            _ => false,
        })
    }
}

/// Iterator over the needles of a segment (see [`Store::needles`]).
pub struct NeedleIter {
    seg: Arc<Segment>,
    scanner: Scanner,
}

impl Iterator for NeedleIter {
    type Item = Result<StoredNeedle>;
    fn next(&mut self) -> Option<Self::Item> {
        let seg = &self.seg;
        let item = self.scanner.next()?;
        Some(match item {
            Err(e) => Err(e),
            Ok(ScanItem::Needle {
                offset,
                header,
                data,
                ..
            }) => Ok(StoredNeedle {
                offset,
                key: header.key,
                alt_key: header.alt_key,
                cookie: header.cookie,
                flags: header.flags,
                data: data.unwrap_or_default(),
            }),
            Ok(ScanItem::Corrupt { offset, reason, .. }) => Err(seg.corrupt(offset, reason)),
        })
    }
}
