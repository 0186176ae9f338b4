//! End-to-end basics on real directories: put/get/delete, flush, compaction, reopen, iterators.

mod common;

use common::{key6, sized, TierSetup};
use tierkv::{Db, Options, ReadOptions, TierConfig, WriteBatch, WriteOptions};

fn opts(dir: &std::path::Path, levels_on_fast: usize) -> Options {
    sized(64 << 10, 32 << 10, 128 << 10)
        .tiers_in(dir)
        .levels_on_fast(levels_on_fast)
        .l0_compaction_trigger(2)
        .build()
        .unwrap()
}

#[test]
fn put_get_flush_compact_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let w = WriteOptions::default();
    let r = ReadOptions::default();
    {
        let db = Db::open(opts(dir.path(), 1)).unwrap();
        for i in 0..5000 {
            db.put(
                &w,
                &key6(i),
                format!("value-{i}-{}", "x".repeat(50)).as_bytes(),
            )
            .unwrap();
        }
        for i in (0..5000).step_by(3) {
            db.delete(&w, &key6(i)).unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        for i in 0..5000 {
            let got = db.get(&r, &key6(i)).unwrap();
            if i % 3 == 0 {
                assert_eq!(got, None, "key {i}");
            } else {
                assert!(got.unwrap().starts_with(format!("value-{i}-").as_bytes()));
            }
        }
        let stats = db.stats();
        println!("{stats}");
        assert!(stats.levels.iter().skip(1).any(|l| l.files > 0));
        assert!(
            stats.tiers[1].bytes_used > 0,
            "deeper levels go to capacity"
        );
    }
    let db = Db::open(opts(dir.path(), 1)).unwrap();
    assert!(db.get(&r, &key6(1)).unwrap().is_some());
    assert_eq!(db.get(&r, &key6(3)).unwrap(), None);
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let keys: Vec<_> = it.entries().map(|e| e.unwrap().0).collect();
    let want: Vec<_> = (0..5000).filter(|i| i % 3 != 0).map(key6).collect();
    assert_eq!(keys, want);
}

#[test]
fn unflushed_writes_survive_reopen_and_batches_apply() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(opts(dir.path(), 2)).unwrap();
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.put(b"b", b"2");
        b.delete(b"a");
        db.write(&WriteOptions::sync(), b).unwrap();
    }
    let db = Db::open(opts(dir.path(), 2)).unwrap();
    let r = ReadOptions::default();
    assert_eq!(db.get(&r, b"a").unwrap(), None);
    assert_eq!(db.get(&r, b"b").unwrap(), Some(b"2".to_vec()));
}

#[test]
fn reverse_iteration_and_bounds_and_snapshots() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path(), 1)).unwrap();
    let w = WriteOptions::default();
    for i in 0..100 {
        db.put(&w, &key6(i), b"v1").unwrap();
    }
    let snap = db.snapshot();
    for i in 0..100 {
        db.put(&w, &key6(i), b"v2").unwrap();
    }
    db.delete(&w, &key6(50)).unwrap();
    db.flush().unwrap();
    let mut it = db
        .iter(ReadOptions::default().bounds(Some(&key6(10)), Some(&key6(60))))
        .unwrap();
    it.seek_to_last();
    let mut back = Vec::new();
    while it.valid() {
        back.push(it.key().to_vec());
        assert_eq!(it.value(), b"v2");
        it.prev();
    }
    let mut want: Vec<_> = (10..60).filter(|&i| i != 50).map(key6).collect();
    want.reverse();
    assert_eq!(back, want);
    assert_eq!(
        db.get(&ReadOptions::at(&snap), &key6(50)).unwrap(),
        Some(b"v1".to_vec())
    );
    db.compact_range(None, None).unwrap();
    assert_eq!(
        db.get(&ReadOptions::at(&snap), &key6(50)).unwrap(),
        Some(b"v1".to_vec())
    );
    let mut it = db.iter(ReadOptions::at(&snap)).unwrap();
    it.seek(&key6(98));
    assert_eq!(it.key(), key6(98));
    it.next();
    it.prev();
    it.prev();
    assert_eq!(it.key(), key6(97));
    assert_eq!(it.value(), b"v1");
}

#[test]
fn wait_for_compactions_leaves_every_level_under_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let o = opts(dir.path(), 1);
    let db = Db::open(o.clone()).unwrap();
    for i in 0..20_000 {
        db.put(&WriteOptions::default(), &key6(i), &[b'v'; 100])
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let stats = db.stats();
    assert!(
        stats.levels[0].files < o.compaction.l0_compaction_trigger as u64,
        "{stats}"
    );
    for l in stats
        .levels
        .iter()
        .skip(1)
        .take(o.compaction.num_levels - 2)
    {
        assert!(l.bytes <= o.level_target_bytes(l.level), "{stats}");
    }
}

fn parallel_opts(dir: &std::path::Path) -> Options {
    Options::builder()
        .tiers_in(dir)
        .write_buffer_size(256 << 10)
        .wal(tierkv::WalMode::Parallel)
        .wal_group_bytes(512 << 10)
        .build()
        .unwrap()
}

#[test]
fn parallel_wal_concurrent_sync_writes_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = std::sync::Arc::new(Db::open(parallel_opts(dir.path())).unwrap());
        let threads: Vec<_> = (0..4u32)
            .map(|t| {
                let db = std::sync::Arc::clone(&db);
                std::thread::spawn(move || {
                    for i in 0..1500u32 {
                        let k = key6(t * 10_000 + i);
                        db.put(&WriteOptions::sync(), &k, &k).unwrap();
                        assert_eq!(db.get(&ReadOptions::default(), &k).unwrap(), Some(k));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let stats = db.stats();
        assert!(
            stats.wal_runs > 0 && stats.wal_pages >= stats.wal_runs,
            "{stats}"
        );
        assert!(
            stats.flushes > 0,
            "groups were switched and recycled: {stats}"
        );
    }
    let db = Db::open(parallel_opts(dir.path())).unwrap();
    for t in 0..4u32 {
        for i in 0..1500u32 {
            let k = key6(t * 10_000 + i);
            assert_eq!(
                db.get(&ReadOptions::default(), &k).unwrap(),
                Some(k.clone())
            );
        }
    }
    let mut h = Vec::new();
    for i in 0..200u32 {
        h.push(
            db.submit_put(&WriteOptions::sync(), &key6(90_000 + i), b"async")
                .unwrap(),
        );
    }
    for x in h {
        x.wait().unwrap();
    }
    assert_eq!(
        db.submit_get(&ReadOptions::default(), &key6(90_007))
            .unwrap()
            .wait()
            .unwrap(),
        Some(b"async".to_vec())
    );
    let mut txn = db.transaction();
    assert_eq!(txn.get(&key6(90_001)).unwrap(), Some(b"async".to_vec()));
    txn.put(&key6(90_001), b"txn").unwrap();
    db.put(&WriteOptions::default(), &key6(90_001), b"racer")
        .unwrap();
    assert!(matches!(
        txn.commit(&WriteOptions::sync()),
        Err(tierkv::Error::Conflict { .. })
    ));
}

#[test]
fn group_mode_async_writes_complete_and_group() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(opts(dir.path(), 1)).unwrap();
    let handles: Vec<_> = (0..500u32)
        .map(|i| {
            db.submit_put(&WriteOptions::sync(), &key6(i), b"v")
                .unwrap()
        })
        .collect();
    for h in handles {
        h.wait().unwrap();
    }
    for i in 0..500u32 {
        assert_eq!(
            db.get(&ReadOptions::default(), &key6(i)).unwrap(),
            Some(b"v".to_vec())
        );
    }
    let stats = db.stats();
    assert_eq!(stats.writes, 500);
    assert!(
        stats.write_groups < 500,
        "async writes share groups: {stats}"
    );
}

#[test]
fn direct_reads_return_the_same_data() {
    let dir = tempfile::tempdir().unwrap();
    let o = Options::builder()
        .tier(TierConfig::new("fast", dir.path().join("fast")).with_direct_reads(true))
        .tier(TierConfig::new("capacity", dir.path().join("capacity")).with_direct_reads(true))
        .levels_on_fast(4)
        .block_cache_bytes(0)
        .write_buffer_size(64 << 10)
        .build()
        .unwrap();
    let db = Db::open(o).unwrap();
    for i in 0..3000u32 {
        db.put(&WriteOptions::default(), &key6(i), &[i as u8; 300])
            .unwrap();
    }
    db.compact_range(None, None).unwrap();
    for i in (0..3000u32).step_by(7) {
        assert_eq!(
            db.get(&ReadOptions::default(), &key6(i)).unwrap(),
            Some(vec![i as u8; 300])
        );
    }
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut n = 0;
    while it.valid() {
        n += 1;
        it.next();
    }
    assert_eq!(n, 3000);
    assert!(db.verify_checksums().unwrap() > 0);
}
