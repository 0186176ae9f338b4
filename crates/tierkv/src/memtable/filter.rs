//! The memtable's key filter: a bloom filter over the user keys inserted, so that a point
//! read of a key a memtable does not hold skips the skip list's search.
//!
//! Why: a read looks in the active memtable and every immutable one before the hot store and
//! the tables, and most reads of a read-heavy workload find nothing there; each miss still
//! walked a skip list of thousands of entries (dozens of cache misses and key comparisons).
//!
//! Blocked layout: a key sets [`PROBES`] bits of one 64-bit word, so a query reads one word
//! (one cache line) whatever the probe count. Writers set bits with a relaxed `fetch_or`
//! before the entry enters the skip list; a reader that can see the entry (through the
//! sequence number the write path publishes after the insert, with release and acquire
//! ordering) therefore sees the bits. The filter lives and dies with its memtable, so its
//! layout is no on-disk format.

use crate::sst::hash64;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits a key sets in its word.
const PROBES: u32 = 4;

/// A concurrent bloom filter of a fixed size.
pub(super) struct KeyFilter {
    words: Box<[AtomicU64]>,
}

/// A user key's filter hash; computed once per read for all the memtables it consults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyHash(u64);

impl KeyHash {
    /// The hash of `user_key`.
    pub fn of(user_key: &[u8]) -> Self {
        KeyHash(hash64(user_key))
    }
}

impl KeyFilter {
    /// A filter of about `bytes` bytes (at least one word).
    pub(super) fn new(bytes: usize) -> Self {
        let words = (bytes / 8).max(1);
        KeyFilter {
            words: (0..words).map(|_| AtomicU64::new(0)).collect(),
        }
    }

    /// Records `hash`'s key.
    pub(super) fn insert(&self, hash: KeyHash) {
        let (word, mask) = self.locate(hash);
        if self.words[word].load(Ordering::Relaxed) & mask != mask {
            self.words[word].fetch_or(mask, Ordering::Relaxed);
        }
    }

    /// False only if no key with `hash` was inserted.
    pub(super) fn may_contain(&self, hash: KeyHash) -> bool {
        let (word, mask) = self.locate(hash);
        self.words[word].load(Ordering::Relaxed) & mask == mask
    }

    /// The word of `hash` (its high half, mapped onto the words without a division) and the
    /// bits it sets there (6-bit slices of its low half).
    fn locate(&self, KeyHash(h): KeyHash) -> (usize, u64) {
        let word = (((h >> 32) * self.words.len() as u64) >> 32) as usize;
        let mask = (0..PROBES).fold(0u64, |m, i| m | 1 << ((h >> (6 * i)) & 63));
        (word, mask)
    }

    /// Bytes held.
    pub(super) fn bytes(&self) -> usize {
        self.words.len() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_inserted_key_may_be_contained() {
        let f = KeyFilter::new(4096);
        let keys = if cfg!(miri) { 300 } else { 3000u32 };
        for i in 0..keys {
            f.insert(KeyHash::of(&i.to_be_bytes()));
        }
        for i in 0..keys {
            assert!(f.may_contain(KeyHash::of(&i.to_be_bytes())), "key {i}");
        }
    }

    // NB: statistics, no unsafe code or concurrency: nothing for Miri to check, and slow there.
    #[test]
    #[cfg_attr(miri, ignore)]
    fn false_positives_stay_rare_at_the_sizing_the_memtable_uses() {
        // A memtable budget of 1 MiB of 100-byte values (about 180 bytes charged an entry)
        // gets a filter of 1/64 of it: about 22 bits a key.
        let keys = (1 << 20) / 180;
        let f = KeyFilter::new((1 << 20) / 64);
        assert_eq!(f.bytes(), 16384);
        for i in 0..keys as u64 {
            f.insert(KeyHash::of(format!("user{i:012}").as_bytes()));
        }
        let probes = 100_000u64;
        let hits = (0..probes)
            .filter(|i| f.may_contain(KeyHash::of(format!("other{i:012}").as_bytes())))
            .count() as u64;
        assert!(
            hits * 1000 < 3 * probes,
            "{hits} false positives in {probes}"
        );
        // At 9 bits a key (empty values, the smallest entries charged) it still filters most.
        let dense = KeyFilter::new(keys * 9 / 8);
        for i in 0..keys as u64 {
            dense.insert(KeyHash::of(format!("user{i:012}").as_bytes()));
        }
        let hits = (0..probes)
            .filter(|i| dense.may_contain(KeyHash::of(format!("other{i:012}").as_bytes())))
            .count() as u64;
        assert!(hits * 20 < probes, "{hits} false positives in {probes}");
    }

    #[test]
    fn a_one_word_filter_still_answers() {
        let f = KeyFilter::new(0);
        assert!(
            !f.may_contain(KeyHash::of(b"a")),
            "an empty filter holds nothing"
        );
        f.insert(KeyHash::of(b"a"));
        assert!(f.may_contain(KeyHash::of(b"a")));
    }
}
