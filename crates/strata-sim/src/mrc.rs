//! Miss-ratio curves of LRU.
//!
//! [`ExactMrc`] computes every request's LRU stack distance in one pass:
//! each key's latest request position holds the key's weight (1 in object
//! mode, its size in byte mode) and the distance of a re-reference is the
//! weight held since the key's previous position, read from a bitmap of
//! positions and a Fenwick tree over its 64-position words: O(log n) per
//! request (see [`StackDistance`]). Positions are renumbered when they run
//! out, so memory is O(distinct keys), not O(requests). A request hits in an
//! LRU cache of capacity C exactly when its distance is at most C, so one
//! pass gives the miss ratio at every size: all sizes in object mode, and
//! the sizes of a grid fixed before the pass in byte mode (an object's
//! weight is its latest size; for traces whose objects keep their size this
//! equals a separate LRU run; an object larger than a cache is counted as
//! in the stack, where LRU would refuse it).
//!
//! [`Shards`] is SHARDS (Waldspurger et al., FAST'15): only keys whose
//! (seeded) hash falls under a threshold are tracked and their distances
//! are scaled by the sampling rate; fixed rate or fixed size (at most S keys
//! tracked; the threshold drops as new keys arrive), both with the
//! SHARDS-adj correction. docs/simulator.md says how large its error is.

use crate::access::Access;
use crate::fasthash::mix;
use serde::Serialize;
use std::collections::BinaryHeap;
use strata_policy::Unit;

/// One point of a curve.
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct CurvePoint {
    /// Cache size in units.
    pub cache_size: u64,
    /// Request miss ratio.
    pub miss_ratio: f64,
    /// Byte miss ratio.
    pub byte_miss_ratio: f64,
}

/// The last-position map of [`StackDistance`]: open addressing with linear
/// probing over 16-byte slots (key, position, weight), so a request costs one
/// probe into one array (hashbrown keeps its control bytes apart from its
/// slots: two cache misses per request on a table larger than the caches).
/// A slot whose position is [`EMPTY`] is free; positions stay below it.
struct LastMap {
    slots: Vec<Slot>,
    len: usize,
    shift: u32,
}

#[derive(Clone, Copy)]
struct Slot {
    key: u64,
    pos: u32,
    weight: u32,
}

const EMPTY: u32 = u32::MAX;
const FREE: Slot = Slot {
    key: 0,
    pos: EMPTY,
    weight: 0,
};

impl LastMap {
    fn new() -> LastMap {
        LastMap::with_bits(12)
    }

    fn with_bits(bits: u32) -> LastMap {
        LastMap {
            slots: vec![FREE; 1 << bits],
            len: 0,
            shift: 64 - bits,
        }
    }

    #[inline(always)]
    fn home(&self, key: u64) -> usize {
        (mix(key) >> self.shift) as usize
    }

    /// Hints the CPU to fetch `key`'s home slot (a later request's).
    #[inline(always)]
    fn prefetch(&self, key: u64) {
        let i = self.home(key);
        crate::prefetch::read(&self.slots[i]);
    }

    /// Sets `key`'s entry to (pos, weight); returns the previous one.
    #[inline(always)]
    fn replace(&mut self, key: u64, pos: u32, weight: u32) -> Option<(u32, u32)> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &mut self.slots[i];
            if s.pos == EMPTY {
                *s = Slot { key, pos, weight };
                self.len += 1;
                if self.len * 8 > self.slots.len() * 5 {
                    self.grow();
                }
                return None;
            }
            if s.key == key {
                let old = (s.pos, s.weight);
                s.pos = pos;
                s.weight = weight;
                return Some(old);
            }
            i = (i + 1) & mask;
        }
    }

    fn contains(&self, key: u64) -> bool {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = &self.slots[i];
            if s.pos == EMPTY {
                return false;
            }
            if s.key == key {
                return true;
            }
            i = (i + 1) & mask;
        }
    }

    /// Removes `key` (backward-shift deletion keeps probe runs whole).
    fn remove(&mut self, key: u64) -> Option<(u32, u32)> {
        let mask = self.slots.len() - 1;
        let mut i = self.home(key);
        loop {
            let s = self.slots[i];
            if s.pos == EMPTY {
                return None;
            }
            if s.key == key {
                break;
            }
            i = (i + 1) & mask;
        }
        let old = (self.slots[i].pos, self.slots[i].weight);
        let mut hole = i;
        let mut j = (i + 1) & mask;
        loop {
            let s = self.slots[j];
            if s.pos == EMPTY {
                break;
            }
            // Move s back into the hole unless its home lies in (hole, j].
            let h = self.home(s.key);
            let between = if hole <= j {
                hole < h && h <= j
            } else {
                hole < h || h <= j
            };
            if !between {
                self.slots[hole] = s;
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.slots[hole] = FREE;
        self.len -= 1;
        Some(old)
    }

    fn grow(&mut self) {
        let bits = 64 - self.shift + 1;
        let old = std::mem::replace(self, LastMap::with_bits(bits));
        let mask = self.slots.len() - 1;
        for s in old.slots.into_iter().filter(|s| s.pos != EMPTY) {
            let mut i = self.home(s.key);
            while self.slots[i].pos != EMPTY {
                i = (i + 1) & mask;
            }
            self.slots[i] = s;
        }
        self.len = old.len;
    }
}

/// Exact LRU stack distances of a stream, one key at a time.
///
/// Each key's latest request position is marked in a bitmap of 64-position
/// words (with its weight beside it in byte mode); a Fenwick tree over the
/// words holds their weight sums. The distance of a re-reference at old
/// position p is p's weight plus the weight marked after p: within p's word
/// a popcount (unit weights) or a scan of at most 63 marks, beyond it the
/// total minus one prefix walk of the word tree. When the positions run
/// out, the live ones are renumbered 0..live in order (one sequential scan
/// of the map and a rank directory, no sort) into room for
/// [`ROOM`] times the live keys, so bitmap and tree cover about twice the
/// distinct keys (not the requests) and stay in the CPU caches.
pub struct StackDistance {
    last: LastMap,
    bits: Vec<u64>,
    /// Per-position weights; empty while every weight is 1.
    weights: Vec<u32>,
    words: Vec<u64>,
    time: u32,
    total: u64,
    unit_weights: bool,
}

impl Default for StackDistance {
    fn default() -> Self {
        StackDistance::new()
    }
}

const MIN_POSITIONS: usize = 1 << 16;
/// Positions after a renumbering, per live key.
const ROOM: usize = 2;

impl StackDistance {
    /// An empty profiler.
    pub fn new() -> StackDistance {
        let mut s = StackDistance {
            last: LastMap::new(),
            bits: Vec::new(),
            weights: Vec::new(),
            words: Vec::new(),
            time: 0,
            total: 0,
            unit_weights: true,
        };
        s.resize(MIN_POSITIONS);
        s
    }

    fn resize(&mut self, positions: usize) {
        let n_words = positions.div_ceil(64);
        self.bits = vec![0; n_words];
        if !self.unit_weights {
            self.weights = vec![0; n_words * 64];
        }
        self.words = vec![0; n_words + 1];
    }

    fn positions(&self) -> usize {
        self.bits.len() * 64
    }

    /// Adds `delta` to word `w`'s sum (Fenwick, 1-based inside).
    #[inline(always)]
    fn word_add(&mut self, w: usize, delta: u64, neg: bool) {
        let mut i = w + 1;
        let n = self.words.len();
        while i < n {
            self.words[i] = if neg {
                self.words[i].wrapping_sub(delta)
            } else {
                self.words[i].wrapping_add(delta)
            };
            i += i & i.wrapping_neg();
        }
    }

    /// Sum of the words 0..=w.
    #[inline(always)]
    fn word_prefix(&self, w: usize) -> u64 {
        let mut i = w + 1;
        let mut s = 0u64;
        while i > 0 {
            s = s.wrapping_add(self.words[i]);
            i &= i - 1;
        }
        s
    }

    #[inline(always)]
    fn mark(&mut self, pos: u32, weight: u32) {
        let (w, b) = (pos as usize / 64, pos % 64);
        self.bits[w] |= 1 << b;
        if !self.unit_weights {
            self.weights[pos as usize] = weight;
        }
        self.word_add(w, weight as u64, false);
    }

    #[inline(always)]
    fn unmark(&mut self, pos: u32, weight: u32) {
        let (w, b) = (pos as usize / 64, pos % 64);
        self.bits[w] &= !(1 << b);
        self.word_add(w, weight as u64, true);
    }

    /// Weight marked at positions after `pos`.
    #[inline(always)]
    fn weight_after(&self, pos: u32) -> u64 {
        let (w, b) = (pos as usize / 64, pos % 64);
        let above = if b == 63 { 0 } else { self.bits[w] >> (b + 1) };
        let within = if self.unit_weights {
            above.count_ones() as u64
        } else {
            let mut m = above;
            let mut s = 0u64;
            while m != 0 {
                let j = m.trailing_zeros();
                s += self.weights[pos as usize + 1 + j as usize] as u64;
                m &= m - 1;
            }
            s
        };
        within + self.total - self.word_prefix(w)
    }

    /// The first weight other than 1: from now on weights are kept per
    /// position (every live position so far weighs 1).
    #[cold]
    fn start_weights(&mut self) {
        self.unit_weights = false;
        self.weights = vec![0; self.positions()];
        for (w, &word) in self.bits.iter().enumerate() {
            let mut m = word;
            while m != 0 {
                self.weights[w * 64 + m.trailing_zeros() as usize] = 1;
                m &= m - 1;
            }
        }
    }

    /// Renumbers live positions 0..live in order, in room for [`ROOM`]x the
    /// live keys: a rank directory over the old bitmap gives each map entry
    /// its new position in one sequential scan of the map.
    #[cold]
    fn compact(&mut self) {
        let live = self.last.len;
        let mut rank = Vec::with_capacity(self.bits.len());
        let mut r = 0u32;
        for &word in &self.bits {
            rank.push(r);
            r += word.count_ones();
        }
        debug_assert_eq!(r as usize, live);
        let old_bits = std::mem::take(&mut self.bits);
        self.resize((live * ROOM).max(MIN_POSITIONS));
        for s in self.last.slots.iter_mut().filter(|s| s.pos != EMPTY) {
            let (w, b) = (s.pos as usize / 64, s.pos % 64);
            let new = rank[w] + (old_bits[w] & ((1u64 << b) - 1)).count_ones();
            s.pos = new;
            let nw = new as usize / 64;
            self.bits[nw] |= 1 << (new % 64);
            self.words[nw + 1] += s.weight as u64;
            if !self.unit_weights {
                self.weights[new as usize] = s.weight;
            }
        }
        // Linear-time Fenwick build over the word sums.
        let n = self.words.len();
        for i in 1..n {
            let j = i + (i & i.wrapping_neg());
            if j < n {
                self.words[j] = self.words[j].wrapping_add(self.words[i]);
            }
        }
        self.time = live as u32;
    }

    /// Hints the CPU to fetch what a coming request for `key` will read
    /// (call it a few requests ahead).
    #[inline(always)]
    pub fn prefetch(&self, key: u64) {
        self.last.prefetch(key);
    }

    /// Records a request for `key` of `weight` units; returns its stack
    /// distance (the weight of the distinct keys requested since its
    /// previous request, itself included) or `None` for a first request.
    #[inline]
    pub fn access(&mut self, key: u64, weight: u32) -> Option<u64> {
        if self.time as usize >= self.positions() {
            self.compact();
        }
        if weight != 1 && self.unit_weights {
            self.start_weights();
        }
        let t = self.time;
        self.time += 1;
        let dist = match self.last.replace(key, t, weight) {
            Some((p, w)) => {
                let d = w as u64 + self.weight_after(p);
                self.unmark(p, w);
                self.total -= w as u64;
                Some(d)
            }
            None => None,
        };
        self.mark(t, weight);
        self.total += weight as u64;
        dist
    }

    /// Whether `key` has been seen (and not forgotten).
    pub fn contains(&self, key: u64) -> bool {
        self.last.contains(key)
    }

    /// Forgets `key` (SHARDS fixed-size drops keys from its sample).
    pub fn forget(&mut self, key: u64) {
        if let Some((p, w)) = self.last.remove(key) {
            self.unmark(p, w);
            self.total -= w as u64;
        }
    }

    /// Distinct keys seen (and not forgotten).
    pub fn distinct(&self) -> u64 {
        self.last.len as u64
    }

    /// Sum of the latest weights of the keys seen.
    pub fn total_weight(&self) -> u64 {
        self.total
    }
}

fn weight_of(unit: Unit, size: u64) -> u32 {
    match unit {
        Unit::Objects => 1,
        Unit::Bytes => size.min(u32::MAX as u64) as u32,
    }
}

/// How many requests ahead [`ExactMrc::access_batch`] prefetches.
pub const LOOKAHEAD: usize = 8;

/// The exact LRU miss-ratio curve.
pub struct ExactMrc {
    sd: StackDistance,
    unit: Unit,
    grid: Vec<u64>,
    /// Object mode: (requests, bytes) per distance; byte mode: per grid bucket.
    hist: Vec<(u64, u64)>,
    requests: u64,
    bytes: u64,
    first_bytes: u64,
}

impl ExactMrc {
    /// A profiler. In object mode every size is exact; in byte mode the
    /// curve is exact at the sizes in `grid` (ignored in object mode).
    pub fn new(unit: Unit, grid: &[u64]) -> ExactMrc {
        let mut g = grid.to_vec();
        g.sort_unstable();
        g.dedup();
        let buckets = if unit == Unit::Bytes { g.len() + 1 } else { 1 };
        ExactMrc {
            sd: StackDistance::new(),
            unit,
            grid: g,
            hist: vec![(0, 0); buckets],
            requests: 0,
            bytes: 0,
            first_bytes: 0,
        }
    }

    /// Records a batch of requests: the same as [`ExactMrc::access`] on
    /// each, with the map slot of the request [`LOOKAHEAD`] places ahead
    /// prefetched.
    pub fn access_batch(&mut self, batch: &[Access]) {
        for (i, a) in batch.iter().enumerate() {
            if let Some(next) = batch.get(i + LOOKAHEAD) {
                self.sd.prefetch(next.key);
            }
            self.access(a.key, a.size);
        }
    }

    /// Records one request.
    #[inline]
    pub fn access(&mut self, key: u64, size: u64) {
        self.requests += 1;
        self.bytes += size;
        match self.sd.access(key, weight_of(self.unit, size)) {
            None => self.first_bytes += size,
            Some(d) => {
                let b = match self.unit {
                    Unit::Objects => {
                        let d = d as usize;
                        if d >= self.hist.len() {
                            self.hist.resize((d + 1).max(self.hist.len() * 2), (0, 0));
                        }
                        d
                    }
                    Unit::Bytes => self.grid.partition_point(|&c| c < d),
                };
                let h = &mut self.hist[b];
                h.0 += 1;
                h.1 += size;
            }
        }
    }

    /// Requests seen.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Distinct objects seen.
    pub fn distinct_objects(&self) -> u64 {
        self.sd.distinct()
    }

    /// The miss ratios at `sizes` (object mode: any sizes; byte mode: sizes
    /// not on the grid are answered at the largest grid size below them).
    pub fn curve(&self, sizes: &[u64]) -> Vec<CurvePoint> {
        // Cumulative hits by bucket.
        let mut cum = Vec::with_capacity(self.hist.len());
        let (mut c, mut b) = (0u64, 0u64);
        for &(n, by) in &self.hist {
            c += n;
            b += by;
            cum.push((c, b));
        }
        sizes
            .iter()
            .map(|&size| {
                let idx = match self.unit {
                    Unit::Objects => (size as usize).min(cum.len().saturating_sub(1)),
                    Unit::Bytes => {
                        // Buckets 0..=j hold distances <= grid[j].
                        let j = self.grid.partition_point(|&g| g <= size);
                        if j == 0 {
                            usize::MAX
                        } else {
                            j - 1
                        }
                    }
                };
                let (hits, hit_bytes) = if idx == usize::MAX || cum.is_empty() {
                    (0, 0)
                } else {
                    cum[idx]
                };
                point(size, self.requests, self.bytes, hits, hit_bytes)
            })
            .collect()
    }
}

fn point(size: u64, requests: u64, bytes: u64, hits: u64, hit_bytes: u64) -> CurvePoint {
    // From integer miss counts, so the value is bit-identical to a
    // simulator run's misses / requests.
    let r = |h: u64, t: u64| {
        if t == 0 {
            0.0
        } else {
            (t - h) as f64 / t as f64
        }
    };
    CurvePoint {
        cache_size: size,
        miss_ratio: r(hits, requests),
        byte_miss_ratio: r(hit_bytes, bytes),
    }
}

/// How SHARDS bounds its sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ShardsMode {
    /// Track keys whose hash falls in this fraction of the hash space.
    FixedRate(f64),
    /// Track at most this many keys, lowering the rate as needed.
    FixedSize(usize),
}

/// The sampling hash's range: a key is sampled when its 56-bit hash is
/// below `rate * P`.
const P: u64 = 1 << 56;
/// Log-spaced histogram resolution (relative width of a bucket).
const EPS: f64 = 0.002;

/// The default seed of the sampling hash: an arbitrary constant (the ASCII
/// bytes of "SHARDS01"), fixed before any error was measured and never
/// tuned on a trace. `strata mrc --shards-seed` picks another.
pub const DEFAULT_SEED: u64 = 0x5348_4152_4453_3031;

/// The sampling hash: splitmix64's finalizer over the key and a seed, so
/// every output bit depends on every key bit (block numbers and other
/// structured ids spread evenly) and each seed draws an independent sample.
#[inline(always)]
fn sample_hash(key: u64, seed: u64) -> u64 {
    let mut z = key ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) >> 8
}

#[inline]
fn bucket(d: f64) -> usize {
    if d <= 1.0 {
        0
    } else {
        (d.ln() / EPS.ln_1p()) as usize + 1
    }
}

#[inline]
fn bucket_upper(b: usize) -> f64 {
    if b == 0 {
        1.0
    } else {
        (b as f64 * EPS.ln_1p()).exp()
    }
}

/// How a sampled stack distance is scaled back to the whole trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rescale {
    /// The paper's `d / R`: every sampled distance, the requested key's own
    /// weight included, is divided by the rate R. It overstates each
    /// distance by the key's weight times `1/R - 1` (99 objects at 1%), which
    /// matters when the cache sizes asked about are a few hundred objects.
    Paper,
    /// `w + (d - w) / R`: the requested key's own weight `w` counts once
    /// (it is certainly in its own distance) and only the other sampled
    /// keys stand for `1/R` keys each: an unbiased estimate of the distance.
    OwnWeightOnce,
}

/// A SHARDS-sampled LRU miss-ratio curve.
pub struct Shards {
    sd: StackDistance,
    unit: Unit,
    mode: ShardsMode,
    threshold: u64,
    seed: u64,
    rescale: Rescale,
    heap: BinaryHeap<(u64, u64)>,
    hist: Vec<(f64, f64)>,
    sampled: f64,
    sampled_bytes: f64,
    sampled_raw: u64,
    requests: u64,
    bytes: u64,
    adjust: bool,
}

impl Shards {
    /// Turns the SHARDS-adj correction on (the default) or off.
    pub fn with_adjustment(mut self, on: bool) -> Shards {
        self.adjust = on;
        self
    }

    /// Seeds the sampling hash (default [`DEFAULT_SEED`]); call before the
    /// first request.
    pub fn with_seed(mut self, seed: u64) -> Shards {
        self.seed = seed;
        self
    }

    /// Chooses how sampled distances are scaled (default
    /// [`Rescale::OwnWeightOnce`]); call before the first request.
    pub fn with_rescale(mut self, rescale: Rescale) -> Shards {
        self.rescale = rescale;
        self
    }

    /// A sampler in `mode`.
    pub fn new(unit: Unit, mode: ShardsMode) -> Shards {
        let threshold = match mode {
            ShardsMode::FixedRate(r) => ((r.clamp(0.0, 1.0) * P as f64).round() as u64).max(1),
            ShardsMode::FixedSize(_) => P,
        };
        Shards {
            sd: StackDistance::new(),
            unit,
            mode,
            threshold,
            seed: DEFAULT_SEED,
            rescale: Rescale::OwnWeightOnce,
            heap: BinaryHeap::new(),
            hist: Vec::new(),
            sampled: 0.0,
            sampled_bytes: 0.0,
            sampled_raw: 0,
            requests: 0,
            bytes: 0,
            adjust: true,
        }
    }

    /// The current sampling rate.
    pub fn rate(&self) -> f64 {
        self.threshold as f64 / P as f64
    }

    /// Records one request.
    #[inline]
    pub fn access(&mut self, key: u64, size: u64) {
        self.requests += 1;
        self.bytes += size;
        let h = sample_hash(key, self.seed);
        if h >= self.threshold {
            return;
        }
        self.sampled_raw += 1;
        let w = weight_of(self.unit, size);
        let d = self.sd.access(key, w);
        self.sampled += 1.0;
        self.sampled_bytes += size as f64;
        if let Some(d) = d {
            let est = match self.rescale {
                Rescale::Paper => d as f64 / self.rate(),
                Rescale::OwnWeightOnce => {
                    // The distance holds the key's previous weight, which
                    // may differ from this request's in byte mode.
                    let own = (w as u64).min(d);
                    own as f64 + (d - own) as f64 / self.rate()
                }
            };
            let b = bucket(est);
            if b >= self.hist.len() {
                self.hist.resize(b + 1, (0.0, 0.0));
            }
            self.hist[b].0 += 1.0;
            self.hist[b].1 += size as f64;
        }
        if let ShardsMode::FixedSize(max) = self.mode {
            // A forgotten key hashes at or above the lowered threshold, so a
            // first sighting here is a new key.
            if d.is_none() {
                self.heap.push((h, key));
            }
            while self.sd.distinct() as usize > max.max(1) {
                let Some((top, _)) = self.heap.peek().copied() else {
                    break;
                };
                // Drop every key at the largest hash value.
                while let Some(&(hh, k)) = self.heap.peek() {
                    if hh != top {
                        break;
                    }
                    self.heap.pop();
                    self.sd.forget(k);
                }
                let old = self.rate();
                self.threshold = top;
                let scale = self.rate() / old;
                for e in &mut self.hist {
                    e.0 *= scale;
                    e.1 *= scale;
                }
                self.sampled *= scale;
                self.sampled_bytes *= scale;
            }
        }
    }

    /// Records a batch of requests.
    pub fn access_batch(&mut self, batch: &[Access]) {
        for a in batch {
            self.access(a.key, a.size);
        }
    }

    /// Requests seen (sampled or not).
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Requests that were sampled.
    pub fn sampled_requests(&self) -> u64 {
        self.sampled_raw
    }

    /// The estimated working set (distinct objects, or bytes) of the trace.
    pub fn estimated_working_set(&self) -> u64 {
        (self.sd.total_weight() as f64 / self.rate()) as u64
    }

    /// The estimated miss ratios at `sizes`.
    pub fn curve(&self, sizes: &[u64]) -> Vec<CurvePoint> {
        let mut hist = self.hist.clone();
        let (mut total, mut total_bytes) = (self.sampled, self.sampled_bytes);
        if self.adjust {
            // SHARDS-adj (FAST'15 §4.3): the sampled keys draw more or fewer
            // requests than the rate predicts, mostly through a few very
            // popular keys, whose re-references have the smallest
            // distances; the difference between the expected and the
            // sampled count is credited to the first bucket. The byte
            // histogram gets the difference between the expected and the
            // sampled bytes (the trace's bytes are known). With fixed size
            // the counts are kept in units of the final rate, so the
            // expectations use the final rate too.
            let diff = self.requests as f64 * self.rate() - self.sampled;
            let diff_bytes = self.bytes as f64 * self.rate() - self.sampled_bytes;
            if hist.is_empty() {
                hist.push((0.0, 0.0));
            }
            hist[0].0 += diff;
            hist[0].1 += diff_bytes;
            total += diff;
            total_bytes += diff_bytes;
        }
        sizes
            .iter()
            .map(|&size| {
                let c = size as f64;
                let (mut hits, mut hit_bytes) = (0.0, 0.0);
                for (b, &(n, by)) in hist.iter().enumerate() {
                    let hi = bucket_upper(b);
                    if hi <= c {
                        hits += n;
                        hit_bytes += by;
                    } else {
                        let lo = if b == 0 { 0.0 } else { bucket_upper(b - 1) };
                        if c > lo {
                            let f = (c - lo) / (hi - lo);
                            hits += n * f;
                            hit_bytes += by * f;
                        }
                        break;
                    }
                }
                let r = |h: f64, t: f64| {
                    if t <= 0.0 {
                        0.0
                    } else {
                        (1.0 - h / t).clamp(0.0, 1.0)
                    }
                };
                CurvePoint {
                    cache_size: size,
                    miss_ratio: r(hits, total),
                    byte_miss_ratio: r(hit_bytes, total_bytes),
                }
            })
            .collect()
    }
}

/// Mean absolute difference of the request miss ratios of two curves at the
/// same sizes.
pub fn mean_absolute_error(a: &[CurvePoint], b: &[CurvePoint]) -> f64 {
    let n = a.len().min(b.len());
    if n == 0 {
        return 0.0;
    }
    a.iter()
        .zip(b)
        .map(|(x, y)| (x.miss_ratio - y.miss_ratio).abs())
        .sum::<f64>()
        / n as f64
}
