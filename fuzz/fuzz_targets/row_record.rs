//! Row records (docs/recovery.md: the needle data of a cluster row) and
//! the head-record parser of the client: never panic on any bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(d) = strata_server::rows::decode(data) {
        let _ = strata_client::protocol::parse_head(&bytes::Bytes::copy_from_slice(d.record));
    }
    let _ = strata_client::protocol::parse_head(&bytes::Bytes::copy_from_slice(data));
    let _ = strata_node::object::ObjectHeader::decode(&bytes::Bytes::copy_from_slice(data));
});
