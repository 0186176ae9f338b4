//! Writes a table: data blocks as keys arrive, then filter, index, properties and footer.
//!
//! INVARIANTS: keys are added in strictly increasing [`compare_internal`] order; each index
//! entry's key is `>=` the last key of its data block and `<` the first key of the next one;
//! blocks are appended back to back, so a block's offset is the sum of the stored sizes and
//! trailers before it. After any error the builder must be abandoned.

use crate::env::BufferedFile;
use crate::error::{Error, Result};
use crate::key::{self, compare_internal, ValueKind, MAX_SEQNO};
use crate::options::TableOptions;
use crate::sst::block::BlockBuilder;
use crate::sst::filter::FilterBuilder;
use crate::sst::format::{
    self, block_trailer, BlockHandle, Compression, Footer, BLOCK_TRAILER_LEN, FOOTER_LEN,
    TABLE_FORMAT_VERSION,
};
use crate::sst::props::TableProperties;
use std::cmp::Ordering;

/// Builds one table file.
pub struct TableBuilder {
    file: BufferedFile,
    opts: TableOptions,
    /// Bytes handed to `file` so far.
    offset: u64,
    data: BlockBuilder,
    index: BlockBuilder,
    filter: Option<FilterBuilder>,
    /// The last key of the last flushed data block and its handle, waiting for the next key
    /// so a short separator can be chosen.
    pending_index: Option<(Vec<u8>, BlockHandle)>,
    last_key: Vec<u8>,
    props: TableProperties,
}

impl TableBuilder {
    /// Starts a table written to `file` (which should be empty).
    pub fn new(file: BufferedFile, opts: TableOptions) -> Self {
        let filter =
            (opts.bloom_bits_per_key > 0).then(|| FilterBuilder::new(opts.bloom_bits_per_key));
        TableBuilder {
            offset: file.size(),
            file,
            data: BlockBuilder::new(opts.block_restart_interval),
            index: BlockBuilder::new(1),
            filter,
            pending_index: None,
            last_key: Vec::new(),
            props: TableProperties::empty(opts.compression),
            opts,
        }
    }

    /// Appends an entry; `ikey` is an internal key greater than every key added before.
    pub fn add(&mut self, ikey: &[u8], value: &[u8]) -> Result<()> {
        let parsed = key::parse_internal_key(ikey)
            .ok_or_else(|| Error::invalid(format!("malformed internal key {ikey:02x?}")))?;
        debug_assert!(
            self.props.num_entries == 0 || compare_internal(&self.last_key, ikey) == Ordering::Less,
            "table keys must be strictly increasing"
        );
        if let Some((last, handle)) = self.pending_index.take() {
            self.add_index_entry(&separator(&last, ikey), handle);
        }
        if let Some(f) = &mut self.filter {
            let new_user_key =
                self.props.num_entries == 0 || key::user_key(&self.last_key) != parsed.user_key;
            if new_user_key {
                f.add(parsed.user_key);
            }
        }
        self.note_entry(ikey, value.len(), parsed.seq, parsed.kind);
        self.data.add(ikey, value);
        if self.data.estimated_size() >= self.opts.block_size {
            self.flush_data_block()?;
        }
        Ok(())
    }

    fn note_entry(&mut self, ikey: &[u8], value_len: usize, seq: u64, kind: ValueKind) {
        let p = &mut self.props;
        if p.num_entries == 0 {
            p.smallest_key = ikey.to_vec();
            p.smallest_seq = seq;
        }
        p.num_entries += 1;
        p.num_deletions += u64::from(kind == ValueKind::Deletion);
        p.smallest_seq = p.smallest_seq.min(seq);
        p.largest_seq = p.largest_seq.max(seq);
        p.raw_key_bytes += ikey.len() as u64;
        p.raw_value_bytes += value_len as u64;
        self.last_key.clear();
        self.last_key.extend_from_slice(ikey);
    }

    fn add_index_entry(&mut self, sep: &[u8], handle: BlockHandle) {
        let mut v = Vec::with_capacity(20);
        handle.encode_varint(&mut v);
        self.index.add(sep, &v);
    }

    fn flush_data_block(&mut self) -> Result<()> {
        if self.data.is_empty() {
            return Ok(());
        }
        let last = self.data.last_key().to_vec();
        let contents = self.data.finish();
        let handle = self.write_block(&contents, self.opts.compression)?;
        self.props.num_data_blocks += 1;
        self.pending_index = Some((last, handle));
        Ok(())
    }

    /// Appends a block (compressed when that pays) and its trailer.
    fn write_block(&mut self, raw: &[u8], c: Compression) -> Result<BlockHandle> {
        let compressed = format::compress(raw, c);
        let (stored, c) = match &compressed {
            Some(b) => (b.as_slice(), c),
            None => (raw, Compression::None),
        };
        let handle = BlockHandle {
            offset: self.offset,
            size: stored.len() as u64,
        };
        self.file.append(stored)?;
        self.file.append(&block_trailer(stored, c))?;
        self.offset += (stored.len() + BLOCK_TRAILER_LEN) as u64;
        Ok(handle)
    }

    /// Size of the file if it were finished now (data written plus the open block).
    pub fn estimated_file_size(&self) -> u64 {
        self.offset + self.data.estimated_size() as u64
    }

    /// Entries added so far.
    pub fn num_entries(&self) -> u64 {
        self.props.num_entries
    }

    /// Writes the remaining blocks and the footer, syncs and closes the file.
    pub fn finish(mut self) -> Result<TableProperties> {
        self.flush_data_block()?;
        if let Some((last, handle)) = self.pending_index.take() {
            self.add_index_entry(&last, handle);
        }
        self.props.largest_key = self.last_key.clone();
        self.props.data_bytes = self.offset;
        let filter = self.write_filter()?;
        let index_contents = self.index.finish();
        let index = self.write_block(&index_contents, Compression::None)?;
        self.props.index_bytes = index.size + BLOCK_TRAILER_LEN as u64;
        let properties = self.write_block(&self.props.encode(), Compression::None)?;
        let footer = Footer {
            filter,
            index,
            properties,
            version: TABLE_FORMAT_VERSION,
        };
        self.file.append(&footer.encode())?;
        self.offset += FOOTER_LEN as u64;
        self.file.sync()?;
        self.file.close()?;
        self.props.file_size = self.offset;
        Ok(self.props)
    }

    fn write_filter(&mut self) -> Result<BlockHandle> {
        let Some(f) = self.filter.take() else {
            return Ok(BlockHandle::default());
        };
        let h = self.write_block(&f.finish(), Compression::None)?;
        self.props.filter_bytes = h.size + BLOCK_TRAILER_LEN as u64;
        Ok(h)
    }

    /// Stops building; the caller removes the partial file.
    pub fn abandon(self) {
        drop(self);
    }
}

/// A key `k` with `a <= k < b` (internal key order), shorter than `a` when a short user key
/// fits strictly between the user keys of `a` and `b`.
pub(crate) fn separator(a: &[u8], b: &[u8]) -> Vec<u8> {
    let (ua, ub) = (key::user_key(a), key::user_key(b));
    let i = ua.iter().zip(ub).take_while(|(x, y)| x == y).count();
    if i < ua.len() && i < ub.len() && ua[i] < 0xff && ua[i] + 1 < ub[i] {
        let mut s = ua[..=i].to_vec();
        s[i] += 1;
        // `s > ua` and `s < ub`; the largest trailer makes it the first key with user key `s`.
        return key::internal_key(&s, MAX_SEQNO, key::LOOKUP_KIND);
    }
    a.to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;

    #[test]
    fn separator_is_between_and_short() {
        let cases: [(&[u8], &[u8]); 5] = [
            (b"abcdef", b"abzz"),
            (b"abc", b"abd"),
            (b"ab", b"abc"),
            (b"a\xff\xff", b"b"),
            (b"same", b"same"),
        ];
        for (ua, ub) in cases {
            let a = internal_key(ua, 7, ValueKind::Value);
            let b = internal_key(ub, if ua == ub { 6 } else { 9 }, ValueKind::Value);
            let s = separator(&a, &b);
            assert_ne!(compare_internal(&s, &a), Ordering::Less, "{ua:?}");
            assert_eq!(compare_internal(&s, &b), Ordering::Less, "{ua:?}");
        }
        let s = separator(
            &internal_key(b"abcdef", 1, ValueKind::Value),
            &internal_key(b"abzz", 1, ValueKind::Value),
        );
        assert_eq!(key::user_key(&s), b"abd");
    }

    #[test]
    fn options_validate() {
        assert!(TableOptions::default().validate().is_ok());
        let bad = TableOptions {
            block_restart_interval: 0,
            ..TableOptions::default()
        };
        assert!(bad.validate().is_err());
        let bad = TableOptions {
            block_size: 1,
            ..TableOptions::default()
        };
        assert!(bad.validate().is_err());
    }
}
