//! One simulated cache (one tier, or RAM over flash) replaying accesses.

use crate::access::{Access, Kind};
use crate::setassoc::{SetAssociative, SetMapping};
use serde::Serialize;
use strata_policy::{build, Evicted, Policy, PolicySpec, Unit};

const SECONDS_PER_YEAR: f64 = 365.25 * 86_400.0;

/// The device a tier lives on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Medium {
    /// Volatile: emptied by a crash.
    Ram,
    /// Persistent and worn by writes: survives a crash, its writes are
    /// counted and turned into a lifetime.
    Flash,
}

/// One tier of a simulated cache.
#[derive(Clone, Debug, PartialEq)]
pub struct TierSpec {
    /// RAM or flash.
    pub medium: Medium,
    /// Its eviction policy.
    pub policy: PolicySpec,
    /// Its capacity in [`Unit`]s.
    pub capacity: u64,
    /// Set-associative organisation (`None`: fully associative).
    pub sets: Option<(u32, SetMapping)>,
}

/// What a write request does to the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WritePolicy {
    /// Every request, whatever its op, is a lookup that inserts on a miss
    /// (libCacheSim's convention; the default).
    Lookup,
    /// Write allocate: a write puts the object in the top tier.
    Allocate,
    /// No-write allocate: a write is not cached (a cached copy is updated in
    /// place and stays).
    NoAllocate,
    /// Write hints: a write is cached unless its request says not to.
    Hints,
}

/// What a flash hit does in a RAM-over-flash cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OnFlashHit {
    /// Move the object up to RAM (the pair behaves like one LRU).
    Promote,
    /// Leave it on flash (fewer flash writes).
    Keep,
}

/// One simulated cache.
#[derive(Clone, Debug, PartialEq)]
pub struct SimConfig {
    /// The tiers, top first: one, or RAM over flash (exclusive).
    pub tiers: Vec<TierSpec>,
    /// What capacities count.
    pub unit: Unit,
    /// What writes do.
    pub writes: WritePolicy,
    /// What a flash hit does (two tiers only).
    pub on_flash_hit: OnFlashHit,
    /// Crash times in seconds after the trace's first request: RAM tiers are
    /// emptied, flash kept.
    pub crashes: Vec<f64>,
    /// Program/erase cycles of the flash (10,000 by default).
    pub pe_cycles: u64,
}

impl SimConfig {
    /// A single fully associative RAM cache, every request a lookup.
    pub fn single(policy: PolicySpec, capacity: u64, unit: Unit) -> SimConfig {
        SimConfig {
            tiers: vec![TierSpec {
                medium: Medium::Ram,
                policy,
                capacity,
                sets: None,
            }],
            unit,
            writes: WritePolicy::Lookup,
            on_flash_hit: OnFlashHit::Promote,
            crashes: Vec::new(),
            pe_cycles: 10_000,
        }
    }

    /// Whether any tier needs next-access times (Belady).
    pub fn needs_next_access(&self) -> bool {
        self.tiers.iter().any(|t| t.policy.needs_next_access())
    }
}

/// Results of one simulated cache. Serialised as one JSON object.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SimReport {
    /// The policy (`ram/flash` policies when tiered).
    pub policy: String,
    /// Total capacity in units.
    pub cache_size: u64,
    /// `bytes` or `objects`.
    pub unit: &'static str,
    /// Requests replayed.
    pub requests: u64,
    /// Requests that were lookups (all of them unless writes are separated).
    pub lookups: u64,
    /// Lookups served by the cache.
    pub hits: u64,
    /// Lookups that missed every tier.
    pub misses: u64,
    /// misses / lookups.
    pub miss_ratio: f64,
    /// Bytes of missed lookups / bytes of all lookups.
    pub byte_miss_ratio: f64,
    /// Write requests (when writes are not lookups).
    pub writes: u64,
    /// Delete requests (when writes are not lookups).
    pub deletes: u64,
    /// How writes were treated.
    pub write_policy: WritePolicy,
    /// Tier fields (RAM over flash, or a flash cache).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub tier: Option<TierReport>,
    /// One entry per crash.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub crashes: Vec<CrashReport>,
    /// Per-set load of a set-associative top tier.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sets: Option<SetLoadReport>,
}

/// Per-tier results.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct TierReport {
    /// RAM tier capacity (0 when there is none).
    pub ram_size: u64,
    /// Flash tier capacity (0 when there is none).
    pub flash_size: u64,
    /// `promote` or `keep`.
    pub on_flash_hit: OnFlashHit,
    /// Lookups served from RAM.
    pub ram_hits: u64,
    /// Lookups served from flash.
    pub flash_hits: u64,
    /// ram_hits / lookups.
    pub ram_hit_ratio: f64,
    /// flash_hits / lookups.
    pub flash_hit_ratio: f64,
    /// Bytes written to flash (every admission into the flash tier).
    pub flash_bytes_written: u64,
    /// Objects written to flash.
    pub flash_objects_written: u64,
    /// Seconds from the first to the last request.
    pub span_seconds: f64,
    /// Program/erase cycles assumed.
    pub pe_cycles: u64,
    /// Years until the flash wears out at this write rate, assuming even
    /// wear levelling: capacity x P/E cycles / (units written per year).
    /// `null` when nothing was written or the trace spans no time.
    pub flash_lifetime_years: Option<f64>,
}

/// What one crash cost.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct CrashReport {
    /// Crash time in seconds after the first request.
    pub at: f64,
    /// Misses beyond those of the same cache never crashed, from this crash
    /// to the next one (or the end).
    pub extra_misses: i64,
    /// Their bytes.
    pub extra_miss_bytes: i64,
    /// Seconds after the crash of the last request that missed here but hit
    /// in the never-crashed cache (`null`: none did).
    pub recovered_after_s: Option<f64>,
}

/// Load across the sets of a set-associative cache.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct SetLoadReport {
    /// Number of sets.
    pub sets: u32,
    /// `linear:SPAN` or `hash`.
    pub mapping: String,
    /// Share of all misses (disk operations) taken by the busiest half of
    /// the sets: 0.5 is perfectly even; Flashcache saw 0.8 with linear
    /// mapping.
    pub top_half_miss_share: f64,
    /// Share of all lookups taken by the busiest half of the sets.
    pub top_half_lookup_share: f64,
    /// Lookups per set.
    pub lookups: Vec<u64>,
    /// Misses per set.
    pub misses: Vec<u64>,
}

fn top_half_share(v: &[u64]) -> f64 {
    let total: u64 = v.iter().sum();
    if total == 0 {
        return 0.0;
    }
    let mut s = v.to_vec();
    s.sort_unstable_by(|a, b| b.cmp(a));
    let half = s.len().div_ceil(2);
    s[..half].iter().sum::<u64>() as f64 / total as f64
}

enum TierCache {
    Full(Box<dyn Policy>),
    Sets(SetAssociative),
}

impl TierCache {
    #[inline(always)]
    fn get(&mut self) -> &mut dyn Policy {
        match self {
            TierCache::Full(p) => p.as_mut(),
            TierCache::Sets(s) => s,
        }
    }
}

struct Tier {
    medium: Medium,
    cache: TierCache,
}

/// The running state of one simulated cache.
pub(crate) struct SimState {
    cfg: SimConfig,
    tiers: Vec<Tier>,
    needs_next: bool,
    requests: u64,
    lookups: u64,
    lookup_bytes: u64,
    misses: u64,
    miss_bytes: u64,
    tier_hits: [u64; 2],
    writes: u64,
    deletes: u64,
    flash_bytes: u64,
    flash_objects: u64,
    first_time: Option<f64>,
    last_time: f64,
    next_crash: usize,
    crash_reports: Vec<CrashReport>,
    twin: Option<Box<SimState>>,
    ev: Vec<Evicted>,
    ev2: Vec<Evicted>,
}

impl SimState {
    pub(crate) fn new(cfg: &SimConfig) -> SimState {
        let tiers = cfg
            .tiers
            .iter()
            .map(|t| Tier {
                medium: t.medium,
                cache: match t.sets {
                    None => TierCache::Full(build(&t.policy, t.capacity, cfg.unit)),
                    Some((n, mapping)) => TierCache::Sets(SetAssociative::new(
                        &t.policy, t.capacity, cfg.unit, n, mapping,
                    )),
                },
            })
            .collect();
        let twin = if cfg.crashes.is_empty() {
            None
        } else {
            let mut c = cfg.clone();
            c.crashes.clear();
            Some(Box::new(SimState::new(&c)))
        };
        let mut crashes = cfg.crashes.clone();
        crashes.sort_by(|a, b| a.total_cmp(b));
        let mut cfg = cfg.clone();
        cfg.crashes = crashes;
        SimState {
            needs_next: cfg.needs_next_access(),
            cfg,
            tiers,
            requests: 0,
            lookups: 0,
            lookup_bytes: 0,
            misses: 0,
            miss_bytes: 0,
            tier_hits: [0; 2],
            writes: 0,
            deletes: 0,
            flash_bytes: 0,
            flash_objects: 0,
            first_time: None,
            last_time: 0.0,
            next_crash: 0,
            crash_reports: Vec::new(),
            twin,
            ev: Vec::new(),
            ev2: Vec::new(),
        }
    }

    /// Puts `key` in the top tier; its evictions go to the flash tier below.
    fn insert_top(&mut self, key: u64, size: u64) {
        self.ev.clear();
        let admitted = self.tiers[0].cache.get().insert(key, size, &mut self.ev);
        if admitted && self.tiers[0].medium == Medium::Flash {
            self.flash_bytes += size;
            self.flash_objects += 1;
        }
        self.demote();
    }

    /// Sends the top tier's evictions (in `ev`) to the tier below.
    fn demote(&mut self) {
        if self.tiers.len() < 2 || self.ev.is_empty() {
            return;
        }
        let lower_flash = self.tiers[1].medium == Medium::Flash;
        for i in 0..self.ev.len() {
            let e = self.ev[i];
            self.ev2.clear();
            if self.tiers[1]
                .cache
                .get()
                .insert(e.key, e.size, &mut self.ev2)
                && lower_flash
            {
                self.flash_bytes += e.size;
                self.flash_objects += 1;
            }
        }
        self.ev.clear();
    }

    fn remove_everywhere(&mut self, key: u64) -> bool {
        let mut found = false;
        for t in &mut self.tiers {
            found |= t.cache.get().remove(key).is_some();
        }
        found
    }

    fn crash(&mut self, at: f64) {
        for t in &mut self.tiers {
            if t.medium == Medium::Ram {
                t.cache.get().clear();
            }
        }
        self.crash_reports.push(CrashReport {
            at,
            extra_misses: 0,
            extra_miss_bytes: 0,
            recovered_after_s: None,
        });
    }

    /// A lookup through the tiers; returns whether it hit.
    #[inline]
    fn read(&mut self, a: &Access) -> bool {
        self.lookups += 1;
        self.lookup_bytes += a.size;
        if self.needs_next {
            let n = (a.next != u64::MAX).then_some(a.next);
            for t in &mut self.tiers {
                t.cache.get().set_next_access(n);
            }
        }
        if self.tiers[0].cache.get().lookup(a.key) {
            self.tier_hits[0] += 1;
            if self.tiers.len() > 1 {
                self.ev.clear();
                self.tiers[0].cache.get().drain_evictions(&mut self.ev);
                self.demote();
            }
            return true;
        }
        if self.tiers.len() > 1 && self.tiers[1].cache.get().lookup(a.key) {
            self.tier_hits[1] += 1;
            if self.cfg.on_flash_hit == OnFlashHit::Promote {
                let size = self.tiers[1].cache.get().remove(a.key).unwrap_or(a.size);
                self.insert_top(a.key, size);
            }
            return true;
        }
        self.misses += 1;
        self.miss_bytes += a.size;
        self.insert_top(a.key, a.size);
        false
    }

    /// Replays one access; returns Some(hit) for a lookup.
    #[inline]
    pub(crate) fn step(&mut self, a: &Access) -> Option<bool> {
        let start = *self.first_time.get_or_insert(a.time);
        self.last_time = a.time;
        self.requests += 1;
        if let Some(&t) = self.cfg.crashes.get(self.next_crash) {
            if a.time - start >= t {
                self.next_crash += 1;
                self.crash(t);
            }
        }
        let result = match (self.cfg.writes, a.kind) {
            (WritePolicy::Lookup, _) | (_, Kind::Read) => Some(self.read(a)),
            (_, Kind::Delete) => {
                self.deletes += 1;
                self.remove_everywhere(a.key);
                None
            }
            (w, Kind::Write) => {
                self.writes += 1;
                let allocate = match w {
                    WritePolicy::Allocate => true,
                    WritePolicy::Hints => a.admit,
                    _ => false,
                };
                if allocate {
                    self.remove_everywhere(a.key);
                    self.insert_top(a.key, a.size);
                }
                None
            }
        };
        if let Some(twin) = self.twin.as_mut() {
            let twin_hit = twin.step(a);
            if let (Some(me), Some(other), Some(rep)) =
                (result, twin_hit, self.crash_reports.last_mut())
            {
                if !me && other {
                    rep.extra_misses += 1;
                    rep.extra_miss_bytes += a.size as i64;
                    rep.recovered_after_s = Some(a.time - start - rep.at);
                } else if me && !other {
                    rep.extra_misses -= 1;
                    rep.extra_miss_bytes -= a.size as i64;
                }
            }
        }
        result
    }

    pub(crate) fn report(&self) -> SimReport {
        let unit = self.cfg.unit;
        let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
        let policy = self
            .cfg
            .tiers
            .iter()
            .map(|t| t.policy.to_string())
            .collect::<Vec<_>>()
            .join("/");
        let has_flash = self.cfg.tiers.iter().any(|t| t.medium == Medium::Flash);
        let tiered = self.cfg.tiers.len() > 1 || has_flash;
        let span = self.first_time.map_or(0.0, |f| self.last_time - f);
        let tier = tiered.then(|| {
            let size_of = |m: Medium| {
                self.cfg
                    .tiers
                    .iter()
                    .filter(|t| t.medium == m)
                    .map(|t| t.capacity)
                    .sum::<u64>()
            };
            let (ram_hits, flash_hits) = match (self.cfg.tiers.len(), self.cfg.tiers[0].medium) {
                (1, Medium::Flash) => (0, self.tier_hits[0]),
                (1, Medium::Ram) => (self.tier_hits[0], 0),
                _ => (self.tier_hits[0], self.tier_hits[1]),
            };
            let flash_size = size_of(Medium::Flash);
            let written = match unit {
                Unit::Bytes => self.flash_bytes,
                Unit::Objects => self.flash_objects,
            };
            let lifetime = (written > 0 && span > 0.0).then(|| {
                let per_year = written as f64 / span * SECONDS_PER_YEAR;
                flash_size as f64 * self.cfg.pe_cycles as f64 / per_year
            });
            TierReport {
                ram_size: size_of(Medium::Ram),
                flash_size,
                on_flash_hit: self.cfg.on_flash_hit,
                ram_hits,
                flash_hits,
                ram_hit_ratio: ratio(ram_hits, self.lookups),
                flash_hit_ratio: ratio(flash_hits, self.lookups),
                flash_bytes_written: self.flash_bytes,
                flash_objects_written: self.flash_objects,
                span_seconds: span,
                pe_cycles: self.cfg.pe_cycles,
                flash_lifetime_years: lifetime,
            }
        });
        let sets = match (&self.tiers[0].cache, self.cfg.tiers[0].sets) {
            (TierCache::Sets(s), Some((n, mapping))) => Some(SetLoadReport {
                sets: n,
                mapping: match mapping {
                    SetMapping::Linear { span } => format!("linear:{span}"),
                    SetMapping::Hash => "hash".into(),
                },
                top_half_miss_share: top_half_share(s.misses()),
                top_half_lookup_share: top_half_share(s.lookups()),
                lookups: s.lookups().to_vec(),
                misses: s.misses().to_vec(),
            }),
            _ => None,
        };
        SimReport {
            policy,
            cache_size: self.cfg.tiers.iter().map(|t| t.capacity).sum(),
            unit: match unit {
                Unit::Bytes => "bytes",
                Unit::Objects => "objects",
            },
            requests: self.requests,
            lookups: self.lookups,
            hits: self.lookups - self.misses,
            misses: self.misses,
            miss_ratio: ratio(self.misses, self.lookups),
            byte_miss_ratio: ratio(self.miss_bytes, self.lookup_bytes),
            writes: self.writes,
            deletes: self.deletes,
            write_policy: self.cfg.writes,
            tier,
            crashes: self.crash_reports.clone(),
            sets,
        }
    }
}
