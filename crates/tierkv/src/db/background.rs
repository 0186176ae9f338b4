//! Background work: memtable flushes, compactions and deletion of obsolete files.
//!
//! `background_threads` workers wait on `bg_cv`. Flushes go first (one at a time, oldest
//! memtable first, so L0 stays ordered); up to `background_threads - 1` workers (at least one)
//! run compactions whose inputs are disjoint (files in `busy_files`), so with two or more
//! workers one is always free for a flush. Migrations take a compaction slot; a replica copy
//! (`replica`) takes any idle worker and stops for a waiting flush. A failed job sets the
//! sticky error: writes stop until the database is reopened, reads go on. A job that panics
//! fails the same way ([`Error::BackgroundPanic`]). A flush, compaction or migration that ran
//! out of space may be run again in place by [`resume`] once there is room.

use super::iter::level_cursors;
use super::DbInner;
use crate::compaction::{self, CompactionTask, EntryFilter};
use crate::error::{Error, Result};
use crate::iter::{InternalIterator, MergingIter};
use crate::key;
use crate::memtable::MemTable;
use crate::options::Options;
use crate::placement::{self, policy};
use crate::sst::TableBuilder;
use crate::stats::Counters;
use crate::tier::{self, FileKind, Reservation, TierId, Tiers, WriteKind};
use crate::version::{FileMeta, VersionEdit, VersionSet};
use std::sync::Arc;

/// A flush's entries ([`OutputCtx::flush_source`]).
pub(super) struct FlushSource {
    /// The memtable's iterator, or (on-flush separation) one over its entries with their
    /// large values moved.
    entries: Box<dyn InternalIterator>,
    /// The separation's appends (garbage collection leaves those files alone until this
    /// drops).
    in_flight: Vec<crate::vlog::InFlight>,
}

impl FlushSource {
    /// After a failed MANIFEST write, which may still have named the flush's tables: their
    /// value-log records stay in flight for as long as the database is open, so collection,
    /// which checks liveness against the installed version only, never takes their files.
    pub fn keep_in_flight(&mut self) {
        std::mem::forget(std::mem::take(&mut self.in_flight));
    }

    /// The entries, in internal-key order.
    pub fn iter(&mut self) -> &mut dyn InternalIterator {
        self.entries.as_mut()
    }
}

/// What a table writer needs; usable before the database is fully open (recovery).
pub(super) struct OutputCtx<'a> {
    pub opts: &'a Options,
    pub tiers: &'a Tiers,
    pub versions: &'a VersionSet,
    pub placer: &'a placement::Placer,
    /// The open database's tables and replicas (`None` during recovery, which has none).
    pub replicas: Option<&'a super::table_cache::TableCache>,
    /// SPLIT VALUES: the value log, told of each pointer a flush or compaction drops.
    pub vlog: Option<&'a crate::vlog::ValueLog>,
}

impl OutputCtx<'_> {
    /// The entries a flush of `mem` writes: the memtable's own, or with on-flush value
    /// separation a copy whose large values the flush keeps are in the value log (synced) and
    /// replaced by pointers. Hold it until the flush's tables are installed.
    pub fn flush_source(
        &self,
        mem: &Arc<MemTable>,
        oldest_snapshot: key::SeqNo,
    ) -> Result<FlushSource> {
        Ok(match self.vlog {
            Some(vlog) if vlog.separates_on_flush() => {
                let (entries, in_flight) =
                    vlog.separate_for_flush(&mut mem.iter(), oldest_snapshot)?;
                FlushSource {
                    entries: Box::new(crate::hot::VecIter::new(entries)),
                    in_flight,
                }
            }
            _ => FlushSource {
                entries: Box::new(mem.iter()),
                in_flight: Vec::new(),
            },
        })
    }

    /// The MANIFEST record of a new table at `level`.
    pub fn record(&self, level: usize, meta: &FileMeta) -> crate::version::NewFile {
        meta.to_new_file(level, &self.tiers.get(meta.tier).name)
    }

    /// Reserves room for a new table of `size` bytes written by `kind` on the first tier at or
    /// after `preferred` with room for it ([`Tiers::place`]). A table that fits tier 0's
    /// budget but for replicas takes their room first: they give it back at once.
    pub fn place(&self, preferred: TierId, size: u64, kind: WriteKind) -> Result<Reservation> {
        if let (true, Some(cache)) = (preferred.is_fast(), self.replicas) {
            let shortfall = self.tiers.replica_shortfall(size, kind);
            if shortfall > 0 {
                super::replica::drop_coldest(cache, shortfall);
            }
        }
        self.tiers.place(preferred, size, kind)
    }

    /// What the upper-levels-first rule measures against ([`policy::FastBudget`]): tier 0's
    /// budget for tables other than flushes', if there is a slower tier for deep tables.
    pub fn fast_budget(&self) -> policy::FastBudget {
        let budget = (self.tiers.count() > 1)
            .then(|| self.tiers.table_budget(TierId::FAST, WriteKind::Compaction));
        policy::FastBudget {
            budget,
            table_size: self.opts.compaction.target_file_size,
        }
    }
}

/// A table written by a flush or compaction, with the tier space reserved for it until the
/// version that lists it is installed.
pub(super) struct TableOutput {
    pub meta: FileMeta,
    _reservation: Reservation,
}

enum Job {
    Flush(Arc<MemTable>),
    Compaction(CompactionTask),
    Migration(placement::migrate::Migration),
    Replica(super::replica::ReplicaJob),
    /// A round of value-log garbage collection (`db::vlog_gc`).
    ValueGc,
    /// Copies popular objects from the LSM into the hot store; holds the flush slot.
    Promotion,
    /// Demotes from a hot store past its watermark (`hot::demotion_job`); holds the flush
    /// slot only while it plans and while it drops the demoted objects from the store.
    Demotion,
}

impl Job {
    /// The job's kind, as a panic's cause names it.
    fn name(&self) -> &'static str {
        match self {
            Job::Flush(_) => "flush",
            Job::Compaction(_) => "compaction",
            Job::Migration(_) => "migration",
            Job::Replica(_) => "replica copy",
            Job::ValueGc => "value-log collection",
            Job::Promotion => "hot-store promotion",
            Job::Demotion => "hot-store demotion",
        }
    }

    /// Whether running out of space in this job leaves nothing in doubt, so that
    /// [`resume`] may run it again: a flush, compaction or migration removes the tables it
    /// was writing when it fails, and its inputs are untouched until its MANIFEST edit. Not
    /// the hot store's or the value log's writers, whose files a failed write may leave
    /// part-written; a flush feeds the hot store when there is one.
    fn may_resume(&self, db: &DbInner) -> bool {
        match self {
            Job::Flush(_) => db.hot.is_none(),
            Job::Compaction(_) | Job::Migration(_) => true,
            Job::Replica(_) | Job::ValueGc | Job::Promotion | Job::Demotion => false,
        }
    }
}

/// The loop of one background thread.
pub(super) fn worker(db: &DbInner) {
    while let Some(job) = next_job(db) {
        let result = run_caught(job.name(), || match &job {
            Job::Flush(mem) => flush_memtable(db, mem),
            Job::Compaction(task) => run_compaction(db, task),
            Job::Migration(m) => super::migrate::run(db, m),
            Job::Replica(r) => super::replica::run(db, r),
            Job::ValueGc => db.vlog.as_ref().map_or(Ok(()), |v| db.vlog_gc_round(v)),
            Job::Promotion => super::hot::promote(db),
            Job::Demotion => super::hot::demotion_job(db, Held::claimed_flush_slot(db)),
        });
        finish_job(db, &job, result);
    }
}

/// Runs one job, turning a panic into [`Error::BackgroundPanic`] naming `job`.
///
/// Why: a job that unwinds past its worker never reaches `finish_job`, so its slot stays
/// taken, no error is recorded and whoever waits for it (a flush, a stalled writer) waits for
/// ever. Caught here, the panic becomes the sticky error, which wakes every waiter.
/// `AssertUnwindSafe` holds because the locks are `parking_lot`'s (released on unwind, never
/// poisoned) and the stop keeps every later write and job off whatever the job left half
/// done; reads only see installed versions, which a job replaces whole.
fn run_caught(job: &'static str, run: impl FnOnce() -> Result<()>) -> Result<()> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(run)).unwrap_or_else(|payload| {
        Err(Error::BackgroundPanic {
            job,
            message: panic_message(payload.as_ref()),
        })
    })
}

/// A panic payload's text: the message of `panic!` with a literal or with arguments.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with a non-string payload".to_string()
    }
}

fn next_job(db: &DbInner) -> Option<Job> {
    let mut state = db.state.lock();
    loop {
        if state.shutting_down {
            return None;
        }
        if state.bg_error.is_none() {
            if !state.flush_running {
                // NB: a memtable with parallel-WAL writes not yet visible waits for them.
                let ready = state.imm.front().filter(|m| !m.has_pending_writes());
                if let Some(mem) = ready.cloned() {
                    state.flush_running = true;
                    // NB: a flush never yields the CPU: while it runs, the memtables are what
                    // writers wait on, and at a lowered priority behind busy clients a flush
                    // took long enough for them to fill.
                    set_thread_nice(0);
                    return Some(Job::Flush(mem));
                }
                // Hot tier hooks: a demotion past the store's watermark, then promotions
                // (which write the store, whose only writer is the flush slot's holder).
                if state.demotion_wanted && !state.demotion_running {
                    state.demotion_wanted = false;
                    state.demotion_running = true;
                    state.flush_running = true;
                    return Some(Job::Demotion);
                }
                if !state.demotion_running && db.hot_promotion_due() {
                    state.flush_running = true;
                    return Some(Job::Promotion);
                }
            }
            // NB: with two or more workers one is always left for flushes, so a flush never
            // waits behind long compactions while writers stall on full memtables.
            let compaction_slots = db
                .opts
                .compaction
                .background_threads
                .saturating_sub(1)
                .max(1);
            let version = db.versions.current();
            yield_to_foreground(db, version.levels[0].len());
            // NB: no L0 compaction while a background demotion's table waits (`Held::hold_l0`).
            let picked = (state.compactions_running < compaction_slots)
                .then(|| compaction::pick(&version, &db.opts, &state.busy_files))
                .flatten()
                .filter(|t| t.level > 0 || !state.l0_held);
            if let Some(task) = picked {
                state.claim(&task);
                return Some(Job::Compaction(task));
            }
            if state.compactions_running < compaction_slots {
                if let Some(m) = super::migrate::pick(db, &mut state, &version) {
                    return Some(Job::Migration(m));
                }
            }
            // NB: any idle worker, compaction slot or not: a replica copy gives way to a
            // waiting flush within one piece (see `replica::run`).
            if let Some(r) = super::replica::pick(db, &mut state, &version) {
                return Some(Job::Replica(r));
            }
            if state.compactions_running < compaction_slots && value_gc_due(db, &state, &version) {
                // NB: a round takes a compaction slot, so a worker stays free for flushes.
                state.compactions_running += 1;
                return Some(Job::ValueGc);
            }
        }
        match auto_resume_at(db, &mut state) {
            Some(at) if std::time::Instant::now() >= at => {
                state.auto_resume_failures += 1;
                state.clear_stop();
                db.progress_cv.notify_all();
            }
            Some(at) => {
                db.bg_cv.wait_until(&mut state, at);
            }
            None => db.bg_cv.wait(&mut state),
        }
    }
}

/// With `compaction.auto_resume_ms`, when a worker should retry the resumable stop now in
/// place (`None`: no stop, not resumable, or no retrying): the option's delay after the
/// stop, doubled for each retry in a row that failed again, at most 64 times.
fn auto_resume_at(db: &DbInner, state: &mut super::State) -> Option<std::time::Instant> {
    let base = db.opts.compaction.auto_resume_ms;
    let resumable = state.bg_error.is_some() && state.stop_resumable;
    if base == 0 || !resumable || db.versions.manifest_failed() {
        return None;
    }
    let backoff = base.saturating_mul(1 << state.auto_resume_failures.min(6));
    Some(*state.auto_resume_at.get_or_insert_with(|| {
        std::time::Instant::now() + std::time::Duration::from_millis(backoff)
    }))
}

/// SPLIT VALUES: whether a worker should run a value-log garbage-collection round now (and
/// claims it): only with a second worker (a round's rewrites may wait for a flush) and L0
/// below the slowdown trigger, and with no memtable waiting for a flush unless the value log
/// is past its space bound ([`gc_may_run`]).
fn value_gc_due(db: &DbInner, state: &super::State, version: &crate::version::Version) -> bool {
    let Some(vlog) = &db.vlog else {
        return false;
    };
    let may = gc_may_run(
        db.opts.compaction.background_threads,
        version.levels[0].len() < db.opts.compaction.l0_slowdown_trigger,
        !state.imm.is_empty(),
        || vlog.space_pressed(),
    );
    may && vlog.gc_wanted(db.value_delete_bar(vlog)) && vlog.gc_claim()
}

/// The pacing of value-log collection: never with one worker (a round's rewrites may wait
/// for a flush only that worker could run) nor with L0 at the slowdown trigger; while a
/// memtable waits for its flush only when `space_pressed` (the log holds more garbage than
/// `vlog_gc_threshold` allows), since a sustained write stream always has one waiting and
/// collection would otherwise never get a turn. A round is bounded (`vlog_gc_round_bytes`)
/// and takes a compaction slot, so the flush worker stays free.
fn gc_may_run(
    workers: usize,
    l0_below_slowdown: bool,
    memtable_waits: bool,
    space_pressed: impl FnOnce() -> bool,
) -> bool {
    workers >= 2 && l0_below_slowdown && (!memtable_waits || space_pressed())
}

/// Foreground priority: while requests flow through the pipeline and L0 is not close to
/// slowing writes, a background thread runs at a lower CPU priority (nice 5), so loggers
/// and workers win the cores; otherwise, and when the foreground is quiet, at normal
/// priority so compaction catches up. Best effort: without the privilege to raise a
/// priority back, it stays lowered, which only matters while the foreground is busy.
fn yield_to_foreground(db: &DbInner, l0_files: usize) {
    let busy = db
        .pipeline
        .foreground_busy
        .load(std::sync::atomic::Ordering::Acquire)
        && l0_files < db.opts.compaction.l0_slowdown_trigger / 2;
    set_thread_nice(if busy { 5 } else { 0 });
}

/// Sets the calling thread's nice value (Linux: `setpriority` with who = 0 names the thread).
fn set_thread_nice(nice: i32) {
    // SAFETY: setpriority on the calling thread (who = 0) only reads its arguments.
    unsafe {
        libc::setpriority(libc::PRIO_PROCESS, 0, nice);
    }
}

fn finish_job(db: &DbInner, job: &Job, result: Result<()>) {
    if let Err(e) = &result {
        let resumable = e.is_no_space() && job.may_resume(db) && !db.versions.manifest_failed();
        db.stop_writes(e, resumable);
    }
    // NB: the files the job made obsolete go before it counts as ended, so that a caller of
    // `wait_for_compactions` finds them gone.
    db.delete_obsolete_files();
    {
        let mut state = db.state.lock();
        match job {
            Job::Flush(_) | Job::Promotion => state.flush_running = false,
            Job::Compaction(task) => state.release(task),
            Job::Migration(m) => {
                state.compactions_running -= 1;
                state.busy_files.remove(&m.file.number);
            }
            Job::Replica(_) => state.replica_running = false,
            // NB: the job released the flush slot itself (`Held`).
            Job::Demotion => state.demotion_running = false,
            Job::ValueGc => {
                state.compactions_running -= 1;
                if let Some(v) = &db.vlog {
                    v.gc_release();
                }
            }
        }
        if result.is_ok() {
            // NB: an automatic retry's backoff starts again once work succeeds.
            state.auto_resume_failures = 0;
        }
    }
    db.open_capacity_tables();
    crate::heap::release_free_heap();
    db.bg_cv.notify_all();
    db.progress_cv.notify_all();
}

/// A flag of `State` held by a job for part of its run: the flush slot (`flush_running`: the
/// hot store's one writer and the flush's turn) or the L0 hold (`l0_held`). Cleared when
/// dropped, on an error or a panic too, and every waiter woken.
pub(super) struct Held<'a> {
    db: &'a DbInner,
    flag: fn(&mut super::State) -> &mut bool,
}

fn flush_slot(state: &mut super::State) -> &mut bool {
    &mut state.flush_running
}

fn l0_hold(state: &mut super::State) -> &mut bool {
    &mut state.l0_held
}

impl<'a> Held<'a> {
    /// The flush slot `next_job` took for the job about to run.
    fn claimed_flush_slot(db: &'a DbInner) -> Held<'a> {
        Held {
            db,
            flag: flush_slot,
        }
    }

    /// Waits until no flush or promotion holds the flush slot, then takes it.
    pub(super) fn acquire_flush_slot(db: &'a DbInner) -> Held<'a> {
        let mut state = db.state.lock();
        while state.flush_running {
            db.progress_cv.wait(&mut state);
        }
        state.flush_running = true;
        Held::claimed_flush_slot(db)
    }

    /// Holds L0 compactions back (`next_job` and manual compactions wait for it).
    pub(super) fn hold_l0(db: &'a DbInner) -> Held<'a> {
        db.state.lock().l0_held = true;
        Held { db, flag: l0_hold }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        *(self.flag)(&mut self.db.state.lock()) = false;
        self.db.bg_cv.notify_all();
        self.db.progress_cv.notify_all();
    }
}

/// Writes the oldest immutable memtable to L0 and drops it from the list.
fn flush_memtable(db: &DbInner, mem: &Arc<MemTable>) -> Result<()> {
    let oldest = db.oldest_snapshot();
    let mut filter = EntryFilter::new(oldest);
    let ctx = db.output_ctx();
    let mut source = ctx.flush_source(mem, oldest)?;
    // Hot tier hook: the hot store takes its objects first; L0 gets the rest.
    let mut hot_rest = super::hot::flush_hot_part(db, source.iter())?;
    let iter: &mut dyn InternalIterator = match hot_rest {
        Some(ref mut rest) => rest,
        None => source.iter(),
    };
    let files = build_tables(
        &ctx,
        iter,
        0,
        &mut filter,
        &|_| false,
        (WriteKind::Flush, mem.approximate_bytes() as u64),
        &mut || db.allocate_output(),
    )?;
    let mut edit = VersionEdit::default();
    for out in &files {
        edit.new_files.push(ctx.record(0, &out.meta));
    }
    edit.log_number = Some({
        let state = db.state.lock();
        state.imm.get(1).unwrap_or(&state.mem).wal_number()
    });
    // NB: if the MANIFEST write fails the outputs stay pending: the MANIFEST may list them.
    if let Err(e) = db.versions.log_and_apply(edit) {
        source.keep_in_flight();
        return Err(e);
    }
    db.clear_pending(files.iter().map(|o| o.meta.number));
    db.state.lock().imm.pop_front();
    // SPLIT VALUES: the tables naming the flush's value-log records are installed, and the
    // memtable holding those values inline is gone: collection's liveness check, which looks
    // in the memtables first, now finds the pointers.
    drop(source);
    db.wal.release_below(db.versions.log_number());
    Counters::add(&db.counters.flushes, 1);
    // Hot tier hook: free what the flush superseded; demote if over budget.
    super::hot::after_flush(db)
}

/// Runs `task` and counts it, with its time, against its output level.
pub(super) fn run_compaction(db: &DbInner, task: &CompactionTask) -> Result<()> {
    let started = std::time::Instant::now();
    // Levels past the counters' end share the last slot.
    let slot = task
        .output_level()
        .min(db.counters.compactions_into.len() - 1);
    Counters::add(&db.counters.compactions_into[slot], 1);
    let result = move_or_merge(db, task, slot);
    let micros = started.elapsed().as_micros() as u64;
    Counters::add(&db.counters.compaction_micros_into[slot], micros);
    result
}

/// A trivial move when possible, otherwise a merge into new tables.
fn move_or_merge(db: &DbInner, task: &CompactionTask, slot: usize) -> Result<()> {
    let out_level = task.output_level();
    let preferred = db.placer.tier_of_level(out_level, db.tiers.count());
    let mut edit = VersionEdit::default();
    let deleted = |level: usize, files: &[Arc<FileMeta>]| {
        files
            .iter()
            .map(move |f| (level, f.number))
            .collect::<Vec<_>>()
    };
    let ctx = db.output_ctx();
    let budget = ctx.fast_budget();
    if policy::is_trivial_move(task, preferred, &db.versions.current(), &budget) {
        edit.deleted_files = deleted(task.level, &task.inputs);
        edit.new_files.push(ctx.record(out_level, &task.inputs[0]));
        Counters::add(&db.counters.trivial_moves, 1);
        return db.versions.log_and_apply(edit).map(|_| ());
    }
    let mut children = level_cursors(&db.table_cache, task.level, &task.inputs, false)?;
    children.extend(level_cursors(
        &db.table_cache,
        out_level,
        &task.next_inputs,
        false,
    )?);
    Counters::add(&db.counters.compaction_read_into[slot], task.input_bytes());
    let mut merged = MergingIter::new(children);
    // Hot tier hook: popular objects a compaction into the capacity tier meets may go back
    // to the hot store.
    // (Not from a merge within L0: a key there has a version in L0, so none is promoted.)
    let offering = !preferred.is_fast() && !task.within_l0;
    let mut merged = super::hot::OfferingIter::new(db, &mut merged, offering);
    // NB: only the deeper levels, not the whole version: a version held here would keep the
    // next-level inputs that chunks already replaced on disk until the compaction ends.
    let deeper = db.versions.current().deeper_than(out_level);
    // NB: a merge within L0 keeps every tombstone: older L0 tables may hold what it hides.
    let is_bottom = |uk: &[u8]| !task.within_l0 && deeper.is_bottom_for_key(out_level, uk);
    let mut filter = EntryFilter::new(db.oldest_snapshot());
    let mut install = |consumed: &[Arc<FileMeta>], outputs: Vec<TableOutput>| {
        let mut edit = VersionEdit {
            deleted_files: deleted(out_level, consumed),
            ..VersionEdit::default()
        };
        install_outputs(db, &mut edit, out_level, slot, &outputs)?;
        Counters::add(&db.counters.compaction_chunks, 1);
        db.delete_obsolete_files();
        Ok(())
    };
    let mut allocate = || db.allocate_output();
    let mut sink = TableSink::new(
        &ctx,
        out_level,
        (WriteKind::Compaction, task.input_bytes()),
        &mut allocate,
    );
    if task.next_inputs.len() > 1 {
        sink.chunks = Some(Chunks::new(&task.next_inputs, &mut install));
    }
    // A merge within L0 writes one table, as each of its inputs is one (see
    // `compaction::within_l0_task`).
    sink.one_table = task.within_l0;
    let mut files = sink.run(&mut merged, &mut filter, &is_bottom)?;
    if let Some(l0_seq) = task.merged_l0_seq() {
        files.iter_mut().for_each(|f| f.meta.l0_seq = l0_seq);
    }
    let installed = sink.chunks.as_ref().map_or(0, |c| c.installed);
    drop(sink);
    edit.deleted_files = deleted(task.level, &task.inputs);
    edit.deleted_files
        .extend(deleted(out_level, &task.next_inputs[installed..]));
    install_outputs(db, &mut edit, out_level, slot, &files)?;
    merged.offer();
    Ok(())
}

/// Adds `outputs` at `level` to `edit` and applies it; `slot` is the level's counter slot.
fn install_outputs(
    db: &DbInner,
    edit: &mut VersionEdit,
    level: usize,
    slot: usize,
    outputs: &[TableOutput],
) -> Result<()> {
    let ctx = db.output_ctx();
    edit.new_files
        .extend(outputs.iter().map(|out| ctx.record(level, &out.meta)));
    let written = outputs.iter().map(|o| o.meta.size).sum();
    Counters::add(&db.counters.compaction_written_into[slot], written);
    // NB: if the MANIFEST write fails the outputs stay pending: the MANIFEST may list them.
    db.versions.log_and_apply(std::mem::take(edit))?;
    db.clear_pending(outputs.iter().map(|o| o.meta.number));
    Ok(())
}

/// Writes the entries of `iter` that `filter` keeps into tables for `level`, cutting a new
/// table at `target_file_size` (never between two entries of one user key). `(kind,
/// input_bytes)`: what writes them, and the bytes of its input (a memtable's, or the input
/// tables'), which bounds each table's size estimate. On error, the partial tables are
/// removed.
pub(super) fn build_tables(
    ctx: &OutputCtx<'_>,
    iter: &mut dyn InternalIterator,
    level: usize,
    filter: &mut EntryFilter,
    is_bottom: &dyn Fn(&[u8]) -> bool,
    job: (WriteKind, u64),
    allocate: &mut dyn FnMut() -> u64,
) -> Result<Vec<TableOutput>> {
    TableSink::new(ctx, level, job, allocate).run(iter, filter, is_bottom)
}

/// What a compaction installs at a chunk boundary: the next-level inputs it has consumed since
/// the last chunk, and the outputs that replace them.
type InstallChunk<'a> = dyn FnMut(&[Arc<FileMeta>], Vec<TableOutput>) -> Result<()> + 'a;

/// A compaction that installs its outputs as it goes, so that the tier space it needs beyond
/// its inputs is about one chunk, not a whole copy of the next level's inputs (an L0 -> L1
/// compaction rewrites all of L1). Each time the merge passes the end of a next-level input,
/// the outputs finished so far replace the next-level inputs consumed so far, in one MANIFEST
/// edit; the source level's inputs go with the last edit.
///
/// NB: why this is safe: outputs cut before the first key past an input's end do not overlap
/// the inputs left (a level's files do not overlap), so the level stays sorted. Until the last
/// edit the source inputs still hold the newest entry of every key they have, and they are
/// read first, so readers see what they saw before. After a crash between edits, the source
/// inputs and the installed outputs hold identical entries; the next compaction drops the
/// duplicates ([`EntryFilter::keep`]).
struct Chunks<'a> {
    /// The next level's inputs, in key order.
    next_inputs: &'a [Arc<FileMeta>],
    /// Inputs before this index are consumed: the merge passed their last key.
    consumed: usize,
    /// Inputs before this index are replaced by an installed edit.
    installed: usize,
    install: &'a mut InstallChunk<'a>,
}

impl<'a> Chunks<'a> {
    fn new(next_inputs: &'a [Arc<FileMeta>], install: &'a mut InstallChunk<'a>) -> Self {
        Chunks {
            next_inputs,
            consumed: 0,
            installed: 0,
            install,
        }
    }

    /// Notes that the merge reached `user_key`; true if that passed the end of an input.
    fn passes(&mut self, user_key: &[u8]) -> bool {
        let before = self.consumed;
        while self
            .next_inputs
            .get(self.consumed)
            .is_some_and(|f| f.largest_user() < user_key)
        {
            self.consumed += 1;
        }
        self.consumed > before
    }
}

/// Where `build_tables` writes: the tables finished so far and every file it created.
struct TableSink<'a, 'b> {
    ctx: &'a OutputCtx<'b>,
    level: usize,
    kind: WriteKind,
    input_bytes: u64,
    allocate: &'a mut dyn FnMut() -> u64,
    created: Vec<std::path::PathBuf>,
    done: Vec<TableOutput>,
    chunks: Option<Chunks<'a>>,
    /// Writes one table, never cut at `target_file_size`.
    one_table: bool,
}

struct OpenTable {
    builder: TableBuilder,
    number: u64,
    reservation: Reservation,
}

impl<'a, 'b> TableSink<'a, 'b> {
    /// `(kind, input_bytes)`: what writes the tables, and the bytes of its input (a
    /// memtable's, or the input tables'), which bounds each table's size estimate.
    fn new(
        ctx: &'a OutputCtx<'b>,
        level: usize,
        (kind, input_bytes): (WriteKind, u64),
        allocate: &'a mut dyn FnMut() -> u64,
    ) -> Self {
        TableSink {
            ctx,
            level,
            kind,
            input_bytes,
            allocate,
            created: Vec::new(),
            done: Vec::new(),
            chunks: None,
            one_table: false,
        }
    }

    /// Writes everything and returns the tables not installed by chunks; on error removes
    /// every file it created and did not install, the partly written one included.
    fn run(
        &mut self,
        iter: &mut dyn InternalIterator,
        filter: &mut EntryFilter,
        is_bottom: &dyn Fn(&[u8]) -> bool,
    ) -> Result<Vec<TableOutput>> {
        match self.write_all(iter, filter, is_bottom) {
            Ok(()) => Ok(std::mem::take(&mut self.done)),
            Err(e) => {
                for path in &self.created {
                    let _ = self.ctx.tiers.fs().remove_file(path);
                }
                Err(e)
            }
        }
    }

    fn write_all(
        &mut self,
        iter: &mut dyn InternalIterator,
        filter: &mut EntryFilter,
        is_bottom: &dyn Fn(&[u8]) -> bool,
    ) -> Result<()> {
        let target = if self.one_table {
            u64::MAX
        } else {
            self.ctx.opts.compaction.target_file_size
        };
        let mut current: Option<OpenTable> = None;
        iter.seek_to_first();
        while iter.valid() {
            let ikey = iter.key();
            let new_key = filter.is_new_key(key::user_key(ikey));
            let size = current.as_ref().map(|t| t.builder.estimated_file_size());
            let chunk_ends = new_key
                && self
                    .chunks
                    .as_mut()
                    .is_some_and(|c| c.passes(key::user_key(ikey)))
                // NB: a chunk boundary cuts a table only once it has a quarter of the target
                // size, so boundaries close to a size cut leave no tiny tables; the chunk then
                // ends at the next boundary instead.
                && size.is_none_or(|s| s >= target / 4);
            if chunk_ends {
                if let Some(t) = current.take() {
                    self.done.push(finish_table(self.ctx, t)?);
                }
                self.install_chunk()?;
            } else if new_key && size.is_some_and(|s| s >= target) {
                let t = current.take().expect("open table");
                self.done.push(finish_table(self.ctx, t)?);
            }
            if filter.keep(ikey, is_bottom) {
                if current.is_none() {
                    current = Some(self.start_table()?);
                }
                let t = current.as_mut().expect("open table");
                t.builder.add(ikey, iter.value())?;
            } else if let Some(vlog) = self.ctx.vlog {
                // SPLIT VALUES: a dropped pointer's record is garbage.
                vlog.note_dropped(iter.value());
            }
            iter.next();
        }
        iter.status()?;
        if let Some(t) = current {
            if t.builder.num_entries() > 0 {
                self.done.push(finish_table(self.ctx, t)?);
            } else {
                t.builder.abandon();
            }
        }
        Ok(())
    }

    /// Installs the finished tables in place of the consumed next-level inputs.
    fn install_chunk(&mut self) -> Result<()> {
        let Some(chunks) = self.chunks.as_mut() else {
            return Ok(());
        };
        let consumed = &chunks.next_inputs[chunks.installed..chunks.consumed];
        if consumed.is_empty() && self.done.is_empty() {
            return Ok(());
        }
        let outputs = std::mem::take(&mut self.done);
        // NB: before the edit: once it may be in the MANIFEST, an error must not remove them.
        let tiers = self.ctx.tiers;
        let paths: Vec<_> = outputs
            .iter()
            .map(|o| tiers.path(o.meta.tier, FileKind::Table, o.meta.number))
            .collect();
        self.created.retain(|p| !paths.contains(p));
        (chunks.install)(consumed, outputs)?;
        chunks.installed = chunks.consumed;
        Ok(())
    }

    fn start_table(&mut self) -> Result<OpenTable> {
        let ctx = self.ctx;
        let preferred = ctx.placer.tier_for_new_table(self.level, ctx.tiers.count());
        let estimate = policy::output_size_estimate(
            ctx.opts.compaction.target_file_size,
            ctx.opts.memtable.write_buffer_size as u64,
            self.input_bytes,
        );
        let target = policy::output_tier(
            preferred,
            (&ctx.versions.current(), self.level),
            estimate,
            self.waiting_on_fast(),
            &ctx.fast_budget(),
        );
        let reservation = ctx.place(target, estimate, self.kind)?;
        let tier = reservation.tier();
        let number = (self.allocate)();
        let path = ctx.tiers.path(tier, FileKind::Table, number);
        self.created.push(path.clone());
        let lifetime = crate::env::Lifetime::for_level(self.level);
        let file = ctx
            .tiers
            .create(tier, &path, self.kind, 256 << 10, lifetime)?;
        Ok(OpenTable {
            builder: TableBuilder::new(file, ctx.opts.table.clone()),
            number,
            reservation,
        })
    }

    /// Bytes of this job's tables on tier 0 not yet installed: they count against the
    /// allowance of the next ([`policy::output_tier`]).
    fn waiting_on_fast(&self) -> u64 {
        self.done
            .iter()
            .filter(|o| o.meta.tier.is_fast())
            .map(|o| o.meta.size)
            .sum()
    }
}

fn finish_table(ctx: &OutputCtx<'_>, mut t: OpenTable) -> Result<TableOutput> {
    let props = t.builder.finish()?;
    let tier = t.reservation.tier();
    ctx.tiers.fs().sync_dir(&ctx.tiers.get(tier).dir)?;
    t.reservation.resize(props.file_size);
    let meta = FileMeta {
        number: t.number,
        tier,
        size: props.file_size,
        smallest: props.smallest_key.clone(),
        largest: props.largest_key.clone(),
        smallest_seq: props.smallest_seq,
        largest_seq: props.largest_seq,
        l0_seq: props.largest_seq,
        num_entries: props.num_entries,
        num_deletions: props.num_deletions,
    };
    Ok(TableOutput {
        meta,
        _reservation: t.reservation,
    })
}

/// Waits until no flush or compaction runs and none is needed.
pub(super) fn wait_idle(db: &DbInner) -> Result<()> {
    let mut state = db.state.lock();
    loop {
        if let Some(e) = &state.bg_error {
            return Err(e.duplicate());
        }
        let busy = !state.imm.is_empty()
            || state.flush_running
            || state.compactions_running > 0
            || state.demotion_wanted
            || state.demotion_running;
        let needed =
            || compaction::pick(&db.versions.current(), &db.opts, &state.busy_files).is_some();
        if db.opts.read_only || state.shutting_down || (!busy && !needed()) {
            return Ok(());
        }
        db.bg_cv.notify_all();
        db.progress_cv
            .wait_for(&mut state, std::time::Duration::from_millis(100));
    }
}

/// See [`crate::Db::resume`]: clears a stop that [`Job::may_resume`] allowed and waits for
/// the work it stopped to run again.
pub(super) fn resume(db: &DbInner) -> Result<()> {
    {
        let mut state = db.state.lock();
        let Some(cause) = &state.bg_error else {
            return Ok(());
        };
        // NB: the MANIFEST is checked again: a later job may have failed to write it after
        // the stop was recorded.
        if !state.stop_resumable || db.versions.manifest_failed() {
            return Err(Error::stopped(cause));
        }
        state.clear_stop();
    }
    db.bg_cv.notify_all();
    db.progress_cv.notify_all();
    // The memtables that waited go first (`next_job`), then whatever compaction the tree
    // needs; a job that fails again stops writes again, and says why.
    wait_idle(db).map_err(|e| Error::stopped(&e))
}

/// Compacts `[begin, end]` level by level down to the deepest level holding data there.
pub(super) fn compact_range(db: &DbInner, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
    let version = db.versions.current();
    let deepest = (0..version.levels.len())
        .rev()
        .find(|&l| !version.overlapping(l, begin, end).is_empty());
    let Some(deepest) = deepest else {
        return Ok(());
    };
    // Data only in L0 still moves down a level, as RocksDB's CompactRange does.
    let deepest = deepest.max(1);
    for level in 0..deepest {
        let Some(task) = claim_manual_task(db, level, begin, end)? else {
            continue;
        };
        let result = run_caught("compaction", || run_compaction(db, &task));
        finish_job(
            db,
            &Job::Compaction(task),
            result.as_ref().map(|_| ()).map_err(Error::duplicate),
        );
        result?;
    }
    Ok(())
}

/// Waits until the manual task's files are free, then marks them busy.
fn claim_manual_task(
    db: &DbInner,
    level: usize,
    begin: Option<&[u8]>,
    end: Option<&[u8]>,
) -> Result<Option<CompactionTask>> {
    let mut state = db.state.lock();
    loop {
        db.check_writable(&state)?;
        let version = db.versions.current();
        let Some(task) = compaction::manual_task(&version, level, begin, end) else {
            return Ok(None);
        };
        let held = level == 0 && state.l0_held;
        if !held
            && task
                .all_inputs()
                .all(|f| !state.busy_files.contains(&f.number))
        {
            state.claim(&task);
            return Ok(Some(task));
        }
        db.progress_cv.wait(&mut state);
    }
}

impl super::State {
    /// Marks a compaction's inputs busy and counts it as running.
    fn claim(&mut self, task: &CompactionTask) {
        self.busy_files.extend(task.all_inputs().map(|f| f.number));
        self.compactions_running += 1;
    }

    /// Clears a resumable stop: writes are taken again and workers pick jobs again.
    fn clear_stop(&mut self) {
        self.bg_error = None;
        self.stop_resumable = false;
        self.auto_resume_at = None;
    }

    /// Undoes [`Self::claim`] when the compaction ends.
    fn release(&mut self, task: &CompactionTask) {
        self.compactions_running -= 1;
        for f in task.all_inputs() {
            self.busy_files.remove(&f.number);
        }
    }
}

impl DbInner {
    pub(super) fn output_ctx(&self) -> OutputCtx<'_> {
        OutputCtx {
            opts: &self.opts,
            tiers: &self.tiers,
            versions: &self.versions,
            placer: &self.placer,
            replicas: Some(&self.table_cache),
            vlog: self.vlog.as_deref(),
        }
    }

    /// The sequence below which no reader can see a difference between versions of a key.
    pub(super) fn oldest_snapshot(&self) -> key::SeqNo {
        self.snapshots.oldest(|| self.versions.last_sequence())
    }

    /// Allocates a table number and marks it pending, under one lock, so that the obsolete-file
    /// scan sees every number either as pending or as at/after its `next_file_number` snapshot.
    pub(super) fn allocate_output(&self) -> u64 {
        let mut state = self.state.lock();
        let number = self.versions.new_file_number();
        state.pending_outputs.insert(number);
        number
    }

    pub(super) fn clear_pending(&self, numbers: impl Iterator<Item = u64>) {
        let mut state = self.state.lock();
        for n in numbers {
            state.pending_outputs.remove(&n);
        }
    }

    /// Wakes the workers (after a memtable switch, or at open).
    pub(super) fn maybe_schedule(&self) {
        self.bg_cv.notify_all();
    }

    /// Deletes tables no live version lists, WALs below the log number and old MANIFESTs.
    /// Deletes nothing once writes have stopped on an error: after a failed MANIFEST write the
    /// files the MANIFEST lists are unknown until reopen.
    pub(super) fn delete_obsolete_files(&self) {
        if self.opts.read_only || self.state.lock().bg_error.is_some() {
            return;
        }
        // NB: pending outputs are read before the live set. An output leaves `pending` only
        // after its version is installed, so it is always in one of the two; numbers allocated
        // after this snapshot are at or above `next_number`.
        let (pending, live_wals, next_number) = {
            let state = self.state.lock();
            let next_number = self.versions.next_file_number();
            let mut wals: Vec<u64> = state.imm.iter().map(|m| m.wal_number()).collect();
            wals.push(state.mem.wal_number());
            (state.pending_outputs.clone(), wals, next_number)
        };
        let live_tables = self.versions.live_tables();
        let log_number = self.versions.log_number();
        let manifest = self.versions.manifest_number();
        for (t, tier) in self.tiers.iter() {
            let Ok(names) = self.tiers.fs().list_dir(&tier.dir) else {
                continue;
            };
            for name in names {
                let obsolete = match tier::parse_file_name(&name) {
                    // NB: by tier and number: a leftover copy never shadows a live table.
                    Some((FileKind::Table, n)) => {
                        n < next_number && !live_tables.contains(&(t, n)) && !pending.contains(&n)
                    }
                    Some((FileKind::Wal, n)) => {
                        t.is_fast() && n < log_number && !live_wals.contains(&n)
                    }
                    Some((FileKind::Manifest, n)) => t.is_fast() && manifest.is_some_and(|m| n < m),
                    // NB: a registered replica is being copied or read; no other is wanted.
                    Some((FileKind::Replica, n)) => !self.table_cache.has_replica(n),
                    None => false,
                };
                if obsolete {
                    if let Some((FileKind::Table, n)) = tier::parse_file_name(&name) {
                        self.table_cache.evict(n);
                    }
                    let _ = self.tiers.fs().remove_file(&tier.dir.join(&name));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_waits_for_flushes_unless_the_log_is_past_its_space_bound() {
        assert!(gc_may_run(2, true, false, || false));
        assert!(!gc_may_run(2, true, true, || false), "a memtable waits");
        assert!(gc_may_run(2, true, true, || true), "past the space bound");
        assert!(!gc_may_run(1, true, false, || true), "one worker");
        assert!(
            !gc_may_run(4, false, false, || true),
            "L0 at the slowdown trigger"
        );
    }
}
