//! Placement: which tier a new table of a given level prefers.
//!
//! SpanDB's fixed modes: `levels_on_fast = n` puts L0..L(n-1) on tier 0 and deeper levels on
//! tier 1 (the capacity tier); `n = 0` is "PL" (tier 0 holds only the WAL and MANIFEST). With a
//! single tier everything is on tier 0. Tiers after tier 1 take overflow only. Whether the
//! preferred tier has room is decided by `Tiers::place`, which falls through to later tiers.
//!
//! Upper levels first: tables of L2 and deeper take tier 0 only while they leave the levels
//! above them room for what those levels hold now plus two tables ([`deep_allowance`]). Per
//! byte, an upper level is read more and rewritten far more often than a deep one, and an L0
//! -> L1 compaction on the capacity tier was what stopped writes after a load had filled the
//! fast tier with L2. The two tables' room is what a chunked compaction needs beyond its
//! inputs (see `db::background::Chunks`).
//!
//! [`Placer`] is the database's placement state: a fixed split, or the `placement = auto`
//! controller ([`crate::placement::auto`]) whose pointer the monitor moves.

use crate::placement::auto::{AutoPlace, AutoPlaceConfig, Pointer};
use crate::tier::TierId;
use crate::version::Version;
use parking_lot::Mutex;
use std::time::Instant;

/// Where new tables go: a fixed split or the automatic controller.
#[derive(Debug)]
pub enum Placer {
    /// `levels_on_fast = n`: L0..L(n-1) on tier 0.
    Fixed {
        /// Levels on the fast tier.
        levels_on_fast: usize,
    },
    /// `placement = auto`: the controller's pointer decides per new table.
    Auto(Mutex<AutoPlace>),
}

impl Placer {
    /// A fixed split.
    pub fn fixed(levels_on_fast: usize) -> Self {
        Placer::Fixed { levels_on_fast }
    }

    /// The automatic controller tuned by `config`, starting with `levels_on_fast` whole levels
    /// on the fast tier.
    pub fn auto(config: AutoPlaceConfig, levels_on_fast: usize) -> Self {
        let start = Pointer {
            level: levels_on_fast,
            fraction: 0.0,
        };
        let ctl = AutoPlace::new(config, Instant::now()).with_pointer(start);
        Placer::Auto(Mutex::new(ctl))
    }

    /// The tier a new table of `level` should go to, before budgets are considered. With the
    /// automatic controller each call is one file's decision.
    pub fn tier_for_new_table(&self, level: usize, num_tiers: usize) -> TierId {
        match self {
            Placer::Fixed { levels_on_fast } => preferred_tier(level, *levels_on_fast, num_tiers),
            Placer::Auto(ctl) => {
                let fast = num_tiers == 1 || ctl.lock().next_file_wants_fast(level);
                fast_or_capacity(fast)
            }
        }
    }

    /// The tier tables of `level` belong to now, without taking a per-file decision (trivial
    /// moves keep a file where it is only if its whole level is on that side).
    pub fn tier_of_level(&self, level: usize, num_tiers: usize) -> TierId {
        match self {
            Placer::Fixed { levels_on_fast } => preferred_tier(level, *levels_on_fast, num_tiers),
            Placer::Auto(ctl) => {
                let p = ctl.lock().pointer();
                let fast = num_tiers == 1 || level < p.level;
                fast_or_capacity(fast)
            }
        }
    }

    /// "LAD-2", "PL" or "auto L2+40% (3 moves)".
    pub fn describe(&self) -> String {
        match self {
            Placer::Fixed { levels_on_fast: 0 } => "PL".to_string(),
            Placer::Fixed { levels_on_fast } => format!("LAD-{levels_on_fast}"),
            Placer::Auto(ctl) => {
                let ctl = ctl.lock();
                format!("auto {} ({} moves)", ctl.pointer(), ctl.moves())
            }
        }
    }
}

/// The tier a table of `level` should go to, before budgets are considered.
pub fn preferred_tier(level: usize, levels_on_fast: usize, num_tiers: usize) -> TierId {
    fast_or_capacity(level < levels_on_fast || num_tiers == 1)
}

/// The fast tier if `fast`, else the capacity tier.
fn fast_or_capacity(fast: bool) -> TierId {
    if fast {
        TierId::FAST
    } else {
        TierId::CAPACITY
    }
}

/// Bytes of tier 0's table budget that tables of `level` and deeper leave to the levels above
/// (L1 up to `level - 1`): what those levels hold now, wherever it lies, and two tables of
/// `table_size`. Nothing for L0 and L1 (L0 has the flush reserve).
pub fn room_for_upper_levels(version: &Version, level: usize, table_size: u64) -> u64 {
    if level < 2 {
        return 0;
    }
    let upper: u64 = (1..level.min(version.levels.len()))
        .map(|l| version.level_bytes(l))
        .sum();
    upper.saturating_add(table_size.saturating_mul(2))
}

/// Bytes tables of `level` may still add to tier 0 when tables may use `budget` bytes of it:
/// the budget less [`room_for_upper_levels`] and what `level` and deeper levels hold there.
pub fn deep_allowance(version: &Version, level: usize, table_size: u64, budget: u64) -> u64 {
    budget
        .saturating_sub(room_for_upper_levels(version, level, table_size))
        .saturating_sub(on_fast_from(version, level))
}

/// Whether some level from L2 down holds, with the deeper levels, more of tier 0 than its
/// allowance leaves it by over a table (tables written before an upper level grew): migration
/// then moves the coldest tables down.
///
/// NB: the table of slack is hysteresis: upper levels grow and shrink by a compaction's output
/// as they fill and drain, and copies up must fit the exact allowance, so without it tables
/// would go down and back up with each L1 compaction.
pub fn deep_levels_over_allowance(version: &Version, table_size: u64, budget: u64) -> bool {
    (2..version.levels.len()).any(|level| {
        let allowed = budget.saturating_sub(room_for_upper_levels(version, level, table_size));
        on_fast_from(version, level) > allowed.saturating_add(table_size)
    })
}

/// Bytes of tables of `level` and deeper on tier 0.
fn on_fast_from(version: &Version, level: usize) -> u64 {
    version
        .levels
        .iter()
        .skip(level)
        .flatten()
        .filter(|f| f.tier.is_fast())
        .map(|f| f.size)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::version::tests::meta;
    use crate::version::FileMeta;
    use std::sync::Arc;

    const MIB: u64 = 1 << 20;

    /// A table of `mib` MiB on `tier`, with its own key range.
    fn table(number: u64, tier: TierId, mib: u64) -> Arc<FileMeta> {
        let lo = format!("k{number:04}");
        let hi = format!("k{number:04}z");
        let mut f = (*meta(number, lo.as_bytes(), hi.as_bytes(), mib * MIB, 1)).clone();
        f.tier = tier;
        Arc::new(f)
    }

    /// L1: 200 MiB on the capacity tier; L2: 600 MiB on the fast one; L3: 64 MiB fast.
    fn loaded() -> Version {
        let mut added = vec![
            (1, table(1, TierId::CAPACITY, 100)),
            (1, table(2, TierId::CAPACITY, 100)),
        ];
        added.extend((10..16).map(|n| (2, table(n, TierId::FAST, 100))));
        added.push((3, table(20, TierId::FAST, 64)));
        Version::empty(4).apply(&[], &added).expect("valid version")
    }

    #[test]
    fn deep_levels_leave_upper_levels_their_bytes_and_two_tables() {
        let v = loaded();
        let table_size = 32 * MIB;
        assert_eq!(room_for_upper_levels(&v, 0, table_size), 0);
        assert_eq!(room_for_upper_levels(&v, 1, table_size), 0);
        assert_eq!(room_for_upper_levels(&v, 2, table_size), 264 * MIB);
        assert_eq!(room_for_upper_levels(&v, 3, table_size), 864 * MIB);
        let budget = 1000 * MIB;
        // L2 and L3 hold 664 MiB of the fast tier; 1000 - 264 leaves them 736.
        assert_eq!(deep_allowance(&v, 2, table_size, budget), 72 * MIB);
        // L3 must leave L1 and L2 their 800 MiB plus two tables: 136 MiB, and it holds 64.
        assert_eq!(deep_allowance(&v, 3, table_size, budget), 72 * MIB);
        assert!(!deep_levels_over_allowance(&v, table_size, budget));
        // A smaller fast tier: L2 and L3 take room L1 should have, by more than a table.
        assert_eq!(deep_allowance(&v, 2, table_size, 800 * MIB), 0);
        assert!(deep_levels_over_allowance(&v, table_size, 800 * MIB));
        // By less than a table: no move down (copies up still stop at the allowance).
        assert_eq!(deep_allowance(&v, 2, table_size, 900 * MIB), 0);
        assert!(!deep_levels_over_allowance(&v, table_size, 900 * MIB));
        // L0 and L1 are never held back.
        assert_eq!(
            deep_allowance(&v, 1, table_size, 800 * MIB),
            800 * MIB - 664 * MIB
        );
    }

    #[test]
    fn placer_fixed_and_auto() {
        let fixed = Placer::fixed(2);
        assert_eq!(fixed.tier_for_new_table(1, 2), TierId::FAST);
        assert_eq!(fixed.tier_for_new_table(2, 2), TierId::CAPACITY);
        assert_eq!(fixed.describe(), "LAD-2");
        assert_eq!(Placer::fixed(0).describe(), "PL");
        let auto = Placer::auto(AutoPlaceConfig::new(7), 1);
        assert_eq!(auto.tier_for_new_table(0, 2), TierId::FAST);
        assert_eq!(auto.tier_for_new_table(1, 2), TierId::CAPACITY);
        assert_eq!(auto.tier_of_level(0, 2), TierId::FAST);
        assert_eq!(
            auto.tier_for_new_table(3, 1),
            TierId::FAST,
            "a single tier takes everything"
        );
        assert!(auto.describe().starts_with("auto L1+0%"));
    }

    #[test]
    fn lad_and_pl() {
        assert_eq!(
            preferred_tier(0, 0, 2),
            TierId::CAPACITY,
            "PL keeps L0 off the fast tier"
        );
        assert_eq!(preferred_tier(0, 2, 2), TierId::FAST);
        assert_eq!(preferred_tier(1, 2, 2), TierId::FAST);
        assert_eq!(preferred_tier(2, 2, 2), TierId::CAPACITY);
        assert_eq!(preferred_tier(5, 2, 1), TierId::FAST);
    }
}
