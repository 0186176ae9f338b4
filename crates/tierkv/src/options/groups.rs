//! The option groups: one struct per concern, each field documented once with its default
//! and its accepted range, each group with its defaults (`Default`), its TOML table (serde,
//! the field names as keys) and its checks (`validate`).
//!
//! A field's option name, in error messages and in the builder, is its name here except where
//! [`super::OPTION_NAMES`] gives the group's older flat name (`wal.loggers` is `wal_loggers`).

use super::toml_file::{de_opt_size, de_size, de_size_usize};
use super::{check_below, check_range};
use crate::error::{Error, Result};
use crate::placement::auto::{self, AutoPlaceConfig};
use crate::sst::Compression;
use crate::wal::log::RecoveryMode;
use serde::Deserialize;

/// Memtables: how much is buffered in memory before it is flushed to a table.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MemtableOptions {
    /// Bytes a memtable holds before it is switched to immutable, its key filter included.
    /// Default 64 MiB. Range 64 KiB..=4 GiB.
    #[serde(deserialize_with = "de_size_usize")]
    pub write_buffer_size: usize,
    /// Immutable memtables waiting for flush before writes stall. Default 2. Range 1..=16.
    pub max_immutable_memtables: usize,
    /// A bloom filter over each memtable's user keys, so a point read skips the memtables
    /// that do not hold its key (most of them, in a read-heavy workload). It takes 1/64 of
    /// `write_buffer_size` per memtable, counted in it (the entries get the rest): at least
    /// 9 bits a key, about 23 at 100-byte values (under 0.3% false positives). Default true.
    pub key_filter: bool,
}

impl Default for MemtableOptions {
    fn default() -> Self {
        MemtableOptions {
            write_buffer_size: 64 << 20,
            max_immutable_memtables: 2,
            key_filter: true,
        }
    }
}

impl MemtableOptions {
    /// Bytes of each memtable's key filter (0: none).
    pub fn key_filter_bytes(&self) -> usize {
        if self.key_filter {
            self.write_buffer_size / 64
        } else {
            0
        }
    }

    fn validate(&self) -> Result<()> {
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
        )
    }
}

/// The LSM tree's shape and its compactions: level sizes, L0 triggers, background threads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompactionOptions {
    /// Number of LSM levels. Default 7. Range 2..=12.
    pub num_levels: usize,
    /// L0 file count that triggers an L0 compaction. Default 4. Range 1..=1000.
    pub l0_compaction_trigger: usize,
    /// L0 file count at which each write is delayed. Default 20. Must be >= the trigger.
    pub l0_slowdown_trigger: usize,
    /// L0 file count at which writes stop until compaction catches up. Default 36. Must be > slowdown.
    pub l0_stop_trigger: usize,
    /// Write rate, in bytes per second, that writes are held to when L0 reaches the slowdown
    /// trigger; the rate then falls while L0 keeps growing and rises back as it shrinks, never
    /// above this. Default 16 MiB/s. Range 1 KiB/s..
    #[serde(deserialize_with = "de_size")]
    pub delayed_write_rate: u64,
    /// Target size of L1. Default 256 MiB. Range 64 KiB..
    #[serde(deserialize_with = "de_size")]
    pub max_bytes_for_level_base: u64,
    /// Each level's target is this many times the previous one. Default 10. Range 2..=100.
    pub level_size_multiplier: u64,
    /// Target size of table files written by compaction. Default 64 MiB. Range 16 KiB..=4 GiB.
    #[serde(deserialize_with = "de_size")]
    pub target_file_size: u64,
    /// While a table (flush, compaction or migration output) is written to a tier after the
    /// first, ask the OS to write back its pages every this many bytes, after the previous
    /// piece's write-back has finished (`sync_file_range`; RocksDB's `bytes_per_sync`). A table
    /// then keeps at most two pieces dirty instead of all of it until its final sync, and that
    /// sync no longer holds a slow device (and the reads queued on it) for a table's worth of
    /// writes. Not a durability setting: tables are synced whole before they are listed. Tier
    /// 0, which holds the WAL, is left to the OS: there the queued write-back delays the WAL's
    /// writes. Default 0, every tier left to the OS: measured, it shortened write stops during
    /// loads but did not make read-mostly runs faster (BENCHMARKS.md, `bytes_per_sync`).
    #[serde(deserialize_with = "de_size")]
    pub bytes_per_sync: u64,
    /// Background threads for flush and compaction; with two or more, one is kept free for
    /// flushes. Default 2. Range 1..=64.
    pub background_threads: usize,
    /// Milliseconds before a background worker retries, by itself, a flush, compaction or
    /// migration that stopped writes for lack of space (what `Db::resume` does when called),
    /// doubling after each retry that fails again, up to 64 times this; 0 (the default) never
    /// retries: only `Db::resume` does. Range 0..=3600000 (an hour). See `docs/errors.md`.
    pub auto_resume_ms: u64,
}

impl Default for CompactionOptions {
    fn default() -> Self {
        CompactionOptions {
            num_levels: 7,
            l0_compaction_trigger: 4,
            l0_slowdown_trigger: 20,
            l0_stop_trigger: 36,
            delayed_write_rate: 16 << 20,
            max_bytes_for_level_base: 256 << 20,
            level_size_multiplier: 10,
            target_file_size: 64 << 20,
            bytes_per_sync: 0,
            background_threads: 2,
            auto_resume_ms: 0,
        }
    }
}

impl CompactionOptions {
    fn validate(&self) -> Result<()> {
        check_range("num_levels", self.num_levels, 2, 12)?;
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
        check_range("background_threads", self.background_threads, 1, 64)?;
        check_range("auto_resume_ms", self.auto_resume_ms, 0, 3_600_000)
    }
}

/// How table files are built: blocks, filters, compression.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TableOptions {
    /// Uncompressed size of a data block. Default 4096. Range 256..=4 MiB.
    #[serde(deserialize_with = "de_size_usize")]
    pub block_size: usize,
    /// Keys between restart points in a block. Default 16. Range 1..=1024.
    pub block_restart_interval: usize,
    /// Bloom filter bits per key; 0 disables filters. Default 10. Range 0..=64.
    pub bloom_bits_per_key: u32,
    /// Block compression. Default LZ4.
    pub compression: Compression,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            block_restart_interval: 16,
            bloom_bits_per_key: 10,
            compression: Compression::Lz4,
        }
    }
}

impl TableOptions {
    pub(crate) fn validate(&self) -> Result<()> {
        check_range("block_size", self.block_size, 256, 4 << 20)?;
        check_range(
            "block_restart_interval",
            self.block_restart_interval,
            1,
            1024,
        )?;
        check_range("bloom_bits_per_key", self.bloom_bits_per_key, 0, 64)
    }
}

/// The block cache, and how table reads are issued.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CacheOptions {
    /// Shared block cache budget in bytes (0 disables the cache). Default 64 MiB.
    #[serde(deserialize_with = "de_size_usize")]
    pub block_cache_bytes: usize,
    /// Table reads that can go together — a multi-get's data blocks, an iterator's next
    /// read-ahead window — go through io_uring when the kernel allows it (else one `pread`
    /// each, in turn). Default true.
    pub read_io_uring: bool,
    /// Open every table off the fast tier as soon as it is listed (at open and after each
    /// flush, compaction or demotion) and keep its reader, whose index and filter stay in
    /// memory, so that a point read never pays a table open (footer, index and filter reads)
    /// on the slower tier: a lookup there costs at most its one data-block read. Default false.
    pub pin_capacity_index: bool,
}

impl Default for CacheOptions {
    fn default() -> Self {
        CacheOptions {
            block_cache_bytes: 64 << 20,
            read_io_uring: true,
            pin_capacity_index: false,
        }
    }
}

/// How the write-ahead log is written and recovered.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WalOptions {
    /// The WAL mode. Default [`WalMode::Group`].
    pub mode: WalMode,
    /// How WAL damage is treated at recovery. Default `TolerateCorruptedTail`.
    pub recovery_mode: RecoveryMode,
    /// Bytes of tier 0 kept free for the WAL and MANIFEST: tables never use them. Default: see
    /// [`super::Options::wal_reserve`]; tier 0's capacity must hold the reserve plus two tables.
    #[serde(deserialize_with = "de_opt_size")]
    pub fast_tier_reserve: Option<u64>,
    /// Parallel WAL: most loggers writing at once; the pipeline's head thread runs 1 to this
    /// many by write intensity. Default 3. Range 1..=8.
    pub loggers: usize,
    /// Parallel WAL: writes each logger keeps in flight. Default 4. Range 1..=64.
    pub inflight: usize,
    /// Parallel WAL: bytes of one memtable's log page group; a memtable is switched when its
    /// group fills. Default `2 * write_buffer_size`. Range 64 KiB..=64 GiB, rounded up to whole
    /// pages.
    #[serde(deserialize_with = "de_opt_size")]
    pub group_bytes: Option<u64>,
    /// Parallel WAL: submit page writes through io_uring on an `O_DIRECT` descriptor when the
    /// kernel and file system allow it (else `pwritev2` from the logger). Default true.
    pub io_uring: bool,
    /// Zoned WAL: bytes of each zone of the emulated zoned device (`WALZONES` on tier 0), a
    /// multiple of 4 KiB. Default 16 MiB.
    #[serde(deserialize_with = "de_size")]
    pub zone_size: u64,
    /// Zoned WAL: zones of the device; at least 3 (one active, two reserved) and enough
    /// beside those for each memtable's log to hold a batch (checked with `zone_size`); at
    /// most 1048576. Default 16.
    pub zones: u32,
    /// Zoned WAL: the device has power-loss protection (completed appends are durable).
    /// Default false.
    pub zone_power_loss_protection: bool,
    /// Zoned WAL ablation: writers hand their records to a group-commit leader, which writes
    /// the queued ones with one device write, instead of each writer appending its own.
    /// Default false (WALTZ).
    pub zoned_leader: bool,
    /// Zoned WAL ablation: records go to the device by zone append (the device picks the
    /// offset); false writes them at the write pointer, which needs `zoned_leader` (one
    /// writer at a time). Default true.
    pub zoned_append: bool,
    /// Zoned WAL: empty zones the zone manager keeps reset ahead of the writers. 0 puts zone
    /// allocation inside the write path: the writer that replaces the active zone finishes it
    /// and resets the next one itself (ZenFS's way). Default 2. Range 0..=8.
    pub reserved_zones: u32,
    /// Group WAL: a group of several batches with at least `concurrent_memtable_min_ops`
    /// operations passes the lead on once it is logged, so the next group is logged and synced
    /// while this one is inserted into the memtable, and its batches are inserted by the
    /// leader, the group's waiting writers and pipeline workers together rather than by the
    /// leader alone (RocksDB's concurrent memtable writes); groups still become visible whole
    /// and in order. Smaller groups are inserted by their leader as with the option off.
    /// Default false: on a 2-core machine it measured no faster; on 16 cores, with 8 pipeline
    /// workers, synced pipelined SETs through tierkv-server ran 2.6x faster, and the server
    /// turns it on where it has 4 cores or more (BENCHMARKS.md).
    pub concurrent_memtable_writes: bool,
    /// Group WAL, with `concurrent_memtable_writes`: the fewest operations a group of several
    /// batches must hold to be inserted in parallel; a smaller group is inserted by its leader,
    /// for whom waking helpers would cost more than the inserts. Default 32. Range 1..=1048576.
    pub concurrent_memtable_min_ops: usize,
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions {
            mode: WalMode::Group,
            recovery_mode: RecoveryMode::default(),
            fast_tier_reserve: None,
            loggers: 3,
            inflight: 4,
            group_bytes: None,
            io_uring: true,
            zone_size: 16 << 20,
            zones: 16,
            zone_power_loss_protection: false,
            zoned_leader: false,
            zoned_append: true,
            reserved_zones: 2,
            concurrent_memtable_writes: false,
            concurrent_memtable_min_ops: 32,
        }
    }
}

impl WalOptions {
    fn validate(&self) -> Result<()> {
        check_range("wal_loggers", self.loggers, 1, 8)?;
        check_range("wal_inflight", self.inflight, 1, 64)?;
        if let Some(bytes) = self.group_bytes {
            check_range("wal_group_bytes", bytes, 64 << 10, 64 << 30)?;
        }
        check_range("wal_reserved_zones", self.reserved_zones, 0, 8)?;
        check_range(
            "wal_concurrent_memtable_min_ops",
            self.concurrent_memtable_min_ops,
            1,
            1 << 20,
        )?;
        if !self.zoned_append && !self.zoned_leader {
            return Err(Error::invalid(
                "wal_zoned_append = false writes at the write pointer, which needs one writer \
                 at a time: set wal_zoned_leader = true",
            ));
        }
        Ok(())
    }
}

/// How the write-ahead log is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WalMode {
    /// One log file per memtable written by a group-commit leader (RocksDB's scheme).
    #[default]
    Group,
    /// A preallocated page area on tier 0 written by several loggers at once (SpanDB's
    /// parallel WAL); see `docs/parallel-wal.md`.
    Parallel,
    /// One preallocated log file per memtable written without a leader: each writer reserves
    /// its bytes with one add on the file's tail and writes and syncs its own record (WALTZ's
    /// write path on a conventional file); see `docs/append-wal.md`.
    Append,
    /// The append WAL on an emulated zoned device: each writer zone-appends its own record to
    /// the active zone; a zone manager thread finishes and recycles zones (WALTZ); see
    /// `docs/append-wal.md`.
    Zoned,
}

/// Where tables go: which levels live on the fast tier, fixed or moved by the fast tier's load.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlacementOptions {
    /// How new tables are placed on tiers. Default [`Placement::Fixed`] (by `levels_on_fast`).
    pub mode: Placement,
    /// Levels L0..L(n-1) are placed on tier 0, deeper levels on the next tiers. 0 is SpanDB's
    /// "PL" (the fast tier holds only the WAL). With `mode = auto`, where the pointer starts.
    /// Default 2. Range 0..=num_levels.
    pub levels_on_fast: usize,
    /// Bytes of tier 0's table budget that only memtable flushes may use, so that L0 stays on
    /// the fast tier when compactions (or placement) have filled the rest. Only with two or
    /// more tiers. Default: see [`super::Options::flush_reserve`]. With [`Placement::Auto`], all
    /// but two memtables of it are lent to replicas while reads flow and writes are quiet
    /// (`placement::reserve`).
    #[serde(deserialize_with = "de_opt_size")]
    pub fast_tier_flush_reserve: Option<u64>,
    /// The fast tier's bandwidth ceiling in bytes/s, for `placement = auto`'s utilisation.
    /// `None`: measured by a short write probe at open when placement is automatic.
    #[serde(deserialize_with = "de_opt_size")]
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
    /// 16 MiB/s; at least 1.
    #[serde(deserialize_with = "de_size")]
    pub auto_migration_busy_rate: u64,
    /// `placement = auto`: keep replicas on the fast tier, in room no table needs, of the
    /// slower tiers' most-read tables. Reads go to the replica; a table that needs the room,
    /// or a write burst taking the flush reserve back, drops replicas at once. Default true.
    pub auto_replicas: bool,
    /// How many sorted runs (levels below L0) the tree keeps from the first level off the fast
    /// tier down: compactions fill levels down to that one and leave deeper levels empty.
    /// `all` (the default: every level to `num_levels`), `auto` (one run while the fast tier
    /// holds at least a tenth of the data, one more for each `level_size_multiplier` times
    /// more; PrismDB's large sorted runs, `placement::runs`) or a count, 1..num_levels.
    pub capacity_levels: CapacityLevels,
}

impl Default for PlacementOptions {
    fn default() -> Self {
        PlacementOptions {
            mode: Placement::Fixed,
            levels_on_fast: 2,
            fast_tier_flush_reserve: None,
            fast_tier_bandwidth: None,
            auto_bw_low: auto::DEFAULT_BW_LOW,
            auto_bw_high: auto::DEFAULT_BW_HIGH,
            auto_space_high: auto::DEFAULT_SPACE_HIGH,
            auto_space_target: auto::DEFAULT_SPACE_TARGET,
            auto_migration_busy_rate: auto::DEFAULT_MIGRATION_BUSY_RATE,
            auto_replicas: true,
            capacity_levels: CapacityLevels::All,
        }
    }
}

impl PlacementOptions {
    /// The controller's thresholds: each in range, and each pair ordered (a low threshold at
    /// or above its high one would leave no band in which the pointer holds still).
    fn validate(&self, num_levels: usize) -> Result<()> {
        check_range("levels_on_fast", self.levels_on_fast, 0, num_levels)?;
        if let CapacityLevels::Fixed(n) = self.capacity_levels {
            check_range("capacity_levels", n, 1, num_levels - 1)?;
        }
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

    /// The automatic placement controller's configuration.
    pub fn auto_config(&self, num_levels: usize) -> AutoPlaceConfig {
        AutoPlaceConfig {
            bw_low: self.auto_bw_low,
            bw_high: self.auto_bw_high,
            space_high: self.auto_space_high,
            space_target: self.auto_space_target,
            ..AutoPlaceConfig::new(num_levels)
        }
    }
}

/// How new tables are placed on the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Placement {
    /// `levels_on_fast` whole levels on the fast tier (SpanDB's PL and LAD-n).
    #[default]
    Fixed,
    /// A pointer over levels, starting at `levels_on_fast`, moved by the fast tier's measured
    /// utilisation and space (SpanDB's automatic placement); see `placement::auto`.
    Auto,
}

/// The asynchronous request pipeline.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PipelineOptions {
    /// Threads serving asynchronous reads and deferred writes. Default 2. Range 1..=64.
    pub workers: usize,
    /// Asynchronous requests admitted but not completed, beyond which `submit_*` returns
    /// `Busy`. Default 4096. Range 1..=1_000_000.
    pub max_pending_requests: usize,
}

impl Default for PipelineOptions {
    fn default() -> Self {
        PipelineOptions {
            workers: 2,
            max_pending_requests: 4096,
        }
    }
}

impl PipelineOptions {
    fn validate(&self) -> Result<()> {
        check_range("pipeline_workers", self.workers, 1, 64)?;
        check_range(
            "max_pending_requests",
            self.max_pending_requests,
            1,
            1_000_000,
        )
    }
}

/// Whether the database keeps a hot store on the fast tier (`docs/hot-tier.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HotTier {
    /// No hot store: flushes write every object to L0.
    #[default]
    Off,
    /// PrismDB's hot store: popular small objects in slab files on tier 0, in front of the LSM.
    Slab,
}

/// How the hot store picks the key range to demote to the LSM (PrismDB's MSC compaction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MscPolicy {
    /// A random candidate range.
    Random,
    /// The candidate ranges in key order, one after another.
    RoundRobin,
    /// The best benefit/cost score over every candidate.
    Precise,
    /// The best score of 8 random candidates.
    #[default]
    Approximate,
}

/// How the hot store makes room once it is full: which objects leave it for the LSM
/// (`docs/hot-tier.md`, "Eviction policies").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum HotEviction {
    /// PrismDB's multi-tiered storage compaction: above 98% of the budget, the coldest,
    /// cheapest key ranges move to the LSM until the store is at 95%.
    #[default]
    Msc,
    /// SplitKV's hotness migration: each object's weight counts its reads and writes; above
    /// 80% of the budget, the objects weighing less than the average move to the LSM and the
    /// average is taken off the weights of those kept.
    Weight,
}

impl HotEviction {
    /// Every policy, in the order they are listed in errors.
    pub const ALL: [HotEviction; 2] = [HotEviction::Msc, HotEviction::Weight];

    /// The policy's name, as TOML and [`HotEviction::from_str`] take it.
    pub fn name(self) -> &'static str {
        match self {
            HotEviction::Msc => "msc",
            HotEviction::Weight => "weight",
        }
    }
}

impl std::str::FromStr for HotEviction {
    type Err = Error;

    /// Parses a policy name; an unknown one is `InvalidArgument` naming the option and the
    /// accepted names.
    fn from_str(s: &str) -> Result<HotEviction> {
        HotEviction::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "hot_eviction = {s:?}: accepted \"msc\" or \"weight\""
                ))
            })
    }
}

/// When a flush takes keys new to the hot store (`docs/hot-tier.md`, "Admission").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HotAdmission {
    /// The flush first demotes enough (MSC-chosen) for the memtable's objects, then takes
    /// every object that fits a slot: the capacity tier is written by demotions only.
    MakeRoom,
    /// The flush takes new keys only while the budget has room and sends the rest to L0; a
    /// demotion runs after the flush once the store passes its high watermark. The default:
    /// measured faster side by side (BENCHMARKS.md, PrismDB), since no flush waits for a
    /// demotion.
    #[default]
    WhenFree,
}

impl HotAdmission {
    /// Every rule, in the order they are listed in errors.
    pub const ALL: [HotAdmission; 2] = [HotAdmission::MakeRoom, HotAdmission::WhenFree];

    /// The rule's name, as TOML and [`HotAdmission::from_str`] take it.
    pub fn name(self) -> &'static str {
        match self {
            HotAdmission::MakeRoom => "make-room",
            HotAdmission::WhenFree => "when-free",
        }
    }
}

impl std::str::FromStr for HotAdmission {
    type Err = Error;

    /// Parses a rule name; an unknown one is `InvalidArgument` naming the option and the
    /// accepted names.
    fn from_str(s: &str) -> Result<HotAdmission> {
        HotAdmission::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "hot_admission = {s:?}: accepted \"make-room\" or \"when-free\""
                ))
            })
    }
}

/// The hot store (PrismDB): a read-aware tier of slab files on the fast tier.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HotTierOptions {
    /// Off or `slab`. Default off.
    pub mode: HotTier,
    /// Bytes of slots the hot store may hold on tier 0; demotion starts above 98% of it and
    /// stops at 95%. Default 1 GiB. Range 64 KiB..=16 TiB.
    #[serde(deserialize_with = "de_size")]
    pub budget: u64,
    /// Keys the popularity tracker follows, as a share of the keys in the database at open.
    /// Default 0.2. Range 0.0..=1.0.
    pub tracker_share: f64,
    /// Share of the hot store's objects the mapper pins (never demoted while others can go).
    /// Default 0.7. Range 0.0..=1.0.
    pub pinned_share: f64,
    /// How the range to demote is chosen. Default approximate.
    pub msc_policy: MscPolicy,
    /// Which objects leave the store once it is full: `msc` (PrismDB) or `weight`
    /// (SplitKV's hotness migration). Default msc.
    pub eviction: HotEviction,
    /// When a flush takes keys new to the store: `make-room` (demote first, then take every
    /// object that fits a slot) or `when-free` (take them while the budget has room, the
    /// rest to L0). Default when-free.
    pub admission: HotAdmission,
    /// Whether a demotion merges the objects whose keys have no version above the capacity
    /// tier's bottom run straight into that run instead of writing them to L0. Default false:
    /// each merge rewrites the bottom tables its objects' range overlaps inside the flush
    /// slot, which measured slower than an L0 table (BENCHMARKS.md, PrismDB).
    pub demote_into_bottom: bool,
    /// Point reads per promotion epoch: while an epoch runs, popular objects read from the
    /// LSM's tables below L0 are copied into the store. Default 1 000 000 (PrismDB's 1M
    /// operations). Range 1..=2^40.
    pub promotion_epoch_ops: u64,
    /// Point reads promotions pause for once an epoch raised the store's share of reads by
    /// less than `promotion_min_gain`. Default 10 000 000. Range 0..=2^40.
    pub promotion_cooldown_ops: u64,
    /// Least rise of the store's share of point reads (0.01: one point in a hundred) an epoch
    /// must bring for the next one to run. Default 0.01. Range 0.0..=1.0.
    pub promotion_min_gain: f64,
    /// Shared-nothing partitions of the store, each key in the one its hash picks, each with
    /// its own slabs, journal, index, tracker, promotions and an equal share of the budget.
    /// Fixed when the store first holds data. Default 1. Range 1..=64.
    pub partitions: usize,
}

impl Default for HotTierOptions {
    fn default() -> Self {
        HotTierOptions {
            mode: HotTier::Off,
            budget: 1 << 30,
            tracker_share: 0.2,
            pinned_share: 0.7,
            msc_policy: MscPolicy::Approximate,
            eviction: HotEviction::Msc,
            admission: HotAdmission::WhenFree,
            demote_into_bottom: false,
            promotion_epoch_ops: 1_000_000,
            promotion_cooldown_ops: 10_000_000,
            promotion_min_gain: 0.01,
            partitions: 1,
        }
    }
}

/// How many sorted runs (levels below L0) the tree keeps below the fast tier
/// (`capacity_levels`). In TOML `"all"`, `"auto"` or a count.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CapacityLevels {
    /// Every level down to `num_levels`, each `level_size_multiplier` times the one above.
    #[default]
    All,
    /// One run while the fast tier holds at least a tenth of the data; more as its share falls.
    Auto,
    /// This many runs.
    Fixed(usize),
}

impl std::str::FromStr for CapacityLevels {
    type Err = Error;

    fn from_str(s: &str) -> Result<CapacityLevels> {
        match s {
            "all" => Ok(CapacityLevels::All),
            "auto" => Ok(CapacityLevels::Auto),
            n => n.parse().map(CapacityLevels::Fixed).map_err(|_| {
                Error::invalid(format!(
                    "option capacity_levels = {n:?}: accepted \"all\", \"auto\" or a count"
                ))
            }),
        }
    }
}

impl<'de> Deserialize<'de> for CapacityLevels {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Given {
            Count(usize),
            Name(String),
        }
        match Given::deserialize(d)? {
            Given::Count(n) => Ok(CapacityLevels::Fixed(n)),
            Given::Name(name) => name
                .parse()
                .map_err(|e: Error| serde::de::Error::custom(e.detail())),
        }
    }
}

/// Where values are stored: in the LSM, or large ones in a value log (`docs/value-log.md`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValueOptions {
    /// Where values go. Default [`ValuesMode::Inline`]. Fixed when the database is created.
    pub mode: ValuesMode,
    /// Split mode: values of this many bytes or more go to the value log. Default 4 KiB.
    /// Range 1..=`MAX_VALUE_LEN`.
    #[serde(deserialize_with = "de_size")]
    pub split_threshold: u64,
    /// Split mode: a value-log file is closed and the next one started once it passes this
    /// size. Default 256 MiB. Range 64 KiB..=16 GiB.
    #[serde(deserialize_with = "de_size")]
    pub file_size: u64,
    /// Split mode: garbage collection takes a value-log file once at least this share of it
    /// is garbage (counted at flushes and compactions). Default 0.5. Range 0.0..=1.0.
    pub gc_threshold: f64,
    /// Split mode: most value-log bytes one garbage-collection round reads, so a round gives
    /// the background workers back to flushes and compactions soon. Default 4 MiB. Range
    /// 64 KiB..=1 GiB.
    #[serde(deserialize_with = "de_size")]
    pub gc_round_bytes: u64,
    /// Split mode: when a large value goes to the value log: `on-write` (before the WAL
    /// logs its pointer) or `on-flush` (the WAL and the memtable hold it whole, the flush
    /// moves it). Default on-write. May change between opens.
    pub separation: ValueSeparation,
}

impl Default for ValueOptions {
    fn default() -> Self {
        ValueOptions {
            mode: ValuesMode::Inline,
            split_threshold: 4 << 10,
            file_size: 256 << 20,
            gc_threshold: 0.5,
            gc_round_bytes: 4 << 20,
            separation: ValueSeparation::OnWrite,
        }
    }
}

impl HotTierOptions {
    fn validate(&self) -> Result<()> {
        check_range("hot_budget", self.budget, 64 << 10, 16 << 40)?;
        check_range("hot_tracker_share", self.tracker_share, 0.0, 1.0)?;
        check_range("hot_pinned_share", self.pinned_share, 0.0, 1.0)?;
        check_range(
            "hot_promotion_epoch_ops",
            self.promotion_epoch_ops,
            1,
            1 << 40,
        )?;
        check_range(
            "hot_promotion_cooldown_ops",
            self.promotion_cooldown_ops,
            0,
            1 << 40,
        )?;
        check_range("hot_promotion_min_gain", self.promotion_min_gain, 0.0, 1.0)?;
        check_range(
            "hot_partitions",
            self.partitions,
            1,
            crate::hot::partitioned::MAX_PARTITIONS,
        )
    }
}

impl ValueOptions {
    fn validate(&self) -> Result<()> {
        check_range(
            "split_threshold",
            self.split_threshold,
            1,
            super::MAX_VALUE_LEN as u64,
        )?;
        check_range("vlog_file_size", self.file_size, 64 << 10, 16 << 30)?;
        check_range("vlog_gc_threshold", self.gc_threshold, 0.0, 1.0)?;
        check_range(
            "vlog_gc_round_bytes",
            self.gc_round_bytes,
            64 << 10,
            1 << 30,
        )?;
        Ok(())
    }
}

/// Where a write's values are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ValuesMode {
    /// Every value in the LSM, next to its key.
    #[default]
    Inline,
    /// Values at or above `split_threshold` in a value log on the capacity tier, the LSM
    /// holding pointers to them (SplitKV's large-item path, RocksDB's BlobDB).
    Split,
}

/// When a large value of a split database goes to the value log (`docs/value-log.md`,
/// "When values are separated").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueSeparation {
    /// In the write path, before the WAL logs the write: the WAL and the memtable hold a
    /// pointer, and a `Sync` write also syncs the value log on the capacity tier (SplitKV's
    /// large-item path).
    #[default]
    OnWrite,
    /// At flush: the WAL (on the fast tier) and the memtable hold the value whole, and the
    /// flush appends the values it keeps to the value log with one sync, before its tables
    /// are installed. A `Sync` write syncs only the WAL; each large value is written twice,
    /// once to the WAL and once to the value log (RocksDB's integrated BlobDB).
    OnFlush,
}

impl ValueSeparation {
    /// Every choice, in the order they are listed in errors.
    pub const ALL: [ValueSeparation; 2] = [ValueSeparation::OnWrite, ValueSeparation::OnFlush];

    /// The choice's name, as TOML and [`ValueSeparation::from_str`] take it.
    pub fn name(self) -> &'static str {
        match self {
            ValueSeparation::OnWrite => "on-write",
            ValueSeparation::OnFlush => "on-flush",
        }
    }
}

impl std::str::FromStr for ValueSeparation {
    type Err = Error;

    /// Parses a choice; an unknown one is `InvalidArgument` naming the option and the
    /// accepted names.
    fn from_str(s: &str) -> Result<ValueSeparation> {
        ValueSeparation::ALL
            .into_iter()
            .find(|c| c.name() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "vlog_separation = {s:?}: accepted \"on-write\" or \"on-flush\""
                ))
            })
    }
}

/// Checks every group (the tiers are checked by `Options`).
pub(super) fn validate_groups(o: &super::Options) -> Result<()> {
    o.compaction.validate()?;
    o.memtable.validate()?;
    o.table.validate()?;
    o.wal.validate()?;
    o.pipeline.validate()?;
    o.hot_tier.validate()?;
    o.placement.validate(o.compaction.num_levels)?;
    o.values.validate()
}
