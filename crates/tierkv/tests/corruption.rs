//! Damaged bytes are reported, never returned as data.
//!
//! Bit flips in a WAL (before synced records; at the end of a sealed WAL that a newer one
//! follows; swept over a whole WAL in the default and the lenient recovery modes), in a table
//! (a data block on FaultFs and on real files; swept over a whole table; under a compaction), in
//! the MANIFEST and in a tier identity file; a garbage or missing CURRENT; a missing or truncated
//! table. Each must surface as `Error::Corruption` naming the damaged file (a read touching a
//! damaged block fails, reads elsewhere still work, nothing wrong is returned), and undoing the
//! damage must give back every byte stored before.

mod common;

use common::{
    assert_scan_matches, compacted_tables, damage_options, fill_noise, key6, middle_table,
    noise_value, tiny, FsImage, Model, TierSetup, CAPACITY, FAST,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::{
    Db, Durability, Error, LiveFile, Options, ReadOptions, RecoveryMode, Result, WriteOptions,
};

fn options(fs: &Arc<FaultFs>) -> Options {
    damage_options(fs)
}

fn with_mode(fs: &Arc<FaultFs>, mode: RecoveryMode) -> Options {
    let mut opts = options(fs);
    opts.wal.recovery_mode = mode;
    opts
}

fn assert_holds(db: &Db, model: &Model, what: &str) {
    assert_scan_matches(db, model, what);
    for (k, v) in model {
        let got = db.get(&ReadOptions::default(), k).unwrap();
        assert_eq!(
            got.as_ref(),
            Some(v),
            "{what}: get {}",
            String::from_utf8_lossy(k)
        );
    }
}

/// `result` must be `Corruption` naming `file`, with the file named in the message too.
/// Returns the reported offset.
#[track_caller]
fn expect_corruption<T: std::fmt::Debug>(result: Result<T>, file: &Path, what: &str) -> u64 {
    match &result {
        Err(
            e @ Error::Corruption {
                file: named,
                offset,
                ..
            },
        ) => {
            let msg = e.to_string();
            assert_eq!(
                named, file,
                "{what}: corruption names the wrong file: {msg}"
            );
            assert!(
                msg.contains(&*file.to_string_lossy()),
                "{what}: message {msg:?}"
            );
            *offset
        }
        other => panic!(
            "{what}: expected corruption in {}, got {other:?}",
            file.display()
        ),
    }
}

fn files_in(fs: &FaultFs, dir: &str, ext: &str) -> Vec<PathBuf> {
    let mut names = fs.list_dir(Path::new(dir)).unwrap();
    names.sort();
    names
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .map(|n| Path::new(dir).join(n))
        .collect()
}

/// Record offsets of a log file (`docs/log-format.md`: a 20-byte header whose bytes 4..8 hold
/// the payload length, then the payload; records follow one another with no padding).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 20 <= bytes.len() {
        offsets.push(at);
        let len = u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
        at += 20 + len;
    }
    assert_eq!(
        at,
        bytes.len(),
        "log file does not end at a record boundary"
    );
    offsets
}

/// The live WALs holding records, oldest first.
fn wals_with_records(fs: &FaultFs) -> Vec<PathBuf> {
    files_in(fs, FAST, ".log")
        .into_iter()
        .filter(|p| !fs.file_contents(p).unwrap().is_empty())
        .collect()
}

// ---------------------------------------------------------------------------------------------
// WAL
// ---------------------------------------------------------------------------------------------

/// 100 `Sync` puts in one WAL, then a clean close; returns the WAL and its record offsets.
fn synced_wal(fs: &Arc<FaultFs>) -> (Model, PathBuf, Vec<usize>) {
    let db = Db::open(options(fs)).unwrap();
    let model = fill_noise(&db, 0..100, Durability::Sync);
    drop(db);
    let wals = wals_with_records(fs);
    assert_eq!(wals.len(), 1, "expected one WAL with records: {wals:?}");
    let offsets = record_offsets(&fs.file_contents(&wals[0]).unwrap());
    assert_eq!(offsets.len(), 100, "one record per put");
    (model, wals[0].clone(), offsets)
}

/// A flipped bit in a record that later synced records follow cannot be a torn write: the
/// default mode (and AbsoluteConsistency) refuse to open, naming the WAL and the record.
#[test]
fn wal_flip_before_synced_records_fails_open() {
    let fs = FaultFs::new(1);
    let (model, wal, offsets) = synced_wal(&fs);
    // A payload byte of record 50: its header stays valid, so the reader knows its extent.
    fs.flip_bit(&wal, offsets[50] as u64 + 30, 3);
    for mode in [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
    ] {
        let offset = expect_corruption(
            Db::open(with_mode(&fs, mode)),
            &wal,
            &format!("open in {mode}"),
        );
        assert_eq!(
            offset, offsets[50] as u64,
            "{mode}: offset of the damaged record"
        );
    }
    // Undoing the flip gives everything back: the failed opens changed nothing.
    fs.flip_bit(&wal, offsets[50] as u64 + 30, 3);
    let db = Db::open(options(&fs)).unwrap();
    assert_holds(&db, &model, "after undoing the flip");
}

/// PointInTime opens with the records before the damage; SkipAnyCorruptedRecords skips just the
/// damaged record. Either way the database is usable and reopens in the default mode.
#[test]
fn wal_flip_in_lenient_modes_opens_with_what_is_intact() {
    let cases = [
        (RecoveryMode::PointInTime, (0..50).collect::<Vec<usize>>()),
        (
            RecoveryMode::SkipAnyCorruptedRecords,
            (0..100).filter(|&i| i != 50).collect(),
        ),
    ];
    for (mode, kept) in cases {
        let fs = FaultFs::new(2);
        let (_, wal, offsets) = synced_wal(&fs);
        fs.flip_bit(&wal, offsets[50] as u64 + 30, 0);
        let db = Db::open(with_mode(&fs, mode))
            .unwrap_or_else(|e| panic!("{mode}: open with a damaged WAL: {e}"));
        let mut model: Model = kept.iter().map(|&i| (key6(i), noise_value(i))).collect();
        assert_holds(&db, &model, &format!("{mode} recovery"));
        db.put(&WriteOptions::sync(), b"after", b"recovery")
            .unwrap();
        model.insert(b"after".to_vec(), b"recovery".to_vec());
        drop(db);
        // The damaged WAL was replaced by what recovery kept: a default open works.
        let db = Db::open(options(&fs))
            .unwrap_or_else(|e| panic!("{mode}: default reopen after recovery: {e}"));
        assert_holds(&db, &model, &format!("{mode}, then a default reopen"));
    }
}

/// `Sync` puts until the memtable switches to a second WAL, with flushes impossible (L0 goes to
/// a capacity tier that is out of space), so both WALs stay live; then up to `extra` more puts
/// (fewer if the failed flush has already stopped writes). Returns
/// the options, the two WALs and how many puts were acknowledged.
fn two_live_wals(fs: &Arc<FaultFs>, extra: usize) -> (Options, PathBuf, PathBuf, usize) {
    let mut opts = options(fs);
    opts.placement.levels_on_fast = 0;
    fs.create_dir_all(Path::new(CAPACITY)).unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let used: u64 = files_in(fs, CAPACITY, "")
        .iter()
        .map(|p| fs.file_contents(p).unwrap().len() as u64)
        .sum();
    fs.set_space_limit(Path::new(CAPACITY), Some(used));
    let mut acked = 0;
    let mut left = None;
    while left != Some(0) {
        match db.put(&WriteOptions::sync(), &key6(acked), &noise_value(acked)) {
            Ok(()) => {}
            // The failing flush stops writes by design; the newer WAL already holds at least
            // one acknowledged record, which is what the callers need.
            Err(_) if left.is_some() => break,
            Err(e) => panic!("put {acked}: {e}"),
        }
        acked += 1;
        left = match left {
            None if wals_with_records(fs).len() == 2 => Some(extra),
            None => None,
            Some(n) => Some(n - 1),
        };
    }
    drop(db);
    fs.set_space_limit(Path::new(CAPACITY), None);
    let wals = wals_with_records(fs);
    assert_eq!(wals.len(), 2, "expected two live WALs: {wals:?}");
    (opts, wals[0].clone(), wals[1].clone(), acked)
}

/// Two live WALs, the older one sealed after its records were synced, the newer one with
/// up to `extra + 1` synced records (at least one: the failing flush may stop writes sooner). A flip in the older WAL's last record: nothing later in that
/// file vouches for it, but the newer WAL's synced records do (the older WAL was durable before
/// the newer one acknowledged anything), so it is corruption, not a torn tail; quietly ending
/// the history there would also drop the newer WAL's intact, acknowledged records.
fn damage_at_the_end_of_a_sealed_wal(extra: usize) {
    let fs = FaultFs::new(3);
    let (opts, old, new, acked) = two_live_wals(&fs, extra);
    let offsets = record_offsets(&fs.file_contents(&old).unwrap());
    let last = *offsets.last().unwrap() as u64;
    fs.flip_bit(&old, last + 25, 5);
    let what = format!(
        "{} puts, {} in {}",
        acked,
        acked - offsets.len(),
        new.display()
    );
    expect_corruption(
        Db::open(opts.clone()),
        &old,
        &format!("default open ({what})"),
    );
    // PointInTime stops at the damage: the prefix before the damaged record, no hole.
    let mut pit = opts.clone();
    pit.wal.recovery_mode = RecoveryMode::PointInTime;
    let db = Db::open(pit).unwrap_or_else(|e| panic!("PointInTime open: {e}"));
    let prefix = offsets.len() - 1;
    let model: Model = (0..prefix).map(|i| (key6(i), noise_value(i))).collect();
    assert_holds(&db, &model, "PointInTime with a damaged sealed WAL");
}

#[test]
fn damage_at_the_end_of_a_sealed_wal_before_several_synced_records() {
    damage_at_the_end_of_a_sealed_wal(3);
}

/// BUG-6: the newer WAL holds a single synced record, written with `synced_through = 0`
/// because the older WAL was already fully synced when it was sealed, so no evidence record
/// was written first.
#[test]
fn damage_at_the_end_of_a_sealed_wal_before_one_synced_record() {
    damage_at_the_end_of_a_sealed_wal(0);
}

/// Bit flips all over a synced WAL (a stride of bytes, every bit number): damage before the last
/// record is `Corruption` at the damaged record in the default mode, and a clean prefix in
/// PointInTime; damage in the last record (which nothing later vouches for) may end the log
/// there. Never a hole, never a wrong value.
#[test]
fn wal_flip_sweep_never_yields_a_hole() {
    let fs = FaultFs::new(9);
    let db = Db::open(options(&fs)).unwrap();
    fill_noise(&db, 0..40, Durability::Sync);
    drop(db);
    let wal = wals_with_records(&fs).pop().unwrap();
    let offsets = record_offsets(&fs.file_contents(&wal).unwrap());
    let len = fs.file_contents(&wal).unwrap().len();
    let record_of = |at: usize| offsets.iter().rposition(|&o| o <= at).unwrap();
    let img = FsImage::take(&fs);
    let mut checked = 0;
    for at in (0..len).step_by(13) {
        let bit = (at % 8) as u8;
        let r = record_of(at);
        let what = format!("bit {bit} of byte {at} (record {r} of {})", offsets.len());
        let before: Model = (0..r).map(|i| (key6(i), noise_value(i))).collect();
        let fs = img.materialize(0);
        fs.flip_bit(&wal, at as u64, bit);
        match Db::open(options(&fs)) {
            Ok(db) if r == offsets.len() - 1 => assert_holds(&db, &before, &what),
            result => {
                let offset = expect_corruption(result, &wal, &what);
                assert_eq!(offset, offsets[r] as u64, "{what}: reported offset");
            }
        }
        let fs = img.materialize(0);
        fs.flip_bit(&wal, at as u64, bit);
        let db = Db::open(with_mode(&fs, RecoveryMode::PointInTime))
            .unwrap_or_else(|e| panic!("{what}: PointInTime: {e}"));
        assert_holds(&db, &before, &format!("{what}, PointInTime"));
        checked += 1;
    }
    assert!(checked > 100, "{checked} flips");
}

/// Bit flips all over one table (a stride of bytes, every bit number, and the whole footer):
/// every block, the footer and its magic are checksummed, so each flip is found by
/// `verify_checksums`, and no read returns anything but stored data or `Corruption`.
#[test]
fn table_flip_sweep_is_always_detected() {
    let fs = FaultFs::new(10);
    let (model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    let len = fs.file_contents(&table.path).unwrap().len();
    let img = FsImage::take(&fs);
    let in_table: Model = model
        .range(table.smallest.clone()..=table.largest.clone())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let spots = (0..len).step_by(29).chain(len - 64..len);
    let mut checked = 0;
    for at in spots {
        let bit = (at % 8) as u8;
        let what = format!("bit {bit} of byte {at} of {} bytes", len);
        let fs = img.materialize(0);
        fs.flip_bit(&table.path, at as u64, bit);
        let db = Db::open(options(&fs)).unwrap_or_else(|e| panic!("{what}: open: {e}"));
        expect_corruption(
            db.verify_checksums(),
            &table.path,
            &format!("{what}: verify"),
        );
        for (k, v) in &in_table {
            match db.get(&ReadOptions::default(), k) {
                Ok(got) => assert_eq!(got.as_ref(), Some(v), "{what}: get {k:?}"),
                Err(e) => {
                    expect_corruption(Err::<(), _>(e), &table.path, &what);
                }
            }
        }
        checked += 1;
    }
    assert!(checked > 100, "{checked} flips");
}

// ---------------------------------------------------------------------------------------------
// Tables
// ---------------------------------------------------------------------------------------------

/// With one flipped bit in data block 0 of `table`: verify_checksums, a get of its first key
/// and a full scan report corruption naming it; every other read returns stored data only.
fn check_damaged_table(db: &Db, model: &Model, table: &LiveFile) {
    let path = &table.path;
    expect_corruption(db.verify_checksums(), path, "verify_checksums");
    let r = ReadOptions::default();
    expect_corruption(
        db.get(&r, &table.smallest),
        path,
        "get of the damaged block's first key",
    );
    let mut failed = 0;
    for (k, v) in model {
        match db.get(&r, k) {
            Ok(Some(got)) => assert_eq!(
                &got,
                v,
                "get {} returned wrong data",
                String::from_utf8_lossy(k)
            ),
            Ok(None) => panic!(
                "get {} returned nothing instead of an error",
                String::from_utf8_lossy(k)
            ),
            Err(e) => {
                expect_corruption(Err::<(), _>(e), path, "get");
                assert!(
                    (table.smallest.as_slice()..=table.largest.as_slice()).contains(&k.as_slice()),
                    "get {} failed though its table is intact",
                    String::from_utf8_lossy(k)
                );
                failed += 1;
            }
        }
    }
    assert!(failed > 0);

    // A scan yields stored pairs in order up to the damage, then the error, then nothing.
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let mut expected = model.iter();
    let mut error = None;
    for item in it.entries() {
        match item {
            Ok((k, v)) => {
                let (ek, ev) = expected.next().expect("scan returned more than stored");
                assert_eq!((&k, &v), (ek, ev), "scan returned wrong data");
            }
            Err(e) => error = Some(e),
        }
    }
    expect_corruption(error.map_or(Ok(()), Err), path, "full scan");

    // Reads that do not touch the damaged table are unaffected.
    let mut above = table.largest.clone();
    above.push(0);
    let mut it = db
        .iter(ReadOptions::default().bounds(Some(&above), None))
        .unwrap();
    it.seek_to_first();
    let tail: Result<Model> = it.entries().collect();
    let want: Model = model
        .range(above..)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert!(tail.unwrap() == want, "scan above the damaged table");
}

#[test]
fn table_flip_is_reported_never_returned() {
    let fs = FaultFs::new(4);
    let (model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    fs.flip_bit(&table.path, 100, 6);
    let db = Db::open(options(&fs)).unwrap();
    check_damaged_table(&db, &model, &table);
    drop(db);
    fs.flip_bit(&table.path, 100, 6);
    let db = Db::open(options(&fs)).unwrap();
    db.verify_checksums().unwrap();
    assert_holds(&db, &model, "after undoing the flip");
}

/// A compaction over a damaged table must fail, not write its outputs without the damaged block
/// and delete the input: the damage stays reported, every other key stays readable, and undoing
/// the flip gives back every byte stored before.
#[test]
fn compaction_over_a_damaged_table_loses_nothing() {
    let fs = FaultFs::new(11);
    let (mut model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    fs.flip_bit(&table.path, 100, 2);
    let db = Db::open(options(&fs)).unwrap();
    // New versions of keys all over the range, so a compaction must merge the damaged table;
    // not of its first key, whose only version stays in the damaged block.
    let w = WriteOptions::default();
    for i in (0..3000).step_by(7).filter(|&i| key6(i) != table.smallest) {
        let v = format!("new {i}").into_bytes();
        db.put(&w, &key6(i), &v).unwrap();
        model.insert(key6(i), v);
    }
    let compacted = db.compact_range(None, None);
    assert!(
        compacted.is_err(),
        "compaction over a damaged table succeeded"
    );
    let r = ReadOptions::default();
    expect_corruption(
        db.get(&r, &table.smallest),
        &table.path,
        "get after the compaction",
    );
    expect_corruption(
        db.verify_checksums(),
        &table.path,
        "verify after the compaction",
    );
    for (k, v) in &model {
        match db.get(&r, k) {
            Ok(got) => assert_eq!(got.as_ref(), Some(v), "get {}", String::from_utf8_lossy(k)),
            Err(e) => {
                expect_corruption(Err::<(), _>(e), &table.path, "get");
            }
        }
    }
    drop(db);
    fs.flip_bit(&table.path, 100, 2);
    let db = Db::open(options(&fs)).unwrap();
    db.compact_range(None, None).unwrap();
    assert_holds(&db, &model, "after undoing the flip");
}

/// A damaged tier identity file: open fails naming it.
#[test]
fn damaged_tier_identity_fails_open() {
    let fs = FaultFs::new(12);
    let (model, _) = compacted_tables(options(&fs));
    for dir in [FAST, CAPACITY] {
        let tier = Path::new(dir).join("TIER");
        fs.flip_bit(&tier, 3, 0);
        expect_corruption(
            Db::open(options(&fs)),
            &tier,
            "open with a damaged TIER file",
        );
        fs.flip_bit(&tier, 3, 0);
    }
    let db = Db::open(options(&fs)).unwrap();
    assert_holds(&db, &model, "after undoing the flips");
}

/// The same on real files through the POSIX file system.
#[test]
fn table_flip_on_real_files_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || tiny().tiers_in(dir.path()).build().unwrap();
    let (model, files) = compacted_tables(opts());
    let table = middle_table(&files);
    let flip = |path: &Path| {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[100] ^= 1 << 6;
        std::fs::write(path, bytes).unwrap();
    };
    flip(&table.path);
    let db = Db::open(opts()).unwrap();
    check_damaged_table(&db, &model, &table);
    drop(db);
    flip(&table.path);
    let db = Db::open(opts()).unwrap();
    assert_holds(&db, &model, "after undoing the flip");
}

/// A table cut short (its footer gone): reads of it fail naming it; nothing wrong is returned.
#[test]
fn truncated_table_is_reported() {
    let fs = FaultFs::new(5);
    let (model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    let bytes = fs.file_contents(&table.path).unwrap();
    fs.write_raw(&table.path, &bytes[..bytes.len() / 2]);
    match Db::open(options(&fs)) {
        // Reported at open: fine, if it names the table.
        Err(e) => {
            expect_corruption(Err::<(), _>(e), &table.path, "open with a truncated table");
        }
        Ok(db) => {
            expect_corruption(db.verify_checksums(), &table.path, "verify_checksums");
            expect_corruption(
                db.get(&ReadOptions::default(), &table.smallest),
                &table.path,
                "get from the truncated table",
            );
        }
    }
    fs.write_raw(&table.path, &bytes);
    let db = Db::open(options(&fs)).unwrap();
    assert_holds(&db, &model, "after restoring the table");
}

/// A table the MANIFEST lists is gone (from either tier): open fails naming the file, and
/// putting it back makes everything readable again.
#[test]
fn missing_table_fails_open_naming_it() {
    let fs = FaultFs::new(6);
    let (mut model, _) = compacted_tables(options(&fs));
    // Add an L0 table, which lives on the fast tier.
    let db = Db::open(options(&fs)).unwrap();
    model.extend(fill_noise(&db, 5000..5100, Durability::Flush));
    db.flush().unwrap();
    let files = db.live_files();
    drop(db);
    let picks: Vec<&LiveFile> = ["fast", "capacity"]
        .iter()
        .map(|tier| {
            let table = files.iter().find(|f| f.tier == *tier);
            table.unwrap_or_else(|| panic!("no table on tier {tier}: {files:?}"))
        })
        .collect();
    for table in picks {
        let bytes = fs.file_contents(&table.path).unwrap();
        fs.remove_file(&table.path).unwrap();
        let err = Db::open(options(&fs)).expect_err("open with a missing table");
        let msg = err.to_string();
        assert!(
            matches!(err, Error::Corruption { .. } | Error::NotFound(_)),
            "missing {}: {err:?}",
            table.path.display()
        );
        assert!(
            msg.contains(&*table.path.to_string_lossy()),
            "message does not name the table: {msg}"
        );
        fs.write_raw(&table.path, &bytes);
        let db = Db::open(options(&fs)).unwrap();
        assert_holds(&db, &model, "after restoring the table");
    }
}

// ---------------------------------------------------------------------------------------------
// MANIFEST and CURRENT
// ---------------------------------------------------------------------------------------------

/// A database whose MANIFEST holds its opening snapshot and several synced edits.
fn db_with_edits(fs: &Arc<FaultFs>) -> Model {
    let db = Db::open(options(fs)).unwrap();
    let mut model = Model::new();
    for round in 0..4 {
        model.extend(fill_noise(
            &db,
            round * 200..round * 200 + 200,
            Durability::Flush,
        ));
        db.flush().unwrap();
    }
    model
}

fn current_manifest(fs: &FaultFs) -> PathBuf {
    let current = fs.file_contents(&Path::new(FAST).join("CURRENT")).unwrap();
    let name = String::from_utf8(current).unwrap();
    Path::new(FAST).join(name.trim_end())
}

#[test]
fn manifest_flip_fails_open_naming_it() {
    let fs = FaultFs::new(7);
    let model = db_with_edits(&fs);
    let manifest = current_manifest(&fs);
    let offsets = record_offsets(&fs.file_contents(&manifest).unwrap());
    assert!(offsets.len() >= 3, "expected several MANIFEST records");
    // The opening snapshot, an edit in the middle, and a header byte.
    let spots = [
        offsets[0] + 22,
        offsets[offsets.len() / 2] + 21,
        offsets[1] + 5,
    ];
    for spot in spots {
        fs.flip_bit(&manifest, spot as u64, 1);
        expect_corruption(
            Db::open(options(&fs)),
            &manifest,
            &format!("MANIFEST flipped at {spot}"),
        );
        fs.flip_bit(&manifest, spot as u64, 1);
    }
    let db = Db::open(options(&fs)).unwrap();
    assert_holds(&db, &model, "after undoing the flips");
}

/// CURRENT that names no MANIFEST, or a missing one, or is gone altogether while the database's
/// files are there: open fails (never starting a new, empty database over the old files), and
/// restoring CURRENT gives everything back.
#[test]
fn bad_or_missing_current_fails_open() {
    let fs = FaultFs::new(8);
    let model = db_with_edits(&fs);
    let current = Path::new(FAST).join("CURRENT");
    let good = fs.file_contents(&current).unwrap();
    let garbage: [&[u8]; 5] = [
        b"garbage\n",
        b"",
        b"MANIFEST-000001",
        b"\xff\xfe\x00MANIFEST\n",
        b"MANIFEST-999999\n",
    ];
    for bytes in garbage {
        fs.write_raw(&current, bytes);
        let what = format!("CURRENT = {:?}", String::from_utf8_lossy(bytes));
        expect_corruption(Db::open(options(&fs)), &current, &what);
    }
    fs.remove_file(&current).unwrap();
    let err =
        Db::open(options(&fs)).expect_err("open without CURRENT must not create a new database");
    assert!(
        matches!(err, Error::Corruption { .. } | Error::NotFound(_)),
        "open without CURRENT: {err:?}"
    );
    assert!(!fs.exists(&current), "the failed open wrote a CURRENT");
    fs.write_raw(&current, &good);
    let db = Db::open(options(&fs)).unwrap();
    assert_holds(&db, &model, "after restoring CURRENT");
}
