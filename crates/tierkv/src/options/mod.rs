//! Options: what a database is opened with, and the per-call read and write choices.
//!
//! [`Options`] is built with [`OptionsBuilder`] or loaded from TOML ([`Options::from_toml_file`]);
//! either way [`Options::validate`] runs at `Db::open` and names the offending option and its
//! accepted range. Options come in groups, one struct per concern (`groups`): each option is
//! defined once there, with its documentation, default, TOML key and check. The builder sets
//! them by name ([`OPTION_NAMES`] maps each name to its group and field).

mod groups;
mod presets;
mod toml_file;

pub use groups::CapacityLevels;
pub use groups::{
    CacheOptions, CompactionOptions, MemtableOptions, PipelineOptions, Placement, PlacementOptions,
    TableOptions, ValueOptions, ValueSeparation, ValuesMode, WalMode, WalOptions,
};
pub use groups::{HotAdmission, HotEviction, HotTier, HotTierOptions, MscPolicy};
pub use presets::Preset;
pub use toml_file::parse_size;

use crate::env::{Fs, PosixFs};
use crate::error::{Error, Result};
use crate::placement::auto::AutoPlaceConfig;
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
/// Largest encoded write batch any database accepts: 512 MiB. A database may accept less:
/// see [`Options::max_batch_bytes`].
pub const MAX_BATCH_BYTES: usize = 512 << 20;

/// One storage tier: a directory on one device, with a byte budget.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TierConfig {
    /// Short name used in stats, errors and the MANIFEST ("fast", "capacity", ...).
    pub name: String,
    /// Directory of the tier (created if missing when the DB is created).
    pub path: PathBuf,
    /// Budget in bytes for files placed on this tier; `u64::MAX` means unlimited. At least a
    /// table (the smaller of `target_file_size` and `write_buffer_size`); on tier 0 the WAL
    /// reserve and two tables.
    #[serde(default = "unlimited", deserialize_with = "toml_file::de_size")]
    pub capacity: u64,
    /// Read this tier's tables with `O_DIRECT`, through the block cache only (SpanDB's kernel
    /// bypass); buffered where the file system refuses it. Default false: the OS page cache
    /// helps when the block cache is small.
    #[serde(default)]
    pub direct_reads: bool,
    /// Where the tier's tables live: files of its directory (the default), or extents in the
    /// zones of an emulated zoned device kept in that directory (`tables = "zones"`; see
    /// `docs/zonefs.md`). Not on tier 0, whose WAL and MANIFEST must stay files.
    #[serde(default)]
    pub tables: TierTables,
    /// With `tables = "zones"`: bytes of each zone. Default 64 MiB; a multiple of 4 KiB.
    #[serde(default = "default_zone_size", deserialize_with = "toml_file::de_size")]
    pub zone_size: u64,
    /// With `tables = "zones"`: zones of the device, two of them for its metadata journal.
    /// Default 64; at least 4, at most 1048576.
    #[serde(default = "default_zones")]
    pub zones: u32,
    /// What the tier's directory is: a block device's file system (`"block"`, the default) or
    /// a DAX or tmpfs mount whose files are memory-mapped (`"pm"`: writes are copies into the
    /// mapping, a sync is `msync` of the written range; see `docs/pm-tier.md`).
    #[serde(default)]
    pub kind: TierKind,
}

/// The kind of device a tier's directory is on, which decides how its files are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierKind {
    /// A file system on a block device: `write(2)` and `fdatasync(2)`.
    #[default]
    Block,
    /// Persistent memory (a DAX mount) or shared memory (tmpfs): files are memory-mapped.
    Pm,
}

/// Where a tier keeps its tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TierTables {
    /// Files of the tier's directory.
    #[default]
    Files,
    /// Extents in the zones of an emulated zoned device in the tier's directory.
    Zones,
}

fn unlimited() -> u64 {
    u64::MAX
}

fn default_zone_size() -> u64 {
    64 << 20
}

fn default_zones() -> u32 {
    64
}

impl TierConfig {
    /// A tier with an unlimited budget.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        TierConfig {
            name: name.into(),
            path: path.into(),
            capacity: u64::MAX,
            direct_reads: false,
            tables: TierTables::Files,
            zone_size: default_zone_size(),
            zones: default_zones(),
            kind: TierKind::Block,
        }
    }

    /// Sets the tier's kind (see [`TierConfig::kind`]).
    pub fn with_kind(mut self, kind: TierKind) -> Self {
        self.kind = kind;
        self
    }

    /// Keeps this tier's tables in `zones` zones of `zone_size` bytes of an emulated zoned
    /// device (see [`TierConfig::tables`]).
    pub fn with_zoned_tables(mut self, zone_size: u64, zones: u32) -> Self {
        self.tables = TierTables::Zones;
        self.zone_size = zone_size;
        self.zones = zones;
        self
    }

    /// The zoned device's geometry, for a tier with `tables = "zones"`.
    pub(crate) fn zone_geometry(&self) -> Option<crate::zoned::Geometry> {
        (self.tables == TierTables::Zones)
            .then(|| crate::zoned::Geometry::new(self.zone_size, self.zones))
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

/// Options a database is opened with. Build with [`Options::builder`], or load from TOML.
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Options {
    /// Tiers, fastest first. Tier 0 holds the WAL, MANIFEST, CURRENT and LOCK. At least one.
    /// In TOML, one `[[tier]]` table each.
    #[serde(rename = "tier")]
    pub tiers: Vec<TierConfig>,
    /// Create the database if it does not exist. Default true.
    pub create_if_missing: bool,
    /// Fail with `AlreadyExists` if the database exists. Default false.
    pub error_if_exists: bool,
    /// Open without writing anything: the WAL is replayed into memory, no file is created,
    /// changed or deleted, and writes, `flush` and `compact_range` fail. Default false.
    pub read_only: bool,
    /// Memtables (`[memtable]`).
    pub memtable: MemtableOptions,
    /// The LSM tree's shape and compactions (`[compaction]`).
    pub compaction: CompactionOptions,
    /// Table files (`[table]`).
    pub table: TableOptions,
    /// The block cache and table reads (`[cache]`).
    pub cache: CacheOptions,
    /// The write-ahead log (`[wal]`).
    pub wal: WalOptions,
    /// Placement of tables on tiers (`[placement]`).
    pub placement: PlacementOptions,
    /// The asynchronous request pipeline (`[pipeline]`).
    pub pipeline: PipelineOptions,
    /// Where values are stored (`[values]`).
    pub values: ValueOptions,
    /// The file system all I/O goes through. Default: the POSIX one. Not in TOML.
    #[serde(skip)]
    pub fs: Arc<dyn Fs>,
    /// The hot store on the fast tier (`[hot_tier]`; off by default).
    pub hot_tier: HotTierOptions,
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("tiers", &self.tiers)
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("read_only", &self.read_only)
            .field("memtable", &self.memtable)
            .field("compaction", &self.compaction)
            .field("table", &self.table)
            .field("cache", &self.cache)
            .field("wal", &self.wal.mode)
            .field("placement", &self.placement.mode)
            .field("pipeline", &self.pipeline)
            .field("hot_tier", &self.hot_tier.mode)
            .field("values", &self.values)
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
            memtable: MemtableOptions::default(),
            compaction: CompactionOptions::default(),
            table: TableOptions::default(),
            cache: CacheOptions::default(),
            wal: WalOptions::default(),
            placement: PlacementOptions::default(),
            pipeline: PipelineOptions::default(),
            values: ValueOptions::default(),
            fs: Arc::new(PosixFs::new()),
            hot_tier: HotTierOptions::default(),
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
        // Each option's own range first: the tier checks derive sizes from them.
        groups::validate_groups(self)?;
        self.validate_tiers()
    }

    /// The automatic placement controller's configuration for these options.
    pub fn auto_place_config(&self) -> AutoPlaceConfig {
        self.placement.auto_config(self.compaction.num_levels)
    }

    fn validate_tiers(&self) -> Result<()> {
        if self.tiers.is_empty() {
            return Err(Error::invalid(
                "option tiers is empty: give at least one tier (name and directory)",
            ));
        }
        check_range("tiers (count)", self.tiers.len(), 1, 16)?;
        let table = self
            .compaction
            .target_file_size
            .min(self.memtable.write_buffer_size as u64);
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
            // NB: a table placed on a later tier never moves up, so one whose budget holds
            // no table fails every flush or compaction placed there (tier 0 is checked below).
            if i > 0 && t.capacity < table {
                return Err(Error::invalid(format!(
                    "option tiers[{i}].capacity = {} is too small: it must hold a table \
                     ({table} bytes; see target_file_size and write_buffer_size)",
                    t.capacity
                )));
            }
            self.validate_zoned_tables(i, t)?;
            if t.kind == TierKind::Pm && t.tables == TierTables::Zones {
                return Err(Error::invalid(format!(
                    "option tiers[{i}] (tier '{}'): kind = \"pm\" and tables = \"zones\" \
                     exclude each other: a pm tier's files are mapped, not zone extents",
                    t.name
                )));
            }
        }
        let reserve = self.wal_reserve();
        let tables = 2 * table;
        let fast = self.tiers[0].capacity;
        // NB: an unlimited tier 0 is checked too: a reserve near `u64::MAX` leaves its tables
        // no room at all.
        if fast.saturating_sub(reserve) < tables {
            return Err(Error::invalid(format!(
                "option tiers[0].capacity = {fast} is too small: it must hold the WAL reserve \
                 ({reserve} bytes; see fast_tier_wal_reserve, write_buffer_size and \
                 max_immutable_memtables) plus two tables ({tables} bytes)"
            )));
        }
        if let Some(flush) = self.placement.fast_tier_flush_reserve {
            if fast.saturating_sub(reserve).saturating_sub(flush) < tables {
                return Err(Error::invalid(format!(
                    "option fast_tier_flush_reserve = {flush} is too large: tiers[0].capacity = \
                     {fast} must hold the WAL reserve ({reserve} bytes), the flush reserve and \
                     two tables ({tables} bytes)"
                )));
            }
        }
        Ok(())
    }

    /// Checks a tier's `tables = "zones"` settings.
    fn validate_zoned_tables(&self, i: usize, t: &TierConfig) -> Result<()> {
        let Some(g) = t.zone_geometry() else {
            return Ok(());
        };
        if i == 0 {
            return Err(Error::invalid(
                "option tiers[0].tables = \"zones\": tier 0 holds the WAL, MANIFEST, CURRENT \
                 and LOCK, which must stay files; put a later tier's tables on zones",
            ));
        }
        crate::zonefs::validate_geometry(&g, &t.path.join(crate::zonefs::DEVICE_FILE)).map_err(
            |e| {
                Error::invalid(format!(
                    "option tiers[{i}] (tier '{}') zone_size = {}, zones = {}: {e}",
                    t.name, t.zone_size, t.zones
                ))
            },
        )?;
        if t.capacity != u64::MAX && t.capacity > crate::zonefs::data_capacity(&g) {
            return Err(Error::invalid(format!(
                "option tiers[{i}].capacity = {} is more than the zoned device holds ({} bytes \
                 in {} data zones); leave it unset to use the whole device",
                t.capacity,
                crate::zonefs::data_capacity(&g),
                g.zones - 2
            )));
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
        self.wal.fast_tier_reserve.unwrap_or_else(|| {
            // Saturating: options built field by field reach here before `validate` has
            // range-checked them.
            let wals = (self.memtable.max_immutable_memtables as u64).saturating_add(2);
            let per_wal = (self.memtable.write_buffer_size as u64)
                .saturating_add(self.wal_preallocation_step());
            let logs = match self.wal.mode {
                WalMode::Group | WalMode::Append => wals.saturating_mul(per_wal),
                WalMode::Zoned => self.wal.zone_size.saturating_mul(u64::from(self.wal.zones)),
                WalMode::Parallel => self.wal_area_bytes(),
            };
            logs.saturating_add(2 * self.manifest_roll_bytes())
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
        self.placement.fast_tier_flush_reserve.unwrap_or_else(|| {
            let memtables = (self.compaction.l0_compaction_trigger
                + self.memtable.max_immutable_memtables
                + 1) as u64;
            let budget = self
                .tiers
                .first()
                .map_or(u64::MAX, |t| t.capacity.saturating_sub(self.wal_reserve()));
            memtables
                .saturating_mul(self.memtable.write_buffer_size as u64)
                .min(budget / 4)
        })
    }

    /// Bytes of one parallel-WAL page group (whole 4 KiB pages).
    pub fn wal_group_bytes(&self) -> u64 {
        let bytes = self
            .wal
            .group_bytes
            .unwrap_or((self.memtable.write_buffer_size as u64).saturating_mul(2));
        bytes.div_ceil(4096).saturating_mul(4096)
    }

    /// The largest encoded batch this database accepts: [`MAX_BATCH_BYTES`], or what one
    /// parallel-WAL page group holds (`wal.group_bytes`, by default twice
    /// `memtable.write_buffer_size`) where that is less, in every WAL mode, so that changing
    /// between them never changes which batches a database accepts. `wal = "zoned"` splits a
    /// batch larger than one zone append over several; there a batch is also at most one
    /// log's share of the device's spare zones (`wal.zones`, `wal.zone_size`), so that it
    /// never needs more zones than its log may take.
    pub fn max_batch_bytes(&self) -> usize {
        let group_pages = self.wal_group_bytes() / 4096;
        let limit = crate::wal::parallel::area::largest_payload(group_pages).min(MAX_BATCH_BYTES);
        match self.wal.mode {
            WalMode::Zoned => limit.min(crate::wal::append::zones::largest_batch(
                self.wal.zone_size,
                self.wal.zones,
                self.memtable.max_immutable_memtables,
            )),
            _ => limit,
        }
    }

    /// Page groups in the parallel-WAL area: the active memtable's, one per immutable
    /// memtable, and one spare so a switch never waits for a flush to release one.
    pub fn wal_groups(&self) -> u64 {
        (self.memtable.max_immutable_memtables as u64).saturating_add(2)
    }

    /// Size of the parallel-WAL area file: two metadata pages and the groups.
    pub fn wal_area_bytes(&self) -> u64 {
        self.wal_groups()
            .saturating_mul(self.wal_group_bytes())
            .saturating_add(2 * 4096)
    }

    /// WAL disk space is reserved this many bytes at a time (`fallocate`).
    pub fn wal_preallocation_step(&self) -> u64 {
        (self.memtable.write_buffer_size as u64 / 8).clamp(64 << 10, 4 << 20)
    }

    /// A MANIFEST that reaches this size is replaced by a fresh, compact one.
    pub fn manifest_roll_bytes(&self) -> u64 {
        (self.memtable.write_buffer_size as u64).clamp(64 << 10, 64 << 20)
    }

    /// Target total bytes of `level` (L1 and deeper).
    pub fn level_target_bytes(&self, level: usize) -> u64 {
        let mut target = self.compaction.max_bytes_for_level_base;
        for _ in 1..level {
            target = target.saturating_mul(self.compaction.level_size_multiplier);
        }
        target
    }

    /// Loads options from a TOML file (see [`Options::from_toml_str`]).
    pub fn from_toml_file(path: &Path) -> Result<Options> {
        let bytes = crate::env::read_file(&PosixFs::new(), path)?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Error::invalid(format!("config file {} is not UTF-8", path.display())))?;
        Self::from_toml_str(&text)
            .map_err(|e| Error::invalid(format!("config file {}: {}", path.display(), e.detail())))
    }

    /// Moves the flat option names of earlier files (`write_buffer_size = ...`,
    /// `wal = "parallel"`) in a parsed TOML table into their groups' tables, as
    /// [`Options::from_toml_str`] does before reading them: afterwards every group option is
    /// at `table[group][field]`, for a program that adds its own defaults to a file's table.
    /// Giving an option both ways is an error naming it.
    pub fn normalize_toml(table: &mut toml::Table) -> Result<()> {
        toml_file::move_flat_keys(table)
    }

    /// Parses options from TOML text: the top-level fields of [`Options`], one table per
    /// option group (`[memtable]`, `[compaction]`, `[table]`, `[cache]`, `[wal]`,
    /// `[placement]`, `[pipeline]`) whose keys are the group's field names, and tiers as
    /// `[[tier]]` tables with `name`, `path` and optional `capacity` and `direct_reads`. Sizes
    /// are integers or strings with a unit (`"10GiB"`). The flat option names of earlier files
    /// (`write_buffer_size = ...`, `wal = "parallel"`) are accepted too. Unknown keys are an
    /// error.
    pub fn from_toml_str(text: &str) -> Result<Options> {
        let opts = toml_file::parse(text)?;
        opts.validate()?;
        Ok(opts)
    }
}

/// Declares every option set by name: the builder's setter and the name's place in
/// [`OPTION_NAMES`] come from one line each, `name: Type => group.field` (`=> Some group.field`
/// for an optional field the setter fills).
macro_rules! options_by_name {
    ($($name:ident: $ty:ty => $($wrap:ident)? @ $($path:ident).+;)*) => {
        /// Every option settable by name: `(name, group, field)`, where the name is the
        /// builder's setter, the key of earlier flat TOML files and the name error messages
        /// use, and `group.field` is where it lives in [`Options`] (group `""`: top level).
        pub const OPTION_NAMES: &[(&str, &str, &str)] = &[
            $(option_place!(stringify!($name); $($path).+),)*
        ];

        impl OptionsBuilder {
            $(
                #[doc = concat!("Sets option `", stringify!($name), "`: see [`Options::",
                    stringify!($($path).+), "`](Options).")]
                pub fn $name(mut self, v: $ty) -> Self {
                    self.opts.$($path).+ = $($wrap)?(v);
                    self
                }
            )*
        }
    };
}

/// `(name, group, field)` for `group.field`, or `(name, "", field)` for a top-level field.
macro_rules! option_place {
    ($name:expr; $field:ident) => {
        ($name, "", stringify!($field))
    };
    ($name:expr; $group:ident . $field:ident) => {
        ($name, stringify!($group), stringify!($field))
    };
}

options_by_name! {
    create_if_missing: bool => @ create_if_missing;
    error_if_exists: bool => @ error_if_exists;
    read_only: bool => @ read_only;
    write_buffer_size: usize => @ memtable.write_buffer_size;
    max_immutable_memtables: usize => @ memtable.max_immutable_memtables;
    memtable_key_filter: bool => @ memtable.key_filter;
    num_levels: usize => @ compaction.num_levels;
    l0_compaction_trigger: usize => @ compaction.l0_compaction_trigger;
    l0_slowdown_trigger: usize => @ compaction.l0_slowdown_trigger;
    l0_stop_trigger: usize => @ compaction.l0_stop_trigger;
    delayed_write_rate: u64 => @ compaction.delayed_write_rate;
    max_bytes_for_level_base: u64 => @ compaction.max_bytes_for_level_base;
    level_size_multiplier: u64 => @ compaction.level_size_multiplier;
    target_file_size: u64 => @ compaction.target_file_size;
    bytes_per_sync: u64 => @ compaction.bytes_per_sync;
    background_threads: usize => @ compaction.background_threads;
    auto_resume_ms: u64 => @ compaction.auto_resume_ms;
    block_size: usize => @ table.block_size;
    block_restart_interval: usize => @ table.block_restart_interval;
    bloom_bits_per_key: u32 => @ table.bloom_bits_per_key;
    compression: Compression => @ table.compression;
    block_cache_bytes: usize => @ cache.block_cache_bytes;
    read_io_uring: bool => @ cache.read_io_uring;
    wal: WalMode => @ wal.mode;
    wal_recovery_mode: RecoveryMode => @ wal.recovery_mode;
    fast_tier_wal_reserve: u64 => Some @ wal.fast_tier_reserve;
    wal_loggers: usize => @ wal.loggers;
    wal_inflight: usize => @ wal.inflight;
    wal_group_bytes: u64 => Some @ wal.group_bytes;
    wal_io_uring: bool => @ wal.io_uring;
    placement: Placement => @ placement.mode;
    levels_on_fast: usize => @ placement.levels_on_fast;
    fast_tier_flush_reserve: u64 => Some @ placement.fast_tier_flush_reserve;
    fast_tier_bandwidth: u64 => Some @ placement.fast_tier_bandwidth;
    auto_bw_low: f64 => @ placement.auto_bw_low;
    auto_bw_high: f64 => @ placement.auto_bw_high;
    auto_space_high: f64 => @ placement.auto_space_high;
    auto_space_target: f64 => @ placement.auto_space_target;
    auto_migration_busy_rate: u64 => @ placement.auto_migration_busy_rate;
    auto_replicas: bool => @ placement.auto_replicas;
    capacity_levels: CapacityLevels => @ placement.capacity_levels;
    pin_capacity_index: bool => @ cache.pin_capacity_index;
    pipeline_workers: usize => @ pipeline.workers;
    max_pending_requests: usize => @ pipeline.max_pending_requests;
    hot_tier: HotTier => @ hot_tier.mode;
    hot_budget: u64 => @ hot_tier.budget;
    hot_tracker_share: f64 => @ hot_tier.tracker_share;
    hot_pinned_share: f64 => @ hot_tier.pinned_share;
    msc_policy: MscPolicy => @ hot_tier.msc_policy;
    hot_eviction: HotEviction => @ hot_tier.eviction;
    hot_admission: HotAdmission => @ hot_tier.admission;
    hot_demote_into_bottom: bool => @ hot_tier.demote_into_bottom;
    hot_promotion_epoch_ops: u64 => @ hot_tier.promotion_epoch_ops;
    hot_promotion_cooldown_ops: u64 => @ hot_tier.promotion_cooldown_ops;
    hot_promotion_min_gain: f64 => @ hot_tier.promotion_min_gain;
    hot_partitions: usize => @ hot_tier.partitions;
    wal_zone_size: u64 => @ wal.zone_size;
    wal_zones: u32 => @ wal.zones;
    wal_zone_power_loss_protection: bool => @ wal.zone_power_loss_protection;
    wal_zoned_leader: bool => @ wal.zoned_leader;
    wal_zoned_append: bool => @ wal.zoned_append;
    wal_reserved_zones: u32 => @ wal.reserved_zones;
    wal_concurrent_memtable_writes: bool => @ wal.concurrent_memtable_writes;
    wal_concurrent_memtable_min_ops: usize => @ wal.concurrent_memtable_min_ops;
    values: ValuesMode => @ values.mode;
    split_threshold: u64 => @ values.split_threshold;
    vlog_file_size: u64 => @ values.file_size;
    vlog_gc_threshold: f64 => @ values.gc_threshold;
    vlog_gc_round_bytes: u64 => @ values.gc_round_bytes;
    vlog_separation: ValueSeparation => @ values.separation;
}

/// Builds [`Options`]; `build` validates.
pub struct OptionsBuilder {
    opts: Options,
}

impl OptionsBuilder {
    /// Adds a tier (call in order, fastest first).
    pub fn tier(mut self, tier: TierConfig) -> Self {
        self.opts.tiers.push(tier);
        self
    }

    /// Sets the file system all I/O goes through (see [`Options::fs`]).
    pub fn fs(mut self, fs: Arc<dyn Fs>) -> Self {
        self.opts.fs = fs;
        self
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
    fn auto_resume_is_off_by_default_read_from_toml_and_bounded() {
        assert_eq!(two_tiers().build().unwrap().compaction.auto_resume_ms, 0);
        let o = Options::from_toml_str(
            "[compaction]\nauto_resume_ms = 250\n[[tier]]\nname = \"fast\"\npath = \"/mnt/fast\"\n",
        )
        .unwrap();
        assert_eq!(o.compaction.auto_resume_ms, 250);
        let err = two_tiers()
            .auto_resume_ms(3_600_001)
            .build()
            .unwrap_err()
            .to_string();
        assert!(err.contains("auto_resume_ms"), "{err}");
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
        let huge = parse_size("99999999999999999999 MiB").unwrap_err();
        assert!(huge.to_string().contains("64-bit"), "{huge}");
    }

    #[test]
    fn a_huge_option_is_refused_by_its_range_check_not_by_overflow() {
        let toml = "[[tier]]\nname = \"fast\"\npath = \"/tmp/tierkv-opts-huge\"\n\
                    [memtable]\nwrite_buffer_size = 18446744073709551615\n\
                    [wal]\nmode = \"parallel\"\n";
        let err = Options::from_toml_str(toml).unwrap_err();
        assert!(err.to_string().contains("write_buffer_size"), "{err}");
    }

    #[test]
    fn the_append_wal_is_chosen_by_toml_and_builder() {
        let tier = "[[tier]]\nname = \"fast\"\npath = \"/tmp/tierkv-opts-append\"\n";
        let opts = Options::from_toml_str(&format!("[wal]\nmode = \"append\"\n{tier}")).unwrap();
        assert_eq!(opts.wal.mode, WalMode::Append);
        let flat = Options::from_toml_str(&format!("wal = \"append\"\n{tier}")).unwrap();
        assert_eq!(flat.wal.mode, WalMode::Append);
        let built = Options::builder()
            .tier(TierConfig::new("fast", "/tmp/tierkv-opts-append"))
            .wal(WalMode::Append)
            .build()
            .unwrap();
        assert_eq!(built.wal.mode, WalMode::Append);
        assert_eq!(built.wal_reserve(), {
            let group = Options {
                wal: WalOptions {
                    mode: WalMode::Group,
                    ..built.wal.clone()
                },
                ..built.clone()
            };
            group.wal_reserve()
        });
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
        assert_eq!(opts.placement.levels_on_fast, 1);
        assert_eq!(opts.memtable.write_buffer_size, 8 << 20);
        assert_eq!(opts.table.compression, Compression::Zstd);
        assert_eq!(opts.tiers[0].capacity, 10 << 30);
        assert_eq!(opts.tiers[1].capacity, u64::MAX);
        assert!(opts.tiers[0].direct_reads && !opts.tiers[1].direct_reads);
        assert_eq!(opts.wal.recovery_mode, RecoveryMode::AbsoluteConsistency);
        assert_eq!(opts.wal.mode, WalMode::Parallel);
        assert_eq!(opts.placement.mode, Placement::Auto);
        assert_eq!(opts.placement.fast_tier_bandwidth, Some(2 << 30));
        assert_eq!(opts.flush_reserve(), 96 << 20);
        assert_eq!(opts.placement.auto_migration_busy_rate, 32 << 20);
        assert!(!opts.placement.auto_replicas);
        assert_eq!(opts.compaction.bytes_per_sync, 512 << 10);
        assert_eq!(Options::default().compaction.bytes_per_sync, 0);
        let ctl = opts.auto_place_config();
        assert_eq!(
            (ctl.bw_low, ctl.bw_high, ctl.space_high, ctl.space_target),
            (0.3, 0.7, 0.95, 0.85)
        );
        assert_eq!(ctl.num_levels, opts.compaction.num_levels);
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
    fn toml_groups_read_like_the_flat_keys() {
        let grouped = Options::from_toml_str(
            r#"
            [memtable]
            write_buffer_size = "8MiB"
            [wal]
            mode = "parallel"
            recovery_mode = "point-in-time"
            loggers = 2
            [placement]
            mode = "auto"
            levels_on_fast = 1
            fast_tier_bandwidth = "2GiB"
            [table]
            compression = "zstd"
            [pipeline]
            workers = 3
            [[tier]]
            name = "fast"
            path = "/mnt/fast"
            "#,
        )
        .unwrap();
        let flat = Options::from_toml_str(
            r#"
            write_buffer_size = "8MiB"
            wal = "parallel"
            wal_recovery_mode = "point-in-time"
            wal_loggers = 2
            placement = "auto"
            levels_on_fast = 1
            fast_tier_bandwidth = "2GiB"
            compression = "zstd"
            pipeline_workers = 3
            [[tier]]
            name = "fast"
            path = "/mnt/fast"
            "#,
        )
        .unwrap();
        assert_eq!(format!("{grouped:?}"), format!("{flat:?}"));
        assert_eq!(grouped.wal.mode, WalMode::Parallel);
        assert_eq!(grouped.wal.loggers, 2);
        assert_eq!(grouped.placement.mode, Placement::Auto);
        assert_eq!(grouped.placement.fast_tier_bandwidth, Some(2 << 30));
        assert_eq!(grouped.pipeline.workers, 3);
        assert_eq!(
            grouped.memtable.max_immutable_memtables, 2,
            "defaults fill a group"
        );
    }

    #[test]
    fn toml_option_given_twice_or_unknown_in_a_group_is_an_error() {
        let tier = "[[tier]]\nname='f'\npath='/a'\n";
        let err = Options::from_toml_str(&format!("wal_loggers = 2\n[wal]\nloggers = 3\n{tier}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("wal_loggers is given twice"), "{err}");
        let err = Options::from_toml_str(&format!("[wal]\nlogers = 3\n{tier}"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("logers"), "{err}");
    }

    #[test]
    fn every_option_name_sets_its_field_through_the_builder() {
        // The names are unique, and each group is a field of `Options`.
        let mut names: Vec<&str> = OPTION_NAMES.iter().map(|n| n.0).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), OPTION_NAMES.len());
        let groups = [
            "",
            "memtable",
            "compaction",
            "table",
            "cache",
            "wal",
            "placement",
            "pipeline",
            "hot_tier",
            "values",
        ];
        assert!(OPTION_NAMES.iter().all(|(_, g, _)| groups.contains(g)));
        let o = Options::builder()
            .wal_loggers(5)
            .fast_tier_bandwidth(7)
            .opts;
        assert_eq!(
            (o.wal.loggers, o.placement.fast_tier_bandwidth),
            (5, Some(7))
        );
    }

    #[test]
    fn hot_eviction_from_toml_builder_and_name() {
        let tier = "[[tier]]\nname='f'\npath='/a'\n";
        let grouped =
            Options::from_toml_str(&format!("[hot_tier]\neviction = \"weight\"\n{tier}")).unwrap();
        assert_eq!(grouped.hot_tier.eviction, HotEviction::Weight);
        let flat = Options::from_toml_str(&format!("hot_eviction = \"weight\"\n{tier}")).unwrap();
        assert_eq!(flat.hot_tier.eviction, HotEviction::Weight);
        let default = Options::from_toml_str(tier).unwrap();
        assert_eq!(default.hot_tier.eviction, HotEviction::Msc);
        let err = Options::from_toml_str(&format!("hot_eviction = \"lru\"\n{tier}")).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("lru"), "{err}");
        let built = Options::builder().hot_eviction(HotEviction::Weight).opts;
        assert_eq!(built.hot_tier.eviction, HotEviction::Weight);
        assert_eq!("msc".parse::<HotEviction>().unwrap(), HotEviction::Msc);
        let err = "lru".parse::<HotEviction>().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("hot_eviction") && m.contains("weight")),
            "{err}"
        );
    }

    #[test]
    fn vlog_separation_from_toml_builder_and_name() {
        let tier = "[[tier]]\nname='f'\npath='/a'\n";
        let grouped =
            Options::from_toml_str(&format!("[values]\nseparation = \"on-flush\"\n{tier}"))
                .unwrap();
        assert_eq!(grouped.values.separation, ValueSeparation::OnFlush);
        let flat =
            Options::from_toml_str(&format!("vlog_separation = \"on-flush\"\n{tier}")).unwrap();
        assert_eq!(flat.values.separation, ValueSeparation::OnFlush);
        let default = Options::from_toml_str(tier).unwrap();
        assert_eq!(default.values.separation, ValueSeparation::OnWrite);
        let err =
            Options::from_toml_str(&format!("vlog_separation = \"later\"\n{tier}")).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("later"), "{err}");
        let built = Options::builder()
            .vlog_separation(ValueSeparation::OnFlush)
            .opts;
        assert_eq!(built.values.separation, ValueSeparation::OnFlush);
        for choice in ValueSeparation::ALL {
            assert_eq!(choice.name().parse::<ValueSeparation>().unwrap(), choice);
        }
        let err = "later".parse::<ValueSeparation>().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("vlog_separation") && m.contains("on-flush")),
            "{err}"
        );
    }

    #[test]
    fn hot_admission_from_toml_builder_and_name() {
        let tier = "[[tier]]\nname='f'\npath='/a'\n";
        let grouped =
            Options::from_toml_str(&format!("[hot_tier]\nadmission = \"make-room\"\n{tier}"))
                .unwrap();
        assert_eq!(grouped.hot_tier.admission, HotAdmission::MakeRoom);
        let flat =
            Options::from_toml_str(&format!("hot_admission = \"make-room\"\n{tier}")).unwrap();
        assert_eq!(flat.hot_tier.admission, HotAdmission::MakeRoom);
        let default = Options::from_toml_str(tier).unwrap();
        assert_eq!(default.hot_tier.admission, HotAdmission::WhenFree);
        let err =
            Options::from_toml_str(&format!("hot_admission = \"always\"\n{tier}")).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        assert!(err.to_string().contains("always"), "{err}");
        let built = Options::builder()
            .hot_admission(HotAdmission::MakeRoom)
            .opts;
        assert_eq!(built.hot_tier.admission, HotAdmission::MakeRoom);
        for rule in HotAdmission::ALL {
            assert_eq!(rule.name().parse::<HotAdmission>().unwrap(), rule);
        }
        let err = "always".parse::<HotAdmission>().unwrap_err();
        assert!(
            matches!(&err, Error::InvalidArgument(m) if m.contains("hot_admission") && m.contains("when-free")),
            "{err}"
        );
    }

    #[test]
    fn hot_partitions_from_toml_and_builder_in_range() {
        let tier = "[[tier]]\nname='f'\npath='/a'\n";
        let grouped =
            Options::from_toml_str(&format!("[hot_tier]\npartitions = 4\n{tier}")).unwrap();
        assert_eq!(grouped.hot_tier.partitions, 4);
        let flat = Options::from_toml_str(&format!("hot_partitions = 8\n{tier}")).unwrap();
        assert_eq!(flat.hot_tier.partitions, 8);
        assert_eq!(Options::from_toml_str(tier).unwrap().hot_tier.partitions, 1);
        for bad in [0, 65] {
            let err = Options::builder()
                .tier(TierConfig::new("f", "/a"))
                .hot_partitions(bad)
                .build()
                .unwrap_err();
            assert!(
                matches!(&err, Error::InvalidArgument(m) if m.contains("hot_partitions") && m.contains("1..=64")),
                "{err}"
            );
        }
    }

    #[test]
    fn toml_unknown_key_is_an_error() {
        let err = Options::from_toml_str("levels_on_fats = 1\n[[tier]]\nname='f'\npath='/a'\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains("levels_on_fats"), "{err}");
    }
}
