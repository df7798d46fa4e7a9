//! The S3 API of a Strata cluster node (docs/s3-compatibility.md).
//!
//! Layered as the native public API is: the `s3s` crate parses each request
//! (REST routes and XML generated from the AWS model), checks its AWS
//! Signature Version 4 against the node's access keys and answers errors as
//! S3 XML; [`service::StrataS3`] maps each operation onto one call of the
//! cluster coordinator ([`strata_client::Client`]), the same one the native
//! API of every node uses, so an object written over S3 reads over the
//! native API and back.

#![warn(missing_docs)]

pub mod auth;
pub mod bounds;
pub mod cluster;
mod crash;
pub mod error;
pub mod intents;
pub mod jobs;
pub mod lifetimes;
pub mod list;
pub mod meta;
pub mod multipart;
pub mod native;
pub mod server;
pub mod service;
mod upload_page;

pub use error::S3Error;
pub use server::{serve, RequestIds, S3Options};
pub use service::DEFAULT_REGION;
