//! Reads issued through io_uring: a batch of positional reads across many files submitted with
//! one system call (multi-get), and a single read started now and collected later (iterator
//! read-ahead).
//!
//! A file takes part when [`RandomAccessFile::io_target`] names its descriptor; reads of an
//! `O_DIRECT` descriptor cover whole aligned pages in an [`AlignedBuf`] and the wanted bytes
//! are copied out. Anything io_uring cannot do — a file without a descriptor (the
//! fault-injecting file system), a kernel or sandbox without io_uring, a failed or short read —
//! falls back to [`RandomAccessFile::read_exact_at`], so the result is always the same bytes
//! or the same error a plain read gives.
//!
//! Rings are kept in a small process-wide pool: setting one up costs system calls and memory
//! maps, far more than the reads it carries.
//!
//! INVARIANT: no buffer is freed while the kernel may still write into it. Every submitted
//! read is reaped before its buffer is dropped; where reaping fails (a ring error that cannot
//! be retried) the buffers and the ring are leaked instead.

use super::aligned::{aligned_span, AlignedBuf};
use super::RandomAccessFile;
use crate::error::Result;
use io_uring::{opcode, types, IoUring};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Where io_uring can read a file.
#[derive(Debug, Clone, Copy)]
pub struct IoTarget {
    /// The open descriptor; it must stay open as long as the file it came from.
    pub fd: std::os::unix::io::RawFd,
    /// Opened with `O_DIRECT`: offsets, lengths and buffers must be aligned to 4 KiB.
    pub direct: bool,
}

/// One read of a batch.
#[derive(Clone, Copy)]
pub struct ReadRequest<'a> {
    pub file: &'a dyn RandomAccessFile,
    pub offset: u64,
    pub len: usize,
}

/// Entries per ring: the most reads one submission carries.
const RING_DEPTH: u32 = 64;
/// Idle rings kept for reuse.
const POOL_MAX: usize = 32;

static POOL: Mutex<Vec<IoUring>> = Mutex::new(Vec::new());
/// Set when the first ring setup fails: the kernel (or a seccomp filter) refuses io_uring.
static UNAVAILABLE: AtomicBool = AtomicBool::new(false);
/// Set once a ring was made: a later failure is a passing shortage (memory, descriptors).
static EVER_MADE: AtomicBool = AtomicBool::new(false);

fn take_ring() -> Option<IoUring> {
    if UNAVAILABLE.load(Ordering::Relaxed) {
        return None;
    }
    if let Some(ring) = POOL.lock().pop() {
        return Some(ring);
    }
    match IoUring::new(RING_DEPTH) {
        Ok(ring) => {
            EVER_MADE.store(true, Ordering::Relaxed);
            Some(ring)
        }
        Err(_) => {
            if !EVER_MADE.load(Ordering::Relaxed) {
                UNAVAILABLE.store(true, Ordering::Relaxed);
            }
            None
        }
    }
}

fn return_ring(ring: IoUring) {
    let mut pool = POOL.lock();
    if pool.len() < POOL_MAX {
        pool.push(ring);
    }
}

/// True when io_uring reads can be set up in this process (tried once).
pub fn available() -> bool {
    match take_ring() {
        Some(ring) => {
            return_ring(ring);
            true
        }
        None => false,
    }
}

/// The destination of one read: a plain buffer, or aligned pages around the wanted bytes.
enum Dest {
    Plain(Vec<u8>),
    Aligned { buf: AlignedBuf, skip: usize },
}

impl Dest {
    /// A destination for `len` bytes at `offset`; returns it with the (offset, length) the
    /// kernel must read.
    fn new(target: IoTarget, offset: u64, len: usize) -> (Dest, u64, usize) {
        if !target.direct {
            return (Dest::Plain(vec![0u8; len]), offset, len);
        }
        let (start, span, skip) = aligned_span(offset, len);
        let dest = Dest::Aligned {
            buf: AlignedBuf::zeroed(span),
            skip,
        };
        (dest, start, span)
    }

    fn ptr(&mut self) -> *mut u8 {
        match self {
            Dest::Plain(v) => v.as_mut_ptr(),
            Dest::Aligned { buf, .. } => buf.as_mut_slice().as_mut_ptr(),
        }
    }

    /// Bytes the read must have returned for `len` wanted bytes to be complete.
    fn needed(&self, len: usize) -> usize {
        match self {
            Dest::Plain(_) => len,
            Dest::Aligned { skip, .. } => skip + len,
        }
    }

    fn into_bytes(self, len: usize) -> Vec<u8> {
        match self {
            Dest::Plain(v) => v,
            Dest::Aligned { buf, skip } => buf.as_slice()[skip..skip + len].to_vec(),
        }
    }
}

/// A read handed to the kernel.
struct InFlight {
    /// Position in the chunk (the completion's user data).
    slot: usize,
    /// Position in the batch.
    index: usize,
    dest: Dest,
    len: usize,
}

/// Reads every request; the results come back in request order. Requests on files with an
/// [`IoTarget`] go through io_uring, `RING_DEPTH` per submission; the rest are read one by one.
pub fn read_batch(reqs: &[ReadRequest<'_>]) -> Vec<Result<Vec<u8>>> {
    let mut out: Vec<Option<Result<Vec<u8>>>> = (0..reqs.len()).map(|_| None).collect();
    let eligible: Vec<usize> = (0..reqs.len())
        .filter(|&i| reqs[i].file.io_target().is_some())
        .collect();
    // NB: a single read is cheaper as one pread than as a ring round trip.
    if eligible.len() >= 2 {
        if let Some(mut ring) = take_ring() {
            let mut healthy = true;
            for chunk in eligible.chunks(RING_DEPTH as usize) {
                if !read_chunk(&mut ring, reqs, chunk, &mut out) {
                    healthy = false;
                    break;
                }
            }
            if healthy {
                return_ring(ring);
            } else {
                // NB: reads may still be in flight into leaked buffers; the ring goes with them.
                std::mem::forget(ring);
            }
        }
    }
    out.into_iter()
        .enumerate()
        .map(|(i, r)| r.unwrap_or_else(|| read_plain(&reqs[i])))
        .collect()
}

fn read_plain(req: &ReadRequest<'_>) -> Result<Vec<u8>> {
    let mut buf = vec![0u8; req.len];
    req.file.read_exact_at(req.offset, &mut buf)?;
    Ok(buf)
}

/// Submits the reads `chunk` (indexes into `reqs`) on `ring` and reaps them all, filling
/// `out`. Returns false if the ring failed with reads possibly in flight: their buffers have
/// been leaked and the ring must not be reused.
fn read_chunk(
    ring: &mut IoUring,
    reqs: &[ReadRequest<'_>],
    chunk: &[usize],
    out: &mut [Option<Result<Vec<u8>>>],
) -> bool {
    let mut flights: Vec<InFlight> = Vec::with_capacity(chunk.len());
    for (slot, &index) in chunk.iter().enumerate() {
        let req = &reqs[index];
        let Some(target) = req.file.io_target() else {
            continue;
        };
        let (mut dest, offset, span) = Dest::new(target, req.offset, req.len);
        let entry = opcode::Read::new(types::Fd(target.fd), dest.ptr(), span as u32)
            .offset(offset)
            .build()
            .user_data(slot as u64);
        flights.push(InFlight {
            slot,
            index,
            dest,
            len: req.len,
        });
        // SAFETY: the buffer lives in `flights` until its completion is reaped below (or is
        // leaked); the descriptor is kept open by `req.file`, borrowed for this call.
        if unsafe { ring.submission().push(&entry) }.is_err() {
            // Cannot happen: a chunk holds at most RING_DEPTH entries and the queue is empty.
            flights.pop();
        }
    }
    let mut results: Vec<Option<i32>> = vec![None; chunk.len()];
    let mut pending = flights.len();
    while pending > 0 {
        match ring.submit_and_wait(pending) {
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                std::mem::forget(flights);
                return false;
            }
        }
        for cqe in ring.completion() {
            results[cqe.user_data() as usize] = Some(cqe.result());
            pending -= 1;
        }
    }
    for flight in flights {
        let res = results[flight.slot].unwrap_or(-libc::EIO);
        let req = &reqs[flight.index];
        // NB: an error or a short read is retried plainly, which reports it with the file's
        // path exactly as an ordinary read would (or succeeds where the ring could not).
        let result = if res >= 0 && res as usize >= flight.dest.needed(flight.len) {
            req.file.note_read(flight.len as u64);
            Ok(flight.dest.into_bytes(flight.len))
        } else {
            read_plain(req)
        };
        out[flight.index] = Some(result);
    }
    true
}

/// One read started now and collected with [`PendingRead::finish`]; dropping it waits for
/// the kernel to be done with the buffer.
pub struct PendingRead {
    ring: Option<IoUring>,
    dest: Option<Dest>,
    offset: u64,
    len: usize,
    result: Option<i32>,
}

impl PendingRead {
    /// Starts reading `len` bytes at `offset` of `file`; `None` where io_uring cannot (the
    /// caller then reads when it needs the bytes).
    pub fn start(file: &dyn RandomAccessFile, offset: u64, len: usize) -> Option<PendingRead> {
        let target = file.io_target()?;
        let mut ring = take_ring()?;
        let (mut dest, at, span) = Dest::new(target, offset, len);
        let entry = opcode::Read::new(types::Fd(target.fd), dest.ptr(), span as u32)
            .offset(at)
            .build();
        // SAFETY: `dest` is owned by the returned value, whose drop reaps the read before the
        // buffer goes; the caller keeps `file` (and its descriptor) alive as long as this.
        if unsafe { ring.submission().push(&entry) }.is_err() || ring.submit().is_err() {
            return_ring(ring);
            return None;
        }
        Some(PendingRead {
            ring: Some(ring),
            dest: Some(dest),
            offset,
            len,
            result: None,
        })
    }

    /// The file range this read covers.
    pub fn range(&self) -> (u64, usize) {
        (self.offset, self.len)
    }

    /// Waits for the read; returns the bytes, reading `file` plainly if the ring's read
    /// failed or came back short. `file` must be the file given to `start`.
    pub fn finish(mut self, file: &dyn RandomAccessFile) -> Result<Vec<u8>> {
        let complete = self.reap().is_some_and(|res| {
            let dest = self.dest.as_ref().expect("dest until finished");
            res >= 0 && res as usize >= dest.needed(self.len)
        });
        if complete {
            file.note_read(self.len as u64);
            let dest = self.dest.take().expect("dest until finished");
            return Ok(dest.into_bytes(self.len));
        }
        let mut buf = vec![0u8; self.len];
        file.read_exact_at(self.offset, &mut buf)?;
        Ok(buf)
    }

    /// Waits for the completion; `None` if the ring failed (then the buffer and ring are
    /// leaked, as the kernel may still write into it).
    fn reap(&mut self) -> Option<i32> {
        if let Some(res) = self.result {
            return Some(res);
        }
        let ring = self.ring.as_mut()?;
        loop {
            if let Some(cqe) = ring.completion().next() {
                self.result = Some(cqe.result());
                break;
            }
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    std::mem::forget(self.ring.take());
                    std::mem::forget(self.dest.take());
                    return None;
                }
            }
        }
        if let Some(ring) = self.ring.take() {
            return_ring(ring);
        }
        self.result
    }
}

impl Drop for PendingRead {
    fn drop(&mut self) {
        if self.dest.is_some() {
            self.reap();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Fs, PosixFs};

    fn sample_file(dir: &std::path::Path, len: usize) -> (std::path::PathBuf, Vec<u8>) {
        let data: Vec<u8> = (0..len).map(|i| (i * 31 % 251) as u8).collect();
        let path = dir.join("data");
        std::fs::write(&path, &data).unwrap();
        (path, data)
    }

    /// NB: on tmpfs `open_read_direct` falls back to buffered reads; both paths still agree.
    fn disk_dir() -> tempfile::TempDir {
        tempfile::tempdir().unwrap()
    }

    #[test]
    fn batches_match_plain_reads_buffered_and_direct() {
        let dir = disk_dir();
        let (path, data) = sample_file(dir.path(), 200_000);
        let fs = PosixFs::new();
        for file in [
            fs.open_read(&path).unwrap(),
            fs.open_read_direct(&path).unwrap(),
        ] {
            let ranges: Vec<(u64, usize)> = (0..150)
                .map(|i| ((i * 1237 % 190_000) as u64, 1 + i * 61 % 9000))
                .collect();
            let reqs: Vec<ReadRequest> = ranges
                .iter()
                .map(|&(offset, len)| ReadRequest {
                    file: file.as_ref(),
                    offset,
                    len,
                })
                .collect();
            for (got, &(offset, len)) in read_batch(&reqs).into_iter().zip(&ranges) {
                let o = offset as usize;
                assert_eq!(got.unwrap(), &data[o..o + len]);
            }
            let past = [ReadRequest {
                file: file.as_ref(),
                offset: 199_990,
                len: 20,
            }; 2];
            assert!(read_batch(&past).iter().all(Result::is_err));
        }
    }

    #[test]
    fn pending_reads_finish_or_drop_safely() {
        let dir = disk_dir();
        let (path, data) = sample_file(dir.path(), 100_000);
        let fs = PosixFs::new();
        let file = fs.open_read_direct(&path).unwrap();
        for i in 0..50u64 {
            let (offset, len) = (i * 1777, 5000);
            let Some(p) = PendingRead::start(file.as_ref(), offset, len) else {
                return; // no io_uring here: nothing to check
            };
            assert_eq!(p.range(), (offset, len));
            if i % 2 == 0 {
                drop(p);
            } else {
                let o = offset as usize;
                assert_eq!(p.finish(file.as_ref()).unwrap(), &data[o..o + len]);
            }
        }
    }
}
