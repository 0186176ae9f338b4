//! Pure encode/decode of the table's framing: block handles, the per-block trailer, block
//! compression and the fixed-size footer. No I/O happens here.
//!
//! INVARIANT: every stored block is followed by a [`BLOCK_TRAILER_LEN`]-byte trailer
//! `compression: u8 | crc32c: u32 LE`, where the CRC covers the stored (possibly compressed)
//! bytes followed by the compression byte. A [`BlockHandle`] names the stored bytes only; the
//! trailer sits right after them.

use crate::coding::{crc2, get_u32, get_u64, put_u32, put_u64, put_varint, Decoder};
use std::fmt;
use std::str::FromStr;

/// The table format version this code writes and reads.
pub const TABLE_FORMAT_VERSION: u32 = 1;

/// The magic number at the very end of every table: the bytes `tierkvst` read as a LE u64.
pub const TABLE_MAGIC: u64 = u64::from_le_bytes(*b"tierkvst");

/// Bytes after each block: compression type (1) + CRC32C (4).
pub const BLOCK_TRAILER_LEN: usize = 5;

/// Bytes of the footer: three fixed-width handles (48), version (4), CRC (4), magic (8).
pub const FOOTER_LEN: usize = 64;

/// Compressed blocks never decompress to more than this; larger blocks are stored raw.
pub const MAX_COMPRESSED_BLOCK_RAW_LEN: usize = 64 << 20;

/// zstd level used for data blocks.
const ZSTD_LEVEL: i32 = 3;

/// How a block's bytes are compressed. Persisted in every block trailer and in the
/// properties: the values must not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[repr(u8)]
pub enum Compression {
    /// Stored as is.
    None = 0,
    /// LZ4 block format (`lz4_flex`), prefixed by the raw length as a varint.
    Lz4 = 1,
    /// A zstd frame, prefixed by the raw length as a varint.
    Zstd = 2,
}

impl Compression {
    /// Decodes a persisted compression byte.
    pub fn from_u8(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// The lowercase name used in options files and tools.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

impl fmt::Display for Compression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Compression {
    type Err = crate::error::Error;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "none" => Ok(Compression::None),
            "lz4" => Ok(Compression::Lz4),
            "zstd" => Ok(Compression::Zstd),
            _ => Err(crate::error::Error::invalid(format!(
                "unknown compression '{s}' (expected none, lz4 or zstd)"
            ))),
        }
    }
}

/// Where a block's stored bytes lie in the file (trailer excluded).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlockHandle {
    /// Offset of the first stored byte.
    pub offset: u64,
    /// Number of stored bytes, not counting the trailer.
    pub size: u64,
}

impl BlockHandle {
    /// Appends the handle as two varints (the form used in index entries).
    pub fn encode_varint(&self, dst: &mut Vec<u8>) {
        put_varint(dst, self.offset);
        put_varint(dst, self.size);
    }

    /// Decodes a varint handle that must fill `src` exactly.
    pub fn decode_varint(src: &[u8]) -> Option<BlockHandle> {
        let mut d = Decoder::new(src);
        let h = BlockHandle {
            offset: d.varint()?,
            size: d.varint()?,
        };
        d.is_empty().then_some(h)
    }

    /// Offset just past the block's trailer, `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.size)?
            .checked_add(BLOCK_TRAILER_LEN as u64)
    }
}

/// Builds the trailer for `stored` bytes written with compression `c`.
pub fn block_trailer(stored: &[u8], c: Compression) -> [u8; BLOCK_TRAILER_LEN] {
    let ty = [c as u8];
    let mut t = [0u8; BLOCK_TRAILER_LEN];
    t[0] = ty[0];
    t[1..].copy_from_slice(&crc2(stored, &ty).to_le_bytes());
    t
}

/// Checks a block read with its trailer (`raw = stored ++ trailer`) and returns the stored
/// bytes and their compression. `Err` is the failed check.
pub fn check_block(raw: &[u8]) -> Result<(&[u8], Compression), String> {
    let split = raw
        .len()
        .checked_sub(BLOCK_TRAILER_LEN)
        .ok_or("block shorter than its trailer")?;
    let (stored, trailer) = raw.split_at(split);
    let expected = get_u32(&trailer[1..]).ok_or("short block trailer")?;
    let actual = crc2(stored, &trailer[..1]);
    if expected != actual {
        return Err(format!(
            "block checksum mismatch (stored {expected:#010x}, computed {actual:#010x})"
        ));
    }
    let c = Compression::from_u8(trailer[0])
        .ok_or_else(|| format!("unknown block compression type {}", trailer[0]))?;
    Ok((stored, c))
}

/// Compresses `raw` with `c`; `None` if `c` is `None`, the block is too large to compress, or
/// the result does not save at least 1/8 of the bytes (the block is then stored raw).
pub fn compress(raw: &[u8], c: Compression) -> Option<Vec<u8>> {
    if raw.len() > MAX_COMPRESSED_BLOCK_RAW_LEN {
        return None;
    }
    let mut out = Vec::with_capacity(raw.len() / 2 + 16);
    put_varint(&mut out, raw.len() as u64);
    match c {
        Compression::None => return None,
        Compression::Lz4 => out.extend_from_slice(&lz4_flex::block::compress(raw)),
        Compression::Zstd => out.extend_from_slice(&zstd::bulk::compress(raw, ZSTD_LEVEL).ok()?),
    }
    (out.len() <= raw.len() - raw.len() / 8).then_some(out)
}

/// The most bytes `stored_len` bytes compressed with `c` can decode to. The output buffer is
/// sized from the block's raw-length prefix before decoding, so a prefix above this bound is
/// rejected rather than trusted: a few damaged bytes must not allocate megabytes.
fn max_raw_len(c: Compression, stored_len: usize) -> u64 {
    let n = stored_len as u64;
    match c {
        Compression::None => n,
        // Each LZ4 length-extension byte adds at most 255 bytes of output; a sequence's token
        // and offset add at most 19 (15 literals, a match of 4 + 15).
        Compression::Lz4 => n.saturating_mul(255).saturating_add(64),
        // A zstd block header (3 bytes) and one byte make an RLE block of up to 128 KiB.
        Compression::Zstd => (n / 3 + 1).saturating_mul(128 << 10),
    }
}

/// Undoes [`compress`]; `Err` says what is wrong with the stored bytes.
pub fn decompress(stored: &[u8], c: Compression) -> Result<Vec<u8>, String> {
    if c == Compression::None {
        return Ok(stored.to_vec());
    }
    let mut d = Decoder::new(stored);
    let raw_len = d
        .varint()
        .ok_or("bad raw-length prefix of a compressed block")?;
    let payload = d.remaining();
    if raw_len > MAX_COMPRESSED_BLOCK_RAW_LEN as u64 || raw_len > max_raw_len(c, payload.len()) {
        return Err(format!(
            "compressed block of {} bytes claims {raw_len} raw bytes",
            payload.len()
        ));
    }
    let raw_len = raw_len as usize;
    let out = match c {
        Compression::None => unreachable!("handled above"),
        Compression::Lz4 => {
            let mut out = vec![0u8; raw_len];
            let n = lz4_flex::block::decompress_into(payload, &mut out)
                .map_err(|e| format!("lz4 decompression failed: {e}"))?;
            out.truncate(n);
            out
        }
        Compression::Zstd => zstd::bulk::decompress(payload, raw_len)
            .map_err(|e| format!("zstd decompression failed: {e}"))?,
    };
    if out.len() != raw_len {
        return Err(format!(
            "block decompressed to {} bytes, expected {raw_len}",
            out.len()
        ));
    }
    Ok(out)
}

/// The fixed-size record at the end of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The bloom filter block; `size == 0` (and `offset == 0`) when the table has none.
    pub filter: BlockHandle,
    /// The index block.
    pub index: BlockHandle,
    /// The properties block.
    pub properties: BlockHandle,
    /// The table format version (`TABLE_FORMAT_VERSION`).
    pub version: u32,
}

impl Footer {
    /// Encodes the footer to exactly `FOOTER_LEN` bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut b = Vec::with_capacity(FOOTER_LEN);
        for h in [self.filter, self.index, self.properties] {
            put_u64(&mut b, h.offset);
            put_u64(&mut b, h.size);
        }
        put_u32(&mut b, self.version);
        let crc = crate::coding::crc(&b);
        put_u32(&mut b, crc);
        put_u64(&mut b, TABLE_MAGIC);
        debug_assert_eq!(b.len(), FOOTER_LEN);
        b
    }

    /// Decodes a footer; checks magic, then version, then CRC. `Err` is the failed check.
    pub fn decode(src: &[u8]) -> Result<Footer, String> {
        if src.len() != FOOTER_LEN {
            return Err(format!(
                "footer is {} bytes, expected {FOOTER_LEN}",
                src.len()
            ));
        }
        let magic = get_u64(&src[56..]).ok_or("short footer")?;
        if magic != TABLE_MAGIC {
            return Err(format!("bad table magic {magic:#018x}"));
        }
        let version = get_u32(&src[48..]).ok_or("short footer")?;
        if version != TABLE_FORMAT_VERSION {
            return Err(format!("unknown table format version {version}"));
        }
        let stored_crc = get_u32(&src[52..]).ok_or("short footer")?;
        if stored_crc != crate::coding::crc(&src[..52]) {
            return Err("footer checksum mismatch".into());
        }
        let h = |at: usize| BlockHandle {
            offset: get_u64(&src[at..]).unwrap_or(0),
            size: get_u64(&src[at + 8..]).unwrap_or(0),
        };
        Ok(Footer {
            filter: h(0),
            index: h(16),
            properties: h(32),
            version,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn footer_golden_bytes() {
        let f = Footer {
            filter: BlockHandle {
                offset: 0x10,
                size: 0x20,
            },
            index: BlockHandle {
                offset: 0x0135,
                size: 7,
            },
            properties: BlockHandle {
                offset: 0x0141,
                size: 0x99,
            },
            version: 1,
        };
        let b = f.encode();
        #[rustfmt::skip]
        let expected_prefix: [u8; 52] = [
            0x10, 0, 0, 0, 0, 0, 0, 0,   0x20, 0, 0, 0, 0, 0, 0, 0,
            0x35, 0x01, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0,
            0x41, 0x01, 0, 0, 0, 0, 0, 0, 0x99, 0, 0, 0, 0, 0, 0, 0,
            1, 0, 0, 0,
        ];
        assert_eq!(b[..52], expected_prefix);
        assert_eq!(
            b[52..56],
            crate::coding::crc(&expected_prefix).to_le_bytes()
        );
        assert_eq!(&b[56..], b"tierkvst");
        assert_eq!(Footer::decode(&b), Ok(f));
    }

    #[test]
    fn footer_rejects_bad_magic_version_and_crc() {
        let good = Footer {
            filter: BlockHandle::default(),
            index: BlockHandle { offset: 1, size: 2 },
            properties: BlockHandle { offset: 8, size: 3 },
            version: TABLE_FORMAT_VERSION,
        }
        .encode();
        let mut b = good.clone();
        b[63] ^= 1;
        assert!(Footer::decode(&b).unwrap_err().contains("magic"));
        let mut b = good.clone();
        b[48] = 2;
        assert!(Footer::decode(&b).unwrap_err().contains("version 2"));
        let mut b = good;
        b[3] ^= 0x40;
        assert!(Footer::decode(&b).unwrap_err().contains("checksum"));
    }

    #[test]
    fn trailer_golden_bytes_and_check() {
        let t = block_trailer(b"abc", Compression::None);
        assert_eq!(t[0], 0);
        assert_eq!(t[1..], crate::coding::crc(b"abc\x00").to_le_bytes());
        let mut raw = b"abc".to_vec();
        raw.extend_from_slice(&t);
        assert_eq!(check_block(&raw), Ok((&b"abc"[..], Compression::None)));
        raw[1] ^= 4;
        assert!(check_block(&raw).unwrap_err().contains("checksum"));
        assert!(check_block(b"abc").is_err());
    }

    #[test]
    fn compression_round_trips_and_skips_incompressible() {
        let raw: Vec<u8> = (0..4000u32).flat_map(|i| (i % 50).to_le_bytes()).collect();
        for c in [Compression::Lz4, Compression::Zstd] {
            let stored = compress(&raw, c).expect("compressible");
            assert!(stored.len() < raw.len() / 2);
            assert_eq!(decompress(&stored, c).unwrap(), raw);
            assert!(decompress(&stored[..stored.len() / 2], c).is_err());
        }
        let noise: Vec<u8> = (0..1000u64)
            .map(|i| (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8)
            .collect();
        assert_eq!(compress(&noise, Compression::Lz4), None);
        assert_eq!(compress(&raw, Compression::None), None);
    }

    #[test]
    fn raw_length_beyond_what_the_codec_can_produce_is_rejected_before_allocating() {
        for c in [Compression::Lz4, Compression::Zstd] {
            let mut stored = Vec::new();
            put_varint(&mut stored, MAX_COMPRESSED_BLOCK_RAW_LEN as u64);
            stored.extend_from_slice(&[0x1f, 0, 0, 0]);
            let err = decompress(&stored, c).unwrap_err();
            assert!(err.contains("claims"), "{c}: {err}");
        }
        // The bound holds for real blocks at the codecs' best ratio (all zeros).
        let raw = vec![0u8; 1 << 20];
        for c in [Compression::Lz4, Compression::Zstd] {
            let stored = compress(&raw, c).expect("compressible");
            assert_eq!(decompress(&stored, c).unwrap(), raw, "{c}");
        }
    }

    #[test]
    fn compression_names_parse_and_print() {
        for c in [Compression::None, Compression::Lz4, Compression::Zstd] {
            assert_eq!(c.to_string().parse::<Compression>().unwrap(), c);
            assert_eq!(Compression::from_u8(c as u8), Some(c));
        }
        assert!("snappy".parse::<Compression>().is_err());
        assert_eq!(Compression::from_u8(3), None);
    }
}
