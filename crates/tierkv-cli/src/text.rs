//! Bytes <-> terminal text: how keys and values are typed, printed and read back.
//!
//! Text mode prints valid UTF-8 as is, except control characters and backslashes, which become
//! `\xNN` (one per byte) and `\\`. [`unescape`] undoes exactly that, so `scan` output fed to
//! `load` restores the same bytes; a backslash not starting one of those escapes stays literal.
//! Hex mode is plain lowercase hex.
//!
//! INVARIANT: `escape` never emits a TAB or newline, so `key<TAB>value` lines stay unambiguous.

use crate::errors::Usage;
use tierkv::inspect::{parse_internal_key, ValueKind};

/// How keys and values are written and read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// Escaped text.
    Text,
    /// Lowercase hex.
    Hex,
}

/// Values longer than this are shortened in dumps unless asked otherwise.
pub const SHORT_VALUE: usize = 64;

impl Encoding {
    /// `Hex` when `hex` is set.
    pub fn new(hex: bool) -> Self {
        if hex {
            Encoding::Hex
        } else {
            Encoding::Text
        }
    }

    /// Bytes as this encoding prints them.
    pub fn show(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Text => escape(bytes),
            Encoding::Hex => to_hex(bytes),
        }
    }

    /// Bytes typed in this encoding (an argument or a field of a `load` line).
    pub fn parse(self, input: &[u8]) -> Result<Vec<u8>, Usage> {
        match self {
            Encoding::Text => Ok(unescape(input)),
            Encoding::Hex => from_hex(input),
        }
    }

    /// A value for a dump: the first [`SHORT_VALUE`] bytes and the full length, unless `full`.
    pub fn show_value(self, value: &[u8], full: bool) -> String {
        if full || value.len() <= SHORT_VALUE {
            return self.show(value);
        }
        format!(
            "{}... ({} bytes)",
            self.show(&value[..SHORT_VALUE]),
            value.len()
        )
    }

    /// An internal key as `user_key @seq kind`.
    pub fn show_internal_key(self, ikey: &[u8]) -> String {
        match parse_internal_key(ikey) {
            Some(p) => {
                let kind = match p.kind {
                    ValueKind::Value => "put",
                    ValueKind::Deletion => "del",
                };
                format!("{} @{} {kind}", self.show(p.user_key), p.seq)
            }
            None => format!("<malformed internal key {}>", to_hex(ikey)),
        }
    }
}

/// Escapes control characters, invalid UTF-8 and backslashes (see the module doc).
pub fn escape(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len());
    for chunk in bytes.utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c if c.is_control() => {
                    push_escaped(&mut out, c.encode_utf8(&mut [0; 4]).as_bytes())
                }
                c => out.push(c),
            }
        }
        push_escaped(&mut out, chunk.invalid());
    }
    out
}

fn push_escaped(out: &mut String, bytes: &[u8]) {
    for b in bytes {
        out.push_str(&format!("\\x{b:02x}"));
    }
}

/// Undoes [`escape`]: `\\` and `\xNN` are decoded, any other backslash is kept.
pub fn unescape(text: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(text.len());
    let mut i = 0;
    while i < text.len() {
        let (byte, used) = match &text[i..] {
            [b'\\', b'\\', ..] => (b'\\', 2),
            [b'\\', b'x', hi, lo, ..] => match (hex_digit(*hi), hex_digit(*lo)) {
                (Some(h), Some(l)) => (h << 4 | l, 4),
                _ => (b'\\', 1),
            },
            [b, ..] => (*b, 1),
            [] => unreachable!("i < len"),
        };
        out.push(byte);
        i += used;
    }
    out
}

/// Lowercase hex.
pub fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Parses hex (an optional `0x` prefix, an even number of digits).
pub fn from_hex(text: &[u8]) -> Result<Vec<u8>, Usage> {
    let digits = text.strip_prefix(b"0x").unwrap_or(text);
    let bad = || Usage(format!("not hex: {:?}", String::from_utf8_lossy(text)));
    if !digits.len().is_multiple_of(2) {
        return Err(bad());
    }
    digits
        .chunks(2)
        .map(|pair| match (hex_digit(pair[0]), hex_digit(pair[1])) {
            (Some(h), Some(l)) => Ok(h << 4 | l),
            _ => Err(bad()),
        })
        .collect()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

pub use tierkv::inspect::human_bytes;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escape_round_trips_every_byte_pattern() {
        let samples: [&[u8]; 6] = [
            b"plain",
            b"tab\there\nnl",
            b"back\\slash \\x41",
            b"\x00\xff\xfe",
            "h\u{e9}llo \u{85}".as_bytes(),
            b"",
        ];
        for s in samples {
            let e = escape(s);
            assert!(!e.contains('\t') && !e.contains('\n'), "{e}");
            assert_eq!(unescape(e.as_bytes()), s, "{e}");
        }
        assert_eq!(escape(b"a\x00b"), "a\\x00b");
        assert_eq!(escape("h\u{e9}".as_bytes()), "h\u{e9}");
    }

    #[test]
    fn stray_backslashes_stay_literal() {
        assert_eq!(unescape(br"C:\dir\x4"), br"C:\dir\x4");
        assert_eq!(unescape(br"\x41\\"), b"A\\");
    }

    #[test]
    fn hex_both_ways() {
        assert_eq!(to_hex(b"\x00\xab"), "00ab");
        assert_eq!(from_hex(b"0x00ab").unwrap(), b"\x00\xab");
        assert!(from_hex(b"abc").is_err());
        assert!(from_hex(b"zz").is_err());
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(3 << 19), "1.5 MiB");
        assert_eq!(human_bytes(u64::MAX), "unlimited");
    }
}
