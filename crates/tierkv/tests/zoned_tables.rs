//! `tables = "zones"` end to end: the capacity tier's tables in the zones of an emulated zoned
//! device, written, compacted, reopened after a power loss and read back; a full device; and
//! the options' checks.

mod common;

use common::{small, CAPACITY, FAST};
use std::path::Path;
use std::sync::Arc;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{Db, Options, ReadOptions, TierConfig, TierTables, WalMode, WriteOptions};

fn zoned(fs: &Arc<FaultFs>, zone_size: u64, zones: u32) -> Options {
    small(WalMode::Group, 64 << 10)
        .tier(TierConfig::new("fast", FAST))
        .tier(TierConfig::new("capacity", CAPACITY).with_zoned_tables(zone_size, zones))
        .fs(fs.clone())
        .build()
        .unwrap()
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u32, round: u32) -> Vec<u8> {
    format!("value {i} of round {round} ")
        .repeat(5)
        .into_bytes()
}

#[test]
fn a_database_with_its_capacity_tier_on_zones_reads_back_after_a_power_loss() {
    let fs = FaultFs::new(11);
    let db = Db::open(zoned(&fs, 256 << 10, 24)).unwrap();
    for round in 0..3 {
        for i in 0..3000 {
            db.put(&WriteOptions::default(), &key(i), &value(i, round))
                .unwrap();
        }
        db.flush().unwrap();
    }
    db.compact_range(None, None).unwrap();
    let on_zones = db
        .live_files()
        .iter()
        .filter(|f| f.tier == "capacity")
        .count();
    assert!(on_zones > 0, "compaction put tables on the zoned tier");
    let stats = db.stats();
    let (tier, z) = &stats.zoned_tiers[0];
    assert_eq!(tier, "capacity");
    assert!(z.engine_bytes > 0 && z.data_bytes >= z.engine_bytes);
    assert!(z.write_amplification() >= 1.0);
    assert!(stats.to_string().contains("zoned tier capacity"));
    // The tables are in the device, not files of the directory.
    let mut names = fs.list_dir(Path::new(CAPACITY)).unwrap();
    names.sort();
    assert_eq!(names, ["ZONED-DEVICE"]);
    drop(db);
    fs.crash(CrashPolicy::KeepRandomWrites);
    let db = Db::open(zoned(&fs, 256 << 10, 24)).unwrap();
    for i in 0..3000 {
        let got = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(got, Some(value(i, 2)), "key {i}");
    }
    assert!(db.verify_checksums().unwrap() > 0);
    // Budget: the device's data capacity (22 data zones).
    assert_eq!(db.stats().tiers[1].capacity, 22 * (256 << 10));
}

#[test]
fn a_full_zoned_tier_is_no_space_naming_the_tier() {
    let fs = FaultFs::new(12);
    let db = Db::open(zoned(&fs, 64 << 10, 4)).unwrap();
    let mut failed = None;
    for i in 0..20_000 {
        let put = db.put(&WriteOptions::default(), &key(i), &value(i, 0));
        let flushed = put.and_then(|()| {
            if i % 500 == 499 {
                db.flush()?;
                db.compact_range(None, None)?;
            }
            Ok(())
        });
        if let Err(e) = flushed {
            failed = Some(e);
            break;
        }
    }
    let e = failed.expect("128 KiB of zones fill up");
    assert!(e.is_no_space(), "{e}");
    assert!(
        e.to_string().contains("capacity"),
        "the error names the tier: {e}"
    );
}

#[test]
fn zoned_tables_options_are_checked() {
    let base = |t: TierConfig| {
        Options::builder()
            .tier(TierConfig::new("fast", FAST))
            .tier(t)
            .build()
    };
    let few = base(TierConfig::new("capacity", CAPACITY).with_zoned_tables(1 << 20, 3));
    assert!(few.err().unwrap().to_string().contains("too few"));
    let odd = base(TierConfig::new("capacity", CAPACITY).with_zoned_tables(5000, 8));
    assert!(odd.err().unwrap().to_string().contains("zone_size = 5000"));
    let first = Options::builder()
        .tier(TierConfig::new("fast", FAST).with_zoned_tables(1 << 20, 8))
        .build();
    assert!(first.err().unwrap().to_string().contains("tier 0"));
    let toml = format!(
        "[[tier]]\nname = \"fast\"\npath = \"{FAST}\"\n\n[[tier]]\nname = \"capacity\"\n\
         path = \"{CAPACITY}\"\ntables = \"zones\"\nzone_size = \"1MiB\"\nzones = 32\n"
    );
    let opts = Options::from_toml_str(&toml).unwrap();
    assert_eq!(opts.tiers[1].tables, TierTables::Zones);
    assert_eq!(
        (opts.tiers[1].zone_size, opts.tiers[1].zones),
        (1 << 20, 32)
    );
    assert_eq!(opts.tiers[0].tables, TierTables::Files);
}

/// Writes keys 0..4000, flushing every 200 and compacting every 400, until an operation fails;
/// returns how many keys a flush made durable.
fn write_until_failure(db: &Db) -> u32 {
    let mut durable = 0;
    for i in 0..4000 {
        let put = db.put(&WriteOptions::default(), &key(i), &value(i, 0));
        let step = put.and_then(|()| match i % 400 {
            399 => db.compact_range(None, None).map(|()| true),
            199 => db.flush().map(|()| true),
            _ => Ok(false),
        });
        match step {
            Ok(true) => durable = i + 1,
            Ok(false) => {}
            Err(_) => break,
        }
    }
    durable
}

#[test]
fn crashes_while_tables_are_written_to_zones_lose_no_flushed_key() {
    use tierkv::env::FaultKind;
    let opts = |fs: &Arc<FaultFs>| zoned(fs, 128 << 10, 24);
    let whole_run = {
        let fs = FaultFs::new(99);
        let db = Db::open(opts(&fs)).unwrap();
        assert_eq!(write_until_failure(&db), 4000);
        assert!(db.live_files().iter().any(|f| f.tier == "capacity"));
        fs.op_count()
    };
    for seed in 0..24u64 {
        let fs = FaultFs::new(seed);
        let db = Db::open(opts(&fs)).unwrap();
        // A fault stops the device at a point that moves through the run with the seed, then
        // the power goes.
        fs.fail_after(whole_run * (seed + 1) / 25, FaultKind::Io, false);
        let durable = write_until_failure(&db);
        fs.clear_faults();
        fs.crash(CrashPolicy::KeepRandomPages);
        drop(db);
        let db = Db::open(opts(&fs)).unwrap();
        for i in 0..durable {
            let got = db.get(&ReadOptions::default(), &key(i)).unwrap();
            assert_eq!(
                got,
                Some(value(i, 0)),
                "seed {seed}: key {i} of {durable} flushed"
            );
        }
        db.verify_checksums().unwrap();
    }
}

#[test]
fn the_zones_of_a_running_database_and_of_its_device_agree_and_check() {
    use tierkv::inspect::{self, ZonedDir};
    let fs = FaultFs::new(13);
    let db = Db::open(zoned(&fs, 256 << 10, 10)).unwrap();
    for round in 0..6 {
        for i in 0..3000 {
            db.put(&WriteOptions::default(), &key(i), &value(i, round))
                .unwrap();
        }
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        let tiers = inspect::zoned_tiers(&db);
        assert_eq!(tiers.len(), 1);
        let (name, image) = &tiers[0];
        assert_eq!(name, "capacity");
        let checked = image.check().unwrap();
        assert_eq!(checked.files as usize, image.files.len());
        // Every table the database lists on the capacity tier is a file of the device.
        for table in db.live_files().iter().filter(|f| f.tier == "capacity") {
            let file = format!("{:06}.sst", table.number);
            assert!(
                image
                    .files
                    .iter()
                    .any(|f| f.name == file && f.size == table.size),
                "round {round}: {file} missing from {:?}",
                image.files
            );
        }
        // Read on its own, the device lists the same files (all synced now) once the
        // background work is done: a compaction the last one triggered deletes its inputs, and
        // the zone collector may still move a file between the two reads.
        db.wait_for_compactions().unwrap();
        let mut last = None;
        for _ in 0..100 {
            let running = inspect::zoned_tiers(&db).remove(0).1;
            let offline = ZonedDir::open(fs.as_ref(), Path::new(CAPACITY)).unwrap();
            offline.image().check().unwrap();
            if offline.image().files == running.files {
                last = None;
                break;
            }
            last = Some((offline.image().files.clone(), running.files));
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(
            last, None,
            "round {round}: (device, running database) disagree"
        );
    }
    let stats = db.stats();
    let z = &stats.zoned_tiers[0].1;
    assert!(z.resets > 0, "overwritten tables' zones were reset: {z:?}");
}
