//! A logger's I/O: page-aligned writes to the parallel-WAL area. Durable runs go several at a
//! time through io_uring on an `O_DIRECT` descriptor with `RWF_DSYNC`, or one at a time with
//! `pwritev2` where io_uring or `O_DIRECT` is unavailable (an old kernel, a seccomp filter,
//! tmpfs, the test file system). Runs that need not be durable go to the page cache.

use super::parallel::AlignedBuf;
use crate::env::PositionalFile;
use crate::error::{Error, Result};
use io_uring::{opcode, types, IoUring};
use std::collections::VecDeque;
use std::sync::Arc;

/// Which path a logger's writes take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPath {
    /// io_uring on an `O_DIRECT` descriptor, several writes in flight.
    Uring,
    /// `pwritev2` (`RWF_DSYNC` when durable) from the logger thread, one at a time.
    Pwrite,
}

/// One logger's write channel.
pub struct LogIo {
    file: Arc<dyn PositionalFile>,
    ring: Option<(IoUring, i32)>,
    in_flight: usize,
    /// Completions of synchronous writes not yet collected.
    ready: VecDeque<(u64, Result<usize>)>,
}

impl LogIo {
    /// A channel for up to `depth` writes in flight; io_uring when `use_uring` and the file
    /// has an `O_DIRECT` descriptor and the kernel sets up a ring.
    pub fn new(file: Arc<dyn PositionalFile>, use_uring: bool, depth: usize) -> Self {
        let ring = match (use_uring, file.direct_fd()) {
            (true, Some(fd)) => IoUring::new(depth.next_power_of_two() as u32)
                .ok()
                .map(|r| (r, fd)),
            _ => None,
        };
        LogIo {
            file,
            ring,
            in_flight: 0,
            ready: VecDeque::new(),
        }
    }

    /// The path in use.
    pub fn path(&self) -> IoPath {
        if self.ring.is_some() {
            IoPath::Uring
        } else {
            IoPath::Pwrite
        }
    }

    /// Writes submitted and not yet collected.
    pub fn in_flight(&self) -> usize {
        self.in_flight + self.ready.len()
    }

    /// Starts writing `buf` at `offset` (durably if `durable`); its completion comes back from
    /// [`LogIo::complete`] with `token`.
    ///
    /// # Safety
    /// `buf` must stay alive and unmoved until its completion is collected.
    pub unsafe fn submit(&mut self, token: u64, offset: u64, buf: &AlignedBuf, durable: bool) {
        // NB: a run that need not be durable goes to the page cache at once: far cheaper than
        // a device write, and a later synced run covers it (see `db::pipeline`).
        let ring = self.ring.as_mut().filter(|_| durable);
        let Some((ring, fd)) = ring else {
            let result = self.file.write_at(offset, buf.as_slice(), durable);
            self.ready.push_back((token, result.map(|()| buf.len())));
            return;
        };
        let entry = opcode::Write::new(types::Fd(*fd), buf.as_slice().as_ptr(), buf.len() as u32)
            .offset(offset)
            .rw_flags(libc::RWF_DSYNC)
            .build()
            .user_data(token);
        // SAFETY: the caller keeps `buf` alive until the completion is reaped; `fd` lives as
        // long as `self.file`.
        while unsafe { ring.submission().push(&entry) }.is_err() {
            // The queue is sized for `depth` entries; a full one means unsubmitted entries.
            let _ = ring.submit();
        }
        self.in_flight += 1;
        // NB: a failed submit leaves the entry queued; the next `submit_and_wait` retries it.
        let _ = ring.submit();
    }

    /// Collects finished writes with the bytes each wrote, waiting for at least one when
    /// `wait` and any is in flight.
    pub fn complete(&mut self, wait: bool) -> Vec<(u64, Result<usize>)> {
        let mut out: Vec<(u64, Result<usize>)> = self.ready.drain(..).collect();
        let Some((ring, _)) = self.ring.as_mut() else {
            return out;
        };
        if self.in_flight == 0 {
            return out;
        }
        if wait && out.is_empty() {
            loop {
                match ring.submit_and_wait(1) {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    Err(_) => break,
                }
            }
        }
        for cqe in ring.completion() {
            self.in_flight -= 1;
            let res = cqe.result();
            let result = if res < 0 {
                Err(Error::io(
                    "io_uring write",
                    self.file.path(),
                    std::io::Error::from_raw_os_error(-res),
                ))
            } else {
                Ok(res as usize)
            };
            out.push((cqe.user_data(), result));
        }
        out
    }
}
