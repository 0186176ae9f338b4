//! Snapshots: a read view pinned at a sequence number, released when the last handle drops.
//!
//! The [`SnapshotList`] is the one owner of the set of live snapshot sequences; compaction asks
//! it which versions must be kept.

use crate::key::SeqNo;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The live snapshots of a database: sequence -> number of handles.
#[derive(Debug, Default)]
pub struct SnapshotList {
    live: Mutex<BTreeMap<SeqNo, usize>>,
}

impl SnapshotList {
    /// Registers a snapshot at the sequence `latest` returns, read under the list's lock so
    /// that [`SnapshotList::oldest`] never misses a snapshot being taken.
    pub fn acquire(self: &Arc<Self>, latest: impl FnOnce() -> SeqNo) -> Snapshot {
        let mut live = self.live.lock();
        let seq = latest();
        *live.entry(seq).or_insert(0) += 1;
        drop(live);
        Snapshot {
            inner: Arc::new(SnapshotInner {
                seq,
                list: Arc::clone(self),
            }),
        }
    }

    /// The oldest live snapshot, or `latest()` if there is none; read under the list's lock.
    /// Versions of a key that are shadowed at or below the result are visible to no reader.
    pub fn oldest(&self, latest: impl FnOnce() -> SeqNo) -> SeqNo {
        let live = self.live.lock();
        live.keys().next().copied().unwrap_or_else(latest)
    }

    /// True if a live snapshot reads at a sequence in `[lo, hi)`: a version at `lo` shadowed
    /// at `hi` is still visible to it.
    pub fn any_in(&self, lo: SeqNo, hi: SeqNo) -> bool {
        lo < hi && self.live.lock().range(lo..hi).next().is_some()
    }

    /// Number of live snapshots.
    pub fn len(&self) -> usize {
        self.live.lock().values().sum()
    }

    /// True if no snapshot is live.
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.live.lock().is_empty()
    }
}

#[derive(Debug)]
struct SnapshotInner {
    seq: SeqNo,
    list: Arc<SnapshotList>,
}

impl Drop for SnapshotInner {
    fn drop(&mut self) {
        let mut live = self.list.live.lock();
        if let Some(n) = live.get_mut(&self.seq) {
            *n -= 1;
            if *n == 0 {
                live.remove(&self.seq);
            }
        }
    }
}

/// A consistent read view of the database. Cloning is cheap; the view is released when the
/// last clone drops.
#[derive(Debug, Clone)]
pub struct Snapshot {
    inner: Arc<SnapshotInner>,
}

impl Snapshot {
    /// The sequence number the snapshot reads at.
    pub fn sequence(&self) -> SeqNo {
        self.inner.seq
    }

    /// True if both handles were taken from the same database.
    pub(crate) fn belongs_to(&self, list: &Arc<SnapshotList>) -> bool {
        Arc::ptr_eq(&self.inner.list, list)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_on_last_drop() {
        let list = Arc::new(SnapshotList::default());
        let a = list.acquire(|| 5);
        let b = a.clone();
        let c = list.acquire(|| 5);
        assert_eq!(list.oldest(|| 9), 5);
        assert_eq!(list.len(), 2);
        drop(a);
        drop(c);
        assert_eq!(list.len(), 1);
        drop(b);
        assert!(list.is_empty());
        assert_eq!(list.oldest(|| 9), 9);
    }
}
