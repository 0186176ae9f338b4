//! The database facade: [`Db`] ties the tiers, WAL, memtables, versions and background work
//! together behind the public API.
//!
//! State ownership:
//! - `DbInner::state` (`Mutex<State>`): the active and immutable memtables, background-work
//!   bookkeeping and the sticky error. Held only for short bookkeeping, never across I/O.
//! - `DbInner::wal`: the WAL (`crate::wal`), whichever its mode; it owns its logs and its
//!   own locks, and reaches the database only through `WalHost` (implemented in `write`).
//! - `VersionSet`: the current version, MANIFEST and sequence numbers.
//!
//! Submodules: `open` (recovery), `write` (room-making and memtable switches, shared by every
//! WAL mode), `pipeline` (asynchronous requests, workers, head thread), `read` (point reads,
//! iterators), `background` (flush, compaction, obsolete files).

mod background;
mod hot;
mod hot_bottom;
mod iter;
mod migrate;
mod monitor;
mod multiget;
mod open;
mod pacer;
mod pipeline;
mod read;
mod replica;
mod table_cache;
mod txn;
mod vlog_gc;
mod write;

pub use iter::{DbIterator, Entries};
pub use txn::Transaction;

use crate::batch::WriteBatch;
use crate::env::FileLock;
use crate::error::{Error, Result};
use crate::handle::{Handle, ScanEntries};
use crate::memtable::MemTable;
use crate::options::{Options, ReadOptions, WriteOptions};
use crate::snapshot::{Snapshot, SnapshotList};
use crate::sst::BlockCache;
use crate::stats::{self, Counters, LevelStats, Stats, TierStats};
use crate::tier::{TierId, Tiers, WriteKind};
use crate::version::VersionSet;
use crate::wal::{Wal, WalHost};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use table_cache::TableCache;

/// Mutable shared state. See the module doc for the locking rule.
pub(crate) struct State {
    mem: Arc<MemTable>,
    /// Immutable memtables, oldest first.
    imm: VecDeque<Arc<MemTable>>,
    /// Set after a failed sync, MANIFEST write or background job; writes fail until reopen
    /// (or until [`Db::resume`], when `stop_resumable`).
    bg_error: Option<Error>,
    /// `bg_error` is a flush, compaction or migration that ran out of space before its
    /// MANIFEST edit: nothing on disk is in doubt, so the job may simply run again.
    stop_resumable: bool,
    /// With `compaction.auto_resume_ms`: when a worker retries the resumable stop, and how
    /// many retries in a row failed again (the backoff's exponent).
    auto_resume_at: Option<std::time::Instant>,
    auto_resume_failures: u32,
    shutting_down: bool,
    flush_running: bool,
    compactions_running: usize,
    /// Files that a running compaction reads.
    busy_files: HashSet<u64>,
    /// Numbers of table files being written and not yet in a version.
    pending_outputs: HashSet<u64>,
    /// What automatic placement wants migrated (set by the head thread, taken by a worker).
    migration: crate::placement::auto::MigrationHint,
    /// A replica is being copied (`replica`: one at a time).
    replica_running: bool,
    /// A flush left the hot store past its watermark: a demotion job should run
    /// (`hot::demotion_job`; set only when demotions run in the background).
    demotion_wanted: bool,
    /// A background demotion job runs (one at a time; promotions wait for it).
    demotion_running: bool,
    /// A background demotion has planned its objects and not yet installed their table: no
    /// L0 compaction starts meanwhile (`background::Held::hold_l0`).
    l0_held: bool,
}

pub(crate) struct DbInner {
    opts: Options,
    tiers: Arc<Tiers>,
    versions: VersionSet,
    table_cache: Arc<TableCache>,
    block_cache: Option<Arc<BlockCache>>,
    snapshots: Arc<SnapshotList>,
    state: Mutex<State>,
    /// Wakes background workers: new work or shutdown.
    bg_cv: Condvar,
    /// Wakes waiters on background progress (stalled writers, `flush`, `compact_range`).
    progress_cv: Condvar,
    /// The write-ahead log, in the mode the options chose.
    wal: Arc<dyn Wal>,
    /// The asynchronous request pipeline: workers and the head thread.
    pipeline: pipeline::Pipeline,
    /// Per-tier I/O rates over a sliding window; sampled by the head thread.
    iomon: crate::placement::iomon::IoMonitor,
    /// The monitor's sampling state (owned by the head thread).
    io_sampler: Mutex<monitor::IoSampler>,
    /// Where new tables go (fixed split or the automatic controller).
    placer: crate::placement::Placer,
    /// Paces migration copies: `Options::auto_migration_busy_rate` while foreground requests
    /// flow, unpaced otherwise.
    migration_limiter: crate::placement::ratelimit::RateLimiter,
    /// While L0 slows writes: when the next write may start, and how fast writes go.
    pacer: pacer::WritePacer,
    /// While the hot store demotes past its high watermark: when the next write may start.
    hot_pacer: pacer::DemotionPacer,
    counters: Counters,
    _lock: Box<dyn FileLock>,
    /// The hot store on the fast tier (`hot_tier = "slab"`), between memtables and the LSM.
    hot: Option<Arc<crate::hot::HotPartitions>>,
    /// SPLIT VALUES: the value log with `values = "split"` (`crate::vlog`), else `None`.
    vlog: Option<Arc<crate::vlog::ValueLog>>,
    /// ZONED TABLES: each tier with `tables = "zones"` and its zone file system.
    zoned: Vec<(String, Arc<crate::zonefs::ZoneFs>)>,
}

/// A live table file, as [`Db::live_files`] reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveFile {
    /// LSM level.
    pub level: usize,
    /// Name of the tier holding it.
    pub tier: String,
    /// File number.
    pub number: u64,
    /// Size in bytes.
    pub size: u64,
    /// Smallest user key.
    pub smallest: Vec<u8>,
    /// Largest user key.
    pub largest: Vec<u8>,
    /// Entries (values and tombstones).
    pub entries: u64,
    /// Path of the file.
    pub path: std::path::PathBuf,
    /// Path of its replica on the fast tier, which serves its reads, if it has a complete
    /// one (`Options::auto_replicas`).
    pub replica: Option<std::path::PathBuf>,
}

/// An open database.
///
/// `Send + Sync`: share it between threads by reference or in an `Arc`. Dropping it completes
/// (or fails with [`Error::Closed`]) the requests in flight, stops background work, hands
/// buffered WAL bytes to the OS and leaves a state that reopens cleanly.
///
/// The methods, by purpose (the [crate documentation](crate) has the overview):
/// - Writes: [`put`](Db::put), [`delete`](Db::delete), [`write`](Db::write) (a
///   [`WriteBatch`], atomically). Each returns once the write is visible to later reads and
///   as durable as its [`WriteOptions`] asked.
/// - Reads: [`get`](Db::get), [`multi_get`](Db::multi_get), [`iter`](Db::iter), at the latest
///   state or at a [`snapshot`](Db::snapshot).
/// - Asynchronous requests: the `submit_*` methods return a [`Handle`] at once.
/// - Transactions: [`transaction`](Db::transaction).
/// - Maintenance and inspection: [`flush`](Db::flush), [`compact_range`](Db::compact_range),
///   [`wait_for_compactions`](Db::wait_for_compactions), [`verify_checksums`](Db::verify_checksums),
///   [`stats`](Db::stats), [`live_files`](Db::live_files), [`options`](Db::options).
///
/// Errors common to every write: [`Error::InvalidArgument`] for a key or value over
/// [`MAX_KEY_LEN`](crate::MAX_KEY_LEN) / [`MAX_VALUE_LEN`](crate::MAX_VALUE_LEN) or a database
/// opened [`read_only`](Options::read_only); [`Error::Stopped`] once writes are stopped (a failed
/// WAL sync or background job; reopen to continue, or [`resume`](Db::resume) once a full tier
/// has room again); [`Error::Io`] when the WAL cannot be written or synced, after which writes
/// are stopped.
pub struct Db {
    inner: Arc<DbInner>,
    /// Background (flush and compaction) threads.
    threads: Vec<JoinHandle<()>>,
    /// Pipeline threads: loggers, workers and the head thread.
    pipeline_threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db")
            .field("tiers", &self.inner.opts.tiers)
            .finish()
    }
}

impl Db {
    /// Opens (or creates) the database described by `opts`: validates the options, takes the
    /// `LOCK` on tier 0, checks each tier's identity, reads the MANIFEST and replays the WAL
    /// into memory (as [`crate::WalOptions::recovery_mode`] says), then starts the background threads
    /// (none when [`Options::read_only`]).
    ///
    /// Errors: [`Error::InvalidArgument`] for bad options; [`Error::NotFound`] when there is no
    /// database and [`Options::create_if_missing`] is false; [`Error::AlreadyExists`] with
    /// [`Options::error_if_exists`]; [`Error::Locked`] when another `Db` holds it;
    /// [`Error::Corruption`] for damage the recovery mode does not tolerate; [`Error::Io`].
    pub fn open(opts: Options) -> Result<Db> {
        let inner = Arc::new(open::open(opts)?);
        let workers = if inner.opts.read_only {
            0
        } else {
            // A background demotion gets its own worker, so a flush never waits for it.
            inner.opts.compaction.background_threads
                + usize::from(inner.hot_demotes_in_background())
        };
        let threads = (0..workers)
            .map(|i| {
                let inner = Arc::clone(&inner);
                std::thread::Builder::new()
                    .name(format!("tierkv-bg-{i}"))
                    .spawn(move || background::worker(&inner))
                    .expect("spawn background thread")
            })
            .collect();
        // NB: read-only too: asynchronous reads (`submit_get`, `submit_scan`, ...) run on
        // its workers (a read-only WAL starts no threads and refuses writes).
        let pipeline_threads = spawn_pipeline(&inner);
        inner.maybe_schedule();
        Ok(Db {
            inner,
            threads,
            pipeline_threads,
        })
    }

    /// Stores `value` under `key`, replacing any earlier value. Visible to every read that
    /// starts after it returns; durable as [`WriteOptions::durability`] says. Errors: see
    /// [`Db`].
    pub fn put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(1, key.len() + value.len());
        batch.put(key, value);
        self.write(opts, batch)
    }

    /// Removes `key` (a no-op if absent). Visibility, durability and errors as for
    /// [`Db::put`].
    pub fn delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::with_capacity(1, key.len());
        batch.delete(key);
        self.write(opts, batch)
    }

    /// Applies `batch` atomically: readers see all of it or none of it, and after a crash
    /// either all of it or none of it is recovered. Visibility, durability and errors as for
    /// [`Db::put`]; a batch over [`Options::max_batch_bytes`] (at most
    /// [`MAX_BATCH_BYTES`](crate::MAX_BATCH_BYTES)) encoded is [`Error::InvalidArgument`],
    /// whatever the WAL mode.
    pub fn write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<()> {
        self.inner.check_batch(&batch)?;
        self.inner.write_any(opts.durability, batch)
    }

    /// Starts storing `value` under `key`; the handle completes when the write is visible and
    /// as durable as `opts` asked, with the result [`Db::put`] would return. Fails at once with
    /// [`Error::Busy`] when [`crate::PipelineOptions::max_pending_requests`] requests are in flight, or with
    /// [`Error::InvalidArgument`] for a key or value over the limits.
    pub fn submit_put(&self, opts: &WriteOptions, key: &[u8], value: &[u8]) -> Result<Handle<()>> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.submit_write(opts, batch)
    }

    /// Starts removing `key`. See [`Db::submit_put`].
    pub fn submit_delete(&self, opts: &WriteOptions, key: &[u8]) -> Result<Handle<()>> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.submit_write(opts, batch)
    }

    /// Starts applying `batch` atomically. Requests in flight at the same time are not
    /// ordered among themselves; one submitted after another completed is ordered after it.
    pub fn submit_write(&self, opts: &WriteOptions, batch: WriteBatch) -> Result<Handle<()>> {
        self.inner.check_batch(&batch)?;
        self.inner.submit_write(opts.durability, batch)
    }

    /// Starts reading `key`; the handle completes with what [`Db::get`] would return. A key
    /// found in a memtable is answered at once: the handle is ready on return (a "lucky
    /// read"). [`Error::Busy`] as for [`Db::submit_put`].
    pub fn submit_get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Handle<Option<Vec<u8>>>> {
        self.check_snapshot(opts)?;
        self.inner.submit_get(opts, key)
    }

    /// Starts reading up to `limit` entries with keys at or after `start`, in key order,
    /// within the options' bounds and snapshot; the handle completes with the
    /// [`ScanEntries`]. [`Error::Busy`] as for [`Db::submit_put`].
    pub fn submit_scan(
        &self,
        opts: ReadOptions,
        start: &[u8],
        limit: usize,
    ) -> Result<Handle<ScanEntries>> {
        self.check_snapshot(&opts)?;
        self.inner.submit_scan(opts, start, limit)
    }

    /// Begins an optimistic transaction: its reads see the database as of now plus its own
    /// writes, which it buffers until [`Transaction::commit`]. The commit fails with
    /// [`Error::Conflict`], writing nothing, if another write changed a key the transaction
    /// read or wrote in the meantime. Dropping the transaction discards it.
    pub fn transaction(&self) -> Transaction<'_> {
        Transaction::new(self)
    }

    /// The value of `key`, or `None`: as of the options' snapshot, else the latest write that
    /// returned before the call. Errors: [`Error::InvalidArgument`] for a snapshot of another
    /// database; [`Error::Corruption`] (naming the table and offset) or [`Error::Io`] when a
    /// table cannot be read.
    pub fn get(&self, opts: &ReadOptions, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.check_snapshot(opts)?;
        self.inner.pipeline.note_foreground();
        self.inner.get(opts, key)
    }

    /// The values of `keys` (each `None` if absent), read from one consistent view: as of
    /// the options' snapshot, else as of the call. Data blocks that several lookups need are
    /// read once, and the blocks missing from the cache are read together in one batch
    /// (through io_uring where the file system allows), so a batch costs about one device
    /// round trip per level instead of one per key. Fails as a whole on the first error
    /// (`Corruption` names the table and offset).
    pub fn multi_get<K: AsRef<[u8]>>(
        &self,
        opts: &ReadOptions,
        keys: &[K],
    ) -> Result<Vec<Option<Vec<u8>>>> {
        self.check_snapshot(opts)?;
        self.inner.pipeline.note_foreground();
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        self.inner.multi_get(opts, &keys)
    }

    /// Starts a [`Db::multi_get`], served by a pipeline worker; the handle completes with its
    /// result. [`Error::Busy`] as for [`Db::submit_put`].
    pub fn submit_multi_get(
        &self,
        opts: &ReadOptions,
        keys: Vec<Vec<u8>>,
    ) -> Result<Handle<Vec<Option<Vec<u8>>>>> {
        self.check_snapshot(opts)?;
        self.inner.submit_multi_get(opts, keys)
    }

    /// A consistent read view as of now: pass it in [`ReadOptions::at`] to read as of this
    /// point. Compaction keeps the entries it needs until the last clone drops.
    pub fn snapshot(&self) -> Snapshot {
        let versions = &self.inner.versions;
        self.inner.snapshots.acquire(|| versions.last_sequence())
    }

    /// A cursor over the database (or a snapshot of it) within the options' bounds; without
    /// a snapshot it reads as of the call. It stays valid across flushes and compactions;
    /// position it with a seek method first. Read errors end it and show in
    /// [`DbIterator::status`].
    pub fn iter(&self, opts: ReadOptions) -> Result<DbIterator> {
        self.check_snapshot(&opts)?;
        self.inner.iter(opts)
    }

    /// Writes the active memtable to L0 and waits until every memtable is flushed: the data
    /// written before the call is then in tables, whatever its durability. Fails with the
    /// sticky error if background work failed, and on a read-only database.
    pub fn flush(&self) -> Result<()> {
        self.inner.flush_and_wait()
    }

    /// Flushes, then compacts every level overlapping `[begin, end]` (`None` = unbounded)
    /// down to the deepest level holding data there, and waits for it. Errors as for
    /// [`Db::flush`].
    pub fn compact_range(&self, begin: Option<&[u8]>, end: Option<&[u8]>) -> Result<()> {
        self.inner.flush_and_wait()?;
        background::compact_range(&self.inner, begin, end)
    }

    /// Waits until no flush or compaction is running or needed (every level under its
    /// target), e.g. between a bulk load and a measurement. Returns the sticky error if
    /// background work failed.
    pub fn wait_for_compactions(&self) -> Result<()> {
        background::wait_idle(&self.inner)
    }

    /// Resumes writes stopped because a flush, compaction or migration ran out of space, once
    /// there is room again, without reopening: clears the stop, runs the failed work again
    /// (the waiting memtables are flushed, the tree compacted as it needs) and returns once
    /// that is done. Writes are accepted again from the moment the stop is cleared.
    ///
    /// Returns `Ok` at once when writes are not stopped. Errors: [`Error::Stopped`] with the
    /// cause when the stop is not one this clears (a failed WAL or MANIFEST write or sync,
    /// corruption, an I/O error other than a full device, a background panic: reopen the
    /// database), or when the work run again fails (still no room: writes stop again).
    /// [`crate::CompactionOptions::auto_resume_ms`] makes a background worker do the same by
    /// itself, with backoff.
    pub fn resume(&self) -> Result<()> {
        background::resume(&self.inner)
    }

    /// Counters since open and the current shape: per-tier usage and I/O, per-level files,
    /// WAL, cache, placement and request figures.
    pub fn stats(&self) -> Stats {
        self.inner.stats()
    }

    /// Reads every value the database holds at its latest state, checking each value-log
    /// record a pointer names (its checksum, length and key), as `tierkv check` does. Returns
    /// the number of values checked and how many of them were in the value log. Without split
    /// values every value is inline.
    pub fn check_values(&self) -> Result<(u64, u64)> {
        self.inner.check_values()
    }

    /// Runs value-log garbage collection in the caller's thread until no value-log file has
    /// `vlog_gc_threshold` of garbage or more (garbage is counted when flushes and compactions
    /// drop pointers: compact first to count it all), then deletes the collected files that no
    /// snapshot, iterator or read started before the collection can still read (flushing the
    /// memtables first when the writes that made a collected file garbage are not durable
    /// yet). Returns how many collected files are kept: for such readers, or the
    /// highest-numbered file until a newer one exists (deleted later). Without split values it
    /// does nothing.
    pub fn collect_value_log(&self) -> Result<usize> {
        self.inner.collect_value_log()
    }

    /// The options the database was opened with.
    pub fn options(&self) -> &Options {
        &self.inner.opts
    }

    /// Verifies the checksum of every block of every live table (its own file, not a
    /// replica); returns the number of blocks checked, or the first corruption found.
    pub fn verify_checksums(&self) -> Result<u64> {
        let version = self.inner.versions.current();
        let mut blocks = 0;
        for (_, f) in version.all_files() {
            blocks += self.inner.table_cache.get_own(f)?.verify_checksums()?;
        }
        Ok(blocks)
    }

    /// ZONED TABLES: each tier with `tables = "zones"` and its zone file system, for
    /// `inspect::zoned_tiers`.
    pub(crate) fn zoned_file_systems(&self) -> &[(String, Arc<crate::zonefs::ZoneFs>)] {
        &self.inner.zoned
    }

    /// Every live table: level, tier, number, size, user-key range, path and replica.
    pub fn live_files(&self) -> Vec<LiveFile> {
        let version = self.inner.versions.current();
        version
            .all_files()
            .map(|(level, f)| LiveFile {
                level,
                tier: self.inner.tiers.get(f.tier).name.clone(),
                number: f.number,
                size: f.size,
                smallest: f.smallest_user().to_vec(),
                largest: f.largest_user().to_vec(),
                entries: f.num_entries,
                path: self
                    .inner
                    .tiers
                    .path(f.tier, crate::tier::FileKind::Table, f.number),
                replica: self.inner.table_cache.has_ready_replica(f.number).then(|| {
                    self.inner
                        .tiers
                        .path(TierId::FAST, crate::tier::FileKind::Replica, f.number)
                }),
            })
            .collect()
    }

    fn check_snapshot(&self, opts: &ReadOptions) -> Result<()> {
        match &opts.snapshot {
            Some(s) if !s.belongs_to(&self.inner.snapshots) => Err(Error::invalid(
                "the snapshot in ReadOptions was taken from another database",
            )),
            _ => Ok(()),
        }
    }
}

/// Starts the loggers (parallel WAL), the workers and the head thread.
fn spawn_pipeline(inner: &Arc<DbInner>) -> Vec<JoinHandle<()>> {
    let spawn = |name: String, f: Box<dyn FnOnce(&DbInner) + Send>| {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name(name)
            .spawn(move || f(&inner))
            .expect("spawn pipeline thread")
    };
    let host: Arc<dyn WalHost> = Arc::clone(inner) as Arc<dyn WalHost>;
    let mut threads = Arc::clone(&inner.wal).spawn_threads(host);
    for i in 0..inner.opts.pipeline.workers {
        threads.push(spawn(
            format!("tierkv-work-{i}"),
            Box::new(pipeline::worker),
        ));
    }
    threads.push(spawn("tierkv-head".into(), Box::new(pipeline::head)));
    threads
}

impl Drop for Db {
    fn drop(&mut self) {
        // Requests in flight complete (or fail with `Closed`) before anything stops.
        self.inner.close_pipeline();
        for t in self.pipeline_threads.drain(..) {
            let _ = t.join();
        }
        {
            let mut state = self.inner.state.lock();
            state.shutting_down = true;
        }
        self.inner.bg_cv.notify_all();
        self.inner.progress_cv.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        // SPLIT VALUES: value-log collection's state for the next open.
        if let Some(vlog) = &self.inner.vlog {
            vlog.close(self.inner.value_delete_bar(vlog));
        }
        // Hand buffered WAL bytes to the OS so a clean close keeps `Buffered` writes too.
        let _ = self.inner.wal.close();
        let _ = self.inner.versions.close();
    }
}

impl DbInner {
    /// Checks `batch` against the key, value and batch limits, the batch limit being this
    /// database's ([`Options::max_batch_bytes`]), the same in every WAL mode.
    fn check_batch(&self, batch: &WriteBatch) -> Result<()> {
        batch.validate()?;
        let limit = self.opts.max_batch_bytes();
        if batch.encoded_len() > limit {
            return Err(Error::invalid(format!(
                "write batch of {} bytes exceeds this database's limit of {limit} bytes \
                 (one parallel-WAL page group, wal.group_bytes, or with wal = \"zoned\" one \
                 zone append; at most {} bytes)",
                batch.encoded_len(),
                crate::MAX_BATCH_BYTES
            )));
        }
        Ok(())
    }

    /// The sticky error as a `Closed` error, if writes are stopped.
    fn check_writable(&self, state: &State) -> Result<()> {
        if self.opts.read_only {
            return Err(Error::invalid("the database was opened read-only"));
        }
        if state.shutting_down {
            return Err(Error::Closed("the database is shutting down".into()));
        }
        match &state.bg_error {
            Some(e) => Err(Error::stopped(e)),
            None => Ok(()),
        }
    }

    /// A synchronous write through the configured WAL.
    fn write_any(&self, durability: crate::options::Durability, batch: WriteBatch) -> Result<()> {
        self.pipeline.note_foreground();
        self.write(durability, batch)
    }

    /// Makes writes fail from now on, keeping the first cause.
    fn set_bg_error(&self, err: &Error) {
        self.stop_writes(err, false);
    }

    /// Makes writes fail from now on, keeping the first cause; `resumable` when
    /// [`Db::resume`] may clear it (see `State::stop_resumable`). Wakes every waiter.
    ///
    /// A later failure is not kept, but one that may not be resumed makes the stop
    /// unresumable too (say a WAL write failing while a full flush stopped writes): clearing
    /// the first cause must not hide it. A refusal caused by the stop itself
    /// ([`Error::Stopped`]) says nothing new.
    fn stop_writes(&self, err: &Error, resumable: bool) {
        let mut state = self.state.lock();
        if state.bg_error.is_none() {
            state.bg_error = Some(err.duplicate());
            state.stop_resumable = resumable;
            state.auto_resume_at = None;
        } else if !matches!(err, Error::Stopped { .. }) {
            state.stop_resumable &= resumable;
        }
        drop(state);
        self.progress_cv.notify_all();
        self.bg_cv.notify_all();
    }

    fn stats(&self) -> Stats {
        let c = &self.counters;
        let version = self.versions.current();
        let tiers: Vec<TierStats> = self.tiers.all().iter().map(tier_stats).collect();
        let levels: Vec<LevelStats> = version
            .levels
            .iter()
            .enumerate()
            .map(|(level, files)| {
                let by_tier = self
                    .tiers
                    .iter()
                    .filter_map(|(t, tier)| {
                        let on: Vec<_> = files.iter().filter(|f| f.tier == t).collect();
                        (!on.is_empty()).then(|| {
                            (
                                tier.name.clone(),
                                on.len() as u64,
                                on.iter().map(|f| f.size).sum(),
                            )
                        })
                    })
                    .collect();
                LevelStats {
                    level,
                    files: files.len() as u64,
                    bytes: files.iter().map(|f| f.size).sum(),
                    by_tier,
                    reads_served: c.reads_by_level.get(level).map_or(0, stats::load),
                    compactions_into: c.compactions_into.get(level).map_or(0, stats::load),
                    compaction_bytes_read: c.compaction_read_into.get(level).map_or(0, stats::load),
                    compaction_bytes_written: c
                        .compaction_written_into
                        .get(level)
                        .map_or(0, stats::load),
                    compaction_micros: c.compaction_micros_into.get(level).map_or(0, stats::load),
                }
            })
            .collect();
        // NB: the totals are the levels' sums, so a compaction counted between two loads
        // cannot make them disagree.
        let compactions = levels.iter().map(|l| l.compactions_into).sum();
        let compaction_bytes_read = levels.iter().map(|l| l.compaction_bytes_read).sum();
        let (placement, placement_history) = self.placement_report();
        let (replicas_made, replicas_dropped) = self.table_cache.replica_counts();
        let state = self.state.lock();
        let cache = self.block_cache.as_ref().map_or((0, 0, 0, 0), |b| {
            (b.hits(), b.misses(), b.usage() as u64, b.capacity() as u64)
        });
        Stats {
            tiers,
            levels,
            user_bytes_written: stats::load(&c.user_bytes_written),
            writes: stats::load(&c.writes),
            write_groups: stats::load(&c.write_groups),
            synced_groups: stats::load(&c.synced_groups),
            parallel_insert_groups: stats::load(&c.parallel_insert_groups),
            gets: stats::load(&c.gets),
            reads_memtable: stats::load(&c.reads_memtable),
            reads_block_cache: stats::load(&c.reads_block_cache),
            reads_not_found: stats::load(&c.reads_not_found),
            filter_negatives: stats::load(&c.filter_negatives),
            stall_micros: stats::load(&c.stall_micros),
            slowdowns: stats::load(&c.slowdowns),
            stops: stats::load(&c.stops),
            // NB: only while L0 still slows writes: the pacer learns that L0 shrank at the
            // next write, which may be long after.
            paced_write_rate: self
                .pacer
                .rate()
                .filter(|_| version.levels[0].len() >= self.opts.compaction.l0_slowdown_trigger),
            flushes: stats::load(&c.flushes),
            compactions,
            trivial_moves: stats::load(&c.trivial_moves),
            compaction_chunks: stats::load(&c.compaction_chunks),
            compaction_bytes_read,
            block_cache: cache,
            immutable_memtables: state.imm.len(),
            memtable_bytes: state.mem.approximate_bytes() as u64,
            memtables_memory: std::iter::once(&state.mem)
                .chain(&state.imm)
                .map(|m| m.memory_bytes() as u64)
                .sum(),
            last_sequence: self.versions.last_sequence(),
            snapshots: self.snapshots.len(),
            wal_io_path: self.wal.io_path().to_string(),
            lucky_reads: stats::load(&c.lucky_reads),
            read_io_path: read_io_path(self.opts.cache.read_io_uring).to_string(),
            multi_gets: stats::load(&c.multi_gets),
            multi_get_block_reads: stats::load(&c.multi_get_block_reads),
            async_requests: stats::load(&c.async_requests),
            busy_rejections: stats::load(&c.busy_rejections),
            active_loggers: self.wal.active_loggers(),
            wal_runs: stats::load(&c.wal_runs),
            wal_pages: stats::load(&c.wal_pages),
            wal_cover_syncs: stats::load(&c.wal_cover_syncs),
            txn_commits: stats::load(&c.txn_commits),
            txn_conflicts: stats::load(&c.txn_conflicts),
            placement,
            migrations: stats::load(&c.migrations),
            flush_reserve_lent: self.tiers.flush_reserve_full() - self.tiers.flush_reserve(),
            replicas: self.table_cache.replicas().len() as u64,
            replica_bytes: self.tiers.replica_bytes(),
            replicas_made,
            replicas_dropped,
            background_paced_micros: self.tiers.background_limiter().waited_micros(),
            placement_history,
            tier_io: self.io_report(),
            hot_tier: self.hot.as_ref().map(|h| h.stats()),
            zoned_wal: self.wal.zone_stats(),
            zoned_tiers: self
                .zoned
                .iter()
                .map(|(name, z)| (name.clone(), z.stats()))
                .collect(),
            // SPLIT VALUES: the value log's counters (zero without one).
            ..self.vlog.as_ref().map(|v| v.stats()).unwrap_or_default()
        }
    }
}

fn tier_stats(t: &crate::tier::Tier) -> TierStats {
    let w = |k: WriteKind| t.counters.written[k as usize].load(Ordering::Relaxed);
    TierStats {
        name: t.name.clone(),
        capacity: t.capacity,
        bytes_used: t.used(),
        files: t.files(),
        wal_bytes_written: w(WriteKind::Wal),
        flush_bytes_written: w(WriteKind::Flush),
        compaction_bytes_written: w(WriteKind::Compaction),
        meta_bytes_written: w(WriteKind::Meta),
        migration_bytes_written: w(WriteKind::Migration),
        bytes_read: t.counters.read.load(Ordering::Relaxed),
        reads_served: t.counters.reads_served.load(Ordering::Relaxed),
    }
}

#[cfg(test)]
fn _assert_send_sync() {
    fn is<T: Send + Sync>() {}
    is::<Db>();
}

/// The path batched table reads take (see [`Stats::read_io_path`]).
fn read_io_path(enabled: bool) -> &'static str {
    if enabled && crate::env::io_uring_reads_available() {
        "io_uring"
    } else {
        "pread"
    }
}
