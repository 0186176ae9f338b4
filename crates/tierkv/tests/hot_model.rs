//! The hot store (`hot_tier = "slab"`): randomized model checks across
//! flushes, demotions, promotions, snapshots, iterators, reopens and crashes, and edge cases.

mod common;

use common::{tiny, Crash, TierSetup};
use std::collections::BTreeMap;
use std::sync::Arc;
use tierkv::env::{CrashPolicy, FaultFs};
use tierkv::{Db, HotAdmission, HotTier, Options, ReadOptions, Snapshot, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A live iterator, the entries it must show, and its position among them.
type LiveIter = (tierkv::DbIterator, Vec<(Vec<u8>, Vec<u8>)>, usize);

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Clone, Copy, Debug)]
struct Cfg {
    admission: HotAdmission,
    partitions: usize,
    budget: u64,
    bottom: bool,
    epoch_ops: u64,
    weight: bool,
    policy: u8,
}

fn options(fs: &Arc<FaultFs>, cfg: Cfg) -> Options {
    tiny()
        .fault_tiers()
        .hot_tier(HotTier::Slab)
        .hot_budget(cfg.budget)
        .hot_admission(cfg.admission)
        .hot_partitions(cfg.partitions)
        .hot_demote_into_bottom(cfg.bottom)
        .hot_promotion_epoch_ops(cfg.epoch_ops)
        .hot_eviction(if cfg.weight {
            tierkv::HotEviction::Weight
        } else {
            tierkv::HotEviction::Msc
        })
        .msc_policy(
            [
                tierkv::MscPolicy::Approximate,
                tierkv::MscPolicy::Random,
                tierkv::MscPolicy::RoundRobin,
                tierkv::MscPolicy::Precise,
            ][cfg.policy as usize % 4],
        )
        .fs(fs.clone())
        .build()
        .expect("valid options")
}

fn key_of(i: u64) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

/// A value for `i` written in `round`, of a size picked by `rng`: mostly small, sometimes
/// empty, at a slot class boundary, or too large for any slot.
fn value_of(rng: &mut Rng, key: &[u8], round: u64) -> Vec<u8> {
    let len = match rng.below(20) {
        0 => 0,
        1 => 5000,
        // Exactly fills a 100-byte (or 1360-byte, or 4096-byte) slot.
        2 => 100 - 19 - key.len(),
        3 => 1360 - 19 - key.len(),
        4 => 4096 - 19 - key.len(),
        5 => 4096 - 19 - key.len() + 1,
        _ => 10 + rng.below(400) as usize,
    };
    let tag = format!("{}-{round}-", String::from_utf8_lossy(key)).into_bytes();
    let mut v: Vec<u8> = tag.into_iter().cycle().take(len).collect();
    v.truncate(len);
    v
}

fn scan_with(db: &Db, opts: ReadOptions, reverse: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    common::collect_entries(&mut db.iter(opts).unwrap(), reverse, "scan")
}

fn model_vec(m: &Model) -> Vec<(Vec<u8>, Vec<u8>)> {
    m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
}

fn show(v: Option<&Vec<u8>>) -> String {
    match v {
        None => "<none>".into(),
        Some(v) => format!(
            "{:?}..({} bytes)",
            String::from_utf8_lossy(&v[..v.len().min(24)]),
            v.len()
        ),
    }
}

/// Checks every key's point read and a forward and backward scan against `model`.
fn check_all(db: &Db, model: &Model, keys: u64, what: &str) {
    for i in 0..keys {
        let k = key_of(i);
        let got = db.get(&ReadOptions::default(), &k).unwrap();
        assert!(
            got.as_ref() == model.get(&k),
            "{what}: key {i}: got {}, want {}",
            show(got.as_ref()),
            show(model.get(&k))
        );
    }
    let want = model_vec(model);
    for reverse in [false, true] {
        let got = scan_with(db, ReadOptions::default(), reverse);
        if got != want {
            let at = got
                .iter()
                .zip(&want)
                .position(|(g, w)| g != w)
                .unwrap_or(got.len().min(want.len()));
            panic!(
                "{what}: scan (reverse {reverse}) differs at {at}: got {:?} {}, want {:?} {}",
                got.get(at)
                    .map(|e| String::from_utf8_lossy(&e.0).to_string()),
                show(got.get(at).map(|e| &e.1)),
                want.get(at)
                    .map(|e| String::from_utf8_lossy(&e.0).to_string()),
                show(want.get(at).map(|e| &e.1)),
            );
        }
    }
}

/// Reads at `snap` must give `model` (the state when it was taken).
fn check_snapshot(db: &Db, snap: &Snapshot, model: &Model, keys: u64, what: &str) {
    let opts = ReadOptions {
        snapshot: Some(snap.clone()),
        ..ReadOptions::default()
    };
    for i in 0..keys {
        let k = key_of(i);
        let got = db.get(&opts, &k).unwrap();
        assert!(
            got.as_ref() == model.get(&k),
            "{what}: snapshot read of key {i}: got {}, want {}",
            show(got.as_ref()),
            show(model.get(&k))
        );
    }
    let got = scan_with(db, opts, false);
    assert!(got == model_vec(model), "{what}: snapshot scan differs");
}

/// Random puts, deletes, flushes, compactions, reads (some repeated, to make keys hot and
/// promote them), snapshots, reopens and crashes, checked against a model throughout.
fn random_run(seed: u64, cfg: Cfg, ops: u64) {
    let keys = 400 * cfg.budget / (64 << 10);
    let fs = FaultFs::new(seed);
    let mut rng = Rng::new(seed);
    let mut db = Db::open(options(&fs, cfg)).unwrap();
    let mut model = Model::new();
    let mut snaps: Vec<(Snapshot, Model)> = Vec::new();
    // Live iterators: the iterator, the state it must show, and its position in it.
    let mut iters: Vec<LiveIter> = Vec::new();
    let w = WriteOptions::sync();
    let what = |op: u64| format!("seed {seed} {cfg:?} op {op}");
    for op in 0..ops {
        let r = rng.below(1000);
        if r < 600 {
            let i = rng.below(keys);
            let k = key_of(i);
            let v = value_of(&mut rng, &k, op);
            db.put(&w, &k, &v).unwrap();
            model.insert(k, v);
        } else if r < 700 {
            let k = key_of(rng.below(keys));
            db.delete(&w, &k).unwrap();
            model.remove(&k);
        } else if r < 900 {
            // Reads of a few hot keys, many times: promotions.
            let i = rng.below(keys / 8);
            let k = key_of(i);
            for _ in 0..3 {
                let got = db.get(&ReadOptions::default(), &k).unwrap();
                assert!(
                    got.as_ref() == model.get(&k),
                    "{}: key {i}: got {}, want {}",
                    what(op),
                    show(got.as_ref()),
                    show(model.get(&k))
                );
            }
        } else if r < 940 {
            db.flush().unwrap();
        } else if r < 950 {
            db.compact_range(None, None).unwrap();
        } else if r < 960 {
            if snaps.len() < 3 {
                snaps.push((db.snapshot(), model.clone()));
            } else {
                let (s, m) = snaps.remove(rng.below(3) as usize);
                check_snapshot(&db, &s, &m, keys, &what(op));
            }
        } else if r < 964 {
            // Clean reopen.
            snaps.clear();
            iters.clear();
            drop(db);
            db = Db::open(options(&fs, cfg)).unwrap();
            check_all(&db, &model, keys, &format!("{} after reopen", what(op)));
        } else if r < 968 {
            // Power loss: every write was synced, so nothing acknowledged may go.
            snaps.clear();
            iters.clear();
            let policy = [
                Crash::Power(CrashPolicy::DropUnsynced),
                Crash::Power(CrashPolicy::KeepRandomPages),
                Crash::Power(CrashPolicy::TearLastSector),
                Crash::Process,
            ][rng.below(4) as usize];
            common::crash_now(&fs, db, policy, &what(op));
            db = Db::open(options(&fs, cfg)).unwrap();
            check_all(
                &db,
                &model,
                keys,
                &format!("{} after crash {policy:?}", what(op)),
            );
        } else if r < 975 {
            check_all(&db, &model, keys, &what(op));
        } else if r < 1000 {
            if iters.len() < 2 && rng.below(4) == 0 {
                let mut it = db.iter(ReadOptions::default()).unwrap();
                it.seek_to_first();
                let want = model_vec(&model);
                let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
                assert!(
                    got == want.first().cloned(),
                    "{}: new iterator's first",
                    what(op)
                );
                if !want.is_empty() {
                    iters.push((it, want, 0));
                }
            } else if !iters.is_empty() {
                let at = rng.below(iters.len() as u64) as usize;
                let (it, want, pos) = &mut iters[at];
                let steps = 1 + rng.below(40);
                let back = rng.below(5) == 0;
                for _ in 0..steps {
                    if back {
                        if *pos == 0 || *pos > want.len() {
                            break;
                        }
                        it.prev();
                        *pos -= 1;
                    } else {
                        if *pos >= want.len() {
                            break;
                        }
                        it.next();
                        *pos += 1;
                    }
                    let got = it.valid().then(|| (it.key().to_vec(), it.value().to_vec()));
                    let exp = want.get(*pos).cloned();
                    assert!(
                        got == exp,
                        "{}: live iterator at {} (back {back}): got {:?} {}, want {:?} {}",
                        what(op),
                        *pos,
                        got.as_ref()
                            .map(|e| String::from_utf8_lossy(&e.0).to_string()),
                        show(got.as_ref().map(|e| &e.1)),
                        exp.as_ref()
                            .map(|e| String::from_utf8_lossy(&e.0).to_string()),
                        show(exp.as_ref().map(|e| &e.1)),
                    );
                }
                it.status().unwrap();
                if *pos >= want.len() {
                    iters.remove(at);
                }
            }
        }
    }
    for (s, m) in &snaps {
        check_snapshot(&db, s, m, keys, &format!("{} at end", what(ops)));
    }
    iters.clear();
    check_all(&db, &model, keys, &format!("{} at end", what(ops)));
    if std::env::var("HOT_MODEL_STATS").is_ok() {
        let h = db.stats().hot_tier.unwrap();
        eprintln!(
            "{}: objects {} bytes {} demoted {} rounds {} promotions {} bottom {} ghosts {} clears {} L0 {:?}",
            what(ops), h.objects, h.bytes, h.demoted_objects, h.demotion_rounds, h.promotions,
            h.demoted_into_bottom, h.ghost_slots, h.ghost_clears,
            db.stats().levels.iter().map(|l| l.files).collect::<Vec<_>>()
        );
    }
    snaps.clear();
    drop(db);
    let db = Db::open(options(&fs, cfg)).unwrap();
    check_all(&db, &model, keys, &format!("{} reopened at end", what(ops)));
}

const BASE: Cfg = Cfg {
    admission: HotAdmission::WhenFree,
    partitions: 1,
    budget: 64 << 10,
    bottom: false,
    epoch_ops: 1 << 30,
    weight: false,
    policy: 0,
};

/// Seeds of mixed configurations to run (`HOT_MODEL_SEEDS=n` explores more; 6 by default).
fn extra_seeds() -> u64 {
    common::env_u64("HOT_MODEL_SEEDS", 6)
}

#[test]
fn random_model_explore() {
    let n = extra_seeds();
    for seed in 1000..1000 + n {
        let cfg = Cfg {
            admission: if seed % 2 == 0 {
                HotAdmission::WhenFree
            } else {
                HotAdmission::MakeRoom
            },
            partitions: [1, 1, 2, 3][(seed / 2 % 4) as usize],
            bottom: seed % 5 == 0,
            weight: seed % 7 == 3,
            policy: (seed / 3 % 4) as u8,
            epoch_ops: if seed % 3 == 0 { 50 } else { 1 << 30 },
            ..BASE
        };
        let cfg = Cfg {
            budget: cfg.partitions as u64 * (64 << 10),
            ..cfg
        };
        random_run(seed, cfg, 3000);
    }
}

#[test]
fn random_model_when_free() {
    for seed in 1..4 {
        random_run(seed, BASE, 3000);
    }
}

#[test]
fn random_model_make_room() {
    let cfg = Cfg {
        admission: HotAdmission::MakeRoom,
        ..BASE
    };
    for seed in 11..14 {
        random_run(seed, cfg, 3000);
    }
}

#[test]
fn random_model_partitions() {
    for admission in [HotAdmission::WhenFree, HotAdmission::MakeRoom] {
        let cfg = Cfg {
            admission,
            partitions: 3,
            budget: 192 << 10,
            ..BASE
        };
        for seed in 21..23 {
            random_run(seed, cfg, 3000);
        }
    }
}

#[test]
fn random_model_bottom() {
    for admission in [HotAdmission::WhenFree, HotAdmission::MakeRoom] {
        let cfg = Cfg {
            admission,
            bottom: true,
            ..BASE
        };
        for seed in 31..33 {
            random_run(seed, cfg, 3000);
        }
    }
}

/// The round a value written by [`concurrent_reads_never_go_back`] names.
fn round_in(v: &[u8]) -> u64 {
    let s = String::from_utf8_lossy(v);
    s.split('-')
        .nth(1)
        .and_then(|r| r.parse().ok())
        .unwrap_or(u64::MAX)
}

/// Readers (point reads, and scans) running beside a writer that updates and deletes keys,
/// flushes, and drives demotions and promotions, never see a key older than its last
/// acknowledged write before the read began.
fn concurrent_run(seed: u64, cfg: Cfg) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let keys = 300u64;
    let fs = FaultFs::new(seed);
    let db = Arc::new(Db::open(options(&fs, cfg)).unwrap());
    // Per key: the last acknowledged round (u64::MAX - 1: deleted; 0: never written).
    let acked: Arc<Vec<AtomicU64>> = Arc::new((0..keys).map(|_| AtomicU64::new(0)).collect());
    // Per key: the last write started (2 * round, plus 1 for a delete; 0: none), stored before
    // the write: a read may see it before it is acknowledged, and a put and a delete started
    // during a read leave `acked` as it was.
    let started: Arc<Vec<AtomicU64>> = Arc::new((0..keys).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    const DELETED: u64 = u64::MAX - 1;
    let mut readers = Vec::new();
    for r in 0..2u64 {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        let started = started.clone();
        readers.push(std::thread::spawn(move || {
            let mut rng = Rng::new(seed * 31 + r);
            while !stop.load(Ordering::Relaxed) {
                let i = rng.below(keys / 4);
                let started_before = started[i as usize].load(Ordering::SeqCst);
                let before = acked[i as usize].load(Ordering::SeqCst);
                let got = db.get(&ReadOptions::default(), &key_of(i)).unwrap();
                let after = acked[i as usize].load(Ordering::SeqCst);
                let started_after = started[i as usize].load(Ordering::SeqCst);
                match got {
                    None => assert!(
                        before == 0 || before == DELETED || after != before
                            // A delete under way.
                            || started_after % 2 == 1,
                        "seed {seed}: key {i} read as absent, last acked round {before}"
                    ),
                    Some(v) => {
                        let round = round_in(&v);
                        assert!(
                            before == DELETED && after != before
                                || before != DELETED && round >= before
                                || before == DELETED && round > 0 && after != DELETED
                                // A put under way, or started since.
                                || 2 * round >= started_before,
                            "seed {seed}: key {i} read round {round}, acked {before} (now {after})"
                        );
                    }
                }
            }
        }));
    }
    {
        let (db, acked, stop) = (db.clone(), acked.clone(), stop.clone());
        let started = started.clone();
        readers.push(std::thread::spawn(move || {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                n += 1;
                let load = |a: &[AtomicU64]| a.iter().map(|a| a.load(Ordering::SeqCst)).collect();
                let started_before: Vec<u64> = load(&started);
                let before: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
                let got = scan_with(&db, ReadOptions::default(), n.is_multiple_of(2));
                let after: Vec<u64> = acked.iter().map(|a| a.load(Ordering::SeqCst)).collect();
                let started_after: Vec<u64> = load(&started);
                let mut seen = vec![None; keys as usize];
                for (k, v) in &got {
                    let i: usize = String::from_utf8_lossy(&k[1..]).parse().unwrap();
                    seen[i] = Some(round_in(v));
                }
                for i in 0..keys as usize {
                    if before[i] != after[i] {
                        continue;
                    }
                    // A write under way may be what the scan saw, and after a delete a put
                    // started since (a put and a delete during the scan).
                    let (s0, s1) = (started_before[i], started_after[i]);
                    let under_way = match seen[i] {
                        None => s1 % 2 == 1,
                        Some(r) => 2 * r == s1 || before[i] == DELETED && 2 * r >= s0,
                    };
                    if under_way {
                        continue;
                    }
                    let want = match before[i] {
                        0 | DELETED => None,
                        r => Some(r),
                    };
                    assert_eq!(seen[i], want, "seed {seed}: scan {n}: key {i}");
                }
            }
        }));
    }
    let mut rng = Rng::new(seed);
    let w = WriteOptions::default();
    for round in 1..6000u64 {
        let i = if rng.below(2) == 0 {
            rng.below(keys / 4)
        } else {
            rng.below(keys)
        };
        let k = key_of(i);
        if rng.below(8) == 0 {
            started[i as usize].store(2 * round + 1, Ordering::SeqCst);
            db.delete(&w, &k).unwrap();
            acked[i as usize].store(DELETED, Ordering::SeqCst);
        } else {
            let len = [10usize, 150, 900, 5000, 0][rng.below(5) as usize].max(12);
            let mut v = format!("{i}-{round}-").into_bytes();
            v.resize(len, b'.');
            started[i as usize].store(2 * round, Ordering::SeqCst);
            db.put(&w, &k, &v).unwrap();
            acked[i as usize].store(round, Ordering::SeqCst);
        }
        if round % 500 == 0 {
            db.flush().unwrap();
        }
        if round % 2000 == 0 {
            db.compact_range(None, None).unwrap();
        }
    }
    stop.store(true, Ordering::Relaxed);
    // NB: a reader's failed check fails the test.
    for r in readers {
        r.join().unwrap();
    }
    if std::env::var("HOT_MODEL_STATS").is_ok() {
        let h = db.stats().hot_tier.unwrap();
        eprintln!(
            "concurrent seed {seed} {cfg:?}: demoted {} promotions {} reads_hot {} reads_lsm {}",
            h.demoted_objects, h.promotions, h.reads_hot, h.reads_lsm
        );
    }
}

#[test]
fn concurrent_reads_never_go_back() {
    for (seed, admission, partitions) in [
        (41, HotAdmission::WhenFree, 1),
        (42, HotAdmission::MakeRoom, 1),
        (43, HotAdmission::WhenFree, 2),
    ] {
        let cfg = Cfg {
            admission,
            partitions,
            budget: partitions as u64 * (64 << 10),
            ..BASE
        };
        concurrent_run(seed, cfg);
    }
}

#[test]
fn random_model_many_small_partitions() {
    for admission in [HotAdmission::WhenFree, HotAdmission::MakeRoom] {
        let cfg = Cfg {
            admission,
            partitions: 64,
            budget: 64 << 10,
            ..BASE
        };
        random_run(51, cfg, 2000);
    }
}

/// Edge keys: the empty key, and a key so long that only an empty value fits a slot with it.
#[test]
fn edge_keys_in_the_store_survive_updates_deletes_demotion_and_reopen() {
    let fs = FaultFs::new(61);
    let cfg = BASE;
    let long = vec![b'L'; 4096 - 19];
    let mut db = Db::open(options(&fs, cfg)).unwrap();
    let w = WriteOptions::default();
    let mut model = Model::new();
    let steps: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
        (Vec::new(), Some(Vec::new())),
        (long.clone(), Some(Vec::new())),
        (long.clone(), Some(b"x".to_vec())),
        (Vec::new(), Some(vec![b'e'; 5000])),
        (long.clone(), None),
        (Vec::new(), None),
        (long.clone(), Some(Vec::new())),
        (Vec::new(), Some(b"back".to_vec())),
    ];
    let read = |db: &Db, model: &Model, what: &str| {
        for k in [Vec::new(), long.clone()] {
            let got = db.get(&ReadOptions::default(), &k).unwrap();
            assert!(
                got.as_ref() == model.get(&k),
                "{what}: key of {} bytes",
                k.len()
            );
        }
        assert!(
            scan_with(db, ReadOptions::default(), false) == model_vec(model),
            "{what}"
        );
        assert!(
            scan_with(db, ReadOptions::default(), true) == model_vec(model),
            "{what}"
        );
    };
    for (n, (k, v)) in steps.into_iter().enumerate() {
        match v {
            Some(v) => {
                db.put(&w, &k, &v).unwrap();
                model.insert(k, v);
            }
            None => {
                db.delete(&w, &k).unwrap();
                model.remove(&k);
            }
        }
        db.flush().unwrap();
        read(&db, &model, &format!("step {n}"));
        drop(db);
        db = Db::open(options(&fs, cfg)).unwrap();
        read(&db, &model, &format!("step {n} reopened"));
    }
    // Fill the store past its budget: the edge keys are demoted with the rest.
    for i in 0..400u64 {
        let k = key_of(i);
        let v = vec![b'f'; 300];
        db.put(&w, &k, &v).unwrap();
        model.insert(k, v);
        if i % 50 == 49 {
            db.flush().unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
    read(&db, &model, "after the fill");
    drop(db);
    let db = Db::open(options(&fs, cfg)).unwrap();
    read(&db, &model, "after the fill, reopened");
}
