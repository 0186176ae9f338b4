//! The write-ahead logs of a database: one active WAL and the sealed WALs of memtables that
//! are not flushed yet.
//!
//! A memtable switch seals the active WAL without syncing it (its bytes are handed to the OS).
//! Durability order is kept on the sync path instead:
//! - INVARIANT: before any sync of a WAL, every older WAL is synced. So a record that is
//!   durable implies every older record is.
//! - INVARIANT: when a sync makes older sealed WALs durable, the active WAL is synced once
//!   more before the acknowledged records are appended (an empty-batch marker is written first
//!   if it is empty), so those records carry `synced_through > 0`. A record with
//!   `synced_through > 0` thus proves that every older WAL was complete on stable storage,
//!   which recovery uses to tell corruption from a crash that lost unsynced bytes.

use super::log::LogWriter;
use crate::error::Result;
use crate::options::Durability;
use std::collections::VecDeque;

/// The active WAL and the sealed, not yet durable ones. Owned by the group-commit leader.
pub struct WalSet {
    active: LogWriter,
    active_number: u64,
    /// Sealed WALs whose bytes may not be durable yet, oldest first.
    unsynced: VecDeque<(u64, LogWriter)>,
}

impl WalSet {
    /// A set whose active WAL is `writer`, numbered `number`, with nothing older pending.
    pub fn new(number: u64, writer: LogWriter) -> Self {
        WalSet {
            active: writer,
            active_number: number,
            unsynced: VecDeque::new(),
        }
    }

    /// Number of the active WAL.
    pub fn active_number(&self) -> u64 {
        self.active_number
    }

    /// Appends one record per payload to the active WAL and makes them as durable as asked.
    /// `marker` is a payload that changes nothing on replay (an empty batch), written first
    /// when older WALs had to be synced and the active WAL is still empty.
    pub fn append(
        &mut self,
        payloads: &[&[u8]],
        durability: Durability,
        marker: &[u8],
    ) -> Result<()> {
        if durability == Durability::Sync && !self.unsynced.is_empty() {
            self.sync_older()?;
            if self.active.size() == 0 {
                self.active.add_record(marker)?;
            }
            self.active.sync()?;
        }
        self.active.add_records(payloads)?;
        match durability {
            Durability::Buffered => Ok(()),
            Durability::Flush => self.active.flush(),
            Durability::Sync => self.active.sync(),
        }
    }

    /// Syncs every sealed WAL, oldest first, and closes it.
    fn sync_older(&mut self) -> Result<()> {
        while let Some((_, wal)) = self.unsynced.front_mut() {
            wal.sync()?;
            let (_, wal) = self.unsynced.pop_front().expect("front exists");
            wal.close()?;
        }
        Ok(())
    }

    /// Seals the active WAL (its bytes go to the OS, unsynced) and makes `writer` active.
    pub fn rotate(&mut self, number: u64, writer: LogWriter) -> Result<()> {
        self.active.flush()?;
        let old = std::mem::replace(&mut self.active, writer);
        let old_number = std::mem::replace(&mut self.active_number, number);
        if old.synced_through() == old.size() {
            old.close()?;
        } else {
            self.unsynced.push_back((old_number, old));
        }
        Ok(())
    }

    /// Forgets sealed WALs numbered below `log_number`: their memtables are in tables now.
    pub fn release_below(&mut self, log_number: u64) {
        while self.unsynced.front().is_some_and(|(n, _)| *n < log_number) {
            if let Some((_, wal)) = self.unsynced.pop_front() {
                let _ = wal.close();
            }
        }
    }

    /// Closes every WAL, handing buffered bytes to the OS.
    pub fn close(self) -> Result<()> {
        for (_, wal) in self.unsynced {
            wal.close()?;
        }
        self.active.close()
    }
}
