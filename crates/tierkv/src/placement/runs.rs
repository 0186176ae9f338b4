//! How many sorted runs the tree keeps below the fast tier (`capacity_levels`): the deepest
//! level compactions fill. Levels below it stay empty, so with one run every key the capacity
//! tier holds is in L0 or in one table of the run.
//!
//! Why (PrismDB): each level a key passes through rewrites it once more on the capacity tier.
//! While the fast tier holds a tenth of the data or more, what it demotes at a time is large
//! enough that merging it into one run of the rest rewrites about ten bytes per demoted byte,
//! no more than a leveled tree of several levels would, and a read below the fast tier looks
//! at one table. As the fast tier's share falls, each merge rewrites more per demoted byte;
//! `auto` then adds a level for every `level_size_multiplier` times more data per fast byte,
//! which keeps the rewrite per level within the multiplier, as in a leveled tree.

use crate::options::{CapacityLevels, HotTier, Options};
use crate::version::Version;

/// The fast tier's least share of the data at which `auto` keeps a single run.
pub const ONE_RUN_FAST_SHARE: f64 = 0.1;

/// The deepest level compactions may fill (the last sorted run), in `1..levels.len()`.
///
/// A level deeper than the rule allows that still holds tables (the option changed, or the
/// fast tier's share grew) stays the bottom, so no table is left below the last compacted
/// level.
pub fn bottom_level(version: &Version, opts: &Options) -> usize {
    let last = version.levels.len() - 1;
    let runs = match opts.placement.capacity_levels {
        CapacityLevels::All => return last,
        CapacityLevels::Fixed(n) => n,
        CapacityLevels::Auto => {
            let (fast, capacity) = data_by_tier(version, opts);
            auto_runs(fast, capacity, opts.compaction.level_size_multiplier)
        }
    };
    let first_off_fast = opts.placement.levels_on_fast.max(1);
    let by_rule = first_off_fast.saturating_add(runs - 1).min(last);
    by_rule.max(version.deepest_non_empty_level().unwrap_or(1))
}

/// Bytes the fast tier holds for the tree (the hot store's budget, when it is on, and the
/// tables placed there) and bytes of tables on the slower tiers.
pub fn data_by_tier(version: &Version, opts: &Options) -> (u64, u64) {
    let hot = match opts.hot_tier.mode {
        HotTier::Slab => opts.hot_tier.budget,
        HotTier::Off => 0,
    };
    let (mut fast, mut capacity) = (hot, 0u64);
    for (_, f) in version.all_files() {
        if f.tier.is_fast() {
            fast += f.size;
        } else {
            capacity += f.size;
        }
    }
    (fast, capacity)
}

/// Sorted runs for `capacity` bytes below a fast tier holding `fast` bytes: one while the fast
/// tier's share is at least [`ONE_RUN_FAST_SHARE`], then one more for every `multiplier` times
/// more capacity bytes per fast byte. With nothing on the fast tier, as many as there are
/// levels (`usize::MAX`, clamped by the caller).
pub fn auto_runs(fast: u64, capacity: u64, multiplier: u64) -> usize {
    if fast == 0 {
        return usize::MAX;
    }
    // share >= s  <=>  capacity <= fast * (1 - s) / s
    let mut limit = fast as f64 * (1.0 - ONE_RUN_FAST_SHARE) / ONE_RUN_FAST_SHARE;
    let mut runs = 1;
    while capacity as f64 > limit && runs < 64 {
        runs += 1;
        limit *= multiplier.max(2) as f64;
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tier::TierId;
    use crate::version::tests::meta;
    use std::sync::Arc;

    fn opts(levels: CapacityLevels, hot_budget: Option<u64>) -> Options {
        let mut o = Options::default();
        o.placement.levels_on_fast = 0;
        o.placement.capacity_levels = levels;
        if let Some(b) = hot_budget {
            o.hot_tier.mode = HotTier::Slab;
            o.hot_tier.budget = b;
        }
        o
    }

    /// A version of 7 levels with one capacity-tier table of `size` bytes at each `(level)`.
    fn version_with(levels: &[(usize, u64)]) -> Version {
        let files: Vec<_> = levels
            .iter()
            .enumerate()
            .map(|(i, &(level, size))| {
                let mut m = (*meta(i as u64 + 1, b"a", b"z", size, 1)).clone();
                m.tier = TierId::CAPACITY;
                (level, Arc::new(m))
            })
            .collect();
        Version::empty(7).apply(&[], &files).unwrap()
    }

    #[test]
    fn one_run_while_the_fast_tier_holds_a_tenth() {
        // 100 fast bytes: one run up to 900 capacity bytes (a 10% share), two up to 9 000,
        // three up to 90 000.
        assert_eq!(auto_runs(100, 0, 10), 1);
        assert_eq!(auto_runs(100, 900, 10), 1);
        assert_eq!(auto_runs(100, 901, 10), 2);
        assert_eq!(auto_runs(100, 9_000, 10), 2);
        assert_eq!(auto_runs(100, 9_001, 10), 3);
        assert_eq!(auto_runs(100, 90_001, 10), 4);
        // 20% on the fast tier: one run.
        assert_eq!(auto_runs(200, 800, 10), 1);
        // Nothing on the fast tier: every level.
        assert_eq!(auto_runs(0, 1, 10), usize::MAX);
    }

    #[test]
    fn all_keeps_every_level() {
        let v = version_with(&[(1, 10)]);
        assert_eq!(bottom_level(&v, &opts(CapacityLevels::All, None)), 6);
    }

    #[test]
    fn auto_counts_the_hot_budget_as_fast_data() {
        let o = opts(CapacityLevels::Auto, Some(1000));
        // 9 000 bytes below a 1 000-byte store: exactly a tenth on the fast tier.
        assert_eq!(bottom_level(&version_with(&[(1, 9_000)]), &o), 1);
        // 20 000 bytes: a 4.8% share, two runs.
        assert_eq!(bottom_level(&version_with(&[(1, 20_000)]), &o), 2);
        // Without a hot store nothing is on the fast tier: every level.
        let no_hot = opts(CapacityLevels::Auto, None);
        assert_eq!(bottom_level(&version_with(&[(1, 10)]), &no_hot), 6);
    }

    #[test]
    fn fixed_counts_from_the_first_level_off_the_fast_tier() {
        let mut o = opts(CapacityLevels::Fixed(2), None);
        let v = version_with(&[(1, 10)]);
        assert_eq!(bottom_level(&v, &o), 2);
        // L0 and L1 on the fast tier: the runs are L2 and L3.
        o.placement.levels_on_fast = 2;
        assert_eq!(bottom_level(&v, &o), 3);
        o.placement.capacity_levels = CapacityLevels::Fixed(6);
        assert_eq!(bottom_level(&v, &o), 6, "clamped to the last level");
    }

    #[test]
    fn a_deeper_level_holding_tables_stays_the_bottom() {
        let o = opts(CapacityLevels::Fixed(1), None);
        let v = version_with(&[(1, 10), (3, 10)]);
        assert_eq!(bottom_level(&v, &o), 3);
    }

    #[test]
    fn capacity_levels_from_toml_by_name_or_count() {
        let parse = |v: &str| {
            let text = format!(
                "[placement]\ncapacity_levels = {v}\n[cache]\npin_capacity_index = true\n\
                 [[tier]]\nname = \"fast\"\npath = \"/f\"\n"
            );
            Options::from_toml_str(&text).map(|o| {
                assert!(o.cache.pin_capacity_index);
                o.placement.capacity_levels
            })
        };
        assert_eq!(parse("\"auto\"").unwrap(), CapacityLevels::Auto);
        assert_eq!(parse("\"all\"").unwrap(), CapacityLevels::All);
        assert_eq!(parse("3").unwrap(), CapacityLevels::Fixed(3));
        let err = parse("\"most\"").unwrap_err().to_string();
        assert!(err.contains("capacity_levels"), "{err}");
        let err = parse("0").unwrap_err().to_string();
        assert!(err.contains("capacity_levels = 0"), "{err}");
    }
}
