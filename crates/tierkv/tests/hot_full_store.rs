//! A full hot store keeps taking new keys: a flush makes room first (an MSC demotion), so
//! every object that fits a slot lands in the store and the LSM is written by demotions only;
//! everything reads back, also after reopen and in every WAL mode. Under
//! `hot_admission = "when-free"` a full store turns new keys away to L0 instead.

mod common;

use common::{hot_slab, key6, round_value, MODES};
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{Db, HotAdmission, Options, ReadOptions, WalMode, WriteOptions};

const BUDGET: u64 = 256 << 10;

fn options(fs: &Arc<FaultFs>, mode: WalMode) -> Options {
    options_with(fs, mode, HotAdmission::MakeRoom)
}

fn options_with(fs: &Arc<FaultFs>, mode: WalMode, admission: HotAdmission) -> Options {
    hot_slab(fs, mode, BUDGET)
        .hot_admission(admission)
        .build()
        .expect("valid options")
}

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), k).unwrap()
}

/// Bytes flushes wrote to tables, over all tiers.
fn flushed_table_bytes(db: &Db) -> u64 {
    db.stats().tiers.iter().map(|t| t.flush_bytes_written).sum()
}

#[test]
fn new_keys_land_in_a_full_store_and_only_demotions_write_the_lsm() {
    for mode in MODES {
        let fs = FaultFs::new(21);
        let db = Db::open(options(&fs, mode)).unwrap();
        let w = WriteOptions::default();
        // 4000 keys take about three times the budget; a batch fits one memtable.
        let (keys, batch_keys) = (4000u32, 250u32);
        let mut placed_before = 0;
        for batch in 0..keys / batch_keys {
            for i in batch * batch_keys..(batch + 1) * batch_keys {
                db.put(&w, &key6(i), &round_value(i, 0)).unwrap();
            }
            db.flush().unwrap();
            let hot = db.stats().hot_tier.unwrap();
            assert!(
                hot.placed_hot.0 >= placed_before + batch_keys as u64,
                "{mode:?} batch {batch}: every new key went to the store: {hot:?}"
            );
            placed_before = hot.placed_hot.0;
            assert!(hot.bytes <= BUDGET, "{mode:?}: {hot:?}");
        }
        let hot = db.stats().hot_tier.unwrap();
        assert!(hot.demoted_objects > 0, "{mode:?}: {hot:?}");
        assert_eq!(hot.placed_lsm_inline.0, 0, "{mode:?}: {hot:?}");
        assert_eq!(flushed_table_bytes(&db), 0, "{mode:?}: no flush wrote L0");
        // The last batch's keys were just flushed into a full store: the store answers them.
        let reads_before = hot.reads_hot;
        let last = (keys - batch_keys..keys).collect::<Vec<_>>();
        for &i in &last {
            assert_eq!(get(&db, &key6(i)), Some(round_value(i, 0)), "{mode:?}");
        }
        let hot = db.stats().hot_tier.unwrap();
        assert_eq!(hot.reads_hot - reads_before, last.len() as u64, "{mode:?}");
        // Updates of demoted keys go to the store too. NB: not every one for certain: the
        // compactions the demotions started offer their keys for promotion, and promoted
        // objects are popular, so pinned: when a promotion ran just before this flush, the
        // room it can make may fall short (seen only on a loaded machine: 221 of 250).
        let placed_before = db.stats().hot_tier.unwrap().placed_hot.0;
        for i in 0..batch_keys {
            db.put(&w, &key6(i), &round_value(i, 1)).unwrap();
        }
        db.flush().unwrap();
        let placed = db.stats().hot_tier.unwrap().placed_hot.0 - placed_before;
        assert!(
            placed >= u64::from(batch_keys) / 2,
            "{mode:?}: {placed} of {batch_keys} updates went to the store"
        );
        drop(db);
        let db = Db::open(options(&fs, mode)).unwrap();
        for i in 0..keys {
            let round = u32::from(i < batch_keys);
            assert_eq!(
                get(&db, &key6(i)),
                Some(round_value(i, round)),
                "{mode:?} key {i}"
            );
        }
        let mut it = db.iter(ReadOptions::default()).unwrap();
        it.seek_to_first();
        let mut n = 0;
        while it.valid() {
            n += 1;
            it.next();
        }
        it.status().unwrap();
        assert_eq!(n, keys as usize, "{mode:?}");
    }
}

#[test]
fn deletes_of_keys_outside_the_store_still_shadow_their_lsm_versions() {
    let fs = FaultFs::new(22);
    let db = Db::open(options(&fs, WalMode::Group)).unwrap();
    let w = WriteOptions::default();
    for i in 0..4000u32 {
        db.put(&w, &key6(i), &round_value(i, 0)).unwrap();
        if i % 500 == 499 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    // Some keys were demoted: delete all of them, wherever they live.
    assert!(db.stats().hot_tier.unwrap().demoted_objects > 0);
    for i in 0..4000u32 {
        db.delete(&w, &key6(i)).unwrap();
    }
    db.flush().unwrap();
    for i in (0..4000u32).step_by(7) {
        assert_eq!(get(&db, &key6(i)), None, "key {i}");
    }
    drop(db);
    let db = Db::open(options(&fs, WalMode::Group)).unwrap();
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    assert!(!it.valid(), "every key deleted");
    it.status().unwrap();
}

#[test]
fn writes_are_paced_while_a_demotion_runs_and_all_land() {
    let fs = FaultFs::new(23);
    // A slow pace, so that two writes during one demotion make the second wait.
    let opts = Options {
        compaction: tierkv::CompactionOptions {
            delayed_write_rate: 64 << 10,
            ..options(&fs, WalMode::Group).compaction
        },
        ..options(&fs, WalMode::Group)
    };
    let db = Arc::new(Db::open(opts.clone()).unwrap());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let writers: Vec<_> = (0..2u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let w = WriteOptions::default();
                let mut written = 0u32;
                // Each writer its own keys, until writes were paced (or time is up).
                while std::time::Instant::now() < deadline
                    && (written < 2000 || db.stats().hot_tier.unwrap().paced_writes == 0)
                {
                    let i = t * 1_000_000 + written;
                    db.put(&w, &key6(i), &round_value(i, 0)).unwrap();
                    written += 1;
                }
                written
            })
        })
        .collect();
    let written: Vec<u32> = writers.into_iter().map(|h| h.join().unwrap()).collect();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.paced_writes > 0, "{hot:?}");
    assert!(hot.paced_micros >= 1000 * hot.paced_writes, "{hot:?}");
    assert!(db
        .stats()
        .to_string()
        .contains("writes paced during demotions"));
    drop(db);
    let db = Db::open(opts).unwrap();
    for (t, &n) in written.iter().enumerate() {
        for i in (0..n).step_by(13) {
            let i = t as u32 * 1_000_000 + i;
            assert_eq!(get(&db, &key6(i)), Some(round_value(i, 0)), "key {i}");
        }
    }
}

#[test]
fn when_free_admission_sends_new_keys_of_a_full_store_to_l0() {
    let fs = FaultFs::new(23);
    let open = || Db::open(options_with(&fs, WalMode::Group, HotAdmission::WhenFree)).unwrap();
    let db = open();
    let w = WriteOptions::default();
    let (keys, batch_keys) = (4000u32, 250u32);
    for batch in 0..keys / batch_keys {
        for i in batch * batch_keys..(batch + 1) * batch_keys {
            db.put(&w, &key6(i), &round_value(i, 0)).unwrap();
        }
        db.flush().unwrap();
        let hot = db.stats().hot_tier.unwrap();
        assert!(hot.bytes <= BUDGET, "batch {batch}: {hot:?}");
    }
    let hot = db.stats().hot_tier.unwrap();
    // The store filled up to its low watermark with keys written once, then flushes turned
    // new keys away: they went to L0 as flushed tables, and no demotion ran.
    assert!(hot.placed_hot.0 > 0, "{hot:?}");
    assert!(hot.placed_lsm_inline.0 > 0, "{hot:?}");
    assert_eq!(
        hot.placed_hot.0 + hot.placed_lsm_inline.0,
        keys as u64,
        "{hot:?}"
    );
    assert!(hot.bytes as f64 <= BUDGET as f64 * 0.95, "{hot:?}");
    assert_eq!(hot.demoted_objects, 0, "{hot:?}");
    assert!(flushed_table_bytes(&db) > 0, "flushes wrote L0");
    // Keys read lately (the last batch, turned away) are taken past the low watermark when
    // they are written again, and a demotion makes room below the high watermark.
    let last = keys - batch_keys..keys;
    for i in last.clone() {
        assert_eq!(get(&db, &key6(i)), Some(round_value(i, 0)));
    }
    let placed_before = hot.placed_hot.0;
    for i in last.clone() {
        db.put(&w, &key6(i), &round_value(i, 1)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.placed_hot.0 > placed_before, "{hot:?}");
    assert!(hot.demoted_objects > 0, "{hot:?}");
    drop(db);
    let db = open();
    for i in 0..keys {
        let round = u32::from(last.contains(&i));
        assert_eq!(get(&db, &key6(i)), Some(round_value(i, round)), "key {i}");
    }
}
