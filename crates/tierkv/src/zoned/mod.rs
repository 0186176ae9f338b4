//! Zoned block devices: the [`ZonedDevice`] seam and a file-backed emulator ([`emulator`]).
//!
//! A zoned device (NVMe ZNS, SMR) is split into zones written only sequentially, at each zone's
//! write pointer, and erased only a whole zone at a time. This machine's kernel offers no zoned
//! block device, so the engine talks to one through [`ZonedDevice`], which a real device (over
//! SPDK or the kernel's zoned ioctls) can implement later; [`emulator::EmulatedZoned`] keeps one
//! in a regular file on any tier.
//!
//! The model follows NVMe ZNS:
//! - **Geometry** ([`Geometry`]): zones of `zone_size` bytes, of which the first
//!   `zone_capacity` are writable; every offset and length is a multiple of the LBA size.
//! - **States** ([`ZoneState`]): EMPTY, IMPLICIT_OPEN (opened by a write), EXPLICIT_OPEN
//!   (opened by [`ZonedDevice::open`]), CLOSED, FULL, READ_ONLY, OFFLINE. At most
//!   `max_open` zones are open and at most `max_active` are open or closed; a write that would
//!   implicitly open one more zone first closes an implicitly opened one, and fails with
//!   [`ZoneError::TooManyOpen`] when every open zone was opened explicitly.
//! - **Writes** go only at the write pointer ([`ZonedDevice::write`]); **append**
//!   ([`ZonedDevice::append`]) lets the device choose the offset: it reserves the space
//!   atomically, writes, and returns where the data landed. An append larger than
//!   `append_limit` or one that does not fit the zone's remaining capacity writes nothing and
//!   fails ([`ZoneError::TooLarge`], [`ZoneError::ZoneFull`]).
//! - **Durability**: a completed write survives a process crash. It survives a power loss once
//!   [`ZonedDevice::flush`] returned after it, or at once when it was written with `fua` (force
//!   unit access) or the device has power-loss protection. Completed but unflushed writes
//!   survive a power loss each whole or not at all, independently: a zone may come back with
//!   holes of zeros below its write pointer.

pub(crate) mod emulator;
pub(crate) mod log;

use crate::error::Error;
use std::fmt;
use std::path::PathBuf;

/// The LBA size used unless configured otherwise.
pub(crate) const DEFAULT_LBA: u64 = 4096;
/// The largest single append unless configured otherwise (ZNS's zone-append size limit).
pub(crate) const DEFAULT_APPEND_LIMIT: u64 = 128 << 10;
/// Zones open at once unless configured otherwise.
pub(crate) const DEFAULT_MAX_OPEN: u32 = 14;
/// Zones open or closed at once unless configured otherwise.
pub(crate) const DEFAULT_MAX_ACTIVE: u32 = 14;

/// Most zones a device may have: its zone table (8 bytes a zone) is read and kept whole in
/// memory, so a count in the billions would allocate tens of GiB. Real devices have thousands.
pub(crate) const MAX_ZONES: u32 = 1 << 20;

/// Index of a zone, from 0.
pub(crate) type ZoneId = u32;

/// The shape of a zoned device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Logical block size: the unit of every offset and length.
    pub lba: u64,
    /// Bytes from one zone's start to the next one's.
    pub zone_size: u64,
    /// Writable bytes of each zone, from its start (at most `zone_size`).
    pub zone_capacity: u64,
    /// Number of zones.
    pub zones: u32,
    /// Most zones open (implicitly or explicitly) at once.
    pub max_open: u32,
    /// Most zones open or closed at once.
    pub max_active: u32,
    /// Largest single append.
    pub append_limit: u64,
}

impl Geometry {
    /// `zones` zones of `zone_size` bytes, fully writable, with the default LBA and limits.
    pub fn new(zone_size: u64, zones: u32) -> Geometry {
        Geometry {
            lba: DEFAULT_LBA,
            zone_size,
            zone_capacity: zone_size,
            zones,
            max_open: DEFAULT_MAX_OPEN,
            max_active: DEFAULT_MAX_ACTIVE,
            append_limit: DEFAULT_APPEND_LIMIT,
        }
    }

    /// Checks the geometry; `what` names where it came from (an option, a file) for the error.
    pub fn validate(&self, what: &str) -> crate::error::Result<()> {
        let bad = |msg: String| Err(Error::invalid(format!("{what}: {msg}")));
        if self.lba < 512 || !self.lba.is_power_of_two() {
            return bad(format!(
                "LBA size {} is not a power of two of at least 512 bytes",
                self.lba
            ));
        }
        for (name, v) in [
            ("zone size", self.zone_size),
            ("zone capacity", self.zone_capacity),
            ("append limit", self.append_limit),
        ] {
            if v == 0 || !v.is_multiple_of(self.lba) {
                return bad(format!(
                    "{name} {v} is not a non-zero multiple of the LBA size {}",
                    self.lba
                ));
            }
        }
        if self.zone_capacity > self.zone_size {
            return bad(format!(
                "zone capacity {} is larger than the zone size {}",
                self.zone_capacity, self.zone_size
            ));
        }
        if self.zones == 0 {
            return bad("the device has no zones".into());
        }
        if self.file_bytes().is_none() {
            return bad(format!(
                "{} zones of {} bytes with LBA {} do not fit a 64-bit device",
                self.zones, self.zone_size, self.lba
            ));
        }
        if self.zones > MAX_ZONES {
            return bad(format!(
                "{} zones is more than the {MAX_ZONES} a device may have",
                self.zones
            ));
        }
        if self.max_open == 0 || self.max_active < self.max_open {
            return bad(format!(
                "max open zones {} must be at least 1 and at most max active zones {}",
                self.max_open, self.max_active
            ));
        }
        Ok(())
    }

    /// Bytes of an emulated device's file: superblock, zone table (8 bytes a zone, whole
    /// LBAs) and zones; `None` if that overflows.
    pub fn file_bytes(&self) -> Option<u64> {
        let table_lbas = (u64::from(self.zones) * 8).div_ceil(self.lba.max(1));
        let header = self.lba.checked_mul(table_lbas.checked_add(1)?)?;
        header.checked_add(self.zone_size.checked_mul(u64::from(self.zones))?)
    }

    /// The device's size in bytes.
    pub fn device_bytes(&self) -> u64 {
        self.zone_size * u64::from(self.zones)
    }
}

/// A zone's condition. The values are ZNS's zone state codes and are persisted: do not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub(crate) enum ZoneState {
    /// Nothing written since the last reset.
    Empty = 0x1,
    /// Opened by a write.
    ImplicitOpen = 0x2,
    /// Opened by [`ZonedDevice::open`].
    ExplicitOpen = 0x3,
    /// Written, then closed: holds no open resource but stays active.
    Closed = 0x4,
    /// Written to capacity or finished: only readable until reset.
    Full = 0xE,
    /// Readable only, for good (a worn-out zone).
    ReadOnly = 0xD,
    /// Neither readable nor writable, for good.
    Offline = 0xF,
}

impl ZoneState {
    /// Parses a persisted state code.
    pub fn from_code(code: u8) -> Option<ZoneState> {
        Some(match code {
            0x1 => ZoneState::Empty,
            0x2 => ZoneState::ImplicitOpen,
            0x3 => ZoneState::ExplicitOpen,
            0x4 => ZoneState::Closed,
            0xE => ZoneState::Full,
            0xD => ZoneState::ReadOnly,
            0xF => ZoneState::Offline,
            _ => return None,
        })
    }

    /// The state's name as ZNS spells it.
    pub fn name(self) -> &'static str {
        match self {
            ZoneState::Empty => "EMPTY",
            ZoneState::ImplicitOpen => "IMPLICIT_OPEN",
            ZoneState::ExplicitOpen => "EXPLICIT_OPEN",
            ZoneState::Closed => "CLOSED",
            ZoneState::Full => "FULL",
            ZoneState::ReadOnly => "READ_ONLY",
            ZoneState::Offline => "OFFLINE",
        }
    }

    /// Open, implicitly or explicitly.
    pub fn is_open(self) -> bool {
        matches!(self, ZoneState::ImplicitOpen | ZoneState::ExplicitOpen)
    }

    /// Open or closed: holding an active resource.
    pub fn is_active(self) -> bool {
        self.is_open() || self == ZoneState::Closed
    }
}

/// One zone as [`ZonedDevice::report`] describes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ZoneInfo {
    /// The zone.
    pub id: ZoneId,
    /// Its first byte on the device.
    pub start: u64,
    /// Its writable bytes.
    pub capacity: u64,
    /// Bytes from its start to its write pointer (the capacity once FULL).
    pub write_pointer: u64,
    /// Its condition.
    pub state: ZoneState,
}

/// Why a zone operation failed. Nothing was written when one is returned, except for `Io`.
#[derive(Debug)]
pub(crate) enum ZoneError {
    /// The data does not fit between the write pointer and the zone's capacity, or the zone
    /// is FULL.
    ZoneFull {
        /// The zone.
        zone: ZoneId,
    },
    /// A write not at the write pointer.
    NotAtWritePointer {
        /// The zone.
        zone: ZoneId,
        /// Where the write pointer is.
        write_pointer: u64,
        /// Where the write asked to go.
        offset: u64,
    },
    /// The operation is not allowed in the zone's state.
    InvalidState {
        /// The zone.
        zone: ZoneId,
        /// Its state.
        state: ZoneState,
        /// The operation refused.
        op: &'static str,
    },
    /// Opening the zone would pass the open-zone limit.
    TooManyOpen {
        /// The zone that could not be opened.
        zone: ZoneId,
    },
    /// Opening the zone would pass the active-zone limit.
    TooManyActive {
        /// The zone that could not be opened.
        zone: ZoneId,
    },
    /// An append larger than the device's append limit.
    TooLarge {
        /// The append's length.
        len: u64,
        /// The limit.
        limit: u64,
    },
    /// An offset or length not a multiple of the LBA size, or a read past the zone's end.
    BadRange {
        /// The zone.
        zone: ZoneId,
        /// The offset asked for.
        offset: u64,
        /// The length asked for.
        len: u64,
    },
    /// A zone index past the last zone.
    NoSuchZone {
        /// The index.
        zone: ZoneId,
    },
    /// The device's I/O failed: what landed is unknown.
    Io(Error),
}

impl fmt::Display for ZoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ZoneError::ZoneFull { zone } => write!(f, "zone {zone} is full"),
            ZoneError::NotAtWritePointer {
                zone,
                write_pointer,
                offset,
            } => write!(
                f,
                "write at offset {offset} of zone {zone}, whose write pointer is at {write_pointer}"
            ),
            ZoneError::InvalidState { zone, state, op } => {
                write!(f, "{op} refused: zone {zone} is {state:?}")
            }
            ZoneError::TooManyOpen { zone } => {
                write!(f, "zone {zone} cannot open: too many open zones")
            }
            ZoneError::TooManyActive { zone } => {
                write!(f, "zone {zone} cannot open: too many active zones")
            }
            ZoneError::TooLarge { len, limit } => {
                write!(f, "append of {len} bytes exceeds the append limit {limit}")
            }
            ZoneError::BadRange { zone, offset, len } => write!(
                f,
                "range of {len} bytes at offset {offset} of zone {zone} is not LBA-aligned or \
                 not inside the zone"
            ),
            ZoneError::NoSuchZone { zone } => write!(f, "no zone {zone}"),
            ZoneError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl ZoneError {
    /// This error as the crate's [`Error`], naming the device file.
    pub fn into_error(self, device: &std::path::Path) -> Error {
        match self {
            ZoneError::Io(e) => e,
            other => Error::io(
                "zone",
                PathBuf::from(device),
                std::io::Error::other(other.to_string()),
            ),
        }
    }
}

/// A zoned block device. Zones are addressed by index; offsets are from the zone's start.
/// Every method may be called from several threads at once.
pub(crate) trait ZonedDevice: Send + Sync {
    /// The device's shape.
    fn geometry(&self) -> &Geometry;
    /// Writes `data` at `offset`, which must be the zone's write pointer; a multiple of LBAs.
    #[allow(dead_code)] // NB: the WAL writes by append only; the zone model has them.
    fn write(&self, zone: ZoneId, offset: u64, data: &[u8], fua: bool) -> Result<(), ZoneError>;
    /// Appends `data` (a multiple of LBAs, at most the append limit) to the zone and returns
    /// the offset it landed at. Concurrent appends land at distinct offsets.
    fn append(&self, zone: ZoneId, data: &[u8], fua: bool) -> Result<u64, ZoneError>;
    /// Reads `buf.len()` bytes at `offset` (LBA-aligned); bytes past the write pointer read as
    /// zeros.
    fn read(&self, zone: ZoneId, offset: u64, buf: &mut [u8]) -> Result<(), ZoneError>;
    /// Opens the zone explicitly.
    #[allow(dead_code)] // NB: the WAL writes by append only; the zone model has them.
    fn open(&self, zone: ZoneId) -> Result<(), ZoneError>;
    /// Closes an open zone: it keeps its write pointer and stays active.
    #[allow(dead_code)] // NB: the WAL writes by append only; the zone model has them.
    fn close(&self, zone: ZoneId) -> Result<(), ZoneError>;
    /// Makes the zone FULL: no more writes until reset.
    fn finish(&self, zone: ZoneId) -> Result<(), ZoneError>;
    /// Empties the zone: its write pointer goes back to 0 and its bytes read as zeros.
    fn reset(&self, zone: ZoneId) -> Result<(), ZoneError>;
    /// Every zone's state and write pointer.
    fn report(&self) -> Vec<ZoneInfo>;
    /// One zone's state and write pointer.
    fn zone(&self, zone: ZoneId) -> Result<ZoneInfo, ZoneError>;
    /// Makes every write completed before this call durable.
    fn flush(&self) -> Result<(), ZoneError>;
}
