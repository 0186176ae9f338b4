//! The LSM bookkeeping under a model: tombstones at the bottom under snapshots and reopen,
//! merges within L0 into a single sorted run, automatic placement (migrations, replicas) under
//! a model, chunked compactions that fail for want of room and are resumed, and crashes.

mod common;

use common::{key6, sized, Model, TierSetup, CAPACITY, FAST};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{
    CapacityLevels, Db, DbIterator, Options, OptionsBuilder, Placement, ReadOptions, Snapshot,
    WriteBatch, WriteOptions,
};

fn val(i: u32, round: u32, len: usize) -> Vec<u8> {
    let mut x = (u64::from(i) << 32 | u64::from(round)).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = format!("{i}/{round}/").into_bytes();
    while out.len() < len {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len.max(8));
    out
}

fn scan_all(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_first();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().expect("iterator status");
    out
}

fn scan_rev(it: &mut DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut out = Vec::new();
    it.seek_to_last();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    it.status().expect("iterator status");
    out.reverse();
    out
}

fn as_vec(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn first_diff(got: &[(Vec<u8>, Vec<u8>)], want: &[(Vec<u8>, Vec<u8>)]) -> String {
    let show = |e: Option<&(Vec<u8>, Vec<u8>)>| {
        e.map(|(k, v)| {
            format!(
                "{}={}",
                String::from_utf8_lossy(k),
                String::from_utf8_lossy(&v[..v.len().min(12)])
            )
        })
        .unwrap_or_else(|| "<end>".into())
    };
    for i in 0..got.len().max(want.len()) {
        if got.get(i) != want.get(i) {
            return format!(
                "at #{i}: got {} want {} (lens {} vs {})",
                show(got.get(i)),
                show(want.get(i)),
                got.len(),
                want.len()
            );
        }
    }
    "same".into()
}

fn check_db(db: &Db, model: &Model, opts: &ReadOptions, what: &str) {
    let got = scan_all(&mut db.iter(opts.clone()).unwrap());
    let want = as_vec(model);
    assert!(
        got == want,
        "{what}: forward scan {}",
        first_diff(&got, &want)
    );
    let got = scan_rev(&mut db.iter(opts.clone()).unwrap());
    assert!(
        got == want,
        "{what}: reverse scan {}",
        first_diff(&got, &want)
    );
}

fn check_gets(db: &Db, model: &Model, keys: u32, opts: &ReadOptions, what: &str) {
    for i in 0..keys {
        let k = key6(i);
        let got = db.get(opts, &k).unwrap();
        assert_eq!(
            got.as_ref(),
            model.get(&k),
            "{what}: get {}",
            String::from_utf8_lossy(&k)
        );
    }
}

fn levels_summary(db: &Db) -> String {
    let mut by_level: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    for f in db.live_files() {
        by_level.entry(f.level).or_default().push(format!(
            "#{}@{}[{}..{}]",
            f.number,
            f.tier,
            String::from_utf8_lossy(&f.smallest),
            String::from_utf8_lossy(&f.largest)
        ));
    }
    format!("{by_level:?}")
}

/// Levels 1 and deeper are sorted and disjoint; every live file exists.
fn check_shape(db: &Db, fs: Option<&FaultFs>, what: &str) {
    let files = db.live_files();
    let mut by_level: BTreeMap<usize, Vec<&tierkv::LiveFile>> = BTreeMap::new();
    for f in &files {
        by_level.entry(f.level).or_default().push(f);
        if let Some(fs) = fs {
            // NB: `live_files` holds no version, so a compaction may replace and delete a
            // table right after the call; only a table still listed after it was found
            // missing is lost.
            if !fs.exists(&f.path) {
                let still = db.live_files().iter().any(|g| g.number == f.number);
                assert!(
                    !still,
                    "{what}: live table {} (level {}) missing\n{}",
                    f.path.display(),
                    f.level,
                    levels_summary(db)
                );
            }
        }
    }
    for (level, mut fl) in by_level {
        if level == 0 {
            continue;
        }
        fl.sort_by(|a, b| a.smallest.cmp(&b.smallest));
        for w in fl.windows(2) {
            assert!(
                w[0].largest < w[1].smallest,
                "{what}: level {level} tables {} and {} overlap\n{}",
                w[0].number,
                w[1].number,
                levels_summary(db)
            );
        }
    }
    let mut numbers: Vec<u64> = files.iter().map(|f| f.number).collect();
    numbers.sort_unstable();
    numbers.dedup();
    assert_eq!(
        numbers.len(),
        files.len(),
        "{what}: a file number listed twice"
    );
}

// ---------------------------------------------------------------------------------------------
// Deterministic scenarios
// ---------------------------------------------------------------------------------------------

fn two_tier(fs: &Arc<FaultFs>) -> OptionsBuilder {
    sized(64 << 10, 16 << 10, 64 << 10)
        .fault_tiers()
        .levels_on_fast(1)
        .l0_compaction_trigger(2)
        .fs(fs.clone() as Arc<dyn Fs>)
}

/// A key whose old version sits in the deepest level (capacity tier) is deleted while a
/// snapshot holds the old version; the tombstone is compacted down with the snapshot held,
/// then again after it is released, then the database is reopened (cleanly and after a power
/// loss): the key stays deleted throughout, and the snapshot saw the old value until released.
#[test]
fn deleted_key_stays_deleted_after_snapshot_release_compactions_and_reopen() {
    let fs = FaultFs::new(7);
    let opts = || two_tier(&fs).build().unwrap();
    let db = Db::open(opts()).unwrap();
    let w = WriteOptions::sync();
    let mut model = Model::new();
    // Spread data over several levels.
    for round in 0..3u32 {
        for i in 0..1500u32 {
            let v = val(i, round, 120);
            db.put(&w, &key6(i), &v).unwrap();
            model.insert(key6(i), v);
        }
        db.compact_range(None, None).unwrap();
    }
    let deep = db.live_files().iter().map(|f| f.level).max().unwrap();
    assert!(
        deep >= 2,
        "data reached L{deep} only: {}",
        levels_summary(&db)
    );
    let snap = db.snapshot();
    let before = model.clone();
    for i in (0..1500u32).step_by(3) {
        db.delete(&w, &key6(i)).unwrap();
        model.remove(&key6(i));
    }
    // Also overwrite some, so shadowed versions meet the snapshot.
    for i in (1..1500u32).step_by(7) {
        let v = val(i, 99, 120);
        db.put(&w, &key6(i), &v).unwrap();
        model.insert(key6(i), v);
    }
    db.compact_range(None, None).unwrap();
    check_db(
        &db,
        &before,
        &ReadOptions::at(&snap),
        "snapshot after compaction",
    );
    check_db(
        &db,
        &model,
        &ReadOptions::default(),
        "after compaction with snapshot",
    );
    drop(snap);
    // Compact again (now the tombstones may drop), part by part.
    db.compact_range(Some(&key6(0)), Some(&key6(700))).unwrap();
    db.compact_range(Some(&key6(700)), None).unwrap();
    db.compact_range(None, None).unwrap();
    check_db(
        &db,
        &model,
        &ReadOptions::default(),
        "after release and compaction",
    );
    check_gets(&db, &model, 1500, &ReadOptions::default(), "after release");
    check_shape(&db, Some(&fs), "after release");
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "after clean reopen");
    check_gets(
        &db,
        &model,
        1500,
        &ReadOptions::default(),
        "after clean reopen",
    );
    db.compact_range(None, None).unwrap();
    fs.crash(CrashPolicy::DropUnsynced);
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "after power loss");
    check_gets(
        &db,
        &model,
        1500,
        &ReadOptions::default(),
        "after power loss",
    );
    check_shape(&db, Some(&fs), "after power loss");
    db.verify_checksums().unwrap();
}

// ---------------------------------------------------------------------------------------------
// Randomized model test over several shapes
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Shape {
    /// L1 is the single sorted run; small L0 tables merge within L0.
    OneRun,
    /// Two levels on a small fast tier, many tables per level: chunked compactions, overflow.
    ChunkyOverflow,
    /// Automatic placement with migrations and replicas on a small fast tier.
    AutoReplicas,
}

const KEYS: u32 = 1200;

fn shape_options(shape: Shape, fs: &Arc<FaultFs>) -> Options {
    let b = match shape {
        Shape::OneRun => sized(64 << 10, 16 << 10, 64 << 10)
            .fault_tiers()
            .levels_on_fast(0)
            .capacity_levels(CapacityLevels::Fixed(1))
            .l0_compaction_trigger(2)
            .l0_slowdown_trigger(8)
            .l0_stop_trigger(16),
        Shape::ChunkyOverflow => sized(64 << 10, 16 << 10, 64 << 10)
            .fault_tiers_capped(1 << 20)
            .levels_on_fast(2)
            .l0_compaction_trigger(2),
        Shape::AutoReplicas => sized(64 << 10, 16 << 10, 64 << 10)
            .fault_tiers_capped(2 << 20)
            .placement(Placement::Auto)
            .fast_tier_bandwidth(100 << 30)
            .fast_tier_wal_reserve(256 << 10)
            .fast_tier_flush_reserve(256 << 10)
            .block_cache_bytes(0)
            .l0_compaction_trigger(2),
    };
    b.background_threads(3)
        .fs(fs.clone() as Arc<dyn Fs>)
        .build()
        .expect("valid options")
}

struct Held {
    snap: Snapshot,
    model: Model,
}

fn run_model(shape: Shape, seed: u64, ops: usize) {
    let fs = FaultFs::new(seed);
    let mut db = Some(Db::open(shape_options(shape, &fs)).unwrap());
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut model = Model::new();
    let mut snaps: Vec<Held> = Vec::new();
    let mut iters: Vec<(DbIterator, Model)> = Vec::new();
    let mut trail: Vec<String> = Vec::new();
    let mut round = 0u32;
    for op in 0..ops {
        let d = db.as_ref().unwrap();
        let what = format!("{shape:?} seed {seed} op {op}");
        let r = rng.gen_range(0..1000);
        let w = WriteOptions::default();
        if r < 500 {
            // A batch of puts and deletes over a random key range.
            let mut b = WriteBatch::new();
            let start = rng.gen_range(0..KEYS);
            let n = rng.gen_range(1..40);
            round += 1;
            for j in 0..n {
                let i = (start + j * rng.gen_range(1..5)) % KEYS;
                if rng.gen_bool(0.3) {
                    b.delete(key6(i));
                    model.remove(&key6(i));
                } else {
                    let v = val(i, round, rng.gen_range(20..400));
                    b.put(key6(i), &v);
                    model.insert(key6(i), v);
                }
            }
            d.write(&w, b).unwrap();
        } else if r < 600 {
            // Delete a run of keys.
            let start = rng.gen_range(0..KEYS);
            for i in start..(start + 50).min(KEYS) {
                d.delete(&w, &key6(i)).unwrap();
                model.remove(&key6(i));
            }
            trail.push(format!("{op}: delete run {start}"));
        } else if r < 650 {
            if snaps.len() < 4 {
                snaps.push(Held {
                    snap: d.snapshot(),
                    model: model.clone(),
                });
                trail.push(format!("{op}: snapshot"));
            }
        } else if r < 700 {
            if !snaps.is_empty() {
                let i = rng.gen_range(0..snaps.len());
                let h = snaps.swap_remove(i);
                check_db(
                    d,
                    &h.model,
                    &ReadOptions::at(&h.snap),
                    &format!("{what}: snapshot"),
                );
                trail.push(format!("{op}: release snapshot"));
            }
        } else if r < 730 {
            if iters.len() < 2 {
                iters.push((d.iter(ReadOptions::default()).unwrap(), model.clone()));
            }
        } else if r < 760 {
            if let Some((mut it, m)) = iters.pop() {
                let got = scan_all(&mut it);
                let want = as_vec(&m);
                assert!(
                    got == want,
                    "{what}: old iterator {}\n{}",
                    first_diff(&got, &want),
                    trail.join("\n")
                );
            }
        } else if r < 800 {
            let a = rng.gen_range(0..KEYS);
            let b = rng.gen_range(a..KEYS);
            d.compact_range(Some(&key6(a)), Some(&key6(b))).unwrap();
            trail.push(format!("{op}: compact {a}..{b}"));
        } else if r < 820 {
            d.compact_range(None, None).unwrap();
            trail.push(format!("{op}: compact all"));
        } else if r < 840 {
            d.flush().unwrap();
        } else if r < 870 {
            // A quiet moment: background work (migrations, replicas) runs.
            std::thread::sleep(Duration::from_millis(rng.gen_range(20..150)));
        } else if r < 930 {
            for _ in 0..20 {
                let i = rng.gen_range(0..KEYS);
                let got = d.get(&ReadOptions::default(), &key6(i)).unwrap();
                assert_eq!(
                    got.as_ref(),
                    model.get(&key6(i)),
                    "{what}: get {i}\n{}",
                    trail.join("\n")
                );
            }
        } else if r < 960 {
            check_db(d, &model, &ReadOptions::default(), &what);
            check_shape(d, Some(&fs), &what);
        } else if r < 980 {
            // Clean reopen: snapshots and iterators go.
            snaps.clear();
            iters.clear();
            drop(db.take());
            db = Some(Db::open(shape_options(shape, &fs)).unwrap());
            trail.push(format!("{op}: reopen"));
            check_db(
                db.as_ref().unwrap(),
                &model,
                &ReadOptions::default(),
                &format!("{what}: after reopen\n{}", trail.join("\n")),
            );
        } else {
            // Process crash after a flush (so everything written is durable).
            d.flush().unwrap();
            snaps.clear();
            iters.clear();
            fs.process_crash();
            drop(db.take());
            db = Some(Db::open(shape_options(shape, &fs)).unwrap());
            trail.push(format!("{op}: crash+reopen"));
            check_db(
                db.as_ref().unwrap(),
                &model,
                &ReadOptions::default(),
                &format!("{what}: after crash\n{}", trail.join("\n")),
            );
        }
        if trail.len() > 40 {
            trail.drain(..20);
        }
    }
    let d = db.as_ref().unwrap();
    for h in &snaps {
        check_db(d, &h.model, &ReadOptions::at(&h.snap), "final snapshot");
    }
    snaps.clear();
    d.wait_for_compactions().unwrap();
    check_db(d, &model, &ReadOptions::default(), "final");
    check_gets(d, &model, KEYS, &ReadOptions::default(), "final");
    check_shape(d, Some(&fs), "final");
    d.verify_checksums().unwrap();
    let s = d.stats();
    eprintln!(
        "{shape:?} seed {seed}: compactions {} trivial {} chunks {} migrations {} replicas made {} dropped {}\n{}",
        s.compactions,
        s.trivial_moves,
        s.compaction_chunks,
        s.migrations,
        s.replicas_made,
        s.replicas_dropped,
        levels_summary(d)
    );
    drop(db);
    let db = Db::open(shape_options(shape, &fs)).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "final reopen");
}

#[test]
fn model_one_run_with_merges_within_l0() {
    for seed in 0..2 {
        run_model(Shape::OneRun, 100 + seed, 700);
    }
}

#[test]
fn model_chunked_compactions_on_an_overflowing_fast_tier() {
    for seed in 0..2 {
        run_model(Shape::ChunkyOverflow, 200 + seed, 700);
    }
}

#[test]
fn model_auto_placement_with_migrations_and_replicas() {
    for seed in 0..2 {
        run_model(Shape::AutoReplicas, 300 + seed, 700);
    }
}

// ---------------------------------------------------------------------------------------------
// Replicas whose tables change underneath
// ---------------------------------------------------------------------------------------------

/// With replicas of capacity-tier tables serving reads, keys of those tables are overwritten
/// and deleted and the tables compacted away (and migrated): every read follows the model,
/// never a stale replica, also with a snapshot taken before the changes and after a reopen.
#[test]
fn replicas_never_serve_a_replaced_table() {
    let fs = FaultFs::new(11);
    let opts = || {
        Options::builder()
            .two_tiers(FAST, CAPACITY, 3 << 20)
            .placement(Placement::Auto)
            .fast_tier_bandwidth(100 << 30)
            .block_cache_bytes(0)
            .write_buffer_size(64 << 10)
            .target_file_size(64 << 10)
            .max_bytes_for_level_base(256 << 10)
            .fast_tier_wal_reserve(512 << 10)
            .fast_tier_flush_reserve(768 << 10)
            .fs(fs.clone() as Arc<dyn Fs>)
            .build()
            .unwrap()
    };
    let db = Db::open(opts()).unwrap();
    let mut model = Model::new();
    const N: u32 = 6000;
    for i in 0..N {
        let v = val(i, 0, 1000);
        db.put(&WriteOptions::default(), &key6(i), &v).unwrap();
        model.insert(key6(i), v);
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    let replicated = common::wait_for(Duration::from_secs(30), || {
        let r: Vec<_> = db
            .live_files()
            .into_iter()
            .filter(|f| f.replica.is_some())
            .collect();
        (r.len() >= 3).then_some(r)
    })
    .unwrap_or_else(|| panic!("no replicas\n{}", db.stats()));
    let snap = db.snapshot();
    let at_snap = model.clone();
    // Change every replicated table's keys: overwrite half, delete a third.
    for (round, f) in (1..).zip(replicated.iter()) {
        let lo: u32 = std::str::from_utf8(&f.smallest[3..])
            .unwrap()
            .parse()
            .unwrap();
        let hi: u32 = std::str::from_utf8(&f.largest[3..])
            .unwrap()
            .parse()
            .unwrap();
        for i in lo..=hi {
            if i % 3 == 0 {
                db.delete(&WriteOptions::default(), &key6(i)).unwrap();
                model.remove(&key6(i));
            } else if i % 2 == 0 {
                let v = val(i, round, 300);
                db.put(&WriteOptions::default(), &key6(i), &v).unwrap();
                model.insert(key6(i), v);
            }
        }
        db.compact_range(Some(&key6(lo)), Some(&key6(hi))).unwrap();
        check_gets(
            &db,
            &model,
            N,
            &ReadOptions::default(),
            "after a replicated table changed",
        );
    }
    check_db(&db, &model, &ReadOptions::default(), "after the changes");
    check_db(
        &db,
        &at_snap,
        &ReadOptions::at(&snap),
        "snapshot before the changes",
    );
    drop(snap);
    // Quiet again: new replicas of the new tables.
    std::thread::sleep(Duration::from_millis(1500));
    check_gets(
        &db,
        &model,
        N,
        &ReadOptions::default(),
        "after new replicas",
    );
    check_shape(&db, Some(&fs), "with replicas");
    db.verify_checksums().unwrap();
    let s = db.stats();
    eprintln!(
        "replicas made {} dropped {} migrations {}",
        s.replicas_made, s.replicas_dropped, s.migrations
    );
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "after reopen");
}

// ---------------------------------------------------------------------------------------------
// A chunked compaction that runs out of room, resumed
// ---------------------------------------------------------------------------------------------

/// The capacity tier's device fills up in the middle of chunked compactions (some chunks
/// installed, the source inputs still listed); after room comes back `resume` finishes the
/// work: no key is lost or resurrected, levels stay disjoint, and reopening (cleanly, and
/// after a power loss) gives the same contents.
#[test]
fn chunked_compaction_out_of_room_then_resumed_keeps_every_key() {
    let fs = FaultFs::new(23);
    let opts = || {
        sized(64 << 10, 16 << 10, 128 << 10)
            .fault_tiers_capped(1 << 20)
            .levels_on_fast(2)
            .l0_compaction_trigger(2)
            .fs(fs.clone() as Arc<dyn Fs>)
            .build()
            .unwrap()
    };
    let db = Db::open(opts()).unwrap();
    let mut model = Model::new();
    let w = WriteOptions::sync();
    for i in 0..3000u32 {
        let v = val(i, 0, 300);
        db.put(&w, &key6(i), &v).unwrap();
        model.insert(key6(i), v);
    }
    db.compact_range(None, None).unwrap();
    let capacity_bytes: u64 = db
        .live_files()
        .iter()
        .filter(|f| f.tier == "capacity")
        .map(|f| f.size)
        .sum();
    assert!(capacity_bytes > 0, "{}", levels_summary(&db));
    let mut stopped = 0;
    for round in 1..6u32 {
        // Room for about a third of a rewrite of the capacity tier.
        fs.set_space_limit(
            Path::new(CAPACITY),
            Some(capacity_bytes + capacity_bytes / (2 + u64::from(round))),
        );
        let mut failed = false;
        for i in (0..3000u32).step_by(2) {
            let r = if i % 5 == 0 {
                db.delete(&w, &key6(i)).map(|_| {
                    model.remove(&key6(i));
                })
            } else {
                let v = val(i, round, 300);
                db.put(&w, &key6(i), &v).map(|_| {
                    model.insert(key6(i), v);
                })
            };
            if r.is_err() {
                failed = true;
                break;
            }
        }
        if !failed {
            failed = db.compact_range(None, None).is_err();
        }
        check_gets(
            &db,
            &model,
            3000,
            &ReadOptions::default(),
            &format!("round {round}: stopped"),
        );
        check_shape(&db, Some(&fs), &format!("round {round}: stopped"));
        fs.set_space_limit(Path::new(CAPACITY), None);
        if failed {
            stopped += 1;
            db.resume().unwrap();
        }
        db.compact_range(None, None).unwrap();
        check_db(
            &db,
            &model,
            &ReadOptions::default(),
            &format!("round {round}: resumed"),
        );
        check_shape(&db, Some(&fs), &format!("round {round}: resumed"));
    }
    assert!(stopped > 0, "no round ran out of room");
    eprintln!(
        "stopped {stopped} times; chunks {}",
        db.stats().compaction_chunks
    );
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "after reopen");
    fs.crash(CrashPolicy::DropUnsynced);
    drop(db);
    let db = Db::open(opts()).unwrap();
    check_db(&db, &model, &ReadOptions::default(), "after power loss");
    check_gets(
        &db,
        &model,
        3000,
        &ReadOptions::default(),
        "after power loss",
    );
    db.verify_checksums().unwrap();
}
