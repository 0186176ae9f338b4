//! A file's in-memory state ([`FileNode`]), its writer ([`ZoneWriter`]) and reader
//! ([`ZoneReader`]).

use super::journal::Extent;
use super::{add, Inner};
use crate::env::{Lifetime, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::zoned::emulator::EmulatedZoned;
use crate::zoned::{ZoneError, ZoneId, ZonedDevice};
use parking_lot::RwLock;
use std::path::PathBuf;
use std::sync::Arc;

/// The most bytes one device write carries.
const MAX_WRITE: u64 = 1 << 20;

/// A file: identity and state. Readers hold the state's read lock across a read, so the
/// garbage collector (which swaps extents under the write lock before resetting a zone) and
/// removal never pull a zone from under them.
pub(crate) struct FileNode {
    /// Stable identity in the journal.
    pub id: u64,
    pub state: RwLock<FileState>,
}

/// A file's extents as written and as last synced.
pub(crate) struct FileState {
    /// Every byte written to the device, in file order.
    pub extents: Vec<Extent>,
    /// Bytes in `extents`.
    pub size: u64,
    /// What the journal holds: the state at the last sync.
    pub synced_extents: Vec<Extent>,
    pub synced_size: u64,
    /// The file was removed: its extents are no longer its own.
    pub removed: bool,
    /// A writer is open on the file.
    pub writing: bool,
}

impl FileNode {
    pub fn new(id: u64, size: u64, extents: Vec<Extent>) -> FileNode {
        FileNode {
            id,
            state: RwLock::new(FileState {
                extents: extents.clone(),
                size,
                synced_extents: extents,
                synced_size: size,
                removed: false,
                writing: false,
            }),
        }
    }

    pub fn size(&self) -> u64 {
        self.state.read().size
    }

    #[cfg(test)]
    pub fn extents(&self) -> Vec<Extent> {
        self.state.read().extents.clone()
    }

    pub fn synced(&self) -> (u64, Vec<Extent>) {
        let s = self.state.read();
        (s.synced_size, s.synced_extents.clone())
    }

    pub fn set_synced(&self, size: u64, extents: Vec<Extent>) {
        let mut s = self.state.write();
        s.synced_size = size;
        s.synced_extents = extents;
    }

    pub fn is_removed(&self) -> bool {
        self.state.read().removed
    }

    /// Marks the file removed and returns the extents it held.
    pub fn mark_removed(&self) -> Vec<Extent> {
        let mut s = self.state.write();
        s.removed = true;
        s.synced_extents.clear();
        std::mem::take(&mut s.extents)
    }
}

/// Appends to a file: bytes are buffered until whole LBAs, which are written at the write
/// pointer of the zone the writer holds.
pub(crate) struct ZoneWriter {
    fs: Arc<Inner>,
    node: Arc<FileNode>,
    path: PathBuf,
    lifetime: Lifetime,
    /// Bytes appended and not yet written (less than an LBA after each append).
    buf: Vec<u8>,
    /// The zone held and its write pointer.
    zone: Option<(ZoneId, u64)>,
    /// The file's last extent may grow: it ends at the held zone's write pointer and its
    /// last LBA is full.
    extent_open: bool,
}

impl ZoneWriter {
    pub fn new(fs: Arc<Inner>, node: Arc<FileNode>, path: PathBuf, lifetime: Lifetime) -> Self {
        node.state.write().writing = true;
        ZoneWriter {
            fs,
            node,
            path,
            lifetime,
            buf: Vec::new(),
            zone: None,
            extent_open: false,
        }
    }

    /// Writes `data` (whole LBAs; the last `padding` bytes are zeros not of the file).
    fn write_out(&mut self, data: &[u8], padding: u64) -> Result<()> {
        let mut done = 0u64;
        let total = data.len() as u64;
        while done < total {
            let (zone, wp) = match self.zone {
                Some(z) => z,
                None => {
                    let z = self.fs.take_zone(self.lifetime)?;
                    self.zone = Some(z);
                    self.extent_open = false;
                    z
                }
            };
            let room = self.fs.zones.lock().capacity - wp;
            let n = room.min(total - done).min(MAX_WRITE);
            let chunk = &data[done as usize..(done + n) as usize];
            if let Err(e) = self.fs.dev.write(zone, wp, chunk, false) {
                let mut z = self.fs.zones.lock();
                self.fs.take_device_wp(&mut z, zone);
                drop(z);
                // NB: the next write takes a zone afresh, at its write pointer.
                self.give_back_zone();
                return Err(self.write_error(e, zone, wp));
            }
            let file_bytes = if done + n == total { n - padding } else { n };
            self.note_written(zone, wp, n, file_bytes);
            done += n;
        }
        add(&self.fs.counters.data, total);
        add(&self.fs.counters.padding, padding);
        Ok(())
    }

    /// Records `n` device bytes written at `wp` of `zone`, `file_bytes` of them the file's.
    fn note_written(&mut self, zone: ZoneId, wp: u64, n: u64, file_bytes: u64) {
        let mut s = self.node.state.write();
        match s.extents.last_mut() {
            Some(e) if self.extent_open && e.zone == zone && e.offset + e.len == wp => {
                e.len += file_bytes
            }
            _ => s.extents.push(Extent {
                zone,
                offset: wp,
                len: file_bytes,
            }),
        }
        s.size += file_bytes;
        let mut z = self.fs.zones.lock();
        let slot = &mut z.slots[zone as usize];
        slot.wp = wp + n;
        if !s.removed {
            slot.live += n;
        }
        let full = slot.wp >= z.capacity;
        drop(z);
        drop(s);
        self.extent_open = file_bytes == n;
        if full {
            self.give_back_zone();
        } else {
            self.zone = Some((zone, wp + n));
        }
    }

    /// A failed zone write, naming the file and where it was written.
    fn write_error(&self, e: ZoneError, zone: ZoneId, wp: u64) -> Error {
        match e {
            ZoneError::Io(e) => e,
            other => Error::io(
                "zone write",
                self.path.clone(),
                std::io::Error::other(format!(
                    "{other} (zone {zone} offset {wp} of {})",
                    self.fs.device_path().display()
                )),
            ),
        }
    }

    fn give_back_zone(&mut self) {
        if let Some((zone, _)) = self.zone.take() {
            self.fs.release_zone(zone);
        }
        self.extent_open = false;
    }

    /// Writes `data` after the buffered bytes: whole LBAs go to the device straight from
    /// `data`, and less than an LBA stays buffered.
    fn write_appended(&mut self, mut data: &[u8]) -> Result<()> {
        let lba = self.fs.lba as usize;
        if !self.buf.is_empty() {
            // INVARIANT: the buffer holds less than an LBA between appends.
            let fill = (lba - self.buf.len()).min(data.len());
            self.buf.extend_from_slice(&data[..fill]);
            data = &data[fill..];
            if self.buf.len() < lba {
                return Ok(());
            }
            let head = std::mem::take(&mut self.buf);
            let written = self.write_out(&head, 0);
            // NB: the allocation is kept for the next partial LBA.
            self.buf = head;
            self.buf.clear();
            written?;
        }
        // NB: written from the caller's slice: copying a table's 256 KiB appends into the
        // buffer first cost as much CPU as the write itself.
        let whole = data.len() / lba * lba;
        if whole > 0 {
            self.write_out(&data[..whole], 0)?;
        }
        self.buf.extend_from_slice(&data[whole..]);
        Ok(())
    }
}

impl WritableFile for ZoneWriter {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.fs.check_usable()?;
        let written = self.write_appended(data);
        // NB: counted after the zone bytes, so a report taken mid-write never shows fewer
        // bytes written to zones than the engine wrote.
        add(&self.fs.counters.engine, data.len() as u64);
        written
    }

    fn sync(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let lba = self.fs.lba as usize;
            let padding = (lba - self.buf.len()) as u64;
            let mut tail = std::mem::take(&mut self.buf);
            tail.resize(lba, 0);
            self.write_out(&tail, padding)?;
            // The padded LBA ends this extent: the next append starts a new one.
            self.extent_open = false;
        }
        let (size, extents) = {
            let s = self.node.state.read();
            (s.size, s.extents.clone())
        };
        if self.node.synced().0 == size {
            return Ok(());
        }
        self.fs.dev.flush().map_err(|e| self.fs.zone_error(e))?;
        self.fs.record_sync(&self.node, size, extents)
    }

    fn size(&self) -> u64 {
        self.node.size() + self.buf.len() as u64
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        self.give_back_zone();
        Ok(())
    }
}

impl Drop for ZoneWriter {
    fn drop(&mut self) {
        self.give_back_zone();
        self.node.state.write().writing = false;
    }
}

/// Positional reads of a file, mapped onto its extents.
pub(crate) struct ZoneReader {
    fs: Arc<Inner>,
    node: Arc<FileNode>,
    path: PathBuf,
    size: u64,
}

impl ZoneReader {
    pub fn new(fs: Arc<Inner>, node: Arc<FileNode>, path: PathBuf) -> Self {
        let size = node.size();
        ZoneReader {
            fs,
            node,
            path,
            size,
        }
    }

    fn error(&self, what: &str) -> Error {
        Error::io(
            "read",
            self.path.clone(),
            std::io::Error::other(what.to_string()),
        )
    }
}

impl RandomAccessFile for ZoneReader {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let state = self.node.state.read();
        if state.removed {
            return Err(self.error("the file was removed"));
        }
        let end = offset + buf.len() as u64;
        if end > state.size {
            return Err(Error::io(
                "read",
                self.path.clone(),
                std::io::Error::from(std::io::ErrorKind::UnexpectedEof),
            ));
        }
        read_extents(&self.fs.dev, self.fs.lba, &state.extents, offset, buf)
            .map_err(|err| self.fs.zone_error(err))?;
        if buf.len() as u64 >= PREFETCH_FROM {
            // NB: after the read, so the next window loads while the caller works on this one.
            prefetch_extents(&self.fs.dev, &state.extents, end, buf.len() as u64);
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// Reads of at least this many bytes are a sequential reader's window (a compaction's or a
/// scan's read-ahead), not a point lookup's block: the window after them is prefetched.
const PREFETCH_FROM: u64 = 64 << 10;

/// Hints the device to start reading the `len` file bytes at `offset` (those within the file)
/// into the OS cache. Every file shares the device file's descriptor, so a compaction's
/// inputs, read in turn, reach the kernel as one stream jumping between zones, which its
/// read-ahead (one stream per descriptor) may not follow; a table in a file of its own is
/// read ahead by the kernel, and through io_uring by the engine.
fn prefetch_extents(dev: &EmulatedZoned, extents: &[Extent], offset: u64, len: u64) {
    let end = offset + len;
    let mut file_pos = 0u64;
    for e in extents {
        let (start, stop) = (offset.max(file_pos), end.min(file_pos + e.len));
        if start < stop {
            dev.prefetch(e.zone, e.offset + (start - file_pos), stop - start);
        }
        file_pos += e.len;
        if file_pos >= end {
            break;
        }
    }
}

/// Reads `buf.len()` bytes at `offset` of the file whose bytes are `extents`, in file order,
/// from `dev`. The caller has checked that the range lies within the file.
pub(super) fn read_extents(
    dev: &EmulatedZoned,
    lba: u64,
    extents: &[Extent],
    offset: u64,
    buf: &mut [u8],
) -> std::result::Result<(), ZoneError> {
    let end = offset + buf.len() as u64;
    let mut file_pos = 0u64;
    for e in extents {
        let (start, stop) = (offset.max(file_pos), end.min(file_pos + e.len));
        if start < stop {
            let at = e.offset + (start - file_pos);
            let out = &mut buf[(start - offset) as usize..(stop - offset) as usize];
            read_zone_bytes(dev, lba, e.zone, at, out)?;
        }
        file_pos += e.len;
        if file_pos >= end {
            break;
        }
    }
    Ok(())
}

/// Reads up to this many bytes (LBA-rounded) with one device read through a buffer: a point
/// lookup's block that straddles LBAs is then one read, not two.
const BUFFERED_READ_MAX: u64 = 64 << 10;

/// Reads `out.len()` bytes at byte `at` of `zone`. The device reads whole LBAs only: a small
/// range goes through a buffer of its LBAs; a larger one is read straight into `out` but for
/// a partial first and last LBA (a compaction's 256 KiB read-ahead then costs no allocation
/// of its size and no second copy).
fn read_zone_bytes(
    dev: &EmulatedZoned,
    lba: u64,
    zone: ZoneId,
    at: u64,
    out: &mut [u8],
) -> std::result::Result<(), ZoneError> {
    let end = at + out.len() as u64;
    let (first, last) = (at / lba * lba, end.div_ceil(lba) * lba);
    if last - first <= BUFFERED_READ_MAX {
        return read_through_buffer(dev, zone, first, last, at, out);
    }
    let head_end = at.next_multiple_of(lba);
    let tail_start = end / lba * lba;
    if head_end > at {
        let head = &mut out[..(head_end - at) as usize];
        read_through_buffer(dev, zone, first, head_end, at, head)?;
    }
    let middle = &mut out[(head_end - at) as usize..(tail_start - at) as usize];
    dev.read(zone, head_end, middle)?;
    if end > tail_start {
        let tail = &mut out[(tail_start - at) as usize..];
        read_through_buffer(dev, zone, tail_start, last, tail_start, tail)?;
    }
    Ok(())
}

/// Reads the LBAs `[first, last)` of `zone` into a buffer and copies the `out.len()` bytes
/// at `at` (within them) to `out`.
fn read_through_buffer(
    dev: &EmulatedZoned,
    zone: ZoneId,
    first: u64,
    last: u64,
    at: u64,
    out: &mut [u8],
) -> std::result::Result<(), ZoneError> {
    let mut lbas = vec![0u8; (last - first) as usize];
    dev.read(zone, first, &mut lbas)?;
    let skip = (at - first) as usize;
    out.copy_from_slice(&lbas[skip..skip + out.len()]);
    Ok(())
}
