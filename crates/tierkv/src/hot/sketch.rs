//! Recent access frequency, for deciding which promotions are worth their demotions.
//!
//! A promotion into a full store evicts objects to make room. The 2-bit clock says a key was
//! read lately, not how often: near the store's edge, where a key is read once in millions of
//! reads, every key that happens to be read twice looks as hot as the objects it would evict,
//! and the store churns (each swap a slot write now and a demotion later) without serving more
//! reads. So every access is also counted here, and a promotion candidate must beat the
//! typical frequency of what demotions evict ([`AdmissionBar`]).
//!
//! [`FrequencySketch`] is a count-min sketch: each key adds to four 4-bit counters picked by
//! its hash, and its estimate is the least of them (collisions can only raise a count).
//! Increments are conservative (only the counters at that least value grow), which keeps
//! the estimates of rarely read keys near their true value. After `SAMPLE_PER_KEY` accesses
//! per key it is sized for, every counter is halved: old popularity fades, and a workload
//! whose hot set moves is followed within a few samples.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters a key adds to.
const ROWS: u64 = 4;
/// A counter's ceiling (4 bits).
pub(crate) const MAX_FREQUENCY: u8 = 15;
/// Counters per key the sketch is sized for: few collisions among the keys that matter.
const COUNTERS_PER_KEY: usize = 16;
/// Accesses between halvings, per key the sketch is sized for.
const SAMPLE_PER_KEY: u64 = 10;
const COUNTERS_PER_WORD: u64 = 16;
/// Each counter's three low bits: a word shifted right by one, then masked, halves all 16.
const HALVING_MASK: u64 = 0x7777_7777_7777_7777;

/// A count-min sketch of 4-bit counters that halves itself every `sample` accesses. Safe to
/// share: counters are updated with atomic operations, and an increment that races a halving
/// is at worst off by one.
pub(crate) struct FrequencySketch {
    /// The keys it is sized for.
    keys: usize,
    words: Box<[AtomicU64]>,
    /// Counters - 1 (a power of two less one).
    mask: u64,
    /// Accesses since the last halving.
    recorded: AtomicU64,
    sample: u64,
    /// Halvings so far.
    generation: AtomicU64,
}

impl FrequencySketch {
    /// A sketch sized for about `keys` keys of interest.
    pub fn new(keys: usize) -> FrequencySketch {
        let keys = keys.max(64);
        let counters = (keys * COUNTERS_PER_KEY).next_power_of_two() as u64;
        let words = (counters / COUNTERS_PER_WORD) as usize;
        FrequencySketch {
            keys,
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
            mask: counters - 1,
            recorded: AtomicU64::new(0),
            sample: keys as u64 * SAMPLE_PER_KEY,
            generation: AtomicU64::new(0),
        }
    }

    /// The keys it is sized for.
    pub fn keys(&self) -> usize {
        self.keys
    }

    /// A copy sized for `keys` (at least as many as this one's), every estimate kept: the
    /// table doubles, and a counter's position in the larger table, masked to this one's
    /// size, is its position here, so each new counter starts as the one it came from.
    pub fn grown(&self, keys: usize) -> FrequencySketch {
        let bigger = FrequencySketch::new(keys.max(self.keys));
        let old = self.words.len();
        for (i, word) in bigger.words.iter().enumerate() {
            word.store(
                self.words[i % old].load(Ordering::Relaxed),
                Ordering::Relaxed,
            );
        }
        bigger
            .recorded
            .store(self.recorded.load(Ordering::Relaxed), Ordering::Relaxed);
        bigger
            .generation
            .store(self.generation(), Ordering::Relaxed);
        bigger
    }

    /// The counters of the key whose hash is `hash`: double hashing over the table.
    fn counters(&self, hash: u64) -> [u64; ROWS as usize] {
        let step = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(31) | 1;
        std::array::from_fn(|i| hash.wrapping_add(step.wrapping_mul(i as u64)) & self.mask)
    }

    fn count(&self, counter: u64) -> u8 {
        let word = self.words[(counter / COUNTERS_PER_WORD) as usize].load(Ordering::Relaxed);
        ((word >> ((counter % COUNTERS_PER_WORD) * 4)) & 0xF) as u8
    }

    /// Adds one to `counter` unless it is at the ceiling.
    fn increment(&self, counter: u64) {
        let shift = (counter % COUNTERS_PER_WORD) * 4;
        let word = &self.words[(counter / COUNTERS_PER_WORD) as usize];
        let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
            ((w >> shift) & 0xF < MAX_FREQUENCY as u64).then(|| w + (1 << shift))
        });
    }

    /// Counts an access to the key whose hash is `hash`.
    pub fn record(&self, hash: u64) {
        let counters = self.counters(hash);
        let counts = counters.map(|c| self.count(c));
        let least = counts.iter().copied().min().unwrap_or(0);
        for (&c, &n) in counters.iter().zip(&counts) {
            if n == least {
                self.increment(c);
            }
        }
        // NB: exactly one access reaches the sample; it halves, the others go on counting.
        if self.recorded.fetch_add(1, Ordering::Relaxed) + 1 == self.sample {
            self.halve();
            self.recorded.fetch_sub(self.sample, Ordering::Relaxed);
        }
    }

    /// The estimated recent accesses of the key whose hash is `hash`, at most
    /// [`MAX_FREQUENCY`].
    pub fn estimate(&self, hash: u64) -> u8 {
        self.counters(hash)
            .iter()
            .map(|&c| self.count(c))
            .min()
            .unwrap_or(0)
    }

    /// How many times the counters have been halved.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Relaxed)
    }

    fn halve(&self) {
        for word in self.words.iter() {
            let _ = word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
                Some((w >> 1) & HALVING_MASK)
            });
        }
        self.generation.fetch_add(1, Ordering::Relaxed);
    }
}

/// The frequency a promotion candidate must beat: the median frequency of the objects the
/// last demotion evicted, halved with the sketch since (their counts were halved too).
/// Starts at 0: until a demotion says otherwise, any key read from the LSM is worth a slot.
#[derive(Default)]
pub(crate) struct AdmissionBar {
    /// `generation << 4 | median`.
    packed: AtomicU64,
}

impl AdmissionBar {
    /// Records the frequencies of a demotion's victims, measured at sketch `generation`.
    pub fn set(&self, mut victims: Vec<u8>, generation: u64) {
        if victims.is_empty() {
            return;
        }
        let middle = victims.len() / 2;
        let (_, &mut median, _) = victims.select_nth_unstable(middle);
        self.packed
            .store(generation << 4 | median as u64, Ordering::Relaxed);
    }

    /// The bar at sketch `generation`.
    pub fn get(&self, generation: u64) -> u8 {
        let packed = self.packed.load(Ordering::Relaxed);
        let since = generation.saturating_sub(packed >> 4).min(4);
        ((packed & 0xF) >> since) as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    fn hash(i: u64) -> u64 {
        i.wrapping_mul(0xD6E8_FEB8_6659_FD93).rotate_left(17) ^ 0x5851_F42D_4C95_7F2D
    }

    #[test]
    fn counts_accesses_up_to_the_ceiling() {
        let s = FrequencySketch::new(1000);
        assert_eq!(s.estimate(hash(1)), 0);
        for n in 1..=20u8 {
            s.record(hash(1));
            assert_eq!(s.estimate(hash(1)), n.min(MAX_FREQUENCY));
        }
        assert_eq!(s.estimate(hash(2)), 0);
    }

    #[test]
    fn halves_after_a_sample() {
        let s = FrequencySketch::new(64);
        for _ in 0..12 {
            s.record(hash(7));
        }
        // The sample is 640 accesses: the other 628 go to keys read once each.
        for i in 0..628 {
            s.record(hash(1000 + i));
        }
        assert_eq!(s.generation(), 1);
        assert_eq!(s.estimate(hash(7)), 6);
    }

    #[test]
    fn skewed_stream_ranks_hot_keys_above_cold_ones() {
        // 10 000 keys, 1% of them take 90% of 50 000 accesses: the sketch, sized for 1 000
        // keys, must still tell the hot ones from the rest.
        let s = FrequencySketch::new(1000);
        let mut rng = SmallRng::seed_from_u64(3);
        for _ in 0..50_000 {
            let key = if rng.gen_bool(0.9) {
                rng.gen_range(0..100)
            } else {
                rng.gen_range(100..10_000)
            };
            s.record(hash(key));
        }
        let hot = (0..100).filter(|&k| s.estimate(hash(k)) >= 4).count();
        let cold = (100..10_000).filter(|&k| s.estimate(hash(k)) >= 4).count();
        assert_eq!(hot, 100);
        assert!(cold < 100, "{cold} cold keys look hot");
    }

    #[test]
    fn a_grown_sketch_keeps_every_estimate() {
        let s = FrequencySketch::new(100);
        for k in 0..300u64 {
            for _ in 0..k % 7 {
                s.record(hash(k));
            }
        }
        let g = s.grown(5000);
        assert_eq!(g.keys(), 5000);
        assert_eq!(g.generation(), s.generation());
        for k in 0..300u64 {
            assert_eq!(g.estimate(hash(k)), s.estimate(hash(k)), "key {k}");
        }
    }

    #[test]
    fn bar_is_the_victims_median_and_fades_with_halvings() {
        let bar = AdmissionBar::default();
        assert_eq!(bar.get(0), 0);
        bar.set(vec![9, 1, 8, 2, 8], 3);
        assert_eq!(bar.get(3), 8);
        assert_eq!(bar.get(4), 4);
        assert_eq!(bar.get(6), 1);
        assert_eq!(bar.get(100), 0);
        bar.set(Vec::new(), 5);
        assert_eq!(bar.get(6), 1, "no victims: the bar stays");
    }
}
