//! Crash-test plumbing: how the machine goes down, crashing a `FaultFs` under an open `Db`,
//! dropping the dead `Db` without hanging, images of a settled file system to start many cases
//! from the same state, and a list of failed cases reported together.

use super::tiers::{CAPACITY, FAST};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc};
use std::time::Duration;
use tierkv::env::{CrashPolicy, FaultFs, FaultKind, Fs};
use tierkv::Db;

/// How long dropping a dead `Db` may take before the test calls it a hang.
pub const DROP_LIMIT: Duration = Duration::from_secs(20);

/// The value of the environment variable `name` as a number, `default` if it is not set; a
/// value that is not a number fails the test.
pub fn env_u64(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
        Err(_) => default,
    }
}

/// How the machine goes down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Crash {
    /// Power loss: what was not synced is lost as the policy says.
    Power(CrashPolicy),
    /// `kill -9`: everything handed to the file system survives.
    Process,
}

/// Every way down: each power-loss policy, then a process kill.
pub const CRASHES: [Crash; 4] = [
    Crash::Power(CrashPolicy::DropUnsynced),
    Crash::Power(CrashPolicy::KeepRandomPages),
    Crash::Power(CrashPolicy::TearLastSector),
    Crash::Process,
];

impl Crash {
    /// Crashes `fs` this way.
    pub fn hit(self, fs: &FaultFs) {
        match self {
            Crash::Power(policy) => fs.crash(policy),
            Crash::Process => fs.process_crash(),
        }
    }
}

/// Drops `db` (if any) on another thread: dropping a `Db` whose files died in a crash must
/// neither panic nor hang (for [`DROP_LIMIT`]).
pub fn drop_within(db: impl Into<Option<Db>>, what: &str) {
    let Some(db) = db.into() else { return };
    let (tx, rx) = mpsc::channel();
    let dropper = std::thread::spawn(move || {
        drop(db);
        let _ = tx.send(());
    });
    match rx.recv_timeout(DROP_LIMIT) {
        Ok(()) => dropper.join().expect("drop thread"),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            panic!(
                "{what}: dropping the Db panicked: {:?}",
                dropper.join().err()
            )
        }
        Err(mpsc::RecvTimeoutError::Timeout) => {
            panic!("{what}: dropping the Db hung for {DROP_LIMIT:?}")
        }
    }
}

/// Freezes `fs` (every mutating call fails from now on, so the dead `Db`'s threads cannot write
/// into the post-crash world), crashes it, drops the `Db`, and lifts the freeze.
pub fn crash_now(fs: &FaultFs, db: impl Into<Option<Db>>, crash: Crash, what: &str) {
    fs.fail_after(0, FaultKind::Io, false);
    crash.hit(fs);
    drop_within(db, what);
    fs.clear_faults();
}

/// The files in [`FAST`] and [`CAPACITY`] of a `FaultFs` with no unsynced bytes (cleanly closed,
/// or crashed), to recover the same state several times.
#[derive(Clone)]
pub struct FsImage {
    /// The tier directories that existed.
    pub dirs: Vec<PathBuf>,
    /// Every file in them, in name order, with its bytes.
    pub files: Vec<(PathBuf, Vec<u8>)>,
}

impl FsImage {
    /// The files of `fs`'s two tier directories and every directory below them (one that
    /// does not exist is left out).
    pub fn take(fs: &FaultFs) -> FsImage {
        let mut img = FsImage {
            dirs: Vec::new(),
            files: Vec::new(),
        };
        // NB: the hot store keeps its slabs in a directory of the fast tier, and with
        // partitions in one directory per partition below that.
        let mut pending = vec![PathBuf::from(CAPACITY), PathBuf::from(FAST)];
        while let Some(dir) = pending.pop() {
            let Ok(mut names) = fs.list_dir(&dir) else {
                continue;
            };
            names.sort();
            img.dirs.push(dir.clone());
            for name in names.into_iter().rev() {
                let path = dir.join(name);
                match fs.file_contents(&path) {
                    Some(bytes) => img.files.push((path, bytes)),
                    None => pending.push(path),
                }
            }
        }
        img.files.sort_by(|a, b| a.0.cmp(&b.0));
        img
    }

    /// A new `FaultFs` (seeded with `seed`) holding these directories and files, all durable.
    pub fn materialize(&self, seed: u64) -> Arc<FaultFs> {
        let fs = FaultFs::new(seed);
        for dir in &self.dirs {
            tierkv::env::create_dir_all_durable(&*fs, dir).expect("mkdir");
        }
        for (path, bytes) in &self.files {
            fs.write_raw(path, bytes);
        }
        fs
    }

    /// Every file with its size.
    pub fn listing(&self) -> String {
        let names: Vec<String> = self
            .files
            .iter()
            .map(|(p, b)| format!("{} ({} B)", p.display(), b.len()))
            .collect();
        names.join(", ")
    }

    /// The files in `dir` with their sizes, and their total.
    pub fn listing_of(&self, dir: &Path) -> String {
        let files: Vec<_> = self
            .files
            .iter()
            .filter(|(p, _)| p.starts_with(dir))
            .collect();
        let total: usize = files.iter().map(|(_, b)| b.len()).sum();
        let names: Vec<String> = files
            .iter()
            .map(|(p, b)| format!("{} {}", p.file_name().unwrap().to_string_lossy(), b.len()))
            .collect();
        format!("{total} bytes: {}", names.join(", "))
    }
}

/// The cases of a sweep that failed, reported together so one run shows every broken case.
#[derive(Default)]
pub struct Failures(pub Vec<String>);

impl Failures {
    /// Records a failed case (and prints it at once).
    pub fn add(&mut self, msg: String) {
        eprintln!("FAIL {msg}");
        self.0.push(msg);
    }

    /// Records `case` as failed if `result` is an error.
    pub fn check<T>(&mut self, case: String, result: std::result::Result<T, String>) {
        if let Err(e) = result {
            self.add(format!("{case}: {e}"));
        }
    }

    /// Fails the test, showing the first eight failures, if any case failed.
    pub fn assert_none(&self, what: &str) {
        if !self.0.is_empty() {
            let shown: Vec<&str> = self.0.iter().take(8).map(String::as_str).collect();
            panic!(
                "{what}: {} failing cases, first ones:\n{}",
                self.0.len(),
                shown.join("\n")
            );
        }
    }
}
