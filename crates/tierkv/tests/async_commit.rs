//! Asynchronous transaction commits (`Transaction::submit_commit`) queued behind asynchronous
//! writes while synchronous writers keep leading groups.
//!
//! A pipeline worker runs an asynchronous commit and waits in the WAL's writer queue. In group
//! mode an asynchronous write reaching the front of that queue needs some thread to lead its
//! group; with every worker waiting in such commits, the waiting commits must lead it
//! themselves, or no handle completes again. The other WAL modes lead no groups and must
//! complete the same load too. Each run ends by closing the database, which must not hang.

mod common;

use common::{drop_within, poll_for, small, TierSetup};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};
use tierkv::{Db, WalMode, WriteOptions};

/// How long an asynchronous put may stay pending before the run calls it stuck.
const PUT_LIMIT: Duration = Duration::from_secs(5);
/// How long a submitted commit may stay pending (after the put completed) before the run
/// calls it stuck.
const COMMIT_LIMIT: Duration = Duration::from_secs(1);

/// Keeps a synchronous writer leading long groups (1 MiB synced puts, back to back) until
/// `stop` is set.
fn spawn_sync_leader(db: &Arc<Db>, stop: &Arc<AtomicBool>) -> JoinHandle<()> {
    let db = Arc::clone(db);
    let stop = Arc::clone(stop);
    thread::spawn(move || {
        let big = vec![7u8; 1 << 20];
        let mut i = 0u64;
        while !stop.load(Ordering::Relaxed) {
            let key = format!("big{}", i % 4);
            let _ = db.put(&WriteOptions::sync(), key.as_bytes(), &big);
            i += 1;
        }
    })
}

/// One round: an asynchronous put, then one asynchronous commit per worker behind it. Every
/// handle must complete successfully; `Err` describes which stayed pending.
fn round(db: &Db, round: usize, workers: usize) -> Result<(), String> {
    let mut put = db
        .submit_put(&WriteOptions::default(), b"async", b"v")
        .unwrap();
    let mut commits: Vec<_> = (0..workers)
        .map(|w| {
            let mut t = db.transaction();
            t.put(format!("txn{round}/{w}").as_bytes(), b"v").unwrap();
            t.submit_commit(&WriteOptions::default()).unwrap()
        })
        .collect();
    let put = poll_for(&mut put, PUT_LIMIT);
    let commits: Vec<_> = commits
        .iter_mut()
        .map(|h| poll_for(h, COMMIT_LIMIT))
        .collect();
    let committed = commits.iter().filter(|r| r.is_some()).count();
    if put.is_none() || committed < workers {
        return Err(format!(
            "async put completed: {}, submitted commits completed: {committed} of {workers}",
            put.is_some()
        ));
    }
    put.unwrap().unwrap();
    for r in commits {
        r.unwrap().unwrap();
    }
    Ok(())
}

/// Runs rounds for `secs` on the WAL `mode` with `workers` pipeline workers under a steady
/// synchronous leader, then closes the database.
fn commits_behind_async_writes_complete(mode: WalMode, workers: usize, secs: u64) {
    let dir = tempfile::tempdir().unwrap();
    let opts = small(mode, 16 << 20)
        .pipeline_workers(workers)
        .tiers_in(dir.path())
        .build()
        .unwrap();
    let db = Arc::new(Db::open(opts).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let leader = spawn_sync_leader(&db, &stop);
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut rounds = 0;
    while Instant::now() < deadline {
        rounds += 1;
        if let Err(stuck) = round(&db, rounds, workers) {
            stop.store(true, Ordering::Relaxed);
            // NB: the leader thread keeps its clone, so unwinding here does not close the
            // database, which would hang as the handles do.
            panic!("{mode:?}, {workers} pipeline worker(s), round {rounds}: {stuck}; stuck");
        }
    }
    stop.store(true, Ordering::Relaxed);
    leader.join().unwrap();
    let db = Arc::into_inner(db).expect("the leader thread released the database");
    drop_within(
        db,
        &format!("closing after {mode:?} with {workers} worker(s)"),
    );
}

/// The default number of pipeline workers.
fn default_workers() -> usize {
    tierkv::Options::builder()
        .tier(tierkv::TierConfig::new("f", "/x"))
        .build()
        .unwrap()
        .pipeline
        .workers
}

#[test]
fn group_mode_commits_behind_async_writes_complete_with_one_worker() {
    commits_behind_async_writes_complete(WalMode::Group, 1, 4);
}

#[test]
fn group_mode_commits_behind_async_writes_complete_with_default_workers() {
    commits_behind_async_writes_complete(WalMode::Group, default_workers(), 8);
}

#[test]
fn other_modes_commits_behind_async_writes_complete() {
    for mode in [WalMode::Parallel, WalMode::Append, WalMode::Zoned] {
        commits_behind_async_writes_complete(mode, 1, 2);
    }
}
