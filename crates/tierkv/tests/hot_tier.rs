//! The hot store (`hot_tier = "slab"`): what goes into slabs and what stays in the LSM, reads
//! at snapshots across hot updates, large values of hot keys, deletes shadowing older LSM
//! versions, recovery from slabs alone, demotion, damaged slots and the stats.

mod common;

use common::{hot_slab_options, tiny, write_two_slab_jobs, TierSetup, FAST, MODES};
use std::path::Path;
use tierkv::env::FaultFs;
use tierkv::{Db, Error, HotTier, MscPolicy, Options, ReadOptions, WalMode, WriteOptions};

fn get(db: &Db, k: &[u8]) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), k).unwrap()
}

/// Bytes of the hot store's slab files.
fn slab_bytes(fs: &FaultFs) -> u64 {
    use tierkv::env::Fs;
    let dir = Path::new(FAST).join("hot");
    fs.list_dir(&dir)
        .unwrap()
        .iter()
        .filter(|name| name.ends_with(".slab"))
        .map(|name| fs.file_size(&dir.join(name)).unwrap())
        .sum()
}

fn all(db: &Db) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    it.status().unwrap();
    out
}

#[test]
fn flushed_small_objects_live_in_slabs_and_survive_reopen() {
    for mode in MODES {
        let fs = FaultFs::new(1);
        let db = Db::open(hot_slab_options(&fs, mode, 1 << 20)).unwrap();
        let w = WriteOptions::default();
        for i in 0..200u32 {
            db.put(
                &w,
                format!("k{i:04}").as_bytes(),
                &vec![b'a' + (i % 26) as u8; 50 + i as usize],
            )
            .unwrap();
        }
        db.flush().unwrap();
        let s = db.stats();
        let hot = s.hot_tier.clone().expect("hot store on");
        assert_eq!(hot.objects, 200, "{mode:?}: {hot:?}");
        assert!(hot.by_class.iter().filter(|c| c.1 > 0).count() >= 3);
        assert_eq!(s.levels[0].files, 0, "{mode:?}: nothing went to L0");
        // The slab I/O is counted: a slot write per object, packed into pages (a slot is
        // at least 100 bytes, so at most 40 share a page).
        assert!(hot.jobs >= 1, "{mode:?}: {hot:?}");
        assert_eq!(hot.job_slot_writes, 200, "{mode:?}: {hot:?}");
        assert!(
            (5..=200).contains(&hot.job_pages),
            "{mode:?}: {} pages for 200 slots",
            hot.job_pages
        );
        assert_eq!(get(&db, b"k0007").unwrap().len(), 57);
        assert!(db.stats().hot_tier.unwrap().reads_hot >= 1);
        drop(db);
        // The WAL is gone after the flush: the index comes back from the slabs.
        let db = Db::open(hot_slab_options(&fs, mode, 1 << 20)).unwrap();
        assert_eq!(all(&db).len(), 200);
        assert_eq!(
            get(&db, b"k0199").unwrap(),
            vec![b'a' + (199 % 26) as u8; 249]
        );
        // New writes are numbered after every version in the slabs.
        db.put(&w, b"k0007", b"newer").unwrap();
        db.flush().unwrap();
        assert_eq!(get(&db, b"k0007").unwrap(), b"newer");
        drop(db);
        let db = Db::open(hot_slab_options(&fs, mode, 1 << 20)).unwrap();
        assert_eq!(get(&db, b"k0007").unwrap(), b"newer");
        drop(db);
        // Without the store its objects would be missing: such an open is refused.
        let off = tiny()
            .fault_tiers()
            .wal(mode)
            .fs(fs.clone())
            .build()
            .unwrap();
        match Db::open(off) {
            Err(Error::InvalidArgument(msg)) => assert!(msg.contains("hot_tier"), "{msg}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
}

/// Updates of keys in the store free their old slots once the flush commits, uncleared (the
/// newer version outranks them in recovery), and the next flush reuses them: one slot write
/// per update, about three 1 KiB slots to a page. The old versions stay harmless across a
/// reopen.
#[test]
fn updates_write_one_slot_each_and_reuse_the_slots_they_free() {
    let fs = FaultFs::new(3);
    let opts = hot_slab_options(&fs, WalMode::Group, 16 << 20);
    let db = Db::open(opts.clone()).unwrap();
    let w = WriteOptions::default();
    let before = |db: &Db| {
        let h = db.stats().hot_tier.unwrap();
        (h.job_slot_writes, h.job_pages)
    };
    let mut slots_after_load = 0;
    for round in 0..4u8 {
        let (slots0, pages0) = before(&db);
        for i in 0..3000u32 {
            db.put(&w, format!("k{i:05}").as_bytes(), &[b'a' + round; 1000])
                .unwrap();
        }
        db.flush().unwrap();
        let (slots1, pages1) = before(&db);
        let (slots, pages) = (slots1 - slots0, pages1 - pages0);
        assert_eq!(slots, 3000, "round {round}: {slots} slot writes");
        assert!(
            pages * 2 <= slots,
            "round {round}: {slots} slot writes in {pages} pages"
        );
        let hot = db.stats().hot_tier.unwrap();
        // The slots the last flush superseded wait, uncleared, for the next one.
        let ghosts = if round == 0 { 0..=0 } else { 1..=3000 };
        assert!(ghosts.contains(&hot.ghost_slots), "round {round}: {hot:?}");
        assert_eq!(hot.free_slots, hot.ghost_slots, "round {round}: {hot:?}");
        let file_bytes = slab_bytes(&fs);
        if round == 0 {
            slots_after_load = file_bytes;
        } else {
            // The freed slots are reused: the slabs grow by one round's worth at most.
            assert!(file_bytes <= 2 * slots_after_load + 8192, "round {round}");
        }
    }
    let check = |db: &Db| {
        for i in (0..3000u32).step_by(7) {
            assert_eq!(
                get(db, format!("k{i:05}").as_bytes()).unwrap(),
                [b'd'; 1000]
            );
        }
    };
    check(&db);
    drop(db);
    let db = Db::open(opts).unwrap();
    check(&db);
    assert_eq!(db.stats().hot_tier.unwrap().objects, 3000);
}

/// A demoted key's superseded versions left in free slots (not yet reused) are cleared
/// with it: after a reopen the key reads as its demoted version from the tables, never as an
/// older one the slabs still held.
#[test]
fn a_demoted_key_leaves_no_older_version_in_the_slabs() {
    let fs = FaultFs::new(6);
    let opts = tiny()
        .fault_tiers()
        .hot_tier(HotTier::Slab)
        .hot_budget(64 << 10)
        .hot_admission(tierkv::HotAdmission::MakeRoom)
        .fs(fs.clone())
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let w = WriteOptions::default();
    let g = |i: u32| format!("g{i:03}").into_bytes();
    // 1 KiB slots, most of the budget; then each superseded, its old slot free.
    for tag in [b'o', b'n'] {
        for i in 0..56u32 {
            db.put(&w, &g(i), &[tag; 900]).unwrap();
        }
        db.flush().unwrap();
    }
    // Keys of another slot class: room is made for them by demoting `g` keys, and they
    // reuse none of the `g` keys' free slots.
    for i in 0..10u32 {
        db.put(&w, format!("h{i:03}").as_bytes(), &[b'h'; 2000])
            .unwrap();
    }
    db.flush().unwrap();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_objects >= 10, "{hot:?}");
    assert_eq!(hot.ghost_clears, hot.demoted_objects, "{hot:?}");
    drop(db);
    let db = Db::open(opts).unwrap();
    for i in 0..56u32 {
        let got = get(&db, &g(i)).unwrap();
        assert!(got == [b'n'; 900], "key {i}: {:?}", &got[..4]);
    }
    assert_eq!(all(&db).len(), 66);
}

#[test]
fn large_values_of_hot_keys_go_to_the_lsm_and_stay_newest() {
    let fs = FaultFs::new(2);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)).unwrap();
    let w = WriteOptions::default();
    db.put(&w, b"key", b"small").unwrap();
    db.put(&w, b"other", b"x").unwrap();
    db.flush().unwrap();
    let big = vec![7u8; 10_000];
    db.put(&w, b"key", &big).unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().levels[0].files, 1, "the large value went to L0");
    assert_eq!(get(&db, b"key").unwrap(), big);
    assert_eq!(all(&db)[0], (b"key".to_vec(), big.clone()));
    // Back to a small value: the hot store answers again.
    db.put(&w, b"key", b"small again").unwrap();
    db.flush().unwrap();
    assert_eq!(get(&db, b"key").unwrap(), b"small again");
    db.compact_range(None, None).unwrap();
    assert_eq!(get(&db, b"key").unwrap(), b"small again");
    drop(db);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)).unwrap();
    assert_eq!(get(&db, b"key").unwrap(), b"small again");
    // A large value first: the key never enters the store.
    db.put(&w, b"big-first", &big).unwrap();
    db.flush().unwrap();
    assert_eq!(get(&db, b"big-first").unwrap(), big);
}

#[test]
fn snapshots_keep_reading_versions_a_hot_update_replaced() {
    let fs = FaultFs::new(3);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)).unwrap();
    let w = WriteOptions::default();
    db.put(&w, b"k", b"v1").unwrap();
    db.flush().unwrap();
    let s1 = db.snapshot();
    db.put(&w, b"k", b"v2").unwrap();
    db.flush().unwrap();
    let s2 = db.snapshot();
    db.delete(&w, b"k").unwrap();
    db.flush().unwrap();
    let at = |s: &tierkv::Snapshot| db.get(&ReadOptions::at(s), b"k").unwrap();
    assert_eq!(at(&s1).as_deref(), Some(&b"v1"[..]));
    assert_eq!(at(&s2).as_deref(), Some(&b"v2"[..]));
    assert_eq!(get(&db, b"k"), None);
    assert_eq!(db.stats().hot_tier.unwrap().objects, 3);
    drop(s1);
    drop(s2);
    // The next flush frees what no snapshot reads any more.
    db.put(&w, b"j", b"x").unwrap();
    db.flush().unwrap();
    db.put(&w, b"j", b"y").unwrap();
    db.flush().unwrap();
    assert_eq!(db.stats().hot_tier.unwrap().objects, 2);
    assert_eq!(get(&db, b"k"), None);
}

#[test]
fn a_hot_delete_shadows_an_older_lsm_version() {
    let fs = FaultFs::new(4);
    // A budget too small for anything: the first flush goes to L0.
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 64 << 10)).unwrap();
    let w = WriteOptions::default();
    db.put(&w, b"k", &vec![1u8; 3000]).unwrap();
    for i in 0..30u32 {
        db.put(&w, format!("f{i}").as_bytes(), &vec![2u8; 3000])
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let stats = db.stats();
    let lsm_tables: u64 = stats.levels.iter().map(|l| l.files).sum();
    assert!(lsm_tables > 0);
    // Demotion brought the store under its budget; "k" is somewhere in the LSM or store.
    assert!(get(&db, b"k").is_some());
    db.delete(&w, b"k").unwrap();
    db.flush().unwrap();
    assert_eq!(get(&db, b"k"), None);
    assert!(all(&db).iter().all(|(k, _)| k != b"k"));
    drop(db);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 64 << 10)).unwrap();
    assert_eq!(get(&db, b"k"), None);
}

#[test]
fn demotion_keeps_the_store_under_budget_and_every_value_readable() {
    for policy in [
        MscPolicy::Random,
        MscPolicy::RoundRobin,
        MscPolicy::Precise,
        MscPolicy::Approximate,
    ] {
        let fs = FaultFs::new(5);
        let opts = tiny()
            .fault_tiers()
            .hot_tier(HotTier::Slab)
            .hot_budget(64 << 10)
            .msc_policy(policy)
            .fs(fs.clone())
            .build()
            .unwrap();
        let db = Db::open(opts.clone()).unwrap();
        let w = WriteOptions::default();
        for round in 0..6u32 {
            for i in 0..400u32 {
                let v = format!("r{round}-{i}-{}", "x".repeat((i % 300) as usize * 2));
                db.put(&w, format!("k{i:05}").as_bytes(), v.as_bytes())
                    .unwrap();
                // A few keys read often: they are the popular ones.
                if i % 50 == 0 {
                    for _ in 0..3 {
                        get(&db, format!("k{:05}", i % 7).as_bytes());
                    }
                }
            }
            db.flush().unwrap();
        }
        let hot = db.stats().hot_tier.unwrap();
        assert!(hot.demoted_objects > 0, "{policy:?}: {hot:?}");
        // Batched reads see the same as point reads, whether the store or a table answers.
        let keys: Vec<Vec<u8>> = (0..420u32)
            .map(|i| format!("k{i:05}").into_bytes())
            .collect();
        let got = db.multi_get(&ReadOptions::default(), &keys).unwrap();
        for (k, v) in keys.iter().zip(&got) {
            assert_eq!(v, &get(&db, k), "{policy:?}: multi_get of {k:?}");
        }
        assert!(hot.bytes <= 64 << 10, "{policy:?}: {hot:?}");
        for i in 0..400u32 {
            let want = format!("r5-{i}-{}", "x".repeat((i % 300) as usize * 2));
            assert_eq!(
                get(&db, format!("k{i:05}").as_bytes()).unwrap(),
                want.as_bytes()
            );
        }
        assert_eq!(all(&db).len(), 400);
        drop(db);
        let db = Db::open(opts).unwrap();
        assert_eq!(all(&db).len(), 400);
        assert_eq!(
            get(&db, b"k00399").unwrap(),
            format!("r5-399-{}", "x".repeat(198)).as_bytes()
        );
    }
}

/// Point reads racing flushes that supersede every key's slot (and free it for the next
/// flush to reuse) always see at least the last version written before they started, and
/// never mistake a reused slot for damage.
#[test]
fn reads_racing_flushes_that_free_and_reuse_slots_see_every_finished_write() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    const KEYS: u32 = 200;
    const ROUNDS: u32 = 150;
    let key = |i: u32| format!("key{i:04}").into_bytes();
    let value = |round: u32, i: u32| format!("{round:05}-{i}-{}", "v".repeat(40)).into_bytes();
    let round_of = |v: &[u8]| -> u32 { std::str::from_utf8(&v[..5]).unwrap().parse().unwrap() };
    let fs = FaultFs::new(3);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)).unwrap();
    let w = WriteOptions::default();
    for i in 0..KEYS {
        db.put(&w, &key(i), &value(0, i)).unwrap();
    }
    db.flush().unwrap();
    let finished = AtomicU32::new(0);
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2u32)
            .map(|t| {
                let (db, finished, done) = (&db, &finished, &done);
                s.spawn(move || {
                    let mut n = 0u64;
                    let mut i = t;
                    while !done.load(Ordering::Acquire) {
                        i = (i * 7 + 13) % KEYS;
                        let at_least = finished.load(Ordering::Acquire);
                        let got = get(db, &key(i)).expect("every key has a value");
                        assert!(
                            round_of(&got) >= at_least,
                            "key {i}: round {} read after round {at_least} finished",
                            round_of(&got)
                        );
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        for round in 1..=ROUNDS {
            for i in 0..KEYS {
                db.put(&w, &key(i), &value(round, i)).unwrap();
            }
            finished.store(round, Ordering::Release);
            db.flush().unwrap();
        }
        done.store(true, Ordering::Release);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    let hot = db.stats().hot_tier.unwrap();
    assert_eq!(hot.objects, KEYS as u64, "one version per key: {hot:?}");
    assert!(hot.reads_hot > 0 && reads > 0, "{reads} reads, {hot:?}");
}

#[test]
fn a_damaged_slot_is_corruption_naming_file_and_offset() {
    let fs = FaultFs::new(6);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)).unwrap();
    write_two_slab_jobs(&db);
    drop(db);
    // Slot 3 of the 100-byte class: its key byte.
    let slab = Path::new(FAST).join("hot").join("slab-00-0100.slab");
    fs.flip_bit(&slab, 300 + 19, 0);
    match Db::open(hot_slab_options(&fs, WalMode::Group, 1 << 20)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, slab);
            assert_eq!(offset, 300);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn hot_tier_options_from_toml() {
    let opts = Options::from_toml_str(
        r#"
        hot_tier = "slab"
        [[tier]]
        name = "fast"
        path = "/tmp/x"
        "#,
    )
    .unwrap();
    assert_eq!(opts.hot_tier.mode, HotTier::Slab);
    let opts = Options::from_toml_str(
        r#"
        [hot_tier]
        mode = "slab"
        budget = "64 MiB"
        msc_policy = "round-robin"
        [[tier]]
        name = "fast"
        path = "/tmp/x"
        "#,
    )
    .unwrap();
    assert_eq!(opts.hot_tier.budget, 64 << 20);
    assert_eq!(opts.hot_tier.msc_policy, MscPolicy::RoundRobin);
    assert_eq!(Options::default().hot_tier.mode, HotTier::Off);
}
