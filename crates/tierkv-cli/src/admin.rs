//! Maintenance commands on an open database: `stats`, `compact` and `check`.

use crate::errors::OK;
use crate::text::{human_bytes, Encoding};
use anyhow::{Context, Result};
use std::io::Write;
use std::time::Instant;
use tierkv::inspect::{self, ZoneRole};
use tierkv::{Db, ReadOptions};

/// `stats`: the engine's report, and with `--files` every live table.
pub fn stats(db: &Db, enc: Encoding, files: bool, out: &mut dyn Write) -> Result<u8> {
    writeln!(out, "{}", db.stats())?;
    if files {
        write_live_files(db, enc, out)?;
    }
    Ok(OK)
}

fn write_live_files(db: &Db, enc: Encoding, out: &mut dyn Write) -> Result<()> {
    writeln!(out, "live files:")?;
    for f in db.live_files() {
        writeln!(
            out,
            "  L{} {:06}.sst on {}: {}, {} entries, {} .. {}",
            f.level,
            f.number,
            f.tier,
            human_bytes(f.size),
            f.entries,
            enc.show(&f.smallest),
            enc.show(&f.largest),
        )?;
    }
    Ok(())
}

/// `compact`: everything down to the last level holding data, then the stats.
pub fn compact(db: &Db, out: &mut dyn Write) -> Result<u8> {
    let start = Instant::now();
    db.compact_range(None, None).context("compaction failed")?;
    writeln!(out, "compacted in {:.3} s", start.elapsed().as_secs_f64())?;
    writeln!(out, "{}", db.stats())?;
    Ok(OK)
}

/// `check`: opening (read-only, so a damaged database is inspected, not changed) already
/// replayed and checked the MANIFEST and WAL; this verifies every block of every live table,
/// then reads every key through the normal read path, and checks every zoned tier's zones
/// against its files' extents. The first damage found is the error (exit 3), and it names the
/// file.
pub fn check(db: &Db, out: &mut dyn Write) -> Result<u8> {
    let start = Instant::now();
    let tables = db.live_files().len();
    let blocks = db
        .verify_checksums()
        .context("table checksum verification failed")?;
    let (keys, bytes) = scan_all(db).context("full scan failed")?;
    // Split values: every pointer's value-log record (checksum, length, key).
    let (_, separated) = db
        .check_values()
        .context("value-log pointer verification failed")?;
    let zoned = check_zoned_tiers(db)?;
    writeln!(
        out,
        "ok: MANIFEST and WAL replayed; {blocks} blocks in {tables} tables verified; \
         {keys} keys ({}) scanned in {:.3} s; {separated} value-log pointers verified",
        human_bytes(bytes),
        start.elapsed().as_secs_f64()
    )?;
    for line in zoned {
        writeln!(out, "{line}")?;
    }
    Ok(OK)
}

/// Checks each zoned tier's zone file system (every zone free, active, metadata or owned by a
/// live file; live bytes matching the extents); returns one summary line per tier.
fn check_zoned_tiers(db: &Db) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for (tier, image) in inspect::zoned_tiers(db) {
        let c = image
            .check()
            .with_context(|| format!("zoned tier {tier}: zone check failed"))?;
        let free = image
            .zones
            .iter()
            .filter(|z| z.role == ZoneRole::Free)
            .count();
        lines.push(format!(
            "ok: zoned tier {tier}: {} files, {} extents in {} zones ({} live), {free} of {} \
             zones free; every zone free, active, metadata or owned by a live file",
            c.files,
            c.extents,
            c.zones_in_use,
            human_bytes(c.live_bytes),
            image.zones.len(),
        ));
    }
    Ok(lines)
}

/// Reads every live key and value; returns their count and bytes.
fn scan_all(db: &Db) -> Result<(u64, u64)> {
    // NB: don't fill the cache: a check reads everything once and should not evict hot blocks.
    let opts = ReadOptions {
        fill_cache: false,
        ..ReadOptions::default()
    };
    let mut it = db.iter(opts)?;
    it.seek_to_first();
    let (mut keys, mut bytes) = (0u64, 0u64);
    while it.valid() {
        keys += 1;
        bytes += (it.key().len() + it.value().len()) as u64;
        it.next();
    }
    it.status()?;
    Ok((keys, bytes))
}
