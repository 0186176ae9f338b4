//! [`EmulatedZoned`]: a zoned device kept in one regular file (or raw block device), through the
//! [`Fs`] seam, so that it runs on any tier and under [`crate::env::FaultFs`]'s crash model.
//!
//! Layout (little-endian), every part LBA-aligned:
//!
//! ```text
//! LBA 0        superblock: "TKVZONED" | version u32 | lba u64 | zone_size u64
//!              | zone_capacity u64 | zones u32 | crc32c u32 (of the bytes before it)
//! LBA 1..=T    zone table: 8 bytes per zone: state code u8 | 0xA5 0xA5 0xA5 | crc32c u32 of
//!              the first 4 bytes; all zeros = "no entry: derive the state from the data"
//! data_start   zone 0, zone 1, ... each `zone_size` bytes
//! ```
//!
//! The write pointer is never persisted: after a restart it is the end of the last LBA of the
//! zone holding a non-zero byte (a data scan), so it is what reached the media, not what a
//! writer believed. The table persists only what the data cannot tell: FULL (a zone finished
//! before its capacity), READ_ONLY and OFFLINE. A zone without an entry comes back EMPTY
//! (write pointer 0), FULL (at capacity) or CLOSED (in between); open zones do not survive a
//! restart, as on a real device.
//!
//! INVARIANT: bytes of a zone at or past its write pointer are zeros (reset zeroes what was
//! written before it forgets the zone). So a caller whose writes may end in an all-zero LBA
//! must not rely on that LBA surviving a restart: the scan cannot tell it from unwritten space.
//!
//! Writes go through [`PositionalFile::write_at`], which uses `O_DIRECT` for aligned durable
//! writes where the file system allows it and the page cache otherwise. With power-loss
//! protection every write is written durably, as such a device keeps completed writes.

use super::{Geometry, ZoneError, ZoneId, ZoneInfo, ZoneState, ZonedDevice, DEFAULT_LBA};
use crate::coding;
use crate::env::{Fs, PositionalFile};
use crate::error::{Error, Result};
use parking_lot::{Condvar, Mutex};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// First bytes of an emulated zoned device.
const MAGIC: &[u8; 8] = b"TKVZONED";
/// Layout version.
const VERSION: u32 = 1;
/// Bytes of the superblock before its checksum.
const SUPER_BODY: usize = 8 + 4 + 8 + 8 + 8 + 4;
/// Bytes of one zone-table entry.
const ENTRY: usize = 8;
/// Marker bytes of a table entry.
const ENTRY_MARK: u8 = 0xA5;
/// Bytes read at a time by the write-pointer scan.
const SCAN_CHUNK: u64 = 1 << 20;

/// One zone's volatile state.
#[derive(Debug, Clone, Copy)]
struct Zone {
    state: ZoneState,
    wp: u64,
    /// Writes reserved and not yet completed.
    inflight: u32,
    /// A reset is zeroing the zone: it takes no writes.
    resetting: bool,
}

/// Every zone's state, under one lock held only for bookkeeping, never across I/O.
struct Zones {
    zones: Vec<Zone>,
    /// Implicitly opened zones, oldest first: the ones a new open may close.
    implicit: Vec<ZoneId>,
}

impl Zones {
    fn open_count(&self) -> usize {
        self.zones.iter().filter(|z| z.state.is_open()).count()
    }

    fn active_count(&self) -> usize {
        self.zones.iter().filter(|z| z.state.is_active()).count()
    }

    /// Takes the open (and, from EMPTY, active) resources zone `id` needs to become
    /// `target`, closing the oldest implicitly opened zone if the open limit is reached.
    fn acquire(&mut self, g: &Geometry, id: ZoneId, target: ZoneState) -> Result<(), ZoneError> {
        let z = self.zones[id as usize];
        if z.state.is_open() {
            self.set_open(id, target);
            return Ok(());
        }
        if z.state == ZoneState::Empty && self.active_count() >= g.max_active as usize {
            return Err(ZoneError::TooManyActive { zone: id });
        }
        if self.open_count() >= g.max_open as usize {
            let Some(&victim) = self.implicit.first() else {
                return Err(ZoneError::TooManyOpen { zone: id });
            };
            self.implicit.remove(0);
            self.zones[victim as usize].state = ZoneState::Closed;
        }
        self.set_open(id, target);
        Ok(())
    }

    fn set_open(&mut self, id: ZoneId, target: ZoneState) {
        self.implicit.retain(|&z| z != id);
        if target == ZoneState::ImplicitOpen {
            self.implicit.push(id);
        }
        // NB: an explicitly opened zone stays explicit when a write reopens it.
        let z = &mut self.zones[id as usize];
        if z.state != ZoneState::ExplicitOpen {
            z.state = target;
        }
    }

    /// Puts zone `id` in `state`, which holds no open resource.
    fn set_settled(&mut self, id: ZoneId, state: ZoneState) {
        self.implicit.retain(|&z| z != id);
        self.zones[id as usize].state = state;
    }
}

/// A zoned device emulated in a file.
pub(crate) struct EmulatedZoned {
    file: Arc<dyn PositionalFile>,
    path: PathBuf,
    geometry: Geometry,
    /// Byte offset of zone 0 in the file.
    data_start: u64,
    /// Completed writes are durable at once (power-loss protection).
    plp: bool,
    zones: Mutex<Zones>,
    /// Signalled when a zone's in-flight writes drop to zero.
    drained: Condvar,
    /// The zone table's bytes as persisted; written whole LBAs at a time under this lock.
    table: Mutex<Vec<u8>>,
}

impl EmulatedZoned {
    /// Opens the device at `path`, formatting it with `geometry` if the file does not exist.
    /// An existing device must have been formatted with the same LBA size, zone size, zone
    /// capacity and zone count; the limits (open, active, append) are taken from `geometry`.
    pub fn open(fs: &dyn Fs, path: &Path, geometry: Geometry, plp: bool) -> Result<EmulatedZoned> {
        geometry.validate(&format!("zoned device {}", path.display()))?;
        let table_lbas = (u64::from(geometry.zones) * ENTRY as u64).div_ceil(geometry.lba);
        let data_start = geometry.lba * (1 + table_lbas);
        let len = data_start + geometry.device_bytes();
        let file = if fs.exists(path) {
            check_superblock(fs, path, &geometry, len)?;
            fs.open_positional(path, 0)?
        } else {
            let file = fs.open_positional(path, len)?;
            let mut sb = vec![0u8; geometry.lba as usize];
            sb[..SUPER_BODY + 4].copy_from_slice(&encode_superblock(&geometry));
            file.write_at(0, &sb, true)?;
            if let Some(dir) = path.parent() {
                fs.sync_dir(dir)?;
            }
            file
        };
        let mut table = vec![0u8; (table_lbas * geometry.lba) as usize];
        file.read_exact_at(geometry.lba, &mut table)?;
        let dev = EmulatedZoned {
            file,
            path: path.to_path_buf(),
            geometry,
            data_start,
            plp,
            zones: Mutex::new(Zones {
                zones: Vec::new(),
                implicit: Vec::new(),
            }),
            drained: Condvar::new(),
            table: Mutex::new(table),
        };
        let zones = dev.recover_zones()?;
        dev.zones.lock().zones = zones;
        Ok(dev)
    }

    /// Opens an existing device with the geometry its superblock records (and the default
    /// limits).
    pub fn open_existing(fs: &dyn Fs, path: &Path, plp: bool) -> Result<EmulatedZoned> {
        EmulatedZoned::open(fs, path, Self::recorded_geometry(fs, path)?, plp)
    }

    /// The geometry an existing device's superblock records (with the default limits),
    /// without opening the device. A superblock whose checksum fails is `Corruption`: its
    /// fields are not trusted, not even to be reported as an invalid geometry.
    pub fn recorded_geometry(fs: &dyn Fs, path: &Path) -> Result<Geometry> {
        let mut sb = vec![0u8; SUPER_BODY + 4];
        let file = fs.open_read(path)?;
        let not_device = || {
            Error::invalid(format!(
                "{} is not a tierkv zoned device (no TKVZONED superblock)",
                path.display()
            ))
        };
        if file.size() < sb.len() as u64 {
            return Err(not_device());
        }
        file.read_exact_at(0, &mut sb)?;
        if &sb[..8] != MAGIC {
            return Err(not_device());
        }
        if coding::get_u32(&sb[SUPER_BODY..]) != Some(coding::crc(&sb[..SUPER_BODY])) {
            return Err(Error::corruption(
                path,
                0,
                "zoned device superblock checksum mismatch",
            ));
        }
        let mut r = coding::Decoder::new(&sb[12..SUPER_BODY]);
        let mut g = Geometry::new(DEFAULT_LBA, 1);
        g.lba = r.u64().unwrap_or_default();
        g.zone_size = r.u64().unwrap_or_default();
        g.zone_capacity = r.u64().unwrap_or_default();
        g.zones = r.u32().unwrap_or_default();
        Ok(g)
    }

    /// The device file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Marks a zone READ_ONLY or OFFLINE for good, as a worn-out device would.
    #[cfg(test)]
    pub fn set_condition(&self, zone: ZoneId, state: ZoneState) -> Result<(), ZoneError> {
        assert!(matches!(state, ZoneState::ReadOnly | ZoneState::Offline));
        self.check_zone(zone)?;
        self.zones.lock().set_settled(zone, state);
        self.persist_entry(zone, Some(state))
    }

    /// Every zone's state, from the table and a scan of its data.
    fn recover_zones(&self) -> Result<Vec<Zone>> {
        let g = self.geometry;
        let table = self.table.lock().clone();
        let mut zones = Vec::with_capacity(g.zones as usize);
        for id in 0..g.zones {
            let entry = &table[id as usize * ENTRY..(id as usize + 1) * ENTRY];
            let persisted = decode_entry(entry);
            let state = match persisted {
                Some(s @ (ZoneState::Full | ZoneState::ReadOnly | ZoneState::Offline)) => s,
                _ => ZoneState::Empty,
            };
            let wp = match state {
                ZoneState::Offline => 0,
                _ => self.scan_write_pointer(id)?,
            };
            let state = match state {
                ZoneState::Empty if wp == g.zone_capacity => ZoneState::Full,
                ZoneState::Empty if wp > 0 => ZoneState::Closed,
                s => s,
            };
            let wp = if state == ZoneState::Full {
                g.zone_capacity
            } else {
                wp
            };
            zones.push(Zone {
                state,
                wp,
                inflight: 0,
                resetting: false,
            });
        }
        Ok(zones)
    }

    /// The end of the zone's last LBA holding a non-zero byte.
    fn scan_write_pointer(&self, id: ZoneId) -> Result<u64> {
        let g = self.geometry;
        let mut end = g.zone_capacity;
        let mut buf = vec![0u8; SCAN_CHUNK.min(g.zone_capacity) as usize];
        while end > 0 {
            let start = end.saturating_sub(buf.len() as u64);
            let chunk = &mut buf[..(end - start) as usize];
            self.file
                .read_exact_at(self.zone_start(id) + start, chunk)?;
            if let Some(last) = chunk.iter().rposition(|&b| b != 0) {
                return Ok((start + last as u64 + 1).div_ceil(g.lba) * g.lba);
            }
            end = start;
        }
        Ok(0)
    }

    fn zone_start(&self, id: ZoneId) -> u64 {
        self.data_start + u64::from(id) * self.geometry.zone_size
    }

    fn check_zone(&self, zone: ZoneId) -> Result<(), ZoneError> {
        if zone >= self.geometry.zones {
            return Err(ZoneError::NoSuchZone { zone });
        }
        Ok(())
    }

    fn check_len(&self, zone: ZoneId, offset: u64, len: u64) -> Result<(), ZoneError> {
        let lba = self.geometry.lba;
        if len == 0 || !len.is_multiple_of(lba) || !offset.is_multiple_of(lba) {
            return Err(ZoneError::BadRange { zone, offset, len });
        }
        Ok(())
    }

    /// Reserves `len` bytes of `zone` at `at` (the write pointer when `None`) for a write,
    /// opening the zone implicitly; returns the offset.
    fn reserve(&self, zone: ZoneId, at: Option<u64>, len: u64) -> Result<u64, ZoneError> {
        let g = self.geometry;
        let mut zs = self.zones.lock();
        let z = zs.zones[zone as usize];
        match z.state {
            ZoneState::Full => return Err(ZoneError::ZoneFull { zone }),
            ZoneState::ReadOnly | ZoneState::Offline => {
                return Err(ZoneError::InvalidState {
                    zone,
                    state: z.state,
                    op: "write",
                })
            }
            _ if z.resetting => {
                return Err(ZoneError::InvalidState {
                    zone,
                    state: z.state,
                    op: "write during reset",
                })
            }
            _ => {}
        }
        if let Some(offset) = at {
            if offset != z.wp {
                return Err(ZoneError::NotAtWritePointer {
                    zone,
                    write_pointer: z.wp,
                    offset,
                });
            }
        }
        if z.wp + len > g.zone_capacity {
            return Err(ZoneError::ZoneFull { zone });
        }
        zs.acquire(&g, zone, ZoneState::ImplicitOpen)?;
        let z = &mut zs.zones[zone as usize];
        let offset = z.wp;
        z.wp += len;
        z.inflight += 1;
        if z.wp == g.zone_capacity {
            zs.set_settled(zone, ZoneState::Full);
        }
        Ok(offset)
    }

    /// Writes reserved bytes and releases the reservation.
    fn complete(&self, zone: ZoneId, offset: u64, data: &[u8], fua: bool) -> Result<(), ZoneError> {
        let result = self
            .file
            .write_at(self.zone_start(zone) + offset, data, fua || self.plp);
        let mut zs = self.zones.lock();
        let z = &mut zs.zones[zone as usize];
        z.inflight -= 1;
        if z.inflight == 0 {
            self.drained.notify_all();
        }
        result.map_err(ZoneError::Io)
    }

    /// Writes the table entry of `zone` (`None`: no entry) durably.
    fn persist_entry(&self, zone: ZoneId, state: Option<ZoneState>) -> Result<(), ZoneError> {
        let lba = self.geometry.lba as usize;
        let mut table = self.table.lock();
        let at = zone as usize * ENTRY;
        table[at..at + ENTRY].copy_from_slice(&encode_entry(state));
        let page = at / lba * lba;
        // NB: the table lock is held across the write so two zones sharing an LBA cannot
        // persist it out of order.
        self.file
            .write_at(
                self.geometry.lba + page as u64,
                &table[page..page + lba],
                true,
            )
            .map_err(ZoneError::Io)
    }

    fn invalid(zone: ZoneId, state: ZoneState, op: &'static str) -> ZoneError {
        ZoneError::InvalidState { zone, state, op }
    }
}

impl ZonedDevice for EmulatedZoned {
    fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    fn write(&self, zone: ZoneId, offset: u64, data: &[u8], fua: bool) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        self.check_len(zone, offset, data.len() as u64)?;
        let offset = self.reserve(zone, Some(offset), data.len() as u64)?;
        self.complete(zone, offset, data, fua)
    }

    fn append(&self, zone: ZoneId, data: &[u8], fua: bool) -> Result<u64, ZoneError> {
        self.check_zone(zone)?;
        self.check_len(zone, 0, data.len() as u64)?;
        let limit = self.geometry.append_limit;
        if data.len() as u64 > limit {
            return Err(ZoneError::TooLarge {
                len: data.len() as u64,
                limit,
            });
        }
        let offset = self.reserve(zone, None, data.len() as u64)?;
        self.complete(zone, offset, data, fua)?;
        Ok(offset)
    }

    fn read(&self, zone: ZoneId, offset: u64, buf: &mut [u8]) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        self.check_len(zone, offset, buf.len() as u64)?;
        if offset + buf.len() as u64 > self.geometry.zone_size {
            return Err(ZoneError::BadRange {
                zone,
                offset,
                len: buf.len() as u64,
            });
        }
        let state = self.zones.lock().zones[zone as usize].state;
        if state == ZoneState::Offline {
            return Err(Self::invalid(zone, state, "read"));
        }
        if offset >= self.geometry.zone_capacity {
            buf.fill(0);
            return Ok(());
        }
        self.file
            .read_exact_at(self.zone_start(zone) + offset, buf)
            .map_err(ZoneError::Io)
    }

    fn open(&self, zone: ZoneId) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        let g = self.geometry;
        let mut zs = self.zones.lock();
        let state = zs.zones[zone as usize].state;
        match state {
            ZoneState::Empty | ZoneState::Closed | ZoneState::ImplicitOpen => {
                zs.acquire(&g, zone, ZoneState::ExplicitOpen)?;
                zs.zones[zone as usize].state = ZoneState::ExplicitOpen;
                Ok(())
            }
            ZoneState::ExplicitOpen => Ok(()),
            _ => Err(Self::invalid(zone, state, "open")),
        }
    }

    fn close(&self, zone: ZoneId) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        let mut zs = self.zones.lock();
        let z = zs.zones[zone as usize];
        match z.state {
            ZoneState::ImplicitOpen | ZoneState::ExplicitOpen => {
                // A zone closed before its first write is empty again, as in ZNS.
                let to = if z.wp == 0 {
                    ZoneState::Empty
                } else {
                    ZoneState::Closed
                };
                zs.set_settled(zone, to);
                Ok(())
            }
            ZoneState::Closed => Ok(()),
            s => Err(Self::invalid(zone, s, "close")),
        }
    }

    fn finish(&self, zone: ZoneId) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        {
            let mut zs = self.zones.lock();
            let z = zs.zones[zone as usize];
            match z.state {
                ZoneState::Full => return Ok(()),
                ZoneState::ReadOnly | ZoneState::Offline => {
                    return Err(Self::invalid(zone, z.state, "finish"))
                }
                _ if z.resetting => return Err(Self::invalid(zone, z.state, "finish")),
                _ => {}
            }
            zs.set_settled(zone, ZoneState::Full);
            zs.zones[zone as usize].wp = self.geometry.zone_capacity;
        }
        // NB: until the entry is durable a restart finds the zone CLOSED at its data's end,
        // which is only less than what was asked.
        self.persist_entry(zone, Some(ZoneState::Full))
    }

    fn reset(&self, zone: ZoneId) -> Result<(), ZoneError> {
        self.check_zone(zone)?;
        let written = {
            let mut zs = self.zones.lock();
            let z = zs.zones[zone as usize];
            match z.state {
                ZoneState::Empty => return Ok(()),
                ZoneState::ReadOnly | ZoneState::Offline => {
                    return Err(Self::invalid(zone, z.state, "reset"))
                }
                _ if z.resetting => return Err(Self::invalid(zone, z.state, "reset")),
                _ => {}
            }
            zs.zones[zone as usize].resetting = true;
            while zs.zones[zone as usize].inflight > 0 {
                self.drained.wait(&mut zs);
            }
            // A FULL zone's data may reach its capacity; only a scan would tell.
            zs.zones[zone as usize].wp
        };
        let result = self
            .zero(zone, written)
            .and_then(|()| self.persist_entry(zone, None));
        let mut zs = self.zones.lock();
        zs.zones[zone as usize].resetting = false;
        if result.is_ok() {
            zs.set_settled(zone, ZoneState::Empty);
            zs.zones[zone as usize].wp = 0;
        }
        result
    }

    fn report(&self) -> Vec<ZoneInfo> {
        (0..self.geometry.zones)
            .map(|id| {
                self.zone(id)
                    .expect("every index below the zone count exists")
            })
            .collect()
    }

    fn zone(&self, zone: ZoneId) -> Result<ZoneInfo, ZoneError> {
        self.check_zone(zone)?;
        let z = self.zones.lock().zones[zone as usize];
        Ok(ZoneInfo {
            id: zone,
            start: u64::from(zone) * self.geometry.zone_size,
            capacity: self.geometry.zone_capacity,
            write_pointer: z.wp,
            state: z.state,
        })
    }

    fn flush(&self) -> Result<(), ZoneError> {
        self.file.sync().map_err(ZoneError::Io)
    }
}

impl EmulatedZoned {
    /// Hints that `len` bytes at `offset` of `zone` will be read soon (clipped to the zone's
    /// capacity): the backing file may start reading them into the OS cache.
    pub fn prefetch(&self, zone: ZoneId, offset: u64, len: u64) {
        if zone >= self.geometry.zones || offset >= self.geometry.zone_capacity {
            return;
        }
        let len = len.min(self.geometry.zone_capacity - offset);
        self.file.prefetch(self.zone_start(zone) + offset, len);
    }

    /// Writes zeros durably over the first `len` bytes of `zone`.
    fn zero(&self, zone: ZoneId, len: u64) -> Result<(), ZoneError> {
        // NB: a real device resets without writing; the file punches a hole where it can.
        self.file
            .zero_range(self.zone_start(zone), len)
            .map_err(ZoneError::Io)?;
        self.file.sync().map_err(ZoneError::Io)
    }
}

fn encode_superblock(g: &Geometry) -> Vec<u8> {
    let mut b = Vec::with_capacity(SUPER_BODY + 4);
    b.extend_from_slice(MAGIC);
    coding::put_u32(&mut b, VERSION);
    coding::put_u64(&mut b, g.lba);
    coding::put_u64(&mut b, g.zone_size);
    coding::put_u64(&mut b, g.zone_capacity);
    coding::put_u32(&mut b, g.zones);
    let crc = coding::crc(&b);
    coding::put_u32(&mut b, crc);
    b
}

/// Checks that `path` is a tierkv zoned device formatted like `g`, `len` bytes long.
fn check_superblock(fs: &dyn Fs, path: &Path, g: &Geometry, len: u64) -> Result<()> {
    let size = fs.file_size(path)?;
    let not_device = || {
        Error::invalid(format!(
            "{} is not a tierkv zoned device (no TKVZONED superblock); give a new path or \
             remove the file",
            path.display()
        ))
    };
    if size < (SUPER_BODY + 4) as u64 {
        return Err(not_device());
    }
    let mut sb = vec![0u8; SUPER_BODY + 4];
    fs.open_read(path)?.read_exact_at(0, &mut sb)?;
    if &sb[..8] != MAGIC {
        return Err(not_device());
    }
    let crc = coding::get_u32(&sb[SUPER_BODY..]).unwrap_or_default();
    if crc != coding::crc(&sb[..SUPER_BODY]) {
        return Err(Error::corruption(
            path,
            0,
            "zoned device superblock checksum mismatch",
        ));
    }
    let mut r = coding::Decoder::new(&sb[8..SUPER_BODY]);
    let version = r.u32().unwrap_or_default();
    if version != VERSION {
        return Err(Error::corruption(
            path,
            8,
            format!("zoned device layout version {version}, this build reads {VERSION}"),
        ));
    }
    let found = (
        r.u64().unwrap_or_default(),
        r.u64().unwrap_or_default(),
        r.u64().unwrap_or_default(),
        r.u32().unwrap_or_default(),
    );
    if found != (g.lba, g.zone_size, g.zone_capacity, g.zones) {
        return Err(Error::invalid(format!(
            "zoned device {} was formatted with LBA {} zone size {} capacity {} and {} zones; \
             the options ask for LBA {} zone size {} capacity {} and {} zones",
            path.display(),
            found.0,
            found.1,
            found.2,
            found.3,
            g.lba,
            g.zone_size,
            g.zone_capacity,
            g.zones
        )));
    }
    if size < len {
        return Err(Error::corruption(
            path,
            size,
            format!("zoned device file is {size} bytes, its geometry needs {len}"),
        ));
    }
    Ok(())
}

fn encode_entry(state: Option<ZoneState>) -> [u8; ENTRY] {
    let mut e = [0u8; ENTRY];
    if let Some(s) = state {
        e[..4].copy_from_slice(&[s as u8, ENTRY_MARK, ENTRY_MARK, ENTRY_MARK]);
        let crc = coding::crc(&e[..4]);
        e[4..].copy_from_slice(&crc.to_le_bytes());
    }
    e
}

/// A table entry's state; `None` for no entry or a torn one (the data then decides).
fn decode_entry(e: &[u8]) -> Option<ZoneState> {
    if e[1..4] != [ENTRY_MARK; 3] || coding::get_u32(&e[4..]) != Some(coding::crc(&e[..4])) {
        return None;
    }
    ZoneState::from_code(e[0])
}

#[cfg(test)]
mod tests;
