//! Memory for a memtable's skip-list nodes: large blocks handed out by bumping an offset, all
//! freed together when the memtable is dropped.
//!
//! Why not one `malloc` per node: a memtable is filled by writer threads and dropped by the
//! background thread that flushed it, and glibc frees a chunk under the lock of the malloc
//! arena that allocated it, so tens of thousands of frees from the flush thread queue with the
//! writers' own allocations for that lock. Here a node costs an atomic add, and a memtable's
//! memory is a few blocks, mapped on their own (`heap::bound_heap_retention`), so they go
//! back to the OS when it is dropped. A single-threaded fill of 100-byte values ran 1.3x as
//! fast with this list and its arena as with the concurrent map before them, which made
//! three allocations per entry (BENCHMARKS.md, "Memtable arena").
//!
//! Shared blocks come from a small process-wide [`Reserve`] of blocks whose pages a
//! background thread has already faulted in: a fresh block's first touch of each page is a
//! page fault, and on the writer's thread that was one write in about a dozen
//! (BENCHMARKS.md, "Blocks faulted in ahead").

use parking_lot::{Condvar, Mutex};
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Bytes of a shared block. Nodes larger than a quarter of it get a block of their own, so at
/// most a quarter of a block is left unused when it runs out.
const BLOCK_SIZE: usize = 256 << 10;

/// Alignment of every allocation (a node starts with `usize` fields and atomic pointers).
pub const ALIGN: usize = 8;

/// Shared blocks the [`Reserve`] keeps ready: enough that a writer finds one while the
/// background thread faults in the next (a block lasts about a thousand small writes).
const RESERVE_BLOCKS: usize = 2;

/// The smallest page size the OS maps; touching one byte in each faults a block in.
const PAGE: usize = 4096;

/// One block of memory, and how much of it was handed out (it may count past `size` when
/// writers race for its last bytes: those allocations fail and move to the next block).
struct Block {
    data: NonNull<u8>,
    size: usize,
    used: AtomicUsize,
}

impl Block {
    fn new(size: usize) -> Block {
        let layout = Self::layout(size);
        // SAFETY: `size` is non-zero (callers ask for at least one aligned word).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(data) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Block {
            data,
            size,
            used: AtomicUsize::new(0),
        }
    }

    /// Writes one byte of every page, so the OS backs each page now rather than at a
    /// writer's first touch of it. The block's bytes are uninitialised to its users anyway.
    fn fault_in(&self) {
        // NB: the last byte too, as the block need not start on a page boundary.
        let last = self.size - 1;
        for offset in (0..self.size).step_by(PAGE).chain([last]) {
            // SAFETY: `offset < self.size`, within the allocation this block owns alone.
            unsafe { self.data.as_ptr().add(offset).write_volatile(0) };
        }
    }

    fn layout(size: usize) -> Layout {
        Layout::from_size_align(size, ALIGN).expect("memtable block too large")
    }

    /// `size` bytes of this block, if that many are left.
    fn take(&self, size: usize) -> Option<NonNull<u8>> {
        let start = self.used.fetch_add(size, Ordering::Relaxed);
        if start + size > self.size {
            return None;
        }
        // SAFETY: `start + size <= self.size`: the range lies within the block, and no other
        // caller of `fetch_add` got an overlapping one.
        Some(unsafe { NonNull::new_unchecked(self.data.as_ptr().add(start)) })
    }
}

impl Drop for Block {
    fn drop(&mut self) {
        // SAFETY: allocated in `Block::new` with this layout.
        unsafe { alloc::dealloc(self.data.as_ptr(), Self::layout(self.size)) }
    }
}

/// Puts the calling thread in Linux's batch scheduling class: it gets its share of CPU, but
/// waking up does not preempt the thread running. Why: faulting a block in takes about
/// 100 us, and a refill woken at normal priority preempted the writer that had just taken a
/// block, which then waited it out (one write in a thousand took 100 us or more). In the idle
/// class instead it found no idle CPU on a busy machine and the reserve ran dry. Where the
/// class is not available the thread runs at normal priority.
fn run_without_preempting() {
    #[cfg(target_os = "linux")]
    {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: changes only the calling thread's (pid 0) scheduling class.
        let _ = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    }
}

// SAFETY: a block owns its allocation alone (nothing else frees it) and hands out ranges by
// an atomic add, so it may move to, and be shared with, another thread.
unsafe impl Send for Block {}
// SAFETY: as above.
unsafe impl Sync for Block {}

/// Shared blocks faulted in ahead of use, for every arena in the process: a background
/// thread (`tierkv-arena`, started by the first take) keeps [`RESERVE_BLOCKS`] of them, and a
/// dropped arena gives its shared blocks back while there is room. What it costs: at most
/// that many blocks resident while no memtable needs them, and the faults on another thread.
struct Reserve {
    blocks: Mutex<Vec<Block>>,
    /// Signalled when a block is taken, for the thread that refills.
    taken: Condvar,
}

/// The reserve every arena takes its shared blocks from.
static RESERVE: Reserve = Reserve::new();

impl Reserve {
    const fn new() -> Self {
        Reserve {
            blocks: Mutex::new(Vec::new()),
            taken: Condvar::new(),
        }
    }

    /// A shared block: one faulted in already if the reserve holds one, else a fresh one.
    fn take(&self) -> Block {
        let ready = self.blocks.lock().pop();
        self.taken.notify_one();
        ready.unwrap_or_else(|| Block::new(BLOCK_SIZE))
    }

    /// Keeps `block` (a shared block of a dropped arena) if the reserve has room, else
    /// frees it.
    fn give_back(&self, mut block: Block) {
        debug_assert_eq!(block.size, BLOCK_SIZE);
        let mut blocks = self.blocks.lock();
        if blocks.len() < RESERVE_BLOCKS {
            *block.used.get_mut() = 0;
            blocks.push(block);
        }
    }

    /// Faults in a new block and keeps it, if the reserve is short of one. Returns false if
    /// it was full.
    fn fill_one(&self) -> bool {
        if self.blocks.lock().len() >= RESERVE_BLOCKS {
            return false;
        }
        // NB: outside the lock, which writers take.
        let block = Block::new(BLOCK_SIZE);
        block.fault_in();
        self.give_back(block);
        true
    }

    /// The refilling thread's loop: fill, then sleep until a block is taken.
    fn refill_forever(&self) -> ! {
        run_without_preempting();
        loop {
            while self.fill_one() {}
            let mut blocks = self.blocks.lock();
            if blocks.len() >= RESERVE_BLOCKS {
                self.taken.wait(&mut blocks);
            }
        }
    }

    /// Starts the refilling thread once per process. Where it cannot start, arenas map fresh
    /// blocks as they would without a reserve.
    fn start_refilling(&'static self) {
        static STARTED: std::sync::Once = std::sync::Once::new();
        // NB: not under Miri, which wants every thread joined before the program ends; its
        // runs cover the reserve through `give_back` and the tests' own calls.
        if cfg!(miri) {
            return;
        }
        STARTED.call_once(|| {
            let _ = std::thread::Builder::new()
                .name("tierkv-arena".into())
                .spawn(move || self.refill_forever());
        });
    }
}

/// An allocator of memory that lives as long as the arena. Safe to share between threads.
pub struct Arena {
    /// The block small allocations come from (null before the first).
    current: AtomicPtr<Block>,
    /// Every block (each from `Box::into_raw`), owned here until the arena is dropped. Raw
    /// pointers, not boxes: a box is a unique owner, and moving it would forbid the shared
    /// use `current` makes of the block.
    blocks: Mutex<Vec<NonNull<Block>>>,
}

// SAFETY: blocks are owned by `blocks` (behind a mutex) and freed only when the arena is
// dropped; `current` points at one of them; handing out ranges is an atomic add.
unsafe impl Send for Arena {}
// SAFETY: as above.
unsafe impl Sync for Arena {}

impl Default for Arena {
    fn default() -> Self {
        Self::new()
    }
}

impl Arena {
    /// An arena with no blocks yet.
    pub fn new() -> Self {
        Arena {
            current: AtomicPtr::new(std::ptr::null_mut()),
            blocks: Mutex::new(Vec::new()),
        }
    }

    /// `size` bytes aligned to [`ALIGN`], uninitialised, valid until the arena is dropped.
    pub fn allocate(&self, size: usize) -> NonNull<u8> {
        let size = size.max(1).next_multiple_of(ALIGN);
        if size > BLOCK_SIZE / 4 {
            return self.allocate_alone(size);
        }
        loop {
            let block = self.current.load(Ordering::Acquire);
            // SAFETY: a non-null `current` points at a block `blocks` owns.
            if let Some(range) = unsafe { block.as_ref() }.and_then(|b| b.take(size)) {
                return range;
            }
            self.replace_block(block);
        }
    }

    /// Bytes held in blocks (what the arena costs, allocated or not).
    #[cfg(test)]
    pub fn reserved_bytes(&self) -> usize {
        // SAFETY: every pointer in `blocks` is a live block.
        self.blocks
            .lock()
            .iter()
            .map(|b| unsafe { b.as_ref() }.size)
            .sum()
    }

    /// A block of its own for a large allocation.
    fn allocate_alone(&self, size: usize) -> NonNull<u8> {
        let block = Box::new(Block::new(size));
        let range = block.take(size).expect("a new block holds its own size");
        self.blocks.lock().push(NonNull::from(Box::leak(block)));
        range
    }

    /// Starts a new shared block, unless another writer already replaced `full`.
    fn replace_block(&self, full: *mut Block) {
        let mut blocks = self.blocks.lock();
        if self.current.load(Ordering::Acquire) != full {
            return;
        }
        RESERVE.start_refilling();
        let block = NonNull::from(Box::leak(Box::new(RESERVE.take())));
        blocks.push(block);
        self.current.store(block.as_ptr(), Ordering::Release);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in self.blocks.get_mut().drain(..) {
            // SAFETY: each came from `Box::leak` and is taken back once, here, when no range
            // handed out is in use any more (the arena is borrowed by every user).
            let block = unsafe { Box::from_raw(block.as_ptr()) };
            if block.size == BLOCK_SIZE {
                RESERVE.give_back(*block);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn allocations_are_aligned_disjoint_and_writable() {
        let arena = Arena::new();
        let mut ranges = Vec::new();
        for i in 0..2000usize {
            let size = 1 + i * 37 % 300;
            let p = arena.allocate(size);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            // SAFETY: the range is ours and lives as long as the arena.
            unsafe { std::ptr::write_bytes(p.as_ptr(), i as u8, size) };
            ranges.push((p.as_ptr() as usize, size, i as u8));
        }
        ranges.sort();
        for w in ranges.windows(2) {
            assert!(w[0].0 + w[0].1 <= w[1].0, "ranges overlap");
        }
        for &(start, size, byte) in &ranges {
            // SAFETY: as above.
            let bytes = unsafe { std::slice::from_raw_parts(start as *const u8, size) };
            assert!(bytes.iter().all(|&b| b == byte));
        }
    }

    #[test]
    fn large_allocations_get_their_own_block() {
        let arena = Arena::new();
        arena.allocate(100);
        let shared = arena.reserved_bytes();
        assert_eq!(shared, BLOCK_SIZE);
        arena.allocate(BLOCK_SIZE);
        assert_eq!(arena.reserved_bytes(), shared + BLOCK_SIZE);
        // The shared block still serves small allocations.
        arena.allocate(100);
        assert_eq!(arena.reserved_bytes(), shared + BLOCK_SIZE);
    }

    /// True if every page of `block` is backed by memory (Linux's `mincore`).
    #[cfg(all(target_os = "linux", not(miri)))]
    fn resident(block: &Block) -> bool {
        let start = block.data.as_ptr() as usize / PAGE * PAGE;
        let end = block.data.as_ptr() as usize + block.size;
        let mut pages = vec![0u8; (end - start).div_ceil(PAGE)];
        // SAFETY: the range covers the block's own allocation (from its page's start), and
        // `pages` has one byte per page.
        let rc = unsafe { libc::mincore(start as *mut _, end - start, pages.as_mut_ptr()) };
        assert_eq!(rc, 0, "mincore: {}", std::io::Error::last_os_error());
        pages.iter().all(|p| p & 1 == 1)
    }

    #[test]
    fn the_reserve_keeps_faulted_in_blocks_up_to_its_size() {
        let reserve = Reserve::new();
        let fresh = reserve.take();
        assert_eq!(fresh.size, BLOCK_SIZE);
        for _ in 0..RESERVE_BLOCKS {
            assert!(reserve.fill_one());
        }
        assert!(!reserve.fill_one(), "a full reserve makes no more blocks");
        reserve.give_back(fresh);
        assert_eq!(
            reserve.blocks.lock().len(),
            RESERVE_BLOCKS,
            "a full reserve frees it"
        );
        let ready = reserve.take();
        assert_eq!(reserve.blocks.lock().len(), RESERVE_BLOCKS - 1);
        #[cfg(all(target_os = "linux", not(miri)))]
        assert!(resident(&ready), "a reserved block is faulted in");
        assert!(ready.take(BLOCK_SIZE).is_some(), "and holds a whole block");
    }

    #[test]
    fn a_block_given_back_starts_empty() {
        let reserve = Reserve::new();
        let block = reserve.take();
        let first = block.take(100).unwrap();
        assert!(block.take(BLOCK_SIZE).is_none());
        reserve.give_back(block);
        let again = reserve.take();
        assert_eq!(
            again.take(100),
            Some(first),
            "the same block, handed out from its start"
        );
    }

    #[test]
    fn threads_racing_for_a_block_get_disjoint_ranges() {
        let arena = Arc::new(Arena::new());
        let per_thread = if cfg!(miri) { 200 } else { 20_000 };
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let arena = Arc::clone(&arena);
                std::thread::spawn(move || {
                    (0..per_thread)
                        .map(|_| arena.allocate(24).as_ptr() as usize)
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut all: Vec<usize> = threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect();
        all.sort();
        assert!(all.windows(2).all(|w| w[0] + 24 <= w[1]));
    }
}
