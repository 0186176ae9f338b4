//! The database's side of the hot store (`crate::hot`, `hot_tier = "slab"`): the hooks the
//! read path, flushes and recovery call. Every hook does nothing without a hot store.
//!
//! Ordering rules the hooks keep (see `docs/hot-tier.md`):
//! - A read consults memtables, then the hot store, then the LSM. After a hot-store miss it
//!   takes the *current* version: a demotion installs its table before it drops the objects
//!   from the store, so a reader that missed them there finds them in that version.
//! - A flush writes the hot part (synced) before its MANIFEST edit, and frees what it
//!   superseded after; a demotion runs in the flush job, so the store has one writer.

use super::background::build_tables;
use super::read::ReadView;
use super::DbInner;
use crate::compaction::EntryFilter;
use crate::error::Result;
use crate::hot::{HotStore, VecIter};
use crate::key::SeqNo;
use crate::memtable::MemTable;
use crate::tier::WriteKind;
use crate::version::VersionEdit;
use std::sync::atomic::Ordering;
use std::sync::Arc;

impl DbInner {
    /// Whether a live snapshot reads at a sequence in `[lo, hi)`.
    pub(super) fn snapshot_in(&self, lo: SeqNo, hi: SeqNo) -> bool {
        self.snapshots.any_in(lo, hi)
    }

    /// The hot store's answer for a point read that missed the memtables, or `None` for the
    /// LSM to answer (then `view.version` is the current version).
    pub(super) fn hot_get(
        &self,
        view: &mut ReadView,
        user_key: &[u8],
    ) -> Result<Option<Option<Vec<u8>>>> {
        let Some(hot) = &self.hot else {
            return Ok(None);
        };
        if let Some(answer) = hot.get(user_key, view.seq)? {
            return Ok(Some(answer));
        }
        view.version = self.versions.current();
        hot.tracker.touch(user_key);
        Ok(None)
    }

    /// Counts a read the LSM served while a hot store is on.
    pub(super) fn hot_count_lsm_read(&self) {
        if let Some(hot) = &self.hot {
            hot.counters.reads_lsm.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The newest sequence of `user_key` in the hot store (newer than any LSM version).
    pub(super) fn hot_latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        self.hot.as_ref().and_then(|h| h.latest_seq(user_key))
    }

    /// The hot store's entries for an iterator over `view`, or `None`; refreshes
    /// `view.version` (see the module doc).
    pub(super) fn hot_iter(
        &self,
        view: &mut ReadView,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<Option<VecIter>> {
        let Some(hot) = &self.hot else {
            return Ok(None);
        };
        let entries = hot.collect(lower, upper, view.seq)?;
        view.version = self.versions.current();
        Ok(Some(VecIter::new(entries)))
    }
}

/// A flush's hot part: writes the memtable's hot objects to the store and returns an
/// iterator over the rest, for L0; `None` without a hot store.
pub(super) fn flush_hot_part(db: &DbInner, mem: &Arc<MemTable>) -> Result<Option<VecIter>> {
    let Some(hot) = &db.hot else {
        return Ok(None);
    };
    let needed = |lo, hi| db.snapshot_in(lo, hi);
    let rest = hot.absorb(&mut mem.iter(), db.versions.log_number(), &needed)?;
    Ok(Some(VecIter::new(rest)))
}

/// After a flush's MANIFEST edit: frees what it superseded and demotes if the store is over
/// its budget.
pub(super) fn after_flush(db: &DbInner) -> Result<()> {
    let Some(hot) = &db.hot else {
        return Ok(());
    };
    hot.commit(&|lo, hi| db.snapshot_in(lo, hi));
    if hot.over_budget() {
        demote(db, hot)?;
    }
    Ok(())
}

/// MSC demotion: moves cold objects of the chosen key ranges into an L0 table, installs it,
/// then drops them from the store.
fn demote(db: &DbInner, hot: &HotStore) -> Result<()> {
    let started = std::time::Instant::now();
    let version = db.versions.current();
    // Candidates follow the deepest level's tables (the capacity tier's large sorted runs).
    let bounds: Vec<(Vec<u8>, u64)> = version
        .levels
        .iter()
        .skip(1)
        .rev()
        .find(|l| !l.is_empty())
        .map(|l| {
            l.iter()
                .map(|f| (f.largest_user().to_vec(), f.num_entries))
                .collect()
        })
        .unwrap_or_default();
    drop(version);
    let Some(plan) = hot.plan_demotion(&bounds)? else {
        return Ok(());
    };
    let bytes: u64 = plan
        .entries
        .iter()
        .map(|(k, v)| (k.len() + v.len()) as u64)
        .sum();
    let mut iter = VecIter::new(plan.entries.clone());
    let ctx = db.output_ctx();
    let files = build_tables(
        &ctx,
        &mut iter,
        0,
        &mut EntryFilter::new(db.oldest_snapshot()),
        &|_| false,
        (WriteKind::Compaction, bytes),
        &mut || db.allocate_output(),
    )?;
    let mut edit = VersionEdit::default();
    for out in &files {
        edit.new_files.push(ctx.record(0, &out.meta));
    }
    if !edit.new_files.is_empty() {
        db.versions.log_and_apply(edit)?;
    }
    db.clear_pending(files.iter().map(|o| o.meta.number));
    drop(files);
    hot.finish_demotion(plan, db.versions.log_number())?;
    let micros = started.elapsed().as_micros() as u64;
    hot.counters
        .demotion_micros
        .fetch_add(micros, Ordering::Relaxed);
    Ok(())
}
