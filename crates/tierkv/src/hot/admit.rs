//! What a flush brings to the hot store: the memtable's entries grouped by user key, and the
//! room the store must make before it takes them.
//!
//! Why room comes first: a store that only admitted new keys while they fitted under its
//! budget, and demoted after the flush, sent every new key (and every update of a key living
//! on the capacity tier) to L0 once it was full, so the capacity tier took both the flushes
//! and their merges. Making room before the flush (a demotion, MSC-chosen) lets the store take
//! every object that fits a slot; the capacity tier is then reached by demotions (and by the
//! values too large for a slot).

use super::slab::{self, CLASS_SIZES};
use super::{HotStore, MemVersion};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};

/// A memtable's entries grouped by user key (key order; versions newest first), with the
/// lowest sequence among them.
pub(crate) struct FlushBatch {
    pub(super) keys: Vec<(Vec<u8>, Vec<MemVersion>)>,
    pub(super) lowest: SeqNo,
}

impl FlushBatch {
    /// Reads `iter` (internal-key order) to its end.
    pub fn read(iter: &mut dyn InternalIterator) -> Result<FlushBatch> {
        let mut keys: Vec<(Vec<u8>, Vec<MemVersion>)> = Vec::new();
        let mut lowest = SeqNo::MAX;
        iter.seek_to_first();
        while iter.valid() {
            let p = key::parse_internal_key(iter.key())
                .ok_or_else(|| Error::corruption("memtable", 0, "bad internal key"))?;
            lowest = lowest.min(p.seq);
            if keys.last().is_none_or(|(k, _)| k.as_slice() != p.user_key) {
                keys.push((p.user_key.to_vec(), Vec::new()));
            }
            let versions = &mut keys.last_mut().expect("pushed").1;
            versions.push((p.seq, p.kind, iter.value().to_vec()));
            iter.next();
        }
        iter.status()?;
        Ok(FlushBatch { keys, lowest })
    }
}

impl HotStore {
    /// Net bytes of slots the store gains by taking `batch`: for each key new to the store
    /// whose newest version is a value that fits a slot, its slot; for each key already in
    /// it, the new newest version's slot less the one it supersedes (freed when the flush
    /// commits). Older memtable versions kept for snapshots are not counted: they are rare
    /// and freed at the next commit.
    pub fn room_for(&self, batch: &FlushBatch) -> u64 {
        let index = self.index.read();
        let mut room: i64 = 0;
        for (user_key, versions) in &batch.keys {
            let (_, kind, value) = &versions[0];
            let current = index.map.get(user_key).and_then(|vs| vs.first());
            let new_slot = match (current, kind) {
                (None, ValueKind::Value) => self.slot_class(user_key, value),
                (None, _) => None,
                (Some(_), ValueKind::Value) => self
                    .slot_class(user_key, value)
                    .or_else(|| slab::class_for(user_key.len(), 0)),
                (Some(_), _) => slab::class_for(user_key.len(), 0),
            };
            room += new_slot.map_or(0, |c| CLASS_SIZES[c] as i64);
            room -= current.map_or(0, |v| CLASS_SIZES[v.loc.class] as i64);
        }
        room.max(0) as u64
    }

    /// The slab class a key new to the store takes for its newest version, if it is
    /// admitted: a value that fits a slot (a delete of a key not in the store goes to the
    /// LSM, where it shadows the key's older versions).
    pub(super) fn admissible_class(&self, user_key: &[u8], newest: &MemVersion) -> Option<usize> {
        let (_, kind, value) = newest;
        if *kind != ValueKind::Value {
            return None;
        }
        self.slot_class(user_key, value)
    }
}
