//! Views of a zoned tier: from a running file system and from the device alone, and the
//! consistency check over them.

use super::*;
use crate::zonefs::{ZoneRole, ZonedDir, ZonedTierImage};

fn corruption_offset(image: &ZonedTierImage) -> (u64, String) {
    match image.check() {
        Err(Error::Corruption { file, offset, what }) => {
            assert_eq!(file, dir().join(DEVICE_FILE), "{what}");
            (offset, what)
        }
        other => panic!("expected Corruption, got {other:?}"),
    }
}

#[test]
fn a_running_file_system_and_its_device_show_the_same_files_and_zones() {
    let fs = FaultFs::new(1);
    let g = geometry(4, 10);
    let zfs = open(&fs, g);
    let big = pattern(1, 50_000);
    write(&zfs, "000001.sst", &big, Lifetime::Long).unwrap();
    write(&zfs, "000002.sst", &pattern(2, 100), Lifetime::Medium).unwrap();
    write(&zfs, "000003.sst", &pattern(3, 9000), Lifetime::Long).unwrap();
    zfs.remove_file(&dir().join("000003.sst")).unwrap();

    let live = zfs.image();
    let summary = live.check().unwrap();
    assert_eq!(summary.files, 2);
    let names: Vec<&str> = live.files.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["000001.sst", "000002.sst"]);
    assert_eq!(live.files[0].size, 50_000);
    // 50,000 bytes need 13 LBAs over zones of 4: at least four zones.
    assert!(live.files[0].extents.len() >= 4, "{:?}", live.files[0]);
    for e in &live.files[0].extents {
        let z = &live.zones[e.zone as usize];
        assert!(z.files.contains(&"000001.sst".to_string()), "{z:?}");
    }
    let used: u64 = live.zones.iter().map(|z| z.live_bytes).sum();
    assert_eq!(summary.live_bytes, used);
    assert_eq!(
        used,
        14 * LBA,
        "13 LBAs of the big file and 1 of the small one"
    );
    assert_eq!(live.zones[0].role, ZoneRole::Metadata);

    // The device alone, read while the file system is open: same files, same owners.
    let offline = ZonedDir::open(fs.as_ref(), &dir()).unwrap();
    let image = offline.image();
    assert_eq!(image.files, live.files);
    assert_eq!(image.geometry.zones, 10);
    assert_eq!(image.geometry.zone_size, 4 * LBA);
    for (a, b) in image.zones.iter().zip(&live.zones) {
        assert_eq!(
            (a.id, a.live_bytes, &a.files),
            (b.id, b.live_bytes, &b.files)
        );
        assert_eq!(a.counted_live_bytes, None);
    }
    image.check().unwrap();
    let file = offline.open_read("000001.sst").unwrap();
    let mut back = vec![0u8; big.len()];
    file.read_exact_at(0, &mut back).unwrap();
    assert_eq!(back, big);
    let mut tail = vec![0u8; 10];
    assert!(file.read_exact_at(big.len() as u64 - 5, &mut tail).is_err());
    assert!(offline.open_read("000003.sst").is_err(), "removed");
}

#[test]
fn unsynced_data_is_unowned_on_the_device_and_no_problem_there() {
    let fs = FaultFs::new(2);
    let zfs = open(&fs, geometry(4, 8));
    write(&zfs, "000001.sst", &pattern(1, 5000), Lifetime::Long).unwrap();
    let mut w = zfs
        .create_with_lifetime(&dir().join("000002.sst"), Lifetime::Extreme)
        .unwrap();
    w.append(&pattern(2, 3 * LBA as usize)).unwrap();
    let offline = ZonedDir::open(fs.as_ref(), &dir()).unwrap();
    let image = offline.image();
    let unowned: Vec<_> = image
        .zones
        .iter()
        .filter(|z| z.role == ZoneRole::Unowned)
        .collect();
    assert_eq!(unowned.len(), 1, "{:?}", image.zones);
    assert_eq!(unowned[0].write_pointer, 3 * LBA);
    let pending = image.files.iter().find(|f| f.name == "000002.sst").unwrap();
    assert_eq!(
        (pending.size, pending.extents.len()),
        (0, 0),
        "never synced"
    );
    image.check().unwrap();
    // The running file system knows the writer holds that zone.
    let live = zfs.image();
    assert_eq!(live.zones[unowned[0].id as usize].role, ZoneRole::Writing);
    live.check().unwrap();
}

#[test]
fn the_check_names_leaks_miscounted_live_bytes_overlaps_and_short_files() {
    let fs = FaultFs::new(3);
    let zfs = open(&fs, geometry(4, 8));
    write(
        &zfs,
        "000001.sst",
        &pattern(1, 2 * LBA as usize),
        Lifetime::Long,
    )
    .unwrap();
    write(&zfs, "000002.sst", &pattern(2, 100), Lifetime::Long).unwrap();
    let good = zfs.image();
    good.check().unwrap();
    let zone = good.files[0].extents[0].zone;
    let zone_start = u64::from(zone) * 4 * LBA;

    let mut miscounted = good.clone();
    miscounted.zones[zone as usize].counted_live_bytes = Some(LBA);
    let (offset, what) = corruption_offset(&miscounted);
    assert_eq!(offset, zone_start);
    assert!(what.contains("live bytes counted"), "{what}");

    let mut leaked = good.clone();
    let free = leaked
        .zones
        .iter()
        .position(|z| z.role == ZoneRole::Free)
        .unwrap();
    leaked.zones[free].role = ZoneRole::Unowned;
    leaked.zones[free].write_pointer = LBA;
    let (offset, what) = corruption_offset(&leaked);
    assert_eq!(offset, free as u64 * 4 * LBA);
    assert!(what.contains("leaked"), "{what}");

    let mut overlapping = good.clone();
    overlapping.files[1].extents[0] = overlapping.files[0].extents[0];
    overlapping.files[1].extents[0].len = 100;
    let (_, what) = corruption_offset(&overlapping);
    assert!(what.contains("overlap"), "{what}");

    let mut short = good.clone();
    short.files[0].size += 1;
    let (offset, what) = corruption_offset(&short);
    assert_eq!(offset, zone_start);
    assert!(
        what.contains("000001.sst") && what.contains("its size is"),
        "{what}"
    );

    let mut both = short.clone();
    both.zones[zone as usize].counted_live_bytes = Some(0);
    let (_, what) = corruption_offset(&both);
    assert!(what.ends_with("(and 1 more problem)"), "{what}");

    let mut in_meta = good;
    in_meta.files[1].extents[0].zone = 1;
    let (_, what) = corruption_offset(&in_meta);
    assert!(what.contains("metadata zone"), "{what}");
}

#[test]
fn a_directory_without_a_device_is_not_zoned() {
    let fs = FaultFs::new(4);
    fs.create_dir_all(&dir()).unwrap();
    assert!(!ZonedDir::is_zoned(fs.as_ref(), &dir()));
    assert!(matches!(
        ZonedDir::open(fs.as_ref(), &dir()),
        Err(Error::InvalidArgument(_))
    ));
    let _zfs = open(&fs, geometry(4, 6));
    assert!(ZonedDir::is_zoned(fs.as_ref(), &dir()));
    let g = ZonedDir::geometry(fs.as_ref(), &dir()).unwrap();
    assert_eq!((g.zone_size, g.zones, g.lba), (4 * LBA, 6, LBA));
}
