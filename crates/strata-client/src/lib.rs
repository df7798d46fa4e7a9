//! Strata's Rust client library.
//!
//! [`Client::connect`] fetches the cluster map (placement table and node
//! addresses) from the metadata service once. Every operation then computes
//! the object's row from a hash of `(bucket, key)` and talks to the row's
//! nodes directly, as FDS clients do:
//!
//! - a write goes to every live replica of the row at once and succeeds only
//!   when all of them answered that the object is durable;
//! - a read goes to one replica chosen at random and fails over to another
//!   on an error, a timeout or a "not found" (a replacement may still be
//!   filling);
//! - every request carries the table version; a node refuses a stale one
//!   (409) and the client fetches the new map and retries.
//!
//! Objects larger than the table's tract size are split into tracts on
//! consecutive rows; the metadata tract (−1) holds a small manifest.
//! [`Client`] is `Send + Sync` and cheap to share in an `Arc`: issue as many
//! operations concurrently as you like (FDS clients kept dozens in flight).
//!
//! ```no_run
//! # async fn demo() -> Result<(), strata_client::ClientError> {
//! let client = strata_client::Client::connect("127.0.0.1:7000", Default::default()).await?;
//! client.put("photos", "cat.jpg", bytes::Bytes::from_static(b"...")).await?;
//! let back = client.get("photos", "cat.jpg").await?;
//! assert_eq!(back.as_deref(), Some(&b"..."[..]));
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod client;
mod error;
mod http;
pub mod replica;
pub mod view;

pub use client::{Client, ClientConfig, ClientStats, HeadRead, Staged};
pub use error::ClientError;
pub use http::{set_pool_idle, Http, HttpResponse};
pub use replica::Replica;
pub use strata_meta::state::{BucketRecord, KeyRecord, Permission};
pub use view::{ClusterView, Placement};
