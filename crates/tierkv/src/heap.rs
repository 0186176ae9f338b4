//! The process heap: what the engine does about memory the allocator keeps after it is freed.
//!
//! A storage engine's memory use comes in bursts (a memtable freed at once after its flush, a
//! job's buffers), from many threads. glibc's malloc keeps what is freed in per-thread arenas
//! and, after a large block is freed, serves blocks up to that size from arenas too, where
//! they fragment. In a memory-bounded process every MiB kept that way is taken from the page
//! cache that serves the capacity tier's reads.

/// Hands heap memory freed by finished jobs back to the OS: glibc only, and at most once per
/// [`TRIM_EVERY`] in the process (the heap is the process's, however many databases it opens).
///
/// Why: a job frees megabytes at once (a flushed memtable, read-ahead windows and output
/// buffers of a compaction), often in a background thread's own malloc arena, where glibc
/// keeps it. After a load the engine's RSS stayed 80 MiB above RocksDB's with the same block
/// cache, and in a memory-bounded process that came out of the page cache serving the
/// capacity tier's reads (BENCHMARKS.md, build 8). `malloc_trim` returns free pages of every
/// arena.
/// NB: not after every job. A trim holds each arena's lock while it walks it: 4 ms typically,
/// up to 32 ms, during which threads allocating there wait; trimming after each flush of a
/// write-only run put 24 ms writes in multiphase's burst.
pub(crate) fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        use std::sync::OnceLock;
        static EPOCH: OnceLock<std::time::Instant> = OnceLock::new();
        static LAST_TRIM_MS: AtomicU64 = AtomicU64::new(0);
        let now_ms = EPOCH
            .get_or_init(std::time::Instant::now)
            .elapsed()
            .as_millis() as u64;
        let last = LAST_TRIM_MS.load(Ordering::Relaxed);
        let due = now_ms >= last + TRIM_EVERY.as_millis() as u64;
        if due
            && LAST_TRIM_MS
                .compare_exchange(last, now_ms, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: malloc_trim only releases pages on the allocator's own free lists.
            unsafe {
                libc::malloc_trim(0);
            }
        }
    }
}

/// Least time between two heap trims ([`release_free_heap`]).
const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Bounds what glibc's malloc keeps of freed memory, for the whole process: at most
/// [`ARENAS_PER_CPU`] arenas per CPU (glibc allows eight per CPU), and blocks of 256 KiB and
/// more mapped on their own, so they go back to the OS when freed (glibc would otherwise raise
/// that threshold to the largest block freed, up to 32 MiB, and serve such blocks from arenas).
///
/// Why not one arena per CPU, as before: threads share an arena when there are more threads
/// than arenas, and an arena serves one thread at a time. A writer, the flush threads and the
/// hot store's jobs then queued for the same locks: in a single-threaded synced update run on
/// two CPUs, most of the writer's sleeps were on a malloc lock, and its p99 update latency
/// varied 4-20 us between runs against about 5 us with enough arenas (BENCHMARKS.md, "Memtable
/// arena"). Memtables no longer go through malloc per entry (`memtable::arena`), so a flushed
/// memtable leaves nothing of its entries in an arena.
///
/// A process-wide setting, as choosing an allocator is: a program embedding tierkv calls it
/// once at start, before it starts threads (`tierkv-bench` and `tierkv-server` do; BENCHMARKS.md,
/// "PrismDB", measured the difference). Does nothing where the C library is not glibc.
pub fn bound_heap_retention() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        // SAFETY: mallopt only sets allocator parameters; no thread allocates concurrently
        // at process start, and glibc takes its own lock anyway.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, (ARENAS_PER_CPU * cpus) as libc::c_int);
            libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        }
    }
}

/// Malloc arenas allowed per CPU ([`bound_heap_retention`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const ARENAS_PER_CPU: usize = 4;

/// Blocks at least this large are mapped on their own ([`bound_heap_retention`]).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 256 << 10;
