//! With `hot_demote_into_bottom`, a demotion merges objects whose keys have no version above
//! the capacity tier's bottom run straight into that run: no L0 table is written, and everything reads back, also after
//! reopen. Objects whose keys have a version in L0 still go to L0.

mod common;

use common::{hot_slab, key6, round_value, MODES};
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{CapacityLevels, Db, HotAdmission, Options, ReadOptions, WalMode, WriteOptions};

const BUDGET: u64 = 256 << 10;

fn options(fs: &Arc<FaultFs>, mode: WalMode) -> Options {
    // Nothing pinned: every object may be demoted.
    hot_slab(fs, mode, BUDGET)
        .hot_pinned_share(0.0)
        .capacity_levels(CapacityLevels::Fixed(1))
        .hot_demote_into_bottom(true)
        // Flushes write no L0 table while the store is full: the demotions are all L0 sees.
        .hot_admission(HotAdmission::MakeRoom)
        .build()
        .expect("valid options")
}

/// Puts keys `range` at `round`, flushing every 250 keys.
fn load(db: &Db, range: std::ops::Range<u32>, round: u32) {
    let w = WriteOptions::default();
    for i in range {
        db.put(&w, &key6(i), &round_value(i, round)).unwrap();
        if i % 250 == 249 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
}

/// Bytes flushes wrote to tables, over all tiers.
fn flushed_table_bytes(db: &Db) -> u64 {
    db.stats().tiers.iter().map(|t| t.flush_bytes_written).sum()
}

fn l0_files(db: &Db) -> u64 {
    db.stats().levels[0].files
}

#[test]
fn demotions_of_keys_only_in_the_bottom_run_write_no_l0_table() {
    for mode in MODES {
        let fs = FaultFs::new(31);
        let db = Db::open(options(&fs, mode)).unwrap();
        // Fill the store past its budget: the first demotions find no bottom run and go to
        // L0; the manual compaction then leaves every LSM version in the bottom run.
        load(&db, 0..3000, 0);
        db.compact_range(None, None).unwrap();
        assert_eq!(l0_files(&db), 0, "{mode:?}");
        let before = db.stats().hot_tier.unwrap();
        let flushed_before = flushed_table_bytes(&db);
        assert!(before.demoted_objects > 0, "{mode:?}: {before:?}");
        // New keys (no version anywhere) and updates of demoted keys (only in the bottom
        // run) push more objects out; none of their keys has a version above the bottom.
        load(&db, 3000..5000, 0);
        load(&db, 0..500, 1);
        let after = db.stats().hot_tier.unwrap();
        let demoted = after.demoted_objects - before.demoted_objects;
        assert!(demoted > 0, "{mode:?}: {after:?}");
        assert_eq!(
            after.demoted_into_bottom - before.demoted_into_bottom,
            demoted,
            "{mode:?}: every demoted object went straight to the bottom run"
        );
        // L0 holds only what flushes wrote (values a full memtable could not place in the
        // store), none of the demotions' objects.
        let l0_bytes = db.stats().levels[0].bytes;
        let flushed = flushed_table_bytes(&db) - flushed_before;
        assert!(
            l0_bytes <= flushed,
            "{mode:?}: L0 {l0_bytes} B, flushed {flushed} B"
        );
        drop(db);
        let db = Db::open(options(&fs, mode)).unwrap();
        for i in 0..5000 {
            let round = u32::from(i < 500);
            let got = db.get(&ReadOptions::default(), &key6(i)).unwrap();
            assert_eq!(got, Some(round_value(i, round)), "{mode:?} key {i}");
        }
        let mut it = db.iter(ReadOptions::default()).unwrap();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, 5000, "{mode:?}");
    }
}

#[test]
fn objects_whose_keys_have_a_version_in_l0_are_not_shadowed_by_it() {
    let fs = FaultFs::new(32);
    // L0 is not compacted: its tables stay above the bottom run for the whole test.
    let open = || {
        let mut o = options(&fs, WalMode::Group);
        o.compaction.l0_compaction_trigger = 1000;
        o.compaction.l0_slowdown_trigger = 1000;
        o.compaction.l0_stop_trigger = 2000;
        Db::open(o).unwrap()
    };
    let db = open();
    load(&db, 0..3000, 0);
    db.compact_range(None, None).unwrap();
    // Keys 0..300: a value too large for a slot goes to L0 (the store keeps a marker), then
    // a small one to the store. Demoted into the bottom run, the small value would sit below
    // the large one in L0 and read back as the large one.
    let w = WriteOptions::default();
    let large = vec![b'L'; 5000];
    for i in 0..300 {
        db.put(&w, &key6(i), &large).unwrap();
    }
    db.flush().unwrap();
    load(&db, 0..300, 1);
    // New keys push most of the store out.
    load(&db, 3000..9000, 0);
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_into_bottom > 0, "{hot:?}");
    let check = |db: &Db| {
        for i in 0..9000 {
            let round = u32::from(i < 300);
            let got = db.get(&ReadOptions::default(), &key6(i)).unwrap();
            let length = got.as_ref().map(Vec::len);
            assert!(
                got == Some(round_value(i, round)),
                "key {i}: a value of {length:?} bytes"
            );
        }
    };
    check(&db);
    assert!(l0_files(&db) > 0, "the large values' table is still in L0");
    drop(db);
    let db = open();
    check(&db);
}

#[test]
fn without_the_option_demotions_write_l0_tables() {
    let fs = FaultFs::new(33);
    let mut o = options(&fs, WalMode::Group);
    o.hot_tier.demote_into_bottom = false;
    let db = Db::open(o).unwrap();
    load(&db, 0..3000, 0);
    db.compact_range(None, None).unwrap();
    load(&db, 3000..5000, 0);
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_objects > 0, "{hot:?}");
    assert_eq!(hot.demoted_into_bottom, 0, "{hot:?}");
}
