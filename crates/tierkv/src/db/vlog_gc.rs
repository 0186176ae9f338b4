//! Garbage collection of the value log, the engine's side (`values = "split"`).
//!
//! A round reads a bounded chunk of the file being collected (`vlog::gc` picks the file with
//! the most garbage counted at flushes and compactions), keeps the records whose key's newest
//! LSM value still points at them, appends those again to the active file and writes the new
//! pointers into the LSM. Each rewrite is a conditional write: the check, run by the WAL once
//! every earlier write is visible and before the rewrite is numbered (as a transaction's
//! validation is), compares each key's newest stored value with the old pointer, so a user
//! write that landed since the liveness check wins and the rewrite of that key is dropped.
//! A pointer compare, not a sequence compare: a pointer names one record, and no write but
//! this one ever makes a key point into a file being collected, so equality means untouched.
//!
//! A file whose records were all handled is retired with the sequence its rewrites were
//! published at, and deleted once no reader reads below it: no snapshot, iterator or point
//! read started before (`ValueLog::pin_reads`). Rewrites are `Sync` writes, and the user
//! writes that made the other records garbage are flushed before the file goes (they may
//! have been unsynced, and a file whose records were all garbage had no rewrite to sync
//! them), so a deleted file's pointers are shadowed in the recovered LSM too.

use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::options::{Durability, ReadOptions};
use crate::vlog::{Chunk, DeleteBar, GcState, ScannedRecord, ValueLog};
use crate::wal::WriteRequest;

/// Most records one conditional rewrite carries: its check runs in the write path's leader,
/// holding up the writes queued behind it.
const REWRITE_BATCH: usize = 64;

impl DbInner {
    /// One background round of value-log garbage collection: at most `gc_round_bytes` read.
    /// A database shutting down or stopped by an earlier failure ends the round quietly.
    pub(super) fn vlog_gc_round(&self, vlog: &ValueLog) -> Result<()> {
        let mut st = vlog.gc_state();
        let result = self.collect_chunk(vlog, &mut st);
        // NB: a failed unlink leaves the file retired, tried again next round; like obsolete
        // tables, garbage left on disk must not stop writes.
        let bar = self.value_delete_bar(vlog);
        let _ = vlog.delete_retired(&mut st, bar);
        // NB: a hint for the next open (`vlog::state`); a failed save only loses counts.
        if result.is_ok() {
            let _ = vlog.save_gc_state(&st, bar);
        }
        match result {
            Ok(_) | Err(Error::Closed(_) | Error::Stopped { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Collects until no file is due, then deletes the collected files no reader needs (see
    /// [`crate::Db::collect_value_log`]). Returns how many collected files are kept
    /// ([`ValueLog::delete_retired`]).
    pub(super) fn collect_value_log(&self) -> Result<usize> {
        let Some(vlog) = &self.vlog else {
            return Ok(0);
        };
        // NB: a stopped database may have failed to install a flush its MANIFEST names:
        // liveness, checked against the installed version, would miss that flush's records.
        self.check_writable(&self.state.lock())?;
        let mut st = vlog.gc_state();
        while self.collect_chunk(vlog, &mut st)? {
            vlog.delete_retired(&mut st, self.value_delete_bar(vlog))?;
        }
        if vlog.awaits_flush(&st, self.value_delete_bar(vlog)) {
            // The writes that made the collected files garbage, made durable now rather than
            // at some later flush, so their space comes back on return.
            drop(st);
            self.flush_and_wait()?;
            st = vlog.gc_state();
        }
        let bar = self.value_delete_bar(vlog);
        vlog.delete_retired(&mut st, bar)?;
        vlog.save_gc_state(&st, bar)?;
        Ok(vlog.retired_files(&st))
    }

    /// The sequence every reader of value-log pointers reads at or after.
    pub(super) fn oldest_value_reader(&self, vlog: &ValueLog) -> SeqNo {
        let latest = || self.versions.last_sequence();
        self.oldest_snapshot().min(vlog.oldest_pin(latest))
    }

    /// The MANIFEST log number from which every write visible now is in installed tables:
    /// past the active memtable's log if it holds any write, else at it (the visible writes
    /// are all in older memtables).
    fn log_number_covering_visible(&self) -> u64 {
        let state = self.state.lock();
        state.mem.wal_number() + u64::from(!state.mem.is_empty())
    }

    /// What collected value-log files wait for: older readers, and the flush of the writes
    /// that made their records garbage.
    pub(super) fn value_delete_bar(&self, vlog: &ValueLog) -> DeleteBar {
        DeleteBar {
            oldest_reader: self.oldest_value_reader(vlog),
            log_number: self.versions.log_number(),
        }
    }

    /// Reads and handles one chunk; false if no file was due.
    fn collect_chunk(&self, vlog: &ValueLog, st: &mut GcState) -> Result<bool> {
        let chunk = vlog.next_chunk(st, self.opts.values.gc_round_bytes)?;
        if let Some(chunk) = &chunk {
            if let Err(e) = self.move_live_records(vlog, chunk) {
                // NB: the chunk's records may not all have moved: the file starts over when
                // it is picked again, or a live record would be deleted with it.
                vlog.restart_file(st);
                return Err(e);
            }
            if chunk.last {
                // NB: read after every rewrite returned: all of them are at or below it, and
                // so is every write the liveness checks saw, which the memtable active after
                // this read, or an older one, holds.
                let after = self.versions.last_sequence();
                vlog.finish_file(st, chunk.file, after, self.log_number_covering_visible());
            }
        }
        Ok(chunk.is_some())
    }

    /// Rewrites the records of `chunk` whose key still points at them.
    fn move_live_records(&self, vlog: &ValueLog, chunk: &Chunk) -> Result<()> {
        let mut live = Vec::new();
        for r in &chunk.records {
            if self.points_at(&r.key, &r.pointer(chunk.file).encode())? {
                live.push(r.clone());
            }
        }
        for part in live.chunks(REWRITE_BATCH) {
            self.rewrite(vlog, chunk.file, part)?;
        }
        Ok(())
    }

    /// Moves `records` of `file` to the active value-log file and points their keys at the
    /// copies, each key only if it still points at the old record.
    fn rewrite(&self, vlog: &ValueLog, file: u64, records: &[ScannedRecord]) -> Result<()> {
        let (pointers, _in_flight) = vlog.append_rewrites(records)?;
        let mut pending: Vec<(&[u8], Vec<u8>, Vec<u8>)> = records
            .iter()
            .zip(pointers)
            .map(|(r, p)| (&r.key[..], r.pointer(file).encode(), p.encode()))
            .collect();
        while !pending.is_empty() {
            let mut batch = WriteBatch::new();
            for (key, _, new) in &pending {
                batch.put(key, new);
            }
            let check = || -> Result<()> {
                for (key, old, _) in &pending {
                    if !self.points_at(key, old)? {
                        return Err(Error::Conflict { key: key.to_vec() });
                    }
                }
                Ok(())
            };
            let req = WriteRequest {
                durability: Durability::Sync,
                batch: Some(batch),
                force_switch: false,
                check: Some(&check),
            };
            match self.wal.write(self, req) {
                // NB: as any `Sync` write, durable once earlier writes' records are too.
                Ok(()) => return self.sync_values(Durability::Sync),
                // A user write overwrote or deleted the key since: its copy is garbage.
                Err(Error::Conflict { key }) => {
                    let before = pending.len();
                    pending.retain(|(k, _, _)| *k != key);
                    if pending.len() == before {
                        return Err(Error::Conflict { key });
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// True if the newest visible value of `user_key` is the stored value `want`.
    fn points_at(&self, user_key: &[u8], want: &[u8]) -> Result<bool> {
        // NB: not a user read: no read statistics, no promotion offer.
        let newest = self.lookup_stored(&ReadOptions::default(), user_key, false)?;
        Ok(newest.as_deref() == Some(want))
    }
}
