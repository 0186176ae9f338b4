//! The file-system seam: every byte tierkv reads or writes goes through [`Fs`].
//!
//! Three implementations: [`PosixFs`] (real files, `fdatasync`, `flock`), [`MappedFs`] (real
//! files read and written through memory mappings, `msync`: tiers of kind `pm`) and [`FaultFs`]
//! (an in-memory file system for tests that can crash with a chosen policy, fail the Nth
//! operation and run a directory out of space). `route` sends some directories of one file
//! system to another (pm tiers, zoned tiers). Nothing else in the crate touches `std::fs`.
//!
//! Contract shared by every implementation:
//! - `append` hands bytes to the "operating system": after a process crash they survive, after a
//!   power loss only if a later `sync` on that file returned `Ok`.
//! - A newly created, renamed or removed directory entry survives a power loss only after
//!   `sync_dir` on its parent directory returned `Ok`.
//! - Errors are [`Error::Io`] naming the operation and the path; running out of space is an
//!   `Io` error whose source has kind [`std::io::ErrorKind::StorageFull`].
//!
//! User-space buffering is not part of the trait: [`BufferedFile`] adds it on top of any
//! [`WritableFile`], so the crash model (what a process kill loses) is the same everywhere.

mod aligned;
#[cfg(test)]
mod contract;
mod fault;
mod mapped;
mod pm;
mod posix;
mod route;
mod uring_read;

pub(crate) use aligned::AlignedBuf;
pub use fault::{CrashPolicy, FaultFs, FaultKind};
pub use mapped::MappedFs;
pub(crate) use pm::route_pm_tiers;
pub use pm::{check_pm_dir, PmMount};
pub use posix::PosixFs;
pub(crate) use route::{Handler, RouteRules, RouteScope, RoutingFs};
pub use uring_read::IoTarget;
pub(crate) use uring_read::{
    available as io_uring_reads_available, read_batch, PendingRead, ReadRequest,
};

use crate::error::{Error, Result};
use std::path::Path;
use std::sync::Arc;

/// A file system: the one I/O seam of the engine.
pub trait Fs: Send + Sync + 'static {
    /// Creates `path` (truncating an existing file) and opens it for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Creates `path` like [`Fs::create`], telling the file system how long the file is expected
    /// to live, so that one which places data by lifetime (a zoned device) can group files that
    /// die together. The default ignores the hint.
    fn create_with_lifetime(
        &self,
        path: &Path,
        _lifetime: Lifetime,
    ) -> Result<Box<dyn WritableFile>> {
        self.create(path)
    }
    /// Opens an existing file for appending at its end.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens an existing file for positional reads.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// Opens an existing file for positional reads that bypass the OS page cache (`O_DIRECT`),
    /// for a caller with its own cache. The default (and the fallback where the file system
    /// refuses `O_DIRECT`) is [`Fs::open_read`].
    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.open_read(path)
    }
    /// True if `path` names an existing file or directory.
    fn exists(&self, path: &Path) -> bool;
    /// The names (not paths) of the entries of `dir`, in no particular order.
    fn list_dir(&self, dir: &Path) -> Result<Vec<String>>;
    /// Creates `dir` and its missing parents; Ok if it exists.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// Removes a file.
    fn remove_file(&self, path: &Path) -> Result<()>;
    /// Atomically renames `from` to `to`, replacing `to` if it exists.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// The size in bytes of a file.
    fn file_size(&self, path: &Path) -> Result<u64>;
    /// Takes an exclusive advisory lock on `path` (created if missing), held until the returned
    /// guard drops. Fails with [`Error::Locked`] if another holder has it.
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>>;
    /// Opens `path` for positional reads and writes, creating it if missing and extending it
    /// with written zeros to at least `len` bytes (so overwrites later change no block map).
    /// The extension is durable when this returns; the caller syncs the directory.
    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>>;
    /// The file system under this one when this one only routes some directories elsewhere
    /// (a database with zoned or pm tiers): a reopen routes again from there instead of
    /// stacking a second router. `None` by default.
    fn unrouted(&self) -> Option<Arc<dyn Fs>> {
        None
    }
}

/// How long a new file is expected to live, shortest first (the write-lifetime hints of NVMe
/// and Linux's `F_SET_RW_HINT`). The engine gives the WAL `Short`, tables of L0 and L1
/// `Medium`, L2 `Long` and deeper levels `Extreme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Lifetime {
    /// No hint.
    #[default]
    NotSet,
    /// Rewritten soon (a WAL).
    Short,
    /// Upper LSM levels, compacted often.
    Medium,
    /// A middle level.
    Long,
    /// The deepest levels, rewritten rarely.
    Extreme,
}

impl Lifetime {
    /// The hint for a table written to LSM level `level`.
    pub fn for_level(level: usize) -> Lifetime {
        match level {
            0 | 1 => Lifetime::Medium,
            2 => Lifetime::Long,
            _ => Lifetime::Extreme,
        }
    }
}

/// Writes `len` zeros at `offset` of `file` in 1 MiB pieces ([`PositionalFile::zero_range`]
/// where nothing cheaper is at hand).
pub(crate) fn write_zeros<F: PositionalFile + ?Sized>(
    file: &F,
    offset: u64,
    len: u64,
) -> Result<()> {
    const CHUNK: u64 = 1 << 20;
    let zeros = vec![0u8; len.min(CHUNK) as usize];
    let mut done = 0;
    while done < len {
        let n = (len - done).min(CHUNK) as usize;
        file.write_at(offset + done, &zeros[..n], false)?;
        done += n as u64;
    }
    Ok(())
}

/// A file of fixed size written in place at chosen offsets, shared between threads: the
/// parallel WAL's area. Writes from several threads may be in flight at once.
pub trait PositionalFile: Send + Sync {
    /// Writes `data` at `offset`. With `durable`, `data` is on stable storage when this
    /// returns (`RWF_DSYNC`, or a write followed by `fdatasync`); other writes that completed
    /// before may or may not be. Without, it survives a process crash (like `append`).
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()>;
    /// Makes every write that completed before this call durable (`fdatasync`).
    fn sync(&self) -> Result<()>;
    /// Fills `buf` with the bytes at `offset`.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// Makes `len` bytes at `offset` read as zeros, durably once the next [`Self::sync`]
    /// returns (the emulated zoned device's reset). The default writes zeros; a file system
    /// that can deallocate the range instead (a hole) does, which costs no data writes.
    fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        write_zeros(self, offset, len)
    }
    /// Hints that `len` bytes at `offset` will be read soon, so the OS may start reading
    /// them into its cache now. A hint: the default does nothing.
    fn prefetch(&self, _offset: u64, _len: u64) {}
    /// Hints that the file's bytes will not be read again through the OS page cache: the OS
    /// may drop its clean cached pages and start writing the dirty ones back (to drop them
    /// at a later call). A hint for memory, not durability; the default does nothing.
    fn drop_cache(&self) {}
    /// The file's size.
    fn size(&self) -> u64;
    /// A descriptor opened with `O_DIRECT` on the same file, for submitting page-aligned I/O
    /// through io_uring; `None` when the file system refused `O_DIRECT` or the file is not a
    /// real one.
    fn direct_fd(&self) -> Option<std::os::unix::io::RawFd> {
        None
    }
    /// True when the parallel WAL should write this file through an emulated submission ring
    /// (`wal::uring`): the fault-injecting file system, when asked to, so that crash tests cover
    /// the asynchronous path. False by default.
    fn emulates_ring(&self) -> bool {
        false
    }
    /// The path, for error messages.
    fn path(&self) -> &Path;
}

/// A file opened for appending.
pub trait WritableFile: Send {
    /// Appends `data` at the end of the file (handed to the OS, not yet durable).
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Makes every byte appended so far durable (`fdatasync`).
    fn sync(&mut self) -> Result<()>;
    /// The file's size: bytes present before opening plus bytes appended.
    fn size(&self) -> u64;
    /// Reserves disk space for `len` bytes from `offset` without changing the file's size, so
    /// later appends and syncs need no block allocation. A hint: the default does nothing.
    fn preallocate(&mut self, _offset: u64, _len: u64) -> Result<()> {
        Ok(())
    }
    /// Hints that the bytes synced so far will not be read through the OS page cache (the
    /// file is read with `O_DIRECT`): the OS may drop its cached copy. The default does nothing.
    fn drop_cache(&mut self) {}
    /// Starts writing back the bytes appended so far, after waiting for the write-back the
    /// previous call started: a long file then keeps at most two calls' worth of dirty pages
    /// in the OS cache. A hint for memory, not durability (only [`WritableFile::sync`] makes
    /// bytes durable); the default does nothing.
    fn write_back(&mut self) {}
    /// Says that nothing more will be appended, though the file stays open to be synced
    /// later: a file system that keeps a file's length ahead of its bytes cuts it back to
    /// them here, as at [`WritableFile::close`]. The default does nothing.
    fn seal(&mut self) -> Result<()> {
        Ok(())
    }
    /// Closes the file, reporting any error the close itself returns.
    fn close(self: Box<Self>) -> Result<()>;
}

/// A file opened for positional reads; shared between threads.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` with the bytes at `offset`; an error if the file ends first.
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()>;
    /// The file's size when it was opened.
    fn size(&self) -> u64;
    /// The descriptor io_uring may read this file through when the engine batches table
    /// reads (`multi_get`, read-ahead); `None` where reads must go through `read_exact_at`.
    fn io_target(&self) -> Option<IoTarget> {
        None
    }
    /// Accounts `bytes` read through [`IoTarget`] outside `read_exact_at` (for wrappers that
    /// count reads).
    fn note_read(&self, _bytes: u64) {}
    /// Hints that the pages this file has in the OS page cache will not be read again: the
    /// OS may drop them. The default does nothing.
    fn drop_cache(&self) {}
}

/// An exclusive lock held until dropped.
pub trait FileLock: Send + Sync {}

/// Reads a whole file into memory.
pub fn read_file(fs: &dyn Fs, path: &Path) -> Result<Vec<u8>> {
    let file = fs.open_read(path)?;
    let mut buf = vec![0u8; file.size() as usize];
    file.read_exact_at(0, &mut buf)?;
    Ok(buf)
}

/// Creates `dir` and its missing parents, and makes each new directory's entry durable by
/// syncing its parent, top-down: a directory created but not yet in its parent's durable entries
/// vanishes at a power loss with everything inside it, synced files included.
pub fn create_dir_all_durable(fs: &dyn Fs, dir: &Path) -> Result<()> {
    let missing: Vec<&Path> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !fs.exists(a))
        .collect();
    fs.create_dir_all(dir)?;
    for new in missing.iter().rev() {
        let parent = match new.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        fs.sync_dir(parent)?;
    }
    Ok(())
}

/// Writes `data` to `path` atomically and durably: a temporary file is written and synced,
/// renamed over `path`, and the directory is synced.
pub fn write_file_atomic(fs: &dyn Fs, path: &Path, data: &[u8]) -> Result<()> {
    let dir = path
        .parent()
        .ok_or_else(|| Error::invalid(format!("{} has no parent directory", path.display())))?;
    let tmp = path.with_extension("tmp");
    let mut f = fs.create(&tmp)?;
    f.append(data)?;
    f.sync()?;
    f.close()?;
    fs.rename(&tmp, path)?;
    fs.sync_dir(dir)
}

/// User-space write buffering over a [`WritableFile`]: `append` collects bytes, `flush` hands
/// them to the OS, `sync` flushes and makes them durable. A process crash loses what was only
/// buffered here.
pub struct BufferedFile {
    inner: Box<dyn WritableFile>,
    buf: Vec<u8>,
    capacity: usize,
    /// Preallocation step in bytes (0 = none) and the end of the space reserved so far.
    prealloc_step: u64,
    prealloc_end: u64,
}

impl BufferedFile {
    /// Buffers up to `capacity` bytes before writing through.
    pub fn new(inner: Box<dyn WritableFile>, capacity: usize) -> Self {
        BufferedFile {
            inner,
            buf: Vec::with_capacity(capacity),
            capacity,
            prealloc_step: 0,
            prealloc_end: 0,
        }
    }

    /// Reserves disk space `step` bytes at a time ahead of the writes (see
    /// [`WritableFile::preallocate`]): syncs of an append-only log then update no block maps.
    pub fn with_preallocation(mut self, step: u64) -> Self {
        self.prealloc_step = step;
        self.prealloc_end = self.inner.size();
        self
    }

    fn write_through(&mut self, data: &[u8]) -> Result<()> {
        let end = self.inner.size() + data.len() as u64;
        if self.prealloc_step > 0 && end > self.prealloc_end {
            let len = (end - self.prealloc_end).max(self.prealloc_step);
            self.inner.preallocate(self.prealloc_end, len)?;
            self.prealloc_end += len;
        }
        self.inner.append(data)
    }

    /// Appends `data`; writes through to the OS once the buffer is full.
    pub fn append(&mut self, data: &[u8]) -> Result<()> {
        if self.buf.len() + data.len() > self.capacity {
            self.flush()?;
            if data.len() >= self.capacity {
                return self.write_through(data);
            }
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }

    /// Hands buffered bytes to the OS.
    pub fn flush(&mut self) -> Result<()> {
        if !self.buf.is_empty() {
            let buf = std::mem::take(&mut self.buf);
            let result = self.write_through(&buf);
            self.buf = buf;
            self.buf.clear();
            result?;
        }
        Ok(())
    }

    /// Flushes, then makes everything durable.
    pub fn sync(&mut self) -> Result<()> {
        self.flush()?;
        self.inner.sync()
    }

    /// Logical size: bytes in the file plus bytes still buffered.
    pub fn size(&self) -> u64 {
        self.inner.size() + self.buf.len() as u64
    }

    /// Flushes and seals (see [`WritableFile::seal`]).
    pub fn seal(&mut self) -> Result<()> {
        self.flush()?;
        self.inner.seal()
    }

    /// Flushes and closes.
    pub fn close(mut self) -> Result<()> {
        self.flush()?;
        self.inner.close()
    }
}
