//! Garbage collection's state across a restart: the garbage counted in each value-log file,
//! the collected files not yet deleted, the damaged files kept, and how far the file being
//! collected was read. Saved in the side file `VLOGGC` (checksummed, replaced atomically)
//! after each collection round and at close; read at open. Every field is a hint the
//! collector re-checks (liveness is read from the LSM), so a missing, stale or damaged file
//! only means garbage is counted again. Format: `docs/value-log.md`, "Collection state".

use crate::coding::{crc, put_u32, put_varint, Decoder};
use crate::error::{Error, Result};
use std::path::Path;

/// Name of the state file in the value-log directory.
pub(crate) const STATE_FILE: &str = "VLOGGC";
/// The format's version, after the checksum.
const VERSION: u32 = 1;

/// What collection keeps across a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SavedGc {
    /// Garbage bytes counted per file number.
    pub garbage: Vec<(u64, u64)>,
    /// Collected files whose rewrites are durable: deleted at the next open, when no reader
    /// from before it can follow their pointers.
    pub retired: Vec<u64>,
    /// Files with a damaged record, never collected.
    pub kept: Vec<u64>,
    /// The file being collected and the offset its records were handled up to.
    pub cursor: Option<(u64, u64)>,
}

impl SavedGc {
    /// `crc32c u32 | version u32 | garbage | retired | kept | cursor`, each list a varint
    /// count then its varints, the cursor a byte (0 or 1) then file and offset.
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::new();
        put_u32(&mut body, VERSION);
        put_varint(&mut body, self.garbage.len() as u64);
        for &(file, bytes) in &self.garbage {
            put_varint(&mut body, file);
            put_varint(&mut body, bytes);
        }
        for list in [&self.retired, &self.kept] {
            put_varint(&mut body, list.len() as u64);
            for &file in list {
                put_varint(&mut body, file);
            }
        }
        match self.cursor {
            Some((file, offset)) => {
                body.push(1);
                put_varint(&mut body, file);
                put_varint(&mut body, offset);
            }
            None => body.push(0),
        }
        let mut out = Vec::with_capacity(body.len() + 4);
        put_u32(&mut out, crc(&body));
        out.extend_from_slice(&body);
        out
    }

    /// Decodes the bytes of the state file at `path` (for errors).
    pub fn decode(bytes: &[u8], path: &Path) -> Result<SavedGc> {
        let bad = |offset: usize, what: &str| Error::corruption(path, offset as u64, what);
        let mut d = Decoder::new(bytes);
        let sum = d
            .u32()
            .ok_or_else(|| bad(0, "value-log state shorter than its header"))?;
        if crc(d.remaining()) != sum {
            return Err(bad(0, "value-log state checksum mismatch"));
        }
        match d.u32() {
            Some(VERSION) => {}
            _ => return Err(bad(4, "unknown value-log state version")),
        }
        let truncated = |d: &Decoder<'_>| bad(d.position(), "value-log state truncated");
        let mut saved = SavedGc::default();
        let n = d.varint().ok_or_else(|| truncated(&d))?;
        for _ in 0..n {
            let (Some(file), Some(bytes)) = (d.varint(), d.varint()) else {
                return Err(truncated(&d));
            };
            saved.garbage.push((file, bytes));
        }
        for list in [&mut saved.retired, &mut saved.kept] {
            let n = d.varint().ok_or_else(|| truncated(&d))?;
            for _ in 0..n {
                list.push(d.varint().ok_or_else(|| truncated(&d))?);
            }
        }
        saved.cursor = match d.u8() {
            Some(0) => None,
            Some(1) => match (d.varint(), d.varint()) {
                (Some(file), Some(offset)) => Some((file, offset)),
                _ => return Err(truncated(&d)),
            },
            _ => return Err(truncated(&d)),
        };
        if !d.is_empty() {
            return Err(bad(d.position(), "bytes after the value-log state"));
        }
        Ok(saved)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SavedGc {
        SavedGc {
            garbage: vec![(3, 4096), (7, 1 << 40)],
            retired: vec![2],
            kept: vec![5, 6],
            cursor: Some((3, 300)),
        }
    }

    #[test]
    fn round_trips_and_pins_its_layout() {
        let s = sample();
        let path = Path::new("/v/VLOGGC");
        assert_eq!(SavedGc::decode(&s.encode(), path).unwrap(), s);
        let empty = SavedGc::default().encode();
        // crc, version 1, three empty lists, no cursor.
        assert_eq!(&empty[4..], &[1, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(SavedGc::decode(&empty, path).unwrap(), SavedGc::default());
        // Every field, byte for byte (docs/value-log.md, "Collection state").
        let bytes = s.encode();
        #[rustfmt::skip]
        let body = [
            1, 0, 0, 0,                                  // version
            2, 3, 0x80, 0x20, 7, 0x80, 0x80, 0x80, 0x80, 0x80, 0x20, // garbage: (3, 4096), (7, 2^40)
            1, 2,                                        // retired: [2]
            2, 5, 6,                                     // kept: [5, 6]
            1, 3, 0xAC, 0x02,                            // cursor: file 3, offset 300
        ];
        assert_eq!(&bytes[4..], &body);
        assert_eq!(&bytes[..4], &crc(&body).to_le_bytes());
    }

    #[test]
    fn damage_is_reported_naming_the_file() {
        let path = Path::new("/v/VLOGGC");
        let mut bytes = sample().encode();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let err = SavedGc::decode(&bytes, path).unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("VLOGGC"),
            "{err}"
        );
        let bytes = sample().encode();
        assert!(SavedGc::decode(&bytes[..bytes.len() - 2], path).is_err());
        assert!(SavedGc::decode(&bytes[..3], path).is_err());
    }
}
