//! Offline dumps: `dump-manifest`, `dump-wal` and `dump-sst` read files directly, without
//! opening (and so without locking or recovering) the database, so they work on a database
//! another process has open or one that no longer opens.

use crate::cli::{DumpSstArgs, DumpWalArgs};
use crate::errors::{Damaged, OK};
use crate::text::{human_bytes, Encoding};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use tierkv::env::{Fs, PosixFs};
use tierkv::inspect::{
    parse_file_name, parse_internal_key, FileKind, InternalIterator, LogReader, LogTail, NewFile,
    RecoveredManifest, Table, ValueKind, VersionEdit,
};
use tierkv::{BatchOp, RecoveryMode, WriteBatch};

// ---------------------------------------------------------------------------------------------
// MANIFEST
// ---------------------------------------------------------------------------------------------

/// `dump-manifest`: CURRENT, every edit of the MANIFEST it names, and the resulting files.
pub fn manifest(dir: &Path, enc: Encoding, out: &mut dyn Write) -> Result<u8> {
    let Some(m) = RecoveredManifest::read(&PosixFs::new(), dir)
        .with_context(|| format!("cannot read the MANIFEST in {}", dir.display()))?
    else {
        bail!("no tierkv database in {} (no CURRENT file)", dir.display());
    };
    writeln!(
        out,
        "CURRENT -> MANIFEST-{:06} in {}",
        m.manifest_number,
        dir.display()
    )?;
    writeln!(out, "database id: {}", m.db_id)?;
    writeln!(out, "tiers: {}", m.tiers.join(", "))?;
    for (i, edit) in m.edits.iter().enumerate() {
        write_edit(i, edit, enc, out)?;
    }
    write_final_shape(&m.edits, out)?;
    Ok(OK)
}

fn write_edit(i: usize, e: &VersionEdit, enc: Encoding, out: &mut dyn Write) -> Result<()> {
    let mut fields = Vec::new();
    if let Some(id) = &e.db_id {
        fields.push(format!("db id {id}"));
    }
    if let Some(t) = &e.tiers {
        fields.push(format!("tiers [{}]", t.join(", ")));
    }
    let numbers = [
        ("log number", e.log_number),
        ("next file", e.next_file_number),
        ("last seq", e.last_sequence),
    ];
    fields.extend(
        numbers
            .iter()
            .filter_map(|(n, v)| v.map(|v| format!("{n} {v}"))),
    );
    writeln!(out, "edit {i}: {}", fields.join(", "))?;
    for (level, number) in &e.deleted_files {
        writeln!(out, "  - L{level} {number:06}.sst")?;
    }
    for f in &e.new_files {
        writeln!(out, "  + {}", describe_new_file(f, enc))?;
    }
    Ok(())
}

fn describe_new_file(f: &NewFile, enc: Encoding) -> String {
    // A table merged within L0 sorts there by the least of its inputs' orders.
    let l0_order = match f.l0_seq == f.largest_seq {
        true => String::new(),
        false => format!(", L0 order {}", f.l0_seq),
    };
    format!(
        "L{} {:06}.sst on {}: {}, {} entries ({} deletions), keys {} .. {}, seq {}..{}{l0_order}",
        f.level,
        f.number,
        f.tier,
        human_bytes(f.size),
        f.num_entries,
        f.num_deletions,
        enc.show_internal_key(&f.smallest),
        enc.show_internal_key(&f.largest),
        f.smallest_seq,
        f.largest_seq,
    )
}

/// Replays the edits' adds and deletes and prints the live files per level and tier.
fn write_final_shape(edits: &[VersionEdit], out: &mut dyn Write) -> Result<()> {
    let mut live: BTreeMap<(usize, u64), &NewFile> = BTreeMap::new();
    for e in edits {
        for key in &e.deleted_files {
            live.remove(key);
        }
        for f in &e.new_files {
            live.insert((f.level, f.number), f);
        }
    }
    // level -> tier -> (files, bytes)
    let mut shape: BTreeMap<usize, BTreeMap<&str, (u64, u64)>> = BTreeMap::new();
    for f in live.values() {
        let slot = shape
            .entry(f.level)
            .or_default()
            .entry(&f.tier)
            .or_default();
        slot.0 += 1;
        slot.1 += f.size;
    }
    writeln!(
        out,
        "live files after {} edits: {}",
        edits.len(),
        live.len()
    )?;
    for (level, tiers) in shape {
        let parts: Vec<String> = tiers
            .iter()
            .map(|(t, (n, b))| format!("{t}: {n} files, {}", human_bytes(*b)))
            .collect();
        writeln!(out, "  L{level}: {}", parts.join("; "))?;
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// WAL
// ---------------------------------------------------------------------------------------------

/// `dump-wal`: every record of each file, then how the file ends. Damage a crash can explain
/// (a torn tail) is reported and accepted; damage to synced bytes fails with exit 3.
pub fn wal(dir: &Path, args: &DumpWalArgs, enc: Encoding, out: &mut dyn Write) -> Result<u8> {
    let files = if args.files.is_empty() {
        wal_files(dir)?
    } else {
        args.files.clone()
    };
    if files.is_empty() {
        writeln!(out, "no WAL files in {}", dir.display())?;
    }
    let mut corrupt = Vec::new();
    for path in &files {
        let tail = dump_one_wal(path, args.full_values, enc, out)?;
        if tail.synced_data_after_damage {
            corrupt.push(path.display().to_string());
        }
    }
    if !corrupt.is_empty() {
        let what = format!("damaged synced records in {}", corrupt.join(", "));
        return Err(Damaged(what).into());
    }
    Ok(OK)
}

/// The `NNNNNN.log` files of `dir`, oldest first.
fn wal_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let names = PosixFs::new()
        .list_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?;
    let mut wals: Vec<(u64, String)> = names
        .into_iter()
        .filter_map(|n| match parse_file_name(&n) {
            Some((FileKind::Wal, number)) => Some((number, n)),
            _ => None,
        })
        .collect();
    wals.sort();
    Ok(wals.into_iter().map(|(_, n)| dir.join(n)).collect())
}

fn dump_one_wal(path: &Path, full: bool, enc: Encoding, out: &mut dyn Write) -> Result<LogTail> {
    // NB: PointInTime never fails: it stops at the first damage and says in the tail whether
    // synced records follow it, which is the distinction this dump reports.
    let mut reader = LogReader::open(&PosixFs::new(), path, RecoveryMode::PointInTime)
        .with_context(|| format!("cannot read {}", path.display()))?;
    writeln!(out, "== {}", path.display())?;
    let mut records = 0u64;
    while let Some((offset, payload)) = reader.next_record()? {
        records += 1;
        write_wal_record(offset, payload, full, enc, out)?;
    }
    let tail = reader.tail();
    write_wal_tail(records, &tail, out)?;
    Ok(tail)
}

fn write_wal_record(
    offset: u64,
    payload: &[u8],
    full: bool,
    enc: Encoding,
    out: &mut dyn Write,
) -> Result<()> {
    let Some((seq, batch)) = WriteBatch::decode(payload) else {
        let n = payload.len();
        writeln!(out, "@{offset}: not a valid write batch ({n} bytes)")?;
        return Ok(());
    };
    let n = batch.len();
    writeln!(
        out,
        "@{offset}: seq {seq}, {n} ops, {} bytes",
        payload.len()
    )?;
    for op in batch.iter() {
        match op? {
            BatchOp::Put(k, v) => {
                writeln!(out, "  PUT {} => {}", enc.show(k), enc.show_value(v, full))?
            }
            BatchOp::Delete(k) => writeln!(out, "  DELETE {}", enc.show(k))?,
        }
    }
    Ok(())
}

fn write_wal_tail(records: u64, tail: &LogTail, out: &mut dyn Write) -> Result<()> {
    let Some((offset, what)) = &tail.damage else {
        writeln!(
            out,
            "end: clean, {records} records, {} bytes",
            tail.clean_end
        )?;
        return Ok(());
    };
    let verdict = if tail.synced_data_after_damage {
        "CORRUPTION: synced records follow the damage"
    } else {
        "torn tail, as a crash leaves it (recovery drops it)"
    };
    writeln!(
        out,
        "end: {records} records, then damage at offset {offset}: {what}; {} bytes dropped; {verdict}",
        tail.dropped_bytes
    )?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// SST
// ---------------------------------------------------------------------------------------------

/// `dump-sst`: properties, the first index entries and the first data entries.
pub fn sst(args: &DumpSstArgs, enc: Encoding, out: &mut dyn Write) -> Result<u8> {
    let path = &args.file;
    // NB: a table of a zoned tier is read from the tier's zones.
    let file = crate::zones::open_file(path)?;
    let table = Table::open(file, path)?;
    writeln!(out, "file: {}", path.display())?;
    write_properties(&table, enc, out)?;
    write_index(&table, args.limit, enc, out)?;
    write_entries(&table, args, enc, out)?;
    if args.verify {
        let blocks = table.verify_checksums()?;
        writeln!(out, "verified: {blocks} blocks, every checksum matches")?;
    }
    Ok(OK)
}

fn write_properties(table: &Table, enc: Encoding, out: &mut dyn Write) -> Result<()> {
    let p = table.properties();
    let lines = [
        ("file size", human_bytes(p.file_size)),
        ("format version", p.format_version.to_string()),
        ("compression", p.compression.to_string()),
        (
            "entries",
            format!("{} ({} deletions)", p.num_entries, p.num_deletions),
        ),
        ("smallest key", enc.show_internal_key(&p.smallest_key)),
        ("largest key", enc.show_internal_key(&p.largest_key)),
        ("sequence", format!("{}..{}", p.smallest_seq, p.largest_seq)),
        ("raw key bytes", human_bytes(p.raw_key_bytes)),
        ("raw value bytes", human_bytes(p.raw_value_bytes)),
        (
            "data blocks",
            format!("{}, {}", p.num_data_blocks, human_bytes(p.data_bytes)),
        ),
        ("index block", human_bytes(p.index_bytes)),
        ("filter block", human_bytes(p.filter_bytes)),
    ];
    writeln!(out, "properties:")?;
    for (name, value) in lines {
        writeln!(out, "  {name:<16} {value}")?;
    }
    Ok(())
}

fn write_index(table: &Table, limit: usize, enc: Encoding, out: &mut dyn Write) -> Result<()> {
    let index = table.index_entries();
    writeln!(out, "index: {} blocks", index.len())?;
    for (i, (sep, offset, size)) in index.iter().take(limit).enumerate() {
        let sep = enc.show_internal_key(sep);
        writeln!(
            out,
            "  block {i}: offset {offset}, {size} bytes, up to {sep}"
        )?;
    }
    write_more(index.len(), limit, out)
}

fn write_entries(
    table: &Table,
    args: &DumpSstArgs,
    enc: Encoding,
    out: &mut dyn Write,
) -> Result<()> {
    let total = table.properties().num_entries as usize;
    writeln!(out, "entries: {total}")?;
    let mut it = table.iter();
    it.seek_to_first();
    let mut shown = 0;
    while it.valid() && shown < args.limit {
        let key = enc.show_internal_key(it.key());
        let is_put = parse_internal_key(it.key()).is_some_and(|p| p.kind == ValueKind::Value);
        if is_put {
            let value = enc.show_value(it.value(), args.full_values);
            writeln!(out, "  {key} => {value}")?;
        } else {
            writeln!(out, "  {key}")?;
        }
        shown += 1;
        it.next();
    }
    it.status()?;
    write_more(total, args.limit, out)
}

fn write_more(total: usize, shown: usize, out: &mut dyn Write) -> Result<()> {
    if total > shown {
        writeln!(out, "  ... and {} more", total - shown)?;
    }
    Ok(())
}
