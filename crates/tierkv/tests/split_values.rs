//! Split values (`values = "split"`): large values in a value log on the capacity tier, the LSM
//! holding pointers. A model test against a `BTreeMap` (snapshots, iterators both ways,
//! batches, flushes, compactions, reopen), the threshold's edge, updates moving a key between
//! paths, deletes of separated values, corruption of a record, the mode fixed at creation, and
//! a crash sweep on `FaultFs` (power loss and process crash) across value-log appends and WAL
//! syncs: no acknowledged write lost, no dangling pointer, no resurrected value.

mod common;

use common::{
    collect_entries, crash_now, tiny, vlog_files, Crash, Model, TierSetup, CAPACITY, CRASHES,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::Path;
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::{
    Db, Durability, Error, Options, OptionsBuilder, ReadOptions, ValueSeparation, ValuesMode,
    WriteBatch, WriteOptions,
};

const THRESHOLD: u64 = 100;

fn split(b: OptionsBuilder) -> OptionsBuilder {
    b.values(ValuesMode::Split).split_threshold(THRESHOLD)
}

/// Split values that flushes, not writes, move to the value log.
fn on_flush(b: OptionsBuilder) -> OptionsBuilder {
    split(b).vlog_separation(ValueSeparation::OnFlush)
}

fn val(i: u64, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i as usize * 131 + j * 7) as u8).collect()
}

fn check_model(db: &Db, model: &Model, what: &str) {
    for (k, v) in model {
        let got = db.get(&ReadOptions::default(), k).unwrap();
        assert_eq!(got.as_ref(), Some(v), "{what}: get {k:?}");
    }
    let mut it = db.iter(ReadOptions::default()).unwrap();
    let fwd = collect_entries(&mut it, false, what);
    let want: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(fwd, want, "{what}: forward scan");
    let mut it = db.iter(ReadOptions::default()).unwrap();
    let rev = collect_entries(&mut it, true, what);
    assert_eq!(rev, want, "{what}: reverse scan");
    let keys: Vec<&[u8]> = model.keys().map(|k| k.as_slice()).collect();
    let got = db.multi_get(&ReadOptions::default(), &keys).unwrap();
    let want_vals: Vec<Option<Vec<u8>>> = model.values().map(|v| Some(v.clone())).collect();
    assert_eq!(got, want_vals, "{what}: multi_get");
}

#[test]
fn model_with_snapshots_batches_and_reopen() {
    model_run(split);
}

/// The model run with values separated at flush: the WAL and the memtable hold them whole.
#[test]
fn model_with_values_separated_at_flush() {
    model_run(on_flush);
}

fn model_run(values: fn(OptionsBuilder) -> OptionsBuilder) {
    let dir = tempfile::tempdir().unwrap();
    let opts = || values(tiny()).tiers_in(dir.path()).build().unwrap();
    let mut rng = SmallRng::seed_from_u64(22);
    let mut model = Model::new();
    let mut db = Db::open(opts()).unwrap();
    let mut snaps = Vec::new();
    for step in 0..3000u64 {
        let k = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
        let len = match rng.gen_range(0..4) {
            0 => rng.gen_range(0..THRESHOLD as usize),
            1 => THRESHOLD as usize,
            _ => rng.gen_range(THRESHOLD as usize..2000),
        };
        match rng.gen_range(0..10) {
            0 => {
                db.delete(&WriteOptions::default(), &k).unwrap();
                model.remove(&k);
            }
            1 => {
                let mut b = WriteBatch::new();
                let k2 = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
                b.put(&k, val(step, len));
                b.delete(&k2);
                b.put(&k2, val(step + 1, 3000 - len));
                db.write(&WriteOptions::default(), b).unwrap();
                model.insert(k.clone(), val(step, len));
                model.insert(k2, val(step + 1, 3000 - len));
            }
            _ => {
                db.put(&WriteOptions::default(), &k, &val(step, len))
                    .unwrap();
                model.insert(k, val(step, len));
            }
        }
        if step % 500 == 250 {
            snaps.push((db.snapshot(), model.clone()));
        }
        // Reads between writes: records appended after a file's reader was opened.
        if step % 7 == 0 {
            let k = format!("k{:04}", rng.gen_range(0..300)).into_bytes();
            let got = db.get(&ReadOptions::default(), &k).unwrap();
            assert_eq!(got.as_ref(), model.get(&k), "step {step}: get {k:?}");
        }
        if step % 1000 == 999 {
            for (s, m) in &snaps {
                let mut it = db.iter(ReadOptions::at(s)).unwrap();
                let got = collect_entries(&mut it, false, "snapshot");
                let want: Vec<_> = m.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
                assert_eq!(got, want, "snapshot at step {step}");
            }
            check_model(&db, &model, &format!("step {step}"));
            if step == 1999 {
                db.compact_range(None, None).unwrap();
                check_model(&db, &model, "after compaction");
            }
            snaps.clear();
            drop(db);
            db = Db::open(opts()).unwrap();
            check_model(&db, &model, &format!("reopen at step {step}"));
        }
    }
    db.put(&WriteOptions::default(), b"small", b"v").unwrap();
    db.put(&WriteOptions::default(), b"large", &val(1, 1000))
        .unwrap();
    db.flush().unwrap();
    let st = db.stats();
    assert!(st.vlog_file_bytes > 0 && st.vlog_reads > 0, "{st:?}");
    assert!(
        st.split_separated_items > 0 && st.split_inline_items > 0,
        "{st:?}"
    );
    db.check_values().unwrap();
    assert!(!vlog_files(&*Options::default().fs, &dir.path().join("capacity")).is_empty());
}

#[test]
fn threshold_edge_path_moves_and_deletes() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || split(tiny()).tiers_in(dir.path()).build().unwrap();
    let db = Db::open(opts()).unwrap();
    let w = WriteOptions::sync();
    let t = THRESHOLD as usize;
    db.put(&w, b"below", &val(1, t - 1)).unwrap();
    db.put(&w, b"at", &val(2, t)).unwrap();
    let st = db.stats();
    assert_eq!(
        (st.split_inline_items, st.split_separated_items),
        (1, 1),
        "a value exactly at the threshold is separated"
    );
    // Large to small and back.
    db.put(&w, b"at", &val(3, 5)).unwrap();
    assert_eq!(db.get(&Default::default(), b"at").unwrap(), Some(val(3, 5)));
    db.put(&w, b"below", &val(4, 5000)).unwrap();
    db.flush().unwrap();
    assert_eq!(
        db.get(&Default::default(), b"below").unwrap(),
        Some(val(4, 5000))
    );
    db.put(&w, b"big", &val(5, 9000)).unwrap();
    db.delete(&w, b"big").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&Default::default(), b"big").unwrap(), None);
    drop(db);
    let db = Db::open(opts()).unwrap();
    assert_eq!(db.get(&Default::default(), b"big").unwrap(), None);
    assert_eq!(db.get(&Default::default(), b"at").unwrap(), Some(val(3, 5)));
    assert_eq!(
        db.get(&Default::default(), b"below").unwrap(),
        Some(val(4, 5000))
    );
}

/// With on-flush separation a `Sync` write syncs only the WAL: the value log is written and
/// synced once per flush, with only the versions the flush keeps (the newest of each key, and
/// the one a snapshot still reads).
#[test]
fn values_separated_at_flush_cost_sync_writes_no_value_log_sync() {
    let dir = tempfile::tempdir().unwrap();
    let opts = on_flush(tiny()).write_buffer_size(1 << 20);
    let db = Db::open(opts.tiers_in(dir.path()).build().unwrap()).unwrap();
    let w = WriteOptions::sync();
    for i in 0..40u64 {
        db.put(&w, format!("k{}", i % 10).as_bytes(), &val(i, 500))
            .unwrap();
    }
    db.put(&w, b"small", b"x").unwrap();
    let st = db.stats();
    assert_eq!(
        (
            st.vlog_syncs,
            st.vlog_bytes_written,
            st.split_separated_items
        ),
        (0, 0, 0),
        "writes leave the value log alone: {st:?}"
    );
    assert_eq!(st.split_inline_items, 1, "{st:?}");
    assert_eq!(
        db.get(&Default::default(), b"k3").unwrap(),
        Some(val(33, 500))
    );
    db.flush().unwrap();
    let st = db.stats();
    assert_eq!(st.vlog_syncs, 1, "one sync for the flush: {st:?}");
    assert_eq!(
        st.split_separated_items, 10,
        "the newest of each key: {st:?}"
    );
    assert_eq!(st.vlog_bytes_written, 10 * (12 + 2 + 500));
    // A snapshot keeps the version it reads: both versions of `snap` are separated.
    db.put(&w, b"snap", &val(1, 500)).unwrap();
    let snap = db.snapshot();
    db.put(&w, b"snap", &val(2, 500)).unwrap();
    db.flush().unwrap();
    let st = db.stats();
    assert_eq!((st.vlog_syncs, st.split_separated_items), (2, 12), "{st:?}");
    assert_eq!(st.vlog_garbage_items, 0, "no separated version was dropped");
    assert_eq!(
        db.get(&ReadOptions::at(&snap), b"snap").unwrap(),
        Some(val(1, 500))
    );
    assert_eq!(
        db.get(&Default::default(), b"snap").unwrap(),
        Some(val(2, 500))
    );
    for i in 30..40u64 {
        let got = db.get(&Default::default(), format!("k{}", i % 10).as_bytes());
        assert_eq!(got.unwrap(), Some(val(i, 500)));
    }
    assert_eq!(db.check_values().unwrap(), (12, 11));
    drop(snap);
    db.put(&w, b"snap", &val(3, 500)).unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.stats().vlog_garbage_items, 2, "snap's older versions");
    assert_eq!(
        db.get(&Default::default(), b"snap").unwrap(),
        Some(val(3, 500))
    );
}

/// A memtable of pointers is switched once its writes fill a value-log file, whatever its
/// own size, so the garbage overwrites make is counted while the writes go on, not when the
/// memtable finally fills with pointers.
#[test]
fn a_value_log_file_of_writes_switches_the_memtable() {
    let dir = tempfile::tempdir().unwrap();
    let opts = split(tiny())
        .write_buffer_size(64 << 20)
        .vlog_file_size(64 << 10)
        .tiers_in(dir.path())
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    for i in 0..2000u64 {
        db.put(
            &WriteOptions::default(),
            format!("k{:02}", i % 50).as_bytes(),
            &val(i, 1000),
        )
        .unwrap();
    }
    let flushed = common::wait_for(std::time::Duration::from_secs(30), || {
        let st = db.stats();
        (st.flushes >= 20 && st.vlog_garbage_items > 1000).then_some(st)
    });
    let st = db.stats();
    assert!(
        flushed.is_some(),
        "about 2 MB of values in 64 KiB files, 64 MiB memtables: {} flushes, {} garbage items",
        st.flushes,
        st.vlog_garbage_items
    );
    assert!(st.memtable_bytes < 1 << 20, "{st:?}");
    for i in 1950..2000u64 {
        let got = db.get(&Default::default(), format!("k{:02}", i % 50).as_bytes());
        assert_eq!(got.unwrap(), Some(val(i, 1000)));
    }
}

/// A database stopped by a failed flush refuses to collect its value log: a failed MANIFEST
/// write may still have named the flush's tables, whose records the installed version, which
/// collection checks liveness against, does not know.
#[test]
fn a_stopped_database_refuses_to_collect_its_value_log() {
    let fs = FaultFs::new(3);
    let opts = on_flush(tiny())
        .fs(fs.clone() as Arc<dyn Fs>)
        .fault_tiers()
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    for i in 0..20u64 {
        db.put(
            &WriteOptions::default(),
            format!("k{i}").as_bytes(),
            &val(i, 500),
        )
        .unwrap();
    }
    fs.fail_after(0, tierkv::env::FaultKind::Io, true);
    assert!(db.flush().is_err(), "the flush meets the fault");
    let err = db.collect_value_log().unwrap_err();
    assert!(matches!(err, Error::Stopped { .. }), "{err:?}");
}

/// The separation may change between opens: both store the same tagged values.
#[test]
fn separation_changes_between_opens() {
    let dir = tempfile::tempdir().unwrap();
    let opts = |values: fn(OptionsBuilder) -> OptionsBuilder| {
        values(tiny()).tiers_in(dir.path()).build().unwrap()
    };
    let mut model = Model::new();
    for (round, values) in [split, on_flush, split, on_flush].into_iter().enumerate() {
        let db = Db::open(opts(values)).unwrap();
        check_model(&db, &model, &format!("open {round}"));
        for i in 0..60u64 {
            let k = format!("k{:02}", (i * 7 + round as u64) % 40).into_bytes();
            let v = val(i + 100 * round as u64, [10, 300, 2000][i as usize % 3]);
            db.put(&WriteOptions::default(), &k, &v).unwrap();
            model.insert(k, v);
        }
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        check_model(&db, &model, &format!("round {round}"));
        db.check_values().unwrap();
    }
    let db = Db::open(opts(split)).unwrap();
    db.compact_range(None, None).unwrap();
    check_model(&db, &model, "compacted");
}

#[test]
fn values_mode_is_fixed_at_creation() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(tiny().tiers_in(dir.path()).build().unwrap()).unwrap();
    db.put(&WriteOptions::sync(), b"k", b"v").unwrap();
    drop(db);
    let err = Db::open(split(tiny()).tiers_in(dir.path()).build().unwrap()).unwrap_err();
    assert!(err.to_string().contains("values"), "{err}");
    let dir = tempfile::tempdir().unwrap();
    drop(Db::open(split(tiny()).tiers_in(dir.path()).build().unwrap()).unwrap());
    let err = Db::open(tiny().tiers_in(dir.path()).build().unwrap()).unwrap_err();
    assert!(err.to_string().contains("split"), "{err}");
    // Every WAL mode takes split values (routing happens before the WAL).
    let dir = tempfile::tempdir().unwrap();
    let opts = split(tiny()).wal(tierkv::WalMode::Parallel);
    let db = Db::open(opts.tiers_in(dir.path()).build().unwrap()).unwrap();
    db.put(&WriteOptions::sync(), b"big", &val(1, 500)).unwrap();
    assert_eq!(
        db.get(&Default::default(), b"big").unwrap(),
        Some(val(1, 500))
    );
}

#[test]
fn corrupt_record_names_file_and_offset() {
    let fs = FaultFs::new(1);
    let opts = || {
        split(tiny())
            .fs(fs.clone() as Arc<dyn Fs>)
            .fault_tiers()
            .build()
            .unwrap()
    };
    let db = Db::open(opts()).unwrap();
    db.put(&WriteOptions::sync(), b"a", &val(1, 500)).unwrap();
    db.put(&WriteOptions::sync(), b"b", &val(2, 500)).unwrap();
    let files = vlog_files(&*fs, Path::new(CAPACITY));
    assert_eq!(files.len(), 1);
    let path = Path::new(CAPACITY).join(&files[0]);
    let rec = 12 + 1 + 500;
    // Damage b's value: its record starts after a's.
    fs.flip_bit(&path, rec as u64 + 12 + 1 + 40, 3);
    assert_eq!(
        db.get(&Default::default(), b"a").unwrap(),
        Some(val(1, 500))
    );
    match db.get(&Default::default(), b"b").unwrap_err() {
        Error::Corruption { file, offset, what } => {
            assert_eq!((file, offset), (path.clone(), rec as u64), "{what}");
        }
        e => panic!("expected Corruption, got {e}"),
    }
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    while it.valid() {
        it.next();
    }
    assert!(it.status().unwrap_err().is_corruption());
    assert!(db.check_values().unwrap_err().is_corruption());
}

/// One workload step: the model state after it, and how durable its write was asked to be.
struct Step {
    model: Model,
    durability: Durability,
}

/// Runs a seeded workload until a write fails; returns every attempted state.
fn workload(db: &Db, seed: u64, steps: usize) -> (Vec<Step>, usize) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut history = vec![Step {
        model: model.clone(),
        durability: Durability::Sync,
    }];
    let mut acked = 0;
    for step in 0..steps {
        let k = format!("k{:03}", rng.gen_range(0..40)).into_bytes();
        let durability = match rng.gen_range(0..3) {
            0 => Durability::Buffered,
            1 => Durability::Flush,
            _ => Durability::Sync,
        };
        let w = WriteOptions { durability };
        let mut next = model.clone();
        let r = if rng.gen_range(0..6) == 0 {
            next.remove(&k);
            db.delete(&w, &k)
        } else {
            let len = rng.gen_range(20..400);
            next.insert(k.clone(), val(step as u64, len));
            db.put(&w, &k, &val(step as u64, len))
        };
        history.push(Step {
            model: next.clone(),
            durability,
        });
        if r.is_err() {
            break;
        }
        acked = history.len() - 1;
        model = next;
        if step % 60 == 59 && db.flush().is_err() {
            break;
        }
    }
    (history, acked)
}

#[test]
fn crash_sweep_keeps_acknowledged_writes_and_pointers() {
    let points = common::env_u64("TIERKV_CRASH_POINTS", 24);
    crash_sweep(|| split(tiny()), points);
}

/// The sweep with values separated at flush: crashes across a flush's value-log appends, its
/// sync and the MANIFEST edit naming its tables leave no table pointing at a lost record.
#[test]
fn crash_sweep_with_values_separated_at_flush() {
    let points = common::env_u64("TIERKV_CRASH_POINTS", 24);
    crash_sweep(|| on_flush(tiny()), points);
}

/// The sweep in every WAL mode (fewer points each): writes that are not `Sync` leave their
/// value-log records unsynced whatever the mode, and recovery, common to all modes, drops a
/// replayed write whose records a power loss took.
#[test]
fn crash_sweep_in_every_wal_mode() {
    common::each_mode("split values crash sweep", |mode| {
        let points = common::env_u64("TIERKV_CRASH_POINTS", 24) / 4;
        crash_sweep(|| split(common::small(mode, 64 << 10)), points);
    });
}

/// The same with values separated at flush: whatever the mode, the WAL holds them whole and
/// the flush's value-log sync comes before its tables are named.
#[test]
fn crash_sweep_with_values_separated_at_flush_in_every_wal_mode() {
    common::each_mode("split values separated at flush crash sweep", |mode| {
        let points = common::env_u64("TIERKV_CRASH_POINTS", 24) / 4;
        crash_sweep(|| on_flush(common::small(mode, 64 << 10)), points);
    });
}

/// Crashes a seeded workload on the options `base` builds at `points` places, each with every kind of
/// crash, and checks what recovery finds.
fn crash_sweep(base: impl Fn() -> OptionsBuilder, points: u64) {
    const STEPS: usize = 300;
    let opts = |fs: &Arc<FaultFs>| {
        base()
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
        drop(db);
        fs.op_count() - start
    };
    for i in 0..points {
        let at = 20 + i * total / points;
        for (c, &crash) in CRASHES.iter().enumerate() {
            let what = format!("crash {crash:?} after {at} calls");
            let fs = FaultFs::new(at * 4 + c as u64);
            let db = match Db::open(opts(&fs)) {
                Ok(db) => db,
                Err(e) => panic!("{what}: open: {e}"),
            };
            fs.fail_after(at, tierkv::env::FaultKind::Io, false);
            let (history, acked) = workload(&db, 5, STEPS);
            crash_now(&fs, db, crash, &what);
            let db = Db::open(opts(&fs)).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            // Every value resolves: no dangling pointer.
            let got = common::scan(&db).unwrap_or_else(|e| panic!("{what}: scan: {e}"));
            db.check_values()
                .unwrap_or_else(|e| panic!("{what}: check: {e}"));
            // The state is one between the last acknowledged write the crash must keep (synced
            // for a power loss, handed to the OS for a process crash) and the last attempt.
            let kept = match crash {
                Crash::Process => Durability::Flush,
                Crash::Power(_) => Durability::Sync,
            };
            let floor = (0..=acked)
                .rev()
                .find(|&i| history[i].durability >= kept)
                .unwrap_or(0);
            let ok = (floor..history.len()).any(|i| history[i].model == got);
            assert!(
                ok,
                "{what}: recovered {} keys matching no state in {floor}..{} (acked {acked})",
                got.len(),
                history.len()
            );
            drop(db);
        }
    }
}

#[test]
fn overwritten_and_deleted_separated_values_are_counted_as_garbage() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(split(tiny()).tiers_in(dir.path()).build().unwrap()).unwrap();
    for i in 0..50 {
        db.put(&WriteOptions::default(), b"hot", &val(i, 1000))
            .unwrap();
    }
    db.put(&WriteOptions::default(), b"gone", &val(99, 1000))
        .unwrap();
    db.delete(&WriteOptions::default(), b"gone").unwrap();
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let st = db.stats();
    // 49 overwritten versions of `hot` and the deleted `gone`; the live `hot` is not garbage.
    assert_eq!(st.vlog_garbage_items, 50, "{st:?}");
    assert_eq!(
        st.vlog_garbage_bytes,
        49 * (12 + 3 + 1000) + (12 + 4 + 1000),
        "{st:?}"
    );
    assert!(st.to_string().contains("garbage dropped since open"));
    assert_eq!(
        db.get(&Default::default(), b"hot").unwrap(),
        Some(val(49, 1000))
    );
}

#[test]
fn async_writes_and_reads_route_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(split(tiny()).tiers_in(dir.path()).build().unwrap()).unwrap();
    let w = WriteOptions::default();
    db.submit_put(&w, b"big", &val(1, 3000))
        .unwrap()
        .wait()
        .unwrap();
    db.submit_put(&w, b"small", &val(2, 10))
        .unwrap()
        .wait()
        .unwrap();
    let got = db.submit_get(&Default::default(), b"big").unwrap().wait();
    assert_eq!(got.unwrap(), Some(val(1, 3000)));
    let mut txn = db.transaction();
    txn.put(b"txn", &val(3, 2000)).unwrap();
    txn.submit_commit(&w).unwrap().wait().unwrap();
    db.flush().unwrap();
    let got = db.submit_get(&Default::default(), b"txn").unwrap().wait();
    assert_eq!(got.unwrap(), Some(val(3, 2000)));
    assert_eq!(
        db.get(&Default::default(), b"small").unwrap(),
        Some(val(2, 10))
    );
    assert_eq!(db.check_values().unwrap(), (3, 2));
}

/// The value-log syncs counted so far.
fn vlog_syncs(db: &Db) -> u64 {
    db.stats().vlog_syncs
}

#[test]
fn writes_that_are_not_sync_leave_the_value_log_unsynced() {
    let dir = tempfile::tempdir().unwrap();
    let opts = split(tiny()).write_buffer_size(1 << 20);
    let db = Db::open(opts.tiers_in(dir.path()).build().unwrap()).unwrap();
    let with = |durability| WriteOptions { durability };
    for i in 0..60u64 {
        let durability = if i % 2 == 0 {
            Durability::Buffered
        } else {
            Durability::Flush
        };
        db.put(&with(durability), &i.to_be_bytes(), &val(i, 500))
            .unwrap();
    }
    assert_eq!(db.stats().split_separated_items, 60);
    assert_eq!(vlog_syncs(&db), 0, "no write asked for durability");
    // One `Sync` write, even of an inline value, makes every earlier record durable.
    db.put(&with(Durability::Sync), b"small", b"x").unwrap();
    assert_eq!(vlog_syncs(&db), 1);
    db.put(&with(Durability::Sync), b"small", b"y").unwrap();
    assert_eq!(vlog_syncs(&db), 1, "nothing appended since the last sync");
    db.put(&with(Durability::Sync), b"big", &val(99, 500))
        .unwrap();
    assert_eq!(vlog_syncs(&db), 2);
    // Sealing a memtable syncs what its writes appended, once.
    db.put(&with(Durability::Buffered), b"big2", &val(98, 500))
        .unwrap();
    db.flush().unwrap();
    assert_eq!(vlog_syncs(&db), 3);
    for i in 0..60u64 {
        let got = db.get(&ReadOptions::default(), &i.to_be_bytes()).unwrap();
        assert_eq!(got, Some(val(i, 500)));
    }
    assert_eq!(db.check_values().unwrap(), (63, 62));
}

#[test]
fn concurrent_sync_writers_share_value_log_syncs() {
    const WRITERS: u64 = 4;
    const EACH: u64 = 40;
    let dir = tempfile::tempdir().unwrap();
    let opts = split(tiny()).write_buffer_size(4 << 20);
    let db = Db::open(opts.tiers_in(dir.path()).build().unwrap()).unwrap();
    // Every fourth write is `Sync`; each makes the records of all writers durable.
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let db = &db;
            s.spawn(move || {
                for i in 0..EACH {
                    let durability = if i % 4 == 3 {
                        Durability::Sync
                    } else {
                        Durability::Flush
                    };
                    let key = format!("t{t}-{i:03}");
                    db.put(&WriteOptions { durability }, key.as_bytes(), &val(i, 300))
                        .unwrap();
                }
            });
        }
    });
    let mixed = vlog_syncs(&db);
    let sync_writes = WRITERS * EACH / 4;
    assert!(
        (1..=sync_writes).contains(&mixed),
        "{mixed} value-log syncs for {sync_writes} Sync writes of {} writes",
        WRITERS * EACH
    );
    // Only `Sync` writes: a writer whose records a running or finished sync covers issues none.
    std::thread::scope(|s| {
        for t in 0..WRITERS {
            let db = &db;
            s.spawn(move || {
                for i in 0..EACH {
                    let key = format!("s{t}-{i:03}");
                    db.put(&WriteOptions::sync(), key.as_bytes(), &val(i, 300))
                        .unwrap();
                }
            });
        }
    });
    let synced = vlog_syncs(&db) - mixed;
    assert!((1..=WRITERS * EACH).contains(&synced), "{synced} syncs");
    for t in 0..WRITERS {
        for i in 0..EACH {
            for prefix in ["t", "s"] {
                let key = format!("{prefix}{t}-{i:03}");
                let got = db.get(&ReadOptions::default(), key.as_bytes()).unwrap();
                assert_eq!(got, Some(val(i, 300)), "{key}");
            }
        }
    }
    assert_eq!(db.check_values().unwrap().1, 2 * WRITERS * EACH);
}
