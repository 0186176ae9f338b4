//! Write batches: a group of puts and deletes applied atomically, in the WAL and at recovery.
//!
//! Encoding (the payload of one WAL record; format version 1):
//! `first_seq u64 LE | count u32 LE | entries`, each entry `kind u8 | key (varint len + bytes)`
//! followed, for `kind = 1` (value), by `value (varint len + bytes)`. Entry `i` gets sequence
//! number `first_seq + i`.

use crate::coding::{put_length_prefixed, put_varint, Decoder};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::options::{MAX_BATCH_BYTES, MAX_KEY_LEN, MAX_VALUE_LEN};

const HEADER_LEN: usize = 12;

/// The longest varint a length can take.
const MAX_VARINT_LEN: usize = 10;

/// An ordered group of writes applied all-or-nothing.
#[derive(Clone, PartialEq, Eq)]
pub struct WriteBatch {
    rep: Vec<u8>,
    count: u32,
    /// Key and value bytes of the operations (what the user asked to store).
    user_bytes: u64,
}

impl Default for WriteBatch {
    fn default() -> Self {
        WriteBatch {
            rep: vec![0; HEADER_LEN],
            count: 0,
            user_bytes: 0,
        }
    }
}

impl std::fmt::Debug for WriteBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WriteBatch({} ops, {} bytes)",
            self.count,
            self.rep.len()
        )
    }
}

/// One operation of a batch, as decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BatchOp<'a> {
    /// Store `value` under `key`.
    Put(&'a [u8], &'a [u8]),
    /// Remove `key`.
    Delete(&'a [u8]),
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty batch with room for `ops` operations of `payload` key and value bytes in
    /// all, so filling it reallocates nothing (a single put's batch is one allocation).
    pub fn with_capacity(ops: usize, payload: usize) -> Self {
        let mut rep = Vec::with_capacity(HEADER_LEN + ops * (1 + 2 * MAX_VARINT_LEN) + payload);
        rep.resize(HEADER_LEN, 0);
        WriteBatch {
            rep,
            count: 0,
            user_bytes: 0,
        }
    }

    /// Adds a put.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) {
        self.put_concat(key.as_ref(), &[value.as_ref()]);
    }

    /// Adds a put whose value is `value_parts` concatenated (written straight into the
    /// batch, with no copy of the whole value made first).
    pub(crate) fn put_concat(&mut self, key: &[u8], value_parts: &[&[u8]]) {
        let value_len: usize = value_parts.iter().map(|p| p.len()).sum();
        self.rep.push(ValueKind::Value as u8);
        put_length_prefixed(&mut self.rep, key);
        put_varint(&mut self.rep, value_len as u64);
        for part in value_parts {
            self.rep.extend_from_slice(part);
        }
        self.count += 1;
        self.user_bytes += (key.len() + value_len) as u64;
    }

    /// Adds a delete.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) {
        self.rep.push(ValueKind::Deletion as u8);
        put_length_prefixed(&mut self.rep, key.as_ref());
        self.count += 1;
        self.user_bytes += key.as_ref().len() as u64;
    }

    /// Number of operations.
    pub fn len(&self) -> usize {
        self.count as usize
    }

    /// True if the batch holds no operation.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Removes every operation.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// Key and value bytes of the operations.
    pub fn user_bytes(&self) -> u64 {
        self.user_bytes
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        self.rep.len()
    }

    /// The operations in order.
    pub fn iter(&self) -> BatchIter<'_> {
        BatchIter {
            dec: Decoder::new(&self.rep[HEADER_LEN..]),
            left: self.count,
        }
    }

    /// Checks the documented size limits.
    pub fn validate(&self) -> Result<()> {
        if self.rep.len() > MAX_BATCH_BYTES {
            return Err(Error::invalid(format!(
                "write batch of {} bytes exceeds the limit of {MAX_BATCH_BYTES} bytes",
                self.rep.len()
            )));
        }
        for op in self.iter() {
            let (key, value) = match op? {
                BatchOp::Put(k, v) => (k, v),
                BatchOp::Delete(k) => (k, &[][..]),
            };
            check_key_value(key, value)?;
        }
        Ok(())
    }

    /// Stamps the first sequence number and returns the WAL payload.
    pub(crate) fn encode_with_seq(&mut self, first_seq: SeqNo) -> &[u8] {
        self.rep[..8].copy_from_slice(&first_seq.to_le_bytes());
        self.rep[8..12].copy_from_slice(&self.count.to_le_bytes());
        &self.rep
    }

    /// The encoding as last stamped by `encode_with_seq` (the WAL payload).
    pub(crate) fn encoded(&self) -> &[u8] {
        &self.rep
    }

    /// Decodes a WAL record payload (as written by the engine: first sequence, count, entries)
    /// into `(first_seq, batch)`; `None` if it is malformed or its count does not match its
    /// entries. Meant for tools that read WAL files.
    pub fn decode(payload: &[u8]) -> Option<(SeqNo, WriteBatch)> {
        let mut d = Decoder::new(payload);
        let seq = d.u64()?;
        let count = d.u32()?;
        let mut batch = WriteBatch {
            rep: payload.to_vec(),
            count,
            user_bytes: 0,
        };
        // Every entry must decode and the count must match exactly.
        let mut it = batch.iter();
        let mut user_bytes = 0;
        for op in it.by_ref() {
            user_bytes += match op.ok()? {
                BatchOp::Put(k, v) => k.len() + v.len(),
                BatchOp::Delete(k) => k.len(),
            } as u64;
        }
        if !it.dec.is_empty() {
            return None;
        }
        batch.user_bytes = user_bytes;
        Some((seq, batch))
    }
}

/// Rejects keys and values over the documented limits.
pub(crate) fn check_key_value(key: &[u8], value: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_LEN} bytes",
            key.len()
        )));
    }
    if value.len() > MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {} bytes exceeds the limit of {MAX_VALUE_LEN} bytes",
            value.len()
        )));
    }
    Ok(())
}

/// Iterator over a batch's operations.
pub struct BatchIter<'a> {
    dec: Decoder<'a>,
    left: u32,
}

impl<'a> Iterator for BatchIter<'a> {
    type Item = Result<BatchOp<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        Some(self.decode_one().ok_or_else(|| {
            self.left = 0;
            Error::invalid("malformed write batch")
        }))
    }
}

impl<'a> BatchIter<'a> {
    fn decode_one(&mut self) -> Option<BatchOp<'a>> {
        let kind = ValueKind::from_u8(self.dec.u8()?)?;
        let key = self.dec.length_prefixed()?;
        match kind {
            ValueKind::Value => Some(BatchOp::Put(key, self.dec.length_prefixed()?)),
            ValueKind::Deletion => Some(BatchOp::Delete(key)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let mut b = WriteBatch::new();
        b.put(b"a", b"1");
        b.delete(b"b");
        b.put(b"", b"");
        let payload = b.encode_with_seq(42).to_vec();
        let (seq, d) = WriteBatch::decode(&payload).unwrap();
        assert_eq!(seq, 42);
        let ops: Vec<_> = d.iter().map(|o| o.unwrap()).collect();
        assert_eq!(
            ops,
            vec![
                BatchOp::Put(b"a", b"1"),
                BatchOp::Delete(b"b"),
                BatchOp::Put(b"", b"")
            ]
        );
    }

    #[test]
    fn a_presized_batch_and_a_concatenated_value_encode_as_the_plain_ones() {
        let mut plain = WriteBatch::new();
        plain.put(b"k1", b"\x01value");
        plain.delete(b"k2");
        let mut sized = WriteBatch::with_capacity(2, 16);
        let capacity = sized.rep.capacity();
        sized.put_concat(b"k1", &[b"\x01", b"val", b"ue"]);
        sized.delete(b"k2");
        assert_eq!(sized, plain);
        assert_eq!(sized.user_bytes(), plain.user_bytes());
        assert_eq!(sized.rep.capacity(), capacity, "filling it reallocated");
    }

    #[test]
    fn golden_bytes() {
        let mut b = WriteBatch::new();
        b.put(b"k", b"v");
        assert_eq!(
            b.encode_with_seq(7),
            [7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, b'k', 1, b'v']
        );
    }

    #[test]
    fn truncated_payload_is_rejected() {
        let mut b = WriteBatch::new();
        b.put(b"key", b"value");
        let payload = b.encode_with_seq(1).to_vec();
        for cut in 0..payload.len() {
            assert!(WriteBatch::decode(&payload[..cut]).is_none(), "cut {cut}");
        }
    }

    #[test]
    fn oversized_key_is_invalid() {
        let mut b = WriteBatch::new();
        b.put(vec![0u8; MAX_KEY_LEN + 1], b"v");
        assert!(matches!(b.validate(), Err(Error::InvalidArgument(_))));
    }
}
