//! Value-log garbage collection under faults (`values = "split"`): a crash after a collection
//! whose garbage came from writes not yet durable, a damaged record header in a collected
//! file, file numbers across a collection of the highest-numbered file, and recovery's check
//! of a damaged record a replayed write names.

mod common;

use common::{
    crash_now, split_collected_on_call, split_small_files, tiny, versioned_value, vlog_files,
    Crash, Failures, Model, TierSetup, CAPACITY, VLOG_FILE_SIZE,
};
use std::path::Path;
use std::sync::Arc;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{Db, Durability, ReadOptions, WriteOptions};

fn sync() -> WriteOptions {
    WriteOptions::sync()
}

fn k(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// Fills the first value-log file with 45 synced separated values (the last starts a second
/// file), then overwrites every key but `k000` with smaller separated values (synced, into the
/// second file, which stays the active one) and flushes and compacts, so the first file is
/// counted almost all garbage; `k000` still points into it.
fn first_file_mostly_garbage(db: &Db, model: &mut Model) -> String {
    let fs = db.options().fs.clone();
    for i in 0..45 {
        let v = versioned_value(&k(i), 0, 1500);
        db.put(&sync(), &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    let first = vlog_files(fs.as_ref(), Path::new(CAPACITY))[0].clone();
    assert_eq!(vlog_files(fs.as_ref(), Path::new(CAPACITY)).len(), 2);
    for i in 1..45 {
        let v = versioned_value(&k(i), 1, 200);
        db.put(&sync(), &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    assert!(
        db.stats().vlog_garbage_bytes > VLOG_FILE_SIZE / 2,
        "{:?}",
        db.stats()
    );
    assert_eq!(vlog_files(fs.as_ref(), Path::new(CAPACITY)).len(), 2);
    first
}

/// Garbage collection judges a record dead from a write that may not be durable yet. A crash
/// may then lose that write (allowed: it was not synced), and recovery brings back the key's
/// durable version, which points into the collected file: the file must not be gone. So the
/// collected file goes only once the writes that made its records garbage are flushed, and
/// after any crash `k000` reads as the unsynced write or as its acknowledged `Sync` value.
#[test]
fn gc_of_a_record_killed_only_by_an_unsynced_write_then_crash_keeps_the_synced_value() {
    let mut failures = Failures::default();
    for (crash, durability) in [
        (Crash::Process, Durability::Buffered),
        (Crash::Power(CrashPolicy::DropUnsynced), Durability::Flush),
    ] {
        for delete in [false, true] {
            let what = format!(
                "{crash:?}, {durability:?} {}",
                if delete { "delete" } else { "small put" }
            );
            let fs = FaultFs::new(1);
            let opts = || {
                split_small_files(tiny())
                    // No background round: only the call below collects.
                    .background_threads(1)
                    .fs(fs.clone() as Arc<dyn Fs>)
                    .fault_tiers()
                    .build()
                    .unwrap()
            };
            let db = Db::open(opts()).unwrap();
            let mut model = Model::new();
            let first = first_file_mostly_garbage(&db, &mut model);
            // The last live record of the first file is shadowed by a write not yet durable.
            let w = WriteOptions { durability };
            if delete {
                db.delete(&w, &k(0)).unwrap();
            } else {
                db.put(&w, &k(0), b"small").unwrap();
            }
            db.collect_value_log().unwrap();
            let deleted = !vlog_files(fs.as_ref(), Path::new(CAPACITY)).contains(&first);
            crash_now(&fs, db, crash, &what);
            let db = Db::open(opts()).unwrap_or_else(|e| panic!("{what}: reopen: {e}"));
            // Either the unsynced write survived, or the synced value is back.
            let got = db.get(&ReadOptions::default(), &k(0));
            let ok = match &got {
                Ok(None) => delete,
                Ok(Some(v)) => v == b"small" && !delete || Some(v) == model.get(&k(0)),
                Err(_) => false,
            };
            if !ok {
                failures.add(format!(
                    "{what}: k000 after the crash (first file {first} deleted by gc: {deleted}): {:?}",
                    got.map(|v| v.map(|v| String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()))
                ));
            }
            for i in 1..45 {
                assert_eq!(
                    db.get(&ReadOptions::default(), &k(i)).unwrap().as_ref(),
                    model.get(&k(i)),
                    "{what}"
                );
            }
            drop(db);
        }
    }
    failures.assert_none("a synced value after gc and a crash");
}

/// Record bytes of a key of 4 bytes and a value of `len` bytes.
fn record_len(len: usize) -> usize {
    12 + 4 + len
}

/// A flipped bit in the value-length field of one record's header, in a file whose other
/// records are intact: the length runs past the end of the file, as a torn tail's would, but
/// whole records follow it, so it is damage and the file, whose later records are live, is
/// kept (docs/value-log.md, "Crashes").
#[test]
fn gc_keeps_live_records_after_a_record_whose_length_field_is_damaged() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || split_collected_on_call(dir.path());
    let cap = dir.path().join("capacity");
    let mut model = Model::new();
    let db = Db::open(opts()).unwrap();
    let fs = db.options().fs.clone();
    // The first file: k000..k043 (the 44th record passes the file size), k044 starts the second.
    for i in 0..45 {
        let v = versioned_value(&k(i), 0, 1500);
        db.put(&sync(), &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    let files = vlog_files(fs.as_ref(), &cap);
    assert_eq!(files.len(), 2, "{files:?}");
    let first = cap.join(&files[0]);
    assert_eq!(
        fs.file_size(&first).unwrap() as usize,
        44 * record_len(1500)
    );
    // k000..k029 overwritten (garbage in the first file), k030..k043 still live there.
    for i in 0..30 {
        let v = versioned_value(&k(i), 1, 200);
        db.put(&sync(), &k(i), &v).unwrap();
        model.insert(k(i), v);
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    drop(db);
    // Damage the value length of k010's record (garbage): its high byte.
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .open(&first)
            .unwrap();
        f.seek(SeekFrom::Start((10 * record_len(1500) + 11) as u64))
            .unwrap();
        f.write_all(&[0x40]).unwrap();
    }
    let db = Db::open(opts()).unwrap();
    let check = |db: &Db, what: &str| {
        let mut bad = Vec::new();
        for (key, v) in &model {
            match db.get(&ReadOptions::default(), key) {
                Ok(Some(got)) if &got == v => {}
                other => bad.push(format!(
                    "{}: {:?}",
                    String::from_utf8_lossy(key),
                    other.map(|o| o.map(|v| v.len()))
                )),
            }
        }
        assert!(
            bad.is_empty(),
            "{what}: {} keys unreadable, first: {:?}",
            bad.len(),
            &bad[..bad.len().min(3)]
        );
    };
    check(&db, "before gc");
    let r = db.collect_value_log();
    let left = vlog_files(fs.as_ref(), &cap);
    check(
        &db,
        &format!(
            "after gc ({r:?}; files {left:?}, stats gc runs {} deleted {})",
            db.stats().vlog_gc_runs,
            db.stats().vlog_gc_files_deleted
        ),
    );
}

/// File numbers are never handed out twice (docs/value-log.md, "Files"): numbers continue
/// from the highest file present at open, so collection keeps the highest-numbered file, even
/// with no live record in it, until a newer one exists. Were its number reused, stale
/// pointers into it still in the LSM would count, when a compaction drops them, as garbage of
/// the new file of that number, and the collector would be sent to a file that is all live.
#[test]
fn a_collected_files_number_is_not_reused_and_its_stale_pointers_do_not_count_against_another_file()
{
    let dir = tempfile::tempdir().unwrap();
    let opts = || split_collected_on_call(dir.path());
    let cap = dir.path().join("capacity");
    let db = Db::open(opts()).unwrap();
    let fs = db.options().fs.clone();
    // k000..k043 in the first file, k044..k049 in the second.
    for i in 0..50 {
        db.put(&sync(), &k(i), &versioned_value(&k(i), 0, 1500))
            .unwrap();
    }
    assert_eq!(
        vlog_files(fs.as_ref(), &cap),
        ["000001.vlog", "000002.vlog"]
    );
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // Half the second file overwritten with inline values, counted as garbage by the compaction.
    for i in 44..47 {
        db.put(&sync(), &k(i), b"inline").unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // The other half deleted: the tombstones in L0, the stale pointers still in L1.
    for i in 47..50 {
        db.delete(&sync(), &k(i)).unwrap();
    }
    db.flush().unwrap();
    drop(db);

    // The second file (no longer active) has no live record: collected with no rewrite, and
    // kept while it is the highest-numbered file, so its number cannot come back.
    let db = Db::open(opts()).unwrap();
    assert_eq!(db.collect_value_log().unwrap(), 1);
    assert_eq!(
        vlog_files(fs.as_ref(), &cap),
        ["000001.vlog", "000002.vlog"]
    );
    drop(db);

    let db = Db::open(opts()).unwrap();
    let v = versioned_value(b"new", 0, 1500);
    db.put(&sync(), b"new", &v).unwrap();
    let files = vlog_files(fs.as_ref(), &cap);
    assert_eq!(files.last().map(String::as_str), Some("000003.vlog"));
    // The compaction drops the stale pointers of k047..k049 (into the deleted second file).
    db.compact_range(None, None).unwrap();
    assert_eq!(db.get(&ReadOptions::default(), b"new").unwrap(), Some(v));
    let st = db.stats();
    let live = (44 * record_len(1500) + 12 + 3 + 1500) as u64;
    assert!(
        st.vlog_live_bytes >= live,
        "value-log files {files:?} after the collected 000002.vlog: live bytes {} < {live} \
         (garbage counted {} bytes in {} items, file bytes {})",
        st.vlog_live_bytes,
        st.vlog_garbage_bytes,
        st.vlog_garbage_items,
        st.vlog_file_bytes
    );
}

/// Recovery's check of replayed writes: a flipped bit in a value-log record that a
/// replayed write names is not a crash's damage: `Corruption` naming the file and the record's
/// offset in the default mode; `point-in-time` drops that write and every later one.
#[test]
fn recovery_reports_a_flipped_bit_in_a_replayed_writes_record_naming_file_and_offset() {
    let fs = FaultFs::new(3);
    let opts = |fs: &Arc<FaultFs>, mode: Option<tierkv::RecoveryMode>| {
        let mut b = split_small_files(tiny())
            .background_threads(1)
            .fs(fs.clone() as Arc<dyn Fs>)
            .fault_tiers();
        if let Some(mode) = mode {
            b = b.wal_recovery_mode(mode);
        }
        b.build().unwrap()
    };
    let db = Db::open(opts(&fs, None)).unwrap();
    let w = WriteOptions::default();
    db.put(&w, b"a", b"small").unwrap();
    let big = versioned_value(b"b", 0, 1500);
    db.put(&w, b"b", &big).unwrap();
    db.put(&w, b"c", &versioned_value(b"c", 0, 1500)).unwrap();
    db.put(&w, b"d", b"small").unwrap();
    crash_now(&fs, db, Crash::Process, "process crash");
    let path = Path::new(CAPACITY).join("000001.vlog");
    let mut bytes = fs.file_contents(&path).unwrap();
    assert_eq!(bytes.len(), 2 * (12 + 1 + 1500));
    bytes[12 + 1 + 700] ^= 0x10;
    fs.write_raw(&path, &bytes);
    let image = common::FsImage::take(&fs);

    let fs = image.materialize(4);
    match Db::open(opts(&fs, None)) {
        Err(tierkv::Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, path);
            assert_eq!(offset, 0);
        }
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("opened over a damaged record"),
    }
    let fs = image.materialize(5);
    let db = Db::open(opts(&fs, Some(tierkv::RecoveryMode::PointInTime))).unwrap();
    let r = ReadOptions::default();
    assert_eq!(db.get(&r, b"a").unwrap().as_deref(), Some(&b"small"[..]));
    for key in [&b"b"[..], b"c", b"d"] {
        assert_eq!(db.get(&r, key).unwrap(), None, "{key:?}");
    }
    db.check_values().unwrap();
}
