//! The checksummed record format shared by the write-ahead log and the MANIFEST.
//!
//! A log file is a plain sequence of records: no file header, no block padding, and a record
//! never continues into another file. Each record is a 20-byte header followed by its payload
//! (all integers little-endian; the full specification is `docs/log-format.md`):
//!
//! ```text
//! offset  size  field
//! 0       4     header_crc      CRC32C of bytes 4..20 of this header
//! 4       4     length          payload length, at most MAX_RECORD_LEN (1 GiB)
//! 8       8     synced_through  file offset through which the writer knew the file was synced
//! 16      4     payload_crc     CRC32C of the payload
//! 20      len   payload
//! ```
//!
//! `synced_through` is what lets recovery tell a crash from corruption. When the record at
//! offset X fails a check, the reader looks further on for valid records. If one of them says
//! the file had been synced past X, the damaged bytes were durable before that record was
//! written, so losing them is not something a crash does: the log is corrupt. Otherwise the
//! damage is what a crash leaves behind (a torn or partly lost unsynced tail) and, in the
//! default [`RecoveryMode`], the log simply ends at X. The search for later records skips the
//! damaged record whole when its header is valid (its length can be trusted) and tries every
//! byte offset when it is not. The other modes: `AbsoluteConsistency` fails on any damage,
//! `PointInTime` stops at the first damage without failing, `SkipAnyCorruptedRecords` skips
//! damaged bytes and keeps reading.
//!
//! Invariants:
//! - INVARIANT: a record is all-or-nothing: the reader yields a payload only when both
//!   checksums match, and never yields part of a record.
//! - INVARIANT: `synced_through` never decreases from one record to the next, and never exceeds
//!   the record's own offset (the writer cannot have synced bytes it had not yet written). The
//!   reader rejects a record that breaks the second rule, which limits what record-shaped bytes
//!   embedded in a payload can claim about the bytes before them.
//! - INVARIANT: the writer syncs only between records, so a sync watermark is always a record
//!   boundary.
//!
//! Device assumptions: a sector write may tear; after a power loss, any subset of the pages
//! written since the last successful sync may be lost or hold stale bytes; bytes covered by a
//! successful sync survive intact.

use crate::coding::{crc, get_u32, get_u64, put_u32, put_u64};
use crate::env::{read_file, BufferedFile, Fs};
use crate::error::{Error, Result};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;

/// Size of the header in front of every payload.
pub const RECORD_HEADER_LEN: usize = 20;

/// The largest payload a record may carry (1 GiB).
pub const MAX_RECORD_LEN: usize = 1 << 30;

// Byte offsets of the header fields; part of the on-disk format, do not change.
const LENGTH_AT: usize = 4;
const SYNCED_THROUGH_AT: usize = 8;
const PAYLOAD_CRC_AT: usize = 16;

// ---------------------------------------------------------------------------------------------
// Encoding
// ---------------------------------------------------------------------------------------------

/// Appends the header of a record carrying `payload`. The caller has checked the length.
fn encode_header(dst: &mut Vec<u8>, payload: &[u8], synced_through: u64) {
    debug_assert!(payload.len() <= MAX_RECORD_LEN);
    let start = dst.len();
    put_u32(dst, 0); // header_crc, filled in once the rest of the header is known
    put_u32(dst, payload.len() as u32);
    put_u64(dst, synced_through);
    put_u32(dst, crc(payload));
    let header_crc = crc(&dst[start + LENGTH_AT..]);
    dst[start..start + LENGTH_AT].copy_from_slice(&header_crc.to_le_bytes());
}

/// Rejects payloads the format cannot carry.
fn check_len(len: usize) -> Result<()> {
    if len > MAX_RECORD_LEN {
        return Err(Error::invalid(format!(
            "log record of {len} bytes exceeds the maximum of {MAX_RECORD_LEN} bytes"
        )));
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------------------------

/// Appends records to one log file.
///
/// Appends are buffered ([`BufferedFile`]); [`flush`](Self::flush) hands them to the OS and
/// [`sync`](Self::sync) makes them durable and advances the watermark that later records carry.
/// After any failed write, flush or sync the writer is poisoned: every later call fails with
/// [`Error::Closed`], because what reached the file is unknown and a failed `fdatasync` cannot
/// be retried safely. Reopen (start a new log file) to continue.
pub struct LogWriter {
    file: BufferedFile,
    path: PathBuf,
    /// Bytes of the file known durable; carried in the header of every record appended.
    synced_through: u64,
    /// Reused buffer for encoding headers.
    header: Vec<u8>,
    failed: bool,
}

impl LogWriter {
    /// Writes records to `file`, a newly created log. Nothing in it is assumed durable yet.
    pub fn new(file: BufferedFile, path: PathBuf) -> Self {
        Self::with_synced(file, path, 0)
    }

    /// Appends to an existing log whose first `synced_through` bytes are known durable
    /// (clamped to the file's size).
    ///
    /// NB: only append to a log that reads cleanly to its end (`LogTail::damage` is `None`).
    /// Records appended after a damaged tail would claim those damaged bytes had been synced,
    /// and the next recovery would report the old crash damage as corruption. Start a new log
    /// file instead.
    pub fn with_synced(file: BufferedFile, path: PathBuf, synced_through: u64) -> Self {
        let synced_through = synced_through.min(file.size());
        LogWriter {
            file,
            path,
            synced_through,
            header: Vec::with_capacity(RECORD_HEADER_LEN),
            failed: false,
        }
    }

    /// Appends one record (buffered) and returns its offset in the file. The header carries
    /// the current `synced_through` watermark. `InvalidArgument` if the payload is over
    /// [`MAX_RECORD_LEN`].
    pub fn add_record(&mut self, payload: &[u8]) -> Result<u64> {
        check_len(payload.len())?;
        self.guarded(|w| w.append_record(payload))
    }

    /// Appends several records back to back (group commit). Every length is checked before
    /// anything is written, so an oversized payload leaves the log untouched.
    pub fn add_records(&mut self, payloads: &[&[u8]]) -> Result<()> {
        for payload in payloads {
            check_len(payload.len())?;
        }
        self.guarded(|w| {
            for payload in payloads {
                w.append_record(payload)?;
            }
            Ok(())
        })
    }

    /// Hands buffered bytes to the OS: they survive a process crash, not a power loss.
    pub fn flush(&mut self) -> Result<()> {
        self.guarded(|w| w.file.flush())
    }

    /// Flushes and says no record will follow, while the log stays open to be synced (a
    /// sealed WAL): a file system whose lengths run ahead cuts the file back to its records.
    pub fn seal(&mut self) -> Result<()> {
        self.guarded(|w| w.file.seal())
    }

    /// Flushes and makes every record appended so far durable; on success later records carry
    /// the new size as their `synced_through`.
    pub fn sync(&mut self) -> Result<()> {
        self.guarded(|w| {
            w.file.sync()?;
            w.synced_through = w.file.size();
            Ok(())
        })
    }

    /// The file's size, buffered bytes included: the offset the next record will get.
    pub fn size(&self) -> u64 {
        self.file.size()
    }

    /// The durable watermark the next record's header will carry.
    pub fn synced_through(&self) -> u64 {
        self.synced_through
    }

    /// Flushes and closes the file. Does not sync: call [`sync`](Self::sync) first if the tail
    /// must be durable. A poisoned writer drops its buffer unwritten and returns the error.
    pub fn close(self) -> Result<()> {
        if self.failed {
            return Err(self.poisoned());
        }
        self.file.close()
    }

    fn append_record(&mut self, payload: &[u8]) -> Result<u64> {
        let offset = self.file.size();
        self.header.clear();
        encode_header(&mut self.header, payload, self.synced_through);
        self.file.append(&self.header)?;
        self.file.append(payload)?;
        Ok(offset)
    }

    /// Runs an I/O step unless the writer is poisoned, and poisons it if the step fails.
    fn guarded<T>(&mut self, op: impl FnOnce(&mut Self) -> Result<T>) -> Result<T> {
        if self.failed {
            return Err(self.poisoned());
        }
        let result = op(self);
        self.failed = result.is_err();
        result
    }

    fn poisoned(&self) -> Error {
        Error::Closed(format!(
            "log writer for {} failed an earlier write or sync; open a new log to continue",
            self.path.display()
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Recovery modes
// ---------------------------------------------------------------------------------------------

/// What the reader does when a record fails its checks. Named in options by the kebab-case
/// names (`tolerate-corrupted-tail`, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RecoveryMode {
    /// Damage a crash can explain (nothing after it says it had been synced) ends the log
    /// quietly; damage to bytes that had been synced is `Corruption`.
    #[default]
    TolerateCorruptedTail,
    /// Any damaged or partial record, even a torn tail, is `Corruption`.
    AbsoluteConsistency,
    /// Stop at the first damaged record and never fail; whether synced data follows the damage
    /// is reported in [`LogTail::synced_data_after_damage`].
    PointInTime,
    /// Salvage: skip damaged bytes, resume at the next valid record and keep going. The result
    /// may not be a prefix of what was written; meant for disaster recovery.
    SkipAnyCorruptedRecords,
}

impl RecoveryMode {
    /// Every mode, in declaration order.
    pub const ALL: [RecoveryMode; 4] = [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::PointInTime,
        RecoveryMode::SkipAnyCorruptedRecords,
    ];

    /// The kebab-case name used in options files.
    pub fn name(self) -> &'static str {
        match self {
            RecoveryMode::TolerateCorruptedTail => "tolerate-corrupted-tail",
            RecoveryMode::AbsoluteConsistency => "absolute-consistency",
            RecoveryMode::PointInTime => "point-in-time",
            RecoveryMode::SkipAnyCorruptedRecords => "skip-any-corrupted-records",
        }
    }
}

impl fmt::Display for RecoveryMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for RecoveryMode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        RecoveryMode::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = RecoveryMode::ALL.iter().map(|m| m.name()).collect();
                Error::invalid(format!(
                    "unknown log recovery mode '{s}' (expected one of: {})",
                    names.join(", ")
                ))
            })
    }
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// The decoded fields of a record header.
struct Header {
    header_crc: u32,
    length: u32,
    synced_through: u64,
    payload_crc: u32,
}

impl Header {
    fn parse(h: &[u8]) -> Option<Header> {
        Some(Header {
            header_crc: get_u32(h)?,
            length: get_u32(h.get(LENGTH_AT..)?)?,
            synced_through: get_u64(h.get(SYNCED_THROUGH_AT..)?)?,
            payload_crc: get_u32(h.get(PAYLOAD_CRC_AT..)?)?,
        })
    }
}

/// A record that passed every check, by its position in the file.
#[derive(Debug, Clone, Copy)]
struct Record {
    offset: usize,
    len: usize,
    synced_through: u64,
}

impl Record {
    fn payload_start(&self) -> usize {
        self.offset + RECORD_HEADER_LEN
    }

    fn end(&self) -> usize {
        self.payload_start() + self.len
    }
}

/// Why bytes at some offset are not a valid record. No allocation: the byte scan builds one of
/// these at almost every position it tries.
#[derive(Debug, Clone, Copy)]
enum Defect {
    TruncatedHeader(usize),
    HeaderChecksum,
    TooLong(usize),
    SyncedAhead(u64),
    PastEnd(usize),
    PayloadChecksum,
}

impl fmt::Display for Defect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Defect::TruncatedHeader(n) => write!(
                f,
                "record header cut short by end of file ({n} of {RECORD_HEADER_LEN} bytes)"
            ),
            Defect::HeaderChecksum => f.write_str("header checksum mismatch"),
            Defect::TooLong(n) => {
                write!(f, "record length {n} exceeds the maximum {MAX_RECORD_LEN}")
            }
            Defect::SyncedAhead(s) => {
                write!(f, "synced_through {s} is past the record's own offset")
            }
            Defect::PastEnd(n) => write!(f, "record length {n} runs past end of file"),
            Defect::PayloadChecksum => f.write_str("payload checksum mismatch"),
        }
    }
}

/// A failed check and where a later record may start: right after this one when its header
/// is valid (the length is trustworthy), one byte on when it is not.
struct Bad {
    defect: Defect,
    resume: usize,
}

/// Checks the record that would start at `offset`.
fn check_at(data: &[u8], offset: usize) -> Result<Record, Bad> {
    let bad = |defect, resume| Err(Bad { defect, resume });
    let rest = data.get(offset..).unwrap_or_default();
    let header = rest.get(..RECORD_HEADER_LEN);
    let Some((bytes, h)) = header.and_then(|b| Some((b, Header::parse(b)?))) else {
        return bad(Defect::TruncatedHeader(rest.len()), data.len());
    };
    let next_byte = offset + 1;
    if crc(&bytes[LENGTH_AT..]) != h.header_crc {
        return bad(Defect::HeaderChecksum, next_byte);
    }
    let len = h.length as usize;
    if len > MAX_RECORD_LEN {
        return bad(Defect::TooLong(len), next_byte);
    }
    if h.synced_through > offset as u64 {
        return bad(Defect::SyncedAhead(h.synced_through), next_byte);
    }
    let synced_through = h.synced_through;
    let record = Record {
        offset,
        len,
        synced_through,
    };
    // NB: a genuine header whose payload runs past the end owns every byte up to the end, so
    // nothing after it can be a genuine record.
    let Some(payload) = data.get(record.payload_start()..record.end()) else {
        return bad(Defect::PastEnd(len), data.len());
    };
    if crc(payload) != h.payload_crc {
        return bad(Defect::PayloadChecksum, record.end());
    }
    Ok(record)
}

/// The first valid record starting at or after `from`, trying every byte offset.
fn find_valid(data: &[u8], from: usize) -> Option<Record> {
    let last = data.len().checked_sub(RECORD_HEADER_LEN)?;
    (from..=last).find_map(|p| check_at(data, p).ok())
}

/// One step of walking the log from a record boundary.
enum Step {
    End,
    Record(Record),
    /// The bytes from `offset` are damaged; the next valid record (or the end) is at `next`.
    Damage {
        offset: usize,
        defect: Defect,
        next: usize,
    },
}

fn step(data: &[u8], pos: usize) -> Step {
    if pos >= data.len() {
        return Step::End;
    }
    match check_at(data, pos) {
        Ok(record) => Step::Record(record),
        Err(bad) => Step::Damage {
            offset: pos,
            defect: bad.defect,
            next: find_valid(data, bad.resume).map_or(data.len(), |r| r.offset),
        },
    }
}

/// True if a valid record at or after `from` says the file had been synced past `damaged`.
fn synced_past(data: &[u8], damaged: usize, mut from: usize) -> bool {
    loop {
        match step(data, from) {
            Step::End => return false,
            Step::Record(r) if r.synced_through > damaged as u64 => return true,
            Step::Record(r) => from = r.end(),
            Step::Damage { next, .. } => from = next,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------------------------

/// How a log ended, as seen by the reader once it returned `Ok(None)` or an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LogTail {
    /// Offset just past the last record returned (the file size when the log is clean).
    pub clean_end: u64,
    /// Bytes not returned as records: everything from the damage on when the reader stopped
    /// there, the skipped ranges in `SkipAnyCorruptedRecords`.
    pub dropped_bytes: u64,
    /// The first damaged record: its offset and the check it failed.
    pub damage: Option<(u64, String)>,
    /// A valid record after the damage says the damaged bytes had been synced: a crash cannot
    /// explain the damage.
    pub synced_data_after_damage: bool,
}

/// Where the reader is.
enum ReadState {
    Reading,
    Finished,
    Failed(Error),
}

/// Reads the records of one log file, held in memory whole.
pub struct LogReader {
    data: Vec<u8>,
    path: PathBuf,
    mode: RecoveryMode,
    /// Offset of the next record to check; always a record boundary.
    pos: usize,
    tail: LogTail,
    state: ReadState,
    /// The largest `synced_through` of the records returned so far.
    max_synced_through: u64,
}

impl LogReader {
    /// Reads the whole file at `path`.
    pub fn open(fs: &dyn Fs, path: &Path, mode: RecoveryMode) -> Result<LogReader> {
        let data = read_file(fs, path)?;
        Ok(Self::from_bytes(data, path.to_path_buf(), mode))
    }

    /// Reads records from `data`, the contents of the log file at `path` (used in errors).
    pub fn from_bytes(data: Vec<u8>, path: PathBuf, mode: RecoveryMode) -> LogReader {
        LogReader {
            data,
            path,
            mode,
            pos: 0,
            tail: LogTail::default(),
            state: ReadState::Reading,
            max_synced_through: 0,
        }
    }

    /// The next record as `(offset, payload)`; `Ok(None)` at the clean end or where the
    /// recovery mode ends the log. After an error, every later call returns it again.
    pub fn next_record(&mut self) -> Result<Option<(u64, &[u8])>> {
        loop {
            match &self.state {
                ReadState::Reading => {}
                ReadState::Finished => return Ok(None),
                ReadState::Failed(e) => return Err(e.duplicate()),
            }
            match step(&self.data, self.pos) {
                Step::End => self.state = ReadState::Finished,
                Step::Record(r) => {
                    self.accept(r);
                    return Ok(Some((
                        r.offset as u64,
                        &self.data[r.payload_start()..r.end()],
                    )));
                }
                Step::Damage {
                    offset,
                    defect,
                    next,
                } => self.on_damage(offset, defect, next),
            }
        }
    }

    /// How the log ended; complete once `next_record` returned `Ok(None)` or an error.
    pub fn tail(&self) -> LogTail {
        self.tail.clone()
    }

    /// The path this reader reports in errors.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The largest `synced_through` among the records returned so far: above zero once a
    /// record written after a successful sync of this file was read.
    pub fn max_synced_through(&self) -> u64 {
        self.max_synced_through
    }

    fn accept(&mut self, r: Record) {
        self.max_synced_through = self.max_synced_through.max(r.synced_through);
        self.pos = r.end();
        self.tail.clean_end = r.end() as u64;
        if let Some((at, _)) = self.tail.damage {
            // Only reached in SkipAnyCorruptedRecords; the other modes stop at damage.
            self.tail.synced_data_after_damage |= r.synced_through > at;
        }
    }

    fn on_damage(&mut self, offset: usize, defect: Defect, next: usize) {
        if self.tail.damage.is_none() {
            self.tail.damage = Some((offset as u64, defect.to_string()));
        }
        if self.mode == RecoveryMode::SkipAnyCorruptedRecords {
            self.tail.dropped_bytes += (next - offset) as u64;
            self.pos = next;
            return;
        }
        self.tail.dropped_bytes = (self.data.len() - offset) as u64;
        let synced = synced_past(&self.data, offset, next);
        self.tail.synced_data_after_damage = synced;
        let fatal = match self.mode {
            RecoveryMode::AbsoluteConsistency => true,
            RecoveryMode::TolerateCorruptedTail => synced,
            RecoveryMode::PointInTime | RecoveryMode::SkipAnyCorruptedRecords => false,
        };
        self.state = if fatal {
            let err = Error::corruption(&self.path, offset as u64, defect.to_string());
            ReadState::Failed(err)
        } else {
            ReadState::Finished
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{FileLock, PositionalFile, RandomAccessFile, WritableFile};
    use std::sync::{Arc, Mutex};

    // --- an in-memory file, so these tests need no backend -----------------------------------

    #[derive(Default)]
    struct Disk {
        data: Vec<u8>,
        syncs: usize,
        fail: bool,
    }

    #[derive(Clone, Default)]
    struct MemFile(Arc<Mutex<Disk>>);

    impl MemFile {
        fn bytes(&self) -> Vec<u8> {
            self.0.lock().unwrap().data.clone()
        }

        fn check(&self, op: &'static str) -> Result<()> {
            if self.0.lock().unwrap().fail {
                return Err(Error::io(op, "mem", std::io::Error::other("injected")));
            }
            Ok(())
        }
    }

    impl WritableFile for MemFile {
        fn append(&mut self, data: &[u8]) -> Result<()> {
            self.check("write")?;
            self.0.lock().unwrap().data.extend_from_slice(data);
            Ok(())
        }

        fn sync(&mut self) -> Result<()> {
            self.check("fdatasync")?;
            self.0.lock().unwrap().syncs += 1;
            Ok(())
        }

        fn size(&self) -> u64 {
            self.0.lock().unwrap().data.len() as u64
        }

        fn close(self: Box<Self>) -> Result<()> {
            Ok(())
        }
    }

    /// A file system holding one read-only file, for `LogReader::open`.
    struct OneFileFs(PathBuf, Vec<u8>);

    struct MemRead(Vec<u8>);

    impl RandomAccessFile for MemRead {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            let start = offset as usize;
            let src = self.0.get(start..start + buf.len());
            let eof = || Error::io("read", "mem", std::io::ErrorKind::UnexpectedEof.into());
            buf.copy_from_slice(src.ok_or_else(eof)?);
            Ok(())
        }

        fn size(&self) -> u64 {
            self.0.len() as u64
        }
    }

    fn unsupported<T>() -> Result<T> {
        Err(Error::invalid("not supported by OneFileFs"))
    }

    impl Fs for OneFileFs {
        fn create(&self, _: &Path) -> Result<Box<dyn WritableFile>> {
            unsupported()
        }
        fn open_append(&self, _: &Path) -> Result<Box<dyn WritableFile>> {
            unsupported()
        }
        fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
            if path != self.0 {
                return Err(Error::NotFound(path.display().to_string()));
            }
            Ok(Arc::new(MemRead(self.1.clone())))
        }
        fn exists(&self, path: &Path) -> bool {
            path == self.0
        }
        fn list_dir(&self, _: &Path) -> Result<Vec<String>> {
            unsupported()
        }
        fn create_dir_all(&self, _: &Path) -> Result<()> {
            unsupported()
        }
        fn remove_file(&self, _: &Path) -> Result<()> {
            unsupported()
        }
        fn rename(&self, _: &Path, _: &Path) -> Result<()> {
            unsupported()
        }
        fn sync_dir(&self, _: &Path) -> Result<()> {
            unsupported()
        }
        fn file_size(&self, _: &Path) -> Result<u64> {
            Ok(self.1.len() as u64)
        }
        fn lock(&self, _: &Path) -> Result<Box<dyn FileLock>> {
            unsupported()
        }
        fn open_positional(&self, _: &Path, _: u64) -> Result<Arc<dyn PositionalFile>> {
            unsupported()
        }
    }

    // --- helpers ----------------------------------------------------------------------------

    const LOG: &str = "000007.log";

    fn writer_with_capacity(capacity: usize) -> (LogWriter, MemFile) {
        let file = MemFile::default();
        let buffered = BufferedFile::new(Box::new(file.clone()), capacity);
        (LogWriter::new(buffered, PathBuf::from(LOG)), file)
    }

    fn writer() -> (LogWriter, MemFile) {
        writer_with_capacity(64)
    }

    type Records = Vec<(u64, Vec<u8>)>;

    /// Reads to the end; returns the records read before any error, the error, and the tail.
    fn read_all(data: &[u8], mode: RecoveryMode) -> (Records, Option<Error>, LogTail) {
        let mut reader = LogReader::from_bytes(data.to_vec(), PathBuf::from(LOG), mode);
        let mut records = Vec::new();
        loop {
            match reader.next_record() {
                Ok(Some((offset, payload))) => records.push((offset, payload.to_vec())),
                Ok(None) => return (records, None, reader.tail()),
                Err(e) => return (records, Some(e), reader.tail()),
            }
        }
    }

    /// Writes `payloads`, syncing after the records whose index is in `sync_after`.
    fn build(payloads: &[&[u8]], sync_after: &[usize]) -> (Vec<u8>, Records) {
        let (mut w, file) = writer();
        let mut written = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            written.push((w.add_record(p).unwrap(), p.to_vec()));
            if sync_after.contains(&i) {
                w.sync().unwrap();
            }
        }
        w.close().unwrap();
        (file.bytes(), written)
    }

    fn synced_through_at(data: &[u8], offset: u64) -> u64 {
        get_u64(&data[offset as usize + SYNCED_THROUGH_AT..]).unwrap()
    }

    fn assert_corruption_at(err: Option<Error>, offset: u64, what: &str) {
        match err {
            Some(Error::Corruption {
                file,
                offset: at,
                what: w,
            }) => {
                assert_eq!(file, PathBuf::from(LOG));
                assert_eq!(at, offset);
                assert!(w.contains(what), "{w:?} does not mention {what:?}");
            }
            other => panic!("expected corruption at {offset}, got {other:?}"),
        }
    }

    // --- tests ------------------------------------------------------------------------------

    #[test]
    fn round_trip_of_many_records_of_every_size() {
        let mut payloads: Vec<Vec<u8>> = vec![Vec::new(), b"x".to_vec(), vec![7; 3 << 20]];
        for i in 0..500u32 {
            payloads.push((0..i % 97).map(|b| (b as u8) ^ (i as u8)).collect());
        }
        payloads.push(Vec::new());
        let (mut w, file) = writer_with_capacity(4096);
        let mut offsets = Vec::new();
        for (i, p) in payloads.iter().enumerate() {
            offsets.push(w.add_record(p).unwrap());
            if i % 50 == 0 {
                w.sync().unwrap();
            }
        }
        w.flush().unwrap();
        assert_eq!(w.size(), file.bytes().len() as u64);
        let (records, err, tail) = read_all(&file.bytes(), RecoveryMode::AbsoluteConsistency);
        assert!(err.is_none());
        let expected: Records = offsets.into_iter().zip(payloads).collect();
        assert_eq!(records, expected);
        assert_eq!(
            tail,
            LogTail {
                clean_end: w.size(),
                ..LogTail::default()
            }
        );
    }

    #[test]
    fn golden_bytes_pin_the_format() {
        let (mut w, file) = writer();
        assert_eq!(w.add_record(b"a").unwrap(), 0);
        w.sync().unwrap();
        assert_eq!(w.add_record(b"tierkv").unwrap(), 21);
        w.close().unwrap();
        #[rustfmt::skip]
        let expected: &[u8] = &[
            // record 0: header_crc, length 1, synced_through 0, payload_crc, "a"
            0xb3, 0x1a, 0x81, 0xa9,  0x01, 0, 0, 0,  0, 0, 0, 0, 0, 0, 0, 0,
            0x30, 0x43, 0xd0, 0xc1,  b'a',
            // record 21: length 6, synced_through 21 (the sync after record 0)
            0x1e, 0x7d, 0x0b, 0x41,  0x06, 0, 0, 0,  0x15, 0, 0, 0, 0, 0, 0, 0,
            0xce, 0xf4, 0xf2, 0xc2,  b't', b'i', b'e', b'r', b'k', b'v',
        ];
        assert_eq!(file.bytes(), expected);
        let (records, err, _) = read_all(expected, RecoveryMode::AbsoluteConsistency);
        assert!(err.is_none());
        assert_eq!(records, vec![(0, b"a".to_vec()), (21, b"tierkv".to_vec())]);
    }

    #[test]
    fn add_records_writes_the_same_bytes_as_add_record() {
        let payloads: [&[u8]; 4] = [b"one", b"", &[9; 200], b"four"];
        let (mut single, single_file) = writer();
        for p in payloads {
            single.add_record(p).unwrap();
        }
        single.close().unwrap();
        let (mut group, group_file) = writer();
        group.add_records(&payloads).unwrap();
        group.close().unwrap();
        assert_eq!(single_file.bytes(), group_file.bytes());
    }

    #[test]
    fn oversized_payload_is_invalid_argument() {
        assert!(check_len(MAX_RECORD_LEN).is_ok());
        let err = check_len(MAX_RECORD_LEN + 1).unwrap_err();
        assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
    }

    #[test]
    fn sync_advances_the_watermark_in_the_next_header() {
        let (mut w, file) = writer();
        let a = w.add_record(b"before any sync").unwrap();
        w.sync().unwrap();
        let durable = w.size();
        let b = w.add_record(b"after the first sync").unwrap();
        let c = w.add_record(b"same watermark").unwrap();
        w.sync().unwrap();
        let d = w.add_record(b"after the second sync").unwrap();
        w.close().unwrap();
        let data = file.bytes();
        assert_eq!(synced_through_at(&data, a), 0);
        assert_eq!(synced_through_at(&data, b), durable);
        assert_eq!(synced_through_at(&data, c), durable);
        assert_eq!(synced_through_at(&data, d), d);
        assert_eq!(file.0.lock().unwrap().syncs, 2);
    }

    #[test]
    fn reopened_writer_carries_the_given_watermark() {
        let (data, _) = build(&[b"old"], &[0]);
        let file = MemFile::default();
        file.0.lock().unwrap().data = data.clone();
        let buffered = BufferedFile::new(Box::new(file.clone()), 64);
        let mut w = LogWriter::with_synced(buffered, PathBuf::from(LOG), u64::MAX);
        assert_eq!(
            w.synced_through(),
            data.len() as u64,
            "clamped to the file size"
        );
        let offset = w.add_record(b"new").unwrap();
        w.close().unwrap();
        assert_eq!(synced_through_at(&file.bytes(), offset), data.len() as u64);
        let (records, err, _) = read_all(&file.bytes(), RecoveryMode::AbsoluteConsistency);
        assert!(err.is_none());
        assert_eq!(records.len(), 2);
    }

    #[test]
    fn failed_write_poisons_the_writer() {
        let (mut w, file) = writer_with_capacity(8);
        w.add_record(b"fine").unwrap();
        file.0.lock().unwrap().fail = true;
        assert!(matches!(w.add_record(b"lost"), Err(Error::Io { .. })));
        file.0.lock().unwrap().fail = false;
        assert!(matches!(w.add_record(b"later"), Err(Error::Closed(_))));
        assert!(matches!(w.sync(), Err(Error::Closed(_))));
        assert!(matches!(w.close(), Err(Error::Closed(_))));
    }

    #[test]
    fn failed_sync_poisons_the_writer_and_keeps_the_watermark() {
        let (mut w, file) = writer();
        w.add_record(b"x").unwrap();
        file.0.lock().unwrap().fail = true;
        assert!(w.sync().is_err());
        assert_eq!(w.synced_through(), 0);
        file.0.lock().unwrap().fail = false;
        assert!(matches!(w.sync(), Err(Error::Closed(_))));
    }

    #[test]
    fn open_reads_through_the_fs() {
        let (data, written) = build(&[b"m1", b"m2"], &[]);
        let fs = OneFileFs(PathBuf::from(LOG), data);
        let mut reader = LogReader::open(&fs, Path::new(LOG), RecoveryMode::default()).unwrap();
        assert_eq!(reader.path(), Path::new(LOG));
        let mut records = Vec::new();
        while let Some((offset, payload)) = reader.next_record().unwrap() {
            records.push((offset, payload.to_vec()));
        }
        assert_eq!(records, written);
        assert!(LogReader::open(&fs, Path::new("other"), RecoveryMode::default()).is_err());
    }

    #[test]
    fn torn_tail_is_dropped_quietly_by_default_and_corruption_when_absolute() {
        let (data, written) = build(&[b"first", b"second", b"third record"], &[0, 1]);
        let last = written[2].0 as usize;
        for (cut, what) in [
            (last + 7, "cut short"),      // inside the header
            (last + 20 + 5, "runs past"), // inside the payload
        ] {
            let torn = &data[..cut];
            let (records, err, tail) = read_all(torn, RecoveryMode::TolerateCorruptedTail);
            assert!(err.is_none(), "{err:?}");
            assert_eq!(records, written[..2]);
            assert_eq!(tail.clean_end, last as u64);
            assert_eq!(tail.dropped_bytes, (cut - last) as u64);
            assert!(tail.damage.as_ref().unwrap().1.contains(what));
            assert!(!tail.synced_data_after_damage);

            let (records, err, _) = read_all(torn, RecoveryMode::AbsoluteConsistency);
            assert_eq!(records, written[..2]);
            assert_corruption_at(err, last as u64, what);
        }
    }

    #[test]
    fn damage_before_synced_data_is_corruption() {
        let (mut data, written) = build(&[b"r0", b"r1 payload", b"r2", b"r3"], &[1]);
        let r1 = written[1].0;
        assert!(synced_through_at(&data, written[2].0) > r1);
        data[r1 as usize + 22] ^= 0x04; // inside r1's payload

        let (records, err, tail) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert_eq!(records, written[..1]);
        assert_corruption_at(err, r1, "payload checksum mismatch");
        assert!(tail.synced_data_after_damage);
        let display = read_all(&data, RecoveryMode::default())
            .1
            .unwrap()
            .to_string();
        assert!(display.contains(LOG) && display.contains(&format!("offset {r1}")));

        let (records, err, tail) = read_all(&data, RecoveryMode::PointInTime);
        assert!(err.is_none());
        assert_eq!(records, written[..1]);
        assert_eq!(tail.clean_end, r1);
        assert_eq!(tail.damage.as_ref().map(|d| d.0), Some(r1));
        assert_eq!(tail.dropped_bytes, data.len() as u64 - r1);
        assert!(tail.synced_data_after_damage);
    }

    #[test]
    fn damaged_header_before_synced_data_is_corruption() {
        let (mut data, written) = build(&[b"r0", b"r1", b"r2"], &[1]);
        let r1 = written[1].0;
        data[r1 as usize + 5] ^= 0x80; // r1's length field
        let (_, err, _) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert_corruption_at(err, r1, "header checksum mismatch");
    }

    #[test]
    fn damage_followed_only_by_unsynced_records_is_a_torn_tail() {
        // r1 and r2 were written after the last sync: a crash may lose r1's page and keep r2's.
        let (mut data, written) = build(&[b"r0", b"r1 payload", b"r2"], &[0]);
        let r1 = written[1].0;
        data[r1 as usize..r1 as usize + 12].fill(0);
        let (records, err, tail) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(records, written[..1]);
        assert_eq!(tail.damage.as_ref().map(|d| d.0), Some(r1));
        assert_eq!(tail.dropped_bytes, data.len() as u64 - r1);
        assert!(!tail.synced_data_after_damage);
        let (_, err, _) = read_all(&data, RecoveryMode::AbsoluteConsistency);
        assert_corruption_at(err, r1, "header checksum mismatch");
    }

    #[test]
    fn salvage_mode_recovers_the_records_after_the_damage() {
        let payloads: [&[u8]; 5] = [b"r0", b"r1 payload", b"r2", b"r3 longer payload", b"r4"];
        let (clean, written) = build(&payloads, &[1, 3]);
        let (r1, r3) = (written[1].0 as usize, written[3].0 as usize);
        let mut data = clean.clone();
        data[r1 + 2] ^= 0xff; // r1's header: found again by the byte scan
        data[r3 + 24] ^= 0x01; // r3's payload: skipped by its valid length
        let (records, err, tail) = read_all(&data, RecoveryMode::SkipAnyCorruptedRecords);
        assert!(err.is_none());
        let expected: Records = [0, 2, 4].iter().map(|&i| written[i].clone()).collect();
        assert_eq!(records, expected);
        assert_eq!(tail.damage.as_ref().map(|d| d.0), Some(r1 as u64));
        let r1_len = written[2].0 as usize - r1;
        let r3_len = written[4].0 as usize - r3;
        assert_eq!(tail.dropped_bytes, (r1_len + r3_len) as u64);
        assert_eq!(tail.clean_end, data.len() as u64);
        assert!(tail.synced_data_after_damage);
    }

    #[test]
    fn zeros_are_never_a_valid_header() {
        assert_ne!(crc(&[0; RECORD_HEADER_LEN - 4]), 0);
        let zeros = vec![0u8; 4096];
        assert!(find_valid(&zeros, 0).is_none());
        let (records, err, tail) = read_all(&zeros, RecoveryMode::TolerateCorruptedTail);
        assert!(records.is_empty() && err.is_none());
        assert_eq!(tail.dropped_bytes, 4096);

        // A synced log followed by a preallocated (zeroed) tail.
        let (mut data, written) = build(&[b"a", b"b"], &[0, 1]);
        let end = data.len() as u64;
        data.resize(data.len() + 100, 0);
        let (records, err, tail) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert!(err.is_none());
        assert_eq!(records, written);
        assert_eq!(tail.clean_end, end);
        let (_, err, _) = read_all(&data, RecoveryMode::AbsoluteConsistency);
        assert_corruption_at(err, end, "header checksum mismatch");
    }

    #[test]
    fn record_claiming_a_watermark_past_itself_is_rejected() {
        let mut data = Vec::new();
        encode_header(&mut data, b"forged", 1);
        data.extend_from_slice(b"forged");
        let (records, err, _) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert!(records.is_empty() && err.is_none());
        let (_, err, _) = read_all(&data, RecoveryMode::AbsoluteConsistency);
        assert_corruption_at(err, 0, "past the record's own offset");
    }

    #[test]
    fn record_shaped_payload_is_not_evidence_of_a_sync() {
        // A payload embeds a record that would be valid where it sits and claims the file was
        // synced past the outer record's start; then the outer payload is torn. The embedded
        // record must not turn the torn tail into corruption: the outer header is valid, so
        // the search for later records resumes after the outer record, not inside it.
        let mut inner = vec![0u8; 30];
        encode_header(&mut inner, b"evil", 50);
        inner.extend_from_slice(b"evil");
        let (mut data, written) = build(&[b"r0", &inner], &[]);
        let (outer, embedded) = (written[1].0, written[1].0 + 20 + 30);
        assert!(
            outer < 50 && 50 <= embedded,
            "the embedded record looks genuine where it sits"
        );
        assert!(check_at(&data, embedded as usize).is_ok());
        data[outer as usize + 20 + 5] ^= 0x01; // before the embedded record
        let (records, err, tail) = read_all(&data, RecoveryMode::TolerateCorruptedTail);
        assert!(err.is_none(), "{err:?}");
        assert_eq!(records, written[..1]);
        assert!(!tail.synced_data_after_damage);
    }

    #[test]
    fn flipping_any_byte_never_panics_and_is_always_detected() {
        let payloads: [&[u8]; 5] = [b"alpha", b"", b"gamma-gamma", b"d", b"epsilon!"];
        let (clean, written) = build(&payloads, &[1, 2]);
        let record_of = |b: usize| written.iter().rposition(|w| w.0 as usize <= b).unwrap();
        for byte in 0..clean.len() {
            for mask in [0x01, 0x80, 0xff] {
                let mut data = clean.clone();
                data[byte] ^= mask;
                let i = record_of(byte);
                let offset = written[i].0;
                let synced_later = written[i + 1..]
                    .iter()
                    .any(|w| synced_through_at(&clean, w.0) > offset);
                for mode in RecoveryMode::ALL {
                    let (records, err, tail) = read_all(&data, mode);
                    let ctx = format!("byte {byte} mask {mask:#x} mode {mode}");
                    assert_eq!(tail.damage.as_ref().map(|d| d.0), Some(offset), "{ctx}");
                    match mode {
                        RecoveryMode::SkipAnyCorruptedRecords => {
                            let mut expected = written.clone();
                            expected.remove(i);
                            assert_eq!(records, expected, "{ctx}");
                            assert!(err.is_none(), "{ctx}");
                        }
                        _ => {
                            assert_eq!(records, written[..i], "{ctx}");
                            assert_eq!(tail.synced_data_after_damage, synced_later, "{ctx}");
                            let fails = match mode {
                                RecoveryMode::AbsoluteConsistency => true,
                                RecoveryMode::TolerateCorruptedTail => synced_later,
                                _ => false,
                            };
                            assert_eq!(err.is_some(), fails, "{ctx}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn truncation_anywhere_is_a_torn_tail() {
        let (clean, written) = build(&[b"one", b"two two", b"", b"four"], &[0, 2]);
        for cut in 0..=clean.len() {
            let whole: Records = written
                .iter()
                .filter(|w| w.0 as usize + 20 + w.1.len() <= cut)
                .cloned()
                .collect();
            let at_boundary = cut == clean.len() || written.iter().any(|w| w.0 as usize == cut);
            let (records, err, tail) = read_all(&clean[..cut], RecoveryMode::default());
            assert!(err.is_none(), "cut {cut}: {err:?}");
            assert_eq!(records, whole, "cut {cut}");
            assert_eq!(tail.damage.is_none(), at_boundary, "cut {cut}");
            let (_, err, _) = read_all(&clean[..cut], RecoveryMode::AbsoluteConsistency);
            assert_eq!(err.is_none(), at_boundary, "cut {cut}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A small deterministic generator; the inputs mix noise with valid records.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let (valid, _) = build(&[b"seed record", b"another"], &[0]);
        for _ in 0..2000 {
            let len = (next() % 200) as usize;
            let mut data: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            if next() % 2 == 0 {
                let at = (next() as usize) % (data.len() + 1);
                data.splice(at..at, valid.iter().copied());
            }
            for mode in RecoveryMode::ALL {
                let _ = read_all(&data, mode);
            }
        }
    }

    #[test]
    fn reader_keeps_failing_after_an_error() {
        let (data, _) = build(&[b"a"], &[]);
        let mut reader = LogReader::from_bytes(
            data[..5].to_vec(),
            PathBuf::from(LOG),
            RecoveryMode::AbsoluteConsistency,
        );
        assert!(reader.next_record().is_err());
        assert!(reader.next_record().unwrap_err().is_corruption());
    }

    #[test]
    fn recovery_mode_names_round_trip() {
        assert_eq!(RecoveryMode::default(), RecoveryMode::TolerateCorruptedTail);
        for mode in RecoveryMode::ALL {
            assert_eq!(mode.to_string().parse::<RecoveryMode>().unwrap(), mode);
        }
        assert_eq!(
            "point-in-time".parse::<RecoveryMode>().unwrap(),
            RecoveryMode::PointInTime
        );
        assert!(matches!(
            "PointInTime".parse::<RecoveryMode>(),
            Err(Error::InvalidArgument(_))
        ));

        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Opts {
            mode: RecoveryMode,
        }
        let text = toml::to_string(&Opts {
            mode: RecoveryMode::SkipAnyCorruptedRecords,
        })
        .unwrap();
        assert_eq!(text.trim(), "mode = \"skip-any-corrupted-records\"");
        assert_eq!(
            toml::from_str::<Opts>(&text).unwrap().mode,
            RecoveryMode::SkipAnyCorruptedRecords
        );
    }
}
