//! Per-client bounds of the object API (docs/security.md): wrong cookies
//! from one address are rate-limited, and the request bytes every handler
//! holds in memory at once are capped, with a share per client.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Wrong cookies one address may send in a burst.
pub const COOKIE_FAILURE_BURST: f64 = 20.0;
/// Wrong cookies per second one address may send in the long run.
pub const COOKIE_FAILURES_PER_SEC: f64 = 2.0;
/// Addresses remembered at most (past it, the ones back to a full allowance
/// are forgotten first).
const MAX_TRACKED: usize = 100_000;

/// A token bucket of cookie failures per client network ([`network_of`]): each failure
/// takes a token, tokens come back at [`COOKIE_FAILURES_PER_SEC`] up to
/// [`COOKIE_FAILURE_BURST`], and an address without tokens is refused
/// (429) until one comes back. Guessing a 32-bit cookie at 2 per second
/// takes decades.
#[derive(Debug)]
pub struct CookieLimiter {
    burst: f64,
    per_sec: f64,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Default for CookieLimiter {
    fn default() -> Self {
        CookieLimiter::new(COOKIE_FAILURE_BURST, COOKIE_FAILURES_PER_SEC)
    }
}

/// The network a client address is counted under: its IPv4 /24 (all of
/// 127.0.0.0/8 as one: every loopback address is the same host), its IPv6
/// /64 (what one subscriber is given), an IPv4-mapped IPv6 address as its
/// IPv4. A client that owns many addresses of one network (38 loopback
/// addresses gave 760 guesses in 0.1 s before issue 34) shares one
/// allowance.
pub fn network_of(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) if v4.is_loopback() => IpAddr::V4(std::net::Ipv4Addr::new(127, 0, 0, 0)),
        IpAddr::V4(v4) => IpAddr::V4((u32::from(v4) & 0xFFFF_FF00).into()),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => network_of(IpAddr::V4(v4)),
            None => IpAddr::V6((u128::from(v6) & !((1u128 << 64) - 1)).into()),
        },
    }
}

impl CookieLimiter {
    /// A limiter allowing `burst` failures at once and `per_sec` after.
    pub fn new(burst: f64, per_sec: f64) -> CookieLimiter {
        CookieLimiter {
            burst: burst.max(1.0),
            per_sec: per_sec.max(f64::MIN_POSITIVE),
            buckets: Mutex::new(HashMap::new()),
        }
    }

    fn level(&self, tokens: f64, since: Instant, now: Instant) -> f64 {
        (tokens + now.duration_since(since).as_secs_f64() * self.per_sec).min(self.burst)
    }

    /// `Err(wait)` while `ip`'s network ([`network_of`]) has no failure
    /// left to spend.
    pub fn check(&self, ip: IpAddr) -> Result<(), Duration> {
        let ip = network_of(ip);
        let now = Instant::now();
        let g = self.buckets.lock();
        match g.get(&ip) {
            Some(&(tokens, since)) => {
                let t = self.level(tokens, since, now);
                if t < 1.0 {
                    Err(Duration::from_secs_f64((1.0 - t) / self.per_sec))
                } else {
                    Ok(())
                }
            }
            None => Ok(()),
        }
    }

    /// Counts a wrong (or missing, where required) cookie from `ip`
    /// against its network.
    pub fn failed(&self, ip: IpAddr) {
        let ip = network_of(ip);
        let now = Instant::now();
        let mut g = self.buckets.lock();
        if g.len() >= MAX_TRACKED && !g.contains_key(&ip) {
            let burst = self.burst;
            g.retain(|_, (t, s)| {
                (*t + now.duration_since(*s).as_secs_f64() * self.per_sec) < burst
            });
            if g.len() >= MAX_TRACKED {
                // Every tracked address is limited: forget the fullest half.
                let mut levels: Vec<f64> =
                    g.values().map(|&(t, s)| self.level(t, s, now)).collect();
                levels.sort_by(f64::total_cmp);
                let cut = levels[levels.len() / 2];
                g.retain(|_, (t, s)| self.level(*t, *s, now) < cut);
            }
        }
        let e = g.entry(ip).or_insert((self.burst, now));
        let t = self.level(e.0, e.1, now);
        *e = ((t - 1.0).max(-self.burst), now);
    }
}

/// The cap on request bytes held in memory at once, in KiB permits, and
/// each client's share of it: a client (an access key, or the anonymous
/// one) may hold at most its share at once, so that no client can take the
/// whole cap and make every other writer wait (issue 34, finding 5: eight
/// header-only batch POSTs of 256 MiB held a 2 GiB cap for 30 s).
#[derive(Clone, Debug)]
pub struct BodyBudget {
    sem: Arc<Semaphore>,
    total_kib: u64,
    share_kib: u64,
    /// KiB each client holds now (a client holding nothing is not kept).
    held: Arc<Mutex<HashMap<String, u64>>>,
}

/// Room held for one request: given back when dropped.
#[derive(Debug)]
pub struct Room {
    _permit: OwnedSemaphorePermit,
    _share: Share,
}

/// KiB of a client's share taken by one request: given back when dropped
/// (the request finished, or its wait for the cap timed out).
#[derive(Debug)]
struct Share {
    client: String,
    kib: u64,
    held: Arc<Mutex<HashMap<String, u64>>>,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut g = self.held.lock();
        if let Some(h) = g.get_mut(&self.client) {
            *h = h.saturating_sub(self.kib);
            if *h == 0 {
                g.remove(&self.client);
            }
        }
    }
}

/// Why a body could not be given room.
#[derive(Debug, PartialEq, Eq)]
pub enum BudgetError {
    /// Larger than the whole cap: it can never be taken.
    TooLarge {
        /// The cap in bytes.
        cap: u64,
    },
    /// Larger than a client's share: it can never be taken.
    OverShareSize {
        /// The share in bytes.
        share: u64,
    },
    /// Not within the wait: the server holds its cap of bodies now.
    Busy {
        /// The cap in bytes.
        cap: u64,
    },
    /// The client holds its share already (its other requests in flight).
    OverShare {
        /// The share in bytes.
        share: u64,
    },
}

impl BodyBudget {
    /// A cap of `bytes` (at least 1 MiB), of which one client may hold
    /// `share` (at most the cap, at least 1 MiB) at once.
    pub fn new(bytes: u64, share: u64) -> BodyBudget {
        let kib = (bytes / 1024).max(1024);
        BodyBudget {
            sem: Arc::new(Semaphore::new(
                kib.min(Semaphore::MAX_PERMITS as u64) as usize
            )),
            total_kib: kib,
            share_kib: (share / 1024).clamp(1024, kib),
            held: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// The cap in bytes.
    pub fn cap(&self) -> u64 {
        self.total_kib * 1024
    }

    /// A client's share in bytes.
    pub fn share(&self) -> u64 {
        self.share_kib * 1024
    }

    /// Bytes free now.
    pub fn available(&self) -> u64 {
        self.sem.available_permits() as u64 * 1024
    }

    /// Room for `bytes` of `client`'s, waiting at most `wait` for others
    /// to finish; refused at once past the client's share.
    pub async fn reserve(
        &self,
        bytes: u64,
        wait: Duration,
        client: &str,
    ) -> Result<Room, BudgetError> {
        let kib = bytes.div_ceil(1024).max(1);
        if kib > self.total_kib || kib > u64::from(u32::MAX) {
            return Err(BudgetError::TooLarge { cap: self.cap() });
        }
        if kib > self.share_kib {
            return Err(BudgetError::OverShareSize {
                share: self.share(),
            });
        }
        // The share is taken before the cap is waited for, so a client's
        // waiting requests count against it too.
        {
            let mut g = self.held.lock();
            let h = g.entry(client.to_string()).or_insert(0);
            if *h + kib > self.share_kib {
                if *h == 0 {
                    g.remove(client);
                }
                return Err(BudgetError::OverShare {
                    share: self.share(),
                });
            }
            *h += kib;
        }
        let share = Share {
            client: client.to_string(),
            kib,
            held: self.held.clone(),
        };
        match tokio::time::timeout(wait, self.sem.clone().acquire_many_owned(kib as u32)).await {
            Ok(Ok(permit)) => Ok(Room {
                _permit: permit,
                _share: share,
            }),
            // The share goes back with `share`.
            _ => Err(BudgetError::Busy { cap: self.cap() }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_burst_are_refused_then_allowed_again() {
        let l = CookieLimiter::new(3.0, 1000.0);
        let ip: IpAddr = "10.0.0.1".parse().unwrap();
        let other: IpAddr = "10.0.1.2".parse().unwrap();
        for _ in 0..3 {
            assert!(l.check(ip).is_ok());
            l.failed(ip);
        }
        assert!(l.check(ip).is_err(), "a fourth failure in a burst of 3");
        assert!(l.check(other).is_ok(), "another address is not limited");
        std::thread::sleep(Duration::from_millis(5));
        assert!(l.check(ip).is_ok(), "tokens come back");
        let slow = CookieLimiter::new(2.0, 0.001);
        slow.failed(ip);
        slow.failed(ip);
        let wait = slow.check(ip).unwrap_err();
        assert!(wait > Duration::from_secs(900), "{wait:?}");
    }

    #[test]
    fn addresses_of_one_network_share_one_allowance() {
        let n = |a: &str| network_of(a.parse().unwrap());
        assert_eq!(n("10.1.2.3"), n("10.1.2.200"));
        assert_ne!(n("10.1.2.3"), n("10.1.3.3"));
        assert_eq!(n("127.0.0.1"), n("127.45.6.7"));
        assert_eq!(n("2001:db8:1:2::1"), n("2001:db8:1:2:ffff::9"));
        assert_ne!(n("2001:db8:1:2::1"), n("2001:db8:1:3::1"));
        assert_eq!(n("::ffff:10.1.2.3"), n("10.1.2.9"));
        let l = CookieLimiter::new(3.0, 0.001);
        for i in 1..=3 {
            l.failed(format!("127.0.0.{i}").parse().unwrap());
        }
        assert!(l.check("127.0.0.38".parse().unwrap()).is_err());
        assert!(l.check("10.0.0.1".parse().unwrap()).is_ok());
    }

    #[tokio::test]
    async fn the_budget_caps_bytes_held_at_once() {
        let b = BodyBudget::new(2 << 20, 2 << 20);
        assert_eq!(b.cap(), 2 << 20);
        let wait = Duration::from_millis(10);
        let p = b.reserve(1536 << 10, wait, "a").await.unwrap();
        assert_eq!(
            b.reserve(1 << 20, wait, "b").await.unwrap_err(),
            BudgetError::Busy { cap: 2 << 20 }
        );
        assert_eq!(
            b.reserve(3 << 20, wait, "b").await.unwrap_err(),
            BudgetError::TooLarge { cap: 2 << 20 }
        );
        drop(p);
        assert!(b.reserve(2 << 20, wait, "b").await.is_ok());
    }

    #[tokio::test]
    async fn a_client_holds_at_most_its_share_and_others_still_get_room() {
        let b = BodyBudget::new(4 << 20, 1 << 20);
        let wait = Duration::from_millis(10);
        let first = b.reserve(768 << 10, wait, "greedy").await.unwrap();
        assert_eq!(
            b.reserve(512 << 10, wait, "greedy").await.unwrap_err(),
            BudgetError::OverShare { share: 1 << 20 }
        );
        assert_eq!(
            b.reserve(2 << 20, wait, "greedy").await.unwrap_err(),
            BudgetError::OverShareSize { share: 1 << 20 }
        );
        // Another client is not held back by the first one's share...
        let other = b.reserve(1 << 20, wait, "other").await.unwrap();
        // ...and a refused or finished request gives its share back.
        drop(first);
        let again = b.reserve(1 << 20, wait, "greedy").await.unwrap();
        assert_eq!(b.available(), 2 << 20);
        drop((other, again));
        assert!(b.held.lock().is_empty(), "nothing held is kept");
        // A wait that times out gives the share back too.
        let b = BodyBudget::new(1 << 20, 1 << 20);
        let all = b.reserve(1 << 20, wait, "a").await.unwrap();
        assert_eq!(
            b.reserve(1 << 20, wait, "b").await.unwrap_err(),
            BudgetError::Busy { cap: 1 << 20 }
        );
        drop(all);
        assert!(b.held.lock().is_empty());
    }
}
