//! A demotion straight into the capacity tier's bottom run (`hot_demote_into_bottom`,
//! `docs/hot-tier.md`, "Demotion into the bottom run").
//!
//! A demoted object whose key has no version in any level above the deepest non-empty one is
//! merged with the overlapping tables of that level, in one MANIFEST edit that adds the
//! outputs and deletes those tables: no L0 table, and no later L0 merge that rewrites the run
//! again. An object whose key may have a version above (a file's range covers it and its
//! filter says maybe) goes to L0 as before: placed in the bottom run, it would be shadowed by
//! that older version once it leaves the store.
//!
//! Why no other job can write the merge's key range meanwhile: the bottom level's tables
//! overlapping the range, and the tables of the level above overlapping it (all of L0 when
//! that level is L0, since an L0 compaction into L1 takes every L0 table and its outputs may
//! span gaps), are marked busy before the merge starts, or the objects go to L0 if any is busy
//! already. A compaction into the bottom level must take a busy table to reach the range (its
//! inputs' ranges form one interval through its single upper input), so none is picked. (A
//! merge within L0 may run meanwhile on tables newer than the busy ones: it writes L0, not the
//! bottom level.)
//! Flushes may run meanwhile (`db::hot::demotion_job`), but they write only versions newer
//! than every demoted one, which belong above the run: no older version of a merged key can
//! appear above it.

use super::background::build_tables;
use super::iter::level_cursors;
use super::DbInner;
use crate::compaction::EntryFilter;
use crate::error::Result;
use crate::hot::{Entries, VecIter};
use crate::iter::{InternalIterator, MergingIter};
use crate::key;
use crate::tier::WriteKind;
use crate::version::{FileMeta, Version, VersionEdit};
use std::sync::Arc;

/// Merges the objects of `entries` (a demotion's, internal-key order) whose keys have no
/// version above the bottom run into that run; returns the rest, for L0, and how many
/// objects the merge took. All of them come back with `hot_demote_into_bottom` off, when the
/// bottom run is empty or when a table it needs is busy.
pub(super) fn merge_into_bottom(db: &DbInner, entries: Entries) -> Result<(Entries, u64)> {
    if !db.opts.hot_tier.demote_into_bottom {
        return Ok((entries, 0));
    }
    let version = db.versions.current();
    let Some(bottom) = version.deepest_non_empty_level() else {
        return Ok((entries, 0));
    };
    let (direct, rest) = split_by_upper_versions(db, &version, bottom, entries)?;
    drop(version);
    if direct.is_empty() {
        return Ok((rest, 0));
    }
    let Some(claim) = Claim::take(db, bottom, &direct) else {
        return Ok((merge_sorted(direct, rest), 0));
    };
    let merged = direct.len() as u64;
    write_merge(db, bottom, &claim.bottom_inputs, direct)?;
    drop(claim);
    Ok((rest, merged))
}

/// Splits `entries` into those whose user key has no version in a level above `bottom` (as
/// far as the tables' ranges and filters tell) and the rest, both in order.
fn split_by_upper_versions(
    db: &DbInner,
    version: &Version,
    bottom: usize,
    entries: Entries,
) -> Result<(Entries, Entries)> {
    let (mut direct, mut rest) = (Vec::new(), Vec::new());
    // The answer for the user key of the previous entry (a key's versions are adjacent).
    let mut last: Option<(Vec<u8>, bool)> = None;
    for (ikey, value) in entries {
        let user_key = key::user_key(&ikey);
        let above = match &last {
            Some((k, above)) if k.as_slice() == user_key => *above,
            _ => {
                let above = has_upper_version(db, version, bottom, user_key)?;
                last = Some((user_key.to_vec(), above));
                above
            }
        };
        if above {
            rest.push((ikey, value));
        } else {
            direct.push((ikey, value));
        }
    }
    Ok((direct, rest))
}

/// Whether a table in a level above `bottom` may hold `user_key`.
fn has_upper_version(
    db: &DbInner,
    version: &Version,
    bottom: usize,
    user_key: &[u8],
) -> Result<bool> {
    for (level, file) in version.files_for_key(user_key) {
        if level < bottom && db.table_cache.get(&file)?.may_contain(user_key) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Tables marked busy for a merge into the bottom run; unmarked when dropped.
struct Claim<'a> {
    db: &'a DbInner,
    /// The bottom level's tables overlapping the merge: its inputs.
    bottom_inputs: Vec<Arc<FileMeta>>,
    /// Every table marked, the inputs included.
    numbers: Vec<u64>,
}

impl<'a> Claim<'a> {
    /// Marks the tables a merge of `direct` into level `bottom` must keep other jobs from;
    /// `None` if one is busy already or `bottom` is no longer the deepest level.
    fn take(db: &'a DbInner, bottom: usize, direct: &Entries) -> Option<Claim<'a>> {
        let lo = key::user_key(&direct.first()?.0).to_vec();
        let hi = key::user_key(&direct.last()?.0).to_vec();
        let mut state = db.state.lock();
        let version = db.versions.current();
        if version.deepest_non_empty_level() != Some(bottom) {
            return None;
        }
        let bottom_inputs = version.overlapping(bottom, Some(&lo), Some(&hi));
        let above = match bottom - 1 {
            0 => version.levels[0].clone(),
            level => version.overlapping(level, Some(&lo), Some(&hi)),
        };
        let numbers: Vec<u64> = bottom_inputs
            .iter()
            .chain(&above)
            .map(|f| f.number)
            .collect();
        if numbers.iter().any(|n| state.busy_files.contains(n)) {
            return None;
        }
        state.busy_files.extend(numbers.iter().copied());
        Some(Claim {
            db,
            bottom_inputs,
            numbers,
        })
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        let mut state = self.db.state.lock();
        for n in &self.numbers {
            state.busy_files.remove(n);
        }
        drop(state);
        // A compaction picker or a manual compaction may wait for these tables.
        self.db.bg_cv.notify_all();
        self.db.progress_cv.notify_all();
    }
}

/// Merges `direct` with `inputs` (level `bottom`'s tables) into new tables of that level and
/// installs them in one edit that deletes the inputs.
fn write_merge(
    db: &DbInner,
    bottom: usize,
    inputs: &[Arc<FileMeta>],
    direct: Entries,
) -> Result<()> {
    let direct_bytes: u64 = direct.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let input_bytes: u64 = inputs.iter().map(|f| f.size).sum();
    let mut children: Vec<Box<dyn InternalIterator>> = vec![Box::new(VecIter::new(direct))];
    children.extend(level_cursors(&db.table_cache, bottom, inputs, false)?);
    let mut merged = MergingIter::new(children);
    let deeper = db.versions.current().deeper_than(bottom);
    let is_bottom = |uk: &[u8]| deeper.is_bottom_for_key(bottom, uk);
    let ctx = db.output_ctx();
    let files = build_tables(
        &ctx,
        &mut merged,
        bottom,
        &mut EntryFilter::new(db.oldest_snapshot()),
        &is_bottom,
        (WriteKind::Compaction, direct_bytes + input_bytes),
        &mut || db.allocate_output(),
    )?;
    let mut edit = VersionEdit {
        deleted_files: inputs.iter().map(|f| (bottom, f.number)).collect(),
        ..VersionEdit::default()
    };
    edit.new_files
        .extend(files.iter().map(|out| ctx.record(bottom, &out.meta)));
    // NB: if the MANIFEST write fails the outputs stay pending: the MANIFEST may list them.
    db.versions.log_and_apply(edit)?;
    db.clear_pending(files.iter().map(|o| o.meta.number));
    drop(files);
    db.delete_obsolete_files();
    Ok(())
}

/// `a` and `b` (each in internal-key order) as one list in that order.
fn merge_sorted(a: Entries, b: Entries) -> Entries {
    let mut all = a;
    all.extend(b);
    all.sort_by(|x, y| key::compare_internal(&x.0, &y.0));
    all
}
