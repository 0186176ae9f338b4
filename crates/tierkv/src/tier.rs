//! Tiers: the object layer under the LSM. Every table and log file is created *on a tier*.
//!
//! A tier is a directory on one device with a byte budget. Tier 0 (the fastest) holds the WAL,
//! MANIFEST, CURRENT and LOCK and keeps a reserve that tables may not use. Each tier directory
//! carries a `TIER` identity file (database id, tier name), so a missing or swapped directory is
//! reported at open instead of silently losing data. All bytes written and read through this
//! layer are counted per tier and per kind of write. A [`TierId`] names a tier in memory; on
//! disk (MANIFEST, identity files) a tier is known by its name only.
//!
//! INVARIANT: `used` of a tier equals the sum of the sizes of live tables placed on it (updated
//! when a table is installed or deleted), so placement decisions need no directory scans.

use crate::env::{BufferedFile, Fs, IoTarget, Lifetime, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::options::Options;
use crate::placement::ratelimit::{RateLimiter, REQUEST_BYTES};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Which configured tier: its index in the options' list, fastest first.
///
/// Tiers are named in the MANIFEST and by their identity files; a `TierId` is the in-memory
/// handle and is never written to disk (convert with [`Tiers::index_of`] and [`Tiers::get`]).
/// The default is the fast tier.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TierId(u8);

impl TierId {
    /// The fastest tier: it holds the WAL, MANIFEST, CURRENT and LOCK, and the upper levels.
    pub const FAST: TierId = TierId(0);
    /// The tier after the fast one, where deeper levels go; tiers after it take overflow only.
    pub const CAPACITY: TierId = TierId(1);

    /// The tier at `index` in the configured list. Panics past 255 (options allow 16).
    pub fn new(index: usize) -> TierId {
        TierId(u8::try_from(index).expect("tier index within u8"))
    }

    /// The tier's index in the configured list.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// Whether this is [`TierId::FAST`].
    pub fn is_fast(self) -> bool {
        self == TierId::FAST
    }
}

impl std::fmt::Display for TierId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "tier {}", self.0)
    }
}

/// Name of the identity file in every tier directory.
pub const IDENTITY_FILE: &str = "TIER";
const IDENTITY_MAGIC: &str = "tierkv-tier 1";

/// Why bytes were written, for per-tier accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// Write-ahead log records.
    Wal,
    /// Tables written by memtable flushes.
    Flush,
    /// Tables written by compactions.
    Compaction,
    /// MANIFEST, CURRENT and identity files.
    Meta,
    /// Tables copied between tiers by placement migration.
    Migration,
}

/// Byte counters of one tier.
#[derive(Debug, Default)]
pub struct TierCounters {
    /// Bytes written by kind, indexed by `WriteKind as usize`.
    pub written: [AtomicU64; 5],
    /// Write requests handed to the file system by kind (table files: one per buffer flush
    /// or rate-limited piece).
    pub write_ops: [AtomicU64; 5],
    /// Bytes read from table files.
    pub read: AtomicU64,
    /// Point reads answered by a data block read from this tier's device.
    pub reads_served: AtomicU64,
}

/// One configured tier.
#[derive(Debug)]
pub struct Tier {
    /// Name given in the options.
    pub name: String,
    /// Directory of the tier.
    pub dir: PathBuf,
    /// Byte budget (`u64::MAX` = unlimited).
    pub capacity: u64,
    /// Tables here are read with `O_DIRECT` (the block cache is their only cache).
    pub direct_reads: bool,
    used: AtomicU64,
    /// Bytes promised to tables being written here (see [`Reservation`]).
    pending: Arc<AtomicU64>,
    files: AtomicU64,
    /// Counters of this tier.
    pub counters: Arc<TierCounters>,
}

impl Tier {
    /// Bytes of live tables placed on this tier.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Live tables placed on this tier.
    pub fn files(&self) -> u64 {
        self.files.load(Ordering::Relaxed)
    }
}

/// The ordered set of tiers of an open database.
pub struct Tiers {
    tiers: Vec<Tier>,
    fs: Arc<dyn Fs>,
    wal_reserve: u64,
    /// Bytes of tier 0 only flushes may take (`Options::flush_reserve`; 0 with one tier).
    flush_reserve: u64,
    /// The part of `flush_reserve` held now; replicas may use the rest while writes are
    /// quiet (`placement::reserve::ReserveLender`).
    flush_reserve_held: AtomicU64,
    /// Bytes of tier 0 the hot store's slab files take (`hot_tier = "slab"`): not tables, so
    /// outside `used`, but inside tier 0's budget like them.
    hot_bytes: AtomicU64,
    /// Bytes of tier 0 taken by replicas (`db::replica`): copies of slower tiers' tables that
    /// tier 0 keeps in room no table needs, given back at once when a table does.
    replica_used: AtomicU64,
    /// Room replicas leave free beside tables (`Options::target_file_size`), so a compaction
    /// output rarely has to drop one: dropped replicas are copied again.
    replica_slack: u64,
    /// Paces flush, compaction and migration writes to tier 0 (see `placement::ratelimit`).
    background_limiter: Arc<RateLimiter>,
    /// Table readers offer their descriptors to io_uring (`Options::read_io_uring`).
    read_io_uring: bool,
    /// Bytes of a table on a tier after the first between write-backs, 0 for none
    /// (`Options::bytes_per_sync`).
    bytes_per_sync: u64,
}

/// Kinds of files the engine names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// `NNNNNN.log`
    Wal,
    /// `NNNNNN.sst`
    Table,
    /// `MANIFEST-NNNNNN`
    Manifest,
    /// `NNNNNN.replica`: a copy on tier 0 of table `NNNNNN` kept on a slower tier (see
    /// `db::replica`); never listed in the MANIFEST.
    Replica,
}

/// The file name of a numbered file.
pub fn file_name(kind: FileKind, number: u64) -> String {
    match kind {
        FileKind::Wal => format!("{number:06}.log"),
        FileKind::Table => format!("{number:06}.sst"),
        FileKind::Manifest => format!("MANIFEST-{number:06}"),
        FileKind::Replica => format!("{number:06}.replica"),
    }
}

/// Parses a file name the engine produces (`000012.log`, `000034.sst`, `MANIFEST-000005`,
/// ...) into its kind and number; `None` for any other name.
pub fn parse_file_name(name: &str) -> Option<(FileKind, u64)> {
    if let Some(n) = name.strip_prefix("MANIFEST-") {
        return n.parse().ok().map(|n| (FileKind::Manifest, n));
    }
    let (stem, ext) = name.split_once('.')?;
    let number = stem.parse().ok()?;
    match ext {
        "log" => Some((FileKind::Wal, number)),
        "sst" => Some((FileKind::Table, number)),
        "replica" => Some((FileKind::Replica, number)),
        _ => None,
    }
}

impl Tiers {
    /// Opens the configured tiers. A tier directory with an identity file must name this
    /// database and this tier; one without is an error if the tier is in `known` (the tiers the
    /// MANIFEST lists), else it is a new tier and is initialised.
    pub fn open(opts: &Options, db_id: &str, known: &[String], read_only: bool) -> Result<Tiers> {
        let fs = Arc::clone(&opts.fs);
        let mut tiers = Vec::with_capacity(opts.tiers.len());
        for cfg in &opts.tiers {
            let tier = Tier {
                name: cfg.name.clone(),
                dir: cfg.path.clone(),
                capacity: cfg.capacity,
                direct_reads: cfg.direct_reads,
                used: AtomicU64::new(0),
                pending: Arc::default(),
                files: AtomicU64::new(0),
                counters: Arc::default(),
            };
            if check_or_make_identity(fs.as_ref(), &tier, db_id, known, read_only)? {
                let bytes = identity_text(db_id, &tier).len() as u64;
                tier.counters.written[WriteKind::Meta as usize].fetch_add(bytes, Ordering::Relaxed);
            }
            tiers.push(tier);
        }
        // NB: with one tier there is nowhere else for compactions to go, and a compaction
        // that fails for room fails the database; the reserve only steers between tiers.
        let flush_reserve = if opts.tiers.len() > 1 {
            opts.flush_reserve()
        } else {
            0
        };
        Ok(Tiers {
            tiers,
            fs,
            wal_reserve: opts.wal_reserve(),
            flush_reserve,
            flush_reserve_held: AtomicU64::new(flush_reserve),
            hot_bytes: AtomicU64::new(0),
            replica_used: AtomicU64::new(0),
            replica_slack: opts.compaction.target_file_size,
            background_limiter: Arc::default(),
            read_io_uring: opts.cache.read_io_uring,
            bytes_per_sync: opts.compaction.bytes_per_sync,
        })
    }

    /// All tiers, fastest first.
    pub fn all(&self) -> &[Tier] {
        &self.tiers
    }

    /// Tier `id`.
    pub fn get(&self, id: TierId) -> &Tier {
        &self.tiers[id.index()]
    }

    /// The fast tier ([`TierId::FAST`]).
    pub fn fast(&self) -> &Tier {
        self.get(TierId::FAST)
    }

    /// Every tier with its id, fastest first.
    pub fn iter(&self) -> impl Iterator<Item = (TierId, &Tier)> {
        self.tiers
            .iter()
            .enumerate()
            .map(|(i, t)| (TierId::new(i), t))
    }

    /// Number of configured tiers.
    pub fn count(&self) -> usize {
        self.tiers.len()
    }

    /// The tier called `name`.
    pub fn index_of(&self, name: &str) -> Option<TierId> {
        self.tiers
            .iter()
            .position(|t| t.name == name)
            .map(TierId::new)
    }

    /// The file system.
    pub fn fs(&self) -> &Arc<dyn Fs> {
        &self.fs
    }

    /// Path of a numbered file on tier `tier`.
    pub fn path(&self, tier: TierId, kind: FileKind, number: u64) -> PathBuf {
        self.get(tier).dir.join(file_name(kind, number))
    }

    /// Creates a file on `tier`, counting its bytes under `kind`, with the file system told
    /// how long it is expected to live.
    pub fn create(
        &self,
        tier: TierId,
        path: &Path,
        kind: WriteKind,
        buffer: usize,
        lifetime: Lifetime,
    ) -> Result<BufferedFile> {
        let name = &self.get(tier).name;
        let inner = self
            .fs
            .create_with_lifetime(path, lifetime)
            .map_err(|e| out_of_space(e, name))?;
        let background = matches!(
            kind,
            WriteKind::Flush | WriteKind::Compaction | WriteKind::Migration
        );
        let counted = CountingFile {
            inner,
            counters: Arc::clone(&self.get(tier).counters),
            kind,
            tier: name.clone(),
            limiter: (tier.is_fast() && background).then(|| Arc::clone(&self.background_limiter)),
            drop_after_sync: background && self.get(tier).direct_reads,
            // NB: not on tier 0, which holds the WAL: there the write-back queued on the device
            // delayed the WAL's own writes (BENCHMARKS.md, build 10).
            write_back_every: if background && !tier.is_fast() {
                self.bytes_per_sync
            } else {
                0
            },
            unwritten: 0,
        };
        Ok(BufferedFile::new(Box::new(counted), buffer))
    }

    /// Opens a table file on `tier` for reads, counting bytes read.
    pub fn open_read(&self, tier: TierId, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let inner = if self.get(tier).direct_reads {
            self.fs.open_read_direct(path)?
        } else {
            self.fs.open_read(path)?
        };
        Ok(Arc::new(CountingReader {
            inner,
            counters: Arc::clone(&self.get(tier).counters),
            io_uring: self.read_io_uring,
        }))
    }

    /// Counts bytes written to `tier` outside [`Tiers::create`] (e.g. a reopened WAL).
    pub fn count_write(&self, tier: TierId, kind: WriteKind, bytes: u64) {
        self.get(tier).counters.written[kind as usize].fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records that a table of `size` bytes now lives on `tier`.
    pub fn add_table(&self, tier: TierId, size: u64) {
        self.get(tier).used.fetch_add(size, Ordering::Relaxed);
        self.get(tier).files.fetch_add(1, Ordering::Relaxed);
    }

    /// Records that a table of `size` bytes left `tier`.
    pub fn remove_table(&self, tier: TierId, size: u64) {
        self.get(tier).used.fetch_sub(size, Ordering::Relaxed);
        self.get(tier).files.fetch_sub(1, Ordering::Relaxed);
    }

    /// The pacer of background writes to tier 0.
    pub fn background_limiter(&self) -> &RateLimiter {
        &self.background_limiter
    }

    /// Bytes of tier 0 only flushes may take now: the flush reserve less what is lent.
    pub fn flush_reserve(&self) -> u64 {
        self.flush_reserve_held.load(Ordering::Relaxed)
    }

    /// The configured flush reserve (`Options::flush_reserve`; 0 with one tier).
    pub fn flush_reserve_full(&self) -> u64 {
        self.flush_reserve
    }

    /// Holds `bytes` of the flush reserve (at most all of it) and lends the rest to replicas.
    pub fn hold_flush_reserve(&self, bytes: u64) {
        let held = bytes.min(self.flush_reserve);
        self.flush_reserve_held.store(held, Ordering::Relaxed);
    }

    /// Bytes tables written by `kind` may use on `tier`: its budget, less on tier 0 the WAL
    /// reserve and, for all but flushes, the whole flush reserve (lent or not: only replicas,
    /// which are dropped at once, borrow it).
    pub fn table_budget(&self, tier: TierId, kind: WriteKind) -> u64 {
        let mut reserve = 0;
        if tier.is_fast() {
            reserve = self.wal_reserve;
            if kind != WriteKind::Flush {
                reserve = reserve.saturating_add(self.flush_reserve);
            }
        }
        self.get(tier).capacity.saturating_sub(reserve)
    }

    /// Bytes of tier 0 tables and replicas together may use: its budget less the WAL reserve.
    fn fast_limit(&self) -> u64 {
        self.fast().capacity.saturating_sub(self.wal_reserve)
    }

    /// Bytes of tier 0 held by live tables, tables being written and the hot store's slabs.
    fn fast_tables(&self) -> u64 {
        let t = &self.fast();
        t.used()
            .saturating_add(t.pending.load(Ordering::Acquire))
            .saturating_add(self.hot_bytes())
    }

    /// Bytes of tier 0 the hot store's slab files take.
    pub fn hot_bytes(&self) -> u64 {
        self.hot_bytes.load(Ordering::Acquire)
    }

    /// Records the size of the hot store's slab files, which count in tier 0's budget.
    pub fn set_hot_bytes(&self, bytes: u64) {
        self.hot_bytes.store(bytes, Ordering::Release);
    }

    /// Bytes of tier 0 replicas take now.
    pub fn replica_bytes(&self) -> u64 {
        self.replica_used.load(Ordering::Acquire)
    }

    /// Takes `size` bytes of tier 0 for a replica if they fit in what tables leave free of the
    /// budget, less the WAL reserve, the held part of the flush reserve and a table's slack.
    pub fn charge_replica(&self, size: u64) -> bool {
        if self.tiers.len() < 2 {
            return false;
        }
        let limit = self
            .fast_limit()
            .saturating_sub(self.flush_reserve())
            .saturating_sub(self.replica_slack);
        let tables = self.fast_tables();
        self.replica_used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                let total = tables.saturating_add(used).saturating_add(size);
                (total <= limit).then_some(used + size)
            })
            .is_ok()
    }

    /// Gives back `size` bytes a replica took.
    pub fn release_replica(&self, size: u64) {
        self.replica_used.fetch_sub(size, Ordering::AcqRel);
    }

    /// Bytes of replicas to drop before a table of `size` written by `kind` fits on tier 0:
    /// 0 if it fits beside them, or if it would not fit without them either.
    pub fn replica_shortfall(&self, size: u64, kind: WriteKind) -> u64 {
        let tables = self.fast_tables().saturating_add(size);
        if tables > self.table_budget(TierId::FAST, kind) {
            return 0;
        }
        let over = tables
            .saturating_add(self.replica_bytes())
            .saturating_sub(self.fast_limit());
        over.min(self.replica_bytes())
    }

    /// Bytes of replicas over their room now (the held flush reserve grew, or tables took
    /// the room): what must be dropped to keep the held reserve free.
    pub fn replicas_over_room(&self) -> u64 {
        let limit = self.fast_limit().saturating_sub(self.flush_reserve());
        let replicas = self.replica_bytes();
        self.fast_tables()
            .saturating_add(replicas)
            .saturating_sub(limit)
            .min(replicas)
    }

    /// Reserves `size` bytes for a new table written by `kind` on the first tier at or after
    /// `preferred` with room for them; `NoSpace` naming the last tier if none has. Only flushes
    /// may use tier 0's flush reserve. The reservation is held until the table is installed
    /// (then `used` counts it) or abandoned.
    pub fn place(&self, preferred: TierId, size: u64, kind: WriteKind) -> Result<Reservation> {
        for t in (preferred.index()..self.tiers.len()).map(TierId::new) {
            let tier = &self.get(t);
            let limit = self.table_budget(t, kind);
            // NB: on tier 0, replicas count too: they give their room back before tables are
            // placed (`replica_shortfall`), never after.
            let replicas = if t.is_fast() { self.replica_bytes() } else { 0 };
            // NB: the hot store's slabs share tier 0's budget with its tables.
            let slabs = if t.is_fast() { self.hot_bytes() } else { 0 };
            let fits = |pending: u64| {
                let total = tier
                    .used()
                    .saturating_add(pending)
                    .saturating_add(size)
                    .saturating_add(slabs);
                let fast_ok = !t.is_fast() || total.saturating_add(replicas) <= self.fast_limit();
                (total <= limit && fast_ok).then_some(pending + size)
            };
            if tier
                .pending
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, fits)
                .is_ok()
            {
                return Ok(Reservation {
                    tier: t,
                    bytes: size,
                    pending: Arc::clone(&tier.pending),
                });
            }
        }
        Err(Error::NoSpace {
            tier: self
                .tiers
                .last()
                .map(|t| t.name.clone())
                .unwrap_or_default(),
        })
    }
}

/// Bytes promised on a tier to a table being written; given back when dropped.
#[derive(Debug)]
pub struct Reservation {
    tier: TierId,
    bytes: u64,
    pending: Arc<AtomicU64>,
}

impl Reservation {
    /// The tier the bytes are reserved on.
    pub fn tier(&self) -> TierId {
        self.tier
    }

    /// Changes the reserved amount to `bytes` (the table's real size once known).
    pub fn resize(&mut self, bytes: u64) {
        if bytes >= self.bytes {
            self.pending.fetch_add(bytes - self.bytes, Ordering::AcqRel);
        } else {
            self.pending.fetch_sub(self.bytes - bytes, Ordering::AcqRel);
        }
        self.bytes = bytes;
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pending.fetch_sub(self.bytes, Ordering::AcqRel);
    }
}

fn identity_text(db_id: &str, tier: &Tier) -> String {
    format!("{IDENTITY_MAGIC}\ndb_id={db_id}\nname={}\n", tier.name)
}

/// Reads the identity file of a tier directory: `(db_id, tier name)`.
pub fn read_identity(fs: &dyn Fs, dir: &Path) -> Result<Option<(String, String)>> {
    let path = dir.join(IDENTITY_FILE);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let text = String::from_utf8(crate::env::read_file(fs, &path)?)
        .map_err(|_| Error::corruption(&path, 0, "identity file is not UTF-8"))?;
    let mut lines = text.lines();
    if lines.next() != Some(IDENTITY_MAGIC) {
        return Err(Error::corruption(
            &path,
            0,
            "not a tierkv tier identity file",
        ));
    }
    let mut field = |prefix: &str| {
        lines
            .next()
            .and_then(|l| l.strip_prefix(prefix))
            .map(str::to_string)
            .ok_or_else(|| Error::corruption(&path, 0, format!("identity file lacks {prefix}")))
    };
    Ok(Some((field("db_id=")?, field("name=")?)))
}

/// Checks a tier's identity file, writing it for a tier new to the database (unless
/// `read_only`). Returns whether it wrote one.
fn check_or_make_identity(
    fs: &dyn Fs,
    tier: &Tier,
    db_id: &str,
    known: &[String],
    read_only: bool,
) -> Result<bool> {
    match read_identity(fs, &tier.dir)? {
        Some((id, name)) if id == db_id && name == tier.name => Ok(false),
        Some((id, name)) if id == db_id => Err(Error::invalid(format!(
            "tier '{}' is configured with directory {}, but that directory belongs to tier \
             '{name}' of this database: tier directories are swapped",
            tier.name,
            tier.dir.display()
        ))),
        Some((id, name)) => Err(Error::invalid(format!(
            "tier '{}' directory {} belongs to another database (id {id}, tier '{name}')",
            tier.name,
            tier.dir.display()
        ))),
        None if known.iter().any(|k| k == &tier.name) => Err(Error::NotFound(format!(
            "tier '{}': directory {} is missing or is not this tier's directory (no {IDENTITY_FILE} \
             file); the database keeps files there",
            tier.name,
            tier.dir.display()
        ))),
        None if read_only => Ok(false),
        None => {
            crate::env::create_dir_all_durable(fs, &tier.dir)?;
            let text = identity_text(db_id, tier);
            crate::env::write_file_atomic(fs, &tier.dir.join(IDENTITY_FILE), text.as_bytes())?;
            Ok(true)
        }
    }
}

/// A writable file that counts the bytes appended through it.
struct CountingFile {
    inner: Box<dyn WritableFile>,
    counters: Arc<TierCounters>,
    kind: WriteKind,
    tier: String,
    /// Background writes to the fast tier: issued in `REQUEST_BYTES` pieces, each paced.
    limiter: Option<Arc<RateLimiter>>,
    /// A table on a tier read with `O_DIRECT`: once synced, its pages in the OS cache are
    /// never read, so they are dropped rather than left to push out the cached pages of
    /// tiers read through it (in a memory-bounded process, a replica copy of 180 MiB or a
    /// compaction's outputs otherwise evict as much of the capacity tier's cache).
    drop_after_sync: bool,
    /// For a table, `Options::bytes_per_sync`: its pages are written back every this many
    /// bytes; 0 for none.
    write_back_every: u64,
    /// Bytes appended since the last write-back.
    unwritten: u64,
}

impl CountingFile {
    fn append_counted(&mut self, data: &[u8]) -> Result<()> {
        self.inner
            .append(data)
            .map_err(|e| out_of_space(e, &self.tier))?;
        self.counters.written[self.kind as usize].fetch_add(data.len() as u64, Ordering::Relaxed);
        self.counters.write_ops[self.kind as usize].fetch_add(1, Ordering::Relaxed);
        self.unwritten += data.len() as u64;
        if self.write_back_every > 0 && self.unwritten >= self.write_back_every {
            self.unwritten = 0;
            self.inner.write_back();
            if self.drop_after_sync {
                // NB: what the write-back waited for is clean now, so this drops it.
                self.inner.drop_cache();
            }
        }
        Ok(())
    }
}

/// A file system out of space is reported as `NoSpace` naming the tier.
fn out_of_space(e: Error, tier: &str) -> Error {
    match &e {
        Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
            Error::NoSpace {
                tier: tier.to_string(),
            }
        }
        _ => e,
    }
}

impl WritableFile for CountingFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let Some(limiter) = self.limiter.clone() else {
            return self.append_counted(data);
        };
        for piece in data.chunks(REQUEST_BYTES) {
            limiter.acquire(piece.len());
            self.append_counted(piece)?;
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.inner.sync().map_err(|e| out_of_space(e, &self.tier))?;
        if self.drop_after_sync {
            self.inner.drop_cache();
        }
        Ok(())
    }

    fn drop_cache(&mut self) {
        self.inner.drop_cache();
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn preallocate(&mut self, offset: u64, len: u64) -> Result<()> {
        self.inner
            .preallocate(offset, len)
            .map_err(|e| out_of_space(e, &self.tier))
    }

    fn seal(&mut self) -> Result<()> {
        self.inner.seal()
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.inner.close()
    }
}

/// A readable file that counts the bytes read through it.
struct CountingReader {
    inner: Arc<dyn RandomAccessFile>,
    counters: Arc<TierCounters>,
    /// Offer the descriptor to io_uring reads.
    io_uring: bool,
}

impl RandomAccessFile for CountingReader {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.inner.read_exact_at(offset, buf)?;
        self.counters
            .read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.inner.size()
    }

    fn io_target(&self) -> Option<IoTarget> {
        self.inner.io_target().filter(|_| self.io_uring)
    }

    fn note_read(&self, bytes: u64) {
        self.counters.read.fetch_add(bytes, Ordering::Relaxed);
        self.inner.note_read(bytes);
    }

    fn drop_cache(&self) {
        self.inner.drop_cache();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::TierConfig;

    #[test]
    fn file_names_round_trip() {
        for kind in [
            FileKind::Wal,
            FileKind::Table,
            FileKind::Manifest,
            FileKind::Replica,
        ] {
            assert_eq!(parse_file_name(&file_name(kind, 42)), Some((kind, 42)));
        }
        assert_eq!(parse_file_name("CURRENT"), None);
        assert_eq!(parse_file_name("x.sst"), None);
    }

    /// Tiers named `names` under `dir`, the first with 64 MiB, an 8 MiB WAL reserve and a
    /// 16 MiB flush reserve.
    fn tiers(dir: &Path, names: &[&str]) -> Tiers {
        let mut b = Options::builder()
            .write_buffer_size(1 << 20)
            .target_file_size(1 << 20)
            .fast_tier_wal_reserve(8 << 20)
            .fast_tier_flush_reserve(16 << 20);
        for (i, name) in names.iter().enumerate() {
            let t = TierConfig::new(*name, dir.join(name));
            b = b.tier(if i == 0 { t.with_capacity(64 << 20) } else { t });
        }
        Tiers::open(&b.build().unwrap(), "db", &[], false).unwrap()
    }

    #[test]
    fn capacity_tier_tables_are_written_back_as_they_grow() {
        let fs = crate::env::FaultFs::new(7);
        let open = |root: &str, bytes_per_sync: u64| {
            let dir = Path::new(root);
            let opts = Options::builder()
                .tier(TierConfig::new("fast", dir.join("fast")))
                .tier(TierConfig::new("capacity", dir.join("capacity")))
                .fs(fs.clone())
                .bytes_per_sync(bytes_per_sync)
                .build()
                .unwrap();
            (
                Tiers::open(&opts, root, &[], false).unwrap(),
                dir.to_path_buf(),
            )
        };
        let piece = vec![7u8; 256 << 10];
        let write = |tiers: &Tiers, path: PathBuf, tier: TierId, kind: WriteKind, pieces: usize| {
            let mut f = tiers
                .create(tier, &path, kind, 64 << 10, Lifetime::NotSet)
                .unwrap();
            for _ in 0..pieces {
                f.append(&piece).unwrap();
            }
            f.sync().unwrap();
        };
        let (tiers, dir) = open("/db", 1 << 20);
        // 3.5 MiB of a table on the capacity tier: a write-back after each whole MiB.
        write(
            &tiers,
            dir.join("capacity/000001.sst"),
            TierId::CAPACITY,
            WriteKind::Compaction,
            14,
        );
        assert_eq!(fs.write_back_count(), 3);
        write(
            &tiers,
            dir.join("capacity/000002.sst"),
            TierId::CAPACITY,
            WriteKind::Migration,
            4,
        );
        assert_eq!(fs.write_back_count(), 4);
        // Tier 0 holds the WAL and is left to the OS, tables included.
        write(
            &tiers,
            dir.join("fast/000003.sst"),
            TierId::FAST,
            WriteKind::Flush,
            8,
        );
        write(
            &tiers,
            dir.join("fast/000004.log"),
            TierId::FAST,
            WriteKind::Wal,
            8,
        );
        write(
            &tiers,
            dir.join("fast/MANIFEST-000005"),
            TierId::FAST,
            WriteKind::Meta,
            8,
        );
        assert_eq!(fs.write_back_count(), 4);

        // `bytes_per_sync = 0` (the default) leaves every tier to the OS.
        let (tiers, dir) = open("/other", 0);
        write(
            &tiers,
            dir.join("capacity/000006.sst"),
            TierId::CAPACITY,
            WriteKind::Compaction,
            16,
        );
        assert_eq!(fs.write_back_count(), 4);
    }

    #[test]
    fn the_hot_stores_slabs_take_room_in_the_fast_tiers_budget() {
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path(), &["fast", "capacity"]);
        // A compaction may fill the 40 MiB tables leave outside the reserves...
        let place = |mib: u64| {
            tiers
                .place(TierId::FAST, mib << 20, WriteKind::Compaction)
                .unwrap()
                .tier()
        };
        assert_eq!(place(40), TierId::FAST);
        // ...but not once 8 MiB of slabs take part of them.
        tiers.set_hot_bytes(8 << 20);
        assert_eq!(tiers.hot_bytes(), 8 << 20);
        assert_eq!(place(40), TierId::CAPACITY);
        assert_eq!(place(32), TierId::FAST);
        // Replicas see the room the slabs take as taken.
        tiers.set_hot_bytes(48 << 20);
        assert!(!tiers.charge_replica(1 << 20));
        tiers.set_hot_bytes(0);
        assert!(tiers.charge_replica(1 << 20));
    }

    #[test]
    fn only_flushes_use_the_flush_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path(), &["fast", "capacity"]);
        assert_eq!(
            tiers.table_budget(TierId::FAST, WriteKind::Compaction),
            40 << 20
        );
        assert_eq!(tiers.table_budget(TierId::FAST, WriteKind::Flush), 56 << 20);
        let deep = tiers
            .place(TierId::FAST, 40 << 20, WriteKind::Compaction)
            .unwrap();
        assert_eq!(deep.tier(), TierId::FAST, "compactions fill the budget");
        let spilled = tiers
            .place(TierId::FAST, 1 << 20, WriteKind::Migration)
            .unwrap();
        assert_eq!(
            spilled.tier(),
            TierId::CAPACITY,
            "but not the flush reserve"
        );
        let flushes: Vec<_> = (0..16)
            .map(|_| {
                tiers
                    .place(TierId::FAST, 1 << 20, WriteKind::Flush)
                    .unwrap()
            })
            .collect();
        assert!(
            flushes.iter().all(|r| r.tier().is_fast()),
            "flushes use the reserve"
        );
        let over = tiers
            .place(TierId::FAST, 1 << 20, WriteKind::Flush)
            .unwrap();
        assert_eq!(over.tier(), TierId::CAPACITY, "and never the WAL reserve");
        drop((deep, flushes));
        assert_eq!(
            tiers
                .place(TierId::FAST, 1 << 20, WriteKind::Compaction)
                .unwrap()
                .tier(),
            TierId::FAST
        );
    }

    #[test]
    fn replicas_use_free_room_and_the_lent_reserve_and_give_it_to_tables() {
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path(), &["fast", "capacity"]);
        let deep = tiers
            .place(TierId::FAST, 30 << 20, WriteKind::Compaction)
            .unwrap();
        assert_eq!(deep.tier(), TierId::FAST);
        assert!(
            !tiers.charge_replica(10 << 20),
            "with the reserve held, replicas get the 10 MiB tables leave, less a table of slack"
        );
        assert!(tiers.charge_replica(9 << 20));
        tiers.hold_flush_reserve(4 << 20);
        assert_eq!(
            tiers.table_budget(TierId::FAST, WriteKind::Compaction),
            40 << 20,
            "a loan never widens a table's budget"
        );
        assert!(tiers.charge_replica(12 << 20), "the lent 12 MiB");
        assert!(!tiers.charge_replica(1 << 20), "but not the held 4 MiB");
        assert_eq!(tiers.replica_bytes(), 21 << 20);
        assert_eq!(tiers.replicas_over_room(), 0);

        // A compaction output that fits the table budget takes room from replicas first.
        assert_eq!(
            tiers.replica_shortfall(8 << 20, WriteKind::Compaction),
            3 << 20
        );
        assert_eq!(
            tiers
                .place(TierId::FAST, 8 << 20, WriteKind::Compaction)
                .unwrap()
                .tier(),
            TierId::CAPACITY,
            "not placed on top of replicas"
        );
        assert_eq!(
            tiers.replica_shortfall(11 << 20, WriteKind::Compaction),
            0,
            "nothing to gain: it is over the table budget anyway"
        );
        tiers.release_replica(4 << 20);
        assert_eq!(
            tiers
                .place(TierId::FAST, 8 << 20, WriteKind::Compaction)
                .unwrap()
                .tier(),
            TierId::FAST
        );

        // Taking the loan back puts replicas (17 MiB beside 30 MiB of tables) over their room.
        tiers.hold_flush_reserve(u64::MAX);
        assert_eq!(
            tiers.flush_reserve(),
            16 << 20,
            "never more than configured"
        );
        assert_eq!(tiers.replicas_over_room(), 7 << 20);
        assert_eq!(tiers.replica_shortfall(1 << 20, WriteKind::Flush), 0);
        assert_eq!(
            tiers.replica_shortfall(10 << 20, WriteKind::Flush),
            1 << 20,
            "a flush may use the whole reserve, replicas or not"
        );
        drop(deep);
    }

    #[test]
    fn one_tier_has_no_flush_reserve() {
        let dir = tempfile::tempdir().unwrap();
        let tiers = tiers(dir.path(), &["only"]);
        assert_eq!(
            tiers.table_budget(TierId::FAST, WriteKind::Compaction),
            56 << 20
        );
    }
}
