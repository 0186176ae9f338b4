//! Engines under test, behind one trait so the runner and reports never see their types.
//!
//! `tierkv[:PROFILE]` and (with the `rocksdb` feature) `rocksdb[:PROFILE]` are built from one
//! [`EngineConfig`], so both get the same tiers, memtable size and count, block cache, bloom
//! bits, compression, background threads and sync setting. Profiles name the placement:
//! `pl` (fast tier holds only the WAL), `lad1`..`lad3` (top n levels on the fast tier).

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
    /// Point reads answered by: "memtable", "cache", or a tier name.
    pub reads_served: BTreeMap<String, u64>,
    /// Writes per WAL group (group commit efficiency), if the engine reports it.
    pub avg_group_size: Option<f64>,
    /// Stall time in seconds, if reported.
    pub stall_seconds: Option<f64>,
    /// Free-form engine statistics for the human report.
    pub detail: String,
}

/// One tier of the benchmark's storage.
#[derive(Debug, Clone)]
pub struct TierDir {
    /// Tier name.
    pub name: String,
    /// Directory the engine may use (created fresh per engine).
    pub dir: PathBuf,
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
}

/// A key-value engine as the benchmark drives it.
pub trait Engine: Send + Sync {
    /// Writes `key` (durably if the run is synced).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<()>;
    /// Reads `key`; returns whether it was found.
    fn get(&self, key: &[u8]) -> Result<bool>;
    /// Reads up to `n` keys from `start`; returns how many were read.
    fn scan(&self, start: &[u8], n: usize) -> Result<usize>;
    /// Flushes memtables (between load and run phases).
    fn flush(&self) -> Result<()>;
    /// Waits until no flush or compaction is running or pending.
    fn settle(&self) -> Result<()>;
    /// Counters since open.
    fn counters(&self) -> EngineCounters;
}

/// Levels on the fast tier for a profile name.
pub fn profile_levels(profile: &str) -> Result<usize> {
    match profile {
        "pl" => Ok(0),
        "" | "lad2" => Ok(2),
        p => match p.strip_prefix("lad").and_then(|n| n.parse().ok()) {
            Some(n) if n <= 7 => Ok(n),
            _ => bail!("unknown profile {profile:?}: expected pl or lad0..lad7"),
        },
    }
}

/// Opens the engine named `spec` (`NAME[:PROFILE]`) on `cfg`'s tiers.
pub fn open(spec: &str, cfg: &EngineConfig) -> Result<Box<dyn Engine>> {
    let (name, profile) = spec.split_once(':').unwrap_or((spec, ""));
    let levels_on_fast = profile_levels(profile).with_context(|| format!("engine {spec:?}"))?;
    match name {
        "tierkv" => Ok(Box::new(tierkv_engine::TierkvEngine::open(
            cfg,
            levels_on_fast,
        )?)),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Ok(Box::new(rocks::RocksEngine::open(cfg, levels_on_fast)?)),
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
    use tierkv::{Compression, Db, Durability, Options, ReadOptions, TierConfig, WriteOptions};

    pub struct TierkvEngine {
        db: Db,
        write: WriteOptions,
        read: ReadOptions,
    }

    impl TierkvEngine {
        pub fn open(cfg: &EngineConfig, levels_on_fast: usize) -> Result<Self> {
            let mut b = Options::builder()
                .levels_on_fast(levels_on_fast)
                .write_buffer_size(cfg.write_buffer_size)
                .max_immutable_memtables(cfg.max_immutable_memtables)
                .block_cache_bytes(cfg.block_cache_bytes)
                .bloom_bits_per_key(cfg.bloom_bits_per_key)
                .compression(cfg.compression.parse::<Compression>()?)
                .background_threads(cfg.background_threads)
                .target_file_size(cfg.target_file_size)
                .max_bytes_for_level_base(cfg.max_bytes_for_level_base);
            for t in &cfg.tiers {
                b = b.tier(TierConfig::new(&t.name, &t.dir));
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

    impl Engine for TierkvEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put(&self.write, key, value)?)
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get(&self.read, key)?.is_some())
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

        fn counters(&self) -> EngineCounters {
            let s = self.db.stats();
            let mut reads_served = BTreeMap::new();
            reads_served.insert("memtable".to_string(), s.reads_memtable);
            reads_served.insert("cache".to_string(), s.reads_block_cache);
            for t in &s.tiers {
                reads_served.insert(t.name.clone(), t.reads_served);
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
                avg_group_size: Some(s.average_group_size()),
                stall_seconds: Some(s.stall_micros as f64 / 1e6),
                detail: s.to_string(),
            }
        }
    }
}

#[cfg(feature = "rocksdb")]
mod rocks {
    use super::*;
    use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, DBPath, Options, WriteOptions, DB};

    pub struct RocksEngine {
        db: DB,
        opts: Options,
        write: WriteOptions,
        tiers: Vec<String>,
        levels_on_fast: usize,
        _cache: Cache,
    }

    /// Bytes RocksDB's path selection budgets for levels `0..n` (it sizes L0 like L1).
    fn fast_path_target(cfg: &EngineConfig, n: usize) -> u64 {
        let mut total = 0;
        let mut level_size = cfg.max_bytes_for_level_base;
        for level in 0..n {
            total += level_size;
            if level > 0 {
                level_size *= 10;
            }
        }
        total
    }

    impl RocksEngine {
        pub fn open(cfg: &EngineConfig, levels_on_fast: usize) -> Result<Self> {
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
            opts.set_max_bytes_for_level_multiplier(10.0);
            opts.set_target_file_size_base(cfg.target_file_size);
            opts.set_max_background_jobs(cfg.background_threads as i32);
            opts.set_compression_type(match cfg.compression.as_str() {
                "none" => DBCompressionType::None,
                "lz4" => DBCompressionType::Lz4,
                "zstd" => DBCompressionType::Zstd,
                other => bail!("compression {other:?} is not supported for rocksdb"),
            });
            opts.enable_statistics();
            let fast = &cfg.tiers[0].dir;
            opts.set_wal_dir(fast.join("wal"));
            if cfg.tiers.len() > 1 {
                let paths = [
                    DBPath::new(fast.join("sst"), fast_path_target(cfg, levels_on_fast))?,
                    DBPath::new(&cfg.tiers[1].dir, u64::MAX)?,
                ];
                opts.set_db_paths(&paths);
            }
            let db = DB::open(&opts, fast.join("db"))?;
            let mut write = WriteOptions::default();
            write.set_sync(cfg.sync);
            Ok(RocksEngine {
                db,
                opts,
                write,
                tiers: cfg.tiers.iter().map(|t| t.name.clone()).collect(),
                levels_on_fast,
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

        fn tier_of_level(&self, level: usize) -> usize {
            usize::from(level >= self.levels_on_fast && self.tiers.len() > 1)
        }
    }

    impl Engine for RocksEngine {
        fn put(&self, key: &[u8], value: &[u8]) -> Result<()> {
            Ok(self.db.put_opt(key, value, &self.write)?)
        }

        fn get(&self, key: &[u8]) -> Result<bool> {
            Ok(self.db.get_pinned(key)?.is_some())
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
                detail: self
                    .db
                    .property_value("rocksdb.levelstats")
                    .ok()
                    .flatten()
                    .unwrap_or_default(),
            }
        }
    }
}
