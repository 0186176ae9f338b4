//! End-to-end tests of the `tierkv` binary: each runs it as a shell user would, in a fresh
//! temporary working directory (so the default tiers `./tierkv-data/...` land there), and
//! checks stdout, stderr and the exit code.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A temporary working directory to run `tierkv` in.
struct Sandbox {
    dir: tempfile::TempDir,
}

impl Sandbox {
    fn new() -> Self {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_tierkv"));
        cmd.args(args).current_dir(self.path());
        cmd
    }

    fn run(&self, args: &[&str]) -> Output {
        self.run_with_stdin(args, b"")
    }

    fn run_with_stdin(&self, args: &[&str], input: &[u8]) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child.stdin.take().unwrap().write_all(input).unwrap();
        child.wait_with_output().unwrap()
    }

    /// Runs a command that must succeed; returns its stdout.
    fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args);
        assert_eq!(code(&out), 0, "tierkv {args:?}: {}", stderr(&out));
        stdout(&out)
    }

    /// Loads `lines` through `tierkv load`.
    fn load(&self, lines: &str) {
        let out = self.run_with_stdin(&["load", "--batch", "100"], lines.as_bytes());
        assert_eq!(code(&out), 0, "load: {}", stderr(&out));
    }

    /// Every file with extension `ext` under the default tiers.
    fn files(&self, ext: &str) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for tier in ["fast", "capacity"] {
            let dir = self.path().join("tierkv-data").join(tier);
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.extension().is_some_and(|x| x == ext) {
                    found.push(p);
                }
            }
        }
        found.sort();
        found
    }

    /// Name and size of every file in the default tier directories, as `tier/name`.
    fn tier_files(&self) -> BTreeMap<String, u64> {
        let mut files = BTreeMap::new();
        for tier in ["fast", "capacity"] {
            let dir = self.path().join("tierkv-data").join(tier);
            for e in std::fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let name = format!("{tier}/{}", e.file_name().to_string_lossy());
                files.insert(name, e.metadata().unwrap().len());
            }
        }
        files
    }
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exited normally")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn numbered_lines(n: usize) -> String {
    (0..n).map(|i| format!("key{i:05}\tvalue-{i}\n")).collect()
}

fn flip_byte(path: &Path, offset: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset] ^= 0xff;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn put_get_delete_and_missing_key() {
    let s = Sandbox::new();
    s.ok(&["put", "apple", "red"]);
    s.ok(&["put", "--sync", "pear", "green"]);
    assert_eq!(s.ok(&["get", "apple"]), "red\n");
    s.ok(&["delete", "apple"]);
    let out = s.run(&["get", "apple"]);
    assert_eq!(code(&out), 1);
    assert_eq!(stdout(&out), "");
    assert!(
        stderr(&out).starts_with("tierkv: not found"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s.ok(&["get", "pear"]), "green\n");
}

#[test]
fn read_commands_leave_the_tier_directories_unchanged() {
    let s = Sandbox::new();
    s.load(&numbered_lines(100));
    s.ok(&["put", "apple", "red"]);
    s.ok(&["put", "--sync", "pear", "green"]);
    let before = s.tier_files();
    assert!(
        before.keys().any(|n| n.ends_with(".sst")) && before.keys().any(|n| n.ends_with(".log")),
        "tables and a WAL with records to replay: {before:?}"
    );
    assert_eq!(s.ok(&["get", "apple"]), "red\n");
    assert_eq!(code(&s.run(&["get", "plum"])), 1);
    assert_eq!(s.ok(&["scan"]).lines().count(), 102);
    assert!(s.ok(&["stats", "--files"]).contains("live files:"));
    assert!(s.ok(&["check"]).contains("102 keys"));
    assert_eq!(
        s.tier_files(),
        before,
        "a read command changed the database"
    );
    s.ok(&["put", "plum", "purple"]);
    assert_ne!(s.tier_files(), before, "a write command does change it");
    assert_eq!(s.ok(&["get", "plum"]), "purple\n");
}

#[test]
fn scan_with_bounds_limit_reverse_and_hex() {
    let s = Sandbox::new();
    s.load("a\t1\nb\t2\nc\t3\nd\t4\ne\t5\n");
    assert_eq!(s.ok(&["scan", "--from", "b", "--to", "d"]), "b\t2\nc\t3\n");
    assert_eq!(s.ok(&["scan", "--limit", "2"]), "a\t1\nb\t2\n");
    assert_eq!(
        s.ok(&["scan", "--reverse", "--to", "e", "--limit", "2"]),
        "d\t4\nc\t3\n"
    );
    assert_eq!(s.ok(&["scan", "--hex", "--from", "65"]), "65\t35\n");
    assert_eq!(s.ok(&["--hex", "get", "63"]), "33\n");
}

#[test]
fn binary_bytes_are_escaped_and_round_trip_through_load() {
    let s = Sandbox::new();
    s.ok(&["put", r"k\x00\xff", "tab\x09and\\back"]);
    let dump = s.ok(&["scan"]);
    assert_eq!(dump, "k\\x00\\xff\ttab\\x09and\\\\back\n");
    let copy = Sandbox::new();
    copy.load(&dump);
    assert_eq!(copy.ok(&["scan"]), dump);
    assert_eq!(
        copy.ok(&["scan", "--hex"]),
        "6b00ff\t74616209616e645c6261636b\n"
    );
}

#[test]
fn load_from_stdin_then_scan_counts_every_record() {
    let s = Sandbox::new();
    let out = s.run_with_stdin(&["load", "--batch", "64"], numbered_lines(1000).as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("loaded 1000 records") && stderr(&out).contains("MB/s"),
        "{}",
        stderr(&out)
    );
    assert_eq!(s.ok(&["scan"]).lines().count(), 1000);
    let bad = s.run_with_stdin(&["load"], b"good\tline\nno tab here\n");
    assert_eq!(code(&bad), 4);
    assert!(stderr(&bad).contains("line 2"), "{}", stderr(&bad));
    assert_eq!(
        s.ok(&["get", "good"]),
        "line\n",
        "lines before a bad one are kept"
    );
}

#[test]
fn stats_and_compact_report_tiers_and_levels() {
    let s = Sandbox::new();
    s.load(&numbered_lines(500));
    // A read-write open (this empty load) writes the replayed WAL to L0; `stats` is read-only.
    s.load("");
    let stats = s.ok(&["stats", "--files"]);
    for want in ["tiers:", "fast", "capacity", "levels:", "L0", "live files:"] {
        assert!(stats.contains(want), "missing {want:?} in\n{stats}");
    }
    let compact = s.ok(&["compact"]);
    assert!(compact.starts_with("compacted in"), "{compact}");
    assert!(compact.contains("write amplification"), "{compact}");
    assert_eq!(s.ok(&["scan"]).lines().count(), 500);
}

#[test]
fn check_verifies_value_log_pointers_and_names_a_damaged_record() {
    let s = Sandbox::new();
    let config = s.path().join("split.toml");
    let tiers = "[[tier]]\nname = \"fast\"\npath = \"tierkv-data/fast\"\n\
                 [[tier]]\nname = \"capacity\"\npath = \"tierkv-data/capacity\"\n";
    std::fs::write(
        &config,
        format!("values = \"split\"\nsplit_threshold = 8\n{tiers}"),
    )
    .unwrap();
    let cfg = config.to_str().unwrap();
    let out = s.run_with_stdin(&["--config", cfg, "load"], numbered_lines(50).as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // `value-0` to `value-9` are below the threshold of 8 bytes.
    let healthy = s.ok(&["--config", cfg, "check"]);
    assert!(
        healthy.contains("40 value-log pointers verified"),
        "{healthy}"
    );
    let logs = s.files("vlog");
    assert_eq!(logs.len(), 1, "{logs:?}");
    flip_byte(&logs[0], 20);
    let out = s.run(&["--config", cfg, "check"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("000001.vlog") && err.contains("offset 0"),
        "{err}"
    );
}

#[test]
fn check_passes_on_a_healthy_db_and_names_a_damaged_table() {
    let s = Sandbox::new();
    s.load(&numbered_lines(300));
    s.load("");
    let healthy = s.ok(&["check"]);
    assert!(
        healthy.starts_with("ok:") && healthy.contains("300 keys"),
        "{healthy}"
    );
    let tables = s.files("sst");
    assert!(
        !tables.is_empty(),
        "a read-write reopen flushes the WAL into a table"
    );
    flip_byte(&tables[0], 10);
    let damaged = s.tier_files();
    let out = s.run(&["check"]);
    assert_eq!(code(&out), 3, "{}", stderr(&out));
    assert_eq!(s.tier_files(), damaged, "check changed a damaged database");
    let name = tables[0].file_name().unwrap().to_str().unwrap();
    let err = stderr(&out);
    assert!(err.starts_with("tierkv: ") && err.contains(name), "{err}");
}

#[test]
fn check_reports_a_damaged_synced_wal_record() {
    let s = Sandbox::new();
    s.ok(&["put", "seed", "x"]);
    // Two synced writes: the second record says the first was durable, so damage to the
    // first is corruption rather than a torn tail.
    let out = s.run_with_stdin(&["load", "--sync"], b"k1\tv1\nk2\tv2\n");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let wal = s.files("log").pop().unwrap();
    flip_byte(&wal, 25);
    let dump = s.run(&["dump-wal"]);
    assert_eq!(code(&dump), 3, "{}", stderr(&dump));
    assert!(stdout(&dump).contains("CORRUPTION"), "{}", stdout(&dump));
    let check = s.run(&["check"]);
    assert_eq!(code(&check), 3, "{}", stderr(&check));
    let name = wal.file_name().unwrap().to_str().unwrap();
    assert!(stderr(&check).contains(name), "{}", stderr(&check));
}

#[test]
fn dump_manifest_lists_edits_and_live_files() {
    let s = Sandbox::new();
    s.load(&numbered_lines(50));
    s.ok(&["compact"]);
    let out = s.ok(&["dump-manifest"]);
    for want in [
        "CURRENT -> MANIFEST-",
        "tiers: fast, capacity",
        "edit 0:",
        "+ L",
        "live files after",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    assert!(out.contains("key00000 @"), "{out}");
}

#[test]
fn dump_wal_shows_records_and_a_torn_tail() {
    let s = Sandbox::new();
    s.ok(&["put", "alpha", "one"]);
    let out = s.ok(&["dump-wal"]);
    assert!(out.contains("seq 1, 1 ops"), "{out}");
    assert!(out.contains("PUT alpha => one"), "{out}");
    assert!(out.contains("end: clean, 1 records"), "{out}");
    // A half-written record at the end is what a crash leaves: reported, not an error.
    let wal = s.files("log").pop().unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(&wal).unwrap();
    f.write_all(&[7; 11]).unwrap();
    let out = s.ok(&["dump-wal", wal.to_str().unwrap()]);
    assert!(out.contains("torn tail"), "{out}");
}

#[test]
fn dump_sst_prints_properties_index_and_entries() {
    let s = Sandbox::new();
    s.load(&numbered_lines(200));
    s.ok(&["compact"]);
    let table = s.files("sst").pop().unwrap();
    let out = s.ok(&[
        "dump-sst",
        table.to_str().unwrap(),
        "--limit",
        "3",
        "--verify",
    ]);
    for want in [
        "properties:",
        "entries          200 (0 deletions)",
        "index: ",
        "block 0: offset 0",
        "key00000 @",
        "=> value-0",
        "... and 197 more",
        "verified:",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
}

#[test]
fn demo_small_run_prints_throughput_and_stats() {
    let s = Sandbox::new();
    let args = ["demo", "--records", "2000", "--reads", "500", "--seed", "7"];
    let out = s.ok(&args);
    for want in [
        "load ",
        "2000 writes",
        "ops/s",
        "MB/s",
        "500 gets",
        "every key found",
        "write amplification",
        "levels:",
    ] {
        assert!(out.contains(want), "missing {want:?} in\n{out}");
    }
    // The default ./tierkv-data tiers belong to the demo: a second run starts over.
    let again = s.ok(&args);
    assert!(
        again.contains("removing the previous demo database"),
        "{again}"
    );
    assert!(again.contains("every key found"), "{again}");
}

#[test]
fn demo_on_explicit_tiers_replaces_only_with_replace_and_only_tierkv_dirs() {
    let s = Sandbox::new();
    let fast = format!("fast={}", s.path().join("f").display());
    let cap = format!("capacity={}", s.path().join("c").display());
    let args = [
        "--tier",
        &fast,
        "--tier",
        &cap,
        "demo",
        "--records",
        "500",
        "--reads",
        "50",
    ];
    s.ok(&args);
    let again = s.run(&args);
    assert_eq!(code(&again), 4);
    assert!(stderr(&again).contains("--replace"), "{}", stderr(&again));
    let mut replace = args.to_vec();
    replace.push("--replace");
    s.ok(&replace);
    // A directory that is not a tierkv tier is never removed.
    let foreign = s.path().join("mine");
    std::fs::create_dir_all(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), "keep me").unwrap();
    let fast = format!("fast={}", foreign.display());
    let out = s.run(&[
        "--tier",
        &fast,
        "--tier",
        &cap,
        "demo",
        "--replace",
        "--records",
        "10",
    ]);
    assert_eq!(code(&out), 4, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a tierkv tier"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read_to_string(foreign.join("notes.txt")).unwrap(),
        "keep me"
    );
}

#[test]
fn explicit_tiers_and_config_file() {
    let s = Sandbox::new();
    let fast = s.path().join("f");
    let cap = s.path().join("c");
    let tier_args = [
        format!("--tier=hot={}:1GiB", fast.display()),
        format!("--tier=cold={}", cap.display()),
    ];
    let with = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        v.extend(tier_args.iter().cloned());
        v
    };
    let run = |args: Vec<String>| s.ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
    run(with(&[
        "put",
        "k",
        "v",
        "--levels-on-fast",
        "1",
        "--compression",
        "zstd",
    ]));
    assert!(fast.join("CURRENT").exists());
    assert!(run(with(&["stats"])).contains("hot"));
    let config = s.path().join("db.toml");
    let toml = format!(
        "levels_on_fast = 1\n[[tier]]\nname = \"hot\"\npath = {:?}\n[[tier]]\nname = \"cold\"\npath = {:?}\n",
        fast.display().to_string(),
        cap.display().to_string()
    );
    std::fs::write(&config, toml).unwrap();
    let out = s.ok(&["--config", config.to_str().unwrap(), "get", "k"]);
    assert_eq!(out, "v\n");
}

#[test]
fn usage_errors_exit_2_and_other_errors_exit_4() {
    let s = Sandbox::new();
    assert_eq!(code(&s.run(&["frobnicate"])), 2);
    assert_eq!(code(&s.run(&["--tier", "nodir", "get", "k"])), 2);
    assert_eq!(
        code(&s.run(&["--levels-on-fast", "99", "put", "k", "v"])),
        2
    );
    assert_eq!(code(&s.run(&["--hex", "put", "xyz", "00"])), 2);
    assert!(
        !s.path().join("tierkv-data").exists(),
        "bad arguments fail before anything is created"
    );
    let missing = s.run(&["get", "k"]);
    assert_eq!(code(&missing), 4);
    assert!(
        stderr(&missing).contains("no tierkv database"),
        "{}",
        stderr(&missing)
    );
    let help = s.ok(&["--help"]);
    assert!(
        help.contains("Exit codes") && help.contains("3  corruption"),
        "{help}"
    );
}

/// Spawns `tierkv load` and keeps its stdin open, so it holds the database open.
fn hold_open(s: &Sandbox) -> Child {
    s.command(&["load"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn a_locked_database_says_so() {
    let s = Sandbox::new();
    s.ok(&["put", "k", "v"]);
    // NB: every open writes a new MANIFEST and points CURRENT at it, under the lock; a change
    // of CURRENT shows the holder is in. Polling with `get` instead could take the lock first.
    let current = s.path().join("tierkv-data/fast/CURRENT");
    let before = std::fs::read(&current).unwrap();
    let mut holder = hold_open(&s);
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read(&current).unwrap() == before {
        assert!(
            Instant::now() < deadline,
            "the holder never opened the database"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    let locked = s.run(&["get", "k"]);
    assert_eq!(code(&locked), 4);
    assert!(stderr(&locked).contains("locked"), "{}", stderr(&locked));
    let mut stdin = holder.stdin.take().unwrap();
    stdin.write_all(b"k2\tv2\n").unwrap();
    drop(stdin);
    assert!(holder.wait().unwrap().success());
    assert_eq!(s.ok(&["get", "k2"]), "v2\n");
}

/// A database whose capacity tier keeps its tables in 32 zones of 64 KiB, loaded and compacted
/// so that every table lives in zones. Returns the config file's path.
fn zoned_database(s: &Sandbox) -> String {
    let config = s.path().join("zoned.toml");
    std::fs::write(
        &config,
        "levels_on_fast = 1\n\
         [[tier]]\nname = \"fast\"\npath = \"tierkv-data/fast\"\n\
         [[tier]]\nname = \"capacity\"\npath = \"tierkv-data/capacity\"\n\
         tables = \"zones\"\nzone_size = \"64KiB\"\nzones = 32\n",
    )
    .unwrap();
    let cfg = config.to_str().unwrap().to_string();
    let out = s.run_with_stdin(&["--config", &cfg, "load"], numbered_lines(3000).as_bytes());
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    s.ok(&["--config", &cfg, "compact"]);
    cfg
}

#[test]
fn check_and_dumps_read_a_zoned_tier() {
    let s = Sandbox::new();
    let cfg = zoned_database(&s);
    let capacity = s.path().join("tierkv-data").join("capacity");
    let names: Vec<String> = std::fs::read_dir(&capacity)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"ZONED-DEVICE".to_string()), "{names:?}");
    assert!(
        names.iter().all(|n| !n.ends_with(".sst")),
        "tables live in the device, not as files: {names:?}"
    );

    let device = capacity.join("ZONED-DEVICE");
    let before = std::fs::read(&device).unwrap();
    let checked = s.ok(&["--config", &cfg, "check"]);
    assert_eq!(
        std::fs::read(&device).unwrap(),
        before,
        "check wrote to the device"
    );
    assert!(checked.contains("3000 keys"), "{checked}");
    assert!(
        checked.contains("ok: zoned tier capacity:") && checked.contains("owned by a live file"),
        "{checked}"
    );
    // Plain --tier flags find the zoned device themselves.
    let tiers = [
        "--tier=fast=tierkv-data/fast",
        "--tier=capacity=tierkv-data/capacity",
    ];
    let by_flags = s.ok(&[tiers[0], tiers[1], "--levels-on-fast", "1", "check"]);
    assert!(by_flags.contains("ok: zoned tier capacity:"), "{by_flags}");

    let dump = s.ok(&["dump-zones", capacity.to_str().unwrap()]);
    assert_eq!(
        std::fs::read(&device).unwrap(),
        before,
        "dump-zones wrote to the device"
    );
    for want in [
        "geometry: 32 zones of 65536 bytes",
        "journal: zone ",
        "  zone    0  metadata",
        "zone roles: 2 metadata, ",
        "files: ",
        ".sst  ",
        "ok: ",
    ] {
        assert!(dump.contains(want), "missing {want:?} in\n{dump}");
    }
    let table = dump
        .lines()
        .find_map(|l| {
            l.trim_start()
                .split_once(".sst  ")
                .map(|(n, _)| format!("{n}.sst"))
        })
        .unwrap();
    assert!(
        dump.lines()
            .any(|l| l.contains(" full ") && l.contains(&table))
            || dump
                .lines()
                .any(|l| l.contains(" active ") && l.contains(&table)),
        "no zone lists {table}:\n{dump}"
    );
    let sst = s.ok(&[
        "dump-sst",
        capacity.join(&table).to_str().unwrap(),
        "--verify",
    ]);
    assert!(
        sst.contains("properties:") && sst.contains("verified:"),
        "{sst}"
    );
}

#[test]
fn a_zoned_tier_without_a_valid_journal_is_corruption() {
    let s = Sandbox::new();
    let cfg = zoned_database(&s);
    let capacity = s.path().join("tierkv-data").join("capacity");
    let device = capacity.join("ZONED-DEVICE");
    // Zones start after the superblock and the zone table (one LBA each here); zones 0 and 1
    // hold the journal, each generation starting with a commit's magic.
    let (lba, zone) = (4096usize, 64usize << 10);
    let mut bytes = std::fs::read(&device).unwrap();
    for start in [2 * lba, 2 * lba + zone] {
        bytes[start] ^= 0xff;
    }
    std::fs::write(&device, bytes).unwrap();
    let dump = s.run(&["dump-zones", capacity.to_str().unwrap()]);
    assert_eq!(code(&dump), 3, "{}", stderr(&dump));
    let err = stderr(&dump);
    assert!(
        err.contains("ZONED-DEVICE") && err.contains("no valid metadata journal"),
        "{err}"
    );
    let check = s.run(&["--config", &cfg, "check"]);
    assert_eq!(code(&check), 3, "{}", stderr(&check));
    assert!(
        stderr(&check).contains("ZONED-DEVICE"),
        "{}",
        stderr(&check)
    );
    let plain = s.run(&[
        "dump-zones",
        s.path().join("tierkv-data/fast").to_str().unwrap(),
    ]);
    assert_eq!(code(&plain), 4, "{}", stderr(&plain));
    assert!(
        stderr(&plain).contains("holds no zoned device"),
        "{}",
        stderr(&plain)
    );
}
