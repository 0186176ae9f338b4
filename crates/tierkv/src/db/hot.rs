//! The database's side of the hot store (`crate::hot`, `hot_tier = "slab"`): the hooks the
//! read path, flushes and recovery call. Every hook does nothing without a hot store.
//!
//! Ordering rules the hooks keep (see `docs/hot-tier.md`):
//! - A read consults memtables, then the hot store, then the LSM. A demotion installs its
//!   table, then drops the objects from the store and bumps the store's epoch. A view records
//!   the epoch before its version; a reader that misses the store and finds the epoch moved
//!   takes a new view (its version might predate the table), otherwise its version is right.
//!   An iterator registers with the store before its view instead, and merges in the objects
//!   of demotions that end while it lives (`hot::iter`).
//!   (A reader cannot simply take the current version: a compaction since its view may have
//!   dropped versions its sequence still sees.)
//! - A flush writes the hot part (synced) before its MANIFEST edit, and frees what it
//!   superseded after. The store has one writer, the holder of the flush slot: a flush, a
//!   promotion, or a demotion while it plans and drops its objects ([`demotion_job`], which
//!   lets the slot go while it writes its tables). Under `make-room` a flush makes room
//!   first (a demotion, installed before the flush writes anything), so every object that
//!   fits a slot enters the store and the capacity tier is reached only by demotions and by
//!   values too large for a slot.
//! - A promotion runs in the flush job too, or in its own job that holds the flush slot: it
//!   copies a candidate only if that is still its key's newest version (`promote_candidates`).

use super::background::{build_tables, Held};
use super::read::ReadView;
use super::DbInner;
use crate::compaction::EntryFilter;
use crate::error::Result;
use crate::hot::admit::FlushBatch;
use crate::hot::iter::Reader;
use crate::hot::{Clears, Demotion, Entries, HotPartitions, HotRead, HotStore, VecIter};
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::options::{HotAdmission, ReadOptions};
use crate::snapshot::Snapshot;
use crate::sst::ReadTrace;
use crate::tier::WriteKind;
use crate::version::{Version, VersionEdit};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the hot store says about a point read.
pub(super) enum HotAnswer {
    /// Its answer: a value, or `None` for a delete.
    Found(Option<Vec<u8>>),
    /// The LSM answers, from the view's version.
    Lsm,
    /// A demotion moved objects to a table since the view was taken, or (a read at no
    /// snapshot) a flush freed the version the read sees: take a new view.
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
        match hot.get(user_key, view.seq, view.at_snapshot)? {
            HotRead::Found(answer) => return Ok(HotAnswer::Found(answer)),
            HotRead::OnlyNewer if !view.at_snapshot => return Ok(HotAnswer::Retry),
            HotRead::Lsm | HotRead::OnlyNewer => {}
        }
        if hot.epoch() != view.hot_epoch {
            return Ok(HotAnswer::Retry);
        }
        hot.part_for(user_key).tracker.touch(user_key);
        Ok(HotAnswer::Lsm)
    }

    /// Whether the hot store's demotions past its watermark run as their own job
    /// ([`demotion_job`]), so flushes go on meanwhile: under `hot_admission = "when-free"`,
    /// where a flush never needs room made first. Under `make-room` a flush may demote, so
    /// demotions stay in the flush job.
    pub(super) fn hot_demotes_in_background(&self) -> bool {
        self.hot.is_some() && self.opts.hot_tier.admission == HotAdmission::WhenFree
    }

    /// Whether the hot store runs a demotion past its high watermark (writes are paced).
    pub(super) fn hot_demoting(&self) -> bool {
        self.hot.as_ref().is_some_and(|h| h.demoting())
    }

    /// How long a write of `bytes` waits for a running demotion (`pacer::DemotionPacer`);
    /// counts the writes that wait.
    pub(super) fn hot_write_delay(&self, bytes: u64, now: Instant) -> Duration {
        let Some(hot) = &self.hot else {
            return Duration::ZERO;
        };
        let wait = self.hot_pacer.delay(hot.demoting(), bytes, now);
        if !wait.is_zero() {
            let c = hot.pacing_counters();
            c.paced_writes.fetch_add(1, Ordering::Relaxed);
            c.paced_micros
                .fetch_add(wait.as_micros() as u64, Ordering::Relaxed);
        }
        wait
    }

    /// Counts a read of `user_key` the LSM served while a hot store is on.
    pub(super) fn hot_count_lsm_read(&self, user_key: &[u8]) {
        if let Some(hot) = &self.hot {
            hot.count_lsm_read(user_key);
        }
    }

    /// A point read found `ikey` (of `user_key`) with `value` in a table at `level`: offers
    /// it for promotion if it came from below L0 (a key whose newest version is in L0 is not
    /// promoted: see [`promote`]), and wakes a worker once a batch waits.
    pub(super) fn hot_offer_promotion(
        &self,
        level: usize,
        user_key: &[u8],
        ikey: &[u8],
        value: &[u8],
    ) {
        let Some(hot) = &self.hot else {
            return;
        };
        // NB: split values are stored as pointers the value log counts; not copied.
        if level == 0 || self.vlog.is_some() {
            return;
        }
        let Some(p) = key::parse_internal_key(ikey) else {
            return;
        };
        if p.kind == ValueKind::Value && hot.offer_promotion(user_key, p.seq, value) {
            self.bg_cv.notify_all();
        }
    }

    /// Whether a batch of promotion candidates waits for the job.
    pub(super) fn hot_promotion_due(&self) -> bool {
        self.hot.as_ref().is_some_and(|h| h.promotion_due())
    }

    /// The newest sequence of `user_key` in the hot store (newer than any LSM version).
    pub(super) fn hot_latest_seq(&self, user_key: &[u8]) -> Option<SeqNo> {
        self.hot.as_ref().and_then(|h| h.latest_seq(user_key))
    }

    /// Registers an iterator with every partition of the hot store, before its view is
    /// taken: the readers and the snapshot the store's child iterators read at
    /// (`opts.snapshot`, taken now if the caller gave none). `None` without a hot store.
    pub(super) fn hot_readers(&self, opts: &mut ReadOptions) -> Option<(Vec<Reader>, Snapshot)> {
        let hot = self.hot.as_ref()?;
        let readers = hot.parts().iter().map(HotStore::reader).collect();
        let versions = &self.versions;
        let snapshot = opts
            .snapshot
            .get_or_insert_with(|| self.snapshots.acquire(|| versions.last_sequence()))
            .clone();
        Some((readers, snapshot))
    }
}

/// A flush's hot part: makes room in the store for the memtable's objects (a demotion, if
/// taking them would pass the high watermark; `hot_admission = "make-room"`), writes them to the store and returns an
/// iterator over the rest (values too large for a slot, deletes of keys not in the store),
/// for L0; `None` without a hot store.
///
/// Room first, so new keys land in the store and the capacity tier is written by demotions:
/// the demotion's table holds only store versions, older than every memtable entry, so it
/// sits below this flush's L0 table in L0's order whatever the two hold.
pub(super) fn flush_hot_part(
    db: &DbInner,
    entries: &mut dyn InternalIterator,
) -> Result<Option<VecIter>> {
    let Some(hot) = &db.hot else {
        return Ok(None);
    };
    let batch = FlushBatch::read(entries)?;
    let needed = |lo, hi| db.snapshot_in(lo, hi);
    // Each partition makes its own room and absorbs its own keys, as its own jobs.
    let mut rest = Vec::new();
    for (part, batch) in hot.parts().iter().zip(hot.split(batch)) {
        if db.opts.hot_tier.admission == HotAdmission::MakeRoom {
            make_room(db, part, &batch)?;
        }
        let version = db.versions.current();
        let on_capacity = |k: &[u8]| may_be_on_capacity(db, &version, k);
        rest.extend(part.absorb_batch(batch, db.versions.log_number(), &needed, &on_capacity)?);
    }
    if hot.parts().len() > 1 {
        crate::hot::partitioned::sort_entries(&mut rest);
    }
    charge_slabs(db, hot);
    Ok(Some(VecIter::new(rest)))
}

/// `hot_admission = "make-room"`: demotes before a flush takes `batch` if taking it would
/// pass the high watermark. (Under `when-free` the flush skips this: new keys enter only
/// while the budget has room, the rest go to L0, and [`after_flush`] demotes.)
fn make_room(db: &DbInner, hot: &HotStore, batch: &FlushBatch) -> Result<()> {
    let room = hot.room_for(batch);
    if room > 0 && hot.over_budget_with(room) {
        // NB: the demotion's clears ride on the flush's slot writes that follow: one journal.
        demote(db, hot, room, Clears::WithNextJob)?;
    }
    Ok(())
}

/// Whether the deepest non-empty level (the capacity tier's large sorted runs) may hold
/// `user_key`: its table whose range covers the key has it in its filter. An error reading
/// the table answers no: the answer only weighs MSC's cost.
fn may_be_on_capacity(db: &DbInner, version: &Version, user_key: &[u8]) -> bool {
    let Some(level) = version.deepest_non_empty_level() else {
        return false;
    };
    let level = &version.levels[level];
    let i = level.partition_point(|f| f.largest_user() < user_key);
    level
        .get(i)
        .filter(|f| f.contains(user_key))
        .and_then(|f| db.table_cache.get(f).ok())
        .is_some_and(|t| t.may_contain(user_key))
}

/// After a flush's MANIFEST edit: frees what it superseded and demotes if the store is past
/// its policy's watermark (98% of the budget for MSC, 80% for the weight policy).
pub(super) fn after_flush(db: &DbInner) -> Result<()> {
    let Some(hot) = &db.hot else {
        return Ok(());
    };
    // NB: every partition commits first: the flush's superseded versions are all freeable.
    hot.commit(&|lo, hi| db.snapshot_in(lo, hi));
    hot.size_trackers(db.versions.current().num_entries());
    if db.hot_demotes_in_background() {
        let mut state = db.state.lock();
        state.demotion_wanted |= hot.parts().iter().any(|p| p.over_budget());
        if state.demotion_running {
            // Its objects are planned: a promotion's room-making demotion could take them again.
            return Ok(());
        }
        drop(state);
        for part in hot.parts() {
            promote_candidates(db, hot, part)?;
        }
        return Ok(());
    }
    for part in hot.parts() {
        promote_candidates(db, hot, part)?;
    }
    demote_rounds(db, hot.parts(), None)
}

/// The background demotion job ([`DbInner::hot_demotes_in_background`]), started holding
/// the flush slot (`slot`) after a flush left a partition past its watermark: relieves each
/// such partition in turn, like [`after_flush`] does inline, but lets the slot go while the
/// demotion writes its tables, so flushes (and the writers waiting on them) go on.
///
/// A round plans under the slot (`plan_aligned`: the victims' slots are read then), writes
/// and installs the tables without it, and takes it back to drop the victims from the store
/// (`HotStore::finish_demotion`). What can change in between, and why it is safe:
/// - A flush writes only newer versions than every planned one (it flushes a later
///   memtable), to the store or to L0. A victim superseded meanwhile is kept: the drop
///   checks that the key's only version is still the planned one. The demotion's tables
///   hold older versions, below any such L0 table (L0 is ordered by largest sequence), and
///   a bottom-run merge only needs no *older* version above the run (`hot_bottom`).
/// - Between the install and the drop, a planned object is both in the store and in a
///   table, the same internal key and value, as after a crash there: the store answers
///   reads first, and iterators read the two as one.
/// - Nothing else demotes meanwhile: this job is the only one, and promotions (whose room
///   is made by a demotion) wait for it.
/// - No L0 compaction starts between the plan and the install (`Held::hold_l0`). A flush may
///   write a newer version of a planned key to L0 meanwhile; merged below L0 before the
///   demotion's table arrived, it would be shadowed by the older version in that table.
///   Left in L0 beside it, it sorts first (newer largest sequence).
pub(super) fn demotion_job(db: &DbInner, slot: Held<'_>) -> Result<()> {
    let Some(hot) = &db.hot else {
        return Ok(());
    };
    demote_rounds(db, hot.parts(), Some(slot))
}

/// Relieves each partition past its watermark in turn by an aligned demotion (see
/// [`plan_aligned`]; a round also takes the leader's ranges from the others, so at most one
/// round per partition), while writes are paced. `slot` is the background job's flush slot
/// ([`demotion_job`]), let go while a round writes its tables, with L0 compactions held
/// meanwhile; `None` inline in a flush job, which keeps its slot throughout.
fn demote_rounds(db: &DbInner, parts: &[Arc<HotStore>], mut slot: Option<Held<'_>>) -> Result<()> {
    let background = slot.is_some();
    paced(parts.iter().map(|p| &**p), || {
        for _ in 0..parts.len() {
            let Some(leader) = parts.iter().position(|p| p.over_budget()) else {
                break;
            };
            let started = Instant::now();
            let hold = background.then(|| Held::hold_l0(db));
            let Some(plans) = plan_aligned(db, parts, leader)? else {
                break;
            };
            slot = None;
            write_demotion(db, &plans)?;
            drop(hold);
            if background {
                slot = Some(Held::acquire_flush_slot(db));
            }
            finish_demotions(db, plans, Clears::Now, started)?;
        }
        drop(slot);
        Ok(())
    })
}

/// Runs a demotion of `stores` with writes paced meanwhile: the stores would pass their
/// high watermark otherwise.
fn paced<'s>(
    stores: impl Iterator<Item = &'s HotStore> + Clone,
    demotion: impl FnOnce() -> Result<()>,
) -> Result<()> {
    stores.clone().for_each(|s| s.set_demoting(true));
    let done = demotion();
    stores.for_each(|s| s.set_demoting(false));
    done
}

/// The promotion job (run like a flush: the store's only writer while it runs): copies the
/// queued candidates that are still their key's newest version into the store.
pub(super) fn promote(db: &DbInner) -> Result<()> {
    let Some(hot) = &db.hot else {
        return Ok(());
    };
    for part in hot.parts() {
        promote_candidates(db, hot, part)?;
    }
    Ok(())
}

/// Promotes the queued candidates of partition `hot` (of `partitions`) whose sequence is
/// still the newest of their key.
///
/// Why that check is enough, with the job serialised with flushes and demotions: a key with
/// no version in the store whose newest LSM version sits below L0 at sequence `s` has no
/// newer version in any table; versions in the memtables are newer than `s` (flushes go in
/// order) and, once the key is in the store, their flushes bring them to the store too. So
/// the copy at `s` stays older than every later version, the store's rule. Only levels below
/// L0 are taken: a demotion writes a key's store version to L0, and L0 tables are searched
/// newest first, which holds for such a table only while no older L0 table has the key.
fn promote_candidates(db: &DbInner, partitions: &HotPartitions, hot: &HotStore) -> Result<()> {
    let candidates = hot.promoter.take();
    if candidates.is_empty() {
        return Ok(());
    }
    let version = db.versions.current();
    let mut fresh = Vec::with_capacity(candidates.len());
    for (user_key, seq, value) in candidates {
        if hot.latest_seq(&user_key).is_some() {
            continue;
        }
        if newest_below_l0(db, &version, &user_key)? == Some(seq) {
            fresh.push((user_key, seq, value));
        }
    }
    drop(version);
    // NB: room first: the demotion keeps pinned objects, and the new ones are not in yet.
    // NB: at most half the budget, so a promotion never empties the store for its copies.
    let room = hot.promotion_room(&fresh).min(hot.budget() / 2);
    if room > 0 && hot.over_budget_with(room) {
        demote(db, hot, room, Clears::Now)?;
    }
    hot.promote(fresh, db.versions.log_number())?;
    charge_slabs(db, partitions);
    Ok(())
}

/// Counts the slab files' bytes in tier 0's budget (they grow as jobs write new slots).
pub(super) fn charge_slabs(db: &DbInner, hot: &HotPartitions) {
    db.tiers.set_hot_bytes(hot.file_bytes());
}

/// The sequence of `user_key`'s newest version in `version`'s tables if it is a value in a
/// level below L0; `None` otherwise (in L0, a delete, or absent).
fn newest_below_l0(db: &DbInner, version: &Version, user_key: &[u8]) -> Result<Option<SeqNo>> {
    let lookup = key::internal_key(user_key, key::MAX_SEQNO, key::LOOKUP_KIND);
    for (level, file) in version.files_for_key(user_key) {
        let table = db.table_cache.get(&file)?;
        let mut trace = ReadTrace::default();
        let Some((ikey, _)) = table.get(&lookup, true, &mut trace)? else {
            continue;
        };
        let newest = key::parse_internal_key(&ikey)
            .filter(|p| level > 0 && p.kind == ValueKind::Value)
            .map(|p| p.seq);
        return Ok(newest);
    }
    Ok(None)
}

/// Demotion: moves the objects the eviction policy picks into the bottom run (those whose keys
/// have no version above it, `hot_bottom`) and an L0 table (the rest), installs both, then
/// drops them from the store. MSC takes cold objects of the chosen key ranges until the store
/// is at its low watermark less `room`; the weight policy the objects below the average
/// weight (`hot::weights`). The job and its ordering are the same for both.
fn demote(db: &DbInner, hot: &HotStore, room: u64, clears: Clears) -> Result<()> {
    paced(std::iter::once(hot), || {
        let started = Instant::now();
        let Some(plan) = hot.plan_demotion(&capacity_bounds(db), room)? else {
            return Ok(());
        };
        install_demotions(db, vec![(hot, plan)], clears, started)
    })
}

/// Plans an aligned demotion of partition `leader` (past its high watermark), which takes
/// the same key ranges from every partition: the leader's MSC picks the ranges and its
/// objects down to its low watermark, the others give their unpinned objects in those
/// ranges, and one table takes them all. A partition holds only its hash's share of a
/// range, so demoting a range from one partition alone would cost the capacity tier the
/// range's merge for a fraction of its objects. `None` if the leader has nothing to give.
/// The caller holds the flush slot.
fn plan_aligned<'p>(
    db: &DbInner,
    parts: &'p [Arc<HotStore>],
    leader: usize,
) -> Result<Option<Vec<(&'p HotStore, Demotion)>>> {
    let Some(lead) = parts[leader].plan_demotion(&capacity_bounds(db), 0)? else {
        return Ok(None);
    };
    let ranges = lead.ranges.clone();
    let mut plans = vec![(&*parts[leader], lead)];
    for (i, part) in parts.iter().enumerate() {
        if i == leader {
            continue;
        }
        if let Some(plan) = part.plan_demotion_in(&ranges)? {
            plans.push((part, plan));
        }
    }
    Ok(Some(plans))
}

/// The key ranges MSC's candidates follow: the deepest level's tables (the capacity tier's
/// large sorted runs), by largest key, with their entry counts.
fn capacity_bounds(db: &DbInner) -> Vec<(Vec<u8>, u64)> {
    let version = db.versions.current();
    version
        .deepest_non_empty_level()
        .map(|l| {
            version.levels[l]
                .iter()
                .map(|f| (f.largest_user().to_vec(), f.num_entries))
                .collect()
        })
        .unwrap_or_default()
}

/// Writes the planned demotions' objects (of one or more partitions, keys disjoint) as one
/// demotion and installs it ([`write_demotion`]), then drops the objects from their stores
/// ([`finish_demotions`]).
fn install_demotions(
    db: &DbInner,
    plans: Vec<(&HotStore, Demotion)>,
    clears: Clears,
    started: Instant,
) -> Result<()> {
    write_demotion(db, &plans)?;
    finish_demotions(db, plans, clears, started)
}

/// Writes the planned demotions' objects, merged into the bottom run where their keys have
/// no version above it and the rest into L0, and installs that. The first plan's store
/// counts the work. Needs no flush slot: the store is only read (the plans hold copies).
fn write_demotion(db: &DbInner, plans: &[(&HotStore, Demotion)]) -> Result<()> {
    let mut entries: Entries = plans.iter().flat_map(|(_, p)| p.entries.clone()).collect();
    if plans.len() > 1 {
        crate::hot::partitioned::sort_entries(&mut entries);
    }
    let counters = &plans[0].0.counters;
    // Objects whose keys have no version above the bottom run are merged into it.
    let (for_l0, merged) = super::hot_bottom::merge_into_bottom(db, entries)?;
    counters
        .demoted_into_bottom
        .fetch_add(merged, Ordering::Relaxed);
    let bytes: u64 = for_l0.iter().map(|(k, v)| (k.len() + v.len()) as u64).sum();
    let mut iter = VecIter::new(for_l0);
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
    Ok(())
}

/// Drops installed demotions' objects from their stores (those still at the planned
/// version) and counts the demotion's time since `started` against the first plan's store.
/// The caller holds the flush slot.
fn finish_demotions(
    db: &DbInner,
    plans: Vec<(&HotStore, Demotion)>,
    clears: Clears,
    started: Instant,
) -> Result<()> {
    let first: &HotStore = plans[0].0;
    for (hot, plan) in plans {
        hot.finish_demotion(plan, db.versions.log_number(), clears)?;
    }
    let micros = started.elapsed().as_micros() as u64;
    first
        .counters
        .demotion_micros
        .fetch_add(micros, Ordering::Relaxed);
    Ok(())
}

/// A compaction's input, passed through unchanged, that offers the newest entry of each key
/// it meets for promotion (with a hot store, while `offering`: a compaction into the
/// capacity tier). The offer is the read path's: only keys at the tracker's top clock value,
/// read more often lately than what demotions evict, are queued, and the promotion job
/// checks each against the newest version.
pub(super) struct OfferingIter<'a> {
    inner: &'a mut dyn InternalIterator,
    db: &'a DbInner,
    offering: bool,
    /// The user key of the last entry offered or passed over.
    last_key: Vec<u8>,
    /// Candidates met, offered only by [`OfferingIter::offer`] once the compaction's outputs
    /// are installed: the job keeps a candidate only if its newest version is below L0, which
    /// it is not until then (offered at once, a job running mid-compaction dropped them all).
    met: Vec<(Vec<u8>, SeqNo, Vec<u8>)>,
}

impl<'a> OfferingIter<'a> {
    /// Wraps `inner`; offers nothing unless `offering` and the database has a hot store.
    pub fn new(db: &'a DbInner, inner: &'a mut dyn InternalIterator, offering: bool) -> Self {
        let offering = offering && db.hot.is_some() && db.vlog.is_none();
        OfferingIter {
            inner,
            db,
            offering,
            last_key: Vec::new(),
            met: Vec::new(),
        }
    }

    /// Offers the candidates met, after the compaction installed its outputs.
    pub fn offer(self) {
        let Some(hot) = self.db.hot.as_ref() else {
            return;
        };
        let mut ready = false;
        for (key, seq, value) in &self.met {
            ready |= hot.offer_promotion(key, *seq, value);
        }
        if ready {
            self.db.bg_cv.notify_all();
        }
    }

    /// Offers the current entry if it is the first (newest) of its user key.
    fn observe(&mut self) {
        let Some(hot) = self.db.hot.as_ref().filter(|_| self.offering) else {
            return;
        };
        if !self.inner.valid() || !hot.promoting() {
            return;
        }
        let Some(p) = key::parse_internal_key(self.inner.key()) else {
            return;
        };
        if p.user_key == self.last_key.as_slice() {
            return;
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(p.user_key);
        if p.kind == ValueKind::Value
            && self.met.len() < crate::hot::promote::MAX_QUEUED
            && hot.wants_promotion(p.user_key, self.inner.value())
        {
            self.met
                .push((p.user_key.to_vec(), p.seq, self.inner.value().to_vec()));
        }
    }
}

impl InternalIterator for OfferingIter<'_> {
    fn valid(&self) -> bool {
        self.inner.valid()
    }
    fn seek_to_first(&mut self) {
        self.inner.seek_to_first();
        self.observe();
    }
    fn seek_to_last(&mut self) {
        self.inner.seek_to_last();
    }
    fn seek(&mut self, target: &[u8]) {
        self.inner.seek(target);
        self.observe();
    }
    fn next(&mut self) {
        self.inner.next();
        self.observe();
    }
    fn prev(&mut self) {
        self.inner.prev();
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
    fn status(&self) -> Result<()> {
        self.inner.status()
    }
}
