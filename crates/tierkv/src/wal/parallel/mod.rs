//! `wal = "parallel"`: SpanDB's parallel WAL. The area's format is [`area`]'s; this module
//! is the write machinery over it.
//!
//! Stages and who serves them:
//! - **Admission** (the caller, under `admit`): makes room (memtable and page-group switches,
//!   stalls, through the host), assigns sequence numbers, reserves the write's worst-case pages
//!   in the active group, registers it with the tracker and queues it for logging. Taking the
//!   sequence number and queueing happen under one lock, so the log queue is in sequence order.
//! - **Logging** (loggers, 1..`wal_loggers` active): a logger takes everything queued for one
//!   group, packs it into as few pages as possible, claims the pages with one `fetch_add`
//!   (under the queue lock, so page order is sequence order), and submits the run. With
//!   io_uring up to `wal_inflight` runs per logger are in flight.
//! - **Apply**: the logger inserts the run's batches into their memtable while the run's I/O
//!   is in flight. Entries above the visible sequence are invisible to readers, so applying
//!   before the log write completes is safe, and it spares a hand-off to another thread.
//! - **Publish** (the tracker): when a run completes, its writes are done; the visible
//!   sequence advances over the contiguous prefix of done writes, and their requests complete
//!   in sequence order. A synced write completes only when every write before it is durable;
//!   when an earlier write was logged without a sync, the logger issues one covering `fdatasync`.
//!
//! A blocking write that need not be synced logs itself: its caller takes the queued run and
//! writes it to the page cache at once ([`ParallelWal::log_here`]), where handing it to a
//! logger and waiting for it cost two context switches (an unsynced update's median latency
//! was 64 us this way against 5 us with the group WAL, BENCHMARKS.md "Unsynced writes log
//! themselves").
//!
//! The head thread sizes the active loggers by write intensity ([`Wal::tick`]); every idle
//! logger parks on a condition variable.

pub mod area;

pub use area::*;

use super::uring::{IoPath, LogIo};
use super::{LogRoom, ReplayCtx, ReplaySink, Wal, WalHost, WriteRequest};
use crate::batch::WriteBatch;
use crate::env::{AlignedBuf, PositionalFile};
use crate::error::{Error, Result};
use crate::handle::{self, Completer};
use crate::memtable::MemTable;
use crate::options::{Durability, Options};
use crate::stats::Counters;
use crate::tier::{Tiers, WriteKind};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

/// Most bytes of batches one run packs (a single larger batch still goes alone).
const MAX_RUN_BYTES: usize = 256 << 10;
/// How long an idle logger sleeps before looking again.
const IDLE_WAIT: Duration = Duration::from_millis(100);

/// Admission state: owned by whoever holds the `admit` lock.
struct Admit {
    /// Last sequence number assigned.
    last_seq: u64,
    /// The active memtable's page group.
    group: Option<Arc<ActiveGroup>>,
    /// The active memtable (the one `group` logs).
    mem: Option<Arc<MemTable>>,
}

/// A write waiting to be logged.
struct LogEntry {
    seq: u64,
    batch: WriteBatch,
    worst_pages: u64,
    sync: bool,
    group: Arc<ActiveGroup>,
    mem: Arc<MemTable>,
}

/// A write registered with the tracker, in sequence order.
struct Unit {
    first: u64,
    last: u64,
    sync: bool,
    done: bool,
    /// Its pages were written with a durable write.
    durable: bool,
    completer: Option<Completer<()>>,
    mem: Arc<MemTable>,
}

/// Publication state. See the module doc.
#[derive(Default)]
struct Tracker {
    units: VecDeque<Unit>,
    /// Every write at or below this is durable.
    durable: u64,
    /// The first logging failure; every later write fails with it.
    failed: Option<Error>,
}

/// What a logger must do after handing a completion to the tracker.
enum Advance {
    Done,
    /// An earlier write is logged but not durable and blocks a synced one (or an empty
    /// synced write, which logs nothing): sync the area, then cover everything through this
    /// sequence.
    Cover(u64),
}

/// A run in flight.
struct Run {
    entries: Vec<LogEntry>,
    buf: AlignedBuf,
    durable: bool,
}

impl Run {
    /// Inserts the run's batches into their memtables (invisible until published).
    fn apply(&self) {
        for e in &self.entries {
            e.mem.insert_batch(e.seq, &e.batch);
        }
    }
}

/// The area's covering `fdatasync`, run by one logger at a time with a sticky outcome.
///
/// Since Linux 4.13 a write-back error on a file is reported to only one of the syncs that run
/// on it. Two loggers syncing the shared descriptor at once could thus see one failure and one
/// success, and the one that saw success could publish synced writes before the other poisons
/// the log. Serialised, a sync that starts after a failure sees it: the first failure fails
/// every later sync.
struct CoverSync {
    failed: Mutex<Option<Error>>,
}

impl CoverSync {
    fn new() -> Self {
        CoverSync {
            failed: Mutex::new(None),
        }
    }

    /// Syncs `file`, or fails with the first failure any earlier sync met.
    fn sync(&self, file: &dyn PositionalFile) -> Result<()> {
        let mut failed = self.failed.lock();
        if let Some(e) = failed.as_ref() {
            return Err(e.duplicate());
        }
        file.sync().inspect_err(|e| *failed = Some(e.duplicate()))
    }
}

/// The parallel WAL of an open database.
pub(crate) struct ParallelWal {
    area: Area,
    /// Covering syncs of the area (see [`CoverSync`]).
    cover: CoverSync,
    tiers: Arc<Tiers>,
    /// Loggers started (`wal_loggers`); the head thread keeps 1..=this active.
    loggers: usize,
    /// Runs in flight per logger (`wal_inflight`).
    inflight: usize,
    /// Try io_uring for log writes (`wal_io_uring`).
    io_uring: bool,
    admit: Mutex<Admit>,
    logq: Mutex<VecDeque<LogEntry>>,
    /// Wakes active loggers: work queued, or closing.
    logq_cv: Condvar,
    /// Parks loggers the head thread made inactive.
    park_cv: Condvar,
    park: Mutex<()>,
    tracker: Mutex<Tracker>,
    /// Signalled when the visible sequence advances (checked writes wait on it).
    visible_cv: Condvar,
    /// Mirror of `Tracker::durable` for packing page headers without the lock.
    durable_seq: AtomicU64,
    active_loggers: AtomicUsize,
    /// Times a logger found work queued while it had no free in-flight slot.
    saturated: AtomicU64,
    /// 0 unknown, 1 io_uring, 2 pwrite.
    io_path: AtomicU8,
    /// Set at close once requests are drained: loggers exit once no admission is under way,
    /// and later admissions are refused.
    stop: AtomicBool,
    /// Admissions under way (`admit`): a logger does not exit while one may still queue a
    /// write, or a background job writing at close would wait for ever.
    admitting: AtomicUsize,
    /// This WAL, for work deferred to a worker.
    me: Weak<ParallelWal>,
}

/// Removes the area of a database opened in another mode: recovery put what it held into
/// tables.
pub(crate) fn remove_area(tiers: &Tiers) -> Result<()> {
    let area = tiers.fast().dir.join(AREA_FILE);
    if tiers.fs().exists(&area) {
        tiers.fs().remove_file(&area)?;
    }
    Ok(())
}

/// Replays the area's live groups into `sink` (they hold a contiguous history, checked by
/// [`area::recover`]); returns the area's metadata, if there is an area.
pub(crate) fn replay(ctx: &ReplayCtx<'_>, sink: &mut dyn ReplaySink) -> Result<Option<Meta>> {
    let path = ctx.dir.join(AREA_FILE);
    let recovered = recover(ctx.fs, &path, ctx.log_number, ctx.mode)?;
    // NB: colours are memtable numbers; a new memtable must never reuse one still on disk.
    sink.mark_number_used(recovered.max_colour);
    for b in &recovered.batches {
        sink.apply(b.seq, &b.batch)?;
    }
    Ok(recovered.meta)
}

impl ParallelWal {
    /// Opens (or creates) the area on tier 0 after recovery; `last_seq` is the last sequence
    /// recovered, `prev` the area's metadata if it existed.
    pub fn open(
        opts: &Options,
        tiers: &Arc<Tiers>,
        last_seq: u64,
        prev: Option<&Meta>,
    ) -> Result<Arc<ParallelWal>> {
        let layout = Layout {
            groups: opts.wal_groups(),
            group_pages: opts.wal_group_bytes() / PAGE as u64,
        };
        let path = tiers.fast().dir.join(AREA_FILE);
        let area = Area::open(tiers.fs().as_ref(), &path, layout, prev)?;
        tiers.fs().sync_dir(&tiers.fast().dir)?;
        Ok(Arc::new_cyclic(|me| ParallelWal {
            area,
            cover: CoverSync::new(),
            tiers: Arc::clone(tiers),
            loggers: opts.wal.loggers,
            inflight: opts.wal.inflight,
            io_uring: opts.wal.io_uring,
            admit: Mutex::new(Admit {
                last_seq,
                group: None,
                mem: None,
            }),
            logq: Mutex::new(VecDeque::new()),
            logq_cv: Condvar::new(),
            park_cv: Condvar::new(),
            park: Mutex::new(()),
            tracker: Mutex::new(Tracker {
                durable: last_seq,
                ..Tracker::default()
            }),
            visible_cv: Condvar::new(),
            durable_seq: AtomicU64::new(last_seq),
            active_loggers: AtomicUsize::new(1),
            saturated: AtomicU64::new(0),
            io_path: AtomicU8::new(0),
            stop: AtomicBool::new(false),
            admitting: AtomicUsize::new(0),
            me: me.clone(),
        }))
    }

    /// Admits a write: makes room, numbers it, queues it for logging. On an error `done` is
    /// completed with it too. Returns the request and completer back when admission would
    /// have to wait and `may_block` is false.
    #[allow(clippy::type_complexity)]
    fn admit(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'_>,
        done: Completer<()>,
        may_block: bool,
        logs_itself: bool,
    ) -> Result<Option<(Option<WriteBatch>, Completer<()>)>> {
        let mut done = Some(done);
        // NB: SeqCst pairs the count with `stop`: either this admission sees `stop` and is
        // refused, or a logger checking for exit sees it under way and stays.
        self.admitting.fetch_add(1, Ordering::SeqCst);
        let admitted = if self.stop.load(Ordering::SeqCst) {
            Err(Error::Closed("the database is closing".into()))
        } else {
            self.admit_inner(host, req, &mut done, may_block, logs_itself)
        };
        self.admitting.fetch_sub(1, Ordering::SeqCst);
        match admitted {
            Ok(Some(batch)) => Ok(Some((
                batch,
                done.take().expect("not consumed when deferred"),
            ))),
            Ok(None) => Ok(None),
            Err(e) => {
                if let Some(d) = done.take() {
                    d.complete(Err(e.duplicate()));
                }
                Err(e)
            }
        }
    }

    /// See `admit`; takes the completer out of `done` once the write is queued (or
    /// completed). Returns the batch back when admission would wait and `may_block` is false.
    /// With `logs_itself` no logger is woken: the caller logs the queue (`log_here`).
    fn admit_inner(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'_>,
        done: &mut Option<Completer<()>>,
        may_block: bool,
        logs_itself: bool,
    ) -> Result<Option<Option<WriteBatch>>> {
        let bytes = req.user_bytes();
        let WriteRequest {
            durability,
            batch,
            force_switch,
            check,
        } = req;
        let worst = self.worst_pages(batch.as_ref())?;
        let mut admit = self.admit.lock();
        let mut room = AreaRoom {
            wal: self,
            admit: &mut admit,
            worst,
        };
        if !host.make_room(&mut room, force_switch, bytes, may_block)? {
            return Ok(Some(batch));
        }
        if let Some(check) = check {
            self.wait_all_visible(host, admit.last_seq);
            check()?;
        }
        if batch.as_ref().is_none_or(WriteBatch::is_empty) {
            let earlier = admit.last_seq;
            drop(admit);
            if !may_block && self.must_cover(durability, earlier) {
                return Ok(Some(batch));
            }
            self.settle_empty(host, durability, earlier)?;
            if let Some(d) = done.take() {
                d.complete(Ok(()));
            }
            return Ok(None);
        }
        let mut batch = batch.expect("checked above");
        let seq = admit.last_seq + 1;
        let n = batch.len() as u64;
        admit.last_seq += n;
        batch.encode_with_seq(seq);
        let group = Arc::clone(admit.group.as_ref().expect("make_room starts a group"));
        let mem = Arc::clone(admit.mem.as_ref().expect("make_room sets the memtable"));
        let reserved = group.reserve(worst);
        debug_assert!(reserved, "make_room left room in the group");
        let sync = durability == Durability::Sync;
        let mut tracker = self.tracker.lock();
        if let Some(e) = &tracker.failed {
            // NB: the log failed after this write passed `make_room`; it must not be logged
            // after writes that were failed.
            return Err(Error::stopped(e));
        }
        mem.begin_write();
        tracker.units.push_back(Unit {
            first: seq,
            last: seq + n - 1,
            sync,
            done: false,
            durable: false,
            completer: done.take(),
            mem: Arc::clone(&mem),
        });
        drop(tracker);
        self.logq.lock().push_back(LogEntry {
            seq,
            batch,
            worst_pages: worst,
            sync,
            group,
            mem,
        });
        drop(admit);
        if !logs_itself {
            self.logq_cv.notify_one();
        }
        host.note_admitted();
        Ok(None)
    }

    /// True if a write of `durability` that logs nothing must wait for a covering sync: it is
    /// `Sync` and some write through `earlier` is not durable yet.
    fn must_cover(&self, durability: Durability, earlier: u64) -> bool {
        durability == Durability::Sync && self.tracker.lock().durable < earlier
    }

    /// Completes a write that logs nothing. A `Sync` one still promises what any `Sync`
    /// write does, that every earlier write (through `earlier`) is durable, so an application
    /// can make its buffered writes durable without writing anything.
    fn settle_empty(&self, host: &dyn WalHost, durability: Durability, earlier: u64) -> Result<()> {
        if !self.must_cover(durability, earlier) {
            return Ok(());
        }
        // NB: a covering sync makes durable only what was written before it began.
        self.wait_all_visible(host, earlier);
        if let Some(e) = &self.tracker.lock().failed {
            return Err(Error::stopped(e));
        }
        self.cover(host, Advance::Cover(earlier))
    }

    /// Pages `batch` may need at worst; an error if that is more than one page group holds.
    fn worst_pages(&self, batch: Option<&WriteBatch>) -> Result<u64> {
        let group_pages = self.area.layout().group_pages;
        let worst = batch.map_or(0, |b| worst_case_pages(b.encoded_len()));
        if worst > group_pages {
            return Err(Error::invalid(format!(
                "a write batch of {} bytes does not fit one parallel-WAL page group of {} bytes (wal_group_bytes)",
                batch.map_or(0, WriteBatch::encoded_len),
                group_pages * PAGE as u64
            )));
        }
        Ok(worst)
    }

    /// Waits until every write up to `seq` is visible (or the log failed).
    fn wait_all_visible(&self, host: &dyn WalHost, seq: u64) {
        let mut t = self.tracker.lock();
        while host.last_sequence() < seq && t.failed.is_none() {
            self.visible_cv.wait_for(&mut t, Duration::from_millis(10));
        }
    }

    /// Starts a new page group for memtable `mem` (memtable switch). False if every group is
    /// still live.
    fn start_group(&self, admit: &mut Admit, mem: &Arc<MemTable>) -> Result<bool> {
        match self
            .area
            .start_group(mem.wal_number(), admit.last_seq + 1)?
        {
            Some(group) => {
                admit.group = Some(group);
                admit.mem = Some(Arc::clone(mem));
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Takes a run's worth of queued writes (one group) and claims its pages; none if the
    /// first queued write's sequence is above `through`.
    fn take_run(&self, host: &dyn WalHost, through: u64) -> Option<(Run, u64)> {
        let mut q = self.logq.lock();
        let first = q.front().filter(|e| e.seq <= through)?;
        let colour = first.group.colour;
        let mut entries = Vec::new();
        let mut bytes = 0;
        while let Some(e) = q.front() {
            let len = e.batch.encoded_len();
            if e.group.colour != colour || (!entries.is_empty() && bytes + len > MAX_RUN_BYTES) {
                break;
            }
            bytes += len;
            entries.push(q.pop_front().expect("front exists"));
        }
        let pages = run_pages(entries.iter().map(|e| e.batch.encoded_len()));
        let reserved = entries.iter().map(|e| e.worst_pages).sum();
        let group = Arc::clone(&entries[0].group);
        let first_page = group.claim(pages, reserved);
        drop(q);
        let payloads: Vec<&[u8]> = entries.iter().map(|e| e.batch.encoded()).collect();
        let buf = pack_run(&payloads, colour, self.durable_seq.load(Ordering::Acquire));
        let durable = entries.iter().any(|e| e.sync);
        let offset = self.area.layout().page_offset(group.slot, first_page);
        Counters::add(&host.counters().wal_runs, 1);
        Counters::add(&host.counters().wal_pages, pages);
        let tier0 = &self.tiers.fast().counters;
        tier0.written[WriteKind::Wal as usize].fetch_add(pages * PAGE as u64, Ordering::Relaxed);
        Some((
            Run {
                entries,
                buf,
                durable,
            },
            offset,
        ))
    }

    /// Logs on the calling thread every run queued up to the newest write queued now (the
    /// caller's own is among them, unless another thread took it already): each is written
    /// synchronously (to the page cache, or durably if it holds a synced write), then applied
    /// and published as a logger would. Runs are claimed in sequence order whoever takes
    /// them, so this changes nothing of the area's order; and as no logger was woken for the
    /// caller's write, the caller sees it taken before it waits.
    fn log_here(&self, host: &dyn WalHost) {
        let Some(through) = self.logq.lock().back().map(|e| e.seq) else {
            return;
        };
        while let Some((run, offset)) = self.take_run(host, through) {
            let result = self
                .area
                .file()
                .write_at(offset, run.buf.as_slice(), run.durable)
                .map(|()| run.buf.len());
            run.apply();
            self.finish_run(host, run, result, false);
        }
    }

    /// Publishes a completed run (or fails everything after a failed one). With
    /// `abandon_buffer` (the ring broke) the run's buffer is leaked: the kernel may still
    /// read it.
    fn finish_run(
        &self,
        host: &dyn WalHost,
        run: Run,
        result: Result<usize>,
        abandon_buffer: bool,
    ) {
        let Run {
            entries,
            buf,
            durable,
        } = run;
        let result = result.and_then(|n| {
            if n == buf.len() {
                return Ok(());
            }
            let err = std::io::Error::new(std::io::ErrorKind::WriteZero, "short write");
            Err(Error::io("write", self.area.file().path(), err))
        });
        if abandon_buffer {
            std::mem::forget(buf);
        }
        if let Err(e) = result {
            return self.fail_log(host, &e);
        }
        let advance = self.publish(host, |t| {
            for e in &entries {
                if let Ok(i) = t.units.binary_search_by_key(&e.seq, |u| u.first) {
                    t.units[i].done = true;
                    t.units[i].durable = durable;
                }
            }
        });
        // NB: a failed sync has failed every waiting write already (`fail_log`).
        let _ = self.cover(host, advance);
    }

    /// Issues covering syncs of the area for as long as `advance` asks for one, publishing
    /// what each makes durable; a failed sync fails the log.
    fn cover(&self, host: &dyn WalHost, mut advance: Advance) -> Result<()> {
        while let Advance::Cover(through) = advance {
            Counters::add(&host.counters().wal_cover_syncs, 1);
            if let Err(e) = self.cover.sync(self.area.file().as_ref()) {
                self.fail_log(host, &e);
                return Err(e);
            }
            advance = self.publish(host, |t| t.durable = t.durable.max(through));
        }
        Ok(())
    }

    /// After a failed log write or sync the log's durable state is unknown: stop writing and
    /// fail everything not yet published.
    fn fail_log(&self, host: &dyn WalHost, e: &Error) {
        host.fail(e);
        let stopped = Error::stopped(e);
        for c in self.fail_all(e) {
            c.complete(Err(stopped.duplicate()));
        }
    }

    /// Fails every write still queued or unpublished (after a logging failure).
    fn fail_all(&self, err: &Error) -> Vec<Completer<()>> {
        let mut out = Vec::new();
        let mut t = self.tracker.lock();
        if t.failed.is_none() {
            t.failed = Some(err.duplicate());
        }
        for u in t.units.drain(..) {
            u.mem.end_write();
            out.extend(u.completer);
        }
        drop(t);
        self.logq.lock().clear();
        out
    }

    /// Applies `update` to the tracker, then advances the visible and durable sequences over
    /// finished writes and completes their requests (outside the lock).
    fn publish(&self, host: &dyn WalHost, update: impl FnOnce(&mut Tracker)) -> Advance {
        let mut completed = Vec::new();
        let mut flushable = false;
        let mut t = self.tracker.lock();
        if t.failed.is_some() {
            // Everything unpublished was failed; nothing may become visible any more.
            return Advance::Done;
        }
        update(&mut t);
        let mut visible = None;
        let mut result = Advance::Done;
        while let Some(u) = t.units.front() {
            if !u.done {
                break;
            }
            let durable_before = t.durable + 1 >= u.first;
            if u.sync && !(u.durable && durable_before) {
                // Logged durably itself, but an earlier write was logged without a sync.
                result = Advance::Cover(visible.unwrap_or(u.first - 1));
                break;
            }
            let u = t.units.pop_front().expect("front exists");
            if u.durable && durable_before {
                t.durable = t.durable.max(u.last);
            }
            visible = Some(u.last);
            flushable |= u.mem.end_write();
            completed.extend(u.completer);
        }
        if let Some(seq) = visible {
            // NB: under the tracker lock, so the published sequence only grows.
            host.publish(seq);
            self.durable_seq.store(t.durable, Ordering::Release);
            self.visible_cv.notify_all();
        }
        drop(t);
        Counters::add(&host.counters().writes, completed.len() as u64);
        for c in completed {
            c.complete(Ok(()));
        }
        if flushable {
            host.wake_background();
        }
        result
    }

    /// The loop of logger `index`.
    fn logger(&self, host: &dyn WalHost, index: usize) {
        let depth = self.inflight;
        let mut io = LogIo::new(Arc::clone(self.area.file()), self.io_uring, depth);
        let code = match io.path() {
            IoPath::Uring => 1,
            IoPath::Pwrite => 2,
            IoPath::EmulatedRing => 3,
        };
        let _ = self
            .io_path
            .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
        let mut runs: Vec<Option<Run>> = (0..depth).map(|_| None).collect();
        loop {
            let active = index < self.active_loggers.load(Ordering::Acquire);
            if io.in_flight() < depth && (active || self.stop.load(Ordering::Acquire)) {
                if let Some((run, offset)) = self.take_run(host, u64::MAX) {
                    let slot = runs.iter().position(Option::is_none).expect("a free slot");
                    let run = runs[slot].insert(run);
                    // SAFETY: the buffer lives in `runs[slot]` until its completion is collected.
                    unsafe { io.submit(slot as u64, offset, &run.buf, run.durable) };
                    run.apply();
                    continue;
                }
            } else if io.in_flight() >= depth && !self.logq.lock().is_empty() {
                self.saturated.fetch_add(1, Ordering::Relaxed);
            }
            if io.in_flight() > 0 {
                for (token, result) in io.complete(true) {
                    if let Some(run) = runs[token as usize].take() {
                        self.finish_run(host, run, result, io.buffers_abandoned());
                    }
                }
                continue;
            }
            if !self.park_logger(index) {
                return;
            }
        }
    }

    /// Parks an idle logger until there is work for it; false when it should exit.
    fn park_logger(&self, index: usize) -> bool {
        let stop = self.stop.load(Ordering::Acquire);
        if index >= self.active_loggers.load(Ordering::Acquire) && !stop {
            let mut g = self.park.lock();
            self.park_cv.wait_for(&mut g, IDLE_WAIT);
            return true;
        }
        let mut q = self.logq.lock();
        if q.is_empty() {
            if self.stop.load(Ordering::SeqCst) && self.admitting.load(Ordering::SeqCst) == 0 {
                return false;
            }
            self.logq_cv.wait_for(&mut q, IDLE_WAIT);
        }
        true
    }
}

impl Wal for ParallelWal {
    fn write(&self, host: &dyn WalHost, req: WriteRequest<'_>) -> Result<()> {
        let (handle, done) = handle::channel(None);
        // NB: a synced write waits for a device write anyway, and loggers keep several of
        // those in flight; an unsynced one is cheaper written here than handed over.
        let logs_itself = req.durability != Durability::Sync;
        let deferred = self.admit(host, req, done, true, logs_itself)?;
        debug_assert!(deferred.is_none());
        if logs_itself {
            self.log_here(host);
        }
        handle.wait()
    }

    fn submit(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'static>,
        done: Completer<()>,
    ) -> Result<()> {
        let durability = req.durability;
        if let Some((batch, done)) = self.admit(host, req, done, false, false)? {
            let wal = self.me.upgrade().expect("the WAL outlives its writers");
            host.defer(Box::new(move |host| {
                let req = WriteRequest {
                    durability,
                    batch,
                    force_switch: false,
                    check: None,
                };
                // NB: on an error `admit` completes the handle with it.
                let _ = wal.admit(host, req, done, true, false);
            }));
        }
        Ok(())
    }

    fn start(&self, mem: &Arc<MemTable>) -> Result<()> {
        let mut admit = self.admit.lock();
        if !self.start_group(&mut admit, mem)? {
            return Err(Error::Busy("no free parallel-WAL group at open".into()));
        }
        Ok(())
    }

    fn release_below(&self, log_number: u64) {
        if self.area.release_below(log_number) {
            // A freed group's pages are never read again (recovery aside), and the next use
            // of the group writes whole pages: their cached copies only push table blocks out
            // of a bounded page cache. Pages still dirty are started on their write-back and
            // go at a later release.
            self.area.file().drop_cache();
        }
    }

    fn spawn_threads(self: Arc<Self>, host: Arc<dyn WalHost>) -> Vec<JoinHandle<()>> {
        (0..self.loggers)
            .map(|i| {
                let wal = Arc::clone(&self);
                let host = Arc::clone(&host);
                std::thread::Builder::new()
                    .name(format!("tierkv-log-{i}"))
                    .spawn(move || wal.logger(host.as_ref(), i))
                    .expect("spawn logger thread")
            })
            .collect()
    }

    fn tick(&self, admitted_per_sec: f64) {
        let saturated = self.saturated.swap(0, Ordering::Relaxed) > 0;
        let active = self.active_loggers.load(Ordering::Acquire);
        let target = loggers_for(admitted_per_sec, active, saturated, self.loggers);
        if target != active {
            self.active_loggers.store(target, Ordering::Release);
            self.park_cv.notify_all();
        }
    }

    fn idle(&self) -> bool {
        self.logq.lock().is_empty() && self.tracker.lock().units.is_empty()
    }

    fn stop(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.logq_cv.notify_all();
        self.park_cv.notify_all();
    }

    fn close(&self) -> Result<()> {
        Ok(())
    }

    fn io_path(&self) -> &'static str {
        match self.io_path.load(Ordering::Relaxed) {
            1 => "io_uring",
            2 => "pwrite",
            3 => "emulated-ring",
            _ => "unknown",
        }
    }

    fn active_loggers(&self) -> usize {
        self.active_loggers.load(Ordering::Relaxed)
    }
}

/// The area's side of a memtable switch: the active page group, and the pages the next write
/// may need.
struct AreaRoom<'a> {
    wal: &'a ParallelWal,
    admit: &'a mut Admit,
    worst: u64,
}

impl LogRoom for AreaRoom<'_> {
    fn is_full(&self) -> bool {
        self.admit
            .group
            .as_ref()
            .is_none_or(|g| !g.has_room(self.worst))
    }

    fn can_rotate(&self) -> bool {
        self.wal.area.has_free_group()
    }

    fn rotate(&mut self, mem: &Arc<MemTable>) -> Result<()> {
        if self.wal.start_group(self.admit, mem)? {
            Ok(())
        } else {
            Err(Error::Busy("no free parallel-WAL group".into()))
        }
    }
}

/// Loggers to keep active at `rate` admitted writes per second: one per ~15K writes/s (about
/// what one logger's synced runs sustain on an NVMe device at depth 4), one more while the
/// active ones are saturated, between 1 and `max`.
fn loggers_for(rate: f64, active: usize, saturated: bool, max: usize) -> usize {
    let by_rate = (rate / 15_000.0).ceil() as usize;
    let want = if saturated {
        active + 1
    } else {
        by_rate.max(active.saturating_sub(1))
    };
    want.clamp(1, max)
}

#[cfg(test)]
mod tests {
    use super::{loggers_for, CoverSync};
    use crate::env::{FaultFs, FaultKind, Fs};
    use std::path::Path;

    #[test]
    fn a_failed_covering_sync_fails_every_later_one() {
        let fs = FaultFs::new(3);
        fs.create_dir_all(Path::new("/db")).unwrap();
        let area = fs
            .open_positional(Path::new("/db/WAL-AREA"), 1 << 16)
            .unwrap();
        let cover = CoverSync::new();
        cover.sync(area.as_ref()).unwrap();
        // Like Linux, the fault layer reports a write-back error to one sync only.
        fs.fail_after(0, FaultKind::Io, true);
        assert!(cover.sync(area.as_ref()).is_err());
        assert!(area.sync().is_ok(), "the device reports the error once");
        let again = cover.sync(area.as_ref());
        assert!(
            again.is_err(),
            "a later covering sync must not report success"
        );
    }

    #[test]
    fn logger_count_follows_intensity() {
        assert_eq!(loggers_for(0.0, 1, false, 3), 1);
        assert_eq!(loggers_for(40_000.0, 1, false, 3), 3);
        assert_eq!(loggers_for(20_000.0, 1, false, 3), 2);
        assert_eq!(
            loggers_for(1_000.0, 3, false, 3),
            2,
            "steps down one at a time"
        );
        assert_eq!(loggers_for(1_000.0, 2, true, 3), 3, "saturation adds one");
        assert_eq!(loggers_for(1e9, 3, true, 3), 3);
    }
}
