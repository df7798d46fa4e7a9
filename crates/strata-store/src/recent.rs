//! The recent table: the part of the node-wide index that holds every write
//! since the last merge, in 8 bytes per entry.
//!
//! An entry is one `u64` in a flat open-addressing array of `n` buckets,
//! kept between 3/4 and 9/10 full (Robin Hood linear probing, so a lookup
//! stops as soon as it passes where its identity would be; the table grows
//! by 6/5, not 2, so that its bytes per entry stay within 8.9–10.7). It
//! holds a location (segment-table place and needle ordinal), the entry's
//! displacement from its home bucket, and as many further bits of the
//! identity's hash as fit: the *remainder*, the bits after the top `m =
//! floor(log2 n)`. The home bucket is `floor(t × n / 2^(m+8))`, `t` the top
//! `m + 8` bits of the hash; the bucket and the remainder's first 8 bits
//! give back `t` exactly (the hashes homed in one bucket span fewer than
//! 256 values of `t`), so the top `m` bits need not be stored
//! (quotienting), and a lookup compares the remainder.
//!
//! The table does not keep identities: a remainder match is a *candidate*,
//! which the store confirms by the needle's header (a GET reads that header
//! anyway). Two identities share a candidate with probability about
//! `2^-(remainder bits)` per entry of the same bucket, which costs one
//! extra header read; the store counts those reads.
//!
//! Growing the table takes remainder bits from each entry into the implied
//! prefix when `m` grows (the table never rehashes identities it does not
//! know: it recomputes each home from the prefix it knows); a
//! terminator bit below the remainder says how many bits are still valid,
//! so entries of different ages compare correctly. Shrinking gives bits
//! back. An entry with no remainder bit left when the table must grow is
//! placed again from its identity's hash, which the caller supplies (the
//! store reads it from the needle's header); with the widths used in
//! practice (remainders of 20–40 bits) this does not happen.
//!
//! Layout of an entry, from the low bits: ordinal (`ord_bits`), segment
//! place (`slot_bits`), displacement ([`DISP_BITS`]), then the remainder
//! field (`64 - DISP_BITS - slot_bits - ord_bits` bits: remainder, a 1,
//! zeros). An empty bucket is 0; an entry is never 0 (the terminator).

/// Bits of an entry's displacement from its home bucket.
pub const DISP_BITS: u32 = 8;
const MAX_DISP: u64 = (1 << DISP_BITS) - 1;
/// The table never has fewer than this many buckets.
pub const MIN_BUCKETS: usize = 1 << 10;
/// Bits of the hash past the top `m` that choose a home bucket (so that
/// buckets get equal shares of the hash space within 1/128).
const HOME_EXTRA: u32 = 8;
/// Most entries per bucket before the table grows: 9/10.
const LOAD_NUM: usize = 9;
const LOAD_DEN: usize = 10;

/// Buckets after a growth from `n`: 6/5 as many.
fn grown(n: usize) -> usize {
    n + n.div_ceil(5)
}
/// Fewest remainder-field bits a layout may leave (else the table refuses).
const MIN_FIELD_BITS: u32 = 6;

/// Where an entry points: a place in the segment table and a needle ordinal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecentLoc {
    /// Place in the segment table.
    pub slot: u32,
    /// Needle ordinal in that segment.
    pub ord: u32,
}

/// Why an entry could not be added.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RecentError {
    /// A location does not fit an 8-byte entry (segment place and ordinal
    /// need more than 50 bits together).
    #[error("segment place {slot} and ordinal {ord} do not fit the recent table's 8-byte entries")]
    TooWide {
        /// The segment place asked for.
        slot: u32,
        /// The ordinal asked for.
        ord: u32,
    },
    /// The table had to grow and an entry could not be placed again: its
    /// stored bits ran out and its needle's header could not be read, or
    /// more identities share its hash than one bucket's displacement
    /// limit allows (only with a table keyed by a few bits of the hash).
    #[error("the recent table could not grow: an entry could not be placed again (its identity could not be read back, or too many identities share its hash)")]
    Unplaceable,
}

/// What a rebuild (growth, shrink, wider layout) needs from the caller for
/// an entry whose stored bits no longer place it: the identity's full hash
/// ([`hash_of`] of its key), read from wherever the location points. `None`
/// (unreadable) keeps the table as it was.
pub type Resolve<'a> = &'a mut dyn FnMut(RecentLoc) -> Option<u64>;

/// The hash of an identity the table is keyed by.
pub fn hash_of(key: u64, alt: u32) -> u64 {
    crate::hash::key_hash(key, alt, 0x7265_6365_6e74_5f31)
}

/// The recent table (see the module documentation).
#[derive(Clone, Debug)]
pub struct RecentTable {
    buckets: Vec<u64>,
    /// floor(log2(buckets)).
    m: u32,
    len: usize,
    slot_bits: u32,
    ord_bits: u32,
}

impl Default for RecentTable {
    fn default() -> Self {
        RecentTable::new()
    }
}

fn bits_for(x: u32) -> u32 {
    32 - x.leading_zeros()
}

impl RecentTable {
    /// An empty table.
    pub fn new() -> RecentTable {
        RecentTable::with_layout(MIN_BUCKETS, 8, 16)
    }

    /// An empty table with buckets for `n` entries at most 9/10 full.
    pub fn with_capacity(n: usize) -> RecentTable {
        RecentTable::with_layout((n * LOAD_DEN).div_ceil(LOAD_NUM), 8, 16)
    }

    fn with_layout(n: usize, slot_bits: u32, ord_bits: u32) -> RecentTable {
        let n = n.max(MIN_BUCKETS);
        RecentTable {
            buckets: vec![0; n],
            m: usize::BITS - 1 - n.leading_zeros(),
            len: 0,
            slot_bits,
            ord_bits,
        }
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the table holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of RAM the table holds.
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * 8
    }

    /// Buckets.
    pub fn capacity(&self) -> usize {
        self.buckets.len()
    }

    /// Bits of the remainder field (remainder + terminator).
    pub fn field_bits(&self) -> u32 {
        64 - DISP_BITS - self.slot_bits - self.ord_bits
    }

    /// The bucket after `pos`.
    #[inline]
    fn next(&self, pos: usize) -> usize {
        if pos + 1 == self.buckets.len() {
            0
        } else {
            pos + 1
        }
    }

    /// The bucket `d` before `pos`.
    fn back(&self, pos: usize, d: usize) -> usize {
        let n = self.buckets.len();
        (pos + n - d % n) % n
    }

    /// The home bucket of the top `m + HOME_EXTRA` bits `t` of a hash.
    #[inline]
    fn home_of(&self, t: u64) -> usize {
        ((u128::from(t) * self.buckets.len() as u128) >> (self.m + HOME_EXTRA)) as usize
    }

    /// Home bucket and query field of a hash at the current size.
    fn query(&self, h: u64) -> (usize, u64) {
        let m = self.m;
        let home = self.home_of(h >> (64 - m - HOME_EXTRA));
        let r = self.field_bits() - 1;
        let rem = (h << m) >> (64 - r);
        (home, (rem << 1) | 1)
    }

    fn field(&self, e: u64) -> u64 {
        e >> (DISP_BITS + self.slot_bits + self.ord_bits)
    }
    fn disp(&self, e: u64) -> u64 {
        (e >> (self.slot_bits + self.ord_bits)) & MAX_DISP
    }
    fn loc(&self, e: u64) -> RecentLoc {
        RecentLoc {
            slot: ((e >> self.ord_bits) & ((1u64 << self.slot_bits) - 1)) as u32,
            ord: (e & ((1u64 << self.ord_bits) - 1)) as u32,
        }
    }
    fn encode(&self, field: u64, disp: u64, loc: RecentLoc) -> u64 {
        (field << (DISP_BITS + self.slot_bits + self.ord_bits))
            | (disp << (self.slot_bits + self.ord_bits))
            | (u64::from(loc.slot) << self.ord_bits)
            | u64::from(loc.ord)
    }
    fn fits(&self, loc: RecentLoc) -> bool {
        bits_for(loc.slot) <= self.slot_bits && bits_for(loc.ord) <= self.ord_bits
    }

    /// Whether a stored field matches a query field: the stored one's valid
    /// remainder bits (above its lowest set bit) equal the query's.
    fn matches(stored: u64, q: u64) -> bool {
        let t = stored.trailing_zeros() + 1;
        stored >> t == q >> t
    }

    /// Bucket positions of entries whose remainder matches `h`.
    fn positions(&self, h: u64) -> impl Iterator<Item = usize> + '_ {
        let (home, q) = self.query(h);
        let mut pos = home;
        let mut i = 0u64;
        let mut done = false;
        std::iter::from_fn(move || {
            while !done {
                let here_pos = pos;
                pos = self.next(pos);
                let pos = here_pos;
                let e = self.buckets[pos];
                if e == 0 || self.disp(e) < i || i > MAX_DISP {
                    done = true;
                    return None;
                }
                let here = self.disp(e) == i && Self::matches(self.field(e), q);
                i += 1;
                if here {
                    return Some(pos);
                }
            }
            None
        })
    }

    /// Locations whose entry matches the identity with hash `h`: the
    /// identity's own (at most one, if the caller keeps one per identity)
    /// and, rarely, strangers' that share its remainder.
    pub fn candidates(&self, h: u64) -> impl Iterator<Item = RecentLoc> + '_ {
        self.positions(h).map(|p| self.loc(self.buckets[p]))
    }

    /// Whether an entry (h, loc) is held. Exact: a location holds one
    /// needle, so a matching remainder at that location is that identity's.
    pub fn contains(&self, h: u64, loc: RecentLoc) -> bool {
        self.candidates(h).any(|l| l == loc)
    }

    /// Every location held, in bucket order.
    pub fn locs(&self) -> impl Iterator<Item = RecentLoc> + '_ {
        self.buckets
            .iter()
            .filter(|&&e| e != 0)
            .map(|&e| self.loc(e))
    }

    /// Removes the entry (h, loc); false if it is not held.
    pub fn remove(&mut self, h: u64, loc: RecentLoc) -> bool {
        let Some(pos) = self
            .positions(h)
            .find(|&p| self.loc(self.buckets[p]) == loc)
        else {
            return false;
        };
        // Backward shift: pull the following displaced entries one back.
        let shift = self.slot_bits + self.ord_bits;
        let mut j = pos;
        loop {
            let next = self.next(j);
            let e = self.buckets[next];
            if e == 0 || self.disp(e) == 0 {
                self.buckets[j] = 0;
                break;
            }
            self.buckets[j] = e - (1 << shift);
            j = next;
        }
        self.len -= 1;
        true
    }

    /// Adds an entry for the identity with hash `h` at `loc`. The caller
    /// removes the identity's previous entry first (the table cannot tell
    /// an identity from a stranger with the same remainder).
    pub fn insert(
        &mut self,
        h: u64,
        loc: RecentLoc,
        resolve: Resolve<'_>,
    ) -> Result<(), RecentError> {
        if !self.fits(loc) {
            let wide = RecentError::TooWide {
                slot: loc.slot,
                ord: loc.ord,
            };
            let mut slot_bits = self.slot_bits.max(bits_for(loc.slot));
            let mut ord_bits = self.ord_bits.max(bits_for(loc.ord));
            let room = |s: u32, o: u32| 64 - DISP_BITS >= s + o + MIN_FIELD_BITS;
            if !room(slot_bits, ord_bits) {
                return Err(wide);
            }
            // Headroom, so that widths change a few times in a store's life.
            if slot_bits > self.slot_bits && room(slot_bits + 2, ord_bits) {
                slot_bits += 2;
            }
            if ord_bits > self.ord_bits && room(slot_bits, ord_bits + 2) {
                ord_bits += 2;
            }
            if !self.rebuild(self.capacity(), slot_bits, ord_bits, None, resolve) {
                return Err(RecentError::Unplaceable);
            }
        }
        if (self.len + 1) * LOAD_DEN > self.buckets.len() * LOAD_NUM {
            // A failed growth leaves the table fuller than 9/10 but whole.
            let _ = self.rebuild(
                grown(self.capacity()),
                self.slot_bits,
                self.ord_bits,
                None,
                resolve,
            );
        }
        let (home, q) = self.query(h);
        if let Err(carry) = self.place(home, q, loc) {
            self.len -= 1;
            if !self.rebuild(
                grown(self.capacity()),
                self.slot_bits,
                self.ord_bits,
                Some(carry),
                resolve,
            ) {
                return Err(RecentError::Unplaceable);
            }
        }
        Ok(())
    }

    /// Gives back buckets once at most a quarter of them are used (after a
    /// merge emptied the table), to 4/3 of the entries (3/4 full), which
    /// also lengthens the remainders.
    pub fn shrink_if_sparse(&mut self, resolve: Resolve<'_>) {
        let n = self.capacity();
        if n > MIN_BUCKETS && self.len * 4 <= n {
            // Shrinking only lengthens remainders: it cannot fail.
            let _ = self.rebuild(
                (self.len * 4).div_ceil(3),
                self.slot_bits,
                self.ord_bits,
                None,
                resolve,
            );
        }
    }

    /// Robin Hood insertion; Err((home, field, loc)) of an entry left
    /// without a bucket within the displacement limit.
    fn place(
        &mut self,
        home: usize,
        field: u64,
        loc: RecentLoc,
    ) -> Result<(), (usize, u64, RecentLoc)> {
        let (mut field, mut loc, mut disp) = (field, loc, 0u64);
        let mut pos = home;
        loop {
            let e = self.buckets[pos];
            if e == 0 {
                self.buckets[pos] = self.encode(field, disp, loc);
                self.len += 1;
                return Ok(());
            }
            let d = self.disp(e);
            if d < disp {
                self.buckets[pos] = self.encode(field, disp, loc);
                field = self.field(e);
                loc = self.loc(e);
                disp = d;
            }
            disp += 1;
            pos = self.next(pos);
            if disp > MAX_DISP {
                // The entry carried now was displaced from its home by the
                // whole limit: it is out of the table until a rebuild.
                let home = self.back(pos, disp as usize);
                self.len += 1; // counted until a rebuild places it
                return Err((home, field, loc));
            }
        }
    }

    /// The known hash prefix of an entry: (prefix, its length in bits), or
    /// None if too few remainder bits are left to tell its top `m` bits
    /// from its home bucket.
    fn prefix(&self, home: usize, field: u64) -> Option<(u128, u32)> {
        let t = field.trailing_zeros();
        let v = self.field_bits() - 1 - t;
        if v < HOME_EXTRA {
            return None;
        }
        let r = field >> (t + 1);
        // The top m + 8 bits of the hash: the one value homed in `home`
        // whose low 8 bits are the remainder's first 8.
        let e = self.m + HOME_EXTRA;
        let lo = ((home as u128) << e).div_ceil(self.buckets.len() as u128);
        let r8 = u128::from(r >> (v - HOME_EXTRA));
        let top = (lo + (r8.wrapping_sub(lo) & 0xff)) >> HOME_EXTRA;
        Some(((top << v) | u128::from(r), self.m + v))
    }

    /// Moves every entry (and `extra`) into a table of `n` buckets (more
    /// if an entry would be displaced past the limit) and the given
    /// location widths. False if an entry cannot be placed (its known bits
    /// ran out and `resolve` failed): the table is then left as it was,
    /// without `extra`.
    fn rebuild(
        &mut self,
        n: usize,
        slot_bits: u32,
        ord_bits: u32,
        extra: Option<(usize, u64, RecentLoc)>,
        resolve: Resolve<'_>,
    ) -> bool {
        let mut n = n.max(MIN_BUCKETS);
        // Growing places an entry displaced past the limit only if the
        // hashes around it differ: identities that share their whole hash
        // (a table keyed by a few bits of it, `StoreConfig::recent_hash_bits`
        // in tests) never fit, however large the table. Past 8 times the
        // size asked for, give up rather than allocate without end.
        let most = n.saturating_mul(8);
        'size: loop {
            if n > most {
                return false;
            }
            let mut next = RecentTable::with_layout(n, slot_bits, ord_bits);
            let m = next.m;
            let olds = self
                .buckets
                .iter()
                .enumerate()
                .filter(|(_, &e)| e != 0)
                .map(|(pos, &e)| {
                    (
                        self.back(pos, self.disp(e) as usize),
                        self.field(e),
                        self.loc(e),
                    )
                })
                .chain(extra);
            for (home, field, loc) in olds {
                let (p, k) = match self.prefix(home, field) {
                    Some((p, k)) if k >= m + HOME_EXTRA => (p, k),
                    _ => match resolve(loc) {
                        Some(h) => (u128::from(h), 64),
                        None => return false,
                    },
                };
                let new_home = next.home_of((p >> (k - m - HOME_EXTRA)) as u64);
                let v = (k - m).min(next.field_bits() - 1);
                let r = ((p >> (k - m - v)) & ((1u128 << v) - 1)) as u64;
                let f = ((r << 1) | 1) << (next.field_bits() - 1 - v);
                if next.place(new_home, f, loc).is_err() {
                    n = grown(n);
                    continue 'size;
                }
            }
            *self = next;
            return true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn no_resolve(_: RecentLoc) -> Option<u64> {
        None
    }

    fn loc(i: u32) -> RecentLoc {
        RecentLoc {
            slot: i % 37,
            ord: i,
        }
    }

    #[test]
    fn finds_every_entry_through_growth_and_shrink() {
        let mut t = RecentTable::new();
        let n = 200_000u32;
        for i in 0..n {
            t.insert(hash_of(u64::from(i), 0), loc(i), &mut no_resolve)
                .unwrap();
        }
        assert_eq!(t.len(), n as usize);
        assert!(t.capacity() * 9 >= n as usize * 10);
        // Never emptier than 3/4 past the smallest size: 10.7 bytes per
        // entry at most.
        assert!(t.capacity() * 3 <= n as usize * 4, "{}", t.capacity());
        for i in 0..n {
            assert!(t.contains(hash_of(u64::from(i), 0), loc(i)), "entry {i}");
        }
        // Strangers: few candidates.
        let strangers: usize = (n..n + 100_000)
            .map(|i| t.candidates(hash_of(u64::from(i), 0)).count())
            .sum();
        assert!(strangers < 100, "{strangers} stranger candidates");
        for i in 0..n - 1000 {
            assert!(t.remove(hash_of(u64::from(i), 0), loc(i)));
        }
        assert!(!t.remove(hash_of(0, 0), loc(0)));
        t.shrink_if_sparse(&mut no_resolve);
        assert!(t.capacity() < 8192, "{}", t.capacity());
        for i in n - 1000..n {
            assert!(t.contains(hash_of(u64::from(i), 0), loc(i)), "entry {i}");
        }
        assert_eq!(t.len(), 1000);
    }

    #[test]
    fn wider_locations_relayout() {
        let mut t = RecentTable::new();
        for i in 0..5000u32 {
            t.insert(hash_of(u64::from(i), 1), loc(i), &mut no_resolve)
                .unwrap();
        }
        let far = RecentLoc {
            slot: 1 << 20,
            ord: (1 << 25) + 3,
        };
        t.insert(hash_of(9_999_999, 1), far, &mut no_resolve)
            .unwrap();
        for i in 0..5000u32 {
            assert!(t.contains(hash_of(u64::from(i), 1), loc(i)));
        }
        assert!(t.contains(hash_of(9_999_999, 1), far));
        let too = RecentLoc {
            slot: u32::MAX,
            ord: u32::MAX,
        };
        assert!(t.insert(1, too, &mut no_resolve).is_err());
    }

    #[test]
    fn identities_sharing_one_hash_past_the_limit_are_refused_not_grown_for() {
        // One hash for all: at most MAX_DISP + 1 entries fit one home, and
        // no size of table helps; the insert past that fails, and the
        // table stays small.
        let mut t = RecentTable::new();
        let mut refused = None;
        for i in 0..400u32 {
            if t.insert(7 << 61, loc(i), &mut no_resolve).is_err() {
                refused = Some(i);
                break;
            }
        }
        assert_eq!(refused, Some(MAX_DISP as u32 + 1));
        assert!(t.capacity() <= 1 << 16, "{} buckets", t.capacity());
    }

    #[test]
    fn exhausted_remainders_are_resolved() {
        // The widest locations leave a 6-bit field: entries inserted into a
        // small table run out of bits as it grows, and are placed again
        // from their hashes.
        let mut t = RecentTable::new();
        let mut hashes: HashMap<RecentLoc, u64> = HashMap::new();
        let n = 40_000u32;
        for i in 0..n {
            let l = RecentLoc {
                slot: (1 << 24) + i,
                ord: (1 << 23) + i,
            };
            let h = hash_of(u64::from(i), 7);
            hashes.insert(l, h);
            let mut r = |x: RecentLoc| hashes.get(&x).copied();
            t.insert(h, l, &mut r).unwrap();
        }
        for (l, h) in &hashes {
            assert!(t.contains(*h, *l));
        }
    }

    proptest::proptest! {
        #[test]
        fn behaves_like_a_multimap(ops in proptest::collection::vec((0u8..3, 0u64..300, 0u32..50), 1..600)) {
            let mut t = RecentTable::new();
            let mut model: HashMap<u64, RecentLoc> = HashMap::new();
            for (op, k, o) in ops {
                let h = hash_of(k, 0);
                match op {
                    0 | 1 => {
                        if let Some(old) = model.remove(&k) {
                            proptest::prop_assert!(t.remove(h, old));
                        }
                        let l = RecentLoc { slot: o, ord: (k as u32) * 64 + o };
                        t.insert(h, l, &mut no_resolve).unwrap();
                        model.insert(k, l);
                    }
                    _ => {
                        if let Some(old) = model.remove(&k) {
                            proptest::prop_assert!(t.remove(h, old));
                        }
                    }
                }
                proptest::prop_assert_eq!(t.len(), model.len());
            }
            for (k, l) in &model {
                proptest::prop_assert!(t.contains(hash_of(*k, 0), *l));
            }
        }
    }
}
