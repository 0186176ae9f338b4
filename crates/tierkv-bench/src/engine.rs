//! Engines under test, behind one trait so the runner and reports never see their types.
//!
//! `tierkv[:PROFILE]` and (with the `rocksdb` feature) `rocksdb[:PROFILE]` are built from one
//! [`EngineConfig`], so both get the same tiers, memtable size and count, block cache, bloom
//! bits, compression, background threads and sync setting. Profiles name the placement:
//! `pl` (fast tier holds only the WAL), `lad0`..`lad7` (top n levels on the fast tier), for
//! tierkv also `auto` (automatic placement by fast-tier bandwidth, starting from LAD-2), and for
//! tierkv the WAL mode: `group` (group-commit leader, the default) or `parallel` (SpanDB's
//! parallel WAL). Parts join with `+`: `tierkv:parallel`, `tierkv:pl+parallel`,
//! `tierkv:lad1+group`. A placement means the same for both engines: `pl` and `lad0` are one
//! profile (no table on the fast tier), and RocksDB's `db_paths` are chosen so that its own
//! path selection keeps to it (see `rocks_paths`).
//!
//! Engines with an asynchronous API (tierkv's `submit_*`) also implement [`Engine::submit`], which
//! the runner uses for `--inflight N > 1`.

use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// Per-tier counters an engine reports.
#[derive(Debug, Clone, Default)]
pub struct TierCounters {
    /// Bytes the engine wrote to the tier (WAL, flush, compaction, metadata).
    pub bytes_written: u64,
    /// Bytes the engine read from the tier's table files.
    pub bytes_read: u64,
}

/// What an engine reports after a run.
#[derive(Debug, Clone, Default)]
pub struct EngineCounters {
    /// Per tier, fastest first.
    pub tiers: Vec<TierCounters>,
    /// Point reads answered by: "memtable", "cache", "hot store" (tierkv's), or a tier name.
    pub reads_served: BTreeMap<String, u64>,
    /// Writes per WAL group (group commit efficiency), if the engine reports it.
    pub avg_group_size: Option<f64>,
    /// Stall time in seconds, if reported.
    pub stall_seconds: Option<f64>,
    /// WAL figures, if the engine reports them (tierkv).
    pub wal: Option<WalCounters>,
    /// Placement at the end of the run and tables migrated (tierkv), e.g. "auto L2+50% (6 moves)".
    pub placement: Option<(String, u64)>,
    /// Asynchronous API figures, if the engine has one (tierkv).
    pub async_api: Option<AsyncCounters>,
    /// Each tier whose tables live on an emulated zoned device, with its zone file system's
    /// figures (tierkv, `--zoned-tables`).
    pub zoned_tiers: Vec<(String, tierkv::ZoneFsStats)>,
    /// Free-form engine statistics for the human report.
    pub detail: String,
}

/// What tierkv reports about its WAL.
#[derive(Debug, Clone, Default)]
pub struct WalCounters {
    /// How WAL bytes reach the device: "group" (group-commit leader), "io_uring" or "pwrite"
    /// (parallel WAL loggers).
    pub io_path: String,
    /// Loggers active at the end of the run (parallel WAL).
    pub active_loggers: usize,
    /// Page runs written by the loggers (parallel WAL).
    pub runs: u64,
    /// Pages written by the loggers (parallel WAL).
    pub pages: u64,
    /// Writes (batches) applied since open.
    pub writes: u64,
    /// Extra `fdatasync` calls made to cover unsynced writes before a synced one.
    pub cover_syncs: u64,
    /// The zone manager's work (`wal = "zoned"`).
    pub zoned: Option<tierkv::ZonedWalStats>,
}

impl WalCounters {
    /// Average pages per logger run, if any run was written.
    pub fn pages_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.pages as f64 / self.runs as f64)
    }

    /// Average writes per logger run, if any run was written.
    pub fn writes_per_run(&self) -> Option<f64> {
        (self.runs > 0).then(|| self.writes as f64 / self.runs as f64)
    }
}

/// What tierkv reports about its asynchronous API.
#[derive(Debug, Clone, Default)]
pub struct AsyncCounters {
    /// Requests submitted through `submit_*`.
    pub requests: u64,
    /// Submissions refused with `Busy` (over `max_pending_requests`).
    pub busy_rejections: u64,
    /// `submit_get`s answered inline from a memtable.
    pub lucky_reads: u64,
}

/// The result of a completed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A write completed.
    Written,
    /// A point read completed; whether it found its key.
    Found(bool),
    /// A multi-get of `keys` keys completed and found `found` of them.
    FoundMany { found: usize, keys: usize },
    /// A scan completed with this many keys.
    Scanned(usize),
}

/// An operation for an engine's asynchronous API.
#[derive(Debug, Clone, Copy)]
pub enum AsyncOp<'a> {
    /// `submit_put`.
    Put { key: &'a [u8], value: &'a [u8] },
    /// `submit_write` of a one-entry batch.
    Write { key: &'a [u8], value: &'a [u8] },
    /// `submit_get`.
    Get { key: &'a [u8] },
    /// `submit_multi_get` of these keys.
    MultiGet { keys: &'a [Vec<u8>] },
    /// `submit_scan` of up to `n` keys from `start`.
    Scan { start: &'a [u8], n: usize },
}

/// A request in flight.
pub trait Pending {
    /// True once the request has completed (waiting will not block).
    fn is_ready(&self) -> bool;
    /// Blocks until the request completes.
    fn wait(self: Box<Self>) -> Result<Outcome>;
}

/// What a submission returned.
pub enum Submitted {
    /// The request is in flight (or already complete: see [`Pending::is_ready`]).
    InFlight(Box<dyn Pending>),
    /// The engine's queue is full: retry after a request completes.
    Busy,
}

/// tierkv settings with no RocksDB counterpart, passed through from the command line.
#[derive(Debug, Clone, Default)]
pub struct TierkvExtra {
    /// `wal_loggers`.
    pub wal_loggers: Option<usize>,
    /// `wal_inflight`.
    pub wal_inflight: Option<usize>,
    /// `wal_group_bytes`.
    pub wal_group_bytes: Option<u64>,
    /// `wal_io_uring = false` when set.
    pub no_wal_io_uring: bool,
    /// `pipeline_workers`.
    pub pipeline_workers: Option<usize>,
    /// `max_pending_requests`.
    pub max_pending_requests: Option<usize>,
    /// `fast_tier_bandwidth` (bytes/s; unset: probed at open).
    pub fast_tier_bandwidth: Option<u64>,
    /// `fast_tier_flush_reserve` (bytes; unset: the engine's default).
    pub fast_tier_flush_reserve: Option<u64>,
    /// `hot_budget` (bytes; unset: the engine's default).
    pub hot_budget: Option<u64>,
    /// `wal_zone_size`: the emulated zoned device's zone size (bytes).
    pub wal_zone_size: Option<u64>,
    /// `wal_zones`: the emulated zoned device's zone count.
    pub wal_zones: Option<u32>,
    /// The capacity tier (tier 1) keeps its tables on an emulated zoned device of this many
    /// zones of this many bytes (`tables = "zones"`).
    pub table_zones: Option<TableZones>,
}

/// The emulated zoned device holding the capacity tier's tables (`--zoned-tables`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TableZones {
    /// Bytes of each zone.
    pub zone_size: u64,
    /// Zones of the device, two of them for its metadata journal.
    pub zones: u32,
}

/// One tier of the benchmark's storage.
#[derive(Debug, Clone)]
pub struct TierDir {
    /// Tier name.
    pub name: String,
    /// Directory the engine may use (created fresh per engine).
    pub dir: PathBuf,
    /// Byte budget (`--tier-capacity`); `None` is unlimited.
    pub capacity: Option<u64>,
    /// tierkv: a tier of kind `pm` (`--tier-kind NAME=pm`): its files are memory-mapped.
    pub pm: bool,
}

/// Settings shared by every engine in a run.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Tiers, fastest first.
    pub tiers: Vec<TierDir>,
    /// Sync every write.
    pub sync: bool,
    /// Memtable bytes.
    pub write_buffer_size: usize,
    /// Immutable memtables before stalls.
    pub max_immutable_memtables: usize,
    /// Block cache bytes.
    pub block_cache_bytes: usize,
    /// Bloom bits per key.
    pub bloom_bits_per_key: u32,
    /// "none", "lz4" or "zstd".
    pub compression: String,
    /// Background flush/compaction threads.
    pub background_threads: usize,
    /// Target table size.
    pub target_file_size: u64,
    /// L1 target size.
    pub max_bytes_for_level_base: u64,
    /// tierkv-only settings.
    pub tierkv: TierkvExtra,
}

/// A key-value engine as the benchmark drives it.
pub trait Engine: Send + Sync {
    /// Writes `key` (durably if the run is synced).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads `key`; returns whether it was found.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Reads `keys` with the engine's one-call multi-get; returns how many were found. An
    /// answer with a value count other than the key count is an error, not a miss.
    fn multi_get(&self, keys: &[Vec<u8>]) -> Result<usize>;
    /// Reads up to `n` keys from `start`; returns how many were read.
    fn scan(&self, start: &[u8], n: usize) -> Result<usize>;
    /// Flushes memtables (between load and run phases).
    fn flush(&self) -> Result<()>;
    /// Waits until no flush or compaction is running or pending.
    fn settle(&self) -> Result<()>;
    /// Counters since open.
    fn counters(&self) -> EngineCounters;
    /// Flushes, settles and collects the value log to the end; returns a line on its space
    /// (`None` for an engine without one).
    fn collect_value_log(&self) -> Result<Option<String>> {
        Ok(None)
    }
    /// True if [`Engine::submit`] works (the engine has an asynchronous API).
    fn supports_async(&self) -> bool {
        false
    }
    /// Submits `op` through the asynchronous API.
    fn submit(&self, op: AsyncOp<'_>) -> Result<Submitted> {
        let _ = op;
        bail!("this engine has no asynchronous API")
    }
}

/// WAL mode named by a profile (tierkv only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WalChoice {
    /// Group commit (tierkv's default).
    Group,
    /// SpanDB's parallel WAL.
    Parallel,
    /// WALTZ's leaderless WAL on a conventional file.
    Append,
    /// WALTZ's leaderless WAL on the emulated zoned device.
    Zoned,
    /// WALTZ's ablation (Fig. 14), first step: a group-commit leader writing at the write
    /// pointer, zone allocation inside the write path (`zenfs-like`).
    ZenfsLike,
    /// Second step: the same leader, zones reserved and finished by the zone manager
    /// (`reserved-zones`).
    ReservedZones,
    /// Third step: the leader zone-appends instead of writing at the pointer
    /// (`leader-append`). The last step, no leader, is `zoned` (alias `waltz`).
    LeaderAppend,
}

impl WalChoice {
    /// The zoned WAL's (leader, append, reserved zones) for the ablation steps.
    fn ablation(self) -> Option<(bool, bool, u32)> {
        match self {
            WalChoice::ZenfsLike => Some((true, false, 0)),
            WalChoice::ReservedZones => Some((true, false, 2)),
            WalChoice::LeaderAppend => Some((true, true, 2)),
            _ => None,
        }
    }
}

/// A parsed profile: placement and, for tierkv, the WAL mode.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Profile {
    /// Levels on the fast tier (the starting point with `auto`).
    pub levels_on_fast: usize,
    /// Automatic placement (tierkv only).
    pub auto: bool,
    /// WAL mode, if named.
    pub wal: Option<WalChoice>,
    /// Automatic placement thresholds named by the profile (engine defaults otherwise).
    pub tuning: AutoTuning,
    /// The engine's `bytes_per_sync` (tierkv's or RocksDB's), if named (`bps=`; any placement).
    pub bytes_per_sync: Option<u64>,
    /// PrismDB's hot store on tier 0 (`hot`; tierkv only).
    pub hot: bool,
    /// tierkv's `prismdb` preset (`prismdb`): the hot store on tier 0 with the fast tier's
    /// `--tier-capacity` as its budget, the LSM as large sorted runs on the capacity tier.
    pub prismdb: bool,
    /// SplitKV's value log for large values (`split`; tierkv only).
    pub split: bool,
    /// SplitKV whole, as the `splitkv` preset (`splitkv`; tierkv only): the value log for
    /// large values and the fast area for small ones (the hot store with the weight policy,
    /// the LSM from L0 on the capacity tier).
    pub splitkv: bool,
    /// RocksDB's integrated BlobDB, its baseline for split values (`blob`; rocksdb only).
    pub blob: bool,
    /// The hot store's demotion policy (`msc=random`, `msc=approximate`, ...; tierkv only).
    pub msc_policy: Option<tierkv::MscPolicy>,
    /// When a flush takes keys new to the hot store (`admit=make-room`, `admit=when-free`;
    /// tierkv's `hot_admission`).
    pub admission: Option<tierkv::HotAdmission>,
    /// Whether demotions merge straight into the bottom run (`bottom=1`, `bottom=0`;
    /// tierkv's `hot_demote_into_bottom`).
    pub demote_into_bottom: Option<bool>,
    /// The sorted runs below the fast tier (`runs=all`, `runs=auto`, `runs=2`; tierkv's
    /// `capacity_levels`).
    pub capacity_levels: Option<tierkv::CapacityLevels>,
    /// The hot store's partitions (`parts=4`; tierkv's `hot_partitions`).
    pub hot_partitions: Option<usize>,
    /// Tiers whose tables are read with `O_DIRECT`, bit `i` for tier `i` (`direct=fast`,
    /// `direct=capacity`, `direct=all`; tierkv's `TierConfig::with_direct_reads`). Their
    /// tables' pages then stay out of the page cache.
    pub direct_tiers: u8,
    /// The group WAL's parallel memtable insertion (`cmw=0` off, `cmw=1` on; tierkv's
    /// `wal.concurrent_memtable_writes`), if named.
    pub concurrent_memtable_writes: Option<bool>,
    /// The fewest operations of a group inserted in parallel (`cmwops=N`; tierkv's
    /// `wal.concurrent_memtable_min_ops`), if named.
    pub concurrent_memtable_min_ops: Option<usize>,
    /// The memtables' key filter (`mkf=0` off, `mkf=1` on; tierkv's `memtable.key_filter`),
    /// if named.
    pub memtable_key_filter: Option<bool>,
    /// When split values reach the value log (`sep=write`, `sep=flush`; tierkv's
    /// `vlog_separation`), if named.
    pub separation: Option<tierkv::ValueSeparation>,
}

/// `placement = auto` settings a profile may set: `bwl=`, `bwh=`, `sph=`, `spt=` (tierkv's
/// `auto_bw_low`, `auto_bw_high`, `auto_space_high`, `auto_space_target`), `fr=` (its
/// `fast_tier_flush_reserve`, in bytes), `mr=` (its `auto_migration_busy_rate`, bytes/s) and
/// `rep=` (its `auto_replicas`: 0 off, 1 on).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct AutoTuning {
    pub bw_low: Option<f64>,
    pub bw_high: Option<f64>,
    pub space_high: Option<f64>,
    pub space_target: Option<f64>,
    pub flush_reserve: Option<f64>,
    pub migration_rate: Option<f64>,
    pub replicas: Option<f64>,
}

impl AutoTuning {
    fn is_empty(&self) -> bool {
        *self == AutoTuning::default()
    }

    /// Sets the setting `name` (`bwl`, `bwh`, `sph`, `spt`, `fr`, `mr` or `rep`) from a profile
    /// part.
    fn set(&mut self, name: &str, value: &str) -> Result<()> {
        let slot = match name {
            "bwl" => &mut self.bw_low,
            "bwh" => &mut self.bw_high,
            "sph" => &mut self.space_high,
            "spt" => &mut self.space_target,
            "fr" => &mut self.flush_reserve,
            "mr" => &mut self.migration_rate,
            "rep" => &mut self.replicas,
            _ => bail!(
                "unknown threshold {name:?} in a profile: expected bwl, bwh, sph, spt, fr, mr or \
                 rep (e.g. auto+bwl=0.3+bwh=0.7)"
            ),
        };
        if slot.is_some() {
            bail!("threshold {name} given twice");
        }
        let v: f64 = value
            .parse()
            .with_context(|| format!("threshold {name}={value}: expected a number like 0.5"))?;
        *slot = Some(v);
        Ok(())
    }
}

/// Sets a `name=value` part of `profile` to what `parse` makes of it; a second `name=` in
/// one profile is an error.
fn set_once<T>(
    slot: &mut Option<T>,
    name: &str,
    profile: &str,
    parse: impl FnOnce() -> Result<T>,
) -> Result<()> {
    if slot.is_some() {
        bail!("{name} given twice in profile {profile:?}");
    }
    *slot = Some(parse()?);
    Ok(())
}

/// A profile part that switches something on (`1`) or off (`0`).
fn parse_switch(name: &str, value: &str, expected: &str) -> Result<bool> {
    match value {
        "1" => Ok(true),
        "0" => Ok(false),
        _ => bail!("{name}={value}: expected {expected}"),
    }
}

/// Parses a profile: `+`-joined parts, at most one fixed placement (`pl`, `lad0`..`lad7`;
/// default `lad2`), `auto` (automatic placement, starting from the fixed placement named, e.g.
/// `auto+lad1`), at most one WAL mode (`group`, `parallel`) and, with `auto`, thresholds
/// (`bwl=0.3`, see [`AutoTuning`]), and the engine's `bytes_per_sync` (`bps=0`); empty means the
/// defaults.
pub fn parse_profile(profile: &str) -> Result<Profile> {
    let mut levels = None;
    let mut wal = None;
    let mut auto = false;
    let mut tuning = AutoTuning::default();
    let mut bytes_per_sync = None;
    let (mut hot, mut split, mut splitkv, mut blob, mut prismdb) =
        (false, false, false, false, false);
    let mut concurrent_memtable_writes = None;
    let mut concurrent_memtable_min_ops = None;
    let mut memtable_key_filter = None;
    let mut separation = None;
    let (mut msc_policy, mut capacity_levels, mut admission) = (None, None, None);
    let mut demote_into_bottom = None;
    let mut hot_partitions = None;
    let mut direct_tiers = None;
    for part in profile.split('+').filter(|p| !p.is_empty()) {
        if let Some(flag) = match part {
            "hot" => Some(&mut hot),
            "prismdb" => Some(&mut prismdb),
            "split" => Some(&mut split),
            "splitkv" => Some(&mut splitkv),
            "blob" => Some(&mut blob),
            _ => None,
        } {
            if *flag {
                bail!("profile {profile:?} names {part} twice");
            }
            *flag = true;
            continue;
        }
        match part.split_once('=') {
            Some(("bps", value)) => {
                set_once(&mut bytes_per_sync, "bps", profile, || {
                    value
                        .parse()
                        .with_context(|| format!("bps={value}: expected a byte count like 0"))
                })?;
                continue;
            }
            Some(("msc", value)) => {
                set_once(&mut msc_policy, "msc", profile, || parse_msc_policy(value))?;
                continue;
            }
            Some(("cmw", value)) => {
                set_once(&mut concurrent_memtable_writes, "cmw", profile, || {
                    parse_switch("cmw", value, "0 (off) or 1 (on)")
                })?;
                continue;
            }
            Some(("mkf", value)) => {
                set_once(&mut memtable_key_filter, "mkf", profile, || {
                    parse_switch("mkf", value, "0 (off) or 1 (on)")
                })?;
                continue;
            }
            Some(("cmwops", value)) => {
                set_once(&mut concurrent_memtable_min_ops, "cmwops", profile, || {
                    value
                        .parse()
                        .with_context(|| format!("cmwops={value}: expected an operation count"))
                })?;
                continue;
            }
            Some(("sep", value)) => {
                set_once(&mut separation, "sep", profile, || {
                    format!("on-{value}").parse().map_err(|_| {
                        anyhow::anyhow!(
                            "sep={value}: expected write or flush (e.g. splitkv+sep=flush)"
                        )
                    })
                })?;
                continue;
            }
            Some(("admit", value)) => {
                set_once(&mut admission, "admit", profile, || {
                    value.parse().map_err(|e| {
                        anyhow::anyhow!("admit={value}: {e} (e.g. prismdb+admit=when-free)")
                    })
                })?;
                continue;
            }
            Some(("bottom", value)) => {
                set_once(&mut demote_into_bottom, "bottom", profile, || {
                    parse_switch("bottom", value, "1 or 0 (e.g. prismdb+bottom=1)")
                })?;
                continue;
            }
            Some(("parts", value)) => {
                set_once(&mut hot_partitions, "parts", profile, || {
                    value.parse().with_context(|| {
                        format!("parts={value}: expected a partition count (e.g. prismdb+parts=4)")
                    })
                })?;
                continue;
            }
            Some(("direct", value)) => {
                set_once(&mut direct_tiers, "direct", profile, || {
                    Ok(match value {
                        "fast" => 1,
                        "capacity" => 2,
                        "all" => u8::MAX,
                        _ => bail!("direct={value}: expected fast, capacity or all"),
                    })
                })?;
                continue;
            }
            Some(("runs", value)) => {
                set_once(&mut capacity_levels, "runs", profile, || {
                    value
                        .parse()
                        .map_err(|e| anyhow::anyhow!("runs={value}: {e}"))
                })?;
                continue;
            }
            Some((name, value)) => {
                tuning.set(name, value)?;
                continue;
            }
            None => {}
        }
        let (is_wal, value) = match part {
            "group" => (true, Some(WalChoice::Group)),
            "parallel" => (true, Some(WalChoice::Parallel)),
            "append" => (true, Some(WalChoice::Append)),
            "zoned" | "waltz" => (true, Some(WalChoice::Zoned)),
            "zenfs-like" => (true, Some(WalChoice::ZenfsLike)),
            "reserved-zones" => (true, Some(WalChoice::ReservedZones)),
            "leader-append" => (true, Some(WalChoice::LeaderAppend)),
            _ => (false, None),
        };
        if is_wal {
            if wal.is_some() {
                bail!("profile {profile:?} names two WAL modes");
            }
            wal = value;
            continue;
        }
        if part == "auto" {
            if auto {
                bail!("profile {profile:?} names auto twice");
            }
            auto = true;
            continue;
        }
        let n = match part {
            "pl" => 0,
            p => match p.strip_prefix("lad").and_then(|n| n.parse().ok()) {
                Some(n) if n <= 7 => n,
                _ => bail!(
                    "unknown profile {part:?}: expected pl, lad0..lad7, auto, a WAL mode (group, \
                     parallel, append, zoned; the ablation zenfs-like, reserved-zones, \
                     leader-append), hot, prismdb, split, splitkv or blob (joined with +, e.g. \
                     pl+parallel)"
                ),
            },
        };
        if levels.is_some() {
            bail!("profile {profile:?} names two placements");
        }
        levels = Some(n);
    }
    if !auto && !tuning.is_empty() {
        bail!("profile {profile:?} sets automatic placement thresholds without auto");
    }
    if separation.is_some() && !(split || splitkv) {
        bail!("profile {profile:?} sets sep= without split values (split or splitkv)");
    }
    Ok(Profile {
        levels_on_fast: levels.unwrap_or(2),
        auto,
        wal,
        tuning,
        bytes_per_sync,
        hot,
        prismdb,
        split,
        splitkv,
        blob,
        msc_policy,
        admission,
        demote_into_bottom,
        capacity_levels,
        hot_partitions,
        direct_tiers: direct_tiers.unwrap_or(0),
        concurrent_memtable_writes,
        concurrent_memtable_min_ops,
        memtable_key_filter,
        separation,
    })
}

/// The hot store's demotion policy named by a profile's `msc=` part.
fn parse_msc_policy(name: &str) -> Result<tierkv::MscPolicy> {
    Ok(match name {
        "random" => tierkv::MscPolicy::Random,
        "round-robin" => tierkv::MscPolicy::RoundRobin,
        "precise" => tierkv::MscPolicy::Precise,
        "approximate" => tierkv::MscPolicy::Approximate,
        _ => bail!(
            "msc={name}: expected random, round-robin, precise or approximate \
             (e.g. prismdb+msc=random)"
        ),
    })
}

/// How many of a multi-get's answers hold a value, after checking that there is one answer
/// per key (a short answer would otherwise pass for misses).
fn count_found<T>(
    keys: usize,
    mut answers: impl ExactSizeIterator<Item = Result<Option<T>>>,
) -> Result<usize> {
    if answers.len() != keys {
        bail!("multi-get of {keys} keys answered {} values", answers.len());
    }
    answers.try_fold(0, |found, a| Ok(found + usize::from(a?.is_some())))
}

/// Splits `spec` (`NAME[:PROFILE]`) into the engine's name and its parsed profile.
pub fn parse_spec(spec: &str) -> Result<(&str, Profile)> {
    let (name, profile) = spec.split_once(':').unwrap_or((spec, ""));
    let profile = parse_profile(profile).with_context(|| format!("engine {spec:?}"))?;
    Ok((name, profile))
}

/// Opens the engine named `spec` (`NAME[:PROFILE]`) on `cfg`'s tiers.
pub fn open(spec: &str, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let (name, profile) = parse_spec(spec)?;
    match name {
        "tierkv" if profile.blob => {
            bail!("engine {spec:?}: blob files are a rocksdb profile (tierkv's is split)")
        }
        "tierkv" => Ok(Box::new(tierkv_engine::TierkvEngine::open(cfg, profile)?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => {
            if profile.auto {
                bail!("engine {spec:?}: automatic placement is a tierkv profile");
            }
            let tierkv_only = profile.msc_policy.is_some()
                || profile.admission.is_some()
                || profile.demote_into_bottom.is_some()
                || profile.capacity_levels.is_some()
                || profile.hot_partitions.is_some()
                || profile.direct_tiers != 0
                || profile.separation.is_some();
            if profile.hot || profile.prismdb || profile.split || profile.splitkv || tierkv_only {
                bail!(
                    "engine {spec:?}: the hot store, prismdb and split values are tierkv profiles"
                );
            }
            if profile.concurrent_memtable_writes.is_some()
                || profile.concurrent_memtable_min_ops.is_some()
                || profile.memtable_key_filter.is_some()
            {
                bail!("engine {spec:?}: cmw, cmwops and mkf are tierkv profiles");
            }
            if profile.wal.is_some() {
                bail!(
                    "engine {spec:?}: the WAL modes group/parallel are tierkv profiles; \
                     RocksDB always uses its own group commit"
                );
            }
            Ok(Box::new(rocks::RocksEngine::open(cfg, &profile)?))
        }
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => bail!(
            "engine rocksdb needs the `rocksdb` feature: cargo run --release -p tierkv-bench \
             --features rocksdb (needs Debian's librocksdb-dev and libclang-dev)"
        ),
        _ => bail!("unknown engine {name:?}: expected tierkv[:PROFILE] or rocksdb[:PROFILE]"),
    }
}

mod tierkv_engine {
    use super::*;
    use tierkv::{
        Compression, Db, Durability, Handle, Options, ReadOptions, TierConfig, WalMode, WriteBatch,
        WriteOptions,
    };

    pub struct TierkvEngine {
        db: Db,
        write: WriteOptions,
        read: ReadOptions,
    }

    impl TierkvEngine {
        pub fn open(cfg: &EngineConfig, profile: Profile) -> Result<Self> {
            let placement = if profile.auto {
                tierkv::Placement::Auto
            } else {
                tierkv::Placement::Fixed
            };
            let mut b = Options::builder()
                .levels_on_fast(profile.levels_on_fast)
                .placement(placement)
                .write_buffer_size(cfg.write_buffer_size)
                .max_immutable_memtables(cfg.max_immutable_memtables)
                .block_cache_bytes(cfg.block_cache_bytes)
                .bloom_bits_per_key(cfg.bloom_bits_per_key)
                .compression(cfg.compression.parse::<Compression>()?)
                .background_threads(cfg.background_threads)
                .target_file_size(cfg.target_file_size)
                .max_bytes_for_level_base(cfg.max_bytes_for_level_base);
            let zoned_tier = zoned_table_tier(cfg)?;
            for (i, t) in cfg.tiers.iter().enumerate() {
                let mut tier = TierConfig::new(&t.name, &t.dir);
                if let (Some(z), true) = (cfg.tierkv.table_zones, zoned_tier == Some(i)) {
                    tier = tier.with_zoned_tables(z.zone_size, z.zones);
                }
                if t.pm {
                    tier = tier.with_kind(tierkv::TierKind::Pm);
                }
                if i < 8 && profile.direct_tiers & (1 << i) != 0 {
                    tier = tier.with_direct_reads(true);
                }
                // NB: with `prismdb` (and `splitkv`) the fast tier's budget is the hot
                // store's (below); the WAL and MANIFEST beside it are outside the budget, as
                // RocksDB's WAL is outside its fast db_path's target.
                let capacity = match t.capacity {
                    Some(_) if i == 0 && (profile.prismdb || profile.splitkv) => u64::MAX,
                    Some(bytes) => bytes,
                    None => u64::MAX,
                };
                b = b.tier(tier.with_capacity(capacity));
            }
            if profile.prismdb {
                b = b.preset(tierkv::Preset::PrismDb);
                if let Some(budget) = cfg.tiers.first().and_then(|t| t.capacity) {
                    b = b.hot_budget(budget);
                }
            }
            if let Some(policy) = profile.msc_policy {
                b = b.msc_policy(policy);
            }
            if let Some(rule) = profile.admission {
                b = b.hot_admission(rule);
            }
            if let Some(on) = profile.demote_into_bottom {
                b = b.hot_demote_into_bottom(on);
            }
            if let Some(runs) = profile.capacity_levels {
                b = b.capacity_levels(runs);
            }
            if let Some(n) = profile.hot_partitions {
                b = b.hot_partitions(n);
            }
            if profile.hot {
                b = b.hot_tier(tierkv::HotTier::Slab);
            }
            if profile.split || profile.splitkv {
                b = b.preset(tierkv::Preset::SplitKv);
            }
            if profile.splitkv {
                // The fast area's budget is the fast tier's (an explicit --hot-budget, applied
                // below, wins).
                if let Some(budget) = cfg.tiers.first().and_then(|t| t.capacity) {
                    b = b.hot_budget(budget);
                }
            }
            if profile.split && !profile.splitkv {
                // `split` alone is the value log only, placed as the profile says: the preset's
                // fast area (the hot store, the LSM off the fast tier) is `splitkv`.
                let hot = if profile.hot {
                    tierkv::HotTier::Slab
                } else {
                    tierkv::HotTier::Off
                };
                b = b
                    .hot_tier(hot)
                    .hot_eviction(tierkv::HotEviction::Msc)
                    .levels_on_fast(profile.levels_on_fast);
            }
            match profile.wal {
                Some(WalChoice::Group) => b = b.wal(WalMode::Group),
                Some(WalChoice::Parallel) => b = b.wal(WalMode::Parallel),
                Some(WalChoice::Append) => b = b.wal(WalMode::Append),
                Some(WalChoice::Zoned) => b = b.wal(WalMode::Zoned),
                Some(step) => {
                    let (leader, append, reserved) = step.ablation().expect("an ablation step");
                    b = b
                        .wal(WalMode::Zoned)
                        .wal_zoned_leader(leader)
                        .wal_zoned_append(append)
                        .wal_reserved_zones(reserved);
                }
                None => {}
            }
            let x = &cfg.tierkv;
            if let Some(bytes) = x.wal_zone_size {
                b = b.wal_zone_size(bytes);
            }
            if let Some(n) = x.wal_zones {
                b = b.wal_zones(n);
            }
            if let Some(n) = x.wal_loggers {
                b = b.wal_loggers(n);
            }
            if let Some(n) = x.wal_inflight {
                b = b.wal_inflight(n);
            }
            if let Some(n) = x.wal_group_bytes {
                b = b.wal_group_bytes(n);
            }
            if x.no_wal_io_uring {
                b = b.wal_io_uring(false);
            }
            if let Some(n) = x.pipeline_workers {
                b = b.pipeline_workers(n);
            }
            if let Some(n) = x.max_pending_requests {
                b = b.max_pending_requests(n);
            }
            if let Some(bps) = x.fast_tier_bandwidth {
                b = b.fast_tier_bandwidth(bps);
            }
            if let Some(bytes) = x.fast_tier_flush_reserve {
                b = b.fast_tier_flush_reserve(bytes);
            }
            if let Some(bytes) = x.hot_budget {
                b = b.hot_budget(bytes);
            }
            let t = &profile.tuning;
            if let Some(v) = t.bw_low {
                b = b.auto_bw_low(v);
            }
            if let Some(v) = t.bw_high {
                b = b.auto_bw_high(v);
            }
            if let Some(v) = t.space_high {
                b = b.auto_space_high(v);
            }
            if let Some(v) = t.space_target {
                b = b.auto_space_target(v);
            }
            if let Some(v) = t.flush_reserve {
                b = b.fast_tier_flush_reserve(v as u64);
            }
            if let Some(v) = t.migration_rate {
                b = b.auto_migration_busy_rate(v as u64);
            }
            if let Some(v) = t.replicas {
                b = b.auto_replicas(v != 0.0);
            }
            if let Some(bytes) = profile.bytes_per_sync {
                b = b.bytes_per_sync(bytes);
            }
            if let Some(on) = profile.concurrent_memtable_writes {
                b = b.wal_concurrent_memtable_writes(on);
            }
            if let Some(ops) = profile.concurrent_memtable_min_ops {
                b = b.wal_concurrent_memtable_min_ops(ops);
            }
            if let Some(on) = profile.memtable_key_filter {
                b = b.memtable_key_filter(on);
            }
            if let Some(separation) = profile.separation {
                b = b.vlog_separation(separation);
            }
            let durability = if cfg.sync {
                Durability::Sync
            } else {
                Durability::Flush
            };
            Ok(TierkvEngine {
                db: Db::open(b.build()?)?,
                write: WriteOptions { durability },
                read: ReadOptions::default(),
            })
        }
    }

    /// A tierkv request in flight.
    enum TierkvPending {
        Write(Handle<()>),
        Get(Handle<Option<Vec<u8>>>),
        /// A multi-get and its key count, to check the answer against.
        MultiGet(Handle<Vec<Option<Vec<u8>>>>, usize),
        Scan(Handle<Vec<(Vec<u8>, Vec<u8>)>>),
    }

    impl Pending for TierkvPending {
        fn is_ready(&self) -> bool {
            match self {
                TierkvPending::Write(h) => h.is_ready(),
                TierkvPending::Get(h) => h.is_ready(),
                TierkvPending::MultiGet(h, _) => h.is_ready(),
                TierkvPending::Scan(h) => h.is_ready(),
            }
        }

        fn wait(self: Box<Self>) -> Result<Outcome> {
            Ok(match *self {
                TierkvPending::Write(h) => {
                    h.wait()?;
                    Outcome::Written
                }
                TierkvPending::Get(h) => Outcome::Found(h.wait()?.is_some()),
                TierkvPending::MultiGet(h, keys) => {
                    let values = h.wait()?;
                    let found = count_found(keys, values.into_iter().map(Ok))?;
                    Outcome::FoundMany { found, keys }
                }
                TierkvPending::Scan(h) => {
                    let rows = h.wait()?;
                    std::hint::black_box(&rows);
                    Outcome::Scanned(rows.len())
                }
            })
        }
    }

    /// The tier whose tables go on zones with `--zoned-tables`: the capacity tier (tier 1).
    fn zoned_table_tier(cfg: &EngineConfig) -> Result<Option<usize>> {
        if cfg.tierkv.table_zones.is_none() {
            return Ok(None);
        }
        if cfg.tiers.len() < 2 {
            bail!(
                "--zoned-tables puts the capacity tier (tier 1) on zones; there is only one tier"
            );
        }
        Ok(Some(1))
    }

    fn wal_counters(s: &tierkv::Stats) -> WalCounters {
        WalCounters {
            io_path: s.wal_io_path.clone(),
            active_loggers: s.active_loggers,
            runs: s.wal_runs,
            pages: s.wal_pages,
            writes: s.writes,
            cover_syncs: s.wal_cover_syncs,
            zoned: s.zoned_wal.clone(),
        }
    }

    fn async_counters(s: &tierkv::Stats) -> AsyncCounters {
        AsyncCounters {
            requests: s.async_requests,
            busy_rejections: s.busy_rejections,
            lucky_reads: s.lucky_reads,
        }
    }

    /// `Busy` becomes [`Submitted::Busy`]; other errors are errors.
    fn submitted(r: tierkv::Result<TierkvPending>) -> Result<Submitted> {
        match r {
            Ok(p) => Ok(Submitted::InFlight(Box::new(p))),
            Err(tierkv::Error::Busy(_)) => Ok(Submitted::Busy),
            Err(e) => Err(e.into()),
        }
    }

    impl Engine for TierkvEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put(&self.write, key, value)?)
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get(&self.read, key)?.is_some())
        }

        fn multi_get(&self, keys: &[Vec<u8>]) -> Result<usize> {
            let values = self.db.multi_get(&self.read, keys)?;
            count_found(keys.len(), values.into_iter().map(Ok))
        }

        fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
            let mut it = self.db.iter(ReadOptions::default())?;
            it.seek(start);
            let mut count = 0;
            while it.valid() && count < n {
                std::hint::black_box(it.value());
                count += 1;
                it.next();
            }
            it.status()?;
            Ok(count)
        }

        fn flush(&self) -> Result<()> {
            Ok(self.db.flush()?)
        }

        fn settle(&self) -> Result<()> {
            Ok(self.db.wait_for_compactions()?)
        }

        fn collect_value_log(&self) -> Result<Option<String>> {
            if self.db.options().values.mode != tierkv::ValuesMode::Split {
                return Ok(None);
            }
            let before = self.db.stats();
            self.db.flush()?;
            self.db.wait_for_compactions()?;
            let started = std::time::Instant::now();
            let kept = self.db.collect_value_log()?;
            let after = self.db.stats();
            let ratio =
                |s: &tierkv::Stats| s.vlog_file_bytes as f64 / s.vlog_live_bytes.max(1) as f64;
            Ok(Some(format!(
                "value log: at the end of the run {} MiB on disk for {} MiB live ({:.2}x); \
                 after collection ({:.1} s, {} files kept for readers) {} MiB for {} MiB \
                 ({:.2}x)",
                before.vlog_file_bytes >> 20,
                before.vlog_live_bytes >> 20,
                ratio(&before),
                started.elapsed().as_secs_f64(),
                kept,
                after.vlog_file_bytes >> 20,
                after.vlog_live_bytes >> 20,
                ratio(&after)
            )))
        }

        fn supports_async(&self) -> bool {
            true
        }

        fn submit(&self, op: AsyncOp<'_>) -> Result<Submitted> {
            submitted(match op {
                AsyncOp::Put { key, value } => self
                    .db
                    .submit_put(&self.write, key, value)
                    .map(TierkvPending::Write),
                AsyncOp::Write { key, value } => {
                    let mut batch = WriteBatch::new();
                    batch.put(key, value);
                    self.db
                        .submit_write(&self.write, batch)
                        .map(TierkvPending::Write)
                }
                AsyncOp::Get { key } => self.db.submit_get(&self.read, key).map(TierkvPending::Get),
                // NB: the engine takes the keys by value, so each submission (a retry after
                // Busy too) copies them, as submit_get copies its key.
                AsyncOp::MultiGet { keys } => self
                    .db
                    .submit_multi_get(&self.read, keys.to_vec())
                    .map(|h| TierkvPending::MultiGet(h, keys.len())),
                AsyncOp::Scan { start, n } => self
                    .db
                    .submit_scan(ReadOptions::default(), start, n)
                    .map(TierkvPending::Scan),
            })
        }

        fn counters(&self) -> EngineCounters {
            let s = self.db.stats();
            let mut reads_served = BTreeMap::new();
            reads_served.insert("memtable".to_string(), s.reads_memtable);
            reads_served.insert("cache".to_string(), s.reads_block_cache);
            for t in &s.tiers {
                reads_served.insert(t.name.clone(), t.reads_served);
            }
            if let Some(hot) = &s.hot_tier {
                reads_served.insert("hot store".to_string(), hot.reads_hot);
            }
            EngineCounters {
                tiers: s
                    .tiers
                    .iter()
                    .map(|t| TierCounters {
                        bytes_written: t.bytes_written(),
                        bytes_read: t.bytes_read,
                    })
                    .collect(),
                reads_served,
                // NB: the parallel WAL has no commit groups; its batching shows in writes/run.
                avg_group_size: (s.write_groups > 0).then(|| s.average_group_size()),
                stall_seconds: Some(s.stall_micros as f64 / 1e6),
                wal: Some(wal_counters(&s)),
                placement: Some((s.placement.clone(), s.migrations)),
                async_api: Some(async_counters(&s)),
                zoned_tiers: s.zoned_tiers.clone(),
                detail: s.to_string(),
            }
        }
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;
    use crate::rocks_paths::{self, DbPath};
    use rocksdb::{
        BlockBasedOptions, Cache, ColumnFamilyDescriptor, DBCompressionType, DBPath, Options,
        WriteOptions, DB, DEFAULT_COLUMN_FAMILY_NAME,
    };

    pub struct RocksEngine {
        db: DB,
        opts: Options,
        write: WriteOptions,
        tiers: Vec<String>,
        /// The `db_paths` given to RocksDB (see `rocks_paths` for how it picks one).
        paths: Vec<DbPath>,
        level_base: u64,
        _cache: Cache,
    }

    impl RocksEngine {
        /// RocksDB with levels `0..levels_on_fast` on the fast tier (none: PL) and, if given,
        /// its own `bytes_per_sync` (RocksDB's default is 0). The WAL (`wal_dir`) and the
        /// database directory (MANIFEST, OPTIONS) are on the fast tier for every profile.
        /// With `blob`, values of [`BLOB_MIN_SIZE`] or more go to blob files, collected by
        /// RocksDB's blob garbage collection.
        pub fn open(cfg: &EngineConfig, profile: &Profile) -> Result<Self> {
            let (levels_on_fast, bytes_per_sync) = (profile.levels_on_fast, profile.bytes_per_sync);
            let cache = Cache::new_lru_cache(cfg.block_cache_bytes)?;
            let mut table = BlockBasedOptions::default();
            table.set_block_cache(&cache);
            table.set_block_size(4096);
            if cfg.bloom_bits_per_key > 0 {
                table.set_bloom_filter(f64::from(cfg.bloom_bits_per_key), false);
            }
            let mut opts = Options::default();
            opts.create_if_missing(true);
            opts.set_block_based_table_factory(&table);
            opts.set_write_buffer_size(cfg.write_buffer_size);
            opts.set_max_write_buffer_number(cfg.max_immutable_memtables as i32 + 1);
            opts.set_level_zero_file_num_compaction_trigger(4);
            opts.set_level_zero_slowdown_writes_trigger(20);
            opts.set_level_zero_stop_writes_trigger(36);
            opts.set_max_bytes_for_level_base(cfg.max_bytes_for_level_base);
            opts.set_max_bytes_for_level_multiplier(rocks_paths::LEVEL_MULTIPLIER as f64);
            // NB: RocksDB ignores dynamic level sizes with several db_paths; off for every
            // profile, so that PL (one db_path) has the same level shape as LAD-n.
            opts.set_level_compaction_dynamic_level_bytes(false);
            opts.set_target_file_size_base(cfg.target_file_size);
            opts.set_max_background_jobs(cfg.background_threads as i32);
            opts.set_compression_type(match cfg.compression.as_str() {
                "none" => DBCompressionType::None,
                "lz4" => DBCompressionType::Lz4,
                "zstd" => DBCompressionType::Zstd,
                other => bail!("compression {other:?} is not supported for rocksdb"),
            });
            if let Some(bytes) = bytes_per_sync {
                opts.set_bytes_per_sync(bytes);
            }
            if profile.blob {
                set_blob_options(&mut opts);
            }
            opts.enable_statistics();
            let fast = &cfg.tiers[0].dir;
            opts.set_wal_dir(fast.join("wal"));
            let paths =
                rocks_paths::db_paths(&cfg.tiers, levels_on_fast, cfg.max_bytes_for_level_base);
            if !paths.is_empty() {
                let db_paths = paths
                    .iter()
                    .map(|p| DBPath::new(path_dir(cfg, p.tier), p.target))
                    .collect::<Result<Vec<_>, _>>()?;
                opts.set_db_paths(&db_paths);
            }
            // The default column family is opened by name, with the same options `DB::open`
            // would give it, so that `cf_handle` finds it for `batched_multi_get_cf`.
            let default_cf = ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
            let db = DB::open_cf_descriptors(&opts, fast.join("db"), [default_cf])?;
            let mut write = WriteOptions::default();
            write.set_sync(cfg.sync);
            Ok(RocksEngine {
                db,
                opts,
                write,
                tiers: cfg.tiers.iter().map(|t| t.name.clone()).collect(),
                paths,
                level_base: cfg.max_bytes_for_level_base,
                _cache: cache,
            })
        }

        fn tickers(&self) -> BTreeMap<String, u64> {
            let text = self.opts.get_statistics().unwrap_or_default();
            text.lines()
                .filter_map(|l| {
                    let (name, rest) = l.split_once(" COUNT : ")?;
                    Some((name.trim().to_string(), rest.trim().parse().ok()?))
                })
                .collect()
        }

        /// Compaction bytes written per level, from the cfstats table (GB, 2 decimals).
        fn compaction_write_share(&self) -> Vec<f64> {
            let text = self
                .db
                .property_value("rocksdb.cfstats")
                .ok()
                .flatten()
                .unwrap_or_default();
            let mut col = None;
            let mut shares = Vec::new();
            for line in text.lines() {
                let cells: Vec<&str> = line.split_whitespace().collect();
                if cells.first() == Some(&"Level") && col.is_none() {
                    col = cells.iter().position(|c| *c == "Write(GB)");
                } else if let (Some(c), Some(l)) = (col, cells.first()) {
                    if let Some(level) = l.strip_prefix('L').and_then(|n| n.parse::<usize>().ok()) {
                        // Rows start "L<n> files/compacting size unit ..."; the unit shifts columns by one.
                        let v = cells
                            .get(c + 1)
                            .and_then(|v| v.parse::<f64>().ok())
                            .unwrap_or(0.0);
                        shares.resize(shares.len().max(level + 1), 0.0);
                        shares[level] = v;
                    }
                }
            }
            shares
        }

        /// The tier RocksDB's path selection sends `level`'s tables to.
        fn tier_of_level(&self, level: usize) -> usize {
            rocks_paths::tier_of_level(&self.paths, level, self.level_base)
        }
    }

    /// Values of this many bytes or more go to blob files with the `blob` profile: tierkv's
    /// `split_threshold` in the `splitkv` preset, so both sides separate the same values.
    pub const BLOB_MIN_SIZE: u64 = 4 << 10;

    /// BlobDB, integrated: values of [`BLOB_MIN_SIZE`] or more in blob files, written at
    /// flush and kept out of compaction's rewrites, and blob garbage collection on (live
    /// blobs of the oldest quarter of the files are moved when compaction meets them, the
    /// RocksDB default cutoff). RocksDB writes blob files to its first path: the fast tier
    /// with `ladN` (N >= 1) and the capacity tier with `pl`, which is how a run places them.
    fn set_blob_options(opts: &mut Options) {
        opts.set_enable_blob_files(true);
        opts.set_min_blob_size(BLOB_MIN_SIZE);
        opts.set_enable_blob_gc(true);
    }

    /// The directory of a db_path on `tier`: the fast tier's is `sst/` beside `wal/` and
    /// `db/`; another tier's is its root.
    fn path_dir(cfg: &EngineConfig, tier: usize) -> PathBuf {
        if tier == 0 {
            cfg.tiers[0].dir.join("sst")
        } else {
            cfg.tiers[tier].dir.clone()
        }
    }

    impl Engine for RocksEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put_opt(key, value, &self.write)?)
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get_pinned(key)?.is_some())
        }

        /// RocksDB's batched MultiGet (the array form): it groups the keys by table and reads
        /// their blocks together, as tierkv's multi_get does. The crate's `multi_get` goes
        /// through the vector form, which looks the keys up one by one.
        fn multi_get(&self, keys: &[Vec<u8>]) -> Result<usize> {
            let cf = self
                .db
                .cf_handle(DEFAULT_COLUMN_FAMILY_NAME)
                .context("rocksdb: no handle for the default column family")?;
            let answers = self.db.batched_multi_get_cf(cf, keys, false);
            count_found(keys.len(), answers.into_iter().map(|a| Ok(a?)))
        }

        fn scan(&self, start: &[u8], n: usize) -> Result<usize> {
            let mut it = self.db.raw_iterator();
            it.seek(start);
            let mut count = 0;
            while it.valid() && count < n {
                std::hint::black_box(it.value());
                count += 1;
                it.next();
            }
            it.status()?;
            Ok(count)
        }

        fn flush(&self) -> Result<()> {
            Ok(self.db.flush()?)
        }

        fn settle(&self) -> Result<()> {
            let int = |name: &str| self.db.property_int_value(name).ok().flatten().unwrap_or(0);
            while int("rocksdb.compaction-pending") > 0
                || int("rocksdb.num-running-compactions") > 0
                || int("rocksdb.num-running-flushes") > 0
                || int("rocksdb.mem-table-flush-pending") > 0
            {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Ok(())
        }

        fn counters(&self) -> EngineCounters {
            let t = self.tickers();
            let get = |n: &str| t.get(n).copied().unwrap_or(0);
            let mut tiers = vec![TierCounters::default(); self.tiers.len()];
            tiers[0].bytes_written += get("rocksdb.wal.bytes");
            tiers[self.tier_of_level(0)].bytes_written += get("rocksdb.flush.write.bytes");
            let shares = self.compaction_write_share();
            let total_share: f64 = shares.iter().skip(1).sum();
            let compaction = get("rocksdb.compact.write.bytes") as f64;
            for (level, share) in shares.iter().enumerate().skip(1) {
                if total_share > 0.0 {
                    tiers[self.tier_of_level(level)].bytes_written +=
                        (compaction * share / total_share) as u64;
                }
            }
            let mut reads_served = BTreeMap::new();
            reads_served.insert("memtable".into(), get("rocksdb.memtable.hit"));
            reads_served.insert("cache".into(), get("rocksdb.block.cache.data.hit"));
            let by_level = [
                (0, get("rocksdb.l0.hit")),
                (1, get("rocksdb.l1.hit")),
                (2, get("rocksdb.l2andup.hit")),
            ];
            for (level, hits) in by_level {
                let name = self.tiers[self.tier_of_level(level)].clone();
                *reads_served.entry(name).or_default() += hits;
            }
            let leaders = get("rocksdb.write.self");
            let all = leaders + get("rocksdb.write.other");
            EngineCounters {
                tiers,
                reads_served,
                avg_group_size: (leaders > 0).then(|| all as f64 / leaders as f64),
                stall_seconds: Some(get("rocksdb.stall.micros") as f64 / 1e6),
                wal: None,
                placement: None,
                async_api: None,
                zoned_tiers: Vec::new(),
                detail: self
                    .db
                    // Per-level compaction figures (read, written, write amplification).
                    .property_value("rocksdb.stats")
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_join_placement_and_wal_mode() {
        let p = |s| parse_profile(s).unwrap();
        assert_eq!(
            p(""),
            Profile {
                levels_on_fast: 2,
                auto: false,
                wal: None,
                tuning: AutoTuning::default(),
                bytes_per_sync: None,
                hot: false,
                prismdb: false,
                msc_policy: None,
                admission: None,
                demote_into_bottom: None,
                capacity_levels: None,
                hot_partitions: None,
                direct_tiers: 0,
                concurrent_memtable_writes: None,
                concurrent_memtable_min_ops: None,
                memtable_key_filter: None,
                separation: None,
                split: false,
                splitkv: false,
                blob: false,
            }
        );
        assert_eq!(p("pl").levels_on_fast, 0);
        assert_eq!(p("lad7").levels_on_fast, 7);
        assert_eq!(p("parallel").wal, Some(WalChoice::Parallel));
        assert_eq!(p("pl+append").wal, Some(WalChoice::Append));
        assert_eq!(p("zoned").wal, Some(WalChoice::Zoned));
        assert_eq!(p("waltz").wal, Some(WalChoice::Zoned));
        assert_eq!(p("zenfs-like").wal, Some(WalChoice::ZenfsLike));
        assert_eq!(p("pl+reserved-zones").wal, Some(WalChoice::ReservedZones));
        assert_eq!(p("leader-append").wal, Some(WalChoice::LeaderAppend));
        assert!(parse_profile("zenfs-like+zoned").is_err());
        assert!(parse_profile("append+parallel").is_err());
        // The four systems side by side: SpanDB's parallel WAL, WALTZ's zoned WAL, PrismDB's
        // hot store, SplitKV's value log.
        assert!(p("hot").hot && !p("hot").split);
        assert!(p("pl+split").split && p("pl+split").levels_on_fast == 0);
        assert!(p("zoned+hot+split").hot);
        assert!(parse_profile("hot+hot").is_err());
        assert!(p("splitkv").splitkv && !p("splitkv").split);
        assert!(parse_profile("splitkv+splitkv").is_err());
        assert!(p("prismdb").prismdb && !p("prismdb").hot);
        assert!(parse_profile("prismdb+prismdb").is_err());
        let random = p("prismdb+msc=random");
        assert_eq!(random.msc_policy, Some(tierkv::MscPolicy::Random));
        assert!(parse_profile("prismdb+msc=best").is_err());
        let when_free = p("prismdb+admit=when-free").admission;
        assert_eq!(when_free, Some(tierkv::HotAdmission::WhenFree));
        let make_room = p("prismdb+admit=make-room").admission;
        assert_eq!(make_room, Some(tierkv::HotAdmission::MakeRoom));
        assert!(parse_profile("prismdb+admit=always").is_err());
        assert!(parse_profile("prismdb+admit=when-free+admit=make-room").is_err());
        assert_eq!(p("prismdb+bottom=1").demote_into_bottom, Some(true));
        assert_eq!(p("prismdb+bottom=0").demote_into_bottom, Some(false));
        assert!(parse_profile("prismdb+bottom=yes").is_err());
        let all = p("prismdb+runs=all").capacity_levels;
        assert_eq!(all, Some(tierkv::CapacityLevels::All));
        assert_eq!(
            p("prismdb+runs=2").capacity_levels,
            Some(tierkv::CapacityLevels::Fixed(2))
        );
        assert_eq!(p("prismdb+parts=4").hot_partitions, Some(4));
        assert_eq!(p("prismdb+direct=capacity").direct_tiers, 2);
        assert_eq!(p("prismdb+direct=all").direct_tiers, u8::MAX);
        assert!(parse_profile("prismdb+parts=four").is_err());
        assert!(parse_profile("prismdb+parts=2+parts=4").is_err());
        // RocksDB's BlobDB baseline, placed by the fixed placement.
        assert!(p("pl+blob").blob && p("pl+blob").levels_on_fast == 0);
        assert!(!p("lad2").blob);
        assert!(parse_profile("blob+blob").is_err());
        assert_eq!(p("parallel").levels_on_fast, 2);
        assert_eq!(
            p("pl+parallel"),
            Profile {
                levels_on_fast: 0,
                auto: false,
                wal: Some(WalChoice::Parallel),
                tuning: AutoTuning::default(),
                bytes_per_sync: None,
                hot: false,
                prismdb: false,
                msc_policy: None,
                admission: None,
                demote_into_bottom: None,
                capacity_levels: None,
                hot_partitions: None,
                direct_tiers: 0,
                concurrent_memtable_writes: None,
                concurrent_memtable_min_ops: None,
                memtable_key_filter: None,
                separation: None,
                split: false,
                splitkv: false,
                blob: false,
            }
        );
        assert_eq!(
            p("group+lad1"),
            Profile {
                levels_on_fast: 1,
                auto: false,
                wal: Some(WalChoice::Group),
                tuning: AutoTuning::default(),
                bytes_per_sync: None,
                hot: false,
                prismdb: false,
                msc_policy: None,
                admission: None,
                demote_into_bottom: None,
                capacity_levels: None,
                hot_partitions: None,
                direct_tiers: 0,
                concurrent_memtable_writes: None,
                concurrent_memtable_min_ops: None,
                memtable_key_filter: None,
                separation: None,
                split: false,
                splitkv: false,
                blob: false,
            }
        );
        assert!(p("auto").auto);
        assert!(p("auto+parallel").auto);
        assert_eq!(p("auto").levels_on_fast, 2);
        assert_eq!(p("auto+lad1").levels_on_fast, 1);
        assert!(p("lad1+auto").auto);
        assert_eq!(p("lad2+bps=0").bytes_per_sync, Some(0));
        assert_eq!(p("cmw=0").concurrent_memtable_writes, Some(false));
        assert_eq!(p("group+cmw=1").concurrent_memtable_writes, Some(true));
        assert!(parse_profile("cmw=2").is_err());
        assert!(parse_profile("cmw=0+cmw=1").is_err());
        assert_eq!(p("cmwops=1").concurrent_memtable_min_ops, Some(1));
        assert_eq!(p("prismdb+mkf=0").memtable_key_filter, Some(false));
        assert!(parse_profile("cmwops=x").is_err());
        assert_eq!(
            p("splitkv+sep=flush").separation,
            Some(tierkv::ValueSeparation::OnFlush)
        );
        assert_eq!(
            p("split+sep=write").separation,
            Some(tierkv::ValueSeparation::OnWrite)
        );
        assert!(parse_profile("splitkv+sep=never").is_err());
        assert!(parse_profile("prismdb+sep=flush").is_err());
        assert_eq!(p("auto+bps=524288").bytes_per_sync, Some(512 << 10));
        let tuned = p("auto+bwl=0.3+bwh=0.7+sph=0.95+spt=0.85+fr=0+mr=67108864+rep=0");
        assert_eq!(
            tuned.tuning,
            AutoTuning {
                bw_low: Some(0.3),
                bw_high: Some(0.7),
                space_high: Some(0.95),
                space_target: Some(0.85),
                flush_reserve: Some(0.0),
                migration_rate: Some(67108864.0),
                replicas: Some(0.0),
            }
        );
        for bad in [
            "lad2+bwl=0.3",
            "auto+bwl=0.3+bwl=0.4",
            "auto+bwx=0.3",
            "auto+bwl=fast",
            "bps=1+bps=2",
            "bps=lots",
        ] {
            assert!(parse_profile(bad).is_err(), "{bad}");
        }
        for bad in [
            "lad8",
            "fast",
            "pl+lad1",
            "group+parallel",
            "pl+pl",
            "auto+auto",
            "auto+pl+lad1",
        ] {
            assert!(parse_profile(bad).is_err(), "{bad}");
        }
    }
}
