//! One module per subcommand (or family of subcommands).

pub mod analyze;
pub mod bench;
pub mod bench_ec;
pub mod bench_http;
pub mod bench_listing;
pub mod bench_store;
pub mod client;
pub mod cluster;
pub mod cost;
pub mod demo;
pub mod devices;
pub mod key;
pub mod meta;
pub mod model;
pub mod mrc;
pub mod provision;
pub mod report;
pub mod server;
pub mod sim;
pub mod store;
pub mod synth;
pub mod torture;
pub mod trace;
pub mod upgrade;
