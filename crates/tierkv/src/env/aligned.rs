//! Heap buffers aligned for `O_DIRECT`.

/// Alignment of `O_DIRECT` buffers, offsets and lengths.
pub const ALIGN: usize = 4096;

/// The whole [`ALIGN`]ed pages around `len` bytes at `offset`: (first page's offset, bytes of
/// the pages, where the wanted bytes start in them).
pub fn aligned_span(offset: u64, len: usize) -> (u64, usize, usize) {
    let align = ALIGN as u64;
    let start = offset / align * align;
    let end = (offset + len as u64).div_ceil(align) * align;
    (start, (end - start) as usize, (offset - start) as usize)
}

/// A heap buffer aligned for `O_DIRECT` (4 KiB), zero-filled.
pub struct AlignedBuf {
    ptr: std::ptr::NonNull<u8>,
    len: usize,
}

// SAFETY: the buffer owns its allocation exclusively, like a `Vec<u8>`.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only reads.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zero bytes (a multiple of [`ALIGN`] for `O_DIRECT` use).
    pub fn zeroed(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(ALIGN), ALIGN).expect("layout");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr =
            std::ptr::NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        AlignedBuf { ptr, len }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialized bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let layout =
            std::alloc::Layout::from_size_align(self.len.max(ALIGN), ALIGN).expect("layout");
        // SAFETY: allocated in `zeroed` with this very layout.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), layout) };
    }
}
