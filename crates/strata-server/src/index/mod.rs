//! The listing index (docs/placement.md, "The listing index"): per bucket,
//! every object's name, size, ETag and time, in UTF-8 byte order, in a
//! redb database on the node (`DATA/listing.redb`). The index is
//! partitioned by bucket: a bucket's entries live on the replicas of its
//! index row ([`strata_proto::index_row`]); the coordinator
//! writes them after the object and before acknowledging, so an
//! acknowledged PUT is listed and an acknowledged DELETE is not, after any
//! crash (every change is durable before it answers). Writes are group
//! committed: one thread takes every write that arrived while the previous
//! group committed, appends them as one record to the index's log
//! ([`log`], one `fdatasync`), then applies them in one redb
//! transaction that is synced only every [`CHECKPOINT_EVERY`] (a
//! checkpoint); at open,
//! the records redb does not hold yet are applied again. GETs never read
//! it.

mod db;
mod http;
pub(crate) mod log;

pub(crate) use db::{apply_change, intents_below, list_page};
pub use db::{
    ExportLine, IntentOp, ListingIndex, Order, CHECKPOINT_EVERY, LAZY_WAIT, TOMBSTONE_KEEP,
};
pub use http::routes;
