//! Per-file accounting of the value log: the bytes each file holds, the garbage flushes and
//! compactions counted in it, and the batches appended to it whose pointers may not have
//! reached the LSM yet. Garbage collection picks its files from this table.

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the engine knows of one value-log file.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct FileUsage {
    /// Record bytes in the file (its size at open plus what was appended since).
    pub bytes: u64,
    /// Record bytes whose pointers flushes and compactions dropped since open.
    pub garbage: u64,
    /// Appends whose pointers are on their way to the WAL: until they land, a record that
    /// no LSM entry names yet may be about to be named.
    pub in_flight: usize,
}

impl FileUsage {
    /// Share of the file that is garbage, in `0.0..=1.0`.
    pub fn garbage_ratio(&self) -> f64 {
        if self.bytes == 0 {
            return 0.0;
        }
        self.garbage.min(self.bytes) as f64 / self.bytes as f64
    }
}

/// The usage of every value-log file of an open database, by file number.
#[derive(Debug, Default)]
pub(crate) struct FileTable {
    files: Mutex<BTreeMap<u64, FileUsage>>,
}

impl FileTable {
    /// Records a file found at open, holding `bytes`.
    pub fn add_existing(&self, number: u64, bytes: u64) {
        self.files.lock().entry(number).or_default().bytes = bytes;
    }

    /// Records an append of `bytes` to `number` whose pointers are not in the LSM yet; the
    /// returned guard says they landed (or never will) when it drops.
    pub fn appended(self: &Arc<Self>, number: u64, bytes: u64) -> InFlight {
        let mut files = self.files.lock();
        let usage = files.entry(number).or_default();
        usage.bytes += bytes;
        usage.in_flight += 1;
        InFlight {
            table: Some(Arc::clone(self)),
            number,
        }
    }

    /// Adds `bytes` of garbage to `number`; a file already deleted is ignored.
    pub fn add_garbage(&self, number: u64, bytes: u64) {
        if let Some(usage) = self.files.lock().get_mut(&number) {
            usage.garbage += bytes;
        }
    }

    /// Counts every byte of a collected file as garbage: its live records were rewritten.
    pub fn mark_collected(&self, number: u64) {
        if let Some(usage) = self.files.lock().get_mut(&number) {
            usage.garbage = usage.bytes;
        }
    }

    /// Whether file `number` is known (found at open or appended to, not deleted).
    pub fn holds(&self, number: u64) -> bool {
        self.files.lock().contains_key(&number)
    }

    /// Forgets a deleted file.
    pub fn remove(&self, number: u64) {
        self.files.lock().remove(&number);
    }

    /// Every file's usage, by number.
    pub fn usage(&self) -> Vec<(u64, FileUsage)> {
        self.files.lock().iter().map(|(&n, &u)| (n, u)).collect()
    }

    /// Bytes in all files, and the garbage counted in them.
    pub fn totals(&self) -> (u64, u64) {
        let files = self.files.lock();
        files.values().fold((0, 0), |(b, g), u| {
            (b + u.bytes, g + u.garbage.min(u.bytes))
        })
    }

    fn landed(&self, number: u64) {
        if let Some(usage) = self.files.lock().get_mut(&number) {
            usage.in_flight -= 1;
        }
    }
}

/// An append whose pointers are on their way to the LSM; dropped once the write that carries
/// them returned (applied, or failed).
#[derive(Debug)]
#[must_use = "the append counts as in flight until this guard drops"]
pub(crate) struct InFlight {
    table: Option<Arc<FileTable>>,
    number: u64,
}

impl InFlight {
    /// A guard for a batch that appended nothing.
    pub fn none() -> Self {
        InFlight {
            table: None,
            number: 0,
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(table) = self.table.take() {
            table.landed(self.number);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appends_count_bytes_and_stay_in_flight_until_dropped() {
        let table = Arc::new(FileTable::default());
        table.add_existing(3, 1000);
        let a = table.appended(4, 100);
        let b = table.appended(4, 50);
        table.add_garbage(3, 400);
        table.add_garbage(9, 400);
        let usage = table.usage();
        assert_eq!(usage.len(), 2);
        assert_eq!(usage[1].1.in_flight, 2);
        drop(a);
        drop(b);
        drop(InFlight::none());
        assert_eq!(
            table.usage()[1].1,
            FileUsage {
                bytes: 150,
                garbage: 0,
                in_flight: 0
            }
        );
        assert_eq!(table.totals(), (1150, 400));
        assert!((table.usage()[0].1.garbage_ratio() - 0.4).abs() < 1e-9);
        table.remove(3);
        assert_eq!(table.totals(), (150, 0));
    }
}
