//! Parallel memtable insertion of a write group (`wal.concurrent_memtable_writes`, group WAL).
//!
//! Once a group is logged, its batches are inserted by several threads; the group becomes
//! visible only when every batch is in, and groups become visible in order. Each test runs with
//! the option on and off (the leader-inserts path), on small memtables so switches happen while
//! groups are inserted:
//! - batch atomicity: each batch writes one counter to the same keys; a reader at a snapshot
//!   always finds them equal, and a writer's counter never goes backwards between snapshots;
//! - visibility order: a write records which write was acknowledged before it started; a
//!   snapshot that shows the later write shows the earlier one too;
//! - recovery: what was acknowledged is there after a reopen.

mod common;

use common::{small, TierSetup};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};
use tierkv::{Db, Durability, ReadOptions, WalMode, WriteBatch, WriteOptions};

/// Keys each batch writes: enough that any group of two batches is inserted in parallel.
const KEYS_PER_BATCH: usize = 40;
/// Threads calling `Db::write`.
const BLOCKING_WRITERS: usize = 6;
/// Threads submitting through the asynchronous API, several writes in flight each.
const ASYNC_WRITERS: usize = 2;
/// How long writers run while the reader checks.
const RUN_FOR: Duration = Duration::from_millis(1500);

fn open(dir: &std::path::Path, concurrent: bool) -> Db {
    let opts = small(WalMode::Group, 256 << 10)
        .tiers_in(dir)
        .wal_concurrent_memtable_writes(concurrent)
        .build()
        .expect("valid options");
    Db::open(opts).expect("open")
}

fn counter_key(writer: usize, index: usize) -> Vec<u8> {
    format!("w{writer:02}/k{index:02}").into_bytes()
}

/// One batch setting every key of `writer` to `counter`.
fn counter_batch(writer: usize, counter: u64) -> WriteBatch {
    let mut batch = WriteBatch::new();
    let value = counter.to_string();
    for index in 0..KEYS_PER_BATCH {
        batch.put(counter_key(writer, index), value.as_bytes());
    }
    batch
}

/// Writes counters 1, 2, ... until `stop`; returns the last acknowledged one.
fn blocking_writer(db: &Db, writer: usize, stop: &AtomicBool) -> u64 {
    let opts = WriteOptions {
        durability: if writer.is_multiple_of(2) {
            Durability::Sync
        } else {
            Durability::Flush
        },
    };
    let mut counter = 0;
    while !stop.load(Ordering::Relaxed) {
        db.write(&opts, counter_batch(writer, counter + 1))
            .expect("write");
        counter += 1;
    }
    counter
}

/// Like `blocking_writer`, four writes in flight through `submit_write`. A writer's writes are
/// numbered in submission order, so its counter still only grows.
fn async_writer(db: &Db, writer: usize, stop: &AtomicBool) -> u64 {
    let opts = WriteOptions::default();
    let mut counter = 0;
    while !stop.load(Ordering::Relaxed) {
        let handles: Vec<_> = (1..=4)
            .map(|n| db.submit_write(&opts, counter_batch(writer, counter + n)))
            .collect();
        for handle in handles {
            handle.expect("submit").wait().expect("async write");
        }
        counter += 4;
    }
    counter
}

/// Every writer's counter at a snapshot, checking that all its keys agree.
fn counters_at_snapshot(db: &Db, writers: usize) -> Vec<u64> {
    let snapshot = db.snapshot();
    let at = ReadOptions::at(&snapshot);
    (0..writers)
        .map(|writer| {
            let values: Vec<Option<Vec<u8>>> = (0..KEYS_PER_BATCH)
                .map(|index| db.get(&at, &counter_key(writer, index)).expect("get"))
                .collect();
            assert!(
                values.iter().all(|v| *v == values[0]),
                "writer {writer}: a snapshot saw part of a batch: {:?}",
                values
                    .iter()
                    .map(|v| v.as_deref().map(String::from_utf8_lossy))
                    .collect::<Vec<_>>()
            );
            values[0]
                .as_deref()
                .map_or(0, |v| std::str::from_utf8(v).unwrap().parse().unwrap())
        })
        .collect()
}

fn batches_stay_whole(concurrent: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), concurrent));
    let stop = Arc::new(AtomicBool::new(false));
    let writers = BLOCKING_WRITERS + ASYNC_WRITERS;
    let threads: Vec<_> = (0..writers)
        .map(|writer| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            thread::spawn(move || {
                if writer < BLOCKING_WRITERS {
                    blocking_writer(&db, writer, &stop)
                } else {
                    async_writer(&db, writer, &stop)
                }
            })
        })
        .collect();
    let started = Instant::now();
    let mut seen = vec![0; writers];
    let mut snapshots = 0;
    while started.elapsed() < RUN_FOR {
        let now = counters_at_snapshot(&db, writers);
        for (writer, (before, after)) in seen.iter().zip(&now).enumerate() {
            assert!(
                after >= before,
                "writer {writer}: counter {after} visible after {before}"
            );
        }
        seen = now;
        snapshots += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let last: Vec<u64> = threads.into_iter().map(|t| t.join().unwrap()).collect();
    assert_eq!(counters_at_snapshot(&db, writers), last);
    assert!(snapshots > 0);
    let stats = db.stats();
    if concurrent {
        assert!(
            stats.parallel_insert_groups > 0,
            "no group was inserted in parallel ({} groups of {} writes)",
            stats.write_groups,
            stats.writes
        );
    } else {
        assert_eq!(stats.parallel_insert_groups, 0);
    }
    // Recovery reads the same log whichever path inserted the groups.
    drop(db);
    let db = open(dir.path(), concurrent);
    assert_eq!(counters_at_snapshot(&db, writers), last);
}

#[test]
fn a_snapshot_never_sees_part_of_a_batch_inserted_in_parallel() {
    batches_stay_whole(true);
}

#[test]
fn a_snapshot_never_sees_part_of_a_batch_inserted_by_the_leader() {
    batches_stay_whole(false);
}

/// The key of write `ticket`, whose value names the newest write acknowledged before it began.
fn ticket_key(ticket: u64) -> Vec<u8> {
    format!("t{ticket:08}").into_bytes()
}

/// Each write takes a ticket and records the highest ticket acknowledged before it started:
/// that write has a smaller sequence number, so any snapshot showing this one shows it too.
fn visibility_follows_acknowledgement(concurrent: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path(), concurrent));
    let stop = Arc::new(AtomicBool::new(false));
    let next_ticket = Arc::new(AtomicU64::new(1));
    let acknowledged = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..BLOCKING_WRITERS)
        .map(|writer| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            let (next_ticket, acknowledged) = (Arc::clone(&next_ticket), Arc::clone(&acknowledged));
            thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let before = acknowledged.load(Ordering::Acquire);
                    let ticket = next_ticket.fetch_add(1, Ordering::Relaxed);
                    // Padding keys make the batch big enough for the parallel path.
                    let mut batch = counter_batch(writer, ticket);
                    batch.put(ticket_key(ticket), before.to_string());
                    db.write(&WriteOptions::default(), batch).expect("write");
                    acknowledged.fetch_max(ticket, Ordering::AcqRel);
                }
            })
        })
        .collect();
    let started = Instant::now();
    let mut checked = 0;
    while started.elapsed() < RUN_FOR {
        let snapshot = db.snapshot();
        let mut it = db.iter(ReadOptions::at(&snapshot)).expect("iterator");
        it.seek(b"t");
        let mut visible = std::collections::BTreeMap::new();
        while it.valid() && it.key().starts_with(b"t") {
            let ticket: u64 = std::str::from_utf8(&it.key()[1..])
                .unwrap()
                .parse()
                .unwrap();
            let before: u64 = std::str::from_utf8(it.value()).unwrap().parse().unwrap();
            visible.insert(ticket, before);
            it.next();
        }
        for (ticket, before) in &visible {
            assert!(
                *before == 0 || visible.contains_key(before),
                "write {ticket} is visible but write {before}, acknowledged before it began, \
                 is not"
            );
            checked += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    threads.into_iter().for_each(|t| t.join().unwrap());
    assert!(checked > 0);
    assert_eq!(db.stats().parallel_insert_groups > 0, concurrent);
}

#[test]
fn groups_inserted_in_parallel_become_visible_in_order() {
    visibility_follows_acknowledgement(true);
}

#[test]
fn groups_inserted_by_the_leader_become_visible_in_order() {
    visibility_follows_acknowledgement(false);
}
