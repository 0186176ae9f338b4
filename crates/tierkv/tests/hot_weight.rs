//! The hot store with SplitKV's hotness migration (`hot_eviction = "weight"`, the `splitkv`
//! preset): small values land in the store on the fast tier, large ones in the value log;
//! past 80% of the budget the objects read least move to the LSM while the ones read often
//! stay, and every value reads back, also after a reopen (when the weights start equal).

mod common;

use common::{
    answered_by_store, get_named, large_value, names, put_named, small_value, tiny, TierSetup,
};
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{Db, HotEviction, HotTier, Options, Preset, WriteOptions};

/// The `splitkv` preset on tiny tables, with a 64 KiB hot store.
fn options(fs: &Arc<FaultFs>) -> Options {
    tiny()
        .fault_tiers()
        .preset(Preset::SplitKv)
        .hot_budget(64 << 10)
        .fs(fs.clone())
        .build()
        .expect("valid options")
}

fn assert_all_readable(db: &Db, hot: &[String], cold: &[String], big: &[String], what: &str) {
    for k in hot.iter().chain(cold) {
        assert_eq!(get_named(db, k), Some(small_value(k)), "{what}: {k}");
    }
    for k in big {
        assert_eq!(get_named(db, k), Some(large_value(k)), "{what}: {k}");
    }
}

#[test]
fn the_splitkv_preset_puts_small_writes_in_the_hot_store_and_large_ones_in_the_value_log() {
    let fs = FaultFs::new(11);
    let o = options(&fs);
    assert_eq!(o.hot_tier.mode, HotTier::Slab);
    assert_eq!(o.hot_tier.eviction, HotEviction::Weight);
    let db = Db::open(o).unwrap();
    let small: Vec<String> = names("hot", 40);
    let big: Vec<String> = names("big", 4);
    put_named(&db, &small, small_value);
    put_named(&db, &big, large_value);
    let s = db.stats();
    let h = s.hot_tier.clone().expect("hot store on");
    assert_eq!(h.eviction, "weight");
    assert_eq!(h.objects, 40, "{h:?}");
    assert_eq!(h.placed_hot, (40, 40 * 200), "{h:?}");
    assert_eq!(h.placed_value_log, (4, 4 * (8 << 10)), "{h:?}");
    assert_eq!(h.placed_lsm_inline, (0, 0), "{h:?}");
    assert_eq!(s.split_separated_items, 4);
    // Large values' pointers went to L0, on the capacity tier (levels_on_fast = 0).
    assert_eq!(s.levels[0].files, 1);
    let text = s.to_string();
    assert!(text.contains("hot store eviction weight"), "{text}");
    assert!(text.contains("40 values in the store"), "{text}");
    assert_all_readable(&db, &small, &[], &big, "before any migration");
}

#[test]
fn cold_objects_migrate_past_80_percent_and_hot_ones_stay() {
    let fs = FaultFs::new(12);
    let db = Db::open(options(&fs)).unwrap();
    let hot: Vec<String> = names("hot", 100);
    let cold: Vec<String> = names("cold", 150);
    let big: Vec<String> = names("big", 3);
    put_named(&db, &hot, small_value);
    put_named(&db, &big, large_value);
    // The hot keys are read often: weight 1 (their write) + 20 reads.
    for _ in 0..20 {
        assert_eq!(answered_by_store(&db, &hot), 100);
    }
    // 100 + 100 objects of 300-byte slots pass 80% of 64 KiB: the cold ones (weight 1)
    // are below the average and migrate; the 50 written after them then fit.
    put_named(&db, &cold[..50], small_value);
    put_named(&db, &cold[50..100], small_value);
    put_named(&db, &cold[100..], small_value);
    let h = db.stats().hot_tier.expect("hot store on");
    assert!(h.migration_rounds >= 1, "{h:?}");
    assert!(h.migrated_objects >= 100, "{h:?}");
    assert!(h.migrated_bytes >= 100 * 200, "{h:?}");
    assert_eq!(h.demoted_objects, 0, "the weight policy, not MSC: {h:?}");
    assert!(h.bytes as f64 <= 0.8 * (64 << 10) as f64, "{h:?}");
    assert_eq!(answered_by_store(&db, &hot), 100, "hot keys stayed");
    assert_eq!(
        answered_by_store(&db, &cold[..100]),
        0,
        "cold keys migrated"
    );
    assert_all_readable(&db, &hot, &cold, &big, "after migration");
    // A migrated key written again comes back to the store.
    db.put(&WriteOptions::default(), cold[0].as_bytes(), b"again")
        .unwrap();
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    assert_eq!(get_named(&db, &cold[0]), Some(b"again".to_vec()));
    assert_eq!(answered_by_store(&db, &cold[..1]), 1);
    db.put(
        &WriteOptions::default(),
        cold[0].as_bytes(),
        &small_value(&cold[0]),
    )
    .unwrap();
    db.compact_range(None, None).unwrap();
    assert_all_readable(&db, &hot, &cold, &big, "after compaction");
    drop(db);

    // After a reopen every weight is 0: the store is rebuilt from the slabs, each value
    // reads back, and the next round (all weights equal) migrates in key order.
    let db = Db::open(options(&fs)).unwrap();
    assert_all_readable(&db, &hot, &cold, &big, "after reopen");
    let fresh = names("new", 60);
    put_named(&db, &fresh, small_value);
    let h = db.stats().hot_tier.expect("hot store on");
    assert!(h.bytes as f64 <= 0.8 * (64 << 10) as f64, "{h:?}");
    assert_all_readable(&db, &hot, &cold, &big, "after a round on equal weights");
    assert_all_readable(&db, &fresh, &[], &[], "the new keys");
}
