//! Strata's load generator (`strata bench http`, Haystack's Haystress):
//! [`loadgen`] drives a Strata node or cluster, or SeaweedFS side by side,
//! over [`client`], a minimal HTTP/1.1 client with one kept-alive
//! connection per worker (no pool between the worker and the server). The
//! demo uses the same client.

#![warn(missing_docs)]

pub mod client;
pub mod loadgen;
