//! Compactions that install their outputs in chunks (`db::background::Chunks`): each time the
//! merge passes the end of a next-level input, the outputs so far replace the inputs consumed
//! so far in one MANIFEST edit, and the source level's inputs go with the last edit.
//!
//! - Readers see the same data through every chunk: point reads, scans and an old snapshot.
//! - A crash at any of 40 calls spread over a workload full of chunked compactions (sticky
//!   EIO, then power loss or a kill) loses nothing that was flushed, and the reopened database compacts the
//!   duplicates a crash between chunks leaves (source inputs and installed outputs holding
//!   the same entries) into one copy, with the same contents.

mod common;

use common::{key6, sized, Model, TierSetup};
use std::collections::BTreeMap;
use std::sync::Arc;
use tierkv::env::{CrashPolicy, FaultFs, FaultKind, Fs};
use tierkv::{Db, Options, ReadOptions, WriteOptions};

const KEYS: u32 = 3000;

/// `len` bytes determined by `(i, version)`, incompressible enough to give tables their size.
fn value(i: u32, version: u32, len: usize) -> Vec<u8> {
    let mut x = (u64::from(i) << 32 | u64::from(version)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// Small tables and levels, so that L1 and L2 hold many tables and most compactions have
/// several next-level inputs.
fn options(fs: Arc<dyn Fs>) -> Options {
    sized(64 << 10, 32 << 10, 256 << 10)
        .fault_tiers_capped(64 << 20)
        .levels_on_fast(2)
        .l0_compaction_trigger(2)
        .fs(fs)
        .build()
        .expect("valid options")
}

fn put_all(db: &Db, model: &mut Model, version: u32, step: u32) {
    let w = WriteOptions::default();
    for i in (0..KEYS).step_by(step as usize) {
        let v = value(i, version, 700);
        db.put(&w, &key6(i), &v).expect("put");
        model.insert(key6(i), v);
    }
}

fn assert_matches(db: &Db, model: &Model, opts: &ReadOptions, what: &str) {
    for (k, v) in model {
        let got = db.get(opts, k).expect("get");
        assert_eq!(
            got.as_ref(),
            Some(v),
            "{what}: key {:?}",
            String::from_utf8_lossy(k)
        );
    }
    let mut it = db.iter(opts.clone()).expect("iter");
    it.seek_to_first();
    let mut scanned = Model::new();
    while it.valid() {
        scanned.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().expect("scan");
    assert!(scanned == *model, "{what}: the scan differs from the model");
}

#[test]
fn chunked_compactions_keep_what_readers_see() {
    let fs = FaultFs::new(1);
    let db = Db::open(options(fs)).expect("open");
    let mut model = Model::new();
    put_all(&db, &mut model, 0, 1);
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    let snapshot = db.snapshot();
    let before = model.clone();
    let chunks_before = db.stats().compaction_chunks;
    for version in 1..4 {
        put_all(&db, &mut model, version, version + 1);
        // Deletes too, so that chunks also carry tombstones.
        for i in (version..KEYS).step_by(97) {
            db.delete(&WriteOptions::default(), &key6(i))
                .expect("delete");
            model.remove(&key6(i));
        }
    }
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    let stats = db.stats();
    assert!(
        stats.compaction_chunks > chunks_before,
        "no compaction installed a chunk early:\n{stats}"
    );
    assert_matches(&db, &model, &ReadOptions::default(), "latest");
    let at_snapshot = ReadOptions {
        snapshot: Some(snapshot.clone()),
        ..ReadOptions::default()
    };
    assert_matches(&db, &before, &at_snapshot, "snapshot");
    db.verify_checksums().expect("checksums");
}

/// Every key written once, flushed and compacted, on a fresh file system.
fn base_image() -> (Arc<FaultFs>, Db, Model) {
    let fs = FaultFs::new(7);
    let db = Db::open(options(fs.clone())).expect("open");
    let mut base = Model::new();
    put_all(&db, &mut base, 0, 1);
    db.flush().expect("flush");
    db.wait_for_compactions().expect("compactions");
    (fs, db, base)
}

/// One trial: a base image, then overwrites whose flushes and compactions hit a sticky EIO
/// after `fail_at` calls; a crash; a reopen. Returns the chunks installed before the fault.
fn crash_trial(fail_at: Option<u64>, kill: bool) -> u64 {
    let (fs, db, base) = base_image();
    let chunks_before = db.stats().compaction_chunks;
    if let Some(n) = fail_at {
        fs.fail_after(n, FaultKind::Io, false);
    }
    // Every value each key was given after the base, oldest first.
    let mut newer: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    let mut flushed = true;
    for version in 1..3 {
        let w = WriteOptions::default();
        for i in (0..KEYS).step_by(version as usize + 1) {
            let v = value(i, version, 700);
            if db.put(&w, &key6(i), &v).is_err() {
                break;
            }
            newer.entry(key6(i)).or_default().push(v);
        }
    }
    flushed &= db.flush().is_ok();
    flushed &= db.wait_for_compactions().is_ok();
    let chunks = db.stats().compaction_chunks - chunks_before;
    if fail_at.is_none() {
        return chunks;
    }
    // Freeze, crash, then let the dead database's threads go.
    fs.fail_after(0, FaultKind::Io, false);
    if kill {
        fs.process_crash();
    } else {
        fs.crash(CrashPolicy::DropUnsynced);
    }
    drop(db);
    fs.clear_faults();

    let case = format!("fail at {fail_at:?}, kill {kill}");
    let db = Db::open(options(fs.clone())).unwrap_or_else(|e| panic!("{case}: reopen: {e}"));
    let mut seen = Model::new();
    for (k, old) in &base {
        let got = db.get(&ReadOptions::default(), k).expect("get");
        let got = got.unwrap_or_else(|| panic!("{case}: key {k:?} lost"));
        let later = newer.get(k).map(Vec::as_slice).unwrap_or_default();
        assert!(
            got == *old || later.contains(&got),
            "{case}: key {k:?} holds a value never written"
        );
        if flushed {
            let newest = later.last().unwrap_or(old);
            assert_eq!(&got, newest, "{case}: flushed write lost");
        }
        seen.insert(k.clone(), got);
    }
    // Whatever duplicates the crash left, a full compaction merges them into the same state.
    db.compact_range(None, None)
        .unwrap_or_else(|e| panic!("{case}: compact: {e}"));
    assert_matches(&db, &seen, &ReadOptions::default(), &case);
    db.verify_checksums().expect("checksums");
    chunks
}

#[test]
fn crashes_between_chunks_lose_nothing() {
    // Calibration: how many calls the workload makes, and that it installs chunks.
    let fs_ops = base_image().0.op_count();
    assert!(
        crash_trial(None, false) > 0,
        "the workload installs no chunk"
    );
    // The overwrites make roughly as many calls as the base load; crash points spread over
    // them, with the first ones dense.
    let points: Vec<u64> = (0..12)
        .map(|k| k * 7)
        .chain((1..=28).map(|k| fs_ops * k / 28))
        .collect();
    let mut hit_chunks = 0;
    for (i, &n) in points.iter().enumerate() {
        hit_chunks += crash_trial(Some(n), i % 3 == 2);
    }
    assert!(
        hit_chunks > 0,
        "no trial installed a chunk before its fault"
    );
}
