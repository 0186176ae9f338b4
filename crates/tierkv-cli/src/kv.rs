//! The data commands: `put`, `get`, `delete`, `scan` and `load`.
//!
//! Results go to stdout (one value, or `key<TAB>value` lines); summaries and diagnostics go to
//! stderr, so stdout can be piped into another `tierkv load`.

use crate::cli::{LoadArgs, ScanArgs};
use crate::errors::{Usage, NOT_FOUND, OK};
use crate::text::{human_bytes, Encoding};
use anyhow::{anyhow, bail, Context, Result};
use std::io::{BufRead, Write};
use std::time::Instant;
use tierkv::{Db, Durability, ReadOptions, WriteBatch, WriteOptions};

/// Write options for a `--sync` flag.
pub fn write_options(sync: bool) -> WriteOptions {
    WriteOptions {
        durability: if sync {
            Durability::Sync
        } else {
            Durability::Flush
        },
    }
}

/// `put KEY VALUE` (arguments already decoded, so a bad one fails before the open).
pub fn put(db: &Db, key: &[u8], value: &[u8], sync: bool) -> Result<u8> {
    db.put(&write_options(sync), key, value)?;
    Ok(OK)
}

/// `get KEY`: the value and a newline, or exit 1 with nothing on stdout.
pub fn get(db: &Db, enc: Encoding, key: &[u8], out: &mut dyn Write) -> Result<u8> {
    match db.get(&ReadOptions::default(), key)? {
        Some(value) => {
            writeln!(out, "{}", enc.show(&value))?;
            Ok(OK)
        }
        None => {
            eprintln!("tierkv: not found: {}", enc.show(key));
            Ok(NOT_FOUND)
        }
    }
}

/// `delete KEY`.
pub fn delete(db: &Db, key: &[u8], sync: bool) -> Result<u8> {
    db.delete(&write_options(sync), key)?;
    Ok(OK)
}

/// `scan`'s `[--from, --to)` bounds, decoded.
pub struct Bounds {
    from: Option<Vec<u8>>,
    to: Option<Vec<u8>>,
}

impl Bounds {
    /// Decodes the bounds of `args` (before the database is opened).
    pub fn parse(enc: Encoding, args: &ScanArgs) -> Result<Bounds, Usage> {
        let parse = |k: &Option<String>| k.as_ref().map(|k| enc.parse(k.as_bytes())).transpose();
        Ok(Bounds {
            from: parse(&args.from)?,
            to: parse(&args.to)?,
        })
    }
}

/// `scan`: `key<TAB>value` lines within the bounds, forward or reverse.
pub fn scan(
    db: &Db,
    enc: Encoding,
    bounds: &Bounds,
    args: &ScanArgs,
    out: &mut dyn Write,
) -> Result<u8> {
    let opts = ReadOptions::default().bounds(bounds.from.as_deref(), bounds.to.as_deref());
    let mut it = db.iter(opts)?;
    if args.reverse {
        it.seek_to_last();
    } else {
        it.seek_to_first();
    }
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut printed = 0;
    while it.valid() && printed < limit {
        writeln!(out, "{}\t{}", enc.show(it.key()), enc.show(it.value()))?;
        printed += 1;
        if args.reverse {
            it.prev();
        } else {
            it.next();
        }
    }
    it.status().context("scan stopped")?;
    Ok(OK)
}

/// Running totals of a load.
#[derive(Default)]
struct LoadCount {
    records: u64,
    bytes: u64,
}

/// `load`: `key<TAB>value` lines from `input`, `--batch` lines per write. Empty lines are
/// skipped; a bad line stops the load, and every line before it is stored.
pub fn load(db: &Db, enc: Encoding, args: &LoadArgs, input: &mut dyn BufRead) -> Result<u8> {
    let start = Instant::now();
    let wopts = write_options(args.sync);
    let mut count = LoadCount::default();
    let mut batch = WriteBatch::new();
    let result = read_lines(enc, input, |key, value| {
        count.records += 1;
        count.bytes += (key.len() + value.len()) as u64;
        batch.put(key, value);
        if batch.len() as u64 >= args.batch {
            db.write(&wopts, std::mem::take(&mut batch))?;
        }
        Ok(())
    });
    // NB: write what was parsed before a bad line, so the summary's count is what is stored.
    if !batch.is_empty() {
        db.write(&wopts, batch)?;
    }
    print_load_summary(&count, start.elapsed().as_secs_f64());
    if args.wait && result.is_ok() {
        db.flush()?;
        db.wait_for_compactions()?;
        eprintln!(
            "flushed and compacted after {:.3} s",
            start.elapsed().as_secs_f64()
        );
    }
    print_tier_summary(&db.stats());
    result.map(|()| OK)
}

/// Bytes written per tier by kind, and the write amplification so far.
fn print_tier_summary(stats: &tierkv::Stats) {
    for t in &stats.tiers {
        eprintln!(
            "tier {}: {} written (WAL {}, flush {}, compaction {}, meta {}), {} in tables",
            t.name,
            human_bytes(t.bytes_written()),
            human_bytes(t.wal_bytes_written),
            human_bytes(t.flush_bytes_written),
            human_bytes(t.compaction_bytes_written),
            human_bytes(t.meta_bytes_written),
            human_bytes(t.bytes_used),
        );
    }
    eprintln!(
        "write amplification {:.2} (bytes written to all tiers / key and value bytes)",
        stats.write_amplification()
    );
}

/// Calls `each` with every `(key, value)` of `input`.
fn read_lines(
    enc: Encoding,
    input: &mut dyn BufRead,
    mut each: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<()> {
    let mut line = Vec::new();
    let mut line_no = 0;
    while input
        .read_until(b'\n', &mut line)
        .context("reading stdin")?
        > 0
    {
        line_no += 1;
        if let Some((key, value)) = parse_line(enc, &line, line_no)? {
            each(&key, &value)?;
        }
        line.clear();
    }
    Ok(())
}

/// One input line as `(key, value)`; `None` for an empty line. Bad input is an ordinary
/// error (exit 4), not a usage error: the arguments were fine.
fn parse_line(enc: Encoding, line: &[u8], line_no: u64) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.is_empty() {
        return Ok(None);
    }
    let Some(tab) = line.iter().position(|&b| b == b'\t') else {
        bail!("input line {line_no}: no TAB between key and value");
    };
    let field = |bytes| {
        enc.parse(bytes)
            .map_err(|e| anyhow!("input line {line_no}: {e}"))
    };
    Ok(Some((field(&line[..tab])?, field(&line[tab + 1..])?)))
}

fn print_load_summary(count: &LoadCount, secs: f64) {
    let secs = secs.max(1e-9);
    eprintln!(
        "loaded {} records ({}) in {secs:.3} s: {:.0} records/s, {:.1} MB/s",
        count.records,
        human_bytes(count.bytes),
        count.records as f64 / secs,
        count.bytes as f64 / 1e6 / secs,
    );
}
