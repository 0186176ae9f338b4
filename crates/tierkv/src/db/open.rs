//! Opening a database: lock, read the MANIFEST, check the tiers, replay the WAL, and start a
//! fresh MANIFEST and WAL.
//!
//! Recovery writes what it replays to L0 tables and records them, with the new WAL number, in a
//! new MANIFEST before any old WAL is deleted, so a crash during recovery loses nothing: the
//! next open replays the same WALs again.

use super::background::{build_tables, OutputCtx, TableOutput};
use super::monitor::IoSampler;
use super::pipeline::Pipeline;
use super::{DbInner, State, TableCache};
use crate::batch::WriteBatch;
use crate::compaction::EntryFilter;
use crate::error::{Error, Result};
use crate::hot::{HotPartitions, VecIter};
use crate::memtable::MemTable;
use crate::options::{HotTier, Options, Placement, RecoveryMode, WalMode};
use crate::placement::iomon::{IoMonitor, WindowConfig};
use crate::placement::Placer;
use crate::snapshot::SnapshotList;
use crate::sst::BlockCache;
use crate::stats::Counters;
use crate::tier::{self, FileKind, TierId, Tiers, WriteKind};
use crate::version::{RecoveredManifest, VersionEdit, VersionSet};
use crate::wal::{self, ReplayCtx, ReplaySink, Replayed};
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Name of the lock file on tier 0.
pub const LOCK_FILE: &str = "LOCK";

pub(super) fn open(mut opts: Options) -> Result<DbInner> {
    opts.validate()?;
    // ZONED WAL: its device's options are checked before recovery rewrites anything.
    if opts.wal.mode == WalMode::Zoned {
        let device = opts.tiers[0].path.join(crate::wal::append::zones::DEVICE);
        crate::wal::append::zones::check_options(&opts, &device)?;
    }
    // ZONED TABLES: from here on `opts.fs` sends zoned tiers' files to their devices.
    let zoned = crate::zonefs::route_zoned_tiers(&mut opts)?;
    // PM TIERS: from here on `opts.fs` also maps the files of tiers of kind `pm` (routed
    // after the zoned tiers, whose routing starts again from the unrouted file system).
    crate::env::route_pm_tiers(&mut opts)?;
    check_tier_names(&opts)?;
    let fs = Arc::clone(&opts.fs);
    let dir0 = opts.tiers[0].path.clone();
    if !fs.exists(&dir0.join(crate::version::CURRENT_FILE)) {
        if !opts.create_if_missing || opts.read_only {
            return Err(Error::NotFound(format!(
                "no tierkv database in {} (create_if_missing is {}{})",
                dir0.display(),
                opts.create_if_missing,
                if opts.read_only {
                    ", read_only is true"
                } else {
                    ""
                }
            )));
        }
        crate::env::create_dir_all_durable(&*fs, &dir0)?;
        check_new_database_dirs(&opts)?;
    }
    let lock = fs.lock(&dir0.join(LOCK_FILE))?;
    let recovered = RecoveredManifest::read(fs.as_ref(), &dir0)?;
    if recovered.is_some() && opts.error_if_exists {
        return Err(Error::AlreadyExists(dir0));
    }
    let db_id = match &recovered {
        Some(r) => r.db_id.clone(),
        None => tier::read_identity(fs.as_ref(), &dir0)?
            .map(|(id, _)| id)
            .unwrap_or_else(|| format!("{:032x}", rand::random::<u128>())),
    };
    let known = recovered
        .as_ref()
        .map(|r| r.tiers.clone())
        .unwrap_or_default();
    check_known_tiers_configured(&opts, &known)?;
    let tiers = Arc::new(Tiers::open(&opts, &db_id, &known, opts.read_only)?);
    // SPLIT VALUES: checked before recovery writes anything (a mode mismatch is refused).
    let vlog = crate::vlog::ValueLog::open(&opts, &tiers, recovered.is_none())?.map(Arc::new);
    let versions = VersionSet::recover(
        Arc::clone(&tiers),
        opts.compaction.num_levels,
        db_id,
        recovered.as_ref(),
        // The MANIFEST lives in tier 0's WAL reserve, which counts two of this size.
        opts.manifest_roll_bytes(),
    )?;
    check_tables_present(&tiers, &versions)?;
    let placer = match opts.placement.mode {
        Placement::Fixed => Placer::fixed(opts.placement.levels_on_fast),
        Placement::Auto => Placer::auto(opts.auto_place_config(), opts.placement.levels_on_fast),
    };
    let ctx = OutputCtx {
        opts: &opts,
        tiers: &tiers,
        versions: &versions,
        placer: &placer,
        replicas: None,
        vlog: vlog.as_deref(),
    };
    // Hot tier hook: the store is rebuilt from its slabs before the WAL replays, so that
    // recovery's flushes route hot keys to it as a running database's flushes do.
    let hot = open_hot_store(&opts, &versions)?;
    // Hot tier hook: the slab files count in tier 0's budget.
    if let Some(h) = &hot {
        tiers.set_hot_bytes(h.file_bytes());
    }
    let (imm, replayed) = if opts.read_only {
        let mut mems = Vec::new();
        let replayed = replay_wals(&ctx, &mut |m| {
            mems.push(m);
            Ok(())
        })?;
        (mems.into(), replayed)
    } else {
        (VecDeque::new(), recover_to_tables(&ctx, hot.as_deref())?)
    };
    // NB: a read-only open has no WAL, and its memtables are all immutable.
    let number = if opts.read_only {
        0
    } else {
        versions.log_number()
    };
    let mem = Arc::new(MemTable::for_options(number, &opts.memtable));
    let wal = wal::open(&opts, &tiers, number, versions.last_sequence(), &replayed)?;

    let block_cache = (opts.cache.block_cache_bytes > 0)
        .then(|| Arc::new(BlockCache::new(opts.cache.block_cache_bytes)));
    let inner = DbInner {
        table_cache: Arc::new(TableCache::new(Arc::clone(&tiers), block_cache.clone())),
        block_cache,
        snapshots: Arc::new(SnapshotList::default()),
        state: Mutex::new(State {
            mem: Arc::clone(&mem),
            imm,
            bg_error: None,
            stop_resumable: false,
            auto_resume_at: None,
            auto_resume_failures: 0,
            shutting_down: false,
            flush_running: false,
            compactions_running: 0,
            busy_files: HashSet::new(),
            pending_outputs: HashSet::new(),
            migration: crate::placement::auto::MigrationHint::None,
            replica_running: false,
            demotion_wanted: false,
            demotion_running: false,
            l0_held: false,
        }),
        bg_cv: Condvar::new(),
        progress_cv: Condvar::new(),
        wal,
        pipeline: Pipeline::new(),
        iomon: monitor(&opts, &tiers)?,
        io_sampler: Mutex::new(IoSampler::new(&opts, &placer, &tiers)),
        placer,
        migration_limiter: Default::default(),
        pacer: super::pacer::WritePacer::new(
            opts.compaction.delayed_write_rate,
            super::pacer::L0Triggers {
                slowdown: opts.compaction.l0_slowdown_trigger,
                stop: opts.compaction.l0_stop_trigger,
            },
        ),
        hot_pacer: super::pacer::DemotionPacer::new(opts.compaction.delayed_write_rate),
        counters: Counters::default(),
        _lock: lock,
        hot,
        vlog,
        zoned,
        tiers,
        versions,
        opts,
    };
    inner.wal.start(&mem)?;
    inner.delete_obsolete_files();
    inner.open_capacity_tables();
    Ok(inner)
}

/// Replays the WALs into L0 tables and records them in a new MANIFEST, which names the first
/// memtable's number as its log number.
fn recover_to_tables(ctx: &OutputCtx<'_>, hot: Option<&HotPartitions>) -> Result<Replayed> {
    let mut edit = VersionEdit::default();
    // NB: each table's tier space stays reserved until the MANIFEST lists it, so that the
    // tables of several replayed memtables cannot overcommit a tier.
    let mut outputs = Vec::new();
    let replayed = replay_wals(ctx, &mut |mem| {
        flush_recovered(ctx, hot, &mem, &mut edit, &mut outputs)
    })?;
    // NB: the new MANIFEST (naming the new WAL number) is durable before the WAL exists:
    // after a crash in between, no WAL at or above that number exists and nothing is replayed.
    let wal_number = ctx.versions.new_file_number();
    edit.log_number = Some(wal_number);
    ctx.versions.write_new_manifest(edit)?;
    drop(outputs);
    if let Some(hot) = hot {
        hot.commit(&|_, _| false);
    }
    Ok(replayed)
}

/// A new database may only be created where no other data lives: every tier directory may
/// hold only files tierkv names, and no WAL or table (those would mean a database whose
/// CURRENT file was lost: creating a new one would delete its data).
fn check_new_database_dirs(opts: &Options) -> Result<()> {
    for tier in &opts.tiers {
        if !opts.fs.exists(&tier.path) {
            continue;
        }
        for name in opts.fs.list_dir(&tier.path)? {
            let ours = name == LOCK_FILE
                || name == tier::IDENTITY_FILE
                || (name == crate::hot::DIR && crate::hot::is_empty_store(&*opts.fs, &tier.path))
                // NB: written before CURRENT when a database with split values is created.
                || name == crate::vlog::MARKER
                || name.ends_with(".tmp")
                || matches!(tier::parse_file_name(&name), Some((FileKind::Manifest, _)));
            if ours {
                continue;
            }
            if tier::parse_file_name(&name).is_some() || name == wal::parallel::AREA_FILE {
                return Err(Error::corruption(
                    tier.path.join(&name),
                    0,
                    format!(
                        "tier '{}' holds database files but tier 0 has no CURRENT file: the \
                         database is damaged (restore CURRENT); refusing to create a new one",
                        tier.name
                    ),
                ));
            }
            return Err(Error::invalid(format!(
                "directory {} of tier '{}' is not empty and holds no tierkv database (found \
                 {name:?}); choose an empty or new directory",
                tier.path.display(),
                tier.name
            )));
        }
    }
    Ok(())
}

/// Each tier directory that already belongs to a tier must be configured under that tier's
/// name: a mix-up is reported as such before anything is read or written.
fn check_tier_names(opts: &Options) -> Result<()> {
    for t in &opts.tiers {
        let Some((_, owner)) = tier::read_identity(opts.fs.as_ref(), &t.path)? else {
            continue;
        };
        if owner == t.name {
            continue;
        }
        let hint = match opts.tiers.iter().find(|o| o.name == owner) {
            Some(o) => format!(
                "; tier '{owner}' is configured with {}: the tier directories are swapped",
                o.path.display()
            ),
            None => String::new(),
        };
        return Err(Error::invalid(format!(
            "tier '{}' is configured with directory {}, which belongs to tier '{owner}'{hint}",
            t.name,
            t.path.display()
        )));
    }
    Ok(())
}

/// Every tier the MANIFEST knows must be configured, checked before anything is written.
fn check_known_tiers_configured(opts: &Options, known: &[String]) -> Result<()> {
    match known
        .iter()
        .find(|k| !opts.tiers.iter().any(|t| &t.name == *k))
    {
        Some(missing) => Err(Error::invalid(format!(
            "the database has a tier '{missing}', which is not configured (configured: {})",
            opts.tiers
                .iter()
                .map(|t| t.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))),
        None => Ok(()),
    }
}

/// Every table the MANIFEST lists must exist on its tier.
///
/// Also takes every file number found on disk as used: a table written after the last MANIFEST
/// edit (a flush, compaction or migration output cut short by a crash) must never share its
/// number with a later table, and is then deleted as obsolete.
fn check_tables_present(tiers: &Tiers, versions: &VersionSet) -> Result<()> {
    let mut present: Vec<HashSet<String>> = Vec::new();
    for t in tiers.all() {
        present.push(tiers.fs().list_dir(&t.dir)?.into_iter().collect());
    }
    let numbers = present
        .iter()
        .flatten()
        .filter_map(|name| tier::parse_file_name(name));
    if let Some(max) = numbers.map(|(_, n)| n).max() {
        versions.mark_file_number_used(max);
    }
    for (level, f) in versions.current().all_files() {
        let name = tier::file_name(FileKind::Table, f.number);
        if !present[f.tier.index()].contains(&name) {
            let tier = tiers.get(f.tier);
            return Err(Error::corruption(
                tier.dir.join(&name),
                0,
                format!(
                    "table of level {level} listed in the MANIFEST is missing from tier '{}'",
                    tier.name
                ),
            ));
        }
    }
    Ok(())
}

/// Replays every WAL mode's logs into memtables, handing each full memtable (and the last one)
/// to `sink`.
fn replay_wals(
    ctx: &OutputCtx<'_>,
    sink: &mut dyn FnMut(Arc<MemTable>) -> Result<()>,
) -> Result<Replayed> {
    let replay = ReplayCtx {
        fs: ctx.tiers.fs().as_ref(),
        dir: &ctx.tiers.fast().dir,
        log_number: ctx.versions.log_number(),
        mode: ctx.opts.wal.recovery_mode,
    };
    let mut memtables = MemtableSink {
        ctx,
        mem: Arc::new(MemTable::for_options(0, &ctx.opts.memtable)),
        max_seq: ctx.versions.last_sequence(),
        sink,
        lost_values: false,
    };
    let replayed = wal::replay(&replay, &mut memtables)?;
    let MemtableSink {
        mem, max_seq, sink, ..
    } = memtables;
    ctx.versions.set_last_sequence(max_seq);
    if !mem.is_empty() {
        sink(mem)?;
    }
    Ok(replayed)
}

/// Recovery's memtables: replayed writes go into one until it is full, then to `sink`.
struct MemtableSink<'a, 'c> {
    ctx: &'a OutputCtx<'c>,
    mem: Arc<MemTable>,
    max_seq: u64,
    sink: &'a mut dyn FnMut(Arc<MemTable>) -> Result<()>,
    /// SPLIT VALUES: a replayed write named value-log records a crash lost; it and every
    /// later write are dropped, as after a torn WAL tail (`crate::vlog::ValueLog::lost_record`).
    lost_values: bool,
}

impl ReplaySink for MemtableSink<'_, '_> {
    fn mark_number_used(&mut self, n: u64) {
        self.ctx.versions.mark_file_number_used(n);
    }

    fn last_sequence(&self) -> Option<u64> {
        Some(self.max_seq)
    }

    fn apply(&mut self, seq: u64, batch: &WriteBatch) -> Result<()> {
        if self.lost_values || self.names_lost_values(batch)? {
            self.lost_values = true;
            return Ok(());
        }
        let next = self.mem.insert_batch(seq, batch);
        self.max_seq = self.max_seq.max(next.saturating_sub(1));
        if self.mem.memory_bytes() >= self.ctx.opts.memtable.write_buffer_size {
            self.ctx.versions.set_last_sequence(self.max_seq);
            let next = Arc::new(MemTable::for_options(0, &self.ctx.opts.memtable));
            (self.sink)(std::mem::replace(&mut self.mem, next))?;
        }
        Ok(())
    }
}

impl MemtableSink<'_, '_> {
    /// SPLIT VALUES: whether `batch` names value-log records a crash lost (refused with
    /// `absolute-consistency`, which refuses a torn WAL tail too, and with the default mode
    /// when the damage is not a crash's).
    fn names_lost_values(&self, batch: &WriteBatch) -> Result<bool> {
        let Some(vlog) = self.ctx.vlog else {
            return Ok(false);
        };
        let Some(lost) = vlog.lost_record(batch)? else {
            return Ok(false);
        };
        // As for a damaged WAL record: a crash's damage ends the replay quietly, other
        // damage is `Corruption` unless the mode says to stop or salvage anyway.
        let refuse = match self.ctx.opts.wal.recovery_mode {
            RecoveryMode::AbsoluteConsistency => true,
            RecoveryMode::TolerateCorruptedTail => !lost.torn,
            RecoveryMode::PointInTime | RecoveryMode::SkipAnyCorruptedRecords => false,
        };
        if refuse {
            return Err(lost.error);
        }
        Ok(true)
    }
}

fn flush_recovered(
    ctx: &OutputCtx<'_>,
    hot: Option<&HotPartitions>,
    mem: &Arc<MemTable>,
    edit: &mut VersionEdit,
    outputs: &mut Vec<TableOutput>,
) -> Result<()> {
    if mem.is_empty() {
        return Ok(());
    }
    // NB: the value-log records it appends are synced before the edit naming its tables.
    let mut source = ctx.flush_source(mem, 0)?;
    // Hot tier hook: as in a flush, the hot store takes its objects first.
    let mut hot_rest = match hot {
        Some(hot) => Some(VecIter::new(
            hot.absorb(source.iter(), ctx.versions.log_number())?,
        )),
        None => None,
    };
    let iter: &mut dyn crate::iter::InternalIterator = match hot_rest {
        Some(ref mut rest) => rest,
        None => source.iter(),
    };
    let mut filter = EntryFilter::new(0);
    let files = build_tables(
        ctx,
        iter,
        0,
        &mut filter,
        &|_| false,
        (WriteKind::Flush, mem.approximate_bytes() as u64),
        &mut || ctx.versions.new_file_number(),
    )?;
    edit.new_files
        .extend(files.iter().map(|out| ctx.record(0, &out.meta)));
    outputs.extend(files);
    Ok(())
}

/// Opens the hot store if the options ask for one, and moves the last sequence past its
/// newest version (whose WAL may be gone).
fn open_hot_store(opts: &Options, versions: &VersionSet) -> Result<Option<Arc<HotPartitions>>> {
    if opts.hot_tier.mode != HotTier::Slab {
        // NB: without the store its keys would silently read as their older LSM versions.
        if !crate::hot::is_empty_store(&*opts.fs, &opts.tiers[0].path) {
            return Err(Error::invalid(format!(
                "the database in {} keeps objects in a hot store: open it with hot_tier = \"slab\"",
                opts.tiers[0].path.display()
            )));
        }
        return Ok(None);
    }
    let version = versions.current();
    let entries = version.num_entries();
    let (hot, max_seq) = HotPartitions::open(
        &opts.fs,
        &opts.tiers[0].path,
        &opts.hot_tier,
        versions.log_number(),
        entries,
        opts.read_only,
        opts.values.mode == crate::options::ValuesMode::Split,
    )?;
    if max_seq > versions.last_sequence() {
        versions.set_last_sequence(max_seq);
    }
    Ok(Some(Arc::new(hot)))
}

/// The per-tier I/O monitor, with tier 0's bandwidth ceiling: configured, or (with automatic
/// placement) measured by a short write probe.
fn monitor(opts: &Options, tiers: &Tiers) -> Result<IoMonitor> {
    let mon = IoMonitor::new(
        tiers.all().len(),
        WindowConfig::default(),
        std::time::Instant::now(),
    );
    let ceiling = match (opts.placement.fast_tier_bandwidth, opts.placement.mode) {
        (Some(bps), _) => Some(bps),
        (None, Placement::Auto) if !opts.read_only => Some(probe_write_bandwidth(tiers)?),
        (None, _) => None,
    };
    mon.set_ceiling(TierId::FAST, ceiling);
    Ok(mon)
}

/// Bytes of the open-time bandwidth probe.
const PROBE_BYTES: usize = 32 << 20;

/// Writes `PROBE_BYTES` on tier 0 in 1 MiB appends, each synced; returns bytes/s.
///
/// NB: syncing every append makes the device, not the page cache, set the pace: one sync at
/// the end let the first tens of MiB land in memory and overstated the bandwidth severalfold.
fn probe_write_bandwidth(tiers: &Tiers) -> Result<u64> {
    let fs = tiers.fs();
    let path = tiers.fast().dir.join("BANDWIDTH-PROBE.tmp");
    let chunk = vec![0x5au8; 1 << 20];
    let start = std::time::Instant::now();
    let mut file = fs.create(&path)?;
    for _ in 0..PROBE_BYTES / chunk.len() {
        file.append(&chunk)?;
        file.sync()?;
    }
    file.close()?;
    let secs = start.elapsed().as_secs_f64().max(1e-6);
    fs.remove_file(&path)?;
    Ok((PROBE_BYTES as f64 / secs) as u64)
}
