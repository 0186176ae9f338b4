//! [`ZoneFs`]: a file system whose files live as extents in the zones of one zoned device, so a
//! tier's tables can live on a zoned SSD (ZenFS's design, written for tierkv). Format and
//! contract: `docs/zonefs.md`.
//!
//! One directory of the base file system holds the device file ([`DEVICE_FILE`]); every other
//! file of that directory lives in the device. Zones 0 and 1 hold the metadata journal
//! ([`journal`], written by [`meta`]); the others hold data ([`zones`]).
//!
//! Contract, where it differs from [`Fs`]'s:
//! - Appends are buffered until a whole LBA, and only a `sync` makes a file's bytes durable and
//!   readable after a restart: a process crash loses unsynced appends as a power loss would.
//!   Tables are synced before they are installed, so they may live here; a WAL, the MANIFEST,
//!   CURRENT, LOCK and the parallel WAL's area (positional files) must not.
//! - Creations, renames and removals are durable when the call returns (the journal is synced);
//!   `sync_dir` has nothing left to do.
//! - A removed file's open readers fail: its zones may be reset at once.
//! - A full device is an `Io` error of kind `StorageFull` and changes nothing.

mod background;
mod consistency;
mod file;
mod gc;
mod image;
pub(crate) mod journal;
mod meta;
mod recover;
mod route;
pub(crate) mod zones;

pub use consistency::ZoneCheck;
pub use image::{
    JournalPosition, ZoneExtent, ZoneFileView, ZoneGeometry, ZoneRole, ZoneView, ZonedDir,
    ZonedTierImage,
};
pub(crate) use route::route_zoned_tiers;

use crate::env::{FileLock, Fs, Lifetime, PositionalFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::zoned::emulator::EmulatedZoned;
use crate::zoned::{Geometry, ZoneId, ZonedDevice};
use background::{BackgroundGc, GcSignal};
use file::{FileNode, ZoneReader, ZoneWriter};
use journal::{Extent, Record};
use meta::Meta;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use zones::{NoZone, ZoneTable};

/// Name of the device file in the tier directory.
pub const DEVICE_FILE: &str = "ZONED-DEVICE";
/// The zones reserved for the metadata journal.
pub(crate) const META_ZONES: [ZoneId; 2] = [0, 1];
/// Data zones a device needs beyond the metadata zones.
pub(crate) const MIN_DATA_ZONES: u32 = 2;

/// The background collector's copy budget: well below what the emulated device takes, so
/// foreground writes keep most of its bandwidth while enough zones are free.
pub(crate) const DEFAULT_GC_BYTES_PER_SEC: u64 = 256 << 20;

/// Settings of a [`ZoneFs`] besides the device geometry.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ZoneFsConfig {
    /// The background collector runs while fewer data zones than this are free (0: no
    /// background collector).
    pub gc_high_free_zones: u32,
    /// A writer taking a zone while fewer data zones than this are free empties one itself
    /// first: the foreground path, a last resort when the background one falls behind.
    pub gc_low_free_zones: u32,
    /// Bytes per second the background collector copies while it is not urgent (0: unpaced).
    pub gc_bytes_per_sec: u64,
    /// Opened read-only: recovery writes nothing (no reset, no finish, no new journal
    /// generation) and every change is refused.
    pub read_only: bool,
}

impl ZoneFsConfig {
    /// Background collection below an eighth of the zones free (at least the low watermark
    /// plus two), foreground below a twentieth (at least two).
    pub fn for_geometry(g: &Geometry) -> ZoneFsConfig {
        let low = (g.zones / 20).max(2);
        ZoneFsConfig {
            gc_high_free_zones: (g.zones / 8).max(low + 2),
            gc_low_free_zones: low,
            gc_bytes_per_sec: DEFAULT_GC_BYTES_PER_SEC,
            read_only: false,
        }
    }

    /// No automatic collection: only a writer that finds the device full collects.
    #[cfg(test)]
    pub fn manual() -> ZoneFsConfig {
        ZoneFsConfig {
            gc_high_free_zones: 0,
            gc_low_free_zones: 0,
            gc_bytes_per_sec: 0,
            read_only: false,
        }
    }
}

/// Who runs a garbage collection, for the stats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GcMode {
    /// The background collector thread.
    Background,
    /// A writer that needed a zone (or a full device's last try).
    Foreground,
}

/// What the zone file system of a tier with `tables = "zones"` has done, for
/// [`crate::Stats::zoned_tiers`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ZoneFsStats {
    /// Bytes the engine appended to files.
    pub engine_bytes: u64,
    /// Bytes of file data written to zones, padding included.
    pub data_bytes: u64,
    /// Of `data_bytes`, the zeros that padded a synced file's last LBA.
    pub padding_bytes: u64,
    /// Bytes the garbage collector copied (background and foreground).
    pub gc_bytes: u64,
    /// Of `gc_bytes`, copied by the background collector.
    pub gc_background_bytes: u64,
    /// Of `gc_bytes`, copied by writers collecting in the foreground.
    pub gc_foreground_bytes: u64,
    /// Bytes of journal commits and snapshots.
    pub meta_bytes: u64,
    /// Data zones empty.
    pub zones_free: u64,
    /// Data zones open or partly written.
    pub zones_active: u64,
    /// Data zones written to capacity.
    pub zones_full: u64,
    /// Bytes of data zones held by files not removed (LBA-rounded extents).
    pub live_bytes: u64,
    /// Zones the garbage collector emptied (background and foreground).
    pub gc_zones_reclaimed: u64,
    /// Of `gc_zones_reclaimed`, emptied by the background collector.
    pub gc_background_zones: u64,
    /// Of `gc_zones_reclaimed`, emptied by writers in the foreground.
    pub gc_foreground_zones: u64,
    /// Zone resets.
    pub resets: u64,
}

impl ZoneFsStats {
    /// Bytes written to zones per byte the engine wrote (1.0 before any write).
    pub fn write_amplification(&self) -> f64 {
        if self.engine_bytes == 0 {
            return 1.0;
        }
        (self.data_bytes + self.gc_bytes + self.meta_bytes) as f64 / self.engine_bytes as f64
    }
}

/// Counters behind [`ZoneFsStats`].
#[derive(Default)]
struct Counters {
    engine: AtomicU64,
    data: AtomicU64,
    padding: AtomicU64,
    gc: AtomicU64,
    gc_background: AtomicU64,
    gc_foreground: AtomicU64,
    meta: AtomicU64,
    gc_zones: AtomicU64,
    gc_background_zones: AtomicU64,
    gc_foreground_zones: AtomicU64,
    resets: AtomicU64,
}

fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// A file system in the zones of one emulated zoned device, with its background garbage
/// collector (stopped when the file system is dropped).
pub struct ZoneFs {
    inner: Arc<Inner>,
    /// The background collector (none when read-only or disabled), stopped and joined on drop.
    _collector: Option<BackgroundGc>,
}

/// The shared state. Lock order: `gc_lock`, then `meta`, then a file's state, then `zones`;
/// none is taken the other way round. `zones` is held only for bookkeeping and resets.
pub(crate) struct Inner {
    dev: EmulatedZoned,
    base: Arc<dyn Fs>,
    dir: PathBuf,
    lba: u64,
    config: ZoneFsConfig,
    meta: Mutex<Meta>,
    zones: Mutex<ZoneTable>,
    /// Signalled when a writer releases a zone or a zone is reset.
    zone_released: Condvar,
    /// Writers waiting for a zone now: the background collector steps aside for them.
    writers_waiting: AtomicUsize,
    /// Held across a collection pass: one collector at a time.
    gc_lock: Mutex<()>,
    /// Wakes and stops the background collector.
    gc_signal: Arc<GcSignal>,
    counters: Counters,
    /// Set when a journal write failed: the in-memory namespace may be ahead of the durable
    /// one, so nothing more is changed until a reopen.
    poisoned: AtomicBool,
}

impl ZoneFs {
    /// Opens (formatting if new) the zoned device `<dir>/ZONED-DEVICE` on `base` with
    /// `geometry`, and recovers the files from its journal.
    pub(crate) fn open(
        base: Arc<dyn Fs>,
        dir: &Path,
        geometry: Geometry,
        config: ZoneFsConfig,
    ) -> Result<ZoneFs> {
        let device = dir.join(DEVICE_FILE);
        validate_geometry(&geometry, &device)?;
        if config.read_only {
            if !base.exists(&device) {
                return Err(Error::io(
                    "open zoned device (read-only)",
                    device,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                ));
            }
        } else {
            crate::env::create_dir_all_durable(base.as_ref(), dir)?;
        }
        let dev = EmulatedZoned::open(base.as_ref(), &device, geometry, false)?;
        let inner = Arc::new(recover::recover(dev, base, dir, config)?);
        let collector = if config.gc_high_free_zones > 0 && !config.read_only {
            let started = BackgroundGc::start(Arc::clone(&inner));
            Some(started.map_err(|e| Error::io("start zone garbage collector", &device, e))?)
        } else {
            None
        };
        Ok(ZoneFs {
            inner,
            _collector: collector,
        })
    }

    /// The directory this file system serves.
    pub fn dir(&self) -> &Path {
        &self.inner.dir
    }

    /// What the file system has done, and its zones now.
    pub fn stats(&self) -> ZoneFsStats {
        let c = &self.inner.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let z = self.inner.zones.lock();
        ZoneFsStats {
            engine_bytes: get(&c.engine),
            data_bytes: get(&c.data),
            padding_bytes: get(&c.padding),
            gc_bytes: get(&c.gc),
            gc_background_bytes: get(&c.gc_background),
            gc_foreground_bytes: get(&c.gc_foreground),
            meta_bytes: get(&c.meta),
            zones_free: z.free() as u64,
            zones_active: z.active() as u64,
            zones_full: z.full() as u64,
            live_bytes: z.slots.iter().map(|s| s.live).sum(),
            gc_zones_reclaimed: get(&c.gc_zones),
            gc_background_zones: get(&c.gc_background_zones),
            gc_foreground_zones: get(&c.gc_foreground_zones),
            resets: get(&c.resets),
        }
    }

    /// Bytes of file data the device can hold: its data zones' capacity.
    pub fn data_capacity(&self) -> u64 {
        data_capacity(self.inner.dev.geometry())
    }

    /// Each zone's use and live bytes, and the zones each live file's extents are in.
    #[cfg(test)]
    pub(crate) fn zone_map(&self) -> (Vec<zones::ZoneSlot>, HashMap<String, Vec<Extent>>) {
        // NB: between a collection's commit and its reset the counts are mid-change.
        let _no_collection = self.inner.gc_lock.lock();
        let meta = self.inner.meta.lock();
        let files = meta
            .files
            .iter()
            .map(|(name, node)| (name.clone(), node.extents()))
            .collect();
        (self.inner.zones.lock().slots.clone(), files)
    }

    /// Runs one garbage collection pass now, whatever the free zones.
    #[cfg(test)]
    pub(crate) fn collect_garbage(&self) -> Result<usize> {
        self.inner.collect(usize::MAX, GcMode::Foreground)
    }

    /// Wakes the background collector and waits (at most `timeout`) for a pass of it.
    #[cfg(test)]
    pub(crate) fn run_background_pass(&self, timeout: Duration) {
        self.inner.gc_signal.run_pass(timeout);
    }

    /// Data zones free now.
    #[cfg(test)]
    pub(crate) fn free_zones(&self) -> usize {
        self.inner.free_zones()
    }

    /// The name of `path` in this directory, or an error naming the path.
    fn name_of(&self, path: &Path) -> Result<String> {
        self.inner.name_of(path)
    }
}

/// Bytes of file data a device of geometry `g` holds: its data zones' capacity.
pub(crate) fn data_capacity(g: &Geometry) -> u64 {
    u64::from(g.zones.saturating_sub(META_ZONES.len() as u32)) * g.zone_capacity
}

/// Checks that the geometry leaves room for the journal and data and for one writer beside it.
pub(crate) fn validate_geometry(g: &Geometry, device: &Path) -> Result<()> {
    g.validate(&format!("zoned device {}", device.display()))?;
    let needed = META_ZONES.len() as u32 + MIN_DATA_ZONES;
    if g.zones < needed {
        return Err(Error::invalid(format!(
            "zoned device {}: {} zones is too few; tables on zones need {needed} (2 for the \
             metadata journal and at least {MIN_DATA_ZONES} for data)",
            device.display(),
            g.zones
        )));
    }
    if g.max_open < 2 || g.max_active < 2 {
        return Err(Error::invalid(format!(
            "zoned device {}: tables on zones need at least 2 open and 2 active zones (the \
             journal's and a writer's); the device allows {} open and {} active",
            device.display(),
            g.max_open,
            g.max_active
        )));
    }
    Ok(())
}

impl Inner {
    fn device_path(&self) -> PathBuf {
        self.dir.join(DEVICE_FILE)
    }

    fn zone_error(&self, e: crate::zoned::ZoneError) -> Error {
        e.into_error(&self.device_path())
    }

    fn name_of(&self, path: &Path) -> Result<String> {
        let in_dir = path.parent() == Some(self.dir.as_path());
        match path.file_name().and_then(|n| n.to_str()) {
            Some(name) if in_dir && name != DEVICE_FILE => Ok(name.to_string()),
            _ => Err(Error::invalid(format!(
                "{} is not a file of the zoned directory {}",
                path.display(),
                self.dir.display()
            ))),
        }
    }

    fn check_usable(&self) -> Result<()> {
        if self.config.read_only {
            return Err(Error::io(
                "zonefs",
                self.device_path(),
                std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    "the zoned device is opened read-only",
                ),
            ));
        }
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::io(
                "zonefs",
                self.device_path(),
                std::io::Error::other(
                    "an earlier metadata journal write failed; reopen the database",
                ),
            ));
        }
        Ok(())
    }

    /// Writes `records` to the journal durably; a failure poisons the file system.
    fn commit(&self, meta: &mut Meta, records: &[Record]) -> Result<()> {
        self.check_usable()?;
        match meta.commit(self, records) {
            Ok(bytes) => {
                add(&self.counters.meta, bytes);
                Ok(())
            }
            Err(e) => {
                self.poisoned.store(true, Ordering::Release);
                Err(e)
            }
        }
    }

    /// Hands a writer a zone for a file with `hint`: wakes the background collector below
    /// the high watermark of free zones, collects itself below the low one, waits while
    /// other writers hold every zone it could take, and fails with `StorageFull` when the
    /// device is full.
    fn take_zone(&self, hint: Lifetime) -> Result<(ZoneId, u64)> {
        loop {
            self.check_usable()?;
            let free = self.free_zones();
            if free < self.config.gc_high_free_zones as usize {
                self.gc_signal.wake();
            }
            if free < self.config.gc_low_free_zones as usize {
                self.collect(1, GcMode::Foreground)?;
            }
            let mut z = self.zones.lock();
            match z.take(hint) {
                Ok(id) => return Ok((id, z.slots[id as usize].wp)),
                Err(NoZone::Wait) => {
                    self.writers_waiting.fetch_add(1, Ordering::AcqRel);
                    // NB: a timeout only re-checks; a release always signals.
                    self.zone_released
                        .wait_for(&mut z, Duration::from_millis(100));
                    self.writers_waiting.fetch_sub(1, Ordering::AcqRel);
                }
                Err(NoZone::Full) => {
                    drop(z);
                    if self.collect(1, GcMode::Foreground)? == 0 {
                        return Err(self.full_error());
                    }
                }
            }
        }
    }

    fn free_zones(&self) -> usize {
        self.zones.lock().free()
    }

    fn full_error(&self) -> Error {
        Error::io(
            "zone write",
            self.device_path(),
            std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                "every zone of the zoned device holds live data",
            ),
        )
    }

    /// After a failed write to `zone`, takes the device's write pointer when it is ahead: the
    /// failed write may have moved it (its bytes are dead), and a stale one would make every
    /// later write to the zone fail until a reopen.
    fn take_device_wp(&self, z: &mut ZoneTable, zone: ZoneId) {
        if let Ok(info) = self.dev.zone(zone) {
            let slot = &mut z.slots[zone as usize];
            slot.wp = slot.wp.max(info.write_pointer);
        }
    }

    /// A writer gives its zone back.
    fn release_zone(&self, id: ZoneId) {
        self.zones.lock().release(id);
        self.zone_released.notify_all();
        // NB: the zone may hold only bytes of a file removed while it was written.
        let _ = self.reset_dead_zones();
    }

    /// Resets every zone holding no live byte. Called after the records that killed the bytes
    /// are durable.
    fn reset_dead_zones(&self) -> Result<()> {
        let mut z = self.zones.lock();
        let reset = self.reset_dead_in(&mut z);
        drop(z);
        self.zone_released.notify_all();
        reset.map(|_| ())
    }

    /// Ends a collection's pin on `victim` and resets every zone holding no live byte; true
    /// when `victim` was among them. Under one lock, so no other reset takes the victim in
    /// between.
    fn unpin_and_reset_dead(&self, victim: ZoneId) -> Result<bool> {
        let mut z = self.zones.lock();
        z.collecting = None;
        let reset = self.reset_dead_in(&mut z);
        drop(z);
        self.zone_released.notify_all();
        Ok(reset?.contains(&victim))
    }

    /// Resets the dead zones of `z`, returning them.
    fn reset_dead_in(&self, z: &mut ZoneTable) -> Result<Vec<ZoneId>> {
        let dead = z.dead();
        for &id in &dead {
            self.dev.reset(id).map_err(|e| self.zone_error(e))?;
            z.mark_reset(id);
            add(&self.counters.resets, 1);
        }
        Ok(dead)
    }

    /// Drops a removed file's extents from the live bytes and resets the zones left dead.
    fn forget_file(&self, node: &FileNode) -> Result<()> {
        let extents = node.mark_removed();
        {
            let mut z = self.zones.lock();
            for e in &extents {
                let slot = &mut z.slots[e.zone as usize];
                slot.live = slot.live.saturating_sub(e.occupied(self.lba));
            }
        }
        self.reset_dead_zones()
    }
}

impl Fs for ZoneFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.create_with_lifetime(path, Lifetime::NotSet)
    }

    fn create_with_lifetime(
        &self,
        path: &Path,
        lifetime: Lifetime,
    ) -> Result<Box<dyn WritableFile>> {
        let name = self.name_of(path)?;
        let node = self.inner.create_file(&name)?;
        Ok(Box::new(ZoneWriter::new(
            Arc::clone(&self.inner),
            node,
            path.to_path_buf(),
            lifetime,
        )))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let node = self.inner.lookup(path)?;
        Ok(Box::new(ZoneWriter::new(
            Arc::clone(&self.inner),
            node,
            path.to_path_buf(),
            Lifetime::NotSet,
        )))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let node = self.inner.lookup(path)?;
        Ok(Arc::new(ZoneReader::new(
            Arc::clone(&self.inner),
            node,
            path.to_path_buf(),
        )))
    }

    fn exists(&self, path: &Path) -> bool {
        if path == self.inner.dir || path == self.inner.device_path() {
            return self.inner.base.exists(path);
        }
        match self.name_of(path) {
            Ok(name) => self.inner.meta.lock().files.contains_key(&name),
            Err(_) => false,
        }
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        if dir != self.inner.dir {
            return self.inner.base.list_dir(dir);
        }
        Ok(self.inner.meta.lock().files.keys().cloned().collect())
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.base.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        let name = self.name_of(path)?;
        self.inner.remove(&name, path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        let from_name = self.name_of(from)?;
        let to_name = self.name_of(to)?;
        self.inner.rename(&from_name, &to_name, from)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        if dir == self.inner.dir {
            // Every namespace change was journaled durably when it was made.
            return self.inner.check_usable();
        }
        self.inner.base.sync_dir(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        Ok(self.inner.lookup(path)?.size())
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.base.lock(path)
    }

    fn open_positional(&self, path: &Path, _len: u64) -> Result<Arc<dyn PositionalFile>> {
        Err(Error::invalid(format!(
            "{}: positional files (the parallel WAL's area) cannot live on a zoned tier",
            path.display()
        )))
    }
}

impl Inner {
    fn not_found(path: &Path) -> Error {
        Error::io(
            "open",
            path,
            std::io::Error::from(std::io::ErrorKind::NotFound),
        )
    }

    fn lookup(&self, path: &Path) -> Result<Arc<FileNode>> {
        let name = self.name_of(path)?;
        self.meta
            .lock()
            .files
            .get(&name)
            .cloned()
            .ok_or_else(|| Self::not_found(path))
    }

    /// Creates `name`, replacing (removing) a file of that name, durably.
    fn create_file(&self, name: &str) -> Result<Arc<FileNode>> {
        let mut meta = self.meta.lock();
        let id = meta.next_id;
        meta.next_id += 1;
        let mut records = Vec::new();
        let replaced = meta.files.get(name).cloned();
        if let Some(old) = &replaced {
            records.push(Record::Delete { id: old.id });
        }
        records.push(Record::Create {
            id,
            name: name.to_string(),
        });
        self.commit(&mut meta, &records)?;
        let node = Arc::new(FileNode::new(id, 0, Vec::new()));
        meta.files.insert(name.to_string(), Arc::clone(&node));
        drop(meta);
        if let Some(old) = replaced {
            self.forget_file(&old)?;
        }
        Ok(node)
    }

    fn remove(&self, name: &str, path: &Path) -> Result<()> {
        let mut meta = self.meta.lock();
        let Some(node) = meta.files.get(name).cloned() else {
            return Err(Self::not_found(path));
        };
        self.commit(&mut meta, &[Record::Delete { id: node.id }])?;
        meta.files.remove(name);
        drop(meta);
        self.forget_file(&node)
    }

    fn rename(&self, from: &str, to: &str, path: &Path) -> Result<()> {
        let mut meta = self.meta.lock();
        let Some(node) = meta.files.get(from).cloned() else {
            return Err(Self::not_found(path));
        };
        if from == to {
            return Ok(());
        }
        let replaced = meta.files.get(to).cloned();
        let mut records = Vec::new();
        if let Some(old) = &replaced {
            records.push(Record::Delete { id: old.id });
        }
        records.push(Record::Rename {
            id: node.id,
            name: to.to_string(),
        });
        self.commit(&mut meta, &records)?;
        meta.files.remove(from);
        meta.files.insert(to.to_string(), node);
        drop(meta);
        if let Some(old) = replaced {
            self.forget_file(&old)?;
        }
        Ok(())
    }

    /// Journals a file's synced size and extents, unless it was removed meanwhile.
    fn record_sync(&self, node: &FileNode, size: u64, extents: Vec<Extent>) -> Result<()> {
        let mut meta = self.meta.lock();
        if node.is_removed() {
            return Ok(());
        }
        self.commit(
            &mut meta,
            &[Record::Extents {
                id: node.id,
                size,
                extents: extents.clone(),
            }],
        )?;
        node.set_synced(size, extents);
        Ok(())
    }
}

/// The files by name, for the journal's snapshot.
pub(crate) type Files = HashMap<String, Arc<FileNode>>;

#[cfg(test)]
mod tests;
