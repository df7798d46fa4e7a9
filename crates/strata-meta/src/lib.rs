//! Strata's metadata service: Haystack's Directory and FDS's metadata
//! server, off the data path.
//!
//! It keeps membership (nodes with heartbeats, disks with tier class and
//! capacity), the placement table and its versions, the recovery in
//! progress, and the lab's tier plan. A single node keeps this in a file
//! ([`backend::FileBackend`], no extra process); a cluster keeps it in etcd
//! ([`backend::EtcdBackend`]). Clients fetch the map once
//! (`GET /v1/map`) and then talk to nodes directly.
//!
//! The health checker ([`MetaService::run_health_checker`], Haystack's
//! pitchfork) probes silent nodes and declares them dead, which publishes a
//! new table version with their disks replaced in every row and plans the
//! row copies that bring every row back to full replication.

#![warn(missing_docs)]

pub mod api;
pub mod backend;
pub mod cluster_auth;
mod error;
pub mod etcd;
pub mod http;
pub mod journal;
mod service;
pub mod state;

pub use error::MetaError;
pub use service::{HealthConfig, MetaService};
