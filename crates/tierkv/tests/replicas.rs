//! Replicas (`Options::auto_replicas`): with `placement = auto`, tier 0 keeps copies of the
//! capacity tier's tables in room no table needs while writes are quiet, reads use them, a
//! write burst or a table needing the room drops them, and none outlives a reopen or a crash.

mod common;

use common::{key, value, wait_for, TierSetup};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{
    Compression, Db, LiveFile, Options, OptionsBuilder, Placement, ReadOptions, WriteOptions,
};

const CAPACITY: u64 = 3 << 20;
const WAL_RESERVE: u64 = 512 << 10;
const FLUSH_RESERVE: u64 = 768 << 10;
const KEYS: u32 = 6000;

/// A 3 MiB fast tier in front of an unbounded capacity tier, automatic placement, 64 KiB
/// tables, no block cache (every table read reaches a file).
fn builder(root: &Path) -> OptionsBuilder {
    Options::builder()
        .tiers_in_capped(root, CAPACITY)
        .placement(Placement::Auto)
        .fast_tier_bandwidth(100 << 30)
        .compression(Compression::None)
        .block_cache_bytes(0)
        .write_buffer_size(64 << 10)
        .target_file_size(64 << 10)
        .max_bytes_for_level_base(256 << 10)
        .fast_tier_wal_reserve(WAL_RESERVE)
        .fast_tier_flush_reserve(FLUSH_RESERVE)
}

/// Loads `KEYS` keys of 1 KiB (twice the fast tier) and waits for compactions.
fn load(db: &Db) {
    for i in 0..KEYS {
        db.put(&WriteOptions::default(), &key(i), &value(i))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
}

fn check_all(db: &Db, keys: u32, what: &str) {
    for i in 0..keys {
        let v = db.get(&ReadOptions::default(), &key(i)).unwrap();
        assert_eq!(v, Some(value(i)), "{what}: key {i}");
    }
}

/// Tier 0's tables and replicas together stay within its budget less the WAL reserve.
fn check_budget(db: &Db, what: &str) {
    let s = db.stats();
    assert!(
        s.tiers[0].bytes_used + s.replica_bytes <= CAPACITY - WAL_RESERVE,
        "{what}: {} bytes of tables and {} of replicas on a {CAPACITY}-byte tier\n{s}",
        s.tiers[0].bytes_used,
        s.replica_bytes
    );
}

fn replicated(db: &Db) -> Vec<LiveFile> {
    db.live_files()
        .into_iter()
        .filter(|f| f.replica.is_some())
        .collect()
}

/// Waits until at least `n` tables have complete replicas.
fn wait_for_replicas(db: &Db, n: usize) -> Vec<LiveFile> {
    wait_for(Duration::from_secs(30), || {
        check_budget(db, "while replicas are made");
        let r = replicated(db);
        (r.len() >= n).then_some(r)
    })
    .unwrap_or_else(|| panic!("no {n} replicas after 30 s of quiet\n{}", db.stats()))
}

/// A loaded database in a new directory, once `n` tables have complete replicas (listed).
fn loaded_with_replicas(n: usize) -> (tempfile::TempDir, Db, Vec<LiveFile>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(builder(dir.path()).build().unwrap()).unwrap();
    load(&db);
    let replicas = wait_for_replicas(&db, n);
    (dir, db, replicas)
}

#[test]
fn quiet_writes_fill_free_room_with_replicas_that_serve_reads() {
    let (_dir, db, replicas) = loaded_with_replicas(3);
    for f in &replicas {
        assert_eq!(
            f.tier, "capacity",
            "only slower tiers' tables are replicated"
        );
        let copy = f.replica.as_ref().unwrap();
        assert_eq!(
            std::fs::read(copy).unwrap(),
            std::fs::read(&f.path).unwrap()
        );
    }
    let stats = db.stats();
    assert!(
        stats.flush_reserve_lent > 0,
        "an idle pause lends the reserve"
    );
    assert!(
        stats.replicas_made >= 3 && stats.replica_bytes > 0,
        "{stats}"
    );

    // A key of a replicated table is read from tier 0.
    let f = &replicas[0];
    let served = |db: &Db| {
        let s = db.stats();
        (s.tiers[0].reads_served, s.tiers[1].reads_served)
    };
    let (fast0, cap0) = served(&db);
    let i: u32 = std::str::from_utf8(&f.smallest[3..])
        .unwrap()
        .parse()
        .unwrap();
    // NB: the table holds the newest entry of its smallest key (keys are written once).
    assert_eq!(
        db.get(&ReadOptions::default(), &key(i)).unwrap(),
        Some(value(i))
    );
    let (fast1, cap1) = served(&db);
    assert_eq!(
        (fast1 - fast0, cap1 - cap0),
        (1, 0),
        "the replica served the read"
    );
    check_all(&db, KEYS, "with replicas");
    check_budget(&db, "with replicas");

    // Verification reads each table's own file, not its replica.
    db.verify_checksums().unwrap();
    let mut bytes = std::fs::read(&f.path).unwrap();
    bytes[100] ^= 0x40;
    std::fs::write(&f.path, bytes).unwrap();
    let err = db.verify_checksums().unwrap_err();
    assert!(
        matches!(err, tierkv::Error::Corruption { .. }),
        "a damaged table behind a replica is reported: {err}"
    );
}

#[test]
fn a_write_burst_takes_the_room_back_from_replicas() {
    let (_dir, db, _) = loaded_with_replicas(3);
    let mut i = KEYS;
    let reclaimed = wait_for(Duration::from_secs(20), || {
        for _ in 0..200 {
            db.put(&WriteOptions::default(), &key(i), &value(i))
                .unwrap();
            i += 1;
        }
        check_budget(&db, "during the burst");
        let s = db.stats();
        (s.flush_reserve_lent == 0).then_some(())
    });
    assert!(reclaimed.is_some(), "a burst takes the reserve back");
    // The monitor drops replicas over their room at its next sample.
    let fits = wait_for(Duration::from_secs(2), || {
        let s = db.stats();
        let tables = s.tiers[0].bytes_used;
        let room = CAPACITY - WAL_RESERVE - FLUSH_RESERVE;
        (s.replica_bytes == 0 || tables + s.replica_bytes <= room).then_some(())
    });
    assert!(
        fits.is_some(),
        "replicas left the held reserve free\n{}",
        db.stats()
    );
    assert!(db.stats().replicas_dropped > 0, "{}", db.stats());
    check_all(&db, i, "after the burst");
    check_budget(&db, "after the burst");
}

#[test]
fn no_replica_outlives_a_reopen() {
    let (dir, db, _) = loaded_with_replicas(2);
    drop(db);
    let replica_files = |root: &Path| {
        std::fs::read_dir(root.join("fast"))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .ends_with(".replica")
            })
            .count()
    };
    assert!(
        replica_files(dir.path()) > 0,
        "replicas stay on disk at close"
    );
    let db = Db::open(builder(dir.path()).build().unwrap()).unwrap();
    assert_eq!(replica_files(dir.path()), 0, "open deletes them");
    assert!(replicated(&db).is_empty());
    assert_eq!(db.stats().replica_bytes, 0);
    check_all(&db, KEYS, "after reopen");
}

#[test]
fn replicas_are_off_with_the_option_or_fixed_placement() {
    for fixed in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let b = builder(dir.path());
        let b = if fixed {
            b.placement(Placement::Fixed)
        } else {
            b.auto_replicas(false)
        };
        let db = Db::open(b.build().unwrap()).unwrap();
        load(&db);
        std::thread::sleep(Duration::from_secs(4));
        let s = db.stats();
        assert_eq!(
            (s.replicas_made, s.replica_bytes),
            (0, 0),
            "fixed {fixed}\n{s}"
        );
    }
}

/// Power loss or a kill while replicas are copied or read (at a spread of moments after the
/// first copy starts) loses nothing, and reopen leaves no replica file behind.
#[test]
fn crashes_while_replicas_are_copied_lose_nothing() {
    let fault_options = |fs: Arc<FaultFs>| {
        builder(Path::new("/db"))
            .fs(fs as Arc<dyn Fs>)
            .build()
            .unwrap()
    };
    let mut crashed_with_replicas = 0;
    for (trial, delay_ms) in [0u64, 1, 3, 7, 15, 40, 90, 200].into_iter().enumerate() {
        let fs = FaultFs::new(trial as u64);
        let db = Db::open(fault_options(fs.clone())).unwrap();
        for i in 0..KEYS {
            db.put(&WriteOptions::sync(), &key(i), &value(i)).unwrap();
        }
        db.wait_for_compactions().unwrap();
        let fast = Path::new("/db/fast");
        let copying = wait_for(Duration::from_secs(30), || {
            let names = fs.list_dir(fast).unwrap();
            names.iter().any(|n| n.ends_with(".replica")).then_some(())
        });
        assert!(copying.is_some(), "trial {trial}: no replica was started");
        std::thread::sleep(Duration::from_millis(delay_ms));
        let names = fs.list_dir(fast).unwrap();
        if names.iter().any(|n| n.ends_with(".replica")) {
            crashed_with_replicas += 1;
        }
        match trial % 3 {
            0 => fs.crash(CrashPolicy::DropUnsynced),
            1 => fs.crash(CrashPolicy::TearLastSector),
            _ => fs.process_crash(),
        }
        drop(db);
        let db = Db::open(fault_options(fs.clone())).unwrap();
        let left = fs.list_dir(fast).unwrap();
        assert!(
            !left.iter().any(|n| n.ends_with(".replica")),
            "trial {trial}: {left:?}"
        );
        check_all(&db, KEYS, &format!("trial {trial}"));
        db.verify_checksums().unwrap();
    }
    assert!(
        crashed_with_replicas > 0,
        "no trial crashed with replica files on disk"
    );
}
