//! Iterators over the hot store: lazy, one chunk of keys at a time, so a short scan reads a
//! few slots whatever the store holds.
//!
//! An iterator reads the store at its sequence number while flushes, promotions and demotions
//! go on. Three rules keep what it has not read yet where it can find it:
//! - It holds a snapshot at its sequence (the database takes one for it, `db::hot`), so a
//!   version it sees is not freed when a flush supersedes it (`gc_versions` keeps it).
//! - It registers with the store at the demotion epoch ([`HotStore::reader`]) before its LSM
//!   version is taken, and no demotion finishes in between (else it registers again,
//!   [`Reader::is_current`]). A demotion that finishes later drops objects whose table that
//!   version lacks; while an older reader lives, the demotion's objects stay in memory
//!   ([`Readers`]) and each chunk merges those in its key range. Whatever in the view
//!   shadows such an object (a newer version in a memtable or a table) stays in the view.
//! - A chunk's values are read under the index's read lock, so none of its slots is freed and
//!   reused in between (a slot is freed under the write lock).
//!
//! The same version can reach the merged stream twice (from a chunk and a demotion's objects,
//! or from the store and a table holding a promoted copy): the same internal key and value,
//! which the database iterator reads as one.

use super::{borrowed, version_at, Entries, HotStore, HotVersion, KeyRange, SlotKind, Versions};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::snapshot::Snapshot;
use std::cmp::Ordering as CmpOrdering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Keys of the first chunk after a seek: most scans are short.
const FIRST_CHUNK: usize = 32;
/// Chunks double while an iterator keeps moving in one direction, up to this many keys.
const MAX_CHUNK: usize = 1024;
/// A fetch stops after this many keys per wanted entry (keys with no version visible at the
/// iterator's sequence, or only an `InLsm` marker, yield none), so the lock is held briefly.
const SCAN_FACTOR: usize = 4;

/// The store's live iterators, and the objects of demotions they may still need.
#[derive(Default)]
pub(super) struct Readers {
    /// Live iterators by the demotion epoch they registered at.
    live: BTreeMap<u64, usize>,
    /// Objects of demotions that finished while an older iterator lived: the epoch the
    /// demotion ended (its table is in the versions of iterators registered at or after it)
    /// and its table entries, sorted by internal key.
    moved: Vec<(u64, Arc<Entries>)>,
}

impl Readers {
    fn register(&mut self, epoch: u64) {
        *self.live.entry(epoch).or_insert(0) += 1;
    }

    fn release(&mut self, epoch: u64) {
        if let Some(n) = self.live.get_mut(&epoch) {
            *n -= 1;
            if *n == 0 {
                self.live.remove(&epoch);
            }
        }
        match self.live.keys().next() {
            None => self.moved.clear(),
            Some(&oldest) => self.moved.retain(|(e, _)| *e > oldest),
        }
    }

    /// Keeps the objects of a demotion that ended at `epoch` if a live reader registered
    /// before it.
    pub(super) fn demoted(&mut self, epoch: u64, entries: Entries) {
        if self
            .live
            .keys()
            .next()
            .is_some_and(|&oldest| oldest < epoch)
        {
            self.moved.push((epoch, Arc::new(entries)));
        }
    }

    /// The objects of demotions that ended after `epoch`.
    fn moved_since(&self, epoch: u64) -> Vec<Arc<Entries>> {
        self.moved
            .iter()
            .filter(|(e, _)| *e > epoch)
            .map(|(_, entries)| Arc::clone(entries))
            .collect()
    }
}

/// A registration with the store: taken before the iterator's LSM version, released on drop.
pub(crate) struct Reader {
    store: Arc<HotStore>,
    epoch: u64,
}

impl Reader {
    /// Whether no demotion has finished since the registration. The iterator's view must be
    /// taken while this holds: a demotion that finished before the view was taken hands the
    /// reader its objects (`Readers::moved`), which the view need not shadow any more. A
    /// compaction may since have merged a moved object with a newer delete of its key at the
    /// bottom level and dropped both, and the moved copy would then come back.
    pub(crate) fn is_current(&self) -> bool {
        self.store.epoch() == self.epoch
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.store.readers.lock().release(self.epoch);
    }
}

/// What one fetch read.
struct Chunk {
    /// The visible versions found, sorted by internal key.
    entries: Entries,
    /// The part of the range read: all of it, or up to the last key scanned when the fetch
    /// stopped early (`stopped`).
    covered: KeyRange,
    stopped: bool,
}

impl HotStore {
    /// Registers a reader at the current demotion epoch. Take it before the LSM version the
    /// iterator will merge with.
    pub(crate) fn reader(self: &Arc<Self>) -> Reader {
        let mut readers = self.readers.lock();
        let epoch = self.epoch.load(Ordering::Acquire);
        readers.register(epoch);
        Reader {
            store: Arc::clone(self),
            epoch,
        }
    }

    /// Reads up to `limit` keys' newest versions at or below `seq` in `range` (from its high
    /// end when `reverse`), with the objects of demotions since `epoch` in the part of
    /// `range` covered.
    fn fetch(
        &self,
        range: &KeyRange,
        reverse: bool,
        limit: usize,
        seq: SeqNo,
        epoch: u64,
    ) -> Result<Chunk> {
        let mut entries = Vec::new();
        let mut stopped_at = None;
        if is_empty(range) {
            return Ok(Chunk {
                entries,
                covered: range.clone(),
                stopped: false,
            });
        }
        let bounds = (borrowed(&range.0), borrowed(&range.1));
        {
            let index = self.index.read();
            let keys = index.map.range::<[u8], _>(bounds);
            let keys: Box<dyn Iterator<Item = (&Vec<u8>, &Versions)>> = if reverse {
                Box::new(keys.rev())
            } else {
                Box::new(keys)
            };
            let mut scanned = 0;
            let mut visible: Vec<(Vec<u8>, HotVersion)> = Vec::new();
            for (k, vs) in keys {
                scanned += 1;
                if let Some(v) = slot_version_at(vs, seq) {
                    visible.push((k.clone(), v));
                }
                if visible.len() >= limit || scanned >= limit * SCAN_FACTOR {
                    stopped_at = Some(k.clone());
                    break;
                }
            }
            // NB: still under the index lock, so no slot of the chunk is freed and reused.
            let values = self.read_values(&visible)?;
            let slot_reads = visible.iter().filter(|(_, v)| v.kind == SlotKind::Value);
            self.counters
                .iterator_slot_reads
                .fetch_add(slot_reads.count() as u64, Ordering::Relaxed);
            for ((user_key, v), value) in visible.into_iter().zip(values) {
                let kind = match v.kind {
                    SlotKind::Value => ValueKind::Value,
                    _ => ValueKind::Deletion,
                };
                entries.push((key::internal_key(&user_key, v.seq, kind), value));
            }
        }
        let stopped = stopped_at.is_some();
        let covered = match (stopped_at, reverse) {
            (None, _) => range.clone(),
            (Some(k), false) => (range.0.clone(), Bound::Included(k)),
            (Some(k), true) => (Bound::Included(k), range.1.clone()),
        };
        let moved = self.readers.lock().moved_since(epoch);
        for objects in moved {
            entries.extend(moved_in(&objects, &covered, seq));
        }
        entries.sort_by(|a, b| key::compare_internal(&a.0, &b.0));
        entries.dedup_by(|a, b| a.0 == b.0);
        Ok(Chunk {
            entries,
            covered,
            stopped,
        })
    }
}

/// The newest of `versions` at or below `seq` if it is in a slot (a value or a delete; an
/// `InLsm` marker's version is in a table or memtable of the iterator's view).
fn slot_version_at(versions: &[HotVersion], seq: SeqNo) -> Option<HotVersion> {
    version_at(versions, seq).filter(|v| v.kind != SlotKind::InLsm)
}

/// The entries of a demotion's objects with user keys in `range`, at or below `seq`.
fn moved_in<'a>(
    entries: &'a Entries,
    range: &'a KeyRange,
    seq: SeqNo,
) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + 'a {
    let first = entries.partition_point(|(ik, _)| below(key::user_key(ik), &range.0));
    entries[first..]
        .iter()
        .take_while(|(ik, _)| !above(key::user_key(ik), &range.1))
        .filter(move |(ik, _)| key::parse_internal_key(ik).is_some_and(|p| p.seq <= seq))
        .cloned()
}

/// Whether `k` lies below a range's low end.
fn below(k: &[u8], low: &Bound<Vec<u8>>) -> bool {
    match low {
        Bound::Included(l) => k < l.as_slice(),
        Bound::Excluded(l) => k <= l.as_slice(),
        Bound::Unbounded => false,
    }
}

/// Whether `k` lies above a range's high end.
fn above(k: &[u8], high: &Bound<Vec<u8>>) -> bool {
    match high {
        Bound::Included(h) => k > h.as_slice(),
        Bound::Excluded(h) => k >= h.as_slice(),
        Bound::Unbounded => false,
    }
}

/// Whether `range` holds no key (a `BTreeMap` range of it would panic).
fn is_empty(range: &KeyRange) -> bool {
    use Bound::*;
    match (&range.0, &range.1) {
        (Included(a), Included(b)) => a > b,
        (Included(a) | Excluded(a), Included(b) | Excluded(b)) => a >= b,
        _ => false,
    }
}

/// The keys past a chunk's end, which ends at `b`.
fn after(b: &Bound<Vec<u8>>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Excluded(k.clone()),
        Bound::Excluded(k) => Bound::Included(k.clone()),
        Bound::Unbounded => unreachable!("a chunk ending at an open end has nothing past it"),
    }
}

/// An iterator over the hot store's versions visible at one sequence, within user-key
/// bounds, read a chunk at a time (see the module's notes).
pub(crate) struct HotIter {
    reader: Reader,
    /// Keeps the versions the iterator sees from being freed.
    _snapshot: Snapshot,
    seq: SeqNo,
    lower: Option<Vec<u8>>,
    upper: Option<Vec<u8>>,
    /// The current chunk, and the position in it (`entries.len()`: not valid).
    entries: Entries,
    pos: usize,
    /// The user keys the chunk covers, and whether they reach the bounds at either end.
    covered: KeyRange,
    reaches_lower: bool,
    reaches_upper: bool,
    /// Keys the next fetch takes.
    chunk_keys: usize,
    error: Option<Error>,
}

impl HotIter {
    /// An iterator for `reader` at `snapshot`'s sequence, within `[lower, upper)`.
    pub(crate) fn new(
        reader: Reader,
        snapshot: Snapshot,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> HotIter {
        HotIter {
            reader,
            seq: snapshot.sequence(),
            _snapshot: snapshot,
            lower: lower.map(<[u8]>::to_vec),
            upper: upper.map(<[u8]>::to_vec),
            entries: Vec::new(),
            pos: 0,
            covered: (Bound::Unbounded, Bound::Unbounded),
            reaches_lower: true,
            reaches_upper: true,
            chunk_keys: FIRST_CHUNK,
            error: None,
        }
    }

    fn lower_end(&self) -> Bound<Vec<u8>> {
        self.lower.clone().map_or(Bound::Unbounded, Bound::Included)
    }

    fn upper_end(&self) -> Bound<Vec<u8>> {
        self.upper.clone().map_or(Bound::Unbounded, Bound::Excluded)
    }

    /// Replaces the chunk with one read over `range`; `to_lower`/`to_upper` say whether the
    /// range runs to the iterator's bounds.
    fn load(&mut self, range: KeyRange, reverse: bool, to_lower: bool, to_upper: bool) {
        let r = &self.reader;
        let fetched = r
            .store
            .fetch(&range, reverse, self.chunk_keys, self.seq, r.epoch);
        self.chunk_keys = (self.chunk_keys * 2).min(MAX_CHUNK);
        let chunk = match fetched {
            Ok(chunk) => chunk,
            Err(e) => {
                self.error.get_or_insert(e);
                self.entries.clear();
                self.pos = 0;
                (self.reaches_lower, self.reaches_upper) = (true, true);
                return;
            }
        };
        // A fetch that stopped early falls short of the end it was moving towards.
        let (short_of_lower, short_of_upper) =
            (chunk.stopped && reverse, chunk.stopped && !reverse);
        self.covered = chunk.covered;
        self.reaches_lower = to_lower && !short_of_lower;
        self.reaches_upper = to_upper && !short_of_upper;
        self.entries = chunk.entries;
    }

    fn invalidate(&mut self) {
        self.pos = self.entries.len();
    }

    /// Loads chunks past the current one until one has an entry (at its first), or the
    /// upper end is reached.
    fn forward_to_next_chunk(&mut self) {
        while !self.reaches_upper {
            let range = (after(&self.covered.1), self.upper_end());
            self.load(range, false, false, true);
            self.pos = 0;
            if !self.entries.is_empty() {
                return;
            }
        }
        self.invalidate();
    }

    /// Loads chunks before the current one until one has an entry (at its last), or the
    /// lower end is reached.
    fn backward_to_previous_chunk(&mut self) {
        while !self.reaches_lower {
            let range = (self.lower_end(), after(&self.covered.0));
            self.load(range, true, true, false);
            if let Some(last) = self.entries.len().checked_sub(1) {
                self.pos = last;
                return;
            }
        }
        self.invalidate();
    }
}

impl InternalIterator for HotIter {
    fn valid(&self) -> bool {
        self.pos < self.entries.len()
    }

    fn seek_to_first(&mut self) {
        self.chunk_keys = FIRST_CHUNK;
        self.load((self.lower_end(), self.upper_end()), false, true, true);
        self.pos = 0;
        if self.entries.is_empty() {
            self.forward_to_next_chunk();
        }
    }

    fn seek_to_last(&mut self) {
        self.chunk_keys = FIRST_CHUNK;
        self.load((self.lower_end(), self.upper_end()), true, true, true);
        match self.entries.len().checked_sub(1) {
            Some(last) => self.pos = last,
            None => self.backward_to_previous_chunk(),
        }
    }

    fn seek(&mut self, target: &[u8]) {
        let user = key::user_key(target);
        let (start, to_lower) = match &self.lower {
            Some(l) if user <= l.as_slice() => (Bound::Included(l.clone()), true),
            _ => (Bound::Included(user.to_vec()), false),
        };
        self.chunk_keys = FIRST_CHUNK;
        self.load((start, self.upper_end()), false, to_lower, true);
        self.pos = self
            .entries
            .partition_point(|e| key::compare_internal(&e.0, target) == CmpOrdering::Less);
        if self.pos == self.entries.len() {
            self.forward_to_next_chunk();
        }
    }

    fn next(&mut self) {
        self.pos += 1;
        if self.pos >= self.entries.len() {
            self.forward_to_next_chunk();
        }
    }

    fn prev(&mut self) {
        match self.pos.checked_sub(1) {
            Some(p) => self.pos = p,
            None => self.backward_to_previous_chunk(),
        }
    }

    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }

    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn empty_ranges_are_recognised_before_a_map_could_panic_on_them() {
        use Bound::*;
        assert!(is_empty(&(Included(k("b")), Excluded(k("b")))));
        assert!(is_empty(&(Excluded(k("b")), Included(k("b")))));
        assert!(is_empty(&(Included(k("c")), Included(k("b")))));
        assert!(!is_empty(&(Included(k("b")), Included(k("b")))));
        assert!(!is_empty(&(Excluded(k("a")), Excluded(k("c")))));
        assert!(!is_empty(&(Unbounded, Excluded(k("a")))));
    }

    #[test]
    fn moved_objects_are_taken_in_the_covered_range_at_the_readers_sequence() {
        let entries: Entries = [("a", 5), ("b", 9), ("c", 3), ("d", 4)]
            .iter()
            .map(|&(u, s)| (key::internal_key(u.as_bytes(), s, ValueKind::Value), k(u)))
            .collect();
        let range = (Bound::Excluded(k("a")), Bound::Included(k("c")));
        let got: Vec<Vec<u8>> = moved_in(&entries, &range, 8).map(|(_, v)| v).collect();
        // "b" is too new for sequence 8; "a" and "d" lie outside the range.
        assert_eq!(got, vec![k("c")]);
    }

    #[test]
    fn demoted_objects_are_kept_only_while_an_older_reader_lives() {
        let mut readers = Readers::default();
        readers.demoted(1, Vec::new());
        assert!(readers.moved.is_empty(), "no reader: nothing kept");
        readers.register(1);
        readers.demoted(1, Vec::new());
        assert!(
            readers.moved.is_empty(),
            "the reader's version has the table"
        );
        readers.demoted(2, Vec::new());
        readers.register(2);
        readers.demoted(3, Vec::new());
        assert_eq!(readers.moved.len(), 2);
        assert_eq!(readers.moved_since(2).len(), 1);
        readers.release(1);
        assert_eq!(
            readers.moved.len(),
            1,
            "only the reader at 2 needs demotion 3"
        );
        readers.release(2);
        assert!(readers.moved.is_empty());
    }
}
