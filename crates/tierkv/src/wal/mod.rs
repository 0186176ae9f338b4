//! Write-ahead logging: the record format (`log`, shared with the MANIFEST) and the WAL modes
//! behind one seam, [`Wal`].
//!
//! The write path (`db::write`) numbers nothing and logs nothing itself: it hands each write to
//! the database's [`Wal`], which logs it, applies it to the active memtable and publishes its
//! sequence number in the order its mode guarantees. What a mode needs from the database
//! (making room, the active memtable, publishing, the sticky error, worker threads) it asks of
//! a [`WalHost`]; when making room switches the memtable, the host asks the mode's [`LogRoom`]
//! to start a new log. So a mode is added here, with its recovery, without touching `db/`.
//!
//! Modes (`Options::wal`):
//! - `group` ([`group`]): RocksDB's group commit. Writers queue; the one at the front leads,
//!   logs the whole group to one log file per memtable, and syncs once.
//! - `parallel` ([`parallel`]): SpanDB's parallel WAL. Writers are numbered at admission;
//!   loggers pack them into 4 KiB pages of a preallocated area and write several runs at once.
//! - `append` ([`append`]): WALTZ's leaderless write path on a conventional file. Each writer
//!   reserves its bytes with one add on the log's tail and writes and syncs its own record.
//! - `zoned` ([`append::zones`]): the same, each record zone-appended to an emulated zoned
//!   device, with a zone manager thread.
//!
//! Recovery ([`replay`]) reads every mode's logs, whatever mode the database is opened in now,
//! so that a database can change modes across a reopen: log files first, then the area.
//!
//! INVARIANT (every mode): a write becomes visible only once every write with a smaller
//! sequence number is visible, and a `Sync` write is acknowledged only once every write with a
//! smaller sequence number is durable too; so recovery always rebuilds a prefix of history.

pub mod append;
pub mod group;
pub mod log;
pub mod parallel;
pub mod uring;

use crate::batch::WriteBatch;
use crate::env::Fs;
use crate::error::{Error, Result};
use crate::handle::Completer;
use crate::memtable::MemTable;
use crate::options::{Durability, Options, WalMode};
use crate::stats::Counters;
use crate::tier::Tiers;
use log::RecoveryMode;
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;

/// A validation run just before a write is numbered, once every earlier write is visible
/// (transactions); its error refuses the write.
pub(crate) type Check<'a> = &'a (dyn Fn() -> Result<()> + Sync);

/// Work a mode hands to the host's worker threads (a write whose admission would wait, a group
/// an asynchronous writer leads).
pub(crate) type Deferred = Box<dyn FnOnce(&dyn WalHost) + Send>;

/// One write as the write path hands it to a WAL.
pub(crate) struct WriteRequest<'a> {
    /// How durable the write must be when it is acknowledged.
    pub durability: Durability,
    /// The batch; `None` only switches the memtable (with `force_switch`).
    pub batch: Option<WriteBatch>,
    /// Switch the memtable even though it is not full (`Db::flush`).
    pub force_switch: bool,
    /// Run once every earlier write is visible; its error refuses the write.
    pub check: Option<Check<'a>>,
}

impl WriteRequest<'_> {
    /// A plain write of `batch`.
    pub fn batch(durability: Durability, batch: WriteBatch) -> WriteRequest<'static> {
        WriteRequest {
            durability,
            batch: Some(batch),
            force_switch: false,
            check: None,
        }
    }

    /// User bytes of the write, for pacing.
    fn user_bytes(&self) -> u64 {
        self.batch.as_ref().map_or(0, WriteBatch::user_bytes)
    }
}

/// A WAL mode: logs writes, applies them to the active memtable and publishes them in order.
pub(crate) trait Wal: Send + Sync {
    /// Commits `req`; returns once it is visible (and durable, with `Sync`).
    fn write(&self, host: &dyn WalHost, req: WriteRequest<'_>) -> Result<()>;

    /// Starts committing `req` without waiting; `done` completes when the write is visible
    /// (and durable, with `Sync`). Work that would block goes to `host.defer`. An error
    /// refuses the write at once (and completes `done` with it too).
    fn submit(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'static>,
        done: Completer<()>,
    ) -> Result<()>;

    /// Starts logging for `mem`, the first memtable after open.
    fn start(&self, mem: &Arc<MemTable>) -> Result<()>;

    /// Forgets the logs of memtables numbered below `log_number`: they are in tables now.
    fn release_below(&self, log_number: u64);

    /// Starts the mode's own threads (loggers), if it has any.
    fn spawn_threads(self: Arc<Self>, host: Arc<dyn WalHost>) -> Vec<JoinHandle<()>>;

    /// Called by the head thread on each tick with the rate of writes admitted per second.
    fn tick(&self, _admitted_per_sec: f64) {}

    /// True when nothing is queued, in flight or unpublished.
    fn idle(&self) -> bool;

    /// Stops the mode's threads once they have drained (close, after `idle`).
    fn stop(&self) {}

    /// Closes the logs, handing buffered bytes to the OS.
    fn close(&self) -> Result<()>;

    /// The I/O path writes take, for stats: "group", "io_uring" or "pwrite".
    fn io_path(&self) -> &'static str;

    /// Loggers active now (0 for a mode without loggers).
    fn active_loggers(&self) -> usize {
        0
    }

    /// The zone manager's work, for a mode that writes to a zoned device.
    fn zone_stats(&self) -> Option<crate::stats::ZonedWalStats> {
        None
    }
}

/// What a WAL mode needs from the database.
pub(crate) trait WalHost: Send + Sync {
    /// Ensures the active memtable (and the mode's log, through `room`) can take a write of
    /// `bytes` user bytes, stalling or switching as needed. False instead of waiting when
    /// `may_block` is false and a wait is due.
    fn make_room(
        &self,
        room: &mut dyn LogRoom,
        force_switch: bool,
        bytes: u64,
        may_block: bool,
    ) -> Result<bool>;
    /// The memtable writes go to now.
    fn active_memtable(&self) -> Arc<MemTable>;
    /// The last published (visible) sequence number.
    fn last_sequence(&self) -> u64;
    /// Makes every write up to `seq` visible.
    fn publish(&self, seq: u64);
    /// Records a failure that leaves the log's durable state unknown: writes stop until reopen.
    fn fail(&self, err: &Error);
    /// Runs `job` on a worker thread.
    fn defer(&self, job: Deferred);
    /// The database's counters.
    fn counters(&self) -> &Counters;
    /// Counts a write admitted (the head thread's gauge of write intensity).
    fn note_admitted(&self);
    /// Wakes background workers: a memtable may have become flushable.
    fn wake_background(&self);
}

/// The mode's side of a memtable switch, lent to [`WalHost::make_room`].
pub(crate) trait LogRoom {
    /// True if the active log cannot take the next write: the memtable must switch.
    fn is_full(&self) -> bool;
    /// True if a new log can start now; otherwise the switch waits for a flush.
    fn can_rotate(&self) -> bool;
    /// Starts the log of `mem` (numbered `mem.wal_number()`), sealing the active one.
    fn rotate(&mut self, mem: &Arc<MemTable>) -> Result<()>;
}

/// Opens the WAL of `opts.wal.mode` for a database whose recovery ended with the MANIFEST naming
/// `log_number` (the first memtable's number) and sequence `last_seq`; `replayed` is what
/// [`replay`] found.
pub(crate) fn open(
    opts: &Options,
    tiers: &Arc<Tiers>,
    log_number: u64,
    last_seq: u64,
    replayed: &Replayed,
) -> Result<Arc<dyn Wal>> {
    if opts.read_only {
        return Ok(Arc::new(ReadOnly));
    }
    append::remove_below(tiers.fs().as_ref(), &tiers.fast().dir, log_number)?;
    match opts.wal.mode {
        WalMode::Group => {
            parallel::remove_area(tiers)?;
            append::zones::remove(tiers)?;
            Ok(group::GroupWal::open(opts, tiers, log_number)?)
        }
        WalMode::Parallel => Ok(parallel::ParallelWal::open(
            opts,
            tiers,
            last_seq,
            replayed.area_meta.as_ref(),
        )?),
        WalMode::Append => {
            parallel::remove_area(tiers)?;
            append::zones::remove(tiers)?;
            Ok(append::AppendWal::open(opts, tiers, last_seq)?)
        }
        WalMode::Zoned => {
            parallel::remove_area(tiers)?;
            Ok(append::AppendWal::open_zoned(opts, tiers, last_seq)?)
        }
    }
}

/// What recovery hands each replayed write to.
pub(crate) trait ReplaySink {
    /// Marks file number `n` as used: a log numbered `n` is on disk.
    fn mark_number_used(&mut self, n: u64);
    /// Applies the write numbered `seq` onward.
    fn apply(&mut self, seq: u64, batch: &WriteBatch) -> Result<()>;
    /// The last sequence number the database holds (the MANIFEST's, raised by each write
    /// applied since), if the sink knows it. The oldest live log's first write follows it:
    /// without it, recovery cannot tell which write a damaged first record held, nor prove
    /// that write durable.
    fn last_sequence(&self) -> Option<u64> {
        None
    }
}

/// Collects replayed writes as (first sequence, number of operations): the sink of the
/// replay tests. The second field is the database's last sequence number, when the test
/// gives one.
#[cfg(test)]
#[derive(Default)]
pub(crate) struct CollectSink(pub Vec<(u64, usize)>, pub Option<u64>);

#[cfg(test)]
impl ReplaySink for CollectSink {
    fn mark_number_used(&mut self, _: u64) {}
    fn apply(&mut self, seq: u64, batch: &WriteBatch) -> Result<()> {
        self.0.push((seq, batch.len()));
        if let Some(last) = &mut self.1 {
            *last = (*last).max((seq + batch.len() as u64).saturating_sub(1));
        }
        Ok(())
    }
    fn last_sequence(&self) -> Option<u64> {
        self.1
    }
}

/// Where recovery reads logs and what it tolerates.
pub(crate) struct ReplayCtx<'a> {
    /// The file system.
    pub fs: &'a dyn Fs,
    /// The directory holding the logs (tier 0).
    pub dir: &'a Path,
    /// Logs of memtables numbered below this are in tables (the MANIFEST's log number).
    pub log_number: u64,
    /// What to do about damage.
    pub mode: RecoveryMode,
}

/// What recovery found beyond the writes.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// The parallel WAL area's metadata, if an area exists.
    pub area_meta: Option<parallel::Meta>,
}

/// Replays every mode's live logs into `sink`, in sequence order.
pub(crate) fn replay(ctx: &ReplayCtx<'_>, sink: &mut dyn ReplaySink) -> Result<Replayed> {
    group::replay(ctx, sink)?;
    append::replay(ctx, sink)?;
    let area_meta = parallel::replay(ctx, sink)?;
    Ok(Replayed { area_meta })
}

/// The WAL of a database opened read-only: every write is refused.
struct ReadOnly;

impl ReadOnly {
    fn refuse() -> Error {
        Error::invalid("the database was opened read-only")
    }
}

impl Wal for ReadOnly {
    fn write(&self, _: &dyn WalHost, _: WriteRequest<'_>) -> Result<()> {
        Err(Self::refuse())
    }
    fn submit(&self, _: &dyn WalHost, _: WriteRequest<'static>, done: Completer<()>) -> Result<()> {
        done.complete(Err(Self::refuse()));
        Err(Self::refuse())
    }
    fn start(&self, _: &Arc<MemTable>) -> Result<()> {
        Ok(())
    }
    fn release_below(&self, _: u64) {}
    fn spawn_threads(self: Arc<Self>, _: Arc<dyn WalHost>) -> Vec<JoinHandle<()>> {
        Vec::new()
    }
    fn idle(&self) -> bool {
        true
    }
    fn close(&self) -> Result<()> {
        Ok(())
    }
    fn io_path(&self) -> &'static str {
        "none"
    }
}
