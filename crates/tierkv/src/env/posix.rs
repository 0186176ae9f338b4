//! [`PosixFs`]: the [`Fs`] seam over real files, with `std::fs` and `libc`.
//!
//! - `append` is one or more `write(2)` calls, no user-space buffering ([`super::BufferedFile`]
//!   adds that); `sync` is `fdatasync(2)`; `sync_dir` opens the directory and `fsync(2)`s it.
//! - `lock` is `flock(LOCK_EX | LOCK_NB)`. The lock belongs to the open file description, so a
//!   second `lock` of the same path fails even inside the same process; closing the descriptor
//!   (dropping the guard) releases it.
//! - Every error is [`Error::Io`] naming the operation and the path; the `io::Error` is passed on
//!   untouched, so `ENOSPC` keeps its kind `StorageFull` and its raw errno.

use super::aligned::{aligned_span, ALIGN};
use super::{AlignedBuf, FileLock, Fs, IoTarget, PositionalFile, RandomAccessFile, WritableFile};
use crate::error::{Error, Result};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::{AsRawFd, IntoRawFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The real file system.
#[derive(Debug, Clone, Copy, Default)]
pub struct PosixFs;

impl PosixFs {
    /// A handle to the real file system (it has no state).
    pub fn new() -> Self {
        PosixFs
    }
}

/// The size of an open file, from `fstat`.
pub(super) fn file_len(file: &File, path: &Path) -> Result<u64> {
    let meta = file.metadata().map_err(|e| Error::io("stat", path, e))?;
    Ok(meta.len())
}

impl Fs for PosixFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        Ok(Box::new(PosixWritable::new(file, path, 0)))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .append(true)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let size = file_len(&file, path)?;
        Ok(Box::new(PosixWritable::new(file, path, size)))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = File::open(path).map_err(|e| Error::io("open", path, e))?;
        let size = file_len(&file, path)?;
        // Reads of these files are point reads of blocks: kernel read-ahead would only spend
        // device bandwidth on bytes nobody asked for. Advice only; a failure changes nothing.
        // SAFETY: posix_fadvise reads its integer arguments; the descriptor is open.
        unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        Ok(Arc::new(PosixRandomAccess {
            file,
            path: path.to_path_buf(),
            size,
        }))
    }

    fn exists(&self, path: &Path) -> bool {
        std::fs::metadata(path).is_ok()
    }

    fn list_dir(&self, dir: &Path) -> Result<Vec<String>> {
        let entries = std::fs::read_dir(dir).map_err(|e| Error::io("readdir", dir, e))?;
        entries
            .map(|entry| {
                let entry = entry.map_err(|e| Error::io("readdir", dir, e))?;
                Ok(entry.file_name().to_string_lossy().into_owned())
            })
            .collect()
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io("mkdir", dir, e))
    }

    fn remove_file(&self, path: &Path) -> Result<()> {
        std::fs::remove_file(path).map_err(|e| Error::io("remove", path, e))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        // NB: `Error::Io` has room for one path; the source file is the one a failure is
        // usually about (missing, or on another file system than `to`).
        std::fs::rename(from, to).map_err(|e| Error::io("rename", from, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        let file = File::open(dir).map_err(|e| Error::io("open", dir, e))?;
        file.sync_all().map_err(|e| Error::io("fsync-dir", dir, e))
    }

    fn file_size(&self, path: &Path) -> Result<u64> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io("stat", path, e))?;
        Ok(meta.len())
    }

    fn open_read_direct(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let direct = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        let Ok(file) = direct else {
            // NB: a file system without O_DIRECT (tmpfs) reads through the page cache.
            return self.open_read(path);
        };
        let size = file_len(&file, path)?;
        Ok(Arc::new(PosixDirectRead {
            file,
            path: path.to_path_buf(),
            size,
        }))
    }

    fn open_positional(&self, path: &Path, len: u64) -> Result<Arc<dyn PositionalFile>> {
        Ok(Arc::new(Self::open_positional_file(path, len)?))
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        flock_exclusive(&file, path)?;
        Ok(Box::new(PosixLock { _file: file }))
    }
}

/// How long a conflicting lock may take to go away before it counts as held.
const LOCK_PATIENCE: std::time::Duration = std::time::Duration::from_millis(200);

/// Bytes of zeros written per call while extending a positional file.
const ZERO_CHUNK: usize = 1 << 20;

impl PosixFs {
    fn open_positional_file(path: &Path, len: u64) -> Result<PosixPositional> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| Error::io("open", path, e))?;
        let mut size = file_len(&file, path)?;
        if size < len {
            // Written zeros, not fallocate: overwriting unwritten extents would make every
            // synced WAL write a metadata update.
            let zeros = vec![0u8; ZERO_CHUNK];
            while size < len {
                let n = (len - size).min(ZERO_CHUNK as u64) as usize;
                file.write_all_at(&zeros[..n], size)
                    .map_err(|e| Error::io("write", path, e))?;
                size += n as u64;
            }
            file.sync_all().map_err(|e| Error::io("fsync", path, e))?;
        }
        // The zeros need no cache, and cached pages would make every O_DIRECT write to them
        // invalidate cache first (and, under a memory limit, push other data out).
        // SAFETY: posix_fadvise only reads its integer arguments on an open descriptor.
        unsafe {
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        // NB: O_DIRECT is refused by some file systems (tmpfs); the buffered descriptor serves.
        let direct = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(path)
            .ok();
        Ok(PosixPositional {
            file,
            direct,
            path: path.to_path_buf(),
            size,
        })
    }
}

/// A positional file: a buffered descriptor, and an `O_DIRECT` one where the file system
/// allows it. Aligned writes go through the direct one.
struct PosixPositional {
    file: File,
    direct: Option<File>,
    path: PathBuf,
    size: u64,
}

fn is_aligned(offset: u64, data: &[u8]) -> bool {
    offset.is_multiple_of(ALIGN as u64)
        && data.len().is_multiple_of(ALIGN)
        && (data.as_ptr() as usize).is_multiple_of(ALIGN)
}

impl PositionalFile for PosixPositional {
    fn write_at(&self, offset: u64, data: &[u8], durable: bool) -> Result<()> {
        if !durable {
            // NB: a write that need not be durable yet is cheapest in the page cache; a later
            // `sync` (or a durable write plus a covering sync) makes it durable.
            return self
                .file
                .write_all_at(data, offset)
                .map_err(|e| Error::io("pwrite", &self.path, e));
        }
        let file = match &self.direct {
            Some(direct) if is_aligned(offset, data) => direct,
            _ => &self.file,
        };
        pwrite_dsync(file, offset, data).map_err(|e| Error::io("pwritev2", &self.path, e))
    }

    fn sync(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn prefetch(&self, offset: u64, len: u64) {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return;
        };
        // SAFETY: posix_fadvise only reads its integer arguments on an open descriptor.
        // NB: the result is ignored: a hint the kernel may not act on.
        unsafe {
            libc::posix_fadvise(
                self.file.as_raw_fd(),
                offset,
                len,
                libc::POSIX_FADV_WILLNEED,
            );
        }
    }

    fn drop_cache(&self) {
        drop_cached_pages(&self.file);
    }

    /// Punches a hole (no data written); where the file system cannot, writes zeros. The hole
    /// is a metadata change: `fsync`, not `fdatasync`, makes it durable, so it is done here.
    fn zero_range(&self, offset: u64, len: u64) -> Result<()> {
        if len == 0 {
            return Ok(());
        }
        let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        // SAFETY: the descriptor is open for writing for the duration of the call.
        let rc = unsafe { libc::fallocate(self.file.as_raw_fd(), mode, offset as i64, len as i64) };
        if rc != 0 {
            let err = std::io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EOPNOTSUPP) => super::write_zeros(self, offset, len),
                _ => Err(Error::io("fallocate(PUNCH_HOLE)", &self.path, err)),
            };
        }
        self.file
            .sync_all()
            .map_err(|e| Error::io("fsync", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn direct_fd(&self) -> Option<RawFd> {
        self.direct.as_ref().map(AsRawFd::as_raw_fd)
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

/// `pwritev2(RWF_DSYNC)` until all of `data` is written; `pwrite` + `fdatasync` where the
/// kernel lacks it.
fn pwrite_dsync(file: &File, mut offset: u64, mut data: &[u8]) -> io::Result<()> {
    while !data.is_empty() {
        let iov = libc::iovec {
            iov_base: data.as_ptr() as *mut libc::c_void,
            iov_len: data.len(),
        };
        // SAFETY: `iov` points into `data`, which outlives the call; the descriptor is open.
        let n = unsafe {
            libc::pwritev2(
                file.as_raw_fd(),
                &iov,
                1,
                offset as libc::off_t,
                libc::RWF_DSYNC,
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => {
                    file.write_all_at(data, offset)?;
                    return file.sync_data();
                }
                _ => return Err(err),
            }
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::WriteZero,
                "pwritev2 wrote 0 bytes",
            ));
        }
        data = &data[n as usize..];
        offset += n as u64;
    }
    Ok(())
}

/// Takes an exclusive `flock` on `file`, retrying on `EINTR` and, for [`LOCK_PATIENCE`], on a
/// conflict.
fn flock_exclusive(file: &File, path: &Path) -> Result<()> {
    // NB: a `flock` belongs to the open file description, which a child forked by any thread
    // of this process shares until it execs: a lock just released by closing our descriptor
    // can stay held for that instant. A holder still there after a short wait is real.
    let give_up = std::time::Instant::now() + LOCK_PATIENCE;
    loop {
        // SAFETY: `flock` only reads its integer arguments; the descriptor is owned by `file`,
        // which outlives the call.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) if std::time::Instant::now() < give_up => {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            Some(libc::EWOULDBLOCK) => return Err(Error::Locked(path.to_path_buf())),
            _ => return Err(Error::io("lock", path, err)),
        }
    }
}

/// A file opened for appending; every byte written goes straight to the kernel.
struct PosixWritable {
    file: File,
    path: PathBuf,
    // INVARIANT: the size before opening plus every byte the kernel accepted, even when an
    // append failed part way.
    size: u64,
}

impl PosixWritable {
    fn new(file: File, path: &Path, size: u64) -> Self {
        PosixWritable {
            file,
            path: path.to_path_buf(),
            size,
        }
    }
}

impl WritableFile for PosixWritable {
    fn append(&mut self, mut data: &[u8]) -> Result<()> {
        while !data.is_empty() {
            match self.file.write(data) {
                Ok(0) => {
                    let err = io::Error::new(io::ErrorKind::WriteZero, "write returned 0 bytes");
                    return Err(Error::io("write", &self.path, err));
                }
                Ok(n) => {
                    self.size += n as u64;
                    data = &data[n..];
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("write", &self.path, e)),
            }
        }
        Ok(())
    }

    fn sync(&mut self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn drop_cache(&mut self) {
        drop_cached_pages(&self.file);
    }

    fn write_back(&mut self) {
        let flags = libc::SYNC_FILE_RANGE_WAIT_BEFORE | libc::SYNC_FILE_RANGE_WRITE;
        // SAFETY: sync_file_range only reads its integer arguments on an open descriptor.
        // NB: the result is ignored: this is a hint (a file system without it, such as tmpfs,
        // just keeps its pages), and a failed write-back shows at the next `sync`.
        unsafe {
            libc::sync_file_range(self.file.as_raw_fd(), 0, 0, flags);
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn preallocate(&mut self, offset: u64, len: u64) -> Result<()> {
        let (Ok(offset), Ok(len)) = (libc::off_t::try_from(offset), libc::off_t::try_from(len))
        else {
            return Ok(());
        };
        // SAFETY: fallocate only reads its integer arguments; the descriptor is owned by `self`.
        let rc = unsafe {
            libc::fallocate(
                self.file.as_raw_fd(),
                libc::FALLOC_FL_KEEP_SIZE,
                offset,
                len,
            )
        };
        if rc == 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            // A file system without fallocate just allocates as it writes.
            Some(libc::EOPNOTSUPP) | Some(libc::ENOSYS) => Ok(()),
            _ => Err(Error::io("fallocate", &self.path, err)),
        }
    }

    fn close(self: Box<Self>) -> Result<()> {
        let fd = self.file.into_raw_fd();
        // SAFETY: `into_raw_fd` gave up ownership of `fd`, so it is closed exactly once, here.
        // NB: no retry on EINTR; on Linux the descriptor is released even then.
        let rc = unsafe { libc::close(fd) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::io("close", &self.path, io::Error::last_os_error()))
        }
    }
}

/// A file opened for positional reads (`pread`), shared between threads.
struct PosixRandomAccess {
    file: File,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for PosixRandomAccess {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        // NB: an early end of file comes back as `UnexpectedEof`.
        self.file
            .read_exact_at(buf, offset)
            .map_err(|e| Error::io("read", &self.path, e))
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn io_target(&self) -> Option<IoTarget> {
        Some(IoTarget {
            fd: self.file.as_raw_fd(),
            direct: false,
        })
    }

    fn drop_cache(&self) {
        drop_cached_pages(&self.file);
    }
}

/// Asks the kernel to drop `file`'s clean cached pages (dirty ones are left alone).
fn drop_cached_pages(file: &File) {
    // SAFETY: posix_fadvise only reads its integer arguments on an open descriptor.
    unsafe {
        libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
    }
}

/// A file read with `O_DIRECT`: each read covers the aligned pages around the wanted bytes in
/// an aligned buffer, then copies them out. The caller caches (the block cache).
struct PosixDirectRead {
    file: File,
    path: PathBuf,
    size: u64,
}

impl RandomAccessFile for PosixDirectRead {
    fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
        let (start, span, at) = aligned_span(offset, buf.len());
        let mut page = AlignedBuf::zeroed(span);
        let mut got = 0usize;
        let want = at + buf.len();
        while got < want {
            let dst = &mut page.as_mut_slice()[got..];
            match self.file.read_at(dst, start + got as u64) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::io("read", &self.path, e)),
            }
        }
        if got < want {
            let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "read past end of file");
            return Err(Error::io("read", &self.path, eof));
        }
        buf.copy_from_slice(&page.as_slice()[at..at + buf.len()]);
        Ok(())
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn io_target(&self) -> Option<IoTarget> {
        Some(IoTarget {
            fd: self.file.as_raw_fd(),
            direct: true,
        })
    }
}

/// Holds the `flock`; closing the descriptor on drop releases it.
struct PosixLock {
    _file: File,
}

impl FileLock for PosixLock {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{read_file, write_file_atomic};

    fn io_parts(err: Error) -> (&'static str, PathBuf, io::ErrorKind) {
        match err {
            Error::Io { op, path, source } => (op, path, source.kind()),
            other => panic!("expected an Io error, got {other:?}"),
        }
    }

    /// The emulated zoned device's reset: the range reads as zeros, the rest and the size are
    /// kept, and (where the file system punches holes) no data was written for it.
    #[test]
    fn zero_range_reads_as_zeros_and_keeps_the_rest() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("device");
        let file = PosixFs.open_positional(&path, 4 << 20).unwrap();
        let ones = vec![0xA5u8; 4 << 20];
        file.write_at(0, &ones, true).unwrap();
        let blocks_before = std::fs::metadata(&path).unwrap().blocks();
        file.zero_range(1 << 20, 2 << 20).unwrap();
        file.sync().unwrap();
        let mut back = vec![0u8; 4 << 20];
        file.read_exact_at(0, &mut back).unwrap();
        assert!(back[..1 << 20].iter().all(|&b| b == 0xA5));
        assert!(back[1 << 20..3 << 20].iter().all(|&b| b == 0));
        assert!(back[3 << 20..].iter().all(|&b| b == 0xA5));
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 4 << 20);
        let blocks_after = std::fs::metadata(&path).unwrap().blocks();
        assert!(
            blocks_after <= blocks_before,
            "{blocks_before} -> {blocks_after}"
        );
    }

    /// Pages of the file at `path` in the OS page cache (Linux's `mincore` on a mapping).
    fn cached_pages(path: &Path) -> usize {
        let file = File::open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a read-only shared mapping of an open file, unmapped before returning;
        // `mincore` writes one byte per page into a vector of that many.
        unsafe {
            let addr = libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            );
            assert_ne!(addr, libc::MAP_FAILED);
            let mut pages = vec![0u8; len.div_ceil(4096)];
            let rc = libc::mincore(addr, len, pages.as_mut_ptr());
            libc::munmap(addr, len);
            assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
            pages.iter().filter(|&&p| p & 1 != 0).count()
        }
    }

    /// The parallel WAL drops a freed group's pages: clean pages leave the page cache.
    #[test]
    fn positional_drop_cache_lets_clean_pages_go() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("area");
        let file = PosixFs.open_positional(&path, 1 << 20).unwrap();
        file.write_at(0, &vec![7u8; 1 << 20], false).unwrap();
        file.sync().unwrap();
        if cached_pages(&path) == 0 {
            eprintln!("this file system keeps no written pages cached; nothing to drop");
            return;
        }
        file.drop_cache();
        let left = cached_pages(&path);
        // NB: tmpfs holds its files in the page cache and cannot drop them.
        let tmpfs = {
            let mut st: libc::statfs = unsafe { std::mem::zeroed() };
            let c = std::ffi::CString::new(dir.path().as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a valid C string and a zeroed struct for the kernel to fill.
            unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC }
        };
        assert!(tmpfs || left == 0, "{left} of 256 pages still cached");
        let mut back = vec![0u8; 1 << 20];
        file.read_exact_at(0, &mut back).unwrap();
        assert!(back.iter().all(|&b| b == 7), "dropping the cache lost data");
    }

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("000001.log");
        let mut f = fs.create(&path).unwrap();
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        assert_eq!(f.size(), 11);
        f.sync().unwrap();
        f.close().unwrap();
        fs.sync_dir(dir.path()).unwrap();

        let mut f = fs.open_append(&path).unwrap();
        assert_eq!(f.size(), 11);
        f.append(b"!").unwrap();
        assert_eq!(f.size(), 12);
        f.close().unwrap();

        let r = fs.open_read(&path).unwrap();
        assert_eq!(r.size(), 12);
        let mut buf = [0u8; 5];
        r.read_exact_at(6, &mut buf).unwrap();
        assert_eq!(&buf, b"world");
        assert_eq!(fs.file_size(&path).unwrap(), 12);
        assert_eq!(read_file(&fs, &path).unwrap(), b"hello world!");
    }

    #[test]
    fn namespace_operations() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let sub = dir.path().join("fast/wal");
        fs.create_dir_all(&sub).unwrap();
        fs.create_dir_all(&sub).unwrap();
        let a = sub.join("a");
        let b = sub.join("b");
        write_file_atomic(&fs, &a, b"payload").unwrap();
        fs.rename(&a, &b).unwrap();
        assert!(!fs.exists(&a));
        assert!(fs.exists(&b));
        assert_eq!(fs.list_dir(&sub).unwrap(), vec!["b".to_string()]);
        assert_eq!(read_file(&fs, &b).unwrap(), b"payload");
        fs.remove_file(&b).unwrap();
        assert!(fs.list_dir(&sub).unwrap().is_empty());
        let (op, path, kind) = io_parts(fs.remove_file(&b).unwrap_err());
        assert_eq!((op, path, kind), ("remove", b, io::ErrorKind::NotFound));
    }

    #[test]
    fn create_fails_without_parent() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing/000001.sst");
        let err = PosixFs::new().create(&path).err().unwrap();
        assert_eq!(io_parts(err), ("create", path, io::ErrorKind::NotFound));
    }

    #[test]
    fn lock_conflict() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("LOCK");
        let guard = fs.lock(&path).unwrap();
        match fs.lock(&path) {
            Err(Error::Locked(p)) => assert_eq!(p, path),
            other => panic!("expected Locked, got {:?}", other.err()),
        }
        drop(guard);
        let _again = fs.lock(&path).unwrap();
    }

    #[test]
    fn direct_reads_match_buffered_reads_at_any_offset() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let fs = PosixFs::new();
        let direct = fs.open_read_direct(&path).unwrap();
        assert_eq!(direct.size(), data.len() as u64);
        for (off, len) in [(0, 10), (4095, 2), (5000, 9000), (19_990, 10), (0, 20_000)] {
            let mut buf = vec![0u8; len];
            direct.read_exact_at(off as u64, &mut buf).unwrap();
            assert_eq!(buf, data[off..off + len], "at {off}+{len}");
        }
        let mut past = vec![0u8; 20];
        assert!(direct.read_exact_at(19_990, &mut past).is_err());
    }

    #[test]
    fn read_past_eof_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let fs = PosixFs::new();
        let path = dir.path().join("short");
        let mut f = fs.create(&path).unwrap();
        f.append(b"0123456789").unwrap();
        f.close().unwrap();
        let r = fs.open_read(&path).unwrap();
        let mut buf = [0u8; 4];
        let err = r.read_exact_at(8, &mut buf).unwrap_err();
        assert_eq!(io_parts(err), ("read", path, io::ErrorKind::UnexpectedEof));
    }
}
