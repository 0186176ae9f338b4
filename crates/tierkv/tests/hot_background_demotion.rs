//! Under `hot_admission = "when-free"` a demotion past the hot store's watermark runs as its
//! own job and lets the flush slot go while it writes its tables: flushes (and the writers
//! waiting on them) go on meanwhile, and what they write over the objects being demoted
//! wins, before and after reopen, also when an L0 compaction is asked for meanwhile.

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

/// A file system whose closed gate holds the first table creation that reaches it (later
/// ones pass): a demotion that writes a table waits there, mid-job, while flushes and
/// compactions write theirs.
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
            if self.waiting.load(Ordering::SeqCst) > 0 {
                drop(closed);
                return self.inner.create(path);
            }
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

/// A value too large for any slot: the store keeps a marker, L0 the value.
fn large_value(i: u32) -> Vec<u8> {
    let mut v = round_value(i, 2);
    v.resize(5000, b'L');
    v
}

/// Fills the store past its watermark, within its budget, with the gate closed once the
/// last flush is due: returns the keys written, once a demotion waits at the gate.
fn start_a_held_demotion(db: &Db, gate: &GateFs) -> u32 {
    // Fill the store to 90% of its budget in flushed batches: no demotion yet.
    let mut keys = 0u32;
    while (db.stats().hot_tier.unwrap().bytes as f64) < BUDGET as f64 * 0.9 {
        put_flushed(db, keys..keys + 50);
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
    // Read first, so the tracker has seen them: a flush takes keys it sees for the first
    // time only up to the low watermark, where no demotion starts.
    for i in keys..keys + crossing {
        assert_eq!(get(db, &key6(i)), None);
    }
    gate.close();
    put_flushed(db, keys..keys + crossing);
    keys += crossing;
    assert!(
        gate.wait_for_waiter(Duration::from_secs(20)),
        "a demotion started and waits to write its table"
    );
    keys
}

#[test]
fn flushes_run_while_a_demotion_writes_its_tables() {
    let fault = FaultFs::new(31);
    let gate = GateFs::new(fault.clone());
    let db = Db::open(options(&fault, &gate)).unwrap();
    let keys = start_a_held_demotion(&db, &gate);
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

#[test]
fn an_l0_compaction_waits_for_the_table_of_a_demotion_in_flight() {
    let fault = FaultFs::new(32);
    let gate = GateFs::new(fault.clone());
    let db = Db::open(options(&fault, &gate)).unwrap();
    let keys = start_a_held_demotion(&db, &gate);
    // The first keys, the demotion's (MSC takes a range's unpinned keys in order), get
    // newer values in L0 tables. NB: few enough that L0 stays below its slowdown trigger:
    // past it, the writes would wait for an L0 compaction that waits for the gate.
    let w = WriteOptions::default();
    let overwritten = 200.min(keys);
    for i in 0..overwritten {
        db.put(&w, &key6(i), &large_value(i)).unwrap();
    }
    db.flush().unwrap();
    // Merged below L0 now, those values would sit under the demotion's older ones once its
    // table reaches L0: the compaction must wait for it.
    let (waited, compacted) = std::thread::scope(|s| {
        let compaction = s.spawn(|| db.compact_range(None, None));
        std::thread::sleep(Duration::from_millis(500));
        let waited = !compaction.is_finished();
        gate.open();
        (waited, compaction.join().unwrap())
    });
    assert!(waited, "the L0 compaction waited for the demotion's table");
    compacted.unwrap();
    db.wait_for_compactions().unwrap();
    // NB: the demotion dropped none of its objects if all were overwritten meanwhile; its
    // table, with their older versions, went to L0 all the same.
    for i in 0..keys {
        let want = if i < overwritten {
            large_value(i)
        } else {
            round_value(i, 0)
        };
        assert_eq!(get(&db, &key6(i)), Some(want), "key {i}");
    }
}
