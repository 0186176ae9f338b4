//! Fault tolerance of the write-ahead logs, in every WAL mode: recovery after a crash or a
//! power loss rebuilds a prefix of history holding every acknowledged `Sync` write (batches at
//! the modes' size boundaries, concurrent writers, injected I/O errors); damage to bytes a
//! later record proves durable is `Corruption`, not a quietly shortened history; and a `Sync`
//! write of an empty batch makes every earlier write durable.

mod common;

use common::{crash_now, small, Crash, TierSetup, FAST};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tierkv::env::{CrashPolicy, FaultFs, Fs};
use tierkv::{
    Db, Durability, Options, ReadOptions, RecoveryMode, WalMode, WriteBatch, WriteOptions,
};

fn opts(fs: &Arc<FaultFs>, mode: WalMode) -> Options {
    small(mode, 1 << 20)
        .fault_tiers()
        .fs(fs.clone())
        .build()
        .unwrap()
}

fn k(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn files_with_ext(fs: &FaultFs, ext: &str) -> Vec<PathBuf> {
    let mut v: Vec<_> = fs
        .list_dir(Path::new(FAST))
        .unwrap()
        .into_iter()
        .filter(|n| n.ends_with(ext))
        .map(|n| Path::new(FAST).join(n))
        .collect();
    v.sort();
    v
}

/// Five `Sync` puts, then a power loss: every record is durable, and each record after the
/// first says the ones before it were.
fn five_synced_puts(fs: &Arc<FaultFs>, opts: Options) {
    let db = Db::open(opts).unwrap();
    for i in 0..5 {
        db.put(&WriteOptions::sync(), &k(i), b"value").unwrap();
    }
    fs.crash(CrashPolicy::DropUnsynced);
    drop(db);
}

/// The only append-WAL log, after `five_synced_puts`.
fn only_alog(fs: &FaultFs) -> PathBuf {
    let logs = files_with_ext(fs, ".alog");
    assert_eq!(logs.len(), 1, "{logs:?}");
    logs.into_iter().next().unwrap()
}

/// Offset of the second record of an append-WAL log: the first one's length, padded to 8.
fn second_record(data: &[u8]) -> u64 {
    let first_len = u32::from_le_bytes(data[4..8].try_into().unwrap()) as u64;
    (24 + first_len).div_ceil(8) * 8
}

/// Opens `opts` expecting `Corruption`; on a silent success, names the `Sync` writes lost.
fn expect_corruption(opts: Options, what: &str) {
    match Db::open(opts) {
        Ok(db) => {
            let lost: Vec<u32> = (0..5)
                .filter(|&i| db.get(&ReadOptions::default(), &k(i)).unwrap().is_none())
                .collect();
            panic!("{what}: open succeeded although acknowledged Sync writes {lost:?} were lost");
        }
        Err(e) => assert!(e.is_corruption(), "{what}: {e}"),
    }
}

/// A damaged first record of the first live log: the MANIFEST says which write it held, and
/// the later records prove that write durable, so every mode but `PointInTime` refuses it.
#[test]
fn append_wal_refuses_a_damaged_first_record_later_records_prove_durable() {
    for mode in [
        RecoveryMode::TolerateCorruptedTail,
        RecoveryMode::AbsoluteConsistency,
        RecoveryMode::SkipAnyCorruptedRecords,
        RecoveryMode::PointInTime,
    ] {
        let fs = FaultFs::new(1);
        let with_mode = || {
            small(WalMode::Append, 1 << 20)
                .fault_tiers()
                .fs(fs.clone())
                .wal_recovery_mode(mode)
                .build()
                .unwrap()
        };
        five_synced_puts(&fs, with_mode());
        fs.flip_bit(&only_alog(&fs), 30, 0);
        if mode != RecoveryMode::PointInTime {
            expect_corruption(with_mode(), &format!("{mode:?}"));
            continue;
        }
        // Point in time: history ends quietly before the damage.
        let db = Db::open(with_mode()).unwrap();
        assert!(db.get(&ReadOptions::default(), &k(0)).unwrap().is_none());
    }
}

/// A damaged record after the first, with later records proving it durable: `Corruption`.
#[test]
fn append_wal_refuses_a_damaged_later_record_later_records_prove_durable() {
    let fs = FaultFs::new(1);
    five_synced_puts(&fs, opts(&fs, WalMode::Append));
    let log = only_alog(&fs);
    let second = second_record(&fs.file_contents(&log).unwrap());
    fs.flip_bit(&log, second + 30, 0);
    expect_corruption(opts(&fs, WalMode::Append), "second record");
}

/// The zoned WAL (its own recovery, ordering records by sequence number): damage to the log's
/// marker or to its first write's record, which later records prove durable, is `Corruption`.
#[test]
fn zoned_wal_refuses_a_damaged_first_record_later_records_prove_durable() {
    for damage_marker in [true, false] {
        let fs = FaultFs::new(1);
        five_synced_puts(&fs, mode_opts(&fs, WalMode::Zoned, 1 << 20));
        let device = Path::new(FAST).join("WALZONES");
        let at = first_zoned_record(&fs.file_contents(&device).unwrap(), damage_marker);
        fs.flip_bit(&device, at + 30, 0);
        let what = if damage_marker {
            "marker"
        } else {
            "first write"
        };
        expect_corruption(mode_opts(&fs, WalMode::Zoned, 1 << 20), what);
    }
}

/// Offset in the zoned device of the log's marker (an empty batch), or of the record of the
/// first write (sequence 1): records start on 4 KiB boundaries.
fn first_zoned_record(device: &[u8], marker: bool) -> u64 {
    (0..device.len())
        .step_by(4096)
        .find(|&at| {
            tierkv::inspect::decode_append_record(&device[at..])
                .is_ok_and(|r| r.seq == 1 && r.batch.is_empty() == marker)
        })
        .expect("the record is on the device") as u64
}

/// The group WAL: damage to its first record, with later records saying the file was synced
/// past it, is `Corruption` too.
#[test]
fn group_wal_refuses_a_damaged_first_record_later_records_prove_durable() {
    let fs = FaultFs::new(1);
    five_synced_puts(&fs, opts(&fs, WalMode::Group));
    let logs = files_with_ext(&fs, ".log");
    assert_eq!(logs.len(), 1, "{logs:?}");
    fs.flip_bit(&logs[0], 30, 0);
    expect_corruption(opts(&fs, WalMode::Group), "group WAL");
}

/// Encoded sizes at the WAL modes' boundaries: a parallel-WAL page exactly filled (4072 payload
/// bytes less an 8-byte entry header), one byte over, two pages, a zone append (128 KiB)
/// exactly and one byte over.
const BOUNDARY_SIZES: [usize; 8] = [
    4064,
    4065,
    4072,
    2 * 4072 - 8,
    128 << 10,
    (128 << 10) - 24,
    (128 << 10) - 23,
    (128 << 10) + 1,
];

/// One batch numbered `i`: key `i` and, when `size` is given, a value padding the batch's
/// encoding to exactly `size` bytes.
fn batch_of(i: u32, size: Option<usize>) -> WriteBatch {
    let mut b = WriteBatch::new();
    let key = k(i);
    match size {
        None => b.put(&key, format!("v{i}").as_bytes()),
        Some(target) => {
            // 12 batch header + 1 kind + 1 key len + key + varint(vlen) + vlen
            let fixed = 12 + 1 + 1 + key.len();
            let mut vlen = target - fixed - 1;
            while vlen + varint_len(vlen) + fixed > target {
                vlen -= 1;
            }
            while vlen + varint_len(vlen) + fixed < target {
                vlen += 1;
            }
            b.put(&key, vec![(i % 251) as u8; vlen]);
            assert_eq!(b.encoded_len(), target);
        }
    }
    b
}

fn varint_len(mut v: usize) -> usize {
    let mut n = 1;
    while v >= 0x80 {
        v >>= 7;
        n += 1;
    }
    n
}

fn mode_opts(fs: &Arc<FaultFs>, mode: WalMode, write_buffer: usize) -> Options {
    small(mode, write_buffer)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zone_size(1 << 20)
        .wal_zones(16)
        .build()
        .unwrap()
}

/// Writes `n` batches one after another (random durability, some at boundary sizes, a few
/// `flush`es), crashes, reopens, and checks the recovered keys are a prefix of the written
/// ones that includes every acknowledged `Sync` write.
fn sweep_case(mode: WalMode, crash: Crash, seed: u64, n: u32) -> std::result::Result<(), String> {
    let fs = FaultFs::new(seed);
    let mut rng = SmallRng::seed_from_u64(seed);
    let db = Db::open(mode_opts(&fs, mode, 256 << 10)).map_err(|e| e.to_string())?;
    let mut last_sync: Option<u32> = None;
    for i in 0..n {
        let size = if rng.gen_ratio(1, 4) {
            Some(BOUNDARY_SIZES[rng.gen_range(0..BOUNDARY_SIZES.len())])
        } else {
            None
        };
        let durability = match rng.gen_range(0..6) {
            0 => Durability::Sync,
            1 => Durability::Buffered,
            _ => Durability::Flush,
        };
        db.write(&WriteOptions { durability }, batch_of(i, size))
            .map_err(|e| format!("write {i}: {e}"))?;
        if durability == Durability::Sync {
            last_sync = Some(i);
        }
        if rng.gen_ratio(1, 40) {
            db.flush().map_err(|e| format!("flush: {e}"))?;
        }
    }
    crash_now(&fs, db, crash, "sweep");
    let db = Db::open(mode_opts(&fs, mode, 256 << 10)).map_err(|e| format!("reopen: {e}"))?;
    let m = recovered_prefix(&db, n, last_sync)?;
    // A new write after recovery must win over whatever was recovered.
    for i in 0..n.min(m as u32) {
        if i % 7 == 0 {
            db.put(&WriteOptions::default(), &k(i), b"after").unwrap();
            let got = db.get(&ReadOptions::default(), &k(i)).unwrap();
            if got.as_deref() != Some(&b"after"[..]) {
                return Err(format!("write after recovery to key {i} is shadowed"));
            }
        }
    }
    Ok(())
}

#[test]
fn boundary_batches_crash_sweep_every_mode() {
    let mut failures = common::Failures::default();
    for mode in common::MODES {
        let crashes: Vec<Crash> = common::CRASHES
            .iter()
            .copied()
            .chain([Crash::Power(CrashPolicy::KeepRandomWrites)])
            .collect();
        for crash in crashes {
            for seed in 0..3 {
                failures.check(
                    format!("{mode:?} {crash:?} seed {seed}"),
                    sweep_case(mode, crash, seed, 120),
                );
            }
        }
    }
    failures.assert_none("boundary sweep");
}

/// Concurrent writers (blocking and asynchronous, with parallel memtable inserts in the group
/// WAL), power loss: every acknowledged `Sync` write is recovered; a recovered write implies
/// every write acknowledged before it started is recovered (the prefix property, as far as
/// concurrent requests are ordered at all); a `Sync` write acknowledged implies every write
/// acknowledged before it started is durable; batches are recovered whole.
fn concurrent_case(
    mode: WalMode,
    crash: Crash,
    seed: u64,
    concurrent_inserts: bool,
) -> std::result::Result<(), String> {
    use std::sync::atomic::{AtomicU64, Ordering};
    const WRITERS: u32 = 4;
    const PER: u32 = 150;
    let fs = FaultFs::new(seed);
    let opts = small(mode, 128 << 10)
        .fault_tiers()
        .fs(fs.clone())
        .wal_zone_size(1 << 20)
        .wal_zones(16)
        .wal_concurrent_memtable_writes(concurrent_inserts)
        .wal_concurrent_memtable_min_ops(2)
        .build()
        .unwrap();
    let db = Db::open(opts.clone()).map_err(|e| e.to_string())?;
    // (key, started, acked, sync) of every acknowledged write.
    let clock = AtomicU64::new(0);
    let acks: std::sync::Mutex<Vec<(u32, u64, u64, bool)>> = Default::default();
    std::thread::scope(|s| {
        for w in 0..WRITERS {
            let (db, clock, acks) = (&db, &clock, &acks);
            s.spawn(move || {
                let ack = |key: u32, started: u64, sync: bool| {
                    let t = clock.fetch_add(1, Ordering::SeqCst) + 1;
                    acks.lock().unwrap().push((key, started, t, sync));
                };
                let mut rng = SmallRng::seed_from_u64(seed * 100 + w as u64);
                let mut pending = Vec::new();
                for i in 0..PER {
                    let key = w * 10_000 + i;
                    let sync = rng.gen_ratio(1, 5);
                    let durability = if sync {
                        Durability::Sync
                    } else if rng.gen_ratio(1, 4) {
                        Durability::Buffered
                    } else {
                        Durability::Flush
                    };
                    let ops: u32 = rng.gen_range(1..4);
                    let mut b = WriteBatch::new();
                    for o in 0..ops {
                        b.put(format!("w{key}-{o}"), vec![7u8; rng.gen_range(1..600)]);
                    }
                    b.put(k(key), b"v");
                    let started = clock.load(Ordering::SeqCst);
                    let wo = WriteOptions { durability };
                    if rng.gen_ratio(1, 3) {
                        match db.submit_write(&wo, b) {
                            Ok(h) => pending.push((key, h, sync, started)),
                            Err(_) => break,
                        }
                        if pending.len() > 4 {
                            let (key, h, sync, started) = pending.remove(0);
                            if h.wait().is_err() {
                                break;
                            }
                            ack(key, started, sync);
                        }
                    } else {
                        if db.write(&wo, b).is_err() {
                            break;
                        }
                        ack(key, started, sync);
                    }
                }
                for (key, h, sync, started) in pending {
                    if h.wait().is_ok() {
                        ack(key, started, sync);
                    }
                }
            });
        }
    });
    crash_now(&fs, db, crash, "concurrent");
    let db = Db::open(opts).map_err(|e| format!("reopen: {e}"))?;
    let acks = acks.into_inner().unwrap();
    let present = |key: u32| db.get(&ReadOptions::default(), &k(key)).unwrap().is_some();
    // Recovered writes and the latest start of an acknowledged Sync write.
    let mut must_through = 0u64;
    for &(key, started, _, sync) in &acks {
        if sync {
            if !present(key) {
                return Err(format!("acknowledged Sync write {key} lost"));
            }
            must_through = must_through.max(started);
        }
    }
    for w in 0..WRITERS {
        for i in 0..PER {
            let key = w * 10_000 + i;
            if present(key) {
                let companion = db
                    .get(&ReadOptions::default(), format!("w{key}-0").as_bytes())
                    .unwrap();
                if companion.is_none() {
                    return Err(format!("batch {key} recovered in part"));
                }
                if let Some(&(_, started, _, _)) = acks.iter().find(|a| a.0 == key) {
                    must_through = must_through.max(started);
                }
            }
        }
    }
    for &(key, _, acked, _) in &acks {
        if acked <= must_through && !present(key) {
            return Err(format!(
                "write {key} (acknowledged at {acked}) lost although a write started at \
                 {must_through} or later was recovered or acknowledged as synced"
            ));
        }
    }
    Ok(())
}

#[test]
fn concurrent_writers_crash_sweep_every_mode() {
    let mut failures = common::Failures::default();
    for mode in common::MODES {
        for (n, crash) in common::CRASHES.iter().copied().enumerate() {
            let crash = if mode == WalMode::Zoned && n == 2 {
                Crash::Power(CrashPolicy::KeepRandomWrites)
            } else {
                crash
            };
            for seed in 0..common::env_u64("WAL_FAULTS_SEEDS", 2) {
                let inserts = seed % 2 == 1;
                failures.check(
                    format!("{mode:?} {crash:?} seed {seed} inserts {inserts}"),
                    concurrent_case(mode, crash, seed, inserts),
                );
            }
        }
    }
    failures.assert_none("concurrent sweep");
}

/// An injected EIO or ENOSPC at the `n`-th file-system operation while writing: each write
/// either succeeds or returns the error; after a power loss, every acknowledged `Sync` write
/// (and every write acknowledged before it) is recovered and the recovered writes are a
/// prefix.
fn fault_case(
    mode: WalMode,
    kind: tierkv::env::FaultKind,
    once: bool,
    n: u64,
    seed: u64,
) -> std::result::Result<(), String> {
    let fs = FaultFs::new(seed);
    let opts = mode_opts(&fs, mode, 128 << 10);
    let db = Db::open(opts.clone()).map_err(|e| e.to_string())?;
    let mut rng = SmallRng::seed_from_u64(seed);
    fs.fail_after(n, kind, once);
    let mut last_sync = None;
    let total = 200u32;
    for i in 0..total {
        let durability = if rng.gen_ratio(1, 3) {
            Durability::Sync
        } else {
            Durability::Flush
        };
        let size = rng
            .gen_ratio(1, 5)
            .then(|| BOUNDARY_SIZES[rng.gen_range(0..5)]);
        match db.write(&WriteOptions { durability }, batch_of(i, size)) {
            Ok(()) => {
                if durability == Durability::Sync {
                    last_sync = Some(i);
                }
            }
            Err(_) => break,
        }
    }
    crash_now(&fs, db, Crash::Power(CrashPolicy::DropUnsynced), "fault");
    let db = Db::open(opts).map_err(|e| format!("reopen: {e}"))?;
    recovered_prefix(&db, total, last_sync).map(drop)
}

/// How many of the writes `0..n` (key `k(i)` each) `db` recovered: an error unless they are a
/// prefix that holds the last acknowledged `Sync` write, `last_sync`.
fn recovered_prefix(db: &Db, n: u32, last_sync: Option<u32>) -> Result<usize, String> {
    let present: Vec<bool> = (0..n)
        .map(|i| db.get(&ReadOptions::default(), &k(i)).unwrap().is_some())
        .collect();
    let m = present.iter().take_while(|&&p| p).count();
    if let Some(j) = present[m..].iter().position(|&p| p) {
        return Err(format!("not a prefix: {m} missing but {} present", m + j));
    }
    if let Some(s) = last_sync.filter(|&s| m as u32 <= s) {
        return Err(format!("acknowledged Sync write {s} lost (recovered {m})"));
    }
    Ok(m)
}

#[test]
fn injected_faults_never_lose_acknowledged_sync_writes() {
    use tierkv::env::FaultKind;
    let mut failures = common::Failures::default();
    for mode in common::MODES {
        for kind in [FaultKind::Io, FaultKind::NoSpace] {
            for once in [true, false] {
                for (seed, n) in [3u64, 17, 40, 90, 160, 300].into_iter().enumerate() {
                    failures.check(
                        format!("{mode:?} {kind:?} once {once} after {n}"),
                        fault_case(mode, kind, once, n, seed as u64),
                    );
                }
            }
        }
    }
    failures.assert_none("fault sweep");
}

/// How an empty `Sync` write is issued: blocking, or submitted and waited for.
#[derive(Debug, Clone, Copy)]
enum Issue {
    Write,
    Submit,
}

/// Modes (with how the write was issued) in which an earlier `Flush` write is lost by a power
/// loss after an empty `Sync` write returned.
fn modes_losing_writes_before_an_empty_sync_write() -> Vec<(WalMode, Issue)> {
    let mut lost = Vec::new();
    for mode in common::MODES {
        for issue in [Issue::Write, Issue::Submit] {
            let fs = FaultFs::new(5);
            let db = Db::open(mode_opts(&fs, mode, 1 << 20)).unwrap();
            db.put(&WriteOptions::default(), &k(1), b"flushed").unwrap();
            match issue {
                Issue::Write => db.write(&WriteOptions::sync(), WriteBatch::new()).unwrap(),
                Issue::Submit => db
                    .submit_write(&WriteOptions::sync(), WriteBatch::new())
                    .unwrap()
                    .wait()
                    .unwrap(),
            }
            crash_now(&fs, db, Crash::Power(CrashPolicy::DropUnsynced), "empty");
            let db = Db::open(mode_opts(&fs, mode, 1 << 20)).unwrap();
            if db.get(&ReadOptions::default(), &k(1)).unwrap().is_none() {
                lost.push((mode, issue));
            }
        }
    }
    lost
}

#[test]
fn an_empty_sync_batch_makes_earlier_writes_durable_in_every_mode() {
    let lost = modes_losing_writes_before_an_empty_sync_write();
    assert!(
        lost.is_empty(),
        "an acknowledged Sync write of an empty batch did not make the earlier Flush write \
         durable in {lost:?}"
    );
}
