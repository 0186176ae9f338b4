//! Placement: which tier a new table of a given level prefers.
//!
//! SpanDB's fixed modes: `levels_on_fast = n` puts L0..L(n-1) on tier 0 and deeper levels on
//! tier 1 (the capacity tier); `n = 0` is "PL" (tier 0 holds only the WAL and MANIFEST). With a
//! single tier everything is on tier 0. Tiers after tier 1 take overflow only. Whether the
//! preferred tier has room is decided by `Tiers::place`, which falls through to later tiers.

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
    fn lad_and_pl() {
        assert_eq!(preferred_tier(0, 0, 2), 1, "PL keeps L0 off the fast tier");
        assert_eq!(preferred_tier(0, 2, 2), 0);
        assert_eq!(preferred_tier(1, 2, 2), 0);
        assert_eq!(preferred_tier(2, 2, 2), 1);
        assert_eq!(preferred_tier(5, 2, 1), 0);
    }
}
