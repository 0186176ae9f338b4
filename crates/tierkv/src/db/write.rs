//! The write path: what every WAL mode shares.
//!
//! A write goes to the database's [`Wal`](crate::wal::Wal), which logs it, applies it and
//! publishes it in its mode's way. Making room for it is the same in every mode and lives
//! here: pacing writes while L0 grows, stalling while flushes or L0 compactions fall behind,
//! and switching the memtable, which asks the mode's [`LogRoom`] to start a new log. The
//! database serves the modes as their `WalHost` (in `pipeline`, which also runs the work they
//! defer).
//!
//! INVARIANT: a memtable switch happens only under the mode's serialisation point (the
//! group-commit leader, or the parallel WAL's admission lock), so writes numbered before the
//! switch go to the old memtable and writes numbered after it to the new one.

use super::DbInner;
use crate::batch::WriteBatch;
use crate::error::{Error, Result};
use crate::memtable::MemTable;
use crate::options::Durability;
use crate::stats::Counters;
use crate::wal::{Check, LogRoom, WriteRequest};
use std::sync::Arc;
use std::time::{Duration, Instant};

impl DbInner {
    /// Commits `batch` through the WAL; returns once it is visible (durable with `Sync`).
    pub(super) fn write(&self, durability: Durability, batch: WriteBatch) -> Result<()> {
        let (batch, _in_flight) = self.route_values(batch)?;
        self.wal
            .write(self, WriteRequest::batch(durability, batch))?;
        self.sync_values(durability)
    }

    /// Commits `batch` if `check` passes once every earlier write is visible.
    pub(super) fn write_checked(
        &self,
        durability: Durability,
        batch: WriteBatch,
        check: Check<'_>,
    ) -> Result<()> {
        let (batch, _in_flight) = self.route_values(batch)?;
        let req = WriteRequest {
            durability,
            batch: Some(batch),
            force_switch: false,
            check: Some(check),
        };
        self.wal.write(self, req)?;
        self.sync_values(durability)
    }

    /// SPLIT VALUES: with a value log, the batch's large values are appended to it (durable on
    /// return, so before any WAL sync covering their pointers) and the batch the WAL logs holds
    /// tagged values (`crate::vlog`). Without one the batch is unchanged. Hold the guard until
    /// the write returned: garbage collection leaves the appended records' file alone till then.
    pub(super) fn route_values(
        &self,
        batch: WriteBatch,
    ) -> Result<(WriteBatch, crate::vlog::InFlight)> {
        match &self.vlog {
            Some(vlog) => vlog.route(batch),
            None => Ok((batch, crate::vlog::InFlight::none())),
        }
    }

    /// SPLIT VALUES: after a `Sync` write's WAL write returned, makes every value-log record
    /// appended so far durable (one group sync shared with concurrent writers). Every write
    /// the WAL ordered before this one appended its records before it reached the WAL, so
    /// once this returns none of them can be lost by a power loss: recovery, which stops at
    /// the first write whose records were lost, reaches this one (`docs/value-log.md`).
    /// A failed sync stops writes: bytes already visible may be lost.
    pub(super) fn sync_values(&self, durability: Durability) -> Result<()> {
        match &self.vlog {
            Some(vlog) if durability == Durability::Sync => vlog
                .sync_write_appends()
                .inspect_err(|e| self.set_bg_error(e)),
            _ => Ok(()),
        }
    }

    /// SPLIT VALUES: registers a reader that may follow value-log pointers, before it picks
    /// its read sequence, so that garbage collection keeps the files it may read (`None`
    /// without a value log). Hold it while the read resolves values.
    pub(super) fn pin_values(&self) -> Option<crate::snapshot::Snapshot> {
        let vlog = self.vlog.as_ref()?;
        Some(vlog.pin_reads(|| self.versions.last_sequence()))
    }

    /// The user value of a value as the LSM stores it (see `route_values`).
    pub(super) fn user_value(&self, key: &[u8], stored: Vec<u8>) -> Result<Vec<u8>> {
        match &self.vlog {
            Some(vlog) => vlog.resolve(key, &stored),
            None => Ok(stored),
        }
    }

    /// See [`crate::Db::check_values`].
    pub(super) fn check_values(&self) -> Result<(u64, u64)> {
        let _pin = self.pin_values();
        let mut it = self.iter_stored(crate::options::ReadOptions::default())?;
        it.seek_to_first();
        let (mut n, mut separated) = (0, 0);
        while it.valid() {
            n += 1;
            if let Some(vlog) = &self.vlog {
                separated += u64::from(vlog.check(it.key(), it.value())?);
            }
            it.next();
        }
        it.status()?;
        Ok((n, separated))
    }

    /// Switches the memtable if it holds anything and waits until all memtables are flushed.
    pub(super) fn flush_and_wait(&self) -> Result<()> {
        let switch = WriteRequest {
            durability: Durability::Flush,
            batch: None,
            force_switch: true,
            check: None,
        };
        self.wal.write(self, switch)?;
        let mut state = self.state.lock();
        loop {
            if let Some(e) = &state.bg_error {
                return Err(e.duplicate());
            }
            if state.imm.is_empty() {
                return Ok(());
            }
            if state.shutting_down {
                return Err(Error::Closed("the database is shutting down".into()));
            }
            self.bg_cv.notify_all();
            self.progress_cv.wait(&mut state);
        }
    }

    /// Ensures the active memtable and the WAL's log can take a write of `bytes` user bytes,
    /// pacing, stalling or switching as needed. Returns false instead of waiting when
    /// `may_block` is false and a wait is due.
    pub(super) fn make_room_for(
        &self,
        room: &mut dyn LogRoom,
        force_switch: bool,
        bytes: u64,
        may_block: bool,
    ) -> Result<bool> {
        let mut delayed = false;
        let mut state = self.state.lock();
        loop {
            self.check_writable(&state)?;
            let l0 = self.versions.current().levels[0].len();
            // SPLIT VALUES: a memtable of pointers is also full once its writes filled a
            // value-log file, so the garbage they make is counted (`wants_memtable_switch`).
            let mem_full = state.mem.memory_bytes() >= self.opts.memtable.write_buffer_size
                || !state.mem.is_empty()
                    && self
                        .vlog
                        .as_ref()
                        .is_some_and(|v| v.wants_memtable_switch());
            let slow = l0 >= self.opts.compaction.l0_slowdown_trigger;
            if !delayed {
                if !may_block && (slow || self.hot_demoting()) {
                    return Ok(false);
                }
                delayed = true;
                let now = Instant::now();
                let wait = self
                    .pacer
                    .delay(l0, bytes, now)
                    .max(self.hot_write_delay(bytes, now));
                if !wait.is_zero() {
                    // Pace writes so compaction or a demotion can catch up (`pacer`).
                    drop(state);
                    let t = Instant::now();
                    std::thread::sleep(wait);
                    self.record_stall(t, false);
                    state = self.state.lock();
                    continue;
                }
            }
            let switch = mem_full || force_switch && !state.mem.is_empty() || room.is_full();
            if !switch {
                return Ok(true);
            } else if state.imm.len() >= self.opts.memtable.max_immutable_memtables
                || l0 >= self.opts.compaction.l0_stop_trigger
                || !room.can_rotate()
            {
                if !may_block {
                    return Ok(false);
                }
                let t = Instant::now();
                self.bg_cv.notify_all();
                self.progress_cv
                    .wait_for(&mut state, Duration::from_millis(100));
                self.record_stall(t, true);
            } else {
                drop(state);
                self.switch_memtable(room)?;
                return Ok(true);
            }
        }
    }

    fn record_stall(&self, since: Instant, stop: bool) {
        let c = &self.counters;
        Counters::add(&c.stall_micros, since.elapsed().as_micros() as u64);
        Counters::add(if stop { &c.stops } else { &c.slowdowns }, 1);
    }

    /// Seals the active memtable and its log, starting a new pair.
    fn switch_memtable(&self, room: &mut dyn LogRoom) -> Result<()> {
        let mem = Arc::new(MemTable::for_options(
            self.versions.new_file_number(),
            &self.opts.memtable,
        ));
        // SPLIT VALUES: the sealed memtable's writes appended their value-log records before
        // they were numbered; its tables will outlive its WAL, so the records are durable
        // before it can be flushed (recovery checks only replayed writes).
        let sealed = match &self.vlog {
            Some(vlog) => {
                vlog.note_memtable_switch();
                vlog.sync_write_appends()
            }
            None => Ok(()),
        };
        if let Err(e) = sealed.and_then(|()| room.rotate(&mem)) {
            self.set_bg_error(&e);
            return Err(e);
        }
        {
            let mut state = self.state.lock();
            let full = std::mem::replace(&mut state.mem, mem);
            full.seal();
            state.imm.push_back(full);
        }
        self.maybe_schedule();
        Ok(())
    }
}
