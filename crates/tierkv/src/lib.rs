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

pub mod batch;
pub mod coding;
pub mod compaction;
mod db;
pub mod env;
pub mod error;
pub mod handle;
pub mod iter;
pub mod key;
pub mod memtable;
pub mod options;
pub mod placement;
pub mod snapshot;
pub mod sst;
pub mod stats;
pub mod tier;
pub mod version;
pub mod wal;

pub use batch::WriteBatch;
pub use db::{Db, DbIterator, Entries, LiveFile};
pub use error::{Error, Result};
pub use handle::Handle;
pub use options::{
    Compression, Durability, Options, OptionsBuilder, Placement, ReadOptions, RecoveryMode,
    TierConfig, WalMode, WriteOptions,
};
pub use snapshot::Snapshot;
pub use stats::{LevelStats, Stats, TierStats};
