//! `wal = "zoned"` end to end: the emulated zoned device on tier 0, its bad inputs, and what a
//! power loss keeps with and without power-loss protection. The crash sweeps over writers run
//! in `ordering.rs` (every mode) and the kill -9 test in `kill.rs`.

mod common;

use common::{small, TierSetup, FAST};
use std::path::Path;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{Db, Error, Options, ReadOptions, WalMode, WriteOptions};

fn zoned(fs: &std::sync::Arc<FaultFs>, plp: bool) -> Options {
    small(WalMode::Zoned, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zone_power_loss_protection(plp)
        .build()
        .unwrap()
}

/// The error opening with `opts` fails with.
fn refused(opts: Options) -> Error {
    match Db::open(opts) {
        Ok(_) => panic!("the open succeeded"),
        Err(e) => e,
    }
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:05}").into_bytes()
}

#[test]
fn writes_go_to_the_device_and_survive_reopening() {
    let fs = FaultFs::new(1);
    let db = Db::open(zoned(&fs, false)).unwrap();
    for i in 0..3000 {
        db.put(&WriteOptions::default(), &key(i), &[i as u8; 100])
            .unwrap();
    }
    assert_eq!(db.stats().wal_io_path, "zoned");
    drop(db);
    assert!(fs.exists(&Path::new(FAST).join("WALZONES")));
    let db = Db::open(zoned(&fs, false)).unwrap();
    for i in (0..3000).step_by(97) {
        let got = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(got.as_deref(), Some(&[i as u8; 100][..]), "key {i}");
    }
}

#[test]
fn power_loss_protection_keeps_every_completed_write() {
    for seed in 0..6 {
        let fs = FaultFs::new(seed);
        let db = Db::open(zoned(&fs, true)).unwrap();
        // Not one Sync write: only the device's protection makes these durable.
        for i in 0..400 {
            db.put(&WriteOptions::default(), &key(i), b"v").unwrap();
        }
        fs.crash(CrashPolicy::KeepRandomWrites);
        drop(db);
        let db = Db::open(zoned(&fs, true)).unwrap();
        for i in 0..400 {
            assert!(
                db.get(&ReadOptions::default(), &key(i)).unwrap().is_some(),
                "seed {seed}: completed write {i} lost"
            );
        }
    }
}

#[test]
fn without_protection_a_power_loss_keeps_a_prefix_and_every_sync_write() {
    for seed in 0..12 {
        let fs = FaultFs::new(seed);
        let db = Db::open(zoned(&fs, false)).unwrap();
        for i in 0..300 {
            let opts = if i % 50 == 49 {
                WriteOptions::sync()
            } else {
                WriteOptions::default()
            };
            db.put(&opts, &key(i), b"v").unwrap();
        }
        fs.crash(CrashPolicy::KeepRandomWrites);
        drop(db);
        let db = Db::open(zoned(&fs, false)).unwrap();
        let present: Vec<bool> = (0..300)
            .map(|i| db.get(&ReadOptions::default(), &key(i)).unwrap().is_some())
            .collect();
        let n = present.iter().take_while(|&&p| p).count();
        assert!(
            present[n..].iter().all(|&p| !p),
            "seed {seed}: not a prefix"
        );
        assert!(
            n >= 300,
            "seed {seed}: only {n} writes recovered, the last Sync one was 299"
        );
    }
}

#[test]
fn a_device_too_small_for_two_reserved_zones_is_refused() {
    let fs = FaultFs::new(1);
    let opts = small(WalMode::Zoned, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zones(2)
        .build()
        .unwrap();
    let err = refused(opts);
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{msg}");
    assert!(
        msg.contains("WALZONES") && msg.contains("at least 3 zones"),
        "{msg}"
    );
}

#[test]
fn a_zone_size_that_is_not_lba_aligned_is_refused() {
    let fs = FaultFs::new(1);
    let opts = small(WalMode::Zoned, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zone_size((1 << 20) + 100)
        .build()
        .unwrap();
    let err = refused(opts).to_string();
    assert!(
        err.contains("wal.zone_size") && err.contains("LBA"),
        "{err}"
    );
}

#[test]
fn a_file_that_is_not_a_zoned_device_is_refused() {
    let fs = FaultFs::new(1);
    drop(Db::open(zoned(&fs, false)).unwrap());
    fs.write_raw(&Path::new(FAST).join("WALZONES"), &vec![1u8; 1 << 20]);
    let err = refused(zoned(&fs, false)).to_string();
    assert!(err.contains("is not a tierkv zoned device"), "{err}");
}

/// WALTZ's claim, through the database: with 1 MiB zones and 8 writers, the zone manager
/// keeps reserved zones ready ahead of the writers, so no append waits for a zone to be
/// allocated, while the log goes round a device small enough that its zones must be
/// finished, released and reset many times over.
#[test]
fn with_1_mib_zones_and_8_writers_no_append_waits_for_a_zone() {
    const WRITERS: u32 = 8;
    const PER_WRITER: u32 = 160;
    let fs = FaultFs::new(1);
    let opts = small(WalMode::Zoned, 512 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zone_size(1 << 20)
        .wal_zones(8)
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let db = &db;
            s.spawn(move || {
                for i in 0..PER_WRITER {
                    let opts = if i % 16 == 15 {
                        WriteOptions::sync()
                    } else {
                        WriteOptions::default()
                    };
                    db.put(&opts, &key(w * PER_WRITER + i), &[w as u8; 4096])
                        .unwrap();
                }
            });
        }
    });
    // The manager finishes the last replaced zones in the background.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let zoned = loop {
        let z = db.stats().zoned_wal.expect("wal = zoned reports its zones");
        if z.zones_finished >= z.zone_replacements || std::time::Instant::now() > deadline {
            break z;
        }
        std::thread::sleep(std::time::Duration::from_millis(2));
    };
    let written = u64::from(WRITERS * PER_WRITER) * 4096;
    assert!(
        zoned.zone_replacements >= written / (1 << 20) - 1,
        "{written} bytes of records went through only {} zones: {zoned:?}",
        zoned.zone_replacements + 1
    );
    assert!(
        zoned.zone_replacements > 8,
        "the log went round the device's 8 zones: {zoned:?}"
    );
    assert_eq!(zoned.reserved_waits, 0, "an append waited for a zone: {zoned:?}");
    assert_eq!(zoned.zones_finished, zoned.zone_replacements, "{zoned:?}");
    assert_eq!(zoned.dummy_appends, zoned.zones_finished, "{zoned:?}");
    assert!(db.stats().to_string().contains("0 reserved-zone waits"));
    for i in (0..WRITERS * PER_WRITER).step_by(37) {
        let got = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(got.map(|v| v.len()), Some(4096), "key {i}");
    }
}
