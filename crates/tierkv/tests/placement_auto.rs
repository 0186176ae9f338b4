//! `placement = auto` end to end: the pointer follows the fast tier's utilisation and space,
//! new tables follow the pointer, migration moves tables when the fast tier fills, and every
//! write stays readable across reopen and crashes.
//!
//! NB: the loops that wait for the controller end as soon as it has acted; their deadlines are
//! generous because on a loaded 2-core machine the four tests, run in parallel, fill the fast
//! tier several times slower than alone (a 25 s deadline failed there without any defect).

mod common;

use common::{crash_now, key, sized, Crash, TierSetup};
use std::time::{Duration, Instant};
use tierkv::env::{CrashPolicy, FaultFs};
use tierkv::{Db, Placement, ReadOptions, WriteOptions};

fn opts(
    root: &std::path::Path,
    fast_capacity: u64,
    levels_on_fast: usize,
) -> tierkv::OptionsBuilder {
    sized(64 << 10, 64 << 10, 256 << 10)
        .tiers_in_capped(root, fast_capacity)
        .placement(Placement::Auto)
        .levels_on_fast(levels_on_fast)
        .l0_compaction_trigger(2)
}

/// Writes `n` keys from `from` with 1 KiB values, synced every 64th.
fn fill(db: &Db, from: u32, n: u32) {
    for i in from..from + n {
        let w = if i % 64 == 0 {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        db.put(&w, &key(i), &[i as u8; 1024]).unwrap();
    }
}

fn check(db: &Db, n: u32) {
    for i in 0..n {
        let v = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(v, Some(vec![i as u8; 1024]), "key {i}");
    }
}

#[test]
fn idle_fast_tier_pulls_levels_onto_it() {
    let dir = tempfile::tempdir().unwrap();
    // A very fast tier: utilisation stays near zero, so the pointer moves down from PL.
    let o = opts(dir.path(), u64::MAX, 0)
        .fast_tier_bandwidth(100 << 30)
        .build()
        .unwrap();
    let db = Db::open(o).unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut written = 0;
    while Instant::now() < deadline {
        fill(&db, written, 500);
        written += 500;
        if !db.stats().placement.starts_with("auto L0") {
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let stats = db.stats();
    // Four quarter-level moves: L0 is covered, and new L0 tables go to the fast tier.
    assert!(stats.placement_history.len() >= 4, "{stats}");
    assert!(
        !stats.placement.starts_with("auto L0"),
        "pointer moved: {}",
        stats.placement
    );
    fill(&db, written, 300);
    written += 300;
    db.flush().unwrap();
    let l0_fast = db
        .live_files()
        .iter()
        .any(|f| f.level == 0 && f.tier == "fast");
    assert!(l0_fast, "{:?}", db.live_files());
    assert!(stats.tier_io[0].ceiling.is_some());
    check(&db, written);
    drop(db);
    let db = Db::open(
        opts(dir.path(), u64::MAX, 0)
            .fast_tier_bandwidth(100 << 30)
            .build()
            .unwrap(),
    )
    .unwrap();
    check(&db, written);
}

#[test]
fn full_fast_tier_migrates_cold_tables_down_and_keeps_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let capacity = 3 << 20;
    // NB: L1 alone may outgrow the fast tier: deeper levels stop short of the room L1 has
    // first claim on, so only upper levels fill the tier past its watermark.
    let build = || {
        opts(dir.path(), capacity, 7)
            .max_bytes_for_level_base(8 << 20)
            .fast_tier_bandwidth(100 << 30)
            .build()
            .unwrap()
    };
    let db = Db::open(build()).unwrap();
    let budget_share = |db: &Db| {
        let s = db.stats();
        (s.tiers[0].bytes_used, s.migrations)
    };
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut written = 0;
    while Instant::now() < deadline {
        fill(&db, written, 1000);
        written += 1000;
        db.wait_for_compactions().unwrap();
        if budget_share(&db).1 > 0 && written >= 6000 {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let stats = db.stats();
    assert!(stats.migrations > 0, "{stats}");
    assert!(
        stats.tiers[0].migration_bytes_written > 0 || stats.tiers[1].migration_bytes_written > 0
    );
    let reserve = db.options().wal_reserve();
    assert!(
        stats.tiers[0].bytes_used <= capacity - reserve.min(capacity),
        "{stats}"
    );
    check(&db, written);
    drop(db);
    let db = Db::open(build()).unwrap();
    check(&db, written);
    for f in db.live_files() {
        assert!(f.path.exists(), "{f:?}");
        assert!(f.path.starts_with(dir.path().join(&f.tier)), "{f:?}");
    }
}

#[test]
fn crashes_during_migration_keep_every_synced_write() {
    for (seed, policy) in [
        (1, CrashPolicy::DropUnsynced),
        (2, CrashPolicy::KeepRandomPages),
        (3, CrashPolicy::TearLastSector),
    ] {
        let fs = FaultFs::new(seed);
        let root = std::path::Path::new("/db");
        let build = || {
            opts(root, 3 << 20, 7)
                .fast_tier_bandwidth(100 << 30)
                .fs(fs.clone())
                .build()
                .unwrap()
        };
        let db = Db::open(build()).unwrap();
        let mut synced = 0;
        let deadline = Instant::now() + Duration::from_secs(8);
        let mut i = 0;
        while Instant::now() < deadline && (db.stats().migrations < 2 || i < 4000) {
            db.put(&WriteOptions::sync(), &key(i), &[i as u8; 1024])
                .unwrap();
            synced = i + 1;
            i += 1;
        }
        // NB: frozen first: the dead database's threads (a migration mid-copy, a MANIFEST
        // roll) must not write into the post-crash world, as no process outlives a power loss.
        crash_now(&fs, db, Crash::Power(policy), "migration crash");
        let db = Db::open(build()).unwrap();
        check(&db, synced);
    }
}

/// Bytes of `level` per tier name, from the live files.
fn level_bytes_on(db: &Db, level: usize, tier: &str) -> u64 {
    db.live_files()
        .iter()
        .filter(|f| f.level == level && f.tier == tier)
        .map(|f| f.size)
        .sum()
}

#[test]
fn upper_levels_take_the_fast_tier_first() {
    let dir = tempfile::tempdir().unwrap();
    // Room for L1 and L2 (256 KiB and 2.5 MiB targets) but not for L3 too.
    let capacity = 4 << 20;
    let o = opts(dir.path(), capacity, 7)
        .fast_tier_bandwidth(100 << 30)
        .build()
        .unwrap();
    let db = Db::open(o).unwrap();
    let written = 12_000;
    for i in 0..written {
        db.put(&WriteOptions::default(), &key(i), &noise(i))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let share = |db: &Db, level| {
        let fast = level_bytes_on(db, level, "fast") as f64;
        fast / (fast + level_bytes_on(db, level, "capacity") as f64)
    };
    // An idle fast tier puts the levels in order (deep tables down, upper ones up), one table
    // per monitor sample.
    let deadline = Instant::now() + Duration::from_secs(90);
    let settled = |db: &Db| level_bytes_on(db, 1, "capacity") == 0 && share(db, 2) > share(db, 3);
    while !settled(&db) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let stats = db.stats();
    assert_eq!(
        level_bytes_on(&db, 1, "capacity"),
        0,
        "L1 not all on the fast tier:\n{stats}"
    );
    assert!(level_bytes_on(&db, 3, "capacity") > 0, "{stats}");
    assert!(
        share(&db, 2) > share(&db, 3),
        "L2 has {:.2} of its bytes on the fast tier, L3 {:.2}:\n{stats}",
        share(&db, 2),
        share(&db, 3)
    );
    let reserve = db.options().wal_reserve();
    assert!(
        stats.tiers[0].bytes_used <= capacity - reserve.min(capacity),
        "{stats}"
    );
    for i in 0..written {
        let v = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(v, Some(noise(i)), "key {i}");
    }
}

/// 1 KiB that does not compress, determined by `i`.
fn noise(i: u32) -> Vec<u8> {
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
