//! `wal = "append"`: a leaderless WAL on a conventional file (WALTZ's write path without a zoned
//! device). Format and recovery: `docs/append-wal.md`.
//!
//! Each memtable owns one log file, `NNNNNN.alog` on tier 0, preallocated with zeros. A writer
//! is admitted under a short lock that only makes room, numbers the write and reserves its
//! bytes by advancing the file's tail; then, with no lock and no leader, it writes its own
//! record at its own offset (`RWF_DSYNC` when the write asks for `Sync`), inserts its batch in
//! the memtable and reports to the [`Tracker`]. The tracker publishes the contiguous prefix of
//! written records; a `Sync` writer returns once every lower sequence number is durable too,
//! issuing one covering `fdatasync` of the logs holding unsynced records below it when needed.
//!
//! INVARIANT: within a file, offset order is sequence order (both are assigned under the
//! admission lock), and files are numbered in sequence order; so the durable records always
//! include a prefix of history, and recovery ([`recover`]) replays up to the first gap.
//! INVARIANT: a record's `synced` field is a sequence number below which every write was
//! durable before the record was written: recovery's evidence that a hole below it is
//! corruption, not a lost unsynced tail.

mod leader;
pub(crate) mod recover;
pub(crate) mod zones;

pub(crate) use recover::remove_below;
use zones::ZoneWal;

/// Replays the append logs and the zoned device's records into `sink`.
pub(crate) fn replay(ctx: &super::ReplayCtx<'_>, sink: &mut dyn super::ReplaySink) -> Result<()> {
    recover::replay(ctx, sink)?;
    zones::replay(ctx, sink)
}

use super::{LogRoom, Wal, WalHost, WriteRequest};
use crate::coding;
use crate::env::PositionalFile;
use crate::error::{Error, Result};
use crate::handle::Completer;
use crate::memtable::MemTable;
use crate::options::{Durability, Options};
use crate::stats::Counters;
use crate::tier::Tiers;
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;

/// Bytes of a record header: crc u32 | len u32 | log u64 | synced u64.
pub(crate) const HEADER: usize = 24;
/// Records start at multiples of this.
pub(crate) const ALIGN: u64 = 8;
/// The log files' extension.
pub(crate) const EXT: &str = "alog";

/// Bytes a log file of `opts` is created with (larger when one batch needs more): what a
/// group-commit log grows to, so both modes keep the same reserve on tier 0. A log that fills
/// before its memtable switches the memtable early.
pub(crate) fn log_bytes(opts: &Options) -> u64 {
    opts.memtable.write_buffer_size as u64 + opts.wal_preallocation_step()
}

/// The name of log file `number`.
pub(crate) fn file_name(number: u64) -> String {
    format!("{number:06}.{EXT}")
}

/// Bytes of the record holding `payload_len` payload bytes, padding included.
pub(crate) fn record_len(payload_len: usize) -> u64 {
    ((HEADER + payload_len) as u64).div_ceil(ALIGN) * ALIGN
}

/// Encodes a record of log `log` into `out` (cleared first).
pub(crate) fn encode_record(out: &mut Vec<u8>, log: u64, synced: u64, payload: &[u8]) {
    out.clear();
    out.extend_from_slice(&[0u8; 4]);
    coding::put_u32(out, payload.len() as u32);
    coding::put_u64(out, log);
    coding::put_u64(out, synced);
    out.extend_from_slice(payload);
    out.resize(record_len(payload.len()) as usize, 0);
    let crc = coding::crc(&out[4..HEADER + payload.len()]);
    out[..4].copy_from_slice(&crc.to_le_bytes());
}

/// One memtable's log file.
struct LogFile {
    number: u64,
    file: Arc<dyn PositionalFile>,
    capacity: u64,
}

/// Admission state: the active log and memtable, the next free byte and sequence number.
struct Admit {
    log: Option<Arc<LogFile>>,
    mem: Option<Arc<MemTable>>,
    tail: u64,
    last_seq: u64,
}

/// One admitted write not yet published.
struct Unit {
    /// One past its last sequence number.
    end: u64,
    written: bool,
    durable: bool,
    /// Its log file; `None` on a zoned device.
    log: Option<Arc<LogFile>>,
    mem: Arc<MemTable>,
}

/// What is written, visible and durable.
struct Tracker {
    /// Admitted, unpublished writes by first sequence number.
    units: BTreeMap<u64, Unit>,
    /// Every write below this is visible.
    visible: u64,
    /// Every write below this is durable.
    durable: u64,
    /// Logs holding published writes that were not synced, by number.
    dirty: BTreeMap<u64, Arc<LogFile>>,
    /// The zoned device holds published writes appended without FUA.
    device_dirty: bool,
    failed: Option<Error>,
}

/// The append WAL of an open database.
pub(crate) struct AppendWal {
    admit: Mutex<Admit>,
    tracker: Mutex<Tracker>,
    /// Signalled when `visible` or `durable` advances or the log fails.
    progress: Condvar,
    /// Serializes covering syncs, so one never trusts another's unfinished sync.
    covering: Mutex<()>,
    tiers: Arc<Tiers>,
    base_bytes: u64,
    /// Sealed logs of memtables not yet flushed, to delete once they are.
    logs: Mutex<BTreeMap<u64, PathBuf>>,
    /// The zoned device the records go to (`wal = "zoned"`); log files when `None`.
    zones: Option<ZoneWal>,
    me: Weak<AppendWal>,
}

impl AppendWal {
    /// The WAL of a database whose last recovered sequence number is `last_seq`.
    pub fn open(opts: &Options, tiers: &Arc<Tiers>, last_seq: u64) -> Result<Arc<AppendWal>> {
        Self::with_zones(opts, tiers, last_seq, None)
    }

    /// The WAL of `wal = "zoned"`: records go to the zoned device of `opts` on tier 0.
    pub fn open_zoned(opts: &Options, tiers: &Arc<Tiers>, last_seq: u64) -> Result<Arc<AppendWal>> {
        let zones = ZoneWal::open(opts, tiers)?;
        Self::with_zones(opts, tiers, last_seq, Some(zones))
    }

    fn with_zones(
        opts: &Options,
        tiers: &Arc<Tiers>,
        last_seq: u64,
        zones: Option<ZoneWal>,
    ) -> Result<Arc<AppendWal>> {
        Ok(Arc::new_cyclic(|me| AppendWal {
            admit: Mutex::new(Admit {
                log: None,
                mem: None,
                tail: 0,
                last_seq,
            }),
            tracker: Mutex::new(Tracker {
                units: BTreeMap::new(),
                visible: last_seq + 1,
                durable: last_seq + 1,
                dirty: BTreeMap::new(),
                device_dirty: false,
                failed: None,
            }),
            progress: Condvar::new(),
            covering: Mutex::new(()),
            tiers: Arc::clone(tiers),
            base_bytes: log_bytes(opts),
            logs: Mutex::new(BTreeMap::new()),
            zones,
            me: me.clone(),
        }))
    }

    /// Creates log `number` with room for at least `need` bytes, durably named.
    fn create_log(&self, number: u64, need: u64) -> Result<Arc<LogFile>> {
        let dir = &self.tiers.fast().dir;
        let path = dir.join(file_name(number));
        let capacity = self.base_bytes.max(need);
        let file = self.tiers.fs().open_positional(&path, capacity)?;
        self.tiers.fs().sync_dir(dir)?;
        self.logs.lock().insert(number, path);
        Ok(Arc::new(LogFile {
            number,
            file,
            capacity,
        }))
    }

    /// Removes log `number`, which holds no record, without waiting for its memtable's flush.
    fn remove_log(&self, number: u64) -> Result<()> {
        if let Some(path) = self.logs.lock().remove(&number) {
            self.tiers.fs().remove_file(&path)?;
        }
        Ok(())
    }

    /// Starts `mem`'s log and makes it the active one.
    fn rotate(&self, admit: &mut Admit, mem: &Arc<MemTable>, need: u64) -> Result<()> {
        if let Some(zones) = &self.zones {
            let synced = self.tracker.lock().durable;
            zones.mark(mem.wal_number(), admit.last_seq + 1, synced)?;
            admit.mem = Some(Arc::clone(mem));
            admit.tail = 0;
            return Ok(());
        }
        if admit.tail == 0 {
            // NB: recovery reads a live log without records before a newer one with records as
            // a crash's loss (`recover`): a log this switch leaves empty (a batch too big for
            // it came first) is removed, and the directory sync that names the new log makes
            // the removal durable.
            if let Some(empty) = admit.log.take() {
                self.remove_log(empty.number)?;
            }
        }
        let log = self.create_log(mem.wal_number(), need)?;
        admit.log = Some(log);
        admit.mem = Some(Arc::clone(mem));
        admit.tail = 0;
        Ok(())
    }

    /// Admits, writes, applies and publishes one write; returns once it is visible (and
    /// durable, with `Sync`).
    fn commit(&self, host: &dyn WalHost, req: WriteRequest<'_>) -> Result<()> {
        let bytes = req.user_bytes();
        let WriteRequest {
            durability,
            batch,
            force_switch,
            check,
        } = req;
        let mut batch = batch;
        let need = batch
            .as_ref()
            .map_or(0, |b| record_len(b.encoded_len()) + ALIGN);
        let mut admit = self.admit.lock();
        let mut room = FileRoom {
            wal: self,
            admit: &mut admit,
            need,
        };
        host.make_room(&mut room, force_switch, bytes, true)?;
        if let Some(check) = check {
            let last = admit.last_seq;
            self.wait_visible(last)?;
            check()?;
        }
        let Some(batch) = batch.as_mut().filter(|b| !b.is_empty()) else {
            let earlier = admit.last_seq;
            drop(admit);
            return self.settle_empty(host, durability, earlier);
        };
        let first = admit.last_seq + 1;
        let n = batch.len() as u64;
        let log = admit.log.clone();
        let log_number = admit.mem.as_ref().map_or(0, |m| m.wal_number());
        let mem = Arc::clone(admit.mem.as_ref().expect("make_room sets the memtable"));
        let payload = batch.encode_with_seq(first);
        let len = record_len(payload.len());
        let offset = admit.tail;
        admit.tail += match &self.zones {
            Some(zones) => zones.device_bytes(payload.len()),
            None => len,
        };
        admit.last_seq += n;
        let synced = {
            let mut t = self.tracker.lock();
            if let Some(e) = &t.failed {
                return Err(Error::Closed(format!("the WAL write failed: {e}")));
            }
            mem.begin_write();
            t.units.insert(
                first,
                Unit {
                    end: first + n,
                    written: false,
                    durable: false,
                    log: log.clone(),
                    mem: Arc::clone(&mem),
                },
            );
            t.durable
        };
        drop(admit);
        host.note_admitted();
        let sync = durability == Durability::Sync;
        let written = match (&log, &self.zones) {
            (Some(log), _) => {
                let mut record = Vec::with_capacity(len as usize);
                encode_record(&mut record, log_number, synced, payload);
                log.file.write_at(offset, &record, sync)
            }
            (None, Some(zones)) => zones.write_batch(log_number, synced, first, payload, sync),
            (None, None) => unreachable!("make_room starts a log"),
        };
        if written.is_ok() {
            mem.insert_batch(first, batch);
        }
        self.finish(host, first, written, sync)?;
        let c = host.counters();
        Counters::add(&c.writes, 1);
        Counters::add(&c.write_groups, 1);
        Counters::add(&c.user_bytes_written, batch.user_bytes());
        if sync {
            Counters::add(&c.synced_groups, 1);
            self.wait_durable(host, first + n)?;
        }
        Ok(())
    }

    /// Completes a write that logs nothing. A `Sync` one still promises what any `Sync`
    /// write does, that every earlier write (through `earlier`) is durable, so an application
    /// can make its buffered writes durable without writing anything.
    fn settle_empty(&self, host: &dyn WalHost, durability: Durability, earlier: u64) -> Result<()> {
        if durability != Durability::Sync {
            return Ok(());
        }
        // NB: `wait_durable` syncs only what is visible, so the earlier writes must be first.
        self.wait_visible(earlier)?;
        self.wait_durable(host, earlier + 1)
    }

    /// Records the outcome of unit `first`'s write, publishes what it can and waits until
    /// the unit is visible.
    fn finish(
        &self,
        host: &dyn WalHost,
        first: u64,
        written: Result<()>,
        sync: bool,
    ) -> Result<()> {
        let mut t = self.tracker.lock();
        if let Err(e) = written {
            host.fail(&e);
            t.failed.get_or_insert(e.duplicate());
            for (_, u) in std::mem::take(&mut t.units) {
                u.mem.end_write();
            }
            self.progress.notify_all();
            return Err(e);
        }
        let end = match t.units.get_mut(&first) {
            Some(u) => {
                u.written = true;
                u.durable = sync;
                u.end
            }
            None => return Err(self.failed(&t)),
        };
        let mut flushable = false;
        loop {
            let visible = t.visible;
            let Some(u) = t
                .units
                .first_entry()
                .filter(|u| *u.key() == visible && u.get().written)
            else {
                break;
            };
            let u = u.remove();
            if u.durable && t.durable == t.visible {
                t.durable = u.end;
            } else if !u.durable {
                match &u.log {
                    Some(log) => drop(t.dirty.insert(log.number, Arc::clone(log))),
                    None => t.device_dirty = true,
                }
            }
            t.visible = u.end;
            host.publish(u.end - 1);
            flushable |= u.mem.end_write();
            self.progress.notify_all();
        }
        while t.visible < end && t.failed.is_none() {
            self.progress.wait(&mut t);
        }
        drop(t);
        if flushable {
            host.wake_background();
        }
        if self.tracker.lock().visible < end {
            return Err(self.failed(&self.tracker.lock()));
        }
        Ok(())
    }

    fn failed(&self, t: &Tracker) -> Error {
        let what = t.failed.as_ref().map_or("closed".into(), Error::to_string);
        Error::Closed(format!("the WAL write failed: {what}"))
    }

    /// Waits until every write below `end` is visible and durable, syncing the logs of the
    /// unsynced ones once if needed.
    fn wait_durable(&self, host: &dyn WalHost, end: u64) -> Result<()> {
        if self.tracker.lock().durable >= end {
            return Ok(());
        }
        let _covering = self.covering.lock();
        let target = {
            let mut t = self.tracker.lock();
            if t.durable >= end {
                return Ok(());
            }
            let device = std::mem::take(&mut t.device_dirty);
            (t.visible, std::mem::take(&mut t.dirty), device)
        };
        let (target, dirty, device) = target;
        let device_sync = || match (&self.zones, device) {
            (Some(zones), true) => zones.flush(),
            _ => Ok(()),
        };
        let syncs = dirty
            .values()
            .map(|log| log.file.sync())
            .chain([device_sync()]);
        for result in syncs {
            if let Err(e) = result {
                host.fail(&e);
                let mut t = self.tracker.lock();
                t.failed.get_or_insert(e.duplicate());
                self.progress.notify_all();
                return Err(e);
            }
        }
        let mut t = self.tracker.lock();
        // Every write below `target` was written before the syncs began.
        t.durable = t.durable.max(target);
        Ok(())
    }

    /// Waits until every write up to `seq` is visible.
    fn wait_visible(&self, seq: u64) -> Result<()> {
        let mut t = self.tracker.lock();
        while t.visible <= seq {
            if t.failed.is_some() {
                return Err(self.failed(&t));
            }
            self.progress.wait(&mut t);
        }
        Ok(())
    }
}

impl Wal for AppendWal {
    fn write(&self, host: &dyn WalHost, req: WriteRequest<'_>) -> Result<()> {
        self.commit(host, req)
    }

    fn submit(
        &self,
        host: &dyn WalHost,
        req: WriteRequest<'static>,
        done: Completer<()>,
    ) -> Result<()> {
        let wal = self.me.upgrade().expect("the WAL outlives its writers");
        // NB: admission may stall on a memtable switch; the caller's thread must not.
        host.defer(Box::new(move |host| done.complete(wal.commit(host, req))));
        Ok(())
    }

    fn start(&self, mem: &Arc<MemTable>) -> Result<()> {
        let mut admit = self.admit.lock();
        self.rotate(&mut admit, mem, 0)
    }

    fn release_below(&self, log_number: u64) {
        if let Some(zones) = &self.zones {
            zones.release_below(log_number);
        }
        let mut logs = self.logs.lock();
        let keep = logs.split_off(&log_number);
        for path in std::mem::replace(&mut *logs, keep).into_values() {
            // NB: a log left behind is removed at the next open (`remove_below`).
            let _ = self.tiers.fs().remove_file(&path);
        }
    }

    fn spawn_threads(self: Arc<Self>, _host: Arc<dyn WalHost>) -> Vec<JoinHandle<()>> {
        self.zones.iter().map(ZoneWal::spawn).collect()
    }

    fn idle(&self) -> bool {
        self.tracker.lock().units.is_empty()
    }

    fn stop(&self) {
        if let Some(zones) = &self.zones {
            zones.stop();
        }
    }

    fn close(&self) -> Result<()> {
        let mut admit = self.admit.lock();
        admit.log = None;
        admit.mem = None;
        Ok(())
    }

    fn zone_stats(&self) -> Option<crate::stats::ZonedWalStats> {
        self.zones.as_ref().map(ZoneWal::stats)
    }

    fn io_path(&self) -> &'static str {
        if self.zones.is_some() {
            "zoned"
        } else {
            "append"
        }
    }
}

/// The append WAL's side of a memtable switch.
struct FileRoom<'a> {
    wal: &'a AppendWal,
    admit: &'a mut Admit,
    /// Bytes the write being admitted needs.
    need: u64,
}

impl LogRoom for FileRoom<'_> {
    fn is_full(&self) -> bool {
        if let Some(zones) = &self.wal.zones {
            // A zoned log spans zones; its share of the device bounds it.
            let need = zones.padded(self.need);
            return self.admit.mem.is_none()
                || (self.admit.tail > 0 && self.admit.tail + need > zones.log_budget());
        }
        match &self.admit.log {
            Some(log) => self.admit.tail + self.need > log.capacity,
            None => true,
        }
    }

    fn can_rotate(&self) -> bool {
        true
    }

    fn rotate(&mut self, mem: &Arc<MemTable>) -> Result<()> {
        self.wal.rotate(self.admit, mem, self.need)
    }
}
