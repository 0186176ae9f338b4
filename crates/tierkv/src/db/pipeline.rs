//! The request pipeline (SpanDB): the parallel-WAL write path and the asynchronous API.
//!
//! Stages and who serves them:
//! - **Admission** (the caller, under `admit`): makes room (memtable and page-group switches,
//!   stalls), assigns sequence numbers, reserves the write's worst-case pages in the active
//!   group, registers it with the tracker and queues it for logging. Taking the sequence number
//!   and queueing happen under one lock, so the log queue is in sequence order.
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
//! - **Reads and deferred work** (workers): asynchronous gets that miss the memtables, scans,
//!   writes whose admission would stall, and every asynchronous write in group mode.
//! - **Head thread**: sizes the active loggers by write intensity and tells background work
//!   whether the foreground is busy. Every idle thread parks on a condition variable.

use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::handle::{self, Completer, Handle, ScanEntries};
use crate::memtable::MemTable;
use crate::options::{Durability, ReadOptions};
use crate::stats::Counters;
use crate::wal::parallel::{self, ActiveGroup, AlignedBuf, ParallelWal, PAGE};
use crate::wal::uring::{IoPath, LogIo};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A validation run under the admission lock (transactions).
type CheckRef<'a> = &'a dyn Fn(&DbInner) -> Result<()>;

/// Most bytes of batches one run packs (a single larger batch still goes alone).
const MAX_RUN_BYTES: usize = 256 << 10;
/// How often the head thread re-sizes the loggers while writes flow.
const HEAD_TICK: Duration = Duration::from_millis(2);
/// How long an idle head thread sleeps before looking again.
const HEAD_IDLE: Duration = Duration::from_millis(100);

/// Admission state: owned by whoever holds the `admit` lock.
pub(super) struct Admit {
    /// Last sequence number assigned.
    pub last_seq: u64,
    /// The active memtable's page group.
    pub group: Option<Arc<ActiveGroup>>,
    /// The active memtable (the one `group` logs).
    pub mem: Option<Arc<MemTable>>,
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
    /// An earlier write is logged but not durable and blocks a synced one: sync the area,
    /// then cover everything through this sequence.
    Cover(u64),
}

/// A run in flight.
struct Run {
    entries: Vec<LogEntry>,
    buf: AlignedBuf,
    durable: bool,
}

/// Work for the worker threads.
pub(super) enum Task {
    Get {
        opts: ReadOptions,
        key: Vec<u8>,
        done: Completer<Option<Vec<u8>>>,
    },
    MultiGet {
        opts: ReadOptions,
        keys: Vec<Vec<u8>>,
        done: Completer<Vec<Option<Vec<u8>>>>,
    },
    Scan {
        opts: ReadOptions,
        start: Vec<u8>,
        limit: usize,
        done: Completer<ScanEntries>,
    },
    Write {
        durability: Durability,
        batch: WriteBatch,
        done: Completer<()>,
    },
    Commit {
        commit: super::txn::PreparedCommit,
        done: Completer<()>,
    },
    /// Group mode: lead the group of an asynchronous writer at the queue's front.
    Lead(Arc<super::write::Writer>),
}

/// The pipeline's shared state. One per database.
pub(super) struct Pipeline {
    /// The parallel WAL's area, in parallel mode.
    pub pwal: Option<ParallelWal>,
    pub admit: Mutex<Admit>,
    logq: Mutex<VecDeque<LogEntry>>,
    /// Wakes active loggers: work queued, or closing.
    logq_cv: Condvar,
    /// Parks loggers the head thread made inactive.
    park_cv: Condvar,
    park: Mutex<()>,
    tracker: Mutex<Tracker>,
    /// Signalled when the visible sequence advances (transactions wait on it).
    visible_cv: Condvar,
    /// Mirror of `Tracker::durable` for packing page headers without the lock.
    durable_seq: AtomicU64,
    tasks: Mutex<VecDeque<Task>>,
    tasks_cv: Condvar,
    /// Asynchronous requests admitted and not completed.
    pub pending: Arc<AtomicUsize>,
    /// Set when the database starts closing: no new requests.
    pub closing: AtomicBool,
    /// Set once every request is drained: threads exit.
    stop: AtomicBool,
    pub active_loggers: AtomicUsize,
    /// Writes admitted since open (the head thread's intensity gauge).
    admitted: AtomicU64,
    /// Foreground requests (reads and writes, any path) since open: the busy gauge.
    foreground_ops: AtomicU64,
    /// Times a logger found work queued while it had no free in-flight slot.
    saturated: AtomicU64,
    /// 0 unknown, 1 io_uring, 2 pwrite.
    io_path: AtomicU8,
    /// True while foreground requests flow (background work yields).
    pub foreground_busy: AtomicBool,
    head_idle: AtomicBool,
    head_cv: Condvar,
    head_lock: Mutex<()>,
}

impl Pipeline {
    pub fn new(pwal: Option<ParallelWal>, last_seq: u64) -> Self {
        Pipeline {
            pwal,
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
            tasks: Mutex::new(VecDeque::new()),
            tasks_cv: Condvar::new(),
            pending: Arc::new(AtomicUsize::new(0)),
            closing: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            active_loggers: AtomicUsize::new(1),
            admitted: AtomicU64::new(0),
            foreground_ops: AtomicU64::new(0),
            saturated: AtomicU64::new(0),
            io_path: AtomicU8::new(0),
            foreground_busy: AtomicBool::new(false),
            head_idle: AtomicBool::new(true),
            head_cv: Condvar::new(),
            head_lock: Mutex::new(()),
        }
    }

    /// The WAL path in use, for stats.
    pub fn io_path_name(&self) -> &'static str {
        match (self.pwal.is_some(), self.io_path.load(Ordering::Relaxed)) {
            (false, _) => "group",
            (true, 1) => "io_uring",
            (true, 2) => "pwrite",
            (true, _) => "unknown",
        }
    }

    /// Counts a foreground request (for the head thread's busy flag).
    pub fn note_foreground(&self) {
        self.foreground_ops.fetch_add(1, Ordering::Relaxed);
        self.nudge_head();
    }

    /// Wakes the head thread if it sleeps idle.
    fn nudge_head(&self) {
        // NB: a plain load first keeps the common case (head awake) free of a shared write.
        if self.head_idle.load(Ordering::Relaxed) && self.head_idle.swap(false, Ordering::AcqRel) {
            self.head_cv.notify_one();
        }
    }

    pub fn push_task(&self, task: Task) {
        self.tasks.lock().push_back(task);
        self.tasks_cv.notify_one();
        self.nudge_head();
    }

    /// True when nothing is queued, in flight or unpublished.
    fn drained(&self) -> bool {
        self.pending.load(Ordering::Acquire) == 0
            && self.tasks.lock().is_empty()
            && self.logq.lock().is_empty()
            && self.tracker.lock().units.is_empty()
    }

    /// Closing: waits (bounded) until in-flight requests are done, then stops the threads.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.drained() && Instant::now() < deadline {
            self.tasks_cv.notify_all();
            self.logq_cv.notify_all();
            std::thread::sleep(Duration::from_millis(1));
        }
        self.stop.store(true, Ordering::Release);
        self.tasks_cv.notify_all();
        self.logq_cv.notify_all();
        self.park_cv.notify_all();
        self.head_cv.notify_all();
    }

    /// Fails every write still queued or unpublished (after a logging failure or at close).
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
}

impl DbInner {
    /// Counts a new asynchronous request, or refuses it (`Busy`, `Closed`).
    pub(super) fn reserve_request(&self) -> Result<()> {
        let p = &self.pipeline;
        if p.closing.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".into()));
        }
        let limit = self.opts.max_pending_requests;
        if p.pending.fetch_add(1, Ordering::AcqRel) >= limit {
            p.pending.fetch_sub(1, Ordering::AcqRel);
            Counters::add(&self.counters.busy_rejections, 1);
            return Err(Error::Busy(format!(
                "{limit} asynchronous requests in flight (max_pending_requests); retry after one completes"
            )));
        }
        Counters::add(&self.counters.async_requests, 1);
        p.note_foreground();
        Ok(())
    }

    /// A completer for an asynchronous request already counted by `reserve_request`.
    fn async_channel<T>(&self) -> (Handle<T>, Completer<T>) {
        handle::channel(Some(Arc::clone(&self.pipeline.pending)))
    }

    /// Asynchronous write: admitted inline when that needs no waiting, else by a worker.
    pub(super) fn submit_write(
        &self,
        durability: Durability,
        batch: WriteBatch,
    ) -> Result<Handle<()>> {
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        if self.pipeline.pwal.is_none() {
            self.enqueue_async(durability, batch, done);
            return Ok(handle);
        }
        if let Some((batch, done)) = self.admit(durability, Some(batch), false, done, false)? {
            self.pipeline.push_task(Task::Write {
                durability,
                batch,
                done,
            });
        }
        Ok(handle)
    }

    /// Asynchronous get: answered inline when a memtable has the key ("lucky read").
    pub(super) fn submit_get(
        &self,
        opts: &ReadOptions,
        key: &[u8],
    ) -> Result<Handle<Option<Vec<u8>>>> {
        let view = self.read_view(opts);
        if let Some(value) = self.memtable_lookup(&view, key) {
            // NB: a miss is counted as foreground work by `reserve_request` below.
            self.pipeline.note_foreground();
            let c = &self.counters;
            Counters::add(&c.lucky_reads, 1);
            Counters::add(&c.gets, 1);
            return Ok(Handle::ready(Ok(value)));
        }
        drop(view);
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        self.pipeline.push_task(Task::Get {
            opts: opts.clone(),
            key: key.to_vec(),
            done,
        });
        Ok(handle)
    }

    /// Asynchronous multi-get, always served by a worker.
    pub(super) fn submit_multi_get(
        &self,
        opts: &ReadOptions,
        keys: Vec<Vec<u8>>,
    ) -> Result<Handle<Vec<Option<Vec<u8>>>>> {
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        self.pipeline.push_task(Task::MultiGet {
            opts: opts.clone(),
            keys,
            done,
        });
        Ok(handle)
    }

    /// Asynchronous scan of up to `limit` entries from `start`.
    pub(super) fn submit_scan(
        &self,
        opts: ReadOptions,
        start: &[u8],
        limit: usize,
    ) -> Result<Handle<ScanEntries>> {
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        self.pipeline.push_task(Task::Scan {
            opts,
            start: start.to_vec(),
            limit,
            done,
        });
        Ok(handle)
    }

    /// Asynchronous transaction commit.
    pub(super) fn submit_commit(&self, commit: super::txn::PreparedCommit) -> Result<Handle<()>> {
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        self.pipeline.push_task(Task::Commit { commit, done });
        Ok(handle)
    }

    /// Synchronous write through the parallel WAL.
    pub(super) fn write_parallel(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
    ) -> Result<()> {
        let (handle, done) = handle::channel(None);
        let deferred = self.admit(durability, batch, force_switch, done, true)?;
        debug_assert!(deferred.is_none());
        handle.wait()
    }

    /// Admits a write: makes room, numbers it, queues it for logging. Returns the batch and
    /// completer back when admission would have to wait and `may_block` is false.
    #[allow(clippy::type_complexity)]
    pub(super) fn admit(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
        done: Completer<()>,
        may_block: bool,
    ) -> Result<Option<(WriteBatch, Completer<()>)>> {
        self.admit_checked(durability, batch, force_switch, done, may_block, None)
    }

    /// `admit`, with `check` run under the admission lock once every earlier write is visible
    /// (transactions validate there); its error refuses the write. On an error the completer
    /// is completed with it too.
    #[allow(clippy::type_complexity)]
    pub(super) fn admit_checked(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
        done: Completer<()>,
        may_block: bool,
        check: Option<CheckRef<'_>>,
    ) -> Result<Option<(WriteBatch, Completer<()>)>> {
        let mut done = Some(done);
        let result = self.admit_inner(durability, batch, force_switch, &mut done, may_block, check);
        match result {
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

    /// See `admit_checked`; takes the completer out of `done` once the write is queued (or
    /// completed). Returns the batch back when admission would wait and `may_block` is false.
    fn admit_inner(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
        done: &mut Option<Completer<()>>,
        may_block: bool,
        check: Option<CheckRef<'_>>,
    ) -> Result<Option<WriteBatch>> {
        let p = &self.pipeline;
        let group_pages = self.opts.wal_group_bytes() / PAGE as u64;
        let worst = batch
            .as_ref()
            .map_or(0, |b| parallel::worst_case_pages(b.encoded_len()));
        if worst > group_pages {
            return Err(Error::invalid(format!(
                "a write batch of {} bytes does not fit one parallel-WAL page group of {} bytes (wal_group_bytes)",
                batch.as_ref().map_or(0, WriteBatch::encoded_len),
                self.opts.wal_group_bytes()
            )));
        }
        let mut admit = p.admit.lock();
        let bytes = batch.as_ref().map_or(0, WriteBatch::user_bytes);
        let room = self.make_room(
            force_switch,
            bytes,
            &mut super::write::WalRoom::Parallel {
                admit: &mut admit,
                worst,
            },
            may_block,
        )?;
        if !room {
            return Ok(batch);
        }
        if let Some(check) = check {
            self.wait_all_visible(admit.last_seq);
            check(self)?;
        }
        let Some(mut batch) = batch.filter(|b| !b.is_empty()) else {
            drop(admit);
            if let Some(d) = done.take() {
                d.complete(Ok(()));
            }
            return Ok(None);
        };
        let seq = admit.last_seq + 1;
        let n = batch.len() as u64;
        admit.last_seq += n;
        batch.encode_with_seq(seq);
        let group = Arc::clone(admit.group.as_ref().expect("make_room starts a group"));
        let mem = Arc::clone(admit.mem.as_ref().expect("make_room sets the memtable"));
        let reserved = group.reserve(worst);
        debug_assert!(reserved, "make_room left room in the group");
        let sync = durability == Durability::Sync;
        let mut tracker = p.tracker.lock();
        if let Some(e) = &tracker.failed {
            // NB: the log failed after this write passed `make_room`; it must not be logged
            // after writes that were failed.
            return Err(Error::Closed(format!("the WAL write failed: {e}")));
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
        p.logq.lock().push_back(LogEntry {
            seq,
            batch,
            worst_pages: worst,
            sync,
            group,
            mem,
        });
        drop(admit);
        p.logq_cv.notify_one();
        p.admitted.fetch_add(1, Ordering::Relaxed);
        p.nudge_head();
        Ok(None)
    }

    /// Waits until every write up to `seq` is visible (or the log failed).
    fn wait_all_visible(&self, seq: u64) {
        let p = &self.pipeline;
        let mut t = p.tracker.lock();
        while self.versions.last_sequence() < seq && t.failed.is_none() {
            p.visible_cv.wait_for(&mut t, Duration::from_millis(10));
        }
    }

    /// Starts a new page group for a memtable numbered `number` (memtable switch). False if
    /// every group is still live.
    pub(super) fn start_group(&self, admit: &mut Admit, number: u64) -> Result<bool> {
        let pwal = self.pipeline.pwal.as_ref().expect("parallel mode");
        match pwal.start_group(number, admit.last_seq + 1)? {
            Some(group) => {
                admit.group = Some(group);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// Frees page groups of flushed memtables.
    pub(super) fn release_groups(&self, log_number: u64) {
        if let Some(pwal) = &self.pipeline.pwal {
            pwal.release_below(log_number);
        }
    }

    /// Takes a run's worth of queued writes (one group) and claims its pages.
    fn take_run(&self) -> Option<(Run, u64)> {
        let p = &self.pipeline;
        let mut q = p.logq.lock();
        let first = q.front()?;
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
        let pages = parallel::run_pages(entries.iter().map(|e| e.batch.encoded_len()));
        let reserved = entries.iter().map(|e| e.worst_pages).sum();
        let group = Arc::clone(&entries[0].group);
        let first_page = group.claim(pages, reserved);
        drop(q);
        let payloads: Vec<&[u8]> = entries.iter().map(|e| e.batch.encoded()).collect();
        let buf = parallel::pack_run(&payloads, colour, p.durable_seq.load(Ordering::Acquire));
        let durable = entries.iter().any(|e| e.sync);
        let offset = self
            .pipeline
            .pwal
            .as_ref()
            .expect("parallel mode")
            .layout()
            .page_offset(group.slot, first_page);
        Counters::add(&self.counters.wal_runs, 1);
        Counters::add(&self.counters.wal_pages, pages);
        let tier0 = &self.tiers.fast().counters;
        tier0.written[crate::tier::WriteKind::Wal as usize]
            .fetch_add(pages * PAGE as u64, Ordering::Relaxed);
        Some((
            Run {
                entries,
                buf,
                durable,
            },
            offset,
        ))
    }

    /// Publishes a completed run (or fails everything after a failed one).
    fn finish_run(&self, run: Run, result: Result<usize>) {
        let pwal = self.pipeline.pwal.as_ref().expect("parallel mode");
        let result = result.and_then(|n| {
            if n == run.buf.len() {
                return Ok(());
            }
            let err = std::io::Error::new(std::io::ErrorKind::WriteZero, "short write");
            Err(Error::io("write", pwal.file().path(), err))
        });
        if let Err(e) = result {
            return self.fail_log(&e);
        }
        let Run {
            entries, durable, ..
        } = run;
        let mut advance = self.publish(|t| {
            for e in &entries {
                if let Ok(i) = t.units.binary_search_by_key(&e.seq, |u| u.first) {
                    t.units[i].done = true;
                    t.units[i].durable = durable;
                }
            }
        });
        while let Advance::Cover(through) = advance {
            Counters::add(&self.counters.wal_cover_syncs, 1);
            if let Err(e) = pwal.file().sync() {
                return self.fail_log(&e);
            }
            advance = self.publish(|t| t.durable = t.durable.max(through));
        }
    }

    /// After a failed log write or sync the log's durable state is unknown: stop writing and
    /// fail everything not yet published.
    fn fail_log(&self, e: &Error) {
        self.set_bg_error(e);
        let closed = Error::Closed(format!("the WAL write failed: {e}"));
        for c in self.pipeline.fail_all(e) {
            c.complete(Err(closed.duplicate()));
        }
    }

    /// Applies `update` to the tracker, then advances the visible and durable sequences over
    /// finished writes and completes their requests (outside the lock).
    fn publish(&self, update: impl FnOnce(&mut Tracker)) -> Advance {
        let p = &self.pipeline;
        let mut completed = Vec::new();
        let mut flushable = false;
        let mut t = p.tracker.lock();
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
            self.versions.set_last_sequence(seq);
            p.durable_seq.store(t.durable, Ordering::Release);
            p.visible_cv.notify_all();
        }
        drop(t);
        Counters::add(&self.counters.writes, completed.len() as u64);
        for c in completed {
            c.complete(Ok(()));
        }
        if flushable {
            self.bg_cv.notify_all();
        }
        result
    }
}

/// The loop of logger `index`.
pub(super) fn logger(db: &DbInner, index: usize) {
    let p = &db.pipeline;
    let Some(pwal) = &p.pwal else {
        return;
    };
    let depth = db.opts.wal_inflight;
    let mut io = LogIo::new(Arc::clone(pwal.file()), db.opts.wal_io_uring, depth);
    let code = match io.path() {
        IoPath::Uring => 1,
        IoPath::Pwrite => 2,
    };
    let _ = p
        .io_path
        .compare_exchange(0, code, Ordering::AcqRel, Ordering::Acquire);
    let mut runs: Vec<Option<Run>> = (0..depth).map(|_| None).collect();
    loop {
        let active = index < p.active_loggers.load(Ordering::Acquire);
        if io.in_flight() < depth && (active || p.stop.load(Ordering::Acquire)) {
            if let Some((run, offset)) = db.take_run() {
                let slot = runs.iter().position(Option::is_none).expect("a free slot");
                let run = runs[slot].insert(run);
                // SAFETY: the buffer lives in `runs[slot]` until its completion is collected.
                unsafe { io.submit(slot as u64, offset, &run.buf, run.durable) };
                for e in &run.entries {
                    e.mem.insert_batch(e.seq, &e.batch);
                }
                continue;
            }
        } else if io.in_flight() >= depth && !p.logq.lock().is_empty() {
            p.saturated.fetch_add(1, Ordering::Relaxed);
        }
        if io.in_flight() > 0 {
            for (token, result) in io.complete(true) {
                if let Some(run) = runs[token as usize].take() {
                    db.finish_run(run, result);
                }
            }
            continue;
        }
        if !park_logger(p, index) {
            return;
        }
    }
}

/// Parks an idle logger until there is work for it; false when it should exit.
fn park_logger(p: &Pipeline, index: usize) -> bool {
    if index >= p.active_loggers.load(Ordering::Acquire) && !p.stop.load(Ordering::Acquire) {
        let mut g = p.park.lock();
        p.park_cv.wait_for(&mut g, HEAD_IDLE);
        return true;
    }
    let mut q = p.logq.lock();
    if q.is_empty() {
        if p.stop.load(Ordering::Acquire) {
            return false;
        }
        p.logq_cv.wait_for(&mut q, HEAD_IDLE);
    }
    true
}

/// The loop of a worker thread.
pub(super) fn worker(db: &DbInner) {
    let p = &db.pipeline;
    loop {
        let task = {
            let mut tasks = p.tasks.lock();
            loop {
                if let Some(t) = tasks.pop_front() {
                    break t;
                }
                if p.stop.load(Ordering::Acquire) {
                    return;
                }
                p.tasks_cv.wait_for(&mut tasks, HEAD_IDLE);
            }
        };
        run_task(db, task);
    }
}

fn run_task(db: &DbInner, task: Task) {
    match task {
        Task::Get { opts, key, done } => done.complete(db.get(&opts, &key)),
        Task::MultiGet { opts, keys, done } => {
            let keys: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
            done.complete(db.multi_get(&opts, &keys))
        }
        Task::Scan {
            opts,
            start,
            limit,
            done,
        } => done.complete(db.scan(opts, &start, limit)),
        Task::Write {
            durability,
            batch,
            done,
        } => {
            if db.pipeline.pwal.is_some() {
                // NB: on an error `admit` completes the handle with it.
                let _ = db.admit(durability, Some(batch), false, done, true);
            } else {
                done.complete(db.write(durability, Some(batch), false));
            }
        }
        Task::Commit { commit, done } => done.complete(db.commit(commit)),
        Task::Lead(writer) => {
            // NB: the group's leader completes every handle, this writer's included.
            let _ = db.lead(&writer);
        }
    }
}

/// The head thread: sizes the loggers by write intensity and flags foreground activity.
pub(super) fn head(db: &DbInner) {
    let p = &db.pipeline;
    let max = db.opts.wal_loggers;
    let mut last_admitted = p.admitted.load(Ordering::Relaxed);
    let mut last_foreground = p.foreground_ops.load(Ordering::Relaxed);
    let mut last_tick = Instant::now();
    let mut quiet_ticks = 0u32;
    while !p.stop.load(Ordering::Acquire) {
        {
            let mut g = p.head_lock.lock();
            if quiet_ticks > 50 {
                // Nothing for a while: sleep until a request arrives.
                p.head_idle.store(true, Ordering::Release);
                p.foreground_busy.store(false, Ordering::Release);
                p.head_cv.wait_for(&mut g, HEAD_IDLE);
                quiet_ticks = 0;
            } else {
                p.head_cv.wait_for(&mut g, HEAD_TICK);
            }
        }
        db.sample_io_if_due();
        let now = Instant::now();
        let admitted = p.admitted.load(Ordering::Relaxed);
        let rate = (admitted - last_admitted) as f64 / now.duration_since(last_tick).as_secs_f64();
        last_admitted = admitted;
        last_tick = now;
        let foreground = p.foreground_ops.load(Ordering::Relaxed);
        let busy =
            foreground > last_foreground || rate > 0.0 || p.pending.load(Ordering::Relaxed) > 0;
        last_foreground = foreground;
        quiet_ticks = if busy { 0 } else { quiet_ticks + 1 };
        p.foreground_busy.store(busy, Ordering::Release);
        let saturated = p.saturated.swap(0, Ordering::Relaxed) > 0;
        let active = p.active_loggers.load(Ordering::Acquire);
        let target = loggers_for(rate, active, saturated, max);
        if target != active {
            p.active_loggers.store(target, Ordering::Release);
            p.park_cv.notify_all();
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
    use super::loggers_for;

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
