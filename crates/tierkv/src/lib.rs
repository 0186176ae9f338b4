//! tierkv: an embedded, persistent key-value store for hybrid storage.
//!
//! A small fast tier (Optane-class NVMe, persistent memory) in front of a large capacity tier
//! (QLC/SATA SSD): the WAL, the MANIFEST and the top LSM levels live on the fast tier, the bulk
//! of the data on the capacity tier. See `ARCHITECTURE.md` for the module map.
//!
//! Layers, bottom to top: formats (`coding`, `key`, `sst` blocks, `wal::log`) -> I/O (`env`) ->
//! storage (`tier`, block cache) -> LSM (`memtable`, `version`, `compaction`) -> the [`Db`] facade.

pub mod coding;
pub mod env;
pub mod error;
pub mod iter;
pub mod key;
pub mod sst;
pub mod wal;

pub use error::{Error, Result};
