//! The Redis protocol on the wire: an incremental request parser and the reply encoder.
//!
//! Requests come as RESP multibulk arrays (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`) or as inline
//! commands (`GET k\r\n`, what `telnet` sends). [`Parser`] is a resumable state machine: it
//! takes whatever bytes have arrived, consumes what it can, keeps the arguments it has completed
//! and asks for more. Its invariant, which bounds a connection's read buffer, is that after it
//! asks for more the unconsumed input is never longer than [`Limits::max_pending_input`]: one
//! header or inline line (at most [`MAX_LINE`] bytes) or one bulk string (at most
//! `max_bulk` bytes) plus its CRLF. Every limit breach is a [`ProtocolError`] with Redis's
//! wording; the connection answers it and closes.
//!
//! Replies are built as [`Reply`] values and encoded for the protocol version the client chose
//! (`HELLO 2` or `HELLO 3`): maps, sets, nulls and verbatim strings have RESP3 forms and fall
//! back to arrays and bulk strings in RESP2.

use std::fmt;

/// Longest header (`*N`, `$N`) or inline command line, like Redis's 64 KiB inline limit.
pub const MAX_LINE: usize = 64 << 10;

/// What one request may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Most arguments (the command name included).
    pub max_args: usize,
    /// Longest single argument in bytes.
    pub max_bulk: usize,
    /// Most bytes of arguments in one request, summed.
    pub max_request: usize,
}

impl Limits {
    /// Limits before a client has authenticated, as Redis applies them: an unauthenticated
    /// peer cannot make the server buffer much.
    pub const UNAUTHENTICATED: Limits = Limits {
        max_args: 10,
        max_bulk: 16 << 10,
        max_request: 64 << 10,
    };

    /// The most unconsumed input the parser leaves when it waits for more bytes.
    pub fn max_pending_input(&self) -> usize {
        MAX_LINE.max(self.max_bulk.saturating_add(2))
    }

    /// The limits on an inline command. Redis applies its unauthenticated limits to multibulk
    /// requests only: an inline line buffers at most [`MAX_LINE`] bytes whatever it holds.
    fn for_inline(self) -> Limits {
        if self != Limits::UNAUTHENTICATED {
            return self;
        }
        Limits {
            max_args: MAX_LINE,
            max_bulk: MAX_LINE,
            max_request: MAX_LINE,
        }
    }
}

/// Malformed or oversized input. The text is Redis's (`Protocol error: ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError(pub String);

impl fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Protocol error: {}", self.0)
    }
}

impl std::error::Error for ProtocolError {}

fn perr<T>(what: impl Into<String>) -> Result<T, ProtocolError> {
    Err(ProtocolError(what.into()))
}

/// One parsed request: the command name and its arguments, as bytes.
pub type Request = Vec<Vec<u8>>;

/// What one call of [`Parser::parse`] did.
#[derive(Debug, PartialEq, Eq)]
pub struct Step {
    /// Bytes of the input it consumed; the caller drops them from its buffer.
    pub consumed: usize,
    /// A complete request, or `None` when more input is needed.
    pub request: Option<Request>,
}

/// Where the parser is inside a multibulk request.
#[derive(Debug, Default)]
struct Multibulk {
    /// Arguments the request declared.
    expected: usize,
    /// Arguments completed so far.
    args: Request,
    /// Bytes of arguments so far (checked against `max_request`).
    bytes: usize,
    /// Length of the bulk string whose header was consumed and whose data has not arrived.
    bulk_len: Option<usize>,
}

/// The resumable request parser; one per connection.
#[derive(Debug)]
pub struct Parser {
    limits: Limits,
    partial: Option<Multibulk>,
}

impl Parser {
    /// A parser enforcing `limits`.
    pub fn new(limits: Limits) -> Self {
        Parser {
            limits,
            partial: None,
        }
    }

    /// Changes the limits (after authentication); they apply from the next argument on.
    pub fn set_limits(&mut self, limits: Limits) {
        self.limits = limits;
    }

    /// The limits in force.
    pub fn limits(&self) -> Limits {
        self.limits
    }

    /// Consumes input from the front of `input`. Call again with the rest after a request is
    /// returned; when `request` is `None` every byte it could use has been used.
    pub fn parse(&mut self, input: &[u8]) -> Result<Step, ProtocolError> {
        let mut pos = 0;
        loop {
            if self.partial.is_none() {
                match input.get(pos) {
                    None => return Ok(incomplete(pos)),
                    Some(b'*') => {}
                    Some(_) => return self.inline(input, pos),
                }
                let Some((n, next)) = self.header(input, pos, "mbulk count")? else {
                    return Ok(incomplete(pos));
                };
                pos = next;
                if n <= 0 {
                    // NB: `*0` and `*-1` are empty requests; Redis skips them too.
                    continue;
                }
                if n as u64 > self.limits.max_args as u64 {
                    return self.too_many_args();
                }
                self.partial = Some(Multibulk {
                    expected: n as usize,
                    // NB: a declared count is not trusted for the allocation.
                    args: Vec::with_capacity((n as usize).min(64)),
                    ..Default::default()
                });
            }
            let (done, next) = self.bulk_args(input, pos)?;
            pos = next;
            if !done {
                return Ok(incomplete(pos));
            }
            let mb = self.partial.take().expect("a multibulk in progress");
            return Ok(Step {
                consumed: pos,
                request: Some(mb.args),
            });
        }
    }

    fn too_many_args<T>(&self) -> Result<T, ProtocolError> {
        if self.limits == Limits::UNAUTHENTICATED {
            return perr("unauthenticated multibulk length");
        }
        perr("invalid multibulk length")
    }

    /// Reads bulk arguments of the request in progress; true when it is complete.
    fn bulk_args(&mut self, input: &[u8], mut pos: usize) -> Result<(bool, usize), ProtocolError> {
        let limits = self.limits;
        loop {
            let mb = self.partial.as_mut().expect("a multibulk in progress");
            if mb.args.len() == mb.expected {
                return Ok((true, pos));
            }
            let len = match mb.bulk_len {
                Some(len) => len,
                None => {
                    let Some((len, next)) = self.bulk_header(input, pos)? else {
                        return Ok((false, pos));
                    };
                    pos = next;
                    let mb = self.partial.as_mut().expect("a multibulk in progress");
                    if mb.bytes.saturating_add(len) > limits.max_request {
                        return perr(format!(
                            "request larger than {} bytes (max request size)",
                            limits.max_request
                        ));
                    }
                    mb.bulk_len = Some(len);
                    len
                }
            };
            let rest = &input[pos..];
            if rest.len() < len + 2 {
                return Ok((false, pos));
            }
            if &rest[len..len + 2] != b"\r\n" {
                return perr("expected CRLF after a bulk string");
            }
            let mb = self.partial.as_mut().expect("a multibulk in progress");
            mb.args.push(rest[..len].to_vec());
            mb.bytes += len;
            mb.bulk_len = None;
            pos += len + 2;
        }
    }

    /// Parses a `$len` header of one bulk argument.
    fn bulk_header(
        &self,
        input: &[u8],
        pos: usize,
    ) -> Result<Option<(usize, usize)>, ProtocolError> {
        match input.get(pos) {
            None => return Ok(None),
            Some(b'$') => {}
            Some(&c) => return perr(format!("expected '$', got '{}'", c as char)),
        }
        let Some((len, next)) = self.header(input, pos, "bulk count")? else {
            return Ok(None);
        };
        if len < 0 || len as u64 > self.limits.max_bulk as u64 {
            if self.limits == Limits::UNAUTHENTICATED && len >= 0 {
                return perr("unauthenticated bulk length");
            }
            return perr("invalid bulk length");
        }
        Ok(Some((len as usize, next)))
    }

    /// Parses the integer of a `*N` or `$N` line starting at `pos` (its type byte); returns
    /// it and the position after its CRLF, or `None` if the line is incomplete.
    fn header(
        &self,
        input: &[u8],
        pos: usize,
        what: &str,
    ) -> Result<Option<(i64, usize)>, ProtocolError> {
        let Some(end) = find_crlf(&input[pos..]) else {
            if input.len() - pos > MAX_LINE {
                return perr(format!("too big {what} string"));
            }
            return Ok(None);
        };
        let digits = &input[pos + 1..pos + end];
        let Some(n) = parse_i64(digits) else {
            let kind = if what == "bulk count" {
                "bulk length"
            } else {
                "multibulk length"
            };
            return perr(format!("invalid {kind}"));
        };
        Ok(Some((n, pos + end + 2)))
    }

    /// Parses an inline command line (split on spaces, quotes as `redis-cli` sends them).
    fn inline(&self, input: &[u8], pos: usize) -> Result<Step, ProtocolError> {
        let rest = &input[pos..];
        let Some(end) = rest.iter().position(|&b| b == b'\n') else {
            if rest.len() > MAX_LINE {
                return perr("too big inline request");
            }
            return Ok(incomplete(pos));
        };
        let line = rest[..end].strip_suffix(b"\r").unwrap_or(&rest[..end]);
        let args = split_inline(line)?;
        // NB: once authenticated, the same limits as a multibulk request, so both forms
        // accept the same requests.
        let limits = self.limits.for_inline();
        if args.len() > limits.max_args {
            return self.too_many_args();
        }
        if args.iter().any(|a| a.len() > limits.max_bulk) {
            return perr("invalid bulk length");
        }
        if args.iter().map(Vec::len).sum::<usize>() > limits.max_request {
            return perr(format!(
                "request larger than {} bytes (max request size)",
                limits.max_request
            ));
        }
        let consumed = pos + end + 1;
        if args.is_empty() {
            // NB: an empty line is skipped, as Redis does; the caller parses on.
            return Ok(Step {
                consumed,
                request: None,
            });
        }
        Ok(Step {
            consumed,
            request: Some(args),
        })
    }
}

fn incomplete(consumed: usize) -> Step {
    Step {
        consumed,
        request: None,
    }
}

fn find_crlf(bytes: &[u8]) -> Option<usize> {
    bytes.windows(2).position(|w| w == b"\r\n")
}

/// Parses a decimal integer the way Redis's `string2ll` does: an optional `-`, no `+`, no
/// leading zeros, no spaces, within `i64`.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    let (neg, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    match digits {
        [] => return None,
        [b'0'] if !neg => return Some(0),
        [b'0', ..] => return None,
        _ => {}
    }
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        let d = i64::from(d - b'0');
        n = n.checked_mul(10)?;
        n = if neg {
            n.checked_sub(d)?
        } else {
            n.checked_add(d)?
        };
    }
    Some(n)
}

/// Splits an inline line into arguments: spaces separate them; `"..."` takes the escapes
/// `\n \r \t \b \a \\ \" \xHH`, `'...'` takes `\'`; a closing quote must be followed by a
/// space or the end.
fn split_inline(line: &[u8]) -> Result<Vec<Vec<u8>>, ProtocolError> {
    let mut args = Vec::new();
    let mut i = 0;
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Ok(args);
        }
        let (arg, next) = match line[i] {
            b'"' => double_quoted(line, i + 1)?,
            b'\'' => single_quoted(line, i + 1)?,
            _ => {
                let end = line[i..]
                    .iter()
                    .position(|b| b.is_ascii_whitespace())
                    .map_or(line.len(), |e| i + e);
                (line[i..end].to_vec(), end)
            }
        };
        args.push(arg);
        i = next;
    }
}

fn unbalanced<T>() -> Result<T, ProtocolError> {
    perr("unbalanced quotes in request")
}

/// After a closing quote at `i - 1`: the next byte must end the argument.
fn after_quote(line: &[u8], i: usize) -> Result<usize, ProtocolError> {
    match line.get(i) {
        None => Ok(i),
        Some(b) if b.is_ascii_whitespace() => Ok(i),
        Some(_) => unbalanced(),
    }
}

fn double_quoted(line: &[u8], mut i: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut out = Vec::new();
    loop {
        match line.get(i) {
            None => return unbalanced(),
            Some(b'"') => return Ok((out, after_quote(line, i + 1)?)),
            Some(b'\\') if i + 1 < line.len() => {
                let (byte, used) = unescape(&line[i + 1..]);
                out.push(byte);
                i += 1 + used;
            }
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// One escape after a backslash: the byte it stands for and how many bytes it used.
fn unescape(rest: &[u8]) -> (u8, usize) {
    let hex = |b: u8| (b as char).to_digit(16);
    if let [b'x', h, l, ..] = rest {
        if let (Some(h), Some(l)) = (hex(*h), hex(*l)) {
            return ((h * 16 + l) as u8, 3);
        }
    }
    let byte = match rest[0] {
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'b' => 8,
        b'a' => 7,
        other => other,
    };
    (byte, 1)
}

fn single_quoted(line: &[u8], mut i: usize) -> Result<(Vec<u8>, usize), ProtocolError> {
    let mut out = Vec::new();
    loop {
        match line.get(i) {
            None => return unbalanced(),
            Some(b'\'') => return Ok((out, after_quote(line, i + 1)?)),
            Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                out.push(b'\'');
                i += 2;
            }
            Some(&b) => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// The protocol version a client speaks: 2 (the default) or 3 after `HELLO 3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proto {
    /// RESP2.
    Resp2,
    /// RESP3.
    Resp3,
}

/// A reply, encoded for the client's protocol version by [`Reply::encode`].
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`-style status.
    Simple(String),
    /// An error; the text starts with its code (`ERR ...`, `NOAUTH ...`).
    Error(String),
    /// An integer.
    Int(i64),
    /// A binary-safe string.
    Bulk(Vec<u8>),
    /// No value (`$-1` in RESP2, `_` in RESP3).
    Nil,
    /// An array.
    Array(Vec<Reply>),
    /// A map (a flat array of pairs in RESP2).
    Map(Vec<(Reply, Reply)>),
    /// Text to show as is, like INFO's (a bulk string in RESP2).
    Verbatim(String),
}

impl Reply {
    /// `+OK`.
    pub fn ok() -> Reply {
        Reply::Simple("OK".into())
    }

    /// An `ERR` error with this message.
    pub fn err(msg: impl fmt::Display) -> Reply {
        Reply::Error(format!("ERR {msg}"))
    }

    /// A bulk string from text.
    pub fn text(s: impl Into<String>) -> Reply {
        Reply::Bulk(s.into().into_bytes())
    }

    /// A bulk string, or nil for `None`.
    pub fn bulk_or_nil(v: Option<Vec<u8>>) -> Reply {
        v.map_or(Reply::Nil, Reply::Bulk)
    }

    /// Appends the encoding of this reply to `out`.
    pub fn encode(&self, proto: Proto, out: &mut Vec<u8>) {
        match self {
            Reply::Simple(s) => line(out, b'+', &one_line(s)),
            Reply::Error(s) => line(out, b'-', &one_line(s)),
            Reply::Int(n) => line(out, b':', &n.to_string()),
            Reply::Bulk(b) => bulk(out, b),
            Reply::Nil if proto == Proto::Resp3 => out.extend_from_slice(b"_\r\n"),
            Reply::Nil => out.extend_from_slice(b"$-1\r\n"),
            Reply::Array(items) => {
                line(out, b'*', &items.len().to_string());
                items.iter().for_each(|r| r.encode(proto, out));
            }
            Reply::Map(pairs) => {
                match proto {
                    Proto::Resp3 => line(out, b'%', &pairs.len().to_string()),
                    Proto::Resp2 => line(out, b'*', &(2 * pairs.len()).to_string()),
                }
                for (k, v) in pairs {
                    k.encode(proto, out);
                    v.encode(proto, out);
                }
            }
            Reply::Verbatim(text) if proto == Proto::Resp3 => {
                line(out, b'=', &(text.len() + 4).to_string());
                out.extend_from_slice(b"txt:");
                out.extend_from_slice(text.as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            Reply::Verbatim(text) => bulk(out, text.as_bytes()),
        }
    }
}

fn line(out: &mut Vec<u8>, kind: u8, body: &str) {
    out.push(kind);
    out.extend_from_slice(body.as_bytes());
    out.extend_from_slice(b"\r\n");
}

fn bulk(out: &mut Vec<u8>, data: &[u8]) {
    line(out, b'$', &data.len().to_string());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// Status and error lines cannot hold CR or LF: they become spaces, as in Redis.
fn one_line(s: &str) -> std::borrow::Cow<'_, str> {
    if s.contains(['\r', '\n']) {
        s.replace(['\r', '\n'], " ").into()
    } else {
        s.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    const LIMITS: Limits = Limits {
        max_args: 1000,
        max_bulk: 1 << 20,
        max_request: 4 << 20,
    };

    /// Feeds `input` in pieces cut at `cuts`, as a connection would, collecting requests.
    fn feed(parser: &mut Parser, input: &[u8], cuts: &[usize]) -> Result<Vec<Request>, String> {
        let mut buf = Vec::new();
        let mut out = Vec::new();
        let mut last = 0;
        for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
            buf.extend_from_slice(&input[last..cut]);
            last = cut;
            loop {
                let step = parser.parse(&buf).map_err(|e| e.to_string())?;
                buf.drain(..step.consumed);
                match step.request {
                    Some(r) => out.push(r),
                    None if step.consumed == 0 || buf.is_empty() => break,
                    None => {}
                }
            }
            assert!(buf.len() <= parser.limits().max_pending_input() + 1);
        }
        Ok(out)
    }

    fn parse_all(input: &[u8]) -> Result<Vec<Request>, String> {
        feed(&mut Parser::new(LIMITS), input, &[])
    }

    fn req(args: &[&str]) -> Request {
        args.iter().map(|a| a.as_bytes().to_vec()).collect()
    }

    #[test]
    fn multibulk_and_pipelined() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$0\r\n\r\n";
        let got = parse_all(input).unwrap();
        assert_eq!(got, vec![req(&["GET", "k"]), req(&["SET", "k", ""])]);
    }

    #[test]
    fn every_split_point_gives_the_same_requests() {
        let input: &[u8] =
            b"*3\r\n$3\r\nSET\r\n$5\r\nhe\r\nl\r\n$4\r\n\x00\x01\r\n\r\nPING\r\n*1\r\n$4\r\nPING\r\n";
        let whole = parse_all(input).unwrap();
        assert_eq!(whole.len(), 3);
        assert_eq!(whole[0][1], b"he\r\nl");
        for a in 0..=input.len() {
            for b in a..=input.len() {
                let got = feed(&mut Parser::new(LIMITS), input, &[a, b]).unwrap();
                assert_eq!(got, whole, "cut at {a} and {b}");
            }
        }
    }

    #[test]
    fn inline_commands_and_quotes() {
        let got = parse_all(b"SET k \"a b\\x41\\n\" \r\n\r\n  get  'it''s'\n").unwrap_err();
        assert!(got.contains("unbalanced"), "{got}");
        let got = parse_all(b"SET k \"a b\\x41\\n\"\r\n\r\n  get  'it\\'s'\n").unwrap();
        assert_eq!(
            got,
            vec![req(&["SET", "k", "a bA\n"]), req(&["get", "it's"])]
        );
        assert!(parse_all(b"GET \"open\r\n")
            .unwrap_err()
            .contains("unbalanced"));
    }

    #[test]
    fn empty_multibulk_is_skipped() {
        let got = parse_all(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n").unwrap();
        assert_eq!(got, vec![req(&["PING"])]);
    }

    #[test]
    fn malformed_headers_use_redis_words() {
        let e = |input: &[u8]| parse_all(input).unwrap_err();
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(e(b"*1\r\n$-3\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
        assert_eq!(
            e(b"*1\r\n$1\r\nab\r\n"),
            "Protocol error: expected CRLF after a bulk string"
        );
        assert_eq!(e(b"*+1\r\n"), "Protocol error: invalid multibulk length");
    }

    #[test]
    fn limits_are_enforced_before_buffering() {
        let e = |input: &[u8]| parse_all(input).unwrap_err();
        assert_eq!(e(b"*1001\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(
            e(b"*1\r\n$1048577\r\n"),
            "Protocol error: invalid bulk length"
        );
        // Five arguments of 1 MiB pass the bulk limit but not the 4 MiB request limit.
        let mut big = b"*5\r\n".to_vec();
        for _ in 0..5 {
            big.extend_from_slice(format!("${}\r\n", 1 << 20).as_bytes());
            big.extend(std::iter::repeat_n(b'x', 1 << 20));
            big.extend_from_slice(b"\r\n");
        }
        assert!(e(&big).contains("max request size"));
        let long_line = vec![b'a'; MAX_LINE + 10];
        assert_eq!(e(&long_line), "Protocol error: too big inline request");
        let mut long_header = b"*".to_vec();
        long_header.extend(std::iter::repeat_n(b'1', MAX_LINE + 10));
        assert_eq!(
            e(&long_header),
            "Protocol error: too big mbulk count string"
        );
    }

    #[test]
    fn unauthenticated_limits_are_small() {
        let mut p = Parser::new(Limits::UNAUTHENTICATED);
        let e = p.parse(b"*11\r\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "Protocol error: unauthenticated multibulk length"
        );
        let mut p = Parser::new(Limits::UNAUTHENTICATED);
        let e = p.parse(b"*2\r\n$4\r\nAUTH\r\n$100000\r\n").unwrap_err();
        assert_eq!(e.to_string(), "Protocol error: unauthenticated bulk length");
    }

    #[test]
    fn unauthenticated_limits_spare_inline_commands() {
        let mut line = b"DEL".to_vec();
        for _ in 0..20 {
            line.extend_from_slice(b" k");
        }
        line.extend_from_slice(b" ");
        line.extend(std::iter::repeat_n(b'v', 20 << 10));
        line.extend_from_slice(b"\r\n");
        let got = feed(&mut Parser::new(Limits::UNAUTHENTICATED), &line, &[]).unwrap();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].len(), 22);
        let long_line = vec![b'a'; MAX_LINE + 10];
        let e = Parser::new(Limits::UNAUTHENTICATED)
            .parse(&long_line)
            .unwrap_err();
        assert_eq!(e.to_string(), "Protocol error: too big inline request");
    }

    #[test]
    fn integers_parse_like_redis() {
        assert_eq!(parse_i64(b"0"), Some(0));
        assert_eq!(parse_i64(b"-12"), Some(-12));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        assert_eq!(parse_i64(b"-9223372036854775808"), Some(i64::MIN));
        for bad in [
            &b""[..],
            b"-",
            b"+1",
            b"01",
            b"-0",
            b" 1",
            b"1 ",
            b"9223372036854775808",
        ] {
            assert_eq!(parse_i64(bad), None, "{:?}", bad.escape_ascii().to_string());
        }
    }

    #[test]
    fn replies_encode_in_both_protocols() {
        let r = Reply::Array(vec![
            Reply::Nil,
            Reply::Int(-3),
            Reply::Map(vec![(Reply::text("a"), Reply::ok())]),
            Reply::Error("ERR bad\r\nline".into()),
        ]);
        let mut two = Vec::new();
        r.encode(Proto::Resp2, &mut two);
        assert_eq!(
            two,
            b"*4\r\n$-1\r\n:-3\r\n*2\r\n$1\r\na\r\n+OK\r\n-ERR bad  line\r\n"
        );
        let mut three = Vec::new();
        r.encode(Proto::Resp3, &mut three);
        assert_eq!(
            three,
            b"*4\r\n_\r\n:-3\r\n%1\r\n$1\r\na\r\n+OK\r\n-ERR bad  line\r\n"
        );
        let mut v = Vec::new();
        Reply::Verbatim("x:1".into()).encode(Proto::Resp3, &mut v);
        assert_eq!(v, b"=7\r\ntxt:x:1\r\n");
    }

    /// Random bytes and mutations of valid requests never panic, and the unconsumed input
    /// stays within the parser's bound while it waits.
    #[test]
    fn random_input_never_panics_and_stays_bounded() {
        let limits = Limits {
            max_args: 16,
            max_bulk: 256,
            max_request: 1024,
        };
        let seeds: [&[u8]; 4] = [
            b"*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n",
            b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n",
            b"SET a \"b\\x00c\" 'd'\r\n",
            b"*1\r\n$4\r\nPING\r\n*0\r\n",
        ];
        let mut rng = rand::rngs::SmallRng::seed_from_u64(0x7e5b);
        for round in 0..20_000 {
            let input = if round % 2 == 0 {
                let len = rng.gen_range(0..300);
                (0..len).map(|_| rng.gen()).collect::<Vec<u8>>()
            } else {
                mutate(&mut rng, seeds[round % seeds.len()])
            };
            let cuts: Vec<usize> = {
                let mut c: Vec<usize> = (0..3).map(|_| rng.gen_range(0..=input.len())).collect();
                c.sort_unstable();
                c
            };
            let _ = feed(&mut Parser::new(limits), &input, &cuts);
        }
    }

    fn mutate(rng: &mut impl Rng, seed: &[u8]) -> Vec<u8> {
        let mut v = seed.repeat(rng.gen_range(1..4));
        for _ in 0..rng.gen_range(1..6) {
            let i = rng.gen_range(0..v.len());
            match rng.gen_range(0..4) {
                0 => v[i] = rng.gen(),
                1 => {
                    v.remove(i);
                }
                2 => v.insert(i, *b"*$\r\n0123456789-".get(rng.gen_range(0..15)).unwrap()),
                _ => v.truncate(i),
            }
            if v.is_empty() {
                v.push(b'*');
            }
        }
        v
    }
}
