//! Process-kill test (`kill -9`), in the spirit of RocksDB's `db_crashtest.py`.
//!
//! The test re-executes its own binary as a child (`child_writer`, ignored unless the parent's
//! environment variables are set). The child opens a two-tier database on real directories and
//! performs a seeded, reproducible sequence of writes (single puts, deletes and batches) with
//! `WriteOptions::sync()`, printing `ACK <n>` after each write call returns. Tiny memtables keep
//! flushes and compactions running. The parent kills the child with SIGKILL at a random moment,
//! regenerates the same write sequence, and checks the database against it:
//! - every acknowledged write is there (durability);
//! - the write in flight at the kill is either entirely there or entirely absent (atomicity);
//! - nothing else is there: the state is exactly a prefix of the sequence.
//!
//! Rounds reuse one database, so recovery runs again and again; in some rounds the child is
//! killed right after it starts opening the database, i.e. during its recovery of the previous
//! round's crash, and only the round after that is checked.
//!
//! The whole test runs once per WAL variant (group commit; the parallel WAL through io_uring
//! where this machine has it; the parallel WAL through `pwritev2`), and the child reports the
//! I/O path its WAL took, which the parent checks, so a variant cannot silently test another.
//!
//! `TIERKV_KILL_SEED` replays a particular sequence of writes.

mod common;

use common::{tiny, TierSetup};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tierkv::{Db, Options, ReadOptions, ValueSeparation, WalMode, WriteBatch, WriteOptions};

const ENV_DIR: &str = "TIERKV_KILL_CHILD_DIR";
const ENV_SEED: &str = "TIERKV_KILL_CHILD_SEED";
const ENV_ROUND: &str = "TIERKV_KILL_CHILD_ROUND";
const ENV_VARIANT: &str = "TIERKV_KILL_CHILD_VARIANT";
const DEFAULT_SEED: u64 = 0x6b11_1000_0000_0001;
const KEYS: u32 = 200;
const MAX_VALUE_LEN: usize = 1500;
/// Rounds whose child is killed while it opens (recovers) the database.
const ROUNDS: [RoundKind; 8] = [
    RoundKind::Normal,
    RoundKind::Normal,
    RoundKind::KillDuringOpen,
    RoundKind::Normal,
    RoundKind::Normal,
    RoundKind::KillDuringOpen,
    RoundKind::Normal,
    RoundKind::Normal,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RoundKind {
    /// Kill 50..500 ms after the database is open.
    Normal,
    /// Kill 0..1.5 ms after the child starts opening the database (an open takes a few ms).
    KillDuringOpen,
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A WAL configuration the test runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Variant {
    name: &'static str,
    mode: WalMode,
    io_uring: bool,
    /// The hot store on (`hot_tier = "slab"`), with a budget small enough that demotions run
    /// between kills.
    hot: bool,
    /// The hot store's partitions (`hot_partitions`), when it is on.
    hot_partitions: usize,
    /// Split values (`values = "split"`) and when they are separated: values of 512 bytes or
    /// more go to the value log, on write (so a kill also lands between a value-log append and
    /// its WAL record) or at flush (between a flush's appends and the edit naming its tables).
    split: Option<ValueSeparation>,
}

const VARIANTS: [Variant; 9] = [
    Variant {
        name: "group",
        mode: WalMode::Group,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "parallel-uring",
        mode: WalMode::Parallel,
        io_uring: true,
        hot: false,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "parallel-pwrite",
        mode: WalMode::Parallel,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "hot-tier",
        mode: WalMode::Group,
        io_uring: false,
        hot: true,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "hot-tier-partitioned",
        mode: WalMode::Group,
        io_uring: false,
        hot: true,
        hot_partitions: 3,
        split: None,
    },
    Variant {
        name: "append",
        mode: WalMode::Append,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "zoned",
        mode: WalMode::Zoned,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: None,
    },
    Variant {
        name: "split-values",
        mode: WalMode::Group,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: Some(ValueSeparation::OnWrite),
    },
    Variant {
        name: "split-values-on-flush",
        mode: WalMode::Group,
        io_uring: false,
        hot: false,
        hot_partitions: 1,
        split: Some(ValueSeparation::OnFlush),
    },
];

impl Variant {
    fn named(name: &str) -> Variant {
        *VARIANTS
            .iter()
            .find(|v| v.name == name)
            .unwrap_or_else(|| panic!("no kill-test variant {name:?}"))
    }
}

fn options(dir: &Path, variant: Variant) -> Options {
    let b = tiny()
        .tiers_in(dir)
        .level_size_multiplier(4)
        .wal_zone_size(1 << 20)
        .wal_zones(16)
        .wal(variant.mode)
        .wal_io_uring(variant.io_uring);
    let b = if variant.hot {
        b.hot_tier(tierkv::HotTier::Slab)
            .hot_budget(128 << 10)
            .hot_partitions(variant.hot_partitions)
    } else {
        b
    };
    let b = match variant.split {
        Some(separation) => b
            .values(tierkv::ValuesMode::Split)
            .split_threshold(512)
            .vlog_separation(separation),
        None => b,
    };
    b.build().expect("valid options")
}

/// The WAL I/O path (`Stats::wal_io_path`) `variant` takes on this machine, in `dir`'s file
/// system: found by opening a database there, as the child does.
fn expected_io_path(dir: &Path, variant: Variant) -> String {
    let probe = dir.join(format!("probe-{}", variant.name));
    let db = Db::open(options(&probe, variant)).expect("probe open");
    db.put(&WriteOptions::sync(), b"probe", b"probe")
        .expect("probe write");
    let path = db.stats().wal_io_path;
    drop(db);
    let _ = std::fs::remove_dir_all(&probe);
    path
}

// ---------------------------------------------------------------------------------------------
// The write sequence, generated identically by the child and the parent

/// One write of the sequence: puts (`Some`) and deletes (`None`) applied atomically.
struct PlannedWrite {
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// The writes of one round, from a seed: write `i` is the same in the child and the parent.
struct Plan {
    rng: SmallRng,
    round: u32,
    index: u64,
}

impl Plan {
    fn new(seed: u64, round: u32) -> Plan {
        Plan {
            rng: SmallRng::seed_from_u64(seed ^ (u64::from(round) << 32)),
            round,
            index: 0,
        }
    }

    fn next_write(&mut self) -> PlannedWrite {
        let n = match self.rng.gen_range(0..10) {
            0..=6 => 1,
            _ => self.rng.gen_range(2..=6),
        };
        let mut ids: Vec<u32> = (0..n).map(|_| self.rng.gen_range(0..KEYS)).collect();
        ids.sort_unstable();
        ids.dedup();
        let ops = ids
            .into_iter()
            .map(|id| {
                let k = format!("key{id:04}").into_bytes();
                let v = self.rng.gen_bool(0.85).then(|| self.value(id));
                (k, v)
            })
            .collect();
        self.index += 1;
        PlannedWrite { ops }
    }

    /// `r<round>:w<index>:k<key>:` then padding: a value names the write that stored it.
    fn value(&mut self, id: u32) -> Vec<u8> {
        let mut v = format!("r{}:w{}:k{id}:", self.round, self.index).into_bytes();
        let len = self.rng.gen_range(0..=MAX_VALUE_LEN);
        let fill = self.rng.gen_range(b'a'..=b'z');
        v.resize(len.max(v.len()), fill);
        v
    }

    /// The first `n` writes applied to `model`.
    fn apply_prefix(seed: u64, round: u32, n: u64, model: &mut Model) {
        let mut plan = Plan::new(seed, round);
        for _ in 0..n {
            plan.next_write().apply(model);
        }
    }
}

impl PlannedWrite {
    fn apply(&self, model: &mut Model) {
        for (k, v) in &self.ops {
            match v {
                Some(v) => model.insert(k.clone(), v.clone()),
                None => model.remove(k),
            };
        }
    }

    /// Issues the write: single operations through `put`/`delete`, several as one batch.
    fn issue(&self, db: &Db) -> tierkv::Result<()> {
        let sync = WriteOptions::sync();
        match self.ops.as_slice() {
            [(k, Some(v))] => db.put(&sync, k, v),
            [(k, None)] => db.delete(&sync, k),
            ops => {
                let mut batch = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => batch.put(k, v),
                        None => batch.delete(k),
                    }
                }
                db.write(&sync, batch)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The child

/// The child process: writes its round's sequence until it is killed. Does nothing when run
/// without the parent's environment (e.g. by `cargo test -- --ignored`).
#[test]
#[ignore = "child process of acknowledged_writes_survive_sigkill"]
fn child_writer() {
    let Ok(dir) = std::env::var(ENV_DIR) else {
        return;
    };
    let number = |name: &str| -> u64 {
        let text = std::env::var(name).unwrap_or_else(|_| panic!("child: {name} is not set"));
        text.parse().expect("child: a number")
    };
    let (seed, round) = (number(ENV_SEED), number(ENV_ROUND) as u32);
    let variant = Variant::named(&std::env::var(ENV_VARIANT).expect("child: variant"));
    let mut out = std::io::stdout().lock();
    let mut say = |line: String| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .expect("child: stdout");
    };
    // libtest has printed "test child_writer ... " without a newline: start a fresh line.
    say(String::new());
    say("OPENING".into());
    let db = Db::open(options(Path::new(&dir), variant)).expect("child: open");
    say("OPENED".into());
    let mut plan = Plan::new(seed, round);
    // A safety net: the parent kills the child long before this.
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let index = plan.index;
        let write = plan.next_write();
        write
            .issue(&db)
            .unwrap_or_else(|e| panic!("child: write {index}: {e}"));
        // Acknowledged: only now may the parent count on it.
        say(format!("ACK {index}"));
        if index == 0 {
            // Known once a logger has written (the parallel WAL's loggers start with it).
            say(format!("IOPATH {}", db.stats().wal_io_path));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The parent

/// What the parent learnt from one child.
#[derive(Debug, Default)]
struct ChildReport {
    /// The child printed OPENED: its recovery finished.
    opened: bool,
    /// Writes acknowledged: `0..acked`.
    acked: u64,
    /// The WAL's I/O path, as the child's stats said after its open.
    io_path: Option<String>,
}

#[derive(Debug)]
enum Event {
    Opening,
    Opened,
    IoPath(String),
    Ack(u64),
}

fn spawn_child(dir: &Path, variant: Variant, seed: u64, round: u32) -> Child {
    let exe = std::env::current_exe().expect("current_exe");
    Command::new(exe)
        .args(["--exact", "child_writer", "--nocapture", "--ignored"])
        .args(["--test-threads", "1"])
        .env(ENV_DIR, dir)
        .env(ENV_SEED, seed.to_string())
        .env(ENV_ROUND, round.to_string())
        .env(ENV_VARIANT, variant.name)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the child")
}

/// Forwards the child's protocol lines (the test harness prints other lines too) as events.
fn read_events(stdout: impl Read + Send + 'static, tx: mpsc::Sender<Event>) {
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let event = match line.as_str() {
                "OPENING" => Event::Opening,
                "OPENED" => Event::Opened,
                l => match (l.strip_prefix("ACK "), l.strip_prefix("IOPATH ")) {
                    (Some(n), _) => Event::Ack(n.parse().expect("ACK <number>")),
                    (_, Some(path)) => Event::IoPath(path.to_string()),
                    _ => continue,
                },
            };
            if tx.send(event).is_err() {
                break;
            }
        }
    });
}

/// Kills the child if the parent panics before it does, so no writer outlives the test.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// A running child with its output being read.
struct Running {
    child: KillOnDrop,
    events: mpsc::Receiver<Event>,
    /// Collects the child's stderr, for the failure message if it dies on its own.
    stderr: Option<std::thread::JoinHandle<String>>,
    report: ChildReport,
}

impl Running {
    fn start(dir: &Path, variant: Variant, seed: u64, round: u32) -> Running {
        let mut child = spawn_child(dir, variant, seed, round);
        let (tx, events) = mpsc::channel();
        read_events(child.stdout.take().expect("stdout"), tx);
        let mut err = child.stderr.take().expect("stderr");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = err.read_to_string(&mut text);
            text
        });
        Running {
            child: KillOnDrop(child),
            events,
            stderr: Some(stderr),
            report: ChildReport::default(),
        }
    }

    /// Waits until the child prints `marker`, recording the events on the way.
    fn wait_for(&mut self, marker: &Event, round: u32) {
        let give_up = Instant::now() + Duration::from_secs(20);
        loop {
            match self.events.recv_timeout(Duration::from_millis(50)) {
                Ok(event) => {
                    let reached = std::mem::discriminant(&event) == std::mem::discriminant(marker);
                    self.report.record(&event);
                    if reached {
                        return;
                    }
                }
                Err(_) => {
                    if let Some(status) = self.child.0.try_wait().expect("try_wait") {
                        panic!(
                            "round {round}: the child ended ({status}) before {marker:?}:\n{}",
                            self.stderr_text()
                        );
                    }
                    assert!(
                        Instant::now() < give_up,
                        "round {round}: no {marker:?} from the child"
                    );
                }
            }
        }
    }

    /// SIGKILL; then every line the child printed before dying is read.
    fn kill(mut self, round: u32) -> ChildReport {
        self.child.0.kill().expect("SIGKILL the child");
        let status = self.child.0.wait().expect("wait for the child");
        let err = self.stderr_text();
        assert_killed(status, round, &err);
        // The reader thread drains the pipe to its end, so every printed ACK arrives.
        while let Ok(event) = self.events.recv() {
            self.report.record(&event);
        }
        self.report
    }

    fn stderr_text(&mut self) -> String {
        let handle = self.stderr.take().expect("stderr is read once");
        handle.join().unwrap_or_default()
    }
}

impl ChildReport {
    fn record(&mut self, event: &Event) {
        match event {
            Event::Opening => {}
            Event::Opened => self.opened = true,
            Event::IoPath(path) => self.io_path = Some(path.clone()),
            Event::Ack(n) => {
                assert_eq!(*n, self.acked, "the child acknowledged writes out of order");
                self.acked += 1;
            }
        }
    }
}

/// Runs one child and kills it at a random moment; returns what it acknowledged.
fn run_round(
    dir: &Path,
    variant: Variant,
    seed: u64,
    round: u32,
    kind: RoundKind,
    rng: &mut SmallRng,
) -> ChildReport {
    let mut running = Running::start(dir, variant, seed, round);
    // The delay counts from the end of the open, or from its start when the kill is to land
    // in the middle of recovery.
    let (marker, delay) = match kind {
        RoundKind::Normal => (Event::Opened, rng.gen_range(50_000..=500_000)),
        RoundKind::KillDuringOpen => (Event::Opening, rng.gen_range(0..=1_500)),
    };
    running.wait_for(&marker, round);
    let delay = Duration::from_micros(delay);
    std::thread::sleep(delay);
    let report = running.kill(round);
    println!(
        "round {round} ({kind:?}, killed {delay:?} after {marker:?}): opened: {}, \
         {} writes acknowledged",
        report.opened, report.acked
    );
    report
}

#[cfg(unix)]
fn assert_killed(status: std::process::ExitStatus, round: u32, stderr: &str) {
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        status.signal(),
        Some(libc::SIGKILL),
        "round {round}: the child was not killed but ended with {status}:\n{stderr}"
    );
}

#[cfg(not(unix))]
fn assert_killed(_: std::process::ExitStatus, _: u32, _: &str) {}

/// The states the database may be in: each a model and how it came about.
type Candidates = Vec<(Model, String)>;

/// Extends every candidate with the round's acknowledged writes, and with or without the one
/// write that may have been in flight when the child died.
fn extend(candidates: Candidates, seed: u64, round: u32, report: &ChildReport) -> Candidates {
    let mut out = Vec::new();
    for (mut model, how) in candidates {
        Plan::apply_prefix(seed, round, report.acked, &mut model);
        let how = format!("{how}, round {round}: {} acked", report.acked);
        if report.opened {
            // Write `acked` (the next one) may have landed without being acknowledged.
            let mut with_next = model.clone();
            Plan::apply_prefix(seed, round, report.acked + 1, &mut with_next);
            out.push((with_next, format!("{how} + the write in flight")));
        }
        out.push((model, how));
    }
    out
}

fn read_all(db: &Db) -> Model {
    let mut it = db.iter(ReadOptions::default()).expect("iter");
    it.seek_to_first();
    it.entries()
        .collect::<tierkv::Result<Model>>()
        .expect("scan the recovered database")
}

fn describe(v: Option<&Vec<u8>>) -> String {
    match v {
        None => "absent".into(),
        Some(v) => {
            // Values start "r<round>:w<index>:k<key>:": that names the write that stored it.
            let stamp: String = String::from_utf8_lossy(v)
                .split(':')
                .take(2)
                .collect::<Vec<_>>()
                .join(":");
            format!("{stamp} ({} bytes)", v.len())
        }
    }
}

/// Key-by-key differences between `want` and `got` (at most `limit`).
fn differences(want: &Model, got: &Model, limit: usize) -> Vec<String> {
    let mut keys: Vec<&Vec<u8>> = want.keys().chain(got.keys()).collect();
    keys.sort();
    keys.dedup();
    keys.into_iter()
        .filter(|k| want.get(*k) != got.get(*k))
        .take(limit)
        .map(|k| {
            format!(
                "  {}: expected {}, found {}",
                String::from_utf8_lossy(k),
                describe(want.get(k)),
                describe(got.get(k))
            )
        })
        .collect()
}

/// Opens the database (running recovery) and requires it to equal one of the candidates.
fn verify(
    dir: &Path,
    variant: Variant,
    candidates: Candidates,
    seed: u64,
    after_round: u32,
) -> Candidates {
    let db = Db::open(options(dir, variant))
        .unwrap_or_else(|e| panic!("after round {after_round}: recovery failed: {e}"));
    let got = read_all(&db);
    for (k, v) in &got {
        let fetched = db.get(&ReadOptions::default(), k).expect("get");
        assert!(
            fetched.as_ref() == Some(v),
            "after round {after_round}: get and scan disagree on {}",
            String::from_utf8_lossy(k)
        );
    }
    drop(db);
    if let Some((model, how)) = candidates.iter().find(|(m, _)| *m == got) {
        println!(
            "  verified after round {after_round}: {} keys, {how}",
            model.len()
        );
        return vec![(got, format!("verified after round {after_round}"))];
    }
    // No match: explain against the closest allowed state.
    let (closest, how) = candidates
        .iter()
        .min_by_key(|(m, _)| differences(m, &got, usize::MAX).len())
        .expect("at least one candidate");
    panic!(
        "after round {after_round} (TIERKV_KILL_SEED={seed}): the recovered database is not a \
         prefix of the write sequence that contains every acknowledged write.\n\
         Reading the differences: a key found with an older write (or absent) than expected \
         lost an acknowledged write; some keys of one write present and others not is a torn \
         batch; a write not expected at all breaks the prefix order.\n\
         Closest allowed state: {how}; differences (expected vs found, as rROUND:wWRITE):\n{}",
        differences(closest, &got, 20).join("\n")
    );
}

#[test]
fn acknowledged_writes_survive_sigkill_group() {
    survives_sigkill(Variant::named("group"));
}

#[test]
fn acknowledged_writes_survive_sigkill_parallel_uring() {
    survives_sigkill(Variant::named("parallel-uring"));
}

#[test]
fn acknowledged_writes_survive_sigkill_parallel_pwrite() {
    survives_sigkill(Variant::named("parallel-pwrite"));
}

#[test]
fn acknowledged_writes_survive_sigkill_hot_tier() {
    survives_sigkill(Variant::named("hot-tier"));
}

#[test]
fn acknowledged_writes_survive_sigkill_hot_tier_partitioned() {
    survives_sigkill(Variant::named("hot-tier-partitioned"));
}

#[test]
fn acknowledged_writes_survive_sigkill_split_values() {
    survives_sigkill(Variant::named("split-values"));
}

#[test]
fn acknowledged_writes_survive_sigkill_split_values_on_flush() {
    survives_sigkill(Variant::named("split-values-on-flush"));
}

#[test]
fn acknowledged_writes_survive_sigkill_append() {
    survives_sigkill(Variant::named("append"));
}

#[test]
fn acknowledged_writes_survive_sigkill_zoned() {
    survives_sigkill(Variant::named("zoned"));
}

/// Held by each kill test for its whole run: a child forked for one test inherits, until its
/// `exec`, the descriptors the other tests' parents have open, their LOCK files among them, so
/// another test's next child could find its database locked.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The rounds of kills and checks for one WAL variant.
fn survives_sigkill(variant: Variant) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let seed = std::env::var("TIERKV_KILL_SEED")
        .ok()
        .map_or(DEFAULT_SEED, |s| {
            s.parse().expect("TIERKV_KILL_SEED is a number")
        });
    println!("TIERKV_KILL_SEED={seed} ({})", variant.name);
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir: PathBuf = tmp.path().join("db");
    let io_path = expected_io_path(tmp.path(), variant);
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut candidates: Candidates = vec![(Model::new(), "empty".into())];
    let mut killed_during_recovery = 0;
    for (round, &kind) in ROUNDS.iter().enumerate() {
        let round = round as u32;
        let report = run_round(&dir, variant, seed, round, kind, &mut rng);
        if kind == RoundKind::KillDuringOpen && !report.opened {
            killed_during_recovery += 1;
        }
        if let Some(path) = &report.io_path {
            assert_eq!(
                path, &io_path,
                "{}: round {round}'s WAL took another I/O path",
                variant.name
            );
        }
        candidates = extend(candidates, seed, round, &report);
        // Leave the crashed state for the next child to recover when it is to be killed
        // while recovering; check it otherwise.
        let next_kills_open = ROUNDS.get(round as usize + 1) == Some(&RoundKind::KillDuringOpen);
        if !next_kills_open {
            candidates = verify(&dir, variant, candidates, seed, round);
        }
    }
    if variant.split.is_some() {
        let logs = std::fs::read_dir(dir.join("capacity"))
            .expect("capacity tier")
            .filter(|e| {
                let name = e.as_ref().expect("entry").file_name();
                name.to_string_lossy().ends_with(".vlog")
            })
            .count();
        assert!(logs > 0, "the split run wrote no value log");
    }
    match variant.mode {
        WalMode::Group => assert_eq!(io_path, "group"),
        WalMode::Append => assert_eq!(io_path, "append"),
        WalMode::Zoned => assert_eq!(io_path, "zoned"),
        _ if variant.io_uring => assert!(io_path == "io_uring" || io_path == "pwrite", "{io_path}"),
        _ => assert_eq!(io_path, "pwrite"),
    }
    println!(
        "{}: WAL I/O path {io_path}; {killed_during_recovery} children were killed before \
         their open finished",
        variant.name
    );
}
