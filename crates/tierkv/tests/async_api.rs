//! The asynchronous API: `submit_put`, `submit_delete`, `submit_write`, `submit_get` and
//! `submit_scan` return a `Handle` that the engine completes exactly once.
//!
//! Every test runs in both WAL modes (group commit and the parallel WAL) on small memtables, so
//! memtable switches, flushes and compactions happen while requests are in flight:
//! - a model test: several threads submit thousands of mixed requests, keep many in flight, and
//!   collect each handle by waiting, by polling (`is_ready` / `try_take`), or by awaiting it on a
//!   tiny thread-parking executor; every result is checked against a per-thread model and every
//!   handle must complete (none is lost, none hangs);
//! - waiting, polling and awaiting each work, and an awaited handle wakes its waker;
//! - "lucky reads": a get of a key still in a memtable returns a handle that is already ready;
//! - overload: with `max_pending_requests(8)`, submits beyond the bound fail with `Busy`, and the
//!   engine keeps working once the caller waits and retries;
//! - closing the database with many requests in flight: every handle resolves (`Ok` or
//!   `Closed`), none hangs, and every write that completed `Ok` is there after reopening (also
//!   after a power loss on `FaultFs`, for `Sync` writes);
//! - `submit_scan` returns keys in order, within bounds, up to its limit, and honours snapshots;
//! - a request submitted after the previous one completed is never refused with `Busy`.
//!
//! Hangs are failures: each test body runs under a watchdog, and handles are collected with
//! bounded waits.

mod common;

use common::{
    block_on, block_on_counted, drop_within, each_mode, small, wait_ready, TierSetup, HANDLE_LIMIT,
};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tierkv::env::{CrashPolicy, FaultFs, FaultKind};
use tierkv::{Db, Error, Handle, ReadOptions, Result, WalMode, WriteBatch, WriteOptions};

// ---------------------------------------------------------------------------------------------
// Helpers

/// Waits for the handle within `HANDLE_LIMIT` and takes the result, checking that it can be
/// taken only once and that a taken handle stays ready.
fn wait_bounded<T>(mut h: Handle<T>, what: &str) -> Result<T> {
    wait_ready(&h, what);
    let r = h
        .try_take()
        .unwrap_or_else(|| panic!("{what}: ready handle without a result"));
    assert!(h.try_take().is_none(), "{what}: result taken twice");
    assert!(h.is_ready(), "{what}: a taken handle stays ready");
    r
}

fn assert_send_static<T: Send + 'static>(_: &T) {}

fn is_busy<T>(r: &Result<T>) -> bool {
    matches!(r, Err(Error::Busy(_)))
}

// ---------------------------------------------------------------------------------------------
// Model test: thousands of mixed requests from several threads

const THREADS: usize = 4;
const OPS_PER_THREAD: usize = 2500;
const KEYS_PER_THREAD: u32 = 150;
/// Requests one thread keeps in flight at most.
const MAX_IN_FLIGHT: usize = 40;

fn mkey(t: usize, k: u32) -> Vec<u8> {
    format!("t{t}/k{k:04}").into_bytes()
}

/// How a test collects a handle.
#[derive(Clone, Copy, Debug)]
enum Collect {
    Wait,
    PollReady,
    TryTakeLoop,
    Await,
}

fn collect<T>(mut h: Handle<T>, how: Collect, what: &str) -> Result<T> {
    match how {
        Collect::Wait => h.wait(),
        Collect::PollReady => wait_bounded(h, what),
        Collect::TryTakeLoop => {
            let deadline = Instant::now() + HANDLE_LIMIT;
            loop {
                if let Some(r) = h.try_take() {
                    assert!(
                        h.is_ready(),
                        "{what}: a result came from a handle not ready"
                    );
                    assert!(h.try_take().is_none(), "{what}: result taken twice");
                    return r;
                }
                assert!(
                    Instant::now() < deadline,
                    "{what}: handle still pending after {HANDLE_LIMIT:?}"
                );
                thread::yield_now();
            }
        }
        Collect::Await => block_on(h),
    }
}

enum Expect {
    Write,
    Get(Option<Vec<u8>>),
    Scan(Vec<(Vec<u8>, Vec<u8>)>),
}

enum AnyHandle {
    Unit(Handle<()>),
    Get(Handle<Option<Vec<u8>>>),
    Scan(Handle<Vec<(Vec<u8>, Vec<u8>)>>),
}

struct InFlight {
    /// Keys the request reads or writes (empty: a scan, which touches the whole range).
    keys: Vec<Vec<u8>>,
    what: String,
    expect: Expect,
    handle: AnyHandle,
}

struct ModelThread<'a> {
    t: usize,
    db: &'a Db,
    rng: SmallRng,
    model: BTreeMap<Vec<u8>, Vec<u8>>,
    in_flight: Vec<InFlight>,
    submitted: u64,
    completed: u64,
    version: u64,
}

impl ModelThread<'_> {
    fn finish(&mut self, op: InFlight) {
        let how = match self.rng.gen_range(0..4) {
            0 => Collect::Wait,
            1 => Collect::PollReady,
            2 => Collect::TryTakeLoop,
            _ => Collect::Await,
        };
        let what = format!("thread {} {} ({how:?})", self.t, op.what);
        match (op.handle, op.expect) {
            (AnyHandle::Unit(h), Expect::Write) => {
                collect(h, how, &what).unwrap_or_else(|e| panic!("{what}: {e}"));
            }
            (AnyHandle::Get(h), Expect::Get(want)) => {
                let got = collect(h, how, &what).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got, want, "{what}");
            }
            (AnyHandle::Scan(h), Expect::Scan(want)) => {
                let got = collect(h, how, &what).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(got, want, "{what}");
            }
            _ => unreachable!("handle and expectation kinds always match"),
        }
        self.completed += 1;
    }

    /// Completes every request in flight that touches one of `keys` (all of them if `None`).
    fn settle(&mut self, keys: Option<&[Vec<u8>]>) {
        let mut i = 0;
        while i < self.in_flight.len() {
            let hit = match keys {
                None => true,
                Some(keys) => {
                    self.in_flight[i].keys.is_empty()
                        || self.in_flight[i].keys.iter().any(|k| keys.contains(k))
                }
            };
            if hit {
                let op = self.in_flight.swap_remove(i);
                self.finish(op);
            } else {
                i += 1;
            }
        }
    }

    fn value(&mut self, k: u32) -> Vec<u8> {
        self.version += 1;
        let pad = self.rng.gen_range(0..200);
        format!("t{}:k{k}:v{}:{}", self.t, self.version, "x".repeat(pad)).into_bytes()
    }

    fn write_options(&mut self) -> WriteOptions {
        if self.rng.gen_ratio(1, 50) {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        }
    }

    /// Submits with `submit`, retrying after settling everything when the engine is busy.
    fn submit<T>(&mut self, mut submit: impl FnMut() -> Result<T>) -> T {
        loop {
            let r = submit();
            if is_busy(&r) {
                self.settle(None);
                continue;
            }
            self.submitted += 1;
            return r.unwrap_or_else(|e| panic!("thread {} submit: {e}", self.t));
        }
    }

    fn step(&mut self) {
        if self.in_flight.len() >= MAX_IN_FLIGHT {
            let i = self.rng.gen_range(0..self.in_flight.len());
            let op = self.in_flight.swap_remove(i);
            self.finish(op);
        }
        let t = self.t;
        let db = self.db;
        let k = self.rng.gen_range(0..KEYS_PER_THREAD);
        let key = mkey(t, k);
        match self.rng.gen_range(0..100) {
            0..=29 => {
                self.settle(Some(std::slice::from_ref(&key)));
                let v = self.value(k);
                let w = self.write_options();
                let h = self.submit(|| db.submit_put(&w, &key, &v));
                self.model.insert(key.clone(), v);
                self.in_flight.push(InFlight {
                    keys: vec![key.clone()],
                    what: format!("put {}", key.escape_ascii()),
                    expect: Expect::Write,
                    handle: AnyHandle::Unit(h),
                });
            }
            30..=37 => {
                self.settle(Some(std::slice::from_ref(&key)));
                let w = self.write_options();
                let h = self.submit(|| db.submit_delete(&w, &key));
                self.model.remove(&key);
                self.in_flight.push(InFlight {
                    keys: vec![key.clone()],
                    what: format!("delete {}", key.escape_ascii()),
                    expect: Expect::Write,
                    handle: AnyHandle::Unit(h),
                });
            }
            38..=49 => {
                // A batch of puts and deletes, possibly touching one key twice.
                let n = self.rng.gen_range(1..=5);
                let ks: Vec<u32> = (0..n)
                    .map(|_| self.rng.gen_range(0..KEYS_PER_THREAD))
                    .collect();
                let keys: Vec<Vec<u8>> = ks.iter().map(|&k| mkey(t, k)).collect();
                self.settle(Some(&keys));
                let mut batch = WriteBatch::new();
                for (&k, key) in ks.iter().zip(&keys) {
                    if self.rng.gen_ratio(1, 4) {
                        batch.delete(key);
                        self.model.remove(key);
                    } else {
                        let v = self.value(k);
                        batch.put(key, &v);
                        self.model.insert(key.clone(), v);
                    }
                }
                let w = self.write_options();
                let h = self.submit(|| db.submit_write(&w, batch.clone()));
                self.in_flight.push(InFlight {
                    keys,
                    what: format!("batch of {n}"),
                    expect: Expect::Write,
                    handle: AnyHandle::Unit(h),
                });
            }
            50..=89 => {
                self.settle(Some(std::slice::from_ref(&key)));
                let want = self.model.get(&key).cloned();
                let h = self.submit(|| db.submit_get(&ReadOptions::default(), &key));
                self.in_flight.push(InFlight {
                    keys: vec![key.clone()],
                    what: format!("get {}", key.escape_ascii()),
                    expect: Expect::Get(want),
                    handle: AnyHandle::Get(h),
                });
            }
            _ => {
                self.settle(None);
                let limit = self.rng.gen_range(0..40);
                let lower = format!("t{t}/").into_bytes();
                let upper = format!("t{t}0").into_bytes(); // '0' follows '/'
                let want: Vec<_> = self
                    .model
                    .range(key.clone()..)
                    .take(limit)
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                let opts = ReadOptions::default().bounds(Some(&lower), Some(&upper));
                let h = self.submit(|| db.submit_scan(opts.clone(), &key, limit));
                self.in_flight.push(InFlight {
                    keys: Vec::new(),
                    what: format!("scan from {} limit {limit}", key.escape_ascii()),
                    expect: Expect::Scan(want),
                    handle: AnyHandle::Scan(h),
                });
            }
        }
    }
}

/// What a model thread ends with: its model, requests submitted, requests completed.
type ThreadResult = (BTreeMap<Vec<u8>, Vec<u8>>, u64, u64);

fn model_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(mode, 64 << 10)
        .tiers_in(dir.path())
        .max_pending_requests(4096)
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let results: Vec<ThreadResult> = thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let db = &db;
                s.spawn(move || {
                    let mut m = ModelThread {
                        t,
                        db,
                        rng: SmallRng::seed_from_u64(0xa5a5_0000 + t as u64),
                        model: BTreeMap::new(),
                        in_flight: Vec::new(),
                        submitted: 0,
                        completed: 0,
                        version: 0,
                    };
                    for _ in 0..OPS_PER_THREAD {
                        m.step();
                    }
                    m.settle(None);
                    (m.model, m.submitted, m.completed)
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    let submitted: u64 = results.iter().map(|r| r.1).sum();
    let completed: u64 = results.iter().map(|r| r.2).sum();
    assert_eq!(submitted, (THREADS * OPS_PER_THREAD) as u64, "{mode:?}");
    assert_eq!(completed, submitted, "{mode:?}: every handle completes");
    let stats = db.stats();
    assert!(
        stats.flushes > 0,
        "{mode:?}: the workload switches and flushes memtables"
    );
    assert!(
        stats.async_requests > 0,
        "{mode:?}: async requests are counted"
    );

    // The whole key space equals the union of the models, on the open database and after reopen.
    let mut all = BTreeMap::new();
    for (model, _, _) in results {
        all.extend(model);
    }
    let check = |db: &Db, when: &str| {
        let mut it = db.iter(ReadOptions::default()).unwrap();
        it.seek_to_first();
        let got: BTreeMap<_, _> = it.entries().map(|e| e.unwrap()).collect();
        assert!(
            got == all,
            "{mode:?} {when}: the database differs from the model"
        );
    };
    check(&db, "open");
    drop(db);
    let db = Db::open(opts).unwrap();
    check(&db, "after reopen");
}

#[test]
fn every_handle_completes_once_and_matches_the_model() {
    each_mode("model", model_run);
}

// ---------------------------------------------------------------------------------------------
// Waiting, polling, awaiting

fn wait_poll_await_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(mode, 64 << 10).tiers_in(dir.path()).build().unwrap()).unwrap();
    let w = WriteOptions::default();
    let r = ReadOptions::default();

    // Handles are 'static + Send: one can be waited on by another thread.
    let h = db.submit_put(&w, b"a", b"1").unwrap();
    assert_send_static(&h);
    thread::spawn(move || h.wait().unwrap()).join().unwrap();

    // wait
    db.submit_put(&WriteOptions::sync(), b"b", b"2")
        .unwrap()
        .wait()
        .unwrap();
    assert_eq!(
        db.submit_get(&r, b"b").unwrap().wait().unwrap(),
        Some(b"2".to_vec())
    );

    // Polling: is_ready, then try_take exactly once.
    let h = db.submit_delete(&w, b"a").unwrap();
    wait_bounded(h, "poll delete").unwrap();
    let mut h = db.submit_get(&r, b"a").unwrap();
    let deadline = Instant::now() + HANDLE_LIMIT;
    while !h.is_ready() {
        assert!(Instant::now() < deadline, "get still pending");
        thread::yield_now();
    }
    assert_eq!(h.try_take().unwrap().unwrap(), None);
    assert!(h.try_take().is_none());
    assert!(h.is_ready());

    // Awaiting, several handles in one async block.
    let got = block_on(async {
        db.submit_put(&w, b"c", b"3")?.await?;
        let mut batch = WriteBatch::new();
        batch.put(b"d", b"4");
        batch.delete(b"b");
        db.submit_write(&w, batch)?.await?;
        let c = db.submit_get(&r, b"c")?.await?;
        let b = db.submit_get(&r, b"b")?.await?;
        let scan = db.submit_scan(ReadOptions::default(), b"", 10)?.await?;
        Ok::<_, Error>((c, b, scan))
    })
    .unwrap();
    assert_eq!(got.0, Some(b"3".to_vec()));
    assert_eq!(got.1, None);
    assert_eq!(
        got.2,
        vec![
            (b"c".to_vec(), b"3".to_vec()),
            (b"d".to_vec(), b"4".to_vec())
        ]
    );

    // Reads that go to tables (not lucky): a pending handle wakes the task's waker.
    for i in 0..3000u32 {
        db.put(&w, format!("t{i:05}").as_bytes(), &[b'v'; 64])
            .unwrap();
    }
    db.flush().unwrap();
    let (mut pending_first, mut woken) = (0, 0);
    for i in (0..3000u32).step_by(15) {
        let key = format!("t{i:05}").into_bytes();
        let h = db.submit_get(&r, &key).unwrap();
        let b = block_on_counted(h);
        assert_eq!(b.out.unwrap(), Some(vec![b'v'; 64]), "{mode:?} get t{i:05}");
        if b.polls > 1 {
            pending_first += 1;
            assert!(b.wakes > 0, "{mode:?}: a second poll without a wake");
            woken += 1;
        }
        // Awaiting a scan of a flushed range.
        let h = db.submit_scan(ReadOptions::default(), &key, 3).unwrap();
        let b = block_on_counted(h);
        let got = b.out.unwrap();
        assert_eq!(got.len(), 3);
        assert_eq!(got[0].0, key);
    }
    println!(
        "{mode:?}: {pending_first} of 200 table reads were pending at first poll, {woken} woken"
    );

    // A handle polled before and after completion by a waker of another thread.
    let h = db.submit_get(&r, b"t00042").unwrap();
    let out = thread::spawn(move || block_on(h)).join().unwrap();
    assert_eq!(out.unwrap(), Some(vec![b'v'; 64]));
}

#[test]
fn wait_poll_and_await_all_work() {
    each_mode("wait/poll/await", wait_poll_await_run);
}

// ---------------------------------------------------------------------------------------------
// Lucky reads

fn lucky_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    // A large memtable: nothing written here is flushed before it is read back.
    let db = Db::open(small(mode, 1 << 20).tiers_in(dir.path()).build().unwrap()).unwrap();
    let w = WriteOptions::default();
    let r = ReadOptions::default();
    let before = db.stats().lucky_reads;
    let mut lucky = 0;
    for i in 0..200u32 {
        let key = format!("lucky{i:04}").into_bytes();
        let value = format!("value{i}").into_bytes();
        if i % 2 == 0 {
            db.put(&w, &key, &value).unwrap();
        } else {
            db.submit_put(&w, &key, &value).unwrap().wait().unwrap();
        }
        let mut h = db.submit_get(&r, &key).unwrap();
        assert!(
            h.is_ready(),
            "{mode:?}: a get of {} (in the memtable) is ready on return",
            key.escape_ascii()
        );
        assert_eq!(h.try_take().unwrap().unwrap(), Some(value));
        lucky += 1;
    }
    // Overwritten keys: the newest value, inline.
    db.put(&w, b"lucky0000", b"newer").unwrap();
    let mut h = db.submit_get(&r, b"lucky0000").unwrap();
    assert!(h.is_ready());
    assert_eq!(h.try_take().unwrap().unwrap(), Some(b"newer".to_vec()));
    lucky += 1;
    let stats = db.stats();
    assert!(
        stats.lucky_reads >= before + lucky,
        "{mode:?}: lucky_reads {} < {}",
        stats.lucky_reads,
        before + lucky
    );

    // After a flush the keys live in a table: the result is still right, ready or not.
    db.flush().unwrap();
    for i in (0..200u32).step_by(7) {
        let key = format!("lucky{i:04}").into_bytes();
        let got = wait_bounded(db.submit_get(&r, &key).unwrap(), "table get").unwrap();
        let want = if i == 0 {
            b"newer".to_vec()
        } else {
            format!("value{i}").into_bytes()
        };
        assert_eq!(got, Some(want));
    }
    // A key that exists nowhere.
    assert_eq!(
        wait_bounded(db.submit_get(&r, b"absent").unwrap(), "absent").unwrap(),
        None
    );
}

#[test]
fn lucky_reads_complete_inline() {
    each_mode("lucky", lucky_run);
}

// ---------------------------------------------------------------------------------------------
// Busy under overload

fn busy_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(mode, 64 << 10)
        .tiers_in(dir.path())
        .max_pending_requests(8)
        .pipeline_workers(1)
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    // Some keys in a table, so gets of them are not lucky.
    for i in 0..500u32 {
        db.put(
            &WriteOptions::default(),
            format!("old{i:04}").as_bytes(),
            b"old",
        )
        .unwrap();
    }
    db.flush().unwrap();

    let sync = WriteOptions::sync();
    let mut handles = Vec::new();
    let mut rejected = Vec::new();
    let start = Instant::now();
    let mut i = 0u32;
    while rejected.len() < 20 && i < 20_000 && start.elapsed() < Duration::from_secs(10) {
        let key = format!("busy{i:05}").into_bytes();
        i += 1;
        match db.submit_put(&sync, &key, b"v") {
            Ok(h) => handles.push((key, h)),
            Err(Error::Busy(_)) => rejected.push(key),
            Err(e) => panic!("{mode:?}: submit_put: {e}"),
        }
        if i.is_multiple_of(4) {
            // Reads queue too.
            match db.submit_get(
                &ReadOptions::default(),
                format!("old{:04}", i % 500).as_bytes(),
            ) {
                Ok(h) => drop(h),
                Err(Error::Busy(_)) => {}
                Err(e) => panic!("{mode:?}: submit_get: {e}"),
            }
        }
    }
    assert!(
        !rejected.is_empty(),
        "{mode:?}: {i} sync submits without waiting never got Busy with max_pending_requests(8)"
    );
    // A Busy submit admitted nothing; the admitted ones all complete.
    for (key, h) in handles.drain(..) {
        wait_bounded(h, &format!("{mode:?} {}", key.escape_ascii())).unwrap();
    }
    // Retrying after waiting succeeds.
    for key in &rejected {
        let deadline = Instant::now() + HANDLE_LIMIT;
        loop {
            match db.submit_put(&sync, key, b"v") {
                Ok(h) => {
                    wait_bounded(h, "retry").unwrap();
                    break;
                }
                Err(Error::Busy(_)) => {
                    assert!(
                        Instant::now() < deadline,
                        "{mode:?}: Busy with nothing in flight"
                    );
                    thread::sleep(Duration::from_millis(1));
                }
                Err(e) => panic!("{mode:?}: retry: {e}"),
            }
        }
    }
    let stats = db.stats();
    assert!(
        stats.busy_rejections >= rejected.len() as u64,
        "{mode:?}: busy_rejections {} < {}",
        stats.busy_rejections,
        rejected.len()
    );
    // The engine still works, synchronously and asynchronously.
    for j in 0..i {
        let key = format!("busy{j:05}").into_bytes();
        assert_eq!(
            db.get(&ReadOptions::default(), &key).unwrap(),
            Some(b"v".to_vec()),
            "{mode:?} {}",
            key.escape_ascii()
        );
    }
    db.put(&WriteOptions::default(), b"after", b"ok").unwrap();
    let got = wait_bounded(
        db.submit_get(&ReadOptions::default(), b"after").unwrap(),
        "after",
    )
    .unwrap();
    assert_eq!(got, Some(b"ok".to_vec()));
}

#[test]
fn busy_when_overloaded_and_working_after_retry() {
    each_mode("busy", busy_run);
}

// ---------------------------------------------------------------------------------------------
// Closing with requests in flight

/// What a request in flight at close was.
enum Req {
    Put(Vec<u8>, Vec<u8>, bool, Handle<()>),
    Batch(Vec<(Vec<u8>, Vec<u8>)>, bool, Handle<()>),
    Get(Handle<Option<Vec<u8>>>),
    Scan(Handle<Vec<(Vec<u8>, Vec<u8>)>>),
}

/// Submits `n` requests without waiting for any; returns them.
fn flood(db: &Db, n: u32, seed: u64) -> Vec<Req> {
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut reqs = Vec::new();
    for i in 0..n {
        let sync = rng.gen_ratio(1, 3);
        let w = if sync {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        let key = format!("close{seed}/{i:05}").into_bytes();
        let value = format!("v{i}-{}", "y".repeat(rng.gen_range(0..100))).into_bytes();
        let r = match rng.gen_range(0..10) {
            0..=5 => db
                .submit_put(&w, &key, &value)
                .map(|h| Req::Put(key, value, sync, h)),
            6 | 7 => {
                let mut batch = WriteBatch::new();
                let kvs: Vec<_> = (0..3)
                    .map(|j| {
                        let mut k = key.clone();
                        k.extend_from_slice(format!("/{j}").as_bytes());
                        (k, value.clone())
                    })
                    .collect();
                for (k, v) in &kvs {
                    batch.put(k, v);
                }
                db.submit_write(&w, batch).map(|h| Req::Batch(kvs, sync, h))
            }
            8 => db
                .submit_get(
                    &ReadOptions::default(),
                    format!("close{seed}/{:05}", i / 2).as_bytes(),
                )
                .map(Req::Get),
            _ => db
                .submit_scan(
                    ReadOptions::default(),
                    format!("close{seed}/").as_bytes(),
                    20,
                )
                .map(Req::Scan),
        };
        match r {
            Ok(req) => reqs.push(req),
            Err(Error::Busy(_)) => {}
            Err(e) => panic!("submit: {e}"),
        }
    }
    reqs
}

/// A write that completed `Ok`: key, value, and whether it was `Sync`.
type OkWrite = (Vec<u8>, Vec<u8>, bool);

/// Resolves every request (none may hang); returns the writes that completed `Ok`, as
/// (key, value, sync).
fn resolve(reqs: Vec<Req>, what: &str) -> (Vec<OkWrite>, usize, usize) {
    let (mut ok, mut closed) = (0, 0);
    let mut written = Vec::new();
    let mut tally = |r: Result<()>| match r {
        Ok(()) => {
            ok += 1;
            true
        }
        Err(Error::Closed(_)) => {
            closed += 1;
            false
        }
        Err(e) => panic!("{what}: a request in flight at close failed with {e}"),
    };
    for req in reqs {
        match req {
            Req::Put(k, v, sync, h) => {
                if tally(wait_bounded(h, what)) {
                    written.push((k, v, sync));
                }
            }
            Req::Batch(kvs, sync, h) => {
                if tally(wait_bounded(h, what)) {
                    written.extend(kvs.into_iter().map(|(k, v)| (k, v, sync)));
                }
            }
            Req::Get(h) => {
                tally(wait_bounded(h, what).map(drop));
            }
            Req::Scan(h) => {
                tally(wait_bounded(h, what).map(drop));
            }
        }
    }
    (written, ok, closed)
}

fn close_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let opts = |m| small(m, 64 << 10).tiers_in(dir.path()).build().unwrap();
    let db = Arc::new(Db::open(opts(mode)).unwrap());
    // Several threads flood the database, then the last reference is dropped at once.
    let reqs: Vec<Req> = thread::scope(|s| {
        let ws: Vec<_> = (0..3)
            .map(|t| {
                let db = Arc::clone(&db);
                s.spawn(move || flood(&db, 1500, t))
            })
            .collect();
        ws.into_iter().flat_map(|w| w.join().unwrap()).collect()
    });
    let n = reqs.len();
    let db = Arc::into_inner(db).expect("the only reference");
    drop_within(db, &format!("close {mode:?}"));
    let (written, ok, closed) = resolve(reqs, &format!("close {mode:?}"));
    println!("{mode:?}: {n} requests in flight at close: {ok} Ok, {closed} Closed");
    assert_eq!(ok + closed, n);

    // A clean close keeps every write that completed Ok, whichever WAL mode reopens it.
    for reopen in [mode, other(mode)] {
        let db = Db::open(opts(reopen)).unwrap();
        for (k, v, _) in &written {
            assert_eq!(
                db.get(&ReadOptions::default(), k).unwrap().as_ref(),
                Some(v),
                "{mode:?} reopened as {reopen:?}: Ok write of {} lost",
                k.escape_ascii()
            );
        }
        drop(db);
    }
}

fn other(mode: WalMode) -> WalMode {
    match mode {
        WalMode::Group => WalMode::Parallel,
        WalMode::Parallel => WalMode::Append,
        WalMode::Append => WalMode::Zoned,
        WalMode::Zoned => WalMode::Group,
    }
}

#[test]
fn closing_with_requests_in_flight_resolves_every_handle() {
    each_mode("close", close_run);
}

fn close_crash_run(mode: WalMode) {
    let fs = FaultFs::new(7);
    let opts = small(mode, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).unwrap();
    let reqs = flood(&db, 3000, 11);
    let n = reqs.len();
    drop_within(db, &format!("close+crash {mode:?}"));
    let (written, ok, closed) = resolve(reqs, &format!("close+crash {mode:?}"));
    assert_eq!(ok + closed, n);
    // Power loss after the close: every Sync write that completed Ok survives it.
    fs.fail_after(0, FaultKind::Io, false);
    fs.crash(CrashPolicy::DropUnsynced);
    fs.clear_faults();
    let db = Db::open(opts).unwrap();
    let mut synced = 0;
    for (k, v, sync) in &written {
        if *sync {
            synced += 1;
            assert_eq!(
                db.get(&ReadOptions::default(), k).unwrap().as_ref(),
                Some(v),
                "{mode:?}: Ok Sync write of {} lost in a power loss after close",
                k.escape_ascii()
            );
        }
    }
    assert!(synced > 0);
}

#[test]
fn power_loss_after_close_keeps_every_ok_sync_write() {
    each_mode("close+crash", close_crash_run);
}

// ---------------------------------------------------------------------------------------------
// submit_scan: order, bounds, limit, snapshots

fn skey(i: u32) -> Vec<u8> {
    format!("s{i:05}").into_bytes()
}

fn scan_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(small(mode, 64 << 10).tiers_in(dir.path()).build().unwrap()).unwrap();
    let w = WriteOptions::default();
    let mut model = BTreeMap::new();
    // Data spread over tables (flushed, compacted) and the memtable.
    for i in 0..3000u32 {
        let v = format!("a{i}-{}", "z".repeat(40)).into_bytes();
        db.put(&w, &skey(i), &v).unwrap();
        model.insert(skey(i), v);
    }
    db.flush().unwrap();
    for i in (0..3000u32).step_by(5) {
        db.delete(&w, &skey(i)).unwrap();
        model.remove(&skey(i));
    }
    for i in (1..3000u32).step_by(7) {
        let v = format!("b{i}").into_bytes();
        db.put(&w, &skey(i), &v).unwrap();
        model.insert(skey(i), v);
    }
    db.put(&w, b"a-before", b"x").unwrap();
    db.put(&w, b"u-after", b"x").unwrap();
    model.insert(b"a-before".to_vec(), b"x".to_vec());
    model.insert(b"u-after".to_vec(), b"x".to_vec());

    let snap = db.snapshot();
    let snap_model = model.clone();
    // Changes after the snapshot.
    for i in (0..3000u32).step_by(3) {
        db.put(&w, &skey(i), b"after-snapshot").unwrap();
        model.insert(skey(i), b"after-snapshot".to_vec());
    }
    db.delete(&w, &skey(1)).unwrap();
    model.remove(&skey(1));

    let mut rng = SmallRng::seed_from_u64(99);
    let mut seen = HashSet::new();
    for round in 0..150 {
        let at_snapshot = round % 3 == 0;
        let lower = rng.gen_ratio(1, 2).then(|| skey(rng.gen_range(0..3000)));
        let upper = rng.gen_ratio(1, 2).then(|| skey(rng.gen_range(0..3100)));
        let start = if rng.gen_ratio(1, 8) {
            Vec::new()
        } else {
            skey(rng.gen_range(0..3100))
        };
        let limit = *[0usize, 1, 2, 17, 100, 5000]
            .get(rng.gen_range(0..6))
            .unwrap();
        let m = if at_snapshot { &snap_model } else { &model };
        let from = match &lower {
            Some(l) if *l > start => l.clone(),
            _ => start.clone(),
        };
        let want: Vec<_> = m
            .range(from..)
            .take_while(|(k, _)| upper.as_ref().is_none_or(|u| *k < u))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let base = if at_snapshot {
            ReadOptions::at(&snap)
        } else {
            ReadOptions::default()
        };
        let opts = base.bounds(lower.as_deref(), upper.as_deref());
        let got = wait_bounded(db.submit_scan(opts, &start, limit).unwrap(), "scan").unwrap();
        assert!(
            got.windows(2).all(|p| p[0].0 < p[1].0),
            "{mode:?}: scan not strictly ascending"
        );
        assert!(got.len() <= limit);
        assert!(
            got == want,
            "{mode:?} round {round}: scan from {} bounds {:?}..{:?} limit {limit} snapshot \
             {at_snapshot}: got {} entries, want {}",
            start.escape_ascii(),
            lower.as_ref().map(|l| l.escape_ascii().to_string()),
            upper.as_ref().map(|u| u.escape_ascii().to_string()),
            got.len(),
            want.len()
        );
        seen.insert(got.len());
    }
    assert!(seen.len() > 3, "the rounds cover several result sizes");

    // The snapshot's view survives a flush and compaction.
    db.flush().unwrap();
    db.compact_range(None, None).unwrap();
    let got = wait_bounded(
        db.submit_scan(ReadOptions::at(&snap), b"", 100_000)
            .unwrap(),
        "snapshot scan",
    )
    .unwrap();
    let want: Vec<_> = snap_model.into_iter().collect();
    assert!(
        got == want,
        "{mode:?}: full scan at the snapshot after compaction"
    );
    // ...and agrees with an iterator on the latest state.
    let got = block_on(
        db.submit_scan(ReadOptions::default(), b"", 100_000)
            .unwrap(),
    )
    .unwrap();
    let mut it = db.iter(ReadOptions::default()).unwrap();
    it.seek_to_first();
    let via_iter: Vec<_> = it.entries().map(|e| e.unwrap()).collect();
    assert!(got == via_iter, "{mode:?}: submit_scan and iter disagree");
    assert!(got == model.into_iter().collect::<Vec<_>>());
}

#[test]
fn submit_scan_is_ordered_bounded_and_honours_snapshots() {
    each_mode("scan", scan_run);
}

// ---------------------------------------------------------------------------------------------
// Admission accounting: a completed request no longer counts as in flight

fn no_spurious_busy_run(mode: WalMode) {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(mode, 64 << 10)
        .tiers_in(dir.path())
        .max_pending_requests(1)
        .build()
        .unwrap();
    let db = Db::open(opts).unwrap();
    for i in 0..200u32 {
        db.put(
            &WriteOptions::default(),
            format!("k{i:04}").as_bytes(),
            b"v",
        )
        .unwrap();
    }
    db.flush().unwrap();
    let r = ReadOptions::default();
    let mut spurious = 0;
    let rounds = 3000u32;
    for i in 0..rounds {
        let key = format!("k{:04}", i % 200).into_bytes();
        // One request at a time: each is submitted after the previous one's handle completed,
        // so nothing is in flight and the bound of 1 admits it. Half the handles are waited
        // on, half are polled with `is_ready`.
        let spin = i % 2 == 0;
        let result: Result<()> = match i % 3 {
            0 => db.submit_get(&r, &key).map(|h| {
                let got = if spin {
                    wait_bounded(h, "get")
                } else {
                    h.wait()
                };
                assert_eq!(got.unwrap(), Some(b"v".to_vec()));
            }),
            1 => db.submit_scan(ReadOptions::default(), &key, 2).map(|h| {
                let got = if spin {
                    wait_bounded(h, "scan")
                } else {
                    h.wait()
                };
                assert_eq!(got.unwrap().len(), 2);
            }),
            _ => db
                .submit_put(&WriteOptions::default(), b"w", &key)
                .map(|h| {
                    if spin {
                        wait_bounded(h, "put")
                    } else {
                        h.wait()
                    }
                    .unwrap()
                }),
        };
        match result {
            Ok(()) => {}
            Err(Error::Busy(_)) => spurious += 1,
            Err(e) => panic!("{mode:?}: {e}"),
        }
    }
    assert_eq!(
        spurious, 0,
        "{mode:?}: {spurious} of {rounds} submits were refused with Busy although the only \
         earlier request had completed"
    );
}

/// Regression test for bug async-1 (/tmp/bugs/async-1.md): the in-flight count used to drop
/// only after the waiter was woken, so the next submit saw a stale count.
#[test]
fn no_busy_after_the_previous_request_completed() {
    each_mode("no spurious busy", no_spurious_busy_run);
}
