//! Options that make no sense are refused when the options are built, naming the option, before
//! an open changes anything; and a tier that runs out of space under the value log loses no
//! acknowledged write.

mod common;

use common::{tiny, TierSetup, CAPACITY, FAST};
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs, WritableFile};
use tierkv::{
    Db, Error, Options, ReadOptions, Result, TierConfig, ValuesMode, WalMode, WriteOptions,
};

/// `err` must be `InvalidArgument` whose message contains `needle`.
fn expect_invalid(err: Error, needle: &str, case: &str) {
    match &err {
        Error::InvalidArgument(m) => assert!(m.contains(needle), "{case}: {m}"),
        other => panic!("{case}: expected InvalidArgument naming {needle}, got {other:?}"),
    }
}

/// Every file under `dir` with its bytes, but the LOCK, which even a refused open may create.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n != "LOCK") {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The zoned WAL's device
// ---------------------------------------------------------------------------------------------

/// Builds `b` and opens a new database with it in a fresh `FaultFs`. A refusal at either
/// step must be `InvalidArgument` naming `needle`, and a refused open must leave no file
/// behind. Returns the open database, if neither step refused.
fn build_and_open(b: tierkv::OptionsBuilder, needle: &str, case: &str) -> Option<Db> {
    let fault = FaultFs::new(1);
    let opts = match b.fs(fault.clone()).build() {
        Ok(opts) => opts,
        Err(e) => {
            expect_invalid(e, needle, case);
            return None;
        }
    };
    match Db::open(opts) {
        Ok(db) => Some(db),
        Err(e) => {
            expect_invalid(e, needle, case);
            let left = fault.list_dir(Path::new(FAST)).unwrap_or_default();
            assert!(left.is_empty(), "{case}: the refused open left {left:?}");
            None
        }
    }
}

/// A zoned-WAL geometry that no device can have (zones not a multiple of 4 KiB, or of no
/// bytes, or too few zones for one active and two reserved, or so many that the device's zone
/// table alone would take 32 GiB of memory) is refused, naming the option, before anything
/// is written.
#[test]
fn a_bad_zoned_wal_geometry_is_refused_before_anything_is_written() {
    let cases: [(&str, u64, u32, &str); 5] = [
        ("zone size not whole pages", 1000, 16, "wal.zone_size"),
        ("zone size 0", 0, 16, "wal.zone_size"),
        ("no zones", 1 << 20, 0, "wal.zones"),
        ("two zones", 1 << 20, 2, "wal.zones"),
        ("4 billion zones", 1 << 20, u32::MAX, "wal.zones"),
    ];
    for (case, zone_size, zones, needle) in cases {
        let b = tiny()
            .fault_tiers()
            .wal(WalMode::Zoned)
            .wal_zone_size(zone_size)
            .wal_zones(zones);
        if build_and_open(b, needle, case).is_some() {
            panic!("{case}: accepted");
        }
    }
}

/// A zoned-WAL geometry that opens leaves room for a batch: every geometry accepted takes a
/// small write (a device of 3 zones, the documented least, or of 64 KiB zones, left no room
/// for a log's records, and every write was refused as larger than a batch limit of 0 bytes).
#[test]
fn an_accepted_zoned_wal_geometry_takes_writes() {
    for (zone_size, zones) in [(1 << 20, 3), (64 << 10, 16), (1 << 20, 4), (1 << 20, 16)] {
        let case = format!("{zones} zones of {zone_size} bytes");
        let b = tiny()
            .fault_tiers()
            .wal(WalMode::Zoned)
            .wal_zone_size(zone_size)
            .wal_zones(zones);
        let Some(db) = build_and_open(b, "wal.zones", &case) else {
            continue;
        };
        db.put(&WriteOptions::sync(), b"key", b"value")
            .unwrap_or_else(|e| panic!("{case}: a 10-byte write: {e}"));
        assert_eq!(
            db.get(&ReadOptions::default(), b"key").unwrap().unwrap(),
            b"value"
        );
    }
}

/// Reopening a database with a zoned-WAL geometry that cannot be opened fails, naming the
/// option, and changes none of its files (the geometry was checked only after recovery had
/// flushed the old WAL to a table and written a new MANIFEST).
#[test]
fn reopening_with_a_bad_zoned_wal_geometry_changes_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = || tiny().tiers_in(dir.path()).build().unwrap();
    {
        let db = Db::open(good()).unwrap();
        for i in 0..50u32 {
            db.put(&WriteOptions::sync(), &i.to_be_bytes(), b"in the WAL")
                .unwrap();
        }
    }
    let before = snapshot(dir.path());
    let mut bad = good();
    bad.wal.mode = WalMode::Zoned;
    bad.wal.zone_size = 1000;
    let err = Db::open(bad).map(drop).expect_err("a zone of 1000 bytes");
    expect_invalid(err, "zone_size", "reopen with wal.zone_size = 1000");
    assert!(
        snapshot(dir.path()) == before,
        "the refused open changed the database's files"
    );
    let db = Db::open(good()).unwrap();
    for i in 0..50u32 {
        let got = db.get(&ReadOptions::default(), &i.to_be_bytes()).unwrap();
        assert_eq!(got.as_deref(), Some(&b"in the WAL"[..]), "key {i}");
    }
}

// ---------------------------------------------------------------------------------------------
// Tiers
// ---------------------------------------------------------------------------------------------

/// A tier's zoned device of 4 billion zones (a zone table of 32 GiB, held in memory) is
/// refused by `build`, naming the tier's option.
#[test]
fn a_zoned_tier_of_billions_of_zones_is_refused_at_build() {
    let err = Options::builder()
        .tier(TierConfig::new("fast", FAST))
        .tier(TierConfig::new("capacity", CAPACITY).with_zoned_tables(64 << 20, u32::MAX))
        .build()
        .map(drop)
        .expect_err("4 billion zones");
    expect_invalid(err, "tiers[1]", "4 billion zones");
}

/// A WAL reserve as large as an unlimited fast tier leaves tables no room on it: refused by
/// `build`, naming the option. (It was accepted, and with one tier every flush then failed
/// with `NoSpace` although the tier has no limit.)
#[test]
fn a_wal_reserve_that_leaves_no_room_for_tables_is_refused() {
    let built = tiny()
        .tier(TierConfig::new("fast", FAST))
        .fast_tier_wal_reserve(u64::MAX)
        .fs(FaultFs::new(2))
        .build();
    let opts = match built {
        Ok(opts) => opts,
        Err(e) => return expect_invalid(e, "fast_tier_wal_reserve", "reserve u64::MAX"),
    };
    let db = Db::open(opts).unwrap();
    db.put(&WriteOptions::sync(), b"k", b"v").unwrap();
    db.flush().expect("a flush into an unlimited tier");
}

/// A capacity tier with a budget of 0 bytes can never hold a table: refused by `build`, naming
/// the tier's option. (It was accepted, and the first flush into it failed with `NoSpace` and
/// stopped writes.)
#[test]
fn a_tier_budget_that_holds_no_table_is_refused() {
    let built = tiny()
        .tier(TierConfig::new("fast", FAST))
        .tier(TierConfig::new("capacity", CAPACITY).with_capacity(0))
        .levels_on_fast(0)
        .fs(FaultFs::new(4))
        .build();
    let opts = match built {
        Ok(opts) => opts,
        Err(e) => return expect_invalid(e, "tiers[1].capacity", "capacity 0"),
    };
    let db = Db::open(opts).unwrap();
    db.put(&WriteOptions::sync(), b"k", b"v").unwrap();
    db.flush().expect("a flush with L0 on the capacity tier");
}

// ---------------------------------------------------------------------------------------------
// A full tier under the value log
// ---------------------------------------------------------------------------------------------

/// A [`FaultFs`] whose value-log appends, while `full` is set, write half their bytes and then
/// fail with `ENOSPC`, as `write(2)` does on a device that fills up part way through a write.
struct ShortWriteFs {
    inner: Arc<FaultFs>,
    full: Arc<Mutex<bool>>,
}

struct ShortWriteFile {
    inner: Box<dyn WritableFile>,
    path: PathBuf,
    full: Arc<Mutex<bool>>,
}

impl ShortWriteFs {
    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(ShortWriteFile {
            inner,
            path: path.to_path_buf(),
            full: Arc::clone(&self.full),
        })
    }
}

impl Fs for ShortWriteFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.create(path)?))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Ok(self.wrap(path, self.inner.open_append(path)?))
    }
    common::forward_fs!(inner => open_read, exists, list_dir, create_dir_all, remove_file,
        rename, sync_dir, file_size, lock, open_positional);
}

impl WritableFile for ShortWriteFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let is_vlog = self.path.extension().is_some_and(|e| e == "vlog");
        if is_vlog && *self.full.lock() {
            self.inner.append(&data[..data.len() / 2])?;
            return Err(Error::Io {
                op: "write",
                path: self.path.clone(),
                source: io::Error::from_raw_os_error(libc::ENOSPC),
            });
        }
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<()> {
        self.inner.sync()
    }
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn preallocate(&mut self, offset: u64, len: u64) -> Result<()> {
        self.inner.preallocate(offset, len)
    }
    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

/// A large value for key `i`, naming it.
fn large(i: u32) -> Vec<u8> {
    let mut v = format!("value {i} ").into_bytes();
    v.resize(8 << 10, b'a' + (i % 26) as u8);
    v
}

/// The capacity tier fills up while a write appends its large value to the value log, which
/// keeps half of it. The write fails with an out-of-space error, and no acknowledged write is
/// lost or read wrong: neither those before it, nor (once there is room again, whether the
/// database took them in place or after a reopen) those after it.
#[test]
fn a_value_log_write_that_meets_a_full_tier_loses_nothing() {
    let fault = FaultFs::new(3);
    let full = Arc::new(Mutex::new(false));
    let fs = Arc::new(ShortWriteFs {
        inner: Arc::clone(&fault),
        full: Arc::clone(&full),
    });
    let opts = tiny()
        .fault_tiers()
        .values(ValuesMode::Split)
        .split_threshold(1 << 10)
        .fs(fs)
        .build()
        .unwrap();
    let mut acked = BTreeMap::new();
    let db = Db::open(opts.clone()).unwrap();
    for i in 0..5u32 {
        db.put(&WriteOptions::sync(), &i.to_be_bytes(), &large(i))
            .unwrap();
        acked.insert(i, large(i));
    }
    *full.lock() = true;
    let err = db
        .put(&WriteOptions::sync(), &5u32.to_be_bytes(), &large(5))
        .expect_err("a value-log append on a full tier");
    assert!(err.is_no_space(), "{err:?}");
    *full.lock() = false;
    // Room again: writes go on in place, or stay stopped until a reopen.
    let db = if db.put(&WriteOptions::sync(), b"probe", b"x").is_ok() {
        db
    } else {
        drop(db);
        Db::open(opts.clone()).unwrap()
    };
    for i in 6..12u32 {
        db.put(&WriteOptions::sync(), &i.to_be_bytes(), &large(i))
            .unwrap();
        acked.insert(i, large(i));
    }
    let check = |db: &Db, when: &str| {
        for (i, v) in &acked {
            let got = db.get(&ReadOptions::default(), &i.to_be_bytes());
            match got {
                Ok(Some(got)) => assert!(got == *v, "{when}: key {i} reads another value"),
                other => panic!("{when}: key {i}: {other:?}"),
            }
        }
    };
    check(&db, "after the failure");
    drop(db);
    let db = Db::open(opts).unwrap();
    check(&db, "after a reopen");
}
