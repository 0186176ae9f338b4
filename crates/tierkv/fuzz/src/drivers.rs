//! One driver per decoder: each takes arbitrary bytes, feeds them (or a structure built from
//! them) to the decoder through the entry point the engine or `tierkv::inspect` uses, and
//! panics if the decoder panics, returns an error that is not `Corruption` or
//! `InvalidArgument`, or accepts bytes that do not survive a round trip.
//!
//! Checksums stop a fuzzer cold, so where a format is checksummed the driver usually repairs
//! the checksums of what it built and lets a control byte leave them as they are: the checks
//! behind the checksum get fuzzed, and so does the checksum test itself.
//!
//! This file is also compiled into `crates/tierkv/tests/fuzz_regressions.rs` (by `#[path]`),
//! which replays the stored inputs under `crates/tierkv/fuzz/regressions/<target>/` on stable
//! Rust; it depends only on `tierkv` and `crc32c`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{FaultFs, Fs};
use tierkv::inspect::{
    decode_append_record, decode_footer, decode_hot_slot, decode_index, decode_properties,
    decode_split_value, decode_stored_block, decode_value_log_state, decode_value_record,
    decode_version_edit, encode_split_value, read_area, read_hot_journal, read_hot_partitions,
    read_identity, read_zoned_device, replay_logs, scan_zonefs_journal, BlockView, FilterView,
    InternalIterator, LogReader, RecoveredManifest, SplitValue, Table, VersionEdit,
};
use tierkv::{BatchOp, Error, Options, RecoveryMode, WriteBatch};

/// A driver: takes one fuzz input, panics on a finding.
pub type Driver = fn(&[u8]);

/// Every target, by name: the names of `fuzz_targets/*.rs` and of the regression folders.
pub const TARGETS: &[(&str, Driver)] = &[
    ("wal_log", wal_log),
    ("wal_area", wal_area),
    ("sst_block", sst_block),
    ("sst_index", sst_index),
    ("sst_filter", sst_filter),
    ("sst_footer", sst_footer),
    ("sst_properties", sst_properties),
    ("sst_table", sst_table),
    ("manifest_edit", manifest_edit),
    ("write_batch", write_batch),
    ("tier_current", tier_current),
    ("options_toml", options_toml),
    ("wal_append", wal_append),
    ("wal_zoned", wal_zoned),
    ("hot_slot", hot_slot),
    ("hot_journal", hot_journal),
    ("hot_partitions", hot_partitions),
    ("vlog_value", vlog_value),
    ("vlog_state", vlog_state),
    ("zonefs_journal", zonefs_journal),
];

/// A rejection must say what kind of bad input it was.
fn typed(e: &Error) {
    assert!(
        matches!(e, Error::Corruption { .. } | Error::InvalidArgument(_)),
        "untyped rejection: {e:?}"
    );
}

fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Splits off the first byte (0 for empty input).
fn control(data: &[u8]) -> (u8, &[u8]) {
    match data.split_first() {
        Some((&c, rest)) => (c, rest),
        None => (0, data),
    }
}

// --- log records (WAL files and the MANIFEST) ------------------------------------------------

/// Appends one log record (`docs/log-format.md`): header checksum, length, synced-through
/// watermark, payload checksum, payload.
fn put_record(dst: &mut Vec<u8>, payload: &[u8], synced_through: u64) {
    let mut header = Vec::with_capacity(20);
    header.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    header.extend_from_slice(&synced_through.to_le_bytes());
    header.extend_from_slice(&crc(payload).to_le_bytes());
    dst.extend_from_slice(&crc(&header).to_le_bytes());
    dst.extend_from_slice(&header);
    dst.extend_from_slice(payload);
}

/// Builds a log from `data`: each piece is a length byte and that many payload bytes, framed
/// as a valid record whose watermark is either 0 or the record's own offset (a sync before it).
fn framed_log(data: &[u8]) -> Vec<u8> {
    let mut log = Vec::new();
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = (n as usize & 0x7f).min(tail.len());
        let synced = if n & 1 == 1 { log.len() as u64 } else { 0 };
        put_record(&mut log, &tail[..n], synced);
        rest = &tail[n..];
    }
    log
}

/// Reads `log` in every recovery mode; every record's payload is decoded as a write batch, as
/// WAL replay does.
fn read_log(log: &[u8]) {
    for mode in RecoveryMode::ALL {
        let mut reader = LogReader::from_bytes(log.to_vec(), PathBuf::from("fuzz.log"), mode);
        let mut last_end = 0u64;
        loop {
            match reader.next_record() {
                Ok(Some((offset, payload))) => {
                    assert!(offset >= last_end, "records overlap");
                    last_end = offset + 20 + payload.len() as u64;
                    assert!(last_end <= log.len() as u64);
                    if let Some((_, batch)) = WriteBatch::decode(payload) {
                        check_batch(&batch);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    typed(&e);
                    let again = reader
                        .next_record()
                        .expect_err("a failed reader stays failed");
                    typed(&again);
                    break;
                }
            }
        }
        let tail = reader.tail();
        assert!(tail.clean_end <= log.len() as u64);
        assert!(tail.dropped_bytes <= log.len() as u64);
    }
}

/// The WAL's record reader. Control byte bit 0: the input is the raw log; else the rest is
/// framed into valid records ([`framed_log`]) and, by the control byte's other bits, one byte
/// of it is flipped or the log is cut short.
pub fn wal_log(data: &[u8]) {
    let (c, rest) = control(data);
    if c & 1 == 1 {
        return read_log(rest);
    }
    let (edit, rest) = rest.split_at(rest.len().min(2));
    let mut log = framed_log(rest);
    let at = edit.iter().fold(0usize, |a, &b| a << 8 | b as usize);
    if !log.is_empty() {
        match c >> 1 & 3 {
            1 => {
                let i = at % log.len();
                log[i] ^= 1 << (c >> 3 & 7);
            }
            2 => log.truncate(at % log.len()),
            _ => {}
        }
    }
    read_log(&log);
}

// --- write batches ---------------------------------------------------------------------------

fn check_batch(batch: &WriteBatch) {
    let mut n = 0;
    let mut bytes = 0u64;
    for op in batch.iter() {
        match op.expect("a decoded batch's operations decode") {
            BatchOp::Put(k, v) => bytes += (k.len() + v.len()) as u64,
            BatchOp::Delete(k) => bytes += k.len() as u64,
        }
        n += 1;
    }
    assert_eq!(n, batch.len());
    assert_eq!(bytes, batch.user_bytes());
    if let Err(e) = batch.validate() {
        typed(&e);
    }
}

/// A WAL record's payload: first sequence, count and entries must decode exactly, and a
/// decoded batch re-encodes to the same operations.
pub fn write_batch(data: &[u8]) {
    let Some((_, batch)) = WriteBatch::decode(data) else {
        return;
    };
    check_batch(&batch);
    let mut copy = WriteBatch::new();
    for op in batch.iter() {
        match op.expect("checked") {
            BatchOp::Put(k, v) => copy.put(k, v),
            BatchOp::Delete(k) => copy.delete(k),
        }
    }
    assert!(copy.iter().map(|o| o.ok()).eq(batch.iter().map(|o| o.ok())));
    assert_eq!(copy.len(), batch.len());
}

// --- the parallel WAL's area -----------------------------------------------------------------

const PAGE: usize = 4096;
const PAGE_HEADER: usize = 24;

/// Repairs the checksums of an area file: the metadata pages, every entry found in the pages'
/// payload stream, then every page.
fn repair_area(file: &mut [u8]) {
    for meta in file.chunks_exact_mut(PAGE).take(2) {
        let sum = crc(&meta[16..]);
        meta[12..16].copy_from_slice(&sum.to_le_bytes());
    }
    let pages: Vec<usize> = (2..file.len() / PAGE).collect();
    // The payload stream: (file offset, byte) of every payload byte, page after page.
    let mut stream: Vec<usize> = Vec::new();
    for &p in &pages {
        let at = p * PAGE;
        let used = u16::from_le_bytes([file[at + 12], file[at + 13]]) as usize;
        let used = used.min(PAGE - PAGE_HEADER);
        stream.extend((0..used).map(|i| at + PAGE_HEADER + i));
    }
    let mut pos = 0;
    while pos + 8 <= stream.len() {
        let byte = |i: usize| file[stream[pos + i]];
        let len = u32::from_le_bytes([byte(0), byte(1), byte(2), byte(3)]) as usize;
        let Some(body) = stream.get(pos + 8..pos + 8 + len) else {
            break;
        };
        let payload: Vec<u8> = body.iter().map(|&o| file[o]).collect();
        for (i, b) in crc(&payload).to_le_bytes().into_iter().enumerate() {
            file[stream[pos + 4 + i]] = b;
        }
        pos += 8 + len;
    }
    for &p in &pages {
        let page = &mut file[p * PAGE..(p + 1) * PAGE];
        let sum = crc32c::crc32c_append(crc(&page[0..8]), &page[12..]);
        page[8..12].copy_from_slice(&sum.to_le_bytes());
    }
}

/// The parallel WAL's area, read as recovery reads it (`inspect::read_area`). Control byte:
/// bit 0 leaves the checksums as they are; bits 1-2 pick the recovery mode; bits 3-7 are the
/// log number. The rest is the area file, padded with zeros to whole pages.
pub fn wal_area(data: &[u8]) {
    let (c, rest) = control(data);
    let mut file = rest.to_vec();
    file.resize(file.len().div_ceil(PAGE) * PAGE, 0);
    if c & 1 == 0 {
        repair_area(&mut file);
    }
    if let Some(meta) = file.get(..PAGE) {
        let _ = tierkv::inspect::AreaMeta::decode(meta);
    }
    let fs = FaultFs::new(0);
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("in memory");
    let path = dir.join("WAL-AREA");
    fs.write_raw(&path, &file);
    let mode = RecoveryMode::ALL[(c >> 1 & 3) as usize];
    match read_area(fs.as_ref(), &path, (c >> 3) as u64, mode) {
        Ok(rec) => {
            for b in &rec.batches {
                check_batch(&b.batch);
            }
            if mode != RecoveryMode::SkipAnyCorruptedRecords {
                for w in rec.batches.windows(2) {
                    assert_eq!(
                        w[0].seq.checked_add(w[0].batch.len() as u64),
                        Some(w[1].seq),
                        "recovered history has a gap"
                    );
                }
            }
        }
        Err(e) => typed(&e),
    }
}

// --- tables ----------------------------------------------------------------------------------

/// Appends a block trailer (compression type `ty`, checksum) to `stored`.
fn with_trailer(stored: &[u8], ty: u8) -> Vec<u8> {
    let mut raw = stored.to_vec();
    let sum = crc32c::crc32c_append(crc(stored), &[ty]);
    raw.push(ty);
    raw.extend_from_slice(&sum.to_le_bytes());
    raw
}

fn walk_block(view: &BlockView, target: &[u8]) {
    let forward = view.entries();
    let backward = view.entries_backward();
    if let Err(e) = &forward {
        typed(e);
    }
    if let Err(e) = &backward {
        typed(e);
    }
    if let Err(e) = view.seek(target) {
        typed(&e);
    }
    if let Ok(entries) = &forward {
        // Seeking to a stored key must not fail on a block that reads through cleanly.
        for (key, _) in entries.iter().take(8) {
            if let Err(e) = view.seek(key) {
                typed(&e);
            }
        }
    }
}

/// A data block as a table stores it. Control byte: bits 0-1 the compression type written in
/// the trailer (0 none, 1 lz4, 2 zstd, 3 unknown); bit 2 leaves the input's own trailer; the
/// next 8 bytes are a seek target. The decoded contents are walked forward, backward and by
/// seeks.
pub fn sst_block(data: &[u8]) {
    let (c, rest) = control(data);
    let (target, stored) = rest.split_at(rest.len().min(8));
    let raw = if c & 4 == 0 {
        with_trailer(stored, c & 3)
    } else {
        stored.to_vec()
    };
    match decode_stored_block(&raw) {
        Ok(contents) => match BlockView::decode(contents) {
            Ok(view) => walk_block(&view, target),
            Err(e) => typed(&e),
        },
        Err(e) => typed(&e),
    }
    // The bytes as contents too: most inputs are not compressed blocks.
    match BlockView::decode(stored.to_vec()) {
        Ok(view) => walk_block(&view, target),
        Err(e) => typed(&e),
    }
}

/// An index block's contents: every handle must decode or be rejected.
pub fn sst_index(data: &[u8]) {
    match decode_index(data.to_vec()) {
        Ok(entries) => {
            for (_, h) in entries {
                let mut enc = Vec::new();
                h.encode_varint(&mut enc);
                assert_eq!(tierkv::inspect::BlockHandle::decode_varint(&enc), Some(h));
            }
        }
        Err(e) => typed(&e),
    }
}

/// A bloom filter block's contents, probed with keys taken from the input.
pub fn sst_filter(data: &[u8]) {
    match FilterView::decode(data.to_vec()) {
        Ok(filter) => {
            for key in data.chunks(7).take(16) {
                let _ = filter.may_contain(key);
            }
            let _ = filter.may_contain(b"");
        }
        Err(e) => typed(&e),
    }
}

/// A table footer. Control byte bit 0: repair its checksum (and magic) first. A decoded
/// footer encodes back to the same bytes.
pub fn sst_footer(data: &[u8]) {
    let (c, rest) = control(data);
    let mut footer = rest.to_vec();
    if c & 1 == 1 && footer.len() == 64 {
        footer[56..].copy_from_slice(b"tierkvst");
        let sum = crc(&footer[..52]);
        footer[52..56].copy_from_slice(&sum.to_le_bytes());
    }
    match decode_footer(&footer) {
        Ok(f) => assert_eq!(f.encode(), footer),
        Err(e) => typed(&e),
    }
}

/// A properties block's contents. A decoded block encodes to bytes that decode the same.
pub fn sst_properties(data: &[u8]) {
    match decode_properties(data) {
        Ok(p) => {
            let again = decode_properties(&p.encode()).expect("re-encoded properties decode");
            assert_eq!(again, p);
        }
        Err(e) => typed(&e),
    }
    // A stored properties block: trailer, then contents.
    if let Ok(contents) = decode_stored_block(&with_trailer(data, 0)) {
        assert_eq!(contents, data);
    }
}

/// Repairs the checksums of a table file: the footer (and its magic and version), the
/// trailers of the blocks it names, and those of the data blocks the index names.
fn repair_table(file: &mut [u8]) {
    let Some(footer_at) = file.len().checked_sub(64) else {
        return;
    };
    let footer = &mut file[footer_at..];
    footer[48..52].copy_from_slice(&1u32.to_le_bytes());
    footer[56..].copy_from_slice(b"tierkvst");
    let sum = crc(&footer[..52]);
    footer[52..56].copy_from_slice(&sum.to_le_bytes());
    let handle = |at: usize| {
        let h = &file[footer_at + at..footer_at + at + 16];
        let offset = u64::from_le_bytes(h[..8].try_into().expect("8 bytes"));
        let size = u64::from_le_bytes(h[8..].try_into().expect("8 bytes"));
        (offset, size)
    };
    let (filter, index, props) = (handle(0), handle(16), handle(32));
    let repair = |file: &mut [u8], (offset, size): (u64, u64)| -> Option<Vec<u8>> {
        let end = offset.checked_add(size)?.checked_add(5)?;
        if end > footer_at as u64 {
            return None;
        }
        let (offset, size) = (offset as usize, size as usize);
        let ty = file[offset + size];
        let sum = crc32c::crc32c_append(crc(&file[offset..offset + size]), &[ty]);
        file[offset + size + 1..offset + size + 5].copy_from_slice(&sum.to_le_bytes());
        Some(file[offset..offset + size + 5].to_vec())
    };
    // A filter handle of size 0 means no filter: nothing there to repair.
    if filter.1 > 0 {
        repair(file, filter);
    }
    repair(file, props);
    let Some(raw) = repair(file, index) else {
        return;
    };
    let Ok(entries) = decode_stored_block(&raw).and_then(decode_index) else {
        return;
    };
    for (_, h) in entries.iter().take(1024) {
        repair(file, (h.offset, h.size));
    }
}

/// A whole table file opened as the engine opens one (`inspect::Table::open`: footer,
/// properties, index, filter), then read forward, backward and by seeks, and verified.
/// Control byte bit 0 leaves the checksums as they are.
pub fn sst_table(data: &[u8]) {
    let (c, rest) = control(data);
    let mut file = rest.to_vec();
    if c & 1 == 0 {
        repair_table(&mut file);
    }
    let fs = FaultFs::new(0);
    let dir = Path::new("/t");
    fs.create_dir_all(dir).expect("in memory");
    let path = dir.join("000001.sst");
    fs.write_raw(&path, &file);
    let table = match Table::open(fs.open_read(&path).expect("written"), &path) {
        Ok(t) => t,
        Err(e) => return typed(&e),
    };
    let _ = (table.properties(), table.index_entries());
    let mut it = table.iter();
    let mut keys = Vec::new();
    it.seek_to_first();
    while it.valid() && keys.len() < 4096 {
        keys.push(it.key().to_vec());
        it.next();
    }
    if let Err(e) = it.status() {
        typed(&e);
    }
    it.seek_to_last();
    for _ in 0..4096 {
        if !it.valid() {
            break;
        }
        it.prev();
    }
    if let Err(e) = it.status() {
        typed(&e);
    }
    for k in keys.iter().step_by(keys.len() / 8 + 1) {
        let mut it = table.iter();
        it.seek(k);
        if let Err(e) = it.status() {
            typed(&e);
        }
    }
    if let Err(e) = table.verify_checksums() {
        typed(&e);
    }
}

// --- the MANIFEST, CURRENT and TIER ----------------------------------------------------------

fn check_edit(payload: &[u8]) {
    match decode_version_edit(payload) {
        Ok(edit) => {
            let again = VersionEdit::decode(&edit.encode()).expect("re-encoded edit decodes");
            assert_eq!(again, edit);
        }
        Err(e) => typed(&e),
    }
}

/// Writes `current` as CURRENT and `manifest` as MANIFEST-000001 and reads them as open does.
fn read_manifest(current: &[u8], manifest: &[u8]) {
    let fs = FaultFs::new(0);
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("in memory");
    fs.write_raw(&dir.join("CURRENT"), current);
    fs.write_raw(&dir.join("MANIFEST-000001"), manifest);
    let fs: Arc<dyn Fs> = fs;
    match RecoveredManifest::read(fs.as_ref(), dir) {
        Ok(Some(m)) => assert!(!m.edits.is_empty()),
        Ok(None) => panic!("CURRENT exists"),
        Err(e) => typed(&e),
    }
}

/// MANIFEST edits. The input is split into record payloads as [`framed_log`] does; each is
/// decoded as an edit, and the framed log is read as a MANIFEST through CURRENT.
pub fn manifest_edit(data: &[u8]) {
    check_edit(data);
    let mut rest = data;
    while let Some((&n, tail)) = rest.split_first() {
        let n = (n as usize & 0x7f).min(tail.len());
        check_edit(&tail[..n]);
        rest = &tail[n..];
    }
    read_manifest(b"MANIFEST-000001\n", &framed_log(data));
}

/// A valid MANIFEST: one edit naming the database and its tiers.
fn valid_manifest() -> Vec<u8> {
    let edit = VersionEdit {
        db_id: Some("fuzz".into()),
        tiers: Some(vec!["fast".into()]),
        format_version: Some(1),
        log_number: Some(2),
        next_file_number: Some(3),
        last_sequence: Some(0),
        ..VersionEdit::default()
    };
    let mut log = Vec::new();
    put_record(&mut log, &edit.encode(), 0);
    log
}

/// The TIER identity file and CURRENT. The input up to the first zero byte is a TIER file,
/// the rest is CURRENT (naming a valid MANIFEST when it says `MANIFEST-000001`); both are
/// also parsed as file names.
pub fn tier_current(data: &[u8]) {
    let split = data.iter().position(|&b| b == 0).unwrap_or(data.len());
    let (tier, current) = (&data[..split], data.get(split + 1..).unwrap_or_default());
    let fs = FaultFs::new(0);
    let dir = Path::new("/t");
    fs.create_dir_all(dir).expect("in memory");
    fs.write_raw(&dir.join("TIER"), tier);
    match read_identity(fs.as_ref(), dir) {
        Ok(Some((id, name))) => assert!(!id.contains('\n') && !name.contains('\n')),
        Ok(None) => panic!("TIER exists"),
        Err(e) => typed(&e),
    }
    read_manifest(current, &valid_manifest());
    for text in [tier, current] {
        if let Ok(name) = std::str::from_utf8(text) {
            let _ = tierkv::inspect::parse_file_name(name);
        }
    }
}

// --- options ---------------------------------------------------------------------------------

/// TOML options: any text parses and validates, or is rejected as `InvalidArgument`.
pub fn options_toml(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Options::from_toml_str(text) {
        Ok(opts) => {
            let _ = format!("{opts:?}");
        }
        Err(e) => assert!(matches!(e, Error::InvalidArgument(_)), "{e:?}"),
    }
}

// --- the append WAL and the zoned WAL --------------------------------------------------------

/// Bytes of an append-WAL record header: crc, payload length, log number, synced-through.
const APPEND_HEADER: usize = 24;

/// Appends one append-WAL record (`docs/append-wal.md`), padded to 8 bytes.
fn put_append_record(dst: &mut Vec<u8>, log: u64, synced: u64, payload: &[u8]) {
    let start = dst.len();
    dst.extend_from_slice(&[0; 4]);
    dst.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    dst.extend_from_slice(&log.to_le_bytes());
    dst.extend_from_slice(&synced.to_le_bytes());
    dst.extend_from_slice(payload);
    let sum = crc(&dst[start + 4..]);
    dst[start..start + 4].copy_from_slice(&sum.to_le_bytes());
    dst.resize(start + (APPEND_HEADER + payload.len()).div_ceil(8) * 8, 0);
}

/// Checks what a replay returned: every batch well formed and, unless records may be
/// skipped, one history without gaps.
fn check_replay(found: &[(u64, WriteBatch)], mode: RecoveryMode) {
    for (_, b) in found {
        check_batch(b);
    }
    if mode != RecoveryMode::SkipAnyCorruptedRecords {
        for w in found.windows(2) {
            assert_eq!(
                w[0].0.checked_add(w[0].1.len() as u64),
                Some(w[1].0),
                "replayed history has a gap"
            );
        }
    }
}

/// Decodes every append record laid end to end in `data`, as a dump would.
fn walk_append_records(data: &[u8]) {
    let mut at = 0usize;
    while at < data.len() {
        match decode_append_record(&data[at..]) {
            Ok(r) => {
                check_batch(&r.batch);
                assert!(r.len >= APPEND_HEADER as u64 && r.len % 8 == 0);
                at += r.len as usize;
            }
            Err(e) => return typed(&e),
        }
    }
}

/// The append WAL: records decoded one by one, then log files replayed as open replays them.
/// Control byte: bit 0 takes the rest as the raw bytes of log 5; else the rest is pieces (a
/// length byte, then that many payload bytes) framed as valid records, split between logs 5
/// and 6 at the piece whose length byte has its top bit set, each record's watermark 0 or the
/// sequence its payload starts at. Bits 1-2 pick the recovery mode; bits 3-7 the log number
/// replay starts from.
pub fn wal_append(data: &[u8]) {
    let (c, rest) = control(data);
    let mut logs: Vec<(u64, Vec<u8>)> = Vec::new();
    if c & 1 == 1 {
        logs.push((5, rest.to_vec()));
    } else {
        let mut log = (5u64, Vec::new());
        let mut tail = rest;
        while let Some((&n, after)) = tail.split_first() {
            if n & 0x80 != 0 && log.0 == 5 {
                logs.push(std::mem::replace(&mut log, (6, Vec::new())));
            }
            let n = (n as usize & 0x7f).min(after.len());
            let payload = &after[..n];
            let seq = payload
                .get(..8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8 bytes")));
            let synced = if n & 1 == 1 { seq } else { 0 };
            put_append_record(&mut log.1, log.0, synced, payload);
            tail = &after[n..];
        }
        logs.push(log);
    }
    for (_, bytes) in &logs {
        walk_append_records(bytes);
    }
    let fs = FaultFs::new(0);
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("in memory");
    for (number, bytes) in &logs {
        fs.write_raw(&dir.join(format!("{number:06}.alog")), bytes);
    }
    let mode = RecoveryMode::ALL[(c >> 1 & 3) as usize];
    match replay_logs(fs.as_ref(), dir, (c >> 3) as u64, mode) {
        Ok(found) => check_replay(&found, mode),
        Err(e) => typed(&e),
    }
}

/// The geometry a zoned device's superblock records, if it is one the repair can walk:
/// (LBA, zone size, zone capacity, zones).
fn zoned_geometry(file: &[u8]) -> Option<(usize, usize, usize, usize)> {
    let u64_at = |at: usize| -> Option<usize> {
        usize::try_from(u64::from_le_bytes(file.get(at..at + 8)?.try_into().ok()?)).ok()
    };
    let lba = u64_at(12)?;
    let zone_size = u64_at(20)?;
    let capacity = u64_at(28)?;
    let zones = u32::from_le_bytes(file.get(36..40)?.try_into().ok()?) as usize;
    // Only geometries that fit the input: anything larger is rejected before any zone is read.
    let sane = lba.is_power_of_two()
        && (512..=file.len()).contains(&lba)
        && (1..=file.len()).contains(&zone_size)
        && capacity <= zone_size;
    sane.then(|| (lba, zone_size, capacity, zones.min(file.len() / zone_size)))
}

/// Repairs the checksums of an emulated zoned device: its superblock, every zone-table entry
/// carrying the entry marker, and every append record found by walking each zone as the
/// zoned WAL's recovery walks it (a record, then the next LBA after it).
fn repair_zoned(file: &mut [u8]) {
    const SUPER_BODY: usize = 40;
    if file.len() < SUPER_BODY + 4 {
        return;
    }
    let sum = crc(&file[..SUPER_BODY]);
    file[SUPER_BODY..SUPER_BODY + 4].copy_from_slice(&sum.to_le_bytes());
    let Some((lba, zone_size, capacity, zones)) = zoned_geometry(file) else {
        return;
    };
    let table_lbas = (zones * 8).div_ceil(lba);
    for z in 0..zones {
        let at = lba + z * 8;
        if let Some(entry) = file.get_mut(at..at + 8) {
            if entry[1..4] == [0xA5; 3] {
                let sum = crc(&entry[..4]);
                entry[4..].copy_from_slice(&sum.to_le_bytes());
            }
        }
    }
    let data_start = lba * (1 + table_lbas);
    for z in 0..zones {
        let start = data_start + z * zone_size;
        let Some(zone) = file.get_mut(start..start + capacity) else {
            break;
        };
        let mut offset = 0;
        while offset + APPEND_HEADER <= zone.len() {
            let len = u32::from_le_bytes(zone[offset + 4..offset + 8].try_into().expect("4"));
            let end = offset + APPEND_HEADER + len as usize;
            if len == 0 || end > zone.len() {
                offset += lba;
                continue;
            }
            let sum = crc(&zone[offset + 4..end]);
            zone[offset..offset + 4].copy_from_slice(&sum.to_le_bytes());
            offset += (APPEND_HEADER + len as usize).div_ceil(8) * 8;
            offset = offset.div_ceil(lba) * lba;
        }
    }
}

/// The zoned WAL's device (`WALZONES`: superblock, zone table, zones of append records),
/// opened as recovery opens it and replayed. Control byte: bit 0 leaves the checksums as they
/// are; bits 1-2 pick the recovery mode; bits 3-7 the log number replay starts from. The rest
/// is the device file.
pub fn wal_zoned(data: &[u8]) {
    let (c, rest) = control(data);
    let mut file = rest.to_vec();
    if c & 1 == 0 {
        repair_zoned(&mut file);
    }
    let fs = FaultFs::new(0);
    let dir = Path::new("/db");
    fs.create_dir_all(dir).expect("in memory");
    let path = dir.join("WALZONES");
    fs.write_raw(&path, &file);
    match read_zoned_device(fs.as_ref(), &path) {
        Ok(zones) => {
            for z in &zones {
                assert!(
                    z.write_pointer as usize <= file.len(),
                    "write pointer past the file"
                );
            }
        }
        Err(e) => typed(&e),
    }
    let mode = RecoveryMode::ALL[(c >> 1 & 3) as usize];
    match replay_logs(fs.as_ref(), dir, (c >> 3) as u64, mode) {
        Ok(found) => check_replay(&found, mode),
        Err(e) => typed(&e),
    }
}

// --- the hot store ---------------------------------------------------------------------------

/// Slot sizes of the hot store's size classes (`docs/hot-tier.md`).
const SLOT_SIZES: [usize; 13] = [
    100, 200, 300, 400, 500, 600, 700, 800, 900, 1000, 1360, 2048, 4096,
];
/// Bytes of a slot header: crc, seq, kind, key length, value length.
const SLOT_HEADER: usize = 19;

/// One hot-store slot. Control byte: bits 0-3 pick the slot's size class (13 and above: the
/// input's own length); bit 4 leaves the checksum as it is. A decoded slot re-encodes to the
/// bytes it was decoded from.
pub fn hot_slot(data: &[u8]) {
    let (c, rest) = control(data);
    let mut slot = rest.to_vec();
    if let Some(&size) = SLOT_SIZES.get((c & 15) as usize) {
        slot.resize(size, 0);
    }
    if c & 16 == 0 && slot.len() >= SLOT_HEADER {
        let key_len = u16::from_le_bytes([slot[13], slot[14]]) as usize;
        let value_len = u32::from_le_bytes(slot[15..19].try_into().expect("4")) as usize;
        let end = SLOT_HEADER + key_len + value_len;
        if end <= slot.len() {
            let sum = crc(&slot[4..end]);
            slot[..4].copy_from_slice(&sum.to_le_bytes());
        }
    }
    match decode_hot_slot(&slot) {
        Ok(Some(s)) => {
            let end = SLOT_HEADER + s.key.len() + s.value.len();
            assert!(end <= slot.len(), "slot contents past the slot");
            assert_eq!(s.seq.to_le_bytes(), slot[4..12]);
            assert_eq!(s.key, slot[SLOT_HEADER..SLOT_HEADER + s.key.len()]);
            assert_eq!(s.value, slot[SLOT_HEADER + s.key.len()..end]);
        }
        Ok(None) => assert!(slot[..SLOT_HEADER].iter().all(|&b| b == 0)),
        Err(e) => typed(&e),
    }
}

/// The hot store's `HOT-JOURNAL`. Control byte bit 0 leaves the page checksums as they are;
/// else every page image the journal's count announces has its checksum repaired.
pub fn hot_journal(data: &[u8]) {
    const PAGE: usize = 4096;
    const ENTRY: usize = 14;
    let (c, rest) = control(data);
    let mut file = rest.to_vec();
    if c & 1 == 0 && file.len() >= 28 {
        let mut at = 28;
        while at + ENTRY + PAGE <= file.len() {
            let sum = crc(&file[at + ENTRY..at + ENTRY + PAGE]);
            file[at + 10..at + 14].copy_from_slice(&sum.to_le_bytes());
            at += ENTRY + PAGE;
        }
    }
    let fs = FaultFs::new(0);
    let dir = Path::new("/db/hot");
    fs.create_dir_all(dir).expect("in memory");
    let path = dir.join("HOT-JOURNAL");
    fs.write_raw(&path, &file);
    match read_hot_journal(fs.as_ref(), &path) {
        Ok(Some(j)) => {
            // Bytes past the pages the count announces are ignored, never read as pages.
            assert!(file.len() >= 28 + j.pages.len() * (ENTRY + PAGE));
            for (class, _, image) in &j.pages {
                assert!(*class < SLOT_SIZES.len());
                assert_eq!(image.len(), PAGE);
            }
        }
        Ok(None) => panic!("the journal exists"),
        Err(e) => typed(&e),
    }
}

// --- the value log ---------------------------------------------------------------------------

/// Bytes of a value-log record header: crc, key length, value length.
const VLOG_HEADER: usize = 12;

/// A split value as the LSM stores it, and a value-log record. Control byte bit 0 leaves the
/// record's checksum as it is. The rest is decoded both as a tagged LSM value (which must
/// round-trip, and whose pointer must name a range that exists) and as one record read whole.
pub fn vlog_value(data: &[u8]) {
    let (c, rest) = control(data);
    match decode_split_value(rest) {
        Ok(v) => {
            if let SplitValue::Pointer { offset, len, .. } = v {
                assert!(
                    offset.checked_add(u64::from(len)).is_some(),
                    "pointer range overflows"
                );
            }
            let again = decode_split_value(&encode_split_value(&v)).expect("re-encoded value");
            assert_eq!(again, v);
        }
        Err(e) => typed(&e),
    }
    let mut rec = rest.to_vec();
    if c & 1 == 0 && rec.len() >= VLOG_HEADER {
        let sum = crc(&rec[4..]);
        rec[..4].copy_from_slice(&sum.to_le_bytes());
    }
    match decode_value_record(&rec) {
        Ok((key, value)) => {
            assert_eq!(VLOG_HEADER + key.len() + value.len(), rec.len());
            assert_eq!(key, rec[VLOG_HEADER..VLOG_HEADER + key.len()]);
        }
        Err(e) => typed(&e),
    }
}

/// The value-log collection state file (`VLOGGC`): no panic, every rejection typed, and what
/// is accepted decodes again to the same state once re-encoded. Control bit 0 set: the input's
/// checksum is left as it is (else repaired, so the fuzzer reaches the body).
pub fn vlog_state(data: &[u8]) {
    let (c, rest) = control(data);
    let mut state = rest.to_vec();
    if c & 1 == 0 && state.len() >= 4 {
        let sum = crc(&state[4..]);
        state[..4].copy_from_slice(&sum.to_le_bytes());
    }
    match decode_value_log_state(&state) {
        Ok(again) => assert_eq!(
            decode_value_log_state(&again).expect("re-encoded state"),
            again
        ),
        Err(e) => typed(&e),
    }
}

/// A ZoneFs metadata zone (`docs/zonefs.md`): decoded as recovery decodes it, with no panic,
/// a typed error only for a bad LBA size, and a zone that decodes starting with its snapshot.
/// Control byte: bit 0 picks 512-byte LBAs (else 4096); unless bit 1 is set, the first
/// commit's magic, body length and checksum are made to hold, so the records behind them are
/// reached.
pub fn zonefs_journal(data: &[u8]) {
    let (c, rest) = control(data);
    let lba = if c & 1 == 1 { 512 } else { 4096 };
    let mut zone = rest.to_vec();
    if c & 2 == 0 && zone.len() >= 20 {
        zone[..4].copy_from_slice(b"ZFJ1");
        let stated = u32::from_le_bytes(zone[12..16].try_into().expect("4")) as usize;
        let body_len = stated.min(zone.len() - 20);
        zone[12..16].copy_from_slice(&(body_len as u32).to_le_bytes());
        let mut covered = zone[4..16].to_vec();
        covered.extend_from_slice(&zone[20..20 + body_len]);
        let sum = crc(&covered);
        zone[16..20].copy_from_slice(&sum.to_le_bytes());
    }
    match scan_zonefs_journal(&zone, lba) {
        Ok(Some(j)) => assert_eq!(j.records.first(), Some(&"snapshot"), "{j:?}"),
        Ok(None) => {}
        Err(e) => typed(&e),
    }
}

/// The hot store's partition record (`hot/PARTITIONS`): any bytes read back either as the count
/// they spell exactly (in 2..=64, one newline) or as `Corruption`, never another count.
pub fn hot_partitions(data: &[u8]) {
    let fs = FaultFs::new(0);
    let dir = Path::new("/db/hot");
    fs.create_dir_all(dir).expect("in memory");
    fs.write_raw(&dir.join("PARTITIONS"), data);
    match read_hot_partitions(fs.as_ref(), dir) {
        Ok(n) => {
            assert!((2..=64).contains(&n), "count {n}");
            assert_eq!(data, format!("{n}\n").as_bytes());
        }
        Err(e) => typed(&e),
    }
}
