//! [`MappedFs`]: the [`Fs`] seam over memory-mapped files, for a tier of kind `pm` (a DAX or
//! tmpfs mount; `docs/pm-tier.md`).
//!
//! Every file's bytes are read and written through a shared mapping (`memmap2`), so a write is
//! a `memcpy` into the page cache (tmpfs) or straight into persistent memory (DAX) and a sync
//! is `msync` of the range written since the last one:
//! - `append` grows the file with `ftruncate` to its exact new length (so a reader or a crash
//!   never sees a padded tail), maps ahead in growing steps, and copies the bytes in.
//! - `open_positional` extends the file to its length (allocated, then `ftruncate`: it reads
//!   as zeros, and on tmpfs or DAX no block map changes later) and maps it whole; `write_at`
//!   is a copy, durable with `msync` of the written range.
//! - Storage is allocated (`fallocate`) before a store into the mapping needs it, appends in
//!   1 MiB steps past the end: a full mount then fails the write with `ENOSPC` instead of
//!   killing the process with `SIGBUS` at the store.
//! - Directory operations and locks are [`PosixFs`]'s.
//!
//! Durability: on a DAX mount `msync` is the persistence point (the kernel flushes the CPU
//! cache lines of the range); on tmpfs a synced byte survives a process crash, never a power
//! loss or a reboot. The mapping belongs to the file, not to the handle: a file another handle
//! shrinks while it is mapped would fault the reader, and the engine never shrinks a file it
//! reads (files are created, appended, renamed and removed, positional files only grow).

use super::posix::file_len;
use super::{FileLock, Fs, PositionalFile, PosixFs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The smallest mapping an appended file reserves; later steps double it.
const MIN_APPEND_MAP: u64 = 1 << 20;
/// The largest step by which an appended file's mapping grows at once.
const MAX_APPEND_STEP: u64 = 256 << 20;
/// The step by which an appended file's storage is allocated ahead of its length.
const ALLOCATE_STEP: u64 = 1 << 20;

/// The memory-mapped file system of a `pm` tier.
#[derive(Debug, Clone, Copy, Default)]
pub struct MappedFs;

impl MappedFs {
    /// A handle to the mapped file system (it has no state).
    pub fn new() -> Self {
        MappedFs
    }
}

/// Maps `len` bytes of `file` for reading and writing; `len` may run past the end of the file
/// (only the bytes inside it may be touched).
fn map_mut(file: &File, len: u64, path: &Path) -> Result<MmapMut> {
    // SAFETY: the mapping is shared with the file; the engine never shrinks a file while a
    // handle maps it (module docs), and every access is bounds-checked against the file's
    // length first.
    unsafe { MmapOptions::new().len(len as usize).map_mut(file) }
        .map_err(|e| Error::io("mmap", path, e))
}

/// Allocates storage for `len` bytes of `file` at `offset` (`keep_size`: past its end,
/// without changing its length), so that a store into the mapping never needs a page the
/// mount cannot give: on a full tmpfs that store would kill the process with `SIGBUS`, where
/// this returns `ENOSPC` as an error naming the file. A mount that cannot allocate ahead
/// (`EOPNOTSUPP`) is left to fault as before.
fn allocate(file: &File, offset: u64, len: u64, keep_size: bool, path: &Path) -> Result<()> {
    use std::os::unix::io::AsRawFd;
    if len == 0 {
        return Ok(());
    }
    let mode = if keep_size {
        libc::FALLOC_FL_KEEP_SIZE
    } else {
        0
    };
    // SAFETY: the descriptor is open for writing for the duration of the call.
    let rc = unsafe { libc::fallocate(file.as_raw_fd(), mode, offset as i64, len as i64) };
    if rc == 0 {
        return Ok(());
    }
    let err = io::Error::last_os_error();
    match err.raw_os_error() {
        Some(libc::EOPNOTSUPP) => Ok(()),
        _ => Err(Error::io("fallocate", path, err)),
    }
}

/// The error for an access of `len` bytes at `offset` past a file's `size`.
fn past_end(op: &'static str, path: &Path, offset: u64, len: usize, size: u64) -> Error {
    let kind = if op == "read" {
        io::ErrorKind::UnexpectedEof
    } else {
        io::ErrorKind::InvalidInput
    };
    Error::io(
        op,
        path,
        io::Error::new(
            kind,
            format!("{len} bytes at offset {offset} run past the mapped file's end at {size}"),
        ),
    )
}

/// `msync` of `len` bytes at `offset` of `map`: on return they are on the medium.
fn flush(map: &MmapMut, offset: u64, len: usize, path: &Path) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    map.flush_range(offset as usize, len)
        .map_err(|e| Error::io("msync", path, e))
}

impl Fs for MappedFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(MappedAppend::new(file, path, 0)))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let size = file_len(&file, path)?;
        Ok(Box::new(MappedAppend::new(file, path, size)))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let size = file_len(&file, path)?;
        let map = if size == 0 {
            None
        } else {
            // SAFETY: as in `map_mut`; the mapping covers exactly the file's bytes at open.
            let map = unsafe { MmapOptions::new().len(size as usize).map(&file) }
                .map_err(|e| Error::io("mmap", path, e))?;
            Some(map)
        };
        Ok(Arc::new(MappedRead {
            map,
            path: path.to_path_buf(),
            size,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        PosixFs.exists(path)
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        PosixFs.list_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        PosixFs.create_dir_all(dir)
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        PosixFs.remove_file(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        PosixFs.rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        PosixFs.sync_dir(dir)
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        PosixFs.file_size(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        PosixFs.lock(path)
    }

    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        Ok(Arc::new(MappedPositional::open(path, len)?))
    }
}

/// A file appended through a mapping that runs ahead of the file's length.
struct MappedAppend {
    file: File,
    path: PathBuf,
    map: Option<MmapMut>,
    /// Bytes of the file (its length on disk too).
    size: u64,
    /// Bytes from the start known durable: `sync` flushes from here to `size`.
    synced: u64,
    /// Bytes from the start with storage allocated (`allocate`), at least `size`.
    allocated: u64,
}

impl MappedAppend {
    fn new(file: File, path: &Path, size: u64) -> MappedAppend {
        MappedAppend {
            file,
            path: path.to_path_buf(),
            map: None,
            size,
            synced: size,
            allocated: size,
        }
    }

    fn mapped_len(&self) -> u64 {
        self.map.as_ref().map_or(0, |m| m.len() as u64)
    }

    /// Maps at least `end` bytes, doubling the reservation (bounded) so that a long log
    /// remaps rarely. The old mapping's bytes are in the file already: dropping it loses
    /// nothing, and a later `msync` through the new one covers them.
    fn reserve(&mut self, end: u64) -> Result<()> {
        if end <= self.mapped_len() {
            return Ok(());
        }
        let step = self.mapped_len().clamp(MIN_APPEND_MAP, MAX_APPEND_STEP);
        let len = end.max(self.mapped_len() + step);
        self.map = Some(map_mut(&self.file, len, &self.path)?);
        Ok(())
    }
}

impl WritableFile for MappedAppend {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = self.size + data.len() as u64;
        self.reserve(end)?;
        if end > self.allocated {
            let step = end.next_multiple_of(ALLOCATE_STEP);
            // NB: a mount too full for the step may still hold the bytes themselves.
            let to = match allocate(
                &self.file,
                self.allocated,
                step - self.allocated,
                true,
                &self.path,
            ) {
                Ok(()) => step,
                Err(_) => {
                    allocate(
                        &self.file,
                        self.allocated,
                        end - self.allocated,
                        true,
                        &self.path,
                    )?;
                    end
                }
            };
            self.allocated = to;
        }
        // NB: the length first: a store to a mapped page past the end of the file faults.
        self.file
            .set_len(end)
            .map_err(|e| Error::io("ftruncate", &self.path, e))?;
        let map = self.map.as_mut().expect("reserved above");
        map[self.size as usize..end as usize].copy_from_slice(data);
        self.size = end;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        if let Some(map) = &self.map {
            let from = self.synced.min(self.size);
            flush(map, from, (self.size - from) as usize, &self.path)?;
        }
        self.synced = self.size;
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn close(self: Box<Self>) -> Result<()> {
        // Unmapping writes nothing back by itself: like a close(2), durability is `sync`'s.
        Ok(())
    }
}

/// A file read through a read-only mapping of its bytes at open.
struct MappedRead {
    map: Option<Mmap>,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for MappedRead {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let end = offset.checked_add(buf.len() as u64);
        match (end, &self.map) {
            (Some(end), Some(map)) if end <= self.size => {
                buf.copy_from_slice(&map[offset as usize..end as usize]);
                Ok(())
            }
            (Some(_), None) if buf.is_empty() && offset == 0 => Ok(()),
            _ => Err(past_end("read", &self.path, offset, buf.len(), self.size)),
        }
    }

    fn size(&self) -> u64 {
        self.size
    }
}

/// A fixed-size file mapped whole, written in place from several threads.
struct MappedPositional {
    /// The mapping, kept alive while `base` points into it; `None` for an empty file.
    _map: Option<MmapMut>,
    /// The first byte of the mapping, written through shared references (see `Sync` below).
    base: *mut u8,
    path: PathBuf,
    size: u64,
}

// SAFETY: the mapping is owned by the value and lives as long as it; concurrent writers write
// disjoint ranges (the `PositionalFile` contract, as with pwrite(2)), and a reader racing a
// writer of the same range may see a torn copy exactly as a pread(2) could.
unsafe impl Send for MappedPositional {}
// SAFETY: see `Send`.
unsafe impl Sync for MappedPositional {}

impl MappedPositional {
    fn open(path: &Path, len: u64) -> Result<MappedPositional> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let mut size = file_len(&file, path)?;
        if size < len {
            // Allocated zeros; on tmpfs and DAX filling them later changes no block map
            // that a sync would have to write. The new length is durable before we return.
            allocate(&file, size, len - size, false, path)?;
            file.set_len(len)
                .map_err(|e| Error::io("ftruncate", path, e))?;
            file.sync_all().map_err(|e| Error::io("fsync", path, e))?;
            size = len;
        }
        let mut map = if size == 0 {
            None
        } else {
            Some(map_mut(&file, size, path)?)
        };
        let base = map
            .as_mut()
            .map_or(std::ptr::null_mut(), |m| m.as_mut_ptr());
        Ok(MappedPositional {
            _map: map,
            base,
            path: path.to_path_buf(),
            size,
        })
    }

    /// Checks that `len` bytes at `offset` lie inside the file.
    fn check(&self, op: &'static str, offset: u64, len: usize) -> Result<()> {
        match offset.checked_add(len as u64) {
            Some(end) if end <= self.size => Ok(()),
            _ => Err(past_end(op, &self.path, offset, len, self.size)),
        }
    }

    /// `msync` of `len` bytes at `offset`, widened to whole pages as msync(2) wants.
    fn flush_range(&self, offset: u64, len: usize) -> Result<()> {
        if len == 0 || self.base.is_null() {
            return Ok(());
        }
        let page = page_size();
        let start = offset / page * page;
        let span = (offset + len as u64 - start) as usize;
        // SAFETY: `start..start + span` lies inside the mapping: `start` is at or before a
        // checked offset and the span ends at a checked end.
        let rc = unsafe { libc::msync(self.base.add(start as usize).cast(), span, libc::MS_SYNC) };
        if rc != 0 {
            return Err(Error::io("msync", &self.path, io::Error::last_os_error()));
        }
        Ok(())
    }
}

fn page_size() -> u64 {
    // SAFETY: sysconf reads a constant of the system.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 {
        size as u64
    } else {
        4096
    }
}

impl PositionalFile for MappedPositional {
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        self.check("write", offset, data.len())?;
        if data.is_empty() {
            return Ok(());
        }
        // SAFETY: the range is inside the mapping (checked above); writers of one range are
        // serialised by the caller (see `Sync`).
        unsafe {
            std::ptr::copy_nonoverlapping(
                data.as_ptr(),
                self.base.add(offset as usize),
                data.len(),
            );
        }
        if durable {
            self.flush_range(offset, data.len())?;
        }
        Ok(())
    }

    fn sync(&self) -> Result<()> {
        self.flush_range(0, self.size as usize)
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.check("read", offset, buf.len())?;
        if buf.is_empty() {
            return Ok(());
        }
        // SAFETY: the range is inside the mapping (checked above).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.base.add(offset as usize),
                buf.as_mut_ptr(),
                buf.len(),
            );
        }
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory on shared memory where there is one, else on disk (the mapping works on
    /// both; only the durability promise differs).
    fn scratch() -> tempfile::TempDir {
        if Path::new("/dev/shm").is_dir() {
            tempfile::tempdir_in("/dev/shm").unwrap()
        } else {
            tempfile::tempdir().unwrap()
        }
    }

    #[test]
    fn a_reopen_reads_what_was_synced_without_a_close() {
        let dir = scratch();
        let fs = MappedFs::new();
        let log = dir.path().join("000004.log");
        let mut f = fs.create(&log).unwrap();
        f.append(b"synced record").unwrap();
        f.sync().unwrap();
        drop(f); // no close: a process that stops here
        assert_eq!(read_all(&fs, &log), b"synced record");

        let slab = dir.path().join("slab");
        let p = fs.open_positional(&slab, 4096).unwrap();
        p.write_at(64, b"slot", true).unwrap();
        drop(p);
        let again = fs.open_positional(&slab, 0).unwrap();
        let mut buf = [0u8; 4];
        again.read_exact_at(64, &mut buf).unwrap();
        assert_eq!(&buf, b"slot");
    }

    /// Storage comes before the store into the mapping: on a full tmpfs the append fails
    /// with `ENOSPC` rather than the process with `SIGBUS` (tmpfs counts the blocks).
    #[test]
    fn appends_and_positional_files_allocate_before_they_store() {
        use std::os::unix::fs::MetadataExt;
        if !Path::new("/dev/shm").is_dir() {
            return;
        }
        let dir = tempfile::tempdir_in("/dev/shm").unwrap();
        let fs = MappedFs::new();
        let log = dir.path().join("000007.log");
        let mut f = fs.create(&log).unwrap();
        f.append(b"one record").unwrap();
        let meta = std::fs::metadata(&log).unwrap();
        assert_eq!(meta.len(), 10, "the length stays exact");
        assert!(
            meta.blocks() * 512 >= ALLOCATE_STEP,
            "allocated ahead: {meta:?}"
        );

        let slab = dir.path().join("slab");
        drop(fs.open_positional(&slab, 64 << 10).unwrap());
        let meta = std::fs::metadata(&slab).unwrap();
        assert!(meta.blocks() * 512 >= 64 << 10, "allocated whole: {meta:?}");
    }

    #[test]
    fn an_appended_file_is_never_longer_than_its_bytes() {
        let dir = scratch();
        let fs = MappedFs::new();
        let path = dir.path().join("MANIFEST-000001");
        let mut f = fs.create(&path).unwrap();
        for i in 0..1000u32 {
            f.append(&i.to_le_bytes()).unwrap();
            // What another reader or a crash sees: the bytes so far, no mapped-ahead tail.
            assert_eq!(fs.file_size(&path).unwrap(), 4 * (i as u64 + 1));
        }
        assert!(f.size() < MIN_APPEND_MAP);
        let bytes = read_all(&fs, &path);
        assert_eq!(&bytes[4 * 999..], &999u32.to_le_bytes());
    }

    #[test]
    fn writes_past_a_positional_file_are_refused_naming_the_file() {
        let dir = scratch();
        let path = dir.path().join("area");
        let p = MappedFs::new().open_positional(&path, 4096).unwrap();
        match p.write_at(4090, b"too long", false) {
            Err(Error::Io {
                op,
                path: p2,
                source,
            }) => {
                assert_eq!((op, p2), ("write", path));
                assert_eq!(source.kind(), io::ErrorKind::InvalidInput);
            }
            other => panic!("expected an Io error, got {other:?}"),
        }
        let empty = MappedFs::new()
            .open_positional(&dir.path().join("e"), 0)
            .unwrap();
        assert_eq!(empty.size(), 0);
        empty.sync().unwrap();
        assert!(empty.read_exact_at(0, &mut [0u8; 1]).is_err());
    }

    fn read_all(fs: &MappedFs, path: &Path) -> Vec<u8> {
        crate::env::read_file(fs, path).unwrap()
    }
}
