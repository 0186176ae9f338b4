//! Crash, corruption and recovery tests of the parallel WAL (`wal = parallel`, SpanDB style:
//! a preallocated page area `WAL-AREA` on tier 0 written by several loggers at once;
//! `docs/parallel-wal.md`).
//!
//! Every workload runs several writer threads (blocking `put`/`write`, or `submit_put`/
//! `submit_write` with several handles in flight) on tiny memtables and page groups, so groups
//! fill, memtables switch and group slots are recycled (their old, differently coloured pages
//! left in place) many times a run. A crasher thread cuts the power (each `CrashPolicy`) or
//! kills the process while writes are in flight on several loggers, and the test reopens.
//!
//! The file system is `TestFs`: FaultFs, except that it models the area's durability itself,
//! write by write. A durable `write_at` makes that write durable and nothing else, as
//! `RWF_DSYNC` does (FaultFs would sync the whole file), so a `Sync` write acknowledged while an
//! earlier unsynced page of another logger was still volatile is caught; a crash computes the
//! area's surviving bytes per policy (unsynced pages lost, kept at random, or the last one torn
//! in place).
//!
//! What every recovered state must satisfy (`verify`):
//! - every acknowledged `Sync` write is present (after a process kill every acknowledged
//!   write), with the value written, and nothing is present that was never submitted or that an
//!   earlier crash lost;
//! - the state is a prefix of the history: if write `x` was acknowledged before write `y` was
//!   submitted (so `x` has the smaller sequence number) and `y` is present, `x` is present; for
//!   writers with one write in flight this makes each writer's keys a prefix `0..k` of its own;
//! - write batches are all or nothing;
//! - with overwritten keys, each key holds the value of the newest write of the recovered
//!   prefix: never an older one that a recycled group still holds under a stale colour;
//! - a power loss right after recovery changes nothing (recovery made its result durable).
//!
//! Also here: several write/crash/recover cycles on one database, with the area's layout
//! changing between them; a flipped bit in a durable page that later durable pages follow is
//! corruption (naming `WAL-AREA`) in the default mode and a clean prefix in `PointInTime`, while
//! one in the last page is a torn tail; switching between the parallel and the group WAL both
//! ways, cleanly and after crashes; a fault plus a crash at every call of a recovery (also
//! across a mode switch); one EIO or ENOSPC while writing; closing with requests in flight.
//!
//! Environment: `TIERKV_PWAL_ROUNDS` multiplies the seeds of every sweep (default 1).

mod common;

use common::{
    assert_scan_matches, drop_within, env_u64, key6, scan, sized, Crash, Failures, Model,
    TierSetup, CAPACITY, FAST,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};
use tierkv::env::{CrashPolicy, FaultFs, FaultKind, Fs, PositionalFile};
use tierkv::inspect::AreaMeta as Meta;
use tierkv::{
    Db, Durability, Error, Handle, Options, RecoveryMode, Result, WalMode, WriteBatch, WriteOptions,
};

/// Page size of the area (docs/parallel-wal.md).
const PAGE: usize = 4096;
/// Bytes of a page header: colour u64 | crc u32 | used u16 | flags u16 | durable_seq u64.
const PAGE_HEADER: usize = 24;
/// `end_page` of a group still being written.
const OPEN_GROUP: u32 = u32::MAX;
/// How long dropping a `Db` or waiting for a handle may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(20);

/// Seeds `base..base + n * TIERKV_PWAL_ROUNDS` (default 1): more rounds, more crashes; all
/// moved by `TIERKV_PWAL_SEED_OFFSET` (default 0), so a campaign runs fresh seeds each time.
fn seeds(base: u64, n: u64) -> std::ops::Range<u64> {
    let rounds = env_u64("TIERKV_PWAL_ROUNDS", 1);
    let base = base + env_u64("TIERKV_PWAL_SEED_OFFSET", 0);
    base..base + n * rounds
}

fn area_path() -> PathBuf {
    Path::new(FAST).join("WAL-AREA")
}

/// Tiny memtables and page groups: a group of `group_bytes` fills within a few dozen sync
/// writes (one page each at least), so slots are recycled often.
fn options(fs: &Arc<TestFs>, wal: WalMode, group_bytes: u64) -> Options {
    sized(64 << 10, 32 << 10, 128 << 10)
        .fault_tiers()
        .levels_on_fast(1)
        .l0_compaction_trigger(2)
        .wal(wal)
        .wal_loggers(3)
        .wal_inflight(4)
        .wal_group_bytes(group_bytes)
        .max_pending_requests(16)
        .fs(fs.clone())
        .build()
        .unwrap()
}

fn open_and_scan(opts: Options) -> std::result::Result<(Db, Model), String> {
    let db = Db::open(opts).map_err(|e| format!("reopen failed: {e}"))?;
    let state = scan(&db).map_err(|e| format!("scan after reopen failed: {e}"))?;
    Ok((db, state))
}

const POLICIES: [CrashPolicy; 3] = [
    CrashPolicy::DropUnsynced,
    CrashPolicy::KeepRandomPages,
    CrashPolicy::TearLastSector,
];

/// Crashes the file system under an open `db`, drops the dead `db` and lifts the freeze.
fn crash_now(fs: &TestFs, db: Db, crash: Crash, what: &str) {
    fs.freeze_and_crash(crash);
    drop_within(db, what);
    fs.clear_faults();
}

// ---------------------------------------------------------------------------------------------
// The file system: FaultFs, with the WAL area's durability modelled write by write
// ---------------------------------------------------------------------------------------------

/// A positional file's bytes as the device sees them: what reads see, what is on stable
/// storage, and the 4 KiB pages written since they were last made durable.
struct AreaModel {
    data: Vec<u8>,
    durable: Vec<u8>,
    dirty: BTreeSet<usize>,
    /// The last write that was not durable: the one a power loss tears.
    last: Option<(usize, usize)>,
}

impl AreaModel {
    fn settled(bytes: Vec<u8>) -> AreaModel {
        AreaModel {
            durable: bytes.clone(),
            data: bytes,
            dirty: BTreeSet::new(),
            last: None,
        }
    }

    fn grow(&mut self, len: usize) {
        // `open_positional` extends the file with durable zeros.
        if self.data.len() < len {
            self.data.resize(len, 0);
            self.durable.resize(len, 0);
        }
    }

    fn write(&mut self, offset: usize, bytes: &[u8], durable: bool) {
        let end = offset + bytes.len();
        self.grow(end);
        self.data[offset..end].copy_from_slice(bytes);
        let pages = offset / PAGE..end.div_ceil(PAGE);
        if durable {
            // `RWF_DSYNC`: this write is durable, nothing else is.
            self.durable[offset..end].copy_from_slice(bytes);
            for page in pages {
                let (lo, hi) = (page * PAGE, ((page + 1) * PAGE).min(self.data.len()));
                if self.data[lo..hi] == self.durable[lo..hi] {
                    self.dirty.remove(&page);
                }
            }
        } else {
            self.dirty.extend(pages);
            self.last = Some((offset, end));
        }
    }

    fn sync(&mut self) {
        self.durable.clone_from(&self.data);
        self.dirty.clear();
        self.last = None;
    }

    /// The bytes left after `crash`.
    fn after(&self, crash: Crash, rng: &mut SmallRng) -> Vec<u8> {
        match crash {
            Crash::Process => self.data.clone(),
            Crash::Power(CrashPolicy::DropUnsynced) => self.durable.clone(),
            Crash::Power(CrashPolicy::KeepRandomPages) => {
                let mut out = self.durable.clone();
                for &page in &self.dirty {
                    let (lo, hi) = (page * PAGE, ((page + 1) * PAGE).min(out.len()));
                    if rng.gen_bool(0.5) {
                        out[lo..hi].copy_from_slice(&self.data[lo..hi]);
                    }
                }
                out
            }
            Crash::Power(CrashPolicy::TearLastSector) => {
                // Every unsynced write survives but the last one's last sector, torn from a
                // random point on: the rest reads as zeros or as the old bytes.
                let mut out = self.data.clone();
                if let Some((start, end)) = self.last {
                    let sector = (end - 1) / 512 * 512;
                    let cut = rng.gen_range(sector.max(start)..end);
                    if rng.gen_bool(0.5) {
                        out[cut..end].fill(0);
                    } else {
                        out[cut..end].copy_from_slice(&self.durable[cut..end]);
                    }
                }
                out
            }
            Crash::Power(CrashPolicy::KeepRandomWrites) => {
                unreachable!("this sweep models pages, not whole writes")
            }
        }
    }
}

/// `FaultFs` for everything but positional files (the WAL area), whose durability it models
/// itself: a durable `write_at` makes that write durable and nothing else, as `RWF_DSYNC` does
/// (FaultFs syncs the whole file), so an acknowledged `Sync` write that relied on an earlier
/// unsynced page of another logger is caught. Every call still goes through FaultFs (faults,
/// dead handles, current bytes); a crash computes the area's surviving bytes from the model.
struct TestFs {
    fault: Arc<FaultFs>,
    areas: Mutex<BTreeMap<PathBuf, Arc<Mutex<AreaModel>>>>,
    rng: Mutex<SmallRng>,
}

impl std::ops::Deref for TestFs {
    type Target = FaultFs;

    fn deref(&self) -> &FaultFs {
        &self.fault
    }
}

impl TestFs {
    fn new(seed: u64) -> Arc<TestFs> {
        Arc::new(TestFs {
            fault: FaultFs::new(seed),
            areas: Mutex::new(BTreeMap::new()),
            rng: Mutex::new(SmallRng::seed_from_u64(seed ^ 0xa4ea)),
        })
    }

    /// Freezes the file system (every mutating call fails from now on, so the dead `Db`'s
    /// threads cannot write into the post-crash world) and crashes it. `clear_faults` thaws.
    fn freeze_and_crash(&self, crash: Crash) {
        self.fault.fail_after(0, FaultKind::Io, false);
        let mut areas = self.areas.lock().unwrap();
        let mut rng = self.rng.lock().unwrap();
        let survivors: Vec<(PathBuf, Vec<u8>)> = std::mem::take(&mut *areas)
            .into_iter()
            .map(|(path, model)| (path, model.lock().unwrap().after(crash, &mut rng)))
            .collect();
        match crash {
            Crash::Power(policy) => self.fault.crash(policy),
            Crash::Process => self.fault.process_crash(),
        }
        for (path, bytes) in survivors {
            // Only where the area's directory entry survived.
            if self.fault.file_contents(&path).is_some() {
                self.fault.write_raw(&path, &bytes);
            }
        }
    }

    /// Flips a bit of a file in its current and durable bytes.
    fn flip_bit(&self, path: &Path, offset: u64, bit: u8) {
        self.fault.flip_bit(path, offset, bit);
        if let Some(model) = self.areas.lock().unwrap().get(path) {
            let mut m = model.lock().unwrap();
            m.data[offset as usize] ^= 1 << bit;
            m.durable[offset as usize] ^= 1 << bit;
        }
    }
}

impl Fs for TestFs {
    fn remove_file(&self, path: &Path) -> Result<()> {
        let result = self.fault.remove_file(path);
        if result.is_ok() {
            // NB: the entry's removal is durable only after a directory sync; the model of
            // a removed area is simply forgotten (a crash keeps FaultFs's bytes for it).
            self.areas.lock().unwrap().remove(path);
        }
        result
    }
    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        let inner = self.fault.open_positional(path, len)?;
        let mut areas = self.areas.lock().unwrap();
        let model = areas.entry(path.to_path_buf()).or_insert_with(|| {
            let bytes = self.fault.file_contents(path).unwrap_or_default();
            Arc::new(Mutex::new(AreaModel::settled(bytes)))
        });
        model.lock().unwrap().grow(inner.size() as usize);
        Ok(Arc::new(ModelledFile {
            inner,
            model: Arc::clone(model),
        }))
    }

    common::forward_fs!(
        fault =>
        create,
        open_append,
        open_read,
        exists,
        list_dir,
        create_dir_all,
        rename,
        sync_dir,
        file_size,
        lock,
    );
}

struct ModelledFile {
    inner: Arc<dyn PositionalFile>,
    model: Arc<Mutex<AreaModel>>,
}

impl PositionalFile for ModelledFile {
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        // NB: the model's lock is held across the call, so its order is FaultFs's order.
        let mut model = self.model.lock().unwrap();
        self.inner.write_at(offset, data, durable)?;
        model.write(offset as usize, data, durable);
        Ok(())
    }
    fn sync(&self) -> Result<()> {
        let mut model = self.model.lock().unwrap();
        self.inner.sync()?;
        model.sync();
        Ok(())
    }
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn emulates_ring(&self) -> bool {
        self.inner.emulates_ring()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}

// ---------------------------------------------------------------------------------------------
// Waiting for handles
// ---------------------------------------------------------------------------------------------

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Awaits `handle` through its `Future` impl (woken by the completing engine thread); `None`
/// if it did not complete within `limit`.
fn await_within<T>(mut handle: Handle<T>, limit: Duration) -> Option<Result<T>> {
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let deadline = Instant::now() + limit;
    loop {
        if let Poll::Ready(result) = Pin::new(&mut handle).poll(&mut cx) {
            return Some(result);
        }
        let now = Instant::now();
        if now >= deadline {
            return None;
        }
        std::thread::park_timeout(deadline - now);
    }
}

// ---------------------------------------------------------------------------------------------
// Workloads
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy)]
enum Api {
    /// Blocking `put`/`write`: one write in flight per thread.
    Blocking,
    /// `submit_put`/`submit_write` with up to this many handles in flight per thread.
    Async(usize),
}

#[derive(Debug, Clone, Copy)]
struct Spec {
    name: &'static str,
    threads: usize,
    api: Api,
    /// Keys per write: 1 is a put of `w{t}-{c:08}`; more is a batch of that key and
    /// `w{t}-{c:08}/{j}` for `j` in `1..batch_keys`.
    batch_keys: usize,
    /// `Some(k)`: thread `t` overwrites its keys `o{t}-{c % k:03}` round robin instead.
    overwrite_keys: Option<u64>,
    /// Fraction of writes with `Durability::Sync`; the others are `Flush`.
    sync_fraction: f64,
    /// Page group size.
    group_bytes: u64,
    /// The crash comes after this many acknowledged writes (drawn from the range)...
    crash_after_acked: (u64, u64),
    /// ...and once the loggers wrote this many pages (`Stats::wal_pages`).
    crash_after_pages: u64,
    /// Write, crash, recover cycles on one database. Odd cycles are short (the crash comes
    /// after 5 to 60 acknowledged writes), so the groups they write still hold many pages of
    /// the cycle before.
    cycles: usize,
    /// Each cycle writes with another area layout (group size and count) than the one
    /// before, and recovers with the next cycle's.
    vary_layout: bool,
    /// `wal_loggers` and `wal_inflight`.
    loggers: (usize, usize),
    /// Durable runs go through FaultFs's emulated submission ring (several in flight,
    /// carried out in a random order), the path io_uring takes on a real device.
    ring: bool,
}

const BASE: Spec = Spec {
    name: "base",
    threads: 4,
    api: Api::Blocking,
    batch_keys: 1,
    overwrite_keys: None,
    sync_fraction: 1.0,
    group_bytes: 128 << 10,
    crash_after_acked: (40, 600),
    crash_after_pages: 0,
    cycles: 1,
    vary_layout: false,
    loggers: (3, 4),
    ring: false,
};

/// One write of a thread, indexed by its counter (counters are never reused, across cycles
/// either).
#[derive(Debug, Clone, Copy)]
struct Rec {
    /// Clock tick taken right before the write was submitted.
    submit: u64,
    /// Clock tick taken after the write was acknowledged (`Ok`), if it was.
    ack: Option<u64>,
    sync: bool,
    /// Lost in an earlier crash (legitimately: a verified recovery did not show it); it must
    /// never come back.
    void: bool,
}

/// Value of write `c` of thread `t`: self-describing (`{t}:{c}:`), 20 to 320 bytes, one in 16
/// 3000 to 6000 bytes (entries that cross pages, runs of several pages).
fn value(t: usize, c: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(((t as u64) << 40) ^ c ^ 0x9e37_79b9);
    let len = if rng.gen_ratio(1, 16) {
        rng.gen_range(3000..6000)
    } else {
        rng.gen_range(20..320)
    };
    let mut v = format!("{t}:{c}:").into_bytes();
    while v.len() < len {
        v.push(rng.gen_range(b'a'..=b'z'));
    }
    v
}

fn plain_key(t: usize, c: u64) -> Vec<u8> {
    format!("w{t}-{c:08}").into_bytes()
}

fn extra_key(t: usize, c: u64, j: usize) -> Vec<u8> {
    format!("w{t}-{c:08}/{j}").into_bytes()
}

fn overwrite_key(t: usize, k: u64) -> Vec<u8> {
    format!("o{t}-{k:03}").into_bytes()
}

impl Spec {
    /// The batch of write `c` of thread `t`.
    fn batch(&self, t: usize, c: u64) -> WriteBatch {
        let mut b = WriteBatch::new();
        if let Some(k) = self.overwrite_keys {
            b.put(overwrite_key(t, c % k), value(t, c));
            return b;
        }
        b.put(plain_key(t, c), value(t, c));
        for j in 1..self.batch_keys {
            b.put(extra_key(t, c, j), value(t, c));
        }
        b
    }

    fn single_put(&self) -> bool {
        self.batch_keys == 1 && self.overwrite_keys.is_none()
    }
}

/// What the writers did, over every cycle.
struct History {
    /// Per thread, per counter.
    logs: Vec<Vec<Rec>>,
    /// The next clock tick.
    clock: u64,
}

impl History {
    fn new(threads: usize) -> History {
        History {
            logs: vec![Vec::new(); threads],
            clock: 0,
        }
    }

    fn acked(&self) -> usize {
        self.logs
            .iter()
            .flatten()
            .filter(|r| r.ack.is_some())
            .count()
    }

    /// After a verified recovery: every write it did not show is gone for good.
    fn settle(&mut self, present: &[Vec<bool>]) {
        for (log, present) in self.logs.iter_mut().zip(present) {
            for (r, p) in log.iter_mut().zip(present) {
                r.void |= !p;
            }
        }
    }
}

/// Shared by the writers and the crasher.
struct Shared {
    clock: AtomicU64,
    acked: AtomicU64,
    stop: AtomicBool,
    writers_done: AtomicU64,
}

impl Shared {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, SeqCst)
    }
}

fn write_options(sync: bool) -> WriteOptions {
    if sync {
        WriteOptions::sync()
    } else {
        WriteOptions {
            durability: Durability::Flush,
        }
    }
}

/// A writer with one write in flight, from counter `start` on. Stops at its first error.
fn blocking_writer(
    db: &Db,
    spec: &Spec,
    t: usize,
    start: u64,
    rng: &mut SmallRng,
    shared: &Shared,
) -> Vec<Rec> {
    let mut log: Vec<Rec> = Vec::new();
    while !shared.stop.load(SeqCst) {
        let c = start + log.len() as u64;
        let sync = rng.gen_bool(spec.sync_fraction);
        let opts = write_options(sync);
        log.push(Rec {
            submit: shared.tick(),
            ack: None,
            sync,
            void: false,
        });
        let result = if spec.single_put() {
            db.put(&opts, &plain_key(t, c), &value(t, c))
        } else {
            db.write(&opts, spec.batch(t, c))
        };
        if result.is_err() {
            break;
        }
        log.last_mut().expect("rec").ack = Some(shared.tick());
        shared.acked.fetch_add(1, SeqCst);
    }
    log
}

/// A writer keeping up to `inflight` handles in flight (waited for oldest first), from
/// counter `start` on. `Busy` submissions are retried after the oldest handle completes.
/// Stops submitting at its first error, then waits for everything in flight.
fn async_writer(
    db: &Db,
    spec: &Spec,
    (t, start): (usize, u64),
    rng: &mut SmallRng,
    shared: &Shared,
    inflight: usize,
) -> std::result::Result<Vec<Rec>, String> {
    let mut log: Vec<Rec> = Vec::new();
    let mut queue: VecDeque<(u64, Handle<()>)> = VecDeque::new();
    let mut failed = false;
    // Waits for write `c`; Ok(false) if it failed.
    let complete = |log: &mut Vec<Rec>, c: u64, h: Handle<()>| match await_within(h, HANG) {
        None => Err(format!(
            "thread {t}: the handle of write {c} did not complete within {HANG:?}"
        )),
        Some(Ok(())) => {
            log[(c - start) as usize].ack = Some(shared.tick());
            shared.acked.fetch_add(1, SeqCst);
            Ok(true)
        }
        Some(Err(_)) => Ok(false),
    };
    while !failed && !shared.stop.load(SeqCst) {
        if queue.len() >= inflight {
            let (c, h) = queue.pop_front().expect("queue");
            failed = !complete(&mut log, c, h)?;
            continue;
        }
        let c = start + log.len() as u64;
        let sync = rng.gen_bool(spec.sync_fraction);
        let opts = write_options(sync);
        log.push(Rec {
            submit: shared.tick(),
            ack: None,
            sync,
            void: false,
        });
        let submitted = if spec.single_put() {
            db.submit_put(&opts, &plain_key(t, c), &value(t, c))
        } else {
            db.submit_write(&opts, spec.batch(t, c))
        };
        match submitted {
            Ok(h) => queue.push_back((c, h)),
            Err(Error::Busy(_)) => {
                // Not admitted: the counter is submitted again once a handle completed.
                log.pop();
                match queue.pop_front() {
                    Some((c, h)) => failed = !complete(&mut log, c, h)?,
                    None => std::thread::yield_now(),
                }
            }
            Err(_) => failed = true,
        }
    }
    while let Some((c, h)) = queue.pop_front() {
        complete(&mut log, c, h)?;
    }
    Ok(log)
}

/// Runs `spec`'s writers on `db`, appending to `history`, until the crasher crashes the file
/// system: once `acked` writes were acknowledged and the loggers wrote `pages` pages, after a
/// random delay (`None`: the writers are stopped instead). Returns `Stats::wal_pages` at the
/// crash. `db` is dead on return, unless no crash was asked for.
fn run_until_crash(
    db: &Db,
    fs: &TestFs,
    spec: &Spec,
    (seed, crash): (u64, Option<Crash>),
    history: &mut History,
    (acked, pages): (u64, u64),
) -> u64 {
    let shared = Shared {
        clock: AtomicU64::new(history.clock),
        acked: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        writers_done: AtomicU64::new(0),
    };
    let mut rng = SmallRng::seed_from_u64(seed);
    let delay = Duration::from_micros(rng.gen_range(0..400));
    let wal_pages = std::thread::scope(|s| {
        let writers: Vec<_> = (0..spec.threads)
            .map(|t| {
                let shared = &shared;
                let start = history.logs[t].len() as u64;
                let mut rng = SmallRng::seed_from_u64(seed ^ ((t as u64 + 1) << 32));
                s.spawn(move || {
                    let log = match spec.api {
                        Api::Blocking => Ok(blocking_writer(db, spec, t, start, &mut rng, shared)),
                        Api::Async(n) => async_writer(db, spec, (t, start), &mut rng, shared, n),
                    };
                    shared.writers_done.fetch_add(1, SeqCst);
                    log
                })
            })
            .collect();
        let crasher = s.spawn(|| {
            let started = Instant::now();
            let mut wal_pages = 0;
            loop {
                let done = shared.writers_done.load(SeqCst) == spec.threads as u64;
                let enough = shared.acked.load(SeqCst) >= acked
                    && (pages == 0 || {
                        wal_pages = db.stats().wal_pages;
                        wal_pages >= pages
                    });
                if done || enough || started.elapsed() > HANG {
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            std::thread::sleep(delay);
            wal_pages = wal_pages.max(db.stats().wal_pages);
            if let Some(crash) = crash {
                fs.freeze_and_crash(crash);
            }
            shared.stop.store(true, SeqCst);
            wal_pages
        });
        let wal_pages = crasher.join().expect("crasher");
        for (t, w) in writers.into_iter().enumerate() {
            let log = w.join().expect("writer panicked");
            history.logs[t].extend(log.unwrap_or_else(|e| panic!("{e}")));
        }
        wal_pages
    });
    history.clock = shared.clock.load(SeqCst);
    wal_pages
}

/// Parses a workload key: (kind, thread, counter or overwritten slot, extra index).
fn parse_key(key: &[u8]) -> Option<(char, usize, u64, usize)> {
    let s = std::str::from_utf8(key).ok()?;
    let kind = s.chars().next()?;
    let (t, rest) = s.get(1..)?.split_once('-')?;
    let (c, j) = match rest.split_once('/') {
        Some((c, j)) => (c, j.parse().ok()?),
        None => (rest, 0),
    };
    Some((kind, t.parse().ok()?, c.parse().ok()?, j))
}

/// The write a value names (`{t}:{c}:...`).
fn value_counter(v: &[u8]) -> Option<(usize, u64)> {
    let s = std::str::from_utf8(v.get(..v.len().min(40))?).ok()?;
    let mut parts = s.split(':');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

fn show(k: &[u8]) -> String {
    String::from_utf8_lossy(k).into_owned()
}

/// Which writes of the overwrite workload `state` shows: per thread, the writes up to the
/// newest one present; each key must hold the newest of those writing it.
fn overwrite_presence(
    slots: u64,
    history: &History,
    state: &Model,
) -> std::result::Result<Vec<Vec<bool>>, String> {
    let logs = &history.logs;
    let mut newest: Vec<Option<u64>> = vec![None; logs.len()];
    for (k, v) in state {
        let Some(('o', t, slot, 0)) = parse_key(k) else {
            return Err(format!("unexpected key {}", show(k)));
        };
        let Some((vt, c)) = value_counter(v) else {
            return Err(format!("{}: unparsable value", show(k)));
        };
        let rec = logs.get(t).and_then(|l| l.get(c as usize));
        if vt != t || c % slots != slot || rec.is_none() {
            return Err(format!(
                "{}: value of write {vt}/{c}, never submitted",
                show(k)
            ));
        }
        if rec.is_some_and(|r| r.void) {
            return Err(format!(
                "{}: holds write {t}/{c}, lost in an earlier crash, now back",
                show(k)
            ));
        }
        if *v != value(t, c) {
            return Err(format!("{}: value of write {t}/{c} is damaged", show(k)));
        }
        newest[t] = newest[t].max(Some(c));
    }
    let mut present: Vec<Vec<bool>> = logs.iter().map(|l| vec![false; l.len()]).collect();
    for (t, m) in newest.iter().enumerate() {
        let Some(m) = *m else { continue };
        let mut want: BTreeMap<u64, u64> = BTreeMap::new();
        for c in (0..=m).rev() {
            if !logs[t][c as usize].void {
                present[t][c as usize] = true;
                want.entry(c % slots).or_insert(c);
            }
        }
        for slot in 0..slots {
            let key = overwrite_key(t, slot);
            let got = state
                .get(&key)
                .and_then(|v| value_counter(v))
                .map(|(_, c)| c);
            let want = want.get(&slot).copied();
            if got != want {
                return Err(format!(
                    "{}: holds write {got:?}, but thread {t}'s newest recovered write is {m}, \
                     so it must hold write {want:?} (an older value came back, or one is lost)",
                    show(&key)
                ));
            }
        }
    }
    Ok(present)
}

/// Which writes of the put and batch workloads `state` shows; batches are all or nothing.
fn plain_presence(
    spec: &Spec,
    history: &History,
    state: &Model,
) -> std::result::Result<Vec<Vec<bool>>, String> {
    let logs = &history.logs;
    let mut present: Vec<Vec<bool>> = logs.iter().map(|l| vec![false; l.len()]).collect();
    let mut keys_of: BTreeMap<(usize, u64), usize> = BTreeMap::new();
    for (k, v) in state {
        let Some(('w', t, c, j)) = parse_key(k) else {
            return Err(format!("unexpected key {}", show(k)));
        };
        let rec = logs.get(t).and_then(|l| l.get(c as usize));
        if rec.is_none() || j >= spec.batch_keys {
            return Err(format!("{}: never submitted", show(k)));
        }
        if rec.is_some_and(|r| r.void) {
            return Err(format!("{}: lost in an earlier crash, now back", show(k)));
        }
        if *v != value(t, c) {
            return Err(format!("{}: wrong value", show(k)));
        }
        *keys_of.entry((t, c)).or_default() += 1;
        present[t][c as usize] = true;
    }
    for (&(t, c), &n) in &keys_of {
        if n != spec.batch_keys {
            return Err(format!(
                "write {t}/{c}: {n} of its batch's {} keys present (batches are atomic)",
                spec.batch_keys
            ));
        }
    }
    Ok(present)
}

/// Checks a recovered state against the history (see the module docs); `crash` says which
/// acknowledged writes must survive. Returns which writes are present.
fn verify(
    spec: &Spec,
    history: &History,
    state: &Model,
    crash: Crash,
) -> std::result::Result<Vec<Vec<bool>>, String> {
    let present = match spec.overwrite_keys {
        Some(slots) => overwrite_presence(slots, history, state)?,
        None => plain_presence(spec, history, state)?,
    };
    let live = || {
        history
            .logs
            .iter()
            .zip(&present)
            .enumerate()
            .flat_map(|(t, (log, p))| {
                let recs = log.iter().zip(p).enumerate();
                recs.filter(|(_, (r, _))| !r.void)
                    .map(move |(c, (r, p))| (t, c, r, *p))
            })
    };
    // Acknowledged writes.
    for (t, c, r, p) in live() {
        if r.ack.is_some() && (r.sync || crash == Crash::Process) && !p {
            return Err(format!(
                "acknowledged {} write {t}/{c} is missing ({} of thread {t}'s {} writes present)",
                if r.sync { "Sync" } else { "Flush" },
                present[t].iter().filter(|p| **p).count(),
                present[t].len()
            ));
        }
    }
    // Prefix: nothing present whose causal predecessor is missing.
    let newest = live().filter(|x| x.3).map(|(_, _, r, _)| r.submit).max();
    if let Some(newest) = newest {
        for (t, c, r, p) in live() {
            if r.ack.is_some_and(|a| a < newest) && !p {
                return Err(format!(
                    "hole: write {t}/{c} (acknowledged at tick {:?}) is missing, but a write \
                     submitted at tick {newest}, after that, is present",
                    r.ack
                ));
            }
        }
    }
    // With one write in flight per thread, each thread's writes are a prefix of its own.
    if matches!(spec.api, Api::Blocking) {
        let mut missing: Vec<Option<usize>> = vec![None; history.logs.len()];
        for (t, c, _, p) in live() {
            match (missing[t], p) {
                (None, false) => missing[t] = Some(c),
                (Some(m), true) => {
                    return Err(format!(
                        "thread {t}: write {m} is missing, but {c} is present"
                    ))
                }
                _ => {}
            }
        }
    }
    Ok(present)
}

/// One crash case: a fresh database on the parallel WAL, then `spec.cycles` times: writers
/// crashed in flight, reopen with `reopen_mode`, verify, and a power loss right after the
/// recovery, which must change nothing. Returns the file system, the history and the last
/// recovered state.
fn crash_case(
    spec: &Spec,
    seed: u64,
    crash: Crash,
    reopen_mode: WalMode,
) -> std::result::Result<(Arc<TestFs>, History, Model), String> {
    let fs = TestFs::new(seed);
    fs.emulate_ring(spec.ring);
    // Layout of cycle `i`: (group bytes, max immutable memtables, so groups = that + 2).
    let layout = |i: usize| match (spec.vary_layout, i % 3) {
        (false, _) => (spec.group_bytes, 2),
        (true, 0) => (64 << 10, 2),
        (true, 1) => (192 << 10, 1),
        (true, _) => (128 << 10, 3),
    };
    let opts = |mode, i| {
        let (group_bytes, immutable) = layout(i);
        let mut o = options(&fs, mode, group_bytes);
        o.memtable.max_immutable_memtables = immutable;
        (o.wal.loggers, o.wal.inflight) = spec.loggers;
        o
    };
    let mut history = History::new(spec.threads);
    let mut rng = SmallRng::seed_from_u64(seed ^ 0x5eed);
    let mut state = Model::new();
    for cycle in 0..spec.cycles {
        let short = cycle % 2 == 1;
        let thresholds = if short {
            (rng.gen_range(5..=60), 0)
        } else {
            let (lo, hi) = spec.crash_after_acked;
            (rng.gen_range(lo..=hi), spec.crash_after_pages)
        };
        let db = Db::open(opts(WalMode::Parallel, cycle))
            .map_err(|e| format!("cycle {cycle}: open: {e}"))?;
        let io_path = db.stats().wal_io_path;
        if io_path == "group" {
            return Err(format!("wal = parallel runs the {io_path:?} WAL"));
        }

        let acked_before = history.acked();
        let cycle_seed = seed ^ ((cycle as u64) << 48);
        let wal_pages = run_until_crash(
            &db,
            &fs,
            spec,
            (cycle_seed, Some(crash)),
            &mut history,
            thresholds,
        );
        // Known once a logger has written.
        let io_path = db.stats().wal_io_path;
        let want = if spec.ring { "emulated-ring" } else { "pwrite" };
        if io_path != want {
            return Err(format!("the WAL took the {io_path:?} path, not {want:?}"));
        }
        drop_within(db, spec.name);
        fs.clear_faults();
        if history.acked() == acked_before {
            return Err(format!(
                "cycle {cycle}: no write acknowledged before the crash"
            ));
        }
        if wal_pages < thresholds.1 {
            return Err(format!(
                "cycle {cycle}: the loggers wrote {wal_pages} pages, not the {} asked for",
                thresholds.1
            ));
        }
        let (db, recovered) = open_and_scan(opts(reopen_mode, cycle + 1))?;
        let present =
            verify(spec, &history, &recovered, crash).map_err(|e| format!("cycle {cycle}: {e}"))?;
        history.settle(&present);
        crash_now(
            &fs,
            db,
            Crash::Power(CrashPolicy::DropUnsynced),
            "after recovery",
        );
        let (db, again) = open_and_scan(opts(reopen_mode, cycle + 1))?;
        drop_within(db, "clean close");
        if again != recovered {
            return Err(format!(
                "cycle {cycle}: a power loss right after recovery changed the state: {} keys \
                 before, {} after",
                recovered.len(),
                again.len()
            ));
        }
        state = recovered;
    }
    Ok((fs, history, state))
}

fn sweep(spec: Spec, seeds: std::ops::Range<u64>, crashes: &[Crash]) {
    let started = Instant::now();
    let mut failures = Failures::default();
    let mut acked = 0;
    let mut runs = 0;
    for seed in seeds {
        for &crash in crashes {
            let case = format!("{} seed {seed} {crash:?}", spec.name);
            let result = crash_case(&spec, seed, crash, WalMode::Parallel);
            if let Ok((_, history, _)) = &result {
                acked += history.acked();
                runs += 1;
            }
            failures.check(case, result);
        }
    }
    eprintln!(
        "{}: {runs} cases, {acked} acknowledged writes checked, {:?}",
        spec.name,
        started.elapsed()
    );
    failures.assert_none(spec.name);
}

// ---------------------------------------------------------------------------------------------
// 1, 2: crashes with writes in flight on several loggers
// ---------------------------------------------------------------------------------------------

/// Four threads of blocking `Sync` puts; the power fails (each policy) at a random moment.
#[test]
fn crash_with_sync_writes_in_flight() {
    let crashes = POLICIES.map(Crash::Power);
    sweep(
        Spec {
            name: "sync-puts",
            ..BASE
        },
        seeds(0, 12),
        &crashes,
    );
}

/// As above, with the durable runs on the emulated ring: up to four runs per logger in flight,
/// carried out and completed out of order, some done and some not when the power fails.
#[test]
fn crash_with_sync_writes_in_flight_on_the_ring() {
    let mut crashes = POLICIES.map(Crash::Power).to_vec();
    crashes.push(Crash::Process);
    sweep(
        Spec {
            name: "sync-puts-ring",
            ring: true,
            ..BASE
        },
        seeds(500, 12),
        &crashes,
    );
}

/// The asynchronous API on the emulated ring, half the writes `Sync`.
#[test]
fn crash_with_async_writes_in_flight_on_the_ring() {
    let mut crashes = POLICIES.map(Crash::Power).to_vec();
    crashes.push(Crash::Process);
    sweep(
        Spec {
            name: "async-puts-ring",
            api: Api::Async(8),
            loggers: (4, 8),
            sync_fraction: 0.5,
            ring: true,
            ..BASE
        },
        seeds(1500, 12),
        &crashes,
    );
}

/// Four threads with eight `submit_put` handles each in flight (a pending bound of 16, so some
/// submissions are `Busy`); half the writes `Sync`, half `Flush`, plus a process kill.
#[test]
fn crash_with_async_writes_in_flight() {
    let mut crashes = POLICIES.map(Crash::Power).to_vec();
    crashes.push(Crash::Process);
    sweep(
        Spec {
            name: "async-puts",
            api: Api::Async(8),
            loggers: (8, 16),
            sync_fraction: 0.5,
            ..BASE
        },
        seeds(1000, 12),
        &crashes,
    );
}

// ---------------------------------------------------------------------------------------------
// 3: recycled groups
// ---------------------------------------------------------------------------------------------

/// Keys overwritten round robin while every group slot is reused many times (the loggers write
/// over ten areas' worth of pages): no value of an older generation may come back, whether it
/// is in a flushed table or in a recycled group's stale pages.
#[test]
fn recycled_groups_never_resurrect_old_writes() {
    let group_bytes = 64 << 10;
    // Default layout: max_immutable_memtables + 2 groups.
    let fs = TestFs::new(0);
    let groups = options(&fs, WalMode::Parallel, group_bytes).wal_groups();
    let area_pages = groups * group_bytes / PAGE as u64;
    let crashes = POLICIES.map(Crash::Power);
    sweep(
        Spec {
            name: "recycled-groups",
            overwrite_keys: Some(8),
            group_bytes,
            crash_after_acked: (100, 400),
            crash_after_pages: 10 * area_pages,
            cycles: 3,
            ..BASE
        },
        seeds(2000, 6),
        &crashes,
    );
}

/// Crash cycles that change the area's layout (group size and count) at every reopen: recovery
/// reads the groups by the layout their metadata records, and the new layout's groups lie over
/// the old groups' stale pages at other offsets.
#[test]
fn layout_changes_across_crashes() {
    sweep(
        Spec {
            name: "layout-changes",
            overwrite_keys: Some(8),
            vary_layout: true,
            cycles: 4,
            crash_after_acked: (100, 500),
            ..BASE
        },
        seeds(3000, 6),
        &POLICIES.map(Crash::Power),
    );
}

// ---------------------------------------------------------------------------------------------
// 4: torn and partly kept pages
// ---------------------------------------------------------------------------------------------

/// Many seeds of `TearLastSector` and `KeepRandomPages`, early crashes, mixed durability (a
/// third of the writes `Flush`, which a power loss may lose but never out of order), three
/// writers.
#[test]
fn torn_and_partly_kept_pages_many_seeds() {
    sweep(
        Spec {
            name: "torn-pages",
            loggers: (2, 64),
            threads: 3,
            sync_fraction: 0.66,
            crash_after_acked: (5, 150),
            ..BASE
        },
        seeds(4000, 40),
        &[
            Crash::Power(CrashPolicy::TearLastSector),
            Crash::Power(CrashPolicy::KeepRandomPages),
        ],
    );
    // Mostly `Flush`: many unsynced pages at the crash, so kept pages after lost ones (holes)
    // are common, and recovery must stop at the first one; after a process kill every
    // acknowledged `Flush` write is there.
    sweep(
        Spec {
            name: "holes",
            loggers: (8, 1),
            threads: 3,
            sync_fraction: 0.05,
            crash_after_acked: (20, 300),
            ..BASE
        },
        seeds(5000, 40),
        &[
            Crash::Power(CrashPolicy::TearLastSector),
            Crash::Power(CrashPolicy::KeepRandomPages),
            Crash::Process,
        ],
    );
}

// ---------------------------------------------------------------------------------------------
// 5: corruption is not a crash
// ---------------------------------------------------------------------------------------------

fn small_value(i: usize) -> Vec<u8> {
    format!("value-{i:06}-").repeat(8).into_bytes()
}

/// The valid metadata page with the highest generation.
fn area_meta(area: &[u8]) -> Meta {
    [0, 1]
        .iter()
        .filter_map(|&p| Meta::decode(&area[p * PAGE..(p + 1) * PAGE]))
        .max_by_key(|m| m.generation)
        .expect("no valid metadata page in WAL-AREA")
}

/// Pages (file offsets) of the open group with the newest colour carrying that colour.
fn active_group_pages(area: &[u8]) -> Vec<u64> {
    let meta = area_meta(area);
    let (slot, s) = meta
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.end_page == OPEN_GROUP && s.colour != 0)
        .max_by_key(|(_, s)| s.colour)
        .expect("no open group in the metadata");
    let first = (2 + slot as u64 * meta.layout.group_pages) * PAGE as u64;
    (0..meta.layout.group_pages)
        .map(|p| first + p * PAGE as u64)
        .take_while(|&at| area[at as usize..at as usize + 8] == s.colour.to_le_bytes())
        .collect()
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `result` must be `Corruption` naming `file`.
#[track_caller]
fn expect_corruption<T: std::fmt::Debug>(result: Result<T>, file: &Path, what: &str) {
    match &result {
        Err(e @ Error::Corruption { file: named, .. }) => {
            assert_eq!(named, file, "{what}: corruption names the wrong file: {e}");
            assert!(
                e.to_string().contains(&*file.to_string_lossy()),
                "{what}: message {e}"
            );
        }
        other => panic!(
            "{what}: expected corruption in {}, got {other:?}",
            file.display()
        ),
    }
}

/// 40 sync puts, one thread (one run, one page each), then a power loss: every page of the
/// active group is durable and acknowledged.
fn synced_area(fs: &Arc<TestFs>) -> Vec<u64> {
    let db = Db::open(options(fs, WalMode::Parallel, 256 << 10)).unwrap();
    for i in 0..40 {
        db.put(&WriteOptions::sync(), &key6(i), &small_value(i))
            .unwrap();
    }
    crash_now(
        fs,
        db,
        Crash::Power(CrashPolicy::DropUnsynced),
        "synced area",
    );
    let area = fs.file_contents(&area_path()).expect("no WAL-AREA");
    let pages = active_group_pages(&area);
    assert!(pages.len() >= 40, "40 sync puts in {} pages", pages.len());
    pages
}

/// The page of the active group holding `key`.
fn page_holding(fs: &TestFs, pages: &[u64], key: &[u8]) -> u64 {
    let area = fs.file_contents(&area_path()).unwrap();
    pages
        .iter()
        .copied()
        .find(|&at| find(&area[at as usize + PAGE_HEADER..at as usize + PAGE], key).is_some())
        .unwrap_or_else(|| panic!("{} not in the active group", String::from_utf8_lossy(key)))
}

/// Exactly keys `0..n` with their values.
fn assert_prefix(db: &Db, n: usize, what: &str) {
    let state = scan(db).unwrap_or_else(|e| panic!("{what}: scan: {e}"));
    let want: Model = (0..n).map(|i| (key6(i), small_value(i))).collect();
    if state != want {
        let got: Vec<String> = state
            .keys()
            .map(|k| String::from_utf8_lossy(k).into())
            .collect();
        panic!(
            "{what}: expected keys 0..{n}, got {} keys: {got:?}",
            state.len()
        );
    }
}

/// A flipped bit in a durable page that later durable pages follow (their `durable_seq`
/// covers it) is damage, not a torn write: the default mode and `AbsoluteConsistency` refuse
/// to open naming `WAL-AREA`; `PointInTime` opens with the writes before the damaged page.
#[test]
fn durable_page_damage_is_corruption_not_a_crash() {
    let fs = TestFs::new(5);
    let pages = synced_area(&fs);
    let at = page_holding(&fs, &pages, &key6(20));
    assert!(at > pages[0], "key 20 in the group's first page");
    fs.flip_bit(&area_path(), at + PAGE_HEADER as u64 + 40, 3);
    for mode in [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
    ] {
        let mut opts = options(&fs, WalMode::Parallel, 256 << 10);
        opts.wal.recovery_mode = mode;
        expect_corruption(Db::open(opts), &area_path(), &format!("{mode:?}"));
    }
    // Group mode reads the same area the same way.
    let mut opts = options(&fs, WalMode::Group, 256 << 10);
    opts.wal.recovery_mode = RecoveryMode::TolerateCorruptedTail;
    expect_corruption(Db::open(opts), &area_path(), "group mode");

    let mut opts = options(&fs, WalMode::Parallel, 256 << 10);
    opts.wal.recovery_mode = RecoveryMode::PointInTime;
    let db = Db::open(opts).expect("PointInTime open");
    assert_prefix(&db, 20, "PointInTime");
    // The database goes on from the point in time, in the default mode.
    for i in 20..30 {
        db.put(&WriteOptions::sync(), &key6(i), &small_value(i))
            .unwrap();
    }
    crash_now(
        &fs,
        db,
        Crash::Power(CrashPolicy::DropUnsynced),
        "after PointInTime",
    );
    let db = Db::open(options(&fs, WalMode::Parallel, 256 << 10)).expect("reopen");
    assert_prefix(&db, 30, "after PointInTime and more writes");
    drop_within(db, "close");
}

/// The same damage in a page that no later page proves durable reads as a torn tail: the
/// default mode opens with everything before it.
#[test]
fn damage_in_the_last_page_is_a_torn_tail() {
    let fs = TestFs::new(6);
    let pages = synced_area(&fs);
    let at = page_holding(&fs, &pages, &key6(39));
    assert_eq!(Some(&at), pages.last(), "key 39 is not in the last page");
    fs.flip_bit(&area_path(), at + PAGE_HEADER as u64 + 40, 1);
    let db = Db::open(options(&fs, WalMode::Parallel, 256 << 10)).expect("open with a torn tail");
    assert_prefix(&db, 39, "torn tail");
    drop_within(db, "close");
}

// ---------------------------------------------------------------------------------------------
// 6: switching WAL modes
// ---------------------------------------------------------------------------------------------

fn fill(db: &Db, range: std::ops::Range<usize>, model: &mut Model) {
    for i in range {
        let opts = write_options(i % 3 == 0);
        db.put(&opts, &key6(i), &small_value(i)).unwrap();
        model.insert(key6(i), small_value(i));
    }
}

/// Parallel -> group -> parallel -> group with clean closes: each reopen recovers the other
/// mode's log (memtables are not flushed at close), and reports the WAL it runs.
#[test]
fn wal_mode_switch_clean() {
    let fs = TestFs::new(7);
    let mut model = Model::new();
    let modes = [
        WalMode::Parallel,
        WalMode::Group,
        WalMode::Parallel,
        WalMode::Group,
        WalMode::Parallel,
    ];
    for (round, mode) in modes.into_iter().enumerate() {
        let db = Db::open(options(&fs, mode, 64 << 10))
            .unwrap_or_else(|e| panic!("round {round}: open {mode:?}: {e}"));
        assert_scan_matches(&db, &model, &format!("round {round}: reopened {mode:?}"));
        let io_path = db.stats().wal_io_path;
        assert_eq!(
            io_path == "group",
            mode == WalMode::Group,
            "{mode:?} runs {io_path}"
        );
        // Enough for a few memtable switches, the last memtable unflushed at close.
        fill(&db, round * 150..round * 150 + 150, &mut model);
        drop_within(db, "clean close");
    }
    let db = Db::open(options(&fs, WalMode::Group, 64 << 10)).unwrap();
    assert_scan_matches(&db, &model, "final");
    drop_within(db, "close");
}

/// A crash with writers in flight on the parallel WAL, recovered in group mode; more sync
/// writes in group mode and a crash, recovered in parallel mode: every acknowledged write.
#[test]
fn wal_mode_switch_after_crashes() {
    let spec = Spec {
        name: "switch",
        ..BASE
    };
    let mut failures = Failures::default();
    for seed in seeds(8000, 6) {
        let crash = Crash::Power(POLICIES[seed as usize % 3]);
        let case = format!("seed {seed} {crash:?}");
        let result = crash_case(&spec, seed, crash, WalMode::Group).and_then(|(fs, _, state)| {
            let db = Db::open(options(&fs, WalMode::Group, spec.group_bytes))
                .map_err(|e| format!("group reopen: {e}"))?;
            let mut model = state;
            for i in 0..120 {
                db.put(&WriteOptions::sync(), &key6(i), &small_value(i))
                    .map_err(|e| format!("group mode put: {e}"))?;
                model.insert(key6(i), small_value(i));
            }
            crash_now(
                &fs,
                db,
                Crash::Power(POLICIES[(seed as usize + 1) % 3]),
                "group",
            );
            let (db, got) = open_and_scan(options(&fs, WalMode::Parallel, spec.group_bytes))?;
            drop_within(db, "close");
            if got != model {
                return Err(format!(
                    "parallel reopen after group-mode crash: {} keys, want {}",
                    got.len(),
                    model.len()
                ));
            }
            Ok(())
        });
        failures.check(case, result);
    }
    failures.assert_none("mode switch after crashes");
}

// ---------------------------------------------------------------------------------------------
// 7: crashes during recovery
// ---------------------------------------------------------------------------------------------

/// Every file of `fs` under `dir`, recursively.
fn image(fs: &TestFs, dir: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let mut names = fs.list_dir(dir).unwrap();
    names.sort();
    for name in names {
        let path = dir.join(name);
        match fs.file_contents(&path) {
            Some(bytes) => out.push((path, bytes)),
            None => image(fs, &path, out),
        }
    }
}

fn restore(files: &[(PathBuf, Vec<u8>)], seed: u64) -> Arc<TestFs> {
    let fs = TestFs::new(seed);
    // Restored as a power loss would have kept them: directories durable too.
    for dir in [FAST, CAPACITY] {
        tierkv::env::create_dir_all_durable(&*fs, Path::new(dir)).unwrap();
    }
    for (path, bytes) in files {
        tierkv::env::create_dir_all_durable(&*fs, path.parent().unwrap()).unwrap();
        fs.write_raw(path, bytes);
    }
    fs
}

/// Writers crashed in flight; then, on copies of that image, the recovery is failed at its
/// n-th mutating call (for every n until recovery gets through) and the power cut (each
/// policy in turn, or a process kill); a clean reopen must still show every acknowledged
/// write, as a prefix. Also across a mode switch: a parallel-WAL image recovered in group mode
/// (which deletes the area once its contents are in tables) and a group-WAL image recovered in
/// parallel mode.
#[test]
fn crash_during_recovery_loses_nothing() {
    let started = Instant::now();
    let spec = Spec {
        name: "recovery-crash",
        sync_fraction: 0.8,
        ..BASE
    };
    let mut failures = Failures::default();
    let modes = [
        (WalMode::Parallel, WalMode::Parallel),
        (WalMode::Parallel, WalMode::Group),
        (WalMode::Group, WalMode::Parallel),
    ];
    for (written, recovered) in modes {
        for seed in seeds(9000, 3) {
            let crash = Crash::Power(CrashPolicy::KeepRandomPages);
            let fs = TestFs::new(seed);
            let db = Db::open(options(&fs, written, spec.group_bytes)).unwrap();
            let mut history = History::new(spec.threads);
            run_until_crash(&db, &fs, &spec, (seed, Some(crash)), &mut history, (300, 0));
            drop_within(db, "writers");
            fs.clear_faults();
            let mut files = Vec::new();
            image(&fs, Path::new("/db"), &mut files);
            let opts = |fs: &Arc<TestFs>| options(fs, recovered, spec.group_bytes);
            let (mut n, mut got_through) = (0, 0);
            while got_through < 3 && n < 400 {
                let fs = restore(&files, seed * 1000 + n);
                let second = [
                    Crash::Power(CrashPolicy::DropUnsynced),
                    Crash::Power(CrashPolicy::KeepRandomPages),
                    Crash::Power(CrashPolicy::TearLastSector),
                    Crash::Process,
                ][n as usize % 4];
                fs.fail_after(n, FaultKind::Io, false);
                match Db::open(opts(&fs)) {
                    Ok(db) => {
                        got_through += 1;
                        crash_now(&fs, db, second, "recovery got through");
                    }
                    Err(_) => {
                        fs.freeze_and_crash(second);
                        fs.clear_faults();
                    }
                }
                let case = format!(
                    "{written:?} image, seed {seed}: {recovered:?} recovery failed at call {n}, \
                     then {second:?}"
                );
                let result = open_and_scan(opts(&fs)).and_then(|(db, state)| {
                    drop_within(db, "close");
                    verify(&spec, &history, &state, crash).map(drop)
                });
                failures.check(case, result);
                n += 1;
            }
            assert!(
                got_through > 0,
                "seed {seed}: recovery never got through in {n} calls"
            );
            eprintln!("{written:?} image, seed {seed}: {recovered:?} recovery crashed at each of {n} calls");
        }
    }
    eprintln!("crash during recovery: {:?}", started.elapsed());
    failures.assert_none("crash during recovery");
}

/// One failed call (EIO or ENOSPC; the file system is fine again right after) at a random point
/// of a workload, and no crash: the database refuses what it cannot log safely; after a clean
/// close it reopens with every acknowledged write (`Flush` ones too), as a prefix, and a power
/// loss right after that reopen changes nothing.
#[test]
fn single_fault_while_writing_then_reopen() {
    let spec = Spec {
        name: "fault",
        sync_fraction: 0.7,
        ..BASE
    };
    let mut failures = Failures::default();
    let (mut cases, mut fired) = (0, 0);
    for seed in seeds(11000, 24) {
        let fs = TestFs::new(seed);
        let db = Db::open(options(&fs, WalMode::Parallel, spec.group_bytes)).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let kind = [FaultKind::Io, FaultKind::NoSpace][seed as usize % 2];
        let at = rng.gen_range(0..500);
        fs.fail_after(at, kind, true);
        let mut history = History::new(spec.threads);
        run_until_crash(&db, &fs, &spec, (seed, None), &mut history, (600, 0));
        drop_within(db, "close after a fault");
        fs.clear_faults();
        cases += 1;
        fired += usize::from(history.logs.iter().flatten().any(|r| r.ack.is_none()));
        let case = format!("seed {seed}: {kind:?} once after {at} calls");
        let opts = || options(&fs, WalMode::Parallel, spec.group_bytes);
        let result = open_and_scan(opts()).and_then(|(db, state)| {
            verify(&spec, &history, &state, Crash::Process)?;
            crash_now(
                &fs,
                db,
                Crash::Power(CrashPolicy::DropUnsynced),
                "after reopen",
            );
            let (db, again) = open_and_scan(opts())?;
            drop_within(db, "close");
            if again != state {
                return Err(format!(
                    "a power loss right after recovery changed the state: {} keys before, {} after",
                    state.len(),
                    again.len()
                ));
            }
            Ok(())
        });
        failures.check(case, result);
    }
    eprintln!("single fault: {cases} cases, the fault failed a write in {fired}");
    failures.assert_none("single fault while writing");
    assert!(
        fired * 2 >= cases,
        "the fault failed a write in only {fired} of {cases} cases"
    );
}

// ---------------------------------------------------------------------------------------------
// 8: atomic batches
// ---------------------------------------------------------------------------------------------

/// Five-key batches (some over a page), blocking and through `submit_write`: after any crash
/// a batch's keys are all present or none.
#[test]
fn batches_are_atomic_across_crashes() {
    let crashes = POLICIES.map(Crash::Power);
    sweep(
        Spec {
            name: "batches",
            threads: 3,
            batch_keys: 5,
            sync_fraction: 0.75,
            ..BASE
        },
        seeds(6000, 6),
        &crashes,
    );
    sweep(
        Spec {
            name: "async-batches",
            threads: 3,
            batch_keys: 5,
            api: Api::Async(4),
            sync_fraction: 0.75,
            ..BASE
        },
        seeds(7000, 6),
        &crashes,
    );
}

// ---------------------------------------------------------------------------------------------
// 9: closing with requests in flight
// ---------------------------------------------------------------------------------------------

/// Dropping the `Db` with 200 asynchronous writes in flight completes each of them, `Ok` or
/// `Closed`, never leaves one pending. After the clean close every `Ok` write is there; after a
/// power loss right after it, or during it, every `Ok` `Sync` write.
#[test]
fn close_with_requests_in_flight() {
    let spec = Spec {
        name: "close",
        threads: 1,
        api: Api::Async(256),
        sync_fraction: 0.5,
        ..BASE
    };
    let mut failures = Failures::default();
    for seed in seeds(10000, 8) {
        let fs = TestFs::new(seed);
        let mut opts = options(&fs, WalMode::Parallel, spec.group_bytes);
        opts.pipeline.max_pending_requests = 1024;
        let db = Db::open(opts).unwrap();
        let mut rng = SmallRng::seed_from_u64(seed);
        let mut history = History::new(1);
        let mut handles = Vec::new();
        for c in 0..200 {
            let sync = rng.gen_bool(spec.sync_fraction);
            history.logs[0].push(Rec {
                submit: c,
                ack: None,
                sync,
                void: false,
            });
            let h = db.submit_put(&write_options(sync), &plain_key(0, c), &value(0, c));
            handles.push(h.unwrap_or_else(|e| panic!("seed {seed}: submit {c}: {e}")));
        }
        // Seeds 2 mod 3: the power fails while the close is under way.
        let crash_in_close = seed % 3 == 2;
        std::thread::scope(|s| {
            if crash_in_close {
                let fs = &fs;
                s.spawn(move || {
                    std::thread::sleep(Duration::from_micros(seed % 7 * 100));
                    fs.freeze_and_crash(Crash::Power(CrashPolicy::KeepRandomPages));
                });
            }
            drop_within(db, "close with requests in flight");
        });
        fs.clear_faults();
        for (c, h) in handles.into_iter().enumerate() {
            match await_within(h, HANG) {
                None => panic!("seed {seed}: write {c} still pending {HANG:?} after the close"),
                Some(Ok(())) => history.logs[0][c].ack = Some(1000 + c as u64),
                Some(Err(Error::Closed(_))) => {}
                // A crash during the close fails writes with I/O errors too.
                Some(Err(_)) if crash_in_close => {}
                Some(Err(e)) => panic!("seed {seed}: write {c} failed with {e:?}, not Closed"),
            }
        }
        let crash = if crash_in_close {
            Crash::Power(CrashPolicy::KeepRandomPages)
        } else if seed % 3 == 0 {
            Crash::Process
        } else {
            fs.freeze_and_crash(Crash::Power(CrashPolicy::DropUnsynced));
            fs.clear_faults();
            Crash::Power(CrashPolicy::DropUnsynced)
        };
        let case = format!("seed {seed}, {crash:?} after the close");
        let result = open_and_scan(options(&fs, WalMode::Parallel, spec.group_bytes)).and_then(
            |(db, state)| {
                drop_within(db, "close");
                verify(&spec, &history, &state, crash)
            },
        );
        failures.check(case, result);
    }
    failures.assert_none("close with requests in flight");
}
