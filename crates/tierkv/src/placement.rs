//! Placement: which tier a new table of a given level prefers.
//!
//! SpanDB's fixed modes: `levels_on_fast = n` puts L0..L(n-1) on tier 0 and deeper levels on
//! tier 1 (the capacity tier); `n = 0` is "PL" (tier 0 holds only the WAL and MANIFEST). With a
//! single tier everything is on tier 0. Tiers after tier 1 take overflow only. Whether the
//! preferred tier has room is decided by `Tiers::place`, which falls through to later tiers.
//!
//! [`Placer`] is the database's placement state: a fixed split, or the `placement = auto`
//! controller ([`crate::autoplace`]) whose pointer the monitor moves.

use crate::autoplace::{AutoPlace, AutoPlaceConfig, Pointer};
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
    pub fn tier_for_new_table(&self, level: usize, num_tiers: usize) -> usize {
        match self {
            Placer::Fixed { levels_on_fast } => preferred_tier(level, *levels_on_fast, num_tiers),
            Placer::Auto(ctl) => {
                let fast = num_tiers == 1 || ctl.lock().next_file_wants_fast(level);
                usize::from(!fast)
            }
        }
    }

    /// The tier tables of `level` belong to now, without taking a per-file decision (trivial
    /// moves keep a file where it is only if its whole level is on that side).
    pub fn tier_of_level(&self, level: usize, num_tiers: usize) -> usize {
        match self {
            Placer::Fixed { levels_on_fast } => preferred_tier(level, *levels_on_fast, num_tiers),
            Placer::Auto(ctl) => {
                let p = ctl.lock().pointer();
                let fast = num_tiers == 1 || level < p.level;
                usize::from(!fast)
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
pub fn preferred_tier(level: usize, levels_on_fast: usize, num_tiers: usize) -> usize {
    if level < levels_on_fast || num_tiers == 1 {
        0
    } else {
        1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placer_fixed_and_auto() {
        let fixed = Placer::fixed(2);
        assert_eq!(fixed.tier_for_new_table(1, 2), 0);
        assert_eq!(fixed.tier_for_new_table(2, 2), 1);
        assert_eq!(fixed.describe(), "LAD-2");
        assert_eq!(Placer::fixed(0).describe(), "PL");
        let auto = Placer::auto(AutoPlaceConfig::new(7), 1);
        assert_eq!(auto.tier_for_new_table(0, 2), 0);
        assert_eq!(auto.tier_for_new_table(1, 2), 1);
        assert_eq!(auto.tier_of_level(0, 2), 0);
        assert_eq!(
            auto.tier_for_new_table(3, 1),
            0,
            "a single tier takes everything"
        );
        assert!(auto.describe().starts_with("auto L1+0%"));
    }

    #[test]
    fn lad_and_pl() {
        assert_eq!(preferred_tier(0, 0, 2), 1, "PL keeps L0 off the fast tier");
        assert_eq!(preferred_tier(0, 2, 2), 0);
        assert_eq!(preferred_tier(1, 2, 2), 0);
        assert_eq!(preferred_tier(2, 2, 2), 1);
        assert_eq!(preferred_tier(5, 2, 1), 0);
    }
}
