//! tierkv: an embedded, persistent key-value store for hybrid storage.
//!
//! A small fast tier (Optane-class NVMe, persistent memory) in front of a large capacity tier
//! (QLC/SATA SSD): the WAL, the MANIFEST and the top LSM levels live on the fast tier, the bulk
//! of the data on the capacity tier. See `ARCHITECTURE.md` for the module map.
//!
//! Layers, bottom to top: formats (`coding`, `key`, `batch`, `sst`, `wal::log`,
//! `version::edit`) -> I/O (`env`) -> storage (`tier`, `placement`, block cache) -> LSM
//! (`memtable`, `version`, `compaction`) -> the [`Db`] facade (`db`).
//!
//! ```no_run
//! use tierkv::{Db, Options, ReadOptions, TierConfig, WriteOptions};
//! let opts = Options::builder()
//!     .tier(TierConfig::new("fast", "/mnt/optane/db"))
//!     .tier(TierConfig::new("capacity", "/mnt/qlc/db"))
//!     .levels_on_fast(2)
//!     .build()?;
//! let db = Db::open(opts)?;
//! db.put(&WriteOptions::sync(), b"key", b"value")?;
//! assert_eq!(db.get(&ReadOptions::default(), b"key")?, Some(b"value".to_vec()));
//! # Ok::<(), tierkv::Error>(())
//! ```

#![warn(missing_docs)]
#![warn(unnameable_types)]

pub(crate) mod batch;
pub(crate) mod coding;
pub(crate) mod compaction;
mod db;
pub mod env;
pub(crate) mod error;
pub(crate) mod handle;
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
pub(crate) mod wal;

pub use batch::{BatchIter, BatchOp, WriteBatch};
pub use db::{Db, DbIterator, Entries, LiveFile, Transaction};
pub use error::{Error, Result};
pub use handle::{Handle, ScanEntries};
pub use key::SeqNo;
pub use options::{
    Compression, Durability, Options, OptionsBuilder, Placement, ReadOptions, RecoveryMode,
    TierConfig, WalMode, WriteOptions, MAX_KEY_LEN, MAX_VALUE_LEN,
};
pub use snapshot::Snapshot;
pub use stats::{LevelStats, Stats, TierIo, TierStats};
