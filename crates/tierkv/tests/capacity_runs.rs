//! The capacity tier as large sorted runs (`capacity_levels`, `pin_capacity_index`, both set by
//! the `prismdb` preset): compactions keep one sorted run while the hot store holds a tenth of
//! the data, and a point read that misses the hot store costs at most one capacity-tier read,
//! counted through a file system that counts reads per directory.

mod common;

use common::{sized, TierSetup, CAPACITY};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs, RandomAccessFile};
use tierkv::{CapacityLevels, Db, LiveFile, Options, OptionsBuilder, Preset, ReadOptions, Result};
use tierkv::{WriteOptions, MAX_KEY_LEN};

/// A `FaultFs` that counts the positional reads of files under one directory.
struct CountingFs {
    inner: Arc<FaultFs>,
    counted_dir: &'static str,
    reads: Arc<AtomicU64>,
}

struct CountedReader {
    inner: Arc<dyn RandomAccessFile>,
    reads: Arc<AtomicU64>,
}

impl RandomAccessFile for CountedReader {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        self.inner.read_exact_at(offset, buf)
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
}

impl CountingFs {
    fn new(counted_dir: &'static str) -> Arc<CountingFs> {
        Arc::new(CountingFs {
            inner: FaultFs::new(7),
            counted_dir,
            reads: Arc::new(AtomicU64::new(0)),
        })
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    fn wrap(&self, path: &Path, file: Arc<dyn RandomAccessFile>) -> Arc<dyn RandomAccessFile> {
        if !path.starts_with(self.counted_dir) {
            return file;
        }
        Arc::new(CountedReader {
            inner: file,
            reads: Arc::clone(&self.reads),
        })
    }
}

impl Fs for CountingFs {
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(self.wrap(path, self.inner.open_read(path)?))
    }
    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        Ok(self.wrap(path, self.inner.open_read_direct(path)?))
    }

    common::forward_fs!(
        inner =>
        create,
        open_append,
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

const VALUE_LEN: usize = 1000;

fn key(i: u32) -> Vec<u8> {
    let k = format!("key{:08}", i.wrapping_mul(2_654_435_761) % 1_000_000_007);
    assert!(k.len() <= MAX_KEY_LEN);
    k.into_bytes()
}

/// `VALUE_LEN` bytes that do not compress, so table sizes follow the bytes written.
fn value(i: u32) -> Vec<u8> {
    let mut state = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..VALUE_LEN)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// The `prismdb` preset on a small LSM: 64 KiB memtables, 16 KiB tables and a 64 KiB L1
/// target, so a few megabytes fill several levels unless the runs are limited.
fn prismdb(hot_budget: u64) -> OptionsBuilder {
    sized(64 << 10, 16 << 10, 64 << 10)
        .fault_tiers()
        .preset(Preset::PrismDb)
        .hot_budget(hot_budget)
        .l0_compaction_trigger(2)
}

fn load(db: &Db, records: u32) {
    let w = WriteOptions::default();
    for i in 0..records {
        db.put(&w, &key(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
}

/// The levels below L0 holding tables, each with the tiers its tables are on.
fn run_levels(files: &[LiveFile]) -> Vec<usize> {
    let mut levels: Vec<usize> = files.iter().map(|f| f.level).filter(|&l| l > 0).collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}

fn open(opts: Options) -> Db {
    Db::open(opts).expect("open")
}

#[test]
fn the_capacity_tier_keeps_one_sorted_run_while_the_store_holds_a_tenth() {
    // 4 000 records of 1 KiB (about 4 MiB) behind a 512 KiB hot store: a 12% share.
    let fs = FaultFs::new(1);
    let db = open(prismdb(512 << 10).fs(fs.clone()).build().unwrap());
    load(&db, 4_000);
    let files = db.live_files();
    assert_eq!(run_levels(&files), [1], "{files:#?}");
    assert!(files.iter().all(|f| f.tier == "capacity"), "{files:#?}");
    let r = ReadOptions::default();
    for i in (0..4_000).step_by(97) {
        assert_eq!(db.get(&r, &key(i)).unwrap(), Some(value(i)), "key {i}");
    }
    drop(db);

    // Without the limit the same load spreads over several levels: the 64 KiB L1 target
    // would push most of it down.
    let fs = FaultFs::new(1);
    let all = prismdb(512 << 10).capacity_levels(CapacityLevels::All);
    let db = open(all.fs(fs.clone()).build().unwrap());
    load(&db, 4_000);
    assert!(run_levels(&db.live_files()).len() > 1);
}

#[test]
fn a_smaller_share_on_the_fast_tier_gets_a_second_run() {
    // 4 000 records below a 64 KiB hot store: a 1.6% share, more than 9 times the data per
    // fast byte but within 90 times, so two runs; L1 keeps to its target, L2 holds the rest.
    let fs = FaultFs::new(2);
    let db = open(prismdb(64 << 10).fs(fs.clone()).build().unwrap());
    load(&db, 4_000);
    let files = db.live_files();
    assert_eq!(run_levels(&files), [1, 2], "{files:#?}");
    let l2: u64 = files.iter().filter(|f| f.level == 2).map(|f| f.size).sum();
    let l1: u64 = files.iter().filter(|f| f.level == 1).map(|f| f.size).sum();
    assert!(
        l2 > l1,
        "the last run holds most of the data: L1 {l1}, L2 {l2}"
    );
}

/// Reads of capacity-tier files for each point read of `keys`, after a reopen (so every table
/// reader starts closed) with a block cache too small to keep anything.
fn capacity_reads_per_get(pin: bool) -> Vec<u64> {
    let fs = CountingFs::new(CAPACITY);
    let opts = |fs: &Arc<CountingFs>| {
        prismdb(256 << 10)
            .pin_capacity_index(pin)
            .block_cache_bytes(0)
            .fs(fs.clone())
            .build()
            .unwrap()
    };
    let db = open(opts(&fs));
    load(&db, 3_000);
    db.compact_range(None, None).unwrap();
    drop(db);
    let db = open(opts(&fs));
    db.wait_for_compactions().unwrap();
    let r = ReadOptions::default();
    (0..3_000)
        .step_by(13)
        .map(|i| {
            let before = fs.reads();
            assert_eq!(db.get(&r, &key(i)).unwrap(), Some(value(i)), "key {i}");
            fs.reads() - before
        })
        .collect()
}

#[test]
fn a_read_that_misses_the_hot_store_costs_one_capacity_tier_read() {
    let pinned = capacity_reads_per_get(true);
    let most = pinned.iter().max().copied();
    assert_eq!(most, Some(1), "capacity-tier reads per get: {pinned:?}");
    assert!(
        pinned.iter().filter(|&&n| n == 1).count() > pinned.len() / 2,
        "most keys live below the hot store: {pinned:?}"
    );
    // Unpinned, the first read of each table also reads its footer, index and filter.
    let unpinned = capacity_reads_per_get(false);
    assert!(
        unpinned.iter().any(|&n| n > 1),
        "capacity-tier reads per get: {unpinned:?}"
    );
}

#[test]
fn small_flushes_over_one_run_merge_within_l0_and_reads_keep_the_newest_versions() {
    // 4 000 records in the run behind a 512 KiB store; then forty flushes of twenty updates
    // each (about 20 KiB per L0 table): L0 reaches its file ceiling (three quarters of the
    // slowdown trigger, 15) long before a third of the run's bytes.
    let fs = FaultFs::new(3);
    let opts = || prismdb(512 << 10).fs(fs.clone()).build().unwrap();
    let db = open(opts());
    load(&db, 4_000);
    let w = WriteOptions::default();
    let mut newest: Vec<Vec<u8>> = (0..4_000).map(value).collect();
    for round in 0..40u32 {
        for j in 0..20u32 {
            let i = (round * 97 + j * 191) % 4_000;
            let v = value(100_000 + round * 20 + j);
            db.put(&w, &key(i), &v).unwrap();
            newest[i as usize] = v;
        }
        db.flush().unwrap();
    }
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    assert!(
        stats.levels[0].compactions_into > 0,
        "no merge within L0: {:#?}",
        stats.levels
    );
    assert_eq!(run_levels(&db.live_files()), [1]);
    let check = |db: &Db, what: &str| {
        let r = ReadOptions::default();
        for i in 0..4_000u32 {
            let got = db.get(&r, &key(i)).unwrap();
            assert_eq!(got.as_ref(), Some(&newest[i as usize]), "{what}: key {i}");
        }
    };
    check(&db, "open");
    drop(db);
    let db = open(opts());
    check(&db, "reopened");
}
