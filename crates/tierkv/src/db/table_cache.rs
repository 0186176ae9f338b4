//! Open table readers, keyed by file number, shared by reads, iterators and compactions; and
//! the registry of replicas they may read from instead (`db::replica`).
//!
//! A table is opened once (footer, index and filter read and verified) and kept until its file
//! is deleted; with `pin_capacity_index` the tables off the fast tier are opened as soon as
//! they are listed (`DbInner::open_capacity_tables`). The map lock is never held while a file
//! is opened.
//!
//! INVARIANT: a table on a slower tier is read from its replica on tier 0 only while the
//! replica is registered and complete. Registering, completing and dropping a replica change
//! the registry and the open reader under one lock, so a dropped replica is never opened again
//! and a reader opened from one that was dropped meanwhile is not kept.

use crate::env::RandomAccessFile;
use crate::error::Result;
use crate::placement::replica::ReplicaUse;
use crate::sst::{BlockCache, Table};
use crate::stats::{self, Counters};
use crate::tier::{FileKind, TierId, Tiers};
use crate::version::{FileMeta, Version};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

/// Cache of open tables.
pub(crate) struct TableCache {
    tiers: Arc<Tiers>,
    block_cache: Option<Arc<BlockCache>>,
    inner: Mutex<Inner>,
    /// Replicas completed and dropped so far.
    replicas_made: AtomicU64,
    replicas_dropped: AtomicU64,
}

#[derive(Default)]
struct Inner {
    open: HashMap<u64, Arc<Table>>,
    replicas: HashMap<u64, Replica>,
}

/// A registered replica on tier 0 of table `number` (the map key).
#[derive(Debug, Clone, Copy)]
struct Replica {
    /// Bytes charged to tier 0 (`Tiers::charge_replica`).
    size: u64,
    /// The copy is complete: reads may use it.
    ready: bool,
}

impl Inner {
    fn ready(&self, number: u64) -> bool {
        self.replicas.get(&number).is_some_and(|r| r.ready)
    }
}

impl TableCache {
    pub fn new(tiers: Arc<Tiers>, block_cache: Option<Arc<BlockCache>>) -> Self {
        TableCache {
            tiers,
            block_cache,
            inner: Mutex::default(),
            replicas_made: AtomicU64::new(0),
            replicas_dropped: AtomicU64::new(0),
        }
    }

    /// The reader of `file`, opening it on first use: from its replica when it has one.
    pub fn get(&self, file: &FileMeta) -> Result<Arc<Table>> {
        let from_replica = {
            let inner = self.inner.lock();
            if let Some(t) = inner.open.get(&file.number) {
                return Ok(Arc::clone(t));
            }
            inner.ready(file.number)
        };
        if from_replica {
            // NB: a replica dropped meanwhile is unlinked and fails to open; the table's own
            // file is always there.
            if let Ok(table) = self.open_replica(file) {
                let mut inner = self.inner.lock();
                if inner.ready(file.number) {
                    return Ok(Arc::clone(inner.open.entry(file.number).or_insert(table)));
                }
            }
        }
        let table = self.open_own(file)?;
        let mut inner = self.inner.lock();
        Ok(Arc::clone(inner.open.entry(file.number).or_insert(table)))
    }

    /// The reader of `file`'s own file, never of its replica (to verify what is durable).
    pub fn get_own(&self, file: &FileMeta) -> Result<Arc<Table>> {
        let open = self.inner.lock().open.get(&file.number).cloned();
        match open {
            Some(t) if t.tier() == file.tier => Ok(t),
            _ => self.open_own(file),
        }
    }

    fn open_own(&self, file: &FileMeta) -> Result<Arc<Table>> {
        let open = || {
            let (path, reader) = self.reader(file.tier, FileKind::Table, file.number)?;
            Table::open_on_tier(reader, path, self.block_cache.clone(), file.tier)
        };
        match open() {
            // Every open table holds a descriptor: at the process's limit, close the ones no
            // read is using and try once more, so a database with more tables than
            // descriptors still serves reads instead of failing until it is reopened.
            Err(e) if is_out_of_descriptors(&e) && self.close_idle() > 0 => open(),
            result => result,
        }
    }

    /// Closes the readers that nothing but the cache holds; returns how many. They are
    /// opened again on their next use (their per-table read counts start over).
    fn close_idle(&self) -> usize {
        let mut inner = self.inner.lock();
        let before = inner.open.len();
        inner.open.retain(|_, table| Arc::strong_count(table) > 1);
        before - inner.open.len()
    }

    fn open_replica(&self, file: &FileMeta) -> Result<Arc<Table>> {
        let (path, reader) = self.reader(TierId::FAST, FileKind::Replica, file.number)?;
        Table::open_on_tier(reader, path, self.block_cache.clone(), TierId::FAST)
    }

    /// The path of numbered file `number` of `kind` on `tier`, opened for reads.
    fn reader(
        &self,
        tier: TierId,
        kind: FileKind,
        number: u64,
    ) -> Result<(PathBuf, Arc<dyn RandomAccessFile>)> {
        let path = self.tiers.path(tier, kind, number);
        let reader = self.tiers.open_read(tier, &path)?;
        Ok((path, reader))
    }

    /// Opens the reader of every table of `version` off the fast tier that is not open yet
    /// (`pin_capacity_index`): its footer, index and filter are read now, in the background,
    /// and stay in memory with the reader until the table is deleted, so a point read there
    /// costs only its data block. Returns how many were opened.
    pub fn open_off_fast(&self, version: &Version) -> Result<usize> {
        let closed: Vec<&Arc<FileMeta>> = {
            let inner = self.inner.lock();
            version
                .all_files()
                .map(|(_, f)| f)
                .filter(|f| !f.tier.is_fast() && !inner.open.contains_key(&f.number))
                .collect()
        };
        for file in &closed {
            self.get(file)?;
        }
        Ok(closed.len())
    }

    /// Forgets a deleted table, and drops its replica.
    pub fn evict(&self, number: u64) {
        self.inner.lock().open.remove(&number);
        self.drop_replica(number);
    }

    /// Registers a replica of `file` about to be copied, if it has none and tier 0 has room.
    pub fn begin_replica(&self, file: &FileMeta) -> bool {
        let mut inner = self.inner.lock();
        if inner.replicas.contains_key(&file.number) || !self.tiers.charge_replica(file.size) {
            return false;
        }
        let replica = Replica {
            size: file.size,
            ready: false,
        };
        inner.replicas.insert(file.number, replica);
        true
    }

    /// Whether a replica of table `number` is registered (complete or being copied).
    pub fn has_replica(&self, number: u64) -> bool {
        self.inner.lock().replicas.contains_key(&number)
    }

    /// Whether table `number` has a complete replica that serves its reads.
    pub fn has_ready_replica(&self, number: u64) -> bool {
        self.inner.lock().ready(number)
    }

    /// Marks the copied replica of `file` complete: reads use it from now on (with the blocks
    /// already cached, if the table was open). False (and the copy is deleted) if it was
    /// dropped while being copied.
    pub fn finish_replica(&self, file: &FileMeta) -> Result<bool> {
        let (path, reader) = self.reader(TierId::FAST, FileKind::Replica, file.number)?;
        let open = self.inner.lock().open.get(&file.number).cloned();
        let table = match open {
            Some(t) if !t.tier().is_fast() => t.reopened(reader, path.clone(), TierId::FAST)?,
            _ => Table::open_on_tier(reader, path.clone(), self.block_cache.clone(), TierId::FAST)?,
        };
        let mut inner = self.inner.lock();
        let Some(replica) = inner.replicas.get_mut(&file.number) else {
            drop(inner);
            let _ = self.tiers.fs().remove_file(&path);
            return Ok(false);
        };
        replica.ready = true;
        // NB: installed even if nobody had the table open, so a reader that opened the
        // table's own file meanwhile finds this one in the map instead of adding its own.
        inner.open.insert(file.number, table);
        Counters::add(&self.replicas_made, 1);
        Ok(true)
    }

    /// Drops the replica of table `number`, if any: reads go back to the table's own file,
    /// the room is given back and the copy deleted. Returns the bytes given back.
    pub fn drop_replica(&self, number: u64) -> u64 {
        let removed = {
            let mut inner = self.inner.lock();
            let removed = inner.replicas.remove(&number);
            if removed.is_some() && inner.open.get(&number).is_some_and(|t| t.tier().is_fast()) {
                inner.open.remove(&number);
            }
            removed
        };
        let Some(replica) = removed else {
            return 0;
        };
        self.tiers.release_replica(replica.size);
        // NB: readers that hold the old reader keep reading the unlinked file until they
        // finish; its blocks stay cached under the same id for the table's own reader.
        let _ =
            self.tiers
                .fs()
                .remove_file(&self.tiers.path(TierId::FAST, FileKind::Replica, number));
        Counters::add(&self.replicas_dropped, 1);
        replica.size
    }

    /// The registered replicas and how much each was read.
    pub fn replicas(&self) -> Vec<ReplicaUse> {
        let inner = self.inner.lock();
        let reads = |n: &u64| {
            inner
                .open
                .get(n)
                .filter(|t| t.tier().is_fast())
                .map_or(0, |t| t.device_reads())
        };
        inner
            .replicas
            .iter()
            .map(|(n, r)| ReplicaUse {
                number: *n,
                size: r.size,
                reads: reads(n),
            })
            .collect()
    }

    /// Replicas completed and dropped since open.
    pub fn replica_counts(&self) -> (u64, u64) {
        (
            stats::load(&self.replicas_made),
            stats::load(&self.replicas_dropped),
        )
    }

    /// For a table with no replica, registered or complete: the data blocks read from its own
    /// file since it was opened (0 if not open). `None` if it has a replica.
    pub fn unreplicated_reads(&self, number: u64) -> Option<u64> {
        let inner = self.inner.lock();
        if inner.replicas.contains_key(&number) {
            return None;
        }
        Some(inner.open.get(&number).map_or(0, |t| t.device_reads()))
    }
}

/// True if `e` is an open that failed for want of a file descriptor (`EMFILE`: the process's
/// limit; `ENFILE`: the system's).
fn is_out_of_descriptors(e: &crate::error::Error) -> bool {
    matches!(
        e,
        crate::error::Error::Io { source, .. }
            if matches!(source.raw_os_error(), Some(libc::EMFILE | libc::ENFILE))
    )
}

impl super::DbInner {
    /// With `pin_capacity_index`: opens the readers of the current version's tables off the
    /// fast tier that are not open yet.
    pub(super) fn open_capacity_tables(&self) {
        if !self.opts.cache.pin_capacity_index {
            return;
        }
        // NB: a table that fails to open here is opened again by the first read that needs it,
        // which reports the error; a database closing meanwhile may have deleted it.
        let _ = self.table_cache.open_off_fast(&self.versions.current());
    }
}
