//! Reading a table: open (footer, properties, index, filter), point lookups and the two-level
//! iterator.
//!
//! INVARIANTS: the index block and the filter are read, checksummed and kept in memory at
//! open; data blocks are read on demand, checksummed before they are decompressed or parsed,
//! and shared through the optional [`BlockCache`]. Every failed check becomes
//! `Error::Corruption` naming the table's path and the offset of the damaged block; nothing
//! unverified is returned and no byte pattern on disk can make the reader panic.

use crate::env::{PendingRead, RandomAccessFile};
use crate::error::{Error, Result};
use crate::iter::InternalIterator;
use crate::key;
use crate::sst::block::{Block, BlockIter};
use crate::sst::cache::BlockCache;
use crate::sst::filter::BloomFilter;
use crate::sst::format::{self, check_block, BlockHandle, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN};
use crate::sst::props::TableProperties;
use crate::tier::TierId;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// What one lookup cost (filled in by [`Table::get`]; counters add up across calls).
#[derive(Default, Debug, Clone, Copy)]
pub struct ReadTrace {
    /// The table had a filter and it was consulted.
    pub filter_checked: bool,
    /// The filter said the key is absent (no data block was read).
    pub filter_negative: bool,
    /// Data blocks found in the block cache.
    pub cache_hits: u32,
    /// Data blocks read from the file.
    pub blocks_read: u32,
    /// Bytes read from the file (stored block plus trailer).
    pub bytes_read: u64,
    /// The tier of the table that read the last block from its file (see [`Table::tier`]).
    pub tier: TierId,
}

/// Positional block reads from one table file, with every check that turns bad bytes into
/// `Corruption` naming the file.
struct BlockReader {
    file: Arc<dyn RandomAccessFile>,
    path: PathBuf,
    /// Offset of the footer: every block ends at or before it.
    blocks_end: u64,
}

impl BlockReader {
    fn corrupt(&self, offset: u64, what: impl Into<String>) -> Error {
        Error::corruption(&self.path, offset, what)
    }

    fn footer(&self) -> Result<Footer> {
        let mut buf = vec![0u8; FOOTER_LEN];
        self.file.read_exact_at(self.blocks_end, &mut buf)?;
        Footer::decode(&buf).map_err(|e| self.corrupt(self.blocks_end, e))
    }

    /// Reads, checks and decompresses the block at `h`; returns contents and bytes read.
    fn contents(&self, h: BlockHandle) -> Result<(Vec<u8>, u64)> {
        let len = self.stored_len(h)?;
        let mut raw = vec![0u8; len];
        self.file.read_exact_at(h.offset, &mut raw)?;
        Ok((self.decode_contents(h, &raw)?, len as u64))
    }

    /// Bytes of the block at `h` with its trailer, if it lies inside the block area.
    fn stored_len(&self, h: BlockHandle) -> Result<usize> {
        let in_range = h
            .end_with_trailer()
            .is_some_and(|end| end <= self.blocks_end);
        if !in_range {
            return Err(self.corrupt(h.offset, format!("block {h:?} lies outside the file")));
        }
        Ok(h.size as usize + BLOCK_TRAILER_LEN)
    }

    /// Checks and decompresses the stored bytes `raw` of the block at `h`.
    fn decode_contents(&self, h: BlockHandle, raw: &[u8]) -> Result<Vec<u8>> {
        let (stored, c) = check_block(raw).map_err(|e| self.corrupt(h.offset, e))?;
        format::decompress(stored, c).map_err(|e| self.corrupt(h.offset, e))
    }

    /// Reads the block at `h` and checks its restart array.
    fn block(&self, h: BlockHandle) -> Result<(Block, u64)> {
        let (contents, n) = self.contents(h)?;
        let block = Block::new(contents).map_err(|e| self.corrupt(h.offset, e))?;
        Ok((block, n))
    }
}

/// Read-ahead for iterators: once blocks are read back to back, the next read fetches a
/// window of following bytes and later blocks come from that buffer. Tables are opened for
/// random access (no kernel read-ahead), so sequential scans and compactions get theirs here.
/// Where the file can be read through io_uring, the window after the current one is already
/// being read while the iterator consumes this one.
#[derive(Default)]
struct Readahead {
    /// File offset of `buf[0]`.
    start: u64,
    buf: Vec<u8>,
    /// The window right after `buf`, in flight.
    next: Option<PendingRead>,
    /// Where the next block starts if reading is sequential.
    next_expected: u64,
    sequential_reads: u32,
    window: usize,
    /// Start with the largest window at once (compaction inputs are read whole).
    eager: bool,
}

const READAHEAD_MIN: usize = 16 << 10;
const READAHEAD_MAX: usize = 256 << 10;

impl Readahead {
    /// The stored bytes of the block at `h`, read through the window when reading is
    /// sequential; also returns how many bytes were read from the file.
    fn read(&mut self, reader: &BlockReader, h: BlockHandle) -> Result<(Vec<u8>, u64)> {
        let len = reader.stored_len(h)?;
        let end = h.offset + len as u64;
        if h.offset >= self.start && end <= self.buf_end() {
            let from = (h.offset - self.start) as usize;
            self.next_expected = end;
            return Ok((self.buf[from..from + len].to_vec(), 0));
        }
        if h.offset == self.next_expected {
            self.sequential_reads += 1;
        } else {
            self.sequential_reads = 0;
            self.window = 0;
            self.next = None;
        }
        self.next_expected = end;
        if !self.eager && self.sequential_reads < 2 {
            let mut raw = vec![0u8; len];
            reader.file.read_exact_at(h.offset, &mut raw)?;
            return Ok((raw, len as u64));
        }
        self.window = if self.eager {
            READAHEAD_MAX
        } else {
            (self.window * 2).clamp(READAHEAD_MIN, READAHEAD_MAX)
        };
        let fetched = match self.take_prefetched(reader, h.offset, end)? {
            Some(n) => n,
            None => self.fill(reader, h.offset, len)?,
        };
        self.start_next(reader);
        let from = (h.offset - self.start) as usize;
        Ok((self.buf[from..from + len].to_vec(), fetched))
    }

    fn buf_end(&self) -> u64 {
        self.start + self.buf.len() as u64
    }

    /// Reads a window from `offset` (at least `len` bytes) into `buf` now.
    fn fill(&mut self, reader: &BlockReader, offset: u64, len: usize) -> Result<u64> {
        self.next = None;
        let fetch = (len.max(self.window) as u64).min(reader.blocks_end - offset) as usize;
        self.buf.resize(fetch, 0);
        reader.file.read_exact_at(offset, &mut self.buf)?;
        self.start = offset;
        Ok(fetch as u64)
    }

    /// Moves the prefetched window into `buf` if it (with the tail of `buf` it continues)
    /// holds `[offset, end)`; returns the bytes it read, or `None` if it does not apply.
    fn take_prefetched(
        &mut self,
        reader: &BlockReader,
        offset: u64,
        end: u64,
    ) -> Result<Option<u64>> {
        let Some(next) = &self.next else {
            return Ok(None);
        };
        let (at, len) = next.range();
        let covers = at == self.buf_end() && offset >= self.start && offset <= at;
        if !covers || end > at + len as u64 {
            self.next = None;
            return Ok(None);
        }
        let next = self.next.take().expect("checked above");
        let bytes = next.finish(reader.file.as_ref())?;
        // NB: a block may straddle the two windows; keep the tail of the old one it starts in.
        let keep_from = (offset - self.start) as usize;
        self.buf.drain(..keep_from);
        self.buf.extend_from_slice(&bytes);
        self.start = offset;
        Ok(Some(len as u64))
    }

    /// Starts reading the window after `buf` through io_uring, if the file allows it.
    fn start_next(&mut self, reader: &BlockReader) {
        let at = self.buf_end();
        if self.next.is_some() || at >= reader.blocks_end {
            return;
        }
        let len = (self.window as u64).min(reader.blocks_end - at) as usize;
        self.next = PendingRead::start(reader.file.as_ref(), at, len);
    }
}

impl BlockReader {
    /// Decodes an index value into a handle that lies inside the block area.
    fn handle(&self, v: &[u8], index_offset: u64) -> Result<BlockHandle> {
        let h = BlockHandle::decode_varint(v)
            .ok_or_else(|| self.corrupt(index_offset, "malformed block handle in index"))?;
        match h.end_with_trailer() {
            Some(end) if end <= self.blocks_end => Ok(h),
            _ => Err(self.corrupt(
                index_offset,
                format!("index points outside the file: {h:?}"),
            )),
        }
    }
}

/// An entry found by a lookup: (internal key, value).
pub type Entry = (Vec<u8>, Vec<u8>);

/// What a lookup still needs after [`Table::probe`].
#[derive(Debug)]
pub enum Probe {
    /// Decided without reading the file: the entry, if the table has one.
    Done(Option<Entry>),
    /// The data block at this handle must be read.
    Read(BlockHandle),
}

/// An open, immutable table.
pub struct Table {
    reader: BlockReader,
    cache: Option<Arc<BlockCache>>,
    cache_id: u64,
    props: TableProperties,
    index: Arc<Block>,
    index_offset: u64,
    filter: Option<Arc<BloomFilter>>,
    /// The tier the file is read from: set by the opener, the fast tier outside a database.
    tier: TierId,
    /// Data blocks read from the file for point lookups (misses of the block cache).
    device_reads: AtomicU64,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Table")
            .field("path", &self.reader.path)
            .field("cache_id", &self.cache_id)
            .field("tier", &self.tier)
            .field("props", &self.props)
            .finish_non_exhaustive()
    }
}

impl Table {
    /// Opens the table in `file`; `path` names it in errors and `cache` (if any) holds its
    /// data blocks.
    pub fn open(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        cache: Option<Arc<BlockCache>>,
    ) -> Result<Arc<Table>> {
        Self::open_on_tier(file, path, cache, TierId::FAST)
    }

    /// [`Table::open`] for a file on tier `tier` (reported by [`Table::tier`] and in each
    /// [`ReadTrace`] that reads a block).
    pub fn open_on_tier(
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        cache: Option<Arc<BlockCache>>,
        tier: TierId,
    ) -> Result<Arc<Table>> {
        let size = file.size();
        let Some(blocks_end) = size.checked_sub(FOOTER_LEN as u64) else {
            let what = format!("file of {size} bytes is too short for a table");
            return Err(Error::corruption(path, 0, what));
        };
        let reader = BlockReader {
            file,
            path,
            blocks_end,
        };
        let footer = reader.footer()?;
        let (props, _) = reader.contents(footer.properties)?;
        let mut props = TableProperties::decode(&props)
            .map_err(|e| reader.corrupt(footer.properties.offset, e))?;
        props.file_size = size;
        let index = Arc::new(reader.block(footer.index)?.0);
        let filter = Self::load_filter(&reader, footer.filter)?;
        let table = Table {
            cache_id: cache.as_ref().map_or(0, |c| c.next_id()),
            reader,
            cache,
            props,
            index,
            index_offset: footer.index.offset,
            filter: filter.map(Arc::new),
            tier,
            device_reads: AtomicU64::new(0),
        };
        table.check_index()?;
        Ok(Arc::new(table))
    }

    /// This table read from `file`, a byte-for-byte copy of its file on tier `tier`: the
    /// index, filter and properties are shared, and so are its cached blocks (same cache id),
    /// so nothing is read at open. `Corruption` if the copy's size differs.
    pub fn reopened(
        &self,
        file: Arc<dyn RandomAccessFile>,
        path: PathBuf,
        tier: TierId,
    ) -> Result<Arc<Table>> {
        if file.size() != self.props.file_size {
            let what = format!(
                "copy of {} bytes for a table of {}",
                file.size(),
                self.props.file_size
            );
            return Err(Error::corruption(path, 0, what));
        }
        let reader = BlockReader {
            file,
            path,
            blocks_end: self.reader.blocks_end,
        };
        Ok(Arc::new(Table {
            reader,
            cache: self.cache.clone(),
            cache_id: self.cache_id,
            props: self.props.clone(),
            index: Arc::clone(&self.index),
            index_offset: self.index_offset,
            filter: self.filter.clone(),
            tier,
            device_reads: AtomicU64::new(0),
        }))
    }

    /// The tier this table's file is read from (the fast tier unless opened with [`Table::open_on_tier`]).
    pub fn tier(&self) -> TierId {
        self.tier
    }

    /// Data blocks read from the file for point lookups since the table was opened (not by
    /// iterators).
    pub fn device_reads(&self) -> u64 {
        self.device_reads.load(Ordering::Relaxed)
    }

    fn load_filter(reader: &BlockReader, h: BlockHandle) -> Result<Option<BloomFilter>> {
        if h.size == 0 {
            return Ok(None);
        }
        let (contents, _) = reader.contents(h)?;
        let filter = BloomFilter::decode(contents).map_err(|e| reader.corrupt(h.offset, e))?;
        Ok(Some(filter))
    }

    /// Decodes every index entry once, so later lookups can trust handles to be in range.
    fn check_index(&self) -> Result<()> {
        let mut n = 0u64;
        let mut it = self.index.iter();
        it.seek_to_first();
        while it.valid() {
            self.decode_handle(it.value())?;
            n += 1;
            it.next();
        }
        if let Some(what) = it.corruption() {
            return Err(self.corrupt(self.index_offset, what));
        }
        if n != self.props.num_data_blocks {
            let what = format!(
                "index has {n} entries, properties say {} data blocks",
                self.props.num_data_blocks
            );
            return Err(self.corrupt(self.index_offset, what));
        }
        Ok(())
    }

    fn corrupt(&self, offset: u64, what: impl Into<String>) -> Error {
        self.reader.corrupt(offset, what)
    }

    fn decode_handle(&self, v: &[u8]) -> Result<BlockHandle> {
        self.reader.handle(v, self.index_offset)
    }

    /// The data block at `h` for an iterator: from the cache when present, else through the
    /// iterator's read-ahead.
    fn data_block_ahead(
        &self,
        h: BlockHandle,
        fill_cache: bool,
        ahead: &mut Readahead,
    ) -> Result<Arc<Block>> {
        if let Some(b) = self
            .cache
            .as_ref()
            .and_then(|c| c.get(self.cache_id, h.offset))
        {
            return Ok(b);
        }
        let (raw, _) = ahead.read(&self.reader, h)?;
        self.check_and_cache(h, &raw, fill_cache)
    }

    /// The properties recorded when the table was built.
    pub fn properties(&self) -> &TableProperties {
        &self.props
    }

    /// The path given to [`Table::open`].
    #[cfg(test)]
    pub fn path(&self) -> &std::path::Path {
        &self.reader.path
    }

    /// The id under which this table's blocks are cached (0 without a cache).
    #[cfg(test)]
    pub fn cache_id(&self) -> u64 {
        self.cache_id
    }

    /// False only if the filter proves `user_key` absent; true without a filter.
    pub fn may_contain(&self, user_key: &[u8]) -> bool {
        self.filter.as_ref().is_none_or(|f| f.may_contain(user_key))
    }

    /// Newest entry for `user_key` with seq <= the lookup key's seq: `lookup` is an internal
    /// key; returns the first entry >= lookup whose user key equals lookup's user key, as
    /// (internal key, value). The filter is checked before any data block I/O.
    pub fn get(
        &self,
        lookup: &[u8],
        fill_cache: bool,
        trace: &mut ReadTrace,
    ) -> Result<Option<Entry>> {
        match self.probe(lookup, trace)? {
            Probe::Done(found) => Ok(found),
            Probe::Read(h) => {
                let (offset, len) = self.block_range(h)?;
                let mut raw = vec![0u8; len];
                self.reader.file.read_exact_at(offset, &mut raw)?;
                let block = self.decode_block(h, &raw, fill_cache, trace)?;
                self.search_block(&block, h, lookup)
            }
        }
    }

    /// The first step of a lookup: everything the filter, the index and the block cache can
    /// tell without reading the file. [`Probe::Read`] names the data block still to read; the
    /// caller reads [`Table::block_range`] (perhaps batched with other reads), then calls
    /// [`Table::decode_block`] and [`Table::search_block`].
    pub fn probe(&self, lookup: &[u8], trace: &mut ReadTrace) -> Result<Probe> {
        let Some(h) = self.locate(lookup, trace)? else {
            return Ok(Probe::Done(None));
        };
        let cached = self
            .cache
            .as_ref()
            .and_then(|c| c.get(self.cache_id, h.offset));
        match cached {
            Some(block) => {
                trace.cache_hits += 1;
                Ok(Probe::Done(self.search_block(&block, h, lookup)?))
            }
            None => Ok(Probe::Read(h)),
        }
    }

    /// The data block that can hold `lookup`'s user key, unless the filter or the index rule
    /// it out.
    fn locate(&self, lookup: &[u8], trace: &mut ReadTrace) -> Result<Option<BlockHandle>> {
        let ukey = key::user_key(lookup);
        if let Some(f) = &self.filter {
            trace.filter_checked = true;
            if !f.may_contain(ukey) {
                trace.filter_negative = true;
                return Ok(None);
            }
        }
        let mut index = self.index.iter();
        index.seek(lookup);
        if !index.valid() {
            return match index.corruption() {
                Some(what) => Err(self.corrupt(self.index_offset, what)),
                None => Ok(None),
            };
        }
        // NB: separators are < the next block's first key, so only this block can hold `ukey`.
        self.decode_handle(index.value()).map(Some)
    }

    /// The file range (offset, length with trailer) holding the block at `h`.
    pub fn block_range(&self, h: BlockHandle) -> Result<(u64, usize)> {
        Ok((h.offset, self.reader.stored_len(h)?))
    }

    /// The file this table reads from.
    pub fn file(&self) -> &dyn RandomAccessFile {
        self.reader.file.as_ref()
    }

    /// Checks and decodes `raw`, the stored bytes of the data block at `h` as read from
    /// [`Table::block_range`] for a lookup, and caches it when `fill_cache`. Counts the read in
    /// `trace` and in [`Table::device_reads`].
    pub fn decode_block(
        &self,
        h: BlockHandle,
        raw: &[u8],
        fill_cache: bool,
        trace: &mut ReadTrace,
    ) -> Result<Arc<Block>> {
        let block = self.check_and_cache(h, raw, fill_cache)?;
        trace.blocks_read += 1;
        trace.bytes_read += raw.len() as u64;
        trace.tier = self.tier;
        self.device_reads.fetch_add(1, Ordering::Relaxed);
        Ok(block)
    }

    /// Checks and decodes `raw`, the stored bytes of the data block at `h`, and caches it when
    /// `fill_cache`. (Iterators read through here: a scan or a compaction says nothing of
    /// which tables point reads want.)
    fn check_and_cache(&self, h: BlockHandle, raw: &[u8], fill_cache: bool) -> Result<Arc<Block>> {
        let contents = self.reader.decode_contents(h, raw)?;
        let block = Arc::new(Block::new(contents).map_err(|e| self.corrupt(h.offset, e))?);
        if let (Some(c), true) = (&self.cache, fill_cache) {
            c.insert(self.cache_id, h.offset, Arc::clone(&block));
        }
        Ok(block)
    }

    /// The newest entry for `lookup`'s user key in `block` (the data block at `h`).
    pub fn search_block(
        &self,
        block: &Arc<Block>,
        h: BlockHandle,
        lookup: &[u8],
    ) -> Result<Option<Entry>> {
        let mut it = block.iter();
        it.seek(lookup);
        if let Some(what) = it.corruption() {
            return Err(self.corrupt(h.offset, what));
        }
        let hit = it.valid() && key::user_key(it.key()) == key::user_key(lookup);
        Ok(hit.then(|| (it.key().to_vec(), it.value().to_vec())))
    }

    /// A two-level iterator over every entry.
    ///
    /// Blocks missing from the cache are read ahead once the iterator moves sequentially; an
    /// iterator that does not fill the cache (a compaction, a bulk scan) reads ahead the largest
    /// window from its first block.
    pub fn iter(self: &Arc<Self>, fill_cache: bool) -> TableIter {
        TableIter {
            table: Arc::clone(self),
            index: self.index.iter(),
            data: None,
            data_offset: 0,
            fill_cache,
            error: None,
            ahead: Readahead {
                eager: !fill_cache,
                ..Readahead::default()
            },
        }
    }

    /// Reads every block from the file (bypassing the cache), checks its checksum and, for
    /// data blocks, decodes every entry. Returns the number of blocks checked.
    pub fn verify_checksums(&self) -> Result<u64> {
        let mut n = 0;
        for (_, offset, size) in self.index_entries() {
            let block = Arc::new(self.reader.block(BlockHandle { offset, size })?.0);
            let mut it = block.iter();
            it.seek_to_first();
            while it.valid() {
                it.next();
            }
            if let Some(what) = it.corruption() {
                return Err(self.corrupt(offset, what));
            }
            n += 1;
        }
        let footer = self.reader.footer()?;
        for h in [footer.filter, footer.index, footer.properties] {
            if h.size > 0 {
                self.reader.contents(h)?;
                n += 1;
            }
        }
        Ok(n)
    }

    /// Every index entry as (separator key, block offset, stored block size).
    pub fn index_entries(&self) -> Vec<(Vec<u8>, u64, u64)> {
        let mut out = Vec::new();
        let mut it = self.index.iter();
        it.seek_to_first();
        while it.valid() {
            // INVARIANT: `check_index` decoded every handle at open.
            if let Ok(h) = self.decode_handle(it.value()) {
                out.push((it.key().to_vec(), h.offset, h.size));
            }
            it.next();
        }
        out
    }
}

/// A cursor over a whole table (an [`InternalIterator`]): the index picks a data block, a
/// block iterator walks it.
pub struct TableIter {
    // NB: declared first so it is dropped first: a read-ahead still in flight is reaped
    // while the table (and its file) is certainly alive.
    ahead: Readahead,
    table: Arc<Table>,
    index: BlockIter,
    data: Option<BlockIter>,
    /// Offset of the block `data` walks (names it in errors).
    data_offset: u64,
    fill_cache: bool,
    error: Option<Error>,
}

impl TableIter {
    fn set_error(&mut self, e: Error) {
        self.error.get_or_insert(e);
        self.data = None;
    }

    /// Moves any corruption found by the block iterators into `error`.
    fn collect_corruption(&mut self) {
        let t = &self.table;
        let found = match (&self.data, self.index.corruption()) {
            (_, Some(what)) => Some(t.corrupt(t.index_offset, what)),
            (Some(d), None) => d.corruption().map(|what| t.corrupt(self.data_offset, what)),
            (None, None) => None,
        };
        if let Some(e) = found {
            self.set_error(e);
        }
    }

    /// Points `data` at the block named by the current index entry (or clears it).
    fn load_data_block(&mut self) {
        if self.error.is_some() || !self.index.valid() {
            self.data = None;
            return;
        }
        let result = self.table.decode_handle(self.index.value()).and_then(|h| {
            if let (Some(d), true) = (self.data.take(), h.offset == self.data_offset) {
                // NB: callers reposition `data`, so the block just needs to be the right one.
                return Ok((h, d));
            }
            let block = self
                .table
                .data_block_ahead(h, self.fill_cache, &mut self.ahead)?;
            Ok((h, block.iter()))
        });
        match result {
            Ok((h, data)) => {
                self.data = Some(data);
                self.data_offset = h.offset;
            }
            Err(e) => self.set_error(e),
        }
    }

    /// Moves forward past exhausted data blocks.
    fn skip_forward(&mut self) {
        self.skip_exhausted(true);
    }

    /// Moves backward past exhausted data blocks.
    fn skip_backward(&mut self) {
        self.skip_exhausted(false);
    }

    /// Steps the index (forward or not) until a data block has an entry to stand on, landing
    /// on the block's first or last entry.
    fn skip_exhausted(&mut self, forward: bool) {
        loop {
            self.collect_corruption();
            if self.error.is_some() || self.data.as_ref().is_some_and(BlockIter::valid) {
                return;
            }
            if !self.index.valid() {
                self.data = None;
                return;
            }
            if forward {
                self.index.next();
            } else {
                self.index.prev();
            }
            self.load_data_block();
            match (&mut self.data, forward) {
                (Some(d), true) => d.seek_to_first(),
                (Some(d), false) => d.seek_to_last(),
                (None, _) => {}
            }
        }
    }

    fn data_mut(&mut self) -> Option<&mut BlockIter> {
        self.data.as_mut()
    }
}

impl InternalIterator for TableIter {
    fn valid(&self) -> bool {
        self.error.is_none() && self.data.as_ref().is_some_and(BlockIter::valid)
    }

    fn seek_to_first(&mut self) {
        self.index.seek_to_first();
        self.load_data_block();
        if let Some(d) = self.data_mut() {
            d.seek_to_first();
        }
        self.skip_forward();
    }

    fn seek_to_last(&mut self) {
        self.index.seek_to_last();
        self.load_data_block();
        if let Some(d) = self.data_mut() {
            d.seek_to_last();
        }
        self.skip_backward();
    }

    fn seek(&mut self, target: &[u8]) {
        self.index.seek(target);
        self.load_data_block();
        if let Some(d) = self.data_mut() {
            d.seek(target);
        }
        self.skip_forward();
    }

    fn next(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = self.data_mut() {
            d.next();
        }
        self.skip_forward();
    }

    fn prev(&mut self) {
        debug_assert!(self.valid());
        if let Some(d) = self.data_mut() {
            d.prev();
        }
        self.skip_backward();
    }

    fn key(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::key)
    }

    fn value(&self) -> &[u8] {
        self.data.as_ref().map_or(&[], BlockIter::value)
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind, MAX_SEQNO};
    use crate::options::TableOptions;
    use crate::sst::testutil::{build_table, open_bytes, test_path};
    use crate::sst::Compression;

    type Entries = Vec<(Vec<u8>, Vec<u8>)>;

    fn ukey(i: u32) -> Vec<u8> {
        format!("user-{:06}", i * 3).into_bytes()
    }

    /// Keys 0..n; key i has versions at seqs 10i+5 and (for odd i) 10i+2 (a deletion when
    /// i % 3 == 0 for the newer one).
    fn entries(n: u32) -> Entries {
        let mut out = Vec::new();
        for i in 0..n {
            let s = u64::from(i) * 10;
            let kind = if i % 3 == 0 {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let v = if kind == ValueKind::Value {
                format!("value-{i}-new-{}", "x".repeat(i as usize % 40))
            } else {
                String::new()
            };
            out.push((internal_key(&ukey(i), s + 5, kind), v.into_bytes()));
            if i % 2 == 1 {
                out.push((
                    internal_key(&ukey(i), s + 2, ValueKind::Value),
                    format!("value-{i}-old").into_bytes(),
                ));
            }
        }
        out
    }

    fn opts(c: Compression) -> TableOptions {
        TableOptions {
            block_size: 256,
            block_restart_interval: 4,
            bloom_bits_per_key: 10,
            compression: c,
        }
    }

    fn collect_forward(it: &mut TableIter) -> Entries {
        let mut out = Vec::new();
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
        out
    }

    fn collect_backward(it: &mut TableIter) -> Entries {
        let mut out = Vec::new();
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
        out
    }

    fn get(t: &Table, user_key: &[u8], seq: u64) -> Option<(Vec<u8>, Vec<u8>)> {
        let lookup = internal_key(user_key, seq, key::LOOKUP_KIND);
        t.get(&lookup, true, &mut ReadTrace::default()).unwrap()
    }

    #[test]
    fn build_open_get_iterate_each_compression() {
        let input = entries(500);
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (bytes, props) = build_table(&input, opts(c));
            let t = open_bytes(bytes, None).unwrap();
            assert_eq!(t.properties(), &props);
            assert_eq!(props.num_entries, input.len() as u64);
            assert_eq!(props.num_deletions, 167);
            assert_eq!((props.smallest_seq, props.largest_seq), (5, 4995));
            assert_eq!(props.smallest_key, input[0].0);
            assert_eq!(props.largest_key, input.last().unwrap().0);
            assert!(props.num_data_blocks > 10, "{c}: {props:?}");
            assert_eq!(t.path(), test_path());
            let mut it = t.iter(false);
            assert_eq!(collect_forward(&mut it), input, "{c}");
            assert_eq!(collect_backward(&mut it), input, "{c}");
            assert!(it.status().is_ok());
            check_gets(&t, &input);
        }
    }

    fn check_gets(t: &Table, input: &Entries) {
        for i in 0..500u32 {
            let s = u64::from(i) * 10;
            let newest = input
                .iter()
                .find(|(k, _)| key::user_key(k) == ukey(i))
                .unwrap();
            assert_eq!(get(t, &ukey(i), MAX_SEQNO).as_ref(), Some(newest));
            let older = get(t, &ukey(i), s + 4).map(|(_, v)| v);
            let expected = (i % 2 == 1).then(|| format!("value-{i}-old").into_bytes());
            assert_eq!(older, expected, "key {i} at seq {}", s + 4);
            assert_eq!(get(t, &ukey(i), s + 1), None);
            let absent = format!("user-{:06}", i * 3 + 1).into_bytes();
            assert_eq!(get(t, &absent, MAX_SEQNO), None);
        }
        assert_eq!(get(t, b"zzz", MAX_SEQNO), None);
        assert_eq!(get(t, b"", MAX_SEQNO), None);
    }

    /// The whole file of a two-entry table, produced by an independent encoder written from
    /// docs/sst.md: pins blocks, trailers, filter, properties and footer together.
    #[test]
    fn tiny_table_golden_bytes() {
        const GOLDEN: [&str; 9] = [
            "0009016101010000000000007800090062000200000000000000000000010000",
            "00009389f4320d2940840210c20007003dab4ac9000902620002000000000000",
            "00210000000001000000005e25346e0109610101000000000000020962000200",
            "0000000000030802000000000000000408010000000000000005080100000000",
            "0000000608020000000000000007081200000000000000080801000000000000",
            "00090826000000000000000a081b000000000000000b080e000000000000000c",
            "0801000000000000000d01000e040100000000578bae24260000000000000009",
            "00000000000000340000000000000016000000000000004f0000000000000083",
            "0000000000000001000000c6bc8bda746965726b767374",
        ];
        let hex = GOLDEN.concat();
        let expected: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let input = vec![
            (internal_key(b"a", 1, ValueKind::Value), b"x".to_vec()),
            (internal_key(b"b", 2, ValueKind::Deletion), Vec::new()),
        ];
        let o = TableOptions {
            compression: Compression::None,
            ..TableOptions::default()
        };
        let (bytes, props) = build_table(&input, o);
        assert_eq!(bytes, expected);
        assert_eq!(
            (props.data_bytes, props.filter_bytes, props.index_bytes),
            (38, 14, 27)
        );
        let t = open_bytes(bytes, None).unwrap();
        assert_eq!(collect_forward(&mut t.iter(true)), input);
    }

    fn random_entries(rng: &mut impl rand::Rng) -> Entries {
        let mut keys = std::collections::BTreeMap::new();
        for seq in 1..rng.gen_range(1..1500u64) {
            let len = rng.gen_range(0..12);
            let uk: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..b'e')).collect();
            let kind = if rng.gen_bool(0.2) {
                ValueKind::Deletion
            } else {
                ValueKind::Value
            };
            let vlen = if rng.gen_bool(0.01) {
                9000
            } else {
                rng.gen_range(0..100)
            };
            let v: Vec<u8> = (0..vlen)
                .map(|i| (i % 7) as u8 + rng.gen_range(0..2))
                .collect();
            keys.insert(key::InternalKey(internal_key(&uk, seq, kind)), v);
        }
        keys.into_iter().map(|(k, v)| (k.0, v)).collect()
    }

    /// Random contents and options against a sorted vector as the model.
    #[test]
    fn random_tables_match_model() {
        use rand::{Rng, SeedableRng};
        for seed in 0..12 {
            let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
            let input = random_entries(&mut rng);
            let o = TableOptions {
                block_size: rng.gen_range(64..2048),
                block_restart_interval: rng.gen_range(1..20),
                bloom_bits_per_key: rng.gen_range(0..16),
                compression: [Compression::None, Compression::Lz4, Compression::Zstd]
                    [seed as usize % 3],
            };
            let (bytes, _) = build_table(&input, o.clone());
            let cache = Arc::new(BlockCache::new(rng.gen_range(0..64 << 10)));
            let t = open_bytes(bytes, Some(cache)).unwrap();
            let mut it = t.iter(rng.gen_bool(0.5));
            assert_eq!(collect_forward(&mut it), input, "{o:?}");
            assert_eq!(collect_backward(&mut it), input, "{o:?}");
            for _ in 0..300 {
                let len = rng.gen_range(0..12);
                let uk: Vec<u8> = (0..len).map(|_| rng.gen_range(b'a'..b'e')).collect();
                let target = internal_key(&uk, rng.gen_range(0..1600), key::LOOKUP_KIND);
                let at = input.partition_point(|(k, _)| key::compare_internal(k, &target).is_lt());
                it.seek(&target);
                match input.get(at) {
                    Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                    None => assert!(!it.valid()),
                }
                let mut pos = at;
                for _ in 0..rng.gen_range(0..6) {
                    if pos >= input.len() {
                        break;
                    }
                    if rng.gen_bool(0.5) {
                        it.next();
                        pos += 1;
                    } else if pos == 0 {
                        it.prev();
                        assert!(!it.valid());
                        break;
                    } else {
                        it.prev();
                        pos -= 1;
                    }
                    match input.get(pos) {
                        Some((k, _)) => assert_eq!(it.key(), &k[..]),
                        None => assert!(!it.valid()),
                    }
                }
                let expected = input.get(at).filter(|(k, _)| key::user_key(k) == uk);
                let got = t.get(&target, true, &mut ReadTrace::default()).unwrap();
                assert_eq!(got.as_ref(), expected, "{o:?}");
            }
            assert!(it.status().is_ok());
        }
    }

    #[test]
    fn tables_and_iterators_cross_threads() {
        fn send_sync<T: Send + Sync>() {}
        fn send<T: Send>() {}
        send_sync::<Table>();
        send_sync::<BlockCache>();
        send::<TableIter>();
    }

    #[test]
    fn seek_lands_on_first_key_at_or_after_target() {
        let input = entries(300);
        let (bytes, _) = build_table(&input, opts(Compression::Lz4));
        let t = open_bytes(bytes, None).unwrap();
        let mut it = t.iter(true);
        for i in 0..=300u32 {
            for (uk, seq) in [
                (ukey(i), MAX_SEQNO),
                (ukey(i), u64::from(i) * 10 + 3),
                (format!("user-{:06}", i * 3 + 1).into_bytes(), 1),
            ] {
                let target = internal_key(&uk, seq, key::LOOKUP_KIND);
                it.seek(&target);
                let expected = input
                    .iter()
                    .find(|(k, _)| key::compare_internal(k, &target).is_ge());
                match expected {
                    Some((k, v)) => assert_eq!((it.key(), it.value()), (&k[..], &v[..])),
                    None => assert!(!it.valid()),
                }
            }
        }
        // Walking backward from a seek crosses block boundaries.
        it.seek(&input[200].0);
        for e in input[..=200].iter().rev() {
            assert_eq!(it.key(), e.0);
            it.prev();
        }
        assert!(!it.valid());
        assert!(it.status().is_ok());
    }

    #[test]
    fn empty_table_and_table_without_filter() {
        let (bytes, props) = build_table(&[], TableOptions::default());
        assert_eq!((props.num_entries, props.num_data_blocks), (0, 0));
        let t = open_bytes(bytes, None).unwrap();
        assert_eq!(collect_forward(&mut t.iter(true)), vec![]);
        assert_eq!(collect_backward(&mut t.iter(true)), vec![]);
        assert_eq!(get(&t, b"a", MAX_SEQNO), None);

        let input = entries(50);
        let no_filter = TableOptions {
            bloom_bits_per_key: 0,
            ..opts(Compression::None)
        };
        let (bytes, props) = build_table(&input, no_filter);
        assert_eq!(props.filter_bytes, 0);
        let t = open_bytes(bytes, None).unwrap();
        assert!(t.may_contain(b"anything"));
        let mut trace = ReadTrace::default();
        let lookup = internal_key(b"nope", MAX_SEQNO, key::LOOKUP_KIND);
        assert_eq!(t.get(&lookup, true, &mut trace).unwrap(), None);
        assert!(!trace.filter_checked);
        assert_eq!(collect_forward(&mut t.iter(false)), input);
    }

    /// Counts the positional reads made on a file held in memory.
    struct CountingMemFile(crate::sst::testutil::MemFile, std::sync::atomic::AtomicU64);

    impl RandomAccessFile for CountingMemFile {
        fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<()> {
            self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.0.read_exact_at(offset, buf)
        }

        fn size(&self) -> u64 {
            self.0.size()
        }
    }

    #[test]
    fn read_ahead_serves_sequential_blocks_from_one_read() {
        let input = entries(3000);
        let (bytes, props) = build_table(&input, opts(Compression::None));
        assert!(props.num_data_blocks > 50);
        let file = Arc::new(CountingMemFile(
            crate::sst::testutil::MemFile(bytes),
            Default::default(),
        ));
        let t = Table::open(file.clone(), test_path(), None).unwrap();
        let reads = || file.1.load(std::sync::atomic::Ordering::Relaxed);
        let at_open = reads();
        // Eager read-ahead (no cache filling): a few window-sized reads for the whole table.
        assert_eq!(collect_forward(&mut t.iter(false)), input);
        let eager = reads() - at_open;
        assert!(
            eager * 10 < props.num_data_blocks,
            "{eager} reads for {} blocks",
            props.num_data_blocks
        );
        // Adaptive read-ahead: it starts after two sequential blocks and still sees every entry,
        // backwards too, and after seeks that break the sequence.
        let before = reads();
        assert_eq!(collect_forward(&mut t.iter(true)), input);
        assert!(reads() - before < props.num_data_blocks / 2);
        // (collect_backward returns the entries in key order.)
        assert!(
            collect_backward(&mut t.iter(true)) == input,
            "backward scan differs"
        );
        let mut it = t.iter(true);
        for i in [2500, 10, 1200, 2999, 0] {
            it.seek(&input[i].0);
            assert_eq!(it.key(), input[i].0.as_slice());
            it.next();
            if i + 1 < input.len() {
                assert_eq!(it.key(), input[i + 1].0.as_slice());
            }
        }
    }

    #[test]
    fn prefetched_read_ahead_on_real_files_sees_every_entry() {
        use crate::env::{Fs, PosixFs};
        // Values of odd sizes so blocks straddle the read-ahead windows and 4 KiB pages.
        let input: Entries = (0..4000u32)
            .map(|i| {
                let ikey = internal_key(format!("key{i:06}").as_bytes(), 1, ValueKind::Value);
                (ikey, vec![(i % 251) as u8; 100 + (i as usize * 37) % 900])
            })
            .collect();
        let (bytes, props) = build_table(&input, opts(Compression::None));
        assert!(props.num_data_blocks > 200);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        std::fs::write(&path, &bytes).unwrap();
        let fs = PosixFs::new();
        for file in [
            fs.open_read(&path).unwrap(),
            fs.open_read_direct(&path).unwrap(),
        ] {
            let t = Table::open(file, path.clone(), None).unwrap();
            for fill_cache in [false, true] {
                assert!(collect_forward(&mut t.iter(fill_cache)) == input);
                assert!(collect_backward(&mut t.iter(fill_cache)) == input);
            }
            // Iterators dropped with a window in flight, and seeks that break the sequence.
            for stop in [3usize, 70, 700, 3999] {
                let mut it = t.iter(stop % 2 == 0);
                it.seek_to_first();
                for _ in 0..stop {
                    it.next();
                }
                assert_eq!(it.key(), input[stop].0.as_slice());
                it.seek(&input[stop / 2].0);
                assert_eq!(it.value(), input[stop / 2].1.as_slice());
            }
        }
    }

    #[test]
    fn filter_skips_io_for_absent_keys() {
        let (bytes, _) = build_table(&entries(200), opts(Compression::None));
        let t = open_bytes(bytes, None).unwrap();
        let mut negatives = 0;
        for i in 0..200 {
            let mut trace = ReadTrace::default();
            let lookup = internal_key(
                format!("missing-{i}").as_bytes(),
                MAX_SEQNO,
                key::LOOKUP_KIND,
            );
            assert_eq!(t.get(&lookup, true, &mut trace).unwrap(), None);
            assert!(trace.filter_checked);
            if trace.filter_negative {
                negatives += 1;
                assert_eq!(trace.blocks_read, 0);
            }
        }
        assert!(negatives > 180, "{negatives}");
    }

    #[test]
    fn block_cache_hits_on_second_get() {
        let input = entries(200);
        let (bytes, _) = build_table(&input, opts(Compression::Lz4));
        let cache = Arc::new(BlockCache::new(1 << 20));
        let t = open_bytes(bytes.clone(), Some(Arc::clone(&cache))).unwrap();
        let lookup = internal_key(&ukey(77), MAX_SEQNO, key::LOOKUP_KIND);
        let mut first = ReadTrace::default();
        assert!(t.get(&lookup, false, &mut first).unwrap().is_some());
        assert_eq!((first.blocks_read, first.cache_hits), (1, 0));
        assert!(first.bytes_read > 0);
        assert_eq!(cache.usage(), 0, "fill_cache = false must not insert");
        t.get(&lookup, true, &mut ReadTrace::default()).unwrap();
        let mut third = ReadTrace::default();
        assert!(t.get(&lookup, true, &mut third).unwrap().is_some());
        assert_eq!((third.blocks_read, third.cache_hits), (0, 1));
        assert!(cache.hits() >= 1 && cache.usage() > 0);
        // A second table in the same cache gets its own id and its own entries.
        let t2 = open_bytes(bytes, Some(Arc::clone(&cache))).unwrap();
        assert_ne!(t.cache_id(), t2.cache_id());
        let mut trace = ReadTrace::default();
        t2.get(&lookup, true, &mut trace).unwrap();
        assert_eq!(trace.blocks_read, 1);
        assert_eq!(collect_forward(&mut t2.iter(true)), input);
        assert!(cache.usage() <= cache.capacity());
    }

    #[test]
    fn verify_checksums_counts_blocks_and_lists_index() {
        let (bytes, props) = build_table(&entries(100), opts(Compression::Zstd));
        let t = open_bytes(bytes, None).unwrap();
        assert_eq!(t.verify_checksums().unwrap(), props.num_data_blocks + 3);
        let idx = t.index_entries();
        assert_eq!(idx.len() as u64, props.num_data_blocks);
        assert_eq!(idx[0].1, 0);
        for w in idx.windows(2) {
            assert_eq!(w[1].1, w[0].1 + w[0].2 + BLOCK_TRAILER_LEN as u64);
            assert!(key::compare_internal(&w[0].0, &w[1].0).is_lt());
        }
    }

    fn expect_corruption(r: Result<impl std::fmt::Debug>, offset: u64) {
        match r {
            Err(Error::Corruption {
                file,
                offset: o,
                what,
            }) => {
                assert_eq!(file, test_path(), "{what}");
                assert_eq!(o, offset, "{what}");
            }
            other => panic!("expected corruption at {offset}, got {other:?}"),
        }
    }

    #[test]
    fn damaged_data_block_is_reported_with_file_and_offset() {
        let input = entries(100);
        let (mut bytes, _) = build_table(&input, opts(Compression::Lz4));
        let blocks = open_bytes(bytes.clone(), None).unwrap().index_entries();
        let (_, off, size) = blocks[3].clone();
        bytes[(off + size / 2) as usize] ^= 0x20;
        let t = open_bytes(bytes, None).unwrap();
        expect_corruption(t.verify_checksums(), off);
        let lookup = blocks[3].0.clone();
        expect_corruption(t.get(&lookup, true, &mut ReadTrace::default()), off);
        let mut it = t.iter(true);
        let good = collect_forward(&mut it);
        assert!(!it.valid());
        expect_corruption(it.status(), off);
        assert!(good.len() < input.len() && input.starts_with(&good));
        expect_corruption(
            t.iter(true).status().and_then(|_| {
                let mut it = t.iter(true);
                collect_backward(&mut it);
                it.status()
            }),
            off,
        );
    }

    #[test]
    fn damaged_index_footer_or_short_file_fails_open() {
        let (bytes, _) = build_table(&entries(100), opts(Compression::None));
        let footer = Footer::decode(&bytes[bytes.len() - FOOTER_LEN..]).unwrap();
        let mut b = bytes.clone();
        b[footer.index.offset as usize + 3] ^= 1;
        expect_corruption(open_bytes(b, None), footer.index.offset);
        let end = (bytes.len() - FOOTER_LEN) as u64;
        for at in [0, 20, 50, 60] {
            let mut b = bytes.clone();
            b[end as usize + at] ^= 0x08;
            expect_corruption(open_bytes(b, None), end);
        }
        expect_corruption(open_bytes(bytes[..40].to_vec(), None), 0);
        expect_corruption(open_bytes(vec![0; 200], None), 200 - FOOTER_LEN as u64);
    }

    /// Every single-byte change of a small table is caught by open or by a checksum, and
    /// nothing it returns before the error differs from the input.
    #[test]
    fn every_byte_flip_is_caught_without_panic() {
        let input = entries(24);
        let o = TableOptions {
            block_size: 128,
            ..opts(Compression::Lz4)
        };
        let (bytes, _) = build_table(&input, o);
        for at in 0..bytes.len() {
            for flip in [0x01, 0xff] {
                let mut b = bytes.clone();
                b[at] ^= flip;
                let Ok(t) = open_bytes(b, None) else { continue };
                assert!(
                    t.verify_checksums().is_err(),
                    "flip {flip:#x} at {at} undetected"
                );
                for (i, e) in input.iter().enumerate() {
                    if let Ok(Some(got)) = t.get(&e.0, i % 2 == 0, &mut ReadTrace::default()) {
                        assert_eq!(&got, e, "flip at {at}");
                    }
                }
                let mut it = t.iter(true);
                let fwd = collect_forward(&mut it);
                assert!(input.starts_with(&fwd), "flip at {at}");
                let bwd = collect_backward(&mut it);
                assert!(
                    input.ends_with(&bwd) || it.status().is_err(),
                    "flip at {at}"
                );
            }
        }
        for len in 0..bytes.len() {
            assert!(open_bytes(bytes[..len].to_vec(), None).is_err());
        }
    }
}
