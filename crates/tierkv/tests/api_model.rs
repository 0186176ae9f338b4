//! The read-side and transactional APIs against simple models: iterators, multi_get and
//! snapshots over the plain LSM, split values and the hot store; transaction conflicts in
//! every layer and WAL mode; empty writes; size limits through the asynchronous API and
//! transactions; asynchronous reads of a read-only open; value-log collection and conflicts.

mod common;

use common::{poll_for, small, split_small_files, tiny, TierSetup};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::time::Duration;
use tierkv::{Db, Error, ReadOptions, WalMode, WriteBatch, WriteOptions};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

// ---------------------------------------------------------------------------------------------
// Iterators, multi_get and snapshots against a sorted model

/// Keys chosen for edge cases: the empty key, prefixes of each other, 0x00 and 0xFF bytes.
const EDGE_KEYS: &[&[u8]] = &[
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x01",
    b"a",
    b"a\x00",
    b"a\xff",
    b"aa",
    b"ab",
    b"ab\x00",
    b"abc",
    b"b",
    b"\xfe\xff",
    b"\xff",
    b"\xff\x00",
    b"\xff\xff",
    b"\xff\xff\xff",
];

fn draw_key(rng: &mut SmallRng) -> Vec<u8> {
    if rng.gen_bool(0.5) {
        EDGE_KEYS[rng.gen_range(0..EDGE_KEYS.len())].to_vec()
    } else {
        // Many keys sharing prefixes, so tables hold several blocks.
        let n: u32 = rng.gen_range(0..400);
        let mut k = format!("k{n:03}").into_bytes();
        if rng.gen_bool(0.2) {
            k.push(0xff);
        }
        k
    }
}

fn draw_value(rng: &mut SmallRng, tag: u64, large: bool) -> Vec<u8> {
    let len = if large && rng.gen_bool(0.3) {
        rng.gen_range(150..600)
    } else {
        rng.gen_range(0..60)
    };
    let mut v = format!("v{tag}:").into_bytes();
    v.resize(v.len() + len, b'.');
    v
}

/// A bound to draw: an edge key, a model key, or a key between keys.
fn draw_bound(rng: &mut SmallRng) -> Vec<u8> {
    let mut k = draw_key(rng);
    match rng.gen_range(0..4) {
        0 => k.push(0),
        1 => k.push(0xff),
        _ => {}
    }
    k
}

/// A cursor over a frozen model with the documented semantics: `[lower, upper)`.
struct ModelCursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: Option<usize>,
}

impl ModelCursor {
    fn new(model: &Model, lower: Option<&[u8]>, upper: Option<&[u8]>) -> Self {
        let entries = model
            .iter()
            .filter(|(k, _)| lower.is_none_or(|l| k.as_slice() >= l))
            .filter(|(k, _)| upper.is_none_or(|u| k.as_slice() < u))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        ModelCursor { entries, pos: None }
    }
    fn seek_to_first(&mut self) {
        self.pos = (!self.entries.is_empty()).then_some(0);
    }
    fn seek_to_last(&mut self) {
        self.pos = self.entries.len().checked_sub(1);
    }
    fn seek(&mut self, t: &[u8]) {
        let i = self.entries.partition_point(|(k, _)| k.as_slice() < t);
        self.pos = (i < self.entries.len()).then_some(i);
    }
    fn next(&mut self) {
        self.pos = self.pos.map(|p| p + 1).filter(|&p| p < self.entries.len());
    }
    fn prev(&mut self) {
        self.pos = self.pos.and_then(|p| p.checked_sub(1));
    }
    fn current(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.pos.map(|p| self.entries[p].clone())
    }
}

struct HeldIter {
    it: tierkv::DbIterator,
    model: ModelCursor,
    what: String,
}

impl HeldIter {
    fn check(&self, op: &str) {
        let got = self
            .it
            .valid()
            .then(|| (self.it.key().to_vec(), self.it.value().to_vec()));
        let want = self.model.current();
        assert_eq!(
            got.as_ref()
                .map(|(k, v)| (k.escape_ascii().to_string(), v.escape_ascii().to_string())),
            want.as_ref()
                .map(|(k, v)| (k.escape_ascii().to_string(), v.escape_ascii().to_string())),
            "{}: after {op}",
            self.what
        );
        self.it.status().unwrap();
    }

    fn step(&mut self, rng: &mut SmallRng, log: &mut Vec<String>) {
        let op = match rng.gen_range(0..10) {
            0 => {
                self.it.seek_to_first();
                self.model.seek_to_first();
                "seek_to_first".to_string()
            }
            1 => {
                self.it.seek_to_last();
                self.model.seek_to_last();
                "seek_to_last".to_string()
            }
            2 | 3 => {
                let t = draw_bound(rng);
                self.it.seek(&t);
                self.model.seek(&t);
                format!("seek({})", t.escape_ascii())
            }
            4..=6 => {
                if !self.it.valid() {
                    return;
                }
                self.it.next();
                self.model.next();
                "next".to_string()
            }
            _ => {
                if !self.it.valid() {
                    return;
                }
                self.it.prev();
                self.model.prev();
                "prev".to_string()
            }
        };
        log.push(op.clone());
        if log.len() > 12 {
            log.remove(0);
        }
        self.check(&format!("{:?}", log));
    }
}

/// Random puts, deletes and batches with edge-case keys; flushes and compactions; iterators
/// (with random bounds, some at a snapshot) held across all of it and moved at random,
/// checked at every step against the model frozen at their creation; multi_get (with
/// duplicates) and get checked against the model, now and at snapshots.
fn model_run(opts: tierkv::Options, seed: u64, steps: usize, large: bool) {
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = Db::open(opts).unwrap();
    let w = WriteOptions::default();
    let mut model = Model::new();
    let mut held: Vec<HeldIter> = Vec::new();
    let mut snaps: Vec<(tierkv::Snapshot, Model)> = Vec::new();
    let mut log = Vec::new();
    for step in 0..steps {
        match rng.gen_range(0..100) {
            0..=39 => {
                let k = draw_key(&mut rng);
                let v = draw_value(&mut rng, step as u64, large);
                db.put(&w, &k, &v).unwrap();
                model.insert(k, v);
            }
            40..=54 => {
                let k = draw_key(&mut rng);
                db.delete(&w, &k).unwrap();
                model.remove(&k);
            }
            55..=62 => {
                let mut b = WriteBatch::new();
                for _ in 0..rng.gen_range(1..20) {
                    let k = draw_key(&mut rng);
                    if rng.gen_bool(0.3) {
                        b.delete(&k);
                        model.remove(&k);
                    } else {
                        let v = draw_value(&mut rng, step as u64, large);
                        b.put(&k, &v);
                        model.insert(k, v);
                    }
                }
                db.write(&w, b).unwrap();
            }
            63..=64 => db.flush().unwrap(),
            65 => {
                let a = draw_bound(&mut rng);
                let b = draw_bound(&mut rng);
                let (a, b) = if a <= b { (a, b) } else { (b, a) };
                if rng.gen_bool(0.5) {
                    db.compact_range(None, None).unwrap();
                } else {
                    db.compact_range(Some(&a), Some(&b)).unwrap();
                }
            }
            66..=68 => {
                if snaps.len() > 3 {
                    snaps.remove(0);
                }
                snaps.push((db.snapshot(), model.clone()));
            }
            69..=72 => {
                // A new iterator, maybe at a snapshot, maybe bounded.
                let (mut ro, frozen, at) = if !snaps.is_empty() && rng.gen_bool(0.4) {
                    let (s, m) = &snaps[rng.gen_range(0..snaps.len())];
                    (ReadOptions::at(s), m.clone(), "snapshot")
                } else {
                    (ReadOptions::default(), model.clone(), "latest")
                };
                let lower = rng.gen_bool(0.5).then(|| draw_bound(&mut rng));
                let upper = rng.gen_bool(0.5).then(|| draw_bound(&mut rng));
                ro = ro.bounds(lower.as_deref(), upper.as_deref());
                let it = db.iter(ro).unwrap();
                let what = format!(
                    "seed {seed} step {step}: iterator at {at}, bounds [{:?}, {:?})",
                    lower.as_ref().map(|l| l.escape_ascii().to_string()),
                    upper.as_ref().map(|u| u.escape_ascii().to_string())
                );
                let model = ModelCursor::new(&frozen, lower.as_deref(), upper.as_deref());
                held.push(HeldIter { it, model, what });
                if held.len() > 4 {
                    held.remove(0);
                }
            }
            73..=89 => {
                if !held.is_empty() {
                    let i = rng.gen_range(0..held.len());
                    for _ in 0..rng.gen_range(1..8) {
                        held[i].step(&mut rng, &mut log);
                    }
                }
            }
            _ => {
                // multi_get and get, now or at a snapshot, with duplicates and absent keys.
                let (ro, m, at) = if !snaps.is_empty() && rng.gen_bool(0.5) {
                    let (s, m) = &snaps[rng.gen_range(0..snaps.len())];
                    (ReadOptions::at(s), m, "snapshot")
                } else {
                    (ReadOptions::default(), &model, "latest")
                };
                let mut keys: Vec<Vec<u8>> = (0..rng.gen_range(0..30))
                    .map(|_| draw_key(&mut rng))
                    .collect();
                if let Some(k) = keys.first().cloned() {
                    keys.push(k);
                }
                let got = db.multi_get(&ro, &keys).unwrap();
                for (k, g) in keys.iter().zip(&got) {
                    let want = m.get(k);
                    assert_eq!(
                        g.as_ref(),
                        want,
                        "seed {seed} step {step}: multi_get at {at} of {}",
                        k.escape_ascii()
                    );
                    assert_eq!(
                        db.get(&ro, k).unwrap().as_ref(),
                        want,
                        "seed {seed} step {step}: get at {at} of {}",
                        k.escape_ascii()
                    );
                }
            }
        }
    }
    // A full scan both ways matches the model.
    let mut it = db.iter(ReadOptions::default()).unwrap();
    let fwd = common::collect_entries(&mut it, false, "final forward");
    let back = common::collect_entries(&mut it, true, "final backward");
    let want: Vec<_> = model.into_iter().collect();
    assert_eq!(fwd, want, "seed {seed}: final forward scan");
    assert_eq!(back, want, "seed {seed}: final backward scan");
}

#[test]
fn iterators_multi_get_and_snapshots_match_a_model() {
    for seed in 0..seeds(3) {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny().block_size(256).tiers_in(dir.path()).build().unwrap();
        model_run(opts, seed, 3000, false);
    }
}

#[test]
fn iterators_multi_get_and_snapshots_match_a_model_split_values() {
    for seed in 10..10 + seeds(2) {
        let dir = tempfile::tempdir().unwrap();
        let opts = tiny()
            .block_size(256)
            .values(tierkv::ValuesMode::Split)
            .split_threshold(100)
            .tiers_in(dir.path())
            .build()
            .unwrap();
        model_run(opts, seed, 3000, true);
    }
}

#[test]
fn iterators_multi_get_and_snapshots_match_a_model_hot_store() {
    for seed in 20..20 + seeds(2) {
        let fs = tierkv::env::FaultFs::new(seed);
        let opts = common::hot_slab_options(&fs, WalMode::Group, 64 << 10);
        model_run(opts, seed, 3000, false);
    }
}

/// Seeds per model test: `API_MODEL_SEEDS` or `default`.
fn seeds(default: u64) -> u64 {
    std::env::var("API_MODEL_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default)
}

// ---------------------------------------------------------------------------------------------
// Transactions: conflicts wherever the conflicting write ends up

/// Where the conflicting write is when the transaction commits.
#[derive(Debug, Clone, Copy)]
enum Layer {
    Memtable,
    L0,
    Bottom,
}

fn expect_conflict(r: tierkv::Result<()>, key: &[u8], what: &str) {
    match r {
        Err(Error::Conflict { key: k }) => assert_eq!(k, key, "{what}: conflict key"),
        Ok(()) => panic!("{what}: commit succeeded despite a conflicting write"),
        Err(e) => panic!("{what}: expected Conflict, got {e}"),
    }
}

fn conflict_matrix(db: &Db, what: &str) {
    let w = WriteOptions::default();
    for (li, layer) in [Layer::Memtable, Layer::L0, Layer::Bottom]
        .into_iter()
        .enumerate()
    {
        for other_deletes in [false, true] {
            for txn_reads in [true, false] {
                let k = format!("cm/{li}/{other_deletes}/{txn_reads}").into_bytes();
                let what = format!(
                    "{what}: layer {layer:?}, other write is a {}, transaction {} the key",
                    if other_deletes { "delete" } else { "put" },
                    if txn_reads { "read" } else { "only wrote" }
                );
                db.put(&w, &k, b"v0").unwrap();
                // Settle the first version where the later write will go too.
                match layer {
                    Layer::Memtable => {}
                    Layer::L0 => db.flush().unwrap(),
                    Layer::Bottom => db.compact_range(None, None).unwrap(),
                }
                let mut t = db.transaction();
                if txn_reads {
                    assert_eq!(t.get(&k).unwrap(), Some(b"v0".to_vec()), "{what}");
                }
                t.put(&k, b"txn").unwrap();
                t.put(format!("{}-side", k.escape_ascii()).as_bytes(), b"txn")
                    .unwrap();
                if other_deletes {
                    db.delete(&w, &k).unwrap();
                } else {
                    db.put(&w, &k, b"other").unwrap();
                }
                match layer {
                    Layer::Memtable => {}
                    Layer::L0 => db.flush().unwrap(),
                    Layer::Bottom => db.compact_range(None, None).unwrap(),
                }
                expect_conflict(t.commit(&w), &k, &what);
                let want = (!other_deletes).then(|| b"other".to_vec());
                assert_eq!(db.get(&ReadOptions::default(), &k).unwrap(), want, "{what}");
            }
        }
    }
    // A read-only transaction whose read key changed fails too; one whose keys did not
    // change commits.
    db.put(&w, b"ro", b"1").unwrap();
    let mut t = db.transaction();
    t.get(b"ro").unwrap();
    t.get(b"ro-absent").unwrap();
    db.put(&w, b"ro-absent", b"now").unwrap();
    expect_conflict(t.commit(&w), b"ro-absent", &format!("{what}: read-only"));
    let mut t = db.transaction();
    t.get(b"ro").unwrap();
    db.put(&w, b"ro-unrelated", b"x").unwrap();
    t.commit(&w).unwrap();
}

#[test]
fn conflicts_are_found_in_every_layer_and_mode() {
    for mode in common::MODES {
        let dir = tempfile::tempdir().unwrap();
        let opts = small(mode, 64 << 10).tiers_in(dir.path()).build().unwrap();
        let db = Db::open(opts).unwrap();
        conflict_matrix(&db, &format!("{mode:?}"));
    }
}

#[test]
fn conflicts_are_found_with_split_values() {
    let dir = tempfile::tempdir().unwrap();
    let opts = tiny()
        .values(tierkv::ValuesMode::Split)
        .split_threshold(1)
        .tiers_in(dir.path())
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    conflict_matrix(&db, "split values");
}

#[test]
fn conflicts_are_found_with_a_hot_store() {
    for mode in [WalMode::Group, WalMode::Parallel] {
        let fs = tierkv::env::FaultFs::new(3);
        let db = Db::open(common::hot_slab_options(&fs, mode, 64 << 10)).unwrap();
        conflict_matrix(&db, &format!("hot store {mode:?}"));
    }
}

// ---------------------------------------------------------------------------------------------
// Empty writes and empty transactions

/// Empty batches and transactions with nothing to write (none, or only reads) commit in every
/// mode, synchronously and asynchronously, and leave a database that reopens with every
/// write around them.
#[test]
fn empty_batches_and_transactions_commit_and_reopen() {
    for mode in common::MODES {
        let dir = tempfile::tempdir().unwrap();
        let opts = || small(mode, 64 << 10).tiers_in(dir.path()).build().unwrap();
        let mut model = Model::new();
        {
            let db = Db::open(opts()).unwrap();
            for i in 0..50u32 {
                let w = if i % 3 == 0 {
                    WriteOptions::sync()
                } else {
                    WriteOptions::default()
                };
                db.write(&w, WriteBatch::new()).unwrap();
                db.transaction().commit(&w).unwrap();
                let mut t = db.transaction();
                t.get(format!("k{i}").as_bytes()).unwrap();
                t.commit(&w).unwrap();
                let mut h = db.submit_write(&w, WriteBatch::new()).unwrap();
                poll_for(&mut h, Duration::from_secs(10))
                    .unwrap_or_else(|| panic!("{mode:?}: empty async write hangs"))
                    .unwrap();
                let mut h = db.transaction().submit_commit(&w).unwrap();
                poll_for(&mut h, Duration::from_secs(10))
                    .unwrap_or_else(|| panic!("{mode:?}: empty async commit hangs"))
                    .unwrap();
                let k = format!("k{i}").into_bytes();
                db.put(&w, &k, b"v").unwrap();
                model.insert(k, b"v".to_vec());
            }
            let got: Model = common::scan(&db).unwrap();
            assert_eq!(got, model, "{mode:?}: before reopen");
        }
        let db = Db::open(opts()).unwrap();
        let got: Model = common::scan(&db).unwrap();
        assert_eq!(got, model, "{mode:?}: after reopen");
        db.put(&WriteOptions::sync(), b"after", b"x").unwrap();
        assert_eq!(
            db.get(&ReadOptions::default(), b"after").unwrap(),
            Some(b"x".to_vec())
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Limits through the asynchronous API and transactions

fn is_invalid(e: &Error, needle: &str) -> bool {
    matches!(e, Error::InvalidArgument(_)) && e.to_string().contains(needle)
}

/// The key and batch limits hold the same through `submit_write` and transactions as through
/// `Db::write`: at the limit accepted and stored, one byte over refused with InvalidArgument
/// naming what to change, and nothing written.
#[test]
fn limits_hold_for_async_writes_and_transactions() {
    for mode in common::MODES {
        let dir = tempfile::tempdir().unwrap();
        let opts = small(mode, 256 << 10).tiers_in(dir.path()).build().unwrap();
        let limit = opts.max_batch_bytes();
        let db = Db::open(opts).unwrap();
        let w = WriteOptions::default();
        let ro = ReadOptions::default();

        // Keys: exactly MAX_KEY_LEN is accepted, one more refused naming the key.
        let max_key = vec![b'K'; tierkv::MAX_KEY_LEN];
        let over_key = vec![b'K'; tierkv::MAX_KEY_LEN + 1];
        let err = db.submit_put(&w, &over_key, b"v").unwrap_err();
        assert!(is_invalid(&err, "key"), "{mode:?}: {err}");
        let mut t = db.transaction();
        let err = t.put(&over_key, b"v").unwrap_err();
        assert!(is_invalid(&err, "key"), "{mode:?}: {err}");
        let err = t.delete(&over_key).unwrap_err();
        assert!(is_invalid(&err, "key"), "{mode:?}: {err}");
        t.put(&max_key, b"txn").unwrap();
        t.commit(&w).unwrap();
        assert_eq!(
            db.get(&ro, &max_key).unwrap(),
            Some(b"txn".to_vec()),
            "{mode:?}"
        );
        let mut h = db.submit_put(&w, &max_key, b"async").unwrap();
        poll_for(&mut h, Duration::from_secs(10)).unwrap().unwrap();
        assert_eq!(
            db.get(&ro, &max_key).unwrap(),
            Some(b"async".to_vec()),
            "{mode:?}"
        );
        assert_eq!(
            db.multi_get(&ro, &[&max_key[..], &over_key[..]]).unwrap(),
            vec![Some(b"async".to_vec()), None],
            "{mode:?}"
        );

        // Batches: exactly the limit is accepted, one byte more refused naming the option.
        let value_for = |key: &[u8], bytes: usize| {
            let mut empty = WriteBatch::new();
            empty.put(key, []);
            vec![5u8; bytes - (empty.encoded_len() + 2)]
        };
        let batch_of = |key: &[u8], bytes: usize| {
            let mut b = WriteBatch::new();
            b.put(key, value_for(key, bytes));
            assert_eq!(b.encoded_len(), bytes);
            b
        };
        let err = db.submit_write(&w, batch_of(b"ab", limit + 1)).unwrap_err();
        assert!(is_invalid(&err, "wal.group_bytes"), "{mode:?}: {err}");
        let mut t = db.transaction();
        t.put(b"tb", &value_for(b"tb", limit + 1)).unwrap();
        let err = t.commit(&w).unwrap_err();
        assert!(is_invalid(&err, "wal.group_bytes"), "{mode:?}: {err}");
        let mut t = db.transaction();
        t.put(b"tb", &value_for(b"tb", limit + 1)).unwrap();
        let err = t.submit_commit(&w).map(drop).unwrap_err();
        assert!(is_invalid(&err, "wal.group_bytes"), "{mode:?}: {err}");
        assert_eq!(db.get(&ro, b"ab").unwrap(), None, "{mode:?}");
        assert_eq!(db.get(&ro, b"tb").unwrap(), None, "{mode:?}");

        let mut h = db.submit_write(&w, batch_of(b"ab", limit)).unwrap();
        poll_for(&mut h, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{mode:?}: async write at the limit hangs"))
            .unwrap();
        assert_eq!(
            db.get(&ro, b"ab").unwrap(),
            Some(value_for(b"ab", limit)),
            "{mode:?}"
        );
        let mut t = db.transaction();
        t.put(b"tb", &value_for(b"tb", limit)).unwrap();
        t.commit(&w).unwrap();
        assert_eq!(
            db.get(&ro, b"tb").unwrap(),
            Some(value_for(b"tb", limit)),
            "{mode:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Asynchronous reads on a read-only database

/// A database opened read-only serves asynchronous reads (`submit_get` of a key not in a
/// memtable, `submit_multi_get`, `submit_scan`) on its pipeline workers, as a writable one
/// does: every handle completes.
#[test]
fn read_only_async_reads_complete() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(
            small(WalMode::Group, 64 << 10)
                .tiers_in(dir.path())
                .build()
                .unwrap(),
        )
        .unwrap();
        db.put(&WriteOptions::sync(), b"a", b"1").unwrap();
        db.put(&WriteOptions::sync(), b"b", b"2").unwrap();
        db.flush().unwrap();
    }
    let opts = small(WalMode::Group, 64 << 10)
        .read_only(true)
        .tiers_in(dir.path())
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    let ro = ReadOptions::default();
    assert_eq!(db.get(&ro, b"a").unwrap(), Some(b"1".to_vec()));
    let mut failures = Vec::new();
    match db.submit_get(&ro, b"a") {
        Ok(mut h) => match poll_for(&mut h, Duration::from_secs(1)) {
            Some(r) => assert_eq!(r.unwrap(), Some(b"1".to_vec())),
            None => failures.push("submit_get"),
        },
        Err(e) => panic!("submit_get refused: {e}"),
    }
    match db.submit_multi_get(&ro, vec![b"a".to_vec(), b"b".to_vec()]) {
        Ok(mut h) => match poll_for(&mut h, Duration::from_secs(1)) {
            Some(r) => assert_eq!(r.unwrap(), vec![Some(b"1".to_vec()), Some(b"2".to_vec())]),
            None => failures.push("submit_multi_get"),
        },
        Err(e) => panic!("submit_multi_get refused: {e}"),
    }
    match db.submit_scan(ReadOptions::default(), b"", 10) {
        Ok(mut h) => match poll_for(&mut h, Duration::from_secs(1)) {
            Some(r) => assert_eq!(r.unwrap().len(), 2),
            None => failures.push("submit_scan"),
        },
        Err(e) => panic!("submit_scan refused: {e}"),
    }
    for (what, r) in [
        (
            "submit_put",
            db.submit_put(&WriteOptions::default(), b"c", b"3"),
        ),
        (
            "submit_delete",
            db.submit_delete(&WriteOptions::default(), b"a"),
        ),
    ] {
        match r {
            Ok(mut h) => match poll_for(&mut h, Duration::from_secs(1)) {
                Some(r) => assert!(r.is_err(), "{what} on a read-only database succeeded"),
                None => failures.push(what),
            },
            Err(e) => assert!(matches!(e, Error::InvalidArgument(_)), "{what}: {e}"),
        }
    }
    if !failures.is_empty() {
        // Dropping the database waits 30 s for the requests to drain before failing them.
        std::mem::forget(db);
    }
    assert!(
        failures.is_empty(),
        "read-only database: handles of {failures:?} still pending after 1 s"
    );
}

// ---------------------------------------------------------------------------------------------
// Transactions and value-log garbage collection

/// Value-log garbage collection moves live values by rewriting their keys through the write
/// path: a new sequence number for a key no user wrote. A transaction that read such a key
/// before the collection must still commit: no write changed it (`Transaction::commit`:
/// Conflict "if another write changed a key this transaction read or wrote since it began").
#[test]
fn value_log_collection_is_not_a_conflicting_write() {
    let dir = tempfile::tempdir().unwrap();
    let opts = split_small_files(tiny())
        .tiers_in(dir.path())
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    let w = WriteOptions::default();
    let val = |k: u64, ver: u64| {
        let mut v = format!("k{k:02}/{ver}/").into_bytes();
        v.resize(1500, b'.');
        v
    };
    // The first file: 40 keys; then every other key overwritten, so it is half garbage.
    for i in 0..40u64 {
        db.put(&w, format!("k{i:02}").as_bytes(), &val(i, 0))
            .unwrap();
    }
    for i in (0..40u64).step_by(2) {
        db.put(&w, format!("k{i:02}").as_bytes(), &val(i, 1))
            .unwrap();
    }
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    // k01 is live in the first file: a transaction reads it and writes something else.
    let mut t = db.transaction();
    assert_eq!(t.get(b"k01").unwrap(), Some(val(1, 0)));
    t.put(b"derived", b"from k01").unwrap();
    let before = db.stats().last_sequence;
    db.collect_value_log().unwrap();
    let after = db.stats().last_sequence;
    assert!(
        after > before,
        "the collection rewrote live keys ({before} -> {after})"
    );
    assert_eq!(
        db.get(&ReadOptions::default(), b"k01").unwrap(),
        Some(val(1, 0))
    );
    let r = t.commit(&w);
    assert!(
        r.is_ok(),
        "no write changed k01, yet the commit failed: {:?}",
        r.map_err(|e| e.to_string())
    );
}
