//! SCAN: numeric cursors over a key-ordered store, and Redis's glob patterns for MATCH.
//!
//! Redis clients (`redis-cli --scan`, client libraries) treat a SCAN cursor as an unsigned
//! integer, but the engine resumes a scan from a key. So the server keeps a table from cursor
//! numbers to the last key a call returned: a call resumes just after that key, which gives
//! Redis's guarantee that a key present for the whole iteration is returned (here exactly
//! once, in key order). The table is bounded ([`MAX_CURSORS`], oldest forgotten first); a
//! forgotten or made-up cursor is an `ERR invalid cursor`, as is any cursor after a restart.

use rand::Rng;
use std::collections::{HashMap, VecDeque};

/// Cursors remembered at once, over all connections.
pub const MAX_CURSORS: usize = 65_536;

/// Cursor number to the key a scan resumes after.
#[derive(Debug, Default)]
pub struct Cursors {
    keys: HashMap<u64, Vec<u8>>,
    order: VecDeque<u64>,
}

impl Cursors {
    /// The key a scan from `cursor` starts at (inclusive): the empty key for 0, else the
    /// successor of the key the cursor was registered with. `None` if the cursor is unknown.
    pub fn start_key(&self, cursor: u64) -> Option<Vec<u8>> {
        if cursor == 0 {
            return Some(Vec::new());
        }
        let mut start = self.keys.get(&cursor)?.clone();
        // NB: the smallest key greater than `last` is `last` followed by a zero byte.
        start.push(0);
        Some(start)
    }

    /// A new cursor resuming after `last`; forgets the oldest when full.
    pub fn register(&mut self, last: Vec<u8>) -> u64 {
        let mut rng = rand::thread_rng();
        let cursor = loop {
            // NB: random, so a cursor from before a restart is unlikely to name another scan.
            let c: u64 = rng.gen_range(1..u64::MAX >> 1);
            if !self.keys.contains_key(&c) {
                break c;
            }
        };
        if self.order.len() >= MAX_CURSORS {
            if let Some(old) = self.order.pop_front() {
                self.keys.remove(&old);
            }
        }
        self.keys.insert(cursor, last);
        self.order.push_back(cursor);
        cursor
    }

    /// Cursors remembered now.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// True when none are remembered.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }
}

/// Redis's glob match: `*`, `?`, `[abc]`, `[^a-z]`, and `\` to quote the next byte.
pub fn glob_match(pattern: &[u8], text: &[u8]) -> bool {
    // Iterative with one backtrack point: the last `*` and the text position it matched up
    // to, so the time is O(pattern * text) at worst, never exponential.
    let (mut p, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        match pattern.get(p) {
            Some(b'*') => {
                star = Some((p, t));
                p += 1;
                continue;
            }
            Some(_) => {
                if let Some(next) = match_one(pattern, p, text[t]) {
                    p = next;
                    t += 1;
                    continue;
                }
            }
            None => {}
        }
        match star {
            Some((sp, st)) => {
                star = Some((sp, st + 1));
                p = sp + 1;
                t = st + 1;
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

/// Matches the single pattern element at `p` against byte `c`; the position after the
/// element if it matches.
fn match_one(pattern: &[u8], p: usize, c: u8) -> Option<usize> {
    match pattern[p] {
        b'?' => Some(p + 1),
        b'\\' if p + 1 < pattern.len() => (pattern[p + 1] == c).then_some(p + 2),
        b'[' => match_class(pattern, p + 1, c),
        other => (other == c).then_some(p + 1),
    }
}

/// Matches a `[...]` class whose body starts at `p`; an unclosed class runs to the end.
fn match_class(pattern: &[u8], mut p: usize, c: u8) -> Option<usize> {
    let negate = pattern.get(p) == Some(&b'^');
    if negate {
        p += 1;
    }
    let mut hit = false;
    while p < pattern.len() && pattern[p] != b']' {
        if pattern[p] == b'\\' && p + 1 < pattern.len() {
            hit |= pattern[p + 1] == c;
            p += 2;
        } else if p + 2 < pattern.len() && pattern[p + 1] == b'-' && pattern[p + 2] != b']' {
            let (lo, hi) = (
                pattern[p].min(pattern[p + 2]),
                pattern[p].max(pattern[p + 2]),
            );
            hit |= (lo..=hi).contains(&c);
            p += 3;
        } else {
            hit |= pattern[p] == c;
            p += 1;
        }
    }
    let end = (p + 1).min(pattern.len());
    (hit != negate).then_some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs() {
        let m = |p: &str, t: &str| glob_match(p.as_bytes(), t.as_bytes());
        assert!(m("*", ""));
        assert!(m("key:*", "key:123"));
        assert!(!m("key:*", "kex:123"));
        assert!(m("h?llo", "hello") && !m("h?llo", "hllo"));
        assert!(m("h[ae]llo", "hallo") && !m("h[ae]llo", "hillo"));
        assert!(m("h[^e]llo", "hallo") && !m("h[^e]llo", "hello"));
        assert!(m("h[a-c]llo", "hbllo") && !m("h[a-c]llo", "hdllo"));
        assert!(m("a\\*b", "a*b") && !m("a\\*b", "axb"));
        assert!(m("*a*b*c*", "xxaxxbxxcxx"));
        assert!(!m("*a*b*c*d", "xxaxxbxxcxx"));
        let long = "a".repeat(200);
        assert!(!m(&format!("{}b", "*a".repeat(30)), &long), "no blow-up");
    }

    #[test]
    fn cursors_resume_after_their_key_and_are_bounded() {
        let mut c = Cursors::default();
        assert_eq!(c.start_key(0), Some(Vec::new()));
        let id = c.register(b"abc".to_vec());
        assert_eq!(c.start_key(id), Some(b"abc\0".to_vec()));
        assert_eq!(c.start_key(12345), None);
        for i in 0..MAX_CURSORS + 10 {
            c.register(i.to_string().into_bytes());
        }
        assert_eq!(c.len(), MAX_CURSORS);
        assert_eq!(c.start_key(id), None, "the oldest is forgotten");
    }
}
