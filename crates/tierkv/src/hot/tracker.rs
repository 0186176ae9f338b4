//! Popularity: the tracker (a 2-bit clock per tracked key) and the mapper (which clock values
//! are pinned on the fast tier).
//!
//! The tracker holds a bounded number of keys (by their hashes), split into shards by hash. A
//! key enters with clock 0; each later access sets its clock to 3. When a shard is full, its
//! clock hand sweeps: a key at 0 is evicted and the newcomer takes its place, any other key's
//! clock is decremented. Keys not tracked count as coldest.
//!
//! Every access is also counted in a frequency sketch (`sketch`), over all keys, tracked or
//! not: promotions compare a candidate's recent frequency with that of what demotions evict.

use super::sketch::{AdmissionBar, FrequencySketch};
use hashbrown::HashTable;
use parking_lot::{Mutex, RwLock};
use std::hash::{BuildHasher, Hasher};

/// Highest clock value (2 bits).
pub(crate) const MAX_CLOCK: u8 = 3;
const SHARDS: usize = 16;

/// NB: a fixed hasher: the same accesses give the same clocks in every run.
type FixedHasher = std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>;

pub(crate) fn hash_key(key: &[u8]) -> u64 {
    let mut h = FixedHasher::default().build_hasher();
    h.write(key);
    h.finish()
}

struct Shard {
    /// The tracked keys, by their hashes ([`hash_key`]), in the sweep's order.
    ///
    /// NB: a hash, not the key. The tracker holds a fifth of all keys, and a key's copy cost
    /// four to six times its 8-byte hash (the copy, its allocation, the pointer to it): on a
    /// store of a million keys, about 15 MiB against under 4 MiB of hashes (docs/hot-tier.md),
    /// taken from a memory-bounded process's page cache.
    /// Two keys with one hash would share a clock and count as one: with a billion keys
    /// tracked, the chance that any two do is about 3%, and then it only skews a ranking.
    hashes: Vec<u64>,
    /// The clock of each of `hashes`.
    clocks: Vec<u8>,
    /// Positions in `hashes`, found by hash.
    pos: HashTable<u32>,
    hand: usize,
    capacity: usize,
}

impl Shard {
    fn new(capacity: usize) -> Shard {
        Shard {
            hashes: Vec::new(),
            clocks: Vec::new(),
            pos: HashTable::new(),
            hand: 0,
            capacity,
        }
    }

    fn find(&self, hash: u64) -> Option<usize> {
        self.pos
            .find(hash, |&i| self.hashes[i as usize] == hash)
            .map(|&i| i as usize)
    }

    /// Indexes `hashes[i]`.
    fn index(&mut self, i: usize) {
        let Shard { hashes, pos, .. } = self;
        pos.insert_unique(hashes[i], i as u32, |&j| hashes[j as usize]);
    }

    /// Records an access to the key hashing to `hash`; returns whether it was tracked
    /// before it.
    fn touch(&mut self, hash: u64) -> bool {
        if let Some(i) = self.find(hash) {
            self.clocks[i] = MAX_CLOCK;
            return true;
        }
        if self.capacity == 0 {
            return false;
        }
        if self.hashes.len() < self.capacity {
            self.hashes.push(hash);
            self.clocks.push(0);
            self.index(self.hashes.len() - 1);
            return false;
        }
        // NB: terminates within four sweeps: each pass decrements every clock.
        loop {
            let i = self.hand;
            self.hand = (self.hand + 1) % self.hashes.len();
            if self.clocks[i] == 0 {
                let old = self.hashes[i];
                if let Ok(entry) = self.pos.find_entry(old, |&j| j as usize == i) {
                    entry.remove();
                }
                self.hashes[i] = hash;
                self.index(i);
                return false;
            }
            self.clocks[i] -= 1;
        }
    }

    fn clock(&self, hash: u64) -> Option<u8> {
        self.find(hash).map(|i| self.clocks[i])
    }
}

/// Concurrent, bounded key -> clock map, with every key's recent access frequency.
pub(crate) struct Tracker {
    shards: Vec<Mutex<Shard>>,
    /// NB: behind a lock only so that [`Tracker::grow`] can swap in a larger one.
    frequencies: RwLock<FrequencySketch>,
    /// What a promotion candidate's frequency must beat.
    bar: AdmissionBar,
}

impl Tracker {
    /// A tracker for at most `capacity` keys.
    pub fn new(capacity: usize) -> Tracker {
        let per = capacity.div_ceil(SHARDS);
        Tracker {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::new(per))).collect(),
            frequencies: RwLock::new(FrequencySketch::new(capacity)),
            bar: AdmissionBar::default(),
        }
    }

    /// `key`'s hash and shard. NB: the shard from bits the table's buckets and tags do not
    /// use much (its low bits and its top seven).
    fn shard(&self, key: &[u8]) -> (&Mutex<Shard>, u64) {
        let hash = hash_key(key);
        (&self.shards[(hash >> 32) as usize % SHARDS], hash)
    }

    /// Records an access to `key`; returns whether it was tracked before (so now at the top
    /// clock value: accessed lately).
    pub fn touch(&self, key: &[u8]) -> bool {
        let (shard, hash) = self.shard(key);
        let seen = shard.lock().touch(hash);
        self.frequencies.read().record(hash);
        seen
    }

    /// Lets the tracker hold up to `capacity` keys (never fewer than now), and sizes the
    /// frequency sketch to match, keeping its counts: a store opened empty learns how many
    /// keys it has only as they are written.
    pub fn grow(&self, capacity: usize) {
        let per = capacity.div_ceil(SHARDS);
        for shard in &self.shards {
            let mut shard = shard.lock();
            shard.capacity = shard.capacity.max(per);
        }
        // NB: the table doubles at a time: grown only once the keys would need a larger one.
        if capacity >= 2 * self.frequencies.read().keys() {
            let mut sketch = self.frequencies.write();
            if capacity >= 2 * sketch.keys() {
                *sketch = sketch.grown(capacity);
            }
        }
    }

    /// `key`'s estimated accesses lately (see [`FrequencySketch`]).
    pub fn frequency(&self, key: &[u8]) -> u8 {
        self.frequencies.read().estimate(hash_key(key))
    }

    /// Notes the objects a demotion evicts: their median frequency becomes the bar a
    /// promotion candidate must beat.
    pub fn note_evicted<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let sketch = self.frequencies.read();
        let frequencies = keys.map(|k| sketch.estimate(hash_key(k))).collect();
        self.bar.set(frequencies, sketch.generation());
    }

    /// Whether `key` is read more often lately than the objects demotions evict, so that
    /// promoting it is worth evicting one of them.
    pub fn beats_evicted(&self, key: &[u8]) -> bool {
        let sketch = self.frequencies.read();
        sketch.estimate(hash_key(key)) > self.bar.get(sketch.generation())
    }

    /// Whether `key` is worth promoting: at the top clock value, and read more often lately
    /// than the objects demotions evict ([`Tracker::beats_evicted`]). On the read path of
    /// every table read, so the key is hashed once for both.
    pub fn promotable(&self, key: &[u8]) -> bool {
        let (shard, hash) = self.shard(key);
        if shard.lock().clock(hash) != Some(MAX_CLOCK) {
            return false;
        }
        let sketch = self.frequencies.read();
        sketch.estimate(hash) > self.bar.get(sketch.generation())
    }

    /// The frequency a promotion candidate must beat now.
    pub fn admission_bar(&self) -> u8 {
        self.bar.get(self.frequencies.read().generation())
    }

    /// Keys it may hold.
    #[cfg(test)]
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.lock().capacity).sum()
    }

    /// The clock of `key`, `None` if it is not tracked.
    pub fn clock(&self, key: &[u8]) -> Option<u8> {
        let (shard, hash) = self.shard(key);
        shard.lock().clock(hash)
    }

    /// How many tracked keys have each clock value.
    pub fn histogram(&self) -> [u64; 4] {
        let mut h = [0u64; 4];
        for s in &self.shards {
            for &c in &s.lock().clocks {
                h[c as usize] += 1;
            }
        }
        h
    }

    /// Keys tracked.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().hashes.len()).sum()
    }
}

/// Coldness of an object with clock `clock` (`None`: untracked): `1 / (clock + 1)`, 1 for
/// an untracked key.
pub(crate) fn coldness(clock: Option<u8>) -> f64 {
    clock.map_or(1.0, |c| 1.0 / (c as f64 + 1.0))
}

/// The mapper's decision: keys with a clock above `threshold` are pinned on the fast tier,
/// keys at it with probability `share_at_threshold`, the others are not.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Mapper {
    pub threshold: u8,
    pub share_at_threshold: f64,
}

impl Mapper {
    /// The threshold that pins the hottest `pinned_objects` of the tracked keys whose clock
    /// counts are `histogram`: from the hottest value down, whole values while they fit, and
    /// the share of the next value that fills the rest.
    pub fn from_histogram(histogram: [u64; 4], pinned_objects: u64) -> Mapper {
        let mut left = pinned_objects;
        for clock in (0..=MAX_CLOCK).rev() {
            let n = histogram[clock as usize];
            if n >= left {
                let share = if n == 0 { 0.0 } else { left as f64 / n as f64 };
                return Mapper {
                    threshold: clock,
                    share_at_threshold: share,
                };
            }
            left -= n;
        }
        Mapper {
            threshold: 0,
            share_at_threshold: 1.0,
        }
    }

    /// Whether an object with `clock` is pinned; `draw` is uniform in [0, 1).
    pub fn is_popular(&self, clock: Option<u8>, draw: f64) -> bool {
        match clock {
            None => false,
            Some(c) if c > self.threshold => true,
            Some(c) if c == self.threshold => draw < self.share_at_threshold,
            Some(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    #[test]
    fn new_keys_enter_cold_and_accesses_heat() {
        let t = Tracker::new(100);
        t.touch(b"a");
        assert_eq!(t.clock(b"a"), Some(0));
        t.touch(b"a");
        assert_eq!(t.clock(b"a"), Some(3));
        assert_eq!(t.clock(b"b"), None);
    }

    #[test]
    fn sweep_evicts_cold_keys_first() {
        // One shard's worth: a single-shard view through a tiny tracker.
        let mut s = Shard::new(3);
        let touch = |s: &mut Shard, key: &[u8]| s.touch(hash_key(key));
        let clock = |s: &Shard, key: &[u8]| s.clock(hash_key(key));
        touch(&mut s, b"hot");
        touch(&mut s, b"hot");
        touch(&mut s, b"cold1");
        touch(&mut s, b"cold2");
        touch(&mut s, b"new");
        assert_eq!(clock(&s, b"cold1"), None);
        assert_eq!(clock(&s, b"new"), Some(0));
        // The sweep decremented the hot key it passed.
        assert_eq!(clock(&s, b"hot"), Some(2));
        assert_eq!(s.pos.len(), 3, "the evicted key left the index");
    }

    #[test]
    fn skewed_stream_keeps_hot_keys_tracked_and_hot() {
        let t = Tracker::new(200);
        let mut rng = SmallRng::seed_from_u64(7);
        for _ in 0..50_000 {
            // 80% of accesses to 20 hot keys, the rest spread over 10 000 keys.
            let k = if rng.gen_bool(0.8) {
                rng.gen_range(0..20u32)
            } else {
                rng.gen_range(1000..11_000u32)
            };
            t.touch(&k.to_be_bytes());
        }
        assert!(t.len() <= 16 * 13);
        let hot = (0..20u32)
            .filter(|k| t.clock(&k.to_be_bytes()).is_some_and(|c| c >= 2))
            .count();
        assert!(hot >= 18, "{hot} of 20 hot keys stay hot");
        let h = t.histogram();
        assert_eq!(h.iter().sum::<u64>(), t.len() as u64);
    }

    #[test]
    fn mapper_pins_hottest_share() {
        let m = Mapper::from_histogram([100, 50, 30, 20], 40);
        assert_eq!(m.threshold, 2);
        assert!((m.share_at_threshold - 20.0 / 30.0).abs() < 1e-9);
        assert!(m.is_popular(Some(3), 0.99));
        assert!(m.is_popular(Some(2), 0.5));
        assert!(!m.is_popular(Some(2), 0.7));
        assert!(!m.is_popular(Some(1), 0.0));
        assert!(!m.is_popular(None, 0.0));
        let all = Mapper::from_histogram([1, 1, 1, 1], 10);
        assert_eq!((all.threshold, all.share_at_threshold), (0, 1.0));
        let none = Mapper::from_histogram([5, 5, 5, 5], 0);
        assert_eq!(none.threshold, 3);
        assert!(!none.is_popular(Some(3), 0.0));
    }

    #[test]
    fn mapper_on_synthetic_stream_pins_about_the_target() {
        // 800 keys, skewed, and a tracker for 320: the clock sweeps really run.
        let t = Tracker::new(320);
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..20_000 {
            let k = (rng.gen::<f64>().powi(3) * 800.0) as u32;
            t.touch(&k.to_be_bytes());
        }
        let m = Mapper::from_histogram(t.histogram(), 100);
        let pinned = (0..800u32)
            .filter(|k| m.is_popular(t.clock(&k.to_be_bytes()), rng.gen()))
            .count();
        assert!((70..=130).contains(&pinned), "{pinned}");
        // The hottest keys are at or above the threshold (a sweep may just have passed one).
        let at_or_above = (0..10u32)
            .filter(|k| t.clock(&k.to_be_bytes()).is_some_and(|c| c >= m.threshold))
            .count();
        assert!(at_or_above >= 8, "{at_or_above} of the 10 hottest keys");
    }

    #[test]
    fn a_promotion_must_beat_the_median_of_what_demotions_evicted() {
        let t = Tracker::new(1000);
        let touch = |key: &[u8], times: usize| {
            for _ in 0..times {
                t.touch(key);
            }
        };
        // No demotion yet: any key read once is worth a slot, one never read is not.
        touch(b"once", 1);
        assert!(t.beats_evicted(b"once"));
        assert!(!t.beats_evicted(b"never"));
        // A demotion evicts objects read once, twice and twice: the bar is 2.
        touch(b"v1", 1);
        touch(b"v2", 2);
        touch(b"v3", 2);
        t.note_evicted([b"v1", b"v2", b"v3"].into_iter().map(|k| k.as_slice()));
        assert_eq!(t.admission_bar(), 2);
        touch(b"hot", 3);
        assert!(t.beats_evicted(b"hot"));
        assert!(
            !t.beats_evicted(b"v2"),
            "as often as the victims: not worth the swap"
        );
        assert!(!t.beats_evicted(b"once"));
        // Promotable: both at the top clock value and beating the bar.
        assert!(t.promotable(b"hot"));
        assert!(
            !t.promotable(b"v2"),
            "at the top clock value, but not above the bar"
        );
        touch(b"new", 1);
        t.note_evicted([b"never"].into_iter().map(|k| k.as_slice()));
        assert!(t.beats_evicted(b"new"));
        assert!(
            !t.promotable(b"new"),
            "above the bar, but it entered at clock 0"
        );
    }

    #[test]
    fn growing_keeps_clocks_and_frequencies_and_makes_room_for_more_keys() {
        let t = Tracker::new(64);
        for _ in 0..3 {
            t.touch(b"hot");
        }
        assert_eq!(t.capacity(), 64);
        t.grow(10_000);
        assert!(t.capacity() >= 10_000);
        assert_eq!(t.clock(b"hot"), Some(MAX_CLOCK));
        // The bar is 0 (no demotion yet): a key read before growing still beats it.
        assert!(t.beats_evicted(b"hot"));
        // 5 000 new keys all stay tracked: no sweep evicted any.
        for i in 0..5_000u32 {
            t.touch(&i.to_be_bytes());
        }
        assert_eq!(t.len(), 5_001);
        t.grow(100);
        assert!(t.capacity() >= 10_000, "never shrinks");
    }

    #[test]
    fn coldness_values() {
        assert_eq!(coldness(None), 1.0);
        assert_eq!(coldness(Some(0)), 1.0);
        assert_eq!(coldness(Some(3)), 0.25);
    }
}
