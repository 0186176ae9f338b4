//! Bad input gets a clear, typed error, and nothing stored before is lost by it.
//!
//! Wrong directories (foreign, empty, absent, a file, swapped, another database's, a tier left
//! out of the options), a database opened twice (in this process and from another process
//! holding the flock), oversized keys and values, and invalid options (builder, struct fields,
//! TOML, fewer levels than the data uses). After every refusal the database opens as before with
//! all of its data, and the refused open changed no file but the LOCK it took.

mod common;

use common::{tiny, TierSetup};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tierkv::{
    Db, Error, Options, OptionsBuilder, ReadOptions, TierConfig, WriteBatch, WriteOptions,
    MAX_KEY_LEN, MAX_VALUE_LEN,
};

/// [`tiny`] options on the tiers at `fast` and `capacity`.
fn builder(fast: &Path, capacity: &Path) -> OptionsBuilder {
    tiny().two_tiers(fast, capacity, u64::MAX)
}

/// A database in `<root>/fast` + `<root>/capacity`.
struct Fixture {
    root: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        Fixture {
            root: tempfile::tempdir().unwrap(),
        }
    }

    fn fast(&self) -> PathBuf {
        self.root.path().join("fast")
    }

    fn capacity(&self) -> PathBuf {
        self.root.path().join("capacity")
    }

    fn opts(&self) -> Options {
        builder(&self.fast(), &self.capacity()).build().unwrap()
    }

    /// Creates the database with 2000 keys, compacted so most of them live on the capacity tier,
    /// plus a few unflushed ones in the WAL.
    fn populate(&self) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let db = Db::open(self.opts()).unwrap();
        let w = WriteOptions::default();
        let mut model = BTreeMap::new();
        for i in 0..2000 {
            let (k, v) = (
                format!("key{i:05}"),
                format!("value {i} {}", "v".repeat(i % 200)),
            );
            db.put(&w, k.as_bytes(), v.as_bytes()).unwrap();
            model.insert(k.into_bytes(), v.into_bytes());
        }
        db.compact_range(None, None).unwrap();
        assert!(
            db.live_files().iter().any(|f| f.tier == "capacity"),
            "no table reached the capacity tier"
        );
        db.put(&WriteOptions::sync(), b"unflushed", b"in the WAL")
            .unwrap();
        model.insert(b"unflushed".to_vec(), b"in the WAL".to_vec());
        model
    }

    /// The database opens with its options and holds exactly `model`.
    fn assert_intact(&self, model: &BTreeMap<Vec<u8>, Vec<u8>>, after: &str) {
        let db = Db::open(self.opts()).unwrap_or_else(|e| panic!("reopen after {after}: {e}"));
        let mut it = db.iter(ReadOptions::default()).unwrap();
        it.seek_to_first();
        let got: BTreeMap<_, _> = it.entries().map(Result::unwrap).collect();
        assert!(
            got == *model,
            "after {after}: {} keys instead of {}",
            got.len(),
            model.len()
        );
    }
}

/// Every file under `dir` with its bytes, to show a refused open left it alone.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries {
            let path = e.unwrap().path();
            if path.is_file() {
                out.insert(path.clone(), std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

/// A change to options, applied to a valid set.
type Edit = Box<dyn Fn(&mut Options)>;

/// [`snapshot`] without the LOCK file, which even a refused open may create.
fn unlocked(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut files = snapshot(dir);
    files.retain(|p, _| !p.ends_with("LOCK"));
    files
}

/// `err` must be `InvalidArgument` whose message contains each of `needles`.
#[track_caller]
fn expect_invalid(err: Error, needles: &[&str]) {
    let msg = err.to_string();
    assert!(
        matches!(err, Error::InvalidArgument(_)),
        "expected InvalidArgument, got {err:?}"
    );
    for n in needles {
        assert!(msg.contains(n), "message does not name {n:?}: {msg}");
    }
}

// ---------------------------------------------------------------------------------------------
// Directories
// ---------------------------------------------------------------------------------------------

/// A directory holding someone else's file, as either tier of a new database: refused with
/// InvalidArgument, and the directory is left exactly as it was.
#[test]
fn foreign_directory_is_refused_and_left_alone() {
    for foreign_tier in ["fast", "capacity"] {
        let root = tempfile::tempdir().unwrap();
        let foreign = root.path().join("home");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("notes.txt"), b"my notes, not a database").unwrap();
        let before = snapshot(&foreign);
        let other = root.path().join("new");
        let opts = if foreign_tier == "fast" {
            builder(&foreign, &other).build().unwrap()
        } else {
            builder(&other, &foreign).build().unwrap()
        };
        let err = Db::open(opts).expect_err("open over a foreign directory");
        expect_invalid(err, &["notes.txt", &foreign.to_string_lossy()]);
        assert_eq!(
            snapshot(&foreign),
            before,
            "{foreign_tier}: the foreign directory changed"
        );
    }
}

/// A tier path that names a regular file: an error naming it (no panic), the file untouched.
#[test]
fn tier_path_that_is_a_file_is_refused() {
    for file_tier in ["fast", "capacity"] {
        let root = tempfile::tempdir().unwrap();
        let file = root.path().join("a-file");
        std::fs::write(&file, b"not a directory").unwrap();
        let other = root.path().join("dir");
        let opts = if file_tier == "fast" {
            builder(&file, &other).build().unwrap()
        } else {
            builder(&other, &file).build().unwrap()
        };
        let err = Db::open(opts).expect_err("open with a tier path naming a file");
        assert!(
            err.to_string().contains(&*file.to_string_lossy()),
            "{file_tier}: error does not name the file: {err}"
        );
        assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
    }
}

#[test]
fn missing_database_without_create_if_missing_is_not_found() {
    let root = tempfile::tempdir().unwrap();
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let absent = root.path().join("absent");
    for fast in [&empty, &absent] {
        let opts = builder(fast, &root.path().join("cap"))
            .create_if_missing(false)
            .build()
            .unwrap();
        match Db::open(opts) {
            Err(Error::NotFound(msg)) => {
                assert!(
                    msg.contains(&*fast.to_string_lossy()),
                    "message does not name the directory: {msg}"
                )
            }
            other => panic!(
                "open of {} without create_if_missing: {other:?}",
                fast.display()
            ),
        }
    }
    assert!(
        snapshot(&empty).is_empty(),
        "files were created in the empty directory"
    );
    assert!(!absent.exists(), "the absent directory was created");
}

#[test]
fn error_if_exists_is_already_exists() {
    let fx = Fixture::new();
    let model = fx.populate();
    let mut opts = fx.opts();
    opts.error_if_exists = true;
    match Db::open(opts) {
        Err(Error::AlreadyExists(path)) => assert_eq!(path, fx.fast()),
        other => panic!("open with error_if_exists of an existing database: {other:?}"),
    }
    fx.assert_intact(&model, "error_if_exists");
}

/// A second open while the first is live, in this process (real files and FaultFs): Locked,
/// and the first handle keeps working.
#[test]
fn second_open_is_locked() {
    let fx = Fixture::new();
    let model = fx.populate();
    let db = Db::open(fx.opts()).unwrap();
    match Db::open(fx.opts()) {
        Err(Error::Locked(path)) => assert!(path.starts_with(fx.fast()), "{}", path.display()),
        other => panic!("second open: {other:?}"),
    }
    db.put(&WriteOptions::sync(), b"first handle", b"still works")
        .unwrap();
    drop(db);
    let mut model = model;
    model.insert(b"first handle".to_vec(), b"still works".to_vec());
    fx.assert_intact(&model, "a refused second open");

    let fs = tierkv::env::FaultFs::new(1);
    let opts = tiny().fault_tiers().fs(fs).build().unwrap();
    let db = Db::open(opts.clone()).unwrap();
    assert!(
        matches!(Db::open(opts.clone()), Err(Error::Locked(_))),
        "FaultFs second open"
    );
    drop(db);
    Db::open(opts).expect("open after the first handle is gone");
}

/// Another process holding the LOCK file's flock (here the `flock` tool): Locked.
#[test]
fn lock_held_by_another_process_is_locked() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let fx = Fixture::new();
    let model = fx.populate();
    let lock = fx.fast().join("LOCK");
    // `-F`: no fork, and the shell `exec`s sleep: the process we kill is the one holding the
    // lock, so killing it releases the lock.
    let child = Command::new("flock")
        .args(["-n", "-F"])
        .arg(&lock)
        .args(["sh", "-c", "echo held; exec sleep 60"])
        .stdout(Stdio::piped())
        .spawn();
    let Ok(mut child) = child else {
        eprintln!("skipped: the flock tool is not installed");
        return;
    };
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let result = Db::open(fx.opts());
    // NB: the child is ours; stop it before asserting, so a failure leaves nothing running.
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(line.trim(), "held", "flock did not take the lock");
    match result {
        Err(Error::Locked(path)) => assert_eq!(path, lock),
        other => panic!(
            "open while another process holds the lock: {:?}",
            other.map(|_| "a Db")
        ),
    }
    fx.assert_intact(&model, "a lock held by another process");
}

/// The capacity tier's directory is empty or absent in the options: a clear error naming the
/// tier and directory (not a silently empty tier), and the real configuration still opens.
#[test]
fn missing_tier_directory_is_reported() {
    let fx = Fixture::new();
    let model = fx.populate();
    let empty = fx.root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let absent = fx.root.path().join("absent");
    let before = unlocked(&fx.fast());
    for capacity in [&empty, &absent] {
        let err = Db::open(builder(&fx.fast(), capacity).build().unwrap())
            .expect_err("open with the capacity tier's directory missing");
        let msg = err.to_string();
        assert!(
            matches!(err, Error::NotFound(_) | Error::InvalidArgument(_)),
            "{}: {err:?}",
            capacity.display()
        );
        for needle in ["capacity", &*capacity.to_string_lossy()] {
            assert!(
                msg.contains(needle),
                "message does not name {needle:?}: {msg}"
            );
        }
    }
    assert!(
        snapshot(&empty).is_empty(),
        "files were created in the wrong directory"
    );
    assert!(!absent.exists(), "the absent directory was created");
    assert!(
        unlocked(&fx.fast()) == before,
        "the refused opens changed the fast tier"
    );

    // The fast tier's directory is the wrong one instead: no new database over the old files.
    let err = Db::open(builder(&empty, &fx.capacity()).build().unwrap())
        .expect_err("open with the fast tier's directory missing");
    assert!(
        matches!(
            err,
            Error::NotFound(_) | Error::InvalidArgument(_) | Error::Corruption { .. }
        ),
        "{err:?}"
    );
    fx.assert_intact(&model, "opens with a missing tier directory");
}

/// The two tier directories given the wrong way round: refused, and neither directory changes.
#[test]
fn swapped_tier_directories_are_refused_and_left_alone() {
    let fx = Fixture::new();
    let model = fx.populate();
    let (fast, capacity) = (fx.fast(), fx.capacity());
    let before = (unlocked(&fast), unlocked(&capacity));
    Db::open(builder(&capacity, &fast).build().unwrap()).expect_err("open with swapped tiers");
    let after = (unlocked(&fast), unlocked(&capacity));
    assert!(after == before, "the open with swapped tiers changed files");
    fx.assert_intact(&model, "an open with swapped tiers");
}

/// The error for swapped directories says so and names both: anything else sends the user
/// hunting for damage that is not there.
#[test]
fn swapped_tier_directories_error_says_so() {
    let fx = Fixture::new();
    fx.populate();
    let (fast, capacity) = (fx.fast(), fx.capacity());
    let err = Db::open(builder(&capacity, &fast).build().unwrap()).expect_err("swapped tiers");
    let msg = err.to_string();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
    assert!(
        msg.contains("swapped"),
        "error does not say the tiers are swapped: {msg}"
    );
    for dir in [&fast, &capacity] {
        assert!(
            msg.contains(&*dir.to_string_lossy()),
            "error does not name {}: {msg}",
            dir.display()
        );
    }
}

/// A tier directory of another database, given to a new one: refused, and the other database
/// is untouched.
#[test]
fn another_databases_tier_is_refused() {
    let a = Fixture::new();
    let model = a.populate();
    let b = Fixture::new();
    let err = Db::open(builder(&b.fast(), &a.capacity()).build().unwrap())
        .expect_err("new database on another database's capacity tier");
    let msg = err.to_string();
    assert!(
        msg.contains(&*a.capacity().to_string_lossy()),
        "error does not name the directory: {msg}"
    );
    a.assert_intact(&model, "another database tried its capacity tier");
}

/// A configuration that drops a tier the database keeps tables on: refused naming that tier.
#[test]
fn dropping_a_tier_from_the_options_is_refused() {
    let fx = Fixture::new();
    let model = fx.populate();
    let opts = Options::builder()
        .tier(TierConfig::new("fast", fx.fast()))
        .build()
        .unwrap();
    expect_invalid(
        Db::open(opts).expect_err("open without the capacity tier"),
        &["capacity"],
    );
    let renamed = Options::builder()
        .tier(TierConfig::new("fast", fx.fast()))
        .tier(TierConfig::new("qlc", fx.capacity()))
        .build()
        .unwrap();
    let err = Db::open(renamed).expect_err("open with the capacity tier renamed");
    assert!(err.to_string().contains("capacity"), "{err}");
    fx.assert_intact(&model, "opens with a tier missing from the options");
}

// ---------------------------------------------------------------------------------------------
// Keys and values
// ---------------------------------------------------------------------------------------------

#[test]
fn oversized_keys_and_values_are_refused() {
    let fx = Fixture::new();
    let mut model = fx.populate();
    let db = Db::open(fx.opts()).unwrap();
    let w = WriteOptions::sync();
    let long_key = vec![b'k'; MAX_KEY_LEN + 1];
    expect_invalid(
        db.put(&w, &long_key, b"v").unwrap_err(),
        &["key", &MAX_KEY_LEN.to_string()],
    );
    expect_invalid(db.delete(&w, &long_key).unwrap_err(), &["key"]);
    {
        // Built here and dropped at once: 64 MiB + 1 byte.
        let huge = vec![0u8; MAX_VALUE_LEN + 1];
        expect_invalid(
            db.put(&w, b"huge", &huge).unwrap_err(),
            &["value", &MAX_VALUE_LEN.to_string()],
        );
        // A batch with one oversized entry is refused whole.
        let mut batch = WriteBatch::new();
        batch.put(b"batch-ok", b"fine");
        batch.put(b"batch-huge", &huge);
        expect_invalid(db.write(&w, batch).unwrap_err(), &["value"]);
    }
    for k in [&b"huge"[..], b"batch-ok", b"batch-huge"] {
        assert_eq!(
            db.get(&ReadOptions::default(), k).unwrap(),
            None,
            "refused write of {k:?} is visible"
        );
    }
    // The limits themselves are accepted, and the database goes on working.
    let max_key = vec![b'm'; MAX_KEY_LEN];
    db.put(&w, &max_key, b"longest key").unwrap();
    model.insert(max_key, b"longest key".to_vec());
    // (Under the batch limit of tiny()'s 64 KiB memtables: see the test below.)
    let big = vec![7u8; 100 << 10];
    db.put(&w, b"big", &big).unwrap();
    model.insert(b"big".to_vec(), big);
    db.flush().unwrap();
    drop(db);
    fx.assert_intact(&model, "oversized writes");
}

// ---------------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------------

/// Each invalid option is refused by the builder, and by `Db::open` when set on the struct,
/// with InvalidArgument naming it; the database those options point at is untouched.
#[test]
fn invalid_options_are_refused_naming_the_option() {
    let fx = Fixture::new();
    let model = fx.populate();
    let good = || fx.opts();
    let cases: Vec<(&str, Edit)> = vec![
        ("num_levels", Box::new(|o| o.compaction.num_levels = 0)),
        ("num_levels", Box::new(|o| o.compaction.num_levels = 13)),
        (
            "levels_on_fast",
            Box::new(|o| o.placement.levels_on_fast = o.compaction.num_levels + 1),
        ),
        ("tiers", Box::new(|o| o.tiers.clear())),
        ("used twice", Box::new(|o| o.tiers[1].name = "fast".into())),
        (
            "tiers[1].name",
            Box::new(|o| o.tiers[1].name = "no spaces".into()),
        ),
        (
            "given for two tiers",
            Box::new(|o| o.tiers[1].path = o.tiers[0].path.clone()),
        ),
        (
            "write_buffer_size",
            Box::new(|o| o.memtable.write_buffer_size = 1),
        ),
        (
            "max_immutable_memtables",
            Box::new(|o| o.memtable.max_immutable_memtables = 0),
        ),
        (
            "l0_slowdown_trigger",
            Box::new(|o| o.compaction.l0_slowdown_trigger = 1),
        ),
        (
            "target_file_size",
            Box::new(|o| o.compaction.target_file_size = 1),
        ),
        ("block_size", Box::new(|o| o.table.block_size = 0)),
        (
            "background_threads",
            Box::new(|o| o.compaction.background_threads = 0),
        ),
        (
            "tiers[0].capacity",
            Box::new(|o| {
                o.tiers[0].capacity = 1 << 20;
                o.wal.fast_tier_reserve = Some(1 << 20);
            }),
        ),
    ];
    for (needle, edit) in &cases {
        let mut opts = good();
        edit(&mut opts);
        expect_invalid(opts.validate().unwrap_err(), &[needle]);
        let before = (snapshot(&fx.fast()), snapshot(&fx.capacity()));
        expect_invalid(Db::open(opts).expect_err(needle), &[needle]);
        assert!(
            (snapshot(&fx.fast()), snapshot(&fx.capacity())) == before,
            "open with a bad {needle} changed files"
        );
    }
    // The builder refuses the same.
    let err = builder(&fx.fast(), &fx.capacity())
        .num_levels(0)
        .build()
        .unwrap_err();
    expect_invalid(err, &["num_levels"]);
    let err = builder(&fx.fast(), &fx.capacity())
        .levels_on_fast(8)
        .build()
        .unwrap_err();
    expect_invalid(err, &["levels_on_fast"]);
    expect_invalid(Options::builder().build().unwrap_err(), &["tiers"]);
    let dup = Options::builder()
        .tier(TierConfig::new("fast", fx.fast()))
        .tier(TierConfig::new("fast", fx.capacity()))
        .build()
        .unwrap_err();
    expect_invalid(dup, &["fast", "twice"]);
    fx.assert_intact(&model, "invalid options");
}

/// Fewer levels than the database uses: refused naming `num_levels`, nothing lost.
#[test]
fn shrinking_num_levels_below_the_data_is_refused() {
    let fx = Fixture::new();
    let mut model = fx.populate();
    let deepest = {
        // Enough data for a level below L1.
        let db = Db::open(fx.opts()).unwrap();
        for i in 0..20_000 {
            let k = format!("more{i:06}").into_bytes();
            db.put(&WriteOptions::default(), &k, &[b'x'; 100]).unwrap();
            model.insert(k, vec![b'x'; 100]);
        }
        db.compact_range(None, None).unwrap();
        let deepest = db.live_files().iter().map(|f| f.level).max().unwrap();
        deepest
    };
    assert!(deepest >= 2, "no table below L1");
    let mut opts = fx.opts();
    opts.compaction.num_levels = deepest;
    opts.placement.levels_on_fast = 1;
    expect_invalid(Db::open(opts).expect_err("fewer levels"), &["num_levels"]);
    fx.assert_intact(&model, "an open with too few levels");
}

/// Options that may change between opens (placement, compression, block and memtable sizes):
/// the data written under each is all there under the others.
#[test]
fn changing_tunable_options_between_opens_keeps_the_data() {
    let fx = Fixture::new();
    let mut model = fx.populate();
    let variants: Vec<Edit> = vec![
        Box::new(|o| o.placement.levels_on_fast = 0),
        Box::new(|o| o.placement.levels_on_fast = 3),
        Box::new(|o| o.table.compression = tierkv::Compression::Zstd),
        Box::new(|o| o.table.compression = tierkv::Compression::None),
        Box::new(|o| {
            o.table.block_size = 512;
            o.table.bloom_bits_per_key = 0;
            o.memtable.write_buffer_size = 128 << 10;
        }),
        Box::new(|o| o.tiers[0].capacity = 2 << 20),
    ];
    for (round, edit) in variants.iter().enumerate() {
        let mut opts = fx.opts();
        edit(&mut opts);
        let db = Db::open(opts).unwrap_or_else(|e| panic!("variant {round}: {e}"));
        for i in 0..300 {
            let (k, v) = (
                format!("round{round}-{i:03}"),
                vec![b'a' + round as u8; 300],
            );
            db.put(&WriteOptions::default(), k.as_bytes(), &v).unwrap();
            model.insert(k.into_bytes(), v);
        }
        db.compact_range(None, None).unwrap();
        drop(db);
        fx.assert_intact(&model, &format!("variant {round}"));
    }
}

const TIERS_TOML: &str = "[[tier]]\nname = \"fast\"\npath = \"/mnt/fast\"\n\
                          [[tier]]\nname = \"capacity\"\npath = \"/mnt/cap\"\n";

#[test]
fn invalid_toml_is_refused_naming_the_key() {
    let cases = [
        ("levels_on_fats = 1\n", "levels_on_fats"),
        ("write_buffer_size = \"12 parsecs\"\n", "12 parsecs"),
        ("write_buffer_size = \"-5MiB\"\n", "write_buffer_size"),
        ("block_cache_bytes = true\n", "block_cache_bytes"),
        ("num_levels = 0\n", "num_levels"),
        ("levels_on_fast = -1\n", "levels_on_fast"),
        ("background_threads = \"two\"\n", "background_threads"),
        ("compression = \"snappy\"\n", "compression"),
        ("wal_recovery_mode = \"yolo\"\n", "recovery_mode"),
    ];
    for (line, needle) in cases {
        let text = format!("{line}{TIERS_TOML}");
        let err = Options::from_toml_str(&text).expect_err(line);
        expect_invalid(err, &[needle]);
    }
    let unknown_tier_key = "[[tier]]\nname = \"fast\"\npath = \"/a\"\nspeed = \"fast\"\n";
    expect_invalid(
        Options::from_toml_str(unknown_tier_key).unwrap_err(),
        &["speed"],
    );
    let bad_capacity = "[[tier]]\nname = \"fast\"\npath = \"/a\"\ncapacity = \"lots\"\n";
    expect_invalid(Options::from_toml_str(bad_capacity).unwrap_err(), &["lots"]);
    expect_invalid(Options::from_toml_str("").unwrap_err(), &["tiers"]);

    // From a file: the error names the file too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tierkv.toml");
    std::fs::write(&path, format!("levels_on_fats = 1\n{TIERS_TOML}")).unwrap();
    let err = Options::from_toml_file(&path).unwrap_err();
    expect_invalid(err, &["levels_on_fats", &*path.to_string_lossy()]);
    let good = Options::from_toml_str(TIERS_TOML).unwrap();
    assert_eq!(good.tiers.len(), 2);
}

/// A database accepts the same batches whatever its WAL mode: the limit is one parallel-WAL
/// page group (here 512 KiB, twice the memtable), a batch just over it is refused naming the
/// option to raise in group mode too, and one at the limit is stored in either mode (the zoned
/// WAL splits it over several zone appends).
#[test]
fn the_batch_limit_is_the_same_in_every_wal_mode() {
    common::each_mode("batch limit", |mode| {
        let dir = tempfile::tempdir().unwrap();
        let opts = common::small(mode, 256 << 10)
            .tiers_in(dir.path())
            .build()
            .unwrap();
        let limit = opts.max_batch_bytes();
        assert!(limit < 512 << 10 && limit > 500 << 10, "{mode:?}: {limit}");
        let db = Db::open(opts).unwrap();
        let w = WriteOptions::default();

        // One put whose encoding is `bytes` long (the value's length varint takes 3 bytes).
        let value_for = |bytes: usize| {
            let mut empty = WriteBatch::new();
            empty.put(b"k", []);
            vec![5u8; bytes - (empty.encoded_len() + 2)]
        };
        let batch_of = |bytes: usize| {
            let mut b = WriteBatch::new();
            b.put(b"k", value_for(bytes));
            assert_eq!(b.encoded_len(), bytes);
            b
        };
        let err = db.write(&w, batch_of(limit + 1)).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("wal.group_bytes"), "{err}");
        assert_eq!(db.get(&ReadOptions::default(), b"k").unwrap(), None);

        db.write(&w, batch_of(limit)).unwrap();
        let got = db.get(&ReadOptions::default(), b"k").unwrap().unwrap();
        assert_eq!(got, value_for(limit), "{mode:?}");
    });
}
