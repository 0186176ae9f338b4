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

use parking_lot::Mutex;
use std::alloc::{self, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};

/// Bytes of a shared block. Nodes larger than a quarter of it get a block of their own, so at
/// most a quarter of a block is left unused when it runs out.
const BLOCK_SIZE: usize = 256 << 10;

/// Alignment of every allocation (a node starts with `usize` fields and atomic pointers).
pub const ALIGN: usize = 8;

/// One block of memory, and how much of it was handed out (it may count past `size` when
/// writers race for its last bytes: those allocations fail and move to the next block).
struct Block {
    data: NonNull<u8>,
    size: usize,
    used: AtomicUsize,
}

impl Block {
    fn new(size: usize) -> Box<Block> {
        let layout = Self::layout(size);
        // SAFETY: `size` is non-zero (callers ask for at least one aligned word).
        let raw = unsafe { alloc::alloc(layout) };
        let Some(data) = NonNull::new(raw) else {
            alloc::handle_alloc_error(layout)
        };
        Box::new(Block {
            data,
            size,
            used: AtomicUsize::new(0),
        })
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
        let block = Block::new(size);
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
        let block = NonNull::from(Box::leak(Block::new(BLOCK_SIZE)));
        blocks.push(block);
        self.current.store(block.as_ptr(), Ordering::Release);
    }
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in self.blocks.get_mut().drain(..) {
            // SAFETY: each came from `Box::leak` and is dropped once, here, when no range
            // handed out is in use any more (the arena is borrowed by every user).
            drop(unsafe { Box::from_raw(block.as_ptr()) });
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
