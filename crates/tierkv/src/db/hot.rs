//! The database's side of the hot store (`crate::hot`, `hot_tier = "slab"`): the hooks the
//! read path, flushes and recovery call. Every hook does nothing without a hot store.
//!
//! Ordering rules the hooks keep (see `docs/hot-tier.md`):
//! - A read consults memtables, then the hot store, then the LSM. A demotion installs its
//!   table, then drops the objects from the store and bumps the store's epoch. A view records
//!   the epoch before its version; a reader that misses the store and finds the epoch moved
//!   takes a new view (its version might predate the table), otherwise its version is right.
//!   (A reader cannot simply take the current version: a compaction since its view may have
//!   dropped versions its sequence still sees.)
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

/// What the hot store says about a point read.
pub(super) enum HotAnswer {
    /// Its answer: a value, or `None` for a delete.
    Found(Option<Vec<u8>>),
    /// The LSM answers, from the view's version.
    Lsm,
    /// A demotion moved objects to a table since the view was taken: take a new view.
    Retry,
}

impl DbInner {
    /// Whether a live snapshot reads at a sequence in `[lo, hi)`.
    pub(super) fn snapshot_in(&self, lo: SeqNo, hi: SeqNo) -> bool {
        self.snapshots.any_in(lo, hi)
    }

    /// The hot store's demotion epoch (0 without a store).
    pub(super) fn hot_epoch(&self) -> u64 {
        self.hot.as_ref().map_or(0, |h| h.epoch())
    }

    /// The hot store's answer for a point read that missed the memtables of `view`.
    pub(super) fn hot_get(&self, view: &ReadView, user_key: &[u8]) -> Result<HotAnswer> {
        let Some(hot) = &self.hot else {
            return Ok(HotAnswer::Lsm);
        };
        if let Some(answer) = hot.get(user_key, view.seq)? {
            return Ok(HotAnswer::Found(answer));
        }
        if hot.epoch() != view.hot_epoch {
            return Ok(HotAnswer::Retry);
        }
        hot.tracker.touch(user_key);
        Ok(HotAnswer::Lsm)
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

    /// The hot store's entries for an iterator over `view`: `None` without a store,
    /// `Some(None)` if a demotion ran since the view was taken (take a new view).
    pub(super) fn hot_iter(
        &self,
        view: &ReadView,
        lower: Option<&[u8]>,
        upper: Option<&[u8]>,
    ) -> Result<Option<Option<VecIter>>> {
        let Some(hot) = &self.hot else {
            return Ok(None);
        };
        let entries = hot.collect(lower, upper, view.seq)?;
        if hot.epoch() != view.hot_epoch {
            return Ok(Some(None));
        }
        Ok(Some(Some(VecIter::new(entries))))
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
