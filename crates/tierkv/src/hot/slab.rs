//! Slab files: one file per size class, fixed-size slots that never cross a 4 KiB page.
//!
//! Slot layout (little-endian), see `docs/hot-tier.md`:
//! `crc32c u32 | seq u64 | kind u8 | key_len u16 | value_len u32 | key | value`, the CRC
//! covering everything after itself up to the end of the value. A slot whose 19 header bytes
//! are all zero is free.

use crate::env::{Fs, PositionalFile};
use crate::error::{Error, Result};
use crate::key::SeqNo;
use parking_lot::RwLock;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Device page: a slot never crosses one, so a page-granular crash keeps a slot whole.
pub(crate) const PAGE: usize = 4096;
/// Bytes of a slot header.
pub(crate) const HEADER: usize = 19;
/// Slot sizes of the classes: 100-byte steps up to 1 KiB, then 3, 2 and 1 slots per page.
pub(crate) const CLASS_SIZES: [usize; 13] = [
    100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1360, 2048, 4096,
];
/// Pages a slab file grows by.
const GROW_PAGES: u64 = 64;
/// Page reads hinted ahead of the one read, where many are read in turn: 1 MiB in flight.
const PREFETCH_AHEAD: usize = 256;

/// The positions `0..len` of reads done in turn, calling `hint(i)` for read `i` when read
/// `i - PREFETCH_AHEAD` is next (the first `PREFETCH_AHEAD` at once), so many reads are in
/// flight while the OS cache holds at most a window of them.
pub(crate) fn hinted_ahead(len: usize, hint: impl Fn(usize)) -> impl Iterator<Item = usize> {
    (0..PREFETCH_AHEAD.min(len)).for_each(&hint);
    (0..len).inspect(move |&i| {
        if i + PREFETCH_AHEAD < len {
            hint(i + PREFETCH_AHEAD);
        }
    })
}

/// What a slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SlotKind {
    /// A value.
    Value = 1,
    /// A delete: shadows older versions in the LSM.
    Deletion = 2,
    /// A version too large for a slot, written to the LSM at the same sequence: the hot
    /// store only records that it is the key's newest version there.
    InLsm = 3,
}

impl SlotKind {
    /// The kind's name in dumps.
    pub(crate) fn name(self) -> &'static str {
        match self {
            SlotKind::Value => "value",
            SlotKind::Deletion => "deletion",
            SlotKind::InLsm => "in-lsm",
        }
    }

    fn from_u8(b: u8) -> Option<SlotKind> {
        match b {
            1 => Some(SlotKind::Value),
            2 => Some(SlotKind::Deletion),
            3 => Some(SlotKind::InLsm),
            _ => None,
        }
    }
}

/// The smallest class whose slot holds an object of these lengths, if any.
pub(crate) fn class_for(key_len: usize, value_len: usize) -> Option<usize> {
    let need = HEADER + key_len + value_len;
    CLASS_SIZES.iter().position(|&s| need <= s)
}

/// Byte offset of slot `index` in a file of `slot_size` slots.
pub(crate) fn slot_offset(slot_size: usize, index: u64) -> u64 {
    let per_page = (PAGE / slot_size) as u64;
    (index / per_page) * PAGE as u64 + (index % per_page) * slot_size as u64
}

/// Slots that fit in `bytes` of file.
fn slots_in(slot_size: usize, bytes: u64) -> u64 {
    (bytes / PAGE as u64) * (PAGE / slot_size) as u64
}

/// The bytes of a slot holding one object.
pub(crate) fn encode_slot(seq: SeqNo, kind: SlotKind, key: &[u8], value: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(HEADER + key.len() + value.len());
    buf.extend_from_slice(&[0; 4]);
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.push(kind as u8);
    buf.extend_from_slice(&(key.len() as u16).to_le_bytes());
    buf.extend_from_slice(&(value.len() as u32).to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(value);
    let crc = crc32c::crc32c(&buf[4..]);
    buf[..4].copy_from_slice(&crc.to_le_bytes());
    buf
}

/// A decoded slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Slot {
    pub seq: SeqNo,
    pub kind: SlotKind,
    pub key: Vec<u8>,
    pub value: Vec<u8>,
}

/// Decodes a slot of `buf.len()` bytes: `Ok(None)` for a free slot, `Err(what)` for damage.
pub(crate) fn decode_slot(buf: &[u8]) -> std::result::Result<Option<Slot>, &'static str> {
    if buf.len() < HEADER {
        return Err("slot shorter than its header");
    }
    if buf[..HEADER].iter().all(|&b| b == 0) {
        return Ok(None);
    }
    let crc = u32::from_le_bytes(buf[0..4].try_into().unwrap());
    let seq = u64::from_le_bytes(buf[4..12].try_into().unwrap());
    let kind = SlotKind::from_u8(buf[12]).ok_or("unknown slot kind")?;
    let key_len = u16::from_le_bytes(buf[13..15].try_into().unwrap()) as usize;
    let value_len = u32::from_le_bytes(buf[15..19].try_into().unwrap()) as usize;
    let end = HEADER
        .checked_add(key_len)
        .and_then(|n| n.checked_add(value_len))
        .filter(|&n| n <= buf.len())
        .ok_or("slot lengths exceed the slot")?;
    if crc32c::crc32c(&buf[4..end]) != crc {
        return Err("slot checksum mismatch");
    }
    Ok(Some(Slot {
        seq,
        kind,
        key: buf[HEADER..HEADER + key_len].to_vec(),
        value: buf[HEADER + key_len..end].to_vec(),
    }))
}

/// The file name of class `class`'s slab.
pub(crate) fn file_name(class: usize) -> String {
    format!("slab-{:02}-{:04}.slab", class, CLASS_SIZES[class])
}

/// One class's slab file.
pub(crate) struct SlabFile {
    fs: Arc<dyn Fs>,
    path: PathBuf,
    pub slot_size: usize,
    file: RwLock<Arc<dyn PositionalFile>>,
}

impl SlabFile {
    /// Opens (creating if missing) class `class`'s slab in `dir`.
    pub fn open(fs: &Arc<dyn Fs>, dir: &Path, class: usize) -> Result<SlabFile> {
        let path = dir.join(file_name(class));
        let file = fs.open_positional(&path, 0)?;
        Ok(SlabFile {
            fs: Arc::clone(fs),
            path,
            slot_size: CLASS_SIZES[class],
            file: RwLock::new(file),
        })
    }

    /// Slots the file holds now.
    pub fn capacity(&self) -> u64 {
        slots_in(self.slot_size, self.file.read().size())
    }

    /// Bytes of the file now.
    pub fn file_bytes(&self) -> u64 {
        self.file.read().size()
    }

    /// Grows the file so that it holds at least `slots` slots.
    pub fn ensure(&self, slots: u64) -> Result<()> {
        if self.capacity() >= slots {
            return Ok(());
        }
        let per_page = (PAGE / self.slot_size) as u64;
        let pages = slots.div_ceil(per_page).div_ceil(GROW_PAGES) * GROW_PAGES;
        let file = self.fs.open_positional(&self.path, pages * PAGE as u64)?;
        *self.file.write() = file;
        Ok(())
    }

    /// Reads page `page` whole (zeros past the end of the file).
    pub fn read_page(&self, page: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; PAGE];
        self.read_page_into(page, &mut buf)?;
        Ok(buf)
    }

    /// Reads page `page` into `buf` (`PAGE` bytes; left as it is past the end of the file).
    pub fn read_page_into(&self, page: u64, buf: &mut [u8]) -> Result<()> {
        let file = Arc::clone(&self.file.read());
        if (page + 1) * PAGE as u64 <= file.size() {
            file.read_exact_at(page * PAGE as u64, &mut buf[..PAGE])?;
        }
        Ok(())
    }

    /// Hints that page `page` will be read soon, so its read is in flight while earlier
    /// pages are read (a job reads thousands of random pages; one at a time, each would wait
    /// a device's whole latency).
    pub fn prefetch_page(&self, page: u64) {
        let file = Arc::clone(&self.file.read());
        if (page + 1) * PAGE as u64 <= file.size() {
            file.prefetch(page * PAGE as u64, PAGE as u64);
        }
    }

    /// Hints that slot `index` will be read soon (see [`SlabFile::prefetch_page`]).
    pub fn prefetch_slot(&self, index: u64) {
        self.prefetch_page(slot_offset(self.slot_size, index) / PAGE as u64);
    }

    /// Writes page `page` whole, unsynced, growing the file if needed.
    pub fn write_page(&self, page: u64, image: &[u8]) -> Result<()> {
        let per_page = (PAGE / self.slot_size) as u64;
        self.ensure((page + 1) * per_page)?;
        let file = Arc::clone(&self.file.read());
        file.write_at(page * PAGE as u64, image, false)
    }

    /// Reads slot `index` whole.
    fn read(&self, index: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0; self.slot_size];
        let file = Arc::clone(&self.file.read());
        file.read_exact_at(slot_offset(self.slot_size, index), &mut buf)?;
        Ok(buf)
    }

    /// Reads slots `indexes` and decodes them, in order, each hinted `PREFETCH_AHEAD` reads
    /// ahead, so a demotion's (or an iterator chunk's) many random slot reads overlap
    /// instead of each waiting a device's latency in turn.
    pub fn read_slots(&self, indexes: &[u64]) -> Vec<Result<Option<Slot>>> {
        hinted_ahead(indexes.len(), |at| self.prefetch_slot(indexes[at]))
            .map(|at| self.read_slot(indexes[at]))
            .collect()
    }

    /// Reads slot `index` and decodes it; damage is a corruption naming file and offset.
    pub fn read_slot(&self, index: u64) -> Result<Option<Slot>> {
        let buf = self.read(index)?;
        decode_slot(&buf).map_err(|what| self.corruption(index, what))
    }

    /// The corruption error for slot `index`.
    pub fn corruption(&self, index: u64, what: &str) -> Error {
        Error::Corruption {
            file: self.path.clone(),
            offset: slot_offset(self.slot_size, index),
            what: what.to_string(),
        }
    }

    /// Makes every write so far durable.
    pub fn sync(&self) -> Result<()> {
        let file = Arc::clone(&self.file.read());
        file.sync()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pins docs/hot-tier.md's slot: `crc32c(rest) | seq u64 | kind u8 | key_len u16 |
    /// value_len u32 | key | value`, little-endian.
    #[test]
    fn slot_bytes_are_pinned() {
        let slot = encode_slot(0x0102, SlotKind::Value, b"ab", b"xyz");
        let rest = [
            0x02, 0x01, 0, 0, 0, 0, 0, 0, // seq
            1, // kind: value
            2, 0, // key length
            3, 0, 0, 0, // value length
            b'a', b'b', b'x', b'y', b'z',
        ];
        let mut want = crc32c::crc32c(&rest).to_le_bytes().to_vec();
        want.extend_from_slice(&rest);
        assert_eq!(slot, want);
        assert_eq!(HEADER, 4 + rest.len() - 5);
    }

    #[test]
    fn slots_never_cross_pages() {
        for &size in &CLASS_SIZES {
            for i in 0..100u64 {
                let off = slot_offset(size, i);
                assert_eq!(off / PAGE as u64, (off + size as u64 - 1) / PAGE as u64);
            }
        }
        assert_eq!(slot_offset(1360, 3), 4096);
        assert_eq!(slot_offset(100, 40), 4096);
    }

    #[test]
    fn classes() {
        assert_eq!(class_for(10, 10), Some(0));
        assert_eq!(class_for(10, 100 - HEADER - 10), Some(0));
        assert_eq!(class_for(10, 100 - HEADER - 9), Some(1));
        assert_eq!(class_for(16, 1000), Some(10));
        assert_eq!(class_for(0, 4096 - HEADER), Some(12));
        assert_eq!(class_for(0, 4096 - HEADER + 1), None);
    }

    #[test]
    fn slot_roundtrip_and_damage() {
        let bytes = encode_slot(42, SlotKind::Value, b"key", b"value");
        let mut slot = bytes.clone();
        slot.resize(100, 0);
        let s = decode_slot(&slot).unwrap().unwrap();
        assert_eq!((s.seq, s.kind), (42, SlotKind::Value));
        assert_eq!(
            (s.key.as_slice(), s.value.as_slice()),
            (&b"key"[..], &b"value"[..])
        );
        assert_eq!(decode_slot(&[0; 100]), Ok(None));
        slot[HEADER + 1] ^= 1;
        assert!(decode_slot(&slot).is_err());
        let mut torn = bytes;
        torn[0] = 0;
        torn[1] = 0;
        torn.resize(100, 0);
        assert!(decode_slot(&torn).is_err());
    }
}
