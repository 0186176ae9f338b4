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
//! - One part of a format from bytes in memory, for fuzzers and tools that hold a fragment
//!   rather than a file: [`decode_footer`], [`decode_stored_block`], [`BlockView`],
//!   [`decode_index`], [`FilterView`], [`decode_properties`], [`decode_version_edit`],
//!   [`read_area`]. They call the decoders the engine itself uses and reject bad bytes with
//!   `Corruption` naming the file [`IN_MEMORY`].

#[cfg(doc)]
use crate::env::Fs;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::sst;
use crate::wal::parallel;
use crate::RecoveryMode;
use std::path::Path;
use std::sync::Arc;

pub use crate::iter::InternalIterator;
pub use crate::key::{parse_internal_key, user_key, ParsedKey, ValueKind};
pub use crate::options::parse_size;
pub use crate::placement::auto::AutoPlaceConfig;
pub use crate::sst::{
    BlockHandle, Footer as TableFooter, TableIter, TableProperties, BLOCK_TRAILER_LEN,
};
pub use crate::stats::human_bytes;
pub use crate::tier::{parse_file_name, read_identity, FileKind};
pub use crate::version::{NewFile, RecoveredManifest, VersionEdit};
pub use crate::wal::log::{LogReader, LogTail};
pub use crate::wal::parallel::{
    Layout as AreaLayout, Meta as AreaMeta, Recovered as AreaRecovered,
    RecoveredBatch as AreaBatch, Slot as AreaSlot,
};

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

/// The file name that `Corruption` errors of the in-memory decoders below report.
pub const IN_MEMORY: &str = "<in-memory bytes>";

fn corrupt(offset: u64, what: impl Into<String>) -> Error {
    Error::corruption(IN_MEMORY, offset, what)
}

/// Decodes a table footer (exactly its 64 bytes): magic, version and checksum are checked.
pub fn decode_footer(bytes: &[u8]) -> Result<TableFooter> {
    sst::Footer::decode(bytes).map_err(|e| corrupt(0, e))
}

/// Checks a block as stored in a table, followed by its [`BLOCK_TRAILER_LEN`]-byte trailer
/// (compression type and checksum), and returns its contents, decompressed.
pub fn decode_stored_block(raw: &[u8]) -> Result<Vec<u8>> {
    let (stored, c) = sst::check_block(raw).map_err(|e| corrupt(0, e))?;
    sst::decompress(stored, c).map_err(|e| corrupt(0, e))
}

/// A data or index block's contents (after [`decode_stored_block`]) with its restart array
/// checked; entries are decoded as they are read, as a table reader does.
#[derive(Debug, Clone)]
pub struct BlockView(Arc<sst::Block>);

/// An entry of a block: (key, value).
pub type BlockEntry = (Vec<u8>, Vec<u8>);

impl BlockView {
    /// Checks the restart array of `contents`.
    pub fn decode(contents: Vec<u8>) -> Result<BlockView> {
        let block = sst::Block::new(contents).map_err(|e| corrupt(0, e))?;
        Ok(BlockView(Arc::new(block)))
    }

    /// Every entry, first to last.
    pub fn entries(&self) -> Result<Vec<BlockEntry>> {
        let mut it = self.0.iter();
        it.seek_to_first();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        match it.corruption() {
            Some(what) => Err(corrupt(0, what)),
            None => Ok(out),
        }
    }

    /// Every entry, last to first, found the way a reverse iterator finds them (through the
    /// restart points).
    pub fn entries_backward(&self) -> Result<Vec<BlockEntry>> {
        let mut it = self.0.iter();
        it.seek_to_last();
        let mut out = Vec::new();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        match it.corruption() {
            Some(what) => Err(corrupt(0, what)),
            None => Ok(out),
        }
    }

    /// The first entry whose internal key is at or after `target` (internal-key order).
    pub fn seek(&self, target: &[u8]) -> Result<Option<BlockEntry>> {
        let mut it = self.0.iter();
        it.seek(target);
        if let Some(what) = it.corruption() {
            return Err(corrupt(0, what));
        }
        Ok(it.valid().then(|| (it.key().to_vec(), it.value().to_vec())))
    }
}

/// Decodes an index block's contents: every entry as (separator key, data block handle).
pub fn decode_index(contents: Vec<u8>) -> Result<Vec<(Vec<u8>, BlockHandle)>> {
    BlockView::decode(contents)?
        .entries()?
        .into_iter()
        .map(|(key, value)| {
            let h = BlockHandle::decode_varint(&value)
                .ok_or_else(|| corrupt(0, "malformed block handle in index"))?;
            Ok((key, h))
        })
        .collect()
}

/// A table's bloom filter, decoded from its block contents.
#[derive(Debug)]
pub struct FilterView(sst::BloomFilter);

impl FilterView {
    /// Decodes filter block contents (bits, then the probe count).
    pub fn decode(contents: Vec<u8>) -> Result<FilterView> {
        sst::BloomFilter::decode(contents)
            .map(FilterView)
            .map_err(|e| corrupt(0, e))
    }

    /// False only if `user_key` was certainly never added.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.0.may_contain(user_key)
    }
}

/// Decodes a properties block's contents (`file_size` is left 0).
pub fn decode_properties(contents: &[u8]) -> Result<TableProperties> {
    TableProperties::decode(contents).map_err(|e| corrupt(0, e))
}

/// Decodes one MANIFEST record's payload into an edit.
pub fn decode_version_edit(payload: &[u8]) -> Result<VersionEdit> {
    VersionEdit::decode(payload).map_err(|e| corrupt(0, format!("MANIFEST edit: {e}")))
}

/// Reads the parallel WAL's area file at `path` as recovery does: the newest valid metadata
/// page, then the write batches of the groups coloured `log_number` or above, in sequence
/// order, with damage treated according to `mode`. An absent file reads as empty.
pub fn read_area(
    fs: &dyn crate::env::Fs,
    path: &Path,
    log_number: u64,
    mode: RecoveryMode,
) -> Result<AreaRecovered> {
    parallel::recover(fs, path, log_number, mode)
}
