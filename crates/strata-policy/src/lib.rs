//! Cache eviction policies for Strata: one [`Policy`] trait, one module per
//! policy.
//!
//! The same implementations run in the lab's simulator (`strata sim`) and in
//! the store's RAM cache and flash read cache, so a simulated hit ratio is the
//! one the store will see. Nothing here does I/O or knows about traces: a
//! policy sees keys, sizes and (for Belady only) the next access time.
//!
//! Every policy keeps its objects in a slab of 24-byte nodes addressed by
//! `u32` (ARC, which keeps a ghost per resident object, 20-byte ones), with
//! intrusive lists and a hash index that stores only the slot, so a cache of
//! 10 M objects costs at most 64 bytes per object (see
//! [`Policy::heap_bytes`] and `docs/benchmarks.md`).
//!
//! ```
//! use strata_policy::{build, Evicted, PolicySpec, Unit};
//! let spec: PolicySpec = "s3fifo".parse().unwrap();
//! let mut cache = build(&spec, 1 << 20, Unit::Bytes);
//! let mut evicted: Vec<Evicted> = Vec::new();
//! if !cache.lookup(42) {
//!     cache.insert(42, 4096, &mut evicted);
//! }
//! assert!(cache.contains(42));
//! assert_eq!(cache.used(), 4096);
//! ```
//!
//! Where a definition follows libCacheSim (the reference simulator whose
//! numbers Strata reproduces), the module says so; `docs/simulator.md` lists
//! every difference.

#![warn(missing_docs)]

/// The five `Policy` accessors a policy answers from its fields (`unit`,
/// `cap`, `slab` and the resident lists named): capacity unit, capacity,
/// used units and resident count summed over the resident lists, and
/// residency (a slab entry whose node `n` satisfies the given test: ghosts
/// share the slab with resident objects in some policies).
macro_rules! resident_accessors {
    (lists: [$($list:ident),+], resident: |$n:pat_param| $res:expr) => {
        fn unit(&self) -> Unit {
            self.unit
        }
        fn capacity(&self) -> u64 {
            self.cap
        }
        fn used(&self) -> u64 {
            0 $(+ self.$list.weight)+
        }
        fn len(&self) -> usize {
            (0 $(+ self.$list.len)+) as usize
        }
        fn contains(&self, key: u64) -> bool {
            match self.slab.find(key) {
                Some(i) => {
                    let $n = self.slab.get(i);
                    $res
                }
                None => false,
            }
        }
    };
}

mod arc;
mod belady;
mod clock;
mod fifo;
mod lirs;
mod lru;
mod midpoint;
mod s3fifo;
mod sieve;
mod slab;
mod twoq;

pub use arc::Arc;
pub use belady::Belady;
pub use clock::Clock;
pub use fifo::Fifo;
pub use lirs::Lirs;
pub use lru::Lru;
pub use midpoint::MidpointLru;
pub use s3fifo::S3Fifo;
pub use sieve::Sieve;
pub use twoq::TwoQ;

use std::fmt;
use std::str::FromStr;

/// What a cache's capacity counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Unit {
    /// Bytes: each object is charged its size.
    Bytes,
    /// Objects: each object is charged 1 whatever its size.
    Objects,
}

impl Unit {
    /// The amount an object of `size` bytes is charged against capacity.
    #[inline(always)]
    pub fn charge(self, size: u64) -> u64 {
        match self {
            Unit::Bytes => size,
            Unit::Objects => 1,
        }
    }
}

/// An object a policy pushed out of the cache to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// The object's key.
    pub key: u64,
    /// The object's size in bytes (as given to [`Policy::insert`]).
    pub size: u64,
}

/// The largest object size a policy stores (sizes are kept in 32 bits to keep
/// nodes small; larger objects are refused in byte mode).
pub const MAX_OBJECT_SIZE: u64 = u32::MAX as u64;

/// One eviction policy over a cache of fixed capacity.
///
/// The calling convention is a real cache's: on a request, [`lookup`]
/// (which updates recency/frequency on a hit); on a miss, fetch the object
/// and [`insert`] it. A policy with ghost queues (ARC, 2Q, S3-FIFO, LIRS)
/// learns on the missed lookup whether the key was a ghost and uses that on
/// the following insert of the same key; an insert with no lookup before it
/// checks the ghosts itself.
///
/// [`lookup`]: Policy::lookup
/// [`insert`]: Policy::insert
pub trait Policy: Send {
    /// The policy's name with its parameters, e.g. `s3fifo` or `lru-mid:75`.
    fn name(&self) -> String;
    /// What capacity counts.
    fn unit(&self) -> Unit;
    /// Capacity in [`Unit`]s.
    fn capacity(&self) -> u64;
    /// Units in use by resident objects.
    fn used(&self) -> u64;
    /// Number of resident objects.
    fn len(&self) -> usize;
    /// Whether no object is resident.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Whether `key` is resident (no state change).
    fn contains(&self, key: u64) -> bool;
    /// A request for `key`: returns true on a hit and updates the policy's
    /// state as a hit does; on a miss, records what the policy learns (a
    /// ghost hit) for a following [`Policy::insert`].
    fn lookup(&mut self, key: u64) -> bool;
    /// Admits `key` of `size` bytes, evicting as needed; the objects pushed
    /// out are appended to `evicted`. Returns false when the policy refuses
    /// the object (larger than the cache or than the queue it would enter),
    /// in which case it is not resident afterwards. A key already resident
    /// is replaced (its new size counts).
    fn insert(&mut self, key: u64, size: u64, evicted: &mut Vec<Evicted>) -> bool;
    /// Removes `key` (a delete or an invalidation); returns its size in bytes
    /// if it was resident. Not an eviction: nothing is remembered in ghosts.
    fn remove(&mut self, key: u64) -> Option<u64>;
    /// Empties the cache and forgets all history (a crash of a RAM cache).
    fn clear(&mut self);
    /// Heap bytes the policy holds now (its whole footprint but the struct).
    fn heap_bytes(&self) -> usize;
    /// Offline policies only (Belady): the position in the request stream of
    /// the next request to the key of the current request (`None`: never).
    /// Call before [`Policy::lookup`]. Online policies ignore it.
    fn set_next_access(&mut self, _next: Option<u64>) {}
    /// Objects that left the cache during lookups since the last insert
    /// (LIRS can evict while serving a hit); appended to `out`. Policies
    /// that never evict on a hit have nothing to add.
    fn drain_evictions(&mut self, _out: &mut Vec<Evicted>) {}
}

/// Errors in the user's terms.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PolicyError {
    /// The name is not a known policy.
    #[error("unknown policy {0:?} (known: lru, fifo, clock, clock2, sieve, lru-mid[:PERCENT], twoq, arc, s3fifo[:SMALL_RATIO[:THRESHOLD]], lirs, belady)")]
    Unknown(String),
    /// A parameter of a known policy is out of range or not a number.
    #[error("bad parameter for policy {policy}: {reason}")]
    BadParameter {
        /// The policy as written.
        policy: String,
        /// What is wrong.
        reason: String,
    },
}

/// A policy and its parameters, as written on a command line.
#[derive(Clone, Debug, PartialEq)]
pub enum PolicySpec {
    /// Least recently used.
    Lru,
    /// First in, first out.
    Fifo,
    /// CLOCK with an n-bit reference counter (1 bit is classic CLOCK).
    Clock {
        /// Bits of the counter (1..=8).
        bits: u8,
    },
    /// SIEVE.
    Sieve,
    /// LRU with mid-point insertion: new objects enter at `percentile` of
    /// the list from its head (Flashcache's LRU-2Q at 75).
    MidpointLru {
        /// 0 is plain LRU; 75 is Flashcache's setting.
        percentile: f64,
    },
    /// libCacheSim's 2Q (`twoq`): A1in FIFO 25%, A1out ghost 50%, Am LRU.
    TwoQ,
    /// ARC.
    Arc,
    /// S3-FIFO.
    S3Fifo {
        /// Share of the cache given to the small FIFO (0.1).
        small_ratio: f64,
        /// Hits in the small FIFO needed to move to main (2).
        threshold: u32,
    },
    /// LIRS (HIR share 1%).
    Lirs,
    /// Belady's offline optimum (needs next-access times).
    Belady,
}

impl PolicySpec {
    /// Whether the policy needs [`Policy::set_next_access`] on every request.
    pub fn needs_next_access(&self) -> bool {
        matches!(self, PolicySpec::Belady)
    }
}

impl fmt::Display for PolicySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PolicySpec::Lru => f.write_str("lru"),
            PolicySpec::Fifo => f.write_str("fifo"),
            PolicySpec::Clock { bits: 1 } => f.write_str("clock"),
            PolicySpec::Clock { bits } => write!(f, "clock{bits}"),
            PolicySpec::Sieve => f.write_str("sieve"),
            PolicySpec::MidpointLru { percentile } => write!(f, "lru-mid:{percentile}"),
            PolicySpec::TwoQ => f.write_str("twoq"),
            PolicySpec::Arc => f.write_str("arc"),
            PolicySpec::S3Fifo {
                small_ratio,
                threshold,
            } if *small_ratio == 0.1 && *threshold == 2 => f.write_str("s3fifo"),
            PolicySpec::S3Fifo {
                small_ratio,
                threshold,
            } => write!(f, "s3fifo:{small_ratio}:{threshold}"),
            PolicySpec::Lirs => f.write_str("lirs"),
            PolicySpec::Belady => f.write_str("belady"),
        }
    }
}

impl FromStr for PolicySpec {
    type Err = PolicyError;

    fn from_str(s: &str) -> Result<PolicySpec, PolicyError> {
        let t = s.trim().to_ascii_lowercase();
        let mut parts = t.split(':');
        let name = parts.next().unwrap_or("");
        let args: Vec<&str> = parts.collect();
        let bad = |reason: &str| PolicyError::BadParameter {
            policy: s.to_string(),
            reason: reason.to_string(),
        };
        let no_args = |spec: PolicySpec| {
            if args.is_empty() {
                Ok(spec)
            } else {
                Err(bad("this policy takes no parameters"))
            }
        };
        match name {
            "lru" => no_args(PolicySpec::Lru),
            "fifo" => no_args(PolicySpec::Fifo),
            "clock" => no_args(PolicySpec::Clock { bits: 1 }),
            "clock2" => no_args(PolicySpec::Clock { bits: 2 }),
            "sieve" => no_args(PolicySpec::Sieve),
            "twoq" | "2q" => no_args(PolicySpec::TwoQ),
            "arc" => no_args(PolicySpec::Arc),
            "lirs" => no_args(PolicySpec::Lirs),
            "belady" | "opt" | "min" => no_args(PolicySpec::Belady),
            "lru-mid" | "lrumid" | "midpoint" | "lru2q" => {
                let percentile = match args.as_slice() {
                    [] => 75.0,
                    [p] => p
                        .trim_end_matches('%')
                        .parse::<f64>()
                        .map_err(|_| bad("the insertion percentile must be a number"))?,
                    _ => return Err(bad("expected lru-mid[:PERCENT]")),
                };
                if !(0.0..100.0).contains(&percentile) {
                    return Err(bad("the insertion percentile must be in [0, 100)"));
                }
                Ok(PolicySpec::MidpointLru { percentile })
            }
            "s3fifo" => {
                let small_ratio = match args.first() {
                    None => 0.1,
                    Some(v) => v
                        .parse::<f64>()
                        .map_err(|_| bad("the small-queue ratio must be a number"))?,
                };
                let threshold = match args.get(1) {
                    None => 2,
                    Some(v) => v
                        .parse::<u32>()
                        .map_err(|_| bad("the move threshold must be a whole number"))?,
                };
                if args.len() > 2 {
                    return Err(bad("expected s3fifo[:SMALL_RATIO[:THRESHOLD]]"));
                }
                if !(small_ratio > 0.0 && small_ratio < 1.0) {
                    return Err(bad("the small-queue ratio must be in (0, 1)"));
                }
                if threshold == 0 {
                    return Err(bad("the move threshold must be at least 1"));
                }
                Ok(PolicySpec::S3Fifo {
                    small_ratio,
                    threshold,
                })
            }
            _ => Err(PolicyError::Unknown(s.to_string())),
        }
    }
}

/// Parses a comma-separated list of policies (`lru,fifo,s3fifo`).
pub fn parse_list(s: &str) -> Result<Vec<PolicySpec>, PolicyError> {
    s.split(',')
        .filter(|p| !p.trim().is_empty())
        .map(str::parse)
        .collect()
}

/// Builds a policy of `capacity` units.
pub fn build(spec: &PolicySpec, capacity: u64, unit: Unit) -> Box<dyn Policy> {
    match spec {
        PolicySpec::Lru => Box::new(Lru::new(capacity, unit)),
        PolicySpec::Fifo => Box::new(Fifo::new(capacity, unit)),
        PolicySpec::Clock { bits } => Box::new(Clock::with_bits(capacity, unit, *bits)),
        PolicySpec::Sieve => Box::new(Sieve::new(capacity, unit)),
        PolicySpec::MidpointLru { percentile } => {
            Box::new(MidpointLru::new(capacity, unit, *percentile))
        }
        PolicySpec::TwoQ => Box::new(TwoQ::new(capacity, unit)),
        PolicySpec::Arc => Box::new(Arc::new(capacity, unit)),
        PolicySpec::S3Fifo {
            small_ratio,
            threshold,
        } => Box::new(S3Fifo::with_params(
            capacity,
            unit,
            *small_ratio,
            *threshold,
        )),
        PolicySpec::Lirs => Box::new(Lirs::new(capacity, unit)),
        PolicySpec::Belady => Box::new(Belady::new(capacity, unit)),
    }
}

/// Every policy's default spec, for suites that run against all of them.
pub fn all_specs() -> Vec<PolicySpec> {
    vec![
        PolicySpec::Lru,
        PolicySpec::Fifo,
        PolicySpec::Clock { bits: 1 },
        PolicySpec::Clock { bits: 2 },
        PolicySpec::Sieve,
        PolicySpec::MidpointLru { percentile: 75.0 },
        PolicySpec::TwoQ,
        PolicySpec::Arc,
        PolicySpec::S3Fifo {
            small_ratio: 0.1,
            threshold: 2,
        },
        PolicySpec::Lirs,
        PolicySpec::Belady,
    ]
}

/// Clamps a byte size into a node's 32-bit size field.
#[inline(always)]
pub(crate) fn node_size(size: u64) -> u32 {
    size.min(MAX_OBJECT_SIZE) as u32
}

/// Whether an object of `size` bytes can be stored at all under `unit`.
#[inline(always)]
pub(crate) fn storable(unit: Unit, size: u64) -> bool {
    unit == Unit::Objects || size <= MAX_OBJECT_SIZE
}
