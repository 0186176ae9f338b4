//! Damaged tables and MANIFESTs, seen from every reader: a table opened on its own (every
//! byte flipped, each failure reported at the block that holds it), the database's reverse
//! and seeking iterators, multi-get, a background compaction that meets the damage, and the
//! MANIFEST. Each must report `Error::Corruption` naming the damaged file and the offset of
//! the damaged unit, never return wrong data, and never lose what was stored.

mod common;

use common::{
    compacted_tables, damage_options, fill_noise, key6, middle_table, noise_value, tiny, Model,
    TierSetup,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::inspect::{self, InternalIterator};
use tierkv::{Db, Durability, Error, LiveFile, Options, ReadOptions, Result, WriteOptions};

fn options(fs: &Arc<FaultFs>) -> Options {
    damage_options(fs)
}

fn fill(db: &Db, range: std::ops::Range<usize>) -> Model {
    fill_noise(db, range, Durability::Flush)
}

/// `result` must be `Corruption` naming `file` (in the field and the message); returns the
/// reported offset.
#[track_caller]
fn expect_corruption<T: std::fmt::Debug>(result: Result<T>, file: &Path, what: &str) -> u64 {
    match &result {
        Err(e) => corruption_in(e, file, what),
        Ok(v) => panic!(
            "{what}: expected corruption in {}, got {v:?}",
            file.display()
        ),
    }
}

/// `e` must be `Corruption` naming `file`; returns the reported offset.
#[track_caller]
fn corruption_in(e: &Error, file: &Path, what: &str) -> u64 {
    match e {
        Error::Corruption {
            file: named,
            offset,
            ..
        } => {
            assert_eq!(named, file, "{what}: wrong file named: {e}");
            assert!(
                e.to_string().contains(&*file.to_string_lossy()),
                "{what}: {e}"
            );
            *offset
        }
        other => panic!(
            "{what}: expected corruption in {}, got {other:?}",
            file.display()
        ),
    }
}

// ---------------------------------------------------------------------------------------------
// A table on its own: every byte
// ---------------------------------------------------------------------------------------------

/// A file beside the database's tables where altered copies of one are opened on their own.
struct TableCopy {
    fs: Arc<FaultFs>,
    path: PathBuf,
}

impl TableCopy {
    /// Writes `bytes` as the copy and opens it as a table.
    fn open(&self, bytes: &[u8]) -> Result<inspect::Table> {
        self.fs.write_raw(&self.path, bytes);
        inspect::Table::open(self.fs.open_read(&self.path).unwrap(), &self.path)
    }
}

/// The bytes of the largest table `opts` makes in `fs`, and a copy to open altered versions.
fn largest_table(fs: &Arc<FaultFs>, opts: Options) -> (Vec<u8>, TableCopy) {
    let (_, files) = compacted_tables(opts);
    let table = files.iter().max_by_key(|f| f.size).unwrap().clone();
    let good = fs.file_contents(&table.path).unwrap();
    fs.create_dir_all(Path::new("/copy")).unwrap();
    let copy = TableCopy {
        fs: fs.clone(),
        path: PathBuf::from("/copy/000001.sst"),
    };
    (good, copy)
}

/// Where each stored unit of a table starts and ends (trailer included): data blocks, the
/// filter, index and properties blocks, and the footer.
fn units(bytes: &[u8], table: &inspect::Table) -> Vec<(u64, u64)> {
    let footer_at = bytes.len() as u64 - 64;
    let footer = inspect::decode_footer(&bytes[footer_at as usize..]).unwrap();
    let trailer = inspect::BLOCK_TRAILER_LEN as u64;
    let mut out: Vec<(u64, u64)> = table
        .index_entries()
        .iter()
        .map(|&(_, offset, size)| (offset, offset + size + trailer))
        .collect();
    for h in [footer.filter, footer.index, footer.properties] {
        if h.size > 0 {
            out.push((h.offset, h.offset + h.size + trailer));
        }
    }
    out.push((footer_at, bytes.len() as u64));
    out.sort();
    // Every byte belongs to exactly one unit.
    let mut at = 0;
    for &(start, end) in &out {
        assert_eq!(start, at, "units {out:?}");
        at = end;
    }
    assert_eq!(at, bytes.len() as u64);
    out
}

/// The entries a scan yielded, and how it ended.
type Scanned = (Vec<common::Entry>, Result<()>);

fn entries_forward(t: &inspect::Table) -> Scanned {
    let mut it = t.iter();
    it.seek_to_first();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.next();
    }
    (out, it.status())
}

fn entries_backward(t: &inspect::Table) -> Scanned {
    let mut it = t.iter();
    it.seek_to_last();
    let mut out = Vec::new();
    while it.valid() {
        out.push((it.key().to_vec(), it.value().to_vec()));
        it.prev();
    }
    out.reverse();
    (out, it.status())
}

/// Flipping any one byte of a table is found: at open, or by `verify_checksums` and by an
/// iterator reaching the damaged block. The error names the table and the offset where the
/// damaged unit starts; iterators yield only the intact entries before (or after) it.
#[test]
fn every_byte_of_a_table_is_checked_and_reported_at_its_block() {
    let fs = FaultFs::new(21);
    let (good, copy) = largest_table(&fs, options(&fs));
    let (path, open) = (&copy.path, |bytes: &[u8]| copy.open(bytes));
    let pristine = open(&good).unwrap();
    let all = entries_forward(&pristine).0;
    let units = units(&good, &pristine);
    assert!(units.len() > 5, "{units:?}");
    for at in 0..good.len() {
        let unit = units
            .iter()
            .find(|u| (u.0..u.1).contains(&(at as u64)))
            .unwrap();
        let what = format!("byte {at} of {} (unit {unit:?})", good.len());
        let mut bytes = good.clone();
        bytes[at] ^= 1 << (at % 8);
        let t = match open(&bytes) {
            Err(e) => {
                let offset = expect_corruption(Err::<(), _>(e), path, &what);
                assert_eq!(offset, unit.0, "{what}: open reports the wrong offset");
                continue;
            }
            Ok(t) => t,
        };
        let offset = expect_corruption(t.verify_checksums(), path, &what);
        assert_eq!(offset, unit.0, "{what}: verify reports the wrong offset");
        let (fwd, status) = entries_forward(&t);
        let offset = expect_corruption(status, path, &format!("{what}: forward"));
        assert_eq!(
            offset, unit.0,
            "{what}: forward scan reports the wrong offset"
        );
        assert_eq!(fwd[..], all[..fwd.len()], "{what}: forward scan");
        let (back, status) = entries_backward(&t);
        let offset = expect_corruption(status, path, &format!("{what}: backward"));
        assert_eq!(
            offset, unit.0,
            "{what}: backward scan reports the wrong offset"
        );
        assert_eq!(
            back[..],
            all[all.len() - back.len()..],
            "{what}: backward scan"
        );
    }
}

/// Re-seals the block `(start, end)` (stored bytes and trailer) of `bytes` with a matching
/// checksum, as a stray write that happened to keep the CRC would leave it.
fn reseal(bytes: &mut [u8], (start, end): (u64, u64)) {
    let (start, end) = (start as usize, end as usize);
    let crc_at = end - 4;
    let crc = crc32c::crc32c(&bytes[start..crc_at]);
    bytes[crc_at..end].copy_from_slice(&crc.to_le_bytes());
}

/// Bytes that pass the checksum but break the structure (a data block's entries or restart
/// array, a compressed block's length prefix or codec stream, the index's handles, the
/// properties, the filter) are reported as corruption naming the table, never a panic or a
/// huge allocation.
#[test]
fn resealed_damage_in_every_block_is_reported_without_panic() {
    for compression in [tierkv::Compression::Lz4, tierkv::Compression::Zstd] {
        let fs = FaultFs::new(28);
        let mut opts = options(&fs);
        opts.table.compression = compression;
        let (good, copy) = largest_table(&fs, opts);
        let (path, open) = (&copy.path, |bytes: &[u8]| copy.open(bytes));
        let pristine = open(&good).unwrap();
        let units = units(&good, &pristine);
        // Every unit but the footer, whose checksum is not a block trailer.
        for &unit in &units[..units.len() - 1] {
            let stored_end = unit.1 - inspect::BLOCK_TRAILER_LEN as u64;
            // Every third byte, a different bit each time.
            for at in (unit.0..stored_end).step_by(3) {
                {
                    let bit = at % 8;
                    let what = format!("{compression}: byte {at} bit {bit} (unit {unit:?})");
                    let mut bytes = good.clone();
                    bytes[at as usize] ^= 1 << bit;
                    reseal(&mut bytes, unit);
                    let t = match open(&bytes) {
                        Err(e) => {
                            corruption_in(&e, path, &what);
                            continue;
                        }
                        Ok(t) => t,
                    };
                    // NB: a resealed index handle may point anywhere in the block area, so the
                    // offset reported is then that of the bogus block.
                    if let Err(e) = t.verify_checksums() {
                        corruption_in(&e, path, &what);
                    }
                    for (_, status) in [entries_forward(&t), entries_backward(&t)] {
                        if let Err(e) = status {
                            corruption_in(&e, path, &what);
                        }
                    }
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The database's readers over a damaged table
// ---------------------------------------------------------------------------------------------

/// Flips a bit in the first data block of the middle table and reopens.
fn damaged_db(seed: u64) -> (Arc<FaultFs>, Db, Model, LiveFile) {
    let fs = FaultFs::new(seed);
    let (model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    fs.flip_bit(&table.path, 100, 3);
    let db = Db::open(options(&fs)).unwrap();
    (fs, db, model, table)
}

/// A reverse scan yields stored pairs (newest first) down to the damage, then reports it.
#[test]
fn reverse_scan_over_a_damaged_table_reports_it() {
    let (_fs, db, model, table) = damaged_db(22);
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_last();
    let mut expected = model.iter().rev();
    while it.valid() {
        let (ek, ev) = expected.next().expect("scan returned more than stored");
        assert_eq!((it.key(), it.value()), (&ek[..], &ev[..]), "reverse scan");
        it.prev();
    }
    expect_corruption(it.status(), &table.path, "reverse scan");
}

/// Seeking into the damaged block, from either direction, reports it.
#[test]
fn seeks_into_a_damaged_block_report_it() {
    let (_fs, db, model, table) = damaged_db(23);
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek(&table.smallest);
    assert!(!it.valid(), "seek into the damaged block");
    expect_corruption(it.status(), &table.path, "seek");
    // From above, stepping back into it.
    let mut it = db.iter(ReadOptions::default()).unwrap();
    let mut above = table.largest.clone();
    above.push(0);
    it.seek(&above);
    while it.valid() {
        let k = it.key().to_vec();
        assert_eq!(model.get(&k).map(Vec::as_slice), Some(it.value()), "prev");
        it.prev();
    }
    expect_corruption(it.status(), &table.path, "prev into the damaged block");
    // Bounded to the damaged table: both ends report it.
    let bounded = || {
        db.iter(ReadOptions::default().bounds(Some(&table.smallest), Some(&above)))
            .unwrap()
    };
    let mut it = bounded();
    it.seek_to_first();
    assert!(!it.valid());
    expect_corruption(it.status(), &table.path, "bounded seek_to_first");
    let mut it = bounded();
    it.seek_to_last();
    while it.valid() {
        it.prev();
    }
    expect_corruption(it.status(), &table.path, "bounded seek_to_last");
}

/// A multi-get of keys in and around the damaged block fails naming it: never a `None` or a
/// wrong value for a key whose block is damaged.
#[test]
fn multi_get_over_a_damaged_block_reports_it() {
    let (_fs, db, model, table) = damaged_db(24);
    let keys: Vec<&Vec<u8>> = model.keys().step_by(3).collect();
    match db.multi_get(&ReadOptions::default(), &keys) {
        Ok(values) => panic!(
            "multi_get over a damaged block succeeded: {} values",
            values.len()
        ),
        Err(e) => {
            expect_corruption(Err::<(), _>(e), &table.path, "multi_get");
        }
    }
    let just = [&table.smallest];
    expect_corruption(
        db.multi_get(&ReadOptions::default(), &just),
        &table.path,
        "multi_get of the damaged block's first key",
    );
}

/// What `tierkv check` runs on a read-only open of a damaged database: `verify_checksums`
/// and a full scan both report the damaged table, and the open changes nothing.
#[test]
fn read_only_check_of_a_damaged_table_reports_it() {
    let fs = FaultFs::new(29);
    let (model, files) = compacted_tables(options(&fs));
    let table = middle_table(&files);
    fs.flip_bit(&table.path, 100, 5);
    let mut opts = options(&fs);
    opts.read_only = true;
    let db = Db::open(opts).unwrap();
    expect_corruption(db.verify_checksums(), &table.path, "verify_checksums");
    expect_corruption(common::scan(&db), &table.path, "full scan");
    expect_corruption(db.check_values(), &table.path, "check_values");
    drop(db);
    fs.flip_bit(&table.path, 100, 5);
    let db = Db::open(options(&fs)).unwrap();
    common::assert_scan_matches(&db, &model, "after undoing the flip");
}

// ---------------------------------------------------------------------------------------------
// Background compaction over a damaged table
// ---------------------------------------------------------------------------------------------

/// A background compaction that meets a damaged block stops writes with the corruption as its
/// cause (naming the table), keeps its input, and loses nothing once the damage is undone.
#[test]
fn background_compaction_over_damage_stops_writes_and_keeps_the_input() {
    let (fs, db, mut model, table) = damaged_db(25);
    let w = WriteOptions::default();
    // Rewrites of the damaged table's range until L1 overflows into L2 through it.
    let in_table: Vec<usize> = (0..3000)
        .filter(|&i| (table.smallest.clone()..=table.largest.clone()).contains(&key6(i)))
        .filter(|&i| key6(i) != table.smallest)
        .collect();
    let mut failure = None;
    'rounds: for round in 0..40 {
        for &i in &in_table {
            // New keys between the table's own, so that L1 grows past its target.
            let mut k = key6(i);
            k.extend_from_slice(format!("-{round}").as_bytes());
            let v = noise_value(i + round * 7919);
            if let Err(e) = db.put(&w, &k, &v) {
                failure = Some(e);
                break 'rounds;
            }
            model.insert(k, v);
        }
        if let Err(e) = db.flush().and_then(|()| db.wait_for_compactions()) {
            failure = Some(e);
            break;
        }
    }
    let err = failure.expect("no compaction met the damaged table");
    corruption_in(err.root_cause(), &table.path, "the failure");
    let put = db.put(&w, b"after", b"stop");
    match put {
        Err(e @ Error::Stopped { .. }) => {
            corruption_in(e.root_cause(), &table.path, "a write after the stop");
        }
        other => panic!("write after a failed compaction: {other:?}"),
    }
    assert!(fs.exists(&table.path), "the damaged input was deleted");
    drop(db);
    fs.flip_bit(&table.path, 100, 3);
    let db = Db::open(options(&fs)).unwrap();
    db.verify_checksums().unwrap();
    common::assert_scan_matches(&db, &model, "after undoing the flip");
}

/// On real files a compaction reads its inputs through read-ahead windows (prefetched through
/// io_uring where the kernel allows): damage in a late data block of an input, inside a
/// prefetched window, fails the compaction, which keeps its input and loses nothing.
#[test]
fn compaction_reading_ahead_into_damage_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || tiny().tiers_in(dir.path()).build().unwrap();
    let (mut model, files) = compacted_tables(opts());
    let table = files.iter().max_by_key(|f| f.size).unwrap().clone();
    let t = inspect::Table::open(
        tierkv::env::PosixFs::new().open_read(&table.path).unwrap(),
        &table.path,
    )
    .unwrap();
    let blocks = t.index_entries();
    assert!(blocks.len() >= 3, "{blocks:?}");
    let (_, late, _) = blocks[blocks.len() - 2];
    let flip = |path: &Path| {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[late as usize + 7] ^= 0x10;
        std::fs::write(path, bytes).unwrap();
    };
    flip(&table.path);
    let db = Db::open(opts()).unwrap();
    let w = WriteOptions::default();
    for i in (0..3000).step_by(7) {
        let v = format!("new {i}").into_bytes();
        db.put(&w, &key6(i), &v).unwrap();
        model.insert(key6(i), v);
    }
    let err = db
        .compact_range(None, None)
        .expect_err("compaction over damage");
    let offset = corruption_in(err.root_cause(), &table.path, "compaction");
    assert_eq!(offset, late, "the damaged block's offset");
    let r = ReadOptions::default();
    for (k, v) in &model {
        if let Ok(got) = db.get(&r, k) {
            assert_eq!(got.as_ref(), Some(v), "get {}", String::from_utf8_lossy(k));
        }
    }
    drop(db);
    flip(&table.path);
    let db = Db::open(opts()).unwrap();
    db.compact_range(None, None).unwrap();
    common::assert_scan_matches(&db, &model, "after undoing the flip");
}

// ---------------------------------------------------------------------------------------------
// MANIFEST
// ---------------------------------------------------------------------------------------------

/// A database whose MANIFEST holds its opening snapshot and several synced edits.
fn db_with_edits(fs: &Arc<FaultFs>) -> Model {
    let db = Db::open(options(fs)).unwrap();
    let mut model = Model::new();
    for round in 0..4 {
        model.extend(fill(&db, round * 200..round * 200 + 200));
        db.flush().unwrap();
    }
    model
}

fn current_manifest(fs: &FaultFs) -> PathBuf {
    let current = fs
        .file_contents(&Path::new(common::FAST).join("CURRENT"))
        .unwrap();
    let name = String::from_utf8(current).unwrap();
    Path::new(common::FAST).join(name.trim_end())
}

/// Record offsets of a log file (20-byte header, payload length at bytes 4..8).
fn record_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut offsets = Vec::new();
    let mut at = 0;
    while at + 20 <= bytes.len() {
        offsets.push(at);
        at += 20 + u32::from_le_bytes(bytes[at + 4..at + 8].try_into().unwrap()) as usize;
    }
    assert_eq!(at, bytes.len());
    offsets
}

/// Any damaged byte of a MANIFEST record that a later record follows fails open, naming the
/// MANIFEST and the damaged record's offset, in every WAL recovery mode (the MANIFEST is read
/// the same way whatever the WAL's mode says).
#[test]
fn every_damaged_manifest_record_before_the_last_fails_open_at_its_offset() {
    let fs = FaultFs::new(26);
    let model = db_with_edits(&fs);
    let manifest = current_manifest(&fs);
    let good = fs.file_contents(&manifest).unwrap();
    let offsets = record_offsets(&good);
    assert!(offsets.len() >= 4, "{offsets:?}");
    let last = *offsets.last().unwrap();
    for at in (0..last).step_by(3) {
        let record = *offsets.iter().rev().find(|&&o| o <= at).unwrap();
        let mut bytes = good.clone();
        bytes[at] ^= 1 << (at % 8);
        fs.write_raw(&manifest, &bytes);
        for mode in [
            tierkv::RecoveryMode::TolerateCorruptedTail,
            tierkv::RecoveryMode::PointInTime,
            tierkv::RecoveryMode::SkipAnyCorruptedRecords,
        ] {
            let mut opts = options(&fs);
            opts.wal.recovery_mode = mode;
            let what = format!("MANIFEST byte {at} (record at {record}), {mode}");
            let offset = expect_corruption(Db::open(opts), &manifest, &what);
            assert_eq!(offset, record as u64, "{what}: wrong offset");
        }
    }
    fs.write_raw(&manifest, &good);
    let db = Db::open(options(&fs)).unwrap();
    common::assert_scan_matches(&db, &model, "after restoring the MANIFEST");
}

/// A bit flipped in the MANIFEST's last edit, one that was synced and acted on (a flush whose
/// WAL was then deleted), must not be read as a torn tail: that would drop the flushed table
/// (deleted at open as obsolete) and every write in it. The empty record written and synced
/// after each edit (its voucher) says the edit was durable, so open fails naming the MANIFEST.
#[test]
fn damaged_last_manifest_record_loses_no_flushed_write() {
    let fs = FaultFs::new(27);
    let db = Db::open(options(&fs)).unwrap();
    let model = fill(&db, 0..100);
    db.flush().unwrap();
    let table = db.live_files()[0].path.clone();
    drop(db);
    let manifest = current_manifest(&fs);
    let offsets = record_offsets(&fs.file_contents(&manifest).unwrap());
    assert_eq!(
        offsets.len(),
        4,
        "the snapshot, the flush's edit, each with its voucher"
    );
    // A payload byte of the flush's edit: its header (and length) stay intact.
    let at = offsets[2] as u64 + 30;
    fs.flip_bit(&manifest, at, 2);
    match Db::open(options(&fs)) {
        Err(e) => {
            corruption_in(&e, &manifest, "open with a damaged last MANIFEST record");
        }
        Ok(db) => {
            assert!(fs.exists(&table), "open deleted the flushed table");
            common::assert_scan_matches(&db, &model, "after open");
        }
    }
}
