//! Ordering and visibility of concurrent writes, through the sync and the async API, in both WAL
//! modes.
//!
//! Writers each own a key range and write one new key per step, `w{w}/c{counter}`, with an
//! increasing counter, waiting for each write's acknowledgement before the next; after each ack
//! they publish "acknowledged through counter" in a shared atomic. Batch writers put, in the same
//! batch, `w{w}/latest` and eight keys `w{w}/m0..m7`, all carrying the counter. Every counter key's
//! value also records what the writer had seen acknowledged by every writer when it submitted the
//! write (its causal dependencies).
//!
//! Readers snapshot all acknowledged counters before each read and then check, with gets,
//! `submit_get`, iterators, `submit_scan` and explicit snapshots:
//! - every acknowledged write is visible (`latest` at least as new, the acknowledged key present);
//! - visibility is a prefix per writer: the counter keys found are contiguous;
//! - a consistent view (iterator, snapshot, one scan) never shows part of a batch: `latest`, the
//!   `m` keys and the newest counter key agree;
//! - a consistent view that shows a write shows every write acknowledged before it was submitted
//!   (no reader sees sequence n+1 without n);
//! - sequential reads by one reader never go back in time.
//!
//! The same writers also run on `FaultFs` and are cut off by a power loss (each `CrashPolicy`) or
//! a process kill: the recovered state must be a per-writer prefix, hold whole batches only,
//! respect the causality above, and keep every write acknowledged as durable.
//!
//! `TIERKV_ORDERING_MILLIS` sets how long the load runs per WAL mode (default 2000).

mod common;

use common::{
    block_on, drop_within, each_mode, env_u64, sized, small, submit, try_submit, wait_bounded,
    within, Crash, TierSetup, MODES, TEST_LIMIT,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};
use tierkv::env::{CrashPolicy, FaultFs, FaultKind};
use tierkv::{
    Db, Handle, Options, ReadOptions, Result, Snapshot, WalMode, WriteBatch, WriteOptions,
};

/// Writers, by kind: the index modulo 4 picks sync put, async batch, sync batch, async put.
const WRITERS: usize = 4;
const READERS: usize = 3;
/// `m` keys written with each batch.
const MULTI: usize = 8;
/// A reader checks the counter keys from this many below the acknowledged counter.
const BACK: u64 = 32;

fn run_millis() -> u64 {
    env_u64("TIERKV_ORDERING_MILLIS", 2000)
}

fn options(dir: &Path, mode: WalMode) -> Options {
    sized(256 << 10, 64 << 10, 512 << 10)
        .tiers_in(dir)
        .levels_on_fast(1)
        .l0_compaction_trigger(2)
        .wal(mode)
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------------------------
// Waiting for handles

/// Waits for a handle one of three ways.
fn collect<T>(h: Handle<T>, rng: &mut SmallRng, what: &str) -> Result<T> {
    match rng.gen_range(0..3) {
        0 => h.wait(),
        1 => wait_bounded(h, what),
        _ => block_on(h),
    }
}

// ---------------------------------------------------------------------------------------------
// Keys and values

fn ckey(w: usize, c: u64) -> Vec<u8> {
    format!("w{w}/c{c:010}").into_bytes()
}

fn latest_key(w: usize) -> Vec<u8> {
    format!("w{w}/latest").into_bytes()
}

fn mkey(w: usize, i: usize) -> Vec<u8> {
    format!("w{w}/m{i}").into_bytes()
}

/// The first key past writer `w`'s range.
fn end_key(w: usize) -> Vec<u8> {
    format!("w{w}0").into_bytes()
}

fn is_batch_writer(w: usize) -> bool {
    matches!(w % 4, 1 | 2)
}

fn is_async_writer(w: usize) -> bool {
    matches!(w % 4, 1 | 3)
}

/// The value of a counter key: the counter, then what each writer had acknowledged when it was
/// submitted, then padding.
fn cvalue(c: u64, deps: &[u64], pad: usize) -> Vec<u8> {
    let deps: Vec<String> = deps.iter().map(u64::to_string).collect();
    format!("{c}:{}|{}", deps.join(","), "p".repeat(pad)).into_bytes()
}

fn parse_cvalue(v: &[u8]) -> (u64, Vec<u64>) {
    let s = std::str::from_utf8(v).expect("utf8 value");
    let head = s.split('|').next().unwrap();
    let (c, deps) = head.split_once(':').expect("counter value");
    (
        c.parse().unwrap(),
        deps.split(',').map(|d| d.parse().unwrap()).collect(),
    )
}

fn parse_num(v: &[u8]) -> u64 {
    std::str::from_utf8(v)
        .ok()
        .and_then(|s| s.split('|').next())
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a counter: {}", v.escape_ascii()))
}

fn parse_ckey(w: usize, k: &[u8]) -> Option<u64> {
    let prefix = format!("w{w}/c");
    let s = std::str::from_utf8(k).ok()?;
    s.strip_prefix(&prefix)?.parse().ok()
}

// ---------------------------------------------------------------------------------------------
// Writers

struct Shared {
    acked: Vec<AtomicU64>,
    /// Per writer: writes through its last one acknowledged with `Sync`.
    acked_sync: Vec<AtomicU64>,
    stop: AtomicBool,
    /// Set before the file system is frozen for a crash: from then on writes may fail.
    frozen: AtomicBool,
}

impl Shared {
    fn new() -> Shared {
        Shared {
            acked: (0..WRITERS).map(|_| AtomicU64::new(0)).collect(),
            acked_sync: (0..WRITERS).map(|_| AtomicU64::new(0)).collect(),
            stop: AtomicBool::new(false),
            frozen: AtomicBool::new(false),
        }
    }

    fn acked_now(&self) -> Vec<u64> {
        self.acked
            .iter()
            .map(|a| a.load(Ordering::Acquire))
            .collect()
    }
}

/// Writes until stopped (or, once the file system is frozen, until a write fails); one write in
/// `sync_one_in` is `Sync`. Returns the number of acknowledged writes.
fn writer(db: &Db, shared: &Shared, w: usize, mode: WalMode, sync_one_in: u32) -> u64 {
    let mut rng = SmallRng::seed_from_u64(0x0dde_0000 + w as u64);
    let mut c = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let deps = shared.acked_now();
        debug_assert_eq!(deps[w], c);
        let value = cvalue(c, &deps, rng.gen_range(0..80));
        let sync = rng.gen_ratio(1, sync_one_in);
        let wo = if sync {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        let what = format!("{mode:?} writer {w} counter {c}");
        let result = if is_batch_writer(w) {
            let mut b = WriteBatch::new();
            b.put(ckey(w, c), &value);
            b.put(latest_key(w), c.to_string());
            for i in 0..MULTI {
                b.put(mkey(w, i), c.to_string());
            }
            if is_async_writer(w) {
                try_submit(|| db.submit_write(&wo, b.clone()))
                    .and_then(|h| collect(h, &mut rng, &what))
            } else {
                db.write(&wo, b)
            }
        } else if is_async_writer(w) {
            try_submit(|| db.submit_put(&wo, &ckey(w, c), &value))
                .and_then(|h| collect(h, &mut rng, &what))
        } else {
            db.put(&wo, &ckey(w, c), &value)
        };
        if let Err(e) = result {
            if shared.frozen.load(Ordering::Acquire) {
                break;
            }
            panic!("{what}: {e}");
        }
        c += 1;
        shared.acked[w].store(c, Ordering::Release);
        if sync {
            shared.acked_sync[w].store(c, Ordering::Release);
        }
    }
    c
}

// ---------------------------------------------------------------------------------------------
// Readers

/// What a consistent view shows of one writer.
#[derive(Debug, Default)]
struct WriterView {
    /// Counter keys found are `lo..n` (contiguous).
    n: u64,
    /// Dependencies recorded in the value of counter `n - 1`.
    deps: Vec<u64>,
    latest: Option<u64>,
    multi: Vec<u64>,
}

/// Builds a writer's view from its entries in key order, starting at counter key `lo`, checking
/// the prefix property.
fn writer_view(w: usize, lo: u64, entries: &[(Vec<u8>, Vec<u8>)], what: &str) -> WriterView {
    let mut view = WriterView {
        n: lo,
        ..Default::default()
    };
    for (k, v) in entries {
        if let Some(c) = parse_ckey(w, k) {
            assert!(
                c == view.n,
                "{what}: writer {w}: counter key {c} visible but {} is not (visibility is not a \
                 prefix)",
                view.n
            );
            let (vc, deps) = parse_cvalue(v);
            assert_eq!(vc, c, "{what}: value of counter key {c}");
            view.n = c + 1;
            view.deps = deps;
        } else if *k == latest_key(w) {
            view.latest = Some(parse_num(v));
        } else if k.starts_with(format!("w{w}/m").as_bytes()) {
            view.multi.push(parse_num(v));
        } else {
            panic!("{what}: unexpected key {}", k.escape_ascii());
        }
    }
    view
}

/// Checks one writer's view against what was acknowledged before the read began.
fn check_writer(w: usize, view: &WriterView, acked: u64, what: &str) {
    assert!(
        view.n >= acked,
        "{what}: writer {w} acknowledged {acked} writes, the view shows only {}",
        view.n
    );
    if is_batch_writer(w) && view.n > 0 {
        let newest = view.n - 1;
        assert_eq!(
            view.latest,
            Some(newest),
            "{what}: writer {w}: latest disagrees with the newest counter key (torn batch)"
        );
        assert_eq!(view.multi.len(), MULTI, "{what}: writer {w}: m keys");
        assert!(
            view.multi.iter().all(|&m| m == newest),
            "{what}: writer {w}: torn batch: m keys {:?}, counter {newest}",
            view.multi
        );
    }
}

/// Checks causality across writers in one consistent view.
fn check_causality(views: &[WriterView], what: &str) {
    for (w, view) in views.iter().enumerate() {
        if view.n == 0 || view.deps.is_empty() {
            continue;
        }
        for (v, &dep) in view.deps.iter().enumerate() {
            assert!(
                views[v].n >= dep,
                "{what}: writer {w}'s write {} is visible, but writer {v}'s write {} that was \
                 acknowledged before it was submitted is not (view shows {})",
                view.n - 1,
                dep.saturating_sub(1),
                views[v].n
            );
        }
    }
}

fn scan_range(
    db: &Db,
    ro: ReadOptions,
    w: usize,
    lo: u64,
    rng: &mut SmallRng,
    what: &str,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let opts = ro.bounds(Some(format!("w{w}/").as_bytes()), Some(&end_key(w)));
    let h = submit(what, || {
        db.submit_scan(opts.clone(), &ckey(w, lo), usize::MAX)
    });
    collect(h, rng, what).unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[derive(Default, Debug)]
struct ReaderCounts {
    gets: u64,
    iterators: u64,
    scans: u64,
    snapshots: u64,
}

fn reader(db: &Db, shared: &Shared, id: usize, mode: WalMode) -> ReaderCounts {
    let mut rng = SmallRng::seed_from_u64(0x4ead_0000 + id as u64);
    let mut counts = ReaderCounts::default();
    // The newest `latest` this reader has seen per writer: sequential reads never go back.
    let mut seen_latest = [0u64; WRITERS];
    while !shared.stop.load(Ordering::Relaxed) {
        let acked = shared.acked_now();
        let lo: Vec<u64> = acked.iter().map(|a| a.saturating_sub(BACK)).collect();
        match rng.gen_range(0..4) {
            0 => {
                // Point reads, sync or async, of the newest acknowledged write of each writer.
                counts.gets += 1;
                for w in 0..WRITERS {
                    let what = format!("{mode:?} reader {id} get");
                    let get = |key: &[u8], rng: &mut SmallRng| -> Option<Vec<u8>> {
                        if rng.gen_ratio(1, 2) {
                            db.get(&ReadOptions::default(), key).unwrap()
                        } else {
                            let h = submit(&what, || db.submit_get(&ReadOptions::default(), key));
                            collect(h, rng, &what).unwrap()
                        }
                    };
                    if acked[w] > 0 {
                        let c = acked[w] - 1;
                        let v = get(&ckey(w, c), &mut rng);
                        let v = v.unwrap_or_else(|| {
                            panic!("{what}: writer {w}'s acknowledged write {c} is not visible")
                        });
                        assert_eq!(parse_cvalue(&v).0, c);
                    }
                    if is_batch_writer(w) {
                        let latest = get(&latest_key(w), &mut rng).map_or(0, |v| parse_num(&v) + 1);
                        assert!(
                            latest >= acked[w] && latest >= seen_latest[w],
                            "{what}: writer {w}: latest shows {latest} writes, acknowledged {}, \
                             seen before {}",
                            acked[w],
                            seen_latest[w]
                        );
                        seen_latest[w] = latest;
                        // A later read of another key of a later-or-same batch.
                        let m = get(&mkey(w, MULTI - 1), &mut rng).map_or(0, |v| parse_num(&v) + 1);
                        assert!(
                            m >= latest,
                            "{what}: writer {w}: m7 {m} older than latest {latest}"
                        );
                    }
                }
            }
            1 => {
                // One iterator is one consistent view: seek to each writer's range.
                counts.iterators += 1;
                let what = format!("{mode:?} reader {id} iterator");
                let mut it = db.iter(ReadOptions::default()).unwrap();
                let mut views = Vec::new();
                for w in 0..WRITERS {
                    it.seek(&ckey(w, lo[w]));
                    let end = end_key(w);
                    let mut entries = Vec::new();
                    while it.valid() && it.key() < end.as_slice() {
                        entries.push((it.key().to_vec(), it.value().to_vec()));
                        it.next();
                    }
                    it.status().unwrap();
                    let view = writer_view(w, lo[w], &entries, &what);
                    check_writer(w, &view, acked[w], &what);
                    views.push(view);
                }
                check_causality(&views, &what);
            }
            2 => {
                // One submit_scan per writer, without a snapshot: each scan is consistent.
                counts.scans += 1;
                let what = format!("{mode:?} reader {id} scan");
                for w in 0..WRITERS {
                    let entries = scan_range(db, ReadOptions::default(), w, lo[w], &mut rng, &what);
                    let view = writer_view(w, lo[w], &entries, &what);
                    check_writer(w, &view, acked[w], &what);
                }
            }
            _ => {
                // A snapshot: scans and gets through it agree and form one consistent view.
                counts.snapshots += 1;
                let what = format!("{mode:?} reader {id} snapshot");
                let snap: Snapshot = db.snapshot();
                let mut views = Vec::new();
                for w in 0..WRITERS {
                    let entries = scan_range(db, ReadOptions::at(&snap), w, lo[w], &mut rng, &what);
                    let view = writer_view(w, lo[w], &entries, &what);
                    check_writer(w, &view, acked[w], &what);
                    views.push(view);
                }
                // Writes go on; the snapshot does not move.
                for (w, view) in views.iter().enumerate() {
                    let next = db.get(&ReadOptions::at(&snap), &ckey(w, view.n)).unwrap();
                    assert!(
                        next.is_none(),
                        "{what}: writer {w}: snapshot grew past {}",
                        view.n
                    );
                    if view.n > 0 {
                        let h = submit(&what, || {
                            db.submit_get(&ReadOptions::at(&snap), &ckey(w, view.n - 1))
                        });
                        assert!(collect(h, &mut rng, &what).unwrap().is_some());
                    }
                }
                check_causality(&views, &what);
            }
        }
    }
    counts
}

fn ordering_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let opts = options(dir.path(), mode);
    let db = Db::open(opts.clone()).unwrap();
    let shared = Shared::new();
    let run = Duration::from_millis(run_millis());
    let (written, counts) = thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, shared) = (&db, &shared);
                s.spawn(move || writer(db, shared, w, mode, 64))
            })
            .collect();
        let readers: Vec<_> = (0..READERS)
            .map(|r| {
                let (db, shared) = (&db, &shared);
                s.spawn(move || reader(db, shared, r, mode))
            })
            .collect();
        // Stop everyone as soon as one thread fails.
        let start = Instant::now();
        while start.elapsed() < run
            && !writers.iter().any(|t| t.is_finished())
            && !readers.iter().any(|t| t.is_finished())
        {
            thread::sleep(Duration::from_millis(10));
        }
        shared.stop.store(true, Ordering::Relaxed);
        let written: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        let counts: Vec<ReaderCounts> = readers.into_iter().map(|t| t.join().unwrap()).collect();
        (written, counts)
    });
    let stats = db.stats();
    println!(
        "{mode:?}: writes per writer {written:?}, reads {counts:?}, {} flushes, {} compactions",
        stats.flushes, stats.compactions
    );
    assert!(
        written.iter().all(|&n| n > 0),
        "{mode:?}: every writer made progress"
    );
    for c in &counts {
        assert!(c.gets + c.iterators + c.scans + c.snapshots > 0);
    }

    // Every acknowledged write is there, on the open database and after a clean reopen.
    let check = |db: &Db, when: &str| {
        let mut rng = SmallRng::seed_from_u64(1);
        for (w, &n) in written.iter().enumerate() {
            let entries = scan_range(db, ReadOptions::default(), w, 0, &mut rng, when);
            let view = writer_view(w, 0, &entries, when);
            assert_eq!(view.n, n, "{mode:?} {when}: writer {w}");
            check_writer(w, &view, n, when);
        }
    };
    check(&db, "after the run");
    drop(db);
    let db = Db::open(opts).unwrap();
    check(&db, "after reopen");
}

#[test]
fn acknowledged_writes_are_visible_in_order_and_batches_are_atomic() {
    each_mode("ordering", ordering_run);
}

// ---------------------------------------------------------------------------------------------
// Power loss and process kill while the writers run

/// Writers run on `FaultFs` (one write in eight `Sync`); the file system is frozen and crashed
/// under them. The recovered state must be a prefix of each writer's writes, hold whole batches
/// only, respect causality (a recovered write's acknowledged dependencies are recovered too), and
/// keep every write acknowledged as durable: through the last `Sync` one after a power loss,
/// everything acknowledged after a process kill.
fn crash_run(mode: WalMode, crash: Crash, seed: u64) {
    let what = format!("{mode:?} {crash:?}");
    let fs = FaultFs::new(seed);
    let opts = small(mode, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let shared = Shared::new();
    let run = Duration::from_millis(150 + seed % 7 * 30);
    let (must_keep, acked) = thread::scope(|s| {
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (db, shared) = (&db, &shared);
                s.spawn(move || writer(db, shared, w, mode, 8))
            })
            .collect();
        let start = Instant::now();
        while start.elapsed() < run && !writers.iter().any(|t| t.is_finished()) {
            thread::sleep(Duration::from_millis(5));
        }
        shared.frozen.store(true, Ordering::Release);
        fs.fail_after(0, FaultKind::Io, false);
        // Read after the freeze: everything acknowledged so far was handed over before it.
        let must_keep: Vec<u64> = match crash {
            Crash::Power(_) => shared
                .acked_sync
                .iter()
                .map(|a| a.load(Ordering::Acquire))
                .collect(),
            Crash::Process => shared.acked_now(),
        };
        crash.hit(&fs);
        shared.stop.store(true, Ordering::Relaxed);
        let acked: Vec<u64> = writers.into_iter().map(|t| t.join().unwrap()).collect();
        (must_keep, acked)
    });
    drop_within(db, &what);
    fs.clear_faults();

    let db = Db::open(opts).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
    let mut views = Vec::new();
    for (w, &keep) in must_keep.iter().enumerate() {
        let mut it = db
            .iter(
                ReadOptions::default().bounds(Some(format!("w{w}/").as_bytes()), Some(&end_key(w))),
            )
            .unwrap();
        it.seek_to_first();
        let entries: Vec<_> = it.entries().map(|e| e.unwrap()).collect();
        let view = writer_view(w, 0, &entries, &what);
        check_writer(w, &view, keep, &what);
        views.push(view);
    }
    check_causality(&views, &what);
    let recovered: Vec<u64> = views.iter().map(|v| v.n).collect();
    println!("{what}: acknowledged {acked:?}, must keep {must_keep:?}, recovered {recovered:?}");
}

#[test]
fn crash_recovers_a_causal_prefix_with_every_durable_write() {
    let crashes = [
        Crash::Power(CrashPolicy::DropUnsynced),
        Crash::Power(CrashPolicy::KeepRandomPages),
        Crash::Power(CrashPolicy::TearLastSector),
        Crash::Process,
    ];
    for mode in MODES {
        for (i, crash) in crashes.into_iter().enumerate() {
            for seed in [i as u64, 10 + i as u64] {
                within(
                    &format!("crash {mode:?} {crash:?}"),
                    TEST_LIMIT,
                    move || crash_run(mode, crash, seed),
                );
            }
        }
    }
}

/// The append and zoned WALs' writers write and sync their own records with no leader ordering
/// them, so a power loss can keep any subset of the unsynced ones: a sweep over seeds and crash
/// kinds, with `KeepRandomWrites` (each unsynced write or zone append survives whole or not,
/// leaving holes below the write pointer) among them.
#[test]
fn append_wal_crash_sweep_recovers_a_prefix_with_every_durable_write() {
    let crashes = [
        Crash::Power(CrashPolicy::KeepRandomWrites),
        Crash::Power(CrashPolicy::KeepRandomPages),
        Crash::Power(CrashPolicy::DropUnsynced),
        Crash::Process,
    ];
    for mode in [WalMode::Append, WalMode::Zoned] {
        for seed in 0..12u64 {
            for crash in crashes {
                within(
                    &format!("{mode:?} sweep {crash:?} seed {seed}"),
                    TEST_LIMIT,
                    move || crash_run(mode, crash, 100 + seed),
                );
            }
        }
    }
}

/// `FaultFs`'s `TearLastSector` tears an overwrite inside a preallocated, synced file (the
/// parallel-WAL area) in place: a power loss never shortens a file below its durable size.
#[test]
fn tear_last_sector_keeps_a_preallocated_file_whole() {
    use tierkv::env::Fs;
    for seed in 0..16 {
        let fs = FaultFs::new(seed);
        tierkv::env::create_dir_all_durable(&*fs, Path::new("/d")).unwrap();
        let area = fs.open_positional(Path::new("/d/area"), 64 << 10).unwrap();
        fs.sync_dir(Path::new("/d")).unwrap();
        area.write_at(8192, &[7u8; 4096], false).unwrap();
        fs.crash(CrashPolicy::TearLastSector);
        let len = fs.file_contents(Path::new("/d/area")).map(|d| d.len());
        assert_eq!(
            len,
            Some(64 << 10),
            "seed {seed}: a power loss shortened a preallocated, synced file"
        );
    }
}
