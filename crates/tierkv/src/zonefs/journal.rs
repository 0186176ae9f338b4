//! The metadata journal's format: records, commits and the scan that recovers them. Pure
//! encoding and decoding; [`super::meta`] writes commits to the metadata zones.
//!
//! A metadata zone holds commits back to back, each starting on an LBA boundary:
//!
//! ```text
//! commit:  magic u32 "ZFJ1" | generation u64 | body_len u32 | crc32c u32 of (generation,
//!          body_len, body) | body: records | zero padding to the next LBA
//! record:  tag u8 | fields (varints, length-prefixed names)
//! ```
//!
//! The first commit of a zone is a snapshot (tag 1) of every synced file; it fixes the zone's
//! generation, which every later commit of the zone repeats. Recovery takes the zone whose
//! snapshot is valid and has the highest generation, and applies its commits in order up to the
//! first one that does not check.

use crate::coding::{self, Decoder};
use crate::zoned::ZoneId;
use std::collections::BTreeMap;

/// First bytes of a commit ("ZFJ1" little-endian).
const MAGIC: u32 = u32::from_le_bytes(*b"ZFJ1");
/// Bytes of a commit header.
const HEADER: usize = 4 + 8 + 4 + 4;

/// Record tags. Persisted: do not change.
const TAG_SNAPSHOT: u8 = 1;
const TAG_CREATE: u8 = 2;
const TAG_EXTENTS: u8 = 3;
const TAG_DELETE: u8 = 4;
const TAG_RENAME: u8 = 5;

/// A run of a file's bytes in one zone. It starts on an LBA boundary and occupies
/// `len` rounded up to whole LBAs (the last one zero-padded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Extent {
    /// The zone.
    pub zone: ZoneId,
    /// Byte offset of the extent in the zone.
    pub offset: u64,
    /// Bytes of the file it holds.
    pub len: u64,
}

impl Extent {
    /// Bytes of the zone the extent occupies (saturating: a damaged journal's length must
    /// fail the extent checks, not overflow).
    pub fn occupied(&self, lba: u64) -> u64 {
        self.len.div_ceil(lba).saturating_mul(lba)
    }
}

/// A file as the journal knows it: its synced size and extents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileRecord {
    /// Stable identity, kept across renames.
    pub id: u64,
    /// Name in the directory.
    pub name: String,
    /// Synced length in bytes.
    pub size: u64,
    /// Where the synced bytes are, in file order.
    pub extents: Vec<Extent>,
}

/// One change to the namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Record {
    /// Every synced file, and the next file id to hand out.
    Snapshot {
        /// Next file id.
        next_id: u64,
        /// The files.
        files: Vec<FileRecord>,
    },
    /// A new, empty file.
    Create {
        /// Its id.
        id: u64,
        /// Its name.
        name: String,
    },
    /// A file's synced size and extents (the whole list, replacing the previous one).
    Extents {
        /// The file.
        id: u64,
        /// Its synced size.
        size: u64,
        /// Its extents.
        extents: Vec<Extent>,
    },
    /// A removed file.
    Delete {
        /// The file.
        id: u64,
    },
    /// A file's new name (a file already under that name was deleted by an earlier record).
    Rename {
        /// The file.
        id: u64,
        /// The new name.
        name: String,
    },
}

fn put_extents(b: &mut Vec<u8>, extents: &[Extent]) {
    coding::put_varint(b, extents.len() as u64);
    for e in extents {
        coding::put_varint(b, u64::from(e.zone));
        coding::put_varint(b, e.offset);
        coding::put_varint(b, e.len);
    }
}

fn get_extents(d: &mut Decoder<'_>) -> Option<Vec<Extent>> {
    let n = d.varint()?;
    // NB: bounded by the bytes left, so a damaged count cannot allocate without limit.
    let mut out = Vec::with_capacity((n as usize).min(d.remaining().len()));
    for _ in 0..n {
        out.push(Extent {
            zone: u32::try_from(d.varint()?).ok()?,
            offset: d.varint()?,
            len: d.varint()?,
        });
    }
    Some(out)
}

fn get_name(d: &mut Decoder<'_>) -> Option<String> {
    String::from_utf8(d.length_prefixed()?.to_vec()).ok()
}

impl Record {
    fn encode(&self, b: &mut Vec<u8>) {
        match self {
            Record::Snapshot { next_id, files } => {
                b.push(TAG_SNAPSHOT);
                coding::put_varint(b, *next_id);
                coding::put_varint(b, files.len() as u64);
                for f in files {
                    coding::put_varint(b, f.id);
                    coding::put_length_prefixed(b, f.name.as_bytes());
                    coding::put_varint(b, f.size);
                    put_extents(b, &f.extents);
                }
            }
            Record::Create { id, name } | Record::Rename { id, name } => {
                let tag = if matches!(self, Record::Create { .. }) {
                    TAG_CREATE
                } else {
                    TAG_RENAME
                };
                b.push(tag);
                coding::put_varint(b, *id);
                coding::put_length_prefixed(b, name.as_bytes());
            }
            Record::Extents { id, size, extents } => {
                b.push(TAG_EXTENTS);
                coding::put_varint(b, *id);
                coding::put_varint(b, *size);
                put_extents(b, extents);
            }
            Record::Delete { id } => {
                b.push(TAG_DELETE);
                coding::put_varint(b, *id);
            }
        }
    }

    fn decode(d: &mut Decoder<'_>) -> Option<Record> {
        Some(match d.u8()? {
            TAG_SNAPSHOT => {
                let next_id = d.varint()?;
                let n = d.varint()?;
                let mut files = Vec::with_capacity((n as usize).min(d.remaining().len()));
                for _ in 0..n {
                    files.push(FileRecord {
                        id: d.varint()?,
                        name: get_name(d)?,
                        size: d.varint()?,
                        extents: get_extents(d)?,
                    });
                }
                Record::Snapshot { next_id, files }
            }
            TAG_CREATE => Record::Create {
                id: d.varint()?,
                name: get_name(d)?,
            },
            TAG_EXTENTS => Record::Extents {
                id: d.varint()?,
                size: d.varint()?,
                extents: get_extents(d)?,
            },
            TAG_DELETE => Record::Delete { id: d.varint()? },
            TAG_RENAME => Record::Rename {
                id: d.varint()?,
                name: get_name(d)?,
            },
            _ => return None,
        })
    }
}

/// Encodes one commit of `records` in generation `generation`, zero-padded to whole LBAs.
pub(crate) fn encode_commit(generation: u64, records: &[Record], lba: u64) -> Vec<u8> {
    let mut body = Vec::new();
    for r in records {
        r.encode(&mut body);
    }
    let mut out = Vec::with_capacity(HEADER + body.len());
    coding::put_u32(&mut out, MAGIC);
    coding::put_u64(&mut out, generation);
    coding::put_u32(&mut out, body.len() as u32);
    let crc = coding::crc2(&out[4..16], &body);
    coding::put_u32(&mut out, crc);
    out.extend_from_slice(&body);
    let padded = (out.len() as u64).div_ceil(lba) * lba;
    out.resize(padded as usize, 0);
    out
}

/// The commits of one metadata zone that check, in order: the generation and every record.
/// `None` when the zone does not start with a valid snapshot.
pub(crate) fn scan_zone(bytes: &[u8], lba: u64) -> Option<(u64, Vec<Record>)> {
    let mut at = 0usize;
    let mut generation = None;
    let mut records = Vec::new();
    while let Some((commit_gen, body, len)) = parse_commit(&bytes[at..]) {
        let mut d = Decoder::new(body);
        let mut commit = Vec::new();
        while !d.is_empty() {
            match Record::decode(&mut d) {
                Some(r) => commit.push(r),
                None => break,
            }
        }
        if !d.is_empty() {
            // NB: the checksum held, so a record this build cannot decode is a newer format.
            break;
        }
        match generation {
            None if matches!(commit.first(), Some(Record::Snapshot { .. })) => {
                generation = Some(commit_gen)
            }
            None => return None,
            Some(g) if g != commit_gen => break,
            Some(_) => {}
        }
        records.extend(commit);
        at += (len as u64).div_ceil(lba) as usize * lba as usize;
        if at >= bytes.len() {
            break;
        }
    }
    generation.map(|g| (g, records))
}

/// The commit at the start of `bytes`: generation, body and encoded length (unpadded).
fn parse_commit(bytes: &[u8]) -> Option<(u64, &[u8], usize)> {
    if coding::get_u32(bytes)? != MAGIC {
        return None;
    }
    let generation = coding::get_u64(&bytes[4..])?;
    let body_len = coding::get_u32(bytes.get(12..)?)? as usize;
    let crc = coding::get_u32(bytes.get(16..)?)?;
    let body = bytes.get(HEADER..HEADER.checked_add(body_len)?)?;
    if crc != coding::crc2(&bytes[4..16], body) {
        return None;
    }
    Some((generation, body, HEADER + body_len))
}

/// The namespace the records describe: files by id, and the next id.
#[derive(Debug, Default)]
pub(crate) struct Replayed {
    /// Files by id.
    pub files: BTreeMap<u64, FileRecord>,
    /// The next file id to hand out.
    pub next_id: u64,
}

impl Replayed {
    /// Applies records in order. A record naming an unknown file (one deleted while a writer
    /// still had it open) changes nothing.
    pub fn apply(&mut self, records: impl IntoIterator<Item = Record>) {
        for r in records {
            match r {
                Record::Snapshot { next_id, files } => {
                    self.next_id = next_id;
                    self.files = files.into_iter().map(|f| (f.id, f)).collect();
                }
                Record::Create { id, name } => {
                    self.next_id = self.next_id.max(id + 1);
                    self.files.insert(
                        id,
                        FileRecord {
                            id,
                            name,
                            size: 0,
                            extents: Vec::new(),
                        },
                    );
                }
                Record::Extents { id, size, extents } => {
                    if let Some(f) = self.files.get_mut(&id) {
                        f.size = size;
                        f.extents = extents;
                    }
                }
                Record::Delete { id } => {
                    self.files.remove(&id);
                }
                Record::Rename { id, name } => {
                    if let Some(f) = self.files.get_mut(&id) {
                        f.name = name;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<Record> {
        vec![
            Record::Snapshot {
                next_id: 7,
                files: vec![FileRecord {
                    id: 3,
                    name: "000003.sst".into(),
                    size: 5000,
                    extents: vec![
                        Extent {
                            zone: 2,
                            offset: 0,
                            len: 4096,
                        },
                        Extent {
                            zone: 3,
                            offset: 8192,
                            len: 904,
                        },
                    ],
                }],
            },
            Record::Create {
                id: 7,
                name: "x".into(),
            },
            Record::Rename {
                id: 7,
                name: "y".into(),
            },
            Record::Delete { id: 3 },
        ]
    }

    #[test]
    fn commits_round_trip_and_stop_at_a_torn_one() {
        let lba = 512;
        let mut zone = encode_commit(4, &sample(), lba);
        assert_eq!(zone.len() as u64 % lba, 0);
        let second = encode_commit(
            4,
            &[Record::Extents {
                id: 7,
                size: 10,
                extents: vec![],
            }],
            lba,
        );
        let mut torn = second.clone();
        torn[HEADER] ^= 1;
        zone.extend_from_slice(&second);
        zone.extend_from_slice(&torn);
        zone.resize(zone.len() + 4096, 0);
        let (generation, records) = scan_zone(&zone, lba).unwrap();
        assert_eq!(generation, 4);
        assert_eq!(records.len(), 5);
        assert_eq!(&records[..4], &sample()[..]);
        let mut r = Replayed::default();
        r.apply(records);
        assert_eq!(r.next_id, 8);
        assert_eq!(r.files.len(), 1);
        assert_eq!(r.files[&7].name, "y");
        assert_eq!(r.files[&7].size, 10);
    }

    #[test]
    fn a_zone_without_a_snapshot_first_is_not_a_generation() {
        let zone = encode_commit(1, &[Record::Delete { id: 1 }], 512);
        assert!(scan_zone(&zone, 512).is_none());
        assert!(scan_zone(&[0u8; 1024], 512).is_none());
    }

    #[test]
    fn golden_commit_bytes() {
        let c = encode_commit(1, &[Record::Delete { id: 5 }], 512);
        assert_eq!(&c[..4], b"ZFJ1");
        assert_eq!(&c[4..12], &1u64.to_le_bytes());
        assert_eq!(&c[12..16], &2u32.to_le_bytes());
        assert_eq!(&c[20..22], &[TAG_DELETE, 5]);
        assert!(c[22..].iter().all(|&b| b == 0));
    }
}
