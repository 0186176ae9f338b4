//! The background collector under a steady overwrite, and read-only opens that write nothing.

use super::*;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Watermarks with room between them, and no pacing: the test is about who collects.
fn background_config(high: u32, low: u32) -> ZoneFsConfig {
    ZoneFsConfig {
        gc_high_free_zones: high,
        gc_low_free_zones: low,
        gc_bytes_per_sec: 0,
        read_only: false,
    }
}

#[test]
fn background_gc_keeps_free_zones_above_the_low_watermark_under_overwrite() {
    let fs = FaultFs::new(11);
    // 38 data zones of 4 LBAs; 44 files of 2 LBAs fill 22 of them, so two files share each
    // zone and overwriting one leaves its zone half dead: only collection frees zones. The
    // watermarks leave 12 zones between them.
    let g = geometry(4, 40);
    let (high, low) = (14, 2);
    let zfs = ZoneFs::open(fs.clone(), &dir(), g, background_config(high, low)).unwrap();
    let mut rng = SmallRng::seed_from_u64(11);
    let mut contents: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut fewest_free = usize::MAX;
    for round in 0..600u64 {
        // A steady writer that leaves the collector time: near the low watermark it waits
        // (bounded) for the collector instead of racing it, so a busy machine that does not
        // schedule the collector for a while cannot push the writer into collecting.
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while zfs.free_zones() <= low as usize + 4 && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let name = format!("{:02}.sst", rng.gen_range(0..44));
        let data = pattern(round, 6000);
        write(&zfs, &name, &data, Lifetime::Long).unwrap();
        contents.insert(name, data);
        fewest_free = fewest_free.min(zfs.free_zones());
    }
    let s = zfs.stats();
    assert_eq!(
        (s.gc_foreground_zones, s.gc_foreground_bytes),
        (0, 0),
        "the foreground path ran: {s:?}"
    );
    assert!(s.gc_background_zones > 20, "{s:?}");
    assert_eq!(s.gc_zones_reclaimed, s.gc_background_zones);
    assert_eq!(s.gc_bytes, s.gc_background_bytes);
    assert!(
        fewest_free >= low as usize,
        "free zones fell to {fewest_free}"
    );
    for (name, data) in &contents {
        assert_eq!(&read(&zfs, name), data, "{name}");
    }
    assert_no_leaks(&zfs);
    drop(zfs);
    let zfs = open(&fs, g);
    for (name, data) in &contents {
        assert_eq!(&read(&zfs, name), data, "{name} after reopen");
    }
    assert_no_leaks(&zfs);
}

#[test]
fn below_the_low_watermark_writers_collect_in_the_foreground() {
    let fs = FaultFs::new(12);
    let g = geometry(4, 12);
    // No background collector: only the foreground path can keep zones free.
    let zfs = ZoneFs::open(fs.clone(), &dir(), g, background_config(0, 3)).unwrap();
    // 14 files of 2 LBAs in 10 data zones of 4.
    let mut rng = SmallRng::seed_from_u64(12);
    for round in 0..300u64 {
        let name = format!("{}", rng.gen_range(0..14));
        write(&zfs, &name, &pattern(round, 6000), Lifetime::Long).unwrap();
    }
    let s = zfs.stats();
    assert!(s.gc_foreground_zones > 0, "{s:?}");
    assert_eq!(s.gc_background_zones, 0);
    assert_no_leaks(&zfs);
}

fn device_bytes(fs: &Arc<FaultFs>) -> Vec<u8> {
    read_file(fs.as_ref(), &dir().join(DEVICE_FILE)).unwrap()
}

#[test]
fn a_read_only_open_writes_nothing_and_refuses_changes() {
    let fs = FaultFs::new(13);
    let g = geometry(4, 10);
    let zfs = open(&fs, g);
    write(&zfs, "kept", &pattern(1, 9000), Lifetime::Long).unwrap();
    // Unsynced bytes of a crashed writer leave a zone that no file owns.
    let mut torn = zfs.create(&dir().join("torn")).unwrap();
    torn.append(&pattern(2, 20_000)).unwrap();
    fs.process_crash();
    drop(torn);
    drop(zfs);
    let before = device_bytes(&fs);
    let config = ZoneFsConfig {
        read_only: true,
        ..ZoneFsConfig::for_geometry(&g)
    };
    let ro = ZoneFs::open(fs.clone(), &dir(), g, config).unwrap();
    assert_eq!(read(&ro, "kept"), pattern(1, 9000));
    let image = ro.image();
    assert!(
        image.zones.iter().any(|z| z.role == ZoneRole::Unowned),
        "the crashed writer's zone is shown, not reset"
    );
    image.check().unwrap();
    let refused = ro.create(&dir().join("new")).err().unwrap();
    assert!(refused.to_string().contains("read-only"), "{refused}");
    assert!(ro.remove_file(&dir().join("kept")).is_err());
    drop(ro);
    assert!(
        device_bytes(&fs) == before,
        "the read-only open wrote to the device"
    );
    let gone = ZoneFs::open(
        fs.clone(),
        Path::new("/db/missing"),
        g,
        ZoneFsConfig {
            read_only: true,
            ..ZoneFsConfig::manual()
        },
    );
    assert!(gone.is_err(), "a read-only open creates no device");
    assert!(!fs.exists(Path::new("/db/missing").join(DEVICE_FILE).as_path()));
    // A writable open then resets the unowned zone as usual.
    let zfs = open(&fs, g);
    assert!(zfs.image().check().is_ok());
    assert_no_leaks(&zfs);
}

use crate::zonefs::ZoneRole;
