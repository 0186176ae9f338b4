//! Promotions into the hot store (`hot_tier = "slab"`): popular objects a point read finds in
//! the tables below L0 are copied back into the store, and later reads of them are served
//! there; a promotion never brings back an older value, and survives crashes.

mod common;

use common::{drop_within, tiny, Crash, Failures, FsImage, TierSetup, CRASHES};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::env::{FaultFs, FaultKind};
use tierkv::{Db, HotAdmission, HotTier, Options, Preset, ReadOptions, WriteOptions};

/// Keys that fill the store, and the keys that end up in the tables and get read.
const FILL: u32 = 400;
const TARGETS: u32 = 120;

fn options(fs: &Arc<FaultFs>) -> Options {
    tiny()
        .fault_tiers()
        .hot_tier(HotTier::Slab)
        .hot_budget(64 << 10)
        // The loads below count on flushes that make room (demoting the targets).
        .hot_admission(HotAdmission::MakeRoom)
        // NB: one long epoch: the schedule is tested on its own in `hot::promote`.
        .hot_promotion_epoch_ops(1 << 30)
        .fs(fs.clone())
        .build()
        .expect("valid options")
}

fn fill_key(i: u32) -> Vec<u8> {
    format!("f{i:04}").into_bytes()
}

fn target_key(i: u32) -> Vec<u8> {
    format!("t{i:04}").into_bytes()
}

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), k).unwrap()
}

/// Writes the targets, then fills the store past its budget (the flushes of the fill make
/// room by demoting the targets to L0) and compacts everything below L0.
fn load(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let model = write_targets_then_fill(db);
    db.compact_range(None, None).unwrap();
    model
}

/// Writes the targets (flushed into the store), then fill keys that take more than the
/// store's budget: the room-making demotions move the targets out to L0.
fn write_targets_then_fill(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let w = WriteOptions::default();
    let mut model = BTreeMap::new();
    let mut put = |k: Vec<u8>, v: Vec<u8>| {
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
    };
    for i in 0..TARGETS {
        put(
            target_key(i),
            format!("target-{i}-{}", "y".repeat(80)).into_bytes(),
        );
    }
    db.flush().unwrap();
    for i in 0..FILL {
        put(
            fill_key(i),
            format!("fill-{i}-{}", "x".repeat(180)).into_bytes(),
        );
    }
    db.flush().unwrap();
    model
}

/// The targets a point read answers from the tables now.
fn targets_in_tables(db: &Db) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..TARGETS {
        let k = target_key(i);
        let before = db.stats().hot_tier.unwrap().reads_lsm;
        get(db, &k);
        if db.stats().hot_tier.unwrap().reads_lsm > before {
            out.push(k);
        }
    }
    out
}

/// Waits until the store has promoted at least `n` objects.
fn wait_for_promotions(db: &Db, n: u64) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let got = db.stats().hot_tier.unwrap().promotions;
        if got >= n || Instant::now() > deadline {
            return got;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_hot_key_read_from_the_tables_is_promoted_and_then_served_by_the_store() {
    let fs = FaultFs::new(21);
    let opts = options(&fs);
    let db = Db::open(opts.clone()).unwrap();
    let mut model = load(&db);
    // The flush that wrote the targets counted as an access: the read that finds each in a
    // table heats it to the tracker's top clock value, and is its second access, against the
    // one of the objects the fill's flushes demoted (the targets themselves): it offers it.
    let cold = targets_in_tables(&db);
    assert!(cold.len() >= 48, "{} targets in the tables", cold.len());
    let promoted = wait_for_promotions(&db, 32);
    assert!(promoted >= 32, "{promoted} promotions");
    db.wait_for_compactions().unwrap();

    // The promoted keys are now answered by the store, with their values.
    let before = db.stats().hot_tier.unwrap();
    for k in &cold {
        assert_eq!(get(&db, k).as_ref(), model.get(k), "{k:?}");
    }
    let after = db.stats().hot_tier.unwrap();
    let hot_reads = after.reads_hot - before.reads_hot;
    let lsm_reads = after.reads_lsm - before.reads_lsm;
    // NB: a later promotion batch makes room by demoting, and may take back keys promoted
    // before it: how many depends on how the batches fell (more, smaller ones on a loaded
    // machine), so half is asked for, not all.
    assert!(
        hot_reads >= after.promotions.min(cold.len() as u64) / 2,
        "{hot_reads} of {} reads from the store after {} promotions (demotions may take some \
         back)",
        cold.len(),
        after.promotions
    );
    assert_eq!(hot_reads + lsm_reads, cold.len() as u64);
    assert!(after.bytes <= 64 << 10, "{after:?}");

    // Updates of promoted keys supersede the promoted copies; a snapshot still reads them.
    let snap = db.snapshot();
    let w = WriteOptions::default();
    for k in cold.iter().take(10) {
        let v = [b"new-".as_slice(), k].concat();
        db.put(&w, k, &v).unwrap();
        model.insert(k.clone(), v);
    }
    db.flush().unwrap();
    for k in cold.iter().take(10) {
        assert_eq!(get(&db, k).as_ref(), model.get(k));
        let old = db.get(&ReadOptions::at(&snap), k).unwrap().unwrap();
        assert!(old.starts_with(b"target-"), "{k:?} at the snapshot");
    }
    drop(snap);

    // Iterators see each key once, with its newest value, both ways.
    let scan = |db: &Db| {
        let mut it = db.iter(ReadOptions::default()).unwrap();
        let mut fwd = BTreeMap::new();
        it.seek_to_first();
        while it.valid() {
            assert!(fwd.insert(it.key().to_vec(), it.value().to_vec()).is_none());
            it.next();
        }
        let mut back = 0;
        it.seek_to_last();
        while it.valid() {
            back += 1;
            it.prev();
        }
        it.status().unwrap();
        assert_eq!(back, fwd.len());
        fwd
    };
    assert!(scan(&db) == model, "the iterator differs from the model");

    // The promoted objects survive a reopen in the store.
    drop(db);
    let db = Db::open(opts).unwrap();
    let reads = db.stats().hot_tier.unwrap().reads_hot;
    for k in cold.iter().take(10) {
        assert_eq!(get(&db, k).as_ref(), model.get(k));
    }
    assert_eq!(db.stats().hot_tier.unwrap().reads_hot, reads + 10);
    assert!(
        scan(&db) == model,
        "the iterator differs from the model after reopen"
    );
}

#[test]
fn a_compaction_into_the_capacity_tier_offers_the_hot_keys_it_meets() {
    let fs = FaultFs::new(26);
    // NB: L0 stays until the manual compaction: reads of L0 offer nothing.
    let opts = Options {
        compaction: tierkv::CompactionOptions {
            l0_compaction_trigger: 16,
            ..options(&fs).compaction
        },
        ..options(&fs)
    };
    let db = Db::open(opts).unwrap();
    let model = write_targets_then_fill(&db);
    // Each target in L0 read once after the flush that wrote it: two accesses, more than
    // the objects demoted so far. (The fill's flushes touch only the fill keys.)
    let in_l0 = targets_in_tables(&db);
    assert!(in_l0.len() >= 48, "{} targets in L0", in_l0.len());
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        db.stats().hot_tier.unwrap().promotions,
        0,
        "L0 reads offer nothing"
    );
    db.compact_range(None, None).unwrap();
    let promoted = wait_for_promotions(&db, 32);
    assert!(promoted >= 32, "{promoted} promotions after the compaction");
    let before = db.stats().hot_tier.unwrap().reads_hot;
    for k in &in_l0 {
        assert_eq!(get(&db, k).as_ref(), model.get(k), "{k:?}");
    }
    let served = db.stats().hot_tier.unwrap().reads_hot - before;
    assert!(
        served + 8 >= promoted.min(in_l0.len() as u64),
        "{served} served by the store"
    );
    for (k, v) in &model {
        assert_eq!(get(&db, k).as_ref(), Some(v), "{k:?}");
    }
}

#[test]
fn a_candidate_superseded_before_the_job_runs_is_not_promoted() {
    let fs = FaultFs::new(22);
    let db = Db::open(options(&fs)).unwrap();
    let mut model = load(&db);
    // NB: reopened, the tracker starts empty: a key's first read enters it cold.
    drop(db);
    let db = Db::open(options(&fs)).unwrap();
    let cold = targets_in_tables(&db);
    // The second read offers each (at the top clock value, read more often than anything
    // demoted: nothing has been since the reopen); fewer than a batch: queued, no job yet.
    let few = &cold[..8];
    for k in few {
        get(&db, k);
    }
    // Newer versions the store does not take (values too large for a slot, deletes), so
    // they go to L0; the flush's promotion step finds the candidates stale.
    let w = WriteOptions::default();
    for (n, k) in few.iter().enumerate() {
        if n % 2 == 0 {
            let v = [k.as_slice(), &[b'z'; 5000]].concat();
            db.put(&w, k, &v).unwrap();
            model.insert(k.clone(), v);
        } else {
            db.delete(&w, k).unwrap();
            model.remove(k);
        }
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert_eq!(db.stats().hot_tier.unwrap().promotions, 0);
    for k in few {
        assert_eq!(get(&db, k).as_ref(), model.get(k), "{k:?}");
    }
    for (k, v) in &model {
        assert_eq!(get(&db, k).as_ref(), Some(v), "{k:?}");
    }
}

#[test]
fn the_prismdb_preset_keeps_small_objects_in_the_store_and_the_lsm_on_the_capacity_tier() {
    let fs = FaultFs::new(24);
    let opts = tiny()
        .fault_tiers()
        .preset(Preset::PrismDb)
        .hot_budget(64 << 10)
        .fs(fs.clone())
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let model = load(&db);
    let s = db.stats();
    let hot = s.hot_tier.clone().unwrap();
    assert!(hot.objects > 100 && hot.bytes <= 64 << 10, "{hot:?}");
    // Every table is on the capacity tier: the fast tier holds WAL, MANIFEST and slabs.
    let files = db.live_files();
    assert!(!files.is_empty());
    assert!(files.iter().all(|f| f.tier == "capacity"), "{files:?}");
    drop(db);
    let db = Db::open(opts).unwrap();
    for (k, v) in &model {
        assert_eq!(get(&db, k).as_ref(), Some(v), "{k:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Crash sweep
// ---------------------------------------------------------------------------------------------

/// The updates a workload run attempted and had acknowledged.
#[derive(Default)]
struct Updates {
    /// Each key's update, in the order attempted (a key is updated at most once).
    attempted: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The keys whose (synced) update returned Ok.
    acked: Vec<Vec<u8>>,
}

/// The swept workload: reads that make the targets popular (and promote them), interleaved
/// with synced updates of some targets and two flushes.
fn workload(db: &Db, cold: &[Vec<u8>], updates: &mut Updates) -> tierkv::Result<()> {
    let w = WriteOptions::sync();
    for (n, k) in cold.iter().enumerate() {
        db.get(&ReadOptions::default(), k)?;
        if n % 9 == 0 {
            let v = format!("upd-{n}").into_bytes();
            updates.attempted.insert(k.clone(), v.clone());
            db.put(&w, k, &v)?;
            updates.acked.push(k.clone());
        }
        if n == cold.len() / 2 {
            db.flush()?;
        }
    }
    for k in cold {
        db.get(&ReadOptions::default(), k)?;
    }
    db.flush()?;
    Ok(())
}

/// Power loss (each policy) or a process kill at each of many file-system calls of a
/// workload that promotes, updates promoted and unpromoted keys and flushes: after recovery
/// every acknowledged update is there, and every other key reads its loaded value or the one
/// update in flight at the crash: nothing lost, no older value back.
#[test]
fn crash_sweep_across_promotions() {
    // A settled database with the targets in the tables, taken as an image.
    let fs = FaultFs::new(23);
    let opts = options(&fs);
    let db = Db::open(opts.clone()).unwrap();
    let base = load(&db);
    drop(db);
    // NB: the tracker starts empty at open: the workload's second read of a key offers it.
    let cold: Vec<Vec<u8>> = (0..TARGETS).map(target_key).collect();
    let image = FsImage::take(&fs);

    // A fault-free run: how many mutating calls the workload makes, and that it promotes.
    let fs = image.materialize(1);
    let with_fs = |fs: &Arc<FaultFs>| Options {
        fs: fs.clone(),
        ..opts.clone()
    };
    let db = Db::open(with_fs(&fs)).unwrap();
    let start = fs.op_count();
    workload(&db, &cold, &mut Updates::default()).unwrap();
    db.wait_for_compactions().unwrap();
    let calls = fs.op_count() - start;
    eprintln!("promotion sweep: {calls} mutating calls in the workload");
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.promotions >= 32, "{hot:?}");
    drop(db);

    // NB: the workload is short: by default every call is a crash point, so every call of
    // every promotion job (journal, page writes, syncs) is crashed at.
    let points = common::env_u64("TIERKV_CRASH_POINTS", calls).min(calls);
    let mut failures = Failures::default();
    let mut after_promotion = 0;
    for p in 0..points {
        let at = p * calls / points;
        for crash in CRASHES {
            let fs = image.materialize(at ^ 0x5eed);
            let result = crash_case(&fs, &with_fs(&fs), &base, &cold, at, crash);
            after_promotion += usize::from(result == Ok(true));
            failures.check(format!("{crash:?} at call {at} of {calls}"), result);
        }
    }
    failures.assert_none("promotion crash sweep");
    assert!(
        after_promotion > 0,
        "no crash came after a promotion completed"
    );
}

/// Runs the workload on `fs` until its call `at` fails, crashes, recovers and checks.
/// Returns whether the crashed run had completed a promotion.
fn crash_case(
    fs: &Arc<FaultFs>,
    opts: &Options,
    base: &BTreeMap<Vec<u8>, Vec<u8>>,
    cold: &[Vec<u8>],
    at: u64,
    crash: Crash,
) -> Result<bool, String> {
    let db = Db::open(opts.clone()).map_err(|e| format!("first open: {e}"))?;
    fs.fail_after(at, FaultKind::Io, false);
    let mut updates = Updates::default();
    let _ = workload(&db, cold, &mut updates);
    let promoted = db.stats().hot_tier.is_some_and(|h| h.promotions > 0);
    common::crash_now(fs, db, crash, "the crashed run");
    let db = Db::open(opts.clone()).map_err(|e| format!("recovery: {e}"))?;
    for (k, loaded) in base {
        let got = db
            .get(&ReadOptions::default(), k)
            .map_err(|e| format!("get {k:?}: {e}"))?;
        let update = updates.attempted.get(k);
        let ok = if updates.acked.contains(k) {
            got.as_ref() == update
        } else {
            got.as_ref() == Some(loaded) || (update.is_some() && got.as_ref() == update)
        };
        if !ok {
            let show = |v: Option<&Vec<u8>>| {
                v.map(|v| String::from_utf8_lossy(&v[..v.len().min(24)]).into_owned())
            };
            return Err(format!(
                "{} reads {:?}; loaded {:?}, update {:?} (acknowledged: {})",
                String::from_utf8_lossy(k),
                show(got.as_ref()),
                show(Some(loaded)),
                show(update),
                updates.acked.contains(k)
            ));
        }
    }
    drop_within(db, "the recovered database");
    Ok(promoted)
}

#[test]
fn promotion_options_from_toml_and_their_ranges() {
    let opts = Options::from_toml_str(
        r#"
        [hot_tier]
        mode = "slab"
        promotion_epoch_ops = 5000
        promotion_cooldown_ops = 0
        promotion_min_gain = 0.05
        [[tier]]
        name = "fast"
        path = "/tmp/x"
        "#,
    )
    .unwrap();
    let h = &opts.hot_tier;
    assert_eq!(
        (
            h.promotion_epoch_ops,
            h.promotion_cooldown_ops,
            h.promotion_min_gain
        ),
        (5000, 0, 0.05)
    );
    let d = Options::default().hot_tier;
    assert_eq!(
        (
            d.promotion_epoch_ops,
            d.promotion_cooldown_ops,
            d.promotion_min_gain
        ),
        (1_000_000, 10_000_000, 0.01)
    );
    let fs = FaultFs::new(25);
    let err = tiny()
        .fault_tiers()
        .hot_promotion_epoch_ops(0)
        .fs(fs.clone())
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("hot_promotion_epoch_ops"), "{err}");
    let err = tiny()
        .fault_tiers()
        .hot_promotion_min_gain(1.5)
        .fs(fs)
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("hot_promotion_min_gain"), "{err}");
}
