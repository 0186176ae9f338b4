//! The write path: group commit.
//!
//! Writers queue in `writers`. The writer at the front is the leader: it makes room (switching
//! the memtable, or waiting when flush or L0 compaction fall behind), takes every queued batch up
//! to a size cap, assigns their sequence numbers, appends them to the WAL as one record each,
//! syncs once if any of them asked for it, inserts them into the memtable, publishes the last
//! sequence, and wakes the group. The next writer in the queue then leads.
//!
//! INVARIANT: sequence numbers are published only after every entry up to them is in the
//! memtable, so a reader never sees write n+1 without write n.
//! INVARIANT: each WAL is an append stream synced as a prefix, and an older WAL is synced
//! before a newer one is (`wal::set`), so recovery can always rebuild a prefix of history.

use super::open::WAL_BUFFER;
use super::pipeline::Task;
use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::handle::Completer;
use crate::memtable::MemTable;
use crate::options::Durability;
use crate::stats::Counters;
use crate::tier::{FileKind, TierId, WriteKind};
use crate::wal::log::LogWriter;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest total of batch bytes one leader commits as a group.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A queued write.
pub(crate) struct Writer {
    batch: Mutex<Option<WriteBatch>>,
    durability: Durability,
    /// Switch the memtable even though it is not full (used by `flush`).
    force_switch: bool,
    /// A transaction's validation, run by this writer as leader of its group.
    check: Option<Check>,
    result: Mutex<Option<Result<()>>>,
    /// The handle's completer of an asynchronous write (no thread waits for it).
    completer: Mutex<Option<Completer<()>>>,
}

/// A validation run just before a write is numbered; its error refuses the write.
pub(super) type Check = Box<dyn Fn(&DbInner) -> Result<()> + Send + Sync>;

impl DbInner {
    /// Commits `batch` (or, with `None` and `force_switch`, only switches the memtable).
    pub(super) fn write(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
    ) -> Result<()> {
        self.write_queued(durability, batch, force_switch, None)
    }

    /// Commits `batch` if `check` passes when every earlier write is visible.
    pub(super) fn write_checked(
        &self,
        durability: Durability,
        batch: WriteBatch,
        check: Check,
    ) -> Result<()> {
        self.write_queued(durability, Some(batch), false, Some(check))
    }

    fn write_queued(
        &self,
        durability: Durability,
        batch: Option<WriteBatch>,
        force_switch: bool,
        check: Option<Check>,
    ) -> Result<()> {
        let me = Arc::new(Writer {
            batch: Mutex::new(batch),
            durability,
            force_switch,
            check,
            result: Mutex::new(None),
            completer: Mutex::new(None),
        });
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        loop {
            if let Some(result) = me.result.lock().take() {
                return result;
            }
            if queue.front().is_some_and(|w| Arc::ptr_eq(w, &me)) {
                break;
            }
            self.writers_cv.wait(&mut queue);
        }
        drop(queue);
        self.lead(&me)
    }

    /// Asynchronous group-mode write: joins the writer queue without a waiting thread; its
    /// handle is completed by the leader of its group. When it reaches the front of the queue
    /// a worker leads for it.
    pub(super) fn enqueue_async(
        &self,
        durability: Durability,
        batch: WriteBatch,
        done: Completer<()>,
    ) {
        let me = Arc::new(Writer {
            batch: Mutex::new(Some(batch)),
            durability,
            force_switch: false,
            check: None,
            result: Mutex::new(None),
            completer: Mutex::new(Some(done)),
        });
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        let front = queue.len() == 1;
        drop(queue);
        if front {
            self.pipeline.push_task(Task::Lead(me));
        }
    }

    /// Leads the group starting at `me` (the queue's front): makes room, commits the group,
    /// hands every member its result and passes the lead on.
    pub(super) fn lead(&self, me: &Arc<Writer>) -> Result<()> {
        // Followers may enqueue meanwhile; the group is taken under the lock.
        let bytes = me.batch.lock().as_ref().map_or(0, WriteBatch::user_bytes);
        let room = self
            .make_room(me.force_switch, bytes, &mut WalRoom::Group, true)
            .map(drop);
        // NB: a writer with a check always leads its group (see `take_group`), so it
        // validates against every published write.
        let room = room.and_then(|()| me.check.as_ref().map_or(Ok(()), |check| check(self)));
        let mut queue = self.writers.lock();
        let group: Vec<Arc<Writer>> = match room {
            Ok(()) => take_group(&queue),
            Err(_) => vec![Arc::clone(me)],
        };
        drop(queue);
        let result = room.and_then(|()| self.commit_group(&group));
        let mut done = Vec::new();
        queue = self.writers.lock();
        for w in &group {
            queue.pop_front();
            let r = result.as_ref().map(|_| ()).map_err(Error::duplicate);
            match w.completer.lock().take() {
                Some(c) => done.push((c, r)),
                None if !Arc::ptr_eq(w, me) => *w.result.lock() = Some(r),
                None => {}
            }
        }
        // NB: an asynchronous writer has no thread of its own to lead: a worker does.
        let next = queue
            .front()
            .filter(|w| w.completer.lock().is_some())
            .cloned();
        drop(queue);
        self.writers_cv.notify_all();
        if let Some(next) = next {
            self.pipeline.push_task(Task::Lead(next));
        }
        for (c, r) in done {
            c.complete(r);
        }
        result
    }

    /// Logs, applies and publishes the group's batches.
    fn commit_group(&self, group: &[Arc<Writer>]) -> Result<()> {
        let mut batches: Vec<WriteBatch> =
            group.iter().filter_map(|w| w.batch.lock().take()).collect();
        if batches.is_empty() {
            return Ok(());
        }
        let durability = group.iter().map(|w| w.durability).max().unwrap_or_default();
        let first = self.versions.last_sequence() + 1;
        let mut seq = first;
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(batches.len());
        let mut user_bytes = 0;
        for b in &mut batches {
            let n = b.len() as u64;
            user_bytes += b.user_bytes();
            payloads.push(b.encode_with_seq(seq));
            seq += n;
        }
        self.append_wal(&payloads, durability, first)?;
        let mem = Arc::clone(&self.state.lock().mem);
        let mut s = first;
        for b in &batches {
            s = mem.insert_batch(s, b);
        }
        self.versions.set_last_sequence(seq - 1);
        let c = &self.counters;
        Counters::add(&c.writes, batches.len() as u64);
        Counters::add(&c.write_groups, 1);
        Counters::add(&c.user_bytes_written, user_bytes);
        if durability == Durability::Sync {
            Counters::add(&c.synced_groups, 1);
        }
        Ok(())
    }

    fn append_wal(&self, payloads: &[&[u8]], durability: Durability, first: u64) -> Result<()> {
        let mut guard = self.wal.lock();
        let wals = guard
            .as_mut()
            .ok_or_else(|| Error::Closed("the WAL is closed".into()))?;
        // An empty batch numbered like the group's first write: replay skips it.
        let marker = || WriteBatch::new().encode_with_seq(first).to_vec();
        let result = wals.append(payloads, durability, marker);
        if let Err(e) = &result {
            // A failed write or sync leaves the log's durable state unknown: stop writing.
            self.set_bg_error(e);
        }
        result
    }

    /// Ensures the active memtable (and, with the parallel WAL, its page group) can take a
    /// write, stalling or switching as needed. Returns false instead of waiting when
    /// `may_block` is false and a wait is due.
    pub(super) fn make_room(
        &self,
        force_switch: bool,
        bytes: u64,
        wal: &mut WalRoom<'_>,
        may_block: bool,
    ) -> Result<bool> {
        let mut delayed = false;
        let mut state = self.state.lock();
        loop {
            self.check_writable(&state)?;
            let l0 = self.versions.current().levels[0].len();
            let mem_full = state.mem.approximate_bytes() >= self.opts.write_buffer_size;
            let slow = l0 >= self.opts.l0_slowdown_trigger;
            if !delayed {
                if !may_block && slow {
                    return Ok(false);
                }
                delayed = true;
                let wait = self.pacer.delay(l0, bytes, Instant::now());
                if !wait.is_zero() {
                    // Pace writes so compaction can catch up (`pacer`).
                    drop(state);
                    let t = Instant::now();
                    std::thread::sleep(wait);
                    self.record_stall(t, false);
                    state = self.state.lock();
                    continue;
                }
            }
            let switch = mem_full || force_switch && !state.mem.is_empty() || wal.is_full();
            if !switch {
                return Ok(true);
            } else if state.imm.len() >= self.opts.max_immutable_memtables
                || l0 >= self.opts.l0_stop_trigger
                || !wal.has_free_group(self)
            {
                if !may_block {
                    return Ok(false);
                }
                let t = Instant::now();
                self.bg_cv.notify_all();
                self.progress_cv
                    .wait_for(&mut state, Duration::from_millis(100));
                self.record_stall(t, true);
            } else {
                drop(state);
                self.switch_memtable(wal)?;
                return Ok(true);
            }
        }
    }

    fn record_stall(&self, since: Instant, stop: bool) {
        let c = &self.counters;
        Counters::add(&c.stall_micros, since.elapsed().as_micros() as u64);
        Counters::add(if stop { &c.stops } else { &c.slowdowns }, 1);
    }

    /// Seals the active memtable and its WAL (a log file, or a page group), starting a new
    /// pair. Called by the group-commit leader or under the admission lock.
    fn switch_memtable(&self, wal: &mut WalRoom<'_>) -> Result<()> {
        let number = self.versions.new_file_number();
        let switched = match wal {
            WalRoom::Group => self.rotate_wal_file(number),
            WalRoom::Parallel { admit, .. } => self.start_group(admit, number).and_then(|ok| {
                ok.then_some(())
                    .ok_or_else(|| Error::Busy("no free parallel-WAL group".into()))
            }),
        };
        if let Err(e) = switched {
            self.set_bg_error(&e);
            return Err(e);
        }
        let mem = Arc::new(MemTable::new(number));
        {
            let mut state = self.state.lock();
            let full = std::mem::replace(&mut state.mem, Arc::clone(&mem));
            full.seal();
            state.imm.push_back(full);
        }
        if let WalRoom::Parallel { admit, .. } = wal {
            admit.mem = Some(mem);
        }
        self.maybe_schedule();
        Ok(())
    }

    /// Group mode: starts WAL file `number`, sealing the active one.
    fn rotate_wal_file(&self, number: u64) -> Result<()> {
        let path = self.tiers.path(TierId::FAST, FileKind::Wal, number);
        let mut guard = self.wal.lock();
        // NB: the old WAL is sealed unsynced, and the new one's directory entry is not synced
        // either: `WalSet` syncs both before any newer WAL is synced.
        guard
            .as_mut()
            .ok_or_else(|| Error::Closed("the WAL is closed".into()))
            .and_then(|wals| {
                let file = self
                    .tiers
                    .create(TierId::FAST, &path, WriteKind::Wal, WAL_BUFFER)?
                    .with_preallocation(self.opts.wal_preallocation_step());
                wals.rotate(number, LogWriter::new(file, path))
            })
    }

    /// Switches the memtable if it holds anything and waits until all memtables are flushed.
    pub(super) fn flush_and_wait(&self) -> Result<()> {
        if self.pipeline.pwal.is_some() {
            self.write_parallel(Durability::Flush, None, true)?;
        } else {
            self.write(Durability::Flush, None, true)?;
        }
        let mut state = self.state.lock();
        loop {
            if let Some(e) = &state.bg_error {
                return Err(e.duplicate());
            }
            if state.imm.is_empty() {
                return Ok(());
            }
            if state.shutting_down {
                return Err(Error::Closed("the database is shutting down".into()));
            }
            self.bg_cv.notify_all();
            self.progress_cv.wait(&mut state);
        }
    }
}

/// Which WAL a memtable switch rotates, and how full it is.
pub(super) enum WalRoom<'a> {
    /// Group commit: a log file per memtable, never full.
    Group,
    /// Parallel WAL: the admission state and the pages the next write may need.
    Parallel {
        admit: &'a mut super::pipeline::Admit,
        worst: u64,
    },
}

impl WalRoom<'_> {
    /// True if the active page group cannot take the next write.
    fn is_full(&self) -> bool {
        match self {
            WalRoom::Group => false,
            WalRoom::Parallel { admit, worst } => {
                admit.group.as_ref().is_none_or(|g| !g.has_room(*worst))
            }
        }
    }

    /// True if a switch can start a new page group now.
    fn has_free_group(&self, db: &DbInner) -> bool {
        match self {
            WalRoom::Group => true,
            WalRoom::Parallel { .. } => db
                .pipeline
                .pwal
                .as_ref()
                .is_some_and(|w| w.has_free_group()),
        }
    }
}

/// The front writers whose batches fit in one group.
fn take_group(queue: &std::collections::VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
    let mut bytes = 0;
    let mut group = Vec::new();
    for w in queue {
        let size = w.batch.lock().as_ref().map_or(0, WriteBatch::encoded_len);
        if !group.is_empty()
            && (bytes + size > MAX_GROUP_BYTES || w.force_switch || w.check.is_some())
        {
            break;
        }
        bytes += size;
        group.push(Arc::clone(w));
    }
    group
}
