//! Strata's HTTP front, shared by every listener (the public object API,
//! the S3 API, the node protocol and the metadata service; docs/node.md,
//! docs/security.md): the one connection loop with its limits, plain or
//! TLS ([`conns`], [`http`]), per-client bounds and the request-memory
//! budget ([`guard`]), the admin token ([`auth`]), byte ranges
//! ([`range`]) and the live flash dashboard ([`dashboard`]). It knows
//! nothing of placement or storage: handlers come from `strata-server`
//! and `strata-s3`.

#![warn(missing_docs)]

pub mod auth;
pub mod conns;
pub mod dashboard;
pub mod deadline;
pub mod guard;
pub mod http;
pub mod range;

pub use http::HttpLimits;
