//! Garbage collection of the value log, the value log's side: which file to collect, reading
//! its records a bounded chunk at a time, and when a collected file may be deleted. The
//! engine's side (which records are live, rewriting them under a pointer compare) is
//! `db::vlog_gc`. Rules: `docs/value-log.md`, "Garbage collection".

use super::files::{FileUsage, InFlight};
use super::state::{SavedGc, STATE_FILE};
use super::{decode_record, file_name, Records, ValueLog, ValuePointer, RECORD_HEADER};
use crate::coding::Decoder;
use crate::env::RandomAccessFile;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::snapshot::Snapshot;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where collection stands; one per value log, held by the running round.
#[derive(Default)]
pub(crate) struct GcState {
    /// The file being collected and how far its records were read.
    cursor: Option<Cursor>,
    /// Collected files waiting to be deleted ([`Retired::due`]).
    retired: Vec<Retired>,
    /// Files with a damaged record: kept for good, since records past the damage cannot be
    /// told from it and a live one among them would be lost with the file.
    kept: BTreeSet<u64>,
    /// The file a collection before the last restart was reading, and how far its records
    /// were handled: collection goes on there before picking another file.
    resume: Option<(u64, u64)>,
}

struct Cursor {
    file: u64,
    reader: Arc<dyn RandomAccessFile>,
    offset: u64,
    size: u64,
}

/// A collected file, the sequence its rewrites were published at (a reader at or after it
/// sees no pointer into the file) and the MANIFEST log number from which the writes that
/// made its records garbage are in installed tables ([`crate::db`] computes it from the
/// memtable active then).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retired {
    file: u64,
    after: SeqNo,
    flushed_at: u64,
}

/// What a collected file's deletion waits for, besides a newer file ([`ValueLog::delete_retired`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DeleteBar {
    /// Every reader of value pointers reads at this sequence or later.
    pub oldest_reader: SeqNo,
    /// The MANIFEST's log number: writes logged in lower-numbered WAL files are in installed
    /// tables, durable whatever their own durability was.
    pub log_number: u64,
}

impl DeleteBar {
    /// Nothing held back: for the files a previous open retired.
    const NONE: DeleteBar = DeleteBar {
        oldest_reader: SeqNo::MAX,
        log_number: u64::MAX,
    };
}

impl Retired {
    /// Whether its file may go: no reader can follow a pointer into it, the writes that made
    /// its records garbage are durable (a crash that lost one would bring back a pointer
    /// into it, after a collection that had no live record left to rewrite with a `Sync`
    /// write), and it is not the highest-numbered file (numbers come from the highest file
    /// at open: deleting it would hand its number out again, and stale pointers into the old
    /// file would count against the new one).
    fn due(&self, bar: DeleteBar, highest: u64) -> bool {
        self.after <= bar.oldest_reader && self.durable(bar) && self.file < highest
    }

    /// Whether only readers and a newer file hold it back: the writes it waits for are
    /// durable. Only such files are remembered as retired across a restart.
    fn durable(&self, bar: DeleteBar) -> bool {
        self.flushed_at <= bar.log_number
    }
}

/// One record read back from a file being collected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScannedRecord {
    pub offset: u64,
    pub len: u32,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

impl ScannedRecord {
    /// The pointer an LSM entry holds if it names this record of `file`.
    pub fn pointer(&self, file: u64) -> ValuePointer {
        ValuePointer {
            file,
            offset: self.offset,
            len: self.len,
        }
    }
}

/// The records one round read from the file being collected.
#[derive(Debug)]
pub(crate) struct Chunk {
    pub file: u64,
    pub records: Vec<ScannedRecord>,
    /// The file's last records: once they are rewritten the file is done.
    pub last: bool,
}

/// Picks the file to collect: the one with the largest share of garbage at or above
/// `threshold`, among files no append can still reach (not `active`, nothing in flight)
/// and not `excluded`.
pub(crate) fn pick(
    usage: &[(u64, FileUsage)],
    active: Option<u64>,
    excluded: impl Fn(u64) -> bool,
    threshold: f64,
) -> Option<u64> {
    usage
        .iter()
        .filter(|(n, u)| Some(*n) != active && u.in_flight == 0 && !excluded(*n))
        .filter(|(_, u)| u.bytes > 0 && u.garbage_ratio() >= threshold)
        .max_by(|a, b| a.1.garbage_ratio().total_cmp(&b.1.garbage_ratio()))
        .map(|(n, _)| *n)
}

/// Records parsed from `buf`, the bytes of a file from offset `base`.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub records: Vec<ScannedRecord>,
    /// Bytes of whole records (good or damaged) from the start of `buf`.
    pub consumed: usize,
    /// A whole record failed its checksum.
    pub damaged: bool,
}

/// Parses the whole records at the start of `buf`; stops at a record that does not fit.
pub(crate) fn parse_records(buf: &[u8], base: u64) -> Parsed {
    let mut parsed = Parsed::default();
    while let Some(len) = record_len(&buf[parsed.consumed..]) {
        let rest = &buf[parsed.consumed..];
        if len > rest.len() as u64 {
            break;
        }
        let rec = &rest[..len as usize];
        match decode_record(rec) {
            Ok((key, value)) => parsed.records.push(ScannedRecord {
                offset: base + parsed.consumed as u64,
                len: len as u32,
                key: key.to_vec(),
                value: value.to_vec(),
            }),
            Err(_) => parsed.damaged = true,
        }
        parsed.consumed += len as usize;
    }
    parsed
}

/// Length of the record whose header starts `buf`, if the header is there.
fn record_len(buf: &[u8]) -> Option<u64> {
    let mut d = Decoder::new(buf.get(..RECORD_HEADER)?);
    let (_, klen, vlen) = (d.u32()?, d.u32()?, d.u32()?);
    Some(RECORD_HEADER as u64 + klen as u64 + vlen as u64)
}

impl ValueLog {
    /// True if a round has work: a file being collected, one due, or a collected file that
    /// `bar` lets go.
    pub(crate) fn gc_wanted(&self, bar: DeleteBar) -> bool {
        let Some(st) = self.gc.try_lock() else {
            return false;
        };
        let highest = self.highest_file();
        st.cursor.is_some()
            || st.retired.iter().any(|r| r.due(bar, highest))
            || self.pick_file(&st).is_some()
    }

    /// Whether the garbage counted in the whole value log is at least `vlog_gc_threshold` of
    /// its bytes: the log is past the space bound the threshold sets for each file (1.5x the
    /// live bytes at a third). Background collection then runs even while a memtable waits
    /// for its flush (`db::background`), so a sustained overwrite stream, which always has
    /// one waiting, cannot grow the log without bound.
    pub(crate) fn space_pressed(&self) -> bool {
        let (bytes, garbage) = self.files.totals();
        over_space_bound(bytes, garbage, self.gc_threshold)
    }

    /// Claims the background round; false if one runs.
    pub(crate) fn gc_claim(&self) -> bool {
        !self.gc_running.swap(true, Ordering::AcqRel)
    }

    /// Ends the background round claimed by [`ValueLog::gc_claim`].
    pub(crate) fn gc_release(&self) {
        self.gc_running.store(false, Ordering::Release);
    }

    /// The collector's state; held for a whole round, so rounds never overlap.
    pub(crate) fn gc_state(&self) -> parking_lot::MutexGuard<'_, GcState> {
        self.gc.lock()
    }

    /// Registers a reader that may follow pointers read at `latest()` or later, taken before
    /// the reader picks its sequence: a file stays while a reader older than its collection
    /// is registered.
    pub(crate) fn pin_reads(&self, latest: impl FnOnce() -> SeqNo) -> Snapshot {
        self.pins.acquire(latest)
    }

    /// The oldest registered reader's sequence, or `latest()` if none.
    pub(crate) fn oldest_pin(&self, latest: impl FnOnce() -> SeqNo) -> SeqNo {
        self.pins.oldest(latest)
    }

    /// The file to collect next.
    fn pick_file(&self, st: &GcState) -> Option<u64> {
        // NB: the active number is read before the usage. Appends to a file count in the
        // usage before a later file becomes active, so a file other than the one read here
        // gets no new append and its in-flight count only falls.
        let active = self.active_number.load(Ordering::Acquire);
        let usage = self.files.usage();
        let excluded = |n: u64| st.kept.contains(&n) || st.retired.iter().any(|r| r.file == n);
        pick(&usage, Some(active), excluded, self.gc_threshold)
    }

    /// Reads the next records of the file being collected, starting one if none is: at most
    /// `budget` bytes, or one record if it is larger. `None` if no file is due.
    pub(crate) fn next_chunk(&self, st: &mut GcState, budget: u64) -> Result<Option<Chunk>> {
        if st.cursor.is_none() {
            let resumed = st
                .resume
                .take()
                .filter(|&(file, _)| self.files.holds(file) && !st.kept.contains(&file));
            let Some((file, offset)) = resumed.or_else(|| self.pick_file(st).map(|f| (f, 0)))
            else {
                return Ok(None);
            };
            let reader = self.fs.open_read(&self.dir.join(file_name(file)))?;
            st.cursor = Some(Cursor {
                file,
                size: reader.size(),
                offset: offset.min(reader.size()),
                reader,
            });
        }
        let cur = st.cursor.as_mut().expect("set above");
        let left = cur.size - cur.offset;
        let mut buf = vec![0; budget.max(RECORD_HEADER as u64).min(left) as usize];
        cur.reader.read_exact_at(cur.offset, &mut buf)?;
        let mut parsed = parse_records(&buf, cur.offset);
        if parsed.consumed == 0 {
            // One record larger than the budget: read it whole, if the file holds it.
            if let Some(len) = record_len(&buf).filter(|&len| len <= left) {
                buf.resize(len as usize, 0);
                cur.reader.read_exact_at(cur.offset, &mut buf)?;
                parsed = parse_records(&buf, cur.offset);
            }
        }
        cur.offset += parsed.consumed as u64;
        let last = parsed.consumed == 0 || cur.offset >= cur.size;
        // A record failing its checksum, or a damaged header in front of whole records:
        // records past it cannot be told apart, so the file is kept rather than deleted with
        // live records in it; kept from now on, in the state a restart takes up too (a
        // collection resumed past the damage would not see it again).
        if parsed.damaged
            || parsed.consumed == 0 && !is_torn_tail(cur.reader.as_ref(), cur.offset, left)?
        {
            st.kept.insert(cur.file);
        }
        Ok(Some(Chunk {
            file: cur.file,
            records: parsed.records,
            last,
        }))
    }

    /// Appends `records` again (to the active file, synced) for the collector; the pointers
    /// follow their order.
    pub(crate) fn append_rewrites(
        &self,
        records: &[ScannedRecord],
    ) -> Result<(Vec<ValuePointer>, InFlight)> {
        let mut copies = Records::default();
        for r in records {
            copies.add(&r.key, &r.value);
        }
        let appended = self.append_records(&copies)?;
        // NB: the copies are durable before the rewrite that points at them is logged.
        self.sync_appended()?;
        self.counters
            .gc_bytes_rewritten
            .fetch_add(copies.bytes.len() as u64, Ordering::Relaxed);
        Ok(appended)
    }

    /// Abandons the file being collected after a failed round: picked again, it is read
    /// from its start (liveness is checked again, so records already moved are garbage).
    pub(crate) fn restart_file(&self, st: &mut GcState) {
        st.cursor = None;
    }

    /// Ends the collection of `file`, whose live records were rewritten and published at or
    /// before `after`; the writes that made the others garbage are durable once the
    /// MANIFEST's log number reaches `flushed_at`. A file with a damaged record is kept.
    pub(crate) fn finish_file(&self, st: &mut GcState, file: u64, after: SeqNo, flushed_at: u64) {
        st.cursor.take();
        self.counters.gc_runs.fetch_add(1, Ordering::Relaxed);
        if st.kept.contains(&file) {
            return;
        }
        self.files.mark_collected(file);
        st.retired.push(Retired {
            file,
            after,
            flushed_at,
        });
    }

    /// Deletes the collected files `bar` lets go ([`Retired::due`]). Returns how many; a
    /// file whose unlink fails stays retired (with the files after it) and the error is
    /// returned.
    pub(crate) fn delete_retired(&self, st: &mut GcState, bar: DeleteBar) -> Result<usize> {
        let highest = self.highest_file();
        let (due, wait) = st
            .retired
            .iter()
            .partition::<Vec<Retired>, _>(|r| r.due(bar, highest));
        st.retired = wait;
        for (i, r) in due.iter().enumerate() {
            let path = self.dir.join(file_name(r.file));
            match self.fs.remove_file(&path) {
                Ok(()) => {}
                Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    st.retired.extend_from_slice(&due[i..]);
                    return Err(e);
                }
            }
            self.readers.lock().remove(&r.file);
            self.files.remove(r.file);
            self.counters
                .gc_files_deleted
                .fetch_add(1, Ordering::Relaxed);
        }
        Ok(due.len())
    }

    /// What collection keeps across a restart (`state`). A collected file whose garbage-making
    /// writes may not be durable yet is saved as a file of garbage only, so the next open
    /// collects it again (checking each record's liveness) instead of deleting it.
    fn saved_gc(&self, st: &GcState, bar: DeleteBar) -> SavedGc {
        let garbage = self.files.usage().into_iter();
        SavedGc {
            garbage: garbage
                .filter(|(_, u)| u.garbage > 0)
                .map(|(n, u)| (n, u.garbage))
                .collect(),
            retired: st
                .retired
                .iter()
                .filter(|r| r.durable(bar))
                .map(|r| r.file)
                .collect(),
            kept: st.kept.iter().copied().collect(),
            cursor: st.cursor.as_ref().map(|c| (c.file, c.offset)).or(st.resume),
        }
    }

    /// Saves collection's state in the state file (`state`), replacing it atomically.
    pub(crate) fn save_gc_state(&self, st: &GcState, bar: DeleteBar) -> Result<()> {
        let bytes = self.saved_gc(st, bar).encode();
        crate::env::write_file_atomic(self.fs.as_ref(), &self.dir.join(STATE_FILE), &bytes)
    }

    /// Takes up the state a previous open saved: its garbage counts for the files still
    /// there, its damaged files and its cursor. Its collected files are deleted now, but for
    /// the highest-numbered file (deleted once a newer one exists): the readers they waited
    /// for ended with that open, and the writes they waited for were durable when it saved
    /// them (`read_only` deletes nothing). A damaged state file is ignored: every field is a
    /// hint.
    pub(crate) fn restore_gc_state(&self, read_only: bool) -> Result<()> {
        let path = self.dir.join(STATE_FILE);
        if !self.fs.exists(&path) {
            return Ok(());
        }
        let Ok(saved) = SavedGc::decode(&crate::env::read_file(self.fs.as_ref(), &path)?, &path)
        else {
            return Ok(());
        };
        for &(file, bytes) in &saved.garbage {
            self.files.add_garbage(file, bytes);
        }
        let mut st = self.gc.lock();
        st.kept
            .extend(saved.kept.iter().filter(|&&n| self.files.holds(n)));
        st.resume = saved.cursor.filter(|&(n, _)| self.files.holds(n));
        if read_only {
            return Ok(());
        }
        st.retired = saved
            .retired
            .iter()
            .filter(|&&file| self.files.holds(file))
            .map(|&file| Retired {
                file,
                after: 0,
                flushed_at: 0,
            })
            .collect();
        self.delete_retired(&mut st, DeleteBar::NONE).map(drop)
    }

    /// The highest-numbered file there is: the active one, or the highest found at open
    /// before any.
    fn highest_file(&self) -> u64 {
        self.active_number
            .load(Ordering::Acquire)
            .max(self.highest_at_open)
    }

    /// Whether a collected file waits for the flush of the writes that made it garbage.
    pub(crate) fn awaits_flush(&self, st: &GcState, bar: DeleteBar) -> bool {
        st.retired.iter().any(|r| !r.durable(bar))
    }

    /// Collected files not deleted yet ([`Retired::due`]).
    pub(crate) fn retired_files(&self, st: &GcState) -> usize {
        st.retired.len()
    }
}

/// Most bytes after a file's last whole record that [`is_torn_tail`] reads to tell a torn
/// tail from damage; more is damage.
const TORN_TAIL_SCAN: u64 = 16 << 20;

/// Whether the `left` bytes of `file` from `offset`, where no whole record starts, are a torn
/// tail: an append a crash cut short, whose records were never synced, so no pointer names
/// them. Damage instead (a record header hit in place, say) leaves whole records after it,
/// so a whole record starting anywhere in those bytes says damage, as does more than
/// `TORN_TAIL_SCAN` of them. A value holding a record's encoding reads as damage too: the
/// mistake keeps a file, never loses one.
fn is_torn_tail(file: &dyn RandomAccessFile, offset: u64, left: u64) -> Result<bool> {
    if left == 0 {
        return Ok(true);
    }
    if left > TORN_TAIL_SCAN {
        return Ok(false);
    }
    let mut buf = vec![0; left as usize];
    file.read_exact_at(offset, &mut buf)?;
    Ok(no_whole_record_after_start(&buf))
}

/// Whether no whole record starts in `tail` past its first byte (see [`is_torn_tail`]).
fn no_whole_record_after_start(tail: &[u8]) -> bool {
    !(1..tail.len()).any(|at| starts_whole_record(&tail[at..]))
}

/// Whether `buf` starts with a whole record that passes its checksum.
fn starts_whole_record(buf: &[u8]) -> bool {
    record_len(buf)
        .filter(|&len| len <= buf.len() as u64)
        .is_some_and(|len| decode_record(&buf[..len as usize]).is_ok())
}

/// Whether `garbage` of `bytes` reaches the share `threshold` (some garbage, at least).
fn over_space_bound(bytes: u64, garbage: u64, threshold: f64) -> bool {
    garbage > 0 && garbage as f64 >= threshold * bytes as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vlog::encode_record;

    #[test]
    fn the_space_bound_is_the_threshold_over_all_files() {
        assert!(!over_space_bound(0, 0, 0.5));
        assert!(!over_space_bound(1000, 0, 0.0), "no garbage, no pressure");
        assert!(!over_space_bound(3000, 999, 1.0 / 3.0));
        assert!(over_space_bound(3000, 1000, 1.0 / 3.0));
        assert!(over_space_bound(1000, 500, 0.5));
        assert!(!over_space_bound(1000, 499, 0.5));
    }

    fn usage(bytes: u64, garbage: u64, in_flight: usize) -> FileUsage {
        FileUsage {
            bytes,
            garbage,
            in_flight,
        }
    }

    #[test]
    fn pick_takes_the_most_garbage_above_the_threshold() {
        let files = [
            (1, usage(100, 60, 0)),
            (2, usage(100, 90, 0)),
            (3, usage(100, 95, 1)),
            (4, usage(100, 99, 0)),
            (5, usage(100, 40, 0)),
        ];
        assert_eq!(pick(&files, Some(4), |_| false, 0.5), Some(2));
        assert_eq!(pick(&files, Some(4), |n| n == 2, 0.5), Some(1));
        assert_eq!(pick(&files, None, |_| false, 0.5), Some(4));
        assert_eq!(pick(&files, Some(4), |_| false, 0.95), None);
        assert_eq!(pick(&[(7, usage(0, 0, 0))], None, |_| false, 0.0), None);
    }

    #[test]
    fn a_cut_record_is_a_torn_tail_and_a_damaged_length_before_whole_records_is_not() {
        let mut buf = Vec::new();
        encode_record(&mut buf, b"a", &[7; 300]);
        let second = buf.len();
        encode_record(&mut buf, b"b", &[8; 300]);
        // An append cut short: a prefix of the last record, header included or not.
        for cut in [second + 5, second + 12, buf.len() - 1] {
            assert!(
                no_whole_record_after_start(&buf[second..cut]),
                "cut at {cut}"
            );
        }
        // The first record's value length hit in place: the second record follows it whole.
        let mut damaged = buf.clone();
        damaged[9] ^= 0x40;
        assert!(parse_records(&damaged, 0).consumed == 0);
        assert!(!no_whole_record_after_start(&damaged));
    }

    #[test]
    fn parse_stops_at_a_torn_tail_and_flags_damage() {
        let mut buf = Vec::new();
        encode_record(&mut buf, b"a", b"one");
        let second = buf.len();
        encode_record(&mut buf, b"b", b"two");
        let third = buf.len();
        encode_record(&mut buf, b"c", b"three");
        let parsed = parse_records(&buf[..buf.len() - 2], 1000);
        assert_eq!(parsed.consumed, third);
        assert!(!parsed.damaged);
        assert_eq!(parsed.records.len(), 2);
        assert_eq!(parsed.records[1].offset, 1000 + second as u64);
        assert_eq!(parsed.records[1].len as usize, third - second);
        assert_eq!(parsed.records[1].key, b"b");
        assert_eq!(parsed.records[1].value, b"two");
        let mut bad = buf.clone();
        bad[second + RECORD_HEADER] ^= 1;
        let parsed = parse_records(&bad, 0);
        assert!(parsed.damaged);
        assert_eq!(parsed.consumed, buf.len());
        assert_eq!(parsed.records.len(), 2);
        assert_eq!(parse_records(&buf[..5], 0).consumed, 0);
    }
}
