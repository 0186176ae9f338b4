//! Parallel memtable insertion of a commit group (`wal.concurrent_memtable_writes`).
//!
//! Once the leader has logged a group, the group's batches are inserted into the active
//! memtable by every thread that can help instead of by the leader alone: the leader itself,
//! the writers waiting in the queue (which would otherwise sleep until the group is done) and,
//! for asynchronous writers, which have no thread of their own, pipeline workers. A helper
//! claims one whole batch at a time with a `fetch_add` on a shared index and inserts it at the
//! batch's own sequence numbers, so no batch is inserted twice and a helper that arrives late
//! finds nothing left and leaves at once.
//!
//! The leader claims batches too and then waits for the last claimed one to be in
//! ([`GroupInserts::finish`]); only then does it publish the group's last sequence. The next
//! leader starts only after that, so a reader never sees part of a group and groups become
//! visible in group order.
//!
//! Claiming instead of "each writer inserts its own batch" keeps a slow-to-wake writer from
//! holding the whole group back, and lets workers insert for asynchronous writers.

use crate::batch::WriteBatch;
use crate::key::SeqNo;
use crate::memtable::MemTable;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A group's batches, each with its first sequence number, being inserted into one memtable.
pub(super) struct GroupInserts {
    mem: Arc<MemTable>,
    batches: Vec<(SeqNo, WriteBatch)>,
    /// Index of the next batch nobody has claimed.
    next_unclaimed: AtomicUsize,
    /// Batches fully inserted.
    inserted: AtomicUsize,
    /// Set (under the lock) when the last batch is in; the leader waits on `all_in_cv`.
    all_in: Mutex<bool>,
    all_in_cv: Condvar,
}

impl GroupInserts {
    /// The inserts of `batches` (each with its first sequence number) into `mem`.
    pub fn new(mem: Arc<MemTable>, batches: Vec<(SeqNo, WriteBatch)>) -> Arc<GroupInserts> {
        Arc::new(GroupInserts {
            mem,
            batches,
            next_unclaimed: AtomicUsize::new(0),
            inserted: AtomicUsize::new(0),
            all_in: Mutex::new(false),
            all_in_cv: Condvar::new(),
        })
    }

    /// Batches of the group.
    pub fn batch_count(&self) -> usize {
        self.batches.len()
    }

    /// True while some batch is not claimed yet (a helper would find work).
    pub fn has_unclaimed(&self) -> bool {
        self.next_unclaimed.load(Ordering::Relaxed) < self.batches.len()
    }

    /// Claims and inserts batches until none is left unclaimed; returns how many this call
    /// inserted.
    pub fn help(&self) -> usize {
        let mut count = 0;
        loop {
            let index = self.next_unclaimed.fetch_add(1, Ordering::Relaxed);
            let Some((first_seq, batch)) = self.batches.get(index) else {
                return count;
            };
            self.mem.insert_batch(*first_seq, batch);
            count += 1;
            // NB: AcqRel, so the leader that sees the final count sees every insert before it.
            if self.inserted.fetch_add(1, Ordering::AcqRel) + 1 == self.batches.len() {
                *self.all_in.lock() = true;
                self.all_in_cv.notify_all();
            }
        }
    }

    /// Helps, then waits until every batch is inserted (also those other helpers claimed).
    pub fn finish(&self) {
        self.help();
        if self.all_inserted() {
            return;
        }
        let mut all_in = self.all_in.lock();
        while !*all_in {
            self.all_in_cv.wait(&mut all_in);
        }
    }

    /// True once every batch is in the memtable.
    fn all_inserted(&self) -> bool {
        self.inserted.load(Ordering::Acquire) == self.batches.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memtable::Lookup;

    fn batches(count: u64, ops: u64) -> Vec<(SeqNo, WriteBatch)> {
        (0..count)
            .map(|b| {
                let mut batch = WriteBatch::new();
                for op in 0..ops {
                    batch.put(format!("b{b}-k{op}").as_bytes(), b.to_le_bytes());
                }
                (1 + b * ops, batch)
            })
            .collect()
    }

    #[test]
    fn every_batch_is_inserted_once_at_its_own_sequences() {
        let mem = Arc::new(MemTable::new(1));
        let inserts = GroupInserts::new(Arc::clone(&mem), batches(40, 5));
        let helpers: Vec<_> = (0..3)
            .map(|_| {
                let inserts = Arc::clone(&inserts);
                std::thread::spawn(move || inserts.help())
            })
            .collect();
        inserts.finish();
        let by_helpers: usize = helpers.into_iter().map(|h| h.join().unwrap()).sum();
        assert!(!inserts.has_unclaimed());
        assert!(inserts.all_inserted());
        // finish returned only after all 40; the helpers did what the leader did not.
        assert!(by_helpers <= 40);
        for b in 0..40u64 {
            for op in 0..5u64 {
                let key = format!("b{b}-k{op}");
                let seq = 1 + b * 5 + op;
                assert_eq!(
                    mem.latest_seq(key.as_bytes()),
                    Some(seq),
                    "{key} at its own sequence"
                );
                assert_eq!(
                    mem.get(key.as_bytes(), seq),
                    Lookup::Value(b.to_le_bytes().to_vec())
                );
            }
        }
    }

    #[test]
    fn a_late_helper_finds_nothing_to_do() {
        let mem = Arc::new(MemTable::new(1));
        let inserts = GroupInserts::new(Arc::clone(&mem), batches(3, 2));
        inserts.finish();
        assert_eq!(inserts.help(), 0);
        assert_eq!(mem.latest_seq(b"b2-k1"), Some(6));
    }

    #[test]
    fn finish_waits_for_a_batch_another_helper_claimed() {
        let mem = Arc::new(MemTable::new(1));
        let inserts = GroupInserts::new(Arc::clone(&mem), batches(1, 1000));
        // A helper claims the only batch; the leader finds none left and must wait for it.
        let helper = {
            let inserts = Arc::clone(&inserts);
            std::thread::spawn(move || inserts.help())
        };
        while inserts.has_unclaimed() {
            std::thread::yield_now();
        }
        inserts.finish();
        assert_eq!(mem.latest_seq(b"b0-k999"), Some(1000));
        assert_eq!(helper.join().unwrap(), 1);
    }
}
