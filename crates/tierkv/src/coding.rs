//! Little-endian fixed-width integers and LEB128 varints: the only integer encodings on disk.
//!
//! Encoders append to a `Vec<u8>`; decoders read from a `&[u8]` cursor and return `None` when the
//! input is short or malformed, so callers turn that into a `Corruption` naming the file.

/// Appends `v` as 4 little-endian bytes.
pub fn put_u32(dst: &mut Vec<u8>, v: u32) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as 8 little-endian bytes.
pub fn put_u64(dst: &mut Vec<u8>, v: u64) {
    dst.extend_from_slice(&v.to_le_bytes());
}

/// Appends `v` as a LEB128 varint (1..=10 bytes).
pub fn put_varint(dst: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        dst.push((v as u8) | 0x80);
        v >>= 7;
    }
    dst.push(v as u8);
}

/// Appends a varint length followed by the bytes.
pub fn put_length_prefixed(dst: &mut Vec<u8>, bytes: &[u8]) {
    put_varint(dst, bytes.len() as u64);
    dst.extend_from_slice(bytes);
}

/// Reads a little-endian u32 at the start of `src`.
pub fn get_u32(src: &[u8]) -> Option<u32> {
    Some(u32::from_le_bytes(src.get(..4)?.try_into().ok()?))
}

/// Reads a little-endian u64 at the start of `src`.
pub fn get_u64(src: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(src.get(..8)?.try_into().ok()?))
}

/// A forward-only reader over a byte slice.
#[derive(Debug, Clone)]
pub struct Decoder<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Decoder<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Decoder { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// True when every byte was consumed.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    /// The bytes not yet consumed.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Option<u8> {
        let b = *self.buf.get(self.pos)?;
        self.pos += 1;
        Some(b)
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Option<u32> {
        let v = get_u32(self.remaining())?;
        self.pos += 4;
        Some(v)
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Option<u64> {
        let v = get_u64(self.remaining())?;
        self.pos += 8;
        Some(v)
    }

    /// Reads a LEB128 varint of at most 10 bytes.
    pub fn varint(&mut self) -> Option<u64> {
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.u8()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Some(v);
            }
        }
        None
    }

    /// Reads `n` raw bytes.
    pub fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let end = self.pos.checked_add(n)?;
        let s = self.buf.get(self.pos..end)?;
        self.pos = end;
        Some(s)
    }

    /// Reads a varint length and that many bytes.
    pub fn length_prefixed(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.varint()?).ok()?;
        self.bytes(n)
    }
}

/// CRC32C (Castagnoli) of `data`: the checksum of every on-disk unit.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// CRC32C of the concatenation of `a` and `b`, without copying.
pub fn crc2(a: &[u8], b: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(a), b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_round_trips_boundaries() {
        for v in [0, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut d = Decoder::new(&b);
            assert_eq!(d.varint(), Some(v));
            assert!(d.is_empty());
        }
    }

    #[test]
    fn varint_golden_bytes() {
        let mut b = Vec::new();
        put_varint(&mut b, 300);
        assert_eq!(b, [0xac, 0x02]);
    }

    #[test]
    fn truncated_input_is_none_not_panic() {
        let mut d = Decoder::new(&[0x80, 0x80]);
        assert_eq!(d.varint(), None);
        let mut d = Decoder::new(&[1, 2, 3]);
        assert_eq!(d.u32(), None);
        let mut d = Decoder::new(&[5, 1]);
        assert_eq!(d.length_prefixed(), None);
    }
}
