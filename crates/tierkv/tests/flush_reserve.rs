//! The flush reserve: once compactions have filled the fast tier's share for them, memtable
//! flushes still land on the fast tier, and no table ever takes the WAL reserve; with
//! `placement = auto` it is lent to replicas while writes are quiet.

mod common;

use common::{key, value, wait_for, TierSetup};
use std::time::Duration;
use tierkv::{Compression, Db, Options, Placement, ReadOptions, TierConfig, WriteOptions};

const CAPACITY: u64 = 3 << 20;
const WAL_RESERVE: u64 = 512 << 10;
const FLUSH_RESERVE: u64 = 768 << 10;

fn opts(root: &std::path::Path) -> Options {
    Options::builder()
        .tiers_in_capped(root, CAPACITY)
        // Every level prefers the fast tier, so only the budgets decide.
        .levels_on_fast(7)
        // Uncompressed, so that the tables are as large as the data.
        .compression(Compression::None)
        .write_buffer_size(64 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(256 << 10)
        .l0_compaction_trigger(8)
        .l0_slowdown_trigger(30)
        .l0_stop_trigger(40)
        .fast_tier_wal_reserve(WAL_RESERVE)
        .fast_tier_flush_reserve(FLUSH_RESERVE)
        .build()
        .unwrap()
}

/// Loads 6 MiB (twice the fast tier) and lets compaction finish, then flushes one memtable.
/// Returns the database and the tier of the new L0 table, and checks the budgets on the way.
/// (Tables flushed during the load may be on either tier: with compaction behind, L0 may grow
/// past what the reserve holds.)
fn load_then_flush(root: &std::path::Path) -> (Db, String) {
    let db = Db::open(opts(root)).unwrap();
    for i in 0..6000 {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    let deep_on_fast: u64 = stats
        .levels
        .iter()
        .filter(|l| l.level > 0)
        .flat_map(|l| l.by_tier.iter())
        .filter(|(tier, _, _)| tier == "fast")
        .map(|(_, _, bytes)| *bytes)
        .sum();
    assert!(
        deep_on_fast <= CAPACITY - WAL_RESERVE - FLUSH_RESERVE,
        "compaction outputs took {deep_on_fast} bytes of the fast tier, into the flush reserve"
    );
    assert!(
        stats.levels[1..]
            .iter()
            .any(|l| l.by_tier.iter().any(|t| t.0 == "capacity")),
        "the load should overflow to the capacity tier"
    );
    for i in 6000..6040 {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
    }
    db.flush().unwrap();
    let stats = db.stats();
    assert!(stats.tiers[0].bytes_used <= CAPACITY - WAL_RESERVE);
    let newest = db
        .live_files()
        .into_iter()
        .filter(|f| f.level == 0)
        .max_by_key(|f| f.number)
        .expect("the flush made an L0 table");
    (db, newest.tier)
}

#[test]
fn flushes_stay_on_the_fast_tier_when_compactions_filled_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, tier) = load_then_flush(dir.path());
    assert_eq!(tier, "fast", "the flush stays on the fast tier");
    for i in (0..6040).step_by(97) {
        assert_eq!(
            db.get(&ReadOptions::default(), &key(i)).unwrap(),
            Some(value(i)),
            "key {i}"
        );
    }
}

/// With `placement = auto`, the reserve is lent to replicas (all but two memtables) once
/// writes have been quiet for a while, reads flowing or not, and held whole again as soon as
/// writes pick up.
#[test]
fn auto_placement_lends_the_reserve_while_writes_are_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let o = Options::builder()
        .tier(TierConfig::new("fast", root.join("fast")).with_capacity(CAPACITY))
        .tier(TierConfig::new("capacity", root.join("capacity")))
        .placement(Placement::Auto)
        .fast_tier_bandwidth(100 << 30)
        .write_buffer_size(64 << 10)
        .target_file_size(64 << 10)
        .fast_tier_wal_reserve(WAL_RESERVE)
        .fast_tier_flush_reserve(FLUSH_RESERVE)
        .build()
        .unwrap();
    let db = Db::open(o).unwrap();
    for i in 0..500 {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
    }
    assert_eq!(db.stats().flush_reserve_lent, 0, "writes just flowed");
    let lent = wait_for(Duration::from_secs(20), || {
        let lent = db.stats().flush_reserve_lent;
        (lent > 0).then_some(lent)
    })
    .expect("an idle pause lends the reserve");
    assert_eq!(
        lent,
        FLUSH_RESERVE - 2 * (64 << 10),
        "two memtables stay held"
    );

    let mut i = 500;
    let reclaimed = wait_for(Duration::from_secs(10), || {
        for _ in 0..200 {
            db.put(&WriteOptions::default(), &key(i), &value(i))
                .unwrap();
            i += 1;
        }
        (db.stats().flush_reserve_lent == 0).then_some(())
    });
    assert!(reclaimed.is_some(), "a burst takes the reserve back");
    for k in 0..i {
        let v = db.get(&ReadOptions::default(), &key(k)).unwrap();
        assert_eq!(v, Some(value(k)), "key {k}");
    }
}
