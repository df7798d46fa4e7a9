//! The cluster's request signatures (`x-strata-auth`, docs/security.md):
//! never panic on any header value, and never accept a forged one.
#![no_main]

use libfuzzer_sys::fuzz_target;
use strata_meta::cluster_auth::{ClusterSecret, Signed};

fuzz_target!(|data: &[u8]| {
    let secret = ClusterSecret::new("strata-fuzz-cluster-secret").expect("secret");
    let text = String::from_utf8_lossy(data);
    let s = Signed {
        method: "PUT",
        path: "/cluster/v1/rows/1/objects/b/k",
        version: Some(3),
        stamp: Some(5),
        len: 10,
    };
    assert!(
        secret.verify(Some(&text), &s).is_err(),
        "a fuzzed header was accepted: {text:?}"
    );
    // Headers as a request would carry them, one `name: value` per line.
    let mut h = http::HeaderMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_str(v.trim()),
            ) {
                h.append(k, v);
            }
        }
    }
    assert!(secret
        .verify_request("GET", "/cluster/v1/status", &h)
        .is_err());
});
