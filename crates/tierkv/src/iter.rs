//! Internal iterators: the one cursor interface shared by memtables, SST blocks, tables,
//! levels and the merging iterator, over internal keys in [`crate::key::compare_internal`] order.

use crate::error::Result;

/// A bidirectional cursor over `(internal key, value)` entries.
///
/// After an I/O or checksum error the iterator becomes invalid and `status` returns the error;
/// it never yields data it could not verify.
pub trait InternalIterator: Send {
    /// True when positioned at an entry.
    fn valid(&self) -> bool;
    /// Positions at the first entry.
    fn seek_to_first(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the first entry whose key is `>= target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    /// Moves to the next entry. Requires `valid()`.
    fn next(&mut self);
    /// Moves to the previous entry. Requires `valid()`.
    fn prev(&mut self);
    /// The current internal key. Requires `valid()`.
    fn key(&self) -> &[u8];
    /// The current value. Requires `valid()`.
    fn value(&self) -> &[u8];
    /// The first error met, if any.
    fn status(&self) -> Result<()>;
}
