//! Sorted tables (SSTs): immutable files of internal keys and values, and the block cache.
//!
//! The full byte-level spec is `docs/sst.md`; this is its summary. A table file is
//! ```text
//! data block 0 | trailer | ... | data block N-1 | trailer
//! [filter block | trailer]          bloom filter over user keys (absent when bits/key = 0)
//! index block | trailer             one entry per data block: separator key -> handle
//! properties block | trailer        tagged records: key range, counts, sizes, seqnos, ...
//! footer (64 bytes)                 filter, index, properties handles (u64 LE offset+size),
//!                                   format version u32 LE (= 1), CRC32C u32 LE of the
//!                                   preceding 52 bytes, magic u64 LE = b"tierkvst"
//! ```
//! - Data and index blocks share one format: prefix-compressed entries
//!   `shared | unshared | value_len` (varints) `| key suffix | value`, then `u32 LE` restart
//!   offsets and their `u32 LE` count. Keys are internal keys in `key::compare_internal` order.
//! - Every block is followed by a 5-byte trailer: compression `u8` (0 none, 1 lz4, 2 zstd;
//!   persisted, do not change) and CRC32C `u32 LE` over the stored bytes plus that type byte.
//!   A compressed block is a varint raw length followed by the codec's output, and is only
//!   kept when it saves at least 1/8 of the raw size.
//! - Block handles in the index are `offset, size` varints, naming the stored bytes without
//!   the trailer.
//!
//! INVARIANTS:
//! - Keys in a table are strictly increasing; the index key of block `i` is `>=` its last key
//!   and `<` the first key of block `i + 1`, so a point lookup reads at most one data block.
//! - The reader verifies a block's CRC before decompressing or parsing it, validates every
//!   index handle at open, and turns every failed check into `Error::Corruption` naming the
//!   table's path and the damaged block's offset; no byte pattern makes it panic.
//! - The filter hash (`filter::hash64`) is part of the format.

mod block;
mod builder;
mod cache;
mod filter;
mod format;
mod props;
mod table;

#[cfg(test)]
mod testutil;

pub use block::Block;
pub use builder::TableBuilder;
pub use cache::BlockCache;
pub use filter::{hash64, BloomFilter};
pub use format::{check_block, decompress, BlockHandle, Compression, Footer, BLOCK_TRAILER_LEN};
pub use props::TableProperties;
pub use table::{Entry, Probe, ReadTrace, Table, TableIter};
