//! Files removed, appended and created while the collector copies their zone: the copy runs
//! without the metadata lock, and only the files left unchanged are moved.

use super::*;
use crate::zonefs::gc::hooks;
use std::sync::mpsc;

/// How long a file operation run during a copy may take before the test calls it blocked.
const NOT_BLOCKED: Duration = Duration::from_secs(20);

/// Four one-LBA files `a`..`d` fill zone 2; `d` is removed, so zone 2 is the only zone the
/// collector can take (three live LBAs of four).
fn one_collectable_zone(zfs: &ZoneFs) {
    for (i, name) in ["a", "b", "c", "d"].into_iter().enumerate() {
        write(zfs, name, &pattern(i as u64, 3000), Lifetime::Long).unwrap();
    }
    assert_eq!(zones_of(zfs, "a"), [2]);
    assert_eq!(zones_of(zfs, "d"), [2]);
    zfs.remove_file(&dir().join("d")).unwrap();
}

/// Runs `op` on another thread during the copy and fails the test if it does not finish in
/// time: the collector must not hold a lock a file operation needs.
fn run_during_copy(zfs: &Arc<ZoneFs>, op: fn(&ZoneFs) -> Result<()>) {
    let zfs = Arc::clone(zfs);
    let mut ran = false;
    hooks::set_after_copy(move || {
        if std::mem::replace(&mut ran, true) {
            return;
        }
        let (tx, rx) = mpsc::channel();
        let zfs = Arc::clone(&zfs);
        std::thread::spawn(move || {
            let result = op(&zfs);
            // NB: gone before the answer, so the test may take the file system back after.
            drop(zfs);
            tx.send(result).unwrap();
        });
        let done = rx
            .recv_timeout(NOT_BLOCKED)
            .expect("blocked by the collection");
        done.unwrap();
    });
}

fn b_appended() -> Vec<u8> {
    let mut b = pattern(1, 3000);
    b.extend(pattern(7, 5000));
    b
}

/// Removes `a`, appends to `b` (synced) and creates `e`.
fn remove_append_create(zfs: &ZoneFs) -> Result<()> {
    zfs.remove_file(&dir().join("a"))?;
    let mut b = zfs.open_append(&dir().join("b"))?;
    b.append(&pattern(7, 5000))?;
    b.sync()?;
    b.close()?;
    write(zfs, "e", &pattern(8, 6000), Lifetime::Medium)
}

fn assert_files_after_the_race(zfs: &ZoneFs) {
    assert!(!zfs.exists(&dir().join("a")));
    assert_eq!(read(zfs, "b"), b_appended());
    assert_eq!(read(zfs, "c"), pattern(2, 3000));
    assert_eq!(read(zfs, "e"), pattern(8, 6000));
    assert_no_leaks(zfs);
}

#[test]
fn a_file_removed_or_appended_during_the_copy_keeps_its_bytes_and_the_others_move() {
    let fs = FaultFs::new(41);
    let g = geometry(4, 8);
    let zfs = Arc::new(open(&fs, g));
    one_collectable_zone(&zfs);
    run_during_copy(&zfs, remove_append_create);
    let emptied = zfs.collect_garbage().unwrap();
    hooks::clear_after_copy();

    // `b` changed during the copy: its copy was dropped and its first extent keeps zone 2
    // live; `c` was unchanged and moved; `a`'s copy went with the file.
    assert_eq!(emptied, 0);
    assert_eq!(zones_of(&zfs, "b")[0], 2);
    assert!(!zones_of(&zfs, "c").contains(&2));
    let (slots, _) = zfs.zone_map();
    assert_eq!(slots[2].state, ZoneUse::Full);
    assert_eq!(slots[2].live, LBA, "only b's first LBA is left in zone 2");
    assert_eq!(zfs.stats().gc_bytes, 3 * LBA, "a, b and c were copied");
    assert_files_after_the_race(&zfs);

    let zfs = Arc::into_inner(zfs).expect("the hook is gone");
    drop(zfs);
    let zfs = open(&fs, g);
    assert_files_after_the_race(&zfs);
    // Nothing races the next collection: `b` moves and zone 2 is reset.
    let reclaimed = zfs.stats().gc_zones_reclaimed;
    assert!(zfs.collect_garbage().unwrap() >= 1);
    assert!(zfs.stats().gc_zones_reclaimed > reclaimed);
    assert_files_after_the_race(&zfs);
    fs.crash(CrashPolicy::DropUnsynced);
    let zfs = open(&fs, g);
    assert_files_after_the_race(&zfs);
}

/// Removes every live file of zone 2.
fn remove_all(zfs: &ZoneFs) -> Result<()> {
    for name in ["a", "b", "c"] {
        zfs.remove_file(&dir().join(name))?;
    }
    Ok(())
}

#[test]
fn a_zone_whose_files_all_go_during_the_copy_is_reset_once_the_copy_is_done() {
    let fs = FaultFs::new(42);
    let g = geometry(4, 8);
    let zfs = Arc::new(open(&fs, g));
    one_collectable_zone(&zfs);
    run_during_copy(&zfs, remove_all);
    let emptied = zfs.collect_garbage().unwrap();
    hooks::clear_after_copy();

    assert_eq!(emptied, 1, "the victim had no live byte left and was reset");
    assert_eq!(zfs.stats().live_bytes, 0);
    // The victim and the zone that took the dropped copies are both free again.
    let (slots, _) = zfs.zone_map();
    let data_zones = &slots[META_ZONES.len()..];
    assert!(
        data_zones.iter().all(|s| s.state == ZoneUse::Free),
        "{slots:?}"
    );
    assert!(zfs.list_dir(&dir()).unwrap().is_empty());
    assert_no_leaks(&zfs);
    drop(Arc::into_inner(zfs).expect("the hook is gone"));
    fs.crash(CrashPolicy::DropUnsynced);
    let zfs = open(&fs, g);
    assert!(zfs.list_dir(&dir()).unwrap().is_empty());
    assert_no_leaks(&zfs);
    write(&zfs, "again", &pattern(9, 20_000), Lifetime::Long).unwrap();
    assert_eq!(read(&zfs, "again"), pattern(9, 20_000));
}
