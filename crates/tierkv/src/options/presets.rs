//! Presets: named configurations of the systems tierkv reproduces, applied to a builder
//! before any explicit setting (a later setter overrides what a preset chose).

use super::{CapacityLevels, HotEviction, HotTier, MscPolicy, OptionsBuilder, ValuesMode, WalMode};
use crate::error::{Error, Result};
use std::str::FromStr;

/// A named configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// PrismDB (`docs/hot-tier.md`): the hot store of slab files on the fast tier with its
    /// popularity tracker, approximate MSC demotion and read-triggered promotions at the
    /// paper's settings (tracker for 20% of the keys, 70% of the store pinned, best of 8
    /// candidate ranges, epochs of 1M reads, 10M cool-down, 1% least gain); the LSM below it
    /// on the capacity tier from L0 down (the fast tier keeps the WAL, the MANIFEST and the
    /// slabs), as large sorted runs (`capacity_levels = "auto"`: one while the store holds a
    /// tenth of the data) whose tables are opened at once and kept, indexes and filters in
    /// memory (`pin_capacity_index`), so a read that misses the store costs one
    /// capacity-tier read. The WAL is SpanDB's parallel WAL on the fast tier
    /// (`wal = "parallel"`): with a sync on every write it carried ycsb-a at 1.3x to 1.6x the
    /// group-commit WAL (BENCHMARKS.md, "PrismDB: synced writes through the parallel WAL").
    PrismDb,
    /// SplitKV (`docs/value-log.md`): values of 4 KiB or more in a value log on the capacity
    /// tier (`values = "split"`, `split_threshold = 4 KiB`), 64 MiB value-log files, so
    /// garbage collection rewrites little per file, and a file collected once a third of it is
    /// garbage, which keeps the value log within 1.5x its live bytes ("Garbage collection");
    /// smaller values in the hot store on the fast tier (`hot_tier = "slab"`) with SplitKV's
    /// hotness migration (`hot_eviction = "weight"`), the LSM below it on the capacity tier
    /// from L0 down (`docs/hot-tier.md`, "Eviction policies").
    SplitKv,
}

impl Preset {
    /// Every preset, for listings and tests.
    pub const ALL: [Preset; 2] = [Preset::PrismDb, Preset::SplitKv];

    /// The preset's name, as [`Preset::from_str`] takes it.
    pub fn name(self) -> &'static str {
        match self {
            Preset::PrismDb => "prismdb",
            Preset::SplitKv => "splitkv",
        }
    }

    /// Applies the preset's settings to `b`.
    pub(super) fn apply(self, b: OptionsBuilder) -> OptionsBuilder {
        match self {
            Preset::PrismDb => b
                .hot_tier(HotTier::Slab)
                .hot_tracker_share(0.2)
                .hot_pinned_share(0.7)
                .msc_policy(MscPolicy::Approximate)
                .hot_promotion_epoch_ops(1_000_000)
                .hot_promotion_cooldown_ops(10_000_000)
                .hot_promotion_min_gain(0.01)
                .levels_on_fast(0)
                .capacity_levels(CapacityLevels::Auto)
                .pin_capacity_index(true)
                .wal(WalMode::Parallel),
            Preset::SplitKv => b
                .values(ValuesMode::Split)
                .split_threshold(4 << 10)
                .vlog_file_size(64 << 20)
                .vlog_gc_threshold(1.0 / 3.0)
                .hot_tier(HotTier::Slab)
                .hot_eviction(HotEviction::Weight)
                .levels_on_fast(0),
        }
    }
}

impl FromStr for Preset {
    type Err = Error;

    fn from_str(s: &str) -> Result<Preset> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Preset::ALL.iter().map(|p| p.name()).collect();
                Error::invalid(format!(
                    "unknown preset {s:?}: accepted {}",
                    names.join(", ")
                ))
            })
    }
}

impl OptionsBuilder {
    /// Applies the named configuration `preset` ([`Preset`]); setters called after it
    /// override its choices.
    pub fn preset(self, preset: Preset) -> Self {
        preset.apply(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{Options, TierConfig};

    #[test]
    fn prismdb_turns_the_hot_store_on_with_the_papers_settings() {
        let o = Options::builder()
            .tier(TierConfig::new("fast", "/f"))
            .tier(TierConfig::new("capacity", "/c"))
            .preset(Preset::PrismDb)
            .build()
            .unwrap();
        assert_eq!(o.hot_tier.mode, HotTier::Slab);
        assert_eq!(o.hot_tier.msc_policy, MscPolicy::Approximate);
        assert_eq!(
            (o.hot_tier.tracker_share, o.hot_tier.pinned_share),
            (0.2, 0.7)
        );
        assert_eq!(
            (
                o.hot_tier.promotion_epoch_ops,
                o.hot_tier.promotion_cooldown_ops,
                o.hot_tier.promotion_min_gain
            ),
            (1_000_000, 10_000_000, 0.01)
        );
        assert_eq!(o.placement.levels_on_fast, 0);
        assert_eq!(o.placement.capacity_levels, CapacityLevels::Auto);
        assert!(o.cache.pin_capacity_index);
        assert_eq!(o.wal.mode, WalMode::Parallel);
    }

    #[test]
    fn later_setters_override_a_preset() {
        let o = Options::builder()
            .tier(TierConfig::new("fast", "/f"))
            .preset(Preset::PrismDb)
            .hot_budget(1 << 20)
            .msc_policy(MscPolicy::Random)
            .build()
            .unwrap();
        assert_eq!(o.hot_tier.budget, 1 << 20);
        assert_eq!(o.hot_tier.msc_policy, MscPolicy::Random);
        assert_eq!(o.hot_tier.mode, HotTier::Slab);
    }

    #[test]
    fn presets_by_name() {
        for p in Preset::ALL {
            assert_eq!(p.name().parse::<Preset>().unwrap(), p);
        }
        let err = "rocksdb".parse::<Preset>().unwrap_err().to_string();
        assert!(
            err.contains("unknown preset") && err.contains("prismdb"),
            "{err}"
        );
    }

    #[test]
    fn splitkv_sets_split_values_and_leaves_the_rest_overridable() {
        let one_tier = || Options::builder().tier(TierConfig::new("fast", "/unused/fast"));
        let o = one_tier()
            .preset(Preset::SplitKv)
            .vlog_gc_round_bytes(1 << 20)
            .build()
            .unwrap();
        assert_eq!(o.values.mode, ValuesMode::Split);
        assert_eq!(o.values.split_threshold, 4096);
        assert_eq!(o.values.file_size, 64 << 20);
        assert!((o.values.gc_threshold - 1.0 / 3.0).abs() < 1e-12);
        assert_eq!(o.values.gc_round_bytes, 1 << 20);
        // Small values: the one hot store, with SplitKV's eviction, in front of an LSM on
        // the capacity tier.
        assert_eq!(o.hot_tier.mode, HotTier::Slab);
        assert_eq!(o.hot_tier.eviction, HotEviction::Weight);
        assert_eq!(o.placement.levels_on_fast, 0);
        let prism = one_tier().preset(Preset::PrismDb).build().unwrap();
        assert_eq!(prism.hot_tier.eviction, HotEviction::Msc);
        let later = one_tier()
            .preset(Preset::SplitKv)
            .split_threshold(1000)
            .build();
        assert_eq!(later.unwrap().values.split_threshold, 1000);
    }
}
