//! Table properties and their encoding in the properties block.
//!
//! The properties block's contents are a run of records `tag: u8 | len: varint | value`, tags
//! ascending. Integer values are fixed-width little-endian (u64: 8 bytes, u32: 4, compression:
//! 1); keys are raw bytes. A reader skips tags it does not know (so a newer writer may add
//! fields) and reports a missing known tag as corruption. `file_size` is not stored: it is the
//! length of the file.

use crate::coding::{put_varint, Decoder};
use crate::sst::format::Compression;

/// Record tags of the properties block. Persisted: the values must not change.
mod tag {
    pub const SMALLEST_KEY: u8 = 1;
    pub const LARGEST_KEY: u8 = 2;
    pub const NUM_ENTRIES: u8 = 3;
    pub const NUM_DELETIONS: u8 = 4;
    pub const SMALLEST_SEQ: u8 = 5;
    pub const LARGEST_SEQ: u8 = 6;
    pub const RAW_KEY_BYTES: u8 = 7;
    pub const RAW_VALUE_BYTES: u8 = 8;
    pub const DATA_BYTES: u8 = 9;
    pub const INDEX_BYTES: u8 = 10;
    pub const FILTER_BYTES: u8 = 11;
    pub const NUM_DATA_BLOCKS: u8 = 12;
    pub const COMPRESSION: u8 = 13;
    pub const FORMAT_VERSION: u8 = 14;
    /// One more than the largest known tag.
    pub const END: u8 = 15;
}

/// What a table holds, recorded when it was built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableProperties {
    /// First internal key (empty when the table has no entries).
    pub smallest_key: Vec<u8>,
    /// Last internal key (empty when the table has no entries).
    pub largest_key: Vec<u8>,
    /// Entries of every kind.
    pub num_entries: u64,
    /// Entries of kind `ValueKind::Deletion`.
    pub num_deletions: u64,
    /// Smallest sequence number (0 when empty).
    pub smallest_seq: u64,
    /// Largest sequence number (0 when empty).
    pub largest_seq: u64,
    /// Sum of internal key lengths.
    pub raw_key_bytes: u64,
    /// Sum of value lengths.
    pub raw_value_bytes: u64,
    /// Bytes of data blocks on disk, trailers included.
    pub data_bytes: u64,
    /// Bytes of the index block on disk, trailer included.
    pub index_bytes: u64,
    /// Bytes of the filter block on disk, trailer included (0 without a filter).
    pub filter_bytes: u64,
    /// Number of data blocks.
    pub num_data_blocks: u64,
    /// Compression requested for data blocks (a block that does not shrink is stored raw).
    pub compression: Compression,
    /// Table format version.
    pub format_version: u32,
    /// Length of the file (not stored; filled in by the builder and the reader).
    pub file_size: u64,
}

impl TableProperties {
    /// Encodes the properties block contents.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        let mut rec = |t: u8, v: &[u8]| {
            out.push(t);
            put_varint(&mut out, v.len() as u64);
            out.extend_from_slice(v);
        };
        rec(tag::SMALLEST_KEY, &self.smallest_key);
        rec(tag::LARGEST_KEY, &self.largest_key);
        for (t, v) in self.u64_fields() {
            rec(t, &v.to_le_bytes());
        }
        rec(tag::COMPRESSION, &[self.compression as u8]);
        rec(tag::FORMAT_VERSION, &self.format_version.to_le_bytes());
        out
    }

    fn u64_fields(&self) -> [(u8, u64); 10] {
        [
            (tag::NUM_ENTRIES, self.num_entries),
            (tag::NUM_DELETIONS, self.num_deletions),
            (tag::SMALLEST_SEQ, self.smallest_seq),
            (tag::LARGEST_SEQ, self.largest_seq),
            (tag::RAW_KEY_BYTES, self.raw_key_bytes),
            (tag::RAW_VALUE_BYTES, self.raw_value_bytes),
            (tag::DATA_BYTES, self.data_bytes),
            (tag::INDEX_BYTES, self.index_bytes),
            (tag::FILTER_BYTES, self.filter_bytes),
            (tag::NUM_DATA_BLOCKS, self.num_data_blocks),
        ]
    }

    /// Decodes properties block contents (`file_size` is left 0); `Err` says what is wrong.
    pub fn decode(src: &[u8]) -> Result<TableProperties, String> {
        let mut p = TableProperties::empty(Compression::None);
        let mut seen = [false; tag::END as usize];
        let mut d = Decoder::new(src);
        while !d.is_empty() {
            let t = d.u8().ok_or("truncated property tag")?;
            let v = d.length_prefixed().ok_or("truncated property value")?;
            if let Some(s) = seen.get_mut(t as usize) {
                p.set(t, v)?;
                *s = true;
            }
        }
        match (1..tag::END).find(|&t| !seen[t as usize]) {
            Some(t) => Err(format!("property {t} is missing")),
            None => Ok(p),
        }
    }

    fn set(&mut self, t: u8, v: &[u8]) -> Result<(), String> {
        let bad = || format!("property {t} has a bad value of {} bytes", v.len());
        let u64v = || v.try_into().map(u64::from_le_bytes).map_err(|_| bad());
        match t {
            tag::SMALLEST_KEY => self.smallest_key = v.to_vec(),
            tag::LARGEST_KEY => self.largest_key = v.to_vec(),
            tag::NUM_ENTRIES => self.num_entries = u64v()?,
            tag::NUM_DELETIONS => self.num_deletions = u64v()?,
            tag::SMALLEST_SEQ => self.smallest_seq = u64v()?,
            tag::LARGEST_SEQ => self.largest_seq = u64v()?,
            tag::RAW_KEY_BYTES => self.raw_key_bytes = u64v()?,
            tag::RAW_VALUE_BYTES => self.raw_value_bytes = u64v()?,
            tag::DATA_BYTES => self.data_bytes = u64v()?,
            tag::INDEX_BYTES => self.index_bytes = u64v()?,
            tag::FILTER_BYTES => self.filter_bytes = u64v()?,
            tag::NUM_DATA_BLOCKS => self.num_data_blocks = u64v()?,
            tag::COMPRESSION => {
                let b = <[u8; 1]>::try_from(v).map_err(|_| bad())?;
                self.compression = Compression::from_u8(b[0]).ok_or_else(bad)?;
            }
            tag::FORMAT_VERSION => {
                self.format_version = v.try_into().map(u32::from_le_bytes).map_err(|_| bad())?;
            }
            _ => {}
        }
        Ok(())
    }

    /// Properties of a table with no entries yet.
    pub fn empty(compression: Compression) -> TableProperties {
        TableProperties {
            smallest_key: Vec::new(),
            largest_key: Vec::new(),
            num_entries: 0,
            num_deletions: 0,
            smallest_seq: 0,
            largest_seq: 0,
            raw_key_bytes: 0,
            raw_value_bytes: 0,
            data_bytes: 0,
            index_bytes: 0,
            filter_bytes: 0,
            num_data_blocks: 0,
            compression,
            format_version: crate::sst::format::TABLE_FORMAT_VERSION,
            file_size: 0,
        }
    }
}

/// Appends one record the way [`TableProperties::encode`] does (for tests of skipping).
#[cfg(test)]
fn put_record(out: &mut Vec<u8>, t: u8, v: &[u8]) {
    out.push(t);
    put_varint(out, v.len() as u64);
    out.extend_from_slice(v);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> TableProperties {
        TableProperties {
            smallest_key: b"a".to_vec(),
            largest_key: b"zz".to_vec(),
            num_entries: 3,
            num_deletions: 1,
            smallest_seq: 5,
            largest_seq: 9,
            raw_key_bytes: 30,
            raw_value_bytes: 40,
            data_bytes: 100,
            index_bytes: 20,
            filter_bytes: 14,
            num_data_blocks: 1,
            compression: Compression::Zstd,
            format_version: 1,
            file_size: 0,
        }
    }

    #[test]
    fn golden_prefix_and_round_trip() {
        let p = sample();
        let b = p.encode();
        assert_eq!(b[..9], [1, 1, b'a', 2, 2, b'z', b'z', 3, 8]);
        assert_eq!(b[9..17], 3u64.to_le_bytes());
        assert_eq!(b[b.len() - 9..], [13, 1, 2, 14, 4, 1, 0, 0, 0]);
        assert_eq!(TableProperties::decode(&b), Ok(p));
    }

    #[test]
    fn unknown_tags_are_skipped_missing_tags_are_errors() {
        let mut b = sample().encode();
        put_record(&mut b, 200, b"future");
        assert_eq!(TableProperties::decode(&b), Ok(sample()));
        let mut short = Vec::new();
        put_record(&mut short, tag::SMALLEST_KEY, b"a");
        assert!(TableProperties::decode(&short)
            .unwrap_err()
            .contains("missing"));
        let mut bad = sample().encode();
        put_record(&mut bad, tag::NUM_ENTRIES, b"xyz");
        assert!(TableProperties::decode(&bad).is_err());
        assert!(TableProperties::decode(&b[..b.len() - 3]).is_err());
    }
}
