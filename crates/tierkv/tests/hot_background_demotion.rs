//! Under `hot_admission = "when-free"` a demotion past the hot store's watermark runs as its
//! own job and lets the flush slot go while it writes its tables: flushes (and the writers
//! waiting on them) go on meanwhile, and what they write over the objects being demoted
//! wins, before and after reopen.

mod common;

use common::{hot_slab, key6, round_value};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};
use tierkv::env::{FaultFs, Fs, WritableFile};
use tierkv::{Db, HotAdmission, Options, ReadOptions, WalMode, WriteOptions};

const BUDGET: u64 = 256 << 10;
/// The watermark past which a flush wants a demotion (MSC's).
const HIGH_WATERMARK: f64 = 0.98;

/// A file system that holds every table creation while its gate is closed: a demotion
/// that writes a table waits there, mid-job.
struct GateFs {
    inner: Arc<FaultFs>,
    closed: Mutex<bool>,
    opened: Condvar,
    /// Table creations waiting at the gate now.
    waiting: AtomicUsize,
}

impl GateFs {
    fn new(inner: Arc<FaultFs>) -> Arc<GateFs> {
        Arc::new(GateFs {
            inner,
            closed: Mutex::new(false),
            opened: Condvar::new(),
            waiting: AtomicUsize::new(0),
        })
    }

    fn close(&self) {
        *self.closed.lock() = true;
    }

    fn open(&self) {
        *self.closed.lock() = false;
        self.opened.notify_all();
    }

    /// Waits up to `limit` for a table creation to wait at the gate.
    fn wait_for_waiter(&self, limit: Duration) -> bool {
        let deadline = Instant::now() + limit;
        while self.waiting.load(Ordering::SeqCst) == 0 {
            if Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }
}

impl Fs for GateFs {
    fn create(&self, path: &Path) -> tierkv::Result<Box<dyn WritableFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let mut closed = self.closed.lock();
            self.waiting.fetch_add(1, Ordering::SeqCst);
            while *closed {
                self.opened.wait(&mut closed);
            }
            self.waiting.fetch_sub(1, Ordering::SeqCst);
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

fn options(fault: &Arc<FaultFs>, gate: &Arc<GateFs>) -> Options {
    hot_slab(fault, WalMode::Group, BUDGET)
        .hot_admission(HotAdmission::WhenFree)
        .fs(gate.clone())
        .build()
        .expect("valid options")
}

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), k).unwrap()
}

/// Puts keys `range` at round 0 and flushes.
fn put_flushed(db: &Db, range: std::ops::Range<u32>) {
    for i in range {
        db.put(&WriteOptions::default(), &key6(i), &round_value(i, 0))
            .unwrap();
    }
    db.flush().unwrap();
}

/// What a key should read: deleted, overwritten (round 1) or as first written.
fn expected(i: u32, overwritten: &[u32], deleted: &[u32]) -> Option<Vec<u8>> {
    if deleted.contains(&i) {
        None
    } else if overwritten.contains(&i) {
        Some(round_value(i, 1))
    } else {
        Some(round_value(i, 0))
    }
}

#[test]
fn flushes_run_while_a_demotion_writes_its_tables() {
    let fault = FaultFs::new(31);
    let gate = GateFs::new(fault.clone());
    let db = Db::open(options(&fault, &gate)).unwrap();
    // Fill the store to 90% of its budget in flushed batches: no demotion yet.
    let mut keys = 0u32;
    while (db.stats().hot_tier.unwrap().bytes as f64) < BUDGET as f64 * 0.9 {
        put_flushed(&db, keys..keys + 50);
        keys += 50;
    }
    let hot = db.stats().hot_tier.unwrap();
    assert_eq!(hot.demoted_objects, 0, "{hot:?}");
    // One flush of new keys that takes the store past the watermark but within the budget,
    // so every key is admitted and the flush writes no table.
    let slot = hot.bytes / hot.objects;
    let past = (BUDGET as f64 * HIGH_WATERMARK) as u64 - hot.bytes;
    let crossing = (past / slot + 2) as u32;
    assert!(hot.bytes + u64::from(crossing) * slot <= BUDGET, "{hot:?}");
    gate.close();
    put_flushed(&db, keys..keys + crossing);
    keys += crossing;
    assert!(
        gate.wait_for_waiter(Duration::from_secs(20)),
        "a demotion started and waits to write its table"
    );
    // Meanwhile: overwrite and delete keys (the demotion's victims among them), and flush.
    let overwritten: Vec<u32> = (0..keys).step_by(7).collect();
    let deleted: Vec<u32> = (3..keys).step_by(11).collect();
    let w = WriteOptions::default();
    for &i in &overwritten {
        db.put(&w, &key6(i), &round_value(i, 1)).unwrap();
    }
    for &i in &deleted {
        db.delete(&w, &key6(i)).unwrap();
    }
    let flushed = std::thread::scope(|s| {
        let (done, finished) = mpsc::channel();
        let db = &db;
        s.spawn(move || done.send(db.flush()).unwrap());
        let flushed = finished.recv_timeout(Duration::from_secs(20));
        // NB: opened whatever happened, so a failing run ends instead of hanging.
        gate.open();
        flushed
    });
    assert!(
        matches!(flushed, Ok(Ok(()))),
        "the flush ran while the demotion waited: {flushed:?}"
    );
    db.wait_for_compactions().unwrap();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_objects > 0, "{hot:?}");
    assert!(hot.bytes <= BUDGET, "{hot:?}");
    for i in 0..keys {
        assert_eq!(
            get(&db, &key6(i)),
            expected(i, &overwritten, &deleted),
            "key {i}"
        );
    }
    drop(db);
    let db = Db::open(options(&fault, &gate)).unwrap();
    for i in 0..keys {
        let want = expected(i, &overwritten, &deleted);
        assert_eq!(get(&db, &key6(i)), want, "key {i} after reopen");
    }
}
