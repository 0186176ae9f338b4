//! Option sets with small memtables, tables and levels, so that switches, flushes and
//! compactions all run within a test. Add the tiers with [`super::TierSetup`].

use super::TierSetup;
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{HotTier, Options, OptionsBuilder, ValuesMode, WalMode};

/// Every WAL mode, for tests that run once per mode.
pub const MODES: [WalMode; 4] = [
    WalMode::Group,
    WalMode::Parallel,
    WalMode::Append,
    WalMode::Zoned,
];

/// Memtables of `write_buffer` bytes, tables of `target_file` bytes, an L1 of `level_base`
/// bytes, a zoned WAL device of 16 zones of 1 MiB; everything else at its default.
pub fn sized(write_buffer: usize, target_file: u64, level_base: u64) -> OptionsBuilder {
    Options::builder()
        .wal_zone_size(1 << 20)
        .wal_zones(16)
        .write_buffer_size(write_buffer)
        .target_file_size(target_file)
        .max_bytes_for_level_base(level_base)
}

/// The tiniest LSM: L0 on the fast tier, 64 KiB memtables, 16 KiB tables, a 64 KiB L1,
/// compaction at two L0 tables.
pub fn tiny() -> OptionsBuilder {
    sized(64 << 10, 16 << 10, 64 << 10)
        .levels_on_fast(1)
        .l0_compaction_trigger(2)
}

/// A small LSM on the WAL `mode`: L0 on the fast tier, memtables of `write_buffer` bytes,
/// 32 KiB tables, a 256 KiB L1, compaction at two L0 tables.
pub fn small(mode: WalMode, write_buffer: usize) -> OptionsBuilder {
    sized(write_buffer, 32 << 10, 256 << 10)
        .levels_on_fast(1)
        .l0_compaction_trigger(2)
        .wal(mode)
}

/// [`tiny`] on the WAL `mode` in `fs`'s fast and capacity tiers, with a hot store
/// (`hot_tier = "slab"`) of `budget` bytes.
pub fn hot_slab(fs: &Arc<FaultFs>, mode: WalMode, budget: u64) -> OptionsBuilder {
    tiny()
        .fault_tiers()
        .wal(mode)
        .hot_tier(HotTier::Slab)
        .hot_budget(budget)
        .fs(fs.clone())
}

/// [`hot_slab`], built.
pub fn hot_slab_options(fs: &Arc<FaultFs>, mode: WalMode, budget: u64) -> Options {
    hot_slab(fs, mode, budget).build().expect("valid options")
}

/// The value size from which [`split_small_files`] separates values.
pub const SPLIT_THRESHOLD: u64 = 100;
/// The smallest value-log file the options take, so a test fills several.
pub const VLOG_FILE_SIZE: u64 = 64 << 10;

/// Split values from [`SPLIT_THRESHOLD`] bytes in value-log files of [`VLOG_FILE_SIZE`],
/// collected at a third of garbage: a collected file then holds at most half its live bytes
/// again in garbage (1.5x).
pub fn split_small_files(b: OptionsBuilder) -> OptionsBuilder {
    b.values(ValuesMode::Split)
        .split_threshold(SPLIT_THRESHOLD)
        .vlog_file_size(VLOG_FILE_SIZE)
        .vlog_gc_threshold(1.0 / 3.0)
}

/// [`split_small_files`] on tiers under `dir`, with one background worker: no background
/// collection round runs, so only the test's calls collect.
pub fn split_collected_on_call(dir: &std::path::Path) -> Options {
    split_small_files(tiny())
        .background_threads(1)
        .tiers_in(dir)
        .build()
        .unwrap()
}
