//! A background job that panics. The panic is caught where the job runs and becomes the
//! sticky error, typed as [`Error::BackgroundPanic`] naming the job and the panic's message:
//! `flush` and later writes fail with it at once instead of waiting for ever, reads go on,
//! `resume` refuses to clear it (a panic is a defect, not a full disk), and a reopen recovers
//! every acknowledged write.
//!
//! The panic is injected through the file system: [`PanicFs`] panics when a table file is
//! created while it is armed, which only a flush does in these tests (compaction triggers are
//! out of reach).

mod common;

use common::{drop_within, sized, within, TierSetup, MODES};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::env::{FaultFs, Fs, WritableFile};
use tierkv::{Db, Error, Options, ReadOptions, Result, WalMode, WriteOptions};

/// What the injected panic says.
const PANIC_MESSAGE: &str = "injected panic while creating a table";

/// How long a failed flush or a refused write may take to report the panic.
const PROMPTLY: Duration = Duration::from_secs(10);

/// A [`FaultFs`] that panics in `create` of a `.sst` file while armed.
struct PanicFs {
    inner: Arc<FaultFs>,
    armed: AtomicBool,
}

impl PanicFs {
    fn new(inner: Arc<FaultFs>) -> Arc<PanicFs> {
        Arc::new(PanicFs {
            inner,
            armed: AtomicBool::new(false),
        })
    }

    fn arm(&self, on: bool) {
        self.armed.store(on, Ordering::SeqCst);
    }
}

impl Fs for PanicFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let is_table = path.extension().is_some_and(|e| e == "sst");
        if is_table && self.armed.load(Ordering::SeqCst) {
            panic!("{PANIC_MESSAGE}: {}", path.display());
        }
        self.inner.create(path)
    }

    common::forward_fs!(
        inner =>
        open_append,
        open_read,
        exists,
        list_dir,
        create_dir_all,
        remove_file,
        rename,
        sync_dir,
        file_size,
        lock,
        open_positional,
    );
}

/// Small memtables on two tiers; compactions only when asked for.
fn options(fs: Arc<dyn Fs>, mode: WalMode) -> Options {
    sized(256 << 10, 16 << 10, 64 << 10)
        .fault_tiers()
        .levels_on_fast(1)
        .l0_compaction_trigger(64)
        .l0_slowdown_trigger(100)
        .l0_stop_trigger(120)
        .wal(mode)
        .fs(fs)
        .build()
        .expect("valid options")
}

/// Puts `count` keys `prefix-NNNNN` with Sync durability into `acked`.
fn put_all(db: &Db, acked: &mut BTreeMap<Vec<u8>, Vec<u8>>, prefix: &str, count: u32) {
    for i in 0..count {
        let k = format!("{prefix}-{i:05}").into_bytes();
        let v = format!("value of {prefix}-{i:05}").into_bytes();
        db.put(&WriteOptions::sync(), &k, &v)
            .unwrap_or_else(|e| panic!("{prefix}: put {i}: {e}"));
        acked.insert(k, v);
    }
}

fn assert_readable(db: &Db, acked: &BTreeMap<Vec<u8>, Vec<u8>>, case: &str) {
    for (k, v) in acked {
        let got = db
            .get(&ReadOptions::default(), k)
            .unwrap_or_else(|e| panic!("{case}: get: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(&v[..]),
            "{case}: acknowledged key lost"
        );
    }
}

/// `err` is the caught panic of a flush, with its message.
fn assert_flush_panic(err: &Error, case: &str) {
    assert!(err.is_background_panic(), "{case}: got {err:?}");
    match err.root_cause() {
        Error::BackgroundPanic { job, message } => {
            assert_eq!(*job, "flush", "{case}: {err}");
            assert!(message.contains(PANIC_MESSAGE), "{case}: {err}");
        }
        other => panic!("{case}: expected a background panic, got {other:?}"),
    }
}

fn a_panicking_flush(mode: WalMode) {
    let case = format!("{mode:?}: panicking flush");
    let fault = FaultFs::new(11);
    let fs = PanicFs::new(fault);
    let opts = options(fs.clone(), mode);
    let db = Db::open(opts.clone()).expect("open");
    let mut acked = BTreeMap::new();
    put_all(&db, &mut acked, "flushed", 200);
    db.flush().expect("flush before the panic");
    put_all(&db, &mut acked, "pending", 200);

    fs.arm(true);
    let started = Instant::now();
    let err = db.flush().expect_err("a flush whose job panics");
    assert!(started.elapsed() < PROMPTLY, "{case}: the flush took long");
    assert_flush_panic(&err, &case);

    let started = Instant::now();
    let refused = db
        .put(&WriteOptions::sync(), b"after-the-panic", b"x")
        .expect_err("a write after the panic");
    assert!(started.elapsed() < PROMPTLY, "{case}: the write took long");
    assert!(
        matches!(&refused, Error::Stopped { .. }),
        "{case}: {refused:?}"
    );
    assert_flush_panic(&refused, &format!("{case}, later write"));
    let not_resumed = db.resume().expect_err("a panic is not resumed");
    assert_flush_panic(&not_resumed, &format!("{case}, resume"));
    assert!(
        db.wait_for_compactions().is_err(),
        "{case}: waiting for background work reports the panic"
    );
    assert_readable(&db, &acked, &format!("{case}, before the reopen"));
    drop_within(Some(db), &case);

    fs.arm(false);
    let db = Db::open(opts).expect("reopen after the panic");
    assert_readable(&db, &acked, &format!("{case}, after the reopen"));
    put_all(&db, &mut acked, "reopened", 50);
    db.flush().expect("flush after the reopen");
    assert_readable(&db, &acked, &format!("{case}, after a flush"));
    drop_within(Some(db), &case);
}

#[test]
fn a_panicking_flush_fails_its_waiters_and_loses_nothing() {
    for mode in MODES {
        within(
            &format!("panicking flush {mode:?}"),
            Duration::from_secs(60),
            move || a_panicking_flush(mode),
        );
    }
}
