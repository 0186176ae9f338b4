//! SplitKV's hotness migration (`hot_eviction = "weight"`): every object in the hot store
//! carries a weight, its access count (reads the store answers, writes flushes bring to it),
//! saturating. Once the store passes [`TRIGGER`] of its budget, the objects weighing less than
//! the average move to the LSM and the average is taken off the weights of those kept, so old
//! popularity fades and a key must keep being used to stay.
//!
//! Weights live in memory only: after a restart every object starts at 0, all equal.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};

/// Share of the budget above which a migration round runs.
pub(crate) const TRIGGER: f64 = 0.80;
/// Share of the budget a round migrates down to when every weight equals the average (none
/// is below it, so weights cannot choose): objects then go in key order.
pub(crate) const TIE_TARGET: f64 = 0.70;
const SHARDS: usize = 16;

/// Per-key weights of the objects in the store, sharded by key hash.
///
/// Lock order: a shard is locked inside the store's index lock (read or write), never the
/// other way round, so a key leaving the index (under the write lock) cannot race a read
/// adding to its weight (under the read lock).
pub(crate) struct Weights {
    shards: Vec<Mutex<HashMap<Vec<u8>, u32>>>,
    /// NB: a fixed hasher: the same accesses give the same shards in every run.
    hasher: std::hash::BuildHasherDefault<std::collections::hash_map::DefaultHasher>,
}

impl Weights {
    /// No weights yet.
    pub fn new() -> Weights {
        Weights {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            hasher: Default::default(),
        }
    }

    fn shard(&self, key: &[u8]) -> &Mutex<HashMap<Vec<u8>, u32>> {
        let mut h = self.hasher.build_hasher();
        h.write(key);
        &self.shards[h.finish() as usize % SHARDS]
    }

    /// Adds `accesses` to `key`'s weight (saturating at `u32::MAX`).
    pub fn add(&self, key: &[u8], accesses: u32) {
        let mut shard = self.shard(key).lock();
        match shard.get_mut(key) {
            Some(w) => *w = w.saturating_add(accesses),
            None => {
                shard.insert(key.to_vec(), accesses);
            }
        }
    }

    /// `key`'s weight; 0 for a key never counted (or counted before a restart).
    pub fn get(&self, key: &[u8]) -> u32 {
        self.shard(key).lock().get(key).copied().unwrap_or(0)
    }

    /// Forgets `key` (it left the store).
    pub fn remove(&self, key: &[u8]) {
        self.shard(key).lock().remove(key);
    }

    /// Takes `average` off every weight (at least 0): the round's ageing of the kept keys.
    pub fn age(&self, average: u32) {
        for shard in &self.shards {
            for w in shard.lock().values_mut() {
                *w = aged(*w, average);
            }
        }
    }
}

/// A round's decision over the store's objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Round {
    /// The average weight, rounded down: what the kept objects lose.
    pub average: u32,
    /// Indices (into the weights given) of the objects to migrate: those strictly below the
    /// exact average, in the order given.
    pub migrate: Vec<usize>,
}

/// Decides a round over `weights`: the average, and the objects weighing less than it.
/// Nothing migrates when every weight is equal (the caller then falls back to key order).
pub(crate) fn plan_round(weights: &[u32]) -> Round {
    if weights.is_empty() {
        return Round {
            average: 0,
            migrate: Vec::new(),
        };
    }
    let n = weights.len() as u64;
    let sum: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    // NB: `w < sum / n` compared as `w * n < sum`, so a fractional average still splits
    // weights 1 and 2 apart.
    let migrate = weights
        .iter()
        .enumerate()
        .filter(|(_, &w)| u64::from(w) * n < sum)
        .map(|(i, _)| i)
        .collect();
    Round {
        average: (sum / n) as u32,
        migrate,
    }
}

/// A kept object's weight after a round whose average was `average`.
pub(crate) fn aged(weight: u32, average: u32) -> u32 {
    weight.saturating_sub(average)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_migrates_the_objects_below_the_average() {
        // Sum 40 over 5: average 8; 1, 2 and 5 are below it, 8 is not, 24 stays.
        let r = plan_round(&[24, 1, 8, 2, 5]);
        assert_eq!(r.average, 8);
        assert_eq!(r.migrate, vec![1, 3, 4]);
        // Kept objects lose the average; a kept object at the average drops to 0.
        assert_eq!(aged(24, r.average), 16);
        assert_eq!(aged(8, r.average), 0);
    }

    #[test]
    fn a_fractional_average_still_splits_neighbours() {
        // Average 1.5: the 1 goes, the 2 stays and loses the rounded-down average.
        let r = plan_round(&[1, 2]);
        assert_eq!((r.average, r.migrate), (1, vec![0]));
        assert_eq!(aged(2, r.average), 1);
    }

    #[test]
    fn equal_weights_migrate_nothing() {
        // After a restart every weight is 0: no object is below the average.
        assert_eq!(plan_round(&[0, 0, 0]).migrate, Vec::<usize>::new());
        assert_eq!(plan_round(&[7; 10]).average, 7);
        assert_eq!(
            plan_round(&[]),
            Round {
                average: 0,
                migrate: vec![]
            }
        );
    }

    #[test]
    fn saturated_weights_average_without_overflow() {
        let r = plan_round(&[u32::MAX, u32::MAX, 0]);
        assert_eq!(r.average, (2 * u64::from(u32::MAX) / 3) as u32);
        assert_eq!(r.migrate, vec![2]);
    }

    #[test]
    fn weights_count_saturate_age_and_forget() {
        let w = Weights::new();
        w.add(b"a", 3);
        w.add(b"a", 2);
        w.add(b"b", u32::MAX);
        w.add(b"b", 9);
        assert_eq!((w.get(b"a"), w.get(b"b"), w.get(b"c")), (5, u32::MAX, 0));
        w.age(4);
        assert_eq!((w.get(b"a"), w.get(b"b")), (1, u32::MAX - 4));
        w.age(4);
        assert_eq!(w.get(b"a"), 0);
        w.remove(b"a");
        assert_eq!(w.get(b"a"), 0);
    }
}
