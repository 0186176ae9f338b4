//! The block: a run of sorted entries with prefix-compressed keys, plus a restart array.
//!
//! Layout of a block's (decompressed) contents:
//! ```text
//! entry*     shared: varint | unshared: varint | value_len: varint | key[shared..] | value
//! restarts   offset: u32 LE, one per restart point, strictly increasing, the first is 0
//! count      num_restarts: u32 LE (>= 1)
//! ```
//! INVARIANTS: keys are internal keys in strictly increasing [`compare_internal`] order; an
//! entry at a restart offset has `shared == 0`; every `restart_interval`-th entry starts a
//! restart. [`Block::new`] checks the restart array; entries are checked as they are decoded,
//! and a malformed one leaves [`BlockIter`] invalid with [`BlockIter::corruption`] set: it never
//! yields bytes it could not decode and never panics.

use crate::coding::{get_u32, put_u32, put_varint, Decoder};
use crate::key::compare_internal;
use std::cmp::Ordering;
use std::sync::Arc;

/// Accumulates entries into a block's contents.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    entries: usize,
}

impl BlockBuilder {
    /// A builder that starts a restart point every `restart_interval` (>= 1) entries.
    pub fn new(restart_interval: usize) -> Self {
        BlockBuilder {
            buf: Vec::new(),
            restarts: vec![0],
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            entries: 0,
        }
    }

    /// Appends an entry; `key` must sort after every key added before.
    pub fn add(&mut self, key: &[u8], value: &[u8]) {
        debug_assert!(
            self.entries == 0 || compare_internal(&self.last_key, key) == Ordering::Less,
            "block keys must be strictly increasing"
        );
        let mut shared = 0;
        if self.since_restart == self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
        } else {
            shared = common_prefix(&self.last_key, key);
        }
        put_varint(&mut self.buf, shared as u64);
        put_varint(&mut self.buf, (key.len() - shared) as u64);
        put_varint(&mut self.buf, value.len() as u64);
        self.buf.extend_from_slice(&key[shared..]);
        self.buf.extend_from_slice(value);
        self.last_key.truncate(shared);
        self.last_key.extend_from_slice(&key[shared..]);
        self.since_restart += 1;
        self.entries += 1;
    }

    /// Size of the contents if finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// True when no entry was added since the last reset.
    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    /// The last key added.
    pub fn last_key(&self) -> &[u8] {
        &self.last_key
    }

    /// Appends the restart array and returns the contents; the builder is reset.
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for &r in &self.restarts {
            put_u32(&mut out, r);
        }
        put_u32(&mut out, self.restarts.len() as u32);
        self.restarts = vec![0];
        self.since_restart = 0;
        self.last_key.clear();
        self.entries = 0;
        out
    }
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Decoded (decompressed) block contents with a checked restart array; shared via `Arc`.
#[derive(Debug)]
pub struct Block {
    data: Vec<u8>,
    /// Where the restart array starts (= end of the entries).
    restarts_at: usize,
    num_restarts: usize,
}

impl Block {
    /// Checks the restart array of `data`; `Err` says what is wrong.
    pub fn new(data: Vec<u8>) -> Result<Block, String> {
        let n = data
            .len()
            .checked_sub(4)
            .and_then(|at| get_u32(&data[at..]))
            .ok_or("block shorter than its restart count")? as usize;
        let restarts_at = n
            .checked_add(1)
            .and_then(|m| m.checked_mul(4))
            .and_then(|len| data.len().checked_sub(len))
            .ok_or_else(|| format!("restart count {n} does not fit in the block"))?;
        let block = Block {
            data,
            restarts_at,
            num_restarts: n,
        };
        block.check_restarts()?;
        Ok(block)
    }

    fn check_restarts(&self) -> Result<(), String> {
        if self.num_restarts == 0 {
            return Err("block has no restart points".into());
        }
        let mut prev = None;
        for i in 0..self.num_restarts {
            let r = self.restart(i);
            let in_range = r < self.restarts_at || (r == 0 && self.restarts_at == 0);
            let ordered = match prev {
                None => r == 0,
                Some(p) => r > p,
            };
            if !in_range || !ordered {
                return Err(format!("bad restart point {i} (offset {r})"));
            }
            prev = Some(r);
        }
        Ok(())
    }

    fn restart(&self, i: usize) -> usize {
        let at = self.restarts_at + 4 * i;
        get_u32(&self.data[at..]).unwrap_or(u32::MAX) as usize
    }

    /// Bytes of decoded contents (what the block cache charges).
    pub fn size(&self) -> usize {
        self.data.len()
    }

    /// A cursor over this block.
    pub fn iter(self: &Arc<Self>) -> BlockIter {
        BlockIter::new(Arc::clone(self))
    }
}

/// The header of one entry: `(shared, unshared, value_len, header_len)`.
fn decode_header(src: &[u8]) -> Option<(usize, usize, usize, usize)> {
    let mut d = Decoder::new(src);
    let shared = usize::try_from(d.varint()?).ok()?;
    let unshared = usize::try_from(d.varint()?).ok()?;
    let vlen = usize::try_from(d.varint()?).ok()?;
    let body = unshared.checked_add(vlen)?;
    let end = d.position().checked_add(body)?;
    (end <= src.len()).then_some((shared, unshared, vlen, d.position()))
}

/// A bidirectional cursor over a [`Block`] in [`compare_internal`] order.
#[derive(Debug)]
pub struct BlockIter {
    block: Arc<Block>,
    /// Offset of the current entry; `restarts_at` when not positioned.
    current: usize,
    /// Offset just past the current entry.
    next_at: usize,
    /// Index of the restart point at or before `current`.
    restart_idx: usize,
    key: Vec<u8>,
    value: (usize, usize),
    corruption: Option<String>,
}

impl BlockIter {
    fn new(block: Arc<Block>) -> Self {
        let end = block.restarts_at;
        BlockIter {
            block,
            current: end,
            next_at: end,
            restart_idx: 0,
            key: Vec::new(),
            value: (0, 0),
            corruption: None,
        }
    }

    /// True when positioned at an entry (never after corruption was found).
    pub fn valid(&self) -> bool {
        self.corruption.is_none() && self.current < self.block.restarts_at
    }

    /// What was malformed, once a malformed entry was met.
    pub fn corruption(&self) -> Option<&str> {
        self.corruption.as_deref()
    }

    /// The current key. Requires `valid()`.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current value. Requires `valid()`.
    pub fn value(&self) -> &[u8] {
        &self.block.data[self.value.0..self.value.1]
    }

    fn invalidate(&mut self) {
        self.current = self.block.restarts_at;
        self.next_at = self.current;
    }

    fn fail(&mut self, what: String) {
        self.corruption.get_or_insert(what);
        self.invalidate();
    }

    fn seek_to_restart(&mut self, i: usize) {
        self.restart_idx = i;
        self.key.clear();
        self.next_at = self.block.restart(i);
        self.current = self.next_at;
    }

    /// Decodes the entry at `next_at`; false at the end of the entries or on corruption.
    fn parse_next(&mut self) -> bool {
        if self.corruption.is_some() {
            return false;
        }
        let end = self.block.restarts_at;
        self.current = self.next_at;
        if self.current >= end {
            self.invalidate();
            return false;
        }
        let src = &self.block.data[self.current..end];
        let Some((shared, unshared, vlen, hlen)) = decode_header(src) else {
            self.fail(format!(
                "malformed block entry at block offset {}",
                self.current
            ));
            return false;
        };
        if shared > self.key.len() {
            self.fail(format!(
                "entry at block offset {} shares too much",
                self.current
            ));
            return false;
        }
        self.key.truncate(shared);
        self.key.extend_from_slice(&src[hlen..hlen + unshared]);
        let vstart = self.current + hlen + unshared;
        self.value = (vstart, vstart + vlen);
        self.next_at = vstart + vlen;
        while self.restart_idx + 1 < self.block.num_restarts
            && self.block.restart(self.restart_idx + 1) <= self.current
        {
            self.restart_idx += 1;
        }
        true
    }

    /// The full key stored at restart point `i` (`shared` must be 0 there).
    fn restart_key(&self, i: usize) -> Result<&[u8], String> {
        let at = self.block.restart(i);
        let src = &self.block.data[at..self.block.restarts_at];
        match decode_header(src) {
            Some((0, unshared, _, hlen)) => Ok(&src[hlen..hlen + unshared]),
            _ => Err(format!(
                "bad entry at restart point {i} (block offset {at})"
            )),
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        self.seek_to_restart(0);
        self.parse_next();
    }

    /// Positions at the last entry.
    pub fn seek_to_last(&mut self) {
        self.seek_to_restart(self.block.num_restarts - 1);
        while self.parse_next() && self.next_at < self.block.restarts_at {}
    }

    /// Positions at the first entry with key `>= target`.
    pub fn seek(&mut self, target: &[u8]) {
        let (mut lo, mut hi) = (0, self.block.num_restarts - 1);
        // INVARIANT: the key at restart `lo` is < target, or lo == 0.
        while lo < hi {
            let mid = lo + (hi - lo).div_ceil(2);
            match self.restart_key(mid) {
                Ok(k) if compare_internal(k, target) == Ordering::Less => lo = mid,
                Ok(_) => hi = mid - 1,
                Err(e) => return self.fail(e),
            }
        }
        self.seek_to_restart(lo);
        while self.parse_next() && compare_internal(&self.key, target) == Ordering::Less {}
    }

    /// Moves to the next entry. Requires `valid()`.
    pub fn next(&mut self) {
        debug_assert!(self.valid());
        self.parse_next();
    }

    /// Moves to the previous entry. Requires `valid()`.
    pub fn prev(&mut self) {
        debug_assert!(self.valid());
        let original = self.current;
        while self.block.restart(self.restart_idx) >= original {
            if self.restart_idx == 0 {
                return self.invalidate();
            }
            self.restart_idx -= 1;
        }
        self.seek_to_restart(self.restart_idx);
        while self.parse_next() && self.next_at < original {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};

    fn ikey(i: u32) -> Vec<u8> {
        internal_key(
            format!("key{i:05}").as_bytes(),
            u64::from(i) + 1,
            ValueKind::Value,
        )
    }

    fn build(n: u32, interval: usize) -> Arc<Block> {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&ikey(i * 2), format!("v{i}").as_bytes());
        }
        Arc::new(Block::new(b.finish()).unwrap())
    }

    #[test]
    fn tiny_block_golden_bytes() {
        let mut b = BlockBuilder::new(2);
        b.add(&internal_key(b"ab", 2, ValueKind::Value), b"1");
        b.add(&internal_key(b"ac", 1, ValueKind::Deletion), b"");
        b.add(&internal_key(b"b", 3, ValueKind::Value), b"zz");
        #[rustfmt::skip]
        let expected = [
            // entry 0 (restart): shared 0, unshared 10, value 1: "ab" ++ trailer(2, Value) ++ "1"
            0, 10, 1, b'a', b'b', 0x01, 0x02, 0, 0, 0, 0, 0, 0, b'1',
            // entry 1: shares "a", unshared 9, value 0: "c" ++ trailer(1, Deletion)
            1, 9, 0, b'c', 0x00, 0x01, 0, 0, 0, 0, 0, 0,
            // entry 2 (restart at 26): shared 0, unshared 9, value 2: "b" ++ trailer(3, Value) ++ "zz"
            0, 9, 2, b'b', 0x01, 0x03, 0, 0, 0, 0, 0, 0, b'z', b'z',
            0, 0, 0, 0, 26, 0, 0, 0, // restart offsets
            2, 0, 0, 0,              // restart count
        ];
        assert_eq!(b.finish(), expected);
    }

    #[test]
    fn round_trip_forward_backward_and_seek() {
        for interval in [1, 3, 16] {
            let block = build(100, interval);
            let mut it = block.iter();
            it.seek_to_first();
            for i in 0..100 {
                assert!(it.valid());
                assert_eq!(it.key(), ikey(i * 2));
                assert_eq!(it.value(), format!("v{i}").as_bytes());
                it.next();
            }
            assert!(!it.valid());
            it.seek_to_last();
            for i in (0..100).rev() {
                assert_eq!(it.key(), ikey(i * 2));
                it.prev();
            }
            assert!(!it.valid());
            for t in 0..201 {
                it.seek(&ikey(t));
                if t >= 199 {
                    assert!(!it.valid(), "seek {t}");
                } else {
                    assert_eq!(it.key(), ikey(t.div_ceil(2) * 2), "seek {t}");
                }
            }
            assert!(it.corruption().is_none());
        }
    }

    #[test]
    fn empty_block_is_valid_and_empty() {
        let block = Arc::new(Block::new(BlockBuilder::new(4).finish()).unwrap());
        let mut it = block.iter();
        it.seek_to_first();
        assert!(!it.valid());
        it.seek_to_last();
        assert!(!it.valid());
        it.seek(b"x");
        assert!(!it.valid());
        assert!(it.corruption().is_none());
    }

    #[test]
    fn bad_restart_arrays_are_rejected() {
        assert!(Block::new(vec![1, 2]).is_err());
        assert!(Block::new(vec![0, 0, 0, 0]).is_err());
        assert!(Block::new(vec![0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(Block::new(vec![5, 0, 0, 0, 1, 0, 0, 0]).is_err());
    }

    #[test]
    fn every_byte_flip_never_panics() {
        let good = {
            let mut b = BlockBuilder::new(3);
            for i in 0..10 {
                b.add(&ikey(i), b"value");
            }
            b.finish()
        };
        for at in 0..good.len() {
            for bit in [0x01, 0x10, 0x80] {
                let mut data = good.clone();
                data[at] ^= bit;
                let Ok(block) = Block::new(data) else {
                    continue;
                };
                let block = Arc::new(block);
                let mut it = block.iter();
                it.seek_to_first();
                while it.valid() {
                    it.next();
                }
                it.seek_to_last();
                while it.valid() {
                    it.prev();
                }
                it.seek(&ikey(5));
            }
        }
    }
}
