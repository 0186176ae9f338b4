//! Recovery's check of replayed writes against the value log. A write that is not `Sync`
//! appends its records without syncing them, so a power loss can keep its WAL record (synced
//! by a later write's WAL sync, or written back by the OS) and lose the records it names.
//! Recovery stops at the first such write, as at a torn WAL tail: no acknowledged `Sync`
//! write follows it (`docs/value-log.md`, "Durability and syncs"). Damage a crash cannot
//! explain is `Corruption`, as in the WAL's recovery modes.

use super::{decode_stored, file_name, Stored, ValueLog};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};

impl ValueLog {
    /// The first value-log record a replayed write names that cannot be read back, with a
    /// `Corruption` error naming its file and offset and whether a crash explains it; `None`
    /// if every record is intact.
    ///
    /// A record is lost when its file exists and the bytes at the pointer do not form the
    /// record of its key (past the end of the file, or failing their checksum). A missing
    /// file is not a loss: only garbage collection deletes files, once the rewrites that
    /// shadow every pointer into them are durable.
    pub(crate) fn lost_record(&self, batch: &WriteBatch) -> Result<Option<LostRecord>> {
        for op in batch.iter() {
            let BatchOp::Put(key, stored) = op? else {
                continue;
            };
            let Some(Stored::Pointer(p)) = decode_stored(stored) else {
                continue;
            };
            match self.fetch_record(key, p) {
                Ok(_) => {}
                Err(e) if e.is_corruption() => {
                    let path = self.dir.join(file_name(p.file));
                    if self.fs.exists(&path) {
                        let torn = self.crash_shaped(&path, p.offset, p.len as u64)?;
                        return Ok(Some(LostRecord { error: e, torn }));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }

    /// Whether the damage at `offset..offset + len` of `path` has a power loss's shape: the
    /// record runs past the end of the file, or part of it reads as zeros the way lost bytes
    /// do (`zeros_of_a_crash`). Damage of any other shape (a flipped bit in written bytes) is
    /// not something a crash does.
    fn crash_shaped(&self, path: &std::path::Path, offset: u64, len: u64) -> Result<bool> {
        let file = self.fs.open_read(path)?;
        let size = file.size();
        if offset + len > size {
            return Ok(true);
        }
        // The bytes after the record up to the end of its last sector count too: lost bytes
        // run on to a boundary.
        let upto = (offset + len).div_ceil(SECTOR) * SECTOR;
        let mut record = vec![0; (upto.min(size) - offset) as usize];
        file.read_exact_at(offset, &mut record)?;
        Ok(zeros_of_a_crash(&record, offset, size))
    }
}

/// Whether `record` (and the bytes after it to the end of its sector), read at `offset` of a
/// file of `size` bytes, holds zeros a power loss leaves: a run of zeros ending at a sector boundary (or at the end of the file) that starts
/// at the record's first byte (its checksum: the page holding it never reached the device) or
/// at a half-sector boundary (a torn sector's second half, or a whole lost page).
fn zeros_of_a_crash(record: &[u8], offset: u64, size: u64) -> bool {
    let end = offset + record.len() as u64;
    let ends = (offset / SECTOR + 1..=end / SECTOR)
        .map(|s| s * SECTOR)
        .chain((end == size).then_some(end));
    ends.into_iter().any(|e| {
        let upto = &record[..(e - offset) as usize];
        let run = upto.iter().rev().take_while(|&&b| b == 0).count() as u64;
        let start = e - run;
        run > 0 && (start == offset || start.div_ceil(SECTOR / 2) * (SECTOR / 2) < e)
    })
}

/// The device's write unit: a power loss tears at most one, leaving its end as zeros.
const SECTOR: u64 = 512;

/// A value-log record a replayed write names that cannot be read back.
pub(crate) struct LostRecord {
    /// `Corruption` naming the file and offset.
    pub error: Error,
    /// Whether a power loss explains the damage (see `zeros_of_a_crash`).
    pub torn: bool,
}

#[cfg(test)]
mod tests {
    use super::zeros_of_a_crash;

    #[test]
    fn zeros_a_crash_leaves_are_told_from_a_flipped_bit() {
        let mut rec = vec![7u8; 600];
        // A lost page from the record's first byte to the page's end.
        rec[..112].fill(0);
        assert!(zeros_of_a_crash(&rec, 4096 - 112, 1 << 20));
        // A torn sector: its second half reads as zeros.
        let mut rec = vec![7u8; 600];
        rec[256 - 100..512 - 100].fill(0);
        assert!(zeros_of_a_crash(&rec, 100, 1 << 20));
        // The same, in the file's last, partial sector.
        let mut rec = vec![7u8; 300];
        rec[256..].fill(0);
        assert!(zeros_of_a_crash(&rec, 0, 300));
        // A flipped bit, or zeros that do not reach a boundary the way lost bytes do.
        let mut rec = vec![7u8; 600];
        rec[20] ^= 1;
        assert!(!zeros_of_a_crash(&rec, 0, 1 << 20));
        rec[500..512].fill(0);
        assert!(
            !zeros_of_a_crash(&rec, 0, 1 << 20),
            "a short run ending at a sector"
        );
        rec[300..400].fill(0);
        assert!(
            !zeros_of_a_crash(&rec, 0, 1 << 20),
            "a run ending inside a sector"
        );
    }
}
