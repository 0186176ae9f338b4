use super::zones::ZoneUse;
use super::*;
use crate::env::{read_file, FaultFs};
use std::collections::BTreeMap;

mod background;
mod collect_race;
mod crash;
mod image;
mod io_paths;

const LBA: u64 = 4096;

pub(super) fn geometry(zone_lbas: u64, zones: u32) -> Geometry {
    let mut g = Geometry::new(zone_lbas * LBA, zones);
    g.max_open = 3;
    g.max_active = 4;
    g
}

pub(super) fn dir() -> PathBuf {
    PathBuf::from("/db/capacity")
}

pub(super) fn open(fs: &Arc<FaultFs>, g: Geometry) -> ZoneFs {
    let config = ZoneFsConfig::manual();
    ZoneFs::open(fs.clone(), &dir(), g, config).unwrap()
}

/// Bytes that differ at every position, so a misplaced read shows.
pub(super) fn pattern(seed: u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| ((i as u64).wrapping_mul(31).wrapping_add(seed * 7919) % 251) as u8 + 1)
        .collect()
}

pub(super) fn write(zfs: &ZoneFs, name: &str, data: &[u8], hint: Lifetime) -> Result<()> {
    let mut f = zfs.create_with_lifetime(&dir().join(name), hint)?;
    for piece in data.chunks(5000) {
        f.append(piece)?;
    }
    f.sync()?;
    f.close()
}

fn read(zfs: &ZoneFs, name: &str) -> Vec<u8> {
    read_file(zfs, &dir().join(name)).unwrap()
}

fn zones_of(zfs: &ZoneFs, name: &str) -> Vec<ZoneId> {
    let (_, files) = zfs.zone_map();
    let mut z: Vec<ZoneId> = files[name].iter().map(|e| e.zone).collect();
    z.dedup();
    z
}

/// Every data zone is free, active, or holds exactly the live bytes of the files' extents.
pub(super) fn assert_no_leaks(zfs: &ZoneFs) {
    let (slots, files) = zfs.zone_map();
    let mut owned: BTreeMap<ZoneId, u64> = BTreeMap::new();
    for e in files.values().flatten() {
        *owned.entry(e.zone).or_default() += e.occupied(LBA);
    }
    for (id, s) in slots.iter().enumerate() {
        let id = id as ZoneId;
        let live = owned.get(&id).copied().unwrap_or(0);
        assert_eq!(s.live, live, "zone {id} ({:?}) live bytes", s.state);
        match s.state {
            ZoneUse::Meta => assert!(META_ZONES.contains(&id)),
            ZoneUse::Free => assert_eq!(live, 0, "free zone {id} is owned"),
            ZoneUse::Held(_) | ZoneUse::Partial(_) => {}
            ZoneUse::Full => assert!(live > 0, "full zone {id} is owned by no file: leaked"),
        }
    }
}

#[test]
fn files_span_zones_and_read_back_after_reopen() {
    let fs = FaultFs::new(1);
    let g = geometry(4, 10);
    let zfs = open(&fs, g);
    let big = pattern(1, 50_000);
    let small = pattern(2, 100);
    write(&zfs, "000001.sst", &big, Lifetime::Long).unwrap();
    write(&zfs, "000002.sst", &small, Lifetime::Long).unwrap();
    assert!(
        zones_of(&zfs, "000001.sst").len() >= 4,
        "50 KB in 16 KiB zones"
    );
    assert_eq!(read(&zfs, "000001.sst"), big);
    let mut mid = vec![0u8; 20_000];
    zfs.open_read(&dir().join("000001.sst"))
        .unwrap()
        .read_exact_at(12_345, &mut mid)
        .unwrap();
    assert_eq!(mid, big[12_345..32_345]);
    let before = zfs.zone_map().1;
    drop(zfs);
    let zfs = open(&fs, g);
    assert_eq!(
        zfs.zone_map().1,
        before,
        "extents read back exactly as synced"
    );
    assert_eq!(read(&zfs, "000001.sst"), big);
    assert_eq!(read(&zfs, "000002.sst"), small);
    let mut names = zfs.list_dir(&dir()).unwrap();
    names.sort();
    assert_eq!(names, ["000001.sst", "000002.sst"]);
    assert!(fs.exists(&dir().join(DEVICE_FILE)));
    assert_no_leaks(&zfs);
}

#[test]
fn appends_after_a_sync_start_a_new_extent_and_unsynced_bytes_are_lost() {
    let fs = FaultFs::new(2);
    let g = geometry(8, 6);
    let zfs = open(&fs, g);
    let path = dir().join("a");
    let mut f = zfs.create(&path).unwrap();
    f.append(&pattern(3, 1000)).unwrap();
    f.sync().unwrap();
    f.append(&pattern(4, 9000)).unwrap();
    f.sync().unwrap();
    f.append(&pattern(5, 5000)).unwrap();
    assert_eq!(f.size(), 15_000);
    let mut expect = pattern(3, 1000);
    expect.extend(pattern(4, 9000));
    assert_eq!(read(&zfs, "a")[..10_000], expect[..]);
    fs.process_crash();
    drop(f);
    drop(zfs);
    let zfs = open(&fs, g);
    assert_eq!(zfs.file_size(&path).unwrap(), 10_000);
    assert_eq!(read(&zfs, "a"), expect);
    assert_no_leaks(&zfs);
}

#[test]
fn rename_and_remove_are_durable_and_dead_zones_are_reset() {
    let fs = FaultFs::new(3);
    let g = geometry(4, 8);
    let zfs = open(&fs, g);
    write(&zfs, "x.tmp", b"identity", Lifetime::NotSet).unwrap();
    zfs.rename(&dir().join("x.tmp"), &dir().join("TIER"))
        .unwrap();
    write(&zfs, "big", &pattern(6, 40_000), Lifetime::Extreme).unwrap();
    let zones = zones_of(&zfs, "big");
    let resets = zfs.stats().resets;
    zfs.remove_file(&dir().join("big")).unwrap();
    assert!(zfs.stats().resets >= resets + zones.len() as u64 - 1);
    let (slots, _) = zfs.zone_map();
    // The zone the file ended in may be partial and still shared; every full one is free.
    let freed = zones
        .iter()
        .filter(|&&z| slots[z as usize].state == ZoneUse::Free)
        .count();
    assert!(freed >= zones.len() - 1, "{zones:?} {slots:?}");
    assert!(!zfs.exists(&dir().join("big")));
    assert!(zfs.remove_file(&dir().join("big")).is_err());
    fs.crash(CrashPolicy::DropUnsynced);
    let zfs = open(&fs, g);
    assert_eq!(zfs.list_dir(&dir()).unwrap(), ["TIER"]);
    assert_eq!(read(&zfs, "TIER"), b"identity");
    assert_no_leaks(&zfs);
}

use crate::env::CrashPolicy;

#[test]
fn lifetime_hints_group_files_by_zone() {
    let fs = FaultFs::new(4);
    let zfs = open(&fs, geometry(8, 10));
    for i in 0..3 {
        write(&zfs, &format!("m{i}"), &pattern(i, 6000), Lifetime::Medium).unwrap();
        write(&zfs, &format!("e{i}"), &pattern(i, 6000), Lifetime::Extreme).unwrap();
    }
    let medium: Vec<ZoneId> = (0..3)
        .flat_map(|i| zones_of(&zfs, &format!("m{i}")))
        .collect();
    let extreme: Vec<ZoneId> = (0..3)
        .flat_map(|i| zones_of(&zfs, &format!("e{i}")))
        .collect();
    assert!(
        medium.iter().all(|z| !extreme.contains(z)),
        "{medium:?} {extreme:?}"
    );
    // Two 8 KiB files share one 32 KiB zone.
    assert_eq!(zones_of(&zfs, "m0"), zones_of(&zfs, "m1"));
}

#[test]
fn more_writers_than_open_zones_wait_and_all_succeed() {
    let fs = FaultFs::new(5);
    let zfs = Arc::new(open(&fs, geometry(4, 24)));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let zfs = Arc::clone(&zfs);
            std::thread::spawn(move || {
                let hint = [Lifetime::Short, Lifetime::Medium, Lifetime::Long][t as usize % 3];
                let name = format!("t{t}");
                let mut f = zfs.create_with_lifetime(&dir().join(&name), hint).unwrap();
                for piece in pattern(t, 30_000).chunks(3000) {
                    f.append(piece).unwrap();
                    assert!(zfs.inner.zones.lock().held() <= 2, "open limit passed");
                    assert!(zfs.inner.zones.lock().active() <= 3, "active limit passed");
                }
                f.sync().unwrap();
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..8 {
        assert_eq!(read(&zfs, &format!("t{t}")), pattern(t, 30_000));
    }
    assert_no_leaks(&zfs);
}

#[test]
fn gc_moves_live_extents_while_a_reader_reads() {
    let fs = FaultFs::new(6);
    let g = geometry(4, 10);
    let zfs = Arc::new(open(&fs, g));
    // Live and dead files interleaved in the same zones.
    for i in 0..6 {
        write(&zfs, &format!("live{i}"), &pattern(i, 6000), Lifetime::Long).unwrap();
        write(&zfs, &format!("dead{i}"), &pattern(i, 6000), Lifetime::Long).unwrap();
    }
    for i in 0..6 {
        zfs.remove_file(&dir().join(format!("dead{i}"))).unwrap();
    }
    let before = zfs.stats();
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (zfs, stop) = (Arc::clone(&zfs), Arc::clone(&stop));
        std::thread::spawn(move || {
            let file = zfs.open_read(&dir().join("live0")).unwrap();
            let mut reads = 0;
            while !stop.load(Ordering::Relaxed) || reads == 0 {
                let mut buf = vec![0u8; 6000];
                file.read_exact_at(0, &mut buf).unwrap();
                assert_eq!(buf, pattern(0, 6000));
                reads += 1;
            }
        })
    };
    let emptied = zfs.collect_garbage().unwrap();
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap();
    let after = zfs.stats();
    assert!(emptied > 0);
    assert_eq!(
        after.gc_zones_reclaimed,
        before.gc_zones_reclaimed + emptied as u64
    );
    assert!(after.gc_bytes > 0 && after.resets > before.resets);
    assert!(after.write_amplification() > 1.0);
    for i in 0..6 {
        assert_eq!(read(&zfs, &format!("live{i}")), pattern(i, 6000));
    }
    assert_no_leaks(&zfs);
    drop(zfs);
    let zfs = open(&fs, g);
    for i in 0..6 {
        assert_eq!(read(&zfs, &format!("live{i}")), pattern(i, 6000));
    }
    assert_no_leaks(&zfs);
}

#[test]
fn a_full_device_says_storage_full_and_loses_nothing() {
    let fs = FaultFs::new(7);
    let g = geometry(4, 6);
    let zfs = open(&fs, g);
    let mut written = Vec::new();
    let err = loop {
        let name = format!("f{}", written.len());
        match write(
            &zfs,
            &name,
            &pattern(written.len() as u64, 10_000),
            Lifetime::Long,
        ) {
            Ok(()) => written.push(name),
            Err(e) => break e,
        }
    };
    assert!(err.is_no_space(), "{err}");
    assert!(!written.is_empty());
    for (i, name) in written.iter().enumerate() {
        assert_eq!(read(&zfs, name), pattern(i as u64, 10_000));
    }
    // Room comes back once files are removed.
    for name in &written {
        zfs.remove_file(&dir().join(name)).unwrap();
    }
    zfs.remove_file(&dir().join(format!("f{}", written.len())))
        .unwrap();
    write(&zfs, "again", &pattern(9, 10_000), Lifetime::Long).unwrap();
    assert_no_leaks(&zfs);
}

#[test]
fn geometry_too_small_for_the_journal_is_refused() {
    let fs = FaultFs::new(8);
    let config = ZoneFsConfig::manual();
    let err = ZoneFs::open(fs.clone(), &dir(), geometry(4, 3), config)
        .err()
        .unwrap();
    assert!(err.to_string().contains("too few"), "{err}");
}

#[test]
fn a_failed_journal_write_stops_changes_until_reopen() {
    let fs = FaultFs::new(9);
    let g = geometry(4, 6);
    let zfs = open(&fs, g);
    write(&zfs, "kept", b"synced", Lifetime::Long).unwrap();
    fs.fail_after(0, crate::env::FaultKind::Io, true);
    assert!(zfs.create(&dir().join("lost")).is_err());
    let again = zfs.create(&dir().join("later")).err().unwrap();
    assert!(again.to_string().contains("reopen"), "{again}");
    assert_eq!(read(&zfs, "kept"), b"synced", "reads go on");
    drop(zfs);
    let zfs = open(&fs, g);
    assert_eq!(zfs.list_dir(&dir()).unwrap(), ["kept"]);
    write(&zfs, "later", b"x", Lifetime::Long).unwrap();
    assert_no_leaks(&zfs);
}
