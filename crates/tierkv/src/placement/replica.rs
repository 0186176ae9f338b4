//! Which table gets a replica on the fast tier, and which replicas give their room back first.
//!
//! A replica is a byte-for-byte copy, on the fast tier, of a slower tier's table, kept in room
//! no table needs (`db::replica` makes, reads and drops them). The choice:
//! - **Which**: the table on a slower tier whose own file served the most data-block reads
//!   per byte ([`reads_per_mib`]) since it was opened; with no reads yet, the deepest level's
//!   first, oldest first: those are the tables compactions rewrite last, and a replica of an
//!   upper level's table is soon deleted with its table.
//! - **Dropped first**: the replica read least per byte, oldest first ([`coldest_first`]).
//!
//! INVARIANT: an L0 table, a table on the fast tier, a compaction's input (`busy`) and a table
//! that already has a replica are never chosen: the first and third are about to be
//! rewritten.
//!
//! Pure policy over a [`Version`] and read counts.

use crate::version::{FileMeta, Version};
use std::cmp::Reverse;
use std::collections::HashSet;
use std::sync::Arc;

/// A registered replica and how much it was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaUse {
    /// The table's number.
    pub number: u64,
    /// Bytes the replica takes.
    pub size: u64,
    /// Data blocks read from the replica since it was opened (0 while it is being copied).
    pub reads: u64,
}

/// The table to replicate next in `version`, if any. `reads(number)` gives the data blocks
/// read from the table's own file, or `None` if it has a replica (complete or being copied);
/// tables in `busy` are left alone.
pub fn pick(
    version: &Version,
    busy: &HashSet<u64>,
    reads: impl Fn(u64) -> Option<u64>,
) -> Option<Arc<FileMeta>> {
    let (_, _, file) = version
        .levels
        .iter()
        .enumerate()
        .flat_map(|(level, files)| files.iter().map(move |f| (level, f)))
        .filter(|(level, f)| *level > 0 && !f.tier.is_fast() && !busy.contains(&f.number))
        .filter_map(|(level, f)| Some((reads_per_mib(reads(f.number)?, f.size), level, f)))
        .max_by_key(|(heat, level, f)| (*heat, *level, Reverse(f.number)))?;
    Some(Arc::clone(file))
}

/// Orders `replicas` the way they give their room back: least read per byte first, then
/// oldest first.
pub fn coldest_first(replicas: &mut [ReplicaUse]) {
    replicas.sort_by_key(|r| (reads_per_mib(r.reads, r.size), r.number));
}

/// Block reads per MiB of a table of `size` bytes: what ranks tables to copy and replicas to
/// drop.
pub fn reads_per_mib(reads: u64, size: u64) -> u64 {
    reads.saturating_mul(1 << 20) / size.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::placement::tests::{shape, MIB};
    use std::collections::HashMap;

    /// `pick` with read counts from `(number, reads)` pairs; unlisted tables have none, and
    /// tables in `replicated` have a replica.
    fn pick_with(
        v: &Version,
        busy: &[u64],
        read: &[(u64, u64)],
        replicated: &[u64],
    ) -> Option<u64> {
        let read: HashMap<u64, u64> = read.iter().copied().collect();
        let busy = busy.iter().copied().collect();
        let reads = |n| (!replicated.contains(&n)).then(|| read.get(&n).copied().unwrap_or(0));
        pick(v, &busy, reads).map(|f| f.number)
    }

    #[test]
    fn the_most_read_per_byte_goes_first() {
        let v = shape(&[(1, 1, 'C', 10), (2, 2, 'C', 40), (2, 3, 'C', 10)]);
        // Table 2 has more reads, but table 1 more per byte.
        assert_eq!(
            pick_with(&v, &[], &[(1, 100), (2, 200), (3, 50)], &[]),
            Some(1)
        );
        assert_eq!(pick_with(&v, &[], &[(1, 100), (2, 800)], &[]), Some(2));
    }

    #[test]
    fn with_no_reads_the_deepest_level_then_the_oldest_goes_first() {
        let v = shape(&[
            (1, 1, 'C', 10),
            (3, 5, 'C', 10),
            (3, 4, 'C', 10),
            (2, 2, 'C', 10),
        ]);
        assert_eq!(pick_with(&v, &[], &[], &[]), Some(4));
        assert_eq!(pick_with(&v, &[], &[], &[4]), Some(5));
        assert_eq!(pick_with(&v, &[], &[], &[4, 5]), Some(2));
    }

    #[test]
    fn never_l0_the_fast_tier_a_busy_or_a_replicated_table() {
        let v = shape(&[
            (0, 1, 'C', 10),
            (1, 2, 'F', 10),
            (2, 3, 'C', 10),
            (2, 4, 'C', 10),
        ]);
        let hot = [(1, 1000), (2, 1000), (3, 10), (4, 1)];
        assert_eq!(pick_with(&v, &[], &hot, &[]), Some(3));
        assert_eq!(pick_with(&v, &[3], &hot, &[]), Some(4));
        assert_eq!(pick_with(&v, &[3], &hot, &[4]), None);
    }

    #[test]
    fn replicas_are_dropped_least_read_per_byte_then_oldest_first() {
        let use_of = |number, mib, reads| ReplicaUse {
            number,
            size: mib * MIB,
            reads,
        };
        let mut replicas = vec![
            use_of(1, 10, 100),
            use_of(2, 40, 100),
            use_of(3, 10, 0),
            use_of(4, 20, 50),
        ];
        coldest_first(&mut replicas);
        let order: Vec<u64> = replicas.iter().map(|r| r.number).collect();
        assert_eq!(order, [3, 2, 4, 1]);
    }

    #[test]
    fn reads_per_mib_counts_an_empty_table_as_one_byte() {
        assert_eq!(reads_per_mib(3, 2 * MIB), 1);
        assert_eq!(reads_per_mib(1, 0), 1 << 20);
    }
}
