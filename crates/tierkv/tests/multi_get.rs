//! `Db::multi_get` and `Db::submit_multi_get`, and iterators over direct-read tiers.
//!
//! Written ahead of the batched multi-get (per level: gather the data blocks the keys need,
//! de-duplicate them, read the missing ones in one io_uring batch, `O_DIRECT` on tiers with
//! `direct_reads`) and the asynchronous read-ahead of iterators on direct-read tiers. Every
//! test describes correct behaviour, so it passes with multi-get as a loop over `get` too.
//!
//! - Model equivalence (`layers_*`): a two-tier database (the fast tier holds L0 and L1) built in
//!   phases so a lookup can end in the active memtable, an immutable one, one of several
//!   overlapping L0 tables, L1 or a deeper level on the capacity tier, or nowhere. `multi_get`
//!   is compared with a `BTreeMap` model and with per-key `get` (and `submit_multi_get`) for
//!   batches of 0, 1, 2, 7, 64 and 1000 keys, unsorted, with duplicates, with runs of neighbours
//!   (same data block), the first and last key of every live table (the block at offset 0 of
//!   many files at once, and the last block before each footer), absent keys, and keys whose
//!   newest version is a tombstone over an older value in a deeper level.
//! - Snapshots (`snapshot_*`): a multi-get at an old snapshot returns the old values after
//!   overwrites, deletes, flushes and a full compaction.
//! - Direct reads (`direct_*`): the same equivalence with `direct_reads` on both tiers, in a
//!   directory on a real disk file system (under `CARGO_TARGET_TMPDIR`, never tmpfs), values of
//!   10 B to 20 KiB so data blocks start and end anywhere relative to 4 KiB pages, with the block
//!   cache filled, with `fill_cache = false`, and without a block cache.
//! - Corruption (`corrupt_*`): one byte flipped inside a data block in the middle of a table,
//!   on direct-read real files and on `FaultFs`: every multi-get that needs that block fails with
//!   `Corruption` naming the table and the block's offset (also when the batch holds other
//!   keys, duplicates of it, and on a retry), never with data; multi-gets of other blocks of the
//!   same table and of other tables still answer correctly.
//! - `FaultFs` (`faultfs_*`): the equivalence on the in-memory file system (no descriptor, so
//!   the sequential read path), including immutable memtables held for certain by a flush that
//!   fails for lack of space. `FaultFs` injects faults only into mutating operations, so read
//!   errors are made two other ways: a table truncated under the engine's open handle (reads of
//!   its later blocks fail with `UnexpectedEof`) and a simulated process crash (every open handle
//!   dies). A multi-get needing a failed read returns an error, never `None`.
//! - Concurrency (`submit_*`): four threads keep many `submit_multi_get`s in flight while a
//!   writer overwrites and deletes keys with flushes and compactions running; every value
//!   returned is one written for that key and no older than what was acknowledged before the
//!   submit. Dropping the database with multi-gets in flight resolves every handle (`Ok` with
//!   the right values, or `Closed`). A multi-get reads one view: a batch written together is
//!   seen whole (ignored for now: the loop over `get` takes a view per key).
//! - Scans with read-ahead (`scan_readahead_*`): on direct-read tiers over many tables, full
//!   scans both ways, seeks into the middle, bounded iterators, `submit_scan`, hundreds of
//!   iterators dropped mid-scan (also while a compaction deletes the files under them, and after
//!   the database itself was dropped), all equal to the model.
//!
//! `TIERKV_MG_MILLIS` sets how long the concurrent load runs (default 1500 ms).

mod common;

use common::{
    assert_same_entries, env_u64, show_bytes, sized, try_submit, wait_bounded, within, Entry,
    Model, CAPACITY, FAST,
};
use rand::rngs::SmallRng;
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tierkv::env::{FaultFs, Fs, PosixFs};
use tierkv::inspect::Table;
use tierkv::{
    Compression, Db, Error, Handle, LiveFile, Options, OptionsBuilder, ReadOptions, Result,
    TierConfig, WriteBatch, WriteOptions,
};

type Values = Vec<Option<Vec<u8>>>;

/// How long a whole test body may run before the watchdog calls it a hang.
const TEST_LIMIT: Duration = Duration::from_secs(90);
/// The batch sizes every equivalence check uses.
const BATCH_SIZES: [usize; 6] = [0, 1, 2, 7, 64, 1000];

// ---------------------------------------------------------------------------------------------
// Keys and values

fn key(id: u32) -> Vec<u8> {
    format!("key{id:05}").into_bytes()
}

/// A key never written: between `key(id)` and `key(id + 1)`.
fn absent_key(id: u32) -> Vec<u8> {
    format!("key{id:05}~").into_bytes()
}

/// Keys never written outside the written range (and the empty key).
fn edge_absent_keys() -> Vec<Vec<u8>> {
    vec![
        Vec::new(),
        vec![0],
        b"key".to_vec(),
        b"kez".to_vec(),
        vec![0xff; 4],
    ]
}

fn splitmix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// Version `ver` of key `id`: `"{id}:{ver}:"` then incompressible printable filler, 10 B to
/// 20 KiB (mostly small, some larger than a block), the same bytes every time.
fn value(id: u32, ver: u64) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(splitmix((u64::from(id) << 32) ^ ver));
    let len = match rng.gen_range(0..100) {
        0..=59 => rng.gen_range(10..200),
        60..=89 => rng.gen_range(200..3000),
        90..=96 => rng.gen_range(3000..8000),
        _ => rng.gen_range(8000..=20 << 10),
    };
    let mut v = format!("{id}:{ver}:").into_bytes();
    while v.len() < len {
        v.push(rng.gen_range(b'!'..=b'~'));
    }
    v
}

/// `(id, ver)` from a value's header.
fn parse_value(v: &[u8]) -> Option<(u32, u64)> {
    let text = std::str::from_utf8(v.get(..v.len().min(32))?).ok()?;
    let mut parts = text.splitn(3, ':');
    let id = parts.next()?.parse().ok()?;
    let ver = parts.next()?.parse().ok()?;
    parts.next()?;
    Some((id, ver))
}

fn show_value(v: Option<&Vec<u8>>) -> String {
    v.map_or_else(|| "None".into(), |v| show_bytes(v))
}

// ---------------------------------------------------------------------------------------------
// Storage: real directories on a disk file system, or FaultFs

/// A directory for databases on the file system of the build directory (a real disk, where
/// `O_DIRECT` works), never `/tmp` (tmpfs on many machines).
fn disk_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir under the target dir")
}

/// True if `dir`'s file system accepts `O_DIRECT` (so direct-read tiers really bypass the
/// page cache there).
fn supports_o_direct(dir: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt;
    let probe = dir.join("odirect-probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let ok = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECT)
        .open(&probe)
        .is_ok();
    std::fs::remove_file(&probe).unwrap();
    ok
}

enum Storage {
    Disk(tempfile::TempDir),
    Memory(Arc<FaultFs>),
}

impl Storage {
    fn disk() -> Storage {
        let dir = disk_dir();
        if !supports_o_direct(dir.path()) {
            println!(
                "warning: {} refuses O_DIRECT; direct-read tiers fall back to buffered reads",
                dir.path().display()
            );
        }
        Storage::Disk(dir)
    }

    fn memory(seed: u64) -> Storage {
        Storage::Memory(FaultFs::new(seed))
    }

    fn dirs(&self) -> (PathBuf, PathBuf) {
        match self {
            Storage::Disk(d) => (d.path().join("fast"), d.path().join("capacity")),
            Storage::Memory(_) => (FAST.into(), CAPACITY.into()),
        }
    }

    fn fs(&self) -> Arc<dyn Fs> {
        match self {
            Storage::Disk(_) => Arc::new(PosixFs::new()),
            Storage::Memory(fs) => fs.clone(),
        }
    }

    fn fault_fs(&self) -> &Arc<FaultFs> {
        match self {
            Storage::Memory(fs) => fs,
            Storage::Disk(_) => panic!("not a FaultFs storage"),
        }
    }

    /// Flips bit 3 of the byte at `offset` of `path`.
    fn flip(&self, path: &Path, offset: u64) {
        match self {
            Storage::Disk(_) => {
                let mut bytes = std::fs::read(path).unwrap();
                bytes[offset as usize] ^= 1 << 3;
                std::fs::write(path, bytes).unwrap();
            }
            Storage::Memory(fs) => fs.flip_bit(path, offset, 3),
        }
    }

    /// The data blocks of table `path` as (separator user key, offset, stored size).
    fn data_blocks(&self, path: &Path) -> Vec<(Vec<u8>, u64, u64)> {
        self.try_data_blocks(path).unwrap()
    }

    /// [`Storage::data_blocks`], or the error opening it (a compaction may have deleted it).
    fn try_data_blocks(&self, path: &Path) -> Result<Vec<(Vec<u8>, u64, u64)>> {
        let file = self.fs().open_read(path)?;
        let table = Table::open(file, path)?;
        Ok(table
            .index_entries()
            .into_iter()
            .map(|(sep, off, size)| (tierkv::inspect::user_key(&sep).to_vec(), off, size))
            .collect())
    }
}

/// Small memtables, tables and levels, so a few MiB of data spread over five levels; both
/// tiers read directly or neither.
fn builder(storage: &Storage, direct: bool, l0_trigger: usize) -> OptionsBuilder {
    tiered(storage, [direct, direct], l0_trigger)
}

/// [`builder`] with `direct_reads` chosen per tier (fast, capacity).
fn tiered(storage: &Storage, direct: [bool; 2], l0_trigger: usize) -> OptionsBuilder {
    let (fast, capacity) = storage.dirs();
    sized(64 << 10, 32 << 10, 128 << 10)
        .tier(TierConfig::new("fast", fast).with_direct_reads(direct[0]))
        .tier(TierConfig::new("capacity", capacity).with_direct_reads(direct[1]))
        .levels_on_fast(2)
        .max_immutable_memtables(4)
        .level_size_multiplier(2)
        .l0_compaction_trigger(l0_trigger)
        .l0_slowdown_trigger(20)
        .l0_stop_trigger(36)
        .block_size(4096)
        .block_cache_bytes(1 << 20)
        .fs(storage.fs())
}

// ---------------------------------------------------------------------------------------------
// Watchdog and handles

// ---------------------------------------------------------------------------------------------
// Checks

/// `got` must equal `want` key by key.
#[track_caller]
fn assert_values(what: &str, keys: &[Vec<u8>], got: &Values, want: &Values) {
    assert_eq!(
        got.len(),
        keys.len(),
        "{what}: {} results for {} keys",
        got.len(),
        keys.len()
    );
    if let Some(i) = (0..keys.len()).find(|&i| got[i] != want[i]) {
        let wrong = (0..keys.len()).filter(|&i| got[i] != want[i]).count();
        panic!(
            "{what}: {wrong} of {} results wrong; first at position {i}, key {}: got {}, \
             expected {}",
            keys.len(),
            show_bytes(&keys[i]),
            show_value(got[i].as_ref()),
            show_value(want[i].as_ref()),
        );
    }
}

fn expected(model: &Model, keys: &[Vec<u8>]) -> Values {
    keys.iter().map(|k| model.get(k).cloned()).collect()
}

/// `multi_get`, `submit_multi_get` and per-key `get` of `keys` must all equal the model.
#[track_caller]
fn check_batch(db: &Db, ro: &ReadOptions, model: &Model, keys: &[Vec<u8>], what: &str) {
    let want = expected(model, keys);
    let got = db
        .multi_get(ro, keys)
        .unwrap_or_else(|e| panic!("{what}: multi_get of {} keys: {e}", keys.len()));
    assert_values(&format!("{what}: multi_get"), keys, &got, &want);
    let per_key: Values = keys
        .iter()
        .map(|k| db.get(ro, k).unwrap_or_else(|e| panic!("{what}: get: {e}")))
        .collect();
    assert_values(&format!("{what}: per-key get"), keys, &per_key, &want);
    let h = try_submit(|| db.submit_multi_get(ro, keys.to_vec()))
        .unwrap_or_else(|e| panic!("{what}: submit_multi_get: {e}"));
    let got = wait_bounded(h, what).unwrap_or_else(|e| panic!("{what}: submit_multi_get: {e}"));
    assert_values(&format!("{what}: submit_multi_get"), keys, &got, &want);
}

/// Where lookups can end, for drawing keys.
struct KeyPool {
    /// Keys with a value.
    present: Vec<Vec<u8>>,
    /// Keys whose newest version is a tombstone over a value in a deeper level.
    shadowed: Vec<Vec<u8>>,
    /// Keys never written.
    absent: Vec<Vec<u8>>,
    /// First and last keys of live tables.
    boundaries: Vec<Vec<u8>>,
    /// The largest key id written.
    max_id: u32,
}

impl KeyPool {
    fn new(db: &Db, model: &Model, shadowed: &[Vec<u8>], max_id: u32) -> KeyPool {
        let mut absent: Vec<Vec<u8>> = (0..=max_id).step_by(7).map(absent_key).collect();
        absent.extend(edge_absent_keys());
        absent.push(key(max_id + 1));
        absent.push(key(max_id + 1000));
        let mut boundaries = Vec::new();
        for f in db.live_files() {
            boundaries.push(f.smallest);
            boundaries.push(f.largest);
        }
        KeyPool {
            present: model.keys().cloned().collect(),
            shadowed: shadowed.to_vec(),
            absent,
            boundaries,
            max_id,
        }
    }

    /// `n` keys: present, shadowed, absent and boundary keys, runs of neighbours (likely in
    /// one data block) and duplicates, in random order.
    fn draw(&self, rng: &mut SmallRng, n: usize) -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = Vec::with_capacity(n);
        while keys.len() < n {
            let pick = rng.gen_range(0..100);
            let k = match pick {
                0..=39 => self.present.choose(rng).cloned(),
                40..=54 => self.shadowed.choose(rng).cloned(),
                55..=66 => self.absent.choose(rng).cloned(),
                67..=74 => self.boundaries.choose(rng).cloned(),
                75..=84 => keys.choose(rng).cloned(),
                _ => {
                    // A run of neighbours: consecutive ids, present or not.
                    let start = rng.gen_range(0..=self.max_id);
                    let run = rng.gen_range(2..6).min(n - keys.len());
                    for id in start..start + run as u32 {
                        keys.push(key(id));
                    }
                    continue;
                }
            };
            if let Some(k) = k {
                keys.push(k);
            }
        }
        keys.truncate(n);
        keys.shuffle(rng);
        keys
    }
}

/// The whole equivalence: random batches of every size, then batches built to hit shared
/// blocks (all present keys in order and reversed, boundary keys of every table, tombstones).
fn check_equivalence(
    db: &Db,
    ro: &ReadOptions,
    model: &Model,
    pool: &KeyPool,
    seed: u64,
    what: &str,
) {
    let mut rng = SmallRng::seed_from_u64(seed);
    for &n in &BATCH_SIZES {
        let rounds = if n >= 1000 { 2 } else { 4 };
        for round in 0..rounds {
            let keys = pool.draw(&mut rng, n);
            check_batch(db, ro, model, &keys, &format!("{what}: batch {n} #{round}"));
        }
    }
    // Every present key in key order, then reversed: runs through every data block.
    for (i, chunk) in pool.present.chunks(1000).enumerate() {
        check_batch(db, ro, model, chunk, &format!("{what}: sorted chunk {i}"));
        let mut rev = chunk.to_vec();
        rev.reverse();
        check_batch(db, ro, model, &rev, &format!("{what}: reversed chunk {i}"));
    }
    // Block 0 and the last block of every table at once; each key twice.
    let mut bounds = pool.boundaries.clone();
    bounds.extend(pool.boundaries.iter().rev().cloned());
    check_batch(db, ro, model, &bounds, &format!("{what}: table boundaries"));
    // Tombstones over deeper values, with their live neighbours.
    let mut tomb = Vec::new();
    for k in pool.shadowed.iter().take(300) {
        tomb.push(k.clone());
        let mut next = k.clone();
        next.push(0);
        tomb.push(next);
    }
    tomb.shuffle(&mut rng);
    check_batch(db, ro, model, &tomb, &format!("{what}: tombstones"));
    // Keys given as &str and as slices: the generic signature.
    let strs = ["key00001", "key00002~", "key00001"];
    let got = db.multi_get(ro, &strs).unwrap();
    let want: Vec<Vec<u8>> = strs.iter().map(|s| s.as_bytes().to_vec()).collect();
    assert_values(
        &format!("{what}: &str keys"),
        &want,
        &got,
        &expected(model, &want),
    );
}

// ---------------------------------------------------------------------------------------------
// A layered database

/// What a layered build wrote.
struct Layered {
    model: Model,
    /// Keys whose newest version is a tombstone written after their value reached a deeper
    /// level.
    shadowed: Vec<Vec<u8>>,
    max_id: u32,
    /// The next version of each key id.
    versions: BTreeMap<u32, u64>,
}

impl Layered {
    fn put(&mut self, db: &Db, id: u32) {
        let ver = self.versions.entry(id).or_insert(0);
        *ver += 1;
        let v = value(id, *ver);
        db.put(&WriteOptions::default(), &key(id), &v).unwrap();
        self.model.insert(key(id), v);
        self.max_id = self.max_id.max(id);
    }

    fn delete(&mut self, db: &Db, id: u32) {
        db.delete(&WriteOptions::default(), &key(id)).unwrap();
        if self.model.remove(&key(id)).is_some() {
            self.shadowed.push(key(id));
        }
    }

    /// Puts (or, one time in `delete_one_in`, deletes) `count` random ids below `below`.
    fn mutate(
        &mut self,
        db: &Db,
        rng: &mut SmallRng,
        count: usize,
        below: u32,
        delete_one_in: u32,
    ) {
        for _ in 0..count {
            let id = rng.gen_range(0..below);
            if rng.gen_ratio(1, delete_one_in) {
                self.delete(db, id);
            } else {
                self.put(db, id);
            }
        }
    }
}

/// Number of keys in the deepest layer.
const BASE_KEYS: u32 = 1500;
/// An L0 compaction trigger that the layered build never reaches after phase 2.
const L0_KEEP: usize = 16;

/// Builds a database whose lookups end in every layer:
/// 1. `BASE_KEYS` keys, fully compacted, then spread over L1..L4 by size;
/// 2. overwrites and deletes of a quarter of them, flushed and compacted into upper levels;
/// 3. reopened with an L0 trigger it never reaches: three rounds of overwrites and deletes,
///    each flushed, so L0 holds three overlapping tables (keys written in several of them);
/// 4. a burst of writes that switches memtables (immutable ones, flushed in the background),
///    then a few hundred small writes in the active memtable.
///
/// `open` opens the database with the given L0 compaction trigger.
fn build_layers(open: &dyn Fn(usize) -> Db, seed: u64) -> (Db, Layered) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut l = Layered {
        model: Model::new(),
        shadowed: Vec::new(),
        max_id: 0,
        versions: BTreeMap::new(),
    };
    let db = open(2);
    // Phase 1: the deep levels.
    let mut ids: Vec<u32> = (0..BASE_KEYS).collect();
    ids.shuffle(&mut rng);
    for id in ids {
        l.put(&db, id);
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    // Phase 2: upper levels over them.
    l.mutate(&db, &mut rng, 400, BASE_KEYS, 5);
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    drop(db);
    // Phase 3: overlapping L0 tables, with some keys written in every one of them. Each
    // round fits in one memtable and the trigger is out of reach, so L0 keeps them all.
    let db = open(L0_KEEP);
    let hot: Vec<u32> = (0..30).map(|_| rng.gen_range(0..BASE_KEYS)).collect();
    for _ in 0..3 {
        for _ in 0..15 {
            let id = *hot.choose(&mut rng).unwrap();
            if rng.gen_ratio(1, 4) {
                l.delete(&db, id);
            } else {
                l.put(&db, id);
            }
        }
        l.mutate(&db, &mut rng, 25, BASE_KEYS, 4);
        db.flush().unwrap();
    }
    // Phase 4: memtables. A burst of larger values over several memtables...
    for _ in 0..120 {
        let id = rng.gen_range(0..BASE_KEYS);
        l.put(&db, id);
    }
    // ... then small writes in the active one: tombstones, overwrites and new keys.
    l.mutate(&db, &mut rng, 120, BASE_KEYS, 3);
    for id in BASE_KEYS..BASE_KEYS + 40 {
        l.put(&db, id);
    }
    (db, l)
}

/// Fails unless the layers the test relies on exist.
fn assert_layered(db: &Db, what: &str) {
    let files = db.live_files();
    let l0 = files.iter().filter(|f| f.level == 0).count();
    let deepest = files.iter().map(|f| f.level).max().unwrap_or(0);
    let tiers: std::collections::BTreeSet<&str> = files.iter().map(|f| f.tier.as_str()).collect();
    let summary: BTreeMap<usize, usize> = files.iter().fold(BTreeMap::new(), |mut m, f| {
        *m.entry(f.level).or_insert(0) += 1;
        m
    });
    println!("{what}: tables per level {summary:?}, tiers {tiers:?}");
    assert!(l0 >= 2, "{what}: want overlapping L0 tables: {summary:?}");
    assert!(deepest >= 3, "{what}: want data down to L3: {summary:?}");
    assert!(
        tiers.contains("fast") && tiers.contains("capacity"),
        "{what}: want tables on both tiers: {tiers:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// 1. Model equivalence across layers

#[test]
fn layers_multi_get_matches_model_and_get() {
    within("layers", TEST_LIMIT, || {
        let storage = Storage::disk();
        let open = |trigger| Db::open(builder(&storage, false, trigger).build().unwrap()).unwrap();
        let (db, l) = build_layers(&open, 1);
        assert_layered(&db, "layers");
        let before = db.stats();
        let imm = db.stats().immutable_memtables;
        let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        assert!(
            pool.shadowed.len() > 50,
            "{} tombstones",
            pool.shadowed.len()
        );
        // First while immutable memtables may still be waiting for their flush.
        check_equivalence(&db, &ReadOptions::default(), &l.model, &pool, 10, "layers");
        println!("layers: {imm} immutable memtables when the checks began");
        // The keys drawn end their lookups in memtables and in every level down to L3.
        let after = db.stats();
        assert!(after.reads_memtable > before.reads_memtable);
        for level in 0..=3 {
            let served = |s: &tierkv::Stats| s.levels[level].reads_served;
            assert!(
                served(&after) > served(&before),
                "no lookup ended in L{level}"
            );
        }
        // After the flushes and compactions settle (lookups move from memtables to L0).
        db.wait_for_compactions().unwrap();
        let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        let ro = ReadOptions {
            fill_cache: false,
            ..ReadOptions::default()
        };
        check_equivalence(&db, &ro, &l.model, &pool, 11, "layers settled, no fill");
    });
}

// ---------------------------------------------------------------------------------------------
// 2. Snapshots

#[test]
fn snapshot_multi_get_sees_old_values_after_rewrites_and_compaction() {
    within("snapshot", TEST_LIMIT, || {
        let storage = Storage::memory(2);
        let open = |trigger| Db::open(builder(&storage, false, trigger).build().unwrap()).unwrap();
        let (db, mut l) = build_layers(&open, 2);
        let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        let old = db.snapshot();
        let old_model = l.model.clone();
        let mut rng = SmallRng::seed_from_u64(20);

        // Overwrite and delete much of it, flush, take a second snapshot, then more.
        l.mutate(&db, &mut rng, 600, BASE_KEYS + 40, 3);
        db.flush().unwrap();
        let mid = db.snapshot();
        let mid_model = l.model.clone();
        l.mutate(&db, &mut rng, 600, BASE_KEYS + 40, 2);
        for id in (0..BASE_KEYS).step_by(3) {
            l.delete(&db, id);
        }
        db.compact_range(None, None).unwrap();
        l.mutate(&db, &mut rng, 100, BASE_KEYS + 40, 2);

        let at_old = ReadOptions::at(&old);
        let at_mid = ReadOptions::at(&mid);
        check_equivalence(&db, &at_old, &old_model, &pool, 21, "old snapshot");
        check_equivalence(&db, &at_mid, &mid_model, &pool, 22, "mid snapshot");
        let now = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        check_equivalence(&db, &ReadOptions::default(), &l.model, &now, 23, "latest");

        // Still after another full compaction with the snapshots held, and without the cache.
        db.compact_range(None, None).unwrap();
        let at_old_nofill = ReadOptions {
            fill_cache: false,
            ..ReadOptions::at(&old)
        };
        check_equivalence(
            &db,
            &at_old_nofill,
            &old_model,
            &pool,
            24,
            "old snapshot, compacted",
        );

        // A snapshot of another database is refused.
        let other_storage = Storage::memory(3);
        let other = Db::open(builder(&other_storage, false, 2).build().unwrap()).unwrap();
        let foreign = other.snapshot();
        assert!(matches!(
            db.multi_get(&ReadOptions::at(&foreign), &[b"k"]),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            db.submit_multi_get(&ReadOptions::at(&foreign), vec![b"k".to_vec()]),
            Err(Error::InvalidArgument(_))
        ));
    });
}

// ---------------------------------------------------------------------------------------------
// 3. Direct reads

/// Counts data blocks whose first byte is not page-aligned and blocks that cross a 4 KiB page
/// boundary, over the live tables (those a background compaction has not deleted meanwhile).
fn alignment_mix(storage: &Storage, files: &[LiveFile]) -> (usize, usize, usize) {
    let (mut blocks, mut unaligned, mut straddling) = (0, 0, 0);
    for f in files {
        let Ok(data_blocks) = storage.try_data_blocks(&f.path) else {
            continue;
        };
        for (_, off, size) in data_blocks {
            blocks += 1;
            if off % 4096 != 0 {
                unaligned += 1;
            }
            let end = off + size + tierkv::inspect::BLOCK_TRAILER_LEN as u64;
            if off / 4096 != (end - 1) / 4096 {
                straddling += 1;
            }
        }
    }
    (blocks, unaligned, straddling)
}

fn direct_run(compression: Compression, seed: u64) {
    let storage = Storage::disk();
    let opts = |trigger: usize, cache: usize| {
        builder(&storage, true, trigger)
            .compression(compression)
            .block_cache_bytes(cache)
            .build()
            .unwrap()
    };
    let open = |trigger| Db::open(opts(trigger, 1 << 20)).unwrap();
    let (db, l) = build_layers(&open, seed);
    assert_layered(&db, "direct");
    let (blocks, unaligned, straddling) = alignment_mix(&storage, &db.live_files());
    println!("direct {compression:?}: {blocks} data blocks, {unaligned} unaligned, {straddling} across a page boundary");
    assert!(
        unaligned > blocks / 2 && straddling > blocks / 4,
        "want blocks at every alignment: {blocks} blocks, {unaligned} unaligned, {straddling} straddling"
    );
    let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
    let read_before: u64 = db.stats().tiers.iter().map(|t| t.bytes_read).sum();

    // Block cache on, filled: the first pass reads from the files, the second mostly hits.
    let ro = ReadOptions::default();
    check_equivalence(&db, &ro, &l.model, &pool, seed, "direct, cache");
    check_equivalence(&db, &ro, &l.model, &pool, seed + 1, "direct, cache warm");
    // Block cache on, not filled by these reads.
    let nofill = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    check_equivalence(&db, &nofill, &l.model, &pool, seed + 2, "direct, no fill");
    let read_after: u64 = db.stats().tiers.iter().map(|t| t.bytes_read).sum();
    assert!(
        read_after > read_before,
        "the checks read nothing from the tables"
    );
    // Snapshot reads on direct tiers too.
    let snap = db.snapshot();
    check_equivalence(
        &db,
        &ReadOptions::at(&snap),
        &l.model,
        &pool,
        seed + 3,
        "direct, snapshot",
    );
    drop(snap);
    drop(db);

    // No block cache at all: every table block is read from the file every time.
    let db = Db::open(opts(L0_KEEP, 0)).unwrap();
    check_equivalence(&db, &ro, &l.model, &pool, seed + 4, "direct, no cache");
    check_equivalence(
        &db,
        &nofill,
        &l.model,
        &pool,
        seed + 5,
        "direct, no cache, no fill",
    );
    // And after a full compaction into fewer, larger tables.
    db.compact_range(None, None).unwrap();
    let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
    check_equivalence(&db, &ro, &l.model, &pool, seed + 6, "direct, compacted");
}

#[test]
fn direct_reads_multi_get_matches_model_uncompressed() {
    within("direct none", TEST_LIMIT, || {
        direct_run(Compression::None, 30)
    });
}

#[test]
fn direct_reads_multi_get_matches_model_lz4() {
    within("direct lz4", TEST_LIMIT, || {
        direct_run(Compression::Lz4, 40)
    });
}

// ---------------------------------------------------------------------------------------------
// 4. Corruption

/// `result` must be `Corruption` naming `file` at `offset`.
#[track_caller]
fn expect_corruption<T: std::fmt::Debug>(result: Result<T>, file: &Path, offset: u64, what: &str) {
    match &result {
        Err(
            e @ Error::Corruption {
                file: named,
                offset: at,
                ..
            },
        ) => {
            assert_eq!(named, file, "{what}: corruption names the wrong file: {e}");
            assert_eq!(
                *at, offset,
                "{what}: corruption names the wrong offset: {e}"
            );
            assert!(
                e.to_string().contains(&*file.to_string_lossy()),
                "{what}: message {e} does not name the file"
            );
        }
        other => panic!(
            "{what}: expected corruption of {} at {offset}, got {other:?}",
            file.display()
        ),
    }
}

/// [`builder`] for a database that `compacted` fills: levels large enough that everything
/// stays in L1 (on the capacity tier), uncompressed.
fn one_level(storage: &Storage, direct: bool) -> OptionsBuilder {
    builder(storage, direct, 2)
        .levels_on_fast(1)
        .max_bytes_for_level_base(64 << 20)
        .compression(Compression::None)
}

/// A fully compacted database of `BASE_KEYS` keys (disjoint tables in one level, so a lookup
/// reads only the table covering its key); returns the model and a middle table.
fn compacted(storage: &Storage, opts: &dyn Fn() -> Options) -> (Model, LiveFile) {
    let db = Db::open(opts()).unwrap();
    let mut model = Model::new();
    for id in 0..BASE_KEYS {
        let v = value(id, 1);
        db.put(&WriteOptions::default(), &key(id), &v).unwrap();
        model.insert(key(id), v);
    }
    db.compact_range(None, None).unwrap();
    db.wait_for_compactions().unwrap();
    let mut files = db.live_files();
    let levels: std::collections::BTreeSet<usize> = files.iter().map(|f| f.level).collect();
    assert_eq!(levels.len(), 1, "want one level after compact_range");
    assert!(files.len() >= 5, "want several tables: {}", files.len());
    files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    // A middle table with at least three data blocks.
    let table = files[files.len() / 2..]
        .iter()
        .find(|f| storage.data_blocks(&f.path).len() >= 3)
        .expect("a table with three data blocks")
        .clone();
    (model, table)
}

/// Model keys inside data block `b` of a table with `blocks`, and those in its other blocks.
fn keys_by_block(
    model: &Model,
    table: &LiveFile,
    blocks: &[(Vec<u8>, u64, u64)],
    b: usize,
) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let in_table = model.range(table.smallest.clone()..=table.largest.clone());
    let (mut inside, mut outside) = (Vec::new(), Vec::new());
    for (k, _) in in_table {
        let after_prev = b == 0 || k.as_slice() > blocks[b - 1].0.as_slice();
        let up_to_sep = k.as_slice() <= blocks[b].0.as_slice();
        if after_prev && up_to_sep {
            inside.push(k.clone());
        } else {
            outside.push(k.clone());
        }
    }
    (inside, outside)
}

fn corrupt_run(storage: Storage, direct: bool) {
    let opts = || one_level(&storage, direct).build().unwrap();
    let (model, table) = compacted(&storage, &opts);
    let blocks = storage.data_blocks(&table.path);
    let b = blocks.len() / 2;
    let (_, off, size) = blocks[b];
    let (damaged, same_table) = keys_by_block(&model, &table, &blocks, b);
    assert!(!damaged.is_empty() && !same_table.is_empty());
    let other_tables: Vec<Vec<u8>> = model
        .keys()
        .filter(|k| **k < table.smallest || **k > table.largest)
        .cloned()
        .collect();
    // A byte in the middle of the block's stored bytes.
    storage.flip(&table.path, off + size / 2);

    let db = Db::open(opts()).unwrap();
    let path = &table.path;
    let mut rng = SmallRng::seed_from_u64(50);
    for fill_cache in [true, false] {
        let ro = ReadOptions {
            fill_cache,
            ..ReadOptions::default()
        };
        let what = |s: &str| format!("{s} (direct {direct}, fill_cache {fill_cache})");
        // The damaged block alone, twice (a retry must not find it cached).
        for _ in 0..2 {
            expect_corruption(
                db.multi_get(&ro, &damaged[..1]),
                path,
                off,
                &what("one key"),
            );
        }
        expect_corruption(db.multi_get(&ro, &damaged), path, off, &what("whole block"));
        // Mixed with keys that read fine, and duplicates, in any order.
        for _ in 0..4 {
            let mut keys: Vec<Vec<u8>> = other_tables
                .choose_multiple(&mut rng, 40)
                .cloned()
                .collect();
            keys.extend(same_table.choose_multiple(&mut rng, 10).cloned());
            let k = damaged.choose(&mut rng).unwrap().clone();
            keys.push(k.clone());
            keys.push(k);
            keys.shuffle(&mut rng);
            expect_corruption(db.multi_get(&ro, &keys), path, off, &what("mixed batch"));
            let h = try_submit(|| db.submit_multi_get(&ro, keys.clone())).unwrap();
            expect_corruption(
                wait_bounded(h, "submit"),
                path,
                off,
                &what("submitted mixed batch"),
            );
        }
        expect_corruption(db.get(&ro, &damaged[0]), path, off, &what("get"));
        // Everything else answers, before and after the failed batches.
        for _ in 0..3 {
            let mut keys: Vec<Vec<u8>> = other_tables
                .choose_multiple(&mut rng, 300)
                .cloned()
                .collect();
            keys.extend(same_table.iter().cloned());
            keys.extend(same_table.iter().take(5).cloned());
            keys.push(key(BASE_KEYS + 5));
            keys.shuffle(&mut rng);
            check_batch(&db, &ro, &model, &keys, &what("intact blocks"));
        }
    }
    drop(db);

    // Undoing the damage gives every value back.
    storage.flip(&table.path, off + size / 2);
    let db = Db::open(opts()).unwrap();
    let all: Vec<Vec<u8>> = model.keys().cloned().collect();
    for chunk in all.chunks(1000) {
        check_batch(
            &db,
            &ReadOptions::default(),
            &model,
            chunk,
            "after undoing the flip",
        );
    }
}

#[test]
fn corrupt_block_fails_multi_get_on_direct_real_files() {
    within("corrupt direct", TEST_LIMIT, || {
        corrupt_run(Storage::disk(), true)
    });
}

#[test]
fn corrupt_block_fails_multi_get_on_buffered_real_files_and_faultfs() {
    within("corrupt buffered", TEST_LIMIT, || {
        corrupt_run(Storage::disk(), false);
        corrupt_run(Storage::memory(5), false);
    });
}

// ---------------------------------------------------------------------------------------------
// 5. FaultFs

/// The layered equivalence on FaultFs, then lookups through immutable memtables that are
/// certain to be there: L0 goes to the capacity tier, which is then out of space, so their
/// flush fails and they stay.
#[test]
fn faultfs_multi_get_matches_model_with_pinned_immutable_memtables() {
    within("faultfs", TEST_LIMIT, || {
        let storage = Storage::memory(6);
        let open = |trigger| {
            let opts = builder(&storage, false, trigger)
                .levels_on_fast(0)
                .build()
                .unwrap();
            Db::open(opts).unwrap()
        };
        let (db, mut l) = build_layers(&open, 6);
        let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        check_equivalence(&db, &ReadOptions::default(), &l.model, &pool, 60, "faultfs");
        db.wait_for_compactions().unwrap();

        // No room for another table: the next flush fails and its memtable stays.
        let fs = storage.fault_fs();
        let capacity = storage.dirs().1;
        let used: u64 = fs
            .list_dir(&capacity)
            .unwrap()
            .iter()
            .map(|n| {
                fs.file_contents(&capacity.join(n))
                    .map_or(0, |c| c.len() as u64)
            })
            .sum();
        fs.set_space_limit(&capacity, Some(used));
        let mut rng = SmallRng::seed_from_u64(61);
        let w = WriteOptions::default();
        let mut writes = 0;
        loop {
            let id = rng.gen_range(0..BASE_KEYS + 40);
            let ver = l.versions.entry(id).or_insert(0);
            *ver += 1;
            let v = value(id, *ver);
            let deleting = rng.gen_ratio(1, 4);
            let r = if deleting {
                db.delete(&w, &key(id))
            } else {
                db.put(&w, &key(id), &v)
            };
            match r {
                Ok(()) if deleting => {
                    if l.model.remove(&key(id)).is_some() {
                        l.shadowed.push(key(id));
                    }
                }
                Ok(()) => {
                    l.model.insert(key(id), v);
                }
                Err(_) => break, // The failed flush stopped writes.
            }
            writes += 1;
            assert!(writes < 20_000, "the flush never failed");
        }
        let imm = db.stats().immutable_memtables;
        println!("faultfs: {imm} immutable memtables pinned after {writes} writes");
        assert!(imm >= 1, "no immutable memtable");
        let pool = KeyPool::new(&db, &l.model, &l.shadowed, l.max_id);
        check_equivalence(
            &db,
            &ReadOptions::default(),
            &l.model,
            &pool,
            62,
            "faultfs, pinned imm",
        );
    });
}

/// FaultFs has no read-fault injection (`fail_after` counts mutating operations only), so a
/// read error is made by truncating a table under the engine's open handle: blocks past the
/// new end read as `UnexpectedEof`. A multi-get needing one of them fails (never `None`, never
/// wrong data); blocks before the cut and other tables still read.
#[test]
fn faultfs_read_error_fails_multi_get() {
    within("faultfs read error", TEST_LIMIT, || {
        let storage = Storage::memory(7);
        let opts = || {
            one_level(&storage, false)
                .block_cache_bytes(0)
                .build()
                .unwrap()
        };
        let (model, table) = compacted(&storage, &opts);
        let blocks = storage.data_blocks(&table.path);
        let b = blocks.len() / 2;
        let (cut_keys, _) = keys_by_block(&model, &table, &blocks, b);
        let (first_keys, _) = keys_by_block(&model, &table, &blocks, 0);
        let other_tables: Vec<Vec<u8>> = model
            .keys()
            .filter(|k| **k < table.smallest || **k > table.largest)
            .cloned()
            .collect();
        let db = Db::open(opts()).unwrap();
        let ro = ReadOptions::default();
        // Open the table (index and footer in memory), then cut it at block `b`.
        check_batch(&db, &ro, &model, &first_keys, "before the cut");
        let fs = storage.fault_fs();
        let bytes = fs.file_contents(&table.path).unwrap();
        fs.write_raw(&table.path, &bytes[..blocks[b].1 as usize]);

        let mut rng = SmallRng::seed_from_u64(70);
        let fails = |r: Result<Values>, what: &str| match r {
            Err(Error::Io { path, .. }) | Err(Error::Corruption { file: path, .. }) => {
                assert_eq!(path, table.path, "{what}: the error names another file")
            }
            other => panic!("{what}: a read of a cut table returned {other:?}"),
        };
        fails(db.multi_get(&ro, &cut_keys[..1]), "one key");
        for i in 0..4 {
            let mut keys: Vec<Vec<u8>> = other_tables
                .choose_multiple(&mut rng, 50)
                .cloned()
                .collect();
            keys.extend(first_keys.iter().cloned());
            keys.push(cut_keys.choose(&mut rng).unwrap().clone());
            keys.shuffle(&mut rng);
            fails(db.multi_get(&ro, &keys), &format!("mixed batch {i}"));
            let h = try_submit(|| db.submit_multi_get(&ro, keys.clone())).unwrap();
            fails(wait_bounded(h, "submit"), &format!("submitted batch {i}"));
        }
        let mut keys: Vec<Vec<u8>> = other_tables
            .choose_multiple(&mut rng, 400)
            .cloned()
            .collect();
        keys.extend(first_keys.iter().cloned());
        keys.shuffle(&mut rng);
        check_batch(
            &db,
            &ro,
            &model,
            &keys,
            "blocks before the cut, other tables",
        );
        drop(db);

        // A process crash kills every open handle: table reads fail, memtable reads do not.
        fs.write_raw(&table.path, &bytes);
        let db = Db::open(opts()).unwrap();
        check_batch(&db, &ro, &model, &other_tables[..100], "after restoring");
        db.put(&WriteOptions::default(), b"mem", b"table-free")
            .unwrap();
        fs.process_crash();
        let keys: Vec<Vec<u8>> = other_tables[..100].to_vec();
        match db.multi_get(&ro, &keys) {
            Err(Error::Io { .. }) => {}
            other => panic!("multi-get through dead handles returned {other:?}"),
        }
        assert_eq!(
            db.multi_get(&ro, &[b"mem"]).unwrap(),
            vec![Some(b"table-free".to_vec())]
        );
    });
}

// ---------------------------------------------------------------------------------------------
// 6. submit_multi_get under concurrent writes, and at close

fn run_millis() -> u64 {
    env_u64("TIERKV_MG_MILLIS", 1500)
}

/// Keys the concurrent writer works on.
const HOT_KEYS: u32 = 400;

/// Whether version `ver` of key `id` is a put (else a delete). Version 0: never written.
fn is_put(id: u32, ver: u64) -> bool {
    ver > 0 && !splitmix((u64::from(id) << 40) ^ ver).is_multiple_of(4)
}

/// Per key: the version of the newest write started and of the newest acknowledged.
struct Versions {
    issued: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
}

impl Versions {
    fn new() -> Versions {
        let v = || (0..HOT_KEYS).map(|_| AtomicU64::new(0)).collect();
        Versions {
            issued: v(),
            acked: v(),
        }
    }

    /// Writes the next version of `id`.
    fn write(&self, db: &Db, id: u32) -> Result<()> {
        let ver = self.issued[id as usize].load(Ordering::SeqCst) + 1;
        self.issued[id as usize].store(ver, Ordering::SeqCst);
        if is_put(id, ver) {
            db.put(&WriteOptions::default(), &key(id), &value(id, ver))?;
        } else {
            db.delete(&WriteOptions::default(), &key(id))?;
        }
        self.acked[id as usize].store(ver, Ordering::SeqCst);
        Ok(())
    }

    fn acked(&self, ids: &[u32]) -> Vec<u64> {
        ids.iter()
            .map(|&id| self.acked[id as usize].load(Ordering::SeqCst))
            .collect()
    }

    /// Checks a result against the versions acknowledged before the read began.
    fn check(&self, ids: &[u32], acked_before: &[u64], got: &Values, what: &str) {
        assert_eq!(got.len(), ids.len(), "{what}: result count");
        for (i, &id) in ids.iter().enumerate() {
            let low = acked_before[i];
            let high = self.issued[id as usize].load(Ordering::SeqCst);
            match &got[i] {
                Some(v) => {
                    let (vid, ver) = parse_value(v).unwrap_or_else(|| {
                        panic!("{what}: key {id}: a value never written: {}", show_bytes(v))
                    });
                    assert_eq!(vid, id, "{what}: key {id} returned key {vid}'s value");
                    assert!(
                        is_put(id, ver),
                        "{what}: key {id}: version {ver} was a delete"
                    );
                    assert!(
                        ver >= low,
                        "{what}: key {id}: version {ver} is older than the acknowledged {low}"
                    );
                    assert!(
                        ver <= high,
                        "{what}: key {id}: version {ver} was never written (newest {high})"
                    );
                    assert!(
                        *v == value(id, ver),
                        "{what}: key {id} version {ver}: wrong bytes"
                    );
                }
                None => assert!(
                    low == 0 || (low..=high).any(|ver| !is_put(id, ver)),
                    "{what}: key {id}: None, but versions {low}..={high} are all puts"
                ),
            }
        }
    }
}

#[test]
fn submit_multi_get_under_concurrent_writes() {
    within("concurrent", TEST_LIMIT, || {
        let storage = Storage::disk();
        // The capacity tier reads directly, the fast one through the page cache.
        let opts = tiered(&storage, [false, true], 2)
            .levels_on_fast(1)
            .build()
            .unwrap();
        let db = Arc::new(Db::open(opts).unwrap());
        let versions = Arc::new(Versions::new());
        for _ in 0..3 {
            for id in 0..HOT_KEYS {
                versions.write(&db, id).unwrap();
            }
            db.flush().unwrap();
        }
        db.compact_range(None, None).unwrap();

        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, versions, stop) = (db.clone(), versions.clone(), stop.clone());
            thread::spawn(move || {
                let mut rng = SmallRng::seed_from_u64(80);
                let mut n = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    versions.write(&db, rng.gen_range(0..HOT_KEYS)).unwrap();
                    n += 1;
                    if n.is_multiple_of(2000) {
                        db.flush().unwrap();
                    }
                }
                n
            })
        };
        let readers: Vec<_> = (0..4)
            .map(|r| {
                let (db, versions, stop) = (db.clone(), versions.clone(), stop.clone());
                thread::spawn(move || {
                    let mut rng = SmallRng::seed_from_u64(90 + r);
                    let mut in_flight: VecDeque<(Vec<u32>, Vec<u64>, Handle<Values>)> =
                        VecDeque::new();
                    let mut done = 0u64;
                    let check_one = |(ids, acked, h): (Vec<u32>, Vec<u64>, Handle<Values>),
                                     done: &mut u64| {
                        let what = format!("reader {r} request {done}");
                        let got = wait_bounded(h, &what).unwrap_or_else(|e| panic!("{what}: {e}"));
                        versions.check(&ids, &acked, &got, &what);
                        *done += 1;
                    };
                    while !stop.load(Ordering::SeqCst) {
                        let n = *[1usize, 2, 7, 30, 64].choose(&mut rng).unwrap();
                        let mut ids: Vec<u32> =
                            (0..n).map(|_| rng.gen_range(0..HOT_KEYS)).collect();
                        if n > 2 {
                            let dup = ids[0];
                            ids.push(dup);
                        }
                        let keys: Vec<Vec<u8>> = ids.iter().map(|&id| key(id)).collect();
                        let acked = versions.acked(&ids);
                        if rng.gen_ratio(1, 8) {
                            let got = db.multi_get(&ReadOptions::default(), &keys).unwrap();
                            versions.check(&ids, &acked, &got, &format!("reader {r} sync"));
                            continue;
                        }
                        match db.submit_multi_get(&ReadOptions::default(), keys) {
                            Ok(h) => in_flight.push_back((ids, acked, h)),
                            Err(Error::Busy(_)) => {}
                            Err(e) => panic!("reader {r}: submit: {e}"),
                        }
                        if in_flight.len() >= 8 || rng.gen_ratio(1, 4) {
                            if let Some(req) = in_flight.pop_front() {
                                check_one(req, &mut done);
                            }
                        }
                    }
                    while let Some(req) = in_flight.pop_front() {
                        check_one(req, &mut done);
                    }
                    done
                })
            })
            .collect();
        thread::sleep(Duration::from_millis(run_millis()));
        stop.store(true, Ordering::SeqCst);
        let writes = writer.join().expect("writer");
        let reads: u64 = readers.into_iter().map(|r| r.join().expect("reader")).sum();
        let s = db.stats();
        println!(
            "concurrent: {writes} writes, {reads} multi-gets checked, {} flushes, {} compactions",
            s.flushes, s.compactions
        );
        assert!(
            reads > 100 && writes > 100,
            "{reads} reads, {writes} writes"
        );
    });
}

/// A multi-get reads one view: a batch that wrote two keys together is seen whole or not at
/// all (the documented contract of `multi_get` without a snapshot: "read from one consistent
/// view ... as of the call"), through `multi_get` and `submit_multi_get` alike.
#[test]
fn multi_get_sees_one_view_of_concurrent_batches() {
    within("one view", TEST_LIMIT, || {
        let storage = Storage::memory(8);
        let db = Arc::new(Db::open(builder(&storage, false, 2).build().unwrap()).unwrap());
        let pair = |j: u32, side: &str| format!("pair{j:03}/{side}").into_bytes();
        const PAIRS: u32 = 20;
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let (db, stop) = (db.clone(), stop.clone());
            thread::spawn(move || {
                let mut ver = 0u64;
                while !stop.load(Ordering::SeqCst) {
                    ver += 1;
                    let mut b = WriteBatch::new();
                    for j in 0..PAIRS {
                        let v = format!("{ver}").into_bytes();
                        b.put(pair(j, "a"), &v);
                        b.put(pair(j, "b"), &v);
                    }
                    db.write(&WriteOptions::default(), b).unwrap();
                }
            })
        };
        let mut torn = 0;
        let deadline = Instant::now() + Duration::from_millis(run_millis());
        let mut reads = 0;
        while Instant::now() < deadline {
            let keys: Vec<Vec<u8>> = (0..PAIRS)
                .flat_map(|j| [pair(j, "a"), pair(j, "b")])
                .collect();
            let got = if reads % 2 == 0 {
                db.multi_get(&ReadOptions::default(), &keys).unwrap()
            } else {
                let h = try_submit(|| db.submit_multi_get(&ReadOptions::default(), keys.clone()))
                    .unwrap();
                wait_bounded(h, "one view").unwrap()
            };
            let distinct: std::collections::BTreeSet<&Option<Vec<u8>>> = got.iter().collect();
            if distinct.len() > 1 {
                torn += 1;
            }
            reads += 1;
        }
        stop.store(true, Ordering::SeqCst);
        writer.join().unwrap();
        assert_eq!(
            torn, 0,
            "{torn} of {reads} multi-gets saw parts of different batches"
        );
    });
}

#[test]
fn dropping_the_db_resolves_every_multi_get_in_flight() {
    within("close", TEST_LIMIT, || {
        for (round, direct) in [(0u64, true), (1, false)] {
            let storage = Storage::disk();
            let opts = builder(&storage, direct, 2)
                .pipeline_workers(2)
                .build()
                .unwrap();
            let db = Db::open(opts).unwrap();
            let mut model = Model::new();
            for id in 0..800 {
                let v = value(id, 1);
                db.put(&WriteOptions::default(), &key(id), &v).unwrap();
                model.insert(key(id), v);
                if id % 300 == 299 {
                    db.flush().unwrap();
                }
            }
            let mut rng = SmallRng::seed_from_u64(100 + round);
            let mut reqs = Vec::new();
            for i in 0..600 {
                let keys: Vec<Vec<u8>> = (0..rng.gen_range(1..40))
                    .map(|_| key(rng.gen_range(0..820)))
                    .collect();
                let ro = ReadOptions {
                    fill_cache: i % 2 == 0,
                    ..ReadOptions::default()
                };
                match db.submit_multi_get(&ro, keys.clone()) {
                    Ok(h) => reqs.push((keys, h)),
                    Err(Error::Busy(_)) => break,
                    Err(e) => panic!("submit: {e}"),
                }
            }
            let n = reqs.len();
            drop(db);
            let (mut ok, mut closed) = (0, 0);
            for (i, (keys, h)) in reqs.into_iter().enumerate() {
                let what = format!("round {round} request {i}");
                match wait_bounded(h, &what) {
                    Ok(got) => {
                        assert_values(&what, &keys, &got, &expected(&model, &keys));
                        ok += 1;
                    }
                    Err(Error::Closed(_)) => closed += 1,
                    Err(e) => panic!("{what}: in flight at close, failed with {e}"),
                }
            }
            println!("close (direct {direct}): {n} in flight: {ok} Ok, {closed} Closed");
            assert_eq!(ok + closed, n);
        }
    });
}

// ---------------------------------------------------------------------------------------------
// 7. scan_readahead: iterators and scans on direct-read tiers over many tables

fn model_from(model: &Model, start: &[u8], limit: usize) -> Vec<Entry> {
    model
        .range(start.to_vec()..)
        .take(limit)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Takes up to `limit` entries from the iterator's position.
fn take(it: &mut tierkv::DbIterator, limit: usize, what: &str) -> Vec<Entry> {
    let mut out = Vec::new();
    while it.valid() && out.len() < limit {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    if let Err(e) = it.status() {
        panic!("{what}: iterator status: {e}");
    }
    out
}

/// Many small tables on direct-read tiers, fully compacted, plus L0 tables and memtable
/// entries on top so scans merge several sources.
fn scan_db(storage: &Storage, cache: usize) -> (Db, Model) {
    let opts = builder(storage, true, 8)
        .target_file_size(16 << 10)
        .block_cache_bytes(cache)
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(110);
    let w = WriteOptions::default();
    for id in 0..1200 {
        let v = value(id, 1);
        db.put(&w, &key(id), &v).unwrap();
        model.insert(key(id), v);
    }
    db.compact_range(None, None).unwrap();
    for round in 0..2u64 {
        for _ in 0..100 {
            let id = rng.gen_range(0..1250);
            if rng.gen_ratio(1, 3) {
                db.delete(&w, &key(id)).unwrap();
                model.remove(&key(id));
            } else {
                let v = value(id, 2 + round);
                db.put(&w, &key(id), &v).unwrap();
                model.insert(key(id), v);
            }
        }
        db.flush().unwrap();
    }
    for id in (0..1250).step_by(37) {
        let v = value(id, 9);
        db.put(&w, &key(id), &v).unwrap();
        model.insert(key(id), v);
    }
    let tables = db.live_files().len();
    assert!(tables >= 40, "want many tables, got {tables}");
    (db, model)
}

#[test]
fn scan_readahead_full_scans_seeks_and_submit_scan() {
    within("scan", TEST_LIMIT, || {
        let storage = Storage::disk();
        for cache in [1 << 20, 0] {
            let (db, model) = scan_db(&storage, cache);
            let all: Vec<Entry> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            for fill_cache in [false, true] {
                let what = format!("cache {cache}, fill_cache {fill_cache}");
                let ro = ReadOptions {
                    fill_cache,
                    ..ReadOptions::default()
                };
                // Full scans, forward and backward.
                let mut it = db.iter(ro.clone()).unwrap();
                it.seek_to_first();
                assert_same_entries(
                    &format!("{what}: forward"),
                    &take(&mut it, usize::MAX, &what),
                    &all,
                );
                let mut back = Vec::new();
                it.seek_to_last();
                while it.valid() {
                    back.push((it.key().to_vec(), it.value().to_vec()));
                    it.prev();
                }
                it.status().unwrap();
                back.reverse();
                assert_same_entries(&format!("{what}: backward"), &back, &all);
                // Seeks into the middle, each followed by a stretch of `next`.
                let mut rng = SmallRng::seed_from_u64(120);
                for i in 0..30 {
                    let start = if i % 2 == 0 {
                        key(rng.gen_range(0..1250))
                    } else {
                        absent_key(rng.gen_range(0..1250))
                    };
                    let n = rng.gen_range(1..150);
                    it.seek(&start);
                    assert_same_entries(
                        &format!("{what}: seek {} + {n}", show_bytes(&start)),
                        &take(&mut it, n, &what),
                        &model_from(&model, &start, n),
                    );
                }
                // Bounded iterators.
                for _ in 0..10 {
                    let a = rng.gen_range(0..1250);
                    let b = a + rng.gen_range(1..200);
                    let ro = ro.clone().bounds(Some(&key(a)), Some(&key(b)));
                    let mut it = db.iter(ro).unwrap();
                    it.seek_to_first();
                    let want: Vec<Entry> = model
                        .range(key(a)..key(b))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect();
                    assert_same_entries(
                        &format!("{what}: bounds {a}..{b}"),
                        &take(&mut it, usize::MAX, &what),
                        &want,
                    );
                }
                // submit_scan, several in flight at once.
                let mut scans = Vec::new();
                for _ in 0..12 {
                    let start = key(rng.gen_range(0..1250));
                    let limit = rng.gen_range(1..400);
                    let h = try_submit(|| db.submit_scan(ro.clone(), &start, limit)).unwrap();
                    scans.push((start, limit, h));
                }
                for (start, limit, h) in scans {
                    let got = wait_bounded(h, "submit_scan").unwrap();
                    assert_same_entries(
                        &format!("{what}: submit_scan {} limit {limit}", show_bytes(&start)),
                        &got,
                        &model_from(&model, &start, limit),
                    );
                }
            }
            drop(db);
            // The next round reopens the same directory with another cache size.
            let _ = std::fs::remove_dir_all(storage.dirs().0);
            let _ = std::fs::remove_dir_all(storage.dirs().1);
        }
    });
}

/// Hundreds of iterators dropped after a random number of steps (read-ahead may be in flight
/// when they go), many alive at once and advanced in turn, iterators kept while a compaction
/// deletes the tables under them, and an iterator that outlives its database.
#[test]
fn scan_readahead_iterators_dropped_mid_scan() {
    within("scan drop", TEST_LIMIT, || {
        let storage = Storage::disk();
        let (db, mut model) = scan_db(&storage, 256 << 10);
        let mut rng = SmallRng::seed_from_u64(130);
        // One at a time, dropped mid-scan.
        for i in 0..300 {
            let ro = ReadOptions {
                fill_cache: i % 3 == 0,
                ..ReadOptions::default()
            };
            let mut it = db.iter(ro).unwrap();
            let start = key(rng.gen_range(0..1250));
            let n = rng.gen_range(0..60);
            it.seek(&start);
            let what = format!("iterator {i}");
            assert_same_entries(
                &what,
                &take(&mut it, n, &what),
                &model_from(&model, &start, n),
            );
            drop(it);
        }
        // Many alive at once, stepped round-robin, dropped in random order.
        for round in 0..6 {
            let mut live: Vec<(tierkv::DbIterator, Vec<Entry>, usize)> = (0..16)
                .map(|i| {
                    let ro = ReadOptions {
                        fill_cache: (i + round) % 2 == 0,
                        ..ReadOptions::default()
                    };
                    let mut it = db.iter(ro).unwrap();
                    let start = key(rng.gen_range(0..1250));
                    it.seek(&start);
                    (it, model_from(&model, &start, usize::MAX), 0)
                })
                .collect();
            while !live.is_empty() {
                for (it, want, pos) in live.iter_mut() {
                    for _ in 0..rng.gen_range(1..20) {
                        match want.get(*pos) {
                            Some((k, v)) => {
                                assert!(it.valid(), "round {round}: iterator ended early");
                                assert_eq!((it.key(), it.value()), (&k[..], &v[..]));
                                it.next();
                                *pos += 1;
                            }
                            None => assert!(!it.valid(), "round {round}: past the model"),
                        }
                    }
                    it.status().unwrap();
                }
                let i = rng.gen_range(0..live.len());
                drop(live.swap_remove(i));
            }
        }
        // Iterators over tables that a compaction then replaces: they keep their view.
        let mut kept: Vec<(tierkv::DbIterator, Vec<Entry>)> = (0..8)
            .map(|i| {
                let ro = ReadOptions {
                    fill_cache: i % 2 == 0,
                    ..ReadOptions::default()
                };
                let mut it = db.iter(ro).unwrap();
                let start = key(i * 150);
                it.seek(&start);
                (it, model_from(&model, &start, usize::MAX))
            })
            .collect();
        for id in (0..1250).step_by(2) {
            let v = value(id, 20);
            db.put(&WriteOptions::default(), &key(id), &v).unwrap();
            model.insert(key(id), v);
        }
        db.compact_range(None, None).unwrap();
        for (i, (it, want)) in kept.iter_mut().enumerate() {
            let what = format!("kept iterator {i}");
            let n = if i % 2 == 0 { usize::MAX } else { 40 };
            let want: Vec<Entry> = want.iter().take(n).cloned().collect();
            assert_same_entries(&what, &take(it, n, &what), &want);
        }
        drop(kept);
        // The database sees the new state; an iterator opened on it outlives it.
        let mut it = db
            .iter(ReadOptions {
                fill_cache: false,
                ..ReadOptions::default()
            })
            .unwrap();
        it.seek_to_first();
        let first = take(&mut it, 10, "outliving");
        assert_same_entries("outliving, first 10", &first, &model_from(&model, b"", 10));
        drop(db);
        // After the close, either the rest of the right entries or an error; never others.
        let mut rest = Vec::new();
        while it.valid() {
            rest.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        let want: Vec<Entry> = model
            .iter()
            .skip(10)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        match it.status() {
            Ok(()) => assert_same_entries("outliving the database", &rest, &want),
            Err(e) => {
                println!("iterator after close ended with {e}");
                assert_same_entries(
                    "outliving the database, up to the error",
                    &rest,
                    &want[..rest.len().min(want.len())],
                );
            }
        }
    });
}
