//! `tierkv-bench`: YCSB and db_bench-style workloads on tierkv and RocksDB, side by side.
//!
//! Each engine runs on fresh directories under the same tiers with the same workload and seeds;
//! `--compare` prints ratios against the first engine. See BENCHMARKS.md.

mod engine;
mod mixgraph;
mod report;
// NB: compiled (and unit-tested) without the `rocksdb` feature too, so that the path choice
// stays checked where librocksdb is not installed.
#[cfg_attr(not(feature = "rocksdb"), allow(dead_code))]
mod rocks_paths;
mod runner;
mod space;
mod workload;

use anyhow::{bail, Context, Result};
use clap::Parser;
use engine::{EngineConfig, TableZones, TierDir, TierkvExtra};
use report::{RunRecord, TierMeasure};
use runner::RunSpec;
use std::path::PathBuf;
use std::time::Duration;
use workload::{Distribution, ValueSizes, Workload};

/// The heap: jemalloc, handing freed pages back to the OS after a second (a background
/// thread does it). Measured in the lab's 256 MiB cgroup on PrismDB's ycsb-b: the process
/// held 86 MiB against 102-106 MiB with glibc's malloc, and the page cache serving the
/// capacity tier got the difference (BENCHMARKS.md, "Process memory"). RocksDB's own
/// allocations (C++) still go through glibc's malloc, bounded by `bound_heap_retention`.
#[global_allocator]
static HEAP: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read once at its start (a C string; `None` would mean defaults).
#[unsafe(export_name = "_rjem_malloc_conf")]
static HEAP_OPTIONS: Option<&'static u8> =
    Some(&b"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0\0"[0]);

#[derive(Parser, Debug)]
#[command(
    name = "tierkv-bench",
    version,
    about = "Benchmark tierkv against RocksDB on the same tiers"
)]
struct Args {
    /// Engine: tierkv[:PROFILE] or rocksdb[:PROFILE] (rocksdb needs --features rocksdb). A
    /// profile joins with `+` a placement (pl, lad0..lad7; default lad2) and, for tierkv, a WAL
    /// mode (group, the default, parallel, append or zoned, or a step of WALTZ's ablation:
    /// zenfs-like, reserved-zones, leader-append): tierkv:parallel, tierkv:pl+zoned,
    /// rocksdb:lad1.
    /// tierkv's `auto` starts from the placement named (tierkv:auto+lad1) and takes thresholds
    /// (auto+bwl=0.3+rep=0); `bps=N` sets either engine's bytes_per_sync (rocksdb:lad2+bps=0).
    /// `cmw=0|1` turns tierkv's parallel memtable insertion of a write group off or on
    /// (tierkv:cmw=0); `cmwops=N` sets the fewest operations of a group it inserts in
    /// parallel (tierkv:cmwops=1); `mkf=0|1` turns the memtables' key filter off or on
    /// (tierkv:prismdb+mkf=0).
    /// `split` is tierkv's SplitKV preset (tierkv:split), `sep=write|flush` when its large
    /// values reach the value log (vlog_separation; tierkv:splitkv+sep=flush); `blob` is
    /// RocksDB's BlobDB with blob
    /// GC, its blob files on the first path: the fast tier with ladN, capacity with pl
    /// (rocksdb:lad2+blob, rocksdb:pl+blob).
    /// `prismdb` is tierkv's PrismDB preset, the fast tier's --tier-capacity its hot store's
    /// budget, with `msc=random|round-robin|precise|approximate`, `runs=all|auto|N`
    /// (capacity_levels), `admit=make-room|when-free` (hot_admission), `bottom=1|0`
    /// (hot_demote_into_bottom) and `parts=N` (hot_partitions) to vary it
    /// (tierkv:prismdb+msc=random, tierkv:prismdb+admit=when-free+bottom=1,
    /// tierkv:prismdb+parts=4). `direct=fast|capacity|all` reads that tier's tables with
    /// O_DIRECT, keeping them out of the page cache (tierkv:prismdb+direct=capacity).
    /// `splitkv` is the whole SplitKV preset (value
    /// log and fast area), the fast tier's --tier-capacity its fast area's budget unless
    /// --hot-budget names one.
    #[arg(long, default_value = "tierkv")]
    engine: String,
    /// Run these engines one after another on fresh directories and print ratios against the
    /// first, e.g. `rocksdb,tierkv`.
    #[arg(long)]
    compare: Option<String>,
    /// Run the --compare list this many times, each round starting one engine later (A,B,C
    /// then B,C,A ...), so that no engine always runs first on a machine that favours the first
    /// run; prints each round, then each engine's median over the rounds.
    #[arg(long, default_value_t = 1)]
    rounds: usize,
    /// Root under which each engine's tier directories are made (<dir>/<engine>/<tier>).
    #[arg(long, default_value = "./tierkv-bench-data")]
    dir: PathBuf,
    /// A tier as NAME=DIR, fastest first (repeatable); default: fast and capacity under --dir.
    #[arg(long = "tier", value_name = "NAME=DIR")]
    tiers: Vec<String>,
    /// A tier's byte budget, NAME=SIZE (e.g. fast=1G; K/M/G suffixes are powers of 1024):
    /// tierkv places tables elsewhere once the tier is full; RocksDB's fast db_path target is
    /// capped at it, which RocksDB treats as a target, not a limit (compare the tier's `peak`).
    #[arg(long = "tier-capacity", value_name = "NAME=SIZE")]
    tier_capacities: Vec<String>,
    /// A tier's kind for tierkv, NAME=KIND: `block` (the default) or `pm` (a DAX or tmpfs
    /// mount such as /dev/shm, its files memory-mapped). RocksDB writes there as to any directory.
    #[arg(long = "tier-kind", value_name = "NAME=KIND")]
    tier_kinds: Vec<String>,
    /// A tier's block device for device counters, NAME=DEV (e.g. capacity=loop0).
    #[arg(long = "device", value_name = "NAME=DEV")]
    devices: Vec<String>,
    /// fillseq fillrandom overwrite readrandom readseq scanrandom ycsb-a..ycsb-f multiphase,
    /// writeN (N% updates, the rest reads: write100, write70, write30) or mixgraph (RocksDB's
    /// MixGraph; its own key, value-size and seek-length distributions replace --distribution,
    /// --value-size and --scan-length).
    #[arg(long, default_value = "fillrandom")]
    workload: String,
    /// Records loaded before the run (and the key space of random fills).
    #[arg(long, default_value_t = 100_000)]
    records: u64,
    /// Operations in the run phase (default: --records, unless --duration is given).
    #[arg(long)]
    ops: Option<u64>,
    /// Run-phase time limit in seconds.
    #[arg(long)]
    duration: Option<f64>,
    /// Client threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Requests in flight per client thread through the engine's asynchronous API (submit_*);
    /// 1 = synchronous calls. RocksDB has no asynchronous API and runs with 1 (the report says so).
    #[arg(long, default_value_t = 1)]
    inflight: usize,
    /// How an engine without an asynchronous API (RocksDB) meets --inflight N > 1: `equal`
    /// gives it N times --threads client threads, so both sides keep the same number of
    /// requests outstanding (the fair headline ratio); `threads` keeps --threads, one request
    /// each. Quote both when they differ.
    #[arg(long, value_enum, default_value_t = Outstanding::Equal)]
    outstanding: Outstanding,
    /// Point reads a client thread gathers into one multi-get (tierkv multi_get, or
    /// submit_multi_get with --inflight; RocksDB's batched MultiGet); 1 = one get per read.
    /// Other operations flush the gathered reads first. ops/s counts keys; `mget` latencies
    /// are per multi-get.
    #[arg(long, default_value_t = 1)]
    multiget: usize,
    /// Key size in bytes (>= 8).
    #[arg(long, default_value_t = 16)]
    key_size: usize,
    /// Value size in bytes, or a weighted mix like 256:50,4096:50.
    #[arg(long, default_value = "1024")]
    value_size: String,
    /// Key distribution: uniform, zipfian or latest.
    #[arg(long, default_value = "uniform")]
    distribution: String,
    /// Zipfian skew.
    #[arg(long, default_value_t = 0.99)]
    zipf_theta: f64,
    /// Sync every write (RocksDB's sync=true).
    #[arg(long)]
    sync: bool,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Keys per scan (scanrandom, readseq; ycsb-e draws 1..=N).
    #[arg(long, default_value_t = 100)]
    scan_length: usize,
    /// Memtable size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    write_buffer_size: usize,
    /// Immutable memtables before writes stall.
    #[arg(long, default_value_t = 2)]
    max_immutable_memtables: usize,
    /// Block cache in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    block_cache: usize,
    /// Bloom filter bits per key (0 = none).
    #[arg(long, default_value_t = 10)]
    bloom_bits: u32,
    /// none, lz4 or zstd.
    #[arg(long, default_value = "lz4")]
    compression: String,
    /// Background flush and compaction threads.
    #[arg(long, default_value_t = 2)]
    background_threads: usize,
    /// Target table file size in bytes.
    #[arg(long, default_value_t = 64 << 20)]
    target_file_size: u64,
    /// L1 target size in bytes.
    #[arg(long, default_value_t = 256 << 20)]
    max_bytes_for_level_base: u64,
    /// tierkv parallel WAL: most loggers writing at once (1..=8; engine default 3).
    #[arg(long)]
    wal_loggers: Option<usize>,
    /// tierkv parallel WAL: writes each logger keeps in flight (1..=64; engine default 4).
    #[arg(long)]
    wal_inflight: Option<usize>,
    /// tierkv parallel WAL: bytes of one memtable's page group (engine default 2x
    /// --write-buffer-size).
    #[arg(long)]
    wal_group_bytes: Option<u64>,
    /// tierkv parallel WAL: write pages with pwritev2 instead of io_uring.
    #[arg(long)]
    no_wal_io_uring: bool,
    /// tierkv zoned WAL: zone size of the emulated zoned device, with an optional K/M/G suffix
    /// (engine default 16M).
    #[arg(long)]
    zone_size: Option<String>,
    /// tierkv zoned WAL: zones of the emulated zoned device (engine default 16).
    #[arg(long)]
    zones: Option<u32>,
    /// tierkv: keep the capacity tier's tables on an emulated zoned device (`tables = "zones"`)
    /// of --table-zones zones of --table-zone-size bytes, in the tier's directory.
    #[arg(long)]
    zoned_tables: bool,
    /// tierkv --zoned-tables: zone size of the tables' device, with an optional K/M/G suffix
    /// (engine default 64M).
    #[arg(long, requires = "zoned_tables")]
    table_zone_size: Option<String>,
    /// tierkv --zoned-tables: zones of the tables' device, two for its journal (engine
    /// default 64).
    #[arg(long, requires = "zoned_tables")]
    table_zones: Option<u32>,
    /// tierkv: threads serving asynchronous reads and deferred writes (engine default 2).
    #[arg(long)]
    pipeline_workers: Option<usize>,
    /// tierkv: asynchronous requests admitted before submit_* answers Busy (engine default 4096).
    #[arg(long)]
    max_pending: Option<usize>,
    /// tierkv: the fast tier's bandwidth ceiling for automatic placement, bytes/s with an
    /// optional K/M/G suffix (default: measured by a write probe at open).
    #[arg(long)]
    fast_tier_bandwidth: Option<String>,
    /// tierkv: bytes of the fast tier kept for memtable flushes, with an optional K/M/G suffix
    /// (default: the engine's, see `Options::flush_reserve`).
    #[arg(long)]
    fast_tier_flush_reserve: Option<String>,
    /// tierkv: the hot store's budget (`hot_budget`) for the `hot` and `splitkv` profiles,
    /// with an optional K/M/G suffix (default: the engine's, 1 GiB).
    #[arg(long)]
    hot_budget: Option<String>,
    /// Write the JSON report(s) to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Start the run phase without waiting for the load phase's compactions to finish.
    #[arg(long)]
    no_settle: bool,
    /// Operations of the workload run, unmeasured, before the run phase (after the load and
    /// settle): warms caches and lets automatic placement adapt, as SpanDB's runs were
    /// preceded by 30% extra requests.
    #[arg(long, default_value_t = 0)]
    warmup: u64,
    /// Keep the engines' directories after the run.
    #[arg(long)]
    keep: bool,
    /// No progress bar.
    #[arg(long)]
    quiet: bool,
    /// Report, on stderr, every stretch of at least this many milliseconds in which no
    /// operation completed, with every thread's kernel stack (read from /proc; needs root).
    #[arg(long, value_name = "MS")]
    stall_report_ms: Option<u64>,
    /// Also print the engine's own statistics after each run.
    #[arg(long)]
    verbose: bool,
    /// tierkv with split values: after the run (and its report), flush, wait for compactions
    /// (which count the value log's garbage) and run value-log garbage collection to the end,
    /// then print the value log's bytes on disk against its live bytes: the space the
    /// collector can reach, beside the space the run ended with. The tiers' space in the
    /// report is then measured after the collection.
    #[arg(long)]
    collect_value_log: bool,
}

/// A byte count: digits with an optional K, M or G (powers of 1024).
fn parse_size(text: &str) -> Result<u64> {
    let (digits, shift) = match text.as_bytes().last() {
        Some(b'K' | b'k') => (&text[..text.len() - 1], 10),
        Some(b'M' | b'm') => (&text[..text.len() - 1], 20),
        Some(b'G' | b'g') => (&text[..text.len() - 1], 30),
        _ => (text, 0),
    };
    let n: u64 = digits
        .parse()
        .with_context(|| format!("{text:?}: expected a size like 1073741824 or 1G"))?;
    n.checked_mul(1 << shift)
        .with_context(|| format!("{text:?}: size too large"))
}

fn parse_pairs(items: &[String], what: &str) -> Result<Vec<(String, String)>> {
    items
        .iter()
        .map(|s| {
            let (k, v) = s
                .split_once('=')
                .with_context(|| format!("--{what} {s:?}: expected NAME=VALUE"))?;
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

impl Args {
    fn spec(&self) -> Result<RunSpec> {
        if self.threads == 0 || self.threads > 1024 {
            bail!(
                "--threads {} is out of range: accepted 1..=1024",
                self.threads
            );
        }
        if self.key_size < 8 || self.key_size > 1024 {
            bail!(
                "--key-size {} is out of range: accepted 8..=1024",
                self.key_size
            );
        }
        if self.records == 0 {
            bail!("--records must be at least 1");
        }
        if matches!(self.duration, Some(d) if !(d > 0.0 && d.is_finite())) {
            bail!("--duration must be a positive number of seconds");
        }
        if self.scan_length == 0 {
            bail!("--scan-length must be at least 1");
        }
        if self.inflight == 0 || self.inflight > 4096 {
            bail!(
                "--inflight {} is out of range: accepted 1..=4096",
                self.inflight
            );
        }
        if self.multiget == 0 || self.multiget > 4096 {
            bail!(
                "--multiget {} is out of range: accepted 1..=4096",
                self.multiget
            );
        }
        let workload: Workload = self.workload.parse()?;
        Ok(RunSpec {
            workload,
            records: self.records,
            ops: self.ops,
            duration: self.duration.map(Duration::from_secs_f64),
            threads: self.threads,
            key_size: self.key_size,
            values: match workload {
                Workload::MixGraph => ValueSizes::mixgraph(),
                _ => self.value_size.parse::<ValueSizes>()?,
            },
            distribution: Distribution::parse(&self.distribution, self.zipf_theta)?,
            seed: self.seed,
            scan_length: self.scan_length,
            inflight: self.inflight,
            multiget: self.multiget,
            progress: !self.quiet,
            stall_report: self.stall_report_ms.map(Duration::from_millis),
        })
    }

    /// The capacity tier's zoned device with `--zoned-tables`, the engine's defaults filling
    /// what is not given.
    fn table_zones(&self) -> Result<Option<TableZones>> {
        if !self.zoned_tables {
            return Ok(None);
        }
        // NB: a new tier carries the engine's default zone size and count.
        let defaults = tierkv::TierConfig::new("capacity", "");
        Ok(Some(TableZones {
            zone_size: match &self.table_zone_size {
                Some(text) => parse_size(text)?,
                None => defaults.zone_size,
            },
            zones: self.table_zones.unwrap_or(defaults.zones),
        }))
    }

    fn engine_config(&self, engine: &str) -> Result<EngineConfig> {
        let safe: String = engine
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
            .collect();
        let mut tiers: Vec<TierDir> = if self.tiers.is_empty() {
            ["fast", "capacity"]
                .iter()
                .map(|n| TierDir {
                    name: n.to_string(),
                    dir: self.dir.join(&safe).join(n),
                    capacity: None,
                    pm: false,
                })
                .collect()
        } else {
            parse_pairs(&self.tiers, "tier")?
                .into_iter()
                .map(|(name, dir)| TierDir {
                    name,
                    dir: PathBuf::from(dir).join(&safe),
                    capacity: None,
                    pm: false,
                })
                .collect()
        };
        for (name, size) in parse_pairs(&self.tier_capacities, "tier-capacity")? {
            let tier = tiers
                .iter_mut()
                .find(|t| t.name == name)
                .with_context(|| format!("--tier-capacity {name}=...: no tier named {name:?}"))?;
            tier.capacity = Some(parse_size(&size)?);
        }
        for (name, kind) in parse_pairs(&self.tier_kinds, "tier-kind")? {
            let tier = tiers
                .iter_mut()
                .find(|t| t.name == name)
                .with_context(|| format!("--tier-kind {name}=...: no tier named {name:?}"))?;
            tier.pm = match kind.as_str() {
                "pm" => true,
                "block" => false,
                other => bail!("--tier-kind {name}={other}: the kinds are block and pm"),
            };
        }
        Ok(EngineConfig {
            tiers,
            sync: self.sync,
            write_buffer_size: self.write_buffer_size,
            max_immutable_memtables: self.max_immutable_memtables,
            block_cache_bytes: self.block_cache,
            bloom_bits_per_key: self.bloom_bits,
            compression: self.compression.clone(),
            background_threads: self.background_threads,
            target_file_size: self.target_file_size,
            max_bytes_for_level_base: self.max_bytes_for_level_base,
            tierkv: TierkvExtra {
                wal_loggers: self.wal_loggers,
                wal_inflight: self.wal_inflight,
                wal_group_bytes: self.wal_group_bytes,
                no_wal_io_uring: self.no_wal_io_uring,
                pipeline_workers: self.pipeline_workers,
                max_pending_requests: self.max_pending,
                fast_tier_bandwidth: self
                    .fast_tier_bandwidth
                    .as_deref()
                    .map(parse_size)
                    .transpose()?,
                fast_tier_flush_reserve: self
                    .fast_tier_flush_reserve
                    .as_deref()
                    .map(parse_size)
                    .transpose()?,
                hot_budget: self.hot_budget.as_deref().map(parse_size).transpose()?,
                wal_zone_size: self.zone_size.as_deref().map(parse_size).transpose()?,
                wal_zones: self.zones,
                table_zones: self.table_zones()?,
            },
        })
    }
}

/// Runs one engine on fresh directories and returns its JSON record.
fn bench_engine(args: &Args, spec: &RunSpec, engine_spec: &str) -> Result<serde_json::Value> {
    let cfg = args.engine_config(engine_spec)?;
    for t in &cfg.tiers {
        if t.dir.exists() {
            std::fs::remove_dir_all(&t.dir)
                .with_context(|| format!("clearing {}", t.dir.display()))?;
        }
        std::fs::create_dir_all(&t.dir).with_context(|| format!("creating {}", t.dir.display()))?;
    }
    let devices = parse_pairs(&args.devices, "device")?;
    let device_of = |tier: &str| {
        devices
            .iter()
            .find(|(n, _)| n == tier)
            .map(|(_, d)| d.clone())
    };
    let dev_start: Vec<Option<(u64, u64)>> = cfg
        .tiers
        .iter()
        .map(|t| device_of(&t.name).and_then(|d| report::device_bytes(&d)))
        .collect();

    let peak_watch = space::PeakWatch::start(cfg.tiers.iter().map(|t| t.dir.clone()).collect());
    let engine = engine::open(engine_spec, &cfg)?;
    let mut spec = spec.clone();
    let inflight_note = if spec.inflight > 1 && !engine.supports_async() {
        let note = format!(
            "{engine_spec} has no asynchronous API: --inflight {} falls back to 1 request in \
             flight per thread (synchronous calls){}",
            spec.inflight,
            match args.outstanding {
                Outstanding::Equal => format!(
                    ", on {} client threads for as many requests outstanding",
                    spec.threads * spec.inflight
                ),
                Outstanding::Threads => " on as many threads (--outstanding threads)".into(),
            }
        );
        eprintln!("tierkv-bench: {note}");
        if args.outstanding == Outstanding::Equal {
            spec.threads *= spec.inflight;
        }
        spec.inflight = 1;
        Some(note)
    } else {
        None
    };
    let spec = &spec;
    let load = if spec.workload.needs_load() {
        let l = runner::load(engine.as_ref(), spec)?;
        engine.flush()?;
        if !args.no_settle {
            // Both engines start the run phase with no compaction debt from the load.
            engine.settle()?;
        }
        if args.verbose {
            println!("state after the load:\n{}", engine.counters().detail);
        }
        Some(l)
    } else {
        None
    };
    if args.warmup > 0 {
        let warmup = RunSpec {
            ops: Some(args.warmup),
            duration: None,
            seed: spec.seed ^ WARMUP_SEED,
            progress: false,
            ..spec.clone()
        };
        runner::run(engine.as_ref(), &warmup)?;
    }
    let written_before_run: Vec<u64> = engine
        .counters()
        .tiers
        .iter()
        .map(|t| t.bytes_written)
        .collect();
    let cpu_start = report::cpu_seconds();
    let run = runner::run(engine.as_ref(), spec)?;
    let cpu_end = report::cpu_seconds();
    let counters = engine.counters();
    let run_tier_written = counters
        .tiers
        .iter()
        .zip(written_before_run.iter().chain(std::iter::repeat(&0)))
        .map(|(t, before)| t.bytes_written.saturating_sub(*before))
        .collect();
    // NB: before the engine closes; the tiers' space below is then measured after it.
    let value_log_line = if args.collect_value_log {
        engine.collect_value_log()?
    } else {
        None
    };
    drop(engine);
    let peaks = peak_watch.finish();

    let tiers: Vec<TierMeasure> = cfg
        .tiers
        .iter()
        .zip(&dev_start)
        .zip(peaks)
        .map(|((t, start), peak)| TierMeasure {
            name: t.name.clone(),
            bytes_used: space::file_bytes(&t.dir),
            table_bytes: space::table_bytes(&t.dir),
            peak_bytes_allocated: peak,
            device: device_of(&t.name)
                .and_then(|d| report::device_bytes(&d))
                .zip(*start)
                .map(|(end, start)| (end.0 - start.0, end.1 - start.1)),
        })
        .collect();
    let (_, profile) = engine::parse_spec(engine_spec)?;
    let table_bytes: Vec<u64> = tiers.iter().map(|t| t.table_bytes).collect();
    let placement_check =
        space::placement_check(profile.levels_on_fast, profile.auto, &table_bytes);
    if let Some(check) = placement_check
        .as_ref()
        .filter(|c| c.starts_with("VIOLATED"))
    {
        eprintln!("tierkv-bench: {engine_spec}: placement check {check}");
    }
    let record = RunRecord {
        engine: engine_spec,
        workload: spec.workload.to_string(),
        threads: spec.threads,
        inflight: spec.inflight,
        inflight_requested: args.inflight,
        inflight_note: inflight_note.as_deref(),
        placement_check,
        multiget: spec.multiget,
        warmup_ops: args.warmup,
        sync: args.sync,
        load: load.as_ref(),
        run: &run,
        counters: &counters,
        tiers: &tiers,
        cpu: (cpu_end.0 - cpu_start.0, cpu_end.1 - cpu_start.1),
        run_tier_written,
    };
    record.print();
    if args.verbose {
        println!("{}", counters.detail);
    }
    if let Some(line) = value_log_line {
        println!("{line}");
    }
    if !args.keep {
        for t in &cfg.tiers {
            let _ = std::fs::remove_dir_all(&t.dir);
        }
    }
    Ok(record.to_json())
}

/// See `Args::outstanding`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Outstanding {
    /// As many client threads as the asynchronous engine has requests in flight.
    Equal,
    /// The same client threads, one request each.
    Threads,
}

fn main() {
    tierkv::bound_heap_retention();
    let args = Args::parse();
    if let Err(e) = run(&args) {
        eprintln!("tierkv-bench: {}", tierkv::chain_message(e.as_ref()));
        std::process::exit(1);
    }
}

/// Mixed into the seed of the warm-up, so the run phase does not replay its requests.
const WARMUP_SEED: u64 = 0x5741_524d_5550;

/// Set in a child process started by [`bench_engine_in_child`]: the one engine it runs.
const CHILD_ENGINE_VAR: &str = "TIERKV_BENCH_CHILD_ENGINE";
/// Set in a child process: where it writes its JSON record.
const CHILD_JSON_VAR: &str = "TIERKV_BENCH_CHILD_JSON";

/// Runs one engine of a comparison in a child process of this binary, with the same arguments,
/// and reads its JSON record back.
///
/// NB: a fresh process per engine, because an engine leaves state behind after it is dropped:
/// heap its allocator keeps (which counts against the lab's memory cgroup and so shrinks the
/// page cache the next engine gets), idle threads, process-wide pools.
fn bench_engine_in_child(engine: &str) -> Result<serde_json::Value> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let json = std::env::temp_dir().join(format!("tierkv-bench-{}-{n}.json", std::process::id()));
    let exe = std::env::current_exe().context("finding this program to run the engine")?;
    let status = std::process::Command::new(&exe)
        .args(std::env::args_os().skip(1))
        .env(CHILD_ENGINE_VAR, engine)
        .env(CHILD_JSON_VAR, &json)
        .status()
        .with_context(|| format!("starting {}", exe.display()))?;
    if !status.success() {
        let _ = std::fs::remove_file(&json);
        bail!("the child process running it failed ({status})");
    }
    let text = std::fs::read_to_string(&json)
        .with_context(|| format!("reading the child's record {}", json.display()));
    let _ = std::fs::remove_file(&json);
    serde_json::from_str(&text?).context("parsing the child's record")
}

/// The child's side of [`bench_engine_in_child`]: runs `engine`, writes its record.
fn run_child(args: &Args, spec: &RunSpec, engine: &str) -> Result<()> {
    let json = std::env::var_os(CHILD_JSON_VAR)
        .with_context(|| format!("{CHILD_ENGINE_VAR} is set but {CHILD_JSON_VAR} is not"))?;
    let record = bench_engine(args, spec, engine).with_context(|| format!("engine {engine}"))?;
    std::fs::write(&json, serde_json::to_string(&record)?)
        .with_context(|| format!("writing {}", PathBuf::from(&json).display()))
}

/// Runs `engines` for `--rounds` rounds, printing each round's comparison; returns every
/// record, round by round, each round in the list's order.
fn run_rounds(args: &Args, spec: &RunSpec, engines: &[String]) -> Result<Vec<serde_json::Value>> {
    // One run stays in this process; several each get a fresh one (see `bench_engine_in_child`).
    let isolate = engines.len() > 1 || args.rounds > 1;
    let mut records = Vec::new();
    for round in 0..args.rounds {
        let mut this_round = Vec::new();
        for i in 0..engines.len() {
            // Round r runs the list rotated by r; the comparison keeps the list's order.
            let index = (i + round) % engines.len();
            let e = &engines[index];
            let mut record = if isolate {
                bench_engine_in_child(e)
            } else {
                bench_engine(args, spec, e)
            }
            .with_context(|| format!("engine {e}"))?;
            record["round"] = round.into();
            record["position_in_round"] = i.into();
            this_round.push((index, record));
        }
        this_round.sort_by_key(|(index, _)| *index);
        let this_round: Vec<_> = this_round.into_iter().map(|(_, r)| r).collect();
        if engines.len() > 1 {
            report::print_comparison(&this_round);
        }
        records.extend(this_round);
    }
    Ok(records)
}

fn run(args: &Args) -> Result<()> {
    let spec = args.spec()?;
    let engines: Vec<String> = match &args.compare {
        Some(list) => list
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        None => vec![args.engine.clone()],
    };
    if engines.is_empty() {
        bail!("--compare needs at least one engine");
    }
    if args.rounds == 0 || args.rounds > 100 {
        bail!("--rounds {} is out of range: accepted 1..=100", args.rounds);
    }
    if let Ok(engine) = std::env::var(CHILD_ENGINE_VAR) {
        return run_child(args, &spec, &engine);
    }
    let mut records = run_rounds(args, &spec, &engines)?;
    if args.rounds > 1 {
        report::print_rounds_summary(&engines, &records);
    }
    if let Some(path) = &args.json {
        let value = if records.len() == 1 {
            records.remove(0)
        } else {
            serde_json::Value::Array(records)
        };
        std::fs::write(path, serde_json::to_string_pretty(&value)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> EngineConfig {
        let mut argv = vec!["tierkv-bench"];
        argv.extend_from_slice(args);
        Args::try_parse_from(argv)
            .unwrap()
            .engine_config("tierkv")
            .unwrap()
    }

    #[test]
    fn zoned_tables_put_the_capacity_tier_on_zones_and_report_them() {
        let given = config(&[
            "--zoned-tables",
            "--table-zone-size",
            "1M",
            "--table-zones",
            "6",
        ]);
        let zones = TableZones {
            zone_size: 1 << 20,
            zones: 6,
        };
        assert_eq!(given.tierkv.table_zones, Some(zones));
        let defaults = config(&["--zoned-tables"]).tierkv.table_zones.unwrap();
        assert_eq!((defaults.zone_size, defaults.zones), (64 << 20, 64));
        assert_eq!(config(&[]).tierkv.table_zones, None);
        let without = Args::try_parse_from(["tierkv-bench", "--table-zones", "8"]);
        assert!(without.is_err(), "--table-zones needs --zoned-tables");

        let root = tempfile::tempdir().unwrap();
        let mut cfg = given;
        for t in &mut cfg.tiers {
            t.dir = root.path().join(&t.name);
        }
        let engine = engine::open("tierkv", &cfg).unwrap();
        engine.put(b"key", b"value").unwrap();
        engine.flush().unwrap();
        let counters = engine.counters();
        let names: Vec<&str> = counters
            .zoned_tiers
            .iter()
            .map(|(n, _)| n.as_str())
            .collect();
        assert_eq!(names, ["capacity"]);
        assert!(root.path().join("capacity").join("ZONED-DEVICE").exists());
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("4096").unwrap(), 4096);
        assert_eq!(parse_size("3K").unwrap(), 3 << 10);
        assert_eq!(parse_size("512m").unwrap(), 512 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        for bad in ["", "G", "1T", "-1", "1.5G", "99999999999999G"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }
}
