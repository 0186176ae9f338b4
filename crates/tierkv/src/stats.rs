//! Statistics: live counters owned by the database and the [`Stats`] report built from them.
//!
//! Counters are relaxed atomics bumped on the hot paths; [`Stats`] is a plain struct gathered on
//! demand (`Db::stats`) from the counters, the tiers and the current version.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Engine-wide counters (per-tier byte counters live in `tier::TierCounters`).
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub user_bytes_written: AtomicU64,
    pub writes: AtomicU64,
    pub write_groups: AtomicU64,
    pub synced_groups: AtomicU64,
    pub parallel_insert_groups: AtomicU64,
    pub gets: AtomicU64,
    pub reads_memtable: AtomicU64,
    pub reads_block_cache: AtomicU64,
    pub reads_not_found: AtomicU64,
    pub reads_by_level: [AtomicU64; 16],
    pub filter_negatives: AtomicU64,
    pub stall_micros: AtomicU64,
    pub slowdowns: AtomicU64,
    pub stops: AtomicU64,
    pub flushes: AtomicU64,
    pub trivial_moves: AtomicU64,
    /// Chunks compactions installed before their last edit.
    pub compaction_chunks: AtomicU64,
    /// Compactions (trivial moves included) by output level.
    pub compactions_into: [AtomicU64; 16],
    /// Compaction input bytes by output level.
    pub compaction_read_into: [AtomicU64; 16],
    /// Compaction output bytes by output level.
    pub compaction_written_into: [AtomicU64; 16],
    /// Time compactions spent, by output level.
    pub compaction_micros_into: [AtomicU64; 16],
    pub lucky_reads: AtomicU64,
    pub multi_gets: AtomicU64,
    pub multi_get_block_reads: AtomicU64,
    pub async_requests: AtomicU64,
    pub busy_rejections: AtomicU64,
    pub wal_runs: AtomicU64,
    pub wal_pages: AtomicU64,
    pub wal_cover_syncs: AtomicU64,
    pub txn_commits: AtomicU64,
    pub txn_conflicts: AtomicU64,
    pub migrations: AtomicU64,
}

impl Counters {
    pub fn add(counter: &AtomicU64, v: u64) {
        counter.fetch_add(v, Ordering::Relaxed);
    }
}

pub(crate) fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// Per-tier figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TierStats {
    /// Tier name.
    pub name: String,
    /// Byte budget (`u64::MAX` = unlimited).
    pub capacity: u64,
    /// Bytes of live tables on the tier.
    pub bytes_used: u64,
    /// Live tables on the tier.
    pub files: u64,
    /// WAL bytes written.
    pub wal_bytes_written: u64,
    /// Table bytes written by flushes.
    pub flush_bytes_written: u64,
    /// Table bytes written by compactions.
    pub compaction_bytes_written: u64,
    /// MANIFEST, CURRENT and identity bytes written.
    pub meta_bytes_written: u64,
    /// Table bytes written by placement migration.
    pub migration_bytes_written: u64,
    /// Bytes read from tables on the tier.
    pub bytes_read: u64,
    /// Point reads answered by a block read from this tier.
    pub reads_served: u64,
}

impl TierStats {
    /// Every byte written to the tier.
    pub fn bytes_written(&self) -> u64 {
        self.wal_bytes_written
            + self.flush_bytes_written
            + self.compaction_bytes_written
            + self.meta_bytes_written
            + self.migration_bytes_written
    }
}

/// Per-level figures.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LevelStats {
    /// Level number.
    pub level: usize,
    /// Tables in the level.
    pub files: u64,
    /// Bytes in the level.
    pub bytes: u64,
    /// `(tier name, files, bytes)` for each tier holding part of the level.
    pub by_tier: Vec<(String, u64, u64)>,
    /// Point reads answered by this level.
    pub reads_served: u64,
    /// Compactions whose output went to this level (trivial moves included).
    pub compactions_into: u64,
    /// Bytes those compactions read (both input levels).
    pub compaction_bytes_read: u64,
    /// Bytes those compactions wrote: where a level's write amplification comes from.
    pub compaction_bytes_written: u64,
    /// Wall time those compactions took, in microseconds: with the bytes, the rate a level's
    /// compactions ran at, and so which level holds writes back when L0 fills.
    pub compaction_micros: u64,
}

/// One tier's I/O rates over the monitor's window (about the last second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TierIo {
    /// Tier name.
    pub name: String,
    /// Table bytes read per second.
    pub read_bytes_per_sec: f64,
    /// WAL and metadata bytes written per second.
    pub wal_bytes_per_sec: f64,
    /// Flush bytes written per second.
    pub flush_bytes_per_sec: f64,
    /// Compaction bytes written per second.
    pub compaction_bytes_per_sec: f64,
    /// Migration bytes written per second.
    pub migration_bytes_per_sec: f64,
    /// Operations per second where counted (point reads, WAL writes).
    pub ops_per_sec: f64,
    /// Bandwidth ceiling in bytes/s (configured or probed), if known.
    pub ceiling: Option<u64>,
    /// Total bytes/s over the ceiling.
    pub utilisation: Option<f64>,
}

/// A report of the database's activity since open.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Stats {
    /// Per tier, fastest first.
    pub tiers: Vec<TierStats>,
    /// Per level.
    pub levels: Vec<LevelStats>,
    /// Key and value bytes of acknowledged writes.
    pub user_bytes_written: u64,
    /// Write batches (including single puts and deletes) acknowledged.
    pub writes: u64,
    /// WAL groups written by group-commit leaders.
    pub write_groups: u64,
    /// WAL groups that were synced.
    pub synced_groups: u64,
    /// WAL groups whose batches were inserted into the memtable by several threads
    /// (`wal.concurrent_memtable_writes`).
    pub parallel_insert_groups: u64,
    /// Point reads.
    pub gets: u64,
    /// Point reads answered by a memtable.
    pub reads_memtable: u64,
    /// Point reads answered by a table block found in the block cache.
    pub reads_block_cache: u64,
    /// Point reads that found nothing.
    pub reads_not_found: u64,
    /// Table lookups skipped because the bloom filter said no.
    pub filter_negatives: u64,
    /// Microseconds writers spent delayed or stopped.
    pub stall_micros: u64,
    /// Writes delayed because L0 reached the slowdown trigger.
    pub slowdowns: u64,
    /// Times writes stopped (too many immutable memtables or L0 files).
    pub stops: u64,
    /// Bytes per second writes are paced at now, while L0 slows them (`None` otherwise).
    pub paced_write_rate: Option<u64>,
    /// Memtable flushes.
    pub flushes: u64,
    /// Compactions (trivial moves included).
    pub compactions: u64,
    /// Compactions done by moving a file to the next level without rewriting it.
    pub trivial_moves: u64,
    /// Chunks of output that compactions installed before they ended (each replaced the
    /// next-level inputs consumed so far; see ARCHITECTURE.md).
    pub compaction_chunks: u64,
    /// Bytes of table input read by compactions.
    pub compaction_bytes_read: u64,
    /// Block cache hits, misses, bytes used and budget.
    pub block_cache: (u64, u64, u64, u64),
    /// Immutable memtables waiting for flush.
    pub immutable_memtables: usize,
    /// Bytes in the active memtable.
    pub memtable_bytes: u64,
    /// Memory the active and immutable memtables hold, their key filters included.
    pub memtables_memory: u64,
    /// Last sequence number visible.
    pub last_sequence: u64,
    /// Live snapshots.
    pub snapshots: usize,
    /// How WAL writes reach the device: "group" (group-commit log files), "io_uring" or
    /// "pwrite" (parallel WAL loggers).
    pub wal_io_path: String,
    /// Asynchronous gets answered inline from a memtable.
    pub lucky_reads: u64,
    /// How batched table reads (multi-get blocks, iterator read-ahead) reach the files:
    /// "io_uring", or "pread" where io_uring is off or unavailable.
    pub read_io_path: String,
    /// `multi_get` calls (their keys also count in `gets`).
    pub multi_gets: u64,
    /// Data blocks multi-gets read from files, each once however many keys needed it.
    pub multi_get_block_reads: u64,
    /// Asynchronous requests admitted.
    pub async_requests: u64,
    /// Submissions refused with `Busy`.
    pub busy_rejections: u64,
    /// Parallel-WAL loggers the head thread keeps active now.
    pub active_loggers: usize,
    /// Page runs written by parallel-WAL loggers.
    pub wal_runs: u64,
    /// Pages written by parallel-WAL loggers.
    pub wal_pages: u64,
    /// Extra `fdatasync` calls made to cover unsynced writes before a synced one.
    pub wal_cover_syncs: u64,
    /// Transactions committed.
    pub txn_commits: u64,
    /// Transaction commits refused with `Conflict`.
    pub txn_conflicts: u64,
    /// Placement: "PL", "LAD-n" or "auto L2+40% (n moves)".
    pub placement: String,
    /// Tables moved between tiers by automatic placement.
    pub migrations: u64,
    /// Bytes of the fast tier's flush reserve lent now to replicas (writes are quiet; see
    /// `reserve`).
    pub flush_reserve_lent: u64,
    /// Replicas on the fast tier now, complete or being copied (`Options::auto_replicas`).
    pub replicas: u64,
    /// Bytes of the fast tier replicas take now.
    pub replica_bytes: u64,
    /// Replicas completed since open.
    pub replicas_made: u64,
    /// Replicas dropped since open (for a table's room, the reserve, or a deleted table).
    pub replicas_dropped: u64,
    /// Time background writes to the fast tier waited for its rate limit (microseconds).
    pub background_paced_micros: u64,
    /// Automatic placement's recent pointer moves, oldest first.
    pub placement_history: Vec<String>,
    /// Per-tier I/O rates over the last second or so.
    pub tier_io: Vec<TierIo>,
    /// The hot store's report, when it is on (`hot_tier = "slab"`).
    pub hot_tier: Option<HotTierStats>,
    /// Each tier whose tables live on zones (`tables = "zones"`): its name and its zone file
    /// system's report.
    pub zoned_tiers: Vec<(String, crate::zonefs::ZoneFsStats)>,
    /// Split values: values written inline in the LSM (below `split_threshold`) since open.
    pub split_inline_items: u64,
    /// Split values: bytes of those values.
    pub split_inline_bytes: u64,
    /// Split values: values written to the value log since open.
    pub split_separated_items: u64,
    /// Split values: bytes of those values.
    pub split_separated_bytes: u64,
    /// Split values: record bytes appended to value-log files since open.
    pub vlog_bytes_written: u64,
    /// Split values: values read from the value log since open.
    pub vlog_reads: u64,
    /// Split values: bytes of the value-log files on disk now.
    pub vlog_file_bytes: u64,
    /// Split values: pointers dropped by flushes and compactions since open.
    pub vlog_garbage_items: u64,
    /// Split values: value-log record bytes those pointers named (garbage).
    pub vlog_garbage_bytes: u64,
    /// Split values: record bytes in value-log files less the garbage counted in them.
    pub vlog_live_bytes: u64,
    /// Split values: garbage-collection passes finished (one per value-log file collected).
    pub vlog_gc_runs: u64,
    /// Split values: record bytes garbage collection appended again (live values it moved).
    pub vlog_gc_bytes_rewritten: u64,
    /// Split values: value-log files garbage collection deleted.
    pub vlog_gc_files_deleted: u64,
    /// Split values: `fdatasync`s of value-log files since open (a group sync serves every
    /// `Sync` write that appended before it started; other writes sync none).
    pub vlog_syncs: u64,
    /// The zoned WAL's zone manager, when `wal = "zoned"`.
    pub zoned_wal: Option<ZonedWalStats>,
}

/// The zone work of `wal = "zoned"` since open ([`Stats::zoned_wal`]): what WALTZ keeps out of
/// the write path, and how often it failed to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZonedWalStats {
    /// Zones the manager finished after they were replaced.
    pub zones_finished: u64,
    /// Active-zone replacements.
    pub zone_replacements: u64,
    /// Replacements that waited for the manager to provide a reserved empty zone: appends
    /// that waited for a zone to be allocated (zero while the manager keeps up).
    pub reserved_waits: u64,
    /// Appends the zone filled under them, retried on the next zone.
    pub full_retries: u64,
    /// One-LBA appends the manager made to learn where a replaced zone's data ends.
    pub dummy_appends: u64,
}

/// The hot store's report ([`Stats::hot_tier`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HotTierStats {
    /// Objects (versions) in the store now.
    pub objects: u64,
    /// Bytes of the slots they take.
    pub bytes: u64,
    /// Per size class: slot size, objects, bytes.
    pub by_class: Vec<(u64, u64, u64)>,
    /// Point reads the hot store answered since open.
    pub reads_hot: u64,
    /// Point reads the LSM tables answered since open.
    pub reads_lsm: u64,
    /// Objects demoted to the LSM since open.
    pub demoted_objects: u64,
    /// Demotion (MSC) rounds since open.
    pub demotion_rounds: u64,
    /// Time demotions took (microseconds).
    pub demotion_micros: u64,
    /// Objects promoted from the LSM into the store since open.
    pub promotions: u64,
    /// The mapper's pinning threshold (clock value) now.
    pub pin_threshold: u8,
    /// The recent access frequency a promotion candidate must beat now (the median of the
    /// last demotion's victims, halved as the frequency sketch ages).
    pub promotion_bar: u8,
    /// The eviction policy: `msc` or `weight` (`hot_eviction`).
    pub eviction: String,
    /// Objects the weight policy migrated to the LSM since open.
    pub migrated_objects: u64,
    /// Bytes (keys and values) of those objects written to the LSM.
    pub migrated_bytes: u64,
    /// Weight-policy migration rounds since open.
    pub migration_rounds: u64,
    /// Values flushes placed in the store's slots since open: items, value bytes.
    pub placed_hot: (u64, u64),
    /// Values flushes placed in the LSM inline since open: items, value bytes.
    pub placed_lsm_inline: (u64, u64),
    /// Values flushes placed in the LSM as value-log pointers since open (split values):
    /// items, value bytes (in the value log).
    pub placed_value_log: (u64, u64),
    /// Writes delayed while a demotion ran because the store would pass its high
    /// watermark (`delayed_write_rate`), since open.
    pub paced_writes: u64,
    /// Time those writes waited (microseconds).
    pub paced_micros: u64,
    /// Demoted objects merged straight into the capacity tier's bottom run (no L0 table),
    /// since open.
    pub demoted_into_bottom: u64,
    /// Slots iterators read since open (an iterator reads its bounds a chunk at a time).
    pub iterator_slot_reads: u64,
    /// Journalled jobs (flushes, promotions, demotions' clears) run since open.
    pub jobs: u64,
    /// Slot writes those jobs made, clears of freed slots included.
    pub job_slot_writes: u64,
    /// Slab pages those jobs wrote: each read (unless cached), written to the journal and
    /// then in place, so about three 4 KiB I/Os on tier 0 per page (`docs/hot-tier.md`,
    /// "Crash safety").
    pub job_pages: u64,
    /// Free slots now.
    pub free_slots: u64,
    /// Of those, the ones still holding a superseded version of a key the store holds newer
    /// (reused as they are; `docs/hot-tier.md`, "Versions and snapshots").
    pub ghost_slots: u64,
    /// Slots of superseded versions cleared since open because their key was demoted first.
    pub ghost_clears: u64,
    /// Per partition (`hot_partitions`), in partition order: objects and bytes of slots.
    pub partitions: Vec<(u64, u64)>,
}

impl Stats {
    /// Average number of writes per WAL group (group-commit efficiency).
    pub fn average_group_size(&self) -> f64 {
        if self.write_groups == 0 {
            0.0
        } else {
            self.writes as f64 / self.write_groups as f64
        }
    }

    /// Bytes written to all tiers divided by user bytes written.
    pub fn write_amplification(&self) -> f64 {
        let device: u64 = self.tiers.iter().map(TierStats::bytes_written).sum();
        if self.user_bytes_written == 0 {
            0.0
        } else {
            device as f64 / self.user_bytes_written as f64
        }
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `3.2 GiB`; `unlimited` for `u64::MAX`.
pub fn human_bytes(bytes: u64) -> String {
    if bytes == u64::MAX {
        return "unlimited".into();
    }
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = bytes as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{bytes} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tiers:")?;
        writeln!(
            f,
            "  {:<10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
            "tier", "capacity", "used", "files", "wal", "flush", "compact", "meta", "read"
        )?;
        for t in &self.tiers {
            writeln!(
                f,
                "  {:<10} {:>10} {:>10} {:>6} {:>10} {:>10} {:>10} {:>10} {:>10}",
                t.name,
                human_bytes(t.capacity),
                human_bytes(t.bytes_used),
                t.files,
                human_bytes(t.wal_bytes_written),
                human_bytes(t.flush_bytes_written),
                human_bytes(t.compaction_bytes_written),
                human_bytes(t.meta_bytes_written),
                human_bytes(t.bytes_read),
            )?;
        }
        writeln!(f, "levels:")?;
        for l in self
            .levels
            .iter()
            .filter(|l| l.files > 0 || l.reads_served > 0 || l.compactions_into > 0)
        {
            let placement: Vec<String> = l
                .by_tier
                .iter()
                .map(|(t, n, b)| format!("{t}: {n} files {}", human_bytes(*b)))
                .collect();
            writeln!(
                f,
                "  L{}: {} files, {}, reads served {} [{}]; {} compactions into it read {}, \
                 wrote {} in {:.1} s",
                l.level,
                l.files,
                human_bytes(l.bytes),
                l.reads_served,
                placement.join(", "),
                l.compactions_into,
                human_bytes(l.compaction_bytes_read),
                human_bytes(l.compaction_bytes_written),
                l.compaction_micros as f64 / 1e6,
            )?;
        }
        writeln!(
            f,
            "writes: {} batches, {} user bytes, {} WAL groups (avg {:.2} writes/group, {} synced)",
            self.writes,
            human_bytes(self.user_bytes_written),
            self.write_groups,
            self.average_group_size(),
            self.synced_groups
        )?;
        writeln!(
            f,
            "memtable inserts: {} groups inserted in parallel",
            self.parallel_insert_groups
        )?;
        writeln!(f, "write amplification: {:.2}", self.write_amplification())?;
        writeln!(
            f,
            "reads: {} gets; served by memtable {}, block cache {}, not found {}; filter negatives {}",
            self.gets,
            self.reads_memtable,
            self.reads_block_cache,
            self.reads_not_found,
            self.filter_negatives
        )?;
        let served: Vec<String> = self
            .tiers
            .iter()
            .map(|t| format!("{} {}", t.name, t.reads_served))
            .collect();
        writeln!(f, "reads served by tier (device): {}", served.join(", "))?;
        writeln!(
            f,
            "placement: {}, {} tables migrated, flush reserve lent {}",
            self.placement,
            self.migrations,
            human_bytes(self.flush_reserve_lent)
        )?;
        if self.replicas_made > 0 {
            writeln!(
                f,
                "replicas on the fast tier: {} ({}); {} made, {} dropped",
                self.replicas,
                human_bytes(self.replica_bytes),
                self.replicas_made,
                self.replicas_dropped
            )?;
        }
        for d in &self.placement_history {
            writeln!(f, "  moved {d}")?;
        }
        for t in &self.tier_io {
            let mb = |v: f64| v / 1e6;
            writeln!(
                f,
                "io {}: read {:.1} wal {:.1} flush {:.1} compaction {:.1} migration {:.1} MB/s, {:.0} ops/s{}",
                t.name,
                mb(t.read_bytes_per_sec),
                mb(t.wal_bytes_per_sec),
                mb(t.flush_bytes_per_sec),
                mb(t.compaction_bytes_per_sec),
                mb(t.migration_bytes_per_sec),
                t.ops_per_sec,
                match (t.utilisation, t.ceiling) {
                    (Some(u), Some(c)) => format!(", {:.0}% of {:.0} MB/s", u * 100.0, c as f64 / 1e6),
                    _ => String::new(),
                }
            )?;
        }
        writeln!(
            f,
            "wal: {} path, {} runs, {} pages, {} cover syncs, {} active loggers",
            self.wal_io_path,
            self.wal_runs,
            self.wal_pages,
            self.wal_cover_syncs,
            self.active_loggers
        )?;
        writeln!(
            f,
            "batched reads: {} path, {} multi-gets, {} blocks read",
            self.read_io_path, self.multi_gets, self.multi_get_block_reads
        )?;
        writeln!(
            f,
            "async: {} requests, {} lucky reads, {} busy; transactions: {} commits, {} conflicts",
            self.async_requests,
            self.lucky_reads,
            self.busy_rejections,
            self.txn_commits,
            self.txn_conflicts
        )?;
        let (hits, misses, usage, cap) = self.block_cache;
        writeln!(
            f,
            "block cache: {hits} hits, {misses} misses, {} of {}",
            human_bytes(usage),
            human_bytes(cap)
        )?;
        writeln!(
            f,
            "background: {} flushes, {} compactions ({} trivial moves, {} chunks installed early), \
             {} compaction input",
            self.flushes,
            self.compactions,
            self.trivial_moves,
            self.compaction_chunks,
            human_bytes(self.compaction_bytes_read)
        )?;
        writeln!(
            f,
            "stalls: {:.3} s total, {} slowdowns, {} stops{}",
            self.stall_micros as f64 / 1e6,
            self.slowdowns,
            self.stops,
            self.paced_write_rate
                .map(|r| format!("; writes paced at {}/s", human_bytes(r)))
                .unwrap_or_default()
        )?;
        write!(
            f,
            "memtable: {} active, {} immutable, {} of memory in all; last sequence {}; {} snapshots",
            human_bytes(self.memtable_bytes),
            self.immutable_memtables,
            human_bytes(self.memtables_memory),
            self.last_sequence,
            self.snapshots
        )?;
        if let Some(h) = &self.hot_tier {
            write!(
                f,
                "\nhot store: {} objects, {}; reads {} hot, {} LSM; {} demoted in {} rounds \
                 ({:.3} s); {} promoted (bar {}); pin threshold {}",
                h.objects,
                human_bytes(h.bytes),
                h.reads_hot,
                h.reads_lsm,
                h.demoted_objects,
                h.demotion_rounds,
                h.demotion_micros as f64 / 1e6,
                h.promotions,
                h.promotion_bar,
                h.pin_threshold
            )?;
            write!(
                f,
                "\nhot store eviction {}: {} migrated ({}) in {} rounds; flushes placed {} \
                 values in the store ({}), {} in the LSM inline ({}), {} in the value log ({})",
                h.eviction,
                h.migrated_objects,
                human_bytes(h.migrated_bytes),
                h.migration_rounds,
                h.placed_hot.0,
                human_bytes(h.placed_hot.1),
                h.placed_lsm_inline.0,
                human_bytes(h.placed_lsm_inline.1),
                h.placed_value_log.0,
                human_bytes(h.placed_value_log.1)
            )?;
            write!(
                f,
                "\nhot store pacing: {} writes paced during demotions ({:.3} s)",
                h.paced_writes,
                h.paced_micros as f64 / 1e6
            )?;
            write!(
                f,
                "\nhot store slab I/O: {} jobs, {} slot writes in {} pages (each journalled, \
                 then written in place); {} free slots, {} holding superseded versions ({} \
                 cleared as their key left)",
                h.jobs, h.job_slot_writes, h.job_pages, h.free_slots, h.ghost_slots, h.ghost_clears
            )?;
            if h.partitions.len() > 1 {
                let parts: Vec<String> = h
                    .partitions
                    .iter()
                    .map(|(objects, bytes)| format!("{objects} ({})", human_bytes(*bytes)))
                    .collect();
                write!(f, "\nhot store partitions: {}", parts.join(", "))?;
            }
        }
        if let Some(z) = &self.zoned_wal {
            write!(
                f,
                "\nzoned WAL: {} replacements, {} zones finished, {} reserved-zone waits, {} \
                 zone-full retries, {} dummy appends",
                z.zone_replacements,
                z.zones_finished,
                z.reserved_waits,
                z.full_retries,
                z.dummy_appends
            )?;
        }
        for (tier, z) in &self.zoned_tiers {
            write!(
                f,
                "\nzoned tier {tier}: zones {} free, {} active, {} full; written {} by the \
                 engine, {} to zones ({} data, {} padding, {} GC, {} metadata), write \
                 amplification {:.2}; GC reclaimed {} zones ({} background, {} foreground); \
                 {} resets",
                z.zones_free,
                z.zones_active,
                z.zones_full,
                human_bytes(z.engine_bytes),
                human_bytes(z.data_bytes + z.gc_bytes + z.meta_bytes),
                human_bytes(z.data_bytes),
                human_bytes(z.padding_bytes),
                human_bytes(z.gc_bytes),
                human_bytes(z.meta_bytes),
                z.write_amplification(),
                z.gc_zones_reclaimed,
                z.gc_background_zones,
                z.gc_foreground_zones,
                z.resets
            )?;
        }
        if self.split_inline_items + self.split_separated_items + self.vlog_file_bytes > 0 {
            write!(
                f,
                "\nsplit values: {} inline ({}), {} separated ({}); value log {} on disk, {} \
                 written, {} reads, {} garbage dropped since open",
                self.split_inline_items,
                human_bytes(self.split_inline_bytes),
                self.split_separated_items,
                human_bytes(self.split_separated_bytes),
                human_bytes(self.vlog_file_bytes),
                human_bytes(self.vlog_bytes_written),
                self.vlog_reads,
                human_bytes(self.vlog_garbage_bytes)
            )?;
            write!(
                f,
                "\nvalue-log gc: {} live, {} passes, {} rewritten, {} files deleted",
                human_bytes(self.vlog_live_bytes),
                self.vlog_gc_runs,
                human_bytes(self.vlog_gc_bytes_rewritten),
                self.vlog_gc_files_deleted
            )?;
        }
        Ok(())
    }
}
