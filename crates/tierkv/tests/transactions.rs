//! Optimistic transactions, in both WAL modes: read-your-own-writes, rollback, conflict detection
//! at commit (against other transactions and against plain writes, for keys read or written),
//! disjoint transactions, a contended counter, `submit_commit`, and atomicity and durability of
//! commits across a power loss on `FaultFs`.

mod common;

use common::{
    block_on, crash_now, each_mode, small, wait_bounded, within, Crash, TierSetup, MODES,
    TEST_LIMIT,
};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use tierkv::env::{CrashPolicy, FaultFs};
use tierkv::{Db, Error, Options, ReadOptions, Result, WalMode, WriteOptions};

fn open_dir(dir: &Path, mode: WalMode) -> Db {
    Db::open(small(mode, 64 << 10).tiers_in(dir).build().unwrap()).unwrap()
}

/// Runs the body once per WAL mode on a fresh directory, under a watchdog.
fn each_mode_on_a_db(name: &str, body: fn(&Db, WalMode)) {
    each_mode(name, move |mode| {
        let dir = tempfile::tempdir().unwrap();
        let db = open_dir(dir.path(), mode);
        body(&db, mode);
    });
}

fn get(db: &Db, key: &[u8]) -> Option<Vec<u8>> {
    db.get(&ReadOptions::default(), key).unwrap()
}

fn v(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

/// Asserts `r` is a conflict on `key`.
fn assert_conflict(r: Result<()>, key: &[u8], what: &str) {
    match r {
        Err(Error::Conflict { key: k }) => assert_eq!(
            k,
            key,
            "{what}: conflict names {} instead of {}",
            k.escape_ascii(),
            key.escape_ascii()
        ),
        Ok(()) => panic!(
            "{what}: commit succeeded, expected a conflict on {}",
            key.escape_ascii()
        ),
        Err(e) => panic!("{what}: expected a conflict, got {e}"),
    }
}

// ---------------------------------------------------------------------------------------------

#[test]
fn reads_see_own_writes() {
    each_mode_on_a_db("own writes", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"a", b"db-a").unwrap();
        db.put(&w, b"b", b"db-b").unwrap();
        let mut t = db.transaction();
        assert_eq!(t.get(b"a").unwrap(), v("db-a"));
        assert_eq!(t.get(b"missing").unwrap(), None);
        t.put(b"a", b"txn-a").unwrap();
        t.put(b"c", b"txn-c").unwrap();
        t.delete(b"b").unwrap();
        assert_eq!(t.get(b"a").unwrap(), v("txn-a"), "{mode:?}");
        assert_eq!(t.get(b"c").unwrap(), v("txn-c"), "{mode:?}");
        assert_eq!(t.get(b"b").unwrap(), None, "{mode:?}: own delete");
        // Later writes in the transaction replace earlier ones.
        t.put(b"c", b"txn-c2").unwrap();
        t.delete(b"a").unwrap();
        t.put(b"b", b"txn-b").unwrap();
        assert_eq!(t.get(b"c").unwrap(), v("txn-c2"));
        assert_eq!(t.get(b"a").unwrap(), None);
        assert_eq!(t.get(b"b").unwrap(), v("txn-b"));
        // Nothing is visible outside before commit.
        assert_eq!(get(db, b"a"), v("db-a"));
        assert_eq!(get(db, b"b"), v("db-b"));
        assert_eq!(get(db, b"c"), None);
        t.commit(&w).unwrap();
        assert_eq!(get(db, b"a"), None, "{mode:?}");
        assert_eq!(get(db, b"b"), v("txn-b"), "{mode:?}");
        assert_eq!(get(db, b"c"), v("txn-c2"), "{mode:?}");
        assert!(db.stats().txn_commits >= 1);
    });
}

#[test]
fn rollback_and_drop_write_nothing() {
    each_mode_on_a_db("rollback", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"k", b"before").unwrap();
        let mut t = db.transaction();
        t.get(b"k").unwrap();
        t.put(b"k", b"rolled-back").unwrap();
        t.put(b"new", b"rolled-back").unwrap();
        t.delete(b"k").unwrap();
        t.rollback();
        let mut t = db.transaction();
        t.put(b"k", b"dropped").unwrap();
        t.put(b"new2", b"dropped").unwrap();
        drop(t);
        assert_eq!(get(db, b"k"), v("before"), "{mode:?}");
        assert_eq!(get(db, b"new"), None, "{mode:?}");
        assert_eq!(get(db, b"new2"), None, "{mode:?}");
        // A rolled-back transaction does not make a later one conflict.
        let mut t = db.transaction();
        t.get(b"k").unwrap();
        t.put(b"k", b"after").unwrap();
        t.commit(&w).unwrap();
        assert_eq!(get(db, b"k"), v("after"));
    });
}

#[test]
fn second_of_two_racing_transactions_conflicts_and_writes_nothing() {
    each_mode_on_a_db("race", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"x", b"0").unwrap();
        db.put(&w, b"pre", b"kept").unwrap();
        let mut t1 = db.transaction();
        let mut t2 = db.transaction();
        assert_eq!(t1.get(b"x").unwrap(), v("0"));
        assert_eq!(t2.get(b"x").unwrap(), v("0"));
        t1.put(b"x", b"t1").unwrap();
        t2.put(b"x", b"t2").unwrap();
        t2.put(b"t2-only", b"t2").unwrap();
        t2.delete(b"pre").unwrap();
        let before = db.stats().txn_conflicts;
        t1.commit(&w).unwrap();
        assert_conflict(t2.commit(&w), b"x", &format!("{mode:?} second commit"));
        assert_eq!(get(db, b"x"), v("t1"), "{mode:?}");
        assert_eq!(
            get(db, b"t2-only"),
            None,
            "{mode:?}: a failed commit wrote a key"
        );
        assert_eq!(
            get(db, b"pre"),
            v("kept"),
            "{mode:?}: a failed commit deleted a key"
        );
        assert!(db.stats().txn_conflicts > before);

        // Written (not read) keys conflict too.
        let mut t1 = db.transaction();
        let mut t2 = db.transaction();
        t1.put(b"blind", b"t1").unwrap();
        t2.put(b"blind", b"t2").unwrap();
        t2.put(b"blind-extra", b"t2").unwrap();
        t1.commit(&w).unwrap();
        assert_conflict(t2.commit(&w), b"blind", &format!("{mode:?} write-write"));
        assert_eq!(get(db, b"blind"), v("t1"));
        assert_eq!(get(db, b"blind-extra"), None);
    });
}

#[test]
fn plain_write_to_a_read_key_fails_the_commit() {
    each_mode_on_a_db("plain write", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"r", b"1").unwrap();
        // A write after the read.
        let mut t = db.transaction();
        assert_eq!(t.get(b"r").unwrap(), v("1"));
        db.put(&w, b"r", b"2").unwrap();
        t.put(b"out", b"t").unwrap();
        assert_conflict(t.commit(&w), b"r", &format!("{mode:?} put after read"));
        assert_eq!(get(db, b"out"), None);
        assert_eq!(get(db, b"r"), v("2"));
        // A delete of a read key (absent keys read count as well).
        let mut t = db.transaction();
        assert_eq!(t.get(b"ghost").unwrap(), None);
        assert_eq!(t.get(b"r").unwrap(), v("2"));
        db.delete(&w, b"r").unwrap();
        t.put(b"out", b"t").unwrap();
        assert_conflict(t.commit(&w), b"r", &format!("{mode:?} delete after read"));
        let mut t = db.transaction();
        assert_eq!(t.get(b"ghost").unwrap(), None);
        db.submit_put(&w, b"ghost", b"boo").unwrap().wait().unwrap();
        t.put(b"out", b"t").unwrap();
        assert_conflict(
            t.commit(&w),
            b"ghost",
            &format!("{mode:?} insert of a read absent key"),
        );
        assert_eq!(get(db, b"out"), None);
        // A write after the transaction began, before the key was read.
        let mut t = db.transaction();
        db.put(&w, b"early", b"x").unwrap();
        t.get(b"early").unwrap();
        t.put(b"out", b"t").unwrap();
        assert_conflict(
            t.commit(&w),
            b"early",
            &format!("{mode:?} write between begin and read"),
        );
        // Writes before the transaction began do not conflict.
        db.put(&w, b"r", b"3").unwrap();
        let mut t = db.transaction();
        assert_eq!(t.get(b"r").unwrap(), v("3"));
        t.put(b"out", b"ok").unwrap();
        t.commit(&w).unwrap();
        assert_eq!(get(db, b"out"), v("ok"));
        // Flushes in between do not cause (or hide) conflicts.
        let mut t = db.transaction();
        assert_eq!(t.get(b"r").unwrap(), v("3"));
        db.flush().unwrap();
        t.put(b"r", b"4").unwrap();
        t.commit(&w).unwrap();
        let mut t = db.transaction();
        assert_eq!(t.get(b"r").unwrap(), v("4"));
        db.put(&w, b"r", b"5").unwrap();
        db.flush().unwrap();
        t.put(b"r", b"lost").unwrap();
        assert_conflict(t.commit(&w), b"r", &format!("{mode:?} write then flush"));
        assert_eq!(get(db, b"r"), v("5"));
    });
}

#[test]
fn disjoint_transactions_both_commit() {
    each_mode_on_a_db("disjoint", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"a", b"1").unwrap();
        db.put(&w, b"b", b"1").unwrap();
        let mut t1 = db.transaction();
        let mut t2 = db.transaction();
        assert_eq!(t1.get(b"a").unwrap(), v("1"));
        assert_eq!(t2.get(b"b").unwrap(), v("1"));
        t1.put(b"a", b"2").unwrap();
        t2.put(b"b", b"2").unwrap();
        t2.put(b"c", b"2").unwrap();
        db.put(&w, b"unrelated", b"x").unwrap();
        t2.commit(&w).unwrap();
        t1.commit(&w).unwrap();
        assert_eq!(get(db, b"a"), v("2"), "{mode:?}");
        assert_eq!(get(db, b"b"), v("2"), "{mode:?}");
        assert_eq!(get(db, b"c"), v("2"), "{mode:?}");
    });
}

const INC_THREADS: usize = 4;
const INC_EACH: u64 = 100;

#[test]
fn concurrent_increments_add_up() {
    each_mode_on_a_db("increments", |db, mode| {
        let w = WriteOptions::default();
        db.put(&w, b"counter", b"0").unwrap();
        let conflicts = AtomicU64::new(0);
        let before = db.stats().txn_conflicts;
        thread::scope(|s| {
            for t in 0..INC_THREADS {
                let conflicts = &conflicts;
                s.spawn(move || {
                    for i in 0..INC_EACH {
                        loop {
                            let mut txn = db.transaction();
                            let n: u64 =
                                std::str::from_utf8(&txn.get(b"counter").unwrap().unwrap())
                                    .unwrap()
                                    .parse()
                                    .unwrap();
                            txn.put(b"counter", n.wrapping_add(1).to_string().as_bytes())
                                .unwrap();
                            // Private keys ride along, to check they commit with the counter.
                            txn.put(format!("inc/{t}/{i}").as_bytes(), n.to_string().as_bytes())
                                .unwrap();
                            // Every other thread commits through the async API.
                            let r = if t % 2 == 0 {
                                txn.commit(&w)
                            } else {
                                wait_bounded(txn.submit_commit(&w).unwrap(), "submit_commit")
                            };
                            match r {
                                Ok(()) => break,
                                Err(Error::Conflict { key }) => {
                                    assert_eq!(key, b"counter");
                                    conflicts.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(e) => panic!("{mode:?}: commit: {e}"),
                            }
                        }
                    }
                });
            }
        });
        let total = INC_THREADS as u64 * INC_EACH;
        assert_eq!(get(db, b"counter"), v(&total.to_string()), "{mode:?}");
        // Each committed increment saw a distinct counter value: 0..total, each once.
        let mut seen = vec![false; total as usize];
        for t in 0..INC_THREADS {
            for i in 0..INC_EACH {
                let n: usize =
                    String::from_utf8(get(db, format!("inc/{t}/{i}").as_bytes()).unwrap())
                        .unwrap()
                        .parse()
                        .unwrap();
                assert!(!seen[n], "{mode:?}: two commits incremented from {n}");
                seen[n] = true;
            }
        }
        let conflicts = conflicts.load(Ordering::Relaxed);
        println!("{mode:?}: {total} increments, {conflicts} conflicts retried");
        assert!(db.stats().txn_conflicts >= before + conflicts);
    });
}

#[test]
fn submit_commit_completes_and_reports_conflicts() {
    each_mode_on_a_db("submit_commit", |db, mode| {
        let w = WriteOptions::default();
        let mut t = db.transaction();
        t.put(b"s1", b"a").unwrap();
        t.put(b"s2", b"a").unwrap();
        let h = t.submit_commit(&WriteOptions::sync()).unwrap();
        wait_bounded(h, "submit_commit").unwrap();
        assert_eq!(get(db, b"s1"), v("a"), "{mode:?}");
        assert_eq!(get(db, b"s2"), v("a"), "{mode:?}");

        // A conflict comes through the handle, awaited.
        let mut t1 = db.transaction();
        let mut t2 = db.transaction();
        t1.get(b"s1").unwrap();
        t2.get(b"s1").unwrap();
        t1.put(b"s1", b"t1").unwrap();
        t2.put(b"s1", b"t2").unwrap();
        t2.put(b"s3", b"t2").unwrap();
        let h1 = t1.submit_commit(&w).unwrap();
        assert!(block_on(h1).is_ok());
        let r = match t2.submit_commit(&w) {
            Ok(h) => block_on(h),
            // Conflicts may also be found before anything is queued.
            Err(e) => Err(e),
        };
        assert_conflict(r, b"s1", &format!("{mode:?} submit_commit"));
        assert_eq!(get(db, b"s1"), v("t1"));
        assert_eq!(get(db, b"s3"), None);

        // Many commits in flight at once, on disjoint keys: all land.
        let handles: Vec<_> = (0..200)
            .map(|i| {
                let mut t = db.transaction();
                t.put(format!("many/{i:03}/a").as_bytes(), b"x").unwrap();
                t.put(format!("many/{i:03}/b").as_bytes(), b"x").unwrap();
                t.submit_commit(&w).unwrap()
            })
            .collect();
        for h in handles {
            wait_bounded(h, "many").unwrap();
        }
        let mut it = db
            .iter(ReadOptions::default().bounds(Some(b"many/"), Some(b"many0")))
            .unwrap();
        it.seek_to_first();
        assert_eq!(it.entries().count(), 400, "{mode:?}");
    });
}

// ---------------------------------------------------------------------------------------------
// Power loss

fn crash_options(fs: &Arc<FaultFs>, mode: WalMode) -> Options {
    small(mode, 64 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .build()
        .unwrap()
}

/// Values of the unsynced transactions: large enough that 30 of them span several pages.
fn group_value(g: u32) -> Vec<u8> {
    format!("g{g}-{}", "q".repeat(300)).into_bytes()
}

fn crash_run(mode: WalMode, policy: CrashPolicy, seed: u64) {
    let what = format!("{mode:?} {policy:?}");
    let fs = FaultFs::new(seed);
    let opts = crash_options(&fs, mode);
    let db = Db::open(opts.clone()).unwrap();
    let w = WriteOptions::default();
    // Background data, some of it in tables.
    for i in 0..2000u32 {
        db.put(&w, format!("bg{i:05}").as_bytes(), &[b'b'; 40])
            .unwrap();
    }
    db.put(&WriteOptions::sync(), b"d", b"before").unwrap();

    // Committed with Sync: atomic and durable.
    let mut t = db.transaction();
    assert_eq!(t.get(b"d").unwrap(), v("before"));
    for k in ["a", "b", "c"] {
        t.put(k.as_bytes(), b"committed").unwrap();
    }
    t.delete(b"d").unwrap();
    t.commit(&WriteOptions::sync()).unwrap();
    // Committed with Sync through submit_commit.
    let mut t = db.transaction();
    for k in ["e", "f"] {
        t.put(k.as_bytes(), b"committed-async").unwrap();
    }
    wait_bounded(
        t.submit_commit(&WriteOptions::sync()).unwrap(),
        "sync submit_commit",
    )
    .unwrap();
    // Rolled back, dropped, and conflicted: absent.
    let mut t = db.transaction();
    t.put(b"rolled", b"x").unwrap();
    t.put(b"a", b"rolled").unwrap();
    t.rollback();
    let mut t = db.transaction();
    t.put(b"dropped", b"x").unwrap();
    drop(t);
    let mut t = db.transaction();
    t.get(b"e").unwrap();
    db.put(&WriteOptions::sync(), b"e", b"plain").unwrap();
    t.put(b"conflicted", b"x").unwrap();
    assert!(matches!(
        t.commit(&WriteOptions::sync()),
        Err(Error::Conflict { .. })
    ));
    // Unsynced multi-key commits: each all or nothing after the crash.
    for g in 0..30u32 {
        let mut t = db.transaction();
        for j in 0..6 {
            t.put(format!("grp{g:02}/{j}").as_bytes(), &group_value(g))
                .unwrap();
        }
        t.commit(&w).unwrap();
    }

    crash_now(&fs, db, Crash::Power(policy), &what);
    let db = Db::open(opts).unwrap();
    for k in ["a", "b", "c"] {
        assert_eq!(get(&db, k.as_bytes()), v("committed"), "{what}: key {k}");
    }
    assert_eq!(get(&db, b"d"), None, "{what}: a committed delete");
    assert_eq!(get(&db, b"f"), v("committed-async"), "{what}");
    assert_eq!(get(&db, b"e"), v("plain"), "{what}");
    for k in ["rolled", "dropped", "conflicted"] {
        assert_eq!(get(&db, k.as_bytes()), None, "{what}: key {k}");
    }
    let mut kept = 0;
    for g in 0..30u32 {
        let vals: Vec<_> = (0..6)
            .map(|j| get(&db, format!("grp{g:02}/{j}").as_bytes()))
            .collect();
        let all = vals.iter().all(|x| x.as_ref() == Some(&group_value(g)));
        let none = vals.iter().all(Option::is_none);
        assert!(
            all || none,
            "{what}: transaction {g} torn by the crash: {} of 6 keys present",
            vals.iter().filter(|x| x.is_some()).count()
        );
        kept += usize::from(all);
    }
    // Recovery keeps a prefix of the unsynced commits.
    let groups: BTreeMap<u32, bool> = (0..30u32)
        .map(|g| (g, get(&db, format!("grp{g:02}/0").as_bytes()).is_some()))
        .collect();
    assert!(
        groups.values().skip_while(|&&k| k).all(|&k| !k),
        "{what}: recovered unsynced commits are not a prefix: {groups:?}"
    );
    println!("{what}: {kept} of 30 unsynced transactions survived");
}

#[test]
fn committed_sync_transactions_survive_power_loss_atomically() {
    for mode in MODES {
        for (i, policy) in [
            CrashPolicy::DropUnsynced,
            CrashPolicy::KeepRandomPages,
            CrashPolicy::TearLastSector,
        ]
        .into_iter()
        .enumerate()
        {
            within(
                &format!("crash {mode:?} {policy:?}"),
                TEST_LIMIT,
                move || crash_run(mode, policy, 100 + i as u64),
            );
        }
    }
}
