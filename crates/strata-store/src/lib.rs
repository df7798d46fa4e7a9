//! Strata's segment store: the Haystack needle engine.
//!
//! Objects are *needles* appended to *segment* files, one per device
//! directory at a time; every lookup is in RAM — at most two probes of one
//! node-wide index, whatever the number of segments — and a GET costs one
//! positioned read of the whole needle. See `docs/store-format.md` for the
//! on-disk formats byte by byte, and the compaction and recovery design.
//!
//! # API
//!
//! ```no_run
//! use strata_store::{PutItem, Store, StoreConfig, Tier};
//!
//! # fn main() -> Result<(), strata_store::StoreError> {
//! // One or more device directories, each with a tier class.
//! let mut cfg = StoreConfig::new("/srv/flash0", Tier::Flash).with_device("/srv/disk0", Tier::Disk);
//! cfg.create_dirs = true;
//! let store = Store::open(cfg)?; // loads checkpoints, scans orphans, cuts torn tails
//!
//! // A batch lands on one device of the tier with one fdatasync, and
//! // put_batch returns only once it is durable.
//! store.put_batch(Tier::Flash, &[
//!     PutItem { head: &[], key: 1, alt_key: 0, cookie: 0xdead_beef, data: b"thumbnail" },
//!     PutItem { head: &[], key: 1, alt_key: 1, cookie: 0x1234_5678, data: b"full size" },
//! ])?;
//!
//! // (key, alt key, cookie): a wrong cookie reads as absent.
//! let obj = store.get(1, 0, 0xdead_beef)?.expect("present");
//! assert_eq!(obj.data, b"thumbnail");
//! assert_eq!(obj.tier, Tier::Flash);
//!
//! store.delete(1, 1)?; // flag set on disk synchronously
//! store.delete_batch(&[(7, 0), (8, 0)])?; // one fdatasync per segment touched
//!
//! // Segments: listing, compaction with progress, whole-segment moves.
//! for s in store.segments() {
//!     println!("{:016x} {} {} bytes, {:.0}% garbage", s.id, s.tier, s.size, s.garbage_ratio * 100.0);
//! }
//! store.seal_active(0)?;
//! let id = store.segments().iter().find(|s| !s.active).map(|s| s.id).unwrap();
//! store.compact(id, &mut |p| eprintln!("{}/{}", p.done, p.total))?;
//! store.move_segment(id, 1, &mut |_| {})?; // flash -> disk
//! store.merge_index()?; // also done in the background as writes accumulate
//! for needle in store.needles(id)? { let _ = needle?; } // recovery streaming
//! println!("{:?} {:?}", store.counters(), store.memory());
//! # Ok(()) }
//! ```
//!
//! `Store` is `Send + Sync`: readers run concurrently (each GET holds a lock
//! only while probing the RAM index, never during I/O), writers to one
//! device are serialised, and a background thread writes index checkpoints
//! and runs automatic compactions.
//!
//! # Layers
//!
//! - [`format`]: pure encoding and parsing of needles, superblocks and
//!   checkpoints (no I/O; fuzzed).
//! - `bits`, `mphf`, `index`: the node-wide index's *run* (one perfect hash
//!   with fingerprints over every sealed segment's live identities), each
//!   sealed segment's Elias–Fano offsets and deleted bits (pure). The
//!   store adds the *recent map* of writes since the last merge.
//! - [`segment`]: segment files, counted positioned reads, the scanner.
//! - [`Store`]: the engine; [`verify`]: an offline check of a directory.

#![warn(missing_docs)]

pub mod bits;
pub mod config;
pub mod error;
pub mod format;
mod fresh;
pub mod hash;
pub mod index;
pub mod mphf;
pub mod recent;
pub mod segment;
mod spill;
mod store;
pub mod verify;

pub use config::{recorded_order, DeviceConfig, StoreConfig, VersionOrder, ORDER_FILE};
pub use error::{Result, StoreError};
pub use format::superblock::Tier;
pub use store::{
    cached_only, move_headroom, Counters, MemoryUsage, NeedleIter, Object, OpenReport, Prefix,
    PutItem, Quarantined, RewriteProgress, RewriteReport, SegmentInfo, Store, StoredNeedle,
    DAMAGE_NOTE, LOCK_FILE, QUARANTINE_DIR,
};
