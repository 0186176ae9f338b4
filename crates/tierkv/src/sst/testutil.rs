//! In-memory files and table-building helpers for the sst tests.

use crate::env::{BufferedFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use crate::options::TableOptions;
use crate::sst::{BlockCache, Table, TableBuilder, TableProperties};
use parking_lot::Mutex;
use std::path::PathBuf;
use std::sync::Arc;

/// The path tests give their tables.
pub fn test_path() -> PathBuf {
    PathBuf::from("/mem/000007.sst")
}

/// A writable file whose bytes land in a shared vector.
pub struct MemWritable {
    pub data: Arc<Mutex<Vec<u8>>>,
    pub synced: Arc<Mutex<bool>>,
}

impl WritableFile for MemWritable {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.data.lock().extend_from_slice(data);
        Ok(())
    }
    fn sync(&mut self) -> Result<()> {
        *self.synced.lock() = true;
        Ok(())
    }
    fn size(&self) -> u64 {
        self.data.lock().len() as u64
    }
    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}

/// A read-only file over a byte vector.
pub struct MemFile(pub Vec<u8>);

impl RandomAccessFile for MemFile {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let src = usize::try_from(offset)
            .ok()
            .and_then(|o| self.0.get(o..o.checked_add(buf.len())?));
        let eof = || std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "short read");
        buf.copy_from_slice(src.ok_or_else(|| Error::io("read", test_path(), eof()))?);
        Ok(())
    }
    fn size(&self) -> u64 {
        self.0.len() as u64
    }
}

/// Builds a table from sorted entries; returns its bytes and properties.
pub fn build_table(
    entries: &[(Vec<u8>, Vec<u8>)],
    opts: TableOptions,
) -> (Vec<u8>, TableProperties) {
    let data = Arc::new(Mutex::new(Vec::new()));
    let synced = Arc::new(Mutex::new(false));
    let file = MemWritable {
        data: Arc::clone(&data),
        synced: Arc::clone(&synced),
    };
    let mut b = TableBuilder::new(BufferedFile::new(Box::new(file), 1024), opts);
    for (k, v) in entries {
        b.add(k, v).unwrap();
    }
    let props = b.finish().unwrap();
    assert!(*synced.lock(), "finish must sync");
    let bytes = data.lock().clone();
    assert_eq!(props.file_size, bytes.len() as u64);
    (bytes, props)
}

/// Opens table bytes held in memory.
pub fn open_bytes(bytes: Vec<u8>, cache: Option<Arc<BlockCache>>) -> Result<Arc<Table>> {
    Table::open(Arc::new(MemFile(bytes)), test_path(), cache)
}
