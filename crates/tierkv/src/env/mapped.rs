//! [`MappedFs`]: the [`Fs`] seam over memory-mapped files, for a tier of kind `pm` (a DAX or
//! tmpfs mount; `docs/pm-tier.md`).
//!
//! Every file's bytes are written (and, but for the WAL's, read) through a shared mapping
//! (`memmap2`), so a write is a `memcpy` into the page cache (tmpfs) or straight into
//! persistent memory (DAX) and a sync is `msync` of the range written since the last one:
//! - `append` grows the file with `ftruncate` to its exact new length (so a reader or a crash
//!   never sees a padded tail), maps ahead in growing steps, and copies the bytes in. Files
//!   named by [`MappedFs::with_length_ahead`] (the WAL) instead grow their length a step of
//!   zeros at a time and are cut back to their bytes when sealed or closed: their appends make
//!   no system call, and a crash leaves a zero tail that their reader takes for the end.
//! - A sync (`sync`, a durable `write_at`) is `msync` of the range written, skipped on tmpfs
//!   and ramfs, where it has nothing to write back.
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
//! maps for reading (files are created, appended, renamed and removed, positional files only
//! grow; a WAL cut back at close is read with `pread`).

use super::posix::file_len;
use super::{FileLock, Fs, PositionalFile, PosixFs, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use memmap2::{Mmap, MmapMut, MmapOptions};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The smallest mapping an appended file reserves; later steps double it. Address space
/// only: a log of a few memtables' bytes is never remapped.
const MIN_APPEND_MAP: u64 = 16 << 20;
/// The largest step by which an appended file's mapping grows at once.
const MAX_APPEND_STEP: u64 = 256 << 20;
/// The step by which an appended file's storage is allocated ahead of its length.
const ALLOCATE_STEP: u64 = 1 << 20;
/// The step by which the length of a file under [`LengthPolicy::Ahead`] runs ahead of its
/// bytes: rare enough (once per some 3 000 small writes) that allocating and faulting in a
/// step stays out of the 99th percentile, small enough that a reader after a crash crosses
/// at most this many zeros (a search of a few milliseconds).
const LENGTH_STEP: u64 = 1 << 20;

/// The memory-mapped file system of a `pm` tier.
#[derive(Debug, Clone, Copy, Default)]
pub struct MappedFs {
    /// Which new files may have a length that runs ahead of their bytes.
    length_ahead: Option<fn(&Path) -> bool>,
}

impl MappedFs {
    /// A handle to the mapped file system; every appended file's length is exact.
    pub fn new() -> Self {
        MappedFs::default()
    }

    /// The same, except that a file created at a path `runs_ahead` accepts has a length that
    /// runs ahead of its bytes in steps of zeros, cut back at `seal` or `close`: its appends
    /// then make no system call. Only for files whose readers take a zero tail for the end of the file
    /// (the WAL: `docs/pm-tier.md`). Such a file is read with `pread(2)`, which its cut cannot
    /// fault.
    pub fn with_length_ahead(runs_ahead: fn(&Path) -> bool) -> Self {
        MappedFs {
            length_ahead: Some(runs_ahead),
        }
    }

    fn runs_ahead(&self, path: &Path) -> bool {
        self.length_ahead.is_some_and(|f| f(path))
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
        let policy = if self.runs_ahead(path) {
            LengthPolicy::Ahead
        } else {
            LengthPolicy::Exact
        };
        Ok(Box::new(MappedAppend::new(file, path, 0, policy)))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        // NB: exact even where the path runs ahead: a zero tail left by a crash must not be
        // taken for bytes to append after.
        let size = file_len(&file, path)?;
        Ok(Box::new(MappedAppend::new(
            file,
            path,
            size,
            LengthPolicy::Exact,
        )))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        if self.runs_ahead(path) {
            return PosixFs.open_read(path);
        }
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

/// How an appended file's length follows its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LengthPolicy {
    /// The length is exactly the bytes appended, after every append: a reader or a crash
    /// never sees a padded tail. One `ftruncate` per append.
    Exact,
    /// The length runs ahead of the bytes in [`LENGTH_STEP`] steps of zeros, and is cut back
    /// to the bytes at `seal` and `close`. After a crash the file ends in up to a step of zeros; only
    /// files whose readers end at a zero tail get this policy ([`MappedFs::with_length_ahead`]).
    Ahead,
}

/// A file appended through a mapping that runs ahead of the file's length.
struct MappedAppend {
    file: File,
    path: PathBuf,
    map: Option<MmapMut>,
    /// Bytes appended.
    size: u64,
    /// The file's length: `size` under [`LengthPolicy::Exact`], at least `size` otherwise.
    len: u64,
    /// Bytes from the start known durable: `sync` flushes from here to `size`.
    synced: u64,
    /// Bytes from the start with storage allocated (`allocate`), at least `len`.
    allocated: u64,
    policy: LengthPolicy,
    /// The file lives on tmpfs or ramfs, where `msync` has nothing to write back.
    volatile: bool,
    /// The length was cut back by `seal` and the cut is not durable yet (on a persistent
    /// mount): the next `sync` or `close` makes it so.
    cut_unsynced: bool,
}

impl MappedAppend {
    fn new(file: File, path: &Path, size: u64, policy: LengthPolicy) -> MappedAppend {
        let volatile = is_volatile(&file);
        MappedAppend {
            file,
            path: path.to_path_buf(),
            map: None,
            size,
            len: size,
            synced: size,
            allocated: size,
            policy,
            volatile,
            cut_unsynced: false,
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

    /// Makes the file at least `end` bytes long, so that stores into the mapping up to `end`
    /// land inside it.
    fn cover(&mut self, end: u64) -> Result<()> {
        if end <= self.len {
            return Ok(());
        }
        match self.policy {
            LengthPolicy::Exact => self.extend_exact(end),
            LengthPolicy::Ahead => self.extend_ahead(end),
        }
    }

    /// Allocates storage in [`ALLOCATE_STEP`]s past the end (without changing the length),
    /// then sets the length to exactly `end`.
    fn extend_exact(&mut self, end: u64) -> Result<()> {
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
        self.set_len(end)
    }

    /// Allocates and extends the file to the next [`LENGTH_STEP`] boundary past `end` (zeros),
    /// then faults the new pages into the mapping, so that the appends of the step make no
    /// system call and take no page fault. A mount too full for the step falls back to
    /// exactly `end`.
    fn extend_ahead(&mut self, end: u64) -> Result<()> {
        let from = self.len;
        let step = end.next_multiple_of(LENGTH_STEP);
        let to = match allocate(&self.file, from, step - from, false, &self.path) {
            Ok(()) => step,
            Err(_) => {
                allocate(&self.file, from, end - from, false, &self.path)?;
                end
            }
        };
        // NB: the length is set even where `allocate` was a no-op (`EOPNOTSUPP`).
        self.set_len(to)?;
        self.allocated = self.allocated.max(to);
        self.populate(from, to);
        Ok(())
    }

    /// Cuts a length that ran ahead back to the bytes; a store past them would fault now.
    fn cut_back(&mut self) -> Result<()> {
        if self.len > self.size {
            let size = self.size;
            self.set_len(size)?;
            self.cut_unsynced = !self.volatile;
        }
        Ok(())
    }

    /// Gives back the storage allocated past the file's length (`extend_exact`'s steps ahead):
    /// a closed file is never appended to again, and on tmpfs or DAX those blocks would stay
    /// taken, up to a step per file, until the file is removed. Best effort: the bytes are
    /// unaffected either way, so a mount that cannot punch holes keeps the blocks.
    fn release_allocated_tail(&mut self) {
        use std::os::unix::io::AsRawFd;
        if self.allocated <= self.len {
            return;
        }
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let (from, len) = (self.len as i64, (self.allocated - self.len) as i64);
        // SAFETY: the descriptor is open for writing for the duration of the call.
        let _ = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, from, len) };
        self.allocated = self.len;
    }

    /// Makes a cut length durable (`fdatasync`) where it is not yet.
    fn sync_cut(&mut self) -> Result<()> {
        if self.cut_unsynced {
            self.file
                .sync_data()
                .map_err(|e| Error::io("fdatasync", &self.path, e))?;
            self.cut_unsynced = false;
        }
        Ok(())
    }

    fn set_len(&mut self, len: u64) -> Result<()> {
        self.file
            .set_len(len)
            .map_err(|e| Error::io("ftruncate", &self.path, e))?;
        self.len = len;
        Ok(())
    }

    /// Faults `from..to` (inside the file and the mapping) in for writing ahead of the
    /// stores. Only a hint: a kernel without `MADV_POPULATE_WRITE` faults them one by one
    /// at the first store, as before.
    fn populate(&mut self, from: u64, to: u64) {
        let Some(map) = self.map.as_mut() else {
            return;
        };
        let page = page_size();
        let start = from / page * page;
        let end = to.min(map.len() as u64);
        if start >= end {
            return;
        }
        // SAFETY: `start..end` lies inside the mapping and inside the file (its length is
        // at least `to` now), so populating it cannot fault past the end of the file.
        let _ = unsafe {
            libc::madvise(
                map.as_mut_ptr().add(start as usize).cast(),
                (end - start) as usize,
                libc::MADV_POPULATE_WRITE,
            )
        };
    }
}

/// Whether `file` is on tmpfs or ramfs: memory with no medium behind it, where a store into
/// a shared mapping is as durable as it gets and `msync` writes nothing back.
fn is_volatile(file: &File) -> bool {
    use std::os::unix::io::AsRawFd;
    // SAFETY: an all-zero statfs is a valid value of the plain C struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: the descriptor is open and `st` is a valid out-pointer.
    if unsafe { libc::fstatfs(file.as_raw_fd(), &mut st) } != 0 {
        return false; // unknown: keep syncing
    }
    #[allow(clippy::unnecessary_cast)]
    super::pm::is_memory_fs(st.f_type as i64)
}

impl WritableFile for MappedAppend {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = self.size + data.len() as u64;
        self.reserve(end)?;
        // NB: the length first: a store to a mapped page past the end of the file faults.
        self.cover(end)?;
        let map = self.map.as_mut().expect("reserved above");
        map[self.size as usize..end as usize].copy_from_slice(data);
        self.size = end;
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        // On tmpfs the mapping's pages are the file: `msync` is a system call that writes
        // nothing (a synced byte there survives a process crash, never a power loss).
        if let Some(map) = self.map.as_ref().filter(|_| !self.volatile) {
            let from = self.synced.min(self.size);
            flush(map, from, (self.size - from) as usize, &self.path)?;
        }
        self.sync_cut()?;
        self.synced = self.size;
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn seal(&mut self) -> Result<()> {
        // NB: the mapping stays for `sync`, whose range is inside the file; an append after
        // all would grow the length again before its store.
        self.cut_back()
    }

    fn close(mut self: Box<Self>) -> Result<()> {
        // Unmapping writes nothing back by itself: like a close(2), durability is `sync`'s.
        // A length that ran ahead is cut back to the bytes, durably on a persistent mount,
        // so a closed file is the same byte for byte on every kind of tier.
        self.map = None;
        self.cut_back()?;
        self.release_allocated_tail();
        self.sync_cut()
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
    /// On tmpfs or ramfs: `msync` is skipped (see [`is_volatile`]).
    volatile: bool,
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
            volatile: is_volatile(&file),
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
        if len == 0 || self.base.is_null() || self.volatile {
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

    /// A mapped file system whose every new file's length runs ahead.
    fn ahead() -> MappedFs {
        MappedFs::with_length_ahead(|_| true)
    }

    fn disk_len(path: &Path) -> u64 {
        std::fs::metadata(path).unwrap().len()
    }

    #[test]
    fn a_length_that_runs_ahead_grows_in_zero_steps_and_is_exact_after_close() {
        let dir = scratch();
        let fs = ahead();
        let path = dir.path().join("000009.log");
        let mut f = fs.create(&path).unwrap();
        f.append(b"first").unwrap();
        assert_eq!(disk_len(&path), LENGTH_STEP, "one step of length ahead");
        let record = vec![7u8; 1000];
        for _ in 0..100 {
            f.append(&record).unwrap();
        }
        let size = 5 + 100 * 1000;
        assert_eq!(f.size(), size);
        assert_eq!(disk_len(&path), size.next_multiple_of(LENGTH_STEP));
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..5], b"first");
        assert!(bytes[5..size as usize].iter().all(|&b| b == 7));
        assert!(
            bytes[size as usize..].iter().all(|&b| b == 0),
            "the tail past the bytes is zeros"
        );
        f.close().unwrap();
        assert_eq!(
            disk_len(&path),
            size,
            "close cuts the length back to the bytes"
        );
        assert_eq!(read_all(&fs, &path).len() as u64, size);
    }

    /// A sealed file (no more appends, synced later) is cut back to its bytes at once, its
    /// sync still reaches them, and an append after all grows it again.
    #[test]
    fn a_sealed_file_ends_at_its_bytes_and_still_syncs() {
        let dir = scratch();
        let fs = ahead();
        let path = dir.path().join("000010.log");
        let mut f = fs.create(&path).unwrap();
        f.append(&[3u8; 5000]).unwrap();
        assert_eq!(disk_len(&path), LENGTH_STEP);
        f.seal().unwrap();
        assert_eq!(disk_len(&path), 5000, "sealed: exact");
        f.sync().unwrap();
        f.append(b"late").unwrap();
        assert_eq!(disk_len(&path), LENGTH_STEP, "grows again");
        f.close().unwrap();
        assert_eq!(read_all(&fs, &path).len(), 5004);
    }

    /// A process that stops after a sync leaves the synced records followed by zeros, and the
    /// log reader returns every record and ends the log at the zeros without an error in each
    /// mode the length runs ahead for.
    #[test]
    fn synced_records_survive_a_stop_and_the_zero_tail_reads_as_a_torn_end() {
        use crate::env::BufferedFile;
        use crate::wal::log::{LogReader, LogWriter, RecoveryMode};
        let dir = scratch();
        let fs = ahead();
        let path = dir.path().join("000011.log");
        let mut w = LogWriter::new(
            BufferedFile::new(fs.create(&path).unwrap(), 4096),
            path.clone(),
        );
        let payloads: Vec<Vec<u8>> = (0..300u32)
            .map(|i| vec![i as u8; 200 + i as usize])
            .collect();
        for p in &payloads {
            w.add_record(p).unwrap();
            w.sync().unwrap();
        }
        let end = w.size();
        drop(w); // no close: the length stays ahead, as after a crash
        assert!(disk_len(&path) > end, "a zero tail is left");

        for mode in [
            RecoveryMode::TolerateCorruptedTail,
            RecoveryMode::PointInTime,
            RecoveryMode::SkipAnyCorruptedRecords,
        ] {
            let mut r = LogReader::open(&fs, &path, mode).unwrap();
            let mut read = Vec::new();
            while let Some((_, payload)) = r.next_record().unwrap() {
                read.push(payload.to_vec());
            }
            assert_eq!(
                read, payloads,
                "{mode:?}: every synced record, nothing more"
            );
            let tail = r.tail();
            assert_eq!(tail.clean_end, end, "{mode:?}");
            assert!(!tail.synced_data_after_damage, "{mode:?}: {tail:?}");
        }
    }

    /// A reader of a file whose length runs ahead reads with `pread`: the writer cutting the
    /// length back at close makes a read past the new end an error, never a fault.
    #[test]
    fn a_reader_opened_before_the_cut_gets_an_error_past_the_end() {
        let dir = scratch();
        let fs = ahead();
        let path = dir.path().join("000012.log");
        let mut f = fs.create(&path).unwrap();
        f.append(&[1u8; 100]).unwrap();
        let r = fs.open_read(&path).unwrap();
        assert_eq!(r.size(), LENGTH_STEP, "the reader sees the length ahead");
        f.close().unwrap();
        let mut buf = vec![0u8; 100];
        r.read_exact_at(0, &mut buf).unwrap();
        assert_eq!(buf, vec![1u8; 100]);
        assert!(r.read_exact_at(8192, &mut buf).is_err());
    }

    #[test]
    fn only_the_files_named_run_ahead_and_a_reopened_one_is_exact() {
        let dir = scratch();
        let fs = MappedFs::with_length_ahead(|p| p.extension().is_some_and(|e| e == "log"));
        let manifest = dir.path().join("MANIFEST-000001");
        let mut m = fs.create(&manifest).unwrap();
        m.append(b"edit").unwrap();
        assert_eq!(disk_len(&manifest), 4);
        let log = dir.path().join("000013.log");
        let mut l = fs.create(&log).unwrap();
        l.append(b"record").unwrap();
        drop(l);
        assert_eq!(disk_len(&log), LENGTH_STEP);
        // Reopened for append, its length (zeros included) is taken as its bytes.
        let mut again = fs.open_append(&log).unwrap();
        assert_eq!(again.size(), LENGTH_STEP);
        again.append(b"x").unwrap();
        assert_eq!(disk_len(&log), LENGTH_STEP + 1);
    }

    #[test]
    fn shared_memory_is_volatile_and_a_disk_file_is_not() {
        let dir = scratch();
        let file = File::create(dir.path().join("f")).unwrap();
        let on_shm = dir.path().starts_with("/dev/shm");
        assert_eq!(is_volatile(&file), on_shm);
        let disk = tempfile::NamedTempFile::new_in(std::env::temp_dir()).unwrap();
        let disk_is_tmpfs = super::super::pm::check_pm_dir(0, "t", &std::env::temp_dir())
            .is_ok_and(|m| m == super::super::PmMount::Volatile);
        assert_eq!(is_volatile(disk.as_file()), disk_is_tmpfs);
    }

    fn read_all(fs: &MappedFs, path: &Path) -> Vec<u8> {
        crate::env::read_file(fs, path).unwrap()
    }
}
