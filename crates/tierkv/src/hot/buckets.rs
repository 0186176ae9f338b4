//! Per-bucket counters for MSC's cost: how many of the store's keys fall in each candidate
//! range (a bucket), and how many of those also have a version in the capacity tier's tables.
//!
//! The buckets are the demotion candidates: the key ranges between the upper bounds of the
//! capacity tier's tables (bucket `i` holds the keys above bound `i - 1` up to bound `i`, the
//! last one unbounded above). The counters move as keys enter and leave the store, so a
//! demotion round reads `F`'s denominator and `o` for a candidate without walking its keys;
//! when compaction has changed the tables' bounds they are recounted in one pass.

/// The counters of every bucket.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Buckets {
    /// Inclusive upper bounds, strictly increasing; one bucket more than bounds.
    bounds: Vec<Vec<u8>>,
    /// Store keys in each bucket.
    fast: Vec<u64>,
    /// Of those, keys that also have a version in the capacity tier's tables.
    overlap: Vec<u64>,
}

impl Default for Buckets {
    /// One bucket, all keys: no capacity-tier tables yet.
    fn default() -> Buckets {
        Buckets::new(Vec::new())
    }
}

impl Buckets {
    /// Empty counters over the buckets that `bounds` (strictly increasing) delimit.
    pub fn new(bounds: Vec<Vec<u8>>) -> Buckets {
        let n = bounds.len() + 1;
        Buckets {
            bounds,
            fast: vec![0; n],
            overlap: vec![0; n],
        }
    }

    /// Counters over `bounds` for the store's keys `keys` (key, has a capacity-tier version).
    pub fn count<'a>(
        bounds: Vec<Vec<u8>>,
        keys: impl IntoIterator<Item = (&'a [u8], bool)>,
    ) -> Buckets {
        let mut b = Buckets::new(bounds);
        for (key, overlaps) in keys {
            b.add(key, overlaps);
        }
        b
    }

    /// Whether these counters are over exactly `bounds`.
    pub fn has_bounds(&self, bounds: &[Vec<u8>]) -> bool {
        self.bounds == bounds
    }

    /// The bucket of `key`.
    pub fn bucket_of(&self, key: &[u8]) -> usize {
        self.bounds.partition_point(|b| b.as_slice() < key)
    }

    /// A key entered the store.
    pub fn add(&mut self, key: &[u8], overlaps: bool) {
        let i = self.bucket_of(key);
        self.fast[i] += 1;
        self.overlap[i] += u64::from(overlaps);
    }

    /// A key left the store.
    pub fn remove(&mut self, key: &[u8], overlaps: bool) {
        let i = self.bucket_of(key);
        self.fast[i] = self.fast[i].saturating_sub(1);
        if overlaps {
            self.overlap[i] = self.overlap[i].saturating_sub(1);
        }
    }

    /// Bucket `i`'s `(store keys, of which also in the capacity tier)`.
    pub fn counts(&self, i: usize) -> (u64, u64) {
        (self.fast[i], self.overlap[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::msc::{score, RangeStats};

    fn bounds(keys: &[&str]) -> Vec<Vec<u8>> {
        keys.iter().map(|k| k.as_bytes().to_vec()).collect()
    }

    #[test]
    fn keys_fall_in_the_bucket_their_table_bounds_give() {
        let b = Buckets::new(bounds(&["f", "m"]));
        assert_eq!(b.counts(2), (0, 0), "three buckets for two bounds");
        assert_eq!(b.bucket_of(b"a"), 0);
        assert_eq!(b.bucket_of(b"f"), 0, "a bound is inclusive");
        assert_eq!(b.bucket_of(b"g"), 1);
        assert_eq!(b.bucket_of(b"m"), 1);
        assert_eq!(b.bucket_of(b"z"), 2, "the last bucket is unbounded");
        let mut one = Buckets::default();
        one.add(b"any", true);
        assert_eq!(one.counts(0), (1, 1));
    }

    #[test]
    fn counters_follow_keys_entering_and_leaving() {
        let keys: [(&[u8], bool); 5] = [
            (b"a", true),
            (b"c", false),
            (b"h", true),
            (b"k", true),
            (b"x", false),
        ];
        let mut b = Buckets::count(bounds(&["f", "m"]), keys);
        assert_eq!(
            (b.counts(0), b.counts(1), b.counts(2)),
            ((2, 1), (2, 2), (1, 0))
        );
        b.remove(b"h", true);
        b.add(b"z", true);
        assert_eq!((b.counts(1), b.counts(2)), ((1, 1), (2, 1)));
        // Recounting over the same bounds gives the same counters.
        let again = Buckets::count(
            bounds(&["f", "m"]),
            [
                (&b"a"[..], true),
                (b"c", false),
                (b"k", true),
                (b"x", false),
                (b"z", true),
            ],
        );
        assert_eq!(again, b);
        assert!(b.has_bounds(&bounds(&["f", "m"])));
        assert!(!b.has_bounds(&bounds(&["f"])));
    }

    #[test]
    fn overlap_counted_per_bucket_lowers_the_cost_of_merging_there() {
        // Two buckets alike but for how many store keys the capacity tier also holds: the
        // one whose keys replace entries there (o = 1) costs less to merge into.
        let keys = (0..10u8)
            .map(|i| (vec![b'a', i], true))
            .chain((0..10u8).map(|i| (vec![b'p', i], false)))
            .collect::<Vec<_>>();
        let b = Buckets::count(bounds(&["m"]), keys.iter().map(|(k, o)| (k.as_slice(), *o)));
        let stats = |i: usize| {
            let (fast, overlap) = b.counts(i);
            RangeStats {
                fast_objects: fast,
                flash_objects: 100,
                popular: 0,
                overlap,
                coldness: fast as f64,
            }
        };
        assert_eq!((stats(0).overlap, stats(1).overlap), (10, 0));
        // F = 10: cost 10 * (2 - 1) + 1 = 11 against 10 * 2 + 1 = 21.
        assert!((score(&stats(0)) - 10.0 / 11.0).abs() < 1e-9);
        assert!((score(&stats(1)) - 10.0 / 21.0).abs() < 1e-9);
    }
}
