//! The write-ahead logs of a database: one active WAL and the sealed WALs of memtables that
//! are not flushed yet.
//!
//! A memtable switch seals the active WAL without syncing it (its bytes are handed to the OS).
//! Durability order is kept on the sync path instead:
//! - INVARIANT: before any sync of a WAL, every older sealed WAL is synced. So a record that
//!   is durable implies every older record is.
//! - INVARIANT: while older sealed WALs are live, the first synced group of the active WAL is
//!   preceded by one more sync of the active WAL (after an empty-batch marker record if it is
//!   still empty), so every record it acknowledges carries `synced_through > 0`. A record with
//!   `synced_through > 0` thus proves that every older live WAL was complete on stable
//!   storage, which recovery uses to tell corruption from a crash that lost unsynced bytes.
//!   Without older live WALs there is nothing to prove and no extra sync.
//! - INVARIANT: before any sync of a WAL, the directory holding the WALs is synced if a WAL
//!   was created since it last was. A memtable switch creates a WAL without syncing the
//!   directory (an fsync there would stall every writer queued behind the switch); until a
//!   write asks for durability, losing the new file's entry loses only unsynced records.

use crate::env::Fs;
use crate::error::Result;
use crate::options::Durability;
use crate::wal::log::LogWriter;
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::Arc;

/// The active WAL and the sealed, live ones. Owned by the group-commit leader.
pub struct WalSet {
    active: LogWriter,
    active_number: u64,
    /// Sealed WALs whose memtables are not flushed yet, oldest first, with their writer while
    /// their bytes may not be durable.
    sealed: VecDeque<(u64, Option<LogWriter>)>,
    /// Whether records appended to the active WAL now carry the proof described above.
    proven: bool,
    /// The directory the WALs are created in, and whether every WAL's entry in it is durable.
    fs: Arc<dyn Fs>,
    dir: PathBuf,
    dir_synced: bool,
}

impl WalSet {
    /// A set whose active WAL is `writer`, numbered `number`, with no older WAL live. The
    /// caller has synced `dir` since creating the WAL.
    pub fn new(number: u64, writer: LogWriter, fs: Arc<dyn Fs>, dir: PathBuf) -> Self {
        WalSet {
            active: writer,
            active_number: number,
            sealed: VecDeque::new(),
            proven: false,
            fs,
            dir,
            dir_synced: true,
        }
    }

    /// Appends one record per payload to the active WAL and makes them as durable as asked.
    /// `marker` makes a payload that changes nothing on replay (an empty batch), written first
    /// when the proof sync finds the active WAL empty.
    pub fn append(
        &mut self,
        payloads: &[&[u8]],
        durability: Durability,
        marker: impl FnOnce() -> Vec<u8>,
    ) -> Result<()> {
        if durability == Durability::Sync && !self.dir_synced {
            self.fs.sync_dir(&self.dir)?;
            self.dir_synced = true;
        }
        if durability == Durability::Sync && !self.proven && !self.sealed.is_empty() {
            self.sync_sealed()?;
            if self.active.size() == 0 {
                self.active.add_record(&marker())?;
            }
            self.active.sync()?;
            self.proven = true;
        }
        self.active.add_records(payloads)?;
        match durability {
            Durability::Buffered => Ok(()),
            Durability::Flush => self.active.flush(),
            Durability::Sync => self.active.sync(),
        }
    }

    /// Syncs and closes every sealed WAL that may not be durable, oldest first.
    fn sync_sealed(&mut self) -> Result<()> {
        for (_, slot) in self.sealed.iter_mut() {
            if let Some(wal) = slot.as_mut() {
                wal.sync()?;
            }
            if let Some(wal) = slot.take() {
                wal.close()?;
            }
        }
        Ok(())
    }

    /// Seals the active WAL (its bytes go to the OS, unsynced) and makes `writer`, a file
    /// just created in the WAL directory, active.
    pub fn rotate(&mut self, number: u64, writer: LogWriter) -> Result<()> {
        self.dir_synced = false;
        self.active.flush()?;
        let mut old = std::mem::replace(&mut self.active, writer);
        let old_number = std::mem::replace(&mut self.active_number, number);
        // NB: a sealed WAL ends at its last record (`seal` or `close`) before a newer one can
        // vouch for it: a zero tail there (a pm tier's length run ahead) would read as damage
        // and stop replay before the newer WALs.
        let still_open = if old.synced_through() == old.size() {
            old.close()?;
            None
        } else {
            old.seal()?;
            Some(old)
        };
        self.sealed.push_back((old_number, still_open));
        self.proven = false;
        Ok(())
    }

    /// Forgets sealed WALs numbered below `log_number`: their memtables are in tables now.
    pub fn release_below(&mut self, log_number: u64) {
        while self.sealed.front().is_some_and(|(n, _)| *n < log_number) {
            if let Some((_, Some(wal))) = self.sealed.pop_front() {
                let _ = wal.close();
            }
        }
    }

    /// Closes every WAL, handing buffered bytes to the OS.
    pub fn close(self) -> Result<()> {
        for (_, wal) in self.sealed {
            if let Some(wal) = wal {
                wal.close()?;
            }
        }
        self.active.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{BufferedFile, CrashPolicy, FaultFs};
    use crate::wal::log::{LogReader, RecoveryMode};
    use std::path::Path;

    fn wal(fs: &Arc<FaultFs>, number: u64) -> LogWriter {
        let path = PathBuf::from(format!("/db/{number:06}.log"));
        let file = BufferedFile::new(fs.create(&path).unwrap(), 4096);
        LogWriter::new(file, path)
    }

    fn records(fs: &FaultFs, number: u64) -> Option<Vec<Vec<u8>>> {
        let path = PathBuf::from(format!("/db/{number:06}.log"));
        if !fs.exists(&path) {
            return None;
        }
        let mut reader = LogReader::open(fs, &path, RecoveryMode::TolerateCorruptedTail).unwrap();
        let mut out = Vec::new();
        while let Some((_, payload)) = reader.next_record().unwrap() {
            out.push(payload.to_vec());
        }
        Some(out)
    }

    fn set(fs: &Arc<FaultFs>) -> WalSet {
        crate::env::create_dir_all_durable(&**fs, Path::new("/db")).unwrap();
        let first = wal(fs, 1);
        fs.sync_dir(Path::new("/db")).unwrap();
        WalSet::new(
            1,
            first,
            Arc::clone(fs) as Arc<dyn Fs>,
            PathBuf::from("/db"),
        )
    }

    #[test]
    fn a_switch_does_not_sync_the_directory() {
        let fs = FaultFs::new(1);
        let mut wals = set(&fs);
        wals.append(&[b"a"], Durability::Sync, Vec::new).unwrap();
        let syncs = fs.sync_count();
        wals.rotate(2, wal(&fs, 2)).unwrap();
        wals.append(&[b"b"], Durability::Flush, Vec::new).unwrap();
        assert_eq!(fs.sync_count(), syncs, "no sync until a write asks for one");
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(records(&fs, 1), Some(vec![b"a".to_vec()]));
        assert_eq!(
            records(&fs, 2),
            None,
            "the new WAL's entry was never synced"
        );
    }

    #[test]
    fn a_synced_write_after_a_switch_survives_with_its_file() {
        let fs = FaultFs::new(2);
        let mut wals = set(&fs);
        wals.append(&[b"a"], Durability::Buffered, Vec::new)
            .unwrap();
        wals.rotate(2, wal(&fs, 2)).unwrap();
        wals.rotate(3, wal(&fs, 3)).unwrap();
        wals.append(&[b"c"], Durability::Sync, || b"marker".to_vec())
            .unwrap();
        fs.crash(CrashPolicy::DropUnsynced);
        assert_eq!(records(&fs, 1), Some(vec![b"a".to_vec()]));
        assert_eq!(records(&fs, 2), Some(vec![]));
        assert_eq!(
            records(&fs, 3),
            Some(vec![b"marker".to_vec(), b"c".to_vec()])
        );
    }
}
