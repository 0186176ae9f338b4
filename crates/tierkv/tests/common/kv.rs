//! Keys, values, the `BTreeMap` model a database is checked against, and ways to compare them.

use std::collections::BTreeMap;
use std::fmt::Display;
use tierkv::{Db, DbIterator, ReadOptions, Result, WriteOptions};

/// What a database should hold, key by key.
pub type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One key-value pair as an iterator yields it.
pub type Entry = (Vec<u8>, Vec<u8>);

/// The key of record `i`: `key` and eight digits.
pub fn key(i: u32) -> Vec<u8> {
    format!("key{i:08}").into_bytes()
}

/// The key of record `i` (any unsigned integer): `key` and six digits.
pub fn key6(i: impl Display) -> Vec<u8> {
    format!("key{i:0>6}").into_bytes()
}

/// A value of about 90 bytes naming record `i` and its write `round`.
pub fn round_value(i: u32, round: u32) -> Vec<u8> {
    format!("r{round}-{i}-{}", "v".repeat(80)).into_bytes()
}

/// 1000 bytes determined by `i`.
pub fn value(i: u32) -> Vec<u8> {
    (0..1000u32)
        .map(|j| (i.wrapping_mul(31) ^ j.wrapping_mul(7)) as u8)
        .collect()
}

/// A 200-byte value starting `key=`: with its key and header a 300-byte hot-store slot, far
/// below a 4 KiB split threshold.
pub fn small_value(key: &str) -> Vec<u8> {
    let mut v = format!("{key}=").into_bytes();
    v.resize(200, b'.');
    v
}

/// An 8 KiB value starting `key=`: too large for a hot-store slot, above a 4 KiB split
/// threshold.
pub fn large_value(key: &str) -> Vec<u8> {
    let mut v = format!("{key}=").into_bytes();
    v.resize(8 << 10, b'#');
    v
}

/// `n` keys `<prefix>000`, `<prefix>001`, ...
pub fn names(prefix: &str, n: u32) -> Vec<String> {
    (0..n).map(|i| format!("{prefix}{i:03}")).collect()
}

/// The value of key `k`, if any.
pub fn get_named(db: &Db, k: &str) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), k.as_bytes()).unwrap()
}

/// Puts `value(k)` under each key, then flushes and waits for compactions.
pub fn put_named(db: &Db, keys: &[String], value: fn(&str) -> Vec<u8>) {
    let w = WriteOptions::default();
    for k in keys {
        db.put(&w, k.as_bytes(), &value(k)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_compactions().unwrap();
}

/// Reads `keys` once each (each must exist) and returns how many the hot store answered.
pub fn answered_by_store(db: &Db, keys: &[String]) -> u64 {
    let before = db.stats().hot_tier.expect("hot store on").reads_hot;
    for k in keys {
        assert!(get_named(db, k).is_some(), "{k} readable");
    }
    db.stats().hot_tier.expect("hot store on").reads_hot - before
}

/// Two flushes into a hot store: `k0`..`k9` (5-byte values, slots 0-9 of the 100-byte class),
/// then `other` (250 bytes) in a later job of another class, so the store's journal holds only
/// that job's pages.
pub fn write_two_slab_jobs(db: &Db) {
    for i in 0..10u32 {
        db.put(
            &WriteOptions::default(),
            format!("k{i}").as_bytes(),
            b"value",
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.put(&WriteOptions::default(), b"other", &[9; 250])
        .unwrap();
    db.flush().unwrap();
}

/// Everything the database holds, by a forward scan.
pub fn scan(db: &Db) -> Result<Model> {
    let mut it = db.iter(ReadOptions::default())?;
    it.seek_to_first();
    it.entries().collect()
}

/// Every entry of `it` from the first (or, `reverse`, from the last), in key order; fails the
/// test if the iterator ends in an error.
pub fn collect_entries(it: &mut DbIterator, reverse: bool, what: &str) -> Vec<Entry> {
    read_entries(it, reverse).unwrap_or_else(|e| panic!("{what}: iterator status: {e}"))
}

/// Every entry of `it` from the first (or, `reverse`, from the last), in key order, or the
/// iterator's error.
pub fn read_entries(it: &mut DbIterator, reverse: bool) -> Result<Vec<Entry>> {
    let mut out = Vec::new();
    if reverse {
        it.seek_to_last();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.prev();
        }
        out.reverse();
    } else {
        it.seek_to_first();
        while it.valid() {
            out.push((it.key().to_vec(), it.value().to_vec()));
            it.next();
        }
    }
    it.status()?;
    Ok(out)
}

/// Up to 24 bytes, escaped to ASCII, and the length if longer.
pub fn show_bytes(b: &[u8]) -> String {
    let head = b[..b.len().min(24)].escape_ascii();
    if b.len() > 24 {
        format!("\"{head}\"..({} bytes)", b.len())
    } else {
        format!("\"{head}\"")
    }
}

/// An entry as `key => value`, or `<end>`.
pub fn show_entry(e: Option<&Entry>) -> String {
    e.map_or_else(
        || "<end>".to_string(),
        |(k, v)| format!("{} => {}", show_bytes(k), show_bytes(v)),
    )
}

/// `got` must equal `want`; else fails naming the first entry where they differ.
#[track_caller]
pub fn assert_same_entries(what: &str, got: &[Entry], want: &[Entry]) {
    if got == want {
        return;
    }
    let i = got
        .iter()
        .zip(want)
        .position(|(g, w)| g != w)
        .unwrap_or(got.len().min(want.len()));
    panic!(
        "{what}: {} entries returned, {} expected; first difference at position {i}: \
         got {}, expected {}",
        got.len(),
        want.len(),
        show_entry(got.get(i)),
        show_entry(want.get(i)),
    );
}

/// A forward scan of `db` must hold exactly `model`.
#[track_caller]
pub fn assert_scan_matches(db: &Db, model: &Model, what: &str) {
    let state = scan(db).unwrap_or_else(|e| panic!("{what}: scan: {e}"));
    assert_eq!(state.len(), model.len(), "{what}: key count");
    assert!(
        state == *model,
        "{what}: the scan differs from what was written"
    );
}

/// A value of `len` bytes (at least its prefix) naming its key and version, so a read can tell
/// whose value it got.
pub fn versioned_value(key: &[u8], version: u64, len: usize) -> Vec<u8> {
    let mut v = format!("{}/{version}/", String::from_utf8_lossy(key)).into_bytes();
    v.extend((0..len.saturating_sub(v.len())).map(|j| (version as usize * 131 + j * 7) as u8));
    v
}
