//! Erasure coding for Strata's warm tier (f4, OSDI'14): a sealed segment
//! file is cut into K data shards and M parity shards of Reed-Solomon over
//! GF(2^16) (the `reed-solomon-simd` crate), each shard a file of its own
//! on a disk of a distinct node (docs/erasure-coding.md).
//!
//! - **Layout.** Data shard `i` holds bytes `[i·L, (i+1)·L)` of the
//!   segment (the last zero-padded), `L` the shard length, a multiple of
//!   [`BLOCK`]. So a needle's byte range lies in one data shard (or two
//!   neighbours): a healthy read is one read of that shard at the same
//!   offset, as in f4.
//! - **Degraded read.** When that shard is lost, the same block-aligned
//!   range is read from any K surviving shards and decoded: only the range,
//!   never the whole stripe.
//! - **Rebuild** writes lost shards from any K survivors, block range by
//!   block range (bounded memory); **scrub** checks every shard's checksum
//!   and rebuilds the damaged ones.
//! - **Files** are written to a temporary name, fsynced and renamed (the
//!   directory fsynced too): a shard file exists whole or not at all.

#![warn(missing_docs)]

mod shard;

pub use shard::{
    decode_blocks, decode_range, encode_blocks, encode_file, encode_file_staged, header_bytes,
    locate, parse_header, read_range, rebuild, scrub, Code, EcError, ShardHeader, BLOCK,
    HEADER_LEN,
};
