//! Where RocksDB puts its tables, and the `db_paths` that make each placement profile mean the
//! same for RocksDB as for tierkv.
//!
//! How RocksDB (7.8, leveled compaction, `level_compaction_dynamic_level_bytes` off) picks the
//! path of a new table file:
//!
//! - A **flush** always writes to path 0 (`db_paths[0]`), whatever the paths' targets.
//! - A **compaction output** for level L goes to the path found by `GetPathId`: it walks the
//!   paths in order with a budget equal to the path's target, and the levels from L0 with a
//!   size each (L0 is sized like L1, `max_bytes_for_level_base`; each deeper level is
//!   `max_bytes_for_level_multiplier` times the one above). A level that fits in what is left
//!   of the budget is charged to it; one that does not moves on to the next path, with that
//!   path's whole target. The last path takes whatever is left. Level L is placed where its
//!   own turn comes.
//! - The WAL goes to `wal_dir`; MANIFEST, CURRENT, OPTIONS and the info LOG to the database
//!   directory.
//!
//! What the profiles become (the benchmark puts `wal_dir` and the database directory on the
//! fast tier for every profile):
//!
//! - **PL** (`pl`, the same as `lad0`: tierkv's `levels_on_fast = 0`): `db_paths = [capacity]`.
//!   A fast path with target 0 would not do: flushes would still write L0 to it.
//! - **LAD-n**, n >= 1: `db_paths = [fast (target: the sizes of L0..L(n-1), capped at the fast
//!   tier's --tier-capacity), capacity (unbounded)]`. Flushes write L0 to the fast tier, as
//!   LAD-n asks; compaction outputs of L0..L(n-1) fit the fast target and L(n) does not, so it
//!   and every deeper level go to the capacity tier. With a capped target the deepest of
//!   L1..L(n-1) that no longer fit move to the capacity tier too (never back); L0 stays on the
//!   fast tier because flushes ignore targets.
//! - With one tier there are no `db_paths`: tables live in the database directory.
//!
//! NB: a target is where RocksDB starts placing a level, not a limit on the files there: a
//! compaction's outputs and inputs coexist on the fast path until it ends (see `space`).

use crate::engine::TierDir;

/// One of RocksDB's `db_paths`: a tier (its index in the benchmark's tiers) and a target size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbPath {
    /// Index of the tier whose directory holds the path.
    pub tier: usize,
    /// RocksDB's `target_size` for the path.
    pub target: u64,
}

/// The level multiplier the benchmark gives RocksDB (and tierkv uses).
pub const LEVEL_MULTIPLIER: u64 = 10;

/// The `db_paths` for `levels_on_fast` levels on the fast tier (see the module doc); empty
/// with one tier.
pub fn db_paths(tiers: &[TierDir], levels_on_fast: usize, level_base: u64) -> Vec<DbPath> {
    if tiers.len() < 2 {
        return Vec::new();
    }
    let capacity = DbPath {
        tier: 1,
        target: u64::MAX,
    };
    if levels_on_fast == 0 {
        return vec![capacity];
    }
    let fast_cap = tiers[0].capacity.unwrap_or(u64::MAX);
    let fast = DbPath {
        tier: 0,
        target: levels_target(levels_on_fast, level_base).min(fast_cap),
    };
    vec![fast, capacity]
}

/// Bytes `GetPathId` charges for levels `0..n` (it sizes L0 like L1).
fn levels_target(n: usize, level_base: u64) -> u64 {
    (0..n).map(|level| level_size(level, level_base)).sum()
}

/// The size `GetPathId` charges for `level`.
fn level_size(level: usize, level_base: u64) -> u64 {
    let deeper = level.saturating_sub(1) as u32;
    level_base.saturating_mul(LEVEL_MULTIPLIER.saturating_pow(deeper))
}

/// The path a compaction output for `level` goes to: RocksDB's `GetPathId`.
pub fn compaction_path(paths: &[DbPath], level: usize, level_base: u64) -> usize {
    let mut path = 0;
    let mut left = paths.first().map_or(0, |p| p.target);
    let mut cur = 0;
    while path + 1 < paths.len() {
        let size = level_size(cur, level_base);
        if size <= left {
            if cur == level {
                return path;
            }
            left -= size;
            cur += 1;
        } else {
            path += 1;
            left = paths[path].target;
        }
    }
    path
}

/// The tier holding most of `level`'s tables: L0 is written by flushes (path 0), deeper levels
/// by compactions. Tier 0 when there are no `db_paths`.
pub fn tier_of_level(paths: &[DbPath], level: usize, level_base: u64) -> usize {
    let path = if level == 0 {
        0
    } else {
        compaction_path(paths, level, level_base)
    };
    paths.get(path).map_or(0, |p| p.tier)
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 256 << 20;

    fn tiers(fast_capacity: Option<u64>) -> Vec<TierDir> {
        ["fast", "capacity"]
            .iter()
            .map(|n| TierDir {
                name: n.to_string(),
                dir: n.into(),
                capacity: (*n == "fast").then_some(fast_capacity).flatten(),
                pm: false,
            })
            .collect()
    }

    #[test]
    fn pl_gives_rocksdb_no_path_on_the_fast_tier() {
        let paths = db_paths(&tiers(None), 0, BASE);
        assert_eq!(
            paths,
            [DbPath {
                tier: 1,
                target: u64::MAX
            }]
        );
        for level in 0..8 {
            assert_eq!(tier_of_level(&paths, level, BASE), 1, "L{level}");
            // Compactions into L0 (intra-L0) too.
            assert_eq!(compaction_path(&paths, level, BASE), 0, "L{level}");
        }
    }

    #[test]
    fn lad_n_puts_exactly_levels_below_n_on_the_fast_tier() {
        for n in 1..=7 {
            let paths = db_paths(&tiers(None), n, BASE);
            assert_eq!(paths[0].tier, 0);
            for level in 0..9 {
                let want = usize::from(level >= n);
                assert_eq!(tier_of_level(&paths, level, BASE), want, "lad{n} L{level}");
                assert_eq!(
                    paths[compaction_path(&paths, level, BASE)].tier,
                    want,
                    "lad{n} compaction into L{level}"
                );
            }
        }
    }

    #[test]
    fn a_capped_fast_tier_sends_the_deepest_fast_levels_to_capacity() {
        // lad3 wants L0 + L1 + L2 = 12 x base; 3 x base holds L0 and L1 only.
        let paths = db_paths(&tiers(Some(3 * BASE)), 3, BASE);
        assert_eq!(paths[0].target, 3 * BASE);
        let tiers_by_level: Vec<usize> = (0..5).map(|l| tier_of_level(&paths, l, BASE)).collect();
        assert_eq!(tiers_by_level, [0, 0, 1, 1, 1]);
        // Even a zero target keeps flushes (L0) on path 0, the fast tier.
        let paths = db_paths(&tiers(Some(0)), 2, BASE);
        assert_eq!(tier_of_level(&paths, 0, BASE), 0);
        assert_eq!(tier_of_level(&paths, 1, BASE), 1);
    }

    #[test]
    fn one_tier_has_no_db_paths() {
        let one = &tiers(None)[..1];
        assert!(db_paths(one, 0, BASE).is_empty());
        assert_eq!(tier_of_level(&[], 3, BASE), 0);
    }
}
