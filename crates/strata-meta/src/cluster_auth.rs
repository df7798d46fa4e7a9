//! Cluster authentication: the members of a cluster (nodes, the metadata
//! service, clients on the direct path) share a secret,
//! `STRATA_CLUSTER_SECRET`, and every request between them carries an
//! HMAC-SHA256 of what it asks for, keyed by that secret
//! (docs/security.md, "Cluster traffic").
//!
//! The header is `x-strata-auth: v1 UNIX_MS HEX`, where `HEX` is the HMAC
//! over the lines `v1`, the method, the path with its query, the table
//! version header (empty if none), the stamp header (empty if none),
//! `UNIX_MS` and the body's length. A receiver refuses a request without
//! it (401), with a wrong MAC or one more than [`MAX_SKEW_MS`] away from
//! its clock (403), before the request touches a store. What it does not
//! give: secrecy of the bytes, and protection of a request's body against
//! a party on the path that can rewrite it (only its length is signed);
//! for those, TLS in front or a private network (docs/security.md).

use std::sync::{Arc, OnceLock};

use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// The environment variable holding the cluster secret.
pub const SECRET_ENV: &str = "STRATA_CLUSTER_SECRET";
/// The request header carrying the MAC.
pub const AUTH_HEADER: &str = "x-strata-auth";
/// How far a request's time may be from the receiver's clock.
pub const MAX_SKEW_MS: u64 = 5 * 60 * 1000;
/// Shortest secret accepted.
pub const MIN_SECRET_LEN: usize = 16;

/// A cluster secret.
#[derive(Clone)]
pub struct ClusterSecret(Arc<[u8]>);

impl std::fmt::Debug for ClusterSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClusterSecret(..)")
    }
}

/// Why a request's credentials were refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthFault {
    /// No `x-strata-auth` header (401).
    Missing,
    /// A header that does not parse (403).
    Malformed,
    /// A time too far from the receiver's clock (403).
    Skewed,
    /// A MAC that does not match (403).
    Wrong,
}

impl std::fmt::Display for AuthFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFault::Missing => {
                "cluster request without credentials: set STRATA_CLUSTER_SECRET to the cluster's secret"
            }
            AuthFault::Malformed => "malformed x-strata-auth header",
            AuthFault::Skewed => "x-strata-auth time is more than 5 minutes from this node's clock",
            AuthFault::Wrong => "x-strata-auth does not match: not this cluster's secret",
        })
    }
}

/// What a request's MAC covers.
#[derive(Clone, Copy, Debug)]
pub struct Signed<'a> {
    /// Method (`GET`, `PUT`, ...).
    pub method: &'a str,
    /// Path with its query.
    pub path: &'a str,
    /// The table version header.
    pub version: Option<u64>,
    /// The stamp header.
    pub stamp: Option<u64>,
    /// Bytes of the body.
    pub len: u64,
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

impl ClusterSecret {
    /// A secret from its text; at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(text: &str) -> Result<ClusterSecret, String> {
        if text.len() < MIN_SECRET_LEN {
            return Err(format!(
                "{SECRET_ENV} must be at least {MIN_SECRET_LEN} characters"
            ));
        }
        Ok(ClusterSecret(Arc::from(text.as_bytes())))
    }

    /// A fresh random secret (a cluster of one without one set: nothing
    /// outside the process can then speak the node protocol to it).
    pub fn generate() -> ClusterSecret {
        use rand::Rng;
        let mut b = [0u8; 32];
        rand::rng().fill(&mut b[..]);
        ClusterSecret(Arc::from(&b[..]))
    }

    fn mac(&self, s: &Signed<'_>, at_ms: u64) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .expect("HMAC takes a key of any length");
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let text = format!(
            "v1\n{}\n{}\n{}\n{}\n{at_ms}\n{}",
            s.method,
            s.path,
            opt(s.version),
            opt(s.stamp),
            s.len
        );
        m.update(text.as_bytes());
        m
    }

    /// The `x-strata-auth` value for a request sent now.
    pub fn sign(&self, s: &Signed<'_>) -> String {
        let at = now_ms();
        let tag = self.mac(s, at).finalize().into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        format!("v1 {at} {hex}")
    }

    /// Checks a request's `x-strata-auth` value.
    pub fn verify(&self, header: Option<&str>, s: &Signed<'_>) -> Result<(), AuthFault> {
        let h = header.ok_or(AuthFault::Missing)?;
        let mut parts = h.split(' ');
        let (Some("v1"), Some(at), Some(hex), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(AuthFault::Malformed);
        };
        let at: u64 = at.parse().map_err(|_| AuthFault::Malformed)?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AuthFault::Malformed);
        }
        let tag: Vec<u8> = (0..32)
            .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap_or(0))
            .collect();
        if now_ms().abs_diff(at) > MAX_SKEW_MS {
            return Err(AuthFault::Skewed);
        }
        // verify_slice compares in constant time.
        self.mac(s, at)
            .verify_slice(&tag)
            .map_err(|_| AuthFault::Wrong)
    }
}

impl ClusterSecret {
    /// Checks the credentials of a received request: its method, path
    /// with query, and headers (the MAC, the table version, the stamp and
    /// the body's declared length).
    pub fn verify_request(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &axum::http::HeaderMap,
    ) -> Result<(), AuthFault> {
        let num = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok())
        };
        let signed = Signed {
            method,
            path: path_and_query,
            version: num(strata_proto::TABLE_VERSION_HEADER),
            stamp: num(STAMP_HEADER),
            len: num("content-length").unwrap_or(0),
        };
        let given = headers.get(AUTH_HEADER).and_then(|v| v.to_str().ok());
        self.verify(given, &signed)
    }
}

/// The write-stamp header (signed with the table version).
pub const STAMP_HEADER: &str = "x-strata-stamp";

static PROCESS: OnceLock<Option<ClusterSecret>> = OnceLock::new();

/// Sets this process's cluster secret (before any request is sent): a
/// cluster of one without `STRATA_CLUSTER_SECRET` installs a generated one.
/// Answers false if the process's secret was already settled.
pub fn install(secret: Option<ClusterSecret>) -> bool {
    PROCESS.set(secret).is_ok()
}

/// This process's cluster secret: the installed one, else
/// `STRATA_CLUSTER_SECRET` from the environment (None if unset, empty or
/// too short: [`from_env`] says why).
pub fn process_secret() -> Option<ClusterSecret> {
    PROCESS.get_or_init(|| from_env().ok().flatten()).clone()
}

/// This process's cluster secret, made up (and kept for the process's
/// life) when none was installed and `STRATA_CLUSTER_SECRET` is unset: a
/// process that runs a cluster of one inside itself (`strata demo`,
/// `strata upgrade`, a node without a secret) speaks the node protocol
/// only to itself.
pub fn process_secret_or_generate() -> ClusterSecret {
    PROCESS
        .get_or_init(|| {
            Some(
                from_env()
                    .ok()
                    .flatten()
                    .unwrap_or_else(ClusterSecret::generate),
            )
        })
        .clone()
        .unwrap_or_else(ClusterSecret::generate)
}

/// `STRATA_CLUSTER_SECRET`: None when unset or empty, an error when too
/// short.
pub fn from_env() -> Result<Option<ClusterSecret>, String> {
    match std::env::var(SECRET_ENV) {
        Ok(s) if !s.is_empty() => ClusterSecret::new(&s).map(Some),
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(len: u64) -> Signed<'static> {
        Signed {
            method: "PUT",
            path: "/cluster/v1/rows/3/objects/b/k",
            version: Some(7),
            stamp: Some(123),
            len,
        }
    }

    #[test]
    fn signed_requests_verify_and_anything_else_is_refused() {
        let s = ClusterSecret::new("0123456789abcdef-secret").unwrap();
        let h = s.sign(&req(10));
        assert_eq!(s.verify(Some(&h), &req(10)), Ok(()));
        // Another length, path, version, stamp or secret: refused.
        assert_eq!(s.verify(Some(&h), &req(11)), Err(AuthFault::Wrong));
        let mut other = req(10);
        other.path = "/cluster/v1/rows/4/objects/b/k";
        assert_eq!(s.verify(Some(&h), &other), Err(AuthFault::Wrong));
        other = req(10);
        other.version = None;
        assert_eq!(s.verify(Some(&h), &other), Err(AuthFault::Wrong));
        let t = ClusterSecret::new("another-secret-of-16").unwrap();
        assert_eq!(t.verify(Some(&h), &req(10)), Err(AuthFault::Wrong));
        assert_eq!(s.verify(None, &req(10)), Err(AuthFault::Missing));
        for bad in ["", "v1", "v2 1 00", "v1 x 00", "v1 1 zz", &h[..h.len() - 1]] {
            assert_eq!(
                s.verify(Some(bad), &req(10)),
                Err(AuthFault::Malformed),
                "{bad}"
            );
        }
        // An old signature is refused even with the right MAC.
        let old = now_ms() - MAX_SKEW_MS - 1000;
        let tag = s.mac(&req(10), old).finalize().into_bytes();
        let hex: String = tag.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            s.verify(Some(&format!("v1 {old} {hex}")), &req(10)),
            Err(AuthFault::Skewed)
        );
        assert!(ClusterSecret::new("short").is_err());
    }
}
