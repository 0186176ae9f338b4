//! Fuzzes the RESP request parser: any input, fed in pieces at fuzzer-chosen cut points,
//! must parse or fail cleanly, never leave more unconsumed input than the parser's bound while
//! it waits, and every request it returns must parse back the same from its RESP encoding.
//!
//! Run: `cargo +nightly fuzz run resp_parse` in crates/tierkv-server/fuzz.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tierkv_server::resp::{Limits, Parser, Request};

fn encode(req: &Request) -> Vec<u8> {
    let mut out = format!("*{}\r\n", req.len()).into_bytes();
    for arg in req {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// Feeds `input` cut at `cuts`; the requests, or `None` on a protocol error.
fn feed(limits: Limits, input: &[u8], cuts: &[usize]) -> Option<Vec<Request>> {
    let mut parser = Parser::new(limits);
    let (mut buf, mut out, mut last) = (Vec::new(), Vec::new(), 0);
    for &cut in cuts.iter().chain(std::iter::once(&input.len())) {
        buf.extend_from_slice(&input[last..cut.max(last)]);
        last = cut.max(last);
        loop {
            let step = parser.parse(&buf).ok()?;
            buf.drain(..step.consumed);
            match step.request {
                Some(r) => out.push(r),
                None if step.consumed == 0 || buf.is_empty() => break,
                None => {}
            }
        }
        assert!(buf.len() <= limits.max_pending_input(), "buffer beyond the parser's bound");
    }
    Some(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&control, input)) = data.split_first() else {
        return;
    };
    let limits = Limits {
        max_args: 1 + usize::from(control & 0x0f) * 4,
        max_bulk: 1 << (4 + (control >> 4) % 8),
        max_request: 4096,
    };
    let step = 1 + usize::from(control) % 7;
    let cuts: Vec<usize> = (0..input.len()).step_by(step).collect();
    if let Some(requests) = feed(limits, input, &cuts) {
        for req in &requests {
            let again = feed(limits, &encode(req), &[]).expect("a returned request re-parses");
            assert_eq!(again, vec![req.clone()]);
        }
    }
});
