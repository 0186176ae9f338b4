//! The memtable: a concurrent sorted map of internal keys in DRAM with a byte budget.
//!
//! Writers insert concurrently (the skip list is lock-free and the byte count an atomic add):
//! a group-commit leader alone, or the helpers of a group inserted in parallel, or the
//! parallel WAL's loggers, while any number of readers look up and iterate. Each writer
//! inserts at sequence numbers nobody else uses, so inserts never collide. An entry is never
//! removed or changed once inserted, so a reader sees a consistent set of entries at or below
//! its read sequence. The memtable remembers which WAL file holds its writes, so that file can
//! be dropped once the memtable is flushed.

mod arena;
mod filter;
mod skiplist;

pub use filter::KeyHash;

use crate::batch::{BatchOp, WriteBatch};
use crate::error::Result;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::options::MemtableOptions;
use filter::KeyFilter;
use skiplist::{Entry, KeyOrder, SkipList};
use smallvec::SmallVec;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// The skip list's order: internal keys by [`key::compare_internal`].
struct InternalOrder;

impl KeyOrder for InternalOrder {
    fn compare(a: &[u8], b: &[u8]) -> std::cmp::Ordering {
        key::compare_internal(a, b)
    }
}

/// Per-entry bookkeeping charged to the budget on top of key and value bytes.
const ENTRY_OVERHEAD: usize = 64;

/// What a memtable lookup found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The newest visible entry is a value.
    Value(Vec<u8>),
    /// The newest visible entry is a tombstone.
    Deleted,
    /// The memtable holds no visible entry for the key.
    Absent,
}

/// A sorted in-memory table.
pub struct MemTable {
    list: SkipList<InternalOrder>,
    /// The user keys inserted, when the options ask for it (`memtable.key_filter`).
    filter: Option<KeyFilter>,
    bytes: AtomicUsize,
    /// Number of the WAL file that logs this memtable's writes.
    wal_number: u64,
    /// Writes admitted to this memtable and not yet visible (parallel WAL); it is flushed only
    /// at zero.
    pending_writes: AtomicUsize,
    /// Set when it stops being the active memtable.
    sealed: AtomicBool,
}

impl MemTable {
    /// An empty memtable whose writes go to WAL file `wal_number`, with no key filter.
    #[cfg(test)]
    pub fn new(wal_number: u64) -> Self {
        Self::with_key_filter(wal_number, 0)
    }

    /// An empty memtable whose writes go to WAL file `wal_number`, with the key filter `opts`
    /// ask for.
    pub fn for_options(wal_number: u64, opts: &MemtableOptions) -> Self {
        Self::with_key_filter(wal_number, opts.key_filter_bytes())
    }

    /// An empty memtable whose writes go to WAL file `wal_number`, with a key filter of
    /// `filter_bytes` (none at 0).
    pub fn with_key_filter(wal_number: u64, filter_bytes: usize) -> Self {
        MemTable {
            list: SkipList::new(),
            filter: (filter_bytes > 0).then(|| KeyFilter::new(filter_bytes)),
            bytes: AtomicUsize::new(0),
            wal_number,
            pending_writes: AtomicUsize::new(0),
            sealed: AtomicBool::new(false),
        }
    }

    /// Inserts one entry.
    pub fn add(&self, seq: SeqNo, kind: ValueKind, user_key: &[u8], value: &[u8]) {
        // NB: before the entry is in the list, so a reader that can see it sees its bits.
        if let Some(f) = &self.filter {
            f.insert(KeyHash::of(user_key));
        }
        let trailer = key::pack_trailer(seq, kind).to_le_bytes();
        self.list.insert(&[user_key, &trailer], value);
        let charge = user_key.len() + trailer.len() + value.len() + ENTRY_OVERHEAD;
        self.bytes.fetch_add(charge, Ordering::Relaxed);
    }

    /// Inserts every operation of `batch`, numbered from `first_seq`; returns the next unused
    /// sequence number.
    pub fn insert_batch(&self, first_seq: SeqNo, batch: &WriteBatch) -> SeqNo {
        let mut seq = first_seq;
        for op in batch.iter().flatten() {
            match op {
                BatchOp::Put(k, v) => self.add(seq, ValueKind::Value, k, v),
                BatchOp::Delete(k) => self.add(seq, ValueKind::Deletion, k, &[]),
            }
            seq += 1;
        }
        seq
    }

    /// The newest entry for `user_key` with a sequence `<= seq`.
    #[cfg(test)]
    pub fn get(&self, user_key: &[u8], seq: SeqNo) -> Lookup {
        self.get_hashed(user_key, KeyHash::of(user_key), seq)
    }

    /// The newest entry for `user_key` with a sequence `<= seq`; `hash` is the key's, computed
    /// by the caller once for every memtable a read consults.
    pub fn get_hashed(&self, user_key: &[u8], hash: KeyHash, seq: SeqNo) -> Lookup {
        if !self.may_hold(hash) {
            return Lookup::Absent;
        }
        let lookup = lookup_key(user_key, seq);
        let Some(entry) = self.list.seek(&lookup) else {
            return Lookup::Absent;
        };
        match key::parse_internal_key(entry.key()) {
            Some(p) if p.user_key == user_key => match p.kind {
                ValueKind::Value => Lookup::Value(entry.value().to_vec()),
                ValueKind::Deletion => Lookup::Deleted,
            },
            _ => Lookup::Absent,
        }
    }

    /// The sequence number of the newest entry for `user_key`, visible or not.
    pub fn latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        if !self.may_hold(KeyHash::of(user_key)) {
            return None;
        }
        let lookup = lookup_key(user_key, key::MAX_SEQNO);
        let entry = self.list.seek(&lookup)?;
        let p = key::parse_internal_key(entry.key())?;
        (p.user_key == user_key).then_some(p.seq)
    }

    /// False only if no entry for the key of `hash` was inserted.
    fn may_hold(&self, hash: KeyHash) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(hash))
    }

    /// Counts a write admitted to this memtable but not yet applied and visible.
    pub fn begin_write(&self) {
        self.pending_writes.fetch_add(1, Ordering::AcqRel);
    }

    /// Ends a write `begin_write` counted; true if it was the last pending write of a sealed
    /// memtable (which may now be flushed).
    pub fn end_write(&self) -> bool {
        self.pending_writes.fetch_sub(1, Ordering::AcqRel) == 1
            && self.sealed.load(Ordering::Acquire)
    }

    /// True while admitted writes are not all applied and visible.
    pub fn has_pending_writes(&self) -> bool {
        self.pending_writes.load(Ordering::Acquire) > 0
    }

    /// Marks the memtable immutable (no new writes are admitted to it).
    pub fn seal(&self) {
        self.sealed.store(true, Ordering::Release);
    }

    /// Approximate bytes of the entries inserted (what a flush writes, about).
    pub fn approximate_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Approximate memory held: the entries' charge and the key filter, allocated whole when
    /// the memtable is made. What `write_buffer_size` bounds.
    pub fn memory_bytes(&self) -> usize {
        self.approximate_bytes() + self.filter.as_ref().map_or(0, KeyFilter::bytes)
    }

    /// True if nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The WAL file holding this memtable's writes.
    pub fn wal_number(&self) -> u64 {
        self.wal_number
    }

    /// A cursor over all entries.
    pub fn iter(self: &Arc<Self>) -> MemTableIter {
        MemTableIter {
            current: None,
            table: Arc::clone(self),
        }
    }
}

/// The internal key that seeks to the newest entry of `user_key` at or below `seq`, built on
/// the stack for the usual short keys (a point read makes no allocation for it).
fn lookup_key(user_key: &[u8], seq: SeqNo) -> SmallVec<[u8; 64]> {
    let mut k = SmallVec::with_capacity(user_key.len() + key::TRAILER_LEN);
    k.extend_from_slice(user_key);
    k.extend_from_slice(&key::pack_trailer(seq, key::LOOKUP_KIND).to_le_bytes());
    k
}

/// A cursor over a memtable. It holds the memtable alive and points at one of its entries;
/// entries are never removed, so the cursor stays valid while inserts continue. Stepping
/// forward follows a link; stepping back searches for the entry before the current key.
pub struct MemTableIter {
    /// An entry of `table`'s list, its borrow erased: `table` keeps the list alive.
    current: Option<Entry<'static>>,
    table: Arc<MemTable>,
}

impl MemTableIter {
    /// Moves to the entry `find` picks in the list (none: invalid).
    fn move_to(&mut self, find: impl FnOnce(&SkipList<InternalOrder>) -> Option<Entry<'_>>) {
        let found = find(&self.table.list);
        // SAFETY: the entry belongs to `self.table`'s list, which this cursor keeps alive,
        // and what `key` and `value` return borrows the cursor.
        self.current = found.map(|e| unsafe { e.detach() });
    }

    /// The current entry. Detached, so a step may read it while moving the cursor; what
    /// `key` and `value` return from it borrows the cursor.
    fn current(&self) -> Entry<'static> {
        self.current.expect("memtable cursor used while invalid")
    }
}

impl InternalIterator for MemTableIter {
    fn valid(&self) -> bool {
        self.current.is_some()
    }

    fn seek_to_first(&mut self) {
        self.move_to(|list| list.first());
    }

    fn seek_to_last(&mut self) {
        self.move_to(|list| list.last());
    }

    fn seek(&mut self, target: &[u8]) {
        self.move_to(|list| list.seek(target));
    }

    fn next(&mut self) {
        self.current = self.current().next();
    }

    fn prev(&mut self) {
        let key = self.current().key();
        self.move_to(|list| list.seek_before(key));
    }

    fn key(&self) -> &[u8] {
        self.current().key()
    }

    fn value(&self) -> &[u8] {
        self.current().value()
    }

    fn status(&self) -> Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn get_respects_sequence_and_tombstones() {
        let m = MemTable::new(1);
        m.add(1, ValueKind::Value, b"k", b"v1");
        m.add(3, ValueKind::Deletion, b"k", b"");
        m.add(5, ValueKind::Value, b"k", b"v5");
        assert_eq!(m.get(b"k", 0), Lookup::Absent);
        assert_eq!(m.get(b"k", 2), Lookup::Value(b"v1".to_vec()));
        assert_eq!(m.get(b"k", 4), Lookup::Deleted);
        assert_eq!(m.get(b"k", 9), Lookup::Value(b"v5".to_vec()));
        assert_eq!(m.get(b"j", 9), Lookup::Absent);
        assert_eq!(m.get(b"ka", 9), Lookup::Absent);
    }

    #[test]
    fn the_memory_a_memtable_holds_counts_its_key_filter_from_the_start() {
        let opts = MemtableOptions {
            write_buffer_size: 64 << 10,
            ..MemtableOptions::default()
        };
        let filtered = MemTable::for_options(1, &opts);
        let plain = MemTable::for_options(
            1,
            &MemtableOptions {
                key_filter: false,
                ..opts.clone()
            },
        );
        assert_eq!(filtered.memory_bytes(), 1 << 10);
        assert_eq!(plain.memory_bytes(), 0);
        for m in [&filtered, &plain] {
            m.add(1, ValueKind::Value, b"k", b"v");
        }
        assert_eq!(filtered.approximate_bytes(), plain.approximate_bytes());
        assert_eq!(
            filtered.memory_bytes(),
            plain.memory_bytes() + opts.key_filter_bytes()
        );
    }

    #[test]
    fn the_key_filter_changes_no_answer() {
        // NB: smaller under Miri, which runs the memtable's tests (.ci/run).
        let (writes, keys) = if cfg!(miri) { (40, 30) } else { (200u64, 150) };
        let plain = MemTable::new(1);
        let filtered = MemTable::with_key_filter(1, 256);
        for m in [&plain, &filtered] {
            for i in 0..writes {
                let kind = if i % 7 == 0 {
                    ValueKind::Deletion
                } else {
                    ValueKind::Value
                };
                m.add(
                    i + 1,
                    kind,
                    format!("k{}", i % keys).as_bytes(),
                    &i.to_le_bytes(),
                );
            }
        }
        for i in 0..2 * keys {
            let key = format!("k{i}");
            for seq in [0, 50, 120, 500] {
                assert_eq!(
                    plain.get(key.as_bytes(), seq),
                    filtered.get(key.as_bytes(), seq),
                    "{key} at {seq}"
                );
            }
            assert_eq!(
                plain.latest_seq(key.as_bytes()),
                filtered.latest_seq(key.as_bytes())
            );
        }
    }

    #[test]
    fn a_published_write_is_found_through_the_filter_by_a_concurrent_reader() {
        use std::sync::atomic::AtomicU64;
        let m = Arc::new(MemTable::with_key_filter(1, 1 << 12));
        let published = Arc::new(AtomicU64::new(0));
        let writes: u64 = if cfg!(miri) { 40 } else { 20_000 };
        let writer = {
            let (m, published) = (Arc::clone(&m), Arc::clone(&published));
            std::thread::spawn(move || {
                for seq in 1..=writes {
                    m.add(seq, ValueKind::Value, &seq.to_be_bytes(), b"v");
                    // As the write path does: visible once its sequence is published.
                    published.store(seq, Ordering::Release);
                }
            })
        };
        let mut checked = 0;
        while checked < writes {
            let seq = published.load(Ordering::Acquire);
            for s in (checked + 1)..=seq {
                let found = m.get(&s.to_be_bytes(), seq);
                assert_eq!(found, Lookup::Value(b"v".to_vec()), "write {s} at {seq}");
            }
            checked = checked.max(seq);
        }
        writer.join().unwrap();
    }

    #[test]
    fn concurrent_inserts_keep_every_entry_and_count_every_byte() {
        let m = Arc::new(MemTable::new(1));
        let threads: Vec<_> = (0..4u64)
            .map(|t| {
                let m = Arc::clone(&m);
                std::thread::spawn(move || {
                    for i in 0..500u64 {
                        m.add(
                            1 + t * 500 + i,
                            ValueKind::Value,
                            format!("k{i}").as_bytes(),
                            b"v",
                        );
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        let one_entry = key::internal_key(b"k0", 1, ValueKind::Value).len() + 1 + ENTRY_OVERHEAD;
        let key_digits: usize = (0..500u64).map(|i| format!("{i}").len() - 1).sum();
        assert_eq!(m.approximate_bytes(), 4 * (500 * one_entry + key_digits));
        let mut it = m.iter();
        it.seek_to_first();
        let mut count = 0;
        while it.valid() {
            count += 1;
            it.next();
        }
        assert_eq!(count, 2000);
        assert_eq!(m.latest_seq(b"k7"), Some(1 + 3 * 500 + 7));
    }

    #[test]
    fn iterates_both_ways_in_internal_order() {
        let m = Arc::new(MemTable::new(1));
        m.add(1, ValueKind::Value, b"b", b"1");
        m.add(2, ValueKind::Value, b"a", b"2");
        m.add(3, ValueKind::Value, b"b", b"3");
        let mut it = m.iter();
        it.seek_to_first();
        let mut fwd = Vec::new();
        while it.valid() {
            fwd.push(it.value().to_vec());
            it.next();
        }
        assert_eq!(fwd, [b"2".to_vec(), b"3".to_vec(), b"1".to_vec()]);
        it.seek_to_last();
        let mut back = Vec::new();
        while it.valid() {
            back.push(it.value().to_vec());
            it.prev();
        }
        fwd.reverse();
        assert_eq!(back, fwd);
    }
}
