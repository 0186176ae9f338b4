//! The namespace (files by name) and the journal writer: commits go to the active metadata
//! zone; when it cannot take one more, a snapshot of every file in a new generation is written
//! to the other metadata zone, and the old one is reset.

use super::journal::{self, FileRecord, Record};
use super::{Files, Inner, META_ZONES};
use crate::error::{Error, Result};
use crate::zoned::{ZoneId, ZonedDevice};

/// The namespace and where the journal writes next. Guarded by `Inner::meta`, which is held
/// across journal I/O: namespace changes are serialized and each is durable before the next.
pub(crate) struct Meta {
    /// Files by name.
    pub files: Files,
    /// The next file id.
    pub next_id: u64,
    /// The metadata zone commits go to.
    pub zone: ZoneId,
    /// Its write pointer.
    pub wp: u64,
    /// Its generation.
    pub generation: u64,
}

impl Meta {
    /// Every file's synced state, for a snapshot.
    fn snapshot(&self) -> Record {
        let mut files: Vec<FileRecord> = self
            .files
            .iter()
            .map(|(name, node)| {
                let (size, extents) = node.synced();
                FileRecord {
                    id: node.id,
                    name: name.clone(),
                    size,
                    extents,
                }
            })
            .collect();
        files.sort_by_key(|f| f.id);
        Record::Snapshot {
            next_id: self.next_id,
            files,
        }
    }

    /// Writes `records` durably; returns the bytes written to the device. The caller has
    /// already applied them to the namespace, or applies them after (a snapshot written by a
    /// roll covers them either way, as the records follow it).
    pub fn commit(&mut self, fs: &Inner, records: &[Record]) -> Result<u64> {
        let lba = fs.lba;
        let bytes = journal::encode_commit(self.generation, records, lba);
        let capacity = fs.dev.geometry().zone_capacity;
        let mut written = 0;
        if self.wp + bytes.len() as u64 > capacity {
            written += self.roll(fs)?;
        }
        let bytes = journal::encode_commit(self.generation, records, lba);
        if self.wp + bytes.len() as u64 > capacity {
            return Err(journal_full(fs, bytes.len()));
        }
        fs.dev
            .write(self.zone, self.wp, &bytes, true)
            .map_err(|e| fs.zone_error(e))?;
        self.wp += bytes.len() as u64;
        Ok(written + bytes.len() as u64)
    }

    /// Starts the next generation in the other metadata zone with a snapshot, then resets
    /// the current one. A crash in between leaves both: recovery takes the newer complete one.
    pub fn roll(&mut self, fs: &Inner) -> Result<u64> {
        let other = if self.zone == META_ZONES[0] {
            META_ZONES[1]
        } else {
            META_ZONES[0]
        };
        fs.dev.reset(other).map_err(|e| fs.zone_error(e))?;
        let generation = self.generation + 1;
        let bytes = journal::encode_commit(generation, &[self.snapshot()], fs.lba);
        if bytes.len() as u64 > fs.dev.geometry().zone_capacity {
            return Err(journal_full(fs, bytes.len()));
        }
        // NB: finished first so that the old zone holds no active resource while the new one
        // is written.
        let _ = fs.dev.finish(self.zone);
        fs.dev
            .write(other, 0, &bytes, true)
            .map_err(|e| fs.zone_error(e))?;
        fs.dev.reset(self.zone).map_err(|e| fs.zone_error(e))?;
        fs.counters
            .resets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.zone = other;
        self.wp = bytes.len() as u64;
        self.generation = generation;
        Ok(bytes.len() as u64)
    }
}

fn journal_full(fs: &Inner, len: usize) -> Error {
    Error::io(
        "zonefs journal",
        fs.device_path(),
        std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            format!(
                "a metadata record of {len} bytes does not fit a metadata zone of {} bytes: \
                 use larger zones",
                fs.dev.geometry().zone_capacity
            ),
        ),
    )
}
