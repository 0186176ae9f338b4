//! `wal = "group"`: group commit over one log file per memtable.
//!
//! Writers queue in `writers`. The writer at the front is the leader: it makes room (through
//! the host: switching the memtable, or waiting when flush or L0 compaction fall behind),
//! takes every queued batch up to a size cap, assigns their sequence numbers, appends them to
//! the active log file as one record each, syncs once if any of them asked for it, inserts
//! them into the memtable, publishes the last sequence, and wakes the group. The next writer
//! in the queue then leads. An asynchronous writer has no thread of its own: when it reaches
//! the front, a worker is asked to lead for it, and any writer waiting in the queue behind it
//! leads it instead if it gets there first. Whoever claims the lead first leads; the other
//! does nothing. So a writer that waits in the queue on a worker (an asynchronous transaction
//! commit) never waits for a free worker: with every worker waiting, one of them leads.
//!
//! With `wal.concurrent_memtable_writes`, the leader passes the lead on as soon as its group is
//! logged, so the next group is logged and synced while this one is inserted; a group big
//! enough to be worth it is inserted by the leader, the waiting writers and pipeline workers
//! together ([`insert`]). Groups are numbered and publish in turn ([`order`]): a group
//! publishes once its last batch is in and every earlier group has published. Its memtable
//! counts it as a pending write meanwhile, so a memtable switched under it is not flushed yet.
//!
//! INVARIANT: sequence numbers are published only after every entry up to them is in the
//! memtable, so a reader never sees write n+1 without write n.
//! INVARIANT: each log file is an append stream synced as a prefix, and an older one is synced
//! before a newer one is ([`set`]), so recovery can always rebuild a prefix of history.

mod insert;
mod order;
mod recover;
pub mod set;

pub(crate) use recover::replay;
pub use set::WalSet;

use super::log::LogWriter;
use super::{Check, LogRoom, Wal, WalHost, WriteRequest};
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::handle::Completer;
use crate::memtable::MemTable;
use crate::options::{Durability, Options};
use crate::stats::Counters;
use crate::tier::{FileKind, TierId, Tiers, WriteKind};
use insert::GroupInserts;
use order::{PublishOrder, Ticket};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// User-space buffer of a log file's writer.
pub const WAL_BUFFER: usize = 256 << 10;
/// Largest total of batch bytes one leader commits as a group.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// A queued write.
struct Writer {
    batch: Mutex<Option<WriteBatch>>,
    durability: Durability,
    /// Switch the memtable even though it is not full (used by `flush`).
    force_switch: bool,
    /// Validated by a check: such a writer always leads its own group (see `take_group`).
    checked: bool,
    result: Mutex<Option<Result<()>>>,
    /// The handle's completer of an asynchronous write (no thread waits for it).
    completer: Mutex<Option<Completer<()>>>,
    /// Set by the one thread that leads this asynchronous writer's group (see `claim_lead`).
    lead_claimed: AtomicBool,
}

/// A group logged and not yet published.
struct Logged {
    batches: Vec<WriteBatch>,
    /// Operations in all batches.
    ops: u64,
    /// The first batch's first sequence number; the others follow back to back.
    first: u64,
    ticket: Ticket,
    /// The memtable the group goes to; it counts the group as a pending write.
    mem: Arc<MemTable>,
    durability: Durability,
    user_bytes: u64,
}

/// The group-commit WAL of an open database.
pub(crate) struct GroupWal {
    /// The log files; only the leader touches them, so the lock is uncontended and may be
    /// held across I/O. `None` once closed.
    files: Mutex<Option<WalSet>>,
    writers: Mutex<VecDeque<Arc<Writer>>>,
    writers_cv: Condvar,
    tiers: Arc<Tiers>,
    /// How far a log file is preallocated at a time.
    preallocation: u64,
    /// Insert big groups into the memtable in parallel (`wal.concurrent_memtable_writes`).
    concurrent_inserts: bool,
    /// Fewest operations of a group inserted in parallel (`wal.concurrent_memtable_min_ops`).
    parallel_min_ops: u64,
    /// Pipeline workers a leader may ask to help insert asynchronous writers' batches.
    insert_workers: usize,
    /// The group being inserted in parallel, for queued writers to help with.
    inserting: Mutex<Option<Arc<GroupInserts>>>,
    /// Sequence numbering and publication turns of groups that overlap.
    order: PublishOrder,
    /// This WAL, for work deferred to a worker.
    me: Weak<GroupWal>,
}

impl GroupWal {
    /// Starts log file `number` (the first memtable's) on tier 0.
    pub fn open(opts: &Options, tiers: &Arc<Tiers>, number: u64) -> Result<Arc<GroupWal>> {
        let preallocation = opts.wal_preallocation_step();
        let writer = create_log(tiers, number, preallocation)?;
        tiers.fs().sync_dir(&tiers.fast().dir)?;
        let files = WalSet::new(
            number,
            writer,
            Arc::clone(tiers.fs()),
            tiers.fast().dir.clone(),
        );
        Ok(Arc::new_cyclic(|me| GroupWal {
            files: Mutex::new(Some(files)),
            writers: Mutex::new(VecDeque::new()),
            writers_cv: Condvar::new(),
            tiers: Arc::clone(tiers),
            preallocation,
            concurrent_inserts: opts.wal.concurrent_memtable_writes,
            parallel_min_ops: opts.wal.concurrent_memtable_min_ops as u64,
            insert_workers: opts.pipeline.workers,
            inserting: Mutex::new(None),
            order: PublishOrder::default(),
            me: me.clone(),
        }))
    }

    /// Queues `me` and waits until it leads or a leader has committed it.
    fn queue_and_wait(
        &self,
        host: &dyn WalHost,
        me: Arc<Writer>,
        check: Option<Check<'_>>,
    ) -> Result<()> {
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        loop {
            if let Some(result) = me.result.lock().take() {
                return result;
            }
            if queue.front().is_some_and(|w| Arc::ptr_eq(w, &me)) {
                break;
            }
            if let Some(inserts) = self.group_needing_help() {
                // NB: a waiting writer would only sleep until the group is published.
                drop(queue);
                inserts.help();
                queue = self.writers.lock();
                continue;
            }
            if let Some(front) = claim_async_front(&queue) {
                // NB: its deferred lead may wait for a worker, and this thread may be the
                // worker it waits for.
                drop(queue);
                drop(self.lead(host, &front, None));
                queue = self.writers.lock();
                continue;
            }
            self.writers_cv.wait(&mut queue);
        }
        drop(queue);
        self.lead(host, &me, check)
    }

    /// Leads the group starting at `me` (the queue's front): makes room, logs the group, passes
    /// the lead on, inserts and publishes the group and hands every member its result. A group
    /// inserted in parallel passes the lead on as soon as it is logged, so the next group is
    /// logged while this one is inserted; any other only once it is published.
    fn lead(&self, host: &dyn WalHost, me: &Arc<Writer>, check: Option<Check<'_>>) -> Result<()> {
        // Followers may enqueue meanwhile; the group is taken under the lock.
        let bytes = me.batch.lock().as_ref().map_or(0, WriteBatch::user_bytes);
        let mut room = FileRoom { wal: self };
        let room = host
            .make_room(&mut room, me.force_switch, bytes, true)
            .map(drop);
        // NB: a checked writer always leads its group (see `take_group`); earlier groups may
        // still be inserting, so it waits for them to publish and validates against every one.
        let room = room.and_then(|()| {
            check.map_or(Ok(()), |check| {
                self.order.wait_all_published();
                check()
            })
        });
        let queue = self.writers.lock();
        let group: Vec<Arc<Writer>> = match room {
            Ok(()) => take_group(&queue),
            Err(_) => vec![Arc::clone(me)],
        };
        drop(queue);
        let logged = room.and_then(|()| self.log_group(host, &group));
        // NB: only a group worth inserting in parallel overlaps the next: a small one is
        // inserted sooner than the next leader could wake.
        let overlap = matches!(&logged, Ok(Some(l)) if self.worth_parallel(&l.batches, l.ops));
        let result = if overlap {
            self.pass_lead(host, group.len());
            logged.and_then(|logged| self.apply_group(host, &group, logged))
        } else {
            let result = logged.and_then(|logged| self.apply_group(host, &group, logged));
            self.pass_lead(host, group.len());
            result
        };
        self.hand_results(&group, me, &result);
        result
    }

    /// Takes the led group (its `len` writers) off the queue and wakes the next leader.
    fn pass_lead(&self, host: &dyn WalHost, len: usize) {
        let mut queue = self.writers.lock();
        queue.drain(..len);
        let next = queue.front().filter(|w| is_async(w)).cloned();
        drop(queue);
        self.writers_cv.notify_all();
        if let Some(next) = next {
            self.defer_lead(host, next);
        }
    }

    /// Gives every member of `group` but the leader `me` the group's result.
    fn hand_results(&self, group: &[Arc<Writer>], me: &Arc<Writer>, result: &Result<()>) {
        let mut done = Vec::new();
        let queue = self.writers.lock();
        for w in group {
            let r = result.as_ref().map(|_| ()).map_err(Error::duplicate);
            match w.completer.lock().take() {
                Some(c) => done.push((c, r)),
                None if !Arc::ptr_eq(w, me) => *w.result.lock() = Some(r),
                None => {}
            }
        }
        // NB: a waiting writer checks its result under the queue lock before it waits.
        drop(queue);
        self.writers_cv.notify_all();
        for (c, r) in done {
            c.complete(r);
        }
    }

    /// Has a worker lead the group of `writer`, an asynchronous writer at the queue's front.
    fn defer_lead(&self, host: &dyn WalHost, writer: Arc<Writer>) {
        let wal = self.me.upgrade().expect("the WAL outlives its writers");
        // NB: the group's leader completes every handle, this writer's included. A writer
        // waiting in the queue may have led the group already.
        host.defer(Box::new(move |host| {
            if claim_lead(&writer) {
                drop(wal.lead(host, &writer, None));
            }
        }));
    }

    /// Numbers the group's batches and logs them; `None` for a group without batches (a
    /// memtable switch). The group's memtable counts it as a pending write until it publishes.
    fn log_group(&self, host: &dyn WalHost, group: &[Arc<Writer>]) -> Result<Option<Logged>> {
        let mut batches: Vec<WriteBatch> =
            group.iter().filter_map(|w| w.batch.lock().take()).collect();
        if batches.is_empty() {
            return Ok(None);
        }
        let durability = group.iter().map(|w| w.durability).max().unwrap_or_default();
        let ops = batches.iter().map(|b| b.len() as u64).sum();
        let (ticket, first) = self.order.number(host.last_sequence(), ops);
        let mut seq = first;
        let mut payloads: Vec<&[u8]> = Vec::with_capacity(batches.len());
        let mut user_bytes = 0;
        for b in &mut batches {
            let n = b.len() as u64;
            user_bytes += b.user_bytes();
            payloads.push(b.encode_with_seq(seq));
            seq += n;
        }
        if let Err(e) = self.append(host, &payloads, durability, first) {
            // NB: the failure stops writes; later groups still publish in turn.
            self.order.wait_turn(ticket);
            self.order.end_turn(ticket);
            return Err(e);
        }
        // NB: only a leader switches the memtable, so this is the one the group was logged for.
        let mem = host.active_memtable();
        mem.begin_write();
        Ok(Some(Logged {
            batches,
            ops,
            first,
            ticket,
            mem,
            durability,
            user_bytes,
        }))
    }

    /// Inserts a logged group into its memtable, then publishes it on its turn.
    fn apply_group(
        &self,
        host: &dyn WalHost,
        group: &[Arc<Writer>],
        logged: Option<Logged>,
    ) -> Result<()> {
        let Some(Logged {
            batches,
            ops,
            first,
            ticket,
            mem,
            durability,
            user_bytes,
        }) = logged
        else {
            return Ok(());
        };
        let count = batches.len();
        if self.worth_parallel(&batches, ops) {
            let waiting = group.iter().skip(1).filter(|w| !is_async(w)).count();
            self.insert_in_parallel(host, Arc::clone(&mem), first, batches, waiting);
            Counters::add(&host.counters().parallel_insert_groups, 1);
        } else {
            let mut s = first;
            for b in &batches {
                s = mem.insert_batch(s, b);
            }
        }
        // NB: every batch of the group is in the memtable here, whoever inserted it, and every
        // earlier group has published once the turn comes.
        self.order.wait_turn(ticket);
        host.publish(first + ops - 1);
        self.order.end_turn(ticket);
        if mem.end_write() {
            // The memtable was switched while the group was inserted: it may be flushed now.
            host.wake_background();
        }
        let c = host.counters();
        Counters::add(&c.writes, count as u64);
        Counters::add(&c.write_groups, 1);
        Counters::add(&c.user_bytes_written, user_bytes);
        if durability == Durability::Sync {
            Counters::add(&c.synced_groups, 1);
        }
        Ok(())
    }

    /// Inserts `batches` (numbered from `first`) into `mem` with help from the writers waiting
    /// in the queue (`waiting` of them belong to this group) and, for the rest, pipeline
    /// workers; returns once every batch is in.
    fn insert_in_parallel(
        &self,
        host: &dyn WalHost,
        mem: Arc<MemTable>,
        first: u64,
        batches: Vec<WriteBatch>,
        waiting: usize,
    ) {
        let mut seq = first;
        let numbered = batches
            .into_iter()
            .map(|b| {
                let at = seq;
                seq += b.len() as u64;
                (at, b)
            })
            .collect();
        let inserts = GroupInserts::new(mem, numbered);
        *self.inserting.lock() = Some(Arc::clone(&inserts));
        // NB: a writer looks for the group under the queue lock before it waits; taking the
        // lock once here means it either saw the group or is waiting when we notify.
        drop(self.writers.lock());
        if waiting > 0 {
            self.writers_cv.notify_all();
        }
        let batches_without_thread = inserts.batch_count().saturating_sub(1 + waiting);
        for _ in 0..batches_without_thread.min(self.insert_workers) {
            let inserts = Arc::clone(&inserts);
            host.defer(Box::new(move |_| {
                inserts.help();
            }));
        }
        inserts.finish();
        let mut slot = self.inserting.lock();
        // NB: with overlapping groups the slot may already show a later group.
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, &inserts)) {
            *slot = None;
        }
    }

    /// True if a group of `batches` holding `ops` operations is inserted in parallel: a single
    /// batch or a handful of operations costs the leader less than waking helpers.
    fn worth_parallel(&self, batches: &[WriteBatch], ops: u64) -> bool {
        self.concurrent_inserts && batches.len() > 1 && ops >= self.parallel_min_ops
    }

    /// The group being inserted in parallel, if some batch is still unclaimed.
    fn group_needing_help(&self) -> Option<Arc<GroupInserts>> {
        self.inserting
            .lock()
            .as_ref()
            .filter(|inserts| inserts.has_unclaimed())
            .cloned()
    }

    fn append(
        &self,
        host: &dyn WalHost,
        payloads: &[&[u8]],
        durability: Durability,
        first: u64,
    ) -> Result<()> {
        let mut guard = self.files.lock();
        let files = guard
            .as_mut()
            .ok_or_else(|| Error::Closed("the WAL is closed".into()))?;
        // An empty batch numbered like the group's first write: replay skips it.
        let marker = || WriteBatch::new().encode_with_seq(first).to_vec();
        let result = files.append(payloads, durability, marker);
        if let Err(e) = &result {
            // A failed write or sync leaves the log's durable state unknown: stop writing.
            host.fail(e);
        }
        result
    }

    /// Starts log file `number`, sealing the active one.
    fn rotate_file(&self, number: u64) -> Result<()> {
        let mut guard = self.files.lock();
        // NB: the old log is sealed unsynced, and the new one's directory entry is not synced
        // either: `WalSet` syncs both before any newer log is synced.
        let files = guard
            .as_mut()
            .ok_or_else(|| Error::Closed("the WAL is closed".into()))?;
        files.rotate(number, create_log(&self.tiers, number, self.preallocation)?)
    }
}

/// Creates log file `number` on tier 0.
fn create_log(tiers: &Tiers, number: u64, preallocation: u64) -> Result<LogWriter> {
    let path = tiers.path(TierId::FAST, FileKind::Wal, number);
    let file = tiers
        .create(
            TierId::FAST,
            &path,
            WriteKind::Wal,
            WAL_BUFFER,
            crate::env::Lifetime::Short,
        )?
        .with_preallocation(preallocation);
    Ok(LogWriter::new(file, path))
}

impl Wal for GroupWal {
    fn write(&self, host: &dyn WalHost, req: WriteRequest<'_>) -> Result<()> {
        let writer = Arc::new(Writer {
            batch: Mutex::new(req.batch),
            durability: req.durability,
            force_switch: req.force_switch,
            checked: req.check.is_some(),
            result: Mutex::new(None),
            completer: Mutex::new(None),
            lead_claimed: AtomicBool::new(false),
        });
        self.queue_and_wait(host, writer, req.check)
    }

    fn submit(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'static>,
        done: Completer<()>,
    ) -> Result<()> {
        debug_assert!(req.check.is_none(), "asynchronous writes carry no check");
        let me = Arc::new(Writer {
            batch: Mutex::new(req.batch),
            durability: req.durability,
            force_switch: req.force_switch,
            checked: false,
            result: Mutex::new(None),
            completer: Mutex::new(Some(done)),
            lead_claimed: AtomicBool::new(false),
        });
        let mut queue = self.writers.lock();
        queue.push_back(Arc::clone(&me));
        let front = queue.len() == 1;
        drop(queue);
        if front {
            self.defer_lead(host, me);
        }
        Ok(())
    }

    fn start(&self, _mem: &Arc<MemTable>) -> Result<()> {
        Ok(())
    }

    fn release_below(&self, log_number: u64) {
        if let Some(files) = self.files.lock().as_mut() {
            // The flushed memtables' logs no longer need syncing before newer ones.
            files.release_below(log_number);
        }
    }

    fn spawn_threads(self: Arc<Self>, _host: Arc<dyn WalHost>) -> Vec<JoinHandle<()>> {
        Vec::new()
    }

    fn idle(&self) -> bool {
        self.writers.lock().is_empty() && !self.order.in_flight()
    }

    fn close(&self) -> Result<()> {
        match self.files.lock().take() {
            Some(files) => files.close(),
            None => Ok(()),
        }
    }

    fn io_path(&self) -> &'static str {
        "group"
    }
}

/// The group WAL's side of a memtable switch: a new log file per memtable, never full.
struct FileRoom<'a> {
    wal: &'a GroupWal,
}

impl LogRoom for FileRoom<'_> {
    fn is_full(&self) -> bool {
        false
    }

    fn can_rotate(&self) -> bool {
        true
    }

    fn rotate(&mut self, mem: &Arc<MemTable>) -> Result<()> {
        self.wal.rotate_file(mem.wal_number())
    }
}

/// True for an asynchronous writer: no thread waits for it, a handle does.
fn is_async(writer: &Writer) -> bool {
    writer.completer.lock().is_some()
}

/// Claims the lead of an asynchronous writer's group: true for the one caller that leads it.
fn claim_lead(writer: &Writer) -> bool {
    !writer.lead_claimed.swap(true, Ordering::AcqRel)
}

/// The queue's front writer, if it is asynchronous and this caller claimed its lead.
fn claim_async_front(queue: &VecDeque<Arc<Writer>>) -> Option<Arc<Writer>> {
    queue
        .front()
        .filter(|w| is_async(w) && claim_lead(w))
        .cloned()
}

/// The front writers whose batches fit in one group.
fn take_group(queue: &VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
    let mut bytes = 0;
    let mut group = Vec::new();
    for w in queue {
        let size = w.batch.lock().as_ref().map_or(0, WriteBatch::encoded_len);
        if !group.is_empty() && (bytes + size > MAX_GROUP_BYTES || w.force_switch || w.checked) {
            break;
        }
        bytes += size;
        group.push(Arc::clone(w));
    }
    group
}
