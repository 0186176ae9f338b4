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
//! - The append and zoned WALs (`docs/append-wal.md`), the hot store (`docs/hot-tier.md`) and the
//!   value log (`docs/value-log.md`): [`decode_append_record`], [`read_zoned_device`],
//!   [`replay_logs`] (every mode's logs, as open replays them), [`decode_hot_slot`],
//!   [`read_hot_journal`], [`read_hot_partitions`], [`decode_split_value`], [`decode_value_record`],
//!   [`decode_value_log_state`].
//! - Tables on zones (`docs/zonefs.md`): [`ZonedDir`] reads a zoned tier directory on its own
//!   (geometry, zones, files and their extents, a file's bytes); [`zoned_tiers`] views the
//!   zoned tiers of an open database; [`ZonedTierImage::check`] checks either;
//!   [`scan_zonefs_journal`] decodes one metadata zone.
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
pub use crate::zonefs::{
    JournalPosition, ZoneCheck, ZoneExtent, ZoneFileView, ZoneGeometry, ZoneRole, ZoneView,
    ZonedDir, ZonedTierImage,
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

// --- the append and zoned WALs, the hot store, the value log ---------------------------------

/// Replays the write-ahead logs in `dir` (tier 0) as open does: group-commit `.log` files,
/// append-WAL `.alog` files, the zoned WAL's `WALZONES` device and the parallel WAL's area,
/// skipping logs numbered below `log_number` and treating damage according to `mode`.
/// Returns every replayed write as `(first sequence number, batch)`, in replay order. Unlike
/// open it has no MANIFEST, so the append WAL's damaged first record of the oldest log ends
/// replay quietly even where later records prove it durable (open reports that).
pub fn replay_logs(
    fs: &dyn crate::env::Fs,
    dir: &Path,
    log_number: u64,
    mode: RecoveryMode,
) -> Result<Vec<(u64, crate::WriteBatch)>> {
    struct Collect(Vec<(u64, crate::WriteBatch)>);
    impl crate::wal::ReplaySink for Collect {
        fn mark_number_used(&mut self, _: u64) {}
        fn apply(&mut self, seq: u64, batch: &crate::WriteBatch) -> Result<()> {
            self.0.push((seq, batch.clone()));
            Ok(())
        }
    }
    let ctx = crate::wal::ReplayCtx {
        fs,
        dir,
        log_number,
        mode,
    };
    let mut sink = Collect(Vec::new());
    crate::wal::replay(&ctx, &mut sink)?;
    Ok(sink.0)
}

/// One append-WAL record (`docs/append-wal.md`, the append and zoned modes), decoded.
#[derive(Debug, Clone)]
pub struct AppendRecord {
    /// The log file number the record says it belongs to.
    pub log: u64,
    /// Every write below this sequence number was durable when the record was written.
    pub synced: u64,
    /// The batch's first sequence number.
    pub seq: u64,
    /// The batch.
    pub batch: crate::WriteBatch,
    /// Bytes of the record, alignment padding included.
    pub len: u64,
}

/// Decodes the append-WAL record at the start of `bytes`: header (checksum, payload length,
/// log number, synced-through watermark) and its write-batch payload. Rejects a short,
/// damaged or unparsable record with `Corruption`.
pub fn decode_append_record(bytes: &[u8]) -> Result<AppendRecord> {
    crate::wal::append::recover::parse_record(bytes)
        .map(|r| AppendRecord {
            log: r.log,
            synced: r.synced,
            seq: r.seq,
            batch: r.batch,
            len: r.len,
        })
        .map_err(|what| corrupt(0, what))
}

/// One zone of an emulated zoned device, as the device reports it after a restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneReport {
    /// The zone's number.
    pub id: u32,
    /// Its condition, as ZNS names it (`EMPTY`, `CLOSED`, `FULL`, `READ_ONLY`, `OFFLINE`).
    pub state: &'static str,
    /// Bytes from the zone's start to its write pointer.
    pub write_pointer: u64,
}

/// Opens the emulated zoned device at `path` (the zoned WAL's `WALZONES`) as recovery does:
/// its superblock, its zone table and a scan of every zone's data for the write pointer.
/// Fails with `InvalidArgument` when the file is not a device, `Corruption` (naming the file
/// and offset) when its superblock is damaged or the file is shorter than its geometry.
pub fn read_zoned_device(fs: &dyn crate::env::Fs, path: &Path) -> Result<Vec<ZoneReport>> {
    use crate::zoned::ZonedDevice;
    let dev = crate::zoned::emulator::EmulatedZoned::open_existing(fs, path, false)?;
    Ok(dev
        .report()
        .into_iter()
        .map(|z| ZoneReport {
            id: z.id,
            state: z.state.name(),
            write_pointer: z.write_pointer,
        })
        .collect())
}

/// One slot of a hot-store slab file (`docs/hot-tier.md`), decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotSlot {
    /// The version's sequence number.
    pub seq: u64,
    /// `"value"`, `"deletion"` or `"in-lsm"` (a version too large for a slot).
    pub kind: &'static str,
    /// The user key.
    pub key: Vec<u8>,
    /// The value (empty unless `kind` is `"value"`).
    pub value: Vec<u8>,
}

/// Decodes one slot of `bytes.len()` bytes (a slot of its class): `Ok(None)` for a free slot,
/// `Corruption` for a damaged one.
pub fn decode_hot_slot(bytes: &[u8]) -> Result<Option<HotSlot>> {
    let slot = crate::hot::slab::decode_slot(bytes).map_err(|what| corrupt(0, what))?;
    Ok(slot.map(|s| HotSlot {
        seq: s.seq,
        kind: s.kind.name(),
        key: s.key,
        value: s.value,
    }))
}

/// The hot store's `HOT-JOURNAL`: the last in-place job's marker and page images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HotJournal {
    /// The log number the job's memtable was flushed under.
    pub log_number: u64,
    /// The lowest sequence number the job wrote.
    pub lowest: u64,
    /// Every page image as `(size class, page number, bytes)`.
    pub pages: Vec<(usize, u64, Vec<u8>)>,
}

/// Reads the hot store's journal at `path`; `Ok(None)` when there is none, `Corruption`
/// (naming the file and offset) when it is damaged.
pub fn read_hot_journal(fs: &dyn crate::env::Fs, path: &Path) -> Result<Option<HotJournal>> {
    Ok(crate::hot::read_journal(fs, path)?.map(|j| HotJournal {
        log_number: j.log_number,
        lowest: j.lowest,
        pages: j.pages,
    }))
}

/// The hot store's partition count recorded in its directory `hot_dir` (`hot/PARTITIONS`,
/// `docs/hot-tier.md`): 1 without a record, `Corruption` naming the file when it is damaged.
pub fn read_hot_partitions(fs: &dyn crate::env::Fs, hot_dir: &Path) -> Result<usize> {
    crate::hot::partitioned::read_record(fs, hot_dir)
}

/// A split value as the LSM stores it with `values = "split"` (`docs/value-log.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SplitValue {
    /// The value itself.
    Inline(Vec<u8>),
    /// A pointer to a value-log record.
    Pointer {
        /// The value-log file number.
        file: u64,
        /// The record's offset in that file.
        offset: u64,
        /// The record's bytes (header, key and value).
        len: u32,
    },
}

/// Decodes a tagged LSM value of a split-values database; `Corruption` if it is malformed.
pub fn decode_split_value(bytes: &[u8]) -> Result<SplitValue> {
    match crate::vlog::decode_stored(bytes) {
        Some(crate::vlog::Stored::Inline(v)) => Ok(SplitValue::Inline(v.to_vec())),
        Some(crate::vlog::Stored::Pointer(p)) => Ok(SplitValue::Pointer {
            file: p.file,
            offset: p.offset,
            len: p.len,
        }),
        None => Err(corrupt(0, "malformed split value")),
    }
}

/// Encodes a split value as the LSM stores it (the inverse of [`decode_split_value`]).
pub fn encode_split_value(value: &SplitValue) -> Vec<u8> {
    match value {
        SplitValue::Inline(v) => {
            let mut out = vec![crate::vlog::TAG_INLINE];
            out.extend_from_slice(v);
            out
        }
        SplitValue::Pointer { file, offset, len } => crate::vlog::ValuePointer {
            file: *file,
            offset: *offset,
            len: *len,
        }
        .encode(),
    }
}

/// Checks one value-log record read whole (as a pointer's length delimits it) and returns its
/// `(key, value)`; `Corruption` if its lengths or checksum are wrong.
pub fn decode_value_record(bytes: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    crate::vlog::decode_record(bytes)
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .map_err(|what| corrupt(0, what))
}

/// Decodes the value-log collection state file (`VLOGGC`; `docs/value-log.md`, "Collection
/// state") and returns what it holds encoded again; `Corruption` naming the file if the bytes
/// are damaged.
pub fn decode_value_log_state(bytes: &[u8]) -> Result<Vec<u8>> {
    use crate::vlog::state::{SavedGc, STATE_FILE};
    SavedGc::decode(bytes, std::path::Path::new(STATE_FILE)).map(|s| s.encode())
}

// --- tables on zones ---------------------------------------------------------------------------

/// Each zoned tier (`tables = "zones"`) of an open database, by name, as its zone file system
/// holds it now: files with every extent written, zones with the live bytes the file system
/// counts. [`ZonedTierImage::check`] compares the two.
pub fn zoned_tiers(db: &crate::Db) -> Vec<(String, ZonedTierImage)> {
    db.zoned_file_systems()
        .iter()
        .map(|(name, fs)| (name.clone(), fs.image()))
        .collect()
}

// --- tables on zones ---------------------------------------------------------------------------

/// The commits of one ZoneFs metadata zone that check (`docs/zonefs.md`, "Metadata journal").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneFsJournal {
    /// The generation of the snapshot the zone starts with.
    pub generation: u64,
    /// Each record's kind (`snapshot`, `create`, `extents`, `delete`, `rename`), in order.
    pub records: Vec<&'static str>,
}

/// Decodes the metadata zone `bytes` written in LBAs of `lba` bytes, as recovery reads it:
/// `Ok(None)` when it does not start with a valid snapshot, else every commit up to the first
/// that fails its check. `InvalidArgument` for an LBA size that is not a power of two of at
/// least 512 bytes.
pub fn scan_zonefs_journal(bytes: &[u8], lba: u64) -> Result<Option<ZoneFsJournal>> {
    if lba < 512 || !lba.is_power_of_two() {
        return Err(Error::invalid(format!(
            "LBA size {lba} is not a power of two of at least 512 bytes"
        )));
    }
    use crate::zonefs::journal::{scan_zone, Record};
    Ok(
        scan_zone(bytes, lba).map(|(generation, records)| ZoneFsJournal {
            generation,
            records: records
                .iter()
                .map(|r| match r {
                    Record::Snapshot { .. } => "snapshot",
                    Record::Create { .. } => "create",
                    Record::Extents { .. } => "extents",
                    Record::Delete { .. } => "delete",
                    Record::Rename { .. } => "rename",
                })
                .collect(),
        }),
    )
}
