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
use crate::memtable::MemTable;
use crate::options::{Options, Placement, WalMode};
use crate::placement::iomon::{IoMonitor, WindowConfig};
use crate::placement::Placer;
use crate::snapshot::SnapshotList;
use crate::sst::BlockCache;
use crate::stats::Counters;
use crate::tier::{self, FileKind, TierId, Tiers, WriteKind};
use crate::version::{RecoveredManifest, VersionEdit, VersionSet};
use crate::wal::log::{LogReader, LogWriter, RecoveryMode};
use crate::wal::parallel::{self, Layout, ParallelWal};
use crate::wal::WalSet;
use parking_lot::{Condvar, Mutex};
use std::collections::{HashSet, VecDeque};
use std::sync::Arc;

/// Name of the lock file on tier 0.
pub const LOCK_FILE: &str = "LOCK";
/// User-space buffer of the WAL writer.
pub(crate) const WAL_BUFFER: usize = 256 << 10;

pub(super) fn open(opts: Options) -> Result<DbInner> {
    opts.validate()?;
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
        fs.create_dir_all(&dir0)?;
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
    let versions = VersionSet::recover(
        Arc::clone(&tiers),
        opts.num_levels,
        db_id,
        recovered.as_ref(),
        // The MANIFEST lives in tier 0's WAL reserve, which counts two of this size.
        opts.manifest_roll_bytes(),
    )?;
    check_tables_present(&tiers, &versions)?;
    let placer = match opts.placement {
        Placement::Fixed => Placer::fixed(opts.levels_on_fast),
        Placement::Auto => Placer::auto(opts.auto_place_config(), opts.levels_on_fast),
    };
    let ctx = OutputCtx {
        opts: &opts,
        tiers: &tiers,
        versions: &versions,
        placer: &placer,
        replicas: None,
    };
    let (mem, imm, wal, pwal) = if opts.read_only {
        let mut mems = Vec::new();
        replay_wals(&ctx, &mut |m| {
            mems.push(m);
            Ok(())
        })?;
        (Arc::new(MemTable::new(0)), mems.into(), None, None)
    } else {
        let (number, wal, area_meta) = recover_to_tables(&ctx)?;
        let area = tiers.fast().dir.join(parallel::AREA_FILE);
        match opts.wal {
            WalMode::Group => {
                if fs.exists(&area) {
                    // Recovery put what the area held into tables: it is obsolete.
                    fs.remove_file(&area)?;
                }
                let wals = WalSet::new(
                    number,
                    wal.expect("group mode creates a WAL file"),
                    Arc::clone(&fs),
                    tiers.fast().dir.clone(),
                );
                (
                    Arc::new(MemTable::new(number)),
                    VecDeque::new(),
                    Some(wals),
                    None,
                )
            }
            WalMode::Parallel => {
                let layout = Layout {
                    groups: opts.wal_groups(),
                    group_pages: opts.wal_group_bytes() / parallel::PAGE as u64,
                };
                let pwal = ParallelWal::open(fs.as_ref(), &area, layout, area_meta.as_ref())?;
                fs.sync_dir(&tiers.fast().dir)?;
                (
                    Arc::new(MemTable::new(number)),
                    VecDeque::new(),
                    None,
                    Some(pwal),
                )
            }
        }
    };
    let last_seq = versions.last_sequence();

    let block_cache =
        (opts.block_cache_bytes > 0).then(|| Arc::new(BlockCache::new(opts.block_cache_bytes)));
    let inner = DbInner {
        table_cache: Arc::new(TableCache::new(Arc::clone(&tiers), block_cache.clone())),
        block_cache,
        snapshots: Arc::new(SnapshotList::default()),
        state: Mutex::new(State {
            mem,
            imm,
            bg_error: None,
            shutting_down: false,
            flush_running: false,
            compactions_running: 0,
            busy_files: HashSet::new(),
            pending_outputs: HashSet::new(),
            migration: crate::placement::auto::MigrationHint::None,
            replica_running: false,
        }),
        bg_cv: Condvar::new(),
        progress_cv: Condvar::new(),
        writers: Mutex::new(VecDeque::new()),
        writers_cv: Condvar::new(),
        wal: Mutex::new(wal),
        pipeline: Pipeline::new(pwal, last_seq),
        iomon: monitor(&opts, &tiers)?,
        io_sampler: Mutex::new(IoSampler::new(&opts, &placer, &tiers)),
        placer,
        migration_limiter: Default::default(),
        pacer: super::pacer::WritePacer::new(
            opts.delayed_write_rate,
            super::pacer::L0Triggers {
                slowdown: opts.l0_slowdown_trigger,
                stop: opts.l0_stop_trigger,
            },
        ),
        counters: Counters::default(),
        _lock: lock,
        tiers,
        versions,
        opts,
    };
    inner.start_first_group()?;
    inner.delete_obsolete_files();
    Ok(inner)
}

/// Replays the WALs into L0 tables, records them in a new MANIFEST and, in group mode, starts
/// a new WAL file. Returns the new WAL's number, its writer (group mode) and the metadata of
/// the parallel-WAL area, if there is one.
fn recover_to_tables(
    ctx: &OutputCtx<'_>,
) -> Result<(u64, Option<LogWriter>, Option<parallel::Meta>)> {
    let mut edit = VersionEdit::default();
    // NB: each table's tier space stays reserved until the MANIFEST lists it, so that the
    // tables of several replayed memtables cannot overcommit a tier.
    let mut outputs = Vec::new();
    let meta = replay_wals(ctx, &mut |mem| {
        flush_recovered(ctx, &mem, &mut edit, &mut outputs)
    })?;
    // NB: the new MANIFEST (naming the new WAL number) is durable before the WAL file exists:
    // after a crash in between, no WAL at or above that number exists and nothing is replayed.
    let wal_number = ctx.versions.new_file_number();
    edit.log_number = Some(wal_number);
    ctx.versions.write_new_manifest(edit)?;
    drop(outputs);
    if ctx.opts.wal == WalMode::Parallel {
        return Ok((wal_number, None, meta));
    }
    let wal_path = ctx.tiers.path(TierId::FAST, FileKind::Wal, wal_number);
    let file = ctx
        .tiers
        .create(TierId::FAST, &wal_path, WriteKind::Wal, WAL_BUFFER)?
        .with_preallocation(ctx.opts.wal_preallocation_step());
    ctx.tiers.fs().sync_dir(&ctx.tiers.fast().dir)?;
    Ok((wal_number, Some(LogWriter::new(file, wal_path)), meta))
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
                || name.ends_with(".tmp")
                || matches!(tier::parse_file_name(&name), Some((FileKind::Manifest, _)));
            if ours {
                continue;
            }
            if tier::parse_file_name(&name).is_some() || name == parallel::AREA_FILE {
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

/// WAL numbers on tier 0 at or above the MANIFEST's log number, ascending.
fn live_wals(tiers: &Tiers, log_number: u64) -> Result<Vec<u64>> {
    let mut wals: Vec<u64> = tiers
        .fs()
        .list_dir(&tiers.fast().dir)?
        .iter()
        .filter_map(|n| match tier::parse_file_name(n) {
            Some((FileKind::Wal, num)) if num >= log_number => Some(num),
            _ => None,
        })
        .collect();
    wals.sort_unstable();
    Ok(wals)
}

/// Replays the live WALs into memtables, handing each full memtable (and the last one) to
/// `sink`.
///
/// Records must continue each other's sequence numbers, across WAL files too. A damaged record
/// or a gap ends the history quietly when a crash can explain it (no later record proves that
/// the bytes were synced, see `wal::set`); otherwise it is corruption, as the recovery mode
/// decides.
fn replay_wals(
    ctx: &OutputCtx<'_>,
    sink: &mut dyn FnMut(Arc<MemTable>) -> Result<()>,
) -> Result<Option<parallel::Meta>> {
    let wals = live_wals(ctx.tiers, ctx.versions.log_number())?;
    // Every WAL number is taken, also those after a point where replay stops: a new file must
    // never reuse the number of a WAL still on disk.
    if let Some(&last) = wals.last() {
        ctx.versions.mark_file_number_used(last);
    }
    let mut mem = Arc::new(MemTable::new(0));
    let mut max_seq = ctx.versions.last_sequence();
    let mut next_seq: Option<u64> = None;
    // Salvage keeps every intact batch, so it does not check for gaps.
    let check_gaps = ctx.opts.wal_recovery_mode != RecoveryMode::SkipAnyCorruptedRecords;
    'wals: for i in 0..wals.len() {
        let path = ctx.tiers.path(TierId::FAST, FileKind::Wal, wals[i]);
        let mut reader =
            LogReader::open(ctx.tiers.fs().as_ref(), &path, ctx.opts.wal_recovery_mode)?;
        let mut first_in_file = true;
        while let Some((offset, payload)) = reader.next_record()? {
            let defect = match WriteBatch::decode(payload) {
                None => Some(Defect::Undecodable),
                Some((seq, _)) if check_gaps && next_seq.is_some_and(|n| n != seq) => {
                    Some(Defect::Gap {
                        expected: next_seq.unwrap_or_default(),
                        found: seq,
                        at_file_start: first_in_file,
                    })
                }
                Some((seq, batch)) => {
                    max_seq = max_seq.max(mem.insert_batch(seq, &batch) - 1);
                    next_seq = Some(seq + batch.len() as u64);
                    None
                }
            };
            first_in_file = false;
            if let Some(defect) = defect {
                match on_defect(ctx, &wals, i, &path, offset, &defect)? {
                    Flow::Skip => continue,
                    Flow::Stop => break 'wals,
                }
            }
            if mem.approximate_bytes() >= ctx.opts.write_buffer_size {
                ctx.versions.set_last_sequence(max_seq);
                sink(std::mem::replace(&mut mem, Arc::new(MemTable::new(0))))?;
            }
        }
        if let Some((offset, what)) = reader.tail().damage {
            match on_defect(ctx, &wals, i, &path, offset, &Defect::Damaged(what))? {
                Flow::Skip => {}
                Flow::Stop => break,
            }
        }
    }
    // The parallel WAL's area: its live groups hold a contiguous history (checked by
    // `parallel::recover`), replayed after any log files.
    let area = ctx.tiers.fast().dir.join(parallel::AREA_FILE);
    let recovered = parallel::recover(
        ctx.tiers.fs().as_ref(),
        &area,
        ctx.versions.log_number(),
        ctx.opts.wal_recovery_mode,
    )?;
    // NB: colours are memtable numbers; a new memtable must never reuse one still on disk.
    ctx.versions.mark_file_number_used(recovered.max_colour);
    for b in &recovered.batches {
        max_seq = max_seq.max(mem.insert_batch(b.seq, &b.batch).saturating_sub(1));
        if mem.approximate_bytes() >= ctx.opts.write_buffer_size {
            ctx.versions.set_last_sequence(max_seq);
            sink(std::mem::replace(&mut mem, Arc::new(MemTable::new(0))))?;
        }
    }
    ctx.versions.set_last_sequence(max_seq);
    if !mem.is_empty() {
        sink(mem)?;
    }
    Ok(recovered.meta)
}

/// Something wrong met while replaying a WAL.
enum Defect {
    /// The log reader found damage it did not already turn into an error.
    Damaged(String),
    /// A record with intact checksums whose payload is not a write batch.
    Undecodable,
    /// A record that does not continue the sequence numbers of the one before it.
    Gap {
        expected: u64,
        found: u64,
        at_file_start: bool,
    },
}

/// What replay does after a defect.
enum Flow {
    /// Leave the record out and go on (salvage mode).
    Skip,
    /// History ends here; later records and WALs are not replayed.
    Stop,
}

/// Decides about a defect in WAL `wals[i]` at `offset`, by recovery mode and by whether a crash
/// can explain it.
fn on_defect(
    ctx: &OutputCtx<'_>,
    wals: &[u64],
    i: usize,
    path: &std::path::Path,
    offset: u64,
    defect: &Defect,
) -> Result<Flow> {
    let (what, crash_explains) = match defect {
        // Bytes lost past this point, or an older WAL's unsynced tail lost: explainable unless
        // a later record proves those bytes had been synced.
        Defect::Damaged(what) => (what.clone(), !has_sync_evidence(ctx, &wals[i + 1..])?),
        Defect::Gap {
            expected,
            found,
            at_file_start: true,
        } => (
            format!("sequence gap: this WAL starts at {found}, the previous one ended before {expected}"),
            !has_sync_evidence(ctx, &wals[i..])?,
        ),
        Defect::Gap { expected, found, .. } => {
            (format!("sequence gap: expected {expected}, found {found}"), false)
        }
        Defect::Undecodable => ("WAL record is not a valid write batch".to_string(), false),
    };
    match ctx.opts.wal_recovery_mode {
        RecoveryMode::SkipAnyCorruptedRecords => Ok(Flow::Skip),
        RecoveryMode::PointInTime => Ok(Flow::Stop),
        RecoveryMode::TolerateCorruptedTail if crash_explains => Ok(Flow::Stop),
        _ => Err(Error::corruption(path, offset, what)),
    }
}

/// True if any record of the WALs `numbers` was written after a sync of its file: then every
/// older WAL was complete on stable storage (see `wal::set`).
fn has_sync_evidence(ctx: &OutputCtx<'_>, numbers: &[u64]) -> Result<bool> {
    for &number in numbers {
        let path = ctx.tiers.path(TierId::FAST, FileKind::Wal, number);
        let mut reader =
            LogReader::open(ctx.tiers.fs().as_ref(), &path, RecoveryMode::PointInTime)?;
        while reader.next_record()?.is_some() {}
        if reader.max_synced_through() > 0 {
            return Ok(true);
        }
    }
    Ok(false)
}

fn flush_recovered(
    ctx: &OutputCtx<'_>,
    mem: &Arc<MemTable>,
    edit: &mut VersionEdit,
    outputs: &mut Vec<TableOutput>,
) -> Result<()> {
    if mem.is_empty() {
        return Ok(());
    }
    let mut iter = mem.iter();
    let mut filter = EntryFilter::new(0);
    let files = build_tables(
        ctx,
        &mut iter,
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

/// The per-tier I/O monitor, with tier 0's bandwidth ceiling: configured, or (with automatic
/// placement) measured by a short write probe.
fn monitor(opts: &Options, tiers: &Tiers) -> Result<IoMonitor> {
    let mon = IoMonitor::new(
        tiers.all().len(),
        WindowConfig::default(),
        std::time::Instant::now(),
    );
    let ceiling = match (opts.fast_tier_bandwidth, opts.placement) {
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
