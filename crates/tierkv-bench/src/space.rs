//! The most disk space each tier held at any moment of a run, sampled from outside the engine.
//!
//! Why: a tier's budget is only comparable between engines if both keep to it. tierkv treats
//! `--tier-capacity` as a hard limit; RocksDB's `db_paths` target is where it starts placing a
//! level, and a compaction's outputs and inputs live side by side on the fast path until it
//! ends. The space used after the run says nothing about that; the peak does.
//!
//! Space is what the file system allocated (`st_blocks`), so preallocated but unwritten file
//! space counts: the device cannot give it to anything else either.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the directories are walked: a compaction's output stays for seconds, so a
/// quarter second sees its peak, and walking a few hundred files costs well under a millisecond.
const EVERY: Duration = Duration::from_millis(250);

/// A thread recording each directory's largest allocated size until [`PeakWatch::finish`].
pub struct PeakWatch {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<Vec<u64>>,
}

impl PeakWatch {
    /// Starts watching `dirs` (one per tier, in order).
    pub fn start(dirs: Vec<PathBuf>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("peak-watch".into())
            .spawn(move || {
                let mut peaks = vec![0u64; dirs.len()];
                loop {
                    for (peak, dir) in peaks.iter_mut().zip(&dirs) {
                        *peak = (*peak).max(allocated_bytes(dir));
                    }
                    if flag.load(Ordering::Acquire) {
                        return peaks;
                    }
                    std::thread::sleep(EVERY);
                }
            })
            .expect("spawning the peak-watch thread");
        PeakWatch { stop, handle }
    }

    /// Stops watching (after one last sample) and returns each directory's peak, in bytes.
    pub fn finish(self) -> Vec<u64> {
        self.stop.store(true, Ordering::Release);
        self.handle.join().unwrap_or_default()
    }
}

/// Bytes of all files under `dir` (their lengths).
pub fn file_bytes(dir: &Path) -> u64 {
    sum_files(dir, &|m| m.len())
}

/// Bytes of the table files (`*.sst`, both engines' name) under `dir`: where an engine's tables
/// really are, read from the directories rather than from the engine's own counters.
pub fn table_bytes(dir: &Path) -> u64 {
    sum_matching(dir, &|p| p.extension().is_some_and(|e| e == "sst"), &|m| {
        m.len()
    })
}

/// Bytes the file system allocated to the files under `dir`.
pub fn allocated_bytes(dir: &Path) -> u64 {
    sum_files(dir, &|m| m.blocks() * 512)
}

/// Sums `size` over the files under `dir`, recursively; files that vanish while it is walked
/// count as nothing.
fn sum_files(dir: &Path, size: &dyn Fn(&std::fs::Metadata) -> u64) -> u64 {
    sum_matching(dir, &|_| true, size)
}

/// Sums `size` over the files under `dir` whose path `keep` accepts, recursively.
fn sum_matching(
    dir: &Path,
    keep: &dyn Fn(&Path) -> bool,
    size: &dyn Fn(&std::fs::Metadata) -> u64,
) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => sum_matching(&e.path(), keep, size),
            Ok(m) if keep(&e.path()) => size(&m),
            _ => 0,
        })
        .sum()
}

/// What the profile promises about the fast tier, checked against the tables found there
/// after the run: PL (`levels_on_fast = 0`, fixed) keeps every table off it. `None` when the
/// profile promises nothing checkable this way (LAD-n's split is by level, `auto` moves tables).
pub fn placement_check(levels_on_fast: usize, auto: bool, table_bytes: &[u64]) -> Option<String> {
    if auto || levels_on_fast > 0 || table_bytes.len() < 2 {
        return None;
    }
    Some(match table_bytes[0] {
        0 => "ok: no table on the fast tier (PL)".to_string(),
        n => format!(
            "VIOLATED: {:.1} MiB of tables on the fast tier under PL",
            n as f64 / (1 << 20) as f64
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_placement_check_reads_tables_on_the_fast_tier() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sst")).unwrap();
        std::fs::write(dir.path().join("sst/000012.sst"), vec![1u8; 3000]).unwrap();
        std::fs::write(dir.path().join("000013.log"), vec![1u8; 5000]).unwrap();
        let tables = table_bytes(dir.path());
        assert_eq!(tables, 3000);
        assert!(placement_check(0, false, &[tables, 9])
            .unwrap()
            .starts_with("VIOLATED"));
        assert!(placement_check(0, false, &[0, 9])
            .unwrap()
            .starts_with("ok"));
        assert_eq!(placement_check(2, false, &[tables, 9]), None);
        assert_eq!(placement_check(0, true, &[tables, 9]), None);
    }

    #[test]
    fn peak_outlives_the_files_that_made_it() {
        let dir = tempfile::tempdir().unwrap();
        let watch = PeakWatch::start(vec![dir.path().to_path_buf()]);
        let file = dir.path().join("big");
        std::fs::write(&file, vec![7u8; 4 << 20]).unwrap();
        std::thread::sleep(EVERY * 3);
        std::fs::remove_file(&file).unwrap();
        std::fs::write(dir.path().join("small"), vec![7u8; 4096]).unwrap();
        let peaks = watch.finish();
        assert!(
            peaks[0] >= 4 << 20,
            "peak {} missed the 4 MiB file",
            peaks[0]
        );
        assert!(allocated_bytes(dir.path()) < 1 << 20);
    }
}
