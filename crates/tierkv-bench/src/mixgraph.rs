//! RocksDB's MixGraph workload (Cao et al., "Characterizing, Modeling, and Benchmarking
//! RocksDB Key-Value Workloads at Facebook", FAST '20), with the parameters that paper fits
//! to its production traces and db_bench's `mixgraph` takes:
//!
//! - operations: get 0.83, put 0.14, seek 0.03;
//! - key access: a power law, CDF `a * x^b` with `a = 0.002312`, `b = 0.3467`; the drawn rank
//!   is hashed over the key space, so hot keys are scattered, not adjacent;
//! - value sizes: generalized Pareto with shape `k = 0.2615`, scale `sigma = 25.45`,
//!   location 0, kept within 10..=1024 bytes (db_bench's default `mix_max_value_size`);
//! - seek lengths (keys read after a seek): generalized Pareto with `k = 2.517`,
//!   `sigma = 14.236`, kept within 1..=10000 (db_bench's `mix_max_scan_len`).
//!
//! Keys keep the fixed `--key-size`, as db_bench's mixgraph does.

use rand::Rng;

/// Share of gets.
pub const GET: f64 = 0.83;
/// Share of puts.
pub const PUT: f64 = 0.14;
/// Share of seeks (range scans).
pub const SEEK: f64 = 0.03;

/// The key-access power law.
pub const KEY_POWER: PowerLaw = PowerLaw {
    a: 0.002312,
    b: 0.3467,
};
/// The value-size distribution.
pub const VALUE_SIZE: GeneralizedPareto = GeneralizedPareto {
    k: 0.2615,
    sigma: 25.45,
    theta: 0.0,
};
/// Smallest value drawn, in bytes.
pub const MIN_VALUE_SIZE: usize = 10;
/// Largest value drawn, in bytes.
pub const MAX_VALUE_SIZE: usize = 1024;
/// The seek-length distribution.
pub const SEEK_LENGTH: GeneralizedPareto = GeneralizedPareto {
    k: 2.517,
    sigma: 14.236,
    theta: 0.0,
};
/// Longest seek drawn, in keys.
pub const MAX_SEEK_LENGTH: usize = 10_000;

/// A power law with CDF `a * x^b` over ranks `x >= 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PowerLaw {
    pub a: f64,
    pub b: f64,
}

impl PowerLaw {
    /// The rank at CDF value `u` in `[0, 1)` (the inverse of the CDF, rounded up).
    pub fn rank(&self, u: f64) -> u64 {
        (u / self.a).powf(1.0 / self.b).ceil().max(1.0) as u64
    }
}

/// A generalized Pareto distribution: shape `k`, scale `sigma`, location `theta`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GeneralizedPareto {
    pub k: f64,
    pub sigma: f64,
    pub theta: f64,
}

impl GeneralizedPareto {
    /// The value at CDF value `u` in `[0, 1)` (inverse transform sampling).
    pub fn at(&self, u: f64) -> f64 {
        if self.k == 0.0 {
            return self.theta - self.sigma * (1.0 - u).ln();
        }
        self.theta + self.sigma * ((1.0 - u).powf(-self.k) - 1.0) / self.k
    }
}

/// Draws a value size.
pub fn value_size(rng: &mut impl Rng) -> usize {
    let size = VALUE_SIZE.at(rng.gen()).round();
    (size.min(MAX_VALUE_SIZE as f64) as usize).max(MIN_VALUE_SIZE)
}

/// Draws a seek length.
pub fn seek_length(rng: &mut impl Rng) -> usize {
    let len = SEEK_LENGTH.at(rng.gen()).round();
    (len.min(MAX_SEEK_LENGTH as f64) as usize).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::SeedableRng;

    fn median(mut v: Vec<usize>) -> usize {
        v.sort_unstable();
        v[v.len() / 2]
    }

    #[test]
    fn value_sizes_follow_the_fitted_pareto() {
        let mut rng = SmallRng::seed_from_u64(7);
        let sizes: Vec<usize> = (0..20_000).map(|_| value_size(&mut rng)).collect();
        // The distribution's median: sigma * (2^k - 1) / k = 19.2 bytes.
        let m = median(sizes.clone());
        assert!((17..=22).contains(&m), "median {m}");
        assert!(sizes
            .iter()
            .all(|&s| (MIN_VALUE_SIZE..=MAX_VALUE_SIZE).contains(&s)));
        let large = sizes.iter().filter(|&&s| s > 100).count();
        assert!(large > 200 && large < 2_000, "{large} values over 100 B");
    }

    #[test]
    fn seek_lengths_are_heavy_tailed_and_capped() {
        let mut rng = SmallRng::seed_from_u64(7);
        let lens: Vec<usize> = (0..20_000).map(|_| seek_length(&mut rng)).collect();
        // Median: 14.236 * (2^2.517 - 1) / 2.517 = 26.7 keys.
        let m = median(lens.clone());
        assert!((24..=30).contains(&m), "median {m}");
        assert!(lens.contains(&MAX_SEEK_LENGTH));
    }

    #[test]
    fn key_ranks_follow_the_power_law() {
        // CDF a * x^b: the share of draws at or below rank x.
        for x in [1_000u64, 100_000, 10_000_000] {
            let expected = KEY_POWER.a * (x as f64).powf(KEY_POWER.b);
            let mut rng = SmallRng::seed_from_u64(x);
            let n = 50_000;
            let below = (0..n).filter(|_| KEY_POWER.rank(rng.gen()) <= x).count();
            let got = below as f64 / n as f64;
            assert!(
                (got - expected).abs() < 0.01,
                "rank {x}: {got} vs {expected}"
            );
        }
        assert_eq!(KEY_POWER.rank(0.0), 1);
    }
}
