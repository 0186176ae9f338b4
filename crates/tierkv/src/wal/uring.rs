//! A logger's I/O: page-aligned writes to the parallel-WAL area. Durable runs go several at a
//! time through io_uring on an `O_DIRECT` descriptor with `RWF_DSYNC`, or one at a time with
//! `pwritev2` where io_uring or `O_DIRECT` is unavailable (an old kernel, a seccomp filter,
//! tmpfs, the test file system). Runs that need not be durable go to the page cache.
//!
//! On the fault-injecting file system ([`PositionalFile::emulates_ring`]) durable runs go to an
//! *emulated* ring instead: submissions queue, and each wait carries out a random number (at
//! least one) of them in a random order. Crash sweeps so cover what the kernel ring exposes the
//! logger to (several runs in flight, completions out of order, a crash with some of them done
//! and others not) on a file system that can lose power.
//!
//! A ring that fails (an error other than `EINTR` from submit or wait, or a submission queue
//! that stays full) is broken for good: every write in flight on it completes with the ring's
//! error, so the logger fails those writes and poisons the log, and the ring is not used
//! again. The kernel may still read the buffers of those writes, so their owner must keep
//! them alive for the life of the process ([`LogIo::buffers_abandoned`]).

use crate::env::AlignedBuf;
use crate::env::PositionalFile;
use crate::error::{Error, Result};
use io_uring::{opcode, types, IoUring};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::VecDeque;
use std::sync::Arc;

/// Which path a logger's writes take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPath {
    /// io_uring on an `O_DIRECT` descriptor, several writes in flight.
    Uring,
    /// `pwritev2` (`RWF_DSYNC` when durable) from the logger thread, one at a time.
    Pwrite,
    /// The emulated ring of the fault-injecting file system (see the module doc).
    EmulatedRing,
}

/// Where durable runs are submitted.
enum Ring {
    /// The kernel's io_uring and the `O_DIRECT` descriptor written through it.
    Kernel(Box<IoUring>, i32),
    Emulated(EmulatedRing),
}

/// Submitted durable writes not yet carried out, and the choice of which to carry out next.
struct EmulatedRing {
    queued: Vec<Queued>,
    rng: SmallRng,
}

/// One write queued on the emulated ring; `submit`'s caller keeps the buffer alive until its
/// completion is collected, as with the kernel ring.
struct Queued {
    token: u64,
    offset: u64,
    ptr: *const u8,
    len: usize,
}

/// Tries at a full submission queue before the ring counts as broken.
const FULL_QUEUE_TRIES: usize = 1000;

/// One logger's write channel.
pub struct LogIo {
    file: Arc<dyn PositionalFile>,
    ring: Option<Ring>,
    /// Tokens of the writes in flight on the ring.
    on_ring: Vec<u64>,
    /// Completions not yet collected (synchronous writes, writes failed with the ring).
    ready: VecDeque<(u64, Result<usize>)>,
    /// Set once the ring broke: buffers of writes in flight then may still be read.
    abandoned: bool,
    /// Test hook: the next wait fails with this error.
    #[cfg(test)]
    fail_next_wait: Option<std::io::Error>,
}

impl LogIo {
    /// A channel for up to `depth` writes in flight; io_uring when `use_uring` and the file
    /// has an `O_DIRECT` descriptor and the kernel sets up a ring.
    pub fn new(file: Arc<dyn PositionalFile>, use_uring: bool, depth: usize) -> Self {
        let ring = match (use_uring, file.direct_fd()) {
            (true, _) if file.emulates_ring() => Some(Ring::Emulated(EmulatedRing {
                queued: Vec::new(),
                rng: SmallRng::seed_from_u64(depth as u64),
            })),
            (true, Some(fd)) => IoUring::new(depth.next_power_of_two() as u32)
                .ok()
                .map(|r| Ring::Kernel(Box::new(r), fd)),
            _ => None,
        };
        LogIo {
            file,
            ring,
            on_ring: Vec::new(),
            ready: VecDeque::new(),
            abandoned: false,
            #[cfg(test)]
            fail_next_wait: None,
        }
    }

    /// True once the ring broke with writes in flight: the kernel may still read their
    /// buffers, so they must never be freed.
    pub fn buffers_abandoned(&self) -> bool {
        self.abandoned
    }

    /// The ring failed with `err`: every write in flight on it fails, and later writes take
    /// the synchronous path (the logger poisons the log before it writes again).
    fn break_ring(&mut self, what: &str, err: std::io::Error) {
        self.ring = None;
        self.abandoned |= !self.on_ring.is_empty();
        let path = self.file.path().to_path_buf();
        let msg = format!("{what} failed ({err}); the ring is broken and the WAL stops");
        for token in self.on_ring.drain(..) {
            let e = std::io::Error::new(err.kind(), msg.clone());
            self.ready
                .push_back((token, Err(Error::io("io_uring", &path, e))));
        }
    }

    /// The path in use.
    pub fn path(&self) -> IoPath {
        match self.ring {
            Some(Ring::Kernel(..)) => IoPath::Uring,
            Some(Ring::Emulated(_)) => IoPath::EmulatedRing,
            None => IoPath::Pwrite,
        }
    }

    /// Writes submitted and not yet collected.
    pub fn in_flight(&self) -> usize {
        self.on_ring.len() + self.ready.len()
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
        let (ring, fd) = match ring {
            Some(Ring::Kernel(ring, fd)) => (ring, fd),
            Some(Ring::Emulated(em)) => {
                em.queued.push(Queued {
                    token,
                    offset,
                    ptr: buf.as_slice().as_ptr(),
                    len: buf.len(),
                });
                self.on_ring.push(token);
                return;
            }
            None => {
                let result = self.file.write_at(offset, buf.as_slice(), durable);
                self.ready.push_back((token, result.map(|()| buf.len())));
                return;
            }
        };
        let entry = opcode::Write::new(types::Fd(*fd), buf.as_slice().as_ptr(), buf.len() as u32)
            .offset(offset)
            .rw_flags(libc::RWF_DSYNC)
            .build()
            .user_data(token);
        // SAFETY: the caller keeps `buf` alive until the completion is reaped; `fd` lives as
        // long as `self.file`.
        let mut tries = 0;
        while unsafe { ring.submission().push(&entry) }.is_err() {
            // The queue is sized for `depth` entries; a full one means unsubmitted entries.
            tries += 1;
            let submitted = ring.submit();
            if tries >= FULL_QUEUE_TRIES || submitted.as_ref().is_err_and(|e| !transient(e)) {
                let err = submitted.err().unwrap_or_else(|| {
                    std::io::Error::new(std::io::ErrorKind::WouldBlock, "submission queue full")
                });
                self.on_ring.push(token);
                self.abandoned = true;
                return self.break_ring("io_uring submit", err);
            }
        }
        self.on_ring.push(token);
        match ring.submit() {
            // NB: a transiently failed submit leaves the entry queued; the next
            // `submit_and_wait` retries it.
            Err(e) if !transient(&e) => self.break_ring("io_uring submit", e),
            _ => {}
        }
    }

    /// Collects finished writes with the bytes each wrote, waiting for at least one when
    /// `wait` and any is in flight.
    pub fn complete(&mut self, wait: bool) -> Vec<(u64, Result<usize>)> {
        self.run_emulated(wait);
        if wait && self.ready.is_empty() && !self.on_ring.is_empty() {
            if let Err(e) = self.wait_one() {
                self.break_ring("io_uring wait", e);
            }
        }
        let mut out: Vec<(u64, Result<usize>)> = self.ready.drain(..).collect();
        let Some(Ring::Kernel(ring, _)) = self.ring.as_mut() else {
            return out;
        };
        for cqe in ring.completion() {
            let token = cqe.user_data();
            self.on_ring.retain(|&t| t != token);
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
            out.push((token, result));
        }
        out
    }

    /// Carries out some of the emulated ring's queued writes, in a random order: at least one
    /// when `wait` and nothing is ready yet.
    fn run_emulated(&mut self, wait: bool) {
        let LogIo {
            ring,
            file,
            on_ring,
            ready,
            ..
        } = self;
        let Some(Ring::Emulated(em)) = ring else {
            return;
        };
        if em.queued.is_empty() {
            return;
        }
        let least = usize::from(wait && ready.is_empty());
        let n = em.rng.gen_range(least..=em.queued.len());
        for _ in 0..n {
            let q = em.queued.swap_remove(em.rng.gen_range(0..em.queued.len()));
            // SAFETY: `submit`'s caller keeps the buffer alive until this completion is
            // collected.
            let data = unsafe { std::slice::from_raw_parts(q.ptr, q.len) };
            let result = file.write_at(q.offset, data, true).map(|()| q.len);
            on_ring.retain(|&t| t != q.token);
            ready.push_back((q.token, result));
        }
    }

    /// Waits for at least one completion on the ring, retrying interrupted waits.
    fn wait_one(&mut self) -> std::io::Result<()> {
        #[cfg(test)]
        if let Some(e) = self.fail_next_wait.take() {
            return Err(e);
        }
        let Some(Ring::Kernel(ring, _)) = self.ring.as_mut() else {
            return Ok(());
        };
        loop {
            match ring.submit_and_wait(1) {
                Ok(_) => return Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

/// Errors of `io_uring_enter` that a retry may clear: interrupted, or completions to reap.
fn transient(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINTR | libc::EAGAIN | libc::EBUSY)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Fs, PosixFs};

    /// A channel on an `O_DIRECT` area file, or `None` where this file system refuses it.
    fn uring_io(dir: &std::path::Path) -> Option<(LogIo, AlignedBuf)> {
        let file = PosixFs.open_positional(&dir.join("area"), 1 << 20).unwrap();
        let io = LogIo::new(file, true, 4);
        let mut buf = AlignedBuf::zeroed(4096);
        buf.as_mut_slice()[0] = 7;
        (io.path() == IoPath::Uring).then_some((io, buf))
    }

    #[test]
    fn a_failed_wait_fails_every_write_in_flight_and_retires_the_ring() {
        let dir = tempfile::tempdir().unwrap();
        let Some((mut io, buf)) = uring_io(dir.path()) else {
            eprintln!("no io_uring with O_DIRECT here; the ring path is not exercised");
            return;
        };
        // SAFETY: `buf` outlives the channel's use of it (it is leaked below: abandoned).
        unsafe { io.submit(1, 0, &buf, true) };
        unsafe { io.submit(2, 4096, &buf, true) };
        io.fail_next_wait = Some(std::io::Error::from_raw_os_error(libc::EBADF));
        let done = io.complete(true);
        assert_eq!(
            io.in_flight(),
            0,
            "a broken ring must not leave writes pending"
        );
        let mut tokens: Vec<u64> = done.iter().map(|(t, _)| *t).collect();
        tokens.sort_unstable();
        assert_eq!(tokens, vec![1, 2], "every write completes exactly once");
        for (_, r) in &done {
            let e = r.as_ref().expect_err("a write on the broken ring fails");
            assert!(e.to_string().contains("ring is broken"), "{e}");
        }
        assert!(io.buffers_abandoned());
        std::mem::forget(buf);
        assert_eq!(
            io.path(),
            IoPath::Pwrite,
            "the broken ring is not used again"
        );
    }
}
