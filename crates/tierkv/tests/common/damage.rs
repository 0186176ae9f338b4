//! Fixtures of the tests that damage tables and MANIFESTs: tiny tables on fault-injecting tiers,
//! values that do not compress (so a table holds many blocks), and a tree of several tables to
//! damage one of.

use super::kv::{key6, Model};
use super::opts::tiny;
use super::tiers::TierSetup;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::sync::Arc;
use tierkv::env::FaultFs;
use tierkv::{Db, Durability, LiveFile, Options, WriteOptions};

/// Tiny tables on the fault-injecting tiers of `fs`.
pub fn damage_options(fs: &Arc<FaultFs>) -> Options {
    tiny().fault_tiers().fs(fs.clone()).build().unwrap()
}

/// 120 pseudo-random printable bytes: incompressible enough that tables hold many blocks.
pub fn noise_value(i: usize) -> Vec<u8> {
    let mut rng = SmallRng::seed_from_u64(i as u64);
    (0..120).map(|_| rng.gen_range(b'!'..=b'~')).collect()
}

/// Puts keys `range` (`key6`, `noise_value`) with `durability`, returning what was stored.
pub fn fill_noise(db: &Db, range: std::ops::Range<usize>, durability: Durability) -> Model {
    let w = WriteOptions { durability };
    range
        .map(|i| {
            db.put(&w, &key6(i), &noise_value(i)).unwrap();
            (key6(i), noise_value(i))
        })
        .collect()
}

/// 3000 keys flushed and compacted into tables; returns what was stored and the live tables.
pub fn compacted_tables(opts: Options) -> (Model, Vec<LiveFile>) {
    let db = Db::open(opts).unwrap();
    let model = fill_noise(&db, 0..3000, Durability::Flush);
    db.compact_range(None, None).unwrap();
    let files = db.live_files();
    assert!(files.len() >= 3, "expected several tables: {files:?}");
    (model, files)
}

/// A table in the middle of the key range with more than one data block.
pub fn middle_table(files: &[LiveFile]) -> LiveFile {
    let mut files = files.to_vec();
    files.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    files[files.len() / 2].clone()
}
