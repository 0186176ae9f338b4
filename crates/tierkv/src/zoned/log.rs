//! [`ZoneLog`]: WALTZ's zone handling for a log written by zone append, kept out of the write
//! path.
//!
//! Writers append to the *active* zone with no lock. After each append the **replacement
//! checker** looks at the space left behind the returned offset: below `threshold` (1% of the
//! zone by default), one writer, the one that wins a cheap flag, makes a *reserved* empty zone
//! active; the others keep appending to the old zone's remainder, and an append the old zone
//! can no longer take (zone full) is retried on the new one. The **zone manager**, a
//! background thread parked on a condition variable while it has nothing to do, resets zones
//! the log has released into the reserve of empty zones (at least `RESERVED` at the start), so
//! that taking one is no I/O, learns each replaced zone's end with a **dummy append** (the
//! offset a one-LBA append lands at, instead of a zone report) and finishes it.
//!
//! Each append carries a *tag* (the WAL's log number); the log keeps the highest tag of each
//! zone. Once the owner says every tag below a watermark is obsolete (`release_below`), a
//! finished zone whose tags are all below it is released, and so is a zone the manager
//! finishes later: a zone goes back to the reserve as soon as it is both finished and
//! obsolete, not at the owner's next release.
//!
//! INVARIANT: a writer never allocates, finishes or resets a zone; it only waits for a
//! reserved zone when the manager fell behind, and each such wait is counted
//! (`reserved_waits`).
//! INVARIANT: a zone's tag is raised *before* the append that may land in it, so a zone whose
//! tag is below the watermark holds no record of a live log, even while appends are in flight.

use super::{ZoneError, ZoneId, ZonedDevice};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Empty zones the manager keeps ready.
pub(crate) const RESERVED: usize = 2;

/// The zone manager's work, for stats.
#[derive(Debug, Default)]
pub(crate) struct ZoneLogStats {
    /// Zones the manager finished after they were replaced.
    pub zones_finished: AtomicU64,
    /// Replacements that had to wait for a reserved zone.
    pub reserved_waits: AtomicU64,
    /// Appends retried on a new zone after the old one was full.
    pub full_retries: AtomicU64,
    /// Active-zone replacements.
    pub replacements: AtomicU64,
    /// One-LBA appends made to learn where a replaced zone's data ends.
    pub dummy_appends: AtomicU64,
}

impl ZoneLogStats {
    /// The counters as the database reports them.
    pub fn report(&self) -> crate::stats::ZonedWalStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        crate::stats::ZonedWalStats {
            zones_finished: get(&self.zones_finished),
            zone_replacements: get(&self.replacements),
            reserved_waits: get(&self.reserved_waits),
            full_retries: get(&self.full_retries),
            dummy_appends: get(&self.dummy_appends),
        }
    }
}

/// Zone bookkeeping shared by writers (on replacement only) and the manager.
struct Pool {
    /// Empty zones ready to become active (reset already: taking one is no I/O).
    reserved: VecDeque<ZoneId>,
    /// Replaced zones the manager is to finish.
    done: VecDeque<ZoneId>,
    /// Zones released by the log, to reset.
    released: VecDeque<ZoneId>,
    /// Where each finished zone's data ends (learned by the dummy append), oldest first.
    extents: Vec<(ZoneId, u64)>,
    stop: bool,
    /// Why zone work failed (a finish or reset the device refused): the log can no longer
    /// promise a next zone, so writers that need one fail instead of waiting for ever.
    failed: Option<String>,
}

/// A log spread over zones of a device, written by zone append.
pub(crate) struct ZoneLog {
    dev: Arc<dyn ZonedDevice>,
    /// The device, for error messages.
    path: PathBuf,
    active: AtomicU32,
    /// Set by the writer replacing the active zone.
    replacing: AtomicBool,
    /// Space left below which the active zone is replaced.
    threshold: u64,
    pool: Mutex<Pool>,
    /// Wakes the manager.
    work: Condvar,
    /// Wakes writers waiting for a reserved zone or a replacement.
    ready: Condvar,
    /// The highest tag appended (or about to be) to each zone.
    tags: Vec<AtomicU64>,
    /// Tags below this are obsolete.
    watermark: AtomicU64,
    /// Empty zones the manager keeps reset ahead; 0: the writer replacing a zone finishes it
    /// and resets the next one itself (zone allocation inside the write path).
    reserve: usize,
    stats: ZoneLogStats,
}

impl ZoneLog {
    /// A log over `zones` of `dev`, all EMPTY: the first becomes active, the rest are reserved.
    /// `threshold_pct` is the share of a zone (in percent) below which the active zone is
    /// replaced; `reserve` is how many empty zones the manager keeps reset ahead (0: none,
    /// see the field).
    pub fn new(
        dev: Arc<dyn ZonedDevice>,
        path: PathBuf,
        zones: Vec<ZoneId>,
        threshold_pct: f64,
        reserve: usize,
    ) -> Result<Arc<ZoneLog>> {
        if zones.len() < RESERVED + 1 {
            return Err(Error::invalid(format!(
                "zoned device {}: the WAL needs at least {} zones (one active, {RESERVED} \
                 reserved empty), it has {}",
                path.display(),
                RESERVED + 1,
                zones.len()
            )));
        }
        let mut reserved: VecDeque<ZoneId> = zones.into();
        let active = reserved.pop_front().expect("checked above");
        let capacity = dev.geometry().zone_capacity;
        let threshold = (capacity as f64 * threshold_pct / 100.0) as u64;
        let tags = (0..dev.geometry().zones)
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(Arc::new(ZoneLog {
            dev,
            path,
            active: AtomicU32::new(active),
            replacing: AtomicBool::new(false),
            threshold,
            pool: Mutex::new(Pool {
                reserved,
                done: VecDeque::new(),
                released: VecDeque::new(),
                extents: Vec::new(),
                stop: false,
                failed: None,
            }),
            work: Condvar::new(),
            ready: Condvar::new(),
            tags,
            watermark: AtomicU64::new(0),
            reserve,
            stats: ZoneLogStats::default(),
        }))
    }

    /// The zone manager's counters.
    pub fn stats(&self) -> &ZoneLogStats {
        &self.stats
    }

    /// The zone appends go to now.
    pub fn active(&self) -> ZoneId {
        self.active.load(Ordering::Acquire)
    }

    /// Finished zones and where their data ends, oldest first (the lazily recorded extents).
    #[cfg(test)]
    pub fn extents(&self) -> Vec<(ZoneId, u64)> {
        self.pool.lock().extents.clone()
    }

    /// Appends `data`, tagged `tag`, to the active zone; returns the zone and offset it
    /// landed at.
    pub fn append(&self, data: &[u8], fua: bool, tag: u64) -> Result<(ZoneId, u64)> {
        let capacity = self.dev.geometry().zone_capacity;
        loop {
            let zone = self.active();
            // NB: raised even when the append then finds the zone full: that only keeps the
            // zone a little longer.
            self.tags[zone as usize].fetch_max(tag, Ordering::AcqRel);
            match self.dev.append(zone, data, fua) {
                Ok(offset) => {
                    let left = capacity - offset - data.len() as u64;
                    if left < self.threshold {
                        self.replace(zone, false);
                    }
                    return Ok((zone, offset));
                }
                Err(ZoneError::ZoneFull { .. }) => {
                    self.stats.full_retries.fetch_add(1, Ordering::Relaxed);
                    self.replace(zone, true);
                    self.check_usable()?;
                }
                Err(e) => return Err(e.into_error(&self.path)),
            }
        }
    }

    /// An error once zone work failed or the log stopped: no next zone will come.
    fn check_usable(&self) -> Result<()> {
        let pool = self.pool.lock();
        let why = match (&pool.failed, pool.stop) {
            (Some(why), _) => why.clone(),
            (None, true) => "the zone log is stopped".to_string(),
            (None, false) => return Ok(()),
        };
        Err(Error::io(
            "zone",
            self.path.clone(),
            std::io::Error::other(why),
        ))
    }

    /// Records that zone work failed and wakes every waiting writer, which then fails.
    fn fail(&self, pool: &mut Pool, why: String) {
        pool.failed.get_or_insert(why);
        self.ready.notify_all();
    }

    /// Writes `data`, tagged `tag`, at the active zone's write pointer; returns the zone and
    /// offset. The caller is the log's only writer (a group-commit leader): with several,
    /// two could write at one pointer.
    pub fn write_at_pointer(&self, data: &[u8], fua: bool, tag: u64) -> Result<(ZoneId, u64)> {
        let capacity = self.dev.geometry().zone_capacity;
        loop {
            let zone = self.active();
            self.tags[zone as usize].fetch_max(tag, Ordering::AcqRel);
            let at = self
                .dev
                .zone(zone)
                .map_err(|e| e.into_error(&self.path))?
                .write_pointer;
            if at + data.len() as u64 > capacity {
                self.stats.full_retries.fetch_add(1, Ordering::Relaxed);
                self.replace(zone, true);
                self.check_usable()?;
                continue;
            }
            self.dev
                .write(zone, at, data, fua)
                .map_err(|e| e.into_error(&self.path))?;
            if capacity - at - (data.len() as u64) < self.threshold {
                self.replace(zone, false);
            }
            return Ok((zone, at));
        }
    }

    /// Makes a reserved zone active in place of `old`, unless another writer is doing it or
    /// did; with `wait`, returns only once `old` is no longer active.
    fn replace(&self, old: ZoneId, wait: bool) {
        if self.active() != old {
            return;
        }
        if self
            .replacing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            if wait {
                let mut pool = self.pool.lock();
                while self.active() == old && !pool.stop && pool.failed.is_none() {
                    self.ready.wait(&mut pool);
                }
            }
            return;
        }
        let mut pool = self.pool.lock();
        if self.active() == old {
            if let Some(new) = self.take_zone(&mut pool, old) {
                self.active.store(new, Ordering::Release);
                self.stats.replacements.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.replacing.store(false, Ordering::Release);
        drop(pool);
        self.work.notify_one();
        self.ready.notify_all();
    }

    /// A zone to make active in place of `old`, which goes to be finished: a reserved one,
    /// waiting (counted) for the manager if there is none; or, with no reserve, `old` is
    /// finished and the next zone reset here, in the write path. `None` once stopped.
    fn take_zone(
        &self,
        pool: &mut parking_lot::MutexGuard<'_, Pool>,
        old: ZoneId,
    ) -> Option<ZoneId> {
        if self.reserve == 0 {
            return self.allocate_inline(pool, old);
        }
        let mut waited = false;
        loop {
            if let Some(z) = pool.reserved.pop_front() {
                pool.done.push_back(old);
                return Some(z);
            }
            if pool.stop || pool.failed.is_some() {
                return None;
            }
            if !waited {
                waited = true;
                self.stats.reserved_waits.fetch_add(1, Ordering::Relaxed);
            }
            self.work.notify_one();
            self.ready.wait(pool);
        }
    }

    /// ZenFS's zone allocation, for the ablation: finishes `old` and takes an empty zone,
    /// resetting a released one when no zone is empty, all in the caller's write path.
    fn allocate_inline(
        &self,
        pool: &mut parking_lot::MutexGuard<'_, Pool>,
        old: ZoneId,
    ) -> Option<ZoneId> {
        match self.finish(old) {
            Some(_) if self.obsolete(old) => pool.released.push_back(old),
            Some(end) => pool.extents.push((old, end)),
            None => {
                self.fail(pool, format!("finishing zone {old} failed"));
                return None;
            }
        }
        let mut waited = false;
        loop {
            if let Some(z) = pool.reserved.pop_front() {
                return Some(z);
            }
            if let Some(z) = pool.released.pop_front() {
                if self.dev.reset(z).is_ok() {
                    self.tags[z as usize].store(0, Ordering::Release);
                    return Some(z);
                }
                self.fail(pool, format!("resetting zone {z} failed"));
                return None;
            }
            if pool.stop || pool.failed.is_some() {
                return None;
            }
            if !waited {
                waited = true;
                self.stats.reserved_waits.fetch_add(1, Ordering::Relaxed);
            }
            self.ready.wait(pool);
        }
    }

    /// Makes every tag below `watermark` obsolete: the finished zones holding only such
    /// tags, now or once the manager finishes them, go back to be reset for reuse.
    pub fn release_below(&self, watermark: u64) {
        self.watermark.fetch_max(watermark, Ordering::AcqRel);
        let mut pool = self.pool.lock();
        let (gone, kept): (Vec<_>, Vec<_>) =
            pool.extents.iter().partition(|&&(z, _)| self.obsolete(z));
        pool.extents = kept;
        pool.released.extend(gone.into_iter().map(|(z, _)| z));
        drop(pool);
        self.work.notify_one();
    }

    /// True when every tag of `zone` is below the watermark.
    fn obsolete(&self, zone: ZoneId) -> bool {
        self.tags[zone as usize].load(Ordering::Acquire) < self.watermark.load(Ordering::Acquire)
    }

    /// Hands finished zone `zone` back: the manager resets it for reuse.
    #[cfg(test)]
    pub fn release(&self, zone: ZoneId) {
        self.pool.lock().released.push_back(zone);
        self.work.notify_one();
    }

    /// Starts the zone manager.
    pub fn spawn_manager(self: &Arc<Self>) -> JoinHandle<()> {
        let log = Arc::clone(self);
        std::thread::Builder::new()
            .name("tierkv-zones".into())
            .spawn(move || log.manage())
            .expect("spawn the zone manager")
    }

    /// Stops the manager (it exits once its current step is done) and any waiting writer.
    pub fn stop(&self) {
        self.pool.lock().stop = true;
        self.work.notify_all();
        self.ready.notify_all();
    }

    /// The manager's loop: finish replaced zones, reset released ones into the reserve (up to
    /// `reserve` zones ahead); parked while there is nothing to do. Finishing goes first, so a zone released right
    /// after its replacement is finished before it is reset, never after.
    fn manage(&self) {
        let mut pool = self.pool.lock();
        loop {
            if pool.stop {
                return;
            }
            if let Some(zone) = pool.done.pop_front() {
                drop(pool);
                let end = self.finish(zone);
                pool = self.pool.lock();
                match end {
                    Some(_) if self.obsolete(zone) => pool.released.push_back(zone),
                    Some(end) => pool.extents.push((zone, end)),
                    None => self.fail(&mut pool, format!("finishing zone {zone} failed")),
                }
                continue;
            }
            let zone = if pool.reserved.len() < self.reserve {
                pool.released.pop_front()
            } else {
                None
            };
            if let Some(zone) = zone {
                drop(pool);
                let reset = self.dev.reset(zone).is_ok();
                if reset {
                    self.tags[zone as usize].store(0, Ordering::Release);
                }
                pool = self.pool.lock();
                pool.extents.retain(|&(z, _)| z != zone);
                if reset {
                    pool.reserved.push_back(zone);
                    self.ready.notify_all();
                } else {
                    self.fail(&mut pool, format!("resetting zone {zone} failed"));
                }
                continue;
            }
            self.work.wait(&mut pool);
        }
    }

    /// Learns where `zone`'s data ends with a dummy append, then finishes it. `None` if the
    /// device failed (the zone is left as it is).
    fn finish(&self, zone: ZoneId) -> Option<u64> {
        let g = *self.dev.geometry();
        let dummy = crate::env::AlignedBuf::zeroed(g.lba as usize);
        // NB: writers may still land appends behind the dummy; they are read back by the
        // recovery scan, which reads each zone to its write pointer, not to this end.
        self.stats.dummy_appends.fetch_add(1, Ordering::Relaxed);
        let end = match self.dev.append(zone, dummy.as_slice(), false) {
            Ok(offset) => offset,
            Err(ZoneError::ZoneFull { .. }) => g.zone_capacity,
            Err(_) => return None,
        };
        self.dev.finish(zone).ok()?;
        self.stats.zones_finished.fetch_add(1, Ordering::Relaxed);
        Some(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{AlignedBuf, FaultFs, Fs};
    use crate::zoned::emulator::EmulatedZoned;
    use crate::zoned::{Geometry, ZoneState};
    use std::path::Path;

    fn device(zone_size: u64, zones: u32) -> Arc<EmulatedZoned> {
        let fault = FaultFs::new(1);
        fault.create_dir_all(Path::new("/d")).unwrap();
        let fs: Arc<dyn Fs> = fault;
        let g = Geometry::new(zone_size, zones);
        Arc::new(EmulatedZoned::open(fs.as_ref(), Path::new("/d/zoned"), g, false).unwrap())
    }

    fn log(dev: &Arc<EmulatedZoned>, zones: u32) -> Arc<ZoneLog> {
        let d: Arc<dyn ZonedDevice> = dev.clone();
        ZoneLog::new(d, "/d/zoned".into(), (0..zones).collect(), 1.0, RESERVED).unwrap()
    }

    #[test]
    fn a_device_too_small_for_two_reserved_zones_is_refused() {
        let dev = device(64 << 10, 2);
        let d: Arc<dyn ZonedDevice> = dev;
        let err = ZoneLog::new(d, "/d/zoned".into(), vec![0, 1], 1.0, RESERVED)
            .err()
            .unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains("/d/zoned") && msg.contains("at least 3 zones"),
            "{msg}"
        );
    }

    /// WALTZ's claim: with 1 MiB zones and 8 writers, zone replacement and allocation stay out
    /// of the write path (no append waits for a reserved zone), and every append lands once.
    #[test]
    fn eight_writers_never_wait_for_a_zone() {
        const WRITERS: usize = 8;
        const PER_WRITER: usize = 400;
        let dev = device(1 << 20, 24);
        let zl = log(&dev, 24);
        let manager = zl.spawn_manager();
        let threads: Vec<_> = (0..WRITERS)
            .map(|w| {
                let zl = Arc::clone(&zl);
                std::thread::spawn(move || {
                    let mut landed = Vec::new();
                    for i in 0..PER_WRITER {
                        let mut rec = AlignedBuf::zeroed(4096);
                        rec.as_mut_slice()[..8]
                            .copy_from_slice(&((w * PER_WRITER + i + 1) as u64).to_le_bytes());
                        landed.push((
                            zl.append(rec.as_slice(), false, 0).unwrap(),
                            w * PER_WRITER + i + 1,
                        ));
                        // A WAL writer also applies its batch to the memtable between appends.
                        std::thread::yield_now();
                    }
                    landed
                })
            })
            .collect();
        let mut landed: Vec<_> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        // Give the manager the last replaced zones, then stop it.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while zl.stats().zones_finished.load(Ordering::Relaxed)
            < zl.stats().replacements.load(Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        zl.stop();
        manager.join().unwrap();
        let s = zl.stats();
        let replacements = s.replacements.load(Ordering::Relaxed);
        assert!(
            replacements >= 2,
            "{WRITERS}x{PER_WRITER} 4 KiB appends span several 1 MiB zones"
        );
        assert_eq!(
            s.reserved_waits.load(Ordering::Relaxed),
            0,
            "an append waited for a zone"
        );
        assert_eq!(s.zones_finished.load(Ordering::Relaxed), replacements);
        landed.sort_unstable();
        landed.dedup_by_key(|(at, _)| *at);
        assert_eq!(
            landed.len(),
            WRITERS * PER_WRITER,
            "two appends landed at one place"
        );
        let mut buf = vec![0u8; 4096];
        for ((zone, offset), id) in landed {
            dev.read(zone, offset, &mut buf).unwrap();
            assert_eq!(&buf[..8], &(id as u64).to_le_bytes());
        }
        for (zone, end) in zl.extents() {
            assert_eq!(dev.zone(zone).unwrap().state, ZoneState::Full);
            assert!(end > (1 << 20) * 98 / 100, "zone {zone} replaced at {end}");
        }
    }

    #[test]
    fn released_zones_are_reset_and_reused() {
        let dev = device(64 << 10, 4);
        let zl = log(&dev, 4);
        let manager = zl.spawn_manager();
        let rec = AlignedBuf::zeroed(4096);
        let mut zones = Vec::new();
        for _ in 0..(16 * 8) {
            let (zone, _) = zl.append(rec.as_slice(), false, 0).unwrap();
            if zones.last() != Some(&zone) {
                if let Some(&prev) = zones.last() {
                    // Wait for the manager to finish the zone, then give it back.
                    while dev.zone(prev).unwrap().state != ZoneState::Full {
                        std::thread::yield_now();
                    }
                    zl.release(prev);
                }
                zones.push(zone);
            }
        }
        let s = zl.stats();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while s.zones_finished.load(Ordering::Relaxed) < s.replacements.load(Ordering::Relaxed)
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        zl.stop();
        manager.join().unwrap();
        assert!(
            zones.len() >= 8,
            "four zones were used round and round: {zones:?}"
        );
        assert!(s.replacements.load(Ordering::Relaxed) >= 7);
        assert_eq!(
            s.zones_finished.load(Ordering::Relaxed),
            s.replacements.load(Ordering::Relaxed)
        );
    }

    /// A zone the owner made obsolete before the manager finished it is released once
    /// finished, without waiting for the owner's next release, and reset as soon as the
    /// reserve runs short; a zone holding a live tag stays.
    #[test]
    fn a_zone_obsolete_before_it_is_finished_is_reset_once_finished() {
        let dev = device(64 << 10, 4);
        let zl = log(&dev, 4);
        let rec = AlignedBuf::zeroed(4096);
        let fill = |tag: u64| {
            let zone = zl.active();
            while zl.active() == zone {
                zl.append(rec.as_slice(), false, tag).unwrap();
            }
            zone
        };
        let first = fill(1);
        let second = zl.active();
        zl.append(rec.as_slice(), false, 2).unwrap();
        // Log 1 is obsolete, log 2 is live; nothing is finished yet.
        zl.release_below(2);
        assert_eq!(dev.zone(first).unwrap().state, ZoneState::Full);
        let manager = zl.spawn_manager();
        let wait_for = |done: &dyn Fn() -> bool| {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while !done() && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        };
        wait_for(&|| zl.stats().zones_finished.load(Ordering::Relaxed) == 1);
        assert!(zl.extents().is_empty(), "{:?}", zl.extents());
        // Taking a reserved zone leaves the reserve short: the manager resets `first`.
        fill(2);
        wait_for(&|| dev.zone(first).unwrap().state == ZoneState::Empty);
        zl.stop();
        manager.join().unwrap();
        assert_eq!(dev.zone(first).unwrap().state, ZoneState::Empty);
        assert_ne!(dev.zone(second).unwrap().state, ZoneState::Empty);
        assert_eq!(zl.stats().dummy_appends.load(Ordering::Relaxed), 2);
    }

    /// With no reserve, the writer replacing the active zone finishes it and resets a
    /// released zone itself: the zone work is in the write path, and the log still goes round
    /// the device.
    #[test]
    fn with_no_reserve_the_writer_allocates_zones_itself() {
        let dev = device(64 << 10, 4);
        let d: Arc<dyn ZonedDevice> = dev.clone();
        let zl = ZoneLog::new(d, "/d/zoned".into(), (0..4).collect(), 1.0, 0).unwrap();
        let rec = AlignedBuf::zeroed(4096);
        let mut zones = vec![zl.active()];
        for _ in 0..(16 * 10) {
            zl.write_at_pointer(rec.as_slice(), false, zones.len() as u64)
                .unwrap();
            if zl.active() != *zones.last().unwrap() {
                // Every zone but the active one is obsolete.
                zl.release_below(zones.len() as u64 + 1);
                zones.push(zl.active());
            }
        }
        let s = zl.stats();
        assert!(zones.len() >= 9, "{zones:?}");
        assert_eq!(
            s.zones_finished.load(Ordering::Relaxed),
            s.replacements.load(Ordering::Relaxed),
            "finished inline, with no manager running"
        );
        assert_eq!(s.reserved_waits.load(Ordering::Relaxed), 0);
    }
}
