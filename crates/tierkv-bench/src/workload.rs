//! Workloads: key distributions, value sizes and operation mixes, all deterministic per seed.
//!
//! Every engine sees the same key sequence: each client thread draws from its own RNG seeded
//! with `seed + thread`, and the load phase inserts a fixed permutation of the records.

use crate::mixgraph::{self, PowerLaw};
use anyhow::{bail, Context, Result};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::fmt;
use std::str::FromStr;

/// The benchmark workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Workload {
    /// Inserts keys 0..ops in ascending order into an empty database.
    FillSeq,
    /// Inserts `ops` keys drawn uniformly from 0..records into an empty database.
    FillRandom,
    /// Loads the records, then overwrites random keys.
    Overwrite,
    /// Loads the records, then reads random keys.
    ReadRandom,
    /// Loads the records, then reads them in key order with an iterator.
    ReadSeq,
    /// Loads the records, then scans `scan_length` keys from random start keys.
    ScanRandom,
    /// YCSB A..F (index 0..=5).
    Ycsb(u8),
    /// Bursts of 50/50 read-write, then all-write, then 95% read (SpanDB section 5.2).
    Multiphase,
    /// Loads the records, then writes this percentage of operations (updates) and reads the
    /// rest: WALTZ's write-ratio mixes (`write100`, `write70`, `write30`).
    WriteRatio(u8),
    /// RocksDB's MixGraph (Cao et al., FAST '20): get/put/seek 0.83/0.14/0.03, keys drawn by
    /// a power law, value sizes and seek lengths by generalized Pareto distributions.
    MixGraph,
}

impl Workload {
    /// Every workload, for help texts and smoke tests.
    pub const ALL: [Workload; 17] = [
        Workload::FillSeq,
        Workload::FillRandom,
        Workload::Overwrite,
        Workload::ReadRandom,
        Workload::ReadSeq,
        Workload::ScanRandom,
        Workload::Ycsb(0),
        Workload::Ycsb(1),
        Workload::Ycsb(2),
        Workload::Ycsb(3),
        Workload::Ycsb(4),
        Workload::Ycsb(5),
        Workload::Multiphase,
        Workload::WriteRatio(100),
        Workload::WriteRatio(70),
        Workload::WriteRatio(30),
        Workload::MixGraph,
    ];

    /// True if the run phase needs the records loaded first.
    pub fn needs_load(self) -> bool {
        !matches!(self, Workload::FillSeq | Workload::FillRandom)
    }

    /// The operation mix of the run phase at progress `fraction` (0..1) of the run.
    pub fn mix(self, fraction: f64) -> Mix {
        match self {
            Workload::FillSeq | Workload::FillRandom | Workload::Overwrite => {
                Mix::only(OpKind::Update)
            }
            Workload::ReadRandom | Workload::ReadSeq => Mix::only(OpKind::Read),
            Workload::ScanRandom => Mix::only(OpKind::Scan),
            Workload::Ycsb(0) => Mix::new(&[(OpKind::Read, 0.5), (OpKind::Update, 0.5)]),
            Workload::Ycsb(1) => Mix::new(&[(OpKind::Read, 0.95), (OpKind::Update, 0.05)]),
            Workload::Ycsb(2) => Mix::only(OpKind::Read),
            Workload::Ycsb(3) => Mix::new(&[(OpKind::Read, 0.95), (OpKind::Insert, 0.05)]),
            Workload::Ycsb(4) => Mix::new(&[(OpKind::Scan, 0.95), (OpKind::Insert, 0.05)]),
            Workload::Ycsb(_) => Mix::new(&[(OpKind::Read, 0.5), (OpKind::ReadModifyWrite, 0.5)]),
            Workload::Multiphase => match (fraction * 3.0) as u32 {
                0 => Mix::new(&[(OpKind::Read, 0.5), (OpKind::Update, 0.5)]),
                1 => Mix::only(OpKind::Update),
                _ => Mix::new(&[(OpKind::Read, 0.95), (OpKind::Update, 0.05)]),
            },
            Workload::WriteRatio(percent) => {
                let writes = f64::from(percent.min(100)) / 100.0;
                Mix::new(&[(OpKind::Update, writes), (OpKind::Read, 1.0 - writes)])
            }
            Workload::MixGraph => Mix::new(&[
                (OpKind::Read, mixgraph::GET),
                (OpKind::Update, mixgraph::PUT),
                (OpKind::Scan, mixgraph::SEEK),
            ]),
        }
    }

    /// The key distribution YCSB prescribes, if it overrides the user's choice.
    pub fn forced_distribution(self, theta: f64) -> Option<Distribution> {
        match self {
            Workload::Ycsb(3) => Some(Distribution::Latest(theta)),
            Workload::FillSeq | Workload::ReadSeq => Some(Distribution::Sequential),
            Workload::MixGraph => Some(Distribution::PowerLaw(mixgraph::KEY_POWER)),
            _ => None,
        }
    }
}

impl FromStr for Workload {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "fillseq" => Workload::FillSeq,
            "fillrandom" => Workload::FillRandom,
            "overwrite" => Workload::Overwrite,
            "readrandom" => Workload::ReadRandom,
            "readseq" => Workload::ReadSeq,
            "scanrandom" => Workload::ScanRandom,
            "multiphase" => Workload::Multiphase,
            "mixgraph" => Workload::MixGraph,
            _ if s.starts_with("write") => match s["write".len()..].parse::<u8>() {
                Ok(percent) if percent <= 100 => Workload::WriteRatio(percent),
                _ => bail!("unknown workload {s:?}: a write ratio is write0..write100"),
            },
            _ => match s.strip_prefix("ycsb-").map(str::as_bytes) {
                Some([c @ b'a'..=b'f']) => Workload::Ycsb(c - b'a'),
                _ => bail!(
                    "unknown workload {s:?}: expected one of {}",
                    Workload::ALL.map(|w| w.to_string()).join(", ")
                ),
            },
        })
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Workload::FillSeq => write!(f, "fillseq"),
            Workload::FillRandom => write!(f, "fillrandom"),
            Workload::Overwrite => write!(f, "overwrite"),
            Workload::ReadRandom => write!(f, "readrandom"),
            Workload::ReadSeq => write!(f, "readseq"),
            Workload::ScanRandom => write!(f, "scanrandom"),
            Workload::Ycsb(i) => write!(f, "ycsb-{}", (b'a' + i) as char),
            Workload::Multiphase => write!(f, "multiphase"),
            Workload::WriteRatio(percent) => write!(f, "write{percent}"),
            Workload::MixGraph => write!(f, "mixgraph"),
        }
    }
}

/// Kinds of operations, as reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Point read.
    Read,
    /// Write of an existing (or random) key.
    Update,
    /// Write of a new key.
    Insert,
    /// Range scan.
    Scan,
    /// Read, then write the same key.
    ReadModifyWrite,
    /// Point reads issued together as one multi-get (`--multiget N`); never drawn by a mix,
    /// the client forms it from consecutive reads. Its latency is one sample per multi-get.
    MultiGet,
}

impl OpKind {
    /// Every kind, in report order.
    pub const ALL: [OpKind; 6] = [
        OpKind::Read,
        OpKind::Update,
        OpKind::Insert,
        OpKind::Scan,
        OpKind::ReadModifyWrite,
        OpKind::MultiGet,
    ];

    /// Name used in reports and JSON.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Read => "read",
            OpKind::Update => "update",
            OpKind::Insert => "insert",
            OpKind::Scan => "scan",
            OpKind::ReadModifyWrite => "rmw",
            OpKind::MultiGet => "mget",
        }
    }
}

/// An operation mix: cumulative probabilities.
#[derive(Debug, Clone)]
pub struct Mix {
    cumulative: Vec<(OpKind, f64)>,
}

impl Mix {
    fn new(parts: &[(OpKind, f64)]) -> Self {
        let mut acc = 0.0;
        let cumulative = parts
            .iter()
            .map(|&(k, p)| {
                acc += p;
                (k, acc)
            })
            .collect();
        Mix { cumulative }
    }

    fn only(kind: OpKind) -> Self {
        Mix::new(&[(kind, 1.0)])
    }

    /// Draws an operation kind.
    pub fn pick(&self, rng: &mut impl Rng) -> OpKind {
        let u: f64 = rng.gen();
        self.cumulative
            .iter()
            .find(|&&(_, c)| u < c)
            .or(self.cumulative.last())
            .map(|&(k, _)| k)
            .expect("a mix has at least one kind")
    }
}

/// How keys are chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// YCSB's scrambled zipfian with this theta.
    Zipfian(f64),
    /// Recently inserted keys most likely (YCSB's "latest"), zipfian with this theta.
    Latest(f64),
    /// Keys in order (fillseq, readseq).
    Sequential,
    /// Ranks drawn by a power law and hashed over the key space (MixGraph).
    PowerLaw(PowerLaw),
}

impl Distribution {
    /// Parses `uniform`, `zipfian` or `latest` with the given theta.
    pub fn parse(name: &str, theta: f64) -> Result<Self> {
        if !(0.0..1.0).contains(&theta) || theta == 0.0 {
            bail!("--zipf-theta {theta} is out of range: accepted 0 < theta < 1");
        }
        Ok(match name {
            "uniform" => Distribution::Uniform,
            "zipfian" => Distribution::Zipfian(theta),
            "latest" => Distribution::Latest(theta),
            _ => bail!("unknown distribution {name:?}: expected uniform, zipfian or latest"),
        })
    }
}

/// YCSB's zipfian generator over `0..n` (Gray et al., "Quickly generating billion-record
/// synthetic databases"): rank 0 is the most popular.
#[derive(Debug, Clone)]
pub struct Zipfian {
    n: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
}

fn zeta(n: u64, theta: f64) -> f64 {
    (1..=n).map(|i| 1.0 / (i as f64).powf(theta)).sum()
}

impl Zipfian {
    /// A generator over `n >= 1` items.
    pub fn new(n: u64, theta: f64) -> Self {
        let n = n.max(1);
        let zetan = zeta(n, theta);
        let zeta2 = zeta(2, theta);
        Zipfian {
            n,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta2 / zetan),
        }
    }

    /// Draws a rank in `0..n`.
    pub fn next(&self, rng: &mut impl Rng) -> u64 {
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return 1;
        }
        let v = (self.n as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as u64;
        v.min(self.n - 1)
    }
}

/// FNV-1a 64 of a number's bytes: YCSB's scrambling hash.
pub fn fnv64(v: u64) -> u64 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in v.to_le_bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    h
}

/// Draws key indexes for one client thread.
pub struct KeyChooser {
    dist: Distribution,
    records: u64,
    zipf: Option<Zipfian>,
    next_seq: u64,
}

impl KeyChooser {
    /// A chooser over `records` keys; `start` positions sequential access.
    pub fn new(dist: Distribution, records: u64, start: u64) -> Self {
        let zipf = match dist {
            Distribution::Zipfian(t) | Distribution::Latest(t) => Some(Zipfian::new(records, t)),
            _ => None,
        };
        KeyChooser {
            dist,
            records: records.max(1),
            zipf,
            next_seq: start,
        }
    }

    /// The next key index; `newest` is the highest index inserted so far (for `Latest`).
    pub fn next(&mut self, rng: &mut impl Rng, newest: u64) -> u64 {
        match self.dist {
            Distribution::Uniform => rng.gen_range(0..self.records),
            Distribution::Zipfian(_) => {
                let rank = self.zipf.as_ref().expect("zipfian").next(rng);
                fnv64(rank) % self.records
            }
            Distribution::Latest(_) => {
                let back = self.zipf.as_ref().expect("zipfian").next(rng);
                newest.saturating_sub(back)
            }
            Distribution::PowerLaw(law) => fnv64(law.rank(rng.gen())) % self.records,
            Distribution::Sequential => {
                let k = self.next_seq;
                self.next_seq += 1;
                k
            }
        }
    }
}

/// Value sizes: one size or a weighted mix (`256:50,4096:50`), or MixGraph's distribution.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValueSizes {
    choices: Vec<(usize, u32)>,
    /// Draw from MixGraph's generalized Pareto instead of `choices`.
    mixgraph: bool,
}

impl FromStr for ValueSizes {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> Result<Self> {
        let mut choices = Vec::new();
        for part in s.split(',') {
            let (size, weight) = match part.split_once(':') {
                Some((size, w)) => (
                    size,
                    w.trim()
                        .parse()
                        .with_context(|| format!("weight in {part:?}"))?,
                ),
                None => (part, 1),
            };
            let size: usize = size
                .trim()
                .parse()
                .with_context(|| format!("--value-size {part:?}: not a size in bytes"))?;
            if size > 64 << 20 {
                bail!("--value-size {size} exceeds the 64 MiB value limit");
            }
            choices.push((size, weight));
        }
        if choices.iter().all(|&(_, w)| w == 0) {
            bail!("--value-size {s:?}: weights must not all be zero");
        }
        Ok(ValueSizes {
            choices,
            mixgraph: false,
        })
    }
}

impl ValueSizes {
    /// MixGraph's value sizes (see [`mixgraph`]).
    pub fn mixgraph() -> ValueSizes {
        ValueSizes {
            choices: vec![(mixgraph::MAX_VALUE_SIZE, 1)],
            mixgraph: true,
        }
    }

    /// Draws a value size.
    pub fn pick(&self, rng: &mut impl Rng) -> usize {
        if self.mixgraph {
            return mixgraph::value_size(rng);
        }
        let total: u32 = self.choices.iter().map(|&(_, w)| w).sum();
        let mut x = rng.gen_range(0..total);
        for &(size, w) in &self.choices {
            if x < w {
                return size;
            }
            x -= w;
        }
        self.choices[0].0
    }
}

/// Formats key index `i` as a fixed-width key of `len` bytes that sorts like `i`.
pub fn format_key(i: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    let digits = format!("{i:020}");
    if len >= digits.len() {
        out.resize(len - digits.len(), b'0');
        out.extend_from_slice(digits.as_bytes());
    } else {
        out.extend_from_slice(&digits.as_bytes()[digits.len() - len..]);
    }
}

/// The order in which the load phase inserts records: a deterministic permutation, so the
/// load is random-order like YCSB's hashed insert order.
pub fn load_order(records: u64, seed: u64) -> Vec<u64> {
    use rand::seq::SliceRandom;
    let mut order: Vec<u64> = (0..records).collect();
    order.shuffle(&mut SmallRng::seed_from_u64(seed ^ 0x10ad));
    order
}

/// A thread's RNG.
pub fn thread_rng(seed: u64, thread: usize) -> SmallRng {
    SmallRng::seed_from_u64(
        seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .wrapping_add(thread as u64),
    )
}

/// Fills `buf` with a value of a size drawn from `sizes`, of pseudo-random (incompressible)
/// bytes like fresh user data.
pub fn fill_value(rng: &mut impl Rng, sizes: &ValueSizes, buf: &mut Vec<u8>) {
    let len = sizes.pick(rng);
    buf.resize(len, 0);
    rng.fill(&mut buf[..]);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn ycsb_mixes_have_their_proportions() {
        let mut rng = thread_rng(7, 0);
        for (w, kind, want) in [
            (Workload::Ycsb(0), OpKind::Read, 0.5),
            (Workload::Ycsb(1), OpKind::Read, 0.95),
            (Workload::Ycsb(2), OpKind::Read, 1.0),
            (Workload::Ycsb(3), OpKind::Insert, 0.05),
            (Workload::Ycsb(4), OpKind::Scan, 0.95),
            (Workload::Ycsb(5), OpKind::ReadModifyWrite, 0.5),
            (Workload::WriteRatio(100), OpKind::Update, 1.0),
            (Workload::WriteRatio(70), OpKind::Update, 0.7),
            (Workload::WriteRatio(30), OpKind::Update, 0.3),
            (Workload::WriteRatio(30), OpKind::Read, 0.7),
            (Workload::MixGraph, OpKind::Read, 0.83),
            (Workload::MixGraph, OpKind::Update, 0.14),
            (Workload::MixGraph, OpKind::Scan, 0.03),
        ] {
            let mix = w.mix(0.0);
            let n = 100_000;
            let hits = (0..n).filter(|_| mix.pick(&mut rng) == kind).count();
            let share = hits as f64 / n as f64;
            assert!(
                (share - want).abs() < 0.01,
                "{w}: {kind:?} share {share}, want {want}"
            );
        }
    }

    #[test]
    fn multiphase_changes_mix_by_phase() {
        let mut rng = thread_rng(1, 0);
        let writes = |f: f64, rng: &mut SmallRng| {
            let mix = Workload::Multiphase.mix(f);
            (0..10_000)
                .filter(|_| mix.pick(rng) == OpKind::Update)
                .count()
        };
        assert!((4_500..5_500).contains(&writes(0.1, &mut rng)));
        assert_eq!(writes(0.5, &mut rng), 10_000);
        assert!(writes(0.9, &mut rng) < 800);
    }

    #[test]
    fn zipfian_is_skewed_and_in_range() {
        let z = Zipfian::new(1000, 0.99);
        let mut rng = thread_rng(3, 0);
        let mut counts = vec![0u32; 1000];
        for _ in 0..200_000 {
            counts[z.next(&mut rng) as usize] += 1;
        }
        // With theta 0.99 over 1000 items the top item takes about 1/zeta(1000) ~ 13%.
        let top = counts[0] as f64 / 200_000.0;
        assert!((0.10..0.16).contains(&top), "top share {top}");
        assert!(counts[0] > counts[1] && counts[1] > counts[10] && counts[10] > counts[500]);
        let top10: u32 = counts[..10].iter().sum();
        assert!(top10 as f64 / 200_000.0 > 0.35);
    }

    #[test]
    fn scrambled_zipfian_spreads_hot_keys() {
        let mut c = KeyChooser::new(Distribution::Zipfian(0.99), 10_000, 0);
        let mut rng = thread_rng(5, 0);
        let mut counts: HashMap<u64, u32> = HashMap::new();
        for _ in 0..100_000 {
            *counts.entry(c.next(&mut rng, 0)).or_default() += 1;
        }
        let hottest = counts
            .iter()
            .max_by_key(|(_, &n)| n)
            .map(|(&k, _)| k)
            .unwrap();
        assert_ne!(
            hottest, 0,
            "scrambling moves the hottest rank away from key 0"
        );
        assert!(counts.len() > 1000 && counts.len() < 10_000);
    }

    #[test]
    fn latest_prefers_recent_keys() {
        let mut c = KeyChooser::new(Distribution::Latest(0.99), 10_000, 0);
        let mut rng = thread_rng(9, 0);
        let recent = (0..10_000)
            .filter(|_| c.next(&mut rng, 9_999) >= 9_900)
            .count();
        assert!(recent > 5_000, "recent share {recent}");
    }

    #[test]
    fn sequences_are_deterministic_per_seed_and_thread() {
        let draw = |seed, thread| {
            let mut rng = thread_rng(seed, thread);
            let mut c = KeyChooser::new(Distribution::Zipfian(0.99), 1_000_000, 0);
            (0..100).map(|_| c.next(&mut rng, 0)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42, 1), draw(42, 1));
        assert_ne!(draw(42, 1), draw(42, 2));
        assert_ne!(draw(42, 1), draw(43, 1));
        assert_eq!(load_order(1000, 5), load_order(1000, 5));
    }

    #[test]
    fn keys_sort_like_indexes_and_have_the_asked_length() {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        format_key(99, 16, &mut a);
        format_key(100, 16, &mut b);
        assert_eq!(a.len(), 16);
        assert!(a < b);
        format_key(123, 8, &mut a);
        assert_eq!(a, b"00000123");
    }

    #[test]
    fn value_sizes_parse_and_mix() {
        let v: ValueSizes = "256:50,4096:50".parse().unwrap();
        let mut rng = thread_rng(1, 0);
        let big = (0..10_000).filter(|_| v.pick(&mut rng) == 4096).count();
        assert!((4_500..5_500).contains(&big));
        assert!("abc".parse::<ValueSizes>().is_err());
        assert!("1024".parse::<ValueSizes>().is_ok());
    }

    #[test]
    fn names_round_trip() {
        for w in Workload::ALL {
            assert_eq!(w.to_string().parse::<Workload>().unwrap(), w);
        }
        assert!("ycsb-g".parse::<Workload>().is_err());
    }

    #[test]
    fn write_ratios_parse_and_refuse_out_of_range() {
        assert_eq!(
            "write70".parse::<Workload>().unwrap(),
            Workload::WriteRatio(70)
        );
        assert!("write101".parse::<Workload>().is_err());
        assert!("writes".parse::<Workload>().is_err());
    }

    #[test]
    fn mixgraph_draws_power_law_keys_and_pareto_values() {
        let dist = Workload::MixGraph.forced_distribution(0.99).unwrap();
        let mut chooser = KeyChooser::new(dist, 1_000_000, 0);
        let mut rng = thread_rng(3, 0);
        let mut counts = std::collections::HashMap::new();
        for _ in 0..50_000 {
            *counts.entry(chooser.next(&mut rng, 0)).or_insert(0u32) += 1;
        }
        // A power law with CDF a * x^b: the 100 hottest ranks take a * 100^b = 1.1% of the
        // accesses (uniform keys would give them 0.01%), rank 1 alone a = 0.23%; and the
        // hottest keys are scattered over the key space, not at its start.
        let mut hot: Vec<(u64, u32)> = counts.into_iter().collect();
        hot.sort_unstable_by_key(|&(_, c)| std::cmp::Reverse(c));
        let top: u32 = hot.iter().take(100).map(|&(_, c)| c).sum();
        assert!(top > 400, "the 100 hottest keys took {top} of 50000");
        assert!(hot[0].1 > 60, "the hottest key took {} of 50000", hot[0].1);
        assert!(
            hot.iter().take(10).any(|&(k, _)| k > 100_000),
            "{:?}",
            &hot[..10]
        );
        let sizes = ValueSizes::mixgraph();
        let picked: Vec<usize> = (0..1000).map(|_| sizes.pick(&mut rng)).collect();
        assert!(picked.iter().any(|&s| s != picked[0]));
        assert!(picked.iter().all(|&s| (10..=1024).contains(&s)));
    }
}
