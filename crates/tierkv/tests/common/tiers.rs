//! Tier layouts: a fast tier in front of a capacity tier, in a real directory or at fixed paths
//! inside a `FaultFs`.

use std::path::{Path, PathBuf};
use tierkv::{OptionsBuilder, TierConfig};

/// The fast tier's directory inside a `FaultFs`.
pub const FAST: &str = "/db/fast";
/// The capacity tier's directory inside a `FaultFs`.
pub const CAPACITY: &str = "/db/capacity";

/// Adds the two tiers, fastest first, to an options builder.
pub trait TierSetup: Sized {
    /// Tiers `fast` and `capacity` at the given paths; the fast one holds at most `fast_bytes`
    /// (`u64::MAX`: unlimited).
    fn two_tiers(
        self,
        fast: impl Into<PathBuf>,
        capacity: impl Into<PathBuf>,
        fast_bytes: u64,
    ) -> Self;

    /// `<root>/fast` and `<root>/capacity`, both unlimited.
    fn tiers_in(self, root: &Path) -> Self {
        self.tiers_in_capped(root, u64::MAX)
    }

    /// `<root>/fast`, holding at most `fast_bytes`, and `<root>/capacity`.
    fn tiers_in_capped(self, root: &Path, fast_bytes: u64) -> Self {
        self.two_tiers(root.join("fast"), root.join("capacity"), fast_bytes)
    }

    /// [`FAST`] and [`CAPACITY`] (paths for a `FaultFs`), both unlimited.
    fn fault_tiers(self) -> Self {
        self.fault_tiers_capped(u64::MAX)
    }

    /// [`FAST`], holding at most `fast_bytes`, and [`CAPACITY`].
    fn fault_tiers_capped(self, fast_bytes: u64) -> Self {
        self.two_tiers(FAST, CAPACITY, fast_bytes)
    }
}

impl TierSetup for OptionsBuilder {
    fn two_tiers(
        self,
        fast: impl Into<PathBuf>,
        capacity: impl Into<PathBuf>,
        fast_bytes: u64,
    ) -> Self {
        self.tier(TierConfig::new("fast", fast).with_capacity(fast_bytes))
            .tier(TierConfig::new("capacity", capacity))
    }
}

/// The value-log files in `dir`, by name, sorted.
pub fn vlog_files(fs: &dyn tierkv::env::Fs, dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs
        .list_dir(dir)
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(".vlog"))
        .collect();
    v.sort();
    v
}

/// A fast tier on /dev/shm (for a `pm` tier) and a capacity tier on disk, removed at drop.
pub struct PmDirs {
    fast: tempfile::TempDir,
    capacity: tempfile::TempDir,
}

impl PmDirs {
    /// `None` where /dev/shm is missing (the tests that need it return early).
    pub fn new() -> Option<PmDirs> {
        if !Path::new("/dev/shm").is_dir() {
            return None;
        }
        Some(PmDirs {
            fast: tempfile::tempdir_in("/dev/shm").unwrap(),
            capacity: tempfile::tempdir().unwrap(),
        })
    }

    /// The fast tier's database directory, on /dev/shm.
    pub fn fast(&self) -> PathBuf {
        self.fast.path().join("db")
    }

    /// The capacity tier's database directory, on disk.
    pub fn capacity(&self) -> PathBuf {
        self.capacity.path().join("db")
    }
}
