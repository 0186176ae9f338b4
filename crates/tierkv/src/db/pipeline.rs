//! The asynchronous request pipeline (SpanDB): worker threads, the head thread, and the
//! `submit_*` API.
//!
//! - **Requests**: asynchronous gets that miss the memtables, multi-gets, scans and
//!   transaction commits are served by workers; asynchronous writes go to the WAL
//!   (`Wal::submit`), which admits them inline when that needs no waiting and otherwise hands
//!   the rest to a worker (`Task::Wal`). A commit waits in the WAL on its worker; the group
//!   WAL lets it lead an asynchronous write queued ahead of it, so it never waits for a free
//!   worker.
//! - **Backpressure**: at most `max_pending_requests` asynchronous requests are in flight;
//!   more get `Busy`.
//! - **Head thread**: tells the WAL the write intensity (the parallel WAL sizes its loggers
//!   by it), samples the I/O monitor, and flags whether foreground requests flow, so
//!   background work can yield. Every idle thread parks on a condition variable.
//!
//! The pipeline depends on the write path (`write`) and the WAL seam; neither depends on it
//! beyond handing it deferred work.

use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::handle::{self, Completer, Handle, ScanEntries};
use crate::memtable::MemTable;
use crate::options::{Durability, ReadOptions};
use crate::stats::Counters;
use crate::wal::{Deferred, LogRoom, WalHost, WriteRequest};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How often the head thread looks at the write intensity while requests flow.
const HEAD_TICK: Duration = Duration::from_millis(2);
/// How long an idle head thread or worker sleeps before looking again.
const HEAD_IDLE: Duration = Duration::from_millis(100);

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
    Commit {
        commit: super::txn::PreparedCommit,
        done: Completer<()>,
    },
    /// Work the WAL deferred (a write whose admission would wait, a group to lead).
    Wal(Deferred),
    /// An asynchronous write with split values: routed and written by the worker.
    SplitWrite {
        durability: Durability,
        batch: WriteBatch,
        done: Completer<()>,
    },
}

/// The pipeline's shared state. One per database.
pub(super) struct Pipeline {
    tasks: Mutex<VecDeque<Task>>,
    tasks_cv: Condvar,
    /// Asynchronous requests admitted and not completed.
    pub pending: Arc<AtomicUsize>,
    /// Set when the database starts closing: no new requests.
    pub closing: AtomicBool,
    /// Set once every request is drained: threads exit.
    stop: AtomicBool,
    /// Writes admitted since open (the head thread's intensity gauge).
    pub admitted: AtomicU64,
    /// Foreground requests (reads and writes, any path) since open: the busy gauge.
    foreground_ops: AtomicU64,
    /// True while foreground requests flow (background work yields).
    pub foreground_busy: AtomicBool,
    head_idle: AtomicBool,
    head_cv: Condvar,
    head_lock: Mutex<()>,
}

impl Pipeline {
    pub fn new() -> Self {
        Pipeline {
            tasks: Mutex::new(VecDeque::new()),
            tasks_cv: Condvar::new(),
            pending: Arc::new(AtomicUsize::new(0)),
            closing: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            admitted: AtomicU64::new(0),
            foreground_ops: AtomicU64::new(0),
            foreground_busy: AtomicBool::new(false),
            head_idle: AtomicBool::new(true),
            head_cv: Condvar::new(),
            head_lock: Mutex::new(()),
        }
    }

    /// Counts a foreground request (for the head thread's busy flag).
    pub fn note_foreground(&self) {
        self.foreground_ops.fetch_add(1, Ordering::Relaxed);
        self.nudge_head();
    }

    /// Wakes the head thread if it sleeps idle.
    pub fn nudge_head(&self) {
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

    /// Stops the pipeline's threads (after `DbInner::drain_requests`).
    fn stop(&self) {
        self.stop.store(true, Ordering::Release);
        self.tasks_cv.notify_all();
        self.head_cv.notify_all();
    }
}

impl DbInner {
    /// True when no request is queued, in flight or unpublished.
    fn drained(&self) -> bool {
        let p = &self.pipeline;
        p.pending.load(Ordering::Acquire) == 0 && p.tasks.lock().is_empty() && self.wal.idle()
    }

    /// Closing: waits (bounded) until in-flight requests are done, then stops the pipeline's
    /// and the WAL's threads.
    pub(super) fn close_pipeline(&self) {
        let p = &self.pipeline;
        p.closing.store(true, Ordering::Release);
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.drained() && Instant::now() < deadline {
            p.tasks_cv.notify_all();
            std::thread::sleep(Duration::from_millis(1));
        }
        p.stop();
        self.wal.stop();
    }

    /// Counts a new asynchronous request, or refuses it (`Busy`, `Closed`).
    pub(super) fn reserve_request(&self) -> Result<()> {
        let p = &self.pipeline;
        if p.closing.load(Ordering::Acquire) {
            return Err(Error::Closed("the database is closing".into()));
        }
        let limit = self.opts.pipeline.max_pending_requests;
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
        if self.vlog.is_some() {
            // SPLIT VALUES: a worker routes the batch (value log appended and synced) and
            // writes it, holding the append's in-flight guard until the write returned.
            self.reserve_request()?;
            let (handle, done) = self.async_channel();
            self.pipeline.push_task(Task::SplitWrite {
                durability,
                batch,
                done,
            });
            return Ok(handle);
        }
        self.reserve_request()?;
        let (handle, done) = self.async_channel();
        self.wal
            .submit(self, WriteRequest::batch(durability, batch), done)?;
        Ok(handle)
    }

    /// Asynchronous get: answered inline when a memtable has the key ("lucky read").
    pub(super) fn submit_get(
        &self,
        opts: &ReadOptions,
        key: &[u8],
    ) -> Result<Handle<Option<Vec<u8>>>> {
        let _pin = self.pin_values();
        let view = self.read_view(opts);
        if let Some(value) = self.memtable_lookup(&view, key, true) {
            let value = match value {
                Some(v) => self.user_value(key, v).map(Some),
                None => Ok(None),
            };
            // NB: a miss is counted as foreground work by `reserve_request` below.
            self.pipeline.note_foreground();
            let c = &self.counters;
            Counters::add(&c.lucky_reads, 1);
            Counters::add(&c.gets, 1);
            return Ok(Handle::ready(value));
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
}

/// The database as its WAL's host: room-making from the write path, deferred work and the
/// write-intensity gauge from the pipeline.
impl WalHost for DbInner {
    fn make_room(
        &self,
        room: &mut dyn LogRoom,
        force_switch: bool,
        bytes: u64,
        may_block: bool,
    ) -> Result<bool> {
        self.make_room_for(room, force_switch, bytes, may_block)
    }

    fn active_memtable(&self) -> Arc<MemTable> {
        Arc::clone(&self.state.lock().mem)
    }

    fn last_sequence(&self) -> u64 {
        self.versions.last_sequence()
    }

    fn publish(&self, seq: u64) {
        self.versions.set_last_sequence(seq);
    }

    fn fail(&self, err: &Error) {
        self.set_bg_error(err);
    }

    fn defer(&self, job: Deferred) {
        self.pipeline.push_task(Task::Wal(job));
    }

    fn counters(&self) -> &Counters {
        &self.counters
    }

    fn note_admitted(&self) {
        self.pipeline.admitted.fetch_add(1, Ordering::Relaxed);
        self.pipeline.nudge_head();
    }

    fn wake_background(&self) {
        self.bg_cv.notify_all();
    }
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
        Task::Commit { commit, done } => done.complete(db.commit(commit)),
        Task::Wal(job) => job(db),
        Task::SplitWrite {
            durability,
            batch,
            done,
        } => done.complete(db.write(durability, batch)),
    }
}

/// The head thread: tells the WAL the write intensity and flags foreground activity.
pub(super) fn head(db: &DbInner) {
    let p = &db.pipeline;
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
        db.wal.tick(rate);
    }
}
