//! tierkv: an embedded, persistent key-value store for hybrid storage.
//!
//! tierkv is an LSM tree for a machine with two kinds of storage: a small fast tier
//! (Optane-class NVMe, persistent memory) in front of a large capacity tier (QLC or SATA SSD).
//! Keys and values are byte strings, ordered by bytewise comparison. The write-ahead log, the
//! MANIFEST and the top LSM levels live on the fast tier, the bulk of the data on the capacity
//! tier; which levels go where is the [placement](#placement) choice.
//!
//! # Quick start
//!
//! A database is opened with [`Options`], built by [`Options::builder`] (which validates every
//! option and names the one it rejects) or read from TOML ([`Options::from_toml_file`]).
//! Tiers are listed fastest first; each is a directory on one device with a byte budget
//! ([`TierConfig`]).
//!
//! ```no_run
//! use tierkv::{Db, Options, ReadOptions, TierConfig, WriteBatch, WriteOptions};
//! let opts = Options::builder()
//!     .tier(TierConfig::new("fast", "/mnt/optane/db"))
//!     .tier(TierConfig::new("capacity", "/mnt/qlc/db"))
//!     .levels_on_fast(2)
//!     .build()?;
//! let db = Db::open(opts)?;
//! db.put(&WriteOptions::sync(), b"key", b"value")?;
//! assert_eq!(db.get(&ReadOptions::default(), b"key")?, Some(b"value".to_vec()));
//!
//! let mut batch = WriteBatch::new();
//! batch.put(b"a", b"1");
//! batch.delete(b"key");
//! db.write(&WriteOptions::default(), batch)?; // all or nothing
//!
//! let mut it = db.iter(ReadOptions::default().bounds(Some(b"a"), Some(b"b")))?;
//! it.seek_to_first();
//! for entry in it.entries() {
//!     let (key, value) = entry?;
//!     println!("{key:?} = {value:?}");
//! }
//! # Ok::<(), tierkv::Error>(())
//! ```
//!
//! [`Db`] is `Send + Sync`: share it between threads by reference or in an `Arc`. Dropping it
//! stops background work and leaves a state that reopens cleanly.
//! Keys are at most [`MAX_KEY_LEN`] bytes, values at most [`MAX_VALUE_LEN`], a batch at most
//! [`Options::max_batch_bytes`] encoded (the same in every WAL mode; never above
//! [`MAX_BATCH_BYTES`]).
//!
//! # Tiers
//!
//! Tier 0 holds the WAL, the MANIFEST, `CURRENT` and `LOCK`; every tier holds table files and
//! a `TIER` file naming the database and the tier, so directories cannot be mixed up. A table
//! that does not fit its tier's budget goes to the next tier; when no tier can take it, the
//! write fails with [`Error::NoSpace`]. Part of tier 0 is reserved for the WAL
//! ([`Options::wal_reserve`]) and part for memtable flushes ([`Options::flush_reserve`]), so
//! that compactions cannot push L0 off the fast tier. [`Db::stats`] reports each tier's usage
//! and I/O ([`TierStats`], [`TierIo`]); [`Db::live_files`] says where each table is.
//!
//! # Durability
//!
//! Each write says how durable it must be when it returns ([`WriteOptions::durability`]):
//!
//! - [`Durability::Buffered`]: in the WAL's user-space buffer; a process crash loses it.
//! - [`Durability::Flush`] (the default): handed to the operating system; survives a process
//!   crash, not a power loss.
//! - [`Durability::Sync`]: on stable storage (`fdatasync`) before the call returns.
//!
//! Whatever the choice, recovery rebuilds a prefix of history: a write is never recovered
//! without every write numbered before it, and a batch is recovered whole or not at all. A
//! write is visible to every read that starts after it returns. After a failed WAL write or
//! sync, MANIFEST write or background job, the database stops taking writes: they fail with
//! [`Error::Stopped`], which keeps the first failure typed (a full tier, an I/O error naming
//! its file, corruption naming file and offset), until it is reopened. A flush, compaction
//! or migration that ran out of space is the exception: once there is room, [`Db::resume`]
//! runs it again and writes go on without a reopen (`docs/errors.md`).
//!
//! # WAL modes
//!
//! [`WalMode`] chooses how the log is written; recovery reads either mode's logs, so a
//! database may change modes across a reopen.
//!
//! - [`WalMode::Group`] (the default): RocksDB's group commit. Writers queue; the first one
//!   logs the whole group to the memtable's log file and syncs once for all of it.
//! - [`WalMode::Parallel`]: SpanDB's parallel WAL. Writes are numbered at admission and several
//!   loggers pack them into 4 KiB pages of a preallocated area on tier 0, writing several runs
//!   at once (through io_uring where the kernel allows); for a fast tier that needs queue depth.
//! - [`WalMode::Append`]: WALTZ's leaderless WAL on a conventional file. Each writer reserves
//!   its record's bytes with one add on the log's tail and writes (and syncs) it itself; no
//!   writer waits for a leader's I/O.
//!
//! [`RecoveryMode`] says how damage found in the log at open is treated: a torn tail left by a
//! crash is tolerated by default, damage to synced bytes is [`Error::Corruption`].
//!
//! # Placement
//!
//! [`Placement`] chooses where new tables go:
//!
//! - [`Placement::Fixed`] (the default): levels `L0..L(levels_on_fast - 1)` on tier 0, deeper
//!   levels on the next tiers. `levels_on_fast = 0` keeps only the WAL on the fast tier.
//! - [`Placement::Auto`]: a pointer over the levels, starting at `levels_on_fast`, that a
//!   controller moves from the fast tier's measured bandwidth utilisation and free space; tables
//!   behind it migrate between tiers in the background, and read-hot tables of the slower tiers
//!   may get replicas on the fast tier. [`Stats::placement`] and
//!   [`Stats::placement_history`] show what it decided.
//!
//! # Reads, snapshots and iterators
//!
//! [`Db::get`] and [`Db::multi_get`] read the latest state, or a [`Snapshot`] given in
//! [`ReadOptions`] ([`ReadOptions::at`]). A snapshot is a consistent view, released when its
//! last clone drops. [`Db::iter`] returns a [`DbIterator`], a cursor that stays valid across
//! flushes and compactions; [`DbIterator::entries`] turns it into a standard Rust iterator
//! ([`Entries`]).
//!
//! # Asynchronous requests
//!
//! The `submit_*` methods ([`Db::submit_put`], [`Db::submit_write`], [`Db::submit_get`],
//! [`Db::submit_multi_get`], [`Db::submit_scan`], [`Transaction::submit_commit`]) queue a
//! request and return at once with a [`Handle`]. A handle can be polled, waited on, or awaited:
//! it is a [`Future`](std::future::Future) that needs no particular executor (engine threads
//! wake it). Requests in flight at the same time are not ordered among themselves; one submitted
//! after another completed is ordered after it. Beyond [`PipelineOptions::max_pending_requests`]
//! requests in flight, `submit_*` fails with [`Error::Busy`].
//!
//! ```
//! # fn demo(db: &tierkv::Db) -> tierkv::Result<()> {
//! use tierkv::{ReadOptions, WriteOptions};
//! let write = db.submit_put(&WriteOptions::sync(), b"k", b"v")?;
//! write.wait()?; // or `.await`
//! let scan: tierkv::ScanEntries = db.submit_scan(ReadOptions::default(), b"", 100)?.wait()?;
//! # let _ = scan;
//! # Ok(())
//! # }
//! ```
//!
//! # Transactions
//!
//! [`Db::transaction`] begins an optimistic [`Transaction`]: it reads the database as of its
//! start plus its own writes, buffers its writes, and commits them as one batch. The commit
//! fails with [`Error::Conflict`] (writing nothing) if another write changed a key the
//! transaction read or wrote since it began; retry it then.
//!
//! ```
//! # fn demo(db: &tierkv::Db) -> tierkv::Result<()> {
//! use tierkv::{Error, WriteOptions};
//! loop {
//!     let mut txn = db.transaction();
//!     let n = txn.get(b"counter")?.map_or(0, |v| v[0]);
//!     txn.put(b"counter", &[n.wrapping_add(1)])?;
//!     match txn.commit(&WriteOptions::sync()) {
//!         Err(Error::Conflict { .. }) => continue,
//!         other => return other,
//!     }
//! }
//! # }
//! ```
//!
//! # Errors
//!
//! Every fallible call returns [`Result`], whose [`Error`] carries structured fields: `Io`
//! names the operation and path, `Corruption` the file, offset and failed check. Reads never
//! return stored data whose checksum failed. [`Db::verify_checksums`] checks every live table.
//!
//! # Files and tools
//!
//! All I/O goes through the [`env::Fs`] trait given in [`Options::fs`]: [`env::PosixFs`] by
//! default, [`env::FaultFs`] for tests that crash or fail I/O on purpose, or a user's own. The
//! on-disk formats are specified in the repository's `docs/` (`current.md`, `manifest.md`,
//! `wal.md`, `log-format.md`, `parallel-wal.md`, `sst.md`) and read offline through
//! [`inspect`], the module `tierkv-cli` dumps and checks with. `ARCHITECTURE.md` maps the
//! modules.

#![warn(missing_docs)]
#![warn(unnameable_types)]

pub(crate) mod batch;
pub(crate) mod coding;
pub(crate) mod compaction;
mod db;
pub mod env;
pub(crate) mod error;
pub(crate) mod handle;
mod heap;
pub(crate) mod hot;
pub mod inspect;
pub(crate) mod iter;
pub(crate) mod key;
pub(crate) mod memtable;
pub(crate) mod options;
pub(crate) mod placement;
pub(crate) mod snapshot;
pub(crate) mod sst;
pub(crate) mod stats;
pub(crate) mod tier;
pub(crate) mod version;
pub(crate) mod vlog;
pub(crate) mod wal;
pub(crate) mod zoned;
pub(crate) mod zonefs;

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use db::{Db, DbIterator, Entries, LiveFile, Transaction};
pub use error::{chain_message, Error, Result};
pub use handle::{Handle, ScanEntries};
pub use heap::bound_heap_retention;
pub use key::SeqNo;
pub use options::CapacityLevels;
pub use options::Preset;
pub use options::{
    CacheOptions, CompactionOptions, Compression, Durability, MemtableOptions, Options,
    OptionsBuilder, PipelineOptions, Placement, PlacementOptions, ReadOptions, RecoveryMode,
    TableOptions, TierConfig, TierKind, TierTables, ValueOptions, ValueSeparation, ValuesMode,
    WalMode, WalOptions, WriteOptions, MAX_BATCH_BYTES, MAX_KEY_LEN, MAX_VALUE_LEN,
};
pub use options::{HotAdmission, HotEviction, HotTier, HotTierOptions, MscPolicy};
pub use snapshot::Snapshot;
pub use stats::{HotTierStats, LevelStats, Stats, TierIo, TierStats, ZonedWalStats};
pub use zonefs::ZoneFsStats;
