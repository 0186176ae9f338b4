//! Optimistic transactions.
//!
//! A transaction reads at a snapshot taken when it begins (plus its own writes) and buffers
//! its writes. Commit validates, at the point where its write is numbered and with every
//! earlier write visible, that no key it read or wrote has an entry newer than its snapshot;
//! then its writes go in as one batch (atomic in the log and in recovery). In group mode the
//! validation runs in the group-commit leader, which a committing transaction always is; with
//! the parallel WAL it runs under the admission lock.

use super::{Db, DbInner};
use crate::batch::{check_key_value, WriteBatch};
use crate::error::{Error, Result};
use crate::handle::Handle;
use crate::options::{Durability, ReadOptions, WriteOptions};
use crate::snapshot::Snapshot;
use crate::stats::Counters;
use std::collections::{BTreeMap, BTreeSet};

/// An optimistic transaction, begun by [`Db::transaction`]: reads at a snapshot taken when it
/// began plus its own writes, buffers writes until [`commit`](Transaction::commit). Dropping it
/// rolls it back.
pub struct Transaction<'a> {
    db: &'a Db,
    snapshot: Snapshot,
    /// The last write to each key (`None` = delete), in key order.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys read from the database (not from the transaction's own writes).
    reads: BTreeSet<Vec<u8>>,
}

/// A transaction ready to commit: its batch and what to validate.
pub(super) struct PreparedCommit {
    durability: Durability,
    batch: WriteBatch,
    /// Keys read or written, checked for writes newer than `snapshot`.
    keys: Vec<Vec<u8>>,
    /// Held until the commit is decided, so validation sees the keys' history.
    snapshot: Snapshot,
}

impl<'a> Transaction<'a> {
    pub(super) fn new(db: &'a Db) -> Self {
        Transaction {
            snapshot: db.snapshot(),
            db,
            writes: BTreeMap::new(),
            reads: BTreeSet::new(),
        }
    }

    /// The value of `key` as this transaction sees it: its own last write to the key, else
    /// the database at the transaction's start. Records the key for validation.
    pub fn get(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(w) = self.writes.get(key) {
            return Ok(w.clone());
        }
        self.reads.insert(key.to_vec());
        self.db.get(&ReadOptions::at(&self.snapshot), key)
    }

    /// Buffers a write of `value` under `key`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key_value(key, value)?;
        self.writes.insert(key.to_vec(), Some(value.to_vec()));
        Ok(())
    }

    /// Buffers a delete of `key`.
    pub fn delete(&mut self, key: &[u8]) -> Result<()> {
        check_key_value(key, &[])?;
        self.writes.insert(key.to_vec(), None);
        Ok(())
    }

    /// Commits: writes the buffered writes as one batch, atomic, visible and durable as
    /// [`Db::write`] makes them. [`Error::Conflict`], with nothing written, if another write
    /// changed a key this transaction read or wrote since it began; otherwise the errors of
    /// [`Db::write`]. With split values (`values = "split"`), where value-log collection
    /// rewrites live values, a key whose value is the one this transaction began with counts
    /// as unchanged.
    pub fn commit(self, opts: &WriteOptions) -> Result<()> {
        let db = self.db;
        db.inner.commit(self.prepare(opts)?)
    }

    /// Starts committing; the handle reports the outcome as [`Transaction::commit`] does.
    pub fn submit_commit(self, opts: &WriteOptions) -> Result<Handle<()>> {
        let db = self.db;
        db.inner.submit_commit(self.prepare(opts)?)
    }

    /// Discards the transaction's writes.
    pub fn rollback(self) {}

    fn prepare(self, opts: &WriteOptions) -> Result<PreparedCommit> {
        let db = self.db;
        let mut batch = WriteBatch::new();
        for (k, v) in &self.writes {
            match v {
                Some(v) => batch.put(k, v),
                None => batch.delete(k),
            }
        }
        db.inner.check_batch(&batch)?;
        let mut keys: BTreeSet<Vec<u8>> = self.reads;
        keys.extend(self.writes.into_keys());
        Ok(PreparedCommit {
            durability: opts.durability,
            batch,
            keys: keys.into_iter().collect(),
            snapshot: self.snapshot,
        })
    }
}

impl DbInner {
    /// Validates and writes a prepared transaction.
    pub(super) fn commit(&self, commit: PreparedCommit) -> Result<()> {
        let PreparedCommit {
            durability,
            batch,
            keys,
            snapshot,
        } = commit;
        let check = || -> Result<()> {
            for key in &keys {
                if self.changed_since(key, &snapshot)? {
                    return Err(Error::Conflict { key: key.clone() });
                }
            }
            Ok(())
        };
        let result = self.write_checked(durability, batch, &check);
        drop(snapshot);
        let c = &self.counters;
        match &result {
            Ok(()) => Counters::add(&c.txn_commits, 1),
            Err(Error::Conflict { .. }) => Counters::add(&c.txn_conflicts, 1),
            Err(_) => {}
        }
        result
    }

    /// Whether a write since `snapshot` changed `key`. SPLIT VALUES: value-log collection
    /// moves a live value by writing its key again (a new sequence, the same value), so with a
    /// value log a newer sequence is a change only if the value differs from the snapshot's;
    /// the reads resolve pointers, which costs value-log reads on this path only.
    fn changed_since(&self, key: &[u8], snapshot: &crate::Snapshot) -> Result<bool> {
        if self
            .latest_seq(key)?
            .is_none_or(|seq| seq <= snapshot.sequence())
        {
            return Ok(false);
        }
        if self.vlog.is_none() {
            return Ok(true);
        }
        let then = self.get(&crate::ReadOptions::at(snapshot), key)?;
        Ok(then != self.get(&crate::ReadOptions::default(), key)?)
    }
}
