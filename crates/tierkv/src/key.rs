//! Internal keys: a user key plus the sequence number and kind of the write that made it.
//!
//! Encoding (used in memtables, SST blocks and indexes): `user_key ++ trailer`, where `trailer`
//! is 8 little-endian bytes holding `(sequence << 8) | kind`. Order: user keys ascending
//! (bytewise), then trailers descending, so the newest version of a key sorts first.

use crate::coding::get_u64;
use std::cmp::Ordering;

/// A write's position in history. Sequence 0 is never assigned to a write.
pub type SeqNo = u64;

/// The largest sequence number that fits in a trailer (56 bits).
pub const MAX_SEQNO: SeqNo = (1 << 56) - 1;

/// Bytes of the trailer appended to every user key.
pub const TRAILER_LEN: usize = 8;

/// What a write did to its key. Persisted: the values must not change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted.
    Deletion = 0,
    /// A value was stored.
    Value = 1,
}

impl ValueKind {
    /// Decodes a persisted kind byte.
    pub fn from_u8(b: u8) -> Option<ValueKind> {
        match b {
            0 => Some(ValueKind::Deletion),
            1 => Some(ValueKind::Value),
            _ => None,
        }
    }
}

/// The kind used when building a lookup key: seeking to `(user_key, seq, LOOKUP_KIND)` lands on
/// the newest entry of `user_key` with a sequence `<= seq`, since higher kinds sort first.
pub const LOOKUP_KIND: ValueKind = ValueKind::Value;

/// Packs a sequence number and kind into a trailer value.
pub fn pack_trailer(seq: SeqNo, kind: ValueKind) -> u64 {
    debug_assert!(seq <= MAX_SEQNO);
    (seq << 8) | kind as u64
}

/// Appends the internal key `(user_key, seq, kind)` to `dst`.
pub fn append_internal_key(dst: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    dst.extend_from_slice(user_key);
    dst.extend_from_slice(&pack_trailer(seq, kind).to_le_bytes());
}

/// Builds the internal key `(user_key, seq, kind)`.
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut v = Vec::with_capacity(user_key.len() + TRAILER_LEN);
    append_internal_key(&mut v, user_key, seq, kind);
    v
}

/// A decoded view of an internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The user's key.
    pub user_key: &'a [u8],
    /// Sequence number of the write.
    pub seq: SeqNo,
    /// Kind of the write.
    pub kind: ValueKind,
}

/// Decodes an internal key; `None` if it is too short or its kind byte is unknown.
pub fn parse_internal_key(ikey: &[u8]) -> Option<ParsedKey<'_>> {
    let split = ikey.len().checked_sub(TRAILER_LEN)?;
    let trailer = get_u64(&ikey[split..])?;
    Some(ParsedKey {
        user_key: &ikey[..split],
        seq: trailer >> 8,
        kind: ValueKind::from_u8(trailer as u8)?,
    })
}

/// The user-key part of an internal key (the whole slice if it is shorter than a trailer).
pub fn user_key(ikey: &[u8]) -> &[u8] {
    &ikey[..ikey.len().saturating_sub(TRAILER_LEN)]
}

fn trailer(ikey: &[u8]) -> u64 {
    ikey.len()
        .checked_sub(TRAILER_LEN)
        .and_then(|s| get_u64(&ikey[s..]))
        .unwrap_or(0)
}

/// Total order over internal keys: user key ascending, then trailer descending.
pub fn compare_internal(a: &[u8], b: &[u8]) -> Ordering {
    user_key(a)
        .cmp(user_key(b))
        .then_with(|| trailer(b).cmp(&trailer(a)))
}

/// An owned internal key ordered by [`compare_internal`] (for tests' ordered maps).
#[cfg(test)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InternalKey(pub Vec<u8>);

#[cfg(test)]
impl Ord for InternalKey {
    fn cmp(&self, other: &Self) -> Ordering {
        compare_internal(&self.0, &other.0)
    }
}

#[cfg(test)]
impl PartialOrd for InternalKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_version_sorts_first() {
        let old = internal_key(b"k", 5, ValueKind::Value);
        let new = internal_key(b"k", 9, ValueKind::Deletion);
        assert_eq!(compare_internal(&new, &old), Ordering::Less);
        let other = internal_key(b"ka", 1, ValueKind::Value);
        assert_eq!(compare_internal(&old, &other), Ordering::Less);
    }

    #[test]
    fn trailer_golden_bytes() {
        let k = internal_key(b"a", 0x0102, ValueKind::Value);
        assert_eq!(k, [b'a', 0x01, 0x02, 0x01, 0, 0, 0, 0, 0]);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"a"[..], 0x0102, ValueKind::Value)
        );
    }

    #[test]
    fn bad_kind_is_rejected() {
        let mut k = internal_key(b"a", 1, ValueKind::Value);
        k[1] = 7;
        assert!(parse_internal_key(&k).is_none());
        assert!(parse_internal_key(b"short").is_none());
    }
}
