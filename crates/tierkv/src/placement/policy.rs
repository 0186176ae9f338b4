//! Placement policy: which tier a table of a given level belongs on.
//!
//! SpanDB's fixed modes: `levels_on_fast = n` puts L0..L(n-1) on the fast tier and deeper
//! levels on the capacity tier; `n = 0` is "PL" (the fast tier holds only the WAL and
//! MANIFEST). With a single tier everything is on it. Tiers after the capacity tier take
//! overflow only. Whether the preferred tier has room is decided by `Tiers::place`, which
//! falls through to later tiers.
//!
//! Upper levels first: tables of L2 and deeper take the fast tier only while they leave the
//! levels above them room for what those levels hold now plus two tables ([`deep_allowance`]).
//! Per byte, an upper level is read more and rewritten far more often than a deep one, and an
//! L0 -> L1 compaction on the capacity tier stops writes once a load has filled the fast tier
//! with L2. The two tables' room is what a chunked compaction needs beyond its inputs (see
//! `db::background::Chunks`). The rule decides the tier of a new table ([`output_tier`]),
//! whether a table may move down a level without a rewrite ([`is_trivial_move`]), and which
//! tables migration copies up or moves down (`placement::migrate`).
//!
//! [`Placer`] is the database's placement state: a fixed split, or the `placement = auto`
//! controller ([`crate::placement::auto`]) whose pointer the monitor moves.
//!
//! Everything here but `Placer`'s per-file sequence is a function of its arguments.

use crate::compaction::CompactionTask;
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

/// What the upper-levels-first rule measures against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastBudget {
    /// The fast tier's budget for tables other than flushes' (`Tiers::table_budget` for
    /// compactions); `None` with a single tier, where deep tables have nowhere else to go.
    pub budget: Option<u64>,
    /// The target table size (`Options::target_file_size`).
    pub table_size: u64,
}

impl FastBudget {
    /// Bytes tables of `level` may still add to the fast tier in `version` while leaving the
    /// levels above theirs ([`deep_allowance`]); unbounded for L0, L1 and a single tier.
    pub fn deep_room(&self, version: &Version, level: usize) -> u64 {
        match self.budget {
            Some(budget) if level >= 2 => deep_allowance(version, level, self.table_size, budget),
            _ => u64::MAX,
        }
    }

    /// Whether deep levels of `version` hold room on the fast tier that the levels above
    /// should have ([`deep_levels_over_allowance`]); never with a single tier.
    pub fn deep_levels_over_allowance(&self, version: &Version) -> bool {
        self.budget
            .is_some_and(|budget| deep_levels_over_allowance(version, self.table_size, budget))
    }
}

/// Whether `task` may move its table down a level without rewriting it: one input, nothing
/// overlapping in the next level, already on `level_tier` (the tier the output level belongs
/// to now, [`Placer::tier_of_level`]), and, on the fast tier, within its new level's allowance
/// in `version`.
///
/// NB: the allowance matters because trivial moves of L1 tables would otherwise fill the fast
/// tier with L2 and L3 while L1 grows on the capacity tier.
pub fn is_trivial_move(
    task: &CompactionTask,
    level_tier: TierId,
    version: &Version,
    budget: &FastBudget,
) -> bool {
    let [only] = task.inputs.as_slice() else {
        return false;
    };
    if task.within_l0 {
        return false;
    }
    let fits =
        || !only.tier.is_fast() || only.size <= budget.deep_room(version, task.output_level());
    task.next_inputs.is_empty() && only.tier == level_tier && fits()
}

/// The size a new table is expected to reach, for reserving its room: the target size, or
/// less for small inputs (`input_bytes`: a memtable's, or a compaction's input tables'),
/// and never over two memtables; plus an eighth, since tables end a little past the target
/// (the entry that crosses it, index and filter).
///
/// NB: bounded by the input because a flush's table is about its memtable's size: with a
/// whole two-memtable estimate each, the flush reserve would hold half the flushes it has room
/// for.
pub fn output_size_estimate(
    target_file_size: u64,
    write_buffer_size: u64,
    input_bytes: u64,
) -> u64 {
    let base = target_file_size
        .min(write_buffer_size.saturating_mul(2))
        .min(input_bytes.max(1));
    base + base / 8
}

/// The tier a new table of `level` and `size` bytes goes to: `preferred`, except that a table
/// bound for the fast tier goes to the capacity tier when, with `waiting` (bytes of its job's
/// tables already on the fast tier and not yet installed), it would leave the levels above too
/// little room ([`FastBudget::deep_room`] of `version`).
pub fn output_tier(
    preferred: TierId,
    (version, level): (&Version, usize),
    size: u64,
    waiting: u64,
    budget: &FastBudget,
) -> TierId {
    let leaves_upper_room = || waiting.saturating_add(size) <= budget.deep_room(version, level);
    if preferred.is_fast() && !leaves_upper_room() {
        TierId::CAPACITY
    } else {
        preferred
    }
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
    use crate::placement::tests::{shape, MIB};
    use std::sync::Arc;

    /// L1: 200 MiB on the capacity tier; L2: 600 MiB on the fast one; L3: 64 MiB fast.
    fn loaded() -> Version {
        let mut tables = vec![(1, 1, 'C', 100), (1, 2, 'C', 100), (3, 20, 'F', 64)];
        tables.extend((10..16).map(|n| (2, n, 'F', 100)));
        shape(&tables)
    }

    fn budget(mib: u64) -> FastBudget {
        FastBudget {
            budget: Some(mib * MIB),
            table_size: 32 * MIB,
        }
    }

    const ONE_TIER: FastBudget = FastBudget {
        budget: None,
        table_size: 32 * MIB,
    };

    /// A compaction of table `number` of `level` (found in `v`) into the level below, with
    /// `next` overlapping tables there.
    fn move_of(v: &Version, level: usize, number: u64, next: &[u64]) -> CompactionTask {
        let find = |level: usize, n: u64| {
            let f = v.levels[level].iter().find(|f| f.number == n);
            Arc::clone(f.expect("table in the version"))
        };
        CompactionTask {
            level,
            inputs: vec![find(level, number)],
            next_inputs: next.iter().map(|&n| find(level + 1, n)).collect(),
            within_l0: false,
        }
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
    fn deep_room_is_unbounded_for_upper_levels_and_one_tier() {
        let v = loaded();
        assert_eq!(budget(1000).deep_room(&v, 1), u64::MAX);
        assert_eq!(budget(1000).deep_room(&v, 2), 72 * MIB);
        assert_eq!(ONE_TIER.deep_room(&v, 3), u64::MAX);
        assert!(budget(800).deep_levels_over_allowance(&v));
        assert!(!ONE_TIER.deep_levels_over_allowance(&v));
    }

    #[test]
    fn a_lone_table_moves_down_when_it_is_on_its_new_levels_tier() {
        // L1 -> L2 of a capacity-tier table with nothing below it.
        let v = shape(&[(1, 1, 'C', 10), (2, 2, 'C', 10), (1, 3, 'F', 10)]);
        let task = move_of(&v, 1, 1, &[]);
        assert!(is_trivial_move(&task, TierId::CAPACITY, &v, &budget(1000)));
        assert!(
            !is_trivial_move(&task, TierId::FAST, &v, &budget(1000)),
            "L2 now belongs on the fast tier: the table is rewritten there"
        );
        let two = CompactionTask {
            inputs: vec![Arc::clone(&v.levels[1][0]), Arc::clone(&v.levels[1][1])],
            ..task.clone()
        };
        assert!(!is_trivial_move(&two, TierId::CAPACITY, &v, &budget(1000)));
        let overlapping = move_of(&v, 1, 1, &[2]);
        assert!(!is_trivial_move(
            &overlapping,
            TierId::CAPACITY,
            &v,
            &budget(1000)
        ));
    }

    #[test]
    fn a_fast_table_moves_down_only_within_its_new_levels_allowance() {
        // `loaded` plus a 60 MiB L1 table on the fast tier: L1 holds 260 MiB, so L2 must leave
        // it 324 MiB, and L2 and L3 hold 664 MiB of the fast tier already.
        let mut tables = vec![(1, 1, 'C', 100), (1, 2, 'C', 100), (1, 3, 'F', 60)];
        tables.extend((10..16).map(|n| (2, n, 'F', 100)));
        tables.push((3, 20, 'F', 64));
        let v = shape(&tables);
        let task = move_of(&v, 1, 3, &[]);
        assert!(
            !is_trivial_move(&task, TierId::FAST, &v, &budget(1000)),
            "L2's allowance is 12 MiB"
        );
        assert!(is_trivial_move(&task, TierId::FAST, &v, &budget(1048)));
        assert!(is_trivial_move(&task, TierId::FAST, &v, &ONE_TIER));
        // Into L1 the allowance never applies.
        let l0 = shape(&[(0, 1, 'F', 500)]);
        let task = move_of(&l0, 0, 1, &[]);
        assert!(is_trivial_move(&task, TierId::FAST, &l0, &budget(1)));
    }

    #[test]
    fn new_tables_take_the_fast_tier_only_within_the_allowance() {
        let v = loaded();
        let b = budget(1000);
        // L2 may still add 72 MiB to the fast tier.
        assert_eq!(
            output_tier(TierId::FAST, (&v, 2), 36 * MIB, 0, &b),
            TierId::FAST
        );
        assert_eq!(
            output_tier(TierId::FAST, (&v, 2), 36 * MIB, 36 * MIB, &b),
            TierId::FAST
        );
        assert_eq!(
            output_tier(TierId::FAST, (&v, 2), 36 * MIB, 37 * MIB, &b),
            TierId::CAPACITY,
            "the job's tables not yet installed count"
        );
        assert_eq!(
            output_tier(TierId::FAST, (&v, 2), 73 * MIB, 0, &b),
            TierId::CAPACITY
        );
        assert_eq!(
            output_tier(TierId::FAST, (&v, 1), 1 << 40, 0, &b),
            TierId::FAST
        );
        assert_eq!(
            output_tier(TierId::FAST, (&v, 3), 1 << 40, 0, &ONE_TIER),
            TierId::FAST
        );
        assert_eq!(
            output_tier(TierId::CAPACITY, (&v, 2), MIB, 0, &b),
            TierId::CAPACITY,
            "the rule only ever sends tables down"
        );
    }

    #[test]
    fn table_estimates_are_bounded_by_target_memtables_and_input() {
        let target = 64 * MIB;
        assert_eq!(output_size_estimate(target, 64 * MIB, 1 << 30), 72 * MIB);
        assert_eq!(output_size_estimate(target, 16 * MIB, 1 << 30), 36 * MIB);
        assert_eq!(output_size_estimate(target, 64 * MIB, 8 * MIB), 9 * MIB);
        assert_eq!(output_size_estimate(target, 64 * MIB, 0), 1);
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
