//! Partitions of the hot store (`hot_partitions`): each key lives in exactly one partition's
//! slabs, the one its CRC32C picks; a reopen with the same count reads everything back; a
//! reopen with another count is refused with an error naming the option; one partition keeps
//! the store's original layout.

mod common;

use common::{hot_slab, tiny, TierSetup, FAST};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::{Db, Error, HotTier, Options, ReadOptions, WalMode, WriteOptions};

fn options(fs: &Arc<FaultFs>, partitions: usize) -> Options {
    // NB: the group-commit WAL is the default.
    hot_slab(fs, WalMode::Group, 4 << 20)
        .hot_partitions(partitions)
        .build()
        .expect("valid options")
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    let len = 20 + (i as usize * 37) % 900;
    vec![b'a' + ((i + round) % 26) as u8; len]
}

/// Writes keys `0..n` (every seventh deleted in round 1), flushing now and then; returns what
/// the database must hold.
fn write_rounds(db: &Db, n: u32) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let w = WriteOptions::default();
    let mut model = BTreeMap::new();
    for round in 0..2 {
        for i in 0..n {
            if round == 1 && i % 7 == 0 {
                db.delete(&w, &key(i)).unwrap();
                model.remove(&key(i));
            } else {
                db.put(&w, &key(i), &value(i, round)).unwrap();
                model.insert(key(i), value(i, round));
            }
            if i % 500 == 499 {
                db.flush().unwrap();
            }
        }
    }
    db.flush().unwrap();
    model
}

fn check_reads(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, n: u32, what: &str) {
    for i in 0..n {
        let got = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(got.as_ref(), model.get(&key(i)), "{what}: key {i}");
    }
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut scanned = BTreeMap::new();
    while it.valid() {
        scanned.insert(it.key().to_vec(), it.value().to_vec());
        it.next();
    }
    it.status().unwrap();
    assert!(scanned == *model, "{what}: the scan differs from the model");
}

/// The user keys of every slot with a version in the slab files of `dir`.
fn keys_in_slabs(fs: &FaultFs, dir: &Path) -> BTreeSet<Vec<u8>> {
    let mut keys = BTreeSet::new();
    for name in fs.list_dir(dir).unwrap() {
        let Some(size) = name
            .strip_suffix(".slab")
            .and_then(|stem| stem.rsplit('-').next())
            .and_then(|s| s.parse::<usize>().ok())
        else {
            continue;
        };
        let bytes = tierkv::env::read_file(fs, &dir.join(&name)).unwrap();
        for page in bytes.chunks(4096) {
            for slot in page.chunks_exact(size).take(4096 / size) {
                if let Some(s) = tierkv::inspect::decode_hot_slot(slot).unwrap() {
                    keys.insert(s.key);
                }
            }
        }
    }
    keys
}

fn hot_dir() -> PathBuf {
    Path::new(FAST).join("hot")
}

#[test]
fn each_key_lives_in_the_one_partition_its_hash_picks_and_reopen_reads_everything() {
    let fs = FaultFs::new(21);
    let n = 1500;
    let db = Db::open(options(&fs, 4)).unwrap();
    let model = write_rounds(&db, n);
    check_reads(&db, &model, n, "before reopen");
    let hot = db.stats().hot_tier.expect("hot store on");
    assert_eq!(hot.partitions.len(), 4, "{hot:?}");
    assert!(hot.partitions.iter().all(|p| p.0 > 200), "{hot:?}");
    assert_eq!(hot.partitions.iter().map(|p| p.0).sum::<u64>(), hot.objects);
    drop(db);

    // On disk: hot/PARTITIONS says 4, and part-II holds exactly the keys hashing to II.
    let record = tierkv::env::read_file(fs.as_ref(), &hot_dir().join("PARTITIONS")).unwrap();
    assert_eq!(record, b"4\n");
    let mut seen = BTreeSet::new();
    for part in 0..4 {
        let keys = keys_in_slabs(&fs, &hot_dir().join(format!("part-{part:02}")));
        assert!(!keys.is_empty(), "partition {part} is empty");
        for k in keys {
            assert_eq!(crc32c::crc32c(&k) as usize % 4, part, "{k:?}");
            assert!(seen.insert(k), "a key in two partitions");
        }
    }
    assert_eq!(seen.len(), n as usize, "every key written has a slot");
    assert!(
        keys_in_slabs(&fs, &hot_dir()).is_empty(),
        "nothing in hot/ itself"
    );

    let db = Db::open(options(&fs, 4)).unwrap();
    check_reads(&db, &model, n, "after reopen");
    // Updates after the reopen go to the same partitions as before.
    let w = WriteOptions::default();
    db.put(&w, &key(3), b"newer").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = Db::open(options(&fs, 4)).unwrap();
    assert_eq!(
        db.get(&ReadOptions::default(), &key(3)).unwrap().unwrap(),
        b"newer"
    );
}

#[test]
fn reopening_with_another_partition_count_is_refused_naming_the_option() {
    let fs = FaultFs::new(22);
    let db = Db::open(options(&fs, 4)).unwrap();
    let model = write_rounds(&db, 300);
    drop(db);
    for other in [1, 2, 8] {
        match Db::open(options(&fs, other)) {
            Err(Error::InvalidArgument(m)) => {
                assert!(m.contains(&format!("hot_partitions = {other}")), "{m}");
                assert!(m.contains("hot_partitions = 4"), "{m}");
            }
            Err(e) => panic!("expected InvalidArgument, got {e}"),
            Ok(_) => panic!("opened a 4-partition store with {other} partitions"),
        }
    }
    // Without the store its partitions' objects would be missing: refused as well.
    let off = tiny()
        .fault_tiers()
        .hot_tier(HotTier::Off)
        .fs(fs.clone())
        .build()
        .unwrap();
    assert!(matches!(Db::open(off), Err(Error::InvalidArgument(_))));
    // Refusing touched nothing: the right count still reads every key.
    let db = Db::open(options(&fs, 4)).unwrap();
    check_reads(&db, &model, 300, "after the refused opens");
}

#[test]
fn one_partition_keeps_the_original_layout_and_refuses_more_partitions() {
    let fs = FaultFs::new(23);
    let db = Db::open(options(&fs, 1)).unwrap();
    let model = write_rounds(&db, 300);
    drop(db);
    let names = fs.list_dir(&hot_dir()).unwrap();
    assert!(!names
        .iter()
        .any(|n| n == "PARTITIONS" || n.starts_with("part-")));
    assert_eq!(keys_in_slabs(&fs, &hot_dir()).len(), 300);
    match Db::open(options(&fs, 4)) {
        Err(Error::InvalidArgument(m)) => assert!(m.contains("hot_partitions = 1"), "{m}"),
        Err(e) => panic!("expected InvalidArgument, got {e}"),
        Ok(_) => panic!("opened a 1-partition store with 4 partitions"),
    }
    let db = Db::open(options(&fs, 1)).unwrap();
    check_reads(&db, &model, 300, "reopened with one partition");
}

#[test]
fn an_empty_store_takes_the_count_it_is_opened_with() {
    let fs = FaultFs::new(24);
    drop(Db::open(options(&fs, 1)).unwrap());
    // No object was ever flushed: any count may follow, and the first data fixes it.
    let db = Db::open(options(&fs, 2)).unwrap();
    let model = write_rounds(&db, 200);
    drop(db);
    assert!(Db::open(options(&fs, 1)).is_err());
    let db = Db::open(options(&fs, 2)).unwrap();
    check_reads(&db, &model, 200, "reopened with two partitions");
}

/// A first open that crashed while it wrote the partitions' record (or a partition's first
/// journal) leaves only temporary files in the store's directory: the next open creates the
/// database there, not refuses the directory as someone else's.
#[test]
fn a_creation_cut_short_in_the_stores_atomic_writes_leaves_a_directory_a_new_open_takes() {
    let fs = FaultFs::new(0);
    let hot = Path::new(FAST).join("hot");
    fs.create_dir_all(&hot.join("part-00")).unwrap();
    fs.write_raw(&hot.join("PARTITIONS.tmp"), b"4\n");
    fs.write_raw(&hot.join("part-00").join("HOT-JOURNAL.tmp"), b"TKVHOTJ1");
    let db = Db::open(options(&fs, 4)).expect("a new database over the leftovers");
    db.put(&WriteOptions::default(), b"k", b"v").unwrap();
    db.flush().unwrap();
    drop(db);
    let db = Db::open(options(&fs, 4)).unwrap();
    assert_eq!(
        db.get(&ReadOptions::default(), b"k").unwrap(),
        Some(b"v".to_vec())
    );
}
