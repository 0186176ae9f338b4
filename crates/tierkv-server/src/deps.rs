//! Per-connection request ordering: which earlier requests of the same connection a new one
//! must wait for before it is submitted (see [`crate::conn`] for the rule).
//!
//! Keys are tracked by a 64-bit digest, not by a copy of the key: a pipelined SET then costs
//! one hash and no allocation here. Two keys with the same digest are treated as one key, which
//! only makes a request wait when it need not; it never lets one run early. The digest is
//! keyed per connection with a random seed, so a client cannot choose keys that collide on
//! purpose (and a collision would only slow that client's own requests).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};

/// A key as the ordering rule sees it.
pub type KeyDigest = u64;

/// Keys of requests whose position is at most the completed mark are forgotten once the table
/// has grown past this many entries (and past twice what survived the last pruning).
const PRUNE_FLOOR: usize = 1024;

/// The last request of this connection that read or wrote a key (positions start at 1).
#[derive(Debug, Clone, Copy, Default)]
struct KeyUse {
    write: u64,
    access: u64,
}

/// What earlier requests each new one must wait for.
#[derive(Debug, Default)]
pub struct Deps {
    seed: RandomState,
    keys: HashMap<KeyDigest, KeyUse, BuildHasherDefault<DigestHasher>>,
    /// Every request after this one waits for it (FLUSHALL).
    barrier: u64,
    prune_at: usize,
}

impl Deps {
    /// The digest of `key` for this connection.
    pub fn digest(&self, key: &[u8]) -> KeyDigest {
        self.seed.hash_one(key)
    }

    /// The latest earlier request a read of `key` waits for (0: none).
    pub fn read_dep(&self, key: KeyDigest) -> u64 {
        self.keys.get(&key).map_or(0, |u| u.write).max(self.barrier)
    }

    /// The latest earlier request a write of `key` waits for (0: none).
    pub fn write_dep(&self, key: KeyDigest) -> u64 {
        self.keys
            .get(&key)
            .map_or(0, |u| u.access)
            .max(self.barrier)
    }

    /// Request `idx` reads `key`.
    pub fn note_read(&mut self, key: KeyDigest, idx: u64) {
        self.keys.entry(key).or_default().access = idx;
    }

    /// Request `idx` writes `key`.
    pub fn note_write(&mut self, key: KeyDigest, idx: u64) {
        let u = self.keys.entry(key).or_default();
        u.access = idx;
        u.write = idx;
    }

    /// Every request after `idx` waits for it.
    pub fn set_barrier(&mut self, idx: u64) {
        self.barrier = idx;
    }

    /// Forgets keys whose last request completed (`done` is the completed mark), once the
    /// table has grown: it then holds at most the keys of requests in flight plus the growth
    /// since the last pruning.
    pub fn prune(&mut self, done: u64) {
        if self.keys.len() <= self.prune_at.max(PRUNE_FLOOR) {
            return;
        }
        self.keys.retain(|_, u| u.access > done);
        self.prune_at = 2 * self.keys.len();
    }

    /// Keys tracked now.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when no key is tracked.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// The table's hasher: its keys are digests already, so it passes them through.
#[derive(Debug, Default)]
pub struct DigestHasher(u64);

impl Hasher for DigestHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // NB: only digests (`write_u64`) are hashed; this keeps any other use well defined.
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conflicting_requests_only_are_ordered() {
        let mut d = Deps::default();
        let (a, b, c) = (d.digest(b"a"), d.digest(b"b"), d.digest(b"c"));
        d.note_write(a, 1);
        d.note_read(b, 2);
        assert_eq!(d.read_dep(a), 1, "a read waits for the write");
        assert_eq!(d.read_dep(b), 0, "reads do not wait for reads");
        assert_eq!(d.write_dep(b), 2, "a write waits for an earlier read");
        assert_eq!(d.write_dep(c), 0);
        d.set_barrier(5);
        assert_eq!(d.read_dep(c), 5);
        assert_eq!(d.write_dep(a), 5);
    }

    #[test]
    fn later_uses_replace_earlier_ones() {
        let mut d = Deps::default();
        let k = d.digest(b"k");
        d.note_write(k, 3);
        d.note_read(k, 7);
        assert_eq!(d.read_dep(k), 3, "a read waits for the last write only");
        assert_eq!(d.write_dep(k), 7, "a write waits for the last access");
    }

    #[test]
    fn digests_are_stable_per_connection_and_distinguish_keys() {
        let d = Deps::default();
        assert_eq!(d.digest(b"key:1"), d.digest(b"key:1"));
        assert_ne!(d.digest(b"key:1"), d.digest(b"key:2"));
    }

    #[test]
    fn prune_forgets_completed_keys() {
        let mut d = Deps::default();
        for i in 0..2000u64 {
            let k = d.digest(&i.to_be_bytes());
            d.note_write(k, i + 1);
        }
        d.prune(1990);
        assert_eq!(d.len(), 10);
        let kept = d.digest(&1999u64.to_be_bytes());
        assert_eq!(d.read_dep(kept), 2000);
        let gone = d.digest(&5u64.to_be_bytes());
        assert_eq!(d.read_dep(gone), 0);
    }

    #[test]
    fn small_tables_are_not_pruned() {
        let mut d = Deps::default();
        for i in 0..10u64 {
            let k = d.digest(&i.to_be_bytes());
            d.note_write(k, i + 1);
        }
        d.prune(100);
        assert_eq!(d.len(), 10, "pruning waits until the table has grown");
    }
}
