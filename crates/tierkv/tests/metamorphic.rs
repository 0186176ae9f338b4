//! Metamorphic test (Pebble's idea): one seeded random sequence of operations runs on several
//! configurations at once — WAL modes, fixed placement with 0..3 levels on the fast tier,
//! automatic placement, compression on and off, tiny memtables and tables — and every
//! observable result (point reads, reads at snapshots, bounded scans both ways, seeks followed
//! by `next`/`prev`) must be the same in every configuration and in a `BTreeMap` model.
//! Flushes, compactions, reopens and crashes (a process kill, or a power loss when every
//! acknowledged write is durable) are operations too, so each configuration reaches the same
//! logical state through different files, levels, tiers and logs.
//!
//! A new system (a WAL mode, a hot tier, a value log) joins by adding one line to [`CONFIGS`].
//!
//! Knobs (environment):
//! - `TIERKV_METAMORPHIC_SEEDS`: how many seeds to run (default 3, for CI).
//! - `TIERKV_METAMORPHIC_SEED`: the first seed (default fixed); seeds follow it one by one.
//! - `TIERKV_METAMORPHIC_OPS`: operations per seed (default 500).
//!
//! A failing seed is shrunk (operations are dropped while it still fails) and reported with
//! the shrunk operation list; add the seed to [`REGRESSION_SEEDS`] once it is fixed.

mod common;

use common::{crash_now, drop_within, env_u64, show_entry, Crash, Entry, Model, TierSetup};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::ops::Bound;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tierkv::env::{CrashPolicy, FaultFs};
use tierkv::{
    Compression, Db, Durability, Options, Placement, ReadOptions, Snapshot, WalMode, WriteBatch,
    WriteOptions,
};

// ---------------------------------------------------------------------------------------------
// Configurations

/// One configuration the operations run on.
#[derive(Debug, Clone, Copy)]
struct Config {
    name: &'static str,
    wal: WalMode,
    placement: Placement,
    levels_on_fast: usize,
    compression: Compression,
    /// Memtable bytes.
    memtable: usize,
    /// Target table bytes.
    table: u64,
    /// A system beyond the LSM and its WAL.
    extra: Extra,
}

/// Systems a configuration adds to the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Extra {
    None,
    /// PrismDB's hot store, with a budget small enough to demote.
    HotStore,
    /// SplitKV's value log, with a threshold low enough that most values go to it.
    SplitValues,
    /// The capacity tier's tables on an emulated zoned device (`tables = "zones"`).
    ZonedTables,
    /// The `splitkv` preset: small values in the hot store with the weight policy, under a
    /// budget small enough to migrate, large ones in the value log.
    SplitKv,
    /// The `splitkv` preset with large values moved to the value log at flush.
    SplitKvOnFlush,
}

impl Config {
    const fn with(self, extra: Extra) -> Config {
        Config { extra, ..self }
    }
}

/// The smallest memtable, table and L1 the options accept.
const TINY_MEM: usize = 64 << 10;
const TINY_TABLE: u64 = 16 << 10;
const TINY_L1: u64 = 64 << 10;

#[allow(clippy::too_many_arguments)]
const fn config(
    name: &'static str,
    wal: WalMode,
    placement: Placement,
    levels_on_fast: usize,
    compression: Compression,
    memtable: usize,
    table: u64,
) -> Config {
    Config {
        name,
        wal,
        placement,
        levels_on_fast,
        compression,
        memtable,
        table,
        extra: Extra::None,
    }
}

use Compression::{Lz4, Zstd};
use Placement::{Auto, Fixed};
use WalMode::{Append, Group, Parallel, Zoned};

/// Every configuration; results must agree across all of them.
const CONFIGS: &[Config] = &[
    // A roomy memtable: the model's twin in engine form (few flushes, no deep levels).
    config(
        "group-lof2-large",
        Group,
        Fixed,
        2,
        Compression::None,
        4 << 20,
        2 << 20,
    ),
    config(
        "group-lof0-none",
        Group,
        Fixed,
        0,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    ),
    config("group-lof1-lz4", Group, Fixed, 1, Lz4, TINY_MEM, TINY_TABLE),
    config(
        "group-lof2-zstd",
        Group,
        Fixed,
        2,
        Zstd,
        TINY_MEM,
        TINY_TABLE,
    ),
    config(
        "group-lof3-none",
        Group,
        Fixed,
        3,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    ),
    config(
        "parallel-lof0-lz4",
        Parallel,
        Fixed,
        0,
        Lz4,
        TINY_MEM,
        TINY_TABLE,
    ),
    config(
        "parallel-lof2-none",
        Parallel,
        Fixed,
        2,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    ),
    config("group-auto-lz4", Group, Auto, 1, Lz4, TINY_MEM, TINY_TABLE),
    config(
        "parallel-auto-zstd",
        Parallel,
        Auto,
        2,
        Zstd,
        TINY_MEM,
        TINY_TABLE,
    ),
    config(
        "append-lof1-lz4",
        Append,
        Fixed,
        1,
        Lz4,
        TINY_MEM,
        TINY_TABLE,
    ),
    config(
        "zoned-lof2-none",
        Zoned,
        Fixed,
        2,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    ),
    config("group-hot-lz4", Group, Fixed, 1, Lz4, TINY_MEM, TINY_TABLE).with(Extra::HotStore),
    config(
        "group-split-none",
        Group,
        Fixed,
        1,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    )
    .with(Extra::SplitValues),
    config(
        "group-ztables-lz4",
        Group,
        Fixed,
        1,
        Lz4,
        TINY_MEM,
        TINY_TABLE,
    )
    .with(Extra::ZonedTables),
    config(
        "group-splitkv-none",
        Group,
        Fixed,
        0,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    )
    .with(Extra::SplitKv),
    config(
        "group-splitkv-onflush-none",
        Group,
        Fixed,
        0,
        Compression::None,
        TINY_MEM,
        TINY_TABLE,
    )
    .with(Extra::SplitKvOnFlush),
];

/// Seeds that once failed; each runs in CI with the default number of operations.
const REGRESSION_SEEDS: &[u64] = &[];

const DEFAULT_SEED: u64 = 0x3e7a_303f_0000_0001;

fn options(c: &Config, fs: &Arc<FaultFs>) -> Options {
    let b = Options::builder()
        .fault_tiers()
        .wal_zone_size(1 << 20)
        .wal_zones(16)
        .fs(fs.clone())
        .wal(c.wal)
        .placement(c.placement)
        .levels_on_fast(c.levels_on_fast)
        .compression(c.compression)
        .write_buffer_size(c.memtable)
        .target_file_size(c.table)
        .max_bytes_for_level_base(TINY_L1.max(4 * c.table))
        .level_size_multiplier(2)
        .l0_compaction_trigger(2)
        .block_size(512)
        .bloom_bits_per_key(10)
        .background_threads(2);
    let b = match c.extra {
        Extra::None => b,
        Extra::HotStore => b.hot_tier(tierkv::HotTier::Slab).hot_budget(64 << 10),
        Extra::SplitValues => b.values(tierkv::ValuesMode::Split).split_threshold(64),
        Extra::ZonedTables => b,
        Extra::SplitKv => b
            .preset(tierkv::Preset::SplitKv)
            .hot_budget(64 << 10)
            .split_threshold(1024),
        Extra::SplitKvOnFlush => b
            .preset(tierkv::Preset::SplitKv)
            .hot_budget(64 << 10)
            .split_threshold(1024)
            .vlog_separation(tierkv::ValueSeparation::OnFlush),
    };
    let mut o = b
        .build()
        .unwrap_or_else(|e| panic!("{}: options: {e}", c.name));
    if c.extra == Extra::ZonedTables {
        o.tiers[1] = o.tiers[1].clone().with_zoned_tables(256 << 10, 64);
    }
    o
}

// ---------------------------------------------------------------------------------------------
// Operations

/// Keys written and read: few enough that overwrites and deletes meet earlier writes.
const KEYS: u32 = 250;
const SNAPSHOT_SLOTS: usize = 3;

fn key(id: u32) -> Vec<u8> {
    // Every fifth key has a twin it is a prefix of, so seeks land between keys.
    if id % 5 == 4 {
        format!("k{:04}/x", id - 1).into_bytes()
    } else {
        format!("k{id:04}").into_bytes()
    }
}

/// A value by length and content seed, so operation lists stay short to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Val {
    len: u16,
    fill: u32,
}

impl Val {
    fn bytes(self) -> Vec<u8> {
        (0..self.len as u32)
            .map(|i| (self.fill.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(31)) as u8)
            .collect()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Op {
    Put {
        key: u32,
        val: Val,
        sync: bool,
    },
    Delete {
        key: u32,
        sync: bool,
    },
    Batch {
        ops: Vec<(u32, Option<Val>)>,
        sync: bool,
    },
    Get {
        key: u32,
        snap: Option<usize>,
    },
    Snapshot {
        slot: usize,
    },
    Release {
        slot: usize,
    },
    /// Bounded scan `[lo, hi)`, forward or backward.
    Scan {
        lo: Option<u32>,
        hi: Option<u32>,
        reverse: bool,
        snap: Option<usize>,
    },
    /// Seek, then `true` = next, `false` = prev, recording every position.
    Seek {
        target: u32,
        moves: Vec<bool>,
        snap: Option<usize>,
    },
    Flush,
    Compact {
        lo: Option<u32>,
        hi: Option<u32>,
    },
    Reopen,
    /// A power loss (by the policy's index) if the last acknowledged write was synced, else a
    /// process kill.
    Crash {
        policy: usize,
    },
}

fn gen_val(rng: &mut SmallRng) -> Val {
    let len = if rng.gen_ratio(1, 10) {
        rng.gen_range(1000..4000)
    } else {
        rng.gen_range(0..1200)
    };
    Val {
        len,
        fill: rng.gen(),
    }
}

fn gen_snap(rng: &mut SmallRng) -> Option<usize> {
    rng.gen_ratio(1, 3)
        .then(|| rng.gen_range(0..SNAPSHOT_SLOTS))
}

fn gen_bound(rng: &mut SmallRng) -> Option<u32> {
    rng.gen_ratio(2, 3).then(|| rng.gen_range(0..KEYS))
}

fn gen_op(rng: &mut SmallRng) -> Op {
    let key = rng.gen_range(0..KEYS);
    let sync = rng.gen_ratio(1, 2);
    match rng.gen_range(0..1000) {
        0..=349 => Op::Put {
            key,
            val: gen_val(rng),
            sync,
        },
        350..=449 => Op::Delete { key, sync },
        450..=529 => {
            let n = rng.gen_range(1..12);
            let ops = (0..n)
                .map(|_| {
                    let k = rng.gen_range(0..KEYS);
                    (k, rng.gen_ratio(3, 4).then(|| gen_val(rng)))
                })
                .collect();
            Op::Batch { ops, sync }
        }
        530..=679 => Op::Get {
            key,
            snap: gen_snap(rng),
        },
        680..=709 => Op::Snapshot {
            slot: rng.gen_range(0..SNAPSHOT_SLOTS),
        },
        710..=729 => Op::Release {
            slot: rng.gen_range(0..SNAPSHOT_SLOTS),
        },
        730..=799 => Op::Scan {
            lo: gen_bound(rng),
            hi: gen_bound(rng),
            reverse: rng.gen(),
            snap: gen_snap(rng),
        },
        800..=879 => Op::Seek {
            target: key,
            moves: (0..rng.gen_range(0..8)).map(|_| rng.gen()).collect(),
            snap: gen_snap(rng),
        },
        880..=929 => Op::Flush,
        930..=959 => {
            let (lo, hi) = (gen_bound(rng), gen_bound(rng));
            match (lo, hi) {
                (Some(l), Some(h)) if l > h => Op::Compact { lo: hi, hi: lo },
                _ => Op::Compact { lo, hi },
            }
        }
        960..=979 => Op::Reopen,
        _ => Op::Crash {
            policy: rng.gen_range(0..3),
        },
    }
}

fn gen_ops(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = SmallRng::seed_from_u64(seed);
    (0..n).map(|_| gen_op(&mut rng)).collect()
}

// ---------------------------------------------------------------------------------------------
// Observations

/// What one operation showed; every configuration must show the model's.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen {
    Nothing,
    Value(Option<Vec<u8>>),
    Entries(Vec<Entry>),
    Positions(Vec<Option<Entry>>),
}

fn show(seen: &Seen) -> String {
    match seen {
        Seen::Nothing => "nothing".into(),
        Seen::Value(v) => format!("{:?}", v.as_ref().map(|v| v.len())),
        Seen::Entries(e) => format!(
            "{} entries, first {}, last {}",
            e.len(),
            show_entry(e.first()),
            show_entry(e.last())
        ),
        Seen::Positions(p) => p
            .iter()
            .map(|e| show_entry(e.as_ref()))
            .collect::<Vec<_>>()
            .join(" | "),
    }
}

/// The first difference between two observations, for the report.
fn difference(got: &Seen, want: &Seen) -> String {
    if let (Seen::Entries(g), Seen::Entries(w)) = (got, want) {
        let i = g
            .iter()
            .zip(w)
            .position(|(a, b)| a != b)
            .unwrap_or(g.len().min(w.len()));
        return format!(
            "{} entries, expected {}; first difference at {i}: got {}, expected {}",
            g.len(),
            w.len(),
            show_entry(g.get(i)),
            show_entry(w.get(i))
        );
    }
    format!("got {}, expected {}", show(got), show(want))
}

fn bound_range(lo: Option<u32>, hi: Option<u32>) -> (Option<Vec<u8>>, Option<Vec<u8>>) {
    (lo.map(key), hi.map(key))
}

// ---------------------------------------------------------------------------------------------
// The model

#[derive(Default)]
struct ModelDb {
    now: Model,
    snaps: [Option<Model>; SNAPSHOT_SLOTS],
    /// The last acknowledged write was synced, so it and every write before it are durable
    /// (a synced write waits for the writes numbered before it): a power loss may lose nothing.
    all_synced: bool,
}

impl ModelDb {
    fn view(&self, snap: Option<usize>) -> &Model {
        snap.and_then(|s| self.snaps[s].as_ref())
            .unwrap_or(&self.now)
    }

    fn apply(&mut self, op: &Op) -> Seen {
        match op {
            Op::Put { key: k, val, sync } => {
                self.now.insert(key(*k), val.bytes());
                self.all_synced = *sync;
            }
            Op::Delete { key: k, sync } => {
                self.now.remove(&key(*k));
                self.all_synced = *sync;
            }
            Op::Batch { ops, sync } => {
                for (k, v) in ops {
                    match v {
                        Some(v) => self.now.insert(key(*k), v.bytes()),
                        None => self.now.remove(&key(*k)),
                    };
                }
                self.all_synced = *sync;
            }
            Op::Get { key: k, snap } => {
                return Seen::Value(self.view(*snap).get(&key(*k)).cloned())
            }
            Op::Snapshot { slot } => self.snaps[*slot] = Some(self.now.clone()),
            Op::Release { slot } => self.snaps[*slot] = None,
            Op::Scan {
                lo,
                hi,
                reverse: _,
                snap,
            } => {
                let (lo, hi) = bound_range(*lo, *hi);
                let lo_b = lo.map_or(Bound::Unbounded, Bound::Included);
                let hi_b = hi.map_or(Bound::Unbounded, Bound::Excluded);
                let view = self.view(*snap);
                let entries = if matches!((&lo_b, &hi_b), (Bound::Included(l), Bound::Excluded(h)) if l > h)
                {
                    Vec::new()
                } else {
                    view.range((lo_b, hi_b))
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                };
                return Seen::Entries(entries);
            }
            Op::Seek {
                target,
                moves,
                snap,
            } => {
                let view = self.view(*snap);
                let clone =
                    |e: Option<(&Vec<u8>, &Vec<u8>)>| e.map(|(k, v)| (k.clone(), v.clone()));
                let mut at = clone(view.range(key(*target)..).next());
                let mut out = vec![at.clone()];
                for &next in moves {
                    let Some((k, _)) = &at else { break };
                    at = if next {
                        clone(
                            view.range((Bound::Excluded(k.clone()), Bound::Unbounded))
                                .next(),
                        )
                    } else {
                        clone(view.range(..k.clone()).next_back())
                    };
                    out.push(at.clone());
                }
                return Seen::Positions(out);
            }
            Op::Flush | Op::Compact { .. } => {}
            Op::Reopen | Op::Crash { .. } => {
                self.snaps = Default::default();
                self.all_synced = true;
            }
        }
        Seen::Nothing
    }
}

// ---------------------------------------------------------------------------------------------
// One configuration's database

struct Instance {
    cfg: Config,
    fs: Arc<FaultFs>,
    db: Option<Db>,
    snaps: [Option<Snapshot>; SNAPSHOT_SLOTS],
}

type Res<T> = std::result::Result<T, String>;

fn wopts(sync: bool) -> WriteOptions {
    WriteOptions {
        durability: if sync {
            Durability::Sync
        } else {
            Durability::Flush
        },
    }
}

impl Instance {
    fn open(cfg: Config, seed: u64) -> Res<Instance> {
        let fs = FaultFs::new(seed);
        let db = Db::open(options(&cfg, &fs)).map_err(|e| format!("open: {e}"))?;
        Ok(Instance {
            cfg,
            fs,
            db: Some(db),
            snaps: Default::default(),
        })
    }

    fn db(&self) -> &Db {
        self.db.as_ref().expect("open")
    }

    fn read_opts(&self, snap: Option<usize>) -> ReadOptions {
        match snap.and_then(|s| self.snaps[s].as_ref()) {
            Some(s) => ReadOptions::at(s),
            None => ReadOptions::default(),
        }
    }

    fn reopen(&mut self) -> Res<()> {
        let db = Db::open(options(&self.cfg, &self.fs)).map_err(|e| format!("reopen: {e}"))?;
        self.db = Some(db);
        Ok(())
    }

    fn apply(&mut self, op: &Op, all_synced: bool) -> Res<Seen> {
        let e = |what: &str| {
            let what = what.to_string();
            move |e: tierkv::Error| format!("{what}: {e}")
        };
        match op {
            Op::Put { key: k, val, sync } => self
                .db()
                .put(&wopts(*sync), &key(*k), &val.bytes())
                .map_err(e("put"))?,
            Op::Delete { key: k, sync } => self
                .db()
                .delete(&wopts(*sync), &key(*k))
                .map_err(e("delete"))?,
            Op::Batch { ops, sync } => {
                let mut b = WriteBatch::new();
                for (k, v) in ops {
                    match v {
                        Some(v) => b.put(key(*k), v.bytes()),
                        None => b.delete(key(*k)),
                    }
                }
                self.db().write(&wopts(*sync), b).map_err(e("write"))?
            }
            Op::Get { key: k, snap } => {
                let v = self
                    .db()
                    .get(&self.read_opts(*snap), &key(*k))
                    .map_err(e("get"))?;
                return Ok(Seen::Value(v));
            }
            Op::Snapshot { slot } => self.snaps[*slot] = Some(self.db().snapshot()),
            Op::Release { slot } => self.snaps[*slot] = None,
            Op::Scan {
                lo,
                hi,
                reverse,
                snap,
            } => {
                let (lo, hi) = bound_range(*lo, *hi);
                let opts = self.read_opts(*snap).bounds(lo.as_deref(), hi.as_deref());
                let mut it = self.db().iter(opts).map_err(e("iter"))?;
                let out = common::read_entries(&mut it, *reverse).map_err(e("scan"))?;
                return Ok(Seen::Entries(out));
            }
            Op::Seek {
                target,
                moves,
                snap,
            } => {
                let mut it = self.db().iter(self.read_opts(*snap)).map_err(e("iter"))?;
                it.seek(&key(*target));
                let here = |it: &tierkv::DbIterator| {
                    it.valid().then(|| (it.key().to_vec(), it.value().to_vec()))
                };
                let mut out = vec![here(&it)];
                for &next in moves {
                    if !it.valid() {
                        break;
                    }
                    if next {
                        it.next();
                    } else {
                        it.prev();
                    }
                    out.push(here(&it));
                }
                it.status().map_err(e("seek"))?;
                return Ok(Seen::Positions(out));
            }
            Op::Flush => self.db().flush().map_err(e("flush"))?,
            Op::Compact { lo, hi } => {
                let (lo, hi) = bound_range(*lo, *hi);
                self.db()
                    .compact_range(lo.as_deref(), hi.as_deref())
                    .map_err(e("compact_range"))?
            }
            Op::Reopen => {
                self.snaps = Default::default();
                drop_within(self.db.take(), self.cfg.name);
                self.reopen()?;
            }
            Op::Crash { policy } => {
                self.snaps = Default::default();
                let crash = if all_synced {
                    Crash::Power(
                        [
                            CrashPolicy::DropUnsynced,
                            CrashPolicy::KeepRandomPages,
                            CrashPolicy::TearLastSector,
                        ][*policy],
                    )
                } else {
                    Crash::Process
                };
                crash_now(&self.fs, self.db.take(), crash, self.cfg.name);
                self.reopen()?;
            }
        }
        Ok(Seen::Nothing)
    }

    fn close(mut self) {
        self.snaps = Default::default();
        if let Some(db) = &self.db {
            // The shape each configuration reached, shown with `--nocapture`: the point of
            // the test is that they differ.
            let mut shape: BTreeMap<(usize, String), usize> = BTreeMap::new();
            for f in db.live_files() {
                *shape.entry((f.level, f.tier)).or_default() += 1;
            }
            println!("  {}: tables by (level, tier): {shape:?}", self.cfg.name);
        }
        drop_within(self.db.take(), self.cfg.name);
    }
}

// ---------------------------------------------------------------------------------------------
// Running, shrinking, reporting

/// Runs `ops` on every configuration of `configs` and the model; `Err` names the first
/// operation whose result differs (or fails) and the configurations concerned.
fn run(ops: &[Op], configs: &[Config], seed: u64) -> Res<()> {
    let mut model = ModelDb {
        all_synced: true,
        ..ModelDb::default()
    };
    let mut insts = Vec::new();
    for c in configs {
        insts.push(Instance::open(*c, seed).map_err(|e| format!("{}: {e}", c.name))?);
    }
    let result = (|| {
        for (i, op) in ops.iter().enumerate() {
            // The crash kind depends on the writes before the crash, not on it.
            let all_synced = model.all_synced;
            let want = model.apply(op);
            for inst in insts.iter_mut() {
                let got = inst
                    .apply(op, all_synced)
                    .map_err(|e| format!("op {i} {op:?}: {}: {e}", inst.cfg.name))?;
                if got != want {
                    return Err(format!(
                        "op {i} {op:?}: {} disagrees with the model: {}",
                        inst.cfg.name,
                        difference(&got, &want)
                    ));
                }
            }
        }
        let all = Op::Scan {
            lo: None,
            hi: None,
            reverse: false,
            snap: None,
        };
        let want = model.apply(&all);
        for inst in insts.iter_mut() {
            let got = inst
                .apply(&all, true)
                .map_err(|e| format!("final scan: {e}"))?;
            if got != want {
                return Err(format!(
                    "final scan: {} disagrees with the model: {}",
                    inst.cfg.name,
                    difference(&got, &want)
                ));
            }
        }
        Ok(())
    })();
    for inst in insts {
        inst.close();
    }
    result
}

/// [`run`] with panics turned into failures, so a panicking case can be shrunk too.
fn run_caught(ops: &[Op], configs: &[Config], seed: u64) -> Res<()> {
    match panic::catch_unwind(AssertUnwindSafe(|| run(ops, configs, seed))) {
        Ok(r) => r,
        Err(p) => Err(p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "panic".into())),
    }
}

/// Drops chunks of operations (halves, quarters, ... single ones) while `fails` still holds,
/// for at most `budget`.
fn shrink(mut ops: Vec<Op>, budget: Duration, mut fails: impl FnMut(&[Op]) -> bool) -> Vec<Op> {
    let start = Instant::now();
    let mut chunk = ops.len().div_ceil(2).max(1);
    loop {
        let mut i = 0;
        let mut dropped = false;
        while i < ops.len() {
            if start.elapsed() > budget {
                return ops;
            }
            let mut candidate = ops.clone();
            candidate.drain(i..(i + chunk).min(ops.len()));
            if fails(&candidate) {
                ops = candidate;
                dropped = true;
            } else {
                i += chunk;
            }
        }
        if chunk == 1 && !dropped {
            return ops;
        }
        if !dropped {
            chunk = chunk.div_ceil(2);
        }
    }
}

/// Runs one seed on every configuration; on failure shrinks it and fails the test with the
/// seed and the shrunk operations.
fn check_seed(seed: u64, n_ops: usize) {
    let ops = gen_ops(seed, n_ops);
    let Err(first) = run_caught(&ops, CONFIGS, seed) else {
        return;
    };
    // Shrink against the configurations that failed, plus the model.
    let failing: Vec<Config> = CONFIGS
        .iter()
        .copied()
        .filter(|c| first.contains(c.name))
        .collect();
    let configs = if failing.is_empty() {
        CONFIGS.to_vec()
    } else {
        failing
    };
    let budget = Duration::from_secs(env_u64("TIERKV_METAMORPHIC_SHRINK_SECS", 120));
    let shrunk = shrink(ops, budget, |ops| run_caught(ops, &configs, seed).is_err());
    let last = run_caught(&shrunk, &configs, seed)
        .err()
        .unwrap_or_else(|| "the shrunk list passed (a timing-dependent failure?)".into());
    let list: Vec<String> = shrunk.iter().map(|op| format!("    {op:?}")).collect();
    panic!(
        "metamorphic seed {seed} failed: {first}\n\
         shrunk to {} ops on {:?}: {last}\n{}\n\
         rerun: TIERKV_METAMORPHIC_SEED={seed} TIERKV_METAMORPHIC_SEEDS=1 \
         cargo test -p tierkv --test metamorphic; add the seed to REGRESSION_SEEDS once fixed",
        shrunk.len(),
        configs.iter().map(|c| c.name).collect::<Vec<_>>(),
        list.join("\n")
    );
}

fn n_ops() -> usize {
    env_u64("TIERKV_METAMORPHIC_OPS", 500) as usize
}

#[test]
fn configurations_agree_with_the_model() {
    let first = env_u64("TIERKV_METAMORPHIC_SEED", DEFAULT_SEED);
    let seeds = env_u64("TIERKV_METAMORPHIC_SEEDS", 3);
    let started = Instant::now();
    for seed in first..first + seeds {
        check_seed(seed, n_ops());
    }
    println!(
        "metamorphic: {seeds} seeds x {} ops x {} configurations in {:.1?}",
        n_ops(),
        CONFIGS.len(),
        started.elapsed()
    );
}

#[test]
fn regression_seeds_stay_fixed() {
    for &seed in REGRESSION_SEEDS {
        check_seed(seed, n_ops());
    }
}

#[test]
fn configuration_names_are_unique() {
    let names: BTreeMap<&str, usize> = CONFIGS.iter().map(|c| (c.name, 0)).collect();
    assert_eq!(names.len(), CONFIGS.len());
    // A name must not contain another, or the shrinker's choice of failing ones is wrong.
    for a in CONFIGS {
        for b in CONFIGS {
            assert!(
                a.name == b.name || !a.name.contains(b.name),
                "{} / {}",
                a.name,
                b.name
            );
        }
    }
}

#[test]
fn shrinking_keeps_only_what_fails() {
    let ops = gen_ops(7, 200);
    // Fails while a put of key 7 comes before any delete... of anything: two ops are needed.
    let fails = |ops: &[Op]| {
        let put = ops
            .iter()
            .position(|o| matches!(o, Op::Put { key: 7, .. }) || matches!(o, Op::Put { .. }));
        let del = ops.iter().rposition(|o| matches!(o, Op::Delete { .. }));
        matches!((put, del), (Some(p), Some(d)) if p < d)
    };
    assert!(fails(&ops));
    let shrunk = shrink(ops, Duration::from_secs(30), fails);
    assert_eq!(shrunk.len(), 2, "{shrunk:?}");
    assert!(fails(&shrunk));
}
