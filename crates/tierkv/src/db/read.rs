//! The read path: point lookups through memtables, then tables level by level, and the
//! construction of iterators over a consistent view.

use super::hot::HotAnswer;
use super::iter::{level_cursors, DbIterator};
use super::DbInner;
use crate::error::Result;
use crate::hot::iter::{HotIter, Reader};
use crate::iter::{InternalIterator, MergingIter};
use crate::key::{self, SeqNo, ValueKind};
use crate::memtable::{KeyHash, Lookup, MemTable};
use crate::options::ReadOptions;
use crate::sst::ReadTrace;
use crate::stats::Counters;
use crate::tier::TierId;
use crate::version::Version;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The memtables and version a read works on, captured together.
pub(super) struct ReadView {
    pub mems: Vec<Arc<MemTable>>,
    pub version: Arc<Version>,
    pub seq: SeqNo,
    /// The hot store's demotion epoch, read before the version (see `db::hot`).
    pub hot_epoch: u64,
    /// Whether the read is at a snapshot the caller holds (whose versions are kept), not
    /// at the last sequence of its start.
    pub at_snapshot: bool,
}

impl DbInner {
    /// Captures the memtables (newest first) and version for a read at `opts.snapshot`.
    pub(super) fn read_view(&self, opts: &ReadOptions) -> ReadView {
        // Hot tier hook: read before the version is captured.
        let hot_epoch = self.hot_epoch();
        let state = self.state.lock();
        // NB: the sequence is read before the memtables are captured, so every write at or
        // below it is in one of them (or in the version).
        let seq = match &opts.snapshot {
            Some(s) => s.sequence(),
            None => self.versions.last_sequence(),
        };
        let mut mems = vec![Arc::clone(&state.mem)];
        mems.extend(state.imm.iter().rev().cloned());
        let version = self.versions.current();
        drop(state);
        ReadView {
            mems,
            version,
            seq,
            hot_epoch,
            at_snapshot: opts.snapshot.is_some(),
        }
    }

    pub(super) fn get(&self, opts: &ReadOptions, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        // SPLIT VALUES: the stored value is resolved (`user_value`), pinned against collection.
        let _pin = self.pin_values();
        match self.get_stored(opts, user_key)? {
            Some(v) => self.user_value(user_key, v).map(Some),
            None => Ok(None),
        }
    }

    fn get_stored(&self, opts: &ReadOptions, user_key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.lookup_stored(opts, user_key, true)
    }

    /// The stored (tagged) value of `user_key` as of `opts`: memtables, then the hot store,
    /// then the tables. A `user_read` is counted in the read statistics and may offer the
    /// object for promotion; an internal lookup (value-log collection's liveness check) is not.
    pub(super) fn lookup_stored(
        &self,
        opts: &ReadOptions,
        user_key: &[u8],
        user_read: bool,
    ) -> Result<Option<Vec<u8>>> {
        let c = &self.counters;
        if user_read {
            Counters::add(&c.gets, 1);
        }
        let view = loop {
            let view = self.read_view(opts);
            if let Some(value) = self.memtable_lookup(&view, user_key, user_read) {
                return Ok(value);
            }
            // Hot tier hook: memtables, then the hot store, then the LSM.
            match self.hot_get(&view, user_key)? {
                HotAnswer::Found(value) => return Ok(value),
                HotAnswer::Lsm => break view,
                HotAnswer::Retry => continue,
            }
        };
        let lookup = key::internal_key(user_key, view.seq, key::LOOKUP_KIND);
        for (level, file) in view.version.files_for_key(user_key) {
            let table = self.table_cache.get(&file)?;
            let mut trace = ReadTrace::default();
            let found = table.get(&lookup, opts.fill_cache, &mut trace)?;
            if user_read && trace.filter_negative {
                Counters::add(&c.filter_negatives, 1);
            }
            let Some((ikey, value)) = found else {
                continue;
            };
            if user_read {
                self.count_table_read(level, file.tier, &trace);
                self.hot_count_lsm_read(user_key);
                // Hot tier hook: a popular object read from below L0 may go back to the store.
                self.hot_offer_promotion(level, user_key, &ikey, &value);
            }
            let kind = key::parse_internal_key(&ikey).map(|p| p.kind);
            return Ok((kind == Some(ValueKind::Value)).then_some(value));
        }
        if user_read {
            Counters::add(&c.reads_not_found, 1);
        }
        Ok(None)
    }

    /// The memtables' answer for `user_key`: `Some(value or None for a delete)`, or `None`
    /// if no memtable has it; counted as a memtable read when `counted`.
    pub(super) fn memtable_lookup(
        &self,
        view: &ReadView,
        user_key: &[u8],
        counted: bool,
    ) -> Option<Option<Vec<u8>>> {
        let hash = KeyHash::of(user_key);
        for mem in &view.mems {
            let answer = match mem.get_hashed(user_key, hash, view.seq) {
                Lookup::Value(v) => Some(v),
                Lookup::Deleted => None,
                Lookup::Absent => continue,
            };
            if counted {
                Counters::add(&self.counters.reads_memtable, 1);
            }
            return Some(answer);
        }
        None
    }

    /// Up to `limit` entries from `start` (or the lower bound, if later), in key order.
    pub(super) fn scan(
        &self,
        opts: ReadOptions,
        start: &[u8],
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let mut it = self.iter(opts)?;
        it.seek(start);
        let mut out = Vec::with_capacity(limit.min(1024));
        while it.valid() && out.len() < limit {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        it.status()?;
        Ok(out)
    }

    /// The sequence number of the newest entry for `user_key` anywhere (memtables, then
    /// tables newest first), visible or not; `None` if the key was never written or its
    /// history was compacted away entirely.
    pub(super) fn latest_seq(&self, user_key: &[u8]) -> Result<Option<SeqNo>> {
        let mut view = self.read_view(&ReadOptions::default());
        for mem in &view.mems {
            if let Some(seq) = mem.latest_seq(user_key) {
                return Ok(Some(seq));
            }
        }
        // Hot tier hook: a hot version is newer than any LSM version of its key.
        if let Some(seq) = self.hot_latest_seq(user_key) {
            return Ok(Some(seq));
        }
        view.version = self.versions.current();
        let lookup = key::internal_key(user_key, key::MAX_SEQNO, key::LOOKUP_KIND);
        for (_, file) in view.version.files_for_key(user_key) {
            let table = self.table_cache.get(&file)?;
            let mut trace = ReadTrace::default();
            if let Some((ikey, _)) = table.get(&lookup, true, &mut trace)? {
                return Ok(key::parse_internal_key(&ikey).map(|p| p.seq));
            }
        }
        Ok(None)
    }

    pub(super) fn count_table_read(&self, level: usize, tier: TierId, trace: &ReadTrace) {
        let c = &self.counters;
        if let Some(l) = c.reads_by_level.get(level) {
            Counters::add(l, 1);
        }
        if trace.blocks_read == 0 && trace.cache_hits > 0 {
            Counters::add(&c.reads_block_cache, 1);
        } else {
            // NB: a table with a replica reads its blocks from tier 0.
            let tier = if trace.blocks_read > 0 {
                trace.tier
            } else {
                tier
            };
            let counters = &self.tiers.get(tier).counters;
            counters.reads_served.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub(super) fn iter(&self, opts: ReadOptions) -> Result<DbIterator> {
        // SPLIT VALUES: the iterator resolves stored values through the value log, pinned
        // against collection while it lives.
        let pin = self.pin_values();
        Ok(self
            .iter_stored(opts)?
            .with_value_log(self.vlog.clone(), pin))
    }

    /// An iterator over the values as the LSM stores them (tagged, with split values).
    pub(super) fn iter_stored(&self, mut opts: ReadOptions) -> Result<DbIterator> {
        // Hot tier hook: the store's readers are registered before the view is taken, and
        // again if a demotion finished in between (`HotIter`'s rules).
        let (hot, view) = loop {
            let hot = self.hot_readers(&mut opts);
            let view = self.read_view(&opts);
            let current = hot
                .as_ref()
                .is_none_or(|(readers, _)| readers.iter().all(Reader::is_current));
            if current {
                break (hot, view);
            }
        };
        let mut children: Vec<Box<dyn InternalIterator>> = Vec::new();
        for mem in &view.mems {
            children.push(Box::new(mem.iter()));
        }
        // Hot tier hook: the hot store's entries, between the memtables and the tables.
        // One child per partition: their keys are disjoint.
        if let Some((readers, snapshot)) = hot {
            let (lower, upper) = (opts.lower_bound.as_deref(), opts.upper_bound.as_deref());
            for reader in readers {
                let part = HotIter::new(reader, snapshot.clone(), lower, upper);
                children.push(Box::new(part));
            }
        }
        for (level, files) in view.version.levels.iter().enumerate() {
            children.extend(level_cursors(
                &self.table_cache,
                level,
                files,
                opts.fill_cache,
            )?);
        }
        Ok(DbIterator::new(
            MergingIter::new(children),
            view.seq,
            opts,
            view.version,
            view.mems,
        ))
    }
}
