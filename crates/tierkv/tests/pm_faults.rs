//! The `pm` tier (memory-mapped files on tmpfs or DAX, `docs/pm-tier.md`) and the parallel
//! WAL that can live on it (`docs/parallel-wal.md`), under crashes, damage and many writers:
//! - a closed mapped file holds no storage past its bytes (a tier of small tables costs about
//!   its bytes, not a preallocation step per file);
//! - a killed process loses no acknowledged write of the parallel WAL on a pm tier, with many
//!   writers switching page groups;
//! - many concurrent writers (synced, flushed, empty synced) on tiny page groups finish;
//! - area bytes damaged past their checksums are `Corruption` naming the area, never a panic;
//! - rounds of writes, flushes and reopens keep the area at its size.
//!
//! Where `/dev/shm` is missing the tests that need it return early.

mod common;

use common::{crash_now, key6, scan, tiny, Crash, PmDirs, TierSetup, FAST};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;
use tierkv::env::{FaultFs, Fs, MappedFs};
use tierkv::inspect::AreaMeta;
use tierkv::{Db, Error, Options, TierConfig, TierKind, WalMode, WriteBatch, WriteOptions};

const PAGE: usize = 4096;

/// Tiny LSM options on a pm fast tier at `fast` and a disk tier at `capacity`.
fn pm_options(fast: &Path, capacity: &Path, mode: WalMode) -> Options {
    tiny()
        .tier(TierConfig::new("fast", fast).with_kind(TierKind::Pm))
        .tier(TierConfig::new("capacity", capacity))
        .wal(mode)
        .wal_group_bytes(64 << 10)
        .wal_loggers(3)
        .build()
        .expect("valid options")
}

fn value(i: usize) -> Vec<u8> {
    format!("value-{i:06}-").repeat(12).into_bytes()
}

/// Bytes allocated to the files under `dir` (recursively) past their lengths rounded up to
/// whole pages, and those rounded lengths.
fn allocation_past_lengths(dir: &Path) -> (u64, u64) {
    let mut excess = 0;
    let mut lengths = 0;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let meta = e.metadata().unwrap();
            if meta.is_dir() {
                pending.push(e.path());
                continue;
            }
            let rounded = meta.len().next_multiple_of(PAGE as u64);
            lengths += rounded;
            excess += (meta.blocks() * 512).saturating_sub(rounded);
        }
    }
    (excess, lengths)
}

/// Storage allocated ahead of an appended file's bytes (so that a store into the mapping on a
/// full mount is `ENOSPC`, not `SIGBUS`) is given back when the file is closed: a closed file
/// costs its bytes.
#[test]
fn a_closed_mapped_file_keeps_no_storage_past_its_bytes() {
    if !Path::new("/dev/shm").is_dir() {
        return;
    }
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let fs = MappedFs::new();
    let path = dir.path().join("000005.sst");
    let mut f = fs.create(&path).unwrap();
    f.append(&[7u8; 10_000]).unwrap();
    f.sync().unwrap();
    f.close().unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.len(), 10_000);
    assert!(
        meta.blocks() * 512 <= 3 * PAGE as u64,
        "a closed 10 000-byte file holds {} bytes of tmpfs",
        meta.blocks() * 512
    );
    // Reading it back is unchanged.
    assert_eq!(std::fs::read(&path).unwrap(), vec![7u8; 10_000]);
}

/// A pm tier holding many small tables uses about their bytes: each closed table must not
/// keep a 1 MiB allocation step of tmpfs (or persistent memory) behind its end.
#[test]
fn a_pm_tier_of_small_tables_costs_about_their_bytes() {
    let Some(dirs) = PmDirs::new() else { return };
    let db = Db::open(pm_options(&dirs.fast(), &dirs.capacity(), WalMode::Group)).unwrap();
    let w = WriteOptions::default();
    for i in 0..6000 {
        db.put(&w, &key6(i), &value(i)).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let (excess, lengths) = allocation_past_lengths(&dirs.fast());
    assert!(
        excess < 1 << 20,
        "files of {lengths} bytes on the pm tier hold {excess} more bytes of storage"
    );
}

const CHILD: &str = "TIERKV_PM_FAULTS_CHILD";
const THREADS: usize = 4;
const PER_THREAD: usize = 400;

/// The key thread `t` writes as its `i`th.
fn thread_key(t: usize, i: usize) -> Vec<u8> {
    format!("t{t}-{i:05}").into_bytes()
}

/// The child's part: several threads put with `Flush` durability (every tenth synced), then
/// the process dies without a close (`abort`, as `kill -9`): every put returned.
fn write_then_abort(spec: &str) -> ! {
    let (fast, capacity) = spec.split_once('|').unwrap();
    let db = Arc::new(
        Db::open(pm_options(
            Path::new(fast),
            Path::new(capacity),
            WalMode::Parallel,
        ))
        .unwrap(),
    );
    let writers: Vec<_> = (0..THREADS)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..PER_THREAD {
                    let w = if i % 10 == 9 {
                        WriteOptions::sync()
                    } else {
                        WriteOptions::default()
                    };
                    db.put(&w, &thread_key(t, i), &value(i)).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    std::process::abort();
}

/// A process killed after its writers returned loses none of their writes from a parallel WAL
/// on a pm tier (the area is a mapped positional file; `Flush` writes are copies into it).
#[test]
fn a_killed_process_loses_no_acknowledged_write_from_a_pm_area() {
    if let Ok(spec) = std::env::var(CHILD) {
        write_then_abort(&spec);
    }
    let Some(dirs) = PmDirs::new() else { return };
    let spec = format!("{}|{}", dirs.fast().display(), dirs.capacity().display());
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_process_loses_no_acknowledged_write_from_a_pm_area",
            "--test-threads=1",
        ])
        .env(CHILD, &spec)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(!status.success(), "the child dies");
    assert!(dirs.fast().join("WAL-AREA").exists());
    let db = Db::open(pm_options(
        &dirs.fast(),
        &dirs.capacity(),
        WalMode::Parallel,
    ))
    .unwrap();
    let state = scan(&db).unwrap();
    for t in 0..THREADS {
        for i in 0..PER_THREAD {
            assert_eq!(
                state.get(&thread_key(t, i)),
                Some(&value(i)),
                "thread {t}, write {i}"
            );
        }
    }
    assert_eq!(state.len(), THREADS * PER_THREAD);
}

const MIDWAY_CHILD: &str = "TIERKV_PM_FAULTS_MIDWAY";

/// The child's part of a kill in the middle of the writing: threads put keys of `round`
/// (`Flush` durability, every seventh synced, every fifth a two-key batch) and print each key
/// once its put returned; the process dies (`abort`) once `acks` puts returned, the others
/// still writing.
fn write_until_killed(spec: &str) -> ! {
    use std::io::Write;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let parts: Vec<&str> = spec.split('|').collect();
    let (round, acks): (usize, usize) = (parts[2].parse().unwrap(), parts[3].parse().unwrap());
    let opts = pm_options(
        Path::new(parts[0]),
        Path::new(parts[1]),
        mode_named(parts[4]),
    );
    let db = Arc::new(Db::open(opts).unwrap());
    let acked = Arc::new(AtomicUsize::new(0));
    for t in 0..THREADS {
        let (db, acked) = (Arc::clone(&db), Arc::clone(&acked));
        std::thread::spawn(move || {
            for i in 0.. {
                let key = midway_key(round, t, i);
                let w = if i % 7 == 6 {
                    WriteOptions::sync()
                } else {
                    WriteOptions::default()
                };
                let mut b = WriteBatch::new();
                b.put(&key, value(i));
                if i % 5 == 4 {
                    b.put([key.as_slice(), b"+"].concat(), value(i));
                }
                db.write(&w, b).unwrap();
                writeln!(std::io::stdout().lock(), "ACK {t} {i}").unwrap();
                acked.fetch_add(1, Ordering::SeqCst);
            }
        });
    }
    while acked.load(Ordering::SeqCst) < acks {
        std::thread::yield_now();
    }
    std::process::abort();
}

fn mode_named(name: &str) -> WalMode {
    match name {
        "parallel" => WalMode::Parallel,
        "append" => WalMode::Append,
        _ => WalMode::Group,
    }
}

fn midway_key(round: usize, t: usize, i: usize) -> Vec<u8> {
    format!("r{round}-t{t}-{i:06}").into_bytes()
}

/// Processes killed in the middle of their writers' puts, over and over on the same pm tier
/// (each WAL mode: the parallel WAL's mapped area, the group WAL's length run ahead):
/// every put that returned is there after each recovery, with its batch whole, and each
/// writer's puts that are there are a prefix of what it wrote (recovery ends the history at
/// the first missing write, never later).
#[test]
fn processes_killed_midway_lose_no_acknowledged_write_from_a_pm_area() {
    if let Ok(spec) = std::env::var(MIDWAY_CHILD) {
        write_until_killed(&spec);
    }
    for mode in ["parallel", "group", "append"] {
        let Some(dirs) = PmDirs::new() else { return };
        for (round, acks) in [300, 1000, 50, 2000].into_iter().enumerate() {
            kill_midway_and_check(&dirs, mode, round, acks);
        }
    }
}

/// One round of [`processes_killed_midway_lose_no_acknowledged_write_from_a_pm_area`].
fn kill_midway_and_check(dirs: &PmDirs, mode: &str, round: usize, acks: usize) {
    {
        let spec = format!(
            "{}|{}|{round}|{acks}|{mode}",
            dirs.fast().display(),
            dirs.capacity().display()
        );
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "processes_killed_midway_lose_no_acknowledged_write_from_a_pm_area",
                "--test-threads=1",
                "--nocapture",
            ])
            .env(MIDWAY_CHILD, &spec)
            .output()
            .unwrap();
        assert!(
            !out.status.success(),
            "{mode} round {round}: the child dies"
        );
        let mut acked = [0usize; THREADS];
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // NB: the harness's own output may share the line.
            let Some(at) = line.find("ACK ") else {
                continue;
            };
            let mut parts = line[at + 4..].split(' ');
            let (Some(t), Some(i)) = (parts.next(), parts.next()) else {
                continue;
            };
            let (Ok(t), Ok(i)) = (t.parse::<usize>(), i.parse::<usize>()) else {
                continue;
            };
            acked[t] = acked[t].max(i + 1);
        }
        assert!(
            acked.iter().sum::<usize>() > 0,
            "{mode} round {round}: no put returned: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let opts = pm_options(&dirs.fast(), &dirs.capacity(), mode_named(mode));
        let db = Db::open(opts).unwrap();
        let state = scan(&db).unwrap();
        let what = format!("{mode} round {round}");
        for (t, &n) in acked.iter().enumerate() {
            let present = (0..)
                .take_while(|&i| state.contains_key(&midway_key(round, t, i)))
                .count();
            assert!(
                present >= n,
                "{what}, thread {t}: {present} of {n} acknowledged"
            );
            for i in 0..present {
                let key = midway_key(round, t, i);
                assert_eq!(state.get(&key), Some(&value(i)), "{what}: {t}/{i}");
                let second = state.get(&[key.as_slice(), b"+"].concat()).cloned();
                assert_eq!(second, (i % 5 == 4).then(|| value(i)), "{what}: {t}/{i}+");
            }
            let beyond = state
                .keys()
                .filter(|k| k.starts_with(format!("r{round}-t{t}-").as_bytes()))
                .filter(|k| !k.ends_with(b"+"))
                .count();
            assert_eq!(beyond, present, "{what}, thread {t}: a write after a gap");
        }
    }
}

/// Runs `f` on another thread; fails the test if it does not finish within `limit` (a hang).
fn finishes_within<T: Send + 'static>(
    limit: Duration,
    what: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(v) => {
            worker.join().unwrap();
            v
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => panic!("{what}: {:?}", worker.join().err()),
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{what}: no progress in {limit:?}"),
    }
}

/// Many writers at once on 64 KiB page groups (a group switch every few dozen writes, groups
/// waiting for flushes): synced, flushed, batched, transactional, submitted and empty synced
/// writes all return, and every write reads back after a reopen.
#[test]
fn many_writers_on_tiny_pm_groups_all_finish() {
    let Some(dirs) = PmDirs::new() else { return };
    let (fast, capacity) = (dirs.fast(), dirs.capacity());
    let opts = pm_options(&fast, &capacity, WalMode::Parallel);
    let db = Arc::new(Db::open(opts).unwrap());
    const WRITERS: usize = 16;
    const EACH: usize = 150;
    let writers_db = Arc::clone(&db);
    finishes_within(Duration::from_secs(120), "16 writers", move || {
        let writers: Vec<_> = (0..WRITERS)
            .map(|t| {
                let db = Arc::clone(&writers_db);
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        match (t + i) % 6 {
                            0 => db.put(&WriteOptions::sync(), &thread_key(t, i), &value(i)),
                            1 => {
                                let mut b = WriteBatch::new();
                                b.put(thread_key(t, i), value(i));
                                b.put(format!("x{t}-{i:05}"), b"extra");
                                db.write(&WriteOptions::default(), b)
                            }
                            2 => db
                                .put(&WriteOptions::default(), &thread_key(t, i), &value(i))
                                .and_then(|()| db.write(&WriteOptions::sync(), WriteBatch::new())),
                            3 => {
                                let mut txn = db.transaction();
                                txn.get(&thread_key(t, i)).unwrap();
                                txn.put(&thread_key(t, i), &value(i)).unwrap();
                                txn.commit(&WriteOptions::sync())
                            }
                            4 => db
                                .submit_put(&WriteOptions::default(), &thread_key(t, i), &value(i))
                                .and_then(|h| h.wait()),
                            _ => db.put(&WriteOptions::default(), &thread_key(t, i), &value(i)),
                        }
                        .unwrap();
                    }
                })
            })
            .collect();
        for w in writers {
            w.join().unwrap();
        }
    });
    drop(Arc::into_inner(db).expect("writers are done"));
    let db = Db::open(pm_options(&fast, &capacity, WalMode::Parallel)).unwrap();
    let state = scan(&db).unwrap();
    for t in 0..WRITERS {
        for i in 0..EACH {
            assert_eq!(state.get(&thread_key(t, i)), Some(&value(i)), "{t}/{i}");
        }
    }
}

/// Rounds of writes, flushes and reopens (clean and after a process crash) reuse the area's
/// groups: the area keeps its size and never grows.
#[test]
fn rounds_of_writes_and_reopens_keep_the_area_at_its_size() {
    let fs = FaultFs::new(11);
    let opts = || {
        tiny()
            .fault_tiers()
            .wal(WalMode::Parallel)
            .wal_group_bytes(64 << 10)
            .fs(fs.clone())
            .build()
            .unwrap()
    };
    let area = PathBuf::from(FAST).join("WAL-AREA");
    let mut size = None;
    let mut written = 0;
    for round in 0..8 {
        let db = Db::open(opts()).unwrap();
        for i in written..written + 400 {
            db.put(&WriteOptions::default(), &key6(i), &value(i))
                .unwrap();
        }
        written += 400;
        if round % 2 == 0 {
            db.flush().unwrap();
        }
        if round % 3 == 2 {
            crash_now(&fs, db, Crash::Process, "round");
        } else {
            drop(db);
        }
        let now = fs.file_size(&area).unwrap();
        assert_eq!(
            *size.get_or_insert(now),
            now,
            "round {round}: the area grew"
        );
    }
    let db = Db::open(opts()).unwrap();
    let state = scan(&db).unwrap();
    assert_eq!(state.len(), written);
    for i in 0..written {
        assert_eq!(state.get(&key6(i)), Some(&value(i)), "{i}");
    }
}

/// The valid metadata page with the highest generation.
fn area_meta(area: &[u8]) -> AreaMeta {
    [0, 1]
        .iter()
        .filter_map(|&p| AreaMeta::decode(&area[p * PAGE..(p + 1) * PAGE]))
        .max_by_key(|m| m.generation)
        .expect("a valid metadata page")
}

/// The open group's colour and the file offset of its first page not carrying that colour
/// (where writing ended).
fn end_of_writing(area: &[u8]) -> (u64, usize) {
    let meta = area_meta(area);
    let (slot, s) = meta
        .slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.end_page == u32::MAX && s.colour != 0)
        .max_by_key(|(_, s)| s.colour)
        .expect("an open group");
    let first = (2 + slot * meta.layout.group_pages as usize) * PAGE;
    let end = (0..meta.layout.group_pages as usize)
        .map(|p| first + p * PAGE)
        .find(|&at| area[at..at + 8] != s.colour.to_le_bytes())
        .expect("room left in the group");
    (s.colour, end)
}

/// A run's page as the area format describes it, checksummed: `payload` (whole entries) in
/// one page coloured `colour`, starting a run.
fn crafted_page(colour: u64, payload: &[u8], durable_seq: u64) -> Vec<u8> {
    let mut page = vec![0u8; PAGE];
    page[0..8].copy_from_slice(&colour.to_le_bytes());
    page[12..14].copy_from_slice(&(payload.len() as u16).to_le_bytes());
    page[14..16].copy_from_slice(&1u16.to_le_bytes());
    page[16..24].copy_from_slice(&durable_seq.to_le_bytes());
    page[24..24 + payload.len()].copy_from_slice(payload);
    let head = crc32c::crc32c(&page[0..8]);
    let sum = crc32c::crc32c_append(head, &page[12..]);
    page[8..12].copy_from_slice(&sum.to_le_bytes());
    page
}

/// An entry (length, CRC32C, payload) holding `payload`.
fn entry(payload: &[u8]) -> Vec<u8> {
    let mut e = (payload.len() as u32).to_le_bytes().to_vec();
    e.extend_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    e.extend_from_slice(payload);
    e
}

/// A parallel-WAL database on `fs` after 30 unsynced puts and a process crash; returns the
/// area's bytes.
fn crashed_area(fs: &Arc<FaultFs>) -> Vec<u8> {
    let db = Db::open(parallel_on(fs)).unwrap();
    for i in 0..30 {
        db.put(&WriteOptions::default(), &key6(i), &value(i))
            .unwrap();
    }
    crash_now(fs, db, Crash::Process, "area");
    fs.file_contents(&PathBuf::from(FAST).join("WAL-AREA"))
        .expect("an area")
}

fn parallel_on(fs: &Arc<FaultFs>) -> Options {
    tiny()
        .fault_tiers()
        .wal(WalMode::Parallel)
        .fs(fs.clone())
        .build()
        .unwrap()
}

/// Pages whose checksums hold but whose entries are not write batches, followed by later runs,
/// are damage, not a crash: recovery fails with `Corruption` naming the area and the run's
/// offset, and never panics. (The same page at the very end of the writing reads as a torn
/// run, as the format has no run length: nothing after it was written.)
#[test]
fn checksummed_garbage_in_the_area_is_corruption_naming_it() {
    let mut not_batches: Vec<Vec<u8>> = vec![
        vec![0xAB; 40],
        // A batch header (sequence, count) promising more operations than it holds.
        [31u64.to_le_bytes().as_slice(), &u32::MAX.to_le_bytes()].concat(),
        [
            31u64.to_le_bytes().as_slice(),
            &3u32.to_le_bytes(),
            &[1, 200, 1],
        ]
        .concat(),
    ];
    // An entry whose length runs past its page.
    let mut long = entry(&[1; 16]);
    long[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
    not_batches.push(long);
    for (case, garbage) in not_batches.iter().enumerate() {
        let fs = FaultFs::new(20 + case as u64);
        let area = crashed_area(&fs);
        let (colour, end) = end_of_writing(&area);
        // A page in the middle of the history: a whole run, followed by more runs.
        let at = end - 20 * PAGE;
        let payload = if case == 3 {
            garbage.clone()
        } else {
            entry(garbage)
        };
        let path = PathBuf::from(FAST).join("WAL-AREA");
        let mut bytes = area.clone();
        bytes[at..at + PAGE].copy_from_slice(&crafted_page(colour, &payload, 0));
        fs.write_raw(&path, &bytes);
        match Db::open(parallel_on(&fs)) {
            Err(e @ Error::Corruption { .. }) => {
                let msg = e.to_string();
                assert!(msg.contains("WAL-AREA"), "case {case}: {msg}");
                assert!(msg.contains(&at.to_string()), "case {case}: {msg}");
            }
            Err(e) => panic!("case {case}: expected corruption, got {e}"),
            Ok(_) => panic!("case {case}: a damaged run was accepted"),
        }
    }
}

/// A metadata page that is valid but names a colour no memtable number can follow (the
/// largest file number) is refused as damage, not a panic when the next number is taken.
#[test]
fn a_metadata_colour_at_the_end_of_the_number_space_is_not_a_panic() {
    let fs = FaultFs::new(40);
    let area = crashed_area(&fs);
    let mut meta = area_meta(&area);
    meta.generation += 1;
    let free = meta
        .slots
        .iter()
        .position(|s| s.colour == 0)
        .expect("a slot never used");
    meta.slots[free].colour = u64::MAX;
    meta.slots[free].end_page = 0;
    let page = meta_page(&meta);
    let at = (meta.generation % 2) as usize * PAGE;
    let mut bytes = area.clone();
    bytes[at..at + PAGE].copy_from_slice(&page);
    let path = PathBuf::from(FAST).join("WAL-AREA");
    fs.write_raw(&path, &bytes);
    let opened = finishes_within(Duration::from_secs(60), "open", {
        let fs = fs.clone();
        move || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                Db::open(parallel_on(&fs)).map(|db| {
                    let w = db.put(&WriteOptions::default(), b"after", b"x");
                    let f = db.flush();
                    (w, f)
                })
            }))
            .map_err(|_| "panicked".to_string())
        }
    });
    match opened {
        Err(p) => panic!("open or write after open {p}"),
        Ok(Err(e)) => {
            assert!(matches!(e, Error::Corruption { .. }), "{e}");
            assert!(e.to_string().contains("WAL-AREA"), "{e}");
        }
        Ok(Ok(_)) => {}
    }
}

/// Encodes `meta` as the format describes (the test's own encoder, checked against the
/// engine's decoder).
fn meta_page(meta: &AreaMeta) -> Vec<u8> {
    let mut b = vec![0u8; PAGE];
    b[0..8].copy_from_slice(b"tierkvWA");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[16..24].copy_from_slice(&meta.generation.to_le_bytes());
    b[24..28].copy_from_slice(&(PAGE as u32).to_le_bytes());
    b[28..32].copy_from_slice(&(meta.layout.groups as u32).to_le_bytes());
    b[32..40].copy_from_slice(&meta.layout.group_pages.to_le_bytes());
    for (i, s) in meta.slots.iter().enumerate() {
        let at = 40 + i * 24;
        b[at..at + 8].copy_from_slice(&s.colour.to_le_bytes());
        b[at + 8..at + 16].copy_from_slice(&s.first_seq.to_le_bytes());
        b[at + 16..at + 20].copy_from_slice(&s.end_page.to_le_bytes());
    }
    let sum = crc32c::crc32c(&b[16..]);
    b[12..16].copy_from_slice(&sum.to_le_bytes());
    assert_eq!(AreaMeta::decode(&b).as_ref(), Some(meta));
    b
}
