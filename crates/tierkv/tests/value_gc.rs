//! Garbage collection of the value log (`values = "split"`): an overwrite-heavy run then
//! collection keeps every live value readable and the value log within 1.5x the live bytes;
//! a snapshot and an iterator taken before a collection still read their values, and the
//! collected file goes once they are released; background collection racing overwrites and
//! deletes; a crash sweep on `FaultFs` across collection rounds, in every WAL mode: no
//! acknowledged write lost, no dangling pointer, no resurrected value; split values and
//! collection in every WAL mode.

mod common;

use common::{
    collect_entries, crash_now, split_collected_on_call, split_small_files, tiny, versioned_value,
    vlog_files, Crash, Model, TierSetup, CAPACITY, CRASHES, SPLIT_THRESHOLD, VLOG_FILE_SIZE,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::env::{FaultFs, Fs};
use tierkv::{Db, Durability, ReadOptions, ValueSeparation, WalMode, WriteOptions};

/// Record bytes besides key and value (crc32c, key length, value length).
const RECORD_HEADER: u64 = 12;

/// Record bytes the model's separated values take.
fn live_record_bytes(model: &Model) -> u64 {
    model
        .iter()
        .filter(|(_, v)| v.len() as u64 >= SPLIT_THRESHOLD)
        .map(|(k, v)| RECORD_HEADER + k.len() as u64 + v.len() as u64)
        .sum()
}

fn check_model(db: &Db, model: &Model, what: &str) {
    for (k, v) in model {
        let got = db.get(&ReadOptions::default(), k).unwrap();
        assert_eq!(got.as_ref(), Some(v), "{what}: get {k:?}");
    }
    let mut it = db.iter(ReadOptions::default()).unwrap();
    let got = collect_entries(&mut it, false, what);
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want, "{what}: scan");
    db.check_values()
        .unwrap_or_else(|e| panic!("{what}: check: {e}"));
}

#[test]
fn overwrite_heavy_run_then_gc_keeps_live_values_within_one_and_a_half_times() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        split_small_files(tiny())
            .tiers_in(dir.path())
            .build()
            .unwrap()
    };
    let db = Db::open(opts()).unwrap();
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(3);
    let w = WriteOptions::default();
    for step in 0..1500u64 {
        let k = format!("k{:03}", rng.gen_range(0..80)).into_bytes();
        if rng.gen_range(0..10) == 0 {
            db.delete(&w, &k).unwrap();
            model.remove(&k);
        } else {
            // Mostly separated values, some inline, so keys move between the paths.
            let len = if rng.gen_range(0..8) == 0 { 40 } else { 1000 };
            let v = versioned_value(&k, step, len);
            db.put(&w, &k, &v).unwrap();
            model.insert(k, v);
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let before = db.stats();
    // NB: background rounds may already have collected some files.
    assert!(
        before.vlog_bytes_written > 10 * VLOG_FILE_SIZE,
        "{before:?}"
    );
    assert_eq!(db.collect_value_log().unwrap(), 0, "no reader holds a file");
    let st = db.stats();
    check_model(&db, &model, "after gc");
    let live = live_record_bytes(&model);
    assert!(
        st.vlog_gc_runs > 0 && st.vlog_gc_files_deleted > 0,
        "{st:?}"
    );
    assert!(st.vlog_gc_bytes_rewritten > 0, "{st:?}");
    assert!(
        st.vlog_file_bytes * 2 <= live * 3,
        "value log {} bytes for {live} live bytes (before gc {})",
        st.vlog_file_bytes,
        before.vlog_file_bytes
    );
    assert!(st.vlog_live_bytes >= live, "{st:?}");
    assert!(st.to_string().contains("value-log gc:"), "{st}");
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_model(&db, &model, "after reopen");
}

#[test]
fn snapshot_and_iterator_from_before_gc_read_their_values_until_released() {
    let dir = tempfile::tempdir().unwrap();
    // One background worker: no background collection (a round needs a second worker), so
    // the first file is collected by the call below, after the snapshot was taken.
    let opts = split_small_files(tiny())
        .background_threads(1)
        .tiers_in(dir.path());
    let db = Db::open(opts.build().unwrap()).unwrap();
    let fs = db.options().fs.clone();
    let cap = dir.path().join("capacity");
    let w = WriteOptions::default();
    // The first file: 40 keys, then every other one overwritten (into later files).
    let mut model = Model::new();
    for i in 0..40u64 {
        let k = format!("k{i:02}").into_bytes();
        let v = versioned_value(&k, 0, 1500);
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
    }
    let first = vlog_files(fs.as_ref(), &cap)[0].clone();
    for i in (0..40u64).step_by(2) {
        let k = format!("k{i:02}").into_bytes();
        let v = versioned_value(&k, 1, 1500);
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let snap = db.snapshot();
    let mut it = db.iter(ReadOptions::default()).unwrap();
    // Overwrite some of the first file's live keys after the snapshot, then collect.
    let old = model.clone();
    for i in (1..40u64).step_by(4) {
        let k = format!("k{i:02}").into_bytes();
        let v = versioned_value(&k, 2, 1500);
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
    }
    let waiting = db.collect_value_log().unwrap();
    assert!(waiting > 0, "the snapshot keeps the collected files");
    assert!(vlog_files(fs.as_ref(), &cap).contains(&first));
    for (k, v) in &old {
        let got = db.get(&ReadOptions::at(&snap), k).unwrap();
        assert_eq!(got.as_ref(), Some(v), "snapshot read of {k:?}");
    }
    let got = collect_entries(&mut it, false, "iterator from before gc");
    let want: Vec<_> = old.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(got, want);
    check_model(&db, &model, "latest during gc");
    drop(it);
    drop(snap);
    assert_eq!(db.collect_value_log().unwrap(), 0);
    assert!(!vlog_files(fs.as_ref(), &cap).contains(&first));
    assert!(db.stats().vlog_gc_files_deleted > 0);
    check_model(&db, &model, "after the old readers left");
}

#[test]
fn background_gc_races_overwrites_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open(
            split_small_files(tiny())
                .tiers_in(dir.path())
                .build()
                .unwrap(),
        )
        .unwrap(),
    );
    let stop = Arc::new(AtomicBool::new(false));
    // A reader checks that every value it gets is one written to its key.
    let reader = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rng = SmallRng::seed_from_u64(9);
            while !stop.load(Ordering::Relaxed) {
                let k = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
                if let Some(v) = db.get(&ReadOptions::default(), &k).unwrap() {
                    assert!(v.starts_with(&k), "{k:?} read another key's value");
                }
            }
        })
    };
    let mut model = Model::new();
    let mut rng = SmallRng::seed_from_u64(4);
    let w = WriteOptions::default();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut step = 0u64;
    while step < 3000 || !step.is_multiple_of(100) || db.stats().vlog_gc_files_deleted < 3 {
        assert!(
            Instant::now() < deadline,
            "no background gc: {:?}",
            db.stats()
        );
        let k = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
        if rng.gen_range(0..12) == 0 {
            db.delete(&w, &k).unwrap();
            model.remove(&k);
        } else {
            let v = versioned_value(&k, step, rng.gen_range(50..2000));
            db.put(&w, &k, &v).unwrap();
            model.insert(k, v);
        }
        step += 1;
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    check_model(&db, &model, "after background gc");
}

/// Closing the database while background collection rewrites pointers: the collection's
/// writes either finish or fail with `Closed`, and the close never waits for a logger that
/// has already stopped (a parallel-WAL close once hung on such a write).
#[test]
fn closing_while_background_gc_writes_finishes_in_every_wal_mode() {
    for mode in common::MODES {
        for round in 0..6u64 {
            let dir = tempfile::tempdir().unwrap();
            let opts = || {
                split_small_files(tiny())
                    .wal(mode)
                    .tiers_in(dir.path())
                    .build()
                    .unwrap()
            };
            let db = Db::open(opts()).unwrap();
            let mut rng = SmallRng::seed_from_u64(round);
            let mut model = Model::new();
            for step in 0..400 {
                let k = format!("k{:03}", rng.gen_range(0..40)).into_bytes();
                let v = versioned_value(&k, step, rng.gen_range(200..1500));
                db.put(&WriteOptions::default(), &k, &v).unwrap();
                model.insert(k, v);
            }
            common::drop_within(db, &format!("{mode:?} round {round}: close during gc"));
            let db = Db::open(opts()).unwrap();
            check_model(
                &db,
                &model,
                &format!("{mode:?} round {round}: after reopen"),
            );
        }
    }
}

/// Runs a seeded overwrite-heavy workload with a flush, a full compaction and a collection
/// every 50 steps, until a call fails; returns every attempted state (collection changes
/// none) and the last acknowledged one.
fn workload(db: &Db, seed: u64, steps: usize) -> (Vec<(Model, Durability)>, usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut history = vec![(model.clone(), Durability::Sync)];
    let mut acked = 0;
    for step in 0..steps {
        let k = format!("k{:02}", rng.gen_range(0..24)).into_bytes();
        let durability = match rng.gen_range(0..3) {
            0 => Durability::Buffered,
            1 => Durability::Flush,
            _ => Durability::Sync,
        };
        let w = WriteOptions { durability };
        let mut next = model.clone();
        let r = if rng.gen_range(0..8) == 0 {
            next.remove(&k);
            db.delete(&w, &k)
        } else {
            let v = versioned_value(&k, step as u64, rng.gen_range(60..1500));
            next.insert(k.clone(), v.clone());
            db.put(&w, &k, &v)
        };
        history.push((next.clone(), durability));
        if r.is_err() {
            break;
        }
        acked = history.len() - 1;
        model = next;
        if step % 50 == 49 {
            let settled = db
                .flush()
                .and_then(|()| db.compact_range(None, None))
                .and_then(|()| db.collect_value_log());
            if settled.is_err() {
                break;
            }
        }
    }
    (history, acked)
}

#[test]
fn crash_sweep_across_gc_rewrites_keeps_acknowledged_writes_and_pointers() {
    for mode in common::MODES {
        crash_sweep(mode);
    }
}

/// The crash sweep on the WAL `mode`.
fn crash_sweep(mode: WalMode) {
    const STEPS: usize = 400;
    let opts = |fs: &Arc<FaultFs>| {
        split_small_files(tiny())
            .wal(mode)
            .fs(fs.clone() as Arc<dyn Fs>)
            .fault_tiers()
            .build()
            .unwrap()
    };
    let total = {
        let fs = FaultFs::new(7);
        let start = fs.op_count();
        let db = Db::open(opts(&fs)).unwrap();
        let (_, acked) = workload(&db, 5, STEPS);
        assert_eq!(acked, STEPS);
        let st = db.stats();
        assert!(
            st.vlog_gc_files_deleted > 2,
            "{mode:?}: the sweep crosses gc: {st:?}"
        );
        drop(db);
        fs.op_count() - start
    };
    let points = common::env_u64("TIERKV_CRASH_POINTS", 16);
    for i in 0..points {
        let at = 20 + i * total / points;
        for (c, &crash) in CRASHES.iter().enumerate() {
            let what = format!("{mode:?}: crash {crash:?} after {at} calls");
            let fs = FaultFs::new(at * 4 + c as u64);
            let db = Db::open(opts(&fs)).unwrap_or_else(|e| panic!("{what}: open: {e}"));
            fs.fail_after(at, tierkv::env::FaultKind::Io, false);
            let (history, acked) = workload(&db, 5, STEPS);
            crash_now(&fs, db, crash, &what);
            let db = Db::open(opts(&fs)).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            // Every value resolves: no dangling pointer.
            let got = common::scan(&db).unwrap_or_else(|e| panic!("{what}: scan: {e}"));
            db.check_values()
                .unwrap_or_else(|e| panic!("{what}: check: {e}"));
            let kept = match crash {
                Crash::Process => Durability::Flush,
                Crash::Power(_) => Durability::Sync,
            };
            let floor = (0..=acked)
                .rev()
                .find(|&i| history[i].1 >= kept)
                .unwrap_or(0);
            let ok = (floor..history.len()).any(|i| history[i].0 == got);
            assert!(
                ok,
                "{what}: recovered {} keys matching no state in {floor}..{} (acked {acked})",
                got.len(),
                history.len()
            );
            // Collection after the crash keeps every value readable.
            db.compact_range(None, None).unwrap();
            db.collect_value_log().unwrap();
            assert_eq!(common::scan(&db).unwrap(), got, "{what}: after gc");
            assert!(vlog_files(fs.as_ref(), Path::new(CAPACITY)).len() < 40);
            drop(db);
        }
    }
}

/// Split values and their collection in every WAL mode: routing happens before a write
/// reaches the WAL and a rewrite is a checked write, which every mode runs.
#[test]
fn split_values_and_gc_in_every_wal_mode() {
    gc_in_every_wal_mode(ValueSeparation::OnWrite);
}

/// The same with values separated at flush: the collector's rewrites hold pointers, which the
/// flushes leave as they are.
#[test]
fn values_separated_at_flush_and_gc_in_every_wal_mode() {
    gc_in_every_wal_mode(ValueSeparation::OnFlush);
}

fn gc_in_every_wal_mode(separation: ValueSeparation) {
    common::each_mode("split values", move |mode| {
        let dir = tempfile::tempdir().unwrap();
        let opts = || {
            split_small_files(common::small(mode, 64 << 10))
                .vlog_separation(separation)
                .tiers_in(dir.path())
                .build()
                .unwrap()
        };
        let db = Db::open(opts()).unwrap();
        let mut model = Model::new();
        let mut rng = SmallRng::seed_from_u64(11);
        for step in 0..600u64 {
            let k = format!("k{:02}", rng.gen_range(0..30)).into_bytes();
            let w = WriteOptions {
                durability: [Durability::Buffered, Durability::Sync][step as usize % 2],
            };
            match rng.gen_range(0..10) {
                0 => {
                    db.delete(&w, &k).unwrap();
                    model.remove(&k);
                }
                1 => {
                    let v = versioned_value(&k, step, 900);
                    db.submit_put(&w, &k, &v).unwrap().wait().unwrap();
                    model.insert(k, v);
                }
                2 => {
                    let v = versioned_value(&k, step, 700);
                    // NB: a collection's rewrite of `k` is a new version of it, so the commit
                    // may meet a conflict (docs/value-log.md): retried, as a user would.
                    loop {
                        let mut txn = db.transaction();
                        txn.put(&k, &v).unwrap();
                        match txn.commit(&w) {
                            Err(tierkv::Error::Conflict { .. }) => continue,
                            other => break other.unwrap(),
                        }
                    }
                    model.insert(k, v);
                }
                _ => {
                    let v = versioned_value(&k, step, rng.gen_range(20..1200));
                    db.put(&w, &k, &v).unwrap();
                    model.insert(k, v);
                }
            }
        }
        let snap = db.snapshot();
        let at_snap = model.clone();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        db.collect_value_log().unwrap();
        for (k, v) in &at_snap {
            let got = db.get(&ReadOptions::at(&snap), k).unwrap();
            assert_eq!(got.as_ref(), Some(v), "{mode:?}: snapshot read of {k:?}");
        }
        drop(snap);
        db.collect_value_log().unwrap();
        assert!(db.stats().vlog_gc_files_deleted > 0, "{mode:?}");
        check_model(&db, &model, &format!("{mode:?}"));
        drop(db);
        let db = Db::open(opts()).unwrap();
        check_model(&db, &model, &format!("{mode:?} after reopen"));
    });
}

/// Garbage counts and collected files survive a restart (the `VLOGGC` state file): a
/// reopened database finds the garbage it counted before, collects from it without another
/// compaction, and deletes at open a file collected while a snapshot still needed it.
#[test]
fn garbage_counts_and_collected_files_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || split_collected_on_call(dir.path());
    let mut model = Model::new();
    /// Writes every `every`th key again and makes its old value garbage.
    fn write_all(db: &Db, model: &mut Model, version: u64, every: usize) {
        for i in (0..150u64).step_by(every) {
            let k = format!("k{i:03}").into_bytes();
            let v = versioned_value(&k, version, 1000);
            db.put(&WriteOptions::default(), &k, &v).unwrap();
            model.insert(k, v);
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
    }
    let db = Db::open(opts()).unwrap();
    write_all(&db, &mut model, 1, 1);
    write_all(&db, &mut model, 2, 1);
    let before = db.stats();
    assert!(before.vlog_garbage_bytes > 2 * VLOG_FILE_SIZE, "{before:?}");
    assert_eq!(before.vlog_gc_runs, 0);
    drop(db);

    let db = Db::open(opts()).unwrap();
    let after = db.stats();
    assert_eq!(after.vlog_file_bytes, before.vlog_file_bytes);
    assert_eq!(
        after.vlog_live_bytes, before.vlog_live_bytes,
        "garbage counted before the restart is known after it"
    );
    assert_eq!(db.collect_value_log().unwrap(), 0);
    let collected = db.stats();
    assert!(collected.vlog_gc_files_deleted > 0, "{collected:?}");
    check_model(&db, &model, "collected after a restart");

    // A file collected while a snapshot reads it stays retired until the next open.
    // Half of each file's records stay live: their rewrites come after the snapshot.
    write_all(&db, &mut model, 3, 2);
    let snap = db.snapshot();
    assert!(
        db.collect_value_log().unwrap() > 0,
        "the snapshot holds files"
    );
    let fs = db.options().fs.clone();
    let cap = dir.path().join("capacity");
    let retired_files = vlog_files(fs.as_ref(), &cap);
    drop(snap);
    drop(db);
    let db = Db::open(opts()).unwrap();
    assert!(db.stats().vlog_gc_files_deleted > 0, "deleted at open");
    let left = vlog_files(fs.as_ref(), &cap);
    assert!(
        left.len() < retired_files.len(),
        "{left:?} of {retired_files:?}"
    );
    check_model(
        &db,
        &model,
        "after the collected files were deleted at open",
    );
}
