//! Options: what a database is opened with, and the per-call read and write choices.
//!
//! [`Options`] is built with [`OptionsBuilder`] or loaded from TOML ([`Options::from_toml_file`]);
//! either way [`Options::validate`] runs at `Db::open` and names the offending option and its
//! accepted range. Every default is documented at its field.

use crate::env::{Fs, PosixFs};
use crate::error::{Error, Result};
use crate::placement::auto::{self, AutoPlaceConfig};
use crate::snapshot::Snapshot;
pub use crate::sst::Compression;
pub use crate::wal::log::RecoveryMode;
use serde::Deserialize;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Largest accepted key: 64 KiB.
pub const MAX_KEY_LEN: usize = 64 << 10;
/// Largest accepted value: 64 MiB.
pub const MAX_VALUE_LEN: usize = 64 << 20;
/// Largest accepted encoded write batch: 512 MiB.
pub const MAX_BATCH_BYTES: usize = 512 << 20;

/// One storage tier: a directory on one device, with a byte budget.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    /// Short name used in stats, errors and the MANIFEST ("fast", "capacity", ...).
    pub name: String,
    /// Directory of the tier (created if missing when the DB is created).
    pub path: PathBuf,
    /// Budget in bytes for files placed on this tier; `u64::MAX` means unlimited.
    #[serde(default = "unlimited", deserialize_with = "de_size")]
    pub capacity: u64,
    /// Read this tier's tables with `O_DIRECT`, through the block cache only (SpanDB's kernel
    /// bypass); buffered where the file system refuses it. Default false: the OS page cache
    /// helps when the block cache is small.
    #[serde(default)]
    pub direct_reads: bool,
}

fn unlimited() -> u64 {
    u64::MAX
}

impl TierConfig {
    /// A tier with an unlimited budget.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        TierConfig {
            name: name.into(),
            path: path.into(),
            capacity: u64::MAX,
            direct_reads: false,
        }
    }

    /// Reads this tier's tables with `O_DIRECT` (see [`TierConfig::direct_reads`]).
    pub fn with_direct_reads(mut self, direct: bool) -> Self {
        self.direct_reads = direct;
        self
    }

    /// Sets the byte budget.
    pub fn with_capacity(mut self, bytes: u64) -> Self {
        self.capacity = bytes;
        self
    }
}

/// Options a database is opened with. Build with [`Options::builder`].
#[derive(Clone)]
pub struct Options {
    /// Tiers, fastest first. Tier 0 holds the WAL, MANIFEST, CURRENT and LOCK. At least one.
    pub tiers: Vec<TierConfig>,
    /// Create the database if it does not exist. Default true.
    pub create_if_missing: bool,
    /// Fail with `AlreadyExists` if the database exists. Default false.
    pub error_if_exists: bool,
    /// Open without writing anything: the WAL is replayed into memory, no file is created,
    /// changed or deleted, and writes, `flush` and `compact_range` fail. Default false.
    pub read_only: bool,
    /// Levels L0..L(n-1) are placed on tier 0, deeper levels on the next tiers. 0 is SpanDB's
    /// "PL" (the fast tier holds only the WAL). Default 2. Range 0..=num_levels.
    pub levels_on_fast: usize,
    /// Number of LSM levels. Default 7. Range 2..=12.
    pub num_levels: usize,
    /// Bytes a memtable holds before it is switched to immutable. Default 64 MiB. Range 64 KiB..=4 GiB.
    pub write_buffer_size: usize,
    /// Immutable memtables waiting for flush before writes stall. Default 2. Range 1..=16.
    pub max_immutable_memtables: usize,
    /// L0 file count that triggers an L0 compaction. Default 4. Range 1..=1000.
    pub l0_compaction_trigger: usize,
    /// L0 file count at which each write is delayed. Default 20. Must be >= the trigger.
    pub l0_slowdown_trigger: usize,
    /// L0 file count at which writes stop until compaction catches up. Default 36. Must be > slowdown.
    pub l0_stop_trigger: usize,
    /// Write rate, in bytes per second, that writes are held to when L0 reaches the slowdown
    /// trigger; the rate then falls while L0 keeps growing and rises back as it shrinks, never
    /// above this. Default 16 MiB/s. Range 1 KiB/s..
    pub delayed_write_rate: u64,
    /// Target size of L1. Default 256 MiB. Range 64 KiB..
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this many times the previous one. Default 10. Range 2..=100.
    pub level_size_multiplier: u64,
    /// Target size of table files written by compaction. Default 64 MiB. Range 16 KiB..=4 GiB.
    pub target_file_size: u64,
    /// While a table (flush, compaction or migration output) is written to a tier after the
    /// first, ask the OS to write back its pages every this many bytes, after the previous
    /// piece's write-back has finished (`sync_file_range`; RocksDB's `bytes_per_sync`). A table
    /// then keeps at most two pieces dirty instead of all of it until its final sync, and that
    /// sync no longer holds a slow device (and the reads queued on it) for a table's worth of
    /// writes. Not a durability setting: tables are synced whole before they are listed. Tier
    /// 0, which holds the WAL, is left to the OS: there the queued write-back delayed the WAL's
    /// writes. Default 0, every tier left to the OS: in the lab 1 MiB made a ycsb-b load 7-25%
    /// faster, with shorter write stops, but its read-mostly runs were no faster and their p99
    /// was no better (BENCHMARKS.md, session 10).
    pub bytes_per_sync: u64,
    /// Uncompressed size of a data block. Default 4096. Range 256..=4 MiB.
    pub block_size: usize,
    /// Keys between restart points in a block. Default 16. Range 1..=1024.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10. Range 0..=64.
    pub bloom_bits_per_key: u32,
    /// Block compression. Default LZ4.
    pub compression: Compression,
    /// Shared block cache budget in bytes (0 disables the cache). Default 64 MiB.
    pub block_cache_bytes: usize,
    /// Background threads for flush and compaction; with two or more, one is kept free for
    /// flushes. Default 2. Range 1..=64.
    pub background_threads: usize,
    /// How WAL damage is treated at recovery. Default `TolerateCorruptedTail`.
    pub wal_recovery_mode: RecoveryMode,
    /// Bytes of tier 0 kept free for the WAL and MANIFEST: tables never use them. Default: see
    /// [`Options::wal_reserve`]; tier 0's capacity must hold the reserve plus two tables.
    pub fast_tier_wal_reserve: Option<u64>,
    /// Bytes of tier 0's table budget that only memtable flushes may use, so that L0 stays on
    /// the fast tier when compactions (or placement) have filled the rest. Only with two or
    /// more tiers. Default: see [`Options::flush_reserve`]. With [`Placement::Auto`], all but
    /// two memtables of it are lent to compactions and migration while reads flow and writes are
    /// quiet (`placement::reserve::ReserveLender`).
    pub fast_tier_flush_reserve: Option<u64>,
    /// How new tables are placed on tiers. Default [`Placement::Fixed`] (by `levels_on_fast`).
    pub placement: Placement,
    /// The fast tier's bandwidth ceiling in bytes/s, for `placement = auto`'s utilisation.
    /// `None`: measured by a short write probe at open when placement is automatic.
    pub fast_tier_bandwidth: Option<u64>,
    /// `placement = auto`: `BW_L`, the fast-tier utilisation below which the pointer may move
    /// down (more levels on the fast tier). Default 0.5. Range 0.01..`auto_bw_high`.
    pub auto_bw_low: f64,
    /// `placement = auto`: `BW_H`, the fast-tier utilisation above which the pointer moves up.
    /// Default 0.8. Range above `auto_bw_low`, at most 4 (utilisation may exceed 1 when the
    /// bandwidth ceiling is underestimated).
    pub auto_bw_high: f64,
    /// `placement = auto`: share of the fast tier's table budget above which the pointer moves
    /// up and the coldest tables move down. Default 0.95. Range above `auto_space_target`, at
    /// most 1.
    pub auto_space_high: f64,
    /// `placement = auto`: share of the budget a move-down migration aims for. Default 0.88.
    /// Range 0.05..`auto_space_high`.
    pub auto_space_target: f64,
    /// `placement = auto`: bytes/s a migration copies while foreground requests flow (it runs
    /// unpaced when they stop): its reads share the slower tier with foreground reads. Default
    /// 16 MiB/s (see `placement::auto::DEFAULT_MIGRATION_BUSY_RATE`); at least 1.
    pub auto_migration_busy_rate: u64,
    /// `placement = auto`: keep replicas on the fast tier, in room no table needs, of the
    /// slower tiers' most-read tables (`db::replica`). Reads go to the replica; a table that
    /// needs the room, or a write burst taking the flush reserve back, drops replicas at once.
    /// Default true.
    pub auto_replicas: bool,
    /// How the WAL is written. Default [`WalMode::Group`].
    pub wal: WalMode,
    /// Parallel WAL: most loggers writing at once; the pipeline's head thread runs 1 to this
    /// many by write intensity. Default 3. Range 1..=8.
    pub wal_loggers: usize,
    /// Parallel WAL: writes each logger keeps in flight. Default 4. Range 1..=64.
    pub wal_inflight: usize,
    /// Parallel WAL: bytes of one memtable's log page group; a memtable is switched when its
    /// group fills. Default `2 * write_buffer_size`. Rounded up to whole pages.
    pub wal_group_bytes: Option<u64>,
    /// Parallel WAL: submit page writes through io_uring on an `O_DIRECT` descriptor when the
    /// kernel and file system allow it (else `pwritev2` from the logger). Default true.
    pub wal_io_uring: bool,
    /// Table reads that can go together — a multi-get's data blocks, an iterator's next
    /// read-ahead window — go through io_uring when the kernel allows it (else one `pread`
    /// each, in turn). Default true.
    pub read_io_uring: bool,
    /// Threads serving asynchronous reads and deferred writes. Default 2. Range 1..=64.
    pub pipeline_workers: usize,
    /// Asynchronous requests admitted but not completed, beyond which `submit_*` returns
    /// `Busy`. Default 4096. Range 1..=1_000_000.
    pub max_pending_requests: usize,
    /// The file system all I/O goes through. Default: the POSIX one.
    pub fs: Arc<dyn Fs>,
}

/// How new tables are placed on the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// `levels_on_fast` whole levels on the fast tier (SpanDB's PL and LAD-n).
    #[default]
    Fixed,
    /// A pointer over levels, starting at `levels_on_fast`, moved by the fast tier's measured
    /// utilisation and space (SpanDB's automatic placement); see `placement::auto`.
    Auto,
}

/// How the write-ahead log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalMode {
    /// One log file per memtable written by a group-commit leader (RocksDB's scheme).
    #[default]
    Group,
    /// A preallocated page area on tier 0 written by several loggers at once (SpanDB's
    /// parallel WAL); see `docs/parallel-wal.md`.
    Parallel,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("tiers", &self.tiers)
            .field("levels_on_fast", &self.levels_on_fast)
            .field("num_levels", &self.num_levels)
            .field("write_buffer_size", &self.write_buffer_size)
            .field("max_immutable_memtables", &self.max_immutable_memtables)
            .field("target_file_size", &self.target_file_size)
            .field("compression", &self.compression)
            .field("background_threads", &self.background_threads)
            .finish_non_exhaustive()
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            tiers: Vec::new(),
            create_if_missing: true,
            error_if_exists: false,
            read_only: false,
            levels_on_fast: 2,
            num_levels: 7,
            write_buffer_size: 64 << 20,
            max_immutable_memtables: 2,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 20,
            l0_stop_trigger: 36,
            delayed_write_rate: 16 << 20,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            target_file_size: 64 << 20,
            bytes_per_sync: 0,
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
            block_cache_bytes: 64 << 20,
            background_threads: 2,
            wal_recovery_mode: RecoveryMode::default(),
            fast_tier_wal_reserve: None,
            fast_tier_flush_reserve: None,
            placement: Placement::Fixed,
            fast_tier_bandwidth: None,
            auto_bw_low: auto::DEFAULT_BW_LOW,
            auto_bw_high: auto::DEFAULT_BW_HIGH,
            auto_space_high: auto::DEFAULT_SPACE_HIGH,
            auto_space_target: auto::DEFAULT_SPACE_TARGET,
            auto_migration_busy_rate: auto::DEFAULT_MIGRATION_BUSY_RATE,
            auto_replicas: true,
            wal: WalMode::Group,
            wal_loggers: 3,
            wal_inflight: 4,
            wal_group_bytes: None,
            wal_io_uring: true,
            read_io_uring: true,
            pipeline_workers: 2,
            max_pending_requests: 4096,
            fs: Arc::new(PosixFs::new()),
        }
    }
}

/// Checks that option `low` is strictly below option `high` (each a name and a value).
fn check_below(low: (&str, f64), high: (&str, f64)) -> Result<()> {
    if low.1 < high.1 {
        return Ok(());
    }
    Err(Error::invalid(format!(
        "option {} = {} must be below {} = {}",
        low.0, low.1, high.0, high.1
    )))
}

fn check_range<T: PartialOrd + Copy + fmt::Display>(name: &str, v: T, lo: T, hi: T) -> Result<()> {
    // NB: `contains`, not `v < lo || v > hi`, so a NaN is out of every range.
    if !(lo..=hi).contains(&v) {
        return Err(Error::invalid(format!(
            "option {name} = {v} is out of range: accepted {lo}..={hi}"
        )));
    }
    Ok(())
}

impl Options {
    /// A builder starting from the defaults.
    pub fn builder() -> OptionsBuilder {
        OptionsBuilder {
            opts: Options::default(),
        }
    }

    /// Checks every option, naming the first one that is out of range.
    pub fn validate(&self) -> Result<()> {
        self.validate_tiers()?;
        check_range("num_levels", self.num_levels, 2, 12)?;
        check_range("levels_on_fast", self.levels_on_fast, 0, self.num_levels)?;
        check_range(
            "write_buffer_size",
            self.write_buffer_size,
            64 << 10,
            4 << 30,
        )?;
        check_range(
            "max_immutable_memtables",
            self.max_immutable_memtables,
            1,
            16,
        )?;
        check_range("l0_compaction_trigger", self.l0_compaction_trigger, 1, 1000)?;
        check_range(
            "l0_slowdown_trigger",
            self.l0_slowdown_trigger,
            self.l0_compaction_trigger,
            10_000,
        )?;
        check_range(
            "l0_stop_trigger",
            self.l0_stop_trigger,
            self.l0_slowdown_trigger + 1,
            10_001,
        )?;
        check_range(
            "max_bytes_for_level_base",
            self.max_bytes_for_level_base,
            64 << 10,
            u64::MAX,
        )?;
        check_range(
            "delayed_write_rate",
            self.delayed_write_rate,
            1 << 10,
            u64::MAX,
        )?;
        check_range("level_size_multiplier", self.level_size_multiplier, 2, 100)?;
        check_range("target_file_size", self.target_file_size, 16 << 10, 4 << 30)?;
        check_range("block_size", self.block_size, 256, 4 << 20)?;
        check_range(
            "block_restart_interval",
            self.block_restart_interval,
            1,
            1024,
        )?;
        check_range("bloom_bits_per_key", self.bloom_bits_per_key, 0, 64)?;
        check_range("background_threads", self.background_threads, 1, 64)?;
        check_range("wal_loggers", self.wal_loggers, 1, 8)?;
        check_range("wal_inflight", self.wal_inflight, 1, 64)?;
        if let Some(bytes) = self.wal_group_bytes {
            check_range("wal_group_bytes", bytes, 64 << 10, 64 << 30)?;
        }
        check_range("pipeline_workers", self.pipeline_workers, 1, 64)?;
        check_range(
            "max_pending_requests",
            self.max_pending_requests,
            1,
            1_000_000,
        )?;
        self.validate_auto_placement()
    }

    /// The controller's thresholds: each in range, and each pair ordered (a low threshold at
    /// or above its high one would leave no band in which the pointer holds still).
    fn validate_auto_placement(&self) -> Result<()> {
        check_range("auto_bw_low", self.auto_bw_low, 0.01, 4.0)?;
        check_range("auto_bw_high", self.auto_bw_high, 0.01, 4.0)?;
        check_range("auto_space_high", self.auto_space_high, 0.05, 1.0)?;
        check_range("auto_space_target", self.auto_space_target, 0.05, 1.0)?;
        if self.auto_migration_busy_rate == 0 {
            return Err(Error::invalid(
                "option auto_migration_busy_rate = 0: migrations would never finish while \
                 requests flow (give bytes per second, at least 1)",
            ));
        }
        check_below(
            ("auto_bw_low", self.auto_bw_low),
            ("auto_bw_high", self.auto_bw_high),
        )?;
        check_below(
            ("auto_space_target", self.auto_space_target),
            ("auto_space_high", self.auto_space_high),
        )
    }

    /// The automatic placement controller's configuration for these options.
    pub fn auto_place_config(&self) -> AutoPlaceConfig {
        AutoPlaceConfig {
            bw_low: self.auto_bw_low,
            bw_high: self.auto_bw_high,
            space_high: self.auto_space_high,
            space_target: self.auto_space_target,
            ..AutoPlaceConfig::new(self.num_levels)
        }
    }

    fn validate_tiers(&self) -> Result<()> {
        if self.tiers.is_empty() {
            return Err(Error::invalid(
                "option tiers is empty: give at least one tier (name and directory)",
            ));
        }
        check_range("tiers (count)", self.tiers.len(), 1, 16)?;
        for (i, t) in self.tiers.iter().enumerate() {
            let valid_name = !t.name.is_empty()
                && t.name.len() <= 64
                && t.name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
            if !valid_name {
                return Err(Error::invalid(format!(
                    "option tiers[{i}].name = {:?}: accepted 1..=64 characters of [A-Za-z0-9_-]",
                    t.name
                )));
            }
            if t.path.as_os_str().is_empty() {
                return Err(Error::invalid(format!("option tiers[{i}].path is empty")));
            }
            if self.tiers[..i].iter().any(|o| o.name == t.name) {
                return Err(Error::invalid(format!(
                    "option tiers: name {:?} is used twice",
                    t.name
                )));
            }
            if self.tiers[..i].iter().any(|o| o.path == t.path) {
                return Err(Error::invalid(format!(
                    "option tiers: directory {} is given for two tiers",
                    t.path.display()
                )));
            }
        }
        let reserve = self.wal_reserve();
        let tables = 2 * self.target_file_size.min(self.write_buffer_size as u64);
        let fast = self.tiers[0].capacity;
        if fast != u64::MAX && fast < reserve.saturating_add(tables) {
            return Err(Error::invalid(format!(
                "option tiers[0].capacity = {fast} is too small: it must hold the WAL reserve \
                 ({reserve} bytes; see fast_tier_wal_reserve, write_buffer_size and \
                 max_immutable_memtables) plus two tables ({tables} bytes)"
            )));
        }
        if let Some(flush) = self.fast_tier_flush_reserve {
            let needed = reserve.saturating_add(flush).saturating_add(tables);
            if fast != u64::MAX && fast < needed {
                return Err(Error::invalid(format!(
                    "option fast_tier_flush_reserve = {flush} is too large: tiers[0].capacity = \
                     {fast} must hold the WAL reserve ({reserve} bytes), the flush reserve and \
                     two tables ({tables} bytes)"
                )));
            }
        }
        Ok(())
    }

    /// Bytes of tier 0 that tables may not use.
    ///
    /// The default covers what can live there at once: a WAL per memtable (the active one, the
    /// immutable ones and one flushed but not yet deleted), each up to a memtable and its WAL
    /// preallocation step, and two MANIFESTs at their roll size (the old one while the new one
    /// is written).
    /// With the parallel WAL the reserve covers its whole area instead.
    pub fn wal_reserve(&self) -> u64 {
        self.fast_tier_wal_reserve.unwrap_or_else(|| {
            let wals = self.max_immutable_memtables as u64 + 2;
            let per_wal = self.write_buffer_size as u64 + self.wal_preallocation_step();
            let logs = match self.wal {
                WalMode::Group => wals * per_wal,
                WalMode::Parallel => self.wal_area_bytes(),
            };
            logs + 2 * self.manifest_roll_bytes()
        })
    }

    /// Bytes of tier 0's table budget kept for memtable flushes: compaction outputs and
    /// migrations do not use them.
    ///
    /// Why: the upper levels have first claim on the fast tier. Without the reserve, tables of
    /// deep levels placed while the tier was idle left no room when a write burst came, and
    /// flushes fell through to the capacity tier: a measured load sent 970 MiB of L0 there, and
    /// a flush on the throttled tier held writers for half a second. The default covers what
    /// L0 holds in normal operation (up to `l0_compaction_trigger` tables, the immutable
    /// memtables and the active one, a memtable each), capped at a quarter of tier 0's capacity
    /// less the WAL reserve.
    pub fn flush_reserve(&self) -> u64 {
        self.fast_tier_flush_reserve.unwrap_or_else(|| {
            let memtables = (self.l0_compaction_trigger + self.max_immutable_memtables + 1) as u64;
            let budget = self
                .tiers
                .first()
                .map_or(u64::MAX, |t| t.capacity.saturating_sub(self.wal_reserve()));
            (memtables * self.write_buffer_size as u64).min(budget / 4)
        })
    }

    /// Bytes of one parallel-WAL page group (whole 4 KiB pages).
    pub fn wal_group_bytes(&self) -> u64 {
        let bytes = self
            .wal_group_bytes
            .unwrap_or(2 * self.write_buffer_size as u64);
        bytes.div_ceil(4096) * 4096
    }

    /// Page groups in the parallel-WAL area: the active memtable's, one per immutable
    /// memtable, and one spare so a switch never waits for a flush to release one.
    pub fn wal_groups(&self) -> u64 {
        self.max_immutable_memtables as u64 + 2
    }

    /// Size of the parallel-WAL area file: two metadata pages and the groups.
    pub fn wal_area_bytes(&self) -> u64 {
        2 * 4096 + self.wal_groups() * self.wal_group_bytes()
    }

    /// WAL disk space is reserved this many bytes at a time (`fallocate`).
    pub fn wal_preallocation_step(&self) -> u64 {
        (self.write_buffer_size as u64 / 8).clamp(64 << 10, 4 << 20)
    }

    /// A MANIFEST that reaches this size is replaced by a fresh, compact one.
    pub fn manifest_roll_bytes(&self) -> u64 {
        (self.write_buffer_size as u64).clamp(64 << 10, 64 << 20)
    }

    /// Target total bytes of `level` (L1 and deeper).
    pub fn level_target_bytes(&self, level: usize) -> u64 {
        let mut target = self.max_bytes_for_level_base;
        for _ in 1..level {
            target = target.saturating_mul(self.level_size_multiplier);
        }
        target
    }

    /// Loads options from a TOML file (see [`Options::from_toml_str`]).
    pub fn from_toml_file(path: &Path) -> Result<Options> {
        let bytes = crate::env::read_file(&PosixFs::new(), path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!("config file {} is not UTF-8", path.display())))?;
        Self::from_toml_str(&text)
            .map_err(|e| Error::invalid(format!("config file {}: {e}", path.display())))
    }

    /// Parses options from TOML text. Keys are the field names of [`Options`]; tiers are given as
    /// `[[tier]]` tables with `name`, `path` and optional `capacity` (bytes, or a string such as
    /// `"10GiB"`). Sizes elsewhere accept the same forms. Unknown keys are an error.
    pub fn from_toml_str(text: &str) -> Result<Options> {
        let file: TomlOptions =
            toml::from_str(text).map_err(|e| Error::invalid(format!("TOML: {e}")))?;
        let opts = file.into_options();
        opts.validate()?;
        Ok(opts)
    }
}

/// Parses a byte size: an integer, or a number with a unit (B, KiB, MiB, GiB, TiB, KB, MB, GB, TB).
pub fn parse_size(text: &str) -> Result<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = (t[..split].trim(), t[split..].trim());
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => {
            return Err(Error::invalid(format!(
                "size {text:?}: unknown unit {unit:?}"
            )))
        }
    };
    let value: f64 = num.parse().map_err(|_| {
        Error::invalid(format!(
            "size {text:?} is not a number with an optional unit"
        ))
    })?;
    if !value.is_finite() || value < 0.0 {
        return Err(Error::invalid(format!(
            "size {text:?} must be a non-negative number"
        )));
    }
    Ok((value * mult as f64) as u64)
}

#[derive(Deserialize)]
#[serde(untagged)]
enum SizeValue {
    Int(u64),
    Text(String),
}

fn de_size<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    match SizeValue::deserialize(d)? {
        SizeValue::Int(v) => Ok(v),
        SizeValue::Text(s) => parse_size(&s).map_err(serde::de::Error::custom),
    }
}

fn de_opt_size<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<u64>, D::Error> {
    de_size(d).map(Some)
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TomlOptions {
    #[serde(default, rename = "tier")]
    tiers: Vec<TierConfig>,
    create_if_missing: Option<bool>,
    error_if_exists: Option<bool>,
    read_only: Option<bool>,
    levels_on_fast: Option<usize>,
    num_levels: Option<usize>,
    #[serde(default, deserialize_with = "de_opt_size")]
    write_buffer_size: Option<u64>,
    max_immutable_memtables: Option<usize>,
    l0_compaction_trigger: Option<usize>,
    l0_slowdown_trigger: Option<usize>,
    l0_stop_trigger: Option<usize>,
    #[serde(default, deserialize_with = "de_opt_size")]
    delayed_write_rate: Option<u64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    max_bytes_for_level_base: Option<u64>,
    level_size_multiplier: Option<u64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    target_file_size: Option<u64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    bytes_per_sync: Option<u64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    block_size: Option<u64>,
    block_restart_interval: Option<usize>,
    bloom_bits_per_key: Option<u32>,
    compression: Option<Compression>,
    #[serde(default, deserialize_with = "de_opt_size")]
    block_cache_bytes: Option<u64>,
    background_threads: Option<usize>,
    wal_recovery_mode: Option<RecoveryMode>,
    #[serde(default, deserialize_with = "de_opt_size")]
    fast_tier_wal_reserve: Option<u64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    fast_tier_flush_reserve: Option<u64>,
    placement: Option<Placement>,
    #[serde(default, deserialize_with = "de_opt_size")]
    fast_tier_bandwidth: Option<u64>,
    auto_bw_low: Option<f64>,
    auto_bw_high: Option<f64>,
    auto_space_high: Option<f64>,
    auto_space_target: Option<f64>,
    #[serde(default, deserialize_with = "de_opt_size")]
    auto_migration_busy_rate: Option<u64>,
    auto_replicas: Option<bool>,
    wal: Option<WalMode>,
    wal_loggers: Option<usize>,
    wal_inflight: Option<usize>,
    #[serde(default, deserialize_with = "de_opt_size")]
    wal_group_bytes: Option<u64>,
    wal_io_uring: Option<bool>,
    read_io_uring: Option<bool>,
    pipeline_workers: Option<usize>,
    max_pending_requests: Option<usize>,
}

impl TomlOptions {
    fn into_options(self) -> Options {
        let d = Options::default();
        Options {
            tiers: self.tiers,
            create_if_missing: self.create_if_missing.unwrap_or(d.create_if_missing),
            error_if_exists: self.error_if_exists.unwrap_or(d.error_if_exists),
            read_only: self.read_only.unwrap_or(d.read_only),
            levels_on_fast: self.levels_on_fast.unwrap_or(d.levels_on_fast),
            num_levels: self.num_levels.unwrap_or(d.num_levels),
            write_buffer_size: self
                .write_buffer_size
                .map_or(d.write_buffer_size, |v| v as usize),
            max_immutable_memtables: self
                .max_immutable_memtables
                .unwrap_or(d.max_immutable_memtables),
            l0_compaction_trigger: self
                .l0_compaction_trigger
                .unwrap_or(d.l0_compaction_trigger),
            l0_slowdown_trigger: self.l0_slowdown_trigger.unwrap_or(d.l0_slowdown_trigger),
            l0_stop_trigger: self.l0_stop_trigger.unwrap_or(d.l0_stop_trigger),
            delayed_write_rate: self.delayed_write_rate.unwrap_or(d.delayed_write_rate),
            max_bytes_for_level_base: self
                .max_bytes_for_level_base
                .unwrap_or(d.max_bytes_for_level_base),
            level_size_multiplier: self
                .level_size_multiplier
                .unwrap_or(d.level_size_multiplier),
            target_file_size: self.target_file_size.unwrap_or(d.target_file_size),
            bytes_per_sync: self.bytes_per_sync.unwrap_or(d.bytes_per_sync),
            block_size: self.block_size.map_or(d.block_size, |v| v as usize),
            block_restart_interval: self
                .block_restart_interval
                .unwrap_or(d.block_restart_interval),
            bloom_bits_per_key: self.bloom_bits_per_key.unwrap_or(d.bloom_bits_per_key),
            compression: self.compression.unwrap_or(d.compression),
            block_cache_bytes: self
                .block_cache_bytes
                .map_or(d.block_cache_bytes, |v| v as usize),
            background_threads: self.background_threads.unwrap_or(d.background_threads),
            wal_recovery_mode: self.wal_recovery_mode.unwrap_or(d.wal_recovery_mode),
            fast_tier_wal_reserve: self.fast_tier_wal_reserve,
            fast_tier_flush_reserve: self.fast_tier_flush_reserve,
            placement: self.placement.unwrap_or(d.placement),
            fast_tier_bandwidth: self.fast_tier_bandwidth,
            auto_bw_low: self.auto_bw_low.unwrap_or(d.auto_bw_low),
            auto_bw_high: self.auto_bw_high.unwrap_or(d.auto_bw_high),
            auto_space_high: self.auto_space_high.unwrap_or(d.auto_space_high),
            auto_space_target: self.auto_space_target.unwrap_or(d.auto_space_target),
            auto_migration_busy_rate: self
                .auto_migration_busy_rate
                .unwrap_or(d.auto_migration_busy_rate),
            auto_replicas: self.auto_replicas.unwrap_or(d.auto_replicas),
            wal: self.wal.unwrap_or(d.wal),
            wal_loggers: self.wal_loggers.unwrap_or(d.wal_loggers),
            wal_inflight: self.wal_inflight.unwrap_or(d.wal_inflight),
            wal_group_bytes: self.wal_group_bytes,
            wal_io_uring: self.wal_io_uring.unwrap_or(d.wal_io_uring),
            read_io_uring: self.read_io_uring.unwrap_or(d.read_io_uring),
            pipeline_workers: self.pipeline_workers.unwrap_or(d.pipeline_workers),
            max_pending_requests: self.max_pending_requests.unwrap_or(d.max_pending_requests),
            fs: d.fs,
        }
    }
}

/// Builds [`Options`]; `build` validates.
pub struct OptionsBuilder {
    opts: Options,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty),* $(,)?) => {
        $( $(#[$doc])* pub fn $name(mut self, v: $ty) -> Self { self.opts.$name = v; self } )*
    };
}

impl OptionsBuilder {
    /// Adds a tier (call in order, fastest first).
    pub fn tier(mut self, tier: TierConfig) -> Self {
        self.opts.tiers.push(tier);
        self
    }

    /// Sets the fast tier's bandwidth ceiling (bytes/s) for automatic placement.
    pub fn fast_tier_bandwidth(mut self, bytes_per_sec: u64) -> Self {
        self.opts.fast_tier_bandwidth = Some(bytes_per_sec);
        self
    }

    /// Sets the parallel WAL's group size explicitly.
    pub fn wal_group_bytes(mut self, bytes: u64) -> Self {
        self.opts.wal_group_bytes = Some(bytes);
        self
    }

    /// Sets the WAL reserve on tier 0 explicitly.
    pub fn fast_tier_wal_reserve(mut self, bytes: u64) -> Self {
        self.opts.fast_tier_wal_reserve = Some(bytes);
        self
    }

    /// Sets the flush reserve on tier 0 explicitly (see [`Options::flush_reserve`]).
    pub fn fast_tier_flush_reserve(mut self, bytes: u64) -> Self {
        self.opts.fast_tier_flush_reserve = Some(bytes);
        self
    }

    setters! {
        /// See [`Options::create_if_missing`].
        create_if_missing: bool,
        /// See [`Options::error_if_exists`].
        error_if_exists: bool,
        /// See [`Options::read_only`].
        read_only: bool,
        /// See [`Options::levels_on_fast`].
        levels_on_fast: usize,
        /// See [`Options::num_levels`].
        num_levels: usize,
        /// See [`Options::write_buffer_size`].
        write_buffer_size: usize,
        /// See [`Options::max_immutable_memtables`].
        max_immutable_memtables: usize,
        /// See [`Options::l0_compaction_trigger`].
        l0_compaction_trigger: usize,
        /// See [`Options::l0_slowdown_trigger`].
        l0_slowdown_trigger: usize,
        /// See [`Options::l0_stop_trigger`].
        l0_stop_trigger: usize,
        /// See [`Options::delayed_write_rate`].
        delayed_write_rate: u64,
        /// See [`Options::max_bytes_for_level_base`].
        max_bytes_for_level_base: u64,
        /// See [`Options::level_size_multiplier`].
        level_size_multiplier: u64,
        /// See [`Options::target_file_size`].
        target_file_size: u64,
        /// See [`Options::bytes_per_sync`].
        bytes_per_sync: u64,
        /// See [`Options::block_size`].
        block_size: usize,
        /// See [`Options::block_restart_interval`].
        block_restart_interval: usize,
        /// See [`Options::bloom_bits_per_key`].
        bloom_bits_per_key: u32,
        /// See [`Options::compression`].
        compression: Compression,
        /// See [`Options::block_cache_bytes`].
        block_cache_bytes: usize,
        /// See [`Options::background_threads`].
        background_threads: usize,
        /// See [`Options::wal_recovery_mode`].
        wal_recovery_mode: RecoveryMode,
        /// See [`Options::placement`].
        placement: Placement,
        /// See [`Options::auto_bw_low`].
        auto_bw_low: f64,
        /// See [`Options::auto_bw_high`].
        auto_bw_high: f64,
        /// See [`Options::auto_space_high`].
        auto_space_high: f64,
        /// See [`Options::auto_space_target`].
        auto_space_target: f64,
        /// See [`Options::auto_migration_busy_rate`].
        auto_migration_busy_rate: u64,
        /// See [`Options::auto_replicas`].
        auto_replicas: bool,
        /// See [`Options::wal`].
        wal: WalMode,
        /// See [`Options::wal_loggers`].
        wal_loggers: usize,
        /// See [`Options::wal_inflight`].
        wal_inflight: usize,
        /// See [`Options::wal_io_uring`].
        wal_io_uring: bool,
        /// See [`Options::read_io_uring`].
        read_io_uring: bool,
        /// See [`Options::pipeline_workers`].
        pipeline_workers: usize,
        /// See [`Options::max_pending_requests`].
        max_pending_requests: usize,
        /// See [`Options::fs`].
        fs: Arc<dyn Fs>,
    }

    /// Validates and returns the options.
    pub fn build(self) -> Result<Options> {
        self.opts.validate()?;
        Ok(self.opts)
    }
}

/// How durable a write is when the call returns. RocksDB's `sync=true` is [`Durability::Sync`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, PartialOrd, Ord)]
pub enum Durability {
    /// Kept in the WAL's user-space buffer: lost if the process dies.
    Buffered,
    /// Handed to the operating system: survives a process crash, not a power loss.
    #[default]
    Flush,
    /// On stable storage (`fdatasync`) before the call returns.
    Sync,
}

/// Per-write options.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteOptions {
    /// How durable the write is on return.
    pub durability: Durability,
}

impl WriteOptions {
    /// `durability = Sync`.
    pub fn sync() -> Self {
        WriteOptions {
            durability: Durability::Sync,
        }
    }
}

/// Per-read options.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Read as of this snapshot; `None` reads the latest state.
    pub snapshot: Option<Snapshot>,
    /// Put blocks read from tables into the block cache. Default true.
    pub fill_cache: bool,
    /// Iterators: the first key they may return (inclusive).
    pub lower_bound: Option<Vec<u8>>,
    /// Iterators: keys must be below this (exclusive).
    pub upper_bound: Option<Vec<u8>>,
}

impl Default for ReadOptions {
    fn default() -> Self {
        ReadOptions {
            snapshot: None,
            fill_cache: true,
            lower_bound: None,
            upper_bound: None,
        }
    }
}

impl ReadOptions {
    /// Reads as of `snapshot`.
    pub fn at(snapshot: &Snapshot) -> Self {
        ReadOptions {
            snapshot: Some(snapshot.clone()),
            ..Default::default()
        }
    }

    /// Sets iterator bounds `[lower, upper)`.
    pub fn bounds(mut self, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self {
        self.lower_bound = lower.map(<[u8]>::to_vec);
        self.upper_bound = upper.map(<[u8]>::to_vec);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_tiers() -> OptionsBuilder {
        Options::builder()
            .tier(TierConfig::new("fast", "/tmp/a"))
            .tier(TierConfig::new("capacity", "/tmp/b"))
    }

    #[test]
    fn defaults_validate() {
        two_tiers().build().unwrap();
    }

    #[test]
    fn out_of_range_names_option_and_range() {
        let err = two_tiers().num_levels(40).build().unwrap_err().to_string();
        assert!(
            err.contains("num_levels") && err.contains("2..=12"),
            "{err}"
        );
        let err = two_tiers()
            .levels_on_fast(9)
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("levels_on_fast"), "{err}");
        let err = Options::builder().build().unwrap_err().to_string();
        assert!(err.contains("tiers"), "{err}");
    }

    #[test]
    fn duplicate_tier_names_rejected() {
        let err = Options::builder()
            .tier(TierConfig::new("fast", "/a"))
            .tier(TierConfig::new("fast", "/b"))
            .build()
            .unwrap_err();
        assert!(err.to_string().contains("used twice"));
    }

    #[test]
    fn sizes_parse_with_units() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("64MiB").unwrap(), 64 << 20);
        assert_eq!(parse_size("1.5 GiB").unwrap(), 3 << 29);
        assert_eq!(parse_size("2GB").unwrap(), 2_000_000_000);
        assert!(parse_size("12 parsecs").is_err());
    }

    #[test]
    fn toml_round_trip() {
        let opts = Options::from_toml_str(
            r#"
            levels_on_fast = 1
            write_buffer_size = "8MiB"
            compression = "zstd"
            wal_recovery_mode = "absolute-consistency"
            wal = "parallel"
            placement = "auto"
            fast_tier_bandwidth = "2GiB"
            auto_bw_low = 0.3
            auto_bw_high = 0.7
            auto_space_high = 0.95
            auto_space_target = 0.85
            auto_migration_busy_rate = "32MiB"
            auto_replicas = false
            fast_tier_flush_reserve = "96MiB"
            bytes_per_sync = "512KiB"
            [[tier]]
            name = "fast"
            path = "/mnt/fast"
            capacity = "10GiB"
            direct_reads = true
            [[tier]]
            name = "capacity"
            path = "/mnt/cap"
            "#,
        )
        .unwrap();
        assert_eq!(opts.levels_on_fast, 1);
        assert_eq!(opts.write_buffer_size, 8 << 20);
        assert_eq!(opts.compression, Compression::Zstd);
        assert_eq!(opts.tiers[0].capacity, 10 << 30);
        assert_eq!(opts.tiers[1].capacity, u64::MAX);
        assert!(opts.tiers[0].direct_reads && !opts.tiers[1].direct_reads);
        assert_eq!(opts.wal_recovery_mode, RecoveryMode::AbsoluteConsistency);
        assert_eq!(opts.wal, WalMode::Parallel);
        assert_eq!(opts.placement, Placement::Auto);
        assert_eq!(opts.fast_tier_bandwidth, Some(2 << 30));
        assert_eq!(opts.flush_reserve(), 96 << 20);
        assert_eq!(opts.auto_migration_busy_rate, 32 << 20);
        assert!(!opts.auto_replicas);
        assert_eq!(opts.bytes_per_sync, 512 << 10);
        assert_eq!(Options::default().bytes_per_sync, 0);
        let ctl = opts.auto_place_config();
        assert_eq!(
            (ctl.bw_low, ctl.bw_high, ctl.space_high, ctl.space_target),
            (0.3, 0.7, 0.95, 0.85)
        );
        assert_eq!(ctl.num_levels, opts.num_levels);
    }

    #[test]
    fn flush_reserve_default_and_checks() {
        let fast = |capacity| TierConfig::new("fast", "/mnt/fast").with_capacity(capacity);
        let opts = Options::builder()
            .tier(fast(10 << 30))
            .write_buffer_size(16 << 20)
            .build()
            .unwrap();
        // l0_compaction_trigger (4) + max_immutable_memtables (2) + the active memtable.
        assert_eq!(opts.flush_reserve(), 7 * (16 << 20));
        let small = Options::builder()
            .tier(fast(256 << 20))
            .write_buffer_size(16 << 20)
            .fast_tier_wal_reserve(8 << 20)
            .build()
            .unwrap();
        assert_eq!(
            small.flush_reserve(),
            (248 << 20) / 4,
            "capped at a quarter"
        );
        let err = Options::builder()
            .tier(fast(256 << 20))
            .write_buffer_size(16 << 20)
            .fast_tier_wal_reserve(8 << 20)
            .fast_tier_flush_reserve(256 << 20)
            .build()
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("option fast_tier_flush_reserve = 268435456 is too large"),
            "{err}"
        );
    }

    #[test]
    fn auto_placement_thresholds_are_checked() {
        let tier = || TierConfig::new("fast", "/mnt/fast");
        let build = |b: OptionsBuilder| b.tier(tier()).build().map(|_| ()).unwrap_err().to_string();
        let err = build(Options::builder().auto_bw_low(0.9));
        assert!(
            err.contains("auto_bw_low = 0.9 must be below auto_bw_high = 0.8"),
            "{err}"
        );
        let err = build(Options::builder().auto_space_target(0.95));
        assert!(err.contains("auto_space_target = 0.95"), "{err}");
        let err = build(Options::builder().auto_space_high(1.5));
        assert!(
            err.contains("option auto_space_high = 1.5 is out of range"),
            "{err}"
        );
        let err = build(Options::builder().auto_migration_busy_rate(0));
        assert!(err.contains("option auto_migration_busy_rate = 0"), "{err}");
        let err = build(Options::builder().auto_bw_high(f64::NAN));
        assert!(err.contains("auto_bw_high"), "{err}");
        let ok = Options::builder()
            .tier(tier())
            .auto_bw_low(0.2)
            .auto_bw_high(1.2)
            .build()
            .unwrap();
        assert_eq!(ok.auto_place_config().bw_high, 1.2);
    }

    #[test]
    fn toml_unknown_key_is_an_error() {
        let err = Options::from_toml_str("levels_on_fats = 1\n[[tier]]\nname='f'\npath='/a'\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("levels_on_fats"), "{err}");
    }
}
