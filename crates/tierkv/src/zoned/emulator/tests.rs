//! Conformance of the emulator to the zone model of `zoned`: every state transition, every
//! error, restarts, and the crash model.

use super::*;
use crate::env::{AlignedBuf, CrashPolicy, FaultFs, PosixFs};

const LBA: usize = 4096;
const ZONE: u64 = 64 << 10;

fn dev_path() -> &'static Path {
    Path::new("/dev0/zoned")
}

fn fault_fs(seed: u64) -> (Arc<FaultFs>, Arc<dyn Fs>) {
    let fault = FaultFs::new(seed);
    crate::env::create_dir_all_durable(fault.as_ref(), Path::new("/dev0")).unwrap();
    let fs: Arc<dyn Fs> = fault.clone();
    (fault, fs)
}

fn geometry() -> Geometry {
    Geometry::new(ZONE, 8)
}

fn open(fs: &Arc<dyn Fs>, g: Geometry) -> EmulatedZoned {
    EmulatedZoned::open(fs.as_ref(), dev_path(), g, false).unwrap()
}

/// `lbas` LBAs of `byte`, aligned for `O_DIRECT`.
fn block(byte: u8, lbas: usize) -> AlignedBuf {
    let mut b = AlignedBuf::zeroed(LBA * lbas);
    b.as_mut_slice().fill(byte);
    b
}

fn state(dev: &EmulatedZoned, zone: ZoneId) -> ZoneState {
    dev.zone(zone).unwrap().state
}

fn wp(dev: &EmulatedZoned, zone: ZoneId) -> u64 {
    dev.zone(zone).unwrap().write_pointer
}

fn read(dev: &EmulatedZoned, zone: ZoneId, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    dev.read(zone, offset, &mut buf).unwrap();
    buf
}

#[test]
fn a_new_device_reports_every_zone_empty() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    let report = dev.report();
    assert_eq!(report.len(), 8);
    for (i, z) in report.iter().enumerate() {
        assert_eq!(z.id, i as u32);
        assert_eq!(z.start, i as u64 * ZONE);
        assert_eq!(z.capacity, ZONE);
        assert_eq!(z.write_pointer, 0);
        assert_eq!(z.state, ZoneState::Empty);
    }
}

#[test]
fn writes_go_only_at_the_write_pointer() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    dev.write(0, 0, block(1, 2).as_slice(), false).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::ImplicitOpen);
    assert_eq!(wp(&dev, 0), 2 * LBA as u64);
    let err = dev.write(0, 0, block(2, 1).as_slice(), false).unwrap_err();
    assert!(matches!(
        err,
        ZoneError::NotAtWritePointer {
            zone: 0,
            write_pointer: 8192,
            offset: 0
        }
    ));
    let err = dev.write(0, 3 * LBA as u64, block(2, 1).as_slice(), false);
    assert!(matches!(err, Err(ZoneError::NotAtWritePointer { .. })));
    dev.write(0, 2 * LBA as u64, block(2, 1).as_slice(), false)
        .unwrap();
    assert_eq!(
        read(&dev, 0, 0, 3 * LBA),
        [[1u8; 2 * LBA].as_slice(), &[2u8; LBA]].concat()
    );
    assert_eq!(read(&dev, 0, 3 * LBA as u64, LBA), vec![0u8; LBA]);
}

#[test]
fn unaligned_ranges_and_unknown_zones_are_refused() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    assert!(matches!(
        dev.append(0, &[7u8; 100], false),
        Err(ZoneError::BadRange { len: 100, .. })
    ));
    assert!(matches!(
        dev.append(0, &[], false),
        Err(ZoneError::BadRange { .. })
    ));
    assert!(matches!(
        dev.write(0, 1, &[7u8; LBA], false),
        Err(ZoneError::BadRange { offset: 1, .. })
    ));
    let mut buf = vec![0u8; LBA];
    assert!(matches!(
        dev.read(0, ZONE, &mut buf),
        Err(ZoneError::BadRange { .. })
    ));
    assert!(matches!(
        dev.append(8, &[7u8; LBA], false),
        Err(ZoneError::NoSuchZone { zone: 8 })
    ));
    assert!(matches!(
        dev.reset(9),
        Err(ZoneError::NoSuchZone { zone: 9 })
    ));
    assert_eq!(wp(&dev, 0), 0);
}

#[test]
fn append_returns_where_it_landed() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    assert_eq!(dev.append(3, block(1, 1).as_slice(), false).unwrap(), 0);
    assert_eq!(
        dev.append(3, block(2, 3).as_slice(), false).unwrap(),
        LBA as u64
    );
    assert_eq!(
        dev.append(3, block(3, 1).as_slice(), false).unwrap(),
        4 * LBA as u64
    );
    assert_eq!(read(&dev, 3, LBA as u64, 3 * LBA), vec![2u8; 3 * LBA]);
    assert_eq!(state(&dev, 3), ZoneState::ImplicitOpen);
}

#[test]
fn concurrent_appends_land_at_distinct_offsets() {
    let (_, fs) = fault_fs(1);
    let dev = Arc::new(open(&fs, Geometry::new(1 << 20, 2)));
    let threads: Vec<_> = (0..8u8)
        .map(|t| {
            let dev = Arc::clone(&dev);
            std::thread::spawn(move || {
                (0..16)
                    .map(|_| {
                        (
                            dev.append(0, block(t + 1, 2).as_slice(), false).unwrap(),
                            t + 1,
                        )
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut landed: Vec<(u64, u8)> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect();
    landed.sort_unstable();
    for (i, &(offset, byte)) in landed.iter().enumerate() {
        assert_eq!(
            offset,
            (i * 2 * LBA) as u64,
            "appends tile the zone without gaps"
        );
        assert_eq!(read(&dev, 0, offset, 2 * LBA), vec![byte; 2 * LBA]);
    }
    assert_eq!(wp(&dev, 0), 1 << 20);
    assert_eq!(state(&dev, 0), ZoneState::Full);
}

#[test]
fn an_append_that_does_not_fit_writes_nothing() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    let err = dev
        .append(0, &vec![1u8; (128 << 10) + LBA], false)
        .unwrap_err();
    assert!(matches!(err, ZoneError::TooLarge { limit: 131072, .. }));
    for _ in 0..15 {
        dev.append(0, block(1, 1).as_slice(), false).unwrap();
    }
    let err = dev.append(0, block(2, 2).as_slice(), false).unwrap_err();
    assert!(matches!(err, ZoneError::ZoneFull { zone: 0 }), "{err}");
    assert_eq!(wp(&dev, 0), 15 * LBA as u64);
    assert_eq!(read(&dev, 0, 15 * LBA as u64, LBA), vec![0u8; LBA]);
    assert_eq!(
        dev.append(0, block(3, 1).as_slice(), false).unwrap(),
        15 * LBA as u64
    );
    assert_eq!(state(&dev, 0), ZoneState::Full);
    assert!(matches!(
        dev.append(0, block(3, 1).as_slice(), false),
        Err(ZoneError::ZoneFull { zone: 0 })
    ));
    assert!(matches!(
        dev.write(0, ZONE, block(3, 1).as_slice(), false),
        Err(ZoneError::ZoneFull { zone: 0 })
    ));
}

#[test]
fn zone_capacity_below_size_bounds_writes_and_reads_zeros_past_it() {
    let (_, fs) = fault_fs(1);
    let g = Geometry {
        zone_capacity: ZONE - 4 * LBA as u64,
        ..geometry()
    };
    let dev = open(&fs, g);
    dev.append(1, &vec![5u8; 12 * LBA], false).unwrap();
    assert!(matches!(
        dev.append(1, block(5, 1).as_slice(), false),
        Err(ZoneError::ZoneFull { zone: 1 })
    ));
    assert_eq!(state(&dev, 1), ZoneState::Full);
    assert_eq!(read(&dev, 1, ZONE - LBA as u64, LBA), vec![0u8; LBA]);
}

#[test]
fn open_close_transitions() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    // EMPTY -> EXPLICIT_OPEN -> close -> EMPTY (nothing written).
    dev.open(0).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::ExplicitOpen);
    dev.open(0).unwrap();
    dev.close(0).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::Empty);
    assert!(matches!(
        dev.close(0),
        Err(ZoneError::InvalidState {
            zone: 0,
            state: ZoneState::Empty,
            op: "close"
        })
    ));
    // EMPTY -> IMPLICIT_OPEN -> CLOSED -> IMPLICIT_OPEN by a write.
    dev.append(0, block(1, 1).as_slice(), false).unwrap();
    dev.close(0).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::Closed);
    dev.close(0).unwrap();
    assert_eq!(wp(&dev, 0), LBA as u64);
    dev.append(0, block(1, 1).as_slice(), false).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::ImplicitOpen);
    // IMPLICIT_OPEN -> EXPLICIT_OPEN, which a write keeps explicit; CLOSED -> EXPLICIT_OPEN.
    dev.open(0).unwrap();
    dev.append(0, block(1, 1).as_slice(), false).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::ExplicitOpen);
    dev.close(0).unwrap();
    dev.open(0).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::ExplicitOpen);
    dev.finish(0).unwrap();
    for op in ["open", "close"] {
        let r = if op == "open" {
            dev.open(0)
        } else {
            dev.close(0)
        };
        assert!(
            matches!(
                r,
                Err(ZoneError::InvalidState {
                    state: ZoneState::Full,
                    ..
                })
            ),
            "{op} of a FULL zone"
        );
    }
}

#[test]
fn finish_makes_any_writable_zone_full() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    dev.finish(0).unwrap(); // EMPTY
    dev.append(1, block(1, 1).as_slice(), false).unwrap();
    dev.finish(1).unwrap(); // IMPLICIT_OPEN
    dev.open(2).unwrap();
    dev.finish(2).unwrap(); // EXPLICIT_OPEN
    dev.append(3, block(1, 1).as_slice(), false).unwrap();
    dev.close(3).unwrap();
    dev.finish(3).unwrap(); // CLOSED
    dev.finish(3).unwrap(); // FULL: no change
    for z in 0..4 {
        assert_eq!(state(&dev, z), ZoneState::Full);
        assert_eq!(wp(&dev, z), ZONE);
        assert!(matches!(
            dev.append(z, block(1, 1).as_slice(), false),
            Err(ZoneError::ZoneFull { .. })
        ));
    }
    assert_eq!(read(&dev, 1, 0, LBA), vec![1u8; LBA]);
}

#[test]
fn reset_empties_a_zone_and_it_reads_zeros() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    dev.reset(0).unwrap(); // EMPTY: no change
    dev.append(0, &vec![9u8; 5 * LBA], false).unwrap();
    dev.finish(0).unwrap();
    dev.reset(0).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::Empty);
    assert_eq!(wp(&dev, 0), 0);
    assert_eq!(read(&dev, 0, 0, 5 * LBA), vec![0u8; 5 * LBA]);
    assert_eq!(dev.append(0, block(4, 1).as_slice(), false).unwrap(), 0);
    dev.reset(0).unwrap(); // IMPLICIT_OPEN
    assert_eq!(state(&dev, 0), ZoneState::Empty);
    drop(dev);
    let dev = open(&fs, geometry());
    assert_eq!(state(&dev, 0), ZoneState::Empty);
    assert_eq!(read(&dev, 0, 0, LBA), vec![0u8; LBA]);
}

#[test]
fn the_open_limit_closes_implicitly_opened_zones_first() {
    let (_, fs) = fault_fs(1);
    let g = Geometry {
        max_open: 2,
        max_active: 3,
        ..geometry()
    };
    let dev = open(&fs, g);
    dev.append(0, block(1, 1).as_slice(), false).unwrap();
    dev.append(1, block(1, 1).as_slice(), false).unwrap();
    // A third open zone closes the oldest implicitly opened one.
    dev.append(2, block(1, 1).as_slice(), false).unwrap();
    assert_eq!(state(&dev, 0), ZoneState::Closed);
    assert_eq!(state(&dev, 1), ZoneState::ImplicitOpen);
    assert_eq!(state(&dev, 2), ZoneState::ImplicitOpen);
    // Three active zones: a fourth cannot become active, by write or by open.
    assert!(matches!(
        dev.append(3, block(1, 1).as_slice(), false),
        Err(ZoneError::TooManyActive { zone: 3 })
    ));
    assert!(matches!(
        dev.open(3),
        Err(ZoneError::TooManyActive { zone: 3 })
    ));
    assert_eq!(wp(&dev, 3), 0);
    // Explicitly opened zones are never closed for another.
    dev.open(1).unwrap();
    dev.open(2).unwrap();
    assert!(matches!(
        dev.append(0, block(1, 1).as_slice(), false),
        Err(ZoneError::TooManyOpen { zone: 0 })
    ));
    assert!(matches!(
        dev.open(0),
        Err(ZoneError::TooManyOpen { zone: 0 })
    ));
    // Finishing releases both resources.
    dev.finish(1).unwrap();
    dev.append(0, block(1, 1).as_slice(), false).unwrap();
    dev.finish(0).unwrap();
    dev.append(3, block(1, 1).as_slice(), false).unwrap();
    assert_eq!(state(&dev, 3), ZoneState::ImplicitOpen);
}

#[test]
fn read_only_and_offline_zones() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    dev.append(0, block(6, 1).as_slice(), false).unwrap();
    dev.set_condition(0, ZoneState::ReadOnly).unwrap();
    dev.set_condition(1, ZoneState::Offline).unwrap();
    for (z, s) in [(0, ZoneState::ReadOnly), (1, ZoneState::Offline)] {
        assert_eq!(state(&dev, z), s);
        assert!(matches!(
            dev.append(z, block(1, 1).as_slice(), false),
            Err(ZoneError::InvalidState { op: "write", .. })
        ));
        for r in [dev.open(z), dev.close(z), dev.finish(z), dev.reset(z)] {
            assert!(matches!(r, Err(ZoneError::InvalidState { .. })));
        }
    }
    assert_eq!(read(&dev, 0, 0, LBA), vec![6u8; LBA]);
    let mut buf = vec![0u8; LBA];
    assert!(matches!(
        dev.read(1, 0, &mut buf),
        Err(ZoneError::InvalidState { op: "read", .. })
    ));
    drop(dev);
    let dev = open(&fs, geometry());
    assert_eq!(state(&dev, 0), ZoneState::ReadOnly);
    assert_eq!(state(&dev, 1), ZoneState::Offline);
}

#[test]
fn the_write_pointer_after_a_restart_comes_from_the_media() {
    let (fault, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    dev.append(0, block(1, 3).as_slice(), false).unwrap();
    dev.open(1).unwrap();
    dev.append(2, &vec![2u8; ZONE as usize], false).unwrap();
    dev.append(3, block(3, 1).as_slice(), false).unwrap();
    dev.finish(3).unwrap();
    dev.append(4, block(4, 1).as_slice(), false).unwrap();
    dev.close(4).unwrap();
    fault.process_crash();
    let dev = open(&fs, geometry());
    let expect = [
        (ZoneState::Closed, 3 * LBA as u64),
        (ZoneState::Empty, 0),
        (ZoneState::Full, ZONE),
        (ZoneState::Full, ZONE),
        (ZoneState::Closed, LBA as u64),
        (ZoneState::Empty, 0),
    ];
    for (z, (s, p)) in expect.into_iter().enumerate() {
        assert_eq!(
            (state(&dev, z as u32), wp(&dev, z as u32)),
            (s, p),
            "zone {z}"
        );
    }
    // Writing continues at the recovered write pointer.
    assert_eq!(
        dev.append(0, block(1, 1).as_slice(), false).unwrap(),
        3 * LBA as u64
    );
    assert_eq!(state(&dev, 0), ZoneState::ImplicitOpen);
}

#[test]
fn power_loss_keeps_each_unflushed_append_whole_or_not() {
    let mut lost_some = false;
    let mut kept_some = false;
    for seed in 0..32 {
        let (fault, fs) = fault_fs(seed);
        let dev = open(&fs, geometry());
        dev.append(0, block(1, 2).as_slice(), false).unwrap();
        dev.flush().unwrap();
        let fua = dev.append(1, block(9, 1).as_slice(), true).unwrap();
        let unflushed: Vec<u64> = (2..8u8)
            .map(|b| dev.append(0, block(b, 2).as_slice(), false).unwrap())
            .collect();
        fault.crash(CrashPolicy::KeepRandomWrites);
        let dev = open(&fs, geometry());
        assert_eq!(
            read(&dev, 0, 0, 2 * LBA),
            vec![1u8; 2 * LBA],
            "flushed append lost"
        );
        assert_eq!(read(&dev, 1, fua, LBA), vec![9u8; LBA], "FUA append lost");
        for (i, &at) in unflushed.iter().enumerate() {
            let got = read(&dev, 0, at, 2 * LBA);
            let byte = i as u8 + 2;
            if got == vec![byte; 2 * LBA] {
                kept_some = true;
            } else {
                assert_eq!(got, vec![0u8; 2 * LBA], "seed {seed}: append {i} torn");
                lost_some = true;
            }
        }
    }
    assert!(lost_some && kept_some, "the sweep saw both outcomes");
}

#[test]
fn power_loss_protection_keeps_every_completed_append() {
    for seed in 0..8 {
        let (fault, fs) = fault_fs(seed);
        let dev = EmulatedZoned::open(fs.as_ref(), dev_path(), geometry(), true).unwrap();
        for b in 1..6u8 {
            dev.append(0, block(b, 1).as_slice(), false).unwrap();
        }
        fault.crash(CrashPolicy::KeepRandomWrites);
        let dev = open(&fs, geometry());
        assert_eq!(wp(&dev, 0), 5 * LBA as u64);
        for b in 1..6u8 {
            assert_eq!(
                read(&dev, 0, (b as u64 - 1) * LBA as u64, LBA),
                vec![b; LBA]
            );
        }
    }
}

#[test]
fn bad_geometry_is_refused_naming_the_device() {
    let (_, fs) = fault_fs(1);
    let cases = [
        Geometry {
            zone_size: ZONE + 100,
            zone_capacity: ZONE + 100,
            ..geometry()
        },
        Geometry {
            zone_capacity: ZONE - 1,
            ..geometry()
        },
        Geometry {
            zone_capacity: 2 * ZONE,
            ..geometry()
        },
        Geometry {
            lba: 1000,
            ..geometry()
        },
        Geometry {
            append_limit: 1000,
            ..geometry()
        },
        Geometry {
            zones: 0,
            ..geometry()
        },
        Geometry {
            max_open: 5,
            max_active: 4,
            ..geometry()
        },
    ];
    for g in cases {
        let err = EmulatedZoned::open(fs.as_ref(), dev_path(), g, false)
            .err()
            .expect("refused");
        let msg = err.to_string();
        assert!(matches!(err, Error::InvalidArgument(_)), "{msg}");
        assert!(msg.contains("/dev0/zoned"), "{msg}");
    }
    assert!(!fs.exists(dev_path()), "nothing formatted");
}

#[test]
fn a_file_that_is_not_a_zoned_device_is_refused() {
    let (fault, fs) = fault_fs(1);
    fault.write_raw(dev_path(), &vec![7u8; 1 << 20]);
    let err = EmulatedZoned::open(fs.as_ref(), dev_path(), geometry(), false)
        .err()
        .unwrap();
    assert!(matches!(err, Error::InvalidArgument(_)));
    assert!(
        err.to_string()
            .contains("/dev0/zoned is not a tierkv zoned device"),
        "{err}"
    );
    fault.write_raw(dev_path(), b"short");
    assert!(EmulatedZoned::open(fs.as_ref(), dev_path(), geometry(), false).is_err());
}

#[test]
fn reopening_with_another_geometry_is_refused() {
    let (_, fs) = fault_fs(1);
    drop(open(&fs, geometry()));
    let err = EmulatedZoned::open(fs.as_ref(), dev_path(), Geometry::new(ZONE, 4), false)
        .err()
        .unwrap();
    assert!(err.to_string().contains("was formatted with"), "{err}");
    // The limits are not part of the format.
    let g = Geometry {
        max_open: 4,
        max_active: 6,
        ..geometry()
    };
    EmulatedZoned::open(fs.as_ref(), dev_path(), g, false).unwrap();
}

#[test]
fn a_damaged_superblock_is_corruption() {
    let (fault, fs) = fault_fs(1);
    drop(open(&fs, geometry()));
    fault.flip_bit(dev_path(), 20, 1);
    let err = EmulatedZoned::open(fs.as_ref(), dev_path(), geometry(), false)
        .err()
        .unwrap();
    assert!(err.is_corruption(), "{err}");
}

#[test]
fn on_a_real_file_appends_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let fs: Arc<dyn Fs> = Arc::new(PosixFs::new());
    let path = dir.path().join("zoned");
    let dev = EmulatedZoned::open(fs.as_ref(), &path, geometry(), false).unwrap();
    let a = dev.append(0, block(1, 2).as_slice(), true).unwrap();
    let b = dev.append(0, block(2, 1).as_slice(), false).unwrap();
    dev.flush().unwrap();
    drop(dev);
    let dev = EmulatedZoned::open(fs.as_ref(), &path, geometry(), false).unwrap();
    assert_eq!((a, b), (0, 2 * LBA as u64));
    assert_eq!(wp(&dev, 0), 3 * LBA as u64);
    assert_eq!(read(&dev, 0, b, LBA), vec![2u8; LBA]);
}

#[test]
fn zone_errors_become_io_errors_naming_the_device() {
    let (_, fs) = fault_fs(1);
    let dev = open(&fs, geometry());
    assert_eq!(dev.geometry().device_bytes(), 8 * ZONE);
    dev.finish(0).unwrap();
    let err = dev.append(0, block(1, 1).as_slice(), false).unwrap_err();
    let err = err.into_error(dev.path());
    assert!(matches!(&err, Error::Io { op: "zone", .. }));
    assert_eq!(
        err.to_string(),
        "I/O error: zone /dev0/zoned: zone 0 is full"
    );
}

#[test]
fn a_superblock_whose_geometry_overflows_is_refused_by_name() {
    let (fault, fs) = fault_fs(0);
    // 2^40-byte zones, 2^24 of them: the device would need 2^64 bytes.
    let mut g = Geometry::new(1 << 40, 1 << 24);
    g.lba = 4096;
    let mut sb = encode_superblock(&g);
    sb.resize(8192, 0);
    fault.write_raw(dev_path(), &sb);
    match EmulatedZoned::open_existing(fs.as_ref(), dev_path(), false) {
        Err(Error::InvalidArgument(msg)) => {
            assert!(msg.contains("/dev0/zoned"), "{msg}");
            assert!(msg.contains("do not fit"), "{msg}");
        }
        other => panic!("expected InvalidArgument, got {:?}", other.err()),
    }
    assert_eq!(g.file_bytes(), None);
    assert_eq!(geometry().file_bytes(), Some(4096 * 2 + 8 * ZONE));
}
