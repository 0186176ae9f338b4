//! A fast tier of kind `pm` (`docs/pm-tier.md`): tier 0 on shared memory (`/dev/shm`, tmpfs),
//! its files memory-mapped, the capacity tier an ordinary directory. The `splitkv` preset's
//! fast area (the hot store's slabs) then updates small items in place as memory stores; the
//! hot store's main behaviours hold there: objects in slabs survive a reopen, migration past
//! 80% keeps every value readable, a damaged slot names its file and offset. A pm tier on a
//! directory that is not tmpfs or a DAX mount is refused naming the option. A process killed
//! after synced writes loses none of them: the WAL's length runs ahead of its records in
//! zeros, which recovery takes for the log's end (exact lengths under `absolute-consistency`).
//!
//! Where `/dev/shm` is missing the tests that need it return early.

mod common;

use common::{
    answered_by_store, get_named, large_value, names, put_named, small_value, tiny,
    write_two_slab_jobs, PmDirs,
};
use std::path::Path;
use tierkv::{
    Db, Error, Options, Preset, RecoveryMode, TierConfig, TierKind, WalMode, WriteOptions,
};

impl PmDirs {
    /// The `splitkv` preset on tiny tables, a 64 KiB hot store on the pm tier.
    fn options(&self, mode: WalMode) -> Options {
        pm_options(&self.fast(), &self.capacity(), mode, None)
    }
}

/// The options of [`PmDirs::options`] for the tiers at `fast` and `capacity`, and a WAL
/// recovery mode where one is given.
fn pm_options(
    fast: &Path,
    capacity: &Path,
    mode: WalMode,
    recovery: Option<RecoveryMode>,
) -> Options {
    let mut builder = tiny()
        .tier(TierConfig::new("fast", fast).with_kind(TierKind::Pm))
        .tier(TierConfig::new("capacity", capacity))
        .preset(Preset::SplitKv)
        .hot_budget(64 << 10)
        .wal(mode);
    if let Some(recovery) = recovery {
        builder = builder.wal_recovery_mode(recovery);
    }
    builder.build().expect("valid options")
}

#[test]
fn small_items_live_in_mapped_slabs_and_survive_reopen_in_every_wal_mode() {
    for mode in [WalMode::Group, WalMode::Parallel, WalMode::Append] {
        let Some(dirs) = PmDirs::new() else { return };
        let db = Db::open(dirs.options(mode)).unwrap();
        let small = names("small", 40);
        let big = names("big", 3);
        put_named(&db, &small, small_value);
        put_named(&db, &big, large_value);
        let h = db.stats().hot_tier.expect("hot store on");
        assert_eq!(h.objects, 40, "{mode:?}: {h:?}");
        assert_eq!(h.placed_value_log, (3, 3 * (8 << 10)), "{mode:?}: {h:?}");
        // In-place updates of the same keys: still 40 objects, the newest value read.
        let w = WriteOptions::sync();
        for k in &small[..10] {
            db.put(&w, k.as_bytes(), b"updated in place").unwrap();
        }
        db.flush().unwrap();
        assert_eq!(
            get_named(&db, &small[3]),
            Some(b"updated in place".to_vec())
        );
        drop(db);

        let slabs = std::fs::read_dir(dirs.fast().join("hot")).unwrap().count();
        assert!(slabs >= 2, "{mode:?}: slab files on the pm tier");
        let db = Db::open(dirs.options(mode)).unwrap();
        for k in &small[..10] {
            assert_eq!(
                get_named(&db, k),
                Some(b"updated in place".to_vec()),
                "{mode:?}"
            );
        }
        for k in &small[10..] {
            assert_eq!(get_named(&db, k), Some(small_value(k)), "{mode:?}: {k}");
        }
        for k in &big {
            assert_eq!(get_named(&db, k), Some(large_value(k)), "{mode:?}: {k}");
        }
        assert_eq!(answered_by_store(&db, &small), 40, "{mode:?}");
    }
}

#[test]
fn unflushed_synced_writes_come_back_from_the_mapped_wal() {
    let Some(dirs) = PmDirs::new() else { return };
    let db = Db::open(dirs.options(WalMode::Group)).unwrap();
    let keys = names("wal", 30);
    for k in &keys {
        db.put(&WriteOptions::sync(), k.as_bytes(), &small_value(k))
            .unwrap();
    }
    // Dropped without a flush: the memtable is rebuilt from the WAL on the pm tier.
    drop(db);
    let db = Db::open(dirs.options(WalMode::Group)).unwrap();
    for k in &keys {
        assert_eq!(get_named(&db, k), Some(small_value(k)), "{k}");
    }
}

#[test]
fn cold_items_migrate_past_80_percent_and_every_value_reads_back() {
    let Some(dirs) = PmDirs::new() else { return };
    let db = Db::open(dirs.options(WalMode::Group)).unwrap();
    let hot = names("hot", 100);
    let cold = names("cold", 150);
    put_named(&db, &hot, small_value);
    for _ in 0..20 {
        assert_eq!(answered_by_store(&db, &hot), 100);
    }
    put_named(&db, &cold[..50], small_value);
    put_named(&db, &cold[50..100], small_value);
    put_named(&db, &cold[100..], small_value);
    let h = db.stats().hot_tier.expect("hot store on");
    assert!(h.migration_rounds >= 1, "{h:?}");
    assert!(h.migrated_objects >= 100, "{h:?}");
    assert!(h.bytes as f64 <= 0.8 * (64 << 10) as f64, "{h:?}");
    assert_eq!(answered_by_store(&db, &hot), 100, "hot keys stayed");
    drop(db);
    let db = Db::open(dirs.options(WalMode::Group)).unwrap();
    for k in hot.iter().chain(&cold) {
        assert_eq!(get_named(&db, k), Some(small_value(k)), "after reopen: {k}");
    }
}

#[test]
fn a_damaged_slot_in_a_mapped_slab_is_corruption_naming_file_and_offset() {
    let Some(dirs) = PmDirs::new() else { return };
    let db = Db::open(dirs.options(WalMode::Group)).unwrap();
    write_two_slab_jobs(&db);
    drop(db);
    // Slot 3 of the 100-byte class: flip a bit of its key.
    let slab = dirs.fast().join("hot").join("slab-00-0100.slab");
    let mut bytes = std::fs::read(&slab).unwrap();
    bytes[300 + 19] ^= 1;
    std::fs::write(&slab, &bytes).unwrap();
    match Db::open(dirs.options(WalMode::Group)) {
        Err(Error::Corruption { file, offset, .. }) => {
            assert_eq!(file, slab);
            assert_eq!(offset, 300);
        }
        other => panic!("expected corruption, got {other:?}"),
    }
}

#[test]
fn a_pm_tier_on_a_disk_directory_is_refused_naming_the_option() {
    let disk = tempfile::tempdir().unwrap();
    let on_tmpfs = std::process::Command::new("stat")
        .args(["-f", "-c", "%T"])
        .arg(disk.path())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "tmpfs")
        .unwrap_or(false);
    if on_tmpfs {
        return; // nothing to refuse where the temporary directory is tmpfs
    }
    let opts = tiny()
        .tier(TierConfig::new("fast", disk.path().join("fast")).with_kind(TierKind::Pm))
        .tier(TierConfig::new("capacity", disk.path().join("capacity")))
        .build()
        .unwrap();
    match Db::open(opts) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("tiers[0].kind = \"pm\""), "{msg}");
            assert!(msg.contains("fast"), "{msg}");
        }
        other => panic!("expected InvalidArgument, got {:?}", other.err()),
    }
    assert!(
        !disk.path().join("fast").exists(),
        "nothing created on refusal"
    );
}

#[test]
fn pm_tier_kind_from_toml() {
    let text = r#"
        [[tier]]
        name = "fast"
        path = "/dev/shm/tierkv/fast"
        kind = "pm"

        [[tier]]
        name = "capacity"
        path = "/var/lib/tierkv/capacity"
    "#;
    let opts = Options::from_toml_str(text).unwrap();
    assert_eq!(opts.tiers[0].kind, TierKind::Pm);
    assert_eq!(opts.tiers[1].kind, TierKind::Block);
    let bad = text.replace("kind = \"pm\"", "kind = \"optane\"");
    assert!(Options::from_toml_str(&bad).is_err());
}

/// Set in the child process of [`a_killed_process_loses_no_synced_write_on_a_pm_wal`]: the
/// fast tier's path, the capacity tier's path and the case (`default`, `absolute`: every put
/// synced, in that recovery mode; `mixed`: every 100th of the first 400 puts synced, the rest
/// only handed to the OS, which a process crash must not lose either), `|`-separated.
const CRASH_CHILD: &str = "TIERKV_PM_CRASH_CHILD";

/// Keys the child writes, each with a synced put: several 64 KiB memtables' worth, so that
/// sealed WALs and the active one are all on the pm tier when it dies.
const CRASH_KEYS: u32 = 900;

fn recovery_by_name(name: &str) -> Option<RecoveryMode> {
    match name {
        "absolute" => Some(RecoveryMode::AbsoluteConsistency),
        _ => None,
    }
}

/// The child's part: puts, then death without a close (`abort`, as `kill -9`). In the
/// `mixed` case most puts are not synced, so memtable switches seal WALs unsynced: the
/// early ones a synced put syncs and closes before its own WAL vouches for them, the late
/// ones are still open when the process dies.
fn write_then_abort(spec: &str) -> ! {
    let parts: Vec<&str> = spec.split('|').collect();
    let (fast, capacity) = (Path::new(parts[0]), Path::new(parts[1]));
    let opts = pm_options(fast, capacity, WalMode::Group, recovery_by_name(parts[2]));
    let db = Db::open(opts).unwrap();
    for (i, k) in names("crash", CRASH_KEYS).iter().enumerate() {
        let synced = parts[2] != "mixed" || (i < 400 && i % 100 == 99);
        let w = if synced {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        db.put(&w, k.as_bytes(), &small_value(k)).unwrap();
    }
    std::process::abort();
}

/// The WAL files on the fast tier, newest last, with their lengths.
fn wal_lengths(fast: &Path) -> Vec<(String, u64)> {
    let mut logs: Vec<(String, u64)> = std::fs::read_dir(fast)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".log"))
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    logs.sort();
    logs
}

#[test]
fn a_killed_process_loses_no_synced_write_on_a_pm_wal() {
    if let Ok(spec) = std::env::var(CRASH_CHILD) {
        write_then_abort(&spec);
    }
    for recovery in ["default", "absolute", "mixed"] {
        let Some(dirs) = PmDirs::new() else { return };
        let capacity = dirs.capacity();
        let spec = format!(
            "{}|{}|{recovery}",
            dirs.fast().display(),
            capacity.display()
        );
        let status = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "a_killed_process_loses_no_synced_write_on_a_pm_wal",
                "--test-threads=1",
            ])
            .env(CRASH_CHILD, &spec)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(!status.success(), "{recovery}: the child dies");

        let logs = wal_lengths(&dirs.fast());
        let (newest, len) = logs.last().expect("a WAL on the pm tier").clone();
        if recovery == "absolute" {
            // Exact lengths: the last byte of the WAL is its last record's.
            let bytes = std::fs::read(dirs.fast().join(&newest)).unwrap();
            assert_ne!(
                bytes.last(),
                Some(&0),
                "{recovery}: {newest} ends in a record"
            );
        } else {
            assert_eq!(
                len % (1 << 20),
                0,
                "{recovery}: {newest} runs ahead ({len})"
            );
            // Sealed WALs were closed, their lengths cut back to their records.
            for (name, _) in &logs[..logs.len() - 1] {
                let bytes = std::fs::read(dirs.fast().join(name)).unwrap();
                assert_ne!(bytes.last(), Some(&0), "{recovery}: sealed {name} is exact");
            }
        }

        let opts = pm_options(
            &dirs.fast(),
            &capacity,
            WalMode::Group,
            recovery_by_name(recovery),
        );
        let db = Db::open(opts).unwrap();
        for k in &names("crash", CRASH_KEYS) {
            assert_eq!(get_named(&db, k), Some(small_value(k)), "{recovery}: {k}");
        }
    }
}
