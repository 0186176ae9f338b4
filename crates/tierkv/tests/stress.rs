//! Concurrency stress: writers, point readers, snapshot readers and scanners run against one
//! database while another thread flushes and compacts without pause, and tiny memtables keep
//! background flushes and compactions going the whole time.
//!
//! Each writer owns a disjoint set of keys and stamps every write with a version from its own
//! increasing counter, so a reader can tell old from new without knowing the interleaving:
//! - a write acknowledged before a read starts is visible to it (the version read is at least
//!   the acknowledged one), and a reader never sees a key's version go backwards;
//! - "pair" keys `a` and `b` are only ever written together, in one batch, with the same
//!   version: any consistent view (snapshot, iterator) shows equal versions for both;
//! - a snapshot returns exactly the same answers each time it is read;
//! - a scan is strictly sorted with no duplicates, and every value names its own key.
//!
//! At the end every writer knows the exact final value of each of its keys; they are checked
//! on the open database and again after close and reopen.
//!
//! `TIERKV_STRESS_MILLIS` sets how long the load runs (default 4000).

mod common;

use common::{collect_entries, env_u64, tiny, TierSetup};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tierkv::{Db, Durability, Options, ReadOptions, WriteBatch, WriteOptions};

const WRITERS: usize = 3;
/// Keys written alone or in multi-key batches.
const SINGLES: usize = 40;
/// Pairs of keys always written together.
const PAIRS: usize = 10;
/// Keys also deleted; only their final state and well-formedness are checked.
const SCRATCH: usize = 10;
const SEED: u64 = 0x57e5_5000_0000_0001;

// ---------------------------------------------------------------------------------------------
// Keys, values and versions

/// A key of the versioned (never deleted) kind: its slot in the shared version table.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Single(usize, usize),
    Pair(usize, usize, char),
}

impl Slot {
    fn key(self) -> Vec<u8> {
        match self {
            Slot::Single(w, j) => format!("w{w}/single/{j:03}").into_bytes(),
            Slot::Pair(w, p, side) => format!("w{w}/pair/{p:03}/{side}").into_bytes(),
        }
    }

    /// Index into the version tables.
    fn index(self) -> usize {
        let per_writer = SINGLES + 2 * PAIRS;
        match self {
            Slot::Single(w, j) => w * per_writer + j,
            Slot::Pair(w, p, side) => w * per_writer + SINGLES + 2 * p + usize::from(side == 'b'),
        }
    }

    fn all() -> Vec<Slot> {
        let mut slots = Vec::new();
        for w in 0..WRITERS {
            slots.extend((0..SINGLES).map(|j| Slot::Single(w, j)));
            for p in 0..PAIRS {
                slots.push(Slot::Pair(w, p, 'a'));
                slots.push(Slot::Pair(w, p, 'b'));
            }
        }
        slots
    }

    fn writer(self) -> usize {
        match self {
            Slot::Single(w, _) | Slot::Pair(w, _, _) => w,
        }
    }
}

fn scratch_key(w: usize, j: usize) -> Vec<u8> {
    format!("w{w}/scratch/{j:03}").into_bytes()
}

/// `key|vNNNNNNNNNN|` and some padding: the value names its key and its version.
fn make_value(key: &[u8], version: u64, rng: &mut SmallRng) -> Vec<u8> {
    let mut v = key.to_vec();
    v.extend_from_slice(format!("|v{version:010}|").as_bytes());
    let pad = rng.gen_range(0..400);
    v.extend(std::iter::repeat_n(b'.', pad));
    v
}

/// The version in `value`, checking that the value names `key`; 0 for an absent key.
fn version_of(key: &[u8], value: Option<&[u8]>) -> u64 {
    let Some(value) = value else { return 0 };
    let parsed = value
        .strip_prefix(key)
        .and_then(|rest| rest.strip_prefix(b"|v"))
        .and_then(|rest| rest.get(..10))
        .and_then(|digits| std::str::from_utf8(digits).ok()?.parse().ok());
    parsed.unwrap_or_else(|| {
        panic!(
            "key {}: malformed value or a value of another key: {:?}",
            String::from_utf8_lossy(key),
            String::from_utf8_lossy(&value[..value.len().min(48)])
        )
    })
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Shared state

/// What the threads share besides the database.
struct Shared {
    stop: AtomicBool,
    /// Per slot: the highest version whose write call has returned.
    acked: Vec<AtomicU64>,
    /// Per writer: the highest version handed to the database (acknowledged or not).
    issued: Vec<AtomicU64>,
}

impl Shared {
    fn acked(&self, slot: Slot) -> u64 {
        self.acked[slot.index()].load(Ordering::SeqCst)
    }

    fn issued(&self, slot: Slot) -> u64 {
        self.issued[slot.writer()].load(Ordering::SeqCst)
    }

    /// `acked` of every slot, read before a view is opened: lower bounds for that view.
    fn acked_all(&self) -> Vec<u64> {
        self.acked
            .iter()
            .map(|a| a.load(Ordering::SeqCst))
            .collect()
    }

    fn running(&self) -> bool {
        !self.stop.load(Ordering::SeqCst)
    }
}

/// Stops every thread when the one holding it panics, so a failure ends the test quickly.
struct StopOnPanic<'a>(&'a Shared);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.stop.store(true, Ordering::SeqCst);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Writers

/// One writer's loop; returns the exact final value of each key it owns.
fn writer(db: &Db, shared: &Shared, w: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ (w as u64 + 1));
    let mut version = 0u64;
    let mut finals = BTreeMap::new();
    let mut writes = 0u64;
    while shared.running() {
        version += 1;
        shared.issued[w].store(version, Ordering::SeqCst);
        let slots: Vec<Slot> = match rng.gen_range(0..100) {
            0..=49 => vec![Slot::Single(w, rng.gen_range(0..SINGLES))],
            50..=74 => {
                // A pair, often with single keys between its halves: one batch across keys,
                // and a longer gap between the inserts of `a` and `b` for a torn read to hit.
                let p = rng.gen_range(0..PAIRS);
                let mut s = vec![Slot::Pair(w, p, 'a')];
                let fillers: Vec<usize> = (0..rng.gen_range(0..=8))
                    .map(|_| rng.gen_range(0..SINGLES))
                    .collect();
                let mut seen = std::collections::HashSet::new();
                s.extend(
                    fillers
                        .into_iter()
                        .filter(|j| seen.insert(*j))
                        .map(|j| Slot::Single(w, j)),
                );
                s.push(Slot::Pair(w, p, 'b'));
                s
            }
            75..=89 => {
                let mut ids: Vec<usize> = (0..rng.gen_range(2..=5))
                    .map(|_| rng.gen_range(0..SINGLES))
                    .collect();
                ids.sort_unstable();
                ids.dedup();
                ids.into_iter().map(|j| Slot::Single(w, j)).collect()
            }
            _ => {
                write_scratch(db, w, &mut rng, &mut finals);
                continue;
            }
        };
        let mut batch = WriteBatch::new();
        for &slot in &slots {
            let (k, v) = (slot.key(), make_value(&slot.key(), version, &mut rng));
            batch.put(&k, &v);
            finals.insert(k, v);
        }
        db.write(&write_options(&mut rng), batch)
            .unwrap_or_else(|e| panic!("writer {w}: write of version {version}: {e}"));
        for &slot in &slots {
            shared.acked[slot.index()].store(version, Ordering::SeqCst);
        }
        writes += 1;
        if rng.gen_bool(0.1) {
            // Nobody else writes this key: the writer must read back exactly what it wrote.
            let k = slots[0].key();
            let got = db.get(&ReadOptions::default(), &k).expect("get");
            assert!(
                got.as_ref() == finals.get(&k),
                "writer {w}: read-your-write of {} (version {version}) returned version {}",
                show(&k),
                version_of(&k, got.as_deref())
            );
        }
    }
    println!("writer {w}: {writes} versioned writes, last version {version}");
    finals
}

fn write_scratch(db: &Db, w: usize, rng: &mut SmallRng, finals: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    let k = scratch_key(w, rng.gen_range(0..SCRATCH));
    let opts = write_options(rng);
    if rng.gen_bool(0.5) {
        db.delete(&opts, &k).expect("scratch delete");
        finals.remove(&k);
    } else {
        let v = make_value(&k, 0, rng);
        db.put(&opts, &k, &v).expect("scratch put");
        finals.insert(k, v);
    }
}

fn write_options(rng: &mut SmallRng) -> WriteOptions {
    let durability = match rng.gen_range(0..50) {
        0 => Durability::Sync,
        1..=15 => Durability::Buffered,
        _ => Durability::Flush,
    };
    WriteOptions { durability }
}

// ---------------------------------------------------------------------------------------------
// Readers

/// Point gets of the latest state: at least the version acknowledged before the read, never
/// older than what this reader saw before, never newer than what was issued.
fn point_reader(db: &Db, shared: &Shared, id: u64) -> u64 {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ (100 + id));
    let slots = Slot::all();
    let mut seen = vec![0u64; slots.len()];
    let mut reads = 0;
    while shared.running() {
        let slot = slots[rng.gen_range(0..slots.len())];
        let k = slot.key();
        let floor = shared.acked(slot);
        let got = db.get(&ReadOptions::default(), &k).expect("get");
        let v = version_of(&k, got.as_deref());
        let ceiling = shared.issued(slot);
        let prev = seen[slot.index()];
        assert!(
            v >= floor && v >= prev && v <= ceiling,
            "reader {id}: get {} returned version {v}; acknowledged before the read: {floor}, \
             seen by this reader before: {prev}, highest issued: {ceiling}",
            show(&k)
        );
        seen[slot.index()] = v;
        reads += 1;
        if rng.gen_bool(0.05) {
            check_pairs_at_snapshot(db, &mut rng, &format!("reader {id}"));
        }
    }
    reads
}

/// Reads both keys of random pairs at fresh snapshots as fast as it can: a snapshot taken while
/// a batch is being applied must not show half of it.
fn pair_checker(db: &Db, shared: &Shared, id: u64) -> u64 {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ (500 + id));
    let mut checks = 0;
    while shared.running() {
        check_pairs_at_snapshot(db, &mut rng, &format!("pair checker {id}"));
        checks += 1;
    }
    checks
}

/// Both keys of a pair read at one snapshot have the same version.
fn check_pairs_at_snapshot(db: &Db, rng: &mut SmallRng, who: &str) {
    let snap = db.snapshot();
    let (w, p) = (rng.gen_range(0..WRITERS), rng.gen_range(0..PAIRS));
    let [a, b] = ['a', 'b'].map(|side| {
        let k = Slot::Pair(w, p, side).key();
        let v = db
            .get(&ReadOptions::at(&snap), &k)
            .expect("get at snapshot");
        version_of(&k, v.as_deref())
    });
    assert_eq!(
        a,
        b,
        "{who}: pair w{w}/pair/{p:03} at snapshot #{}: a has version {a}, b has {b}",
        snap.sequence()
    );
}

/// A consistent view's contents, checked for order, duplicates, value ownership and pairs.
type View = Vec<(Vec<u8>, Vec<u8>)>;

fn check_view(view: &View, what: &str) {
    for pair in view.windows(2) {
        assert!(
            pair[0].0 < pair[1].0,
            "{what}: keys out of order or duplicated: {} then {}",
            show(&pair[0].0),
            show(&pair[1].0)
        );
    }
    let versions: BTreeMap<&[u8], u64> = view
        .iter()
        .map(|(k, v)| (k.as_slice(), version_of(k, Some(v))))
        .collect();
    for w in 0..WRITERS {
        for p in 0..PAIRS {
            let [a, b] = ['a', 'b'].map(|side| {
                let k = Slot::Pair(w, p, side).key();
                versions.get(k.as_slice()).copied().unwrap_or(0)
            });
            assert_eq!(
                a, b,
                "{what}: pair w{w}/pair/{p:03} shows version {a} for a and {b} for b"
            );
        }
    }
}

/// Checks a view against lower bounds taken before it was opened and a per-thread history.
fn check_floors(view: &View, floors: &[u64], seen: &mut [u64], what: &str) {
    let versions: BTreeMap<&[u8], u64> = view
        .iter()
        .map(|(k, v)| (k.as_slice(), version_of(k, Some(v))))
        .collect();
    for slot in Slot::all() {
        let k = slot.key();
        let v = versions.get(k.as_slice()).copied().unwrap_or(0);
        let (floor, prev) = (floors[slot.index()], seen[slot.index()]);
        assert!(
            v >= floor && v >= prev,
            "{what}: {} has version {v}; acknowledged before the view was opened: {floor}, \
             seen by this thread in an earlier view: {prev}",
            show(&k)
        );
        seen[slot.index()] = v;
    }
}

fn scan(db: &Db, opts: ReadOptions, reverse: bool) -> View {
    let mut it = db.iter(opts).expect("iter");
    collect_entries(&mut it, reverse, "scan")
}

/// Scans of the latest state (each iterator is its own consistent view), in both directions,
/// whole or bounded to one writer's keys.
fn scanner(db: &Db, shared: &Shared, id: u64) -> u64 {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ (200 + id));
    let mut seen = vec![0u64; shared.acked.len()];
    let mut scans = 0;
    while shared.running() {
        let floors = shared.acked_all();
        let reverse = rng.gen_bool(0.5);
        if rng.gen_bool(0.3) {
            let w = rng.gen_range(0..WRITERS);
            let (lo, hi) = (format!("w{w}/"), format!("w{w}0"));
            let opts = ReadOptions::default().bounds(Some(lo.as_bytes()), Some(hi.as_bytes()));
            let view = scan(db, opts, reverse);
            let what = format!("scanner {id}: scan of {lo}* (reverse: {reverse})");
            assert!(
                view.iter().all(|(k, _)| k.starts_with(lo.as_bytes())),
                "{what}: a key outside the bounds"
            );
            check_view(&view, &what);
        } else {
            let view = scan(db, ReadOptions::default(), reverse);
            let what = format!("scanner {id}: full scan #{scans} (reverse: {reverse})");
            check_view(&view, &what);
            check_floors(&view, &floors, &mut seen, &what);
        }
        scans += 1;
    }
    scans
}

/// Takes a snapshot, records everything it shows, then reads it again several times while the
/// load goes on: every read must match the first exactly.
fn snapshot_reader(db: &Db, shared: &Shared, id: u64) -> u64 {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ (300 + id));
    let mut seen = vec![0u64; shared.acked.len()];
    let mut rounds = 0;
    while shared.running() {
        let floors = shared.acked_all();
        let snap = db.snapshot();
        let what = format!("snapshot reader {id}: snapshot #{}", snap.sequence());
        let first = scan(db, ReadOptions::at(&snap), false);
        check_view(&first, &what);
        check_floors(&first, &floors, &mut seen, &what);
        for again in 0..5 {
            std::thread::sleep(Duration::from_millis(rng.gen_range(5..40)));
            let reverse = again % 2 == 1;
            let view = scan(db, ReadOptions::at(&snap), reverse);
            assert!(
                view == first,
                "{what}: scan #{again} (reverse: {reverse}) differs from the first: {}",
                first_difference(&first, &view)
            );
            for _ in 0..if first.is_empty() { 0 } else { 10 } {
                let (k, v) = &first[rng.gen_range(0..first.len())];
                let got = db.get(&ReadOptions::at(&snap), k).expect("get at snapshot");
                assert!(
                    got.as_ref() == Some(v),
                    "{what}: get {} returned version {}, the first scan showed {}",
                    show(k),
                    version_of(k, got.as_deref()),
                    version_of(k, Some(v))
                );
            }
        }
        rounds += 1;
    }
    rounds
}

fn first_difference(want: &View, got: &View) -> String {
    let i = want
        .iter()
        .zip(got)
        .position(|(a, b)| a != b)
        .unwrap_or(want.len().min(got.len()));
    let describe = |e: Option<&(Vec<u8>, Vec<u8>)>| {
        e.map_or("<end>".to_string(), |(k, v)| {
            format!("{} v{}", show(k), version_of(k, Some(v)))
        })
    };
    format!(
        "{} vs {} entries; at {i}: first had {}, now {}",
        want.len(),
        got.len(),
        describe(want.get(i)),
        describe(got.get(i))
    )
}

/// Flushes and compacts (random ranges or everything) without pause.
fn maintenance(db: &Db, shared: &Shared) -> u64 {
    let _guard = StopOnPanic(shared);
    let mut rng = SmallRng::seed_from_u64(SEED ^ 400);
    let mut rounds = 0;
    while shared.running() {
        db.flush().expect("flush");
        let w = rng.gen_range(0..WRITERS);
        let (lo, hi) = (format!("w{w}/pair"), format!("w{w}/single/02"));
        match rng.gen_range(0..3) {
            0 => db.compact_range(None, None),
            1 => db.compact_range(Some(lo.as_bytes()), Some(hi.as_bytes())),
            _ => db.compact_range(Some(lo.as_bytes()), None),
        }
        .expect("compact_range");
        if rounds % 10 == 0 {
            db.verify_checksums().expect("verify_checksums");
        }
        std::thread::sleep(Duration::from_millis(rng.gen_range(0..20)));
        rounds += 1;
    }
    rounds
}

// ---------------------------------------------------------------------------------------------
// The test

fn options(dir: &std::path::Path) -> Options {
    tiny()
        .tiers_in(dir)
        .max_immutable_memtables(1)
        .level_size_multiplier(4)
        .block_size(1024)
        .block_cache_bytes(128 << 10)
        .background_threads(2)
        .build()
        .expect("valid options")
}

/// A worker's result; if it panicked, its own message is already printed above this one.
fn joined<T>(handle: std::thread::ScopedJoinHandle<'_, T>) -> T {
    handle
        .join()
        .unwrap_or_else(|_| panic!("a worker thread failed: see its message above"))
}

fn run_millis() -> u64 {
    env_u64("TIERKV_STRESS_MILLIS", 4000)
}

/// The database holds exactly the writers' final values, by get and by scan.
fn check_final(db: &Db, want: &BTreeMap<Vec<u8>, Vec<u8>>, when: &str) {
    for (k, v) in want {
        let got = db.get(&ReadOptions::default(), k).expect("get");
        assert!(
            got.as_ref() == Some(v),
            "{when}: {} holds version {}, the last acknowledged write was version {}",
            show(k),
            version_of(k, got.as_deref()),
            version_of(k, Some(v))
        );
    }
    let view = scan(db, ReadOptions::default(), false);
    let want_view: View = want.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert!(
        view == want_view,
        "{when}: full scan differs from the final state: {}",
        first_difference(&want_view, &view)
    );
}

#[test]
fn concurrent_writers_readers_snapshots_scans_and_compactions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = Db::open(options(dir.path())).expect("open");
    let slots = WRITERS * (SINGLES + 2 * PAIRS);
    let shared = Shared {
        stop: AtomicBool::new(false),
        acked: (0..slots).map(|_| AtomicU64::new(0)).collect(),
        issued: (0..WRITERS).map(|_| AtomicU64::new(0)).collect(),
    };
    let started = Instant::now();
    let finals = std::thread::scope(|s| {
        let (db, shared) = (&db, &shared);
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| s.spawn(move || writer(db, shared, w)))
            .collect();
        let readers: Vec<_> = (0..2)
            .map(|i| s.spawn(move || point_reader(db, shared, i)))
            .collect();
        let pairs = s.spawn(move || pair_checker(db, shared, 0));
        let scanner = s.spawn(move || scanner(db, shared, 0));
        let snapshots = s.spawn(move || snapshot_reader(db, shared, 0));
        let maintenance = s.spawn(move || maintenance(db, shared));
        let deadline = started + Duration::from_millis(run_millis());
        while shared.running() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        shared.stop.store(true, Ordering::SeqCst);
        let reads: u64 = readers.into_iter().map(joined).sum();
        println!(
            "{reads} point reads, {} pair checks, {} scans, {} snapshot rounds, \
             {} maintenance rounds",
            joined(pairs),
            joined(scanner),
            joined(snapshots),
            joined(maintenance)
        );
        let mut finals = BTreeMap::new();
        for w in writers {
            finals.extend(joined(w));
        }
        finals
    });
    let stats = db.stats();
    println!("after {:.1?}:\n{stats}", started.elapsed());
    assert!(
        stats.flushes > 0 && stats.compactions > 0,
        "no background work happened: {} flushes, {} compactions",
        stats.flushes,
        stats.compactions
    );
    check_final(&db, &finals, "before close");
    drop(db);
    let db = Db::open(options(dir.path())).expect("reopen");
    check_final(&db, &finals, "after reopen");
}
