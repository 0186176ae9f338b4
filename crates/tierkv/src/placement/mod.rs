//! Placement: which tier each table lives on, and the machinery that keeps it there.
//!
//! The subsystem owns every decision about tiers that is not a file operation: the tier a new
//! table prefers, whether a table may move deeper without a rewrite, which table migrates and
//! which one gets a replica on the fast tier, how much of the flush reserve is lent, how busy
//! each tier is, and how fast background writes to the fast tier may go. The `db` module runs
//! these decisions (copies files, writes MANIFEST edits, samples counters); nothing here does
//! I/O, takes a database lock or reads a clock (time comes in as `Instant`s).
//!
//! Invariants:
//! - Every decision is a function of data: a [`Version`](crate::version::Version), budgets,
//!   readings and the set of files busy in a compaction. That is what the tests here build.
//! - The fast tier ([`TierId::FAST`](crate::tier::TierId::FAST)) holds the WAL and MANIFEST;
//!   the upper levels have first claim on the rest of it (`policy::deep_allowance`).
//! - A compaction's inputs never migrate and never get replicas, and L0 tables never move down
//!   and never get replicas: all are about to be rewritten.
//!
//! Files:
//! - `policy`: the preferred tier of a level (LAD-n / PL), the deep-level allowance, the
//!   trivial-move rule, the output tier of a new table, and [`Placer`] (fixed or automatic).
//! - `auto`: the `placement = auto` controller: a pointer over the levels moved by readings
//!   of the fast tier, and migration hints.
//! - `iomon`: per-tier I/O rates by kind over a sliding window, utilisation against a ceiling.
//! - `reserve`: how much of the flush reserve to hold, lending the rest to replicas.
//! - `ratelimit`: the token bucket pacing background writes to the fast tier and migrations.
//! - `migrate`: which table moves between tiers for a migration hint.
//! - `replica`: which table gets a replica on the fast tier, and which replicas go first.
//! - `runs`: how many sorted runs the tree keeps below the fast tier (`capacity_levels`).

pub mod auto;
pub mod iomon;
pub mod migrate;
pub mod policy;
pub mod ratelimit;
pub mod replica;
pub mod reserve;
pub mod runs;

pub use policy::Placer;

#[cfg(test)]
pub(crate) mod tests {
    use crate::tier::TierId;
    use crate::version::tests::meta;
    use crate::version::Version;
    use std::sync::Arc;

    pub(crate) const MIB: u64 = 1 << 20;

    /// A version of four levels holding `(level, number, tier, MiB)` tables, where the tier is
    /// `'F'` (fast) or `'C'` (capacity). Each table has its own key range, in number order.
    pub(crate) fn shape(tables: &[(usize, u64, char, u64)]) -> Version {
        let added: Vec<_> = tables
            .iter()
            .map(|&(level, number, tier, mib)| {
                let (lo, hi) = (format!("k{number:04}"), format!("k{number:04}z"));
                let mut f = (*meta(number, lo.as_bytes(), hi.as_bytes(), mib * MIB, 1)).clone();
                f.tier = match tier {
                    'F' => TierId::FAST,
                    'C' => TierId::CAPACITY,
                    _ => panic!("tier {tier}: 'F' or 'C'"),
                };
                (level, Arc::new(f))
            })
            .collect();
        Version::empty(4).apply(&[], &added).expect("valid version")
    }
}
