//! Version edits: the records of the MANIFEST.
//!
//! A MANIFEST is a log (see `wal::log`) whose records are encoded [`VersionEdit`]s. An edit is a
//! sequence of fields `tag (varint) | body length (varint) | body`. A tag with bit 0x40 set is
//! optional: a reader that does not know it skips it; an unknown tag without that bit is
//! corruption (written by a newer, incompatible version). Tags are persisted: do not change.

use crate::coding::{put_length_prefixed, put_varint, Decoder};
use crate::key::SeqNo;

const TAG_DB_ID: u64 = 1;
const TAG_LOG_NUMBER: u64 = 2;
const TAG_NEXT_FILE: u64 = 3;
const TAG_LAST_SEQ: u64 = 4;
const TAG_NEW_FILE: u64 = 5;
const TAG_DELETED_FILE: u64 = 6;
const TAG_TIERS: u64 = 7;
const TAG_FORMAT_VERSION: u64 = 8;
/// A new file whose L0 order differs from its largest sequence (a table merged within L0): a
/// new-file body followed by that sequence. Required, not optional: a reader that ordered the
/// table by its largest sequence could answer a read with an older version.
const TAG_NEW_MERGED_L0_FILE: u64 = 9;
const TAG_OPTIONAL_BIT: u64 = 0x40;

/// A table file as the MANIFEST records it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewFile {
    /// LSM level.
    pub level: usize,
    /// File number (names `NNNNNN.sst`).
    pub number: u64,
    /// Name of the tier the file is on.
    pub tier: String,
    /// Size in bytes.
    pub size: u64,
    /// Smallest internal key.
    pub smallest: Vec<u8>,
    /// Largest internal key.
    pub largest: Vec<u8>,
    /// Smallest sequence number in the file.
    pub smallest_seq: SeqNo,
    /// Largest sequence number in the file.
    pub largest_seq: SeqNo,
    /// The sequence L0 orders the file by (`FileMeta::l0_seq`); its largest sequence unless
    /// it was merged within L0.
    pub l0_seq: SeqNo,
    /// Entries in the file.
    pub num_entries: u64,
    /// Tombstones in the file.
    pub num_deletions: u64,
}

/// A change to the LSM shape, applied atomically.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionEdit {
    /// Identity of the database (written in the first edit of each MANIFEST).
    pub db_id: Option<String>,
    /// WAL files numbered below this are no longer needed.
    pub log_number: Option<u64>,
    /// The next unused file number.
    pub next_file_number: Option<u64>,
    /// The last sequence number whose data is in the tables or WALs.
    pub last_sequence: Option<SeqNo>,
    /// Tables added.
    pub new_files: Vec<NewFile>,
    /// Tables removed: `(level, number)`.
    pub deleted_files: Vec<(usize, u64)>,
    /// Names of the tiers of the database, fastest first.
    pub tiers: Option<Vec<String>>,
    /// The database-wide format version (in the first edit of each MANIFEST).
    pub format_version: Option<u64>,
}

/// The database-wide format version this code writes and reads.
pub const DB_FORMAT_VERSION: u64 = 1;

fn field(dst: &mut Vec<u8>, tag: u64, body: &[u8]) {
    put_varint(dst, tag);
    put_length_prefixed(dst, body);
}

fn varint_field(dst: &mut Vec<u8>, tag: u64, v: u64) {
    let mut body = Vec::new();
    put_varint(&mut body, v);
    field(dst, tag, &body);
}

impl VersionEdit {
    /// Encodes the edit.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        if let Some(id) = &self.db_id {
            field(&mut out, TAG_DB_ID, id.as_bytes());
        }
        if let Some(tiers) = &self.tiers {
            let mut body = Vec::new();
            put_varint(&mut body, tiers.len() as u64);
            for t in tiers {
                put_length_prefixed(&mut body, t.as_bytes());
            }
            field(&mut out, TAG_TIERS, &body);
        }
        for (tag, v) in [
            (TAG_FORMAT_VERSION, self.format_version),
            (TAG_LOG_NUMBER, self.log_number),
            (TAG_NEXT_FILE, self.next_file_number),
            (TAG_LAST_SEQ, self.last_sequence),
        ] {
            if let Some(v) = v {
                varint_field(&mut out, tag, v);
            }
        }
        for &(level, number) in &self.deleted_files {
            let mut body = Vec::new();
            put_varint(&mut body, level as u64);
            put_varint(&mut body, number);
            field(&mut out, TAG_DELETED_FILE, &body);
        }
        for f in &self.new_files {
            let mut body = encode_new_file(f);
            if f.l0_seq == f.largest_seq {
                field(&mut out, TAG_NEW_FILE, &body);
            } else {
                put_varint(&mut body, f.l0_seq);
                field(&mut out, TAG_NEW_MERGED_L0_FILE, &body);
            }
        }
        out
    }

    /// Decodes an edit; `Err(what)` describes the first malformed field.
    pub fn decode(src: &[u8]) -> Result<VersionEdit, String> {
        let mut edit = VersionEdit::default();
        let mut d = Decoder::new(src);
        while !d.is_empty() {
            let tag = d.varint().ok_or("truncated field tag")?;
            let body = d
                .length_prefixed()
                .ok_or_else(|| format!("truncated body of field {tag}"))?;
            edit.decode_field(tag, body)?;
        }
        Ok(edit)
    }

    fn decode_field(&mut self, tag: u64, body: &[u8]) -> Result<(), String> {
        let bad = || format!("malformed field {tag}");
        let mut d = Decoder::new(body);
        match tag {
            TAG_DB_ID => {
                self.db_id = Some(String::from_utf8(body.to_vec()).map_err(|_| bad())?);
            }
            TAG_FORMAT_VERSION => self.format_version = Some(d.varint().ok_or_else(bad)?),
            TAG_LOG_NUMBER => self.log_number = Some(d.varint().ok_or_else(bad)?),
            TAG_NEXT_FILE => self.next_file_number = Some(d.varint().ok_or_else(bad)?),
            TAG_LAST_SEQ => self.last_sequence = Some(d.varint().ok_or_else(bad)?),
            TAG_DELETED_FILE => {
                let level = d.varint().ok_or_else(bad)? as usize;
                self.deleted_files
                    .push((level, d.varint().ok_or_else(bad)?));
            }
            TAG_NEW_FILE => self
                .new_files
                .push(decode_new_file(&mut d).ok_or_else(bad)?),
            TAG_NEW_MERGED_L0_FILE => {
                let mut f = decode_new_file(&mut d).ok_or_else(bad)?;
                f.l0_seq = d.varint().ok_or_else(bad)?;
                self.new_files.push(f);
            }
            TAG_TIERS => self.tiers = Some(decode_tiers(&mut d).ok_or_else(bad)?),
            t if t & TAG_OPTIONAL_BIT != 0 => {}
            t => return Err(format!("unknown required field tag {t} (newer format?)")),
        }
        Ok(())
    }
}

fn encode_new_file(f: &NewFile) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(&mut b, f.level as u64);
    put_varint(&mut b, f.number);
    put_length_prefixed(&mut b, f.tier.as_bytes());
    put_varint(&mut b, f.size);
    put_length_prefixed(&mut b, &f.smallest);
    put_length_prefixed(&mut b, &f.largest);
    for v in [
        f.smallest_seq,
        f.largest_seq,
        f.num_entries,
        f.num_deletions,
    ] {
        put_varint(&mut b, v);
    }
    b
}

/// Decodes a new-file body; its L0 order is its largest sequence until a field says otherwise.
fn decode_new_file(d: &mut Decoder<'_>) -> Option<NewFile> {
    let level = usize::try_from(d.varint()?).ok()?;
    let number = d.varint()?;
    let tier = String::from_utf8(d.length_prefixed()?.to_vec()).ok()?;
    let size = d.varint()?;
    let smallest = d.length_prefixed()?.to_vec();
    let largest = d.length_prefixed()?.to_vec();
    let [smallest_seq, largest_seq, num_entries, num_deletions] =
        [d.varint()?, d.varint()?, d.varint()?, d.varint()?];
    Some(NewFile {
        level,
        number,
        tier,
        size,
        smallest,
        largest,
        smallest_seq,
        largest_seq,
        l0_seq: largest_seq,
        num_entries,
        num_deletions,
    })
}

fn decode_tiers(d: &mut Decoder<'_>) -> Option<Vec<String>> {
    let n = d.varint()?;
    (0..n.min(64))
        .map(|_| String::from_utf8(d.length_prefixed()?.to_vec()).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> VersionEdit {
        VersionEdit {
            db_id: Some("abc".into()),
            log_number: Some(7),
            next_file_number: Some(9),
            last_sequence: Some(1000),
            new_files: vec![NewFile {
                level: 2,
                number: 8,
                tier: "capacity".into(),
                size: 4096,
                smallest: b"a\x01\0\0\0\0\0\0\0".to_vec(),
                largest: b"z\x01\0\0\0\0\0\0\0".to_vec(),
                smallest_seq: 1,
                largest_seq: 1000,
                l0_seq: 1000,
                num_entries: 10,
                num_deletions: 1,
            }],
            deleted_files: vec![(1, 3)],
            tiers: Some(vec!["fast".into(), "capacity".into()]),
            format_version: Some(DB_FORMAT_VERSION),
        }
    }

    #[test]
    fn round_trip() {
        let e = sample();
        assert_eq!(VersionEdit::decode(&e.encode()).unwrap(), e);
    }

    #[test]
    fn a_table_merged_within_l0_keeps_its_l0_order_in_a_field_old_readers_refuse() {
        let mut e = sample();
        e.new_files[0].level = 0;
        e.new_files[0].l0_seq = 400;
        let bytes = e.encode();
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), e);
        assert!(bytes.contains(&(TAG_NEW_MERGED_L0_FILE as u8)));
        const { assert!(TAG_NEW_MERGED_L0_FILE & TAG_OPTIONAL_BIT == 0) };
        // An ordinary table is written as before, byte for byte.
        let plain = sample().encode();
        let mut legacy = Vec::new();
        field(
            &mut legacy,
            TAG_NEW_FILE,
            &encode_new_file(&sample().new_files[0]),
        );
        assert!(plain.ends_with(&legacy));
    }

    #[test]
    fn golden_bytes_of_a_small_edit() {
        let e = VersionEdit {
            log_number: Some(5),
            deleted_files: vec![(1, 3)],
            ..Default::default()
        };
        assert_eq!(e.encode(), [2, 1, 5, 6, 2, 1, 3]);
    }

    #[test]
    fn optional_unknown_tag_is_skipped_required_is_error() {
        let mut bytes = sample().encode();
        bytes.extend_from_slice(&[0x41, 2, 9, 9]);
        assert_eq!(VersionEdit::decode(&bytes).unwrap(), sample());
        let mut bytes = sample().encode();
        bytes.extend_from_slice(&[0x21, 0]);
        assert!(VersionEdit::decode(&bytes).unwrap_err().contains("unknown"));
    }

    #[test]
    fn truncation_never_panics() {
        let bytes = sample().encode();
        for cut in 0..bytes.len() {
            let _ = VersionEdit::decode(&bytes[..cut]);
        }
    }
}
