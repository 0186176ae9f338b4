//! Which table background migration moves between tiers, for `placement = auto`.
//!
//! The monitor leaves the controller's [`MigrationHint`] for the background workers; [`pick`]
//! turns it into at most one [`Migration`]:
//! - `MoveColdestDown`: the fast tier passed its space watermark. The coldest table on it goes
//!   to the capacity tier: the deepest level first (deeper data is read less per byte), the
//!   oldest table of that level first.
//! - `MoveUp { level, room }`: the fast tier is idle. A table of a level the pointer covers
//!   (`level` or above) that still sits on a slower tier goes up, shallowest level first, if
//!   it fits below `room` (what is left below the space target), in the fast tier's free
//!   budget and in its level's allowance ([`super::policy::deep_allowance`]: deep levels
//!   leave upper ones room). If none does and deep levels hold more than their allowance, the
//!   coldest table goes down instead, making room for the upper levels: after a load, L1
//!   would otherwise wait on the capacity tier while L2 fills the fast one.
//!
//! INVARIANT: a table in `busy` (a compaction's input) is never chosen, and an L0 table never
//! moves down: both are about to be rewritten, and flushes have their own reserve.
//!
//! Pure policy over a [`Version`]: moving the file is `db::migrate`'s job.

use super::auto::MigrationHint;
use super::policy::FastBudget;
use crate::tier::TierId;
use crate::version::{FileMeta, Version};
use std::cmp::Reverse;
use std::collections::HashSet;
use std::sync::Arc;

/// One table to move.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Migration {
    /// The table's level (it stays there).
    pub level: usize,
    /// The table.
    pub file: Arc<FileMeta>,
    /// Where it goes.
    pub to_tier: TierId,
}

/// What a copy up must fit in, besides the hint's room.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastRoom {
    /// Bytes of the fast tier's budget for migrated tables not taken by tables now.
    pub free: u64,
    /// The upper-levels-first rule's budget.
    pub budget: FastBudget,
}

/// The table to move for `hint`, if any, in `version` with `room` on the fast tier; tables in
/// `busy` are left alone.
pub fn pick(
    version: &Version,
    hint: MigrationHint,
    room: &FastRoom,
    busy: &HashSet<u64>,
) -> Option<Migration> {
    match hint {
        MigrationHint::None => None,
        MigrationHint::MoveColdestDown { .. } => coldest_on_fast(version, busy),
        MigrationHint::MoveUp {
            level,
            room: below_target,
        } => {
            let fits = room.free.min(below_target);
            promotable(version, level, fits, &room.budget, busy)
                .or_else(|| make_room_for_upper_levels(version, &room.budget, busy))
        }
    }
}

/// The deepest, oldest table on the fast tier outside L0 and `busy`.
fn coldest_on_fast(version: &Version, busy: &HashSet<u64>) -> Option<Migration> {
    tables(version)
        .filter(|(level, f)| *level > 0 && f.tier.is_fast() && !busy.contains(&f.number))
        .min_by_key(|(level, f)| (Reverse(*level), f.number))
        .map(|(level, f)| Migration {
            level,
            file: Arc::clone(f),
            to_tier: TierId::CAPACITY,
        })
}

/// The first table, shallowest level first, of `level` or above on a slower tier that is
/// smaller than `room`, outside `busy`, and within its level's allowance.
fn promotable(
    version: &Version,
    level: usize,
    room: u64,
    budget: &FastBudget,
    busy: &HashSet<u64>,
) -> Option<Migration> {
    tables(version)
        .take_while(|(l, _)| *l <= level)
        .find(|(l, f)| {
            !f.tier.is_fast()
                && f.size < room
                && !busy.contains(&f.number)
                && f.size <= budget.deep_room(version, *l)
        })
        .map(|(level, f)| Migration {
            level,
            file: Arc::clone(f),
            to_tier: TierId::FAST,
        })
}

/// The coldest table on the fast tier, if deep levels hold room there that the levels above
/// should have ([`super::policy::deep_levels_over_allowance`]).
fn make_room_for_upper_levels(
    version: &Version,
    budget: &FastBudget,
    busy: &HashSet<u64>,
) -> Option<Migration> {
    if !budget.deep_levels_over_allowance(version) {
        return None;
    }
    coldest_on_fast(version, busy)
}

/// Every table with its level, shallowest level first, each level in its order.
fn tables(version: &Version) -> impl Iterator<Item = (usize, &Arc<FileMeta>)> {
    version
        .levels
        .iter()
        .enumerate()
        .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::tests::{shape, MIB};

    const TABLE: u64 = 32 * MIB;

    /// Room for anything: a fast tier of 10 GiB, nothing of it taken.
    fn roomy() -> FastRoom {
        FastRoom {
            free: 10 << 30,
            budget: FastBudget {
                budget: Some(10 << 30),
                table_size: TABLE,
            },
        }
    }

    fn up(level: usize) -> MigrationHint {
        MigrationHint::MoveUp {
            level,
            room: u64::MAX,
        }
    }

    const DOWN: MigrationHint = MigrationHint::MoveColdestDown { bytes: 1 };

    fn picked(m: Option<Migration>) -> Option<(usize, u64, TierId)> {
        m.map(|m| (m.level, m.file.number, m.to_tier))
    }

    fn numbers(m: Option<Migration>) -> Vec<u64> {
        m.map(|m| m.file.number).into_iter().collect()
    }

    #[test]
    fn no_hint_moves_nothing() {
        let v = shape(&[(1, 1, 'F', 10), (2, 2, 'C', 10)]);
        assert_eq!(
            pick(&v, MigrationHint::None, &roomy(), &HashSet::new()),
            None
        );
    }

    #[test]
    fn down_takes_the_deepest_level_then_the_oldest_table() {
        let v = shape(&[
            (0, 1, 'F', 10),
            (1, 2, 'F', 10),
            (2, 5, 'F', 10),
            (2, 4, 'F', 10),
            (3, 9, 'C', 10),
        ]);
        let none = HashSet::new();
        assert_eq!(
            picked(pick(&v, DOWN, &roomy(), &none)),
            Some((2, 4, TierId::CAPACITY)),
            "L3 has nothing on the fast tier; table 4 is L2's oldest"
        );
        let busy = [4, 5].into();
        assert_eq!(
            picked(pick(&v, DOWN, &roomy(), &busy)),
            Some((1, 2, TierId::CAPACITY)),
            "a compaction's inputs stay"
        );
    }

    #[test]
    fn down_never_moves_l0() {
        let v = shape(&[(0, 1, 'F', 10), (0, 2, 'F', 10), (1, 3, 'C', 10)]);
        assert_eq!(pick(&v, DOWN, &roomy(), &HashSet::new()), None);
    }

    #[test]
    fn up_takes_the_shallowest_level_first_and_stops_at_the_pointer() {
        let v = shape(&[
            (0, 1, 'C', 10),
            (1, 2, 'F', 10),
            (2, 3, 'C', 10),
            (3, 4, 'C', 10),
        ]);
        let none = HashSet::new();
        assert_eq!(
            picked(pick(&v, up(3), &roomy(), &none)),
            Some((0, 1, TierId::FAST)),
            "an L0 table left on the capacity tier goes up first"
        );
        assert_eq!(
            picked(pick(&v, up(3), &roomy(), &[1].into())),
            Some((2, 3, TierId::FAST)),
            "L1 is already up"
        );
        assert_eq!(
            picked(pick(&v, up(3), &roomy(), &[1, 3].into())),
            Some((3, 4, TierId::FAST))
        );
        assert_eq!(
            pick(&v, up(1), &roomy(), &[1].into()),
            None,
            "L2 is not covered"
        );
    }

    #[test]
    fn up_fits_below_the_target_and_in_the_free_budget() {
        let v = shape(&[(1, 1, 'C', 64), (1, 2, 'C', 16)]);
        let none = HashSet::new();
        let below_target = |mib: u64| MigrationHint::MoveUp {
            level: 1,
            room: mib * MIB,
        };
        assert_eq!(numbers(pick(&v, below_target(65), &roomy(), &none)), [1]);
        assert_eq!(
            numbers(pick(&v, below_target(64), &roomy(), &none)),
            [2],
            "a copy must stay strictly below the target"
        );
        let tight = FastRoom {
            free: 20 * MIB,
            ..roomy()
        };
        assert_eq!(numbers(pick(&v, up(1), &tight, &none)), [2]);
        let full = FastRoom { free: 0, ..roomy() };
        assert_eq!(pick(&v, up(1), &full, &none), None);
    }

    #[test]
    fn up_keeps_deep_tables_within_their_allowance() {
        // L1 holds 200 MiB (on the capacity tier): L2 must leave it that plus two tables.
        let v = shape(&[(1, 1, 'C', 100), (1, 2, 'C', 100), (2, 3, 'C', 100)]);
        let budget = |mib: u64| FastRoom {
            free: 10 << 30,
            budget: FastBudget {
                budget: Some(mib * MIB),
                table_size: TABLE,
            },
        };
        let none = HashSet::new();
        let busy_l1 = [1, 2].into();
        assert_eq!(numbers(pick(&v, up(2), &budget(364), &busy_l1)), [3]);
        assert_eq!(
            pick(&v, up(2), &budget(363), &busy_l1),
            None,
            "100 MiB would cut into L1's room"
        );
        assert_eq!(
            numbers(pick(&v, up(2), &budget(363), &none)),
            [1],
            "L1 has no allowance to keep"
        );
    }

    #[test]
    fn up_moves_a_deep_table_down_when_upper_levels_lack_room() {
        // L1: 200 MiB on the capacity tier; L2 and L3: 664 MiB on the fast tier.
        let mut tables = vec![(1, 1, 'C', 100), (1, 2, 'C', 100), (3, 20, 'F', 64)];
        tables.extend((10..16).map(|n| (2, n, 'F', 100)));
        let v = shape(&tables);
        let room = |budget_mib: u64| FastRoom {
            free: 0,
            budget: FastBudget {
                budget: Some(budget_mib * MIB),
                table_size: TABLE,
            },
        };
        let none = HashSet::new();
        assert_eq!(
            picked(pick(&v, up(3), &room(800), &none)),
            Some((3, 20, TierId::CAPACITY)),
            "over the allowance by more than a table: the coldest goes down"
        );
        assert_eq!(
            pick(&v, up(3), &room(900), &none),
            None,
            "within a table of it: nothing moves"
        );
    }
}
