//! Open table readers, keyed by file number, shared by reads, iterators and compactions.
//!
//! A table is opened once (footer, index and filter read and verified) and kept until its file
//! is deleted. The map lock is never held while a file is opened.

use crate::error::Result;
use crate::sst::{BlockCache, Table};
use crate::tier::{FileKind, Tiers};
use crate::version::FileMeta;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

/// Cache of open tables.
pub(crate) struct TableCache {
    tiers: Arc<Tiers>,
    block_cache: Option<Arc<BlockCache>>,
    open: Mutex<HashMap<u64, Arc<Table>>>,
}

impl TableCache {
    pub fn new(tiers: Arc<Tiers>, block_cache: Option<Arc<BlockCache>>) -> Self {
        TableCache {
            tiers,
            block_cache,
            open: Mutex::new(HashMap::new()),
        }
    }

    /// The reader of `file`, opening it on first use.
    pub fn get(&self, file: &FileMeta) -> Result<Arc<Table>> {
        if let Some(t) = self.open.lock().get(&file.number) {
            return Ok(Arc::clone(t));
        }
        let path = self.tiers.path(file.tier, FileKind::Table, file.number);
        let reader = self.tiers.open_read(file.tier, &path)?;
        let table = Table::open(reader, path, self.block_cache.clone())?;
        let mut open = self.open.lock();
        Ok(Arc::clone(open.entry(file.number).or_insert(table)))
    }

    /// Forgets a deleted table.
    pub fn evict(&self, number: u64) {
        self.open.lock().remove(&number);
    }
}
