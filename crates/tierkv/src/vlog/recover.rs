//! Recovery's check of replayed writes against the value log. A write that is not `Sync`
//! appends its records without syncing them, so a power loss can keep its WAL record (synced
//! by a later write's WAL sync, or written back by the OS) and lose the records it names.
//! Recovery stops at the first such write, as at a torn WAL tail: no acknowledged `Sync`
//! write follows it (`docs/value-log.md`, "Durability and syncs").

use super::{decode_stored, file_name, Stored, ValueLog};
use crate::batch::{BatchOp, WriteBatch};
use crate::error::{Error, Result};

impl ValueLog {
    /// The first value-log record a replayed write names that a crash lost, as a
    /// `Corruption` error naming its file and offset; `None` if every record is intact.
    ///
    /// A record is lost when its file exists and the bytes at the pointer do not form the
    /// record of its key (past the end of the file, or failing their checksum). A missing
    /// file is not a loss: only garbage collection deletes files, once the rewrites that
    /// shadow every pointer into them are durable.
    pub(crate) fn lost_record(&self, batch: &WriteBatch) -> Result<Option<Error>> {
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
                    if self.fs.exists(&self.dir.join(file_name(p.file))) {
                        return Ok(Some(e));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(None)
    }
}
