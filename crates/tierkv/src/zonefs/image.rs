//! Read-only views of a zoned tier, for tools and checks: the device's geometry, every zone's
//! condition, write pointer, live bytes and owning files, and every file's extents
//! ([`ZonedTierImage`]). The consistency rules such a view must satisfy are in
//! `super::consistency`.
//!
//! A view comes either from a running [`ZoneFs`] (its namespace and zone table, which the
//! check compares with each other) or from a tier directory on its own ([`ZonedDir`]: the
//! newest complete journal generation, as recovery would read it, without writing anything).

use super::file::{read_extents, FileNode};
use super::journal::{Extent, FileRecord, Replayed};
use super::recover::{check_extents, newest_generation};
use super::zones::{ZoneSlot, ZoneUse};
use super::{ZoneFs, DEVICE_FILE, META_ZONES};
use crate::env::{Fs, RandomAccessFile};
use crate::error::{Error, Result};
use crate::zoned::emulator::EmulatedZoned;
use crate::zoned::{Geometry, ZoneInfo, ZoneState, ZonedDevice};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The shape of a zoned tier's device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneGeometry {
    /// Logical block size: the unit of every offset and length.
    pub lba: u64,
    /// Bytes from one zone's start to the next one's.
    pub zone_size: u64,
    /// Writable bytes of each zone.
    pub zone_capacity: u64,
    /// Zones of the device, the metadata journal's included.
    pub zones: u32,
}

/// What a zone is used for, as the zone file system sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ZoneRole {
    /// One of the two metadata journal zones.
    Metadata,
    /// Empty.
    Free,
    /// Held by a writer appending to it (a running file system only).
    Writing,
    /// Partly written: later extents may continue it.
    Active,
    /// Written to capacity (or finished): read until reset.
    Full,
    /// Written, but no live file has an extent in it. After a crash, the unsynced data of a
    /// writer (reset at the next open); in a running file system, a leaked zone.
    Unowned,
}

impl ZoneRole {
    /// The role's name in dumps.
    pub fn name(self) -> &'static str {
        match self {
            ZoneRole::Metadata => "metadata",
            ZoneRole::Free => "free",
            ZoneRole::Writing => "writing",
            ZoneRole::Active => "active",
            ZoneRole::Full => "full",
            ZoneRole::Unowned => "unowned",
        }
    }
}

/// One zone of a zoned tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneView {
    /// The zone's number.
    pub id: u32,
    /// Its condition as the device reports it (`EMPTY`, `IMPLICIT_OPEN`, `CLOSED`, `FULL`, ...).
    pub condition: &'static str,
    /// Its use by the zone file system.
    pub role: ZoneRole,
    /// Bytes from the zone's start to its write pointer.
    pub write_pointer: u64,
    /// Bytes of the zone occupied by the live files' extents (LBA-rounded).
    pub live_bytes: u64,
    /// The live bytes the running file system counts for the zone (compared with
    /// `live_bytes` by the check); `None` for a view read from the device alone.
    pub counted_live_bytes: Option<u64>,
    /// The files with an extent in the zone, by name.
    pub files: Vec<String>,
}

/// One extent of a file: `len` bytes of the file at `offset` of `zone`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ZoneExtent {
    /// The zone.
    pub zone: u32,
    /// Byte offset of the extent in the zone (a whole number of LBAs).
    pub offset: u64,
    /// Bytes of the file it holds; it occupies them rounded up to whole LBAs.
    pub len: u64,
}

/// A file of a zoned tier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneFileView {
    /// Its name in the tier directory.
    pub name: String,
    /// Its size in bytes.
    pub size: u64,
    /// Where its bytes are, in file order.
    pub extents: Vec<ZoneExtent>,
}

/// Where the metadata journal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JournalPosition {
    /// The metadata zone holding the newest generation.
    pub zone: u32,
    /// Its generation.
    pub generation: u64,
}

/// A zoned tier: geometry, zones and files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZonedTierImage {
    /// The device file (`<tier dir>/ZONED-DEVICE`).
    pub device: PathBuf,
    /// Its geometry.
    pub geometry: ZoneGeometry,
    /// The journal's newest generation; `None` for a device never written.
    pub journal: Option<JournalPosition>,
    /// Every zone, by number.
    pub zones: Vec<ZoneView>,
    /// Every live file, by name.
    pub files: Vec<ZoneFileView>,
}

/// Every zone's live bytes and owners from the files' extents.
fn owners(g: &ZoneGeometry, files: &[ZoneFileView]) -> (Vec<u64>, Vec<Vec<String>>) {
    let n = g.zones as usize;
    let (mut live, mut owners) = (vec![0u64; n], vec![Vec::<String>::new(); n]);
    for f in files {
        for e in &f.extents {
            let Some(slot) = live.get_mut(e.zone as usize) else {
                continue; // NB: the check reports it.
            };
            // NB: saturating: a damaged extent's length is the check's to report.
            *slot = slot.saturating_add(e.len.div_ceil(g.lba).saturating_mul(g.lba));
            let names = &mut owners[e.zone as usize];
            if names.last() != Some(&f.name) {
                names.push(f.name.clone());
            }
        }
    }
    (live, owners)
}

fn to_view(e: &Extent) -> ZoneExtent {
    ZoneExtent {
        zone: e.zone,
        offset: e.offset,
        len: e.len,
    }
}

fn geometry_of(g: &Geometry) -> ZoneGeometry {
    ZoneGeometry {
        lba: g.lba,
        zone_size: g.zone_size,
        zone_capacity: g.zone_capacity,
        zones: g.zones,
    }
}

/// A zone's role from the device alone: written zones no file owns are unowned.
fn role_on_device(info: &ZoneInfo, live: u64, capacity: u64) -> ZoneRole {
    if META_ZONES.contains(&info.id) {
        ZoneRole::Metadata
    } else if info.write_pointer == 0 && info.state != ZoneState::Full {
        ZoneRole::Free
    } else if live == 0 {
        ZoneRole::Unowned
    } else if info.state == ZoneState::Full || info.write_pointer >= capacity {
        ZoneRole::Full
    } else {
        ZoneRole::Active
    }
}

/// A zone's role in a running file system: full or partial zones without live bytes
/// should have been reset.
fn role_in_table(slot: &ZoneSlot) -> ZoneRole {
    match slot.state {
        ZoneUse::Meta => ZoneRole::Metadata,
        ZoneUse::Free => ZoneRole::Free,
        ZoneUse::Held(_) => ZoneRole::Writing,
        _ if slot.live == 0 => ZoneRole::Unowned,
        ZoneUse::Partial(_) => ZoneRole::Active,
        ZoneUse::Full => ZoneRole::Full,
    }
}

impl ZoneFs {
    /// The file system now: its files with every extent written (synced or not), its zone
    /// table and the device's report, taken under the namespace, file and zone locks (in the
    /// lock order) so that no writer changes them in between.
    pub(crate) fn image(&self) -> ZonedTierImage {
        let inner = &self.inner;
        // NB: a collection counts its copies' live bytes before it commits them to their
        // files: taken in between, the image would not add up.
        let _no_collection = inner.gc_lock.lock();
        let meta = inner.meta.lock();
        let mut nodes: Vec<(&String, &Arc<FileNode>)> = meta.files.iter().collect();
        nodes.sort_by(|a, b| a.0.cmp(b.0));
        let states: Vec<_> = nodes.iter().map(|(_, n)| n.state.read()).collect();
        let files: Vec<ZoneFileView> = nodes
            .iter()
            .zip(&states)
            .map(|((name, _), s)| ZoneFileView {
                name: (*name).clone(),
                size: s.size,
                extents: s.extents.iter().map(to_view).collect(),
            })
            .collect();
        let table = inner.zones.lock();
        let report = inner.dev.report();
        let g = geometry_of(inner.dev.geometry());
        let (live, mut owners) = owners(&g, &files);
        // NB: a read-only file system neither resets nor finishes zones at open, so its zones
        // are seen as on the device, like a directory opened on its own.
        let read_only = inner.config.read_only;
        let zones = report
            .iter()
            .zip(&table.slots)
            .map(|(info, slot)| {
                let live_bytes = live[info.id as usize];
                ZoneView {
                    id: info.id,
                    condition: info.state.name(),
                    role: if read_only {
                        role_on_device(info, live_bytes, g.zone_capacity)
                    } else {
                        role_in_table(slot)
                    },
                    write_pointer: if read_only {
                        info.write_pointer
                    } else {
                        slot.wp
                    },
                    live_bytes,
                    counted_live_bytes: (!read_only).then_some(slot.live),
                    files: std::mem::take(&mut owners[info.id as usize]),
                }
            })
            .collect();
        ZonedTierImage {
            device: inner.device_path(),
            geometry: g,
            journal: Some(JournalPosition {
                zone: meta.zone,
                generation: meta.generation,
            }),
            zones,
            files,
        }
    }
}

/// A zoned tier directory opened on its own, read-only: its device and the files its newest
/// complete journal generation lists, as recovery would find them. Nothing is written: the
/// zones a crash left unowned are reported, not reset.
pub struct ZonedDir {
    dev: Arc<EmulatedZoned>,
    image: ZonedTierImage,
}

impl ZonedDir {
    /// True when `dir` holds a zoned device (`ZONED-DEVICE`): its tables live in zones.
    pub fn is_zoned(fs: &dyn Fs, dir: &Path) -> bool {
        fs.exists(&dir.join(DEVICE_FILE))
    }

    /// The geometry recorded by the device in `dir`, read from its superblock alone (cheap:
    /// no zone is scanned). Fails with `InvalidArgument` when there is no device.
    pub fn geometry(fs: &dyn Fs, dir: &Path) -> Result<ZoneGeometry> {
        let device = Self::device_in(fs, dir)?;
        Ok(geometry_of(&EmulatedZoned::recorded_geometry(fs, &device)?))
    }

    fn device_in(fs: &dyn Fs, dir: &Path) -> Result<PathBuf> {
        let device = dir.join(DEVICE_FILE);
        if !fs.exists(&device) {
            return Err(Error::invalid(format!(
                "{} holds no zoned device ({DEVICE_FILE}): not a tier with tables = \"zones\"",
                dir.display()
            )));
        }
        Ok(device)
    }

    /// Reads the device in `dir` and its journal. Fails with `InvalidArgument` when there is
    /// no device, `Corruption` (naming the device) when its superblock is damaged or data
    /// zones are written but no journal generation is complete, or `Io`.
    pub fn open(fs: &dyn Fs, dir: &Path) -> Result<ZonedDir> {
        let device = Self::device_in(fs, dir)?;
        let dev = EmulatedZoned::open_existing(fs, &device, false)?;
        let report = dev.report();
        let newest = newest_generation(&dev, &report, &device)?;
        let data_written = report[META_ZONES.len()..]
            .iter()
            .any(|z| z.write_pointer > 0);
        let mut replayed = Replayed::default();
        let journal = match newest {
            Some((zone, generation, records)) => {
                replayed.apply(records);
                Some(JournalPosition { zone, generation })
            }
            None if data_written => {
                return Err(Error::corruption(
                    &device,
                    0,
                    "the zoned device holds data but no valid metadata journal",
                ))
            }
            None => None,
        };
        let g = geometry_of(dev.geometry());
        let mut files: Vec<ZoneFileView> = replayed
            .files
            .into_values()
            .map(|f| ZoneFileView {
                name: f.name,
                size: f.size,
                extents: f.extents.iter().map(to_view).collect(),
            })
            .collect();
        files.sort_by(|a, b| a.name.cmp(&b.name));
        let (live, mut owners) = owners(&g, &files);
        let zones = report
            .iter()
            .map(|info| ZoneView {
                id: info.id,
                condition: info.state.name(),
                role: role_on_device(info, live[info.id as usize], g.zone_capacity),
                write_pointer: info.write_pointer,
                live_bytes: live[info.id as usize],
                counted_live_bytes: None,
                files: std::mem::take(&mut owners[info.id as usize]),
            })
            .collect();
        let image = ZonedTierImage {
            device,
            geometry: g,
            journal,
            zones,
            files,
        };
        Ok(ZonedDir {
            dev: Arc::new(dev),
            image,
        })
    }

    /// The tier's geometry, zones and files.
    pub fn image(&self) -> &ZonedTierImage {
        &self.image
    }

    /// Opens the file `name` of the tier for reading (e.g. a table for a dump). Fails with
    /// `Io` (`NotFound`, naming the path) when the journal lists no such file.
    pub fn open_read(&self, name: &str) -> Result<Arc<dyn RandomAccessFile>> {
        let path = self.image.device.with_file_name(name);
        let file = self
            .image
            .files
            .iter()
            .find(|f| f.name == name)
            .ok_or_else(|| {
                Error::io(
                    "open",
                    &path,
                    std::io::Error::from(std::io::ErrorKind::NotFound),
                )
            })?;
        let record = FileRecord {
            id: 0,
            name: file.name.clone(),
            size: file.size,
            extents: file
                .extents
                .iter()
                .map(|e| Extent {
                    zone: e.zone,
                    offset: e.offset,
                    len: e.len,
                })
                .collect(),
        };
        // The image keeps a damaged journal's extents for the check to report; a read
        // through them would return other bytes (a metadata zone's, zeros) or overflow.
        check_extents(&record, self.dev.geometry(), &self.image.device)?;
        Ok(Arc::new(ExtentFile {
            dev: Arc::clone(&self.dev),
            lba: self.image.geometry.lba,
            extents: record.extents,
            size: file.size,
            path,
        }))
    }
}

/// A file of a [`ZonedDir`], read through its extents.
struct ExtentFile {
    dev: Arc<EmulatedZoned>,
    lba: u64,
    extents: Vec<Extent>,
    size: u64,
    path: PathBuf,
}

impl RandomAccessFile for ExtentFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        if offset + buf.len() as u64 > self.size {
            return Err(Error::io(
                "read",
                &self.path,
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        read_extents(&self.dev, self.lba, &self.extents, offset, buf)
            .map_err(|e| e.into_error(self.dev.path()))
    }

    fn size(&self) -> u64 {
        self.size
    }
}
