//! MSC (multi-tiered storage compaction) scoring: which key range of the hot store to demote.
//!
//! Candidates are key ranges that follow the capacity tier's table bounds, so a demotion
//! rewrites few capacity-tier tables. A range's score is benefit / cost:
//! - benefit: the fast-tier space freed, weighted by coldness: the sum over the hot objects
//!   of the range of `1 / (clock + 1)` (1 for untracked keys);
//! - cost: `F (2 - o) / (1 - p) + 1`, where `F` is capacity-tier objects per hot object in
//!   the range (the rewrite amplification of merging into them), `p` the share of popular hot
//!   objects (which stay, so only `1 - p` of the range moves), `o` the share of hot objects
//!   whose key also has a capacity-tier version (those replace an entry rather than add one).

pub(crate) use crate::options::MscPolicy;
use rand::Rng;

/// What a candidate range holds.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct RangeStats {
    /// Hot objects in the range.
    pub fast_objects: u64,
    /// Capacity-tier objects in the range (entries of the tables that bound it).
    pub flash_objects: u64,
    /// Hot objects the mapper pins.
    pub popular: u64,
    /// Hot objects whose key also has a capacity-tier version.
    pub overlap: u64,
    /// Sum of the hot objects' coldness.
    pub coldness: f64,
}

/// `benefit / cost` of demoting a range; 0 when nothing in it can move.
pub(crate) fn score(r: &RangeStats) -> f64 {
    if r.fast_objects == 0 || r.popular >= r.fast_objects {
        return 0.0;
    }
    let fast = r.fast_objects as f64;
    let f = r.flash_objects as f64 / fast;
    let p = r.popular as f64 / fast;
    let o = (r.overlap as f64 / fast).min(1.0);
    let cost = f * (2.0 - o) / (1.0 - p) + 1.0;
    r.coldness / cost
}

/// Candidates the approximate policy samples.
pub(crate) const SAMPLES: usize = 8;

/// The index of the range to demote among `n` candidates, or `None` if there is none.
/// `stats(i)` counts candidate `i` (called only for the candidates a policy looks at);
/// `cursor` is the round-robin position, advanced here.
pub(crate) fn choose(
    policy: MscPolicy,
    n: usize,
    stats: &mut dyn FnMut(usize) -> RangeStats,
    cursor: &mut usize,
    rng: &mut impl Rng,
) -> Option<usize> {
    if n == 0 {
        return None;
    }
    let best_of = |idx: &mut dyn Iterator<Item = usize>,
                   stats: &mut dyn FnMut(usize) -> RangeStats| {
        let mut best: Option<(usize, f64)> = None;
        for i in idx {
            let s = score(&stats(i));
            if s > 0.0 && best.is_none_or(|(_, b)| s > b) {
                best = Some((i, s));
            }
        }
        best.map(|(i, _)| i)
    };
    match policy {
        MscPolicy::Random => Some(rng.gen_range(0..n)),
        MscPolicy::RoundRobin => {
            let i = *cursor % n;
            *cursor = i + 1;
            Some(i)
        }
        MscPolicy::Precise => best_of(&mut (0..n), stats),
        MscPolicy::Approximate => {
            let picks = rand::seq::index::sample(rng, n, SAMPLES.min(n));
            best_of(&mut picks.into_iter(), stats).or_else(|| Some(rng.gen_range(0..n)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn range(fast: u64, flash: u64, popular: u64, overlap: u64, coldness: f64) -> RangeStats {
        RangeStats {
            fast_objects: fast,
            flash_objects: flash,
            popular,
            overlap,
            coldness,
        }
    }

    #[test]
    fn score_formula() {
        // F = 2, o = 0.5, p = 0.5: cost = 2 * 1.5 / 0.5 + 1 = 7.
        let r = range(100, 200, 50, 50, 70.0);
        assert!((score(&r) - 10.0).abs() < 1e-9);
        // Nothing on the capacity tier: cost 1, score = coldness.
        assert!((score(&range(10, 0, 0, 0, 10.0)) - 10.0).abs() < 1e-9);
        assert_eq!(score(&range(10, 5, 10, 0, 10.0)), 0.0);
        assert_eq!(score(&range(0, 5, 0, 0, 0.0)), 0.0);
    }

    #[test]
    fn colder_and_cheaper_ranges_win() {
        let cold = range(100, 100, 0, 0, 100.0);
        let warm = range(100, 100, 0, 0, 25.0);
        assert!(score(&cold) > score(&warm));
        let cheap = range(100, 10, 0, 0, 50.0);
        let dear = range(100, 1000, 0, 0, 50.0);
        assert!(score(&cheap) > score(&dear));
        // Overlap makes a merge cheaper; popularity makes it dearer.
        assert!(score(&range(100, 100, 0, 100, 50.0)) > score(&range(100, 100, 0, 0, 50.0)));
        assert!(score(&range(100, 100, 0, 0, 50.0)) > score(&range(100, 100, 50, 0, 50.0)));
    }

    #[test]
    fn policies_on_constructed_state() {
        let ranges = [
            range(100, 1000, 0, 0, 10.0),
            range(100, 10, 0, 0, 90.0),
            range(100, 100, 90, 0, 20.0),
            range(100, 500, 0, 0, 50.0),
        ];
        let mut rng = SmallRng::seed_from_u64(1);
        let mut cursor = 0;
        let mut counted = 0;
        let mut stats = |i: usize| {
            counted += 1;
            ranges[i]
        };
        assert_eq!(
            choose(MscPolicy::Precise, 4, &mut stats, &mut cursor, &mut rng),
            Some(1)
        );
        assert_eq!(counted, 4);
        let mut stats = |i: usize| ranges[i];
        let rr: Vec<_> = (0..5)
            .map(|_| choose(MscPolicy::RoundRobin, 4, &mut stats, &mut cursor, &mut rng))
            .collect();
        assert_eq!(rr, vec![Some(0), Some(1), Some(2), Some(3), Some(0)]);
        // Up to 8 candidates, the sample is all of them.
        for _ in 0..20 {
            let got = choose(MscPolicy::Approximate, 4, &mut stats, &mut cursor, &mut rng);
            assert_eq!(got, Some(1));
        }
        // Of 64 candidates (one good), 8 distinct samples find it about 1 time in 8.
        let mut many = |i: usize| if i == 5 { ranges[1] } else { ranges[0] };
        let wins = (0..400)
            .filter(|_| {
                choose(MscPolicy::Approximate, 64, &mut many, &mut cursor, &mut rng) == Some(5)
            })
            .count();
        assert!((25..=80).contains(&wins), "{wins}");
        assert!(choose(MscPolicy::Random, 4, &mut stats, &mut cursor, &mut rng).unwrap() < 4);
        assert_eq!(
            choose(MscPolicy::Precise, 0, &mut stats, &mut cursor, &mut rng),
            None
        );
    }
}
