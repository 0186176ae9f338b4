//! The value log of `values = "split"`: values at or above `split_threshold` are appended to a
//! log file on the capacity tier and the LSM stores a pointer to them. Format and ordering
//! rules: `docs/value-log.md`.
//!
//! With split values on, every value stored in the LSM is *tagged*: its first byte says
//! whether the rest is the value itself ([`TAG_INLINE`]) or a pointer ([`TAG_POINTER`]:
//! file number, offset and length of a record, as varints). With `values = "inline"` values
//! are stored untagged, as before; the `VALUES` marker file on tier 0 records that a database
//! holds tagged values, so it is never opened the other way.

mod files;
mod gc;
mod recover;
pub(crate) mod state;
mod sync;

pub(crate) use files::InFlight;
pub(crate) use gc::{Chunk, DeleteBar, GcState, ScannedRecord};

use crate::batch::{BatchOp, WriteBatch};
use crate::coding::{crc, put_u32, put_varint, Decoder};
use crate::compaction::EntryFilter;
use crate::env::{Fs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::hot::Entries;
use crate::iter::InternalIterator;
use crate::key::{self, SeqNo, ValueKind};
use crate::options::{Options, ValueSeparation, ValuesMode};
use crate::snapshot::SnapshotList;
use crate::tier::{TierId, Tiers, WriteKind};
use files::FileTable;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use sync::FileSync;

/// First byte of a tagged LSM value holding the value itself.
pub(crate) const TAG_INLINE: u8 = 0;
/// First byte of a tagged LSM value holding a [`ValuePointer`].
pub(crate) const TAG_POINTER: u8 = 1;
/// Bytes of a record header: crc32c, key length, value length (u32 LE each).
pub(crate) const RECORD_HEADER: usize = 12;
/// Name of the marker file on tier 0 of a database whose LSM values are tagged.
pub(crate) const MARKER: &str = "VALUES";

/// Where a separated value lives: one record of one value-log file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ValuePointer {
    /// Value-log file number (`NNNNNN.vlog` on the capacity tier).
    pub file: u64,
    /// Offset of the record's header.
    pub offset: u64,
    /// Bytes of the whole record (header, key and value).
    pub len: u32,
}

impl ValuePointer {
    /// The tagged LSM value for this pointer.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(24);
        v.push(TAG_POINTER);
        put_varint(&mut v, self.file);
        put_varint(&mut v, self.offset);
        put_varint(&mut v, self.len as u64);
        v
    }

    fn decode(rest: &[u8]) -> Option<ValuePointer> {
        let mut d = Decoder::new(rest);
        let p = ValuePointer {
            file: d.varint()?,
            offset: d.varint()?,
            len: u32::try_from(d.varint()?).ok()?,
        };
        // A record ending past the largest offset cannot exist: refuse it here so readers can
        // add `offset + len` without overflow.
        p.offset.checked_add(u64::from(p.len))?;
        d.is_empty().then_some(p)
    }
}

/// A tagged LSM value, decoded.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Stored<'a> {
    /// The value itself.
    Inline(&'a [u8]),
    /// A pointer into the value log.
    Pointer(ValuePointer),
}

/// Decodes a tagged LSM value; `None` if it is malformed.
pub(crate) fn decode_stored(v: &[u8]) -> Option<Stored<'_>> {
    match v.split_first()? {
        (&TAG_INLINE, rest) => Some(Stored::Inline(rest)),
        (&TAG_POINTER, rest) => ValuePointer::decode(rest).map(Stored::Pointer),
        _ => None,
    }
}

/// Encodes one record: `crc32c(rest) | key_len | value_len | key | value`.
pub(crate) fn encode_record(dst: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let start = dst.len();
    put_u32(dst, 0);
    put_u32(dst, key.len() as u32);
    put_u32(dst, value.len() as u32);
    dst.extend_from_slice(key);
    dst.extend_from_slice(value);
    let sum = crc(&dst[start + 4..]);
    dst[start..start + 4].copy_from_slice(&sum.to_le_bytes());
}

/// Checks one record read whole; returns `(key, value)` or what is wrong with it.
pub(crate) fn decode_record(rec: &[u8]) -> std::result::Result<(&[u8], &[u8]), &'static str> {
    let mut d = Decoder::new(rec);
    let (Some(sum), Some(klen), Some(vlen)) = (d.u32(), d.u32(), d.u32()) else {
        return Err("value-log record shorter than its header");
    };
    if RECORD_HEADER + klen as usize + vlen as usize != rec.len() {
        return Err("value-log record length does not match its pointer");
    }
    if crc(&rec[4..]) != sum {
        return Err("value-log record checksum mismatch");
    }
    let key = &rec[RECORD_HEADER..RECORD_HEADER + klen as usize];
    Ok((key, &rec[RECORD_HEADER + klen as usize..]))
}

/// The file name of value-log file `number`.
pub(crate) fn file_name(number: u64) -> String {
    format!("{number:06}.vlog")
}

/// Parses `NNNNNN.vlog`.
pub(crate) fn parse_file_name(name: &str) -> Option<u64> {
    name.strip_suffix(".vlog")?.parse().ok()
}

/// Encoded records gathered for one append.
#[derive(Default)]
struct Records {
    bytes: Vec<u8>,
    /// Each record's `(offset, length)` in `bytes`.
    spans: Vec<(u64, u64)>,
}

impl Records {
    fn add(&mut self, user_key: &[u8], value: &[u8]) {
        let start = self.bytes.len() as u64;
        encode_record(&mut self.bytes, user_key, value);
        self.spans.push((start, self.bytes.len() as u64 - start));
    }

    fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.spans.clear();
    }
}

/// The records a flush gathers for one append (on-flush separation).
#[derive(Default)]
struct SeparationChunk {
    records: Records,
    /// Each record's entry in the flush's entries.
    at: Vec<usize>,
}

impl SeparationChunk {
    fn add(&mut self, entry: usize, user_key: &[u8], value: &[u8]) {
        self.records.add(user_key, value);
        self.at.push(entry);
    }
}

/// The file being appended to.
struct Active {
    number: u64,
    /// The handle appends go through (only under the append lock).
    file: Box<dyn WritableFile>,
    size: u64,
    /// Its sync side, shared with writers waiting for durability.
    sync: Arc<FileSync>,
    /// An append failed: part of its records may follow `size`, so the next append starts
    /// a new file (see `append_records`).
    torn: bool,
}

/// The value log of one open database: the router for writes and the resolver for reads.
pub(crate) struct ValueLog {
    fs: Arc<dyn Fs>,
    tiers: Arc<Tiers>,
    tier: TierId,
    dir: PathBuf,
    threshold: usize,
    /// Whether flushes, not writes, move large values here (`vlog_separation = "on-flush"`).
    on_flush: bool,
    /// A file is closed and a new one started past this size (`vlog_file_size`).
    file_limit: u64,
    /// Garbage share at which a file is collected (`vlog_gc_threshold`).
    gc_threshold: f64,
    read_only: bool,
    /// The file being appended to, created on the first separated value. The lock orders
    /// appends; syncs run outside it (`sync`), except where `sync_each_append`.
    active: Mutex<Option<Active>>,
    /// The sync side of the active file, read without the append lock by writers that
    /// make the value log durable (see [`ValueLog::sync_appended`]).
    current: Mutex<Option<Arc<FileSync>>>,
    /// Sync every append under the append lock, as the file is written: for a tier on
    /// zones, whose files buffer their last partial block in the appending handle, so a
    /// second handle can neither sync nor read those bytes.
    sync_each_append: bool,
    /// The number the next file gets.
    next_number: AtomicU64,
    /// The highest file number found at open (0: none). Collection never deletes the
    /// highest-numbered file, so numbers are never handed out twice.
    highest_at_open: u64,
    /// Record bytes writes appended since the active memtable started (on-write separation).
    since_switch: AtomicU64,
    /// Number of the file being appended to (0 before the first append), set under `active`.
    active_number: AtomicU64,
    readers: Mutex<HashMap<u64, Arc<dyn RandomAccessFile>>>,
    /// Bytes, garbage and in-flight appends of every file.
    files: Arc<FileTable>,
    /// Garbage collection's progress (`gc`).
    gc: Mutex<GcState>,
    /// A background collection round is running.
    gc_running: AtomicBool,
    /// Readers without a snapshot that may follow pointers: a collected file waits for them.
    pins: Arc<SnapshotList>,
    /// Counters reported by `Db::stats`.
    pub(crate) counters: VlogCounters,
}

/// Value-log counters.
#[derive(Debug, Default)]
pub(crate) struct VlogCounters {
    /// Values written inline (below the threshold) in split mode.
    pub inline_items: AtomicU64,
    /// Their bytes.
    pub inline_bytes: AtomicU64,
    /// Values written to the value log.
    pub separated_items: AtomicU64,
    /// Their bytes (values only).
    pub separated_bytes: AtomicU64,
    /// Record bytes appended to value-log files.
    pub file_bytes: AtomicU64,
    /// Value-log reads (pointers resolved).
    pub reads: AtomicU64,
    /// Pointers dropped by flushes and compactions since open.
    pub garbage_items: AtomicU64,
    /// Record bytes those pointers named: value-log space no version reads any more.
    pub garbage_bytes: AtomicU64,
    /// Garbage-collection passes finished (one per file collected).
    pub gc_runs: AtomicU64,
    /// Record bytes garbage collection appended again (live values it moved).
    pub gc_bytes_rewritten: AtomicU64,
    /// Value-log files garbage collection deleted.
    pub gc_files_deleted: AtomicU64,
    /// `fdatasync`s of value-log files (group syncs, file switches, every append on zones).
    pub syncs: AtomicU64,
}

impl ValueLog {
    /// Opens the value log of a database whose options ask for split values; `None` with
    /// `values = "inline"`. `fresh` says whether the database holds no data yet (a database
    /// with inline values cannot switch to split, nor back).
    pub(crate) fn open(opts: &Options, tiers: &Arc<Tiers>, fresh: bool) -> Result<Option<Self>> {
        let fs = Arc::clone(tiers.fs());
        let marker = tiers.fast().dir.join(MARKER);
        let has_marker = fs.exists(&marker);
        if opts.values.mode == ValuesMode::Inline {
            if has_marker {
                return Err(Error::invalid(
                    "the database stores split values: open it with values = \"split\"",
                ));
            }
            return Ok(None);
        }
        if !has_marker {
            if !fresh {
                return Err(Error::invalid(
                    "the database stores inline values: values = \"split\" needs a new database",
                ));
            }
            if !opts.read_only {
                crate::env::write_file_atomic(fs.as_ref(), &marker, b"split\n")?;
            }
        }
        let tier = if tiers.count() > 1 {
            TierId::CAPACITY
        } else {
            TierId::FAST
        };
        let dir = tiers.get(tier).dir.clone();
        let sync_each_append = opts
            .tiers
            .get(tier.index())
            .is_some_and(|t| t.zone_geometry().is_some());
        let mut max = 0;
        let files = Arc::new(FileTable::default());
        for name in fs.list_dir(&dir)? {
            if let Some(n) = parse_file_name(&name) {
                max = max.max(n);
                let path = dir.join(&name);
                files.add_existing(n, fs.file_size(&path)?);
                if !opts.read_only && !sync_each_append {
                    // NB: after a process crash a file may hold bytes the OS never wrote
                    // back; recovery's tables will point at them, so they are made durable
                    // first (on zones every append was synced).
                    let mut file = fs.open_append(&path)?;
                    file.sync()?;
                    file.close()?;
                }
            }
        }
        let vlog = ValueLog {
            fs,
            tiers: Arc::clone(tiers),
            tier,
            dir,
            threshold: opts.values.split_threshold as usize,
            on_flush: opts.values.separation == ValueSeparation::OnFlush,
            file_limit: opts.values.file_size,
            gc_threshold: opts.values.gc_threshold,
            read_only: opts.read_only,
            active: Mutex::new(None),
            current: Mutex::new(None),
            sync_each_append,
            next_number: AtomicU64::new(max + 1),
            highest_at_open: max,
            since_switch: AtomicU64::new(0),
            active_number: AtomicU64::new(0),
            readers: Mutex::new(HashMap::new()),
            files,
            gc: Mutex::new(GcState::default()),
            gc_running: AtomicBool::new(false),
            pins: Arc::new(SnapshotList::default()),
            counters: VlogCounters::default(),
        };
        vlog.restore_gc_state(opts.read_only)?;
        Ok(Some(vlog))
    }

    /// Whether flushes, not writes, move large values to the value log
    /// (`vlog_separation = "on-flush"`).
    pub(crate) fn separates_on_flush(&self) -> bool {
        self.on_flush
    }

    /// Rewrites `batch` for the LSM: values at or above the threshold are appended to the
    /// value log (one append for the batch, handed to the OS, not synced) and replaced by
    /// pointers, the others tagged inline. Returns a guard to hold until the write carrying
    /// the pointers returned (see [`InFlight`]). A `Sync` write calls
    /// [`ValueLog::sync_appended`] once its WAL write returned. With on-flush separation
    /// every value is tagged inline and nothing is appended.
    pub(crate) fn route(&self, batch: WriteBatch) -> Result<(WriteBatch, InFlight)> {
        if self.read_only {
            return Err(Error::invalid("the database was opened read-only"));
        }
        if self.on_flush {
            return Ok((self.tag_inline(batch)?, InFlight::none()));
        }
        let c = &self.counters;
        let mut large = Records::default();
        for op in batch.iter() {
            if let BatchOp::Put(key, v) = op? {
                if v.len() >= self.threshold {
                    large.add(key, v);
                }
            }
        }
        let (placed, in_flight) = if large.is_empty() {
            (Vec::new(), InFlight::none())
        } else {
            self.since_switch
                .fetch_add(large.bytes.len() as u64, Ordering::Relaxed);
            self.append_records(&large)?
        };
        let mut out = Self::tagged_batch_for(&batch);
        let mut placed = placed.into_iter();
        for op in batch.iter() {
            match op? {
                BatchOp::Delete(key) => out.delete(key),
                BatchOp::Put(key, v) if v.len() >= self.threshold => {
                    let p = placed.next().expect("one pointer per large value");
                    out.put(key, p.encode());
                    c.separated_items.fetch_add(1, Ordering::Relaxed);
                    c.separated_bytes
                        .fetch_add(v.len() as u64, Ordering::Relaxed);
                }
                BatchOp::Put(key, v) => self.put_inline(&mut out, key, v),
            }
        }
        Ok((out, in_flight))
    }

    /// Whether the active memtable should be switched although it is not full: its writes
    /// appended a value-log file's worth of records (`vlog_file_size`). A memtable of pointers
    /// stands for far more data than its size says, and the garbage its overwrites make is
    /// counted only when it is flushed; without this, a memtable of 64 MiB would hold a
    /// million pointers and garbage collection would learn of that garbage only then.
    pub(crate) fn wants_memtable_switch(&self) -> bool {
        self.since_switch.load(Ordering::Relaxed) >= self.file_limit
    }

    /// The active memtable was switched (see [`ValueLog::wants_memtable_switch`]).
    pub(crate) fn note_memtable_switch(&self) {
        self.since_switch.store(0, Ordering::Relaxed);
    }

    /// `batch` with every value tagged inline (on-flush separation); values below the
    /// threshold are counted as inline here, the others where a flush separates them.
    fn tag_inline(&self, batch: WriteBatch) -> Result<WriteBatch> {
        let mut out = Self::tagged_batch_for(&batch);
        for op in batch.iter() {
            match op? {
                BatchOp::Delete(key) => out.delete(key),
                BatchOp::Put(key, v) => self.put_inline(&mut out, key, v),
            }
        }
        Ok(out)
    }

    /// An empty batch with room for `batch` with its values tagged (a pointer is shorter
    /// than the large value it replaces).
    fn tagged_batch_for(batch: &WriteBatch) -> WriteBatch {
        WriteBatch::with_capacity(batch.len(), batch.encoded_len() + batch.len())
    }

    /// Puts `v` tagged inline under `key` in `out`, counting it as an inline value if it is
    /// below the threshold.
    fn put_inline(&self, out: &mut WriteBatch, key: &[u8], v: &[u8]) {
        out.put_concat(key, &[&[TAG_INLINE], v]);
        if v.len() < self.threshold {
            let c = &self.counters;
            c.inline_items.fetch_add(1, Ordering::Relaxed);
            c.inline_bytes.fetch_add(v.len() as u64, Ordering::Relaxed);
        }
    }

    /// ON-FLUSH SEPARATION: reads a flush's entries (`iter`, internal-key order) and moves
    /// each large inline value the flush keeps to the value log, the entry then holding its
    /// pointer. The records are appended in chunks and synced before this returns, so the
    /// tables built from the entries never point at bytes a power loss can take; hold the
    /// guards until those tables are installed (garbage collection leaves the files alone).
    ///
    /// Which entries the flush keeps is decided as the flush's own [`EntryFilter`] with
    /// `oldest_snapshot` decides it: a version it drops stays inline (it never reaches a
    /// table), so an overwrite within one memtable writes the value log once.
    pub(crate) fn separate_for_flush(
        &self,
        iter: &mut dyn InternalIterator,
        oldest_snapshot: SeqNo,
    ) -> Result<(Entries, Vec<InFlight>)> {
        /// Record bytes gathered before one append.
        const CHUNK: usize = 4 << 20;
        let mut filter = EntryFilter::new(oldest_snapshot);
        let mut entries: Entries = Vec::new();
        let mut chunk = SeparationChunk::default();
        let mut in_flight = Vec::new();
        iter.seek_to_first();
        while iter.valid() {
            let (ikey, value) = (iter.key(), iter.value());
            let keep = filter.keep(ikey, |_| false);
            match key::parse_internal_key(ikey) {
                Some(p) if keep && p.kind == ValueKind::Value => match decode_stored(value) {
                    Some(Stored::Inline(v)) if v.len() >= self.threshold => {
                        chunk.add(entries.len(), p.user_key, v);
                    }
                    _ => {}
                },
                _ => {}
            }
            entries.push((ikey.to_vec(), value.to_vec()));
            if chunk.records.bytes.len() >= CHUNK {
                in_flight.push(self.append_chunk(&mut chunk, &mut entries)?);
            }
            iter.next();
        }
        iter.status()?;
        if !chunk.records.is_empty() {
            in_flight.push(self.append_chunk(&mut chunk, &mut entries)?);
        }
        if !in_flight.is_empty() && !self.sync_each_append {
            self.sync_appended()?;
        }
        Ok((entries, in_flight))
    }

    /// Appends `chunk`'s records and puts their pointers in `entries`; empties the chunk.
    fn append_chunk(&self, chunk: &mut SeparationChunk, entries: &mut Entries) -> Result<InFlight> {
        let (placed, in_flight) = self.append_records(&chunk.records)?;
        let c = &self.counters;
        for (&at, p) in chunk.at.iter().zip(placed) {
            let value_len = entries[at].1.len() - 1;
            entries[at].1 = p.encode();
            c.separated_items.fetch_add(1, Ordering::Relaxed);
            c.separated_bytes
                .fetch_add(value_len as u64, Ordering::Relaxed);
        }
        chunk.records.clear();
        chunk.at.clear();
        Ok(in_flight)
    }

    /// Appends `records` to the active file with one append (not synced, unless
    /// `sync_each_append`), starting a new file when the active one is full. Returns a
    /// pointer per record and the in-flight guard.
    fn append_records(&self, records: &Records) -> Result<(Vec<ValuePointer>, InFlight)> {
        let Records {
            bytes: records,
            spans,
        } = records;
        let mut guard = self.active.lock();
        if guard
            .as_ref()
            .is_none_or(|a| a.size >= self.file_limit || a.torn)
        {
            self.start_file(&mut guard)?;
        }
        let active = guard.as_mut().expect("created above");
        let base = active.size;
        // NB: counted in flight before the append, so a failed append's bytes are counted
        // too (the file's size says they may be there).
        let in_flight = self.files.appended(active.number, records.len() as u64);
        if let Err(e) = active.file.append(records) {
            // NB: a device that filled up part way kept some of the bytes, past `size`:
            // records appended after them would be read at the wrong offsets, and collection
            // would meet a cut record mid-file. In a new file they stay this one's torn tail.
            active.torn = true;
            return Err(e);
        }
        active.size += records.len() as u64;
        if self.sync_each_append {
            active.file.sync()?;
            self.counters.syncs.fetch_add(1, Ordering::Relaxed);
            active.sync.mark_synced(active.size);
        }
        active.sync.note_appended(active.size);
        self.tiers
            .count_write(self.tier, WriteKind::Flush, records.len() as u64);
        self.counters
            .file_bytes
            .fetch_add(records.len() as u64, Ordering::Relaxed);
        let placed = spans
            .iter()
            .map(|&(at, len)| ValuePointer {
                file: active.number,
                offset: base + at,
                len: len as u32,
            })
            .collect();
        Ok((placed, in_flight))
    }

    /// Closes the active file, if any, making all of it durable, and starts a new one.
    ///
    /// NB: the old file is synced whole here, so a writer that makes the value log durable
    /// needs to sync only the active file (`sync_appended`).
    fn start_file(&self, guard: &mut Option<Active>) -> Result<()> {
        if let Some(old) = guard.as_ref() {
            old.sync.sync_to(old.size, &self.counters.syncs)?;
        }
        let number = self.next_number.fetch_add(1, Ordering::Relaxed);
        let path = self.dir.join(file_name(number));
        let file = self.fs.create(&path)?;
        // The new file's name is durable before any pointer into it.
        self.fs.sync_dir(&self.dir)?;
        let sync_handle = if self.sync_each_append {
            None
        } else {
            Some(self.fs.open_append(&path)?)
        };
        let sync = Arc::new(FileSync::new(path, sync_handle, 0));
        if let Some(old) = guard.take() {
            old.file.close()?;
        }
        *self.current.lock() = Some(Arc::clone(&sync));
        *guard = Some(Active {
            number,
            file,
            size: 0,
            sync,
            torn: false,
        });
        self.active_number.store(number, Ordering::Release);
        Ok(())
    }

    /// Makes what writes appended durable: [`ValueLog::sync_appended`], or nothing with
    /// on-flush separation, whose writes append nothing (a collector's copies are synced
    /// before its rewrite is logged, a flush's before its tables are installed). Called by
    /// `Sync` writes after their WAL write, and before a memtable is sealed.
    pub(crate) fn sync_write_appends(&self) -> Result<()> {
        if self.on_flush {
            return Ok(());
        }
        self.sync_appended()
    }

    /// Makes every record appended so far durable, sharing `fdatasync`s with concurrent
    /// callers (group sync) and holding no append lock while syncing: see
    /// `docs/value-log.md` ("Durability and syncs").
    pub(crate) fn sync_appended(&self) -> Result<()> {
        // NB: files before the active one were synced whole when it started.
        let Some(sync) = self.current.lock().clone() else {
            return Ok(());
        };
        sync.sync_to(sync.appended(), &self.counters.syncs)
    }

    /// A reader of value-log file `number`, cached unless `reopen`.
    fn reader(&self, number: u64, reopen: bool) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(r) = self.readers.lock().get(&number).filter(|_| !reopen) {
            return Ok(Arc::clone(r));
        }
        let r = self.fs.open_read(&self.dir.join(file_name(number)))?;
        self.readers.lock().insert(number, Arc::clone(&r));
        Ok(r)
    }

    /// The user value of a tagged LSM value `stored` of `key`: the inline bytes, or the
    /// value-log record the pointer names, read with one read and checked.
    pub(crate) fn resolve(&self, key: &[u8], stored: &[u8]) -> Result<Vec<u8>> {
        match decode_stored(stored) {
            Some(Stored::Inline(v)) => Ok(v.to_vec()),
            Some(Stored::Pointer(p)) => self.read_pointer(key, p),
            None => Err(Error::corruption(
                &self.dir,
                0,
                format!("malformed split value of key {key:?}"),
            )),
        }
    }

    fn read_pointer(&self, key: &[u8], p: ValuePointer) -> Result<Vec<u8>> {
        let value = self.fetch_record(key, p)?;
        self.counters.reads.fetch_add(1, Ordering::Relaxed);
        Ok(value)
    }

    /// Reads and checks the record `p` names (not counted as a read).
    fn fetch_record(&self, key: &[u8], p: ValuePointer) -> Result<Vec<u8>> {
        let path = self.dir.join(file_name(p.file));
        let corrupt = |what: &str| Error::corruption(&path, p.offset, what);
        let end = p.offset + p.len as u64;
        let mut reader = self.reader(p.file, false);
        if reader.as_ref().is_ok_and(|r| end > r.size()) {
            // NB: a cached reader knows the size its file had when it was opened, and the
            // active file has grown since: open it again.
            reader = self.reader(p.file, true);
        }
        let reader = match reader {
            Ok(r) => r,
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                return Err(corrupt("value-log file named by a pointer is missing"));
            }
            Err(e) => return Err(e),
        };
        if end > reader.size() {
            return Err(corrupt("value-log pointer past the end of its file"));
        }
        let mut rec = vec![0; p.len as usize];
        reader.read_exact_at(p.offset, &mut rec)?;
        let (k, v) = decode_record(&rec).map_err(corrupt)?;
        if k != key {
            return Err(corrupt("value-log record belongs to another key"));
        }
        Ok(v.to_vec())
    }

    /// Counts the record a dropped LSM value points to, if it is a pointer, as garbage.
    ///
    /// NB: counted in memory since open. A compaction that re-merges entries a crash left in
    /// two tables (chunked install) counts the duplicate's record although the kept copy still
    /// points to it; garbage collection will check liveness against the LSM, not this count.
    pub(crate) fn note_dropped(&self, stored: &[u8]) {
        if let Some(Stored::Pointer(p)) = decode_stored(stored) {
            let c = &self.counters;
            c.garbage_items.fetch_add(1, Ordering::Relaxed);
            c.garbage_bytes.fetch_add(p.len as u64, Ordering::Relaxed);
            self.files.add_garbage(p.file, p.len as u64);
        }
    }

    /// The counters as `Stats` fields (the rest left at their defaults).
    pub(crate) fn stats(&self) -> crate::stats::Stats {
        let c = &self.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (bytes, garbage) = self.files.totals();
        let mut file_bytes = 0;
        for name in self.fs.list_dir(&self.dir).unwrap_or_default() {
            if parse_file_name(&name).is_some() {
                file_bytes += self.fs.file_size(&self.dir.join(&name)).unwrap_or(0);
            }
        }
        crate::stats::Stats {
            split_inline_items: load(&c.inline_items),
            split_inline_bytes: load(&c.inline_bytes),
            split_separated_items: load(&c.separated_items),
            split_separated_bytes: load(&c.separated_bytes),
            vlog_bytes_written: load(&c.file_bytes),
            vlog_reads: load(&c.reads),
            vlog_file_bytes: file_bytes,
            vlog_garbage_items: load(&c.garbage_items),
            vlog_garbage_bytes: load(&c.garbage_bytes),
            vlog_live_bytes: bytes - garbage,
            vlog_gc_runs: load(&c.gc_runs),
            vlog_gc_bytes_rewritten: load(&c.gc_bytes_rewritten),
            vlog_gc_files_deleted: load(&c.gc_files_deleted),
            vlog_syncs: load(&c.syncs),
            ..Default::default()
        }
    }

    /// Saves collection's state for the next open (best effort: every field is a hint);
    /// `bar` says which collected files' garbage-making writes are durable.
    pub(crate) fn close(&self, bar: DeleteBar) {
        if !self.read_only {
            let _ = self.save_gc_state(&self.gc.lock(), bar);
        }
    }

    /// Checks a stored value of `key`; true if it is a pointer (for `Db::check_values`).
    pub(crate) fn check(&self, key: &[u8], stored: &[u8]) -> Result<bool> {
        let pointer = matches!(decode_stored(stored), Some(Stored::Pointer(_)));
        self.resolve(key, stored).map(|_| pointer)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins docs/value-log.md: a record is `crc32c(rest) | key_len u32 | value_len u32 | key |
    /// value`, little-endian, and a pointer is tag 1 then three varints.
    #[test]
    fn record_and_pointer_bytes_are_pinned() {
        let mut rec = Vec::new();
        encode_record(&mut rec, b"k1", b"val");
        let rest = [2, 0, 0, 0, 3, 0, 0, 0, b'k', b'1', b'v', b'a', b'l'];
        let mut want = crc32c::crc32c(&rest).to_le_bytes().to_vec();
        want.extend_from_slice(&rest);
        assert_eq!(rec, want);
        assert_eq!(decode_record(&rec), Ok((&b"k1"[..], &b"val"[..])));
        let p = ValuePointer {
            file: 3,
            offset: 300,
            len: 17,
        };
        assert_eq!(p.encode(), [1, 3, 0xac, 0x02, 17]);
        assert_eq!(decode_stored(&[0, b'x']), Some(Stored::Inline(b"x")));
    }

    #[test]
    fn pointer_round_trips_through_its_tag() {
        let p = ValuePointer {
            file: 7,
            offset: 1 << 33,
            len: 4108,
        };
        assert_eq!(decode_stored(&p.encode()), Some(Stored::Pointer(p)));
        assert_eq!(decode_stored(&[0, 9, 9]), Some(Stored::Inline(&[9, 9])));
        assert_eq!(decode_stored(&[2]), None);
        assert_eq!(decode_stored(&[]), None);
        let mut bad = p.encode();
        bad.push(0);
        assert_eq!(decode_stored(&bad), None);
    }

    #[test]
    fn record_checks_length_and_checksum() {
        let mut rec = Vec::new();
        encode_record(&mut rec, b"key", b"value");
        assert_eq!(rec.len(), RECORD_HEADER + 8);
        assert_eq!(decode_record(&rec), Ok((&b"key"[..], &b"value"[..])));
        let mut flipped = rec.clone();
        flipped[RECORD_HEADER + 4] ^= 1;
        assert!(decode_record(&flipped).unwrap_err().contains("checksum"));
        assert!(decode_record(&rec[..rec.len() - 1])
            .unwrap_err()
            .contains("length"));
        assert!(decode_record(&rec[..5]).unwrap_err().contains("header"));
    }

    #[test]
    fn a_pointer_whose_range_overflows_is_malformed() {
        let mut v = vec![TAG_POINTER];
        put_varint(&mut v, 1);
        put_varint(&mut v, u64::MAX - 3);
        put_varint(&mut v, 17);
        assert_eq!(decode_stored(&v), None);
        let last = ValuePointer {
            file: 1,
            offset: u64::MAX - 17,
            len: 17,
        };
        assert_eq!(decode_stored(&last.encode()), Some(Stored::Pointer(last)));
    }

    #[test]
    fn file_names_round_trip() {
        assert_eq!(file_name(12), "000012.vlog");
        assert_eq!(parse_file_name("000012.vlog"), Some(12));
        assert_eq!(parse_file_name("000012.sst"), None);
    }
}
