//! Space and descriptor exhaustion. A tier that fills up while a memtable is flushed, a
//! compaction writes its outputs, the WAL grows or the MANIFEST takes an edit ends in a typed
//! out-of-space error naming the tier or file; no acknowledged write is lost, reads go on, and
//! once there is room again a reopen recovers everything and takes writes. Running out of file
//! descriptors fails with `EMFILE` naming the file, loses nothing, and stops failing as soon as
//! descriptors are free again.
//!
//! Space runs out two ways: [`FaultFs::set_space_limit`] fills a whole tier directory, and
//! [`ExhaustFs`] fails the writes to one kind of file (the WAL, the MANIFEST) with `ENOSPC`
//! while the rest of the tier still has room, so each writer is reached on its own.

mod common;

use common::{drop_within, sized, wait_for, TierSetup, CAPACITY, MODES};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tierkv::env::{FaultFs, FileLock, Fs, PositionalFile, RandomAccessFile, WritableFile};
use tierkv::{Db, Error, Options, Placement, ReadOptions, Result, WalMode, WriteOptions};

// ---------------------------------------------------------------------------------------------
// A file system whose files of one kind are full, and whose descriptors can run out
// ---------------------------------------------------------------------------------------------

/// What [`ExhaustFs`] refuses.
#[derive(Default)]
struct Limits {
    /// Writes to files whose name contains one of these fail with `ENOSPC`.
    full: Vec<&'static str>,
    /// Every open fails with `EMFILE`, as at `RLIMIT_NOFILE`.
    no_descriptors: bool,
    /// Files (and locks) open now: each holds a descriptor until dropped.
    open: usize,
    /// Opens past this many open files fail with `EMFILE`.
    max_open: Option<usize>,
}

/// One open file's descriptor, given back when the handle holding it is dropped.
struct Descriptor(Arc<Mutex<Limits>>);

impl Drop for Descriptor {
    fn drop(&mut self) {
        self.0.lock().open -= 1;
    }
}

/// A [`FaultFs`] with [`Limits`] on top.
struct ExhaustFs {
    inner: Arc<FaultFs>,
    limits: Arc<Mutex<Limits>>,
}

fn os_error(op: &'static str, path: &Path, errno: i32) -> Error {
    Error::Io {
        op,
        path: path.to_path_buf(),
        source: io::Error::from_raw_os_error(errno),
    }
}

impl Limits {
    fn check_space(&self, path: &Path, op: &'static str) -> Result<()> {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        if self.full.iter().any(|f| name.contains(f)) {
            return Err(os_error(op, path, libc::ENOSPC));
        }
        Ok(())
    }
}

impl ExhaustFs {
    fn new(inner: Arc<FaultFs>) -> Arc<ExhaustFs> {
        Arc::new(ExhaustFs {
            inner,
            limits: Arc::default(),
        })
    }

    /// Files whose name contains `fragment` take no more bytes.
    fn fill(&self, fragment: &'static str) {
        self.limits.lock().full.push(fragment);
    }

    fn set_descriptors_exhausted(&self, on: bool) {
        self.limits.lock().no_descriptors = on;
    }

    /// At most `open_files` files open at once (`None`: no limit).
    fn limit_descriptors(&self, open_files: Option<usize>) {
        self.limits.lock().max_open = open_files;
    }

    fn open_descriptors(&self) -> usize {
        self.limits.lock().open
    }

    /// Lifts the space and descriptor limits.
    fn make_room(&self) {
        let mut limits = self.limits.lock();
        limits.full.clear();
        limits.no_descriptors = false;
        limits.max_open = None;
    }

    /// A descriptor for opening `path`, or `EMFILE` if none is left.
    fn descriptor(&self, path: &Path) -> Result<Descriptor> {
        let mut limits = self.limits.lock();
        if limits.no_descriptors || limits.max_open.is_some_and(|max| limits.open >= max) {
            return Err(os_error("open", path, libc::EMFILE));
        }
        limits.open += 1;
        Ok(Descriptor(Arc::clone(&self.limits)))
    }

    fn wrap(
        &self,
        path: &Path,
        fd: Descriptor,
        inner: Box<dyn WritableFile>,
    ) -> Box<dyn WritableFile> {
        Box::new(LimitedFile {
            inner,
            path: path.to_path_buf(),
            limits: Arc::clone(&self.limits),
            _fd: fd,
        })
    }
}

impl Fs for ExhaustFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let fd = self.descriptor(path)?;
        Ok(self.wrap(path, fd, self.inner.create(path)?))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let fd = self.descriptor(path)?;
        Ok(self.wrap(path, fd, self.inner.open_append(path)?))
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let fd = self.descriptor(path)?;
        Ok(Arc::new(LimitedReader {
            inner: self.inner.open_read(path)?,
            _fd: fd,
        }))
    }
    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let fd = self.descriptor(path)?;
        Ok(Arc::new(LimitedReader {
            inner: self.inner.open_read_direct(path)?,
            _fd: fd,
        }))
    }
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let _fd = self.descriptor(dir)?;
        self.inner.list_dir(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let _fd = self.descriptor(dir)?;
        self.inner.sync_dir(dir)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let fd = self.descriptor(path)?;
        Ok(Box::new(LimitedLock {
            _inner: self.inner.lock(path)?,
            _fd: fd,
        }))
    }
    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        let fd = self.descriptor(path)?;
        Ok(Arc::new(LimitedPositional {
            inner: self.inner.open_positional(path, len)?,
            limits: Arc::clone(&self.limits),
            _fd: fd,
        }))
    }

    common::forward_fs!(
        inner =>
        exists,
        create_dir_all,
        remove_file,
        rename,
        file_size,
    );
}

/// A reader holding a descriptor.
struct LimitedReader {
    inner: Arc<dyn RandomAccessFile>,
    _fd: Descriptor,
}

impl RandomAccessFile for LimitedReader {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn note_read(&self, bytes: u64) {
        self.inner.note_read(bytes)
    }
    fn drop_cache(&self) {
        self.inner.drop_cache()
    }
}

/// A lock holding a descriptor.
struct LimitedLock {
    _inner: Box<dyn FileLock>,
    _fd: Descriptor,
}

impl FileLock for LimitedLock {}

/// A writable file whose appends and preallocations meet [`Limits::full`].
struct LimitedFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    limits: Arc<Mutex<Limits>>,
    _fd: Descriptor,
}

impl WritableFile for LimitedFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.limits.lock().check_space(&self.path, "write")?;
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn preallocate(&mut self, offset: u64, len: u64) -> Result<()> {
        self.limits.lock().check_space(&self.path, "fallocate")?;
        self.inner.preallocate(offset, len)
    }
    fn drop_cache(&mut self) {
        self.inner.drop_cache()
    }
    fn write_back(&mut self) {
        self.inner.write_back()
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

/// A positional file (the parallel WAL's area, the zoned WAL's device) whose writes meet
/// [`Limits::full`].
struct LimitedPositional {
    inner: Arc<dyn PositionalFile>,
    limits: Arc<Mutex<Limits>>,
    _fd: Descriptor,
}

impl PositionalFile for LimitedPositional {
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        self.limits.lock().check_space(self.inner.path(), "write")?;
        self.inner.write_at(offset, data, durable)
    }
    fn sync(&self) -> Result<()> {
        self.inner.sync()
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
// Databases, acknowledged writes and the checks
// ---------------------------------------------------------------------------------------------

/// Small memtables and tables on two tiers inside `fs`; L0 on the fast tier when
/// `levels_on_fast` is 1, on the capacity tier when it is 0. Compactions run only when asked
/// for, so each test decides when a compaction writes.
fn options(fs: Arc<dyn Fs>, mode: WalMode, levels_on_fast: usize) -> Options {
    sized(256 << 10, 16 << 10, 64 << 10)
        .fault_tiers()
        .levels_on_fast(levels_on_fast)
        .l0_compaction_trigger(64)
        .l0_slowdown_trigger(100)
        .l0_stop_trigger(120)
        .wal(mode)
        .fs(fs)
        .build()
        .expect("valid options")
}

/// Every write a test saw acknowledged: key -> value.
#[derive(Default)]
struct Acked(BTreeMap<Vec<u8>, Vec<u8>>);

impl Acked {
    /// Puts `count` keys `prefix-NNNNN` with Sync durability, each of which must succeed.
    fn put_all(&mut self, db: &Db, prefix: &str, count: u32) {
        for i in 0..count {
            let (k, v) = kv(prefix, i);
            db.put(&WriteOptions::sync(), &k, &v)
                .unwrap_or_else(|e| panic!("{prefix}: put {i} with room to spare: {e}"));
            self.0.insert(k, v);
        }
    }

    /// Puts keys `prefix-NNNNN` until one fails, and returns that failure.
    fn put_until_refused(&mut self, db: &Db, prefix: &str) -> Error {
        for i in 0..20_000 {
            let (k, v) = kv(prefix, i);
            match db.put(&WriteOptions::sync(), &k, &v) {
                Ok(()) => {
                    self.0.insert(k, v);
                }
                Err(e) => return e,
            }
        }
        panic!("{prefix}: 20000 puts never met the full file");
    }

    /// Every acknowledged write reads back, by key and by a scan.
    fn assert_readable(&self, db: &Db, case: &str) {
        self.assert_gets(db, case);
        self.assert_scan(db, case);
    }

    /// Every acknowledged write reads back by key.
    fn assert_gets(&self, db: &Db, case: &str) {
        for (k, v) in &self.0 {
            let got = db
                .get(&ReadOptions::default(), k)
                .unwrap_or_else(|e| panic!("{case}: get {:?}: {e}", String::from_utf8_lossy(k)));
            assert_eq!(
                got.as_deref(),
                Some(&v[..]),
                "{case}: acknowledged key {:?} lost",
                String::from_utf8_lossy(k)
            );
        }
    }

    /// A scan sees every acknowledged write.
    fn assert_scan(&self, db: &Db, case: &str) {
        let mut it = db
            .iter(ReadOptions::default())
            .unwrap_or_else(|e| panic!("{case}: iterator: {e}"));
        it.seek_to_first();
        let mut seen = 0usize;
        while it.valid() {
            if let Some(v) = self.0.get(it.key()) {
                assert_eq!(it.value(), &v[..], "{case}: scan value");
                seen += 1;
            }
            it.next();
        }
        it.status()
            .unwrap_or_else(|e| panic!("{case}: scan failed: {e}"));
        assert_eq!(seen, self.0.len(), "{case}: scan misses acknowledged keys");
    }
}

/// Key `prefix-NNNNN` and a 200-byte value that names it.
fn kv(prefix: &str, i: u32) -> (Vec<u8>, Vec<u8>) {
    let k = format!("{prefix}-{i:05}").into_bytes();
    let mut v = format!("value of {prefix}-{i:05} ").into_bytes();
    v.resize(200, b'.');
    (k, v)
}

/// `err` is out of space at its root, and its message names one of `places` (the tier, or
/// the file where the file system reports it whole).
fn assert_no_space_naming(err: &Error, places: &[&str], case: &str) {
    assert!(
        err.is_no_space(),
        "{case}: expected an out-of-space error, got {err:?}"
    );
    let shown = err.to_string();
    assert!(
        places.iter().any(|p| shown.contains(p)),
        "{case}: the error names none of {places:?}: {shown}"
    );
}

/// After a failure, writes are refused with the same typed cause, and reads go on.
fn assert_stopped_but_readable(db: &Db, acked: &Acked, case: &str) {
    let refused = db
        .put(&WriteOptions::sync(), b"after-the-failure", b"x")
        .expect_err("writes go on after the tier filled up");
    match &refused {
        Error::Stopped { cause } => assert!(
            cause.is_no_space(),
            "{case}: stopped by {cause:?}, not by the full tier"
        ),
        other => assert!(
            other.is_no_space(),
            "{case}: a write after the failure got {other:?}"
        ),
    }
    acked.assert_readable(db, &format!("{case}, before the reopen"));
}

/// With room again, a reopen recovers every acknowledged write and the database takes
/// writes, flushes and compactions.
fn reopen_with_room(fs: Arc<dyn Fs>, opts: Options, acked: &mut Acked, case: &str) {
    let db = Db::open(Options { fs, ..opts })
        .unwrap_or_else(|e| panic!("{case}: reopen with room: {e}"));
    acked.assert_readable(&db, &format!("{case}, after the reopen"));
    acked.put_all(&db, "resumed", 50);
    db.flush()
        .unwrap_or_else(|e| panic!("{case}: flush after the reopen: {e}"));
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{case}: compaction after the reopen: {e}"));
    acked.assert_readable(&db, &format!("{case}, after writes resumed"));
    drop_within(Some(db), case);
}

fn fresh(mode: WalMode, levels_on_fast: usize) -> (Arc<FaultFs>, Arc<ExhaustFs>, Options) {
    let fault = FaultFs::new(7);
    let fs = ExhaustFs::new(Arc::clone(&fault));
    let opts = options(fs.clone(), mode, levels_on_fast);
    (fault, fs, opts)
}

// ---------------------------------------------------------------------------------------------
// A full tier
// ---------------------------------------------------------------------------------------------

/// Writes 300 keys and flushes them with room, writes 300 more, fills the capacity tier and
/// flushes into it: the flush fails with `NoSpace` naming the tier (`acked` gets every key).
fn flush_into_a_full_capacity_tier(db: &Db, fault: &FaultFs, acked: &mut Acked, case: &str) {
    acked.put_all(db, "flushed", 300);
    db.flush().expect("flush with room");
    acked.put_all(db, "pending", 300);
    fault.set_space_limit(Path::new(CAPACITY), Some(0));
    let err = db.flush().expect_err("flush into a full tier");
    assert_no_space_naming(&err, &["'capacity'", CAPACITY], case);
}

/// L0 lives on the capacity tier, which is full when the memtable is flushed.
#[test]
fn a_tier_full_during_flush_stops_writes_and_loses_nothing() {
    for mode in MODES {
        let case = format!("{mode:?}: flush into a full capacity tier");
        let (fault, fs, opts) = fresh(mode, 0);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        flush_into_a_full_capacity_tier(&db, &fault, &mut acked, &case);
        assert_stopped_but_readable(&db, &acked, &case);
        drop_within(Some(db), &case);
        fault.set_space_limit(Path::new(CAPACITY), None);
        reopen_with_room(fs, opts, &mut acked, &case);
    }
}

/// L0 lives on the fast tier and L1 on the capacity tier, which is full when a compaction
/// writes its outputs there.
#[test]
fn a_tier_full_during_compaction_stops_writes_and_loses_nothing() {
    let case = "compaction into a full capacity tier";
    let (fault, fs, opts) = fresh(WalMode::Group, 1);
    let db = Db::open(opts.clone()).expect("open");
    let mut acked = Acked::default();
    for round in 0..3 {
        acked.put_all(&db, &format!("round{round}"), 200);
        db.flush().expect("flush to the fast tier");
    }
    assert!(
        db.live_files()
            .iter()
            .all(|f| f.level == 0 && f.tier == "fast"),
        "{case}: L0 tables are on the fast tier before the compaction"
    );
    fault.set_space_limit(Path::new(CAPACITY), Some(0));
    let err = db
        .compact_range(None, None)
        .expect_err("compaction into a full tier");
    assert_no_space_naming(&err, &["'capacity'", CAPACITY], case);
    assert_stopped_but_readable(&db, &acked, case);
    drop_within(Some(db), case);
    fault.set_space_limit(Path::new(CAPACITY), None);
    reopen_with_room(fs, opts, &mut acked, case);
}

/// The fast tier fills up under the WAL: the write that meets it fails naming the log, and
/// every write acknowledged before it survives.
#[test]
fn a_tier_full_during_a_wal_write_fails_that_write_and_loses_nothing() {
    for (mode, log) in [
        (WalMode::Group, ".log"),
        (WalMode::Parallel, "WAL-AREA"),
        (WalMode::Append, ".alog"),
        (WalMode::Zoned, "WALZONES"),
    ] {
        let case = format!("{mode:?}: full WAL");
        let (_fault, fs, opts) = fresh(mode, 0);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        acked.put_all(&db, "before", 200);
        fs.fill(log);
        let err = acked.put_until_refused(&db, "filling");
        assert_no_space_naming(&err, &["'fast'", log], &case);
        assert_stopped_but_readable(&db, &acked, &case);
        drop_within(Some(db), &case);
        fs.make_room();
        reopen_with_room(fs, opts, &mut acked, &case);
    }
}

/// The fast tier fills up under the MANIFEST as a flush records its table: the flush fails
/// naming the MANIFEST, and the flushed writes are still in the WAL.
#[test]
fn a_tier_full_during_a_manifest_write_loses_nothing() {
    for mode in MODES {
        let case = format!("{mode:?}: full MANIFEST");
        let (_fault, fs, opts) = fresh(mode, 1);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        acked.put_all(&db, "in-a-table", 200);
        db.flush().expect("flush with room");
        acked.put_all(&db, "in-the-memtable", 200);
        fs.fill("MANIFEST");
        let err = db
            .flush()
            .expect_err("a flush whose edit cannot be written");
        assert_no_space_naming(&err, &["'fast'", "MANIFEST"], &case);
        assert_stopped_but_readable(&db, &acked, &case);
        drop_within(Some(db), &case);
        fs.make_room();
        reopen_with_room(fs, opts, &mut acked, &case);
    }
}

// ---------------------------------------------------------------------------------------------
// Resuming in place once there is room again
// ---------------------------------------------------------------------------------------------

/// `err` stops writes because of a full tier.
fn assert_stopped_by_no_space(err: &Error, case: &str) {
    assert!(
        matches!(err, Error::Stopped { .. }) && err.is_no_space(),
        "{case}: expected writes stopped by a full tier, got {err:?}"
    );
}

/// A flush meets a full capacity tier and stops writes; `resume` while the tier is still full
/// runs the flush again, which fails the same way; once there is room, `resume` flushes and
/// writes go on in the same database, and a reopen after that finds everything.
#[test]
fn writes_resume_in_place_once_a_full_tier_has_room() {
    for mode in MODES {
        let case = format!("{mode:?}: resume after a full flush");
        let (fault, fs, opts) = fresh(mode, 0);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        flush_into_a_full_capacity_tier(&db, &fault, &mut acked, &case);
        assert_stopped_but_readable(&db, &acked, &case);

        let still_full = db.resume().expect_err("resume while the tier is full");
        assert_stopped_by_no_space(&still_full, &format!("{case}, resume without room"));
        assert_stopped_but_readable(&db, &acked, &format!("{case}, still full"));

        fault.set_space_limit(Path::new(CAPACITY), None);
        db.resume()
            .unwrap_or_else(|e| panic!("{case}: resume with room: {e}"));
        assert_eq!(
            db.stats().immutable_memtables,
            0,
            "{case}: resume flushed the memtable that waited"
        );
        acked.put_all(&db, "resumed", 300);
        db.flush()
            .unwrap_or_else(|e| panic!("{case}: flush after resume: {e}"));
        db.compact_range(None, None)
            .unwrap_or_else(|e| panic!("{case}: compaction after resume: {e}"));
        acked.assert_readable(&db, &format!("{case}, after resume"));
        drop_within(Some(db), &case);
        reopen_with_room(fs, opts, &mut acked, &format!("{case}, reopened"));
    }
}

/// With `auto_resume_ms`, a background worker retries a flush that stopped writes for lack of
/// space by itself, with backoff: while the tier stays full each retry fails again and writes
/// stay stopped (a write may slip in while a retry runs: it is acknowledged like any other);
/// once there is room, a retry flushes and writes go on with no call at all.
#[test]
fn writes_resume_by_themselves_with_auto_resume() {
    let case = "automatic resume after a full flush";
    let (fault, fs, mut opts) = fresh(WalMode::Group, 0);
    opts.compaction.auto_resume_ms = 10;
    let db = Db::open(opts.clone()).expect("open");
    let mut acked = Acked::default();
    flush_into_a_full_capacity_tier(&db, &fault, &mut acked, case);

    let mut refused = 0;
    for i in 0..30 {
        let (k, v) = kv("while-full", i);
        match db.put(&WriteOptions::sync(), &k, &v) {
            Ok(()) => {
                acked.0.insert(k, v);
            }
            Err(e) => {
                assert!(e.is_no_space(), "{case}: refused by {e:?}");
                refused += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(
        refused > 0,
        "{case}: writes went on while the tier was full"
    );

    fault.set_space_limit(Path::new(CAPACITY), None);
    let mut i = 0;
    let resumed = wait_for(Duration::from_secs(20), || {
        let (k, v) = kv("after-room", i);
        i += 1;
        db.put(&WriteOptions::sync(), &k, &v).ok()?;
        acked.0.insert(k, v);
        Some(())
    });
    assert!(
        resumed.is_some(),
        "{case}: writes never resumed by themselves"
    );
    acked.put_all(&db, "resumed", 200);
    db.flush()
        .unwrap_or_else(|e| panic!("{case}: flush after the automatic resume: {e}"));
    acked.assert_readable(&db, &format!("{case}, after resume"));
    drop_within(Some(db), case);
    reopen_with_room(fs, opts, &mut acked, case);
}

/// A compaction meets a full capacity tier; once there is room, `resume` clears the stop,
/// the compaction runs again and writes go on without a reopen.
#[test]
fn a_full_compaction_resumes_in_place() {
    let case = "resume after a full compaction";
    let (fault, fs, opts) = fresh(WalMode::Group, 1);
    let db = Db::open(opts.clone()).expect("open");
    let mut acked = Acked::default();
    for round in 0..3 {
        acked.put_all(&db, &format!("round{round}"), 200);
        db.flush().expect("flush to the fast tier");
    }
    fault.set_space_limit(Path::new(CAPACITY), Some(0));
    let err = db
        .compact_range(None, None)
        .expect_err("compaction into a full tier");
    assert_no_space_naming(&err, &["'capacity'", CAPACITY], case);
    assert_stopped_but_readable(&db, &acked, case);
    fault.set_space_limit(Path::new(CAPACITY), None);
    db.resume()
        .unwrap_or_else(|e| panic!("{case}: resume with room: {e}"));
    acked.put_all(&db, "resumed", 200);
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{case}: compaction after resume: {e}"));
    assert!(
        db.live_files().iter().all(|f| f.level > 0),
        "{case}: the compaction emptied L0"
    );
    acked.assert_readable(&db, &format!("{case}, after resume"));
    drop_within(Some(db), case);
    reopen_with_room(fs, opts, &mut acked, case);
}

/// A stop caused by a full WAL or a full MANIFEST is not resumed in place: what the failed
/// write left at the end of the log or MANIFEST is unknown until recovery reads it. `resume`
/// says so with the typed cause, writes stay stopped, and a reopen recovers everything.
#[test]
fn a_full_wal_or_manifest_is_not_resumed_in_place() {
    for (fragment, levels_on_fast) in [(".log", 0), ("MANIFEST", 1)] {
        let case = format!("full {fragment}: resume refused");
        let (_fault, fs, opts) = fresh(WalMode::Group, levels_on_fast);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        acked.put_all(&db, "before", 200);
        if levels_on_fast == 1 {
            db.flush().expect("flush with room");
            acked.put_all(&db, "in-the-memtable", 100);
        }
        fs.fill(fragment);
        let err = if fragment == "MANIFEST" {
            db.flush()
                .expect_err("a flush whose edit cannot be written")
        } else {
            acked.put_until_refused(&db, "filling")
        };
        assert_no_space_naming(&err, &["'fast'", fragment], &case);
        fs.make_room();
        let refused = db.resume().expect_err("resume after a failed log write");
        assert_stopped_by_no_space(&refused, &case);
        assert_stopped_but_readable(&db, &acked, &case);
        drop_within(Some(db), &case);
        reopen_with_room(fs, opts, &mut acked, &case);
    }
}

// ---------------------------------------------------------------------------------------------
// A migration into a full tier
// ---------------------------------------------------------------------------------------------

/// 1 KiB that no compressor shrinks, determined by `i`.
fn incompressible(i: u32) -> Vec<u8> {
    let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..128)
        .flat_map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x.to_le_bytes()
        })
        .collect()
}

/// Options whose fast tier (`fast_bytes`) holds every level, with automatic placement.
fn migration_options(fs: Arc<dyn Fs>, fast_bytes: u64, placement: Placement) -> Options {
    sized(64 << 10, 64 << 10, 256 << 10)
        .fault_tiers_capped(fast_bytes)
        .levels_on_fast(7)
        .l0_compaction_trigger(2)
        .fast_tier_bandwidth(100 << 30)
        .placement(placement)
        .fs(fs)
        .build()
        .expect("valid options")
}

/// Fills a 4 MiB fast tier to `fill_to` bytes of tables with fixed placement (nothing
/// migrates), all of it flushed and compacted.
fn fill_fast_tier(fs: Arc<dyn Fs>, fill_to: u64, acked: &mut Acked) {
    let db = Db::open(migration_options(fs, 4 << 20, Placement::Fixed)).expect("open");
    let mut i = 0u32;
    while db.stats().tiers[0].bytes_used < fill_to {
        for _ in 0..16 {
            let (k, v) = (format!("moved-{i:06}").into_bytes(), incompressible(i));
            db.put(&WriteOptions::default(), &k, &v).expect("put");
            acked.0.insert(k, v);
            i += 1;
        }
        db.flush().expect("flush");
        db.wait_for_compactions().expect("compactions");
        assert!(i < 100_000, "the fast tier never filled: {}", db.stats());
    }
    drop_within(Some(db), "filling the fast tier");
}

/// Automatic placement moves the coldest tables of a fast tier past its watermark down to the
/// capacity tier, which is full: the migration fails with an out-of-space error naming the
/// capacity tier, the tables stay where they were with nothing lost, `resume` with room lets
/// the migration run again, and a reopen finds everything.
#[test]
fn a_migration_into_a_full_tier_fails_cleanly_and_loses_nothing() {
    let case = "migration into a full capacity tier";
    let fault = FaultFs::new(5);
    let fs = ExhaustFs::new(Arc::clone(&fault));
    let capacity = 3 << 20;
    let budget = {
        let o = migration_options(fs.clone(), capacity, Placement::Auto);
        capacity - o.wal_reserve().min(capacity)
    };
    let mut acked = Acked::default();
    fill_fast_tier(fs.clone(), budget * 93 / 100, &mut acked);

    fault.set_space_limit(Path::new(CAPACITY), Some(0));
    let opts = migration_options(fs.clone(), capacity, Placement::Auto);
    let db = Db::open(opts).expect("open with automatic placement");
    let before: Vec<_> = db.live_files().iter().map(|f| f.number).collect();
    let err = wait_for(Duration::from_secs(30), || db.wait_for_compactions().err())
        .unwrap_or_else(|| panic!("{case}: no migration failed: {}", db.stats()));
    assert_no_space_naming(&err, &["'capacity'", CAPACITY], case);
    assert_eq!(db.stats().migrations, 0, "{case}: nothing moved");
    let after: Vec<_> = db.live_files().iter().map(|f| f.number).collect();
    assert_eq!(after, before, "{case}: the tables stayed where they were");
    assert!(
        db.live_files().iter().all(|f| f.tier == "fast"),
        "{case}: no table is listed on the full tier"
    );
    assert_stopped_but_readable(&db, &acked, case);

    fault.set_space_limit(Path::new(CAPACITY), None);
    db.resume()
        .unwrap_or_else(|e| panic!("{case}: resume with room: {e}"));
    let moved = wait_for(Duration::from_secs(30), || {
        (db.stats().migrations > 0).then_some(())
    });
    assert!(
        moved.is_some(),
        "{case}: no migration after resume: {}",
        db.stats()
    );
    acked.put_all(&db, "resumed", 20);
    acked.assert_readable(&db, &format!("{case}, after resume"));
    drop_within(Some(db), case);

    let quiet = migration_options(fs, capacity, Placement::Fixed);
    let db = Db::open(quiet).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    acked.assert_readable(&db, &format!("{case}, after the reopen"));
    drop_within(Some(db), case);
}

// ---------------------------------------------------------------------------------------------
// No file descriptors left
// ---------------------------------------------------------------------------------------------

/// `err` is `EMFILE` from opening a file.
fn assert_out_of_descriptors(err: &Error, case: &str) {
    match err.root_cause() {
        Error::Io { op, path, source } => {
            assert_eq!(source.raw_os_error(), Some(libc::EMFILE), "{case}: {err}");
            assert!(!path.as_os_str().is_empty(), "{case}: names no file: {err}");
            assert!(
                err.to_string().contains(&*path.to_string_lossy()),
                "{case}: {err}"
            );
            let _ = op;
        }
        other => panic!("{case}: expected EMFILE from an open, got {other:?}"),
    }
}

/// Reads that must open a table fail with `EMFILE` while no descriptor is free, and succeed
/// as soon as one is: the table cache keeps no failure.
#[test]
fn reads_without_descriptors_fail_clearly_and_recover() {
    let case = "reads without descriptors";
    let (_fault, fs, opts) = fresh(WalMode::Group, 1);
    let mut acked = Acked::default();
    {
        let db = Db::open(opts.clone()).expect("open");
        acked.put_all(&db, "tabled", 400);
        db.flush().expect("flush");
        drop_within(Some(db), case);
    }
    // A new process: the table cache holds nothing open.
    let db = Db::open(opts.clone()).expect("reopen");
    fs.set_descriptors_exhausted(true);
    let (k, _) = kv("tabled", 7);
    let err = db
        .get(&ReadOptions::default(), &k)
        .expect_err("a read that must open a table");
    assert_out_of_descriptors(&err, case);
    let err = db
        .get(&ReadOptions::default(), &k)
        .expect_err("still no descriptor");
    assert_out_of_descriptors(&err, case);
    fs.set_descriptors_exhausted(false);
    acked.assert_readable(&db, &format!("{case}, descriptors free again"));
    acked.put_all(&db, "afterwards", 50);
    db.flush().expect("flush once descriptors are free");
    acked.assert_readable(&db, &format!("{case}, after a flush"));
    drop_within(Some(db), case);
}

/// A flush that cannot open its table file fails with `EMFILE` naming it; nothing
/// acknowledged is lost, reads go on once descriptors are free, an open without them fails
/// the same way, and the database reopens once they are free.
#[test]
fn a_flush_without_descriptors_fails_clearly_and_loses_nothing() {
    for mode in MODES {
        let case = format!("{mode:?}: flush without descriptors");
        let (_fault, fs, opts) = fresh(mode, 1);
        let db = Db::open(opts.clone()).expect("open");
        let mut acked = Acked::default();
        acked.put_all(&db, "pending", 300);
        fs.set_descriptors_exhausted(true);
        let err = db.flush().expect_err("a flush that cannot open its table");
        assert_out_of_descriptors(&err, &case);
        // Reads that must open a table fail the same way while no descriptor is free; once
        // one is, every acknowledged write reads back from the same database.
        fs.set_descriptors_exhausted(false);
        acked.assert_readable(&db, &format!("{case}, before the reopen"));
        drop_within(Some(db), &case);
        fs.set_descriptors_exhausted(true);
        let err = Db::open(opts.clone()).expect_err("an open without descriptors");
        assert_out_of_descriptors(&err, &format!("{case}, open"));
        fs.set_descriptors_exhausted(false);
        reopen_with_room(fs, opts, &mut acked, &case);
    }
}

/// A database with more tables than the process has descriptors: point reads open every table
/// in turn, and the table cache closes the readers it holds idle instead of failing each read
/// that needs one more. A scan, which holds every table open at once, fails with `EMFILE`
/// until the limit is lifted.
#[test]
fn more_tables_than_descriptors_still_serve_reads() {
    let case = "more tables than descriptors";
    let (_fault, fs, opts) = fresh(WalMode::Group, 1);
    let mut acked = Acked::default();
    {
        let db = Db::open(opts.clone()).expect("open");
        for round in 0..24 {
            acked.put_all(&db, &format!("table{round:02}"), 20);
            db.flush().expect("flush");
        }
        assert!(db.live_files().len() >= 24, "{case}: one table per flush");
        drop_within(Some(db), case);
    }
    let db = Db::open(opts.clone()).expect("reopen");
    let spare = 4;
    fs.limit_descriptors(Some(fs.open_descriptors() + spare));
    for pass in 0..2 {
        acked.assert_gets(&db, &format!("{case}, pass {pass}"));
    }
    // A scan reads every table at once: it needs a descriptor for each, and says so.
    let err = db
        .iter(ReadOptions::default())
        .err()
        .expect("a scan over more tables than descriptors");
    assert_out_of_descriptors(&err, case);
    fs.limit_descriptors(None);
    acked.assert_readable(&db, &format!("{case}, no limit"));
    acked.put_all(&db, "afterwards", 50);
    db.flush().expect("flush with descriptors to spare");
    acked.assert_readable(&db, &format!("{case}, after a flush"));
    drop_within(Some(db), case);
}

/// Set in the child process of [`a_real_descriptor_limit_still_serves_point_reads`]: the
/// database directory it works in.
const CHILD_DIR: &str = "TIERKV_EXHAUSTION_CHILD_DIR";

/// The same on real files under a real `RLIMIT_NOFILE`: a child process (this test binary
/// again, running only this test) lowers its soft limit to a few descriptors above what it
/// has open, reads every key of a 24-table database, then lifts the limit and scans.
#[test]
fn a_real_descriptor_limit_still_serves_point_reads() {
    if let Ok(dir) = std::env::var(CHILD_DIR) {
        return descriptor_limited_child(Path::new(&dir));
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    let child = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "a_real_descriptor_limit_still_serves_point_reads",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir.path())
        .output()
        .expect("run the child");
    assert!(
        child.status.success(),
        "the descriptor-limited child failed: {}\n{}{}",
        child.status,
        String::from_utf8_lossy(&child.stdout),
        String::from_utf8_lossy(&child.stderr)
    );
}

fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .count()
}

fn set_soft_descriptor_limit(soft: u64) {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed.
    unsafe {
        assert_eq!(libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit), 0);
        limit.rlim_cur = soft.min(limit.rlim_max);
        assert_eq!(libc::setrlimit(libc::RLIMIT_NOFILE, &limit), 0);
    }
}

fn descriptor_limited_child(dir: &Path) {
    let case = "real RLIMIT_NOFILE";
    let opts = sized(256 << 10, 16 << 10, 64 << 10)
        .tiers_in(dir)
        .levels_on_fast(1)
        .l0_compaction_trigger(64)
        .l0_slowdown_trigger(100)
        .l0_stop_trigger(120)
        .build()
        .expect("valid options");
    let mut acked = Acked::default();
    {
        let db = Db::open(opts.clone()).expect("open");
        for round in 0..24 {
            acked.put_all(&db, &format!("table{round:02}"), 20);
            db.flush().expect("flush");
        }
        drop_within(Some(db), case);
    }
    let db = Db::open(opts).expect("reopen");
    set_soft_descriptor_limit(open_descriptors() as u64 + 6);
    for pass in 0..2 {
        acked.assert_gets(&db, &format!("{case}, pass {pass}"));
    }
    set_soft_descriptor_limit(u64::MAX);
    acked.assert_readable(&db, &format!("{case}, no limit"));
    drop_within(Some(db), case);
}
