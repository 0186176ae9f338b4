//! The tool-facing surface: what dumps, checks and tests read of the on-disk formats without
//! opening a database.
//!
//! `tierkv-cli` (`dump-manifest`, `dump-wal`, `dump-sst`), the benchmark and the project's
//! integration tests go through this module instead of reaching into the engine's internals.
//! It is kept stable enough for those tools; it is not a compatibility promise, and an
//! application embedding tierkv should need nothing from it.
//!
//! What it holds, by format (each specified in `docs/`):
//! - Keys: internal keys are a user key followed by an 8-byte trailer packing a sequence
//!   number and a [`ValueKind`] ([`parse_internal_key`], [`user_key`]).
//! - Logs (the WAL's log files and the MANIFEST share one record format, `docs/wal.md`):
//!   [`LogReader`] reads records and reports how the log ends ([`LogTail`]); a WAL record's
//!   payload is a [`WriteBatch`](crate::WriteBatch) ([`WriteBatch::decode`](crate::WriteBatch::decode)).
//! - The parallel WAL's area (`docs/parallel-wal.md`): its metadata page ([`AreaMeta`]).
//! - The MANIFEST: [`RecoveredManifest`] reads CURRENT and the MANIFEST it names into
//!   [`VersionEdit`]s.
//! - Tables (`docs/sst.md`): [`Table`] opens one table file on its own; its entries are read
//!   through the [`InternalIterator`] cursor.
//! - File names and tier directories: [`parse_file_name`], [`read_identity`].
//! - Text helpers shared by the tools: [`human_bytes`], [`parse_size`].

#[cfg(doc)]
use crate::env::Fs;
use crate::env::RandomAccessFile;
use crate::error::Result;
use crate::sst;
use std::path::Path;
use std::sync::Arc;

pub use crate::iter::InternalIterator;
pub use crate::key::{parse_internal_key, user_key, ParsedKey, ValueKind};
pub use crate::options::parse_size;
pub use crate::placement::auto::AutoPlaceConfig;
pub use crate::sst::{TableIter, TableProperties, BLOCK_TRAILER_LEN};
pub use crate::stats::human_bytes;
pub use crate::tier::{parse_file_name, read_identity, FileKind};
pub use crate::version::{NewFile, RecoveredManifest, VersionEdit};
pub use crate::wal::log::{LogReader, LogTail};
pub use crate::wal::parallel::{Layout as AreaLayout, Meta as AreaMeta, Slot as AreaSlot};

/// A table file opened on its own, outside any database: no block cache, no tier, no
/// MANIFEST. Opening checks the footer, the index and the properties block; data blocks are
/// checked as they are read.
#[derive(Debug, Clone)]
pub struct Table(Arc<sst::Table>);

impl Table {
    /// Opens the table in `file` (from [`Fs::open_read`]); `path` names it in errors. Fails
    /// with `Corruption` (naming the file and offset) if its footer, index or properties are
    /// damaged, or with `Io` if they cannot be read.
    pub fn open(file: Arc<dyn RandomAccessFile>, path: &Path) -> Result<Table> {
        Ok(Table(sst::Table::open(file, path.to_path_buf(), None)?))
    }

    /// The table's properties block: key range, counts, sizes, sequence numbers, compression.
    pub fn properties(&self) -> &TableProperties {
        self.0.properties()
    }

    /// Every index entry as `(separator internal key, block offset, stored block size)`; the
    /// stored size excludes the block's [`BLOCK_TRAILER_LEN`]-byte trailer.
    pub fn index_entries(&self) -> Vec<(Vec<u8>, u64, u64)> {
        self.0.index_entries()
    }

    /// A cursor over every entry (internal key, value) in key order, reading blocks as it
    /// moves. Position it first (`seek_to_first`, `seek`); errors end it and show in `status`.
    pub fn iter(&self) -> TableIter {
        self.0.iter(false)
    }

    /// Reads every block from the file, checks its checksum and, for data blocks, decodes
    /// every entry. Returns the number of blocks checked, or the first `Corruption` found.
    pub fn verify_checksums(&self) -> Result<u64> {
        self.0.verify_checksums()
    }
}
