//! Cluster authentication: the members of a cluster (nodes, the metadata
//! service, clients on the direct path) share a secret,
//! `STRATA_CLUSTER_SECRET`, and every request between them carries an
//! HMAC-SHA256 of what it asks for, keyed by that secret
//! (docs/security.md, "Cluster traffic").
//!
//! The header is `x-strata-auth: v2 SENDER SEQ UNIX_MS DIGEST HEX`:
//! `SENDER` a random 64-bit id (16 hex digits) the sending process draws
//! for each destination it speaks to, `SEQ` that sender's count of
//! requests to it (from 1), `DIGEST` the BLAKE3 hash of the body (64 hex
//! digits), and `HEX` the HMAC over the lines `v2`, the method, the path
//! with its query, the table version header (empty if none), the stamp
//! header (empty if none), the `Host` header (the destination's
//! `host:port`), the body's length, `SENDER`, `SEQ`, `UNIX_MS` and
//! `DIGEST`.
//!
//! A receiver checks the head before it reads the body: without the header
//! 401; with a wrong MAC, a time more than [`MAX_SKEW_MS`] from its clock,
//! a `Host` that is not one of its own names ([`answer_as`]: a request
//! captured on its way to another member), or a `(SENDER, SEQ)` it
//! admitted before (a replay) 403. The body is then
//! read through [`DigestBody`], which fails the read, and so the request
//! (400, nothing stored), when the bytes do not hash to `DIGEST`. Replays
//! are caught as IPsec's ESP does (RFC 4303, 3.4.3): per sender a window
//! of the last [`WINDOW`] sequence numbers, anything older refused; at
//! most [`MAX_SENDERS`] senders are remembered, and a sender forgotten (or
//! not heard since this process started) is admitted only with a time
//! later than anything it could have been admitted with before. What it
//! does not give: secrecy of the bytes, and integrity of the answers (a
//! party on the path can read both and rewrite an answer); for those, TLS
//! in front or a private network (docs/security.md).

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

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
/// Sequence numbers per sender a receiver remembers: a request may arrive
/// this many behind its sender's newest and still be admitted once.
pub const WINDOW: u64 = 4096;
/// Senders a receiver remembers (each [`WINDOW`] bits, 512 bytes): the
/// least recently heard is forgotten first.
pub const MAX_SENDERS: usize = 4096;
/// Destinations a sender keeps a sequence for before starting afresh.
const MAX_DESTINATIONS: usize = 65_536;

/// A BLAKE3 digest of a body.
pub type Digest = [u8; 32];

/// The digest of `body`.
pub fn body_digest(body: &[u8]) -> Digest {
    *blake3::hash(body).as_bytes()
}

/// A cluster secret, with the sequence numbers this process signs under it.
#[derive(Clone)]
pub struct ClusterSecret {
    key: Arc<[u8]>,
    senders: Arc<Mutex<HashMap<String, (u64, u64)>>>,
}

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
    /// The first version's header, which signs no body (403).
    Outdated,
    /// A time too far from the receiver's clock (403).
    Skewed,
    /// A MAC that does not match (403).
    Wrong,
    /// A request admitted once already, or too old to tell (403).
    Replayed,
    /// A request signed for another destination (403).
    NotForMe,
}

impl std::fmt::Display for AuthFault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            AuthFault::Missing => {
                "cluster request without credentials: set STRATA_CLUSTER_SECRET to the cluster's secret"
            }
            AuthFault::Malformed => "malformed x-strata-auth header",
            AuthFault::Outdated => {
                "x-strata-auth v1 signs no body and is no longer accepted: every member of the \
                 cluster must run this Strata version or later (docs/security.md, \"Cluster traffic\")"
            }
            AuthFault::Skewed => "x-strata-auth time is more than 5 minutes from this node's clock",
            AuthFault::Wrong => "x-strata-auth does not match: not this cluster's secret",
            AuthFault::NotForMe => {
                "x-strata-auth was signed for a Host this member does not answer as: a request \
                 meant for another member, or a name of this one it was not given (strata meta \
                 --answer-as, strata server --advertise)"
            }
            AuthFault::Replayed => {
                "x-strata-auth was admitted before (a replayed request), or is older than what \
                 this node remembers of its sender"
            }
        })
    }
}

/// What a request's MAC covers, besides its body.
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
    /// The `Host` header: the destination's `host:port`.
    pub host: &'a str,
}

/// The parts of a v2 header.
struct Header {
    sender: u64,
    seq: u64,
    at: u64,
    digest: Digest,
    tag: [u8; 32],
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Lowercase hex of `bytes`.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    if text.len() != 64 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, o) in out.iter_mut().enumerate() {
        *o = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

impl Header {
    fn parse(h: &str) -> Result<Header, AuthFault> {
        let mut parts = h.split(' ');
        match parts.next() {
            Some("v2") => {}
            Some("v1") => return Err(AuthFault::Outdated),
            _ => return Err(AuthFault::Malformed),
        }
        let (Some(sender), Some(seq), Some(at), Some(digest), Some(tag), None) = (
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
            parts.next(),
        ) else {
            return Err(AuthFault::Malformed);
        };
        let sender = (sender.len() == 16)
            .then(|| u64::from_str_radix(sender, 16).ok())
            .flatten()
            .ok_or(AuthFault::Malformed)?;
        let seq: u64 = seq.parse().map_err(|_| AuthFault::Malformed)?;
        let at: u64 = at.parse().map_err(|_| AuthFault::Malformed)?;
        if seq == 0 {
            return Err(AuthFault::Malformed);
        }
        Ok(Header {
            sender,
            seq,
            at,
            digest: unhex32(digest).ok_or(AuthFault::Malformed)?,
            tag: unhex32(tag).ok_or(AuthFault::Malformed)?,
        })
    }
}

impl ClusterSecret {
    fn from_key(key: &[u8]) -> ClusterSecret {
        ClusterSecret {
            key: Arc::from(key),
            senders: Arc::default(),
        }
    }

    /// A secret from its text; at least [`MIN_SECRET_LEN`] bytes.
    pub fn new(text: &str) -> Result<ClusterSecret, String> {
        if text.len() < MIN_SECRET_LEN {
            return Err(format!(
                "{SECRET_ENV} must be at least {MIN_SECRET_LEN} characters"
            ));
        }
        Ok(ClusterSecret::from_key(text.as_bytes()))
    }

    /// A fresh random secret (a cluster of one without one set: nothing
    /// outside the process can then speak the node protocol to it).
    pub fn generate() -> ClusterSecret {
        use rand::Rng;
        let mut b = [0u8; 32];
        rand::rng().fill(&mut b[..]);
        ClusterSecret::from_key(&b)
    }

    fn mac(&self, s: &Signed<'_>, len: u64, h: &Header) -> Hmac<Sha256> {
        let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(&self.key)
            .expect("HMAC takes a key of any length");
        let opt = |v: Option<u64>| v.map(|x| x.to_string()).unwrap_or_default();
        let text = format!(
            "v2\n{}\n{}\n{}\n{}\n{}\n{len}\n{:016x}\n{}\n{}\n{}",
            s.method,
            s.path,
            opt(s.version),
            opt(s.stamp),
            s.host,
            h.sender,
            h.seq,
            h.at,
            hex(&h.digest)
        );
        m.update(text.as_bytes());
        m
    }

    /// This process's sender id for `dest` and its next sequence number.
    fn next_seq(&self, dest: &str) -> (u64, u64) {
        let mut senders = self.senders.lock().unwrap_or_else(|p| p.into_inner());
        if senders.len() >= MAX_DESTINATIONS && !senders.contains_key(dest) {
            // Fresh ids for all: a receiver takes a new sender as new.
            senders.clear();
        }
        // The key is copied only for a destination not seen before.
        if !senders.contains_key(dest) {
            use rand::Rng;
            senders.insert(dest.to_string(), (rand::rng().random::<u64>(), 0));
        }
        let e = senders.get_mut(dest).expect("inserted above");
        e.1 += 1;
        (e.0, e.1)
    }

    /// The `x-strata-auth` value for a request with `body`, sent now (to
    /// `s.host`, which the request's `Host` header must name as written).
    pub fn sign(&self, s: &Signed<'_>, body: &[u8]) -> String {
        self.sign_digested(s, body.len() as u64, body_digest(body))
    }

    /// [`sign`](Self::sign) for a body of `len` bytes whose digest the
    /// caller has ([`body_digest`]): one hash for a body sent to several
    /// replicas.
    pub fn sign_digested(&self, s: &Signed<'_>, len: u64, digest: Digest) -> String {
        let (sender, seq) = self.next_seq(s.host);
        let mut h = Header {
            sender,
            seq,
            at: now_ms(),
            digest,
            tag: [0; 32],
        };
        h.tag = self.mac(s, len, &h).finalize().into_bytes().into();
        format!(
            "v2 {:016x} {} {} {} {}",
            h.sender,
            h.seq,
            h.at,
            hex(&h.digest),
            hex(&h.tag)
        )
    }

    /// Checks a request's `x-strata-auth` value against what it asks for
    /// and the body length it declares, and admits it once in `replay`:
    /// the digest its body must have.
    pub fn verify_in(
        &self,
        replay: &Mutex<ReplayGuard>,
        header: Option<&str>,
        s: &Signed<'_>,
        len: u64,
    ) -> Result<Digest, AuthFault> {
        let h = Header::parse(header.ok_or(AuthFault::Missing)?)?;
        if now_ms().abs_diff(h.at) > MAX_SKEW_MS {
            return Err(AuthFault::Skewed);
        }
        // verify_slice compares in constant time.
        self.mac(s, len, &h)
            .verify_slice(&h.tag)
            .map_err(|_| AuthFault::Wrong)?;
        if !answers_as(s.host) {
            return Err(AuthFault::NotForMe);
        }
        replay
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .admit(h.sender, h.seq, h.at)?;
        Ok(h.digest)
    }

    /// [`verify_in`](Self::verify_in) against this process's replay guard.
    pub fn verify(
        &self,
        header: Option<&str>,
        s: &Signed<'_>,
        len: u64,
    ) -> Result<Digest, AuthFault> {
        self.verify_in(process_guard(), header, s, len)
    }

    /// Checks the credentials of a received request on its head (method,
    /// path with query, the MAC, the table version, the stamp, the `Host`,
    /// the body's declared length) and admits it once: the digest its body
    /// must have.
    pub fn verify_head(
        &self,
        method: &str,
        path_and_query: &str,
        headers: &axum::http::HeaderMap,
    ) -> Result<Digest, AuthFault> {
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
            host: headers
                .get(axum::http::header::HOST)
                .and_then(|v| v.to_str().ok())
                .unwrap_or(""),
        };
        let given = headers.get(AUTH_HEADER).and_then(|v| v.to_str().ok());
        self.verify(given, &signed, num("content-length").unwrap_or(0))
    }

    /// [`verify_head`](Self::verify_head) for a received request, given
    /// back with its body read through [`DigestBody`].
    #[allow(clippy::result_large_err)]
    pub fn admit(&self, req: axum::extract::Request) -> Result<axum::extract::Request, AuthFault> {
        let path = req
            .uri()
            .path_and_query()
            .map_or(req.uri().path(), |p| p.as_str());
        let digest = self.verify_head(req.method().as_str(), path, req.headers())?;
        let (parts, body) = req.into_parts();
        Ok(axum::extract::Request::from_parts(
            parts,
            axum::body::Body::new(DigestBody::new(body, digest)),
        ))
    }
}

/// The replay guard of a receiving process: per sender, the newest
/// sequence number admitted and which of the [`WINDOW`] before it were.
#[derive(Debug)]
pub struct ReplayGuard {
    senders: HashMap<u64, Window>,
    /// A sender not remembered is admitted only with a time after this:
    /// when the guard was made, or the newest time of a sender forgotten.
    floor_ms: u64,
    tick: u64,
}

#[derive(Debug)]
struct Window {
    top: u64,
    seen: Box<[u64; (WINDOW / 64) as usize]>,
    /// The newest time this sender signed that was admitted.
    newest_ms: u64,
    /// Times at or before this are refused (the guard's floor when the
    /// sender was first heard).
    floor_ms: u64,
    used: u64,
}

impl Window {
    fn bit(seq: u64) -> (usize, u64) {
        let i = seq % WINDOW;
        ((i / 64) as usize, 1u64 << (i % 64))
    }

    fn admit(&mut self, seq: u64) -> bool {
        if seq > self.top {
            // Forget the numbers the window slides past.
            if seq - self.top >= WINDOW {
                self.seen.fill(0);
            } else {
                for s in self.top + 1..=seq {
                    let (w, b) = Window::bit(s);
                    self.seen[w] &= !b;
                }
            }
            self.top = seq;
        } else if self.top - seq >= WINDOW {
            return false;
        }
        let (w, b) = Window::bit(seq);
        if self.seen[w] & b != 0 {
            return false;
        }
        self.seen[w] |= b;
        true
    }
}

impl ReplayGuard {
    /// A guard that admits no sender's request signed at or before
    /// `floor_ms` (this process's start: what it admitted before is gone).
    pub fn new(floor_ms: u64) -> ReplayGuard {
        ReplayGuard {
            senders: HashMap::new(),
            floor_ms,
            tick: 0,
        }
    }

    /// Admits `(sender, seq)` signed at `at` once.
    fn admit(&mut self, sender: u64, seq: u64, at: u64) -> Result<(), AuthFault> {
        self.tick += 1;
        if !self.senders.contains_key(&sender) {
            if at <= self.floor_ms {
                return Err(AuthFault::Replayed);
            }
            if self.senders.len() >= MAX_SENDERS {
                let oldest = self
                    .senders
                    .iter()
                    .min_by_key(|(_, w)| w.used)
                    .map(|(k, w)| (*k, w.newest_ms));
                if let Some((k, newest)) = oldest {
                    self.senders.remove(&k);
                    self.floor_ms = self.floor_ms.max(newest);
                }
            }
            self.senders.insert(
                sender,
                Window {
                    top: seq,
                    seen: Box::new([0; (WINDOW / 64) as usize]),
                    newest_ms: at,
                    floor_ms: self.floor_ms,
                    used: self.tick,
                },
            );
        }
        let w = self.senders.get_mut(&sender).expect("inserted above");
        if at <= w.floor_ms || !w.admit(seq) {
            return Err(AuthFault::Replayed);
        }
        w.newest_ms = w.newest_ms.max(at);
        w.used = self.tick;
        Ok(())
    }

    /// Senders remembered.
    pub fn senders(&self) -> usize {
        self.senders.len()
    }
}

/// The names this process answers to, as `host:port` (lowercase); a port
/// alone when it listens on every address of the machine.
#[derive(Debug, Default)]
struct OwnNames {
    exact: Vec<String>,
    any_host_on: Vec<u16>,
}

static NAMES: Mutex<OwnNames> = Mutex::new(OwnNames {
    exact: Vec::new(),
    any_host_on: Vec::new(),
});

/// Adds a name this process answers to: a listener's bound address (an
/// unspecified one, `0.0.0.0:P` or `[::]:P`, takes any host on port `P`)
/// or an advertised `host:port`. A request signed for a `Host` not among
/// them is refused ([`AuthFault::NotForMe`]); a process that named none
/// (only clients, which serve no cluster route) takes any.
pub fn answer_as(authority: &str) {
    NAMES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .add(authority);
}

/// Whether `host` (a request's `Host` header) names this process.
fn answers_as(host: &str) -> bool {
    NAMES
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .accepts(host)
}

impl OwnNames {
    fn add(&mut self, authority: &str) {
        let a = authority.trim().to_ascii_lowercase();
        match a.parse::<std::net::SocketAddr>() {
            Ok(sa) if sa.ip().is_unspecified() => self.any_host_on.push(sa.port()),
            Ok(sa) if sa.ip().is_loopback() => {
                self.exact.push(format!("localhost:{}", sa.port()));
                self.exact.push(a);
            }
            _ => self.exact.push(a),
        }
    }

    fn accepts(&self, host: &str) -> bool {
        if self.exact.is_empty() && self.any_host_on.is_empty() {
            return true;
        }
        self.exact.iter().any(|n| n.eq_ignore_ascii_case(host))
            || host
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse::<u16>().ok())
                .is_some_and(|p| self.any_host_on.contains(&p))
    }
}

static GUARD: OnceLock<Mutex<ReplayGuard>> = OnceLock::new();

/// This process's replay guard, made at its first use or by [`arm`].
fn process_guard() -> &'static Mutex<ReplayGuard> {
    GUARD.get_or_init(|| Mutex::new(ReplayGuard::new(now_ms())))
}

/// Starts this process's replay guard now, before its listeners accept:
/// requests signed after this moment are admitted (once). A process that
/// serves cluster routes calls it at start; so does the first use of this
/// process's secret ([`install`], [`process_secret`]), which comes before
/// this process signs anything, so that what it sends itself is never
/// older than its guard.
pub fn arm() {
    let _ = process_guard();
}

/// A request body that fails its last read unless its bytes hash to the
/// digest the request's MAC covers: a handler that reads it whole (axum's
/// `Bytes`, `Json`) then refuses the request with 400 before it acts.
pub struct DigestBody {
    inner: axum::body::Body,
    hasher: blake3::Hasher,
    want: Digest,
    checked: bool,
}

impl DigestBody {
    /// `inner`, checked against `want`.
    pub fn new(inner: axum::body::Body, want: Digest) -> DigestBody {
        DigestBody {
            inner,
            hasher: blake3::Hasher::new(),
            want,
            checked: false,
        }
    }
}

/// The error a [`DigestBody`] ends with when its bytes were changed.
#[derive(Debug)]
pub struct BodyMismatch;

impl std::fmt::Display for BodyMismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(
            "the body does not match the digest its x-strata-auth signs: changed on the way",
        )
    }
}

impl std::error::Error for BodyMismatch {}

impl http_body::Body for DigestBody {
    type Data = bytes::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<bytes::Bytes>, axum::Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.hasher.update(d);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(None) if !this.checked => {
                this.checked = true;
                if *this.hasher.finalize().as_bytes() == this.want {
                    Poll::Ready(None)
                } else {
                    Poll::Ready(Some(Err(axum::Error::new(BodyMismatch))))
                }
            }
            other => other,
        }
    }

    fn is_end_stream(&self) -> bool {
        // Not before the digest was compared, even for an empty body.
        self.checked
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.inner.size_hint()
    }
}

/// The write-stamp header (signed with the table version).
pub const STAMP_HEADER: &str = "x-strata-stamp";

static PROCESS: OnceLock<Option<ClusterSecret>> = OnceLock::new();

/// Sets this process's cluster secret (before any request is sent): a
/// cluster of one without `STRATA_CLUSTER_SECRET` installs a generated one.
/// Answers false if the process's secret was already settled.
pub fn install(secret: Option<ClusterSecret>) -> bool {
    arm();
    PROCESS.set(secret).is_ok()
}

/// This process's cluster secret: the installed one, else
/// `STRATA_CLUSTER_SECRET` from the environment (None if unset, empty or
/// too short: [`from_env`] says why).
pub fn process_secret() -> Option<ClusterSecret> {
    arm();
    PROCESS.get_or_init(|| from_env().ok().flatten()).clone()
}

/// This process's cluster secret, made up (and kept for the process's
/// life) when none was installed and `STRATA_CLUSTER_SECRET` is unset: a
/// process that runs a cluster of one inside itself (`strata demo`,
/// `strata upgrade`, a node without a secret) speaks the node protocol
/// only to itself.
pub fn process_secret_or_generate() -> ClusterSecret {
    arm();
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

    fn req() -> Signed<'static> {
        Signed {
            method: "PUT",
            path: "/cluster/v1/rows/3/objects/b/k",
            version: Some(7),
            stamp: Some(123),
            host: "n1:80",
        }
    }

    fn guard() -> Mutex<ReplayGuard> {
        Mutex::new(ReplayGuard::new(now_ms() - 1))
    }

    #[test]
    fn signed_requests_verify_and_anything_else_is_refused() {
        let s = ClusterSecret::new("0123456789abcdef-secret").unwrap();
        let body = b"0123456789";
        let check = |h: &str, r: &Signed<'_>, len: u64| s.verify_in(&guard(), Some(h), r, len);
        let h = s.sign(&req(), body);
        assert_eq!(check(&h, &req(), 10), Ok(body_digest(body)));
        // Another length, path, version, stamp or secret: refused.
        assert_eq!(check(&h, &req(), 11), Err(AuthFault::Wrong));
        let mut other = req();
        other.path = "/cluster/v1/rows/4/objects/b/k";
        assert_eq!(check(&h, &other, 10), Err(AuthFault::Wrong));
        other = req();
        other.version = None;
        assert_eq!(check(&h, &other, 10), Err(AuthFault::Wrong));
        let t = ClusterSecret::new("another-secret-of-16").unwrap();
        assert_eq!(
            t.verify_in(&guard(), Some(&h), &req(), 10),
            Err(AuthFault::Wrong)
        );
        assert_eq!(
            s.verify_in(&guard(), None, &req(), 10),
            Err(AuthFault::Missing)
        );
        // Another digest under the same MAC: refused.
        let mut parts: Vec<&str> = h.split(' ').collect();
        let zeros = "0".repeat(64);
        parts[4] = &zeros;
        assert_eq!(check(&parts.join(" "), &req(), 10), Err(AuthFault::Wrong));
        for bad in ["", "v2", "v3 1 00", "v2 x 1 1 00 00", &h[..h.len() - 1]] {
            assert_eq!(check(bad, &req(), 10), Err(AuthFault::Malformed), "{bad}");
        }
        // The first version's header (no body digest) is refused as such.
        let v1 = format!("v1 {} {}", now_ms(), "ab".repeat(32));
        assert_eq!(check(&v1, &req(), 10), Err(AuthFault::Outdated));
        assert!(ClusterSecret::new("short").is_err());
    }

    #[test]
    fn an_old_time_is_refused_even_with_the_right_mac() {
        let s = ClusterSecret::new("0123456789abcdef-secret").unwrap();
        let mut h = Header {
            sender: 9,
            seq: 1,
            at: now_ms() - MAX_SKEW_MS - 1000,
            digest: body_digest(b""),
            tag: [0; 32],
        };
        h.tag = s.mac(&req(), 0, &h).finalize().into_bytes().into();
        let text = format!(
            "v2 {:016x} 1 {} {} {}",
            h.sender,
            h.at,
            hex(&h.digest),
            hex(&h.tag)
        );
        assert_eq!(
            s.verify_in(&guard(), Some(&text), &req(), 0),
            Err(AuthFault::Skewed)
        );
    }

    #[test]
    fn a_request_is_admitted_once_and_reordering_within_the_window_is_kept() {
        let s = ClusterSecret::new("0123456789abcdef-secret").unwrap();
        let g = guard();
        let signed: Vec<String> = (0..10).map(|_| s.sign(&req(), b"x")).collect();
        // Out of order, then every one again.
        for i in [3, 0, 9, 1, 2, 8, 4, 5, 7, 6] {
            assert!(s.verify_in(&g, Some(&signed[i]), &req(), 1).is_ok(), "{i}");
        }
        for h in &signed {
            assert_eq!(
                s.verify_in(&g, Some(h), &req(), 1),
                Err(AuthFault::Replayed)
            );
        }
        // Another destination has a sender of its own.
        let mut n2 = req();
        n2.host = "n2:80";
        let other = s.sign(&n2, b"x");
        assert_ne!(other.split(' ').nth(1), signed[0].split(' ').nth(1));
        assert!(s.verify_in(&g, Some(&other), &n2, 1).is_ok());
        // Signed for n2, sent to n1 with n1's Host: the MAC fails.
        assert_eq!(
            s.verify_in(&g, Some(&other), &req(), 1),
            Err(AuthFault::Wrong)
        );
    }

    #[test]
    fn the_window_slides_and_forgets_only_what_it_must() {
        let mut w = ReplayGuard::new(0);
        let t = 1000;
        assert!(w.admit(1, 5, t).is_ok());
        assert!(w.admit(1, 5 + WINDOW - 1, t).is_ok());
        // 5 is still inside: refused as seen; 6 was never seen: admitted.
        assert_eq!(w.admit(1, 5, t), Err(AuthFault::Replayed));
        assert!(w.admit(1, 6, t).is_ok());
        // One further and 5's slot is reused for 5 + WINDOW: 5 is now too
        // old, not mistaken for new.
        assert!(w.admit(1, 5 + WINDOW, t).is_ok());
        assert_eq!(w.admit(1, 5, t), Err(AuthFault::Replayed));
        // 6, the oldest inside, was seen; 7 was not.
        assert_eq!(w.admit(1, 6, t), Err(AuthFault::Replayed));
        assert!(w.admit(1, 7, t).is_ok());
        // A long jump clears all.
        assert!(w.admit(1, 100 * WINDOW, t).is_ok());
        assert!(w.admit(1, 100 * WINDOW - 1, t).is_ok());
        assert_eq!(w.admit(1, 100 * WINDOW - 1, t), Err(AuthFault::Replayed));
    }

    #[test]
    fn a_forgotten_or_unknown_sender_cannot_replay_what_was_admitted_before() {
        // Made at 1000: nothing signed before is admitted.
        let mut w = ReplayGuard::new(1000);
        assert_eq!(w.admit(1, 1, 999), Err(AuthFault::Replayed));
        assert!(w.admit(1, 1, 1001).is_ok());
        // Fill the table; the least recently heard (sender 1, newest 1001)
        // is forgotten, and the floor rises to its newest time.
        for s in 2..=MAX_SENDERS as u64 + 1 {
            assert!(w.admit(s, 1, 2000 + s).is_ok());
        }
        assert_eq!(w.senders(), MAX_SENDERS);
        assert_eq!(w.admit(1, 1, 1001), Err(AuthFault::Replayed));
        // A new request of the forgotten sender is admitted.
        assert!(w.admit(1, 2, 10_000).is_ok());
        assert_eq!(w.senders(), MAX_SENDERS);
    }

    #[test]
    fn a_receiver_answers_only_to_its_own_names() {
        let mut n = OwnNames::default();
        assert!(n.accepts("anything:1"), "a process that named none");
        n.add("127.0.0.1:7001");
        n.add("Node-A.example:7001");
        assert!(n.accepts("127.0.0.1:7001"));
        assert!(n.accepts("localhost:7001"), "loopback is also localhost");
        assert!(n.accepts("node-a.example:7001"));
        assert!(!n.accepts("127.0.0.1:7002"));
        assert!(!n.accepts("node-b.example:7001"));
        assert!(!n.accepts(""));
        n.add("0.0.0.0:9000");
        n.add("[::]:9001");
        assert!(n.accepts("10.1.2.3:9000"));
        assert!(n.accepts("meta.example:9001"));
        assert!(!n.accepts("meta.example:9002"));
    }

    #[tokio::test]
    async fn a_body_changed_on_the_way_fails_its_read() {
        use http_body_util::BodyExt;
        let good = axum::body::Body::from("hello");
        let read = DigestBody::new(good, body_digest(b"hello")).collect().await;
        assert_eq!(read.unwrap().to_bytes().as_ref(), b"hello");
        let swapped = axum::body::Body::from("jello");
        let read = DigestBody::new(swapped, body_digest(b"hello"))
            .collect()
            .await;
        let Err(e) = read else {
            panic!("a changed body fails its read")
        };
        let e = e.to_string();
        assert!(e.contains("does not match"), "{e}");
        let empty = axum::body::Body::empty();
        assert!(DigestBody::new(empty, body_digest(b"x"))
            .collect()
            .await
            .is_err());
    }
}
