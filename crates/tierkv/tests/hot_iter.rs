//! Iterators over a database with a hot store (`hot_tier = "slab"`): they read the store a
//! chunk at a time, so a short scan costs a few slot reads, and they keep reading the state
//! of their creation while flushes supersede the versions they have not reached yet and
//! demotions move those to tables the iterator's version does not hold.

mod common;

use common::{assert_same_entries, hot_slab, hot_slab_options, scan, Entry, Model, MODES};
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{Db, DbIterator, Options, ReadOptions, WalMode, WriteOptions};

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

fn value(round: u32, i: u32) -> Vec<u8> {
    format!("r{round}-{i}-{}", "x".repeat((i % 200) as usize)).into_bytes()
}

fn write_round(db: &Db, round: u32, keys: std::ops::Range<u32>) {
    let w = WriteOptions::default();
    for i in keys {
        db.put(&w, &key(i), &value(round, i)).unwrap();
    }
    db.flush().unwrap();
}

fn entry(it: &DbIterator) -> Entry {
    (it.key().to_vec(), it.value().to_vec())
}

/// Moves `it` one entry on: back if `reverse`.
fn step(it: &mut DbIterator, reverse: bool) {
    if reverse {
        it.prev();
    } else {
        it.next();
    }
}

/// Reads from where `it` stands to its end (`reverse`: to its start), in the order read.
fn rest(it: &mut DbIterator, reverse: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    while it.valid() {
        out.push(entry(it));
        step(it, reverse);
    }
    it.status().unwrap();
    out
}

fn in_range(model: &Model, lo: &[u8], hi: &[u8]) -> Vec<Entry> {
    model
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

#[test]
fn a_short_scan_reads_a_few_slots_of_a_large_store() {
    let fs = FaultFs::new(1);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 8 << 20)).unwrap();
    write_round(&db, 0, 0..5_000);
    let before = db.stats().hot_tier.expect("hot store on");
    assert_eq!(before.objects, 5_000, "every object is in the store");
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek(&key(2_500));
    let mut got = Vec::new();
    while it.valid() && got.len() < 10 {
        got.push(entry(&it));
        it.next();
    }
    it.status().unwrap();
    let want: Vec<_> = (2_500..2_510).map(|i| (key(i), value(0, i))).collect();
    assert_same_entries("a short scan", &got, &want);
    let read = db.stats().hot_tier.unwrap().iterator_slot_reads - before.iterator_slot_reads;
    assert!(
        read <= 100,
        "a scan of 10 keys read {read} slots of a store of 5,000"
    );
    // Unbounded at the low end too: a scan back from the middle is as cheap.
    let before = db.stats().hot_tier.unwrap().iterator_slot_reads;
    it.seek(&key(2_000));
    for _ in 0..10 {
        it.prev();
    }
    assert_eq!(entry(&it), (key(1_990), value(0, 1_990)));
    let read = db.stats().hot_tier.unwrap().iterator_slot_reads - before;
    assert!(read <= 100, "a backward scan of 10 keys read {read} slots");
}

#[test]
fn an_iterator_reads_its_state_while_flushes_supersede_and_demotions_move_objects() {
    for mode in MODES {
        let fs = FaultFs::new(7);
        reads_its_state_while_the_store_changes(hot_slab_options(&fs, mode, 64 << 10), mode);
    }
}

#[test]
fn with_four_partitions_an_iterator_reads_its_state_while_the_store_changes() {
    let fs = FaultFs::new(8);
    let opts = hot_slab(&fs, WalMode::Group, 64 << 10)
        .hot_partitions(4)
        .build()
        .unwrap();
    reads_its_state_while_the_store_changes(opts, WalMode::Group);
    assert_eq!(
        hot_slab_options(&fs, WalMode::Group, 64 << 10)
            .hot_tier
            .partitions,
        1,
        "the default is one store"
    );
}

/// Four iterators stopped early at one state see exactly that state to their ends, in both
/// directions and within bounds, while half the keys are overwritten five times and new
/// keys push the other half out of the store.
fn reads_its_state_while_the_store_changes(opts: Options, mode: WalMode) {
    let db = Db::open(opts).unwrap();
    write_round(&db, 0, 0..400);
    // NB: round 0 alone passes the watermark: its demotion ends before the iterators come,
    // or it might find every object pinned by them and the test would prove nothing.
    db.wait_for_compactions().unwrap();
    let model = scan(&db).unwrap();
    assert_eq!(model.len(), 400, "{mode:?}");

    // Four iterators at this state, each stopped early, one of them at a snapshot the
    // caller drops at once.
    let mut forward = db.iter(ReadOptions::default()).unwrap();
    forward.seek_to_first();
    let mut seen_forward = Vec::new();
    for _ in 0..3 {
        seen_forward.push(entry(&forward));
        forward.next();
    }
    let mut backward = db.iter(ReadOptions::default()).unwrap();
    backward.seek_to_last();
    let mut seen_backward = Vec::new();
    for _ in 0..3 {
        seen_backward.push(entry(&backward));
        backward.prev();
    }
    let snapshot = db.snapshot();
    let mut bounded = db
        .iter(ReadOptions {
            lower_bound: Some(key(100)),
            upper_bound: Some(key(300)),
            ..ReadOptions::at(&snapshot)
        })
        .unwrap();
    drop(snapshot);
    bounded.seek(&key(150));
    let mut mixed = db.iter(ReadOptions::default()).unwrap();
    mixed.seek(&key(200));

    // Half the keys overwritten five times and 80 new keys: flushes supersede what the
    // iterators have not read, and demotions move objects out of the store. Those are the
    // keys of the other half the iterators still need: a key with a version kept for them
    // stays in the store.
    let demoted = db.stats().hot_tier.unwrap().demoted_objects;
    for round in 1..6 {
        write_round(&db, round, 0..200);
        write_round(&db, round, 1_000..1_080);
    }
    db.wait_for_compactions().unwrap();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_objects > demoted, "{mode:?}: {hot:?}");

    seen_forward.extend(rest(&mut forward, false));
    let all: Vec<_> = model.clone().into_iter().collect();
    assert_same_entries(&format!("{mode:?}: forward"), &seen_forward, &all);

    seen_backward.extend(rest(&mut backward, true));
    let mut reversed = all.clone();
    reversed.reverse();
    assert_same_entries(&format!("{mode:?}: backward"), &seen_backward, &reversed);

    assert_same_entries(
        &format!("{mode:?}: bounded, at a dropped snapshot"),
        &rest(&mut bounded, false),
        &in_range(&model, &key(150), &key(300)),
    );

    // Back and forth across chunk boundaries.
    for _ in 0..120 {
        mixed.prev();
    }
    assert_eq!(entry(&mixed).0, key(80), "{mode:?}");
    for _ in 0..250 {
        mixed.next();
    }
    assert_eq!(entry(&mixed).0, key(330), "{mode:?}");
    assert_same_entries(
        &format!("{mode:?}: mixed"),
        &rest(&mut mixed, false),
        &in_range(&model, &key(330), b"l"),
    );

    // A new iterator sees the latest state.
    let now = scan(&db).unwrap();
    assert_eq!(now.len(), 480, "{mode:?}");
    assert_eq!(now[&key(7)], value(5, 7), "{mode:?}");
}

#[test]
fn an_iterator_keeps_seeing_keys_deleted_after_it_started() {
    let fs = FaultFs::new(3);
    let db = Db::open(hot_slab_options(&fs, WalMode::Group, 64 << 10)).unwrap();
    write_round(&db, 0, 0..300);
    let model = scan(&db).unwrap();
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let w = WriteOptions::default();
    for i in (0..300).step_by(2) {
        db.delete(&w, &key(i)).unwrap();
    }
    db.flush().unwrap();
    write_round(&db, 1, 1_000..1_400);
    let got = rest(&mut it, false);
    let want: Vec<_> = model.into_iter().collect();
    assert_same_entries("deleted after the iterator started", &got, &want);
    assert_eq!(scan(&db).unwrap().len(), 150 + 400);
}

/// One generation of every key, written as one batch.
fn write_generation(db: &Db, generation: u32, keys: u32) {
    let mut batch = tierkv::WriteBatch::new();
    for i in 0..keys {
        batch.put(key(i), value(generation, i));
    }
    db.write(&WriteOptions::default(), batch).unwrap();
}

/// The generation of every entry a full scan (forward, or backward if `reverse`) sees,
/// pausing now and then so flushes and demotions run in the middle of it.
fn scan_generations(db: &Db, reverse: bool) -> Vec<(Vec<u8>, u32)> {
    let mut it = db.iter(ReadOptions::default()).unwrap();
    if reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let mut out = Vec::new();
    while it.valid() {
        let v = String::from_utf8(it.value().to_vec()).unwrap();
        let generation: u32 = v[1..v.find('-').unwrap()].parse().unwrap();
        out.push((it.key().to_vec(), generation));
        if out.len() % 64 == 0 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        step(&mut it, reverse);
    }
    it.status().unwrap();
    out
}

#[test]
fn scans_racing_batched_overwrites_flushes_and_demotions_see_one_whole_generation() {
    const KEYS: u32 = 500;
    let fs = FaultFs::new(11);
    let db = Arc::new(Db::open(hot_slab_options(&fs, WalMode::Group, 64 << 10)).unwrap());
    write_generation(&db, 0, KEYS);
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (db, done) = (Arc::clone(&db), Arc::clone(&done));
        std::thread::spawn(move || {
            for generation in 1..=100 {
                write_generation(&db, generation, KEYS);
                if generation % 4 == 0 {
                    db.flush().unwrap();
                }
            }
            done.store(true, std::sync::atomic::Ordering::Release);
        })
    };
    let mut scans = 0;
    while !done.load(std::sync::atomic::Ordering::Acquire) || scans < 4 {
        let reverse = scans % 2 == 1;
        let seen = scan_generations(&db, reverse);
        assert_eq!(seen.len(), KEYS as usize, "scan {scans}: every key once");
        let generation = seen[0].1;
        assert!(
            seen.iter().all(|(_, g)| *g == generation),
            "scan {scans} mixes generations: {:?}",
            seen.iter()
                .map(|(_, g)| g)
                .collect::<std::collections::BTreeSet<_>>()
        );
        scans += 1;
    }
    writer.join().unwrap();
    let hot = db.stats().hot_tier.unwrap();
    assert!(hot.demoted_objects > 0, "demotions ran: {hot:?}");
}
