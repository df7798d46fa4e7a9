//! The erasure-coded warm tier on a node (f4; docs/erasure-coding.md).
//!
//! One background task per node ([`run`]) does, each tick, in order:
//!
//! 1. refreshes the code and the stripe records from the metadata service;
//! 2. **installs** every recorded stripe of a row this node replicates:
//!    fetches the stripe's index from a shard holder, writes it durably to
//!    `ROW/stripes/`, loads it into the RAM map the GET path consults, and
//!    only then drops its own copies of the records the stripe holds (same
//!    stamp only: a newer write of a name stays);
//! 3. **rebuilds** the shards of stripes whose disk died and that the
//!    metadata service's table now places on one of this node's disks
//!    (every node rebuilds its share at once, FDS);
//! 4. **encodes** one sealed segment older than its warm age, of a row
//!    this node leads (the row's first live replica; first it seals the
//!    active segments of those rows that no write reached for their warm
//!    age, so a row that stopped growing is encoded whole): shards and index go
//!    to the K+M disks of an erasure-coded row, each fsynced there, then
//!    the stripe is recorded; step 2 then drops the replicas;
//! 5. **scrubs** its shard files (checksums), rebuilding a damaged one;
//! 6. counts the bytes it stores and leads (for `cluster status`).
//!
//! Crash safety: a record is dropped from a replica only after the stripe
//! holding it is recorded (every shard durable) and the replica's copy of
//! the index is durable; until then the replicas serve it.
//!
//! The files, by job: [`format`] (the stripe index file, shard names,
//! atomic writes; no I/O beyond a file), `state` (the RAM map of installed
//! stripes the GET path consults), `files` (stripe directories, transfers
//! between nodes), `http` (the `/cluster/v1/ec` routes), `read` (a
//! record read from a stripe, decoding around damaged shards), `install`,
//! `rebuild`, `encode`, `compact` (stripe compaction, retiring and
//! sweeping), `upkeep` (shard scrub, byte counts), and `worker` (the loop
//! that runs them in order).

mod compact;
mod encode;
mod files;
pub mod format;
mod http;
mod install;
mod read;
mod rebuild;
pub(crate) mod state;
mod upkeep;
mod worker;

pub use format::{decode_index, encode_index, IndexEntry};
pub(crate) use http::{delete_stripe, get_file, put_file, status};
pub(crate) use read::read_record;
pub use rebuild::rebuild_target;
pub use state::EcStats;
pub(crate) use worker::run;
